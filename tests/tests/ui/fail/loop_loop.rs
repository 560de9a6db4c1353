use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>) {
    loop {
        store(x, 0.0);
    }
}

fn main() {}
