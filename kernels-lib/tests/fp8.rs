//! FP8 GEMM (`quant::fp8_gemm`) against f64 on the operands' exact values,
//! on every device: e4m3 and e5m2, per-tensor, row-wise and block-wise
//! (1 × 128 / 128 × 128) scales, bias and
//! each activation, a strided output (its gaps stay poisoned), odd M/N/K
//! (K not a multiple of 16 takes the kernel off TMA), K split over the
//! grid (few rows), every tuner candidate on CUDA, and bad arguments as
//! errors naming them.
//!
//! Tolerance per output: the output's rounding (2⁻⁸ relative for bf16,
//! 2⁻¹¹ for f16), plus 2⁻¹³ of Σ|terms| per 32-deep MMA step — Hopper's
//! tensor cores add fp8 products keeping about 14 bits ("fast
//! accumulation", as `torch._scaled_mm(use_fast_accum=True)`): measured
//! 1.2–1.4× of a 2⁻¹² bound at K = 300–640 on the H200. A wrong scale is
//! off by far more; the K values here keep a lost 128-deep block above
//! the bound too.

use ferrotile::{f8e4m3, f8e5m2, Buffer, Device, DeviceKind, FloatElement};

mod common;
use common::devices;
use ferrotile_kernels::gemm::Activation;
use ferrotile_kernels::quant::{fp8_candidates, fp8_gemm, Fp8Options, Fp8Scales, W8A8Config};
use ferrotile_kernels::reference::Rng;
use half::{bf16, f16};

struct Case {
    m: usize,
    n: usize,
    k: usize,
    scales: u8,
    bias: bool,
    act: Activation,
    so: usize,
}

/// The largest error relative to the tolerance (≤ 1 passes).
fn run<T: FloatElement, U: FloatElement>(dev: &Device, c: &Case, config: Option<W8A8Config>, rng: &mut Rng) -> f64 {
    let (m, n, k) = (c.m, c.n, c.k);
    let so = c.so.max(n);
    // (values of every exponent the format has, up to ±8)
    let val = |rng: &mut Rng| T::from_f64(rng.normal() * 2f64.powi(rng.int(-6, 2) as i32));
    let a: Vec<T> = (0..m * k).map(|_| val(rng)).collect();
    let b: Vec<T> = (0..n * k).map(|_| val(rng)).collect();
    // (row-wise: [m] and [n]; block-wise: [m, ⌈k/128⌉] and [⌈n/128⌉, ⌈k/128⌉])
    let kb = k.div_ceil(128);
    let (la, lb) = if c.scales == 2 { (m * kb, n.div_ceil(128) * kb) } else { (m, n) };
    let sa: Vec<f32> = (0..la).map(|_| rng.range(0.5, 2.0) as f32).collect();
    let sb: Vec<f32> = (0..lb).map(|_| rng.range(0.5, 2.0) as f32).collect();
    let (ta, tb) = (rng.range(0.5, 2.0) as f32, rng.range(0.5, 2.0) as f32);
    let bias: Vec<U> = (0..n).map(|_| U::from_f64(rng.normal())).collect();
    let (ad, bd, sad, sbd, biasd) =
        (dev.from_slice(&a).unwrap(), dev.from_slice(&b).unwrap(), dev.from_slice(&sa).unwrap(), dev.from_slice(&sb).unwrap(), dev.from_slice(&bias).unwrap());
    let mut od = dev.from_slice(&vec![U::from_f64(f64::NAN); (m - 1) * so + n]).unwrap();
    let scales = match c.scales {
        0 => Fp8Scales::Tensor { a: ta, b: tb },
        1 => Fp8Scales::Rows { a: &sad, b: &sbd },
        _ => Fp8Scales::Blocks { a: &sad, b: &sbd },
    };
    let opts = Fp8Options { scales, bias: c.bias.then_some(&biasd), activation: c.act, out_row_stride: so, config };
    fp8_gemm(dev, &ad, &bd, &mut od, m, n, k, &opts).unwrap_or_else(|e| panic!("{} {m}x{n}x{k} {config:?}: {e}", dev.name()));
    let got = od.to_vec().unwrap();
    let rel = if U::DTYPE == ferrotile::ir::DType::BF16 { 1.0 / 256.0 } else { 1.0 / 2048.0 };
    let mut worst = 0.0f64;
    for i in 0..m {
        if i + 1 < m {
            for j in n..so {
                assert!(got[i * so + j].to_f64().is_nan(), "{}: out[{i}, {j}] (a gap of the strided output) was written", dev.name());
            }
        }
        for j in 0..n {
            // (the scale of each product: per tensor, per row pair, or per
            // 128-deep K block)
            let scale = |kk: usize| match c.scales {
                0 => ta as f64 * tb as f64,
                1 => sa[i] as f64 * sb[j] as f64,
                _ => sa[i * kb + kk / 128] as f64 * sb[(j / 128) * kb + kk / 128] as f64,
            };
            let (mut dot, mut mag) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let p = a[i * k + kk].to_f64() * b[j * k + kk].to_f64() * scale(kk);
                dot += p;
                mag += p.abs();
            }
            let s = 1.0;
            let (mut want, mut terms) = (dot * s, mag * s);
            if c.bias {
                want += bias[j].to_f64();
                terms += bias[j].to_f64().abs();
            }
            want = match c.act {
                Activation::None => want,
                Activation::Relu => want.max(0.0),
                Activation::Gelu => 0.5 * want * (1.0 + ferrotile_kernels::reference::erf(want / std::f64::consts::SQRT_2)),
            };
            let steps = k.div_ceil(32) as f64;
            let tol = rel * 1.2 * want.abs() + 1.2 * (mag * s * steps / 8192.0 + 8.0 * terms / (1u64 << 24) as f64) + 1e-6;
            let g = got[i * so + j].to_f64();
            worst = worst.max(if g.is_finite() { (g - want).abs() / tol } else { f64::INFINITY });
        }
    }
    worst
}

