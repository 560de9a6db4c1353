//! Index-set splitting: a `dot` loop whose body masks its last iterations
//! (attention's `cols < nk` and causal diagonal `cols <= rows + c`, a
//! GEMM's `kk < k`) runs as two loops — first the iterations where every
//! such comparison is known to hold, with the comparison replaced by `true`
//! and what it fed simplified (`select(true, a, b)` is `a`, `m & true` is
//! `m`, a mask of all-true is no mask), then the other iterations with the
//! body unchanged.
//!
//! Takes a specialized kernel after `guard` and `lower_views`. A loop
//! `for iv in (lo..hi).step_by(st)` (an i32 induction variable) qualifies
//! when its body holds a `dot` and, at its top level, comparisons `A < B`
//! or `A <= B` (or `B > A`, `B >= A`) of i32 tiles where
//!
//! - `A = iv + t`, `t` built from aranges and integer constants by `+`,
//!   `-`, splats, `expand_dims` and broadcasts, every element of `t` in
//!   `[t_lo, t_hi]` with `t_lo ≥ 0`;
//! - `B = Σ ±sᵢ + u`, the `sᵢ` scalars defined before the loop and `u`
//!   built as `t` is, every element of `u` in `[u_lo, u_hi]`.
//!
//! Before the loop, in i64: `min B = Σ ±sᵢ + u_lo`, `max B = Σ ±sᵢ + u_hi`;
//! every element of the comparison holds for `iv < S = min B − t_hi` (`+ 1`
//! for `<=`) — provided every element of `B` lies in i32 (then the i32
//! arithmetic that computed `B` equals the exact sum, wrap-around being
//! modular, and for `iv < S` neither does `A` leave i32), else `S = −∞`.
//! With `E = clamp(min S, lo, hi)` the first loop runs `(lo..E)`, the
//! second `(T..hi)` from `T = min(lo + ⌈(E − lo)/st⌉·st, hi)`, the first
//! iteration at or past `E`; carried values go from the first to the
//! second.
//!
//! Guarantees: the same iterations run in the same order with the same
//! carried values, and every op computes what it did (only comparisons
//! that hold were replaced; a step ≤ 0 still runs nothing — and is
//! counted once, by the check `guard` put before the loop); the result
//! verifies.
//!
//! Why: the comparison and the selects it feeds run on every element of
//! every iteration although only the last iterations can fail them — in
//! the attention forward's loop 33 integer compares and 66 selects per
//! thread and iteration of ~1050 instructions, issued while the tensor
//! cores wait. Triton leaves this to the kernel's author (FlashAttention's
//! tutorial writes its causal loop twice); here every user's loop gets it.
//! Only `dot` loops are split: their bodies are where the cost is, and a
//! second copy of a loop costs compile time and code size.
//!
//! Where it runs: the PTX backend when a launch asks
//! (`LaunchConfig::split_masks`, a knob the attention library's d64 tuner
//! candidates set: +13% on the H200; `FERROTILE_SPLIT_MASKS=1`: every
//! launch), and the interpreter's check of the GPU rewrites
//! (`FERROTILE_INTERP_PIPELINE=1`) for those launches. Other launches get
//! [`super::branch_masks`] (one loop, the selects under a branch), which
//! shares this analysis (`holding`, `bound_before`). Not by default: offline, the
//! attention forward's loop drops from ~1050 to ~880 SASS instructions,
//! but kernels that already sit at 255 registers (attention d64 and d128,
//! 128×128 GEMMs) spill once their loop exists twice — the loop-carried
//! row statistics are folded and converted between the two loops, and
//! long-lived invariants are spilled around both.

use super::build::{defined_in, like, Copier, Emit};
use crate::ir::*;
use crate::types::*;
use std::collections::{HashMap, HashSet};

/// Whether `k` has a loop this pass looks at (a cheap test before
/// copying a kernel to split it).
pub fn has_dot_loops(k: &Kernel) -> bool {
    let mut any = false;
    k.walk(&mut |o| {
        if let OpKind::For { body, .. } = &o.kind {
            any |= body.ops.iter().any(|o| matches!(o.kind, OpKind::Dot { .. }));
        }
    });
    any
}

/// Split every qualifying loop of `k` (module doc); whether any was.
pub fn split_masks(k: &mut Kernel) -> bool {
    let n = k.values.len();
    // (what defines each value of the kernel as it comes: the analysis
    // reads only values that were there before the pass, and only ops
    // without regions — a loop's or branch's body is not copied here)
    let mut defs = HashMap::new();
    k.walk(&mut |o| {
        if o.kind.regions().is_empty() {
            for r in &o.results {
                defs.insert(*r, o.kind.clone());
            }
        }
    });
    let mut body = std::mem::take(&mut k.body);
    block(k, &defs, &mut body);
    k.body = body;
    k.values.len() != n
}

