//! The op-level conformance suite, unchanged, on CUDA device 0 through the
//! PTX backend. Without a driver or GPU it reports "skipped: no CUDA driver"
//! (never a silent pass). FERROTILE_SEED / FERROTILE_CASE as for the CPU run.

use ferrotile::Device;

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
    ferrotile_tests::conformance::run_suite(&dev, None);
}
