//! `ferrotile-backends`: code generation from specialized IR.
//!
//! - [`plan`]: target-neutral lowering decisions (layouts, axis facts,
//!   rematerialization) that both emitters read.
//! - [`ptx`]: PTX emission (always built; pure Rust, no CUDA needed) and a
//!   `ptxas` driver used by tests to assemble what we emit.
//! - `cuda` (feature `cuda`): the CUDA runtime through cudarc's driver API,
//!   loaded dynamically so that builds and CI need no CUDA installation.
//! - [`wgsl`]: WGSL emission (always built); `wgpu_rt` (feature `wgpu`): the
//!   wgpu runtime that runs it on Vulkan/Metal/DX12 adapters (and lavapipe).

// Index loops over several parallel per-dimension / per-register arrays
// read better than zipped iterators here.
#![allow(clippy::needless_range_loop)]

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod plan;
pub mod ptx;
pub mod ptxas;
#[cfg(feature = "wgpu")]
pub mod wgpu_rt;
pub mod wgsl;

/// A kernel a backend cannot (yet) compile, or a configuration that cannot
/// fit; always names the kernel and, where known, the source line. Shared by
/// the PTX and WGSL emitters.
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
