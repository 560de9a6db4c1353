//! The CUDA backend of the runtime: the driver (`driver.rs`: cudarc's
//! driver API, loaded dynamically — no CUDA at build time, no driver is an
//! `Err`) and the launch path (`launch.rs`: PTX from
//! `ferrotile_backends::ptx`, cached per specialization, tensor maps,
//! argument marshalling).

pub(crate) mod driver;
pub(crate) mod launch;
