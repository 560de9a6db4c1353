use ferrotile::prelude::*;

#[func]
fn min_max(x: Tile) -> (Tile, Tile) {
    (min(x, axis = 0), max(x, axis = 0))
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let v = load(x + arange(0, 64));
    let (lo, hi, mid) = min_max(v);
    store(y, lo + hi + mid);
}

fn main() {}
