//! Axis info: what is provable about integer and pointer tiles along their
//! last dimension, so that loads and stores can be vectorized.
//!
//! Takes a specialized kernel and, per integer scalar argument, whether its
//! run-time value is divisible by 16 (the launch specializes on it, as Triton
//! does). Returns, per value: `contig` (length of runs of consecutive values
//! along the last dim, a power of two), `div` (a power of two dividing the
//! first value of every run: elements for integers, bytes for pointers) and
//! `konst` (length of runs of equal values, for masks). All facts are
//! conservative: 1 means "nothing known". Pointer arguments are assumed
//! 16-byte aligned: runtime buffers are whole allocations (≥ 256-byte aligned).

use ferrotile_ir::*;
use std::collections::HashMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Info {
    pub contig: u64,
    pub div: u64,
    pub konst: u64,
}

const BIG: u64 = 1 << 30;

impl Info {
    fn unknown() -> Info {
        Info { contig: 1, div: 1, konst: 1 }
    }
    fn scalar(div: u64) -> Info {
        Info { contig: 1, div, konst: BIG }
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

pub fn analyze(k: &Kernel, arg_div16: &[bool]) -> HashMap<V, Info> {
    let mut m = HashMap::new();
    block(k, &k.body, arg_div16, &mut m);
    m
}

fn last(k: &Kernel, v: V) -> u64 {
    k.ty(v).shape().last().and_then(|d| d.known()).unwrap_or(1) as u64
}

fn block(k: &Kernel, b: &Block, a16: &[bool], m: &mut HashMap<V, Info>) {
    for op in &b.ops {
        let get = |m: &HashMap<V, Info>, v: V| m.get(&v).copied().unwrap_or(Info::unknown());
        let info = match &op.kind {
            OpKind::Param(i) => {
                let i = *i as usize;
                match k.params[i].kind {
                    ParamKind::Ptr(_) => Some(Info::scalar(16)),
                    ParamKind::Scalar(d) if d.is_int() => Some(Info::scalar(if a16.get(i).copied().unwrap_or(false) { 16 } else { 1 })),
                    _ => None,
                }
            }
            OpKind::Const(Lit::Int(v)) => Some(Info::scalar(pow2_div(*v))),
            OpKind::ProgramId(_) | OpKind::NumPrograms(_) => Some(Info::scalar(1)),
            OpKind::Arange { start, end } => {
                let s = start.known().unwrap_or(1);
                let n = (end.known().unwrap_or(1) - s).max(1) as u64;
                Some(Info { contig: n, div: pow2_div(s), konst: 1 })
            }
            OpKind::Splat { x, .. } => {
                let i = get(m, *x);
                let r = op.results[0];
                Some(Info { contig: 1, div: i.div, konst: last(k, r) })
            }
            OpKind::Broadcast { x, .. } => {
                let i = get(m, *x);
                let (src, dst) = (last(k, *x), last(k, op.results[0]));
                if src == 1 && dst > 1 {
                    Some(Info { contig: 1, div: i.div, konst: dst })
                } else {
                    Some(i)
                }
            }
            OpKind::ExpandDims { x, axis } => {
                let i = get(m, *x);
                if *axis as usize == k.ty(*x).rank() {
                    Some(Info { contig: 1, div: i.div, konst: 1 })
                } else {
                    Some(i)
                }
            }
            OpKind::Cast { x, to } if to.is_int() => Some(get(m, *x)),
            OpKind::Binary { op: o, a, b } => {
                let (x, y) = (get(m, *a), get(m, *b));
                Some(match o {
                    BinOp::Add => Info {
                        contig: gcd(x.contig, y.konst).max(gcd(y.contig, x.konst)),
                        div: gcd(x.div, y.div),
                        konst: gcd(x.konst, y.konst),
                    },
                    BinOp::Sub => Info { contig: gcd(x.contig, y.konst), div: gcd(x.div, y.div), konst: gcd(x.konst, y.konst) },
                    BinOp::Mul => Info { contig: 1, div: (x.div.saturating_mul(y.div)).min(BIG), konst: gcd(x.konst, y.konst) },
                    BinOp::And | BinOp::Or | BinOp::LAnd | BinOp::LOr => Info { contig: 1, div: 1, konst: gcd(x.konst, y.konst) },
                    _ => Info { contig: 1, div: 1, konst: gcd(x.konst, y.konst) },
                })
            }
            OpKind::AddPtr { ptr, offset } => {
                let (p, o) = (get(m, *ptr), get(m, *offset));
                let es = k.ty(*ptr).elem().map(|e| e.dtype().size_bytes()).unwrap_or(1) as u64;
                Some(Info {
                    contig: gcd(p.konst, o.contig),
                    div: gcd(p.div, o.div.saturating_mul(es).min(BIG)),
                    konst: gcd(p.konst, o.konst),
                })
            }
            OpKind::Cmp { a, b, .. } => {
                let (x, y) = (get(m, *a), get(m, *b));
                // contiguous (aligned) runs compared with a constant: the
                // result is constant on runs aligned to both divisors.
                let run = if y.konst >= x.contig && x.contig > 1 {
                    gcd(gcd(x.contig, x.div), y.div)
                } else {
                    1
                };
                Some(Info { contig: 1, div: 1, konst: gcd(x.konst, y.konst).max(run) })
            }
            OpKind::For { lo, step, body, .. } => {
                let d = gcd(get(m, *lo).div, get(m, *step).div);
                m.insert(body.args[0], Info::scalar(d));
                block(k, body, a16, m);
                None
            }
            OpKind::If { then_, else_, .. } => {
                block(k, then_, a16, m);
                block(k, else_, a16, m);
                None
            }
            _ => None,
        };
        if let (Some(i), Some(r)) = (info, op.results.first()) {
            m.insert(*r, i);
        }
    }
}
