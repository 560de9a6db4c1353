//! Host-side rounding with one semantics for the whole compiler: the
//! interpreter computes with these, and both emitters use them to fold
//! literals, so a constant means the same value on every target.
//!
//! - [`f32_round_to_odd`]: f64 → f32 toward zero with the last bit set when
//!   inexact (beyond f32's range: ±`f32::MAX`, which is odd). Rounding that
//!   to a format of at most 22 mantissa bits (f16, bf16) to nearest-even
//!   gives the correctly rounded result — one rounding, not two.
//! - [`f16_from_f64`], [`bf16_from_f64`]: correctly rounded (nearest-even).
//!   `half`'s own `from_f64` rounds twice (through f32 on F16C hosts, or
//!   after dropping the low 32 mantissa bits), which is wrong just above a
//!   halfway point.
//! - [`i64_to_f32_odd`]: i64 → f32 rounded to odd, for the same purpose.
//! - [`tf32_round`], [`tf32_trunc`]: f32 to a 10-bit mantissa, nearest-even
//!   (`dot_tf32`, `round_tf32`) or truncated (`dot_tf32_trunc`: the tensor
//!   cores' own conversion); non-finite values unchanged. The emitters
//!   write the same bit operations into PTX and WGSL.

use half::{bf16, f16};

/// f64 → f32 rounded to odd (see the module doc).
pub fn f32_round_to_odd(x: f64) -> f32 {
    let r = x as f32;
    if x.is_nan() || r as f64 == x {
        return r;
    }
    if r.is_infinite() {
        return f32::MAX.copysign(r);
    }
    let toward_zero = if (r as f64).abs() > x.abs() { f32::from_bits(r.to_bits() - 1) } else { r };
    f32::from_bits(toward_zero.to_bits() | 1)
}

/// An i64 → f32 rounded to odd (see [`f32_round_to_odd`]).
pub fn i64_to_f32_odd(x: i64) -> f32 {
    let a = x.unsigned_abs();
    let drop = (64 - a.leading_zeros()).saturating_sub(24);
    let mut m = a >> drop;
    if drop > 0 && a & ((1u64 << drop) - 1) != 0 {
        m |= 1;
    }
    let r = m as f32 * f32::from_bits((127 + drop) << 23);
    if x < 0 {
        -r
    } else {
        r
    }
}

/// f64 → f16, correctly rounded (nearest-even).
pub fn f16_from_f64(x: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(x))
}

/// f64 → bf16, correctly rounded (nearest-even).
pub fn bf16_from_f64(x: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(x))
}

/// f32 → tf32 (10-bit mantissa), nearest-even, as `cvt.rna`-free tensor
/// core inputs are rounded by `dot_tf32`; non-finite values unchanged.
pub fn tf32_round(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    let b = x.to_bits();
    let lsb = (b >> 13) & 1;
    f32::from_bits(b.wrapping_add(0xfff + lsb) & !0x1fff)
}

