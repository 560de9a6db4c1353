//! FP8 GEMM: `out[i, j] = act(sa · sb · Σ_k a[i, k]·b[j, k] + bias[j])`
//! with `a` `[m, k]` and `b` `[n, k]` in `f8e4m3` or `f8e5m2`, scales per
//! tensor or per row of `a` and of `b` (row-wise: one per token and one per
//! output channel), f16/bf16 out.
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

use crate::gemm::Activation;
use crate::quant::W8A8Config;
use crate::LibError;
use ferrotile::prelude::*;
use ferrotile::FloatElement;

/// `out = act(scale ∘ (a · bᵀ) + bias)` (module doc). `ROWWISE`: the scale
/// of `(i, j)` is `sa[i] · sb[j]` (times `ta · tb`); else `ta · tb`.
/// `BIAS`: add `bias[n]`; `ACT`: 0 none, 1 ReLU, 2 exact GELU.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn fp8_gemm_kernel<
    T: Float,
    U: Float,
    const BM: i32,
    const BN: i32,
    const BK: i32,
    const GROUP_M: i32,
    const ROWWISE: bool,
    const BIAS: bool,
    const ACT: i32,
>(
    a: Ptr<T>,
    b: Ptr<T>,
    sa: Ptr<f32>,
    sb: Ptr<f32>,
    bias: Ptr<U>,
    out: Ptr<U>,
    m: i32,
    n: i32,
    k: i32,
    so: i64,
    ta: f32,
    tb: f32,
) {
    static_assert(BM >= 16 && BN >= 16 && BK >= 32, "BM, BN ≥ 16 and BK ≥ 32 (one fp8 MMA step)");
    let pid = program_id(0);
    let num_pid_m = cdiv(m, BM);
    let num_pid_n = cdiv(n, BN);
    let in_group = GROUP_M * num_pid_n;
    let first_m = (pid / in_group) * GROUP_M;
    let group_m = minimum(num_pid_m - first_m, GROUP_M);
    let pid_m = first_m + (pid % in_group) % group_m;
    let pid_n = (pid % in_group) / group_m;
    let va = view(a, [m, k], [k, 1]);
    let vb = view(b, [n, k], [k, 1]);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let at = load_block(va, [pid_m * BM, k0], [BM, BK]);
        let bt = load_block(vb, [pid_n * BN, k0], [BN, BK]);
        acc = dot(at, trans(bt), acc);
    }
    let rm = pid_m * BM + arange(0, BM);
    let rn = pid_n * BN + arange(0, BN);
    let m_ok = rm < m;
    let n_ok = rn < n;
    let mut o = acc * (ta * tb);
    if ROWWISE {
        o = o * (expand_dims(load(sa + rm, m_ok, 0.0), 1) * expand_dims(load(sb + rn, n_ok, 0.0), 0));
    }
    if BIAS {
        o = o + expand_dims(load(bias + rn, n_ok, 0.0) as f32, 0);
    }
    if ACT == 1 {
        o = maximum(o, 0.0);
    }
    if ACT == 2 {
        o = 0.5 * o * (1.0 + erf(o * 0.7071067811865476));
    }
    store(out + expand_dims((rm as i64) * so, 1) + expand_dims(rn, 0), o as U, expand_dims(m_ok, 1) & expand_dims(n_ok, 0));
}

/// How [`fp8_gemm`] scales the product.
#[derive(Clone, Copy)]
pub enum Fp8Scales<'a> {
    /// One scale for `a` and one for `b`.
    Tensor { a: f32, b: f32 },
    /// One per row of `a` (`[m]`) and one per row of `b` (`[n]`: per output
    /// channel).
    Rows { a: &'a Buffer<f32>, b: &'a Buffer<f32> },
}

/// Options of [`fp8_gemm`].
pub struct Fp8Options<'a, U: FloatElement> {
    pub scales: Fp8Scales<'a>,
    pub bias: Option<&'a Buffer<U>>,
    pub activation: Activation,
    /// Row stride of `out` in elements (0: `n`).
    pub out_row_stride: usize,
    /// A fixed tile configuration (`split_k` must be 1) instead of the
    /// tuner's.
    pub config: Option<W8A8Config>,
}

impl<U: FloatElement> Default for Fp8Options<'_, U> {
    fn default() -> Self {
        Fp8Options { scales: Fp8Scales::Tensor { a: 1.0, b: 1.0 }, bias: None, activation: Activation::None, out_row_stride: 0, config: None }
    }
}

/// The tuner's candidates: [`super::w8a8_candidates`]' tiles for many rows
/// (fp8 moves the bytes int8 does), without split K.
pub fn fp8_candidates() -> Vec<ferrotile::TuneConfig> {
    super::w8a8_candidates(4096)
}

