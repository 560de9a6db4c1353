use ferrotile::prelude::*;

#[kernel]
fn k(a: Ptr<f32>, c: Ptr<f32>) {
    let bm = 32;
    let bk = 24;
    static_assert(bk % 16 == 0, "BK must be a multiple of 16");
    let offs = arange(0, bm);
    store(c + offs, load(a + offs));
}

fn main() {}
