use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let offs = arange(0, BLOCK);
    let mut acc = 0.0;
    for start in (0..n).step_by(BLOCK) {
        acc = acc + load(x + start + offs, start + offs < n, 0.0);
    }
    store(y, sum(acc, 0));
}

fn main() {}
