//! Register A (`ptx/fragments.rs`): a user's attention loop feeds its
//! computed `P` (and its loop-invariant `Q`) to the tensor cores from
//! registers — no shared-memory staging left for `FERROTILE_EXPLAIN` to
//! report — on `wgmma` (sm_90a) and, where the two dots split rows over
//! the warps alike, on `mma.sync` (sm_80: the layout plan puts the warps
//! of chained dots along M); the PTX assembles. With the
//! option off, the same kernels stage both operands (what the A/B
//! measurement compares).

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use ferrotile_tests::conformance::fused::k_attention;

#[test]
fn attention_operands_stay_in_registers() {
    let px = ptxas::find_or_skip();
    let k = k_attention::ir();
    // (BM, BN, D, warps, sm, register A expected for P)
    let cases = [
        (64, 64, 64, 4, 90, true),
        (128, 64, 128, 8, 90, true),
        (128, 128, 64, 8, 90, true),
        (128, 64, 64, 4, 80, true),
        (128, 32, 32, 4, 80, true),
        // (square warp tiles would split S 2 × 2; the chained dots take
        // all warps along M instead: `assign::chained_dot_shapes`)
        (64, 64, 64, 4, 80, true),
        (128, 128, 64, 8, 80, true),
    ];
    for (bm, bn, d, warps, sm, expect) in cases {
        for causal in [0, 1] {
            let spec = specialize(k, &[bm, bn, d, causal], &[DType::BF16]).unwrap();
            for register_a in [true, false] {
                let o = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, register_a, ..PtxOptions::new(sm, warps, k.params.len()) };
                let p = emit(&spec, &o).unwrap_or_else(|e| panic!("{bm}x{bn}x{d} sm{sm}: {e:?}"));
                let what = format!("attention {bm}x{bn}x{d} {warps} warps sm_{sm} causal {causal} register_a {register_a}");
                let staged: Vec<_> = p.conversions.iter().filter(|(_, w)| w.contains("dot operand A")).collect();
                if register_a && expect {
                    assert!(staged.is_empty(), "{what}: {staged:?}");
                } else {
                    assert!(!staged.is_empty(), "{what}: P must be staged");
                }
                if sm == 90 {
                    // the register form: `{d..}, {a0, a1, a2, a3}, b-desc, ...`
                    let reg_form = p.text.lines().filter(|l| l.contains("wgmma.mma_async") && l.contains("}, {%r")).count();
                    assert_eq!(reg_form > 0, register_a, "{what}: {reg_form} register-A wgmma");
                }
                if let Some(px) = &px {
                    if let Err(log) = ptxas::assemble(px, &p.text, sm) {
                        panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"));
                    }
                }
            }
        }
    }
}

/// `LaunchConfig::programs_per_sm` → `.minnctapersm`: ptxas keeps the
/// attention loop within the registers two programs of 8 warps leave each
/// thread (128), where it takes 170 without the hint.
#[test]
fn programs_per_sm_caps_registers() {
    let k = k_attention::ir();
    let spec = specialize(k, &[128, 64, 64, 0], &[DType::BF16]).unwrap();
    let px = ptxas::find_or_skip();
    for per_sm in [0, 2] {
        let o = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, programs_per_sm: per_sm, ..PtxOptions::new(90, 8, k.params.len()) };
        let p = emit(&spec, &o).unwrap();
        assert_eq!(p.text.contains(".minnctapersm 2"), per_sm == 2);
        if let Some(px) = &px {
            let r = ptxas::assemble(px, &p.text, 90).unwrap_or_else(|log| panic!("ptxas: {log}"));
            if per_sm == 2 {
                assert!(r.registers <= 128, "{} registers with two programs per SM asked", r.registers);
            } else {
                assert!(r.registers > 128, "{} registers: the hint's test needs a kernel above 128", r.registers);
            }
        }
    }
}

/// Views whose base adds two program-id terms — batch and head of a
/// strided `[batch, seq, heads, dim]` tensor, the K/V head divided by the
/// group size — are TMA views with one map dimension per term (rank 4),
/// the divided term indexed by `ctaid / G` (with `PtxOptions::tma_terms`).
#[test]
fn strided_grouped_views_become_rank4_tensor_maps() {
    use ferrotile_tests::conformance::fused::k_attention_strided;
    let k = k_attention_strided::ir();
    let spec = specialize(k, &[64, 64, 64, 2], &[DType::F16]).unwrap();
    // (off: not tensor-map views)
    let o = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, tma_terms: false, ..PtxOptions::new(90, 4, k.params.len()) };
    assert!(emit(&spec, &o).unwrap().tensor_maps.is_empty());
    let o = PtxOptions { tma_terms: true, ..o };
    let p = emit(&spec, &o).unwrap();
    assert_eq!(p.tensor_maps.len(), 2, "K and V by bulk copies");
    for m in &p.tensor_maps {
        let terms: Vec<(u8, u32, u32)> = m.view.batch.iter().map(|t| (t.axis, t.div, t.modulo)).collect();
        assert_eq!(terms.len(), 2, "{terms:?}");
        assert!(terms.contains(&(2, 1, 0)) && terms.contains(&(1, 2, 0)), "batch by program_id(2), head by program_id(1) / 2: {terms:?}");
        assert_eq!(m.box_dims.len(), 4);
    }
    assert!(p.text.contains("cp.async.bulk.tensor.4d") && p.text.contains("div.u32"), "rank-4 copies, the head divided");
    if let Some(px) = ptxas::find_or_skip() {
        ptxas::assemble(&px, &p.text, 90).unwrap_or_else(|log| panic!("ptxas: {log}"));
    }
}

/// `PtxOptions::lower_register_a`: a loop-invariant Q that stays register
/// A (no slot) is read as pointer loads of whole fragment pairs — half
/// the loads, none of them scalar — instead of element by element; the
/// rest of the kernel is unchanged (its K and V rings) and the PTX
/// assembles without spills.
#[test]
fn register_a_invariants_load_in_vectors() {
    let px = ptxas::find_or_skip();
    let k = k_attention::ir();
    for causal in [0, 1] {
        let spec = specialize(k, &[128, 64, 64, causal], &[DType::BF16]).unwrap();
        let off = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, tma: true, ..PtxOptions::new(90, 4, k.params.len()) };
        let on = PtxOptions { lower_register_a: true, ..off.clone() };
        let (p0, p1) = (emit(&spec, &off).unwrap(), emit(&spec, &on).unwrap());
        let loads = |t: &str, w: &str| t.lines().filter(|l| l.contains("ld.global") && l.contains(w)).count();
        assert_eq!(loads(&p0.text, "ld.global.b16"), 64, "Q element by element without the option");
        assert_eq!(loads(&p1.text, "ld.global.b16"), 0, "no scalar loads with it");
        assert_eq!(loads(&p1.text, "ld.global.v2.b16"), 32, "Q's 64 elements per thread as 32 pairs");
        let bulk = |t: &str| t.matches("cp.async.bulk.tensor").count();
        assert_eq!(bulk(&p0.text), bulk(&p1.text), "K and V copied as before");
        if let Some(px) = &px {
            let r = ptxas::assemble(px, &p1.text, 90).unwrap_or_else(|e| panic!("ptxas: {e}"));
            assert_eq!(r.spill_stores, 0, "{}", r.log);
        }
    }
}
