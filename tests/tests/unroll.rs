//! Threaded copies of a pipelined loop body (`PtxOptions::unroll_pipelined`,
//! `emit::control::unroll_copies`): a body carrying a register prefetch
//! chain of `d` tiles is emitted `d + 1` times per trip of the loop, each
//! copy reading the previous one's yields in place, with an exit after
//! each copy whose iteration does not run. The values are checked on the
//! H200 by the CUDA conformance suite and the library tests with
//! `FERROTILE_UNROLL_PIPELINED=1` (benches/NOTES.md, session 36: every
//! trip count, remainders included); here: one copy per tile of the chain
//! and one more, an exit after every copy but the last, and ptxas takes
//! the W4A16 tile without spills on sm_80 and sm_90. The CUDA runtime
//! compiles with the copies and falls back to the plain loop where the
//! driver reports that they use local memory (`PtxKernel::unrolled_loops`).

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use ferrotile_kernels::quant::wq_gemm_kernel;

fn wq_ptx(stages: u32, sm: u32, unroll: bool) -> ferrotile_backends::ptx::PtxKernel {
    let k = wq_gemm_kernel::ir();
    // 16×128×64 tile, W4 group 128, zero points, split K
    let spec = specialize(k, &[16, 128, 64, 4, 128, 1, 1, 0, 0, 0], &[DType::BF16]).unwrap();
    let o = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: stages - 1, unroll_pipelined: unroll, ..PtxOptions::new(sm, 4, k.params.len()) };
    let p = emit(&spec, &o).unwrap();
    if let Some(px) = ptxas::find_or_skip() {
        let r = ptxas::assemble(&px, &p.text, sm).unwrap_or_else(|e| panic!("{stages} stages sm_{sm} unroll {unroll}: {e}"));
        assert_eq!(r.spill_loads + r.spill_stores, 0, "{stages} stages sm_{sm} unroll {unroll}: spills");
    }
    p
}

fn count(text: &str, pat: &str) -> usize {
    text.lines().filter(|l| l.contains(pat)).count()
}

#[test]
fn a_prefetch_chain_of_d_tiles_gives_d_plus_one_copies() {
    for sm in [80, 90] {
        for stages in [2, 3] {
            let (off, on) = (wq_ptx(stages, sm, false), wq_ptx(stages, sm, true));
            // (the runtime keeps a compilation with copies only where the
            // driver reports no more local memory than without: it asks
            // for the plain one where copies were made)
            assert_eq!((off.unrolled_loops, on.unrolled_loops), (0, 1), "sm_{sm} {stages} stages");
            let (off, on) = (off.text, on.text);
            // the step's 16 MMAs (16×128 over 4 warps, 4 k-steps), once
            // per copy
            let (m_off, m_on) = (count(&off, "mma.sync"), count(&on, "mma.sync"));
            assert_eq!(m_off, 16, "sm_{sm} {stages} stages");
            assert_eq!(m_on, 16 * stages as usize, "sm_{sm} {stages} stages: a chain of {} tiles", stages - 1);
            // an exit after each copy but the last, each with its own stub
            // branching to the loop's end
            let exits = on.lines().filter(|l| l.trim_start().starts_with("@!%p") && l.contains("bra.uni")).count();
            assert_eq!(exits, stages as usize - 1, "sm_{sm} {stages} stages");
        }
    }
}

/// The register-operand form of the W4A16 step (`PtxOptions::register_operands`,
/// off by default; benches/NOTES.md, session 38): the B operand's registers
/// run along K (`Blocked::mma_b_operand`), so each packed dequantization
/// pair is a fragment's pair; the device words' fields are paired
/// (`quant::pair_fields`), so each pair is one `lop3` of a shifted word —
/// 32 per 16×128×64 step of 4 warps, and no `prmt` building a pair from
/// two bytes; the zero point's pair is one `prmt` per column, not per pair;
/// and the pipelined `x` tile is carried as 32-bit words
/// (`emit::control`: 16-bit tiles of distinct registers).
#[test]
fn register_operands_dequantize_one_lop3_per_pair() {
    let k = wq_gemm_kernel::ir();
    let spec = specialize(k, &[16, 128, 64, 4, 128, 1, 1, 1, 0, 0], &[DType::BF16]).unwrap();
    let o = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, register_operands: true, ..PtxOptions::new(90, 4, k.params.len()) };
    let p = emit(&spec, &o).unwrap();
    let body = p.text.split("$L1:").nth(1).expect("the K loop");
    let body = &body[..body.find("bra.uni $L1").expect("the back edge")];
    // 64 weights per thread: 32 pairs, a `lop3` each with both halves' mask
    assert_eq!(count(body, ", 983055, 1124090624, 0xEA;"), 32, "paired lop3s");
    assert_eq!(count(body, "mma.sync"), 16);
    // (the zero points' pairs: one splat per column — 4 — and nothing per pair)
    assert!(count(body, "prmt.b32") <= 8, "{} prmt in the step", count(body, "prmt.b32"));
    // (at the back edge, the x tile — 32 halves per thread — moves as 16
    // words; what moves a half at a time is the scales' one per column,
    // through a temporary: 8)
    let tail = &body[body.rfind("mma.sync").unwrap()..];
    assert_eq!(count(tail, "mov.b16"), 8);
    if let Some(px) = ptxas::find_or_skip() {
        let r = ptxas::assemble(&px, &p.text, 90).unwrap();
        assert_eq!(r.spill_loads + r.spill_stores, 0);
    }
}
