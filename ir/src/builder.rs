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

use crate::ir::*;
use crate::types::*;

/// A typing error: one cause, an optional hint, and which operand (0-based)
/// is to blame when that is known, so the macro can point at it.
#[derive(Clone, Debug, PartialEq)]
pub struct TypeError {
    pub msg: String,
    pub hint: Option<String>,
    pub operand: Option<usize>,
}

impl TypeError {
    pub fn new(msg: impl Into<String>) -> Self {
        TypeError { msg: msg.into(), hint: None, operand: None }
    }
    pub fn hint(mut self, h: impl Into<String>) -> Self {
        self.hint = Some(h.into());
        self
    }
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

pub struct Builder {
    pub kernel: Kernel,
    blocks: Vec<Block>,
    frames: Vec<Frame>,
    pub loc: Loc,
}

fn fmt_ty(t: &Type) -> String {
    format!("`{t}`")
}

impl Builder {
    pub fn new(name: &str, file: &str, params: Vec<Param>, constexprs: Vec<ConstexprParam>, dtype_params: Vec<String>) -> Self {
        let kernel = Kernel {
            name: name.to_string(),
            file: file.to_string(),
            params,
            constexprs,
            dtype_params,
            values: vec![],
            body: Block::default(),
            specialized: false,
            bound_constexprs: vec![],
            bound_dtypes: vec![],
        };
        Builder { kernel, blocks: vec![Block::default()], frames: vec![], loc: Loc::default() }
    }

    /// Finish: the top-level block becomes the kernel body.
    pub fn finish(mut self) -> Kernel {
        assert!(self.frames.is_empty(), "unterminated region");
        self.kernel.body = self.blocks.pop().unwrap();
        self.kernel
    }

    pub fn ty(&self, v: V) -> &Type {
        &self.kernel.values[v.idx()].ty
    }
    pub fn info(&self, v: V) -> &ValueInfo {
        &self.kernel.values[v.idx()]
    }
    pub fn set_name(&mut self, v: V, name: &str) {
        let info = &mut self.kernel.values[v.idx()];
        if info.name.is_none() {
            info.name = Some(name.to_string());
        }
    }

    fn new_value(&mut self, ty: Type, cval: Option<CExpr>, weak: bool) -> V {
        let v = V(self.kernel.values.len() as u32);
        self.kernel.values.push(ValueInfo { ty, cval, weak, name: None, layout: None });
        v
    }

    fn emit(&mut self, kind: OpKind, results: Vec<V>) {
        let loc = self.loc;
        self.blocks.last_mut().unwrap().ops.push(Op { kind, results, loc });
    }

    fn emit1(&mut self, kind: OpKind, ty: Type) -> V {
        let v = self.new_value(ty, None, false);
        self.emit(kind, vec![v]);
        v
    }

    // ---------------------------------------------------------------- leaves

    pub fn param(&mut self, idx: usize) -> V {
        let p = &self.kernel.params[idx];
        let ty = match p.kind {
            ParamKind::Ptr(d) => Type::tile(Elem::Ptr(d), vec![]),
            ParamKind::Scalar(d) => Type::scalar(d),
        };
        let name = p.name.clone();
        let v = self.emit1(OpKind::Param(idx as u32), ty);
        self.set_name(v, &name);
        v
    }

    pub fn constexpr_param(&mut self, idx: usize) -> V {
        let c = &self.kernel.constexprs[idx];
        let (name, dtype) = (c.name.clone(), c.dtype);
        let e = CExpr::Param(idx as u32, name.clone());
        let v = self.constexpr(e, dtype, true);
        self.set_name(v, &name);
        v
    }

    /// A constexpr-class scalar with a known expression value.
    pub fn constexpr(&mut self, e: CExpr, dtype: DType, weak: bool) -> V {
        if let Some(k) = e.known() {
            // A known value of a settled integer dtype wraps like run-time
            // arithmetic does (`(300 as u8) as i32` is 44, `200u8 + 100u8`
            // is 44), so later folds see the value the program would.
            // Weak literals keep their value until they adopt a dtype.
            let k = if weak { k } else { wrap_to(k, dtype) };
            let e = CExpr::Lit(k);
            let lit = if dtype == DType::Bool { Lit::Bool(k != 0) } else { Lit::Int(k) };
            let v = self.new_value(Type::scalar(dtype), Some(e), weak);
            self.emit(OpKind::Const(lit), vec![v]);
            return v;
        }
        let v = self.new_value(Type::scalar(dtype), Some(e.clone()), weak);
        self.emit(OpKind::Constexpr(e), vec![v]);
        v
    }

    /// An integer literal; `dtype: None` makes it weak (i32 unless the other
    /// operand says otherwise).
    pub fn const_int(&mut self, val: i64, dtype: Option<DType>) -> R<V> {
        match dtype {
            None if i32::try_from(val).is_err() && u32::try_from(val).is_err() => {
                Err(TypeError::new(format!("the integer literal {val} does not fit in 32 bits")).hint(format!("add a suffix to make it 64-bit: `{val}i64`")))
            }
            None => Ok(self.constexpr(CExpr::Lit(val), DType::I32, true)),
            Some(d) if d.is_float() => Ok(self.const_float(val as f64, Some(d))),
            Some(d) => {
                check_int_range(val, d)?;
                Ok(self.constexpr(CExpr::Lit(val), d, false))
            }
        }
    }

    pub fn const_float(&mut self, val: f64, dtype: Option<DType>) -> V {
        let d = dtype.unwrap_or(DType::F32);
        let v = self.new_value(Type::scalar(d), None, dtype.is_none());
        self.emit(OpKind::Const(Lit::Float(val)), vec![v]);
        v
    }

    pub fn const_bool(&mut self, b: bool) -> V {
        self.constexpr(CExpr::Lit(b as i64), DType::Bool, false)
    }

    pub fn program_id(&mut self, axis: i64) -> R<V> {
        check_axis3(axis)?;
        Ok(self.emit1(OpKind::ProgramId(axis as u8), Type::scalar(DType::I32)))
    }

    pub fn num_programs(&mut self, axis: i64) -> R<V> {
        check_axis3(axis)?;
        Ok(self.emit1(OpKind::NumPrograms(axis as u8), Type::scalar(DType::I32)))
    }

