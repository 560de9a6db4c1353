//! Fused kernels written as a user writes them: attention's loop (two
//! `dot`s per iteration, the first's result reduced and exponentiated, its
//! cast the second's A operand, row statistics carried across iterations,
//! K read through a transposed view, a loop bound that depends on
//! `program_id` when causal), against f64.
//!
//! A second kernel reads explicitly strided `[batch, seq, heads, dim]` /
//! `[batch, heads, seq, dim]` tensors with grouped K/V heads: its view bases
//! add two program-id terms, one of them divided by the group size.
//!
//! This is where the compiler's general mechanisms meet: per-value
//! layouts, a computed `dot` operand, loop-invariant operands, TMA rings of
//! two classes feeding two different `dot`s. The case exists because a
//! staged `wgmma` operand landed off a 1024-byte boundary (the rings'
//! mbarriers end on a 16-byte one) whenever TMA rings were present: every
//! GEMM test passed, and this kernel's output was 10–80 % off.

use super::util::*;
use ferrotile::prelude::*;
use ferrotile::DeviceKind;

/// FlashAttention-2 forward over `[heads, n, D]` tensors: one program per
/// `BM` query rows of head `program_id(1)`, online softmax in `exp2` with
/// `qk_scale = scale · log2(e)`.
#[kernel]
pub fn k_attention<T: Float, const BM: i32, const BN: i32, const D: i32, const CAUSAL: bool>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    o: Ptr<T>,
    n: i32,
    qk_scale: f32,
) {
    let pm = program_id(0) * BM;
    let head = (program_id(1) as i64) * ((n as i64) * (D as i64));
    let vq = view(q + head, [n, D], [D, 1]);
    let vkt = view(k + head, [D, n], [1, D]);
    let vv = view(v + head, [n, D], [D, 1]);
    let qt = load_block(vq, [pm, 0], [BM, D]);
    let rows = pm + arange(0, BM);
    let mut m_i = full([BM], f32::NEG_INFINITY, f32);
    let mut l_i = zeros([BM], f32);
    let mut acc = zeros([BM, D], f32);
    let mut hi = n;
    if CAUSAL {
        hi = minimum(n, pm + BM);
    }
    for j in (0..hi).step_by(BN) {
        let cols = j + arange(0, BN);
        let mut s = dot(qt, load_block(vkt, [0, j], [D, BN]), zeros([BM, BN], f32)) * qk_scale;
        s = select(expand_dims(cols < n, 0), s, f32::NEG_INFINITY);
        if CAUSAL {
            s = select(expand_dims(rows, 1) >= expand_dims(cols, 0), s, f32::NEG_INFINITY);
        }
        let m_new = maximum(m_i, max(s, axis = 1));
        let p = exp2(s - expand_dims(m_new, 1));
        let alpha = exp2(m_i - m_new);
        l_i = l_i * alpha + sum(p, 1);
        acc = dot(p as T, load_block(vv, [j, 0], [BN, D]), acc * expand_dims(alpha, 1));
        m_i = m_new;
    }
    let out = acc / expand_dims(l_i, 1);
    let offs = expand_dims((rows as i64) * (D as i64), 1) + expand_dims(arange(0, D) as i64, 0);
    store(o + head + offs, out as T, expand_dims(rows < n, 1));
}

fn attention_t<T: Flt>(dev: &Device, seed: u64, tol: f64) -> R {
    let mut rng = Rng::new(seed);
    // (heads, n, D, BM, BN, warps): tensor-core tiles (wgmma on Hopper:
    // BM a multiple of 64) where the device has them; WGSL tiles that fit
    // lavapipe's 32 KiB of workgroup storage
    let shapes: &[(usize, usize, i32, i32, i32, u32)] = if dev.kind() == DeviceKind::Cuda {
        &[(3, 200, 64, 64, 64, 4), (2, 77, 128, 128, 64, 8), (2, 130, 64, 64, 32, 4), (1, 64, 64, 128, 128, 8)]
    } else {
        &[(3, 37, 64, 32, 16, 4), (2, 20, 32, 16, 32, 4)]
    };
    for &(h, n, d, bm, bn, warps) in shapes {
        for causal in [false, true] {
            let c = Ctx::new("attention", seed, format!("{} heads={h} n={n} D={d} BM={bm} BN={bn} warps={warps} causal={causal}", T::DTYPE));
            let len = h * n * d as usize;
            let mut gen = || -> Vec<T> { (0..len).map(|_| T::from_f64(rng.normal())).collect() };
            let (qh, kh, vh) = (gen(), gen(), gen());
            let mut o = poisoned::<T>(dev, len + PAD)?;
            let scale = 1.0 / (d as f64).sqrt();
            let cfg = LaunchConfig::new([cdiv(n, bm as usize) as u32, h as u32, 1]).num_warps(warps).num_stages(2);
            let qk = (scale * std::f64::consts::LOG2_E) as f32;
            c.launch(k_attention::launch(dev, cfg, &upload(dev, &qh)?, &upload(dev, &kh)?, &upload(dev, &vh)?, &mut o, n as i32, qk, bm, bn, d, causal))?;
            let d = d as usize;
            let f = |x: &[T], i: usize| x[i].to_f64();
            let mut want = vec![0.0f64; len];
            for hh in 0..h {
                let base = hh * n * d;
                for r in 0..n {
                    let keys = if causal { r + 1 } else { n };
                    let s: Vec<f64> = (0..keys).map(|j| (0..d).map(|e| f(&qh, base + r * d + e) * f(&kh, base + j * d + e)).sum::<f64>() * scale).collect();
                    let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let w: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
                    let z: f64 = w.iter().sum();
                    for e in 0..d {
                        want[base + r * d + e] = (0..keys).map(|j| w[j] * f(&vh, base + j * d + e)).sum::<f64>() / z;
                    }
                }
            }
            // (P is rounded to T before the second dot: errors of a few
            // units of T's precision, relative to the output's scale)
            check_float(&c, "O = softmax(Q·Kᵀ·scale)·V", &download(&o)?[..len], &want, 4, tol, tol, &|i| {
                format!("head {} row {} column {}", i / (n * d), (i / d) % n, i % d)
            })?;
        }
    }
    Ok(())
}

