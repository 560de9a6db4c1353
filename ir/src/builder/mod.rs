//! The IR builder: the one place where the typing and shape rules live.
//!
//! Takes ops one at a time (from the macro's lowering at compile time, and
//! from the specializer at launch time) and appends them to the kernel with
//! inferred result types. It guarantees that everything it appends is
//! well-typed: dtypes agree (unsuffixed literals and constexprs are *weak* and
//! adopt the other operand's dtype), shapes broadcast NumPy-style (explicit
//! `Splat`/`ExpandDims`/`Broadcast` ops are inserted, so consumers never
//! broadcast implicitly), pointer arithmetic is pointer + integer, and
//! reductions/`dot` get operands of the right rank.
//!
//! Shapes may be symbolic ([`CExpr`]); a rule only fails when a violation is
//! *provable*. The specializer re-runs the same rules with literal shapes,
//! which turns every remaining "depends on constexprs" into a definite answer.
//! Errors are [`TypeError`]s without a span: callers attach the location.
//!
//! The rules are split by what they type: `values.rs` (leaves), `shape.rs`,
//! `arith.rs`, `memory.rs`, `reduce.rs` (reductions, scans, `dot`) and
//! `control.rs` (`for`, `if`, `static_assert`).

mod arith;
mod control;
mod memory;
mod reduce;
mod shape;
mod values;

use crate::ir::*;
use crate::types::*;

/// A typing error: one cause, an optional hint, and which operand (0-based)
/// is to blame when that is known, so the macro can point at it.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeError {
    /// What is wrong, without a location (the caller attaches it).
    pub msg: String,
    /// How to fix it, printed after the message as `= help: …`.
    pub hint: Option<String>,
    /// The operand to blame (0-based), when known.
    pub operand: Option<usize>,
}

impl TypeError {
    /// An error with message `msg`, no hint and no operand.
    pub fn new(msg: impl Into<String>) -> Self {
        TypeError { msg: msg.into(), hint: None, operand: None }
    }
    /// This error with a help line.
    pub fn hint(mut self, h: impl Into<String>) -> Self {
        self.hint = Some(h.into());
        self
    }
    /// This error blaming operand `operand` (0-based).
    pub fn at(mut self, operand: usize) -> Self {
        self.operand = Some(operand);
        self
    }
}

impl std::fmt::Display for TypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.msg)?;
        if let Some(h) = &self.hint {
            write!(f, "\n  = help: {h}")?;
        }
        Ok(())
    }
}

type R<T> = Result<T, TypeError>;

enum Frame {
    For { lo: V, hi: V, step: V, inits: Vec<V>, loc: Loc },
    IfThen { cond: V, loc: Loc },
    IfElse { cond: V, then_: Block, then_yields: Vec<V>, loc: Loc },
}

/// Builds a [`Kernel`] op by op, inferring and checking every result type (see the module doc).
/// Regions are opened and closed with `begin_for`/`end_for` and `begin_if`/`begin_else`/`end_if`;
/// [`Builder::finish`] returns the kernel.
pub struct Builder {
    /// The kernel under construction; its `body` is filled in by [`Builder::finish`].
    pub kernel: Kernel,
    blocks: Vec<Block>,
    frames: Vec<Frame>,
    /// The source location given to the ops appended next; callers set it per token.
    pub loc: Loc,
    /// Facts that turn silent mistakes into type errors (`emit`).
    facts: Facts,
}

/// What the builder remembers about values to catch mistakes that would
/// type-check and compute something else than meant:
/// - `zero_filled`: read by a masked `load` without `other` (masked-off
///   lanes hold 0), or computed elementwise from one — a `max`/`min`/
///   `argmax`/`argmin` over it would count those zeros;
/// - `reduced`: the result of a reduction along axis `a > 0` of a tile of
///   rank ≥ 2 (or computed elementwise from one, same rank) — implicit
///   broadcasting prepends the missing axis, so against the original tile
///   it lines up with the wrong axis (silently, when the two sizes agree).
#[derive(Default)]
struct Facts {
    zero_filled: std::collections::HashSet<V>,
    reduced: std::collections::HashMap<V, u8>,
}

fn fmt_ty(t: &Type) -> String {
    format!("`{t}`")
}

impl CExpr {
    /// Fold unary nodes over literals.
    pub fn fold(self) -> CExpr {
        match self {
            CExpr::Neg(a) => match a.known() {
                Some(v) => CExpr::Lit(v.wrapping_neg()),
                None => CExpr::Neg(a),
            },
            CExpr::Not(a) => match a.known() {
                Some(v) => CExpr::Lit((v == 0) as i64),
                None => CExpr::Not(a),
            },
            e => e,
        }
    }
}

