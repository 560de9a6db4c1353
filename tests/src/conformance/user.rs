//! Kernels of kinds the rest of the suite does not have, written from the
//! README as a user would, without looking at what the compiler does well
//! (session 39): a 3×3 convolution (a 2-D tile read nine times at shifted,
//! partly negative offsets), a cross-entropy loss over a long vocabulary
//! (online log-sum-exp in chunks, the target's logit gathered by a loaded
//! index, an ignored label), a mixture-of-experts step (token rows
//! gathered through loaded indices into a `dot`, results scaled by a
//! per-token gate and scattered with `atomic_add`), a causal depthwise
//! convolution along the sequence with SiLU (Mamba's short convolution)
//! and a tiled transpose — against f64 on odd sizes.

use super::util::*;
use ferrotile::prelude::*;

/// `y[i, j] = Σ_{a, b ∈ 0..3} w[a, b] · x[i + a − 1, j + b − 1]` (zero
/// outside `x`), one `BH × BW` tile per program.
#[kernel]
pub fn k_conv3x3<T: Float, const BH: i32, const BW: i32>(x: Ptr<T>, w: Ptr<f32>, y: Ptr<T>, h: i32, wd: i32) {
    let ri = program_id(0) * BH + arange(0, BH);
    let cj = program_id(1) * BW + arange(0, BW);
    let mut acc = zeros([BH, BW], f32);
    for a in 0..3 {
        for b in 0..3 {
            let r = expand_dims(ri + a - 1, 1);
            let c = expand_dims(cj + b - 1, 0);
            let ok = (r >= 0) & (r < h) & (c >= 0) & (c < wd);
            let v = load(x + (r as i64) * (wd as i64) + (c as i64), ok, 0.0) as f32;
            acc = fma(v, load(w + a * 3 + b), acc);
        }
    }
    let ok = expand_dims(ri < h, 1) & expand_dims(cj < wd, 0);
    store(y + expand_dims((ri as i64) * (wd as i64), 1) + expand_dims(cj as i64, 0), acc as T, ok);
}

fn conv3x3_t<T: Flt>(dev: &Device, seed: u64, tol: f64) -> R {
    let mut rng = Rng::new(seed);
    for &(h, wd, bh, bw) in &[(1usize, 1usize, 16i32, 16i32), (7, 100, 8, 32), (33, 17, 16, 16), (64, 65, 32, 64)] {
        let c = Ctx::new("conv3x3", seed, format!("{} {h}x{wd} tile {bh}x{bw}", T::DTYPE));
        let xs: Vec<T> = (0..h * wd).map(|_| T::from_f64(rng.normal())).collect();
        let ws: Vec<f32> = (0..9).map(|_| rng.normal() as f32).collect();
        let mut y = poisoned::<T>(dev, h * wd + PAD)?;
        let cfg = LaunchConfig::new([cdiv(h, bh as usize) as u32, cdiv(wd, bw as usize) as u32, 1]).num_warps(4);
        c.launch(k_conv3x3::launch(dev, cfg, &upload(dev, &xs)?, &upload(dev, &ws)?, &mut y, h as i32, wd as i32, bh, bw))?;
        let want: Vec<f64> = (0..h * wd)
            .map(|p| {
                let (i, j) = ((p / wd) as i64, (p % wd) as i64);
                let mut s = 0.0;
                for a in 0..3i64 {
                    for b in 0..3i64 {
                        let (r, q) = (i + a - 1, j + b - 1);
                        if r >= 0 && r < h as i64 && q >= 0 && q < wd as i64 {
                            s += ws[(a * 3 + b) as usize] as f64 * xs[r as usize * wd + q as usize].to_f64();
                        }
                    }
                }
                s
            })
            .collect();
        check_float(&c, "y", &download(&y)?, &want, 2, tol, tol, &|p| format!("row {} column {}", p / wd, p % wd))?;
    }
    Ok(())
}

