//! Reductions (sum, max, min, argmax, argmin) and cumsum along both axes of
//! 2-D tiles, for every float and integer dtype; `dot` (f32 IEEE, tf32,
//! f16, bf16 → f32; i8 → i32) in a K loop with masked tails.

use super::util::*;
use ferrotile::prelude::*;
use ferrotile::DeviceKind;

/// (m, n, BM, BN): the row block is BM rows; BN covers all n columns.
const RED_SHAPES: &[(usize, usize, i32, i32)] = &[(1, 1, 1, 1), (1, 7, 2, 8), (5, 3, 4, 4), (37, 100, 16, 128), (100, 64, 32, 64), (9, 250, 8, 256)];

/// Row-block reductions: along axis 1 per row (all columns fit in BN), and
/// along axis 0 over the program's BM rows (one partial row per program).
#[kernel]
pub fn k_reduce<T: Float, const BM: i32, const BN: i32>(
    x: Ptr<T>,
    s1: Ptr<T>,
    mx1: Ptr<T>,
    mn1: Ptr<T>,
    am1: Ptr<i32>,
    an1: Ptr<i32>,
    s0: Ptr<T>,
    mx0: Ptr<T>,
    mn0: Ptr<T>,
    am0: Ptr<i32>,
    an0: Ptr<i32>,
    m: i32,
    n: i32,
) {
    let pid = program_id(0);
    let rows = pid * BM + arange(0, BM);
    let cols = arange(0, BN);
    let mask = expand_dims(rows < m, 1) & expand_dims(cols < n, 0);
    let offs = expand_dims(rows, 1) * n + expand_dims(cols, 0);
    let xs = load(x + offs, mask, 0.0);
    let xhi = load(x + offs, mask, T::NEG_INFINITY);
    let xlo = load(x + offs, mask, T::INFINITY);
    let rm = rows < m;
    store(s1 + rows, sum(xs, 1), rm);
    store(mx1 + rows, max(xhi, axis = 1), rm);
    store(mn1 + rows, xlo.min(axis = 1), rm);
    store(am1 + rows, argmax(xhi, 1), rm);
    store(an1 + rows, xlo.argmin(1), rm);
    let o = pid * n + cols;
    let cm = cols < n;
    store(s0 + o, xs.sum(0), cm);
    store(mx0 + o, xhi.max(axis = 0), cm);
    store(mn0 + o, min(xlo, axis = 0), cm);
    store(am0 + o, xhi.argmax(0), cm);
    store(an0 + o, argmin(xlo, 0), cm);
}

/// Host reductions of a row-major m×n matrix: per row, and per (row block, column).
struct Red {
    s1: Vec<f64>,
    mx1: Vec<f64>,
    mn1: Vec<f64>,
    am1: Vec<i32>,
    an1: Vec<i32>,
    abs1: Vec<f64>,
    s0: Vec<f64>,
    mx0: Vec<f64>,
    mn0: Vec<f64>,
    am0: Vec<i32>,
    an0: Vec<i32>,
    abs0: Vec<f64>,
}

fn reduce_ref(x: &[f64], m: usize, n: usize, bm: usize) -> Red {
    let mut r = Red {
        s1: vec![],
        mx1: vec![],
        mn1: vec![],
        am1: vec![],
        an1: vec![],
        abs1: vec![],
        s0: vec![],
        mx0: vec![],
        mn0: vec![],
        am0: vec![],
        an0: vec![],
        abs0: vec![],
    };
    let red = |vals: &[f64], r_s: &mut Vec<f64>, r_mx: &mut Vec<f64>, r_mn: &mut Vec<f64>, r_am: &mut Vec<i32>, r_an: &mut Vec<i32>, r_abs: &mut Vec<f64>| {
        r_s.push(vals.iter().sum());
        r_abs.push(vals.iter().map(|v| v.abs()).sum());
        let (mut am, mut an) = (0, 0);
        for (i, &v) in vals.iter().enumerate() {
            if v > vals[am] {
                am = i;
            }
            if v < vals[an] {
                an = i;
            }
        }
        r_mx.push(vals[am]);
        r_mn.push(vals[an]);
        r_am.push(am as i32);
        r_an.push(an as i32);
    };
    for i in 0..m {
        let row: Vec<f64> = x[i * n..(i + 1) * n].to_vec();
        red(&row, &mut r.s1, &mut r.mx1, &mut r.mn1, &mut r.am1, &mut r.an1, &mut r.abs1);
    }
    for blk in 0..m.div_ceil(bm) {
        for j in 0..n {
            let col: Vec<f64> = (blk * bm..((blk + 1) * bm).min(m)).map(|i| x[i * n + j]).collect();
            red(&col, &mut r.s0, &mut r.mx0, &mut r.mn0, &mut r.am0, &mut r.an0, &mut r.abs0);
        }
    }
    r
}

/// Sums: within 1 ulp of the exact sum plus an f32-accumulation allowance
/// (GPU backends); on the CPU interpreter, which accumulates in f64 and
/// rounds once, f16/bf16 sums (exact in f64 here) must be correctly rounded.
fn check_sum<T: Flt>(c: &Ctx, dev: &Device, out: &str, got: &[T], want: &[f64], abs: &[f64], count: usize, inp: &dyn Fn(usize) -> String) -> R {
    let strict = dev.kind() == DeviceKind::Cpu;
    let slack = if strict { 1e-12 } else { 2.0 * count as f64 * 2f64.powi(-24) };
    let max_ulps = if strict && T::MANT < 23 { 0 } else { 1 };
    check_with(c, out, got, want, |i, g, &w| ulps(g, T::round(w)) <= max_ulps || (g.to_f64() - w).abs() <= slack * abs[i], &|i| {
        format!("{} (want rounds to {:?})", inp(i), T::round(want[i]))
    })
}

/// Random data plus, in the first row and column, values whose exact sum
/// lies just above a rounding midpoint of the dtype (a sum rounded to f32
/// first and then to f16/bf16 gets it wrong).
fn reduce_data<T: Flt>(rng: &mut Rng, m: usize, n: usize) -> Vec<T> {
    let mut xs: Vec<T> = (0..m * n).map(|_| T::round(rng.normal() * rng.pick(&[0.1, 1.0, 10.0]))).collect();
    if rng.chance(0.15) {
        // ties for argmax/argmin
        let v = xs[0];
        for x in xs.iter_mut() {
            if rng.chance(0.3) {
                *x = v;
            }
        }
    }
    // Row 0 = [1, 2^-(p+1), 2^-24, 0, ...] and likewise down column 0 of
    // the first 8 rows: exact sums 1 + half an ulp + a bit.
    let tricky = [1.0, 2f64.powi(-(T::MANT as i32) - 1), 2f64.powi(-24)];
    for j in 0..n {
        xs[j] = T::round(*tricky.get(j).unwrap_or(&0.0));
    }
    for i in 0..m.min(8) {
        xs[i * n] = T::round(*tricky.get(i).unwrap_or(&0.0));
    }
    xs
}

fn reduce_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(m, n, bm, bn) in RED_SHAPES {
        let c = Ctx::new("reduce", seed, format!("{} {m}x{n} BM={bm} BN={bn}", T::NAME));
        let xs = reduce_data::<T>(&mut rng, m, n);
        let xf: Vec<f64> = xs.iter().map(|v| v.to_f64()).collect();
        let g = cdiv(m, bm as usize);
        let x = upload(dev, &xs)?;
        let (l1, l0) = (m + PAD, g * n + PAD);
        let (mut s1, mut mx1, mut mn1) = (poisoned::<T>(dev, l1)?, poisoned::<T>(dev, l1)?, poisoned::<T>(dev, l1)?);
        let (mut am1, mut an1) = (poisoned::<i32>(dev, l1)?, poisoned::<i32>(dev, l1)?);
        let (mut s0, mut mx0, mut mn0) = (poisoned::<T>(dev, l0)?, poisoned::<T>(dev, l0)?, poisoned::<T>(dev, l0)?);
        let (mut am0, mut an0) = (poisoned::<i32>(dev, l0)?, poisoned::<i32>(dev, l0)?);
        let cfg = LaunchConfig::new([g as u32, 1, 1]).num_warps(rng.pick(&[1, 4, 16]));
        c.launch(k_reduce::launch(
            dev, cfg, &x, &mut s1, &mut mx1, &mut mn1, &mut am1, &mut an1, &mut s0, &mut mx0, &mut mn0, &mut am0, &mut an0, m as i32, n as i32, bm, bn,
        ))?;
        let r = reduce_ref(&xf, m, n, bm as usize);
        let row = |i: usize| format!("row {i}: {:?}", &xs[i * n..((i * n) + n.min(8))]);
        let col = |i: usize| format!("row block {}, column {}", i / n, i % n);
        check_sum(&c, dev, "sum(x, 1)", &download(&s1)?, &r.s1, &r.abs1, n, &row)?;
        check_float_exact(&c, "max(x, axis = 1)", &download(&mx1)?, &r.mx1, &row)?;
        check_float_exact(&c, "min(x, axis = 1)", &download(&mn1)?, &r.mn1, &row)?;
        check_eq(&c, "argmax(x, 1)", &download(&am1)?, &r.am1, &row)?;
        check_eq(&c, "argmin(x, 1)", &download(&an1)?, &r.an1, &row)?;
        check_sum(&c, dev, "sum(x, 0)", &download(&s0)?, &r.s0, &r.abs0, bm as usize, &col)?;
        check_float_exact(&c, "max(x, axis = 0)", &download(&mx0)?, &r.mx0, &col)?;
        check_float_exact(&c, "min(x, axis = 0)", &download(&mn0)?, &r.mn0, &col)?;
        check_eq(&c, "argmax(x, 0)", &download(&am0)?, &r.am0, &col)?;
        check_eq(&c, "argmin(x, 0)", &download(&an0)?, &r.an0, &col)?;
    }
    Ok(())
}

