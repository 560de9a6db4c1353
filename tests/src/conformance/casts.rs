//! Casts between every pair of dtypes (bool, i8, u8, i32, u32, i64, f16,
//! bf16, f32). Reference: Rust `as` (integers wrap, floats truncate and
//! saturate, NaN → 0), `!= 0` for bool, and correct nearest-even rounding
//! into floats (the `half` crate's f32 → f16/bf16 conversion; integer and
//! f64 sources through round-to-odd so nothing is rounded twice).

use super::util::*;
use ferrotile::prelude::*;

/// The value of one host element, whatever its type.
#[derive(Clone, Copy, Debug)]
pub enum Src {
    I(i64),
    F(f64),
    B(bool),
}

/// Round an i64 to f32 toward zero with a sticky last bit (round-to-odd):
/// exact input for one final nearest-even rounding to f16/bf16.
fn i64_to_f32_odd(v: i64) -> f32 {
    let a = v.unsigned_abs();
    let bits = 64 - a.leading_zeros();
    let r = if bits <= 24 {
        a as f32
    } else {
        let shift = bits - 24;
        let mut kept = a >> shift;
        if a & ((1u64 << shift) - 1) != 0 {
            kept |= 1;
        }
        kept as f32 * (shift as f32).exp2()
    };
    if v < 0 {
        -r
    } else {
        r
    }
}

fn to_f16(s: Src) -> f16 {
    match s {
        Src::I(v) => f16::from_f32(i64_to_f32_odd(v)),
        Src::F(v) => f16::from_f32(f64_to_f32_odd(v)),
        Src::B(b) => f16::from_f32(b as u8 as f32),
    }
}
fn to_bf16(s: Src) -> bf16 {
    match s {
        Src::I(v) => bf16::from_f32(i64_to_f32_odd(v)),
        Src::F(v) => bf16::from_f32(f64_to_f32_odd(v)),
        Src::B(b) => bf16::from_f32(b as u8 as f32),
    }
}
fn to_f32(s: Src) -> f32 {
    match s {
        Src::I(v) => v as f32,
        Src::F(v) => v as f32,
        Src::B(b) => b as u8 as f32,
    }
}
macro_rules! to_int {
    ($f:ident, $t:ty) => {
        fn $f(s: Src) -> $t {
            match s {
                Src::I(v) => v as $t,
                Src::F(v) => v as $t,
                Src::B(b) => b as $t,
            }
        }
    };
}
to_int!(to_i8, i8);
to_int!(to_u8, u8);
to_int!(to_i32, i32);
to_int!(to_u32, u32);
to_int!(to_i64, i64);
fn to_bool(s: Src) -> bool {
    match s {
        Src::I(v) => v != 0,
        Src::F(v) => v != 0.0,
        Src::B(b) => b,
    }
}

macro_rules! cast_kernel {
    ($k:ident, $s:ident) => {
        /// One source dtype cast to every dtype (bool stored as u8).
        #[kernel]
        pub fn $k<const B: i32>(
            x: Ptr<$s>,
            o_b: Ptr<u8>,
            o_i8: Ptr<i8>,
            o_u8: Ptr<u8>,
            o_i32: Ptr<i32>,
            o_u32: Ptr<u32>,
            o_i64: Ptr<i64>,
            o_f16: Ptr<f16>,
            o_bf16: Ptr<bf16>,
            o_f32: Ptr<f32>,
            n: i32,
        ) {
            let offs = program_id(0) * B + arange(0, B);
            let m = offs < n;
            let v = load(x + offs, m);
            store(o_b + offs, select(v as bool, 1, 0) as u8, m);
            store(o_i8 + offs, v as i8, m);
            store(o_u8 + offs, cast(v, u8), m);
            store(o_i32 + offs, v as i32, m);
            store(o_u32 + offs, v.to(u32), m);
            store(o_i64 + offs, v as i64, m);
            store(o_f16 + offs, v as f16, m);
            store(o_bf16 + offs, cast(v, bf16), m);
            store(o_f32 + offs, v.to(f32), m);
        }
    };
}
cast_kernel!(k_cast_i8, i8);
cast_kernel!(k_cast_u8, u8);
cast_kernel!(k_cast_i32, i32);
cast_kernel!(k_cast_u32, u32);
cast_kernel!(k_cast_i64, i64);
cast_kernel!(k_cast_f16, f16);
cast_kernel!(k_cast_bf16, bf16);
cast_kernel!(k_cast_f32, f32);

