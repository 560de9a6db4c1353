//! The stable text form of the IR, used by snapshot tests and the dump
//! facility (`FERROTILE_DUMP_IR`). One op per line, `%N` values with the
//! user's variable name as a comment, types after `:`, source line at the end.

use crate::ir::*;

use std::fmt::Write;

/// The text form of `k` (module doc).
pub fn print(k: &Kernel) -> String {
    let mut s = String::new();
    let generics: Vec<String> = k
        .dtype_params
        .iter()
        .enumerate()
        .map(|(i, n)| match k.bound_dtypes.get(i) {
            Some(d) => format!("{n}={d}"),
            None => format!("{n}: float"),
        })
        .collect();
    let cx: Vec<String> = k
        .constexprs
        .iter()
        .enumerate()
        .map(|(i, c)| match k.bound_constexprs.get(i) {
            Some(v) => format!("{}: {} = {v}", c.name, c.dtype),
            None => format!("{}: {}", c.name, c.dtype),
        })
        .collect();
    let params: Vec<String> = k
        .params
        .iter()
        .map(|p| match &p.kind {
            ParamKind::Ptr(d) => format!("{}: {}ptr<{}>", p.name, if p.written { "mut " } else { "" }, d),
            ParamKind::Scalar(d) => format!("{}: {}", p.name, d),
        })
        .collect();
    let _ = writeln!(
        s,
        "kernel @{}{}({}){} {{",
        k.name,
        if generics.is_empty() { String::new() } else { format!("<{}>", generics.join(", ")) },
        params.join(", "),
        if cx.is_empty() { String::new() } else { format!(" constexpr[{}]", cx.join(", ")) }
    );
    block(k, &k.body, 1, &mut s);
    s.push_str("}\n");
    s
}

fn v(k: &Kernel, x: V) -> String {
    let _ = k;
    format!("%{}", x.0)
}

fn vs(k: &Kernel, xs: &[V]) -> String {
    xs.iter().map(|x| v(k, *x)).collect::<Vec<_>>().join(", ")
}

fn lit(l: &Lit) -> String {
    match l {
        Lit::Int(i) => i.to_string(),
        Lit::Float(f) => {
            if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e15 {
                format!("{f:.1}")
            } else {
                format!("{f:e}")
            }
        }
        Lit::Bool(b) => b.to_string(),
    }
}