pub fn reduce_float(dev: &Device, seed: u64) -> R {
    reduce_t::<f32>(dev, seed)?;
    reduce_t::<f16>(dev, seed ^ 1)?;
    reduce_t::<bf16>(dev, seed ^ 2)
}

macro_rules! int_reduce {
    ($k:ident, $f:ident, $t:ident, $st:ident) => {
        /// Integer reductions; `sum` of i8/u8 is i32 (`$st`), wrapping otherwise.
        #[kernel]
        pub fn $k<const BM: i32, const BN: i32>(
            x: Ptr<$t>,
            s1: Ptr<$st>,
            mx1: Ptr<$t>,
            mn1: Ptr<$t>,
            am1: Ptr<i32>,
            an1: Ptr<i32>,
            s0: Ptr<$st>,
            mx0: Ptr<$t>,
            mn0: Ptr<$t>,
            am0: Ptr<i32>,
            an0: Ptr<i32>,
            m: i32,
            n: i32,
            lo: $t,
            hi: $t,
        ) {
            let pid = program_id(0);
            let rows = pid * BM + arange(0, BM);
            let cols = arange(0, BN);
            let mask = expand_dims(rows < m, 1) & expand_dims(cols < n, 0);
            let offs = expand_dims(rows, 1) * n + expand_dims(cols, 0);
            let xs = load(x + offs, mask, 0);
            let xhi = load(x + offs, mask, lo);
            let xlo = load(x + offs, mask, hi);
            let rm = rows < m;
            store(s1 + rows, sum(xs, 1), rm);
            store(mx1 + rows, max(xhi, axis = 1), rm);
            store(mn1 + rows, min(xlo, axis = 1), rm);
            store(am1 + rows, argmax(xhi, 1), rm);
            store(an1 + rows, argmin(xlo, 1), rm);
            let o = pid * n + cols;
            let cm = cols < n;
            store(s0 + o, sum(xs, 0), cm);
            store(mx0 + o, max(xhi, axis = 0), cm);
            store(mn0 + o, min(xlo, axis = 0), cm);
            store(am0 + o, argmax(xhi, 0), cm);
            store(an0 + o, argmin(xlo, 0), cm);
        }

        fn $f(dev: &Device, seed: u64) -> R {
            let mut rng = Rng::new(seed);
            for &(m, n, bm, bn) in RED_SHAPES {
                let c = Ctx::new("reduce_int", seed, format!("{} {m}x{n} BM={bm} BN={bn}", stringify!($t)));
                let small = rng.chance(0.3);
                let xs: Vec<$t> = (0..m * n).map(|_| if small { rng.int(-2, 2) as $t } else { rand_int(&mut rng) }).collect();
                let g = cdiv(m, bm as usize);
                let x = upload(dev, &xs)?;
                let (l1, l0) = (m + PAD, g * n + PAD);
                let (mut s1, mut mx1, mut mn1) = (poisoned::<$st>(dev, l1)?, poisoned::<$t>(dev, l1)?, poisoned::<$t>(dev, l1)?);
                let (mut am1, mut an1) = (poisoned::<i32>(dev, l1)?, poisoned::<i32>(dev, l1)?);
                let (mut s0, mut mx0, mut mn0) = (poisoned::<$st>(dev, l0)?, poisoned::<$t>(dev, l0)?, poisoned::<$t>(dev, l0)?);
                let (mut am0, mut an0) = (poisoned::<i32>(dev, l0)?, poisoned::<i32>(dev, l0)?);
                c.launch($k::launch(
                    dev,
                    g as u32,
                    &x,
                    &mut s1,
                    &mut mx1,
                    &mut mn1,
                    &mut am1,
                    &mut an1,
                    &mut s0,
                    &mut mx0,
                    &mut mn0,
                    &mut am0,
                    &mut an0,
                    m as i32,
                    n as i32,
                    <$t>::MIN,
                    <$t>::MAX,
                    bm,
                    bn,
                ))?;
                // reference: wrapping sums in the result type; first index of max/min
                let red = |vals: Vec<$t>| -> ($st, $t, $t, i32, i32) {
                    let s = vals.iter().fold(0 as $st, |a, &v| a.wrapping_add(v as $st));
                    let (mut am, mut an) = (0, 0);
                    for (i, &v) in vals.iter().enumerate() {
                        if v > vals[am] {
                            am = i;
                        }
                        if v < vals[an] {
                            an = i;
                        }
                    }
                    (s, vals[am], vals[an], am as i32, an as i32)
                };
                let rows: Vec<_> = (0..m).map(|i| red(xs[i * n..(i + 1) * n].to_vec())).collect();
                let mut cols = vec![];
                for blk in 0..g {
                    for j in 0..n {
                        cols.push(red((blk * bm as usize..((blk + 1) * bm as usize).min(m)).map(|i| xs[i * n + j]).collect()));
                    }
                }
                let rin = |i: usize| format!("row {i}: {:?}", &xs[i * n..i * n + n.min(8)]);
                let cin = |i: usize| format!("row block {}, column {}", i / n, i % n);
                check_eq(&c, "sum(x, 1)", &download(&s1)?, &rows.iter().map(|r| r.0).collect::<Vec<_>>(), &rin)?;
                check_eq(&c, "max(x, axis = 1)", &download(&mx1)?, &rows.iter().map(|r| r.1).collect::<Vec<_>>(), &rin)?;
                check_eq(&c, "min(x, axis = 1)", &download(&mn1)?, &rows.iter().map(|r| r.2).collect::<Vec<_>>(), &rin)?;
                check_eq(&c, "argmax(x, 1)", &download(&am1)?, &rows.iter().map(|r| r.3).collect::<Vec<_>>(), &rin)?;
                check_eq(&c, "argmin(x, 1)", &download(&an1)?, &rows.iter().map(|r| r.4).collect::<Vec<_>>(), &rin)?;
                check_eq(&c, "sum(x, 0)", &download(&s0)?, &cols.iter().map(|r| r.0).collect::<Vec<_>>(), &cin)?;
                check_eq(&c, "max(x, axis = 0)", &download(&mx0)?, &cols.iter().map(|r| r.1).collect::<Vec<_>>(), &cin)?;
                check_eq(&c, "min(x, axis = 0)", &download(&mn0)?, &cols.iter().map(|r| r.2).collect::<Vec<_>>(), &cin)?;
                check_eq(&c, "argmax(x, 0)", &download(&am0)?, &cols.iter().map(|r| r.3).collect::<Vec<_>>(), &cin)?;
                check_eq(&c, "argmin(x, 0)", &download(&an0)?, &cols.iter().map(|r| r.4).collect::<Vec<_>>(), &cin)?;
            }
            Ok(())
        }
    };
}
int_reduce!(k_reduce_i8, reduce_i8, i8, i32);
int_reduce!(k_reduce_u8, reduce_u8, u8, i32);
int_reduce!(k_reduce_i32, reduce_i32, i32, i32);
int_reduce!(k_reduce_u32, reduce_u32, u32, u32);
int_reduce!(k_reduce_i64, reduce_i64, i64, i64);

pub fn reduce_int(dev: &Device, seed: u64) -> R {
    reduce_i8(dev, seed)?;
    reduce_u8(dev, seed ^ 1)?;
    reduce_i32(dev, seed ^ 2)?;
    reduce_u32(dev, seed ^ 3)?;
    reduce_i64(dev, seed ^ 4)
}

// ---------------------------------------------------------------- cumsum

