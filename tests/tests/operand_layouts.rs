//! Computed A operands in the A fragments' layout
//! (`PtxOptions::operand_layouts`, `ptx::assign`'s `computed_a_layouts`):
//! RMSNorm fused into a GEMM (`k_norm_matmul`) computes its A operand
//! `(x · r ∘ g) as T` element by element, at a shape that is not the
//! accumulator's. With the option, that shape takes the layout whose
//! registers are `wgmma`'s register-A fragments, the `dot` reads A from
//! registers (the register form of `wgmma`), nothing is staged for it and
//! the row statistic `r` reaches the tile without shared memory; the PTX
//! assembles without spilling. Without it, A is staged as before (what the
//! A/B measurement compares). The decode form of a small-M product
//! (`outᵀ = (W ∘ s)·xᵀ`: a computed weight tile as A, the few tokens as a
//! narrow B loaded along K) takes `wgmma` with its A from registers too.
//! Kernels whose A is a load, or whose computed A already has the
//! accumulator's shape, compile to the same PTX either way.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType, Kernel};
use ferrotile_backends::plan::layout::Blocked;
use ferrotile_backends::ptx::{assign, emit, PtxOptions};
use ferrotile_backends::ptxas;
use ferrotile_tests::conformance::fused::{k_attention, k_decode_t, k_norm_matmul};

fn opts(k: &Kernel, sm: u32, warps: u32, operand_layouts: bool, broadcast_slices: bool) -> PtxOptions {
    PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, operand_layouts, broadcast_slices, ..PtxOptions::new(sm, warps, k.params.len()) }
}

/// The plan gives the A shape `[BM, BK]` the `wgmma` accumulator layout of
/// that shape (whose registers are the register-A fragments) only with the
/// option, and leaves the accumulator's and B's shapes as they were.
#[test]
fn the_plan_gives_a_computed_a_the_fragment_layout() {
    let spec = specialize(k_norm_matmul::ir(), &[128, 128, 64], &[DType::BF16]).unwrap();
    let kb = Default::default();
    let on = assign::plan(&spec, 8, true, true, &kb, true, false, true);
    let off = assign::plan(&spec, 8, true, true, &kb, true, false, false);
    assert_eq!(on.layout(&[128, 64], 8, 8), Blocked::wgmma_a_operand(&[128, 64], 8, 8));
    assert_eq!(on.a_interleaved(&[128, 64]), Some(8));
    assert_eq!(off.a_interleaved(&[128, 64]), None);
    assert_eq!(off.layout(&[128, 64], 8, 8), Blocked::canonical(&[128, 64], 8, 8));
    for s in [[128u32, 128], [64, 128]] {
        assert_eq!(on.layout(&s, 8, 8), off.layout(&s, 8, 8), "{s:?}");
    }
    assert!(ferrotile_backends::ptx::fragments::wgmma_a_interleaved(&on.layout(&[128, 64], 8, 8), 128, 64, 8, 8).is_some());
}

