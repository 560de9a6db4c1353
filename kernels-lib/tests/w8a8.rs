//! W8A8 (int8 activations × int8 weights) against f64, on every device:
//!
//! - `quantize_rows`: the scale is max|x| / 127 (within 2 f32 ulps), every
//!   quotient is rounded to the nearest integer (within 0.5 + a rounding
//!   margin of x / s), the row's largest element lands on ±127, rows of
//!   zeros give zeros, strided rows, odd K; outputs poisoned.
//! - `w8a8_gemm`: random int8 operands and scales against the exact
//!   integer product in f64 (the accumulator is exact; what remains is the
//!   f32 epilogue's — a few 2⁻²⁴ of the terms before the bias cancels
//!   them — and the output's rounding: 2⁻⁸ relative for bf16, 2⁻¹¹ for
//!   f16), odd M/N/K (K not a multiple of 16 takes
//!   the kernel off TMA), bias and each activation, strided operands (the
//!   gaps of `out` stay poisoned), every tuner candidate on CUDA.
//! - End to end: `quantize_int8` and `quantize_rows`, then the product,
//!   within the quantization error of the f32 product.
//! - Bad arguments are errors naming them.

use ferrotile::{Buffer, Device, DeviceKind, FloatElement};

mod common;
use common::devices;
use ferrotile_kernels::gemm::Activation;
use ferrotile_kernels::quant::{quantize_int8, quantize_rows, w8a8_candidates, w8a8_gemm, Int8Packed, Int8Weights, W8A8Config, W8A8Options};
use ferrotile_kernels::reference::Rng;
use half::{bf16, f16};

fn rand_i8(rng: &mut Rng) -> i8 {
    // (the extremes often: they are where an accumulator would overflow)
    match rng.below(8) {
        0 => [127i8, -127, -128, 0][rng.below(4) as usize],
        _ => rng.int(-128, 127) as i8,
    }
}

struct Case {
    m: usize,
    n: usize,
    k: usize,
    bias: bool,
    act: Activation,
    strides: (usize, usize),
}

/// Run one product; returns the largest error relative to the tolerance
/// (≤ 1 passes).
fn run<U: FloatElement>(dev: &Device, c: &Case, config: Option<W8A8Config>, rng: &mut Rng) -> f64 {
    let (m, n, k) = (c.m, c.n, c.k);
    let (sx, so) = (c.strides.0.max(k), c.strides.1.max(n));
    let xq: Vec<i8> = (0..(m - 1) * sx + k).map(|_| rand_i8(rng)).collect();
    let xs: Vec<f32> = (0..m).map(|_| rng.range(0.5, 2.0) as f32 / 127.0).collect();
    let w = Int8Packed::new((0..n * k).map(|_| rand_i8(rng)).collect(), (0..n).map(|_| rng.range(0.5, 2.0) as f32 / 127.0).collect(), n, k).unwrap();
    let bias: Vec<U> = (0..n).map(|_| U::from_f64(rng.normal() * 100.0)).collect();
    let wd = Int8Weights::upload(dev, &w).unwrap();
    let (xqd, xsd, bd) = (dev.from_slice(&xq).unwrap(), dev.from_slice(&xs).unwrap(), dev.from_slice(&bias).unwrap());
    let mut od = dev.from_slice(&vec![U::from_f64(f64::NAN); (m - 1) * so + n]).unwrap();
    let opts = W8A8Options { bias: c.bias.then_some(&bd), activation: c.act, x_row_stride: sx, out_row_stride: so, config };
    w8a8_gemm(dev, &xqd, &xsd, &wd, &mut od, m, &opts).unwrap_or_else(|e| panic!("{} {m}x{n}x{k} {config:?}: {e}", dev.name()));
    let got = od.to_vec().unwrap();
    let rel = if U::DTYPE == ferrotile::ir::DType::BF16 { 1.0 / 256.0 } else { 1.0 / 2048.0 };
    let mut worst = 0.0f64;
    for i in 0..m {
        for j in n..so {
            if i + 1 < m {
                assert!(got[i * so + j].to_f64().is_nan(), "{}: out[{i}, {j}] (a gap of the strided output) was written", dev.name());
            }
        }
        for j in 0..n {
            let dot: i64 = (0..k).map(|kk| xq[i * sx + kk] as i64 * w.q[j * k + kk] as i64).sum();
            let mut want = dot as f64 * xs[i] as f64 * w.scales[j] as f64;
            // (the f32 epilogue: the accumulator's conversion and two
            // products round by ≤ 2⁻²⁴ each, the bias sum once more — on
            // the size of the terms, which cancel where the output is small)
            let mut terms = want.abs();
            if c.bias {
                want += bias[j].to_f64();
                terms += bias[j].to_f64().abs();
            }
            // (the activation's own f32 error is far below the output's
            // rounding; the GELU's derivative is at most ~1.13)
            want = match c.act {
                Activation::None => want,
                Activation::Relu => want.max(0.0),
                Activation::Gelu => 0.5 * want * (1.0 + ferrotile_kernels::reference::erf(want / std::f64::consts::SQRT_2)),
            };
            let g = got[i * so + j].to_f64();
            let tol = rel * 1.2 * want.abs() + 1.2 * 6.0 * terms / (1u64 << 24) as f64 + 1e-6;
            let e = if g.is_finite() { (g - want).abs() / tol } else { f64::INFINITY };
            worst = worst.max(e);
        }
    }
    worst
}

