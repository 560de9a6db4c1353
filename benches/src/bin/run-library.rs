//! The main job: run the kernel library on the best device available, verify
//! every result against the f64 reference, and print a table: the row
//! kernels (GB/s), attention forward, backward and decode (TFLOP/s), the
//! quantized GEMM (GB/s of its operands), W8A8 (TOPS) and FP8 (TFLOP/s); each time is one cold
//! call, compilation (and on CUDA the autotuner's first run) included.
//!
//! `cargo run --release -p ferrotile-benches --bin run-library [-- --quick]`

use ferrotile::ir::DType;
use ferrotile::{Device, FloatElement};
use ferrotile_kernels::reference::{self, max_rel_err, Rng};
use half::{bf16, f16};

struct Row {
    kernel: &'static str,
    dtype: DType,
    shape: (usize, usize),
    err: f64,
    tol: f64,
    secs: f64,
    /// attention, quantized GEMM: the problem and its rate (TFLOP/s, or
    /// GB/s of weights and activations) instead of a row shape and GB/s
    attention: Option<(String, String)>,
}

fn tol(d: DType) -> f64 {
    if d == DType::F32 {
        1e-5
    } else {
        1e-2
    }
}

fn to_f64<T: FloatElement>(v: &[T]) -> Vec<f64> {
    v.iter().map(|x| x.to_f64()).collect()
}

fn run<T: FloatElement>(dev: &Device, rng: &mut Rng, rows: usize, cols: usize, out: &mut Vec<Row>) -> Result<(), Box<dyn std::error::Error>> {
    let d = T::DTYPE;
    let xv: Vec<T> = (0..rows * cols).map(|_| T::from_f64(rng.normal() * 2.0)).collect();
    let wv: Vec<T> = (0..cols).map(|_| T::from_f64(rng.normal())).collect();
    let bv: Vec<T> = (0..cols).map(|_| T::from_f64(rng.normal())).collect();
    let (xf, wf, bf) = (to_f64(&xv), to_f64(&wv), to_f64(&bv));
    let x = dev.from_slice(&xv)?;
    let w = dev.from_slice(&wv)?;
    let b = dev.from_slice(&bv)?;
    let poison = T::from_f64(f64::NAN);
    let floor = if d == DType::F16 { 6.1e-5 } else { 1e-30 };

    let mut y = dev.full(rows * cols, poison)?;
    let t = std::time::Instant::now();
    ferrotile_kernels::softmax(dev, &x, &mut y, rows, cols)?;
    let secs = t.elapsed().as_secs_f64();
    let err = max_rel_err(&to_f64(&y.to_vec()?), &reference::softmax(&xf, rows, cols), floor);
    out.push(Row { kernel: "softmax", dtype: d, shape: (rows, cols), err, tol: tol(d), secs, attention: None });

    let mut y = dev.full(rows * cols, poison)?;
    let t = std::time::Instant::now();
    ferrotile_kernels::layer_norm(dev, &x, &w, &b, &mut y, rows, cols, 1e-5)?;
    let secs = t.elapsed().as_secs_f64();
    let err = max_rel_err(&to_f64(&y.to_vec()?), &reference::layer_norm(&xf, &wf, &bf, rows, cols, 1e-5), 1.0);
    out.push(Row { kernel: "layer_norm", dtype: d, shape: (rows, cols), err, tol: tol(d), secs, attention: None });

    let mut y = dev.full(rows * cols, poison)?;
    let t = std::time::Instant::now();
    ferrotile_kernels::rms_norm(dev, &x, &w, &mut y, rows, cols, 1e-6)?;
    let secs = t.elapsed().as_secs_f64();
    let err = max_rel_err(&to_f64(&y.to_vec()?), &reference::rms_norm(&xf, &wf, rows, cols, 1e-6), 1.0);
    out.push(Row { kernel: "rms_norm", dtype: d, shape: (rows, cols), err, tol: tol(d), secs, attention: None });
    Ok(())
}

