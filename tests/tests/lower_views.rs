//! `ferrotile_ir::passes::lower_views` (block accesses of views as pointer
//! accesses, what the PTX backend runs where no TMA copy serves a view)
//! preserves semantics: on the CPU interpreter the lowered kernels read and
//! write exactly what the original ones do — blocks partly outside the
//! view (below zero and past the end), transposed views (no unit stride),
//! 1-D and 3-D views, `store_block` of partial blocks into a poisoned
//! output — and the view GEMM, lowered and also pipelined, is bit-identical
//! to the original. The lowered kernels verify; on sm_80 the lowered view
//! GEMM gets the same `cp.async` operand copies as the pointer GEMM.

use ferrotile::__private::Arg;
use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{passes::lower_views::lower_views, passes::pipeline::pipeline_depth, specialize, verify::verify, DType, Kernel, OpKind};
use ferrotile::{bf16, Device};
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_tests::gemm_interp::{run, unit_strides};

#[ferrotile::kernel]
fn views_mix(x: Ptr<f32>, y: Ptr<f32>, z: Ptr<f32>, w: Ptr<f32>, m: i32, n: i32, ldx: i32, shift: i32) {
    let pm = program_id(0) * 8 - shift;
    let pn = program_id(1) * 16 - shift;
    // 2-D, unit inner stride, window partly outside
    let vx = view(x, [m, n], [ldx, 1]);
    let t = load_block(vx, [pm, pn], [8, 16]);
    // transposed view of the same memory
    let vt = view(x, [n, m], [1, ldx as i64]);
    let tt = load_block(vt, [pn, pm], [16, 8]);
    // stores of partial blocks, through a view with another row stride
    let vy = view(y, [m, n], [n as i64, 1]);
    store_block(vy, [pm, pn], t * 2.0 + 1.0);
    let vz = view(z, [n, m], [m, 1]);
    store_block(vz, [pn, pm], tt - 3.0);
    // 1-D and 3-D views
    let v1 = view(x, [m * ldx], [1]);
    let r = load_block(v1, [pm * ldx + pn], [32]);
    let v3 = view(x, [2, m / 2, n], [(m / 2) * ldx, ldx, 1]);
    let q = load_block(v3, [program_id(1) % 2, pm / 2, pn], [2, 4, 16]);
    let wv = view(w, [num_programs(0) * num_programs(1), 160], [160, 1]);
    let row = program_id(1) * num_programs(0) + program_id(0);
    store_block(wv, [row, 0], expand_dims(r, 0) + 0.0);
    store_block(wv, [row, 32], reshape(q, [1, 128]));
}

fn interp(k: &Kernel, m: usize, n: usize, ldx: usize, shift: i32, x: &[f32]) -> Vec<Vec<f32>> {
    let dev = Device::cpu();
    let grid = [m.div_ceil(8) as u32 + 1, n.div_ceil(16) as u32 + 1, 1];
    let xb = dev.from_slice(x).unwrap();
    let mut y = dev.full(m * n, f32::NAN).unwrap();
    let mut z = dev.full(m * n, f32::NAN).unwrap();
    let mut w = dev.full((grid[0] * grid[1]) as usize * 160, f32::NAN).unwrap();
    let args = vec![
        Arg::buffer(&xb),
        Arg::buffer_mut(&mut y),
        Arg::buffer_mut(&mut z),
        Arg::buffer_mut(&mut w),
        Arg::scalar(m as i32),
        Arg::scalar(n as i32),
        Arg::scalar(ldx as i32),
        Arg::scalar(shift),
    ];
    ferrotile::runtime::run_interpreted(k, &dev, grid, &args).unwrap();
    drop(args);
    vec![y.to_vec().unwrap(), z.to_vec().unwrap(), w.to_vec().unwrap()]
}

fn lowered(k: &Kernel) -> Kernel {
    let mut l = k.clone();
    lower_views(&mut l, &|_| false, &|_| false);
    verify(&l).unwrap_or_else(|e| panic!("lowered kernel does not verify: {e:?}\n{}", l.to_text()));
    let mut blocks = 0;
    l.walk(&mut |op| blocks += matches!(op.kind, OpKind::LoadBlock { .. } | OpKind::StoreBlock { .. }) as usize);
    assert_eq!(blocks, 0, "block accesses left:\n{}", l.to_text());
    l
}

