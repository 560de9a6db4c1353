//! Run-time faults, with one semantics on every backend
//! (`ferrotile_ir::passes::guard`, `docs/semantics.md`):
//!
//! - an unmasked out-of-bounds load reads `other` (0 without one), an
//!   out-of-bounds store or `atomic_add` writes nothing;
//! - a view that does not lie in its buffer is empty (reads 0, writes
//!   nothing) — also where a TMA copy would read it on Hopper;
//! - a loop whose step is ≤ 0 runs zero iterations, and a loop runs its
//!   trip count even where `iv + step` would overflow;
//! - integer `x / 0 = x`, `x % 0 = 0`, `MIN / -1 = MIN`, `MIN % -1 = 0`;
//!
//! and a checked launch reports each fault as `Error::Fault` naming the
//! kernel, the source line and the buffer.

use super::util::*;
use ferrotile::prelude::*;

/// The 1-based line of this file that contains `needle` (where a fault must
/// be reported).
fn line_of(needle: &str) -> u32 {
    let src = include_str!("safety.rs");
    src.lines().position(|l| l.contains(needle) && !l.contains("line_of(")).map_or(0, |i| i as u32 + 1)
}

/// A checked launch must fail with `Error::Fault` from `kernel`, at the
/// line containing `at`, with a message containing `needle`.
fn expect_fault(c: &Ctx, r: ferrotile::Result<()>, kernel: &str, at: &str, needle: &str) -> R {
    match r {
        Ok(()) => Err(c.err(format!("checked launch of `{kernel}` succeeded; expected a fault ({needle})"))),
        Err(ferrotile::Error::Fault { kernel: k, file, line, msg }) => {
            let want = line_of(at);
            if k != kernel || line != want || !file.ends_with("safety.rs") || !msg.contains(needle) {
                return Err(c.err(format!("fault `{msg}` from `{k}` at {file}:{line}; expected `{kernel}` at line {want} mentioning `{needle}`")));
            }
            Ok(())
        }
        Err(e) => Err(c.err(format!("expected Error::Fault ({needle}) from `{kernel}`, got another error: {e}"))),
    }
}

fn safe(g: u32) -> LaunchConfig {
    LaunchConfig::from(g).checked(false)
}

fn checked(g: u32) -> LaunchConfig {
    LaunchConfig::from(g).checked(true)
}

#[kernel]
pub fn k_oob_load<const B: i32>(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = program_id(0) * B + arange(0, B);
    store(y + offs, load(x + offs) * 2.0); // fault: oob load
}

#[kernel]
pub fn k_oob_other<const B: i32>(x: Ptr<f32>, y: Ptr<f32>, bound: i32) {
    let offs = program_id(0) * B + arange(0, B);
    store(y + offs, load(x + offs, offs < bound, 7.0));
}

#[kernel]
pub fn k_oob_store<const B: i32>(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = program_id(0) * B + arange(0, B);
    store(y + offs, load(x + offs)); // fault: oob store
}

#[kernel]
pub fn k_oob_neg<const B: i32>(x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, B) - 1;
    store(y + arange(0, B), load(x + offs)); // fault: negative offset
}

#[kernel]
pub fn k_oob_atomic<const B: i32>(y: Ptr<i32>) {
    let offs = program_id(0) * B + arange(0, B);
    atomic_add(y + offs, full([B], 1, i32)); // fault: oob atomic
}

#[kernel]
pub fn k_oob_scalar(x: Ptr<i32>, y: Ptr<i32>, i: i32) {
    store(y + program_id(0), load(x + i) + 1); // fault: scalar load
}