/// The library's attention on `[b, h, s, d]` (`bshd`: `[b, s, h, d]`) with
/// `hk` K/V heads and `sq` query rows against `s` keys (`sq` ≤ 16 takes the
/// decode path), checked on sampled rows against the f64 reference; with
/// `backward`, then its backward (timed alone, checked on sampled dQ, dK
/// and dV rows; TFLOP/s at 2.5× the forward's count).
#[allow(clippy::too_many_arguments)]
fn run_attention<T: FloatElement>(
    dev: &Device,
    rng: &mut Rng,
    dims: [usize; 5],
    sq: usize,
    causal: bool,
    bshd: bool,
    backward: bool,
    out: &mut Vec<Row>,
) -> Result<(), Box<dyn std::error::Error>> {
    use ferrotile_kernels::attention::{attention, attention_backward, AttentionOptions, AttentionProblem};
    let [b, h, hk, s, d] = dims;
    let p = if bshd { AttentionProblem::bshd(b, h, hk, sq, s, d) } else { AttentionProblem::bhsd(b, h, hk, sq, s, d) };
    let mut gen = |n: usize| -> Vec<T> { (0..n).map(|_| T::from_f64(rng.normal())).collect() };
    let (qv, kv, vv) = (gen(b * h * sq * d), gen(b * hk * s * d), gen(b * hk * s * d));
    let dov = if backward { gen(qv.len()) } else { vec![] };
    let (q, k, v) = (dev.from_slice(&qv)?, dev.from_slice(&kv)?, dev.from_slice(&vv)?);
    let mut o = dev.full(qv.len(), T::from_f64(f64::NAN))?;
    let mut lse = dev.full(b * h * sq, f32::NAN)?;
    let opts = AttentionOptions { causal, ..Default::default() };
    let t = std::time::Instant::now();
    attention(dev, &q, &k, &v, &mut o, Some(&mut lse), &p, &opts)?;
    dev.synchronize()?;
    let secs = t.elapsed().as_secs_f64();
    let got = o.to_vec()?;
    let scale = 1.0 / (d as f64).sqrt();
    let err = reference::attention_sampled_err(&qv, &kv, &vv, &got, &p, rng, 16, scale, None, causal.then_some(0));
    // (bottom-right causal with sq ≤ s: the mask removes sq·(sq − 1)/2 of
    // sq·s products — about half when sq = s)
    let frac = if causal { 1.0 - (sq * sq.saturating_sub(1)) as f64 / 2.0 / (sq * s) as f64 } else { 1.0 };
    let flops = 4.0 * (b * h * sq * s * d) as f64 * frac;
    let what = if sq <= 16 { "decode" } else { "attention" };
    let name = format!("{}{b}x{h}/{hk}x{sq}x{s}x{d}{}", if bshd { "bshd " } else { "" }, if causal { " causal" } else { "" });
    out.push(Row { kernel: what, dtype: T::DTYPE, shape: (0, 0), err, tol: tol(T::DTYPE), secs, attention: Some((name.clone(), tflops(flops / secs / 1e12))) });
    if backward {
        let dout = dev.from_slice(&dov)?;
        let nan = T::from_f64(f64::NAN);
        let (mut dq, mut dk, mut dv) = (dev.full(qv.len(), nan)?, dev.full(kv.len(), nan)?, dev.full(vv.len(), nan)?);
        let t = std::time::Instant::now();
        attention_backward(dev, &q, &k, &v, &o, &dout, &lse, &mut dq, &mut dk, &mut dv, &p, &opts)?;
        dev.synchronize()?;
        let secs = t.elapsed().as_secs_f64();
        let (gq, gk, gv) = (dq.to_vec()?, dk.to_vec()?, dv.to_vec()?);
        let err = reference::attention_backward_sampled_err(
            [&qv, &kv, &vv, &got, &dov],
            &lse.to_vec()?,
            [&gq, &gk, &gv],
            &p,
            rng,
            4,
            scale,
            None,
            causal.then_some(0),
        );
        out.push(Row {
            kernel: "attn bwd",
            dtype: T::DTYPE,
            shape: (0, 0),
            err,
            tol: tol(T::DTYPE),
            secs,
            attention: Some((name, tflops(2.5 * flops / secs / 1e12))),
        });
    }
    Ok(())
}

fn tflops(t: f64) -> String {
    if t >= 1.0 {
        format!("{t:.1} TFLOP/s")
    } else {
        format!("{:.2} GFLOP/s", t * 1e3)
    }
}