fn block(k: &mut Kernel, defs: &HashMap<V, OpKind>, b: &mut Block) {
    let mut out = Vec::with_capacity(b.ops.len());
    for mut op in std::mem::take(&mut b.ops) {
        match &mut op.kind {
            OpKind::For { body, .. } => block(k, defs, body),
            OpKind::If { then_, else_, .. } => {
                block(k, defs, then_);
                block(k, defs, else_);
            }
            _ => {}
        }
        split(k, defs, op, &mut out);
    }
    b.ops = out;
}

/// `Σ ±scalars + iv·iv_coef + offsets in [lo, hi]`.
#[derive(Clone, Debug)]
pub(crate) struct Aff {
    iv: i64,
    scalars: Vec<(V, bool)>,
    lo: i64,
    hi: i64,
}

struct Ctx<'a> {
    k: &'a Kernel,
    defs: &'a HashMap<V, OpKind>,
    inside: HashSet<V>,
    iv: V,
}

impl Ctx<'_> {
    fn aff(&self, v: V, depth: u32) -> Option<Aff> {
        if depth > 16 || self.k.ty(v).dtype() != Some(DType::I32) {
            return None;
        }
        if v == self.iv {
            return Some(Aff { iv: 1, scalars: vec![], lo: 0, hi: 0 });
        }
        let def = self.defs.get(&v);
        if let Some(OpKind::Const(Lit::Int(c))) = def {
            return Some(Aff { iv: 0, scalars: vec![], lo: *c, hi: *c });
        }
        if !self.inside.contains(&v) {
            // defined before the loop: a scalar term, or a tile built of them
            if self.k.ty(v).rank() == 0 {
                return Some(Aff { iv: 0, scalars: vec![(v, false)], lo: 0, hi: 0 });
            }
        }
        match def? {
            OpKind::Arange { start, end } => {
                let (s, e) = (start.known()?, end.known()?);
                (e > s).then_some(Aff { iv: 0, scalars: vec![], lo: s, hi: e - 1 })
            }
            OpKind::Splat { x, .. } | OpKind::Broadcast { x, .. } | OpKind::ExpandDims { x, .. } => self.aff(*x, depth + 1),
            OpKind::Binary { op: o @ (BinOp::Add | BinOp::Sub), a, b } => {
                let (x, y) = (self.aff(*a, depth + 1)?, self.aff(*b, depth + 1)?);
                let mut scalars = x.scalars;
                if *o == BinOp::Add {
                    scalars.extend(y.scalars);
                    Some(Aff { iv: x.iv + y.iv, scalars, lo: x.lo.checked_add(y.lo)?, hi: x.hi.checked_add(y.hi)? })
                } else {
                    scalars.extend(y.scalars.into_iter().map(|(s, n)| (s, !n)));
                    Some(Aff { iv: x.iv - y.iv, scalars, lo: x.lo.checked_sub(y.hi)?, hi: x.hi.checked_sub(y.lo)? })
                }
            }
            _ => None,
        }
    }

    /// For a comparison at the top of the body: `(A's offsets' max, B, or_equal)`
    /// when it has the module doc's form.
    fn candidate(&self, kind: &OpKind) -> Option<(i64, Aff, bool)> {
        let OpKind::Cmp { op, a, b } = kind else { return None };
        let (lhs, rhs, eq) = match op {
            CmpOp::Lt => (*a, *b, false),
            CmpOp::Le => (*a, *b, true),
            CmpOp::Gt => (*b, *a, false),
            CmpOp::Ge => (*b, *a, true),
            _ => return None,
        };
        let (x, y) = (self.aff(lhs, 0)?, self.aff(rhs, 0)?);
        (x.iv == 1 && x.scalars.is_empty() && x.lo >= 0 && y.iv == 0 && y.scalars.len() <= 8).then_some((x.hi, y, eq))
    }
}

/// The comparisons at the top of the body of the `dot` loop `op` (an i32
/// induction variable) that hold on every iteration before a bound
/// (module doc): `(result, offsets' max, B, or_equal)`; empty when `op`
/// does not qualify. `branch_masks` shares this analysis.
pub(crate) fn holding(k: &Kernel, defs: &HashMap<V, OpKind>, op: &Op) -> Vec<(V, i64, Aff, bool)> {
    let OpKind::For { lo, body, .. } = &op.kind else { return vec![] };
    if k.ty(*lo).dtype() != Some(DType::I32) || !body.ops.iter().any(|o| matches!(o.kind, OpKind::Dot { .. })) {
        return vec![];
    }
    let mut inside = HashSet::new();
    defined_in(body, &mut inside);
    let cx = Ctx { k, defs, inside, iv: body.args[0] };
    body.ops.iter().filter_map(|o| cx.candidate(&o.kind).map(|(t, b, eq)| (o.results[0], t, b, eq))).collect()
}

