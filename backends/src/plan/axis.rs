//! Axis info: what is provable about integer and pointer tiles along each
//! dimension, and the value range of integers — so that loads and stores
//! can be vectorized, repeated addresses loaded once, and small integers
//! converted to floats without the slow conversion unit.
//!
//! Takes a specialized kernel and, per integer scalar argument, a power of
//! two (1 to 16, [`arg_div`]) dividing its run-time value and whether it is
//! exactly 1 (the launch specializes on both: a unit stride is what makes a
//! strided operand contiguous, and a row stride of 1000 bf16 elements —
//! divisible by 8, not 16 — still starts every row on a 16-byte boundary,
//! which Triton's divisible-by-16-or-not would miss). Returns, per value and per dimension
//! ([`Facts::dims`]; a scalar has one entry, true along every dimension):
//!
//! - `contig`: length of runs of consecutive values (a power of two),
//! - `div`: a power of two dividing the first value of every run (elements
//!   for integers, bytes for pointers),
//! - `constancy`: length of runs of equal values,
//! - `unit`: every element is 1 (multiplying by it keeps the other
//!   factor's facts);
//!
//! and, for integers, [`Facts::range`]: bounds every element lies within
//! (no wrap-around: a bound that could overflow the dtype is dropped).
//!
//! Runs are aligned: a run of length `c` along a dimension starts at an
//! index that is a multiple of `c` — aranges start runs at index 0, and
//! every rule keeps that. All facts are conservative: 1 (or no bound)
//! means "nothing known". Pointer arguments are assumed 16-byte aligned:
//! runtime buffers are whole allocations (≥ 256-byte aligned).
//!
//! Why per dimension: a GPTQ-style weight load `w + (k / 8)[:, None] · n +
//! cols[None, :]` repeats each address over 8 rows — a run along the
//! *first* dimension, which the layout plan then keeps inside one thread
//! (`ptx::assign`) so that the load is issued once per run. Why ranges:
//! `(word >> s) & 15` lies in `[0, 15]`, so its conversion to `f32` is an
//! OR into the mantissa of 2²³ and one subtraction, not an `I2F` (a
//! quarter-rate instruction on sm_90).

use ferrotile_ir::*;
use std::collections::HashMap;

/// Facts along one dimension (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    /// Length of the runs of consecutive values.
    pub contig: u64,
    /// A power of two dividing the first value of every run (elements for integers, bytes for
    /// pointers).
    pub div: u64,
    /// Length of the runs of equal values.
    pub constancy: u64,
    /// Every element is 1.
    pub unit: bool,
}

/// Everything known about one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    /// One entry per dimension (one for a scalar).
    pub dims: Vec<Info>,
    /// Inclusive bounds of every element (integers only).
    pub range: (Option<i64>, Option<i64>),
}

impl Facts {
    /// The facts along dimension `d` (a scalar's along every one).
    pub fn dim(&self, d: usize) -> Info {
        self.dims[d.min(self.dims.len() - 1)]
    }
    /// The facts along the last dimension (what vectorization reads).
    pub fn last(&self) -> Info {
        *self.dims.last().unwrap()
    }
    fn unknown(rank: usize) -> Facts {
        Facts { dims: vec![Info::unknown(); rank.max(1)], range: (None, None) }
    }
}

const BIG: u64 = 1 << 30;

impl Info {
    /// Elements of `es` bytes one access can move at once along this
    /// dimension of a pointer tile: 16 bytes, within the runs of
    /// consecutive addresses, the alignment of their first address and the
    /// constancy `mask_constancy` of the mask over them; a power of two, at
    /// least 1. (The PTX backend's loads and stores, and the thread runs of
    /// its canonical layouts, are sized from it.)
    pub fn access_width(&self, es: u64, mask_constancy: u64) -> u64 {
        let v = (16 / es).min(self.contig).min(self.div / es).min(mask_constancy).max(1);
        1 << (63 - v.leading_zeros())
    }

