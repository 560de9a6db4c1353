//! `#[func]`: tile functions a kernel (or another function) calls.
//!
//! Takes a function written in the tile DSL whose parameters are tiles of
//! any shape and dtype (`x: Tile`; a `view` is such a value too),
//! optionally generic over float dtypes (`<U: Float>`, bound at each call
//! with a turbofish), returning nothing, one tile or a tuple of tiles. A call is *inlined* by the caller's lowering: the
//! arguments are the caller's values, the body is typed again at every call
//! with the shapes and dtypes it gets there (as Triton specializes a
//! `@jit` helper per call), and its errors are reported on the helper's own
//! tokens.
//!
//! How a kernel gets the body. A proc-macro sees one item only, so each
//! `#[func] fn f` becomes a `macro_rules! f` carrying its source (and the
//! sources of every function it calls, resolved where `f` is written),
//! imported by path like any item (`use crate::epilogue::f;`). A `#[kernel]`
//! (or `#[func]`) that calls `f` and does not have its body yet expands to
//! `f! { @kernel { bodies so far } <the item> }`; `f!` puts the item back
//! with its attribute, now given `f`'s body — one round per function the
//! item calls directly. Names are resolved by Rust, where the item is
//! written, so a misspelled or missing function is rustc's "cannot find
//! macro" on the call.
//!
//! What it guarantees: the bodies an item lowers with are exactly the ones
//! its calls resolve to — a body marked `direct` was resolved from the item
//! itself; one reached through another function was resolved where that
//! function is written, and two *different* functions of one name reaching
//! one item are an error rather than a silent choice. A `pub` function is
//! usable from other crates (`use ferrotile_kernels::epilogue::gelu;`): its
//! macro is exported under a name of its own and re-exported where the
//! function is written.

use crate::lower::FUNCS;
use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use std::collections::HashSet;
use syn::visit::Visit;
use syn::{Error, Expr, ItemFn};

/// The marker on a body an item resolved itself.
const DIRECT: &str = "__ferrotile_direct";

/// A function's checked signature and body, as a caller inlines it.
#[derive(Clone)]
pub struct Func {
    pub item: ItemFn,
    pub name: String,
    /// Parameter names and whether they are `mut`.
    pub params: Vec<(syn::Ident, bool)>,
    /// Float dtype parameters (`<U: Float>`), bound at each call.
    pub dtypes: Vec<syn::Ident>,
    /// How many values it returns: 0 (none), 1 (`-> Tile`) or a tuple's length.
    pub returns: usize,
    /// Resolved by the item being expanded (not carried by another function).
    pub direct: bool,
}

fn err<T>(t: impl ToTokens, msg: &str, hint: &str) -> syn::Result<T> {
    let help = if hint.is_empty() { String::new() } else { format!("\n  = help: {hint}") };
    Err(Error::new_spanned(t, format!("{msg}{help}")))
}

fn is_tile(t: &syn::Type) -> bool {
    matches!(t, syn::Type::Path(p) if p.qself.is_none() && p.path.is_ident("Tile"))
}

