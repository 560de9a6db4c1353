//! Lowering of a kernel body (syn AST) to generic tiled IR.
//!
//! Takes the function and its checked signature. Walks statements in order,
//! keeping a scope stack of variables (each an SSA value; reassignment rebinds).
//! `for` loops and `if`s are lowered to structured IR regions: variables
//! assigned inside them become loop-carried values / `if` results, found by a
//! pre-scan of the region. Every expression is typed by the IR builder; its
//! `TypeError`s become `syn::Error`s on the offending operand's span.
//! Constructs outside the DSL are rejected here with a hint.

use crate::signature::{dtype_of_type, Sig};
use ferrotile_ir::*;
use proc_macro2::{Punct, Spacing, Span, TokenStream, TokenTree};
use quote::ToTokens;
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::{Error, Expr, Stmt};

type SR<T> = syn::Result<T>;

/// A source range: the first and last token of a syntax node. `Span::join`
/// is nightly-only, so on stable `Spanned::span()` of a multi-token node is
/// just its first token; errors keep both ends so that rustc underlines the
/// whole node (`n - offs`, not just `n`).
#[derive(Clone, Copy)]
struct Sp {
    start: Span,
    end: Span,
}

impl From<Span> for Sp {
    fn from(s: Span) -> Sp {
        Sp { start: s, end: s }
    }
}

fn sp(t: impl ToTokens) -> Sp {
    let mut it = t.into_token_stream().into_iter();
    let start = it.next().map_or_else(Span::call_site, |t| t.span());
    let end = it.last().map_or(start, |t| t.span());
    Sp { start, end }
}

/// The range from the start of `a` to the end of `b`.
fn sp_to(a: Sp, b: Sp) -> Sp {
    Sp { start: a.start, end: b.end }
}

fn err<T>(t: impl ToTokens, msg: impl AsRef<str>, hint: impl AsRef<str>) -> SR<T> {
    Err(mk_err(sp(t), msg.as_ref(), hint.as_ref()))
}

fn mk_err(at: Sp, msg: &str, hint: &str) -> Error {
    let text = if hint.is_empty() { msg.to_string() } else { format!("{msg}\n  = help: {hint}") };
    // Two placeholder tokens carrying the ends: `new_spanned` keeps both.
    let ends: TokenStream = [at.start, at.end]
        .into_iter()
        .map(|s| {
            let mut p = Punct::new('~', Spacing::Alone);
            p.set_span(s);
            TokenTree::Punct(p)
        })
        .collect();
    Error::new_spanned(ends, text)
}

#[derive(Clone)]
struct Var {
    name: String,
    v: V,
    mutable: bool,
    what: VarKind,
}

#[derive(Clone, Copy, PartialEq)]
enum VarKind {
    Local,
    Arg,
    Constexpr,
}

struct Lower<'a> {
    b: Builder,
    scopes: Vec<Vec<Var>>,
    sig: &'a Sig,
}

