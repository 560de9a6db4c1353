//! GEMM: `C = act(alpha · A·B + bias)`, batched, any M, N, K, written in the DSL.
//!
//! One program computes a `BM × BN` tile of C with a K loop of `dot`s into
//! an f32 accumulator (masked edges: any M, N, K). A and B are addressed by
//! strides, so row- and column-major operands (and transposes) are the same
//! kernel. Programs are ordered in groups of `GROUP_M` row tiles for L2 reuse
//! (Triton's grouped ordering). The epilogue (scale, bias, ReLU/GELU, cast to
//! the output dtype) is fused; constexpr flags fold away what is not used.
//!
//! Split-K (skinny products such as decode, M ≤ 64, where the tiles of C
//! are too few to keep every SM streaming B): the grid's third axis splits
//! K into `SPLIT_K` ranges; each program writes its f32 partial tile to a
//! workspace and [`gemm_splitk_reduce`] sums the partials in a fixed order
//! (deterministic) and applies the epilogue.
//!
//! Swapped product (skinny M, such as decode): the same kernel computes
//! `Cᵀ = Bᵀ·Aᵀ` with A and B exchanged, their strides transposed and C
//! written through its column stride ([`kernel_args`], `GemmConfig::swap`).
//! N then runs along the tile's M, where Hopper's warpgroup MMAs need 64
//! rows, and the few rows of A along its N (16 or 32 wide), so no MMA row
//! is padding; on Hopper Bᵀ comes by bulk copies into M-major `wgmma`
//! slots and Aᵀ into narrow K-major ones.
//!
//! Backends: the CPU interpreter (reference: f32 accumulation, tf32 rounding
//! when asked); the PTX backend, where `dot` of f16/bf16 (and f32 with
//! tf32) runs on tensor cores (`wgmma` on Hopper where the tile fits,
//! `mma.sync` otherwise) and exact f32 on an FMA loop; WGSL (FMA loop).
//! tf32 on Hopper (M·N·K ≥ 2²⁷): `wgmma` reads tf32 operands only K-major,
//! so an operand in the other layout (A column-major, B row-major) is
//! transposed once by [`round_tf32_transpose_kernel`]; both then come by
//! bulk tensor copies that round to tf32 on the way. On GPUs
//! the tile configuration is autotuned per size bucket
//! ([`gemm_candidates`]); `GemmOptions::config` forces one.

use crate::LibError;
use ferrotile::prelude::*;
use ferrotile::FloatElement;

mod kernels;
pub use kernels::{gemm_kernel, gemm_splitk_reduce, round_tf32_transpose_kernel};

/// How an operand is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Row-major as the product sees it (A is M×K, B is K×N).
    RowMajor,
    /// Column-major, i.e. the row-major storage of the transpose.
    ColMajor,
}

/// The epilogue's activation, applied after the bias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// None: the output is `alpha · A·B + bias`.
    None,
    /// `max(x, 0)`.
    Relu,
    /// Exact (erf) GELU.
    Gelu,
}

impl Activation {
    /// The `ACT` constexpr of the kernels' epilogues: 0 none, 1 ReLU, 2
    /// exact GELU.
    pub fn code(self) -> i32 {
        match self {
            Activation::None => 0,
            Activation::Relu => 1,
            Activation::Gelu => 2,
        }
    }
}

/// Tile configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmConfig {
    /// Rows of C per program.
    pub bm: u32,
    /// Columns of C per program.
    pub bn: u32,
    /// K per step.
    pub bk: u32,
    /// Programs grouped along M for L2 reuse (0: no grouping).
    pub group_m: u32,
    /// Warps per program.
    pub num_warps: u32,
    /// 2 or more: the K loop's operand loads are prefetched `num_stages - 1`
    /// iterations ahead (software pipelining: on the wgmma path through a
    /// ring of `num_stages` shared-memory slots filled by `cp.async`,
    /// elsewhere in registers); 1: not.
    pub num_stages: u32,
    /// K split into this many ranges (1: none); more than 1 only for
    /// M ≤ 64 — see the module doc.
    pub split_k: u32,
    /// Compute the swapped product `Cᵀ = Bᵀ·Aᵀ`: the tile is `bm` columns
    /// of C by `bn` rows, so that a skinny product (decode: M = 16) puts its
    /// long N on the tile's M — where Hopper's warpgroup MMAs need 64 rows —
    /// and its few rows on the tile's N, with no padded rows.
    pub swap: bool,
    /// Programs in clusters of this many (1 or 2) along the grid's tiles: on
    /// Hopper, where N is one tile wide (so every program reads the same
    /// B tiles — decode's Aᵀ in the swapped product), each B tile is
    /// copied once for the cluster (TMA multicast).
    /// Ignored where the tile count is odd or elsewhere.
    pub cluster: u32,
}

