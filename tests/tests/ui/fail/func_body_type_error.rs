use ferrotile::prelude::*;

#[func]
fn add_rows(x: Tile, y: Tile) -> Tile {
    x + y
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let a = load(x + arange(0, 64));
    let b = load(x + arange(0, 32));
    store(y + arange(0, 64), add_rows(a, b));
}

fn main() {}