/// Check a `#[func]`'s signature.
pub fn check(f: &ItemFn) -> syn::Result<Func> {
    let s = &f.sig;
    let name = s.ident.to_string();
    if let Some(t) = &s.constness {
        return err(t, "a #[func] cannot be `const`", "remove `const`");
    }
    if let Some(t) = &s.asyncness {
        return err(t, "a #[func] cannot be `async`", "remove `async`");
    }
    if let Some(t) = &s.unsafety {
        return err(t, "a #[func] cannot be `unsafe`", "every access in it is checked, as in a kernel");
    }
    if let Some(a) = &s.abi {
        return err(a, "a #[func] cannot declare an ABI", "remove it");
    }
    if let Some(v) = &s.variadic {
        return err(v, "a #[func] cannot be variadic", "");
    }
    if FUNCS.iter().any(|(d, _, _)| *d == name) || name == "range" {
        return err(&s.ident, &format!("`{name}` is a DSL function"), "name the function differently");
    }
    let mut dtypes = vec![];
    for g in &s.generics.params {
        match g {
            syn::GenericParam::Type(t)
                if t.bounds.len() == 1 && matches!(&t.bounds[0], syn::TypeParamBound::Trait(b) if b.path.is_ident("Float")) && t.default.is_none() =>
            {
                dtypes.push(t.ident.clone())
            }
            syn::GenericParam::Const(c) => {
                return err(
                    c,
                    "a #[func] takes constants as ordinary arguments",
                    &format!("write `{}: Tile` and pass the constexpr: a constant stays constant through the call", c.ident),
                )
            }
            g => return err(g, "a #[func] can only be generic over float dtypes", "write `<U: Float>` and call it as `f::<T>(...)`"),
        }
    }
    if let Some(w) = &s.generics.where_clause {
        return err(w, "a #[func] cannot have a `where` clause", "write the bound inline: `<U: Float>`");
    }
    let mut params = vec![];
    let mut seen = HashSet::new();
    for a in &s.inputs {
        let syn::FnArg::Typed(pt) = a else {
            return err(a, "a #[func] cannot take `self`", "a #[func] is a free function of tiles: write it outside the `impl`");
        };
        let (ident, mutable) = match &*pt.pat {
            syn::Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => (pi.ident.clone(), pi.mutability.is_some()),
            p => return err(p, "a #[func] parameter must be a plain name", "write `x: Tile`"),
        };
        if !is_tile(&pt.ty) {
            return err(
                &pt.ty,
                "the parameters of a #[func] are tiles",
                "write `x: Tile`: a tile (or scalar, or pointer tile) of any shape and dtype, typed at each call",
            );
        }
        if !seen.insert(ident.to_string()) {
            return err(&ident, &format!("parameter `{ident}` is declared twice"), "");
        }
        params.push((ident, mutable));
    }
    let returns = match &s.output {
        syn::ReturnType::Default => 0,
        syn::ReturnType::Type(_, t) => match &**t {
            t if is_tile(t) => 1,
            syn::Type::Tuple(tt) if tt.elems.is_empty() => 0,
            syn::Type::Tuple(tt) if tt.elems.iter().all(is_tile) && tt.elems.len() >= 2 => tt.elems.len(),
            t => return err(t, "a #[func] returns tiles", "write `-> Tile`, `-> (Tile, Tile)`, or nothing"),
        },
    };
    // (what the body's shape already says, before any call types it)
    if let Some(r) = first_return(&f.block) {
        return err(r, &format!("`return` is not supported in a #[func] (`{name}`)"), "end the body with the value it returns, without `;`");
    }
    if returns > 0 && !matches!(f.block.stmts.last(), Some(syn::Stmt::Expr(_, None))) {
        let at: &dyn ToTokens = match &s.output {
            syn::ReturnType::Type(_, t) => t,
            syn::ReturnType::Default => &s.ident,
        };
        return err(at, &format!("`{name}` must end with the {} it returns", if returns == 1 { "tile" } else { "tuple" }), "write the value last, without `;`");
    }
    if let Some(at) = self_call(&f.block, &s.ident) {
        return Err(Error::new(at, format!("`{name}` calls itself: recursion is not supported\n  = help: express repetition with a `for` loop")));
    }
    Ok(Func { item: f.clone(), name, params, dtypes, returns, direct: false })
}

/// The functions given to an item by earlier rounds: the attribute
/// arguments `__funcs { fn ... }` (empty for a user's attribute).
pub fn parse_given(attr: TokenStream, what: &str) -> syn::Result<Vec<Func>> {
    if attr.is_empty() {
        return Ok(vec![]);
    }
    let parser = |input: syn::parse::ParseStream| -> syn::Result<Vec<ItemFn>> {
        let kw: syn::Ident = input.parse()?;
        if kw != "__funcs" {
            return Err(Error::new(kw.span(), ""));
        }
        let body;
        syn::braced!(body in input);
        let mut v = vec![];
        while !body.is_empty() {
            v.push(body.parse()?);
        }
        if !input.is_empty() {
            return Err(input.error(""));
        }
        Ok(v)
    };
    let items = match syn::parse::Parser::parse2(parser, attr.clone()) {
        Ok(v) => v,
        Err(_) => {
            return err(attr, &format!("#[{what}] takes no arguments"), "launch options (grid, num_warps) are given at launch");
        }
    };
    let mut out: Vec<Func> = vec![];
    for mut item in items {
        let direct = item.attrs.iter().any(|a| a.path().is_ident(DIRECT));
        item.attrs.retain(|a| !a.path().is_ident(DIRECT));
        let mut f = check(&item)?;
        f.direct = direct;
        match out.iter_mut().find(|o| o.name == f.name) {
            Some(o) => {
                if o.item.to_token_stream().to_string() != f.item.to_token_stream().to_string() {
                    let at = if f.direct { &f.item.sig.ident } else { &o.item.sig.ident };
                    return err(
                        at,
                        &format!("two different #[func]s named `{}` are called from here (one directly or through another function)", f.name),
                        "rename one of them",
                    );
                }
                o.direct |= f.direct;
            }
            None => out.push(f),
        }
    }
    Ok(out)
}