    /// The constexpr value of a scalar, or an error saying a constexpr is needed.
    pub fn cexpr_of(&self, v: V, what: &str) -> R<CExpr> {
        let info = self.info(v);
        match (&info.cval, info.ty.is_scalar()) {
            (Some(e), true) => Ok(e.clone()),
            _ => Err(TypeError::new(format!("{what} must be a constexpr, but this is a run-time value of type {}", fmt_ty(&info.ty)))
                .hint("use a literal or a `const` generic parameter of the kernel")),
        }
    }

    pub fn arange(&mut self, start: CExpr, end: CExpr) -> R<V> {
        let len = CExpr::bin(CBin::Sub, end.clone(), start.clone());
        if let Some(n) = len.known() {
            check_tile_len(n, "arange")?;
        }
        Ok(self.emit1(OpKind::Arange { start, end }, Type::tile(Elem::Val(DType::I32), vec![len])))
    }

    pub fn full(&mut self, shape: Vec<Dim>, value: V, dtype: DType) -> R<V> {
        for d in &shape {
            if let Some(n) = d.known() {
                check_tile_len(n, "a tile dimension")?;
            }
        }
        if !self.ty(value).is_scalar() || self.ty(value).elem().is_none_or(|e| e.is_ptr()) {
            return Err(TypeError::new(format!("the fill value must be a scalar, found {}", fmt_ty(self.ty(value)))).at(1));
        }
        let value = self.coerce_scalar_to(value, dtype)?;
        Ok(self.splat_to(value, &shape))
    }

    // ------------------------------------------------------------ shape ops

    fn splat_to(&mut self, x: V, shape: &[Dim]) -> V {
        if shape.is_empty() {
            return x;
        }
        let ty = self.ty(x).with_shape(shape.to_vec());
        self.emit1(OpKind::Splat { x, shape: shape.to_vec() }, ty)
    }

    pub fn expand_dims(&mut self, x: V, axis: i64) -> R<V> {
        let ty = self.tile_ty(x, 0)?;
        let r = ty.rank() as i64;
        let a = if axis < 0 { axis + r + 1 } else { axis };
        if a < 0 || a > r {
            return Err(TypeError::new(format!("axis {axis} is out of range for expand_dims of a rank-{r} tile (valid: 0..={r})")).at(1));
        }
        let mut shape = ty.shape().to_vec();
        shape.insert(a as usize, CExpr::Lit(1));
        let nty = ty.with_shape(shape);
        Ok(self.emit1(OpKind::ExpandDims { x, axis: a as u8 }, nty))
    }

    /// Broadcast `x` (lower or equal rank) to `shape`.
    pub fn broadcast_to(&mut self, x: V, shape: &[Dim]) -> R<V> {
        let ty = self.tile_ty(x, 0)?;
        if ty.is_scalar() {
            return Ok(self.splat_to(x, shape));
        }
        if ty.rank() > shape.len() {
            return Err(TypeError::new(format!("cannot broadcast {} to the lower-rank shape {}", fmt_ty(&ty), fmt_shape(shape))));
        }
        let mut x = x;
        while self.ty(x).rank() < shape.len() {
            x = self.expand_dims(x, 0)?;
        }
        let cur = self.ty(x).shape().to_vec();
        let mut target = Vec::with_capacity(shape.len());
        let mut same = true;
        for (a, b) in cur.iter().zip(shape) {
            match a.provably_eq(b) {
                Some(true) => target.push(a.clone()),
                _ if a.known() == Some(1) => {
                    same = false;
                    target.push(b.clone())
                }
                Some(false) => return Err(TypeError::new(format!("cannot broadcast {} to shape {}", fmt_ty(&ty), fmt_shape(shape)))),
                None => {
                    same = false;
                    target.push(CExpr::bin(CBin::Bcast, a.clone(), b.clone()))
                }
            }
        }
        if same {
            return Ok(x);
        }
        let nty = self.ty(x).with_shape(target.clone());
        Ok(self.emit1(OpKind::Broadcast { x, shape: target }, nty))
    }

    /// Explicit `Broadcast` as the specializer replays it: a no-op when the
    /// shapes already agree.
    pub fn broadcast_exact(&mut self, x: V, shape: Vec<Dim>) -> R<V> {
        self.broadcast_to(x, &shape)
    }

    pub fn reshape(&mut self, x: V, shape: Vec<Dim>) -> R<V> {
        let ty = self.tile_ty(x, 0)?;
        for d in &shape {
            if let Some(n) = d.known() {
                check_tile_len(n, "a reshape dimension")?;
            }
        }
        let new_ty = ty.with_shape(shape.clone());
        if let (Some(a), Some(b)) = (ty.numel(), new_ty.numel()) {
            if a != b {
                return Err(TypeError::new(format!("cannot reshape {} ({a} elements) to {} ({b} elements)", fmt_ty(&ty), fmt_shape(&shape)))
                    .hint("a reshape keeps the number of elements; the dimensions must multiply to the same count")
                    .at(1));
            }
        }
        if ty.shape() == shape.as_slice() {
            return Ok(x);
        }
        Ok(self.emit1(OpKind::Reshape { x, shape }, new_ty))
    }

    pub fn trans(&mut self, x: V, perm: Option<Vec<i64>>) -> R<V> {
        let ty = self.tile_ty(x, 0)?;
        let r = ty.rank();
        let perm: Vec<i64> = match perm {
            Some(p) => p,
            None if r == 2 => vec![1, 0],
            None => {
                return Err(TypeError::new(format!("trans without a permutation needs a rank-2 tile, found {}", fmt_ty(&ty)))
                    .hint("pass the permutation: trans(x, [2, 0, 1])"))
            }
        };
        let mut seen = vec![false; r];
        if perm.len() != r || perm.iter().any(|&p| p < 0 || p as usize >= r || std::mem::replace(&mut seen[p as usize], true)) {
            return Err(TypeError::new(format!("{perm:?} is not a permutation of the {r} axes of {}", fmt_ty(&ty))));
        }
        let shape = perm.iter().map(|&p| ty.shape()[p as usize].clone()).collect();
        let nty = ty.with_shape(shape);
        Ok(self.emit1(OpKind::Trans { x, perm: perm.iter().map(|&p| p as u8).collect() }, nty))
    }

    // ----------------------------------------------------------- arithmetic

    fn tile_ty(&self, v: V, operand: usize) -> R<Type> {
        match self.ty(v) {
            t @ Type::Tile { .. } => Ok(t.clone()),
            t => Err(TypeError::new(format!("expected a tile or scalar, found the view {}", fmt_ty(t))).at(operand)),
        }
    }

