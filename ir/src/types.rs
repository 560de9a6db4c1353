//! Types of IR values: element dtypes, symbolic dimensions and tile/view types.
//!
//! Takes nothing; defines the vocabulary every other pass uses. Dimensions are
//! [`Dim`] expressions over constexpr parameters so that one generic kernel can
//! be type-checked at compile time (symbolically) and again at specialization
//! time (numerically) by the *same* inference rules in `builder.rs`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of a scalar or tile.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, PartialOrd, Ord)]
pub enum DType {
    /// Boolean (masks, comparisons); one byte in memory.
    Bool,
    /// 8-bit signed integer.
    I8,
    /// 8-bit unsigned integer.
    U8,
    /// 32-bit signed integer (the dtype of indices, `arange` and weak integer literals).
    I32,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit signed integer.
    I64,
    /// IEEE-754 half precision (binary16); computed in f32, rounded after every op.
    F16,
    /// bfloat16 (f32's 8-bit exponent, 7 mantissa bits); computed in f32, rounded after every op.
    BF16,
    /// IEEE-754 single precision.
    F32,
    /// 8-bit float (OCP FP8) with 4 exponent and 3 mantissa bits, no infinities. Both FP8
    /// dtypes are held as their codes, computed in f32, and
    /// rounded back to nearest-even, saturating (`numeric::fp8_encode`).
    F8E4M3,
    /// OCP FP8 with 5 exponent and 2 mantissa bits (IEEE-like, with infinities); held and computed
    /// like `F8E4M3`.
    F8E5M2,
    /// A dtype parameter of a dtype-generic kernel (`<T: Float>`), by index.
    /// Only appears before specialization.
    Generic(u8),
}

impl DType {
    /// Whether the dtype is a float (f16, bf16, f32, fp8), counting a dtype parameter: those are
    /// always floats.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F8E4M3 | DType::F8E5M2 | DType::Generic(_))
    }
    /// The FP8 format of an 8-bit float dtype.
    pub fn fp8(self) -> Option<crate::numeric::Fp8> {
        match self {
            DType::F8E4M3 => Some(crate::numeric::Fp8::E4M3),
            DType::F8E5M2 => Some(crate::numeric::Fp8::E5M2),
            _ => None,
        }
    }
    /// Whether the dtype is an integer (signed or not; bool is not one).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I8 | DType::U8 | DType::I32 | DType::U32 | DType::I64)
    }
    /// Whether the dtype is a signed integer.
    pub fn is_signed(self) -> bool {
        matches!(self, DType::I8 | DType::I32 | DType::I64)
    }
    /// Whether this is a dtype parameter not yet bound.
    pub fn is_generic(self) -> bool {
        matches!(self, DType::Generic(_))
    }
    /// Size in bytes of one element in memory.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 => 8,
            DType::Generic(_) => 0,
        }
    }
    /// Bit width of the type as arithmetic (bool counts as 1).
    pub fn bits(self) -> u32 {
        match self {
            DType::Bool => 1,
            other => other.size_bytes() as u32 * 8,
        }
    }
    /// Parse the Rust spelling of a dtype (`f32`, `bf16`, ...).
    pub fn from_rust(name: &str) -> Option<DType> {
        Some(match name {
            "bool" => DType::Bool,
            "i8" => DType::I8,
            "u8" => DType::U8,
            "i32" => DType::I32,
            "u32" => DType::U32,
            "i64" => DType::I64,
            "f16" => DType::F16,
            "bf16" => DType::BF16,
            "f32" => DType::F32,
            "f8e4m3" => DType::F8E4M3,
            "f8e5m2" => DType::F8E5M2,
            _ => return None,
        })
    }
    /// The Rust spelling (`f32`, `bf16`, …), as [`DType::from_rust`] reads it; a dtype parameter
    /// is `$T0`, `$T1`, ….
    pub fn name(self) -> String {
        match self {
            DType::Bool => "bool".into(),
            DType::I8 => "i8".into(),
            DType::U8 => "u8".into(),
            DType::I32 => "i32".into(),
            DType::U32 => "u32".into(),
            DType::I64 => "i64".into(),
            DType::F16 => "f16".into(),
            DType::BF16 => "bf16".into(),
            DType::F32 => "f32".into(),
            DType::F8E4M3 => "f8e4m3".into(),
            DType::F8E5M2 => "f8e5m2".into(),
            DType::Generic(i) => format!("$T{i}"),
        }
    }
    /// Substitute dtype parameters.
    pub fn subst(self, dtypes: &[DType]) -> DType {
        match self {
            DType::Generic(i) => dtypes.get(i as usize).copied().unwrap_or(self),
            d => d,
        }
    }
    /// Every concrete dtype, in declaration order.
    pub const ALL: [DType; 11] =
        [DType::Bool, DType::I8, DType::U8, DType::I32, DType::U32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F8E4M3, DType::F8E5M2];
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Binary operators of constexpr dimension expressions.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum CBin {
    /// `a + b` (wrapping).
    Add,
    /// `a - b` (wrapping).
    Sub,
    /// `a * b` (wrapping).
    Mul,
    /// `a / b`, truncating toward zero; dividing by zero is an error.
    Div,
    /// `a % b`, truncating toward zero; by zero is an error.
    Rem,
    /// `a << b` (the amount taken modulo 64).
    Shl,
    /// `a >> b`, arithmetic (the amount taken modulo 64).
    Shr,
    /// Bitwise and.
    And,
    /// Bitwise or.
    Or,
    /// Bitwise exclusive or.
    Xor,
    /// `a == b`, as 1 or 0.
    Eq,
    /// `a != b`, as 1 or 0.
    Ne,
    /// `a < b`, as 1 or 0.
    Lt,
    /// `a <= b`, as 1 or 0.
    Le,
    /// `a > b`, as 1 or 0.
    Gt,
    /// `a >= b`, as 1 or 0.
    Ge,
    /// 1 when both are non-zero, else 0.
    LAnd,
    /// 1 when either is non-zero, else 0.
    LOr,
    /// The smaller of the two.
    Min,
    /// The larger of the two.
    Max,
    /// Broadcast of two dimensions (equal, or one of them 1); an error when
    /// neither holds. Only produced by shape inference.
    Bcast,
}

