//! The verifier of specialized IR.
//!
//! Takes a kernel claimed to be specialized and checks the invariants that
//! backends rely on: SSA (each value defined once, before its uses, in an
//! enclosing region), concrete types (literal dims, no generic dtypes),
//! elementwise operands already broadcast to the result shape, dtypes agreeing
//! across operands, region signatures (`for` args/yields/results, `if`
//! yields/results). It does not re-infer types: the builder made them; the
//! verifier catches passes that break them.

use crate::ir::*;
use crate::types::*;
use std::collections::HashSet;

/// A broken invariant of specialized IR.
#[derive(Debug, Clone)]
pub struct VerifyError {
    /// Location of the offending op (the default for errors about a whole region).
    pub loc: Loc,
    /// What is broken, with the op abbreviated.
    pub msg: String,
}

type R = Result<(), VerifyError>;

/// Check that `k` satisfies the invariants of specialized IR (module doc).
pub fn verify(k: &Kernel) -> R {
    let mut defined = HashSet::new();
    let mut scope = vec![];
    block(k, &k.body, &mut defined, &mut scope, true)
}

fn fail(op: &Op, msg: String) -> R {
    Err(VerifyError { loc: op.loc, msg: format!("{msg} (in {:?})", short(&op.kind)) })
}

fn short(k: &OpKind) -> String {
    let s = format!("{k:?}");
    s.chars().take(80).collect()
}

fn concrete(t: &Type) -> bool {
    match t {
        Type::Tile { elem, shape } => !elem.dtype().is_generic() && shape.iter().all(|d| d.known().is_some()),
        Type::View { dtype, .. } => !dtype.is_generic(),
    }
}

fn block(k: &Kernel, b: &Block, defined: &mut HashSet<V>, scope: &mut Vec<V>, top: bool) -> R {
    let mark = scope.len();
    for a in &b.args {
        if !defined.insert(*a) {
            return Err(VerifyError { loc: Loc::default(), msg: format!("block argument {a:?} defined twice") });
        }
        scope.push(*a);
    }
    for (i, op) in b.ops.iter().enumerate() {
        for v in op.kind.operands() {
            if !scope.contains(&v) {
                return fail(op, format!("operand %{} is not defined in scope", v.0));
            }
        }
        if matches!(op.kind, OpKind::Yield(_)) && (top || i + 1 != b.ops.len()) {
            return fail(op, "yield must end a nested region".into());
        }
        check_op(k, op)?;
        for r in op.kind.regions() {
            block(k, r, defined, scope, false)?;
        }
        for r in &op.results {
            if !defined.insert(*r) {
                return fail(op, format!("value %{} defined twice", r.0));
            }
            if !concrete(k.ty(*r)) {
                return fail(op, format!("value %{} has a non-concrete type {}", r.0, k.ty(*r)));
            }
            scope.push(*r);
        }
    }
    if !top && !matches!(b.ops.last().map(|o| &o.kind), Some(OpKind::Yield(_))) {
        return Err(VerifyError { loc: Loc::default(), msg: "nested region does not end in yield".into() });
    }
    scope.truncate(mark);
    Ok(())
}

fn check_op(k: &Kernel, op: &Op) -> R {
    let ty = |v: V| k.ty(v);
    let res = op.results.first().map(|r| k.ty(*r));
    let same_shape = |vs: &[V]| -> R {
        let rs = res.map(|t| t.shape()).unwrap_or_else(|| ty(vs[0]).shape());
        for v in vs {
            if ty(*v).shape() != rs {
                return fail(op, format!("operand %{} has shape {} but the op works on {}", v.0, fmt_shape(ty(*v).shape()), fmt_shape(rs)));
            }
        }
        Ok(())
    };
    match &op.kind {
        OpKind::Binary { a, b, .. } | OpKind::Cmp { a, b, .. } => {
            same_shape(&[*a, *b])?;
            if ty(*a).elem() != ty(*b).elem() {
                return fail(op, format!("operand dtypes differ: {} vs {}", ty(*a), ty(*b)));
            }
        }
        OpKind::Fma { a, b, c } => same_shape(&[*a, *b, *c])?,
        OpKind::Select { cond, a, b } => {
            same_shape(&[*cond, *a, *b])?;
            if ty(*cond).dtype() != Some(DType::Bool) {
                return fail(op, "select condition is not bool".into());
            }
        }
        OpKind::Unary { x, .. } | OpKind::Cast { x, .. } => same_shape(&[*x])?,
        OpKind::Bitcast { x, to } => {
            same_shape(&[*x])?;
            let from = ty(*x).dtype();
            if !from.is_some_and(|d| d.bits() == 32 && d != DType::Bool) || to.bits() != 32 {
                return fail(op, format!("bitcast of {from:?} to {to}: both must be 32-bit"));
            }
        }
        OpKind::AddPtr { ptr, offset } => {
            same_shape(&[*ptr, *offset])?;
            if !ty(*ptr).elem().is_some_and(|e| e.is_ptr()) {
                return fail(op, "addptr base is not a pointer".into());
            }
        }
        OpKind::Load { ptr, mask, other } => {
            let mut vs = vec![*ptr];
            vs.extend(mask.iter().copied());
            vs.extend(other.iter().copied());
            same_shape(&vs)?;
        }
        OpKind::Store { ptr, value, mask } | OpKind::AtomicAdd { ptr, value, mask, .. } => {
            let mut vs = vec![*ptr, *value];
            vs.extend(mask.iter().copied());
            same_shape(&vs)?;
            if ty(*ptr).elem().map(|e| e.dtype()) != ty(*value).dtype() {
                return fail(op, "stored value dtype differs from the pointee".into());
            }
        }
        OpKind::Broadcast { x, shape } => {
            let xs = ty(*x).shape();
            if xs.len() != shape.len() || xs.iter().zip(shape).any(|(a, b)| a != b && a.known() != Some(1)) {
                return fail(op, "broadcast from an incompatible shape".into());
            }
        }
        OpKind::Dot { a, b, acc, .. } => {
            let (sa, sb, sc) = (ty(*a).shape(), ty(*b).shape(), ty(*acc).shape());
            if sa.len() != 2 || sb.len() != 2 || sc.len() != 2 || sa[1] != sb[0] || sc[0] != sa[0] || sc[1] != sb[1] {
                return fail(op, "dot shapes do not agree".into());
            }
        }
        OpKind::For { inits, body, .. } => {
            if body.args.len() != inits.len() + 1 || op.results.len() != inits.len() {
                return fail(op, "for: carried value count mismatch".into());
            }
            let ys = body.yields();
            for (i, init) in inits.iter().enumerate() {
                let t = ty(body.args[i + 1]);
                if ty(*init) != t || ys.get(i).map(|y| ty(*y)) != Some(t) || ty(op.results[i]) != t {
                    return fail(op, format!("for: carried value {i} changes type"));
                }
            }
        }
        OpKind::If { cond, then_, else_ } => {
            if !ty(*cond).is_scalar() || ty(*cond).dtype() != Some(DType::Bool) {
                return fail(op, "if condition is not a bool scalar".into());
            }
            for blk in [then_, else_] {
                let ys = blk.yields();
                if ys.len() != op.results.len() || ys.iter().zip(&op.results).any(|(y, r)| ty(*y) != ty(*r)) {
                    return fail(op, "if: yielded types differ from results".into());
                }
            }
        }
        OpKind::Constexpr(_) => return fail(op, "constexpr left after specialization".into()),
        OpKind::StaticAssert { .. } => return fail(op, "static_assert left after specialization".into()),
        _ => {}
    }
    Ok(())
}
