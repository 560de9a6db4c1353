//! Expressions: literals (weak unless suffixed), paths (variables,
//! constexprs, dtype constants), unary and binary operators, casts.

use super::*;

impl<'a> Lower<'a> {
    pub(super) fn expr(&mut self, e: &Expr) -> SR<V> {
        match e {
            Expr::Lit(l) => self.lit(&l.lit, false),
            Expr::Paren(p) => self.expr(&p.expr),
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Path(p) => self.path(p),
            Expr::Binary(b) => {
                if compound_op(&b.op).is_some() {
                    return err(b.op, "compound assignment is a statement, not a value", "write it on its own line");
                }
                let l = self.expr(&b.left)?;
                let r = self.expr(&b.right)?;
                self.set_loc(b.op.span());
                self.bin_expr(&b.op, l, r, sp(&b.left), sp(&b.right), sp(b.op))
            }
            Expr::Unary(u) => {
                if let (syn::UnOp::Neg(_), Expr::Lit(l)) = (&u.op, &*u.expr) {
                    return self.lit(&l.lit, true);
                }
                let x = self.expr(&u.expr)?;
                self.set_loc(u.op.span());
                let op = match u.op {
                    syn::UnOp::Neg(_) => UnOp::Neg,
                    syn::UnOp::Not(_) => UnOp::Not,
                    syn::UnOp::Deref(t) => return err(t, "dereferencing is not supported in kernels", "read memory with `load(ptrs, mask, other)`"),
                    _ => return err(u, "unsupported unary operator", ""),
                };
                self.b.unary(op, x).map_err(|e| self.te(e, &[sp(&u.expr)], sp(u)))
            }
            Expr::Cast(c) => {
                let x = self.expr(&c.expr)?;
                if matches!(&*c.ty, syn::Type::Path(p) if p.path.is_ident("f64")) {
                    return err(&c.ty, "f64 is not supported in kernels", "cast to f32: tiles hold f32, f16, bf16 and integers");
                }
                let Some(d) = self.dtype_of_type(&c.ty) else {
                    return err(&c.ty, "unsupported cast target", "cast to f32, f16, bf16, i32, u32, i64, i8, u8, bool or a dtype parameter");
                };
                self.set_loc(c.as_token.span);
                self.b.cast(x, d).map_err(|e| self.te(e, &[sp(&c.expr)], sp(c)))
            }
            Expr::Call(c) => match self.call_expr(c)? {
                Some(v) => Ok(v),
                None => err(c, "this call returns no value", "use it as a statement"),
            },
            Expr::MethodCall(m) => match self.method_call(m)? {
                Some(v) => Ok(v),
                None => err(m, "this call returns no value", "use it as a statement"),
            },
            Expr::If(i) => err(
                i.if_token,
                "`if` cannot be used as a value in a kernel",
                "use `select(cond, a, b)` for values, or assign a `let mut` variable in each branch",
            ),
            Expr::While(w) => {
                err(w.while_token, "`while` loops are not supported in kernels", "use `for i in lo..hi` with a bound; mask the work you do not need")
            }
            Expr::Loop(l) => err(l.loop_token, "`loop` is not supported in kernels", "use `for i in lo..hi` with a bound"),
            Expr::Match(m) => err(m.match_token, "`match` is not supported in kernels", "use `if` on scalars and `select(cond, a, b)` on tiles"),
            Expr::Closure(c) => Err(mk_err(sp_to(sp(c.or1_token), sp(c.or2_token)), "closures are not supported in kernels", "write the computation inline")),
            Expr::Reference(r) => err(r.and_token, "references are not supported in kernels", "tiles are values; pass them directly"),
            Expr::Unsafe(u) => {
                err(u.unsafe_token, "`unsafe` is not allowed in kernels", "kernel code is checked; out-of-bounds accesses are errors, so no `unsafe` is needed")
            }
            Expr::Return(r) => {
                if let Some(f) = self.inlining.last() {
                    return err(
                        r.return_token,
                        format!("`return` is not supported in a #[func] (`{f}`)"),
                        "end the body with the value it returns, without `;`",
                    );
                }
                if r.expr.is_some() {
                    err(r.return_token, "a kernel cannot return a value", "write results through a pointer with `store`")
                } else {
                    err(r.return_token, "early `return` is not supported in kernels", "put the rest of the kernel under `if`, or mask the work")
                }
            }
            Expr::Break(b) => err(b.break_token, "`break` is not supported in kernels", "loops run over a fixed range; mask the remaining iterations"),
            Expr::Continue(c) => err(c.continue_token, "`continue` is not supported in kernels", "put the rest of the body under `if`"),
            Expr::Index(i) => {
                err(i, "indexing tiles is not supported", "tiles have no addressable elements; use `load` with offsets, or `select` with an `arange` mask")
            }
            Expr::Field(f) => err(f, "field access is not supported in kernels", ""),
            Expr::Tuple(t) => err(t, "tuples are not supported in kernels", "bind each value with its own `let`"),
            Expr::Array(a) => err(a, "an array is only allowed as a shape, offset list or permutation argument", "e.g. `zeros([BM, BN], f32)`"),
            Expr::Macro(m) => {
                err(&m.mac.path, "macros are not supported inside kernels", "use `print(\"x\", x)` to print and `static_assert(cond, \"msg\")` to check")
            }
            Expr::Range(r) => err(r, "a range is only allowed as the iterator of a `for` loop", ""),
            Expr::Block(b) => err(b, "a block cannot be used as a value", "compute the value with `let` statements"),
            Expr::Assign(a) => err(a, "an assignment is not a value", "write it on its own line"),
            Expr::ForLoop(f) => err(f.for_token, "a `for` loop is not a value", ""),
            Expr::Await(a) => err(a, "`.await` is not supported in kernels", ""),
            Expr::Async(a) => err(a, "`async` is not supported in kernels", ""),
            Expr::Try(t) => err(t, "`?` is not supported in kernels", "kernels do not fail; mask invalid elements"),
            Expr::Struct(s) => err(s, "structs are not supported in kernels", ""),
            other => err(other, "this expression is not supported in kernels", "see the ferrotile DSL reference"),
        }
    }

