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

pub use crate::EmitError;
