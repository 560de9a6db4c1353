//! The wgpu backend of the runtime (Vulkan, Metal, DX12; lavapipe in CI):
//! the driver (`driver.rs`: adapter, device, buffers, pipelines, timing)
//! and the launch path (`launch.rs`: WGSL from `ferrotile_backends::wgsl`,
//! cached per specialization, bind groups).

pub(crate) mod driver;
pub(crate) mod launch;
