//! Rematerialization, shared by the PTX and WGSL emitters.
//!
//! Takes a specialized kernel. Answers, for a tile value, whether it is a
//! cheap pure function of its element index and of scalars — aranges,
//! splats, broadcasts, expand_dims and elementwise ops over those, at most
//! [`Remat::BUDGET`] ops — and keeps the per-block cache of values already
//! recomputed at an index. Emitters use it where a broadcast or expand_dims
//! would otherwise move registers through shared/workgroup memory (two
//! barriers): they evaluate the value per destination element instead
//! ([`remat_into`]). Each emitter supplies only its instructions (the
//! [`Emitter`] trait: aranges, index 0, elementwise ops); the decisions, the
//! index mapping and the evaluation live here so both backends make the
//! same ones.

use crate::EmitError;
use ferrotile_ir::*;
use std::collections::HashMap;

/// An emitter's rematerialization state for one kernel: the defining ops, the costs found so far
/// and the per-block cache of recomputed values (see the module doc).
pub struct Remat<'k> {
    k: &'k Kernel,
    defs: HashMap<V, &'k Op>,
    costs: HashMap<V, Option<u32>>,
    /// (value, index expressions) → register, one map per enclosing block:
    /// a value recomputed inside a branch or loop body is not visible after.
    cache: Vec<HashMap<(V, Vec<String>), String>>,
    /// Values held in a per-value layout ([`crate::plan::slices`]): their
    /// registers are not their shape's, so they are never recomputed per
    /// element (a broadcast of one is a register remap instead).
    pinned: std::collections::HashSet<V>,
}

impl<'k> Remat<'k> {
    /// Most ops recomputed per element for one value (24: a guarded
    /// store's mask — bounds of two dims and of the buffer — fits).
    pub const BUDGET: u32 = 24;

    /// The state for kernel `k`, with an empty cache.
    pub fn new(k: &'k Kernel) -> Self {
        let mut defs = HashMap::new();
        k.walk(&mut |op| {
            for r in &op.results {
                defs.insert(*r, op);
            }
        });
        Remat { k, defs, costs: HashMap::new(), cache: vec![], pinned: Default::default() }
    }

    /// The state for kernel `k` whose values `pinned` are held in
    /// per-value layouts: expressions through them are not recomputed.
    pub fn with_pinned(k: &'k Kernel, pinned: impl IntoIterator<Item = V>) -> Self {
        let mut r = Self::new(k);
        r.pinned = pinned.into_iter().collect();
        r
    }

    /// The op defining `v` (every value is defined by an op or a block
    /// argument; arguments are never rematerialized).
    pub fn def(&self, v: V) -> &'k Op {
        self.defs[&v]
    }

    /// The op defining `v`, or None for a block argument.
    pub fn def_of(&self, v: V) -> Option<&'k Op> {
        self.defs.get(&v).copied()
    }

    /// The value of a constant integer scalar, or of a splat / broadcast
    /// of one ([`crate::plan::axis::int_constant`] over these definitions).
    pub fn int_constant(&self, v: V) -> Option<i64> {
        crate::plan::axis::int_constant(&|u: V| self.def_of(u).map(|op| &op.kind), v)
    }

    /// The kernel it answers for.
    pub fn kernel(&self) -> &'k Kernel {
        self.k
    }

    /// Ops needed to recompute tile `v` from its element index and scalars
    /// (each distinct op once: the per-index cache computes a shared
    /// operand once), or `None` when it reads memory, reduces, or is
    /// carried by a loop.
    pub fn cost(&mut self, v: V) -> Option<u32> {
        if self.k.ty(v).shape().is_empty() {
            return Some(0);
        }
        if let Some(c) = self.costs.get(&v) {
            return *c;
        }
        let mut seen = std::collections::HashSet::new();
        let mut n = 0;
        let c = self.dag(v, &mut seen, &mut n).then_some(n);
        self.costs.insert(v, c);
        c
    }

    /// Count the distinct ops of `v`'s expression into `n`; false when one
    /// cannot be recomputed.
    fn dag(&self, v: V, seen: &mut std::collections::HashSet<V>, n: &mut u32) -> bool {
        if self.k.ty(v).shape().is_empty() || !seen.insert(v) {
            return true;
        }
        if self.pinned.contains(&v) {
            return false;
        }
        match self.defs.get(&v).map(|op| &op.kind) {
            Some(OpKind::Arange { .. }) => {
                *n += 1;
                true
            }
            Some(OpKind::Splat { .. }) => true,
            Some(OpKind::Broadcast { x, .. } | OpKind::ExpandDims { x, .. }) => self.dag(*x, seen, n),
            Some(kind) if kind.is_elementwise() => {
                *n += 1;
                kind.operands().iter().all(|u| self.dag(*u, seen, n))
            }
            _ => false,
        }
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

    /// Open a block: what is recomputed from now on is cached until the matching [`Remat::leave`].
    pub fn enter(&mut self) {
        self.cache.push(HashMap::new());
    }

    /// Close the innermost block, forgetting what was recomputed in it.
    pub fn leave(&mut self) {
        self.cache.pop();
    }

    /// The register holding value `key.0` at index expressions `key.1`, if an open block
    /// recomputed it.
    pub fn cached(&self, key: &(V, Vec<String>)) -> Option<String> {
        self.cache.iter().rev().find_map(|m| m.get(key)).cloned()
    }

    /// Record in the innermost open block that `key` (a value at index expressions) was recomputed
    /// into register `reg`.
    pub fn remember(&mut self, key: (V, Vec<String>), reg: String) {
        if let Some(m) = self.cache.last_mut() {
            m.insert(key, reg);
        }
    }
}

