//! Values and leaves: the kernel under construction, new values and ops,
//! parameters, constexprs, literals (weak: they adopt the other operand's
//! dtype), `program_id` / `num_programs`, `arange`, `full`.

use super::*;

impl Builder {
    /// A builder for a kernel with these parameters and an empty body; `file` is the source file
    /// named in errors.
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
        Builder { kernel, blocks: vec![Block::default()], frames: vec![], loc: Loc::default(), facts: Default::default() }
    }

    /// Finish: the top-level block becomes the kernel body.
    pub fn finish(mut self) -> Kernel {
        assert!(self.frames.is_empty(), "unterminated region");
        self.kernel.body = self.blocks.pop().unwrap();
        self.kernel
    }

    /// Type of value `v`.
    pub fn ty(&self, v: V) -> &Type {
        &self.kernel.values[v.idx()].ty
    }

    /// Everything known about value `v`.
    pub fn info(&self, v: V) -> &ValueInfo {
        &self.kernel.values[v.idx()]
    }

    /// Give `v` the user's variable name, for dumps; a value keeps the first name it gets.
    pub fn set_name(&mut self, v: V, name: &str) {
        let info = &mut self.kernel.values[v.idx()];
        if info.name.is_none() {
            info.name = Some(name.to_string());
        }
    }

    pub(super) fn new_value(&mut self, ty: Type, cval: Option<CExpr>, weak: bool) -> V {
        let v = V(self.kernel.values.len() as u32);
        self.kernel.values.push(ValueInfo { ty, cval, weak, name: None, layout: None });
        v
    }

    pub(super) fn emit(&mut self, kind: OpKind, results: Vec<V>) {
        let loc = self.loc;
        if let Some(&r) = results.first() {
            self.note_facts(&kind, r);
        }
        self.blocks.last_mut().unwrap().ops.push(Op { kind, results, loc });
    }

    /// Track `Facts` through the op that defines `r`.
    fn note_facts(&mut self, kind: &OpKind, r: V) {
        let f = &mut self.facts;
        match kind {
            OpKind::Load { mask: Some(_), other: None, .. } => {
                f.zero_filled.insert(r);
            }
            OpKind::Reduce { x, axis, .. } if *axis > 0 && self.kernel.values[x.idx()].ty.rank() >= 2 => {
                f.reduced.insert(r, *axis);
            }
            OpKind::Select { .. } | OpKind::Cmp { .. } => {}
            k if k.is_elementwise() || matches!(k, OpKind::Broadcast { .. } | OpKind::Splat { .. }) => {
                let rank = self.kernel.values[r.idx()].ty.rank();
                let ops = k.operands();
                if ops.iter().any(|o| f.zero_filled.contains(o)) {
                    f.zero_filled.insert(r);
                }
                if let Some(a) = ops.iter().find(|o| self.kernel.values[o.idx()].ty.rank() == rank).and_then(|o| f.reduced.get(o)) {
                    f.reduced.insert(r, *a);
                }
            }
            _ => {}
        }
    }

    pub(super) fn emit1(&mut self, kind: OpKind, ty: Type) -> V {
        let v = self.new_value(ty, None, false);
        self.emit(kind, vec![v]);
        v
    }

    /// Read run-time parameter `idx`: a scalar pointer (`ptr<d>`) or a scalar of its dtype, named
    /// after the parameter.
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

    /// Read constexpr parameter `idx`: a weak scalar of its declared dtype whose value is the
    /// parameter.
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

    /// A float literal; `dtype: None` makes it weak (f32 unless the other operand is another float
    /// dtype).
    pub fn const_float(&mut self, val: f64, dtype: Option<DType>) -> V {
        let d = dtype.unwrap_or(DType::F32);
        let v = self.new_value(Type::scalar(d), None, dtype.is_none());
        self.emit(OpKind::Const(Lit::Float(val)), vec![v]);
        v
    }

    /// A bool literal (a constexpr).
    pub fn const_bool(&mut self, b: bool) -> V {
        self.constexpr(CExpr::Lit(b as i64), DType::Bool, false)
    }

    /// `program_id(axis)`: this program's index along grid axis 0, 1 or 2, an i32 scalar.
    pub fn program_id(&mut self, axis: i64) -> R<V> {
        check_axis3(axis)?;
        Ok(self.emit1(OpKind::ProgramId(axis as u8), Type::scalar(DType::I32)))
    }

    /// `num_programs(axis)`: the number of programs along grid axis 0, 1 or 2, an i32 scalar.
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

    /// `arange(start, end)`: the i32 tile `start, start + 1, …, end - 1`; once known, its length
    /// must be a power of two, at most 2²⁰.
    pub fn arange(&mut self, start: CExpr, end: CExpr) -> R<V> {
        let len = CExpr::bin(CBin::Sub, end.clone(), start.clone());
        if let Some(n) = len.known() {
            check_tile_len(n, "arange")?;
        }
        Ok(self.emit1(OpKind::Arange { start, end }, Type::tile(Elem::Val(DType::I32), vec![len])))
    }

    /// `full(shape, value, dtype)`: a tile of `shape` (dimensions powers of two) with every
    /// element the scalar `value`, which must already be of `dtype` unless it is weak.
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
}
