//! The software-pipelining pass (`ferrotile_ir::passes::pipeline`) preserves
//! semantics: the library GEMM kernel, specialized and pipelined, verifies
//! and computes bit-identical results to the unpipelined kernel on the CPU
//! interpreter, for K that is not a multiple of the block (masked tails),
//! K smaller than one block, and K = 0 (the loop runs zero times: the
//! prologue's loads must be masked off, which the interpreter's bounds
//! checks would catch). Also with split-K's K ranges (loops that start at
//! a multiple of the block other than 0 and end before K).

use ferrotile::bf16;
use ferrotile::ir::{passes::pipeline::pipeline, specialize, verify::verify, DType, OpKind};
use ferrotile_tests::gemm_interp::run;

/// Prefetch distances 1–3 (`num_stages` 2–4): the loop carries `depth`
/// tiles per operand, and the GEMM is bit-for-bit the original, including
/// K = 0, masked K tails and loops shorter than the prefetch distance —
/// also when it reads its operands through views (`load_block`, whose
/// prefetch past the end is moved outside the view instead of masked).
#[test]
fn pipelined_gemm_matches_the_original() {
    let g = ferrotile_kernels::gemm::gemm_kernel::ir();
    let (bm, bn, bk) = (32usize, 16usize, 16usize);
    let spec = specialize(g, &[bm as i64, bn as i64, bk as i64, 2, 0, 0, 0, 0], &[DType::BF16, DType::F32]).unwrap();
    // the same GEMM reading its operands through views (`load_block`)
    let spec_v = specialize(g, &[bm as i64, bn as i64, bk as i64, 2, 0, 0, 0, 1], &[DType::BF16, DType::F32]).unwrap();
    let mut rnd = ferrotile_tests::gemm_interp::bf16_stream(0x1234_5678);
    for (depth, views) in [(1u32, false), (2, false), (3, false), (1, true), (3, true)] {
        let mut piped = if views { spec_v.clone() } else { spec.clone() };
        if depth == 1 {
            pipeline(&mut piped);
        } else {
            ferrotile::ir::passes::pipeline::pipeline_depth(&mut piped, depth);
        }
        verify(&piped).unwrap_or_else(|e| panic!("depth {depth}: does not verify: {e:?}\n{}", piped.to_text()));
        let mut carried = 0;
        piped.walk(&mut |op| {
            if let OpKind::For { inits, .. } = &op.kind {
                carried = inits.len();
            }
        });
        assert_eq!(carried, 1 + 2 * depth as usize, "acc + depth tiles per operand:\n{}", piped.to_text());
        for (m, n, kk) in [(45, 37, 29), (32, 16, 16), (7, 9, 5), (33, 17, 0), (50, 20, 48), (20, 20, 32), (50, 20, 80)] {
            let a: Vec<bf16> = (0..m * kk).map(|_| rnd()).collect();
            let b: Vec<bf16> = (0..kk * n).map(|_| rnd()).collect();
            // one split; three K ranges of 2 blocks (the last may be short or empty)
            for (splits, k_split) in [(1, kk), (3, 2 * bk)] {
                let want = run(&spec, m, n, kk, bm, bn, &a, &b, splits, k_split);
                let got = run(&piped, m, n, kk, bm, bn, &a, &b, splits, k_split);
                assert!(want.iter().all(|v| v.is_finite()), "reference left unwritten outputs");
                assert_eq!(
                    got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    "depth {depth} views {views} {m}x{n}x{kk} {splits} splits"
                );
            }
        }
    }
}

/// A `dot` loop that also stores is left alone: a load moved one iteration
/// earlier could read memory before the previous iteration's store.
#[ferrotile::kernel]
fn dot_and_store(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let r = arange(0, 16);
    let mut acc = zeros([16, 16], f32);
    for i in 0..n {
        let t = load(x + i * 256 + expand_dims(r, 1) * 16 + expand_dims(r, 0));
        acc = dot_tf32(t, t, acc);
        store(y + i * 256 + expand_dims(r, 1) * 16 + expand_dims(r, 0), acc);
    }
}

/// The same loop with the store after it: pipelined.
#[ferrotile::kernel]
fn dot_then_store(x: Ptr<f32>, y: Ptr<f32>, n: i32) {
    let r = arange(0, 16);
    let mut acc = zeros([16, 16], f32);
    for i in 0..n {
        let t = load(x + i * 256 + expand_dims(r, 1) * 16 + expand_dims(r, 0));
        acc = dot_tf32(t, t, acc);
    }
    store(y + expand_dims(r, 1) * 16 + expand_dims(r, 0), acc);
}

#[test]
fn loops_that_store_are_not_pipelined() {
    let spec = specialize(dot_and_store::ir(), &[], &[]).unwrap();
    let mut piped = spec.clone();
    pipeline(&mut piped);
    assert_eq!(piped, spec, "a loop with a store must not be rewritten");
    let spec = specialize(dot_then_store::ir(), &[], &[]).unwrap();
    let mut piped = spec.clone();
    pipeline(&mut piped);
    assert_ne!(piped, spec, "without the store the loop is pipelined");
    verify(&piped).unwrap();
}