impl GemmConfig {
    /// The configuration a [`gemm_candidates`] entry describes (`BM`, `BN`,
    /// `BK`, `GROUP_M`, optional `SPLIT_K`, `SWAP` and `CLUSTER`; warps and
    /// stages).
    pub fn from_tune(tc: &ferrotile::TuneConfig) -> ferrotile::Result<Self> {
        let split_k = tc.values.get("SPLIT_K").copied().unwrap_or(1) as u32;
        let swap = tc.values.get("SWAP").copied().unwrap_or(0) != 0;
        let cluster = tc.values.get("CLUSTER").copied().unwrap_or(1) as u32;
        Ok(GemmConfig {
            bm: tc.get("BM")? as u32,
            bn: tc.get("BN")? as u32,
            bk: tc.get("BK")? as u32,
            group_m: tc.get("GROUP_M")? as u32,
            num_warps: tc.num_warps,
            num_stages: tc.num_stages,
            split_k,
            swap,
            cluster,
        })
    }

    /// The configuration used without the tuner for an `m × n` output.
    pub fn default_for(m: usize, n: usize) -> Self {
        let t = |x: usize| {
            if x >= 64 {
                64
            } else if x >= 32 {
                32
            } else {
                16
            }
        };
        GemmConfig { bm: t(m), bn: t(n), bk: 32, group_m: 8, num_warps: 4, num_stages: 2, split_k: 1, swap: false, cluster: 1 }
    }
}

/// Options of [`gemm`].
pub struct GemmOptions<'a, U: FloatElement> {
    /// How A is stored.
    pub a_layout: Layout,
    /// How B is stored.
    pub b_layout: Layout,
    /// Bias of length N, added to every row.
    pub bias: Option<&'a Buffer<U>>,
    /// The activation after the bias.
    pub activation: Activation,
    /// Scales the product before the bias.
    pub alpha: f32,
    /// For f32 inputs: round them to tf32 before the products (tensor-core
    /// semantics); exact f32 products otherwise.
    pub tf32: bool,
    /// Number of independent products; operands are packed one after the other.
    pub batch: usize,
    /// Tile configuration; `None` picks one.
    pub config: Option<GemmConfig>,
}

impl<U: FloatElement> Default for GemmOptions<'_, U> {
    fn default() -> Self {
        GemmOptions {
            a_layout: Layout::RowMajor,
            b_layout: Layout::RowMajor,
            bias: None,
            activation: Activation::None,
            alpha: 1.0,
            tf32: false,
            batch: 1,
            config: None,
        }
    }
}

