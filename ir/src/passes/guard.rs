//! Memory safety: every access is guarded against its buffer's length, and
//! in checked launches every run-time fault is counted for the host.
//!
//! Takes a specialized kernel and a [`Safety`] mode (and, from the PTX
//! backend, the views whose fit the host checks per launch because a TMA
//! copy reads them). Appends *hidden parameters* ([`hidden_params`]): the
//! length in elements of every pointer parameter (`i64`), and in checked
//! mode a `u32` fault-counter buffer with one counter per [`site`](sites).
//! Then, with `safe` or `checked`:
//!
//! - every `load`, `store` and `atomic_add` gets `in_bounds(ptr)` folded
//!   into its mask, where `in_bounds(p) = p ≥ base_b ∧ p < base_b + len_b`
//!   (a pointer comparison, ORed over the buffers `b` the pointer may point
//!   into, [`crate::analysis::provenance`]). Out-of-bounds lanes then read
//!   `other` (0 without one) and write nothing — the semantics of a masked
//!   lane, which every backend already implements;
//! - every `view(base, dims, strides)` the host does not check is replaced
//!   by an *empty* view (all dims 0: block loads read zeros, block stores
//!   write nothing) unless every element it addresses lies in one of its
//!   buffers (`base + Σ min(0, (dᵢ−1)·sᵢ)` to `base + Σ max(0, (dᵢ−1)·sᵢ)`,
//!   with dims in `0..=2³¹` and strides in `−2³²..=2³²`; an empty view always
//!   fits);
//!
//! and with `checked`, before each of those the lanes that fault (unmasked
//! and out of bounds, or a view that does not fit) add 1 to their site's
//! counter, as do loops whose step is not positive (which run zero
//! iterations on every backend). The host reads the counters after the
//! launch and turns the first non-zero one into an error naming the kernel,
//! the source line and the buffer.
//!
//! Guarantees: with `safe` or `checked`, no access touches memory outside
//! the buffers the kernel was given, whatever the run-time values; in-bounds
//! accesses behave exactly as before (masks are only narrowed); `unchecked`
//! leaves the kernel alone. The result verifies.
//!
//! Why an IR pass: the guard is ordinary IR (pointer comparisons, `and`,
//! masked accesses, `atomic_add`), so every backend — the interpreter, PTX,
//! WGSL — gets the same semantics from code it already has, and the
//! analyses that vectorize masked accesses see the guard like any other
//! mask (a comparison of a contiguous pointer run against an aligned end
//! address is constant over the run).
//! Runs first in every target's pass list, so that the accesses later
//! passes create (view lowering, pipelining) come from guarded views and
//! masks.

use super::build::Emit;
use crate::analysis::provenance;
use crate::ir::*;
use crate::types::*;
use std::collections::{BTreeSet, HashMap, HashSet};

/// How a launch treats run-time faults (out-of-bounds accesses, views that
/// do not fit their buffer, loops whose step is not positive).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum Safety {
    /// No guards: the caller has proved every access in bounds
    /// (`launch_unchecked`).
    Unchecked,
    /// Out-of-bounds lanes read `other` (or 0) and write nothing.
    #[default]
    Safe,
    /// As `Safe`, and faults are counted and reported as an error.
    Checked,
}

/// A parameter the pass appends, after the kernel's own.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Hidden {
    /// The length in elements of pointer parameter `.0`, as `i64`.
    Len(u32),
    /// The fault counters: a `u32` buffer with one zeroed counter per site.
    Report,
}

/// The hidden parameters of `k` (not yet guarded) in mode `s`, in order.
pub fn hidden_params(k: &Kernel, s: Safety) -> Vec<Hidden> {
    if s == Safety::Unchecked {
        return vec![];
    }
    let mut h: Vec<Hidden> = (0..k.params.len() as u32).filter(|&i| matches!(k.params[i as usize].kind, ParamKind::Ptr(_))).map(Hidden::Len).collect();
    if s == Safety::Checked {
        h.push(Hidden::Report);
    }
    h
}