#[test]
fn norm_matmul_reads_a_from_registers() {
    let px = ptxas::find_or_skip();
    let k = k_norm_matmul::ir();
    // (BM, BN, BK, warps): two warpgroups, and one at a 64 × 128 tile
    for (bm, bn, bk, warps) in [(128, 128, 64, 8), (64, 128, 64, 4), (128, 128, 32, 8)] {
        for dt in [DType::BF16, DType::F16] {
            let spec = specialize(k, &[bm, bn, bk], &[dt]).unwrap();
            for (on, slices) in [(true, false), (true, true), (false, false)] {
                let what = format!("norm_matmul {bm}x{bn}x{bk} {warps} warps {dt:?} operand_layouts {on} broadcast_slices {slices}");
                let p = emit(&spec, &opts(k, 90, warps, on, slices)).unwrap_or_else(|e| panic!("{what}: {e:?}"));
                let staged: Vec<_> = p.conversions.iter().filter(|(_, w)| w.contains("dot operand A")).collect();
                let reg_form = p.text.lines().filter(|l| l.contains("wgmma.mma_async") && l.contains("}, {%r")).count();
                // (what the CUDA runtime's spill fallback reads)
                assert_eq!(p.operand_layouts, on as u32, "{what}");
                if on {
                    assert!(staged.is_empty(), "{what}: {staged:?}");
                    assert!(reg_form > 0, "{what}: no register-A wgmma");
                    // the row statistic is reduced from tiles of A's shape
                    // (the first loop) in the same layout: its broadcast
                    // into A moves nothing
                    let rows: Vec<_> =
                        p.conversions.iter().filter(|(_, w)| w.contains("row statistic") || w.contains("[128, 1]") || w.contains("[64, 1]")).collect();
                    assert!(rows.is_empty(), "{what}: {rows:?}");
                    // (the gain stays converted, with the backward rule
                    // too: its slice of A's layout holds 16 columns per
                    // thread, and the pipelined loop carries two of them —
                    // past `plan::slices::MAX_SLICE_REGS`)
                } else {
                    assert!(!staged.is_empty(), "{what}: A must be staged without the option");
                    assert_eq!(reg_form, 0, "{what}");
                }
                if let Some(px) = &px {
                    let r =
                        ptxas::assemble(px, &p.text, 90).unwrap_or_else(|log| panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n")));
                    assert_eq!(r.spill_stores, 0, "{what}: {} bytes spilled", r.spill_stores);
                }
            }
        }
    }
}

/// Where A is loaded (a plain GEMM's, the attention's Q) or a computed A
/// already has the accumulator's shape (attention's P at BN = D), the
/// option changes nothing.
#[test]
fn other_kernels_are_unchanged() {
    let k = k_attention::ir();
    for (bm, bn, d, warps) in [(64, 64, 64, 4), (128, 64, 128, 8)] {
        let spec = specialize(k, &[bm, bn, d, 0], &[DType::BF16]).unwrap();
        let a = emit(&spec, &opts(k, 90, warps, false, false)).unwrap();
        let b = emit(&spec, &opts(k, 90, warps, true, false)).unwrap();
        assert!(a.text == b.text, "attention {bm}x{bn}x{d}: the option changed the PTX");
    }
}

/// The decode form (`k_decode_t`: `outᵀ = (W ∘ s)·xᵀ`, the scaled weight
/// tile as A, the tokens loaded along K as a narrow B).
#[test]
fn the_decode_form_takes_wgmma_with_register_a() {
    let px = ptxas::find_or_skip();
    let k = k_decode_t::ir();
    for (bn, bm, bk, warps) in [(64, 16, 64, 4), (128, 16, 128, 8), (64, 32, 64, 4)] {
        let spec = specialize(k, &[bn, bm, bk], &[DType::BF16]).unwrap();
        for on in [true, false] {
            let what = format!("decode_t {bn}x{bm}x{bk} {warps} warps operand_layouts {on}");
            let p = emit(&spec, &opts(k, 90, warps, on, false)).unwrap_or_else(|e| panic!("{what}: {e:?}"));
            let reg_form = p.text.lines().filter(|l| l.contains("wgmma.mma_async") && l.contains("}, {%r")).count();
            let staged: Vec<_> = p.conversions.iter().filter(|(_, w)| w.contains("dot operand A")).collect();
            if on {
                assert!(reg_form > 0 && staged.is_empty(), "{what}: {reg_form} register-A wgmma, {staged:?}");
                // (B's rows in the interleaved K order: `bfi` in the copies)
                assert!(p.text.contains("bfi.b32"), "{what}");
            } else {
                // (without the option the narrow B keeps the dot on mma.sync)
                assert!(!p.text.contains("wgmma.mma_async") && !staged.is_empty(), "{what}");
            }
            if let Some(px) = &px {
                let r = ptxas::assemble(px, &p.text, 90).unwrap_or_else(|log| panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n")));
                assert_eq!(r.spill_stores, 0, "{what}: {} bytes spilled", r.spill_stores);
            }
        }
    }
}