/// An integer expression over constexpr parameters: a tile dimension, or the
/// value of a constexpr scalar. After specialization every one is a `Lit`.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum CExpr {
    /// A known value.
    Lit(i64),
    /// Constexpr parameter by index, with its name for printing.
    Param(u32, String),
    /// A binary operation on two expressions.
    Bin(CBin, Box<CExpr>, Box<CExpr>),
    /// Negation (wrapping).
    Neg(Box<CExpr>),
    /// Logical not: 1 for 0, else 0.
    Not(Box<CExpr>),
}

/// A tile dimension.
pub type Dim = CExpr;

impl CExpr {
    /// A literal.
    pub fn lit(v: i64) -> CExpr {
        CExpr::Lit(v)
    }
    /// The value, when the expression is a literal.
    pub fn known(&self) -> Option<i64> {
        match self {
            CExpr::Lit(v) => Some(*v),
            _ => None,
        }
    }
    /// Build a binary expression, folding when both sides are literals.
    /// Folding errors (division by zero, bad broadcast) leave the expression
    /// unfolded so that `eval` reports them with context.
    pub fn bin(op: CBin, a: CExpr, b: CExpr) -> CExpr {
        if let (Some(x), Some(y)) = (a.known(), b.known()) {
            if let Ok(v) = eval_bin(op, x, y) {
                return CExpr::Lit(v);
            }
        }
        // Algebraic identities that keep symbolic shapes readable.
        match (op, a.known(), b.known()) {
            (CBin::Mul, Some(1), _) | (CBin::Add, Some(0), _) => return b,
            (CBin::Mul, _, Some(1)) | (CBin::Add, _, Some(0)) | (CBin::Sub, _, Some(0)) | (CBin::Div, _, Some(1)) => return a,
            (CBin::Bcast, Some(1), _) => return b,
            (CBin::Bcast, _, Some(1)) => return a,
            _ => {}
        }
        if op == CBin::Bcast && a == b {
            return a;
        }
        CExpr::Bin(op, Box::new(a), Box::new(b))
    }
    /// Evaluate with constexpr values bound.
    pub fn eval(&self, env: &[i64]) -> Result<i64, String> {
        Ok(match self {
            CExpr::Lit(v) => *v,
            CExpr::Param(i, name) => *env.get(*i as usize).ok_or_else(|| format!("constexpr `{name}` has no value"))?,
            CExpr::Neg(a) => a.eval(env)?.wrapping_neg(),
            CExpr::Not(a) => (a.eval(env)? == 0) as i64,
            CExpr::Bin(op, a, b) => eval_bin(*op, a.eval(env)?, b.eval(env)?)?,
        })
    }
    /// Substitute bound parameters, folding what becomes literal.
    pub fn subst(&self, env: &[i64]) -> Result<CExpr, String> {
        self.eval(env).map(CExpr::Lit)
    }
    /// Three-valued equality: `Some(b)` when provable, `None` when it depends
    /// on constexpr values.
    pub fn provably_eq(&self, other: &CExpr) -> Option<bool> {
        match (self.known(), other.known()) {
            (Some(a), Some(b)) => Some(a == b),
            _ if self == other => Some(true),
            _ => None,
        }
    }
}