/// `C = act(alpha · A·B + bias)` with A: M×K, B: K×N, C: M×N row-major,
/// each `batch` times. Inputs of dtype `T` (f32, f16, bf16), output `U`.
///
/// ```
/// use ferrotile::{bf16, Device};
/// use ferrotile_kernels::gemm::{gemm, Activation, GemmOptions};
/// let dev = Device::cpu();
/// let (m, n, k) = (2, 3, 4);
/// let a = dev.from_slice(&vec![bf16::ONE; m * k])?; // all ones
/// let b = dev.from_slice(&(0..k * n).map(|i| bf16::from_f32(i as f32)).collect::<Vec<_>>())?;
/// let bias = dev.from_slice(&[-100.0f32, 0.0, 1.0])?;
/// let mut c = dev.zeros::<f32>(m * n)?; // bf16 in, f32 out
/// let opts = GemmOptions { bias: Some(&bias), activation: Activation::Relu, ..Default::default() };
/// gemm(&dev, &a, &b, &mut c, m, n, k, &opts)?;
/// // column j sums 3j..: j=0: 0+3+6+9 = 18, −100 → ReLU 0; j=1: 22; j=2: 26 + 1
/// assert_eq!(c.to_vec()?, vec![0.0, 22.0, 27.0, 0.0, 22.0, 27.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gemm<T: FloatElement, U: FloatElement>(
    dev: &Device,
    a: &Buffer<T>,
    b: &Buffer<T>,
    c: &mut Buffer<U>,
    m: usize,
    n: usize,
    k: usize,
    opts: &GemmOptions<'_, U>,
) -> Result<(), LibError> {
    let batch = opts.batch;
    let need = |what: &str, len: usize, (rows, cols): (usize, usize)| -> Result<(), LibError> {
        let want = rows.checked_mul(cols).and_then(|per| per.checked_mul(batch));
        let want = want.ok_or_else(|| LibError::Shape(format!("gemm: `{what}`: {batch} × {rows} × {cols} elements overflow the address space")))?;
        if len < want {
            return Err(LibError::Shape(format!("gemm: `{what}` has {len} elements, {batch} × {rows} × {cols} needed")));
        }
        Ok(())
    };
    need("a", a.len(), (m, k))?;
    need("b", b.len(), (k, n))?;
    need("c", c.len(), (m, n))?;
    if let Some(bias) = opts.bias {
        if bias.len() < n {
            return Err(LibError::Shape(format!("gemm: bias has {} elements, N = {n}", bias.len())));
        }
    }
    if opts.tf32 && T::DTYPE != ferrotile::ir::DType::F32 {
        return Err(LibError::Config("gemm: tf32 applies to f32 inputs".into()));
    }
    if !opts.alpha.is_finite() {
        return Err(LibError::Config(format!("gemm: alpha must be finite, got {}", opts.alpha)));
    }
    if m == 0 || n == 0 || batch == 0 {
        return Ok(());
    }
    if [m, n, k].iter().any(|&x| x > i32::MAX as usize) || batch > 65535 {
        return Err(LibError::Shape(format!("gemm: {m}×{n}×{k} (batch {batch}) exceeds the 32-bit / grid limits")));
    }
    // tf32 on Hopper: `wgmma` reads tf32 operands only K-major (A
    // row-major, B column-major); operands in the other layout are
    // transposed (and rounded) once into the device's copies, so that both
    // come by bulk tensor copies, which round to tf32 on the way
    if opts.tf32
        && large(m, n, k)
        && dev.compute_capability().is_some_and(|sm| sm >= 90)
        && (opts.a_layout == Layout::ColMajor || opts.b_layout == Layout::RowMajor)
    {
        return gemm_kmajor_tf32(dev, a, b, c, m, n, k, opts);
    }
    gemm_with(dev, a, b, c, m, n, k, opts, opts.tf32)
}

/// Problems large enough (M·N·K ≥ 2²⁷) for the autotuner's timings to mean
/// something, and for a transposing pre-pass to pay off (tf32 on Hopper).
fn large(m: usize, n: usize, k: usize) -> bool {
    (m as u64) * (n as u64) * (k as u64) >= (1 << 27)
}

/// `gemm` with tf32 on Hopper, the operands not K-major (A column-major, B
/// row-major) transposed and rounded once by `round_tf32_transpose_kernel`
/// into the device's copies; the product then reads A row-major and B
/// column-major, the layouts `wgmma` reads tf32 operands in, through views
/// whose bulk copies round the untouched operand (rounding is idempotent on
/// the copies).
#[allow(clippy::too_many_arguments)]
fn gemm_kmajor_tf32<T: FloatElement, U: FloatElement>(
    dev: &Device,
    a: &Buffer<T>,
    b: &Buffer<T>,
    c: &mut Buffer<U>,
    m: usize,
    n: usize,
    k: usize,
    opts: &GemmOptions<'_, U>,
) -> Result<(), LibError> {
    use std::any::Any;
    fn as_f32<X: Any>(x: &X) -> Result<&Buffer<f32>, LibError> {
        (x as &dyn Any).downcast_ref::<Buffer<f32>>().ok_or_else(|| LibError::Config("gemm: tf32 applies to f32 inputs".into()))
    }
    fn back<X: Any>(x: &Buffer<f32>) -> Result<&X, LibError> {
        (x as &dyn Any).downcast_ref::<X>().ok_or_else(|| LibError::Config("gemm: tf32 applies to f32 inputs".into()))
    }
    let (a32, b32) = (as_f32(a)?, as_f32(b)?);
    let batch = opts.batch;
    let (ta, tb) = (opts.a_layout == Layout::ColMajor, opts.b_layout == Layout::RowMajor);
    let (len_a, len_b) = (batch * m * k, batch * k * n);
    // (beyond 2³¹ elements an operand stays as it is: the product then
    // reads it through `cp.async`, rounding in shared memory)
    if len_a.max(len_b) > i32::MAX as usize {
        return gemm_with(dev, a, b, c, m, n, k, opts, true);
    }
    let mut copies = crate::scratch::tf32_copies(dev, if ta { len_a } else { 0 }, if tb { len_b } else { 0 })?;
    const TILE: usize = 64;
    // (which copy, source, the stored matrices' rows × cols)
    for (which, src, on, (rows, cols)) in [(0, a32, ta, (k, m)), (1, b32, tb, (k, n))] {
        if on {
            let tiles = rows.div_ceil(TILE) * cols.div_ceil(TILE);
            let launch = LaunchConfig::new([tiles as u32, batch as u32, 1]).num_warps(4);
            round_tf32_transpose_kernel::launch(dev, launch, src, copies.buffer(which), rows as i32, cols as i32, TILE as i32)?;
        }
    }
    let (ra, rb) = copies.pair();
    // (T is f32: `as_f32` accepted A and B)
    let a2: &Buffer<T> = if ta { back(ra)? } else { a };
    let b2: &Buffer<T> = if tb { back(rb)? } else { b };
    let kmajor = GemmOptions { a_layout: Layout::RowMajor, b_layout: Layout::ColMajor, config: opts.config, ..*opts };
    gemm_with(dev, a2, b2, c, m, n, k, &kmajor, true)
}

