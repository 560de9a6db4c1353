//! Row-wise softmax: `y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max))`.
//!
//! Two kernels: `softmax_row` keeps a whole row in one tile (one read, one
//! write); `softmax_looped` handles rows longer than a tile with an online
//! max/sum pass followed by a normalizing pass. Inputs of f16/bf16 are
//! computed in f32 and rounded once on store.

use crate::{check_rows, LibError};
use ferrotile::prelude::*;
use ferrotile::FloatElement;

/// One program per row; the row fits in `BLOCK` lanes.
#[kernel]
pub fn softmax_row<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, n_cols: i32, x_stride: i32, y_stride: i32) {
    let row = program_id(0) as i64;
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let v = load(x + row * (x_stride as i64) + cols, mask, T::NEG_INFINITY) as f32;
    let m = max(v, axis = 0);
    let e = exp(v - m);
    // one reciprocal per row instead of a division per element
    let inv = 1.0 / sum(e, 0);
    store(y + row * (y_stride as i64) + cols, (e * inv) as T, mask);
}

/// `ROWS` rows per program, each of at most `BLOCK` columns: for short rows,
/// where one row per program leaves most of a program's lanes without
/// work. The row statistics stay in the registers their reduction leaves
/// them in and broadcast back into the rows without shared memory (slice
/// layouts, `ferrotile_backends::plan::slices`).
#[kernel]
pub fn softmax_rows<T: Float, const ROWS: i32, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, n_rows: i32, n_cols: i32, x_stride: i32, y_stride: i32) {
    let rows = program_id(0) as i64 * (ROWS as i64) + arange(0, ROWS) as i64;
    let cols = arange(0, BLOCK);
    let mask = expand_dims(rows < (n_rows as i64), 1) & expand_dims(cols < n_cols, 0);
    let v = load(x + expand_dims(rows * (x_stride as i64), 1) + expand_dims(cols, 0), mask, T::NEG_INFINITY) as f32;
    let e = exp(v - expand_dims(max(v, axis = 1), 1));
    let inv = 1.0 / sum(e, 1);
    store(y + expand_dims(rows * (y_stride as i64), 1) + expand_dims(cols, 0), (e * expand_dims(inv, 1)) as T, mask);
}

/// One program per row; the row is walked in `BLOCK`-wide chunks: an online
/// pass keeps per-lane running max and rescaled sum, then a second pass
/// writes `exp(x - max) / sum`.
#[kernel]
pub fn softmax_looped<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, n_cols: i32, x_stride: i32, y_stride: i32) {
    let row = program_id(0) as i64;
    let xrow = x + row * (x_stride as i64);
    let yrow = y + row * (y_stride as i64);
    let cols = arange(0, BLOCK);
    let mut m = full([BLOCK], f32::NEG_INFINITY, f32);
    let mut l = zeros([BLOCK], f32);
    for start in (0..n_cols).step_by(BLOCK) {
        let c = start + cols;
        let v = load(xrow + c, c < n_cols, T::NEG_INFINITY) as f32;
        let m_new = maximum(m, v);
        // Lanes that have seen only masked elements keep max = -inf; shift by
        // 0 there so that exp(-inf - -inf) never produces NaN.
        let shift = select(m_new == f32::NEG_INFINITY, 0.0, m_new);
        l = l * exp(m - shift) + exp(v - shift);
        m = m_new;
    }
    let gmax = max(m, axis = 0);
    let total = sum(l * exp(m - gmax), 0);
    let inv = 1.0 / total;
    for start in (0..n_cols).step_by(BLOCK) {
        let c = start + cols;
        let mask = c < n_cols;
        let v = load(xrow + c, mask, T::NEG_INFINITY) as f32;
        store(yrow + c, (exp(v - gmax) * inv) as T, mask);
    }
}

/// How to run a softmax: chosen by [`SoftmaxConfig::for_cols`] unless set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SoftmaxConfig {
    /// Tile width (power of two).
    pub block: u32,
    /// Use the looped kernel even if the row fits in one tile.
    pub looped: bool,
    /// Warps per program.
    pub num_warps: u32,
    /// Rows per program (a power of two; above 1 only for rows that fit in
    /// one tile, not `looped`): [`softmax_rows`].
    pub rows: u32,
    /// Programs asked to fit on one SM (`LaunchConfig::programs_per_sm`;
    /// 0: no hint, and what the tuner's candidates use: two programs of 8
    /// or 16 warps on rows of 4096–16384 elements won nowhere on the H200,
    /// benches/NOTES.md, session 31). For callers' own configurations.
    pub programs_per_sm: u32,
}

/// Rows up to this many elements are done in a single tile.
pub const MAX_SINGLE_TILE: usize = 16384;

impl SoftmaxConfig {
    /// Block and warps for rows of `cols` elements of `elem_bytes` bytes.
    pub fn for_cols(cols: usize, elem_bytes: usize) -> Self {
        let p = cols.max(1).checked_next_power_of_two().unwrap_or(usize::MAX);
        if p <= MAX_SINGLE_TILE {
            SoftmaxConfig { block: p as u32, looped: false, num_warps: warps_for(p, elem_bytes), rows: 1, programs_per_sm: 0 }
        } else {
            // sweep (benches/NOTES.md): narrow chunks over 16 warps win on long rows
            let block = if elem_bytes >= 4 { 2048 } else { 4096 };
            SoftmaxConfig { block, looped: true, num_warps: 16, rows: 1, programs_per_sm: 0 }
        }
    }
}

