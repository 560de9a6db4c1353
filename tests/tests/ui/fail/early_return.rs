use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>, n: i32) {
    let start = program_id(0) * BLOCK;
    if start >= n {
        return;
    }
    store(x + start + arange(0, BLOCK), 0.0);
}

fn main() {}
