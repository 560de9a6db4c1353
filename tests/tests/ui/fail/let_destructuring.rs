use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, BLOCK);
    let (a, b) = (load(x + offs), load(y + offs));
    store(y + offs, a + b);
}

fn main() {}
