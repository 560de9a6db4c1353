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
pub use buffer::Buffer;
pub use buffer::Storage;
pub use device::{Device, DeviceKind, Graph};
pub use launch::{
    checked_by_default, launch, launch_unchecked, run_interpreted, set_specialization_observer, set_unguarded_for_measurement, specialize_cached, Arg,
    LaunchConfig,
};
pub use pinned::PinnedBuffer;
pub use stream::{Event, Stream};