/// A loop without a `dot` is pipelined only when asked for
/// (`pipeline_loops(.., every_loop)`, `LaunchConfig::pipeline_every_loop`),
/// and then computes exactly what it did: the library's W4 GEMV (a
/// streaming reduction over packed weights, scales and zero points) at
/// prefetch distances 1–3, on K that is not a multiple of the block, K
/// shorter than the distance, split K, and K = 0 (nothing may be read).
#[test]
fn pipelined_dotless_loop_matches_the_original() {
    use ferrotile::__private::Arg;
    use ferrotile::ir::passes::pipeline::pipeline_loops;
    use ferrotile::Device;
    let g = ferrotile_kernels::quant::wq_gemv_kernel::ir();
    let (bn, bk) = (16i64, 32i64);
    let dev = Device::cpu();
    let mut rnd = ferrotile_tests::gemm_interp::bf16_stream(0x9e37_79b9);
    for (n, k, group, k_split) in [(40usize, 96usize, 32usize, 96usize), (24, 64, 64, 32), (16, 16, 16, 16), (16, 0, 16, 16)] {
        let spec = specialize(g, &[bn, bk, 4, group as i64, 1, 1, 0, 0], &[DType::BF16]).unwrap();
        let mut off = spec.clone();
        pipeline_loops(&mut off, 2, false);
        assert_eq!(off, spec, "without `every_loop` a loop without a dot is left alone");
        let kw = k.div_ceil(8).max(1);
        let x: Vec<ferrotile::bf16> = (0..k.max(1)).map(|_| rnd()).collect();
        let w: Vec<i32> = (0..kw * n).map(|i| (i as i32).wrapping_mul(0x2f6b_3a1d)).collect();
        let groups = k.div_ceil(group).max(1);
        let s: Vec<ferrotile::bf16> = (0..groups * n).map(|_| rnd()).collect();
        let z: Vec<i32> = (0..groups * n / 8).map(|i| (i as i32).wrapping_mul(0x0123_4567)).collect();
        let splits = k.div_ceil(k_split).max(1);
        let run = |kern: &ferrotile::ir::Kernel| -> Vec<f32> {
            let (xb, wb, sb, zb) = (dev.from_slice(&x).unwrap(), dev.from_slice(&w).unwrap(), dev.from_slice(&s).unwrap(), dev.from_slice(&z).unwrap());
            let mut out = dev.full(n, ferrotile::bf16::NAN).unwrap();
            let mut ws = dev.full(splits * n, f32::NAN).unwrap();
            let bias = dev.zeros::<ferrotile::bf16>(1).unwrap();
            let args = vec![
                Arg::buffer(&xb),
                Arg::buffer(&wb),
                Arg::buffer(&sb),
                Arg::buffer(&zb),
                Arg::buffer_mut(&mut out),
                Arg::buffer_mut(&mut ws),
                Arg::buffer(&bias),
                Arg::scalar(n as i32),
                Arg::scalar(k as i32),
                Arg::scalar(k_split as i32),
            ];
            ferrotile::runtime::run_interpreted(kern, &dev, [n.div_ceil(bn as usize) as u32, splits as u32, 1], &args).unwrap();
            drop(args);
            ws.to_vec().unwrap()
        };
        let want = run(&spec);
        for depth in 1..=3 {
            let mut piped = spec.clone();
            pipeline_loops(&mut piped, depth, true);
            assert_ne!(piped, spec, "depth {depth}: the GEMV loop is pipelined when asked");
            verify(&piped).unwrap_or_else(|e| panic!("depth {depth}: does not verify: {e:?}"));
            let got = run(&piped);
            assert!(want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "n {n} k {k} split {k_split} depth {depth}: {want:?} vs {got:?}");
        }
    }
}

/// A `dot` loop whose operand rows are addressed through an index loaded
/// in the same iteration (a paged cache: `page = table[j / 16]`, rows
/// `page·16 + r`): the index load and the load it addresses are both
/// issued ahead, the index masked like any prefetch (the table holds
/// exactly the pages the loop visits, so an unmasked prefetch past the end
/// would read out of bounds, which the interpreter rejects).
#[ferrotile::kernel]
fn paged_dot(a: Ptr<f32>, b: Ptr<f32>, table: Ptr<i32>, out: Ptr<f32>, nk: i32) {
    let r = arange(0, 16);
    let mut acc = zeros([16, 16], f32);
    for j in (0..nk).step_by(16) {
        let page = load(table + j / 16);
        let rows = page * 16 + r;
        let ok = j + r < nk;
        let bt = load(b + expand_dims(rows, 1) * 16 + expand_dims(r, 0), expand_dims(ok, 1), 0.0);
        let at = load(a + expand_dims(r, 1) * nk + expand_dims(j + r, 0), expand_dims(ok, 0), 0.0);
        acc = dot(at, bt, acc);
    }
    store(out + expand_dims(r, 1) * 16 + expand_dims(r, 0), acc);
}

