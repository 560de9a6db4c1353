//! The generality suite of issue 20: kernels of eight different kinds,
//! written in the DSL as a user would write them from the README (nobody
//! tuned the compiler for them), each next to a Triton kernel of the same
//! algorithm in `benches/peers.py --suite` (same shapes, same tiles where
//! Triton takes them). Every compiler change runs it:
//! `gpu-run.sh suite` prints both and the geometric mean of the ratios.
//!
//! | kernel | kind |
//! |---|---|
//! | `silu_scale3d` | elementwise on rank-3 tiles, a broadcast operand |
//! | `rope` | rank-3 tiles, rotate-half: two halves of each head |
//! | `row_cumsum` | a scan along rows (non-power-of-two width) |
//! | `row_topk` | a selection: top-8 values and indices per row |
//! | `softmax_bwd` | a backward pass: `dx = y·(dy − Σ y·dy)` |
//! | `embedding` | a gather through loaded indices |
//! | `grouped_gemm` | a grouped GEMM (MoE): a tile table loaded per program |
//! | `norm_matmul` | RMSNorm fused into the GEMM after it: a row statistic, then a computed A operand |
//! | `row_logsumexp` | a long-row online reduction (131072 columns) |
//!
//! Each is checked against f64 on sampled rows (a mismatch prints FAIL and
//! the run exits with 1) and timed as `bench` times: warm-up, then the
//! median of batches of 20 launches replayed from a CUDA graph (and back
//! to back). Output lines: `suite NAME SHAPE ferrotile US (b2b US) err E`.
//!
//! `user-suite [--device cuda|wgpu|cpu] [--only NAME] [--small] [--unchecked]`;
//! `user-suite dump NAME --const … [--emit ptx] [--ptxas]` prints a kernel as
//! `ferrotile dump` does (`user-suite dump --list`)
//! (`--small`: small shapes, for the interpreter and lavapipe; `--unchecked`:
//! every launch without its guards, to measure what they cost)

use ferrotile::prelude::*;
use ferrotile::{Buffer, Device};
use ferrotile_benches::time_both;
use ferrotile_kernels::reference::Rng;
use half::bf16;

/// `y = x·sigmoid(x)·scale[h, d]` over `[nb, nh, nd]`, `[TB, TH, TD]` tiles.
#[kernel]
pub fn silu_scale3d<const TB: i32, const TH: i32, const TD: i32>(x: Ptr<f32>, scale: Ptr<f32>, y: Ptr<f32>, nb: i32, nh: i32, nd: i32) {
    let b = program_id(0) * TB + arange(0, TB);
    let h = program_id(1) * TH + arange(0, TH);
    let d = program_id(2) * TD + arange(0, TD);
    let b3 = expand_dims(expand_dims(b, 1), 2);
    let h3 = expand_dims(expand_dims(h, 0), 2);
    let d3 = expand_dims(expand_dims(d, 0), 1);
    let m = (b3 < nb) & (h3 < nh) & (d3 < nd);
    let offs = ((b3 as i64) * (nh as i64) + (h3 as i64)) * (nd as i64) + (d3 as i64);
    let v = load(x + offs, m, 0.0);
    let hs = expand_dims(h, 1);
    let ds = expand_dims(d, 0);
    let s = load(scale + (hs as i64) * (nd as i64) + (ds as i64), (hs < nh) & (ds < nd), 0.0);
    store(y + offs, v * sigmoid(v) * expand_dims(s, 0), m);
}