/// `gemm` after the checks (`tf32`: [`gemm_kernel`]'s `TF32`).
#[allow(clippy::too_many_arguments)]
fn gemm_with<T: FloatElement, U: FloatElement>(
    dev: &Device,
    a: &Buffer<T>,
    b: &Buffer<T>,
    c: &mut Buffer<U>,
    m: usize,
    n: usize,
    k: usize,
    opts: &GemmOptions<'_, U>,
    tf32: bool,
) -> Result<(), LibError> {
    let batch = opts.batch;
    if let Some(cfg) = opts.config {
        return launch_gemm(dev, a, b, c, m, n, k, opts, cfg, tf32);
    }
    // GPUs: the autotuner picks the tile configuration per (dtype, precision,
    // layouts, size bucket) on problems large enough for timings to mean
    // something; small problems and the CPU use the heuristic.
    if dev.kind() == ferrotile::DeviceKind::Cpu || !large(m, n, k) {
        return launch_gemm(dev, a, b, c, m, n, k, opts, GemmConfig::default_for(m, n), tf32);
    }
    let b2 = |x: usize| x.max(1).next_power_of_two();
    let key = format!(
        "{}>{}{}|{:?}{:?}|m<={}|n<={}|k<={}|batch<={}",
        T::DTYPE,
        U::DTYPE,
        if opts.tf32 { "|tf32" } else { "" },
        opts.a_layout,
        opts.b_layout,
        b2(m),
        b2(n),
        b2(k),
        b2(batch)
    );
    let tuner = gemm_tuner();
    tuner.run(dev, &key, |tc| {
        let cfg = GemmConfig::from_tune(tc)?;
        if cfg.swap && m > 64 {
            return Err(ferrotile::Error::Launch { kernel: "gemm_kernel".into(), msg: format!("swapped tiles are for skinny products (M ≤ 64, here {m})") });
        }
        launch_gemm(dev, a, b, c, m, n, k, opts, cfg, tf32).map_err(crate::lib_to_launch)
    })?;
    Ok(())
}