/// Registers of an emitter's values, by value.
pub type Vals = HashMap<V, Vec<String>>;

/// What an emitter provides so that [`remat_into`] can recompute values in
/// its own instructions.
pub trait Emitter<'k> {
    /// The emitter's [`Remat`] state.
    fn remat_state(&mut self) -> &mut Remat<'k>;
    /// The registers bound to each value; [`with_bound`] rebinds them for one recomputation.
    fn vals_mut(&mut self) -> &mut Vals;
    /// Registers per thread of tile `v` in its layout.
    fn nregs_of(&mut self, v: V) -> Result<usize, EmitError>;
    /// Index along `d` of register `r` of a `shape` tile.
    fn index_of(&mut self, shape: &[u32], r: usize, d: usize) -> Result<String, EmitError>;
    /// The element of `arange(start, ..)` at index `i`.
    fn arange_at(&mut self, i: &str, start: i64) -> String;
    /// Index 0 (allocated on first use where it needs a register).
    fn zero_index(&mut self) -> String;
    /// Elementwise `kind` producing `v`, on the registers its operands are
    /// bound to in `vals_mut()`.
    fn elementwise_op(&mut self, kind: &OpKind, v: V) -> Result<Vec<String>, EmitError>;
    /// Whether scalar `v` is provably a multiple of `m` (a power of two;
    /// the emitter's axis facts; both printers answer). Default: nothing
    /// known.
    fn scalar_multiple_of(&mut self, _v: V, _m: u64) -> bool {
        false
    }
}

/// `x & (2^s − 1)` where `x = a + y` and `a` is a scalar (or a splat of
/// one) that is a multiple of `2^s`: the same as `y & (2^s − 1)`. Returns
/// `y` and the mask operand. A K loop's `(k0 + arange(0, BK)) & 7` is then
/// the arange's residue, which the backend compilers fold to a constant
/// per register (a thread's offset along K is a multiple of its run of
/// 8): a GPTQ unpack's shifts by `4·(k % 8)` become immediates.
fn residue_operand<'k, E: Emitter<'k>>(em: &mut E, kind: &OpKind) -> Option<(V, V)> {
    let OpKind::Binary { op: BinOp::And, a, b } = kind else { return None };
    let r = em.remat_state();
    let (x, mv, m) = match (r.int_constant(*a), r.int_constant(*b)) {
        (_, Some(m)) => (*a, *b, m),
        (Some(m), _) => (*b, *a, m),
        _ => return None,
    };
    if m < 1 || !((m as u64) + 1).is_power_of_two() {
        return None;
    }
    let OpKind::Binary { op: BinOp::Add, a: p, b: q } = &r.def_of(x)?.kind else { return None };
    // the scalar behind a splat / broadcast / expand_dims
    let scalar = |v: V, r: &Remat<'k>| -> Option<V> {
        let mut v = v;
        loop {
            if r.kernel().ty(v).shape().is_empty() {
                return Some(v);
            }
            match &r.def_of(v)?.kind {
                OpKind::Splat { x, .. } | OpKind::Broadcast { x, .. } | OpKind::ExpandDims { x, .. } => v = *x,
                _ => return None,
            }
        }
    };
    let (p, q) = (*p, *q);
    for (s, y) in [(p, q), (q, p)] {
        let r = em.remat_state();
        if let Some(sv) = scalar(s, r) {
            if em.scalar_multiple_of(sv, m as u64 + 1) {
                return Some((y, mv));
            }
        }
    }
    None
}