/// `out[m, n] = act(scales ∘ (a · bᵀ) + bias)` (module doc): `a` `[m, k]`
/// and `b` `[n, k]` contiguous, both `f8e4m3` or both `f8e5m2`; `U` f16 or
/// bf16.
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
    let need = |what: &str, have: usize, want: usize| {
        if have < want {
            Err(LibError::Shape(format!("fp8_gemm: `{what}` has {have} elements, {want} needed")))
        } else {
            Ok(())
        }
    };
    need("a", a.len(), m * k)?;
    need("b", b.len(), n * k)?;
    need("out", out.len(), (m - 1) * so + n)?;
    if let Some(bias) = opts.bias {
        need("bias", bias.len(), n)?;
    }
    let placeholder = crate::scratch::placeholder::<f32>(dev)?;
    let (sa, sb, ta, tb, rowwise) = match opts.scales {
        Fp8Scales::Tensor { a, b } => {
            if !a.is_finite() || !b.is_finite() {
                return Err(LibError::Config(format!("fp8_gemm: the tensor scales must be finite, got {a} and {b}")));
            }
            (&*placeholder, &*placeholder, a, b, false)
        }
        Fp8Scales::Rows { a: sa, b: sb } => {
            need("scales.a", sa.len(), m)?;
            need("scales.b", sb.len(), n)?;
            (sa, sb, 1.0, 1.0, true)
        }
    };
    let mut run = |c: W8A8Config| launch(dev, (a, b, sa, sb), out, (m, n, k, so), (ta, tb, rowwise), opts, c);
    if let Some(c) = opts.config {
        return run(c);
    }
    if dev.kind() != ferrotile::DeviceKind::Cuda || (m as u64) * (n as u64) * (k as u64) < (1 << 24) {
        return run(W8A8Config::default_for(dev));
    }
    let b2 = |v: usize| v.max(1).next_power_of_two();
    let key = format!("fp8|{}|{}|m<={}|n<={}|k<={}", T::DTYPE, U::DTYPE, b2(m), b2(n), b2(k));
    static TUNER: std::sync::OnceLock<ferrotile::Autotuner> = std::sync::OnceLock::new();
    let tuner = TUNER.get_or_init(|| ferrotile::Autotuner::new("fp8_gemm", fp8_candidates()).reps(5));
    tuner.run(dev, &key, |tc| {
        let c = W8A8Config {
            bm: tc.get("BM")? as u32,
            bn: tc.get("BN")? as u32,
            bk: tc.get("BK")? as u32,
            num_warps: tc.num_warps,
            num_stages: tc.num_stages,
            split_k: 1,
        };
        run(c).map_err(crate::lib_to_launch)
    })?;
    Ok(())
}

#[allow(clippy::type_complexity)]
fn launch<T: FloatElement, U: FloatElement>(
    dev: &Device,
    (a, b, sa, sb): (&Buffer<T>, &Buffer<T>, &Buffer<f32>, &Buffer<f32>),
    out: &mut Buffer<U>,
    (m, n, k, so): (usize, usize, usize, usize),
    (ta, tb, rowwise): (f32, f32, bool),
    opts: &Fp8Options<U>,
    c: W8A8Config,
) -> Result<(), LibError> {
    let ok = |v: u32, lo: u32, hi: u32| v.is_power_of_two() && (lo..=hi).contains(&v);
    if !ok(c.bm, 16, 256) || !ok(c.bn, 16, 256) || !ok(c.bk, 32, 256) || !ok(c.num_warps, 1, 16) || c.num_stages == 0 || c.split_k != 1 {
        return Err(LibError::Config(format!("fp8_gemm: invalid configuration {c:?} (split_k must be 1)")));
    }
    let tiles = m.div_ceil(c.bm as usize) * n.div_ceil(c.bn as usize);
    if tiles > u32::MAX as usize / 2 {
        return Err(LibError::Shape(format!("fp8_gemm: {tiles} tiles exceed the grid")));
    }
    let cfg = LaunchConfig::new([tiles as u32, 1, 1]).num_warps(c.num_warps).num_stages(c.num_stages);
    let placeholder = crate::scratch::placeholder::<U>(dev)?;
    let bias = opts.bias.unwrap_or(&placeholder);
    let act = match opts.activation {
        Activation::None => 0,
        Activation::Relu => 1,
        Activation::Gelu => 2,
    };
    fp8_gemm_kernel::launch(
        dev,
        cfg,
        a,
        b,
        sa,
        sb,
        bias,
        out,
        m as i32,
        n as i32,
        k as i32,
        so as i64,
        ta,
        tb,
        c.bm as i32,
        c.bn as i32,
        c.bk as i32,
        8,
        rowwise,
        opts.bias.is_some(),
        act,
    )?;
    Ok(())
}
