//! Index-set splitting (`ferrotile_ir::passes::split_masks`) preserves
//! semantics: the library GEMM, split (and then pipelined), computes
//! bit-identical results on the CPU interpreter for K that is not a
//! multiple of the block, K below one block, K = 0 and split-K ranges; the
//! attention forward's key mask and causal diagonal are split off (its
//! equivalence: the library's attention tests on CUDA over the tuner's
//! `SPLIT` candidates; the interpreter runs it where a launch asks, or with
//! `FERROTILE_SPLIT_MASKS=1`); loops whose comparisons do not have the pass's form
//! are left alone.

use ferrotile::bf16;
use ferrotile::ir::passes::{pipeline::pipeline_depth, split_masks::split_masks};
use ferrotile::ir::{specialize, verify::verify, DType, Kernel, OpKind};
use ferrotile_tests::gemm_interp::run;

/// Per `for` op in walk order: (ops in its body that are `select`s, `cmp`s).
fn loops(k: &Kernel) -> Vec<(usize, usize)> {
    let mut out = vec![];
    k.walk(&mut |op| {
        if let OpKind::For { body, .. } = &op.kind {
            let sel = body.ops.iter().filter(|o| matches!(o.kind, OpKind::Select { .. })).count();
            let cmp = body.ops.iter().filter(|o| matches!(o.kind, OpKind::Cmp { .. })).count();
            out.push((sel, cmp));
        }
    });
    out
}

#[test]
fn split_gemm_matches_the_original() {
    let g = ferrotile_kernels::gemm::gemm_kernel::ir();
    let (bm, bn, bk) = (32usize, 16usize, 16usize);
    let spec = specialize(g, &[bm as i64, bn as i64, bk as i64, 2, 0, 0, 0, 0], &[DType::BF16, DType::F32]).unwrap();
    let mut split = spec.clone();
    assert!(split_masks(&mut split), "the K loop's `kk < k` masks qualify:\n{}", spec.to_text());
    verify(&split).unwrap_or_else(|e| panic!("does not verify: {e:?}\n{}", split.to_text()));
    let (before, after) = (loops(&spec), loops(&split));
    assert_eq!((before.len(), after.len()), (1, 2), "one loop becomes two:\n{}", split.to_text());
    assert!(after[0].1 < after[1].1, "the first loop compares less: {after:?}\n{}", split.to_text());
    assert_eq!(after[1], before[0], "the second loop is the original body");
    let mut piped = split.clone();
    pipeline_depth(&mut piped, 2);
    verify(&piped).unwrap_or_else(|e| panic!("split + pipelined does not verify: {e:?}\n{}", piped.to_text()));
    let mut rnd = ferrotile_tests::gemm_interp::bf16_stream(0x5eed_1234);
    for (m, n, kk) in [(45, 37, 29), (32, 16, 16), (7, 9, 5), (33, 17, 0), (50, 20, 48), (20, 20, 33), (50, 20, 80)] {
        let a: Vec<bf16> = (0..m * kk).map(|_| rnd()).collect();
        let b: Vec<bf16> = (0..kk * n).map(|_| rnd()).collect();
        for (splits, k_split) in [(1, kk), (3, 2 * bk), (2, bk + 3)] {
            let want = run(&spec, m, n, kk, bm, bn, &a, &b, splits, k_split);
            assert!(want.iter().all(|v| v.is_finite()), "reference left unwritten outputs");
            for (what, k) in [("split", &split), ("split + pipelined", &piped)] {
                let got = run(k, m, n, kk, bm, bn, &a, &b, splits, k_split);
                assert_eq!(
                    got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "{what}: {m}x{n}x{kk}, {splits} splits of {k_split}"
                );
            }
        }
    }
}

/// The attention forward: the key mask `cols < nk` (and, causal, the
/// diagonal `cols <= rows + off`) are gone from the first loop's selects.
#[test]
fn attention_masks_are_split_off() {
    let f = ferrotile_kernels::attention::attention_fwd::ir();
    // (BM, BN, DP, G, MASK_HI, MASK_LO, LSE, FOLD): plain, causal, causal + window
    for (cx, masks) in [([128i64, 64, 64, 1, 0, 0, 0, 1], 1usize), ([128, 64, 64, 4, 1, 0, 1, 0], 2), ([64, 64, 128, 1, 1, 1, 0, 1], 2)] {
        let spec = specialize(f, &cx, &[DType::BF16]).unwrap();
        let mut split = spec.clone();
        assert!(split_masks(&mut split), "{cx:?}");
        verify(&split).unwrap_or_else(|e| panic!("{cx:?} does not verify: {e:?}"));
        let (before, after) = (loops(&spec), loops(&split));
        assert_eq!(after.len(), 2, "{cx:?}");
        assert_eq!(after[1], before[0], "{cx:?}: the second loop is the original body");
        assert_eq!(before[0].0 - after[0].0, masks, "{cx:?}: the masks' selects leave the first loop");
    }
}

/// A comparison of a value read inside the loop, or of `2·iv`, is not
/// known to hold on a prefix of the iterations: nothing is split.
#[ferrotile::kernel]
fn unsplittable(x: Ptr<f32>, idx: Ptr<i32>, y: Ptr<f32>, n: i32) {
    let r = arange(0, 16);
    let mut acc = zeros([16, 16], f32);
    for i in 0..n {
        let t = load(x + i * 256 + expand_dims(r, 1) * 16 + expand_dims(r, 0));
        let lim = load(idx + i);
        let t = select(expand_dims(r, 0) < lim, t, 0.0);
        let t = select(expand_dims(i * 2 + r, 0) < n, t, 0.0);
        acc = dot_tf32(t, t, acc);
    }
    store(y + expand_dims(r, 1) * 16 + expand_dims(r, 0), acc);
}

#[test]
fn other_comparisons_are_left_alone() {
    let spec = specialize(unsplittable::ir(), &[], &[]).unwrap();
    let mut k = spec.clone();
    assert!(!split_masks(&mut k));
    assert_eq!(k, spec);
}
