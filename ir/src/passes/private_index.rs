//! `private_index`: a loaded vector that is only broadcast gets index
//! arithmetic of its own.
//!
//! **Takes** a specialized kernel. **Finds** each `load` whose result, and
//! every elementwise op of the same shape computed from it in the same
//! block, is used only by elementwise ops of that shape and by
//! `expand_dims` — a bias, a gain or a scale broadcast over rows — and
//! whose pointer, mask and `other` (and the other tile operands of those
//! elementwise ops) are index arithmetic: elementwise ops down to
//! `arange`s, with splats and scalars as leaves. Where a value of that
//! index arithmetic is also read by something else (the column offsets
//! `k0 + arange(0, BK)` of a loop that also address a matrix tile and
//! mask a second operand's rows), **it clones** the whole index
//! computation — `arange`s included — right before the ops that read it,
//! and the load reads the copy.
//!
//! **Guarantees**: the same values everywhere (the copies compute what
//! the originals do; only index arithmetic is duplicated, never a load or
//! anything with an effect); afterwards each such load's computation is
//! closed, which is what the backends' backward slice rule
//! (`plan::slices`, broadcast seeds) needs to compute the vector in the
//! slice of the broadcast's layout — a register remap instead of a round
//! trip through shared memory per use. **Why a pass**: a value has one
//! layout; a shared `arange` would need two (the matrix tile's and the
//! slice), and index arithmetic costs a few integer ops to recompute where
//! a conversion costs a barrier (Triton rematerializes such chains for the
//! same reason). Run where that rule is on and needs it (PTX with
//! `broadcast_slices`; not WGSL, where it removed no barrier from the
//! conformance kernels it applies to and only added code), before
//! pipelining (which then prefetches the private copy with the load).

use super::build::like;
use crate::ir::*;
use crate::types::Dim;
use std::collections::{HashMap, HashSet};

/// Clone the shared index arithmetic of broadcast-only loads (module doc);
/// whether anything changed.
pub fn private_index(k: &mut Kernel) -> bool {
    // every op's definition and every value's readers, nested blocks included
    let mut defs: HashMap<V, OpKind> = HashMap::new();
    let mut readers: HashMap<V, Vec<(OpKind, Option<V>)>> = HashMap::new();
    k.walk(&mut |op| {
        for &r in &op.results {
            defs.insert(r, op.kind.clone());
        }
        for u in op.kind.operands() {
            readers.entry(u).or_default().push((op.kind.clone(), op.results.first().copied()));
        }
    });
    let mut plans: HashMap<V, Vec<V>> = HashMap::new();
    let loads: Vec<V> = {
        let mut v = vec![];
        k.walk(&mut |op| {
            if matches!(op.kind, OpKind::Load { .. }) && k.ty(op.results[0]).rank() >= 1 {
                v.push(op.results[0]);
            }
        });
        v
    };
    for l in loads {
        if let Some(clone) = plan(k, &defs, &readers, l) {
            plans.insert(l, clone);
        }
    }
    if plans.is_empty() {
        return false;
    }
    let mut at: HashMap<V, (OpKind, Loc)> = HashMap::new();
    k.walk(&mut |op| {
        if let Some(&r) = op.results.first() {
            at.insert(r, (op.kind.clone(), op.loc));
        }
    });
    let mut body = std::mem::take(&mut k.body);
    rewrite(k, &mut body, &plans, &at);
    k.body = body;
    true
}

