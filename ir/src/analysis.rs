//! Analyses over generic or specialized IR.
//!
//! - [`provenance`]: which pointer parameters every pointer and view value
//!   may point into, following pointer arithmetic, broadcasts, selects,
//!   views and loop-carried/if-yielded values. A sound over-approximation:
//!   the set of a value always contains the parameter it came from. The
//!   `guard` pass guards accesses against these buffers; the WGSL backend
//!   binds them.
//! - [`written_params`]: which pointer parameters may be written (store,
//!   atomic_add, store into a view), so that the macro's launcher can
//!   demand `&mut` for them.

use crate::ir::*;
use std::collections::{BTreeSet, HashMap};

/// The parameters each pointer or view value may point into (module doc).
pub fn provenance(k: &Kernel) -> HashMap<V, BTreeSet<u32>> {
    fixpoint(k).0
}

/// Which pointer parameters the kernel may write through (module doc).
pub fn written_params(k: &Kernel) -> Vec<bool> {
    fixpoint(k).1
}

fn fixpoint(k: &Kernel) -> (HashMap<V, BTreeSet<u32>>, Vec<bool>) {
    let mut prov: HashMap<V, BTreeSet<u32>> = HashMap::new();
    let mut written = vec![false; k.params.len()];
    // Iterate to a fixpoint: loop-carried values can bring provenance back.
    loop {
        let before = prov.values().map(|s| s.len()).sum::<usize>();
        visit(k, &k.body, &mut prov, &mut written);
        let after = prov.values().map(|s| s.len()).sum::<usize>();
        if after == before {
            break;
        }
    }
    (prov, written)
}

fn merge(prov: &mut HashMap<V, BTreeSet<u32>>, dst: V, srcs: &[V]) {
    let mut acc: BTreeSet<u32> = prov.get(&dst).cloned().unwrap_or_default();
    for s in srcs {
        if let Some(p) = prov.get(s) {
            acc.extend(p.iter().copied());
        }
    }
    if !acc.is_empty() {
        prov.insert(dst, acc);
    }
}

fn visit(k: &Kernel, b: &Block, prov: &mut HashMap<V, BTreeSet<u32>>, written: &mut [bool]) {
    for op in &b.ops {
        match &op.kind {
            OpKind::Param(i) => {
                if let ParamKind::Ptr(_) = k.params[*i as usize].kind {
                    prov.entry(op.results[0]).or_default().insert(*i);
                }
            }
            OpKind::Store { ptr, .. } | OpKind::AtomicAdd { ptr, .. } => {
                for &p in prov.get(ptr).into_iter().flatten() {
                    written[p as usize] = true;
                }
            }
            OpKind::StoreBlock { view, .. } => {
                for &p in prov.get(view).into_iter().flatten() {
                    written[p as usize] = true;
                }
            }
            OpKind::For { inits, body, .. } => {
                for (i, init) in inits.iter().enumerate() {
                    merge(prov, body.args[i + 1], &[*init]);
                }
                visit(k, body, prov, written);
                if let Some(Op { kind: OpKind::Yield(ys), .. }) = body.ops.last() {
                    for (i, y) in ys.iter().enumerate() {
                        merge(prov, body.args[i + 1], &[*y]);
                        merge(prov, op.results[i], &[*y, inits[i]]);
                    }
                }
            }
            OpKind::If { then_, else_, .. } => {
                visit(k, then_, prov, written);
                visit(k, else_, prov, written);
                for blk in [then_, else_] {
                    if let Some(Op { kind: OpKind::Yield(ys), .. }) = blk.ops.last() {
                        for (i, y) in ys.iter().enumerate() {
                            merge(prov, op.results[i], &[*y]);
                        }
                    }
                }
            }
            OpKind::Yield(_) => {}
            kind => {
                let ops = kind.operands();
                for r in &op.results {
                    let is_ptr = match k.ty(*r) {
                        crate::types::Type::View { .. } => true,
                        t => t.elem().is_some_and(|e| e.is_ptr()),
                    };
                    if is_ptr {
                        merge(prov, *r, &ops);
                    }
                }
            }
        }
    }
}
