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
    /// The index into [`Kernel::values`] as a `usize`.
    pub fn idx(self) -> usize {
        self.0 as usize
    }
}

/// Source location (1-based line, 0-based column) of the user's token.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct Loc {
    /// 1-based line; 0 when unknown (ops that passes synthesize).
    pub line: u32,
    /// 0-based column of the token's first character.
    pub col: u32,
}

/// What is known about one SSA value: its type, its value when it is a constexpr, and names for
/// dumps. [`Kernel::values`] holds one per [`V`].
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct ValueInfo {
    /// The value's type (a tile, a scalar — a tile of rank 0 — or a view).
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

/// What a run-time kernel parameter is.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ParamKind {
    /// Global-memory pointer to elements of a dtype.
    Ptr(DType),
    /// Run-time scalar.
    Scalar(DType),
}

/// A run-time parameter of the kernel, in launch order; [`OpKind::Param`] reads it by index.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Param {
    /// The name in the source (the guard pass's hidden parameters are named like `len(x)`).
    pub name: String,
    /// Pointer or scalar, and of which dtype.
    pub kind: ParamKind,
    /// Whether the kernel may write through this pointer (store/atomic).
    pub written: bool,
}

/// A compile-time (`const` generic) parameter: bound to a value at specialization, referred to by
/// index from [`CExpr::Param`].
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ConstexprParam {
    /// The name in the source.
    pub name: String,
    /// `i32`, `u32`, `i64` or `bool`.
    pub dtype: DType,
}

/// Elementwise binary operators ([`OpKind::Binary`]): both operands have one dtype, and so does
/// the result. Integer semantics (wrapping, division by zero, shifts) are those of
/// `docs/semantics.md`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum BinOp {
    /// `a + b` (integers wrap).
    Add,
    /// `a - b` (integers wrap).
    Sub,
    /// `a * b` (integers wrap).
    Mul,
    /// `a / b`; integers truncate toward zero, with `x / 0 = x` and `MIN / -1 = MIN`.
    Div,
    /// `a % b` on integers, truncating (`x % 0 = 0`); not defined on floats.
    Rem,
    /// Bitwise and `&` of integers or bools (not floats).
    And,
    /// Bitwise or `|` of integers or bools (not floats).
    Or,
    /// Bitwise exclusive or `^` of integers or bools (not floats).
    Xor,
    /// `a << b` on integers; an amount below 0 or at least the bit width gives 0.
    Shl,
    /// `a >> b` on integers: arithmetic for signed dtypes, logical for unsigned ones; an amount
    /// below 0 or at least the bit width gives 0 (−1 for a negative signed `a`).
    Shr,
    /// `maximum(a, b)`; on floats, the non-NaN operand when one is NaN.
    Max,
    /// `minimum(a, b)`; on floats, the non-NaN operand when one is NaN.
    Min,
    /// Logical and `&&` of bools.
    LAnd,
    /// Logical or `||` of bools.
    LOr,
}

/// Elementwise comparisons ([`OpKind::Cmp`]) of two operands of one dtype; the result is bool.
/// Floats compare as IEEE-754 does (every comparison with NaN is false but `Ne`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum CmpOp {
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
}

/// Elementwise unary operators ([`OpKind::Unary`]); the result has the operand's type. All but
/// `Neg`, `Not` and `Abs` need a float operand ([`UnOp::float_only`]); f16/bf16/fp8 compute in f32
/// and round back.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum UnOp {
    /// `-x` (integers wrap); not defined on bool.
    Neg,
    /// `!x`: logical not of a bool, bitwise not of an integer; not defined on floats.
    Not,
    /// `eˣ`.
    Exp,
    /// `2ˣ`.
    Exp2,
    /// Natural logarithm.
    Log,
    /// Base-2 logarithm.
    Log2,
    /// Square root.
    Sqrt,
    /// Reciprocal square root, `1 / sqrt(x)`.
    Rsqrt,
    /// Absolute value (integers wrap: `abs(MIN) = MIN`).
    Abs,
    /// Logistic function `1 / (1 + e⁻ˣ)`.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// Error function.
    Erf,
    /// Sine (of radians).
    Sin,
    /// Cosine (of radians).
    Cos,
    /// Round toward −∞.
    Floor,
    /// Round toward +∞.
    Ceil,
    /// Round to the nearest integer, ties to even (`rint`, `torch.round`).
    Round,
    /// Round to tf32 (10-bit mantissa, nearest-even; non-finite values
    /// unchanged): what `dot_tf32` does to its inputs, as an elementwise
    /// op, e.g. to round operands once before a `dot_tf32_trunc`.
    RoundTf32,
}