/// Bool source: `x != 0` of a u8 tile, cast to every dtype.
#[kernel]
pub fn k_cast_bool<const B: i32>(
    x: Ptr<u8>,
    o_b: Ptr<u8>,
    o_i8: Ptr<i8>,
    o_u8: Ptr<u8>,
    o_i32: Ptr<i32>,
    o_u32: Ptr<u32>,
    o_i64: Ptr<i64>,
    o_f16: Ptr<f16>,
    o_bf16: Ptr<bf16>,
    o_f32: Ptr<f32>,
    n: i32,
) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let v = load(x + offs, m) != 0;
    store(o_b + offs, select(v as bool, 1, 0) as u8, m);
    store(o_i8 + offs, v as i8, m);
    store(o_u8 + offs, cast(v, u8), m);
    store(o_i32 + offs, v as i32, m);
    store(o_u32 + offs, v.to(u32), m);
    store(o_i64 + offs, v as i64, m);
    store(o_f16 + offs, v as f16, m);
    store(o_bf16 + offs, cast(v, bf16), m);
    store(o_f32 + offs, v.to(f32), m);
}

/// Integers that sit one unit above/below a rounding midpoint of f16/bf16/
/// f32 (a double rounding through a wider float gets these wrong), plus
/// the edges of every integer type.
fn int_edges(rng: &mut Rng, bits: u32, signed: bool) -> i64 {
    let top = if signed { bits - 2 } else { bits - 1 };
    let mant = rng.pick(&[7u32, 10, 23]);
    if top <= mant + 1 {
        return rng.int(-3, 3);
    }
    let k = rng.int((mant + 2) as i64, top as i64) as u32;
    let base = (1i64 << k) + (1i64 << (k - mant - 1));
    let v = base + rng.pick(&[-1, 0, 1]);
    if signed && rng.chance(0.5) {
        -v
    } else {
        v
    }
}

fn float_edges(rng: &mut Rng) -> f64 {
    rng.pick(&[
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -0.99,
        127.9,
        128.0,
        -128.5,
        -129.0,
        255.9,
        256.0,
        -1.0,
        2147483520.0,
        2147483648.0,
        -2147483648.0,
        -2147483904.0,
        4294967040.0,
        4294967296.0,
        9.2233715e18,
        9.223_372_036_854_776e18,
        -9.223_372_036_854_776e18,
        1e20,
        -1e20,
        65504.0,
        65519.99,
        65520.0,
        1.0 + 2f64.powi(-11),
        1.0 + 2f64.powi(-11) + 2f64.powi(-23),
        1.0 + 2f64.powi(-8),
        1.0 + 2f64.powi(-8) + 2f64.powi(-23),
        -(1.0 + 2f64.powi(-8) + 2f64.powi(-23)),
        3.0e-8,
        6.0e-5,
        1.0e-40,
        3.3e38,
    ])
}

type CastOuts = (Vec<u8>, Vec<i8>, Vec<u8>, Vec<i32>, Vec<u32>, Vec<i64>, Vec<f16>, Vec<bf16>, Vec<f32>);

#[allow(clippy::type_complexity)]
type CastLaunch<S> = fn(
    &Device,
    u32,
    &Buffer<S>,
    &mut Buffer<u8>,
    &mut Buffer<i8>,
    &mut Buffer<u8>,
    &mut Buffer<i32>,
    &mut Buffer<u32>,
    &mut Buffer<i64>,
    &mut Buffer<f16>,
    &mut Buffer<bf16>,
    &mut Buffer<f32>,
    i32,
    i32,
) -> ferrotile::Result<()>;

