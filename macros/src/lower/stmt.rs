//! Statements: blocks, `let`, assignment (rebinding an SSA value), `for`
//! over ranges (`step_by`, carried variables found by a pre-scan) and `if`
//! / `else` with results.

use super::*;

impl<'a> Lower<'a> {
    pub(super) fn block(&mut self, b: &syn::Block) -> SR<()> {
        self.scopes.push(vec![]);
        for s in &b.stmts {
            self.stmt(s, false)?;
        }
        self.scopes.pop();
        Ok(())
    }

    pub(super) fn stmt(&mut self, s: &Stmt, is_tail: bool) -> SR<()> {
        match s {
            Stmt::Local(local) => self.local(local),
            Stmt::Item(item) => {
                err(item, "items (functions, structs, `use`) cannot be declared inside a kernel", "declare them outside; kernels can only call DSL functions")
            }
            Stmt::Macro(m) => {
                err(&m.mac.path, "macros are not supported inside kernels", "use `print(\"x\", x)` to print and `static_assert(cond, \"msg\")` to check")
            }
            Stmt::Expr(e, semi) => {
                let r = self.stmt_expr(e)?;
                if let (Some(_), None, true) = (r, semi, is_tail) {
                    return err(e, "a kernel cannot return a value", "write results through a pointer with `store`, and end the statement with `;`");
                }
                Ok(())
            }
        }
    }

