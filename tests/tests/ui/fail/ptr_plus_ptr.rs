use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, BLOCK);
    let p = x + y;
    store(p + offs, 0.0);
}

fn main() {}
