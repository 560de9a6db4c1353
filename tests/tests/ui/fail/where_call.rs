use ferrotile::prelude::*;

#[kernel]
fn relu(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, 128);
    let v = load(x + offs);
    store(y + offs, where(v > 0.0, v, 0.0));
}

fn main() {}
