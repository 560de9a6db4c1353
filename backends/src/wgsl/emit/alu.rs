//! Elementwise arithmetic: binary and unary ops, comparisons (i64 on
//! `vec2<u32>`), casts between every pair of dtypes with the
//! interpreter's rounding, and the software f16/bf16 rounding.

use super::*;

impl<'k> WgslWriter<'k> {
    /// Round an f32 expression to the float dtype `d`.
    pub(super) fn round_to(&mut self, e: &str, d: DType) -> String {
        match d {
            DType::F16 => format!("{}({e})", self.helper("ft_rh")),
            DType::BF16 => format!("{}({e})", self.helper("ft_rb")),
            DType::F8E4M3 => format!("{}({e})", self.helper("ft_e4m3_r")),
            DType::F8E5M2 => format!("{}({e})", self.helper("ft_e5m2_r")),
            _ => e.to_string(),
        }
    }

    /// Re-normalize an 8-bit integer held in 32 bits.
    pub(super) fn norm8(&mut self, e: &str, d: DType) -> String {
        match d {
            DType::I8 => format!("extractBits({e}, 0u, 8u)"),
            DType::U8 => format!("(({e}) & 0xffu)"),
            _ => e.to_string(),
        }
    }

    /// Elementwise ops: register i of the result from register i of each
    /// operand (operands have the result's shape, hence its layout).
    pub(super) fn elementwise(&mut self, kind: &OpKind, res: V) -> R<Vec<String>> {
        Ok(match kind {
            OpKind::Binary { op: o, a, b } => self.binary(*o, *a, *b)?,
            OpKind::Cmp { op: o, a, b } => self.cmp(*o, *a, *b),
            OpKind::Unary { op: o, x } => self.unary(*o, *x)?,
            OpKind::Fma { a, b, c } => {
                let d = self.dtype(res);
                let (ra, rb, rc) = (self.get(*a), self.get(*b), self.get(*c));
                let mut out = vec![];
                for i in 0..ra.len() {
                    let e = format!("fma({}, {}, {})", ra[i], rb[i], rc[i]);
                    let e = self.round_to(&e, d);
                    out.push(self.let_(WTy::F, e));
                }
                out
            }
            OpKind::Select { cond, a, b } => {
                let w = self.wty_of_val(*a);
                let (rc, ra, rb) = (self.get(*cond), self.get(*a), self.get(*b));
                let mut out = vec![];
                for i in 0..ra.len() {
                    out.push(self.let_(w, format!("select({}, {}, {})", rb[i], ra[i], rc[i])));
                }
                out
            }
            OpKind::Cast { x, to } => {
                let from = self.dtype(*x);
                let rx = self.get(*x);
                let mut out = vec![];
                for r in rx {
                    out.push(self.cast(&r, from, *to)?);
                }
                out
            }
            OpKind::Bitcast { x, to } => {
                let t = match to {
                    DType::F32 => "f32",
                    DType::I32 => "i32",
                    _ => "u32",
                };
                let rx = self.get(*x);
                let mut out = vec![];
                for r in rx {
                    out.push(self.let_(wty_of(*to), format!("bitcast<{t}>({r})")));
                }
                out
            }
            OpKind::AddPtr { ptr, offset } => {
                let od = self.dtype(*offset);
                let (rp, ro) = (self.get(*ptr), self.get(*offset));
                let mut out = vec![];
                for i in 0..rp.len() {
                    // indices are u32: only the low 32 bits of the offset matter
                    let off = match wty_of(od) {
                        WTy::U => ro[i].clone(),
                        WTy::L => format!("{}.x", ro[i]),
                        _ => format!("bitcast<u32>({})", ro[i]),
                    };
                    out.push(self.let_(WTy::U, format!("{} + {off}", rp[i])));
                }
                out
            }
            _ => return self.err(format!("not an elementwise op: {kind:?}")),
        })
    }

