use ferrotile::prelude::*;

#[func]
fn relu(x: Tile) -> Tile {
    maximum(x, 0.0)
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, 64);
    let v = relu(load(x + offs));
    store(y + offs, v.relu());
}

fn main() {}
