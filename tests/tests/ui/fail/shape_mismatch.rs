use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>) {
    let offs = arange(0, 16) + arange(0, 32);
    store(x + offs, 0.0);
}

fn main() {}
