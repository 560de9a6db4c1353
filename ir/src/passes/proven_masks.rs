//! Masks the launch proves all-true: `arange(s, e) < n` for a run-time
//! argument `n ≥ e` is dropped, with what it fed.
//!
//! Takes a specialized kernel and the facts of one launch. A comparison of
//! an `arange(s, e)` tile against a splat of an integer kernel argument `n`
//! — `arange < n`, `arange <= n`, `n > arange`, `n >= arange` — holds on
//! every element exactly when `n ≥ e` (`n ≥ e − 1` for the non-strict
//! forms): [`bounds`] lists, per such comparison, the argument and that
//! bound; the launch checks them against its arguments (two compiled
//! variants per bound at most, as the divisibility facts) and [`fold`]
//! replaces the comparisons it proved by `true`, then simplifies what they
//! fed: `select(true, a, b)` is `a`, `m & true` is `m`, a load or store
//! under an all-true mask has none (and a load no `other`), and a splat,
//! broadcast or `expand_dims` of an all-true tile is all-true.
//!
//! Why: a row kernel's `cols < n_cols` (with its `select`s: a layer norm
//! zeroes the padding before squaring) costs, per element and use, a
//! compare, the packing of the predicate and a select — a quarter of a
//! 16-bit layer norm's instructions at 16384 columns — although on the
//! rows whose length is the block's, the usual case, it never fails.
//! Triton leaves this to the kernel's author (an `EVEN_N` constexpr); here
//! every kernel gets it from its launch.
//!
//! Guarantees: only comparisons true on every element are replaced, and
//! each simplification computes what the op computed before; value ids and
//! names are kept (uses of a removed value read its replacement). The
//! result verifies. Run first by the PTX target when a launch proves a
//! bound (`PtxOptions::proven_masks`), and by the interpreter with the
//! GPU's rewrites (`FERROTILE_INTERP_PIPELINE=1`: the conformance suite
//! checks the fold with each launch's own arguments).

use super::build::{fold_true, new_value, TrueFold};
use crate::ir::*;
use crate::types::*;
use std::collections::{HashMap, HashSet};

/// A bound a launch may prove: kernel argument `param` is at least
/// `at_least`.
pub type Bound = (u32, i64);

/// The comparisons of `k` that a bound on one argument makes all-true,
/// each with that bound.
fn matches(k: &Kernel) -> Vec<(V, Bound)> {
    let mut defs: HashMap<V, &OpKind> = HashMap::new();
    k.walk(&mut |op| {
        if op.results.len() == 1 {
            defs.insert(op.results[0], &op.kind);
        }
    });
    // the exclusive end of an arange, the argument index behind a splat
    let end = |v: V| match defs.get(&v) {
        Some(OpKind::Arange { end, .. }) => end.known(),
        _ => None,
    };
    let param = |v: V| match defs.get(&v) {
        Some(OpKind::Splat { x, .. }) => match defs.get(x) {
            Some(OpKind::Param(i)) if k.ty(*x).dtype().is_some_and(|d| d.is_int()) => Some(*i),
            _ => None,
        },
        _ => None,
    };
    let mut out = vec![];
    k.walk(&mut |op| {
        let OpKind::Cmp { op: c, a, b } = &op.kind else { return };
        // (the arange side, the argument side, whether `arange == n` fails)
        let (r, n, strict) = match c {
            CmpOp::Lt => (*a, *b, true),
            CmpOp::Le => (*a, *b, false),
            CmpOp::Gt => (*b, *a, true),
            CmpOp::Ge => (*b, *a, false),
            _ => return,
        };
        if let (Some(e), Some(p)) = (end(r), param(n)) {
            out.push((op.results[0], (p, if strict { e } else { e - 1 })));
        }
    });
    out
}

/// The bounds on arguments that would make comparisons of `k` all-true
/// (sorted, without repeats).
pub fn bounds(k: &Kernel) -> Vec<Bound> {
    let mut b: Vec<Bound> = matches(k).into_iter().map(|(_, b)| b).collect();
    b.sort_unstable();
    b.dedup();
    b
}

/// Replace the comparisons that `proven` makes all-true and simplify what
/// they feed (module doc); whether anything changed.
pub fn fold(k: &mut Kernel, proven: &[Bound]) -> bool {
    let replace: HashSet<V> = matches(k).into_iter().filter(|(_, b)| proven.contains(b)).map(|(v, _)| v).collect();
    if replace.is_empty() {
        return false;
    }
    let mut f = Folder { replace, truth: HashSet::new(), subst: HashMap::new() };
    let mut body = std::mem::take(&mut k.body);
    f.block(k, &mut body);
    k.body = body;
    true
}

struct Folder {
    replace: HashSet<V>,
    /// Values known to be all-true.
    truth: HashSet<V>,
    /// Removed values → what their uses read now.
    subst: HashMap<V, V>,
}

impl Folder {
    fn block(&mut self, k: &mut Kernel, b: &mut Block) {
        let mut out = Vec::with_capacity(b.ops.len());
        for mut op in std::mem::take(&mut b.ops) {
            op.kind.map_operands(&mut |v| self.subst.get(&v).copied().unwrap_or(v));
            if op.results.len() == 1 && self.replace.contains(&op.results[0]) {
                // the comparison: `splat(true)` in its place, under its id
                let r = op.results[0];
                let t = new_value(k, Type::scalar(DType::Bool));
                out.push(Op { kind: OpKind::Const(Lit::Bool(true)), results: vec![t], loc: op.loc });
                let shape = k.ty(r).shape().to_vec();
                out.push(Op { kind: OpKind::Splat { x: t, shape }, results: vec![r], loc: op.loc });
                self.truth.insert(r);
                continue;
            }
            match fold_true(&mut op.kind, &self.truth) {
                TrueFold::Alias(a) => {
                    self.subst.insert(op.results[0], a);
                    continue;
                }
                TrueFold::Keep { all_true: true } => {
                    self.truth.insert(op.results[0]);
                }
                TrueFold::Keep { all_true: false } => {}
            }
            match &mut op.kind {
                OpKind::For { body, .. } => self.block(k, body),
                OpKind::If { then_, else_, .. } => {
                    self.block(k, then_);
                    self.block(k, else_);
                }
                _ => {}
            }
            out.push(op);
        }
        b.ops = out;
    }
}