pub fn attention(dev: &Device, seed: u64) -> R {
    attention_t::<f16>(dev, seed, 4e-3)?;
    attention_t::<bf16>(dev, seed ^ 1, 3e-2)?;
    attention_strided(dev, seed ^ 2)
}

/// The same loop over explicitly strided tensors — `[batch, seq, heads,
/// dim]` or `[batch, heads, seq, dim]` — with `G` query heads sharing one
/// K/V head (grouped-query attention), on a grid (query blocks, query
/// heads, batch): each base is `ptr + pid(2)·batch stride + pid(1)·head
/// stride`, K and V's head `program_id(1) / G` (on Hopper with
/// `FERROTILE_TMA_TERMS=1`: tensor maps of rank 4, one dimension per base
/// term; without it, `cp.async` rings).
#[kernel]
pub fn k_attention_strided<T: Float, const BM: i32, const BN: i32, const D: i32, const G: i32>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    o: Ptr<T>,
    n: i32,
    qk_scale: f32,
    sb: i64,
    sh: i64,
    ss: i64,
    kb: i64,
    kh: i64,
    ks: i64,
) {
    let pm = program_id(0) * BM;
    let b = program_id(2) as i64;
    let qbase = b * sb + (program_id(1) as i64) * sh;
    let kbase = b * kb + ((program_id(1) / G) as i64) * kh;
    let vq = view(q + qbase, [n, D], [ss, 1]);
    let vkt = view(k + kbase, [D, n], [1, ks]);
    let vv = view(v + kbase, [n, D], [ks, 1]);
    let qt = load_block(vq, [pm, 0], [BM, D]);
    let rows = pm + arange(0, BM);
    let mut m_i = full([BM], f32::NEG_INFINITY, f32);
    let mut l_i = zeros([BM], f32);
    let mut acc = zeros([BM, D], f32);
    for j in (0..n).step_by(BN) {
        let cols = j + arange(0, BN);
        let mut s = dot(qt, load_block(vkt, [0, j], [D, BN]), zeros([BM, BN], f32)) * qk_scale;
        s = select(expand_dims(cols < n, 0), s, f32::NEG_INFINITY);
        let m_new = maximum(m_i, max(s, axis = 1));
        let p = exp2(s - expand_dims(m_new, 1));
        let alpha = exp2(m_i - m_new);
        l_i = l_i * alpha + sum(p, 1);
        acc = dot(p as T, load_block(vv, [j, 0], [BN, D]), acc * expand_dims(alpha, 1));
        m_i = m_new;
    }
    let vo = view(o + qbase, [n, D], [ss, 1]);
    store_block(vo, [pm, 0], (acc / expand_dims(l_i, 1)) as T);
}