/// The first `return` in `block`.
fn first_return(block: &syn::Block) -> Option<syn::token::Return> {
    struct V(Option<syn::token::Return>);
    impl<'ast> Visit<'ast> for V {
        fn visit_expr_return(&mut self, r: &'ast syn::ExprReturn) {
            self.0.get_or_insert(r.return_token);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut v = V(None);
    v.visit_block(block);
    v.0
}

/// The first call of `name` in `block`.
fn self_call(block: &syn::Block, name: &syn::Ident) -> Option<Span> {
    struct V<'n>(&'n syn::Ident, Option<Span>);
    impl<'ast> Visit<'ast> for V<'_> {
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if let Expr::Path(p) = &*c.func {
                if self.1.is_none() && p.path.segments.len() == 1 && p.path.segments[0].ident == *self.0 {
                    self.1 = Some(p.path.segments[0].ident.span());
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut v = V(name, None);
    v.visit_block(block);
    v.1
}

/// A call of a function the item needs: its name, the path it was
/// called by (without dtype arguments), where.
pub struct Call {
    pub name: String,
    pub path: syn::Path,
    pub at: Span,
}

/// Functions called in `block` that are not DSL functions nor variables:
/// the `#[func]`s it needs, each with its first call. A path whose last
/// segment is a DSL function (`f32::exp`, `std::cmp::max`) is left to the
/// lowering, which says how the DSL spells it.
pub fn direct_calls(block: &syn::Block, sig: &syn::Signature) -> Vec<Call> {
    struct V {
        bound: HashSet<String>,
        calls: Vec<Call>,
    }
    impl<'ast> Visit<'ast> for V {
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            self.bound.insert(p.ident.to_string());
            syn::visit::visit_pat_ident(self, p);
        }
        fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
            if let Expr::Path(p) = &*c.func {
                if let (None, Some(last)) = (&p.qself, p.path.segments.last()) {
                    let name = last.ident.to_string();
                    let name = name.strip_prefix("r#").unwrap_or(&name).to_string();
                    let single = p.path.segments.len() == 1 && p.path.leading_colon.is_none();
                    let dsl = FUNCS.iter().any(|(f, _, _)| *f == name) || name == "range";
                    if !(dsl || single && self.bound.contains(&name)) {
                        let mut path = p.path.clone();
                        for seg in path.segments.iter_mut() {
                            seg.arguments = syn::PathArguments::None;
                        }
                        let text = path.to_token_stream().to_string();
                        if !self.calls.iter().any(|c| c.name == name && c.path.to_token_stream().to_string() == text) {
                            self.calls.push(Call { name, path, at: last.ident.span() });
                        }
                    }
                }
            }
            syn::visit::visit_expr_call(self, c);
        }
        // Items inside a body are refused by the lowering; do not look into them.
        fn visit_item(&mut self, _: &'ast syn::Item) {}
    }
    let mut v = V { bound: HashSet::new(), calls: vec![] };
    for a in &sig.inputs {
        v.visit_fn_arg(a);
    }
    for g in &sig.generics.params {
        if let syn::GenericParam::Const(c) = g {
            v.bound.insert(c.ident.to_string());
        }
    }
    v.visit_block(block);
    let V { bound, mut calls } = v;
    calls.retain(|c| !(c.path.segments.len() == 1 && (bound.contains(&c.name) || sig.ident == c.name)));
    calls
}

/// The round that fetches the first function `block` calls that the
/// item was not given directly, or `None` when it has them all.
pub fn fetch_next(sig: &syn::Signature, block: &syn::Block, given: &[Func], kind: &str, item: &TokenStream, attr: &TokenStream) -> Option<TokenStream> {
    let calls = direct_calls(block, sig);
    // one name, one function: the bodies are found by name
    for (i, c) in calls.iter().enumerate() {
        if let Some(d) = calls[..i].iter().find(|d| d.name == c.name) {
            let msg = format!(
                "`{}` is called as `{}` and as `{}`: call a function by one path in one item\n  = help: import it once (`use ...::{};`) and call it by its name",
                c.name,
                d.path.to_token_stream().to_string().replace(' ', ""),
                c.path.to_token_stream().to_string().replace(' ', ""),
                c.name
            );
            return Some(Error::new(c.at, msg).to_compile_error());
        }
    }
    let call = calls.into_iter().find(|c| !given.iter().any(|g| g.direct && g.name == c.name))?;
    let at = call.at;
    let mut path = call.path;
    if let Some(last) = path.segments.last_mut() {
        last.ident = syn::Ident::new(&last.ident.to_string(), at);
    }
    let kind = syn::Ident::new(kind, Span::call_site());
    let inner = given_tokens(attr);
    Some(quote_spanned! {at=> #path! { @#kind { #inner } #item } })
}

/// The function bodies inside `__funcs { ... }`, as tokens (empty for none).
fn given_tokens(attr: &TokenStream) -> TokenStream {
    let mut it = attr.clone().into_iter();
    match (it.next(), it.next()) {
        (Some(_), Some(proc_macro2::TokenTree::Group(g))) => g.stream(),
        _ => TokenStream::new(),
    }
}

/// What `#[func] fn f` becomes once it has every body it calls:
/// `macro_rules! f` handing the item that calls it back to its attribute
/// with `f`'s body (and the bodies `f` needs), and a `use` that makes the
/// macro an item of the module, importable by path.
pub fn definition(f: &Func, attr: &TokenStream) -> TokenStream {
    let name = &f.item.sig.ident;
    let carried = strip_direct(given_tokens(attr));
    let mut own = f.item.clone();
    own.attrs.clear();
    let direct = syn::Ident::new(DIRECT, Span::call_site());
    let misuse = format!("`{}` is a ferrotile #[func]: call it as `{}(...)` inside a #[kernel] or another #[func]", f.name, f.name);
    let docs: Vec<&syn::Attribute> = f.item.attrs.iter().filter(|a| a.path().is_ident("doc")).collect();
    // `pub`: exported from the crate under a name of its own (a
    // `macro_export`ed macro lives at the crate root), re-exported here by
    // the function's name; otherwise an item of this module.
    let (mac, export, vis) = match &f.item.vis {
        syn::Visibility::Public(_) => {
            let at = name.span().start();
            let key = format!("{}:{}:{}:{}", name.span().file(), at.line, at.column, f.name);
            let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
            (syn::Ident::new(&format!("__ferrotile_func_{}_{h:016x}", f.name), name.span()), quote!(#[macro_export]), quote!(pub))
        }
        v => (name.clone(), quote!(), quote!(#v)),
    };
    let import = if mac == *name { quote!(use #name;) } else { quote!(use #mac as #name;) };
    quote! {
        #[doc(hidden)]
        #export
        #[allow(unused_macros, non_snake_case)]
        macro_rules! #mac {
            (@kernel { $($given:tt)* } $($item:tt)*) => {
                #[::ferrotile::kernel(__funcs { $($given)* #carried #[#direct] #own })]
                $($item)*
            };
            (@func { $($given:tt)* } $($item:tt)*) => {
                #[::ferrotile::func(__funcs { $($given)* #carried #[#direct] #own })]
                $($item)*
            };
            ($($other:tt)*) => { ::core::compile_error!{#misuse} };
        }
        #(#docs)*
        #[allow(unused_imports)]
        #vis #import
    }
}

/// What a refused `#[func] fn f` becomes: `f` resolves (to a macro that
/// expands to nothing), so its callers add no "cannot find macro" to the
/// error already reported.
pub fn stub(f: &ItemFn) -> TokenStream {
    // (a method — `self` — sits in an `impl`, where no macro can be
    // defined: the error alone)
    if f.sig.receiver().is_some() {
        return TokenStream::new();
    }
    let name = &f.sig.ident;
    let vis = match &f.vis {
        syn::Visibility::Public(p) => quote_spanned!(p.span=> pub(crate)),
        v => quote!(#v),
    };
    quote! {
        #[doc(hidden)]
        #[allow(unused_macros)]
        macro_rules! #name {
            ($($t:tt)*) => {};
        }
        #[allow(unused_imports)]
        #vis use #name;
    }
}

/// The bodies `f` carries, without the marks of what `f` resolved itself:
/// for the item that calls `f`, they were resolved elsewhere.
fn strip_direct(ts: TokenStream) -> TokenStream {
    use proc_macro2::TokenTree;
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let mut out = vec![];
    let mut i = 0;
    while i < toks.len() {
        if let (TokenTree::Punct(p), Some(TokenTree::Group(g))) = (&toks[i], toks.get(i + 1)) {
            if p.as_char() == '#' && g.delimiter() == proc_macro2::Delimiter::Bracket && g.stream().to_string() == DIRECT {
                i += 2;
                continue;
            }
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out.into_iter().collect()
}
