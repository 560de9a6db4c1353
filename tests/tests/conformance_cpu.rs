//! The op-level conformance suite on the CPU interpreter, with a fresh
//! time-based seed every run (printed; set FERROTILE_SEED to reproduce a run,
//! FERROTILE_CASE=name to run one case).

use ferrotile::Device;

#[test]
fn conformance_cpu() {
    ferrotile_tests::conformance::run_suite(&Device::cpu(), Some(std::time::Duration::from_secs(60)));
}
