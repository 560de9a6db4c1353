//! The tiled IR: SSA values over scalars, tiles, pointer tiles and views,
//! organised in structured regions (`for`, `if`).
//!
//! A [`Kernel`] exists in two states with one data structure:
//! - *generic*, as the macro produces it: dimensions may be constexpr
//!   expressions, dtypes may be generic, elementwise operands may still need
//!   broadcasting against symbolic shapes, and `if`s on constexprs remain;
//! - *specialized* (`Kernel::specialized == true`), as `specialize.rs` returns
//!   it: every dimension a literal, every dtype concrete, every elementwise
//!   operand already broadcast to the result shape, constexpr branches folded.
//!   The verifier checks these invariants; backends only see this state.
//!
//! Every op carries the source location of the user token it came from so that
//! errors found at specialization, in the interpreter or in a backend point at
//! the user's line.

use crate::types::*;
use serde::{Deserialize, Serialize};

/// Index of an SSA value in `Kernel::values`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, PartialOrd, Ord)]
pub struct V(pub u32);

impl V {
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

/// Source location (1-based line, 0-based column) of the user's token.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct Loc {
    pub line: u32,
    pub col: u32,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct ValueInfo {
    pub ty: Type,
    /// For constexpr-class scalars (literals, constexpr parameters and
    /// arithmetic on them): the value as an expression over constexprs.
    pub cval: Option<CExpr>,
    /// Unsuffixed literal or constexpr: adopts the dtype of the other operand.
    pub weak: bool,
    /// User variable name, for readable dumps.
    pub name: Option<String>,
    /// Layout assigned by a backend's layout pass (element -> warp/lane/reg).
    /// The IR only reserves the slot; `None` until a backend assigns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<u32>,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ParamKind {
    /// Global-memory pointer to elements of a dtype.
    Ptr(DType),
    /// Run-time scalar.
    Scalar(DType),
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
    /// Whether the kernel may write through this pointer (store/atomic).
    pub written: bool,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ConstexprParam {
    pub name: String,
    /// `i32`, `u32`, `i64` or `bool`.
    pub dtype: DType,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Max,
    Min,
    /// Logical and/or on booleans (`&&`, `||`).
    LAnd,
    LOr,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum UnOp {
    Neg,
    Not,
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Abs,
    Sigmoid,
    Tanh,
    Erf,
    Sin,
    Cos,
    Floor,
    Ceil,
    /// Round to the nearest integer, ties to even (`rint`, `torch.round`).
    Round,
    /// Round to tf32 (10-bit mantissa, nearest-even; non-finite values
    /// unchanged): what `dot_tf32` does to its inputs, as an elementwise
    /// op, e.g. to round operands once before a `dot_tf32_trunc`.
    RoundTf32,
}

impl UnOp {
    pub fn float_only(self) -> bool {
        !matches!(self, UnOp::Neg | UnOp::Not | UnOp::Abs)
    }
    pub fn name(self) -> &'static str {
        match self {
            UnOp::Neg => "neg",
            UnOp::Not => "not",
            UnOp::Exp => "exp",
            UnOp::Exp2 => "exp2",
            UnOp::Log => "log",
            UnOp::Log2 => "log2",
            UnOp::Sqrt => "sqrt",
            UnOp::Rsqrt => "rsqrt",
            UnOp::Abs => "abs",
            UnOp::Sigmoid => "sigmoid",
            UnOp::Tanh => "tanh",
            UnOp::Erf => "erf",
            UnOp::Sin => "sin",
            UnOp::Cos => "cos",
            UnOp::Floor => "floor",
            UnOp::Ceil => "ceil",
            UnOp::Round => "round",
            UnOp::RoundTf32 => "round_tf32",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
    Argmax,
    Argmin,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum ScanOp {
    Cumsum,
}

/// Precision of a `dot` with f32 inputs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum DotPrecision {
    /// Exact f32 products, f32 accumulation.
    Ieee,
    /// Inputs rounded to tf32 (10-bit mantissa, nearest-even) before the product.
    Tf32,
    /// Inputs truncated to tf32 (their 13 low mantissa bits dropped) before
    /// the product: the tensor cores' own conversion, so Hopper's `wgmma`
    /// reads f32 operands as they are. Exact — the same as `Tf32` — on
    /// inputs that are tf32 values already (e.g. from `round_tf32`).
    Tf32Trunc,
}

impl DotPrecision {
    /// Whether the inputs are reduced to tf32 (either way).
    pub fn is_tf32(self) -> bool {
        matches!(self, DotPrecision::Tf32 | DotPrecision::Tf32Trunc)
    }
}

/// A literal constant.
#[derive(Clone, Copy, PartialEq, Debug, Serialize, Deserialize)]
pub enum Lit {
    Int(i64),
    /// Stored by bit pattern so that infinities and NaN survive JSON.
    Float(#[serde(with = "f64_bits")] f64),
    Bool(bool),
}

/// A structured region: block arguments (loop induction variable and
/// loop-carried values) and a list of ops ending, for non-top-level regions,
/// in a `Yield`.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
pub struct Block {
    pub args: Vec<V>,
    pub ops: Vec<Op>,
}

impl Block {
    /// The values the block's closing `yield` passes out (none without one).
    pub fn yields(&self) -> &[V] {
        match self.ops.last().map(|o| &o.kind) {
            Some(OpKind::Yield(v)) => v,
            _ => &[],
        }
    }
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Op {
    pub kind: OpKind,
    pub results: Vec<V>,
    pub loc: Loc,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum OpKind {
    /// Run-time kernel argument by index.
    Param(u32),
    /// Constexpr-class scalar whose value is `cval` of the result (constexpr
    /// parameters and arithmetic on them). Becomes `Const` at specialization.
    Constexpr(CExpr),
    Const(Lit),
    ProgramId(u8),
    NumPrograms(u8),
    /// `[start, end)` as an i32 tile of length `end - start`.
    Arange {
        start: CExpr,
        end: CExpr,
    },
    /// Scalar broadcast to a tile of the given shape.
    Splat {
        x: V,
        shape: Vec<Dim>,
    },
    /// Broadcast of size-1 dims to `shape` (same rank).
    Broadcast {
        x: V,
        shape: Vec<Dim>,
    },
    ExpandDims {
        x: V,
        axis: u8,
    },
    Reshape {
        x: V,
        shape: Vec<Dim>,
    },
    Trans {
        x: V,
        perm: Vec<u8>,
    },
    Binary {
        op: BinOp,
        a: V,
        b: V,
    },
    Cmp {
        op: CmpOp,
        a: V,
        b: V,
    },
    Unary {
        op: UnOp,
        x: V,
    },
    Fma {
        a: V,
        b: V,
        c: V,
    },
    Select {
        cond: V,
        a: V,
        b: V,
    },
    Cast {
        x: V,
        to: DType,
    },
    /// The same bits read as another 32-bit dtype (f32, i32, u32).
    Bitcast {
        x: V,
        to: DType,
    },
    /// Pointer tile plus integer offset tile (in elements).
    AddPtr {
        ptr: V,
        offset: V,
    },
    Load {
        ptr: V,
        mask: Option<V>,
        other: Option<V>,
    },
    Store {
        ptr: V,
        value: V,
        mask: Option<V>,
    },
    AtomicAdd {
        ptr: V,
        value: V,
        mask: Option<V>,
    },
    MakeView {
        base: V,
        shape: Vec<V>,
        strides: Vec<V>,
    },
    /// Load a `shape` tile at element `offsets` of a view; elements outside
    /// the view read as zero.
    LoadBlock {
        view: V,
        offsets: Vec<V>,
        shape: Vec<Dim>,
    },
    /// Store a tile at `offsets`; elements outside the view are not written.
    StoreBlock {
        view: V,
        offsets: Vec<V>,
        value: V,
    },
    Reduce {
        op: ReduceOp,
        x: V,
        axis: u8,
    },
    Scan {
        op: ScanOp,
        x: V,
        axis: u8,
    },
    Dot {
        a: V,
        b: V,
        acc: V,
        precision: DotPrecision,
    },
    /// `for iv in (lo..hi).step_by(step)` with loop-carried values:
    /// `body.args = [iv, carried...]`, initial values `inits`; the body ends in
    /// a `Yield` of the next carried values; the op's results are the final
    /// carried values.
    For {
        lo: V,
        hi: V,
        step: V,
        inits: Vec<V>,
        body: Block,
    },
    /// Both regions end in a `Yield` of values of the result types.
    If {
        cond: V,
        then_: Block,
        else_: Block,
    },
    Yield(Vec<V>),
    StaticAssert {
        cond: V,
        msg: String,
    },
    Print {
        prefix: String,
        args: Vec<V>,
    },
}

impl OpKind {
    /// SSA operands (not including nested regions).
    pub fn operands(&self) -> Vec<V> {
        use OpKind::*;
        match self {
            Param(_) | Constexpr(_) | Const(_) | ProgramId(_) | NumPrograms(_) | Arange { .. } => vec![],
            Splat { x, .. } | Broadcast { x, .. } | ExpandDims { x, .. } | Reshape { x, .. } | Trans { x, .. } => {
                vec![*x]
            }
            Unary { x, .. } | Cast { x, .. } | Bitcast { x, .. } | Reduce { x, .. } | Scan { x, .. } => vec![*x],
            Binary { a, b, .. } | Cmp { a, b, .. } => vec![*a, *b],
            Fma { a, b, c } => vec![*a, *b, *c],
            Select { cond, a, b } => vec![*cond, *a, *b],
            AddPtr { ptr, offset } => vec![*ptr, *offset],
            Load { ptr, mask, other } => std::iter::once(*ptr).chain(*mask).chain(*other).collect(),
            Store { ptr, value, mask } | AtomicAdd { ptr, value, mask } => std::iter::once(*ptr).chain(std::iter::once(*value)).chain(*mask).collect(),
            MakeView { base, shape, strides } => std::iter::once(*base).chain(shape.iter().copied()).chain(strides.iter().copied()).collect(),
            LoadBlock { view, offsets, .. } => std::iter::once(*view).chain(offsets.iter().copied()).collect(),
            StoreBlock { view, offsets, value } => std::iter::once(*view).chain(offsets.iter().copied()).chain(std::iter::once(*value)).collect(),
            Dot { a, b, acc, .. } => vec![*a, *b, *acc],
            For { lo, hi, step, inits, .. } => [*lo, *hi, *step].into_iter().chain(inits.iter().copied()).collect(),
            If { cond, .. } => vec![*cond],
            Yield(vs) => vs.clone(),
            StaticAssert { cond, .. } => vec![*cond],
            Print { args, .. } => args.clone(),
        }
    }

    /// Rewrite every SSA operand (not nested regions) through `f`.
    pub fn map_operands(&mut self, f: &mut impl FnMut(V) -> V) {
        use OpKind::*;
        match self {
            Param(_) | Constexpr(_) | Const(_) | ProgramId(_) | NumPrograms(_) | Arange { .. } => {}
            Splat { x, .. } | Broadcast { x, .. } | ExpandDims { x, .. } | Reshape { x, .. } | Trans { x, .. } => *x = f(*x),
            Unary { x, .. } | Cast { x, .. } | Bitcast { x, .. } | Reduce { x, .. } | Scan { x, .. } => *x = f(*x),
            Binary { a, b, .. } | Cmp { a, b, .. } => {
                *a = f(*a);
                *b = f(*b)
            }
            Fma { a, b, c } => {
                *a = f(*a);
                *b = f(*b);
                *c = f(*c)
            }
            Select { cond, a, b } => {
                *cond = f(*cond);
                *a = f(*a);
                *b = f(*b)
            }
            AddPtr { ptr, offset } => {
                *ptr = f(*ptr);
                *offset = f(*offset)
            }
            Load { ptr, mask, other } => {
                *ptr = f(*ptr);
                if let Some(m) = mask {
                    *m = f(*m)
                }
                if let Some(o) = other {
                    *o = f(*o)
                }
            }
            Store { ptr, value, mask } | AtomicAdd { ptr, value, mask } => {
                *ptr = f(*ptr);
                *value = f(*value);
                if let Some(m) = mask {
                    *m = f(*m)
                }
            }
            MakeView { base, shape, strides } => {
                *base = f(*base);
                shape.iter_mut().for_each(|v| *v = f(*v));
                strides.iter_mut().for_each(|v| *v = f(*v));
            }
            LoadBlock { view, offsets, .. } => {
                *view = f(*view);
                offsets.iter_mut().for_each(|v| *v = f(*v));
            }
            StoreBlock { view, offsets, value } => {
                *view = f(*view);
                offsets.iter_mut().for_each(|v| *v = f(*v));
                *value = f(*value);
            }
            Dot { a, b, acc, .. } => {
                *a = f(*a);
                *b = f(*b);
                *acc = f(*acc)
            }
            For { lo, hi, step, inits, .. } => {
                *lo = f(*lo);
                *hi = f(*hi);
                *step = f(*step);
                inits.iter_mut().for_each(|v| *v = f(*v));
            }
            If { cond, .. } => *cond = f(*cond),
            Yield(vs) => vs.iter_mut().for_each(|v| *v = f(*v)),
            StaticAssert { cond, .. } => *cond = f(*cond),
            Print { args, .. } => args.iter_mut().for_each(|v| *v = f(*v)),
        }
    }

    pub fn regions(&self) -> Vec<&Block> {
        match self {
            OpKind::For { body, .. } => vec![body],
            OpKind::If { then_, else_, .. } => vec![then_, else_],
            _ => vec![],
        }
    }

    /// Ops computed element by element from operands of the result's shape
    /// (backends run them register by register in the result's layout).
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            OpKind::Binary { .. }
                | OpKind::Cmp { .. }
                | OpKind::Unary { .. }
                | OpKind::Fma { .. }
                | OpKind::Select { .. }
                | OpKind::Cast { .. }
                | OpKind::Bitcast { .. }
                | OpKind::AddPtr { .. }
        )
    }

    pub fn has_side_effects(&self) -> bool {
        matches!(
            self,
            OpKind::Store { .. }
                | OpKind::AtomicAdd { .. }
                | OpKind::StoreBlock { .. }
                | OpKind::Print { .. }
                | OpKind::StaticAssert { .. }
                | OpKind::For { .. }
                | OpKind::If { .. }
                | OpKind::Yield(_)
        )
    }
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Kernel {
    pub name: String,
    /// Source file the kernel was written in (for error messages).
    pub file: String,
    pub params: Vec<Param>,
    pub constexprs: Vec<ConstexprParam>,
    /// Names of dtype parameters (`<T: Float>`), by `DType::Generic` index.
    pub dtype_params: Vec<String>,
    pub values: Vec<ValueInfo>,
    pub body: Block,
    /// True once `specialize` produced it; see the module doc.
    pub specialized: bool,
    /// Constexpr values and dtypes this kernel was specialized with.
    #[serde(default)]
    pub bound_constexprs: Vec<i64>,
    #[serde(default)]
    pub bound_dtypes: Vec<DType>,
}

impl Kernel {
    pub fn ty(&self, v: V) -> &Type {
        &self.values[v.idx()].ty
    }
    pub fn info(&self, v: V) -> &ValueInfo {
        &self.values[v.idx()]
    }
    /// Visit every op, depth first, in program order.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Op)) {
        fn go<'a>(b: &'a Block, f: &mut impl FnMut(&'a Op)) {
            for op in &b.ops {
                f(op);
                for r in op.kind.regions() {
                    go(r, f);
                }
            }
        }
        go(&self.body, f)
    }
    /// Human-readable description of a constexpr binding, for errors.
    pub fn describe_binding(&self) -> String {
        let mut parts = vec![];
        for (c, v) in self.constexprs.iter().zip(&self.bound_constexprs) {
            parts.push(format!("{}={}", c.name, v));
        }
        for (n, d) in self.dtype_params.iter().zip(&self.bound_dtypes) {
            parts.push(format!("{n}={d}"));
        }
        parts.join(", ")
    }
}

mod f64_bits {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.to_bits())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        u64::deserialize(d).map(f64::from_bits)
    }
}