/// Unmasked accesses past either end of a buffer: defined results, or a
/// fault from a checked launch.
pub fn out_of_bounds(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let b = 64usize;
    let n = 1 + rng.below(200) as usize;
    let g = (n + 1 + rng.below(100) as usize).div_ceil(b);
    let c = Ctx::new("out_of_bounds", seed, format!("n={n} grid={g} B={b}"));
    let xs: Vec<f32> = (0..n).map(|_| rand_float(&mut rng, false)).collect();
    let x = upload(dev, &xs)?;
    // load past the end: 0
    let mut y = poisoned::<f32>(dev, g * b + PAD)?;
    c.launch(k_oob_load::launch(dev, safe(g as u32), &x, &mut y, 64))?;
    let want: Vec<f64> = (0..g * b).map(|i| if i < n { (xs[i] * 2.0) as f64 } else { 0.0 }).collect();
    check_float_exact(&c, "2x, 0 past the end", &download(&y)?, &want, &no_inputs)?;
    expect_fault(&c, k_oob_load::launch(dev, checked(g as u32), &x, &mut y, 64), "k_oob_load", "fault: oob load", "out-of-bounds load from `x`")?;
    // masked with `other`, the mask true past the end: `other`
    let mut y = poisoned::<f32>(dev, g * b + PAD)?;
    c.launch(k_oob_other::launch(dev, checked(g as u32), &x, &mut y, (n + 5) as i32, 64)).or_else(|e| {
        // (a checked launch reports the lanes the mask lets through)
        if e.contains("out-of-bounds load from `x`") {
            Ok(())
        } else {
            Err(e)
        }
    })?;
    c.launch(k_oob_other::launch(dev, safe(g as u32), &x, &mut y, (n + 5) as i32, 64))?;
    let want: Vec<f64> = (0..g * b).map(|i| if i < n { xs[i] as f64 } else { 7.0 }).collect();
    check_float_exact(&c, "x, other past the end", &download(&y)?, &want, &no_inputs)?;
    // store past the end: nothing written (the device keeps running)
    let m = 1 + rng.below((g * b - 1) as u64) as usize;
    let xl: Vec<f32> = (0..g * b).map(|i| i as f32).collect();
    let xl = upload(dev, &xl)?;
    let mut ys = poisoned::<f32>(dev, m)?;
    c.launch(k_oob_store::launch(dev, safe(g as u32), &xl, &mut ys, 64))?;
    let want: Vec<f64> = (0..m).map(|i| i as f64).collect();
    check_float_exact(&c, "store within the buffer", &download(&ys)?, &want, &no_inputs)?;
    expect_fault(&c, k_oob_store::launch(dev, checked(g as u32), &xl, &mut ys, 64), "k_oob_store", "fault: oob store", "out-of-bounds store to `y`")?;
    // a negative offset
    let mut yn = poisoned::<f32>(dev, b + PAD)?;
    let xb = upload(dev, &(0..b).map(|i| 1.0 + i as f32).collect::<Vec<f32>>())?;
    c.launch(k_oob_neg::launch(dev, safe(1), &xb, &mut yn, 64))?;
    let want: Vec<f64> = (0..b).map(|i| i as f64).collect();
    check_float_exact(&c, "x[i - 1], 0 before the start", &download(&yn)?, &want, &no_inputs)?;
    expect_fault(&c, k_oob_neg::launch(dev, checked(1), &xb, &mut yn, 64), "k_oob_neg", "fault: negative offset", "out-of-bounds load from `x`")?;
    // atomics past the end
    let mut ya = dev.full(m, 10i32).map_err(|e| c.err(e))?;
    c.launch(k_oob_atomic::launch(dev, safe(g as u32), &mut ya, 64))?;
    check_eq(&c, "atomic_add within the buffer", &download(&ya)?, &vec![11i32; m], &no_inputs)?;
    expect_fault(&c, k_oob_atomic::launch(dev, checked(g as u32), &mut ya, 64), "k_oob_atomic", "fault: oob atomic", "out-of-bounds atomic_add to `y`")?;
    // a scalar access, in bounds and not
    let xi = upload(dev, &[5i32, 6, 7])?;
    let mut yi = poisoned::<i32>(dev, 2 + PAD)?;
    c.launch(k_oob_scalar::launch(dev, safe(1), &xi, &mut yi, 2))?;
    let mut yj = poisoned::<i32>(dev, 1)?;
    c.launch(k_oob_scalar::launch(dev, safe(1), &xi, &mut yj, 3))?;
    let (gi, gj) = (download(&yi)?, download(&yj)?);
    if gi[0] != 8 || gj[0] != 1 {
        return Err(c.err(format!("scalar loads: x[2] + 1 = {}, want 8; x[3] + 1 = {}, want 1 (x[3] reads 0)", gi[0], gj[0])));
    }
    expect_fault(&c, k_oob_scalar::launch(dev, checked(1), &xi, &mut yj, -1), "k_oob_scalar", "fault: scalar load", "out-of-bounds load from `x`")?;
    // in-bounds checked launches succeed
    let xn = upload(dev, &vec![1.5f32; g * b])?;
    let mut yg = poisoned::<f32>(dev, g * b + PAD)?;
    c.launch(k_oob_load::launch(dev, checked(g as u32), &xn, &mut yg, 64))?;
    check_float_exact(&c, "checked, in bounds", &download(&yg)?, &vec![3.0; g * b], &no_inputs)
}