fn cases(dev: &Device) -> Vec<Case> {
    let mut v = vec![
        Case { m: 3, n: 24, k: 64, scales: 0, bias: false, act: Activation::None, so: 0 },
        Case { m: 9, n: 33, k: 100, scales: 1, bias: true, act: Activation::Relu, so: 0 },
        Case { m: 20, n: 17, k: 130, scales: 1, bias: true, act: Activation::Gelu, so: 21 },
        // block-wise (DeepSeek-V3): K over several 128-deep blocks, a tail
        Case { m: 11, n: 40, k: 300, scales: 2, bias: true, act: Activation::None, so: 0 },
    ];
    if dev.kind() != DeviceKind::Cpu {
        v.push(Case { m: 70, n: 90, k: 300, scales: 0, bias: true, act: Activation::None, so: 0 });
    }
    if dev.kind() == DeviceKind::Cuda {
        v.extend([
            Case { m: 300, n: 520, k: 1024, scales: 1, bias: false, act: Activation::None, so: 0 },
            Case { m: 129, n: 200, k: 1000, scales: 0, bias: true, act: Activation::Relu, so: 0 },
            Case { m: 512, n: 1024, k: 4096, scales: 1, bias: true, act: Activation::Gelu, so: 1030 },
            Case { m: 300, n: 520, k: 1000, scales: 2, bias: false, act: Activation::Relu, so: 0 },
        ]);
    }
    v
}

#[test]
fn fp8_gemm_matches_f64() {
    for dev in devices() {
        let mut rng = Rng::new(13);
        for c in cases(&dev) {
            let what = |t: &str| format!("{}: {t} {}x{}x{} scales {} bias {} {:?}", dev.name(), c.m, c.n, c.k, c.scales, c.bias, c.act);
            let e = run::<f8e4m3, bf16>(&dev, &c, None, &mut rng);
            assert!(e <= 1.0, "{}: {e:.2} × the tolerance", what("e4m3 → bf16"));
            let e = run::<f8e5m2, f16>(&dev, &c, None, &mut rng);
            assert!(e <= 1.0, "{}: {e:.2} × the tolerance", what("e5m2 → f16"));
        }
    }
}

