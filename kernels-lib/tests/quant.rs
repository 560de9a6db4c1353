//! The library's quantized GEMM against f64 on the *dequantized* math (so
//! the check measures the kernel, not quantization error): random packed
//! weights, scales and zero points, 4 and 8 bits, every group size and
//! per-channel, zero points on and off, odd M and N, strided `x` and
//! `out`, every tile configuration the tuner may pick (split-K included),
//! outputs poisoned (NaN) so unwritten elements fail and the gaps of a
//! strided output must stay unwritten. Then quantize → GEMM within the
//! quantization error of the f32 product, the GPTQ / AWQ imports against
//! their own dequantization formulas, and bad arguments as errors.
//!
//! Error metric, per output: |got − want| / (|want| + S) with S =
//! sqrt(Σ_k (x_k·w_k)²), the size of the terms' rounding errors: the output
//! rounds to bf16/f16 (2⁻⁹·|want|) and the GEMM kernel rounds each
//! dequantized weight to the activations' dtype for the tensor cores
//! (≤ 2⁻⁹·S in all, typically far less); threshold 1e-2. A wrong group
//! of 128 weights in K = 4096 moves an output by ~0.2·S.

use ferrotile::{Device, DeviceKind, FloatElement};

mod common;
use common::devices;
use ferrotile_kernels::gemm::Activation;
use ferrotile_kernels::quant::{quant_candidates, quantize, wq_gemm, PackedWeights, QuantConfig, QuantFormat, QuantOptions, QuantWeights};
use ferrotile_kernels::reference::{self, Rng};
use ferrotile_kernels::LibError;
use half::{bf16, f16};

fn random_packed<T: FloatElement>(k: usize, n: usize, f: QuantFormat, rng: &mut Rng) -> PackedWeights<T> {
    let p = f.per_word();
    let groups = k / f.group_of(k);
    let word = |rng: &mut Rng| (0..p).fold(0u32, |w, i| w | ((rng.below(1 << f.bits) as u32) << (f.bits as usize * i))) as i32;
    PackedWeights {
        k,
        n,
        format: f,
        qweight: (0..k / p * n).map(|_| word(rng)).collect(),
        // (scales ~ 1/2^bits so the dequantized weights are O(1))
        scales: (0..groups * n).map(|_| T::from_f64(rng.range(0.5, 1.5) / (1 << f.bits) as f64 * 8.0)).collect(),
        qzeros: if f.zeros { (0..groups * n / p).map(|_| word(rng)).collect() } else { vec![] },
        perm: None,
    }
}

/// Runs `wq_gemm` on `dev` and returns the worst error against f64.
fn run<T: FloatElement>(dev: &Device, w: &PackedWeights<T>, m: usize, strides: (usize, usize), config: Option<QuantConfig>, seed: u64) -> f64 {
    run_epilogue(dev, w, m, strides, config, seed, (false, Activation::None))
}

/// [`run`] with an epilogue: a random bias (`[n]`, N(0, 1) in `T`) when
/// `bias`, then `act`.
fn run_epilogue<T: FloatElement>(
    dev: &Device,
    w: &PackedWeights<T>,
    m: usize,
    strides: (usize, usize),
    config: Option<QuantConfig>,
    seed: u64,
    (bias, act): (bool, Activation),
) -> f64 {
    let (k, n) = (w.k, w.n);
    let (sx, so) = (strides.0.max(k), strides.1.max(n));
    let mut rng = Rng::new(seed);
    let x: Vec<T> = (0..(m - 1) * sx + k).map(|_| T::from_f64(rng.normal())).collect();
    let deq = w.dequantize();
    let xd = dev.from_slice(&x).unwrap();
    let wd = QuantWeights::upload(dev, w).unwrap();
    let out_len = (m - 1) * so + n;
    let mut od = dev.from_slice(&vec![T::from_f64(f64::NAN); out_len]).unwrap();
    let b: Vec<T> = (0..n).map(|_| T::from_f64(rng.normal())).collect();
    let bd = dev.from_slice(&b).unwrap();
    let opts = QuantOptions { bias: bias.then_some(&bd), activation: act, x_row_stride: sx, out_row_stride: so, config };
    wq_gemm(dev, &xd, &wd, &mut od, m, &opts).unwrap_or_else(|e| panic!("{} {m}x{n}x{k} {:?} {config:?} {act:?}: {e}", dev.name(), w.format));
    let got = od.to_vec().unwrap();
    // the gaps of a strided output stay poisoned
    for i in 0..m - 1 {
        for j in n..so {
            assert!(got[i * so + j].to_f64().is_nan(), "{}: out[{i}, {j}] (a gap of the strided output) was written", dev.name());
        }
    }
    let cells: Vec<(usize, usize)> = (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).collect();
    let post = |j: usize, s: f64| {
        let v = s + if bias { b[j].to_f64() } else { 0.0 };
        match act {
            Activation::None => v,
            Activation::Relu => v.max(0.0),
            Activation::Gelu => 0.5 * v * (1.0 + reference::erf(v / std::f64::consts::SQRT_2)),
        }
    };
    reference::quant_gemm_epilogue_err(|i, kk| x[i * sx + kk].to_f64(), &deq, post, |i, j| got[i * so + j].to_f64(), n, k, &cells)
}