    /// Make a weak scalar (literal/constexpr) take dtype `d`.
    fn coerce_scalar_to(&mut self, v: V, d: DType) -> R<V> {
        let info = self.info(v).clone();
        let cur = match info.ty.elem() {
            Some(Elem::Val(c)) => c,
            _ => return Err(TypeError::new(format!("expected a value, found {}", fmt_ty(&info.ty)))),
        };
        if cur == d {
            if let (true, Some(k)) = (info.weak, info.cval.as_ref().and_then(|e| e.known())) {
                check_int_range(k, d)?;
            }
            return Ok(v);
        }
        if !info.weak {
            return Err(dtype_mismatch(cur, d));
        }
        let op = self.kernel_op_of(v);
        if let Some(OpKind::Const(Lit::Float(x))) = op {
            if !d.is_float() {
                let hint =
                    if d == DType::Bool { "compare to get a bool: `x != 0.0`" } else { "write an integer literal, or cast the other operand with `as f32`" };
                return Err(TypeError::new(format!("the float literal {x:?} cannot be used as {d}")).hint(hint));
            }
            let shape = info.ty.shape().to_vec();
            let nv = self.const_float(x, Some(d));
            return Ok(self.splat_to(nv, &shape));
        }
        if let Some(e) = &info.cval {
            if cur == DType::Bool && d != DType::Bool {
                return Err(dtype_mismatch(cur, d));
            }
            if !d.is_float() {
                if let Some(k) = e.known() {
                    check_int_range(k, d)?;
                }
                if d == DType::Bool {
                    return Err(dtype_mismatch(cur, d));
                }
                return Ok(self.constexpr(e.clone(), d, false));
            }
            if let Some(k) = e.known() {
                return Ok(self.const_float(k as f64, Some(d)));
            }
        }
        if !d.is_float() && cur.is_float() {
            return Err(dtype_mismatch(cur, d));
        }
        self.cast(v, d)
    }

    fn kernel_op_of(&self, v: V) -> Option<OpKind> {
        // Weak values are always defined by the op just pushed or a leaf;
        // search the open blocks from the innermost.
        for b in self.blocks.iter().rev() {
            for op in b.ops.iter().rev() {
                if op.results.contains(&v) {
                    return Some(op.kind.clone());
                }
            }
        }
        None
    }

    /// Bring two value operands to one dtype (weak adopts strong).
    fn unify(&mut self, a: V, b: V) -> R<(V, V, DType)> {
        let (ia, ib) = (self.info(a).clone(), self.info(b).clone());
        let (da, db) = match (ia.ty.elem(), ib.ty.elem()) {
            (Some(Elem::Val(x)), Some(Elem::Val(y))) => (x, y),
            (Some(Elem::Ptr(_)), _) | (None, _) => return Err(TypeError::new(format!("expected a value, found {}", fmt_ty(&ia.ty))).at(0)),
            _ => return Err(TypeError::new(format!("expected a value, found {}", fmt_ty(&ib.ty))).at(1)),
        };
        if da == db {
            // a weak literal meeting a typed value adopts its dtype: it must
            // fit (two weak constexprs keep unbounded constexpr arithmetic)
            for (i, info) in [(0, &ia), (1, &ib)] {
                let typed_other = if i == 0 { !ib.weak } else { !ia.weak };
                if let (true, true, Some(k), false) = (typed_other, info.weak, info.cval.as_ref().and_then(|e| e.known()), da.is_float()) {
                    check_int_range(k, da).map_err(|e| e.at(i))?;
                }
            }
            return Ok((a, b, da));
        }
        match (ia.weak, ib.weak) {
            (true, false) => {
                let a2 = self.coerce_scalar_to(a, db).map_err(|e| e.at(0))?;
                Ok((a2, b, db))
            }
            (false, true) => {
                let b2 = self.coerce_scalar_to(b, da).map_err(|e| e.at(1))?;
                Ok((a, b2, da))
            }
            (true, true) => {
                // weak int with weak float: float wins
                if da.is_float() {
                    let b2 = self.coerce_scalar_to(b, da)?;
                    Ok((a, b2, da))
                } else {
                    let a2 = self.coerce_scalar_to(a, db)?;
                    Ok((a2, b, db))
                }
            }
            (false, false) => Err(dtype_mismatch(da, db).at(1)),
        }
    }

    fn broadcast_pair(&mut self, a: V, b: V) -> R<(V, V, Vec<Dim>)> {
        let sa = self.ty(a).shape().to_vec();
        let sb = self.ty(b).shape().to_vec();
        let shape = broadcast_shapes(&sa, &sb).map_err(|e| e.at(1))?;
        let a = self.broadcast_to(a, &shape)?;
        let b = self.broadcast_to(b, &shape)?;
        Ok((a, b, shape))
    }

    pub fn binary(&mut self, op: BinOp, a: V, b: V) -> R<V> {
        let (ta, tb) = (self.tile_ty(a, 0)?, self.tile_ty(b, 1)?);
        let (ea, eb) = (ta.elem().unwrap(), tb.elem().unwrap());
        // pointer arithmetic
        if ea.is_ptr() || eb.is_ptr() {
            return match (op, ea.is_ptr(), eb.is_ptr()) {
                (BinOp::Add, true, false) => self.add_ptr(a, b),
                (BinOp::Add, false, true) => self.add_ptr(b, a),
                (BinOp::Sub, true, false) => {
                    let n = self.unary(UnOp::Neg, b)?;
                    self.add_ptr(a, n)
                }
                (_, true, true) => {
                    Err(TypeError::new("arithmetic between two pointers is not supported").hint("add integer offsets to one base pointer: `ptr + offs`").at(1))
                }
                _ => Err(TypeError::new(format!("operator `{}` is not defined on pointers; only `ptr + int` and `ptr - int` are", binop_str(op)))
                    .at(if ea.is_ptr() { 0 } else { 1 })),
            };
        }
        let (a, b, d) = self.unify(a, b)?;
        check_binop_dtype(op, d)?;
        // constexpr folding (ints and bools)
        if !d.is_float() {
            if let (Some(x), Some(y)) = (self.info(a).cval.clone(), self.info(b).cval.clone()) {
                if let Some(cb) = binop_to_cbin(op) {
                    let weak = self.info(a).weak && self.info(b).weak;
                    if let (Some(xv), Some(yv)) = (x.known(), y.known()) {
                        if let Err(e) = eval_bin(cb, xv, yv) {
                            return Err(TypeError::new(e));
                        }
                    }
                    return Ok(self.constexpr(CExpr::bin(cb, x, y), d, weak));
                }
            }
        }
        let (a, b, shape) = self.broadcast_pair(a, b)?;
        Ok(self.emit1(OpKind::Binary { op, a, b }, Type::tile(Elem::Val(d), shape)))
    }