/// Rotary embedding, rotate-half form: `x` is `[ntok, H, 2·HALF]`,
/// `cos`/`sin` are `[ntok, HALF]`; `TT` tokens per program.
#[kernel]
pub fn rope<const TT: i32, const H: i32, const HALF: i32>(x: Ptr<f32>, cos: Ptr<f32>, sin: Ptr<f32>, y: Ptr<f32>, ntok: i32) {
    let t = program_id(0) * TT + arange(0, TT);
    let t3 = expand_dims(expand_dims(t, 1), 2);
    let h3 = expand_dims(expand_dims(arange(0, H), 0), 2);
    let j3 = expand_dims(expand_dims(arange(0, HALF), 0), 1);
    let m = broadcast_to(t3 < ntok, [TT, H, HALF]);
    let at = (t3 as i64) * ((H * 2 * HALF) as i64) + (h3 as i64) * ((2 * HALF) as i64) + (j3 as i64);
    let x1 = load(x + at, m, 0.0);
    let x2 = load(x + at + HALF, m, 0.0);
    let cs = (t3 as i64) * (HALF as i64) + (j3 as i64);
    let tm = t3 < ntok;
    let c = load(cos + cs, tm, 0.0);
    let s = load(sin + cs, tm, 0.0);
    store(y + at, x1 * c - x2 * s, m);
    store(y + at + HALF, x2 * c + x1 * s, m);
}

/// Inclusive prefix sums along each row of `[rows, n]` (`n ≤ B`).
#[kernel]
pub fn row_cumsum<const B: i32>(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let row = (program_id(0) as i64) * (n as i64);
    let c = arange(0, B);
    let v = load(x + row + c, c < n, 0.0);
    store(y + row + c, cumsum(v, 0), c < n);
}

/// The `K` largest values of each row (`n ≤ B`) and their column indices,
/// largest first: `K` rounds of max / argmax, each masking its winner.
#[kernel]
pub fn row_topk<const B: i32, const K: i32>(x: Ptr<f32>, vals: Ptr<f32>, idxs: Ptr<i32>, n: i32) {
    let r = program_id(0);
    let c = arange(0, B);
    let mut v = load(x + (r as i64) * (n as i64) + c, c < n, f32::NEG_INFINITY);
    for i in 0..K {
        let best = max(v, axis = 0);
        let at = argmax(v, 0);
        store(vals + r * K + i, best);
        store(idxs + r * K + i, at);
        v = select(c == at, f32::NEG_INFINITY, v);
    }
}

/// Softmax backward along rows: `dx = y·(dy − Σ y·dy)`.
#[kernel]
pub fn softmax_bwd<const B: i32>(y: Ptr<f32>, dy: Ptr<f32>, dx: Ptr<f32>, n: i32) {
    let row = (program_id(0) as i64) * (n as i64);
    let c = arange(0, B);
    let m = c < n;
    let yv = load(y + row + c, m, 0.0);
    let g = load(dy + row + c, m, 0.0);
    let dot = sum(yv * g, 0);
    store(dx + row + c, yv * (g - dot), m);
}

/// `out[i, :] = table[idx[i], :]`: `R` tokens × `BD` columns per program.
#[kernel]
pub fn embedding<const R: i32, const BD: i32>(table: Ptr<f32>, idx: Ptr<i32>, out: Ptr<f32>, ntok: i32, d: i32) {
    let t = program_id(0) * R + arange(0, R);
    let cols = program_id(1) * BD + arange(0, BD);
    let tok_ok = t < ntok;
    let rows = load(idx + t, tok_ok, 0);
    let m = expand_dims(tok_ok, 1) & expand_dims(cols < d, 0);
    let v = load(table + expand_dims((rows as i64) * (d as i64), 1) + expand_dims(cols as i64, 0), m, 0.0);
    store(out + expand_dims((t as i64) * (d as i64), 1) + expand_dims(cols as i64, 0), v, m);
}