/// cumsum along axis 1 (whole rows) and axis 0 (within the row block).
#[kernel]
pub fn k_cumsum<T: Float, const BM: i32, const BN: i32>(x: Ptr<T>, c1: Ptr<T>, c0: Ptr<T>, m: i32, n: i32) {
    let rows = program_id(0) * BM + arange(0, BM);
    let cols = arange(0, BN);
    let mask = expand_dims(rows < m, 1) & expand_dims(cols < n, 0);
    let offs = expand_dims(rows, 1) * n + expand_dims(cols, 0);
    let xs = load(x + offs, mask);
    store(c1 + offs, cumsum(xs, 1), mask);
    store(c0 + offs, xs.cumsum(0), mask);
}

macro_rules! int_cumsum {
    ($k:ident, $t:ident, $st:ident) => {
        #[kernel]
        pub fn $k<const BM: i32, const BN: i32>(x: Ptr<$t>, c1: Ptr<$st>, c0: Ptr<$st>, m: i32, n: i32) {
            let rows = program_id(0) * BM + arange(0, BM);
            let cols = arange(0, BN);
            let mask = expand_dims(rows < m, 1) & expand_dims(cols < n, 0);
            let offs = expand_dims(rows, 1) * n + expand_dims(cols, 0);
            let xs = load(x + offs, mask);
            store(c1 + offs, cumsum(xs, 1), mask);
            store(c0 + offs, cumsum(xs, 0), mask);
        }
    };
}
int_cumsum!(k_cumsum_i8, i8, i32);
int_cumsum!(k_cumsum_i32, i32, i32);
int_cumsum!(k_cumsum_u32, u32, u32);
int_cumsum!(k_cumsum_i64, i64, i64);

/// Prefix sums of the m×n matrix along rows (axis 1) and down columns
/// within each block of `bm` rows (axis 0): (exact value, running Σ|x|).
fn prefix(x: &[f64], m: usize, n: usize, bm: usize) -> (Vec<(f64, f64)>, Vec<(f64, f64)>) {
    let mut p1 = vec![(0.0, 0.0); m * n];
    let mut p0 = vec![(0.0, 0.0); m * n];
    for i in 0..m {
        let (mut s, mut a) = (0.0, 0.0);
        for j in 0..n {
            s += x[i * n + j];
            a += x[i * n + j].abs();
            p1[i * n + j] = (s, a);
        }
    }
    for j in 0..n {
        let (mut s, mut a) = (0.0, 0.0);
        for i in 0..m {
            if i % bm == 0 {
                s = 0.0;
                a = 0.0;
            }
            s += x[i * n + j];
            a += x[i * n + j].abs();
            p0[i * n + j] = (s, a);
        }
    }
    (p1, p0)
}

fn cumsum_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(m, n, bm, bn) in RED_SHAPES {
        let c = Ctx::new("cumsum", seed, format!("{} {m}x{n} BM={bm} BN={bn}", T::NAME));
        let xs = reduce_data::<T>(&mut rng, m, n);
        let xf: Vec<f64> = xs.iter().map(|v| v.to_f64()).collect();
        let mut c1 = poisoned::<T>(dev, m * n + PAD)?;
        let mut c0 = poisoned::<T>(dev, m * n + PAD)?;
        c.launch(k_cumsum::launch(dev, cdiv(m, bm as usize) as u32, &upload(dev, &xs)?, &mut c1, &mut c0, m as i32, n as i32, bm, bn))?;
        let (p1, p0) = prefix(&xf, m, n, bm as usize);
        let inp = |i: usize| format!("row {}, column {}", i / n, i % n);
        let (w1, a1): (Vec<f64>, Vec<f64>) = p1.into_iter().unzip();
        let (w0, a0): (Vec<f64>, Vec<f64>) = p0.into_iter().unzip();
        check_sum(&c, dev, "cumsum(x, 1)", &download(&c1)?, &w1, &a1, n, &inp)?;
        check_sum(&c, dev, "cumsum(x, 0)", &download(&c0)?, &w0, &a0, bm as usize, &inp)?;
    }
    Ok(())
}

macro_rules! int_cumsum_case {
    ($f:ident, $k:ident, $t:ident, $st:ident) => {
        fn $f(dev: &Device, seed: u64) -> R {
            let mut rng = Rng::new(seed);
            for &(m, n, bm, bn) in RED_SHAPES {
                let c = Ctx::new("cumsum_int", seed, format!("{} {m}x{n} BM={bm} BN={bn}", stringify!($t)));
                let xs: Vec<$t> = (0..m * n).map(|_| rand_int(&mut rng)).collect();
                let mut c1 = poisoned::<$st>(dev, m * n + PAD)?;
                let mut c0 = poisoned::<$st>(dev, m * n + PAD)?;
                c.launch($k::launch(dev, cdiv(m, bm as usize) as u32, &upload(dev, &xs)?, &mut c1, &mut c0, m as i32, n as i32, bm, bn))?;
                let mut w1 = vec![0 as $st; m * n];
                let mut w0 = vec![0 as $st; m * n];
                for i in 0..m {
                    let mut s = 0 as $st;
                    for j in 0..n {
                        s = s.wrapping_add(xs[i * n + j] as $st);
                        w1[i * n + j] = s;
                    }
                }
                for j in 0..n {
                    let mut s = 0 as $st;
                    for i in 0..m {
                        if i % bm as usize == 0 {
                            s = 0;
                        }
                        s = s.wrapping_add(xs[i * n + j] as $st);
                        w0[i * n + j] = s;
                    }
                }
                let inp = |i: usize| format!("row {}, column {}", i / n, i % n);
                check_eq(&c, "cumsum(x, 1)", &download(&c1)?, &w1, &inp)?;
                check_eq(&c, "cumsum(x, 0)", &download(&c0)?, &w0, &inp)?;
            }
            Ok(())
        }
    };
}
int_cumsum_case!(cumsum_i8, k_cumsum_i8, i8, i32);
int_cumsum_case!(cumsum_i32, k_cumsum_i32, i32, i32);
int_cumsum_case!(cumsum_u32, k_cumsum_u32, u32, u32);
int_cumsum_case!(cumsum_i64, k_cumsum_i64, i64, i64);

pub fn cumsum(dev: &Device, seed: u64) -> R {
    cumsum_t::<f32>(dev, seed)?;
    cumsum_t::<f16>(dev, seed ^ 1)?;
    cumsum_t::<bf16>(dev, seed ^ 2)?;
    cumsum_i8(dev, seed ^ 3)?;
    cumsum_i32(dev, seed ^ 4)?;
    cumsum_u32(dev, seed ^ 5)?;
    cumsum_i64(dev, seed ^ 6)
}

// ------------------------------------------------------------------- dot

/// (m, n, k, BM, BN, BK)
const DOT_SHAPES: &[(usize, usize, usize, i32, i32, i32)] =
    &[(1, 1, 1, 16, 16, 16), (17, 33, 50, 16, 32, 16), (40, 20, 100, 32, 16, 32), (64, 64, 64, 32, 32, 16), (5, 70, 129, 16, 64, 64)];

/// C = bias + A·B, K walked in BK steps with masked tails; the accumulator
/// is a loop-carried tile.
#[kernel]
pub fn k_matmul<T: Float, const BM: i32, const BN: i32, const BK: i32>(a: Ptr<T>, b: Ptr<T>, c: Ptr<f32>, m: i32, n: i32, k: i32, bias: f32) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = full([BM, BN], bias, f32);
    for k0 in (0..k).step_by(BK) {
        let kk = k0 + rk;
        let ta = load(a + expand_dims(rm, 1) * k + expand_dims(kk, 0), expand_dims(rm < m, 1) & expand_dims(kk < k, 0), 0.0);
        let tb = load(b + expand_dims(kk, 1) * n + expand_dims(rn, 0), expand_dims(kk < k, 1) & expand_dims(rn < n, 0), 0.0);
        acc = dot(ta, tb, acc);
    }
    store(c + expand_dims(rm, 1) * n + expand_dims(rn, 0), acc, expand_dims(rm < m, 1) & expand_dims(rn < n, 0));
}

/// tf32 inputs; the two-argument `dot` added to the accumulator.
#[kernel]
pub fn k_matmul_tf32<const BM: i32, const BN: i32, const BK: i32>(a: Ptr<f32>, b: Ptr<f32>, c: Ptr<f32>, c2: Ptr<f32>, m: i32, n: i32, k: i32) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = zeros([BM, BN], f32);
    let mut acc2 = zeros([BM, BN], f32);
    for k0 in range(0, k, BK) {
        let kk = k0 + rk;
        let ta = load(a + expand_dims(rm, 1) * k + expand_dims(kk, 0), expand_dims(rm < m, 1) & expand_dims(kk < k, 0), 0.0);
        let tb = load(b + expand_dims(kk, 1) * n + expand_dims(rn, 0), expand_dims(kk < k, 1) & expand_dims(rn < n, 0), 0.0);
        acc = dot_tf32(ta, tb, acc);
        acc2 += dot(ta, tb);
    }
    let cm = expand_dims(rm < m, 1) & expand_dims(rn < n, 0);
    store(c + expand_dims(rm, 1) * n + expand_dims(rn, 0), acc, cm);
    store(c2 + expand_dims(rm, 1) * n + expand_dims(rn, 0), acc2, cm);
}