const TOL: f64 = 1e-2;

#[test]
fn wq_gemm_matches_f64_on_dequantized_weights() {
    for dev in devices() {
        let gpu = dev.kind() == DeviceKind::Cuda;
        let mut rng = Rng::new(5);
        // (m, n, k, bits, group, zeros, strides)
        let mut cases: Vec<(usize, usize, usize, u32, usize, bool, (usize, usize))> = vec![
            (1, 24, 64, 4, 32, true, (0, 0)),
            (3, 40, 128, 4, 64, true, (0, 0)),
            (17, 33, 96, 4, 32, false, (0, 0)),
            (5, 16, 80, 4, 16, true, (100, 20)),
            (2, 24, 48, 4, 0, true, (0, 0)),
            (9, 12, 64, 8, 32, true, (0, 0)),
            (4, 20, 36, 8, 0, false, (40, 25)),
        ];
        if dev.kind() != DeviceKind::Cpu {
            cases.extend([(33, 72, 256, 4, 128, true, (0, 0)), (70, 130, 384, 4, 128, false, (0, 0)), (16, 256, 512, 8, 128, true, (0, 0))]);
        }
        if gpu {
            cases.extend([
                (1, 4096, 4096, 4, 128, true, (0, 0)),
                (16, 2048, 4096, 4, 128, true, (0, 0)),
                (64, 1024, 2048, 8, 64, true, (0, 0)),
                (128, 640, 1024, 4, 128, true, (0, 0)),
            ]);
        }
        for (i, &(m, n, k, bits, group, zeros, strides)) in cases.iter().enumerate() {
            let f = QuantFormat { bits, group, zeros };
            let w: PackedWeights<bf16> = random_packed(k, n, f, &mut rng);
            let e = run(&dev, &w, m, strides, None, 100 + i as u64);
            assert!(e <= TOL, "{}: bf16 {m}x{n}x{k} {f:?} strides {strides:?}: error {e:.2e}", dev.name());
            let w: PackedWeights<f16> = random_packed(k, n, f, &mut rng);
            let e = run(&dev, &w, m, strides, None, 200 + i as u64);
            assert!(e <= TOL, "{}: f16 {m}x{n}x{k} {f:?}: error {e:.2e}", dev.name());
        }
    }
}

#[test]
fn wq_gemm_every_tuner_candidate() {
    for dev in devices().into_iter().filter(|d| d.kind() == DeviceKind::Cuda) {
        let mut rng = Rng::new(7);
        // (group 16 at M ≤ 16 and group 32 at 17 ≤ M ≤ 32 leave only BK = BM)
        for &(m, n, k, group) in
            &[(1usize, 520usize, 1024usize, 128usize), (13, 264, 768, 64), (45, 200, 512, 128), (100, 136, 256, 32), (13, 136, 512, 16), (29, 136, 512, 32)]
        {
            let f = QuantFormat { bits: 4, group, zeros: true };
            let w: PackedWeights<bf16> = random_packed(k, n, f, &mut rng);
            for tc in quant_candidates(m, group, k) {
                let c = QuantConfig {
                    bm: tc.values["BM"] as u32,
                    bn: tc.values["BN"] as u32,
                    bk: tc.values["BK"] as u32,
                    num_warps: tc.num_warps,
                    num_stages: tc.num_stages,
                    split_k: tc.values["SPLIT_K"] as u32,
                    decode: tc.values.get("DECODE") == Some(&1),
                    scale_w: tc.values.get("SCALE_W") == Some(&1),
                };
                let e = run(&dev, &w, m, (0, 0), Some(c), 9);
                assert!(e <= TOL, "{m}x{n}x{k} g{group} {c:?}: error {e:.2e}");
            }
        }
    }
}

