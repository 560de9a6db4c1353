//! What the autotuner's test binaries share (each is its own process: they
//! point `FERROTILE_CACHE_DIR`, process-wide, at directories of their own).

use ferrotile::prelude::*;

/// `y = 2·x`, `BLOCK` elements per program: a kernel whose block size is
/// the tuned value.
#[kernel]
pub fn scale<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = offs < n;
    store(y + offs, load(x + offs, m, 0.0) * 2.0, m);
}
