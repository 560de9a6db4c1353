//! Masks under a uniform branch (`ferrotile_ir::passes::branch_masks`):
//! the attention forward's key-bound and causal selects move into a branch
//! on the key-block index, with the comparisons they need recomputed there
//! (and nothing else: loads, `dot`s and reductions stay at the top of the
//! loop); a GEMM's K loop, whose masks feed loads, is left alone; and the
//! library's attention, run on the CPU interpreter after the GPU's
//! rewrites (this pass included), matches f64 on ragged shapes — causal,
//! windowed, plain — where both branches run.

use ferrotile::ir::passes::branch_masks::branch_masks;
use ferrotile::ir::{specialize, verify::verify, DType, Kernel, OpKind};
use ferrotile::Device;
use ferrotile_kernels::attention::{attention, AttentionConfig, AttentionOptions, AttentionProblem};
use ferrotile_kernels::reference::{attention_sampled_err, Rng};
use half::bf16;

/// Per `for` op in walk order: its body's top-level (selects, compares, ifs).
fn loops(k: &Kernel) -> Vec<(usize, usize, usize)> {
    let mut out = vec![];
    k.walk(&mut |op| {
        if let OpKind::For { body, .. } = &op.kind {
            let n = |f: fn(&OpKind) -> bool| body.ops.iter().filter(|o| f(&o.kind)).count();
            out.push((n(|k| matches!(k, OpKind::Select { .. })), n(|k| matches!(k, OpKind::Cmp { .. })), n(|k| matches!(k, OpKind::If { .. }))));
        }
    });
    out
}

#[test]
fn attention_selects_go_under_a_branch() {
    let f = ferrotile_kernels::attention::attention_fwd_overlap::ir();
    // BM, BN, DP, G, MASK_HI (causal), MASK_LO, LSE, FOLD
    for (mask_hi, mask_lo, selects) in [(0, 0, 1), (1, 0, 2), (1, 1, 2)] {
        let spec = specialize(f, &[64, 32, 64, 1, mask_hi, mask_lo, 1, 1], &[DType::BF16]).unwrap();
        let mut b = spec.clone();
        assert!(branch_masks(&mut b), "MASK_HI {mask_hi}: the key loop's selects qualify:\n{}", spec.to_text());
        verify(&b).unwrap_or_else(|e| panic!("does not verify: {e:?}\n{}", b.to_text()));
        let (before, after) = (loops(&spec), loops(&b));
        assert_eq!(before.len(), 1, "one key loop");
        assert_eq!(after.len(), 1, "still one loop");
        assert_eq!(before[0].2, 0);
        assert_eq!(after[0].0 + selects, before[0].0, "{selects} selects leave the top of the body: {before:?} → {after:?}");
        assert_eq!(after[0].2, selects, "one branch per select");
        // the dots, loads and reductions are where they were
        let tops = |k: &Kernel| {
            let mut n = 0;
            k.walk(&mut |op| {
                if let OpKind::For { body, .. } = &op.kind {
                    n = body
                        .ops
                        .iter()
                        .filter(|o| matches!(o.kind, OpKind::Dot { .. } | OpKind::LoadBlock { .. } | OpKind::Load { .. } | OpKind::Reduce { .. }))
                        .count();
                }
            });
            n
        };
        assert_eq!(tops(&b), tops(&spec));
    }
}

#[test]
fn gemm_loops_are_left_alone() {
    let g = ferrotile_kernels::gemm::gemm_kernel::ir();
    let spec = specialize(g, &[32, 16, 16, 2, 0, 0, 0, 0], &[DType::BF16, DType::F32]).unwrap();
    let mut b = spec.clone();
    assert!(!branch_masks(&mut b), "a GEMM's masks feed loads, not selects");
    assert_eq!(b, spec);
}

#[test]
fn attention_on_the_interpreter_after_the_gpu_rewrites() {
    // before any launch: the flag is read once per process
    std::env::set_var("FERROTILE_INTERP_PIPELINE", "1");
    let dev = Device::cpu();
    let mut rng = Rng::new(0xb7a5_c0de);
    // (ragged lengths: the last key block is partial; seqlen_q ≠ seqlen_k
    // moves the causal diagonal; a window masks the first blocks too)
    for (sq, sk, causal, window) in
        [(45, 77, false, (None, None)), (77, 45, true, (None, None)), (50, 100, true, (Some(20), None)), (33, 64, false, (Some(9), Some(5)))]
    {
        for overlap in [false, true] {
            let p = AttentionProblem::bhsd(1, 2, 1, sq, sk, 64);
            let n = |s: usize, h: usize| h * s * 64;
            let gen = |rng: &mut Rng, len: usize| -> Vec<bf16> { (0..len).map(|_| bf16::from_f64(rng.normal())).collect() };
            let (qh, kh, vh) = (gen(&mut rng, n(sq, 2)), gen(&mut rng, n(sk, 1)), gen(&mut rng, n(sk, 1)));
            let (q, k, v) = (dev.from_slice(&qh).unwrap(), dev.from_slice(&kh).unwrap(), dev.from_slice(&vh).unwrap());
            let mut out = dev.from_slice(&vec![bf16::NAN; n(sq, 2)]).unwrap();
            // two stages: the interpreter runs the pipelined loop with its masks under a branch
            let config =
                AttentionConfig { bm: 16, bn: 16, num_warps: 4, num_stages: 2, split_masks: false, overlap, warp_specialize: false, rotate_chains: false };
            let opts = AttentionOptions { causal, window, config: Some(config), ..Default::default() };
            attention(&dev, &q, &k, &v, &mut out, None, &p, &opts).unwrap();
            let got = out.to_vec().unwrap();
            let scale = 1.0 / 8.0;
            let err = attention_sampled_err(&qh, &kh, &vh, &got, &p, &mut rng, 40, scale, window.0, if causal { Some(0) } else { window.1 });
            assert!(err < 1e-2, "{sq}x{sk} causal {causal} window {window:?} overlap {overlap}: error {err}");
        }
    }
}
