use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: usize>(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, BLOCK);
    store(y + offs, load(x + offs));
}

fn main() {}