    fn unknown() -> Info {
        Info::new(1, 1, 1)
    }
    fn scalar(div: u64) -> Info {
        Info { contig: 1, div, constancy: BIG, unit: false }
    }
    fn new(contig: u64, div: u64, constancy: u64) -> Info {
        Info { contig, div, constancy, unit: false }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    // all facts are powers of two
    a.min(b)
}

fn pow2_div(v: i64) -> u64 {
    if v == 0 {
        BIG
    } else {
        (1u64 << v.unsigned_abs().trailing_zeros()).min(BIG)
    }
}

/// The fact the launch records about an integer argument `v`: the largest
/// power of two up to 16 dividing it (16 for 0). Five classes, so a kernel
/// is compiled at most five times per integer argument.
pub fn arg_div(v: i64) -> u32 {
    if v == 0 {
        16
    } else {
        1 << v.unsigned_abs().trailing_zeros().min(4)
    }
}

/// The facts of the last dimension of every value (what vectorization
/// needs).
pub fn analyze(k: &Kernel, arg_div: &[u32], arg_one: &[bool]) -> HashMap<V, Info> {
    analyze_all(k, arg_div, arg_one).into_iter().map(|(v, f)| (v, f.last())).collect()
}

/// Every dimension's facts and the ranges.
pub fn analyze_all(k: &Kernel, arg_div: &[u32], arg_one: &[bool]) -> HashMap<V, Facts> {
    let mut m = HashMap::new();
    block(k, &k.body, arg_div, arg_one, &mut m);
    m
}

/// A divisor of every element (`div` only holds for the first element of
/// each contiguous run: the others are `first + t`).
fn every(i: Info) -> u64 {
    if i.contig > 1 {
        1
    } else {
        i.div
    }
}

/// A divisor of every element of the whole tile.
fn every_all(f: &Facts) -> u64 {
    f.dims.iter().map(|&i| every(i)).max().unwrap_or(1)
}

fn shape(k: &Kernel, v: V) -> Vec<u64> {
    k.ty(v).shape().iter().map(|d| d.known().unwrap_or(1).max(1) as u64).collect()
}

/// The value of a constant integer scalar, or of a splat / broadcast of
/// one; `def` gives the op defining a value (None: a block argument).
pub fn int_constant<'a>(def: &dyn Fn(V) -> Option<&'a OpKind>, v: V) -> Option<i64> {
    match def(v)? {
        OpKind::Const(Lit::Int(c)) => Some(*c),
        OpKind::Splat { x, .. } | OpKind::Broadcast { x, .. } | OpKind::ExpandDims { x, .. } => int_constant(def, *x),
        _ => None,
    }
}

fn constant(defs: &HashMap<V, &OpKind>, v: V) -> Option<i64> {
    int_constant(&|u| defs.get(&u).copied(), v)
}

/// Bounds of a dtype's values (None for non-integers).
fn dtype_range(d: DType) -> Option<(i128, i128)> {
    if !d.is_int() || d == DType::Bool {
        return if d == DType::Bool { Some((0, 1)) } else { None };
    }
    let b = d.bits();
    Some(if d.is_signed() { (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1) } else { (0, (1i128 << b) - 1) })
}

/// `(lo, hi)` kept only where it fits `d` (an op that could wrap says
/// nothing).
fn fit(d: Option<DType>, lo: Option<i128>, hi: Option<i128>) -> (Option<i64>, Option<i64>) {
    let Some((a, b)) = d.and_then(dtype_range) else { return (None, None) };
    match (lo, hi) {
        (Some(l), Some(h)) if l >= a && h <= b => (Some(l as i64), Some(h as i64)),
        // one bound alone does not rule out a wrap on the other side
        _ => (None, None),
    }
}

fn block(k: &Kernel, b: &Block, adiv: &[u32], a1: &[bool], m: &mut HashMap<V, Facts>) {
    let mut defs: HashMap<V, &OpKind> = HashMap::new();
    k.walk(&mut |op| {
        if let Some(r) = op.results.first() {
            defs.insert(*r, &op.kind);
        }
    });
    block_in(k, b, adiv, a1, m, &defs);
}

