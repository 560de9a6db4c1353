use ferrotile::prelude::*;

#[kernel]
fn k(a: Ptr<bf16>, b: Ptr<bf16>, c: Ptr<f32>) {
    let r = expand_dims(arange(0, 16), 1) * 16;
    let cols = expand_dims(arange(0, 16), 0);
    let acc = dot_tf32_trunc(load(a + r + cols), load(b + r + cols), zeros([16, 16], f32));
    store(c + r + cols, acc);
}

fn main() {}
