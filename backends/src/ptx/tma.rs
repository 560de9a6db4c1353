//! Tensor-memory-accelerator (TMA) views: which views a Hopper tensor map
//! can describe, and the recipe the host follows to build that map.
//!
//! Takes a specialized kernel and its [axis facts](crate::plan::axis) (which
//! already include the launch's divisibility-by-16 and equal-to-1 facts of
//! the integer arguments). A view `view(base, [d0, d1], [s0, s1])` is a
//! *TMA view* when
//! - its elements are 8-, 16- or 32-bit (the operand types of `wgmma`, the
//!   only consumer [`super::async_copy`] gives TMA loads to);
//! - one stride is provably 1 (the *inner* dimension: `s1` for a row-major
//!   view, `s0` for a transposed one) and the other provably a multiple of
//!   16 bytes, the base provably 16-byte aligned (the tensor map's
//!   requirements);
//! - the extents, the outer stride and the base are *launch-invariant*: integer
//!   arithmetic (`+ - ·`, casts) on constants and scalar arguments, with
//!   the base a pointer argument plus such an offset — except for up to
//!   three base terms `p · q` (`q` launch-invariant and a multiple of 16
//!   bytes) whose `p` is a program id, `program_id(a)`, or a program id
//!   divided by or taken modulo a positive constant (`program_id(1) / H`
//!   and `program_id(1) % H`: batch and head of a `[batch, seq, heads,
//!   dim]` tensor from one grid axis; `program_id(1) / G`: the shared K/V
//!   head of `G` query heads) — each becomes one more dimension of the map
//!   (rank up to 5), of extent the number of values `p` takes over the
//!   grid, indexed by `p`. (More than one term, or a divided one, only
//!   with `PtxOptions::tma_terms`, on by default: the strided and GQA
//!   attention kernels of the conformance suite run them on the H200.)
//!
//! **Views at offsets computed in the kernel** (`dynamic`): a view whose
//! base also has one term `r · s_outer` — `r` any scalar the kernel
//! computes (a sequence's first token loaded from `cu_seqlens`, a page
//! from a block table), `s_outer` the view's own outer stride — or whose
//! outer extent is computed in the kernel, defined at the kernel's top
//! level (once per program). Its map covers the pointer's whole buffer
//! from the launch-invariant part of the base: the host finds the map's
//! outer extent from the buffer's length ([`TmaView::resolve`]), the
//! kernel adds `r` to the outer coordinate of every copy, and the view's
//! own bounds — rows before its start or past its extent, which the map
//! does not know — are applied in the kernel: the issuing thread records
//! the slot's valid rows next to its mbarrier, and the readers zero the
//! other rows after the copy lands (only for boxes that cross the view's
//! edge: `emit`'s rings). The view is guarded in the kernel like any
//! other (the `guard` pass: a view outside its buffer is empty), not on
//! the host. With the producer warpgroup, its stream computes the view
//! (`warp_spec`); not with multicast (two programs, two offsets).
//!
//! Produces a [`TmaView`] per such view: the host evaluates its [`HExpr`]s
//! on the launch's arguments ([`TmaView::resolve`]) and encodes the tensor
//! map; [`TmaView::resolve`] returns `None` where the run-time values do
//! not meet the map's limits (a zero or > 2³¹ extent, a stride that is not
//! a positive multiple of 16 bytes below 2⁴⁰, a misaligned base), and the
//! runtime then compiles the kernel without TMA.
//!
//! Guarantees: the map addresses exactly the elements the view addresses
//! (element `(i, j)` at `base + i·s0 + j`, or `base + i + j·s1` for a
//! transposed view; the map's innermost dimension is the unit-stride
//! one), and its out-of-bounds box
//! elements read as zero — `load_block`'s semantics, with the view's
//! extents as the map's. Why a recipe instead of device-side map
//! creation: the map is an opaque 128-byte object only the driver can
//! build; a kernel argument built per launch costs one host call.

