//! Affine addresses: a pointer tile's per-element constants as address
//! immediates (`[root+imm]`), not per-element arithmetic.
//!
//! Takes the integer instructions the printer emits (`add`, `sub`, `mul`
//! by a constant, `cvt` between 32- and 64-bit integers, the index
//! registers of the prologue) and keeps, per register, a fact
//! `r = root + c`: a register `root` and a constant `c` known while
//! emitting, exact modulo 2³² (2⁶⁴ for 64-bit registers). An index
//! register is its thread's offset plus the register's offset in the
//! layout; `i + arange`, `rows·DP + cols`, `p + at` keep the constant
//! apart and compute the root once per block (one instruction, where every
//! element shares its roots — a tile's usual case), so a pointer tile's
//! elements are one 64-bit root and byte offsets: loads, stores and
//! atomics print `[root+c]`, and each element's own address is one
//! `add.s64` from the root that ptxas folds into the access (it cannot
//! fold the constants itself through 32-bit arithmetic and a sign
//! extension: attention backward's 32 dQ atomics a step were an `IMAD`,
//! a `LEA` and a `LEA.HI.X` each, and 64 registers of addresses).
//!
//! Guarantees: a fact is recorded only where it holds for every value of
//! the registers (wrapping arithmetic at the register's width), except at
//! one documented step — a 32-bit value extended to 64 bits (a cast to
//! `i64`, or a 32-bit offset added to a pointer) takes the root's
//! extension plus `c`, which is the element's extension unless the 32-bit
//! `root + c` wrapped: an offset past 2³¹ elements computed in 32 bits
//! (`docs/semantics.md`, "Pointer offsets"). Every use of an address —
//! the guards' bounds tests included — reads the address the access
//! uses, so a guarded launch stays within its buffers either way. Roots
//! are computed where the op is emitted and cached per open block (by
//! instruction and operand registers): a fact's root dominates the
//! register it describes; loop-carried and
//! branch-merged registers are fresh registers with no fact, and the
//! threaded copies of a loop body give each copy its own induction
//! register (`control::unroll_copies`), so no fact outlives its root.
//! `PtxOptions::affine_addresses`.

use super::*;

/// What an integer operand is, for [`PtxWriter::affine_binary`].
#[derive(Clone, Debug)]
enum Term {
    /// A constant known while emitting.
    Const(i64),
    /// `root + c`.
    Lin(String, i64),
}

/// `c` wrapped to the width of `d`'s registers (32-bit values as i32).
fn wrap(c: i64, wide: bool) -> i64 {
    if wide {
        c
    } else {
        c as i32 as i64
    }
}

impl<'k> PtxWriter<'k> {
    /// Register `r` as `root + c` (itself and 0 where nothing is known).
    fn term(&self, r: &str, k: Option<i64>) -> Term {
        match (k, self.affine.get(r)) {
            (Some(k), _) => Term::Const(k),
            (None, Some((root, c))) => Term::Lin(root.clone(), *c),
            (None, None) => Term::Lin(r.to_string(), 0),
        }
    }

    /// Records `r = root + c` (also with `c` 0: elements that share a
    /// root share the roots computed from it).
    fn set_affine(&mut self, r: &str, root: String, c: i64) {
        self.affine.insert(r.to_string(), (root, c));
    }

    /// A root computed once per open block: `key` (the instruction and its
    /// operands) → register, in the per-block cache `packed` shares (a
    /// root computed inside a branch or loop body is not visible after
    /// it), from the instruction `ins` (`dst` is its destination).
    fn root(&mut self, class: RegClass, key: String, ins: impl FnOnce(&str) -> String) -> String {
        let key = (key, "affine".to_string());
        if let Some(r) = self.packed.iter().rev().find_map(|p| p.get(&key)) {
            return r.clone();
        }
        let d = self.reg(class);
        self.line(ins(&d));
        if let Some(p) = self.packed.last_mut() {
            p.insert(key, d.clone());
        }
        d
    }

