//! FlashAttention-2 forward written in the DSL the way a user would write it
//! from the README (the Triton tutorial's algorithm: one program per
//! `BM` query rows of one head, a loop over `BN`-key blocks with an online
//! softmax, `exp2` with the scale folded in), on `[batch, heads, seq, dim]`
//! contiguous bf16/f16 tensors, causal or not.
//!
//! It is the test of issue 20 ("a general tile compiler"): nothing in the
//! compiler knows about attention. Each configuration is checked against
//! f64 on sampled rows (poisoned output, odd lengths included), then timed
//! (CUDA graphs and back to back, `ferrotile_benches::time_both`); TFLOP/s
//! = 4·b·h·s·s·d, halved for causal. The peers (SDPA per backend, a Triton
//! FA2 kernel of the same algorithm) are `peers.py --attention`.
//!
//! `attn-user [--device cuda|wgpu|cpu] [--shapes B:H:S:D,..] [--causal 0|1|both]
//!            [--configs BMxBNxWARPSxSTAGES[xPROGRAMS_PER_SM],..]`
//! `attn-user --library [--layout bhsd|bshd] [--group G] ...`: the same
//! problems through the library's `attention::attention` (issue 21), K/V
//! heads `H / G`, each `--configs` entry forced and then the library's own
//! choice (`auto`: autotuned on GPUs). `--backward`: the library's
//! `attention_backward` instead (each tuner pair forced, then `auto`);
//! `--varlen`: `attention_varlen_backward` next to the dense backward on
//! the same tokens, then on a ragged batch of the same total
//! (`--varlen-sweep`: each tuner pair forced on both as well).
//! `attn-user --emit BMxBNxD WARPS STAGES [sm] [causal] [ws] [perSM=N] [split] [lib [nofold]]`: the PTX (no GPU),
//! with the compiler's explanations (`FERROTILE_EXPLAIN`'s lines) on stderr.

use ferrotile::prelude::*;
use ferrotile::{Buffer, Device, FloatElement};
use ferrotile_benches::{time_both, Timing};
use ferrotile_kernels::reference::{attention_sampled_err, Rng};
use half::{bf16, f16};