/// Grouped GEMM (a mixture of experts' layer): the rows of `x` come in
/// groups, group `g` multiplied by its own `w[g]` (`[k, n]`). Program
/// `(t, j)` computes tile `t` of the tile table — group `tile_group[t]`,
/// rows from `tile_row[t]` up to the group's end `group_end[g]` — and
/// column block `j`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn grouped_gemm<const BM: i32, const BN: i32, const BK: i32>(
    x: Ptr<bf16>,
    w: Ptr<bf16>,
    out: Ptr<bf16>,
    tile_group: Ptr<i32>,
    tile_row: Ptr<i32>,
    group_end: Ptr<i32>,
    n: i32,
    k: i32,
) {
    let t = program_id(0);
    let g = load(tile_group + t);
    let r0 = load(tile_row + t);
    let r_end = load(group_end + g);
    let rm = r0 + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let m_ok = rm < r_end;
    let n_ok = rn < n;
    let wg = w + (g as i64) * (k as i64) * (n as i64);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let kk = k0 + arange(0, BK);
        let a = load(x + expand_dims((rm as i64) * (k as i64), 1) + expand_dims(kk as i64, 0), expand_dims(m_ok, 1) & expand_dims(kk < k, 0), 0.0);
        let b = load(wg + expand_dims((kk as i64) * (n as i64), 1) + expand_dims(rn as i64, 0), expand_dims(kk < k, 1) & expand_dims(n_ok, 0), 0.0);
        acc = dot(a, b, acc);
    }
    store(out + expand_dims((rm as i64) * (n as i64), 1) + expand_dims(rn as i64, 0), acc as bf16, expand_dims(m_ok, 1) & expand_dims(n_ok, 0));
}

/// `y = (x · rsqrt(mean(x²) + eps) ∘ g) · W` (bf16 in and out, f32
/// statistics and accumulation): `BM` rows of `x` and `BN` columns of `W`
/// per program — a first loop for the rows' mean square, a second whose A
/// operand is the normalized tile.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn norm_matmul<const BM: i32, const BN: i32, const BK: i32>(x: Ptr<bf16>, g: Ptr<bf16>, w: Ptr<bf16>, y: Ptr<bf16>, m: i32, n: i32, k: i32, eps: f32) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let m_ok = rm < m;
    let n_ok = rn < n;
    let xrow = x + expand_dims((rm as i64) * (k as i64), 1);
    let mut ss = zeros([BM], f32);
    for k0 in (0..k).step_by(BK) {
        let rk = k0 + arange(0, BK);
        let xt = load(xrow + expand_dims(rk as i64, 0), expand_dims(m_ok, 1) & expand_dims(rk < k, 0), 0.0) as f32;
        ss = ss + sum(xt * xt, 1);
    }
    let r = rsqrt(ss / (k as f32) + eps);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let rk = k0 + arange(0, BK);
        let k_ok = rk < k;
        let xt = load(xrow + expand_dims(rk as i64, 0), expand_dims(m_ok, 1) & expand_dims(k_ok, 0), 0.0) as f32;
        let gv = load(g + rk, k_ok, 0.0) as f32;
        let a = (xt * expand_dims(r, 1) * expand_dims(gv, 0)) as bf16;
        let wt = load(w + expand_dims((rk as i64) * (n as i64), 1) + expand_dims(rn as i64, 0), expand_dims(k_ok, 1) & expand_dims(n_ok, 0), 0.0);
        acc = dot(a, wt, acc);
    }
    store(y + expand_dims((rm as i64) * (n as i64), 1) + expand_dims(rn as i64, 0), acc as bf16, expand_dims(m_ok, 1) & expand_dims(n_ok, 0));
}

/// `out[r] = log Σ exp(x[r, :])` over long rows, `B` columns a step: a
/// running maximum and rescaled sum per lane, combined at the end.
#[kernel]
pub fn row_logsumexp<const B: i32>(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let row = x + (program_id(0) as i64) * (n as i64);
    let mut mv = full([B], -1.0e30, f32);
    let mut sv = zeros([B], f32);
    for c0 in (0..n).step_by(B) {
        let c = c0 + arange(0, B);
        let v = load(row + c, c < n, f32::NEG_INFINITY);
        let nm = maximum(mv, v);
        sv = sv * exp(mv - nm) + exp(v - nm);
        mv = nm;
    }
    let m = max(mv, axis = 0);
    store(out + program_id(0), m + log(sum(sv * exp(mv - m), 0)));
}

type R<T> = Result<T, String>;

fn e(e: ferrotile::Error) -> String {
    e.to_string()
}

