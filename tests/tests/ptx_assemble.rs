//! Every library kernel, specialized for a spread of block sizes, dtypes and
//! warp counts, is emitted as PTX and assembled with ptxas for sm_80 and
//! sm_90. Fails on any emission or ptxas error; prints registers and spills.
//! Without ptxas (see scripts/install-ptxas.sh) it reports
//! "skipped: no ptxas" — loudly, never silently passing.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::assign::wgmma_grid;
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use ferrotile_tests::gemm_interp::unit_strides;

/// Every kernel specialization the op conformance suite launches
/// (captured on the CPU interpreter, as `golden.rs` and `wgsl_validate.rs`
/// capture them), compiled as a launch compiles it — guarded, 4 warps —
/// assembles for sm_80 and sm_90a: the golden digests pin the text, this
/// pins that ptxas accepts it (a negative shared-memory displacement
/// spelled `[r-4]` once passed every other check and failed on the GPU).
#[test]
fn conformance_kernels_assemble() {
    use ferrotile::ir::Kernel;
    use std::sync::{Arc, Mutex};
    let Some(px) = ptxas::find_or_skip() else { return };
    let specs: Arc<Mutex<Vec<Kernel>>> = Arc::default();
    let s2 = specs.clone();
    ferrotile::runtime::set_specialization_observer(move |k| s2.lock().unwrap().push(k.clone()));
    let dev = ferrotile::Device::cpu();
    for c in ferrotile_tests::conformance::cases() {
        // outcomes are checked by conformance_cpu; here only the kernels count
        let _ = ferrotile_tests::conformance::run_case(&c, &dev, 7);
    }
    let mut specs = specs.lock().unwrap().clone();
    specs.dedup_by(|a, b| a == b);
    assert!(specs.len() >= 20, "too few specializations captured: {}", specs.len());
    let mut failures = vec![];
    let mut n = 0;
    for k in &specs {
        for sm in [80, 90] {
            let o = PtxOptions { arg_div: vec![1; guarded_params(k)], ..PtxOptions::new(sm, 4, k.params.len()) };
            let what = format!("{} [{}] sm_{sm}", k.name, k.describe_binding());
            match emit(k, &o) {
                // (a clear refusal is the conformance suite's business)
                Err(_) => {}
                Ok(p) => {
                    n += 1;
                    if let Err(e) = ptxas::assemble(&px, &p.text, sm) {
                        failures.push(format!("{what}: {}", e.lines().take(4).collect::<Vec<_>>().join(" | ")));
                    }
                }
            }
        }
    }
    println!("{n} conformance PTX modules assembled");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn library_kernels_assemble_for_sm80_and_sm90() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let mut failures = vec![];
    println!("{:<20} {:<5} {:>6} {:>5} {:>4} {:>5} {:>7} {:>7}", "kernel", "dtype", "BLOCK", "warps", "sm", "regs", "spill", "smem");
    for (k, blocks) in ferrotile_kernels::row_kernels() {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            for &b in &blocks {
                let spec = specialize(k, &[b], &[dt]).unwrap();
                let warps = ((b / 512).clamp(1, 16)) as u32;
                for div16 in [false, true] {
                    for sm in [80, 90] {
                        let opts = PtxOptions {
                            arg_div: vec![if div16 { 16 } else { 1 }; guarded_params(k)],
                            pipeline: 1,
                            warp_specialize: true,
                            ..PtxOptions::new(sm, warps, k.params.len())
                        };
                        let ptx = match emit(&spec, &opts) {
                            Ok(p) => p,
                            Err(e) => {
                                failures.push(format!("{} {dt} BLOCK={b}: emit: {e}", k.name));
                                continue;
                            }
                        };
                        match ptxas::assemble(&px, &ptx.text, sm) {
                            Ok(r) => {
                                if div16 {
                                    println!(
                                        "{:<20} {:<5} {:>6} {:>5} {:>4} {:>5} {:>7} {:>7}",
                                        k.name,
                                        dt.to_string(),
                                        b,
                                        warps,
                                        sm,
                                        r.registers,
                                        r.spill_stores + r.spill_loads,
                                        ptx.smem_bytes
                                    );
                                }
                            }
                            Err(log) => {
                                let path = std::env::temp_dir().join(format!("ferrotile-fail-{}-{b}-{dt}-sm{sm}.ptx", k.name));
                                let _ = std::fs::write(&path, &ptx.text);
                                failures.push(format!(
                                    "{} {dt} BLOCK={b} sm_{sm}: ptxas failed (PTX in {}):\n{}",
                                    k.name,
                                    path.display(),
                                    log.lines().take(8).collect::<Vec<_>>().join("\n")
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn gemm_kernel_assembles_for_sm80_and_sm90() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    let mut failures = vec![];
    // constexprs: BM, BN, BK, GROUP_M, ACT, HAS_BIAS, TF32, VIEWS
    let cases: &[(DType, DType, [i64; 8])] = &[
        (DType::F32, DType::F32, [64, 64, 32, 8, 0, 0, 0, 0]),
        (DType::F32, DType::F32, [64, 64, 32, 8, 1, 1, 1, 0]),
        (DType::BF16, DType::BF16, [64, 64, 32, 8, 2, 1, 0, 0]),
        (DType::F16, DType::F32, [32, 64, 16, 4, 0, 0, 0, 0]),
        (DType::BF16, DType::F32, [16, 16, 16, 1, 1, 0, 0, 0]),
        // tensor-core configurations (mma.sync)
        (DType::BF16, DType::BF16, [128, 128, 32, 8, 0, 0, 0, 0]),
        (DType::F16, DType::F16, [128, 128, 64, 8, 0, 1, 0, 0]),
        // warpgroup MMAs on sm_90 (K in whole 64-element swizzle atoms)
        (DType::BF16, DType::BF16, [64, 256, 64, 8, 0, 0, 0, 0]),
        (DType::BF16, DType::F32, [64, 128, 128, 8, 1, 1, 0, 0]),
        (DType::F32, DType::F32, [128, 128, 32, 8, 0, 0, 1, 0]),
    ];
    for (t, u, cx) in cases {
        let spec = specialize(k, cx, &[*t, *u]).unwrap();
        for sm in [80, 90] {
            // tensor-core configurations as launched on row-major operands
            // (unit strides sak and sbn: vectorized operand loads)
            let tc = cx[0] >= 64 && cx[2] >= 32;
            let one: Vec<bool> = unit_strides(k, false).into_iter().map(|u| tc && u).collect();
            let opts =
                PtxOptions { arg_div: vec![16; guarded_params(k)], arg_one: one, pipeline: 1, warp_specialize: true, ..PtxOptions::new(sm, 4, k.params.len()) };
            match emit(&spec, &opts) {
                Err(e) => failures.push(format!("emit {t}->{u} {cx:?}: {e}")),
                // every configuration above has f16/bf16 inputs or tf32 and
                // whole 16x8 tiles per warp: its dot must run on tensor cores
                Ok(p) if (*t != DType::F32 || cx[6] == 1) && cx[0] >= 32 && !p.text.contains("mma.sync") && !p.text.contains("wgmma.mma_async") => {
                    failures.push(format!("gemm {t}->{u} {cx:?}: dot did not take a tensor-core path"))
                }
                // on sm_90, f16/bf16 and tf32 dots whose shapes fit take
                // wgmma (sm_90a)
                Ok(p) if sm == 90 && (*t != DType::F32 || cx[6] == 1) && wgmma_grid(cx[0] as u32, cx[1] as u32, cx[2] as u32, 4, t.size_bytes() as u32, false).is_some() && !(p.text.contains("wgmma.mma_async") && p.text.contains(".target sm_90a")) => {
                    failures.push(format!("gemm {t}->{u} {cx:?}: expected wgmma on sm_90a"))
                }
                Ok(p) if sm == 80 && p.text.contains("wgmma") => failures.push(format!("gemm {t}->{u} {cx:?}: wgmma on sm_80")),
                // FERROTILE_EXPLAIN says why a tensor-core dot is not on
                // wgmma on sm_90, and says nothing when it is
                Ok(p) if sm == 90 && (*t != DType::F32 || cx[6] == 1) && cx[0] >= 32 && p.text.contains("wgmma.mma_async") != p.mma_sync_dots.is_empty() => {
                    failures.push(format!("gemm {t}->{u} {cx:?}: wgmma reasons {:?} disagree with the text", p.mma_sync_dots))
                }
                // with unit strides the operand loads are 16-byte vectors,
                // and index arithmetic is recomputed in place: without a bias
                // (whose broadcast still goes through shared memory) the only
                // barriers are the dot's two per K step (+ the prologue's,
                // + two where the epilogue stages C through shared memory
                // for 16-byte stores)
                // (on the wgmma path the operands go to shared memory by
                // 16-byte cp.async instead)
                Ok(p) if tc && (!(p.text.contains("ld.global.v4") || p.text.contains("cp.async.cg.shared.global")) || (cx[5] == 0 && p.text.matches("bar.sync").count() > 3 + 2 * p.text.contains("st.global.v4") as usize)) => failures.push(format!(
                    "gemm {t}->{u} {cx:?}: expected vectorized operand loads and ≤ 3 barriers (5 with a staged store), got {} v4 loads, {} 16-byte cp.async and {} barriers",
                    p.text.matches("ld.global.v4").count(),
                    p.text.matches("cp.async.cg").count(),
                    p.text.matches("bar.sync").count()
                )),
                Ok(p) => match ptxas::assemble(&px, &p.text, sm) {
                    Ok(r) => println!("gemm {t}->{u} {cx:?} sm_{sm}: {} regs, {} B spills, {} B smem", r.registers, r.spill_loads + r.spill_stores, p.smem_bytes),
                    Err(log) => failures.push(format!("ptxas gemm {t}->{u} {cx:?} sm_{sm}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
                },
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every configuration the GEMM autotuner may pick, for every input dtype
/// and precision mode, as launched on row-major operands (unit strides),
/// with and without pipelining: emitted and assembled for sm_80 and sm_90,
/// with its register/spill report. A configuration that spills is allowed
/// (the tuner times it) but reported.
#[test]
fn every_gemm_tuner_configuration_assembles() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    let one = unit_strides(k, false);
    let mut failures = vec![];
    let modes = [(DType::BF16, 0), (DType::F16, 0), (DType::F32, 1), (DType::F32, 0)];
    for tc in ferrotile_kernels::gemm::gemm_candidates() {
        let (bm, bn, bk) = (tc.get("BM").unwrap(), tc.get("BN").unwrap(), tc.get("BK").unwrap());
        for (t, tf32) in modes {
            let cx = [bm, bn, bk, tc.get("GROUP_M").unwrap(), 0, 0, tf32, 0];
            let spec = specialize(k, &cx, &[t, t]).unwrap();
            // row-major operands (unit strides) on both targets; on sm_90
            // also column-major ones (strided K for A, N for B: operand
            // copies that cannot be 16-byte vectors)
            for (sm, unit) in [(80, true), (90, true), (90, false)] {
                if !unit && t != DType::BF16 {
                    continue;
                }
                let one = if unit { one.clone() } else { vec![false; k.params.len()] };
                let opts = PtxOptions {
                    arg_div: vec![16; guarded_params(k)],
                    arg_one: one,
                    pipeline: tc.num_stages.saturating_sub(1),
                    warp_specialize: true,
                    ..PtxOptions::new(sm, tc.num_warps, k.params.len())
                };
                match emit(&spec, &opts) {
                    Err(e) => failures.push(format!("emit gemm {t} tf32={tf32} {tc}: {e}")),
                    // FERROTILE_EXPLAIN's reasons: none for tensor-core
                    // inputs (every candidate fits its warps), the dtype for
                    // exact f32
                    Ok(p)
                        if (t == DType::F32 && tf32 == 0) != p.fma_dots.iter().any(|(_, why)| why.contains("dot_tf32"))
                            || (t != DType::F32 && !p.fma_dots.is_empty()) =>
                    {
                        failures.push(format!("gemm {t} tf32={tf32} {tc}: unexpected FMA-path reasons {:?}", p.fma_dots))
                    }
                    Ok(p) => match ptxas::assemble(&px, &p.text, sm) {
                        Ok(r) => println!(
                            "gemm {t}{}{} {tc} sm_{sm}: {} regs, {} B spills, {} B smem{}",
                            if tf32 == 1 { " tf32" } else { "" },
                            if unit { "" } else { " strided" },
                            r.registers,
                            r.spill_loads + r.spill_stores,
                            p.smem_bytes,
                            if p.text.contains("wgmma.mma_async") {
                                ", wgmma"
                            } else if p.text.contains("mma.sync") {
                                ", mma.sync"
                            } else {
                                ", fma"
                            }
                        ),
                        Err(log) => failures.push(format!("ptxas gemm {t} tf32={tf32} {tc} sm_{sm}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
                    },
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The Hopper GEMM's synchronization, pinned: operands reach shared memory
/// by 16-byte `cp.async` into rings (`backends/src/ptx/async_copy.rs`) of
/// `num_stages` slots, plus one for the MMA kept in flight when pipelined;
/// the K loop waits for its own tiles at the top of the body
/// (`cp.async.wait_group num_stages − 2`) with its only barrier, keeps one
/// wgmma group in flight, and drains both at the loop exit.
#[test]
fn wgmma_gemm_rings_and_waits() {
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    let one = unit_strides(k, false);
    let spec = specialize(k, &[128, 256, 64, 8, 0, 0, 0, 0], &[DType::BF16, DType::BF16]).unwrap();
    let tile = (128 * 64 + 64 * 256) * 2;
    for stages in [1u32, 2, 3] {
        let opts = PtxOptions {
            arg_div: vec![16; guarded_params(k)],
            arg_one: one.clone(),
            pipeline: stages - 1,
            warp_specialize: true,
            ..PtxOptions::new(90, 8, k.params.len())
        };
        let p = emit(&spec, &opts).unwrap();
        let t = &p.text;
        assert!(t.contains(".target sm_90a") && t.contains("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"), "stages {stages}");
        assert!(t.contains("cp.async.cg.shared.global") && !t.contains("ld.global.v4"), "stages {stages}: operands by cp.async");
        let slots = if stages == 1 { 2 } else { stages + 1 };
        assert_eq!(p.smem_bytes, slots * tile, "stages {stages}: ring slots");
        // the loop: label, exit test, then the operand wait at the top
        let body = &t[t.find("$L1:").expect("K loop")..t.find("$L2:").expect("loop exit")];
        if stages >= 2 {
            assert!(
                body.contains(&format!("cp.async.wait_group {};\n\tfence.proxy.async.shared::cta;\n\tbar.sync 0;", stages - 2)),
                "stages {stages}:\n{body}"
            );
            assert_eq!(body.matches("bar.sync").count(), 1, "stages {stages}: one barrier per K step");
            assert!(body.contains("wgmma.wait_group.sync.aligned 1;"), "stages {stages}: one MMA group in flight");
            let exit = &t[t.find("$L2:").unwrap()..];
            assert!(exit.contains("cp.async.wait_all;") && exit.contains("wgmma.wait_group.sync.aligned 0;"), "stages {stages}: drained at the exit");
        } else {
            assert!(body.contains("cp.async.wait_group 0;") && body.contains("wgmma.wait_group.sync.aligned 0;"), "stages 1: synchronous");
        }
    }
}

/// Split-K's reduction kernel, for every output dtype and epilogue, and
/// pipelined as the library launches it (`pipeline_every_loop`, the loads
/// of up to 8 partials in flight).
#[test]
fn splitk_reduce_assembles() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let k = ferrotile_kernels::gemm::gemm_splitk_reduce::ir();
    let mut failures = vec![];
    for u in [DType::F32, DType::BF16, DType::F16] {
        // constexprs: BLOCK, ACT, HAS_BIAS
        for cx in [[256i64, 0, 0], [256, 2, 1], [256, 1, 1]] {
            let spec = specialize(k, &cx, &[u]).unwrap();
            for (sm, depth) in [(80, 1), (90, 1), (80, 7), (90, 3)] {
                let every = depth > 1;
                let opts = PtxOptions {
                    arg_div: vec![16; guarded_params(k)],
                    pipeline: depth,
                    pipeline_every_loop: every,
                    warp_specialize: !every,
                    ..PtxOptions::new(sm, 2, k.params.len())
                };
                match emit(&spec, &opts)
                    .map_err(|e| e.to_string())
                    .and_then(|p| ptxas::assemble(&px, &p.text, sm).map_err(|l| l.lines().take(5).collect::<Vec<_>>().join("\n")))
                {
                    Ok(r) if r.spill_loads + r.spill_stores > 0 => failures.push(format!("splitk_reduce {u} {cx:?} sm_{sm} depth {depth}: spills")),
                    Ok(r) => println!("splitk_reduce {u} {cx:?} sm_{sm} depth {depth}: {} regs", r.registers),
                    Err(e) => failures.push(format!("splitk_reduce {u} {cx:?} sm_{sm} depth {depth}: {e}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The GEMM's view path on sm_90a: both operands come from TMA rings (one
/// 3-D tensor map each — the batch is the third dimension — A in one box
/// of all its rows (the accumulator is in `wgmma`'s row order), B in
/// 64-column boxes of all its K rows), the K loop has no
/// `cp.async`, no proxy fence and one barrier, refills its slots before its
/// `dot` waits on the slots' mbarriers, the loop exit waits for the tiles
/// still in flight; it
/// assembles. Without the facts a tensor map needs (a row stride not known
/// to be a multiple of 16 elements) the views stay on the register path.
#[test]
fn wgmma_gemm_tma_rings() {
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    let one = unit_strides(k, false);
    let spec = specialize(k, &[128, 256, 64, 8, 0, 0, 0, 1], &[DType::BF16, DType::BF16]).unwrap();
    let px = ptxas::find_or_skip();
    for stages in [1u32, 2, 3] {
        let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], arg_one: one.clone(), pipeline: stages - 1, ..PtxOptions::new(90, 8, k.params.len()) };
        let p = emit(&spec, &opts).unwrap();
        let t = &p.text;
        let boxes: Vec<Vec<u32>> = p.tensor_maps.iter().map(|m| m.box_dims.clone()).collect();
        assert_eq!(boxes, vec![vec![64, 128, 1], vec![64, 64, 1]], "stages {stages}");
        assert!(p.tensor_maps.iter().all(|m| m.view.batch.len() == 1), "stages {stages}: the batch as a third dimension");
        assert!(
            t.contains(".param .align 64 .b8 ft_tmap1[128]") && t.contains("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"),
            "stages {stages}"
        );
        assert_eq!(
            t.matches("cp.async.bulk.tensor").count(),
            stages.max(2) as usize * (1 + 4) - if stages == 1 { 5 } else { 0 },
            "stages {stages}: one A box + 4 B boxes per tile load"
        );
        assert!(!t.contains("cp.async.cg") && !t.contains("cp.async.wait"), "stages {stages}: no cp.async");
        assert_eq!(p.threads, 256);
        if stages >= 2 {
            let (body, exit) = k_loop(t);
            assert_eq!(body.matches("bar.sync").count(), 1, "stages {stages}: one barrier per K step");
            assert!(!body.contains("fence.proxy.async"), "stages {stages}: no proxy fence");
            assert_eq!(body.matches("mbarrier.try_wait.parity").count(), 2, "stages {stages}: the dot waits on both operands' slots");
            assert!(
                body.find("cp.async.bulk.tensor").unwrap() < body.find("mbarrier.try_wait.parity").unwrap(),
                "stages {stages}: copies issued before the wait for this step's tiles"
            );
            assert_eq!(exit.matches("mbarrier.try_wait.parity").count(), 2 * (stages - 1) as usize, "stages {stages}: the exit waits for the carried tiles");
        }
        if let Some(px) = &px {
            match ptxas::assemble(px, t, 90) {
                Ok(r) => println!(
                    "gemm views 128x256x64 stages {stages}: {} regs, {} B spills, {} B smem",
                    r.registers,
                    r.spill_loads + r.spill_stores,
                    p.smem_bytes
                ),
                Err(log) => panic!("ptxas, stages {stages}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n")),
            }
        }
        // warp-specialized: a producer warp issues every copy; the
        // consumers' K loop has no barrier and no copy, waits on the full
        // mbarriers and releases both operands' slots on the empty ones
        let p = emit(&spec, &PtxOptions { warp_specialize: true, ..opts }).unwrap();
        let t = &p.text;
        assert_eq!(p.threads, 384, "stages {stages}: 8 consumer warps + the producer warpgroup");
        assert!(t.contains(".maxntid 384, 1, 1"), "stages {stages}");
        // registers move to the consumers where one program fills the SM
        // (rings over half its shared memory), never otherwise
        let moved = t.contains("setmaxnreg.inc.sync.aligned.u32 232;") && t.contains("setmaxnreg.dec.sync.aligned.u32 40;");
        assert_eq!(moved, p.smem_bytes > 228 * 1024 / 2, "stages {stages}: setmaxnreg with {} B of shared memory", p.smem_bytes);
        let inits = t.matches("mbarrier.init.shared::cta.b64").count();
        assert!(
            inits >= 4 && t.matches("], 8;").count() * 2 == inits,
            "stages {stages}: per slot a full mbarrier and an empty one counting the consumer warps"
        );
        let split = t.find("bra.uni $L1;").expect("the producer's branch");
        let (consumer, producer) = t[split..].split_at(t[split..].find("$L1:").unwrap());
        assert!(
            !consumer.contains("cp.async.bulk.tensor") && !consumer.contains("bar.sync 0;"),
            "stages {stages}: the consumers copy nothing and never meet the producer"
        );
        assert_eq!(producer.matches("cp.async.bulk.tensor").count(), stages.max(2) as usize * 5 - if stages == 1 { 5 } else { 0 });
        assert!(!producer.contains("wgmma") && !producer.contains("st.global") && !producer.contains("bar.sync"), "stages {stages}: the producer only copies");
        assert_eq!(
            producer.matches("mbarrier.try_wait.parity").count(),
            producer.matches("mbarrier.arrive.expect_tx").count(),
            "stages {stages}: each fill waits for its slot's release"
        );
        if stages >= 2 {
            let (body, _) = k_loop(consumer);
            assert!(!body.contains("bar.sync") && !body.contains("cp.async"), "stages {stages}: no barrier, no copy in the consumers' K loop");
            assert_eq!(body.matches("mbarrier.try_wait.parity").count(), 2, "stages {stages}");
            assert_eq!(body.matches("mbarrier.arrive.shared::cta.b64").count(), 2, "stages {stages}: the previous MMAs' slots released");
            assert!(
                body.find("wgmma.wait_group.sync.aligned 1").unwrap() < body.find("mbarrier.arrive.shared").unwrap(),
                "stages {stages}: released after the wait"
            );
        }
        if let Some(px) = &px {
            match ptxas::assemble(px, t, 90) {
                Ok(r) => {
                    println!("gemm views 128x256x64 stages {stages}, warp-specialized: {} regs, {} B spills", r.registers, r.spill_loads + r.spill_stores);
                    assert_eq!(r.spill_loads + r.spill_stores, 0, "stages {stages}");
                }
                Err(log) => panic!("ptxas, warp-specialized, stages {stages}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n")),
            }
        }
    }
    let div16: Vec<u32> = k.params.iter().map(|p| if p.name != "sam" { 16 } else { 1 }).collect();
    let opts = PtxOptions { arg_div: div16, arg_one: one, pipeline: 2, warp_specialize: true, ..PtxOptions::new(90, 8, k.params.len()) };
    let p = emit(&spec, &opts).unwrap();
    assert_eq!(p.tensor_maps.len(), 1, "A's view needs a row stride known to be a multiple of 16 elements");
}

/// The GEMM's view path (`VIEWS`) for every tuner configuration, bf16 and
/// f16: on sm_90a with TMA where the tile is a `wgmma` one (tensor maps
/// declared, no `cp.async` for the operands), lowered to pointer loads
/// elsewhere (sm_80, `mma.sync` tiles: 16-byte `cp.async` ring copies);
/// every result assembles. Row-major operands, as launched: swapped
/// configurations (`SWAP`) read Bᵀ M-major and Aᵀ K-major (unit strides
/// `sam`, `sbk`; C written transposed, `scm`), which takes `wgmma` at N = 16.
#[test]
fn gemm_views_every_tuner_configuration_assembles() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    let mut failures = vec![];
    for tc in ferrotile_kernels::gemm::gemm_candidates() {
        let (bm, bn, bk) = (tc.get("BM").unwrap(), tc.get("BN").unwrap(), tc.get("BK").unwrap());
        let swap = tc.values.get("SWAP").is_some_and(|s| *s != 0);
        let one = unit_strides(k, swap);
        for t in [DType::BF16, DType::F16] {
            let spec = specialize(k, &[bm, bn, bk, tc.get("GROUP_M").unwrap(), 0, 0, 0, 1], &[t, t]).unwrap();
            for sm in [80, 90] {
                let opts = PtxOptions {
                    arg_div: vec![16; guarded_params(k)],
                    arg_one: one.clone(),
                    pipeline: tc.num_stages.saturating_sub(1),
                    warp_specialize: true,
                    ..PtxOptions::new(sm, tc.num_warps, k.params.len())
                };
                let p = match emit(&spec, &opts) {
                    Ok(p) => p,
                    Err(e) => {
                        failures.push(format!("emit views gemm {t} {tc} sm_{sm}: {e}"));
                        continue;
                    }
                };
                let tma = sm == 90 && wgmma_grid(bm as u32, bn as u32, bk as u32, tc.num_warps, t.size_bytes() as u32, swap).is_some();
                let copies = p.text.contains("cp.async.cg.shared.global");
                // (a swapped configuration off the TMA path reads Bᵀ tiles
                // along M, which `mma.sync`'s K-major slots take element by
                // element: no 16-byte copies; the tuner's business)
                if tma == p.tensor_maps.is_empty() || (tma && copies) || (!tma && !swap && tc.num_stages >= 2 && !copies) {
                    failures.push(format!("views gemm {t} {tc} sm_{sm}: {} tensor maps, 16-byte cp.async: {copies}", p.tensor_maps.len()));
                }
                if let Err(log) = ptxas::assemble(&px, &p.text, sm) {
                    failures.push(format!("ptxas views gemm {t} {tc} sm_{sm}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n")));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Transposed views on the TMA path: a column-major B (`view(b, [k, n],
/// [1, k])`, the layout of `x·Wᵀ`) comes in boxes along K into a K-major
/// slot, for 16-bit operands (`wgmma` without B's transpose immediate) and
/// for tf32 ones (both operands 32-bit TMA tiles, A in 32-element column
/// atoms): `dot_tf32`'s maps round on the way (`TFLOAT32`),
/// `dot_tf32_trunc`'s do not; no pass over the slots. All assemble for
/// sm_90a.
#[test]
fn wgmma_tma_kmajor_b() {
    let gemm = ferrotile_kernels::gemm::gemm_kernel::ir();
    let views = ferrotile_tests::conformance::reduce::k_matmul_tf32_views::ir();
    let px = ptxas::find_or_skip();
    // (kernel, constexprs, dtype, rounding maps) → expected boxes of A and B
    let cases = [
        (gemm, vec![128, 256, 64, 8, 0, 0, 0, 1], DType::BF16, false, vec![vec![64, 128, 1], vec![64, 256, 1]]),
        (gemm, vec![128, 128, 64, 8, 0, 0, 0, 1], DType::F16, false, vec![vec![64, 128, 1], vec![64, 128, 1]]),
        (gemm, vec![128, 128, 32, 8, 0, 0, 1, 1], DType::F32, true, vec![vec![32, 128, 1], vec![32, 128, 1]]),
        (views, vec![0, 128, 128, 32], DType::F32, true, vec![vec![32, 128], vec![32, 128]]),
        (views, vec![1, 128, 128, 32], DType::F32, false, vec![vec![32, 128], vec![32, 128]]),
    ];
    for (k, cx, dt, round, boxes) in cases {
        // (the GEMM: A row-major, B column-major)
        let one: Vec<bool> = k.params.iter().map(|p| p.name == "sak" || p.name == "sbk").collect();
        let types = if std::ptr::eq(k, gemm) { vec![dt, dt] } else { vec![] };
        let spec = specialize(k, &cx, &types).unwrap();
        let opts =
            PtxOptions { arg_div: vec![16; guarded_params(k)], arg_one: one, pipeline: 2, warp_specialize: true, ..PtxOptions::new(90, 8, k.params.len()) };
        let p = emit(&spec, &opts).unwrap();
        let t = &p.text;
        let what = format!("{} {cx:?} {dt}", k.name);
        let got: Vec<Vec<u32>> = p.tensor_maps.iter().map(|m| m.box_dims.clone()).collect();
        assert_eq!(got, boxes, "{what}");
        assert!(p.tensor_maps.iter().all(|m| m.view.dtype == dt && m.round_tf32 == round), "{what}: rounding maps for dot_tf32 only");
        assert_eq!(p.tensor_maps.iter().map(|m| m.view.inner).collect::<Vec<_>>(), vec![1, 0], "{what}: A row-major, B transposed");
        assert!(!t.contains("cp.async.cg") && !t.contains("cp.async.ca"), "{what}: no cp.async");
        // B K-major: tf32 takes no transpose immediates, 16-bit B's is 0
        let wg = t.lines().find(|l| l.contains("wgmma.mma_async")).unwrap();
        let imms = wg.rsplit_once('}').unwrap().1.matches(',').count() - 3;
        assert!(if dt == DType::F32 { imms == 2 } else { wg.trim_end().ends_with(", 1, 1, 0, 0;") }, "{what}: B K-major: {wg}");
        assert!(!t.contains("cvt.rna.tf32") && !k_loop(t).0.contains("st.shared"), "{what}: no rounding pass over the slots");
        if let Some(px) = &px {
            match ptxas::assemble(px, t, 90) {
                Ok(r) => println!("{what}: {} regs, {} B spills, {} B smem", r.registers, r.spill_loads + r.spill_stores, p.smem_bytes),
                Err(log) => panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n")),
            }
        }
    }
}

/// The swapped decode product `Cᵀ = Bᵀ·Aᵀ` (row-major operands, the
/// library's `SWAP` configurations): the GEMM kernel's A is Bᵀ, a view
/// whose unit stride is on M, so its bulk copies fill an M-major slot
/// (boxes of 64 M × BK rows) that `wgmma` reads with A's transpose
/// immediate; its B is Aᵀ, 16 columns K-major (boxes of 64 K × 16 rows) —
/// `m64n16k16` with immediates `1, 1, 1, 0`, no `cp.async`, with and
/// without the producer warpgroup. Assembles for sm_90a without spills.
#[test]
fn swapped_decode_takes_wgmma_m64n16() {
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    let px = ptxas::find_or_skip();
    let one = unit_strides(k, true);
    for (bn, bk, ws) in [(16, 128, false), (16, 128, true), (16, 256, true), (32, 128, true)] {
        let spec = specialize(k, &[64, bn, bk, 8, 0, 2, 0, 1], &[DType::BF16, DType::BF16]).unwrap();
        let opts = PtxOptions {
            arg_div: vec![16; guarded_params(k)],
            arg_one: one.clone(),
            pipeline: 3,
            warp_specialize: ws,
            ..PtxOptions::new(90, 4, k.params.len())
        };
        let p = emit(&spec, &opts).unwrap();
        let t = &p.text;
        let what = format!("64x{bn}x{bk} producer={ws}");
        let got: Vec<(usize, Vec<u32>)> = p.tensor_maps.iter().map(|m| (m.view.inner, m.box_dims.clone())).collect();
        assert_eq!(got, vec![(0, vec![64, bk as u32, 1]), (0, vec![64, bn as u32, 1])], "{what}: Bᵀ M-major, Aᵀ K-major boxes");
        assert!(!t.contains("cp.async.cg") && !t.contains("cp.async.ca"), "{what}: no cp.async");
        let wg: Vec<&str> = t.lines().filter(|l| l.contains("wgmma.mma_async")).collect();
        assert_eq!(wg.len() as i64, bk / 16, "{what}: one m64n{bn}k16 per 16 of K");
        assert!(wg.iter().all(|l| l.contains(&format!(".m64n{bn}k16.")) && l.trim_end().ends_with(", 1, 1, 1, 0;")), "{what}: M-major A, K-major B: {}", wg[0]);
        if let Some(px) = &px {
            match ptxas::assemble(px, t, 90) {
                Ok(r) => {
                    assert_eq!(r.spill_loads + r.spill_stores, 0, "{what}: spills");
                    println!("swapped {what}: {} regs, {} B smem", r.registers, p.smem_bytes);
                }
                Err(log) => panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n")),
            }
        }
    }
}

/// The FMA `dot` (exact f32) is a register-blocked outer product: per k a
/// thread loads one element of A per distinct row and one of B per distinct
/// column of its outputs, so a 128×128×32 tile at 8 warps (64 outputs per
/// thread) issues 64 FMAs per k against at most 24 shared-memory loads (it
/// was 128: two per FMA); the k loop is unrolled by 8 with immediate
/// offsets. Assembles for sm_80 and sm_90 without spills.
#[test]
fn fma_dot_register_blocked() {
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    let one = unit_strides(k, false);
    let spec = specialize(k, &[128, 128, 32, 8, 0, 0, 0, 0], &[DType::F32, DType::F32]).unwrap();
    let px = ptxas::find_or_skip();
    for sm in [80, 90] {
        let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], arg_one: one.clone(), warp_specialize: true, ..PtxOptions::new(sm, 8, k.params.len()) };
        let p = emit(&spec, &opts).unwrap();
        let t = &p.text;
        // the dot's k loop: the block between the label its backward
        // branch jumps to and that branch, holding the FMAs
        let f = t.find("fma.rn.f32").unwrap();
        let back = f + t[f..].find("\tbra.uni $L").unwrap();
        let label = t[back + "\tbra.uni ".len()..].split(';').next().unwrap();
        let head = t.find(&format!("{label}:")).unwrap();
        let body = &t[head..back];
        let (fmas, loads) = (body.matches("fma.rn.f32").count(), body.matches("ld.shared").count());
        assert_eq!(fmas, 64 * 8, "sm_{sm}: 64 outputs × 8 unrolled k");
        assert!(loads <= 24 * 8, "sm_{sm}: {loads} shared loads per 8 k for {fmas} FMAs");
        assert!(body.contains("+28]"), "sm_{sm}: unrolled k at immediate offsets");
        if let Some(px) = &px {
            let r = ptxas::assemble(px, t, sm).unwrap_or_else(|log| panic!("ptxas sm_{sm}: {log}"));
            assert_eq!(r.spill_loads + r.spill_stores, 0, "sm_{sm}: spills");
            println!("exact f32 128x128x32 sm_{sm}: {} regs, {fmas} FMAs / {loads} loads per 8 k", r.registers);
        }
    }
}

/// The library's rule for when the GEMM reads its operands through views
/// (`gemm::views_rule`) agrees with what the PTX backend does with them:
/// for every tuner configuration, dtype / precision and B layout, on the
/// argument facts a launch would give (N = K = 4096 and 4104, M the same or
/// 16 for split-K configurations), the rule says "views" exactly when the
/// view-path compilation turns both operand loads into TMA bulk copies —
/// never views that end up on the slower lowered path, never a TMA path
/// left unused — except by the rule's one policy choice: unpipelined
/// configurations (`num_stages` 1, nothing to overlap the copies with) keep
/// the pointer loads.
#[test]
fn gemm_views_rule_matches_the_backend() {
    use ferrotile_kernels::gemm::{gemm_candidates, kernel_args, views_rule, GemmConfig};
    // (dtype, tf32, B column-major, A column-major)
    let modes = [
        (DType::BF16, false, false, false),
        (DType::BF16, false, true, false),
        (DType::F16, false, false, false),
        (DType::BF16, false, false, true),
        (DType::F16, false, true, true),
        (DType::F32, true, true, false),
        (DType::F32, true, false, false),
        (DType::F32, true, true, true),
        (DType::F32, false, false, false),
    ];
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    let mut failures = vec![];
    for tc in gemm_candidates() {
        let cfg = GemmConfig::from_tune(&tc).unwrap();
        let split_k = cfg.split_k as usize;
        // (4104: strides that are whole 16-byte multiples for 16-bit and
        // 32-bit elements but not multiples of 16 elements — the launch's
        // power-of-two fact proves them; 4100: only for f32)
        for size in [4096i64, 4104, 4100] {
            let (m, n, kk) = (if split_k > 1 { 16 } else { size }, size, size);
            let k_split = if split_k > 1 { (kk as usize).div_ceil(split_k).div_ceil(cfg.bk as usize) * cfg.bk as usize } else { kk as usize };
            for (dt, tf32, b_col, a_col) in modes {
                // what `launch_kernel` passes: A and B row- or column-major;
                // one product (batch strides 0); swapped or not
                let (sbk, sbn) = if b_col { (1, kk) } else { (n, 1) };
                let (sam, sak) = if a_col { (1, m) } else { (kk, 1) };
                let ka = kernel_args([m as usize, n as usize], [sam, sak, sbk, sbn, 0, 0], n, cfg.swap);
                let strides = ka.strides;
                let rule = views_rule(dt.size_bytes() as u32, strides, (split_k, k_split), cfg, tf32);
                let arg = |name: &str| -> Option<i64> {
                    Some(match name {
                        "m" => ka.mn[0] as i64,
                        "n" => ka.mn[1] as i64,
                        "k" => kk,
                        "sam" => strides[0],
                        "sak" => strides[1],
                        "sbk" => strides[2],
                        "sbn" => strides[3],
                        "scm" => ka.scm,
                        "scn" => ka.scn,
                        "sab" | "sbb" | "scb" => 0,
                        "k_split" => k_split as i64,
                        "scs" => {
                            if split_k > 1 {
                                m * n
                            } else {
                                0
                            }
                        }
                        _ => return None,
                    })
                };
                let div16: Vec<u32> = k.params.iter().map(|p| arg(&p.name).map_or(1, ferrotile_backends::plan::axis::arg_div)).collect();
                let one: Vec<bool> = k.params.iter().map(|p| arg(&p.name) == Some(1)).collect();
                let cx = [cfg.bm as i64, cfg.bn as i64, cfg.bk as i64, cfg.group_m as i64, 0, 0, tf32 as i64, 1];
                let spec = specialize(k, &cx, &[dt, if split_k > 1 { DType::F32 } else { dt }]).unwrap();
                let opts = PtxOptions {
                    arg_div: div16,
                    arg_one: one,
                    pipeline: cfg.num_stages.saturating_sub(1),
                    warp_specialize: true,
                    ..PtxOptions::new(90, cfg.num_warps, k.params.len())
                };
                let maps = match emit(&spec, &opts) {
                    Ok(p) => p.tensor_maps.len(),
                    // (a configuration the backend rejects — too much shared
                    // memory for its dtype — is pruned by the tuner either way)
                    Err(e) if e.to_string().contains("shared memory") => continue,
                    Err(e) => panic!("{tc} {dt}: {e}"),
                };
                let policy = cfg.num_stages == 1 && !rule;
                if rule != (maps == 2) && !policy {
                    failures.push(format!(
                        "{tc} {dt} tf32={tf32} A {} B {} size {size}: rule says views = {rule}, the backend gives {maps} tensor maps",
                        if a_col { "col" } else { "row" },
                        if b_col { "col" } else { "row" }
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The K loop of a GEMM's PTX: from the head its back edge (the
/// conditional branch after the last MMA) jumps to, to the exit that
/// follows the back edge; and everything after the exit.
fn k_loop(t: &str) -> (&str, &str) {
    let mma = t.rfind("wgmma.mma_async").unwrap();
    let back = mma + t[mma..].find(" bra.uni $L").unwrap() + " bra.uni ".len();
    let head = &t[back..back + t[back..].find(';').unwrap()];
    let h = t.find(&format!("{head}:")).unwrap();
    // (the exit label follows the conditional back edge)
    let e = back + t[back..].find('\n').unwrap() + 1;
    (&t[h..e], &t[e..])
}

/// The GEMM's C tile leaves the accumulator layout through shared memory
/// (dead operand rings) as 16-byte stores, one per 8 bf16 / 4 f32 — when
/// the row stride of C is known to keep them aligned; otherwise the store
/// stays in the accumulator layout. It assembles.
#[test]
fn epilogue_stores_are_16_bytes() {
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    let one = unit_strides(k, false);
    let px = ptxas::find_or_skip();
    for (dt, tf32, cx_bk) in [(DType::BF16, 0, 64), (DType::F32, 1, 32)] {
        let spec = specialize(k, &[128, 256, cx_bk, 8, 0, 0, tf32, 1], &[dt, dt]).unwrap();
        for ws in [false, true] {
            let opts = PtxOptions {
                arg_div: vec![16; guarded_params(k)],
                arg_one: one.clone(),
                pipeline: 2,
                warp_specialize: ws,
                ..PtxOptions::new(90, 8, k.params.len())
            };
            let p = emit(&spec, &opts).unwrap();
            let t = &p.text;
            let what = format!("{dt} warp-specialized {ws}");
            // 128×256 elements, 16 bytes per store, 256 threads
            assert_eq!(t.matches("st.global.v4.b32").count() as u32, 128 * 256 * dt.size_bytes() as u32 / 16 / 256, "{what}");
            assert!(!t.contains("st.global.v2") && !t.contains("st.global.b16") && !t.contains("st.global.f32"), "{what}: every store is 16 bytes");
            assert!(k_loop(t).1.contains("ld.shared.v4.b32"), "{what}: read back as 16-byte pieces");
            if let Some(px) = &px {
                if let Err(log) = ptxas::assemble(px, t, 90) {
                    panic!("ptxas, {what}: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"));
                }
            }
            // a row stride of C not known to be a multiple of 16 elements:
            // the store keeps the accumulator layout
            let div16: Vec<u32> = k.params.iter().map(|p| if p.name != "scm" { 16 } else { 1 }).collect();
            let p = emit(&spec, &PtxOptions { arg_div: div16, ..opts }).unwrap();
            assert!(!p.text.contains("st.global.v4") && !k_loop(&p.text).1.contains("ld.shared.v4"), "{what}: no staging without the alignment fact");
        }
    }
}

/// The library's attention forward, every tuner candidate of each head
/// dimension, masked or not, grouped heads or not, assembles for sm_80 and
/// sm_90; on sm_90 both dots take `wgmma` with Q and P from registers (no
/// staged operand) and K/V come by tensor-map bulk copies (rank-4 maps:
/// one dimension per batch/head term).
/// The overlapped loop (`OV`) waits for `Q·Kᵀ` with the previous
/// block's `P·V` still in flight (`wgmma.wait_group 1`) and moves no row
/// statistic through shared memory; every candidate fits the H200's shared
/// memory.
#[test]
fn every_attention_tuner_configuration_assembles() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let mut failures = vec![];
    for dp in [64i64, 128, 256] {
        for tc in ferrotile_kernels::attention::attention_candidates(dp as usize) {
            let overlap = tc.values.get("OV") == Some(&1);
            let k = if overlap { ferrotile_kernels::attention::attention_fwd_overlap::ir() } else { ferrotile_kernels::attention::attention_fwd::ir() };
            let (bm, bn) = (tc.get("BM").unwrap(), tc.get("BN").unwrap());
            // (G, MASK_HI, MASK_LO, LSE, FOLD)
            for (t, g, hi, lo, lse, fold) in [(DType::BF16, 1, 0, 0, 0, 1), (DType::F16, 4, 1, 1, 1, 0)] {
                let spec = specialize(k, &[bm, bn, dp, g, hi, lo, lse, fold], &[t]).unwrap();
                for sm in [80, 90] {
                    let opts = PtxOptions {
                        arg_div: vec![16; guarded_params(k)],
                        pipeline: tc.num_stages.saturating_sub(1),
                        split_masks: tc.values.get("SPLIT") == Some(&1),
                        ..PtxOptions::new(sm, tc.num_warps, k.params.len())
                    };
                    let what = format!("attention {t} D={dp} G={g} hi={hi} lo={lo} lse={lse} {tc} sm_{sm}");
                    let p = match emit(&spec, &opts) {
                        Ok(p) => p,
                        Err(e) => {
                            failures.push(format!("{what}: emit: {e}"));
                            continue;
                        }
                    };
                    if sm == 90 {
                        let staged: Vec<_> = p.conversions.iter().filter(|(_, l)| l.contains("staged")).collect();
                        if !p.text.contains("wgmma.mma_async") || !staged.is_empty() || !p.mma_sync_dots.is_empty() {
                            failures.push(format!("{what}: not wgmma from registers: {:?} {staged:?}", p.mma_sync_dots));
                        }
                        // (Q too where its register-A fragments would take
                        // more than 32 registers per thread: an invariant
                        // slot; overlapped, Q feeds two `dot`s — the peeled
                        // block's and the loop's —: one slot read by both)
                        let maps = if overlap || bm * dp * 2 / (tc.num_warps as i64 * 32) > 128 { 3 } else { 2 };
                        if p.tensor_maps.len() != maps {
                            failures.push(format!("{what}: {} tensor maps, want {maps} (K, V and maybe Q)", p.tensor_maps.len()));
                        }
                        if overlap && (!p.text.contains("wgmma.wait_group.sync.aligned 1;") || !p.conversions.is_empty()) {
                            failures.push(format!("{what}: the softmax does not overlap P·V: {:?}", p.conversions));
                        }
                        if p.smem_bytes > 232448 {
                            failures.push(format!("{what}: {} bytes of shared memory, more than an H200 program may have", p.smem_bytes));
                        }
                    }
                    match ptxas::assemble(&px, &p.text, sm) {
                        Ok(r) => println!("{what}: {} regs, {} B spills, {} B smem", r.registers, r.spill_loads + r.spill_stores, p.smem_bytes),
                        Err(log) => failures.push(format!("{what}: ptxas: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The library's decode attention (a few query rows of all the query heads
/// of one K/V head against a key range) and its split combine assemble for
/// sm_80 and sm_90 in the tiles the host picks (rows 16–128, 64 keys, 3
/// stages); prints registers, spills and the path each dot takes.
#[test]
fn attention_decode_and_combine_assemble() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let k = ferrotile_kernels::attention::attention_decode::ir();
    let mut failures = vec![];
    for (bm, dp, g) in [(16i64, 128i64, 1i64), (16, 128, 4), (64, 128, 8), (128, 128, 8), (16, 64, 1), (32, 256, 4)] {
        for (t, causal, seqlens, split, lse, paged, fold) in [(DType::BF16, 0, 0, 1, 0, 0, 1), (DType::F16, 1, 1, 0, 1, 0, 0), (DType::BF16, 0, 1, 1, 0, 1, 1)]
        {
            let spec = specialize(k, &[bm, 64, dp, g, causal, seqlens, split, lse, paged, fold], &[t]).unwrap();
            for sm in [80, 90] {
                let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, ..PtxOptions::new(sm, 4, k.params.len()) };
                let what = format!("attention_decode {t} BM={bm} DP={dp} G={g} causal={causal} seqlens={seqlens} split={split} paged={paged} sm_{sm}");
                match emit(&spec, &opts) {
                    Err(e) => failures.push(format!("{what}: emit: {e}")),
                    Ok(p) => match ptxas::assemble(&px, &p.text, sm) {
                        Ok(r) => {
                            // (the K/V tiles' copies: 16-byte `cp.async` where they are not bulk copies)
                            let sizes: Vec<&str> =
                                p.text.lines().filter(|l| l.contains("cp.async.c")).filter_map(|l| l.trim().trim_end_matches(';').split(", ").nth(2)).collect();
                            let wide = sizes.iter().filter(|s| **s == "16").count();
                            // (K, read through a transposed view or — paged — a `trans`,
                            // too: `lower_views` loads it in storage order; on sm_80 a
                            // 64-row tile's K/V tiles `[64, DP]` share the shape of the
                            // accumulator `[BM, DP]`, whose mma layout holds 2 elements per
                            // thread: 4-byte copies — layouts are per shape; on sm_90 such
                            // tiles take TMA, but paged ones (pointer loads) do not: the
                            // library then steps 32 keys)
                            if sizes.len() != wide && ((sm == 90 && paged == 0) || bm != 64) {
                                failures.push(format!("{what}: cp.async narrower than 16 bytes: {} of {}", sizes.len() - wide, sizes.len()));
                            }
                            println!(
                                "{what}: {} regs, {} B spills, {} B smem, {} tensor maps, {} cp.async, {}",
                                r.registers,
                                r.spill_loads + r.spill_stores,
                                p.smem_bytes,
                                p.tensor_maps.len(),
                                sizes.len(),
                                if p.text.contains("wgmma.mma_async") { "wgmma" } else { "mma.sync" }
                            )
                        }
                        Err(log) => failures.push(format!("{what}: ptxas: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
                    },
                }
            }
        }
    }
    let c = ferrotile_kernels::attention::attention_combine::ir();
    for (sp, dp) in [(2i64, 64i64), (16, 128), (64, 256)] {
        for t in [DType::BF16, DType::F16] {
            let spec = specialize(c, &[sp, dp, 1], &[t]).unwrap();
            for sm in [80, 90] {
                let opts = PtxOptions { arg_div: vec![16; guarded_params(c)], ..PtxOptions::new(sm, 4, c.params.len()) };
                match emit(&spec, &opts)
                    .map_err(|e| e.to_string())
                    .and_then(|p| ptxas::assemble(&px, &p.text, sm).map_err(|l| l.lines().take(5).collect::<Vec<_>>().join("\n")))
                {
                    Ok(r) => println!("attention_combine {t} SP={sp} DP={dp} sm_{sm}: {} regs, {} B spills", r.registers, r.spill_loads + r.spill_stores),
                    Err(e) => failures.push(format!("attention_combine {t} SP={sp} DP={dp} sm_{sm}: {e}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The library's attention backward (delta, dK/dV, the GQA sum and dQ)
/// assembles for sm_80 and sm_90 in every tuner configuration; prints
/// registers, spills, the dots' path, tensor maps and what goes through
/// shared memory. On sm_90a every dot must take `wgmma` (the ones whose
/// K is one instruction's — a computed A with 16 or 32 columns — too),
/// with nothing staged, and each loop tile (Q and dO; K and V) must arrive
/// by one bulk copy into one slot that both of its readings share — and
/// the loop-invariant ones too, into slots of their own, where as register
/// A they would take more than 32 registers per thread.
#[test]
fn every_attention_backward_configuration_assembles() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let mut failures = vec![];
    // (`maps`: tensor maps wanted on sm_90 — the loop's two tiles, each
    // loaded once and read both ways)
    let mut check =
        |k: &ferrotile::ir::Kernel, what: String, consts: &[i64], t: DType, warps: u32, stages: u32, want_wgmma: bool, maps: usize, want_staged: usize| {
            let spec = specialize(k, consts, &[t]).unwrap();
            for sm in [80, 90] {
                let opts =
                    PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: stages.saturating_sub(1), ..PtxOptions::new(sm, warps, k.params.len()) };
                let what = format!("{what} {t} sm_{sm}");
                let p = match emit(&spec, &opts) {
                    Ok(p) => p,
                    Err(e) => {
                        failures.push(format!("{what}: emit: {e}"));
                        continue;
                    }
                };
                let wgmma = p.text.contains("wgmma.mma_async");
                if sm == 90 && want_wgmma && (!wgmma || !p.mma_sync_dots.is_empty()) {
                    failures.push(format!("{what}: not every dot on wgmma: {:?}", p.mma_sync_dots));
                }
                let staged = p.conversions.iter().filter(|(_, l)| l.contains("staged")).count();
                if sm == 90 && (p.tensor_maps.len() != maps || staged != want_staged) {
                    failures.push(format!("{what}: {} tensor maps (want {maps}), {staged} operands staged (want {want_staged})", p.tensor_maps.len()));
                }
                match ptxas::assemble(&px, &p.text, sm) {
                    Ok(r) => println!(
                        "{what}: {} regs, {} B spills, {} B smem, {} tensor maps, {} staged, {}",
                        r.registers,
                        r.spill_loads + r.spill_stores,
                        p.smem_bytes,
                        p.tensor_maps.len(),
                        staged,
                        if wgmma {
                            "wgmma"
                        } else if p.text.contains("mma.sync") {
                            "mma.sync"
                        } else {
                            "no mma"
                        }
                    ),
                    Err(log) => failures.push(format!("{what}: ptxas: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
                }
            }
        };
    use ferrotile_kernels::attention as a;
    for dp in [64i64, 128, 256] {
        let (dkdv, dq) = a::backward_candidates(dp as usize);
        for tc in dkdv {
            let (bm, bn) = (tc.get("BM").unwrap(), tc.get("BN").unwrap());
            // (G, MASK_HI, MASK_LO, ACC, DQ: dQ by atomics)
            for (t, g, hi, lo, acc, dq) in
                [(DType::BF16, 1, 0, 0, 0, 0), (DType::F16, 4, 1, 1, 1, 0), (DType::BF16, 1, 0, 0, 0, 1), (DType::F16, 4, 1, 1, 1, 1)]
            {
                let what = format!("attention_bwd_dkdv D={dp} G={g} hi={hi} lo={lo} acc={acc} dq={dq} {tc}");
                // (K and V in invariant slots too where, as register A, they would
                // take more than 32 registers per thread)
                let maps = if 2 * bn * dp * 2 / (tc.num_warps as i64 * 32) > 128 { 4 } else { 2 };
                // (dQ by atomics: `dQᵀ = Kᵀ·dSᵀ` reads K's slot the other
                // way and stages the computed dSᵀ as its B, K-major; on
                // `wgmma` where its DP rows fill the warpgroups, else on
                // `mma.sync` with both operands staged)
                let wg = dq == 0 || dp % (16 * tc.num_warps as i64) == 0;
                let staged = [0, if wg { 1 } else { 2 }][dq as usize];
                check(a::attention_bwd_dkdv::ir(), what, &[bm, bn, dp, g, hi, lo, acc, dq], t, tc.num_warps, tc.num_stages, wg, maps, staged);
            }
        }
        for tc in dq {
            let (bm, bn) = (tc.get("BM").unwrap(), tc.get("BN").unwrap());
            for (t, g, hi, lo) in [(DType::BF16, 1, 0, 0), (DType::F16, 4, 1, 1)] {
                let what = format!("attention_bwd_dq D={dp} G={g} hi={hi} lo={lo} {tc}");
                let maps = if 2 * bm * dp * 2 / (tc.num_warps as i64 * 32) > 128 { 4 } else { 2 };
                check(a::attention_bwd_dq::ir(), what, &[bm, bn, dp, g, hi, lo], t, tc.num_warps, tc.num_stages, true, maps, 0);
            }
        }
        for zero in [0, 1] {
            check(a::attention_bwd_pre::ir(), format!("attention_bwd_pre D={dp} ZERO={zero}"), &[64, dp, zero], DType::BF16, 4, 1, false, 0, 0);
        }
        check(a::attention_bwd_dq_cast::ir(), format!("attention_bwd_dq_cast D={dp}"), &[64, dp], DType::BF16, 4, 1, false, 0, 0);
        check(a::attention_bwd_sum::ir(), format!("attention_bwd_sum D={dp}"), &[32, dp, 4], DType::F16, 4, 1, false, 0, 0);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The library's variable-length forward (offsets loaded from
/// `cu_seqlens`: no tensor maps) assembles for sm_80 and sm_90 in the
/// forward's tuner configurations; on sm_90a both dots take `wgmma` and
/// nothing is staged (K arrives by `cp.async` into a slot read K-major
/// through `trans`, V into an N-major one).
#[test]
fn attention_varlen_assembles() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let mut failures = vec![];
    for dp in [64i64, 128] {
        for tc in ferrotile_kernels::attention::attention_candidates(dp as usize) {
            let (bm, bn) = (tc.get("BM").unwrap(), tc.get("BN").unwrap());
            // (the overlapped loop where the candidate asks for it, with
            // the producer warpgroup likewise: the varlen forward runs
            // the dense forward's configurations)
            let ov = tc.get("OV").is_ok_and(|v| v != 0);
            let ws = tc.get("WS").is_ok_and(|v| v != 0);
            let (k, name) = if ov {
                (ferrotile_kernels::attention::attention_fwd_varlen_overlap::ir(), "attention_fwd_varlen_overlap")
            } else {
                (ferrotile_kernels::attention::attention_fwd_varlen::ir(), "attention_fwd_varlen")
            };
            let default = {
                let c = ferrotile_kernels::attention::AttentionConfig::from_tune(&tc).unwrap();
                let d = ferrotile_kernels::attention::AttentionConfig::default_for_kind(ferrotile::DeviceKind::Cuda, dp as usize);
                (c.bm, c.bn, c.num_warps, c.num_stages, c.overlap, c.warp_specialize) == (d.bm, d.bn, d.num_warps, d.num_stages, d.overlap, d.warp_specialize)
            };
            for (t, g, hi, lo, lse, fold) in [(DType::BF16, 1, 1, 0, 1, 1), (DType::F16, 4, 1, 1, 0, 0)] {
                let spec = specialize(k, &[bm, bn, dp, g, hi, lo, lse, fold], &[t]).unwrap();
                for sm in [80, 90] {
                    let opts = PtxOptions {
                        arg_div: vec![16; guarded_params(k)],
                        pipeline: tc.num_stages.saturating_sub(1),
                        warp_specialize: ws,
                        ..PtxOptions::new(sm, tc.num_warps, k.params.len())
                    };
                    let what = format!("{name} {t} D={dp} G={g} hi={hi} lo={lo} {tc} sm_{sm}{}", if default { " (default)" } else { "" });
                    let p = match emit(&spec, &opts) {
                        Ok(p) => p,
                        Err(e) => {
                            failures.push(format!("{what}: emit: {e}"));
                            continue;
                        }
                    };
                    let staged = p.conversions.iter().filter(|(_, l)| l.contains("staged")).count();
                    if sm == 90 && (!p.mma_sync_dots.is_empty() || staged != 0 || !p.text.contains("wgmma.mma_async")) {
                        failures.push(format!("{what}: {staged} staged, on mma.sync: {:?}", p.mma_sync_dots));
                    }
                    if sm == 90 && ov && !p.text.contains("wgmma.wait_group.sync.aligned 1;") {
                        failures.push(format!("{what}: the softmax does not overlap P·V"));
                    }
                    // (sm_90: the sequences' tiles by dynamic TMA views)
                    if sm == 90 && !p.tensor_maps.iter().any(|m| m.view.dynamic) {
                        failures.push(format!("{what}: no dynamic tensor map"));
                    }
                    match ptxas::assemble(&px, &p.text, sm) {
                        Ok(r) => {
                            let spill = r.spill_loads + r.spill_stores;
                            println!("{what}: {} regs, {spill} B spills, {} B smem", r.registers, p.smem_bytes);
                            if default && sm == 90 && spill > 0 {
                                failures.push(format!("{what}: the default configuration spills {spill} B"));
                            }
                        }
                        Err(log) => failures.push(format!("{what}: ptxas: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The conformance case `invariant_operands` on sm_90a: the loop's A tile
/// in one TMA slot both dots read, B and C (read as Cᵀ) each in a one-slot
/// class filled once before the loop (three tensor maps, nothing staged
/// from registers), both dots on `wgmma`; and it assembles for sm_80
/// (registers and staging there).
#[test]
fn invariant_and_shared_slots() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let k = ferrotile_tests::conformance::fused::k_invariant_operands::ir();
    for (bm, kk, n, warps) in [(64i64, 64i64, 64i64, 4u32), (128, 128, 64, 8)] {
        let spec = specialize(k, &[bm, kk, n], &[DType::BF16]).unwrap();
        for sm in [80, 90] {
            let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], ..PtxOptions::new(sm, warps, k.params.len()) };
            let p = emit(&spec, &opts).unwrap_or_else(|e| panic!("BM={bm} K={kk} N={n} sm_{sm}: {e}"));
            if sm == 90 {
                let staged = p.conversions.iter().filter(|(_, l)| l.contains("staged")).count();
                assert!(
                    p.tensor_maps.len() == 3 && staged == 0 && p.mma_sync_dots.is_empty() && p.text.contains("wgmma.mma_async"),
                    "BM={bm} K={kk} N={n}: {} tensor maps, {staged} staged, mma.sync {:?}",
                    p.tensor_maps.len(),
                    p.mma_sync_dots
                );
            }
            let r = ptxas::assemble(&px, &p.text, sm).unwrap_or_else(|l| panic!("BM={bm} sm_{sm}: {l}"));
            println!("invariant_operands BM={bm} K={kk} N={n} sm_{sm}: {} regs, {} B spills", r.registers, r.spill_loads + r.spill_stores);
        }
    }
}

/// The library's quantized GEMM and GEMV, in every tuner candidate (4 and
/// 8 bits, zero points on and off, split or not; the 8-bit ones with a
/// bias and GELU in the epilogue), assemble for sm_80 and
/// sm_90a — and compile the way their speed rests on: each packed word is
/// loaded once per run of weight rows (`assign::load_runs`: no more word
/// loads than words a thread holds), no integer → float conversion goes
/// through `cvt` (the range analysis's OR into 2²³'s mantissa), no spills.
#[test]
fn every_quant_tuner_configuration_assembles() {
    let Some(px) = ptxas::find_or_skip() else { return };
    use ferrotile_kernels::quant as q;
    let mut failures = vec![];
    let mut seen = std::collections::HashSet::new();
    for (m, group, k) in [(1usize, 128usize, 8192usize), (16, 128, 8192), (64, 64, 4096), (128, 32, 4096)] {
        // (the 64-row decode tiles also with the scales on the weights and
        // the MMA in flight: offered with `FERROTILE_INFLIGHT_REG_A=1`)
        let mut cands = q::quant_candidates(m, group, k);
        let scaled: Vec<_> =
            cands.iter().filter(|t| t.values.get("DECODE") == Some(&1) && t.values.get("BM") == Some(&64)).map(|t| t.clone().with("SCALE_W", 1)).collect();
        cands.extend(scaled);
        for tc in cands {
            let (bm, bn, bk, split) = (tc.get("BM").unwrap(), tc.get("BN").unwrap(), tc.get("BK").unwrap(), tc.get("SPLIT_K").unwrap() > 1);
            let decode = tc.values.get("DECODE") == Some(&1);
            let scale_w = tc.values.get("SCALE_W") == Some(&1);
            for (bits, zeros, t) in [(4i64, true, DType::BF16), (8, false, DType::F16)] {
                let gemv = bm == 1 && !decode;
                let g = group as i64;
                // (the W8 f16 ones with a bias and GELU: the epilogue)
                let (bias, act) = if bits == 8 { (1, 2) } else { (0, 0) };
                let even = (k as i64 % bk == 0) as i64;
                let consts: Vec<i64> = if gemv {
                    vec![bn, bk, bits, g, zeros as i64, split as i64, bias, act]
                } else if decode {
                    vec![bn, bm, bk, bits, g, zeros as i64, split as i64, even, bias, act, scale_w as i64]
                } else {
                    vec![bm, bn, bk, bits, g, zeros as i64, split as i64, even, bias, act]
                };
                if !seen.insert((consts.clone(), t, tc.num_warps, tc.num_stages, decode)) {
                    continue;
                }
                let k = if gemv {
                    q::wq_gemv_kernel::ir()
                } else if decode {
                    q::wq_decode_kernel::ir()
                } else {
                    q::wq_gemm_kernel::ir()
                };
                let spec = specialize(k, &consts, &[t]).unwrap();
                for sm in [80, 90] {
                    // (the decode form as the library launches it: unguarded,
                    // the computed weights in the fragments' layout, loaded
                    // vectors in slices, affine addresses)
                    let opts = PtxOptions {
                        arg_div: vec![16; if decode { k.params.len() } else { guarded_params(k) }],
                        pipeline: tc.num_stages.saturating_sub(1),
                        pipeline_every_loop: gemv,
                        operand_layouts: decode,
                        broadcast_slices: decode,
                        affine_addresses: decode,
                        inflight_register_a: scale_w,
                        safety: if decode { ferrotile::ir::passes::guard::Safety::Unchecked } else { ferrotile::ir::passes::guard::Safety::Safe },
                        ..PtxOptions::new(sm, tc.num_warps, k.params.len())
                    };
                    let what = format!(
                        "{} {consts:?} {t} {tc} sm_{sm}",
                        if gemv {
                            "wq_gemv"
                        } else if decode {
                            "wq_decode"
                        } else {
                            "wq_gemm"
                        }
                    );
                    let p = match emit(&spec, &opts) {
                        Ok(p) => p,
                        Err(e) => {
                            failures.push(format!("{what}: emit: {e}"));
                            continue;
                        }
                    };
                    // words a thread holds per K step: BK/P rows × BN columns over the threads
                    let per = 32 / bits;
                    let words = (bk / per * bn) as usize / (32 * tc.num_warps as usize);
                    let word_loads = p
                        .text
                        .lines()
                        .filter(|l| l.contains("ld.global") && l.contains(".s32"))
                        .map(|l| {
                            if l.contains(".v4") {
                                4
                            } else if l.contains(".v2") {
                                2
                            } else {
                                1
                            }
                        })
                        .sum::<usize>();
                    // (the prologue of a pipelined loop loads `stages − 1` steps
                    // more; zero points add one word per group row held)
                    // (the decode form on sm_80: `mma.sync` takes the
                    // computed weights in its own A layout, whose threads
                    // hold pairs of K 8 apart — each word read by two)
                    let budget = (words * if decode && sm == 80 { 2 } else { 1 } + 8) * tc.num_stages.max(1) as usize;
                    if word_loads > budget {
                        failures.push(format!("{what}: {word_loads} 32-bit word loads, at most {budget} expected"));
                    }
                    if p.text.contains("cvt.rn.f32.s32") || p.text.contains("cvt.rz.f32.s32") {
                        failures.push(format!("{what}: an int → float cvt remains"));
                    }
                    match ptxas::assemble(&px, &p.text, sm) {
                        Ok(r) if r.spill_loads + r.spill_stores > 0 => failures.push(format!("{what}: {} B spills", r.spill_loads + r.spill_stores)),
                        Ok(r) => println!("{what}: {} regs, {} word loads", r.registers, word_loads),
                        Err(log) => failures.push(format!("{what}: ptxas: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// i8 dots in `wgmma`-sized tiles (the conformance case `dot_i8_tiles`) on
/// sm_90a: every B mode and A path takes `wgmma` k32 into s32 (no
/// `mma.sync`); B through `trans` of a `[N, K]` block and through a
/// column-major view arrives by TMA into a K-major slot, and A by TMA when
/// block-loaded; a row-major B is staged transposed. Assembles for sm_80
/// (`mma.sync` m16n8k32) and sm_90a, there with no spills where B arrives
/// K-major.
#[test]
fn i8_dots_take_wgmma() {
    let Some(px) = ptxas::find_or_skip() else { return };
    let k = ferrotile_tests::conformance::reduce::k_matmul_i8_tiles::ir();
    let mut failures = vec![];
    for (bm, bn, bk, warps) in [(64i64, 64i64, 128i64, 4u32), (128, 128, 128, 8), (64, 16, 128, 4), (64, 256, 128, 4)] {
        for bmode in 0..3i64 {
            for ptr_a in [false, true] {
                let spec = specialize(k, &[bm, bn, bk, bmode, ptr_a as i64], &[]).unwrap();
                for sm in [80, 90] {
                    let what = format!("BM={bm} BN={bn} BK={bk} B mode {bmode} pointer A {ptr_a} sm_{sm}");
                    let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, ..PtxOptions::new(sm, warps, k.params.len()) };
                    let p = emit(&spec, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
                    if sm == 90 {
                        let maps = p.tensor_maps.len();
                        let want_maps = (!ptr_a) as usize + (bmode != 0) as usize;
                        assert!(
                            p.text.contains(".s32.s8.s8") && p.mma_sync_dots.is_empty() && maps == want_maps,
                            "{what}: wgmma {}, mma.sync {:?}, {maps} tensor maps (want {want_maps}); {:?}",
                            p.text.contains(".s32.s8.s8"),
                            p.mma_sync_dots,
                            p.conversions
                        );
                    }
                    let r = ptxas::assemble(&px, &p.text, sm).unwrap_or_else(|l| panic!("{what}: {l}"));
                    // (sm_80's i8 operands pass through registers a byte
                    // each, pipelined copies included: spills there are
                    // the mma.sync path's, unchanged)
                    // (a row-major B passes through registers a byte per
                    // register, as on sm_80: large tiles spill there)
                    if sm == 90 && bmode != 0 && r.spill_loads + r.spill_stores != 0 {
                        failures.push(format!("{what}: {} regs, {} B spills", r.registers, r.spill_loads + r.spill_stores));
                    }
                    println!("{what}: {} regs, {} B spills", r.registers, r.spill_loads + r.spill_stores);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The library's W8A8 GEMM (and FP8 GEMM) in every tuner candidate, bf16 and f16 out,
/// with and without bias: on sm_90a int8 `wgmma` (k32 into s32) with both
/// operands by TMA (two tensor maps: the activations, and the weights
/// read through `trans` of their K-major slot) and a producer warpgroup
/// (both launches ask for one), no spills — the tiles loop of a
/// persistent grid included, its epilogue staged through a band of
/// shared memory of its own; assembles for sm_80 too (`mma.sync`
/// m16n8k32).
#[test]
fn every_w8a8_tuner_configuration_assembles() {
    let Some(px) = ptxas::find_or_skip() else { return };
    use ferrotile_kernels::quant as q;
    let k = q::w8a8_gemm_kernel::ir();
    let mut failures = vec![];
    for tc in q::w8a8_candidates(1).into_iter().chain(q::w8a8_candidates(4096)) {
        for (t, bias) in [(DType::BF16, true), (DType::F16, false)] {
            let split = tc.get("SPLIT_K").unwrap() > 1;
            let consts = vec![tc.get("BM").unwrap(), tc.get("BN").unwrap(), tc.get("BK").unwrap(), 8, bias as i64, 0, split as i64];
            let spec = specialize(k, &consts, &[t]).unwrap();
            for sm in [80, 90] {
                let what = format!("w8a8 {consts:?} {t} {tc} sm_{sm}");
                // (as the launch asks: a producer warpgroup where the loop
                // qualifies — sm_90a's TMA rings)
                let opts = PtxOptions {
                    arg_div: vec![16; guarded_params(k)],
                    pipeline: tc.num_stages.saturating_sub(1),
                    warp_specialize: sm == 90,
                    ..PtxOptions::new(sm, tc.num_warps, k.params.len())
                };
                let p = match emit(&spec, &opts) {
                    Ok(p) => p,
                    Err(e) => {
                        failures.push(format!("{what}: emit: {e}"));
                        continue;
                    }
                };
                if sm == 90 && !(p.text.contains(".s32.s8.s8") && p.mma_sync_dots.is_empty() && p.tensor_maps.len() == 2) {
                    failures.push(format!(
                        "{what}: wgmma s8 {}, mma.sync {:?}, {} tensor maps",
                        p.text.contains(".s32.s8.s8"),
                        p.mma_sync_dots,
                        p.tensor_maps.len()
                    ));
                }
                match ptxas::assemble(&px, &p.text, sm) {
                    Ok(r) if sm == 90 && r.spill_loads + r.spill_stores > 0 => failures.push(format!("{what}: {} B spills", r.spill_loads + r.spill_stores)),
                    Ok(r) => println!("{what}: {} regs, {} B smem", r.registers, p.smem_bytes),
                    Err(log) => failures.push(format!("{what}: ptxas: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
                }
            }
        }
    }
    // the library's FP8 GEMM in every tuner candidate (sm_90a): row-wise
    // and per-tensor scales, and the block-wise list
    let k = q::fp8_gemm_kernel::ir();
    let both = [1, 4096]
        .into_iter()
        .flat_map(|m| q::fp8_candidates(m, false).into_iter().map(|c| (c, false)).chain(q::fp8_candidates(m, true).into_iter().map(|c| (c, true))));
    let mut seen = std::collections::HashSet::new();
    for (tc, blockwise) in both {
        // (split K — the few-rows lists — is a constexpr; its K range a
        // launch argument)
        let split = tc.get("SPLIT_K").unwrap_or(1) > 1;
        if !seen.insert((tc.get("BM").ok(), tc.get("BN").ok(), tc.get("BK").ok(), tc.num_warps, tc.num_stages, split, blockwise)) {
            continue;
        }
        let modes: &[(DType, i64)] = if blockwise { &[(DType::F8E4M3, 2)] } else { &[(DType::F8E4M3, 1), (DType::F8E5M2, 0)] };
        for &(t, scales) in modes {
            let consts = vec![tc.get("BM").unwrap(), tc.get("BN").unwrap(), tc.get("BK").unwrap(), 8, 1, scales, 1, 0, split as i64];
            let spec = specialize(k, &consts, &[t, DType::BF16]).unwrap();
            let what = format!("fp8_gemm {consts:?} {t} {tc}");
            // (with the producer warpgroup, as the launch asks; block-wise:
            // the scales loaded in the accumulator's slice, as it asks too;
            // `rotate_chains` on, as the runtime's default, finds nothing
            // to rotate — the block-scaled dot is not a chain)
            let opts = PtxOptions {
                arg_div: vec![16; guarded_params(k)],
                pipeline: tc.num_stages.saturating_sub(1),
                warp_specialize: true,
                broadcast_slices: blockwise,
                rotate_chains: true,
                ..PtxOptions::new(90, tc.num_warps, k.params.len())
            };
            let p = match emit(&spec, &opts) {
                Ok(p) => p,
                Err(e) => {
                    failures.push(format!("{what}: emit: {e}"));
                    continue;
                }
            };
            if !(p.text.contains(".f32.e4m3.e4m3") || p.text.contains(".f32.e5m2.e5m2")) || p.tensor_maps.len() != 2 || !p.mma_sync_dots.is_empty() {
                failures.push(format!("{what}: no fp8 wgmma with two tensor maps ({} maps)", p.tensor_maps.len()));
            }
            if p.rotated_loops != 0 {
                failures.push(format!("{what}: {} loops rotated", p.rotated_loops));
            }
            // (a producer warpgroup: 4 warps more than the consumers)
            if p.threads != (tc.num_warps + 4) * 32 {
                failures.push(format!("{what}: {} threads, no producer warpgroup", p.threads));
            }
            match ptxas::assemble(&px, &p.text, 90) {
                Ok(r) if r.spill_loads + r.spill_stores > 0 => failures.push(format!("{what}: {} B spills", r.spill_loads + r.spill_stores)),
                Ok(r) => println!("{what}: {} regs", r.registers),
                Err(log) => failures.push(format!("{what}: ptxas: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
            }
        }
    }
    // clusters of two (`CLUSTER = 2`, `PtxOptions::cluster` 2): the pair's
    // tile of `b` depends on `program_id(0) / 2` only, so its copies
    // multicast (256-deep steps: two 128-byte column atoms, one issued by
    // each program); the pair's own `a` tiles do not, nor does `b` when
    // the kernel pairs nothing (`CLUSTER = 1`)
    for (cl, bk, ws) in [(2i64, 256i64, false), (2, 256, true), (1, 256, false), (2, 128, false)] {
        let consts = vec![128, 256, bk, 8, cl, 1, 1, 0, 0];
        let spec = specialize(k, &consts, &[DType::F8E4M3, DType::BF16]).unwrap();
        let what = format!("fp8_gemm {consts:?} cluster 2 ws {ws}");
        let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, cluster: 2, warp_specialize: ws, ..PtxOptions::new(90, 8, k.params.len()) };
        let p = match emit(&spec, &opts) {
            Ok(p) => p,
            Err(e) => {
                failures.push(format!("{what}: emit: {e}"));
                continue;
            }
        };
        let mcast = p.text.lines().filter(|l| l.contains(".multicast::cluster")).count();
        if (mcast > 0) != (cl == 2 && bk == 256) {
            failures.push(format!("{what}: {mcast} multicast copies"));
        }
        // (`b` is read through `trans`: its copies still go to the producer)
        if p.threads != if ws { 12 * 32 } else { 8 * 32 } {
            failures.push(format!("{what}: {} threads", p.threads));
        }
        match ptxas::assemble(&px, &p.text, 90) {
            Ok(r) if r.spill_loads + r.spill_stores > 0 => failures.push(format!("{what}: {} B spills", r.spill_loads + r.spill_stores)),
            Ok(r) => println!("{what}: {} regs, {mcast} multicast copies", r.registers),
            Err(log) => failures.push(format!("{what}: ptxas: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The conformance case `fp8`'s kernels assemble for sm_80 and sm_90a
/// (fp8 codes decoded and encoded by bit operations on every target), and
/// its dot in `wgmma` tiles takes `wgmma` e4m3/e5m2 into f32 with both
/// operands by TMA (A, and B through `trans` of its K-major slot), without
/// spills; on sm_80 it runs on the FMA path.
#[test]
fn fp8_kernels_assemble_and_dots_take_wgmma() {
    let Some(px) = ptxas::find_or_skip() else { return };
    use ferrotile_tests::conformance::fp8::{k_fp8_dot, k_fp8_encode, k_fp8_ops};
    let mut failures = vec![];
    for t in [DType::F8E4M3, DType::F8E5M2] {
        let mut cases: Vec<(&str, &ferrotile::ir::Kernel, Vec<i64>, u32)> =
            vec![("encode", k_fp8_encode::ir(), vec![256], 4), ("ops", k_fp8_ops::ir(), vec![128], 4)];
        for (bm, bn, bk, w) in [(64i64, 64i64, 128i64, 4u32), (128, 128, 128, 8), (64, 16, 256, 4)] {
            cases.push(("dot", k_fp8_dot::ir(), vec![bm, bn, bk], w));
        }
        for (name, k, consts, warps) in cases {
            let spec = specialize(k, &consts, &[t]).unwrap();
            for sm in [80, 90] {
                let what = format!("{name} {consts:?} {t} sm_{sm}");
                let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, ..PtxOptions::new(sm, warps, k.params.len()) };
                let p = match emit(&spec, &opts) {
                    Ok(p) => p,
                    Err(e) => {
                        failures.push(format!("{what}: emit: {e}"));
                        continue;
                    }
                };
                let ty = if t == DType::F8E4M3 { "e4m3" } else { "e5m2" };
                if name == "dot" && sm == 90 && !(p.text.contains(&format!(".f32.{ty}.{ty}")) && p.tensor_maps.len() == 2) {
                    failures.push(format!("{what}: wgmma {ty} {}, {} tensor maps", p.text.contains(&format!(".f32.{ty}.{ty}")), p.tensor_maps.len()));
                }
                match ptxas::assemble(&px, &p.text, sm) {
                    // (sm_80's FMA-path dot holds these wgmma-sized tiles a
                    // code per register, pipelined: it spills, as i8 does)
                    Ok(r) if r.spill_loads + r.spill_stores > 0 && !(name == "dot" && sm == 80) => {
                        failures.push(format!("{what}: {} B spills", r.spill_loads + r.spill_stores))
                    }
                    Ok(r) => println!("{what}: {} regs, {} B spills", r.registers, r.spill_loads + r.spill_stores),
                    Err(log) => failures.push(format!("{what}: ptxas: {}", log.lines().take(5).collect::<Vec<_>>().join("\n"))),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The variable-length backward (dK/dV and dQ with sequence bounds loaded
/// from `cu_seqlens`: no tensor maps) assembles for sm_80 and sm_90 in the
/// backward's tuner configurations (printed: registers, spills, the dots'
/// path), compiled as the CUDA runtime does: where the first compilation
/// spills and loop-invariant operands could take `cp.async`-filled slots
/// (`PtxKernel::cp_invariant_slots`), again with them, and the one with
/// fewer spills kept. The tiles the library launches by default on CUDA
/// up to d128 (64×64 in both loops) must, on sm_90a, run every dot on
/// `wgmma` with nothing staged and spill nothing — at d128 the dK/dV
/// kernel's K and V spill as register A, and not from their slots.
#[test]
fn attention_varlen_backward_assembles() {
    let Some(px) = ptxas::find_or_skip() else { return };
    use ferrotile_kernels::attention as a;
    let mut failures = vec![];
    let mut slots_used = 0;
    for dp in [64i64, 128, 256] {
        let (dkdv, dq) = a::backward_candidates(dp as usize);
        let jobs =
            dkdv.iter().map(|tc| (a::attention_bwd_dkdv_varlen::ir(), "dkdv", tc)).chain(dq.iter().map(|tc| (a::attention_bwd_dq_varlen::ir(), "dq", tc)));
        for (k, which, tc) in jobs {
            let (bm, bn) = (tc.get("BM").unwrap(), tc.get("BN").unwrap());
            let is_default = dp <= 128 && (bm, bn) == (64, 64) && tc.num_warps == 4 && tc.num_stages == 2;
            // (dK/dV with dQ by atomics too, assembled on sm_90 with TMA)
            let dqs: &[i64] = if which == "dkdv" { &[0, 1] } else { &[0] };
            for (t, g, hi, lo, dq) in
                [(DType::BF16, 1, 0, 0), (DType::F16, 4, 1, 1)].into_iter().flat_map(|(t, g, hi, lo)| dqs.iter().map(move |&dq| (t, g, hi, lo, dq)))
            {
                let is_default = is_default && dq == 0;
                let mut consts = vec![bm, bn, dp, g, hi, lo];
                if which == "dkdv" {
                    // (ACC, DQ)
                    consts.extend([(g > 1) as i64, dq]);
                }
                let spec = specialize(k, &consts, &[t]).unwrap();
                // (sm_90: the sequences' tiles by TMA copies of their
                // dynamic views, and without them — `FERROTILE_TMA_DYNAMIC=0`,
                // or maps the launch cannot build — by `cp.async`)
                for (sm, dynamic) in [(80, false), (90, true), (90, false)] {
                    if dq == 1 && (sm, dynamic) != (90, true) {
                        continue;
                    }
                    let opts = PtxOptions {
                        arg_div: vec![16; guarded_params(k)],
                        pipeline: tc.num_stages.saturating_sub(1),
                        tma_dynamic: dynamic,
                        ..PtxOptions::new(sm, tc.num_warps, k.params.len())
                    };
                    let what =
                        format!("attention_bwd_{which}_varlen {t} D={dp} G={g} hi={hi} lo={lo} dq={dq} {tc} sm_{sm}{}", if dynamic { " tma" } else { "" });
                    let compiled = emit(&spec, &opts).map_err(|e| e.to_string()).and_then(|p| {
                        let r = ptxas::assemble(&px, &p.text, sm).map_err(|l| l.lines().take(5).collect::<Vec<_>>().join("\n"))?;
                        if r.spill_loads + r.spill_stores == 0 || p.cp_invariant_slots == 0 {
                            return Ok((p, r, false));
                        }
                        let p2 = emit(&spec, &PtxOptions { cp_invariant_slots: true, ..opts.clone() }).map_err(|e| e.to_string())?;
                        let r2 = ptxas::assemble(&px, &p2.text, sm).map_err(|l| l.lines().take(5).collect::<Vec<_>>().join("\n"))?;
                        Ok(if r2.spill_loads + r2.spill_stores < r.spill_loads + r.spill_stores { (p2, r2, true) } else { (p, r, false) })
                    });
                    let (p, r, slots) = match compiled {
                        Ok(x) => x,
                        Err(e) => {
                            failures.push(format!("{what}: {e}"));
                            continue;
                        }
                    };
                    slots_used += slots as u32;
                    // (the slots are waited for once, at the loop's entry: a
                    // `dot` inside waiting for all copies would stall the
                    // pipeline every iteration)
                    let waits_all = p.text.matches("cp.async.wait_group 0;").count();
                    if slots && waits_all != 1 {
                        failures.push(format!("{what}: {waits_all} waits for every copy (want 1, before the loop)"));
                    }
                    let staged = p.conversions.iter().filter(|(_, l)| l.contains("staged")).count();
                    let wgmma = p.mma_sync_dots.is_empty() && p.text.contains("wgmma.mma_async");
                    let spill = r.spill_loads + r.spill_stores;
                    println!(
                        "{what}: {} regs, {spill} B spills, {} B smem, {staged} staged, {}{}{}",
                        r.registers,
                        p.smem_bytes,
                        if wgmma { "wgmma" } else { "mma.sync" },
                        if slots { ", invariant operands in cp.async slots" } else { "" },
                        if is_default { " (default)" } else { "" }
                    );
                    if is_default && sm == 90 && (spill > 0 || staged > 0 || !wgmma) {
                        failures.push(format!("{what}: the default tiles: {spill} B spills, {staged} staged, on mma.sync {:?}", p.mma_sync_dots));
                    }
                    // (the loops' Q/dO or K/V tiles by bulk copies, their
                    // views' bounds applied in the kernel)
                    let bulk = p.text.matches("cp.async.bulk.tensor").count();
                    if is_default && dynamic && (bulk == 0 || !p.text.contains("st.shared.v4.b32") || p.tensor_maps.iter().any(|m| !m.view.dynamic)) {
                        failures.push(format!(
                            "{what}: the default tiles: {bulk} bulk copies, maps {:?}",
                            p.tensor_maps.iter().map(|m| m.view.dynamic).collect::<Vec<_>>()
                        ));
                    }
                }
            }
        }
    }
    assert!(slots_used > 0, "no configuration took cp.async invariant slots");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Views at offsets and of extents loaded in the kernel (the conformance
/// case `segment_sum`, a varlen batch's segments): on sm_90 their block
/// loads are bulk tensor copies of a *dynamic* map (the buffer from the
/// launch-invariant base; the kernel adds the loaded row offset to the
/// coordinate and zeroes the rows outside the segment), with the guards
/// (the view is checked in the kernel, not on the host) and without, in
/// one stream and with the producer warpgroup (which then loads the
/// offsets itself and records the bounds; the consumers' zeroing meets at
/// their named barrier); off with `tma_dynamic = false` (`cp.async`).
/// Each assembles for sm_90a, and the same kernel written with `#[func]`s
/// (one returns the view, another reads it) emits the same PTX.
#[test]
fn dynamic_tma_views_assemble() {
    use ferrotile::ir::passes::Safety;
    let Some(px) = ptxas::find_or_skip() else { return };
    let k = ferrotile_tests::conformance::fused::k_segment_sum::ir();
    let spec = specialize(k, &[64, 64, 64], &[DType::BF16]).unwrap();
    for (safety, dynamic, ws) in [(Safety::Safe, true, false), (Safety::Unchecked, true, false), (Safety::Safe, true, true), (Safety::Safe, false, false)] {
        let params = if safety == Safety::Unchecked { k.params.len() } else { guarded_params(k) };
        let opts =
            PtxOptions { arg_div: vec![16; params], pipeline: 2, safety, tma_dynamic: dynamic, warp_specialize: ws, ..PtxOptions::new(90, 4, k.params.len()) };
        let what = format!("{safety:?} dynamic={dynamic} ws={ws}");
        let p = emit(&spec, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
        let bulk = p.text.matches("cp.async.bulk.tensor").count();
        let maps: Vec<bool> = p.tensor_maps.iter().map(|m| m.view.dynamic).collect();
        if dynamic {
            assert!(bulk > 0 && maps == [true], "{what}: {bulk} bulk copies, maps {maps:?}");
            // (the valid rows recorded per fill, read back after each wait)
            assert!(p.text.contains("st.shared.v2.u32") && p.text.contains("ld.shared.v2.u32"), "{what}: no valid-row ranges");
        } else {
            assert!(bulk == 0 && maps.is_empty(), "{what}: {bulk} bulk copies");
        }
        if ws {
            // (the producer warpgroup: four warps more; the consumers' barrier)
            assert!(p.threads == 256 && p.text.contains("bar.sync 1, 128;"), "{what}: {} threads", p.threads);
        }
        let r = ptxas::assemble(&px, &p.text, 90).unwrap_or_else(|l| panic!("{what}: {l}"));
        assert_eq!(r.spill_loads + r.spill_stores, 0, "{what}: spills");
        // the same kernel with its view returned by one #[func] and read
        // by another (`func_segment_view`): the same PTX, name aside
        let kf = ferrotile_tests::conformance::funcs::k_func_segment_sum::ir();
        let pf = emit(&specialize(kf, &[64, 64, 64], &[DType::BF16]).unwrap(), &opts).unwrap_or_else(|e| panic!("{what} (func): {e}"));
        assert!(pf.text.replace("k_func_segment_sum", "k_segment_sum") == p.text, "{what}: the #[func] form's PTX differs");
    }
}
