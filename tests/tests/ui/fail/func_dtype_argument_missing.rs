use ferrotile::prelude::*;

#[func]
fn to_out<U: Float>(x: Tile) -> Tile {
    x.to(U)
}

#[kernel]
fn k<T: Float>(x: Ptr<f32>, y: Ptr<T>) {
    let v = load(x + arange(0, 64));
    store(y + arange(0, 64), to_out(v));
}

fn main() {}
