use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>) {
    const BLOCK: i32 = 128;
    let offs = arange(0, BLOCK);
    store(x + offs, 0.0);
}

fn main() {}
