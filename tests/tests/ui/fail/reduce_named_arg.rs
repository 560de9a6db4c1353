use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, 128);
    store(y, sum(load(x + offs), dim = 0));
}

fn main() {}
