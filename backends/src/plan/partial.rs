//! Partial accumulators: a loop-carried tile that the loop only adds into,
//! elementwise, and that is only ever *summed along one axis* after the
//! loop, is carried pre-summed along that axis inside each thread.
//!
//! The pattern is how a user writes a reduction that outlives a loop
//! without paying a reduction per iteration — a GEMV's `acc[BK, BN] =
//! fma(x, w, acc)` then `sum(acc, 0)`, a long row's `acc = acc + x` then
//! `sum(acc)`. Held in the tile's layout, `acc` costs one register per
//! element a thread holds (a `[64, 256]` f32 accumulator over 256 threads:
//! 64 registers), although the only thing ever read from it is each
//! thread's sum along the axis. Here the registers of one [`ReducePlan`]
//! group (same coordinates off the axis) are folded into a few *chains*
//! while the loop runs, so the final `sum` starts from the chains instead
//! of the full tile: its lane and warp steps are unchanged.
//!
//! Takes the specialized kernel, the default layout of each shape and a
//! predicate for values that some other plan places elsewhere (slice
//! layouts, rings). Finds, for each `for` loop's carried value `acc`:
//!
//! - the body reads `acc` exactly once, as the addend of an `fma(a, b,
//!   acc)` or an `acc + e` / `e + acc` at the body's top level, whose
//!   result is yielded in `acc`'s place and used nowhere else;
//! - every use of the loop's result is a `sum` along one axis `d`;
//! - the tile is f32 (the adds are f32 adds either way);
//! - in the default layout of its shape, a thread holds more registers per
//!   group along `d` than the chains below, and no element twice (no
//!   replication along `d`).
//!
//! Guarantees: the carried value, the update's result and the loop's
//! result all map to one [`Partial`]; a thread's chain `j` of group `g`
//! holds the sum of its registers at positions `p ≡ j (mod chains)` of
//! that group, over the initial value and every iteration. What changes
//! is only the order of the additions (a sum's order is unspecified: its
//! lane and warp steps reorder it already), never which terms are added.
//! Chains per group are `ceil(16 / groups)`: at least sixteen independent
//! additions per thread in flight, so the fold does not turn a loop of
//! independent FMAs into one serial chain (a 1-D row accumulator with one
//! group keeps sixteen chains). (Eight were tried first: ptxas then spilled
//! two 16-bit registers of the 8-bit GEMV's pipelined scales at 80
//! registers per thread, for no reason of pressure; sixteen do not.) The
//! additions into one chain are serial — across iterations, as each
//! register's were before, and now also across the registers it folds —
//! where the final `sum` adds the chains, lanes and warps in a tree.
//!
//! The PTX emitter reads this plan (`emit/control.rs`: the loop's entry and
//! the update's dispatch; `emit/reduce.rs`: the fold of the initial value,
//! the update into the chains, the sum from them); the WGSL emitter does
//! not yet (its registers are the shader compiler's).

use super::layout::Blocked;
use super::reduce::ReducePlan;
use ferrotile_ir::*;
use std::collections::HashMap;
use std::rc::Rc;

/// How one accumulator is held: see the module doc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partial {
    /// The axis every use of the loop's result sums along.
    pub axis: usize,
    /// The reduction plan's groups of the tile's default layout (full
    /// register indices).
    pub groups: Vec<Vec<usize>>,
    /// Chains (registers) per group.
    pub chains: usize,
}

impl Partial {
    /// Registers the accumulator takes per thread.
    pub fn regs(&self) -> usize {
        self.groups.len() * self.chains
    }

    /// For each full register of the tile, the partial register it adds into.
    pub fn slot_of(&self) -> Vec<usize> {
        let n: usize = self.groups.iter().map(|g| g.len()).sum();
        let mut s = vec![0; n];
        for (gi, g) in self.groups.iter().enumerate() {
            for (p, &r) in g.iter().enumerate() {
                s[r] = gi * self.chains + p % self.chains;
            }
        }
        s
    }
}

