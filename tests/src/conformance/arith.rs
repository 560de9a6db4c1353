//! Elementwise arithmetic: integer ops of every integer dtype (wrapping,
//! truncating division, shifts past the width), float ops of f32/f16/bf16
//! (each op rounded to the dtype), comparisons, logical ops, select, the
//! transcendental functions, maximum/minimum with NaN and fma.

use super::util::*;
use ferrotile::prelude::*;

// ---------------------------------------------------------------- ints

/// Native-Rust reference semantics of the integer ops (tile.rs module docs).
pub trait IntRef: Int + PartialOrd {
    fn add(self, b: Self) -> Self;
    fn sub(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    fn div(self, b: Self) -> Self;
    fn rem(self, b: Self) -> Self;
    fn and(self, b: Self) -> Self;
    fn or(self, b: Self) -> Self;
    fn xor(self, b: Self) -> Self;
    fn not(self) -> Self;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    /// Shift by `s` (of the same type): amounts outside 0..BITS shift
    /// everything out: 0, or -1 for right shifts of negative signed values.
    fn shl(self, s: Self) -> Self;
    fn shr(self, s: Self) -> Self;
    fn is_neg(self) -> bool;
}

macro_rules! int_ref {
    ($t:ty, $signed:expr) => {
        impl IntRef for $t {
            fn add(self, b: Self) -> Self {
                self.wrapping_add(b)
            }
            fn sub(self, b: Self) -> Self {
                self.wrapping_sub(b)
            }
            fn mul(self, b: Self) -> Self {
                self.wrapping_mul(b)
            }
            fn div(self, b: Self) -> Self {
                self.wrapping_div(b)
            }
            fn rem(self, b: Self) -> Self {
                self.wrapping_rem(b)
            }
            fn and(self, b: Self) -> Self {
                self & b
            }
            fn or(self, b: Self) -> Self {
                self | b
            }
            fn xor(self, b: Self) -> Self {
                self ^ b
            }
            fn not(self) -> Self {
                !self
            }
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            #[allow(unused_comparisons)]
            fn abs(self) -> Self {
                if self < 0 as $t {
                    self.wrapping_neg()
                } else {
                    self
                }
            }
            #[allow(unused_comparisons)]
            fn shl(self, s: Self) -> Self {
                if s < 0 as $t || (s as i64) >= <$t>::BITS as i64 {
                    0
                } else {
                    self << (s as u32)
                }
            }
            #[allow(unused_comparisons)]
            fn shr(self, s: Self) -> Self {
                if s < 0 as $t || (s as i64) >= <$t>::BITS as i64 {
                    if self.is_neg() {
                        !0
                    } else {
                        0
                    }
                } else {
                    self >> (s as u32)
                }
            }
            #[allow(unused_comparisons)]
            fn is_neg(self) -> bool {
                self < 0 as $t
            }
        }
    };
}
int_ref!(i8, true);
int_ref!(u8, false);
int_ref!(i32, true);
int_ref!(u32, false);
int_ref!(i64, true);

const INT_OPS: &[&str] = &[
    "a + b",
    "a - b",
    "a * b",
    "a / d",
    "a % d",
    "a & b",
    "a | b",
    "a ^ b",
    "a << s",
    "a >> s",
    "maximum(a, b)",
    "minimum(a, b)",
    "-a",
    "!a",
    "abs(a)",
    "a * 3 + 5",
    "compound (+= *= -= ^= /= %=)",
    "a / 8",
    "a % 8",
    "a / 7",
    "a % 5",
];
const CMP_OPS: &[&str] = &["a == b", "a != b", "a < b", "a <= b", "a > b", "a >= b", "a >= 1 (weak literal)"];

macro_rules! int_ops_kernel {
    ($k:ident, $t:ident) => {
        /// Every integer op on one dtype; results go to segment `k` (stride
        /// `st`) of `out`, comparisons (as u8) to segments of `cmp`.
        #[kernel]
        pub fn $k<const B: i32>(x: Ptr<$t>, y: Ptr<$t>, d: Ptr<$t>, s: Ptr<$t>, out: Ptr<$t>, cmp: Ptr<u8>, n: i32, st: i32) {
            let offs = program_id(0) * B + arange(0, B);
            let m = offs < n;
            let a = load(x + offs, m);
            let b = load(y + offs, m);
            // divisors are never 0, in masked-off lanes neither
            let dv = load(d + offs, m, 1);
            let sh = load(s + offs, m);
            store(out + offs, a + b, m);
            store(out + st + offs, a - b, m);
            store(out + 2 * st + offs, a * b, m);
            store(out + 3 * st + offs, a / dv, m);
            store(out + 4 * st + offs, a % dv, m);
            store(out + 5 * st + offs, a & b, m);
            store(out + 6 * st + offs, a | b, m);
            store(out + 7 * st + offs, a ^ b, m);
            store(out + 8 * st + offs, a << sh, m);
            store(out + 9 * st + offs, a >> sh, m);
            store(out + 10 * st + offs, maximum(a, b), m);
            store(out + 11 * st + offs, minimum(a, b), m);
            store(out + 12 * st + offs, -a, m);
            store(out + 13 * st + offs, !a, m);
            store(out + 14 * st + offs, abs(a), m);
            store(out + 15 * st + offs, a * 3 + 5, m);
            let mut acc = a;
            acc += b;
            acc *= b;
            acc -= 1;
            acc ^= b;
            acc /= dv;
            acc %= dv;
            store(out + 16 * st + offs, acc, m);
            // constant divisors (a shift for powers of two on PTX)
            store(out + 17 * st + offs, a / 8, m);
            store(out + 18 * st + offs, a % 8, m);
            store(out + 19 * st + offs, a / 7, m);
            store(out + 20 * st + offs, a % 5, m);
            store(cmp + offs, (a == b) as u8, m);
            store(cmp + st + offs, (a != b) as u8, m);
            store(cmp + 2 * st + offs, (a < b) as u8, m);
            store(cmp + 3 * st + offs, (a <= b) as u8, m);
            store(cmp + 4 * st + offs, (a > b) as u8, m);
            store(cmp + 5 * st + offs, (a >= b) as u8, m);
            store(cmp + 6 * st + offs, (a >= 1) as u8, m);
        }
    };
}
int_ops_kernel!(k_int_ops_i8, i8);
int_ops_kernel!(k_int_ops_u8, u8);
int_ops_kernel!(k_int_ops_i32, i32);
int_ops_kernel!(k_int_ops_u32, u32);
int_ops_kernel!(k_int_ops_i64, i64);

fn int_want<T: IntRef>(a: T, b: T, d: T, s: T) -> Vec<T> {
    let mut acc = a.add(b);
    acc = acc.mul(b);
    acc = acc.sub(T::wrap(1));
    acc = acc.xor(b);
    acc = acc.div(d);
    acc = acc.rem(d);
    vec![
        a.add(b),
        a.sub(b),
        a.mul(b),
        a.div(d),
        a.rem(d),
        a.and(b),
        a.or(b),
        a.xor(b),
        a.shl(s),
        a.shr(s),
        if a >= b { a } else { b },
        if a <= b { a } else { b },
        a.neg(),
        a.not(),
        a.abs(),
        a.mul(T::wrap(3)).add(T::wrap(5)),
        acc,
        a.div(T::wrap(8)),
        a.rem(T::wrap(8)),
        a.div(T::wrap(7)),
        a.rem(T::wrap(5)),
    ]
}

fn int_cmp_want<T: IntRef>(a: T, b: T) -> Vec<u8> {
    [a == b, a != b, a < b, a <= b, a > b, a >= b, a >= T::wrap(1)].iter().map(|&c| c as u8).collect()
}

/// Shift amounts: mostly in range, often at or past the width, negative for signed.
fn rand_shift<T: Int>(rng: &mut Rng) -> T {
    let w = T::BITS as i64;
    let v = match rng.below(6) {
        0 => rng.int(w, (2 * w).min(T::MAX)),
        1 if T::SIGNED => rng.int(-w, -1),
        2 => rng.pick(&[0, w - 1, w, T::MAX]),
        _ => rng.int(0, w - 1),
    };
    T::wrap(v)
}

type IntLaunch<T> = fn(&Device, u32, &Buffer<T>, &Buffer<T>, &Buffer<T>, &Buffer<T>, &mut Buffer<T>, &mut Buffer<u8>, i32, i32, i32) -> ferrotile::Result<()>;

fn int_ops_t<T: IntRef + std::fmt::Display>(dev: &Device, seed: u64, launch: IntLaunch<T>) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let c = Ctx::new("int_ops", seed, format!("{} n={n} B={b}", T::NAME));
        let xs: Vec<T> = (0..n).map(|_| rand_int(&mut rng)).collect();
        let ys: Vec<T> = (0..n).map(|i| if rng.chance(0.1) { xs[i] } else { rand_int(&mut rng) }).collect();
        let ds: Vec<T> = (0..n)
            .map(|_| loop {
                let v: T = if rng.chance(0.2) { T::wrap(rng.pick(&[-1, 1, 2, -2, 3, 7])) } else { rand_int(&mut rng) };
                if v.to_i64() != 0 {
                    break v;
                }
            })
            .collect();
        let ss: Vec<T> = (0..n).map(|_| rand_shift(&mut rng)).collect();
        let (x, y, d, s) = (upload(dev, &xs)?, upload(dev, &ys)?, upload(dev, &ds)?, upload(dev, &ss)?);
        let st = n + PAD;
        let mut out = poisoned::<T>(dev, st * INT_OPS.len())?;
        let mut cmp = poisoned::<u8>(dev, st * CMP_OPS.len())?;
        c.launch(launch(dev, cdiv(n, b as usize) as u32, &x, &y, &d, &s, &mut out, &mut cmp, n as i32, st as i32, b))?;
        let got = download(&out)?;
        let gotc = download(&cmp)?;
        let wants: Vec<Vec<T>> = (0..n).map(|i| int_want(xs[i], ys[i], ds[i], ss[i])).collect();
        let inp = |i: usize| format!("a={} b={} d={} s={}", xs[i], ys[i], ds[i], ss[i]);
        for (k, op) in INT_OPS.iter().enumerate() {
            let want: Vec<T> = wants.iter().map(|w| w[k]).collect();
            check_eq(&c, op, &got[k * st..(k + 1) * st], &want, &inp)?;
        }
        for (k, op) in CMP_OPS.iter().enumerate() {
            let want: Vec<u8> = (0..n).map(|i| int_cmp_want(xs[i], ys[i])[k]).collect();
            check_eq(&c, op, &gotc[k * st..(k + 1) * st], &want, &inp)?;
        }
    }
    Ok(())
}