    pub(super) fn local(&mut self, local: &syn::Local) -> SR<()> {
        let (ident, mutable) = match &local.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => (pi.ident.to_string(), pi.mutability.is_some()),
            syn::Pat::Type(pt) => {
                return err(&pt.ty, "type annotations on `let` are not supported", "types are inferred; convert with `as` if you need another dtype")
            }
            syn::Pat::Tuple(pt) => {
                if let Some(init) = &local.init {
                    if init.diverge.is_none() {
                        return self.let_tuple(pt, &init.expr);
                    }
                }
                return err(&local.pat, "destructuring is only for the results of a #[func]", "bind one value per `let`");
            }
            syn::Pat::TupleStruct(_) | syn::Pat::Struct(_) | syn::Pat::Slice(_) => {
                return err(&local.pat, "destructuring is not supported in kernels", "bind one value per `let`")
            }
            p => return err(p, "unsupported pattern in `let`", "write `let name = ...;`"),
        };
        let Some(init) = &local.init else {
            return err(&local.pat, "a variable must be initialized where it is declared", "write `let mut x = zeros([BLOCK], f32);` and reassign later");
        };
        if let Some((_, d)) = &init.diverge {
            return err(d, "`let ... else` is not supported in kernels", "use `if`/`select`");
        }
        let v = self.expr(&init.expr)?;
        self.define(ident, v, mutable);
        Ok(())
    }

    /// Lower an expression in statement position; statements like `store`
    /// return no value.
    pub(super) fn stmt_expr(&mut self, e: &Expr) -> SR<Option<V>> {
        match e {
            Expr::ForLoop(f) => self.for_loop(f).map(|_| None),
            Expr::If(i) => self.if_stmt(i).map(|_| None),
            Expr::Block(b) => {
                if let Some(l) = &b.label {
                    return err(l, "labels are not supported", "");
                }
                self.block(&b.block).map(|_| None)
            }
            Expr::Assign(a) => {
                self.set_loc(a.eq_token.span);
                let v = self.expr(&a.right)?;
                self.assign(&a.left, v).map(|_| None)
            }
            Expr::Binary(bin) if compound_op(&bin.op).is_some() => {
                let op = compound_op(&bin.op).unwrap();
                let cur = self.expr(&bin.left)?;
                let rhs = self.expr(&bin.right)?;
                self.set_loc(bin.op.span());
                let v = self.binop(op, cur, rhs, sp(&bin.left), sp(&bin.right), sp(bin.op))?;
                self.assign(&bin.left, v).map(|_| None)
            }
            Expr::Call(c) => self.call_expr(c),
            Expr::MethodCall(m) => self.method_call(m),
            _ => self.expr(e).map(Some),
        }
    }

    pub(super) fn assign(&mut self, left: &Expr, v: V) -> SR<()> {
        let Expr::Path(p) = left else {
            return err(left, "only plain variables can be assigned to", "tiles are values; use `store` to write memory, `select` to update elements");
        };
        let Some(id) = p.path.get_ident() else { return err(left, "only plain variables can be assigned to", "") };
        let name = id.to_string();
        let Some(var) = self.lookup(&name).cloned() else {
            return err(id, format!("cannot assign to undeclared variable `{name}`"), format!("declare it first: `let mut {name} = ...;`"));
        };
        match var.what {
            VarKind::Constexpr => {
                return err(
                    id,
                    format!("cannot assign to the constexpr parameter `{name}`"),
                    "constexprs are fixed per specialization; use `let mut` for a run-time variable",
                )
            }
            VarKind::Arg => return err(id, format!("cannot assign to the kernel argument `{name}`"), format!("copy it first: `let mut {name}2 = {name};`")),
            VarKind::Local if !var.mutable => {
                return err(id, format!("cannot assign twice to immutable variable `{name}`"), format!("declare it with `let mut {name}`"))
            }
            _ => {}
        }
        self.b.set_name(v, &name);
        self.lookup_mut(&name).unwrap().v = v;
        Ok(())
    }

    pub(super) fn range_parts<'e>(&self, e: &'e Expr) -> SR<(&'e Expr, &'e Expr, Option<&'e Expr>, bool)> {
        match e {
            Expr::Range(r) => {
                let (Some(s), Some(t)) = (&r.start, &r.end) else {
                    return err(r, "a loop range needs a start and an end", "write `for i in 0..n`");
                };
                Ok((s, t, None, matches!(r.limits, syn::RangeLimits::Closed(_))))
            }
            Expr::Paren(p) => self.range_parts(&p.expr),
            Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
                let (s, t, _, c) = self.range_parts(&m.receiver)?;
                Ok((s, t, Some(&m.args[0]), c))
            }
            Expr::Call(c) if matches!(&*c.func, Expr::Path(p) if p.path.is_ident("range")) && (c.args.len() == 2 || c.args.len() == 3) => {
                Ok((&c.args[0], &c.args[1], c.args.get(2), false))
            }
            other => err(
                other,
                "a kernel `for` loop must iterate over an integer range",
                "write `for i in lo..hi`, `for i in (lo..hi).step_by(s)` or `for i in range(lo, hi, s)`",
            ),
        }
    }

    pub(super) fn for_loop(&mut self, f: &syn::ExprForLoop) -> SR<()> {
        if let Some(l) = &f.label {
            return err(l, "labels are not supported", "");
        }
        let iv_name = match &*f.pat {
            syn::Pat::Ident(pi) if pi.mutability.is_none() && pi.by_ref.is_none() => Some(pi.ident.to_string()),
            syn::Pat::Wild(_) => None,
            p => return err(p, "the loop variable must be a plain name", "write `for i in 0..n`"),
        };
        let (lo_e, hi_e, step_e, closed) = self.range_parts(&f.expr)?;
        let lo = self.expr(lo_e)?;
        let mut hi = self.expr(hi_e)?;
        self.set_loc(f.for_token.span);
        if closed {
            let one = self.b.const_int(1, None).unwrap();
            hi = self.b.binary(BinOp::Add, hi, one).map_err(|e| self.te(e, &[], sp(hi_e)))?;
        }
        let step = match step_e {
            Some(s) => self.expr(s)?,
            None => self.b.const_int(1, None).unwrap(),
        };
        let carried = self.carried(&f.body.stmts);
        let inits: Vec<V> = carried.iter().map(|n| self.lookup(n).unwrap().v).collect();
        self.set_loc(f.for_token.span);
        let spans = [sp(lo_e), sp(hi_e), step_e.map(sp).unwrap_or(sp(&f.expr))];
        let (iv, args) = self.b.begin_for(lo, hi, step, &inits).map_err(|e| self.te(e, &spans, sp(&f.expr)))?;
        for (n, a) in carried.iter().zip(&args) {
            self.lookup_mut(n).unwrap().v = *a;
        }
        self.scopes.push(vec![]);
        if let Some(n) = iv_name {
            self.define(n, iv, false);
        }
        self.block(&f.body)?;
        self.scopes.pop();
        let yields: Vec<V> = carried.iter().map(|n| self.lookup(n).unwrap().v).collect();
        self.set_loc(f.for_token.span);
        let results = self.b.end_for(yields).map_err(|e| {
            let name = e.operand.and_then(|i| carried.get(i)).cloned().unwrap_or_default();
            let at = find_assign_span(&f.body.stmts, &name).unwrap_or(f.for_token.span.into());
            mk_err(at, &format!("{} (variable `{name}`)", e.msg), e.hint.as_deref().unwrap_or(""))
        })?;
        for (n, r) in carried.iter().zip(results) {
            self.b.set_name(r, n);
            self.lookup_mut(n).unwrap().v = r;
        }
        Ok(())
    }

    /// Variables of enclosing scopes assigned in `stmts` (in first-assignment order).
    pub(super) fn carried(&self, stmts: &[Stmt]) -> Vec<String> {
        let mut out = vec![];
        scan_assigned(stmts, &mut HashSet::new(), &mut out);
        out.retain(|n| self.lookup(n).is_some_and(|v| v.what == VarKind::Local && v.mutable));
        out
    }

    pub(super) fn if_stmt(&mut self, i: &syn::ExprIf) -> SR<()> {
        let cond = self.expr(&i.cond)?;
        self.set_loc(i.if_token.span);
        let cond = self.b.check_if_cond(cond).map_err(|e| self.te(e, &[sp(&i.cond)], sp(&i.cond)))?;
        // Constant condition (literal or fully bound constexpr): lower only the taken branch.
        if let Some(k) = self.b.info(cond).cval.as_ref().and_then(|c| c.known()) {
            if k != 0 {
                return self.block(&i.then_branch);
            }
            return match &i.else_branch {
                Some((_, e)) => self.else_branch(e),
                None => Ok(()),
            };
        }
        let mut stmts_all: Vec<Stmt> = i.then_branch.stmts.clone();
        if let Some((_, e)) = &i.else_branch {
            stmts_all.push(Stmt::Expr((**e).clone(), None));
        }
        let carried = self.carried(&stmts_all);
        let saved: Vec<V> = carried.iter().map(|n| self.lookup(n).unwrap().v).collect();
        self.b.begin_if(cond).map_err(|e| self.te(e, &[sp(&i.cond)], sp(&i.cond)))?;
        self.block(&i.then_branch)?;
        let then_y: Vec<V> = carried.iter().map(|n| self.lookup(n).unwrap().v).collect();
        for (n, v) in carried.iter().zip(&saved) {
            self.lookup_mut(n).unwrap().v = *v;
        }
        self.b.begin_else(then_y);
        if let Some((_, e)) = &i.else_branch {
            self.else_branch(e)?;
        }
        let else_y: Vec<V> = carried.iter().map(|n| self.lookup(n).unwrap().v).collect();
        self.set_loc(i.if_token.span);
        let results = self.b.end_if(else_y).map_err(|e| {
            let name = e.operand.and_then(|k| carried.get(k)).cloned().unwrap_or_default();
            let at = find_assign_span(&stmts_all, &name).unwrap_or(i.if_token.span.into());
            mk_err(at, &format!("{} (variable `{name}`)", e.msg), e.hint.as_deref().unwrap_or(""))
        })?;
        for (n, r) in carried.iter().zip(results) {
            self.b.set_name(r, n);
            self.lookup_mut(n).unwrap().v = r;
        }
        Ok(())
    }

    pub(super) fn else_branch(&mut self, e: &Expr) -> SR<()> {
        match e {
            Expr::Block(b) => self.block(&b.block),
            Expr::If(i) => {
                self.scopes.push(vec![]);
                let r = self.if_stmt(i);
                self.scopes.pop();
                r
            }
            other => err(other, "unsupported `else` branch", ""),
        }
    }
}