/// K split over the grid on every device (the tuner candidates' test runs
/// on CUDA only): the GEMM, the GEMV and the decode form, splits that divide K and one
/// that does not, odd N, each configuration called twice on one device
/// (the shared partials' workspace is reused).
#[test]
fn wq_gemm_split_k_on_every_device() {
    for dev in devices() {
        let mut rng = Rng::new(11);
        let configs = [
            QuantConfig { bm: 16, bn: 32, bk: 32, num_warps: 4, num_stages: 2, split_k: 3, decode: false, scale_w: false },
            QuantConfig { bm: 16, bn: 64, bk: 32, num_warps: 4, num_stages: 2, split_k: 5, decode: false, scale_w: false },
            QuantConfig { bm: 1, bn: 64, bk: 32, num_warps: 4, num_stages: 2, split_k: 4, decode: false, scale_w: false },
            // (the decode form)
            QuantConfig { bm: 16, bn: 32, bk: 32, num_warps: 4, num_stages: 2, split_k: 3, decode: true, scale_w: false },
        ];
        for (i, c) in configs.into_iter().enumerate() {
            let m = if c.bm == 1 && !c.decode { 1 } else { 7 + 10 * i };
            let f = QuantFormat { bits: 4, group: 64, zeros: true };
            let w: PackedWeights<bf16> = random_packed(320, 72, f, &mut rng);
            for call in 0..2 {
                let e = run(&dev, &w, m, (0, 0), Some(c), 300 + 10 * i as u64 + call);
                assert!(e <= TOL, "{}: {m}x72x320 {c:?} call {call}: error {e:.2e}", dev.name());
            }
        }
    }
}

/// The decode form (`wq_decode_kernel`: the weights the `dot`'s wide
/// operand, the rows of `x` its narrow one) on every device: 4 and 8 bits,
/// zero points on and off, per-channel and grouped, K split or not (the
/// epilogue in the kernel or in the reduction), N and K that are not
/// multiples of the tile (masked reads), M below, at and above the tile's
/// rows, strided `x` and `out`; the scales on the partial sums and on the
/// weights (`scale_w`). On CUDA also the tuner's tiles at sizes where
/// `wgmma` takes the dequantized weights from registers (with `scale_w`,
/// its MMA in flight across the back edge).
#[test]
fn wq_decode_form_on_every_device() {
    for dev in devices() {
        let gpu = dev.kind() == DeviceKind::Cuda;
        let mut rng = Rng::new(17);
        let d = |bm, bn, bk, num_warps, num_stages, split_k| QuantConfig { bm, bn, bk, num_warps, num_stages, split_k, decode: true, scale_w: false };
        // (the scales on the weights, the tensor cores accumulating: on
        // CUDA with the MMA in flight)
        let ds = |bm, bn, bk, num_warps, num_stages, split_k| QuantConfig { scale_w: true, ..d(bm, bn, bk, num_warps, num_stages, split_k) };
        // (config, m, n, k, bits, group, zeros, strides, bias + GELU)
        let mut cases = vec![
            (d(16, 32, 32, 4, 2, 1), 1, 72, 256, 4, 64, true, (0, 0), false),
            (d(16, 32, 32, 4, 2, 3), 7, 72, 320, 4, 64, true, (0, 0), true),
            (d(16, 64, 32, 4, 2, 1), 16, 200, 288, 4, 32, false, (300, 210), true),
            (d(16, 32, 16, 4, 1, 2), 21, 40, 96, 8, 0, true, (0, 0), false),
            (d(32, 64, 64, 4, 2, 4), 3, 136, 512, 8, 64, false, (0, 0), true),
            (ds(16, 32, 32, 4, 2, 1), 5, 72, 320, 4, 64, true, (0, 0), true),
            (ds(32, 64, 32, 4, 2, 3), 33, 136, 288, 8, 32, false, (300, 0), false),
        ];
        if gpu {
            cases.extend([
                (d(16, 256, 128, 8, 2, 8), 1, 1000, 2048, 4, 128, true, (0, 0), false),
                (d(16, 256, 128, 8, 2, 1), 16, 512, 1024, 4, 128, true, (0, 1000), true),
                (d(16, 64, 128, 4, 3, 4), 9, 520, 1024, 4, 128, false, (0, 0), true),
                (d(16, 128, 64, 8, 3, 16), 1, 4096, 4096, 4, 128, true, (0, 0), false),
                (d(32, 256, 64, 8, 2, 4), 29, 1024, 1024, 4, 64, true, (1100, 0), false),
                (d(64, 256, 128, 8, 2, 4), 45, 768, 2048, 8, 128, true, (0, 0), true),
                (d(64, 64, 128, 4, 2, 2), 64, 200, 512, 4, 128, true, (0, 0), false),
                (ds(64, 256, 128, 8, 2, 4), 50, 768, 2048, 4, 128, true, (0, 0), true),
                (ds(64, 64, 128, 4, 2, 1), 64, 200, 1024, 4, 128, false, (0, 0), false),
                (ds(64, 256, 128, 8, 2, 8), 64, 1024, 4096, 8, 128, true, (0, 0), false),
            ]);
        }
        for (i, &(c, m, n, k, bits, group, zeros, strides, epi)) in cases.iter().enumerate() {
            let f = QuantFormat { bits, group, zeros };
            let w: PackedWeights<bf16> = random_packed(k, n, f, &mut rng);
            let e = run_epilogue(&dev, &w, m, strides, Some(c), 500 + i as u64, (epi, if epi { Activation::Gelu } else { Activation::None }));
            assert!(e <= TOL, "{}: bf16 {m}x{n}x{k} {f:?} {c:?}: error {e:.2e}", dev.name());
            let w: PackedWeights<f16> = random_packed(k, n, f, &mut rng);
            let e = run(&dev, &w, m, strides, Some(c), 600 + i as u64);
            assert!(e <= TOL, "{}: f16 {m}x{n}x{k} {f:?} {c:?}: error {e:.2e}", dev.name());
        }
    }
}

