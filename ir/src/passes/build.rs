//! What the IR → IR passes share to build ops: fresh values, the values a
//! block defines, and [`Emit`], which appends typed ops to a block.

use crate::ir::*;
use crate::types::*;
use std::collections::{HashMap, HashSet};

/// What an op (operands already renamed) becomes when the values in
/// `truth` are known all-true: the operand it equals (`select(true, a, b)`
/// is `a`, `m & true` is `m`), or the op itself with the masks of loads,
/// stores and atomics that are all-true dropped (a load's `other` with
/// it). `split_masks` and `proven_masks` share these rules.
pub(crate) enum TrueFold {
    /// The op is this operand: uses of its result read it.
    Alias(V),
    /// The op stays (simplified in place); whether its result is all-true
    /// too (a splat, broadcast or `expand_dims` of an all-true tile).
    Keep { all_true: bool },
}

/// Simplify `kind` given the all-true values `truth` ([`TrueFold`]);
/// nested regions are the caller's.
pub(crate) fn fold_true(kind: &mut OpKind, truth: &HashSet<V>) -> TrueFold {
    match kind {
        OpKind::Select { cond, a, .. } if truth.contains(cond) => return TrueFold::Alias(*a),
        OpKind::Binary { op: BinOp::And | BinOp::LAnd, a, b } if truth.contains(a) => return TrueFold::Alias(*b),
        OpKind::Binary { op: BinOp::And | BinOp::LAnd, a, b } if truth.contains(b) => return TrueFold::Alias(*a),
        OpKind::Load { mask, other, .. } if mask.is_some_and(|m| truth.contains(&m)) => {
            *mask = None;
            *other = None;
        }
        OpKind::Store { mask, .. } | OpKind::AtomicAdd { mask, .. } if mask.is_some_and(|m| truth.contains(&m)) => *mask = None,
        _ => {}
    }
    let all_true = matches!(kind, OpKind::Splat { x, .. } | OpKind::Broadcast { x, .. } | OpKind::ExpandDims { x, .. } if truth.contains(x));
    TrueFold::Keep { all_true }
}

/// A fresh value of type `ty`.
pub(crate) fn new_value(k: &mut Kernel, ty: Type) -> V {
    k.values.push(ValueInfo { ty, cval: None, weak: false, name: None, layout: None });
    V(k.values.len() as u32 - 1)
}

/// A fresh value of `v`'s type.
pub(crate) fn like(k: &mut Kernel, v: V) -> V {
    let ty = k.ty(v).clone();
    new_value(k, ty)
}

/// Every value `b` defines (its arguments, its ops' results, nested
/// regions included).
pub(crate) fn defined_in(b: &Block, out: &mut HashSet<V>) {
    out.extend(b.args.iter().copied());
    for op in &b.ops {
        out.extend(op.results.iter().copied());
        for r in op.kind.regions() {
            defined_in(r, out);
        }
    }
}

/// Appends ops to a block, each at `loc`.
pub(crate) struct Emit<'a> {
    pub k: &'a mut Kernel,
    pub out: &'a mut Vec<Op>,
    pub loc: Loc,
}