/// DSL functions: name, accepted argument counts, usage.
const FUNCS: &[(&str, &[usize], &str)] = &[
    ("program_id", &[1], "program_id(axis)"),
    ("num_programs", &[1], "num_programs(axis)"),
    ("arange", &[1, 2], "arange(start, end)"),
    ("zeros", &[2], "zeros([d0, d1], dtype)"),
    ("full", &[3], "full([d0, d1], value, dtype)"),
    ("zeros_like", &[1], "zeros_like(x)"),
    ("expand_dims", &[2], "expand_dims(x, axis)"),
    ("broadcast_to", &[2], "broadcast_to(x, [d0, d1])"),
    ("reshape", &[2], "reshape(x, [d0, d1])"),
    ("trans", &[1, 2], "trans(x) or trans(x, [perm])"),
    ("load", &[1, 2, 3], "load(ptrs), load(ptrs, mask) or load(ptrs, mask, other)"),
    ("store", &[2, 3], "store(ptrs, value) or store(ptrs, value, mask)"),
    ("atomic_add", &[2, 3], "atomic_add(ptrs, value) or atomic_add(ptrs, value, mask)"),
    ("view", &[3], "view(ptr, [dims], [strides])"),
    ("load_block", &[3], "load_block(view, [offsets], [block dims])"),
    ("store_block", &[3], "store_block(view, [offsets], value)"),
    ("exp", &[1], "exp(x)"),
    ("exp2", &[1], "exp2(x)"),
    ("log", &[1], "log(x)"),
    ("log2", &[1], "log2(x)"),
    ("sqrt", &[1], "sqrt(x)"),
    ("rsqrt", &[1], "rsqrt(x)"),
    ("abs", &[1], "abs(x)"),
    ("sigmoid", &[1], "sigmoid(x)"),
    ("tanh", &[1], "tanh(x)"),
    ("erf", &[1], "erf(x)"),
    ("sin", &[1], "sin(x)"),
    ("cos", &[1], "cos(x)"),
    ("floor", &[1], "floor(x)"),
    ("ceil", &[1], "ceil(x)"),
    ("round_tf32", &[1], "round_tf32(x)"),
    ("maximum", &[2], "maximum(a, b)"),
    ("minimum", &[2], "minimum(a, b)"),
    ("fma", &[3], "fma(a, b, c)"),
    ("select", &[3], "select(cond, a, b)"),
    ("where", &[3], "r#where(cond, a, b)"),
    ("cast", &[2], "cast(x, dtype)"),
    ("sum", &[2], "sum(x, axis)"),
    ("max", &[2], "max(x, axis)"),
    ("min", &[2], "min(x, axis)"),
    ("argmax", &[2], "argmax(x, axis)"),
    ("argmin", &[2], "argmin(x, axis)"),
    ("cumsum", &[2], "cumsum(x, axis)"),
    ("dot", &[2, 3], "dot(a, b) or dot(a, b, acc)"),
    ("dot_tf32", &[2, 3], "dot_tf32(a, b, acc)"),
    ("dot_tf32_trunc", &[2, 3], "dot_tf32_trunc(a, b, acc)"),
    ("cdiv", &[2], "cdiv(a, b)"),
    ("static_assert", &[1, 2], "static_assert(cond, \"message\")"),
    ("print", &[], "print(\"prefix\", x, ...)"),
    ("range", &[2, 3], "for i in range(start, end, step)"),
];

const METHODS: &[&str] = &[
    "sum",
    "max",
    "min",
    "argmax",
    "argmin",
    "cumsum",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "rsqrt",
    "abs",
    "sigmoid",
    "tanh",
    "erf",
    "sin",
    "cos",
    "floor",
    "ceil",
    "expand_dims",
    "reshape",
    "broadcast_to",
    "trans",
    "to",
];

fn unop(name: &str) -> Option<UnOp> {
    Some(match name {
        "exp" => UnOp::Exp,
        "exp2" => UnOp::Exp2,
        "log" => UnOp::Log,
        "log2" => UnOp::Log2,
        "sqrt" => UnOp::Sqrt,
        "rsqrt" => UnOp::Rsqrt,
        "abs" => UnOp::Abs,
        "sigmoid" => UnOp::Sigmoid,
        "tanh" => UnOp::Tanh,
        "erf" => UnOp::Erf,
        "sin" => UnOp::Sin,
        "cos" => UnOp::Cos,
        "floor" => UnOp::Floor,
        "ceil" => UnOp::Ceil,
        "round_tf32" => UnOp::RoundTf32,
        _ => return None,
    })
}

fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + (a[i - 1] != b[j - 1]) as usize);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn suggest(name: &str, cands: impl Iterator<Item = String>) -> Option<String> {
    cands.map(|c| (edit_distance(name, &c), c)).filter(|(d, c)| *d <= 2.max(name.len() / 3) && *d < c.len()).min_by_key(|(d, _)| *d).map(|(_, c)| c)
}

fn loc_of(span: Span) -> Loc {
    let lc = span.start();
    Loc { line: lc.line as u32, col: lc.column as u32 }
}