pub fn conv3x3(dev: &Device, seed: u64) -> R {
    conv3x3_t::<f32>(dev, seed, 1e-5)?;
    conv3x3_t::<bf16>(dev, seed ^ 1, 1e-2)
}

/// Cross-entropy of each row of `logits` (`[rows, v]`) against
/// `target[row]`: `loss = logsumexp(logits[row]) − logits[row, target]`,
/// 0 where the target is `IGNORE` (−100, PyTorch's `ignore_index`);
/// `lse[row]` too. One program per row, the vocabulary in chunks of `B`
/// with an online maximum and sum.
#[kernel]
pub fn k_cross_entropy<T: Float, const B: i32>(logits: Ptr<T>, target: Ptr<i32>, loss: Ptr<f32>, lse: Ptr<f32>, v: i32) {
    let row = program_id(0);
    let base = logits + (row as i64) * (v as i64);
    let mut m = full([B], -3.0e38, f32);
    let mut s = zeros([B], f32);
    for c0 in (0..v).step_by(B) {
        let cols = c0 + arange(0, B);
        let x = load(base + cols, cols < v, -3.0e38) as f32;
        let m_new = maximum(m, x);
        s = s * exp(m - m_new) + exp(x - m_new);
        m = m_new;
    }
    let mx = max(m, axis = 0);
    let total = sum(s * exp(m - mx), axis = 0);
    let l = mx + log(total);
    let t = load(target + row);
    let ignored = t == -100;
    let safe_t = select(ignored, 0, t);
    let picked = load(base + safe_t) as f32;
    store(loss + row, select(ignored, 0.0, l - picked));
    store(lse + row, l);
}

fn cross_entropy_t<T: Flt>(dev: &Device, seed: u64, tol: f64) -> R {
    let mut rng = Rng::new(seed);
    for &(rows, v, b) in &[(1usize, 1usize, 64i32), (5, 1000, 256), (9, 4097, 1024), (3, 50_257, 2048)] {
        let c = Ctx::new("cross_entropy", seed, format!("{} {rows}x{v} B={b}", T::DTYPE));
        let xs: Vec<T> = (0..rows * v).map(|_| T::from_f64(rng.normal() * 4.0)).collect();
        let ts: Vec<i32> = (0..rows).map(|r| if r % 4 == 3 { -100 } else { rng.below(v as u64) as i32 }).collect();
        let (mut loss, mut lse) = (poisoned::<f32>(dev, rows + PAD)?, poisoned::<f32>(dev, rows + PAD)?);
        let cfg = LaunchConfig::new([rows as u32, 1, 1]).num_warps(4);
        c.launch(k_cross_entropy::launch(dev, cfg, &upload(dev, &xs)?, &upload(dev, &ts)?, &mut loss, &mut lse, v as i32, b))?;
        let mut want_l = vec![];
        let mut want_lse = vec![];
        for r in 0..rows {
            let row = &xs[r * v..(r + 1) * v];
            let mx = row.iter().map(|x| x.to_f64()).fold(f64::NEG_INFINITY, f64::max);
            let l = mx + row.iter().map(|x| (x.to_f64() - mx).exp()).sum::<f64>().ln();
            want_lse.push(l);
            want_l.push(if ts[r] == -100 { 0.0 } else { l - row[ts[r] as usize].to_f64() });
        }
        // (f32 accumulation over up to 50k terms, exp within a few ulp)
        check_float(&c, "loss", &download(&loss)?, &want_l, 8, tol, tol, &|r| format!("row {r}, target {}", ts[r]))?;
        check_float(&c, "lse", &download(&lse)?, &want_lse, 8, tol, tol, &|r| format!("row {r}"))?;
    }
    Ok(())
}

pub fn cross_entropy(dev: &Device, seed: u64) -> R {
    cross_entropy_t::<f32>(dev, seed, 1e-5)?;
    cross_entropy_t::<bf16>(dev, seed ^ 1, 1e-5)
}

