//! Layer normalization (with weight and bias) and RMSNorm, forward, over the
//! last axis of a row-major matrix. Statistics are computed in f32 with a
//! two-pass (mean, then centered variance) scheme; the looped kernels walk
//! rows longer than one tile in chunks. A row whose squares overflow f32
//! (magnitudes beyond ~2^64) takes a branch that scales before squaring
//! (BLAS nrm2's remedy), so rows up to ~1e30 normalize correctly; other
//! rows never enter it (one scalar comparison).

use crate::{check_rows, LibError};
use ferrotile::prelude::*;
use ferrotile::FloatElement;

/// `y = (x - mean) * rsqrt(var + eps) * w + b`, one tile per row.
#[kernel]
pub fn layer_norm_row<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, w: Ptr<T>, b: Ptr<T>, n_cols: i32, x_stride: i32, y_stride: i32, eps: f32) {
    let row = program_id(0) as i64;
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let v = load(x + row * (x_stride as i64) + cols, mask, 0.0) as f32;
    let n = n_cols as f32;
    let mean = sum(v, 0) / n;
    let d = select(mask, v - mean, 0.0);
    let var = sum(d * d, 0) / n;
    let mut rstd = rsqrt(var + eps);
    if !(var < f32::INFINITY) {
        // |x - mean| ≥ 2^64 somewhere: d² overflowed. Scale before
        // squaring (as BLAS's nrm2 does): 1/√(var + eps) = 1/(s·√(var/s² + eps/s²)).
        let s = maximum(max(abs(d), axis = 0), 1.0);
        let ds = d / s;
        rstd = rsqrt(sum(ds * ds, axis = 0) / n + eps / (s * s)) / s;
    }
    let wv = load(w + cols, mask, 0.0) as f32;
    let bv = load(b + cols, mask, 0.0) as f32;
    store(y + row * (y_stride as i64) + cols, (d * rstd * wv + bv) as T, mask);
}

/// Layer norm for rows longer than a tile, in two passes over the row: the
/// statistics pass accumulates per-lane sums of `x - K` and `(x - K)^2` with
/// the shift `K = x[row, 0]` (the shifted-data variance algorithm: accurate
/// when K is a sample of the row, unlike the raw E\[x²\] - E\[x\]²), then the
/// output pass normalizes.
#[kernel]
pub fn layer_norm_looped<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, w: Ptr<T>, b: Ptr<T>, n_cols: i32, x_stride: i32, y_stride: i32, eps: f32) {
    let row = program_id(0) as i64;
    let xrow = x + row * (x_stride as i64);
    let yrow = y + row * (y_stride as i64);
    let cols = arange(0, BLOCK);
    let n = n_cols as f32;
    let shift = load(xrow) as f32;
    let mut s1 = zeros([BLOCK], f32);
    let mut s2 = zeros([BLOCK], f32);
    for start in (0..n_cols).step_by(BLOCK) {
        let c = start + cols;
        let mask = c < n_cols;
        let d = select(mask, load(xrow + c, mask, 0.0) as f32 - shift, 0.0);
        s1 = s1 + d;
        s2 = s2 + d * d;
    }
    let m1 = sum(s1, 0) / n;
    // (m1² ≤ q: q finite means the variance is)
    let q = sum(s2, 0) / n;
    let var = maximum(q - m1 * m1, 0.0);
    let mean = shift + m1;
    let mut rstd = rsqrt(var + eps);
    if !(q < f32::INFINITY) {
        // (x - K)² overflowed: two more passes for this row only, the
        // largest |x - mean|, then the variance scaled by it
        let mut big = zeros([BLOCK], f32);
        for start in (0..n_cols).step_by(BLOCK) {
            let c = start + cols;
            let mask = c < n_cols;
            big = maximum(big, select(mask, abs(load(xrow + c, mask, 0.0) as f32 - mean), 0.0));
        }
        let sc = maximum(max(big, axis = 0), 1.0);
        let mut ss = zeros([BLOCK], f32);
        for start in (0..n_cols).step_by(BLOCK) {
            let c = start + cols;
            let mask = c < n_cols;
            let d = select(mask, (load(xrow + c, mask, 0.0) as f32 - mean) / sc, 0.0);
            ss = ss + d * d;
        }
        rstd = rsqrt(sum(ss, axis = 0) / n + eps / (sc * sc)) / sc;
    }
    for start in (0..n_cols).step_by(BLOCK) {
        let c = start + cols;
        let mask = c < n_cols;
        let v = load(xrow + c, mask, 0.0) as f32;
        let wv = load(w + c, mask, 0.0) as f32;
        let bv = load(b + c, mask, 0.0) as f32;
        store(yrow + c, ((v - mean) * rstd * wv + bv) as T, mask);
    }
}