/// How many parameters `k` has once guarded (its own and the hidden ones
/// of [`Safety::Safe`]): the length of per-parameter facts such as
/// `PtxOptions::arg_div` that cover the buffer lengths too.
pub fn guarded_params(k: &Kernel) -> usize {
    k.params.len() + hidden_params(k, Safety::Safe).len()
}

/// What can fault at a site.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fault {
    /// A `load` out of its buffer.
    Load,
    /// A `store` out of its buffer.
    Store,
    /// An `atomic_add` out of its buffer.
    AtomicAdd,
    /// A `view` that addresses elements outside its buffer (it is then treated as empty).
    View,
    /// A `for` whose step is not positive (it then runs no iterations).
    LoopStep,
}

/// An op that can fault at run time, in the order of [`Kernel::walk`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Site {
    /// Location of the op.
    pub loc: Loc,
    /// What faults there.
    pub fault: Fault,
    /// The pointer parameters the access may touch.
    pub params: Vec<u32>,
}

impl Site {
    /// A sentence for an error message.
    pub fn describe(&self, k: &Kernel) -> String {
        let names: Vec<String> = self.params.iter().map(|&p| format!("`{}`", k.params[p as usize].name)).collect();
        let buf = if names.is_empty() { "an unknown buffer".to_string() } else { names.join(" or ") };
        match self.fault {
            Fault::Load => format!("out-of-bounds load from {buf}"),
            Fault::Store => format!("out-of-bounds store to {buf}"),
            Fault::AtomicAdd => format!("out-of-bounds atomic_add to {buf}"),
            Fault::View => format!("a view of {buf} addresses elements outside the buffer (it was treated as empty)"),
            Fault::LoopStep => "a loop step was not positive (the loop ran zero iterations)".into(),
        }
    }
}

/// Scalars whose value is known to be positive: positive integer constants
/// and `num_programs`.
fn positive_values(k: &Kernel) -> HashSet<V> {
    let mut s = HashSet::new();
    k.walk(&mut |op| match &op.kind {
        OpKind::Const(Lit::Int(v)) if *v > 0 => {
            s.insert(op.results[0]);
        }
        OpKind::NumPrograms(_) => {
            s.insert(op.results[0]);
        }
        _ => {}
    });
    s
}

/// Every op of `k` that can fault, in walk order: the counters' layout in
/// checked mode.
pub fn sites(k: &Kernel) -> Vec<Site> {
    let prov = provenance(k);
    let positive = positive_values(k);
    let mut out = vec![];
    k.walk(&mut |op| {
        if let Some((fault, ptr)) = fault_of(&op.kind, &positive) {
            let params = ptr.and_then(|p| prov.get(&p)).map(|s| s.iter().copied().collect()).unwrap_or_default();
            out.push(Site { loc: op.loc, fault, params });
        }
    });
    out
}

fn fault_of(kind: &OpKind, positive: &HashSet<V>) -> Option<(Fault, Option<V>)> {
    match kind {
        OpKind::Load { ptr, .. } => Some((Fault::Load, Some(*ptr))),
        OpKind::Store { ptr, .. } => Some((Fault::Store, Some(*ptr))),
        OpKind::AtomicAdd { ptr, .. } => Some((Fault::AtomicAdd, Some(*ptr))),
        OpKind::MakeView { base, .. } => Some((Fault::View, Some(*base))),
        OpKind::For { step, .. } if !positive.contains(step) => Some((Fault::LoopStep, None)),
        _ => None,
    }
}

