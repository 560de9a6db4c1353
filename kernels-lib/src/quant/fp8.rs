//! FP8 GEMM: `out[i, j] = act(sa · sb · Σ_k a[i, k]·b[j, k] + bias[j])`
//! with `a` `[m, k]` and `b` `[n, k]` in `f8e4m3` or `f8e5m2`, scales per
//! tensor, per row of `a` and of `b` (row-wise: one per token and one per
//! output channel), or per block (DeepSeek-V3: 1 × 128 for `a`, 128 × 128
//! for `b`, applied to each K block's product before it is accumulated),
//! f16/bf16 out.
//!
//! **The kernel** ([`fp8_gemm_kernel`], in the DSL): grouped `BM × BN`
//! tiles, `dot(a_tile, trans(b_tile), acc)` into f32 — on sm_90a the
//! compiler puts it on `wgmma` e4m3/e5m2 with both operands K-major by TMA
//! (`b` stored along K is what the instruction reads) — then the scales,
//! bias and activation in f32 and one cast. Hopper's tensor cores add fp8
//! products keeping about 14 bits (what `torch._scaled_mm` calls fast
//! accumulation): a sum's error grows by up to about 2⁻¹³ of the terms'
//! magnitude per 32-deep step (the tests' bound; 1.2–1.4× 2⁻¹² measured
//! at K = 300–640). On sm_80 and WGSL the `dot` runs on the FMA path (f32).
//! For few rows (M ≤ 64) the tuner's tiles split K over the grid's second
//! axis: f32 partials, summed in a fixed order by
//! `gemm::gemm_splitk_reduce` with the bias and activation, as the W8A8
//! GEMM does — a 16-row product at N = 8192 has 64–128 tiles of 64 rows
//! for 132 SMs (H100, session 54: 6–17 % faster with two K ranges).

use crate::epilogue::activation;
use crate::gemm::Activation;
use crate::quant::W8A8Config;
use crate::LibError;
use ferrotile::prelude::*;
use ferrotile::FloatElement;

/// `out = act(scale ∘ (a · bᵀ) + bias)` (module doc). `SCALES` 0: the
/// scale is `ta · tb`; 1 (row-wise): `sa[i] · sb[j]` (times `ta · tb`); 2
/// (block-wise, DeepSeek-V3's): each 128-deep K block `kb` of the product
/// is scaled by `sa[i, kb] · sb[j / 128, kb]` (`a` in 1 × 128 blocks, `b`
/// in 128 × 128) before it joins the f32 accumulator — `BK` must be 128
/// and `BN` divide 128. `BIAS`: add `bias[n]`; `ACT`: 0 none, 1 ReLU, 2
/// exact GELU. `SPLIT`: the program's K range is `[program_id(1) ·
/// k_split, +k_split)` (`k_split` a multiple of `BK`, of `2 · BK` with
/// block-wise scales) and it writes its scaled f32 partial to
/// `part[program_id(1)]` (`[splits, m, n]`; bias and activation then come
/// with the sum, `gemm::gemm_splitk_reduce`) — for few rows, whose tiles
/// alone make fewer programs than the SMs hold.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn fp8_gemm_kernel<
    T: Float,
    U: Float,
    const BM: i32,
    const BN: i32,
    const BK: i32,
    const GROUP_M: i32,
    const CLUSTER: i32,
    const SCALES: i32,
    const BIAS: bool,
    const ACT: i32,
    const SPLIT: bool,
