use ferrotile::prelude::*;

#[kernel]
fn k(counter: Ptr<i32>, out: Ptr<i32>) {
    let t = atomic_add(counter, 1, None, SeqCst);
    store(out, t);
}

fn main() {}
