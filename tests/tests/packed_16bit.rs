//! Packed 16-bit arithmetic in the PTX printer (`PtxOptions::packed_16bit`)
//! and register operands for `mma.sync` (`PtxOptions::register_operands`),
//! on the library's W4A16 kernel: what the printer emits for its
//! dequantization `((q as T) − (z as T)) · s`, that the unpack's shifts are
//! immediates, and that ptxas takes all of it on sm_80 and sm_90. The values
//! are checked on the GPU by the CUDA conformance suite (f16/bf16 float
//! ops, casts) and the quantized-GEMM tests over every tuner candidate; on
//! the CPU interpreter and lavapipe by the same tests.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use ferrotile_kernels::quant::wq_gemm_kernel;

fn wq_ptx(dt: DType, bits: i64, sm: u32, f: impl Fn(PtxOptions) -> PtxOptions) -> String {
    let k = wq_gemm_kernel::ir();
    // 16×128×64 tile, group 128, zero points, split K, masked (not `EVEN`)
    let spec = specialize(k, &[16, 128, 64, bits, 128, 1, 1, 0, 0, 0], &[dt]).unwrap();
    let o = f(PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, ..PtxOptions::new(sm, 4, k.params.len()) });
    let p = emit(&spec, &o).unwrap();
    if let Some(px) = ptxas::find_or_skip() {
        let r = ptxas::assemble(&px, &p.text, sm).unwrap_or_else(|e| panic!("{dt:?} W{bits} sm_{sm}: {e}"));
        // (as the CUDA runtime does: where the offsets taken from 32-bit
        // registers tip ptxas into spilling — W8 f16 here, 8 bytes — the
        // compilation without them runs)
        if r.spill_loads + r.spill_stores > 0 && p.wide_offsets > 0 {
            let plain = emit(&spec, &PtxOptions { wide_offsets: false, ..o }).unwrap();
            let r = ptxas::assemble(&px, &plain.text, sm).unwrap_or_else(|e| panic!("{dt:?} W{bits} sm_{sm}: {e}"));
            assert_eq!(r.spill_loads + r.spill_stores, 0, "{dt:?} W{bits} sm_{sm}: spills without wide offsets");
        } else {
            assert_eq!(r.spill_loads + r.spill_stores, 0, "{dt:?} W{bits} sm_{sm}: spills");
        }
    }
    p.text
}

fn count(text: &str, pat: &str) -> usize {
    text.lines().filter(|l| l.contains(pat)).count()
}

/// Two weights per instruction: the 4-bit fields of a pair picked by one
/// `prmt` and turned into floats by one `lop3` with the magic exponent;
/// `q − z` subtracts the magic words (no separate subtraction of the magic
/// number for either), and `· s` multiplies pairs. Turned off, every
/// weight goes through f32 one at a time.
#[test]
fn w4_dequantization_runs_in_pairs() {
    for (dt, ty, magic) in [(DType::BF16, "bf16x2", "1124090624"), (DType::F16, "f16x2", "1677747200")] {
        let on = wq_ptx(dt, 4, 90, |o| o);
        let (sub, mul) = (count(&on, &format!("sub.rn.{ty}")), count(&on, &format!("mul.rn.{ty}")));
        // 16×128×64 tile over 128 threads: 64 weights (32 pairs) per
        // thread and K step, three steps in the text (two prologue loads
        // are not dequantized there: the loop body's and the epilogue's)
        assert!(mul >= 32 && mul.is_multiple_of(32), "{dt:?}: {mul} packed multiplies");
        // q − z subtracts the words the two conversions OR-ed the magic
        // exponent into (`lop3 …, magic, 0xEA`): the magic numbers cancel
        // (the conversions' own subtractions are left unused, for ptxas to drop)
        let lop3: Vec<&str> = on.lines().filter(|l| l.contains(&format!(", {magic}, 0xEA;"))).collect();
        assert!(lop3.len() >= 32, "{dt:?}: the magic exponent is not OR-ed in by lop3 per pair");
        // (words of the zero points, converted without a mask: `or.b32`)
        let magic_words: std::collections::HashSet<&str> = lop3
            .iter()
            .filter_map(|l| l.trim().strip_prefix("lop3.b32 ")?.split(',').next())
            .chain(
                on.lines()
                    .filter(|l| l.trim().starts_with("or.b32") && l.contains(&format!(", {magic};")))
                    .filter_map(|l| l.trim().strip_prefix("or.b32 ")?.split(',').next()),
            )
            .collect();
        let cancelled = on
            .lines()
            .filter_map(|l| l.trim().strip_prefix(&format!("sub.rn.{ty} ")))
            .filter(|ops| ops.trim_end_matches(';').split(", ").skip(1).all(|r| magic_words.contains(r)))
            .count();
        assert!(cancelled >= 32 && sub >= cancelled, "{dt:?}: {cancelled} of {sub} packed subtractions take two magic words");
        assert!(count(&on, "prmt.b32") >= 32, "{dt:?}");
        // the shifts that unpack the words are immediates (`k0` is a
        // multiple of 8: `(k0 + arange) & 7` is a constant per register)
        let var_shift = on
            .lines()
            .filter(|l| l.trim_start().starts_with("shr.s32") && l.trim_end().ends_with(';') && l.contains(", %r") && l.matches("%r").count() == 3)
            .count();
        assert_eq!(var_shift, 0, "{dt:?}: shifts by a register remain");
        let off = wq_ptx(dt, 4, 90, |o| PtxOptions { packed_16bit: false, ..o });
        assert_eq!(count(&off, ty), 0, "{dt:?}: packed ops with packed_16bit off");
    }
    // sm_80: bf16x2 add / sub / mul are sm_90; fma.rn.bf16x2 is sm_80
    let old = wq_ptx(DType::BF16, 4, 80, |o| o);
    assert_eq!(count(&old, "sub.rn.bf16x2") + count(&old, "mul.rn.bf16x2"), 0);
    assert!(count(&old, "fma.rn.bf16x2") >= 32);
    // 8-bit weights: bf16 cannot hold 128 + q for q ≥ 128 (the pair
    // conversion is f16 only), the products still pair up
    let w8 = wq_ptx(DType::BF16, 8, 90, |o| o);
    assert!(count(&w8, "mul.rn.bf16x2") >= 32);
    let w8h = wq_ptx(DType::F16, 8, 90, |o| o);
    assert!(count(&w8h, "sub.rn.f16x2") >= 32 && count(&w8h, ", 1677747200, 0xEA;") >= 32);
}

/// With register operands, the 16-row tile's dequantized B (computed by
/// the one warp along M that holds it) and x feed `mma.sync` from their
/// registers, K interleaved: no `ldmatrix`, no shared memory, no barrier
/// in the kernel; by default B is staged.
#[test]
fn register_operands_skip_shared_memory() {
    for sm in [80, 90] {
        let on = wq_ptx(DType::BF16, 4, sm, |o| PtxOptions { register_operands: true, ..o });
        assert!(count(&on, "mma.sync.aligned.m16n8k16") >= 16, "sm_{sm}");
        for what in ["ldmatrix", "st.shared", "bar.sync", "cp.async"] {
            assert_eq!(count(&on, what), 0, "sm_{sm}: {what} with register operands");
        }
        let off = wq_ptx(DType::BF16, 4, sm, |o| o);
        assert!(count(&off, "ldmatrix") > 0 && count(&off, "st.shared") > 0, "sm_{sm}: B is staged by default");
    }
}
