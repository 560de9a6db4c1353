//! Warp specialization (`ptx/warp_spec.rs`): which kernels get a producer
//! warp for their bulk copies, and what each stream of the emitted PTX
//! holds. A view GEMM whose block coordinates are scalar functions of the
//! program id is split (`num_warps + 1` warps, the copies only in the
//! producer's stream); the same GEMM with its row block read from memory
//! (a load on the producer's path) is not, and still assembles as one
//! stream; a kernel with `warp_specialize: false` is never split.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use ferrotile_tests::gemm_interp::unit_strides;

/// A warp-specialized kernel's two streams: the consumers' (from the
/// branch past them to the producer's label) and the producer's (from its
/// label on).
fn streams(t: &str) -> (&str, &str) {
    let at = t.find("bra.uni $L1;").expect("a warp-specialized kernel");
    t[at..].split_at(t[at..].find("$L1:").expect("the producer's label"))
}

/// A view GEMM; with `GATHER` its row block is read from memory (a load on
/// the producer's path), without it a scalar function of the program id.
#[ferrotile::kernel]
fn ws_gemm<T: Float, const BM: i32, const BN: i32, const BK: i32, const GATHER: bool>(
    a: Ptr<T>,
    b: Ptr<T>,
    c: Ptr<f32>,
    blocks: Ptr<i32>,
    m: i32,
    n: i32,
    k: i32,
    lda: i32,
    ldb: i32,
    ldc: i32,
) {
    let mut pm = program_id(0) * BM;
    if GATHER {
        pm = load(blocks + program_id(0)) * BM;
    }
    let pn = program_id(1) * BN;
    let va = view(a, [m, k], [lda, 1]);
    let vb = view(b, [k, n], [ldb, 1]);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        acc = dot(load_block(va, [pm, k0], [BM, BK]), load_block(vb, [k0, pn], [BK, BN]), acc);
    }
    let vc = view(c, [m, n], [ldc, 1]);
    store_block(vc, [pm, pn], acc);
}

#[test]
fn producer_warp_only_where_its_slice_is_scalar() {
    let px = ptxas::find_or_skip();
    let k = ws_gemm::ir();
    for (gather, split) in [(0, true), (1, false)] {
        let spec = specialize(k, &[128, 128, 64, gather], &[DType::BF16]).unwrap();
        for ws in [false, true] {
            let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, warp_specialize: ws, ..PtxOptions::new(90, 8, k.params.len()) };
            let p = emit(&spec, &opts).unwrap();
            let t = &p.text;
            let what = format!("gather {gather}, warp_specialize {ws}");
            assert_eq!(p.tensor_maps.len(), 2, "{what}: both operands by TMA");
            let specialized = ws && split;
            assert_eq!(p.threads, if specialized { 384 } else { 256 }, "{what}");
            // (empty mbarriers count the consumer warps)
            assert_eq!(t.contains("], 8;"), specialized, "{what}");
            if specialized {
                let (consumers, producer) = streams(t);
                assert!(
                    !consumers.contains("cp.async.bulk.tensor") && producer.contains("cp.async.bulk.tensor"),
                    "{what}: copies in the producer's stream only"
                );
                assert!(consumers.contains("mbarrier.arrive.shared::cta.b64") && !consumers.contains("bar.sync 0;"), "{what}");
            } else {
                assert!(!t.contains("mbarrier.arrive.shared::cta.b64"), "{what}: one stream, no empty mbarriers");
            }
            if let Some(px) = &px {
                if let Err(log) = ptxas::assemble(px, t, 90) {
                    panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"));
                }
            }
        }
    }
}