use crate::plan::axis::Info;
use ferrotile_ir::*;
use std::collections::HashMap;

/// A launch-invariant integer: evaluated on the host from the arguments.
#[derive(Clone, Debug, PartialEq)]
pub enum HExpr {
    /// Integer scalar argument `i` (sign-extended).
    Arg(u32),
    /// A constant.
    Const(i64),
    /// Sum (wrapping).
    Add(Box<HExpr>, Box<HExpr>),
    /// Difference (wrapping).
    Sub(Box<HExpr>, Box<HExpr>),
    /// Product (wrapping).
    Mul(Box<HExpr>, Box<HExpr>),
    /// The value truncated to 32 bits and sign-extended (i32 arithmetic).
    Wrap32(Box<HExpr>),
}

impl HExpr {
    /// The value, for integer arguments `args` (by parameter index;
    /// non-integer parameters are ignored).
    pub fn eval(&self, args: &[i64]) -> i64 {
        match self {
            HExpr::Arg(i) => args.get(*i as usize).copied().unwrap_or(0),
            HExpr::Const(c) => *c,
            HExpr::Add(a, b) => a.eval(args).wrapping_add(b.eval(args)),
            HExpr::Sub(a, b) => a.eval(args).wrapping_sub(b.eval(args)),
            HExpr::Mul(a, b) => a.eval(args).wrapping_mul(b.eval(args)),
            HExpr::Wrap32(a) => a.eval(args) as i32 as i64,
        }
    }
}

/// A view a tensor map describes (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct TmaView {
    /// The pointer argument the base starts from.
    pub param: u32,
    /// Element dtype of the view.
    pub dtype: DType,
    /// Element offset of the base from the pointer argument.
    pub offset: HExpr,
    /// Base terms `p · stride` (elements), `p` a function of one program
    /// id: the map's dimensions after the first two, in order.
    pub batch: Vec<BatchTerm>,
    /// Extents `[d0, d1]`, in the view's order.
    pub dims: [HExpr; 2],
    /// The stride of the outer (not unit-stride) dimension, in elements.
    pub stride: HExpr,
    /// The unit-stride dimension: 1 for a row-major view, 0 for a
    /// transposed one (`view(b, [k, n], [1, k])`: a column-major B).
    pub inner: usize,
    /// A view at an offset or of an outer extent computed in the kernel
    /// (module doc): the map spans the buffer, the kernel applies the
    /// view's bounds. `dims[1 - inner]` is then unused.
    pub dynamic: bool,
    /// The base's term `row · stride` of a `dynamic` view: the scalar the
    /// kernel adds to the outer coordinate.
    pub row: Option<V>,
}

/// One base term of a [`TmaView`]: `p · stride` elements, `p` =
/// `program_id(axis)` divided by `div` (1: not divided), then modulo `modulo`
/// (0: none).
#[derive(Clone, Debug, PartialEq)]
pub struct BatchTerm {
    /// Grid axis of the program id.
    pub axis: u8,
    /// Divisor of the program id (1: not divided).
    pub div: u32,
    /// Modulus applied after the division (0: none).
    pub modulo: u32,
    /// Elements the base advances per unit of `p`.
    pub stride: HExpr,
}

impl BatchTerm {
    /// How many values `p` takes over a grid of `n` programs along `axis`.
    pub fn extent(&self, n: u32) -> u32 {
        let q = n.div_ceil(self.div.max(1));
        if self.modulo > 0 {
            q.min(self.modulo)
        } else {
            q
        }
    }
}

pub use crate::abi::TensorMapArgs;

impl TmaView {
    /// Rank of the tensor map: the view's two dimensions plus one per batch term.
    pub fn rank(&self) -> usize {
        2 + self.batch.len()
    }

