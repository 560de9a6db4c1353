//! Masks under a uniform branch: in a `dot` loop whose last iterations are
//! masked, a `select` whose condition can only fail there (attention's
//! `cols < nk` and causal `cols <= rows + c`) runs, with the comparisons
//! that feed it, only on those iterations — one loop, one body, a branch
//! on the induction variable.
//!
//! Takes a specialized kernel after `guard` and `lower_views` (the same
//! point as [`super::split_masks`], whose analysis it shares: the
//! comparisons `iv + t < B` at the top of the body that hold for every
//! `iv < E`, `E` computed before the loop). In such a loop, every
//! top-level `r = select(c, a, b)` whose condition `c` is built from those
//! comparisons alone (through `expand_dims`, broadcasts, splats and `&`)
//! becomes
//!
//! ```text
//! r = if iv < E { a } else { <c recomputed>; select(c, a, b) }
//! ```
//!
//! where the recomputation clones, into the branch, every op of the body
//! that `c` needs (the comparisons and the column indices they compare);
//! the originals are left for `dce` when nothing else reads them.
//!
//! Guarantees: every value is what it was (for `iv < E` each comparison
//! in `c` holds, so `c` is all-true and the select is `a`); loads, stores,
//! `dot`s and everything else stay at the top of the body, where the
//! pipelining pass and the operand rings look for them; the result
//! verifies.
//!
//! Why: the comparisons and selects run on every element of every
//! iteration although only the last blocks can fail them — at d128 in the
//! attention forward's loop ~33 integer compares, ~40 index adds and 64
//! selects per thread of ~710 SASS instructions, issued while the tensor
//! cores wait. [`super::split_masks`] removes them by running the loop
//! twice, which doubles the loop's shared-memory rings and spills kernels
//! already near the register limit; a uniform branch keeps one loop, one
//! set of rings and the registers it had.

use super::build::{defined_in, Emit};
use super::split_masks::{bound_before, holding};
use crate::ir::*;
use std::collections::{HashMap, HashSet};

/// Put the selects of every qualifying loop of `k` under a branch (module
/// doc); whether any was.
pub fn branch_masks(k: &mut Kernel) -> bool {
    let mut defs = HashMap::new();
    k.walk(&mut |o| {
        if o.kind.regions().is_empty() {
            for r in &o.results {
                defs.insert(*r, o.kind.clone());
            }
        }
    });
    let mut body = std::mem::take(&mut k.body);
    let any = block(k, &defs, &mut body);
    k.body = body;
    any
}

fn block(k: &mut Kernel, defs: &HashMap<V, OpKind>, b: &mut Block) -> bool {
    let mut any = false;
    let mut out = Vec::with_capacity(b.ops.len());
    for mut op in std::mem::take(&mut b.ops) {
        match &mut op.kind {
            OpKind::For { body, .. } => any |= block(k, defs, body),
            OpKind::If { then_, else_, .. } => {
                any |= block(k, defs, then_);
                any |= block(k, defs, else_);
            }
            _ => {}
        }
        any |= rewrite(k, defs, op, &mut out);
    }
    b.ops = out;
    any
}

/// Ops a recomputed condition may clone: pure, cheap, no region.
fn clonable(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::Cmp { .. }
            | OpKind::ExpandDims { .. }
            | OpKind::Broadcast { .. }
            | OpKind::Splat { .. }
            | OpKind::Binary { .. }
            | OpKind::Unary { .. }
            | OpKind::Arange { .. }
            | OpKind::Const(_)
            | OpKind::Cast { .. }
    )
}

