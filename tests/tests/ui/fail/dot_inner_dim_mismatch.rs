use ferrotile::prelude::*;

#[kernel]
fn k(c: Ptr<f32>) {
    let a = zeros([32, 16], f32);
    let b = zeros([32, 32], f32);
    let acc = dot(a, b);
    let offs = expand_dims(arange(0, 32), 1) * 32 + expand_dims(arange(0, 32), 0);
    store(c + offs, acc);
}

fn main() {}
