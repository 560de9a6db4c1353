//! GEMM: `C = act(alpha · A·B + bias)`, batched, any M, N, K, written in the DSL.
//!
//! One program computes a `BM × BN` tile of C with a K loop of `dot`s into
//! an f32 accumulator (masked edges: any M, N, K). A and B are addressed by
//! strides, so row- and column-major operands (and transposes) are the same
//! kernel. Programs are ordered in groups of `GROUP_M` row tiles for L2 reuse
//! (Triton's grouped ordering). The epilogue (scale, bias, ReLU/GELU, cast to
//! the output dtype) is fused; constexpr flags fold away what is not used.
//!
//! Backends: the CPU interpreter (reference: f32 accumulation, tf32 rounding
//! when asked); the PTX backend, where `dot` of f16/bf16 (and f32 with
//! tf32) runs on tensor cores with `mma.sync` and exact f32 on an FMA loop;
//! WGSL (FMA loop). On GPUs the tile configuration is autotuned per size
//! bucket ([`gemm_candidates`]); `GemmOptions::config` forces one.

use crate::LibError;
use ferrotile::prelude::*;
use ferrotile::FloatElement;

/// `C[b] = act(alpha · A[b]·B[b] + bias)` for a `BM × BN` tile per program;
/// grid = (tiles of C, batch).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn gemm_kernel<T: Float, U: Float, const BM: i32, const BN: i32, const BK: i32, const GROUP_M: i32, const ACT: i32, const HAS_BIAS: bool, const TF32: bool>(
    a: Ptr<T>,
    b: Ptr<T>,
    c: Ptr<U>,
    bias: Ptr<U>,
    m: i32,
    n: i32,
    k: i32,
    sam: i64,
    sak: i64,
    sbk: i64,
    sbn: i64,
    scm: i64,
    sab: i64,
    sbb: i64,
    scb: i64,
    alpha: f32,
) {
    static_assert(BM >= 16 && BN >= 16 && BK >= 16, "dot tiles must be at least 16 in every dimension");
    let pid = program_id(0);
    let batch = program_id(1) as i64;
    // grouped ordering: GROUP_M row tiles share their B tiles in L2
    let num_pid_m = cdiv(m, BM);
    let num_pid_n = cdiv(n, BN);
    let in_group = GROUP_M * num_pid_n;
    let first_m = (pid / in_group) * GROUP_M;
    let group_m = minimum(num_pid_m - first_m, GROUP_M);
    let pid_m = first_m + (pid % in_group) % group_m;
    let pid_n = (pid % in_group) / group_m;
    let rm = pid_m * BM + arange(0, BM);
    let rn = pid_n * BN + arange(0, BN);
    let rk = arange(0, BK);
    let a_rows = expand_dims((rm as i64) * sam, 1);
    let b_cols = expand_dims((rn as i64) * sbn, 0);
    let m_ok = expand_dims(rm < m, 1);
    let n_ok = expand_dims(rn < n, 0);
    let a0 = a + batch * sab;
    let b0 = b + batch * sbb;
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let kk = k0 + rk;
        let k_ok = kk < k;
        let at = load(a0 + a_rows + expand_dims((kk as i64) * sak, 0), m_ok & expand_dims(k_ok, 0), 0.0);
        let bt = load(b0 + expand_dims((kk as i64) * sbk, 1) + b_cols, expand_dims(k_ok, 1) & n_ok, 0.0);
        if TF32 {
            acc = dot_tf32(at, bt, acc);
        } else {
            acc = dot(at, bt, acc);
        }
    }
    let mut out = acc * alpha;
    if HAS_BIAS {
        out = out + expand_dims(load(bias + rn, rn < n, 0.0) as f32, 0);
    }
    if ACT == 1 {
        out = maximum(out, 0.0);
    }
    if ACT == 2 {
        // exact GELU: x/2 · (1 + erf(x/√2))
        out = 0.5 * out * (1.0 + erf(out * 0.7071067811865476));
    }
    let c_ptrs = c + batch * scb + expand_dims((rm as i64) * scm, 1) + expand_dims(rn, 0);
    store(c_ptrs, out as U, m_ok & n_ok);
}

/// How an operand is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Row-major as the product sees it (A is M×K, B is K×N).
    RowMajor,
    /// Column-major, i.e. the row-major storage of the transpose.
    ColMajor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    None,
    Relu,
    /// Exact (erf) GELU.
    Gelu,
}

