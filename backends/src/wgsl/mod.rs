//! WGSL backend: specialized IR → WGSL compute-shader text (pure Rust; no
//! naga or wgpu needed to emit).
//!
//! [`compile`] is the driver (option checks, the WGSL target's IR passes —
//! none today —, provenance, buffer declarations, uniformity); `emit/` the
//! printer, one file per concern, over the same plans as the PTX backend
//! ([`crate::plan`]: blocked layouts with invocation index = warp·32 + lane
//! and `workgroup_size / 32` warps, the reduction and conversion plans):
//! elementwise ops per register, reductions in-thread → (optionally
//! subgroup shuffles) → workgroup memory, layout conversions through
//! workgroup memory when data must move between invocations, `dot` as an
//! FMA loop over operands staged in workgroup memory, structured control
//! flow whose scalar conditions are uniform by construction;
//! `validate` (feature `wgsl`) parses and validates emitted text with
//! naga, as tests and CI do.
//!
//! One workgroup runs one program: `@builtin(workgroup_id)` is `program_id`,
//! `@builtin(num_workgroups)` is `num_programs`. The ABI (bindings, scalar
//! slots, packing of 8/16-bit elements) is described by
//! [`BindingAbi`] (`crate::abi`); the runtime's wgpu driver follows it.

pub mod compile;
mod emit;
#[cfg(feature = "wgsl")]
pub mod validate;

pub use crate::abi::{BindingAbi, BindingKind, UniformField};
pub use compile::emit;

/// How to compile a kernel to WGSL: workgroup size, device capabilities and limits, what the
/// launch knows about the integer arguments; the [`Default`] is a portable baseline.
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
    /// unspecified), so no `enable f16;` is emitted (naga 27, when this was
    /// written, could not bitcast u32 → `vec2<f16>` either) and results are
    /// identical either way.
    pub shader_f16: bool,
    /// Bytes of `var<workgroup>` storage the device allows
    /// (`maxComputeWorkgroupStorageSize`; WebGPU's default is 16384, lavapipe
    /// and most GPUs 32768).
    pub max_workgroup_storage: u32,
    /// Per parameter: a power of two (1 to 16) dividing the launch's
    /// integer argument ([`crate::plan::axis::arg_div`]; missing entries:
    /// unknown). With [`WgslOptions::arg_one`] this feeds
    /// the axis analysis that proves loads and stores contiguous and
    /// 16-byte aligned, so they can move whole `vec4`s (the launch caches
    /// one shader per combination, as the CUDA runtime does).
    pub arg_div: Vec<u32>,
    /// Per parameter: the launch's integer argument is exactly 1.
    pub arg_one: Vec<bool>,
    /// How accesses are guarded ([`ferrotile_ir::passes::guard`]; the
    /// hidden parameters are bound like the kernel's own, after them).
    pub safety: ferrotile_ir::passes::Safety,
    /// Reduction results (and `expand_dims`, elementwise ops, loop-carried
    /// values and `if` results over them) stay in the slice layout the
    /// reduction leaves them in ([`crate::plan::slices`]), as on PTX; false:
    /// every value in its shape's canonical layout.
    pub slice_layouts: bool,
    /// Written 16-bit buffers whose every store provably writes whole
    /// aligned words are plain `array<u32>`, stored a word at a time
    /// (`emit/memory.rs::mark_word_buffers`), and 16-bit float loads of
    /// provable pairs read one word per pair (`word_pairs`); false: every
    /// written 8/16-bit buffer atomic and every 16-bit element read alone,
    /// as before (the runtime's `FERROTILE_WGSL_WORD_STORES=0`, for A/B
    /// runs).
    pub word_stores: bool,
}

impl Default for WgslOptions {
    fn default() -> Self {
        WgslOptions {
            workgroup_size: 128,
            subgroups: false,
            shader_f16: false,
            max_workgroup_storage: 32768,
            arg_div: vec![],
            arg_one: vec![],
            safety: ferrotile_ir::passes::Safety::Safe,
            slice_layouts: true,
            word_stores: true,
        }
    }
}

/// An emitted compute shader and what the wgpu driver needs to launch it.
#[derive(Clone, Debug)]
pub struct WgslKernel {
    /// The WGSL module.
    pub text: String,
    /// Name of the `@compute` entry point.
    pub entry: String,
    /// Invocations per workgroup (`@workgroup_size`).
    pub workgroup_size: u32,
    /// The resources to bind: a storage buffer per pointer parameter, then, when the kernel has
    /// scalar parameters, one uniform struct.
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

pub use crate::EmitError;
