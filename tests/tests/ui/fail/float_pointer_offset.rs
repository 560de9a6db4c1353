use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, scale: f32) {
    let offs = arange(0, BLOCK);
    let v = load(x + offs as f32 * scale);
    store(y + offs, v);
}

fn main() {}