/// One expert of a mixture-of-experts layer: `y[tok[r], :] += gate[r] ·
/// (x[tok[r], :] · w)` for the `rows` tokens routed to it (`tok`, `gate`),
/// `BM` of them per program and `BN` output columns; `w` is `[k, n]`. The
/// token rows are gathered through the loaded indices; each token reaches
/// `y` through an `atomic_add` (a token routed to two experts gets two).
#[kernel]
pub fn k_moe_expert<T: Float, const BM: i32, const BN: i32, const BK: i32>(
    x: Ptr<T>,
    w: Ptr<T>,
    tok: Ptr<i32>,
    gate: Ptr<f32>,
    y: Ptr<f32>,
    rows: i32,
    n: i32,
    k: i32,
) {
    let r = program_id(0) * BM + arange(0, BM);
    let cn = program_id(1) * BN + arange(0, BN);
    let r_ok = r < rows;
    let t = load(tok + r, r_ok, 0);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let kk = k0 + arange(0, BK);
        let a = load(x + expand_dims((t as i64) * (k as i64), 1) + expand_dims(kk as i64, 0), expand_dims(r_ok, 1) & expand_dims(kk < k, 0), 0.0);
        let b = load(w + expand_dims((kk as i64) * (n as i64), 1) + expand_dims(cn as i64, 0), expand_dims(kk < k, 1) & expand_dims(cn < n, 0), 0.0);
        acc = dot(a, b, acc);
    }
    let g = load(gate + r, r_ok, 0.0);
    let ok = expand_dims(r_ok, 1) & expand_dims(cn < n, 0);
    atomic_add(y + expand_dims((t as i64) * (n as i64), 1) + expand_dims(cn as i64, 0), acc * expand_dims(g, 1), ok);
}

fn moe_t<T: Flt>(dev: &Device, seed: u64, tol: f64) -> R {
    let mut rng = Rng::new(seed);
    let tiles: &[(i32, i32, i32)] = if dev.kind() == ferrotile::DeviceKind::Cuda { &[(16, 64, 32), (64, 64, 64)] } else { &[(16, 32, 16)] };
    for &(tokens, n, k) in &[(7usize, 33usize, 40usize), (50, 64, 96), (130, 100, 70)] {
        for &(bm, bn, bk) in tiles {
            let c = Ctx::new("moe_expert", seed, format!("{} tokens={tokens} {n}x{k} tile {bm}x{bn}x{bk}", T::DTYPE));
            let xs: Vec<T> = (0..tokens * k).map(|_| T::from_f64(rng.normal())).collect();
            // two experts, each taking each token with probability 1/2 (so
            // some tokens reach `y` twice, some never)
            let experts: Vec<(Vec<i32>, Vec<f32>, Vec<T>)> = (0..2)
                .map(|_| {
                    let routed: Vec<i32> = (0..tokens as i32).filter(|_| rng.chance(0.5)).collect();
                    let gates = routed.iter().map(|_| rng.range(0.0, 1.0) as f32).collect();
                    (routed, gates, (0..k * n).map(|_| T::from_f64(rng.normal() * 0.1)).collect())
                })
                .collect();
            let mut y = upload(dev, &vec![0.0f32; tokens * n + PAD])?;
            let xd = upload(dev, &xs)?;
            for (routed, gates, ws) in &experts {
                if routed.is_empty() {
                    continue;
                }
                let cfg = LaunchConfig::new([cdiv(routed.len(), bm as usize) as u32, cdiv(n, bn as usize) as u32, 1]).num_warps(4).num_stages(2);
                c.launch(k_moe_expert::launch(
                    dev,
                    cfg,
                    &xd,
                    &upload(dev, ws)?,
                    &upload(dev, routed)?,
                    &upload(dev, gates)?,
                    &mut y,
                    routed.len() as i32,
                    n as i32,
                    k as i32,
                    bm,
                    bn,
                    bk,
                ))?;
            }
            let mut want = vec![0.0f64; tokens * n];
            for (routed, gates, ws) in &experts {
                for (i, &t) in routed.iter().enumerate() {
                    for j in 0..n {
                        let d: f64 = (0..k).map(|kk| xs[t as usize * k + kk].to_f64() * ws[kk * n + j].to_f64()).sum();
                        want[t as usize * n + j] += gates[i] as f64 * d;
                    }
                }
            }
            let got = download(&y)?;
            // (the pad was uploaded as zeros: it must stay so)
            if got[tokens * n..].iter().any(|&v| v != 0.0) {
                return Err(c.err("a write past the last token row"));
            }
            check_float(&c, "y", &got[..tokens * n], &want, 4, tol, tol, &|p| format!("token {} column {}", p / n, p % n))?;
        }
    }
    Ok(())
}

