//! The op-level conformance suite, unchanged, on CUDA device 0 through the
//! PTX backend. Without a driver or GPU it reports "skipped: no CUDA driver"
//! (never a silent pass). FERROTILE_SEED / FERROTILE_CASE as for the CPU run.

use ferrotile::Device;
use ferrotile_tests::conformance::{case_seed, cases, report, run_case, Outcome};

#[test]
fn conformance_cuda() {
    let dev = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("skipped: no CUDA driver or device ({e})");
            eprintln!("skipped: no CUDA driver or device ({e})");
            return;
        }
    };
    let seed = std::env::var("FERROTILE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0x5eed)
    });
    let only = std::env::var("FERROTILE_CASE").ok();
    println!("conformance on {} with seed {seed} (FERROTILE_SEED={seed} reproduces it)", dev.name());
    let mut outcomes = vec![];
    for c in cases().iter().filter(|c| only.as_deref().is_none_or(|o| o == c.name)) {
        let t = std::time::Instant::now();
        let result = run_case(c, &dev, case_seed(seed, c.name));
        outcomes.push(Outcome { name: c.name, result, seconds: t.elapsed().as_secs_f64() });
    }
    println!("{}", report(&outcomes));
    let failed: Vec<&str> = outcomes.iter().filter(|o| o.result.is_err()).map(|o| o.name).collect();
    assert!(failed.is_empty(), "{} conformance case(s) failed on CUDA with seed {seed}: {failed:?}", failed.len());
}
