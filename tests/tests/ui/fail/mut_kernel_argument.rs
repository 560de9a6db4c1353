use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>, mut n: i32) {
    for i in 0..4 {
        n = n - 1;
        store(x + i, 0.0, n > 0);
    }
}

fn main() {}
