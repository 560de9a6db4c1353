//! Which backends this machine runs, one line each, and why a missing one
//! is missing: the CPU interpreter (always), CUDA (device 0: name,
//! compute capability, SMs), wgpu (the adapter), ptxas (the PTX assembly
//! tests), and what `Device::best()` picks. The detection is the tests'
//! own (`Device::cuda`, `Device::wgpu`, `ptxas::find`): `.ci/run` prints
//! this after the tests as their backend summary.
//!
//! `cargo run --release -p ferrotile-benches --bin devices`

use ferrotile::Device;

fn main() {
    let cpu = Device::cpu();
    println!("backend  status (detected as the tests detect them)");
    println!("cpu      ran: {} (the reference interpreter)", cpu.name());
    match Device::cuda(0) {
        Ok(d) => println!(
            "cuda     ran: {} (sm_{}, {} SMs)",
            d.name(),
            d.compute_capability().map_or("?".into(), |c| c.to_string()),
            d.multiprocessors().map_or("?".into(), |s| s.to_string())
        ),
        Err(e) => println!("cuda     skipped: {e}"),
    }
    match Device::wgpu() {
        Ok(d) => println!("wgpu     ran: {} (timing: {})", d.name(), d.timing_method()),
        Err(e) => println!("wgpu     skipped: {e}"),
    }
    match ferrotile_backends::ptxas::find() {
        Some(p) => println!("ptxas    ran: {} (every generated PTX assembled for sm_80/sm_90a)", p.display()),
        None => println!("ptxas    skipped: not found (set FERROTILE_PTXAS, or run scripts/install-ptxas.sh)"),
    }
    match Device::best() {
        Ok(d) => println!("best     {} (Device::best(); FERROTILE_DEVICE=cpu|cuda|wgpu forces one)", d.name()),
        Err(e) => println!("best     error: {e}"),
    }
}
