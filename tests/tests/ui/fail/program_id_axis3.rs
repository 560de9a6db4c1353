use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>) {
    let b = program_id(3);
    let offs = b * BLOCK + arange(0, BLOCK);
    store(x + offs, 0.0);
}

fn main() {}