pub fn int_ops(dev: &Device, seed: u64) -> R {
    int_ops_t::<i8>(dev, seed, k_int_ops_i8::launch)?;
    int_ops_t::<u8>(dev, seed ^ 1, k_int_ops_u8::launch)?;
    int_ops_t::<i32>(dev, seed ^ 2, k_int_ops_i32::launch)?;
    int_ops_t::<u32>(dev, seed ^ 3, k_int_ops_u32::launch)?;
    int_ops_t::<i64>(dev, seed ^ 4, k_int_ops_i64::launch)
}

/// Bool tiles: && || ! ^ & | == != < and select on bools.
#[kernel]
pub fn k_logical<const B: i32>(x: Ptr<i32>, y: Ptr<i32>, out: Ptr<u8>, n: i32, st: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let p = load(x + offs, m) > 0;
    let q = load(y + offs, m) > 0;
    store(out + offs, (p && q) as u8, m);
    store(out + st + offs, (p || q) as u8, m);
    store(out + 2 * st + offs, (!p) as u8, m);
    store(out + 3 * st + offs, (p ^ q) as u8, m);
    store(out + 4 * st + offs, ((p & !q) | (!p & q)) as u8, m);
    store(out + 5 * st + offs, (p == q) as u8, m);
    store(out + 6 * st + offs, (p != q) as u8, m);
    store(out + 7 * st + offs, (p < q) as u8, m);
    store(out + 8 * st + offs, select(p, q, !q) as u8, m);
    store(out + 9 * st + offs, (p && true || false) as u8, m);
    // any / all of the program's lanes (masked lanes count as false / true)
    let pm = p & m;
    let pa = p | !m;
    store(out + 10 * st + offs, max(pm, axis = 0) as u8, m);
    store(out + 11 * st + offs, min(pa, axis = 0).to(u8), m);
}