#[test]
fn w8a8_gemm_matches_f64() {
    for dev in devices() {
        let mut rng = Rng::new(3);
        let gpu = dev.kind() == DeviceKind::Cuda;
        let mut cases = vec![
            Case { m: 1, n: 24, k: 64, bias: false, act: Activation::None, strides: (0, 0) },
            Case { m: 7, n: 33, k: 100, bias: true, act: Activation::Relu, strides: (0, 0) },
            Case { m: 20, n: 17, k: 130, bias: true, act: Activation::Gelu, strides: (160, 20) },
            Case { m: 3, n: 48, k: 32, bias: false, act: Activation::None, strides: (48, 50) },
        ];
        if dev.kind() != DeviceKind::Cpu {
            cases.push(Case { m: 70, n: 90, k: 300, bias: true, act: Activation::None, strides: (0, 0) });
        }
        if gpu {
            cases.extend([
                Case { m: 300, n: 520, k: 1024, bias: true, act: Activation::None, strides: (0, 0) },
                Case { m: 129, n: 200, k: 1000, bias: false, act: Activation::Relu, strides: (1008, 0) },
                Case { m: 1, n: 4096, k: 4096, bias: false, act: Activation::None, strides: (0, 0) },
                Case { m: 512, n: 1024, k: 8192, bias: true, act: Activation::Gelu, strides: (0, 1030) },
                // (K at the accumulator's limit: sums of ±128·128 terms)
                Case { m: 64, n: 64, k: 131_056, bias: false, act: Activation::None, strides: (0, 0) },
            ]);
        }
        // split K (forced: the tuner takes it only for few rows on CUDA),
        // with bias and an activation applied after the sum
        let small = W8A8Config::default_for(&dev);
        for (split, act) in [(2u32, Activation::Gelu), (3, Activation::None)] {
            let c = Case { m: 9, n: 40, k: 200, bias: true, act, strides: (0, 44) };
            let e = run::<bf16>(&dev, &c, Some(W8A8Config { split_k: split, ..small }), &mut rng);
            assert!(e <= 1.0, "{}: split {split} {act:?}: {e:.2} × the tolerance", dev.name());
        }
        // a persistent grid: fewer programs than tiles (4 where the device
        // does not count its cores, one per SM on CUDA), split K or not
        let mut persistent = vec![
            (Case { m: 50, n: 100, k: 200, bias: true, act: Activation::Relu, strides: (0, 104) }, W8A8Config { persistent: true, ..small }),
            (Case { m: 50, n: 100, k: 200, bias: true, act: Activation::Gelu, strides: (0, 0) }, W8A8Config { persistent: true, split_k: 2, ..small }),
        ];
        if gpu {
            let wide = W8A8Config { bm: 128, bn: 256, bk: 256, num_warps: 8, num_stages: 2, split_k: 1, persistent: true };
            persistent.push((Case { m: 1100, n: 4000, k: 512, bias: true, act: Activation::None, strides: (0, 0) }, wide));
        }
        for (c, cfg) in &persistent {
            let e = run::<bf16>(&dev, c, Some(*cfg), &mut rng);
            assert!(e <= 1.0, "{}: {}x{}x{} {cfg:?}: {e:.2} × the tolerance", dev.name(), c.m, c.n, c.k);
        }
        for c in &cases {
            let e = run::<bf16>(&dev, c, None, &mut rng);
            assert!(e <= 1.0, "{}: bf16 {}x{}x{} bias {} {:?}: {e:.2} × the tolerance", dev.name(), c.m, c.n, c.k, c.bias, c.act);
            let e = run::<f16>(&dev, c, None, &mut rng);
            assert!(e <= 1.0, "{}: f16 {}x{}x{}: {e:.2} × the tolerance", dev.name(), c.m, c.n, c.k);
        }
    }
}

