//! Kernels that call `#[func]`s (`crate::tilefns`, and one written below
//! the kernel that calls it): a GEMM with a bias + activation epilogue and
//! an output cast done by functions, a long-row log-sum-exp whose online
//! update returns a tuple, and a row dot product whose loop lives in a
//! function — against f64 on odd sizes, so a function's body is checked on
//! every backend the suite runs on; and an elementwise kernel calling the
//! kernel library's public functions by path (`#[func]`s of another crate);
//! and the segment sums of `fused::segment_sum` with the view built by one
//! function (at an offset it loads) and read by another.

use super::util::*;
use crate::tilefns::{self, bias_act, dot_1d, pattern_dot, put, segment, tile_at, to_out};
use ferrotile::prelude::*;
use ferrotile_kernels::epilogue;

/// `c = act(a · b + bias)` with `a [m, k]`, `b [k, n]`, `c [m, n]` row-major.
#[kernel]
pub fn k_func_gemm<T: Float, const BM: i32, const BN: i32, const BK: i32, const ACT: i32>(
    a: Ptr<T>,
    b: Ptr<T>,
    bias: Ptr<f32>,
    c: Ptr<T>,
    m: i32,
    n: i32,
    k: i32,
) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let rk = k0 + arange(0, BK);
        let (pa, ma) = tile_at(a, rm, rk, k, m, k);
        let (pb, mb) = tile_at(b, rk, rn, n, k, n);
        acc = dot(load(pa, ma, 0.0), load(pb, mb, 0.0), acc);
    }
    let y = bias_act(acc, load(bias + rn, rn < n, 0.0), ACT);
    let (pc, mc) = tile_at(c, rm, rn, n, m, n);
    put(pc, to_out::<T>(y), mc);
}

fn gelu64(x: f64) -> f64 {
    x * 0.5 * (1.0 + ferrotile_kernels::reference::erf(x / std::f64::consts::SQRT_2))
}

fn gemm_t<T: Flt>(dev: &Device, seed: u64, tol: f64) -> R {
    let mut rng = Rng::new(seed);
    for &(m, n, k, act) in &[(1usize, 1usize, 1usize, 0i32), (17, 33, 40, 1), (64, 50, 19, 2), (30, 70, 64, 3)] {
        let c = Ctx::new("func_gemm", seed, format!("{} {m}x{n}x{k} act {act}", T::DTYPE));
        let av: Vec<T> = (0..m * k).map(|_| T::from_f64(rng.normal())).collect();
        let bv: Vec<T> = (0..k * n).map(|_| T::from_f64(rng.normal() * 0.5)).collect();
        let bias: Vec<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let mut out = poisoned::<T>(dev, m * n + PAD)?;
        let cfg = LaunchConfig::new([cdiv(m, 32) as u32, cdiv(n, 32) as u32, 1]).num_warps(4);
        c.launch(k_func_gemm::launch(
            dev,
            cfg,
            &upload(dev, &av)?,
            &upload(dev, &bv)?,
            &upload(dev, &bias)?,
            &mut out,
            m as i32,
            n as i32,
            k as i32,
            32,
            32,
            16,
            act,
        ))?;
        let want: Vec<f64> = (0..m * n)
            .map(|p| {
                let (i, j) = (p / n, p % n);
                let s: f64 = (0..k).map(|q| av[i * k + q].to_f64() * bv[q * n + j].to_f64()).sum::<f64>() + bias[j] as f64;
                match act {
                    1 => s.max(0.0),
                    2 => gelu64(s),
                    3 => s / (1.0 + (-s).exp()),
                    _ => s,
                }
            })
            .collect();
        let got = download(&out)?;
        check_float(&c, "c", &got[..m * n], &want, 4, tol, tol, &|p| format!("c[{}, {}]", p / n, p % n))?;
        check_pad(&c, "c", &got, m * n)?;
    }
    Ok(())
}

pub fn gemm(dev: &Device, seed: u64) -> R {
    gemm_t::<f32>(dev, seed, 2e-3)?;
    gemm_t::<bf16>(dev, seed ^ 1, 2e-2)
}

/// `out[r] = log Σ_j exp(x[r, j])` over rows of `cols` elements, `R` rows
/// × `C` columns per step.
#[kernel]
pub fn k_func_lse<const R: i32, const C: i32>(x: Ptr<f32>, out: Ptr<f32>, rows: i32, cols: i32) {
    let r = program_id(0) * R + arange(0, R);
    let mut m = full([R], f32::NEG_INFINITY, f32);
    let mut l = zeros([R], f32);
    for c0 in (0..cols).step_by(C) {
        let (p, ok) = tile_at(x, r, c0 + arange(0, C), cols, rows, cols);
        // (a tuple from a function called by its path)
        let (m2, l2) = tilefns::lse_step(m, l, load(p, ok, f32::NEG_INFINITY));
        m = m2;
        l = l2;
    }
    put(out + r, m + log(l), r < rows);
}