/// One tf32 `dot` per K step, rounding (`dot_tf32`) or truncating
/// (`dot_tf32_trunc`) its inputs — a single use of each operand tile, so
/// on Hopper the tiles go through `wgmma` operand rings (with the rounding
/// pass for `dot_tf32`).
#[kernel]
pub fn k_matmul_tf32_mode<const TRUNC: bool, const BM: i32, const BN: i32, const BK: i32>(a: Ptr<f32>, b: Ptr<f32>, c: Ptr<f32>, m: i32, n: i32, k: i32) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = zeros([BM, BN], f32);
    for k0 in range(0, k, BK) {
        let kk = k0 + rk;
        let ta = load(a + expand_dims(rm, 1) * k + expand_dims(kk, 0), expand_dims(rm < m, 1) & expand_dims(kk < k, 0), 0.0);
        let tb = load(b + expand_dims(kk, 1) * n + expand_dims(rn, 0), expand_dims(kk < k, 1) & expand_dims(rn < n, 0), 0.0);
        if TRUNC {
            acc = dot_tf32_trunc(ta, tb, acc);
        } else {
            acc = dot_tf32(ta, tb, acc);
        }
    }
    store(c + expand_dims(rm, 1) * n + expand_dims(rn, 0), acc, expand_dims(rm < m, 1) & expand_dims(rn < n, 0));
}

/// `k_matmul_tf32_mode` through views, B given transposed (`bt`: N×K
/// row-major, read as a column-major K×N view): on Hopper, where `k` is a
/// multiple of 4, both tiles come by bulk tensor copies (TMA), which do the
/// rounding for `dot_tf32`.
#[kernel]
pub fn k_matmul_tf32_views<const TRUNC: bool, const BM: i32, const BN: i32, const BK: i32>(a: Ptr<f32>, bt: Ptr<f32>, c: Ptr<f32>, m: i32, n: i32, k: i32) {
    let va = view(a, [m, k], [k, 1]);
    let vb = view(bt, [k, n], [1, k]);
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let mut acc = zeros([BM, BN], f32);
    for k0 in range(0, k, BK) {
        let ta = load_block(va, [program_id(0) * BM, k0], [BM, BK]);
        let tb = load_block(vb, [k0, program_id(1) * BN], [BK, BN]);
        if TRUNC {
            acc = dot_tf32_trunc(ta, tb, acc);
        } else {
            acc = dot_tf32(ta, tb, acc);
        }
    }
    store(c + expand_dims(rm, 1) * n + expand_dims(rn, 0), acc, expand_dims(rm < m, 1) & expand_dims(rn < n, 0));
}

#[kernel]
pub fn k_round_tf32<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let o = program_id(0) * BLOCK + arange(0, BLOCK);
    store(y + o, round_tf32(load(x + o, o < n, 0.0)), o < n);
}

#[kernel]
pub fn k_matmul_i8<const BM: i32, const BN: i32, const BK: i32>(a: Ptr<i8>, b: Ptr<i8>, c: Ptr<i32>, m: i32, n: i32, k: i32, bias: i32) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = full([BM, BN], bias, i32);
    for k0 in (0..k).step_by(BK) {
        let kk = k0 + rk;
        let ta = load(a + expand_dims(rm, 1) * k + expand_dims(kk, 0), expand_dims(rm < m, 1) & expand_dims(kk < k, 0));
        let tb = load(b + expand_dims(kk, 1) * n + expand_dims(rn, 0), expand_dims(kk < k, 1) & expand_dims(rn < n, 0));
        acc = dot(ta, tb, acc);
    }
    store(c + expand_dims(rm, 1) * n + expand_dims(rn, 0), acc, expand_dims(rm < m, 1) & expand_dims(rn < n, 0));
}

/// Reference C (f64) and Σ|a·b| per element.
fn matmul_ref(a: &[f64], b: &[f64], m: usize, n: usize, k: usize, bias: f64) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![bias; m * n];
    let mut s = vec![bias.abs(); m * n];
    for i in 0..m {
        for l in 0..k {
            let av = a[i * k + l];
            for j in 0..n {
                c[i * n + j] += av * b[l * n + j];
                s[i * n + j] += (av * b[l * n + j]).abs();
            }
        }
    }
    (c, s)
}

/// f32 accumulation: |got - want| ≤ 2·(k+1)·2⁻²⁴·Σ|a·b| (+ a tiny floor).
fn check_dot(c: &Ctx, out: &str, got: &[f32], want: &[f64], mag: &[f64], k: usize, n: usize) -> R {
    let tol = 2.0 * (k + 1) as f64 * 2f64.powi(-24);
    check_with(c, out, got, want, |i, g, &w| (g as f64 - w).abs() <= tol * mag[i] + 1e-30, &|i| {
        format!("C[{}][{}] (tolerance {:e})", i / n.max(1), i % n.max(1), tol * mag[i])
    })
}

fn matmul_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(m, n, k, bm, bn, bk) in DOT_SHAPES {
        let c = Ctx::new("dot", seed, format!("{} -> f32 {m}x{k} · {k}x{n} BM={bm} BN={bn} BK={bk}", T::NAME));
        let av: Vec<T> = (0..m * k).map(|_| T::round(rng.normal())).collect();
        let bv: Vec<T> = (0..k * n).map(|_| T::round(rng.normal())).collect();
        let bias = rng.normal() as f32;
        let mut out = poisoned::<f32>(dev, m * n + PAD)?;
        let grid =
            LaunchConfig::new([cdiv(m, bm as usize) as u32, cdiv(n, bn as usize) as u32, 1]).num_warps(rng.pick(&[2, 4, 8])).num_stages(rng.pick(&[1, 2, 3]));
        c.launch(k_matmul::launch(dev, grid, &upload(dev, &av)?, &upload(dev, &bv)?, &mut out, m as i32, n as i32, k as i32, bias, bm, bn, bk))?;
        let af: Vec<f64> = av.iter().map(|v| v.to_f64()).collect();
        let bf: Vec<f64> = bv.iter().map(|v| v.to_f64()).collect();
        let (want, mag) = matmul_ref(&af, &bf, m, n, k, bias as f64);
        check_dot(&c, "C = bias + A·B", &download(&out)?, &want, &mag, k, n)?;
    }
    Ok(())
}

/// A random tf32 value `q` in [0.5, 2] and its ulp, then an f32 value
/// `frac` (drawn from `lo..hi`) of an ulp above it.
fn above_tf32(rng: &mut Rng, lo: f64, hi: f64) -> (f32, f64, f64) {
    let q = ((rng.range(0.5, 2.0) * 1024.0).round() / 1024.0) as f32;
    let ulp = f32::from_bits(q.to_bits() & 0x7f80_0000) as f64 * 2f64.powi(-10);
    ((q as f64 + rng.range(lo, hi) * ulp) as f32, q as f64, ulp)
}

/// Positive f32 values just above a tf32 value (by 5–20% of a tf32 ulp), so
/// any tf32 rounding (nearest-even, nearest-away or truncation) gives that
/// value, and skipping the rounding is off by far more than the tolerance.
fn tf32_input(rng: &mut Rng) -> (f32, f64) {
    let (v, q, _) = above_tf32(rng, 0.05, 0.2);
    (v, q)
}

pub fn dot_tf32(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(m, n, k, bm, bn, bk) in DOT_SHAPES {
        let c = Ctx::new("dot_tf32", seed, format!("f32 {m}x{k} · {k}x{n} BM={bm} BN={bn} BK={bk}"));
        let (av, aq): (Vec<f32>, Vec<f64>) = (0..m * k).map(|_| tf32_input(&mut rng)).unzip();
        let (bv, bq): (Vec<f32>, Vec<f64>) = (0..k * n).map(|_| tf32_input(&mut rng)).unzip();
        let mut out = poisoned::<f32>(dev, m * n + PAD)?;
        let mut out2 = poisoned::<f32>(dev, m * n + PAD)?;
        let grid = (cdiv(m, bm as usize) as u32, cdiv(n, bn as usize) as u32);
        c.launch(k_matmul_tf32::launch(dev, grid, &upload(dev, &av)?, &upload(dev, &bv)?, &mut out, &mut out2, m as i32, n as i32, k as i32, bm, bn, bk))?;
        let (want, mag) = matmul_ref(&aq, &bq, m, n, k, 0.0);
        check_dot(&c, "dot_tf32 (inputs rounded to tf32)", &download(&out)?, &want, &mag, k, n)?;
        let af: Vec<f64> = av.iter().map(|&v| v as f64).collect();
        let bf: Vec<f64> = bv.iter().map(|&v| v as f64).collect();
        let (want, mag) = matmul_ref(&af, &bf, m, n, k, 0.0);
        check_dot(&c, "acc += dot(a, b) (IEEE f32)", &download(&out2)?, &want, &mag, k, n)?;
    }
    Ok(())
}