/// Warps per program for a row tile of `block` elements, from the sweep in
/// benches/NOTES.md (H200): 32-bit rows want ~2048 elements per warp,
/// 16-bit rows ~1024, never fewer than 2 warps or more than 16.
pub fn warps_for(block: usize, elem_bytes: usize) -> u32 {
    let per_warp = if elem_bytes >= 4 { 2048 } else { 1024 };
    (block / per_warp).clamp(2, 16) as u32
}

/// Softmax over the last axis of a row-major `rows × cols` matrix.
///
/// On a GPU the launch configuration is autotuned on first use per (dtype,
/// row length bucket) — see [`ferrotile::Autotuner`]; on the CPU it is
/// [`SoftmaxConfig::for_cols`].
///
/// ```
/// use ferrotile::Device;
/// let dev = Device::cpu(); // or Device::best()
/// let x = dev.from_slice(&[1.0f32, 2.0, 3.0, 0.0, 0.0, 0.0])?;
/// let mut y = dev.zeros::<f32>(6)?;
/// ferrotile_kernels::softmax(&dev, &x, &mut y, 2, 3)?;
/// let y = y.to_vec()?;
/// assert!((y[2] - 0.665_241).abs() < 1e-5 && (y[3] - 1.0 / 3.0).abs() < 1e-6);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn softmax<T: FloatElement>(dev: &Device, x: &Buffer<T>, y: &mut Buffer<T>, rows: usize, cols: usize) -> Result<(), LibError> {
    // (the shape first: the configuration and the tuner's key are sized
    // from it)
    check_rows("softmax", "x", x.len(), rows, cols, cols)?;
    let h = SoftmaxConfig::for_cols(cols, T::DTYPE.size_bytes());
    let key = format!("{}|cols<={}", T::DTYPE, cols.max(1).next_power_of_two());
    let t = tuner_for("softmax", h);
    crate::with_tuned(t, dev, key, rows, rows * cols, h, |c| softmax_with(dev, x, y, rows, cols, cols, cols, c))
}

/// One autotuner per (kernel family, candidate set), created on first use.
pub(crate) fn tuner_for(family: &str, h: SoftmaxConfig) -> &'static ferrotile::Autotuner {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static TUNERS: OnceLock<Mutex<HashMap<(String, u32, bool), &'static ferrotile::Autotuner>>> = OnceLock::new();
    let mut m = TUNERS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    // (multi-row candidates: only the softmax has a multi-row kernel)
    let multi = family == "softmax";
    m.entry((family.to_string(), h.block, h.looped))
        .or_insert_with(|| Box::leak(Box::new(ferrotile::Autotuner::new(family, crate::row_candidates(h, multi)).reps(5))))
}

/// Softmax with explicit row strides and configuration.
#[allow(clippy::too_many_arguments)]
pub fn softmax_with<T: FloatElement>(
    dev: &Device,
    x: &Buffer<T>,
    y: &mut Buffer<T>,
    rows: usize,
    cols: usize,
    x_stride: usize,
    y_stride: usize,
    cfg: SoftmaxConfig,
) -> Result<(), LibError> {
    check_rows("softmax", "x", x.len(), rows, cols, x_stride)?;
    check_rows("softmax", "y", y.len(), rows, cols, y_stride)?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (n, xs, ys) = (cols as i32, x_stride as i32, y_stride as i32);
    let launch = LaunchConfig::new([rows as u32, 1, 1]).num_warps(cfg.num_warps).programs_per_sm(cfg.programs_per_sm);
    let block = cfg.block as i32;
    if !cfg.looped && (cfg.block as usize) < cols {
        return Err(LibError::Config(format!("softmax: block {} is narrower than the row ({cols}); use the looped kernel", cfg.block)));
    }
    crate::check_row_blocks("softmax", cols, cfg.block as usize)?;
    if cfg.rows != 1 {
        if rows > i32::MAX as usize {
            return Err(LibError::Shape(format!("softmax: {rows} rows exceed the multi-row kernel's 32-bit row count; use one row per program")));
        }
        if cfg.looped || !cfg.rows.is_power_of_two() || cfg.rows as u64 * cfg.block as u64 > MAX_SINGLE_TILE as u64 {
            return Err(LibError::Config(format!(
                "softmax: {} rows per program of {} columns (looped: {}): rows per program must be a power of two, not looped, with at most {MAX_SINGLE_TILE} elements per tile",
                cfg.rows, cfg.block, cfg.looped
            )));
        }
        let programs = rows.div_ceil(cfg.rows as usize);
        let launch = LaunchConfig::new([programs as u32, 1, 1]).num_warps(cfg.num_warps).programs_per_sm(cfg.programs_per_sm);
        // SAFETY: as below, per row: program `p` handles rows
        // `p · ROWS + i < rows` (masked; the row index and its offsets are
        // 64-bit), columns `c < cols` (masked), inside `x` and `y`
        // (`check_rows`); the row count fits the kernel's i32 (checked
        // above).
        unsafe {
            softmax_rows::launch_unchecked(dev, launch, x, y, rows as i32, n, xs, ys, cfg.rows as i32, block)?;
        }
        return Ok(());
    }
    // SAFETY: the checks above keep every access in its buffer: program
    // `row < rows` reads `row · x_stride + c` and writes `row · y_stride + c`
    // for `0 ≤ c < cols` (masked; `c` cannot overflow, `check_row_blocks`),
    // inside `x` and `y` (`check_rows`).
    unsafe {
        if cfg.looped {
            softmax_looped::launch_unchecked(dev, launch, x, y, n, xs, ys, block)?;
        } else {
            softmax_row::launch_unchecked(dev, launch, x, y, n, xs, ys, block)?;
        }
    }
    Ok(())
}
