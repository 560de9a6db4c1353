use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f16>, y: Ptr<f32>, n: i32) {
    let offs = arange(0, BLOCK);
    let mut acc = zeros([BLOCK], f32);
    for start in (0..n).step_by(BLOCK) {
        acc = load(x + start + offs, start + offs < n, 0.0);
    }
    store(y + offs, acc);
}

fn main() {}
