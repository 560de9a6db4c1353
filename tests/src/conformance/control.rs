//! Control flow: `for` loops with loop-carried tiles and scalars (all three
//! range forms), `if` on run-time scalars (with `else if`) and on
//! constexprs, `static_assert`, `print`, `cdiv`, bool scalar arguments.

use super::util::*;
use ferrotile::prelude::*;

/// One program per row of an m×ncols matrix of small integers (so every
/// summation order is exact). Loop-carried: a sum tile, a max tile and a
/// scalar counter; `flag` selects a branch at run time, DOUBLE at compile time.
#[kernel]
pub fn k_control<const B: i32, const DOUBLE: bool>(x: Ptr<f32>, out: Ptr<f32>, iout: Ptr<i32>, ncols: i32, flag: i32, scale: f32, neg: bool) {
    static_assert(B >= 16, "block too small");
    static_assert(B % 16 == 0);
    let row = program_id(0);
    let cols = arange(0, B);
    let mut acc = zeros([B], f32);
    let mut mx = full([B], f32::NEG_INFINITY, f32);
    let mut cnt = 0;
    let mut first = -1.0;
    let mut odd = zeros([B], f32);
    for start in (0..ncols).step_by(B) {
        let c = start + cols;
        let v = load(x + row * ncols + c, c < ncols, 0.0);
        acc = acc + v;
        mx = maximum(mx, select(c < ncols, v, f32::NEG_INFINITY));
        // `if` inside the loop, on the induction variable and on a carried scalar
        if start == 0 {
            first = sum(v, 0);
        }
        if cnt % 2 == 1 {
            odd = odd + v;
        }
        cnt += 1;
    }
    let mut k2 = 0;
    for i in range(0, 10, 3) {
        k2 = k2 + i;
    }
    let mut k3 = 0;
    for i in 1..=4 {
        k3 += i * i;
    }
    let mut nested = 0;
    for i in 0..3 {
        for j in 0..i {
            nested += 10 * i + j;
        }
    }
    let mut total = sum(acc, 0);
    let mut tile = acc;
    if flag > 0 {
        total = total * scale;
        tile = tile * 2.0;
    } else if flag < 0 {
        total = -total;
    } else {
        total = total + 1.0;
        tile = zeros_like(acc);
    }
    if DOUBLE {
        total = total * 2.0;
    }
    if neg {
        total = total - 1000.0;
    }
    store(out + row * 4, total);
    store(out + row * 4 + 1, max(mx, axis = 0));
    store(out + row * 4 + 2, sum(tile, 0));
    store(out + row * 4 + 3, (cdiv(ncols, B) * B) as f32);
    let i4 = arange(0, 8);
    let iv = select(
        i4 == 0,
        cnt,
        select(i4 == 1, k2, select(i4 == 2, k3, select(i4 == 3, cdiv(ncols, B), select(i4 == 4, nested, select(i4 == 5, first as i32, sum(odd, 0) as i32))))),
    );
    store(iout + row * 8 + i4, iv);
}

pub fn control_flow(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(m, ncols, b) in &[(1usize, 0usize, 16i32), (3, 1, 16), (4, 100, 32), (2, 1000, 64), (5, 4097, 256), (3, 64, 64)] {
        for flag in [-2, 0, 5] {
            for double in [false, true] {
                let neg = rng.chance(0.5);
                let scale = rng.pick(&[0.5f32, 2.0, -3.0, 1.25]);
                let c = Ctx::new("control_flow", seed, format!("{m}x{ncols} B={b} flag={flag} DOUBLE={double} neg={neg} scale={scale}"));
                let xs: Vec<f32> = (0..m * ncols).map(|_| rng.int(-50, 50) as f32).collect();
                let mut out = poisoned::<f32>(dev, m * 4 + PAD)?;
                let mut iout = poisoned::<i32>(dev, m * 8 + PAD)?;
                c.launch(k_control::launch(dev, m as u32, &upload(dev, &xs)?, &mut out, &mut iout, ncols as i32, flag, scale, neg, b, double))?;
                let mut wf = vec![];
                let mut wi = vec![];
                let chunks = ncols.div_ceil(b as usize) as i32;
                for r in 0..m {
                    let row = &xs[r * ncols..(r + 1) * ncols];
                    let s: f64 = row.iter().map(|&v| v as f64).sum();
                    let mx = row.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
                    let (mut total, tile) = match flag {
                        f if f > 0 => (s * scale as f64, s * 2.0),
                        f if f < 0 => (-s, s),
                        _ => (s + 1.0, 0.0),
                    };
                    if double {
                        total *= 2.0;
                    }
                    if neg {
                        total -= 1000.0;
                    }
                    wf.extend([total, mx, tile, (chunks * b) as f64]);
                    let first = if ncols == 0 { -1 } else { row[..(b as usize).min(ncols)].iter().sum::<f32>() as i32 };
                    let odd: f32 = row.chunks(b as usize).skip(1).step_by(2).flatten().sum();
                    wi.extend([chunks, 18, 30, chunks, 10 + 20 + 21, first, odd as i32, odd as i32]);
                }
                check_float_exact(&c, "out", &download(&out)?, &wf, &|i| format!("row {}, slot {} (total, max, tile sum, cdiv*B)", i / 4, i % 4))?;
                check_eq(&c, "iout", &download(&iout)?, &wi, &|i| {
                    format!("row {}, slot {} (chunks, k2, k3, cdiv, nested, first chunk, odd chunks)", i / 8, i % 8)
                })?;
            }
        }
    }
    Ok(())
}

