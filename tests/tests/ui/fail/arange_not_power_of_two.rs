use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, 100);
    store(y + offs, load(x + offs));
}

fn main() {}