pub fn logical(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let names = [
        "p && q",
        "p || q",
        "!p",
        "p ^ q",
        "(p & !q) | (!p & q)",
        "p == q",
        "p != q",
        "p < q",
        "select(p, q, !q)",
        "p && true || false",
        "max(p, axis = 0) (any)",
        "min(p, axis = 0) (all)",
    ];
    for &(n, b) in SIZES_1D {
        let c = Ctx::new("logical", seed, format!("bool n={n} B={b}"));
        let xs: Vec<i32> = (0..n).map(|_| rng.int(-3, 3) as i32).collect();
        let ys: Vec<i32> = (0..n).map(|_| rng.int(-3, 3) as i32).collect();
        let st = n + PAD;
        let mut out = poisoned::<u8>(dev, st * names.len())?;
        c.launch(k_logical::launch(dev, cdiv(n, b as usize) as u32, &upload(dev, &xs)?, &upload(dev, &ys)?, &mut out, n as i32, st as i32, b))?;
        let got = download(&out)?;
        for (k, name) in names.iter().enumerate() {
            let want: Vec<u8> = (0..n)
                .map(|i| {
                    let (p, q) = (xs[i] > 0, ys[i] > 0);
                    (match k {
                        0 => p && q,
                        1 => p || q,
                        2 => !p,
                        3 => p ^ q,
                        4 => (p & !q) | (!p & q),
                        5 => p == q,
                        6 => p != q,
                        7 => !p & q,
                        8 => {
                            if p {
                                q
                            } else {
                                !q
                            }
                        }
                        9 => p,
                        _ => {
                            let blk = i / b as usize;
                            let lanes = blk * b as usize..((blk + 1) * b as usize).min(n);
                            if k == 10 {
                                lanes.clone().any(|j| xs[j] > 0)
                            } else {
                                lanes.clone().all(|j| xs[j] > 0)
                            }
                        }
                    }) as u8
                })
                .collect();
            check_eq(&c, name, &got[k * st..(k + 1) * st], &want, &|i| format!("p={} q={}", xs[i] > 0, ys[i] > 0))?;
        }
    }
    Ok(())
}

