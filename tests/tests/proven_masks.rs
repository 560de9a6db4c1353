//! `ferrotile_ir::passes::proven_masks`: comparisons `arange < n` that a
//! launch's arguments make all-true are dropped with the selects and masks
//! they fed. Checked here: which bounds a kernel offers (each comparison
//! form), that folding only touches proven comparisons, that the folded
//! layer norm and softmax have no select or masked access left and compute
//! bit-identical results on the CPU interpreter where the bound holds. The
//! conformance suite runs the rewrite too, under `FERROTILE_INTERP_PIPELINE=1`
//! (`conformance_cpu_pipelined`), with each launch's own arguments.

use ferrotile::ir::passes::proven_masks::{bounds, fold};
use ferrotile::ir::{specialize, verify::verify, DType, Kernel, OpKind};
use ferrotile::{bf16, kernel};
use ferrotile_tests::row_interp::{bf16_rows, run_row};

/// Every comparison form, against two arguments (`n` index 2, `m` index 3).
#[kernel]
pub fn forms<const B: i32>(x: Ptr<f32>, y: Ptr<f32>, n: i32, m: i32) {
    let c = arange(0, B);
    let a = n > c;
    let b = c <= m;
    let v = load(x + c, a & b, 0.0);
    store(y + c, select(b, v, 1.0), a);
}

/// (selects, masked loads or stores, comparisons) anywhere in `k`.
fn census(k: &Kernel) -> (usize, usize, usize) {
    let (mut sel, mut masked, mut cmp) = (0, 0, 0);
    k.walk(&mut |op| match &op.kind {
        OpKind::Select { .. } => sel += 1,
        OpKind::Load { mask: Some(_), .. } | OpKind::Store { mask: Some(_), .. } => masked += 1,
        OpKind::Cmp { .. } => cmp += 1,
        _ => {}
    });
    (sel, masked, cmp)
}

#[test]
fn bounds_name_the_argument_and_its_least_value() {
    let k = specialize(forms::ir(), &[64], &[]).unwrap();
    assert_eq!(bounds(&k), vec![(2, 64), (3, 63)], "`n > arange(0, 64)` needs n ≥ 64, `arange <= m` m ≥ 63");
    let ln = specialize(ferrotile_kernels::norm::layer_norm_row::ir(), &[1024], &[DType::BF16]).unwrap();
    assert_eq!(bounds(&ln), vec![(4, 1024)], "layer norm: n_cols ≥ BLOCK");
}

#[test]
fn only_proven_comparisons_are_folded() {
    let k = specialize(forms::ir(), &[64], &[]).unwrap();
    assert!(!fold(&mut k.clone(), &[]), "nothing proven, nothing folded");
    assert!(!fold(&mut k.clone(), &[(2, 63)]), "a bound the kernel does not offer");
    let mut one = k.clone();
    assert!(fold(&mut one, &[(3, 63)]));
    verify(&one).unwrap_or_else(|e| panic!("does not verify: {e:?}\n{}", one.to_text()));
    let (sel, masked, _) = census(&one);
    assert_eq!(sel, 0, "`select(b, ..)` with b proven is its operand:\n{}", one.to_text());
    assert_eq!(masked, 2, "`a & b` is `a`, still a mask for both accesses:\n{}", one.to_text());
    let mut both = k.clone();
    assert!(fold(&mut both, &[(2, 64), (3, 63)]));
    verify(&both).unwrap();
    assert_eq!(census(&both).1, 0, "no masked access left:\n{}", both.to_text());
}

#[test]
fn folded_row_kernels_compute_the_same_bits() {
    use ferrotile_kernels::norm::layer_norm_row;
    use ferrotile_kernels::softmax::softmax_row;
    let mut seed = 0x0bad_cafe_1234_5678u64;
    for (rows, block) in [(3usize, 1024usize), (5, 64)] {
        let cols = block;
        let x = bf16_rows(&mut seed, rows * cols);
        let (w, b) = (bf16_rows(&mut seed, cols), bf16_rows(&mut seed, cols));
        for (name, ln) in [("layer_norm_row", true), ("softmax_row", false)] {
            let ir = if ln { layer_norm_row::ir() } else { softmax_row::ir() };
            let spec = specialize(ir, &[block as i64], &[DType::BF16]).unwrap();
            let mut k = spec.clone();
            // n_cols: argument 4 of the layer norm, 2 of the softmax
            let n_cols = if ln { 4 } else { 2 };
            assert!(fold(&mut k, &[(n_cols, block as i64)]), "{name}: folded");
            verify(&k).unwrap_or_else(|e| panic!("{name} does not verify: {e:?}\n{}", k.to_text()));
            let (sel, masked, _) = census(&k);
            assert_eq!((sel, masked), (0, 0), "{name}: no select or masked access left:\n{}", k.to_text());
            let (want, got) = (run_row(&spec, ln, rows, cols, &x, &w, &b), run_row(&k, ln, rows, cols, &x, &w, &b));
            assert!(want.iter().all(|&v| !bf16::from_bits(v).is_nan()), "{name}: the original left outputs unwritten");
            assert_eq!(got, want, "{name} {rows}x{cols}");
        }
    }
}