    fn add_ptr(&mut self, ptr: V, off: V) -> R<V> {
        let ot = self.tile_ty(off, 1)?;
        let od = match ot.elem() {
            Some(Elem::Val(d)) if d.is_int() => d,
            _ => {
                return Err(TypeError::new(format!("a pointer offset must be an integer, found {}", fmt_ty(&ot)))
                    .hint("cast the offset with `as i32` or `as i64`")
                    .at(1))
            }
        };
        let off = if self.info(off).weak && od != DType::I32 { self.coerce_scalar_to(off, DType::I32)? } else { off };
        let (p, o, shape) = self.broadcast_pair(ptr, off)?;
        let elem = self.ty(p).elem().unwrap();
        Ok(self.emit1(OpKind::AddPtr { ptr: p, offset: o }, Type::tile(elem, shape)))
    }

    pub fn cmp(&mut self, op: CmpOp, a: V, b: V) -> R<V> {
        self.tile_ty(a, 0)?;
        self.tile_ty(b, 1)?;
        let (a, b, d) = self.unify(a, b)?;
        if !d.is_float() {
            if let (Some(x), Some(y)) = (self.info(a).cval.clone(), self.info(b).cval.clone()) {
                let cb = match op {
                    CmpOp::Eq => CBin::Eq,
                    CmpOp::Ne => CBin::Ne,
                    CmpOp::Lt => CBin::Lt,
                    CmpOp::Le => CBin::Le,
                    CmpOp::Gt => CBin::Gt,
                    CmpOp::Ge => CBin::Ge,
                };
                return Ok(self.constexpr(CExpr::bin(cb, x, y), DType::Bool, false));
            }
        }
        let (a, b, shape) = self.broadcast_pair(a, b)?;
        Ok(self.emit1(OpKind::Cmp { op, a, b }, Type::tile(Elem::Val(DType::Bool), shape)))
    }

    pub fn unary(&mut self, op: UnOp, x: V) -> R<V> {
        let t = self.tile_ty(x, 0)?;
        let mut d = match t.elem().unwrap() {
            Elem::Val(d) => d,
            Elem::Ptr(_) => return Err(TypeError::new(format!("`{}` is not defined on pointers", op.name())).at(0)),
        };
        let mut x = x;
        if op.float_only() && !d.is_float() {
            if self.info(x).weak && d != DType::Bool {
                x = self.coerce_scalar_to(x, DType::F32)?;
                d = DType::F32;
            } else {
                return Err(TypeError::new(format!("`{}` needs a float operand, found {}", op.name(), fmt_ty(&t))).hint("cast first: `x as f32`").at(0));
            }
        }
        match op {
            UnOp::Not if d.is_float() => return Err(TypeError::new(format!("`!` is not defined on floats ({})", fmt_ty(&t))).at(0)),
            UnOp::Neg if d == DType::Bool => return Err(TypeError::new("unary `-` is not defined on booleans").hint("use `!` for logical not").at(0)),
            _ => {}
        }
        if let Some(e) = self.info(x).cval.clone() {
            let weak = self.info(x).weak;
            match op {
                UnOp::Neg => return Ok(self.constexpr(CExpr::Neg(Box::new(e)).fold(), d, weak)),
                UnOp::Not if d == DType::Bool => return Ok(self.constexpr(CExpr::Not(Box::new(e)).fold(), d, weak)),
                _ => {}
            }
        }
        let ty = self.ty(x).clone();
        Ok(self.emit1(OpKind::Unary { op, x }, ty))
    }

    pub fn fma(&mut self, a: V, b: V, c: V) -> R<V> {
        let (a, b, d) = self.unify(a, b)?;
        let (a, c, d2) = self.unify(a, c).map_err(|e| if e.operand == Some(1) { e.at(2) } else { e })?;
        let (b, _, _) = self.unify(b, a)?;
        let d = if d2 != d { d2 } else { d };
        if !d.is_float() {
            return Err(TypeError::new(format!("fma needs float operands, found {d}")).hint("use `a * b + c` for integers"));
        }
        let s1 = broadcast_shapes(self.ty(a).shape(), self.ty(b).shape())?;
        let shape = broadcast_shapes(&s1, self.ty(c).shape()).map_err(|e| e.at(2))?;
        let a = self.broadcast_to(a, &shape)?;
        let b = self.broadcast_to(b, &shape)?;
        let c = self.broadcast_to(c, &shape)?;
        Ok(self.emit1(OpKind::Fma { a, b, c }, Type::tile(Elem::Val(d), shape)))
    }

    pub fn select(&mut self, cond: V, a: V, b: V) -> R<V> {
        let tc = self.tile_ty(cond, 0)?;
        if tc.elem() != Some(Elem::Val(DType::Bool)) {
            return Err(TypeError::new(format!("the condition of `select` must be bool, found {}", fmt_ty(&tc))).hint("compare to get a mask: `x > 0`").at(0));
        }
        let (ta, tb) = (self.tile_ty(a, 1)?, self.tile_ty(b, 2)?);
        let (a, b, elem) = match (ta.elem().unwrap(), tb.elem().unwrap()) {
            (Elem::Ptr(x), Elem::Ptr(y)) if x == y => (a, b, Elem::Ptr(x)),
            (Elem::Val(_), Elem::Val(_)) => {
                let (a, b, d) = self.unify(a, b).map_err(|e| TypeError { operand: e.operand.map(|o| o + 1), ..e })?;
                (a, b, Elem::Val(d))
            }
            _ => return Err(TypeError::new(format!("`select` branches have different types {} and {}", fmt_ty(&ta), fmt_ty(&tb))).at(2)),
        };
        let s1 = broadcast_shapes(self.ty(cond).shape(), self.ty(a).shape())?;
        let shape = broadcast_shapes(&s1, self.ty(b).shape()).map_err(|e| e.at(2))?;
        let cond = self.broadcast_to(cond, &shape)?;
        let a = self.broadcast_to(a, &shape)?;
        let b = self.broadcast_to(b, &shape)?;
        Ok(self.emit1(OpKind::Select { cond, a, b }, Type::tile(elem, shape)))
    }

