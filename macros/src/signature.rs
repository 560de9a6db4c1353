//! Signature checks: what a kernel function may declare.
//!
//! Takes the parsed `ItemFn`; returns its run-time parameters (pointers and
//! scalars), constexpr parameters (`const N: i32` generics) and dtype
//! parameters (`T: Float` generics), or an error on the offending token.

use ferrotile_ir::{DType, ParamKind};
use quote::ToTokens;
use syn::{Error, FnArg, GenericParam, Pat, Type};

pub struct SigParam {
    pub ident: syn::Ident,
    pub kind: ParamKind,
}

pub struct Sig {
    pub name: String,
    pub params: Vec<SigParam>,
    pub constexprs: Vec<(syn::Ident, DType)>,
    pub dtype_params: Vec<syn::Ident>,
}

/// An error on `t`, underlining all of it (`new_spanned` keeps the first and
/// last token; a joined `Span` would be just the first token on stable).
fn err<T>(t: impl ToTokens, msg: &str, hint: &str) -> syn::Result<T> {
    Err(Error::new_spanned(t, format!("{msg}\n  = help: {hint}")))
}

pub fn check(f: &syn::ItemFn) -> syn::Result<Sig> {
    let s = &f.sig;
    if let Some(a) = &s.asyncness {
        return err(a, "a kernel cannot be `async`", "remove `async`: kernels are launched, not awaited");
    }
    if let Some(u) = &s.unsafety {
        return err(u, "a kernel cannot be `unsafe`", "remove `unsafe`: launching is safe and out-of-bounds accesses are errors");
    }
    if let Some(c) = &s.constness {
        return err(c, "a kernel cannot be `const fn`", "remove `const`");
    }
    if let Some(a) = &s.abi {
        return err(a, "a kernel cannot declare an ABI", "remove the `extern` qualifier");
    }
    if let Some(v) = &s.variadic {
        return err(v, "a kernel cannot be variadic", "declare each argument");
    }
    if let syn::ReturnType::Type(_, t) = &s.output {
        return err(t, "a kernel cannot return a value", "write results through a pointer argument with `store`");
    }
    if let Some(w) = &s.generics.where_clause {
        return err(w.where_token, "`where` clauses are not supported on kernels", "write the bound inline: `<T: Float>`");
    }
    let mut constexprs = vec![];
    let mut dtype_params = vec![];
    for g in &s.generics.params {
        match g {
            GenericParam::Lifetime(l) => return err(l, "kernels take no lifetime parameters", "pointer arguments are `Ptr<T>`, not references"),
            GenericParam::Type(t) => {
                let ok = t.bounds.len() == 1
                    && matches!(t.bounds.first(), Some(syn::TypeParamBound::Trait(tb)) if tb.path.segments.last().is_some_and(|s| s.ident == "Float"));
                if !ok {
                    return err(t, "a type parameter of a kernel must be a dtype parameter `T: Float`", "write `<T: Float>`: it stands for f32, f16 or bf16");
                }
                if let Some(d) = &t.default {
                    return err(d, "dtype parameters take no default", "remove the default");
                }
                dtype_params.push(t.ident.clone());
            }
            GenericParam::Const(c) => {
                let d = match &c.ty {
                    Type::Path(p) if p.qself.is_none() => p.path.get_ident().and_then(|i| DType::from_rust(&i.to_string())),
                    _ => None,
                };
                match d {
                    Some(d @ (DType::I32 | DType::U32 | DType::I64 | DType::Bool)) => constexprs.push((c.ident.clone(), d)),
                    _ => return err(&c.ty, "a constexpr parameter must be `i32`, `u32`, `i64` or `bool`", "write e.g. `const BLOCK: i32`"),
                }
                if let Some(d) = &c.default {
                    return err(d, "constexpr parameters take no default here", "choose the value at launch");
                }
            }
        }
    }
    let mut params = vec![];
    for a in &s.inputs {
        let pt = match a {
            FnArg::Receiver(r) => return err(r, "a kernel cannot take `self`", "write a free function"),
            FnArg::Typed(pt) => pt,
        };
        let ident = match &*pt.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                if let Some(m) = &pi.mutability {
                    return err(m, "kernel arguments cannot be `mut`", "copy into a `let mut` variable inside the kernel");
                }
                pi.ident.clone()
            }
            p => return err(p, "kernel arguments must be plain names", "write `name: Type`"),
        };
        let kind = param_type(&pt.ty, &dtype_params)?;
        params.push(SigParam { ident, kind });
    }
    Ok(Sig { name: s.ident.to_string(), params, constexprs, dtype_params })
}

pub fn dtype_of_type(t: &Type, dtype_params: &[syn::Ident]) -> Option<DType> {
    match t {
        Type::Path(p) if p.qself.is_none() => {
            let id = p.path.get_ident()?;
            if let Some(i) = dtype_params.iter().position(|d| d == id) {
                return Some(DType::Generic(i as u8));
            }
            DType::from_rust(&id.to_string())
        }
        _ => None,
    }
}

fn param_type(t: &Type, dtype_params: &[syn::Ident]) -> syn::Result<ParamKind> {
    const HINT: &str = "use `Ptr<f32>` (or another dtype) for tensors and `i32`, `u32`, `i64`, `f32`, `f16`, `bf16` for scalars";
    match t {
        Type::Reference(r) => err(r, "kernel arguments cannot be references", "pass tensors as `Ptr<T>`; the launcher takes `&Buffer<T>`"),
        Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last().unwrap();
            if last.ident == "Ptr" {
                let inner = match &last.arguments {
                    syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match a.args.first() {
                        Some(syn::GenericArgument::Type(t)) => t,
                        _ => return err(&last.arguments, "`Ptr` takes one dtype", "write `Ptr<f32>`"),
                    },
                    _ => return err(last, "`Ptr` takes one dtype", "write `Ptr<f32>`"),
                };
                return match dtype_of_type(inner, dtype_params) {
                    Some(DType::Bool) | None => err(
                        inner,
                        "unsupported element type for `Ptr`",
                        "supported: f32, f16, bf16, f8e4m3, f8e5m2, i32, u32, i64, i8, u8, or a dtype parameter",
                    ),
                    Some(d) => Ok(ParamKind::Ptr(d)),
                };
            }
            match dtype_of_type(t, dtype_params) {
                // (8-bit floats live in tensors; a scalar is passed as f32)
                Some(d) if d.fp8().is_some() => err(t, "fp8 scalar arguments are not supported", "pass an `f32` and cast it in the kernel: `s as f8e4m3`"),
                Some(d) => Ok(ParamKind::Scalar(d)),
                None => err(t, "unsupported kernel argument type", HINT),
            }
        }
        _ => err(t, "unsupported kernel argument type", HINT),
    }
}