/// Attention's inner loop: two dots per iteration, K (through a transposed
/// view) and V by bulk copies, the first dot's accumulator fresh each
/// iteration, the second's carried; the output store after the loop.
#[ferrotile::kernel]
fn ws_attention<T: Float, const BM: i32, const BN: i32, const D: i32>(q: Ptr<T>, k: Ptr<T>, v: Ptr<T>, o: Ptr<T>, n: i32, ld: i32) {
    let pm = program_id(0) * BM;
    let vq = view(q, [n, D], [ld, 1]);
    let vkt = view(k, [D, n], [1, ld]);
    let vv = view(v, [n, D], [ld, 1]);
    let qt = load_block(vq, [pm, 0], [BM, D]);
    let mut m_i = full([BM], f32::NEG_INFINITY, f32);
    let mut l_i = zeros([BM], f32);
    let mut acc = zeros([BM, D], f32);
    for j in (0..n).step_by(BN) {
        let s = dot(qt, load_block(vkt, [0, j], [D, BN]), zeros([BM, BN], f32));
        let m_new = maximum(m_i, max(s, axis = 1));
        let p = exp(s - expand_dims(m_new, 1));
        let alpha = exp(m_i - m_new);
        l_i = l_i * alpha + sum(p, 1);
        acc = dot(p as T, load_block(vv, [j, 0], [BN, D]), acc * expand_dims(alpha, 1));
        m_i = m_new;
    }
    let vo = view(o, [n, D], [ld, 1]);
    store_block(vo, [pm, 0], (acc / expand_dims(l_i, 1)) as T);
}

/// The general mechanism on a kernel that is not a GEMM: with and without
/// the producer warp, for several tilings, the attention loop compiles and
/// assembles; where it is split, the consumers' loop holds no CTA barrier
/// tied to the copies (the producer issues every copy) and the producer
/// runs no tile op.
#[test]
fn attention_loop_splits_and_assembles() {
    let px = ptxas::find_or_skip();
    let k = ws_attention::ir();
    for (bm, bn, d, warps) in [(64, 64, 64, 4), (128, 64, 64, 8), (128, 128, 64, 8)] {
        let spec = specialize(k, &[bm, bn, d], &[DType::BF16]).unwrap();
        for (ws, stages) in [(false, 2), (true, 2), (true, 3)] {
            let opts =
                PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: stages - 1, warp_specialize: ws, ..PtxOptions::new(90, warps, k.params.len()) };
            let p = emit(&spec, &opts).unwrap_or_else(|e| panic!("{bm}x{bn}x{d} ws {ws}: {e:?}"));
            let t = &p.text;
            let what = format!(
                "attention {bm}x{bn}x{d} {warps} warps, stages {stages}, warp_specialize {ws}: {} bulk-copy views, {} threads",
                p.tensor_maps.len(),
                p.threads
            );
            println!("{what}");
            if p.threads > warps * 32 {
                let (consumers, producer) = streams(t);
                assert!(!consumers.contains("cp.async.bulk.tensor") && producer.contains("cp.async.bulk.tensor"), "{what}");
                assert!(
                    !producer.contains("wgmma") && !producer.contains("ex2") && !producer.contains("st.global") && !producer.contains("bar.sync"),
                    "{what}: the producer only copies"
                );
            }
            if let Some(px) = &px {
                match ptxas::assemble(px, t, 90) {
                    Ok(r) => println!("  {} regs, {} B spills", r.registers, r.spill_loads + r.spill_stores),
                    Err(log) => panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n")),
                }
            }
        }
    }
}

