//! `ferrotile-backends`: code generation from specialized IR — text only;
//! running it is the runtime's business (`ferrotile::runtime`, which holds
//! the CUDA and wgpu drivers next to their launch paths).
//!
//! - [`abi`]: what the runtime's drivers need to launch generated code;
//! - [`plan`]: target-neutral lowering decisions (layouts, axis facts,
//!   rematerialization) that both emitters read.
//! - [`ptx`]: PTX (pure Rust, no CUDA needed); [`ptxas`] assembles what we
//!   emit in tests and CI.
//! - [`wgsl`]: WGSL; `wgsl::validate` (feature `wgsl`) runs naga over it.

#![warn(missing_docs)]
// Index loops over several parallel per-dimension / per-register arrays
// read better than zipped iterators here.
#![allow(clippy::needless_range_loop)]

pub mod abi;
pub mod plan;
pub mod ptx;
pub mod ptxas;
pub mod wgsl;

/// A kernel a backend cannot (yet) compile, or a configuration that cannot
/// fit; always names the kernel and, where known, the source line. Shared by
/// the PTX and WGSL emitters.
#[derive(Debug, Clone, PartialEq)]
pub struct EmitError {
    /// Name of the kernel.
    pub kernel: String,
    /// Source line (1-based) of the op at fault; 0 when there is none.
    pub line: u32,
    /// What cannot be compiled, and why.
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
