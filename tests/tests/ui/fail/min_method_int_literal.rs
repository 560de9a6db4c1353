use ferrotile::prelude::*;

#[kernel]
fn clamp(x: Ptr<i32>, y: Ptr<i32>) {
    let offs = arange(0, 128);
    let v = load(x + offs);
    store(y + offs, v.min(0));
}

fn main() {}
