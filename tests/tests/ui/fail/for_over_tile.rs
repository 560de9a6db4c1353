use ferrotile::prelude::*;

#[kernel]
fn k<const BLOCK: i32>(x: Ptr<f32>) {
    let offs = arange(0, BLOCK);
    for o in offs {
        store(x + o, 0.0);
    }
}

fn main() {}