fn block_in(k: &Kernel, b: &Block, adiv: &[u32], a1: &[bool], m: &mut HashMap<V, Facts>, defs: &HashMap<V, &OpKind>) {
    for op in &b.ops {
        let get = |m: &HashMap<V, Facts>, v: V| m.get(&v).cloned().unwrap_or_else(|| Facts::unknown(k.ty(v).rank()));
        let Some(&res) = op.results.first() else {
            if let OpKind::For { .. } | OpKind::If { .. } = &op.kind {
                nested(k, op, adiv, a1, m, defs);
            }
            continue;
        };
        let rank = k.ty(res).rank();
        let rdt = k.ty(res).elem().and_then(|e| match e {
            Elem::Val(d) => Some(d),
            _ => None,
        });
        let r128 = |x: &Facts| (x.range.0.map(i128::from), x.range.1.map(i128::from));
        // per dimension, from the operands' facts along it
        let per = |f: &dyn Fn(usize) -> Info| -> Vec<Info> { (0..rank.max(1)).map(f).collect() };
        let facts: Option<Facts> = match &op.kind {
            OpKind::Param(i) => {
                let i = *i as usize;
                match k.params[i].kind {
                    ParamKind::Ptr(_) => Some(Facts { dims: vec![Info::scalar(16)], range: (None, None) }),
                    ParamKind::Scalar(d) if d.is_int() => {
                        let mut info = Info::scalar(adiv.get(i).copied().unwrap_or(1).clamp(1, 16) as u64);
                        info.unit = a1.get(i).copied().unwrap_or(false);
                        Some(Facts { dims: vec![info], range: (None, None) })
                    }
                    _ => None,
                }
            }
            OpKind::Const(Lit::Int(v)) => Some(Facts { dims: vec![Info { unit: *v == 1, ..Info::scalar(pow2_div(*v)) }], range: (Some(*v), Some(*v)) }),
            OpKind::Const(Lit::Bool(v)) => Some(Facts { dims: vec![Info::scalar(1)], range: (Some(*v as i64), Some(*v as i64)) }),
            OpKind::ProgramId(_) => Some(Facts { dims: vec![Info::scalar(1)], range: fit(rdt, Some(0), Some(i32::MAX as i128)) }),
            OpKind::NumPrograms(_) => Some(Facts { dims: vec![Info::scalar(1)], range: fit(rdt, Some(1), Some(i32::MAX as i128)) }),
            OpKind::Arange { start, end } => {
                let s = start.known().unwrap_or(1);
                let e = end.known().unwrap_or(s + 1);
                let n = (e - s).max(1) as u64;
                Some(Facts { dims: vec![Info::new(n, pow2_div(s), 1)], range: (start.known(), end.known().map(|e| e - 1)) })
            }
            OpKind::Splat { x, .. } => {
                let i = get(m, *x);
                let s = shape(k, res);
                let d0 = i.dim(0);
                Some(Facts { dims: per(&|d| Info { unit: d0.unit, ..Info::new(1, d0.div, s[d]) }), range: i.range })
            }
            OpKind::Broadcast { x, .. } => {
                let i = get(m, *x);
                let (src, dst) = (shape(k, *x), shape(k, res));
                Some(Facts {
                    dims: per(&|d| {
                        let xd = i.dim(d);
                        if src[d] == 1 && dst[d] > 1 {
                            Info { unit: xd.unit, ..Info::new(1, every(xd), dst[d]) }
                        } else {
                            xd
                        }
                    }),
                    range: i.range,
                })
            }
            OpKind::ExpandDims { x, axis } => {
                let i = get(m, *x);
                let a = *axis as usize;
                let xr = k.ty(*x).rank();
                let unit = i.dims.iter().all(|d| d.unit);
                let new = Info { unit, ..Info::new(1, every_all(&i), 1) };
                let mut dims = if xr == 0 { vec![] } else { i.dims.clone() };
                dims.insert(a.min(dims.len()), new);
                Some(Facts { dims, range: i.range })
            }
            OpKind::Trans { x, perm } => {
                let i = get(m, *x);
                Some(Facts { dims: perm.iter().map(|&p| i.dim(p as usize)).collect(), range: i.range })
            }
            OpKind::Reshape { x, .. } => Some(Facts { range: get(m, *x).range, ..Facts::unknown(rank) }),
            OpKind::Cast { x, to } if to.is_int() && k.ty(*x).elem().is_some_and(|e| matches!(e, Elem::Val(d) if d.is_int())) => {
                let i = get(m, *x);
                let range = fit(Some(*to), i.range.0.map(i128::from), i.range.1.map(i128::from));
                let from_bits = k.ty(*x).elem().map_or(64, |e| e.dtype().bits());
                // a narrowing cast that may wrap keeps equal values equal and
                // divisors up to its width, not runs of consecutive values
                let wraps = to.bits() < from_bits && range.0.is_none();
                let dims = if wraps { i.dims.iter().map(|d| Info { contig: 1, div: every(*d).min(1 << to.bits().min(30)), ..*d }).collect() } else { i.dims };
                Some(Facts { dims, range })
            }
            OpKind::Binary { op: o, a, b } => {
                let (x, y) = (get(m, *a), get(m, *b));
                let c = constant(defs, *b);
                let (xl, xh) = r128(&x);
                let (yl, yh) = r128(&y);
                let nonneg = xl.is_some_and(|l| l >= 0);
                let dims = per(&|d| {
                    let (x, y) = (x.dim(d), y.dim(d));
                    // (a result without contiguous runs needs divisors of every
                    // element: `every`)
                    let sum = |contig: u64| if contig > 1 { gcd(x.div, y.div) } else { gcd(every(x), every(y)) };
                    // quotient by a power of two `q` (floor, or truncation of
                    // non-negative values): an aligned contiguous run of
                    // length C with its first value divisible by min(C, q)
                    // gives runs of min(C, q) equal quotients
                    let quotient = |q: u64| -> Info {
                        let run = gcd(x.contig, q);
                        let constancy = if x.contig > 1 && x.div.is_multiple_of(run) { x.constancy.max(run) } else { x.constancy };
                        let div = if x.contig > 1 { 1 } else { (x.div / q).max(1) };
                        Info::new(1, div, constancy)
                    };
                    let pow2 = |c: Option<i64>| c.filter(|&c| c > 0 && (c as u64).is_power_of_two()).map(|c| c as u64);
                    match o {
                        BinOp::Mul if y.unit => x,
                        BinOp::Mul if x.unit => y,
                        BinOp::Add => {
                            let c = gcd(x.contig, y.constancy).max(gcd(y.contig, x.constancy));
                            Info::new(c, sum(c), gcd(x.constancy, y.constancy))
                        }
                        BinOp::Sub => {
                            let c = gcd(x.contig, y.constancy);
                            Info::new(c, sum(c), gcd(x.constancy, y.constancy))
                        }
                        BinOp::Mul => Info::new(1, (every(x).saturating_mul(every(y))).min(BIG), gcd(x.constancy, y.constancy)),
                        BinOp::Div if nonneg && pow2(c).is_some() => quotient(pow2(c).unwrap()),
                        BinOp::Shr if c.is_some_and(|s| (0..31).contains(&s)) => quotient(1 << c.unwrap()),
                        BinOp::Rem if nonneg && pow2(c).is_some() => {
                            let q = pow2(c).unwrap();
                            let run = gcd(x.contig, q);
                            if x.contig > 1 && x.div.is_multiple_of(run) {
                                // runs restart at a multiple of q or continue
                                Info::new(run, (x.div % q).max(1).min(pow2_div((x.div % q) as i64)), x.constancy)
                            } else {
                                Info::new(1, 1, x.constancy)
                            }
                        }
                        // each element is one of the operands': divisible by both
                        // operands' divisors' gcd (e.g. a clamped loop bound)
                        BinOp::Max | BinOp::Min => Info::new(1, gcd(every(x), every(y)), gcd(x.constancy, y.constancy)),
                        BinOp::And | BinOp::Or | BinOp::LAnd | BinOp::LOr => Info::new(1, 1, gcd(x.constancy, y.constancy)),
                        _ => Info::new(1, 1, gcd(x.constancy, y.constancy)),
                    }
                });
                let range = match o {
                    BinOp::Add => fit(rdt, xl.zip(yl).map(|(a, b)| a + b), xh.zip(yh).map(|(a, b)| a + b)),
                    BinOp::Sub => fit(rdt, xl.zip(yh).map(|(a, b)| a - b), xh.zip(yl).map(|(a, b)| a - b)),
                    BinOp::Mul => match (xl, xh, yl, yh) {
                        (Some(a), Some(b), Some(c), Some(d)) => {
                            let p = [a * c, a * d, b * c, b * d];
                            fit(rdt, p.iter().min().copied(), p.iter().max().copied())
                        }
                        _ => (None, None),
                    },
                    BinOp::Div if nonneg && c.is_some_and(|c| c > 0) => fit(rdt, xl.map(|l| l / c.unwrap() as i128), xh.map(|h| h / c.unwrap() as i128)),
                    BinOp::Rem if nonneg && c.is_some_and(|c| c > 0) => {
                        fit(rdt, Some(0), Some(xh.map_or(c.unwrap() as i128 - 1, |h| h.min(c.unwrap() as i128 - 1))))
                    }
                    BinOp::Shr if nonneg && c.is_some_and(|s| (0..63).contains(&s)) => fit(rdt, xl.map(|l| l >> c.unwrap()), xh.map(|h| h >> c.unwrap())),
                    BinOp::And => {
                        // with a non-negative operand the result lies in [0, it]
                        let hs = [(xl, xh), (yl, yh)].iter().filter(|(l, _)| l.is_some_and(|l| l >= 0)).filter_map(|(_, h)| *h).min();
                        fit(rdt, hs.map(|_| 0), hs)
                    }
                    BinOp::Max => fit(rdt, xl.zip(yl).map(|(a, b)| a.max(b)), xh.zip(yh).map(|(a, b)| a.max(b))),
                    BinOp::Min => fit(rdt, xl.zip(yl).map(|(a, b)| a.min(b)), xh.zip(yh).map(|(a, b)| a.min(b))),
                    _ => (None, None),
                };
                Some(Facts { dims, range })
            }
            OpKind::Select { cond, a, b } => {
                // each element is one of the two operands' elements: runs
                // survive where both operands have them and the condition
                // is constant along them (a guard's `select(fits, dim, 0)`
                // keeps the dim's divisor: 0 is divisible by everything)
                let (c, x, y) = (get(m, *cond), get(m, *a), get(m, *b));
                let dims = per(&|d| {
                    let (c, x, y) = (c.dim(d), x.dim(d), y.dim(d));
                    let contig = gcd(gcd(x.contig, y.contig), c.constancy);
                    let div = if contig > 1 { gcd(x.div, y.div) } else { gcd(every(x), every(y)) };
                    Info::new(contig, div, gcd(gcd(x.constancy, y.constancy), c.constancy))
                });
                let range = (x.range.0.zip(y.range.0).map(|(a, b)| a.min(b)), x.range.1.zip(y.range.1).map(|(a, b)| a.max(b)));
                Some(Facts { dims, range })
            }
            OpKind::AddPtr { ptr, offset } => {
                let (p, o) = (get(m, *ptr), get(m, *offset));
                let es = k.ty(*ptr).elem().map(|e| e.dtype().size_bytes()).unwrap_or(1) as u64;
                let dims = per(&|d| {
                    let (p, o) = (p.dim(d), o.dim(d));
                    // contiguous offsets from a constant pointer, or a
                    // contiguous pointer moved by a constant offset
                    let contig = gcd(p.constancy, o.contig).max(gcd(p.contig, o.constancy));
                    let od = if contig > 1 && o.contig <= 1 { every(o) } else { o.div };
                    Info::new(contig, gcd(p.div, od.saturating_mul(es).min(BIG)), gcd(p.constancy, o.constancy))
                });
                Some(Facts { dims, range: (None, None) })
            }
            OpKind::Cmp { a, b, .. } => {
                let (x, y) = (get(m, *a), get(m, *b));
                // contiguous (aligned) runs compared with a constant: the
                // result is constant on runs aligned to both divisors
                // (pointers: divisors in bytes, runs in elements).
                let es = match k.ty(*a).elem() {
                    Some(Elem::Ptr(d)) => d.size_bytes().max(1) as u64,
                    _ => 1,
                };
                let dims = per(&|d| {
                    let (x, y) = (x.dim(d), y.dim(d));
                    let run = if y.constancy >= x.contig && x.contig > 1 { gcd(gcd(x.contig, (x.div / es).max(1)), (y.div / es).max(1)) } else { 1 };
                    Info::new(1, 1, gcd(x.constancy, y.constancy).max(run))
                });
                Some(Facts { dims, range: (Some(0), Some(1)) })
            }
            OpKind::For { .. } | OpKind::If { .. } => {
                nested(k, op, adiv, a1, m, defs);
                None
            }
            _ => None,
        };
        if let Some(f) = facts {
            m.insert(res, f);
        }
    }
}