>(
    a: Ptr<T>,
    b: Ptr<T>,
    sa: Ptr<f32>,
    sb: Ptr<f32>,
    bias: Ptr<U>,
    out: Ptr<U>,
    part: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
    so: i64,
    ta: f32,
    tb: f32,
    k_split: i32,
) {
    static_assert(BM >= 16 && BN >= 16 && BK >= 32, "BM, BN ≥ 16 and BK ≥ 32 (one fp8 MMA step)");
    static_assert(SCALES != 2 || 128 % BK == 0, "block-wise scales: BK divides the 128-deep scale block");
    // programs in pairs with CLUSTER = 2 (a cluster of two along x): both
    // take the same column of tiles and neighbouring rows, so the tile of
    // `b` they both read depends on the pair only — the compiler copies it
    // once for the cluster (TMA multicast)
    let rank = program_id(0) % CLUSTER;
    let num_pid_m = cdiv(m, BM * CLUSTER);
    let num_pid_n = cdiv(n, BN);
    let in_group = GROUP_M * num_pid_n;
    let va = view(a, [m, k], [k, 1]);
    let vb = view(b, [n, k], [k, 1]);
    let kblocks = cdiv(k, 128) as i64;
    let mut k_lo = 0;
    let mut k_hi = k;
    if SPLIT {
        k_lo = program_id(1) * k_split;
        k_hi = minimum(k_lo + k_split, k);
    }
    // each program (pair) takes the tiles `pair, pair + programs, ...`: one
    // tile with a grid of one program per tile, several with a persistent
    // grid (about one program per SM) — a program's copies for its next
    // tile are then issued while it stores this one
    for pair in range(program_id(0) / CLUSTER, num_pid_m * num_pid_n, num_programs(0) / CLUSTER) {
        let first_m = (pair / in_group) * GROUP_M;
        let group_m = minimum(num_pid_m - first_m, GROUP_M);
        let pid_m = (first_m + (pair % in_group) % group_m) * CLUSTER + rank;
        let pid_n = (pair % in_group) / group_m;
        let rm = pid_m * BM + arange(0, BM);
        let rn = pid_n * BN + arange(0, BN);
        let m_ok = rm < m;
        let n_ok = rn < n;
        let mut acc = zeros([BM, BN], f32);
        if SCALES == 2 {
            // two K steps a loop step: each step's product is scaled before
            // it joins the f32 accumulator, so a step's MMAs must finish
            // before its scaling — the second step's MMAs are issued
            // first, and run while the first step is scaled (each step
            // within one 128-deep scale block: BK divides 128; past K, the
            // second step reads zeros and its scales are 0)
            let sbn = ((pid_n * BN / 128) as i64) * kblocks;
            for k0 in (k_lo..k_hi).step_by(2 * BK) {
                let k1 = k0 + BK;
                let kb0 = (k0 / 128) as i64;
                let kb1 = (k1 / 128) as i64;
                let has1 = k1 < k_hi;
                let s_a0 = load(sa + (rm as i64) * kblocks + kb0, m_ok, 0.0);
                let s_b0 = load(sb + sbn + kb0);
                let s_a1 = load(sa + (rm as i64) * kblocks + kb1, m_ok & has1, 0.0);
                let s_b1 = load(sb + sbn + kb1, has1, 0.0);
                let d0 = dot(load_block(va, [pid_m * BM, k0], [BM, BK]), trans(load_block(vb, [pid_n * BN, k0], [BN, BK])));
                let d1 = dot(load_block(va, [pid_m * BM, k1], [BM, BK]), trans(load_block(vb, [pid_n * BN, k1], [BN, BK])));
                acc = acc + d0 * (expand_dims(s_a0, 1) * s_b0);
                acc = acc + d1 * (expand_dims(s_a1, 1) * s_b1);
            }
        } else {
            for k0 in (k_lo..k_hi).step_by(BK) {
                acc = dot(load_block(va, [pid_m * BM, k0], [BM, BK]), trans(load_block(vb, [pid_n * BN, k0], [BN, BK])), acc);
            }
        }
        let mut o = acc * (ta * tb);
        if SCALES == 1 {
            o = o * (expand_dims(load(sa + rm, m_ok, 0.0), 1) * expand_dims(load(sb + rn, n_ok, 0.0), 0));
        }
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

/// How [`fp8_gemm`] scales the product.
#[derive(Clone, Copy)]
pub enum Fp8Scales<'a> {
    /// One scale for `a` and one for `b`.
    Tensor {
        /// The scale of `a`.
        a: f32,
        /// The scale of `b`.
        b: f32,
    },
    /// One per row of `a` (`[m]`) and one per row of `b` (`[n]`: per output
    /// channel).
    Rows {
        /// `[m]`.
        a: &'a Buffer<f32>,
        /// `[n]`.
        b: &'a Buffer<f32>,
    },
    /// DeepSeek-V3's block-wise scales: `a` per row and 128-deep K block
    /// (`[m, ⌈k/128⌉]`), `b` per 128 × 128 block (`[⌈n/128⌉, ⌈k/128⌉]`).
    /// Each K block's product is scaled before it is accumulated (in f32),
    /// so the kernel takes 128-deep steps and tiles of at most 128 columns.
    Blocks {
        /// `[m, ⌈k/128⌉]`.
        a: &'a Buffer<f32>,
        /// `[⌈n/128⌉, ⌈k/128⌉]`.
        b: &'a Buffer<f32>,
    },
}

/// Options of [`fp8_gemm`].
pub struct Fp8Options<'a, U: FloatElement> {
    /// How the product is scaled.
    pub scales: Fp8Scales<'a>,
    /// Added to every row (`[n]`).
    pub bias: Option<&'a Buffer<U>>,
    /// The activation after the bias.
    pub activation: Activation,
    /// Row stride of `out` in elements (0: `n`).
    pub out_row_stride: usize,
    /// A fixed tile configuration (`split_k` from 1 to 16) instead of the
    /// tuner's.
    pub config: Option<W8A8Config>,
}