/// Push `op` to `out`: unchanged, or (a qualifying loop) with the bound
/// computed before it and its masking selects under a branch.
fn rewrite(k: &mut Kernel, defs: &HashMap<V, OpKind>, mut op: Op, out: &mut Vec<Op>) -> bool {
    let found = holding(k, defs, &op);
    if found.is_empty() {
        out.push(op);
        return false;
    }
    let holds: HashSet<V> = found.iter().map(|f| f.0).collect();
    let OpKind::For { lo, hi, body, .. } = &op.kind else { unreachable!() };
    let (lo, hi) = (*lo, *hi);
    // the body's top-level ops by result
    let at: HashMap<V, usize> = body.ops.iter().enumerate().flat_map(|(i, o)| o.results.iter().map(move |r| (*r, i))).collect();
    // all-true on iv < E: a holding comparison, its spreads, `&` of two
    let mut true_before: HashSet<V> = HashSet::new();
    for o in &body.ops {
        let t = match &o.kind {
            OpKind::Cmp { .. } => holds.contains(&o.results[0]),
            OpKind::ExpandDims { x, .. } | OpKind::Broadcast { x, .. } | OpKind::Splat { x, .. } => true_before.contains(x),
            OpKind::Binary { op: BinOp::And | BinOp::LAnd, a, b } => true_before.contains(a) && true_before.contains(b),
            _ => false,
        };
        if t {
            true_before.extend(o.results.iter().copied());
        }
    }
    // the selects to branch: the top-level ops their condition needs, all clonable
    let mut inner = HashSet::new();
    defined_in(body, &mut inner);
    let slice = |c: V| -> Option<Vec<usize>> {
        let mut need = HashSet::new();
        let mut stack = vec![c];
        while let Some(v) = stack.pop() {
            let Some(&i) = at.get(&v) else {
                // (an argument of the body, or defined before the loop)
                if inner.contains(&v) && !body.args.contains(&v) {
                    return None;
                }
                continue;
            };
            if !clonable(&body.ops[i].kind) {
                return None;
            }
            if need.insert(i) {
                stack.extend(body.ops[i].kind.operands());
            }
        }
        let mut v: Vec<usize> = need.into_iter().collect();
        v.sort_unstable();
        Some(v)
    };
    let picked: HashMap<usize, Vec<usize>> = body
        .ops
        .iter()
        .enumerate()
        .filter_map(|(i, o)| match &o.kind {
            OpKind::Select { cond, .. } if true_before.contains(cond) => Some((i, slice(*cond)?)),
            _ => None,
        })
        .collect();
    if picked.is_empty() {
        out.push(op);
        return false;
    }
    let mut e = Emit { k, out, loc: op.loc };
    let (_, end32) = bound_before(&mut e, &found, lo, hi);
    let OpKind::For { body, .. } = &mut op.kind else { unreachable!() };
    let iv = body.args[0];
    let mut ops = Vec::with_capacity(body.ops.len() + 2 * picked.len());
    let mut rename: HashMap<V, V> = HashMap::new();
    let mut full = None;
    let old = std::mem::take(&mut body.ops);
    for (i, mut o) in old.iter().cloned().enumerate() {
        o.kind.map_operands(&mut |v| *rename.get(&v).unwrap_or(&v));
        let Some(need) = picked.get(&i) else {
            ops.push(o);
            continue;
        };
        let OpKind::Select { a, .. } = o.kind else { unreachable!() };
        let mut e = Emit { k: &mut *k, out: &mut ops, loc: o.loc };
        let f = *full.get_or_insert_with(|| e.cmp(CmpOp::Lt, iv, end32));
        // the other iterations: the condition recomputed in the branch
        let mut m: HashMap<V, V> = HashMap::new();
        let mut els = vec![];
        for &j in need {
            let mut c = old[j].clone();
            c.kind.map_operands(&mut |v| *m.get(&v).or(rename.get(&v)).unwrap_or(&v));
            let rs: Vec<V> = c.results.iter().map(|&r| super::build::like(k, r)).collect();
            for (r, n) in c.results.iter().zip(&rs) {
                m.insert(*r, *n);
            }
            c.results = rs;
            els.push(c);
        }
        let mut sel = o.clone();
        sel.kind.map_operands(&mut |v| *m.get(&v).unwrap_or(&v));
        let r2 = super::build::like(k, o.results[0]);
        sel.results = vec![r2];
        els.push(sel);
        els.push(Op { kind: OpKind::Yield(vec![r2]), results: vec![], loc: o.loc });
        let then_ = Block { args: vec![], ops: vec![Op { kind: OpKind::Yield(vec![a]), results: vec![], loc: o.loc }] };
        let r = super::build::like(k, o.results[0]);
        rename.insert(o.results[0], r);
        ops.push(Op { kind: OpKind::If { cond: f, then_, else_: Block { args: vec![], ops: els } }, results: vec![r], loc: o.loc });
    }
    body.ops = ops;
    out.push(op);
    true
}