/// The GEMM autotuner's candidates: large square tiles for big problems
/// (tensor-core friendly: each warp owns whole 16×8 tiles), narrow-M tiles
/// for skinny (decode) shapes, and the small default.
pub fn gemm_candidates() -> Vec<ferrotile::TuneConfig> {
    let c = |bm: i64, bn: i64, bk: i64, w: u32| ferrotile::TuneConfig::new(w).with("BM", bm).with("BN", bn).with("BK", bk).with("GROUP_M", 8);
    vec![
        c(128, 128, 32, 4),
        c(128, 128, 32, 4).stages(1),
        c(128, 128, 32, 8),
        c(128, 256, 32, 8),
        c(128, 256, 32, 8).stages(1),
        c(256, 128, 32, 8),
        c(128, 128, 64, 8),
        c(64, 128, 32, 4),
        c(128, 64, 32, 4),
        c(64, 64, 32, 4),
        c(16, 64, 128, 4),
        c(16, 128, 64, 4),
        c(32, 64, 64, 4),
        // decode (M ≤ 16): bandwidth-bound on B, so deep cp.async rings
        // keep more of it in flight per SM
        c(16, 64, 128, 4).stages(4),
        c(16, 64, 256, 4).stages(3),
        c(16, 32, 256, 4).stages(4),
        c(16, 128, 128, 4).stages(4),
        c(16, 64, 256, 4).stages(4),
        c(16, 64, 128, 8).stages(4),
        // ... two programs per SM (rings of ≤ 100 KB): narrower tiles, or
        // split-K (more programs than the 128 tiles of C)
        c(16, 32, 256, 4).stages(3),
        c(16, 64, 128, 4).stages(4).with("SPLIT_K", 2),
        c(16, 64, 128, 4).stages(4).with("SPLIT_K", 4),
        c(16, 64, 256, 4).stages(2).with("SPLIT_K", 2),
        // ... swapped (Cᵀ = Bᵀ·Aᵀ: 64 columns of C by 16 or 32 rows per
        // tile): on Hopper Bᵀ streams by bulk copies into M-major `wgmma`
        // slots and Aᵀ into narrow K-major ones, no padded rows. (Measured
        // and dropped: BK = 64 with 8 slots, 128-column tiles — half the
        // reads of A, on half the SMs —, split-K 2; RESULTS, session 9.)
        // (2–4 slots in flight are the best: deeper rings measured slower,
        // RESULTS, sessions 10–11)
        c(64, 16, 128, 4).stages(3).with("SWAP", 1),
        c(64, 16, 128, 4).stages(4).with("SWAP", 1),
        c(64, 16, 256, 4).stages(2).with("SWAP", 1),
        c(64, 16, 256, 4).stages(3).with("SWAP", 1),
        c(64, 16, 256, 4).stages(4).with("SWAP", 1),
        c(64, 32, 128, 4).stages(4).with("SWAP", 1),
        // ... in clusters of 2 whose programs share each Aᵀ tile (TMA
        // multicast from one stream): half the reads of A from L2; on par
        // with the unclustered tiles (RESULTS, sessions 9–10)
        c(64, 16, 128, 4).stages(4).with("SWAP", 1).with("CLUSTER", 2),
        c(64, 16, 256, 4).stages(3).with("SWAP", 1).with("CLUSTER", 2),
        // shapes that take Hopper's warpgroup MMAs (K a whole 64-element
        // swizzle atom, 16 rows per warp); elsewhere they run on mma.sync
        c(128, 256, 64, 8),
        c(128, 256, 64, 8).stages(3),
        c(256, 128, 64, 8).stages(3),
        c(128, 128, 64, 8).stages(3),
        c(128, 128, 64, 8).stages(4),
        c(128, 256, 64, 8).stages(1),
        c(256, 128, 64, 8).stages(1),
        c(128, 128, 64, 8).stages(1),
        c(128, 128, 64, 4).stages(1),
        // tf32 on warpgroup MMAs (K in whole 32-element atoms; 32-bit
        // operands take twice the ring of 16-bit ones)
        c(128, 128, 32, 8).stages(3),
        c(128, 128, 32, 8).stages(4),
        c(256, 128, 32, 8).stages(3),
        c(128, 256, 32, 8).stages(3),
        c(128, 256, 32, 8).stages(4),
    ]
}

fn gemm_tuner() -> &'static ferrotile::Autotuner {
    static T: std::sync::OnceLock<ferrotile::Autotuner> = std::sync::OnceLock::new();
    T.get_or_init(|| ferrotile::Autotuner::new("gemm", gemm_candidates()).reps(5))
}

#[allow(clippy::too_many_arguments)]
fn launch_gemm<T: FloatElement, U: FloatElement>(
    dev: &Device,
    a: &Buffer<T>,
    b: &Buffer<T>,
    c: &mut Buffer<U>,
    m: usize,
    n: usize,
    k: usize,
    opts: &GemmOptions<'_, U>,
    cfg: GemmConfig,
    tf32: bool,
) -> Result<(), LibError> {
    let batch = opts.batch;
    for (name, v) in [("bm", cfg.bm), ("bn", cfg.bn), ("bk", cfg.bk)] {
        if v < 16 || !v.is_power_of_two() {
            return Err(LibError::Config(format!("gemm: {name} = {v} must be a power of two ≥ 16")));
        }
    }
    if !(1..=2).contains(&cfg.cluster) {
        return Err(LibError::Config(format!("gemm: cluster = {} must be 1 or 2", cfg.cluster)));
    }
    let (mi, ni, ki) = (m as i64, n as i64, k as i64);
    let (sam, sak) = match opts.a_layout {
        Layout::RowMajor => (ki, 1),
        Layout::ColMajor => (1, mi),
    };
    let (sbk, sbn) = match opts.b_layout {
        Layout::RowMajor => (ni, 1),
        Layout::ColMajor => (1, ki),
    };
    let split = cfg.split_k.max(1) as usize;
    // (a placeholder kept per device: a fresh buffer per call would put an
    // allocation, a memset and a free — which synchronizes the device —
    // into every call)
    let placeholder;
    let bias: &Buffer<U> = match opts.bias {
        Some(bb) => bb,
        None => {
            placeholder = crate::scratch::placeholder::<U>(dev)?;
            &placeholder
        }
    };
    let act = opts.activation.code();
    let strides = [sam, sak, sbk, sbn];
    let epilogue = Epilogue { alpha: opts.alpha, act, has_bias: opts.bias.is_some() };
    if split > 1 {
        return launch_split_k(dev, a, b, c, bias, [m, n, k, batch, split], strides, epilogue, tf32, cfg);
    }
    launch_kernel(dev, a, b, c, bias, [m, n, k, batch], strides, (1, k, 0), epilogue, tf32, cfg)
}

