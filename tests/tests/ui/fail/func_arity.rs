use ferrotile::prelude::*;

#[func]
fn axpy(a: Tile, x: Tile, y: Tile) -> Tile {
    a * x + y
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let v = load(x + arange(0, 64));
    store(y + arange(0, 64), axpy(2.0, v));
}

fn main() {}
