//! GEMM vs an f64 reference on fresh random inputs: odd shapes (1×1×1,
//! 17×33×65, ...), every dtype and precision mode, row/column-major
//! operands, fused epilogues, batches, output casts; outputs poisoned.
//!
//! Error: max |got - want| / max |want| over the output (normwise, so that
//! cancellation in single elements is not mistaken for an error).
//! Thresholds (issue 5): bf16 1e-2, f16 5e-3, tf32 1e-3, exact f32 1e-5.
//! The reference uses the inputs as stored (rounded to the input dtype);
//! for tf32 it uses the f32 inputs, so tf32's input rounding is measured.

use ferrotile::{Device, FloatElement};
use ferrotile_kernels::gemm::{gemm, Activation, GemmConfig, GemmOptions, Layout};
use ferrotile_kernels::reference::{self, Rng};
use half::{bf16, f16};

mod common;
use common::{cuda_devices, devices};

fn seed() -> u64 {
    let (_, s) = Rng::from_time();
    eprintln!("seed = {s}");
    s
}

/// Stored `rows×cols` row-major matrix as the given layout.
fn store_as(x: &[f64], rows: usize, cols: usize, l: Layout) -> Vec<f64> {
    match l {
        Layout::RowMajor => x.to_vec(),
        Layout::ColMajor => {
            let mut t = vec![0.0; rows * cols];
            for i in 0..rows {
                for j in 0..cols {
                    t[j * rows + i] = x[i * cols + j];
                }
            }
            t
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn check<T: FloatElement, U: FloatElement>(
    dev: &Device,
    rng: &mut Rng,
    m: usize,
    n: usize,
    k: usize,
    la: Layout,
    lb: Layout,
    bias: bool,
    act: Activation,
    alpha: f32,
    tf32: bool,
    batch: usize,
    cfg: Option<GemmConfig>,
    tol: f64,
) {
    let round = |v: f64| T::from_f64(v).to_f64();
    let a: Vec<f64> = (0..batch * m * k).map(|_| round(rng.normal())).collect();
    let b: Vec<f64> = (0..batch * k * n).map(|_| round(rng.normal())).collect();
    let bias_v: Vec<f64> = (0..n).map(|_| U::from_f64(rng.normal()).to_f64()).collect();
    let mut a_st = vec![];
    let mut b_st = vec![];
    for bi in 0..batch {
        a_st.extend(store_as(&a[bi * m * k..(bi + 1) * m * k], m, k, la));
        b_st.extend(store_as(&b[bi * k * n..(bi + 1) * k * n], k, n, lb));
    }
    let ab = dev.from_slice(&a_st.iter().map(|&v| T::from_f64(v)).collect::<Vec<T>>()).unwrap();
    let bb = dev.from_slice(&b_st.iter().map(|&v| T::from_f64(v)).collect::<Vec<T>>()).unwrap();
    let biasb = dev.from_slice(&bias_v.iter().map(|&v| U::from_f64(v)).collect::<Vec<U>>()).unwrap();
    let mut c = dev.full(batch * m * n, U::from_f64(f64::NAN)).unwrap();
    let opts = GemmOptions { a_layout: la, b_layout: lb, bias: bias.then_some(&biasb), activation: act, alpha, tf32, batch, config: cfg };
    if let Err(e) = gemm(dev, &ab, &bb, &mut c, m, n, k, &opts) {
        // a forced configuration whose tf32 rings (twice the bytes of the
        // 16-bit ones the tuner list was sized for) exceed shared memory is
        // refused with this error, which is the right answer
        if tf32 && cfg.is_some() && e.to_string().contains("bytes of shared memory") {
            return;
        }
        panic!("gemm {m}x{n}x{k} tf32={tf32} {cfg:?} on {}: {e}", dev.name());
    }
    let got: Vec<f64> = c.to_vec().unwrap().iter().map(|v| v.to_f64()).collect();
    let actc = match act {
        Activation::None => 0,
        Activation::Relu => 1,
        Activation::Gelu => 2,
    };
    for bi in 0..batch {
        let want =
            reference::gemm(&a[bi * m * k..(bi + 1) * m * k], &b[bi * k * n..(bi + 1) * k * n], bias.then_some(&bias_v[..]), m, n, k, alpha as f64, actc);
        let g = &got[bi * m * n..(bi + 1) * m * n];
        assert!(g.iter().all(|v| !v.is_nan()), "unwritten (NaN) output on {} {m}x{n}x{k} batch {bi}", dev.name());
        let scale = want.iter().fold(0.0f64, |s, v| s.max(v.abs())).max(1e-30);
        let err = g.iter().zip(&want).fold(0.0f64, |e, (x, y)| e.max((x - y).abs())) / scale;
        assert!(
            err <= tol,
            "gemm {}→{} on {} {m}x{n}x{k} {la:?}/{lb:?} bias={bias} {act:?} alpha={alpha} tf32={tf32} batch {bi}/{batch} {cfg:?}: err {err:e} > {tol:e}",
            T::DTYPE,
            U::DTYPE,
            dev.name()
        );
    }
}

const SHAPES: &[(usize, usize, usize)] = &[(1, 1, 1), (17, 33, 65), (64, 64, 64), (100, 70, 50), (31, 128, 17)];

#[test]
fn gemm_f32_exact_and_tf32() {
    let mut rng = Rng::new(seed());
    for dev in devices() {
        for &(m, n, k) in SHAPES {
            check::<f32, f32>(&dev, &mut rng, m, n, k, Layout::RowMajor, Layout::RowMajor, false, Activation::None, 1.0, false, 1, None, 1e-5);
            check::<f32, f32>(&dev, &mut rng, m, n, k, Layout::RowMajor, Layout::RowMajor, false, Activation::None, 1.0, true, 1, None, 1e-3);
        }
    }
}

/// tf32 on problems large enough (M·N·K ≥ 2²⁷) for the Hopper path: the
/// operands not K-major transposed and rounded once
/// (`round_tf32_transpose_kernel`), the product reading A row-major and B
/// column-major by bulk copies that round on the way — still the
/// reference's rounded inputs, with `wgmma` and `mma.sync` configurations
/// forced, the tuner's pick, every layout pair and a batch. CUDA only: the
/// CPU and lavapipe take the in-kernel rounding (and on lavapipe the tuner's
/// run would take minutes); the pre-pass kernels are checked on every
/// device by `tf32_pre_pass_kernel`.
#[test]
fn gemm_tf32_kmajor_operands() {
    let mut rng = Rng::new(seed());
    let wg = GemmConfig { bm: 128, bn: 128, bk: 32, group_m: 8, num_warps: 8, num_stages: 3, split_k: 1, swap: false, cluster: 1 };
    let ms = GemmConfig { bm: 128, bn: 128, bk: 32, group_m: 8, num_warps: 4, num_stages: 1, split_k: 1, swap: false, cluster: 1 };
    for dev in cuda_devices() {
        for cfg in [Some(wg), Some(ms), None] {
            // (K a multiple of 16: the K-major copies' row stride fits a
            // tensor map; 500 does not, the `cp.async` path then rounds)
            for k in [512, 500] {
                check::<f32, f32>(&dev, &mut rng, 520, 530, k, Layout::RowMajor, Layout::RowMajor, false, Activation::None, 1.0, true, 1, cfg, 1e-3);
            }
        }
        check::<f32, f32>(&dev, &mut rng, 300, 270, 1696, Layout::RowMajor, Layout::ColMajor, true, Activation::Gelu, 0.5, true, 2, Some(wg), 1e-3);
        check::<f32, f32>(&dev, &mut rng, 260, 390, 1504, Layout::ColMajor, Layout::RowMajor, false, Activation::None, 1.0, true, 2, Some(wg), 1e-3);
        check::<f32, f32>(&dev, &mut rng, 257, 300, 1800, Layout::ColMajor, Layout::ColMajor, false, Activation::Relu, 1.0, true, 1, None, 1e-3);
    }
}

/// The tf32 GEMM's transposing pre-pass against its definition (round to
/// nearest, ties to even; transposed per batch), bit for bit, on ragged
/// sizes with poisoned outputs, on every device.
#[test]
fn tf32_pre_pass_kernel() {
    use ferrotile::LaunchConfig;
    use ferrotile_kernels::gemm::round_tf32_transpose_kernel;
    let mut rng = Rng::new(seed());
    for dev in devices() {
        for (rows, cols, batch) in [(1usize, 1usize, 1usize), (70, 33, 2), (64, 128, 1), (129, 65, 3)] {
            // (values below 2: no overflow to infinity, no NaNs)
            let x: Vec<f32> = (0..rows * cols * batch).map(|_| f32::from_bits(rng.next_u64() as u32 & 0xbfff_ffff)).collect();
            let xb = dev.from_slice(&x).unwrap();
            let mut y = dev.full(x.len(), f32::NAN).unwrap();
            let tiles = (rows.div_ceil(64) * cols.div_ceil(64)) as u32;
            round_tf32_transpose_kernel::launch(&dev, LaunchConfig::new([tiles, batch as u32, 1]).num_warps(4), &xb, &mut y, rows as i32, cols as i32, 64)
                .unwrap();
            let got = y.to_vec().unwrap();
            for b in 0..batch {
                for i in 0..rows {
                    for j in 0..cols {
                        let (g, w) = (got[b * rows * cols + j * rows + i], reference::tf32_rne(x[b * rows * cols + i * cols + j]));
                        assert_eq!(g.to_bits(), w.to_bits(), "{}: {rows}x{cols} batch {b} ({i}, {j})", dev.name());
                    }
                }
            }
        }
    }
}

#[test]
fn gemm_half_precisions_and_layouts() {
    let mut rng = Rng::new(seed());
    for dev in devices() {
        for &(m, n, k) in SHAPES {
            for la in [Layout::RowMajor, Layout::ColMajor] {
                for lb in [Layout::RowMajor, Layout::ColMajor] {
                    check::<bf16, bf16>(&dev, &mut rng, m, n, k, la, lb, false, Activation::None, 1.0, false, 1, None, 1e-2);
                    check::<f16, f16>(&dev, &mut rng, m, n, k, la, lb, false, Activation::None, 1.0, false, 1, None, 5e-3);
                }
            }
        }
    }
}

#[test]
fn gemm_epilogues_batches_casts_configs() {
    let mut rng = Rng::new(seed());
    let small = GemmConfig { bm: 16, bn: 16, bk: 16, group_m: 2, num_warps: 1, num_stages: 2, split_k: 1, swap: false, cluster: 1 };
    let wide = GemmConfig { bm: 32, bn: 64, bk: 32, group_m: 4, num_warps: 4, num_stages: 1, split_k: 1, swap: false, cluster: 1 };
    for dev in devices() {
        check::<bf16, f32>(&dev, &mut rng, 45, 37, 29, Layout::RowMajor, Layout::ColMajor, true, Activation::Relu, 0.5, false, 3, Some(small), 1e-2);
        check::<f16, f16>(&dev, &mut rng, 70, 90, 33, Layout::ColMajor, Layout::RowMajor, true, Activation::Gelu, 1.0, false, 2, Some(wide), 5e-3);
        check::<f32, bf16>(&dev, &mut rng, 33, 65, 40, Layout::RowMajor, Layout::RowMajor, true, Activation::Gelu, 2.0, false, 1, Some(small), 1e-2);
        check::<f32, f32>(&dev, &mut rng, 50, 50, 50, Layout::ColMajor, Layout::ColMajor, true, Activation::Relu, -1.5, false, 2, Some(wide), 1e-5);
    }
}

#[test]
fn gemm_1000_cubed_bf16() {
    let mut rng = Rng::new(seed());
    let t = std::time::Instant::now();
    check::<bf16, f32>(&Device::cpu(), &mut rng, 1000, 1000, 1000, Layout::RowMajor, Layout::RowMajor, false, Activation::None, 1.0, false, 1, None, 1e-2);
    eprintln!("1000^3 bf16 gemm on the interpreter + f64 reference: {:?}", t.elapsed());
}

#[test]
fn gemm_bad_input_is_an_error() {
    let dev = Device::cpu();
    let a = dev.zeros::<f32>(10).unwrap();
    let b = dev.zeros::<f32>(10).unwrap();
    let mut c = dev.zeros::<f32>(10).unwrap();
    let o = GemmOptions::<f32>::default();
    assert!(matches!(gemm(&dev, &a, &b, &mut c, 4, 4, 4, &o), Err(ferrotile_kernels::LibError::Shape(_))));
    let bad = GemmOptions::<f32> {
        config: Some(GemmConfig { bm: 24, bn: 16, bk: 16, group_m: 1, num_warps: 1, num_stages: 2, split_k: 1, swap: false, cluster: 1 }),
        ..Default::default()
    };
    assert!(matches!(gemm(&dev, &a, &b, &mut c, 2, 2, 2, &bad), Err(ferrotile_kernels::LibError::Config(_))));
    let bad_cluster = GemmOptions::<f32> {
        config: Some(GemmConfig { bm: 16, bn: 16, bk: 16, group_m: 1, num_warps: 1, num_stages: 2, split_k: 1, swap: false, cluster: 3 }),
        ..Default::default()
    };
    assert!(matches!(gemm(&dev, &a, &b, &mut c, 2, 2, 2, &bad_cluster), Err(ferrotile_kernels::LibError::Config(m)) if m.contains("cluster")));
    // split-K is for skinny products only (its workspace is split × M × N)
    let split = GemmOptions::<f32> {
        config: Some(GemmConfig { bm: 16, bn: 16, bk: 16, group_m: 1, num_warps: 1, num_stages: 2, split_k: 2, swap: false, cluster: 1 }),
        ..Default::default()
    };
    let (a2, b2, mut c2) = (dev.zeros::<f32>(65 * 4).unwrap(), dev.zeros::<f32>(16).unwrap(), dev.zeros::<f32>(65 * 4).unwrap());
    let e = gemm(&dev, &a2, &b2, &mut c2, 65, 4, 4, &split).unwrap_err();
    assert!(matches!(&e, ferrotile_kernels::LibError::Config(m) if m.contains("split-K")), "{e}");
    let a16 = dev.zeros::<bf16>(4).unwrap();
    let b16 = dev.zeros::<bf16>(4).unwrap();
    let tf = GemmOptions::<f32> { tf32: true, ..Default::default() };
    assert!(matches!(gemm(&dev, &a16, &b16, &mut c, 2, 2, 2, &tf), Err(ferrotile_kernels::LibError::Config(_))));
}

/// Every configuration the autotuner may try, as a `GemmConfig`.
fn tuner_configs() -> Vec<GemmConfig> {
    ferrotile_kernels::gemm::gemm_candidates().iter().map(|tc| GemmConfig::from_tune(tc).unwrap()).collect()
}

/// Every configuration the autotuner may pick (tensor cores: `mma.sync`,
/// and on Hopper the `wgmma` ones), forced, on odd shapes that leave partial
/// tiles along M, N and K, both operand layouts, with a fused bias and
/// activation. The interpreter's result does not depend on the
/// configuration, so this runs on GPU devices only.
#[test]
fn gemm_every_tuner_configuration() {
    let mut rng = Rng::new(seed());
    for dev in cuda_devices() {
        for cfg in tuner_configs() {
            // split-K configurations take skinny M only
            let m = |x: usize| if cfg.split_k > 1 { x % 61 + 3 } else { x };
            check::<bf16, bf16>(&dev, &mut rng, m(300), 520, 200, Layout::RowMajor, Layout::RowMajor, false, Activation::None, 1.0, false, 1, Some(cfg), 1e-2);
            check::<f16, f32>(&dev, &mut rng, m(129), 257, 129, Layout::ColMajor, Layout::RowMajor, true, Activation::Gelu, 1.0, false, 2, Some(cfg), 5e-3);
            check::<bf16, f32>(&dev, &mut rng, m(256), 256, 320, Layout::RowMajor, Layout::ColMajor, true, Activation::Relu, 0.5, false, 1, Some(cfg), 1e-2);
            // tf32 (on Hopper's wgmma where the shape fits: B transposed
            // into its K-major slot element by element)
            check::<f32, f32>(&dev, &mut rng, m(200), 136, 100, Layout::RowMajor, Layout::RowMajor, false, Activation::None, 1.0, true, 1, Some(cfg), 1e-3);
            check::<f32, f32>(&dev, &mut rng, m(129), 264, 72, Layout::ColMajor, Layout::ColMajor, true, Activation::Relu, 1.0, true, 2, Some(cfg), 1e-3);
        }
    }
}

/// The view path (`VIEWS`: on Hopper, TMA bulk copies into the `wgmma`
/// rings) for every tuner configuration it applies to: 16-bit operands
/// whose strides are multiples of 16, B row- and column-major (a transposed
/// view: boxes along K into a K-major slot), tf32 with a column-major B
/// (32-bit maps that round), partial tiles along M, N and K (out-of-bounds
/// boxes read zeros), a batch (the tensor map's third dimension), M = 1,
/// K = 0 (a zero extent: no tensor map fits, the TMA-free compilation
/// runs); a column-major A (16-bit: an M-major slot, `wgmma`'s transposed
/// A); the split-K configurations on the same kind of operands (their
/// 16-row tiles stay on the pointer path).
#[test]
fn gemm_views_every_tuner_configuration() {
    let mut rng = Rng::new(seed());
    for dev in cuda_devices() {
        for cfg in tuner_configs() {
            let rm = Layout::RowMajor;
            if cfg.split_k > 1 {
                // split-K (M ≤ 64): K ranges of whole BK blocks, the last short
                check::<bf16, bf16>(&dev, &mut rng, 16, 192, 1040, rm, rm, false, Activation::None, 1.0, false, 1, Some(cfg), 1e-2);
                check::<f16, f32>(&dev, &mut rng, 50, 64, 400, rm, rm, true, Activation::Relu, 1.0, false, 2, Some(cfg), 5e-3);
                continue;
            }
            check::<bf16, bf16>(&dev, &mut rng, 300, 320, 208, rm, rm, false, Activation::None, 1.0, false, 1, Some(cfg), 1e-2);
            check::<f16, f32>(&dev, &mut rng, 200, 192, 96, rm, rm, true, Activation::Gelu, 0.5, false, 3, Some(cfg), 5e-3);
            check::<bf16, f32>(&dev, &mut rng, 1, 64, 320, rm, rm, true, Activation::Relu, 1.0, false, 1, Some(cfg), 1e-2);
            check::<f16, f16>(&dev, &mut rng, 64, 80, 0, rm, rm, true, Activation::None, 1.0, false, 1, Some(cfg), 5e-3);
            let cm = Layout::ColMajor;
            check::<bf16, f32>(&dev, &mut rng, 260, 200, 336, rm, cm, true, Activation::None, 1.0, false, 2, Some(cfg), 1e-2);
            check::<f32, f32>(&dev, &mut rng, 150, 264, 208, rm, cm, false, Activation::Relu, 1.0, true, 2, Some(cfg), 1e-3);
            // a column-major A (M a multiple of 16): 16-bit A tiles from a
            // transposed view into M-major `wgmma` slots
            check::<bf16, bf16>(&dev, &mut rng, 272, 200, 208, cm, rm, true, Activation::None, 1.0, false, 2, Some(cfg), 1e-2);
            check::<f16, f32>(&dev, &mut rng, 128, 136, 64, cm, cm, false, Activation::Gelu, 1.0, false, 1, Some(cfg), 5e-3);
        }
    }
}

/// Split-K on every device (the interpreter included): K ranges that end
/// mid-block, splits that get no K at all (K = 100 over 5 splits of 64),
/// K = 0 (C = the epilogue of zero), batches, fused bias and activations,
/// output casts; M up to the 64 split-K takes.
#[test]
fn gemm_split_k() {
    let mut rng = Rng::new(seed());
    let cfg = |split_k: u32, bk: u32| GemmConfig { bm: 16, bn: 32, bk, group_m: 2, num_warps: 4, num_stages: 3, split_k, swap: false, cluster: 1 };
    for dev in devices() {
        check::<bf16, bf16>(&dev, &mut rng, 16, 100, 1000, Layout::RowMajor, Layout::RowMajor, false, Activation::None, 1.0, false, 1, Some(cfg(3, 64)), 1e-2);
        check::<f16, f32>(&dev, &mut rng, 1, 77, 100, Layout::ColMajor, Layout::RowMajor, true, Activation::Gelu, 0.5, false, 2, Some(cfg(5, 64)), 5e-3);
        check::<bf16, f32>(&dev, &mut rng, 64, 33, 333, Layout::RowMajor, Layout::ColMajor, true, Activation::Relu, -2.0, false, 3, Some(cfg(2, 32)), 1e-2);
        check::<f32, f32>(&dev, &mut rng, 9, 40, 0, Layout::RowMajor, Layout::RowMajor, true, Activation::Relu, 1.0, false, 1, Some(cfg(4, 16)), 1e-5);
        check::<f32, f32>(&dev, &mut rng, 20, 50, 130, Layout::RowMajor, Layout::RowMajor, false, Activation::None, 1.0, true, 1, Some(cfg(4, 16)), 1e-3);
    }
}

/// The swapped product `Cᵀ = Bᵀ·Aᵀ` (`GemmConfig::swap`: tiles of 64
/// columns of C by 16 or 32 rows, C written transposed, the bias along the
/// kernel's rows) on every device, the interpreter included: skinny and
/// not-so-skinny M, partial tiles everywhere, both operand layouts, fused
/// bias and activations, batches, output casts, with split-K; each also in
/// clusters of 2 (where the tiles pair up). On Hopper the row-major cases
/// take the TMA path (Bᵀ into M-major `wgmma` slots), and clustered ones
/// with one N tile multicast the Aᵀ tiles.
#[test]
fn gemm_swapped_product() {
    let mut rng = Rng::new(seed());
    let (rm, cm) = (Layout::RowMajor, Layout::ColMajor);
    for dev in devices() {
        // (lavapipe's 32 KB of workgroup storage holds BK ≤ 64 here)
        let wgpu = dev.kind() == ferrotile::DeviceKind::Wgpu;
        for cluster in [1, 2] {
            let cfg = |bn: u32, bk: u32, split_k: u32| GemmConfig {
                bm: 64,
                bn,
                bk: if wgpu { bk.min(64) } else { bk },
                group_m: 8,
                num_warps: 4,
                num_stages: 4,
                split_k,
                swap: true,
                cluster,
            };
            check::<bf16, bf16>(&dev, &mut rng, 16, 200, 320, rm, rm, true, Activation::Relu, 1.0, false, 1, Some(cfg(16, 128, 1)), 1e-2);
            check::<f16, f32>(&dev, &mut rng, 5, 130, 64, cm, rm, true, Activation::Gelu, 0.5, false, 2, Some(cfg(16, 64, 1)), 5e-3);
            check::<bf16, f32>(&dev, &mut rng, 1, 96, 256, rm, cm, false, Activation::None, 1.0, false, 1, Some(cfg(16, 128, 1)), 1e-2);
            check::<f16, f16>(&dev, &mut rng, 40, 64, 208, rm, rm, true, Activation::None, -1.0, false, 3, Some(cfg(32, 64, 1)), 5e-3);
            check::<bf16, bf16>(&dev, &mut rng, 16, 192, 1040, rm, rm, true, Activation::None, 1.0, false, 1, Some(cfg(16, 128, 2)), 1e-2);
            check::<bf16, bf16>(&dev, &mut rng, 12, 256, 2048, rm, rm, false, Activation::None, 1.0, false, 2, Some(cfg(16, 256, 1)), 1e-2);
            check::<f32, f32>(&dev, &mut rng, 9, 70, 50, rm, rm, true, Activation::Relu, 1.0, false, 1, Some(cfg(16, 32, 1)), 1e-5);
        }
    }
}

/// GEMM calls captured into a graph (`Device::capture`) and replayed:
/// the replay computes what the calls compute — on inputs rewritten between
/// replays (the graph reads the buffers it was captured with), with the
/// operands' handles dropped after the capture (the graph keeps them) —
/// and what cannot happen inside a capture is an error that leaves the
/// device usable. Elsewhere than CUDA a capture is an error value.
#[test]
fn graph_capture_replays_gemm() {
    let (m, n, k) = (16, 200, 320);
    let cfg = GemmConfig { bm: 64, bn: 16, bk: 128, group_m: 8, num_warps: 4, num_stages: 4, split_k: 1, swap: true, cluster: 1 };
    let mut rng = Rng::new(seed());
    for dev in devices() {
        if dev.kind() != ferrotile::DeviceKind::Cuda {
            assert!(dev.capture(|| Ok(())).is_err(), "capture on {}", dev.name());
            continue;
        }
        let opts = GemmOptions::<bf16> { config: Some(cfg), ..Default::default() };
        let mut c = dev.full(m * n, bf16::NAN).unwrap();
        let (mut a, b) = (dev.zeros::<bf16>(m * k).unwrap(), dev.zeros::<bf16>(k * n).unwrap());
        let mut bh = vec![];
        let mut b = b;
        // (warm-up: compile outside the capture)
        gemm(&dev, &a, &b, &mut c, m, n, k, &opts).unwrap();
        let graph = dev.capture(|| (0..3).try_for_each(|_| gemm(&dev, &a, &b, &mut c, m, n, k, &opts).map_err(Into::into))).unwrap();
        for round in 0..3 {
            let ah: Vec<bf16> = (0..m * k).map(|_| bf16::from_f64(rng.normal())).collect();
            if round < 2 {
                bh = (0..k * n).map(|_| bf16::from_f64(rng.normal())).collect();
                b.copy_from_slice(&bh).unwrap();
            }
            a.copy_from_slice(&ah).unwrap();
            c.copy_from_slice(&vec![bf16::NAN; m * n]).unwrap();
            if round == 2 {
                // the graph holds B's memory: dropping the handle is safe
                drop(std::mem::replace(&mut b, dev.zeros::<bf16>(1).unwrap()));
            }
            graph.replay().unwrap();
            let got = c.to_vec().unwrap();
            let f = |v: &[bf16]| v.iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
            let want = reference::gemm(&f(&ah), &f(&bh), None, m, n, k, 1.0, 0);
            let scale = want.iter().fold(0f64, |x, w| x.max(w.abs()));
            let err = got.iter().zip(&want).fold(0f64, |x, (g, w)| if g.to_f64().is_finite() { x.max((g.to_f64() - w).abs() / scale) } else { f64::INFINITY });
            assert!(err <= 1e-2, "replay {round}: error {err}");
        }
        // inside a capture: allocation, host copies, synchronizing, timing
        // and an autotuner without a choice are errors; the capture closes
        // and the device works afterwards
        assert!(dev.capture(|| dev.zeros::<f32>(4).map(|_| ())).is_err());
        assert!(dev.capture(|| c.to_vec().map(|_| ())).is_err());
        assert!(dev.capture(|| dev.synchronize()).is_err());
        assert!(dev.capture(|| dev.time_ms(|| Ok(())).map(|_| ())).is_err());
        // (a key no run has tuned: the process id and the time)
        let t = ferrotile::Autotuner::new("graph_test", vec![ferrotile::TuneConfig::new(4), ferrotile::TuneConfig::new(8)]);
        let key = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
        let e = dev.capture(|| t.run(&dev, &key, |_| Ok(gemm(&dev, &a, &b, &mut c, m, n, k, &opts)?)).map(|_| ()));
        if std::env::var("FERROTILE_AUTOTUNE").as_deref() != Ok("0") {
            assert!(e.unwrap_err().to_string().contains("run the call once before capturing"));
        }
        // (a closure that panics closes the capture too)
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dev.capture(|| panic!("inside a capture (expected by the test)"))));
        assert!(p.is_err());
        assert!(!dev.capturing());
        gemm(&dev, &a, &dev.zeros::<bf16>(k * n).unwrap(), &mut c, m, n, k, &opts).unwrap();
        assert!(c.to_vec().unwrap().iter().all(|x| x.to_f64() == 0.0));
    }
}

/// Split-K GEMMs on two CUDA streams at once: each stream sums its
/// partials in a workspace of its own (the library's scratch is per
/// stream), so both results are right; with one shared workspace the two
/// streams' partial sums overwrote each other. Elsewhere the streams are
/// the device's one queue (checked the same way).
#[test]
fn split_k_on_two_streams() {
    let (m, n, k) = (8usize, 256usize, 4096usize);
    let cfg = GemmConfig { bm: 16, bn: 64, bk: 64, group_m: 1, num_warps: 4, num_stages: 3, split_k: 8, swap: false, cluster: 1 };
    let opts = GemmOptions::<f32> { config: Some(cfg), ..Default::default() };
    let mut rng = Rng::new(seed());
    for dev in devices() {
        let gen = |rng: &mut Rng, len: usize| -> Vec<f32> { (0..len).map(|_| rng.normal() as f32).collect() };
        let (ah, bh, ch, dh) = (gen(&mut rng, m * k), gen(&mut rng, k * n), gen(&mut rng, m * k), gen(&mut rng, k * n));
        let up = |x: &[f32]| dev.from_slice(x).unwrap();
        let (a, b, c, d) = (up(&ah), up(&bh), up(&ch), up(&dh));
        let (mut x, mut y) = (dev.zeros::<f32>(m * n).unwrap(), dev.zeros::<f32>(m * n).unwrap());
        // (warm-up: compiled, workspaces grown, on each stream)
        let (s1, s2) = (dev.new_stream().unwrap(), dev.new_stream().unwrap());
        s1.scope(|| gemm(&dev, &a, &b, &mut x, m, n, k, &opts)).unwrap();
        s2.scope(|| gemm(&dev, &c, &d, &mut y, m, n, k, &opts)).unwrap();
        dev.synchronize().unwrap();
        for _ in 0..20 {
            s1.scope(|| gemm(&dev, &a, &b, &mut x, m, n, k, &opts)).unwrap();
            s2.scope(|| gemm(&dev, &c, &d, &mut y, m, n, k, &opts)).unwrap();
        }
        dev.synchronize().unwrap();
        let f = |v: &[f32]| v.iter().map(|&e| e as f64).collect::<Vec<f64>>();
        for (what, got, want) in [
            ("stream 1", x.to_vec().unwrap(), reference::gemm(&f(&ah), &f(&bh), None, m, n, k, 1.0, 0)),
            ("stream 2", y.to_vec().unwrap(), reference::gemm(&f(&ch), &f(&dh), None, m, n, k, 1.0, 0)),
        ] {
            let scale = want.iter().fold(1f64, |s, w| s.max(w.abs()));
            let err = got.iter().zip(&want).fold(0f64, |e, (g, w)| e.max((*g as f64 - w).abs() / scale));
            assert!(err <= 2e-2, "{} {what}: error {err}", dev.name());
        }
    }
}