fn nested(k: &Kernel, op: &Op, adiv: &[u32], a1: &[bool], m: &mut HashMap<V, Facts>, defs: &HashMap<V, &OpKind>) {
    match &op.kind {
        OpKind::For { lo, hi, step, body, .. } => {
            let get = |m: &HashMap<V, Facts>, v: V| m.get(&v).cloned().unwrap_or_else(|| Facts::unknown(0));
            let (l, h, s) = (get(m, *lo), get(m, *hi), get(m, *step));
            let d = gcd(l.dim(0).div, s.dim(0).div);
            // the induction variable lies in [lo, hi − 1] (the loop runs
            // no iteration otherwise; it never wraps: docs/semantics.md)
            let top = k.ty(*hi).elem().and_then(|e| match e {
                Elem::Val(d) => dtype_range(d).map(|(_, b)| b as i64),
                _ => None,
            });
            let range = match (l.range.0, h.range.1.map(|b| b - 1).or(top)) {
                (Some(a), Some(b)) if b >= a => (Some(a), Some(b)),
                _ => (None, None),
            };
            m.insert(body.args[0], Facts { dims: vec![Info::scalar(d)], range });
            block_in(k, body, adiv, a1, m, defs);
        }
        OpKind::If { then_, else_, .. } => {
            block_in(k, then_, adiv, a1, m, defs);
            block_in(k, else_, adiv, a1, m, defs);
        }
        _ => {}
    }
}