#[test]
fn index_loads_are_pipelined_with_the_loads_they_address() {
    use ferrotile::__private::Arg;
    use ferrotile::ir::passes::pipeline::pipeline_depth;
    use ferrotile::Device;
    let spec = specialize(paged_dot::ir(), &[], &[]).unwrap();
    let dev = Device::cpu();
    let mut seed = 0x2545_f491u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / 65536.0 - 128.0
    };
    for nk in [0usize, 5, 16, 37, 64] {
        let pages = nk.div_ceil(16);
        // the pages in a scrambled order, in a pool twice as large
        let table: Vec<i32> = (0..pages.max(1)).map(|p| ((p * 5 + 3) % (2 * pages.max(1))) as i32).collect();
        let table = &table[..pages.max(1)];
        let a: Vec<f32> = (0..16 * nk.max(1)).map(|_| rnd()).collect();
        let b: Vec<f32> = (0..2 * pages.max(1) * 16 * 16).map(|_| rnd()).collect();
        let run = |k: &ferrotile::ir::Kernel, table: &[i32]| -> Vec<u32> {
            let (ab, bb, tb) = (dev.from_slice(&a).unwrap(), dev.from_slice(&b).unwrap(), dev.from_slice(table).unwrap());
            let mut out = dev.full(256, f32::NAN).unwrap();
            let args = vec![Arg::buffer(&ab), Arg::buffer(&bb), Arg::buffer(&tb), Arg::buffer_mut(&mut out), Arg::scalar(nk as i32)];
            ferrotile::runtime::run_interpreted(k, &dev, [1, 1, 1], &args).unwrap();
            drop(args);
            out.to_vec().unwrap().iter().map(|v| v.to_bits()).collect()
        };
        // (nk = 0 reads no page: an empty table)
        let table = if nk == 0 { &table[..0] } else { table };
        let want = run(&spec, table);
        for depth in 1..=3u32 {
            let mut piped = spec.clone();
            pipeline_depth(&mut piped, depth);
            verify(&piped).unwrap_or_else(|e| panic!("depth {depth}: does not verify: {e:?}"));
            let mut carried = 0;
            piped.walk(&mut |op| {
                if let OpKind::For { inits, .. } = &op.kind {
                    carried = inits.len();
                }
            });
            assert_eq!(carried, 1 + 3 * depth as usize, "acc + depth × (index, a, b):\n{}", piped.to_text());
            assert_eq!(run(&piped, table), want, "nk {nk} depth {depth}");
        }
    }
}

/// The split-K reduction's loop over the partials (`gemm_splitk_reduce`,
/// launched with `pipeline_every_loop`: `gemm::splitk_reduce_launch`) is
/// pipelined — the loads of later partials issued ahead — and sums exactly
/// what it did, for fewer partials than the prefetch distance too.
#[test]
fn splitk_reduction_is_pipelined() {
    use ferrotile::__private::Arg;
    use ferrotile::ir::passes::pipeline::pipeline_loops;
    use ferrotile::Device;
    let g = ferrotile_kernels::gemm::gemm_splitk_reduce::ir();
    let dev = Device::cpu();
    let spec = specialize(g, &[64, 0, 0], &[DType::BF16]).unwrap();
    for (m, n, split) in [(1usize, 100usize, 1usize), (2, 64, 2), (3, 130, 5), (1, 200, 8)] {
        let ws: Vec<f32> = (0..split * m * n).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.37).collect();
        let run = |kern: &ferrotile::ir::Kernel| -> Vec<f32> {
            let wb = dev.from_slice(&ws).unwrap();
            let bias = dev.full(1, ferrotile::bf16::ZERO).unwrap();
            let mut out = dev.full(m * n, ferrotile::bf16::NAN).unwrap();
            let args = vec![
                Arg::buffer(&wb),
                Arg::buffer_mut(&mut out),
                Arg::buffer(&bias),
                Arg::scalar(m as i32),
                Arg::scalar(n as i32),
                Arg::scalar(split as i32),
                Arg::scalar(n as i64),
                Arg::scalar(0i64),
                Arg::scalar(1.0f32),
            ];
            ferrotile::runtime::run_interpreted(kern, &dev, [(m * n.div_ceil(64)) as u32, 1, 1], &args).unwrap();
            drop(args);
            out.to_vec().unwrap().iter().map(|v| v.to_f32()).collect()
        };
        let want = run(&spec);
        for depth in [1, 3, 7] {
            let mut piped = spec.clone();
            pipeline_loops(&mut piped, depth, true);
            assert_ne!(piped, spec, "depth {depth}: the loop over the partials is pipelined");
            verify(&piped).unwrap();
            let got = run(&piped);
            assert!(want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "m {m} n {n} split {split} depth {depth}");
        }
    }
}