impl Emit<'_> {
    pub fn op(&mut self, kind: OpKind, ty: Type) -> V {
        let r = new_value(self.k, ty);
        self.out.push(Op { kind, results: vec![r], loc: self.loc });
        r
    }
    pub fn shape(&self, v: V) -> Vec<Dim> {
        self.k.ty(v).shape().to_vec()
    }
    pub fn konst(&mut self, l: Lit, d: DType) -> V {
        self.op(OpKind::Const(l), Type::scalar(d))
    }
    fn bool_like(&self, v: V) -> Type {
        Type::tile(Elem::Val(DType::Bool), self.shape(v))
    }
    /// A scalar broadcast to `shape` (itself when `shape` is a scalar's).
    pub fn splat(&mut self, x: V, shape: &[Dim]) -> V {
        if shape.is_empty() {
            return x;
        }
        let elem = self.k.ty(x).elem().expect("a scalar");
        self.op(OpKind::Splat { x, shape: shape.to_vec() }, Type::tile(elem, shape.to_vec()))
    }
    pub fn cmp(&mut self, op: CmpOp, a: V, b: V) -> V {
        let ty = self.bool_like(a);
        self.op(OpKind::Cmp { op, a, b }, ty)
    }
    pub fn bin(&mut self, op: BinOp, a: V, b: V) -> V {
        let ty = self.k.ty(a).clone();
        self.op(OpKind::Binary { op, a, b }, ty)
    }
    pub fn not(&mut self, x: V) -> V {
        let ty = self.k.ty(x).clone();
        self.op(OpKind::Unary { op: UnOp::Not, x }, ty)
    }
    /// `x` as dtype `to`, same shape (itself when it already is).
    pub fn cast(&mut self, x: V, to: DType) -> V {
        if self.k.ty(x).dtype() == Some(to) {
            return x;
        }
        let shape = self.shape(x);
        self.op(OpKind::Cast { x, to }, Type::tile(Elem::Val(to), shape))
    }
    pub fn and(&mut self, a: Option<V>, b: V) -> V {
        match a {
            Some(a) => self.bin(BinOp::And, a, b),
            None => b,
        }
    }
    pub fn or(&mut self, a: Option<V>, b: V) -> V {
        match a {
            Some(a) => self.bin(BinOp::Or, a, b),
            None => b,
        }
    }
}

/// Copies ops and blocks with fresh values for their results and their
/// regions' (`map`: original → copy, seeded by the caller to substitute
/// values), the comparisons in `replace` made `true` and what they feed
/// simplified (`split_masks`; `rotate_chains` replaces none).
pub(crate) struct Copier {
    pub map: HashMap<V, V>,
    /// Copied values known to be all-true.
    pub truth: HashSet<V>,
    pub replace: HashSet<V>,
}

impl Copier {
    /// A copier that only renames (nothing replaced).
    pub fn new() -> Self {
        Copier { map: HashMap::new(), truth: HashSet::new(), replace: HashSet::new() }
    }

    pub fn get(&self, v: V) -> V {
        *self.map.get(&v).unwrap_or(&v)
    }

    pub fn block(&mut self, k: &mut Kernel, b: &Block) -> Block {
        let args = b.args.iter().map(|&a| self.fresh(k, a)).collect();
        let mut ops = vec![];
        for op in &b.ops {
            self.op(k, op, &mut ops);
        }
        Block { args, ops }
    }

    pub fn fresh(&mut self, k: &mut Kernel, v: V) -> V {
        let n = like(k, v);
        self.map.insert(v, n);
        n
    }

    /// Push the copy of `op` (or nothing, where it folds to an operand).
    pub fn op(&mut self, k: &mut Kernel, op: &Op, out: &mut Vec<Op>) {
        if op.results.len() == 1 && self.replace.contains(&op.results[0]) {
            let r = op.results[0];
            let shape = k.ty(r).shape().to_vec();
            let mut e = Emit { k, out, loc: op.loc };
            let t = e.konst(Lit::Bool(true), DType::Bool);
            let t = e.splat(t, &shape);
            self.map.insert(r, t);
            self.truth.insert(t);
            return;
        }
        let mut kind = op.kind.clone();
        kind.map_operands(&mut |v| self.get(v));
        // simplify what an all-true value feeds
        let spread = match fold_true(&mut kind, &self.truth) {
            TrueFold::Alias(a) => {
                self.map.insert(op.results[0], a);
                return;
            }
            TrueFold::Keep { all_true } => all_true,
        };
        match &mut kind {
            OpKind::For { body, .. } => *body = self.block(k, body),
            OpKind::If { then_, else_, .. } => {
                *then_ = self.block(k, then_);
                *else_ = self.block(k, else_);
            }
            _ => {}
        }
        let results: Vec<V> = op.results.iter().map(|&r| self.fresh(k, r)).collect();
        if spread {
            self.truth.insert(results[0]);
        }
        out.push(Op { kind, results, loc: op.loc });
    }
}