    pub fn cast(&mut self, x: V, to: DType) -> R<V> {
        let t = self.tile_ty(x, 0)?;
        let from = match t.elem().unwrap() {
            Elem::Val(d) => d,
            Elem::Ptr(_) => return Err(TypeError::new("pointers cannot be cast").at(0)),
        };
        if from == to && !self.info(x).weak {
            return Ok(x);
        }
        if let Some(e) = self.info(x).cval.clone() {
            if !to.is_float() && t.is_scalar() {
                if to == DType::Bool {
                    return Ok(self.constexpr(CExpr::bin(CBin::Ne, e, CExpr::Lit(0)), to, false));
                }
                return Ok(self.constexpr(e, to, false));
            }
        }
        if from == to {
            return Ok(x);
        }
        let ty = t.with_elem(Elem::Val(to));
        Ok(self.emit1(OpKind::Cast { x, to }, ty))
    }

    // --------------------------------------------------------------- memory

    fn ptr_elem(&self, p: V, what: &str) -> R<DType> {
        match self.ty(p).elem() {
            Some(Elem::Ptr(d)) => Ok(d),
            _ => Err(TypeError::new(format!("{what} needs a pointer or pointer tile, found {}", fmt_ty(self.ty(p))))
                .hint("offset a pointer argument: `x + offs`")
                .at(0)),
        }
    }

    fn check_mask(&mut self, m: V, operand: usize) -> R<()> {
        let t = self.tile_ty(m, operand)?;
        if t.elem() != Some(Elem::Val(DType::Bool)) {
            return Err(TypeError::new(format!("a mask must be bool, found {}", fmt_ty(&t))).hint("build it with a comparison: `offs < n`").at(operand));
        }
        Ok(())
    }

    pub fn load(&mut self, ptr: V, mask: Option<V>, other: Option<V>) -> R<V> {
        let d = self.ptr_elem(ptr, "load")?;
        if other.is_some() && mask.is_none() {
            return Err(TypeError::new("`other` without a mask has no effect").hint("pass a mask: load(ptrs, mask, other)").at(2));
        }
        let mut shape = self.ty(ptr).shape().to_vec();
        if let Some(m) = mask {
            self.check_mask(m, 1)?;
            shape = broadcast_shapes(&shape, self.ty(m).shape()).map_err(|e| e.at(1))?;
        }
        let other = match other {
            Some(o) => {
                let t = self.tile_ty(o, 2)?;
                if t.elem().is_none_or(|e| e.is_ptr()) {
                    return Err(TypeError::new(format!("`other` must be a value, found {}", fmt_ty(&t))).at(2));
                }
                let o = self.coerce_value_to(o, d).map_err(|e| e.at(2))?;
                shape = broadcast_shapes(&shape, self.ty(o).shape()).map_err(|e| e.at(2))?;
                Some(o)
            }
            None => None,
        };
        let ptr = self.broadcast_to(ptr, &shape)?;
        let mask = match mask {
            Some(m) => Some(self.broadcast_to(m, &shape)?),
            None => None,
        };
        let other = match other {
            Some(o) => Some(self.broadcast_to(o, &shape)?),
            None => None,
        };
        Ok(self.emit1(OpKind::Load { ptr, mask, other }, Type::tile(Elem::Val(d), shape)))
    }

    /// Coerce a value (weak or strong) to dtype `d`, failing on a strong mismatch.
    fn coerce_value_to(&mut self, v: V, d: DType) -> R<V> {
        let cur = self.ty(v).dtype();
        if cur == Some(d) {
            return Ok(v);
        }
        if self.info(v).weak {
            return self.coerce_scalar_to(v, d);
        }
        Err(dtype_mismatch(cur.unwrap_or(DType::Bool), d))
    }

    fn store_like(&mut self, ptr: V, value: V, mask: Option<V>, atomic: bool) -> R<()> {
        let what = if atomic { "atomic_add" } else { "store" };
        let d = self.ptr_elem(ptr, what)?;
        let vt = self.tile_ty(value, 1)?;
        let vd = match vt.elem().unwrap() {
            Elem::Val(x) => x,
            Elem::Ptr(_) => return Err(TypeError::new("storing pointers to memory is not supported").at(1)),
        };
        if vd != d && !self.info(value).weak {
            return Err(TypeError::new(format!("cannot {what} a value of type {vd} through a pointer to {d}"))
                .hint(format!("cast the value first: `value as {d}`"))
                .at(1));
        }
        if atomic && !matches!(d, DType::F32 | DType::I32 | DType::U32 | DType::F16 | DType::BF16 | DType::Generic(_)) {
            return Err(TypeError::new(format!("atomic_add is not supported on {d}")).hint("use an f32, f16, bf16, i32 or u32 tensor").at(0));
        }
        let value = self.coerce_value_to(value, d).map_err(|e| e.at(1))?;
        let pshape = self.ty(ptr).shape().to_vec();
        let mut shape = broadcast_shapes(&pshape, self.ty(value).shape()).map_err(|e| e.at(1))?;
        if let Some(m) = mask {
            self.check_mask(m, 2)?;
            shape = broadcast_shapes(&shape, self.ty(m).shape()).map_err(|e| e.at(2))?;
        }
        let ptr = self.broadcast_to(ptr, &shape)?;
        let value = self.broadcast_to(value, &shape)?;
        let mask = match mask {
            Some(m) => Some(self.broadcast_to(m, &shape)?),
            None => None,
        };
        let kind = if atomic { OpKind::AtomicAdd { ptr, value, mask } } else { OpKind::Store { ptr, value, mask } };
        self.emit(kind, vec![]);
        Ok(())
    }

    pub fn store(&mut self, ptr: V, value: V, mask: Option<V>) -> R<()> {
        self.store_like(ptr, value, mask, false)
    }

    pub fn atomic_add(&mut self, ptr: V, value: V, mask: Option<V>) -> R<()> {
        self.store_like(ptr, value, mask, true)
    }

    fn int_scalars(&mut self, vs: &[V], what: &str, first_operand: usize) -> R<Vec<V>> {
        let mut out = vec![];
        for (i, &v) in vs.iter().enumerate() {
            let t = self.tile_ty(v, first_operand)?;
            match t.dtype() {
                Some(d) if t.is_scalar() && d.is_int() => {
                    let v = if d != DType::I64 && d != DType::I32 { self.cast(v, DType::I32)? } else { v };
                    out.push(v)
                }
                _ => return Err(TypeError::new(format!("{what} must be integer scalars; entry {i} is {}", fmt_ty(&t))).at(first_operand)),
            }
        }
        Ok(out)
    }

