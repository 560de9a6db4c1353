//! View accesses as pointer accesses: `load_block` / `store_block` become
//! `load` / `store` of the pointer tile they address.
//!
//! Takes a specialized kernel and a predicate naming the `load_block`s to
//! keep (a backend that copies them some other way — the PTX backend's TMA
//! loads). Every other block access of a view `view(base, dims, strides)`
//! at `offsets` with block shape `s` becomes, per dimension `d`, the i64
//! coordinates `c_d = offsets[d] + arange(0, s_d)` (expanded along the
//! other dimensions), and
//!
//! ```text
//! ptr  = base + Σ_d c_d · strides[d]          (broadcast to s)
//! mask = ∧_d (0 ≤ c_d ∧ c_d < dims[d])
//! load(ptr, mask, 0)            /  store(ptr, value, mask)
//! ```
//!
//! A 2-D `load_block` of a *transposed* view — the unit stride (a literal
//! `1`, or a value the caller knows is 1) on dimension 0, not on
//! dimension 1 — is lowered in storage order:
//! the `[s1, s0]` block of the view with its dimensions swapped, then
//! `trans`. Its addresses then run along the block's last dimension, which
//! the backends' layouts vectorize; a `trans` read once by a `dot` costs
//! nothing on the PTX backend (the operand's ring slot is read the other
//! way, `AsyncPlan::flipped`), and elsewhere it is a register
//! conversion instead of one scalar, uncoalesced load per element.
//!
//! Guarantees: the same values are read and written, and exactly the
//! in-view elements are touched (the interpreter's `load_block` semantics:
//! outside the view reads zero and writes nothing); the result verifies
//! and keeps the original result values, so their uses are untouched.
//! Why: the pointer form is the one the rest of the compiler optimizes —
//! the axis analysis proves contiguity (a unit stride argument) and mask
//! constancy, so the accesses vectorize and, feeding a `dot`, become
//! `cp.async` ring copies; a block access lowered on its own would compute
//! each element's address and bounds separately.

use super::build::new_value;
use crate::ir::*;
use crate::types::*;
use std::collections::HashMap;

/// Lower every block access whose `load_block` result `keep` rejects (every
/// `store_block`), see the module doc.
/// `unit`: stride values the caller knows to be 1 (launch facts); literal
/// ones are found here.
pub fn lower_views(k: &mut Kernel, keep: &dyn Fn(V) -> bool, unit: &dyn Fn(V) -> bool) {
    let mut views: HashMap<V, (V, Vec<V>, Vec<V>)> = HashMap::new();
    // integer constants (literals, and casts of them), for unit strides
    let mut consts: HashMap<V, i64> = HashMap::new();
    k.walk(&mut |op| match &op.kind {
        OpKind::MakeView { base, shape, strides } => {
            views.insert(op.results[0], (*base, shape.clone(), strides.clone()));
        }
        OpKind::Const(Lit::Int(x)) => {
            consts.insert(op.results[0], *x);
        }
        OpKind::Cast { x, .. } => {
            if let Some(c) = consts.get(x).copied() {
                consts.insert(op.results[0], c);
            }
        }
        _ => {}
    });
    if views.is_empty() {
        return;
    }
    let mut body = std::mem::take(&mut k.body);
    let one = |v: V| consts.get(&v) == Some(&1) || unit(v);
    block(k, &mut body, &views, &one, keep);
    k.body = body;
}

fn block(k: &mut Kernel, b: &mut Block, views: &HashMap<V, (V, Vec<V>, Vec<V>)>, one: &dyn Fn(V) -> bool, keep: &dyn Fn(V) -> bool) {
    let ops = std::mem::take(&mut b.ops);
    for mut op in ops {
        match &mut op.kind {
            OpKind::For { body, .. } => block(k, body, views, one, keep),
            OpKind::If { then_, else_, .. } => {
                block(k, then_, views, one, keep);
                block(k, else_, views, one, keep);
            }
            _ => {}
        }
        match op.kind.clone() {
            OpKind::LoadBlock { view, offsets, .. } if !keep(op.results[0]) => {
                let shape = k.ty(op.results[0]).shape().to_vec();
                let dtype = k.ty(op.results[0]).dtype().expect("block of values");
                let (base, dims, strides) = &views[&view];
                // a 2-D view whose unit stride is on dimension 0 (a
                // transposed view): the block is loaded in storage order
                // (`[s1, s0]`, contiguous along its last dimension) and
                // transposed (module doc)
                let flip = shape.len() == 2 && one(strides[0]) && !one(strides[1]);
                let (view_t, offs_t, shape_t);
                let (vw, offs, sh) = if flip {
                    view_t = (*base, vec![dims[1], dims[0]], vec![strides[1], strides[0]]);
                    offs_t = vec![offsets[1], offsets[0]];
                    shape_t = vec![shape[1].clone(), shape[0].clone()];
                    (&view_t, &offs_t, &shape_t)
                } else {
                    (&views[&view], &offsets, &shape)
                };
                let (ptr, mask) = address(k, &mut b.ops, vw, offs, sh, dtype, op.loc);
                let zero = match dtype {
                    d if d.is_float() => Lit::Float(0.0),
                    DType::Bool => Lit::Bool(false),
                    _ => Lit::Int(0),
                };
                let z = push(k, &mut b.ops, OpKind::Const(zero), Type::scalar(dtype), op.loc);
                let other = push(k, &mut b.ops, OpKind::Splat { x: z, shape: sh.clone() }, Type::tile(Elem::Val(dtype), sh.clone()), op.loc);
                if flip {
                    let t = new_value(k, Type::tile(Elem::Val(dtype), sh.clone()));
                    b.ops.push(Op { kind: OpKind::Load { ptr, mask: Some(mask), other: Some(other) }, results: vec![t], loc: op.loc });
                    b.ops.push(Op { kind: OpKind::Trans { x: t, perm: vec![1, 0] }, results: op.results, loc: op.loc });
                } else {
                    b.ops.push(Op { kind: OpKind::Load { ptr, mask: Some(mask), other: Some(other) }, results: op.results, loc: op.loc });
                }
            }
            OpKind::StoreBlock { view, offsets, value } => {
                let shape = k.ty(value).shape().to_vec();
                let dtype = k.ty(value).dtype().expect("block of values");
                let (ptr, mask) = address(k, &mut b.ops, &views[&view], &offsets, &shape, dtype, op.loc);
                b.ops.push(Op { kind: OpKind::Store { ptr, value, mask: Some(mask) }, results: vec![], loc: op.loc });
            }
            _ => b.ops.push(op),
        }
    }
}

