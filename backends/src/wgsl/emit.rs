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

use super::EmitError;
use crate::ptx::axis::{self, Info};
use crate::ptx::layout::Blocked;
use ferrotile_ir::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::rc::Rc;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WgslOptions {
    /// Invocations per workgroup: a power of two, 32..=1024 (default 128).
    pub workgroup_size: u32,
    /// Use subgroup shuffles for the cross-lane step of reductions. Only set
    /// it when the adapter has SUBGROUP *and* a minimum subgroup size of at
    /// least 32 with subgroups made of consecutive invocations (NVIDIA, AMD,
    /// Apple); no `enable subgroups;` directive is emitted.
    pub subgroups: bool,
    /// The device has half-precision support: f16 bits are widened with one
    /// `unpack2x16float` (exact) instead of integer code, which needs naga's
    /// `SHADER_FLOAT16_IN_FLOAT32` capability. Rounding to f16 always stays
    /// in software (WGSL leaves the rounding of f32→f16 conversions
    /// unspecified), so no `enable f16;` is emitted (naga 27 cannot bitcast
    /// u32 → vec2<f16> anyway) and results are identical either way.
    pub shader_f16: bool,
    /// Bytes of `var<workgroup>` storage the device allows
    /// (`maxComputeWorkgroupStorageSize`; WebGPU's default is 16384, lavapipe
    /// and most GPUs 32768).
    pub max_workgroup_storage: u32,
    /// Per parameter: the launch's integer argument is divisible by 16
    /// (missing entries: unknown). With [`WgslOptions::arg_one`] this feeds
    /// the axis analysis that proves loads and stores contiguous and
    /// 16-byte aligned, so they can move whole `vec4`s (the launch caches
    /// one shader per combination, as the CUDA runtime does).
    pub arg_div16: Vec<bool>,
    /// Per parameter: the launch's integer argument is exactly 1.
    pub arg_one: Vec<bool>,
}

impl Default for WgslOptions {
    fn default() -> Self {
        WgslOptions { workgroup_size: 128, subgroups: false, shader_f16: false, max_workgroup_storage: 32768, arg_div16: vec![], arg_one: vec![] }
    }
}

/// One field of the uniform block: the scalar parameter `param` at byte
/// `offset`. Fields are 4 bytes: i32/u32/f32 as themselves, i8 as a
/// sign-extended i32, u8 and bool (0/1) as u32, f16/bf16 as their bit
/// pattern in the low 16 bits of a u32; i64 takes 8 bytes (little-endian,
/// 4-byte aligned).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniformField {
    pub param: u32,
    pub offset: u32,
    pub dtype: DType,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindingKind {
    /// Pointer parameter `param`: a storage buffer of `dtype` elements (32-bit
    /// dtypes as themselves, f16/bf16/i8/u8 packed little-endian in u32
    /// words: the buffer's byte size must be rounded up to a multiple of 4).
    /// `read_only` buffers are `var<storage, read>`.
    Storage { param: u32, dtype: DType, read_only: bool },
    /// All scalar parameters in one `var<uniform>` struct of `size` bytes
    /// (rounded up to 16).
    Uniform { fields: Vec<UniformField>, size: u32 },
}

/// One `@group(group) @binding(binding)` resource. Every pointer parameter
/// gets a binding whether the kernel uses it or not (so the runtime should
/// build an explicit bind-group layout from this list rather than rely on
/// an automatic one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingAbi {
    pub group: u32,
    pub binding: u32,
    pub kind: BindingKind,
}

#[derive(Clone, Debug)]
pub struct WgslKernel {
    pub text: String,
    /// Name of the `@compute` entry point.
    pub entry: String,
    pub workgroup_size: u32,
    pub bindings: Vec<BindingAbi>,
    /// Bytes of `var<workgroup>` storage the shader declares.
    pub workgroup_storage_bytes: u32,
    /// The text uses `unpack2x16float` (only with `shader_f16`): naga needs
    /// `Capabilities::SHADER_FLOAT16_IN_FLOAT32` (wgpu grants it with
    /// `DownlevelFlags::SHADER_F16_IN_F32`).
    pub uses_f16: bool,
    /// The text calls subgroup builtins (the device needs SUBGROUP).
    pub uses_subgroups: bool,
}

type R<T> = Result<T, EmitError>;

/// WGSL type of a register.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum W {
    F,
    I,
    U,
    B,
    /// i64 as `vec2<u32>` (low word, high word), two's complement.
    L,
    /// `vec4<u32>`: (quotient, remainder) of 64-bit division.
    Q,
}

impl W {
    fn name(self) -> &'static str {
        match self {
            W::F => "f32",
            W::I => "i32",
            W::U => "u32",
            W::B => "bool",
            W::L => "vec2<u32>",
            W::Q => "vec4<u32>",
        }
    }
    /// Words of a workgroup-memory slot.
    fn nw(self) -> u32 {
        if self == W::L {
            2
        } else {
            1
        }
    }
}

fn w_of(e: Elem) -> W {
    match e {
        Elem::Ptr(_) => W::U,
        Elem::Val(d) => w_dt(d),
    }
}

fn w_dt(d: DType) -> W {
    match d {
        DType::F32 | DType::F16 | DType::BF16 => W::F,
        DType::I32 | DType::I8 => W::I,
        DType::I64 => W::L,
        DType::U32 | DType::U8 => W::U,
        DType::Bool => W::B,
        DType::Generic(_) => W::F,
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

/// f64 → f32 rounded to odd (see the interpreter): rounding that to f16 or
/// bf16 gives the correctly rounded result.
fn f32_round_to_odd(x: f64) -> f32 {
    let r = x as f32;
    if x.is_nan() || r as f64 == x {
        return r;
    }
    if r.is_infinite() {
        return f32::MAX.copysign(r);
    }
    let toward_zero = if (r as f64).abs() > x.abs() { f32::from_bits(r.to_bits() - 1) } else { r };
    f32::from_bits(toward_zero.to_bits() | 1)
}

struct Layout {
    bl: Blocked,
    konst: Vec<Vec<u32>>,
    /// Per-dim thread offset (u32 `let` in the prologue).
    thread: Vec<String>,
}

impl Layout {
    fn regs(&self) -> usize {
        self.konst.len()
    }
    /// Row-major linear index of register `r` in invocation `t` (host side).
    fn lin_of(&self, t: u32, r: usize) -> u32 {
        let bl = &self.bl;
        let (lane, warp) = (t % 32, t / 32);
        let mut lin = 0u32;
        for d in 0..bl.rank() {
            let ld = (lane >> bl.lane_shift[d]) & (bl.tpw[d] - 1);
            let wd = (warp >> bl.warp_shift[d]) & (bl.wpc[d] - 1);
            let i = (self.konst[r][d] + bl.spt[d] * (ld + bl.warp_mul[d] * wd)) % bl.shape[d];
            lin = lin * bl.shape[d] + i;
        }
        lin
    }
    fn coords_of(&self, t: u32, r: usize) -> Vec<u32> {
        let mut lin = self.lin_of(t, r);
        let mut c = vec![0u32; self.bl.rank()];
        for d in (0..self.bl.rank()).rev() {
            c[d] = lin % self.bl.shape[d];
            lin /= self.bl.shape[d];
        }
        c
    }
}

/// For each destination register, a source register that holds, in every
/// invocation, the element that destination register needs; `None` when
/// some data would have to move between invocations.
fn local_map(nt: u32, n_src: usize, src: &dyn Fn(u32, usize) -> u32, n_dst: usize, dst: &dyn Fn(u32, usize) -> u32) -> Option<Vec<usize>> {
    let mut at0: HashMap<u32, Vec<usize>> = HashMap::new();
    for s in 0..n_src {
        at0.entry(src(0, s)).or_default().push(s);
    }
    let mut out = Vec::with_capacity(n_dst);
    for r in 0..n_dst {
        let cands = at0.get(&dst(0, r))?;
        let pick = cands.iter().copied().find(|&c| (1..nt).all(|t| src(t, c) == dst(t, r)))?;
        out.push(pick);
    }
    Some(out)
}

#[derive(Clone, Copy, Debug)]
struct Buf {
    dtype: DType,
    written: bool,
    /// Declared as an array of atomics (packed and written, or atomic_add).
    atomic: bool,
    /// Declared as `array<vec4<T>>` (32-bit, not atomic): some access moves
    /// whole aligned `vec4`s; scalar accesses index `[i >> 2][i & 3]`.
    vec4: bool,
}

struct Em<'k> {
    k: &'k Kernel,
    o: &'k WgslOptions,
    nt: u32,
    nwarps: u32,
    vec: u32,
    /// Contiguity / divisibility facts ([`crate::ptx::axis`]).
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
    /// Which values to recompute instead of converting ([`crate::remat`]).
    remat: crate::remat::Remat<'k>,
}

pub fn emit(k: &Kernel, o: &WgslOptions) -> R<WgslKernel> {
    let err = |line: u32, msg: String| EmitError { kernel: k.name.clone(), line, msg };
    if !k.specialized {
        return Err(err(0, "the WGSL backend needs a specialized kernel".into()));
    }
    if !(o.workgroup_size.is_power_of_two() && (32..=1024).contains(&o.workgroup_size)) {
        return Err(err(0, format!("workgroup_size must be a power of two in 32..=1024, got {}", o.workgroup_size)));
    }
    for p in &k.params {
        if let ParamKind::Ptr(DType::Bool) = p.kind {
            return Err(err(0, format!("parameter `{}`: bool memory is not supported", p.name)));
        }
    }
    // Narrowest memory element: one invocation owns a whole 32-bit word
    // along the last dimension (2 x 16-bit, 4 x 8-bit). Kernels whose memory
    // is all 32-bit and whose memory tiles are large enough for every
    // invocation to own 4 elements without replication own 16 bytes, as on
    // PTX, so that aligned runs can move as one `vec4` (small tiles keep one
    // element per invocation: replicating them 4 ways only adds code).
    let (mut min_es, mut max_es, mut max_tile) = (4usize, 1usize, 0u64);
    k.walk(&mut |op| {
        if let OpKind::Load { ptr, .. } | OpKind::Store { ptr, .. } = &op.kind {
            let n: Option<u64> = k.ty(*ptr).shape().iter().map(|d| d.known().map(|x| x as u64)).product();
            max_tile = max_tile.max(n.unwrap_or(0));
        }
        let p = match &op.kind {
            OpKind::Load { ptr, .. } | OpKind::Store { ptr, .. } => k.ty(*ptr).elem().map(|e| e.dtype()),
            OpKind::LoadBlock { view, .. } | OpKind::StoreBlock { view, .. } => match k.ty(*view) {
                Type::View { dtype, .. } => Some(*dtype),
                _ => None,
            },
            _ => None,
        };
        if let Some(d) = p {
            min_es = min_es.min(d.size_bytes().max(1));
            max_es = max_es.max(d.size_bytes());
        }
    });
    let vec = if min_es == 4 && max_es == 4 && max_tile >= 4 * o.workgroup_size as u64 { 4 } else { (4 / min_es) as u32 };
    let base = provenance(k).map_err(|(line, msg)| err(line, msg))?;
    let mut bufs: Vec<Option<Buf>> = k
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Ptr(d) => Some(Buf { dtype: d, written: p.written, atomic: p.written && d.size_bytes() < 4, vec4: false }),
            _ => None,
        })
        .collect();
    k.walk(&mut |op| {
        if let OpKind::AtomicAdd { ptr, .. } = &op.kind {
            if let Some(b) = base.get(ptr).and_then(|&p| bufs[p as usize].as_mut()) {
                b.atomic = true;
                b.written = true;
            }
        }
    });
    let mut em = Em {
        k,
        o,
        nt: o.workgroup_size,
        nwarps: o.workgroup_size / 32,
        vec,
        axis: axis::analyze(k, &o.arg_div16, &o.arg_one),
        body: String::new(),
        ind: 1,
        pro: String::new(),
        tmp: 0,
        vals: HashMap::new(),
        base,
        uni: uniform_values(k),
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
        remat: crate::remat::Remat::new(k),
    };
    em.pro.push_str("    let ft_lane = ft_tid & 31u;\n    let ft_warp = ft_tid >> 5u;\n");
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