#[kernel]
pub fn k_view_outside<const BM: i32, const BN: i32>(x: Ptr<f32>, y: Ptr<f32>, m: i32, n: i32, ld: i32) {
    let vx = view(x, [m, n], [ld, 1]); // fault: view of x
    let vy = view(y, [m, n], [ld, 1]);
    let pm = program_id(0) * BM;
    let pn = program_id(1) * BN;
    let t = load_block(vx, [pm, pn], [BM, BN]);
    store_block(vy, [pm, pn], t + 1.0);
}

/// A GEMM through views (tensor-core operands: TMA copies on Hopper, whose
/// extents the host checks against the buffers).
#[kernel]
pub fn k_view_dot<const BM: i32, const BN: i32, const BK: i32>(a: Ptr<bf16>, b: Ptr<bf16>, c: Ptr<f32>, m: i32, n: i32, k: i32) {
    let va = view(a, [m, k], [k, 1]); // fault: view of a
    let vb = view(b, [k, n], [n, 1]);
    let pm = program_id(0) * BM;
    let pn = program_id(1) * BN;
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        acc = dot(load_block(va, [pm, k0], [BM, BK]), load_block(vb, [k0, pn], [BK, BN]), acc);
    }
    let rm = pm + arange(0, BM);
    let rn = pn + arange(0, BN);
    store(c + expand_dims(rm, 1) * n + expand_dims(rn, 0), acc, expand_dims(rm < m, 1) & expand_dims(rn < n, 0));
}

