use ferrotile::prelude::*;

#[func]
fn to_out<U: Float>(x: Tile) -> Tile {
    x.to(U)
}

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<i32>) {
    let offs = arange(0, 64);
    store(y + offs, to_out::<i32>(load(x + offs)));
}

fn main() {}
