//! `#[kernel]`: the frontend of ferrotile.
//!
//! Takes an annotated Rust function written in the tile DSL. Parses it with
//! syn (`signature.rs` checks the signature, `lower.rs` the body), lowers it to
//! the generic tiled IR through `ferrotile_ir::Builder` — the same typing rules
//! the specializer replays later — and reports every mistake it can prove as a
//! rustc error spanned on the user's offending token, with one cause and a
//! hint. `codegen.rs` then emits a module named after the kernel holding the
//! IR (as JSON) and a typed launcher, naming only paths under `::ferrotile`.

mod codegen;
mod lower;
mod signature;

use proc_macro::TokenStream;

/// Turn a function written in the ferrotile tile DSL into a kernel.
///
/// See the `ferrotile` crate documentation for the language.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    if !attr.is_empty() {
        let a: proc_macro2::TokenStream = attr.into();
        return syn::Error::new_spanned(a, "#[kernel] takes no arguments\n  = help: launch options (grid, num_warps) are given at launch")
            .to_compile_error()
            .into();
    }
    if let Some(e) = where_call(item.clone().into()) {
        return e.to_compile_error().into();
    }
    let func = match syn::parse::<syn::ItemFn>(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    match expand(func) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(func: syn::ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    let sig = signature::check(&func)?;
    let kernel = lower::lower(&func, &sig)?;
    Ok(codegen::generate(&func, &sig, &kernel))
}

/// Triton's `where(cond, a, b)`: `where` is a Rust keyword, so the body
/// does not even parse. Name the DSL's spelling before the parser fails.
fn where_call(ts: proc_macro2::TokenStream) -> Option<syn::Error> {
    use proc_macro2::{Delimiter, TokenTree};
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    for (i, t) in toks.iter().enumerate() {
        match t {
            TokenTree::Ident(id) if id == "where" => {
                if let Some(TokenTree::Group(g)) = toks.get(i + 1) {
                    if g.delimiter() == Delimiter::Parenthesis {
                        return Some(syn::Error::new(
                            id.span(),
                            "`where` is a Rust keyword and cannot be called\n  = help: write `select(cond, a, b)` (Triton's `tl.where`)",
                        ));
                    }
                }
            }
            TokenTree::Group(g) => {
                if let Some(e) = where_call(g.stream()) {
                    return Some(e);
                }
            }
            _ => {}
        }
    }
    None
}