/// One program: `BM` query rows of head `program_id(1)`; `qk_scale` is
/// `softmax_scale · log2(e)`.
#[kernel]
pub fn attn_fwd<T: Float, const BM: i32, const BN: i32, const D: i32, const CAUSAL: bool>(q: Ptr<T>, k: Ptr<T>, v: Ptr<T>, o: Ptr<T>, n: i32, qk_scale: f32) {
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

/// The same attention with FlashAttention-3's intra-warpgroup overlap
/// written out: the loop is rotated by one key block, so that the
/// softmax of block `j` runs while the P·V product of block `j − 1`
/// (issued just before it) is on the tensor cores. The compiler waits for
/// each `dot` where its result is first read (`PtxOptions::defer_wgmma_waits`).
/// (`ATTN_OV=1` selects it.)
#[kernel]
pub fn attn_fwd_ov<T: Float, const BM: i32, const BN: i32, const D: i32, const CAUSAL: bool>(
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
    let mut hi = n;
    if CAUSAL {
        hi = minimum(n, pm + BM);
    }
    // key block 0 (every row has a key there: column 0)
    let cols0 = arange(0, BN);
    let mut s0 = dot(qt, load_block(vkt, [0, 0], [D, BN]), zeros([BM, BN], f32)) * qk_scale;
    s0 = select(expand_dims(cols0 < n, 0), s0, f32::NEG_INFINITY);
    if CAUSAL {
        s0 = select(expand_dims(rows, 1) >= expand_dims(cols0, 0), s0, f32::NEG_INFINITY);
    }
    let mut m_i = max(s0, axis = 1);
    let p0 = exp2(s0 - expand_dims(m_i, 1));
    let mut l_i = sum(p0, 1);
    let mut pt = p0 as T;
    let mut acc = zeros([BM, D], f32);
    for j in (BN..hi).step_by(BN) {
        let cols = j + arange(0, BN);
        let qk = dot(qt, load_block(vkt, [0, j], [D, BN]), zeros([BM, BN], f32));
        // (the previous block's P·V, on the tensor cores during this softmax)
        acc = dot(pt, load_block(vv, [j - BN, 0], [BN, D]), acc);
        let mut s = qk * qk_scale;
        s = select(expand_dims(cols < n, 0), s, f32::NEG_INFINITY);
        if CAUSAL {
            s = select(expand_dims(rows, 1) >= expand_dims(cols, 0), s, f32::NEG_INFINITY);
        }
        let m_new = maximum(m_i, max(s, axis = 1));
        let alpha = exp2(m_i - m_new);
        let p = exp2(s - expand_dims(m_new, 1));
        l_i = l_i * alpha + sum(p, 1);
        pt = p as T;
        acc = acc * expand_dims(alpha, 1);
        m_i = m_new;
    }
    acc = dot(pt, load_block(vv, [(hi - 1) / BN * BN, 0], [BN, D]), acc);
    let out = acc / expand_dims(l_i, 1);
    let offs = expand_dims((rows as i64) * (D as i64), 1) + expand_dims(arange(0, D) as i64, 0);
    store(o + head + offs, out as T, expand_dims(rows < n, 1));
}

fn overlap() -> bool {
    std::env::var("ATTN_OV").is_ok_and(|v| v == "1")
}

/// `ATTN_WS=1`: the library's forced configurations with a producer
/// warpgroup (`AttentionConfig::warp_specialize`).
fn warp_specialize() -> bool {
    std::env::var("ATTN_WS").is_ok_and(|v| v == "1")
}

/// `ATTN_NEG_SCALE=1`: the library runs with the softmax scale `−1/√d`
/// (the same work, but the kernels cannot fold a negative scale into
/// exp2's argument: an A/B of that fold in one call).
fn scale_sign() -> f64 {
    if std::env::var("ATTN_NEG_SCALE").is_ok_and(|v| v == "1") {
        -1.0
    } else {
        1.0
    }
}

#[derive(Clone, Copy, Debug)]
struct Cfg {
    bm: i32,
    bn: i32,
    warps: u32,
    stages: u32,
    /// `LaunchConfig::programs_per_sm` (0: no hint)
    per_sm: u32,
}

/// `BMxBNxWARPSxSTAGES[xPROGRAMS_PER_SM]`
fn parse_cfg(s: &str) -> Option<Cfg> {
    let v: Vec<u32> = s.split('x').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    (v.len() == 4 || v.len() == 5).then(|| Cfg { bm: v[0] as i32, bn: v[1] as i32, warps: v[2], stages: v[3], per_sm: v.get(4).copied().unwrap_or(0) })
}

/// f64 attention of one query row (`qi`) of head `bh`.
fn reference_row<T: FloatElement>(q: &[T], k: &[T], v: &[T], s: usize, d: usize, bh: usize, qi: usize, causal: bool, scale: f64) -> Vec<f64> {
    let base = bh * s * d;
    let qr: Vec<f64> = (0..d).map(|c| q[base + qi * d + c].to_f64()).collect();
    let keys = if causal { qi + 1 } else { s };
    let logits: Vec<f64> = (0..keys).map(|j| (0..d).map(|c| qr[c] * k[base + j * d + c].to_f64()).sum::<f64>() * scale).collect();
    let mx = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = logits.iter().map(|l| (l - mx).exp()).collect();
    let z: f64 = w.iter().sum();
    (0..d).map(|c| (0..keys).map(|j| w[j] * v[base + j * d + c].to_f64()).sum::<f64>() / z).collect()
}

/// Largest |error| over sampled rows, relative to the output's scale.
fn check<T: FloatElement>(q: &[T], k: &[T], v: &[T], o: &[T], bh: usize, s: usize, d: usize, causal: bool, scale: f64) -> f64 {
    let mut worst = 0.0f64;
    let mut rng = Rng::new(11);
    let mut rows: Vec<(usize, usize)> = (0..24).map(|_| ((rng.uniform() * bh as f64) as usize % bh, (rng.uniform() * s as f64) as usize % s)).collect();
    rows.extend([(0, 0), (bh - 1, s - 1), (bh / 2, s / 2)]);
    for (h, r) in rows {
        let want = reference_row(q, k, v, s, d, h, r, causal, scale);
        for (c, w) in want.iter().enumerate() {
            let got = o[(h * s + r) * d + c].to_f64();
            let e = if got.is_finite() { (got - w).abs() / (1.0 + w.abs()) } else { f64::INFINITY };
            worst = worst.max(e);
        }
    }
    worst
}

#[allow(clippy::too_many_arguments)]
fn run<T: FloatElement>(dev: &Device, b: usize, h: usize, s: usize, d: usize, causal: bool, cfgs: &[Cfg], tol: f64) -> Result<bool, String> {
    let e = |e: ferrotile::Error| e.to_string();
    let n = b * h * s * d;
    let mut rng = Rng::new(5);
    let mut gen = || -> Vec<T> { (0..n).map(|_| T::from_f64(rng.normal())).collect() };
    let (qh, kh, vh) = (gen(), gen(), gen());
    let (q, k, v): (Buffer<T>, Buffer<T>, Buffer<T>) = (dev.from_slice(&qh).map_err(e)?, dev.from_slice(&kh).map_err(e)?, dev.from_slice(&vh).map_err(e)?);
    let scale = 1.0 / (d as f64).sqrt();
    let qk_scale = (scale * std::f64::consts::LOG2_E) as f32;
    let flops = 4.0 * (b * h) as f64 * (s * s * d) as f64 * if causal { 0.5 } else { 1.0 };
    let mut ok = true;
    let mut best: Option<(f64, Cfg)> = None;
    for &c in cfgs {
        let poison = vec![T::from_f64(f64::NAN); n];
        let mut o: Buffer<T> = dev.from_slice(&poison).map_err(e)?;
        let grid = [s.div_ceil(c.bm as usize) as u32, (b * h) as u32, 1];
        let cfg = LaunchConfig::new(grid).num_warps(c.warps).num_stages(c.stages).programs_per_sm(c.per_sm);
        let launch = |o: &mut Buffer<T>| {
            if overlap() {
                attn_fwd_ov::launch(dev, cfg, &q, &k, &v, o, s as i32, qk_scale, c.bm, c.bn, d as i32, causal)
            } else {
                attn_fwd::launch(dev, cfg, &q, &k, &v, o, s as i32, qk_scale, c.bm, c.bn, d as i32, causal)
            }
        };
        if let Err(err) = launch(&mut o).and_then(|_| dev.synchronize()) {
            println!("{:<5} b{b} h{h} s{s} d{d} causal={} {c:?}: error: {err}", T::DTYPE, causal as u8);
            continue;
        }
        let err = check(&qh, &kh, &vh, &o.to_vec().map_err(e)?, b * h, s, d, causal, scale);
        let pass = err <= tol;
        ok &= pass;
        let t: Timing = if dev.kind() == ferrotile::DeviceKind::Cpu {
            Timing { b2b: f64::NAN, graph: None }
        } else {
            time_both(dev, 30, 5, || launch(&mut o)).map_err(e)?
        };
        let tf = |ms: f64| flops / (ms * 1e-3) / 1e12;
        println!(
            "{:<5} b{b} h{h} s{s} d{d} causal={} BM={:<3} BN={:<3} warps={} stages={} per_sm={}  {:>9.1} us (b2b {:>9.1})  {:>6.1} TFLOP/s  err {err:.1e}{}",
            T::DTYPE,
            causal as u8,
            c.bm,
            c.bn,
            c.warps,
            c.stages,
            c.per_sm,
            t.ms() * 1e3,
            t.b2b * 1e3,
            tf(t.ms()),
            if pass { "" } else { "  FAIL" }
        );
        if pass && best.is_none_or(|(m, _)| t.ms() < m) {
            best = Some((t.ms(), c));
        }
    }
    if let Some((ms, c)) = best {
        println!(
            "BEST {:<5} b{b} h{h} s{s} d{d} causal={}  {:.1} TFLOP/s  ({} us, {}x{}x{}w{}s{}p)",
            T::DTYPE,
            causal as u8,
            flops / (ms * 1e-3) / 1e12,
            ms * 1e3,
            c.bm,
            c.bn,
            c.warps,
            c.stages,
            c.per_sm
        );
    }
    Ok(ok)
}

/// The library's `attention::attention` on the same problem, `[b, h, s,
/// d]` or `[b, s, h, d]` (`bshd`) with `hk` K/V heads; each config forced,
/// then (`auto`) the library's own choice (autotuned on first use). Checked
/// against `reference::attention_row` on sampled rows.
#[allow(clippy::too_many_arguments)]
fn run_library<T: FloatElement>(
    dev: &Device,
    b: usize,
    h: usize,
    hk: usize,
    s: usize,
    d: usize,
    causal: bool,
    bshd: bool,
    cfgs: &[Cfg],
    tol: f64,
) -> Result<bool, String> {
    use ferrotile_kernels::attention::{attention, AttentionConfig, AttentionOptions, AttentionProblem};
    let e = |e: ferrotile::Error| e.to_string();
    let p = if bshd { AttentionProblem::bshd(b, h, hk, s, s, d) } else { AttentionProblem::bhsd(b, h, hk, s, s, d) };
    let mut rng = Rng::new(5);
    let mut gen = |n: usize| -> Vec<T> { (0..n).map(|_| T::from_f64(rng.normal())).collect() };
    let (qh, kh, vh) = (gen(b * h * s * d), gen(b * hk * s * d), gen(b * hk * s * d));
    let (q, k, v): (Buffer<T>, Buffer<T>, Buffer<T>) = (dev.from_slice(&qh).map_err(e)?, dev.from_slice(&kh).map_err(e)?, dev.from_slice(&vh).map_err(e)?);
    let flops = 4.0 * (b * h) as f64 * (s * s * d) as f64 * if causal { 0.5 } else { 1.0 };
    let layout = if bshd { "bshd" } else { "bhsd" };
    let mut ok = true;
    let runs: Vec<Option<Cfg>> = cfgs.iter().map(|c| Some(*c)).chain([None]).collect();
    for c in runs {
        let mut o: Buffer<T> = dev.from_slice(&vec![T::from_f64(f64::NAN); qh.len()]).map_err(e)?;
        let config = c.map(|c| AttentionConfig {
            bm: c.bm as u32,
            bn: c.bn as u32,
            num_warps: c.warps,
            num_stages: c.stages,
            split_masks: false,
            overlap: overlap(),
            warp_specialize: warp_specialize(),
            rotate_chains: false,
        });
        let scale = scale_sign() / (d as f64).sqrt();
        let opts = AttentionOptions { causal, config, scale: Some(scale as f32), ..Default::default() };
        let launch = |o: &mut Buffer<T>| {
            attention(dev, &q, &k, &v, o, None, &p, &opts).map_err(|x| ferrotile::Error::Launch { kernel: "attention".into(), msg: x.to_string() })
        };
        let name = c.map_or("auto".to_string(), |c| format!("{}x{}x{}w{}s", c.bm, c.bn, c.warps, c.stages));
        if let Err(err) = launch(&mut o).and_then(|_| dev.synchronize()) {
            println!("library {:<5} {layout} b{b} h{h}/{hk} s{s} d{d} causal={} {name}: error: {err}", T::DTYPE, causal as u8);
            ok = false;
            continue;
        }
        let got = o.to_vec().map_err(e)?;
        let worst = attention_sampled_err(&qh, &kh, &vh, &got, &p, &mut Rng::new(11), 24, scale as f32 as f64, None, causal.then_some(0));
        let pass = worst <= tol;
        ok &= pass;
        let t: Timing = if dev.kind() == ferrotile::DeviceKind::Cpu {
            Timing { b2b: f64::NAN, graph: None }
        } else {
            time_both(dev, 30, 5, || launch(&mut o)).map_err(e)?
        };
        println!(
            "library {:<5} {layout} b{b} h{h}/{hk} s{s} d{d} causal={} {name:<14} {:>9.1} us (b2b {:>9.1})  {:>6.1} TFLOP/s  err {worst:.1e}{}",
            T::DTYPE,
            causal as u8,
            t.ms() * 1e3,
            t.b2b * 1e3,
            flops / (t.ms() * 1e-3) / 1e12,
            if pass { "" } else { "  FAIL" }
        );
    }
    Ok(ok)
}

/// The library's `attention_backward` on the problem of [`run_library`]
/// (bf16/f16, `hk` K/V heads): the forward gives O and the log-sum-exp,
/// dO is random; each tuner pair (dK/dV candidate `i` with dQ candidate
/// `i mod n`) forced, then the library's own choice (`auto`: each loop
/// autotuned). TFLOP/s = 2.5 × the forward's count (FlashAttention's
/// convention), halved for causal. Checked on sampled rows of dQ, dK and
/// dV (`reference::attention_backward_sampled_err`).
#[allow(clippy::too_many_arguments)]
fn run_library_bwd<T: FloatElement>(
    dev: &Device,
    b: usize,
    h: usize,
    hk: usize,
    s: usize,
    d: usize,
    causal: bool,
    bshd: bool,
    tol: f64,
) -> Result<bool, String> {
    use ferrotile_kernels::attention::{
        attention, attention_backward, backward_candidates, AttentionConfig, AttentionOptions, AttentionProblem, BackwardConfig,
    };
    let e = |e: ferrotile::Error| e.to_string();
    let p = if bshd { AttentionProblem::bshd(b, h, hk, s, s, d) } else { AttentionProblem::bhsd(b, h, hk, s, s, d) };
    let mut rng = Rng::new(7);
    let mut gen = |n: usize| -> Vec<T> { (0..n).map(|_| T::from_f64(rng.normal())).collect() };
    let (qh, kh, vh, doh) = (gen(b * h * s * d), gen(b * hk * s * d), gen(b * hk * s * d), gen(b * h * s * d));
    let up = |x: &[T]| dev.from_slice(x).map_err(e);
    let (q, k, v, dout) = (up(&qh)?, up(&kh)?, up(&vh)?, up(&doh)?);
    let mut o: Buffer<T> = dev.zeros(qh.len()).map_err(e)?;
    let mut lse: Buffer<f32> = dev.zeros(b * h * s).map_err(e)?;
    let fwd = AttentionOptions { causal, ..Default::default() };
    attention(dev, &q, &k, &v, &mut o, Some(&mut lse), &p, &fwd).map_err(|x| x.to_string())?;
    let (oh, lh) = (o.to_vec().map_err(e)?, lse.to_vec().map_err(e)?);
    let flops = 2.5 * 4.0 * (b * h) as f64 * (s * s * d) as f64 * if causal { 0.5 } else { 1.0 };
    let layout = if bshd { "bshd" } else { "bhsd" };
    let (ca, cb) = backward_candidates(p.padded_dim());
    let cfg = |tc: &ferrotile::TuneConfig| AttentionConfig::from_tune(tc).unwrap();
    // (each dK/dV candidate with a dQ candidate's second pass and with dQ
    // by atomics; then the tuner's pick, free and deterministic)
    let runs: Vec<(Option<BackwardConfig>, bool)> = ca
        .iter()
        .enumerate()
        .flat_map(|(i, a)| [false, true].map(|atomic_dq| (Some(BackwardConfig { dkdv: cfg(a), dq: cfg(&cb[i % cb.len()]), atomic_dq }), false)))
        .chain([(None, false), (None, true)])
        .collect();
    let mut ok = true;
    for (c, deterministic) in runs {
        let nan = T::from_f64(f64::NAN);
        let (mut dq, mut dk, mut dv): (Buffer<T>, Buffer<T>, Buffer<T>) =
            (dev.full(qh.len(), nan).map_err(e)?, dev.full(kh.len(), nan).map_err(e)?, dev.full(vh.len(), nan).map_err(e)?);
        let opts = AttentionOptions { backward: c, deterministic, ..fwd };
        let launch = |dq: &mut Buffer<T>, dk: &mut Buffer<T>, dv: &mut Buffer<T>| {
            attention_backward(dev, &q, &k, &v, &o, &dout, &lse, dq, dk, dv, &p, &opts)
                .map_err(|x| ferrotile::Error::Launch { kernel: "attention_backward".into(), msg: x.to_string() })
        };
        let name = c.map_or(if deterministic { "auto-det" } else { "auto" }.to_string(), |c| {
            let f = |a: AttentionConfig| format!("{}x{}x{}w{}s", a.bm, a.bn, a.num_warps, a.num_stages);
            if c.atomic_dq {
                format!("{}/atomic-dQ", f(c.dkdv))
            } else {
                format!("{}/{}", f(c.dkdv), f(c.dq))
            }
        });
        if let Err(err) = launch(&mut dq, &mut dk, &mut dv).and_then(|_| dev.synchronize()) {
            println!("library-bwd {:<5} {layout} b{b} h{h}/{hk} s{s} d{d} causal={} {name}: error: {err}", T::DTYPE, causal as u8);
            ok = false;
            continue;
        }
        let (gq, gk, gv) = (dq.to_vec().map_err(e)?, dk.to_vec().map_err(e)?, dv.to_vec().map_err(e)?);
        let scale = 1.0 / (d as f64).sqrt();
        let worst = ferrotile_kernels::reference::attention_backward_sampled_err(
            [&qh, &kh, &vh, &oh, &doh],
            &lh,
            [&gq, &gk, &gv],
            &p,
            &mut Rng::new(13),
            8,
            scale,
            None,
            causal.then_some(0),
        );
        let pass = worst <= tol;
        ok &= pass;
        let t: Timing = if dev.kind() == ferrotile::DeviceKind::Cpu {
            Timing { b2b: f64::NAN, graph: None }
        } else {
            time_both(dev, 10, 3, || launch(&mut dq, &mut dk, &mut dv)).map_err(e)?
        };
        println!(
            "library-bwd {:<5} {layout} b{b} h{h}/{hk} s{s} d{d} causal={} {name:<26} {:>9.1} us (b2b {:>9.1})  {:>6.1} TFLOP/s  err {worst:.1e}{}",
            T::DTYPE,
            causal as u8,
            t.ms() * 1e3,
            t.b2b * 1e3,
            flops / (t.ms() * 1e-3) / 1e12,
            if pass { "" } else { "  FAIL" }
        );
    }
    Ok(ok)
}

/// The varlen backward (`attention_varlen_backward`) against the dense
/// one on the same tokens: `b` sequences of `s` tokens packed as
/// `[b·s, h, d]` are exactly the dense `bshd` tensors, so both read the
/// same buffers (the forward of each gives its own O and log-sum-exp).
/// Then a ragged batch of the same total (lengths alternating `s/2` and
/// `3s/2`), timed alone. Each checked on sampled rows against f64 (the
/// equal-length run through the dense reference; the ragged one per
/// sequence is covered by the library's tests and only timed here).
#[allow(clippy::too_many_arguments)]
fn run_varlen_bwd<T: FloatElement>(
    dev: &Device,
    b: usize,
    h: usize,
    hk: usize,
    s: usize,
    d: usize,
    causal: bool,
    tol: f64,
    sweep: bool,
) -> Result<bool, String> {
    use ferrotile_kernels::attention::{
        attention, attention_backward, attention_varlen, attention_varlen_backward, AttentionOptions, AttentionProblem, VarlenProblem,
    };
    let e = |e: ferrotile::Error| e.to_string();
    let le = |x: ferrotile_kernels::LibError| ferrotile::Error::Launch { kernel: "attention".into(), msg: x.to_string() };
    let p = AttentionProblem::bshd(b, h, hk, s, s, d);
    let mut rng = Rng::new(17);
    let mut gen = |n: usize| -> Vec<T> { (0..n).map(|_| T::from_f64(rng.normal())).collect() };
    let (qh, kh, vh, doh) = (gen(b * h * s * d), gen(b * hk * s * d), gen(b * hk * s * d), gen(b * h * s * d));
    let up = |x: &[T]| dev.from_slice(x).map_err(e);
    let (q, k, v, dout) = (up(&qh)?, up(&kh)?, up(&vh)?, up(&doh)?);
    let opts = AttentionOptions { causal, ..Default::default() };
    let flops = 2.5 * 4.0 * (b * h) as f64 * (s * s * d) as f64 * if causal { 0.5 } else { 1.0 };
    let nan = T::from_f64(f64::NAN);
    let mut ok = true;
    // dense: forward, then the timed backward
    let mut o: Buffer<T> = dev.zeros(qh.len()).map_err(e)?;
    let mut lse: Buffer<f32> = dev.zeros(b * h * s).map_err(e)?;
    attention(dev, &q, &k, &v, &mut o, Some(&mut lse), &p, &opts).map_err(|x| x.to_string())?;
    let (mut dq, mut dk, mut dv): (Buffer<T>, Buffer<T>, Buffer<T>) =
        (dev.full(qh.len(), nan).map_err(e)?, dev.full(kh.len(), nan).map_err(e)?, dev.full(vh.len(), nan).map_err(e)?);
    let dense = time_both(dev, 10, 3, || attention_backward(dev, &q, &k, &v, &o, &dout, &lse, &mut dq, &mut dk, &mut dv, &p, &opts).map_err(le)).map_err(e)?;
    // varlen, equal lengths: the same tensors
    let cu: Vec<i32> = (0..=b).map(|i| (i * s) as i32).collect();
    let cq = dev.from_slice(&cu).map_err(e)?;
    let vp = VarlenProblem::packed(b, h, hk, b * s, b * s, s, s, d);
    let mut vo: Buffer<T> = dev.zeros(qh.len()).map_err(e)?;
    let mut vl: Buffer<f32> = dev.zeros(b * h * s).map_err(e)?;
    attention_varlen(dev, &q, &k, &v, &mut vo, Some(&mut vl), &cq, &cq, &vp, &opts).map_err(|x| x.to_string())?;
    let (mut gq, mut gk, mut gv): (Buffer<T>, Buffer<T>, Buffer<T>) =
        (dev.full(qh.len(), nan).map_err(e)?, dev.full(kh.len(), nan).map_err(e)?, dev.full(vh.len(), nan).map_err(e)?);
    type G<'a, T> = (&'a mut Buffer<T>, &'a mut Buffer<T>, &'a mut Buffer<T>);
    let vb = |o: &Buffer<T>, l: &Buffer<f32>, (gq, gk, gv): G<'_, T>, cq: &Buffer<i32>, vp: &VarlenProblem| {
        attention_varlen_backward(dev, &q, &k, &v, o, &dout, l, gq, gk, gv, cq, cq, vp, &opts).map_err(le)
    };
    vb(&vo, &vl, (&mut gq, &mut gk, &mut gv), &cq, &vp).and_then(|_| dev.synchronize()).map_err(e)?;
    let worst = ferrotile_kernels::reference::attention_backward_sampled_err(
        [&qh, &kh, &vh, &o.to_vec().map_err(e)?, &doh],
        &lse.to_vec().map_err(e)?,
        [&gq.to_vec().map_err(e)?, &gk.to_vec().map_err(e)?, &gv.to_vec().map_err(e)?],
        &p,
        &mut Rng::new(19),
        8,
        1.0 / (d as f64).sqrt(),
        None,
        causal.then_some(0),
    );
    let pass = worst <= tol;
    ok &= pass;
    let equal = time_both(dev, 10, 3, || vb(&vo, &vl, (&mut gq, &mut gk, &mut gv), &cq, &vp)).map_err(e)?;
    if sweep {
        // each tuner pair forced on both (dK/dV candidate `i` with dQ
        // candidate `i mod n`, as `--backward` forces them)
        let (ca, cb) = ferrotile_kernels::attention::backward_candidates(p.padded_dim());
        let cfg = |tc: &ferrotile::TuneConfig| ferrotile_kernels::attention::AttentionConfig::from_tune(tc).unwrap();
        for (i, a) in ca.iter().enumerate() {
            let c = ferrotile_kernels::attention::BackwardConfig { dkdv: cfg(a), dq: cfg(&cb[i % cb.len()]), atomic_dq: false };
            let f = |a: ferrotile_kernels::attention::AttentionConfig| format!("{}x{}x{}w{}s", a.bm, a.bn, a.num_warps, a.num_stages);
            let name = format!("{}/{}", f(c.dkdv), f(c.dq));
            let fo = AttentionOptions { backward: Some(c), ..opts };
            let td = time_both(dev, 10, 3, || attention_backward(dev, &q, &k, &v, &o, &dout, &lse, &mut dq, &mut dk, &mut dv, &p, &fo).map_err(le));
            let tv = time_both(dev, 10, 3, || {
                attention_varlen_backward(dev, &q, &k, &v, &vo, &dout, &vl, &mut gq, &mut gk, &mut gv, &cq, &cq, &vp, &fo).map_err(le)
            });
            match (td, tv) {
                (Ok(td), Ok(tv)) => println!(
                    "varlen-bwd {:<5} b{b} h{h}/{hk} s{s} d{d} causal={} {name:<26} dense {:>9.1} us | varlen {:>9.1} us ({:.2}x dense)",
                    T::DTYPE,
                    causal as u8,
                    td.ms() * 1e3,
                    tv.ms() * 1e3,
                    td.ms() / tv.ms()
                ),
                (a, b) => println!("varlen-bwd {name}: error: dense {:?} varlen {:?}", a.err().map(|x| x.to_string()), b.err().map(|x| x.to_string())),
            }
        }
    }
    // ragged: lengths s/2 and 3s/2 alternating (same total when b is even)
    let lens: Vec<usize> = (0..b)
        .map(|i| {
            if b.is_multiple_of(2) {
                if i % 2 == 0 {
                    s / 2
                } else {
                    s + s / 2
                }
            } else {
                s
            }
        })
        .collect();
    let mut cr = vec![0i32];
    for l in &lens {
        cr.push(cr.last().unwrap() + *l as i32);
    }
    let total = *cr.last().unwrap() as usize;
    let rflops = 2.5 * 4.0 * h as f64 * lens.iter().map(|&l| (l * l * d) as f64).sum::<f64>() * if causal { 0.5 } else { 1.0 };
    let crb = dev.from_slice(&cr).map_err(e)?;
    let rp = VarlenProblem::packed(b, h, hk, total, total, *lens.iter().max().unwrap(), *lens.iter().max().unwrap(), d);
    attention_varlen(dev, &q, &k, &v, &mut vo, Some(&mut vl), &crb, &crb, &rp, &opts).map_err(|x| x.to_string())?;
    let ragged = time_both(dev, 10, 3, || vb(&vo, &vl, (&mut gq, &mut gk, &mut gv), &crb, &rp)).map_err(e)?;
    // the forwards too: dense (tuned) and varlen (its default tiles) on the same tokens
    let ffl = flops / 2.5;
    let fd = time_both(dev, 10, 3, || attention(dev, &q, &k, &v, &mut o, Some(&mut lse), &p, &opts).map_err(le)).map_err(e)?;
    let fv = time_both(dev, 10, 3, || attention_varlen(dev, &q, &k, &v, &mut vo, Some(&mut vl), &cq, &cq, &vp, &opts).map_err(le)).map_err(e)?;
    // (and with the offsets on trust: no read-back, no wait for the GPU)
    let tp = vp.trusted_offsets();
    let ft = time_both(dev, 10, 3, || attention_varlen(dev, &q, &k, &v, &mut vo, Some(&mut vl), &cq, &cq, &tp, &opts).map_err(le)).map_err(e)?;
    let bt = time_both(dev, 10, 3, || vb(&vo, &vl, (&mut gq, &mut gk, &mut gv), &cq, &tp)).map_err(e)?;
    let tf = |f: f64, t: &Timing| f / (t.ms() * 1e-3) / 1e12;
    println!(
        "varlen-fwd {:<5} b{b} h{h}/{hk} s{s} d{d} causal={}  dense {:>9.1} us {:>6.1} TFLOP/s | varlen equal {:>9.1} us {:>6.1} TFLOP/s ({:.2}x dense) | trusted offsets {:>9.1} us ({:.2}x dense)",
        T::DTYPE,
        causal as u8,
        fd.ms() * 1e3,
        tf(ffl, &fd),
        fv.ms() * 1e3,
        tf(ffl, &fv),
        fd.ms() / fv.ms(),
        ft.ms() * 1e3,
        fd.ms() / ft.ms()
    );
    println!(
        "varlen-bwd {:<5} b{b} h{h}/{hk} s{s} d{d} causal={}  dense {:>9.1} us {:>6.1} TFLOP/s | varlen equal {:>9.1} us {:>6.1} TFLOP/s ({:.2}x dense) err {worst:.1e}{} | trusted offsets {:>9.1} us ({:.2}x dense) | ragged {}/{} {:>9.1} us {:>6.1} TFLOP/s",
        T::DTYPE,
        causal as u8,
        dense.ms() * 1e3,
        tf(flops, &dense),
        equal.ms() * 1e3,
        tf(flops, &equal),
        dense.ms() / equal.ms(),
        if pass { "" } else { "  FAIL" },
        bt.ms() * 1e3,
        dense.ms() / bt.ms(),
        lens[0],
        lens[lens.len().min(2) - 1],
        ragged.ms() * 1e3,
        tf(rflops, &ragged),
    );
    Ok(ok)
}

