use ferrotile::prelude::*;

#[func]
fn twice(x: Tile) {
    x * 2.0
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, 64);
    twice(load(x + offs));
    store(y + offs, load(x + offs));
}

fn main() {}
