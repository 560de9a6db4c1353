//! Which loads the PTX backend turns into `cp.async` ring copies
//! (`backends/src/ptx/async_copy.rs`) — and which it must not: a ring copy
//! zero-fills masked-off elements and hands the tile only to the tensor
//! cores, so a load with another fill value, or one whose tile is also used
//! in registers, has to stay an ordinary load. Checked on the emitted PTX
//! for sm_90 at 1–3 stages (no GPU needed; the GEMM tests run the ring path
//! on the H200).

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::specialize;
use ferrotile::kernel;
use ferrotile_backends::ptx::{emit, PtxOptions};

// Tiles: A 64×256, B 256×128, C 64×128 — three different shapes, since
// layouts are assigned per shape and an operand tile of the accumulator's
// shape would get its 2-element-wide layout (see NOTES.md).

/// A 64×128 tile GEMM over `n` K-steps of 256, row-major, unmasked: both
/// operand loads feed only the `dot` → both become ring copies.
#[kernel]
fn ring_both(a: Ptr<bf16>, b: Ptr<bf16>, c: Ptr<f32>, n: i32) {
    let rm = arange(0, 64);
    let rn = arange(0, 128);
    let rk = arange(0, 256);
    let mut acc = zeros([64, 128], f32);
    for k in 0..n {
        let at = load(a + k * 256 + expand_dims(rm, 1) * (n * 256) + expand_dims(rk, 0));
        let bt = load(b + (k * 256 + expand_dims(rk, 1)) * 128 + expand_dims(rn, 0));
        acc = dot(at, bt, acc);
    }
    store(c + expand_dims(rm, 1) * 128 + expand_dims(rn, 0), acc);
}

/// A's masked-off elements read as 1.0: a zero-filling copy would be wrong,
/// so A stays an ordinary load (staged through registers); B is a ring copy.
#[kernel]
fn fill_one(a: Ptr<bf16>, b: Ptr<bf16>, c: Ptr<f32>, n: i32, kmax: i32) {
    let rm = arange(0, 64);
    let rn = arange(0, 128);
    let mut acc = zeros([64, 128], f32);
    for k in 0..n {
        let kk = k * 256 + arange(0, 256);
        let at = load(a + expand_dims(rm, 1) * (n * 256) + expand_dims(kk, 0), expand_dims(kk < kmax, 0), 1.0);
        let bt = load(b + expand_dims(kk, 1) * 128 + expand_dims(rn, 0));
        acc = dot(at, bt, acc);
    }
    store(c + expand_dims(rm, 1) * 128 + expand_dims(rn, 0), acc);
}

/// A's tile is also summed in registers: it must stay a register tile.
#[kernel]
fn used_twice(a: Ptr<bf16>, b: Ptr<bf16>, c: Ptr<f32>, s: Ptr<f32>, n: i32) {
    let rm = arange(0, 64);
    let rn = arange(0, 128);
    let rk = arange(0, 256);
    let mut acc = zeros([64, 128], f32);
    let mut tot = zeros([64], f32);
    for k in 0..n {
        let at = load(a + k * 256 + expand_dims(rm, 1) * (n * 256) + expand_dims(rk, 0));
        let bt = load(b + (k * 256 + expand_dims(rk, 1)) * 128 + expand_dims(rn, 0));
        acc = dot(at, bt, acc);
        tot = tot + (at as f32).sum(1);
    }
    store(c + expand_dims(rm, 1) * 128 + expand_dims(rn, 0), acc);
    store(s + rm, tot);
}

fn ptx(k: &ferrotile::ir::Kernel, stages: u32) -> String {
    let spec = specialize(k, &[], &[]).unwrap();
    let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: stages - 1, warp_specialize: true, ..PtxOptions::new(90, 4, k.params.len()) };
    emit(&spec, &opts).unwrap_or_else(|e| panic!("{}: {e}", k.name)).text
}

/// 16-byte copies per thread at 4 warps (per load execution in the text:
/// prologue and body): A 64·256·2 / 16 / 128 = 16, B 256·128·2 / 16 / 128 = 32.
const COPIES_A: usize = 16;
const COPIES_B: usize = 32;

