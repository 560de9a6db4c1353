//! Floating-point math functions (`exp`/`log` through `ex2`/`lg2.approx`, `erf`,
//! `tanh`, `sin`/`cos`, …) and the tf32 roundings `dot_tf32` and
//! `round_tf32` need.

use super::*;
use crate::plan::mathfn;

impl<'k> PtxWriter<'k> {
    pub(super) fn fconst(&mut self, v: f64) -> String {
        f32_hex(v)
    }

    pub(super) fn fexp(&mut self, x: &str) -> String {
        // exp(x) = 2^t · 2^(x·log2 e − t) with t = x·log2 e rounded: the
        // rounding of t (up to half an ulp of 128) would cost 2.6e-6
        // relative at |x| ≈ 87 on its own, so it is taken back by
        // c = x − t·ln 2 (Cody–Waite, with fma) and 2^t·(1 + c). `ex2.approx`
        // is within 2 ulp; results below the least normal f32 are flushed to
        // +0 (the language's semantics: one MUFU instruction, where the
        // subnormal-preserving form costs three more). Infinite, NaN and
        // overflowing t keep `ex2`'s own answer.
        let (t, r, c, y) = (self.reg(RegClass::F), self.reg(RegClass::F), self.reg(RegClass::F), self.reg(RegClass::F));
        let log2e = self.fconst(std::f64::consts::LOG2_E);
        self.line(format!("mul.rn.f32 {t}, {x}, {log2e};"));
        self.line(format!("ex2.approx.ftz.f32 {r}, {t};"));
        let ln2_hi = std::f64::consts::LN_2 as f32;
        let ln2_lo = std::f64::consts::LN_2 - ln2_hi as f64;
        self.line(format!("fma.rn.f32 {c}, {t}, {}, {x};", f32_hex(-(ln2_hi as f64))));
        self.line(format!("fma.rn.f32 {c}, {t}, {}, {c};", f32_hex(-ln2_lo)));
        self.line(format!("fma.rn.f32 {y}, {r}, {c}, {r};"));
        let (a, fin) = (self.reg(RegClass::F), self.reg(RegClass::P));
        self.line(format!("abs.f32 {a}, {t};"));
        self.line(format!("setp.lt.f32 {fin}, {a}, 0f43000000;"));
        self.line(format!("selp.f32 {y}, {y}, {r}, {fin};"));
        y
    }