fn block(k: &Kernel, b: &Block, depth: usize, s: &mut String) {
    for op in &b.ops {
        let ind = "  ".repeat(depth);
        let lhs = if op.results.is_empty() { String::new() } else { format!("{} = ", vs(k, &op.results)) };
        let body = match &op.kind {
            OpKind::Param(i) => format!("param {}", k.params[*i as usize].name),
            OpKind::Constexpr(e) => format!("constexpr {e}"),
            OpKind::Const(l) => format!("const {}", lit(l)),
            OpKind::ProgramId(a) => format!("program_id {a}"),
            OpKind::NumPrograms(a) => format!("num_programs {a}"),
            OpKind::Arange { start, end } => format!("arange {start}, {end}"),
            OpKind::Splat { x, .. } => format!("splat {}", v(k, *x)),
            OpKind::Broadcast { x, .. } => format!("broadcast {}", v(k, *x)),
            OpKind::ExpandDims { x, axis } => format!("expand_dims {}, axis={axis}", v(k, *x)),
            OpKind::Reshape { x, .. } => format!("reshape {}", v(k, *x)),
            OpKind::Trans { x, perm } => format!("trans {}, perm={perm:?}", v(k, *x)),
            OpKind::Binary { op, a, b } => format!("{} {}, {}", format!("{op:?}").to_lowercase(), v(k, *a), v(k, *b)),
            OpKind::Cmp { op, a, b } => format!("cmp.{} {}, {}", format!("{op:?}").to_lowercase(), v(k, *a), v(k, *b)),
            OpKind::Unary { op, x } => format!("{} {}", op.name(), v(k, *x)),
            OpKind::Fma { a, b, c } => format!("fma {}", vs(k, &[*a, *b, *c])),
            OpKind::Select { cond, a, b } => format!("select {}", vs(k, &[*cond, *a, *b])),
            OpKind::Cast { x, to } => format!("cast {} to {to}", v(k, *x)),
            OpKind::Bitcast { x, to } => format!("bitcast {} to {to}", v(k, *x)),
            OpKind::AddPtr { ptr, offset } => format!("addptr {}, {}", v(k, *ptr), v(k, *offset)),
            OpKind::Load { ptr, mask, other } => {
                let mut t = format!("load {}", v(k, *ptr));
                if let Some(m) = mask {
                    let _ = write!(t, ", mask={}", v(k, *m));
                }
                if let Some(o) = other {
                    let _ = write!(t, ", other={}", v(k, *o));
                }
                t
            }
            OpKind::Store { ptr, value, mask } | OpKind::AtomicAdd { ptr, value, mask, .. } => {
                let name = match op.kind {
                    OpKind::AtomicAdd { sem, .. } if sem != MemSem::Relaxed => format!("atomic_add.{}", sem.name().to_lowercase()),
                    OpKind::AtomicAdd { .. } => "atomic_add".to_string(),
                    _ => "store".to_string(),
                };
                let mut t = format!("{name} {}, {}", v(k, *ptr), v(k, *value));
                if let Some(m) = mask {
                    let _ = write!(t, ", mask={}", v(k, *m));
                }
                t
            }
            OpKind::MakeView { base, shape, strides } => format!("view {}, shape=[{}], strides=[{}]", v(k, *base), vs(k, shape), vs(k, strides)),
            OpKind::LoadBlock { view, offsets, .. } => format!("load_block {}, at=[{}]", v(k, *view), vs(k, offsets)),
            OpKind::StoreBlock { view, offsets, value } => format!("store_block {}, at=[{}], {}", v(k, *view), vs(k, offsets), v(k, *value)),
            OpKind::Reduce { op, x, axis } => format!("reduce.{} {}, axis={axis}", format!("{op:?}").to_lowercase(), v(k, *x)),
            OpKind::Scan { op, x, axis } => format!("scan.{} {}, axis={axis}", format!("{op:?}").to_lowercase(), v(k, *x)),
            OpKind::Dot { a, b, acc, precision } => format!("dot {}, precision={}", vs(k, &[*a, *b, *acc]), format!("{precision:?}").to_lowercase()),
            OpKind::For { lo, hi, step, inits, body } => {
                let carried: Vec<String> = body.args[1..].iter().zip(inits).map(|(a, i)| format!("{} = {}", v(k, *a), v(k, *i))).collect();
                let _ = writeln!(
                    s,
                    "{ind}{lhs}for {} in {}..{} step {}{} {{{}",
                    v(k, body.args[0]),
                    v(k, *lo),
                    v(k, *hi),
                    v(k, *step),
                    if carried.is_empty() { String::new() } else { format!(" iter({})", carried.join(", ")) },
                    loc_comment(op.loc)
                );
                block(k, body, depth + 1, s);
                let _ = writeln!(s, "{ind}}}");
                continue;
            }
            OpKind::If { cond, then_, else_ } => {
                let _ = writeln!(s, "{ind}{lhs}if {} {{{}", v(k, *cond), loc_comment(op.loc));
                block(k, then_, depth + 1, s);
                let _ = writeln!(s, "{ind}}} else {{");
                block(k, else_, depth + 1, s);
                let _ = writeln!(s, "{ind}}}");
                continue;
            }
            OpKind::Yield(xs) => format!("yield {}", vs(k, xs)),
            OpKind::StaticAssert { cond, msg } => format!("static_assert {}, {msg:?}", v(k, *cond)),
            OpKind::Print { prefix, args } => format!("print {prefix:?}, {}", vs(k, args)),
        };
        let tys: Vec<String> = op.results.iter().map(|r| k.ty(*r).to_string()).collect();
        let ty = if tys.is_empty() { String::new() } else { format!(" : {}", tys.join(", ")) };
        let names: Vec<String> = op.results.iter().filter_map(|r| k.info(*r).name.clone()).collect();
        let name = if names.is_empty() { String::new() } else { format!(" {}", names.join(",")) };
        let _ = writeln!(s, "{ind}{lhs}{body}{ty}{}{}", loc_comment(op.loc), name);
    }
}

fn loc_comment(l: Loc) -> String {
    if l.line == 0 {
        "    //".into()
    } else {
        format!("    // line {}", l.line)
    }
}