/// Views that do not fit their buffers are empty.
pub fn views_outside(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let (m, n) = (1 + rng.below(40) as usize, 1 + rng.below(40) as usize);
    let ld = n + rng.below(3) as usize;
    let full = (m - 1) * ld + n;
    let c = Ctx::new("views_outside", seed, format!("{m}x{n} ld={ld}"));
    let xs: Vec<f32> = (0..full).map(|i| i as f32).collect();
    let g = (m.div_ceil(16) as u32, n.div_ceil(16) as u32);
    // fits: y = x + 1 inside the view
    let x = upload(dev, &xs)?;
    let mut y = poisoned::<f32>(dev, full)?;
    c.launch(k_view_outside::launch(dev, LaunchConfig::from(g).checked(true), &x, &mut y, m as i32, n as i32, ld as i32, 16, 16))?;
    let got = download(&y)?;
    for r in 0..m {
        for j in 0..n {
            if got[r * ld + j] != xs[r * ld + j] + 1.0 {
                return Err(c.err(format!("y[{r}][{j}] = {}, want {}", got[r * ld + j], xs[r * ld + j] + 1.0)));
            }
        }
    }
    // x one element short: x's view is empty (reads 0)
    let short = upload(dev, &xs[..full - 1])?;
    let mut y = poisoned::<f32>(dev, full)?;
    c.launch(k_view_outside::launch(dev, LaunchConfig::from(g).checked(false), &short, &mut y, m as i32, n as i32, ld as i32, 16, 16))?;
    let got = download(&y)?;
    if let Some(i) = (0..m).flat_map(|r| (0..n).map(move |j| r * ld + j)).find(|&i| got[i] != 1.0) {
        return Err(c.err(format!("y[{i}] = {} from a view of a too-short x; want 1 (the view reads as empty)", got[i])));
    }
    expect_fault(
        &c,
        k_view_outside::launch(dev, LaunchConfig::from(g).checked(true), &short, &mut y, m as i32, n as i32, ld as i32, 16, 16),
        "k_view_outside",
        "fault: view of x",
        "a view of `x`",
    )?;
    // y one element short: nothing written
    let mut y = poisoned::<f32>(dev, full - 1)?;
    c.launch(k_view_outside::launch(dev, LaunchConfig::from(g).checked(false), &x, &mut y, m as i32, n as i32, ld as i32, 16, 16))?;
    if let Some((i, v)) = download(&y)?.iter().enumerate().find(|(_, v)| !v.is_sentinel()) {
        return Err(c.err(format!("y[{i}] = {v} written through a view that does not fit y")));
    }
    // a GEMM through views, A one element short: C = 0
    let (mm, nn, kk) = (64 + rng.below(64) as usize, 64 + 8 * rng.below(8) as usize, 64 + 8 * rng.below(8) as usize);
    let a: Vec<bf16> = (0..mm * kk).map(|i| bf16::from_f32((i % 7) as f32)).collect();
    let b: Vec<bf16> = (0..kk * nn).map(|i| bf16::from_f32((i % 5) as f32 - 2.0)).collect();
    let gg = (mm.div_ceil(64) as u32, nn.div_ceil(64) as u32);
    let (da, db) = (upload(dev, &a)?, upload(dev, &b)?);
    let mut out = poisoned::<f32>(dev, mm * nn)?;
    c.launch(k_view_dot::launch(dev, LaunchConfig::from(gg).checked(true), &da, &db, &mut out, mm as i32, nn as i32, kk as i32, 64, 64, 32))?;
    let got = download(&out)?;
    for (i, j) in [(0, 0), (mm - 1, nn - 1), (mm / 2, nn / 3)] {
        let want: f32 = (0..kk).map(|l| a[i * kk + l].to_f32() * b[l * nn + j].to_f32()).sum();
        if got[i * nn + j] != want {
            return Err(c.err(format!("view GEMM C[{i}][{j}] = {}, want {want}", got[i * nn + j])));
        }
    }
    let da = upload(dev, &a[..mm * kk - 1])?;
    let mut out = poisoned::<f32>(dev, mm * nn)?;
    c.launch(k_view_dot::launch(dev, LaunchConfig::from(gg).checked(false), &da, &db, &mut out, mm as i32, nn as i32, kk as i32, 64, 64, 32))?;
    if let Some((i, v)) = download(&out)?.iter().enumerate().find(|(_, v)| **v != 0.0) {
        return Err(c.err(format!("view GEMM with A one element short: C[{i}] = {v}, want 0 (A's view is empty)")));
    }
    let mut out = poisoned::<f32>(dev, mm * nn)?;
    expect_fault(
        &c,
        k_view_dot::launch(dev, LaunchConfig::from(gg).checked(true), &da, &db, &mut out, mm as i32, nn as i32, kk as i32, 64, 64, 32),
        "k_view_dot",
        "fault: view of a",
        "a view of `a`",
    )
}

#[kernel]
pub fn k_loop_trips(out: Ptr<i32>, lo: i32, hi: i32, step: i32) {
    let mut trips = 0;
    let mut last = -1;
    for i in (lo..hi).step_by(step) {
        trips += 1;
        last = i;
    }
    store(out + arange(0, 2), select(arange(0, 2) == 0, trips, last));
}

/// Loops run their trip count; a step ≤ 0 runs zero iterations.
pub fn loop_steps(dev: &Device, seed: u64) -> R {
    let c = Ctx::new("loop_steps", seed, "lo, hi, step");
    let max = i32::MAX;
    for (lo, hi, step, trips, last) in [
        (5, 100, 7, 14, 96),
        (0, 0, 1, 0, -1),
        (3, 1, 1, 0, -1),
        (max - 10, max, 7, 2, max - 3),
        (max - 1, max, max, 1, max - 1),
        (i32::MIN, max, 1 << 30, 4, 1 << 30),
        (0, 10, 0, 0, -1),
        (0, 10, -2, 0, -1),
    ] {
        let mut out = poisoned::<i32>(dev, 2 + PAD)?;
        c.launch(k_loop_trips::launch(dev, safe(1), &mut out, lo, hi, step))?;
        let got = download(&out)?;
        if got[0] != trips || got[1] != last {
            return Err(c.err(format!("for i in ({lo}..{hi}).step_by({step}): {} trips, last {}; want {trips}, {last}", got[0], got[1])));
        }
        check_pad(&c, "out", &got, 2)?;
        let r = k_loop_trips::launch(dev, checked(1), &mut out, lo, hi, step);
        if step <= 0 {
            expect_fault(&c, r, "k_loop_trips", "for i in (lo..hi).step_by(step)", "loop step was not positive")?;
        } else {
            c.launch(r)?;
        }
    }
    Ok(())
}

