//! Where deferred `wgmma` waits land (`ptx/emit/wgmma.rs`, `wg_held` and
//! `wg_boundary`), on the library's overlapped attention as it runs on the
//! H200 at d128 (128×128 tiles, a producer warpgroup, bulk copies): in the
//! key loop, the previous block's P·V stays in flight through the masks'
//! branch (`branch_masks`) — only Q·Kᵀ is waited for before it (`wait_group
//! 1`) — and its own wait (`wait_group 0`, before `acc·alpha`) comes after
//! every exp of the softmax, behind a basic-block boundary so that ptxas
//! does not move it back up. At d64 (128×64 on one warpgroup) the P·V is
//! short next to the softmax: no boundary. All of it assembles for sm_90a.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;

fn library_ptx(bm: i64, bn: i64, dp: i64, warps: u32, causal: bool, ws: bool) -> String {
    let k = ferrotile_kernels::attention::attention_fwd_overlap::ir();
    // (BM, BN, DP, G, MASK_HI, MASK_LO, LSE, FOLD)
    let spec = specialize(k, &[bm, bn, dp, 1, causal as i64, 0, 0, 1], &[DType::BF16]).unwrap();
    let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, tma: true, warp_specialize: ws, ..PtxOptions::new(90, warps, k.params.len()) };
    let p = emit(&spec, &opts).unwrap_or_else(|e| panic!("{e:?}"));
    if let Some(px) = ptxas::find_or_skip() {
        if let Err(log) = ptxas::assemble(&px, &p.text, 90) {
            panic!("ptxas, d{dp} causal {causal}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"));
        }
    }
    p.text
}

#[test]
fn pv_runs_through_the_masks_and_the_softmax() {
    for causal in [false, true] {
        let t = library_ptx(128, 128, 128, 8, causal, true);
        // the key loop: Q·Kᵀ waited for with P·V still in flight
        let w1 = t.find("wgmma.wait_group.sync.aligned 1;").unwrap_or_else(|| panic!("causal {causal}: Q·Kᵀ waited for alone"));
        let rest = &t[w1 + "wgmma.wait_group.sync.aligned 1;".len()..];
        let mb = rest.find("membar.cta;").unwrap_or_else(|| panic!("causal {causal}: a boundary before P·V's wait"));
        let (between, after) = rest.split_at(mb);
        assert!(between.contains("bra.uni"), "causal {causal}: the masks' branch runs with P·V in flight");
        assert!(!between.contains("wgmma.wait_group"), "causal {causal}: no wait inside the branch or the softmax");
        assert!(between.matches("ex2.approx").count() >= 64, "causal {causal}: the softmax's exps before the wait");
        // (the boundary's label, then the wait)
        let w0 = after.find("wgmma.wait_group.sync.aligned 0;").unwrap();
        assert!(after[..w0].lines().count() <= 3, "causal {causal}: the wait right after the boundary:\n{}", &after[..w0]);
        assert_eq!(t.matches("membar.cta;").count(), 1, "causal {causal}: one boundary (the key loop's P·V)");
    }
}

#[test]
fn short_mmas_keep_ptxas_placement() {
    for (bm, bn, warps) in [(128, 64, 4), (64, 64, 4)] {
        let t = library_ptx(bm, bn, 64, warps, true, false);
        assert!(t.contains("wgmma.wait_group.sync.aligned 1;"), "{bm}x{bn}: P·V through the masks");
        assert!(!t.contains("membar.cta;"), "{bm}x{bn}: no boundary for d64's P·V");
    }
}