// -------------------------------------------------------------- floats

const FLOAT_OPS: &[&str] = &[
    "a + b",
    "a - b",
    "a * b",
    "a / b",
    "maximum(a, b)",
    "minimum(a, b)",
    "-a",
    "abs(a)",
    "floor(a)",
    "ceil(a)",
    "a * 0.1 + 1.0 (weak literals)",
    "select(a > b, a, c)",
    "where(a < 0, b, 2.5)",
    "compound (+= *= -= /=)",
    "1.0 - a",
    "a * 1.0004882812509095 (f16 halfway + tiny)",
    "a * 1.0039062500009095 (bf16 halfway + tiny)",
    "c.abs().sqrt()",
    "round(a) (ties to even)",
];
const FLOAT_CMP: &[&str] = &["a == b", "a != b", "a < b", "a <= b", "a > b", "a >= b", "a > 0 (weak int)", "a != a"];

/// Every elementwise float op of one dtype parameter; `fma` separately
/// (it may be rounded twice for f16/bf16, so it gets 1 ulp).
#[kernel]
pub fn k_float_ops<T: Float, const B: i32>(x: Ptr<T>, y: Ptr<T>, z: Ptr<T>, out: Ptr<T>, o_fma: Ptr<T>, cmp: Ptr<u8>, n: i32, st: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    let a = load(x + offs, m);
    let b = load(y + offs, m);
    let c = load(z + offs, m);
    store(out + offs, a + b, m);
    store(out + st + offs, a - b, m);
    store(out + 2 * st + offs, a * b, m);
    store(out + 3 * st + offs, a / b, m);
    store(out + 4 * st + offs, maximum(a, b), m);
    store(out + 5 * st + offs, minimum(a, b), m);
    store(out + 6 * st + offs, -a, m);
    store(out + 7 * st + offs, abs(a), m);
    store(out + 8 * st + offs, floor(a), m);
    store(out + 9 * st + offs, a.ceil(), m);
    store(out + 10 * st + offs, a * 0.1 + 1.0, m);
    store(out + 11 * st + offs, select(a > b, a, c), m);
    store(out + 12 * st + offs, r#where(a < 0.0, b, 2.5), m);
    let mut acc = a;
    acc += b;
    acc *= c;
    acc -= 0.5;
    acc /= b;
    store(out + 13 * st + offs, acc, m);
    store(out + 14 * st + offs, 1.0 - a, m);
    store(out + 15 * st + offs, a * 1.0004882812509095, m);
    store(out + 16 * st + offs, a * 1.0039062500009095, m);
    store(out + 17 * st + offs, c.abs().sqrt(), m);
    store(out + 18 * st + offs, round(a), m);
    store(o_fma + offs, fma(a, b, c), m);
    store(cmp + offs, (a == b) as u8, m);
    store(cmp + st + offs, (a != b) as u8, m);
    store(cmp + 2 * st + offs, (a < b) as u8, m);
    store(cmp + 3 * st + offs, (a <= b) as u8, m);
    store(cmp + 4 * st + offs, (a > b) as u8, m);
    store(cmp + 5 * st + offs, (a >= b) as u8, m);
    store(cmp + 6 * st + offs, (a > 0) as u8, m);
    store(cmp + 7 * st + offs, (a != a) as u8, m);
}

fn float_want<T: Flt>(a: f64, b: f64, c: f64) -> Vec<f64> {
    let r = |x: f64| T::round(x).to_f64();
    let max = |a: f64, b: f64| {
        if a.is_nan() {
            b
        } else if b.is_nan() {
            a
        } else {
            a.max(b)
        }
    };
    let min = |a: f64, b: f64| {
        if a.is_nan() {
            b
        } else if b.is_nan() {
            a
        } else {
            a.min(b)
        }
    };
    let mut acc = r(a + b);
    acc = r(acc * c);
    acc = r(acc - 0.5);
    acc = r(acc / b);
    vec![
        r(a + b),
        r(a - b),
        r(a * b),
        r(a / b),
        max(a, b),
        min(a, b),
        -a,
        a.abs(),
        a.floor(),
        a.ceil(),
        r(r(a * r(0.1)) + 1.0),
        if a > b { a } else { c },
        if a < 0.0 { b } else { r(2.5) },
        acc,
        r(1.0 - a),
        r(a * r(1.0004882812509095)),
        r(a * r(1.0039062500009095)),
        r(c.abs().sqrt()),
        a.round_ties_even(),
    ]
}

fn float_ops_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    for &(n, b) in SIZES_1D {
        let c = Ctx::new("float_ops", seed, format!("{} n={n} B={b}", T::NAME));
        let xs: Vec<T> = (0..n).map(|_| rand_float(&mut rng, true)).collect();
        let ys: Vec<T> = (0..n).map(|i| if rng.chance(0.1) { xs[i] } else { rand_float(&mut rng, true) }).collect();
        let mut zs: Vec<T> = (0..n).map(|_| rand_float(&mut rng, true)).collect();
        let (mut xs, mut ys) = (xs, ys);
        // NaN / infinity / signed-zero pairs, deterministically, when n allows
        let nan = f64::NAN;
        let inf = f64::INFINITY;
        let pairs = [(nan, 1.5), (-2.0, nan), (nan, nan), (inf, -inf), (inf, inf), (0.0, -0.0), (-inf, 3.0), (1.0, 0.0), (-1.0, 0.0), (0.0, 0.0)];
        for (i, &(p, q)) in pairs.iter().enumerate().take(n / 10) {
            xs[i] = T::from_f64(p);
            ys[i] = T::from_f64(q);
            zs[i] = T::from_f64(if i % 2 == 0 { nan } else { 1.0 });
        }
        // halfway values (round's ties go to even) after them
        for (i, &t) in [0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -7.5, 1024.5].iter().enumerate() {
            if n / 10 + i < n {
                xs[n / 10 + i] = T::from_f64(t);
            }
        }
        let st = n + PAD;
        let mut out = poisoned::<T>(dev, st * FLOAT_OPS.len())?;
        let mut o_fma = poisoned::<T>(dev, st)?;
        let mut cmp = poisoned::<u8>(dev, st * FLOAT_CMP.len())?;
        let cfg = LaunchConfig::new([cdiv(n, b as usize) as u32, 1, 1]).num_warps(rng.pick(&[1, 2, 4, 8]));
        c.launch(k_float_ops::launch(
            dev,
            cfg,
            &upload(dev, &xs)?,
            &upload(dev, &ys)?,
            &upload(dev, &zs)?,
            &mut out,
            &mut o_fma,
            &mut cmp,
            n as i32,
            st as i32,
            b,
        ))?;
        let got = download(&out)?;
        let (af, bf, cf): (Vec<f64>, Vec<f64>, Vec<f64>) =
            (xs.iter().map(|v| v.to_f64()).collect(), ys.iter().map(|v| v.to_f64()).collect(), zs.iter().map(|v| v.to_f64()).collect());
        let inp = |i: usize| format!("a={:?} b={:?} c={:?}", xs[i], ys[i], zs[i]);
        let wants: Vec<Vec<f64>> = (0..n).map(|i| float_want::<T>(af[i], bf[i], cf[i])).collect();
        let model = float_model();
        // the two outputs with a multiply followed by an add, evaluated with
        // the pair contracted into one fused operation
        let fused = |i: usize, k: usize| -> f64 {
            let r = |x: f64| T::round(x).to_f64();
            let f32r = |x: f64| x as f32 as f64; // the fused op rounds once in f32
            let (a, b, c) = (af[i], bf[i], cf[i]);
            match k {
                10 => r(f32r(a * r(0.1) + 1.0)),
                13 => r(r(f32r(r(a + b) * c - 0.5)) / b),
                _ => wants[i][k],
            }
        };
        for (k, op) in FLOAT_OPS.iter().enumerate() {
            let want: Vec<f64> = wants.iter().map(|w| w[k]).collect();
            if model.mul_add_may_contract && (k == 10 || k == 13) {
                check_with(
                    &c,
                    &format!("{op} (contracted or not)"),
                    &got[k * st..(k + 1) * st],
                    &want,
                    |i, g, &w| {
                        let gf = g.to_f64();
                        let wf = fused(i, k);
                        same_float(gf, w) || same_float(gf, wf) || ulps(g, T::round(wf)) <= 1
                    },
                    &inp,
                )?;
            } else if op.contains("sqrt") && model.sqrt_ulps > 0 {
                // f16/bf16: an f32 sqrt within a few f32 ulps, rounded once more
                let ulps = if T::MANT >= 23 { model.sqrt_ulps } else { 1 };
                check_float(&c, op, &got[k * st..(k + 1) * st], &want, ulps, 0.0, 0.0, &inp)?;
            } else {
                check_float_exact(&c, op, &got[k * st..(k + 1) * st], &want, &inp)?;
            }
        }
        // fma: within one ulp of the correctly rounded a*b+c (exact in f64
        // up to one rounding; a*b of two f32 is exact in f64).
        // (checked after the comparisons, so that a backend whose fma is not
        // fused — WGSL allows it — still has every other output verified)
        let want: Vec<f64> = (0..n).map(|i| af[i] * bf[i] + cf[i]).collect();
        let got_fma = download(&o_fma)?;
        let fma_result = if model.fma_may_be_unfused {
            // the fused result within 1 ulp, or a*b rounded to f32, then + c
            let unfused: Vec<f64> = (0..n).map(|i| ((af[i] * bf[i]) as f32 as f64 + cf[i]) as f32 as f64).collect();
            check_with(
                &c,
                "fma(a, b, c) (fused or not)",
                &got_fma,
                &want,
                |i, g, &w| {
                    let gf = g.to_f64();
                    same_float(gf, w) || ulps(g, T::round(w)) <= 1 || ulps(g, T::round(unfused[i])) <= 1
                },
                &inp,
            )
        } else {
            check_float(&c, "fma(a, b, c)", &got_fma, &want, 1, 0.0, 0.0, &inp)
        };
        let gotc = download(&cmp)?;
        for (k, op) in FLOAT_CMP.iter().enumerate() {
            let want: Vec<u8> = (0..n)
                .map(|i| {
                    let (a, b) = (af[i], bf[i]);
                    [a == b, a != b, a < b, a <= b, a > b, a >= b, a > 0.0, a.is_nan()][k] as u8
                })
                .collect();
            check_eq(&c, op, &gotc[k * st..(k + 1) * st], &want, &inp)?;
        }
        fma_result?;
    }
    Ok(())
}

