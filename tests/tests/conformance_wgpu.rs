//! The op-level conformance suite, unchanged, on a wgpu adapter through the
//! WGSL backend (in CI: lavapipe, Mesa's CPU Vulkan driver). Without an
//! adapter it reports "skipped: no wgpu adapter" (never a silent pass);
//! built without the tests crate's `wgpu` feature it reports that instead.
//! FERROTILE_SEED / FERROTILE_CASE as for the CPU run; the adapter is
//! chosen by wgpu's environment variables (WGPU_BACKEND, WGPU_ADAPTER_NAME).
//! The cases hold WGSL to its documented float relaxations (sqrt within
//! 2.5 ulp, fma possibly unfused, subnormals possibly flushed: see
//! `FloatModel`), nothing more; no failure is tolerated.

#[cfg(feature = "wgpu")]
use ferrotile::Device;
#[cfg(feature = "wgpu")]
use ferrotile_tests::conformance::{case_seed, cases, report, run_case, Outcome};

#[cfg(feature = "wgpu")]
#[test]
fn conformance_wgpu() {
    let dev = match Device::wgpu() {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: no wgpu adapter ({e})");
            eprintln!("skipped: no wgpu adapter ({e})");
            return;
        }
    };
    let seed = std::env::var("FERROTILE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0x5eed)
    });
    let only = std::env::var("FERROTILE_CASE").ok();
    let name = dev.name();
    println!("conformance on {name} with seed {seed} (FERROTILE_SEED={seed} reproduces it)");
    let mut outcomes = vec![];
    for c in cases().iter().filter(|c| only.as_deref().is_none_or(|o| o == c.name)) {
        let t = std::time::Instant::now();
        let result = run_case(c, &dev, case_seed(seed, c.name));
        outcomes.push(Outcome { name: c.name, result, seconds: t.elapsed().as_secs_f64() });
    }
    println!("{}", report(&outcomes));
    let failed: Vec<&str> = outcomes.iter().filter(|o| o.result.is_err()).map(|o| o.name).collect();
    assert!(failed.is_empty(), "{} conformance case(s) failed on {name} with seed {seed}: {failed:?}", failed.len());
}

#[cfg(not(feature = "wgpu"))]
#[test]
fn conformance_wgpu() {
    println!("skipped: no wgpu adapter (the tests crate was built without its `wgpu` feature)");
}
