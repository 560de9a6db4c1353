//! The op-level conformance suite, unchanged, on a wgpu adapter through the
//! WGSL backend (in CI: lavapipe, Mesa's CPU Vulkan driver). Without an
//! adapter it reports "skipped: no wgpu adapter" (never a silent pass);
//! built without the tests crate's `wgpu` feature it reports that instead.
//! FERROTILE_SEED / FERROTILE_CASE as for the CPU run; the adapter is
//! chosen by wgpu's environment variables (WGPU_BACKEND, WGPU_ADAPTER_NAME).
//! The cases hold WGSL to its documented float relaxations (sqrt within
//! 2.5 ulp, fma possibly unfused, subnormals possibly flushed, a*b+c
//! possibly contracted: see
//! `FloatModel`), nothing more; no failure is tolerated.

#[cfg(feature = "wgpu")]
#[test]
fn conformance_wgpu() {
    let dev = match ferrotile::Device::wgpu() {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: no wgpu adapter ({e})");
            eprintln!("skipped: no wgpu adapter ({e})");
            return;
        }
    };
    ferrotile_tests::conformance::run_suite(&dev, None);
}

#[cfg(not(feature = "wgpu"))]
#[test]
fn conformance_wgpu() {
    println!("skipped: no wgpu adapter (the tests crate was built without its `wgpu` feature)");
}