#[test]
fn w8a8_every_tuner_candidate() {
    for dev in devices().into_iter().filter(|d| d.kind() == DeviceKind::Cuda) {
        let mut rng = Rng::new(4);
        for c in [
            Case { m: 200, n: 300, k: 640, bias: true, act: Activation::None, strides: (0, 0) },
            Case { m: 33, n: 520, k: 1408, bias: true, act: Activation::Relu, strides: (0, 0) },
        ] {
            for tc in w8a8_candidates(c.m) {
                let cfg = W8A8Config::from_tune(&tc).unwrap();
                let e = run::<bf16>(&dev, &c, Some(cfg), &mut rng);
                assert!(e <= 1.0, "{}x{}x{} {cfg:?}: {e:.2} × the tolerance", c.m, c.n, c.k);
            }
        }
    }
}

fn quantize_on<T: FloatElement>(dev: &Device, x: &[T], m: usize, k: usize, sx: usize) -> (Vec<i8>, Vec<f32>) {
    let xd = dev.from_slice(x).unwrap();
    let mut q: Buffer<i8> = dev.from_slice(&vec![99i8; m * k + 5]).unwrap();
    let mut s: Buffer<f32> = dev.from_slice(&vec![f32::NAN; m + 3]).unwrap();
    quantize_rows(dev, &xd, m, k, sx, &mut q, &mut s).unwrap();
    let (q, s) = (q.to_vec().unwrap(), s.to_vec().unwrap());
    assert!(q[m * k..].iter().all(|&v| v == 99) && s[m..].iter().all(|v| v.is_nan()), "{}: quantize_rows wrote past its outputs", dev.name());
    (q[..m * k].to_vec(), s[..m].to_vec())
}