#[test]
fn ring_copies_only_where_zero_fill_and_single_use_allow() {
    for stages in [1, 2, 3] {
        let both = ptx(ring_both::ir(), stages);
        let one = ptx(fill_one::ir(), stages);
        let twice = ptx(used_twice::ir(), stages);
        for (name, t) in [("ring_both", &both), ("fill_one", &one), ("used_twice", &twice)] {
            assert!(t.contains("wgmma.mma_async"), "{name} stages {stages}: a 64x128x256 bf16 dot at 4 warps takes wgmma");
        }
        // executions of each operand load in the text: the body's, plus the
        // prologue's `stages - 1` when pipelined
        let loads = stages as usize;
        let copies = |t: &str| t.matches("cp.async.cg.shared.global").count();
        assert_eq!(copies(&both), loads * (COPIES_A + COPIES_B), "ring_both stages {stages}: A and B by cp.async");
        assert_eq!(copies(&one), loads * COPIES_B, "fill_one stages {stages}: only B by cp.async (A fills with 1.0)");
        assert_eq!(copies(&twice), loads * COPIES_B, "used_twice stages {stages}: only B by cp.async (A is also summed)");
        assert!(one.contains("ld.global"), "fill_one: A is an ordinary load");
    }
}

/// A user's GEMM as the tutorials write it: masked pointer loads of
/// 128×64 and 64×128 bf16 tiles, 8 warps.
#[kernel]
fn gemm_128<const BK: i32>(a: Ptr<bf16>, b: Ptr<bf16>, c: Ptr<f32>, m: i32, n: i32, k: i32) {
    let rm = program_id(0) * 128 + arange(0, 128);
    let rn = program_id(1) * 128 + arange(0, 128);
    let mut acc = zeros([128, 128], f32);
    for k0 in (0..k).step_by(BK) {
        let kk = k0 + arange(0, BK);
        let ta = load(a + expand_dims(rm, 1) * k + expand_dims(kk, 0), expand_dims(rm < m, 1) & expand_dims(kk < k, 0), 0.0);
        let tb = load(b + expand_dims(kk, 1) * n + expand_dims(rn, 0), expand_dims(kk < k, 1) & expand_dims(rn < n, 0), 0.0);
        acc = dot(ta, tb, acc);
    }
    store(c + expand_dims(rm, 1) * n + expand_dims(rn, 0), acc, expand_dims(rm < m, 1) & expand_dims(rn < n, 0));
}

/// `async_copy::late_prefetch`: with its MMA in flight, the 128×128×64 ring
/// GEMM's rings would take 4 slots of 32 KB at 3 stages — one program per
/// SM. The copies then follow the MMA (after its wait for the previous
/// iteration's MMA and a barrier) and refill that MMA's slots: 3 slots, 96
/// KB, two programs per SM. At BK = 32 (64 KB with the extra slot: already
/// three per SM) nothing changes. ptxas accepts every variant.
#[test]
fn late_prefetch_drops_the_extra_slot_where_it_costs_occupancy() {
    let px = ferrotile_backends::ptxas::find_or_skip();
    let k = gemm_128::ir();
    let emit_at = |bk: i64, late: bool| {
        let spec = specialize(k, &[bk], &[]).unwrap();
        let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, late_prefetch: late, ..PtxOptions::new(90, 8, k.params.len()) };
        emit(&spec, &opts).unwrap()
    };
    let bk32 = emit_at(32, false).smem_bytes;
    for (bk, late, want_smem) in [(64, true, 96 * 1024), (64, false, 128 * 1024), (32, true, bk32)] {
        let p = emit_at(bk, late);
        assert_eq!(p.smem_bytes, want_smem, "BK={bk} late_prefetch={late}");
        let body = &p.text[p.text.find("$L1:").unwrap()..p.text.find("$L2:").unwrap()];
        let copy = body.find("cp.async.cg.shared.global").expect("the loop's copies");
        let after = body.find("wgmma.wait_group.sync.aligned").filter(|&w| w < copy);
        assert_eq!(after.is_some(), late && bk == 64, "BK={bk} late_prefetch={late}: the loop's copies after the MMA's wait");
        if let Some(w) = after {
            assert!(body[w..copy].contains("wait_group.sync.aligned 1"), "the MMA stays in flight");
            assert!(body[w..copy].contains("bar.sync"), "a barrier between the wait and the copies that refill its slots");
        }
        if let Some(px) = &px {
            ferrotile_backends::ptxas::assemble(px, &p.text, 90).unwrap_or_else(|e| panic!("BK={bk}: {e}"));
        }
    }
}

