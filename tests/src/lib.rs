//! Workspace-level tests support: the op-level conformance suite.
pub mod conformance;