/// The index values to clone for load `l` (in definition order), or `None`
/// where the load does not qualify or its index arithmetic is its own.
fn plan(k: &Kernel, defs: &HashMap<V, OpKind>, readers: &HashMap<V, Vec<(OpKind, Option<V>)>>, l: V) -> Option<Vec<V>> {
    let shape = k.ty(l).shape().to_vec();
    let tile = |v: V| k.ty(v).rank() >= 1;
    let leaf = |v: V| !tile(v) || matches!(defs.get(&v), Some(OpKind::Splat { .. }));
    // forward: the load and what is computed from it, used only elementwise
    // (same shape) and by `expand_dims`
    let mut fwd: Vec<V> = vec![];
    let mut extra: Vec<V> = vec![];
    let mut stack = vec![l];
    let mut seen = HashSet::new();
    let mut expanded = false;
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        fwd.push(v);
        for (kind, r) in readers.get(&v).map(|r| &r[..]).unwrap_or(&[]) {
            match (kind, r) {
                (OpKind::ExpandDims { .. }, Some(_)) => expanded = true,
                (kind, Some(r)) if kind.is_elementwise() && k.ty(*r).shape() == &shape[..] => {
                    extra.extend(kind.operands().into_iter().filter(|&u| u != v && !leaf(u)));
                    stack.push(*r);
                }
                _ => return None,
            }
        }
    }
    if !expanded {
        return None;
    }
    // backward: the index arithmetic the load and those ops read
    let Some(OpKind::Load { ptr, mask, other }) = defs.get(&l) else { return None };
    let mut index: Vec<V> = vec![];
    let mut stack: Vec<V> = [*ptr].into_iter().chain(*mask).chain(*other).chain(extra).filter(|&u| !leaf(u) && !fwd.contains(&u)).collect();
    let mut seen = HashSet::new();
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        match defs.get(&v)? {
            OpKind::Arange { .. } => index.push(v),
            kind if kind.is_elementwise() => {
                index.push(v);
                stack.extend(kind.operands().into_iter().filter(|&u| !leaf(u)));
            }
            _ => return None,
        }
    }
    // Where the load's vector goes: (axis, shape) of each broadcast of an
    // `expand_dims` of it — through elementwise ops with splats on the
    // expanded value (a column of pointers) — or `None` where somewhere
    // else.
    fn targets(
        k: &Kernel,
        readers: &HashMap<V, Vec<(OpKind, Option<V>)>>,
        defs: &HashMap<V, OpKind>,
        e: V,
        axis: u8,
        out: &mut HashSet<(u8, Vec<Dim>)>,
    ) -> Option<()> {
        for (kind, r) in readers.get(&e).map(|r| &r[..]).unwrap_or(&[]) {
            let r = (*r)?;
            match kind {
                OpKind::Broadcast { .. } => {
                    out.insert((axis, k.ty(r).shape().to_vec()));
                }
                kind if kind.is_elementwise()
                    && k.ty(r).shape() == k.ty(e).shape()
                    && kind.operands().into_iter().all(|u| u == e || k.ty(u).rank() == 0 || matches!(defs.get(&u), Some(OpKind::Splat { .. }))) =>
                {
                    targets(k, readers, defs, r, axis, out)?
                }
                _ => return None,
            }
        }
        Some(())
    }
    let mut wanted: HashSet<(u8, Vec<Dim>)> = HashSet::new();
    for &v in &fwd {
        for (kind, r) in readers.get(&v).map(|r| &r[..]).unwrap_or(&[]) {
            if let (OpKind::ExpandDims { axis, .. }, Some(e)) = (kind, r) {
                targets(k, readers, defs, *e, *axis, &mut wanted)?;
            }
        }
    }
    // Whether the backends' slice rule can take the vector with the index
    // arithmetic as it is: every other reader of an index value an
    // `expand_dims` broadcast where the vector is (then one slice layout
    // serves both), or index arithmetic or a load whose readers are so in
    // turn.
    let ours: HashSet<V> = index.iter().chain(&fwd).copied().collect();
    let mut fine: HashSet<V> = HashSet::new();
    fn compatible(
        k: &Kernel,
        readers: &HashMap<V, Vec<(OpKind, Option<V>)>>,
        defs: &HashMap<V, OpKind>,
        ours: &HashSet<V>,
        wanted: &HashSet<(u8, Vec<Dim>)>,
        l: V,
        v: V,
        fine: &mut HashSet<V>,
    ) -> bool {
        if !fine.insert(v) {
            return true;
        }
        readers.get(&v).map(|r| &r[..]).unwrap_or(&[]).iter().all(|(kind, r)| {
            let Some(r) = *r else { return false };
            if ours.contains(&r) || r == l {
                return true;
            }
            match kind {
                OpKind::ExpandDims { axis, .. } => {
                    let mut t = HashSet::new();
                    targets(k, readers, defs, r, *axis, &mut t).is_some() && t.is_subset(wanted)
                }
                // (another load on the same offsets — a second vector
                // broadcast alike — joins the same slice)
                kind if (kind.is_elementwise() || matches!(kind, OpKind::Load { .. })) && k.ty(r).shape() == k.ty(v).shape() => {
                    compatible(k, readers, defs, ours, wanted, l, r, fine)
                }
                _ => false,
            }
        })
    }
    if index.iter().all(|&v| compatible(k, readers, defs, &ours, &wanted, l, v, &mut fine)) {
        return None;
    }
    // operands before the values that read them
    let set: HashSet<V> = index.iter().copied().collect();
    let mut order: Vec<V> = vec![];
    let mut done: HashSet<V> = HashSet::new();
    fn visit(v: V, set: &HashSet<V>, defs: &HashMap<V, OpKind>, done: &mut HashSet<V>, order: &mut Vec<V>) {
        if !done.insert(v) {
            return;
        }
        for u in defs[&v].operands() {
            if set.contains(&u) {
                visit(u, set, defs, done, order);
            }
        }
        order.push(v);
    }
    for &v in &index {
        visit(v, &set, defs, &mut done, &mut order);
    }
    Some(order)
}