impl UnOp {
    /// Whether the op needs a float operand (all but `Neg`, `Not` and `Abs`).
    pub fn float_only(self) -> bool {
        !matches!(self, UnOp::Neg | UnOp::Not | UnOp::Abs)
    }
    /// The DSL's name of the op (`exp`, `round_tf32`, …), as messages and the text form spell it.
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

/// Reductions along one axis ([`OpKind::Reduce`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum ReduceOp {
    /// Sum of the elements; i8/u8 sum to i32, bool is rejected.
    Sum,
    /// Largest element.
    Max,
    /// Smallest element.
    Min,
    /// Index (i32) along the axis of the largest element; the first one on ties.
    Argmax,
    /// Index (i32) along the axis of the smallest element; the first one on ties.
    Argmin,
}

/// Scans along one axis ([`OpKind::Scan`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub enum ScanOp {
    /// Inclusive prefix sum (element `i` is the sum of elements `0..=i`); i8/u8 accumulate to i32.
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

/// Memory ordering of an `atomic_add` ([`OpKind::AtomicAdd`]), at the
/// scope of the whole launch (every program), as the C++ and PTX memory
/// models define it, applied to the program as a unit: the tile-level
/// language has no threads, so "before" and "after" are the program's
/// operations in program order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub enum MemSem {
    /// Each element's read-modify-write is atomic; no ordering with the
    /// program's other memory operations.
    #[default]
    Relaxed,
    /// As `Relaxed`, and the program's memory operations after it see the
    /// writes that other programs made before their `Release` (or
    /// `AcqRel`) atomics on the same element whose results this one read.
    Acquire,
    /// As `Relaxed`, and the program's memory operations before it are
    /// visible to any program whose `Acquire` (or `AcqRel`) atomic reads
    /// this one's write.
    Release,
    /// Both `Acquire` and `Release`: the "last program to arrive" pattern
    /// (write partial results, count arrivals, the last one combines them).
    AcqRel,
}

impl MemSem {
    /// The DSL's spelling (`Relaxed`, `Acquire`, `Release`, `AcqRel`).
    pub fn name(self) -> &'static str {
        match self {
            MemSem::Relaxed => "Relaxed",
            MemSem::Acquire => "Acquire",
            MemSem::Release => "Release",
            MemSem::AcqRel => "AcqRel",
        }
    }
    /// From the DSL's spelling.
    pub fn from_name(s: &str) -> Option<MemSem> {
        [MemSem::Relaxed, MemSem::Acquire, MemSem::Release, MemSem::AcqRel].into_iter().find(|m| m.name() == s)
    }
    /// Whether the program's earlier memory operations are ordered before it.
    pub fn releases(self) -> bool {
        matches!(self, MemSem::Release | MemSem::AcqRel)
    }
    /// Whether the program's later memory operations are ordered after it.
    pub fn acquires(self) -> bool {
        matches!(self, MemSem::Acquire | MemSem::AcqRel)
    }
}