impl<U: FloatElement> Default for Fp8Options<'_, U> {
    fn default() -> Self {
        Fp8Options { scales: Fp8Scales::Tensor { a: 1.0, b: 1.0 }, bias: None, activation: Activation::None, out_row_stride: 0, config: None }
    }
}

/// The tuner's candidates for `m` rows: [`super::w8a8_candidates`]'
/// tiles (fp8 moves the bytes int8 does) — for `m` ≤ 64, 64-row tiles
/// with K split over 1, 2 or 4 ranges, so that a few rows still spread
/// the weights over every SM; for block-wise scales (`blockwise`), 128-deep
/// K blocks at most 128 columns wide, with at most 64 accumulator elements
/// per thread (each block's product is an accumulator-sized tile, two of
/// them in flight); the kernel takes two blocks a loop step, so a stage
/// holds four tiles (two of `a`, two of `b`) and two or three stages fill
/// the shared memory — for `m` ≤ 64 the 64 × 64 tile with K split over 1,
/// 2, 4 or 8 ranges.
pub fn fp8_candidates(m: usize, blockwise: bool) -> Vec<ferrotile::TuneConfig> {
    if !blockwise {
        return super::w8a8_candidates(m);
    }
    if m <= 64 {
        return [1u32, 2, 4, 8]
            .iter()
            .map(|&split_k| W8A8Config { bm: 64, bn: 64, bk: 128, num_warps: 4, num_stages: 3, split_k, persistent: false }.to_tune())
            .collect();
    }
    // (128×128 at two stages and 64×128 on four warps spill 16–24 bytes
    // with two blocks' products live: left out)
    [(128u32, 128u32, 8u32, 3u32), (128, 64, 4, 3), (64, 64, 4, 3)]
        .iter()
        .map(|&(bm, bn, num_warps, num_stages)| W8A8Config { bm, bn, bk: 128, num_warps, num_stages, split_k: 1, persistent: false }.to_tune())
        .collect()
}