pub fn float_ops(dev: &Device, seed: u64) -> R {
    // Run every dtype; report a failure other than fma's first, so that an
    // fma-only discrepancy never hides another one.
    let rs = [float_ops_t::<f32>(dev, seed), float_ops_t::<f16>(dev, seed ^ 1), float_ops_t::<bf16>(dev, seed ^ 2)];
    if let Some(e) = rs.iter().find_map(|r| r.as_ref().err().filter(|e| !e.contains("fma(a, b, c)"))) {
        return Err(e.clone());
    }
    rs.into_iter().collect::<Result<Vec<()>, _>>().map(|_| ())
}

// ------------------------------------------------------- math functions

const MATH_OPS: &[&str] = &["exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid", "tanh", "erf", "sin", "cos"];

/// Segment `k` of `x` goes through math function `k` into segment `k` of `out`.
#[kernel]
pub fn k_math<T: Float, const B: i32>(x: Ptr<T>, out: Ptr<T>, n: i32, st: i32) {
    let offs = program_id(0) * B + arange(0, B);
    let m = offs < n;
    store(out + offs, exp(load(x + offs, m, 1.0)), m);
    store(out + st + offs, exp2(load(x + st + offs, m, 1.0)), m);
    store(out + 2 * st + offs, log(load(x + 2 * st + offs, m, 1.0)), m);
    store(out + 3 * st + offs, load(x + 3 * st + offs, m, 1.0).log2(), m);
    store(out + 4 * st + offs, sqrt(load(x + 4 * st + offs, m, 1.0)), m);
    store(out + 5 * st + offs, rsqrt(load(x + 5 * st + offs, m, 1.0)), m);
    store(out + 6 * st + offs, sigmoid(load(x + 6 * st + offs, m, 1.0)), m);
    store(out + 7 * st + offs, load(x + 7 * st + offs, m, 1.0).tanh(), m);
    store(out + 8 * st + offs, erf(load(x + 8 * st + offs, m, 1.0)), m);
    store(out + 9 * st + offs, sin(load(x + 9 * st + offs, m, 1.0)), m);
    store(out + 10 * st + offs, load(x + 10 * st + offs, m, 1.0).cos(), m);
}

