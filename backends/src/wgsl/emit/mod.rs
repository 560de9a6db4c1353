//! Instruction selection: specialized IR → one WGSL compute entry point.
//!
//! Takes a specialized, verified kernel plus [`WgslOptions`]. Mirrors the PTX
//! emitter: every tile value lives in per-invocation "registers" (WGSL
//! `let`s) distributed by the canonical [`Blocked`] layout of its shape, with
//! invocation index = warp·32 + lane and `workgroup_size / 32` warps; scalars
//! are one register computed redundantly (hence identically) by every
//! invocation.
//!
//! Semantics (the interpreter's, `dsl/src/interp`):
//! - f16/bf16 values are held as f32 registers holding exactly representable
//!   values; every op computes in f32 and rounds to nearest-even *in
//!   software* (WGSL leaves the rounding of f32→f16 conversions to the
//!   implementation), so results are bit-identical to the interpreter's.
//! - `/` is correctly rounded with integer long division (WGSL's `/` may be
//!   2.5 ulp off, and `fma`-based corrections are wrong where `fma` is not
//!   fused, as on llvmpipe); int→float and f32→f16/bf16 conversions are done
//!   with integer arithmetic (exact RNE, once-rounded like the interpreter);
//!   float→int conversions saturate, NaN → 0; integer shifts by ≥ the width
//!   give 0 (or the sign); `maximum`/`minimum` prefer the non-NaN operand.
//! - i64 is emulated as `vec2<u32>` (low, high): add/sub/mul, division and
//!   remainder (restoring long division), shifts, comparisons, casts (incl.
//!   exact int64→float), memory (`array<vec2<u32>>`), reductions, scans and
//!   loop counters; pointer offsets use the low word (indices are u32).
//! - `exp`, `exp2` are cephes-style range reduction + polynomial (~1 ulp;
//!   WGSL's builtin `exp` has 3 + 2|x| ulp); `log`, `log2`, `tanh`, `sin`,
//!   `cos`, `erf`, `sigmoid` are the PTX backend's formulas with argument
//!   reductions that need no fused `fma` (WGSL's `log` has 2^-21 absolute
//!   error near 1, `sin`/`cos` 2^-11); `sqrt`, `inverseSqrt`, `floor`,
//!   `ceil` are builtins. Measured on llvmpipe: f32 ≤ 3 ulp from the
//!   interpreter, f16/bf16 identical or 1 ulp.
//! - `fma` and `dot` use WGSL `fma`, which WGSL does not promise to fuse
//!   (llvmpipe does not): where it is unfused, results differ from the
//!   interpreter's fused `mul_add` within f32 rounding of each product.
//! - Reductions accumulate in f32 (i32/u32/i64 for integers) in a tree:
//!   in-invocation pairwise, then across invocations through workgroup
//!   memory (or subgroup shuffles, option `subgroups`); summation order
//!   differs from the interpreter's f64 sums as on PTX.
//!
//! Memory: pointer parameter `i` is `b{i}`, a storage buffer of 32-bit
//! elements or, for 16-/8-bit dtypes, of u32 words holding 2/4 elements
//! little-endian. Stores of packed elements are atomic read-modify-writes of
//! their word (compare-exchange loops on `array<atomic<u32>>`), so elements
//! sharing a word never lose each other's writes, also across workgroups; a
//! pair of f16/bf16 elements that one invocation owns in the same word is
//! stored with one `atomicStore`. `atomic_add` on f32 (and on packed dtypes)
//! is a compare-exchange loop; on i32/u32 `atomicAdd`. Out-of-range word
//! indices are skipped by the read-modify-write helpers (no endless CAS loop
//! on a clamped access); masked-off lanes read index 0 (then discard it) and
//! never write.
//!
//! Control flow: scalar `if` conditions and `for` trip counts are uniform
//! by construction; when one is derived from memory or workgroup-memory
//! results (WGSL's uniformity analysis calls those non-uniform, and
//! concurrent writers could make invocations disagree) and its region
//! contains a barrier, it is broadcast from invocation 0 through
//! `workgroupUniformLoad`.
//!
//! Unsupported (a clear [`EmitError`]): bool memory, pointers that may
//! point into different buffers (select/if/loop over pointers to different
//! arguments), non-power-of-two tile dimensions, configurations needing
//! more workgroup storage than `max_workgroup_storage`.
//! Guarantees on success: text that naga validates (tests check every
//! library and conformance kernel), a workgroup-storage requirement within
//! `max_workgroup_storage`, and the binding ABI in [`WgslKernel::bindings`].

mod alu;
mod control;
mod dot;
mod memory;
mod polyfill;
mod reduce;
mod shared;
mod values;