    pub fn make_view(&mut self, base: V, shape: Vec<V>, strides: Vec<V>) -> R<V> {
        let d = self.ptr_elem(base, "view")?;
        if !self.ty(base).is_scalar() {
            return Err(TypeError::new("the base of a view must be a scalar pointer (a kernel argument)").at(0));
        }
        if shape.len() != strides.len() || shape.is_empty() || shape.len() > 3 {
            return Err(TypeError::new(format!(
                "a view needs as many strides as dimensions (1 to 3); found {} dims and {} strides",
                shape.len(),
                strides.len()
            ))
            .at(2));
        }
        let shape = self.int_scalars(&shape, "view dimensions", 1)?;
        let strides = self.int_scalars(&strides, "view strides", 2)?;
        let rank = shape.len();
        let v = self.new_value(Type::View { dtype: d, rank }, None, false);
        self.emit(OpKind::MakeView { base, shape, strides }, vec![v]);
        Ok(v)
    }

    fn view_ty(&self, v: V) -> R<(DType, usize)> {
        match self.ty(v) {
            Type::View { dtype, rank } => Ok((*dtype, *rank)),
            t => Err(TypeError::new(format!("expected a view (from `view(ptr, shape, strides)`), found {}", fmt_ty(t))).at(0)),
        }
    }

    pub fn load_block(&mut self, view: V, offsets: Vec<V>, shape: Vec<Dim>) -> R<V> {
        let (d, rank) = self.view_ty(view)?;
        if offsets.len() != rank || shape.len() != rank {
            return Err(TypeError::new(format!(
                "a rank-{rank} view needs {rank} offsets and a rank-{rank} block shape; found {} and {}",
                offsets.len(),
                shape.len()
            ))
            .at(1));
        }
        for s in &shape {
            if let Some(n) = s.known() {
                check_tile_len(n, "a block dimension")?;
            }
        }
        let offsets = self.int_scalars(&offsets, "block offsets", 1)?;
        Ok(self.emit1(OpKind::LoadBlock { view, offsets, shape: shape.clone() }, Type::tile(Elem::Val(d), shape)))
    }

    pub fn store_block(&mut self, view: V, offsets: Vec<V>, value: V) -> R<()> {
        let (d, rank) = self.view_ty(view)?;
        let vt = self.tile_ty(value, 2)?;
        if vt.rank() != rank || offsets.len() != rank {
            return Err(TypeError::new(format!("storing a {} tile into a rank-{rank} view needs a rank-{rank} tile and {rank} offsets", fmt_ty(&vt))).at(2));
        }
        if vt.dtype() != Some(d) {
            return Err(TypeError::new(format!("cannot store {} into a view of {d}", fmt_ty(&vt))).hint(format!("cast the value first: `value as {d}`")).at(2));
        }
        let offsets = self.int_scalars(&offsets, "block offsets", 1)?;
        self.emit(OpKind::StoreBlock { view, offsets, value }, vec![]);
        Ok(())
    }

    // ------------------------------------------------------- reductions, dot

    fn axis_of(&self, t: &Type, axis: i64, what: &str) -> R<usize> {
        let r = t.rank() as i64;
        let a = if axis < 0 { axis + r } else { axis };
        if r == 0 {
            return Err(TypeError::new(format!("{what} needs a tile, found the scalar {}", fmt_ty(t))).at(0));
        }
        if a < 0 || a >= r {
            return Err(TypeError::new(format!("axis {axis} is out of range for {what} of the rank-{r} tile {}", fmt_ty(t)))
                .hint(format!("valid axes are 0..{r}"))
                .at(1));
        }
        Ok(a as usize)
    }

    pub fn reduce(&mut self, op: ReduceOp, x: V, axis: i64) -> R<V> {
        let t = self.tile_ty(x, 0)?;
        let name = format!("{op:?}").to_lowercase();
        let a = self.axis_of(&t, axis, &name)?;
        let d = t.dtype().ok_or_else(|| TypeError::new(format!("cannot reduce pointers with {name}")).at(0))?;
        if d == DType::Bool && op == ReduceOp::Sum {
            return Err(TypeError::new("sum of a bool tile").hint("cast first: `mask as i32`").at(0));
        }
        let mut shape = t.shape().to_vec();
        shape.remove(a);
        let rd = match op {
            ReduceOp::Argmax | ReduceOp::Argmin => DType::I32,
            ReduceOp::Sum if matches!(d, DType::I8 | DType::U8) => DType::I32,
            _ => d,
        };
        Ok(self.emit1(OpKind::Reduce { op, x, axis: a as u8 }, Type::tile(Elem::Val(rd), shape)))
    }

    pub fn scan(&mut self, op: ScanOp, x: V, axis: i64) -> R<V> {
        let t = self.tile_ty(x, 0)?;
        let a = self.axis_of(&t, axis, "cumsum")?;
        let d = t.dtype().ok_or_else(|| TypeError::new("cannot cumsum pointers").at(0))?;
        if d == DType::Bool {
            return Err(TypeError::new("cumsum of a bool tile").hint("cast first: `mask as i32`").at(0));
        }
        let rd = if matches!(d, DType::I8 | DType::U8) { DType::I32 } else { d };
        Ok(self.emit1(OpKind::Scan { op, x, axis: a as u8 }, t.with_elem(Elem::Val(rd))))
    }

