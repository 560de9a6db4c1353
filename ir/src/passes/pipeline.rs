//! Software pipelining: loads in a `dot` loop are issued one (or `depth`,
//! [`pipeline_depth`]) iterations ahead.
//!
//! Takes a specialized kernel. For every `for` loop whose body contains a
//! `dot`, the *prefetchable* loads of its body — top-level loads whose
//! pointer, mask and `other` depend only on the induction variable and on
//! values defined before the loop, through pure ops (index arithmetic,
//! comparisons, pointer offsets) and through other prefetchable loads (an
//! index read from a table that addresses the next load: gathers, paged
//! caches) — are rewritten so that iteration `i` consumes tiles loaded
//! during iteration `i - 1`:
//!
//! ```text
//! p = load(ptr(lo), mask(lo) & (lo < hi))           // prologue
//! for iv in lo..hi step s, carried.., p {
//!     p_next = load(ptr(iv+s), mask(iv+s) & (iv+s < hi))   // issued first
//!     ... body, with the original load's uses reading `p` ...
//!     yield .., p_next
//! }
//! ```
//!
//! The next tile's global loads are then in flight while the current tile's
//! `dot` runs (the backend puts no barrier between them); the cost is one
//! more set of operand registers — or, where the PTX backend turns the loads
//! into `cp.async` copies (`backends/src/ptx/async_copy.rs`), one more
//! shared-memory slot. With a distance `d > 1` the prologue loads the first
//! `d` iterations and each tile is carried through `d` loop values. Without a `dot` the loop is left alone
//! (with many warps resident, a streaming loop's latency is hidden by the
//! others, and prefetching costs registers) unless the launch asks for every
//! loop ([`pipeline_loops`]: the CUDA runtime also does for launches of at
//! most 16 warps per SM), and so is a loop
//! that stores to memory (a load moved one iteration earlier could miss the
//! previous iteration's store).
//!
//! Guarantees: the same values reach the same ops (a load's address and mask
//! are functions of `iv` and loop-invariant values only, so evaluating them
//! for `iv + s` one iteration early is exact); no additional memory is
//! touched: the prefetch past the last iteration, and the prologue of a loop
//! that runs zero times, are fully masked off — index loads too, and the
//! loads they address are then masked off as well (a `load_block`, which
//! has no mask, is moved far outside its view instead: its first offset
//! becomes `MIN/2` of its type, so it reads zeros and touches nothing).
//! The result verifies.

use super::build::{defined_in, like, new_value};
use crate::ir::*;
use crate::types::*;
use std::collections::{HashMap, HashSet};

/// Pipeline every eligible loop of `k` one iteration ahead (see the module
/// doc).
pub fn pipeline(k: &mut Kernel) {
    pipeline_depth(k, 1);
}

/// Pipeline every eligible loop of `k` with loads issued `depth` iterations
/// ahead (`depth` ≥ 1): the prologue loads iterations `lo, lo + s, ...,
/// lo + (depth-1)·s`, each loaded tile is carried through `depth` loop values
/// (a shift register: the body consumes the oldest and yields the others
/// shifted by one, plus the tile it loads for `iv + depth·s`). `depth` 0
/// leaves the kernel alone.
pub fn pipeline_depth(k: &mut Kernel, depth: u32) {
    pipeline_loops(k, depth, false);
}

/// [`pipeline_depth`], and with `every_loop` also the loops without a
/// `dot` (asked for per launch: `LaunchConfig::pipeline_every_loop`): a
/// streaming reduction — a GEMV over quantized weights — has nothing else
/// to keep its next loads in flight while it computes; loops that store
/// stay as they are either way.
pub fn pipeline_loops(k: &mut Kernel, depth: u32, every_loop: bool) {
    if depth == 0 {
        return;
    }
    let mut body = std::mem::take(&mut k.body);
    block(k, &mut body, depth, every_loop);
    k.body = body;
}

fn block(k: &mut Kernel, b: &mut Block, depth: u32, every_loop: bool) {
    let mut i = 0;
    while i < b.ops.len() {
        // inner loops first
        match &mut b.ops[i].kind {
            OpKind::For { body, .. } => block(k, body, depth, every_loop),
            OpKind::If { then_, else_, .. } => {
                block(k, then_, depth, every_loop);
                block(k, else_, depth, every_loop);
            }
            _ => {}
        }
        let pro = match &b.ops[i].kind {
            OpKind::For { .. } => rewrite_loop(k, &mut b.ops[i], depth, every_loop),
            _ => vec![],
        };
        let n = pro.len();
        b.ops.splice(i..i, pro);
        i += n + 1;
    }
}

