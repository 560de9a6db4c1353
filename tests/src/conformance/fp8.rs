//! 8-bit floats (`f8e4m3`, `f8e5m2`): the cast from f32 (nearest-even,
//! saturating to the largest finite value, NaN kept) on values of every
//! magnitude and on every tie between neighbouring codes; loads of every
//! code and the value they stand for; arithmetic on fp8 tiles rounded back
//! to the format after each op; integer → fp8; and `dot` of fp8 tiles into
//! f32 in tile sizes that take Hopper's `wgmma` (both operands K-major: B
//! through `trans` of a `[N, K]` block). Reference: `ferrotile_ir::numeric`'s
//! `fp8_encode` / `fp8_decode` (unit-tested against the format's own
//! definition there) and f64 products.

use super::util::*;
use ferrotile::ir::numeric::{fp8_decode, fp8_encode, Fp8};
use ferrotile::prelude::*;
use ferrotile::{f8e4m3, f8e5m2, DeviceKind, FloatElement};

macro_rules! fp8_el {
    ($t:ident, $name:literal) => {
        impl El for $t {
            const NAME: &'static str = $name;
            // (an ordinary code, as for the integers: a result equal to it
            // passes when the reference agrees)
            fn sentinel() -> Self {
                $t(0x5a)
            }
            fn is_sentinel(self) -> bool {
                self.0 == 0x5a
            }
        }
    };
}
fp8_el!(f8e4m3, "f8e4m3");
fp8_el!(f8e5m2, "f8e5m2");

#[kernel]
pub fn k_fp8_encode<T: Float, const B: i32>(x: Ptr<f32>, q: Ptr<T>, n: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    store(q + offs, load(x + offs, m, 0.0) as T, m);
}

/// Loads of codes and arithmetic on fp8 tiles (each result rounded to `T`).
#[kernel]
pub fn k_fp8_ops<T: Float, const B: i32>(a: Ptr<T>, b: Ptr<T>, dec: Ptr<f32>, prod: Ptr<T>, plus: Ptr<T>, from_int: Ptr<T>, n: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let ca = load(a + offs, m, 0.0);
    let cb = load(b + offs, m, 0.0);
    store(dec + offs, ca as f32, m);
    store(prod + offs, ca * cb, m);
    store(plus + offs, ca + 1.5, m);
    store(from_int + offs, (offs - 300) as T, m);
}

/// The dtypes by name: f32 → e4m3 → e5m2 → f32, and a constant tile.
#[kernel]
pub fn k_fp8_named<const B: i32>(x: Ptr<f32>, y: Ptr<f32>, c: Ptr<f8e4m3>, n: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let v = load(x + offs, m, 0.0) as f8e4m3;
    store(y + offs, (v as f8e5m2) as f32, m);
    store(c + offs, full([B], 2.7, f8e4m3) + zeros([B], f8e4m3), m);
}

/// `C = A·B` with A `[m, k]` and B given as `[n, k]` (read through
/// `trans`), f32 out.
#[kernel]
pub fn k_fp8_dot<T: Float, const BM: i32, const BN: i32, const BK: i32>(a: Ptr<T>, b: Ptr<T>, c: Ptr<f32>, m: i32, n: i32, k: i32) {
    let pm = program_id(0);
    let pn = program_id(1);
    let va = view(a, [m, k], [k, 1]);
    let vb = view(b, [n, k], [k, 1]);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        acc = dot(load_block(va, [pm * BM, k0], [BM, BK]), trans(load_block(vb, [pn * BN, k0], [BN, BK])), acc);
    }
    store_block(view(c, [m, n], [n, 1]), [pm * BM, pn * BN], acc);
}

trait Fp8El: El + FloatElement + Copy {
    const FMT: Fp8;
    fn code(self) -> u8;
    fn of(c: u8) -> Self;
}
impl Fp8El for f8e4m3 {
    const FMT: Fp8 = Fp8::E4M3;
    fn code(self) -> u8 {
        self.0
    }
    fn of(c: u8) -> Self {
        f8e4m3(c)
    }
}
impl Fp8El for f8e5m2 {
    const FMT: Fp8 = Fp8::E5M2;
    fn code(self) -> u8 {
        self.0
    }
    fn of(c: u8) -> Self {
        f8e5m2(c)
    }
}

