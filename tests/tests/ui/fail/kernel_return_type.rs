use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>) -> f32 {
    let offs = arange(0, BLOCK);
    sum(load(x + offs), 0)
}

fn main() {}
