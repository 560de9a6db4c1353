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