/// `len` positive f32 values 55–95 % of a tf32 ulp above a tf32 value `q`:
/// the values, what rounding to nearest gives (`q + ulp`) and what
/// truncation gives (`q`).
fn tf32_split_inputs(rng: &mut Rng, len: usize) -> (Vec<f32>, Vec<f64>, Vec<f64>) {
    let (mut v, mut r, mut t) = (vec![], vec![], vec![]);
    for _ in 0..len {
        let (x, q, ulp) = above_tf32(rng, 0.55, 0.95);
        v.push(x);
        r.push(q + ulp);
        t.push(q);
    }
    (v, r, t)
}

/// `dot_tf32` rounds its inputs to nearest and `dot_tf32_trunc` truncates
/// them (inputs where the two differ by a tf32 ulp, shapes that take
/// Hopper's `wgmma` with 4 warps, pipelined or not; from pointer loads and,
/// where `k` allows a tensor map, from views whose bulk copies round on
/// Hopper); `round_tf32` is exact, ties to even, specials unchanged.
pub fn tf32_modes(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let shapes: Vec<(usize, usize, usize, i32, i32, i32)> =
        DOT_SHAPES.iter().copied().chain([(100, 130, 200, 64, 64, 32), (70, 128, 96, 64, 128, 32), (130, 200, 160, 64, 64, 32)]).collect();
    for &(m, n, k, bm, bn, bk) in &shapes {
        let (av, ar, at) = tf32_split_inputs(&mut rng, m * k);
        let (bv, br, bt) = tf32_split_inputs(&mut rng, k * n);
        let (ad, bd) = (upload(dev, &av)?, upload(dev, &bv)?);
        for trunc in [false, true] {
            let stages = rng.pick(&[1, 2, 3]);
            let c = Ctx::new(
                "tf32_modes",
                seed,
                format!("{} f32 {m}x{k} · {k}x{n} BM={bm} BN={bn} BK={bk} stages {stages}", if trunc { "dot_tf32_trunc" } else { "dot_tf32" }),
            );
            let mut out = poisoned::<f32>(dev, m * n + PAD)?;
            let grid = LaunchConfig::new([cdiv(m, bm as usize) as u32, cdiv(n, bn as usize) as u32, 1]).num_warps(4).num_stages(stages);
            c.launch(k_matmul_tf32_mode::launch(dev, grid, &ad, &bd, &mut out, m as i32, n as i32, k as i32, trunc, bm, bn, bk))?;
            let (want, mag) = if trunc { matmul_ref(&at, &bt, m, n, k, 0.0) } else { matmul_ref(&ar, &br, m, n, k, 0.0) };
            check_dot(
                &c,
                if trunc { "dot_tf32_trunc (inputs truncated)" } else { "dot_tf32 (inputs rounded to nearest)" },
                &download(&out)?,
                &want,
                &mag,
                k,
                n,
            )?;
            if k % 16 == 0 && bm % 64 == 0 && bn % 64 == 0 {
                // the same through views, B transposed (TMA on Hopper)
                let c = Ctx::new(
                    "tf32_modes",
                    seed,
                    format!("{} views f32 {m}x{k} · ({n}x{k})ᵀ BM={bm} BN={bn} BK={bk} stages {stages}", if trunc { "dot_tf32_trunc" } else { "dot_tf32" }),
                );
                let btv: Vec<f32> = (0..n * k).map(|i| bv[(i % k) * n + i / k]).collect();
                let mut out = poisoned::<f32>(dev, m * n + PAD)?;
                c.launch(k_matmul_tf32_views::launch(dev, grid, &ad, &upload(dev, &btv)?, &mut out, m as i32, n as i32, k as i32, trunc, bm, bn, bk))?;
                check_dot(&c, if trunc { "dot_tf32_trunc of views" } else { "dot_tf32 of views" }, &download(&out)?, &want, &mag, k, n)?;
            }
        }
    }
    // the rounding itself, bit for bit: A · I with A half exact ties, half
    // random bits (one nonzero product per output, so C is the rounded A),
    // from pointer loads and from views (on Hopper: TMA copies that round)
    const E: usize = 64;
    let x: Vec<f32> = (0..E * E)
        .map(|i| {
            let q = f32::from_bits((rng.int(0x3f00_0000, 0x4000_0000) as u32 & !0x1fff) | ((i as u32 & 2) << 30));
            if i % 2 == 0 {
                f32::from_bits(q.to_bits() | 0x1000)
            } else {
                f32::from_bits(q.to_bits() | rng.int(0, 0x1fff) as u32)
            }
        })
        .collect();
    let eye: Vec<f32> = (0..E * E).map(|i| if i / E == i % E { 1.0 } else { 0.0 }).collect();
    let (xd, eyed) = (upload(dev, &x)?, upload(dev, &eye)?);
    for trunc in [false, true] {
        let want: Vec<u32> = x.iter().map(|&v| if trunc { v.to_bits() & !0x1fff } else { ferrotile_kernels::reference::tf32_rne(v).to_bits() }).collect();
        for views in [false, true] {
            let c = Ctx::new(
                "tf32_modes",
                seed,
                format!("{} of ties: A·I {E}x{E}{}", if trunc { "dot_tf32_trunc" } else { "dot_tf32" }, if views { ", views" } else { "" }),
            );
            let mut out = poisoned::<f32>(dev, E * E + PAD)?;
            let grid = LaunchConfig::new([1, 1, 1]).num_warps(4).num_stages(2);
            let e = E as i32;
            if views {
                c.launch(k_matmul_tf32_views::launch(dev, grid, &xd, &eyed, &mut out, e, e, e, trunc, 64, 64, 32))?;
            } else {
                c.launch(k_matmul_tf32_mode::launch(dev, grid, &xd, &eyed, &mut out, e, e, e, trunc, 64, 64, 32))?;
            }
            let got: Vec<u32> = download(&out)?[..E * E].iter().map(|v| v.to_bits()).collect();
            check_eq(&c, if trunc { "A·I = trunc(A) (bits)" } else { "A·I = round_nearest_even(A) (bits)" }, &got, &want, &|i| {
                format!("A[{}][{}] = {:e} ({:#010x})", i / E, i % E, x[i], x[i].to_bits())
            })?;
        }
    }
    // round_tf32: random bits of every exponent, exact ties, infinities
    let c = Ctx::new("tf32_modes", seed, "round_tf32".to_string());
    // (no NaNs: a backend may quiet a signalling NaN's payload in transit)
    let mut xs: Vec<f32> = (0..3000).map(|_| f32::from_bits(rng.int(0, u32::MAX as i64) as u32)).filter(|x| !x.is_nan()).collect();
    for i in 0..200u32 {
        let q = 1.0f32 + (i as f32) / 1024.0;
        xs.push(f32::from_bits(q.to_bits() | 0x1000)); // a tie
        xs.push(-f32::from_bits(q.to_bits() | 0x0fff));
    }
    xs.extend([f32::INFINITY, f32::NEG_INFINITY, f32::MAX, -f32::MAX, 0.0, -0.0, f32::MIN_POSITIVE, 1e-40]);
    let mut y = poisoned::<f32>(dev, xs.len() + PAD)?;
    c.launch(k_round_tf32::launch(dev, cdiv(xs.len(), 256) as u32, &upload(dev, &xs)?, &mut y, xs.len() as i32, 256))?;
    let want: Vec<u32> = xs.iter().map(|&x| ferrotile_kernels::reference::tf32_rne(x).to_bits()).collect();
    let got: Vec<u32> = download(&y)?.iter().map(|v| v.to_bits()).collect();
    check_eq(&c, "round_tf32(x) (bits)", &got[..xs.len()], &want, &|i| format!("x = {:e} ({:#010x})", xs[i], xs[i].to_bits()))?;
    check_pad(&c, "round_tf32(x)", &download(&y)?, xs.len())
}

pub fn dot_float(dev: &Device, seed: u64) -> R {
    matmul_t::<f32>(dev, seed)?;
    matmul_t::<f16>(dev, seed ^ 1)?;
    matmul_t::<bf16>(dev, seed ^ 2)
}