use super::{BindingAbi, BindingKind, EmitError, UniformField, WgslKernel, WgslOptions};
use crate::plan::axis::Info;
use crate::plan::layout::{register_remap, Blocked, ThreadLayout as Layout};
use ferrotile_ir::numeric::f32_round_to_odd;
use ferrotile_ir::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::rc::Rc;

type R<T> = Result<T, EmitError>;

/// WGSL type of a register.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum WTy {
    F,
    I,
    U,
    B,
    /// i64 as `vec2<u32>` (low word, high word), two's complement.
    L,
    /// `vec4<u32>`: (quotient, remainder) of 64-bit division.
    Q,
}

impl WTy {
    fn name(self) -> &'static str {
        match self {
            WTy::F => "f32",
            WTy::I => "i32",
            WTy::U => "u32",
            WTy::B => "bool",
            WTy::L => "vec2<u32>",
            WTy::Q => "vec4<u32>",
        }
    }
    /// The dtype an integer accumulation of this type holds (sums and
    /// scans widen i8/u8 to 32 bits).
    fn int_acc_dtype(self) -> DType {
        match self {
            WTy::I => DType::I32,
            WTy::L => DType::I64,
            _ => DType::U32,
        }
    }
    /// Words of a workgroup-memory slot.
    fn nw(self) -> u32 {
        if self == WTy::L {
            2
        } else {
            1
        }
    }
}

fn wty_of_elem(e: Elem) -> WTy {
    match e {
        Elem::Ptr(_) => WTy::U,
        Elem::Val(d) => wty_of(d),
    }
}

fn wty_of(d: DType) -> WTy {
    match d {
        // (fp8: the f32 value, rounded to the format after every op)
        DType::F32 | DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2 => WTy::F,
        DType::I32 | DType::I8 => WTy::I,
        DType::I64 => WTy::L,
        DType::U32 | DType::U8 => WTy::U,
        DType::Bool => WTy::B,
        DType::Generic(_) => WTy::F,
    }
}

/// f32 literal that round-trips exactly (non-integers by bit pattern).
fn f32_lit(v: f32) -> String {
    if v.is_finite() && v == v.trunc() && v.abs() < 16777216.0 && !(v == 0.0 && v.is_sign_negative()) {
        format!("{v:.1}f")
    } else {
        format!("bitcast<f32>(0x{:08x}u)", v.to_bits())
    }
}

/// f32 literal for helper code (shortest round-trip decimal; finite only).
fn fl(v: f64) -> String {
    let f = v as f32;
    let s = format!("{f:?}");
    if s.contains('.') || s.contains('e') {
        format!("{s}f")
    } else {
        format!("{s}.0f")
    }
}

