//! Column layouts (`ferrotile_backends::ptx::assign::load_columns`,
//! `PtxOptions::column_layouts`): a 2-D tile whose accesses all run along
//! dimension 0 is held as a vector along that dimension per thread, so a
//! column-major matrix loads in vectors (element by element without), and
//! the W4A16 decode form's `xᵀ` (read along K) fills its K-major `wgmma`
//! slot with `cp.async` pieces instead of two-byte loads and stores — and
//! ptxas assembles both, when a ptxas is configured. Also the decode
//! form's loop as the library writes it: the scale on the partial sums,
//! and its 8-bit weights' conversion.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::passes::Safety;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};

fn assembles(text: &str) {
    assembles_spilling(text, false);
}

/// ptxas takes the PTX (and, unless `may_spill`, spills nothing).
fn assembles_spilling(text: &str, may_spill: bool) {
    if let Some(ptxas) = ferrotile_backends::ptxas::find_or_skip() {
        let r = ferrotile_backends::ptxas::assemble(&ptxas, text, 90).unwrap_or_else(|e| panic!("ptxas: {e}"));
        assert!(may_spill || r.spill_stores + r.spill_loads == 0, "{}", r.log);
    }
}

#[test]
fn column_major_tiles_load_in_vectors() {
    let k = ferrotile_tests::conformance::user::k_colmajor::ir();
    for (dt, bm, bn) in [(DType::F32, 64, 32), (DType::BF16, 128, 8)] {
        let spec = specialize(k, &[bm, bn], &[dt]).unwrap();
        for on in [true, false] {
            let o = PtxOptions { arg_div: vec![16; guarded_params(k)], column_layouts: on, ..PtxOptions::new(90, 4, k.params.len()) };
            let p = emit(&spec, &o).unwrap_or_else(|e| panic!("{e:?}"));
            let vectors = p.text.lines().filter(|l| l.contains("ld.global") && (l.contains(".v4") || l.contains(".v2"))).count();
            assert_eq!(vectors > 0, on, "{dt:?} {bm}x{bn}, column layouts {on}: {vectors} vector loads");
            assembles(&p.text);
        }
    }
}

/// The library's decode form (BN × BM × BK, W4 group 128, zero points,
/// split, `EVEN`, bf16) on sm_90 with `warps` warps, as its launch
/// compiles it (unguarded, operand layouts, broadcast slices), column
/// layouts as asked.
fn decode_form(tile: [i64; 3], warps: u32, column_layouts: bool) -> ferrotile_backends::ptx::PtxKernel {
    decode_form_of(tile, warps, column_layouts, (4, 128, 1))
}

/// The decode form with `(bits, group, zero points)`.
fn decode_form_of(tile: [i64; 3], warps: u32, column_layouts: bool, (bits, group, zeros): (i64, i64, i64)) -> ferrotile_backends::ptx::PtxKernel {
    let k = ferrotile_kernels::quant::wq_decode_kernel::ir();
    let spec = specialize(k, &[tile[0], tile[1], tile[2], bits, group, zeros, 1, 1, 0, 0, 0], &[DType::BF16]).unwrap();
    let o = PtxOptions {
        arg_div: vec![16; k.params.len()],
        pipeline: 1,
        safety: Safety::Unchecked,
        operand_layouts: true,
        broadcast_slices: true,
        column_layouts,
        ..PtxOptions::new(90, warps, k.params.len())
    };
    emit(&spec, &o).unwrap_or_else(|e| panic!("{e:?}"))
}

#[test]
fn decode_form_copies_x_in_pieces() {
    for on in [true, false] {
        let p = decode_form([64, 16, 128], 4, on);
        let pieces = p.text.lines().filter(|l| l.contains("cp.async.ca.shared.global") || l.contains("cp.async.cg.shared.global")).count();
        let scattered = p.text.lines().filter(|l| l.contains("st.shared.b16")).count();
        if on {
            assert!(pieces > 0 && scattered == 0, "x's slice copied in pieces: {pieces} cp.async, {scattered} two-byte stores");
        } else {
            assert!(scattered > 0, "without column layouts x's slice goes element by element");
        }
        assembles(&p.text);
    }
}

/// The lines of the first loop of a PTX text, its label to its back edge.
fn loop_body(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let head = lines.iter().position(|l| l.starts_with("$L") && l.ends_with(':')).expect("a loop");
    let label = lines[head].trim_end_matches(':');
    let back = lines.iter().rposition(|l| l.ends_with(&format!("bra.uni {label};"))).expect("its back edge");
    lines[head..back].to_vec()
}

