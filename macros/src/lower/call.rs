//! Calls of the DSL's functions and methods (`load`, `arange`, `dot`,
//! reductions, `view`, …): argument forms (dtypes, constant ints, shapes)
//! and the builder rule each one becomes.

use super::*;

impl<'a> Lower<'a> {
    pub(super) fn call_expr(&mut self, c: &syn::ExprCall) -> SR<Option<V>> {
        let Expr::Path(p) = &*c.func else {
            return err(&c.func, "only DSL functions can be called in kernels", "");
        };
        if let Some((f, id, tf)) = self.func_call(c)? {
            let args: Vec<&Expr> = c.args.iter().collect();
            return self.call_func(&f, id, tf, &args);
        }
        let Some(id) = p.path.get_ident() else {
            // `std::cmp::max(a, b)`, `f32::exp(x)`: point at the DSL spelling when there is one.
            let last = p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
            let hint = match last.as_str() {
                "max" | "min" => format!("for the elementwise {last}imum of two values write `{last}imum(a, b)`"),
                _ => match FUNCS.iter().find(|f| f.0 == last) {
                    Some((_, _, usage)) => format!("call the DSL function without a path: `{usage}`"),
                    None => "only DSL functions (load, store, exp, sum, dot, ...) can be called; inline the computation".to_string(),
                },
            };
            return err(&c.func, "calls to functions outside the DSL are not supported in kernels", hint);
        };
        let args: Vec<&Expr> = c.args.iter().collect();
        self.call(id, None, &args, sp(c))
    }

    pub(super) fn method_call(&mut self, m: &syn::ExprMethodCall) -> SR<Option<V>> {
        let name = m.method.to_string();
        if let Some(t) = &m.turbofish {
            return err(t, "turbofish is not supported in kernels", "");
        }
        if !METHODS.contains(&name.as_str()) {
            if self.func(&name).is_some() {
                return err(&m.method, format!("`{name}` is a #[func], not a method"), format!("call it as `{name}(x, ...)`"));
            }
            let hint = match suggest(&name, METHODS.iter().map(|s| s.to_string())) {
                Some(s) => format!("did you mean `.{s}(...)`?"),
                None => format!("tiles have these methods: {}", METHODS.join(", ")),
            };
            return err(&m.method, format!("no method `{name}` on tiles"), hint);
        }
        let name = if name == "to" { "cast".to_string() } else { name };
        let id = syn::Ident::new(&name, m.method.span());
        let args: Vec<&Expr> = m.args.iter().collect();
        self.call(&id, Some(&m.receiver), &args, sp(m))
    }