/// Codes equal, or both NaN (a NaN's sign may differ between targets).
fn same_code<T: Fp8El>(g: T, want: u8) -> bool {
    let nan = |c: u8| fp8_decode(c, T::FMT).is_nan();
    g.code() == want || (nan(g.code()) && nan(want))
}

fn run<T: Fp8El>(dev: &Device, seed: u64) -> R {
    let f = T::FMT;
    let mut rng = Rng::new(seed);
    // encode: random bits of every exponent, the ties between neighbouring
    // codes and just off them, the saturation edge, the specials
    let mut xs: Vec<f32> = (0..2000).map(|_| f32::from_bits(rng.int(0, u32::MAX as i64) as u32)).filter(|x| !x.is_nan()).collect();
    let vals: Vec<f32> = (0..=127u8).map(|c| fp8_decode(c, f)).filter(|v| v.is_finite()).collect();
    for w in vals.windows(2) {
        let mid = ((w[0] as f64 + w[1] as f64) / 2.0) as f32;
        for x in [mid, f32::from_bits(mid.to_bits() + 1), f32::from_bits(mid.to_bits().saturating_sub(1)), w[0], w[1]] {
            xs.extend([x, -x]);
        }
    }
    let max = f32::from_bits(f.max_bits());
    xs.extend([max * 1.02, -max * 1.07, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 0.0, -0.0, 1e-40, f32::MIN_POSITIVE, 1e30]);
    let n = xs.len();
    let c = Ctx::new("fp8", seed, format!("{}: f32 → fp8, n={n}", T::NAME));
    let mut q = poisoned::<T>(dev, n + PAD)?;
    c.launch(k_fp8_encode::launch(dev, cdiv(n, 256) as u32, &upload(dev, &xs)?, &mut q, n as i32, 256))?;
    let want: Vec<u8> = xs.iter().map(|&x| fp8_encode(x, f)).collect();
    check_with(&c, "x as fp8 (code)", &download(&q)?, &want, |_, g, &w| same_code(g, w), &|i| format!("x = {:e} ({:#010x})", xs[i], xs[i].to_bits()))?;
    check_pad(&c, "x as fp8", &download(&q)?, n)?;

    // every code (and random pairs) through loads and arithmetic
    let n = 1000;
    let a: Vec<u8> = (0..n).map(|i| if i < 256 { i as u8 } else { rng.int(0, 255) as u8 }).collect();
    let b: Vec<u8> = (0..n).map(|_| rng.int(0, 255) as u8).collect();
    let c = Ctx::new("fp8", seed, format!("{}: loads, a·b, a + 1.5, i32 → fp8, n={n}", T::NAME));
    let up = |v: &[u8]| upload(dev, &v.iter().map(|&x| T::of(x)).collect::<Vec<T>>());
    let (mut dec, mut prod, mut plus, mut fi) =
        (poisoned::<f32>(dev, n + PAD)?, poisoned::<T>(dev, n + PAD)?, poisoned::<T>(dev, n + PAD)?, poisoned::<T>(dev, n + PAD)?);
    c.launch(k_fp8_ops::launch(dev, cdiv(n, 128) as u32, &up(&a)?, &up(&b)?, &mut dec, &mut prod, &mut plus, &mut fi, n as i32, 128))?;
    let d = |x: u8| fp8_decode(x, f);
    let inp = |i: usize| format!("a = {:#04x} ({}), b = {:#04x} ({})", a[i], d(a[i]), b[i], d(b[i]));
    let want_dec: Vec<f32> = a.iter().map(|&x| d(x)).collect();
    check_with(&c, "a as f32", &download(&dec)?, &want_dec, |_, g: f32, &w: &f32| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), &inp)?;
    // (products of two fp8 values and sums with 1.5 are exact in f32: one rounding)
    let want: Vec<u8> = (0..n).map(|i| fp8_encode(d(a[i]) * d(b[i]), f)).collect();
    check_with(&c, "a * b", &download(&prod)?, &want, |_, g, &w| same_code(g, w), &inp)?;
    let want: Vec<u8> = (0..n).map(|i| fp8_encode(d(a[i]) + 1.5, f)).collect();
    check_with(&c, "a + 1.5", &download(&plus)?, &want, |_, g, &w| same_code(g, w), &inp)?;
    let want: Vec<u8> = (0..n).map(|i| fp8_encode(i as f32 - 300.0, f)).collect();
    check_with(&c, "(i - 300) as fp8", &download(&fi)?, &want, |_, g, &w| same_code(g, w), &|i| format!("i = {i}"))?;

    // dot in wgmma-sized tiles (small ones elsewhere)
    let shapes: &[(usize, usize, usize, i32, i32, i32, u32)] = if dev.kind() == DeviceKind::Cuda {
        &[(100, 90, 300, 64, 64, 128, 4), (130, 200, 520, 128, 128, 128, 8), (64, 48, 256, 64, 16, 256, 4)]
    } else {
        &[(20, 18, 70, 16, 16, 32, 4)]
    };
    for &(m, nn, k, bm, bn, bk, warps) in shapes {
        let c = Ctx::new("fp8", seed, format!("{}: dot {m}x{k} · {k}x{nn} BM={bm} BN={bn} BK={bk} warps={warps}", T::NAME));
        // (finite codes of moderate size: the products' sum is what is checked)
        let code = |rng: &mut Rng| loop {
            let x = rng.int(0, 255) as u8;
            if d(x).is_finite() && d(x).abs() <= 16.0 {
                return x;
            }
        };
        let av: Vec<u8> = (0..m * k).map(|_| code(&mut rng)).collect();
        let bv: Vec<u8> = (0..nn * k).map(|_| code(&mut rng)).collect();
        let mut out = poisoned::<f32>(dev, m * nn + PAD)?;
        let cfg = LaunchConfig::new([cdiv(m, bm as usize) as u32, cdiv(nn, bn as usize) as u32, 1]).num_warps(warps).num_stages(3);
        c.launch(k_fp8_dot::launch(dev, cfg, &up(&av)?, &up(&bv)?, &mut out, m as i32, nn as i32, k as i32, bm, bn, bk))?;
        let mut want = vec![0.0f64; m * nn];
        let mut mag = vec![0.0f64; m * nn];
        for i in 0..m {
            for j in 0..nn {
                for l in 0..k {
                    let p = d(av[i * k + l]) as f64 * d(bv[j * k + l]) as f64;
                    want[i * nn + j] += p;
                    mag[i * nn + j] += p.abs();
                }
            }
        }
        // (Hopper's tensor cores add fp8 products keeping about 14 bits:
        // 2⁻¹³ of the terms' magnitude per 32-deep step; f32 elsewhere)
        let got = download(&out)?;
        let steps = k.div_ceil(32) as f64;
        check_with(&c, "C = A·Bᵀ", &got[..m * nn], &want, |i, g: f32, &w: &f64| (g as f64 - w).abs() <= mag[i] * steps / 8192.0 + 1e-6, &|i| {
            format!("C[{}][{}]", i / nn, i % nn)
        })?;
        check_pad(&c, "C", &got, m * nn)?;
    }
    Ok(())
}