/// A literal constant.
#[derive(Clone, Copy, PartialEq, Debug, Serialize, Deserialize)]
pub enum Lit {
    /// An integer constant; the result value's dtype gives its width (the builder keeps it in
    /// range).
    Int(i64),
    /// Stored by bit pattern so that infinities and NaN survive JSON.
    Float(#[serde(with = "f64_bits")] f64),
    /// A bool constant.
    Bool(bool),
}

/// A structured region: block arguments (loop induction variable and
/// loop-carried values) and a list of ops ending, for non-top-level regions,
/// in a `Yield`.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
pub struct Block {
    /// Block arguments: a `For` body's induction variable then its carried values; empty for `If`
    /// branches and the kernel body.
    pub args: Vec<V>,
    /// The ops in program order.
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

/// One operation: what it computes, the values it defines and where in the source it came from.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Op {
    /// The operation and its operands.
    pub kind: OpKind,
    /// The values it defines: one for most ops; none for `Store`, `StoreBlock`, `Yield`,
    /// `StaticAssert` and `Print`; none or one (the old values) for `AtomicAdd`; one per carried value for `For` and per yielded value
    /// for `If`.
    pub results: Vec<V>,
    /// Source location of the user's token.
    pub loc: Loc,
}

impl Op {
    /// Every value this op and the ops of its regions read, each once, in
    /// program order (depth first) — values defined inside the regions
    /// included. What a pass needs to know before it moves or recomputes a
    /// value an op, or a loop or branch body, may read.
    pub fn deep_operands(&self) -> Vec<V> {
        fn go(op: &Op, out: &mut Vec<V>, seen: &mut std::collections::HashSet<V>) {
            for v in op.kind.operands() {
                if seen.insert(v) {
                    out.push(v);
                }
            }
            for r in op.kind.regions() {
                for o in &r.ops {
                    go(o, out, seen);
                }
            }
        }
        let (mut out, mut seen) = (vec![], std::collections::HashSet::new());
        go(self, &mut out, &mut seen);
        out
    }
}

/// The operations of the IR. Operands are [`V`]s; result types are those the
/// [`Builder`](crate::Builder) infers, described per variant. In specialized IR, the operands of
/// elementwise ops ([`OpKind::is_elementwise`]) already have the result's shape.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum OpKind {
    /// Run-time kernel argument by index.
    Param(u32),
    /// Constexpr-class scalar whose value is `cval` of the result (constexpr
    /// parameters and arithmetic on them). Becomes `Const` at specialization.
    Constexpr(CExpr),
    /// A literal; its dtype is the result's (a weak literal takes the other operand's dtype when
    /// it is used).
    Const(Lit),
    /// This program's index along grid axis 0, 1 or 2, as an i32 scalar.
    ProgramId(u8),
    /// The number of programs along grid axis 0, 1 or 2, as an i32 scalar.
    NumPrograms(u8),
    /// `[start, end)` as an i32 tile of length `end - start`.
    Arange {
        /// First value.
        start: CExpr,
        /// One past the last value; `end - start` is a power of two.
        end: CExpr,
    },
    /// Scalar broadcast to a tile of the given shape.
    Splat {
        /// The scalar.
        x: V,
        /// The result's shape.
        shape: Vec<Dim>,
    },
    /// Broadcast of size-1 dims to `shape` (same rank).
    Broadcast {
        /// The tile, of the same rank as `shape`.
        x: V,
        /// The result's shape.
        shape: Vec<Dim>,
    },
    /// A dimension of size 1 inserted at `axis`: the same elements, rank one higher.
    ExpandDims {
        /// The tile or scalar.
        x: V,
        /// Where the new dimension goes in the result, `0..=rank(x)`.
        axis: u8,
    },
    /// The elements of `x` in row-major order, read as a tile of `shape` (the same number of
    /// elements).
    Reshape {
        /// The tile.
        x: V,
        /// The result's shape.
        shape: Vec<Dim>,
    },
    /// Permuted axes: result dimension `i` is dimension `perm[i]` of `x`.
    Trans {
        /// The tile.
        x: V,
        /// A permutation of `0..rank(x)`.
        perm: Vec<u8>,
    },
    /// `op` applied elementwise to two value tiles of one dtype; the result has that dtype.
    Binary {
        /// The operator.
        op: BinOp,
        /// Left operand.
        a: V,
        /// Right operand.
        b: V,
    },
    /// Elementwise comparison of two tiles of one dtype; the result is a bool tile.
    Cmp {
        /// The comparison.
        op: CmpOp,
        /// Left operand.
        a: V,
        /// Right operand.
        b: V,
    },
    /// `op` applied elementwise; the result has the type of `x`.
    Unary {
        /// The operator.
        op: UnOp,
        /// The operand.
        x: V,
    },
    /// Fused multiply-add `a * b + c`, elementwise on float tiles of one dtype (WGSL may not
    /// fuse: `docs/semantics.md`).
    Fma {
        /// First factor.
        a: V,
        /// Second factor.
        b: V,
        /// Addend.
        c: V,
    },
    /// Elementwise `if cond { a } else { b }`; `a` and `b` have one element type (values of one
    /// dtype, or pointers to one dtype), which is the result's.
    Select {
        /// Bool tile choosing `a` where true.
        cond: V,
        /// Elements taken where `cond` is true.
        a: V,
        /// Elements taken where `cond` is false.
        b: V,
    },
    /// Elementwise conversion to dtype `to`: float → integer truncates toward zero and saturates
    /// (NaN → 0), integer → narrower integer wraps, anything → float rounds to nearest-even, and
    /// → bool is `x != 0`.
    Cast {
        /// The value tile converted.
        x: V,
        /// The result's dtype.
        to: DType,
    },
    /// The same bits read as another 32-bit dtype (f32, i32, u32).
    Bitcast {
        /// A tile of f32, i32 or u32.
        x: V,
        /// The dtype to read the bits as: f32, i32 or u32.
        to: DType,
    },
    /// Pointer tile plus integer offset tile (in elements).
    AddPtr {
        /// Pointer tile.
        ptr: V,
        /// Integer tile of the same shape: the offsets, in elements of the pointee dtype.
        offset: V,
    },
    /// Reads memory through every pointer of `ptr`; the result is a tile of the pointee dtype and
    /// of `ptr`'s shape. Masked-off lanes read nothing and give `other`, or 0 without it.
    Load {
        /// Pointer tile.
        ptr: V,
        /// Bool tile of the same shape: the lanes that read.
        mask: Option<V>,
        /// Value of the masked-off lanes (only with a mask): a tile of the pointee dtype and the
        /// same shape.
        other: Option<V>,
    },
    /// Writes `value` through every pointer of `ptr`; masked-off lanes write nothing. No result.
    Store {
        /// Pointer tile.
        ptr: V,
        /// Tile of the pointee dtype and the same shape.
        value: V,
        /// Bool tile of the same shape: the lanes that write.
        mask: Option<V>,
    },
    /// Adds `value` atomically to the element each pointer of `ptr` points at (f32, f16, bf16, i32
    /// or u32); masked-off lanes do nothing. The result (when the op has one) holds the values
    /// the elements had before the addition (0 on masked-off lanes), a tile of `value`'s dtype
    /// and shape; two lanes of one op on the same element add one after the other, in an
    /// unspecified order. `sem` orders the program's other memory operations around it.
    AtomicAdd {
        /// Pointer tile.
        ptr: V,
        /// Tile of the pointee dtype and the same shape: the amounts added.
        value: V,
        /// Bool tile of the same shape: the lanes that add.
        mask: Option<V>,
        /// Ordering with the program's other memory operations.
        sem: MemSem,
    },
    /// A view (`view<dtype, rank>`, rank 1 to 3) of a tensor in global memory: the element at
    /// coordinates `i` is at `base + Σₖ i[k]·strides[k]`, for each `i[k]` in `0..shape[k]`.
    MakeView {
        /// Scalar pointer to the tensor's element `(0, …, 0)` (a kernel argument).
        base: V,
        /// Integer scalars (i32 or i64): the extent of each dimension.
        shape: Vec<V>,
        /// Integer scalars (i32 or i64): the stride of each dimension, in elements.
        strides: Vec<V>,
    },
    /// Load a `shape` tile at element `offsets` of a view; elements outside
    /// the view read as zero.
    LoadBlock {
        /// The view.
        view: V,
        /// Integer scalars, one per dimension of the view: the coordinates of the block's first
        /// element.
        offsets: Vec<V>,
        /// The block's shape (the result's), of the view's rank.
        shape: Vec<Dim>,
    },
    /// Store a tile at `offsets`; elements outside the view are not written.
    StoreBlock {
        /// The view.
        view: V,
        /// Integer scalars, one per dimension of the view: the coordinates of the block's first
        /// element.
        offsets: Vec<V>,
        /// The tile written: the view's dtype and rank.
        value: V,
    },
    /// `op` over dimension `axis` of `x`; the result has that dimension removed (a scalar from a
    /// rank-1 tile). Its dtype is i32 for `Argmax`/`Argmin` and for sums of i8/u8, else `x`'s.
    Reduce {
        /// The reduction.
        op: ReduceOp,
        /// The tile reduced.
        x: V,
        /// The dimension reduced, `0..rank(x)`.
        axis: u8,
    },
    /// `op` along dimension `axis` of `x`; the result has `x`'s shape (dtype i32 for i8/u8
    /// inputs).
    Scan {
        /// The scan.
        op: ScanOp,
        /// The tile scanned.
        x: V,
        /// The dimension scanned along, `0..rank(x)`.
        axis: u8,
    },
    /// Matrix product plus accumulator, `a · b + acc`, of an `[M, K]` and a `[K, N]` tile of one
    /// dtype into an `[M, N]` tile of the accumulator's dtype: f32 for float inputs, i32 for i8.
    /// Every dimension is at least 16.
    Dot {
        /// Left operand, `[M, K]`.
        a: V,
        /// Right operand, `[K, N]`, of `a`'s dtype.
        b: V,
        /// Accumulator, `[M, N]` (a splat of zeros when the user passed none).
        acc: V,
        /// How f32 inputs are multiplied (ignored for other dtypes).
        precision: DotPrecision,
    },
    /// `for iv in (lo..hi).step_by(step)` with loop-carried values:
    /// `body.args = [iv, carried...]`, initial values `inits`; the body ends in
    /// a `Yield` of the next carried values; the op's results are the final
    /// carried values.
    For {
        /// First value of the induction variable (an integer scalar).
        lo: V,
        /// Exclusive bound of the induction variable (the same dtype as `lo`).
        hi: V,
        /// Increment, of the same dtype (positive; a step ≤ 0 at run time runs no iterations).
        step: V,
        /// Initial values of the carried values.
        inits: Vec<V>,
        /// The loop body.
        body: Block,
    },
    /// Both regions end in a `Yield` of values of the result types.
    If {
        /// Scalar bool condition.
        cond: V,
        /// The region run when `cond` is true.
        then_: Block,
        /// The region run when `cond` is false (just a `Yield` when the source has no `else`).
        else_: Block,
    },
    /// Ends a nested region and passes its values out: a `For` body's next carried values, an `If`
    /// branch's results.
    Yield(Vec<V>),
    /// A compile-time assertion whose condition depends on constexprs: the specializer decides it
    /// and fails with `msg` when it is false. Never in specialized IR.
    StaticAssert {
        /// Bool constexpr scalar.
        cond: V,
        /// The user's message.
        msg: String,
    },
    /// Debug print of `prefix` and the values of `args`: the interpreter prints one line per
    /// program (with its program id); the GPU backends emit nothing.
    Print {
        /// Text printed before the values.
        prefix: String,
        /// Tiles or scalars printed.
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
            Store { ptr, value, mask } | AtomicAdd { ptr, value, mask, .. } => std::iter::once(*ptr).chain(std::iter::once(*value)).chain(*mask).collect(),
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
            Store { ptr, value, mask } | AtomicAdd { ptr, value, mask, .. } => {
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

    /// The nested regions: a `For`'s body, an `If`'s two branches; none for other ops.
    pub fn regions(&self) -> Vec<&Block> {
        match self {
            OpKind::For { body, .. } => vec![body],
            OpKind::If { then_, else_, .. } => vec![then_, else_],
            _ => vec![],
        }
    }

    /// [`Self::regions`], to rewrite.
    pub fn regions_mut(&mut self) -> Vec<&mut Block> {
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

    /// Whether the op must stay even when its results are unused (memory writes, `print`,
    /// `static_assert`, control flow, `yield`): what dead-code elimination keeps.
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

/// A kernel: its parameters (run-time, constexpr, dtype), the type of every value and its body;
/// generic or specialized (see the module doc).
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub struct Kernel {
    /// The kernel's name (the Rust function's).
    pub name: String,
    /// Source file the kernel was written in (for error messages).
    pub file: String,
    /// Run-time parameters in launch order (after the guard pass, followed by its hidden ones).
    pub params: Vec<Param>,
    /// Constexpr parameters, in declaration order (the index of [`CExpr::Param`]).
    pub constexprs: Vec<ConstexprParam>,
    /// Names of dtype parameters (`<T: Float>`), by `DType::Generic` index.
    pub dtype_params: Vec<String>,
    /// Every SSA value, indexed by [`V`].
    pub values: Vec<ValueInfo>,
    /// The top-level region: no arguments, no `Yield`.
    pub body: Block,
    /// True once `specialize` produced it; see the module doc.
    pub specialized: bool,
    /// The constexpr values this kernel was specialized with, in declaration order (bools as
    /// 0/1); empty while generic.
    #[serde(default)]
    pub bound_constexprs: Vec<i64>,
    /// The dtypes bound to [`Kernel::dtype_params`], in order; empty while generic.
    #[serde(default)]
    pub bound_dtypes: Vec<DType>,
}

impl Kernel {
    /// Type of value `v`.
    pub fn ty(&self, v: V) -> &Type {
        &self.values[v.idx()].ty
    }
    /// Everything known about value `v`.
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