    pub(super) fn binary(&mut self, o: BinOp, a: V, b: V) -> R<Vec<String>> {
        let d = self.dtype(a);
        let w = wty_of(d);
        // an i64 divisor 2^s (s ≥ 1, a constant): shifts and masks instead
        // of the emulated division, whose loop every call site inlines
        // (lavapipe's shader compiler spent minutes on a kernel with many)
        let pow2_divisor = if w == WTy::L && matches!(o, BinOp::Div | BinOp::Rem) {
            self.remat.int_constant(b).filter(|c| *c > 1 && (*c as u64).is_power_of_two()).map(|c| c.trailing_zeros())
        } else {
            None
        };
        let (ra, rb) = (self.get(a), self.get(b));
        let mut out = vec![];
        for i in 0..ra.len() {
            let (x, y) = (&ra[i], &rb[i]);
            if let Some(sh) = pow2_divisor {
                out.push(self.i64_div_pow2(o, x, sh));
                continue;
            }
            let e = match w {
                WTy::F => {
                    let e = match o {
                        BinOp::Add => format!("{x} + {y}"),
                        BinOp::Sub => format!("{x} - {y}"),
                        BinOp::Mul => format!("{x} * {y}"),
                        BinOp::Div => format!("{}({x}, {y})", self.helper("ft_div")),
                        BinOp::Max => format!("{}({x}, {y})", self.helper("ft_fmax")),
                        BinOp::Min => format!("{}({x}, {y})", self.helper("ft_fmin")),
                        _ => return self.err(format!("{o:?} on floats")),
                    };
                    self.round_to(&e, d)
                }
                WTy::B => match o {
                    BinOp::And | BinOp::LAnd | BinOp::Min => format!("{x} && {y}"),
                    BinOp::Or | BinOp::LOr | BinOp::Max => format!("{x} || {y}"),
                    BinOp::Xor => format!("{x} != {y}"),
                    _ => return self.err(format!("{o:?} on bool")),
                },
                WTy::L => match o {
                    BinOp::Add => format!("{}({x}, {y})", self.helper("ft_add64")),
                    BinOp::Sub => format!("{}({x}, {y})", self.helper("ft_sub64")),
                    BinOp::Mul => format!("{}({x}, {y})", self.helper("ft_mul64")),
                    BinOp::Div => format!("{}.xy", self.divrem64(x, y)),
                    BinOp::Rem => format!("{}.zw", self.divrem64(x, y)),
                    BinOp::And => format!("{x} & {y}"),
                    BinOp::Or => format!("{x} | {y}"),
                    BinOp::Xor => format!("{x} ^ {y}"),
                    BinOp::Shl => format!("{}({x}, {y})", self.helper("ft_shl64")),
                    BinOp::Shr => format!("{}({x}, {y})", self.helper("ft_shr64")),
                    BinOp::Max => format!("select({x}, {y}, {}({x}, {y}))", self.helper("ft_lt64")),
                    BinOp::Min => format!("select({x}, {y}, {}({y}, {x}))", self.helper("ft_lt64")),
                    BinOp::LAnd | BinOp::LOr => return self.err("logical op on integers"),
                },
                _ => {
                    let width = if matches!(d, DType::I8 | DType::U8) { 8 } else { 32 };
                    let e = match o {
                        BinOp::Add => format!("{x} + {y}"),
                        BinOp::Sub => format!("{x} - {y}"),
                        BinOp::Mul => format!("{x} * {y}"),
                        BinOp::Div => format!("{x} / {y}"),
                        // Signed `%` as x - (x / y)·y (0 for y == 0, like
                        // WGSL's `%`): NVIDIA's Vulkan driver returned the
                        // dividend for 81 % -9 through naga's `%` lowering.
                        BinOp::Rem if w == WTy::I => format!("select({x} - ({x} / {y}) * {y}, 0i, {y} == 0i)"),
                        BinOp::Rem => format!("{x} % {y}"),
                        BinOp::And => format!("{x} & {y}"),
                        BinOp::Or => format!("{x} | {y}"),
                        BinOp::Xor => format!("{x} ^ {y}"),
                        BinOp::Max => format!("max({x}, {y})"),
                        BinOp::Min => format!("min({x}, {y})"),
                        BinOp::Shl | BinOp::Shr => {
                            // amounts < 0 or >= the width: 0 (or the sign for signed >>)
                            let amt = if w == WTy::I { format!("bitcast<u32>({y})") } else { y.clone() };
                            let amt = self.let_(WTy::U, amt);
                            let big = format!("{amt} >= {width}u");
                            let sh = format!("min({amt}, 31u)");
                            if o == BinOp::Shl {
                                let z = if w == WTy::I { "0i" } else { "0u" };
                                format!("select({x} << {sh}, {z}, {big})")
                            } else if w == WTy::I {
                                format!("select({x} >> {sh}, {x} >> 31u, {big})")
                            } else {
                                format!("select({x} >> {sh}, 0u, {big})")
                            }
                        }
                        BinOp::LAnd | BinOp::LOr => return self.err("logical op on integers"),
                    };
                    self.norm8(&e, d)
                }
            };
            out.push(self.let_(w, e));
        }
        Ok(out)
    }