pub fn moe_expert(dev: &Device, seed: u64) -> R {
    moe_t::<f16>(dev, seed, 4e-3)?;
    moe_t::<bf16>(dev, seed ^ 1, 3e-2)
}

/// Mamba's short convolution: `y[t, d] = silu(bias[d] + Σ_{j<K} w[d, j] ·
/// x[t − K + 1 + j, d])` along the sequence (`x`, `y` `[len, dim]`; zero
/// before the start), `BL` positions × `BD` channels per program.
#[kernel]
pub fn k_causal_conv1d<T: Float, const BL: i32, const BD: i32, const K: i32>(x: Ptr<T>, w: Ptr<f32>, bias: Ptr<f32>, y: Ptr<T>, len: i32, dim: i32) {
    let t = program_id(0) * BL + arange(0, BL);
    let d = program_id(1) * BD + arange(0, BD);
    let d_ok = d < dim;
    let mut acc = broadcast_to(expand_dims(load(bias + d, d_ok, 0.0), 0), [BL, BD]);
    for j in 0..K {
        let src = t - (K - 1) + j;
        let ok = expand_dims((src >= 0) & (src < len), 1) & expand_dims(d_ok, 0);
        let v = load(x + expand_dims((src as i64) * (dim as i64), 1) + expand_dims(d as i64, 0), ok, 0.0) as f32;
        acc = fma(v, expand_dims(load(w + d * K + j, d_ok, 0.0), 0), acc);
    }
    let out = acc / (1.0 + exp(-acc));
    store(y + expand_dims((t as i64) * (dim as i64), 1) + expand_dims(d as i64, 0), out as T, expand_dims(t < len, 1) & expand_dims(d_ok, 0));
}

fn causal_conv1d_t<T: Flt>(dev: &Device, seed: u64, tol: f64) -> R {
    let mut rng = Rng::new(seed);
    const K: usize = 4;
    for &(len, dim, bl, bd) in &[(1usize, 3usize, 16i32, 32i32), (37, 100, 16, 64), (200, 64, 64, 32)] {
        let c = Ctx::new("causal_conv1d", seed, format!("{} len={len} dim={dim} tile {bl}x{bd}", T::DTYPE));
        let xs: Vec<T> = (0..len * dim).map(|_| T::from_f64(rng.normal())).collect();
        let ws: Vec<f32> = (0..dim * K).map(|_| rng.normal() as f32 * 0.5).collect();
        let bs: Vec<f32> = (0..dim).map(|_| rng.normal() as f32 * 0.1).collect();
        let mut y = poisoned::<T>(dev, len * dim + PAD)?;
        let cfg = LaunchConfig::new([cdiv(len, bl as usize) as u32, cdiv(dim, bd as usize) as u32, 1]).num_warps(4);
        c.launch(k_causal_conv1d::launch(
            dev,
            cfg,
            &upload(dev, &xs)?,
            &upload(dev, &ws)?,
            &upload(dev, &bs)?,
            &mut y,
            len as i32,
            dim as i32,
            bl,
            bd,
            K as i32,
        ))?;
        let want: Vec<f64> = (0..len * dim)
            .map(|p| {
                let (t, d) = (p / dim, p % dim);
                let mut a = bs[d] as f64;
                for j in 0..K {
                    let src = t as i64 - (K as i64 - 1) + j as i64;
                    if src >= 0 {
                        a += ws[d * K + j] as f64 * xs[src as usize * dim + d].to_f64();
                    }
                }
                a / (1.0 + (-a).exp())
            })
            .collect();
        check_float(&c, "y", &download(&y)?, &want, 4, tol, tol, &|p| format!("position {} channel {}", p / dim, p % dim))?;
    }
    Ok(())
}

