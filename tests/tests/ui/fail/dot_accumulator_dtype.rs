use ferrotile::prelude::*;

#[kernel]
fn k(a: Ptr<f16>, b: Ptr<f16>, c: Ptr<f16>) {
    let r = expand_dims(arange(0, 16), 1) * 16;
    let cols = expand_dims(arange(0, 16), 0);
    let mut acc = zeros([16, 16], f16);
    for i in 0..4 {
        acc = dot(load(a + r + cols), load(b + r + cols), acc);
    }
    store(c + r + cols, acc);
}

fn main() {}