/// f32 → tf32 by dropping the 13 low mantissa bits; non-finite unchanged.
pub fn tf32_trunc(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    f32::from_bits(x.to_bits() & !0x1fff)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64: a deterministic spread of f64 bit patterns.
    fn stream(mut s: u64) -> impl FnMut() -> u64 {
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        }
    }

    /// `got` is the nearest of its neighbours to `x` (ties: even mantissa).
    fn nearest(x: f64, got: f64, below: f64, above: f64, got_even: bool) -> bool {
        let (d, db, da) = ((x - got).abs(), (x - below).abs(), (x - above).abs());
        (d < db || (d == db && got_even)) && (d < da || (d == da && got_even))
    }

    #[test]
    fn f16_and_bf16_are_correctly_rounded() {
        let mut next = stream(0x9e3779b97f4a7c15);
        for _ in 0..200_000 {
            // log-uniform over both formats' ranges (subnormals included),
            // with full 52-bit mantissas
            let r = next();
            let e = (r % 180) as i32 - 140;
            let m = 1.0 + (next() >> 12) as f64 / (1u64 << 52) as f64;
            let x = if r & (1 << 63) != 0 { -m } else { m } * 2f64.powi(e);
            let h = f16_from_f64(x);
            let hb = h.to_bits();
            if hb & 0x7fff != 0 && hb & 0x7fff < 0x7bff {
                let (b, a) = (f16::from_bits(hb - 1).to_f64(), f16::from_bits(hb + 1).to_f64());
                assert!(nearest(x, h.to_f64(), b.min(a), b.max(a), hb & 1 == 0), "f16 {x:e} -> {h}");
            }
            let g = bf16_from_f64(x);
            let gb = g.to_bits();
            if gb & 0x7fff != 0 && gb & 0x7fff < 0x7f7f {
                let (b, a) = (bf16::from_bits(gb - 1).to_f64(), bf16::from_bits(gb + 1).to_f64());
                assert!(nearest(x, g.to_f64(), b.min(a), b.max(a), gb & 1 == 0), "bf16 {x:e} -> {g}");
            }
        }
        // a halfway point of f16 plus a hair: rounds up (double rounding
        // through f32 would round to even, down)
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(f16_from_f64(x).to_bits(), f16::from_f64(1.0).to_bits() + 1);
        assert_eq!(f32_round_to_odd(1e300), f32::MAX);
        assert_eq!(f32_round_to_odd(-1e300), -f32::MAX);
        assert!(f16_from_f64(1e300).is_infinite() && bf16_from_f64(-1e300).is_infinite());
        assert!(f32_round_to_odd(f64::NAN).is_nan());
    }

    #[test]
    fn i64_odd_then_nearest_is_correctly_rounded() {
        let mut next = stream(0x1234_5678_9abc_def1);
        for _ in 0..100_000 {
            let x = next() as i64 >> (next() % 50);
            assert_eq!(f16::from_f32(i64_to_f32_odd(x)), f16_from_f64(x as f64), "{x}");
            assert_eq!(bf16::from_f32(i64_to_f32_odd(x)), bf16_from_f64(x as f64), "{x}");
        }
    }

    #[test]
    fn tf32_rounding() {
        assert_eq!(tf32_round(1.0 + 2f32.powi(-11)), 1.0); // tie to even
        assert_eq!(tf32_round(1.0 + 3.0 * 2f32.powi(-11)), 1.0 + 2f32.powi(-9)); // tie up to even
        assert_eq!(tf32_trunc(1.0 + 3.0 * 2f32.powi(-11)), 1.0 + 2f32.powi(-10));
        assert!(tf32_round(f32::NAN).is_nan() && tf32_round(f32::INFINITY).is_infinite());
        assert_eq!(tf32_round(f32::MAX), f32::INFINITY);
    }
}

/// The two 8-bit float formats (OCP FP8): e4m3 (4 exponent bits, bias 7,
/// 3 mantissa bits; no infinities, `0x7F` NaN, ±448 the largest finite)
/// and e5m2 (5 exponent bits, bias 15, 2 mantissa bits; IEEE-like, ±57344
/// the largest finite).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8 {
    /// 4 exponent bits, 3 mantissa bits.
    E4M3,
    /// 5 exponent bits, 2 mantissa bits.
    E5M2,
}

impl Fp8 {
    /// Mantissa bits.
    pub fn mant(self) -> u32 {
        match self {
            Fp8::E4M3 => 3,
            Fp8::E5M2 => 2,
        }
    }
    /// Exponent bias.
    pub fn bias(self) -> u32 {
        match self {
            Fp8::E4M3 => 7,
            Fp8::E5M2 => 15,
        }
    }
    /// The f32 bits of the largest finite value (448, 57344).
    pub fn max_bits(self) -> u32 {
        match self {
            Fp8::E4M3 => 0x43E0_0000,
            Fp8::E5M2 => 0x4760_0000,
        }
    }
    /// The f32 bits of the smallest normal value (2⁻⁶, 2⁻¹⁴).
    pub fn min_normal_bits(self) -> u32 {
        (128 - self.bias()) << 23
    }
    /// What an f32 below the smallest normal is multiplied by to give its
    /// subnormal code (one unit of the last place: 2⁹, 2¹⁶).
    pub fn subnormal_scale(self) -> f32 {
        f32::from_bits((127 + self.bias() - 1 + self.mant()) << 23)
    }
}