/// `y = x * rsqrt(mean(x^2) + eps) * w`, one tile per row.
#[kernel]
pub fn rms_norm_row<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, w: Ptr<T>, n_cols: i32, x_stride: i32, y_stride: i32, eps: f32) {
    let row = program_id(0) as i64;
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let v = load(x + row * (x_stride as i64) + cols, mask, 0.0) as f32;
    let ms = sum(v * v, 0) / (n_cols as f32);
    let mut rstd = rsqrt(ms + eps);
    if !(ms < f32::INFINITY) {
        // x² overflowed: scale before squaring
        let s = maximum(max(abs(v), axis = 0), 1.0);
        let vs = v / s;
        rstd = rsqrt(sum(vs * vs, axis = 0) / (n_cols as f32) + eps / (s * s)) / s;
    }
    let wv = load(w + cols, mask, 0.0) as f32;
    store(y + row * (y_stride as i64) + cols, (v * rstd * wv) as T, mask);
}

/// RMSNorm for rows longer than a tile.
#[kernel]
pub fn rms_norm_looped<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, w: Ptr<T>, n_cols: i32, x_stride: i32, y_stride: i32, eps: f32) {
    let row = program_id(0) as i64;
    let xrow = x + row * (x_stride as i64);
    let yrow = y + row * (y_stride as i64);
    let cols = arange(0, BLOCK);
    let mut acc = zeros([BLOCK], f32);
    for start in (0..n_cols).step_by(BLOCK) {
        let c = start + cols;
        let v = load(xrow + c, c < n_cols, 0.0) as f32;
        acc = acc + v * v;
    }
    let ms = sum(acc, 0) / (n_cols as f32);
    let mut rstd = rsqrt(ms + eps);
    if !(ms < f32::INFINITY) {
        // x² overflowed: two more passes for this row only
        let mut big = zeros([BLOCK], f32);
        for start in (0..n_cols).step_by(BLOCK) {
            let c = start + cols;
            big = maximum(big, abs(load(xrow + c, c < n_cols, 0.0) as f32));
        }
        let sc = maximum(max(big, axis = 0), 1.0);
        let mut ss = zeros([BLOCK], f32);
        for start in (0..n_cols).step_by(BLOCK) {
            let c = start + cols;
            let v = load(xrow + c, c < n_cols, 0.0) as f32 / sc;
            ss = ss + v * v;
        }
        rstd = rsqrt(sum(ss, axis = 0) / (n_cols as f32) + eps / (sc * sc)) / sc;
    }
    for start in (0..n_cols).step_by(BLOCK) {
        let c = start + cols;
        let mask = c < n_cols;
        let v = load(xrow + c, mask, 0.0) as f32;
        let wv = load(w + c, mask, 0.0) as f32;
        store(yrow + c, (v * rstd * wv) as T, mask);
    }
}

/// Configuration of the normalization kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NormConfig {
    /// Columns per block (the whole row, or the loop step when `looped`).
    pub block: u32,
    /// Loop over the row in blocks (long rows) instead of one block per row.
    pub looped: bool,
    /// Warps per program.
    pub num_warps: u32,
    /// Programs asked to fit on one SM (as [`crate::softmax::SoftmaxConfig::programs_per_sm`]).
    pub programs_per_sm: u32,
}