pub fn lse(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(rows, cols) in &[(1usize, 1usize), (5, 100), (33, 1000), (8, 4097)] {
        let c = Ctx::new("func_lse", seed, format!("{rows}x{cols}"));
        let xs: Vec<f32> = (0..rows * cols).map(|_| (rng.normal() * 3.0) as f32).collect();
        let mut out = poisoned::<f32>(dev, rows + PAD)?;
        let cfg = LaunchConfig::new([cdiv(rows, 4) as u32, 1, 1]).num_warps(4);
        c.launch(k_func_lse::launch(dev, cfg, &upload(dev, &xs)?, &mut out, rows as i32, cols as i32, 4, 256))?;
        let want: Vec<f64> = (0..rows)
            .map(|r| {
                let row = &xs[r * cols..(r + 1) * cols];
                let mx = row.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v as f64));
                mx + row.iter().map(|&v| (v as f64 - mx).exp()).sum::<f64>().ln()
            })
            .collect();
        let got = download(&out)?;
        check_float(&c, "out", &got[..rows], &want, 64, 1e-5, 1e-5, &|p| format!("row {p}"))?;
        check_pad(&c, "out", &got, rows)?;
    }
    Ok(())
}

/// `out[r] = scale(Σ_k a[r, k] · b[k])`, one row per program; the loop is
/// in `dot_1d`, the scaling in `half_of`, written below this kernel.
#[kernel]
pub fn k_func_rowdot<const BLOCK: i32>(a: Ptr<f32>, b: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let r = program_id(0);
    let s = dot_1d(a + (r as i64) * (n as i64), b, n, BLOCK);
    store(out + r, half_of(s));
}

/// `x / 2`.
#[func]
fn half_of(x: Tile) -> Tile {
    x * 0.5
}

pub fn rowdot(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(rows, n, block) in &[(1usize, 1usize, 64i32), (3, 100, 64), (9, 1025, 256)] {
        let c = Ctx::new("func_rowdot", seed, format!("{rows}x{n} BLOCK={block}"));
        let av: Vec<f32> = (0..rows * n).map(|_| rng.normal() as f32).collect();
        let bv: Vec<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let mut out = poisoned::<f32>(dev, rows + PAD)?;
        c.launch(k_func_rowdot::launch(
            dev,
            LaunchConfig::new([rows as u32, 1, 1]).num_warps(4),
            &upload(dev, &av)?,
            &upload(dev, &bv)?,
            &mut out,
            n as i32,
            block,
        ))?;
        let want: Vec<f64> = (0..rows).map(|r| 0.5 * (0..n).map(|k| av[r * n + k] as f64 * bv[k] as f64).sum::<f64>()).collect();
        let got = download(&out)?;
        check_float(&c, "out", &got[..rows], &want, 64, 1e-5, 1e-5, &|p| format!("row {p}"))?;
        check_pad(&c, "out", &got, rows)?;
    }
    Ok(())
}

/// `y = activation(x, ACT) + gelu(x) / 4` through the kernel library's
/// public tile functions (`ferrotile_kernels::epilogue`): `#[func]`s of
/// another crate.
#[kernel]
pub fn k_func_library<const BLOCK: i32, const ACT: i32>(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let ok = offs < n;
    let v = load(x + offs, ok, 0.0);
    store(y + offs, epilogue::activation(v, ACT) + epilogue::gelu(v) * 0.25, ok);
}

pub fn library(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, block) in SIZES_1D {
        for act in 0..3 {
            let c = Ctx::new("func_library", seed, format!("n={n} BLOCK={block} act {act}"));
            let xs: Vec<f32> = (0..n).map(|_| (rng.normal() * 2.0) as f32).collect();
            let mut out = poisoned::<f32>(dev, n + PAD)?;
            c.launch(k_func_library::launch(dev, cdiv(n, block as usize) as u32, &upload(dev, &xs)?, &mut out, n as i32, block, act))?;
            let want: Vec<f64> = xs
                .iter()
                .map(|&v| {
                    let v = v as f64;
                    let a = match act {
                        1 => v.max(0.0),
                        2 => gelu64(v),
                        _ => v,
                    };
                    a + gelu64(v) * 0.25
                })
                .collect();
            let got = download(&out)?;
            check_float(&c, "y", &got[..n], &want, 8, 1e-5, 1e-6, &|p| format!("x = {}", xs[p]))?;
            check_pad(&c, "y", &got, n)?;
        }
    }
    Ok(())
}

