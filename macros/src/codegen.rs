//! Code generation: the module a `#[kernel]` function becomes.
//!
//! Takes the function, its signature and its generic IR. Emits
//! `mod <name> { ir(), SIGNATURE, launch(...), launch_unchecked(...) }`
//! where `launch` is typed from the signature: `&Buffer<T>` for pointers
//! only read, `&mut Buffer<T>` for pointers written, the scalar types, then
//! one argument per constexpr; `launch_unchecked` is the same `unsafe fn`
//! without the runtime's guards. Only paths under `::ferrotile` and `::std`
//! are named.

use crate::signature::Sig;
use ferrotile_ir::{DType, Kernel, ParamKind};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

fn rust_ty(d: DType, sig: &Sig) -> TokenStream {
    match d {
        DType::Bool => quote!(bool),
        DType::I8 => quote!(i8),
        DType::U8 => quote!(u8),
        DType::I32 => quote!(i32),
        DType::U32 => quote!(u32),
        DType::I64 => quote!(i64),
        DType::F16 => quote!(::ferrotile::f16),
        DType::BF16 => quote!(::ferrotile::bf16),
        DType::F32 => quote!(f32),
        DType::F8E4M3 => quote!(::ferrotile::f8e4m3),
        DType::F8E5M2 => quote!(::ferrotile::f8e5m2),
        DType::Generic(i) => {
            let id = &sig.dtype_params[i as usize];
            quote!(#id)
        }
    }
}

pub fn generate(f: &syn::ItemFn, sig: &Sig, k: &Kernel) -> TokenStream {
    let name = &f.sig.ident;
    let vis = &f.vis;
    let docs: Vec<&syn::Attribute> = f.attrs.iter().filter(|a| a.path().is_ident("doc")).collect();
    let json = k.to_json();
    let sig_text = {
        let s = &f.sig;
        quote!(#s).to_string()
    };
    let mut fn_params = vec![];
    let mut args = vec![];
    for (p, ir_p) in sig.params.iter().zip(&k.params) {
        let id = &p.ident;
        match p.kind {
            ParamKind::Ptr(d) => {
                let t = rust_ty(d, sig);
                if ir_p.written {
                    fn_params.push(quote!(#id: &mut ::ferrotile::Buffer<#t>));
                    args.push(quote!(::ferrotile::__private::Arg::buffer_mut(#id)));
                } else {
                    fn_params.push(quote!(#id: &::ferrotile::Buffer<#t>));
                    args.push(quote!(::ferrotile::__private::Arg::buffer(#id)));
                }
            }
            ParamKind::Scalar(d) => {
                let t = rust_ty(d, sig);
                fn_params.push(quote!(#id: #t));
                args.push(quote!(::ferrotile::__private::Arg::scalar(#id)));
            }
        }
    }
    let mut cx = vec![];
    for (id, d) in &sig.constexprs {
        let t = rust_ty(*d, sig);
        fn_params.push(quote!(#id: #t));
        cx.push(quote!(#id as i64));
    }
    let generics: Vec<TokenStream> = sig.dtype_params.iter().map(|t| quote!(#t: ::ferrotile::FloatElement)).collect();
    let dts: Vec<TokenStream> = sig.dtype_params.iter().map(|t| quote!(<#t as ::ferrotile::Element>::DTYPE)).collect();
    let dev = format_ident!("__ferrotile_device");
    let cfg = format_ident!("__ferrotile_config");
    quote! {
        #(#docs)*
        #[allow(non_snake_case, non_camel_case_types, unused_imports, dead_code, clippy::too_many_arguments)]
        #vis mod #name {
            const IR_JSON: &str = #json;
            /// The Rust signature this kernel was declared with.
            pub const SIGNATURE: &str = #sig_text;
            /// The kernel's generic (unspecialized) IR.
            pub fn ir() -> &'static ::ferrotile::ir::Kernel {
                static K: ::std::sync::OnceLock<::ferrotile::ir::Kernel> = ::std::sync::OnceLock::new();
                K.get_or_init(|| ::ferrotile::__private::decode_ir(IR_JSON, ::std::file!()))
            }
            /// Launch the kernel over `config`'s grid on `device`. Constexpr
            /// parameters come last; each distinct value is a specialization.
            pub fn launch<#(#generics),*>(
                #dev: &::ferrotile::Device,
                #cfg: impl ::std::convert::Into<::ferrotile::LaunchConfig>,
                #(#fn_params),*
            ) -> ::ferrotile::Result<()> {
                ::ferrotile::__private::launch(
                    ir(),
                    #dev,
                    #cfg.into(),
                    &mut [#(#args),*],
                    &[#(#cx),*],
                    &[#(#dts),*],
                )
            }
            /// As `launch`, without the guards that keep every access in
            /// its buffer (and without checked-mode reports).
            ///
            /// # Safety
            /// Every access must be in bounds of its buffer or masked off,
            /// every view must lie in its buffer and every loop step must be
            /// positive, for this grid and these arguments.
            pub unsafe fn launch_unchecked<#(#generics),*>(
                #dev: &::ferrotile::Device,
                #cfg: impl ::std::convert::Into<::ferrotile::LaunchConfig>,
                #(#fn_params),*
            ) -> ::ferrotile::Result<()> {
                // SAFETY: the caller's promise, passed on.
                unsafe {
                    ::ferrotile::__private::launch_unchecked(
                        ir(),
                        #dev,
                        #cfg.into(),
                        &mut [#(#args),*],
                        &[#(#cx),*],
                        &[#(#dts),*],
                    )
                }
            }
        }
    }
}
