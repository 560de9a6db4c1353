//! Calls of `#[func]`s: the body inlined at the call, typed with the
//! caller's values.
//!
//! The arguments are lowered in the caller's scope; the body then runs in a
//! scope of its own (its parameters only: a function sees none of its
//! caller's variables, constexprs or dtype parameters), its dtype
//! parameters bound by the call's turbofish. The values it ends with are
//! the call's results. Ops keep the body's source locations when the
//! function is written in the kernel's file (runtime reports name a line
//! of that file), and take the call's location otherwise.

use super::*;
use crate::funcs::Func;

/// How deep calls may nest (recursion is refused before this is reached;
/// this bounds a chain of distinct functions).
const MAX_DEPTH: usize = 64;

impl<'a> Lower<'a> {
    pub(super) fn func(&self, name: &str) -> Option<&Func> {
        self.funcs.iter().find(|f| f.name == name)
    }

    /// The `#[func]` a call names — by its name or a path (`f(x)`,
    /// `epilogue::gelu(x)`), with dtype arguments (`f::<T>(x)`) — with the
    /// name at the call and the turbofish; `None` when it calls none (a
    /// variable's name is the variable's).
    pub(super) fn func_call<'c>(&self, c: &'c syn::ExprCall) -> SR<Option<(Func, &'c syn::Ident, Option<&'c syn::AngleBracketedGenericArguments>)>> {
        let Expr::Path(p) = &*c.func else { return Ok(None) };
        let (None, Some(seg)) = (&p.qself, p.path.segments.last()) else { return Ok(None) };
        let name = seg.ident.to_string();
        let single = p.path.segments.len() == 1 && p.path.leading_colon.is_none();
        if single && self.lookup(&name).is_some() {
            return Ok(None);
        }
        let Some(f) = self.func(&name).cloned() else { return Ok(None) };
        let tf = match &seg.arguments {
            syn::PathArguments::AngleBracketed(a) => Some(a),
            syn::PathArguments::Parenthesized(a) => return err(a, "expected dtype arguments", "write `f::<T>(...)`"),
            syn::PathArguments::None => None,
        };
        Ok(Some((f, &seg.ident, tf)))
    }

    /// Inline a call of the `#[func]` `f`: `id` is the name at the call,
    /// `turbofish` its dtype arguments, `args` the argument expressions.
    pub(super) fn inline(&mut self, f: &Func, id: &syn::Ident, turbofish: Option<&syn::AngleBracketedGenericArguments>, args: &[&Expr]) -> SR<Vec<V>> {
        if self.inlining.contains(&f.name) {
            return err(id, format!("`{}` is called while it runs: recursion is not supported", f.name), "express repetition with a `for` loop");
        }
        if self.inlining.len() >= MAX_DEPTH {
            return err(id, format!("calls nest deeper than {MAX_DEPTH} functions"), "");
        }
        if args.len() != f.params.len() {
            let n = f.params.len();
            let names: Vec<String> = f.params.iter().map(|(p, _)| p.to_string()).collect();
            return err(
                id,
                format!("`{}` takes {n} argument{}, found {}", f.name, if n == 1 { "" } else { "s" }, args.len()),
                format!("usage: {}({})", f.name, names.join(", ")),
            );
        }
        // dtype arguments, resolved in the caller's environment
        let mut dtypes = vec![];
        let given: Vec<&syn::GenericArgument> = turbofish.map(|t| t.args.iter().collect()).unwrap_or_default();
        if given.len() != f.dtypes.len() {
            let want: Vec<String> = f.dtypes.iter().map(|d| d.to_string()).collect();
            let at: Sp = match turbofish {
                Some(t) => sp(t),
                None => sp(id),
            };
            return Err(mk_err(
                at,
                &format!("`{}` takes {} dtype argument{}, found {}", f.name, want.len(), if want.len() == 1 { "" } else { "s" }, given.len()),
                &if want.is_empty() { format!("call it as `{}(...)`", f.name) } else { format!("call it as `{}::<{}>(...)`", f.name, want.join(", ")) },
            ));
        }
        for (d, g) in f.dtypes.iter().zip(given) {
            let syn::GenericArgument::Type(t) = g else {
                return err(g, "expected a dtype", "write one of f32, f16, bf16 or a dtype parameter");
            };
            let Some(dt) = self.dtype_of_type(t) else {
                return err(t, "expected a dtype", "write one of f32, f16, bf16 or a dtype parameter");
            };
            if !dt.is_float() && !matches!(dt, DType::Generic(_)) {
                return err(
                    t,
                    format!("`{d}` is a float dtype parameter; `{}` is not a float dtype", t.to_token_stream()),
                    "write f32, f16, bf16 or a float dtype parameter",
                );
            }
            dtypes.push((d.to_string(), dt));
        }
        let vals: Vec<V> = args.iter().map(|a| self.expr(a)).collect::<SR<_>>()?;
        // the body's own scope and environment
        let same_file = f.item.sig.ident.span().file() == self.file;
        let call_loc = loc_of(id.span());
        let saved_scopes = std::mem::replace(&mut self.scopes, vec![vec![]]);
        let saved_dtypes = std::mem::replace(&mut self.dtypes, dtypes);
        let saved_loc = self.loc_override;
        if !same_file && saved_loc.is_none() {
            self.loc_override = Some(call_loc);
        }
        self.inlining.push(f.name.clone());
        for ((p, mutable), v) in f.params.iter().zip(&vals) {
            self.scopes[0].push(Var { name: p.to_string(), v: *v, mutable: *mutable, what: VarKind::Local });
        }
        self.scopes.push(vec![]);
        let r = self.body(f).map_err(|mut e| {
            e.combine(mk_err(sp(id), &format!("in this call of `{}`", f.name), ""));
            e
        });
        self.inlining.pop();
        self.loc_override = saved_loc;
        self.dtypes = saved_dtypes;
        self.scopes = saved_scopes;
        r
    }

    /// The body's statements; the last one gives the returned values.
    fn body(&mut self, f: &Func) -> SR<Vec<V>> {
        let stmts = &f.item.block.stmts;
        let (last, init) = match stmts.split_last() {
            Some((l, i)) => (Some(l), i),
            None => (None, &stmts[..]),
        };
        for s in init {
            self.stmt(s, false)?;
        }
        let ret_at = || match &f.item.sig.output {
            syn::ReturnType::Type(_, t) => sp(t),
            syn::ReturnType::Default => sp(&f.item.sig.ident),
        };
        match (f.returns, last) {
            (0, Some(s)) => {
                if let Stmt::Expr(e, None) = s {
                    if !matches!(e, Expr::ForLoop(_) | Expr::If(_) | Expr::Block(_)) {
                        return match self.stmt_expr(e)? {
                            Some(_) => err(e, format!("`{}` declares no return value", f.name), "declare one with `-> Tile`, or end the line with `;`"),
                            None => Ok(vec![]),
                        };
                    }
                }
                self.stmt(s, false)?;
                Ok(vec![])
            }
            (0, None) => Ok(vec![]),
            (n, Some(Stmt::Expr(e, None))) => {
                if n == 1 {
                    return Ok(vec![self.expr(e)?]);
                }
                let Expr::Tuple(t) = e else {
                    return err(e, format!("`{}` returns {n} tiles: end it with a tuple `(a, b)`", f.name), "");
                };
                if t.elems.len() != n {
                    return err(t, format!("`{}` returns {n} tiles, this tuple has {}", f.name, t.elems.len()), "");
                }
                t.elems.iter().map(|x| self.expr(x)).collect()
            }
            (n, Some(s)) => {
                self.stmt(s, false)?;
                Err(mk_err(
                    ret_at(),
                    &format!("`{}` must end with the {} it returns", f.name, if n == 1 { "tile" } else { "tuple" }),
                    "write the value last, without `;`",
                ))
            }
            (_, None) => Err(mk_err(ret_at(), &format!("`{}` is empty but declares a return value", f.name), "")),
        }
    }

    /// A call in value position: exactly one result.
    pub(super) fn call_func(&mut self, f: &Func, id: &syn::Ident, turbofish: Option<&syn::AngleBracketedGenericArguments>, args: &[&Expr]) -> SR<Option<V>> {
        let n = f.returns;
        let vals = self.inline(f, id, turbofish, args)?;
        match n {
            0 => Ok(None),
            1 => Ok(Some(vals[0])),
            n => err(
                id,
                format!("`{}` returns {n} tiles", f.name),
                format!("bind them: `let ({}) = {}(...);`", (0..n).map(|i| format!("v{i}")).collect::<Vec<_>>().join(", "), f.name),
            ),
        }
    }

    /// `let (a, b) = f(...);` with `f` a `#[func]` returning a tuple.
    pub(super) fn let_tuple(&mut self, pt: &syn::PatTuple, init: &Expr) -> SR<()> {
        let mut names = vec![];
        for p in &pt.elems {
            match p {
                syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => names.push(Some((pi.ident.to_string(), pi.mutability.is_some()))),
                syn::Pat::Wild(_) => names.push(None),
                p => return err(p, "only names (or `_`) can be bound from a tuple", "write `let (a, b) = f(...);`"),
            }
        }
        let call = match init {
            Expr::Call(c) => Some(c),
            Expr::Paren(p) => match &*p.expr {
                Expr::Call(c) => Some(c),
                _ => None,
            },
            _ => None,
        };
        let found = match call {
            Some(c) => self.func_call(c)?.map(|(f, id, tf)| (c, f, id, tf)),
            None => None,
        };
        let Some((c, f, id, tf)) = found else {
            return err(pt, "destructuring is only for the results of a #[func]", "bind one value per `let`");
        };
        if f.returns != names.len() {
            return err(
                pt,
                format!("`{}` returns {} value{}, the pattern binds {}", f.name, f.returns, if f.returns == 1 { "" } else { "s" }, names.len()),
                "",
            );
        }
        let args: Vec<&Expr> = c.args.iter().collect();
        let vals = self.inline(&f, id, tf, &args)?;
        for (n, v) in names.into_iter().zip(vals) {
            if let Some((n, m)) = n {
                self.define(n, v, m);
            }
        }
        Ok(())
    }
}
