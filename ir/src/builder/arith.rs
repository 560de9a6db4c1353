//! Arithmetic typing: dtype unification (weak literals and scalars coerce,
//! tiles never convert implicitly), broadcasting of operand pairs, binary
//! and unary ops, pointer offsets, comparisons, `fma`, `select`, casts.

use super::*;

impl Builder {
    pub(super) fn tile_ty(&self, v: V, operand: usize) -> R<Type> {
        match self.ty(v) {
            t @ Type::Tile { .. } => Ok(t.clone()),
            t => Err(TypeError::new(format!("expected a tile or scalar, found the view {}", fmt_ty(t))).at(operand)),
        }
    }

    /// Make a weak scalar (literal/constexpr) take dtype `d`.
    pub(super) fn coerce_scalar_to(&mut self, v: V, d: DType) -> R<V> {
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

    pub(super) fn kernel_op_of(&self, v: V) -> Option<OpKind> {
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
    pub(super) fn unify(&mut self, a: V, b: V) -> R<(V, V, DType)> {
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

    pub(super) fn broadcast_pair(&mut self, a: V, b: V) -> R<(V, V, Vec<Dim>)> {
        let sa = self.ty(a).shape().to_vec();
        let sb = self.ty(b).shape().to_vec();
        let shape = broadcast_shapes(&sa, &sb).map_err(|e| e.at(1))?;
        let a = self.broadcast_to(a, &shape)?;
        let b = self.broadcast_to(b, &shape)?;
        Ok((a, b, shape))
    }

    /// `a op b`. A pointer plus or minus an integer becomes [`OpKind::AddPtr`]; otherwise the
    /// operands are brought to one dtype (weak ones adopt the other's) and broadcast to one shape,
    /// and integer or bool constexprs fold to a constexpr.
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

    pub(super) fn add_ptr(&mut self, ptr: V, off: V) -> R<V> {
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

    /// `a op b`, a comparison: operands brought to one dtype and broadcast; the result is bool.
    /// Integer and bool constexprs fold.
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

    /// `op(x)`. A float-only op turns a weak integer into f32 and rejects other non-floats; `-`
    /// and `!` of a constexpr fold.
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

    /// `fma(a, b, c)`: `a * b + c` on floats, the three operands brought to one dtype and
    /// broadcast together.
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

    /// `select(cond, a, b)`: `cond` a bool tile; `a` and `b` values brought to one dtype, or
    /// pointers to one dtype; the three broadcast together.
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

    /// `x as to`: elementwise conversion. A strong `x` that already has dtype `to` is returned as
    /// it is; a constexpr scalar cast to an integer or bool dtype stays a constexpr.
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

    /// `bitcast(x, to)`: the bits of each element read as `to`, both 32-bit
    /// dtypes (f32, i32, u32) — `(q | 0x4B000000)` read as an f32 is
    /// `2²³ + q`. A dtype parameter is checked when it is bound.
    pub fn bitcast(&mut self, x: V, to: DType) -> R<V> {
        let t = self.tile_ty(x, 0)?;
        let from = match t.elem().unwrap() {
            Elem::Val(d) => d,
            Elem::Ptr(_) => return Err(TypeError::new("pointers cannot be bitcast").at(0)),
        };
        let ok = |d: DType| matches!(d, DType::F32 | DType::I32 | DType::U32 | DType::Generic(_));
        if !ok(from) {
            return Err(TypeError::new(format!("bitcast takes a 32-bit value (f32, i32, u32), not {from}")).at(0));
        }
        if !ok(to) {
            return Err(TypeError::new(format!("bitcast gives a 32-bit dtype (f32, i32, u32), not {to}")).at(1));
        }
        if from == to {
            return Ok(x);
        }
        let ty = t.with_elem(Elem::Val(to));
        Ok(self.emit1(OpKind::Bitcast { x, to }, ty))
    }
}