/// Carried values, update results and loop results held as partial sums.
pub type PartialAccs = HashMap<V, Rc<Partial>>;

/// The accumulators of `k` that are carried pre-summed (module doc).
/// `layout` gives the default layout of a shape; `elsewhere` the values
/// another plan holds in another form.
pub fn assign(k: &Kernel, layout: &mut dyn FnMut(&[u32]) -> Blocked, elsewhere: &dyn Fn(V) -> bool) -> PartialAccs {
    let mut uses: HashMap<V, Vec<&OpKind>> = HashMap::new();
    k.walk(&mut |op| {
        for x in op.kind.operands() {
            uses.entry(x).or_default().push(&op.kind);
        }
    });
    let n_uses = |v: V| uses.get(&v).map_or(0, |u| u.len());
    let mut out = PartialAccs::new();
    let mut loops: Vec<&Op> = vec![];
    k.walk(&mut |op| {
        if matches!(op.kind, OpKind::For { .. }) {
            loops.push(op);
        }
    });
    for op in loops {
        let OpKind::For { body, .. } = &op.kind else { continue };
        let ys = body.yields();
        for (i, (&arg, &res)) in body.args[1..].iter().zip(&op.results).enumerate() {
            let y = ys[i];
            let ty = k.ty(arg);
            if ty.rank() == 0 || ty.elem().map(|e| e.dtype()) != Some(DType::F32) || [arg, y, res].iter().any(|&v| elsewhere(v)) {
                continue;
            }
            // the body's one read of `arg`: the addend of `y`'s top-level op
            let Some(upd) = body.ops.iter().find(|o| o.results.first() == Some(&y)) else { continue };
            let addend = match &upd.kind {
                OpKind::Fma { a, b, c } => *c == arg && *a != arg && *b != arg,
                OpKind::Binary { op: BinOp::Add, a, b } => (*a == arg) != (*b == arg),
                _ => false,
            };
            // (the yield counts as a use of `y`: one use is the yield alone)
            if !addend || n_uses(arg) != 1 || n_uses(y) != 1 {
                continue;
            }
            // every use of the result: a sum along one axis
            let Some(ru) = uses.get(&res) else { continue };
            let axes: Vec<Option<u8>> = ru
                .iter()
                .map(|u| match u {
                    OpKind::Reduce { op: ReduceOp::Sum, x, axis } if *x == res => Some(*axis),
                    _ => None,
                })
                .collect();
            let Some(Some(axis)) = axes.first().copied() else { continue };
            if axes.iter().any(|a| *a != Some(axis)) {
                continue;
            }
            let shape: Vec<u32> = ty.shape().iter().map(|d| d.known().unwrap_or(0) as u32).collect();
            if shape.contains(&0) {
                continue;
            }
            let bl = layout(&shape);
            let plan = ReducePlan::new(&bl, &bl.reg_offsets(), axis as usize);
            let n = plan.groups[0].len();
            if plan.replicated || plan.groups.iter().any(|g| g.len() != n) {
                continue;
            }
            let chains = 16usize.div_ceil(plan.groups.len()).min(n);
            if chains >= n {
                continue;
            }
            let p = Rc::new(Partial { axis: axis as usize, groups: plan.groups, chains });
            for v in [arg, y, res] {
                out.insert(v, p.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_each_group_in_chains() {
        let bl = Blocked::canonical(&[64, 256], 8, 8);
        let plan = ReducePlan::new(&bl, &bl.reg_offsets(), 0);
        let p = Partial { axis: 0, groups: plan.groups.clone(), chains: 2 };
        let s = p.slot_of();
        assert_eq!(s.len(), bl.regs());
        for (gi, g) in plan.groups.iter().enumerate() {
            for (pos, &r) in g.iter().enumerate() {
                assert_eq!(s[r], gi * 2 + pos % 2);
            }
        }
        assert_eq!(p.regs(), plan.groups.len() * 2);
    }
}
