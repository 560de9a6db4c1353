//! Slice layouts: which tile values keep the layout a reduction leaves them
//! in instead of their shape's default layout.
//!
//! Takes a specialized kernel and the default layout of each shape (the
//! per-shape plan: canonical, or a `dot`'s accumulator layout). Returns the
//! values whose layout differs from their shape's default, with that layout
//! — the first per-value layouts of issue 20:
//!
//! - a reduction's result (rank ≥ 1) of a tile in its default layout is in
//!   the **slice** of that layout along the reduced axis
//!   ([`Blocked::slice`]): after the lane and warp steps every thread holds
//!   the reduced value of each element group it held, so nothing moves;
//! - `expand_dims` of a value in a non-default layout inserts a size-1
//!   dimension into it ([`Blocked::expand`]): the registers stay;
//! - an elementwise op whose tile operands are all in one non-default
//!   layout `L`, or splats of a scalar (which are in every layout), is
//!   computed in `L`;
//! - a loop's carried value takes the layout its yield arrives in when it
//!   enters the loop as a splat or in that layout (the running max of an
//!   online softmax: `carried`); an `if`'s result, the layout both its
//!   yields arrive in.
//!
//! Guarantees: every value in the map is produced by one of these rules,
//! so the emitter can produce it without moving data; every other
//! consumer reads values in their shape's default layout, which the emitter
//! converts to on first use. A `broadcast` of an expanded slice back into its
//! parent's shape is then a register remap
//! ([`crate::plan::layout::register_remap`]) whenever the parent's default
//! layout is the one that was reduced — the row statistics of a softmax,
//! layer-norm or attention block go back into their rows without shared
//! memory (before this, each reduction's result went through shared memory
//! into the canonical layout of its shape, and each broadcast back through
//! shared memory again: four barriers per row statistic).
//!
//! A store of a value in a slice layout is done from its registers by one
//! owner per element (both printers' `store_slice`).
//!
//! Why only these rules: they never add work. A value in a slice layout
//! that a consumer needs in its default layout costs one conversion through
//! shared memory — what every reduction paid before. Backward propagation
//! from consumers, dot-operand layouts and a cost model come with the rest
//! of the layout system.

use super::layout::Blocked;
use ferrotile_ir::*;
use std::collections::{HashMap, HashSet};

/// Values whose layout is not their shape's default, with their layout.
pub type ValueLayouts = HashMap<V, Blocked>;

/// See the module doc. `default` gives the default layout of a shape.
pub fn assign(k: &Kernel, default: &mut dyn FnMut(&[u32]) -> Blocked) -> ValueLayouts {
    let mut out = ValueLayouts::new();
    let mut splats = HashSet::new();
    block(k, &k.body, default, &mut out, &mut splats);
    out
}

fn shape(k: &Kernel, v: V) -> Option<Vec<u32>> {
    k.ty(v).shape().iter().map(|d| d.known().map(|x| x as u32)).collect()
}

fn block(k: &Kernel, b: &Block, default: &mut dyn FnMut(&[u32]) -> Blocked, out: &mut ValueLayouts, splats: &mut HashSet<V>) {
    for op in &b.ops {
        match &op.kind {
            OpKind::For { inits, body, .. } => {
                carried(k, op, inits, body, default, out, splats);
                continue;
            }
            OpKind::If { then_, else_, .. } => {
                block(k, then_, default, out, splats);
                block(k, else_, default, out, splats);
                // a result whose two yields arrive in one layout keeps it
                for ((r, a), b) in op.results.iter().zip(then_.yields()).zip(else_.yields()) {
                    if let (Some(la), Some(lb)) = (out.get(a), out.get(b)) {
                        if la == lb {
                            out.insert(*r, la.clone());
                        }
                    }
                }
                continue;
            }
            _ => {}
        }
        let Some(&res) = op.results.first() else { continue };
        let layout = match &op.kind {
            OpKind::Splat { .. } => {
                splats.insert(res);
                None
            }
            OpKind::Reduce { x, axis, .. } if k.ty(res).rank() >= 1 && !out.contains_key(x) => shape(k, *x).map(|s| default(&s).slice(*axis as usize)),
            OpKind::ExpandDims { x, axis } => out.get(x).map(|l| l.expand(*axis as usize)),
            kind if kind.is_elementwise() && k.ty(res).rank() >= 1 => {
                let mut common: Option<&Blocked> = None;
                let mut ok = true;
                for u in kind.operands() {
                    if k.ty(u).rank() == 0 || splats.contains(&u) {
                        continue;
                    }
                    match (out.get(&u), common) {
                        (Some(l), None) => common = Some(l),
                        (Some(l), Some(c)) if l == c => {}
                        _ => ok = false,
                    }
                }
                common.filter(|_| ok).cloned()
            }
            _ => None,
        };
        if let Some(l) = layout {
            out.insert(res, l);
        }
    }
}