fn up<T: ferrotile::Element>(dev: &Device, v: &[T]) -> R<Buffer<T>> {
    dev.from_slice(v).map_err(e)
}

fn rel(got: f64, want: f64, scale: f64) -> f64 {
    (got - want).abs() / (want.abs() + scale)
}

struct Case {
    name: &'static str,
    shape: String,
    ms: f64,
    b2b: f64,
    err: f64,
    tol: f64,
}

/// Median graph (and back-to-back) time of `f` after warm-up.
fn time(dev: &Device, mut f: impl FnMut() -> ferrotile::Result<()>) -> R<(f64, f64)> {
    for _ in 0..3 {
        f().map_err(e)?;
    }
    dev.synchronize().map_err(e)?;
    let t = time_both(dev, 7 * 20, 20, f).map_err(e)?;
    Ok((t.ms(), t.b2b))
}

fn silu3d(dev: &Device, small: bool) -> R<Case> {
    let (nb, nh, nd) = if small { (3, 5, 70) } else { (32, 512, 1000) };
    let mut rng = Rng::new(1);
    let xs: Vec<f32> = (0..nb * nh * nd).map(|_| rng.normal() as f32).collect();
    let ss: Vec<f32> = (0..nh * nd).map(|_| rng.normal() as f32).collect();
    let (x, s) = (up(dev, &xs)?, up(dev, &ss)?);
    let mut y = dev.full(nb * nh * nd, f32::NAN).map_err(e)?;
    let (tb, th, td) = (2, 4, 256);
    let grid = [nb.div_ceil(tb) as u32, nh.div_ceil(th) as u32, nd.div_ceil(td) as u32];
    let mut go = || silu_scale3d::launch(dev, grid, &x, &s, &mut y, nb as i32, nh as i32, nd as i32, tb as i32, th as i32, td as i32);
    let (ms, b2b) = time(dev, &mut go)?;
    let got = y.to_vec().map_err(e)?;
    let mut err = 0.0f64;
    for i in (0..xs.len()).step_by(97) {
        let v = xs[i] as f64;
        let want = v / (1.0 + (-v).exp()) * ss[i % (nh * nd)] as f64;
        err = err.max(rel(got[i] as f64, want, 1e-6));
    }
    Ok(Case { name: "silu_scale3d", shape: format!("{nb}x{nh}x{nd}"), ms, b2b, err, tol: 1e-5 })
}

fn rope_case(dev: &Device, small: bool) -> R<Case> {
    const H: usize = 32;
    const HALF: usize = 64;
    let ntok = if small { 5 } else { 8192 };
    let mut rng = Rng::new(2);
    let xs: Vec<f32> = (0..ntok * H * 2 * HALF).map(|_| rng.normal() as f32).collect();
    let ang: Vec<f64> = (0..ntok * HALF).map(|i| (i / HALF) as f64 * 10000f64.powf(-((i % HALF) as f64) / HALF as f64)).collect();
    let cs: Vec<f32> = ang.iter().map(|a| a.cos() as f32).collect();
    let sn: Vec<f32> = ang.iter().map(|a| a.sin() as f32).collect();
    let (x, c, s) = (up(dev, &xs)?, up(dev, &cs)?, up(dev, &sn)?);
    let mut y = dev.full(xs.len(), f32::NAN).map_err(e)?;
    let tt = 2;
    let grid = [ntok.div_ceil(tt) as u32, 1, 1];
    let mut go = || rope::launch(dev, grid, &x, &c, &s, &mut y, ntok as i32, tt as i32, H as i32, HALF as i32);
    let (ms, b2b) = time(dev, &mut go)?;
    let got = y.to_vec().map_err(e)?;
    let mut err = 0.0f64;
    for i in (0..xs.len()).step_by(89) {
        let (t, j) = (i / (H * 2 * HALF), i % (2 * HALF));
        let base = i - j;
        let jj = j % HALF;
        let (x1, x2) = (xs[base + jj] as f64, xs[base + HALF + jj] as f64);
        let (co, si) = (cs[t * HALF + jj] as f64, sn[t * HALF + jj] as f64);
        let want = if j < HALF { x1 * co - x2 * si } else { x2 * co + x1 * si };
        // (relative to the terms: the GPU may contract x1·c − x2·s into an FMA)
        err = err.max(rel(got[i] as f64, want, (x1 * co).abs() + (x2 * si).abs()));
    }
    Ok(Case { name: "rope", shape: format!("{ntok}x{H}x{}", 2 * HALF), ms, b2b, err, tol: 1e-5 })
}