/// erf by composite Simpson integration of 2/√π·e^(−t²) (independent of the
/// interpreter's series): absolute error < 1e-13 on |x| ≤ 6.
pub fn erf_ref(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs().min(6.0);
    let n = 2000;
    let h = a / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(a);
    for i in 1..n {
        s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    let r = s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt();
    r.copysign(x)
}

fn flush_below_normal(r: f64) -> f64 {
    if r.abs() < f32::MIN_POSITIVE as f64 {
        0.0
    } else {
        r
    }
}

fn math_ref(k: usize, x: f64) -> f64 {
    match k {
        // (results below the least normal f32 are +0: docs/semantics.md)
        0 => flush_below_normal(x.exp()),
        1 => flush_below_normal(x.exp2()),
        2 => x.ln(),
        3 => x.log2(),
        4 => x.sqrt(),
        5 => 1.0 / x.sqrt(),
        6 => 1.0 / (1.0 + (-x).exp()),
        7 => x.tanh(),
        8 => erf_ref(x),
        9 => x.sin(),
        _ => x.cos(),
    }
}

fn math_input<T: Flt>(k: usize, rng: &mut Rng) -> T {
    if rng.chance(0.02) {
        // zeros (erf(0) once hung the interpreter), infinities, NaN
        return T::from_f64(rng.pick(&[0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN]));
    }
    // exp and exp2: one input in ten where the result is near or below the
    // least normal f32 (flushed to +0), away from the boundary itself
    // (where a 2-ulp approximation may land on either side)
    let near_zero = |rng: &mut Rng, lo: f64, b: f64, hi: f64| loop {
        let v = T::round(rng.range(lo, hi));
        if (v.to_f64() - b).abs() > 0.05 {
            return v;
        }
    };
    if k == 0 && rng.chance(0.1) {
        return near_zero(rng, -100.0, f64::from(f32::MIN_POSITIVE).ln(), -80.0);
    }
    if k == 1 && rng.chance(0.1) {
        return near_zero(rng, -140.0, -126.0, -115.0);
    }
    let v = match k {
        0 => rng.range(-10.0, 10.0),
        1 => rng.range(-14.0, 15.0),
        2..=5 => {
            if rng.chance(0.03) {
                rng.pick(&[0.0, -1.0, f64::INFINITY, f64::NAN])
            } else {
                10f64.powf(rng.range(-3.0, 3.0))
            }
        }
        6 => rng.range(-20.0, 20.0),
        7 => rng.range(-10.0, 10.0),
        8 => rng.range(-5.0, 5.0),
        _ => rng.range(-20.0, 20.0),
    };
    T::round(v)
}

fn math_t<T: Flt>(dev: &Device, seed: u64) -> R {
    let mut rng = Rng::new(seed);
    let f32_like = T::MANT == 23;
    for &(n, b) in SIZES_1D {
        let c = Ctx::new("math", seed, format!("{} n={n} B={b}", T::NAME));
        let st = n + PAD;
        let mut xs = vec![T::from_f64(0.0); st * MATH_OPS.len()];
        for k in 0..MATH_OPS.len() {
            for i in 0..n {
                xs[k * st + i] = math_input::<T>(k, &mut rng);
            }
        }
        let mut out = poisoned::<T>(dev, st * MATH_OPS.len())?;
        // every op sees ±0 and ±inf at least once when n allows
        for k in 0..MATH_OPS.len() {
            for (i, v) in [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY].iter().enumerate().take(n / 50) {
                xs[k * st + i] = T::from_f64(*v);
            }
        }
        c.launch(k_math::launch(dev, cdiv(n, b as usize) as u32, &upload(dev, &xs)?, &mut out, n as i32, st as i32, b))?;
        let got = download(&out)?;
        for (k, op) in MATH_OPS.iter().enumerate() {
            let want: Vec<f64> = (0..n).map(|i| math_ref(k, xs[k * st + i].to_f64())).collect();
            let inp = |i: usize| format!("x={:?}", xs[k * st + i]);
            // f32: a few ulp or 1e-6 relative; f16/bf16: 1 ulp of the rounded reference.
            if f32_like {
                check_float(&c, op, &got[k * st..(k + 1) * st], &want, 4, 1e-6, 0.0, &inp)?;
            } else {
                check_float(&c, op, &got[k * st..(k + 1) * st], &want, 1, 0.0, 0.0, &inp)?;
            }
        }
    }
    Ok(())
}

pub fn math(dev: &Device, seed: u64) -> R {
    math_t::<f32>(dev, seed)?;
    math_t::<f16>(dev, seed ^ 1)?;
    math_t::<bf16>(dev, seed ^ 2)
}

// ------------------------------------------------- constant folding

/// Expressions on literals (folded while the kernel is built) must equal
/// the same expressions on run-time scalars, and Rust's wrapping `as`.
#[kernel]
pub fn k_fold(out: Ptr<i64>, v300: i32, m1: i32, v200: u8, m128: i8) {
    let i = arange(0, 8);
    let f0 = ((300 as u8) as i32) as i64;
    let f1 = ((-1 as u32) > 5) as i64;
    let f2 = (200u8 + 100u8) as i64;
    let f3 = ((-1 as i8) as u8) as i64;
    let f4 = (-128i8 / -1i8) as i64;
    let f5 = ((70000 as u8) == 112) as i64;
    let r0 = ((v300 as u8) as i32) as i64;
    let r1 = ((m1 as u32) > 5) as i64;
    let r2 = (v200 + 100u8) as i64;
    let r3 = ((m1 as i8) as u8) as i64;
    let r4 = (m128 / -1i8) as i64;
    let r5 = (((v300 * 233 + 100) as u8) == 112) as i64;
    let folded = select(i == 0, f0, select(i == 1, f1, select(i == 2, f2, select(i == 3, f3, select(i == 4, f4, select(i == 5, f5, 0i64))))));
    let runtime = select(i == 0, r0, select(i == 1, r1, select(i == 2, r2, select(i == 3, r3, select(i == 4, r4, select(i == 5, r5, 0i64))))));
    store(out + i, folded);
    store(out + 8 + i, runtime);
}

pub fn const_fold(dev: &Device, seed: u64) -> R {
    let c = Ctx::new("const_fold", seed, "literal vs run-time casts and wrapping");
    let mut out = poisoned::<i64>(dev, 16 + PAD)?;
    c.launch(k_fold::launch(dev, 1, &mut out, 300, -1, 200, -128))?;
    let w = [
        (300i32 as u8) as i64,
        ((-1i32 as u32) > 5) as i64,
        200u8.wrapping_add(100) as i64,
        (-1i32 as i8 as u8) as i64,
        (-128i8).wrapping_div(-1) as i64,
        ((70000i32 as u8) == 112) as i64,
        0,
        0,
    ];
    let names = ["(300 as u8) as i32", "(-1 as u32) > 5", "200u8 + 100u8", "(-1 as i8) as u8", "-128i8 / -1i8", "(70000 as u8) == 112", "-", "-"];
    let mut want = w.to_vec();
    want.extend(w);
    check_eq(&c, "folded (0..8) and run-time (8..16)", &download(&out)?, &want, &|i| names[i % 8].to_string())
}
