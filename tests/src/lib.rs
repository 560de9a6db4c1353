//! Workspace-level tests support: the op-level conformance suite, and the
//! library GEMM on the interpreter for IR-pass equivalence tests.
pub mod conformance;
pub mod gemm_interp;