pub fn fp8(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed ^ 7);
    let n = 500;
    let c = Ctx::new("fp8", seed, format!("dtypes by name: f32 → f8e4m3 → f8e5m2 → f32, constants, n={n}"));
    let xs: Vec<f32> = (0..n).map(|_| (rng.normal() * 2f64.powi(rng.int(-12, 10) as i32)) as f32).collect();
    let (mut y, mut k) = (poisoned::<f32>(dev, n + PAD)?, poisoned::<f8e4m3>(dev, n + PAD)?);
    c.launch(k_fp8_named::launch(dev, cdiv(n, 128) as u32, &upload(dev, &xs)?, &mut y, &mut k, n as i32, 128))?;
    let want: Vec<f32> = xs.iter().map(|&x| fp8_decode(fp8_encode(fp8_decode(fp8_encode(x, Fp8::E4M3), Fp8::E4M3), Fp8::E5M2), Fp8::E5M2)).collect();
    check_with(&c, "(x as f8e4m3) as f8e5m2", &download(&y)?, &want, |_, g: f32, &w: &f32| g.to_bits() == w.to_bits(), &|i| format!("x = {:e}", xs[i]))?;
    // (2.7 is not an e4m3 value: the constant is its nearest, 2.75)
    let want: Vec<u8> = vec![fp8_encode(2.7, Fp8::E4M3); n];
    check_with(&c, "full(2.7) + zeros", &download(&k)?, &want, |_, g: f8e4m3, &w| g.0 == w, &|_| String::new())?;
    run::<f8e4m3>(dev, seed)?;
    run::<f8e5m2>(dev, seed ^ 1)
}
