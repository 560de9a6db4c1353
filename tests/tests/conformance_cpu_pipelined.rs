//! The op-level conformance suite on the CPU interpreter *after* the IR
//! rewrite the GPU backends apply (software pipelining of `dot` loops,
//! `ferrotile_ir::passes::pipeline`): every case — the `dot` cases with their K
//! loops, masked tails and accumulators in particular — must still match
//! the references. This checks the pass's semantics on any machine; the
//! CUDA run checks the backend. FERROTILE_SEED / FERROTILE_CASE as for the
//! plain CPU run.

use ferrotile::Device;

#[test]
fn conformance_cpu_pipelined() {
    // before any launch: the flag is read once per process
    std::env::set_var("FERROTILE_INTERP_PIPELINE", "1");
    println!("(interpreter running the pipelined IR)");
    ferrotile_tests::conformance::run_suite(&Device::cpu(), Some(std::time::Duration::from_secs(60)));
}