/// Guard `k` in mode `s` (module doc). `host_checked(view)`: the views the
/// caller checks on the host before every launch (left unguarded).
///
/// `lower_bound: false` leaves out `ptr ≥ base` (exact for a backend whose
/// pointers are unsigned element indices into their buffer, where an offset
/// before the start wraps to a huge index: WGSL).
pub fn guard(k: &mut Kernel, s: Safety, host_checked: &dyn Fn(V) -> bool, lower_bound: bool) {
    if s == Safety::Unchecked {
        return;
    }
    let prov = provenance(k);
    let positive = positive_values(k);
    let hidden = hidden_params(k, s);
    let loc = Loc::default();
    let mut pro: Vec<Op> = vec![];
    let mut bounds: HashMap<u32, (V, V)> = HashMap::new();
    let mut report = None;
    for h in hidden {
        let index = k.params.len() as u32;
        match h {
            Hidden::Len(p) => {
                let ParamKind::Ptr(d) = k.params[p as usize].kind else { continue };
                k.params.push(Param { name: format!("len({})", k.params[p as usize].name), kind: ParamKind::Scalar(DType::I64), written: false });
                let mut e = Emit { k, out: &mut pro, loc };
                let base = e.op(OpKind::Param(p), Type::tile(Elem::Ptr(d), vec![]));
                let len = e.op(OpKind::Param(index), Type::scalar(DType::I64));
                let end = e.op(OpKind::AddPtr { ptr: base, offset: len }, Type::tile(Elem::Ptr(d), vec![]));
                bounds.insert(p, (base, end));
            }
            Hidden::Report => {
                k.params.push(Param { name: "fault counters".into(), kind: ParamKind::Ptr(DType::U32), written: true });
                report = Some(Emit { k, out: &mut pro, loc }.op(OpKind::Param(index), Type::tile(Elem::Ptr(DType::U32), vec![])));
            }
        }
    }
    let mut g = Guard { prov, positive, bounds, report, host_checked, lower_bound, site: 0 };
    let mut body = std::mem::take(&mut k.body);
    g.block(k, &mut body);
    pro.append(&mut body.ops);
    body.ops = pro;
    k.body = body;
}

struct Guard<'a> {
    prov: HashMap<V, BTreeSet<u32>>,
    positive: HashSet<V>,
    /// Per pointer parameter: its base pointer and one past its end.
    bounds: HashMap<u32, (V, V)>,
    report: Option<V>,
    host_checked: &'a dyn Fn(V) -> bool,
    /// Compare against the start of the buffer too (not on WGSL).
    lower_bound: bool,
    /// The next site's number (walk order, as [`sites`]).
    site: u32,
}

