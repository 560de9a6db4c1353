use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let offs = arange(0, n);
    store(y + offs, load(x + offs));
}

fn main() {}
