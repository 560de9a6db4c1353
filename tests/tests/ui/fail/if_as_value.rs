use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, relu: bool) {
    let offs = arange(0, BLOCK);
    let v = load(x + offs);
    let r = if relu { maximum(v, 0.0) } else { v };
    store(y + offs, r);
}

fn main() {}