/// GEMMs whose pointer-loaded operand rings feed `wgmma`s kept in flight
/// across iterations, at tiles (128×128×64, 8 warps, 3 and 4 stages) where
/// the rings do without their extra slot on CUDA (the copies issued after
/// the MMA: `async_copy::late_prefetch`), K from one tile to many, M and N
/// not multiples of the block; small tiles on the other devices.
pub fn ring_gemm_late(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let cuda = dev.kind() == DeviceKind::Cuda;
    let shapes: &[(usize, usize, usize)] = if cuda { &[(300, 200, 520), (129, 257, 64), (256, 128, 1000), (1, 130, 136)] } else { &[(37, 45, 70)] };
    let (bm, bn, bk, warps) = if cuda { (128, 128, 64, 8) } else { (16, 16, 16, 4) };
    for &(m, n, k) in shapes {
        for stages in [3u32, 4] {
            for f16_in in [false, true] {
                let c = Ctx::new(
                    "ring_gemm_late",
                    seed,
                    format!("{} {m}x{k} · {k}x{n} BM={bm} BN={bn} BK={bk} stages {stages}", if f16_in { "f16" } else { "bf16" }),
                );
                let af: Vec<f64> = (0..m * k).map(|_| rng.normal()).collect();
                let bf: Vec<f64> = (0..k * n).map(|_| rng.normal()).collect();
                let bias = rng.normal() as f32;
                let mut out = poisoned::<f32>(dev, m * n + PAD)?;
                let grid = LaunchConfig::new([cdiv(m, bm as usize) as u32, cdiv(n, bn as usize) as u32, 1]).num_warps(warps).num_stages(stages);
                let (ar, br): (Vec<f64>, Vec<f64>) = if f16_in {
                    let (a, b): (Vec<f16>, Vec<f16>) = (af.iter().map(|&v| f16::round(v)).collect(), bf.iter().map(|&v| f16::round(v)).collect());
                    c.launch(k_matmul::launch(dev, grid, &upload(dev, &a)?, &upload(dev, &b)?, &mut out, m as i32, n as i32, k as i32, bias, bm, bn, bk))?;
                    (a.iter().map(|v| v.to_f64()).collect(), b.iter().map(|v| v.to_f64()).collect())
                } else {
                    let (a, b): (Vec<bf16>, Vec<bf16>) = (af.iter().map(|&v| bf16::round(v)).collect(), bf.iter().map(|&v| bf16::round(v)).collect());
                    c.launch(k_matmul::launch(dev, grid, &upload(dev, &a)?, &upload(dev, &b)?, &mut out, m as i32, n as i32, k as i32, bias, bm, bn, bk))?;
                    (a.iter().map(|v| v.to_f64()).collect(), b.iter().map(|v| v.to_f64()).collect())
                };
                let (want, mag) = matmul_ref(&ar, &br, m, n, k, bias as f64);
                let got = download(&out)?;
                check_dot(&c, "C = bias + A·B", &got[..m * n], &want, &mag, k, n)?;
            }
        }
    }
    Ok(())
}

pub fn dot_i8(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(m, n, k, bm, bn, bk) in DOT_SHAPES {
        let c = Ctx::new("dot_i8", seed, format!("i8 -> i32 {m}x{k} · {k}x{n} BM={bm} BN={bn} BK={bk}"));
        let av: Vec<i8> = (0..m * k).map(|_| rand_int(&mut rng)).collect();
        let bv: Vec<i8> = (0..k * n).map(|_| rand_int(&mut rng)).collect();
        let bias = rng.int(-1 << 20, 1 << 20) as i32;
        let mut out = poisoned::<i32>(dev, m * n + PAD)?;
        let grid = (cdiv(m, bm as usize) as u32, cdiv(n, bn as usize) as u32);
        c.launch(k_matmul_i8::launch(dev, grid, &upload(dev, &av)?, &upload(dev, &bv)?, &mut out, m as i32, n as i32, k as i32, bias, bm, bn, bk))?;
        let mut want = vec![bias; m * n];
        for i in 0..m {
            for j in 0..n {
                for l in 0..k {
                    want[i * n + j] = want[i * n + j].wrapping_add(av[i * k + l] as i32 * bv[l * n + j] as i32);
                }
            }
        }
        check_eq(&c, "C = bias + A·B", &download(&out)?, &want, &|i| format!("C[{}][{}]", i / n, i % n))?;
    }
    Ok(())
}

/// i8 products in the tile sizes of Hopper's warpgroup MMAs (`wgmma` k32
/// into s32 reads both operands K-major): B given as a row-major `[K, N]`
/// tensor (`BMODE` 0: staged transposed through registers), as `trans` of
/// a block of a `[N, K]` tensor (1: a slot read K-major, the layout
/// weights are stored in), or through a column-major `[K, N]` view (2); A
/// by block loads (`PTR_A` false) or masked pointer loads.
#[kernel]
pub fn k_matmul_i8_tiles<const BM: i32, const BN: i32, const BK: i32, const BMODE: i32, const PTR_A: bool>(
    a: Ptr<i8>,
    b: Ptr<i8>,
    c: Ptr<i32>,
    m: i32,
    n: i32,
    k: i32,
    bias: i32,
) {
    let pm = program_id(0);
    let pn = program_id(1);
    let rm = pm * BM + arange(0, BM);
    let va = view(a, [m, k], [k, 1]);
    let mut acc = full([BM, BN], bias, i32);
    for k0 in (0..k).step_by(BK) {
        let mut ta = load_block(va, [pm * BM, k0], [BM, BK]);
        if PTR_A {
            let kk = k0 + arange(0, BK);
            ta = load(a + expand_dims(rm, 1) * k + expand_dims(kk, 0), expand_dims(rm < m, 1) & expand_dims(kk < k, 0));
        }
        if BMODE == 0 {
            acc = dot(ta, load_block(view(b, [k, n], [n, 1]), [k0, pn * BN], [BK, BN]), acc);
        }
        if BMODE == 1 {
            acc = dot(ta, trans(load_block(view(b, [n, k], [k, 1]), [pn * BN, k0], [BN, BK])), acc);
        }
        if BMODE == 2 {
            acc = dot(ta, load_block(view(b, [k, n], [1, k]), [k0, pn * BN], [BK, BN]), acc);
        }
    }
    store_block(view(c, [m, n], [n, 1]), [pm * BM, pn * BN], acc);
}

pub fn dot_i8_tiles(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    // (m, n, k, BM, BN, BK, warps): wgmma-sized tiles on CUDA (K in whole
    // 128-byte atoms, M in 16-row slices of every warp); small ones that
    // fit lavapipe's workgroup storage elsewhere
    let shapes: &[(usize, usize, usize, i32, i32, i32, u32)] = if dev.kind() == DeviceKind::Cuda {
        &[(100, 90, 300, 64, 64, 128, 4), (130, 200, 520, 128, 128, 128, 8), (64, 48, 128, 64, 16, 128, 4), (1, 256, 1000, 64, 256, 128, 4)]
    } else {
        &[(20, 18, 70, 16, 16, 32, 4)]
    };
    for &(m, n, k, bm, bn, bk, warps) in shapes {
        for bmode in 0..3 {
            for ptr_a in [false, true] {
                let c = Ctx::new(
                    "dot_i8_tiles",
                    seed,
                    format!("{m}x{k} · {k}x{n} BM={bm} BN={bn} BK={bk} warps={warps} B mode {bmode}{}", if ptr_a { ", A by pointers" } else { "" }),
                );
                let av: Vec<i8> = (0..m * k).map(|_| rand_int(&mut rng)).collect();
                let bv: Vec<i8> = (0..k * n).map(|_| rand_int(&mut rng)).collect();
                // B as stored: [K, N] row-major (modes 0) or [N, K] (1, 2)
                let stored: Vec<i8> = if bmode == 0 { bv.clone() } else { (0..n * k).map(|i| bv[(i % k) * n + i / k]).collect() };
                let bias = rng.int(-1 << 20, 1 << 20) as i32;
                let mut out = poisoned::<i32>(dev, m * n + PAD)?;
                let grid = LaunchConfig::new([cdiv(m, bm as usize) as u32, cdiv(n, bn as usize) as u32, 1]).num_warps(warps).num_stages(3);
                c.launch(k_matmul_i8_tiles::launch(
                    dev,
                    grid,
                    &upload(dev, &av)?,
                    &upload(dev, &stored)?,
                    &mut out,
                    m as i32,
                    n as i32,
                    k as i32,
                    bias,
                    bm,
                    bn,
                    bk,
                    bmode,
                    ptr_a,
                ))?;
                let mut want = vec![bias; m * n];
                for i in 0..m {
                    for l in 0..k {
                        let x = av[i * k + l] as i32;
                        for j in 0..n {
                            want[i * n + j] = want[i * n + j].wrapping_add(x * bv[l * n + j] as i32);
                        }
                    }
                }
                let got = download(&out)?;
                check_eq(&c, "C = bias + A·B", &got[..m * n], &want, &|i| format!("C[{}][{}]", i / n, i % n))?;
                check_pad(&c, "C", &got, m * n)?;
            }
        }
    }
    Ok(())
}