fn run_cast<S: El>(dev: &Device, c: &Ctx, xs: &[S], n: usize, b: i32, launch: CastLaunch<S>) -> Result<CastOuts, String> {
    let x = upload(dev, xs)?;
    let l = n + PAD;
    let mut ob = poisoned::<u8>(dev, l)?;
    let mut oi8 = poisoned::<i8>(dev, l)?;
    let mut ou8 = poisoned::<u8>(dev, l)?;
    let mut oi32 = poisoned::<i32>(dev, l)?;
    let mut ou32 = poisoned::<u32>(dev, l)?;
    let mut oi64 = poisoned::<i64>(dev, l)?;
    let mut of16 = poisoned::<f16>(dev, l)?;
    let mut obf16 = poisoned::<bf16>(dev, l)?;
    let mut of32 = poisoned::<f32>(dev, l)?;
    c.launch(launch(
        dev,
        cdiv(n, b as usize) as u32,
        &x,
        &mut ob,
        &mut oi8,
        &mut ou8,
        &mut oi32,
        &mut ou32,
        &mut oi64,
        &mut of16,
        &mut obf16,
        &mut of32,
        n as i32,
        b,
    ))?;
    Ok((
        download(&ob)?,
        download(&oi8)?,
        download(&ou8)?,
        download(&oi32)?,
        download(&ou32)?,
        download(&oi64)?,
        download(&of16)?,
        download(&obf16)?,
        download(&of32)?,
    ))
}

fn check_cast(c: &Ctx, src: &[Src], got: &CastOuts) -> R {
    let inp = |i: usize| format!("x={:?}", src[i]);
    let from = &c.what;
    let w = |f: &dyn Fn(Src) -> f64| -> Vec<f64> { src.iter().map(|s| f(*s)).collect() };
    check_eq(c, &format!("{from} -> bool"), &got.0, &src.iter().map(|s| to_bool(*s) as u8).collect::<Vec<_>>(), &inp)?;
    check_eq(c, &format!("{from} -> i8"), &got.1, &src.iter().map(|s| to_i8(*s)).collect::<Vec<_>>(), &inp)?;
    check_eq(c, &format!("{from} -> u8"), &got.2, &src.iter().map(|s| to_u8(*s)).collect::<Vec<_>>(), &inp)?;
    check_eq(c, &format!("{from} -> i32"), &got.3, &src.iter().map(|s| to_i32(*s)).collect::<Vec<_>>(), &inp)?;
    check_eq(c, &format!("{from} -> u32"), &got.4, &src.iter().map(|s| to_u32(*s)).collect::<Vec<_>>(), &inp)?;
    check_eq(c, &format!("{from} -> i64"), &got.5, &src.iter().map(|s| to_i64(*s)).collect::<Vec<_>>(), &inp)?;
    check_float_exact(c, &format!("{from} -> f16"), &got.6, &w(&|s| to_f16(s).to_f64()), &inp)?;
    check_float_exact(c, &format!("{from} -> bf16"), &got.7, &w(&|s| to_bf16(s).to_f64()), &inp)?;
    check_float_exact(c, &format!("{from} -> f32"), &got.8, &w(&|s| to_f32(s) as f64), &inp)
}

fn cast_int<S: Int>(dev: &Device, seed: u64, launch: CastLaunch<S>) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let c = Ctx::new("casts", seed, format!("{} n={n} B={b}", S::NAME));
        let xs: Vec<S> = (0..n).map(|_| if rng.chance(0.3) { S::wrap(int_edges(&mut rng, S::BITS, S::SIGNED)) } else { rand_int(&mut rng) }).collect();
        let got = run_cast(dev, &c, &xs, n, b, launch)?;
        let src: Vec<Src> = xs.iter().map(|v| Src::I(v.to_i64())).collect();
        check_cast(&Ctx::new("casts", seed, S::NAME), &src, &got).map_err(|e| format!("{e} (n={n}, B={b})"))?;
    }
    Ok(())
}

