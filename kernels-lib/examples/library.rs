//! Calling the kernel library: softmax, layer-norm and a GEMM with a fused
//! bias and GELU, on the best device, each checked against the f64
//! references in `ferrotile_kernels::reference`.
//!
//! `cargo run --release -p ferrotile-kernels --example library`

use ferrotile::prelude::*;
use ferrotile_kernels::gemm::{gemm, Activation, GemmOptions};
use ferrotile_kernels::reference::{self, Rng};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dev = Device::best()?;
    println!("on {}", dev.name());
    let mut rng = Rng::new(1);

    // softmax and layer-norm over the rows of a [rows, cols] f32 tensor
    let (rows, cols) = (128usize, 1000usize);
    let xv: Vec<f32> = (0..rows * cols).map(|_| rng.normal() as f32 * 2.0).collect();
    let wv: Vec<f32> = (0..cols).map(|_| rng.normal() as f32).collect();
    let bv: Vec<f32> = (0..cols).map(|_| rng.normal() as f32).collect();
    let (x, w, b) = (dev.from_slice(&xv)?, dev.from_slice(&wv)?, dev.from_slice(&bv)?);
    let f64s = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
    let mut y = dev.zeros::<f32>(rows * cols)?;
    ferrotile_kernels::softmax(&dev, &x, &mut y, rows, cols)?;
    // (errors relative to |want| + 1: outputs near zero have no relative
    // precision to speak of)
    let err = |got: &[f64], want: &[f64]| got.iter().zip(want).map(|(g, w)| (g - w).abs() / (w.abs() + 1.0)).fold(0.0, f64::max);
    let e = err(&f64s(&y.to_vec()?), &reference::softmax(&f64s(&xv), rows, cols));
    println!("softmax    {rows}x{cols} f32: max error {e:.1e}");
    ferrotile_kernels::layer_norm(&dev, &x, &w, &b, &mut y, rows, cols, 1e-5)?;
    let want = reference::layer_norm(&f64s(&xv), &f64s(&wv), &f64s(&bv), rows, cols, 1e-5);
    let e2 = err(&f64s(&y.to_vec()?), &want);
    println!("layer_norm {rows}x{cols} f32: max error {e2:.1e}");

    // C = gelu(A·B + bias), bf16 in, f32 out
    let (m, n, k) = (200usize, 300usize, 256usize);
    let av: Vec<bf16> = (0..m * k).map(|_| bf16::from_f64(rng.normal())).collect();
    let bv: Vec<bf16> = (0..k * n).map(|_| bf16::from_f64(rng.normal())).collect();
    let biasv: Vec<f32> = (0..n).map(|_| rng.normal() as f32).collect();
    let (a, bb, bias) = (dev.from_slice(&av)?, dev.from_slice(&bv)?, dev.from_slice(&biasv)?);
    let mut c = dev.zeros::<f32>(m * n)?;
    let opts = GemmOptions { bias: Some(&bias), activation: Activation::Gelu, ..Default::default() };
    gemm(&dev, &a, &bb, &mut c, m, n, k, &opts)?;
    let want = reference::gemm(
        &av.iter().map(|v| v.to_f64()).collect::<Vec<_>>(),
        &bv.iter().map(|v| v.to_f64()).collect::<Vec<_>>(),
        Some(&f64s(&biasv)),
        m,
        n,
        k,
        1.0,
        2,
    );
    let e3 = err(&f64s(&c.to_vec()?), &want);
    println!("gemm       {m}x{n}x{k} bf16 → f32, bias + GELU: max error {e3:.1e}");
    println!("(errors relative to |reference| + 1)");
    if e > 1e-5 || e2 > 1e-5 || e3 > 1e-4 {
        return Err("a result is outside its tolerance".into());
    }
    Ok(())
}