    pub(super) fn dtype_arg(&self, e: &Expr) -> SR<DType> {
        if let Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                if let Some(d) = self.dtype_param(&id.to_string()) {
                    return Ok(d);
                }
                if let Some(d) = DType::from_rust(&id.to_string()) {
                    return Ok(d);
                }
            }
        }
        err(e, "expected a dtype", "write one of f32, f16, bf16, i32, u32, i64, i8, u8, bool or a dtype parameter")
    }

    /// The memory ordering of an `atomic_add`: `Relaxed`, `Acquire`,
    /// `Release` or `AcqRel` (a path ending in one, e.g. `Sem::AcqRel`).
    pub(super) fn sem_arg(&self, e: &Expr) -> SR<ferrotile_ir::MemSem> {
        if let Expr::Path(p) = e {
            if let Some(s) = p.path.segments.last().and_then(|s| ferrotile_ir::MemSem::from_name(&s.ident.to_string())) {
                return Ok(s);
            }
        }
        err(e, "expected a memory ordering", "write one of Relaxed, Acquire, Release or AcqRel")
    }

    pub(super) fn const_int_arg(&mut self, e: &Expr, what: &str) -> SR<i64> {
        let v = self.expr(e)?;
        match self.b.info(v).cval.as_ref().and_then(|c| c.known()) {
            Some(k) => Ok(k),
            None => err(e, format!("{what} must be a constant integer"), "write a literal like `0` or `1`"),
        }
    }

    /// The axis of a reduction: `axis = N` or a constant. `max(x, 0)` /
    /// `min(x, 0)` with a bare literal is refused: it reads as the
    /// elementwise maximum with 0 (Triton's `tl.maximum`), which is
    /// `maximum(x, 0.0)` here.
    pub(super) fn axis_arg(&mut self, name: &str, e: &Expr) -> SR<i64> {
        if let Expr::Assign(a) = e {
            if matches!(&*a.left, Expr::Path(p) if p.path.is_ident("axis")) {
                return self.const_int_arg(&a.right, "the reduction axis");
            }
            return err(&a.left, "the only named argument of a reduction is `axis`", format!("write `{name}(x, axis = 0)`"));
        }
        let ambiguous = name == "max" || name == "min";
        match e {
            Expr::Lit(syn::ExprLit { lit: syn::Lit::Int(l), .. }) if ambiguous => err(
                e,
                format!("`{name}(x, {l})` is ambiguous: it would reduce `x` along axis {l}, not take the elementwise {name}imum with {l}"),
                format!(
                    "for the elementwise {name}imum write `{name}imum(x, {}.0)`; to reduce along axis {l} write `{name}(x, axis = {l})`",
                    l.base10_digits()
                ),
            ),
            Expr::Lit(syn::ExprLit { lit: syn::Lit::Float(l), .. }) if ambiguous => err(
                e,
                format!("the second argument of `{name}` is the axis to reduce along, not a value"),
                format!("for the elementwise {name}imum write `{name}imum(x, {})`; to reduce along axis 0 write `{name}(x, axis = 0)`", l.base10_digits()),
            ),
            _ => self.const_int_arg(e, "the reduction axis"),
        }
    }

    pub(super) fn dims_arg(&mut self, e: &Expr, what: &str) -> SR<Vec<Dim>> {
        let Expr::Array(a) = e else {
            return err(e, format!("{what} must be written as an array `[d0, d1, ...]`"), "e.g. `[BLOCK_M, BLOCK_N]`");
        };
        let mut out = vec![];
        for el in &a.elems {
            let v = self.expr(el)?;
            let ce = self.b.cexpr_of(v, &format!("each entry of {what}")).map_err(|x| self.te(x, &[], sp(el)))?;
            out.push(ce);
        }
        Ok(out)
    }

    pub(super) fn values_arg(&mut self, e: &Expr, what: &str) -> SR<Vec<V>> {
        let Expr::Array(a) = e else {
            return err(e, format!("{what} must be written as an array `[a, b, ...]`"), "");
        };
        a.elems.iter().map(|el| self.expr(el)).collect()
    }

    pub(super) fn str_arg(e: &Expr, what: &str) -> SR<String> {
        match e {
            Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Ok(s.value()),
            _ => err(e, format!("{what} must be a string literal"), ""),
        }
    }

    pub(super) fn call(&mut self, id: &syn::Ident, recv: Option<&Expr>, args: &[&Expr], whole: Sp) -> SR<Option<V>> {
        let name = id.to_string();
        let name = name.strip_prefix("r#").unwrap_or(&name).to_string();
        if name == self.sig.name {
            return err(id, "recursion is not supported: a kernel cannot call itself", "express repetition with a `for` loop");
        }
        let Some((_, arities, usage)) = FUNCS.iter().find(|(f, _, _)| *f == name) else {
            if self.lookup(&name).is_some() {
                return err(id, format!("`{name}` is a variable, not a function"), "");
            }
            let hint = match suggest(&name, FUNCS.iter().map(|f| f.0.to_string())) {
                Some(s) => format!("did you mean `{s}`?"),
                None => {
                    "kernels can only call DSL functions (load, store, arange, exp, sum, dot, ...); other Rust functions cannot run on the device".to_string()
                }
            };
            return err(id, format!("unknown DSL function `{name}`"), hint);
        };
        // Full argument list with the receiver first.
        let mut all: Vec<&Expr> = vec![];
        if let Some(r) = recv {
            all.push(r);
        }
        all.extend_from_slice(args);
        let n = all.len();
        if name == "print" {
            if n == 0 {
                return err(id, "`print` takes a prefix string and values", format!("usage: {usage}"));
            }
        } else if !arities.contains(&n) {
            let offset = recv.is_some() as usize;
            let want: Vec<String> = arities.iter().map(|a| (a - offset).to_string()).collect();
            return err(
                id,
                format!("`{name}` takes {} argument{}, found {}", want.join(" or "), if want == ["1"] { "" } else { "s" }, n - offset),
                format!("usage: {usage}"),
            );
        }
        let spans: Vec<Sp> = all.iter().map(sp).collect();
        self.set_loc(id.span());
        let te = |s: &Self, e: TypeError| s.te(e, &spans, whole);
        macro_rules! val {
            ($i:expr) => {{
                let v = self.expr(all[$i])?;
                v
            }};
        }
        macro_rules! done {
            ($r:expr) => {{
                self.set_loc(id.span());
                let r = $r;
                return r.map(Some).map_err(|e| te(self, e));
            }};
        }
        if let Some(u) = unop(&name) {
            let x = val!(0);
            done!(self.b.unary(u, x));
        }
        match name.as_str() {
            "program_id" | "num_programs" => {
                let a = self.const_int_arg(all[0], "the grid axis")?;
                self.set_loc(id.span());
                let r = if name == "program_id" { self.b.program_id(a) } else { self.b.num_programs(a) };
                r.map(Some).map_err(|e| te(self, e))
            }
            "arange" => {
                let (s, e) = if n == 1 { (None, all[0]) } else { (Some(all[0]), all[1]) };
                let start = match s {
                    Some(s) => {
                        let v = self.expr(s)?;
                        self.b.cexpr_of(v, "the start of arange").map_err(|x| self.te(x, &[], sp(s)))?
                    }
                    None => CExpr::Lit(0),
                };
                let ev = self.expr(e)?;
                let end = self.b.cexpr_of(ev, "the end of arange").map_err(|x| self.te(x, &[], sp(e)))?;
                self.set_loc(id.span());
                // A bad length is the arguments' fault: underline them.
                let args_at = sp_to(sp(all[0]), sp(all[n - 1]));
                self.b.arange(start, end).map(Some).map_err(|x| self.te(x, &[], args_at))
            }
            "zeros" | "full" => {
                let shape = self.dims_arg(all[0], "the shape")?;
                let d = self.dtype_arg(all[n - 1])?;
                let value = if name == "zeros" {
                    if d.is_float() {
                        self.b.const_float(0.0, Some(d))
                    } else {
                        self.b.const_int(0, None).unwrap()
                    }
                } else {
                    val!(1)
                };
                done!(self.b.full(shape, value, d))
            }
            "zeros_like" => {
                let x = val!(0);
                let t = self.b.ty(x).clone();
                let Some(d) = t.dtype() else { return err(all[0], "zeros_like needs a value tile", "") };
                let z = if d.is_float() { self.b.const_float(0.0, Some(d)) } else { self.b.const_int(0, None).unwrap() };
                done!(self.b.full(t.shape().to_vec(), z, d))
            }
            "expand_dims" => {
                let x = val!(0);
                let a = self.const_int_arg(all[1], "the axis")?;
                done!(self.b.expand_dims(x, a))
            }
            "broadcast_to" | "reshape" => {
                let x = val!(0);
                let shape = self.dims_arg(all[1], "the shape")?;
                if name == "reshape" {
                    done!(self.b.reshape(x, shape))
                }
                done!(self.b.broadcast_to(x, &shape))
            }
            "trans" => {
                let x = val!(0);
                let perm = if n == 2 {
                    let Expr::Array(a) = all[1] else { return err(all[1], "the permutation must be an array like `[1, 0]`", "") };
                    let mut p = vec![];
                    for el in &a.elems {
                        p.push(self.const_int_arg(el, "each permutation entry")?);
                    }
                    Some(p)
                } else {
                    None
                };
                done!(self.b.trans(x, perm))
            }
            "load" => {
                let p = val!(0);
                let mask_none = n >= 2 && matches!(all[1], Expr::Path(pp) if pp.path.is_ident("None"));
                let mask = if n >= 2 && !mask_none { Some(val!(1)) } else { None };
                let other = if n == 3 { Some(val!(2)) } else { None };
                done!(self.b.load(p, mask, other))
            }
            "store" => {
                let p = val!(0);
                let v = val!(1);
                let mask = if n == 3 { Some(val!(2)) } else { None };
                self.set_loc(id.span());
                self.b.store(p, v, mask).map_err(|e| te(self, e))?;
                Ok(None)
            }
            "atomic_add" => {
                let p = val!(0);
                let v = val!(1);
                let mask_none = n >= 3 && matches!(all[2], Expr::Path(pp) if pp.path.is_ident("None"));
                let mask = if n >= 3 && !mask_none { Some(val!(2)) } else { None };
                let sem = if n == 4 { self.sem_arg(all[3])? } else { ferrotile_ir::MemSem::Relaxed };
                self.set_loc(id.span());
                done!(self.b.atomic_add(p, v, mask, sem))
            }
            "view" => {
                let base = val!(0);
                let shape = self.values_arg(all[1], "the view's dimensions")?;
                let strides = self.values_arg(all[2], "the view's strides")?;
                done!(self.b.make_view(base, shape, strides))
            }
            "load_block" => {
                let view = val!(0);
                let offs = self.values_arg(all[1], "the block offsets")?;
                let shape = self.dims_arg(all[2], "the block shape")?;
                done!(self.b.load_block(view, offs, shape))
            }
            "store_block" => {
                let view = val!(0);
                let offs = self.values_arg(all[1], "the block offsets")?;
                let v = val!(2);
                self.set_loc(id.span());
                self.b.store_block(view, offs, v).map_err(|e| te(self, e))?;
                Ok(None)
            }
            "maximum" | "minimum" => {
                let (a, b) = (val!(0), val!(1));
                done!(self.b.binary(if name == "maximum" { BinOp::Max } else { BinOp::Min }, a, b))
            }
            "fma" => {
                let (a, b, c) = (val!(0), val!(1), val!(2));
                done!(self.b.fma(a, b, c))
            }
            "select" | "where" => {
                let (c, a, b) = (val!(0), val!(1), val!(2));
                done!(self.b.select(c, a, b))
            }
            "cast" => {
                let x = val!(0);
                let d = self.dtype_arg(all[1])?;
                done!(self.b.cast(x, d))
            }
            "bitcast" => {
                let x = val!(0);
                let d = self.dtype_arg(all[1])?;
                done!(self.b.bitcast(x, d))
            }
            "sum" | "max" | "min" | "argmax" | "argmin" | "cumsum" => {
                let x = val!(0);
                let axis = self.axis_arg(&name, all[1])?;
                let op = match name.as_str() {
                    "sum" => ReduceOp::Sum,
                    "max" => ReduceOp::Max,
                    "min" => ReduceOp::Min,
                    "argmax" => ReduceOp::Argmax,
                    "argmin" => ReduceOp::Argmin,
                    _ => done!(self.b.scan(ScanOp::Cumsum, x, axis)),
                };
                done!(self.b.reduce(op, x, axis))
            }
            "dot" | "dot_tf32" | "dot_tf32_trunc" => {
                let (a, b) = (val!(0), val!(1));
                let acc = if n == 3 { Some(val!(2)) } else { None };
                let p = match name.as_str() {
                    "dot" => DotPrecision::Ieee,
                    "dot_tf32" => DotPrecision::Tf32,
                    _ => DotPrecision::Tf32Trunc,
                };
                done!(self.b.dot(a, b, acc, p))
            }
            "cdiv" => {
                let (a, b) = (val!(0), val!(1));
                self.set_loc(id.span());
                let one = self.b.const_int(1, None).unwrap();
                let r = (|| {
                    let t = self.b.binary(BinOp::Add, a, b)?;
                    let t = self.b.binary(BinOp::Sub, t, one)?;
                    self.b.binary(BinOp::Div, t, b)
                })();
                r.map(Some).map_err(|e| te(self, e))
            }
            "static_assert" => {
                let c = val!(0);
                let msg = if n == 2 { Self::str_arg(all[1], "the message of static_assert")? } else { "condition is false".to_string() };
                self.set_loc(id.span());
                self.b.static_assert(c, &msg).map_err(|e| te(self, e))?;
                Ok(None)
            }
            "print" => {
                let prefix = Self::str_arg(all[0], "the first argument of print")?;
                let mut vs = vec![];
                for a in &all[1..] {
                    vs.push(self.expr(a)?);
                }
                self.set_loc(id.span());
                self.b.print(&prefix, vs).map_err(|e| te(self, e))?;
                Ok(None)
            }
            "range" => err(id, "`range(...)` is only allowed as the iterator of a `for` loop", "write `for i in range(lo, hi, step)`"),
            _ => unreachable!("function table and dispatch disagree on `{name}`"),
        }
    }
}