#[kernel]
pub fn k_divrem_i32<const B: i32>(x: Ptr<i32>, y: Ptr<i32>, q: Ptr<i32>, r: Ptr<i32>, n: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let a = load(x + offs, m);
    let b = load(y + offs, m, 1);
    store(q + offs, a / b, m);
    store(r + offs, a % b, m);
}

#[kernel]
pub fn k_divrem_i64<const B: i32>(x: Ptr<i64>, y: Ptr<i64>, q: Ptr<i64>, r: Ptr<i64>, n: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let a = load(x + offs, m);
    let b = load(y + offs, m, 1);
    store(q + offs, a / b, m);
    store(r + offs, a % b, m);
}

#[kernel]
pub fn k_divrem_u8<const B: i32>(x: Ptr<u8>, y: Ptr<u8>, q: Ptr<u8>, r: Ptr<u8>, n: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let a = load(x + offs, m);
    let b = load(y + offs, m, 1);
    store(q + offs, a / b, m);
    store(r + offs, a % b, m);
}

fn divrem_t<T: Int + ferrotile::Element + PartialEq>(
    dev: &Device,
    seed: u64,
    launch: impl Fn(&Device, u32, &Buffer<T>, &Buffer<T>, &mut Buffer<T>, &mut Buffer<T>, i32) -> ferrotile::Result<()>,
) -> R {
    let mut rng = Rng::new(seed);
    let n = 1 + rng.below(300) as usize;
    let c = Ctx::new("int_div_by_zero", seed, format!("{} n={n}", T::NAME));
    let mut xs: Vec<T> = (0..n).map(|_| rand_int(&mut rng)).collect();
    let mut ys: Vec<T> = (0..n).map(|_| rand_int(&mut rng)).collect();
    // zeros, -1s against MIN, and ordinary values
    for i in 0..n {
        match rng.below(4) {
            0 => ys[i] = T::wrap(0),
            1 if T::SIGNED => {
                ys[i] = T::wrap(-1);
                if rng.chance(0.5) {
                    xs[i] = T::wrap(T::MIN);
                }
            }
            _ => {}
        }
    }
    let (x, y) = (upload(dev, &xs)?, upload(dev, &ys)?);
    let (mut q, mut r) = (poisoned::<T>(dev, n + PAD)?, poisoned::<T>(dev, n + PAD)?);
    c.launch(launch(dev, n.div_ceil(64) as u32, &x, &y, &mut q, &mut r, n as i32))?;
    let wq: Vec<T> = xs.iter().zip(&ys).map(|(a, b)| if b.to_i64() == 0 { *a } else { T::wrap(a.to_i64().wrapping_div(b.to_i64())) }).collect();
    let wr: Vec<T> = xs.iter().zip(&ys).map(|(a, b)| if b.to_i64() == 0 { T::wrap(0) } else { T::wrap(a.to_i64().wrapping_rem(b.to_i64())) }).collect();
    let inputs = |i: usize| format!("x={:?} y={:?}", xs[i], ys[i]);
    check_eq(&c, "x / y", &download(&q)?, &wq, &inputs)?;
    check_eq(&c, "x % y", &download(&r)?, &wr, &inputs)
}

/// Integer division and remainder by zero and MIN / -1, defined everywhere.
pub fn int_div_by_zero(dev: &Device, seed: u64) -> R {
    divrem_t::<i32>(dev, seed, |d, g, x, y, q, r, n| k_divrem_i32::launch(d, g, x, y, q, r, n, 64))?;
    divrem_t::<i64>(dev, seed ^ 1, |d, g, x, y, q, r, n| k_divrem_i64::launch(d, g, x, y, q, r, n, 64))?;
    divrem_t::<u8>(dev, seed ^ 2, |d, g, x, y, q, r, n| k_divrem_u8::launch(d, g, x, y, q, r, n, 64))
}
