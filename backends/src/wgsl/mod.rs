//! WGSL backend: specialized IR → WGSL compute-shader text (pure Rust; no
//! naga or wgpu needed to emit).
//!
//! Stages:
//! - [`emit`]: instruction selection over the same canonical blocked
//!   layouts as the PTX backend ([`crate::ptx::layout::Blocked`], with
//!   invocation index = warp·32 + lane and `workgroup_size / 32` warps):
//!   elementwise ops per register, reductions in-thread → (optionally
//!   subgroup shuffles) → workgroup memory, layout conversions through
//!   workgroup memory when data must move between invocations, `dot` as an
//!   FMA loop over operands staged in workgroup memory, structured control
//!   flow whose scalar conditions are uniform by construction;
//! - `validate` (feature `wgsl`): parses and validates emitted text with
//!   naga, as tests and CI do.
//!
//! One workgroup runs one program: `@builtin(workgroup_id)` is `program_id`,
//! `@builtin(num_workgroups)` is `num_programs`. The ABI (bindings, scalar
//! slots, packing of 8/16-bit elements) is described by
//! [`emit::BindingAbi`]; the runtime (a later task) must follow it.

pub mod emit;
#[cfg(feature = "wgsl")]
pub mod validate;

pub use emit::{emit, BindingAbi, BindingKind, UniformField, WgslKernel, WgslOptions};

/// A kernel the WGSL backend cannot compile (an unsupported dtype such as
/// i64, an op it does not handle), or a configuration that cannot fit (the
/// workgroup-storage limit); always names the kernel and, where known, the
/// source line.
#[derive(Debug, Clone, PartialEq)]
pub struct EmitError {
    pub kernel: String,
    pub line: u32,
    pub msg: String,
}

impl std::fmt::Display for EmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(f, "kernel `{}` line {}: {}", self.kernel, self.line, self.msg)
        } else {
            write!(f, "kernel `{}`: {}", self.kernel, self.msg)
        }
    }
}

impl std::error::Error for EmitError {}