/// Decode through the library: `sq` query rows of `h` heads (`hk` K/V
/// heads) against a `[b, hk, sk, d]` KV cache; µs and the KV read's GB/s
/// (K and V once), checked on sampled rows.
fn run_decode<T: FloatElement>(
    dev: &Device,
    [b, h, hk, sq, sk, d]: [usize; 6],
    cfgs: &[Option<ferrotile_kernels::attention::DecodeConfig>],
    tol: f64,
    pages: &[usize],
) -> Result<bool, String> {
    use ferrotile_kernels::attention::{attention, AttentionOptions, AttentionProblem, PagedKv, Strides};
    let e = |e: ferrotile::Error| e.to_string();
    let p = AttentionProblem::bhsd(b, h, hk, sq, sk, d);
    let mut rng = Rng::new(7);
    // (a KV cache is ~10⁹ elements: a block of 2²⁰ − 3 random values,
    // repeated, keeps the host's generation to seconds)
    let block: Vec<T> = (0..(1usize << 20) - 3).map(|_| T::from_f64(rng.normal())).collect();
    let mut off = 0usize;
    let mut gen = |n: usize| -> Vec<T> {
        off += 7919;
        (0..n).map(|i| block[(i + off) % block.len()]).collect()
    };
    let (qh, kh, vh) = (gen(b * h * sq * d), gen(b * hk * sk * d), gen(b * hk * sk * d));
    let (q, k, v): (Buffer<T>, Buffer<T>, Buffer<T>) = (dev.from_slice(&qh).map_err(e)?, dev.from_slice(&kh).map_err(e)?, dev.from_slice(&vh).map_err(e)?);
    // one decode call: launched, checked against f64 on sampled rows of
    // the logical (contiguous) cache, timed, printed; false when wrong
    let measure = |name: &str, k: &Buffer<T>, v: &Buffer<T>, pl: &AttentionProblem, opts: &AttentionOptions<'_>| -> Result<bool, String> {
        let mut o: Buffer<T> = dev.from_slice(&vec![T::from_f64(f64::NAN); qh.len()]).map_err(e)?;
        let launch = |o: &mut Buffer<T>| {
            attention(dev, &q, k, v, o, None, pl, opts).map_err(|x| ferrotile::Error::Launch { kernel: "attention".into(), msg: x.to_string() })
        };
        if let Err(err) = launch(&mut o).and_then(|_| dev.synchronize()) {
            println!("decode {:<5} b{b} h{h}/{hk} q{sq} kv{sk} d{d} {name}: error: {err}", T::DTYPE);
            return Ok(false);
        }
        let got = o.to_vec().map_err(e)?;
        let worst = attention_sampled_err(&qh, &kh, &vh, &got, &p, &mut Rng::new(3), 16, 1.0 / (d as f64).sqrt(), None, None);
        let t: Timing = if dev.kind() == ferrotile::DeviceKind::Cpu {
            Timing { b2b: f64::NAN, graph: None }
        } else {
            time_both(dev, 50, 10, || launch(&mut o)).map_err(e)?
        };
        let kv_bytes = (2 * b * hk * sk * d * std::mem::size_of::<T>()) as f64;
        let pass = worst <= tol;
        println!(
            "decode {:<5} b{b} h{h}/{hk} q{sq} kv{sk} d{d} {name:<14} {:>9.1} us (b2b {:>9.1})  {:>7.0} GB/s KV  err {worst:.1e}{}",
            T::DTYPE,
            t.ms() * 1e3,
            t.b2b * 1e3,
            kv_bytes / (t.ms() * 1e-3) / 1e9,
            if pass { "" } else { "  FAIL" }
        );
        Ok(pass)
    };
    let mut all = true;
    for &cfg in cfgs {
        let name =
            cfg.map_or("auto".to_string(), |c| format!("{}x{}w{}s/{}", c.bn, c.num_warps, c.num_stages, c.splits.map_or("auto".into(), |x| x.to_string())));
        all &= measure(&name, &k, &v, &p, &AttentionOptions { decode: cfg, ..Default::default() })?;
    }
    // the same cache paged (vLLM's `[pages, page_size, hk, d]`, the pages
    // of each entry scattered over the pool), default configuration
    for &ps in pages {
        let mp = sk.div_ceil(ps);
        let np = b * mp;
        // (a bijection: 7919 is prime and does not divide the pool)
        let page_of = |bb: usize, j: usize| ((bb * mp + j) * 7919) % np;
        let table: Vec<i32> = (0..b).flat_map(|bb| (0..mp).map(move |j| page_of(bb, j) as i32)).collect();
        let paged_copy = |x: &[T]| -> Vec<T> {
            let mut c = vec![T::from_f64(0.0); np * ps * hk * d];
            for bb in 0..b {
                for hh in 0..hk {
                    for t in 0..sk {
                        let dst = ((page_of(bb, t / ps) * ps + t % ps) * hk + hh) * d;
                        let src = ((bb * hk + hh) * sk + t) * d;
                        c[dst..dst + d].copy_from_slice(&x[src..src + d]);
                    }
                }
            }
            c
        };
        let (kp, vp): (Buffer<T>, Buffer<T>) = (dev.from_slice(&paged_copy(&kh)).map_err(e)?, dev.from_slice(&paged_copy(&vh)).map_err(e)?);
        let tb = dev.from_slice(&table).map_err(e)?;
        let cs = Strides::bshd(hk, ps, d);
        let opts = AttentionOptions { paged: Some(PagedKv { block_table: &tb, max_pages: mp, page_size: ps, num_pages: np }), ..Default::default() };
        all &= measure(&format!("paged{ps}"), &kp, &vp, &AttentionProblem { k: cs, v: cs, ..p }, &opts)?;
    }
    Ok(all)
}