/// `op` applied to two values as constexpr arithmetic does (i64, wrapping; comparisons and logical
/// ops give 0 or 1); `Err` on division or remainder by zero and on dimensions that cannot be
/// broadcast.
pub fn eval_bin(op: CBin, x: i64, y: i64) -> Result<i64, String> {
    Ok(match op {
        CBin::Add => x.wrapping_add(y),
        CBin::Sub => x.wrapping_sub(y),
        CBin::Mul => x.wrapping_mul(y),
        CBin::Div => {
            if y == 0 {
                return Err("division by zero in a constexpr expression".into());
            }
            x.wrapping_div(y)
        }
        CBin::Rem => {
            if y == 0 {
                return Err("remainder by zero in a constexpr expression".into());
            }
            x.wrapping_rem(y)
        }
        CBin::Shl => x.wrapping_shl(y as u32),
        CBin::Shr => x.wrapping_shr(y as u32),
        CBin::And => x & y,
        CBin::Or => x | y,
        CBin::Xor => x ^ y,
        CBin::Eq => (x == y) as i64,
        CBin::Ne => (x != y) as i64,
        CBin::Lt => (x < y) as i64,
        CBin::Le => (x <= y) as i64,
        CBin::Gt => (x > y) as i64,
        CBin::Ge => (x >= y) as i64,
        CBin::LAnd => (x != 0 && y != 0) as i64,
        CBin::LOr => (x != 0 || y != 0) as i64,
        CBin::Min => x.min(y),
        CBin::Max => x.max(y),
        CBin::Bcast => {
            if x == y || y == 1 {
                x
            } else if x == 1 {
                y
            } else {
                return Err(format!("dimensions {x} and {y} cannot be broadcast together"));
            }
        }
    })
}

impl fmt::Display for CExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CExpr::Lit(v) => write!(f, "{v}"),
            CExpr::Param(_, n) => f.write_str(n),
            CExpr::Neg(a) => write!(f, "-({a})"),
            CExpr::Not(a) => write!(f, "!({a})"),
            CExpr::Bin(op, a, b) => {
                let s = match op {
                    CBin::Add => "+",
                    CBin::Sub => "-",
                    CBin::Mul => "*",
                    CBin::Div => "/",
                    CBin::Rem => "%",
                    CBin::Shl => "<<",
                    CBin::Shr => ">>",
                    CBin::And => "&",
                    CBin::Or => "|",
                    CBin::Xor => "^",
                    CBin::Eq => "==",
                    CBin::Ne => "!=",
                    CBin::Lt => "<",
                    CBin::Le => "<=",
                    CBin::Gt => ">",
                    CBin::Ge => ">=",
                    CBin::LAnd => "&&",
                    CBin::LOr => "||",
                    CBin::Min => return write!(f, "min({a}, {b})"),
                    CBin::Max => return write!(f, "max({a}, {b})"),
                    CBin::Bcast => return write!(f, "bcast({a}, {b})"),
                };
                write!(f, "({a} {s} {b})")
            }
        }
    }
}