pub fn causal_conv1d(dev: &Device, seed: u64) -> R {
    causal_conv1d_t::<f32>(dev, seed, 1e-5)?;
    causal_conv1d_t::<bf16>(dev, seed ^ 1, 1e-2)
}

/// A user's affine map over a column-major matrix (`x[i, j]` at `i + j·ld`,
/// as Fortran, BLAS and a transposed PyTorch tensor store it): `y = x ∘
/// s[j] + b[i]`, written column-major too, with each program's column
/// sums (`colsum[pid0, j] = Σ_i y[i, j]` over its rows) and row maxima
/// (`rowmax[pid1, i]`). Every access of the `[BM, BN]` tiles runs along
/// dimension 0: the PTX backend reads them in columns (a vector along
/// the rows per thread), and the reductions run along both dimensions of
/// that layout.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn k_colmajor<T: Float, const BM: i32, const BN: i32>(
    x: Ptr<T>,
    s: Ptr<T>,
    b: Ptr<T>,
    y: Ptr<T>,
    colsum: Ptr<f32>,
    rowmax: Ptr<f32>,
    m: i32,
    n: i32,
    ld: i32,
) {
    let i = program_id(0) * BM + arange(0, BM);
    let j = program_id(1) * BN + arange(0, BN);
    let ok = expand_dims(i < m, 1) & expand_dims(j < n, 0);
    let at = expand_dims(i as i64, 1) + expand_dims((j as i64) * (ld as i64), 0);
    let v = load(x + at, ok, 0.0) as f32;
    let yv = v * expand_dims(load(s + j, j < n, 0.0) as f32, 0) + expand_dims(load(b + i, i < m, 0.0) as f32, 1);
    store(y + at, yv as T, ok);
    store(colsum + (program_id(0) as i64) * (n as i64) + (j as i64), sum(select(ok, yv, 0.0), axis = 0), j < n);
    store(rowmax + (program_id(1) as i64) * (m as i64) + (i as i64), max(select(ok, yv, -3.0e38), axis = 1), i < m);
}