    /// The `vec4` (quotient, remainder) of the emulated i64 division `x /
    /// y`, computed once per block for a pair of immutable registers (every
    /// call site inlines the division's loop into the shader).
    fn divrem64(&mut self, x: &str, y: &str) -> String {
        let key = (x.to_string(), y.to_string());
        let cacheable = !self.vars.contains(x) && !self.vars.contains(y);
        if cacheable {
            if let Some(r) = self.divrem.iter().rev().find_map(|m| m.get(&key)) {
                return r.clone();
            }
        }
        let f = self.helper("ft_divrem64");
        let r = self.let_(WTy::Q, format!("{f}({x}, {y})"));
        if cacheable {
            if let Some(m) = self.divrem.last_mut() {
                m.insert(key, r.clone());
            }
        }
        r
    }

    /// `x / 2^sh` (truncating) or `x % 2^sh` (the dividend's sign) of an
    /// i64 `x` (`vec2<u32>`, low word first), `1 ≤ sh ≤ 62`: negative
    /// dividends add `2^sh − 1` before the arithmetic shift.
    fn i64_div_pow2(&mut self, o: BinOp, x: &str, sh: u32) -> String {
        let m = (1u64 << sh) - 1;
        let bias = format!("select(vec2<u32>(0u, 0u), vec2<u32>({}u, {}u), bitcast<i32>({x}.y) < 0i)", m as u32, (m >> 32) as u32);
        let add = self.helper("ft_add64");
        let biased = self.let_(WTy::L, format!("{add}({x}, {bias})"));
        let e = if o == BinOp::Div {
            let shr = self.helper("ft_shr64");
            format!("{shr}({biased}, vec2<u32>({sh}u, 0u))")
        } else {
            // x − (x + bias) with its low sh bits cleared
            let sub = self.helper("ft_sub64");
            format!("{sub}({x}, {biased} & vec2<u32>({}u, {}u))", !m as u32, (!m >> 32) as u32)
        };
        self.let_(WTy::L, e)
    }

    pub(super) fn cmp(&mut self, o: CmpOp, a: V, b: V) -> Vec<String> {
        let d = self.dtype(a);
        let (ra, rb) = (self.get(a), self.get(b));
        let s = match o {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        };
        let mut out = vec![];
        if self.elem(a).is_ptr() {
            // element indices into one binding (the `guard` pass's bounds checks)
            for i in 0..ra.len() {
                out.push(self.let_(WTy::B, format!("{} {s} {}", ra[i], rb[i])));
            }
            return out;
        }
        if d == DType::I64 {
            let lt = self.helper("ft_lt64");
            for i in 0..ra.len() {
                let (x, y) = (&ra[i], &rb[i]);
                let e = match o {
                    CmpOp::Eq => format!("all({x} == {y})"),
                    CmpOp::Ne => format!("any({x} != {y})"),
                    CmpOp::Lt => format!("{lt}({x}, {y})"),
                    CmpOp::Le => format!("!{lt}({y}, {x})"),
                    CmpOp::Gt => format!("{lt}({y}, {x})"),
                    CmpOp::Ge => format!("!{lt}({x}, {y})"),
                };
                out.push(self.let_(WTy::B, e));
            }
            return out;
        }
        // WGSL lets implementations assume floats are never NaN (llvmpipe
        // evaluates `!=` as an ordered compare), so float comparisons test
        // NaN at the bit level: ordered for == < <= > >=, unordered for !=.
        let nan = if d.is_float() { Some(self.helper("ft_isnan")) } else { None };
        for i in 0..ra.len() {
            let e = if d == DType::Bool && !matches!(o, CmpOp::Eq | CmpOp::Ne) {
                format!("select(0u, 1u, {}) {s} select(0u, 1u, {})", ra[i], rb[i])
            } else if let Some(isnan) = &nan {
                let (x, y) = (&ra[i], &rb[i]);
                if o == CmpOp::Ne {
                    format!("(!({x} == {y}) || {isnan}({x}) || {isnan}({y}))")
                } else {
                    format!("(({x} {s} {y}) && !{isnan}({x}) && !{isnan}({y}))")
                }
            } else {
                format!("{} {s} {}", ra[i], rb[i])
            };
            out.push(self.let_(WTy::B, e));
        }
        out
    }