/// The attention loop rotated by the compiler (`rotate_chains`: the
/// previous block's `P·V` issued after this block's `Q·K_jᵀ`) sits in an
/// `if lo < hi` guard with its prologue's and epilogue's copies: the
/// producer follows the branch (it evaluates the guard itself) and keeps
/// every copy, so the rotated loop runs with its producer warpgroup as the
/// source-order loop does. More copy sites than in source order (the
/// prologue's K, the epilogue's V), all in the producer's stream; the
/// producer branches on the guard (`@!p bra.uni`, which the source-order
/// producer has none of), and the consumers step the same rings without
/// copying. Assembles.
#[test]
fn rotated_loop_keeps_its_producer() {
    let px = ptxas::find_or_skip();
    let k = ws_attention::ir();
    for (bm, bn, d, warps) in [(128, 128, 64, 8), (128, 64, 128, 8), (64, 64, 64, 4)] {
        let spec = specialize(k, &[bm, bn, d], &[DType::BF16]).unwrap();
        let mut source_sites = 0;
        for rotate in [false, true] {
            let opts = PtxOptions {
                arg_div: vec![16; guarded_params(k)],
                pipeline: 1,
                warp_specialize: true,
                rotate_chains: rotate,
                ..PtxOptions::new(90, warps, k.params.len())
            };
            let p = emit(&spec, &opts).unwrap_or_else(|e| panic!("{bm}x{bn}x{d} rotate {rotate}: {e:?}"));
            let what = format!("attention {bm}x{bn}x{d} {warps} warps, rotate {rotate}");
            assert_eq!(p.rotated_loops, rotate as u32, "{what}");
            assert_eq!(p.threads, (warps + 4) * 32, "{what}: the producer warpgroup");
            let t = &p.text;
            let (consumers, producer) = streams(t);
            assert!(!consumers.contains("cp.async.bulk.tensor"), "{what}: the consumers copy nothing");
            assert!(!producer.contains("wgmma") && !producer.contains("ex2") && !producer.contains("st.global"), "{what}: the producer only copies");
            let sites = producer.matches("mbarrier.arrive.expect_tx").count();
            println!("{what}: {sites} copy sites in the producer's stream");
            if rotate {
                assert!(sites > source_sites, "{what}: the prologue's and epilogue's copies in the producer's stream too");
            }
            source_sites = sites;
            let guard = producer.lines().any(|l| l.trim_start().starts_with("@!%p") && l.contains("bra.uni"));
            assert_eq!(guard, rotate, "{what}: the producer branches on the guard");
            if let Some(px) = &px {
                match ptxas::assemble(px, t, 90) {
                    Ok(r) => println!("{what}: {} regs, {} B spills", r.registers, r.spill_loads + r.spill_stores),
                    Err(log) => panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n")),
                }
            }
        }
    }
}

/// A GEMM whose B tile is chosen in a branch: the tile the `dot` reads is
/// the `if`'s result, filled in one branch or the other.
#[ferrotile::kernel]
fn ws_branch_tile<T: Float, const BM: i32, const BN: i32, const BK: i32>(
    a: Ptr<T>,
    b: Ptr<T>,
    c: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
    lda: i32,
    ldb: i32,
    ldc: i32,
    flip: i32,
) {
    let pm = program_id(0) * BM;
    let pn = program_id(1) * BN;
    let va = view(a, [m, k], [lda, 1]);
    let vb = view(b, [k, n], [ldb, 1]);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (0..k).step_by(BK) {
        let mut bt = load_block(vb, [k0, pn], [BK, BN]);
        if flip > 0 {
            bt = load_block(vb, [k0, 0], [BK, BN]);
        }
        acc = dot(load_block(va, [pm, k0], [BM, BK]), bt, acc);
    }
    let vc = view(c, [m, n], [ldc, 1]);
    store_block(vc, [pm, pn], acc);
}

/// A tile chosen in a branch (yielded out of an `if`) takes no ring: its
/// fill would be conditional where its readers' releases are not (the
/// async-copy plan leaves it to the consumers' own loads, and `warp_spec`
/// would refuse the split if one did). A's copies still go to the producer.
/// It assembles.
#[test]
fn a_tile_chosen_in_a_branch_is_not_copied() {
    let px = ptxas::find_or_skip();
    let k = ws_branch_tile::ir();
    let spec = specialize(k, &[128, 128, 64], &[DType::BF16]).unwrap();
    let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, warp_specialize: true, ..PtxOptions::new(90, 8, k.params.len()) };
    let p = emit(&spec, &opts).unwrap();
    assert_eq!(p.tensor_maps.len(), 1, "A by TMA, B by the consumers' loads");
    assert_eq!(p.threads, 384, "the producer warpgroup for A");
    let t = &p.text;
    let (consumers, producer) = streams(t);
    assert!(!consumers.contains("cp.async.bulk.tensor") && producer.contains("cp.async.bulk.tensor"));
    assert!(consumers.contains("ld.global") && !producer.contains("ld.global"), "B loaded by the consumers");
    if let Some(px) = &px {
        if let Err(log) = ptxas::assemble(px, t, 90) {
            panic!("ptxas: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"));
        }
    }
}

