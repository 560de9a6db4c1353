//! The library's one-row kernels (`layer_norm_row`, `softmax_row`) run on
//! the interpreter from their IR, for IR-pass equivalence tests: bf16 rows
//! as long as `cols`, outputs as bits.

use ferrotile::__private::Arg;
use ferrotile::ir::Kernel;
use ferrotile::{bf16, Device};

/// `n` bf16 values in [−4, 4) from an xorshift stream at `seed`.
pub fn bf16_rows(seed: &mut u64, n: usize) -> Vec<bf16> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            bf16::from_f32(((*seed >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0)
        })
        .collect()
}

/// Run `k` — a specialization of `layer_norm_row` (with weight `w` and bias
/// `b`, eps 1e-5) or, when `layer_norm` is false, of `softmax_row` — over
/// `rows` rows of `cols` elements of `x` (row stride `cols`); the output's
/// bits, NaN where it was not written.
pub fn run_row(k: &Kernel, layer_norm: bool, rows: usize, cols: usize, x: &[bf16], w: &[bf16], b: &[bf16]) -> Vec<u16> {
    let dev = Device::cpu();
    let (xb, wb, bb) = (dev.from_slice(x).unwrap(), dev.from_slice(w).unwrap(), dev.from_slice(b).unwrap());
    let mut y = dev.full(rows * cols, bf16::NAN).unwrap();
    let c = cols as i32;
    let args = if layer_norm {
        vec![
            Arg::buffer(&xb),
            Arg::buffer_mut(&mut y),
            Arg::buffer(&wb),
            Arg::buffer(&bb),
            Arg::scalar(c),
            Arg::scalar(c),
            Arg::scalar(c),
            Arg::scalar(1e-5f32),
        ]
    } else {
        vec![Arg::buffer(&xb), Arg::buffer_mut(&mut y), Arg::scalar(c), Arg::scalar(c), Arg::scalar(c)]
    };
    ferrotile::runtime::run_interpreted(k, &dev, [rows as u32, 1, 1], &args).unwrap();
    drop(args);
    y.to_vec().unwrap().iter().map(|v| v.to_bits()).collect()
}