    pub(super) fn unary(&mut self, o: UnOp, x: V) -> R<Vec<String>> {
        let d = self.dtype(x);
        let w = wty_of(d);
        let rx = self.get(x);
        let mut out = vec![];
        for r in rx {
            let e = match w {
                WTy::F => {
                    let e = self.funary(o, &r)?;
                    self.round_to(&e, d)
                }
                WTy::B => format!("!{r}"),
                WTy::L => match o {
                    UnOp::Neg => format!("{}(vec2<u32>(0u, 0u), {r})", self.helper("ft_sub64")),
                    UnOp::Not => format!("~{r}"),
                    UnOp::Abs => format!("select({r}, {}(vec2<u32>(0u, 0u), {r}), bitcast<i32>({r}.y) < 0i)", self.helper("ft_sub64")),
                    _ => return self.err(format!("{} on integers", o.name())),
                },
                _ => {
                    let e = match (o, w) {
                        (UnOp::Neg, WTy::I) => format!("-{r}"),
                        (UnOp::Neg, _) => format!("0u - {r}"),
                        (UnOp::Not, _) => format!("~{r}"),
                        (UnOp::Abs, WTy::I) => format!("abs({r})"),
                        (UnOp::Abs, _) => r.clone(),
                        _ => return self.err(format!("{} on integers", o.name())),
                    };
                    self.norm8(&e, d)
                }
            };
            out.push(self.let_(w, e));
        }
        Ok(out)
    }

    /// f32 expression of a float unary op on the f32 register `x`.
    pub(super) fn funary(&mut self, o: UnOp, x: &str) -> R<String> {
        Ok(match o {
            UnOp::Neg => format!("-{x}"),
            UnOp::Abs => format!("abs({x})"),
            UnOp::Exp => format!("{}({x})", self.helper("ft_exp")),
            UnOp::Exp2 => format!("{}({x})", self.helper("ft_exp2")),
            UnOp::Log => format!("{}({x})", self.helper("ft_log")),
            UnOp::Log2 => format!("{}({x}) * {}", self.helper("ft_log"), fl(std::f64::consts::LOG2_E)),
            UnOp::Sqrt => format!("sqrt({x})"),
            UnOp::Rsqrt => format!("inverseSqrt({x})"),
            UnOp::Floor => format!("floor({x})"),
            UnOp::Ceil => format!("ceil({x})"),
            // (WGSL's round takes ties to even)
            UnOp::Round => format!("round({x})"),
            UnOp::RoundTf32 => format!("{}({x})", self.helper("ft_tf32")),
            UnOp::Sigmoid => format!("{}({x})", self.helper("ft_sigmoid")),
            UnOp::Tanh => format!("{}({x})", self.helper("ft_tanh")),
            UnOp::Erf => format!("{}({x})", self.helper("ft_erf")),
            UnOp::Sin => format!("{}({x}, 0i)", self.helper("ft_sincos")),
            UnOp::Cos => format!("{}({x}, 1i)", self.helper("ft_sincos")),
            UnOp::Not => return self.err("`!` on floats"),
        })
    }