fn check_quantized<T: FloatElement>(dev: &Device, m: usize, k: usize, sx: usize, rng: &mut Rng) {
    let mut x: Vec<T> = (0..(m - 1) * sx + k).map(|_| T::from_f64(rng.normal() * 3.0)).collect();
    // a row of zeros, and halfway quotients (max 127 → x/s = x exactly)
    if m > 2 {
        x[sx..sx + k].iter_mut().for_each(|v| *v = T::from_f64(0.0));
        let r = 2 * sx;
        for (i, v) in x[r..r + k].iter_mut().enumerate() {
            *v = T::from_f64(if i == 0 { 127.0 } else { ((i % 200) as f64 - 100.0) + 0.5 });
        }
    }
    let (q, s) = quantize_on(dev, &x, m, k, sx);
    for i in 0..m {
        let row: Vec<f64> = (0..k).map(|j| x[i * sx + j].to_f64()).collect();
        let amax = row.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        let want = (amax as f32 / 127.0) as f64;
        assert!((s[i] as f64 - want).abs() <= 2.0 * f32::EPSILON as f64 * want, "{}: row {i}: scale {} for max|x| {amax}", dev.name(), s[i]);
        for (j, &v) in row.iter().enumerate() {
            let got = q[i * k + j] as f64;
            if amax == 0.0 {
                assert_eq!(got, 0.0, "{}: row {i} of zeros: q[{j}] = {got}", dev.name());
                continue;
            }
            let t = v * 127.0 / amax;
            assert!(got.abs() <= 127.0 && (got - t).abs() <= 0.5 + 1e-5 * t.abs().max(1.0), "{}: row {i}: x = {v} quantized to {got}, x/s = {t}", dev.name());
            if v.abs() == amax {
                assert_eq!(got, t.signum() * 127.0, "{}: row {i}: the largest |x| must map to ±127", dev.name());
            }
            // the exactly-halfway row: ties go to even
            if i == 2 && m > 2 && (t - t.floor() - 0.5).abs() < 1e-9 {
                assert_eq!(got, t.round_ties_even(), "{}: row 2: x/s = {t} (a tie) gave {got}", dev.name());
            }
        }
    }
}

#[test]
fn quantize_rows_matches_its_definition() {
    for dev in devices() {
        let mut rng = Rng::new(8);
        let big = dev.kind() == DeviceKind::Cuda;
        for &(m, k, sx) in &[(1usize, 7usize, 0usize), (5, 300, 0), (4, 1000, 1030), (3, 4096, 0)] {
            if k >= 4096 && !big {
                continue;
            }
            let sx = if sx == 0 { k } else { sx };
            check_quantized::<bf16>(&dev, m, k, sx, &mut rng);
            check_quantized::<f16>(&dev, m, k, sx, &mut rng);
            check_quantized::<f32>(&dev, m, k, sx, &mut rng);
        }
    }
}

#[test]
fn quantize_then_w8a8_is_within_quantization_error() {
    for dev in devices() {
        let (m, n, k) = if dev.kind() == DeviceKind::Cuda { (64, 256, 1024) } else { (5, 40, 96) };
        let mut rng = Rng::new(12);
        let x: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
        let wf: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32 * 0.05).collect();
        let w = quantize_int8(&wf, k, n).unwrap();
        let wd = Int8Weights::upload(&dev, &w).unwrap();
        let xb: Vec<bf16> = x.iter().map(|&v| bf16::from_f32(v)).collect();
        let xd = dev.from_slice(&xb).unwrap();
        let mut xq: Buffer<i8> = dev.zeros(m * k).unwrap();
        let mut xs: Buffer<f32> = dev.zeros(m).unwrap();
        quantize_rows(&dev, &xd, m, k, 0, &mut xq, &mut xs).unwrap();
        let mut out: Buffer<bf16> = dev.zeros(m * n).unwrap();
        w8a8_gemm(&dev, &xq, &xs, &wd, &mut out, m, &W8A8Options::default()).unwrap();
        let got = out.to_vec().unwrap();
        // int8 on both sides: each term off by ≲ (|x|·Δw + |w|·Δx), Δ half a
        // step of max/127; over K random terms, ~1 % of the product's scale
        let mut worst = 0.0f64;
        for i in 0..m {
            for j in 0..n {
                let (want, sq) = (0..k).map(|kk| xb[i * k + kk].to_f64() * wf[kk * n + j] as f64).fold((0.0, 0.0), |(s, q), t| (s + t, q + t * t));
                worst = worst.max((got[i * n + j].to_f64() - want).abs() / sq.sqrt());
            }
        }
        assert!(worst < 0.15, "{}: quantize → w8a8 error {worst:.3} of the terms' scale", dev.name());
    }
}