/// [`super::fused::k_segment_sum`] with its view returned by a function
/// (`segment`: built at the offset the function loads, returned with the
/// segment's length) and its loop in another that takes the view.
#[kernel]
pub fn k_func_segment_sum<T: Float, const BM: i32, const BK: i32, const D: i32>(y: Ptr<T>, cu: Ptr<i32>, out: Ptr<f32>, ys: i64) {
    let s = program_id(0);
    let (vy, n) = segment(y, cu, s, ys, D);
    let acc = pattern_dot::<T>(vy, n, BM, BK, D);
    let m = arange(0, BM);
    let offs = (s as i64) * ((BM * D) as i64) + expand_dims((m as i64) * (D as i64), 1) + expand_dims(arange(0, D) as i64, 0);
    store(out + offs, acc);
}

pub fn segment_view(dev: &Device, seed: u64) -> R {
    use super::fused::segment_sum_with;
    segment_sum_with::<bf16>(dev, seed, "func_segment_view", &|dev, cfg, y, cu, out, ys, bm, bk, d| {
        k_func_segment_sum::launch(dev, cfg, y, cu, out, ys, bm, bk, d)
    })?;
    segment_sum_with::<f16>(dev, seed ^ 1, "func_segment_view", &|dev, cfg, y, cu, out, ys, bm, bk, d| {
        k_func_segment_sum::launch(dev, cfg, y, cu, out, ys, bm, bk, d)
    })
}

/// The mean of each segment's rows (a varlen batch's mean pooling), `BC`
/// columns per program: the view comes from a function (at the offset it
/// loads), blocks of `BR` rows are reduced over the rows — no `dot` —
/// with the view's bounds zeroing what lies past the segment's end and
/// past the row's width.
#[kernel]
pub fn k_func_segment_mean<T: Float, const BR: i32, const BC: i32>(y: Ptr<T>, cu: Ptr<i32>, out: Ptr<f32>, width: i32, ys: i64) {
    let s = program_id(0);
    let c0 = program_id(1) * BC;
    let (vy, n) = segment(y, cu, s, ys, width);
    let mut acc = zeros([BC], f32);
    for i in (0..n).step_by(BR) {
        acc += sum(load_block(vy, [i, c0], [BR, BC]) as f32, axis = 0);
    }
    let cols = c0 + arange(0, BC);
    store(out + (s as i64) * (width as i64) + (cols as i64), acc / (maximum(n, 1) as f32), cols < width);
}

fn segment_mean_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let lens = [0usize, 1, 5, 17, 40, 3, 8];
    let mut cu = vec![0i32];
    for l in lens {
        cu.push(cu.last().unwrap() + l as i32);
    }
    let rows = *cu.last().unwrap() as usize;
    let (width, ys, br, bc) = (45usize, 48usize, 8usize, 16usize);
    let yh: Vec<T> = (0..rows * ys).map(|_| T::from_f64(rng.normal())).collect();
    let c = Ctx::new("func_segment_mean", seed, format!("{} segments {lens:?} width {width} ys {ys} BR={br} BC={bc}", T::DTYPE));
    let len = lens.len() * width;
    let mut out = poisoned::<f32>(dev, len + PAD)?;
    let cfg = LaunchConfig::new([lens.len() as u32, cdiv(width, bc) as u32, 1]).num_warps(4);
    c.launch(k_func_segment_mean::launch(dev, cfg, &upload(dev, &yh)?, &upload(dev, &cu)?, &mut out, width as i32, ys as i64, br as i32, bc as i32))?;
    let mut want = vec![0.0f64; len];
    for (s, w) in cu.windows(2).enumerate() {
        let (r0, n) = (w[0] as usize, (w[1] - w[0]) as usize);
        for e in 0..width {
            let t: f64 = (0..n).map(|i| yh[(r0 + i) * ys + e].to_f64()).sum();
            want[s * width + e] = t / n.max(1) as f64;
        }
    }
    // (and nothing written past the outputs: the poisoned pad)
    check_float(&c, "out[s] = mean of segment s", &download(&out)?, &want, 4, 1e-5, 1e-5, &|i| format!("segment {} column {}", i / width, i % width))
}

pub fn segment_mean(dev: &Device, seed: u64) -> R {
    segment_mean_t::<bf16>(dev, seed)?;
    segment_mean_t::<f16>(dev, seed ^ 1)
}
