use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let v = load(x + arange(0, 64));
    let m = reshape(v, [16, 8]);
    store(y + arange(0, 128), reshape(m, [128]));
}

fn main() {}