/// Tile configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmConfig {
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub group_m: u32,
    pub num_warps: u32,
    /// 2 or more: the K loop's operand loads are prefetched `num_stages - 1`
    /// iterations ahead (software pipelining: on the wgmma path through a
    /// ring of `num_stages` shared-memory slots filled by `cp.async`,
    /// elsewhere in registers); 1: not.
    pub num_stages: u32,
}

impl GemmConfig {
    pub fn default_for(m: usize, n: usize) -> Self {
        let t = |x: usize| if x >= 64 { 64 } else if x >= 32 { 32 } else { 16 };
        GemmConfig { bm: t(m), bn: t(n), bk: 32, group_m: 8, num_warps: 4, num_stages: 2 }
    }
}

/// Options of [`gemm`].
pub struct GemmOptions<'a, U: FloatElement> {
    pub a_layout: Layout,
    pub b_layout: Layout,
    /// Bias of length N, added to every row.
    pub bias: Option<&'a Buffer<U>>,
    pub activation: Activation,
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
        GemmOptions { a_layout: Layout::RowMajor, b_layout: Layout::RowMajor, bias: None, activation: Activation::None, alpha: 1.0, tf32: false, batch: 1, config: None }
    }
}

/// `C = act(alpha · A·B + bias)` with A: M×K, B: K×N, C: M×N row-major,
/// each `batch` times. Inputs of dtype `T` (f32, f16, bf16), output `U`.
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
    let need = |what: &str, len: usize, per: usize| -> Result<(), LibError> {
        let want = per.checked_mul(batch).ok_or_else(|| LibError::Shape("gemm: sizes overflow".into()))?;
        if len < want {
            return Err(LibError::Shape(format!("gemm: `{what}` has {len} elements, {batch} × {per} needed")));
        }
        Ok(())
    };
    need("a", a.len(), m * k)?;
    need("b", b.len(), k * n)?;
    need("c", c.len(), m * n)?;
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
    if let Some(cfg) = opts.config {
        return launch_gemm(dev, a, b, c, m, n, k, opts, cfg);
    }
    // GPUs: the autotuner picks the tile configuration per (dtype, precision,
    // layouts, size bucket) on problems large enough for timings to mean
    // something; small problems and the CPU use the heuristic.
    if dev.kind() == ferrotile::DeviceKind::Cpu || (m as u64) * (n as u64) * (k as u64) < (1 << 27) {
        return launch_gemm(dev, a, b, c, m, n, k, opts, GemmConfig::default_for(m, n));
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
        let cfg = GemmConfig { bm: tc.get("BM")? as u32, bn: tc.get("BN")? as u32, bk: tc.get("BK")? as u32, group_m: tc.get("GROUP_M")? as u32, num_warps: tc.num_warps, num_stages: tc.num_stages };
        launch_gemm(dev, a, b, c, m, n, k, opts, cfg).map_err(crate::lib_to_launch)
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
) -> Result<(), LibError> {
    let batch = opts.batch;
    for (name, v) in [("bm", cfg.bm), ("bn", cfg.bn), ("bk", cfg.bk)] {
        if v < 16 || !v.is_power_of_two() {
            return Err(LibError::Config(format!("gemm: {name} = {v} must be a power of two ≥ 16")));
        }
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
    let tiles = (m.div_ceil(cfg.bm as usize) * n.div_ceil(cfg.bn as usize)) as u32;
    let launch = LaunchConfig::new([tiles, batch as u32, 1]).num_warps(cfg.num_warps).num_stages(cfg.num_stages.max(1));
    let dummy;
    let bias = match opts.bias {
        Some(bb) => bb,
        None => {
            dummy = dev.zeros::<U>(1)?;
            &dummy
        }
    };
    let act = match opts.activation {
        Activation::None => 0,
        Activation::Relu => 1,
        Activation::Gelu => 2,
    };
    gemm_kernel::launch(
        dev,
        launch,
        a,
        b,
        c,
        bias,
        m as i32,
        n as i32,
        k as i32,
        sam,
        sak,
        sbk,
        sbn,
        ni,
        mi * ki,
        ki * ni,
        mi * ni,
        opts.alpha,
        cfg.bm as i32,
        cfg.bn as i32,
        cfg.bk as i32,
        cfg.group_m.max(1) as i32,
        act,
        opts.bias.is_some(),
        opts.tf32,
    )?;
    Ok(())
}
