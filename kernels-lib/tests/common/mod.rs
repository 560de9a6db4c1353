//! Shared by the library's integration tests.

use ferrotile::Device;

/// The devices to check: the CPU interpreter always, CUDA device 0 when a
/// driver and GPU are present, the wgpu adapter when there is one (lavapipe
/// in CI) — each reported when absent, never silently skipped.
pub fn devices() -> Vec<Device> {
    // FERROTILE_TEST_DEVICES=cpu,cuda (say) restricts the run, e.g. under
    // compute-sanitizer; unset: every device present.
    let only = std::env::var("FERROTILE_TEST_DEVICES").ok();
    let want = |d: &str| only.as_deref().is_none_or(|o| o.split(',').any(|x| x.trim() == d));
    let mut v = vec![Device::cpu()];
    match Device::cuda(0) {
        _ if !want("cuda") => {}
        Ok(d) => v.push(d),
        Err(e) => eprintln!("skipped: CUDA ({e})"),
    }
    match Device::wgpu() {
        _ if !want("wgpu") => {}
        Ok(d) => v.push(d),
        Err(e) => eprintln!("skipped: no wgpu adapter ({e})"),
    }
    v
}

/// The CUDA device among [`devices`], if present (tests whose result does
/// not depend on the backend's choices elsewhere, or too slow elsewhere).
#[allow(dead_code)] // (not every test binary uses it)
pub fn cuda_devices() -> Vec<Device> {
    devices().into_iter().filter(|d| d.kind() == ferrotile::DeviceKind::Cuda).collect()
}