/// The fused epilogue `gemm_kernel` applies (or, under split-K, the
/// reduction kernel).
#[derive(Clone, Copy)]
struct Epilogue {
    alpha: f32,
    act: i32,
    has_bias: bool,
}

/// One launch of `gemm_kernel` over `splits` K ranges of `k_split`
/// elements (the grid's z axis), the results of split `s` at `out + s·scs`
/// (row-major M × N per batch).
#[allow(clippy::too_many_arguments)]
fn launch_kernel<T: FloatElement, V: FloatElement>(
    dev: &Device,
    a: &Buffer<T>,
    b: &Buffer<T>,
    out: &mut Buffer<V>,
    bias: &Buffer<V>,
    [m, n, k, batch]: [usize; 4],
    [sam, sak, sbk, sbn]: [i64; 4],
    (splits, k_split, scs): (usize, usize, i64),
    e: Epilogue,
    tf32: bool,
    cfg: GemmConfig,
) -> Result<(), LibError> {
    let (mi, ni, ki) = (m as i64, n as i64, k as i64);
    // one product: batch strides 0 (unused, and divisible by 16, which
    // the view path's alignment facts want)
    let (sab, sbb, scb) = if batch == 1 { (0, 0, 0) } else { (mi * ki, ki * ni, mi * ni) };
    let args = kernel_args([m, n], [sam, sak, sbk, sbn, sab, sbb], ni, cfg.swap);
    let (a, b) = if cfg.swap { (b, a) } else { (a, b) };
    let [km, kn] = args.mn;
    let [sam, sak, sbk, sbn, sab, sbb] = args.strides;
    let tiles = (km.div_ceil(cfg.bm as usize) * kn.div_ceil(cfg.bn as usize)) as u32;
    // (clusters: a hint, taken where the tiles pair up)
    let cluster = if cfg.cluster > 1 && tiles.is_multiple_of(cfg.cluster) { cfg.cluster } else { 1 };
    let launch = LaunchConfig::new([tiles, batch as u32, splits as u32]).num_warps(cfg.num_warps).num_stages(cfg.num_stages.max(1)).cluster(cluster);
    // one tile along N: no grouped ordering (`GROUP_M = 0`)
    let group_m = if kn <= cfg.bn as usize { 0 } else { cfg.group_m.max(1) as i32 };
    let views = views_pay_off::<T>(dev, args.strides, (splits, k_split), cfg, tf32);
    let bias_mode = match (e.has_bias, cfg.swap) {
        (false, _) => 0,
        (true, false) => 1,
        (true, true) => 2,
    };
    gemm_kernel::launch(
        dev,
        launch,
        a,
        b,
        out,
        bias,
        km as i32,
        kn as i32,
        k as i32,
        sam,
        sak,
        sbk,
        sbn,
        args.scm,
        args.scn,
        sab,
        sbb,
        scb,
        e.alpha,
        k_split as i32,
        scs,
        cfg.bm as i32,
        cfg.bn as i32,
        cfg.bk as i32,
        group_m,
        e.act,
        bias_mode,
        tf32,
        views,
    )?;
    Ok(())
}

