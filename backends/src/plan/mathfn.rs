//! The math-function approximations both emitters write, as numbers: one
//! definition of each polynomial and constant, so that `erf` (and what
//! joins it here) means the same function on PTX and WGSL.
//!
//! `erf(x)`: for |x| < 0.5 the Taylor series `Σ_n (−1)ⁿ x^(2n+1) / (n!
//! (2n+1)) · 2/√π` to n = 8 ([`erf_taylor`], Horner in x²); else
//! Abramowitz–Stegun 7.1.26, `1 − t·P(t)·e^(−x²)` with `t = 1/(1 + p|x|)`
//! ([`ERF_AS_P`], [`ERF_AS_POLY`] highest degree first), sign copied from x.

/// Taylor coefficients of erf in x (odd powers x^(2n+1), n = 0..=8).
pub fn erf_taylor() -> [f64; 9] {
    let mut cs = [0.0; 9];
    let mut fact = 1.0f64;
    for (n, c) in cs.iter_mut().enumerate() {
        if n > 0 {
            fact *= n as f64;
        }
        let s = if n % 2 == 0 { 1.0 } else { -1.0 };
        *c = s / (fact * (2 * n + 1) as f64) * 2.0 / std::f64::consts::PI.sqrt();
    }
    cs
}

/// Abramowitz–Stegun 7.1.26: `t = 1 / (1 + ERF_AS_P·|x|)`.
pub const ERF_AS_P: f64 = 0.3275911;
/// Abramowitz–Stegun 7.1.26's polynomial in t (times t), highest degree
/// first, for Horner's rule.
pub const ERF_AS_POLY: [f64; 5] = [1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592];

#[cfg(test)]
mod tests {
    use super::*;

    fn erf(x: f64) -> f64 {
        let a = x.abs();
        if a < 0.5 {
            let cs = erf_taylor();
            let x2 = x * x;
            let p = cs.iter().rev().fold(0.0, |p, c| p * x2 + c);
            return p * x;
        }
        let t = 1.0 / (1.0 + ERF_AS_P * a);
        let q = ERF_AS_POLY.iter().fold(0.0, |q, c| q * t + c) * t;
        (1.0 - q * (-x * x).exp()).copysign(x)
    }

    #[test]
    fn erf_within_the_approximations_bound() {
        // A–S 7.1.26: |error| ≤ 1.5e-7; the Taylor branch is far closer
        // (references: Python's math.erf)
        for (x, want) in [
            (0.1, 0.1124629160182849),
            (0.49, 0.511668261188523),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (-2.0, -0.9953222650189527),
            (3.5, 0.9999992569016276),
        ] {
            assert!((erf(x) - want).abs() < 1.5e-7, "erf({x}) = {} want {want}", erf(x));
        }
    }
}