impl NormConfig {
    /// Block and warps for rows of `cols` elements of `elem_bytes` bytes.
    pub fn for_cols(cols: usize, elem_bytes: usize) -> Self {
        let s = crate::softmax::SoftmaxConfig::for_cols(cols, elem_bytes);
        NormConfig { block: s.block, looped: s.looped, num_warps: s.num_warps, programs_per_sm: s.programs_per_sm }
    }
}

fn check_vec(op: &str, name: &str, len: usize, cols: usize) -> Result<(), LibError> {
    if len < cols {
        return Err(LibError::Shape(format!("{op}: `{name}` has {len} elements, the rows have {cols}")));
    }
    Ok(())
}

/// Layer norm over rows of a row-major `rows × cols` matrix, with weight and
/// bias of length `cols`. Autotuned on GPUs like [`crate::softmax()`].
///
/// ```
/// use ferrotile::{bf16, Device};
/// let dev = Device::cpu();
/// let x = dev.from_slice(&[1.0f32, 2.0, 3.0, 4.0].map(bf16::from_f32))?;
/// let (w, b) = (dev.from_slice(&[bf16::ONE; 4])?, dev.from_slice(&[bf16::ZERO; 4])?);
/// let mut y = dev.zeros::<bf16>(4)?;
/// ferrotile_kernels::layer_norm(&dev, &x, &w, &b, &mut y, 1, 4, 1e-5)?;
/// // (x − 2.5) / sqrt(1.25)
/// assert!((y.to_vec()?[0].to_f32() + 1.3416).abs() < 1e-2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn layer_norm<T: FloatElement>(
    dev: &Device,
    x: &Buffer<T>,
    w: &Buffer<T>,
    b: &Buffer<T>,
    y: &mut Buffer<T>,
    rows: usize,
    cols: usize,
    eps: f32,
) -> Result<(), LibError> {
    // (the shape first: the configuration and the tuner's key are sized
    // from it)
    check_rows("layer_norm", "x", x.len(), rows, cols, cols)?;
    let h = crate::softmax::SoftmaxConfig::for_cols(cols, T::DTYPE.size_bytes());
    let key = format!("{}|cols<={}", T::DTYPE, cols.max(1).next_power_of_two());
    let t = crate::softmax::tuner_for("layer_norm", h);
    crate::with_tuned(t, dev, key, rows, rows * cols, h, |c| {
        layer_norm_with(
            dev,
            x,
            w,
            b,
            y,
            rows,
            cols,
            eps,
            NormConfig { block: c.block, looped: c.looped, num_warps: c.num_warps, programs_per_sm: c.programs_per_sm },
        )
    })
}

/// [`layer_norm`] with a fixed configuration (no tuning).
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_with<T: FloatElement>(
    dev: &Device,
    x: &Buffer<T>,
    w: &Buffer<T>,
    b: &Buffer<T>,
    y: &mut Buffer<T>,
    rows: usize,
    cols: usize,
    eps: f32,
    cfg: NormConfig,
) -> Result<(), LibError> {
    check_rows("layer_norm", "x", x.len(), rows, cols, cols)?;
    check_rows("layer_norm", "y", y.len(), rows, cols, cols)?;
    check_vec("layer_norm", "weight", w.len(), cols)?;
    check_vec("layer_norm", "bias", b.len(), cols)?;
    check_eps(eps)?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    if !cfg.looped && (cfg.block as usize) < cols {
        return Err(LibError::Config(format!("layer_norm: block {} is narrower than the row ({cols})", cfg.block)));
    }
    let launch = LaunchConfig::new([rows as u32, 1, 1]).num_warps(cfg.num_warps).programs_per_sm(cfg.programs_per_sm);
    let (n, s, bl) = (cols as i32, cols as i32, cfg.block as i32);
    crate::check_row_blocks("layer_norm", cols, cfg.block as usize)?;
    // SAFETY: the checks above keep every access in its buffer: program
    // `row < rows` reads and writes `row · cols + c` for `0 ≤ c < cols`
    // (masked; `c` cannot overflow, `check_row_blocks`), inside `x` and `y`
    // (`check_rows`), and `w`/`b` at `c < cols` (`check_vec`). The guards
    // would cost up to 11 % on bf16 norms (benches/RESULTS.md, "Guards").
    unsafe {
        if cfg.looped {
            layer_norm_looped::launch_unchecked(dev, launch, x, y, w, b, n, s, s, eps, bl)?;
        } else {
            layer_norm_row::launch_unchecked(dev, launch, x, y, w, b, n, s, s, eps, bl)?;
        }
    }
    Ok(())
}