fn attention_strided(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let cuda = dev.kind() == DeviceKind::Cuda;
    // (batch, query heads, group, n, D, BM, BN, warps, [b, s, h, d] layout)
    let cases: Vec<(usize, usize, usize, usize, i32, i32, i32, u32, bool)> = if cuda {
        vec![(2, 4, 2, 77, 64, 64, 64, 4, true), (2, 2, 1, 130, 64, 64, 32, 4, false), (1, 4, 4, 64, 128, 128, 64, 8, true)]
    } else {
        vec![(2, 4, 2, 21, 32, 16, 16, 4, true), (1, 2, 1, 19, 32, 16, 16, 4, false)]
    };
    for (nb, hq, g, n, d, bm, bn, warps, bshd) in cases {
        let c = Ctx::new("attention", seed, format!("strided f16 b={nb} hq={hq} G={g} n={n} D={d} BM={bm} BN={bn} warps={warps} bshd={bshd}"));
        let hk = hq / g;
        let du = d as usize;
        // element strides (batch, head, seq) of a [b, s, h, d] or [b, h, s, d] tensor with `h` heads
        let strides = |h: usize| -> (usize, usize, usize) {
            if bshd {
                (n * h * du, du, h * du)
            } else {
                (h * n * du, n * du, du)
            }
        };
        let ((sb, sh, ss), (kb, kh, ks)) = (strides(hq), strides(hk));
        let mut gen = |len: usize| -> Vec<f16> { (0..len).map(|_| f16::from_f64(rng.normal())).collect() };
        let (qh, kh_, vh) = (gen(nb * hq * n * du), gen(nb * hk * n * du), gen(nb * hk * n * du));
        let mut o = poisoned::<f16>(dev, qh.len() + PAD)?;
        let scale = 1.0 / (d as f64).sqrt();
        let cfg = LaunchConfig::new([cdiv(n, bm as usize) as u32, hq as u32, nb as u32]).num_warps(warps).num_stages(2);
        let qk = (scale * std::f64::consts::LOG2_E) as f32;
        let (upq, upk, upv) = (upload(dev, &qh)?, upload(dev, &kh_)?, upload(dev, &vh)?);
        let (i, u) = (|x: usize| x as i64, |x: usize| x as i64);
        c.launch(k_attention_strided::launch(dev, cfg, &upq, &upk, &upv, &mut o, n as i32, qk, i(sb), i(sh), i(ss), u(kb), u(kh), u(ks), bm, bn, d, g as i32))?;
        let mut want = vec![f64::NAN; qh.len()];
        for bb in 0..nb {
            for h in 0..hq {
                let (qb, kbb) = (bb * sb + h * sh, bb * kb + (h / g) * kh);
                for r in 0..n {
                    let s: Vec<f64> =
                        (0..n).map(|j| (0..du).map(|e| qh[qb + r * ss + e].to_f64() * kh_[kbb + j * ks + e].to_f64()).sum::<f64>() * scale).collect();
                    let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let w: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
                    let z: f64 = w.iter().sum();
                    for e in 0..du {
                        want[qb + r * ss + e] = (0..n).map(|j| w[j] * vh[kbb + j * ks + e].to_f64()).sum::<f64>() / z;
                    }
                }
            }
        }
        let got = download(&o)?;
        check_float(&c, "O (strided, grouped heads)", &got[..qh.len()], &want, 4, 4e-3, 4e-3, &|x| format!("element {x}"))?;
    }
    Ok(())
}

/// Loop-invariant and twice-read `dot` operands: B `[K, N]` and C `[N, K]`
/// are loaded once, before a grid-stride loop over `BM`-row blocks of A;
/// each block is read by two dots, the second taking C through `trans`:
/// `O_i = A_i·B + A_i·Cᵀ` (f32). On Hopper: B and Cᵀ from one-slot TMA
/// classes filled once (`AsyncPlan::invariant`; Cᵀ reads C's slot the
/// other way round), A_i from one slot both dots share.
#[kernel]
pub fn k_invariant_operands<T: Float, const BM: i32, const K: i32, const N: i32>(a: Ptr<T>, b: Ptr<T>, c: Ptr<T>, o: Ptr<f32>, m: i32) {
    let bt = load_block(view(b, [K, N], [N, 1]), [0, 0], [K, N]);
    let ct = load_block(view(c, [N, K], [K, 1]), [0, 0], [N, K]);
    let va = view(a, [m, K], [K, 1]);
    let vo = view(o, [m, N], [N, 1]);
    for i in (program_id(0) * BM..m).step_by(BM * num_programs(0)) {
        let ai = load_block(va, [i, 0], [BM, K]);
        let r = dot(ai, bt, zeros([BM, N], f32));
        store_block(vo, [i, 0], dot(ai, trans(ct), r));
    }
}

