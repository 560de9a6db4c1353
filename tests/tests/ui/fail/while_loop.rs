use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>, n: i32) {
    let mut i = 0;
    while i < n {
        store(x + i, 0.0);
        i = i + 1;
    }
}

fn main() {}