/// RMSNorm over rows of a row-major `rows × cols` matrix, with weight of
/// length `cols`. Autotuned on GPUs like [`crate::softmax()`].
///
/// ```
/// use ferrotile::Device;
/// let dev = Device::cpu();
/// let x = dev.from_slice(&[3.0f32, 4.0])?;
/// let w = dev.from_slice(&[1.0f32, 2.0])?;
/// let mut y = dev.zeros::<f32>(2)?;
/// ferrotile_kernels::rms_norm(&dev, &x, &w, &mut y, 1, 2, 0.0)?;
/// let r = (12.5f32).sqrt(); // sqrt(mean(x²))
/// assert!((y.to_vec()?[1] - 8.0 / r).abs() < 1e-5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn rms_norm<T: FloatElement>(dev: &Device, x: &Buffer<T>, w: &Buffer<T>, y: &mut Buffer<T>, rows: usize, cols: usize, eps: f32) -> Result<(), LibError> {
    check_rows("rms_norm", "x", x.len(), rows, cols, cols)?;
    let h = crate::softmax::SoftmaxConfig::for_cols(cols, T::DTYPE.size_bytes());
    let key = format!("{}|cols<={}", T::DTYPE, cols.max(1).next_power_of_two());
    let t = crate::softmax::tuner_for("rms_norm", h);
    crate::with_tuned(t, dev, key, rows, rows * cols, h, |c| {
        rms_norm_with(
            dev,
            x,
            w,
            y,
            rows,
            cols,
            eps,
            NormConfig { block: c.block, looped: c.looped, num_warps: c.num_warps, programs_per_sm: c.programs_per_sm },
        )
    })
}

/// [`rms_norm`] with a fixed configuration (no tuning).
#[allow(clippy::too_many_arguments)]
pub fn rms_norm_with<T: FloatElement>(
    dev: &Device,
    x: &Buffer<T>,
    w: &Buffer<T>,
    y: &mut Buffer<T>,
    rows: usize,
    cols: usize,
    eps: f32,
    cfg: NormConfig,
) -> Result<(), LibError> {
    check_rows("rms_norm", "x", x.len(), rows, cols, cols)?;
    check_rows("rms_norm", "y", y.len(), rows, cols, cols)?;
    check_vec("rms_norm", "weight", w.len(), cols)?;
    check_eps(eps)?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    if !cfg.looped && (cfg.block as usize) < cols {
        return Err(LibError::Config(format!("rms_norm: block {} is narrower than the row ({cols})", cfg.block)));
    }
    let launch = LaunchConfig::new([rows as u32, 1, 1]).num_warps(cfg.num_warps).programs_per_sm(cfg.programs_per_sm);
    let (n, s, bl) = (cols as i32, cols as i32, cfg.block as i32);
    crate::check_row_blocks("rms_norm", cols, cfg.block as usize)?;
    // SAFETY: the checks above keep every access in its buffer: program
    // `row < rows` reads and writes `row · cols + c` for `0 ≤ c < cols`
    // (masked; `c` cannot overflow, `check_row_blocks`), inside `x` and `y`
    // (`check_rows`), and `w`/`b` at `c < cols` (`check_vec`). The guards
    // would cost up to 11 % on bf16 norms (benches/RESULTS.md, "Guards").
    unsafe {
        if cfg.looped {
            rms_norm_looped::launch_unchecked(dev, launch, x, y, w, n, s, s, eps, bl)?;
        } else {
            rms_norm_row::launch_unchecked(dev, launch, x, y, w, n, s, s, eps, bl)?;
        }
    }
    Ok(())
}

fn check_eps(eps: f32) -> Result<(), LibError> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(LibError::Config(format!("eps must be finite and non-negative, got {eps}")));
    }
    Ok(())
}
