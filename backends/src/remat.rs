//! Rematerialization, shared by the PTX and WGSL emitters.
//!
//! Takes a specialized kernel. Answers, for a tile value, whether it is a
//! cheap pure function of its element index and of scalars — aranges,
//! splats, broadcasts, expand_dims and elementwise ops over those, at most
//! [`Remat::BUDGET`] ops — and keeps the per-block cache of values already
//! recomputed at an index. Emitters use it where a broadcast or expand_dims
//! would otherwise move registers through shared/workgroup memory (two
//! barriers): they evaluate the value per destination element instead. Each
//! emitter supplies the per-element evaluation (instructions differ); the
//! decisions and index mapping live here so both backends make the same ones.

use ferrotile_ir::*;
use std::collections::HashMap;

pub struct Remat<'k> {
    k: &'k Kernel,
    defs: HashMap<V, &'k Op>,
    costs: HashMap<V, Option<u32>>,
    /// (value, index expressions) → register, one map per enclosing block:
    /// a value recomputed inside a branch or loop body is not visible after.
    cache: Vec<HashMap<(V, Vec<String>), String>>,
}

impl<'k> Remat<'k> {
    /// Most ops recomputed per element for one value.
    pub const BUDGET: u32 = 16;

    pub fn new(k: &'k Kernel) -> Self {
        let mut defs = HashMap::new();
        k.walk(&mut |op| {
            for r in &op.results {
                defs.insert(*r, op);
            }
        });
        Remat { k, defs, costs: HashMap::new(), cache: vec![] }
    }

    /// The op defining `v` (every value is defined by an op or a block
    /// argument; arguments are never rematerialized).
    pub fn def(&self, v: V) -> &'k Op {
        self.defs[&v]
    }

    /// Ops needed to recompute tile `v` from its element index and scalars,
    /// or `None` when it reads memory, reduces, or is carried by a loop.
    pub fn cost(&mut self, v: V) -> Option<u32> {
        if self.k.ty(v).shape().is_empty() {
            return Some(0);
        }
        if let Some(c) = self.costs.get(&v) {
            return *c;
        }
        let c = match self.defs.get(&v).map(|op| &op.kind) {
            Some(OpKind::Arange { .. }) => Some(1),
            Some(OpKind::Splat { .. }) => Some(0),
            Some(OpKind::Broadcast { x, .. } | OpKind::ExpandDims { x, .. }) => self.cost(*x),
            Some(kind) if is_elementwise(kind) => kind.operands().iter().try_fold(1u32, |acc, u| Some(acc + self.cost(*u)?)),
            _ => None,
        };
        self.costs.insert(v, c);
        c
    }

    /// Whether `v` should be recomputed rather than converted.
    pub fn worth(&mut self, v: V) -> bool {
        self.cost(v).is_some_and(|c| c <= Self::BUDGET)
    }

    /// The index into `x` (the operand of broadcast / expand_dims `op`)
    /// that the result's element at `idx` reads; `zero` is the emitter's
    /// spelling of index 0.
    pub fn source_index(&self, op: &Op, idx: &[String], zero: &str) -> Vec<String> {
        match &op.kind {
            OpKind::Broadcast { x, .. } => {
                let src = self.k.ty(*x).shape();
                (0..src.len()).map(|d| if src[d].known() == Some(1) { zero.to_string() } else { idx[d].clone() }).collect()
            }
            OpKind::ExpandDims { axis, .. } => {
                let mut s = idx.to_vec();
                s.remove(*axis as usize);
                s
            }
            _ => idx.to_vec(),
        }
    }

    pub fn enter(&mut self) {
        self.cache.push(HashMap::new());
    }

    pub fn leave(&mut self) {
        self.cache.pop();
    }

    pub fn cached(&self, key: &(V, Vec<String>)) -> Option<String> {
        self.cache.iter().rev().find_map(|m| m.get(key)).cloned()
    }

    pub fn remember(&mut self, key: (V, Vec<String>), reg: String) {
        if let Some(m) = self.cache.last_mut() {
            m.insert(key, reg);
        }
    }
}

/// Registers of an emitter's values, by value.
pub type Vals = HashMap<V, Vec<String>>;

/// Point each operand at one register (so that an emitter's whole-tile
/// elementwise code computes one element); returns what to restore.
pub fn bind_single(vals: &mut Vals, ops: &[V], regs: Vec<String>) -> Vec<(V, Option<Vec<String>>)> {
    ops.iter().zip(regs).map(|(u, r)| (*u, vals.insert(*u, vec![r]))).collect()
}

/// Undo [`bind_single`] (in reverse, so a repeated operand ends as it was).
pub fn unbind(vals: &mut Vals, saved: Vec<(V, Option<Vec<String>>)>) {
    for (u, old) in saved.into_iter().rev() {
        match old {
            Some(o) => vals.insert(u, o),
            None => vals.remove(&u),
        };
    }
}

/// Ops computed register by register from same-shaped operands.
pub fn is_elementwise(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::Binary { .. } | OpKind::Cmp { .. } | OpKind::Unary { .. } | OpKind::Fma { .. } | OpKind::Select { .. } | OpKind::Cast { .. } | OpKind::AddPtr { .. }
    )
}
