//! W8A8: int8 activations × int8 weights on the int8 tensor cores, with
//! per-token activation scales and per-channel weight scales applied in
//! the epilogue: `out[i, j] = act(sx[i] · sw[j] · Σ_k xq[i, k]·wq[j, k] +
//! bias[j])`, in f16/bf16.
//!
//! **Weights** ([`Int8Packed`], on a device [`Int8Weights`]) are stored
//! `[n, k]` row-major — output channel by input channel, as `nn.Linear`
//! and int8 checkpoints hold them — with one f32 scale per output channel
//! (symmetric: `w ≈ q · s`, `q ∈ [−127, 127]`). [`quantize_int8`] makes
//! them from f32 weights (round to nearest); [`Int8Packed::new`] takes a
//! checkpoint's. Stored along K, the weight tile is what Hopper's `wgmma`
//! reads for int8 (both operands K-major): the kernel loads a `[BN, BK]`
//! block and takes its `trans` as the product's B, and on sm_90a the
//! compiler lands it by TMA straight into a K-major slot.
//!
//! **Activations** are quantized per row (token) by [`quantize_rows`]:
//! `s = max|x| / 127`, `q = round(x · 127 / max|x|)` (ties to even), a
//! row of zeros giving `s = 0` and `q = 0`.
//!
//! **The kernel** ([`w8a8_gemm_kernel`], in the DSL): `BM × BN` tiles in
//! grouped order, a K loop of `dot(x_tile, trans(w_tile), acc)` into an
//! i32 accumulator (exact: [`w8a8_gemm`] refuses K above 131071, where
//! 128²·K could leave i32), then the scales, bias and activation in f32
//! and one cast. For few rows K may be split over the grid's second axis
//! (f32 partials, summed in a fixed order by `gemm::gemm_splitk_reduce`,
//! which adds the bias and applies the activation). Autotuned on CUDA;
//! small tiles elsewhere (lavapipe's 32 KiB of workgroup storage).

use crate::epilogue::activation;
use crate::gemm::Activation;
use crate::LibError;
use ferrotile::prelude::*;
use ferrotile::FloatElement;

/// Per-row symmetric int8 quantization of `x` (`[m, k]`, row stride
/// `sx`): one program per row, two passes over it in `B`-wide chunks
/// (the row's max |x|, then the rounded quotients), `q` contiguous
/// `[m, k]`, `s[m]` the scales.
#[kernel]
pub fn quantize_rows_kernel<T: Float, const B: i32>(x: Ptr<T>, q: Ptr<i8>, s: Ptr<f32>, k: i32, sx: i64) {
    let row = program_id(0) as i64;
    let xr = x + row * sx;
    let qr = q + row * (k as i64);
    let mut amax = zeros([B], f32);
    for c in (0..k).step_by(B) {
        let cols = c + arange(0, B);
        amax = maximum(amax, abs(load(xr + cols, cols < k, 0.0) as f32));
    }
    let a = max(amax, axis = 0);
    let mut inv = 0.0;
    if a > 0.0 {
        inv = 127.0 / a;
    }
    store(s + row, a / 127.0);
    for c in (0..k).step_by(B) {
        let cols = c + arange(0, B);
        let v = load(xr + cols, cols < k, 0.0) as f32;
        let r = minimum(maximum(round(v * inv), -127.0), 127.0);
        store(qr + cols, r as i8, cols < k);
    }
}