fn emit(args: &[String]) {
    use ferrotile::ir::passes::guard::guarded_params;
    use ferrotile::ir::{specialize, DType};
    use ferrotile_backends::ptx::PtxOptions;
    let t: Vec<i64> = args[0].split('x').map(|v| v.parse().unwrap()).collect();
    let warps: u32 = args[1].parse().unwrap();
    let stages: u32 = args[2].parse().unwrap();
    let sm: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(90);
    let causal = args.iter().any(|a| a == "causal") as i64;
    let ws = args.iter().any(|a| a == "ws");
    let per_sm: u32 = args.iter().find_map(|a| a.strip_prefix("perSM=")).and_then(|v| v.parse().ok()).unwrap_or(0);
    // (`lib`: the library's overlapped kernel instead, MHA, no window or
    // log-sum-exp; `nofold` keeps its scale out of exp2's argument)
    let (k, spec) = if args.iter().any(|a| a == "lib") {
        let k = ferrotile_kernels::attention::attention_fwd_overlap::ir();
        let fold = !args.iter().any(|a| a == "nofold") as i64;
        (k, specialize(k, &[t[0], t[1], t[2], 1, causal, 0, 0, fold], &[DType::BF16]).unwrap())
    } else {
        let k = if overlap() { attn_fwd_ov::ir() } else { attn_fwd::ir() };
        (k, specialize(k, &[t[0], t[1], t[2], causal], &[DType::BF16]).unwrap())
    };
    let opts = PtxOptions {
        arg_div: vec![16; guarded_params(k)],
        pipeline: stages - 1,
        tma: !args.iter().any(|a| a == "notma"),
        warp_specialize: ws,
        split_masks: args.iter().any(|a| a == "split"),
        rotate_chains: args.iter().any(|a| a == "rotate"),
        safety: if args.iter().any(|a| a == "unchecked") { ferrotile::ir::passes::Safety::Unchecked } else { ferrotile::ir::passes::Safety::Safe },
        invariant_a_regs: std::env::var("FERROTILE_INVARIANT_A_REGS").ok().and_then(|v| v.parse().ok()).unwrap_or(32),
        lower_register_a: std::env::var("FERROTILE_LOWER_REGISTER_A").is_ok_and(|v| v == "1"),
        programs_per_sm: per_sm,
        ..PtxOptions::new(sm, warps, k.params.len())
    };
    let p = ferrotile_backends::ptx::emit(&spec, &opts).unwrap_or_else(|e| panic!("{e:?}"));
    ferrotile_benches::explain_ptx(&p);
    println!("{}", p.text);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("usage: attn-user [--device cuda|wgpu|cpu] [--shapes B:H:S:D,..] [--causal 0|1|both] [--configs BMxBNxWARPSxSTAGES[xPROGRAMS_PER_SM],..]\n       attn-user --decode-shapes B:H:HK:SQ:SK:D,.. [--device ..] [--paged PS,..]: the library's decode path (µs, KV GB/s; also from a paged copy of the cache)\n       attn-user --library [--backward] [--layout bhsd|bshd] [--group G] [--configs ..] [shapes, causal, device as above] [--dtype bf16|f16]: the library's attention, forward or backward (each config forced, then its own choice); `--varlen`: the varlen backward next to the dense one on the same tokens, and on a ragged batch\n       attn-user --emit BMxBNxD WARPS STAGES [sm] [causal] [ws] [perSM=N] [split] [rotate] [lib [nofold]]");
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--emit") {
        emit(&args[i + 1..]);
        return;
    }
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let dev = ferrotile_benches::device_arg(&args);
    let gpu = dev.kind() == ferrotile::DeviceKind::Cuda;
    let default_shapes = if gpu { "4:32:4096:128,4:32:4096:64,1:2:1000:64" } else { "1:2:77:64,1:1:40:128" };
    let shapes: Vec<[usize; 4]> = arg("--shapes")
        .unwrap_or_else(|| default_shapes.into())
        .split(',')
        .filter_map(|s| {
            let v: Vec<usize> = s.split(':').map(|x| x.parse().ok()).collect::<Option<_>>()?;
            (v.len() == 4).then(|| [v[0], v[1], v[2], v[3]])
        })
        .collect();
    let default_cfgs = if gpu { "128x64x4x2,128x64x8x2,128x64x8x3,128x128x8x2,64x64x4x3" } else { "32x16x4x2,16x32x4x2" };
    let cfgs: Vec<Cfg> = arg("--configs").unwrap_or_else(|| default_cfgs.into()).split(',').filter_map(parse_cfg).collect();
    // `--dtype bf16|f16`: one of the two (default both)
    let dtype = arg("--dtype").unwrap_or_default();
    let dtype = dtype.as_str();
    let causals: Vec<bool> = match arg("--causal").as_deref() {
        Some("0") => vec![false],
        Some("1") => vec![true],
        _ => vec![false, true],
    };
    println!("attn-user on {}", dev.name());
    let mut ok = true;
    if let Some(ds) = arg("--decode-shapes") {
        if gpu {
            if let Ok(gbs) = dev.copy_bandwidth_gbs(1 << 30, 20) {
                println!("copy bandwidth {gbs:.0} GB/s");
            }
        }
        for sh in ds.split(',') {
            let v: Vec<usize> = sh.split(':').filter_map(|x| x.parse().ok()).collect();
            let Ok(dims) = <[usize; 6]>::try_from(v) else {
                println!("error: decode shape {sh}: want B:H:HK:SQ:SK:D");
                std::process::exit(1);
            };
            // `--decode-configs BNxWARPSxSTAGES[xSPLITS],..`: bf16 only, each forced, then the default
            let forced: Vec<Option<ferrotile_kernels::attention::DecodeConfig>> = arg("--decode-configs")
                .map(|c| {
                    c.split(',')
                        .filter_map(|x| {
                            let v: Vec<u32> = x.split('x').filter_map(|y| y.parse().ok()).collect();
                            (v.len() >= 3).then(|| ferrotile_kernels::attention::DecodeConfig {
                                bn: v[0],
                                num_warps: v[1],
                                num_stages: v[2],
                                splits: v.get(3).copied(),
                            })
                        })
                        .map(Some)
                        .chain([None])
                        .collect()
                })
                .unwrap_or_default();
            // `--paged PS,..`: also from a paged copy of the cache (bf16)
            let pages: Vec<usize> = arg("--paged").map(|c| c.split(',').filter_map(|x| x.parse().ok()).collect()).unwrap_or_default();
            let runs = if forced.is_empty() {
                vec![run_decode::<bf16>(&dev, dims, &[None], 2e-2, &pages), run_decode::<f16>(&dev, dims, &[None], 5e-3, &[])]
            } else {
                vec![run_decode::<bf16>(&dev, dims, &forced, 2e-2, &pages)]
            };
            for r in runs {
                match r {
                    Ok(o) => ok &= o,
                    Err(e) => {
                        println!("error: {e}");
                        ok = false;
                    }
                }
            }
        }
        if !ok {
            std::process::exit(1);
        }
        return;
    }
    if args.iter().any(|a| a == "--library") {
        let hk_div: usize = arg("--group").and_then(|g| g.parse().ok()).unwrap_or(1);
        let bshd = arg("--layout").as_deref() == Some("bshd");
        let cfgs: Vec<Cfg> = arg("--configs").map(|c| c.split(',').filter_map(parse_cfg).collect()).unwrap_or_default();
        for &[b, h, s, d] in &shapes {
            for &causal in &causals {
                let hk = (h / hk_div).max(1);
                let runs = if args.iter().any(|a| a == "--varlen") {
                    // (`--varlen-sweep`: each tuner pair forced on both too)
                    let sweep = args.iter().any(|a| a == "--varlen-sweep");
                    let mut v = vec![];
                    if dtype != "f16" {
                        v.push(run_varlen_bwd::<bf16>(&dev, b, h, hk, s, d, causal, 2e-2, sweep));
                    }
                    if dtype != "bf16" {
                        v.push(run_varlen_bwd::<f16>(&dev, b, h, hk, s, d, causal, 5e-3, sweep));
                    }
                    v
                } else if args.iter().any(|a| a == "--backward") {
                    vec![run_library_bwd::<bf16>(&dev, b, h, hk, s, d, causal, bshd, 2e-2), run_library_bwd::<f16>(&dev, b, h, hk, s, d, causal, bshd, 5e-3)]
                } else {
                    let mut v = vec![];
                    if dtype != "f16" {
                        v.push(run_library::<bf16>(&dev, b, h, hk, s, d, causal, bshd, &cfgs, 2e-2));
                    }
                    if dtype != "bf16" {
                        v.push(run_library::<f16>(&dev, b, h, hk, s, d, causal, bshd, &cfgs, 5e-3));
                    }
                    v
                };
                for r in runs {
                    match r {
                        Ok(o) => ok &= o,
                        Err(e) => {
                            println!("error: {e}");
                            ok = false;
                        }
                    }
                }
            }
        }
        if !ok {
            std::process::exit(1);
        }
        return;
    }
    for &[b, h, s, d] in &shapes {
        for &causal in &causals {
            let mut runs = vec![];
            if dtype != "f16" {
                runs.push(run::<bf16>(&dev, b, h, s, d, causal, &cfgs, 2e-2));
            }
            if dtype != "bf16" {
                runs.push(run::<f16>(&dev, b, h, s, d, causal, &cfgs, 5e-3));
            }
            for r in runs {
                match r {
                    Ok(o) => ok &= o,
                    Err(e) => {
                        println!("error: {e}");
                        ok = false;
                    }
                }
            }
        }
    }
    if !ok {
        std::process::exit(1);
    }
}