/// A persistent grid (`W8A8Config::persistent`): fewer programs than
/// tiles, each looping over several — 4 programs where the device does
/// not count its cores (CPU, wgpu), one per SM on CUDA, with a shape of
/// more 128 × 256 tiles than an H200 has SMs there. Every scale mode.
#[test]
fn fp8_persistent_grid_matches_f64() {
    for dev in devices() {
        let mut rng = Rng::new(15);
        let small = W8A8Config { persistent: true, ..W8A8Config::default_for(&dev) };
        let mut runs = vec![
            (Case { m: 50, n: 100, k: 130, scales: 1, bias: true, act: Activation::Relu, so: 0 }, small),
            (Case { m: 40, n: 70, k: 300, scales: 2, bias: false, act: Activation::None, so: 72 }, W8A8Config { bk: 128, bn: small.bn.min(128), ..small }),
        ];
        if dev.kind() == DeviceKind::Cuda {
            let wide = W8A8Config { bm: 128, bn: 256, bk: 256, num_warps: 8, num_stages: 2, split_k: 1, persistent: true };
            runs.push((Case { m: 1100, n: 4000, k: 256, scales: 0, bias: true, act: Activation::Gelu, so: 0 }, wide));
            runs.push((
                Case { m: 1100, n: 4000, k: 384, scales: 2, bias: false, act: Activation::None, so: 0 },
                W8A8Config { bn: 128, bk: 128, num_stages: 3, ..wide },
            ));
        }
        for (c, cfg) in runs {
            let e = run::<f8e4m3, bf16>(&dev, &c, Some(cfg), &mut rng);
            assert!(e <= 1.0, "{}: {}x{}x{} scales {} {cfg:?}: {e:.2} × the tolerance", dev.name(), c.m, c.n, c.k, c.scales);
        }
    }
}

/// K split over the grid's second axis (`W8A8Config::split_k`: f32
/// partials summed with the bias and activation by the split-K
/// reduction), forced on every device in each scale mode — 3 ranges
/// where K leaves the last one short (block-wise: two 128-deep blocks a
/// step, so a range ends inside a step only at K's end) —, and on CUDA
/// the few-rows tuner lists (M ≤ 64: every candidate, then tuned).
#[test]
fn fp8_split_k_matches_f64() {
    for dev in devices() {
        let mut rng = Rng::new(16);
        let base = W8A8Config::default_for(&dev);
        let blocks = W8A8Config { bk: 128, bn: base.bn.min(128), num_stages: base.num_stages.min(3), ..base };
        let runs = [
            (Case { m: 5, n: 40, k: 300, scales: 0, bias: true, act: Activation::Relu, so: 0 }, W8A8Config { split_k: 3, ..base }),
            (Case { m: 3, n: 33, k: 200, scales: 1, bias: false, act: Activation::None, so: 35 }, W8A8Config { split_k: 2, ..base }),
            (Case { m: 4, n: 24, k: 600, scales: 2, bias: true, act: Activation::Gelu, so: 0 }, W8A8Config { split_k: 3, ..blocks }),
        ];
        for (c, cfg) in runs {
            let e = run::<f8e4m3, bf16>(&dev, &c, Some(cfg), &mut rng);
            assert!(e <= 1.0, "{}: {}x{}x{} scales {} {cfg:?}: {e:.2} × the tolerance", dev.name(), c.m, c.n, c.k, c.scales);
            let e = run::<f8e5m2, f16>(&dev, &c, Some(cfg), &mut rng);
            assert!(e <= 1.0, "{}: e5m2 {}x{}x{} scales {} {cfg:?}: {e:.2} × the tolerance", dev.name(), c.m, c.n, c.k, c.scales);
        }
        if dev.kind() != DeviceKind::Cuda {
            continue;
        }
        for blockwise in [false, true] {
            let scales = if blockwise { 2 } else { 1 };
            let c = Case { m: 7, n: 300, k: 1000, scales, bias: true, act: Activation::None, so: 0 };
            for tc in fp8_candidates(7, blockwise) {
                let cfg = W8A8Config::from_tune(&tc).unwrap();
                let e = run::<f8e4m3, bf16>(&dev, &c, Some(cfg), &mut rng);
                assert!(e <= 1.0, "{cfg:?} scales {scales}: {e:.2} × the tolerance");
            }
            // (tuned: M·N·K ≥ 2²⁴)
            let c = Case { m: 16, n: 1024, k: 1100, scales, bias: false, act: Activation::Relu, so: 0 };
            let e = run::<f8e4m3, bf16>(&dev, &c, None, &mut rng);
            assert!(e <= 1.0, "tuned 16x1024x1100 scales {scales}: {e:.2} × the tolerance");
        }
    }
}

#[test]
fn fp8_every_tuner_candidate() {
    for dev in devices().into_iter().filter(|d| d.kind() == DeviceKind::Cuda) {
        let mut rng = Rng::new(14);
        let c = Case { m: 200, n: 300, k: 640, scales: 1, bias: true, act: Activation::None, so: 0 };
        for tc in fp8_candidates(4096, false) {
            let cfg = W8A8Config::from_tune(&tc).unwrap();
            let e = run::<f8e4m3, bf16>(&dev, &c, Some(cfg), &mut rng);
            assert!(e <= 1.0, "{cfg:?}: {e:.2} × the tolerance");
        }
        let c = Case { m: 200, n: 300, k: 640, scales: 2, bias: true, act: Activation::Relu, so: 0 };
        for tc in fp8_candidates(4096, true) {
            let cfg = W8A8Config::from_tune(&tc).unwrap();
            let e = run::<f8e4m3, bf16>(&dev, &c, Some(cfg), &mut rng);
            assert!(e <= 1.0, "block-wise {cfg:?}: {e:.2} × the tolerance");
        }
    }
}