/// `out = act(sx ⊗ sw ∘ (xq · wqᵀ) + bias)` (module doc): `xq` `[m, k]`
/// (row stride `sxr`), `wq` `[n, k]`, `out` row stride `so`. `BIAS`: add
/// `bias[n]`; `ACT`: 0 none, 1 ReLU, 2 exact GELU. `SPLIT`: the program's
/// K range is `[program_id(1) · k_split, +k_split)` (`k_split` a multiple
/// of `BK`) and it writes its scaled f32 partial to `part[program_id(1)]`
/// (`[splits, m, n]`; bias and activation then come with the sum,
/// `gemm::gemm_splitk_reduce`).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn w8a8_gemm_kernel<U: Float, const BM: i32, const BN: i32, const BK: i32, const GROUP_M: i32, const BIAS: bool, const ACT: i32, const SPLIT: bool>(
    xq: Ptr<i8>,
    wq: Ptr<i8>,
    xs: Ptr<f32>,
    ws: Ptr<f32>,
    bias: Ptr<U>,
    out: Ptr<U>,
    part: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
    sxr: i32,
    so: i64,
    k_split: i32,
) {
    static_assert(BM >= 16 && BN >= 16 && BK >= 32, "BM, BN ≥ 16 and BK ≥ 32 (one int8 MMA step)");
    // grouped ordering: GROUP_M row tiles share their weight tiles in L2
    let num_pid_m = cdiv(m, BM);
    let num_pid_n = cdiv(n, BN);
    let in_group = GROUP_M * num_pid_n;
    let vx = view(xq, [m, k], [sxr, 1]);
    let vw = view(wq, [n, k], [k, 1]);
    let k_lo = program_id(1) * k_split;
    let k_hi = minimum(k_lo + k_split, k);
    // each program takes the tiles `program_id(0) + i · programs`: one with
    // a grid of one program per tile, several with a persistent grid (about
    // one program per SM: its copies for the next tile are issued while it
    // stores this one)
    for pid in range(program_id(0), num_pid_m * num_pid_n, num_programs(0)) {
        let first_m = (pid / in_group) * GROUP_M;
        let group_m = minimum(num_pid_m - first_m, GROUP_M);
        let pid_m = first_m + (pid % in_group) % group_m;
        let pid_n = (pid % in_group) / group_m;
        let mut acc = zeros([BM, BN], i32);
        for k0 in (k_lo..k_hi).step_by(BK) {
            let a = load_block(vx, [pid_m * BM, k0], [BM, BK]);
            let b = load_block(vw, [pid_n * BN, k0], [BN, BK]);
            acc = dot(a, trans(b), acc);
        }
        let rm = pid_m * BM + arange(0, BM);
        let rn = pid_n * BN + arange(0, BN);
        let m_ok = rm < m;
        let n_ok = rn < n;
        let scale = expand_dims(load(xs + rm, m_ok, 0.0), 1) * expand_dims(load(ws + rn, n_ok, 0.0), 0);
        let mut o = (acc as f32) * scale;
        let ok = expand_dims(m_ok, 1) & expand_dims(n_ok, 0);
        if SPLIT {
            let mn = (m as i64) * (n as i64);
            store(part + (program_id(1) as i64) * mn + expand_dims((rm as i64) * (n as i64), 1) + expand_dims(rn, 0), o, ok);
        } else {
            if BIAS {
                o = o + expand_dims(load(bias + rn, n_ok, 0.0) as f32, 0);
            }
            o = activation(o, ACT);
            store(out + expand_dims((rm as i64) * so, 1) + expand_dims(rn, 0), o as U, ok);
        }
    }
}

/// Largest K [`w8a8_gemm`] takes: 128·128·K stays inside i32 below 2¹⁷.
pub const W8A8_MAX_K: usize = (1 << 17) - 1;

/// Int8 weights `[n, k]` with per-output-channel scales (module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct Int8Packed {
    /// Output channels.
    pub n: usize,
    /// K.
    pub k: usize,
    /// `[n, k]` row-major.
    pub q: Vec<i8>,
    /// `[n]`.
    pub scales: Vec<f32>,
}

impl Int8Packed {
    /// From a checkpoint's int8 weights (`[n, k]`, output channel by input
    /// channel) and per-channel scales.
    pub fn new(q: Vec<i8>, scales: Vec<f32>, n: usize, k: usize) -> Result<Self, LibError> {
        if n == 0 || k == 0 || n.checked_mul(k) != Some(q.len()) {
            return Err(LibError::Shape(format!("w8a8: weights have {} elements, {n}×{k} (n × k) expected", q.len())));
        }
        if scales.len() != n {
            return Err(LibError::Shape(format!("w8a8: {} weight scales for N = {n} output channels", scales.len())));
        }
        if let Some(i) = scales.iter().position(|s| !s.is_finite()) {
            return Err(LibError::Config(format!("w8a8: weight scale {i} is not finite ({})", scales[i])));
        }
        Ok(Int8Packed { n, k, q, scales })
    }

