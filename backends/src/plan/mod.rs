//! Target-neutral lowering decisions, computed from specialized IR and read
//! by both emitters (PTX and WGSL), so the two cannot decide differently:
//!
//! - [`layout`]: distributed layouts — which thread holds which element of
//!   a tile, in which register (the canonical blocked layout of a shape,
//!   the `mma.sync` and `wgmma` accumulator layouts);
//! - [`axis`]: contiguity / divisibility / constancy of integer and pointer
//!   tiles along their last dimension — where 16-byte vector accesses are
//!   provably legal;
//! - [`mathfn`]: the polynomials and constants of math-function
//!   approximations (one definition for both targets);
//! - [`convert`]: how a tile moves through scratch memory into another
//!   shape or layout (padding, the addresses each side uses);
//! - [`reduce`]: how a reduction is split into in-thread, across-lane and
//!   across-warp steps;
//! - [`remat`]: which tile values are cheap functions of their index and
//!   are recomputed in a consumer's layout instead of converted;
//! - [`slices`]: which values keep the slice layout a reduction leaves
//!   them in (and `expand_dims` / elementwise ops over them), instead of
//!   their shape's default layout — so a row statistic broadcasts back into
//!   its rows without shared memory (both printers);
//! - [`partial`]: which loop-carried accumulators, only ever summed along
//!   one axis after their loop, are carried pre-summed inside each thread
//!   (the PTX printer).
//!
//! A tile's *default* layout is a function of its shape (the PTX backend's
//! `assign` adds the tensor-core accumulator layouts per shape); `slices`
//! is the first per-value layout assignment of issue 20.

pub mod axis;
pub mod convert;
pub mod layout;
pub mod mathfn;
pub mod partial;
pub mod reduce;
pub mod remat;
pub mod slices;