/// The swizzled slot offset of each ring copy (`wgmma_offset`: a shift, a
/// `bfe`, the row's `xor` and three multiply-adds of the thread's indices)
/// is a function of the thread alone: computed once, before the loop, and
/// each copy inside the loop only adds the slot's base (`wgmma_addr`'s
/// root and immediate). At 128×128×64, 8 warps: 4 copies of A and 4 of B
/// per thread and iteration.
#[test]
fn ring_copies_add_only_the_slot_base_in_the_loop() {
    let k = gemm_128::ir();
    let spec = specialize(k, &[64], &[]).unwrap();
    let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, ..PtxOptions::new(90, 8, k.params.len()) };
    let p = emit(&spec, &opts).unwrap();
    let (l1, l2) = (p.text.find("$L1:").unwrap(), p.text.find("$L2:").unwrap());
    let body = &p.text[l1..l2];
    assert_eq!(body.matches("cp.async.cg.shared.global").count(), 8, "the loop's copies");
    assert!(!body.contains("xor.b32"), "no swizzle computed in the loop:\n{body}");
    // (the roots before the loop; copies 8 rows or whole atoms apart share
    // one and write the difference as an address immediate)
    assert!(p.text[..l1].contains("xor.b32"), "the roots are computed before the loop");
    let with_imm = body.lines().filter(|l| l.contains("cp.async.cg.shared.global [%r") && l.split(']').next().unwrap().contains('+')).count();
    assert!(with_imm >= 6, "copies sharing a root, apart by immediates: {with_imm} of 8");
}

/// The loop body around the first `wgmma` of `ptx`: from the label its
/// back edge jumps to, through that back edge.
fn wgmma_loop_body(ptx: &str) -> &str {
    let fence = ptx.find("wgmma.fence").expect("a wgmma");
    let mut at = fence;
    while let Some(i) = ptx[at..].find("bra.uni $L") {
        let j = at + i + "bra.uni ".len();
        let label = &ptx[j..j + ptx[j..].find(';').unwrap()];
        if let Some(h) = ptx[..fence].rfind(&format!("\n{label}:")) {
            return &ptx[h..j];
        }
        at = j;
    }
    panic!("no loop around the first wgmma");
}

/// `k_norm_matmul` (bf16, 128×128×64) as the CUDA runtime compiles it on 8
/// warps at 3 stages (operand layouts, late prefetch), with `tweak`'s
/// options on top.
fn norm_matmul_ptx(tweak: impl FnOnce(PtxOptions) -> PtxOptions) -> ferrotile_backends::ptx::PtxKernel {
    let k = ferrotile_tests::conformance::fused::k_norm_matmul::ir();
    let spec = specialize(k, &[128, 128, 64], &[ferrotile::ir::DType::BF16]).unwrap();
    let base =
        PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, operand_layouts: true, late_prefetch: true, ..PtxOptions::new(90, 8, k.params.len()) };
    emit(&spec, &tweak(base)).unwrap()
}

/// ptxas (where present) assembles `text` for sm_90a without spills and
/// without serializing its `wgmma`s.
fn assembles_clean(px: Option<&std::path::Path>, text: &str, what: &str) {
    if let Some(px) = px {
        let r = ferrotile_backends::ptxas::assemble(px, text, 90).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!((r.spill_stores, r.spill_loads), (0, 0), "{what}: spills\n{}", r.log);
        assert!(!r.log.contains("serialized"), "{what}: ptxas serialized the MMAs\n{}", r.log);
    }
}