    /// The map for this launch: `args` are the integer arguments (by
    /// parameter index), `ptr` the pointer argument's address and `len`
    /// its buffer's length in elements, `grid` the launch grid. `None`
    /// where the values do not fit a tensor map. A `dynamic` view's map
    /// has as many rows as fit in the buffer after its base (at least one).
    pub fn resolve(&self, args: &[i64], ptr: u64, len: u64, grid: [u32; 3]) -> Option<TensorMapArgs> {
        let es = self.dtype.size_bytes() as i64;
        let offset = self.offset.eval(args);
        let address = (ptr as i64).checked_add(offset.checked_mul(es)?)? as u64;
        let ext = |v: i64| (1..=i32::MAX as i64).contains(&v).then_some(v as u64);
        let stride = |v: i64| {
            let b = v.checked_mul(es)?;
            (b > 0 && b % 16 == 0 && b < 1 << 40).then_some(b as u64)
        };
        let inner = ext(self.dims[self.inner].eval(args))?;
        let outer = if self.dynamic {
            // rows r with offset + (r − 1)·s + (inner − 1) + the batch
            // terms' span < len
            let s = self.stride.eval(args);
            let mut room = (len as i64).checked_sub(offset)?.checked_sub(inner as i64)?;
            for t in &self.batch {
                room = room.checked_sub((t.extent(grid[t.axis as usize]) as i64 - 1).checked_mul(t.stride.eval(args))?)?;
            }
            if s <= 0 || room < 0 || s < inner as i64 {
                return None;
            }
            ext((room / s + 1).min(i32::MAX as i64))?
        } else {
            ext(self.dims[1 - self.inner].eval(args))?
        };
        let mut dims = vec![inner, outer];
        let mut strides = vec![stride(self.stride.eval(args))?];
        for t in &self.batch {
            let n = t.extent(grid[t.axis as usize]);
            // (one value: its coordinate is always 0 and any valid stride
            // will do, `q` may be 0: the span of the dimensions before)
            let span = (*dims.last()?).checked_mul(*strides.last()?).filter(|b| *b < 1 << 40);
            dims.push(ext(n as i64)?);
            strides.push(if n == 1 { span? } else { stride(t.stride.eval(args))? });
        }
        address.is_multiple_of(16).then_some(TensorMapArgs { address, dims, strides })
    }
}

struct Defs<'k> {
    def: HashMap<V, &'k OpKind>,
}

