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
//!   yields arrive in;
//! - a `load` whose pointer (and mask, and `other` unless a splat) is in a
//!   non-default layout `L` is done in `L`: each thread reads the elements
//!   its registers hold;
//! - **backward, from broadcasts** (`broadcast_seeds`): a *loaded* vector
//!   that is only ever `expand_dims`-ed and broadcast into a shape `T` —
//!   a loaded bias or scale broadcast over rows, indices loaded for a
//!   gather — is computed in the slice of `T`'s default layout along the
//!   new axis, from its `arange` up: its index arithmetic, the load and
//!   what follows the load, so the broadcast is a register remap instead
//!   of a round trip through shared memory. Only where every use of every
//!   value of that computation stays inside it or is such a broadcast
//!   (into `T`s with one slice — also through elementwise ops with splats
//!   on the expanded value: a column of pointers), and its leaves are
//!   `arange`s, splats and scalars: then it never adds a conversion; and
//!   only slices of at most [`MAX_SLICE_REGS`] registers per thread (a
//!   wide slice held whole costs more registers than it saves). A loop's
//!   carried value belongs as one value with its initial value, yielded
//!   value and result — the shape pipelining gives a load in a loop (the
//!   prologue's load, the prefetch of the next iteration, the value the
//!   body reads: the attention backward's per-row statistics) — and each
//!   carried copy, live across the whole body, counts against the bound.
//!   Index arithmetic without a load is left to `plan::remat`, which
//!   already recomputes it in place. (Triton's layout propagation does
//!   this backward from every anchor, with conversions where consumers
//!   disagree; here a disagreement keeps the default layouts.)
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

/// See the module doc. `default` gives the default layout of a shape;
/// `backward`: the backward rule too (`broadcast_seeds`).
pub fn assign(k: &Kernel, default: &mut dyn FnMut(&[u32]) -> Blocked, backward: bool) -> ValueLayouts {
    let mut seeds = if backward { broadcast_seeds(k, default) } else { Seeds { aranges: HashMap::new(), components: vec![] } };
    loop {
        let mut out = ValueLayouts::new();
        let mut splats = HashSet::new();
        block(k, &k.body, default, &mut out, &mut splats, &seeds.aranges);
        // a component whose members did not all arrive in its slice (an op
        // the forward rules do not carry) keeps its default layouts
        let failed: Vec<usize> =
            seeds.components.iter().enumerate().filter(|(_, c)| c.members.iter().any(|v| out.get(v) != Some(&c.layout))).map(|(i, _)| i).collect();
        if failed.is_empty() {
            return out;
        }
        for i in failed.into_iter().rev() {
            let c = seeds.components.remove(i);
            for a in &c.aranges {
                seeds.aranges.remove(a);
            }
        }
    }
}

/// Most registers per thread a slice layout of the backward rule may hold.
pub const MAX_SLICE_REGS: usize = 16;

/// A computation `broadcast_seeds` puts in one slice layout.
struct Component {
    layout: Blocked,
    /// Its values (all of them must end in `layout`).
    members: Vec<V>,
    /// Its `arange` results: where the forward rules start.
    aranges: Vec<V>,
}

struct Seeds {
    /// The slice layout of each seeded `arange` result.
    aranges: HashMap<V, Blocked>,
    components: Vec<Component>,
}