fn i32_lit(v: i32) -> String {
    if v == i32::MIN {
        "bitcast<i32>(0x80000000u)".into()
    } else {
        format!("{v}i")
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Buf {
    pub(super) dtype: DType,
    pub(super) written: bool,
    /// Declared as an array of atomics (packed and written, or atomic_add).
    pub(super) atomic: bool,
    /// Declared as `array<vec4<T>>` (32-bit, not atomic): some access moves
    /// whole aligned `vec4`s; scalar accesses index `[i >> 2][i & 3]`.
    pub(super) vec4: bool,
}

struct WgslWriter<'k> {
    k: &'k Kernel,
    o: &'k WgslOptions,
    nt: u32,
    nwarps: u32,
    vec: u32,
    /// Contiguity / divisibility facts ([`crate::plan::axis`]).
    axis: HashMap<V, Info>,
    body: String,
    ind: usize,
    pro: String,
    tmp: u32,
    vals: HashMap<V, Vec<String>>,
    base: HashMap<V, u32>,
    uni: HashSet<V>,
    bufs: Vec<Option<Buf>>,
    layouts: HashMap<Vec<u32>, Rc<Layout>>,
    idx_cache: HashMap<(Vec<u32>, usize, usize), String>,
    lin_cache: HashMap<(Vec<u32>, usize), String>,
    owner_cache: HashMap<(Vec<u32>, usize), Option<String>>,
    smem_words: u32,
    barriers: u32,
    uses_uni: bool,
    uses_subgroups: bool,
    uses_f16: bool,
    helpers: BTreeMap<String, String>,
    loc: Loc,
    /// Which values to recompute instead of converting ([`crate::plan::remat`]).
    remat: crate::plan::remat::Remat<'k>,
    /// Values not in their shape's canonical layout ([`crate::plan::slices`])
    /// and the per-invocation offsets of those layouts.
    vlay: crate::plan::slices::ValueLayouts,
    olayouts: HashMap<Blocked, Rc<Layout>>,
    /// The layout the op being emitted computes in, when not its shape's
    /// canonical one: `get` hands its operands over in it.
    want: Option<Blocked>,
    /// Values converted to their canonical layout, per open block (WGSL
    /// `let`s are scoped to their block).
    conv: Vec<HashMap<V, Vec<String>>>,
    /// Emulated i64 divisions per open block, by operand registers: `a / b`
    /// and `a % b` share one call (its result is a `vec4`).
    divrem: Vec<HashMap<(String, String), String>>,
    /// The registers declared `var` (assigned again later: never keys of
    /// `divrem`).
    vars: HashSet<String>,
    /// `max`/`argmax` pairs reduced once ([`crate::plan::reduce::siblings`]):
    /// the first emitted → the other.
    reduce_pairs: HashMap<V, V>,
    /// `expand_dims` results only broadcasts read
    /// ([`crate::plan::convert::expand_then_broadcast`]): converted once,
    /// by each broadcast from the operand, where both are in their default
    /// layouts (`control.rs`).
    expand_then_broadcast: HashMap<V, (V, usize)>,
    /// The other's registers, computed with the first.
    reduced: HashMap<V, Vec<String>>,
    /// 16-bit loads of provable pairs read one word per pair
    /// ([`WgslOptions::word_stores`] covers both).
    word_loads: bool,
}

/// What the driver (`super::compile`) decided, for the printer.
pub(super) struct Plans<'k> {
    pub kernel: &'k Kernel,
    /// Consecutive elements an invocation owns along the last dimension.
    pub vec: u32,
    pub axis: HashMap<V, Info>,
    /// The parameter every pointer and view value points into.
    pub base: HashMap<V, u32>,
    /// Values WGSL's uniformity analysis accepts as uniform.
    pub uniform: HashSet<V>,
    /// Per parameter: how its storage buffer is declared.
    pub bufs: Vec<Option<Buf>>,
    /// Values in a layout other than their shape's ([`crate::plan::slices`]).
    pub values: crate::plan::slices::ValueLayouts,
}