/// The library's quantized GEMM (`quant::wq_gemm`) on `m × n × k` with
/// random packed weights, checked on sampled outputs against f64 on the
/// dequantized weights (|err| / (|want| + sqrt(Σ terms²)), the library
/// tests' metric); its rate counts the bytes of weights, scales, zero
/// points, activations and output once.
fn run_quant<T: FloatElement>(
    dev: &Device,
    rng: &mut Rng,
    (m, n, k): (usize, usize, usize),
    f: ferrotile_kernels::quant::QuantFormat,
    out: &mut Vec<Row>,
) -> Result<(), Box<dyn std::error::Error>> {
    use ferrotile_kernels::quant::{wq_gemm, PackedWeights, QuantOptions, QuantWeights};
    let p = f.per_word();
    let groups = k / f.group_of(k);
    let word = |rng: &mut Rng| (0..p).fold(0u32, |w, i| w | ((rng.below(1 << f.bits) as u32) << (f.bits as usize * i))) as i32;
    let packed = PackedWeights::<T> {
        k,
        n,
        format: f,
        qweight: (0..k / p * n).map(|_| word(rng)).collect(),
        scales: (0..groups * n).map(|_| T::from_f64(rng.range(0.5, 1.5) / (1u32 << f.bits) as f64 * 8.0)).collect(),
        qzeros: if f.zeros { (0..groups * n / p).map(|_| word(rng)).collect() } else { vec![] },
        perm: None,
    };
    let xv: Vec<T> = (0..m * k).map(|_| T::from_f64(rng.normal())).collect();
    let w = QuantWeights::upload(dev, &packed)?;
    let x = dev.from_slice(&xv)?;
    let mut y = dev.full(m * n, T::from_f64(f64::NAN))?;
    let t = std::time::Instant::now();
    wq_gemm(dev, &x, &w, &mut y, m, &QuantOptions::default())?;
    dev.synchronize()?;
    let secs = t.elapsed().as_secs_f64();
    let got = y.to_vec()?;
    let cells: Vec<(usize, usize)> = (0..32).map(|_| (rng.below(m as u64) as usize, rng.below(n as u64) as usize)).collect();
    let err = reference::quant_gemm_err(|i, kk| xv[i * k + kk].to_f64(), &packed.dequantize(), |i, j| got[i * n + j].to_f64(), n, k, &cells);
    let bytes = (packed.qweight.len() * 4 + packed.scales.len() * 2 + packed.qzeros.len() * 4 + 2 * (m * k + m * n)) as f64;
    let name = format!("w{}g{}{} {m}x{n}x{k}", f.bits, if f.group == 0 { "ch".to_string() } else { f.group.to_string() }, if f.zeros { "z" } else { "" });
    out.push(Row {
        kernel: "quant gemm",
        dtype: T::DTYPE,
        shape: (0, 0),
        err,
        tol: 1e-2,
        secs,
        attention: Some((name, format!("{:.2} GB/s", bytes / secs / 1e9))),
    });
    Ok(())
}

