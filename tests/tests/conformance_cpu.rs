//! The op-level conformance suite on the CPU interpreter, with a fresh
//! time-based seed every run (printed; set FERROTILE_SEED to reproduce a run,
//! FERROTILE_CASE=name to run one case).

use ferrotile::Device;
use ferrotile_tests::conformance::{case_seed, cases, report, run_case_with_timeout, Outcome};

#[test]
fn conformance_cpu() {
    let seed = std::env::var("FERROTILE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0x5eed)
    });
    let only = std::env::var("FERROTILE_CASE").ok();
    let dev = Device::cpu();
    println!("conformance on {} with seed {seed} (FERROTILE_SEED={seed} reproduces it)", dev.name());
    let all = cases();
    assert!(all.len() >= 20, "the suite lost cases: {}", all.len());
    let mut outcomes = vec![];
    for c in all.iter().filter(|c| only.as_deref().is_none_or(|o| o == c.name)) {
        let t = std::time::Instant::now();
        let result = run_case_with_timeout(c, &dev, case_seed(seed, c.name), std::time::Duration::from_secs(60));
        outcomes.push(Outcome { name: c.name, result, seconds: t.elapsed().as_secs_f64() });
    }
    assert!(!outcomes.is_empty(), "no case matches FERROTILE_CASE={only:?}");
    println!("{}", report(&outcomes));
    let failed: Vec<&str> = outcomes.iter().filter(|o| o.result.is_err()).map(|o| o.name).collect();
    assert!(failed.is_empty(), "{} conformance case(s) failed with seed {seed}: {failed:?}", failed.len());
}
