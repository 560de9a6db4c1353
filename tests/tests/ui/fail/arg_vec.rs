use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>, y: Vec<f32>) {
    let offs = arange(0, BLOCK);
    store(y + offs, load(x + offs));
}

fn main() {}
