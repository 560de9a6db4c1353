use ferrotile::prelude::*;

#[kernel]
fn k(x: Ptr<f32>, n: i32) {
    for i in 0..n {
        if i > 10 {
            break;
        }
        store(x + i, 0.0);
    }
}

fn main() {}
