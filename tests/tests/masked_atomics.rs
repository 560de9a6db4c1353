//! The attention backward's one pass (`DQ`): its `dQᵀ = Kᵀ·dSᵀ` product
//! and the masked `atomic_add` of the result, as PTX.
//!
//! - The product runs on `wgmma` as `m64n32k16` (32 query rows a step):
//!   A is K's loop-invariant slot read the other way (`trans`, M-major, no
//!   data moved) and B the computed `dSᵀ`, staged K-major — a computed B
//!   narrower than a 128-byte atom counts as K-major
//!   (`async_copy::kmajor_b_sources`).
//! - The atomics, masked to the block's query rows, take a warp-uniform
//!   unpredicated path where a warp's masks all hold (`vote.sync.all`; ptxas
//!   wraps every predicated `red` in a branch of its own), and the
//!   predicated copy otherwise; a broadcast address (the guards' fault
//!   counter) keeps the predicated form.
//!
//! Results are checked on every device by the library's attention tests
//! (`BackwardConfig::atomic_dq`); here, the code, and that ptxas accepts it
//! without spills.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::passes::Safety;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;

#[test]
fn one_pass_backward_dq_on_wgmma_with_uniform_atomics() {
    let k = ferrotile_kernels::attention::attention_bwd_dkdv::ir();
    // BM, BN, DP, G, MASK_HI, MASK_LO, ACC, DQ
    let spec = specialize(k, &[32, 64, 128, 1, 0, 0, 0, 1], &[DType::BF16]).unwrap();
    let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, safety: Safety::Unchecked, ..PtxOptions::new(90, 4, k.params.len()) };
    let p = emit(&spec, &opts).unwrap();
    assert!(p.mma_sync_dots.is_empty(), "every dot on wgmma: {:?}", p.mma_sync_dots);
    // (the transposed A: K's slot read M-major; the staged B)
    assert!(p.text.contains("wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16"), "no m64n32k16");
    let staged: Vec<_> = p.conversions.iter().filter(|(_, l)| l.contains("staged")).collect();
    assert_eq!(staged.len(), 1, "only dSᵀ is staged: {staged:?}");
    assert!(staged[0].1.contains("operand B [64, 32]"), "{staged:?}");
    // 32 atomics per thread a step: one vote, 32 plain `red`s, 32 predicated
    let reds = p.text.lines().filter(|l| l.contains("red.global.add.f32")).collect::<Vec<_>>();
    let predicated = reds.iter().filter(|l| l.trim_start().starts_with('@')).count();
    assert_eq!(p.text.matches("vote.sync.all.pred").count(), 1);
    assert_eq!((reds.len() - predicated, predicated), (32, 32), "plain and predicated reds");
    if let Some(px) = ptxas::find_or_skip() {
        let r = ptxas::assemble(&px, &p.text, 90).unwrap();
        assert_eq!(r.spill_loads + r.spill_stores, 0, "spills ({} registers)", r.registers);
    }
    // guarded: the fault counter's atomics (one broadcast address) stay
    // predicated, with no vote of their own
    let g = emit(&spec, &PtxOptions { safety: Safety::Checked, ..opts }).unwrap();
    assert_eq!(g.text.matches("vote.sync.all.pred").count(), 1, "one vote: the dQ atomics'");
}