fn cast_float<S: Flt>(dev: &Device, seed: u64, launch: CastLaunch<S>) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let c = Ctx::new("casts", seed, format!("{} n={n} B={b}", S::NAME));
        let xs: Vec<S> = (0..n)
            .map(|_| if rng.chance(0.3) { S::round(float_edges(&mut rng)) } else { S::round(rng.normal() * 10f64.powf(rng.range(-3.0, 12.0))) })
            .collect();
        let got = run_cast(dev, &c, &xs, n, b, launch)?;
        let src: Vec<Src> = xs.iter().map(|v| Src::F(v.to_f64())).collect();
        check_cast(&Ctx::new("casts", seed, S::NAME), &src, &got).map_err(|e| format!("{e} (n={n}, B={b})"))?;
    }
    Ok(())
}

fn cast_bool(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let c = Ctx::new("casts", seed, format!("bool n={n} B={b}"));
        let xs: Vec<u8> = (0..n).map(|_| if rng.chance(0.5) { 0 } else { rng.int(1, 255) as u8 }).collect();
        let got = run_cast(dev, &c, &xs, n, b, k_cast_bool::launch)?;
        let src: Vec<Src> = xs.iter().map(|&v| Src::B(v != 0)).collect();
        check_cast(&Ctx::new("casts", seed, "bool"), &src, &got).map_err(|e| format!("{e} (n={n}, B={b})"))?;
    }
    Ok(())
}

pub fn casts(dev: &Device, seed: u64) -> R {
    cast_bool(dev, seed)?;
    cast_int::<i8>(dev, seed ^ 1, k_cast_i8::launch)?;
    cast_int::<u8>(dev, seed ^ 2, k_cast_u8::launch)?;
    cast_int::<i32>(dev, seed ^ 3, k_cast_i32::launch)?;
    cast_int::<u32>(dev, seed ^ 4, k_cast_u32::launch)?;
    cast_int::<i64>(dev, seed ^ 5, k_cast_i64::launch)?;
    cast_float::<f16>(dev, seed ^ 6, k_cast_f16::launch)?;
    cast_float::<bf16>(dev, seed ^ 7, k_cast_bf16::launch)?;
    cast_float::<f32>(dev, seed ^ 8, k_cast_f32::launch)
}

/// Two dtype parameters: `x as U` and `(x as f32 * 3) as U`.
#[kernel]
pub fn k_generic_cast<T: Float, U: Float, const B: i32>(x: Ptr<T>, y: Ptr<U>, z: Ptr<U>, n: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let v = load(x + offs, m);
    store(y + offs, v as U, m);
    store(z + offs, ((v as f32) * 3.0) as U, m);
}

fn generic_cast_tu<T: Flt, U: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in &SIZES_1D[..4] {
        let c = Ctx::new("generic_cast", seed, format!("{} -> {} n={n} B={b}", T::NAME, U::NAME));
        let xs: Vec<T> = (0..n).map(|_| if rng.chance(0.2) { T::round(float_edges(&mut rng)) } else { rand_float(&mut rng, true) }).collect();
        let mut y = poisoned::<U>(dev, n + PAD)?;
        let mut z = poisoned::<U>(dev, n + PAD)?;
        c.launch(k_generic_cast::launch(dev, cdiv(n, b as usize) as u32, &upload(dev, &xs)?, &mut y, &mut z, n as i32, b))?;
        let inp = |i: usize| format!("x={:?}", xs[i]);
        let wy: Vec<f64> = xs.iter().map(|v| U::round(v.to_f64()).to_f64()).collect();
        check_float_exact(&c, "x as U", &download(&y)?, &wy, &inp)?;
        let wz: Vec<f64> = xs.iter().map(|v| U::round((v.to_f64() as f32 * 3.0) as f64).to_f64()).collect();
        check_float_exact(&c, "(x as f32 * 3.0) as U", &download(&z)?, &wz, &inp)?;
    }
    Ok(())
}

