//! Errors of the runtime: every failure is a value, never a panic.

use ferrotile_ir::SpecializeError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The constexpr/dtype binding does not type-check or fails a check that
    /// needs numeric shapes.
    #[error("{0}")]
    Specialize(#[from] SpecializeError),
    /// Arguments do not match the kernel's declaration.
    #[error("launching kernel `{kernel}`: {msg}")]
    Launch { kernel: String, msg: String },
    /// The kernel did something invalid while running (out-of-bounds access,
    /// integer division by zero, ...), at a source location.
    #[error("kernel `{kernel}` ({file}:{line}) in program {program:?}: {msg}")]
    Runtime { kernel: String, file: String, line: u32, program: [u32; 3], msg: String },
    /// Buffer creation/copy problems.
    #[error("buffer error: {0}")]
    Buffer(String),
    /// The requested device is not available (no driver, no adapter, ...).
    #[error("device unavailable: {0}")]
    DeviceUnavailable(String),
    /// A backend failed (emission, assembly, driver).
    #[error("backend error in kernel `{kernel}`: {msg}")]
    Backend { kernel: String, msg: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
