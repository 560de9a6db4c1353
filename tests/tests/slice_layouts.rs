//! Slice layouts ([`ferrotile_backends::plan::slices`]): row statistics of
//! multi-row programs stay in the registers their reduction leaves them in,
//! broadcast back into their rows without shared memory, are carried
//! through loops and branches and stored from there. The results are
//! checked on every device by the conformance case `row_stats`; here, the
//! code: the barriers left are exactly the cross-warp steps of reductions,
//! and ptxas accepts it.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType};
use ferrotile::prelude::*;
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use ferrotile_tests::conformance::reduce::k_row_stats;

/// A multi-row softmax as a user writes it.
#[kernel]
pub fn softmax_rows<const R: i32, const B: i32>(x: Ptr<f32>, y: Ptr<f32>, m: i32, n: i32) {
    let rows = program_id(0) * R + arange(0, R);
    let cols = arange(0, B);
    let mask = expand_dims(rows < m, 1) & expand_dims(cols < n, 0);
    let offs = expand_dims(rows, 1) * n + expand_dims(cols, 0);
    let v = load(x + offs, mask, f32::NEG_INFINITY);
    let e = exp(v - expand_dims(max(v, axis = 1), 1));
    store(y + offs, e * expand_dims(1.0 / sum(e, 1), 1), mask);
}

/// Rows that fit in one warp's lanes (8 × 256 f32 over 4 warps: a warp per
/// two rows) need no barrier at all: both statistics reduce with shuffles
/// and broadcast back in registers. Rows spread over warps keep exactly the
/// cross-warp step of each reduction: two barriers each (after the
/// partials' store, after their read) — the barrier before a store into
/// the scratch is left out where nothing touched shared memory since the
/// last one (the kernel's start, the previous reduction's trailing
/// barrier: `bar_before_scratch_write`).
#[test]
fn softmax_rows_barriers() {
    let k = softmax_rows::ir();
    for (r, b, warps, want) in [(8, 256, 4, 0), (2, 4096, 8, 4)] {
        let spec = specialize(k, &[r, b], &[]).unwrap();
        let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], ..PtxOptions::new(90, warps, k.params.len()) };
        let p = emit(&spec, &opts).unwrap();
        assert_eq!(bars(&p.text), want, "R={r} B={b} warps={warps}");
    }
}

fn bars(text: &str) -> usize {
    text.matches("bar.sync").count()
}

#[test]
fn row_statistics_broadcast_back_without_shared_memory() {
    let k = k_row_stats::ir();
    let px = ptxas::find_or_skip();
    // (R, B, C, warps, barriers with slice layouts: only the cross-warp
    // steps of reductions whose rows span warps — at 4 × 1024 on 8 warps,
    // two warps per row: 4 reductions of the tile and 2 per chunk of the
    // online loop, 3 barriers each, less the 4 barriers before a store into
    // the scratch that follows another barrier with no shared-memory access
    // in between)
    for (r, b, c, warps, want) in [(8, 256, 64, 4, 0), (4, 1024, 256, 8, 14), (16, 64, 32, 2, 0)] {
        let spec = specialize(k, &[r, b, c], &[]).unwrap();
        let mut counts = vec![];
        for slices in [false, true] {
            let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], slice_layouts: slices, ..PtxOptions::new(90, warps, k.params.len()) };
            let p = emit(&spec, &opts).unwrap();
            counts.push(bars(&p.text));
            if let Some(px) = &px {
                if let Err(log) = ptxas::assemble(px, &p.text, 90) {
                    panic!("ptxas R={r} B={b} slices={slices}: {log}");
                }
            }
        }
        println!("R={r} B={b} C={c} warps={warps}: bar.sync {} → {}", counts[0], counts[1]);
        assert!(counts[1] < counts[0], "R={r} B={b}: slices should save barriers: {counts:?}");
        assert_eq!(counts[1], want, "R={r} B={b} warps={warps}");
    }
}

