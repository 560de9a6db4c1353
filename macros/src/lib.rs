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
mod funcs;
mod lower;
mod signature;

use proc_macro::TokenStream;

/// Turn a function written in the ferrotile tile DSL into a kernel.
///
/// See the `ferrotile` crate documentation for the language.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let (attr, item): (proc_macro2::TokenStream, proc_macro2::TokenStream) = (attr.into(), item.into());
    let given = match funcs::parse_given(attr.clone(), "kernel") {
        Ok(g) => g,
        Err(e) => return e.to_compile_error().into(),
    };
    if let Some(e) = where_call(item.clone()) {
        return e.to_compile_error().into();
    }
    let func = match syn::parse2::<syn::ItemFn>(item.clone()) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    let sig = match signature::check(&func) {
        Ok(s) => s,
        Err(e) => return e.to_compile_error().into(),
    };
    if let Some(fetch) = funcs::fetch_next(&func.sig, &func.block, &given, "kernel", &item, &attr) {
        return fetch.into();
    }
    match expand_with(func, sig, given) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// A tile function that kernels (and other functions) call: written in
/// the DSL like a kernel body, its parameters tiles of any shape and dtype
/// (`x: Tile`), returning nothing, `-> Tile` or a tuple of tiles; inlined at
/// every call and typed with the caller's values.
///
/// See the `ferrotile` crate documentation for the language.
#[proc_macro_attribute]
pub fn func(attr: TokenStream, item: TokenStream) -> TokenStream {
    let (attr, item): (proc_macro2::TokenStream, proc_macro2::TokenStream) = (attr.into(), item.into());
    let r = (|| -> syn::Result<proc_macro2::TokenStream> {
        if let Some(e) = where_call(item.clone()) {
            return Err(e);
        }
        let f = syn::parse2::<syn::ItemFn>(item.clone())?;
        let checked = funcs::check(&f)?;
        let given = funcs::parse_given(attr.clone(), "func")?;
        if let Some(fetch) = funcs::fetch_next(&f.sig, &f.block, &given, "func", &item, &attr) {
            return Ok(fetch);
        }
        Ok(funcs::definition(&checked, &attr))
    })();
    match r {
        Ok(ts) => ts.into(),
        Err(e) => {
            // (a function refused: its name still resolves, to a macro that
            // swallows the callers, so the error above is the only one)
            let mut out = e.to_compile_error();
            if let Ok(f) = syn::parse2::<syn::ItemFn>(item) {
                out.extend(funcs::stub(&f));
            }
            out.into()
        }
    }
}

#[cfg(test)]
fn expand(func: syn::ItemFn) -> syn::Result<proc_macro2::TokenStream> {
    let sig = signature::check(&func)?;
    expand_with(func, sig, vec![])
}

