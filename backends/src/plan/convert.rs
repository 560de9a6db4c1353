//! The conversion plan: how a tile moves into another shape or layout when
//! no cheaper way applies (index arithmetic is recomputed in place instead,
//! `remat`; a conversion that moves no data is a register remap,
//! `layout::register_remap`). The tile is written to scratch (shared /
//! workgroup) memory in its own layout and read back in the destination's:
//! destination register `r` reads slot `Σ_d index_d(r) · dst_coef[d]`.
//!
//! Takes the movement (a broadcast, a linear reinterpretation — `reshape`,
//! `expand_dims` —, or a permutation), the source and destination shapes and
//! whether to pad rows. Guarantees every destination element reads the
//! source element the op's semantics name, and `slots` covers every write.
//!
//! An `expand_dims` whose result only broadcasts read need not be
//! converted on its own ([`expand_then_broadcast`]): the broadcast writes
//! the operand at the expanded tile's slot strides and reads the
//! destination from there — one trip instead of two (both backends).
//!
//! Row padding: with `pad_rows`, each innermost source row takes one extra
//! slot, so that a permutation reads what was a row as a column with
//! consecutive rows in different banks (a 64×64 f32 transpose read 16 lanes
//! from one bank without it). The PTX backend pads broadcasts and
//! permutations; the WGSL backend does not yet (its goldens pin the dense
//! form; padding it is a change to measure on its own).

use std::collections::{HashMap, HashSet};

/// What the conversion does to element coordinates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Movement {
    /// Dimensions of size 1 in the source are repeated along the
    /// destination's.
    Broadcast,
    /// The row-major linear index is kept (`reshape`, `expand_dims`).
    Linear,
    /// Destination dimension `d` is source dimension `perm[d]` (`trans`).
    Permute(Vec<usize>),
}

/// See the module doc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertPlan {
    /// Slot strides of the source tile in scratch memory, per dimension.
    pub src_strides: Vec<u32>,
    /// Slots the scratch copy spans.
    pub slots: u32,
    /// Per destination dimension, the slots its index advances by.
    pub dst_coef: Vec<u32>,
}

impl ConvertPlan {
    /// The plan moving a tile of shape `src` into shape `dst` by `movement`; with `pad_rows`, each
    /// innermost source row takes one more slot (not for [`Movement::Linear`]).
    pub fn new(movement: &Movement, src: &[u32], dst: &[u32], pad_rows: bool) -> Self {
        let rank = src.len();
        let pad = pad_rows && !matches!(movement, Movement::Linear);
        let mut src_strides = vec![1u32; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            let extra = (pad && d + 2 == rank && src[d + 1] > 1) as u32;
            src_strides[d] = src_strides[d + 1] * src[d + 1] + extra;
        }
        let slots = if pad { src.first().map_or(1, |&d0| d0 * src_strides[0]).max(1) } else { src.iter().product::<u32>().max(1) };
        let dst_coef = match movement {
            Movement::Broadcast => (0..dst.len()).map(|d| if src[d] == 1 { 0 } else { src_strides[d] }).collect(),
            Movement::Linear => {
                let mut s = vec![1u32; dst.len()];
                for d in (0..dst.len().saturating_sub(1)).rev() {
                    s[d] = s[d + 1] * dst[d + 1];
                }
                s
            }
            Movement::Permute(perm) => perm.iter().map(|&p| src_strides[p]).collect(),
        };
        ConvertPlan { src_strides, slots, dst_coef }
    }
}

/// The `expand_dims` results of `k` (of a tile, not a scalar) that only
/// broadcasts read, with their operand and new axis. A backend need not
/// convert such a result where it is defined: each broadcast can convert
/// from the operand directly — the expanded tile's row-major order is the
/// operand's, so the operand written at the expanded tile's slot strides
/// (less the new axis's) is the expanded tile — one trip through scratch
/// memory instead of two. (Whether the operand and result are in their
/// default layouts is the backend's check.)
pub fn expand_then_broadcast(k: &ferrotile_ir::Kernel) -> HashMap<ferrotile_ir::V, (ferrotile_ir::V, usize)> {
    use ferrotile_ir::OpKind;
    let mut expands = HashMap::new();
    let mut other_use = HashSet::new();
    k.walk(&mut |op| {
        if let (OpKind::ExpandDims { x, axis }, Some(&r)) = (&op.kind, op.results.first()) {
            if k.ty(*x).rank() >= 1 {
                expands.insert(r, (*x, *axis as usize));
            }
        }
        if !matches!(op.kind, OpKind::Broadcast { .. }) {
            other_use.extend(op.kind.operands());
        }
    });
    expands.retain(|v, _| !other_use.contains(v));
    expands
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every destination element of a padded 2-D transpose reads the slot
    /// its source element was written to.
    #[test]
    fn padded_transpose_reads_the_written_slots() {
        let (src, dst) = ([16u32, 32], [32u32, 16]);
        let p = ConvertPlan::new(&Movement::Permute(vec![1, 0]), &src, &dst, true);
        assert_eq!(p.src_strides, vec![33, 1]);
        assert_eq!(p.slots, 16 * 33);
        for i in 0..32 {
            for j in 0..16 {
                let read = i * p.dst_coef[0] + j * p.dst_coef[1];
                let written = j * p.src_strides[0] + i * p.src_strides[1];
                assert_eq!(read, written);
                assert!(read < p.slots);
            }
        }
    }

    #[test]
    fn broadcast_and_linear() {
        let b = ConvertPlan::new(&Movement::Broadcast, &[8, 1], &[8, 4], false);
        assert_eq!((b.src_strides.clone(), b.dst_coef.clone(), b.slots), (vec![1, 1], vec![1, 0], 8));
        let l = ConvertPlan::new(&Movement::Linear, &[4, 8], &[32], true);
        assert_eq!((l.dst_coef.clone(), l.slots), (vec![1], 32));
    }
}