fn push(k: &mut Kernel, out: &mut Vec<Op>, kind: OpKind, ty: Type, loc: Loc) -> V {
    let r = new_value(k, ty);
    out.push(Op { kind, results: vec![r], loc });
    r
}

/// The pointer tile and the in-view mask of a block access (module doc).
fn address(k: &mut Kernel, out: &mut Vec<Op>, (base, dims, strides): &(V, Vec<V>, Vec<V>), offsets: &[V], shape: &[Dim], dtype: DType, loc: Loc) -> (V, V) {
    let rank = shape.len();
    let i64s = Type::scalar(DType::I64);
    let wide = |k: &mut Kernel, out: &mut Vec<Op>, v: V| {
        if k.ty(v).dtype() == Some(DType::I64) {
            v
        } else {
            push(k, out, OpKind::Cast { x: v, to: DType::I64 }, Type::scalar(DType::I64), loc)
        }
    };
    let zero = push(k, out, OpKind::Const(Lit::Int(0)), i64s.clone(), loc);
    let (mut off, mut mask): (Option<V>, Option<V>) = (None, None);
    for d in 0..rank {
        let n = shape[d].clone();
        let line = vec![n.clone()];
        // c_d along its own dimension: offsets[d] + arange(0, n), as i64
        let o = wide(k, out, offsets[d]);
        let ar = push(k, out, OpKind::Arange { start: CExpr::Lit(0), end: n.clone() }, Type::tile(Elem::Val(DType::I32), line.clone()), loc);
        let ar = push(k, out, OpKind::Cast { x: ar, to: DType::I64 }, Type::tile(Elem::Val(DType::I64), line.clone()), loc);
        let os = push(k, out, OpKind::Splat { x: o, shape: line.clone() }, Type::tile(Elem::Val(DType::I64), line.clone()), loc);
        let mut c = push(k, out, OpKind::Binary { op: BinOp::Add, a: ar, b: os }, Type::tile(Elem::Val(DType::I64), line), loc);
        // expanded to rank `rank`, size 1 along the other dimensions
        let mut cs: Vec<Dim> = vec![n];
        for axis in 0..rank {
            if axis == d {
                continue;
            }
            cs.insert(axis, CExpr::Lit(1));
            c = push(k, out, OpKind::ExpandDims { x: c, axis: axis as u8 }, Type::tile(Elem::Val(DType::I64), cs.clone()), loc);
        }
        let tile = |e: DType| Type::tile(Elem::Val(e), cs.clone());
        let splat = |k: &mut Kernel, out: &mut Vec<Op>, v: V| push(k, out, OpKind::Splat { x: v, shape: cs.clone() }, tile(DType::I64), loc);
        let (z, dim, stride) = (splat(k, out, zero), wide(k, out, dims[d]), wide(k, out, strides[d]));
        let (dim, stride) = (splat(k, out, dim), splat(k, out, stride));
        let ge = push(k, out, OpKind::Cmp { op: CmpOp::Ge, a: c, b: z }, tile(DType::Bool), loc);
        let lt = push(k, out, OpKind::Cmp { op: CmpOp::Lt, a: c, b: dim }, tile(DType::Bool), loc);
        let inb = push(k, out, OpKind::Binary { op: BinOp::And, a: ge, b: lt }, tile(DType::Bool), loc);
        let term = push(k, out, OpKind::Binary { op: BinOp::Mul, a: c, b: stride }, tile(DType::I64), loc);
        // to the block's shape
        let full = |k: &mut Kernel, out: &mut Vec<Op>, v: V, e: DType| {
            if rank == 1 {
                v
            } else {
                push(k, out, OpKind::Broadcast { x: v, shape: shape.to_vec() }, Type::tile(Elem::Val(e), shape.to_vec()), loc)
            }
        };
        let (inb, term) = (full(k, out, inb, DType::Bool), full(k, out, term, DType::I64));
        let tfull = |e: DType| Type::tile(Elem::Val(e), shape.to_vec());
        off = Some(match off {
            None => term,
            Some(o) => push(k, out, OpKind::Binary { op: BinOp::Add, a: o, b: term }, tfull(DType::I64), loc),
        });
        mask = Some(match mask {
            None => inb,
            Some(m) => push(k, out, OpKind::Binary { op: BinOp::And, a: m, b: inb }, tfull(DType::Bool), loc),
        });
    }
    let pt = Type::tile(Elem::Ptr(dtype), shape.to_vec());
    let bs = push(k, out, OpKind::Splat { x: *base, shape: shape.to_vec() }, pt.clone(), loc);
    let ptr = push(k, out, OpKind::AddPtr { ptr: bs, offset: off.unwrap() }, pt, loc);
    (ptr, mask.unwrap())
}