/// The library's multi-row softmax for every tuner shape it can take
/// (2048–8192 elements per tile, 4 and 8 warps) and dtype: no barrier where
/// a row fits in a warp, and ptxas accepts every one for sm_80 and sm_90.
#[test]
fn library_multi_row_softmax_assembles() {
    let k = ferrotile_kernels::softmax::softmax_rows::ir();
    let px = ptxas::find_or_skip();
    for dt in [DType::F32, DType::BF16, DType::F16] {
        for b in [32i64, 64, 128, 256, 512, 1024, 2048] {
            for r in [2i64, 4, 8, 16, 32, 64] {
                if !(2048..=8192).contains(&(r * b)) {
                    continue;
                }
                let spec = specialize(k, &[r, b], &[dt]).unwrap();
                for warps in [4u32, 8] {
                    for sm in [80, 90] {
                        let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], ..PtxOptions::new(sm, warps, k.params.len()) };
                        let p = emit(&spec, &opts).unwrap();
                        // a row of `b` elements spans b / (16 bytes per lane · 32 lanes) warps
                        let per_warp = 32 * 16 / dt.size_bytes() as i64;
                        if b <= per_warp {
                            assert_eq!(bars(&p.text), 0, "{dt} R={r} B={b} warps={warps}");
                        }
                        if let Some(px) = &px {
                            if let Err(log) = ptxas::assemble(px, &p.text, sm) {
                                panic!("ptxas {dt} R={r} B={b} warps={warps} sm_{sm}: {log}");
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `FERROTILE_EXPLAIN`'s list of conversions through shared memory
/// (`PtxKernel::conversions`): every reduction result of `row_stats` without
/// slice layouts, none with them; a `dot` whose operand is computed in
/// registers names the staging where it is staged.
#[test]
fn conversions_are_explained() {
    let k = k_row_stats::ir();
    let spec = specialize(k, &[8, 256, 64], &[]).unwrap();
    for slices in [false, true] {
        let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], slice_layouts: slices, ..PtxOptions::new(90, 4, k.params.len()) };
        let p = emit(&spec, &opts).unwrap();
        if slices {
            assert!(p.conversions.is_empty(), "{:?}", p.conversions);
        } else {
            assert!(p.conversions.iter().filter(|(_, w)| w.contains("reduction")).count() >= 5, "{:?}", p.conversions);
        }
    }
    // (register A on: the cast accumulator is the second dot's A
    // fragments, nothing to explain; off: the staging is named)
    let k = two_dots::ir();
    let spec = specialize(k, &[], &[]).unwrap();
    for sm in [80, 90] {
        for register_a in [true, false] {
            let p = emit(&spec, &PtxOptions { arg_div: vec![16; guarded_params(k)], register_a, ..PtxOptions::new(sm, 4, k.params.len()) }).unwrap();
            let staged = p.conversions.iter().any(|(_, w)| w.starts_with("dot operand A [64, 64] staged from registers"));
            assert_eq!(staged, !register_a, "sm_{sm} register_a {register_a}: {:?}", p.conversions);
        }
    }
}

/// A two-dot chain: the second `dot`'s A is the first one's result, cast.
#[kernel]
pub fn two_dots(a: Ptr<f16>, b: Ptr<f16>, c: Ptr<f16>, out: Ptr<f32>) {
    let r = arange(0, 64);
    let k = arange(0, 32);
    let ta = load(a + expand_dims(r, 1) * 32 + expand_dims(k, 0));
    let tb = load(b + expand_dims(k, 1) * 64 + expand_dims(r, 0));
    let p = dot(ta, tb) as f16;
    let tc = load(c + expand_dims(r, 1) * 64 + expand_dims(r, 0));
    store(out + expand_dims(r, 1) * 64 + expand_dims(r, 0), dot(p, tc));
}

/// The layout of every value that is not in its shape's default layout, on
/// the IR of small kernels (canonical layouts over 4 warps, 4 elements per
/// thread; the backward rule on, as WGSL runs it: the convolution's
/// per-channel weights and bias and the MoE step's gather indices are
/// computed in the slice of their broadcasts), snapshotted:
/// `tests/snapshots/slices.*.ir`
/// (`FERROTILE_BLESS=1` rewrites them). Each line of the printed IR that
/// defines such a value ends with its layout.
#[test]
fn slice_layout_snapshots() {
    use ferrotile_backends::plan::{layout::Blocked, slices};
    let fmt = |b: &Blocked| {
        format!("{{{:?}: spt {:?}, lanes {:?}<<{:?}, warps {:?}<<{:?}, reps {:?}}}", b.shape, b.spt, b.tpw, b.lane_shift, b.wpc, b.warp_shift, b.reps)
    };
    let mut errs = vec![];
    use ferrotile_tests::conformance::user::{k_causal_conv1d, k_moe_expert};
    for (name, k, cx, dts) in [
        ("row_stats", k_row_stats::ir(), vec![8i64, 256, 64], vec![]),
        ("softmax_rows", softmax_rows::ir(), vec![8, 256], vec![]),
        ("causal_conv1d", k_causal_conv1d::ir(), vec![32, 64, 4], vec![ferrotile::ir::DType::BF16]),
        ("moe_expert", k_moe_expert::ir(), vec![32, 32, 32], vec![ferrotile::ir::DType::BF16]),
    ] {
        let spec = specialize(k, &cx, &dts).unwrap();
        let map = slices::assign(&spec, &mut |s| Blocked::canonical(s, 4, 4), true);
        let mut out = String::new();
        for line in ferrotile::ir::print::print(&spec).lines() {
            // values defined on this line: results before ` = `, loop-carried
            // arguments inside `iter(..)`
            let mut defs: Vec<u32> = vec![];
            let t = line.trim_start();
            if let Some((lhs, _)) = t.split_once(" = ") {
                if lhs.starts_with('%') {
                    defs.extend(lhs.split(", ").filter_map(|x| x.strip_prefix('%')?.parse::<u32>().ok()));
                }
            }
            if let Some((_, it)) = t.split_once("iter(") {
                defs.extend(it.split(", ").filter_map(|x| x.split(" = ").next()?.strip_prefix('%')?.parse::<u32>().ok()));
            }
            let notes: Vec<String> = defs.iter().filter_map(|d| map.get(&ferrotile::ir::V(*d)).map(|b| format!("%{d} {}", fmt(b)))).collect();
            // source lines are left out: the kernels live in conformance
            // files that grow, and a shifted line is not a layout change
            match line.split_once("// line ") {
                Some((code, rest)) => {
                    out.push_str(code);
                    out.push_str("// ");
                    out.push_str(rest.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start());
                }
                None => out.push_str(line),
            }
            if !notes.is_empty() {
                out.push_str("    ⟨");
                out.push_str(&notes.join("; "));
                out.push('⟩');
            }
            out.push('\n');
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("snapshots/slices.{name}.ir"));
        if std::env::var("FERROTILE_BLESS").is_ok() {
            std::fs::write(&path, &out).unwrap();
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(want) if want == out => {}
            Ok(want) => {
                let first = want.lines().zip(out.lines()).position(|(a, b)| a != b).unwrap_or(want.lines().count().min(out.lines().count()));
                errs.push(format!(
                    "{}: first difference at line {}:\n  golden: {}\n  now:    {}",
                    path.display(),
                    first + 1,
                    want.lines().nth(first).unwrap_or(""),
                    out.lines().nth(first).unwrap_or("")
                ));
            }
            Err(e) => errs.push(format!("{}: {e} (FERROTILE_BLESS=1 creates it)", path.display())),
        }
    }
    assert!(errs.is_empty(), "{}", errs.join("\n"));
}

/// The same plan drives the WGSL printer: `row_stats` keeps only the
/// cross-invocation steps of its reductions (none at 8 × 256 per
/// workgroup of 128) and naga accepts the shader, with and without
/// subgroups.
#[test]
fn wgsl_uses_the_same_slice_layouts() {
    use ferrotile_backends::wgsl::{self, validate::validate, WgslOptions};
    let k = k_row_stats::ir();
    let spec = specialize(k, &[8, 256, 64], &[]).unwrap();
    let mut counts = vec![];
    for slices in [false, true] {
        for subgroups in [false, true] {
            let o = WgslOptions { subgroups, slice_layouts: slices, arg_div: vec![16; guarded_params(k)], ..WgslOptions::default() };
            let w = wgsl::emit(&spec, &o).unwrap();
            if let Err(e) = validate(&w) {
                panic!("naga: slices {slices} subgroups {subgroups}: {e}");
            }
            counts.push(w.text.matches("workgroupBarrier()").count());
        }
    }
    println!("workgroupBarrier (no subgroups, subgroups): slices off {:?}, on {:?}", &counts[..2], &counts[2..]);
    assert!(counts[2] < counts[0] && counts[3] < counts[1], "{counts:?}");
    assert_eq!(counts[3], 0, "with subgroups a row of 256 reduces within a warp's invocations");
}

/// A thread owns as many consecutive elements along a row as the widest
/// access the kernel can make: eight 2-byte elements (16 bytes) when the
/// row stride and length are multiples of 8, two when only of 2 (4-byte
/// accesses), one when odd — then a warp's scalar loads cover consecutive
/// addresses instead of each lane reading its own 16-byte run element by
/// element. The loads follow: `v4.b32`, `v2.b16` pairs or single `b16`s.
#[test]
fn thread_runs_follow_the_widest_access() {
    let k = ferrotile_kernels::softmax::softmax_row::ir();
    let spec = specialize(k, &[1024], &[DType::BF16]).unwrap();
    for (div, elems, load) in [(16u32, 8u32, "ld.global.v4.b32"), (2, 2, "ld.global.v2.b16"), (1, 1, "ld.global.b16")] {
        let p = emit(&spec, &PtxOptions { arg_div: vec![div; guarded_params(k)], ..PtxOptions::new(90, 2, k.params.len()) }).unwrap();
        assert_eq!(p.vector_elems, elems, "arguments divisible by {div}");
        let loads: Vec<&str> = p.text.lines().filter(|l| l.contains("ld.global")).collect();
        assert!(!loads.is_empty() && loads.iter().all(|l| l.contains(load)), "div {div}: {loads:?}");
    }
}

/// A running row max that starts as the max of a block taken before the
/// loop (attention with its first key block peeled off) is carried in the
/// reduction's slice layout: nothing goes through shared memory.
#[kernel]
pub fn k_peeled_max<const R: i32, const B: i32>(x: Ptr<f32>, out: Ptr<f32>, n: i32) {
    let rows = program_id(0) * R + arange(0, R);
    let cols = arange(0, B);
    let row0 = expand_dims(rows * n, 1);
    let mut m = max(load(x + row0 + expand_dims(cols, 0)), axis = 1);
    let mut s = zeros([R], f32);
    for j in (B..n).step_by(B) {
        let t = load(x + row0 + expand_dims(j + cols, 0));
        let m_new = maximum(m, max(t, axis = 1));
        s = s * exp2(m - m_new) + sum(exp2(t - expand_dims(m_new, 1)), 1);
        m = m_new;
    }
    store(out + rows, m + log2(s));
}

#[test]
fn a_peeled_row_max_stays_in_its_slice_layout() {
    let k = k_peeled_max::ir();
    let spec = specialize(k, &[8, 256], &[]).unwrap();
    let opts = PtxOptions { arg_div: vec![16; guarded_params(k)], ..PtxOptions::new(90, 4, k.params.len()) };
    let p = emit(&spec, &opts).unwrap();
    assert!(p.conversions.is_empty(), "{:?}", p.conversions);
}

/// The backward rule on PTX (`PtxOptions::broadcast_slices`, off by
/// default until it has run on a GPU): a user's causal convolution (weights
/// and bias loaded per channel, broadcast over positions) and MoE step
/// (token indices loaded for a gather, broadcast over K and N) need no
/// conversion through shared memory with it, and do without it; both
/// assemble for sm_80 and sm_90 without spills either way.
#[test]
fn loaded_vectors_broadcast_from_their_slice() {
    use ferrotile::ir::passes::guard::Safety;
    use ferrotile_tests::conformance::user::{k_causal_conv1d, k_moe_expert};
    for (name, k, cx, stages) in [("causal_conv1d", k_causal_conv1d::ir(), vec![64i64, 64, 4], 1u32), ("moe_expert", k_moe_expert::ir(), vec![64, 64, 64], 3)] {
        let spec = specialize(k, &cx, &[DType::BF16]).unwrap();
        for sm in [80, 90] {
            for on in [false, true] {
                for safety in [Safety::Safe, Safety::Unchecked] {
                    let o = PtxOptions {
                        arg_div: vec![16; guarded_params(k)],
                        pipeline: stages - 1,
                        safety,
                        broadcast_slices: on,
                        ..PtxOptions::new(sm, 4, k.params.len())
                    };
                    let p = emit(&spec, &o).unwrap();
                    assert_eq!(p.conversions.is_empty(), on, "{name} sm_{sm} {safety:?} broadcast_slices {on}: {:?}", p.conversions);
                    if let Some(px) = ptxas::find_or_skip() {
                        let r = ptxas::assemble(&px, &p.text, sm).unwrap_or_else(|e| panic!("{name} sm_{sm} {on}: {e}"));
                        assert_eq!(r.spill_loads + r.spill_stores, 0, "{name} sm_{sm} {safety:?} {on}: spills");
                    }
                }
            }
        }
    }
}

/// The backward rule through a pipelined loop: the attention backward's
/// dK/dV loop loads each query block's log-sum-exp and `delta` (vectors
/// broadcast over the block's keys), and pipelining turns each load into a
/// prologue load, a prefetch and a loop-carried value. With
/// `broadcast_slices` they are loaded, carried and used in the slice of
/// the scores' `wgmma` layout: no conversion and 6 barriers fewer (of 13)
/// at the library's default tiles (32 query rows a step). With 64 rows a
/// step the two carried slices would hold 16 registers each across the
/// loop (spilling offline, next to 255 live registers): they keep the
/// conversion (`MAX_SLICE_REGS` counts each carried copy). Without the
/// rule, each vector's `expand_dims` and broadcast convert in one trip
/// through shared memory (`PtxOptions::expand_broadcast`; two trips and 17
/// barriers without it). All assemble for sm_90a without spills.
#[test]
fn pipelined_loaded_vectors_broadcast_from_their_slice() {
    use ferrotile::ir::passes::guard::Safety;
    let k = ferrotile_kernels::attention::attention_bwd_dkdv::ir();
    for (bm, sliced) in [(32i64, true), (64, false)] {
        // BM, BN, DP, G, MASK_HI, MASK_LO, ACC, DQ
        let spec = specialize(k, &[bm, 64, 64, 1, 1, 0, 0, 0], &[DType::BF16]).unwrap();
        let opts = |on, fused| PtxOptions {
            arg_div: vec![16; k.params.len()],
            pipeline: 1,
            safety: Safety::Unchecked,
            broadcast_slices: on,
            expand_broadcast: fused,
            ..PtxOptions::new(90, 4, k.params.len())
        };
        let (two, off, on) = (emit(&spec, &opts(false, false)).unwrap(), emit(&spec, &opts(false, true)).unwrap(), emit(&spec, &opts(true, true)).unwrap());
        assert_eq!((two.conversions.len(), bars(&two.text)), (4, 17), "BM={bm} two trips: {:?}", two.conversions);
        assert_eq!(off.conversions.len(), 2, "BM={bm} off: {:?}", off.conversions);
        assert!(off.conversions.iter().all(|(_, w)| w.contains("expanded to")), "{:?}", off.conversions);
        assert_eq!(off.broadcast_slices, 0);
        if sliced {
            assert!(on.conversions.is_empty() && on.broadcast_slices > 0, "BM={bm}: {:?}", on.conversions);
            assert_eq!((bars(&off.text), bars(&on.text)), (13, 7), "BM={bm}: barriers");
        } else {
            assert_eq!((on.conversions.len(), on.broadcast_slices, &on.text), (2, 0, &off.text), "BM={bm}: {:?}", on.conversions);
        }
        if let Some(px) = ptxas::find_or_skip() {
            for p in [&two, &off, &on] {
                let r = ptxas::assemble(&px, &p.text, 90).unwrap_or_else(|e| panic!("BM={bm}: {e}"));
                assert_eq!(r.spill_loads + r.spill_stores, 0, "BM={bm}: spills");
            }
        }
    }
}
