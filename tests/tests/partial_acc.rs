//! Partial accumulators ([`ferrotile_backends::plan::partial`]): a
//! loop-carried tile only ever summed along one axis after its loop is
//! carried pre-summed inside each thread. The results are checked on every
//! device by the conformance case `partial_sums`; here, which accumulators
//! the PTX backend folds, into how many registers, and that ptxas needs
//! fewer registers for them.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::specialize;
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use ferrotile_tests::conformance::reduce::{k_acc_gemv, k_acc_vector};

/// The GEMV's `fma` accumulator and the `e + acc` one summed twice are
/// folded; the one also reduced with `max` is carried whole. A `[64, 256]`
/// f32 tile over 8 warps is 64 registers per thread; folded, two per column
/// a thread holds (eight groups of eight: two chains each, sixteen in
/// all). Turned off, no accumulator is folded.
#[test]
fn gemv_accumulators_fold_to_their_columns() {
    let k = k_acc_gemv::ir();
    let spec = specialize(k, &[64, 256], &[]).unwrap();
    for sm in [80, 90] {
        let on = emit(&spec, &PtxOptions { arg_div: vec![16; guarded_params(k)], ..PtxOptions::new(sm, 8, k.params.len()) }).unwrap();
        assert_eq!(on.partial_sums.len(), 2, "{:?}", on.partial_sums);
        for &(_, whole, held) in &on.partial_sums {
            assert_eq!((whole, held), (64, 16));
        }
        let off =
            emit(&spec, &PtxOptions { arg_div: vec![16; guarded_params(k)], partial_accumulators: false, ..PtxOptions::new(sm, 8, k.params.len()) }).unwrap();
        assert!(off.partial_sums.is_empty());
        if let Some(px) = ptxas::find_or_skip() {
            let (a, b) = (ptxas::assemble(&px, &on.text, sm).unwrap(), ptxas::assemble(&px, &off.text, sm).unwrap());
            println!("sm_{sm}: {} registers folded, {} whole", a.registers, b.registers);
            assert!(a.registers + 48 <= b.registers, "sm_{sm}: {} registers folded, {} whole", a.registers, b.registers);
            assert_eq!(a.spill_loads + a.spill_stores, 0);
        }
    }
}

/// A 1-D accumulator (one group per thread) keeps sixteen chains: a
/// `[4096]` f32 tile over 4 warps (32 per thread) folds to 16 registers, a
/// `[2048]` one (16 per thread, no more than the chains) is left alone.
#[test]
fn vector_accumulators_keep_sixteen_chains() {
    let k = k_acc_vector::ir();
    for (b, warps, want) in [(4096, 4, Some((32, 16))), (2048, 4, None)] {
        let spec = specialize(k, &[b], &[]).unwrap();
        let p = emit(&spec, &PtxOptions { arg_div: vec![16; guarded_params(k)], ..PtxOptions::new(90, warps, k.params.len()) }).unwrap();
        assert_eq!(p.partial_sums.iter().map(|&(_, w, h)| (w, h)).next(), want, "B={b} warps={warps}");
        if let Some(px) = ptxas::find_or_skip() {
            ptxas::assemble(&px, &p.text, 90).unwrap();
        }
    }
}