/// f32 → fp8 code: round to nearest-even, saturating to the largest finite
/// value (infinities included; what `cvt.rn.satfinite` does), NaN → NaN
/// (`0x7F` with the sign). The emitters write the same steps into PTX and
/// WGSL: clamp |x|'s bits to the largest finite; below the smallest normal,
/// the code is `rint(|x| · 2^(bias − 1 + mant))`; else the f32 bits rounded
/// to `mant` mantissa bits (`+ 2^(22 − mant) − 1 + lsb`), shifted, re-biased.
pub fn fp8_encode(x: f32, f: Fp8) -> u8 {
    let bits = x.to_bits();
    let sign = ((bits >> 24) & 0x80) as u8;
    let a = bits & 0x7FFF_FFFF;
    if a > 0x7F80_0000 {
        return sign | 0x7F;
    }
    let a = a.min(f.max_bits());
    let code = if a < f.min_normal_bits() {
        (f32::from_bits(a) * f.subnormal_scale()).round_ties_even() as u32
    } else {
        let sh = 23 - f.mant();
        let r = a + (1 << (sh - 1)) - 1 + ((a >> sh) & 1);
        (r >> sh) - ((127 - f.bias()) << f.mant())
    };
    sign | code as u8
}

/// fp8 code → f32 (exact).
pub fn fp8_decode(b: u8, f: Fp8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let m = f.mant();
    let mag = (b & 0x7F) as u32;
    let (e, man) = (mag >> m, mag & ((1 << m) - 1));
    let emax = (1 << (7 - m)) - 1;
    let v = match f {
        Fp8::E4M3 if mag == 0x7F => f32::NAN,
        Fp8::E5M2 if e == emax && man != 0 => f32::NAN,
        Fp8::E5M2 if e == emax => f32::INFINITY,
        _ if e == 0 => man as f32 / f.subnormal_scale(),
        _ => f32::from_bits(((e + 127 - f.bias()) << 23) | (man << (23 - m))),
    };
    sign * v
}

#[cfg(test)]
mod fp8_tests {
    use super::*;

    #[test]
    fn every_code_round_trips_and_rounding_is_nearest_even() {
        for f in [Fp8::E4M3, Fp8::E5M2] {
            let mut finite = vec![];
            for b in 0..=255u8 {
                let v = fp8_decode(b, f);
                if v.is_nan() {
                    assert_eq!(fp8_encode(v, f) & 0x7F, 0x7F, "{f:?} {b:#x}");
                    continue;
                }
                if v.is_infinite() {
                    continue;
                }
                // (-0 encodes as 0x80, +0 as 0x00)
                assert_eq!(fp8_encode(v, f), b, "{f:?} {b:#x} = {v}");
                finite.push(v);
            }
            finite.sort_by(|a, b| a.partial_cmp(b).unwrap());
            finite.dedup();
            // midpoints go to the code with an even mantissa; just off them, to the nearer
            for w in finite.windows(2) {
                let (lo, hi) = (w[0], w[1]);
                let mid = ((lo as f64 + hi as f64) / 2.0) as f32;
                let even = if fp8_encode(lo, f) & 1 == 0 { lo } else { hi };
                assert_eq!(fp8_decode(fp8_encode(mid, f), f), even, "{f:?} tie {lo}..{hi}");
                let below = f32::from_bits(mid.to_bits() - if mid > 0.0 { 1 } else { 0 });
                if mid > 0.0 && below > lo {
                    assert_eq!(fp8_decode(fp8_encode(below, f), f), lo, "{f:?} below {mid}");
                }
            }
            // saturation
            let max = f32::from_bits(f.max_bits());
            for x in [max * 1.01, 1e30, f32::INFINITY] {
                assert_eq!(fp8_decode(fp8_encode(x, f), f), max, "{f:?} {x}");
                assert_eq!(fp8_decode(fp8_encode(-x, f), f), -max);
            }
        }
        assert_eq!(fp8_decode(0x7E, Fp8::E4M3), 448.0);
        assert_eq!(fp8_decode(0x01, Fp8::E4M3), 2f32.powi(-9));
        assert_eq!(fp8_decode(0x7B, Fp8::E5M2), 57344.0);
        assert_eq!(fp8_decode(0x01, Fp8::E5M2), 2f32.powi(-16));
        assert_eq!(fp8_encode(1.0, Fp8::E4M3), 0x38);
        assert_eq!(fp8_encode(1.0, Fp8::E5M2), 0x3C);
    }
}