fn cumsum_case(dev: &Device, small: bool) -> R<Case> {
    let (rows, n) = if small { (3, 100) } else { (16384, 1000) };
    let mut rng = Rng::new(3);
    let xs: Vec<f32> = (0..rows * n).map(|_| rng.normal() as f32).collect();
    let x = up(dev, &xs)?;
    let mut y = dev.full(rows * n, f32::NAN).map_err(e)?;
    let b = n.next_power_of_two() as i32;
    let mut go = || row_cumsum::launch(dev, [rows as u32, 1, 1], &x, &mut y, n as i32, b);
    let (ms, b2b) = time(dev, &mut go)?;
    let got = y.to_vec().map_err(e)?;
    let mut err = 0.0f64;
    for r in (0..rows).step_by((rows / 13).max(1)) {
        let (mut acc, mut mag) = (0.0f64, 0.0f64);
        for j in 0..n {
            acc += xs[r * n + j] as f64;
            mag += (xs[r * n + j] as f64).abs();
            err = err.max(rel(got[r * n + j] as f64, acc, mag));
        }
    }
    Ok(Case { name: "row_cumsum", shape: format!("{rows}x{n}"), ms, b2b, err, tol: 1e-5 })
}

fn topk_case(dev: &Device, small: bool) -> R<Case> {
    const K: usize = 8;
    let (rows, n) = if small { (3, 100) } else { (16384, 1000) };
    let mut rng = Rng::new(4);
    let xs: Vec<f32> = (0..rows * n).map(|_| rng.normal() as f32).collect();
    let x = up(dev, &xs)?;
    let mut vals = dev.full(rows * K, f32::NAN).map_err(e)?;
    let mut idxs = dev.full(rows * K, -1i32).map_err(e)?;
    let b = n.next_power_of_two() as i32;
    let mut go = || row_topk::launch(dev, [rows as u32, 1, 1], &x, &mut vals, &mut idxs, n as i32, b, K as i32);
    let (ms, b2b) = time(dev, &mut go)?;
    let (gv, gi) = (vals.to_vec().map_err(e)?, idxs.to_vec().map_err(e)?);
    let mut err = 0.0f64;
    for r in (0..rows).step_by((rows / 13).max(1)) {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| xs[r * n + b].total_cmp(&xs[r * n + a]).then(a.cmp(&b)));
        for i in 0..K {
            if gi[r * K + i] != order[i] as i32 || gv[r * K + i] != xs[r * n + order[i]] {
                err = 1.0;
            }
        }
    }
    Ok(Case { name: "row_topk", shape: format!("{rows}x{n}:k{K}"), ms, b2b, err, tol: 0.0 })
}

