//! The runtime: devices, buffers, launch configuration, the specialization
//! cache and dispatch of a launch to a backend.
//!
//! Takes a typed launch from generated code; checks arguments against the
//! kernel's declaration (count, kinds, dtypes, devices), specializes (cached
//! per kernel × constexprs × dtypes), optionally dumps the IR
//! (`FERROTILE_DUMP_IR=1`, or `=name` for one kernel) and runs it on the
//! device. Everything that can go wrong is an [`crate::Error`].

pub mod autotune;
mod buffer;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod device;
mod launch;
pub mod pinned;
pub mod stream;
#[cfg(feature = "wgpu")]
mod webgpu;

pub use autotune::{Autotuner, TuneConfig, TuneReport};

/// FNV-1a's offset basis: the hash of no bytes.
pub(crate) const FNV_OFFSET: u64 = 0xcbf29ce484222325;

/// FNV-1a of `bytes`, continuing from `h` (stable across runs and
/// platforms: cache keys and file names on disk).
pub(crate) fn fnv1a(h: u64, bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(h, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}
pub use buffer::Buffer;
pub use buffer::Storage;
pub use device::{Device, DeviceKind, Graph};
pub use launch::{
    checked_by_default, launch, launch_unchecked, run_interpreted, set_specialization_observer, set_unguarded_for_measurement, specialize_cached, Arg,
    LaunchConfig,
};
pub use pinned::PinnedBuffer;
pub use stream::{Event, Stream};