    pub(super) fn lit(&mut self, l: &syn::Lit, neg: bool) -> SR<V> {
        self.set_loc(l.span());
        match l {
            syn::Lit::Int(i) => {
                let d = match i.suffix() {
                    "" => None,
                    s => match DType::from_rust(s) {
                        Some(d) if d != DType::Bool => Some(d),
                        _ => return err(i, format!("unsupported literal suffix `{s}`"), "use i32, u32, i64, i8, u8, f32, f16 or bf16"),
                    },
                };
                let v: i64 = match i.base10_parse::<i64>() {
                    Ok(v) => v,
                    Err(_) => return err(i, "integer literal out of range", "it must fit in i64"),
                };
                let v = if neg { -v } else { v };
                self.b.const_int(v, d).map_err(|e| self.te(e, &[], sp(i)))
            }
            syn::Lit::Float(f) => {
                let d = match f.suffix() {
                    "" => None,
                    "f32" => Some(DType::F32),
                    "f64" => return err(f, "f64 is not supported in kernels", "use f32 (or drop the suffix)"),
                    s => return err(f, format!("unsupported literal suffix `{s}`"), "use f32 or no suffix"),
                };
                let v: f64 = f.base10_parse().map_err(|e| Error::new(f.span(), e.to_string()))?;
                Ok(self.b.const_float(if neg { -v } else { v }, d))
            }
            syn::Lit::Bool(b) => {
                if neg {
                    return err(b, "unary `-` is not defined on booleans", "use `!`");
                }
                Ok(self.b.const_bool(b.value))
            }
            syn::Lit::Str(s) => err(s, "strings are only allowed as the message of `static_assert` or the prefix of `print`", ""),
            other => err(other, "unsupported literal", ""),
        }
    }

