//! `ferrotile_ir::passes::remat_widened`: a tile widened from a 16-bit load
//! and used on both sides of a reduction is recomputed after it, so that
//! only the 16-bit tile (and masks, scalars) stays live across. Checked on
//! the library's row kernels: the structure (no widened value defined
//! before a reduction is read after it), that f32 kernels and kernels
//! without such a value are left alone, and that the rewritten layer norm
//! and softmax compute bit-identical results on the CPU interpreter, on
//! ragged rows (the conformance suite runs it too, under
//! `FERROTILE_INTERP_PIPELINE=1`).

use ferrotile::bf16;
use ferrotile::ir::passes::remat_widened::remat_widened;
use ferrotile::ir::{specialize, verify::verify, DType, Kernel, OpKind, V};
use ferrotile_tests::row_interp::{bf16_rows, run_row};
use std::collections::HashMap;

/// Top-level ops of the kernel body: (index of the first reduction,
/// values defined before it that are f32 tiles and read after it).
fn held_across(k: &Kernel) -> (usize, Vec<V>) {
    let ops = &k.body.ops;
    let first = ops.iter().position(|o| matches!(o.kind, OpKind::Reduce { .. })).expect("a reduction");
    let mut def_at = HashMap::new();
    for (i, o) in ops.iter().enumerate() {
        for r in &o.results {
            def_at.insert(*r, i);
        }
    }
    let mut held = vec![];
    for o in &ops[first + 1..] {
        let mut read = o.kind.operands();
        for r in o.kind.regions() {
            for inner in &r.ops {
                read.extend(inner.kind.operands());
            }
        }
        for v in read {
            let ty = k.ty(v);
            if def_at.get(&v).is_some_and(|&d| d < first) && ty.rank() > 0 && ty.dtype() == Some(DType::F32) && !held.contains(&v) {
                held.push(v);
            }
        }
    }
    (first, held)
}

/// Cast ops anywhere in `k`.
fn casts(k: &Kernel) -> usize {
    let mut n = 0;
    k.walk(&mut |op| n += matches!(op.kind, OpKind::Cast { .. }) as usize);
    n
}

/// Whether a splat of a scalar defines `v` (one register, not a tile of values).
fn is_splat(k: &Kernel, v: V) -> bool {
    let mut found = false;
    k.walk(&mut |op| found |= op.results.contains(&v) && matches!(op.kind, OpKind::Splat { .. }));
    found
}

#[test]
fn widened_rows_are_recomputed_after_the_reduction() {
    use ferrotile_kernels::norm::{layer_norm_row, rms_norm_row};
    use ferrotile_kernels::softmax::softmax_row;
    for (name, ir) in [("layer_norm_row", layer_norm_row::ir()), ("rms_norm_row", rms_norm_row::ir()), ("softmax_row", softmax_row::ir())] {
        let spec = specialize(ir, &[1024], &[DType::BF16]).unwrap();
        let (_, before) = held_across(&spec);
        let before: Vec<V> = before.into_iter().filter(|&v| !is_splat(&spec, v)).collect();
        assert!(!before.is_empty(), "{name}: the bf16 row widened to f32 is read after the reduction:\n{}", spec.to_text());
        let mut k = spec.clone();
        assert!(remat_widened(&mut k, 1), "{name}: rewritten");
        verify(&k).unwrap_or_else(|e| panic!("{name} does not verify: {e:?}\n{}", k.to_text()));
        let (_, after) = held_across(&k);
        let after: Vec<V> = after.into_iter().filter(|&v| !is_splat(&k, v)).collect();
        assert!(after.is_empty(), "{name}: f32 tiles still held across the first reduction: {after:?}\n{}", k.to_text());
        assert!(casts(&k) > casts(&spec), "{name}: the widening is recomputed");
        // nothing left to do a second time
        let mut again = k.clone();
        assert!(!remat_widened(&mut again, 1), "{name}: a second run changes nothing");
        // f32 rows: the value held is the load itself, nothing narrower to keep
        let mut f = specialize(ir, &[1024], &[DType::F32]).unwrap();
        assert!(!remat_widened(&mut f, 1), "{name} f32: left alone");
    }
}

#[test]
fn few_values_per_thread_are_left_alone() {
    use ferrotile::ir::passes::remat_widened::MIN_PER_THREAD;
    let spec = specialize(ferrotile_kernels::norm::layer_norm_row::ir(), &[1024], &[DType::BF16]).unwrap();
    let at = |threads: u32| remat_widened(&mut spec.clone(), threads);
    let edge = (1024 / MIN_PER_THREAD) as u32;
    assert!(at(edge), "{MIN_PER_THREAD} values per thread: rewritten");
    assert!(!at(edge * 2), "{} values per thread: left alone", MIN_PER_THREAD / 2);
}

#[test]
fn kernels_without_a_reduction_are_left_alone() {
    let g = ferrotile_kernels::gemm::gemm_kernel::ir();
    let mut k = specialize(g, &[32, 16, 16, 2, 0, 0, 0, 0], &[DType::BF16, DType::F32]).unwrap();
    assert!(!remat_widened(&mut k, 1), "the GEMM has no reduction");
}

#[test]
fn rewritten_row_kernels_compute_the_same_bits() {
    use ferrotile_kernels::norm::layer_norm_row;
    use ferrotile_kernels::softmax::softmax_row;
    let mut rng = 0x1234_5678_9abc_def0u64;
    for (rows, cols, block) in [(3usize, 1000usize, 1024i64), (2, 70, 128), (4, 64, 64)] {
        let x = bf16_rows(&mut rng, rows * cols);
        let w = bf16_rows(&mut rng, cols);
        let b = bf16_rows(&mut rng, cols);
        for (name, ln) in [("layer_norm_row", true), ("softmax_row", false)] {
            let ir = if ln { layer_norm_row::ir() } else { softmax_row::ir() };
            let spec = specialize(ir, &[block], &[DType::BF16]).unwrap();
            let mut k = spec.clone();
            assert!(remat_widened(&mut k, 1), "{name} rewritten");
            let (want, got) = (run_row(&spec, ln, rows, cols, &x, &w, &b), run_row(&k, ln, rows, cols, &x, &w, &b));
            assert!(want.iter().all(|&v| !bf16::from_bits(v).is_nan()), "{name}: the original left outputs unwritten");
            assert_eq!(got, want, "{name} {rows}x{cols} (block {block})");
        }
    }
}