/// Attention written with FlashAttention-3's intra-warpgroup overlap: key
/// block 0 peeled off, the loop issues `Q·K_jᵀ` then the previous block's
/// `P·V`, the last `P·V` after the loop. Q and the peeled K/V are loaded
/// outside every loop.
#[ferrotile::kernel]
fn ws_attention_ov<T: Float, const BM: i32, const BN: i32, const D: i32>(q: Ptr<T>, k: Ptr<T>, v: Ptr<T>, o: Ptr<T>, n: i32, ld: i32) {
    let pm = program_id(0) * BM;
    let vq = view(q, [n, D], [ld, 1]);
    let vkt = view(k, [D, n], [1, ld]);
    let vv = view(v, [n, D], [ld, 1]);
    let qt = load_block(vq, [pm, 0], [BM, D]);
    let s0 = dot(qt, load_block(vkt, [0, 0], [D, BN]), zeros([BM, BN], f32));
    let mut m_i = max(s0, axis = 1);
    let p0 = exp(s0 - expand_dims(m_i, 1));
    let mut l_i = sum(p0, 1);
    let mut pt = p0 as T;
    let mut acc = zeros([BM, D], f32);
    for j in (BN..n).step_by(BN) {
        let s = dot(qt, load_block(vkt, [0, j], [D, BN]), zeros([BM, BN], f32));
        acc = dot(pt, load_block(vv, [j - BN, 0], [BN, D]), acc);
        let m_new = maximum(m_i, max(s, axis = 1));
        let p = exp(s - expand_dims(m_new, 1));
        let alpha = exp(m_i - m_new);
        l_i = l_i * alpha + sum(p, 1);
        pt = p as T;
        acc = acc * expand_dims(alpha, 1);
        m_i = m_new;
    }
    acc = dot(pt, load_block(vv, [maximum(0, (n - 1) / BN * BN), 0], [BN, D]), acc);
    let vo = view(o, [n, D], [ld, 1]);
    store_block(vo, [pm, 0], (acc / expand_dims(l_i, 1)) as T);
}

/// The overlapped attention loop with a producer warpgroup, 4 and 8
/// consumer warps: the consumers' `wgmma` waits are deferred as in one
/// stream (`Q·K_jᵀ` waited for with `wait_group 1`, under the previous
/// block's `P·V`), and every slot is released once per fill
/// (`ws_release_plan`) — K and V once per iteration, after the wait for the
/// MMA that read them; Q (filled once, read by every iteration's first
/// `dot`) never: an arrival per reading would complete phases of its empty
/// mbarrier that nobody waits for (compute-sanitizer's synccheck: "missing
/// wait"). With `defer_wgmma_waits: false` every MMA is waited for at once
/// and the releases follow each wait. All of it assembles.
#[test]
fn consumers_defer_waits_and_release_once_per_fill() {
    let px = ptxas::find_or_skip();
    let k = ws_attention_ov::ir();
    let spec = specialize(k, &[128, 128, 64], &[DType::BF16]).unwrap();
    for (warps, defer) in [(8, true), (4, true), (8, false)] {
        let opts = PtxOptions {
            arg_div: vec![16; guarded_params(k)],
            pipeline: 1,
            warp_specialize: true,
            defer_wgmma_waits: defer,
            ..PtxOptions::new(90, warps, k.params.len())
        };
        let p = emit(&spec, &opts).unwrap_or_else(|e| panic!("{warps} warps, defer {defer}: {e:?}"));
        let t = &p.text;
        let what = format!("{warps} warps, defer {defer}");
        assert!(p.threads > warps * 32, "{what}: warp-specialized");
        let (consumers, _) = streams(t);
        // the loop body: between the branch past the loop and its back edge
        let loops: Vec<&str> = consumers.split("bra.uni $L").collect();
        let body = loops.iter().find(|b| b.matches("wgmma.commit_group").count() == 2).unwrap_or_else(|| panic!("{what}: a loop body with both MMAs"));
        let commits: Vec<usize> = body.match_indices("wgmma.commit_group").map(|(i, _)| i).collect();
        let waits: Vec<usize> = body.match_indices("wgmma.wait_group").map(|(i, _)| i).collect();
        if defer {
            assert!(waits[0] > commits[1] && body.contains("wgmma.wait_group.sync.aligned 1;"), "{what}: Q·Kᵀ waited for under P·V");
        } else {
            assert!(waits[0] < commits[1], "{what}: each MMA waited for at once");
        }
        // (a consumer's arrival on an empty mbarrier; the producer's are
        // `arrive.expect_tx`)
        let releases: Vec<usize> = body.match_indices("mbarrier.arrive.shared::cta.b64 %rd").map(|(i, _)| i).collect();
        assert_eq!(releases.len(), 2, "{what}: K and V released once per iteration, Q never");
        assert!(releases.iter().all(|r| *r > waits[0]), "{what}: released after a wait");
        if let Some(px) = &px {
            if let Err(log) = ptxas::assemble(px, t, 90) {
                panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"));
            }
        }
    }
}

