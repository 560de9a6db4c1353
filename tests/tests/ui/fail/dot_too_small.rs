use ferrotile::prelude::*;

#[kernel]
fn k(a: Ptr<f32>, b: Ptr<f32>, c: Ptr<f32>) {
    let r = expand_dims(arange(0, 8), 1) * 8;
    let cols = expand_dims(arange(0, 8), 0);
    store(c + r + cols, dot(load(a + r + cols), load(b + r + cols)));
}

fn main() {}