/// The fused epilogue on every device: a bias and each activation, on the
/// GEMM tile (K split or not: the reduction applies it then) and the GEMV,
/// odd N, strided output.
#[test]
fn wq_gemm_bias_and_activation_on_every_device() {
    for dev in devices() {
        let mut rng = Rng::new(13);
        let configs = [
            None,
            Some(QuantConfig { bm: 16, bn: 32, bk: 32, num_warps: 4, num_stages: 2, split_k: 1, decode: false, scale_w: false }),
            Some(QuantConfig { bm: 16, bn: 32, bk: 32, num_warps: 4, num_stages: 2, split_k: 3, decode: false, scale_w: false }),
            Some(QuantConfig { bm: 1, bn: 32, bk: 32, num_warps: 4, num_stages: 2, split_k: 1, decode: false, scale_w: false }),
            Some(QuantConfig { bm: 1, bn: 32, bk: 32, num_warps: 4, num_stages: 2, split_k: 4, decode: false, scale_w: false }),
        ];
        for (i, c) in configs.into_iter().enumerate() {
            let m = if c.is_some_and(|c| c.bm == 1) { 1 } else { 5 + 4 * i };
            for (j, (bias, act)) in
                [(true, Activation::None), (true, Activation::Relu), (false, Activation::Gelu), (true, Activation::Gelu)].into_iter().enumerate()
            {
                let f = QuantFormat { bits: if j % 2 == 0 { 4 } else { 8 }, group: 64, zeros: j != 1 };
                let w: PackedWeights<bf16> = random_packed(256, 72, f, &mut rng);
                let seed = 400 + 10 * i as u64 + j as u64;
                let e = run_epilogue(&dev, &w, m, (0, 80), c, seed, (bias, act));
                assert!(e <= TOL, "{}: {m}x72x256 {f:?} {c:?} bias {bias} {act:?}: error {e:.2e}", dev.name());
            }
        }
    }
}