/// cdiv on tiles of positive integers.
#[kernel]
pub fn k_cdiv<const B: i32>(x: Ptr<i32>, y: Ptr<i32>, out: Ptr<i32>, n: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    store(out + offs, cdiv(load(x + offs, m), load(y + offs, m, 1)), m);
}

pub fn cdiv_tiles(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let c = Ctx::new("cdiv", seed, format!("i32 n={n} B={b}"));
        let xs: Vec<i32> = (0..n).map(|_| rng.int(0, 1 << 20) as i32).collect();
        let ys: Vec<i32> = (0..n).map(|_| rng.int(1, 1000) as i32).collect();
        let mut out = poisoned::<i32>(dev, n + PAD)?;
        c.launch(k_cdiv::launch(dev, cdiv(n, b as usize) as u32, &upload(dev, &xs)?, &upload(dev, &ys)?, &mut out, n as i32, b))?;
        let want: Vec<i32> = xs.iter().zip(&ys).map(|(&a, &d)| (a + d - 1) / d).collect();
        check_eq(&c, "cdiv(x, y)", &download(&out)?, &want, &|i| format!("x={} y={}", xs[i], ys[i]))?;
    }
    Ok(())
}

/// `print` of scalars and tiles runs (output is not checked) and the kernel
/// still computes.
#[kernel]
pub fn k_print<const B: i32>(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, B);
    let v = load(x + offs);
    print("conformance print: pid, tile, sum =", program_id(0), v, sum(v, 0));
    store(y + offs, v + 1.0);
}

pub fn print_runs(dev: &Device, seed: u64) -> R {
    let c = Ctx::new("print", seed, "f32 B=4");
    let xs = [1.0f32, 2.0, 3.5, -4.0];
    let mut y = poisoned::<f32>(dev, 4 + PAD)?;
    c.launch(k_print::launch(dev, 1, &upload(dev, &xs)?, &mut y, 4))?;
    check_float_exact(&c, "y", &download(&y)?, &[2.0, 3.0, 4.5, -3.0], &no_inputs)
}

/// A dtype-generic kernel computing in f32 and storing in T, the way library
/// kernels do (`softmax`-like row normalization).
#[kernel]
pub fn k_generic_norm<T: Float, const B: i32>(x: Ptr<T>, y: Ptr<T>, ncols: i32) {
    let row = program_id(0) as i64;
    let cols = arange(0, B);
    let mask = cols < ncols;
    let v = load(x + row * (ncols as i64) + cols, mask, T::NEG_INFINITY) as f32;
    let mxv = max(v, axis = 0);
    let e = exp(v - mxv);
    let s = sum(e, 0);
    store(y + row * (ncols as i64) + cols, (e / s) as T, mask);
}

fn generic_norm_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(rows, ncols, b) in &[(1usize, 1usize, 16i32), (3, 17, 32), (7, 1000, 1024), (2, 64, 64)] {
        let c = Ctx::new("generic_softmax", seed, format!("{} {rows}x{ncols} B={b}", T::NAME));
        let xs: Vec<T> = (0..rows * ncols).map(|_| T::round(rng.normal() * 3.0)).collect();
        let mut y = poisoned::<T>(dev, rows * ncols + PAD)?;
        c.launch(k_generic_norm::launch(dev, rows as u32, &upload(dev, &xs)?, &mut y, ncols as i32, b))?;
        let mut want = vec![];
        for r in 0..rows {
            let row: Vec<f64> = xs[r * ncols..(r + 1) * ncols].iter().map(|v| v.to_f64()).collect();
            let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = row.iter().map(|v| (v - mx).exp()).sum();
            want.extend(row.iter().map(|v| (v - mx).exp() / s));
        }
        // f32 intermediates: 1e-5 relative (plus 1 ulp of T for f16/bf16).
        check_float(&c, "softmax", &download(&y)?, &want, 1, 1e-5, 1e-30, &|i| format!("row {}, col {}", i / ncols, i % ncols))?;
    }
    Ok(())
}

pub fn generic_softmax(dev: &Device, seed: u64) -> R {
    generic_norm_t::<f32>(dev, seed)?;
    generic_norm_t::<f16>(dev, seed ^ 1)?;
    generic_norm_t::<bf16>(dev, seed ^ 2)
}