fn colmajor_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(m, n, ld, bm, bn) in
        &[(1usize, 1usize, 1usize, 16i32, 16i32), (37, 21, 40, 32, 16), (130, 70, 136, 64, 32), (64, 64, 64, 64, 64), (200, 9, 208, 128, 8)]
    {
        let c = Ctx::new("colmajor", seed, format!("{} {m}x{n} ld={ld} {bm}x{bn}", T::DTYPE));
        // (values on a coarse grid: the products and the sums of up to
        // a block's rows are exact in f32, so every order agrees)
        let grid = |rng: &mut Rng| (rng.below(33) as f64 - 16.0) / 8.0;
        let xs: Vec<T> = (0..ld * (n - 1) + m).map(|_| T::from_f64(grid(&mut rng))).collect();
        let ss: Vec<T> = (0..n).map(|_| T::from_f64(grid(&mut rng))).collect();
        let bs: Vec<T> = (0..m).map(|_| T::from_f64(grid(&mut rng))).collect();
        let (gm, gn) = (m.div_ceil(bm as usize), n.div_ceil(bn as usize));
        let mut y = poisoned::<T>(dev, ld * (n - 1) + m + PAD)?;
        let (mut cs, mut rm) = (poisoned::<f32>(dev, gm * n + PAD)?, poisoned::<f32>(dev, gn * m + PAD)?);
        let cfg = LaunchConfig::new([gm as u32, gn as u32, 1]).num_warps(4);
        c.launch(k_colmajor::launch(
            dev,
            cfg,
            &upload(dev, &xs)?,
            &upload(dev, &ss)?,
            &upload(dev, &bs)?,
            &mut y,
            &mut cs,
            &mut rm,
            m as i32,
            n as i32,
            ld as i32,
            bm,
            bn,
        ))?;
        let f = |i: usize, j: usize| xs[i + j * ld].to_f64() * ss[j].to_f64() + bs[i].to_f64();
        // (y rounds to T; the gaps between columns stay poisoned)
        let got = download(&y)?;
        let want_y: Vec<f64> = (0..m * n).map(|p| T::round(f(p % m, p / m)).to_f64()).collect();
        let got_y: Vec<T> = (0..m * n).map(|p| got[p % m + (p / m) * ld]).collect();
        check_float_exact(&c, "y", &got_y, &want_y, &|p| format!("y[{}, {}]", p % m, p / m))?;
        for j in 0..n.saturating_sub(1) {
            check_pad(&c, "y (between columns)", &got[j * ld + m..(j + 1) * ld], 0)?;
        }
        let want_cs: Vec<f64> = (0..gm * n).map(|p| (p / n * bm as usize..((p / n + 1) * bm as usize).min(m)).map(|i| f(i, p % n)).sum()).collect();
        check_float_exact(&c, "colsum", &download(&cs)?[..gm * n], &want_cs, &|p| format!("row block {}, column {}", p / n, p % n))?;
        let want_rm: Vec<f64> =
            (0..gn * m).map(|p| (p / m * bn as usize..((p / m + 1) * bn as usize).min(n)).map(|j| f(p % m, j)).fold(f64::NEG_INFINITY, f64::max)).collect();
        check_float_exact(&c, "rowmax", &download(&rm)?[..gn * m], &want_rm, &|p| format!("column block {}, row {}", p / m, p % m))?;
    }
    Ok(())
}

pub fn colmajor(dev: &Device, seed: u64) -> R {
    colmajor_t::<f32>(dev, seed)?;
    colmajor_t::<bf16>(dev, seed ^ 1)
}

/// A user's product of two column-major matrices (BLAS's default): `c =
/// a · b` with `a[i, p]` at `i + p·lda` and `b[p, j]` at `p + j·ldb`,
/// `c` row-major in f32. Both operand tiles are read along dimension 0:
/// on Hopper `b` reaches a K-major `wgmma` slot in `cp.async` pieces, `a`
/// a K-major one element by element.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn k_colmajor_matmul<T: Float, const BM: i32, const BN: i32, const BK: i32>(a: Ptr<T>, b: Ptr<T>, c: Ptr<f32>, m: i32, n: i32, k: i32, lda: i32, ldb: i32) {
    let i = program_id(0) * BM + arange(0, BM);
    let j = program_id(1) * BN + arange(0, BN);
    let mut acc = zeros([BM, BN], f32);
    for p0 in (0..k).step_by(BK) {
        let p = p0 + arange(0, BK);
        let at = load(a + expand_dims(i as i64, 1) + expand_dims((p as i64) * (lda as i64), 0), expand_dims(i < m, 1) & expand_dims(p < k, 0), 0.0);
        let bt = load(b + expand_dims(p as i64, 1) + expand_dims((j as i64) * (ldb as i64), 0), expand_dims(p < k, 1) & expand_dims(j < n, 0), 0.0);
        acc = dot(at, bt, acc);
    }
    store(c + expand_dims((i as i64) * (n as i64), 1) + expand_dims(j as i64, 0), acc, expand_dims(i < m, 1) & expand_dims(j < n, 0));
}

