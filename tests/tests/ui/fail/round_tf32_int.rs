use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<i32>, y: Ptr<i32>) {
    let o = arange(0, 16);
    store(y + o, round_tf32(load(x + o)));
}

fn main() {}
