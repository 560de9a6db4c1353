//! `ferrotile-backends`: code generation from specialized IR.
//!
//! - [`ptx`]: PTX emission (always built; pure Rust, no CUDA needed) and a
//!   `ptxas` driver used by tests to assemble what we emit.
//! - `cuda` (feature `cuda`): the CUDA runtime through cudarc's driver API,
//!   loaded dynamically so that builds and CI need no CUDA installation.
//! - [`wgsl`]: WGSL emission (always built); `wgpu_rt` (feature `wgpu`): the
//!   wgpu runtime that runs it on Vulkan/Metal/DX12 adapters (and lavapipe).

pub mod ptx;
pub mod ptxas;
pub mod wgsl;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "wgpu")]
pub mod wgpu_rt;