    /// Cast one register; returns the new register (or `r` itself).
    pub(super) fn cast(&mut self, r: &str, from: DType, to: DType) -> R<String> {
        if from == to {
            return Ok(r.to_string());
        }
        let (wf, wt) = (wty_of(from), wty_of(to));
        let e = if from == DType::Bool {
            match wt {
                WTy::F => format!("select(0.0f, 1.0f, {r})"),
                WTy::I => format!("select(0i, 1i, {r})"),
                WTy::L => format!("vec2<u32>(select(0u, 1u, {r}), 0u)"),
                _ => format!("select(0u, 1u, {r})"),
            }
        } else if to == DType::Bool {
            match wf {
                WTy::F => format!("(bitcast<u32>({r}) & 0x7fffffffu) != 0u"),
                WTy::I => format!("{r} != 0i"),
                WTy::L => format!("any({r} != vec2<u32>(0u, 0u))"),
                _ => format!("{r} != 0u"),
            }
        } else if wt == WTy::L {
            match wf {
                WTy::F => format!("{}({r})", self.helper("ft_f2l")),
                WTy::I => format!("vec2<u32>(bitcast<u32>({r}), select(0u, 0xffffffffu, {r} < 0i))"),
                _ => format!("vec2<u32>({r}, 0u)"),
            }
        } else if wf == WTy::L {
            match to {
                DType::F32 => format!("{}({r}, false)", self.helper("ft_l2f")),
                DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2 => {
                    let e = format!("{}({r}, true)", self.helper("ft_l2f"));
                    self.round_to(&e, to)
                }
                DType::I32 => format!("bitcast<i32>({r}.x)"),
                DType::U32 => format!("{r}.x"),
                DType::I8 => format!("extractBits(bitcast<i32>({r}.x), 0u, 8u)"),
                _ => format!("({r}.x & 0xffu)"),
            }
        } else if wf == WTy::F && wt == WTy::F {
            // f16/bf16 values are exact in f32: one rounding to the target
            self.round_to(r, to)
        } else if wf == WTy::F {
            match to {
                DType::I32 => format!("{}({r})", self.helper("ft_f2i")),
                DType::I8 => format!("clamp({}({r}), -128i, 127i)", self.helper("ft_f2i")),
                DType::U32 => format!("{}({r})", self.helper("ft_f2u")),
                DType::U8 => format!("min({}({r}), 255u)", self.helper("ft_f2u")),
                _ => return self.err(format!("cast {from} -> {to}")),
            }
        } else if wt == WTy::F {
            if matches!(from, DType::I8 | DType::U8) {
                // exact in f32
                let e = format!("f32({r})");
                self.round_to(&e, to)
            } else if to == DType::F32 {
                if wf == WTy::I {
                    format!("{}({r})", self.helper("ft_i2f"))
                } else {
                    format!("{}({r})", self.helper("ft_u2f"))
                }
            } else {
                // once-rounded: round to odd in f32, then nearest-even in 16 bits
                let e = if wf == WTy::I { format!("{}({r})", self.helper("ft_i2f_odd")) } else { format!("{}({r})", self.helper("ft_u2f_odd")) };
                self.round_to(&e, to)
            }
        } else {
            // int -> int, wrapping
            let as_i = if wf == WTy::I { r.to_string() } else { format!("bitcast<i32>({r})") };
            let as_u = if wf == WTy::U { r.to_string() } else { format!("bitcast<u32>({r})") };
            match to {
                DType::I32 => as_i,
                DType::U32 => as_u,
                DType::I8 => format!("extractBits({as_i}, 0u, 8u)"),
                DType::U8 => format!("({as_u} & 0xffu)"),
                _ => return self.err(format!("cast {from} -> {to}")),
            }
        };
        Ok(self.let_(wt, e))
    }

    /// Bit pattern (u32, low bits) of a packed element register.
    pub(super) fn bits16(&mut self, v: &str, d: DType) -> String {
        match d {
            DType::F16 => format!("{}({v})", self.helper("ft_f2h")),
            DType::BF16 => format!("(bitcast<u32>({v}) >> 16u)"),
            DType::F8E4M3 => format!("{}({v})", self.helper("ft_e4m3_enc")),
            DType::F8E5M2 => format!("{}({v})", self.helper("ft_e5m2_enc")),
            DType::I8 => format!("(bitcast<u32>({v}) & 0xffu)"),
            _ => format!("({v} & 0xffu)"),
        }
    }
}
