use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>, n: i32) {
    let offs = arange(0, BLOCK);
    x += program_id(0) * n;
    store(x + offs, 0.0);
}

fn main() {}