pub fn invariant_operands(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    // (m, BM, K, N, programs, warps): WGSL tiles that fit lavapipe
    let shapes: &[(usize, i32, i32, i32, u32, u32)] =
        if dev.kind() == DeviceKind::Cuda { &[(300, 64, 64, 64, 2, 4), (517, 128, 128, 64, 3, 8), (0, 64, 64, 128, 1, 4)] } else { &[(70, 16, 32, 16, 2, 4)] };
    for &(m, bm, k, n, progs, warps) in shapes {
        for bf in [false, true] {
            let c =
                Ctx::new("invariant_operands", seed, format!("{} m={m} BM={bm} K={k} N={n} programs={progs} warps={warps}", if bf { "bf16" } else { "f16" }));
            let (ku, nu) = (k as usize, n as usize);
            let mut g = |len: usize| -> Vec<f64> { (0..len).map(|_| rng.normal()).collect() };
            let (af, bf_, cf) = (g(m * ku), g(ku * nu), g(nu * ku));
            let mut o = poisoned::<f32>(dev, m * nu + PAD)?;
            let cfg = LaunchConfig::new([progs, 1, 1]).num_warps(warps);
            // (inputs rounded to the element type first: the reference
            // sees what the kernel sees)
            let (ar, br, cr): (Vec<f64>, Vec<f64>, Vec<f64>);
            if bf {
                let cv = |x: &[f64]| -> Vec<bf16> { x.iter().map(|v| bf16::from_f64(*v)).collect() };
                let (av, bv, cvv) = (cv(&af), cv(&bf_), cv(&cf));
                (ar, br, cr) = (av.iter().map(|x| x.to_f64()).collect(), bv.iter().map(|x| x.to_f64()).collect(), cvv.iter().map(|x| x.to_f64()).collect());
                c.launch(k_invariant_operands::launch(dev, cfg, &upload(dev, &av)?, &upload(dev, &bv)?, &upload(dev, &cvv)?, &mut o, m as i32, bm, k, n))?;
            } else {
                let cv = |x: &[f64]| -> Vec<f16> { x.iter().map(|v| f16::from_f64(*v)).collect() };
                let (av, bv, cvv) = (cv(&af), cv(&bf_), cv(&cf));
                (ar, br, cr) = (av.iter().map(|x| x.to_f64()).collect(), bv.iter().map(|x| x.to_f64()).collect(), cvv.iter().map(|x| x.to_f64()).collect());
                c.launch(k_invariant_operands::launch(dev, cfg, &upload(dev, &av)?, &upload(dev, &bv)?, &upload(dev, &cvv)?, &mut o, m as i32, bm, k, n))?;
            }
            let mut want = vec![0.0f64; m * nu];
            for r in 0..m {
                for j in 0..nu {
                    want[r * nu + j] = (0..ku).map(|e| ar[r * ku + e] * (br[e * nu + j] + cr[j * ku + e])).sum();
                }
            }
            let tol = 1e-3 * (ku as f64).sqrt();
            check_float(&c, "O = A·B + A·Cᵀ", &download(&o)?, &want, 8, 1e-4, tol, &|i| format!("row {} column {}", i / nu, i % nu))?;
        }
    }
    Ok(())
}

/// Packed segments (a varlen batch's layout): segment `program_id(0)`
/// holds rows `cu[s]..cu[s+1]` of `y` (row stride `ys`), read through a
/// view at that loaded offset, of that loaded length; `out[s] = P · Y_s`
/// with `P[m, i] = (m + 2i) mod 5 − 2` computed in the kernel, `BK` rows a
/// step. Nothing masks the rows past the segment's end: the view's bounds
/// alone make them zeros, so a neighbouring segment's rows leaking into a
/// block changes the sums. (On Hopper the view is a *dynamic* TMA view:
/// its map spans the buffer and the kernel zeroes the rows outside the
/// segment, `ptx::tma`.)
#[kernel]
pub fn k_segment_sum<T: Float, const BM: i32, const BK: i32, const D: i32>(y: Ptr<T>, cu: Ptr<i32>, out: Ptr<f32>, ys: i64) {
    let s = program_id(0);
    let r0 = load(cu + s);
    let n = load(cu + s + 1) - r0;
    let vy = view(y + (r0 as i64) * ys, [n, D], [ys, 1]);
    let m = arange(0, BM);
    let mut acc = zeros([BM, D], f32);
    for i in (0..n).step_by(BK) {
        let c = i + arange(0, BK);
        let p = (expand_dims(m, 1) + expand_dims(c, 0) * 2) % 5 - 2;
        acc = dot(p as T, load_block(vy, [i, 0], [BK, D]), acc);
    }
    let offs = (s as i64) * ((BM * D) as i64) + expand_dims((m as i64) * (D as i64), 1) + expand_dims(arange(0, D) as i64, 0);
    store(out + offs, acc);
}

fn segment_sum_t<T: Flt>(dev: &Device, seed: u64) -> R {
    segment_sum_with::<T>(dev, seed, "segment_sum", &|dev, cfg, y, cu, out, ys, bm, bk, d| k_segment_sum::launch(dev, cfg, y, cu, out, ys, bm, bk, d))
}

/// Launches a segment-sum kernel: `(dev, cfg, y, cu, out, ys, BM, BK, D)`.
pub type SegmentLaunch<T> = dyn Fn(&Device, LaunchConfig, &Buffer<T>, &Buffer<i32>, &mut Buffer<f32>, i64, i32, i32, i32) -> ferrotile::Result<()>;

