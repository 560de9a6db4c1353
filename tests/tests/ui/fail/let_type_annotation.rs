use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let v: f32 = load(x);
    store(y, v);
}

fn main() {}
