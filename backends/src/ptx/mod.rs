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

pub mod assign;
pub mod axis;
pub mod emit;
pub mod layout;

pub use emit::{emit, ParamAbi, PtxKernel, PtxOptions};

pub use crate::EmitError;
