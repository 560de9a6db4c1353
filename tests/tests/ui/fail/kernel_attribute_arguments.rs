use ferrotile::prelude::*;

#[kernel(num_warps = 8)]
fn k<const BLOCK: i32>(x: Ptr<f32>) {
    let offs = arange(0, BLOCK);
    store(x + offs, 0.0);
}

fn main() {}