#[test]
fn quantize_then_gemm_is_within_quantization_error() {
    let dev = Device::cpu();
    let (m, n, k) = (3, 48, 256);
    let mut rng = Rng::new(11);
    let w: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32).collect();
    let x: Vec<bf16> = (0..m * k).map(|_| bf16::from_f64(rng.normal())).collect();
    for f in
        [QuantFormat { bits: 4, group: 32, zeros: true }, QuantFormat { bits: 4, group: 128, zeros: false }, QuantFormat { bits: 8, group: 0, zeros: true }]
    {
        let p: PackedWeights<bf16> = quantize(&w, k, n, f).unwrap();
        // each dequantized weight is within half a step of the original
        let deq = p.dequantize();
        let gs = f.group_of(k);
        for (i, (&a, &b)) in w.iter().zip(&deq).enumerate() {
            let s = p.scales[(i / n) / gs * n + i % n].to_f64();
            assert!((a as f64 - b).abs() <= 0.5 * s + 4e-3 * a.abs() as f64 + 1e-6, "{f:?}: weight {i}: {a} → {b} (scale {s})");
        }
        let wd = QuantWeights::upload(&dev, &p).unwrap();
        let xd = dev.from_slice(&x).unwrap();
        let mut od = dev.from_slice(&vec![bf16::NAN; m * n]).unwrap();
        wq_gemm(&dev, &xd, &wd, &mut od, m, &QuantOptions::default()).unwrap();
        let got = od.to_vec().unwrap();
        // the f32 product: errors of ~√k · step/√12 · |x|
        let step = if f.bits == 4 { 2.0 * 3.5 / 15.0 } else { 2.0 * 4.5 / 255.0 };
        let bound = 4.0 * (k as f64).sqrt() * step / 12f64.sqrt();
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..k).map(|kk| x[i * k + kk].to_f64() * w[kk * n + j] as f64).sum();
                let g = got[i * n + j].to_f64();
                assert!((g - exact).abs() <= bound, "{f:?}: out[{i}, {j}] = {g}, f32 product {exact}, bound {bound}");
            }
        }
    }
}

#[test]
fn gptq_and_awq_imports_dequantize_as_their_formats_do() {
    let mut rng = Rng::new(13);
    let (k, n, group) = (64, 16, 32);
    let groups = k / group;
    let q: Vec<u32> = (0..k * n).map(|_| rng.below(16) as u32).collect();
    let z: Vec<u32> = (0..groups * n).map(|_| rng.below(16) as u32).collect();
    let s: Vec<f16> = (0..groups * n).map(|_| f16::from_f64(rng.range(0.01, 0.1))).collect();
    let want = |kk: usize, j: usize| (q[kk * n + j] as f64 - z[kk / group * n + j] as f64) * s[kk / group * n + j].to_f64();
    // GPTQ: qweight [k/8, n] along K, qzeros [groups, n/8] along N holding z − 1
    let gq: Vec<i32> =
        (0..k / 8).flat_map(|r| (0..n).map(move |j| (r, j))).map(|(r, j)| (0..8).fold(0u32, |w, i| w | (q[(8 * r + i) * n + j] << (4 * i))) as i32).collect();
    let gz: Vec<i32> = (0..groups)
        .flat_map(|g| (0..n / 8).map(move |c| (g, c)))
        .map(|(g, c)| (0..8).fold(0u32, |w, i| w | (((z[g * n + 8 * c + i] + 15) & 15) << (4 * i))) as i32)
        .collect();
    let g_idx: Vec<i32> = (0..k).map(|i| (i / group) as i32).collect();
    let p = PackedWeights::from_gptq(&gq, &gz, &s, Some(&g_idx), k, n, 4, group).unwrap();
    // AWQ: qweight [k, n/8] along N in the order 0 2 4 6 1 3 5 7
    const ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];
    let pack_awq = |v: &[u32], rows: usize| -> Vec<i32> {
        (0..rows)
            .flat_map(|r| (0..n / 8).map(move |c| (r, c)))
            .map(|(r, c)| (0..8).fold(0u32, |w, i| w | (v[r * n + 8 * c + ORDER[i]] << (4 * i))) as i32)
            .collect()
    };
    let a = PackedWeights::from_awq(&pack_awq(&q, k), &pack_awq(&z, groups), &s, k, n, group).unwrap();
    for w in [&p, &a] {
        for kk in 0..k {
            for j in 0..n {
                assert_eq!(w.q(kk, j), q[kk * n + j]);
                assert_eq!(w.z(kk / group, j), z[kk / group * n + j]);
            }
        }
        let d = w.dequantize();
        for (i, v) in d.iter().enumerate() {
            assert!((v - want(i / n, i % n)).abs() <= 1e-3 * want(i / n, i % n).abs() + 1e-6);
        }
    }
    // a g_idx whose groups do not hold `group` rows each is refused
    let mut uneven = g_idx.clone();
    uneven[0] = 1;
    assert!(matches!(PackedWeights::from_gptq(&gq, &gz, &s, Some(&uneven), k, n, 4, group), Err(LibError::Config(m)) if m.contains("rows")));
    let mut out_of_range = g_idx.clone();
    out_of_range[3] = groups as i32;
    assert!(matches!(PackedWeights::from_gptq(&gq, &gz, &s, Some(&out_of_range), k, n, 4, group), Err(LibError::Shape(m)) if m.contains("g_idx")));
}

