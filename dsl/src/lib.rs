//! # ferrotile
//!
//! Tile-level GPU kernels written in Rust. A kernel is a function annotated
//! with [`kernel`]; one instance (a *program*) works on whole tiles —
//! `program_id`, `arange`, masked `load`/`store`, broadcasting arithmetic,
//! reductions, `dot` — and never on threads.
//!
//! ```
//! use ferrotile::prelude::*;
//!
//! #[kernel]
//! fn add<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, out: Ptr<f32>, n: i32) {
//!     let offs = program_id(0) * BLOCK + arange(0, BLOCK);
//!     let mask = offs < n;
//!     let a = load(x + offs, mask, 0.0);
//!     let b = load(y + offs, mask, 0.0);
//!     store(out + offs, a + b, mask);
//! }
//!
//! let dev = Device::cpu();
//! let x = dev.from_slice(&[1.0f32, 2.0, 3.0]).unwrap();
//! let y = dev.from_slice(&[10.0f32, 20.0, 30.0]).unwrap();
//! let mut out = dev.zeros::<f32>(3).unwrap();
//! add::launch(&dev, 1, &x, &y, &mut out, 3, 128).unwrap();
//! assert_eq!(out.to_vec().unwrap(), vec![11.0, 22.0, 33.0]);
//! ```
//!
//! Tile functions ([`func`]) are inlined where they are called and typed
//! with the values they get there:
//!
//! ```
//! use ferrotile::prelude::*;
//!
//! #[func]
//! fn axpy(a: Tile, x: Tile, y: Tile) -> Tile {
//!     a * x + y
//! }
//!
//! #[kernel]
//! fn saxpy<const BLOCK: i32>(x: Ptr<f32>, y: Ptr<f32>, a: f32, n: i32) {
//!     let offs = program_id(0) * BLOCK + arange(0, BLOCK);
//!     let mask = offs < n;
//!     store(y + offs, axpy(a, load(x + offs, mask, 0.0), load(y + offs, mask, 0.0)), mask);
//! }
//!
//! let dev = Device::cpu();
//! let x = dev.from_slice(&[1.0f32, 2.0, 3.0]).unwrap();
//! let mut y = dev.from_slice(&[10.0f32, 20.0, 30.0]).unwrap();
//! saxpy::launch(&dev, 1, &x, &mut y, 2.0, 3, 128).unwrap();
//! assert_eq!(y.to_vec().unwrap(), vec![12.0, 24.0, 36.0]);
//! ```
//!
//! Pipeline: the macro (`ferrotile-macros`) type-checks and lowers the
//! function to the generic IR (`ferrotile-ir`); at launch the runtime
//! specializes it for the constexpr values and dtypes, then a backend runs
//! it: today the CPU interpreter ([`interp`]), the reference semantics.
//! See `ARCHITECTURE.md`.

#![warn(missing_docs)]

extern crate self as ferrotile;

pub mod element;
pub mod error;
#[cfg(feature = "cuda")]
pub mod interop;
pub mod interp;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod runtime;

pub use element::{bf16, f16, f8e4m3, f8e5m2, Element, FloatElement};
pub use error::{Error, Result};
pub use ferrotile_ir as ir;
pub use ferrotile_macros::{func, kernel};
pub use runtime::{Autotuner, Buffer, Device, DeviceKind, Event, Graph, LaunchConfig, PinnedBuffer, Stream, TuneConfig};

/// Marker for pointer arguments in kernel signatures: `x: Ptr<f32>`.
/// Only meaningful inside `#[kernel]` functions; the launcher takes a
/// [`Buffer`] in its place.
pub struct Ptr<T>(std::marker::PhantomData<T>);

/// Marker for the parameters of a [`func`]: `x: Tile` is a tile of any
/// shape and dtype (a scalar, a pointer tile), typed at each call.
pub struct Tile;

/// Bound of dtype parameters in kernel signatures: `<T: Float>` stands for
/// f32, f16 or bf16, chosen by the buffers passed at launch.
pub trait Float {}

/// Everything a kernel file needs.
pub mod prelude {
    pub use crate::{bf16, f16, f8e4m3, f8e5m2, func, kernel, Buffer, Device, Float, LaunchConfig, Ptr, Tile};
}

/// Support for generated code; not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::runtime::{launch, launch_unchecked, Arg};
    pub fn decode_ir(json: &str, file: &str) -> crate::ir::Kernel {
        let mut k = crate::ir::Kernel::from_json(json).expect("ferrotile: IR embedded by #[kernel] fails to decode (macro/runtime version mismatch?)");
        k.file = file.to_string();
        k
    }
}

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