/// Print the kernel the plans describe.
pub(super) fn write(p: Plans<'_>, o: &WgslOptions) -> R<WgslKernel> {
    let Plans { kernel: k, vec, axis, base, uniform, bufs, values: vlay } = p;
    let pinned: Vec<V> = vlay.keys().copied().collect();
    let err = |line: u32, msg: String| EmitError { kernel: k.name.clone(), line, msg };
    let mut em = WgslWriter {
        k,
        o,
        nt: o.workgroup_size,
        nwarps: o.workgroup_size / 32,
        vec,
        axis,
        body: String::new(),
        ind: 1,
        pro: String::new(),
        tmp: 0,
        vals: HashMap::new(),
        base,
        uni: uniform,
        bufs,
        layouts: HashMap::new(),
        idx_cache: HashMap::new(),
        lin_cache: HashMap::new(),
        owner_cache: HashMap::new(),
        smem_words: 0,
        barriers: 0,
        uses_uni: false,
        uses_subgroups: false,
        uses_f16: false,
        helpers: BTreeMap::new(),
        loc: Loc::default(),
        remat: crate::plan::remat::Remat::with_pinned(k, pinned),
        vlay,
        olayouts: HashMap::new(),
        want: None,
        conv: vec![],
        divrem: vec![],
        vars: HashSet::new(),
        reduce_pairs: crate::plan::reduce::siblings(k),
        expand_then_broadcast: crate::plan::convert::expand_then_broadcast(k),
        reduced: HashMap::new(),
        word_loads: o.word_stores,
    };
    em.pro.push_str("    let ft_lane = ft_tid & 31u;\n    let ft_warp = ft_tid >> 5u;\n");
    if o.word_stores {
        em.mark_word_buffers()?;
    }
    em.mark_vec4_buffers()?;
    em.block(&k.body)?;

    // ---- assemble
    let entry = format!("ft_{}", k.name);
    let mut text = String::new();
    let _ = writeln!(text, "// Generated by ferrotile from kernel `{}` [{}]", k.name, k.describe_binding());
    text.push('\n');
    let mut bindings = vec![];
    let mut nb = 0u32;
    for (i, p) in k.params.iter().enumerate() {
        let Some(b) = em.bufs[i] else { continue };
        let elem = match (b.dtype, b.atomic) {
            (DType::I32, true) => "atomic<i32>",
            (DType::U32, true) => "atomic<u32>",
            (_, true) => "atomic<u32>",
            (DType::F32, false) if b.vec4 => "vec4<f32>",
            (DType::I32, false) if b.vec4 => "vec4<i32>",
            (DType::U32, false) if b.vec4 => "vec4<u32>",
            (DType::F32, false) => "f32",
            (DType::I32, false) => "i32",
            (DType::I64, false) => "vec2<u32>",
            _ => "u32",
        };
        let access = if b.written { "read_write" } else { "read" };
        let what = match (b.dtype, b.atomic) {
            (d, _) if d.size_bytes() < 4 => format!("{d} packed in u32 words"),
            (DType::I64, true) => "i64 as (low, high) u32 words".to_string(),
            (DType::I64, false) => "i64 as vec2<u32>(low, high)".to_string(),
            (d, _) => d.to_string(),
        };
        let _ = writeln!(text, "// `{}`: {what}", p.name);
        let _ = writeln!(text, "@group(0) @binding({nb}) var<storage, {access}> b{i}: array<{elem}>;");
        bindings.push(BindingAbi { group: 0, binding: nb, kind: BindingKind::Storage { param: i as u32, dtype: b.dtype, read_only: !b.written } });
        nb += 1;
    }
    let scalars: Vec<(usize, DType)> = k
        .params
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p.kind {
            ParamKind::Scalar(d) => Some((i, d)),
            _ => None,
        })
        .collect();
    if !scalars.is_empty() {
        text.push_str("struct FtArgs {\n");
        let mut fields = vec![];
        let mut off = 0u32;
        for (i, d) in &scalars {
            let ty = match d {
                DType::F32 => "f32",
                DType::I32 | DType::I8 => "i32",
                _ => "u32",
            };
            let _ = writeln!(text, "    p{i}: {ty}, // `{}`: {d}", k.params[*i].name);
            if *d == DType::I64 {
                let _ = writeln!(text, "    p{i}h: u32,");
            }
            fields.push(UniformField { param: *i as u32, offset: off, dtype: *d });
            off += if *d == DType::I64 { 8 } else { 4 };
        }
        text.push_str("}\n");
        let _ = writeln!(text, "@group(0) @binding({nb}) var<uniform> ft_args: FtArgs;");
        bindings.push(BindingAbi { group: 0, binding: nb, kind: BindingKind::Uniform { size: off.div_ceil(16) * 16, fields } });
    }
    let mut wg_bytes = 0;
    if em.smem_words > 0 {
        let _ = writeln!(text, "var<workgroup> ft_smem: array<u32, {}>;", em.smem_words);
        wg_bytes += em.smem_words * 4;
    }
    if em.uses_uni {
        text.push_str("var<workgroup> ft_uni: u32;\n");
        wg_bytes += 4;
    }
    if wg_bytes > o.max_workgroup_storage {
        return Err(err(
            0,
            format!(
                "[{}] needs {wg_bytes} bytes of workgroup storage with workgroup_size {}, more than the limit of {} bytes (max_workgroup_storage); use smaller blocks",
                k.describe_binding(),
                o.workgroup_size,
                o.max_workgroup_storage
            ),
        ));
    }
    text.push('\n');
    for h in em.helpers.values() {
        text.push_str(h);
        text.push('\n');
    }
    let _ = writeln!(
        text,
        "@compute @workgroup_size({})\nfn {entry}(@builtin(local_invocation_index) ft_tid: u32, @builtin(workgroup_id) ft_wid: vec3<u32>, @builtin(num_workgroups) ft_nwg: vec3<u32>) {{",
        o.workgroup_size
    );
    text.push_str(&em.pro);
    text.push_str(&em.body);
    text.push_str("}\n");
    Ok(WgslKernel {
        text,
        entry,
        workgroup_size: o.workgroup_size,
        bindings,
        workgroup_storage_bytes: wg_bytes,
        uses_f16: em.uses_f16,
        uses_subgroups: em.uses_subgroups,
    })
}

fn zero_of(w: WTy) -> &'static str {
    match w {
        WTy::F => "0.0f",
        WTy::I => "0i",
        WTy::U => "0u",
        WTy::B => "false",
        WTy::L => "vec2<u32>(0u, 0u)",
        WTy::Q => "vec4<u32>(0u, 0u, 0u, 0u)",
    }
}

fn strides(shape: &[u32]) -> Vec<u32> {
    let mut s = vec![1u32; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_round_trip() {
        assert_eq!(f32_lit(3.0), "3.0f");
        assert_eq!(f32_lit(-0.0), "bitcast<f32>(0x80000000u)");
        assert_eq!(f32_lit(0.1), format!("bitcast<f32>(0x{:08x}u)", 0.1f32.to_bits()));
        assert_eq!(i32_lit(i32::MIN), "bitcast<i32>(0x80000000u)");
        assert_eq!(fl(1.0), "1.0f");
    }
}