/// GPTQ act-order (`desc_act`): rows quantized in a permuted order, so a
/// row's group is `g_idx[row]`, not `row / group`. The import sorts the rows
/// by group and `wq_gemm` gathers `x`'s columns to match; the product must
/// equal x · W with W in the checkpoint's own row order, on every device.
#[test]
fn gptq_act_order_matches_f64() {
    for dev in devices() {
        let mut rng = Rng::new(19);
        for &(m, n, k, group, bits) in &[(1usize, 24usize, 128usize, 32usize, 4u32), (5, 16, 256, 64, 4), (3, 32, 96, 32, 8)] {
            let p = 32 / bits as usize;
            let groups = k / group;
            let mask = (1u32 << bits) - 1;
            // the order GPTQ visited the rows in: group = position / group
            let mut order: Vec<usize> = (0..k).collect();
            for i in (1..k).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            let mut g_idx = vec![0i32; k];
            for (pos, &row) in order.iter().enumerate() {
                g_idx[row] = (pos / group) as i32;
            }
            let q: Vec<u32> = (0..k * n).map(|_| rng.below(1 << bits) as u32).collect();
            let z: Vec<u32> = (0..groups * n).map(|_| rng.below(1 << bits) as u32).collect();
            let s: Vec<bf16> = (0..groups * n).map(|_| bf16::from_f64(rng.range(0.5, 1.5) / (1 << bits) as f64 * 8.0)).collect();
            let qw: Vec<i32> = (0..k / p)
                .flat_map(|r| (0..n).map(move |j| (r, j)))
                .map(|(r, j)| (0..p).fold(0u32, |w, i| w | (q[(p * r + i) * n + j] << (bits as usize * i))) as i32)
                .collect();
            let qz: Vec<i32> = (0..groups)
                .flat_map(|g| (0..n / p).map(move |c| (g, c)))
                .map(|(g, c)| (0..p).fold(0u32, |w, i| w | (((z[g * n + p * c + i] + mask) & mask) << (bits as usize * i))) as i32)
                .collect();
            let w = PackedWeights::from_gptq(&qw, &qz, &s, Some(&g_idx), k, n, bits, group).unwrap();
            assert!(w.perm.is_some(), "act-order keeps its permutation");
            let deq: Vec<f64> =
                (0..k * n).map(|i| (q[i] as f64 - z[g_idx[i / n] as usize * n + i % n] as f64) * s[g_idx[i / n] as usize * n + i % n].to_f64()).collect();
            let mine = w.dequantize();
            assert!(deq.iter().zip(&mine).all(|(a, b)| (a - b).abs() <= 1e-12), "dequantize() in the checkpoint's row order");
            let e = run(&dev, &w, m, (0, 0), None, 300 + m as u64);
            assert!(e <= TOL, "{}: act-order {m}x{n}x{k} g{group} w{bits}: error {e:.2e}", dev.name());
        }
    }
}