/// The segment sums of a ragged batch (see [`k_segment_sum`]) by the kernel
/// `launch` starts, against f64.
pub fn segment_sum_with<T: Flt>(dev: &Device, seed: u64, name: &'static str, launch: &SegmentLaunch<T>) -> R {
    let mut rng = Rng::new(seed);
    // (BM, BK, D, warps, stages): wgmma tiles with a pipelined ring on
    // Hopper; tiles lavapipe's workgroup storage holds elsewhere
    let (bm, bk, d, warps, stages) = if dev.kind() == DeviceKind::Cuda { (64usize, 64usize, 64usize, 4u32, 3u32) } else { (16, 16, 32, 4, 2) };
    // segments: longer than a step, empty, exactly one, shorter than one,
    // a single row, ending on the buffer's last row
    let lens = [2 * bk + 7, 0, bk, 5, 1, bk + 1, 3 * bk - 2];
    let mut cu = vec![0i32];
    for l in lens {
        cu.push(cu.last().unwrap() + l as i32);
    }
    let rows = *cu.last().unwrap() as usize;
    // (a row stride past D: the rows' tails are never read)
    let ys = d + 16;
    let yh: Vec<T> = (0..rows * ys).map(|_| T::from_f64(rng.normal())).collect();
    let c = Ctx::new(name, seed, format!("{} segments {lens:?} BM={bm} BK={bk} D={d} ys={ys} warps={warps} stages={stages}", T::DTYPE));
    let len = lens.len() * bm * d;
    let mut out = poisoned::<f32>(dev, len + PAD)?;
    let cfg = LaunchConfig::new([lens.len() as u32, 1, 1]).num_warps(warps).num_stages(stages);
    c.launch(launch(dev, cfg, &upload(dev, &yh)?, &upload(dev, &cu)?, &mut out, ys as i64, bm as i32, bk as i32, d as i32))?;
    let mut want = vec![0.0f64; len];
    for (s, w) in cu.windows(2).enumerate() {
        let (r0, n) = (w[0] as usize, (w[1] - w[0]) as usize);
        for m in 0..bm {
            for e in 0..d {
                want[(s * bm + m) * d + e] = (0..n).map(|i| ((m + 2 * i) % 5) as f64 - 2.0).zip(0..n).map(|(p, i)| p * yh[(r0 + i) * ys + e].to_f64()).sum();
            }
        }
    }
    check_float(&c, "out[s] = P · Y_s", &download(&out)?[..len], &want, 4, 1e-5, 1e-4, &|i| {
        format!("segment {} row {} column {}", i / (bm * d), (i / d) % bm, i % d)
    })
}

pub fn segment_sum(dev: &Device, seed: u64) -> R {
    segment_sum_t::<bf16>(dev, seed)?;
    segment_sum_t::<f16>(dev, seed ^ 1)
}

/// A two-dot chain, `acc += (A_j · B_j) as T · C_j` over `K` in blocks of
/// `BK`: the first dot's result cast into the second's A operand (a
/// tensor-core accumulator reused as an operand), a loop-carried
/// accumulator, `K`, `m` and `n` that are not multiples of their blocks
/// (masked loads), `S = BS` columns in between (`a` `[m, K]`, `b` `[K, S]`,
/// `c` `[⌈K / BK⌉·S, n]`). With the GPU's rewrites the chained dot is
/// rotated by one iteration (`ferrotile_ir::passes::rotate_chains`).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn k_dot_chain<T: Float, const BM: i32, const BK: i32, const BS: i32, const BN: i32>(a: Ptr<T>, b: Ptr<T>, c: Ptr<T>, o: Ptr<f32>, m: i32, k: i32, n: i32) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rs = arange(0, BS);
    let m_ok = rm < m;
    let n_ok = rn < n;
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let rk = k0 + arange(0, BK);
        let k_ok = rk < k;
        let at = load(a + expand_dims(rm * k, 1) + expand_dims(rk, 0), expand_dims(m_ok, 1) & expand_dims(k_ok, 0), 0.0);
        let bt = load(b + expand_dims(rk * BS, 1) + expand_dims(rs, 0), expand_dims(k_ok, 1), 0.0);
        let s = dot(at, bt, zeros([BM, BS], f32));
        let cr = (k0 / BK) * BS + rs;
        let ct = load(c + expand_dims(cr * n, 1) + expand_dims(rn, 0), expand_dims(n_ok, 0), 0.0);
        acc = dot(s as T, ct, acc);
    }
    store(o + expand_dims(rm * n, 1) + expand_dims(rn, 0), acc, expand_dims(m_ok, 1) & expand_dims(n_ok, 0));
}

