//! Elementwise arithmetic in registers: binary and unary ops, comparisons,
//! casts between every pair of dtypes, and the f16/bf16 ↔ f32 helpers
//! (16-bit values are widened to f32 for arithmetic and rounded back once).

use super::*;

impl<'k> PtxWriter<'k> {
    pub(super) fn widen_f32(&mut self, r: &str, d: DType) -> String {
        if let Some(f) = d.fp8() {
            return self.fp8_decode(r, f);
        }
        match d {
            DType::F32 => r.to_string(),
            DType::F16 => {
                let f = self.reg(RegClass::F);
                self.line(format!("cvt.f32.f16 {f}, {r};"));
                f
            }
            DType::BF16 => {
                let f = self.reg(RegClass::F);
                match self.h_from_word.get(r).cloned() {
                    // bf16 is the upper half of an f32: one bit operation on the word
                    Some((w, true)) => self.line(format!("and.b32 {f}, {w}, -65536;")),
                    Some((w, false)) => self.line(format!("shl.b32 {f}, {w}, 16;")),
                    None => {
                        let t = self.reg(RegClass::R);
                        self.line(format!("cvt.u32.u16 {t}, {r};"));
                        self.line(format!("shl.b32 {f}, {t}, 16;"));
                    }
                }
                f
            }
            _ => unreachable!(),
        }
    }

    pub(super) fn narrow_f32(&mut self, f: &str, d: DType) -> String {
        if let Some(fmt) = d.fp8() {
            return self.fp8_encode(f, fmt);
        }
        match d {
            DType::F32 => f.to_string(),
            DType::F16 => {
                let h = self.reg(RegClass::H);
                self.line(format!("cvt.rn.f16.f32 {h}, {f};"));
                self.h_from_f32.insert(h.clone(), f.to_string());
                h
            }
            DType::BF16 => {
                let h = self.reg(RegClass::H);
                self.line(format!("cvt.rn.bf16.f32 {h}, {f};"));
                self.h_from_f32.insert(h.clone(), f.to_string());
                h
            }
            _ => unreachable!(),
        }
    }