/// A loop: its carried values take the layout their yields arrive in, when
/// the value entering the loop is a splat (a `full` / `zeros` start: in
/// every layout) or already in that layout — the running max and sum of an
/// online softmax stay in the slice layout of the row reductions that
/// update them. Found by trial: the body is analysed with those carried
/// values as splats, each takes its yield's layout, then the body is
/// analysed again with the layouts fixed; a carried value whose yield then
/// arrives in another layout goes back to its default, until nothing
/// changes (each round only removes).
fn carried(k: &Kernel, op: &Op, inits: &[V], body: &Block, default: &mut dyn FnMut(&[u32]) -> Blocked, out: &mut ValueLayouts, splats: &mut HashSet<V>) {
    let args = &body.args[1..];
    let yields = body.yields();
    // trial: carried values entering as splats are splats; entering in a
    // layout of their own (the row statistic of a key block peeled off
    // before the loop), in that layout
    let mut trial = out.clone();
    let mut trial_splats = splats.clone();
    for (a, i) in args.iter().zip(inits) {
        if splats.contains(i) {
            trial_splats.insert(*a);
        } else if let Some(l) = out.get(i) {
            trial.insert(*a, l.clone());
        }
    }
    block(k, body, default, &mut trial, &mut trial_splats);
    let mut want: Vec<Option<Blocked>> =
        args.iter().zip(inits).zip(yields).map(|((_, i), y)| trial.get(y).cloned().filter(|l| splats.contains(i) || out.get(i) == Some(l))).collect();
    loop {
        let mut trial = out.clone();
        let mut trial_splats = splats.clone();
        for (a, l) in args.iter().zip(&want) {
            if let Some(l) = l {
                trial.insert(*a, l.clone());
            }
        }
        block(k, body, default, &mut trial, &mut trial_splats);
        let mut changed = false;
        for (w, y) in want.iter_mut().zip(yields) {
            if w.is_some() && trial.get(y) != w.as_ref() {
                *w = None;
                changed = true;
            }
        }
        if !changed {
            *out = trial;
            *splats = trial_splats;
            break;
        }
    }
    for (r, l) in op.results.iter().zip(&want) {
        if let Some(l) = l {
            out.insert(*r, l.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::reduce::ReducePlan;

    /// A reduction's groups are the slice layout's registers, in order, at
    /// the slice's coordinates — in the canonical, `mma.sync` and `wgmma`
    /// layouts, along either axis.
    #[test]
    fn reduction_groups_are_the_slice_registers() {
        for bl in [
            Blocked::canonical(&[8, 1024], 4, 8),
            Blocked::canonical(&[64, 64], 8, 4),
            Blocked::canonical(&[2, 16], 4, 4),
            Blocked::canonical(&[4, 8, 16], 4, 4),
            Blocked::mma_acc(&[64, 128], 2, 2),
            Blocked::wgmma_acc(&[128, 128], 8),
        ] {
            let offs = bl.reg_offsets();
            for axis in 0..bl.rank() {
                let plan = ReducePlan::new(&bl, &offs, axis);
                let s = bl.slice(axis);
                let soffs = s.reg_offsets();
                assert_eq!(plan.groups.len(), soffs.len(), "{bl:?} axis {axis}");
                for (g, rs) in plan.groups.iter().enumerate() {
                    let off: Vec<u32> = (0..bl.rank()).filter(|&d| d != axis).map(|d| offs[rs[0]][d]).collect();
                    assert_eq!(off, soffs[g], "{bl:?} axis {axis} group {g}");
                }
                // expand keeps the registers and their order
                let e = s.expand(axis);
                assert_eq!(e.regs(), s.regs());
                assert!(e
                    .reg_offsets()
                    .iter()
                    .zip(&soffs)
                    .all(|(a, b)| a[axis] == 0 && a.iter().enumerate().filter(|(d, _)| *d != axis).map(|(_, x)| *x).eq(b.iter().copied())));
            }
        }
    }
}
