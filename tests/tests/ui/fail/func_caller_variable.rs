use ferrotile::prelude::*;

#[func]
fn masked(x: Tile) -> Tile {
    select(offs < n, x, 0.0)
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let offs = arange(0, 64);
    let v = load(x + offs, offs < n, 0.0);
    store(y + offs, masked(v), offs < n);
}

fn main() {}
