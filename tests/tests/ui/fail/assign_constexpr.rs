use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>, n: i32) {
    if n < 64 {
        BLOCK = 64;
    }
    let offs = arange(0, BLOCK);
    store(x + offs, 0.0, offs < n);
}

fn main() {}