impl<'k> Defs<'k> {
    fn new(k: &'k Kernel) -> Self {
        let mut def = HashMap::new();
        fn walk<'k>(b: &'k Block, def: &mut HashMap<V, &'k OpKind>) {
            for op in &b.ops {
                for r in &op.results {
                    def.insert(*r, &op.kind);
                }
                for blk in op.kind.regions() {
                    walk(blk, def);
                }
            }
        }
        walk(&k.body, &mut def);
        Defs { def }
    }

    /// `v` as a launch-invariant integer expression.
    fn hexpr(&self, k: &Kernel, v: V) -> Option<HExpr> {
        let d = k.ty(v).dtype()?;
        if !matches!(d, DType::I32 | DType::I64) || !k.ty(v).is_scalar() {
            return None;
        }
        let wrap = |e: HExpr| if d == DType::I32 { HExpr::Wrap32(Box::new(e)) } else { e };
        match self.def.get(&v)? {
            OpKind::Param(i) => Some(HExpr::Arg(*i)),
            OpKind::Const(Lit::Int(c)) => Some(wrap(HExpr::Const(*c))),
            OpKind::Cast { x, .. } => {
                let xd = k.ty(*x).dtype()?;
                matches!(xd, DType::I32 | DType::I64).then_some(())?;
                Some(wrap(self.hexpr(k, *x)?))
            }
            OpKind::Binary { op, a, b } => {
                let (a, b) = (Box::new(self.hexpr(k, *a)?), Box::new(self.hexpr(k, *b)?));
                Some(wrap(match op {
                    BinOp::Add => HExpr::Add(a, b),
                    BinOp::Sub => HExpr::Sub(a, b),
                    BinOp::Mul => HExpr::Mul(a, b),
                    _ => return None,
                }))
            }
            _ => None,
        }
    }

    /// `program_id(a)`, divided by and then modulo positive constants
    /// (each at most once, in that order), possibly widened to i64:
    /// (axis, div, modulo).
    fn program_id(&self, k: &Kernel, v: V) -> Option<(u8, u32, u32)> {
        let pos = |x: V| match self.def.get(&x) {
            Some(OpKind::Const(Lit::Int(c))) if *c > 0 && *c <= u32::MAX as i64 => Some(*c as u32),
            _ => None,
        };
        match self.def.get(&v)? {
            OpKind::ProgramId(a) => Some((*a, 1, 0)),
            OpKind::Cast { x, to: DType::I64 } if k.ty(*x).dtype() == Some(DType::I32) => self.program_id(k, *x),
            OpKind::Binary { op: BinOp::Div, a, b } => match self.program_id(k, *a)? {
                (ax, 1, 0) => Some((ax, pos(*b)?, 0)),
                _ => None,
            },
            OpKind::Binary { op: BinOp::Rem, a, b } => match self.program_id(k, *a)? {
                (ax, d, 0) => Some((ax, d, pos(*b)?)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The terms of an integer offset: launch-invariant ones summed, plus
    /// up to three i64 `p · q` with `p` a function of a program id
    /// ([`Defs::program_id`]), plus (where `dev` is given) at most one i64
    /// `r · q` with `r` any other scalar (`dev`: `(r, q)`); `q`
    /// launch-invariant.
    fn offset_terms(&self, k: &Kernel, v: V, inv: &mut Vec<HExpr>, batch: &mut Vec<((u8, u32, u32), V)>, dev: &mut Option<Option<(V, V)>>) -> Option<()> {
        if let Some(e) = self.hexpr(k, v) {
            inv.push(e);
            return Some(());
        }
        match self.def.get(&v)? {
            OpKind::Binary { op: BinOp::Add, a, b } if k.ty(v).dtype() == Some(DType::I64) => {
                self.offset_terms(k, *a, inv, batch, dev)?;
                self.offset_terms(k, *b, inv, batch, dev)
            }
            OpKind::Binary { op: BinOp::Mul, a, b } if k.ty(v).dtype() == Some(DType::I64) => {
                match (self.program_id(k, *a), self.program_id(k, *b)) {
                    (Some(p), _) if batch.len() < 3 && self.hexpr(k, *b).is_some() => batch.push((p, *b)),
                    (_, Some(p)) if batch.len() < 3 && self.hexpr(k, *a).is_some() => batch.push((p, *a)),
                    _ => {
                        // (a scalar the kernel computes, times a launch-invariant stride)
                        let slot = dev.as_mut().filter(|d| d.is_none())?;
                        let (r, q) = if self.hexpr(k, *b).is_some() { (*a, *b) } else { (*b, *a) };
                        self.hexpr(k, q)?;
                        (k.ty(r).is_scalar() && matches!(k.ty(r).dtype(), Some(DType::I32 | DType::I64))).then_some(())?;
                        *slot = Some((r, q));
                    }
                }
                Some(())
            }
            _ => None,
        }
    }

    /// The base pointer as (pointer argument, invariant offset terms, batch
    /// terms, and with `dev` a term computed in the kernel).
    fn base(&self, k: &Kernel, v: V, inv: &mut Vec<HExpr>, batch: &mut Vec<((u8, u32, u32), V)>, dev: &mut Option<Option<(V, V)>>) -> Option<u32> {
        match self.def.get(&v)? {
            OpKind::Param(i) => matches!(k.params.get(*i as usize)?.kind, ParamKind::Ptr(_)).then_some(*i),
            OpKind::AddPtr { ptr, offset } if k.ty(*offset).is_scalar() => {
                let p = self.base(k, *ptr, inv, batch, dev)?;
                self.offset_terms(k, *offset, inv, batch, dev)?;
                Some(p)
            }
            _ => None,
        }
    }
}

/// The TMA views of `k` (see the module doc), by view value. `general`:
/// bases with up to three program-id terms, divided or modulo a constant;
/// otherwise at most one plain `program_id(a) · q` (the form of
/// `PtxOptions::tma_terms = false`). `dynamic`: views at offsets or of
/// outer extents computed in the kernel too.
pub fn views(k: &Kernel, axis: &HashMap<V, Info>, general: bool, dynamic: bool) -> HashMap<V, TmaView> {
    let defs = Defs::new(k);
    // (views defined once per program: a dynamic view's bounds are read
    // where its copies are issued, long after)
    let top: std::collections::HashSet<V> =
        k.body.ops.iter().filter(|op| matches!(op.kind, OpKind::MakeView { .. })).flat_map(|op| op.results.iter().copied()).collect();
    let mut out = HashMap::new();
    for (&v, kind) in &defs.def {
        let OpKind::MakeView { base, shape, strides } = kind else { continue };
        if shape.len() != 2 {
            continue;
        }
        let Some(dtype) = k.ty(*base).elem().map(|e| e.dtype()) else { continue };
        let es = dtype.size_bytes() as u64;
        if !matches!(dtype, DType::F16 | DType::BF16 | DType::F32 | DType::I8 | DType::F8E4M3 | DType::F8E5M2) {
            continue;
        }
        let info = |x: V| axis.get(&x).copied();
        let unit = |s: V| info(s).is_some_and(|i| i.unit) || defs.hexpr(k, s) == Some(HExpr::Const(1));
        let aligned = |x: V, bytes: u64| info(x).is_some_and(|i| (i.div * bytes).is_multiple_of(16));
        // (row-major first: a view with both strides 1 is one)
        let Some(inner) = [1, 0].into_iter().find(|&d| unit(strides[d])) else { continue };
        if !aligned(strides[1 - inner], es) || !aligned(*base, 1) {
            continue;
        }
        let (mut inv, mut terms) = (vec![], vec![]);
        let mut dev = (dynamic && top.contains(&v)).then_some(None);
        let Some(param) = defs.base(k, *base, &mut inv, &mut terms, &mut dev) else { continue };
        if !terms.iter().all(|(_, q)| aligned(*q, es)) || (!general && (terms.len() > 1 || terms.iter().any(|((_, d, m), _)| *d != 1 || *m != 0))) {
            continue;
        }
        let batch: Vec<BatchTerm> = terms.iter().map(|&((axis, div, modulo), q)| BatchTerm { axis, div, modulo, stride: defs.hexpr(k, q).unwrap() }).collect();
        let (Some(di), Some(so)) = (defs.hexpr(k, shape[inner]), defs.hexpr(k, strides[1 - inner])) else { continue };
        let outer = defs.hexpr(k, shape[1 - inner]);
        let row = dev.flatten();
        // (the kernel's term must step along the view's own rows)
        if row.is_some_and(|(_, q)| defs.hexpr(k, q) != Some(so.clone())) {
            continue;
        }
        let is_dynamic = row.is_some() || outer.is_none();
        if is_dynamic && !(dynamic && top.contains(&v)) {
            continue;
        }
        let mut dims = [di.clone(), di];
        dims[1 - inner] = outer.unwrap_or(HExpr::Const(0));
        let offset = inv.into_iter().reduce(|a, b| HExpr::Add(Box::new(a), Box::new(b))).unwrap_or(HExpr::Const(0));
        out.insert(v, TmaView { param, dtype, offset, batch, dims, stride: so, inner, dynamic: is_dynamic, row: row.map(|(r, _)| r) });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(batch: bool) -> TmaView {
        TmaView {
            param: 0,
            dtype: DType::BF16,
            offset: HExpr::Const(8),
            batch: if batch { vec![BatchTerm { axis: 1, div: 1, modulo: 0, stride: HExpr::Arg(3) }] } else { vec![] },
            dims: [HExpr::Arg(1), HExpr::Wrap32(Box::new(HExpr::Arg(2)))],
            stride: HExpr::Arg(2),
            inner: 1,
            dynamic: false,
            row: None,
        }
    }

    #[test]
    fn divided_and_modulo_terms_take_their_own_dimensions() {
        // [batch, seq, heads, dim] from one grid axis of batch·heads
        // programs: p / 4 (batch) and p % 4 (head); 8 programs
        let t = |div, modulo, stride| BatchTerm { axis: 1, div, modulo, stride: HExpr::Const(stride) };
        assert_eq!(t(4, 0, 0).extent(8), 2);
        assert_eq!(t(1, 4, 0).extent(8), 4);
        assert_eq!(t(1, 4, 0).extent(3), 3, "fewer programs than the modulus");
        assert_eq!(t(3, 0, 0).extent(8), 3, "rounded up");
        let v = TmaView { batch: vec![t(4, 0, 64 * 100 * 4), t(1, 4, 64)], ..view(false) };
        let m = v.resolve(&[0, 100, 256, 0], 0x1000, 1 << 40, [1, 8, 1]).unwrap();
        assert_eq!(m.dims, vec![256, 100, 2, 4]);
        assert_eq!(m.strides, vec![512, 51200, 128]);
        // one value along a term: any valid stride (the span before it)
        let m = v.resolve(&[0, 100, 256, 0], 0x1000, 1 << 40, [1, 4, 1]).unwrap();
        assert_eq!((m.dims[2], m.strides[1]), (1, 512 * 100));
    }

    #[test]
    fn resolve_checks_the_tensor_map_limits() {
        let v = view(false);
        let m = v.resolve(&[0, 100, 64, 0], 0x1000, 1 << 40, [1, 1, 1]).unwrap();
        assert_eq!(m, TensorMapArgs { address: 0x1010, dims: vec![64, 100], strides: vec![128] });
        assert!(v.resolve(&[0, 0, 64, 0], 0x1000, 1 << 40, [1, 1, 1]).is_none(), "zero extent");
        assert!(v.resolve(&[0, 100, 60, 0], 0x1000, 1 << 40, [1, 1, 1]).is_none(), "row stride not a multiple of 16 bytes");
        assert!(v.resolve(&[0, 100, 64, 0], 0x1008, 1 << 40, [1, 1, 1]).is_none(), "misaligned base");
        assert!(v.resolve(&[0, 1 << 31, 64, 0], 0x1000, 1 << 40, [1, 1, 1]).is_none(), "extent beyond 2^31 - 1");
        let b = view(true);
        let m = b.resolve(&[0, 100, 64, 6400], 0x1000, 1 << 40, [4, 3, 1]).unwrap();
        assert_eq!((m.dims[2], m.strides[1]), (3, 12800), "batch: extent = grid, stride q");
        let one = b.resolve(&[0, 100, 64, 0], 0x1000, 1 << 40, [4, 1, 1]).unwrap();
        assert_eq!((one.dims[2], one.strides[1]), (1, 128 * 100), "one program along the axis: q = 0 is fine");
        assert!(b.resolve(&[0, 100, 64, 0], 0x1000, 1 << 40, [4, 2, 1]).is_none(), "q = 0 with two programs");
        let t = TmaView { inner: 0, dtype: DType::F32, ..view(false) };
        let m = t.resolve(&[0, 100, 64, 0], 0x1000, 1 << 40, [1, 1, 1]).unwrap();
        assert_eq!(m, TensorMapArgs { address: 0x1020, dims: vec![100, 64], strides: vec![256] }, "transposed: d0 innermost, 4-byte elements");
        assert_eq!(HExpr::Wrap32(Box::new(HExpr::Const(1 << 32 | 5))).eval(&[]), 5);
    }
}
