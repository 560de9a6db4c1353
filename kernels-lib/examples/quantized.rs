//! Quantized GEMMs from the library: W4A16 (4-bit weights, group 128, zero
//! points) with `quantize` → `wq_gemm`; W8A8 (per-token int8 activations ×
//! per-channel int8 weights) with `quantize_int8`, `quantize_rows` →
//! `w8a8_gemm`; FP8 (e4m3, row-wise scales) → `fp8_gemm`. Each result is
//! compared with the f32 product of the unquantized operands: the error is
//! the quantization's, relative to the size of the terms.
//!
//! `cargo run --release -p ferrotile-kernels --example quantized`

use ferrotile::f8e4m3;
use ferrotile::prelude::*;
use ferrotile_kernels::quant::{
    fp8_gemm, quantize, quantize_int8, quantize_rows, w8a8_gemm, wq_gemm, Fp8Options, Fp8Scales, Int8Weights, QuantFormat, QuantOptions, QuantWeights,
    W8A8Options,
};
use ferrotile_kernels::reference::Rng;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::best()?;
    let (m, n, k) = (8usize, 256usize, 512usize);
    let mut rng = Rng::new(2);
    let xf: Vec<f32> = (0..m * k).map(|_| rng.normal() as f32).collect();
    let wf: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32 * 0.05).collect(); // [k, n]
    let x: Vec<bf16> = xf.iter().map(|&v| bf16::from_f32(v)).collect();
    let xd = dev.from_slice(&x)?;
    // |got − x·w| over sqrt(Σ (x_k·w_k)²): the terms' scale
    let err = |got: &[bf16]| -> f64 {
        let mut worst = 0.0f64;
        for i in 0..m {
            for j in 0..n {
                let (s, q) = (0..k).map(|kk| xf[i * k + kk] as f64 * wf[kk * n + j] as f64).fold((0.0, 0.0), |(s, q), t| (s + t, q + t * t));
                worst = worst.max((got[i * n + j].to_f64() - s).abs() / q.sqrt());
            }
        }
        worst
    };
    println!("on {}: {m}x{n}x{k}, errors relative to the terms' scale", dev.name());

    // W4A16
    let packed = quantize::<bf16>(&wf, k, n, QuantFormat { bits: 4, group: 128, zeros: true })?;
    let w4 = QuantWeights::upload(&dev, &packed)?;
    let mut out = dev.zeros::<bf16>(m * n)?;
    wq_gemm(&dev, &xd, &w4, &mut out, m, &QuantOptions::default())?;
    let e4 = err(&out.to_vec()?);
    println!("W4A16 g128: {e4:.3}");

    // W8A8
    let w8 = Int8Weights::upload(&dev, &quantize_int8(&wf, k, n)?)?;
    let (mut xq, mut xs) = (dev.zeros::<i8>(m * k)?, dev.zeros::<f32>(m)?);
    quantize_rows(&dev, &xd, m, k, 0, &mut xq, &mut xs)?;
    w8a8_gemm(&dev, &xq, &xs, &w8, &mut out, m, &W8A8Options::default())?;
    let e8 = err(&out.to_vec()?);
    println!("W8A8:       {e8:.3}");

    // FP8 e4m3 with row-wise scales: rows of x and columns of w scaled into
    // e4m3's range (max |v| → 448), the scales undone in the epilogue
    let sa: Vec<f32> = (0..m).map(|i| xf[i * k..(i + 1) * k].iter().fold(0f32, |a, v| a.max(v.abs())) / 448.0).collect();
    let sb: Vec<f32> = (0..n).map(|j| (0..k).map(|kk| wf[kk * n + j].abs()).fold(0f32, f32::max) / 448.0).collect();
    let a8: Vec<f8e4m3> = (0..m * k).map(|i| f8e4m3::from_f32(xf[i] / sa[i / k])).collect();
    let b8: Vec<f8e4m3> = (0..n * k).map(|i| f8e4m3::from_f32(wf[(i % k) * n + i / k] / sb[i / k])).collect(); // [n, k]
    let (ad, bd, sad, sbd) = (dev.from_slice(&a8)?, dev.from_slice(&b8)?, dev.from_slice(&sa)?, dev.from_slice(&sb)?);
    fp8_gemm(&dev, &ad, &bd, &mut out, m, n, k, &Fp8Options { scales: Fp8Scales::Rows { a: &sad, b: &sbd }, ..Default::default() })?;
    let ef = err(&out.to_vec()?);
    println!("FP8 e4m3:   {ef:.3}");
    // (a 4-bit weight is off by up to half a step of range/15 — about 0.1
    // of its size on average, so the worst of m·n outputs lands near 0.4;
    // 8-bit and e4m3 are finer)
    if e4 > 0.6 || e8 > 0.15 || ef > 0.3 {
        return Err("an error beyond what the formats' quantization explains".into());
    }
    Ok(())
}