/// In each block, clone the planned loads' index values right before the
/// first op that reads them (the load, or an op computed from it) —
/// operands first —, and let those ops read the copies.
fn rewrite(k: &mut Kernel, b: &mut Block, plans: &HashMap<V, Vec<V>>, defs: &HashMap<V, (OpKind, Loc)>) {
    // the load each op of this block belongs to: a planned load, and the
    // elementwise ops of its shape computed from it (its forward set)
    let mut owner: HashMap<V, V> = HashMap::new();
    for op in &b.ops {
        let Some(&r) = op.results.first() else { continue };
        if matches!(op.kind, OpKind::Load { .. }) && plans.contains_key(&r) {
            owner.insert(r, r);
        } else if op.kind.is_elementwise() {
            if let Some(&o) = op.kind.operands().iter().find_map(|u| owner.get(u)) {
                if k.ty(r).shape() == k.ty(o).shape() {
                    owner.insert(r, o);
                }
            }
        }
    }
    let mut copies: HashMap<V, HashMap<V, V>> = HashMap::new();
    let mut out: Vec<Op> = Vec::with_capacity(b.ops.len());
    for mut op in std::mem::take(&mut b.ops) {
        for r in op.kind.regions_mut() {
            rewrite(k, r, plans, defs);
        }
        if let Some(l) = op.results.first().and_then(|r| owner.get(r)).copied() {
            let plan = &plans[&l];
            let in_plan: HashSet<V> = plan.iter().copied().collect();
            // the index values this op reads, and those they read
            let mut need: HashSet<V> = HashSet::new();
            let mut stack: Vec<V> = op.kind.operands().into_iter().filter(|u| in_plan.contains(u)).collect();
            while let Some(v) = stack.pop() {
                if need.insert(v) {
                    stack.extend(defs[&v].0.operands().into_iter().filter(|u| in_plan.contains(u)));
                }
            }
            let map = copies.entry(l).or_default();
            // (`plan` lists operands before the values that read them)
            for &v in plan {
                if need.contains(&v) && !map.contains_key(&v) {
                    let (kind, loc) = &defs[&v];
                    let mut kind = kind.clone();
                    kind.map_operands(&mut |u| map.get(&u).copied().unwrap_or(u));
                    let nv = like(k, v);
                    out.push(Op { kind, results: vec![nv], loc: *loc });
                    map.insert(v, nv);
                }
            }
            op.kind.map_operands(&mut |u| map.get(&u).copied().unwrap_or(u));
        }
        out.push(op);
    }
    b.ops = out;
}
