//! PTX backend: specialized IR → PTX text, written by us (no LLVM, no NVRTC).
//!
//! Stages, each in its own file (after the IR-level pipelining pass,
//! `ferrotile_ir::passes::pipeline`, which `emit` applies when asked):
//! - [`layout`]: distributed layouts (element → thread, register): the
//!   canonical blocked layout and the mma accumulator layout;
//! - [`assign`]: which layout each tile shape gets in a kernel (and which
//!   `dot`s run as Hopper warpgroup MMAs);
//! - [`async_copy`]: which loads become `cp.async` copies into shared-memory
//!   operand rings (or, from [`tma`] views, TMA bulk tensor copies);
//! - [`tma`]: which views a Hopper tensor map describes, and the recipe the
//!   host evaluates per launch to encode it;
//! - [`warp_spec`]: whether a kernel's bulk copies can move to a producer
//!   warp of their own, and which ops that warp runs;
//! - [`axis`]: contiguity/divisibility analysis of integer and pointer tiles,
//!   which decides where 128-bit vector accesses are provably legal;
//! - [`emit`]: instruction selection over the layouts: elementwise ops in
//!   registers, index arithmetic rematerialized under broadcasts,
//!   reductions in-thread → `shfl.sync` → shared memory, other layout
//!   conversions through shared memory, structured control flow, `dot` on
//!   tensor cores (`wgmma` on sm_90a, `mma.sync`) or as an FMA loop.
//!
//! Output targets `sm_80`, `sm_90` or (kernels using `wgmma`) `sm_90a`
//! with PTX ISA 8.0 (accepted by driver
//! 580 and by ptxas 12.x/13.x).

pub mod assign;
pub mod async_copy;
pub mod axis;
pub mod emit;
pub mod layout;
pub mod tma;
pub mod warp_spec;

pub use emit::{emit, ParamAbi, PtxKernel, PtxOptions, TensorMapSpec};

pub use crate::EmitError;