/// Clusters of 2 (`PtxOptions::cluster`) on the library's swapped decode
/// GEMM (the kernel's A is Bᵀ, its B is Aᵀ with one N tile): the Aᵀ tiles
/// are the same in both programs of a cluster (`GROUP_M = 0`: their block
/// coordinates do not depend on the program id), so their bulk copies are
/// multicast — each program issues every other column atom to both, the
/// slot's empty mbarrier counts both programs' consumer warps, and each
/// consumer release also arrives on the other program's mbarrier (`mapa`);
/// both programs sync as a cluster after the mbarrier initialization and
/// before leaving. Bᵀ's tiles (program-dependent) stay per program. With
/// grouped ordering (`GROUP_M = 8`: Aᵀ's coordinates depend on the program
/// id) or `cluster: 1`, nothing is clustered. Without `warp_specialize`
/// the multicast runs from one stream: no producer warpgroup, no empty
/// mbarriers, each refill after a cluster barrier (relaxed arrive) instead
/// of the CTA's. All assemble for sm_90a.
#[test]
fn clusters_multicast_only_uniform_tiles() {
    let px = ptxas::find_or_skip();
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    // (the swapped product of row-major operands: unit strides sam, sbk, scm)
    let one = unit_strides(k, true);
    for (group_m, cluster, bk, want, ws) in [
        (0, 2, 128, true, true),
        (0, 2, 128, true, false),
        (0, 2, 256, true, true),
        (8, 2, 128, false, true),
        (8, 2, 128, false, false),
        (0, 1, 128, false, true),
    ] {
        let spec = specialize(k, &[64, 16, bk, group_m, 0, 0, 0, 1], &[DType::BF16, DType::BF16]).unwrap();
        let opts = PtxOptions {
            arg_div: vec![16; guarded_params(k)],
            arg_one: one.clone(),
            pipeline: 3,
            warp_specialize: ws,
            cluster,
            ..PtxOptions::new(90, 4, k.params.len())
        };
        let p = emit(&spec, &opts).unwrap();
        let t = &p.text;
        let what = format!("GROUP_M = {group_m}, cluster {cluster}, BK = {bk}, warp_specialize {ws}");
        assert_eq!(p.threads, if ws { 256 } else { 128 }, "{what}: the producer warpgroup where asked");
        assert_eq!(p.tensor_maps.len(), 2, "{what}");
        assert_eq!(t.contains(".reqnctapercluster 2, 1, 1"), want, "{what}");
        let mc = t.lines().filter(|l| l.contains("cp.async.bulk.tensor") && l.contains(".multicast::cluster")).count();
        let plain = t.lines().filter(|l| l.contains("cp.async.bulk.tensor") && !l.contains(".multicast::cluster")).count();
        if want && ws {
            // Aᵀ: BK/64 atoms per fill, one predicated copy each; Bᵀ: plain
            assert!(mc > 0 && plain > 0 && mc % (bk as usize / 64) == 0, "{what}: {mc} multicast, {plain} plain copies");
            assert!(t.contains("], 8;") && t.contains("], 4;"), "{what}: empty mbarriers of 2 × 4 and 4 consumer warps");
            assert!(t.contains("mapa.shared::cluster.u32") && t.contains("mbarrier.arrive.shared::cluster.b64 _,"), "{what}: remote releases");
            assert_eq!(t.matches("barrier.cluster.arrive").count(), 2, "{what}: cluster syncs after init and before leaving");
            assert!(t.contains("%cluster_ctarank"), "{what}");
        } else if want {
            assert!(mc > 0 && plain > 0 && mc % (bk as usize / 64) == 0, "{what}: {mc} multicast, {plain} plain copies");
            assert!(!t.contains("mapa") && !t.contains("], 8;") && !t.contains("mbarrier.arrive.shared"), "{what}: no empty mbarriers, no remote releases");
            // the K loop: its slot-reuse barrier is the cluster's
            let (body, _) = t.split_at(t.find("wgmma.wait_group.sync.aligned 1;").expect("in-flight MMAs"));
            let top = body.rfind("barrier.cluster.arrive.relaxed.aligned;").expect("a cluster barrier in the loop");
            assert!(!body[top..].contains("bar.sync"), "{what}: no CTA barrier in the loop");
            assert!(body[top..].find("cp.async.bulk.tensor").unwrap() < body[top..].find("mbarrier.try_wait").unwrap(), "{what}: refill before the wait");
            assert!(t.contains("%cluster_ctarank"), "{what}");
            assert!(
                t.contains("barrier.cluster.arrive.release.aligned;") && t.contains("barrier.cluster.arrive.release;"),
                "{what}: cluster syncs after init and before leaving"
            );
        } else {
            assert!(mc == 0 && !t.contains("mapa") && !t.contains("barrier.cluster") && !t.contains("], 8;"), "{what}: not clustered");
        }
        if let Some(px) = &px {
            match ptxas::assemble(px, t, 90) {
                Ok(r) => assert_eq!(r.spill_loads + r.spill_stores, 0, "{what}: spills"),
                Err(log) => panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n")),
            }
        }
    }
}

