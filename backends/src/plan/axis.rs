//! Axis info: what is provable about integer and pointer tiles along their
//! last dimension, so that loads and stores can be vectorized.
//!
//! Takes a specialized kernel and, per integer scalar argument, whether its
//! run-time value is divisible by 16 and whether it is exactly 1 (the launch
//! specializes on both, as Triton does: a unit stride is what makes a
//! strided operand contiguous). Returns, per value: `contig` (length of runs
//! of consecutive values along the last dim, a power of two), `div` (a power
//! of two dividing the first value of every run: elements for integers,
//! bytes for pointers), `reg_offsets` (length of runs of equal values, for masks)
//! and `unit` (every element is 1, so multiplying by it keeps the other
//! factor's facts). All facts are
//! conservative: 1 means "nothing known". Pointer arguments are assumed
//! 16-byte aligned: runtime buffers are whole allocations (≥ 256-byte aligned).

use ferrotile_ir::*;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    pub contig: u64,
    pub div: u64,
    pub reg_offsets: u64,
    pub unit: bool,
}

const BIG: u64 = 1 << 30;

impl Info {
    fn unknown() -> Info {
        Info::new(1, 1, 1)
    }
    fn scalar(div: u64) -> Info {
        Info { contig: 1, div, reg_offsets: BIG, unit: false }
    }
    fn new(contig: u64, div: u64, reg_offsets: u64) -> Info {
        Info { contig, div, reg_offsets, unit: false }
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

pub fn analyze(k: &Kernel, arg_div16: &[bool], arg_one: &[bool]) -> HashMap<V, Info> {
    let mut m = HashMap::new();
    block(k, &k.body, arg_div16, arg_one, &mut m);
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

fn last(k: &Kernel, v: V) -> u64 {
    k.ty(v).shape().last().and_then(|d| d.known()).unwrap_or(1) as u64
}

fn block(k: &Kernel, b: &Block, a16: &[bool], a1: &[bool], m: &mut HashMap<V, Info>) {
    for op in &b.ops {
        let get = |m: &HashMap<V, Info>, v: V| m.get(&v).copied().unwrap_or(Info::unknown());
        let info = match &op.kind {
            OpKind::Param(i) => {
                let i = *i as usize;
                match k.params[i].kind {
                    ParamKind::Ptr(_) => Some(Info::scalar(16)),
                    ParamKind::Scalar(d) if d.is_int() => {
                        let mut info = Info::scalar(if a16.get(i).copied().unwrap_or(false) { 16 } else { 1 });
                        info.unit = a1.get(i).copied().unwrap_or(false);
                        Some(info)
                    }
                    _ => None,
                }
            }
            OpKind::Const(Lit::Int(v)) => Some(Info { unit: *v == 1, ..Info::scalar(pow2_div(*v)) }),
            OpKind::ProgramId(_) | OpKind::NumPrograms(_) => Some(Info::scalar(1)),
            OpKind::Arange { start, end } => {
                let s = start.known().unwrap_or(1);
                let n = (end.known().unwrap_or(1) - s).max(1) as u64;
                Some(Info::new(n, pow2_div(s), 1))
            }
            OpKind::Splat { x, .. } => {
                let i = get(m, *x);
                let r = op.results[0];
                Some(Info { unit: i.unit, ..Info::new(1, i.div, last(k, r)) })
            }
            OpKind::Broadcast { x, .. } => {
                let i = get(m, *x);
                let (src, dst) = (last(k, *x), last(k, op.results[0]));
                if src == 1 && dst > 1 {
                    Some(Info { unit: i.unit, ..Info::new(1, i.div, dst) })
                } else {
                    Some(i)
                }
            }
            OpKind::ExpandDims { x, axis } => {
                let i = get(m, *x);
                if *axis as usize == k.ty(*x).rank() {
                    // every element starts a run now: only a divisor of
                    // every element carries over
                    Some(Info { unit: i.unit, ..Info::new(1, every(i), 1) })
                } else {
                    Some(i)
                }
            }
            OpKind::Cast { x, to } if to.is_int() => Some(get(m, *x)),
            OpKind::Binary { op: o, a, b } => {
                let (x, y) = (get(m, *a), get(m, *b));
                // (a result without contiguous runs needs divisors of every
                // element: `every`)
                let sum = |contig: u64| if contig > 1 { gcd(x.div, y.div) } else { gcd(every(x), every(y)) };
                Some(match o {
                    BinOp::Mul if y.unit => x,
                    BinOp::Mul if x.unit => y,
                    BinOp::Add => {
                        let c = gcd(x.contig, y.reg_offsets).max(gcd(y.contig, x.reg_offsets));
                        Info::new(c, sum(c), gcd(x.reg_offsets, y.reg_offsets))
                    }
                    BinOp::Sub => {
                        let c = gcd(x.contig, y.reg_offsets);
                        Info::new(c, sum(c), gcd(x.reg_offsets, y.reg_offsets))
                    }
                    BinOp::Mul => Info::new(1, (every(x).saturating_mul(every(y))).min(BIG), gcd(x.reg_offsets, y.reg_offsets)),
                    // each element is one of the operands': divisible by both
                    // operands' divisors' gcd (e.g. a clamped loop bound)
                    BinOp::Max | BinOp::Min => Info::new(1, gcd(every(x), every(y)), gcd(x.reg_offsets, y.reg_offsets)),
                    BinOp::And | BinOp::Or | BinOp::LAnd | BinOp::LOr => Info::new(1, 1, gcd(x.reg_offsets, y.reg_offsets)),
                    _ => Info::new(1, 1, gcd(x.reg_offsets, y.reg_offsets)),
                })
            }
            OpKind::Select { cond, a, b } => {
                // each element is one of the two operands' elements: runs
                // survive where both operands have them and the condition
                // is constant along them (a guard's `select(fits, dim, 0)`
                // keeps the dim's divisor: 0 is divisible by everything)
                let (c, x, y) = (get(m, *cond), get(m, *a), get(m, *b));
                let contig = gcd(gcd(x.contig, y.contig), c.reg_offsets);
                let div = if contig > 1 { gcd(x.div, y.div) } else { gcd(every(x), every(y)) };
                Some(Info::new(contig, div, gcd(gcd(x.reg_offsets, y.reg_offsets), c.reg_offsets)))
            }
            OpKind::AddPtr { ptr, offset } => {
                let (p, o) = (get(m, *ptr), get(m, *offset));
                let es = k.ty(*ptr).elem().map(|e| e.dtype().size_bytes()).unwrap_or(1) as u64;
                Some(Info::new(gcd(p.reg_offsets, o.contig), gcd(p.div, o.div.saturating_mul(es).min(BIG)), gcd(p.reg_offsets, o.reg_offsets)))
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
                let run = if y.reg_offsets >= x.contig && x.contig > 1 { gcd(gcd(x.contig, (x.div / es).max(1)), (y.div / es).max(1)) } else { 1 };
                Some(Info::new(1, 1, gcd(x.reg_offsets, y.reg_offsets).max(run)))
            }
            OpKind::For { lo, step, body, .. } => {
                let d = gcd(get(m, *lo).div, get(m, *step).div);
                m.insert(body.args[0], Info::scalar(d));
                block(k, body, a16, a1, m);
                None
            }
            OpKind::If { then_, else_, .. } => {
                block(k, then_, a16, a1, m);
                block(k, else_, a16, a1, m);
                None
            }
            _ => None,
        };
        if let (Some(i), Some(r)) = (info, op.results.first()) {
            m.insert(*r, i);
        }
    }
}
