//! Errors of the runtime: every failure is a value, never a panic.

use ferrotile_ir::SpecializeError;

/// `Debug` prints the same readable message as `Display`, so that an error
/// returned from `main` (which Rust prints with `Debug`) reads as a sentence,
/// not a struct.
#[derive(thiserror::Error)]
pub enum Error {
    /// The constexpr/dtype binding does not type-check or fails a check that
    /// needs numeric shapes.
    #[error("{0}")]
    Specialize(#[from] SpecializeError),
    /// Arguments do not match the kernel's declaration.
    #[error("launching kernel `{kernel}`: {msg}")]
    Launch {
        /// The kernel's name.
        kernel: String,
        /// What does not match.
        msg: String,
    },
    /// The CPU interpreter met something invalid while running (an
    /// out-of-bounds access of an unguarded launch, ...), at a source
    /// location. Guarded launches report faults as [`Error::Fault`].
    #[error("kernel `{kernel}` ({file}:{line}) in program {program:?}: {msg}")]
    Runtime {
        /// The kernel's name.
        kernel: String,
        /// The source file of the kernel.
        file: String,
        /// The source line of the operation.
        line: u32,
        /// The program (`program_id` along x, y, z) that met it.
        program: [u32; 3],
        /// What happened.
        msg: String,
    },
    /// A checked launch ([`crate::LaunchConfig::checked`]) faulted: an
    /// unmasked out-of-bounds access, a view outside its buffer, a loop
    /// step ≤ 0 — the first in program order, at its source line.
    #[error("kernel `{kernel}` ({file}:{line}): {msg}")]
    Fault {
        /// The kernel's name.
        kernel: String,
        /// The source file of the kernel.
        file: String,
        /// The source line of the faulting access.
        line: u32,
        /// The fault and the buffer it concerns.
        msg: String,
    },
    /// Buffer creation/copy problems.
    #[error("buffer error: {0}")]
    Buffer(String),
    /// The requested device is not available (no driver, no adapter, ...).
    #[error("device unavailable: {0}")]
    DeviceUnavailable(String),
    /// A backend failed (emission, assembly, driver).
    #[error("backend error in kernel `{kernel}`: {msg}")]
    Backend {
        /// The kernel's name (empty for device operations).
        kernel: String,
        /// The backend's message.
        msg: String,
    },
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// `Result` with ferrotile's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_reads_like_display() {
        let e = Error::Launch { kernel: "k".into(), msg: "argument `x` must be a buffer of f32, got bf16".into() };
        assert_eq!(format!("{e:?}"), "launching kernel `k`: argument `x` must be a buffer of f32, got bf16");
        assert_eq!(format!("{e:?}"), e.to_string());
    }
}
