use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>) {
    let offs = arange(0, BLOCK);
    let v = load(x + offs);
    store(x + offs, v * 0.5f64);
}

fn main() {}