    /// Natural log with ~1 ulp error: x = m·2^e with m in [√½, √2),
    /// log m = 2·atanh(s), s = (m-1)/(m+1), odd series to s^11; zero,
    /// negative, infinite and NaN inputs take `lg2.approx`'s special values.
    pub(super) fn flog(&mut self, x: &str) -> String {
        let (xs, bits, e, mb) = (self.reg(RegClass::F), self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R));
        let sub = self.reg(RegClass::P);
        // scale subnormals into the normal range
        self.line(format!("setp.lt.f32 {sub}, {x}, 0f00800000;"));
        self.line(format!("mul.rn.f32 {xs}, {x}, 0f4B000000;"));
        self.line(format!("selp.f32 {xs}, {xs}, {x}, {sub};"));
        self.line(format!("mov.b32 {bits}, {xs};"));
        self.line(format!("shr.u32 {e}, {bits}, 23;"));
        self.line(format!("and.b32 {e}, {e}, 255;"));
        self.line(format!("sub.s32 {e}, {e}, 127;"));
        self.line(format!("@{sub} sub.s32 {e}, {e}, 23;"));
        self.line(format!("and.b32 {mb}, {bits}, 8388607;"));
        self.line(format!("or.b32 {mb}, {mb}, 1065353216;"));
        let m = self.reg(RegClass::F);
        self.line(format!("mov.b32 {m}, {mb};"));
        let big = self.reg(RegClass::P);
        self.line(format!("setp.gt.f32 {big}, {m}, 0f3FB504F3;"));
        self.line(format!("@{big} mul.rn.f32 {m}, {m}, 0f3F000000;"));
        self.line(format!("@{big} add.s32 {e}, {e}, 1;"));
        let (num, den, sv, s2) = (self.reg(RegClass::F), self.reg(RegClass::F), self.reg(RegClass::F), self.reg(RegClass::F));
        self.line(format!("sub.rn.f32 {num}, {m}, 0f3F800000;"));
        self.line(format!("add.rn.f32 {den}, {m}, 0f3F800000;"));
        self.line(format!("div.rn.f32 {sv}, {num}, {den};"));
        self.line(format!("mul.rn.f32 {s2}, {sv}, {sv};"));
        let p = self.reg(RegClass::F);
        self.line(format!("mov.f32 {p}, {};", f32_hex(2.0 / 11.0)));
        for c in [2.0 / 9.0, 2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0] {
            self.line(format!("fma.rn.f32 {p}, {p}, {s2}, {};", f32_hex(c)));
        }
        self.line(format!("mul.rn.f32 {p}, {p}, {s2};"));
        // log m = 2s + s·p  (p carries the s^3.. terms over s)
        let lm = self.reg(RegClass::F);
        self.line(format!("fma.rn.f32 {lm}, {sv}, {p}, {sv};"));
        self.line(format!("add.rn.f32 {lm}, {lm}, {sv};"));
        let ef = self.reg(RegClass::F);
        self.line(format!("cvt.rn.f32.s32 {ef}, {e};"));
        // e·ln2 in two parts
        let r = self.reg(RegClass::F);
        self.line(format!("fma.rn.f32 {r}, {ef}, {}, {lm};", f32_hex(-2.1219444e-4)));
        self.line(format!("fma.rn.f32 {r}, {ef}, {}, {r};", f32_hex(0.693359375)));
        // specials: x <= 0, inf, nan
        let (ok, t) = (self.reg(RegClass::P), self.reg(RegClass::P));
        self.line(format!("setp.gt.f32 {ok}, {x}, 0f00000000;"));
        self.line(format!("setp.lt.f32 {t}, {x}, 0f7F800000;"));
        self.line(format!("and.pred {ok}, {ok}, {t};"));
        let sp = self.reg(RegClass::F);
        self.line(format!("lg2.approx.f32 {sp}, {x};"));
        self.line(format!("selp.f32 {r}, {r}, {sp}, {ok};"));
        r
    }

    pub(super) fn funary(&mut self, o: UnOp, x: &str) -> R<String> {
        let y = self.reg(RegClass::F);
        match o {
            UnOp::Neg => self.line(format!("neg.f32 {y}, {x};")),
            UnOp::Abs => self.line(format!("abs.f32 {y}, {x};")),
            UnOp::Exp => return Ok(self.fexp(x)),
            UnOp::Exp2 => self.line(format!("ex2.approx.ftz.f32 {y}, {x};")),
            UnOp::Log => {
                let l = self.flog(x);
                self.line(format!("mov.f32 {y}, {l};"));
            }
            UnOp::Log2 => {
                let l = self.flog(x);
                self.line(format!("mul.rn.f32 {y}, {l}, {};", f32_hex(std::f64::consts::LOG2_E)));
            }
            UnOp::Sqrt => self.line(format!("sqrt.rn.f32 {y}, {x};")),
            UnOp::Rsqrt => self.line(format!("rsqrt.approx.f32 {y}, {x};")),
            UnOp::Floor => self.line(format!("cvt.rmi.f32.f32 {y}, {x};")),
            UnOp::Ceil => self.line(format!("cvt.rpi.f32.f32 {y}, {x};")),
            UnOp::Round => self.line(format!("cvt.rni.f32.f32 {y}, {x};")),
            UnOp::RoundTf32 => return Ok(self.tf32_round(x)),
            UnOp::Sigmoid => {
                let n = self.reg(RegClass::F);
                self.line(format!("neg.f32 {n}, {x};"));
                let e = self.fexp(&n);
                let d = self.reg(RegClass::F);
                self.line(format!("add.rn.f32 {d}, {e}, 0f3F800000;"));
                self.line(format!("rcp.rn.f32 {y}, {d};"));
            }
            UnOp::Tanh => {
                // |x| < 0.25: odd Taylor polynomial; else sign(x)(1-e)/(1+e), e = exp(-2|x|)
                let a = self.reg(RegClass::F);
                self.line(format!("abs.f32 {a}, {x};"));
                let m2 = self.reg(RegClass::F);
                self.line(format!("mul.rn.f32 {m2}, {a}, 0fC0000000;"));
                let e = self.fexp(&m2);
                let (num, den, q) = (self.reg(RegClass::F), self.reg(RegClass::F), self.reg(RegClass::F));
                self.line(format!("sub.rn.f32 {num}, 0f3F800000, {e};"));
                self.line(format!("add.rn.f32 {den}, 0f3F800000, {e};"));
                self.line(format!("div.rn.f32 {q}, {num}, {den};"));
                self.line(format!("copysign.f32 {q}, {x}, {q};"));
                // polynomial
                let x2 = self.reg(RegClass::F);
                self.line(format!("mul.rn.f32 {x2}, {x}, {x};"));
                let coef = [62.0 / 2835.0, -17.0 / 315.0, 2.0 / 15.0, -1.0 / 3.0, 1.0];
                let p = self.reg(RegClass::F);
                self.line(format!("mov.f32 {p}, {};", f32_hex(coef[0])));
                for c in &coef[1..] {
                    self.line(format!("fma.rn.f32 {p}, {p}, {x2}, {};", f32_hex(*c)));
                }
                self.line(format!("mul.rn.f32 {p}, {p}, {x};"));
                let small = self.reg(RegClass::P);
                self.line(format!("setp.lt.f32 {small}, {a}, 0f3E800000;"));
                self.line(format!("selp.f32 {y}, {p}, {q}, {small};"));
            }
            UnOp::Erf => {
                // |x| < 0.5: Taylor series; else Abramowitz–Stegun 7.1.26
                let a = self.reg(RegClass::F);
                self.line(format!("abs.f32 {a}, {x};"));
                let x2 = self.reg(RegClass::F);
                self.line(format!("mul.rn.f32 {x2}, {x}, {x};"));
                let p = self.reg(RegClass::F);
                // (the polynomials: crate::plan::mathfn)
                let cs = mathfn::erf_taylor();
                self.line(format!("mov.f32 {p}, {};", f32_hex(cs[8])));
                for c in cs[..8].iter().rev() {
                    self.line(format!("fma.rn.f32 {p}, {p}, {x2}, {};", f32_hex(*c)));
                }
                self.line(format!("mul.rn.f32 {p}, {p}, {x};"));
                let t = self.reg(RegClass::F);
                self.line(format!("fma.rn.f32 {t}, {a}, {}, 0f3F800000;", f32_hex(mathfn::ERF_AS_P)));
                self.line(format!("rcp.rn.f32 {t}, {t};"));
                let q = self.reg(RegClass::F);
                let ac = mathfn::ERF_AS_POLY;
                self.line(format!("mov.f32 {q}, {};", f32_hex(ac[0])));
                for c in &ac[1..] {
                    self.line(format!("fma.rn.f32 {q}, {q}, {t}, {};", f32_hex(*c)));
                }
                self.line(format!("mul.rn.f32 {q}, {q}, {t};"));
                let nx2 = self.reg(RegClass::F);
                self.line(format!("neg.f32 {nx2}, {x2};"));
                let e = self.fexp(&nx2);
                self.line(format!("mul.rn.f32 {q}, {q}, {e};"));
                self.line(format!("sub.rn.f32 {q}, 0f3F800000, {q};"));
                self.line(format!("copysign.f32 {q}, {x}, {q};"));
                let small = self.reg(RegClass::P);
                self.line(format!("setp.lt.f32 {small}, {a}, 0f3F000000;"));
                self.line(format!("selp.f32 {y}, {p}, {q}, {small};"));
            }
            UnOp::Sin | UnOp::Cos => {
                // k = rint(x * 2/pi); r = x - k*pi/2 (3-part Cody–Waite); Taylor on |r| <= pi/4
                let kf = self.reg(RegClass::F);
                self.line(format!("mul.rn.f32 {kf}, {x}, {};", f32_hex(std::f64::consts::FRAC_2_PI)));
                self.line(format!("cvt.rni.f32.f32 {kf}, {kf};"));
                let r = self.reg(RegClass::F);
                let c1 = 1.5707963705062866f64; // f32(pi/2)
                let c2 = -4.371139000186243e-8f64;
                let c3 = -1.7151245100059164e-15f64;
                self.line(format!("fma.rn.f32 {r}, {kf}, {}, {x};", f32_hex(-c1)));
                self.line(format!("fma.rn.f32 {r}, {kf}, {}, {r};", f32_hex(-c2)));
                self.line(format!("fma.rn.f32 {r}, {kf}, {}, {r};", f32_hex(-c3)));
                let r2 = self.reg(RegClass::F);
                self.line(format!("mul.rn.f32 {r2}, {r}, {r};"));
                // sin poly
                let s = self.reg(RegClass::F);
                let sc = [-1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0];
                self.line(format!("mov.f32 {s}, {};", f32_hex(sc[0])));
                for c in &sc[1..] {
                    self.line(format!("fma.rn.f32 {s}, {s}, {r2}, {};", f32_hex(*c)));
                }
                self.line(format!("mul.rn.f32 {s}, {s}, {r2};"));
                self.line(format!("fma.rn.f32 {s}, {s}, {r}, {r};"));
                let cpoly = self.reg(RegClass::F);
                let cc = [1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0, 1.0 / 24.0, -0.5, 1.0];
                self.line(format!("mov.f32 {cpoly}, {};", f32_hex(cc[0])));
                for c in &cc[1..] {
                    self.line(format!("fma.rn.f32 {cpoly}, {cpoly}, {r2}, {};", f32_hex(*c)));
                }
                let q = self.reg(RegClass::R);
                self.line(format!("cvt.rzi.s32.f32 {q}, {kf};"));
                if o == UnOp::Cos {
                    self.line(format!("add.s32 {q}, {q}, 1;"));
                }
                // quadrant: q&1 → use the other polynomial; q&2 → negate
                let (b0, b1) = (self.reg(RegClass::R), self.reg(RegClass::R));
                self.line(format!("and.b32 {b0}, {q}, 1;"));
                self.line(format!("and.b32 {b1}, {q}, 2;"));
                let (p0, p1) = (self.reg(RegClass::P), self.reg(RegClass::P));
                self.line(format!("setp.ne.u32 {p0}, {b0}, 0;"));
                self.line(format!("setp.ne.u32 {p1}, {b1}, 0;"));
                self.line(format!("selp.f32 {y}, {cpoly}, {s}, {p0};"));
                let n = self.reg(RegClass::F);
                self.line(format!("neg.f32 {n}, {y};"));
                self.line(format!("selp.f32 {y}, {n}, {y}, {p1};"));
            }
            UnOp::Not => return self.err("`!` on floats"),
        }
        Ok(y)
    }

    /// An f32 register reduced to tf32 as `precision` says: rounded
    /// (`Tf32`) or truncated (`Tf32Trunc`; finite values).
    pub(super) fn tf32_reduce(&mut self, f: &str, precision: DotPrecision) -> String {
        if precision == DotPrecision::Tf32 {
            return self.tf32_round(f);
        }
        let (bits, r, fin) = (self.reg(RegClass::R), self.reg(RegClass::F), self.reg(RegClass::P));
        self.line(format!("mov.b32 {bits}, {f};"));
        self.line(format!("testp.finite.f32 {fin}, {f};"));
        self.line(format!("@{fin} and.b32 {bits}, {bits}, -8192;"));
        self.line(format!("mov.b32 {r}, {bits};"));
        r
    }

    /// Round an f32 register to tf32 (10-bit mantissa, nearest-even; finite
    /// values), as the interpreter's `dot_tf32` does.
    pub(super) fn tf32_round(&mut self, f: &str) -> String {
        let (bits, r) = (self.reg(RegClass::R), self.reg(RegClass::F));
        self.line(format!("mov.b32 {bits}, {f};"));
        self.tf32_round_bits(&bits, f);
        self.line(format!("mov.b32 {r}, {bits};"));
        r
    }

    /// `tf32_round` in place on the bits of an f32 in a `.b32` register;
    /// `value` is the same f32 in whichever register holds it (tested for
    /// being finite).
    pub(super) fn tf32_round_bits(&mut self, bits: &str, value: &str) {
        let (lsb, fin) = (self.reg(RegClass::R), self.reg(RegClass::P));
        self.line(format!("bfe.u32 {lsb}, {bits}, 13, 1;"));
        self.line(format!("add.u32 {lsb}, {lsb}, 4095;"));
        self.line(format!("testp.finite.f32 {fin}, {value};"));
        self.line(format!("@{fin} add.u32 {bits}, {bits}, {lsb};"));
        self.line(format!("@{fin} and.b32 {bits}, {bits}, -8192;"));
    }
}