#[test]
fn w8a8_rejects_bad_arguments() {
    let dev = Device::cpu();
    assert!(Int8Packed::new(vec![0; 10], vec![1.0; 2], 2, 4).is_err_and(|e| e.to_string().contains("weights have 10")));
    assert!(Int8Packed::new(vec![0; 8], vec![1.0; 3], 2, 4).is_err_and(|e| e.to_string().contains("3 weight scales")));
    assert!(Int8Packed::new(vec![0; 8], vec![1.0, f32::NAN], 2, 4).is_err_and(|e| e.to_string().contains("not finite")));
    assert!(quantize_int8(&[1.0, f32::INFINITY], 1, 2).is_err_and(|e| e.to_string().contains("not finite")));
    let w = Int8Weights::upload(&dev, &Int8Packed::new(vec![1; 8 * 16], vec![1.0; 8], 8, 16).unwrap()).unwrap();
    let xq: Buffer<i8> = dev.zeros(4 * 16).unwrap();
    let xs: Buffer<f32> = dev.zeros(4).unwrap();
    let mut out: Buffer<bf16> = dev.zeros(4 * 8).unwrap();
    let opts = W8A8Options::<bf16>::default();
    let err = |r: Result<(), ferrotile_kernels::LibError>, what: &str| {
        let e = r.expect_err(what).to_string();
        assert!(e.contains(what), "expected an error naming `{what}`, got: {e}");
    };
    err(w8a8_gemm(&dev, &xq, &xs, &w, &mut out, 5, &opts), "`xq`");
    let mut small: Buffer<bf16> = dev.zeros(3 * 8).unwrap();
    err(w8a8_gemm(&dev, &xq, &xs, &w, &mut small, 4, &opts), "`out`");
    let short: Buffer<f32> = dev.zeros(2).unwrap();
    err(w8a8_gemm(&dev, &xq, &short, &w, &mut out, 4, &opts), "`xs`");
    let b: Buffer<bf16> = dev.zeros(3).unwrap();
    err(w8a8_gemm(&dev, &xq, &xs, &w, &mut out, 4, &W8A8Options { bias: Some(&b), ..Default::default() }), "`bias`");
    err(w8a8_gemm(&dev, &xq, &xs, &w, &mut out, 4, &W8A8Options { x_row_stride: 8, ..Default::default() }), "row strides");
    err(
        w8a8_gemm(
            &dev,
            &xq,
            &xs,
            &w,
            &mut out,
            4,
            &W8A8Options {
                config: Some(W8A8Config { bm: 24, bn: 32, bk: 32, num_warps: 4, num_stages: 1, split_k: 1, persistent: false }),
                ..Default::default()
            },
        ),
        "invalid configuration",
    );
    let mut o32: Buffer<f32> = dev.zeros(4 * 8).unwrap();
    err(w8a8_gemm(&dev, &xq, &xs, &w, &mut o32, 4, &W8A8Options::default()), "f16 or bf16");
    let huge = Int8Weights { n: 1, k: 1 << 17, q: dev.zeros(1 << 17).unwrap(), scales: dev.zeros(1).unwrap() };
    err(w8a8_gemm(&dev, &xq, &xs, &huge, &mut out, 1, &opts), "overflow");
    let x: Buffer<bf16> = dev.zeros(10).unwrap();
    let (mut q, mut s): (Buffer<i8>, Buffer<f32>) = (dev.zeros(16).unwrap(), dev.zeros(2).unwrap());
    err(quantize_rows(&dev, &x, 2, 8, 0, &mut q, &mut s), "`x`");
    let x: Buffer<bf16> = dev.zeros(16).unwrap();
    let mut s1: Buffer<f32> = dev.zeros(1).unwrap();
    err(quantize_rows(&dev, &x, 2, 8, 0, &mut q, &mut s1), "`scales`");
}
