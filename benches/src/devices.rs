//! Which backends this machine runs, one line each, why a missing one is
//! missing, and what `Device::best()` picks (`ferrotile devices`; also the
//! `devices` binary, which `.ci/run` prints after the tests as their
//! backend summary). The detection is the tests' own (`Device::cuda`,
//! `Device::wgpu`, `ptxas::find`).

use ferrotile::Device;

/// The report, one line per backend.
pub fn report() -> String {
    let mut s = String::from("backend  status (detected as the tests detect them)\n");
    let cpu = Device::cpu();
    s += &format!("cpu      ran: {} (the reference interpreter)\n", cpu.name());
    match Device::cuda(0) {
        Ok(d) => {
            let cc = d.compute_capability();
            let features = match cc {
                Some(c) if c >= 90 => "mma.sync, wgmma, TMA, clusters",
                Some(c) if c >= 80 => "mma.sync, cp.async",
                _ => "FMA dots only",
            };
            s += &format!(
                "cuda     ran: {} (sm_{}, {} SMs, {} MHz; {features}{})\n",
                d.name(),
                cc.map_or("?".into(), |c| c.to_string()),
                d.multiprocessors().map_or("?".into(), |n| n.to_string()),
                d.clock_mhz().map_or("?".into(), |m| m.to_string()),
                crate::job::tensor16_peak(&d).map_or(String::new(), |p| format!("; 16-bit tensor-core peak {p:.0} TFLOP/s"))
            );
        }
        Err(e) => s += &format!("cuda     skipped: {e}\n"),
    }
    match Device::wgpu() {
        Ok(d) => s += &format!("wgpu     ran: {} (timing: {})\n", d.name(), d.timing_method()),
        Err(e) => s += &format!("wgpu     skipped: {e}\n"),
    }
    match ferrotile_backends::ptxas::find() {
        Some(p) => s += &format!("ptxas    ran: {} (every generated PTX assembled for sm_80/sm_90a)\n", p.display()),
        None => s += "ptxas    skipped: not found (set FERROTILE_PTXAS, or run scripts/install-ptxas.sh)\n",
    }
    match Device::best() {
        Ok(d) => s += &format!("best     {} (Device::best(): CUDA, else wgpu, else the interpreter; FERROTILE_DEVICE=cpu|cuda|wgpu forces one)\n", d.name()),
        Err(e) => s += &format!("best     error: {e}\n"),
    }
    s
}
