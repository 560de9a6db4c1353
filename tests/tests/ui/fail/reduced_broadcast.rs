use ferrotile::prelude::*;

// A row sum subtracted without expand_dims: with a square tile the shapes
// agree and the sums would line up with the columns.
#[kernel]
fn center<const B: i32>(x: Ptr<f32>, y: Ptr<f32>) {
    let r = arange(0, B);
    let offs = expand_dims(r, 1) * B + expand_dims(r, 0);
    let t = load(x + offs);
    let s = sum(t, axis = 1) / (B as f32);
    store(y + offs, t - s);
}

fn main() {}