/// Ops that may be evaluated for an iteration that does not run (the
/// prefetch past the end): no memory access and nothing that can trap —
/// integer division included, which is total in the language (`x / 0 =
/// x`, `x % 0 = 0`, `MIN / −1 = MIN` on every backend: docs/semantics.md).
/// (Loads are handled by the caller: masked off for such an iteration.)
pub(super) fn is_pure(kind: &OpKind) -> bool {
    kind.is_elementwise()
        || matches!(
            kind,
            OpKind::Const(_)
                | OpKind::ProgramId(_)
                | OpKind::NumPrograms(_)
                | OpKind::Arange { .. }
                | OpKind::Splat { .. }
                | OpKind::Broadcast { .. }
                | OpKind::ExpandDims { .. }
        )
}

/// Whether a block (or a region inside it) stores: then a load of iteration
/// `i + 1` might read what iteration `i` writes, and must not move earlier.
fn writes_memory(b: &Block) -> bool {
    b.ops.iter().any(|o| {
        matches!(o.kind, OpKind::Store { .. } | OpKind::AtomicAdd { .. } | OpKind::StoreBlock { .. }) || o.kind.regions().iter().any(|r| writes_memory(r))
    })
}

/// Rewrite one `for` op in place; returns the prologue ops to insert
/// before it (empty when nothing is pipelined).
fn rewrite_loop(k: &mut Kernel, op: &mut Op, depth: u32, every_loop: bool) -> Vec<Op> {
    let loc = op.loc;
    let OpKind::For { lo, hi, step, inits, body } = &mut op.kind else { return vec![] };
    if !(every_loop || body.ops.iter().any(|o| matches!(o.kind, OpKind::Dot { .. }))) || writes_memory(body) {
        return vec![];
    }
    let (lo, hi, step) = (*lo, *hi, *step);
    let iv = body.args[0];
    let mut inside = HashSet::new();
    defined_in(body, &mut inside);
    // values computable from iv and loop invariants: top-level pure ops,
    // and loads of such addresses (the loop writes no memory, so a load
    // evaluated early reads what it reads in its own iteration): an index
    // loaded from a table may address the next load (a gather, a paged
    // cache), and both are issued ahead
    let is_load = |o: &Op| matches!(o.kind, OpKind::Load { .. } | OpKind::LoadBlock { .. });
    let mut pure: HashSet<V> = HashSet::new();
    pure.insert(iv);
    let ok = |v: V, pure: &HashSet<V>| !inside.contains(&v) || pure.contains(&v);
    for o in &body.ops {
        if (is_pure(&o.kind) || is_load(o)) && o.kind.operands().iter().all(|v| ok(*v, &pure)) {
            pure.extend(o.results.iter().copied());
        }
    }
    let loads: Vec<usize> =
        body.ops.iter().enumerate().filter(|(_, o)| is_load(o) && o.kind.operands().iter().all(|v| ok(*v, &pure))).map(|(i, _)| i).collect();
    if loads.is_empty() {
        return vec![];
    }
    // the pure ops the loads need, in body order
    let mut need: HashSet<V> = HashSet::new();
    let mut stack: Vec<V> = loads.iter().flat_map(|&i| body.ops[i].kind.operands()).collect();
    let def: HashMap<V, usize> = body.ops.iter().enumerate().flat_map(|(i, o)| o.results.iter().map(move |r| (*r, i))).collect();
    while let Some(v) = stack.pop() {
        if v != iv && inside.contains(&v) && need.insert(v) {
            stack.extend(body.ops[def[&v]].kind.operands());
        }
    }
    // (in body order; loads among them are the index loads of other loads)
    let load_set: HashSet<usize> = loads.iter().copied().collect();
    let cone: Vec<usize> = (0..body.ops.len()).filter(|i| load_set.contains(i) || body.ops[*i].results.iter().any(|r| need.contains(r))).collect();
    let iv_ty = k.ty(iv).clone();
    let bool_ty = Type::scalar(DType::Bool);

    // Clone the cone and the loads with `iv := at`, the loads masked by
    // `at < hi`. Returns the ops and the loaded values.
    let emit = |k: &mut Kernel, at: V, ops_src: &[Op]| -> (Vec<Op>, Vec<V>) {
        let mut out = vec![];
        let mut map: HashMap<V, V> = HashMap::new();
        map.insert(iv, at);
        let live = new_value(k, bool_ty.clone());
        out.push(Op { kind: OpKind::Cmp { op: CmpOp::Lt, a: at, b: hi }, results: vec![live], loc });
        let mut loaded = vec![];
        for &i in &cone {
            if !load_set.contains(&i) {
                let mut o = ops_src[i].clone();
                o.kind.map_operands(&mut |v| *map.get(&v).unwrap_or(&v));
                let rs: Vec<V> = o.results.iter().map(|r| like(k, *r)).collect();
                for (a, b) in o.results.iter().zip(&rs) {
                    map.insert(*a, *b);
                }
                o.results = rs;
                out.push(o);
                continue;
            }
            let src = &ops_src[i];
            let m = |v: &V| *map.get(v).unwrap_or(v);
            if let OpKind::LoadBlock { view, offsets, shape } = &src.kind {
                // no mask: an iteration that does not run loads a block far
                // outside the view (all zeros, no memory touched)
                let o0 = m(&offsets[0]);
                let ot = k.ty(o0).clone();
                let far = new_value(k, ot.clone());
                let lit = if ot.dtype() == Some(DType::I64) { i64::MIN / 2 } else { (i32::MIN / 2) as i64 };
                out.push(Op { kind: OpKind::Const(Lit::Int(lit)), results: vec![far], loc: src.loc });
                let o0b = new_value(k, ot);
                out.push(Op { kind: OpKind::Select { cond: live, a: o0, b: far }, results: vec![o0b], loc: src.loc });
                let offs: Vec<V> = std::iter::once(o0b).chain(offsets[1..].iter().map(m)).collect();
                let r = like(k, src.results[0]);
                out.push(Op { kind: OpKind::LoadBlock { view: m(view), offsets: offs, shape: shape.clone() }, results: vec![r], loc: src.loc });
                map.insert(src.results[0], r);
                loaded.push(r);
                continue;
            }
            let OpKind::Load { ptr, mask, other } = &src.kind else { unreachable!() };
            let shape = k.ty(src.results[0]).shape().to_vec();
            let splat = if shape.is_empty() {
                live
            } else {
                let t = new_value(k, Type::tile(Elem::Val(DType::Bool), shape.clone()));
                out.push(Op { kind: OpKind::Splat { x: live, shape: shape.clone() }, results: vec![t], loc: src.loc });
                t
            };
            let mask2 = match mask {
                Some(mv) => {
                    let both = new_value(k, Type::tile(Elem::Val(DType::Bool), shape.clone()));
                    out.push(Op { kind: OpKind::Binary { op: BinOp::And, a: m(mv), b: splat }, results: vec![both], loc: src.loc });
                    both
                }
                None => splat,
            };
            let r = like(k, src.results[0]);
            out.push(Op { kind: OpKind::Load { ptr: m(ptr), mask: Some(mask2), other: other.as_ref().map(m) }, results: vec![r], loc: src.loc });
            map.insert(src.results[0], r);
            loaded.push(r);
        }
        (out, loaded)
    };

    let src_ops = body.ops.clone();
    // prologue: iterations `lo + j·step`, j < depth
    let mut prologue = vec![];
    let mut firsts: Vec<Vec<V>> = vec![];
    let mut at = lo;
    for j in 0..depth {
        if j > 0 {
            let a = new_value(k, iv_ty.clone());
            prologue.push(Op { kind: OpKind::Binary { op: BinOp::Add, a: at, b: step }, results: vec![a], loc });
            at = a;
        }
        let (ops, got) = emit(k, at, &src_ops);
        prologue.extend(ops);
        firsts.push(got);
    }
    // in the body: iteration `iv + depth·step`, issued first
    let mut pre = vec![];
    let mut nxt = iv;
    for _ in 0..depth {
        let a = new_value(k, iv_ty.clone());
        pre.push(Op { kind: OpKind::Binary { op: BinOp::Add, a: nxt, b: step }, results: vec![a], loc });
        nxt = a;
    }
    let (ops, next) = emit(k, nxt, &src_ops);
    pre.extend(ops);
    // the body reads the oldest carried tiles instead of loading;
    // carried[j][l]: load l's tile of iteration iv + j·step
    let carried: Vec<Vec<V>> = (0..depth).map(|_| loads.iter().map(|&i| like(k, src_ops[i].results[0])).collect()).collect();
    let subst: HashMap<V, V> = loads.iter().zip(&carried[0]).map(|(&i, c)| (src_ops[i].results[0], *c)).collect();
    fn replace(b: &mut Block, subst: &HashMap<V, V>) {
        for o in &mut b.ops {
            o.kind.map_operands(&mut |v| *subst.get(&v).unwrap_or(&v));
            match &mut o.kind {
                OpKind::For { body, .. } => replace(body, subst),
                OpKind::If { then_, else_, .. } => {
                    replace(then_, subst);
                    replace(else_, subst);
                }
                _ => {}
            }
        }
    }
    body.ops = pre.into_iter().chain(src_ops.into_iter().enumerate().filter(|(i, _)| !load_set.contains(i)).map(|(_, o)| o)).collect();
    replace(body, &subst);
    if let Some(Op { kind: OpKind::Yield(ys), .. }) = body.ops.last_mut() {
        for c in &carried[1..] {
            ys.extend(c.iter().copied());
        }
        ys.extend(next.iter().copied());
    }
    for (c, f) in carried.iter().zip(&firsts) {
        body.args.extend(c.iter().copied());
        inits.extend(f.iter().copied());
    }
    let extra: Vec<V> = carried.iter().flatten().map(|c| like(k, *c)).collect();
    op.results.extend(extra);
    prologue
}