#[test]
fn wq_gemm_rejects_bad_arguments() {
    let dev = Device::cpu();
    let mut rng = Rng::new(17);
    let f = QuantFormat { bits: 4, group: 32, zeros: true };
    let w: PackedWeights<bf16> = random_packed(64, 16, f, &mut rng);
    let wd = QuantWeights::upload(&dev, &w).unwrap();
    let x = dev.from_slice(&[bf16::ONE; 2 * 64]).unwrap();
    let mut o = dev.from_slice(&[bf16::ZERO; 2 * 16]).unwrap();
    let err = |r: Result<(), LibError>| r.expect_err("must fail").to_string();
    assert!(err(wq_gemm(&dev, &x, &wd, &mut o, 3, &QuantOptions::default())).contains("`x`"));
    let mut short = dev.from_slice(&[bf16::ZERO; 20]).unwrap();
    assert!(err(wq_gemm(&dev, &x, &wd, &mut short, 2, &QuantOptions::default())).contains("`out`"));
    assert!(err(wq_gemm(&dev, &x, &wd, &mut o, 2, &QuantOptions { x_row_stride: 10, ..Default::default() })).contains("stride"));
    let bad = QuantConfig { bm: 16, bn: 32, bk: 64, num_warps: 4, num_stages: 1, split_k: 1, decode: false, scale_w: false };
    assert!(err(wq_gemm(&dev, &x, &wd, &mut o, 2, &QuantOptions { config: Some(bad), ..Default::default() })).contains("BK"));
    // the decode form's narrow side must take a `dot`: 16 rows of x at least
    let narrow = QuantConfig { bm: 8, bn: 32, bk: 32, num_warps: 4, num_stages: 1, split_k: 1, decode: true, scale_w: false };
    assert!(err(wq_gemm(&dev, &x, &wd, &mut o, 2, &QuantOptions { config: Some(narrow), ..Default::default() })).contains("invalid configuration"));
    // a bias shorter than N (read without guards)
    let b = dev.from_slice(&[bf16::ONE; 15]).unwrap();
    assert!(err(wq_gemm(&dev, &x, &wd, &mut o, 2, &QuantOptions { bias: Some(&b), ..Default::default() })).contains("`bias`"));
    // the uploaded buffers are public: a shorter one swapped in (or a
    // claimed shape larger than the buffers) is refused at the launch,
    // which runs without guards
    for what in ["qweight", "scales", "qzeros"] {
        let mut wd2 = QuantWeights::upload(&dev, &w).unwrap();
        match what {
            "qweight" => wd2.qweight = dev.from_slice(&w.qweight[1..]).unwrap(),
            "scales" => wd2.scales = dev.from_slice(&w.scales[1..]).unwrap(),
            _ => wd2.qzeros = dev.from_slice(&w.qzeros[1..]).unwrap(),
        }
        assert!(err(wq_gemm(&dev, &x, &wd2, &mut o, 2, &QuantOptions::default())).contains(&format!("`{what}`")), "{what}");
    }
    let mut wide = QuantWeights::upload(&dev, &w).unwrap();
    wide.n = 32;
    let mut o2 = dev.from_slice(&[bf16::ZERO; 2 * 32]).unwrap();
    assert!(err(wq_gemm(&dev, &x, &wide, &mut o2, 2, &QuantOptions::default())).contains("`qweight`"));
    // formats
    let bad_group = PackedWeights { format: QuantFormat { group: 24, ..f }, ..w.clone() };
    assert!(matches!(bad_group.validate(), Err(LibError::Config(m)) if m.contains("group")));
    let bad_bits = PackedWeights { format: QuantFormat { bits: 3, ..f }, ..w.clone() };
    assert!(matches!(bad_bits.validate(), Err(LibError::Config(m)) if m.contains("bits")));
    let short_scales = PackedWeights { scales: w.scales[1..].to_vec(), ..w.clone() };
    let not_a_perm = PackedWeights { perm: Some(vec![0; 64]), ..w.clone() };
    assert!(matches!(not_a_perm.validate(), Err(LibError::Shape(m)) if m.contains("perm")));
    assert!(matches!(QuantWeights::upload(&dev, &short_scales), Err(LibError::Shape(m)) if m.contains("`scales`")));
    assert!(matches!(quantize::<bf16>(&[0.0; 60], 60, 1, f), Err(LibError::Shape(_))));
    assert!(matches!(quantize::<bf16>(&[f32::NAN; 64], 64, 1, QuantFormat { zeros: false, ..f }), Err(LibError::Config(_))));
    // f32 activations are refused
    let x32 = dev.from_slice(&[0f32; 64]).unwrap();
    let w32 = QuantWeights::<f32>::upload(
        &dev,
        &PackedWeights { k: 64, n: 16, format: f, qweight: w.qweight.clone(), scales: vec![0f32; 32], qzeros: w.qzeros.clone(), perm: None },
    )
    .unwrap();
    let mut o32 = dev.from_slice(&[0f32; 16]).unwrap();
    assert!(err(wq_gemm(&dev, &x32, &w32, &mut o32, 1, &QuantOptions::default())).contains("f16 or bf16"));
}