/// `f` run with each operand `ops[i]` bound to the registers `regs[i]`,
/// then the previous bindings restored — in reverse, so that an operand
/// used twice ends as it was. The emitters' elementwise ops read their
/// operands from these bindings (recomputation at one index; an op run
/// once per distinct tuple of operand registers).
pub fn with_bound<'k, E: Emitter<'k>, T>(em: &mut E, ops: &[V], regs: Vec<Vec<String>>, f: impl FnOnce(&mut E) -> T) -> T {
    let saved: Vec<(V, Option<Vec<String>>)> = ops.iter().zip(regs).map(|(u, r)| (*u, em.vals_mut().insert(*u, r))).collect();
    let out = f(em);
    for (u, old) in saved.into_iter().rev() {
        match old {
            Some(o) => em.vals_mut().insert(u, o),
            None => em.vals_mut().remove(&u),
        };
    }
    out
}

/// If tile `res` is worth recomputing ([`Remat::worth`]), compute each of
/// its registers from its index, bind them as `res`'s, and return true.
pub fn remat_into<'k, E: Emitter<'k>>(em: &mut E, res: V) -> Result<bool, EmitError> {
    if !em.remat_state().worth(res) {
        return Ok(false);
    }
    let k = em.remat_state().kernel();
    let shape: Vec<u32> = k.ty(res).shape().iter().map(|d| d.known().expect("specialized shape") as u32).collect();
    let mut out = vec![];
    for r in 0..em.nregs_of(res)? {
        let idx = (0..shape.len()).map(|d| em.index_of(&shape, r, d)).collect::<Result<Vec<_>, _>>()?;
        out.push(eval_at(em, res, idx)?);
    }
    em.vals_mut().insert(res, out);
    Ok(true)
}

/// The element of `v` at index `idx` (one index per dim: u32 registers),
/// recomputed from its definition (`v` must be [`Remat::worth`] it, or a
/// scalar).
pub fn eval_at<'k, E: Emitter<'k>>(em: &mut E, v: V, idx: Vec<String>) -> Result<String, EmitError> {
    let k = em.remat_state().kernel();
    if k.ty(v).shape().is_empty() {
        return Ok(em.vals_mut()[&v][0].clone());
    }
    let key = (v, idx);
    if let Some(r) = em.remat_state().cached(&key) {
        return Ok(r);
    }
    let idx = key.1.clone();
    let op: &'k Op = em.remat_state().def(v);
    let r = match &op.kind {
        OpKind::Arange { start, .. } => em.arange_at(&idx[0], start.known().expect("specialized arange")),
        OpKind::Splat { x, .. } => em.vals_mut()[x][0].clone(),
        OpKind::Broadcast { x, .. } | OpKind::ExpandDims { x, .. } => {
            let sidx = em.remat_state().source_index(op, &idx, "");
            let sidx = sidx.into_iter().map(|i| if i.is_empty() { em.zero_index() } else { i }).collect();
            eval_at(em, *x, sidx)?
        }
        kind if residue_operand(em, kind).is_some() => {
            let (y, mv) = residue_operand(em, kind).expect("checked");
            let (ry, rm) = (eval_at(em, y, idx.clone())?, eval_at(em, mv, idx.clone())?);
            let and = OpKind::Binary { op: BinOp::And, a: y, b: mv };
            with_bound(em, &[y, mv], vec![vec![ry], vec![rm]], |em| em.elementwise_op(&and, v))?.swap_remove(0)
        }
        kind => {
            let ops = kind.operands();
            let mut regs = vec![];
            for u in &ops {
                regs.push(eval_at(em, *u, idx.clone())?);
            }
            // run the elementwise op on one register per operand
            with_bound(em, &ops, regs.into_iter().map(|r| vec![r]).collect(), |em| em.elementwise_op(kind, v))?.swap_remove(0)
        }
    };
    em.remat_state().remember(key, r.clone());
    Ok(r)
}