/// The backward rule of the module doc: the computations feeding
/// `broadcast(expand_dims(y, axis))` that can be done in the slice of the
/// broadcast's default layout, as `arange` seeds for the forward rules.
fn broadcast_seeds(k: &Kernel, default: &mut dyn FnMut(&[u32]) -> Blocked) -> Seeds {
    // definitions and uses of every value, nested blocks included
    let mut defs: HashMap<V, &OpKind> = HashMap::new();
    let mut uses: HashMap<V, Vec<&Op>> = HashMap::new();
    k.walk(&mut |op| {
        for &r in &op.results {
            defs.insert(r, &op.kind);
        }
        for u in op.kind.operands() {
            uses.entry(u).or_default().push(op);
        }
    });
    // the loops' carried slots: (initial value, block argument, yielded
    // value, result) — a vector loaded by a pipelined loop arrives through
    // them (the prologue's load, and the body's prefetch of the next
    // iteration, `ferrotile_ir::passes::pipeline`); each `For` op and its
    // body's closing `Yield` by address, with their slots
    let mut slots: Vec<[V; 4]> = vec![];
    let mut slot_of_arg: HashMap<V, usize> = HashMap::new();
    let mut slot_of_result: HashMap<V, usize> = HashMap::new();
    let mut loop_slots: HashMap<*const Op, Vec<usize>> = HashMap::new();
    let mut yield_slots: HashMap<*const Op, Vec<usize>> = HashMap::new();
    k.walk(&mut |op| {
        if let OpKind::For { inits, body, .. } = &op.kind {
            let ids: Vec<usize> = (0..inits.len()).map(|i| slots.len() + i).collect();
            for (i, &init) in inits.iter().enumerate() {
                let s = [init, body.args[1 + i], body.yields()[i], op.results[i]];
                slot_of_arg.insert(s[1], slots.len());
                slot_of_result.insert(s[3], slots.len());
                slots.push(s);
            }
            if let Some(y) = body.ops.last() {
                yield_slots.insert(y as *const Op, ids.clone());
            }
            loop_slots.insert(op as *const Op, ids);
        }
    });
    // the slot a use of `v` by `op` passes it into: `v` an initial value of
    // the loop `op`, or a value its body yields
    let passes = |op: &Op, v: V| -> Option<Vec<usize>> {
        let at = op as *const Op;
        let ids = loop_slots.get(&at).or_else(|| yield_slots.get(&at))?;
        let found: Vec<usize> =
            ids.iter().copied().filter(|&i| slots[i][0] == v && loop_slots.contains_key(&at) || slots[i][2] == v && yield_slots.contains_key(&at)).collect();
        // (a loop's bound or step is not carried)
        if loop_slots.contains_key(&at) && op.kind.operands()[..3].contains(&v) {
            return None;
        }
        Some(found)
    };
    let tile = |v: V| k.ty(v).rank() >= 1;
    let splat = |v: V| matches!(defs.get(&v), Some(OpKind::Splat { .. }));
    // the slice layout an `expand_dims` result `e` asks of its operand:
    // every use of `e` a broadcast — or an elementwise op of `e`'s shape
    // with splats (a column of pointers offset by it), whose uses are so
    // in turn — all into shapes whose default layout sliced along the axis
    // is one layout
    let mut asks = |e: V, axis: u8| -> Option<Blocked> {
        let mut want: Option<Blocked> = None;
        let mut seen: HashSet<V> = HashSet::new();
        let mut stack = vec![e];
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            for op in uses.get(&x)? {
                let r = *op.results.first()?;
                match &op.kind {
                    OpKind::Broadcast { .. } => {
                        let l = default(&shape(k, r)?).slice(axis as usize);
                        if want.as_ref().is_some_and(|w| *w != l) {
                            return None;
                        }
                        want = Some(l);
                    }
                    kind if kind.is_elementwise() && shape(k, r) == shape(k, x) && kind.operands().into_iter().all(|u| u == x || !tile(u) || splat(u)) => {
                        stack.push(r)
                    }
                    _ => return None,
                }
            }
        }
        want
    };
    let mut seeds = Seeds { aranges: HashMap::new(), components: vec![] };
    let mut taken: HashSet<V> = HashSet::new();
    let mut anchors: Vec<(V, V, u8)> = vec![];
    k.walk(&mut |op| {
        if let (OpKind::ExpandDims { x, axis }, Some(&e)) = (&op.kind, op.results.first()) {
            if tile(*x) && !splat(*x) {
                anchors.push((e, *x, *axis));
            }
        }
    });
    for &(e, y, axis) in &anchors {
        if taken.contains(&y) {
            continue;
        }
        let Some(layout) = asks(e, axis) else { continue };
        // (a slice that holds many elements per thread — the columns of a
        // `wgmma` accumulator, 64 of them in a 128 × 256 tile — keeps them
        // and their addresses live together: the W8A8 epilogue's scales
        // spilled 0.5–1.3 KB that way offline, where the round trip through
        // shared memory reads each when it is used)
        if layout.regs() > MAX_SLICE_REGS {
            continue;
        }
        // the computation of `y`, closed both ways: backward through
        // elementwise ops and loads to `arange`s (splats and scalars are
        // leaves), forward through every elementwise op and load that reads
        // a member; any other producer or consumer — but an `expand_dims`
        // broadcast into this slice — rejects it
        let mut members: Vec<V> = vec![];
        let mut seen: HashSet<V> = HashSet::new();
        let mut stack = vec![y];
        let mut ok = true;
        let chain = |kind: &OpKind| kind.is_elementwise() || matches!(kind, OpKind::Load { .. });
        'grow: while let Some(v) = stack.pop() {
            if !seen.insert(v) {
                continue;
            }
            if taken.contains(&v) || shape(k, v).as_deref() != Some(&layout.shape[..]) {
                ok = false;
                break;
            }
            members.push(v);
            // a carried slot is one value four times over: its initial
            // value, block argument, yielded value and result all belong
            let slot = slot_of_arg.get(&v).or_else(|| slot_of_result.get(&v));
            match defs.get(&v) {
                _ if slot.is_some() => stack.extend(slots[*slot.unwrap()]),
                Some(kind) if chain(kind) => stack.extend(kind.operands().into_iter().filter(|&u| tile(u) && !splat(u))),
                Some(OpKind::Arange { .. }) => {}
                _ => {
                    ok = false;
                    break;
                }
            }
            for op in uses.get(&v).map(|u| &u[..]).unwrap_or(&[]) {
                match (&op.kind, op.results.first()) {
                    (OpKind::ExpandDims { axis, .. }, Some(&e2)) if asks(e2, *axis).as_ref() == Some(&layout) => {}
                    (OpKind::For { .. } | OpKind::Yield(_), _) => match passes(op, v) {
                        Some(ids) if !ids.is_empty() => stack.extend(ids.into_iter().flat_map(|i| slots[i])),
                        _ => {
                            ok = false;
                            break 'grow;
                        }
                    },
                    (kind, Some(&r)) if chain(kind) => stack.push(r),
                    _ => {
                        ok = false;
                        break 'grow;
                    }
                }
            }
        }
        if !ok {
            continue;
        }
        // (a carried slot — a vector a pipelined loop prefetches — holds
        // its slice through the whole body, one more copy per stage: the
        // attention backward's row statistics in a 64-column `wgmma` slice,
        // two of them, spilled 100+ bytes offline where the round trip
        // through shared memory did not)
        let carried = members.iter().filter(|m| slot_of_arg.contains_key(m)).count();
        if carried * layout.regs() > MAX_SLICE_REGS {
            continue;
        }
        let aranges: Vec<V> = members.iter().copied().filter(|m| matches!(defs.get(m), Some(OpKind::Arange { .. }))).collect();
        // (index arithmetic alone is already broadcast without shared
        // memory — recomputed in place, `plan::remat` —: only a computation
        // with a load needs the slice)
        if aranges.is_empty() || !members.iter().any(|m| matches!(defs.get(m), Some(OpKind::Load { .. }))) {
            continue;
        }
        for a in &aranges {
            seeds.aranges.insert(*a, layout.clone());
        }
        taken.extend(members.iter().copied());
        seeds.components.push(Component { layout, members, aranges });
    }
    seeds
}

