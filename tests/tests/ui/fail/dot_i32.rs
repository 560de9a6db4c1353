use ferrotile::prelude::*;

#[kernel]
fn k(a: Ptr<i32>, b: Ptr<i32>, c: Ptr<i32>) {
    let r = expand_dims(arange(0, 16), 1) * 16;
    let cols = expand_dims(arange(0, 16), 0);
    let ta = load(a + r + cols);
    let tb = load(b + r + cols);
    store(c + r + cols, dot(ta, tb));
}

fn main() {}