fn bits(v: &[Vec<f32>]) -> Vec<Vec<u32>> {
    v.iter().map(|x| x.iter().map(|f| f.to_bits()).collect()).collect()
}

#[test]
fn lowered_views_read_and_write_the_same() {
    let spec = specialize(views_mix::ir(), &[], &[]).unwrap();
    let low = lowered(&spec);
    // the transposed view (unit stride on dimension 0) is loaded in
    // storage order, then transposed; the others are not
    let mut trans = 0;
    low.walk(&mut |op| trans += matches!(op.kind, OpKind::Trans { .. }) as usize);
    assert_eq!(trans, 1, "one transposed view load:\n{}", low.to_text());
    let mut seed = 0x9e37_79b9u64;
    for (m, n, ldx, shift) in [(8usize, 16usize, 16usize, 0i32), (10, 20, 24, 3), (17, 33, 40, 5), (4, 50, 64, -2)] {
        let x: Vec<f32> = (0..m * ldx)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 40) as f32 / 1024.0 - 8000.0
            })
            .collect();
        let want = interp(&spec, m, n, ldx, shift, &x);
        let got = interp(&low, m, n, ldx, shift, &x);
        assert_eq!(bits(&got), bits(&want), "{m}x{n} ldx {ldx} shift {shift}");
        assert!(want.iter().all(|o| o.iter().any(|v| v.is_finite())), "every output written");
    }
}

/// The view GEMM: lowered (and lowered + pipelined) equals the original,
/// bit for bit, on odd shapes.
#[test]
fn lowered_view_gemm_is_the_view_gemm() {
    let g = ferrotile_kernels::gemm::gemm_kernel::ir();
    let (bm, bn, bk) = (32usize, 16usize, 16usize);
    let spec = specialize(g, &[bm as i64, bn as i64, bk as i64, 2, 0, 0, 0, 1], &[DType::BF16, DType::F32]).unwrap();
    let low = lowered(&spec);
    let mut piped = low.clone();
    pipeline_depth(&mut piped, 2);
    verify(&piped).unwrap();
    let mut rnd = ferrotile_tests::gemm_interp::bf16_stream(0x1234_5678);
    for (m, n, kk) in [(45usize, 37usize, 29usize), (32, 16, 16), (7, 9, 5), (33, 17, 0), (50, 20, 80)] {
        let a: Vec<bf16> = (0..m * kk).map(|_| rnd()).collect();
        let b: Vec<bf16> = (0..kk * n).map(|_| rnd()).collect();
        let gemm = |k: &Kernel| -> Vec<u32> { run(k, m, n, kk, bm, bn, &a, &b, 1, kk).iter().map(|v| v.to_bits()).collect() };
        let want = gemm(&spec);
        assert!(want.iter().all(|v| f32::from_bits(*v).is_finite()), "reference left unwritten outputs");
        assert_eq!(gemm(&low), want, "lowered {m}x{n}x{kk}");
        assert_eq!(gemm(&piped), want, "lowered + pipelined {m}x{n}x{kk}");
    }
}

/// Without TMA (sm_80), the view GEMM's operands take the same path as the
/// pointer GEMM's: 16-byte `cp.async` ring copies, no per-element loads.
#[test]
fn view_gemm_without_tma_gets_cp_async() {
    let g = ferrotile_kernels::gemm::gemm_kernel::ir();
    let one = unit_strides(g, false);
    for views in [0, 1] {
        let spec = specialize(g, &[128, 128, 32, 8, 0, 0, 0, views], &[DType::BF16, DType::BF16]).unwrap();
        let opts = PtxOptions {
            arg_div: vec![16; guarded_params(g)],
            arg_one: one.clone(),
            pipeline: 2,
            warp_specialize: true,
            ..PtxOptions::new(80, 4, g.params.len())
        };
        let p = emit(&spec, &opts).unwrap();
        assert_eq!(p.text.matches("cp.async.cg.shared.global").count(), 24, "views {views}");
        assert!(!p.text.contains("ld.global.b16") && !p.text.contains("ld.global.u16"), "views {views}: no scalar operand loads");
    }
}