/// What one element of a tile is: a value of a dtype, or a global-memory
/// pointer to elements of a dtype.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Elem {
    /// A value of the dtype.
    Val(DType),
    /// A pointer to an element of the dtype in global memory.
    Ptr(DType),
}

impl Elem {
    /// The dtype of the value, or of the element pointed at.
    pub fn dtype(self) -> DType {
        match self {
            Elem::Val(d) | Elem::Ptr(d) => d,
        }
    }
    /// Whether the element is a pointer.
    pub fn is_ptr(self) -> bool {
        matches!(self, Elem::Ptr(_))
    }
    /// Dtype parameters substituted (see [`DType::subst`]).
    pub fn subst(self, dtypes: &[DType]) -> Elem {
        match self {
            Elem::Val(d) => Elem::Val(d.subst(dtypes)),
            Elem::Ptr(d) => Elem::Ptr(d.subst(dtypes)),
        }
    }
}

impl fmt::Display for Elem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Elem::Val(d) => write!(f, "{d}"),
            Elem::Ptr(d) => write!(f, "ptr<{d}>"),
        }
    }
}

/// Type of an SSA value. A scalar is a tile of rank 0.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum Type {
    /// A tile: `elem`s in a row-major array of `shape`.
    Tile {
        /// What each element is.
        elem: Elem,
        /// The extent of each dimension, outermost first; empty for a scalar.
        shape: Vec<Dim>,
    },
    /// A block/tensor view: base pointer, shape and strides of a global
    /// tensor of `rank` dimensions, from which tiles are loaded by offset.
    View {
        /// Element dtype of the tensor.
        dtype: DType,
        /// Number of dimensions (1 to 3).
        rank: usize,
    },
}

impl Type {
    /// The scalar type of dtype `d`.
    pub fn scalar(d: DType) -> Type {
        Type::Tile { elem: Elem::Val(d), shape: vec![] }
    }
    /// The tile type of `elem`s of `shape`.
    pub fn tile(elem: Elem, shape: Vec<Dim>) -> Type {
        Type::Tile { elem, shape }
    }
    /// What each element is; `None` for a view.
    pub fn elem(&self) -> Option<Elem> {
        match self {
            Type::Tile { elem, .. } => Some(*elem),
            Type::View { .. } => None,
        }
    }
    /// The tile's dimensions; empty for scalars and views.
    pub fn shape(&self) -> &[Dim] {
        match self {
            Type::Tile { shape, .. } => shape,
            Type::View { .. } => &[],
        }
    }
    /// Number of dimensions; 0 for scalars and views.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }
    /// Whether this is a tile of rank 0 (a value or a pointer; a view is not a scalar).
    pub fn is_scalar(&self) -> bool {
        matches!(self, Type::Tile { shape, .. } if shape.is_empty())
    }
    /// The dtype of a value tile or scalar; `None` for pointers and views.
    pub fn dtype(&self) -> Option<DType> {
        match self {
            Type::Tile { elem: Elem::Val(d), .. } => Some(*d),
            _ => None,
        }
    }
    /// The same element type with another shape (a view is returned unchanged).
    pub fn with_shape(&self, shape: Vec<Dim>) -> Type {
        match self {
            Type::Tile { elem, .. } => Type::Tile { elem: *elem, shape },
            v => v.clone(),
        }
    }
    /// A tile of this type's shape with elements `elem`.
    pub fn with_elem(&self, elem: Elem) -> Type {
        Type::Tile { elem, shape: self.shape().to_vec() }
    }
    /// Number of elements when all dims are known.
    pub fn numel(&self) -> Option<i64> {
        self.shape().iter().map(|d| d.known()).product()
    }
}

/// A shape as types print it: `[d0, d1, …]`.
pub fn fmt_shape(shape: &[Dim]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Tile { elem, shape } if shape.is_empty() => write!(f, "{elem}"),
            Type::Tile { elem, shape } => write!(f, "{elem}{}", fmt_shape(shape)),
            Type::View { dtype, rank } => write!(f, "view<{dtype}, {rank}>"),
        }
    }
}