/// `async_copy::register_a_inflight` (`PtxOptions::inflight_register_a`):
/// RMSNorm fused into a GEMM (`k_norm_matmul`, 128×128×64 on 8 warps, 3
/// stages) computes A in registers; with the option its MMA stays in
/// flight across the back edge. In the loop: one wait for the previous
/// MMA (all groups) before the MMAs, none after the commit; after the
/// loop, a wait before the accumulator is read; B's ring one slot (16 KB)
/// larger. Without it the MMA is waited for inside its iteration. ptxas
/// takes both without spills and without serializing the MMAs (its
/// "wgmma.mma_async instructions are serialized" report: registers of an
/// in-flight MMA written before its wait).
#[test]
fn register_a_mma_stays_in_flight_across_the_back_edge() {
    let px = ferrotile_backends::ptxas::find_or_skip();
    let emit_with = |on: bool| norm_matmul_ptx(|o| PtxOptions { inflight_register_a: on, ..o });
    let (off, on) = (emit_with(false), emit_with(true));
    assert_eq!(on.smem_bytes, off.smem_bytes + 64 * 128 * 2, "one more slot of B");
    // (planned in flight, but A staged after all — register A off: the MMA
    // reads the scratch the next iteration restages, so it is waited for
    // inside its iteration, as without the option)
    let staged = norm_matmul_ptx(|o| PtxOptions { inflight_register_a: true, register_a: false, ..o });
    let body = wgmma_loop_body(&staged.text);
    let commit = body.rfind("wgmma.commit_group").unwrap();
    assert!(body[commit..].contains("wgmma.wait_group"), "a staged A: waited for inside the iteration");
    if let Some(px) = &px {
        ferrotile_backends::ptxas::assemble(px, &staged.text, 90).unwrap_or_else(|e| panic!("staged: {e}"));
    }
    for (p, flight) in [(&off, false), (&on, true)] {
        let body = wgmma_loop_body(&p.text);
        let (fence, commit) = (body.find("wgmma.fence").unwrap(), body.rfind("wgmma.commit_group").unwrap());
        assert!(body.contains("wgmma.mma_async"), "the loop's MMAs");
        assert!(!body[..fence].contains("wgmma.wait_group") || flight, "a wait before the MMAs only in flight");
        if flight {
            assert!(body[..fence].contains("wgmma.wait_group.sync.aligned 0;"), "the previous MMA waited for before A is packed");
            assert!(!body[commit..].contains("wgmma.wait_group"), "no wait after the commit: in flight across the back edge");
            let after = &p.text[p.text.find(body).unwrap() + body.len()..];
            let wait = after.find("wgmma.wait_group.sync.aligned 0;").expect("a wait after the loop");
            assert!(after[..wait].lines().count() < 60, "the wait right after the loop, before the epilogue reads the accumulator");
        } else {
            assert!(body[commit..].contains("wgmma.wait_group"), "waited for inside the iteration");
        }
        assembles_clean(px.as_deref(), &p.text, &format!("in flight {flight}"));
    }
}

/// `PtxOptions::unroll_wgmma`: `k_norm_matmul`'s second loop (its next `x`
/// tile prefetched in registers two iterations ahead, its `dot` a `wgmma`
/// with A from registers and B from a `cp.async` ring) takes three
/// threaded copies of its body per trip, each with its own MMAs — with
/// the register-A MMA in flight, each copy's wait comes before its pack,
/// and none follows a commit (each copy waits for every group before its
/// pack: ptxas serializes every `wgmma` of a kernel where a copy leaves
/// the previous copy's group pending while it writes its own A — its
/// analysis does not follow the group counts across copies —, tried
/// offline). ptxas takes it without spills or serialization. (Offline,
/// sm_90a: 340 → 286 SASS per step, the prefetched tile's 32 copies at
/// the back edge gone.)
#[test]
fn wgmma_loop_bodies_take_threaded_copies() {
    let px = ferrotile_backends::ptxas::find_or_skip();
    let emit_with = |copies: bool| norm_matmul_ptx(|o| PtxOptions { inflight_register_a: true, unroll_pipelined: true, unroll_wgmma: copies, ..o });
    for copies in [false, true] {
        let p = emit_with(copies);
        let body = wgmma_loop_body(&p.text);
        let n = if copies { 3 } else { 1 };
        assert_eq!(body.matches("wgmma.commit_group").count(), n, "copies {copies}: each copy's MMAs");
        // every commit is followed by the next copy's wait before its
        // fence, or by the back edge
        for (i, c) in body.match_indices("wgmma.commit_group") {
            let next = body[i + c.len()..].find("wgmma.").map(|j| &body[i + c.len() + j..]);
            assert!(next.is_none_or(|r| r.starts_with("wgmma.wait_group.sync.aligned 0;")), "copies {copies}: a commit followed by the next copy's wait");
        }
        assembles_clean(px.as_deref(), &p.text, &format!("copies {copies}"));
    }
}
