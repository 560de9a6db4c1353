//! Rematerialization of widened tiles across reductions: fewer registers
//! held across a reduction's barriers.
//!
//! Takes a specialized kernel. A tile computed from narrower tiles by a
//! short chain of cheap elementwise ops — `x as f32` of a 16-bit load,
//! `select(mask, (x as f32) − mean, 0)` — and used both before and after
//! a reduction is, in registers, the wide tile held across the reduction:
//! a row kernel's `x as f32` keeps 32 f32 registers per thread (16-bit
//! rows of 16384 elements over 16 warps) where `x` itself needs 16, and
//! the reduction's barriers are exactly where every program waits. `ptxas`
//! does not recompute such values on its own: it keeps the f32 copy (the
//! layer norm's 87 registers allow one program of 16 warps per SM; with
//! this pass and two programs asked for, 64 registers and no spills).
//!
//! So each use of such a value `v` that follows a *reduction point* — a
//! `reduce` or `scan`, or a `for` / `if` whose body holds one — in the
//! block that defines `v` reads a copy of `v`'s chain computed right
//! before that use (one copy per stretch between reduction points); the
//! chain's leaves stay live instead. A chain qualifies when it has at most
//! [`BUDGET`] ops, all of them elementwise over tiles of `v`'s shape
//! (`cast`, `+ − ×`, `max`, `min`, `neg`, `abs`, `fma`, `select`) or
//! splats of scalars — masks are leaves —, and its tile leaves hold fewer bits
//! than `v` (a 16-bit source and a bool mask against an f32 result).
//! And it must hold at least [`MIN_PER_THREAD`] elements per thread: the
//! copies cost instructions, and only many values per thread cost enough
//! registers to change how many programs fit on an SM (measured both ways
//! on the H200: benches/NOTES.md, session 31).
//! Broadcasts and `expand_dims` end a chain: copying them could add a
//! layout conversion. Uses nested in a `for` get the copy just before the
//! loop, which computes it once; uses in an `if`'s branch get it at the
//! start of that branch (a rarely taken branch costs nothing otherwise).
//!
//! Guarantees: the same values reach the same ops (the copies are the
//! same pure ops on the same operands, all defined before the original
//! value and so before its uses); nothing else changes, and a kernel with
//! no such value is left untouched. The result verifies. Run by the PTX
//! target after pipelining (passes/mod.rs); the interpreter runs it with
//! the GPU's rewrites, which checks the equivalence over the conformance
//! suite (`conformance_cpu_pipelined`).

use super::build::like;
use crate::ir::*;
use std::collections::{HashMap, HashSet};

/// Most ops one copy may recompute per element.
pub const BUDGET: u32 = 6;

/// Fewest elements per thread a widened tile must hold for its copies to
/// pay: below this, the registers saved do not change how many programs fit
/// on an SM, and the copies' instructions cost time (a 16-bit layer norm of
/// 32 values per thread: 8 % slower with them, H200, session 31).
pub const MIN_PER_THREAD: i64 = 64;

/// Rewrite `k` as the module doc says, for programs of `threads` threads
/// (values of fewer than [`MIN_PER_THREAD`] elements per thread are left
/// alone); whether anything changed.
pub fn remat_widened(k: &mut Kernel, threads: u32) -> bool {
    let mut defs: HashMap<V, OpKind> = HashMap::new();
    k.walk(&mut |op| {
        if op.results.len() == 1 && chain_op(&op.kind) {
            defs.insert(op.results[0], op.kind.clone());
        }
    });
    if defs.is_empty() {
        return false;
    }
    let mut body = std::mem::take(&mut k.body);
    let changed = block(k, &mut defs, &mut body, MIN_PER_THREAD * threads.max(1) as i64);
    k.body = body;
    changed
}

/// Ops a copied chain may contain: elementwise arithmetic over same-shape
/// tiles, or a splat of a scalar, or a constant. Masks (comparisons and
/// their logic) are leaves: a bool tile is cheap to keep.
fn chain_op(kind: &OpKind) -> bool {
    match kind {
        OpKind::Cast { .. } | OpKind::Fma { .. } | OpKind::Select { .. } | OpKind::Splat { .. } | OpKind::Const(_) => true,
        OpKind::Binary { op, .. } => matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Max | BinOp::Min),
        OpKind::Unary { op, .. } => matches!(op, UnOp::Neg | UnOp::Abs),
        _ => false,
    }
}