// ------------------------------------------------------ summation order

/// One program sums one row of `B` f32 values.
#[kernel]
pub fn k_row_sum<const B: i32>(x: Ptr<f32>, out: Ptr<f32>) {
    let r = program_id(0);
    store(out + r, sum(load(x + r * B + arange(0, B)), 0));
}

/// `sum` combines partial sums in a balanced tree, not one after another:
/// a row of 2^24 followed by 0.25s loses every 0.25 (and up to B/4 in all)
/// when partials are added serially to the large one, but at most a few
/// units in a tree. Deterministic, for every warp count (so every split of
/// the row between registers, lanes and warps).
pub fn sum_order(dev: &Device, seed: u64) -> R {
    for b in [128usize, 512, 2048] {
        for warps in [1u32, 4, 16] {
            let c = Ctx::new("sum_order", seed, format!("B={b} warps={warps}"));
            let mut xs = vec![0.25f32; b];
            xs[0] = 16777216.0;
            let exact = 16777216.0 + 0.25 * (b - 1) as f64;
            let mut out = poisoned::<f32>(dev, 1 + PAD)?;
            c.launch(k_row_sum::launch(dev, LaunchConfig::new([1, 1, 1]).num_warps(warps), &upload(dev, &xs)?, &mut out, b as i32))?;
            // within 2 ulps (spacing 2 at 2^24) of the exact sum
            check_with(&c, "sum(row)", &download(&out)?, &[exact], |_, g, &w| (g as f64 - w).abs() <= 4.0, &|_| "x = [2^24, 0.25, 0.25, ...]".into())?;
        }
    }
    Ok(())
}

// ------------------------------------------------------ multi-row programs

/// `R` rows per program: per-row statistics (reductions along axis 1)
/// broadcast back into their rows — a layer-norm and a softmax of the same
/// rows — and an online log-sum-exp whose running max and sum are carried
/// through a loop over `C`-column chunks, mixing row statistics with
/// loop-carried row vectors.
#[kernel]
pub fn k_row_stats<const R: i32, const B: i32, const C: i32>(
    x: Ptr<f32>,
    ln: Ptr<f32>,
    sm: Ptr<f32>,
    lse: Ptr<f32>,
    mean_out: Ptr<f32>,
    pick: Ptr<f32>,
    m: i32,
    n: i32,
) {
    let rows = program_id(0) * R + arange(0, R);
    let cols = arange(0, B);
    let rm = rows < m;
    let mask = expand_dims(rm, 1) & expand_dims(cols < n, 0);
    let offs = expand_dims(rows, 1) * n + expand_dims(cols, 0);
    let v = load(x + offs, mask, 0.0);
    let nf = n as f32;
    let mean = sum(v, 1) / nf;
    let d = select(mask, v - expand_dims(mean, 1), 0.0);
    let rstd = rsqrt(sum(d * d, 1) / nf + 1e-5);
    store(ln + offs, d * expand_dims(rstd, 1), mask);
    let w = load(x + offs, mask, f32::NEG_INFINITY);
    let mx = max(w, axis = 1);
    // row statistics chosen by a branch, then used after it
    let mut p = mean;
    if n > 40 {
        p = mx;
    }
    store(pick + rows, p, rm);
    store(mean_out + rows, mean, rm);
    let e = exp(w - expand_dims(mx, 1));
    let inv = 1.0 / sum(e, 1);
    store(sm + offs, e * expand_dims(inv, 1), mask);
    let mut mi = full([R], f32::NEG_INFINITY, f32);
    let mut li = zeros([R], f32);
    for start in (0..n).step_by(C) {
        let c = start + arange(0, C);
        let cm = expand_dims(rm, 1) & expand_dims(c < n, 0);
        let t = load(x + expand_dims(rows, 1) * n + expand_dims(c, 0), cm, f32::NEG_INFINITY);
        let mn = maximum(mi, max(t, axis = 1));
        let safe = select(mn == f32::NEG_INFINITY, 0.0, mn);
        li = li * exp(mi - safe) + sum(exp(t - expand_dims(safe, 1)), 1);
        mi = mn;
    }
    store(lse + rows, mi + log(li), rm);
}

/// `max` with `argmax` of the same row (one paired reduction on the GPU
/// backends) and an `argmin` alone, over rows with NaNs: NaN loses to every
/// number, ties and all-NaN rows give the first index.
#[kernel]
pub fn k_arg_nan<const BN: i32>(x: Ptr<f32>, mx: Ptr<f32>, am: Ptr<i32>, an: Ptr<i32>, n: i32) {
    let r = program_id(0);
    let c = arange(0, BN);
    let v = load(x + r * n + c, c < n, f32::NEG_INFINITY);
    store(mx + r, max(v, axis = 0));
    store(am + r, argmax(v, 0));
    store(an + r, argmin(v, 0));
}

/// `k_arg_nan` against the host: rows of small integers (many ties) with
/// NaNs sprinkled in, rows of NaN only, NaN next to ±inf, one number among
/// NaNs; widths that fill the block and that leave masked lanes (which
/// load −inf); one, four and eight warps.
pub fn arg_nan(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, bn) in &[(1usize, 1i32), (7, 8), (32, 32), (100, 128), (256, 256), (1000, 1024)] {
        let rows = 24;
        let c = Ctx::new("arg_nan", seed, format!("{rows}x{n} BN={bn}"));
        let mut xs: Vec<f32> = vec![];
        for r in 0..rows {
            let mut row: Vec<f32> = (0..n).map(|_| (rng.normal() * 2.0).round() as f32).collect();
            for v in row.iter_mut() {
                let nan = match r % 6 {
                    0 => false,
                    1 => rng.chance(0.3),
                    2 | 4 => true,
                    3 => {
                        *v = rng.pick(&[f32::NEG_INFINITY, f32::INFINITY, *v]);
                        rng.chance(0.5)
                    }
                    _ => rng.chance(0.05),
                };
                if nan {
                    *v = f32::NAN;
                }
            }
            if r % 6 == 4 {
                let at = rng.below(n as u64) as usize;
                row[at] = rng.pick(&[-3.0, f32::NEG_INFINITY, f32::INFINITY]);
            }
            xs.extend(row);
        }
        let x = upload(dev, &xs)?;
        let (mut mx, mut am, mut an) = (poisoned::<f32>(dev, rows + PAD)?, poisoned::<i32>(dev, rows + PAD)?, poisoned::<i32>(dev, rows + PAD)?);
        let cfg = LaunchConfig::new([rows as u32, 1, 1]).num_warps(rng.pick(&[1, 4, 8]));
        c.launch(k_arg_nan::launch(dev, cfg, &x, &mut mx, &mut am, &mut an, n as i32, bn))?;
        // the block's view of each row: masked lanes hold −inf
        let (mut want_am, mut want_an, mut want_mx, mut has_num) = (vec![], vec![], vec![], vec![]);
        for r in 0..rows {
            let row: Vec<f32> = (0..bn as usize).map(|j| if j < n { xs[r * n + j] } else { f32::NEG_INFINITY }).collect();
            let pick = |better: &dyn Fn(f32, f32) -> bool| {
                let mut b = 0;
                for j in 1..row.len() {
                    if (!row[j].is_nan() && row[b].is_nan()) || better(row[j], row[b]) {
                        b = j;
                    }
                }
                b as i32
            };
            want_am.push(pick(&|a, b| a > b));
            want_an.push(pick(&|a, b| a < b));
            want_mx.push(row[want_am[r] as usize] as f64);
            has_num.push(row.iter().any(|v| !v.is_nan()));
        }
        let show = |i: usize| format!("row {i}: {:?}", &xs[i * n..i * n + n.min(12)]);
        check_eq(&c, "argmax(x, 0)", &download(&am)?[..rows], &want_am, &show)?;
        check_eq(&c, "argmin(x, 0)", &download(&an)?[..rows], &want_an, &show)?;
        // (the maximum of a row of NaN only is not pinned down)
        let got_mx = download(&mx)?;
        let keep: Vec<usize> = (0..rows).filter(|&r| has_num[r]).collect();
        let g: Vec<f32> = keep.iter().map(|&r| got_mx[r]).collect();
        let w: Vec<f64> = keep.iter().map(|&r| want_mx[r]).collect();
        check_float_exact(&c, "max(x, axis = 0)", &g, &w, &|i| show(keep[i]))?;
    }
    Ok(())
}

