//! Which `dot`s take Hopper's `wgmma` at a narrow N (`ptx::assign`): N in
//! steps of 8 needs a B that arrives K-major (a transposed view, which its
//! bulk copies bring into a K-major slot); an N-major B needs whole
//! 64-column atoms. Dots of one result shape share a layout: where one of
//! them could take `wgmma` and another cannot, both run on `mma.sync`
//! (not on the FMA path), and `FERROTILE_EXPLAIN`'s reasons say why.
//! Everything assembles for sm_90a.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;

/// `C[pm.., 0..BN] = Σ_k A·B` with B column-major (K-major), plus with
/// `ROW_B2` a second product of the same shape with a row-major B2.
#[ferrotile::kernel]
fn narrow_dots<T: Float, const BM: i32, const BN: i32, const BK: i32, const ROW_B2: bool>(
    a: Ptr<T>,
    b: Ptr<T>,
    b2: Ptr<T>,
    c: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
    ld: i32,
) {
    let pm = program_id(0) * BM;
    let va = view(a, [m, k], [ld, 1]);
    let vbt = view(b, [k, n], [1, ld]);
    let vb2 = view(b2, [k, n], [ld, 1]);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        acc = dot(load_block(va, [pm, k0], [BM, BK]), load_block(vbt, [k0, 0], [BK, BN]), acc);
        if ROW_B2 {
            acc = dot(load_block(va, [pm, k0], [BM, BK]), load_block(vb2, [k0, 0], [BK, BN]), acc);
        }
    }
    store_block(view(c, [m, n], [ld, 1]), [pm, 0], acc);
}

#[test]
fn narrow_n_takes_wgmma_only_with_a_kmajor_b() {
    let px = ptxas::find_or_skip();
    let k = narrow_dots::ir();
    // (BN, second row-major product) → wgmma instruction shape, or None
    for (bn, row_b2, want) in
        [(16, false, Some("m64n16k16")), (32, false, Some("m64n32k16")), (64, false, Some("m64n64k16")), (16, true, None), (64, true, Some("m64n64k16"))]
    {
        let spec = specialize(k, &[64, bn, 64, row_b2 as i64], &[DType::BF16]).unwrap();
        let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, ..PtxOptions::new(90, 4, k.params.len()) };
        let p = emit(&spec, &opts).unwrap();
        let t = &p.text;
        let what = format!("BN = {bn}, row-major B2: {row_b2}");
        match want {
            Some(shape) => {
                assert!(t.contains(&format!("wgmma.mma_async.sync.aligned.{shape}.f32.bf16.bf16")), "{what}: expected {shape}");
                assert!(!t.contains("mma.sync.aligned") && p.mma_sync_dots.is_empty(), "{what}: {:?}", p.mma_sync_dots);
                // the K-major B's instructions have no B transpose
                assert!(t.lines().filter(|l| l.contains("wgmma.mma_async")).any(|l| l.trim_end().ends_with(", 1, 1, 0, 0;")), "{what}");
            }
            None => {
                // both dots on mma.sync (tensor cores, not the FMA loop),
                // each with its reason: the shape cannot take `wgmma` as a
                // whole, so its views are not kept for bulk copies, and
                // neither B arrives K-major
                assert!(!t.contains("wgmma.mma_async") && t.contains("mma.sync.aligned.m16n8k16") && p.fma_dots.is_empty(), "{what}: expected mma.sync");
                let why: Vec<&str> = p.mma_sync_dots.iter().map(|(_, r)| r.as_str()).collect();
                assert_eq!(why.len(), 2, "{what}: {why:?}");
                assert!(why.iter().all(|r| r.contains("N = 16")), "{what}: {why:?}");
            }
        }
        if let Some(px) = &px {
            if let Err(log) = ptxas::assemble(px, t, 90) {
                panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"));
            }
        }
    }
}