pub fn lower(f: &syn::ItemFn, sig: &Sig) -> SR<Kernel> {
    let params = sig.params.iter().map(|p| Param { name: p.ident.to_string(), kind: p.kind.clone(), written: false }).collect();
    let cxs = sig.constexprs.iter().map(|(i, d)| ConstexprParam { name: i.to_string(), dtype: *d }).collect();
    let dts = sig.dtype_params.iter().map(|i| i.to_string()).collect();
    let b = Builder::new(&sig.name, "", params, cxs, dts);
    let mut l = Lower { b, scopes: vec![vec![]], sig };
    l.b.loc = loc_of(f.sig.ident.span());
    for (i, p) in sig.params.iter().enumerate() {
        let v = l.b.param(i);
        l.scopes[0].push(Var { name: p.ident.to_string(), v, mutable: false, what: VarKind::Arg });
    }
    for (i, (id, _)) in sig.constexprs.iter().enumerate() {
        let v = l.b.constexpr_param(i);
        l.scopes[0].push(Var { name: id.to_string(), v, mutable: false, what: VarKind::Constexpr });
    }
    l.scopes.push(vec![]);
    let stmts = &f.block.stmts;
    for (i, s) in stmts.iter().enumerate() {
        let is_tail = i + 1 == stmts.len();
        l.stmt(s, is_tail)?;
    }
    let mut k = l.b.finish();
    let w = ferrotile_ir::analysis::written_params(&k);
    for (p, w) in k.params.iter_mut().zip(w) {
        p.written = w;
    }
    Ok(k)
}

impl<'a> Lower<'a> {
    fn set_loc(&mut self, span: Span) {
        self.b.loc = loc_of(span);
    }

    fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.iter().rev().flat_map(|s| s.iter().rev()).find(|v| v.name == name)
    }

    fn lookup_mut(&mut self, name: &str) -> Option<&mut Var> {
        self.scopes.iter_mut().rev().flat_map(|s| s.iter_mut().rev()).find(|v| v.name == name)
    }

    fn define(&mut self, name: String, v: V, mutable: bool) {
        self.b.set_name(v, &name);
        self.scopes.last_mut().unwrap().push(Var { name, v, mutable, what: VarKind::Local });
    }

    /// Turn a builder error into a spanned error: on the blamed operand when
    /// the builder says which, otherwise on the whole expression.
    fn te(&self, e: TypeError, operands: &[Sp], whole: Sp) -> Error {
        let at = e.operand.and_then(|i| operands.get(i).copied()).unwrap_or(whole);
        mk_err(at, &e.msg, e.hint.as_deref().unwrap_or(""))
    }

    // ----------------------------------------------------------- statements

    fn block(&mut self, b: &syn::Block) -> SR<()> {
        self.scopes.push(vec![]);
        for s in &b.stmts {
            self.stmt(s, false)?;
        }
        self.scopes.pop();
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt, is_tail: bool) -> SR<()> {
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

    fn local(&mut self, local: &syn::Local) -> SR<()> {
        let (ident, mutable) = match &local.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => (pi.ident.to_string(), pi.mutability.is_some()),
            syn::Pat::Type(pt) => {
                return err(&pt.ty, "type annotations on `let` are not supported", "types are inferred; convert with `as` if you need another dtype")
            }
            syn::Pat::Tuple(_) | syn::Pat::TupleStruct(_) | syn::Pat::Struct(_) | syn::Pat::Slice(_) => {
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
    fn stmt_expr(&mut self, e: &Expr) -> SR<Option<V>> {
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

    fn assign(&mut self, left: &Expr, v: V) -> SR<()> {
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

    fn range_parts<'e>(&self, e: &'e Expr) -> SR<(&'e Expr, &'e Expr, Option<&'e Expr>, bool)> {
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

    fn for_loop(&mut self, f: &syn::ExprForLoop) -> SR<()> {
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
    fn carried(&self, stmts: &[Stmt]) -> Vec<String> {
        let mut out = vec![];
        scan_assigned(stmts, &mut HashSet::new(), &mut out);
        out.retain(|n| self.lookup(n).is_some_and(|v| v.what == VarKind::Local && v.mutable));
        out
    }

    fn if_stmt(&mut self, i: &syn::ExprIf) -> SR<()> {
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

    fn else_branch(&mut self, e: &Expr) -> SR<()> {
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

    // ---------------------------------------------------------- expressions

    fn expr(&mut self, e: &Expr) -> SR<V> {
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
                let Some(d) = dtype_of_type(&c.ty, &self.sig.dtype_params) else {
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

    fn lit(&mut self, l: &syn::Lit, neg: bool) -> SR<V> {
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

    fn path(&mut self, p: &syn::ExprPath) -> SR<V> {
        if let Some(id) = p.path.get_ident() {
            let name = id.to_string();
            if let Some(v) = self.lookup(&name) {
                return Ok(v.v);
            }
            if name == "None" {
                return err(id, "`None` is only allowed as the mask of `load`", "");
            }
            if DType::from_rust(&name).is_some() || self.sig.dtype_params.iter().any(|d| d == id) {
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
            return err(id, format!("cannot find variable `{name}` in this kernel"), hint);
        }
        // Float constants: f32::INFINITY, T::NEG_INFINITY, ...
        let segs: Vec<String> = p.path.segments.iter().map(|s| s.ident.to_string()).collect();
        if segs.len() == 2 {
            let ty = segs[0].as_str();
            let is_float_ty = matches!(ty, "f32" | "f16" | "bf16") || self.sig.dtype_params.iter().any(|d| d == ty);
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

    fn bin_expr(&mut self, op: &syn::BinOp, l: V, r: V, ls: Sp, rs: Sp, whole: Sp) -> SR<V> {
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

    fn binop(&mut self, op: BinOp, l: V, r: V, ls: Sp, rs: Sp, whole: Sp) -> SR<V> {
        self.b.binary(op, l, r).map_err(|e| {
            let mut e = e;
            // Type errors about the operator itself belong on the operator.
            if e.msg.contains("not defined on") || e.msg.contains("needs bool") || e.msg.contains("need integer") {
                e.operand = None;
            }
            self.te(e, &[ls, rs], whole)
        })
    }

    // ---------------------------------------------------------------- calls

    fn call_expr(&mut self, c: &syn::ExprCall) -> SR<Option<V>> {
        let Expr::Path(p) = &*c.func else {
            return err(&c.func, "only DSL functions can be called in kernels", "");
        };
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

    fn method_call(&mut self, m: &syn::ExprMethodCall) -> SR<Option<V>> {
        let name = m.method.to_string();
        if let Some(t) = &m.turbofish {
            return err(t, "turbofish is not supported in kernels", "");
        }
        if !METHODS.contains(&name.as_str()) {
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

    fn dtype_arg(&self, e: &Expr) -> SR<DType> {
        if let Expr::Path(p) = e {
            if let Some(id) = p.path.get_ident() {
                if let Some(i) = self.sig.dtype_params.iter().position(|d| d == id) {
                    return Ok(DType::Generic(i as u8));
                }
                if let Some(d) = DType::from_rust(&id.to_string()) {
                    return Ok(d);
                }
            }
        }
        err(e, "expected a dtype", "write one of f32, f16, bf16, i32, u32, i64, i8, u8, bool or a dtype parameter")
    }

    fn const_int_arg(&mut self, e: &Expr, what: &str) -> SR<i64> {
        let v = self.expr(e)?;
        match self.b.info(v).cval.as_ref().and_then(|c| c.known()) {
            Some(k) => Ok(k),
            None => err(e, format!("{what} must be a constant integer"), "write a literal like `0` or `1`"),
        }
    }

    fn dims_arg(&mut self, e: &Expr, what: &str) -> SR<Vec<Dim>> {
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

    fn values_arg(&mut self, e: &Expr, what: &str) -> SR<Vec<V>> {
        let Expr::Array(a) = e else {
            return err(e, format!("{what} must be written as an array `[a, b, ...]`"), "");
        };
        a.elems.iter().map(|el| self.expr(el)).collect()
    }

    fn str_arg(e: &Expr, what: &str) -> SR<String> {
        match e {
            Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Ok(s.value()),
            _ => err(e, format!("{what} must be a string literal"), ""),
        }
    }

    fn call(&mut self, id: &syn::Ident, recv: Option<&Expr>, args: &[&Expr], whole: Sp) -> SR<Option<V>> {
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
            "store" | "atomic_add" => {
                let p = val!(0);
                let v = val!(1);
                let mask = if n == 3 { Some(val!(2)) } else { None };
                self.set_loc(id.span());
                let r = if name == "store" { self.b.store(p, v, mask) } else { self.b.atomic_add(p, v, mask) };
                r.map_err(|e| te(self, e))?;
                Ok(None)
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
            "sum" | "max" | "min" | "argmax" | "argmin" | "cumsum" => {
                let x = val!(0);
                let axis = self.const_int_arg(all[1], "the reduction axis")?;
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

fn compound_op(op: &syn::BinOp) -> Option<BinOp> {
    use syn::BinOp as B;
    Some(match op {
        B::AddAssign(_) => BinOp::Add,
        B::SubAssign(_) => BinOp::Sub,
        B::MulAssign(_) => BinOp::Mul,
        B::DivAssign(_) => BinOp::Div,
        B::RemAssign(_) => BinOp::Rem,
        B::BitAndAssign(_) => BinOp::And,
        B::BitOrAssign(_) => BinOp::Or,
        B::BitXorAssign(_) => BinOp::Xor,
        B::ShlAssign(_) => BinOp::Shl,
        B::ShrAssign(_) => BinOp::Shr,
        _ => return None,
    })
}

fn assigned_target(e: &Expr) -> Option<String> {
    let left = match e {
        Expr::Assign(a) => &a.left,
        Expr::Binary(b) if compound_op(&b.op).is_some() => &b.left,
        _ => return None,
    };
    match &**left {
        Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    }
}

/// Names assigned in `stmts` that are not declared (by `let`) earlier inside them.
fn scan_assigned(stmts: &[Stmt], locals: &mut HashSet<String>, out: &mut Vec<String>) {
    for s in stmts {
        match s {
            Stmt::Local(l) => {
                if let Some(init) = &l.init {
                    scan_expr(&init.expr, locals, out);
                }
                if let syn::Pat::Ident(pi) = &l.pat {
                    locals.insert(pi.ident.to_string());
                }
            }
            Stmt::Expr(e, _) => scan_expr(e, locals, out),
            _ => {}
        }
    }
}

fn scan_expr(e: &Expr, locals: &mut HashSet<String>, out: &mut Vec<String>) {
    if let Some(n) = assigned_target(e) {
        if !locals.contains(&n) && !out.contains(&n) {
            out.push(n);
        }
    }
    match e {
        Expr::Block(b) => scan_assigned(&b.block.stmts, &mut locals.clone(), out),
        Expr::ForLoop(f) => {
            let mut inner = locals.clone();
            if let syn::Pat::Ident(pi) = &*f.pat {
                inner.insert(pi.ident.to_string());
            }
            scan_assigned(&f.body.stmts, &mut inner, out)
        }
        Expr::If(i) => {
            scan_assigned(&i.then_branch.stmts, &mut locals.clone(), out);
            if let Some((_, e)) = &i.else_branch {
                scan_expr(e, &mut locals.clone(), out);
            }
        }
        _ => {}
    }
}

/// Span of the first assignment to `name` in `stmts` (for loop-carried errors).
fn find_assign_span(stmts: &[Stmt], name: &str) -> Option<Sp> {
    fn in_expr(e: &Expr, name: &str) -> Option<Sp> {
        if assigned_target(e).as_deref() == Some(name) {
            return Some(match e {
                Expr::Assign(a) => sp(&a.right),
                Expr::Binary(b) => sp(&b.right),
                _ => sp(e),
            });
        }
        match e {
            Expr::Block(b) => find_assign_span(&b.block.stmts, name),
            Expr::ForLoop(f) => find_assign_span(&f.body.stmts, name),
            Expr::If(i) => find_assign_span(&i.then_branch.stmts, name).or_else(|| i.else_branch.as_ref().and_then(|(_, e)| in_expr(e, name))),
            _ => None,
        }
    }
    stmts.iter().find_map(|s| match s {
        Stmt::Expr(e, _) => in_expr(e, name),
        _ => None,
    })
}