/// Bits a tile holds (bool: 1 per element); `None` for pointers, views and
/// shapes not known.
fn tile_bits(k: &Kernel, v: V) -> Option<u64> {
    let ty = k.ty(v);
    let d = ty.dtype()?;
    Some(d.bits() as u64 * ty.numel()? as u64)
}

/// Whether `v` is worth copying past a reduction: defined by a chain op
/// (not a splat or constant), a tile, its chain within [`BUDGET`] and its
/// tile leaves narrower in all than `v`.
fn qualifies(k: &Kernel, defs: &HashMap<V, OpKind>, v: V, min_numel: i64) -> bool {
    let Some(kind) = defs.get(&v) else { return false };
    if matches!(kind, OpKind::Splat { .. } | OpKind::Const(_)) || k.ty(v).rank() == 0 || k.ty(v).numel().is_none_or(|n| n < min_numel) {
        return false;
    }
    let Some(bits) = tile_bits(k, v) else { return false };
    let (mut cost, mut leaves) = (0u32, HashSet::new());
    if !walk_chain(k, defs, v, &mut cost, &mut leaves) {
        return false;
    }
    let mut leaf_bits = 0u64;
    for l in leaves {
        match tile_bits(k, l) {
            Some(b) => leaf_bits += b,
            None => return false,
        }
    }
    leaf_bits < bits
}

/// Walk `v`'s chain: count its ops into `cost` (splats and constants are
/// free) and collect its tile leaves; false when it leaves the budget or
/// the shape.
fn walk_chain(k: &Kernel, defs: &HashMap<V, OpKind>, v: V, cost: &mut u32, leaves: &mut HashSet<V>) -> bool {
    match defs.get(&v) {
        Some(OpKind::Splat { .. } | OpKind::Const(_)) => true,
        Some(kind) => {
            *cost += 1;
            if *cost > BUDGET {
                return false;
            }
            let shape = k.ty(v).shape();
            kind.operands().into_iter().all(|o| k.ty(o).shape() == shape && walk_chain(k, defs, o, cost, leaves))
        }
        None if k.ty(v).rank() == 0 => true,
        None => {
            leaves.insert(v);
            true
        }
    }
}

/// A copy of `v`'s chain appended to `out` (leaves shared), its result.
fn copy_chain(k: &mut Kernel, defs: &mut HashMap<V, OpKind>, v: V, out: &mut Vec<Op>, loc: Loc, done: &mut HashMap<V, V>) -> V {
    if let Some(&c) = done.get(&v) {
        return c;
    }
    let Some(kind) = defs.get(&v) else { return v };
    if k.ty(v).rank() == 0 || matches!(kind, OpKind::Splat { .. } | OpKind::Const(_)) {
        return v;
    }
    let mut kind = kind.clone();
    let mut operands = vec![];
    kind.map_operands(&mut |o| {
        operands.push(o);
        o
    });
    let copies: Vec<V> = operands.into_iter().map(|o| copy_chain(k, defs, o, out, loc, done)).collect();
    let mut it = copies.into_iter();
    kind.map_operands(&mut |_| it.next().expect("one copy per operand"));
    let r = like(k, v);
    // (a copy is a chain op too: reductions after it may need copies of it)
    defs.insert(r, kind.clone());
    out.push(Op { kind, results: vec![r], loc });
    done.insert(v, r);
    r
}

/// A reduction, or a region holding one.
fn reduction_point(kind: &OpKind) -> bool {
    match kind {
        OpKind::Reduce { .. } | OpKind::Scan { .. } => true,
        _ => kind.regions().iter().any(|r| r.ops.iter().any(|o| reduction_point(&o.kind))),
    }
}