/// Before the loop (into `e`): `E = clamp(min S, lo, hi)` as i64 and as
/// i32 — every comparison in `found` holds for `iv < E`.
pub(crate) fn bound_before(e: &mut Emit, found: &[(V, i64, Aff, bool)], lo: V, hi: V) -> (V, V) {
    // S: every found comparison holds for iv < S
    let (min32, max32) = (e.konst(Lit::Int(i32::MIN as i64), DType::I64), e.konst(Lit::Int(i32::MAX as i64), DType::I64));
    let never = e.konst(Lit::Int(i64::MIN), DType::I64);
    let mut s_all = None;
    for (_, t_hi, b, eq) in found {
        let mut sum = e.konst(Lit::Int(0), DType::I64);
        for &(s, neg) in &b.scalars {
            let s64 = e.cast(s, DType::I64);
            sum = e.bin(if neg { BinOp::Sub } else { BinOp::Add }, sum, s64);
        }
        let (ulo, uhi) = (e.konst(Lit::Int(b.lo), DType::I64), e.konst(Lit::Int(b.hi), DType::I64));
        let (bmin, bmax) = (e.bin(BinOp::Add, sum, ulo), e.bin(BinOp::Add, sum, uhi));
        let (in_lo, in_hi) = (e.cmp(CmpOp::Ge, bmin, min32), e.cmp(CmpOp::Le, bmax, max32));
        let fits = e.bin(BinOp::And, in_lo, in_hi);
        let off = e.konst(Lit::Int(*t_hi - *eq as i64), DType::I64);
        let s = e.bin(BinOp::Sub, bmin, off);
        let s = e.op(OpKind::Select { cond: fits, a: s, b: never }, Type::scalar(DType::I64));
        s_all = Some(match s_all {
            Some(p) => e.bin(BinOp::Min, p, s),
            None => s,
        });
    }
    let (lo64, hi64) = (e.cast(lo, DType::I64), e.cast(hi, DType::I64));
    let capped = e.bin(BinOp::Min, s_all.expect("a comparison"), hi64);
    let end = e.bin(BinOp::Max, capped, lo64);
    let end32 = e.cast(end, DType::I32);
    (end, end32)
}

/// Push `op` to `out`: unchanged, or (a qualifying loop) as the ops that
/// compute the split, the first loop and the second.
fn split(k: &mut Kernel, defs: &HashMap<V, OpKind>, mut op: Op, out: &mut Vec<Op>) {
    let found = holding(k, defs, &op);
    if found.is_empty() {
        out.push(op);
        return;
    }
    let OpKind::For { lo, hi, step, inits, .. } = &op.kind else { unreachable!() };
    let (lo, hi, step, inits) = (*lo, *hi, *step, inits.clone());
    let mut e = Emit { k, out, loc: op.loc };
    let (end, end32) = bound_before(&mut e, &found, lo, hi);
    let (lo64, hi64, st64) = (e.cast(lo, DType::I64), e.cast(hi, DType::I64), e.cast(step, DType::I64));
    // the second loop's first iteration: lo + ⌈(E − lo)/st⌉·st, at most hi
    let one = e.konst(Lit::Int(1), DType::I64);
    // (a constant step stays a constant: the division is then a shift or
    // a multiply, not a 64-bit division routine)
    let st1 = match defs.get(&step) {
        Some(OpKind::Const(Lit::Int(c))) => e.konst(Lit::Int((*c).max(1)), DType::I64),
        _ => e.bin(BinOp::Max, st64, one),
    };
    let span = e.bin(BinOp::Sub, end, lo64);
    let span = e.bin(BinOp::Add, span, st1);
    let span = e.bin(BinOp::Sub, span, one);
    let n = e.bin(BinOp::Div, span, st1);
    let adv = e.bin(BinOp::Mul, n, st1);
    let start = e.bin(BinOp::Add, lo64, adv);
    let start = e.bin(BinOp::Min, start, hi64);
    let start32 = e.cast(start, DType::I32);
    // the first loop: a copy of the body with the comparisons true
    let OpKind::For { body, .. } = &op.kind else { unreachable!() };
    let mut cl = Copier { map: HashMap::new(), truth: HashSet::new(), replace: found.iter().map(|f| f.0).collect() };
    let first_body = cl.block(e.k, body);
    let first_results: Vec<V> = op.results.iter().map(|&r| like(e.k, r)).collect();
    let first = Op { kind: OpKind::For { lo, hi: end32, step, inits, body: first_body }, results: first_results.clone(), loc: op.loc };
    e.out.push(first);
    if let OpKind::For { lo, inits, .. } = &mut op.kind {
        *lo = start32;
        *inits = first_results;
    }
    e.out.push(op);
}