    /// The dequantized weights as the product uses them, `[k, n]` (f64,
    /// exact).
    pub fn dequantize(&self) -> Vec<f64> {
        let mut w = vec![0.0; self.k * self.n];
        for j in 0..self.n {
            for kk in 0..self.k {
                w[kk * self.n + j] = self.q[j * self.k + kk] as f64 * self.scales[j] as f64;
            }
        }
        w
    }
}

/// Quantize a row-major `[k, n]` f32 matrix (as [`super::quantize`] takes
/// it) per output channel: `s = max|w| / 127`, `q = round(w / s)`.
pub fn quantize_int8(w: &[f32], k: usize, n: usize) -> Result<Int8Packed, LibError> {
    if k.checked_mul(n) != Some(w.len()) || k == 0 || n == 0 {
        return Err(LibError::Shape(format!("w8a8: weights have {} elements, {k}×{n} expected", w.len())));
    }
    if let Some(i) = w.iter().position(|v| !v.is_finite()) {
        return Err(LibError::Config(format!("w8a8: weight {i} is not finite ({})", w[i])));
    }
    let mut q = vec![0i8; n * k];
    let mut scales = vec![0f32; n];
    for j in 0..n {
        let m = (0..k).map(|r| w[r * n + j].abs()).fold(0.0f32, f32::max);
        let s = if m > 0.0 { m / 127.0 } else { 1.0 };
        scales[j] = s;
        for r in 0..k {
            q[j * k + r] = (w[r * n + j] / s).round().clamp(-127.0, 127.0) as i8;
        }
    }
    Int8Packed::new(q, scales, n, k)
}

/// [`Int8Packed`] on a device.
pub struct Int8Weights {
    /// Output channels.
    pub n: usize,
    /// K.
    pub k: usize,
    /// The int8 weights on the device (`[n, k]`).
    pub q: Buffer<i8>,
    /// Per-channel scales on the device (`[n]`).
    pub scales: Buffer<f32>,
}

impl Int8Weights {
    /// Copies packed weights to `dev` (checked first).
    pub fn upload(dev: &Device, w: &Int8Packed) -> Result<Self, LibError> {
        let w = Int8Packed::new(w.q.clone(), w.scales.clone(), w.n, w.k)?;
        Ok(Int8Weights { n: w.n, k: w.k, q: dev.from_slice(&w.q)?, scales: dev.from_slice(&w.scales)? })
    }
}

/// Quantize the `m` rows of `x` (`[m, k]`, row stride `x_row_stride`, 0:
/// `k`) into `q` (`[m, k]`, contiguous) and `scales` (`[m]`) — module doc.
pub fn quantize_rows<T: FloatElement>(
    dev: &Device,
    x: &Buffer<T>,
    m: usize,
    k: usize,
    x_row_stride: usize,
    q: &mut Buffer<i8>,
    scales: &mut Buffer<f32>,
) -> Result<(), LibError> {
    let sx = if x_row_stride == 0 { k } else { x_row_stride };
    if k == 0 || k > i32::MAX as usize / 2 || sx < k {
        return Err(LibError::Shape(format!("quantize_rows: K = {k} must be positive and fit 32 bits, and the row stride {sx} at least K")));
    }
    if m == 0 {
        return Ok(());
    }
    let need = |what: &str, have: usize, want: usize| crate::need_len("quantize_rows", what, have, want);
    need("x", x.len(), crate::rows_extent("quantize_rows", "x", m, sx, k)?)?;
    need("q", q.len(), m * k)?;
    need("scales", scales.len(), m)?;
    if m > u32::MAX as usize / 2 {
        return Err(LibError::Shape(format!("quantize_rows: M = {m} rows exceed the grid")));
    }
    let block = if dev.kind() == ferrotile::DeviceKind::Cuda { 1024 } else { 256 };
    let cfg = LaunchConfig::new([m as u32, 1, 1]).num_warps(4);
    quantize_rows_kernel::launch(dev, cfg, x, q, scales, k as i32, sx as i64, block)?;
    Ok(())
}

/// Tile configuration of [`w8a8_gemm_kernel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct W8A8Config {
    /// Rows of the output per program.
    pub bm: u32,
    /// Output columns per program.
    pub bn: u32,
    /// K per step.
    pub bk: u32,
    /// Warps per program.
    pub num_warps: u32,
    /// Pipelining depth of the K loop.
    pub num_stages: u32,
    /// K split into this many ranges (1: none); the f32 partials are summed
    /// by a second kernel in a fixed order.
    pub split_k: u32,
    /// A persistent grid: one program per SM (at most one per tile), each
    /// looping over tiles, instead of one program per tile.
    pub persistent: bool,
}