/// Which parameter every pointer and view value points into.
fn provenance(k: &Kernel) -> Result<HashMap<V, u32>, (u32, String)> {
    fn join(m: &mut HashMap<V, u32>, v: V, p: Option<u32>, line: u32) -> Result<(), (u32, String)> {
        let Some(p) = p else { return Ok(()) };
        match m.insert(v, p) {
            Some(q) if q != p => Err((line, "a pointer that may point into different buffers (select/if/loop over pointers to different arguments) is not supported by the WGSL backend".into())),
            _ => Ok(()),
        }
    }
    fn block(k: &Kernel, b: &Block, m: &mut HashMap<V, u32>) -> Result<(), (u32, String)> {
        for op in &b.ops {
            let line = op.loc.line;
            let r0 = op.results.first().copied();
            match &op.kind {
                OpKind::Param(i) => {
                    if let ParamKind::Ptr(_) = k.params[*i as usize].kind {
                        join(m, r0.unwrap(), Some(*i), line)?;
                    }
                }
                OpKind::AddPtr { ptr: x, .. }
                | OpKind::Splat { x, .. }
                | OpKind::Broadcast { x, .. }
                | OpKind::ExpandDims { x, .. }
                | OpKind::Reshape { x, .. }
                | OpKind::Trans { x, .. }
                | OpKind::MakeView { base: x, .. } => {
                    let p = m.get(x).copied();
                    join(m, r0.unwrap(), p, line)?;
                }
                OpKind::Select { a, b, .. } => {
                    let (pa, pb) = (m.get(a).copied(), m.get(b).copied());
                    join(m, r0.unwrap(), pa, line)?;
                    join(m, r0.unwrap(), pb, line)?;
                }
                OpKind::For { inits, body, .. } => {
                    for (a, i) in body.args[1..].iter().zip(inits) {
                        let p = m.get(i).copied();
                        join(m, *a, p, line)?;
                    }
                    block(k, body, m)?;
                    if let Some(OpKind::Yield(ys)) = body.ops.last().map(|o| &o.kind) {
                        for ((a, y), r) in body.args[1..].iter().zip(ys).zip(&op.results) {
                            let p = m.get(y).copied();
                            join(m, *a, p, line)?;
                            let pa = m.get(a).copied();
                            join(m, *r, pa, line)?;
                        }
                    }
                }
                OpKind::If { then_, else_, .. } => {
                    for blk in [then_, else_] {
                        block(k, blk, m)?;
                        if let Some(OpKind::Yield(ys)) = blk.ops.last().map(|o| &o.kind) {
                            for (y, r) in ys.iter().zip(&op.results) {
                                let p = m.get(y).copied();
                                join(m, *r, p, line)?;
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
    let mut m = HashMap::new();
    block(k, &k.body, &mut m)?;
    Ok(m)
}

/// Scalars that are uniform in WGSL's sense: computed from constants, scalar
/// parameters and program ids only (not from memory, workgroup memory or
/// anything that went through them), including loop-carried values whose
/// initial value and every update are.
fn uniform_values(k: &Kernel) -> HashSet<V> {
    fn yields(b: &Block) -> Vec<V> {
        match b.ops.last().map(|o| &o.kind) {
            Some(OpKind::Yield(v)) => v.clone(),
            _ => vec![],
        }
    }
    fn block(k: &Kernel, b: &Block, u: &mut HashSet<V>) {
        for op in &b.ops {
            let scalar_res = op.results.first().is_some_and(|r| k.ty(*r).is_scalar());
            match &op.kind {
                OpKind::Const(_) | OpKind::Param(_) | OpKind::ProgramId(_) | OpKind::NumPrograms(_) => {
                    u.extend(op.results.iter().copied());
                }
                kind if kind.is_elementwise() && scalar_res && op.kind.operands().iter().all(|v| u.contains(v)) =>
                {
                    u.extend(op.results.iter().copied());
                }
                OpKind::For { lo, hi, step, inits, body } => {
                    let ctl = u.contains(lo) && u.contains(hi) && u.contains(step);
                    let mut assume: Vec<bool> = inits.iter().map(|i| ctl && u.contains(i)).collect();
                    loop {
                        let mut u2 = u.clone();
                        if ctl {
                            u2.insert(body.args[0]);
                        }
                        for (a, &ok) in body.args[1..].iter().zip(&assume) {
                            if ok {
                                u2.insert(*a);
                            }
                        }
                        block(k, body, &mut u2);
                        let ys = yields(body);
                        let next: Vec<bool> = assume.iter().zip(&ys).map(|(&a, y)| a && u2.contains(y)).collect();
                        if next == assume {
                            *u = u2;
                            break;
                        }
                        assume = next;
                    }
                    for (r, &ok) in op.results.iter().zip(&assume) {
                        if ok {
                            u.insert(*r);
                        }
                    }
                }
                OpKind::If { cond, then_, else_ } => {
                    block(k, then_, u);
                    block(k, else_, u);
                    let (yt, ye) = (yields(then_), yields(else_));
                    for (i, r) in op.results.iter().enumerate() {
                        if u.contains(cond) && yt.get(i).is_some_and(|y| u.contains(y)) && ye.get(i).is_some_and(|y| u.contains(y)) {
                            u.insert(*r);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut u = HashSet::new();
    block(k, &k.body, &mut u);
    u
}

impl<'k> Em<'k> {
    fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(EmitError { kernel: self.k.name.clone(), line: self.loc.line, msg: msg.into() })
    }

    fn l(&mut self, s: impl AsRef<str>) {
        for _ in 0..self.ind {
            self.body.push_str("    ");
        }
        self.body.push_str(s.as_ref());
        self.body.push('\n');
    }

    fn fresh(&mut self) -> String {
        self.tmp += 1;
        format!("t{}", self.tmp)
    }

    /// `let tN: ty = e;` in the body.
    fn let_(&mut self, w: W, e: impl AsRef<str>) -> String {
        let n = self.fresh();
        self.l(format!("let {n}: {} = {};", w.name(), e.as_ref()));
        n
    }

    /// `let` in the prologue (function scope, visible everywhere).
    fn plet(&mut self, w: W, e: impl AsRef<str>) -> String {
        let n = self.fresh();
        let _ = writeln!(self.pro, "    let {n}: {} = {};", w.name(), e.as_ref());
        n
    }

    fn var_(&mut self, w: W, init: Option<&str>) -> String {
        let n = self.fresh();
        match init {
            Some(i) => self.l(format!("var {n}: {} = {i};", w.name())),
            None => self.l(format!("var {n}: {};", w.name())),
        }
        n
    }

    fn bar(&mut self) {
        self.barriers += 1;
        self.l("workgroupBarrier();");
    }

    fn smem_need(&mut self, words: u32) {
        self.smem_words = self.smem_words.max(words.max(1));
    }

    fn helper(&mut self, name: &str) -> String {
        if self.helpers.contains_key(name) {
            return name.to_string();
        }
        let code = match name {
            "ft_isnan" => "fn ft_isnan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }\n".to_string(),
            "ft_fmax" | "ft_fmin" => {
                self.helper("ft_isnan");
                let c = if name == "ft_fmax" { ">" } else { "<" };
                format!("// the non-NaN operand when one is NaN (branch-free: a NaN `b` fails the comparison)\nfn {name}(a: f32, b: f32) -> f32 {{\n    return select(a, b, b {c} a || ft_isnan(a));\n}}\n")
            }
            "ft_f2h" => F2H.to_string(),
            "ft_h2f" => {
                if self.o.shader_f16 {
                    self.uses_f16 = true;
                    "// f16 bits -> f32 (exact)\nfn ft_h2f(h: u32) -> f32 { return unpack2x16float(h).x; }\n".to_string()
                } else {
                    H2F.to_string()
                }
            }
            "ft_rh" => {
                self.helper("ft_f2h");
                self.helper("ft_h2f");
                "// round an f32 to the nearest-even f16 value\nfn ft_rh(x: f32) -> f32 { return ft_h2f(ft_f2h(x)); }\n".to_string()
            }
            "ft_f2b" => F2B.to_string(),
            "ft_b2f" => "fn ft_b2f(h: u32) -> f32 { return bitcast<f32>(h << 16u); }\n".to_string(),
            "ft_rb" => {
                self.helper("ft_f2b");
                self.helper("ft_b2f");
                "// round an f32 to the nearest-even bf16 value\nfn ft_rb(x: f32) -> f32 { return ft_b2f(ft_f2b(x)); }\n".to_string()
            }
            "ft_div" => DIV.to_string(),
            "ft_exp" => EXP.to_string(),
            "ft_exp2" => EXP2.to_string(),
            "ft_i2f" => "// i32 -> f32 rounded to nearest-even (both parts exact, one rounding in +)\nfn ft_i2f(x: i32) -> f32 { let lo = x & 0xffff; return f32(x - lo) + f32(lo); }\n".to_string(),
            "ft_u2f" => "fn ft_u2f(x: u32) -> f32 { let lo = x & 0xffffu; return f32(x - lo) + f32(lo); }\n".to_string(),
            "ft_u2f_odd" => U2F_ODD.to_string(),
            "ft_i2f_odd" => {
                self.helper("ft_u2f_odd");
                "fn ft_i2f_odd(x: i32) -> f32 {\n    let n = x < 0;\n    let f = ft_u2f_odd(select(bitcast<u32>(x), 0u - bitcast<u32>(x), n));\n    return select(f, -f, n);\n}\n".to_string()
            }
            "ft_f2i" => {
                self.helper("ft_isnan");
                "// saturating, NaN -> 0\nfn ft_f2i(x: f32) -> i32 {\n    if (ft_isnan(x)) { return 0i; }\n    if (x >= 2147483648.0f) { return 2147483647i; }\n    if (x <= -2147483648.0f) { return bitcast<i32>(0x80000000u); }\n    return i32(x);\n}\n".to_string()
            }
            "ft_f2u" => {
                self.helper("ft_isnan");
                "// saturating, NaN -> 0\nfn ft_f2u(x: f32) -> u32 {\n    if (ft_isnan(x) || x <= 0.0f) { return 0u; }\n    if (x >= 4294967296.0f) { return 4294967295u; }\n    return u32(x);\n}\n".to_string()
            }
            "ft_log" => {
                self.helper("ft_div");
                log_code()
            }
            "ft_tanh" => {
                self.helper("ft_div");
                self.helper("ft_exp");
                tanh_code()
            }
            "ft_sigmoid" => {
                self.helper("ft_div");
                self.helper("ft_exp");
                "fn ft_sigmoid(x: f32) -> f32 { return ft_div(1.0f, 1.0f + ft_exp(-x)); }\n".to_string()
            }
            "ft_erf" => {
                self.helper("ft_div");
                self.helper("ft_exp");
                erf_code()
            }
            "ft_sincos" => sincos_code(),
            "ft_tf32" => "// round to a 10-bit mantissa, nearest-even (finite values)\nfn ft_tf32(x: f32) -> f32 {\n    let b = bitcast<u32>(x);\n    if ((b & 0x7f800000u) == 0x7f800000u) { return x; }\n    return bitcast<f32>((b + 0xfffu + ((b >> 13u) & 1u)) & 0xffffe000u);\n}\n".to_string(),
            "ft_tf32_trunc" => "// drop the 13 low mantissa bits (finite values)\nfn ft_tf32_trunc(x: f32) -> f32 {\n    let b = bitcast<u32>(x);\n    if ((b & 0x7f800000u) == 0x7f800000u) { return x; }\n    return bitcast<f32>(b & 0xffffe000u);\n}\n".to_string(),
            "ft_add64" => "// i64 as vec2<u32>(low, high)\nfn ft_add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { let lo = a.x + b.x; return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x)); }\n".to_string(),
            "ft_sub64" => "fn ft_sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x)); }\n".to_string(),
            "ft_lt64" => "// signed a < b\nfn ft_lt64(a: vec2<u32>, b: vec2<u32>) -> bool { return bitcast<i32>(a.y) < bitcast<i32>(b.y) || (a.y == b.y && a.x < b.x); }\n".to_string(),
            "ft_mulwide" => MULWIDE.to_string(),
            "ft_mul64" => {
                self.helper("ft_mulwide");
                "fn ft_mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { let p = ft_mulwide(a.x, b.x); return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x); }\n".to_string()
            }
            "ft_shl64" => SHL64.to_string(),
            "ft_shr64" => SHR64.to_string(),
            "ft_udivrem64" => UDIVREM64.to_string(),
            "ft_divrem64" => {
                self.helper("ft_udivrem64");
                self.helper("ft_sub64");
                DIVREM64.to_string()
            }
            "ft_l2f" => {
                self.helper("ft_u2f");
                self.helper("ft_u2f_odd");
                self.helper("ft_sub64");
                L2F.to_string()
            }
            "ft_f2l" => {
                self.helper("ft_isnan");
                self.helper("ft_sub64");
                F2L.to_string()
            }
            _ => panic!("wgsl: unknown helper {name}"),
        };
        self.helpers.insert(name.to_string(), code);
        name.to_string()
    }

    /// Per-buffer helper: packed store (`st`) or atomic add (`add`).
    fn buf_helper(&mut self, p: u32, kind: &str) -> String {
        let name = format!("ft_{kind}_b{p}");
        if self.helpers.contains_key(&name) {
            return name;
        }
        let d = self.bufs[p as usize].unwrap().dtype;
        let (sh, bits) = match d.size_bytes() {
            1 => (2u32, 8u32),
            2 => (1, 16),
            _ => (0, 32),
        };
        let code = match (kind, d) {
            ("st", _) => format!(
                "// store the {bits}-bit element i of `b{p}` (v in the low bits): CAS on its word\nfn {name}(i: u32, v: u32) {{\n    let w = i >> {sh}u;\n    if (w >= arrayLength(&b{p})) {{ return; }}\n    let s = (i & {m}u) * {bits}u;\n    var old = atomicLoad(&b{p}[w]);\n    loop {{\n        let r = atomicCompareExchangeWeak(&b{p}[w], old, insertBits(old, v, s, {bits}u));\n        if (r.exchanged) {{ break; }}\n        old = r.old_value;\n    }}\n}}\n",
                m = (1u32 << sh) - 1
            ),
            ("add", DType::F32) => format!(
                "fn {name}(i: u32, v: f32) {{\n    if (i >= arrayLength(&b{p})) {{ return; }}\n    var old = atomicLoad(&b{p}[i]);\n    loop {{\n        let r = atomicCompareExchangeWeak(&b{p}[i], old, bitcast<u32>(bitcast<f32>(old) + v));\n        if (r.exchanged) {{ break; }}\n        old = r.old_value;\n    }}\n}}\n"
            ),
            ("add", _) => {
                let (vty, newv) = match d {
                    DType::F16 => {
                        self.helper("ft_f2h");
                        self.helper("ft_h2f");
                        ("f32", "ft_f2h(ft_h2f(e) + v)".to_string())
                    }
                    DType::BF16 => {
                        self.helper("ft_f2b");
                        self.helper("ft_b2f");
                        ("f32", "ft_f2b(ft_b2f(e) + v)".to_string())
                    }
                    DType::I8 => ("i32", "(e + bitcast<u32>(v)) & 0xffu".to_string()),
                    _ => ("u32", "(e + v) & 0xffu".to_string()),
                };
                format!(
                    "fn {name}(i: u32, v: {vty}) {{\n    let w = i >> {sh}u;\n    if (w >= arrayLength(&b{p})) {{ return; }}\n    let s = (i & {m}u) * {bits}u;\n    var old = atomicLoad(&b{p}[w]);\n    loop {{\n        let e = extractBits(old, s, {bits}u);\n        let r = atomicCompareExchangeWeak(&b{p}[w], old, insertBits(old, {newv}, s, {bits}u));\n        if (r.exchanged) {{ break; }}\n        old = r.old_value;\n    }}\n}}\n",
                    m = (1u32 << sh) - 1
                )
            }
            _ => unreachable!(),
        };
        self.helpers.insert(name.clone(), code);
        name
    }

    // ------------------------------------------------------------ layouts

    fn shape_u32(&self, v: V) -> Vec<u32> {
        self.k.ty(v).shape().iter().map(|d| d.known().unwrap() as u32).collect()
    }

    fn layout(&mut self, shape: &[u32]) -> R<Rc<Layout>> {
        if let Some(l) = self.layouts.get(shape) {
            return Ok(l.clone());
        }
        if let Some(d) = shape.iter().find(|d| !d.is_power_of_two()) {
            return self.err(format!("tile dimension {d} is not a power of two"));
        }
        let bl = Blocked::canonical(shape, self.nwarps, self.vec);
        let mut thread = vec![];
        for d in 0..bl.rank() {
            let mut terms = vec![];
            if bl.tpw[d] > 1 {
                terms.push(format!("((ft_lane >> {}u) & {}u)", bl.lane_shift[d], bl.tpw[d] - 1));
            }
            if bl.wpc[d] > 1 {
                terms.push(format!("{}u * ((ft_warp >> {}u) & {}u)", bl.warp_mul[d], bl.warp_shift[d], bl.wpc[d] - 1));
            }
            let e = if terms.is_empty() { "0u".to_string() } else { format!("{}u * ({})", bl.spt[d], terms.join(" + ")) };
            thread.push(self.plet(W::U, e));
        }
        let konst = bl.konst();
        let l = Rc::new(Layout { bl, konst, thread });
        self.layouts.insert(shape.to_vec(), l.clone());
        Ok(l)
    }

    fn nregs(&mut self, v: V) -> R<usize> {
        let s = self.shape_u32(v);
        if s.is_empty() {
            Ok(1)
        } else {
            Ok(self.layout(&s)?.regs())
        }
    }

    /// Index along `d` of register `r` (u32, prologue).
    fn index(&mut self, shape: &[u32], r: usize, d: usize) -> R<String> {
        let key = (shape.to_vec(), r, d);
        if let Some(s) = self.idx_cache.get(&key) {
            return Ok(s.clone());
        }
        let lay = self.layout(shape)?;
        let c = lay.konst[r][d];
        let e = if lay.bl.replicated(d) { format!("({} + {c}u) & {}u", lay.thread[d], shape[d] - 1) } else { format!("{} + {c}u", lay.thread[d]) };
        let out = self.plet(W::U, e);
        self.idx_cache.insert(key, out.clone());
        Ok(out)
    }

    /// Row-major linear index of register `r` (u32, prologue).
    fn lin(&mut self, shape: &[u32], r: usize) -> R<String> {
        if shape.is_empty() {
            return Ok("0u".into());
        }
        let key = (shape.to_vec(), r);
        if let Some(s) = self.lin_cache.get(&key) {
            return Ok(s.clone());
        }
        let strides = self.layout(shape)?.bl.strides();
        let mut terms = vec![];
        for d in 0..shape.len() {
            let i = self.index(shape, r, d)?;
            if shape[d] > 1 {
                terms.push(if strides[d] == 1 { i } else { format!("{i} * {}u", strides[d]) });
            }
        }
        let e = if terms.is_empty() { "0u".into() } else { terms.join(" + ") };
        let out = self.plet(W::U, e);
        self.lin_cache.insert(key, out.clone());
        Ok(out)
    }

    /// Predicate true in exactly one of the invocations holding register
    /// `r`'s element (None: every holder is the only one). Scalars:
    /// invocation 0.
    fn owner(&mut self, shape: &[u32], r: usize) -> R<Option<String>> {
        let key = (shape.to_vec(), r);
        if let Some(o) = self.owner_cache.get(&key) {
            return Ok(o.clone());
        }
        let res = if shape.is_empty() {
            Some(self.plet(W::B, "ft_tid == 0u"))
        } else {
            let lay = self.layout(shape)?;
            let mut terms = vec![];
            for (d, &s) in shape.iter().enumerate() {
                if lay.bl.replicated(d) {
                    terms.push(format!("({} + {}u < {s}u)", lay.thread[d], lay.konst[r][d]));
                }
            }
            if terms.is_empty() {
                None
            } else {
                Some(self.plet(W::B, terms.join(" && ")))
            }
        };
        self.owner_cache.insert(key, res.clone());
        Ok(res)
    }

    fn get(&self, v: V) -> Vec<String> {
        self.vals.get(&v).cloned().unwrap_or_else(|| panic!("wgsl: value %{} not emitted", v.0))
    }

    fn elem(&self, v: V) -> Elem {
        self.k.ty(v).elem().expect("tile type")
    }

    fn dtype(&self, v: V) -> DType {
        self.elem(v).dtype()
    }

    fn wv(&self, v: V) -> W {
        w_of(self.elem(v))
    }

    // --------------------------------------------------------- helpers

    /// Round an f32 expression to the float dtype `d`.
    fn round_to(&mut self, e: &str, d: DType) -> String {
        match d {
            DType::F16 => format!("{}({e})", self.helper("ft_rh")),
            DType::BF16 => format!("{}({e})", self.helper("ft_rb")),
            _ => e.to_string(),
        }
    }

    /// Re-normalize an 8-bit integer held in 32 bits.
    fn norm8(&mut self, e: &str, d: DType) -> String {
        match d {
            DType::I8 => format!("extractBits({e}, 0u, 8u)"),
            DType::U8 => format!("(({e}) & 0xffu)"),
            _ => e.to_string(),
        }
    }

    fn to_u32(e: &str, w: W) -> String {
        match w {
            W::F | W::I => format!("bitcast<u32>({e})"),
            W::U => e.to_string(),
            W::B => format!("select(0u, 1u, {e})"),
            W::L | W::Q => unreachable!("a multi-word value in one slot"),
        }
    }

    fn from_u32(e: &str, w: W) -> String {
        match w {
            W::F => format!("bitcast<f32>({e})"),
            W::I => format!("bitcast<i32>({e})"),
            W::U => e.to_string(),
            W::B => format!("({e} != 0u)"),
            W::L | W::Q => unreachable!("a multi-word value in one slot"),
        }
    }

    /// Broadcast a scalar from invocation 0 through `workgroupUniformLoad`
    /// (the result is uniform for WGSL's analysis).
    fn uniformize(&mut self, e: &str, w: W) -> String {
        self.uses_uni = true;
        self.bar();
        self.l(format!("if (ft_tid == 0u) {{ ft_uni = {}; }}", Self::to_u32(e, w)));
        self.barriers += 1;
        let u = self.let_(W::U, "workgroupUniformLoad(&ft_uni)");
        let r = Self::from_u32(&u, w);
        self.let_(w, r)
    }

    // ------------------------------------------------------------ blocks

    fn block(&mut self, b: &Block) -> R<()> {
        self.remat.enter();
        for op in &b.ops {
            self.loc = op.loc;
            self.op(op)?;
        }
        self.remat.leave();
        Ok(())
    }

    // ------------------------------------------------- rematerialization
    // As in the PTX emitter: broadcasts / expand_dims of index arithmetic are
    // recomputed per element in the consumer's layout instead of moving
    // through workgroup memory (two barriers each).

    fn yields(b: &Block) -> Vec<V> {
        match b.ops.last().map(|o| &o.kind) {
            Some(OpKind::Yield(v)) => v.clone(),
            _ => vec![],
        }
    }

    /// WGSL types of a value's registers (views: base, dims, strides).
    fn reg_tys(&mut self, v: V) -> R<Vec<W>> {
        Ok(match self.k.ty(v) {
            Type::View { rank, .. } => std::iter::once(W::U).chain(std::iter::repeat_n(W::L, 2 * rank)).collect(),
            Type::Tile { elem, .. } => {
                let w = w_of(*elem);
                let n = self.nregs(v)?;
                vec![w; n]
            }
        })
    }

    /// Emit a nested region into a separate buffer; returns its text and
    /// whether it contains a barrier.
    fn region(&mut self, f: &mut dyn FnMut(&mut Self) -> R<()>) -> R<(String, bool)> {
        let saved = std::mem::take(&mut self.body);
        let b0 = self.barriers;
        self.ind += 1;
        let r = f(self);
        self.ind -= 1;
        let text = std::mem::replace(&mut self.body, saved);
        r?;
        Ok((text, self.barriers > b0))
    }

    // --------------------------------------------------------------- ops

    /// Elementwise ops: register i of the result from register i of each
    /// operand (operands have the result's shape, hence its layout).
    fn elementwise(&mut self, kind: &OpKind, res: V) -> R<Vec<String>> {
        Ok(match kind {
            OpKind::Binary { op: o, a, b } => self.binary(*o, *a, *b)?,
            OpKind::Cmp { op: o, a, b } => self.cmp(*o, *a, *b),
            OpKind::Unary { op: o, x } => self.unary(*o, *x)?,
            OpKind::Fma { a, b, c } => {
                let d = self.dtype(res);
                let (ra, rb, rc) = (self.get(*a), self.get(*b), self.get(*c));
                let mut out = vec![];
                for i in 0..ra.len() {
                    let e = format!("fma({}, {}, {})", ra[i], rb[i], rc[i]);
                    let e = self.round_to(&e, d);
                    out.push(self.let_(W::F, e));
                }
                out
            }
            OpKind::Select { cond, a, b } => {
                let w = self.wv(*a);
                let (rc, ra, rb) = (self.get(*cond), self.get(*a), self.get(*b));
                let mut out = vec![];
                for i in 0..ra.len() {
                    out.push(self.let_(w, format!("select({}, {}, {})", rb[i], ra[i], rc[i])));
                }
                out
            }
            OpKind::Cast { x, to } => {
                let from = self.dtype(*x);
                let rx = self.get(*x);
                let mut out = vec![];
                for r in rx {
                    out.push(self.cast(&r, from, *to)?);
                }
                out
            }
            OpKind::AddPtr { ptr, offset } => {
                let od = self.dtype(*offset);
                let (rp, ro) = (self.get(*ptr), self.get(*offset));
                let mut out = vec![];
                for i in 0..rp.len() {
                    // indices are u32: only the low 32 bits of the offset matter
                    let off = match w_dt(od) {
                        W::U => ro[i].clone(),
                        W::L => format!("{}.x", ro[i]),
                        _ => format!("bitcast<u32>({})", ro[i]),
                    };
                    out.push(self.let_(W::U, format!("{} + {off}", rp[i])));
                }
                out
            }
            _ => return self.err(format!("not an elementwise op: {kind:?}")),
        })
    }


    fn op(&mut self, op: &Op) -> R<()> {
        let k = self.k;
        let res = op.results.first().copied();
        let out: Option<Vec<String>> = match &op.kind {
            OpKind::Param(i) => {
                let i = *i as usize;
                match k.params[i].kind {
                    ParamKind::Ptr(_) => Some(vec!["0u".into()]),
                    ParamKind::Scalar(d) => {
                        let f = format!("ft_args.p{i}");
                        let e = match d {
                            DType::Bool => format!("{f} != 0u"),
                            DType::F16 => format!("{}({f} & 0xffffu)", self.helper("ft_h2f")),
                            DType::BF16 => format!("bitcast<f32>({f} << 16u)"),
                            DType::I8 => format!("extractBits({f}, 0u, 8u)"),
                            DType::U8 => format!("({f} & 0xffu)"),
                            DType::I64 => format!("vec2<u32>({f}, {f}h)"),
                            _ => f,
                        };
                        Some(vec![self.let_(w_dt(d), e)])
                    }
                }
            }
            OpKind::Constexpr(_) | OpKind::StaticAssert { .. } => return self.err("unspecialized op reached the WGSL backend"),
            OpKind::Const(l) => {
                let d = self.dtype(res.unwrap());
                let e = match w_dt(d) {
                    W::F => {
                        let f = match l {
                            Lit::Float(f) => *f,
                            Lit::Int(i) => *i as f64,
                            Lit::Bool(b) => *b as i64 as f64,
                        };
                        let v = match d {
                            DType::F16 => half::f16::from_f32(f32_round_to_odd(f)).to_f32(),
                            DType::BF16 => half::bf16::from_f32(f32_round_to_odd(f)).to_f32(),
                            _ => f as f32,
                        };
                        f32_lit(v)
                    }
                    W::B => {
                        let b = match l {
                            Lit::Bool(b) => *b,
                            Lit::Int(i) => *i != 0,
                            Lit::Float(f) => *f != 0.0,
                        };
                        b.to_string()
                    }
                    w => {
                        let i = match l {
                            Lit::Int(i) => *i,
                            Lit::Bool(b) => *b as i64,
                            Lit::Float(f) => *f as i64,
                        };
                        match d {
                            DType::I64 => format!("vec2<u32>({}u, {}u)", i as u64 as u32, (i as u64 >> 32) as u32),
                            DType::I8 => i32_lit(i as i8 as i32),
                            DType::U8 => format!("{}u", i as u8),
                            _ if w == W::U => format!("{}u", i as u32),
                            _ => i32_lit(i as i32),
                        }
                    }
                };
                Some(vec![self.let_(w_dt(d), e)])
            }
            OpKind::ProgramId(a) | OpKind::NumPrograms(a) => {
                let ax = ["x", "y", "z"][*a as usize];
                let src = if matches!(op.kind, OpKind::ProgramId(_)) { "ft_wid" } else { "ft_nwg" };
                let d = self.dtype(res.unwrap());
                let e = match w_dt(d) {
                    W::U => format!("{src}.{ax}"),
                    _ => format!("i32({src}.{ax})"),
                };
                Some(vec![self.let_(w_dt(d), e)])
            }
            OpKind::Arange { start, .. } => {
                let v = res.unwrap();
                let shape = self.shape_u32(v);
                let s = start.known().unwrap();
                let n = self.nregs(v)?;
                let mut regs = vec![];
                for r in 0..n {
                    let i = self.index(&shape, r, 0)?;
                    regs.push(self.let_(W::I, format!("i32({i}) + {}", i32_lit(s as i32))));
                }
                Some(regs)
            }
            OpKind::Splat { x, .. } => {
                let n = self.nregs(res.unwrap())?;
                let s = self.get(*x)[0].clone();
                Some(vec![s; n])
            }
            OpKind::Broadcast { .. } | OpKind::ExpandDims { .. } if crate::remat::remat_into(self, res.unwrap())? => return Ok(()),
            OpKind::Broadcast { x, .. } => {
                let (src, dst) = (self.shape_u32(*x), self.shape_u32(res.unwrap()));
                let ss = strides(&src);
                let coef: Vec<u32> = (0..dst.len()).map(|d| if src[d] == 1 { 0 } else { ss[d] }).collect();
                Some(self.convert(*x, res.unwrap(), &coef)?)
            }
            OpKind::ExpandDims { x, .. } | OpKind::Reshape { x, .. } => {
                let dst = self.shape_u32(res.unwrap());
                let coef = strides(&dst);
                Some(self.convert(*x, res.unwrap(), &coef)?)
            }
            OpKind::Trans { x, perm } => {
                let src = self.shape_u32(*x);
                let ss = strides(&src);
                let coef: Vec<u32> = perm.iter().map(|&p| ss[p as usize]).collect();
                Some(self.convert(*x, res.unwrap(), &coef)?)
            }
            // the elementwise ops (`OpKind::is_elementwise`), listed for
            // the exhaustive match
            kind @ (OpKind::Binary { .. }
            | OpKind::Cmp { .. }
            | OpKind::Unary { .. }
            | OpKind::Fma { .. }
            | OpKind::Select { .. }
            | OpKind::Cast { .. }
            | OpKind::AddPtr { .. }) => Some(self.elementwise(kind, res.unwrap())?),
            OpKind::Load { ptr, mask, other } => Some(self.load(*ptr, *mask, *other, res.unwrap())?),
            OpKind::Store { ptr, value, mask } => {
                self.store(*ptr, *value, *mask, false)?;
                None
            }
            OpKind::AtomicAdd { ptr, value, mask } => {
                self.store(*ptr, *value, *mask, true)?;
                None
            }
            OpKind::MakeView { base, shape, strides } => {
                // [base (u32 element offset), dims (i64)..., strides (i64)...]
                let mut regs = vec![self.get(*base)[0].clone()];
                for v in shape.iter().chain(strides) {
                    let r = self.get(*v)[0].clone();
                    let d = self.dtype(*v);
                    if !d.is_int() {
                        return self.err(format!("view shape/stride of dtype {d}"));
                    }
                    regs.push(self.cast(&r, d, DType::I64)?);
                }
                Some(regs)
            }
            OpKind::LoadBlock { view, offsets, .. } => {
                let v = res.unwrap();
                let shape = self.shape_u32(v);
                let p = self.base_of(*view)?;
                let (idxs, inb) = self.block_ptrs(*view, offsets, &shape)?;
                let d = self.dtype(v);
                let mut out = vec![];
                for (i, m) in idxs.iter().zip(&inb) {
                    out.push(self.load_masked(p, i, Some(m), zero_of(w_dt(d)), d)?);
                }
                Some(out)
            }
            OpKind::StoreBlock { view, offsets, value } => {
                let shape = self.shape_u32(*value);
                let p = self.base_of(*view)?;
                let (idxs, inb) = self.block_ptrs(*view, offsets, &shape)?;
                let vals = self.get(*value);
                let d = self.dtype(*value);
                for r in 0..idxs.len() {
                    let pred = match self.owner(&shape, r)? {
                        Some(o) => format!("{} && {o}", inb[r]),
                        None => inb[r].clone(),
                    };
                    self.l(format!("if ({pred}) {{"));
                    self.ind += 1;
                    self.store_elem(p, &idxs[r], &vals[r], d, false)?;
                    self.ind -= 1;
                    self.l("}");
                }
                None
            }
            OpKind::Reduce { op: o, x, axis } => Some(self.reduce(*o, *x, *axis as usize, res.unwrap())?),
            OpKind::Scan { x, axis, .. } => Some(self.scan(*x, *axis as usize, res.unwrap())?),
            OpKind::Dot { a, b, acc, precision } => Some(self.dot(*a, *b, *acc, *precision, res.unwrap())?),
            OpKind::For { lo, hi, step, inits, body } => {
                self.for_(op, *lo, *hi, *step, inits, body)?;
                return Ok(());
            }
            OpKind::If { cond, then_, else_ } => {
                self.if_(op, *cond, then_, else_)?;
                return Ok(());
            }
            OpKind::Yield(_) => None,
            // Device printing is honoured by the interpreter only.
            OpKind::Print { .. } => None,
        };
        if let (Some(regs), Some(r)) = (out, res) {
            self.vals.insert(r, regs);
        }
        Ok(())
    }

    fn base_of(&self, v: V) -> R<u32> {
        match self.base.get(&v) {
            Some(p) => Ok(*p),
            None => self.err("pointer of unknown provenance"),
        }
    }

    fn for_(&mut self, op: &Op, lo: V, hi: V, step: V, inits: &[V], body: &Block) -> R<()> {
        let ivd = self.dtype(body.args[0]);
        let (rlo, rhi, rst) = (self.get(lo)[0].clone(), self.get(hi)[0].clone(), self.get(step)[0].clone());
        // Trip count in u32: no overflow of the induction variable, step <= 0 runs nothing.
        let n = match w_dt(ivd) {
            W::U => {
                let d = self.let_(W::U, format!("{rhi} - {rlo}"));
                let s = self.let_(W::U, format!("max({rst}, 1u)"));
                self.let_(W::U, format!("select(0u, {d} / {s} + select(0u, 1u, {d} % {s} != 0u), {rhi} > {rlo} && {rst} > 0u)"))
            }
            W::I => {
                let d = self.let_(W::U, format!("bitcast<u32>({rhi}) - bitcast<u32>({rlo})"));
                let s = self.let_(W::U, format!("bitcast<u32>(max({rst}, 1i))"));
                self.let_(W::U, format!("select(0u, {d} / {s} + select(0u, 1u, {d} % {s} != 0u), {rhi} > {rlo} && {rst} > 0i)"))
            }
            W::L => {
                let (sub, lt, dm) = (self.helper("ft_sub64"), self.helper("ft_lt64"), self.helper("ft_udivrem64"));
                let q = self.let_(W::Q, format!("{dm}({sub}({rhi}, {rlo}), {rst})"));
                let c = self.let_(W::U, format!("{q}.x + select(0u, 1u, any({q}.zw != vec2<u32>(0u, 0u)))"));
                // more than 2^32 - 1 iterations: as many as a u32 counts
                let c = self.let_(W::U, format!("select({c}, 0xffffffffu, {q}.y != 0u || {c} < {q}.x)"));
                self.let_(W::U, format!("select(0u, {c}, {lt}({rlo}, {rhi}) && {lt}(vec2<u32>(0u, 0u), {rst}))"))
            }
            _ => return self.err(format!("loop induction variable of dtype {ivd}")),
        };
        // loop-carried registers
        let mut carried: Vec<(Vec<W>, Vec<String>)> = vec![];
        for (a, init) in body.args[1..].iter().zip(inits) {
            let tys = self.reg_tys(*a)?;
            let src = self.get(*init);
            let vars: Vec<String> = tys.iter().zip(&src).map(|(w, s)| self.var_(*w, Some(s))).collect();
            carried.push((tys, vars));
        }
        let it = self.fresh();
        let iv_w = w_dt(ivd);
        let ctl_uniform = self.uni.contains(&lo) && self.uni.contains(&hi) && self.uni.contains(&step);
        let (text, has_bar) = self.region(&mut |em: &mut Self| {
            let iv = match iv_w {
                W::U => em.let_(W::U, format!("{rlo} + {it} * {rst}")),
                W::L => {
                    let (add, mul) = (em.helper("ft_add64"), em.helper("ft_mul64"));
                    em.let_(W::L, format!("{add}({rlo}, {mul}(vec2<u32>({it}, 0u), {rst}))"))
                }
                _ => em.let_(W::I, format!("{rlo} + bitcast<i32>({it} * bitcast<u32>({rst}))")),
            };
            em.vals.insert(body.args[0], vec![iv]);
            for (a, (tys, vars)) in body.args[1..].iter().zip(&carried) {
                let regs: Vec<String> = tys.iter().zip(vars).map(|(w, v)| em.let_(*w, v)).collect();
                em.vals.insert(*a, regs);
            }
            em.block(body)?;
            let ys = Self::yields(body);
            for ((_, vars), y) in carried.iter().zip(&ys) {
                let src = em.get(*y);
                for (d, s) in vars.iter().zip(&src) {
                    em.l(format!("{d} = {s};"));
                }
            }
            Ok(())
        })?;
        let n = if has_bar && !ctl_uniform { self.uniformize(&n, W::U) } else { n };
        self.l(format!("for (var {it}: u32 = 0u; {it} < {n}; {it} = {it} + 1u) {{"));
        self.body.push_str(&text);
        self.l("}");
        for (r, (_, vars)) in op.results.iter().zip(carried) {
            self.vals.insert(*r, vars);
        }
        Ok(())
    }

    fn if_(&mut self, op: &Op, cond: V, then_: &Block, else_: &Block) -> R<()> {
        let c = self.get(cond)[0].clone();
        let mut outs: Vec<Vec<String>> = vec![];
        for r in &op.results {
            let tys = self.reg_tys(*r)?;
            outs.push(tys.iter().map(|w| self.var_(*w, None)).collect());
        }
        let mut texts = vec![];
        let mut any_bar = false;
        for blk in [then_, else_] {
            let (t, b) = self.region(&mut |em: &mut Self| {
                em.block(blk)?;
                let ys = Self::yields(blk);
                for (vars, y) in outs.iter().zip(&ys) {
                    let src = em.get(*y);
                    for (d, s) in vars.iter().zip(&src) {
                        em.l(format!("{d} = {s};"));
                    }
                }
                Ok(())
            })?;
            any_bar |= b;
            texts.push(t);
        }
        let c = if any_bar && !self.uni.contains(&cond) { self.uniformize(&c, W::B) } else { c };
        self.l(format!("if ({c}) {{"));
        self.body.push_str(&texts[0]);
        if texts[1].trim().is_empty() {
            self.l("}");
        } else {
            self.l("} else {");
            self.body.push_str(&texts[1]);
            self.l("}");
        }
        for (r, vars) in op.results.iter().zip(outs) {
            self.vals.insert(*r, vars);
        }
        Ok(())
    }

    fn binary(&mut self, o: BinOp, a: V, b: V) -> R<Vec<String>> {
        let d = self.dtype(a);
        let w = w_dt(d);
        let (ra, rb) = (self.get(a), self.get(b));
        let mut out = vec![];
        for i in 0..ra.len() {
            let (x, y) = (&ra[i], &rb[i]);
            let e = match w {
                W::F => {
                    let e = match o {
                        BinOp::Add => format!("{x} + {y}"),
                        BinOp::Sub => format!("{x} - {y}"),
                        BinOp::Mul => format!("{x} * {y}"),
                        BinOp::Div => format!("{}({x}, {y})", self.helper("ft_div")),
                        BinOp::Max => format!("{}({x}, {y})", self.helper("ft_fmax")),
                        BinOp::Min => format!("{}({x}, {y})", self.helper("ft_fmin")),
                        _ => return self.err(format!("{o:?} on floats")),
                    };
                    self.round_to(&e, d)
                }
                W::B => match o {
                    BinOp::And | BinOp::LAnd | BinOp::Min => format!("{x} && {y}"),
                    BinOp::Or | BinOp::LOr | BinOp::Max => format!("{x} || {y}"),
                    BinOp::Xor => format!("{x} != {y}"),
                    _ => return self.err(format!("{o:?} on bool")),
                },
                W::L => match o {
                    BinOp::Add => format!("{}({x}, {y})", self.helper("ft_add64")),
                    BinOp::Sub => format!("{}({x}, {y})", self.helper("ft_sub64")),
                    BinOp::Mul => format!("{}({x}, {y})", self.helper("ft_mul64")),
                    BinOp::Div => format!("{}({x}, {y}).xy", self.helper("ft_divrem64")),
                    BinOp::Rem => format!("{}({x}, {y}).zw", self.helper("ft_divrem64")),
                    BinOp::And => format!("{x} & {y}"),
                    BinOp::Or => format!("{x} | {y}"),
                    BinOp::Xor => format!("{x} ^ {y}"),
                    BinOp::Shl => format!("{}({x}, {y})", self.helper("ft_shl64")),
                    BinOp::Shr => format!("{}({x}, {y})", self.helper("ft_shr64")),
                    BinOp::Max => format!("select({x}, {y}, {}({x}, {y}))", self.helper("ft_lt64")),
                    BinOp::Min => format!("select({x}, {y}, {}({y}, {x}))", self.helper("ft_lt64")),
                    BinOp::LAnd | BinOp::LOr => return self.err("logical op on integers"),
                },
                _ => {
                    let width = if matches!(d, DType::I8 | DType::U8) { 8 } else { 32 };
                    let e = match o {
                        BinOp::Add => format!("{x} + {y}"),
                        BinOp::Sub => format!("{x} - {y}"),
                        BinOp::Mul => format!("{x} * {y}"),
                        BinOp::Div => format!("{x} / {y}"),
                        // Signed `%` as x - (x / y)·y (0 for y == 0, like
                        // WGSL's `%`): NVIDIA's Vulkan driver returned the
                        // dividend for 81 % -9 through naga's `%` lowering.
                        BinOp::Rem if w == W::I => format!("select({x} - ({x} / {y}) * {y}, 0i, {y} == 0i)"),
                        BinOp::Rem => format!("{x} % {y}"),
                        BinOp::And => format!("{x} & {y}"),
                        BinOp::Or => format!("{x} | {y}"),
                        BinOp::Xor => format!("{x} ^ {y}"),
                        BinOp::Max => format!("max({x}, {y})"),
                        BinOp::Min => format!("min({x}, {y})"),
                        BinOp::Shl | BinOp::Shr => {
                            // amounts < 0 or >= the width: 0 (or the sign for signed >>)
                            let amt = if w == W::I { format!("bitcast<u32>({y})") } else { y.clone() };
                            let amt = self.let_(W::U, amt);
                            let big = format!("{amt} >= {width}u");
                            let sh = format!("min({amt}, 31u)");
                            if o == BinOp::Shl {
                                let z = if w == W::I { "0i" } else { "0u" };
                                format!("select({x} << {sh}, {z}, {big})")
                            } else if w == W::I {
                                format!("select({x} >> {sh}, {x} >> 31u, {big})")
                            } else {
                                format!("select({x} >> {sh}, 0u, {big})")
                            }
                        }
                        BinOp::LAnd | BinOp::LOr => return self.err("logical op on integers"),
                    };
                    self.norm8(&e, d)
                }
            };
            out.push(self.let_(w, e));
        }
        Ok(out)
    }

    fn cmp(&mut self, o: CmpOp, a: V, b: V) -> Vec<String> {
        let d = self.dtype(a);
        let (ra, rb) = (self.get(a), self.get(b));
        let s = match o {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        };
        let mut out = vec![];
        if d == DType::I64 {
            let lt = self.helper("ft_lt64");
            for i in 0..ra.len() {
                let (x, y) = (&ra[i], &rb[i]);
                let e = match o {
                    CmpOp::Eq => format!("all({x} == {y})"),
                    CmpOp::Ne => format!("any({x} != {y})"),
                    CmpOp::Lt => format!("{lt}({x}, {y})"),
                    CmpOp::Le => format!("!{lt}({y}, {x})"),
                    CmpOp::Gt => format!("{lt}({y}, {x})"),
                    CmpOp::Ge => format!("!{lt}({x}, {y})"),
                };
                out.push(self.let_(W::B, e));
            }
            return out;
        }
        // WGSL lets implementations assume floats are never NaN (llvmpipe
        // evaluates `!=` as an ordered compare), so float comparisons test
        // NaN at the bit level: ordered for == < <= > >=, unordered for !=.
        let nan = if d.is_float() { Some(self.helper("ft_isnan")) } else { None };
        for i in 0..ra.len() {
            let e = if d == DType::Bool && !matches!(o, CmpOp::Eq | CmpOp::Ne) {
                format!("select(0u, 1u, {}) {s} select(0u, 1u, {})", ra[i], rb[i])
            } else if let Some(isnan) = &nan {
                let (x, y) = (&ra[i], &rb[i]);
                if o == CmpOp::Ne {
                    format!("(!({x} == {y}) || {isnan}({x}) || {isnan}({y}))")
                } else {
                    format!("(({x} {s} {y}) && !{isnan}({x}) && !{isnan}({y}))")
                }
            } else {
                format!("{} {s} {}", ra[i], rb[i])
            };
            out.push(self.let_(W::B, e));
        }
        out
    }

    fn unary(&mut self, o: UnOp, x: V) -> R<Vec<String>> {
        let d = self.dtype(x);
        let w = w_dt(d);
        let rx = self.get(x);
        let mut out = vec![];
        for r in rx {
            let e = match w {
                W::F => {
                    let e = self.funary(o, &r)?;
                    self.round_to(&e, d)
                }
                W::B => format!("!{r}"),
                W::L => match o {
                    UnOp::Neg => format!("{}(vec2<u32>(0u, 0u), {r})", self.helper("ft_sub64")),
                    UnOp::Not => format!("~{r}"),
                    UnOp::Abs => format!("select({r}, {}(vec2<u32>(0u, 0u), {r}), bitcast<i32>({r}.y) < 0i)", self.helper("ft_sub64")),
                    _ => return self.err(format!("{} on integers", o.name())),
                },
                _ => {
                    let e = match (o, w) {
                        (UnOp::Neg, W::I) => format!("-{r}"),
                        (UnOp::Neg, _) => format!("0u - {r}"),
                        (UnOp::Not, _) => format!("~{r}"),
                        (UnOp::Abs, W::I) => format!("abs({r})"),
                        (UnOp::Abs, _) => r.clone(),
                        _ => return self.err(format!("{} on integers", o.name())),
                    };
                    self.norm8(&e, d)
                }
            };
            out.push(self.let_(w, e));
        }
        Ok(out)
    }

    /// f32 expression of a float unary op on the f32 register `x`.
    fn funary(&mut self, o: UnOp, x: &str) -> R<String> {
        Ok(match o {
            UnOp::Neg => format!("-{x}"),
            UnOp::Abs => format!("abs({x})"),
            UnOp::Exp => format!("{}({x})", self.helper("ft_exp")),
            UnOp::Exp2 => format!("{}({x})", self.helper("ft_exp2")),
            UnOp::Log => format!("{}({x})", self.helper("ft_log")),
            UnOp::Log2 => format!("{}({x}) * {}", self.helper("ft_log"), fl(std::f64::consts::LOG2_E)),
            UnOp::Sqrt => format!("sqrt({x})"),
            UnOp::Rsqrt => format!("inverseSqrt({x})"),
            UnOp::Floor => format!("floor({x})"),
            UnOp::Ceil => format!("ceil({x})"),
            UnOp::RoundTf32 => format!("{}({x})", self.helper("ft_tf32")),
            UnOp::Sigmoid => format!("{}({x})", self.helper("ft_sigmoid")),
            UnOp::Tanh => format!("{}({x})", self.helper("ft_tanh")),
            UnOp::Erf => format!("{}({x})", self.helper("ft_erf")),
            UnOp::Sin => format!("{}({x}, 0i)", self.helper("ft_sincos")),
            UnOp::Cos => format!("{}({x}, 1i)", self.helper("ft_sincos")),
            UnOp::Not => return self.err("`!` on floats"),
        })
    }

    /// Cast one register; returns the new register (or `r` itself).
    fn cast(&mut self, r: &str, from: DType, to: DType) -> R<String> {
        if from == to {
            return Ok(r.to_string());
        }
        let (wf, wt) = (w_dt(from), w_dt(to));
        let e = if from == DType::Bool {
            match wt {
                W::F => format!("select(0.0f, 1.0f, {r})"),
                W::I => format!("select(0i, 1i, {r})"),
                W::L => format!("vec2<u32>(select(0u, 1u, {r}), 0u)"),
                _ => format!("select(0u, 1u, {r})"),
            }
        } else if to == DType::Bool {
            match wf {
                W::F => format!("(bitcast<u32>({r}) & 0x7fffffffu) != 0u"),
                W::I => format!("{r} != 0i"),
                W::L => format!("any({r} != vec2<u32>(0u, 0u))"),
                _ => format!("{r} != 0u"),
            }
        } else if wt == W::L {
            match wf {
                W::F => format!("{}({r})", self.helper("ft_f2l")),
                W::I => format!("vec2<u32>(bitcast<u32>({r}), select(0u, 0xffffffffu, {r} < 0i))"),
                _ => format!("vec2<u32>({r}, 0u)"),
            }
        } else if wf == W::L {
            match to {
                DType::F32 => format!("{}({r}, false)", self.helper("ft_l2f")),
                DType::F16 | DType::BF16 => {
                    let e = format!("{}({r}, true)", self.helper("ft_l2f"));
                    self.round_to(&e, to)
                }
                DType::I32 => format!("bitcast<i32>({r}.x)"),
                DType::U32 => format!("{r}.x"),
                DType::I8 => format!("extractBits(bitcast<i32>({r}.x), 0u, 8u)"),
                _ => format!("({r}.x & 0xffu)"),
            }
        } else if wf == W::F && wt == W::F {
            // f16/bf16 values are exact in f32: one rounding to the target
            self.round_to(r, to)
        } else if wf == W::F {
            match to {
                DType::I32 => format!("{}({r})", self.helper("ft_f2i")),
                DType::I8 => format!("clamp({}({r}), -128i, 127i)", self.helper("ft_f2i")),
                DType::U32 => format!("{}({r})", self.helper("ft_f2u")),
                DType::U8 => format!("min({}({r}), 255u)", self.helper("ft_f2u")),
                _ => return self.err(format!("cast {from} -> {to}")),
            }
        } else if wt == W::F {
            if matches!(from, DType::I8 | DType::U8) {
                // exact in f32
                let e = format!("f32({r})");
                self.round_to(&e, to)
            } else if to == DType::F32 {
                if wf == W::I {
                    format!("{}({r})", self.helper("ft_i2f"))
                } else {
                    format!("{}({r})", self.helper("ft_u2f"))
                }
            } else {
                // once-rounded: round to odd in f32, then nearest-even in 16 bits
                let e = if wf == W::I { format!("{}({r})", self.helper("ft_i2f_odd")) } else { format!("{}({r})", self.helper("ft_u2f_odd")) };
                self.round_to(&e, to)
            }
        } else {
            // int -> int, wrapping
            let as_i = if wf == W::I { r.to_string() } else { format!("bitcast<i32>({r})") };
            let as_u = if wf == W::U { r.to_string() } else { format!("bitcast<u32>({r})") };
            match to {
                DType::I32 => as_i,
                DType::U32 => as_u,
                DType::I8 => format!("extractBits({as_i}, 0u, 8u)"),
                DType::U8 => format!("({as_u} & 0xffu)"),
                _ => return self.err(format!("cast {from} -> {to}")),
            }
        };
        Ok(self.let_(wt, e))
    }

    // --------------------------------------------------------- memory

    /// Expression loading word `wi` of buffer `p`.
    fn word(&self, p: u32, wi: &str) -> String {
        let b = self.bufs[p as usize].unwrap();
        if b.atomic {
            format!("atomicLoad(&b{p}[{wi}])")
        } else if b.vec4 {
            format!("b{p}[({wi}) >> 2u][({wi}) & 3u]")
        } else {
            format!("b{p}[{wi}]")
        }
    }

    /// Vector width of an access through `ptr`: 4 when every run of 4
    /// registers along the last dimension is provably contiguous, 16-byte
    /// aligned and uniformly masked, the tile is not replicated, and the
    /// buffer holds plain 32-bit elements; else 1.
    fn vec_width(&mut self, ptr: V, mask: Option<V>) -> R<u32> {
        let shape = self.shape_u32(ptr);
        let d = self.dtype(ptr);
        let plain = !matches!(self.base.get(&ptr).and_then(|&p| self.bufs[p as usize]), Some(b) if b.atomic);
        if shape.is_empty() || d.size_bytes() != 4 || !plain {
            return Ok(1);
        }
        let lay = self.layout(&shape)?;
        if lay.bl.any_replication() || lay.bl.spt[shape.len() - 1] % 4 != 0 {
            return Ok(1);
        }
        let Some(pi) = self.axis.get(&ptr).copied() else { return Ok(1) };
        let mk = mask.map_or(u64::MAX, |m| self.axis.get(&m).map_or(1, |i| i.konst));
        Ok(if pi.contig >= 4 && pi.div >= 16 && mk >= 4 { 4 } else { 1 })
    }

    /// Before emission: buffers with a `vec4` access are declared as
    /// `array<vec4<T>>` (the declaration must be known before any access).
    fn mark_vec4_buffers(&mut self) -> R<()> {
        let mut acc = vec![];
        self.k.walk(&mut |op| match &op.kind {
            OpKind::Load { ptr, mask, .. } => acc.push((*ptr, *mask)),
            OpKind::Store { ptr, mask, .. } => acc.push((*ptr, *mask)),
            _ => {}
        });
        for (ptr, mask) in acc {
            if self.vec_width(ptr, mask)? == 4 {
                let p = self.base_of(ptr)?;
                if let Some(b) = self.bufs[p as usize].as_mut() {
                    b.vec4 = true;
                }
            }
        }
        Ok(())
    }

    /// Expression of element `i` (a u32 register) of buffer `p`.
    fn load_elem(&mut self, p: u32, i: &str, d: DType) -> R<String> {
        let atomic = self.bufs[p as usize].unwrap().atomic;
        Ok(match d {
            DType::F32 if atomic => format!("bitcast<f32>(atomicLoad(&b{p}[{i}]))"),
            DType::F32 | DType::I32 | DType::U32 => self.word(p, i),
            DType::I64 if atomic => format!("vec2<u32>(atomicLoad(&b{p}[2u * {i}]), atomicLoad(&b{p}[2u * {i} + 1u]))"),
            DType::I64 => format!("b{p}[{i}]"),
            DType::F16 => {
                let w = self.word(p, &format!("{i} >> 1u"));
                format!("{}(extractBits({w}, ({i} & 1u) << 4u, 16u))", self.helper("ft_h2f"))
            }
            DType::BF16 => {
                let w = self.word(p, &format!("{i} >> 1u"));
                format!("bitcast<f32>(extractBits({w}, ({i} & 1u) << 4u, 16u) << 16u)")
            }
            DType::I8 => {
                let w = self.word(p, &format!("{i} >> 2u"));
                format!("extractBits(bitcast<i32>({w}), ({i} & 3u) << 3u, 8u)")
            }
            DType::U8 => {
                let w = self.word(p, &format!("{i} >> 2u"));
                format!("extractBits({w}, ({i} & 3u) << 3u, 8u)")
            }
            _ => return self.err(format!("memory of dtype {d}")),
        })
    }

    /// Masked load: masked-off lanes read element 0 and take `other`.
    fn load_masked(&mut self, p: u32, i: &str, mask: Option<&String>, other: &str, d: DType) -> R<String> {
        let w = w_dt(d);
        match mask {
            None => {
                let e = self.load_elem(p, i, d)?;
                Ok(self.let_(w, e))
            }
            Some(m) => {
                let j = self.let_(W::U, format!("select(0u, {i}, {m})"));
                let e = self.load_elem(p, &j, d)?;
                Ok(self.let_(w, format!("select({other}, {e}, {m})")))
            }
        }
    }

    fn load(&mut self, ptr: V, mask: Option<V>, other: Option<V>, res: V) -> R<Vec<String>> {
        let d = self.dtype(res);
        let p = self.base_of(ptr)?;
        let rp = self.get(ptr);
        let masks = mask.map(|m| self.get(m));
        let others = other.map(|o| self.get(o));
        let zero = zero_of(w_dt(d));
        let w = self.vec_width(ptr, mask)? as usize;
        let mut out = vec![];
        let mut r = 0;
        while r < rp.len() {
            let other = |r: usize| others.as_ref().map(|o| o[r].clone()).unwrap_or_else(|| zero.to_string());
            if w == 4 {
                // one aligned vec4: masked-off groups read vector 0
                let m = masks.as_ref().map(|m| m[r].clone());
                let q = match &m {
                    Some(m) => self.let_(W::U, format!("select(0u, {} >> 2u, {m})", rp[r])),
                    None => self.let_(W::U, format!("{} >> 2u", rp[r])),
                };
                let v = self.fresh();
                self.l(format!("let {v} = b{p}[{q}];"));
                for j in 0..4 {
                    out.push(match &m {
                        Some(m) => self.let_(w_dt(d), format!("select({}, {v}[{j}], {m})", other(r + j))),
                        None => self.let_(w_dt(d), format!("{v}[{j}]")),
                    });
                }
                r += 4;
                continue;
            }
            out.push(self.load_masked(p, &rp[r], masks.as_ref().map(|m| &m[r]), &other(r), d)?);
            r += 1;
        }
        Ok(out)
    }

    /// Store (or atomically add) the register `v` at element `i` of `p`.
    fn store_elem(&mut self, p: u32, i: &str, v: &str, d: DType, atomic_add: bool) -> R<()> {
        let b = self.bufs[p as usize].unwrap();
        if atomic_add {
            match d {
                DType::I32 | DType::U32 => self.l(format!("atomicAdd(&b{p}[{i}], {v});")),
                DType::I64 => {
                    // low word, then the high word with the carry: the sum is
                    // exact under contention (readers may see a torn value)
                    let o = self.let_(W::U, format!("atomicAdd(&b{p}[2u * {i}], {v}.x)"));
                    self.l(format!("atomicAdd(&b{p}[2u * {i} + 1u], {v}.y + select(0u, 1u, {o} + {v}.x < {o}));"));
                }
                DType::F32 | DType::F16 | DType::BF16 | DType::I8 | DType::U8 => {
                    let h = self.buf_helper(p, "add");
                    self.l(format!("{h}({i}, {v});"));
                }
                _ => return self.err(format!("atomic_add on {d}")),
            }
            return Ok(());
        }
        match d {
            DType::F32 | DType::I32 | DType::U32 => {
                if b.atomic {
                    let val = if d == DType::F32 { format!("bitcast<u32>({v})") } else { v.to_string() };
                    self.l(format!("atomicStore(&b{p}[{i}], {val});"));
                } else if b.vec4 {
                    self.l(format!("b{p}[({i}) >> 2u][({i}) & 3u] = {v};"));
                } else {
                    self.l(format!("b{p}[{i}] = {v};"));
                }
            }
            DType::I64 if b.atomic => {
                self.l(format!("atomicStore(&b{p}[2u * {i}], {v}.x);"));
                self.l(format!("atomicStore(&b{p}[2u * {i} + 1u], {v}.y);"));
            }
            DType::I64 => self.l(format!("b{p}[{i}] = {v};")),
            DType::F16 | DType::BF16 | DType::I8 | DType::U8 => {
                let bits = self.bits16(v, d);
                let h = self.buf_helper(p, "st");
                self.l(format!("{h}({i}, {bits});"));
            }
            _ => return self.err(format!("memory of dtype {d}")),
        }
        Ok(())
    }

    /// Bit pattern (u32, low bits) of a packed element register.
    fn bits16(&mut self, v: &str, d: DType) -> String {
        match d {
            DType::F16 => format!("{}({v})", self.helper("ft_f2h")),
            DType::BF16 => format!("(bitcast<u32>({v}) >> 16u)"),
            DType::I8 => format!("(bitcast<u32>({v}) & 0xffu)"),
            _ => format!("({v} & 0xffu)"),
        }
    }

    fn store(&mut self, ptr: V, value: V, mask: Option<V>, atomic: bool) -> R<()> {
        let shape = self.shape_u32(ptr);
        let d = self.dtype(value);
        let p = self.base_of(ptr)?;
        let rp = self.get(ptr);
        let rv = self.get(value);
        let rm = mask.map(|m| self.get(m));
        let mut preds: Vec<Option<String>> = vec![];
        for r in 0..rp.len() {
            let own = self.owner(&shape, r)?;
            preds.push(match (&rm, own) {
                (Some(m), Some(o)) => Some(format!("{} && {o}", m[r])),
                (Some(m), None) => Some(m[r].clone()),
                (None, o) => o,
            });
        }
        // Pairs of 16-bit elements one invocation holds consecutively: one
        // word store when they turn out to share an aligned word.
        let pairs = !atomic && d.size_bytes() == 2 && !shape.is_empty() && {
            let lay = self.layout(&shape)?;
            !lay.bl.any_replication() && lay.bl.spt[shape.len() - 1] % 2 == 0
        };
        let w = if atomic { 1 } else { self.vec_width(ptr, mask)? as usize };
        let mut r = 0;
        while r < rp.len() {
            if w == 4 {
                // one aligned vec4 (no replication: the mask is the predicate)
                let v = format!("vec4<{}>({})", w_dt(d).name(), rv[r..r + 4].join(", "));
                let st = format!("b{p}[{} >> 2u] = {v};", rp[r]);
                match &preds[r] {
                    Some(c) => self.l(format!("if ({c}) {{ {st} }}")),
                    None => self.l(st),
                }
                r += 4;
                continue;
            }
            if pairs && r + 1 < rp.len() {
                let (p0, p1) = (&rp[r], &rp[r + 1]);
                let both = match (&preds[r], &preds[r + 1]) {
                    (Some(a), Some(b)) => format!("({a}) && ({b}) && "),
                    _ => String::new(),
                };
                let (h0, h1) = (self.bits16(&rv[r], d), self.bits16(&rv[r + 1], d));
                let (h0, h1) = (self.let_(W::U, h0), self.let_(W::U, h1));
                self.l(format!("if ({both}({p0} & 1u) == 0u && {p1} == {p0} + 1u && ({p0} >> 1u) < arrayLength(&b{p})) {{"));
                self.l(format!("    atomicStore(&b{p}[{p0} >> 1u], {h0} | ({h1} << 16u));"));
                self.l("} else {");
                self.ind += 1;
                let h = self.buf_helper(p, "st");
                for (j, hv) in [(r, &h0), (r + 1, &h1)] {
                    match &preds[j] {
                        Some(c) => self.l(format!("if ({c}) {{ {h}({}, {hv}); }}", rp[j])),
                        None => self.l(format!("{h}({}, {hv});", rp[j])),
                    }
                }
                self.ind -= 1;
                self.l("}");
                r += 2;
                continue;
            }
            match &preds[r] {
                Some(c) => {
                    self.l(format!("if ({c}) {{"));
                    self.ind += 1;
                    self.store_elem(p, &rp[r], &rv[r], d, atomic)?;
                    self.ind -= 1;
                    self.l("}");
                }
                None => self.store_elem(p, &rp[r], &rv[r], d, atomic)?,
            }
            r += 1;
        }
        Ok(())
    }

    /// Element indices and in-bounds predicates of a block access.
    fn block_ptrs(&mut self, view: V, offsets: &[V], shape: &[u32]) -> R<(Vec<String>, Vec<String>)> {
        let vr = self.get(view);
        let rank = shape.len();
        let base = vr[0].clone();
        let dims: Vec<String> = vr[1..1 + rank].to_vec();
        let strides: Vec<String> = vr[1 + rank..1 + 2 * rank].to_vec();
        let mut offs = vec![];
        for o in offsets {
            let r = self.get(*o)[0].clone();
            let d = self.dtype(*o);
            if !d.is_int() {
                return self.err("block offset of a non-integer dtype");
            }
            offs.push(self.cast(&r, d, DType::I64)?);
        }
        let n = self.layout(shape)?.regs();
        let (add, lt) = (self.helper("ft_add64"), self.helper("ft_lt64"));
        let mut idxs = vec![];
        let mut preds = vec![];
        for r in 0..n {
            let mut addr = vec![base.clone()];
            let mut pred = vec![];
            for d in 0..rank {
                let i = self.index(shape, r, d)?;
                // coordinates and bounds in 64 bits; the index needs only the low word
                let c = self.let_(W::L, format!("{add}({}, vec2<u32>({i}, 0u))", offs[d]));
                pred.push(format!("bitcast<i32>({c}.y) >= 0i && {lt}({c}, {})", dims[d]));
                addr.push(format!("{c}.x * {}.x", strides[d]));
            }
            idxs.push(self.let_(W::U, addr.join(" + ")));
            preds.push(self.let_(W::B, pred.join(" && ")));
        }
        Ok((idxs, preds))
    }

    // --------------------------------------- workgroup-memory movement

    /// Store register `v` in the workgroup-memory slot at word `a`.
    fn st_slot(&mut self, a: &str, v: &str, w: W) {
        if w == W::L {
            self.l(format!("ft_smem[{a}] = {v}.x;"));
            self.l(format!("ft_smem[{a} + 1u] = {v}.y;"));
        } else {
            self.l(format!("ft_smem[{a}] = {};", Self::to_u32(v, w)));
        }
    }

    /// Expression reading the slot at word `a`.
    fn ld_slot(a: &str, w: W) -> String {
        if w == W::L {
            format!("vec2<u32>(ft_smem[{a}], ft_smem[{a} + 1u])")
        } else {
            Self::from_u32(&format!("ft_smem[{a}]"), w)
        }
    }

    /// Write registers (canonical layout of `shape`) to the slots from word
    /// `base` on, in row-major order.
    fn stage(&mut self, regs: &[String], shape: &[u32], w: W, base: u32) -> R<()> {
        for (r, v) in regs.iter().enumerate() {
            let lin = self.lin(shape, r)?;
            let mut a = if w.nw() == 1 { lin } else { format!("{lin} * {}u", w.nw()) };
            if base != 0 {
                a = format!("{a} + {base}u");
            }
            self.st_slot(&a, v, w);
        }
        Ok(())
    }

    /// Layout conversion: element `idx` of the result is the source element
    /// at linear index `sum_d coef[d] * idx[d]`. Register renaming when every
    /// invocation already holds what it needs; otherwise through workgroup
    /// memory.
    fn convert(&mut self, x: V, res: V, coef: &[u32]) -> R<Vec<String>> {
        let (src, dst) = (self.shape_u32(x), self.shape_u32(res));
        let regs = self.get(x);
        if src.is_empty() {
            let n = self.nregs(res)?;
            return Ok(vec![regs[0].clone(); n]);
        }
        let sl = self.layout(&src)?;
        let dl = if dst.is_empty() { None } else { Some(self.layout(&dst)?) };
        let n_dst = dl.as_ref().map(|l| l.regs()).unwrap_or(1);
        let src_lin = |t: u32, r: usize| sl.lin_of(t, r);
        let dst_need = |t: u32, r: usize| match &dl {
            None => 0,
            Some(l) => l.coords_of(t, r).iter().zip(coef).map(|(i, c)| i * c).sum(),
        };
        if let Some(m) = local_map(self.nt, sl.regs(), &src_lin, n_dst, &dst_need) {
            return Ok(m.iter().map(|&s| regs[s].clone()).collect());
        }
        let w = match self.k.ty(x) {
            Type::Tile { elem, .. } => w_of(*elem),
            Type::View { .. } => return self.err("layout conversion of a view"),
        };
        let n_src: u32 = src.iter().product();
        self.smem_need(n_src * w.nw());
        self.bar();
        self.stage(&regs, &src, w, 0)?;
        self.bar();
        let mut out = vec![];
        for r in 0..n_dst {
            let mut terms = vec![];
            for (d, &c) in coef.iter().enumerate() {
                let c = c * w.nw();
                if c != 0 && dst[d] > 1 {
                    let i = self.index(&dst, r, d)?;
                    terms.push(if c == 1 { i } else { format!("{i} * {c}u") });
                }
            }
            let a = if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
            out.push(self.let_(w, Self::ld_slot(&a, w)));
        }
        self.bar();
        Ok(out)
    }

    // ------------------------------------------------------- reductions

    fn reduce(&mut self, o: ReduceOp, x: V, axis: usize, res: V) -> R<Vec<String>> {
        let shape = self.shape_u32(x);
        let d = self.dtype(x);
        let lay = self.layout(&shape)?;
        let regs = self.get(x);
        let arg = matches!(o, ReduceOp::Argmax | ReduceOp::Argmin);
        let ac = match w_dt(d) {
            W::F => W::F,
            W::I => W::I,
            W::L => W::L,
            _ => W::U,
        };
        let identity = match (o, ac) {
            (ReduceOp::Sum, W::L) => "vec2<u32>(0u, 0u)".to_string(),
            (ReduceOp::Max | ReduceOp::Argmax, W::L) => "vec2<u32>(0u, 0x80000000u)".into(),
            (ReduceOp::Min | ReduceOp::Argmin, W::L) => "vec2<u32>(0xffffffffu, 0x7fffffffu)".into(),
            (ReduceOp::Sum, W::F) => "0.0f".to_string(),
            (ReduceOp::Sum, W::I) => "0i".into(),
            (ReduceOp::Sum, _) => "0u".into(),
            (ReduceOp::Max | ReduceOp::Argmax, W::F) => "bitcast<f32>(0xff800000u)".into(),
            (ReduceOp::Min | ReduceOp::Argmin, W::F) => "bitcast<f32>(0x7f800000u)".into(),
            (ReduceOp::Max | ReduceOp::Argmax, W::I) => i32_lit(i32::MIN),
            (ReduceOp::Min | ReduceOp::Argmin, W::I) => i32_lit(i32::MAX),
            (ReduceOp::Max | ReduceOp::Argmax, _) => "0u".into(),
            (ReduceOp::Min | ReduceOp::Argmin, _) => "4294967295u".into(),
        };
        // values in the accumulation type; copies along a replicated axis
        // become the identity so they are not counted twice
        let mut vals = vec![];
        let mut idxs = vec![];
        for (r, v) in regs.iter().enumerate() {
            let a = if d == DType::Bool { format!("select(0u, 1u, {v})") } else { v.clone() };
            let a = if lay.bl.replicated(axis) {
                let own = format!("{} + {}u < {}u", lay.thread[axis], lay.konst[r][axis], shape[axis]);
                self.let_(ac, format!("select({identity}, {a}, {own})"))
            } else if a != *v {
                self.let_(ac, a)
            } else {
                a
            };
            vals.push(a);
            if arg {
                idxs.push(self.index(&shape, r, axis)?);
            }
        }
        // group registers by their coordinates off the axis
        let mut groups: Vec<(Vec<u32>, Vec<usize>)> = vec![];
        for r in 0..regs.len() {
            let key: Vec<u32> = (0..shape.len()).filter(|&dd| dd != axis).map(|dd| lay.konst[r][dd]).collect();
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some(g) => g.1.push(r),
                None => groups.push((key, vec![r])),
            }
        }
        type P = (String, Option<String>);
        // 1. in-invocation, pairwise
        let mut partial: Vec<P> = vec![];
        for (_, rs) in &groups {
            let level: Vec<P> = rs.iter().map(|&r| (vals[r].clone(), if arg { Some(idxs[r].clone()) } else { None })).collect();
            partial.push(self.combine_pairwise(o, ac, level));
        }
        // 2. across invocations along the axis
        let (tpw, wpc) = (lay.bl.tpw[axis], lay.bl.wpc[axis]);
        let mut lanes_left = tpw;
        if self.o.subgroups && tpw > 1 {
            self.uses_subgroups = true;
            for b in 0..tpw.trailing_zeros() {
                let m = 1u32 << (lay.bl.lane_shift[axis] + b);
                let mut next = vec![];
                for g in &partial {
                    let ov = self.let_(ac, format!("subgroupShuffleXor({}, {m}u)", g.0));
                    let oi = g.1.as_ref().map(|i| self.let_(W::U, format!("subgroupShuffleXor({i}, {m}u)")));
                    let (v, i) = self.combine(o, ac, g, &(ov, oi));
                    let v = self.let_(ac, v);
                    let i = i.map(|i| self.let_(W::U, i));
                    next.push((v, i));
                }
                partial = next;
            }
            lanes_left = 1;
        }
        let tcount = lanes_left * wpc;
        if tcount > 1 {
            let ng = partial.len() as u32;
            let slot = ac.nw() + arg as u32;
            let per = ng * slot;
            self.smem_need(self.nt * per);
            self.bar();
            for (gi, g) in partial.iter().enumerate() {
                let s = gi as u32 * slot;
                self.st_slot(&format!("ft_tid * {per}u + {s}u"), &g.0, ac);
                if let Some(i) = &g.1 {
                    self.l(format!("ft_smem[ft_tid * {per}u + {}u] = {i};", s + ac.nw()));
                }
            }
            self.bar();
            // invocation j along the axis: same id except the axis fields
            let lmask = if lanes_left > 1 { (tpw - 1) << lay.bl.lane_shift[axis] } else { 0 };
            let wmask = (wpc - 1) << (5 + lay.bl.warp_shift[axis]);
            let basetid = self.let_(W::U, format!("ft_tid & {}u", !(lmask | wmask)));
            let tid_of = |j: &str| -> String {
                let mut t = basetid.clone();
                if lanes_left > 1 {
                    t = format!("{t} | (({j} & {}u) << {}u)", tpw - 1, lay.bl.lane_shift[axis]);
                    t = format!("{t} | (({j} >> {}u) << {}u)", tpw.trailing_zeros(), 5 + lay.bl.warp_shift[axis]);
                } else {
                    t = format!("{t} | ({j} << {}u)", 5 + lay.bl.warp_shift[axis]);
                }
                t
            };
            if tcount <= SMALL_TREE && tcount * partial.len() as u32 <= SMALL_TREE_READS {
                // Few positions (the warps of a workgroup, after subgroup
                // shuffles): every invocation reads all `tcount` partials
                // after the one barrier and combines them pairwise in
                // registers — the same log-depth rounding as the loop below,
                // without its log2(tcount) barriers.
                let mut res = vec![];
                for gi in 0..partial.len() {
                    let sl = gi as u32 * slot;
                    let mut level: Vec<P> = vec![];
                    for j in 0..tcount {
                        let tj = self.let_(W::U, tid_of(&format!("{j}u")));
                        let v = self.let_(ac, Self::ld_slot(&format!("{tj} * {per}u + {sl}u"), ac));
                        let i = if arg { Some(self.let_(W::U, format!("ft_smem[{tj} * {per}u + {}u]", sl + ac.nw()))) } else { None };
                        level.push((v, i));
                    }
                    res.push(self.combine_pairwise(o, ac, level));
                }
                self.bar();
                partial = res;
            } else {
                // A tree over the `tcount` positions along the axis: at step
                // `h`, position p < h combines its slots with position p + h's,
                // in place; after log2(tcount) steps position 0 holds the result
                // (log-depth rounding error, log2(tcount) barriers).
                let pos = if lanes_left > 1 {
                    format!(
                        "((ft_tid >> {}u) & {}u) | (((ft_tid >> {}u) & {}u) << {}u)",
                        lay.bl.lane_shift[axis],
                        tpw - 1,
                        5 + lay.bl.warp_shift[axis],
                        wpc - 1,
                        tpw.trailing_zeros()
                    )
                } else {
                    format!("(ft_tid >> {}u) & {}u", 5 + lay.bl.warp_shift[axis], wpc - 1)
                };
                let p = self.let_(W::U, pos);
                // one loop (not unrolled: shader size stays that of one step);
                // its trip count is uniform, so the barrier inside is legal
                let h = self.fresh();
                self.l(format!("for (var {h}: u32 = {}u; {h} >= 1u; {h} = {h} >> 1u) {{", tcount / 2));
                self.ind += 1;
                self.l(format!("if ({p} < {h}) {{"));
                self.ind += 1;
                let q = self.let_(W::U, format!("{p} + {h}"));
                let tq = self.let_(W::U, tid_of(&q));
                for gi in 0..partial.len() {
                    let sl = gi as u32 * slot;
                    let me = format!("ft_tid * {per}u + {sl}u");
                    let other = format!("{tq} * {per}u + {sl}u");
                    let mv = self.let_(ac, Self::ld_slot(&me, ac));
                    let mi = if arg { Some(self.let_(W::U, format!("ft_smem[{me} + {}u]", ac.nw()))) } else { None };
                    let ov = self.let_(ac, Self::ld_slot(&other, ac));
                    let oi = if arg { Some(self.let_(W::U, format!("ft_smem[{other} + {}u]", ac.nw()))) } else { None };
                    let (v, i) = self.combine(o, ac, &(mv, mi), &(ov, oi));
                    let v = self.let_(ac, v);
                    self.st_slot(&me, &v, ac);
                    if let Some(i) = i {
                        let i = self.let_(W::U, i);
                        self.l(format!("ft_smem[{me} + {}u] = {i};", ac.nw()));
                    }
                }
                self.ind -= 1;
                self.l("}");
                self.bar();
                self.ind -= 1;
                self.l("}");
                let t0 = self.let_(W::U, tid_of("0u"));
                let mut res = vec![];
                for gi in 0..partial.len() {
                    let sl = gi as u32 * slot;
                    let v = self.let_(ac, Self::ld_slot(&format!("{t0} * {per}u + {sl}u"), ac));
                    let i = if arg { Some(self.let_(W::U, format!("ft_smem[{t0} * {per}u + {}u]", sl + ac.nw()))) } else { None };
                    res.push((v, i));
                }
                self.bar();
                partial = res;
            }
        }
        // 3. to the result's dtype
        let rd = self.dtype(res);
        let mut finals = vec![];
        for (v, i) in &partial {
            let f = if arg {
                let i = i.clone().unwrap();
                match w_dt(rd) {
                    W::U => i,
                    _ => self.let_(W::I, format!("bitcast<i32>({i})")),
                }
            } else if ac == W::F {
                let e = self.round_to(v, rd);
                if e == *v {
                    e
                } else {
                    self.let_(W::F, e)
                }
            } else {
                // integer accumulations to the result dtype (wrapping)
                let from = match ac {
                    W::I => DType::I32,
                    W::L => DType::I64,
                    _ => DType::U32,
                };
                self.cast(v, from, rd)?
            };
            finals.push(f);
        }
        let out_shape = self.shape_u32(res);
        if out_shape.is_empty() {
            return Ok(vec![finals[0].clone()]);
        }
        // 4. slice layout -> canonical layout of the result
        let ol = self.layout(&out_shape)?;
        let ostr = strides(&out_shape);
        let group_lin = |t: u32, g: usize| -> u32 {
            let c = lay.coords_of(t, groups[g].1[0]);
            let mut od = 0;
            let mut lin = 0;
            for (dd, &ci) in c.iter().enumerate() {
                if dd == axis {
                    continue;
                }
                lin += ci * ostr[od];
                od += 1;
            }
            lin
        };
        if let Some(m) = local_map(self.nt, groups.len(), &group_lin, ol.regs(), &|t, r| ol.lin_of(t, r)) {
            return Ok(m.iter().map(|&g| finals[g].clone()).collect());
        }
        let rw = w_dt(rd);
        let n_out: u32 = out_shape.iter().product();
        self.smem_need(n_out * rw.nw());
        self.bar();
        for (gi, (_, rs)) in groups.iter().enumerate() {
            let r = rs[0];
            let mut terms = vec![];
            let mut od = 0;
            for dd in 0..shape.len() {
                if dd == axis {
                    continue;
                }
                let i = self.index(&shape, r, dd)?;
                terms.push(format!("{i} * {}u", ostr[od] * rw.nw()));
                od += 1;
            }
            let a = if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
            self.st_slot(&a, &finals[gi], rw);
        }
        self.bar();
        let mut out = vec![];
        for r in 0..ol.regs() {
            let lin = self.lin(&out_shape, r)?;
            let a = if rw.nw() == 1 { lin } else { format!("{lin} * {}u", rw.nw()) };
            out.push(self.let_(rw, Self::ld_slot(&a, rw)));
        }
        self.bar();
        Ok(out)
    }

    /// Combine two partials (value, index): expressions of the new value
    /// and index (not yet bound).
    /// Combine partials in a balanced tree (neighbours first): log-depth
    /// rounding error. `level` is not empty.
    fn combine_pairwise(&mut self, o: ReduceOp, ac: W, mut level: Vec<(String, Option<String>)>) -> (String, Option<String>) {
        while level.len() > 1 {
            let mut next = vec![];
            for pair in level.chunks(2) {
                if pair.len() == 2 {
                    let (v, i) = self.combine(o, ac, &pair[0], &pair[1]);
                    let v = self.let_(ac, v);
                    let i = i.map(|i| self.let_(W::U, i));
                    next.push((v, i));
                } else {
                    next.push(pair[0].clone());
                }
            }
            level = next;
        }
        level.pop().expect("partials to combine")
    }

    fn combine(&mut self, o: ReduceOp, ac: W, a: &(String, Option<String>), b: &(String, Option<String>)) -> (String, Option<String>) {
        if let (Some(ai), Some(bi)) = (&a.1, &b.1) {
            let (av, bv) = (&a.0, &b.0);
            let better = if o == ReduceOp::Argmax { ">" } else { "<" };
            // take b if better, or equal with a smaller index; NaN is the worst value
            let mut take = format!("({bv} {better} {av}) || ({bv} == {av} && {bi} < {ai})");
            if ac == W::L {
                let lt = self.helper("ft_lt64");
                let b_better = if o == ReduceOp::Argmax { format!("{lt}({av}, {bv})") } else { format!("{lt}({bv}, {av})") };
                take = format!("{b_better} || (all({bv} == {av}) && {bi} < {ai})");
            }
            if ac == W::F {
                let isnan = self.helper("ft_isnan");
                take = format!("{take} || ({isnan}({av}) && (!{isnan}({bv}) || {bi} < {ai}))");
            }
            let t = self.let_(W::B, take);
            return (format!("select({av}, {bv}, {t})"), Some(format!("select({ai}, {bi}, {t})")));
        }
        let (x, y) = (&a.0, &b.0);
        let e = match (o, ac) {
            (ReduceOp::Sum, W::L) => format!("{}({x}, {y})", self.helper("ft_add64")),
            (ReduceOp::Max, W::L) => format!("select({x}, {y}, {}({x}, {y}))", self.helper("ft_lt64")),
            (ReduceOp::Min, W::L) => format!("select({x}, {y}, {}({y}, {x}))", self.helper("ft_lt64")),
            (ReduceOp::Sum, _) => format!("{x} + {y}"),
            (ReduceOp::Max, W::F) => format!("{}({x}, {y})", self.helper("ft_fmax")),
            (ReduceOp::Min, W::F) => format!("{}({x}, {y})", self.helper("ft_fmin")),
            (ReduceOp::Max, _) => format!("max({x}, {y})"),
            _ => format!("min({x}, {y})"),
        };
        (e, None)
    }

    /// Inclusive cumulative sum along `axis` through workgroup memory.
    fn scan(&mut self, x: V, axis: usize, res: V) -> R<Vec<String>> {
        let shape = self.shape_u32(x);
        let d = self.dtype(x);
        let rd = self.dtype(res);
        let regs = self.get(x);
        let ac = match w_dt(d) {
            W::F => W::F,
            W::I => W::I,
            W::L => W::L,
            _ => W::U,
        };
        let vals: Vec<String> = regs.iter().map(|v| if d == DType::Bool { format!("select(0u, 1u, {v})") } else { v.clone() }).collect();
        let n: u32 = shape.iter().product();
        self.smem_need(n * ac.nw());
        self.bar();
        self.stage(&vals, &shape, ac, 0)?;
        self.bar();
        let st = strides(&shape)[axis];
        let zero = zero_of(ac);
        let mut out = vec![];
        for r in 0..regs.len() {
            let lin = self.lin(&shape, r)?;
            let i = self.index(&shape, r, axis)?;
            let start = self.let_(W::U, format!("{lin} - {i} * {st}u"));
            let acc = self.var_(ac, Some(zero));
            let j = self.fresh();
            self.l(format!("for (var {j}: u32 = 0u; {j} <= {i}; {j} = {j} + 1u) {{"));
            let v = Self::ld_slot(&format!("({start} + {j} * {st}u) * {}u", ac.nw()), ac);
            if ac == W::L {
                let add = self.helper("ft_add64");
                self.l(format!("    {acc} = {add}({acc}, {v});"));
            } else {
                self.l(format!("    {acc} = {acc} + {v};"));
            }
            self.l("}");
            let f = if ac == W::F {
                let e = self.round_to(&acc, rd);
                self.let_(W::F, e)
            } else {
                let from = match ac {
                    W::I => DType::I32,
                    W::L => DType::I64,
                    _ => DType::U32,
                };
                let c = self.cast(&acc, from, rd)?;
                if c == acc {
                    self.let_(w_dt(rd), c)
                } else {
                    c
                }
            };
            out.push(f);
        }
        self.bar();
        Ok(out)
    }

    /// `acc + a @ b` with operands staged in workgroup memory as f32 (i32
    /// for i8), one FMA chain per output element in k order.
    fn dot(&mut self, a: V, b: V, acc: V, precision: DotPrecision, res: V) -> R<Vec<String>> {
        let (sa, sb) = (self.shape_u32(a), self.shape_u32(b));
        let (m, kk, n) = (sa[0], sa[1], sb[1]);
        let d = self.dtype(a);
        let int = w_dt(d) != W::F;
        let ac = if int { W::I } else { W::F };
        let conv = |em: &mut Self, regs: Vec<String>| -> Vec<String> {
            regs.iter()
                .map(|v| {
                    if int {
                        if w_dt(d) == W::U {
                            format!("bitcast<i32>({v})")
                        } else {
                            v.clone()
                        }
                    } else if precision == DotPrecision::Tf32 {
                        format!("{}({v})", em.helper("ft_tf32"))
                    } else if precision == DotPrecision::Tf32Trunc {
                        format!("{}({v})", em.helper("ft_tf32_trunc"))
                    } else {
                        v.clone()
                    }
                })
                .collect()
        };
        let ra = self.get(a);
        let rb = self.get(b);
        let va = conv(self, ra);
        let vb = conv(self, rb);
        self.smem_need(m * kk + kk * n);
        self.bar();
        self.stage(&va, &sa, ac, 0)?;
        self.stage(&vb, &sb, ac, m * kk)?;
        self.bar();
        let out_shape = self.shape_u32(res);
        let racc = self.get(acc);
        let accs: Vec<String> = racc.iter().map(|v| self.var_(ac, Some(v))).collect();
        // Register tiling: a thread's outputs span few distinct rows and
        // columns (its layout's repetitions); each k reads every distinct A
        // row value and B column value once and reuses it for all outputs
        // that share it, instead of two workgroup-memory reads per FMA.
        let (rows, cols, at) = self.layout(&out_shape)?.bl.outer_product();
        let first_reg = |which: usize, idx: usize| at.iter().position(|p| if which == 0 { p.0 == idx } else { p.1 == idx }).unwrap();
        let mut pa = vec![];
        for ri in 0..rows.len() {
            let i = self.index(&out_shape, first_reg(0, ri), 0)?;
            pa.push(format!("{i} * {kk}u"));
        }
        let mut pb = vec![];
        for ci in 0..cols.len() {
            let j = self.index(&out_shape, first_reg(1, ci), 1)?;
            pb.push(format!("{j} + {}u", m * kk));
        }
        let kc = self.fresh();
        self.l(format!("for (var {kc}: u32 = 0u; {kc} < {kk}u; {kc} = {kc} + 1u) {{"));
        self.ind += 1;
        let read = |em: &mut Self, addrs: Vec<String>| -> Vec<String> {
            addrs
                .iter()
                .map(|a| {
                    let x = em.fresh();
                    em.l(format!("let {x} = {};", Self::from_u32(&format!("ft_smem[{a}]"), ac)));
                    x
                })
                .collect()
        };
        let xs = read(self, pa.iter().map(|p| format!("{p} + {kc}")).collect());
        let ys = read(self, pb.iter().map(|p| format!("{p} + {kc} * {n}u")).collect());
        for (r, &(ri, ci)) in at.iter().enumerate() {
            let (x, y) = (&xs[ri], &ys[ci]);
            if int {
                self.l(format!("{} = {} + {x} * {y};", accs[r], accs[r]));
            } else {
                self.l(format!("{} = fma({x}, {y}, {});", accs[r], accs[r]));
            }
        }
        self.ind -= 1;
        self.l("}");
        self.bar();
        Ok(accs)
    }
}

fn zero_of(w: W) -> &'static str {
    match w {
        W::F => "0.0f",
        W::I => "0i",
        W::U => "0u",
        W::B => "false",
        W::L => "vec2<u32>(0u, 0u)",
        W::Q => "vec4<u32>(0u, 0u, 0u, 0u)",
    }
}

/// Up to this many positions along a reduced axis after the in-invocation
/// and subgroup steps, the cross-invocation step reads all partials after
/// one barrier instead of running the barrier-per-level tree loop.
const SMALL_TREE: u32 = 32;
/// ... as long as that is at most this many reads per invocation (the
/// reads are unrolled: many row groups times many positions would bloat the
/// shader — lavapipe's LLVM then compiles for minutes).
const SMALL_TREE_READS: u32 = 64;

fn strides(shape: &[u32]) -> Vec<u32> {
    let mut s = vec![1u32; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

// ------------------------------------------------------------ helper code

const F2H: &str = "// f32 -> f16 bits, round to nearest-even (the `half` crate's conversion)
fn ft_f2h(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    let s = (b >> 16u) & 0x8000u;
    let e = b & 0x7f800000u;
    let m = b & 0x007fffffu;
    if (e == 0x7f800000u) { return s | 0x7c00u | select(0u, 0x200u, m != 0u) | (m >> 13u); }
    let he = i32(e >> 23u) - 112i;
    if (he >= 31i) { return s | 0x7c00u; }
    if (he <= 0i) {
        if (14i - he > 24i) { return s; }
        let mm = m | 0x00800000u;
        let sh = u32(14i - he);
        var hm = mm >> sh;
        let rb = 1u << (sh - 1u);
        if ((mm & rb) != 0u && (mm & (3u * rb - 1u)) != 0u) { hm = hm + 1u; }
        return s | hm;
    }
    let r = s | (u32(he) << 10u) | (m >> 13u);
    if ((m & 0x1000u) != 0u && (m & 0x2fffu) != 0u) { return r + 1u; }
    return r;
}
";

const H2F: &str = "// f16 bits -> f32 (exact)
fn ft_h2f(h: u32) -> f32 {
    let s = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 0x1fu) { return bitcast<f32>(s | select(0x7f800000u, 0x7fc00000u, m != 0u) | (m << 13u)); }
    if (e == 0u) { return bitcast<f32>(s | bitcast<u32>(f32(m) * 5.9604644775390625e-8f)); }
    return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}
";

const F2B: &str = "// f32 -> bf16 bits, round to nearest-even (the `half` crate's conversion)
fn ft_f2b(x: f32) -> u32 {
    let b = bitcast<u32>(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) { return (b >> 16u) | 0x40u; }
    if ((b & 0x8000u) != 0u && (b & 0x17fffu) != 0u) { return (b >> 16u) + 1u; }
    return b >> 16u;
}
";

const U2F_ODD: &str = "// u32 -> f32 rounded to odd (then rounding to f16/bf16 rounds once)
fn ft_u2f_odd(a: u32) -> f32 {
    let lz = countLeadingZeros(a);
    if (lz >= 8u) { return f32(a); }
    let sh = 8u - lz;
    var m = a >> sh;
    if ((a & ((1u << sh) - 1u)) != 0u) { m = m | 1u; }
    return f32(m) * bitcast<f32>((127u + sh) << 23u);
}
";

const MULWIDE: &str = "// full 32 x 32 -> 64-bit product
fn ft_mulwide(a: u32, b: u32) -> vec2<u32> {
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
";

const SHL64: &str = "// shifts by < 0 or >= 64 give 0
fn ft_shl64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    if (b.y != 0u || b.x >= 64u) { return vec2<u32>(0u, 0u); }
    let n = b.x;
    if (n == 0u) { return a; }
    if (n >= 32u) { return vec2<u32>(0u, a.x << (n - 32u)); }
    return vec2<u32>(a.x << n, (a.y << n) | (a.x >> (32u - n)));
}
";

const SHR64: &str = "// arithmetic; shifts by < 0 or >= 64 give the sign
fn ft_shr64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let hi = bitcast<i32>(a.y);
    let s = select(0u, 0xffffffffu, hi < 0i);
    if (b.y != 0u || b.x >= 64u) { return vec2<u32>(s, s); }
    let n = b.x;
    if (n == 0u) { return a; }
    if (n >= 32u) { return vec2<u32>(bitcast<u32>(hi >> (n - 32u)), s); }
    return vec2<u32>((a.x >> n) | (a.y << (32u - n)), bitcast<u32>(hi >> n));
}
";

const UDIVREM64: &str = "// unsigned 64-bit (quotient.xy, remainder.zw), restoring division
fn ft_udivrem64(n: vec2<u32>, d: vec2<u32>) -> vec4<u32> {
    if (n.y == 0u && d.y == 0u && d.x != 0u) { return vec4<u32>(n.x / d.x, 0u, n.x % d.x, 0u); }
    var q = vec2<u32>(0u, 0u);
    var r = vec2<u32>(0u, 0u);
    for (var i: i32 = 63i; i >= 0i; i = i - 1i) {
        let bit = select((n.x >> u32(i)) & 1u, (n.y >> u32(i - 32i)) & 1u, i >= 32i);
        r = vec2<u32>((r.x << 1u) | bit, (r.y << 1u) | (r.x >> 31u));
        if (r.y > d.y || (r.y == d.y && r.x >= d.x)) {
            r = vec2<u32>(r.x - d.x, r.y - d.y - select(0u, 1u, r.x < d.x));
            if (i >= 32i) { q.y = q.y | (1u << u32(i - 32i)); } else { q.x = q.x | (1u << u32(i)); }
        }
    }
    return vec4<u32>(q, r);
}
";

const DIVREM64: &str = "// signed 64-bit (quotient.xy, remainder.zw), truncating, wrapping
fn ft_divrem64(a: vec2<u32>, b: vec2<u32>) -> vec4<u32> {
    let z = vec2<u32>(0u, 0u);
    let na = bitcast<i32>(a.y) < 0i;
    let nb = bitcast<i32>(b.y) < 0i;
    let qr = ft_udivrem64(select(a, ft_sub64(z, a), na), select(b, ft_sub64(z, b), nb));
    return vec4<u32>(select(qr.xy, ft_sub64(z, qr.xy), na != nb), select(qr.zw, ft_sub64(z, qr.zw), na));
}
";

const L2F: &str = "// i64 -> f32, rounded to nearest-even (odd = false) or to odd (odd = true)
fn ft_l2f(a: vec2<u32>, odd: bool) -> f32 {
    let neg = bitcast<i32>(a.y) < 0i;
    let m = select(a, ft_sub64(vec2<u32>(0u, 0u), a), neg);
    var f: f32;
    if (m.y == 0u) {
        f = select(ft_u2f(m.x), ft_u2f_odd(m.x), odd);
    } else {
        // the top 32 bits with a sticky bit, then one rounding
        let lz = countLeadingZeros(m.y);
        let sh = 32u - lz;
        var top = m.y;
        var rest = m.x;
        if (lz > 0u) { top = (m.y << lz) | (m.x >> sh); rest = m.x << lz; }
        top = top | select(0u, 1u, rest != 0u);
        f = select(ft_u2f(top), ft_u2f_odd(top), odd) * bitcast<f32>((127u + sh) << 23u);
    }
    return select(f, -f, neg);
}
";

const F2L: &str = "// f32 -> i64, truncating, saturating, NaN -> 0
fn ft_f2l(x: f32) -> vec2<u32> {
    if (ft_isnan(x)) { return vec2<u32>(0u, 0u); }
    if (x >= 9223372036854775808.0f) { return vec2<u32>(0xffffffffu, 0x7fffffffu); }
    if (x <= -9223372036854775808.0f) { return vec2<u32>(0u, 0x80000000u); }
    let a = trunc(abs(x));
    var m: vec2<u32>;
    if (a < 4294967296.0f) {
        m = vec2<u32>(u32(a), 0u);
    } else {
        let hi = floor(a * 2.3283064365386963e-10f);
        m = vec2<u32>(u32(a - hi * 4294967296.0f), u32(hi));
    }
    return select(m, ft_sub64(vec2<u32>(0u, 0u), m), x < 0.0f);
}
";

const DIV: &str = "// correctly rounded a / b with integer arithmetic (WGSL's division may be
// 2.5 ulp off, and fma-based corrections fail where fma is not fused):
// 25 quotient bits by long division in 8-bit steps, a sticky bit, one
// nearest-even rounding. NaN, infinite, zero and subnormal operands, and
// subnormal or overflowing quotients, take the hardware quotient.
fn ft_div(a: f32, b: f32) -> f32 {
    let ua = bitcast<u32>(a);
    let ub = bitcast<u32>(b);
    let ea = (ua >> 23u) & 0xffu;
    let eb = (ub >> 23u) & 0xffu;
    if (ea == 0xffu || eb == 0xffu || ea == 0u || eb == 0u) { return a / b; }
    let ma = (ua & 0x7fffffu) | 0x800000u;
    let mb = (ub & 0x7fffffu) | 0x800000u;
    var e = i32(ea) - i32(eb) + 127i;
    var n = ma;
    if (ma < mb) { n = ma << 1u; e = e - 1i; }
    var q = n / mb;
    var r = n % mb;
    for (var i = 0u; i < 3u; i = i + 1u) {
        r = r << 8u;
        q = (q << 8u) | (r / mb);
        r = r % mb;
    }
    var m = q >> 1u;
    if ((q & 1u) != 0u && (r != 0u || (m & 1u) != 0u)) { m = m + 1u; }
    if (m == 0x1000000u) { m = m >> 1u; e = e + 1i; }
    if (e <= 0i || e >= 255i) { return a / b; }
    return bitcast<f32>(((ua ^ ub) & 0x80000000u) | (u32(e) << 23u) | (m & 0x7fffffu));
}
";

const EXP: &str = "// exp with ~1 ulp error (WGSL's exp is 3 + 2|x| ulp): k = rint(x log2 e),
// r = x - k ln2 (ln2 split so k * hi is exact without fma), cephes
// polynomial, scaled by 2^k in two steps
fn ft_exp(x: f32) -> f32 {
    if (x > 88.72284f) { return bitcast<f32>(0x7f800000u); }
    if (x < -103.97208f) { return 0.0f; }
    let k = round(x * 1.442695f);
    let r = (x - k * 0.693359375f) - k * -2.1219444e-4f;
    let z = r * r;
    var p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    let y = p * z + r + 1.0f;
    let ki = i32(k);
    let h = ki >> 1u;
    return (y * bitcast<f32>(u32(h + 127i) << 23u)) * bitcast<f32>(u32(ki - h + 127i) << 23u);
}
";

const EXP2: &str = "// 2^x with ~1 ulp error: k = rint(x), r = x - k (exact), cephes polynomial
fn ft_exp2(x: f32) -> f32 {
    if (x >= 128.0f) { return bitcast<f32>(0x7f800000u); }
    if (x < -150.0f) { return 0.0f; }
    let k = round(x);
    let r = x - k;
    var p = 1.535336188319500e-4f;
    p = p * r + 1.339887440266574e-3f;
    p = p * r + 9.618437357674640e-3f;
    p = p * r + 5.550332471162809e-2f;
    p = p * r + 2.402264791363012e-1f;
    p = p * r + 6.931472028550421e-1f;
    let y = p * r + 1.0f;
    let ki = i32(k);
    let h = ki >> 1u;
    return (y * bitcast<f32>(u32(h + 127i) << 23u)) * bitcast<f32>(u32(ki - h + 127i) << 23u);
}
";

fn log_code() -> String {
    let mut p = format!(
        "// natural log, ~1 ulp: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s),
// s = (m-1)/(m+1), odd series to s^11 (the PTX backend's formula)
fn ft_log(x: f32) -> f32 {{
    let bx = bitcast<u32>(x);
    if (bx == 0u || bx == 0x80000000u) {{ return bitcast<f32>(0xff800000u); }}
    if (bx > 0x80000000u || (bx & 0x7fffffffu) > 0x7f800000u) {{ return bitcast<f32>(0x7fc00000u); }}
    if (bx == 0x7f800000u) {{ return x; }}
    let sub = bx < 0x00800000u;
    let bits = select(bx, bitcast<u32>(x * 8388608.0f), sub);
    var e = i32((bits >> 23u) & 255u) - select(127i, 150i, sub);
    var m = bitcast<f32>((bits & 0x7fffffu) | 0x3f800000u);
    if (m > {}) {{ m = m * 0.5f; e = e + 1i; }}
    let sv = ft_div(m - 1.0f, m + 1.0f);
    let s2 = sv * sv;
    var p = {};
",
        f32_lit(f32::from_bits(0x3FB504F3)),
        fl(2.0 / 11.0)
    );
    for c in [2.0 / 9.0, 2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0] {
        let _ = writeln!(p, "    p = fma(p, s2, {});", fl(c));
    }
    p.push_str("    p = p * s2;\n    let lm = fma(sv, p, sv) + sv;\n    let ef = f32(e);\n");
    let _ = writeln!(p, "    let r = fma(ef, {}, lm);", fl(-2.1219444e-4));
    let _ = writeln!(p, "    return fma(ef, {}, r);\n}}", fl(0.693359375));
    p
}

fn tanh_code() -> String {
    let mut p = String::from(
        "// |x| < 0.25: odd Taylor polynomial; else sign(x) (1-e)/(1+e), e = exp(-2|x|)
fn ft_tanh(x: f32) -> f32 {
    let a = abs(x);
    let e = ft_exp(a * -2.0f);
    let q0 = ft_div(1.0f - e, 1.0f + e);
    let q = bitcast<f32>((bitcast<u32>(q0) & 0x7fffffffu) | (bitcast<u32>(x) & 0x80000000u));
    let x2 = x * x;
",
    );
    let coef = [62.0 / 2835.0, -17.0 / 315.0, 2.0 / 15.0, -1.0 / 3.0, 1.0];
    let _ = writeln!(p, "    var p = {};", fl(coef[0]));
    for c in &coef[1..] {
        let _ = writeln!(p, "    p = fma(p, x2, {});", fl(*c));
    }
    p.push_str("    p = p * x;\n    return select(q, p, a < 0.25f);\n}\n");
    p
}

fn erf_code() -> String {
    let mut p = String::from(
        "// |x| < 0.5: Taylor series; else Abramowitz-Stegun 7.1.26
fn ft_erf(x: f32) -> f32 {
    let a = abs(x);
    let x2 = x * x;
",
    );
    let mut cs = vec![];
    let mut fact = 1.0f64;
    for n in 0..9 {
        if n > 0 {
            fact *= n as f64;
        }
        let s = if n % 2 == 0 { 1.0 } else { -1.0 };
        cs.push(s / (fact * (2 * n + 1) as f64) * 2.0 / std::f64::consts::PI.sqrt());
    }
    let _ = writeln!(p, "    var p = {};", fl(cs[8]));
    for c in cs[..8].iter().rev() {
        let _ = writeln!(p, "    p = fma(p, x2, {});", fl(*c));
    }
    p.push_str("    p = p * x;\n");
    let _ = writeln!(p, "    let t = ft_div(1.0f, fma(a, {}, 1.0f));", fl(0.3275911));
    let ac = [1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592];
    let _ = writeln!(p, "    var q = {};", fl(ac[0]));
    for c in &ac[1..] {
        let _ = writeln!(p, "    q = fma(q, t, {});", fl(*c));
    }
    p.push_str(
        "    q = q * t;
    q = 1.0f - q * ft_exp(-x2);
    q = bitcast<f32>((bitcast<u32>(q) & 0x7fffffffu) | (bitcast<u32>(x) & 0x80000000u));
    return select(q, p, a < 0.5f);
}
",
    );
    p
}

fn sincos_code() -> String {
    let mut p = format!(
        "// sin (c = 0) or cos (c = 1): k = rint(x 2/pi), r = x - k pi/2 (3-part
// Cody-Waite whose first two products are exact without fma for
// |k| < 2^12), Taylor polynomials on |r| <= pi/4, quadrant from k
fn ft_sincos(x: f32, c: i32) -> f32 {{
    let kf = round(x * {});
    let r = ((x - kf * 1.5703125f) - kf * 4.837512969970703125e-4f) - kf * 7.54978995489188216e-8f;
    let r2 = r * r;
",
        fl(std::f64::consts::FRAC_2_PI),
    );
    let sc = [-1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0];
    let _ = writeln!(p, "    var s = {};", fl(sc[0]));
    for c in &sc[1..] {
        let _ = writeln!(p, "    s = fma(s, r2, {});", fl(*c));
    }
    p.push_str("    s = s * r2;\n    s = fma(s, r, r);\n");
    let cc = [1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0, 1.0 / 24.0, -0.5, 1.0];
    let _ = writeln!(p, "    var cp = {};", fl(cc[0]));
    for c in &cc[1..] {
        let _ = writeln!(p, "    cp = fma(cp, r2, {});", fl(*c));
    }
    p.push_str(
        "    let q = i32(clamp(kf, -1073741824.0f, 1073741824.0f)) + c;
    let y = select(s, cp, (q & 1i) != 0i);
    return select(y, -y, (q & 2i) != 0i);
}
",
    );
    p
}

impl<'k> crate::remat::Emitter<'k> for Em<'k> {
    fn remat_state(&mut self) -> &mut crate::remat::Remat<'k> {
        &mut self.remat
    }
    fn vals_mut(&mut self) -> &mut crate::remat::Vals {
        &mut self.vals
    }
    fn nregs_of(&mut self, v: V) -> R<usize> {
        self.nregs(v)
    }
    fn index_of(&mut self, shape: &[u32], r: usize, d: usize) -> R<String> {
        self.index(shape, r, d)
    }
    fn arange_at(&mut self, i: &str, start: i64) -> String {
        self.let_(W::I, format!("i32({i}) + {}", i32_lit(start as i32)))
    }
    fn zero_index(&mut self) -> String {
        "0u".to_string()
    }
    fn elementwise_op(&mut self, kind: &OpKind, v: V) -> R<Vec<String>> {
        self.elementwise(kind, v)
    }
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

    #[test]
    fn local_map_identity_and_transpose() {
        let bl = Blocked::canonical(&[64], 4, 1);
        let l = Layout { konst: bl.konst(), bl, thread: vec![] };
        let m = local_map(128, l.regs(), &|t, r| l.lin_of(t, r), l.regs(), &|t, r| l.lin_of(t, r));
        assert!(m.is_some());
        let bl = Blocked::canonical(&[32, 32], 4, 1);
        let l = Layout { konst: bl.konst(), bl, thread: vec![] };
        let tr = |t: u32, r: usize| {
            let c = l.coords_of(t, r);
            c[1] * 32 + c[0]
        };
        assert!(local_map(128, l.regs(), &|t, r| l.lin_of(t, r), l.regs(), &tr).is_none());
    }
}