/// What `gemm_kernel` receives for an `m × n` product with operand strides
/// `[sam, sak, sbk, sbn, sab, sbb]` and C row-major with row stride `ldc`:
/// as they are, or for the swapped product `Cᵀ = Bᵀ·Aᵀ` (`swap`: A and B
/// exchanged, so the kernel's A is Bᵀ — strides `[sbn, sbk]` — and its B
/// is Aᵀ, its M is N, and C is written transposed: `scm = 1`, `scn = ldc`).
/// Public so that tests hold the backend to exactly what launches.
pub fn kernel_args([m, n]: [usize; 2], [sam, sak, sbk, sbn, sab, sbb]: [i64; 6], ldc: i64, swap: bool) -> KernelArgs {
    if swap {
        KernelArgs { mn: [n, m], strides: [sbn, sbk, sak, sam, sbb, sab], scm: 1, scn: ldc }
    } else {
        KernelArgs { mn: [m, n], strides: [sam, sak, sbk, sbn, sab, sbb], scm: ldc, scn: 1 }
    }
}

/// [`kernel_args`]' result: the kernel's `[m, n]`, `[sam, sak, sbk, sbn,
/// sab, sbb]`, `scm` and `scn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelArgs {
    /// The kernel's `[m, n]` (swapped for the transposed product).
    pub mn: [usize; 2],
    /// The kernel's `[sam, sak, sbk, sbn, sab, sbb]`.
    pub strides: [i64; 6],
    /// C's stride along the kernel's M.
    pub scm: i64,
    /// C's stride along the kernel's N.
    pub scn: i64,
}

/// Whether `gemm_kernel` should read A and B through views: where the PTX
/// backend turns those block loads into TMA bulk copies (the conditions of
/// `ptx::tma` and `ptx::async_copy`): Hopper; 16-bit operands, or f32 ones
/// rounded to tf32 (by the bulk copies); A row-major or (16-bit only)
/// M-major — the swapped product's Bᵀ, a column-major A —, B row-major
/// or K-major (column-major) — tf32 B only column-major, the one layout
/// `wgmma` reads it in — with the other strides multiples of 16 elements;
/// K ranges of whole `BK` blocks; a `wgmma`-shaped tile whose slot rows are
/// whole 128-byte atoms and whose boxes have at most 256 rows. Elsewhere
/// the masked pointer loads are the faster path (they vectorize and go
/// through `cp.async`).
///
/// `FERROTILE_GEMM_VIEWS=0` turns the view path off (for A/B runs against
/// the `cp.async` path; read once per process).
fn views_pay_off<T: FloatElement>(dev: &Device, strides: [i64; 6], split: (usize, usize), cfg: GemmConfig, tf32: bool) -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("FERROTILE_GEMM_VIEWS").map_or(true, |v| v != "0"))
        && dev.compute_capability().is_some_and(|sm| sm >= 90)
        && views_rule(T::DTYPE.size_bytes() as u32, strides, split, cfg, tf32)
}

/// The device-independent part of `views_pay_off`'s rule, for operands of
/// `es`-byte elements with strides `[sam, sak, sbk, sbn, sab, sbb]` (as
/// `gemm_kernel` receives them: [`kernel_args`]), `(splits, k_split)` and
/// `cfg`. Public so a test can hold it to what the PTX backend does
/// (`ptx_assemble`: `gemm_views_rule_matches_the_backend`).
pub fn views_rule(es: u32, [sam, sak, sbk, sbn, sab, sbb]: [i64; 6], (splits, k_split): (usize, usize), cfg: GemmConfig, tf32: bool) -> bool {
    let es = es as i64;
    let kmajor_a = sak == 1;
    let mmajor_a = sam == 1 && !kmajor_a;
    let kmajor_b = sbk == 1 && sbn != 1;
    let (a_ok, b_ok) = match es {
        2 => (kmajor_a || mmajor_a, sbn == 1 || kmajor_b),
        4 => (kmajor_a, tf32 && kmajor_b),
        _ => (false, false),
    };
    let a_outer = if kmajor_a { sam } else { sak };
    let b_outer = if kmajor_b { sbn } else { sbk };
    // the slots: rows of one 128-byte atom (per 64 16-bit / 32 f32
    // elements) along the source's unit stride, at most 256 rows a box:
    // A K-major BM × BK, M-major BK × BM; B N-major BK × BN, K-major BN × BK
    let (a_rows, a_cols) = if kmajor_a { (cfg.bm, cfg.bk) } else { (cfg.bk, cfg.bm) };
    let (b_rows, b_cols) = if kmajor_b { (cfg.bn, cfg.bk) } else { (cfg.bk, cfg.bn) };
    a_ok && b_ok
        // (tensor maps need strides in whole 16 bytes; the launch's facts
        // prove it from the power of two dividing each stride)
        && [a_outer, b_outer, sab, sbb].iter().all(|s| (s * es) % 16 == 0)
        && (splits == 1 || k_split % cfg.bk as usize == 0)
        // (policy: an unpipelined loop has nothing to overlap bulk copies
        // with; it keeps the pointer loads)
        && cfg.num_stages >= 2
        // `wgmma`: whole warpgroups along M, K in whole atoms, N in steps
        // of 8 (K-major B) or whole atoms (N-major), 256 per instruction
        && cfg.num_warps.is_multiple_of(4)
        && cfg.bm.is_multiple_of(16 * cfg.num_warps)
        && (cfg.bk as i64 * es) % 128 == 0
        && cfg.bn.is_multiple_of(8)
        && (cfg.bn <= 256 || cfg.bn.is_multiple_of(256))
        && [a_cols, b_cols].iter().all(|c| (*c as i64 * es) % 128 == 0)
        && a_rows <= 256
        && b_rows <= 256
}

