//! The op-level conformance suite on the CPU interpreter *after* the IR
//! rewrite the GPU backends apply (software pipelining of `dot` loops,
//! `ferrotile_ir::pipeline`): every case — the `dot` cases with their K
//! loops, masked tails and accumulators in particular — must still match
//! the references. This checks the pass's semantics on any machine; the
//! CUDA run checks the backend.

use ferrotile::Device;
use ferrotile_tests::conformance::{case_seed, cases, report, run_case_with_timeout, Outcome};

#[test]
fn conformance_cpu_pipelined() {
    // before any launch: read once per process
    std::env::set_var("FERROTILE_INTERP_PIPELINE", "1");
    let seed = std::env::var("FERROTILE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0x5eed)
    });
    let dev = Device::cpu();
    println!("conformance (pipelined IR) on {} with seed {seed} (FERROTILE_SEED={seed} reproduces it)", dev.name());
    let mut outcomes = vec![];
    for c in cases().iter() {
        let t = std::time::Instant::now();
        let result = run_case_with_timeout(c, &dev, case_seed(seed, c.name), std::time::Duration::from_secs(60));
        outcomes.push(Outcome { name: c.name, result, seconds: t.elapsed().as_secs_f64() });
    }
    println!("{}", report(&outcomes));
    let failed: Vec<&str> = outcomes.iter().filter(|o| o.result.is_err()).map(|o| o.name).collect();
    assert!(failed.is_empty(), "{} conformance case(s) failed on the pipelined IR with seed {seed}: {failed:?}", failed.len());
}
