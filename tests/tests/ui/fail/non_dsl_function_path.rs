use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<i32>, a: i32, b: i32) {
    store(x, std::cmp::max(a, b));
}

fn main() {}