fn softmax_bwd_case(dev: &Device, small: bool) -> R<Case> {
    let (rows, n) = if small { (3, 100) } else { (16384, 1000) };
    let mut rng = Rng::new(5);
    let ys: Vec<f32> = (0..rows * n).map(|_| rng.range(0.0, 2.0 / n as f64) as f32).collect();
    let gs: Vec<f32> = (0..rows * n).map(|_| rng.normal() as f32).collect();
    let (y, g) = (up(dev, &ys)?, up(dev, &gs)?);
    let mut dx = dev.full(rows * n, f32::NAN).map_err(e)?;
    let b = n.next_power_of_two() as i32;
    let mut go = || softmax_bwd::launch(dev, [rows as u32, 1, 1], &y, &g, &mut dx, n as i32, b);
    let (ms, b2b) = time(dev, &mut go)?;
    let got = dx.to_vec().map_err(e)?;
    let mut err = 0.0f64;
    for r in (0..rows).step_by((rows / 13).max(1)) {
        let dot: f64 = (0..n).map(|j| ys[r * n + j] as f64 * gs[r * n + j] as f64).sum();
        let mag: f64 = (0..n).map(|j| (ys[r * n + j] as f64 * gs[r * n + j] as f64).abs()).sum();
        for j in 0..n {
            let (yv, gv) = (ys[r * n + j] as f64, gs[r * n + j] as f64);
            err = err.max(rel(got[r * n + j] as f64, yv * (gv - dot), yv * (gv.abs() + mag)));
        }
    }
    Ok(Case { name: "softmax_bwd", shape: format!("{rows}x{n}"), ms, b2b, err, tol: 1e-5 })
}

fn embedding_case(dev: &Device, small: bool) -> R<Case> {
    let (vocab, d, ntok) = if small { (50, 70, 9) } else { (32000, 1000, 16384) };
    let mut rng = Rng::new(6);
    let ts: Vec<f32> = (0..vocab * d).map(|_| rng.normal() as f32).collect();
    let is: Vec<i32> = (0..ntok).map(|_| rng.below(vocab as u64) as i32).collect();
    let (table, idx) = (up(dev, &ts)?, up(dev, &is)?);
    let mut out = dev.full(ntok * d, f32::NAN).map_err(e)?;
    let (r, bd) = (4usize, 1024usize);
    let grid = [ntok.div_ceil(r) as u32, d.div_ceil(bd) as u32, 1];
    let mut go = || embedding::launch(dev, grid, &table, &idx, &mut out, ntok as i32, d as i32, r as i32, bd as i32);
    let (ms, b2b) = time(dev, &mut go)?;
    let got = out.to_vec().map_err(e)?;
    let bad = (0..ntok * d).step_by(31).any(|i| got[i] != ts[is[i / d] as usize * d + i % d]);
    Ok(Case { name: "embedding", shape: format!("{ntok}x{d}:v{vocab}"), ms, b2b, err: bad as u8 as f64, tol: 0.0 })
}

fn grouped_gemm_case(dev: &Device, small: bool) -> R<Case> {
    let (groups, n, k) = if small { (3usize, 40usize, 48usize) } else { (8, 2048, 2048) };
    let (bm, bn, bk) = if small { (16usize, 16usize, 16usize) } else { (128, 128, 64) };
    let mut rng = Rng::new(7);
    // (peers.py --suite takes the same sizes)
    let sizes: Vec<usize> = if small { vec![5, 30, 17] } else { vec![1023, 257, 600, 1400, 333, 888, 1200, 511] };
    let mut ends = vec![];
    let (mut tile_group, mut tile_row) = (vec![], vec![]);
    let mut start = 0usize;
    for (g, &s) in sizes.iter().enumerate() {
        for r in (start..start + s).step_by(bm) {
            tile_group.push(g as i32);
            tile_row.push(r as i32);
        }
        start += s;
        ends.push(start as i32);
    }
    let m = start;
    let xs: Vec<bf16> = (0..m * k).map(|_| bf16::from_f64(rng.normal())).collect();
    let ws: Vec<bf16> = (0..groups * k * n).map(|_| bf16::from_f64(rng.normal() * 0.05)).collect();
    let (x, w, tg, tr, ge) = (up(dev, &xs)?, up(dev, &ws)?, up(dev, &tile_group)?, up(dev, &tile_row)?, up(dev, &ends)?);
    let mut out = dev.full(m * n, bf16::NAN).map_err(e)?;
    let grid = [tile_group.len() as u32, n.div_ceil(bn) as u32, 1];
    // (`SUITE_GG_STAGES`, `SUITE_GG_WARPS`: other settings, for experiments; the
    // table is measured with Triton's, 8 warps and 3 stages)
    let knob = |v: &str, d: u32| std::env::var(v).ok().and_then(|s| s.parse().ok()).unwrap_or(d);
    let cfg = LaunchConfig::new(grid).num_warps(knob("SUITE_GG_WARPS", if small { 4 } else { 8 })).num_stages(knob("SUITE_GG_STAGES", 3));
    let mut go = || grouped_gemm::launch(dev, cfg, &x, &w, &mut out, &tg, &tr, &ge, n as i32, k as i32, bm as i32, bn as i32, bk as i32);
    let (ms, b2b) = time(dev, &mut go)?;
    let got = out.to_vec().map_err(e)?;
    let mut err = 0.0f64;
    let group_of = |row: usize| ends.iter().position(|&end| row < end as usize).unwrap();
    for row in (0..m).step_by((m / 23).max(1)) {
        let g = group_of(row);
        for j in (0..n).step_by((n / 17).max(1)) {
            let (mut acc, mut mag) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let p = xs[row * k + kk].to_f64() * ws[(g * k + kk) * n + j].to_f64();
                acc += p;
                mag += p * p;
            }
            err = err.max(rel(got[row * n + j].to_f64(), acc, mag.sqrt()));
        }
    }
    let flop = 2.0 * (m * n * k) as f64;
    println!("  grouped_gemm: {m} rows in {groups} groups, {} tiles, {:.0} TFLOP/s", tile_group.len(), flop / (ms * 1e-3) / 1e12);
    Ok(Case { name: "grouped_gemm", shape: format!("g{groups}:m{m}x{n}x{k}"), ms, b2b, err, tol: 1e-2 })
}

