//! Dead-code elimination on structured IR.
//!
//! Takes any kernel; removes ops without side effects whose results are never
//! used (transitively, including through nested regions). Keeps `For`/`If`
//! whose bodies have side effects or whose results are used. An
//! `atomic_add` whose old values are unused loses its result, so that
//! backends know to emit a reduction that returns nothing (`red`). Guarantees the
//! same observable behaviour with fewer ops, which keeps dumps and backends
//! free of the leftovers of constexpr folding.

use crate::ir::*;
use std::collections::HashSet;

/// Remove the dead ops of `k` (module doc), repeating until none is left.
pub fn dce(k: &mut Kernel) {
    loop {
        let mut used = HashSet::new();
        collect_uses(&k.body, &mut used);
        let before = count(&k.body);
        prune(&mut k.body, &used);
        if count(&k.body) == before {
            break;
        }
    }
}

fn count(b: &Block) -> usize {
    b.ops.iter().map(|o| 1 + o.kind.regions().iter().map(|r| count(r)).sum::<usize>()).sum()
}

fn collect_uses(b: &Block, used: &mut HashSet<V>) {
    for op in &b.ops {
        used.extend(op.kind.operands());
        for r in op.kind.regions() {
            collect_uses(r, used);
        }
    }
}

fn region_has_effects(b: &Block) -> bool {
    b.ops.iter().any(|o| {
        matches!(o.kind, OpKind::Store { .. } | OpKind::AtomicAdd { .. } | OpKind::StoreBlock { .. } | OpKind::Print { .. } | OpKind::StaticAssert { .. })
            || o.kind.regions().iter().any(|r| region_has_effects(r))
    })
}

fn prune(b: &mut Block, used: &HashSet<V>) {
    b.ops.retain_mut(|op| {
        match &mut op.kind {
            OpKind::For { body, .. } => {
                prune(body, used);
                return region_has_effects(body) || op.results.iter().any(|r| used.contains(r));
            }
            OpKind::If { then_, else_, .. } => {
                prune(then_, used);
                prune(else_, used);
                return region_has_effects(then_) || region_has_effects(else_) || op.results.iter().any(|r| used.contains(r));
            }
            OpKind::AtomicAdd { .. } => {
                op.results.retain(|r| used.contains(r));
                return true;
            }
            _ => {}
        }
        op.kind.has_side_effects() || op.results.iter().any(|r| used.contains(r))
    });
}