    pub(super) fn path(&mut self, p: &syn::ExprPath) -> SR<V> {
        if let Some(id) = p.path.get_ident() {
            let name = id.to_string();
            if let Some(v) = self.lookup(&name) {
                return Ok(v.v);
            }
            if name == "None" {
                return err(id, "`None` is only allowed as the mask of `load`", "");
            }
            if DType::from_rust(&name).is_some() || self.dtype_param(&name).is_some() {
                return err(id, format!("the dtype `{name}` is not a value"), format!("convert values with `x as {name}`"));
            }
            if FUNCS.iter().any(|(f, _, _)| *f == name) {
                return err(id, format!("`{name}` is a DSL function, not a value"), format!("call it: `{name}(...)`"));
            }
            let cands = self.scopes.iter().flatten().map(|v| v.name.clone());
            let hint = match suggest(&name, cands) {
                Some(s) => format!("did you mean `{s}`?"),
                None => "declare it with `let` before using it".to_string(),
            };
            if let Some(f) = self.inlining.last() {
                let hint = if self.funcs.iter().any(|g| g.name == name) {
                    format!("`{name}` is a #[func]: call it, `{name}(...)`")
                } else {
                    format!("{hint} (a #[func] sees only its parameters: pass what it needs)")
                };
                return err(id, format!("cannot find variable `{name}` in the #[func] `{f}`"), hint);
            }
            return err(id, format!("cannot find variable `{name}` in this kernel"), hint);
        }
        // Float constants: f32::INFINITY, T::NEG_INFINITY, ...
        let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segs.len() == 2 {
            let ty = segs[0].as_str();
            let is_float_ty = matches!(ty, "f32" | "f16" | "bf16") || self.dtype_param(ty).is_some();
            if is_float_ty {
                let val = match (ty, segs[1].as_str()) {
                    (_, "INFINITY") => Some(f64::INFINITY),
                    (_, "NEG_INFINITY") => Some(f64::NEG_INFINITY),
                    (_, "NAN") => Some(f64::NAN),
                    ("f32", "MAX") => Some(f32::MAX as f64),
                    ("f32", "MIN") => Some(f32::MIN as f64),
                    ("f32", "EPSILON") => Some(f32::EPSILON as f64),
                    ("f16", "MAX") => Some(65504.0),
                    ("f16", "MIN") => Some(-65504.0),
                    ("bf16", "MAX") => Some(3.3895313892515355e38),
                    ("bf16", "MIN") => Some(-3.3895313892515355e38),
                    _ => None,
                };
                if let Some(v) = val {
                    self.set_loc(p.span());
                    return Ok(self.b.const_float(v, None));
                }
            }
            if ty == "i32" && segs[1] == "MAX" {
                return self.b.const_int(i32::MAX as i64, None).map_err(|e| self.te(e, &[], sp(p)));
            }
            if ty == "i32" && segs[1] == "MIN" {
                return self.b.const_int(i32::MIN as i64, None).map_err(|e| self.te(e, &[], sp(p)));
            }
        }
        err(
            p,
            "paths to items outside the kernel are not supported",
            "only local variables, arguments, constexprs and constants like `f32::INFINITY` can be named",
        )
    }

    pub(super) fn bin_expr(&mut self, op: &syn::BinOp, l: V, r: V, ls: Sp, rs: Sp, whole: Sp) -> SR<V> {
        use syn::BinOp as B;
        let cmp = match op {
            B::Eq(_) => Some(CmpOp::Eq),
            B::Ne(_) => Some(CmpOp::Ne),
            B::Lt(_) => Some(CmpOp::Lt),
            B::Le(_) => Some(CmpOp::Le),
            B::Gt(_) => Some(CmpOp::Gt),
            B::Ge(_) => Some(CmpOp::Ge),
            _ => None,
        };
        if let Some(c) = cmp {
            return self.b.cmp(c, l, r).map_err(|e| self.te(e, &[ls, rs], whole));
        }
        let bop = match op {
            B::Add(_) => BinOp::Add,
            B::Sub(_) => BinOp::Sub,
            B::Mul(_) => BinOp::Mul,
            B::Div(_) => BinOp::Div,
            B::Rem(_) => BinOp::Rem,
            B::And(_) => BinOp::LAnd,
            B::Or(_) => BinOp::LOr,
            B::BitAnd(_) => BinOp::And,
            B::BitOr(_) => BinOp::Or,
            B::BitXor(_) => BinOp::Xor,
            B::Shl(_) => BinOp::Shl,
            B::Shr(_) => BinOp::Shr,
            _ => return Err(mk_err(whole, "unsupported operator", "")),
        };
        self.binop(bop, l, r, ls, rs, whole)
    }

    pub(super) fn binop(&mut self, op: BinOp, l: V, r: V, ls: Sp, rs: Sp, whole: Sp) -> SR<V> {
        self.b.binary(op, l, r).map_err(|e| {
            let mut e = e;
            // Type errors about the operator itself belong on the operator.
            if e.msg.contains("not defined on") || e.msg.contains("needs bool") || e.msg.contains("need integer") {
                e.operand = None;
            }
            self.te(e, &[ls, rs], whole)
        })
    }
}