fn norm_matmul_case(dev: &Device, small: bool) -> R<Case> {
    let (m, n, k) = if small { (37usize, 21usize, 50usize) } else { (4096, 4096, 4096) };
    let (bm, bn, bk) = if small { (16usize, 16usize, 16usize) } else { (128, 128, 64) };
    let mut rng = Rng::new(9);
    // (peers.py --suite takes the same sizes)
    let xs: Vec<bf16> = (0..m * k).map(|_| bf16::from_f64(rng.normal())).collect();
    let gs: Vec<bf16> = (0..k).map(|_| bf16::from_f64(1.0 + 0.1 * rng.normal())).collect();
    let ws: Vec<bf16> = (0..k * n).map(|_| bf16::from_f64(rng.normal() * 0.05)).collect();
    let (x, g, w) = (up(dev, &xs)?, up(dev, &gs)?, up(dev, &ws)?);
    let mut y = dev.full(m * n, bf16::NAN).map_err(e)?;
    let grid = [m.div_ceil(bm) as u32, n.div_ceil(bn) as u32, 1];
    // (Triton's twin runs 8 warps and 3 stages, as the grouped GEMM)
    let cfg = LaunchConfig::new(grid).num_warps(if small { 4 } else { 8 }).num_stages(3);
    let eps = 1e-6f32;
    let mut go = || norm_matmul::launch(dev, cfg, &x, &g, &w, &mut y, m as i32, n as i32, k as i32, eps, bm as i32, bn as i32, bk as i32);
    let (ms, b2b) = time(dev, &mut go)?;
    let got = y.to_vec().map_err(e)?;
    let mut err = 0.0f64;
    for row in (0..m).step_by((m / 23).max(1)) {
        let ms2: f64 = (0..k).map(|c| xs[row * k + c].to_f64().powi(2)).sum::<f64>() / k as f64;
        let rs = 1.0 / (ms2 + eps as f64).sqrt();
        for j in (0..n).step_by((n / 17).max(1)) {
            let (mut acc, mut mag) = (0.0f64, 0.0f64);
            for c in 0..k {
                let p = xs[row * k + c].to_f64() * rs * gs[c].to_f64() * ws[c * n + j].to_f64();
                acc += p;
                mag += p * p;
            }
            err = err.max(rel(got[row * n + j].to_f64(), acc, mag.sqrt()));
        }
    }
    let flop = 2.0 * (m * n * k) as f64;
    println!("  norm_matmul: {:.0} TFLOP/s", flop / (ms * 1e-3) / 1e12);
    Ok(Case { name: "norm_matmul", shape: format!("{m}x{n}x{k}"), ms, b2b, err, tol: 1e-2 })
}

