//! Specialization: generic kernel + constexpr values + dtypes → concrete kernel.
//!
//! Takes a generic [`Kernel`] (as the macro produced it) and a binding for its
//! constexpr and dtype parameters. Replays every op through the [`Builder`]
//! with operands remapped, so the very rules that type-checked the kernel at
//! compile time now run on literal shapes: symbolic broadcasts resolve or fail,
//! `arange` lengths are checked for powers of two, `if`s on constexprs fold to
//! the taken branch and `static_assert`s are decided. Then dead ops are
//! removed (`dce`) and the verifier runs.
//!
//! Guarantees on success: the result satisfies every invariant of the
//! specialized state described in `ir.rs` (checked by `verify`). Failures are
//! [`SpecializeError`]s naming the kernel, the source line and the binding.

use crate::builder::{Builder, TypeError};
use crate::ir::*;
use crate::types::*;
use std::collections::HashMap;

/// Why a kernel could not be specialized with a binding; it displays as one line naming the
/// kernel, its source location, the binding and the message.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecializeError {
    /// The kernel's name.
    pub kernel: String,
    /// The kernel's source file.
    pub file: String,
    /// Location of the op that failed (the default, line 0, when the binding itself is wrong).
    pub loc: Loc,
    /// The binding, as `BLOCK=128, T=f16` (empty when the binding itself is wrong).
    pub binding: String,
    /// What went wrong.
    pub msg: String,
}

impl std::fmt::Display for SpecializeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "kernel `{}` ({}:{}:{}) specialized with [{}]: {}", self.kernel, self.file, self.loc.line, self.loc.col, self.binding, self.msg)
    }
}

impl std::error::Error for SpecializeError {}

struct Spec<'k> {
    src: &'k Kernel,
    b: Builder,
    map: HashMap<V, V>,
    cx: Vec<i64>,
    dt: Vec<DType>,
}

/// The most elements one tile may hold after specialization (as Triton's
/// `TRITON_MAX_TENSOR_NUMEL`).
pub const MAX_TILE_ELEMENTS: i64 = 1 << 20;