fn dot_chain_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    // (m, k, n, BM, BK, BS, BN, warps): tensor-core tiles where the device
    // has them (`wgmma` on Hopper: BM a multiple of 64); small ones on the
    // interpreter and lavapipe
    let shapes: &[(usize, usize, usize, i32, i32, i32, i32, u32)] = if dev.kind() == DeviceKind::Cuda {
        &[(150, 200, 90, 64, 32, 64, 64, 4), (64, 64, 64, 64, 64, 64, 64, 4), (130, 97, 70, 128, 32, 64, 64, 8), (70, 40, 33, 64, 16, 32, 32, 4)]
    } else {
        &[(37, 50, 21, 16, 16, 16, 16, 4), (16, 9, 16, 16, 16, 32, 16, 4)]
    };
    for &(m, k, n, bm, bk, bs, bn, warps) in shapes {
        let steps = k.div_ceil(bk as usize);
        let s = bs as usize;
        let cx = Ctx::new("dot_chain", seed, format!("{} m={m} K={k} n={n} BM={bm} BK={bk} S={bs} BN={bn} warps={warps}", T::NAME));
        let av: Vec<T> = (0..m * k).map(|_| T::round(rng.normal())).collect();
        let bv: Vec<T> = (0..k * s).map(|_| T::round(rng.normal() * 0.25)).collect();
        let cv: Vec<T> = (0..steps * s * n).map(|_| T::round(rng.normal())).collect();
        let mut out = poisoned::<f32>(dev, m * n + PAD)?;
        let cfg = LaunchConfig::new([cdiv(m, bm as usize) as u32, cdiv(n, bn as usize) as u32, 1]).num_warps(warps).num_stages(2);
        cx.launch(k_dot_chain::launch(
            dev,
            cfg,
            &upload(dev, &av)?,
            &upload(dev, &bv)?,
            &upload(dev, &cv)?,
            &mut out,
            m as i32,
            k as i32,
            n as i32,
            bm,
            bk,
            bs,
            bn,
        ))?;
        // f64, with each first product rounded to T as the kernel's cast
        // does; the kernel's f32 product may round to the neighbouring T
        // (one unit in T's last place of |P|) and its f32 sums add
        // ~2⁻²⁴ per term
        let f = |x: &[T], i: usize| x[i].to_f64();
        let (mut want, mut mag) = (vec![0.0f64; m * n], vec![0.0f64; m * n]);
        for r in 0..m {
            for j in 0..steps {
                for q in 0..s {
                    let sv: f64 = (j * bk as usize..((j + 1) * bk as usize).min(k)).map(|kk| f(&av, r * k + kk) * f(&bv, kk * s + q)).sum();
                    let p = T::round(sv).to_f64();
                    for col in 0..n {
                        let cval = f(&cv, (j * s + q) * n + col);
                        want[r * n + col] += p * cval;
                        mag[r * n + col] += (p * cval).abs();
                    }
                }
            }
        }
        let ulp = 2f64.powi(-(T::MANT as i32));
        let terms = (steps * s + bk as usize) as f64;
        let got = download(&out)?;
        check_with(
            &cx,
            "acc = Σ (A·B as T)·C",
            &got[..m * n],
            &want,
            |i, g, &w| (g as f64 - w).abs() <= mag[i] * (ulp + 2.0 * terms * 2f64.powi(-24)) + 1e-30,
            &|i| format!("row {} column {} (tolerance {:e})", i / n, i % n, mag[i] * (ulp + 2.0 * terms * 2f64.powi(-24))),
        )?;
    }
    Ok(())
}

pub fn dot_chain(dev: &Device, seed: u64) -> R {
    dot_chain_t::<f16>(dev, seed)?;
    dot_chain_t::<bf16>(dev, seed ^ 1)
}