fn colmajor_matmul_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let tiles: &[(i32, i32, i32, u32)] = if dev.kind() == ferrotile::DeviceKind::Cuda {
        &[(64, 16, 128, 4), (128, 64, 64, 8), (64, 16, 64, 4), (128, 64, 32, 8)]
    } else {
        &[(16, 16, 16, 4), (32, 16, 32, 4)]
    };
    for &(m, n, k) in &[(37usize, 21usize, 70usize), (130, 64, 128), (64, 200, 96)] {
        for &(bm, bn, bk, warps) in tiles {
            let c = Ctx::new("colmajor_matmul", seed, format!("{} {m}x{n}x{k} tile {bm}x{bn}x{bk} {warps} warps", T::DTYPE));
            // (leading dimensions past the extents: the gaps are never read)
            let (lda, ldb) = (m.next_multiple_of(8) + 8, k.next_multiple_of(8) + 8);
            let av: Vec<T> = (0..lda * k).map(|_| T::from_f64(rng.normal())).collect();
            let bv: Vec<T> = (0..ldb * n).map(|_| T::from_f64(rng.normal())).collect();
            let mut out = poisoned::<f32>(dev, m * n + PAD)?;
            let cfg = LaunchConfig::new([cdiv(m, bm as usize) as u32, cdiv(n, bn as usize) as u32, 1]).num_warps(warps).num_stages(2);
            c.launch(k_colmajor_matmul::launch(
                dev,
                cfg,
                &upload(dev, &av)?,
                &upload(dev, &bv)?,
                &mut out,
                m as i32,
                n as i32,
                k as i32,
                lda as i32,
                ldb as i32,
                bm,
                bn,
                bk,
            ))?;
            let want: Vec<f64> = (0..m * n).map(|q| (0..k).map(|p| av[q / n + p * lda].to_f64() * bv[p + (q % n) * ldb].to_f64()).sum()).collect();
            // (f32 accumulation of k products of inputs exact in f32)
            check_float(&c, "c", &download(&out)?[..m * n], &want, 64, 1e-5, 1e-4 * (k as f64).sqrt(), &|q| format!("c[{}, {}]", q / n, q % n))?;
            check_pad(&c, "c", &download(&out)?, m * n)?;
        }
    }
    Ok(())
}

pub fn colmajor_matmul(dev: &Device, seed: u64) -> R {
    colmajor_matmul_t::<bf16>(dev, seed)?;
    colmajor_matmul_t::<f16>(dev, seed ^ 1)
}

/// `y = xᵀ` for a `rows × cols` matrix, one `B × B` tile per program.
#[kernel]
pub fn k_transpose<T: Float, const B: i32>(x: Ptr<T>, y: Ptr<T>, rows: i32, cols: i32) {
    let r = program_id(0) * B + arange(0, B);
    let c = program_id(1) * B + arange(0, B);
    let ok = expand_dims(r < rows, 1) & expand_dims(c < cols, 0);
    let tile = load(x + expand_dims((r as i64) * (cols as i64), 1) + expand_dims(c as i64, 0), ok, 0.0);
    store(y + expand_dims((c as i64) * (rows as i64), 1) + expand_dims(r as i64, 0), trans(tile), trans(ok));
}

pub fn transpose(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(rows, cols, b) in &[(1usize, 1usize, 16i32), (7, 100, 32), (130, 65, 64), (33, 256, 16)] {
        let c = Ctx::new("transpose", seed, format!("{rows}x{cols} B={b}"));
        let xs: Vec<bf16> = (0..rows * cols).map(|_| bf16::from_f64(rng.normal())).collect();
        let mut y = poisoned::<bf16>(dev, rows * cols + PAD)?;
        let cfg = LaunchConfig::new([cdiv(rows, b as usize) as u32, cdiv(cols, b as usize) as u32, 1]).num_warps(4);
        c.launch(k_transpose::launch(dev, cfg, &upload(dev, &xs)?, &mut y, rows as i32, cols as i32, b))?;
        let want: Vec<bf16> = (0..rows * cols).map(|p| xs[(p % rows) * cols + p / rows]).collect();
        check_eq(&c, "y", &download(&y)?, &want, &|p| format!("y[{}, {}]", p / rows, p % rows))?;
    }
    Ok(())
}