impl W8A8Config {
    /// The configuration a tuner candidate ([`w8a8_candidates`],
    /// [`super::fp8_candidates`]) names (`SPLIT_K` absent: 1).
    pub fn from_tune(tc: &ferrotile::TuneConfig) -> ferrotile::Result<Self> {
        Ok(W8A8Config {
            bm: tc.get("BM")? as u32,
            bn: tc.get("BN")? as u32,
            bk: tc.get("BK")? as u32,
            num_warps: tc.num_warps,
            num_stages: tc.num_stages,
            split_k: tc.values.get("SPLIT_K").copied().unwrap_or(1) as u32,
            persistent: tc.values.get("PERSISTENT").is_some_and(|&p| p != 0),
        })
    }

    pub(crate) fn to_tune(self) -> ferrotile::TuneConfig {
        ferrotile::TuneConfig::new(self.num_warps)
            .with("BM", self.bm as i64)
            .with("BN", self.bn as i64)
            .with("BK", self.bk as i64)
            .with("SPLIT_K", self.split_k as i64)
            .with("PERSISTENT", self.persistent as i64)
            .stages(self.num_stages)
    }

    /// Without tuning: a mid-size `wgmma` tile on CUDA; lavapipe's 32 KiB
    /// of workgroup storage and the CPU take small tiles.
    pub fn default_for(dev: &Device) -> Self {
        match dev.kind() {
            ferrotile::DeviceKind::Cuda => W8A8Config { bm: 128, bn: 128, bk: 128, num_warps: 8, num_stages: 4, split_k: 1, persistent: false },
            _ => W8A8Config { bm: 16, bn: 32, bk: 32, num_warps: 4, num_stages: 1, split_k: 1, persistent: false },
        }
    }
}

/// The tuner's candidates for `m` rows (K in whole 128-byte swizzle
/// atoms: BK 128 or 256; the operand rings of up to four stages within 228
/// KB; for few rows, narrow tiles and split K so that the weight stream
/// spreads over every SM). For many rows, a tile whose rings take more
/// than half an SM's shared memory (one program per SM at a time) runs on
/// a persistent grid: measured faster at every such tile tried (H100,
/// session 52: −3 to −8 % at 4096³ and 8192³, FP8 and int8), and no
/// slower where there are fewer tiles than SMs (the same grid then).
pub fn w8a8_candidates(m: usize) -> Vec<ferrotile::TuneConfig> {
    let c = |bm: u32, bn: u32, bk: u32, num_warps: u32, num_stages: u32| {
        let persistent = (bm + bn) * bk * num_stages > 114 * 1024;
        W8A8Config { bm, bn, bk, num_warps, num_stages, split_k: 1, persistent }.to_tune()
    };
    if m <= 64 {
        let mut v = vec![];
        for (bn, bk, stages) in [(64u32, 256u32, 3u32), (64, 128, 4), (128, 128, 4), (128, 256, 2)] {
            for split in [1u32, 2, 4] {
                v.push(W8A8Config { bm: 64, bn, bk, num_warps: 4, num_stages: stages, split_k: split, persistent: false }.to_tune());
            }
        }
        return v;
    }
    vec![
        // (256-deep steps at two stages: 1272 TOPS at 4096³ and 8192³ on
        // the H200, where 128-deep ones at three or four reach 1120–1160 —
        // RESULTS, session 19)
        c(128, 256, 256, 8, 2),
        c(256, 128, 256, 8, 2),
        c(128, 256, 128, 8, 3),
        c(128, 256, 128, 8, 4),
        c(256, 128, 128, 8, 3),
        c(128, 128, 128, 8, 4),
        c(128, 128, 128, 4, 4),
        c(128, 128, 256, 8, 3),
        c(64, 256, 128, 4, 4),
        c(64, 128, 128, 4, 4),
        c(64, 64, 256, 4, 3),
    ]
}

