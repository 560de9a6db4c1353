//! Workspace-level tests support: the op-level conformance suite, the
//! library GEMM and row kernels on the interpreter for IR-pass equivalence
//! tests, and small kernels the runtime tests share.

// Index loops over several parallel per-dimension / per-register arrays
// read better than zipped iterators here.
#![allow(clippy::needless_range_loop)]
pub mod conformance;
pub mod gemm_interp;
pub mod kernels;
pub mod row_interp;
pub mod tilefns;
