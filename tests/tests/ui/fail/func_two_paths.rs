use ferrotile::prelude::*;

mod a {
    use ferrotile::prelude::*;

    #[func]
    pub fn scale(x: Tile) -> Tile {
        x * 2.0
    }
}

#[func]
fn scale(x: Tile) -> Tile {
    x * 3.0
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let v = load(x + arange(0, 64));
    store(y + arange(0, 64), a::scale(v) + scale(v));
}

fn main() {}