    /// `dot(a, b, acc)`; `acc: None` starts from zeros of the accumulator type.
    pub fn dot(&mut self, a: V, b: V, acc: Option<V>, precision: DotPrecision) -> R<V> {
        let (ta, tb) = (self.tile_ty(a, 0)?, self.tile_ty(b, 1)?);
        if ta.rank() != 2 {
            return Err(TypeError::new(format!("dot needs rank-2 tiles, the left operand is {}", fmt_ty(&ta)))
                .hint("dot multiplies [M, K] by [K, N] tiles; for two vectors write `sum(a * b, 0)`")
                .at(0));
        }
        if tb.rank() != 2 {
            return Err(TypeError::new(format!("dot needs rank-2 tiles, the right operand is {}", fmt_ty(&tb)))
                .hint("dot multiplies [M, K] by [K, N] tiles; for two vectors write `sum(a * b, 0)`")
                .at(1));
        }
        let (da, db) = (ta.dtype(), tb.dtype());
        let (da, db) = match (da, db) {
            (Some(x), Some(y)) => (x, y),
            _ => return Err(TypeError::new("dot of pointer tiles").at(0)),
        };
        if da != db {
            return Err(TypeError::new(format!("dot operands must have the same dtype, found {da} and {db}"))
                .hint(format!("cast one side: `b as {da}`"))
                .at(1));
        }
        let acc_d = match da {
            DType::F16 | DType::BF16 | DType::F32 | DType::Generic(_) => DType::F32,
            DType::I8 => DType::I32,
            other => {
                return Err(TypeError::new(format!("dot does not support {other} inputs"))
                    .hint("supported: f16, bf16, f32 (f32 accumulate) and i8 (i32 accumulate)")
                    .at(0))
            }
        };
        if precision.is_tf32() && da != DType::F32 && !da.is_generic() {
            return Err(TypeError::new(format!("tf32 precision applies to f32 inputs, found {da}")).at(0));
        }
        let (m, k1) = (ta.shape()[0].clone(), ta.shape()[1].clone());
        let (k2, n) = (tb.shape()[0].clone(), tb.shape()[1].clone());
        if k1.provably_eq(&k2) == Some(false) {
            return Err(TypeError::new(format!("dot inner dimensions differ: {} is {} and {} is {}", "left", fmt_ty(&ta), "right", fmt_ty(&tb)))
                .hint("the left operand's columns must equal the right operand's rows")
                .at(1));
        }
        for (dim, which) in [(&m, 0usize), (&k1, 0), (&n, 1)] {
            if let Some(v) = dim.known() {
                if v < 16 {
                    return Err(TypeError::new(format!("dot needs every dimension to be at least 16, found {v}"))
                        .hint("use a larger block, or broadcasting multiply and sum for tiny products")
                        .at(which));
                }
            }
        }
        let out_shape = vec![m, n];
        let acc = match acc {
            Some(c) => {
                let tc = self.tile_ty(c, 2)?;
                if tc.dtype() != Some(acc_d) {
                    return Err(TypeError::new(format!("the accumulator of a {da} dot must be {acc_d}, found {}", fmt_ty(&tc)))
                        .hint(format!("start it with zeros([BM, BN], {acc_d})"))
                        .at(2));
                }
                if tc.rank() != 2 {
                    return Err(TypeError::new(format!("the accumulator must be a rank-2 tile, found {}", fmt_ty(&tc))).at(2));
                }
                for (x, y) in tc.shape().iter().zip(&out_shape) {
                    if x.provably_eq(y) == Some(false) {
                        return Err(TypeError::new(format!("the accumulator is {} but the product is {}", fmt_ty(&tc), fmt_shape(&out_shape))).at(2));
                    }
                }
                c
            }
            None => {
                let z = if acc_d == DType::F32 { self.const_float(0.0, Some(DType::F32)) } else { self.const_int(0, Some(DType::I32))? };
                self.splat_to(z, &out_shape)
            }
        };
        let shape = self.ty(acc).shape().to_vec();
        Ok(self.emit1(OpKind::Dot { a, b, acc, precision }, Type::tile(Elem::Val(acc_d), shape)))
    }

    // --------------------------------------------------------- control flow

    fn scalar_index(&mut self, v: V, what: &str, operand: usize) -> R<V> {
        let t = self.tile_ty(v, operand)?;
        match t.dtype() {
            Some(d) if t.is_scalar() && d.is_int() => Ok(v),
            _ => Err(TypeError::new(format!("{what} must be an integer scalar, found {}", fmt_ty(&t))).at(operand)),
        }
    }

    /// Open a `for` loop; returns the induction variable and the block
    /// arguments standing for the carried values inside the body.
    pub fn begin_for(&mut self, lo: V, hi: V, step: V, inits: &[V]) -> R<(V, Vec<V>)> {
        let lo = self.scalar_index(lo, "the loop start", 0)?;
        let hi = self.scalar_index(hi, "the loop end", 1)?;
        let step = self.scalar_index(step, "the loop step", 2)?;
        let (lo, hi, d) = self.unify(lo, hi)?;
        let step = self.coerce_value_to(step, d).map_err(|e| e.at(2))?;
        if let Some(s) = self.info(step).cval.as_ref().and_then(|e| e.known()) {
            if s <= 0 {
                return Err(TypeError::new(format!("the loop step must be positive, found {s}")).at(2));
            }
        }
        let loc = self.loc;
        self.frames.push(Frame::For { lo, hi, step, inits: inits.to_vec(), loc });
        let iv = self.new_value(Type::scalar(d), None, false);
        let mut args = vec![iv];
        for &i in inits {
            let ty = self.ty(i).clone();
            let a = self.new_value(ty, None, false);
            if let Some(n) = self.info(i).name.clone() {
                self.set_name(a, &n);
            }
            args.push(a);
        }
        self.blocks.push(Block { args: args.clone(), ops: vec![] });
        Ok((iv, args[1..].to_vec()))
    }

    /// Coerce `v` to exactly `ty` (weak literals adapt); `None` when impossible.
    fn coerce_to_type(&mut self, v: V, ty: &Type) -> R<V> {
        let cur = self.ty(v).clone();
        if &cur == ty {
            return Ok(v);
        }
        let mut v = v;
        if let (Some(d), Some(cd)) = (ty.dtype(), cur.dtype()) {
            if d != cd {
                if !self.info(v).weak {
                    return Err(TypeError::new(format!("{} changes to {}", fmt_ty(ty), fmt_ty(&cur))));
                }
                v = self.coerce_scalar_to(v, d)?;
            }
        }
        let cur = self.ty(v).clone();
        if cur.rank() < ty.rank() && cur.is_scalar() {
            v = self.broadcast_to(v, ty.shape())?;
        }
        let cur = self.ty(v).clone();
        if &cur != ty {
            let all_provable =
                cur.elem() == ty.elem() && cur.rank() == ty.rank() && cur.shape().iter().zip(ty.shape()).all(|(a, b)| a.provably_eq(b) != Some(false));
            if all_provable && cur.shape().iter().zip(ty.shape()).any(|(a, b)| a.provably_eq(b).is_none()) {
                // Symbolically different, possibly equal: let the specializer decide.
                return self.broadcast_to(v, ty.shape());
            }
            return Err(TypeError::new(format!("{} changes to {}", fmt_ty(ty), fmt_ty(&cur))));
        }
        Ok(v)
    }