/// One stream (no producer warpgroup): in the K loop's body every refill
/// is issued after the slot-reuse barrier and before the wait for the
/// iteration's own tile — while a program waits, all slots but the one it
/// reads are being filled — and the loop body holds exactly one refill per
/// ring (A's box and B's box); thread 0 prefetches each tensor map once.
/// Deep rings stay rings (a prefetch distance of 11: 13 slots of 32 KB;
/// the runtime, not the emitter, holds them to the device's limit).
#[test]
fn one_stream_refills_before_waiting() {
    let px = ptxas::find_or_skip();
    let k = ws_gemm::ir();
    let spec = specialize(k, &[128, 128, 64, 0], &[DType::BF16]).unwrap();
    for pipeline in [1, 2, 3, 11] {
        let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline, ..PtxOptions::new(90, 8, k.params.len()) };
        let p = emit(&spec, &opts).unwrap();
        let t = &p.text;
        assert!(p.smem_bytes >= (pipeline + 2) * 32768, "pipeline {pipeline}: {} bytes of rings", p.smem_bytes);
        assert_eq!(t.matches("prefetch.tensormap").count(), 2, "pipeline {pipeline}");
        // the loop body: from the loop's barrier to its back edge
        let body_end = t.find("wgmma.wait_group.sync.aligned 1;").expect("MMAs in flight across the back edge");
        let body_start = t[..body_end].rfind("bar.sync 0;").expect("the slot-reuse barrier");
        let body = &t[body_start..body_end];
        let (copy, wait, mma) = (body.find("cp.async.bulk.tensor").unwrap(), body.find("mbarrier.try_wait").unwrap(), body.find("wgmma.mma_async").unwrap());
        assert!(copy < wait && wait < mma, "pipeline {pipeline}: refill, then wait, then MMAs");
        assert!(!body[wait..].contains("cp.async.bulk.tensor"), "pipeline {pipeline}: no copy after the wait");
        assert_eq!(body.matches("mbarrier.arrive.expect_tx").count(), 2, "pipeline {pipeline}: one refill per ring");
        if let Some(px) = &px {
            if let Err(log) = ptxas::assemble(px, t, 90) {
                panic!("ptxas, pipeline {pipeline}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"));
            }
        }
    }
}