#[test]
fn fp8_gemm_rejects_bad_arguments() {
    let dev = Device::cpu();
    let a: Buffer<f8e4m3> = dev.zeros(4 * 16).unwrap();
    let b: Buffer<f8e4m3> = dev.zeros(8 * 16).unwrap();
    let mut out: Buffer<bf16> = dev.zeros(4 * 8).unwrap();
    let err = |r: Result<(), ferrotile_kernels::LibError>, what: &str| {
        let e = r.expect_err(what).to_string();
        assert!(e.contains(what), "expected an error naming `{what}`, got: {e}");
    };
    let o = Fp8Options::<bf16>::default();
    err(fp8_gemm(&dev, &a, &b, &mut out, 5, 8, 16, &o), "`a`");
    err(fp8_gemm(&dev, &a, &b, &mut out, 4, 9, 16, &o), "`b`");
    let mut small: Buffer<bf16> = dev.zeros(3 * 8).unwrap();
    err(fp8_gemm(&dev, &a, &b, &mut small, 4, 8, 16, &o), "`out`");
    let s2: Buffer<f32> = dev.zeros(2).unwrap();
    let s8: Buffer<f32> = dev.zeros(8).unwrap();
    err(fp8_gemm(&dev, &a, &b, &mut out, 4, 8, 16, &Fp8Options { scales: Fp8Scales::Rows { a: &s2, b: &s8 }, ..Default::default() }), "`scales.a`");
    err(fp8_gemm(&dev, &a, &b, &mut out, 4, 8, 16, &Fp8Options { scales: Fp8Scales::Tensor { a: f32::NAN, b: 1.0 }, ..Default::default() }), "finite");
    let bias: Buffer<bf16> = dev.zeros(3).unwrap();
    err(fp8_gemm(&dev, &a, &b, &mut out, 4, 8, 16, &Fp8Options { bias: Some(&bias), ..Default::default() }), "`bias`");
    err(fp8_gemm(&dev, &a, &b, &mut out, 4, 8, 16, &Fp8Options { out_row_stride: 7, ..Default::default() }), "row stride");
    // block-wise: [m, ⌈k/128⌉] = 4 scales for `a`, [⌈n/128⌉, ⌈k/128⌉] = 1 for `b`
    let (sa_b, s1): (Buffer<f32>, Buffer<f32>) = (dev.zeros(4).unwrap(), dev.zeros(1).unwrap());
    err(fp8_gemm(&dev, &a, &b, &mut out, 4, 8, 16, &Fp8Options { scales: Fp8Scales::Blocks { a: &s1, b: &s1 }, ..Default::default() }), "`scales.a`");
    let blk = W8A8Config { bm: 16, bn: 32, bk: 64, num_warps: 4, num_stages: 1, split_k: 1, persistent: false };
    err(
        fp8_gemm(&dev, &a, &b, &mut out, 4, 8, 16, &Fp8Options { scales: Fp8Scales::Blocks { a: &sa_b, b: &s1 }, config: Some(blk), ..Default::default() }),
        "BK = 128",
    );
    let cfg = W8A8Config { bm: 16, bn: 32, bk: 32, num_warps: 4, num_stages: 1, split_k: 17, persistent: false };
    err(fp8_gemm(&dev, &a, &b, &mut out, 4, 8, 16, &Fp8Options { config: Some(cfg), ..Default::default() }), "split_k");
    err(fp8_gemm(&dev, &a, &b, &mut out, 4, 8, 16, &Fp8Options { config: Some(W8A8Config { split_k: 0, ..cfg }), ..Default::default() }), "split_k");
    let (ai, bi): (Buffer<bf16>, Buffer<bf16>) = (dev.zeros(64).unwrap(), dev.zeros(128).unwrap());
    err(fp8_gemm(&dev, &ai, &bi, &mut out, 4, 8, 16, &o), "f8e4m3 or f8e5m2");
    let mut o32: Buffer<f32> = dev.zeros(32).unwrap();
    err(fp8_gemm(&dev, &a, &b, &mut o32, 4, 8, 16, &Fp8Options::default()), "f16 or bf16");
}