fn logsumexp_case(dev: &Device, small: bool) -> R<Case> {
    let (rows, n) = if small { (3, 5000) } else { (256, 131072) };
    let mut rng = Rng::new(8);
    let xs: Vec<f32> = (0..rows * n).map(|_| (rng.normal() * 3.0) as f32).collect();
    let x = up(dev, &xs)?;
    let mut out = dev.full(rows, f32::NAN).map_err(e)?;
    let b = 4096;
    let mut go = || row_logsumexp::launch(dev, [rows as u32, 1, 1], &x, &mut out, n as i32, b);
    let (ms, b2b) = time(dev, &mut go)?;
    let got = out.to_vec().map_err(e)?;
    let mut err = 0.0f64;
    for (r, g) in got.iter().enumerate() {
        let row = &xs[r * n..(r + 1) * n];
        let m = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
        let want = m + row.iter().map(|&v| (v as f64 - m).exp()).sum::<f64>().ln();
        err = err.max(rel(*g as f64, want, 1.0));
    }
    Ok(Case { name: "row_logsumexp", shape: format!("{rows}x{n}"), ms, b2b, err, tol: 1e-5 })
}

/// `user-suite dump KERNEL --const …`: a suite kernel's IR, PTX or WGSL,
/// as `ferrotile dump` prints a library kernel's (no GPU needed).
#[derive(clap::Parser)]
struct Dump {
    #[command(flatten)]
    args: ferrotile_benches::dump::DumpArgs,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|a| a == "dump") {
        use clap::Parser;
        let d = Dump::parse_from(args[1..].iter());
        let suite = [
            silu_scale3d::ir(),
            rope::ir(),
            row_cumsum::ir(),
            row_topk::ir(),
            softmax_bwd::ir(),
            embedding::ir(),
            grouped_gemm::ir(),
            row_logsumexp::ir(),
            norm_matmul::ir(),
        ];
        std::process::exit(ferrotile_benches::dump::main_from(&d.args, &suite));
    }
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).cloned();
    let small = args.iter().any(|a| a == "--small");
    // `--unchecked`: every launch without guards, to measure what they cost
    // (the suite's kernels keep their accesses in bounds: each is checked
    // against f64 with the guards on)
    if args.iter().any(|a| a == "--unchecked") {
        // SAFETY: every kernel of the suite masks its accesses to its buffers
        unsafe { ferrotile::runtime::set_unguarded_for_measurement(true) };
    }
    let dev = ferrotile_benches::device_arg(&args);
    println!("user-suite on {}", dev.name());
    type F = fn(&Device, bool) -> R<Case>;
    let cases: [(&str, F); 9] = [
        ("silu_scale3d", silu3d),
        ("rope", rope_case),
        ("row_cumsum", cumsum_case),
        ("row_topk", topk_case),
        ("softmax_bwd", softmax_bwd_case),
        ("embedding", embedding_case),
        ("grouped_gemm", grouped_gemm_case),
        ("row_logsumexp", logsumexp_case),
        ("norm_matmul", norm_matmul_case),
    ];
    let mut ok = true;
    for (name, f) in cases {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        match f(&dev, small) {
            Ok(c) => {
                let pass = c.err <= c.tol;
                ok &= pass;
                println!(
                    "suite {:<14} {:<22} ferrotile {:>9.2} us (b2b {:>9.2} us) err {:.1e}{}",
                    c.name,
                    c.shape,
                    c.ms * 1e3,
                    c.b2b * 1e3,
                    c.err,
                    if pass { "" } else { "  FAIL" }
                );
            }
            Err(err) => {
                ok = false;
                println!("suite {name:<14} error: {err}");
            }
        }
    }
    if !ok {
        std::process::exit(1);
    }
}
