use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let v = load(x + arange(0, 64));
    store(y + arange(0, 64), gelu(v));
}

fn main() {}