    /// Close the innermost `for`; `yields[i]` must have the type of carried `i`.
    pub fn end_for(&mut self, yields: Vec<V>) -> R<Vec<V>> {
        let Some(Frame::For { lo, hi, step, inits, loc }) = self.frames.pop() else { panic!("end_for without begin_for") };
        let arg_tys: Vec<Type> = self.blocks.last().unwrap().args[1..].iter().map(|a| self.ty(*a).clone()).collect();
        let mut ys = vec![];
        for (i, (y, t)) in yields.iter().zip(&arg_tys).enumerate() {
            let y2 = self.coerce_to_type(*y, t).map_err(|e| TypeError {
                msg: format!("a loop-carried value changes type inside the loop: {}", e.msg),
                hint: Some("keep the type and shape fixed; cast or broadcast before the loop".into()),
                operand: Some(i),
            })?;
            ys.push(y2);
        }
        self.emit(OpKind::Yield(ys), vec![]);
        let body = self.blocks.pop().unwrap();
        let results: Vec<V> = arg_tys.iter().map(|t| self.new_value(t.clone(), None, false)).collect();
        let saved = self.loc;
        self.loc = loc;
        self.emit(OpKind::For { lo, hi, step, inits, body }, results.clone());
        self.loc = saved;
        Ok(results)
    }

    /// Check an `if` condition: a scalar bool, never a tile.
    pub fn check_if_cond(&mut self, cond: V) -> R<V> {
        let t = self.tile_ty(cond, 0)?;
        if !t.is_scalar() {
            return Err(TypeError::new(format!("cannot branch on the tile value {}", fmt_ty(&t)))
                .hint("tiles are never branched on: use `select(cond, a, b)` for elementwise choice")
                .at(0));
        }
        if t.dtype() != Some(DType::Bool) {
            return Err(TypeError::new(format!("the condition of `if` must be bool, found {}", fmt_ty(&t))).hint("compare explicitly: `x != 0`").at(0));
        }
        Ok(cond)
    }

    pub fn begin_if(&mut self, cond: V) -> R<()> {
        let cond = self.check_if_cond(cond)?;
        let loc = self.loc;
        self.frames.push(Frame::IfThen { cond, loc });
        self.blocks.push(Block::default());
        Ok(())
    }

    pub fn begin_else(&mut self, then_yields: Vec<V>) {
        let Some(Frame::IfThen { cond, loc }) = self.frames.pop() else { panic!("begin_else without begin_if") };
        let then_ = self.blocks.pop().unwrap();
        self.frames.push(Frame::IfElse { cond, then_, then_yields, loc });
        self.blocks.push(Block::default());
    }

    /// Close the `if`. The then-branch fixes the result types; weak values on
    /// either side adapt to the other side.
    pub fn end_if(&mut self, else_yields: Vec<V>) -> R<Vec<V>> {
        let Some(Frame::IfElse { cond, mut then_, then_yields, loc }) = self.frames.pop() else { panic!("end_if without begin_else") };
        let mut else_b = self.blocks.pop().unwrap();
        let mut tys = vec![];
        let mut ey = vec![];
        let mut ty_then = vec![];
        for (i, (&t, &e)) in then_yields.iter().zip(&else_yields).enumerate() {
            let (tt, et) = (self.ty(t).clone(), self.ty(e).clone());
            // Decide the common type: strong side wins.
            let (target, fix_then) = if self.info(t).weak && !self.info(e).weak { (et.clone(), true) } else { (tt.clone(), false) };
            let err = |m: String| TypeError {
                msg: format!("a variable assigned in an `if` has different types in its branches: {m}"),
                hint: Some("give both branches the same dtype and shape".into()),
                operand: Some(i),
            };
            if fix_then {
                self.blocks.push(std::mem::take(&mut then_));
                let t2 = self.coerce_to_type(t, &target).map_err(|x| err(x.msg))?;
                then_ = self.blocks.pop().unwrap();
                ty_then.push(t2);
                ey.push(e);
            } else {
                self.blocks.push(std::mem::take(&mut else_b));
                let e2 = self.coerce_to_type(e, &target).map_err(|x| err(x.msg));
                else_b = self.blocks.pop().unwrap();
                ty_then.push(t);
                ey.push(e2?);
            }
            let _ = et;
            tys.push(target);
        }
        then_.ops.push(Op { kind: OpKind::Yield(ty_then), results: vec![], loc });
        else_b.ops.push(Op { kind: OpKind::Yield(ey), results: vec![], loc });
        let results: Vec<V> = tys.into_iter().map(|t| self.new_value(t, None, false)).collect();
        let saved = self.loc;
        self.loc = loc;
        self.emit(OpKind::If { cond, then_, else_: else_b }, results.clone());
        self.loc = saved;
        Ok(results)
    }

    pub fn static_assert(&mut self, cond: V, msg: &str) -> R<()> {
        let e = self.cexpr_of(cond, "the condition of static_assert").map_err(|e| e.at(0))?;
        if self.ty(cond).dtype() != Some(DType::Bool) {
            return Err(TypeError::new("the condition of static_assert must be bool").hint("compare explicitly: `BLOCK % 16 == 0`").at(0));
        }
        if e.known() == Some(0) {
            return Err(TypeError::new(format!("static_assert failed: {msg}"))
                .hint("the condition is evaluated on constants before anything runs; change the constants or the condition")
                .at(0));
        }
        if e.known().is_none() {
            self.emit(OpKind::StaticAssert { cond, msg: msg.to_string() }, vec![]);
        }
        Ok(())
    }

    pub fn print(&mut self, prefix: &str, args: Vec<V>) -> R<()> {
        for (i, a) in args.iter().enumerate() {
            self.tile_ty(*a, i + 1)?;
        }
        self.emit(OpKind::Print { prefix: prefix.to_string(), args }, vec![]);
        Ok(())
    }

    /// Append an op verbatim with pre-computed result types (used by the
    /// specializer for leaves whose typing is trivial).
    pub fn raw(&mut self, kind: OpKind, tys: Vec<(Type, Option<CExpr>, bool)>) -> Vec<V> {
        let vs: Vec<V> = tys.into_iter().map(|(t, c, w)| self.new_value(t, c, w)).collect();
        self.emit(kind, vs.clone());
        vs
    }
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