/// Replace operands through `m` in `op` and its regions.
fn substitute(op: &mut Op, m: &HashMap<V, V>) {
    op.kind.map_operands(&mut |v| m.get(&v).copied().unwrap_or(v));
    match &mut op.kind {
        OpKind::For { body, .. } => body.ops.iter_mut().for_each(|o| substitute(o, m)),
        OpKind::If { then_, else_, .. } => {
            then_.ops.iter_mut().for_each(|o| substitute(o, m));
            else_.ops.iter_mut().for_each(|o| substitute(o, m));
        }
        _ => {}
    }
}

/// For an `if` after a reduction point `r`: each branch that reads a
/// qualifying value defined before `r` computes its own copy first (a
/// branch runs at most once, and the copy stays off the path that does not
/// need it).
fn into_branches(
    k: &mut Kernel,
    defs: &mut HashMap<V, OpKind>,
    op: &mut Op,
    def_at: &HashMap<V, usize>,
    r: usize,
    worth: &mut HashMap<V, bool>,
    min_numel: i64,
) -> bool {
    let loc = op.loc;
    let OpKind::If { then_, else_, .. } = &mut op.kind else { return false };
    let mut changed = false;
    for br in [then_, else_] {
        let mut read: Vec<V> = vec![];
        for o in &br.ops {
            for v in o.deep_operands() {
                if !read.contains(&v) {
                    read.push(v);
                }
            }
        }
        let mut pre = vec![];
        let mut m = HashMap::new();
        let mut done = HashMap::new();
        for v in read {
            if def_at.get(&v).is_some_and(|&d| d < r) && *worth.entry(v).or_insert_with(|| qualifies(k, defs, v, min_numel)) {
                m.insert(v, copy_chain(k, defs, v, &mut pre, loc, &mut done));
            }
        }
        if !m.is_empty() {
            br.ops.iter_mut().for_each(|o| substitute(o, &m));
            pre.append(&mut br.ops);
            br.ops = pre;
            // (the copies are the branch's own values now: its reductions
            // may separate them from later uses in the branch)
            block(k, defs, br, min_numel);
            changed = true;
        }
    }
    changed
}

fn block(k: &mut Kernel, defs: &mut HashMap<V, OpKind>, b: &mut Block, min_numel: i64) -> bool {
    let mut changed = false;
    for op in &mut b.ops {
        match &mut op.kind {
            OpKind::For { body, .. } => changed |= block(k, defs, body, min_numel),
            OpKind::If { then_, else_, .. } => {
                changed |= block(k, defs, then_, min_numel);
                changed |= block(k, defs, else_, min_numel);
            }
            _ => {}
        }
    }
    // (position in `out` of each value this block defines, of the last
    // reduction point, and of each value's latest copy)
    let mut def_at: HashMap<V, usize> = HashMap::new();
    let mut last_reduction: Option<usize> = None;
    let mut copies: HashMap<V, (V, usize)> = HashMap::new();
    let mut worth: HashMap<V, bool> = HashMap::new();
    let mut out: Vec<Op> = Vec::with_capacity(b.ops.len());
    for mut op in std::mem::take(&mut b.ops) {
        if let Some(r) = last_reduction {
            let read = op.deep_operands();
            let mut m = HashMap::new();
            // (an `if` whose branches alone read the value computes it in
            // the branch that does: `into_branches`)
            let branch_only = |v: V| matches!(&op.kind, OpKind::If { cond, .. } if *cond != v);
            for v in read {
                if def_at.get(&v).is_none_or(|&d| d >= r) || branch_only(v) {
                    continue;
                }
                if !*worth.entry(v).or_insert_with(|| qualifies(k, defs, v, min_numel)) {
                    continue;
                }
                let c = match copies.get(&v) {
                    Some(&(c, at)) if at > r => c,
                    _ => {
                        let c = copy_chain(k, defs, v, &mut out, op.loc, &mut HashMap::new());
                        copies.insert(v, (c, out.len() - 1));
                        c
                    }
                };
                m.insert(v, c);
            }
            if !m.is_empty() {
                substitute(&mut op, &m);
                changed = true;
            }
            changed |= into_branches(k, defs, &mut op, &def_at, r, &mut worth, min_numel);
        }
        for r in &op.results {
            def_at.insert(*r, out.len());
        }
        let red = reduction_point(&op.kind);
        out.push(op);
        if red {
            last_reduction = Some(out.len() - 1);
        }
    }
    b.ops = out;
    changed
}