impl Guard<'_> {
    fn block(&mut self, k: &mut Kernel, b: &mut Block) {
        let ops = std::mem::take(&mut b.ops);
        for mut op in ops {
            let site = fault_of(&op.kind, &self.positive).map(|_| {
                self.site += 1;
                self.site - 1
            });
            match &mut op.kind {
                OpKind::For { body, .. } => self.block(k, body),
                OpKind::If { then_, else_, .. } => {
                    self.block(k, then_);
                    self.block(k, else_);
                }
                _ => {}
            }
            let mut e = Emit { k, out: &mut b.ops, loc: op.loc };
            match &mut op.kind {
                OpKind::Load { ptr, mask, .. } | OpKind::Store { ptr, mask, .. } | OpKind::AtomicAdd { ptr, mask, .. } => {
                    let inb = self.in_bounds(&mut e, *ptr, *ptr);
                    if let (Some(site), Some(_)) = (site, self.report) {
                        let bad = e.not(inb);
                        let bad = e.and(*mask, bad);
                        self.count(&mut e, site, bad);
                    }
                    *mask = Some(e.and(*mask, inb));
                }
                OpKind::MakeView { base, shape, strides } if !(self.host_checked)(op.results[0]) => {
                    let fits = self.view_fits(&mut e, *base, shape, strides);
                    if let (Some(site), Some(_)) = (site, self.report) {
                        let bad = e.not(fits);
                        self.count(&mut e, site, bad);
                    }
                    for d in shape.iter_mut() {
                        let dt = e.k.ty(*d).dtype().expect("an integer dim");
                        let zero = e.konst(Lit::Int(0), dt);
                        *d = e.op(OpKind::Select { cond: fits, a: *d, b: zero }, Type::scalar(dt));
                    }
                }
                OpKind::For { step, .. } => {
                    if let (Some(site), Some(_)) = (site, self.report) {
                        let dt = e.k.ty(*step).dtype().expect("an integer step");
                        let zero = e.konst(Lit::Int(0), dt);
                        let bad = e.cmp(CmpOp::Le, *step, zero);
                        self.count(&mut e, site, bad);
                    }
                }
                _ => {}
            }
            b.ops.push(op);
        }
    }

    /// `ptr` lies in one of the buffers that `from` may point into (a bool
    /// of `ptr`'s shape).
    fn in_bounds(&self, e: &mut Emit, ptr: V, from: V) -> V {
        let shape = e.shape(ptr);
        let mut any = None;
        for p in self.prov.get(&from).into_iter().flatten() {
            let Some(&(base, end)) = self.bounds.get(p) else { continue };
            let hi = e.splat(end, &shape);
            let lt = e.cmp(CmpOp::Lt, ptr, hi);
            let inside = if self.lower_bound {
                let lo = e.splat(base, &shape);
                let ge = e.cmp(CmpOp::Ge, ptr, lo);
                e.bin(BinOp::And, ge, lt)
            } else {
                lt
            };
            any = Some(e.or(any, inside));
        }
        match any {
            Some(v) => v,
            // no buffer known: nothing is in bounds
            None => {
                let f = e.konst(Lit::Bool(false), DType::Bool);
                e.splat(f, &shape)
            }
        }
    }

    /// Whether every element of `view(base, dims, strides)` lies in one of
    /// its buffers (module doc), as a scalar bool.
    fn view_fits(&self, e: &mut Emit, base: V, dims: &[V], strides: &[V]) -> V {
        let c = |e: &mut Emit, v: i64| e.konst(Lit::Int(v), DType::I64);
        let (zero, one) = (c(e, 0), c(e, 1));
        let (dmax, smax, smin, cap, ncap) = (c(e, 1 << 31), c(e, 1 << 32), c(e, -(1 << 32)), c(e, 1 << 40), c(e, -(1 << 40)));
        let (mut ok, mut nonempty, mut lo, mut hi): (Option<V>, Option<V>, V, V) = (None, None, zero, zero);
        for (&d, &s) in dims.iter().zip(strides) {
            let (d, s) = (e.cast(d, DType::I64), e.cast(s, DType::I64));
            let checks = [e.cmp(CmpOp::Ge, d, zero), e.cmp(CmpOp::Le, d, dmax), e.cmp(CmpOp::Ge, s, smin), e.cmp(CmpOp::Le, s, smax)];
            for ch in checks {
                ok = Some(e.and(ok, ch));
            }
            let gt = e.cmp(CmpOp::Gt, d, zero);
            nonempty = Some(e.and(nonempty, gt));
            // the extreme offsets along this dim, capped so that sums of
            // three cannot overflow (a term past the cap never fits)
            let d1 = e.bin(BinOp::Sub, d, one);
            let t = e.bin(BinOp::Mul, d1, s);
            let tp = e.bin(BinOp::Max, t, zero);
            let tp = e.bin(BinOp::Min, tp, cap);
            let tn = e.bin(BinOp::Min, t, zero);
            let tn = e.bin(BinOp::Max, tn, ncap);
            hi = e.bin(BinOp::Add, hi, tp);
            lo = e.bin(BinOp::Add, lo, tn);
        }
        let pty = e.k.ty(base).clone();
        let first = e.op(OpKind::AddPtr { ptr: base, offset: lo }, pty.clone());
        let last = e.op(OpKind::AddPtr { ptr: base, offset: hi }, pty);
        let (a, b) = (self.in_bounds(e, first, base), self.in_bounds(e, last, base));
        let inside = e.bin(BinOp::And, a, b);
        let empty = e.not(nonempty.expect("views have dims"));
        let placed = e.bin(BinOp::Or, empty, inside);
        e.and(ok, placed)
    }

    /// Add 1 to counter `site` for each lane where `bad` holds.
    fn count(&self, e: &mut Emit, site: u32, bad: V) {
        let Some(report) = self.report else { return };
        let shape = e.shape(bad);
        let off = e.konst(Lit::Int(site as i64), DType::I32);
        let at = e.op(OpKind::AddPtr { ptr: report, offset: off }, Type::tile(Elem::Ptr(DType::U32), vec![]));
        let at = e.splat(at, &shape);
        let one = e.konst(Lit::Int(1), DType::U32);
        let one = e.splat(one, &shape);
        e.out.push(Op { kind: OpKind::AtomicAdd { ptr: at, value: one, mask: Some(bad), sem: MemSem::Relaxed }, results: vec![], loc: e.loc });
    }
}
