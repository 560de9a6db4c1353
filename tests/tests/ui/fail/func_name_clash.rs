use ferrotile::prelude::*;

mod a {
    use ferrotile::prelude::*;

    #[func]
    fn scale(x: Tile) -> Tile {
        x * 2.0
    }

    #[func]
    pub fn twice(x: Tile) -> Tile {
        scale(x)
    }
}

use a::twice;

#[func]
fn scale(x: Tile) -> Tile {
    x * 3.0
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let v = load(x + arange(0, 64));
    store(y + arange(0, 64), twice(v) + scale(v));
}

fn main() {}