/// W8A8 (`quant::quantize_rows` of bf16 activations, then
/// `quant::w8a8_gemm` on int8 weights with per-channel scales), checked on
/// sampled outputs against f64 on the quantized operands (relative error;
/// the output rounds to bf16); rate in TOPS of the GEMM (2·m·n·k over the
/// two calls' time).
fn run_w8a8(dev: &Device, rng: &mut Rng, (m, n, k): (usize, usize, usize), out: &mut Vec<Row>) -> Result<(), Box<dyn std::error::Error>> {
    use ferrotile_kernels::quant::{quantize_int8, quantize_rows, w8a8_gemm, Int8Weights, W8A8Options};
    let xv: Vec<bf16> = (0..m * k).map(|_| bf16::from_f64(rng.normal())).collect();
    let wf: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32 * 0.05).collect();
    let packed = quantize_int8(&wf, k, n)?;
    let w = Int8Weights::upload(dev, &packed)?;
    let x = dev.from_slice(&xv)?;
    let (mut xq, mut xs) = (dev.zeros::<i8>(m * k)?, dev.zeros::<f32>(m)?);
    let mut y = dev.full(m * n, bf16::NAN)?;
    let t = std::time::Instant::now();
    quantize_rows(dev, &x, m, k, 0, &mut xq, &mut xs)?;
    w8a8_gemm(dev, &xq, &xs, &w, &mut y, m, &W8A8Options::default())?;
    dev.synchronize()?;
    let secs = t.elapsed().as_secs_f64();
    let (got, q, s) = (y.to_vec()?, xq.to_vec()?, xs.to_vec()?);
    let mut err = 0.0f64;
    for _ in 0..32 {
        let (i, j) = (rng.below(m as u64) as usize, rng.below(n as u64) as usize);
        let d: i64 = (0..k).map(|kk| q[i * k + kk] as i64 * packed.q[j * k + kk] as i64).sum();
        let want = d as f64 * s[i] as f64 * packed.scales[j] as f64;
        let g = got[i * n + j].to_f64();
        err = err.max(if g.is_finite() { (g - want).abs() / (want.abs() + 1e-3) } else { f64::INFINITY });
    }
    out.push(Row {
        kernel: "w8a8 gemm",
        dtype: DType::BF16,
        shape: (0, 0),
        err,
        tol: 1e-2,
        secs,
        attention: Some((format!("{m}x{n}x{k}"), format!("{:.2} TOPS", 2.0 * (m * n * k) as f64 / secs / 1e12))),
    });
    Ok(())
}