/// Each K step of the decode form is one quantization group: the tensor
/// cores take `q − z`, and the group's scale multiplies the step's f32
/// partial sums — one `fma.rn.f32` per accumulator element a thread holds
/// (64×16 over 128 threads: 8), no multiply per pair of weights in the loop.
#[test]
fn decode_form_scales_the_partial_sums() {
    let p = decode_form([64, 16, 128], 4, true);
    let body = loop_body(&p.text);
    let count = |op: &str| body.iter().filter(|l| l.split_whitespace().next() == Some(op)).count();
    assert_eq!(count("mul.rn.bf16x2"), 0, "no per-weight scale");
    assert_eq!(count("fma.rn.f32"), 8, "the scale on the partial sums");
    assert!(count("sub.rn.bf16x2") >= 32, "q − z per pair of weights");
    assembles(&p.text);
}

/// The 8-bit weights of the decode form (64×16×128 on 4 warps: 64 weights
/// per thread and step), with zero points and without (the W8A16
/// library's per-channel symmetric form): bf16 cannot take an 8-bit field
/// by the 16-bit magic number (`128 + q` needs 9 significant bits), so
/// each weight goes through f32 — its byte picked with 2²³'s exponent
/// above it by one `prmt` (no shift), and `q − z` one f32 subtraction of
/// the two magic forms (or of the constant zero point) before the one
/// rounding to bf16: no packed subtraction after the conversions. ptxas
/// assembles both without spills.
#[test]
fn w8_bytes_convert_in_one_pick_and_one_subtraction() {
    for zeros in [1, 0] {
        let group = if zeros == 1 { 128 } else { 8192 };
        let text = decode_form_of([64, 16, 128], 4, true, (8, group, zeros)).text;
        let body = loop_body(&text);
        let n = |f: &dyn Fn(&str) -> bool| body.iter().filter(|l| f(l)).count();
        let picks = n(&|l| l.starts_with("prmt.b32") && l.contains(", 1258291200, 0x754"));
        assert_eq!(picks, 64, "zeros {zeros}: one byte pick per weight");
        assert_eq!(n(&|l| l.starts_with("sub.rn.bf16x2")), 0, "zeros {zeros}: q − z subtracted in f32");
        assembles(&text);
    }
}

/// A product of two column-major matrices through pointers (the
/// conformance case `colmajor_matmul`, at the tiles its CUDA run takes and
/// one more): on `wgmma`, B in a K-major slot filled by `cp.async`, A
/// staged — except where B's shape `[BK, BN]` is the accumulator's `[BM,
/// BN]` (BK = BM: one layout per shape, the accumulator's, so B is copied
/// element by element); ptxas assembles every tile.
#[test]
fn column_major_operands_take_wgmma() {
    let k = ferrotile_tests::conformance::user::k_colmajor_matmul::ir();
    for (bm, bn, bk, warps) in [(64, 16, 128, 4), (128, 64, 64, 8), (64, 16, 64, 4), (64, 128, 64, 4)] {
        let spec = specialize(k, &[bm, bn, bk], &[DType::BF16]).unwrap();
        // (as the CUDA runtime compiles it: operand layouts on, so a B read
        // along K counts as K-major — `wgmma` at N = 16)
        let o = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, operand_layouts: true, ..PtxOptions::new(90, warps, k.params.len()) };
        let p = emit(&spec, &o).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(p.text.contains("wgmma.mma_async"), "{bm}x{bn}x{bk}: on wgmma");
        assert_eq!(p.text.contains("cp.async.c"), bk != bm, "{bm}x{bn}x{bk}: B by cp.async where its shape is its own");
        // (guarded, the larger accumulators may spill a few bytes)
        assembles_spilling(&p.text, true);
    }
}

/// `FERROTILE_EXPLAIN=1` names the per-shape collision: where the decode
/// form's `xᵀ` (`[BK, BM]`) has the accumulator's shape (`BK = BN`), it is
/// copied element by element, and the explanation says why.
#[test]
fn explain_names_a_ring_copy_that_shares_the_accumulators_shape() {
    for (bk, shared) in [(128, true), (64, false)] {
        let p = decode_form([128, 16, bk], 8, true);
        let said = p.conversions.iter().any(|(_, w)| w.contains("element by element") && w.contains("accumulator's layout"));
        assert_eq!(said, shared, "BK = {bk}: {:?}", p.conversions);
    }
}