/// A column-major B (a transposed view: unit stride along K) on
/// `mma.sync`: loaded in storage order (`lower_views`), it fills its ring
/// with 16-byte `cp.async` copies like a row-major B, and `ldmatrix` reads
/// its `[N, K]` slot without `.trans` (`AsyncPlan::flipped`) — before, each
/// element was a 2-byte load through registers.
#[test]
fn column_major_b_on_mma_sync_copies_in_16_bytes() {
    let g = ferrotile_kernels::gemm::gemm_kernel::ir();
    let spec = specialize(g, &[128, 128, 32, 8, 0, 0, 0, 1], &[DType::BF16, DType::BF16]).unwrap();
    let row = unit_strides(g, false);
    // (sbk instead of sbn: B's unit stride along K)
    let col: Vec<bool> = g.params.iter().zip(&row).map(|(p, &u)| if p.name == "sbn" { false } else { u || p.name == "sbk" }).collect();
    let ptx = |one: &Vec<bool>| {
        let opts = PtxOptions { arg_div: vec![16; guarded_params(g)], arg_one: one.clone(), pipeline: 2, ..PtxOptions::new(80, 4, g.params.len()) };
        emit(&spec, &opts).unwrap().text
    };
    let (r, c) = (ptx(&row), ptx(&col));
    assert_eq!(c.matches("cp.async.cg.shared.global").count(), r.matches("cp.async.cg.shared.global").count());
    assert!(!c.contains("ld.global.b16") && !c.contains("ld.global.u16"), "no scalar operand loads");
    assert!(r.contains("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), "row-major B: ldmatrix .trans");
    assert!(!c.contains(".trans.shared.b16"), "column-major B: ldmatrix without .trans");
}

/// Lowered view loads vectorize exactly where the row stride allows: with
/// every integer argument divisible by 16, `views_mix`'s row loads of `x`
/// are 16-byte vectors; with `ldx` not known divisible, none is (its rows
/// start at `r · ldx`: a divisor of the first row's offset is not one of
/// the others' — the axis analysis once claimed it was, and the lowered
/// conformance kernel faulted with a misaligned address on the H200).
#[test]
fn lowered_view_loads_vectorize_only_when_aligned() {
    let k = views_mix::ir();
    let spec = specialize(k, &[], &[]).unwrap();
    for (ldx_div16, want) in [(true, true), (false, false)] {
        let div16: Vec<u32> = k.params.iter().map(|p| if p.name != "ldx" || ldx_div16 { 16 } else { 1 }).collect();
        let opts = PtxOptions { arg_div: div16, warp_specialize: true, ..PtxOptions::new(90, 1, k.params.len()) };
        let p = emit(&spec, &opts).unwrap();
        assert_eq!(p.text.contains("ld.global.v4"), want, "ldx divisible by 16: {ldx_div16}");
    }
}

/// Row strides that are not multiples of 16 still give 16-byte vectors
/// when the launch's divisibility fact proves the rows aligned: the library
/// softmax over rows of 1000 bf16 elements (stride divisible by 8 — 2000
/// bytes) or 1004 f32 elements (divisible by 4) loads whole 16-byte vectors;
/// with a stride divisible only by 4 (bf16) or 2 (f32) it must not.
#[test]
fn row_loads_vectorize_by_the_strides_power_of_two() {
    let k = ferrotile_kernels::softmax::softmax_row::ir();
    for (dt, aligned, unaligned) in [(DType::BF16, 8, 4), (DType::F32, 4, 2)] {
        let spec = specialize(k, &[1024], &[dt]).unwrap();
        for (d, want) in [(aligned, true), (unaligned, false), (16, true)] {
            // (n_cols and both strides share the fact; pointers are aligned)
            let div: Vec<u32> = k.params.iter().map(|p| if matches!(p.name.as_str(), "n_cols" | "x_stride" | "y_stride") { d } else { 16 }).collect();
            let mut div = div;
            div.resize(guarded_params(k), 16);
            let p = emit(&spec, &PtxOptions { arg_div: div, ..PtxOptions::new(90, 4, k.params.len()) }).unwrap();
            let vec16 = p.text.contains("ld.global.v4.b32") || p.text.contains("ld.global.v4.f32") || p.text.contains("ld.global.v4.u32");
            assert_eq!(vec16, want, "{dt} rows, stride divisible by {d}");
        }
    }
}