/// The NumPy broadcast of two shapes (aligned at their last dimension). A pair of dimensions that
/// are equal only for some constexpr values becomes `bcast(a, b)`, checked at specialization;
/// `Err` when a pair provably differs and neither is 1.
pub fn broadcast_shapes(a: &[Dim], b: &[Dim]) -> R<Vec<Dim>> {
    let r = a.len().max(b.len());
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        let da = if i + a.len() >= r { Some(&a[i + a.len() - r]) } else { None };
        let db = if i + b.len() >= r { Some(&b[i + b.len() - r]) } else { None };
        out.push(match (da, db) {
            (Some(x), None) => x.clone(),
            (None, Some(y)) => y.clone(),
            (Some(x), Some(y)) => match x.provably_eq(y) {
                Some(true) => x.clone(),
                _ if x.known() == Some(1) => y.clone(),
                _ if y.known() == Some(1) => x.clone(),
                Some(false) => {
                    return Err(TypeError::new(format!("shape mismatch: {} and {} cannot be broadcast together", fmt_shape(a), fmt_shape(b)))
                        .hint("dimensions must be equal or 1; use expand_dims to add an axis"))
                }
                None => CExpr::bin(CBin::Bcast, x.clone(), y.clone()),
            },
            (None, None) => unreachable!(),
        });
    }
    Ok(out)
}

fn dtype_mismatch(a: DType, b: DType) -> TypeError {
    TypeError::new(format!("dtype mismatch: {a} and {b}")).hint(format!("ferrotile never converts implicitly; cast one side, e.g. `x as {a}`"))
}

fn check_axis3(axis: i64) -> R<()> {
    if !(0..3).contains(&axis) {
        return Err(TypeError::new(format!("grid axis {axis} is out of range")).hint("the grid has axes 0, 1 and 2").at(0));
    }
    Ok(())
}

fn check_tile_len(n: i64, what: &str) -> R<()> {
    if n <= 0 || (n & (n - 1)) != 0 {
        return Err(TypeError::new(format!("{what} has length {n}, which is not a power of two"))
            .hint("tile dimensions must be powers of two; mask the extra elements instead"));
    }
    if n > (1 << 20) {
        return Err(TypeError::new(format!("{what} has length {n}, more than the 2^20 elements a tile may hold")));
    }
    Ok(())
}

/// `v` wrapped (two's complement truncation) to the integer dtype `d`.
fn wrap_to(v: i64, d: DType) -> i64 {
    match d {
        DType::I8 => v as i8 as i64,
        DType::U8 => v as u8 as i64,
        DType::I32 => v as i32 as i64,
        DType::U32 => v as u32 as i64,
        _ => v,
    }
}

fn check_int_range(v: i64, d: DType) -> R<()> {
    let ok = match d {
        DType::I8 => i8::try_from(v).is_ok(),
        DType::U8 => u8::try_from(v).is_ok(),
        DType::I32 => i32::try_from(v).is_ok(),
        DType::U32 => u32::try_from(v).is_ok(),
        DType::Bool => v == 0 || v == 1,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(TypeError::new(format!("the integer {v} does not fit in {d}"))
            .hint("use a value in range, or compute in a wider dtype (a literal suffix like `i64` and `as i64` on the other operand)"))
    }
}

fn check_binop_dtype(op: BinOp, d: DType) -> R<()> {
    let bad = |m: String, h: &str| Err(TypeError::new(m).hint(h.to_string()).at(0));
    match op {
        BinOp::Rem if d.is_float() => bad(format!("`%` is not defined on floats ({d})"), "compute `x - floor(x / y) * y` if you need it"),
        BinOp::And | BinOp::Or | BinOp::Xor if d.is_float() => {
            bad(format!("bitwise `{}` is not defined on floats ({d})", binop_str(op)), "cast to an integer type first")
        }
        BinOp::Shl | BinOp::Shr if !d.is_int() => bad(format!("shifts need integer operands, found {d}"), "cast to an integer type first"),
        BinOp::LAnd | BinOp::LOr if d != DType::Bool => {
            bad(format!("`{}` needs bool operands, found {d}", binop_str(op)), "use `&`/`|` for bitwise operations on integers")
        }
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Rem if d == DType::Bool => {
            bad(format!("arithmetic `{}` is not defined on bool", binop_str(op)), "cast to i32 first: `mask as i32`")
        }
        _ => Ok(()),
    }
}

/// The operator as messages spell it (`+`, `<<`, `maximum`, …).
pub fn binop_str(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Rem => "%",
        BinOp::And => "&",
        BinOp::Or => "|",
        BinOp::Xor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
        BinOp::Max => "maximum",
        BinOp::Min => "minimum",
        BinOp::LAnd => "&&",
        BinOp::LOr => "||",
    }
}

fn binop_to_cbin(op: BinOp) -> Option<CBin> {
    Some(match op {
        BinOp::Add => CBin::Add,
        BinOp::Sub => CBin::Sub,
        BinOp::Mul => CBin::Mul,
        BinOp::Div => CBin::Div,
        BinOp::Rem => CBin::Rem,
        BinOp::And => CBin::And,
        BinOp::Or => CBin::Or,
        BinOp::Xor => CBin::Xor,
        BinOp::Shl => CBin::Shl,
        BinOp::Shr => CBin::Shr,
        BinOp::Max => CBin::Max,
        BinOp::Min => CBin::Min,
        BinOp::LAnd => CBin::LAnd,
        BinOp::LOr => CBin::LOr,
    })
}
