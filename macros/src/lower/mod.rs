//! Lowering of a kernel body (syn AST) to generic tiled IR.
//!
//! Takes the function and its checked signature. Walks statements in order,
//! keeping a scope stack of variables (each an SSA value; reassignment rebinds).
//! `for` loops and `if`s are lowered to structured IR regions: variables
//! assigned inside them become loop-carried values / `if` results, found by a
//! pre-scan of the region. Every expression is typed by the IR builder; its
//! `TypeError`s become `syn::Error`s on the offending operand's span.
//! Constructs outside the DSL are rejected here with a hint.

mod call;
mod expr;
mod inline;
mod scope;
mod stmt;

use crate::funcs::Func;
use crate::signature::Sig;
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
    /// The `#[func]`s this kernel may call (`inline.rs`).
    funcs: Vec<Func>,
    /// The dtype parameters in scope: the kernel's, or the inlined
    /// function's bound by its call.
    dtypes: Vec<(String, DType)>,
    /// The functions being inlined, outermost first.
    inlining: Vec<String>,
    /// The location every op takes while a function written in another
    /// file is inlined: its call's.
    loc_override: Option<Loc>,
    /// The kernel's source file.
    file: String,
}

/// DSL functions: name, accepted argument counts, usage.
pub(crate) const FUNCS: &[(&str, &[usize], &str)] = &[
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
    ("atomic_add", &[2, 3, 4], "atomic_add(ptrs, value), atomic_add(ptrs, value, mask) or atomic_add(ptrs, value, mask, AcqRel)"),
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
    ("round", &[1], "round(x)"),
    ("round_tf32", &[1], "round_tf32(x)"),
    ("maximum", &[2], "maximum(a, b)"),
    ("minimum", &[2], "minimum(a, b)"),
    ("fma", &[3], "fma(a, b, c)"),
    ("select", &[3], "select(cond, a, b)"),
    ("where", &[3], "r#where(cond, a, b)"),
    ("cast", &[2], "cast(x, dtype)"),
    ("bitcast", &[2], "bitcast(x, dtype) (32-bit dtypes: f32, i32, u32)"),
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
    "round",
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
        "round" => UnOp::Round,
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

pub fn lower(f: &syn::ItemFn, sig: &Sig, funcs: Vec<Func>) -> SR<Kernel> {
    let params = sig.params.iter().map(|p| Param { name: p.ident.to_string(), kind: p.kind.clone(), written: false }).collect();
    let cxs = sig.constexprs.iter().map(|(i, d)| ConstexprParam { name: i.to_string(), dtype: *d }).collect();
    let dts = sig.dtype_params.iter().map(|i| i.to_string()).collect();
    let b = Builder::new(&sig.name, "", params, cxs, dts);
    let dtypes = sig.dtype_params.iter().enumerate().map(|(i, d)| (d.to_string(), DType::Generic(i as u8))).collect();
    let file = f.sig.ident.span().file();
    let mut l = Lower { b, scopes: vec![vec![]], sig, funcs, dtypes, inlining: vec![], loc_override: None, file };
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