/// `out[m, n] = act(scales ∘ (a · bᵀ) + bias)` (module doc): `a` `[m, k]`
/// and `b` `[n, k]` contiguous, both `f8e4m3` or both `f8e5m2`; `U` f16 or
/// bf16.
///
/// ```
/// use ferrotile::{bf16, f8e4m3, Device};
/// use ferrotile_kernels::quant::{fp8_gemm, Fp8Options, Fp8Scales};
/// let dev = Device::cpu();
/// let (m, n, k) = (2, 3, 32);
/// let a = dev.from_slice(&vec![f8e4m3::from_f32(0.5); m * k])?; // [m, k]
/// let b = dev.from_slice(&vec![f8e4m3::from_f32(2.0); n * k])?; // [n, k]
/// let sa = dev.from_slice(&[1.0f32, 2.0])?; // one per row of a
/// let sb = dev.from_slice(&[1.0f32, 1.0, 0.5])?; // one per row of b
/// let mut y = dev.zeros::<bf16>(m * n)?;
/// let opts = Fp8Options { scales: Fp8Scales::Rows { a: &sa, b: &sb }, ..Default::default() };
/// fp8_gemm(&dev, &a, &b, &mut y, m, n, k, &opts)?;
/// // each dot is 32 · 0.5 · 2 = 32, then scaled
/// let y: Vec<f32> = y.to_vec()?.iter().map(|v| v.to_f32()).collect();
/// assert_eq!(y, vec![32.0, 32.0, 16.0, 64.0, 64.0, 32.0]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn fp8_gemm<T: FloatElement, U: FloatElement>(
    dev: &Device,
    a: &Buffer<T>,
    b: &Buffer<T>,
    out: &mut Buffer<U>,
    m: usize,
    n: usize,
    k: usize,
    opts: &Fp8Options<U>,
) -> Result<(), LibError> {
    use ferrotile::ir::DType;
    if T::DTYPE.fp8().is_none() {
        return Err(LibError::Config(format!("fp8_gemm: the operands must be f8e4m3 or f8e5m2, got {}", T::DTYPE)));
    }
    if !matches!(U::DTYPE, DType::F16 | DType::BF16) {
        return Err(LibError::Config(format!("fp8_gemm: the output must be f16 or bf16, got {}", U::DTYPE)));
    }
    if [m, n, k].iter().any(|&x| x > i32::MAX as usize / 2) || k == 0 {
        return Err(LibError::Shape(format!("fp8_gemm: {m}×{n}×{k} must have K > 0 and fit the 32-bit limits")));
    }
    let so = if opts.out_row_stride == 0 { n } else { opts.out_row_stride };
    if so < n {
        return Err(LibError::Shape(format!("fp8_gemm: the row stride of out ({so}) must be at least N = {n}")));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    let need = |what: &str, have: usize, want: usize| crate::need_len("fp8_gemm", what, have, want);
    need("a", a.len(), m * k)?;
    need("b", b.len(), n * k)?;
    need("out", out.len(), crate::rows_extent("fp8_gemm", "out", m, so, n)?)?;
    if let Some(bias) = opts.bias {
        need("bias", bias.len(), n)?;
    }
    let placeholder = crate::scratch::placeholder::<f32>(dev)?;
    let (sa, sb, ta, tb, mode) = match opts.scales {
        Fp8Scales::Tensor { a, b } => {
            if !a.is_finite() || !b.is_finite() {
                return Err(LibError::Config(format!("fp8_gemm: the tensor scales must be finite, got {a} and {b}")));
            }
            (&*placeholder, &*placeholder, a, b, 0)
        }
        Fp8Scales::Rows { a: sa, b: sb } => {
            need("scales.a", sa.len(), m)?;
            need("scales.b", sb.len(), n)?;
            (sa, sb, 1.0, 1.0, 1)
        }
        Fp8Scales::Blocks { a: sa, b: sb } => {
            let kb = k.div_ceil(128);
            need("scales.a", sa.len(), m * kb)?;
            need("scales.b", sb.len(), n.div_ceil(128) * kb)?;
            (sa, sb, 1.0, 1.0, 2)
        }
    };
    let mut run = |c: W8A8Config| launch(dev, (a, b, sa, sb), out, (m, n, k, so), (ta, tb, mode), opts, c);
    if let Some(c) = opts.config {
        return run(c);
    }
    // (block-wise scales: 128-deep K blocks, tiles of at most 128 columns,
    // at most three stages of two blocks each)
    let blocks = |c: W8A8Config| if mode == 2 { W8A8Config { bk: 128, bn: c.bn.min(128), num_stages: c.num_stages.min(3), ..c } } else { c };
    if dev.kind() != ferrotile::DeviceKind::Cuda || (m as u64) * (n as u64) * (k as u64) < (1 << 24) {
        return run(blocks(W8A8Config::default_for(dev)));
    }
    let b2 = |v: usize| v.max(1).next_power_of_two();
    let key = format!("fp8|{}|{}|scales{mode}|m<={}|n<={}|k<={}", T::DTYPE, U::DTYPE, b2(m), b2(n), b2(k));
    // (one tuner per candidate list: block-wise scales or not, few rows
    // or many)
    static TUNERS: std::sync::OnceLock<[ferrotile::Autotuner; 4]> = std::sync::OnceLock::new();
    // (row-wise and per tensor: the int8 list, its widest tiles on a
    // persistent grid; block-wise: the persistent grid tried on the three
    // finalists, side by side with them — it took it on both shapes
    // measured, RESULTS session 52)
    let tuners = TUNERS.get_or_init(|| {
        [(1, false), (4096, false), (1, true), (4096, true)].map(|(rows, b)| {
            let t = ferrotile::Autotuner::new("fp8_gemm", fp8_candidates(rows, b)).reps(5);
            if b && rows > 64 {
                t.finalist_knob("PERSISTENT", 0, &[1])
            } else {
                t
            }
        })
    });
    tuners[2 * (mode == 2) as usize + (m > 64) as usize].run(dev, &key, |tc| run(blocks(W8A8Config::from_tune(tc)?)).map_err(crate::lib_to_launch))?;
    Ok(())
}

#[allow(clippy::type_complexity)]
fn launch<T: FloatElement, U: FloatElement>(
    dev: &Device,
    (a, b, sa, sb): (&Buffer<T>, &Buffer<T>, &Buffer<f32>, &Buffer<f32>),
    out: &mut Buffer<U>,
    (m, n, k, so): (usize, usize, usize, usize),
    (ta, tb, mode): (f32, f32, i32),
    opts: &Fp8Options<U>,
    c: W8A8Config,
) -> Result<(), LibError> {
    let ok = |v: u32, lo: u32, hi: u32| v.is_power_of_two() && (lo..=hi).contains(&v);
    if !ok(c.bm, 16, 256) || !ok(c.bn, 16, 256) || !ok(c.bk, 32, 256) || !ok(c.num_warps, 1, 16) || c.num_stages == 0 || !(1..=16).contains(&c.split_k) {
        return Err(LibError::Config(format!("fp8_gemm: invalid configuration {c:?} (split_k from 1 to 16)")));
    }
    if mode == 2 && (c.bk != 128 || c.bn > 128) {
        return Err(LibError::Config(format!("fp8_gemm: block-wise scales need BK = 128 and BN ≤ 128, got {c:?}")));
    }
    let tiles = m.div_ceil(c.bm as usize) * n.div_ceil(c.bn as usize);
    if tiles > u32::MAX as usize / 2 {
        return Err(LibError::Shape(format!("fp8_gemm: {tiles} tiles exceed the grid")));
    }
    // (a producer warpgroup issues the TMA copies where the compiler can
    // split them off — sm_90; measured on an H100, session 51: −4 % at
    // 4096³, −3 to −8 % at 8192³ on the tuner's 256-deep tiles)
    let programs = if c.persistent { super::int8::persistent_programs(dev, tiles, 1) } else { tiles };
    // K ranges of whole loop steps (block-wise: two BK blocks a step)
    let step = c.bk as usize * if mode == 2 { 2 } else { 1 };
    let k_split = k.div_ceil(c.split_k as usize).div_ceil(step) * step;
    let splits = k.div_ceil(k_split);
    let split = splits > 1;
    // (block-wise: each K block's scales are loaded in the slice of the
    // accumulator's layout, not converted through shared memory every
    // step — H100, session 52: −16 % at 4096³, −11 % at 8192³)
    let cfg = LaunchConfig::new([programs as u32, splits as u32, 1])
        .num_warps(c.num_warps)
        .num_stages(c.num_stages)
        .warp_specialize(true)
        .broadcast_slices(mode == 2);
    let placeholder = crate::scratch::placeholder::<U>(dev)?;
    let bias = opts.bias.unwrap_or(&placeholder);
    let act = opts.activation.code();
    let mut part = crate::scratch::workspace(dev, if split { splits * m * n } else { 1 })?;
    fp8_gemm_kernel::launch(
        dev,
        cfg,
        a,
        b,
        sa,
        sb,
        bias,
        out,
        part.buffer(),
        m as i32,
        n as i32,
        k as i32,
        so as i64,
        ta,
        tb,
        k_split as i32,
        c.bm as i32,
        c.bn as i32,
        c.bk as i32,
        8,
        // (`CLUSTER` 1: one program per tile. The kernel can pair its
        // programs in clusters of two along x — grid `cdiv(m, 2·BM)·2` rows
        // of tiles, the pair's `b` tile multicast —, which measured slower
        // on an H100: RESULTS, session 51)
        1,
        mode,
        opts.bias.is_some(),
        act,
        split,
    )?;
    if split {
        // the partials summed in split order, then bias, activation, cast
        let epi = super::Epilogue { bias, has_bias: opts.bias.is_some(), act };
        super::reduce(dev, "fp8_gemm", &mut part, out, epi, (m, n, splits, so))?;
    }
    Ok(())
}
