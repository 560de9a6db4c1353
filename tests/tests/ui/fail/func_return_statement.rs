use ferrotile::prelude::*;

#[func]
fn relu(x: Tile) -> Tile {
    return maximum(x, 0.0);
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, 64);
    store(y + offs, relu(load(x + offs)));
}

fn main() {}