/// Split-K: partial products into the device's f32 workspace, then
/// [`gemm_splitk_reduce`]. The workspace stays locked while both kernels
/// are queued, so concurrent callers cannot interleave their partials.
#[allow(clippy::too_many_arguments)]
fn launch_split_k<T: FloatElement, U: FloatElement>(
    dev: &Device,
    a: &Buffer<T>,
    b: &Buffer<T>,
    c: &mut Buffer<U>,
    bias: &Buffer<U>,
    [m, n, k, batch, split]: [usize; 5],
    strides: [i64; 4],
    e: Epilogue,
    tf32: bool,
    cfg: GemmConfig,
) -> Result<(), LibError> {
    if m > 64 || !(2..=16).contains(&split) {
        return Err(LibError::Config(format!("gemm: split-K ({split}) is for M ≤ 64 and 2..=16 splits (M = {m})")));
    }
    let bk = cfg.bk as usize;
    // K per split: whole BK steps
    let k_split = k.div_ceil(split).div_ceil(bk) * bk;
    if k_split * split > i32::MAX as usize {
        return Err(LibError::Shape(format!("gemm: K = {k} split {split} ways exceeds the 32-bit limits")));
    }
    let mn = m * n;
    let mut ws = crate::scratch::workspace(dev, split * batch * mn)?;
    let placeholder = crate::scratch::placeholder::<f32>(dev)?;
    // partials: no epilogue (the reduction applies it)
    let raw = Epilogue { alpha: 1.0, act: 0, has_bias: false };
    launch_kernel(dev, a, b, ws.buffer(), &placeholder, [m, n, k, batch], strides, (split, k_split, (batch * mn) as i64), raw, tf32, cfg)?;
    let launch = splitk_reduce_launch(m, n, batch, split).ok_or_else(|| LibError::Shape(format!("gemm: {m}×{n} is too large for split-K's reduction grid")))?;
    let (mi, ni) = (m as i64, n as i64);
    gemm_splitk_reduce::launch(
        dev,
        launch,
        ws.buffer(),
        c,
        bias,
        m as i32,
        n as i32,
        split as i32,
        ni,
        mi * ni,
        e.alpha,
        SPLITK_REDUCE_BLOCK as i32,
        e.act,
        e.has_bias,
    )?;
    Ok(())
}

/// Columns per program of [`gemm_splitk_reduce`].
pub(crate) const SPLITK_REDUCE_BLOCK: usize = 256;

/// The launch of [`gemm_splitk_reduce`] over `[m, n]` outputs of `batch`
/// products and `split` partials (`None`: too many programs for the grid).
/// Its loop over the partials is pipelined (`pipeline_every_loop`): the
/// loads of all the partials are in flight together — not one DRAM latency
/// per partial, one after the other, which is what a decode shape's few
/// programs waited for (H200, session 23: 5.7 µs for 8 partials of 8192
/// columns, next to a 22 µs GEMV). It reads what the product before it
/// wrote: a dependent launch (scheduled while the product runs).
pub(crate) fn splitk_reduce_launch(m: usize, n: usize, batch: usize, split: usize) -> Option<LaunchConfig> {
    let programs = m.checked_mul(n.div_ceil(SPLITK_REDUCE_BLOCK))?;
    if programs > i32::MAX as usize || batch > 65535 {
        return None;
    }
    Some(
        LaunchConfig::new([programs as u32, batch as u32, 1])
            .num_warps(2)
            .num_stages(split.clamp(2, 8) as u32)
            .pipeline_every_loop(true)
            .dependent_launch(true),
    )
}