fn expand_with(func: syn::ItemFn, sig: signature::Sig, funcs: Vec<funcs::Func>) -> syn::Result<proc_macro2::TokenStream> {
    let kernel = lower::lower(&func, &sig, funcs)?;
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

/// Fuzzing the front end: kernels mutated token by token (deleted,
/// duplicated, swapped, replaced by DSL-looking tokens) must be either
/// accepted or refused with an error — never a panic of the macro.
/// `FERROTILE_FUZZ_SEED` / `FERROTILE_FUZZ_N` (default 600) as for the
/// emitter fuzzer.
#[cfg(test)]
mod fuzz {
    const KERNELS: &[&str] = &[
        "fn softmax<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, n_cols: i32) {
            let row = program_id(0) as i64;
            let cols = arange(0, BLOCK);
            let mask = cols < n_cols;
            let v = load(x + row * (n_cols as i64) + cols, mask, T::NEG_INFINITY) as f32;
            let e = exp(v - max(v, axis = 0));
            store(y + row * (n_cols as i64) + cols, (e / sum(e, 0)) as T, mask);
        }",
        "fn mm<const BM: i32, const BN: i32, const BK: i32>(a: Ptr<f16>, b: Ptr<f16>, c: Ptr<f32>, m: i32, n: i32, k: i32) {
            let rm = program_id(0) * BM + arange(0, BM);
            let rn = program_id(1) * BN + arange(0, BN);
            let mut acc = zeros([BM, BN], f32);
            for k0 in (0..k).step_by(BK) {
                let rk = k0 + arange(0, BK);
                let at = load(a + expand_dims(rm, 1) * k + expand_dims(rk, 0), expand_dims(rm < m, 1) & expand_dims(rk < k, 0), 0.0);
                let bt = load(b + expand_dims(rk, 1) * n + expand_dims(rn, 0), expand_dims(rk < k, 1) & expand_dims(rn < n, 0), 0.0);
                acc = dot(at, bt, acc);
            }
            if m > 0 { acc = maximum(acc, 0.0); }
            store(c + expand_dims(rm, 1) * n + expand_dims(rn, 0), acc, expand_dims(rm < m, 1) & expand_dims(rn < n, 0));
        }",
        "fn views<const B: i32>(x: Ptr<bf16>, y: Ptr<bf16>, m: i32, n: i32) {
            let vx = view(x, [m, n], [n, 1]);
            let t = load_block(vx, [program_id(0) * B, 0], [B, B]);
            let s = sum(t as f32, axis = 1);
            store_block(view(y, [m, n], [n, 1]), [program_id(0) * B, 0], (t as f32 - expand_dims(s, 1)) as bf16);
        }",
    ];
    const VOCAB: &[&str] = &[
        "+", "-", "*", "/", "%", ",", ";", "=", "<", "&", "!", ".", "..", "as", "let", "mut", "for", "in", "if", "else", "0", "1", "2.5", "-1", "x", "y", "n",
        "v", "max", "sum", "axis", "load", "store", "arange", "dot", "view", "f32", "i64", "bf16", "BLOCK", "T", "where", "select", "return", "loop", "while",
        "match", "&&", "::", "'a", "\"s\"", "1u8", "1e40",
    ];

    #[test]
    fn mutated_kernels_never_panic_the_macro() {
        use proc_macro2::TokenStream;
        let (seed, count, mut next) = fuzz_rng();
        let text_of = |toks: &[String]| toks.join(" ").replace("\u{1} ", "").replace('\u{1}', "");
        for src in KERNELS {
            let toks = flatten(src.parse::<TokenStream>().expect("tokens"));
            let func = syn::parse_str::<syn::ItemFn>(&text_of(&toks)).unwrap_or_else(|e| panic!("unmutated kernel: {e}\n{}", text_of(&toks)));
            assert!(super::expand(func).is_ok(), "an unmutated kernel is refused");
        }
        let (mut parsed, mut failures) = (0, vec![]);
        for i in 0..count {
            let src = KERNELS[next(KERNELS.len())];
            // tokens as text (a flat list: mutations may unbalance groups,
            // which the parser then refuses)
            let toks: Vec<String> = src.parse::<TokenStream>().map(flatten).unwrap_or_default();
            let mut toks = toks;
            mutate(&mut toks, &mut next, VOCAB);
            let text = text_of(&toks);
            let Ok(func) = syn::parse_str::<syn::ItemFn>(&text) else { continue };
            parsed += 1;
            if let Err(p) = std::panic::catch_unwind(|| super::expand(func)) {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                failures.push(format!("mutant {i}: PANIC {msg}\n{text}"));
            }
        }
        eprintln!("fuzz seed {seed}: {count} mutants, {parsed} parsed as functions, {} panics", failures.len());
        assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n\n"));
    }

    /// The same for the body of a `#[func]` a fixed kernel calls: a
    /// mutated function is refused (by `funcs::check` or while inlined)
    /// or accepted, never a panic.
    #[test]
    fn mutated_funcs_never_panic_the_macro() {
        const FUNC: &str = "fn upd(m: Tile, l: Tile, x: Tile) -> (Tile, Tile) {
            let m2 = maximum(m, max(x, axis = 1));
            let l2 = l * exp(m - m2) + sum(exp(x - expand_dims(m2, 1)), axis = 1);
            (m2, l2)
        }";
        const KERNEL: &str = "fn k<const R: i32, const C: i32>(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
            let r = arange(0, R);
            let mut m = full([R], -1.0, f32);
            let mut l = zeros([R], f32);
            for c in (0..n).step_by(C) {
                let v = load(x + expand_dims(r * n, 1) + expand_dims(c + arange(0, C), 0));
                let (a, b) = upd(m, l, v);
                m = a;
                l = b;
            }
            store(out + r, m + log(l));
        }";
        let (seed, count, mut next) = fuzz_rng();
        let text_of = |toks: &[String]| toks.join(" ").replace("\u{1} ", "").replace('\u{1}', "");
        let kernel = syn::parse_str::<syn::ItemFn>(KERNEL).expect("kernel");
        let expand = |f: &syn::ItemFn| -> syn::Result<proc_macro2::TokenStream> {
            let mut func = super::funcs::check(f)?;
            func.direct = true;
            let sig = super::signature::check(&kernel)?;
            super::expand_with(kernel.clone(), sig, vec![func])
        };
        assert!(expand(&syn::parse_str(FUNC).unwrap()).is_ok(), "the unmutated function is refused");
        let base: Vec<String> = flatten(FUNC.parse().unwrap());
        let (mut parsed, mut failures) = (0, vec![]);
        for i in 0..count {
            let mut toks = base.clone();
            mutate(&mut toks, &mut next, &["Tile", "upd", "m", "l", "x", "->", "(", ",", "mut", "return", "0", "1.0", "axis", "sum"]);
            let text = text_of(&toks);
            let Ok(f) = syn::parse_str::<syn::ItemFn>(&text) else { continue };
            parsed += 1;
            if let Err(p) = std::panic::catch_unwind(|| expand(&f)) {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                failures.push(format!("mutant {i}: PANIC {msg}\n{text}"));
            }
        }
        eprintln!("fuzz seed {seed}: {count} mutated functions, {parsed} parsed, {} panics", failures.len());
        assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n\n"));
    }

    /// The fuzzers' seed (`FERROTILE_FUZZ_SEED`, else the clock), mutant
    /// count (`FERROTILE_FUZZ_N`, default 600) and generator (xorshift64*:
    /// `next(n)` in `0..n`).
    fn fuzz_rng() -> (u64, usize, impl FnMut(usize) -> usize) {
        let seed: u64 = std::env::var("FERROTILE_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1));
        let count: usize = std::env::var("FERROTILE_FUZZ_N").ok().and_then(|s| s.parse().ok()).unwrap_or(600);
        let mut state = seed | 1;
        let next = move |n: usize| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
        };
        (seed, count, next)
    }

    /// One to three mutations of a flat token list: a token deleted,
    /// duplicated, swapped with another or replaced by one of `vocab`.
    /// (Brackets stay: a mutant that does not parse tests nothing.)
    fn mutate(toks: &mut Vec<String>, next: &mut impl FnMut(usize) -> usize, vocab: &[&str]) {
        let bracket = |t: &str| matches!(t, "(" | ")" | "[" | "]" | "{" | "}");
        for _ in 0..1 + next(3) {
            let at = next(toks.len());
            if bracket(&toks[at]) {
                continue;
            }
            match next(4) {
                0 if toks.len() > 1 => {
                    toks.remove(at);
                }
                1 => {
                    let t = toks[at].clone();
                    toks.insert(at, t);
                }
                2 => {
                    let j = next(toks.len());
                    if !bracket(&toks[j]) {
                        toks.swap(at, j);
                    }
                }
                _ => toks[at] = vocab[next(vocab.len())].to_string(),
            }
        }
    }

    fn flatten(ts: proc_macro2::TokenStream) -> Vec<String> {
        use proc_macro2::{Delimiter, TokenTree};
        let mut out = vec![];
        for t in ts {
            match t {
                TokenTree::Group(g) => {
                    let (o, c) = match g.delimiter() {
                        Delimiter::Parenthesis => ("(", ")"),
                        Delimiter::Bracket => ("[", "]"),
                        Delimiter::Brace => ("{", "}"),
                        Delimiter::None => ("", ""),
                    };
                    out.push(o.to_string());
                    out.extend(flatten(g.stream()));
                    out.push(c.to_string());
                }
                // (a joint punct glues to the next token: `::`, `..`, `&&`)
                TokenTree::Punct(p) if p.spacing() == proc_macro2::Spacing::Joint => out.push(format!("{}\u{1}", p.as_char())),
                t => out.push(t.to_string()),
            }
        }
        out
    }
}