    /// After `r = x o y` on integers of dtype `d` (not 8-bit): `r`'s fact
    /// from its operands' (`kx`, `ky`: constants known for them).
    pub(super) fn affine_binary(&mut self, o: BinOp, d: DType, r: &str, (x, kx): (&str, Option<i64>), (y, ky): (&str, Option<i64>)) {
        if !self.o.affine_addresses || !matches!(d, DType::I32 | DType::U32 | DType::I64) {
            return;
        }
        let wide = d == DType::I64;
        let (class, t) = if wide { (RegClass::Rd, "s64") } else { (RegClass::R, "s32") };
        let (tx, ty) = (self.term(x, kx), self.term(y, ky));
        match (o, tx, ty) {
            (BinOp::Add, Term::Lin(a, ca), Term::Const(k)) | (BinOp::Add, Term::Const(k), Term::Lin(a, ca)) => {
                self.set_affine(r, a, wrap(ca.wrapping_add(k), wide));
            }
            (BinOp::Sub, Term::Lin(a, ca), Term::Const(k)) => self.set_affine(r, a, wrap(ca.wrapping_sub(k), wide)),
            // (a root where an operand has a fact: otherwise `r` is one)
            (BinOp::Add | BinOp::Sub, Term::Lin(a, ca), Term::Lin(b, cb)) if a != x || b != y => {
                let add = o == BinOp::Add;
                let op = if add { "add" } else { "sub" };
                let root = self.root(class, format!("{op} {a} {b}"), |dst| format!("{op}.{t} {dst}, {a}, {b};"));
                let c = if add { ca.wrapping_add(cb) } else { ca.wrapping_sub(cb) };
                self.set_affine(r, root, wrap(c, wide));
            }
            (BinOp::Mul, Term::Lin(a, ca), Term::Const(k)) | (BinOp::Mul, Term::Const(k), Term::Lin(a, ca)) if a != x && a != y => {
                let root = self.root(class, format!("mul {a} {k}"), |dst| format!("mul.lo.{t} {dst}, {a}, {k};"));
                self.set_affine(r, root, wrap(ca.wrapping_mul(k), wide));
            }
            _ => {}
        }
    }

    /// After `y = r` as another 32-bit integer (`mov.b32`): the same fact.
    pub(super) fn affine_copy(&mut self, y: &str, r: &str) {
        if let Some((root, c)) = self.affine.get(r).cloned() {
            self.affine.insert(y.to_string(), (root, c));
        }
    }

    /// After `y = cvt.{s,u}64 r` (a 32-bit `r`): the root's extension plus
    /// `c` — the one step that is not exact where `root + c` wrapped at 32
    /// bits (the module doc). The root's extension is a 32-bit register's
    /// (`wide32`), as `y`'s is.
    pub(super) fn affine_widen(&mut self, y: &str, r: &str, signed: bool) {
        if !self.o.affine_addresses {
            return;
        }
        let Some((root, c)) = self.affine.get(r).cloned() else { return };
        let s = if signed { "s" } else { "u" };
        let w = self.root(RegClass::Rd, format!("cvt{s} {root}"), |dst| format!("cvt.{s}64.{s}32 {dst}, {root};"));
        self.wide32.insert(w.clone(), (root, signed));
        self.set_affine(y, w, c);
    }

    /// `ptr + offset` per element as a root address and a byte offset:
    /// the root `mad`e once per distinct (pointer root, offset root), each
    /// element an `add.s64` from it (folded into its accesses by ptxas and
    /// printed as `[root+c]` by [`Self::gaddr`]); the root's `mad` as the
    /// per-element path makes it ([`Self::offset_mad`]). `konst`: the
    /// offset's value where it is a constant.
    pub(super) fn add_ptr_affine(&mut self, rp: &[String], ro: &[String], od: DType, es: usize, konst: Option<i64>) -> Vec<String> {
        let mut out = Vec::with_capacity(rp.len());
        for i in 0..rp.len() {
            let (p, cp) = match self.affine.get(&rp[i]) {
                Some((root, c)) => (root.clone(), *c),
                None => (rp[i].clone(), 0),
            };
            let (root, c) = match self.term(&ro[i], konst) {
                // (a constant offset: the pointer's root, the bytes added)
                Term::Const(k) => {
                    let k = if od == DType::I64 {
                        k
                    } else if od.is_signed() {
                        k as i32 as i64
                    } else {
                        k as u32 as i64
                    };
                    (p, cp.wrapping_add(k.wrapping_mul(es as i64)))
                }
                Term::Lin(o, co) => {
                    let (src, form) = self.offset_mad(od, &o);
                    let root = self.root(RegClass::Rd, format!("{form} {src} {es} {p}"), |dst| format!("mad.{form} {dst}, {src}, {es}, {p};"));
                    (root, cp.wrapping_add(co.wrapping_mul(es as i64)))
                }
            };
            let d = self.reg(RegClass::Rd);
            if c == 0 {
                self.line(format!("mov.b64 {d}, {root};"));
            } else {
                self.line(format!("add.s64 {d}, {root}, {c};"));
            }
            self.affine.insert(d.clone(), (root, c));
            out.push(d);
        }
        out
    }

    /// The address operand of a global access through pointer register
    /// `p`: `root+c` where `p` is a root plus a byte offset that fits an
    /// immediate, `p` otherwise.
    pub(super) fn gaddr(&mut self, p: &str) -> String {
        match self.affine.get(p) {
            Some((root, c)) if root.starts_with("%rd") && i32::try_from(*c).is_ok() => {
                self.affine_uses += 1;
                if *c == 0 {
                    root.clone()
                } else {
                    format!("{root}+{c}")
                }
            }
            _ => p.to_string(),
        }
    }
}