    /// An fp8 code (low byte of a 32-bit register) as the f32 it stands
    /// for, by bit operations (every target, sm_80 included):
    /// `|code| << (23 − mant)` plus the bias difference is the normal
    /// value; a zero exponent field is subnormal (twice that minus the
    /// smallest normal, exact in one FMA); e4m3's `0x7F` is NaN, e5m2's
    /// top exponent infinity or NaN; then the sign.
    pub(super) fn fp8_decode(&mut self, r: &str, f: ferrotile_ir::numeric::Fp8) -> String {
        let m = f.mant();
        let (t, u, s) = (self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R));
        let (out, g) = (self.reg(RegClass::F), self.reg(RegClass::F));
        let (sub, special) = (self.reg(RegClass::P), self.reg(RegClass::P));
        self.line(format!("and.b32 {t}, {r}, 127;"));
        self.line(format!("shl.b32 {u}, {t}, {};", 23 - m));
        self.line(format!("add.u32 {u}, {u}, {};", (127 - f.bias()) << 23));
        self.line(format!("mov.b32 {out}, {u};"));
        self.line(format!("setp.lt.u32 {sub}, {t}, {};", 1u32 << m));
        self.line(format!("fma.rn.f32 {g}, {out}, 0f40000000, {};", f32_hex(-(f32::from_bits(f.min_normal_bits()) as f64))));
        self.line(format!("selp.f32 {out}, {g}, {out}, {sub};"));
        let top = 127 - ((1u32 << m) - 1); // the top exponent field's first code
        match f {
            ferrotile_ir::numeric::Fp8::E4M3 => {
                self.line(format!("setp.eq.u32 {special}, {t}, 127;"));
                self.line(format!("@{special} mov.b32 {out}, 0x7FFFFFFF;"));
            }
            ferrotile_ir::numeric::Fp8::E5M2 => {
                // (infinity for a zero mantissa, else a NaN)
                self.line(format!("setp.ge.u32 {special}, {t}, {top};"));
                self.line(format!("and.b32 {u}, {t}, {};", (1u32 << m) - 1));
                self.line(format!("shl.b32 {u}, {u}, {};", 23 - m));
                self.line(format!("or.b32 {u}, {u}, 0x7F800000;"));
                self.line(format!("@{special} mov.b32 {out}, {u};"));
            }
        }
        self.line(format!("and.b32 {s}, {r}, 128;"));
        self.line(format!("shl.b32 {s}, {s}, 24;"));
        self.line(format!("mov.b32 {u}, {out};"));
        self.line(format!("or.b32 {u}, {u}, {s};"));
        self.line(format!("mov.b32 {out}, {u};"));
        out
    }

    /// An f32 rounded to the nearest fp8 code, ties to even, saturating
    /// (NaN → `0x7F` with the sign): `ferrotile_ir::numeric::fp8_encode`'s
    /// steps, in a 32-bit register.
    pub(super) fn fp8_encode(&mut self, f: &str, fmt: ferrotile_ir::numeric::Fp8) -> String {
        let (m, sh) = (fmt.mant(), 23 - fmt.mant());
        let (b, a, s, lsb, r, code) =
            (self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R));
        let (af, sf) = (self.reg(RegClass::F), self.reg(RegClass::F));
        let (nan, sub) = (self.reg(RegClass::P), self.reg(RegClass::P));
        self.line(format!("mov.b32 {b}, {f};"));
        self.line(format!("and.b32 {a}, {b}, 0x7FFFFFFF;"));
        self.line(format!("shr.u32 {s}, {b}, 24;"));
        self.line(format!("and.b32 {s}, {s}, 128;"));
        self.line(format!("setp.gt.u32 {nan}, {a}, 0x7F800000;"));
        self.line(format!("min.u32 {a}, {a}, {};", fmt.max_bits()));
        // below the smallest normal: rint(|x| · 2^(bias − 1 + mant))
        self.line(format!("mov.b32 {af}, {a};"));
        self.line(format!("mul.rn.f32 {sf}, {af}, {};", f32_hex(fmt.subnormal_scale() as f64)));
        self.line(format!("cvt.rni.u32.f32 {code}, {sf};"));
        // else: the bits rounded to `mant` mantissa bits, re-biased
        self.line(format!("shr.u32 {lsb}, {a}, {sh};"));
        self.line(format!("and.b32 {lsb}, {lsb}, 1;"));
        self.line(format!("add.u32 {r}, {a}, {};", (1u32 << (sh - 1)) - 1));
        self.line(format!("add.u32 {r}, {r}, {lsb};"));
        self.line(format!("shr.u32 {r}, {r}, {sh};"));
        self.line(format!("sub.u32 {r}, {r}, {};", (127 - fmt.bias()) << m));
        self.line(format!("setp.lt.u32 {sub}, {a}, {};", fmt.min_normal_bits()));
        self.line(format!("selp.b32 {code}, {code}, {r}, {sub};"));
        self.line(format!("@{nan} mov.b32 {code}, 127;"));
        self.line(format!("or.b32 {code}, {code}, {s};"));
        code
    }

    /// Re-normalize an 8-bit integer held in 32 bits after arithmetic.
    pub(super) fn norm8(&mut self, r: &str, d: DType) {
        match d {
            DType::I8 => self.line(format!("cvt.s32.s8 {r}, {r};")),
            DType::U8 => self.line(format!("and.b32 {r}, {r}, 255;")),
            _ => {}
        }
    }

    /// Elementwise ops: register i of the result from register i of each
    /// operand (operands have the result's shape, hence its layout).
    /// An elementwise op computed once per distinct tuple of operand
    /// registers: registers that repeat (a tile loaded once per run of
    /// equal addresses, a broadcast) give repeated results, which share
    /// one register instead of recomputing it — ptxas does not always
    /// merge such copies. Values in a per-value layout take the plain path.
    pub(super) fn elementwise_once(&mut self, kind: &OpKind) -> R<Vec<String>> {
        let ops = kind.operands();
        if self.want.is_some() || ops.iter().any(|u| self.vlay.contains_key(u) || self.k.ty(*u).rank() == 0) {
            return self.elementwise(kind);
        }
        let regs: Vec<Vec<String>> = ops.iter().map(|u| self.get(*u)).collect();
        let n = regs[0].len();
        if regs.iter().any(|r| r.len() != n) {
            return self.elementwise(kind);
        }
        let mut first: HashMap<Vec<&String>, usize> = HashMap::new();
        let mut class = vec![];
        let mut heads = vec![];
        for i in 0..n {
            let key: Vec<&String> = regs.iter().map(|r| &r[i]).collect();
            let next = heads.len();
            let c = *first.entry(key).or_insert(next);
            if c == next {
                heads.push(i);
            }
            class.push(c);
        }
        if heads.len() == n {
            return self.elementwise(kind);
        }
        // the op on each operand's registers at the heads
        let at_heads = regs.iter().map(|r| heads.iter().map(|&i| r[i].clone()).collect()).collect();
        let out = crate::plan::remat::with_bound(self, &ops, at_heads, |em| em.elementwise(kind))?;
        Ok(class.iter().map(|&c| out[c].clone()).collect())
    }

    pub(super) fn elementwise(&mut self, kind: &OpKind) -> R<Vec<String>> {
        Ok(match kind {
            OpKind::Binary { op: o, a, b } => self.binary(*o, *a, *b)?,
            OpKind::Cmp { op: o, a, b } => self.cmp(*o, *a, *b),
            OpKind::Unary { op: o, x } => self.unary(*o, *x)?,
            OpKind::Fma { a, b, c } => {
                let d = self.dtype(*a);
                let (ra, rb, rc) = (self.get(*a), self.get(*b), self.get(*c));
                let mut out = vec![];
                for i in 0..ra.len() {
                    let (x, y, z) = (self.widen_f32(&ra[i], d), self.widen_f32(&rb[i], d), self.widen_f32(&rc[i], d));
                    let f = self.reg(RegClass::F);
                    self.line(format!("fma.rn.f32 {f}, {x}, {y}, {z};"));
                    out.push(self.narrow_f32(&f, d));
                }
                out
            }
            OpKind::Select { cond, a, b } => {
                let c = reg_class(self.elem(*a));
                let (rc, ra, rb) = (self.get(*cond), self.get(*a), self.get(*b));
                let mut out = vec![];
                for i in 0..ra.len() {
                    let d = self.reg(c);
                    match c {
                        RegClass::P => {
                            let t = self.reg(RegClass::P);
                            let u = self.reg(RegClass::P);
                            self.line(format!("and.pred {t}, {}, {};", rc[i], ra[i]));
                            self.line(format!("not.pred {u}, {};", rc[i]));
                            self.line(format!("and.pred {u}, {u}, {};", rb[i]));
                            self.line(format!("or.pred {d}, {t}, {u};"));
                        }
                        _ => {
                            self.line(format!("selp.{} {d}, {}, {}, {};", c.mov_ty(), ra[i], rb[i], rc[i]));
                        }
                    }
                    out.push(d);
                }
                out
            }
            OpKind::Cast { x, to } => self.cast(*x, *to)?,
            OpKind::Bitcast { x, to } => {
                // (registers are typed by class: f32 in %f, 32-bit ints in %r)
                let c = reg_class(Elem::Val(*to));
                let rx = self.get(*x);
                let mut out = vec![];
                for r in rx {
                    let d = self.reg(c);
                    self.line(format!("mov.b32 {d}, {r};"));
                    out.push(d);
                }
                out
            }
            OpKind::AddPtr { ptr, offset } => {
                let es = self.dtype(*ptr).size_bytes();
                let od = self.dtype(*offset);
                let (rp, ro) = (self.get(*ptr), self.get(*offset));
                if self.o.affine_addresses {
                    let k = self.remat.int_constant(*offset);
                    return Ok(self.add_ptr_affine(&rp, &ro, od, es, k));
                }
                let mut out = vec![];
                for i in 0..rp.len() {
                    let d = self.reg(RegClass::Rd);
                    let (src, form) = self.offset_mad(od, &ro[i]);
                    self.line(format!("mad.{form} {d}, {src}, {es}, {};", rp[i]));
                    out.push(d);
                }
                out
            }
            _ => return self.err(format!("not an elementwise op: {kind:?}")),
        })
    }

    /// The operand and `mad` form that add offset register `o` of dtype
    /// `od` (times the element size) to a pointer: an offset extended
    /// from 32 bits as one widening multiply-add from the 32-bit register
    /// (`IMAD.WIDE`, where the 64-bit one takes a sign shift and three
    /// multiply-adds; `PtxOptions::wide_offsets`).
    pub(super) fn offset_mad(&mut self, od: DType, o: &str) -> (String, &'static str) {
        let w = if self.o.wide_offsets { self.wide32.get(o).cloned() } else { None };
        match (od, w) {
            (DType::I64, Some((r, s))) => {
                self.wide_uses += 1;
                (r, if s { "wide.s32" } else { "wide.u32" })
            }
            (DType::I64, None) => (o.to_string(), "lo.s64"),
            (DType::U32 | DType::U8, _) => (o.to_string(), "wide.u32"),
            _ => (o.to_string(), "wide.s32"),
        }
    }

    /// A 32-bit constant in a register (set in the prologue, once per value):
    /// packed 16-bit instructions take no immediates.
    pub(super) fn b32_const(&mut self, v: u32) -> String {
        if let Some(r) = self.b32_consts.get(&v) {
            return r.clone();
        }
        let r = self.reg(RegClass::R);
        let _ = writeln!(self.pro, "\tmov.b32 {r}, {v:#010X};");
        self.b32_consts.insert(v, r.clone());
        r
    }

    /// `a o b` on 16-bit floats two elements at a time, as one
    /// `{add,sub,mul}.rn.{f16x2,bf16x2}` per pair of registers (on sm_80,
    /// bf16 as `fma.rn.bf16x2` with 1, −1 or −0): the same values as the
    /// f32 operation rounded once to 16 bits (rounding twice, through a
    /// format of at least 2p + 2 bits, is innocuous for +, − and ×: f32's
    /// 24 ≥ 2·11 + 2), so the semantics of the widened op hold. The halves of each result stay
    /// known as its word's (`unpack_b16`), so a consumer that packs them
    /// again (a tensor-core fragment, the next packed op, a vector store)
    /// takes the word. None: not a 16-bit float add, sub or mul.
    fn binary_x2(&mut self, o: BinOp, d: DType, ra: &[String], rb: &[String]) -> Option<Vec<String>> {
        if !matches!(d, DType::F16 | DType::BF16) || !matches!(o, BinOp::Add | BinOp::Sub | BinOp::Mul) || ra.len() < 2 || ra.len() != rb.len() {
            return None;
        }
        let ty = if d == DType::BF16 { "bf16x2" } else { "f16x2" };
        let mut out = Vec::with_capacity(ra.len());
        for i in (0..ra.len()).step_by(2) {
            if i + 1 == ra.len() {
                // (an odd register out: widened, as usual)
                let (fx, fy) = (self.widen_f32(&ra[i], d), self.widen_f32(&rb[i], d));
                let f = self.reg(RegClass::F);
                let ins = match o {
                    BinOp::Add => "add.rn.f32",
                    BinOp::Sub => "sub.rn.f32",
                    _ => "mul.rn.f32",
                };
                self.line(format!("{ins} {f}, {fx}, {fy};"));
                out.push(self.narrow_f32(&f, d));
                break;
            }
            if o == BinOp::Sub {
                if let (Some(h0), Some(h1)) = (self.fused_int_sub(&ra[i], &rb[i], d), self.fused_int_sub(&ra[i + 1], &rb[i + 1], d)) {
                    out.push(h0);
                    out.push(h1);
                    continue;
                }
            }
            let (x, y) = (self.pack_b16(&ra[i], &ra[i + 1]), self.pack_b16(&rb[i], &rb[i + 1]));
            // the difference of two small integers converted alike
            // (`small_ints_to_16bit`): the two magic numbers cancel, so
            // subtract the words before they were taken off — exact, the
            // difference being an integer the target holds exactly
            let my = if o == BinOp::Sub { self.magic_words.get(&y).cloned().or_else(|| self.magic_splat(&rb[i], &rb[i + 1])) } else { None };
            let (x, y) = match (o, self.magic_words.get(&x).cloned(), my) {
                (BinOp::Sub, Some((mx, lx, tx)), Some((my, ly, ty))) if lx == ly && tx == d && ty == d => (mx, my),
                _ => (x, y),
            };
            let w = self.reg(RegClass::R);
            if d == DType::BF16 && self.o.sm < 90 {
                // (bf16x2 add, sub and mul are sm_90; fma is sm_80)
                match o {
                    BinOp::Add => {
                        let c = self.b32_const(0x3F80_3F80);
                        self.line(format!("fma.rn.bf16x2 {w}, {x}, {c}, {y};"))
                    }
                    BinOp::Sub => {
                        let c = self.b32_const(0xBF80_BF80);
                        self.line(format!("fma.rn.bf16x2 {w}, {y}, {c}, {x};"))
                    }
                    _ => {
                        let c = self.b32_const(0x8000_8000);
                        self.line(format!("fma.rn.bf16x2 {w}, {x}, {y}, {c};"))
                    }
                }
            } else {
                let ins = match o {
                    BinOp::Add => "add",
                    BinOp::Sub => "sub",
                    _ => "mul",
                };
                self.line(format!("{ins}.rn.{ty} {w}, {x}, {y};"));
            }
            let (lo, hi) = self.unpack_b16(&w);
            out.push(lo);
            out.push(hi);
        }
        Some(out)
    }

    /// A pair that is one half of a magic-number word twice (`h, h`: a
    /// value constant along the pair — a zero point broadcast along K, in
    /// a layout whose pairs run along K): that half before the magic
    /// number was taken off, in both halves of a word (one `prmt`, once
    /// per half in scope), with the word's offset and target — so `q − z`
    /// subtracts the raw words as a pair of distinct values does.
    fn magic_splat(&mut self, lo: &str, hi: &str) -> Option<(String, i64, DType)> {
        if lo != hi {
            return None;
        }
        let (w, high) = self.h_from_word.get(lo).cloned()?;
        let (m, l, t) = self.magic_words.get(&w).cloned()?;
        let key = (m.clone(), if high { "splat-hi" } else { "splat-lo" }.to_string());
        if let Some(r) = self.packed.iter().rev().find_map(|p| p.get(&key)) {
            return Some((r.clone(), l, t));
        }
        let r = self.reg(RegClass::R);
        self.line(format!("prmt.b32 {r}, {m}, {m}, {};", if high { "0x3232" } else { "0x1010" }));
        if let Some(p) = self.packed.last_mut() {
            p.insert(key, r.clone());
        }
        Some((r, l, t))
    }

    pub(super) fn binary(&mut self, o: BinOp, a: V, b: V) -> R<Vec<String>> {
        let d = self.dtype(a);
        if self.o.packed_16bit {
            let (ra, rb) = (self.get(a), self.get(b));
            if let Some(out) = self.binary_x2(o, d, &ra, &rb) {
                return Ok(out);
            }
        }
        // a constant divisor other than 0 and -1 needs none of the guards
        // below and goes to ptxas as an immediate, which it strength-reduces
        // (a shift for powers of two, a multiply-high otherwise)
        let const_divisor = if matches!(o, BinOp::Div | BinOp::Rem) && d.is_int() && d != DType::Bool {
            self.remat.int_constant(b).filter(|c| *c != 0 && *c != -1)
        } else {
            None
        };
        let (ra, rb) = (self.get(a), self.get(b));
        let (ka, kb) = (self.remat.int_constant(a), self.remat.int_constant(b));
        let mut out = vec![];
        for i in 0..ra.len() {
            let (x, y) = (&ra[i], &rb[i]);
            if matches!(d, DType::I32 | DType::U32) {
                // constants known while emitting: folded here, so that the
                // shifts of an unpack are immediates this emitter can see
                let cx = self.reg_const.get(x).copied().or(ka);
                let cy = self.reg_const.get(y).copied().or(kb);
                if let Some(v) = fold_i32(o, d, cx, cy).or_else(|| self.index_residue(o, (x, cx), (y, cy))) {
                    let r = self.reg(RegClass::R);
                    self.line(format!("mov.b32 {r}, {v};"));
                    self.reg_const.insert(r.clone(), v);
                    out.push(r);
                    continue;
                }
                if o == BinOp::Shr {
                    if let Some(c) = cy.filter(|c| (0..32).contains(c)) {
                        let r = self.reg(RegClass::R);
                        self.line(format!("shr.{} {r}, {x}, {c};", if d == DType::I32 { "s32" } else { "u32" }));
                        self.shifted.insert(r.clone(), (x.clone(), c));
                        out.push(r);
                        continue;
                    }
                }
            }
            if d == DType::I64 && o == BinOp::Mul && self.o.wide_offsets {
                // two extended 32-bit values: one widening multiply
                if let (Some((wx, sx)), Some((wy, sy))) = (self.wide32.get(x).cloned(), self.wide32.get(y).cloned()) {
                    if sx == sy {
                        self.wide_uses += 1;
                        let r = self.reg(RegClass::Rd);
                        self.line(format!("mul.wide.{}32 {r}, {wx}, {wy};", if sx { "s" } else { "u" }));
                        out.push(r);
                        continue;
                    }
                }
            }
            let r = if d.is_float() {
                let (fx, fy) = (self.widen_f32(x, d), self.widen_f32(y, d));
                let f = self.reg(RegClass::F);
                let ins = match o {
                    BinOp::Add => "add.rn.f32",
                    BinOp::Sub => "sub.rn.f32",
                    BinOp::Mul => "mul.rn.f32",
                    BinOp::Div => "div.rn.f32",
                    BinOp::Max => "max.f32",
                    BinOp::Min => "min.f32",
                    _ => return self.err(format!("{o:?} on floats")),
                };
                self.line(format!("{ins} {f}, {fx}, {fy};"));
                self.narrow_f32(&f, d)
            } else if d == DType::Bool {
                let p = self.reg(RegClass::P);
                let ins = match o {
                    BinOp::And | BinOp::LAnd | BinOp::Min => "and",
                    BinOp::Or | BinOp::LOr | BinOp::Max => "or",
                    BinOp::Xor => "xor",
                    _ => return self.err(format!("{o:?} on bool")),
                };
                self.line(format!("{ins}.pred {p}, {x}, {y};"));
                p
            } else {
                let c = reg_class(Elem::Val(d));
                let r = self.reg(c);
                let t = ity(d);
                let bits = if d == DType::I64 { 64 } else { 32 };
                let ins = match o {
                    BinOp::Add => format!("add.{t}"),
                    BinOp::Sub => format!("sub.{t}"),
                    BinOp::Mul => format!("mul.lo.{t}"),
                    BinOp::Div => format!("div.{t}"),
                    BinOp::Rem => format!("rem.{t}"),
                    BinOp::And => format!("and.b{bits}"),
                    BinOp::Or => format!("or.b{bits}"),
                    BinOp::Xor => format!("xor.b{bits}"),
                    BinOp::Max => format!("max.{t}"),
                    BinOp::Min => format!("min.{t}"),
                    BinOp::Shl | BinOp::Shr => {
                        // shift amount: 32-bit; amounts ≥ width saturate (PTX clamps)
                        let amt = if d == DType::I64 {
                            let a = self.reg(RegClass::R);
                            let big = self.reg(RegClass::P);
                            self.line(format!("cvt.u32.u64 {a}, {y};"));
                            self.line(format!("setp.gt.u64 {big}, {y}, 63;"));
                            self.line(format!("selp.b32 {a}, 64, {a}, {big};"));
                            a
                        } else {
                            y.clone()
                        };
                        let st = if o == BinOp::Shl {
                            format!("shl.b{bits}")
                        } else if d.is_signed() {
                            format!("shr.s{bits}")
                        } else {
                            format!("shr.u{bits}")
                        };
                        // 8-bit types: width is 8, not 32
                        if matches!(d, DType::I8 | DType::U8) {
                            let big = self.reg(RegClass::P);
                            let a2 = self.reg(RegClass::R);
                            self.line(format!("setp.gt.u32 {big}, {amt}, 8;"));
                            self.line(format!("selp.b32 {a2}, 8, {amt}, {big};"));
                            self.line(format!("{st} {r}, {x}, {a2};"));
                        } else {
                            self.line(format!("{st} {r}, {x}, {amt};"));
                        }
                        self.norm8(&r, d);
                        out.push(r);
                        continue;
                    }
                    BinOp::LAnd | BinOp::LOr => return self.err("logical op on integers"),
                };
                if let Some(dv) = const_divisor.filter(|c| *c > 1 && (*c as u64).is_power_of_two()) {
                    // by 2^s: a shift, rounding toward zero for signed
                    // dividends (add 2^s − 1 to negative ones first)
                    let sh = dv.trailing_zeros();
                    let q = if d.is_signed() {
                        let (t, q) = (self.reg(c), self.reg(c));
                        self.line(format!("shr.s{bits} {t}, {x}, {};", bits - 1));
                        self.line(format!("shr.u{bits} {t}, {t}, {};", bits as u32 - sh));
                        self.line(format!("add.s{bits} {t}, {x}, {t};"));
                        self.line(format!("shr.s{bits} {q}, {t}, {sh};"));
                        q
                    } else {
                        let q = self.reg(c);
                        self.line(format!("shr.u{bits} {q}, {x}, {sh};"));
                        q
                    };
                    if o == BinOp::Div {
                        self.line(format!("mov.b{bits} {r}, {q};"));
                    } else {
                        // x − q·2^s
                        let t = self.reg(c);
                        self.line(format!("shl.b{bits} {t}, {q}, {sh};"));
                        self.line(format!("sub.s{bits} {r}, {x}, {t};"));
                    }
                } else if let Some(dv) = const_divisor {
                    self.line(format!("{ins} {r}, {x}, {dv};"));
                } else if matches!(o, BinOp::Div | BinOp::Rem) {
                    // one semantics on every backend (docs/semantics.md):
                    // x / 0 = x, x % 0 = 0, MIN / -1 = MIN, MIN % -1 = 0 —
                    // divide by 1 instead of 0 (and of -1: x % 1 = 0; the
                    // quotient is then negated, wrapping)
                    let (odd, y1) = (self.reg(RegClass::P), self.reg(c));
                    self.line(format!("setp.eq.{t} {odd}, {y}, 0;"));
                    if d.is_signed() {
                        self.line(format!("setp.eq.or.{t} {odd}, {y}, -1, {odd};"));
                    }
                    self.line(format!("selp.b{bits} {y1}, 1, {y}, {odd};"));
                    self.line(format!("{ins} {r}, {x}, {y1};"));
                    if d.is_signed() && o == BinOp::Div {
                        let (m1, neg) = (self.reg(RegClass::P), self.reg(c));
                        self.line(format!("setp.eq.{t} {m1}, {y}, -1;"));
                        self.line(format!("neg.{t} {neg}, {x};"));
                        self.line(format!("selp.b{bits} {r}, {neg}, {r}, {m1};"));
                    }
                } else {
                    self.line(format!("{ins} {r}, {x}, {y};"));
                    if matches!(o, BinOp::Add | BinOp::Sub | BinOp::Mul) {
                        let kx = self.reg_const.get(x).copied().or(ka);
                        let ky = self.reg_const.get(y).copied().or(kb);
                        self.affine_binary(o, d, &r, (x, kx), (y, ky));
                    }
                }
                self.norm8(&r, d);
                r
            };
            out.push(r);
        }
        Ok(out)
    }

    /// `x & (2^s − 1)` of an index register whose per-thread offset is a
    /// multiple of `2^s` (`idx_residue`): the register's constant residue.
    fn index_residue(&self, o: BinOp, (x, cx): (&String, Option<i64>), (y, cy): (&String, Option<i64>)) -> Option<i64> {
        if o != BinOp::And {
            return None;
        }
        let (r, m) = match (cx, cy) {
            (None, Some(m)) => (x, m),
            (Some(m), None) => (y, m),
            _ => return None,
        };
        let (align, c) = *self.idx_residue.get(r)?;
        (m >= 0 && (m as u64 + 1).is_power_of_two() && (align as u64).is_multiple_of(m as u64 + 1)).then_some(c as i64 & m)
    }

    pub(super) fn cmp(&mut self, o: CmpOp, a: V, b: V) -> Vec<String> {
        let d = self.dtype(a);
        let ptr = self.elem(a).is_ptr();
        let (ra, rb) = (self.get(a), self.get(b));
        let mut out = vec![];
        for i in 0..ra.len() {
            let p = self.reg(RegClass::P);
            if ptr {
                // addresses (the `guard` pass's bounds checks)
                self.line(format!("setp.{}.u64 {p}, {}, {};", cmp_s(o, false), ra[i], rb[i]));
            } else if d == DType::Bool {
                // compare as integers 0/1
                let (x, y) = (self.reg(RegClass::R), self.reg(RegClass::R));
                self.line(format!("selp.u32 {x}, 1, 0, {};", ra[i]));
                self.line(format!("selp.u32 {y}, 1, 0, {};", rb[i]));
                self.line(format!("setp.{}.u32 {p}, {x}, {y};", cmp_s(o, false)));
            } else if d.is_float() {
                let (x, y) = (self.widen_f32(&ra[i], d), self.widen_f32(&rb[i], d));
                self.line(format!("setp.{}.f32 {p}, {x}, {y};", cmp_s(o, true)));
            } else {
                self.line(format!("setp.{}.{} {p}, {}, {};", cmp_s(o, false), ity(d), ra[i], rb[i]));
            }
            out.push(p);
        }
        out
    }

    pub(super) fn unary(&mut self, o: UnOp, x: V) -> R<Vec<String>> {
        let d = self.dtype(x);
        let rx = self.get(x);
        let mut out = vec![];
        for r in rx {
            let o_r = if d.is_float() {
                let f = self.widen_f32(&r, d);
                let y = self.funary(o, &f)?;
                self.narrow_f32(&y, d)
            } else if d == DType::Bool {
                let p = self.reg(RegClass::P);
                self.line(format!("not.pred {p}, {r};"));
                p
            } else {
                let c = reg_class(Elem::Val(d));
                let y = self.reg(c);
                let bits = if d == DType::I64 { 64 } else { 32 };
                match o {
                    UnOp::Neg => self.line(format!("neg.s{bits} {y}, {r};")),
                    UnOp::Not => self.line(format!("not.b{bits} {y}, {r};")),
                    UnOp::Abs if !d.is_signed() => self.line(format!("mov.b{bits} {y}, {r};")),
                    UnOp::Abs => self.line(format!("abs.s{bits} {y}, {r};")),
                    _ => return self.err(format!("{} on integers", o.name())),
                }
                self.norm8(&y, d);
                y
            };
            out.push(o_r);
        }
        Ok(out)
    }

    /// Integer → float without the conversion unit, where the axis
    /// analysis bounds `x` to `[lo, hi]` with `hi − lo < 2²³`: `x − lo`
    /// OR'd into the mantissa of 2²³ is the f32 `2²³ + x − lo`, and one
    /// subtraction of `2²³ − lo` leaves `x` — exact, so rounding to a
    /// 16-bit float after it is the one rounding the cast asks for (taken
    /// only where every value in the range is exact in the target: then
    /// nothing rounds at all). `I2F` runs at a quarter of the FP32 rate on
    /// sm_90, and the 16-bit targets otherwise take three conversions.
    /// Register `i` of `y` where `x = y & m` (a constant `m`), when `x`'s
    /// registers are `y`'s one to one: then `(y & m) | 2²³` is one `lop3`.
    fn masked_source(&mut self, x: V, i: usize, n: usize) -> Option<(String, i64)> {
        let OpKind::Binary { op: BinOp::And, a, b } = self.remat.def_of(x)?.kind.clone() else { return None };
        let (y, m) = match (self.remat.int_constant(a), self.remat.int_constant(b)) {
            (_, Some(m)) => (a, m),
            (Some(m), _) => (b, m),
            _ => return None,
        };
        if !(0..1 << 23).contains(&m) || self.vlay.contains_key(&y) || self.vlay.contains_key(&x) || self.k.ty(y).rank() == 0 {
            return None;
        }
        let ry = self.get(y);
        (ry.len() == n).then(|| (ry[i].clone(), m))
    }

    fn small_int_to_float(&mut self, x: V, r: &str, to: DType, (i, n): (usize, usize)) -> Option<String> {
        let from = self.dtype(x);
        if !to.is_float() || from == DType::I64 || from == DType::Bool {
            return None;
        }
        let (Some(lo), Some(hi)) = self.facts.get(&x)?.range else { return None };
        const M: i64 = 1 << 23;
        let exact = match to {
            DType::F32 => M,
            DType::F16 => 2048,
            DType::BF16 => 256,
            _ => return None,
        };
        if hi - lo >= M || lo.abs() >= M || hi.abs() > exact || lo.abs() > exact {
            return None;
        }
        let t = self.reg(RegClass::R);
        if lo != 0 {
            self.line(format!("add.s32 {t}, {r}, {};", -lo));
            self.line(format!("or.b32 {t}, {t}, 1258291200;"));
        } else if let Some((y, m)) = self.masked_source(x, i, n) {
            match self.shifted.get(&y).cloned() {
                // a whole byte, `(w >> 8j) & 255`, going on to a 16-bit
                // float: one `prmt` picks it and puts 2²³'s exponent byte
                // above it (no shift). Not for an f32 result: the `prmt`'s
                // constant takes a register (`lop3` encodes it), which
                // tipped the 8-warp W8 GEMVs at three stages into spilling
                Some((w, c)) if to != DType::F32 && m == 255 && c % 8 == 0 && (0..32).contains(&c) => {
                    self.line(format!("prmt.b32 {t}, {w}, 1258291200, {:#06x};", 0x7540 | (c / 8)));
                }
                // (y & m) | 2²³ in one instruction (ptxas does not fuse the two)
                _ => self.line(format!("lop3.b32 {t}, {y}, {m}, 1258291200, 0xEA;")),
            }
        } else {
            self.line(format!("or.b32 {t}, {r}, 1258291200;"));
        }
        let fm = self.reg(RegClass::F);
        self.line(format!("mov.b32 {fm}, {t};"));
        let f = self.reg(RegClass::F);
        self.line(format!("sub.f32 {f}, {fm}, 0f{:08X};", ((M - lo) as f32).to_bits()));
        if to == DType::F32 {
            return Some(f);
        }
        let h = self.narrow_f32(&f, to);
        self.magic_f32.insert(h.clone(), (fm, lo, hi));
        Some(h)
    }

    /// `(x as T) − (y as T)` for 16-bit `T`, where `x`'s register `a` was
    /// converted through f32 by [`Self::small_int_to_float`] and `b` is
    /// either such a conversion with the same offset or a constant
    /// integer: one f32 subtraction of the two magic forms (the magic
    /// numbers cancel; exact — both below 2²⁴) rounded once to `T`. The
    /// same value as the 16-bit subtraction, as both conversions were
    /// exact (that path is taken only where every value of the range is
    /// exact in `T`): `round(round(x) − round(y)) = round(x − y)`. Saves
    /// the packed subtraction after the conversions (a dequantized
    /// `q − z` on the 8-bit path). None: not such a pair.
    fn fused_int_sub(&mut self, a: &str, b: &str, d: DType) -> Option<String> {
        let (ma, la, _) = self.magic_f32.get(a).cloned()?;
        const M: i64 = 1 << 23;
        // (a conversion whose range is one value is that constant)
        let bc = match self.magic_f32.get(b) {
            Some((_, lb, hb)) if lb == hb => Some(*lb as f64),
            _ => self.h_const.get(b).copied(),
        };
        let subtrahend = match (self.magic_f32.get(b).cloned(), bc) {
            (Some((mb, lb, _)), None) if lb == la => mb,
            // 2²³ − lo + c: an integer below 2²⁴, exact in f32
            (_, Some(c)) if c.fract() == 0.0 && c.abs() <= (1 << 22) as f64 && la.abs() < 1 << 22 => {
                format!("0f{:08X}", (((M - la) as f64 + c) as f32).to_bits())
            }
            _ => return None,
        };
        let f = self.reg(RegClass::F);
        self.line(format!("sub.f32 {f}, {ma}, {subtrahend};"));
        Some(self.narrow_f32(&f, d))
    }

    /// Small integers to a 16-bit float two at a time: the pair's low
    /// halves in one word (`prmt`; with `y & m` sources, the mask applied
    /// to both in the `lop3` that ORs in the magic exponent), then one
    /// packed subtraction of the magic number — exact, as in
    /// [`Self::small_int_to_float`], where every value of the range is
    /// exact in the target (bf16: a range of width < 128 and |x| ≤ 256;
    /// f16: < 1024 and |x| ≤ 2048). Three instructions per pair where the
    /// scalar path takes three per element. None: not such a cast.
    fn small_ints_to_16bit(&mut self, x: V, rx: &[String], to: DType) -> Option<Vec<String>> {
        let from = self.dtype(x);
        if !matches!(to, DType::F16 | DType::BF16) || !from.is_int() || from == DType::I64 || from == DType::Bool || rx.len() < 2 || !rx.len().is_multiple_of(2)
        {
            return None;
        }
        let (Some(lo), Some(hi)) = self.facts.get(&x)?.range else { return None };
        let (width, exact, magic, mhex) = if to == DType::BF16 { (128i64, 256i64, 128i64, 0x4300u32) } else { (1024, 2048, 1024, 0x6400) };
        if hi - lo >= width || lo.abs() > exact || hi.abs() > exact {
            return None;
        }
        let n = rx.len();
        // (the value subtracted: magic − lo, exact in the target as an integer ≤ 2·magic)
        let sub_bits = |v: i64| -> u32 {
            let f = (v as f32).to_bits();
            if to == DType::BF16 {
                f >> 16
            } else {
                half::f16::from_f32(v as f32).to_bits() as u32
            }
        };
        let sb = sub_bits(magic - lo);
        let (ty, one) = if to == DType::BF16 { ("bf16x2", 0x3F80u32) } else { ("f16x2", 0x3C00) };
        let mut out = Vec::with_capacity(n);
        for i in (0..n).step_by(2) {
            let srcs = if lo == 0 { (self.masked_source(x, i, n), self.masked_source(x, i + 1, n)) } else { (None, None) };
            let word = self.reg(RegClass::R);
            // (both `(w >> c) & m` with shifts known here and a field of at
            // most 8 bits inside one byte: the two bytes picked by one
            // `prmt`, then one shift of the pair — none for a field that
            // starts a byte)
            let fields = match &srcs {
                (Some((ya, ma)), Some((yb, mb))) if ma == mb && *ma < 256 => match (self.shifted.get(ya).cloned(), self.shifted.get(yb).cloned()) {
                    (Some((wa, ca)), Some((wb, cb)))
                        if (ca % 8) + 64 - (*ma as u64).leading_zeros() as i64 <= 8 && (cb % 8) + 64 - (*ma as u64).leading_zeros() as i64 <= 8 =>
                    {
                        Some((wa, ca, wb, cb, *ma))
                    }
                    _ => None,
                },
                _ => None,
            };
            // both fields of one word, the second 16 bits above the first
            // (a word whose fields are paired: `quant::pair_fields`): the
            // first's shifted word already holds the pair in its halves,
            // and one `lop3` masks both and ORs in the magic number
            let paired = match &srcs {
                (Some((ya, ma)), Some((yb, mb))) if ma == mb && *ma < 1 << 16 => {
                    let at = |em: &Self, y: &String| em.shifted.get(y).cloned().unwrap_or_else(|| (y.clone(), 0));
                    let ((wa, ca), (wb, cb)) = (at(self, ya), at(self, yb));
                    let width = 64 - (*ma as u64).leading_zeros() as i64;
                    (wa == wb && cb == ca + 16 && ca >= 0 && ca + 16 + width <= 32).then(|| (ya.clone(), *ma))
                }
                _ => None,
            };
            match srcs {
                _ if paired.is_some() => {
                    let (y, m) = paired.expect("checked");
                    self.line(format!("lop3.b32 {word}, {y}, {}, {}, 0xEA;", m | (m << 16), mhex | (mhex << 16)));
                }
                _ if fields.is_some() => {
                    let (wa, ca, wb, cb, m) = fields.expect("checked");
                    // both fields moved to the same bit offset within their byte
                    // (the lower of the two offsets within a byte)
                    let lo_s = (ca % 8).min(cb % 8);
                    let align = |em: &mut Self, w: &str, c: i64| -> String {
                        // (a right shift by a multiple of 8 is a byte pick: left to `prmt`)
                        let extra = (c % 8) - lo_s;
                        if extra == 0 {
                            return w.to_string();
                        }
                        let t = em.reg(RegClass::R);
                        em.line(format!("shr.u32 {t}, {w}, {extra};"));
                        t
                    };
                    let (xa, xb) = (align(self, &wa, ca), align(self, &wb, cb));
                    let (ba, bb) = ((ca / 8) as u32, (cb / 8) as u32);
                    // result bytes: a's byte ba (and the next), b's byte bb (and the next)
                    let sel = ba | (((ba + 1) & 3) << 4) | ((4 + bb) << 8) | ((4 + ((bb + 1) & 3)) << 12);
                    let t = self.reg(RegClass::R);
                    self.line(format!("prmt.b32 {t}, {xa}, {xb}, {sel:#06x};"));
                    let t = if lo_s != 0 {
                        let u = self.reg(RegClass::R);
                        self.line(format!("shr.u32 {u}, {t}, {lo_s};"));
                        u
                    } else {
                        t
                    };
                    self.line(format!("lop3.b32 {word}, {t}, {}, {}, 0xEA;", m | (m << 16), mhex | (mhex << 16)));
                }
                (Some((ya, ma)), Some((yb, mb))) if ma == mb && ma < 1 << 16 => {
                    let t = self.reg(RegClass::R);
                    self.line(format!("prmt.b32 {t}, {ya}, {yb}, 0x5410;"));
                    self.line(format!("lop3.b32 {word}, {t}, {}, {}, 0xEA;", ma | (ma << 16), mhex | (mhex << 16)));
                }
                _ => {
                    let (a, b) = if lo != 0 {
                        let (a, b) = (self.reg(RegClass::R), self.reg(RegClass::R));
                        self.line(format!("add.s32 {a}, {}, {};", rx[i], -lo));
                        self.line(format!("add.s32 {b}, {}, {};", rx[i + 1], -lo));
                        (a, b)
                    } else {
                        (rx[i].clone(), rx[i + 1].clone())
                    };
                    let t = self.reg(RegClass::R);
                    self.line(format!("prmt.b32 {t}, {a}, {b}, 0x5410;"));
                    self.line(format!("or.b32 {word}, {t}, {};", mhex | (mhex << 16)));
                }
            }
            let w = self.reg(RegClass::R);
            if to == DType::BF16 && self.o.sm < 90 {
                let (c1, c2) = (self.b32_const(one | (one << 16)), self.b32_const((sb | 0x8000) | ((sb | 0x8000) << 16)));
                self.line(format!("fma.rn.bf16x2 {w}, {word}, {c1}, {c2};"));
            } else {
                let c = self.b32_const(sb | (sb << 16));
                self.line(format!("sub.rn.{ty} {w}, {word}, {c};"));
            }
            self.magic_words.insert(w.clone(), (word.clone(), lo, to));
            let (a, b) = self.unpack_b16(&w);
            out.push(a);
            out.push(b);
        }
        Some(out)
    }

    pub(super) fn cast(&mut self, x: V, to: DType) -> R<Vec<String>> {
        let from = self.dtype(x);
        let rx = self.get(x);
        let n = rx.len();
        if self.o.packed_16bit {
            if let Some(out) = self.small_ints_to_16bit(x, &rx, to) {
                return Ok(out);
            }
        }
        let mut out = vec![];
        for (i, r) in rx.into_iter().enumerate() {
            let o = if from == to {
                r.clone()
            } else if from == DType::Bool {
                match reg_class(Elem::Val(to)) {
                    RegClass::F => {
                        let f = self.reg(RegClass::F);
                        self.line(format!("selp.f32 {f}, 0f3F800000, 0f00000000, {r};"));
                        f
                    }
                    RegClass::H => {
                        let f = self.reg(RegClass::F);
                        self.line(format!("selp.f32 {f}, 0f3F800000, 0f00000000, {r};"));
                        self.narrow_f32(&f, to)
                    }
                    // (fp8: held as codes in 32-bit registers)
                    RegClass::R if to.fp8().is_some() => {
                        let f = self.reg(RegClass::F);
                        self.line(format!("selp.f32 {f}, 0f3F800000, 0f00000000, {r};"));
                        self.narrow_f32(&f, to)
                    }
                    RegClass::Rd => {
                        let y = self.reg(RegClass::Rd);
                        self.line(format!("selp.b64 {y}, 1, 0, {r};"));
                        y
                    }
                    _ => {
                        let y = self.reg(RegClass::R);
                        self.line(format!("selp.b32 {y}, 1, 0, {r};"));
                        y
                    }
                }
            } else if to == DType::Bool {
                let p = self.reg(RegClass::P);
                if from.is_float() {
                    let f = self.widen_f32(&r, from);
                    self.line(format!("setp.neu.f32 {p}, {f}, 0f00000000;"));
                } else {
                    self.line(format!("setp.ne.{} {p}, {r}, 0;", if from == DType::I64 { "s64" } else { "s32" }));
                }
                p
            } else if from.is_float() && to.is_float() {
                let f = self.widen_f32(&r, from);
                self.narrow_f32(&f, to)
            } else if from.is_float() {
                let f0 = self.widen_f32(&r, from);
                // NaN converts to 0 (cvt.rzi leaves it implementation-defined for 64-bit)
                let f = self.reg(RegClass::F);
                let nan = self.reg(RegClass::P);
                self.line(format!("setp.nan.f32 {nan}, {f0}, {f0};"));
                self.line(format!("selp.f32 {f}, 0f00000000, {f0}, {nan};"));
                match to {
                    DType::I64 => {
                        let y = self.reg(RegClass::Rd);
                        self.line(format!("cvt.rzi.s64.f32 {y}, {f};"));
                        y
                    }
                    DType::I32 | DType::I8 => {
                        let y = self.reg(RegClass::R);
                        self.line(format!("cvt.rzi.s32.f32 {y}, {f};"));
                        if to == DType::I8 {
                            self.line(format!("max.s32 {y}, {y}, -128;"));
                            self.line(format!("min.s32 {y}, {y}, 127;"));
                        }
                        y
                    }
                    _ => {
                        let y = self.reg(RegClass::R);
                        self.line(format!("cvt.rzi.u32.f32 {y}, {f};"));
                        if to == DType::U8 {
                            self.line(format!("min.u32 {y}, {y}, 255;"));
                        }
                        y
                    }
                }
            } else if let Some(f) = self.small_int_to_float(x, &r, to, (i, n)) {
                f
            } else if to.is_float() {
                // int → float (via f32 for f16/bf16)
                let f = self.reg(RegClass::F);
                let src = if from == DType::I64 {
                    "s64"
                } else if from.is_signed() {
                    "s32"
                } else {
                    "u32"
                };
                if to == DType::F16 && from != DType::I64 {
                    let h = self.reg(RegClass::H);
                    self.line(format!("cvt.rn.f16.{src} {h}, {r};"));
                    h
                } else if to == DType::F32 {
                    self.line(format!("cvt.rn.f32.{src} {f}, {r};"));
                    f
                } else {
                    // Round once: truncate to f32, make it sticky (round to
                    // odd) if inexact, then round to nearest-even in 16 bits.
                    self.line(format!("cvt.rz.f32.{src} {f}, {r};"));
                    let back = self.reg(if from == DType::I64 { RegClass::Rd } else { RegClass::R });
                    self.line(format!("cvt.rzi.{src}.f32 {back}, {f};"));
                    let inexact = self.reg(RegClass::P);
                    self.line(format!("setp.ne.{src} {inexact}, {back}, {r};"));
                    let bits = self.reg(RegClass::R);
                    self.line(format!("mov.b32 {bits}, {f};"));
                    self.line(format!("@{inexact} or.b32 {bits}, {bits}, 1;"));
                    self.line(format!("mov.b32 {f}, {bits};"));
                    self.narrow_f32(&f, to)
                }
            } else {
                // int → int
                match (from, to) {
                    (DType::I64, _) => {
                        let y = self.reg(RegClass::R);
                        self.line(format!("cvt.u32.u64 {y}, {r};"));
                        self.norm8(&y, to);
                        y
                    }
                    (_, DType::I64) => {
                        let y = self.reg(RegClass::Rd);
                        if from.is_signed() {
                            self.line(format!("cvt.s64.s32 {y}, {r};"));
                        } else {
                            self.line(format!("cvt.u64.u32 {y}, {r};"));
                        }
                        self.wide32.insert(y.clone(), (r.clone(), from.is_signed()));
                        if matches!(from, DType::I32 | DType::U32) {
                            self.affine_widen(&y, &r, from.is_signed());
                        }
                        y
                    }
                    _ => {
                        let y = self.reg(RegClass::R);
                        self.line(format!("mov.b32 {y}, {r};"));
                        self.norm8(&y, to);
                        if matches!(from, DType::I32 | DType::U32) && matches!(to, DType::I32 | DType::U32) {
                            self.affine_copy(&y, &r);
                        }
                        y
                    }
                }
            };
            out.push(o);
        }
        Ok(out)
    }
}

