use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(y: Ptr<f32>) {
    let offs = arange(0, BLOCK);
    store(y + offs, exp(offs));
}

fn main() {}