/// RMSNorm fused into the GEMM that follows it, written as a user would:
/// `y = (x · rsqrt(mean(x²) + eps) ∘ g) · W` for `BM` rows of `x` (`[m,
/// K]`) and `BN` columns of `W` (`[K, n]`); one loop for the rows' mean
/// square, a second whose A operand is the normalized tile computed in
/// registers. The gain `g` (`[K]`) is loaded with the column offsets that
/// also address `x` and mask `W`'s rows and is only broadcast over rows
/// (`ferrotile_ir::passes::private_index` gives it offsets of its own).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn k_norm_matmul<T: Float, const BM: i32, const BN: i32, const BK: i32>(x: Ptr<T>, g: Ptr<T>, w: Ptr<T>, y: Ptr<f32>, m: i32, n: i32, k: i32, eps: f32) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let m_ok = rm < m;
    let n_ok = rn < n;
    let mut ss = zeros([BM], f32);
    for k0 in (0..k).step_by(BK) {
        let rk = k0 + arange(0, BK);
        let xt = load(x + expand_dims(rm * k, 1) + expand_dims(rk, 0), expand_dims(m_ok, 1) & expand_dims(rk < k, 0), 0.0) as f32;
        ss = ss + sum(xt * xt, 1);
    }
    let r = rsqrt(ss / (k as f32) + eps);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let rk = k0 + arange(0, BK);
        let k_ok = rk < k;
        let xt = load(x + expand_dims(rm * k, 1) + expand_dims(rk, 0), expand_dims(m_ok, 1) & expand_dims(k_ok, 0), 0.0) as f32;
        let gv = load(g + rk, k_ok, 0.0) as f32;
        let a = (xt * expand_dims(r, 1) * expand_dims(gv, 0)) as T;
        let wt = load(w + expand_dims(rk * n, 1) + expand_dims(rn, 0), expand_dims(k_ok, 1) & expand_dims(n_ok, 0), 0.0);
        acc = dot(a, wt, acc);
    }
    store(y + expand_dims(rm * n, 1) + expand_dims(rn, 0), acc, expand_dims(m_ok, 1) & expand_dims(n_ok, 0));
}

fn norm_matmul_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    // (m, K, n, BM, BN, BK, warps): tensor-core tiles on CUDA (`wgmma` on
    // Hopper at BM 64 and 128), small ones on the interpreter and lavapipe
    let shapes: &[(usize, usize, usize, i32, i32, i32, u32)] = if dev.kind() == DeviceKind::Cuda {
        &[(150, 200, 90, 64, 64, 64, 4), (130, 333, 70, 128, 128, 64, 8), (70, 40, 33, 64, 32, 16, 4)]
    } else {
        &[(37, 50, 21, 16, 16, 16, 4), (16, 9, 40, 16, 32, 16, 4)]
    };
    let eps = 1e-5f64;
    for &(m, k, n, bm, bn, bk, warps) in shapes {
        let cx = Ctx::new("norm_matmul", seed, format!("{} m={m} K={k} n={n} BM={bm} BN={bn} BK={bk} warps={warps}", T::NAME));
        let xv: Vec<T> = (0..m * k).map(|_| T::round(rng.normal() * 3.0)).collect();
        let gv: Vec<T> = (0..k).map(|_| T::round(1.0 + 0.5 * rng.normal())).collect();
        let wv: Vec<T> = (0..k * n).map(|_| T::round(rng.normal())).collect();
        let mut out = poisoned::<f32>(dev, m * n + PAD)?;
        let cfg = LaunchConfig::new([cdiv(m, bm as usize) as u32, cdiv(n, bn as usize) as u32, 1]).num_warps(warps).num_stages(2);
        cx.launch(k_norm_matmul::launch(
            dev,
            cfg,
            &upload(dev, &xv)?,
            &upload(dev, &gv)?,
            &upload(dev, &wv)?,
            &mut out,
            m as i32,
            n as i32,
            k as i32,
            eps as f32,
            bm,
            bn,
            bk,
        ))?;
        // f64 of the same formula; each A element is rounded to T by the
        // kernel (one unit in T's last place of |A|), its f32 statistics
        // and sums add ~2⁻²⁴ per term
        let f = |x: &[T], i: usize| x[i].to_f64();
        let (mut want, mut mag) = (vec![0.0f64; m * n], vec![0.0f64; m * n]);
        for row in 0..m {
            let ms: f64 = (0..k).map(|c| f(&xv, row * k + c).powi(2)).sum::<f64>() / k as f64;
            let rs = 1.0 / (ms + eps).sqrt();
            for c in 0..k {
                let a = f(&xv, row * k + c) * rs * f(&gv, c);
                for col in 0..n {
                    let t = a * f(&wv, c * n + col);
                    want[row * n + col] += t;
                    mag[row * n + col] += t.abs();
                }
            }
        }
        let ulp = 2f64.powi(-(T::MANT as i32));
        let tol = |i: usize| mag[i] * (ulp + 4.0 * k as f64 * 2f64.powi(-24)) + 1e-30;
        let got = download(&out)?;
        check_with(&cx, "y = (x·rsqrt(mean(x²) + eps)∘g)·W", &got[..m * n], &want, |i, g, &w| (g as f64 - w).abs() <= tol(i), &|i| {
            format!("row {} column {} (tolerance {:e})", i / n, i % n, tol(i))
        })?;
    }
    Ok(())
}

pub fn norm_matmul(dev: &Device, seed: u64) -> R {
    norm_matmul_t::<f16>(dev, seed)?;
    norm_matmul_t::<bf16>(dev, seed ^ 1)
}

