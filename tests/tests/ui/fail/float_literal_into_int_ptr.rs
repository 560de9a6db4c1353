use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<i32>) {
    let offs = arange(0, BLOCK);
    store(x + offs, 0.5);
}

fn main() {}