/// Specialize `k` with constexpr values `constexprs` (in declaration order;
/// bools as 0/1) and dtype parameters `dtypes`.
pub fn specialize(k: &Kernel, constexprs: &[i64], dtypes: &[DType]) -> Result<Kernel, SpecializeError> {
    let binding_err = |msg: String| SpecializeError { kernel: k.name.clone(), file: k.file.clone(), loc: Loc::default(), binding: String::new(), msg };
    if constexprs.len() != k.constexprs.len() {
        return Err(binding_err(format!("expected {} constexpr values, got {}", k.constexprs.len(), constexprs.len())));
    }
    if dtypes.len() != k.dtype_params.len() {
        return Err(binding_err(format!("expected {} dtype parameters, got {}", k.dtype_params.len(), dtypes.len())));
    }
    for (c, &v) in k.constexprs.iter().zip(constexprs) {
        let ok = match c.dtype {
            DType::Bool => v == 0 || v == 1,
            DType::I32 => i32::try_from(v).is_ok(),
            DType::U32 => u32::try_from(v).is_ok(),
            _ => true,
        };
        if !ok {
            return Err(binding_err(format!("constexpr `{}` = {v} does not fit in {}", c.name, c.dtype)));
        }
    }
    for (n, d) in k.dtype_params.iter().zip(dtypes) {
        if !d.is_float() || d.is_generic() {
            return Err(binding_err(format!("dtype parameter `{n}` must be f32, f16, bf16, f8e4m3 or f8e5m2, got {d}")));
        }
    }
    let params = k
        .params
        .iter()
        .map(|p| Param {
            name: p.name.clone(),
            kind: match p.kind {
                ParamKind::Ptr(d) => ParamKind::Ptr(d.subst(dtypes)),
                ParamKind::Scalar(d) => ParamKind::Scalar(d.subst(dtypes)),
            },
            written: p.written,
        })
        .collect();
    let b = Builder::new(&k.name, &k.file, params, k.constexprs.clone(), k.dtype_params.clone());
    let mut s = Spec { src: k, b, map: HashMap::new(), cx: constexprs.to_vec(), dt: dtypes.to_vec() };
    let binding = {
        let mut t = k.clone();
        t.bound_constexprs = constexprs.to_vec();
        t.bound_dtypes = dtypes.to_vec();
        t.describe_binding()
    };
    let err = |loc: Loc, msg: String| SpecializeError { kernel: k.name.clone(), file: k.file.clone(), loc, binding: binding.clone(), msg };
    s.block(&k.body.ops).map_err(|(loc, m)| err(loc, m))?;
    let mut out = s.b.finish();
    out.specialized = true;
    out.bound_constexprs = constexprs.to_vec();
    out.bound_dtypes = dtypes.to_vec();
    crate::passes::dce::dce(&mut out);
    // (a dimension is at most 2^20, checked by the builder; the product too:
    // a program's tile lives in registers, and the backends unroll it)
    let mut too_big = None;
    out.walk(&mut |op| {
        for r in &op.results {
            let shape = out.ty(*r).shape();
            let n = shape.iter().try_fold(1i64, |acc, d| acc.checked_mul(d.known().unwrap_or(1)));
            if too_big.is_none() && n.is_none_or(|n| n > MAX_TILE_ELEMENTS) {
                too_big = Some((op.loc, shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")));
            }
        }
    });
    if let Some((loc, shape)) = too_big {
        return Err(err(loc, format!("a tile of shape [{shape}] holds more than the 2^20 elements a tile may hold; use smaller blocks")));
    }
    crate::verify::verify(&out).map_err(|e| err(e.loc, format!("internal error: specialized IR fails verification: {}", e.msg)))?;
    Ok(out)
}

type SR<T> = Result<T, (Loc, String)>;

impl<'k> Spec<'k> {
    fn m(&self, v: V) -> V {
        *self.map.get(&v).unwrap_or_else(|| panic!("specialize: value {v:?} used before definition"))
    }
    fn dims(&self, ds: &[Dim], loc: Loc) -> SR<Vec<Dim>> {
        ds.iter().map(|d| d.subst(&self.cx).map_err(|e| (loc, e))).collect()
    }
    fn block(&mut self, ops: &[Op]) -> SR<()> {
        for op in ops {
            if let OpKind::Yield(_) = op.kind {
                continue;
            }
            self.op(op)?;
        }
        Ok(())
    }
    fn yields(&self, blk: &Block) -> Vec<V> {
        blk.yields().iter().map(|v| self.m(*v)).collect()
    }

    fn op(&mut self, op: &Op) -> SR<()> {
        let loc = op.loc;
        self.b.loc = loc;
        let te = |e: TypeError| (loc, e.to_string());
        let b = &mut self.b;
        let src = self.src;
        let res: Vec<V> = match &op.kind {
            OpKind::Param(i) => vec![b.param(*i as usize)],
            OpKind::Constexpr(e) => {
                let info = src.info(op.results[0]);
                let val = e.eval(&self.cx).map_err(|m| (loc, m))?;
                let d = info.ty.dtype().unwrap().subst(&self.dt);
                vec![b.constexpr(CExpr::Lit(val), d, info.weak)]
            }
            OpKind::Const(l) => {
                let info = src.info(op.results[0]);
                let ty = match &info.ty {
                    Type::Tile { elem, shape } => Type::Tile { elem: elem.subst(&self.dt), shape: shape.clone() },
                    t => t.clone(),
                };
                b.raw(OpKind::Const(*l), vec![(ty, info.cval.clone(), info.weak)])
            }
            OpKind::ProgramId(a) => vec![b.program_id(*a as i64).map_err(te)?],
            OpKind::NumPrograms(a) => vec![b.num_programs(*a as i64).map_err(te)?],
            OpKind::Arange { start, end } => {
                let s = start.subst(&self.cx).map_err(|m| (loc, m))?;
                let e = end.subst(&self.cx).map_err(|m| (loc, m))?;
                vec![b.arange(s, e).map_err(te)?]
            }
            OpKind::Splat { x, shape } | OpKind::Broadcast { x, shape } => {
                let shape = self.dims(shape, loc)?;
                let x = self.m(*x);
                vec![self.b.broadcast_exact(x, shape).map_err(te)?]
            }
            OpKind::ExpandDims { x, axis } => {
                let x = self.m(*x);
                vec![self.b.expand_dims(x, *axis as i64).map_err(te)?]
            }
            OpKind::Reshape { x, shape } => {
                let shape = self.dims(shape, loc)?;
                let x = self.m(*x);
                vec![self.b.reshape(x, shape).map_err(te)?]
            }
            OpKind::Trans { x, perm } => {
                let x = self.m(*x);
                vec![self.b.trans(x, Some(perm.iter().map(|&p| p as i64).collect())).map_err(te)?]
            }
            OpKind::Binary { op: o, a, b: bb } => {
                let (a, bb) = (self.m(*a), self.m(*bb));
                vec![self.b.binary(*o, a, bb).map_err(te)?]
            }
            OpKind::AddPtr { ptr, offset } => {
                let (p, o) = (self.m(*ptr), self.m(*offset));
                vec![self.b.binary(BinOp::Add, p, o).map_err(te)?]
            }
            OpKind::Cmp { op: o, a, b: bb } => {
                let (a, bb) = (self.m(*a), self.m(*bb));
                vec![self.b.cmp(*o, a, bb).map_err(te)?]
            }
            OpKind::Unary { op: o, x } => {
                let x = self.m(*x);
                vec![self.b.unary(*o, x).map_err(te)?]
            }
            OpKind::Fma { a, b: bb, c } => {
                let (a, bb, c) = (self.m(*a), self.m(*bb), self.m(*c));
                vec![self.b.fma(a, bb, c).map_err(te)?]
            }
            OpKind::Select { cond, a, b: bb } => {
                let (c, a, bb) = (self.m(*cond), self.m(*a), self.m(*bb));
                vec![self.b.select(c, a, bb).map_err(te)?]
            }
            OpKind::Cast { x, to } => {
                let x = self.m(*x);
                vec![self.b.cast(x, to.subst(&self.dt)).map_err(te)?]
            }
            OpKind::Bitcast { x, to } => {
                let x = self.m(*x);
                vec![self.b.bitcast(x, to.subst(&self.dt)).map_err(te)?]
            }
            OpKind::Load { ptr, mask, other } => {
                let (p, m, o) = (self.m(*ptr), mask.map(|v| self.m(v)), other.map(|v| self.m(v)));
                vec![self.b.load(p, m, o).map_err(te)?]
            }
            OpKind::Store { ptr, value, mask } => {
                let (p, v, m) = (self.m(*ptr), self.m(*value), mask.map(|v| self.m(v)));
                self.b.store(p, v, m).map_err(te)?;
                vec![]
            }
            OpKind::AtomicAdd { ptr, value, mask, sem } => {
                let (p, v, m) = (self.m(*ptr), self.m(*value), mask.map(|v| self.m(v)));
                let old = self.b.atomic_add(p, v, m, *sem).map_err(te)?;
                if op.results.is_empty() {
                    vec![]
                } else {
                    vec![old]
                }
            }
            OpKind::MakeView { base, shape, strides } => {
                let base = self.m(*base);
                let shape = shape.iter().map(|v| self.m(*v)).collect();
                let strides = strides.iter().map(|v| self.m(*v)).collect();
                vec![self.b.make_view(base, shape, strides).map_err(te)?]
            }
            OpKind::LoadBlock { view, offsets, shape } => {
                let shape = self.dims(shape, loc)?;
                let view = self.m(*view);
                let offs = offsets.iter().map(|v| self.m(*v)).collect();
                vec![self.b.load_block(view, offs, shape).map_err(te)?]
            }
            OpKind::StoreBlock { view, offsets, value } => {
                let view = self.m(*view);
                let offs = offsets.iter().map(|v| self.m(*v)).collect();
                let value = self.m(*value);
                self.b.store_block(view, offs, value).map_err(te)?;
                vec![]
            }
            OpKind::Reduce { op: o, x, axis } => {
                let x = self.m(*x);
                vec![self.b.reduce(*o, x, *axis as i64).map_err(te)?]
            }
            OpKind::Scan { op: o, x, axis } => {
                let x = self.m(*x);
                vec![self.b.scan(*o, x, *axis as i64).map_err(te)?]
            }
            OpKind::Dot { a, b: bb, acc, precision } => {
                let (a, bb, acc) = (self.m(*a), self.m(*bb), self.m(*acc));
                vec![self.b.dot(a, bb, Some(acc), *precision).map_err(te)?]
            }
            OpKind::For { lo, hi, step, inits, body } => {
                let (lo, hi, step) = (self.m(*lo), self.m(*hi), self.m(*step));
                let inits: Vec<V> = inits.iter().map(|v| self.m(*v)).collect();
                let (iv, args) = self.b.begin_for(lo, hi, step, &inits).map_err(te)?;
                self.map.insert(body.args[0], iv);
                for (a, na) in body.args[1..].iter().zip(args) {
                    self.map.insert(*a, na);
                }
                self.block(&body.ops)?;
                let ys = self.yields(body);
                self.b.loc = loc;
                self.b.end_for(ys).map_err(te)?
            }
            OpKind::If { cond, then_, else_ } => {
                let c = self.m(*cond);
                match self.b.info(c).cval.as_ref().and_then(|e| e.known()) {
                    Some(k) => {
                        let blk = if k != 0 { then_ } else { else_ };
                        self.block(&blk.ops)?;
                        self.yields(blk)
                    }
                    None => {
                        self.b.begin_if(c).map_err(te)?;
                        self.block(&then_.ops)?;
                        let ty = self.yields(then_);
                        self.b.begin_else(ty);
                        self.block(&else_.ops)?;
                        let ey = self.yields(else_);
                        self.b.loc = loc;
                        self.b.end_if(ey).map_err(te)?
                    }
                }
            }
            OpKind::Yield(_) => unreachable!(),
            OpKind::StaticAssert { cond, msg } => {
                let c = self.m(*cond);
                self.b.static_assert(c, msg).map_err(te)?;
                vec![]
            }
            OpKind::Print { prefix, args } => {
                let args = args.iter().map(|v| self.m(*v)).collect();
                self.b.print(prefix, args).map_err(te)?;
                vec![]
            }
        };
        assert_eq!(res.len(), op.results.len(), "specialize: result arity of {:?}", op.kind);
        for (old, new) in op.results.iter().zip(res) {
            if let Some(n) = &src.info(*old).name {
                self.b.set_name(new, n);
            }
            self.map.insert(*old, new);
        }
        Ok(())
    }
}