/// `a o b` on 32-bit integers known while emitting, as PTX computes it
/// (wrapping; shift amounts clamped as `shl` / `shr` clamp them); None
/// where an operand is unknown or the op is not folded (division).
fn fold_i32(o: BinOp, d: DType, a: Option<i64>, b: Option<i64>) -> Option<i64> {
    let (a, b) = (a?, b?);
    let signed = d == DType::I32;
    let (x, y) = (a as i32, b as i32);
    let v: i32 = match o {
        BinOp::Add => x.wrapping_add(y),
        BinOp::Sub => x.wrapping_sub(y),
        BinOp::Mul => x.wrapping_mul(y),
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Xor => x ^ y,
        BinOp::Shl => {
            if (y as u32) >= 32 {
                0
            } else {
                x << y
            }
        }
        BinOp::Shr => {
            let s = (y as u32).min(32);
            if signed {
                if s >= 32 {
                    x >> 31
                } else {
                    x >> s
                }
            } else if s >= 32 {
                0
            } else {
                ((x as u32) >> s) as i32
            }
        }
        BinOp::Max if signed => x.max(y),
        BinOp::Min if signed => x.min(y),
        BinOp::Max => (x as u32).max(y as u32) as i32,
        BinOp::Min => (x as u32).min(y as u32) as i32,
        _ => return None,
    };
    Some(if signed { v as i64 } else { v as u32 as i64 })
}

fn cmp_s(o: CmpOp, float: bool) -> &'static str {
    match (o, float) {
        (CmpOp::Eq, _) => "eq",
        (CmpOp::Ne, true) => "neu",
        (CmpOp::Ne, false) => "ne",
        (CmpOp::Lt, _) => "lt",
        (CmpOp::Le, _) => "le",
        (CmpOp::Gt, _) => "gt",
        (CmpOp::Ge, _) => "ge",
    }
}