/// The decode form of a small-M product with a computed weight tile, as a
/// Hopper user writes it: `outᵀ[n, m] = Σ_k (W[n, k] · s[n]) · x[m, k]`
/// with the `BN` output columns as the `dot`'s rows (`wgmma` wants M ≥ 64)
/// and the `BM` tokens as its columns: A is the weight tile scaled in
/// registers, B is `xᵀ` loaded along K (`x` row-major), a narrow operand.
/// (With operand layouts — on by default in the CUDA runtime — on sm_90,
/// A is read from registers K-interleaved and B's rows are copied in that
/// order.)
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn k_decode_t<T: Float, const BN: i32, const BM: i32, const BK: i32>(w: Ptr<T>, s: Ptr<f32>, x: Ptr<T>, out: Ptr<f32>, m: i32, n: i32, k: i32) {
    let rn = program_id(0) * BN + arange(0, BN);
    let rm = program_id(1) * BM + arange(0, BM);
    let n_ok = rn < n;
    let m_ok = rm < m;
    let sv = expand_dims(load(s + rn, n_ok, 0.0), 1);
    let mut acc = zeros([BN, BM], f32);
    for k0 in (0..k).step_by(BK) {
        let kk = k0 + arange(0, BK);
        let k_ok = kk < k;
        let wt = load(w + expand_dims(rn * k, 1) + expand_dims(kk, 0), expand_dims(n_ok, 1) & expand_dims(k_ok, 0), 0.0);
        let a = ((wt as f32) * sv) as T;
        let xt = load(x + expand_dims(kk, 1) + expand_dims(rm * k, 0), expand_dims(k_ok, 1) & expand_dims(m_ok, 0), 0.0);
        acc = dot(a, xt, acc);
    }
    store(out + expand_dims(rm * n, 0) + expand_dims(rn, 1), acc, expand_dims(n_ok, 1) & expand_dims(m_ok, 0));
}

fn decode_t_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    // (m, n, K, BN, BM, BK, warps): `wgmma` tiles on CUDA (one and two
    // warpgroups), small ones on the interpreter and lavapipe; tails in
    // every dimension
    let shapes: &[(usize, usize, usize, i32, i32, i32, u32)] = if dev.kind() == DeviceKind::Cuda {
        &[(5, 200, 300, 64, 16, 64, 4), (16, 130, 333, 128, 16, 128, 8), (37, 70, 100, 64, 32, 64, 4)]
    } else {
        &[(5, 40, 50, 16, 16, 16, 4), (20, 17, 33, 32, 16, 16, 4)]
    };
    for &(m, n, k, bn, bm, bk, warps) in shapes {
        let cx = Ctx::new("decode_t", seed, format!("{} m={m} n={n} K={k} BN={bn} BM={bm} BK={bk} warps={warps}", T::NAME));
        let wv: Vec<T> = (0..n * k).map(|_| T::round(rng.normal())).collect();
        let sv: Vec<f32> = (0..n).map(|_| (0.5 + rng.normal().abs()) as f32).collect();
        let xv: Vec<T> = (0..m * k).map(|_| T::round(rng.normal())).collect();
        let mut out = poisoned::<f32>(dev, m * n + PAD)?;
        let cfg = LaunchConfig::new([cdiv(n, bn as usize) as u32, cdiv(m, bm as usize) as u32, 1]).num_warps(warps).num_stages(3);
        cx.launch(k_decode_t::launch(
            dev,
            cfg,
            &upload(dev, &wv)?,
            &upload(dev, &sv)?,
            &upload(dev, &xv)?,
            &mut out,
            m as i32,
            n as i32,
            k as i32,
            bn,
            bm,
            bk,
        ))?;
        // f64 of the same formula; each A element is rounded to T by the
        // kernel (one unit in T's last place), the f32 sums add ~2⁻²⁴ per term
        let (mut want, mut mag) = (vec![0.0f64; m * n], vec![0.0f64; m * n]);
        for row in 0..m {
            for col in 0..n {
                for c in 0..k {
                    let t = wv[col * k + c].to_f64() * sv[col] as f64 * xv[row * k + c].to_f64();
                    want[row * n + col] += t;
                    mag[row * n + col] += t.abs();
                }
            }
        }
        let ulp = 2f64.powi(-(T::MANT as i32));
        let tol = |i: usize| mag[i] * (ulp + 4.0 * k as f64 * 2f64.powi(-24)) + 1e-30;
        let got = download(&out)?;
        check_with(&cx, "out = x·(W∘s)ᵀ", &got[..m * n], &want, |i, g, &w| (g as f64 - w).abs() <= tol(i), &|i| {
            format!("token {} column {} (tolerance {:e})", i / n, i % n, tol(i))
        })?;
    }
    Ok(())
}

pub fn decode_t(dev: &Device, seed: u64) -> R {
    decode_t_t::<f16>(dev, seed)?;
    decode_t_t::<bf16>(dev, seed ^ 1)
}
