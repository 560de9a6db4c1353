use ferrotile::prelude::*;

#[kernel]
fn k(counter: Ptr<i32>, out: Ptr<f32>) {
    // the old values have the pointee's dtype
    let t = atomic_add(counter, 1);
    store(out, t);
}

fn main() {}
