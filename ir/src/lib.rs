//! `ferrotile-ir`: the tiled intermediate representation of ferrotile.
//!
//! Pipeline stages that live here, in order:
//! - [`types`]: dtypes, symbolic dims, tile/view types;
//! - [`ir`]: the SSA data structure with structured regions;
//! - [`builder`]: typing and shape rules — used by the macro at compile time
//!   and replayed by the specializer at launch time;
//! - [`analysis`]: facts the macro needs (which pointers are written);
//! - [`mod@specialize`]: bind constexprs and dtypes, fold, re-check;
//! - [`verify`]: invariants of specialized IR;
//! - [`numeric`]: host-side f16/bf16/tf32 rounding with one semantics (the
//!   interpreter's arithmetic and both emitters' literal folding);
//! - [`passes`]: IR → IR passes (dead-code elimination, view lowering,
//!   software pipelining), one per file, and the pass list of every target;
//! - [`mod@print`]: the stable text form.
//!
//! This crate has no dependency on the runtime so that the proc-macro can
//! link it and type-check kernels while `rustc` runs.

#![warn(missing_docs)]

pub mod analysis;
pub mod builder;
pub mod ir;
pub mod numeric;
pub mod passes;
pub mod print;
pub mod specialize;
pub mod types;
pub mod verify;

pub use builder::{Builder, TypeError};
pub use ir::*;
pub use specialize::{specialize, SpecializeError};
pub use types::*;

impl Kernel {
    /// Serialize for embedding in generated code.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("IR serializes")
    }
    /// Parse what [`Kernel::to_json`] wrote; `Err` carries serde's message.
    pub fn from_json(s: &str) -> Result<Kernel, String> {
        serde_json::from_str(s).map_err(|e| e.to_string())
    }
    /// The text form (see [`mod@print`]).
    pub fn to_text(&self) -> String {
        print::print(self)
    }
}