fn shape(k: &Kernel, v: V) -> Option<Vec<u32>> {
    k.ty(v).shape().iter().map(|d| d.known().map(|x| x as u32)).collect()
}

fn block(k: &Kernel, b: &Block, default: &mut dyn FnMut(&[u32]) -> Blocked, out: &mut ValueLayouts, splats: &mut HashSet<V>, aranges: &HashMap<V, Blocked>) {
    for op in &b.ops {
        match &op.kind {
            OpKind::For { inits, body, .. } => {
                carried(k, op, inits, body, default, out, splats, aranges);
                continue;
            }
            OpKind::If { then_, else_, .. } => {
                block(k, then_, default, out, splats, aranges);
                block(k, else_, default, out, splats, aranges);
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
            OpKind::Arange { .. } => aranges.get(&res).cloned(),
            // a load in its pointer's layout, the mask and `other` in it too
            // (or splats)
            OpKind::Load { ptr, mask, other } => out
                .get(ptr)
                .filter(|l| [mask, other].into_iter().flatten().all(|&u| k.ty(u).rank() == 0 || splats.contains(&u) || out.get(&u) == Some(*l)))
                .cloned(),
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
#[allow(clippy::too_many_arguments)]
fn carried(
    k: &Kernel,
    op: &Op,
    inits: &[V],
    body: &Block,
    default: &mut dyn FnMut(&[u32]) -> Blocked,
    out: &mut ValueLayouts,
    splats: &mut HashSet<V>,
    aranges: &HashMap<V, Blocked>,
) {
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
    block(k, body, default, &mut trial, &mut trial_splats, aranges);
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
        block(k, body, default, &mut trial, &mut trial_splats, aranges);
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
            Blocked::wgmma_a_operand(&[128, 64], 8, 8),
            Blocked::wgmma_a_operand(&[64, 16], 4, 4),
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