pub fn generic_cast(dev: &Device, seed: u64) -> R {
    generic_cast_tu::<f32, f16>(dev, seed)?;
    generic_cast_tu::<f32, bf16>(dev, seed ^ 1)?;
    generic_cast_tu::<f16, bf16>(dev, seed ^ 2)?;
    generic_cast_tu::<bf16, f16>(dev, seed ^ 3)?;
    generic_cast_tu::<f16, f32>(dev, seed ^ 4)?;
    generic_cast_tu::<bf16, bf16>(dev, seed ^ 5)
}

/// `bitcast` between the 32-bit dtypes: f32 bits read as i32 and u32, i32
/// bits (of finite normal floats) read as f32, the exponent trick
/// `bitcast((q & 15) | 0x4B000000, f32) − 2²³ = q`, and a scalar.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn k_bitcast<const B: i32>(xf: Ptr<f32>, xi: Ptr<i32>, o_fi: Ptr<i32>, o_fu: Ptr<u32>, o_if: Ptr<f32>, o_magic: Ptr<f32>, o_s: Ptr<i32>, v: f32, n: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let f = load(xf + offs, m, 0.0);
    let i = load(xi + offs, m, 0);
    store(o_fi + offs, bitcast(f, i32), m);
    store(o_fu + offs, bitcast(f, u32), m);
    store(o_if + offs, bitcast((i & 0x3F7FFFFF) | 0x00800000, f32), m);
    store(o_magic + offs, bitcast((i & 15) | 0x4B000000, f32) - 8388608.0, m);
    store(o_s + program_id(0), bitcast(v, i32));
}

pub fn bitcast(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let v: f32 = rand_float(&mut rng, false);
        let c = Ctx::new("bitcast", seed, format!("n={n} B={b} v={v}"));
        let fs: Vec<f32> = (0..n).map(|_| rand_float::<f32>(&mut rng, false)).collect();
        let is: Vec<i32> = (0..n).map(|_| rand_int::<i32>(&mut rng)).collect();
        let (xf, xi) = (upload(dev, &fs)?, upload(dev, &is)?);
        let grid = cdiv(n, b as usize).max(1);
        let mut o_fi = poisoned::<i32>(dev, n + PAD)?;
        let mut o_fu = poisoned::<u32>(dev, n + PAD)?;
        let mut o_if = poisoned::<f32>(dev, n + PAD)?;
        let mut o_mg = poisoned::<f32>(dev, n + PAD)?;
        let mut o_s = poisoned::<i32>(dev, grid)?;
        c.launch(k_bitcast::launch(dev, grid as u32, &xf, &xi, &mut o_fi, &mut o_fu, &mut o_if, &mut o_mg, &mut o_s, v, n as i32, b))?;
        let inputs = |i: usize| format!("f={:?} ({:#x}) i={:#x}", fs[i], fs[i].to_bits(), is[i]);
        let got = download(&o_fi)?;
        check_eq(&c, "bitcast(f, i32)", &got[..n], &fs.iter().map(|x| x.to_bits() as i32).collect::<Vec<_>>(), &inputs)?;
        check_pad(&c, "bitcast(f, i32)", &got, n)?;
        check_eq(&c, "bitcast(f, u32)", &download(&o_fu)?[..n], &fs.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), &inputs)?;
        let want_if: Vec<f64> = is.iter().map(|&x| f32::from_bits(((x & 0x3F7F_FFFF) | 0x0080_0000) as u32) as f64).collect();
        check_float_exact(&c, "bitcast(i, f32)", &download(&o_if)?[..n], &want_if, &inputs)?;
        check_float_exact(
            &c,
            "bitcast((i & 15) | 2^23 bits, f32) - 2^23",
            &download(&o_mg)?[..n],
            &is.iter().map(|&x| (x & 15) as f64).collect::<Vec<_>>(),
            &inputs,
        )?;
        check_eq(&c, "bitcast(v, i32) (scalar)", &download(&o_s)?, &vec![v.to_bits() as i32; grid], &no_inputs)?;
    }
    Ok(())
}