/// Programs of a persistent grid over `tiles` tiles: one per SM (one per
/// tile where there are fewer tiles), a multiple of `cluster`. Devices
/// that do not say how many cores they have (the CPU, wgpu) get 4.
pub(crate) fn persistent_programs(dev: &Device, tiles: usize, cluster: usize) -> usize {
    let sms = dev.multiprocessors().unwrap_or(4) as usize;
    (sms.min(tiles) / cluster * cluster).max(cluster)
}

/// Options of [`w8a8_gemm`].
pub struct W8A8Options<'a, U: FloatElement> {
    /// Added to every row (`[n]`).
    pub bias: Option<&'a Buffer<U>>,
    /// The activation after the bias.
    pub activation: Activation,
    /// Row stride of `xq` in elements (0: `k`).
    pub x_row_stride: usize,
    /// Row stride of `out` in elements (0: `n`).
    pub out_row_stride: usize,
    /// A fixed configuration instead of the tuner's.
    pub config: Option<W8A8Config>,
}

impl<U: FloatElement> Default for W8A8Options<'_, U> {
    fn default() -> Self {
        W8A8Options { bias: None, activation: Activation::None, x_row_stride: 0, out_row_stride: 0, config: None }
    }
}

/// `out[m, n] = act(xs ⊗ w.scales ∘ (xq · w.qᵀ) + bias)` (module doc):
/// `xq` `[m, k]` int8 and `xs` `[m]` as [`quantize_rows`] makes them, `U`
/// f16 or bf16.
///
/// ```
/// use ferrotile::{bf16, Device};
/// use ferrotile_kernels::quant::{quantize_int8, quantize_rows, w8a8_gemm, Int8Weights, W8A8Options};
/// let dev = Device::cpu();
/// let (m, n, k) = (2, 4, 32);
/// let w: Vec<f32> = (0..k * n).map(|i| ((i % 5) as f32 - 2.0) * 0.1).collect(); // [k, n]
/// let wq = Int8Weights::upload(&dev, &quantize_int8(&w, k, n)?)?; // per-channel int8
/// let x = dev.from_slice(&vec![bf16::from_f32(0.5); m * k])?;
/// // per-token int8 activations, then the int8 GEMM with both scales applied
/// let (mut xq, mut xs) = (dev.zeros::<i8>(m * k)?, dev.zeros::<f32>(m)?);
/// quantize_rows(&dev, &x, m, k, 0, &mut xq, &mut xs)?;
/// let mut y = dev.zeros::<bf16>(m * n)?;
/// w8a8_gemm(&dev, &xq, &xs, &wq, &mut y, m, &W8A8Options::default())?;
/// let want: f32 = (0..k).map(|r| 0.5 * w[r * n + 1]).sum();
/// assert!((y.to_vec()?[1].to_f32() - want).abs() < 0.02 * want.abs().max(0.1));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn w8a8_gemm<U: FloatElement>(
    dev: &Device,
    xq: &Buffer<i8>,
    xs: &Buffer<f32>,
    w: &Int8Weights,
    out: &mut Buffer<U>,
    m: usize,
    opts: &W8A8Options<U>,
) -> Result<(), LibError> {
    use ferrotile::ir::DType;
    if !matches!(U::DTYPE, DType::F16 | DType::BF16) {
        return Err(LibError::Config(format!("w8a8: the output must be f16 or bf16, got {}", U::DTYPE)));
    }
    let (n, k) = (w.n, w.k);
    if k > W8A8_MAX_K {
        return Err(LibError::Shape(format!("w8a8: K = {k} exceeds {W8A8_MAX_K} (the i32 accumulator could overflow)")));
    }
    if n > i32::MAX as usize / 2 || m > i32::MAX as usize / 2 {
        return Err(LibError::Shape(format!("w8a8: {m}×{n} exceeds the 32-bit limits")));
    }
    let sx = if opts.x_row_stride == 0 { k } else { opts.x_row_stride };
    let so = if opts.out_row_stride == 0 { n } else { opts.out_row_stride };
    if sx < k || so < n || sx > i32::MAX as usize {
        return Err(LibError::Shape(format!("w8a8: row strides ({sx} for xq, {so} for out) must be at least K = {k} / N = {n}")));
    }
    if m == 0 {
        return Ok(());
    }
    let need = |what: &str, have: usize, want: usize| crate::need_len("w8a8", what, have, want);
    need("xq", xq.len(), crate::rows_extent("w8a8", "xq", m, sx, k)?)?;
    need("xs", xs.len(), m)?;
    need("out", out.len(), crate::rows_extent("w8a8", "out", m, so, n)?)?;
    need("w.q", w.q.len(), n * k)?;
    need("w.scales", w.scales.len(), n)?;
    if let Some(b) = opts.bias {
        need("bias", b.len(), n)?;
    }
    let mut run = |c: W8A8Config| launch(dev, xq, xs, w, out, m, opts, (sx, so), c);
    if let Some(c) = opts.config {
        return run(c);
    }
    if dev.kind() != ferrotile::DeviceKind::Cuda || (m as u64) * (n as u64) * (k as u64) < (1 << 24) {
        return run(W8A8Config::default_for(dev));
    }
    let b2 = |v: usize| v.max(1).next_power_of_two();
    let key = format!("w8a8|{}|m<={}|n<={}|k<={}", U::DTYPE, b2(m), b2(n), b2(k));
    // (one tuner per candidate list: few rows, or many)
    static T: std::sync::OnceLock<[ferrotile::Autotuner; 2]> = std::sync::OnceLock::new();
    let tuners = T.get_or_init(|| [1, 128].map(|m| ferrotile::Autotuner::new("w8a8_gemm", w8a8_candidates(m)).reps(5)));
    tuners[(m > 64) as usize].run(dev, &key, |tc| run(W8A8Config::from_tune(tc)?).map_err(crate::lib_to_launch))?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn launch<U: FloatElement>(
    dev: &Device,
    xq: &Buffer<i8>,
    xs: &Buffer<f32>,
    w: &Int8Weights,
    out: &mut Buffer<U>,
    m: usize,
    opts: &W8A8Options<U>,
    (sx, so): (usize, usize),
    c: W8A8Config,
) -> Result<(), LibError> {
    let ok = |v: u32, lo: u32, hi: u32| v.is_power_of_two() && (lo..=hi).contains(&v);
    if !ok(c.bm, 16, 256) || !ok(c.bn, 16, 256) || !ok(c.bk, 32, 256) || !ok(c.num_warps, 1, 16) || c.num_stages == 0 || !(1..=16).contains(&c.split_k) {
        return Err(LibError::Config(format!("w8a8: invalid configuration {c:?}")));
    }
    let (n, k) = (w.n, w.k);
    let tiles = m.div_ceil(c.bm as usize) * n.div_ceil(c.bn as usize);
    if tiles > u32::MAX as usize / 2 {
        return Err(LibError::Shape(format!("w8a8: {tiles} tiles exceed the grid")));
    }
    // K ranges of whole BK blocks
    let bk = c.bk as usize;
    let k_split = k.div_ceil(c.split_k as usize).div_ceil(bk) * bk;
    let splits = k.div_ceil(k_split);
    let programs = if c.persistent { persistent_programs(dev, tiles, 1) } else { tiles };
    // (the producer warpgroup where the loop qualifies — its b is read
    // through `trans`; the pass leaves the launch as is where it does not)
    let cfg = LaunchConfig::new([programs as u32, splits as u32, 1]).num_warps(c.num_warps).num_stages(c.num_stages).warp_specialize(true);
    let placeholder = crate::scratch::placeholder::<U>(dev)?;
    let bias = opts.bias.unwrap_or(&placeholder);
    let act = opts.activation.code();
    let split = splits > 1;
    let mut part = crate::scratch::workspace(dev, if split { splits * m * n } else { 1 })?;
    w8a8_gemm_kernel::launch(
        dev,
        cfg,
        xq,
        &w.q,
        xs,
        &w.scales,
        bias,
        out,
        part.buffer(),
        m as i32,
        n as i32,
        k as i32,
        sx as i32,
        so as i64,
        k_split as i32,
        c.bm as i32,
        c.bn as i32,
        c.bk as i32,
        8,
        opts.bias.is_some(),
        act,
        split,
    )?;
    if split {
        // the partials summed in split order, then bias, activation, cast
        let epi = super::Epilogue { bias, has_bias: opts.bias.is_some(), act };
        super::reduce(dev, "w8a8", &mut part, out, epi, (m, n, splits, so))?;
    }
    Ok(())
}
