//! Small kernels shared by the runtime tests (`tests/streams.rs`,
//! `tests/dependent_launch.rs`).

use ferrotile::prelude::*;

/// Each element: `iters` steps of `x ← x·0.5 + k` (a fixed point at 2k,
/// reached long before `iters` ends): a long kernel that writes `x` only
/// at its end.
#[kernel]
pub fn spin(x: Ptr<f32>, n: i32, k: f32, iters: i32) {
    let offs = program_id(0) * 128 + arange(0, 128);
    let mask = offs < n;
    let mut acc = load(x + offs, mask, 0.0);
    for _i in 0..iters {
        acc = acc * 0.5 + k;
    }
    store(x + offs, acc, mask);
}