/// Multi-row programs (`k_row_stats`) against f64, for row blocks that do
/// and do not divide the rows, tiles wider than the rows, every warp count.
pub fn row_stats(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    // (m, n, R, B, C, warps)
    let shapes: &[(usize, usize, i32, i32, i32, u32)] =
        &[(5, 3, 2, 4, 2, 1), (37, 100, 4, 128, 32, 4), (64, 64, 8, 64, 16, 4), (19, 250, 16, 256, 64, 8), (9, 33, 32, 64, 64, 2), (33, 17, 8, 32, 8, 16)];
    for &(m, n, r, b, cc, warps) in shapes {
        let c = Ctx::new("row_stats", seed, format!("{m}x{n} R={r} B={b} C={cc} warps={warps}"));
        let xs: Vec<f32> = (0..m * n).map(|_| (rng.normal() * rng.pick(&[0.1, 1.0, 10.0])) as f32).collect();
        let x = upload(dev, &xs)?;
        let (mut ln, mut sm) = (poisoned::<f32>(dev, m * n + PAD)?, poisoned::<f32>(dev, m * n + PAD)?);
        let (mut lse, mut mean) = (poisoned::<f32>(dev, m + PAD)?, poisoned::<f32>(dev, m + PAD)?);
        let mut pick = poisoned::<f32>(dev, m + PAD)?;
        let cfg = LaunchConfig::new([cdiv(m, r as usize) as u32, 1, 1]).num_warps(warps);
        c.launch(k_row_stats::launch(dev, cfg, &x, &mut ln, &mut sm, &mut lse, &mut mean, &mut pick, m as i32, n as i32, r, b, cc))?;
        let (mut w_ln, mut w_sm, mut w_lse, mut w_mean, mut w_pick) = (vec![], vec![], vec![], vec![], vec![]);
        for i in 0..m {
            let row: Vec<f64> = xs[i * n..(i + 1) * n].iter().map(|&v| v as f64).collect();
            let mu = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / n as f64;
            w_ln.extend(row.iter().map(|v| (v - mu) / (var + 1e-5).sqrt()));
            let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = row.iter().map(|v| (v - mx).exp()).sum();
            w_sm.extend(row.iter().map(|v| (v - mx).exp() / s));
            w_lse.push(mx + s.ln());
            w_mean.push(mu);
            w_pick.push(if n > 40 { mx } else { mu });
        }
        let at = |i: usize| format!("row {}: {:?}", i / n, &xs[(i / n) * n..((i / n) * n + n.min(6))]);
        let row_of = |i: usize| format!("row {i}: {:?}", &xs[i * n..(i * n + n.min(6))]);
        check_float(&c, "layer_norm rows", &download(&ln)?, &w_ln, 8, 1e-4, 1e-4, &at)?;
        check_float(&c, "softmax rows", &download(&sm)?, &w_sm, 8, 1e-4, 1e-7, &at)?;
        check_float(&c, "mean", &download(&mean)?, &w_mean, 8, 1e-5, 1e-5, &row_of)?;
        check_float(&c, "if n > 40 { max } else { mean }", &download(&pick)?, &w_pick, 8, 1e-5, 1e-5, &row_of)?;
        check_float(&c, "online log-sum-exp", &download(&lse)?, &w_lse, 8, 1e-5, 1e-5, &row_of)?;
    }
    Ok(())
}

// ------------------------------------------- accumulators summed after a loop

/// Loop-carried tiles only ever summed along one axis after their loop (the
/// PTX backend carries them pre-summed inside each thread:
/// `plan::partial`), next to ones that are not: a GEMV's `fma` form with a
/// non-zero initial value, an `e + acc` form summed twice, and an
/// accumulator that is also reduced with `max` (carried whole).
#[kernel]
pub fn k_acc_gemv<const BK: i32, const BN: i32>(x: Ptr<f32>, w: Ptr<f32>, y: Ptr<f32>, sq: Ptr<f32>, top: Ptr<f32>, n: i32, k: i32) {
    let rn = program_id(0) * BN + arange(0, BN);
    let n_ok = expand_dims(rn < n, 0);
    let mut acc = full([BK, BN], 0.5, f32);
    let mut s2 = zeros([BK, BN], f32);
    let mut t = zeros([BK, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let kk = k0 + arange(0, BK);
        let k_ok = expand_dims(kk < k, 1);
        let xv = load(broadcast_to(expand_dims(x + kk, 1), [BK, BN]), k_ok, 0.0);
        let wv = load(w + expand_dims(kk * n, 1) + expand_dims(rn, 0), k_ok & n_ok, 0.0);
        acc = fma(xv, wv, acc);
        s2 = wv * wv + s2;
        t = t + wv;
    }
    let ok = rn < n;
    // (the initial 0.5 counts once per element of the tile)
    store(y + rn, sum(acc, 0) - 0.5 * (BK as f32), ok);
    store(sq + rn, sum(s2, 0) * 0.5 + sum(s2, 0) * 0.5, ok);
    store(top + rn, sum(t, 0) + max(t, axis = 0), ok);
}

/// One program sums a whole vector through a `[B]` accumulator.
#[kernel]
pub fn k_acc_vector<const B: i32>(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let mut acc = zeros([B], f32);
    for s in (0..n).step_by(B) {
        let i = s + arange(0, B);
        acc = acc + load(x + i, i < n, 0.0);
    }
    store(out, sum(acc, 0));
}

/// [`k_acc_gemv`] and [`k_acc_vector`] against f64, for sizes that do and
/// do not divide the blocks, and every split of the tile over warps.
pub fn partial_sums(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    // (n, k, BK, BN, warps)
    for &(n, k, bk, bn, warps) in
        &[(37usize, 300usize, 64i32, 32i32, 4u32), (256, 1000, 64, 256, 8), (5, 17, 16, 8, 1), (100, 64, 32, 64, 2), (70, 129, 128, 64, 4)]
    {
        let c = Ctx::new("partial_sums", seed, format!("gemv n={n} k={k} BK={bk} BN={bn} warps={warps}"));
        let xs: Vec<f32> = (0..k).map(|_| rng.normal() as f32).collect();
        let ws: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
        let (mut y, mut sq, mut top) = (poisoned::<f32>(dev, n + PAD)?, poisoned::<f32>(dev, n + PAD)?, poisoned::<f32>(dev, n + PAD)?);
        let cfg = LaunchConfig::new([cdiv(n, bn as usize) as u32, 1, 1]).num_warps(warps);
        c.launch(k_acc_gemv::launch(dev, cfg, &upload(dev, &xs)?, &upload(dev, &ws)?, &mut y, &mut sq, &mut top, n as i32, k as i32, bk, bn))?;
        let (mut w_y, mut w_sq, mut w_top) = (vec![], vec![], vec![]);
        let kp = cdiv(k, bk as usize) * bk as usize;
        for j in 0..n {
            let col: Vec<f64> = (0..k).map(|i| ws[i * n + j] as f64).collect();
            w_y.push((0..k).map(|i| xs[i] as f64 * col[i]).sum::<f64>());
            w_sq.push(col.iter().map(|v| v * v).sum::<f64>());
            // per row of the tile, its column's values at k0 + row
            let rows = (0..bk as usize).map(|r| (r..kp).step_by(bk as usize).filter(|&i| i < k).map(|i| col[i]).sum::<f64>());
            w_top.push(col.iter().sum::<f64>() + rows.fold(f64::NEG_INFINITY, f64::max));
        }
        let at = |j: usize| format!("column {j}");
        check_float(&c, "sum(fma(x, w, acc), 0)", &download(&y)?, &w_y, 8, 1e-5, 1e-4, &at)?;
        check_float(&c, "sum(w * w + acc, 0), summed twice", &download(&sq)?, &w_sq, 8, 1e-5, 1e-4, &at)?;
        check_float(&c, "sum(t, 0) + max(t, 0)", &download(&top)?, &w_top, 8, 1e-5, 1e-4, &at)?;
    }
    for &(n, b, warps) in &[(10000usize, 4096i32, 4u32), (333, 1024, 1), (4096, 512, 2)] {
        let c = Ctx::new("partial_sums", seed, format!("vector n={n} B={b} warps={warps}"));
        let xs: Vec<f32> = (0..n).map(|_| rng.normal() as f32).collect();
        let mut out = poisoned::<f32>(dev, 1 + PAD)?;
        c.launch(k_acc_vector::launch(dev, LaunchConfig::new([1, 1, 1]).num_warps(warps), &upload(dev, &xs)?, &mut out, n as i32, b))?;
        let want = xs.iter().map(|&v| v as f64).sum::<f64>();
        check_float(&c, "sum(acc + x)", &download(&out)?, &[want], 8, 1e-5, 1e-4, &|_| format!("{n} normal values"))?;
    }
    Ok(())
}
