//! The reduction plan: how a tile held in a [`Blocked`] layout is reduced
//! along one axis. Both emitters lower `sum`/`max`/`min`/`argmax`/`argmin`
//! (and the PTX backend `cumsum`'s per-thread step) from this plan, in
//! three levels:
//!
//! 1. **in-thread**: each thread combines its registers that share their
//!    off-axis coordinates ([`ReducePlan::groups`], pairwise, in register
//!    order — argmax ties keep the lower index); where the layout replicates
//!    along the axis, the copies become the identity first
//!    ([`ReducePlan::replicated`]), so nothing is counted twice;
//! 2. **across lanes**: butterfly exchanges along the axis
//!    ([`ReducePlan::lane_xor`]: PTX `shfl.sync.bfly`, WGSL
//!    `subgroupShuffleXor` where subgroups are on, else workgroup memory);
//! 3. **across warps**: when [`ReducePlan::warps`] > 1, partials go
//!    through shared (workgroup) memory, one slot per thread and group.
//!
//! The result — one value per group, in the *slice* of the source layout —
//! is then placed in the canonical layout of the result's shape (through
//! shared memory, or a register remap where no data crosses threads).
//! Takes the layout and the axis; guarantees groups cover every register
//! exactly once, in register order within a group.
//!
//! [`siblings`] pairs a `max` with an `argmax` (a `min` with an `argmin`)
//! of the same tile along the same axis in the same block — top-k, a
//! sampled token and its logit, the running maximum with its position —
//! so the emitters reduce once: the (value, index) reduction carries the
//! value as `max`/`min` of the two it combines (which compares exactly as
//! the element its index picks), and that value *is* the `max`.

use std::collections::HashMap;

use ferrotile_ir::{Block, Kernel, OpKind, ReduceOp, V};

use super::layout::Blocked;

/// `max`/`argmax` (`min`/`argmin`) of one tile along one axis, in the same
/// block: the result emitted first → the other, which the emitter of the
/// first computes in the same reduction (see the module doc). Both orders
/// of the two ops pair; a tile reduced twice the same way pairs its first
/// two reductions of the two kinds only.
pub fn siblings(k: &Kernel) -> HashMap<V, V> {
    fn family(o: ReduceOp) -> Option<(bool, bool)> {
        // (a maximum?, the index?)
        match o {
            ReduceOp::Max => Some((true, false)),
            ReduceOp::Argmax => Some((true, true)),
            ReduceOp::Min => Some((false, false)),
            ReduceOp::Argmin => Some((false, true)),
            ReduceOp::Sum => None,
        }
    }
    fn go(b: &Block, out: &mut HashMap<V, V>) {
        // (tile, axis, maximum?, index?) → the first such reduction's result
        let mut seen: HashMap<(V, u8, bool, bool), V> = HashMap::new();
        for op in &b.ops {
            if let OpKind::Reduce { op: o, x, axis } = &op.kind {
                if let (Some((hi, arg)), Some(&res)) = (family(*o), op.results.first()) {
                    if let Some(&first) = seen.get(&(*x, *axis, hi, !arg)) {
                        if !out.contains_key(&first) && !out.values().any(|&v| v == first) {
                            out.insert(first, res);
                        }
                    }
                    seen.entry((*x, *axis, hi, arg)).or_insert(res);
                }
            }
            for r in op.kind.regions() {
                go(r, out);
            }
        }
    }
    let mut out = HashMap::new();
    go(&k.body, &mut out);
    out
}

/// The other member of a [`siblings`] pair: `max` ↔ `argmax`, `min` ↔
/// `argmin` (`sum` has none: itself).
pub fn sibling_op(o: ReduceOp) -> ReduceOp {
    match o {
        ReduceOp::Max => ReduceOp::Argmax,
        ReduceOp::Argmax => ReduceOp::Max,
        ReduceOp::Min => ReduceOp::Argmin,
        ReduceOp::Argmin => ReduceOp::Min,
        ReduceOp::Sum => ReduceOp::Sum,
    }
}

/// The reduction an emitter runs for `o` when it computes its sibling too:
/// the (value, index) one, whose value serves the `max` (`min`).
pub fn paired_core(o: ReduceOp) -> ReduceOp {
    match o {
        ReduceOp::Max | ReduceOp::Min => sibling_op(o),
        _ => o,
    }
}

/// See the module doc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReducePlan {
    /// A thread's registers grouped by their coordinates off the axis, each
    /// group in register order, groups in order of their first register.
    pub groups: Vec<Vec<usize>>,
    /// Several threads hold copies of one element along the axis.
    pub replicated: bool,
    /// Lane masks of the butterfly steps along the axis, innermost first
    /// (empty: the axis lies within one lane's registers or across warps).
    pub lane_xor: Vec<u32>,
    /// Lanes along the axis (1 << lane_xor.len()).
    pub lanes: u32,
    /// Warps along the axis; above 1, a step through shared memory.
    pub warps: u32,
    /// Where the axis's warp index sits in the warp id (bits from here,
    /// `warps - 1` wide).
    pub warp_shift: u32,
    /// Where the axis's lane index sits in the lane id.
    pub lane_shift: u32,
}

impl ReducePlan {
    /// The plan for reducing a tile in layout `bl` (per-register offsets
    /// `reg_offsets`, as [`Blocked::reg_offsets`] gives them) along `axis`.
    pub fn new(bl: &Blocked, reg_offsets: &[Vec<u32>], axis: usize) -> Self {
        let mut keys: Vec<Vec<u32>> = vec![];
        let mut groups: Vec<Vec<usize>> = vec![];
        for (r, offs) in reg_offsets.iter().enumerate() {
            let key: Vec<u32> = (0..offs.len()).filter(|&d| d != axis).map(|d| offs[d]).collect();
            match keys.iter().position(|k| *k == key) {
                Some(g) => groups[g].push(r),
                None => {
                    keys.push(key);
                    groups.push(vec![r]);
                }
            }
        }
        let lane_xor = (0..bl.tpw[axis].trailing_zeros()).map(|b| 1u32 << (bl.lane_shift[axis] + b)).collect();
        ReducePlan {
            groups,
            replicated: bl.replicated(axis),
            lane_xor,
            lanes: bl.tpw[axis],
            warps: bl.wpc[axis],
            warp_shift: bl.warp_shift[axis],
            lane_shift: bl.lane_shift[axis],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_reduction_of_a_2d_tile() {
        // 64 × 256 over 4 warps: reduce along the columns
        let bl = Blocked::canonical(&[64, 256], 4, 4);
        let offs = bl.reg_offsets();
        let p = ReducePlan::new(&bl, &offs, 1);
        let mut all: Vec<usize> = p.groups.iter().flatten().copied().collect();
        all.sort();
        assert_eq!(all, (0..offs.len()).collect::<Vec<_>>(), "every register in exactly one group");
        for g in &p.groups {
            assert!(g.windows(2).all(|w| w[0] < w[1]));
            assert!(g.iter().all(|&r| offs[r][0] == offs[g[0]][0]), "a group shares its row");
        }
        assert_eq!(p.lanes, 1 << p.lane_xor.len());
        // without replication, one group's registers times the threads
        // along the axis cover the row exactly
        assert!(!p.replicated);
        assert!(p.groups.iter().all(|g| g.len() as u32 * p.lanes * p.warps == 256));
    }
}