/// FP8 (`quant::fp8_gemm`: e4m3 operands, row-wise scales, bf16 out),
/// checked on sampled outputs against f64 on the operands' values
/// (relative to the terms' magnitude: the tensor cores' fast
/// accumulation); rate in TFLOP/s.
fn run_fp8(dev: &Device, rng: &mut Rng, (m, n, k): (usize, usize, usize), out: &mut Vec<Row>) -> Result<(), Box<dyn std::error::Error>> {
    use ferrotile::f8e4m3;
    use ferrotile_kernels::quant::{fp8_gemm, Fp8Options, Fp8Scales};
    let a: Vec<f8e4m3> = (0..m * k).map(|_| f8e4m3::from_f32(rng.normal() as f32)).collect();
    let b: Vec<f8e4m3> = (0..n * k).map(|_| f8e4m3::from_f32(rng.normal() as f32)).collect();
    let sa: Vec<f32> = (0..m).map(|_| rng.range(0.5, 2.0) as f32).collect();
    let sb: Vec<f32> = (0..n).map(|_| rng.range(0.5, 2.0) as f32).collect();
    let (ad, bd, sad, sbd) = (dev.from_slice(&a)?, dev.from_slice(&b)?, dev.from_slice(&sa)?, dev.from_slice(&sb)?);
    let mut y = dev.full(m * n, bf16::NAN)?;
    let t = std::time::Instant::now();
    fp8_gemm(dev, &ad, &bd, &mut y, m, n, k, &Fp8Options { scales: Fp8Scales::Rows { a: &sad, b: &sbd }, ..Default::default() })?;
    dev.synchronize()?;
    let secs = t.elapsed().as_secs_f64();
    let got = y.to_vec()?;
    let mut err = 0.0f64;
    for _ in 0..32 {
        let (i, j) = (rng.below(m as u64) as usize, rng.below(n as u64) as usize);
        let (mut d, mut mag) = (0.0f64, 0.0f64);
        for kk in 0..k {
            let p = a[i * k + kk].to_f32() as f64 * b[j * k + kk].to_f32() as f64;
            d += p;
            mag += p.abs();
        }
        let s = sa[i] as f64 * sb[j] as f64;
        let g = got[i * n + j].to_f64();
        err = err.max(if g.is_finite() { (g - d * s).abs() / (mag * s) } else { f64::INFINITY });
    }
    out.push(Row {
        kernel: "fp8 gemm",
        dtype: DType::BF16,
        shape: (0, 0),
        err,
        tol: 1e-2,
        secs,
        attention: Some((format!("e4m3 {m}x{n}x{k}"), format!("{:.2} TFLOP/s", 2.0 * (m * n * k) as f64 / secs / 1e12))),
    });
    Ok(())
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let dev = match Device::best() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    };
    let (mut rng, seed) = Rng::from_time();
    println!("ferrotile kernel library on {} (seed {seed})", dev.name());
    let shapes: &[(usize, usize)] = if quick { &[(64, 1000), (8, 20000)] } else { &[(1024, 1000), (512, 4096), (64, 20000), (4096, 777)] };
    let mut rows = vec![];
    for &(r, c) in shapes {
        let res = run::<f32>(&dev, &mut rng, r, c, &mut rows)
            .and_then(|_| run::<f16>(&dev, &mut rng, r, c, &mut rows))
            .and_then(|_| run::<bf16>(&dev, &mut rng, r, c, &mut rows));
        if let Err(e) = res {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
    // attention: forward and backward, MHA and causal GQA on `[b, s, h,
    // d]`; then decode (one query row per head against a long KV cache)
    let gpu = dev.kind() == ferrotile::DeviceKind::Cuda;
    let attn: &[([usize; 5], usize)] = if gpu && !quick {
        &[([2, 16, 16, 2048, 128], 2048), ([2, 16, 4, 2048, 64], 2048), ([16, 32, 8, 8192, 128], 1)]
    } else {
        &[([1, 2, 2, 200, 64], 200), ([1, 4, 2, 150, 128], 150), ([2, 4, 2, 300, 64], 1)]
    };
    for (i, &(dims, sq)) in attn.iter().enumerate() {
        let causal = i == 1;
        let bwd = sq > 16;
        let res = run_attention::<bf16>(&dev, &mut rng, dims, sq, causal, causal, bwd, &mut rows)
            .and_then(|_| run_attention::<f16>(&dev, &mut rng, dims, sq, causal, causal, bwd, &mut rows));
        if let Err(e) = res {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
    // quantized GEMM: W4A16 (group 128, zero points) and W8A16
    // (per-channel, symmetric) at decode batch 1 and 16
    use ferrotile_kernels::quant::QuantFormat;
    let qshapes: &[(usize, usize, usize)] = if gpu && !quick { &[(1, 4096, 4096), (16, 4096, 4096)] } else { &[(1, 64, 256), (5, 48, 128)] };
    for &s in qshapes {
        let res = run_quant::<bf16>(&dev, &mut rng, s, QuantFormat { bits: 4, group: 128, zeros: true }, &mut rows)
            .and_then(|_| run_quant::<f16>(&dev, &mut rng, s, QuantFormat { bits: 8, group: 0, zeros: false }, &mut rows));
        if let Err(e) = res {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
    // W8A8: int8 activations (quantized per token here) × int8 weights;
    // FP8: e4m3 with row-wise scales
    let wshapes: &[(usize, usize, usize)] = if gpu && !quick { &[(16, 4096, 4096), (4096, 4096, 4096)] } else { &[(5, 48, 96)] };
    for &s in wshapes {
        if let Err(e) = run_w8a8(&dev, &mut rng, s, &mut rows).and_then(|_| run_fp8(&dev, &mut rng, s, &mut rows)) {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
    println!("{:<11} {:<5} {:>24} {:>10} {:>8} {:>10} {:>16}  status", "kernel", "dtype", "shape", "max err", "tol", "time ms", "rate");
    let mut failed = 0;
    for r in &rows {
        let ok = r.err <= r.tol;
        failed += !ok as usize;
        let bytes = 2.0 * (r.shape.0 * r.shape.1 * r.dtype.size_bytes()) as f64;
        let (shape, rate) = match &r.attention {
            Some((name, rate)) => (name.clone(), rate.clone()),
            None => (format!("{}x{}", r.shape.0, r.shape.1), format!("{:.2} GB/s", bytes / r.secs / 1e9)),
        };
        println!(
            "{:<11} {:<5} {:>24} {:>10.2e} {:>8.0e} {:>10.2} {:>16}  {}",
            r.kernel,
            r.dtype.to_string(),
            shape,
            r.err,
            r.tol,
            r.secs * 1e3,
            rate,
            if ok { "ok" } else { "FAIL" }
        );
    }
    if failed > 0 {
        eprintln!("{failed} result(s) outside tolerance");
        std::process::exit(1);
    }
    println!("all {} results within tolerance", rows.len());
}
