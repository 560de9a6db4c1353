use ferrotile::prelude::*;

#[kernel]
fn k<const B: i32>(x: Ptr<i32>, n: i32) {
    let offs = arange(0, B);
    let v = load(x + offs, offs < n, 0);
    store(x + offs, v + 3000000000, offs < n);
}

fn main() {}
