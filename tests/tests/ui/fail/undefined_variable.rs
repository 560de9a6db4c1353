use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>) {
    let offsets = arange(0, BLOCK);
    let v = load(x + offsets);
    store(y + offset, v);
}

fn main() {}
