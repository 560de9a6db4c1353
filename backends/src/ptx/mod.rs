//! PTX backend: specialized IR → PTX text, written by us (no LLVM, no NVRTC).
//!
//! Stages, each in its own file:
//! - [`layout`]: distributed layouts (element → thread, register);
//! - [`axis`]: contiguity/divisibility analysis of integer and pointer tiles,
//!   which decides where 128-bit vector accesses are provably legal;
//! - [`emit`]: instruction selection over the layouts: elementwise ops in
//!   registers, reductions in-thread → `shfl.sync` → shared memory, layout
//!   conversions (broadcasts, reshapes, transposes, slices) through shared
//!   memory, structured control flow, `dot` as an FMA loop over operands
//!   staged in shared memory (tensor cores come with the GEMM work).
//!
//! Output targets `sm_80` or `sm_90` with PTX ISA 8.0 (accepted by driver
//! 580 and by ptxas 12.x/13.x).

pub mod axis;
pub mod emit;
pub mod layout;

pub use emit::{emit, ParamAbi, PtxKernel, PtxOptions};

/// A kernel the PTX backend cannot (yet) compile, or a configuration that
/// cannot fit; always names the kernel and, where known, the source line.
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
