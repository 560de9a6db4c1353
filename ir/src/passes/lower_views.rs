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
//! Guarantees: the same values are read and written, and exactly the
//! in-view elements are touched (the interpreter's `load_block` semantics:
//! outside the view reads zero and writes nothing); the result verifies
//! and keeps the original result values, so their uses are untouched.
//! Why: the pointer form is the one the rest of the compiler optimizes —
//! the axis analysis proves contiguity (a unit stride argument) and mask
//! constancy, so the accesses vectorize and, feeding a `dot`, become
//! `cp.async` ring copies; a block access lowered on its own would compute
//! each element's address and bounds separately.

use crate::ir::*;
use crate::types::*;
use std::collections::HashMap;

fn new_value(k: &mut Kernel, ty: Type) -> V {
    k.values.push(ValueInfo { ty, cval: None, weak: false, name: None, layout: None });
    V(k.values.len() as u32 - 1)
}

/// Lower every block access whose `load_block` result `keep` rejects (every
/// `store_block`), see the module doc.
pub fn lower_views(k: &mut Kernel, keep: &dyn Fn(V) -> bool) {
    let mut views: HashMap<V, (V, Vec<V>, Vec<V>)> = HashMap::new();
    k.walk(&mut |op| {
        if let OpKind::MakeView { base, shape, strides } = &op.kind {
            views.insert(op.results[0], (*base, shape.clone(), strides.clone()));
        }
    });
    if views.is_empty() {
        return;
    }
    let mut body = std::mem::take(&mut k.body);
    block(k, &mut body, &views, keep);
    k.body = body;
}

fn block(k: &mut Kernel, b: &mut Block, views: &HashMap<V, (V, Vec<V>, Vec<V>)>, keep: &dyn Fn(V) -> bool) {
    let ops = std::mem::take(&mut b.ops);
    for mut op in ops {
        match &mut op.kind {
            OpKind::For { body, .. } => block(k, body, views, keep),
            OpKind::If { then_, else_, .. } => {
                block(k, then_, views, keep);
                block(k, else_, views, keep);
            }
            _ => {}
        }
        match op.kind.clone() {
            OpKind::LoadBlock { view, offsets, .. } if !keep(op.results[0]) => {
                let shape = k.ty(op.results[0]).shape().to_vec();
                let dtype = k.ty(op.results[0]).dtype().expect("block of values");
                let (ptr, mask) = address(k, &mut b.ops, &views[&view], &offsets, &shape, dtype, op.loc);
                let zero = match dtype {
                    d if d.is_float() => Lit::Float(0.0),
                    DType::Bool => Lit::Bool(false),
                    _ => Lit::Int(0),
                };
                let z = push(k, &mut b.ops, OpKind::Const(zero), Type::scalar(dtype), op.loc);
                let other = push(k, &mut b.ops, OpKind::Splat { x: z, shape: shape.clone() }, Type::tile(Elem::Val(dtype), shape), op.loc);
                b.ops.push(Op { kind: OpKind::Load { ptr, mask: Some(mask), other: Some(other) }, results: op.results, loc: op.loc });
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
