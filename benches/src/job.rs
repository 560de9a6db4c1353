//! The main job (`ferrotile run-library`; also the `run-library` binary):
//! the whole kernel library on one device — softmax, layer-norm, RMSNorm,
//! GEMM, attention (forward, backward, decode), W4A16 / W8A16, W8A8 and FP8
//! GEMMs — each result verified against an f64 reference, then timed warm,
//! and placed against the device's roofline.
//!
//! Per result: the first call's time (`cold ms`: compilation and, on CUDA,
//! the autotuner's first run included), the median of warm calls (`warm
//! ms`; on GPUs the L2 is evicted before each by reading 256 MiB, so
//! memory-bound kernels read DRAM as they would in a model; a lone call's
//! time includes its launch), the achieved
//! rate, and `% roof`: the time the roofline allows over the time taken.
//! The roofline ([`Roofs`]) is the measured device copy bandwidth for
//! bytes and, on CUDA GPUs whose tensor-core rate per SM is known
//! (sm_80, sm_90, sm_100), SMs × rate × clock for the MMA work; a result
//! whose math needs a peak the device does not report has no `% roof`.
//!
//! `--json FILE` writes one JSON object per result; `--svg FILE` a chart
//! of `% roof` per result ([`crate::chart::roofline_svg`]).

use crate::chart;
use ferrotile::ir::DType;
use ferrotile::prelude::*;
use ferrotile::{DeviceKind, FloatElement};
use ferrotile_kernels::reference::{self, max_rel_err, Rng};
use half::{bf16, f16};
use std::path::PathBuf;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Options of the main job.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct JobArgs {
    /// Small shapes only (seconds on the CPU interpreter).
    #[arg(long)]
    pub quick: bool,
    /// The device: cpu, cuda or wgpu (default: what `Device::best()` picks).
    #[arg(long, value_name = "cpu|cuda|wgpu")]
    pub device: Option<String>,
    /// Write one JSON object per result to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a chart of every result against the device's roofline to FILE (SVG).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Which peak bounds a result's arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Math {
    /// Negligible next to its bytes (row kernels).
    None,
    /// 16-bit tensor-core MMAs (f16 / bf16 in, f32 accumulation).
    Tensor16,
    /// 8-bit tensor-core MMAs (int8, fp8): twice the 16-bit rate.
    Tensor8,
}

/// The ceilings a result is placed against.
#[derive(Clone, Copy, Debug)]
pub struct Roofs {
    /// Device-to-device copy, GB/s (read + write), measured in the run.
    pub copy_gbs: f64,
    /// Dense 16-bit tensor-core TFLOP/s at the reported clock, where known.
    pub tensor16_tflops: Option<f64>,
}

impl Roofs {
    /// Measure the copy bandwidth of `dev` and derive its tensor-core peak.
    pub fn measure(dev: &Device) -> ferrotile::Result<Roofs> {
        // 1 GiB, or 64 MiB on adapters with small buffer limits (lavapipe);
        // the interpreter's copies are host memcpys of 64 MiB
        let copy_gbs = if dev.kind() == DeviceKind::Cpu {
            dev.copy_bandwidth_gbs(1 << 26, 5)?
        } else {
            let c = dev.copy_bandwidth_gbs(1 << 30, 10).or_else(|_| dev.copy_bandwidth_gbs(1 << 26, 10))?;
            // (a wgpu buffer copy carries no timestamps and is timed from
            // the host: 850 GB/s on the H200 through Vulkan, where a DSL copy
            // kernel moves 3988; on a wgpu GPU the faster of the two is the
            // ceiling — not on lavapipe, where the kernel would take seconds)
            if dev.kind() == DeviceKind::Wgpu && dev.is_hardware() {
                c.max(crate::bench::kernel_copy_gbs(dev).unwrap_or(0.0))
            } else {
                c
            }
        };
        Ok(Roofs { copy_gbs, tensor16_tflops: tensor16_peak(dev) })
    }

    /// The peak for `m`, TFLOP/s (`None`: not known on this device).
    pub fn peak(&self, m: Math) -> Option<f64> {
        match m {
            Math::None => None,
            Math::Tensor16 => self.tensor16_tflops,
            Math::Tensor8 => self.tensor16_tflops.map(|t| 2.0 * t),
        }
    }
}

/// Dense f16/bf16 tensor-core FLOP per clock per SM of the architectures
/// whose figure NVIDIA publishes (A100: 312 TFLOP/s = 108 SMs × 2048 ×
/// 1.41 GHz; H100/H200 SXM: 989 = 132 × 4096 × 1.83 GHz; B200: 8192), times
/// the SMs and the clock the driver reports (the maximum boost clock: the
/// ceiling is a little above the datasheet's, which uses a lower clock).
pub fn tensor16_peak(dev: &Device) -> Option<f64> {
    let per_sm = match dev.compute_capability()? {
        80 => 2048.0,
        90 => 4096.0,
        100 => 8192.0,
        _ => return None,
    };
    Some(dev.multiprocessors()? as f64 * per_sm * dev.clock_mhz()? as f64 * 1e6 / 1e12)
}

/// One verified, timed result.
#[derive(Clone, Debug)]
pub struct Row {
    pub kernel: &'static str,
    pub dtype: String,
    /// The problem, e.g. `4096x4096x4096` or `2x16/16x2048x2048x128 causal`.
    pub problem: String,
    /// Max error by the result's own metric, and its tolerance.
    pub err: f64,
    pub tol: f64,
    /// The first call, compilation (and the autotuner) included, ms.
    pub cold_ms: f64,
    /// Median warm call, ms.
    pub warm_ms: f64,
    /// Bytes the problem must move at least (each operand read once, each
    /// output written once).
    pub bytes: f64,
    /// Arithmetic: floating-point operations or (W8A8) integer operations.
    pub ops: f64,
    pub math: Math,
}

impl Row {
    pub fn ok(&self) -> bool {
        self.err <= self.tol
    }

    /// The time the roofline allows, ms (`None` when the result's math
    /// needs a peak the device does not report).
    pub fn roof_ms(&self, r: &Roofs) -> Option<f64> {
        let mem = self.bytes / (r.copy_gbs * 1e9) * 1e3;
        match self.math {
            Math::None => Some(mem),
            m => r.peak(m).map(|p| mem.max(self.ops / (p * 1e12) * 1e3)),
        }
    }

    /// Roofline time over the warm time (1.0: on the roof).
    pub fn roof_fraction(&self, r: &Roofs) -> Option<f64> {
        self.roof_ms(r).map(|t| t / self.warm_ms)
    }

    /// Whether the bytes bound this result on the roofline (else the math).
    pub fn memory_bound(&self, r: &Roofs) -> bool {
        match r.peak(self.math) {
            None => self.math == Math::None || self.ops == 0.0,
            Some(p) => self.bytes / (r.copy_gbs * 1e9) >= self.ops / (p * 1e12),
        }
    }

    /// The achieved rate in the unit of what bounds it: GB/s for
    /// memory-bound results, TFLOP/s (TOPS for integer math) otherwise.
    pub fn rate(&self, r: &Roofs) -> String {
        let s = self.warm_ms * 1e-3;
        if self.memory_bound(r) {
            format!("{:.1} GB/s", self.bytes / s / 1e9)
        } else {
            let unit = if self.kernel.starts_with("w8a8") { "TOPS" } else { "TFLOP/s" };
            let t = self.ops / s / 1e12;
            if t >= 1.0 {
                format!("{t:.1} {unit}")
            } else {
                format!("{:.2} G{}", t * 1e3, &unit[1..])
            }
        }
    }

    /// The result as one JSON object (the `--json` lines).
    pub fn json(&self, r: &Roofs, device: &str) -> String {
        serde_json::json!({
            "impl": "ferrotile",
            "job": "run-library",
            "device": device,
            "kernel": self.kernel,
            "dtype": self.dtype,
            "problem": self.problem,
            "max_err": self.err,
            "tol": self.tol,
            "ok": self.ok(),
            "cold_ms": self.cold_ms,
            "ms": self.warm_ms,
            "bytes": self.bytes,
            "ops": self.ops,
            "gbs": self.bytes / (self.warm_ms * 1e-3) / 1e9,
            "tflops": self.ops / (self.warm_ms * 1e-3) / 1e12,
            "copy_gbs": r.copy_gbs,
            "peak_tflops": r.peak(self.math),
            "roof_fraction": self.roof_fraction(r),
            "bound": if self.memory_bound(r) { "memory" } else { "compute" },
        })
        .to_string()
    }
}

/// Reads `x` (`B` elements per program) and writes one sum per program:
/// evicts the L2 by *reading* 256 MiB, so that it holds clean lines only
/// (a copy would leave up to the L2's size of dirty lines, whose write-back
/// the next kernel's DRAM traffic would pay for: ~60 MB ≈ 15 µs on an
/// H200, measured as a fixed cost on every warm call).
#[ferrotile::kernel]
fn evict_l2<const B: i32>(x: Ptr<f32>, out: Ptr<f32>) {
    let offs = program_id(0) * B + arange(0, B);
    store(out + program_id(0), sum(load(x + offs), 0));
}

const EVICT_BLOCK: usize = 4096;

/// Times warm calls: the median of `reps` calls, each timed alone on the
/// device ([`Device::time_ms`]), on GPUs after reading 256 MiB that evicts
/// the operands from the L2 ([`evict_l2`]). A single call's time includes
/// its launch (a few µs: `bench` times batches of launches instead).
struct Warm {
    reps: usize,
    flush: Option<(Buffer<f32>, Buffer<f32>)>,
}

impl Warm {
    fn new(dev: &Device) -> ferrotile::Result<Warm> {
        let n = (256 << 20) / 4;
        // (GPUs, CUDA or wgpu: ten runs, each after evicting the L2;
        // software adapters such as lavapipe: three)
        Ok(match dev.kind() {
            DeviceKind::Cpu => Warm { reps: 1, flush: None },
            _ if dev.is_hardware() => Warm { reps: 10, flush: Some((dev.zeros(n)?, dev.zeros(n / EVICT_BLOCK)?)) },
            _ => Warm { reps: 3, flush: None },
        })
    }

    fn time(&mut self, dev: &Device, mut f: impl FnMut() -> Res<()>) -> Res<f64> {
        let mut ts = vec![];
        for _ in 0..self.reps {
            if let Some((x, out)) = &mut self.flush {
                evict_l2::launch(dev, (x.len() / EVICT_BLOCK) as u32, x, out, EVICT_BLOCK as i32)?;
            }
            let mut r = Ok(());
            ts.push(dev.time_ms(|| {
                r = f();
                Ok(())
            })?);
            r?;
        }
        Ok(crate::median_of(ts).unwrap_or(f64::NAN))
    }
}

/// Runs `f` once, timed with the wall clock and synchronized (the cold call).
fn cold(dev: &Device, f: impl FnOnce() -> Res<()>) -> Res<f64> {
    let t = std::time::Instant::now();
    f()?;
    dev.synchronize()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
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

/// Softmax, layer-norm and RMSNorm on `rows × cols` of dtype `T`.
fn row_kernels<T: FloatElement>(dev: &Device, warm: &mut Warm, rng: &mut Rng, rows: usize, cols: usize, out: &mut Vec<Row>) -> Res<()> {
    let d = T::DTYPE;
    let xv: Vec<T> = (0..rows * cols).map(|_| T::from_f64(rng.normal() * 2.0)).collect();
    let wv: Vec<T> = (0..cols).map(|_| T::from_f64(rng.normal())).collect();
    let bv: Vec<T> = (0..cols).map(|_| T::from_f64(rng.normal())).collect();
    let (xf, wf, bf) = (to_f64(&xv), to_f64(&wv), to_f64(&bv));
    let (x, w, b) = (dev.from_slice(&xv)?, dev.from_slice(&wv)?, dev.from_slice(&bv)?);
    let floor = if d == DType::F16 { 6.1e-5 } else { 1e-30 };
    let es = d.size_bytes() as f64;
    for kernel in ["softmax", "layer_norm", "rms_norm"] {
        let mut y = dev.full(rows * cols, T::from_f64(f64::NAN))?;
        let call = |y: &mut Buffer<T>| -> Res<()> {
            match kernel {
                "softmax" => ferrotile_kernels::softmax(dev, &x, y, rows, cols)?,
                "layer_norm" => ferrotile_kernels::layer_norm(dev, &x, &w, &b, y, rows, cols, 1e-5)?,
                _ => ferrotile_kernels::rms_norm(dev, &x, &w, y, rows, cols, 1e-6)?,
            }
            Ok(())
        };
        let cold_ms = cold(dev, || call(&mut y))?;
        let got = to_f64(&y.to_vec()?);
        let err = match kernel {
            "softmax" => max_rel_err(&got, &reference::softmax(&xf, rows, cols), floor),
            "layer_norm" => max_rel_err(&got, &reference::layer_norm(&xf, &wf, &bf, rows, cols, 1e-5), 1.0),
            _ => max_rel_err(&got, &reference::rms_norm(&xf, &wf, rows, cols, 1e-6), 1.0),
        };
        let warm_ms = warm.time(dev, || call(&mut y))?;
        let params = if kernel == "softmax" {
            0
        } else if kernel == "layer_norm" {
            2 * cols
        } else {
            cols
        };
        out.push(Row {
            kernel,
            dtype: d.to_string(),
            problem: format!("{rows}x{cols}"),
            err,
            tol: tol(d),
            cold_ms,
            warm_ms,
            bytes: (2 * rows * cols + params) as f64 * es,
            ops: 0.0,
            math: Math::None,
        });
    }
    Ok(())
}

/// `C = gelu(A·B + bias)` from the library GEMM, `T` in and out, checked
/// on sampled cells against f64 (relative to `|want| + Σ|terms|·2⁻⁸`: the
/// output's rounding and the inputs' products).
fn gemm<T: FloatElement>(dev: &Device, warm: &mut Warm, rng: &mut Rng, (m, n, k): (usize, usize, usize), out: &mut Vec<Row>) -> Res<()> {
    use ferrotile_kernels::gemm::{gemm, Activation, GemmOptions};
    let av: Vec<T> = (0..m * k).map(|_| T::from_f64(rng.normal())).collect();
    let bv: Vec<T> = (0..k * n).map(|_| T::from_f64(rng.normal())).collect();
    let biasv: Vec<T> = (0..n).map(|_| T::from_f64(rng.normal())).collect();
    let (a, b, bias) = (dev.from_slice(&av)?, dev.from_slice(&bv)?, dev.from_slice(&biasv)?);
    let mut c = dev.full(m * n, T::from_f64(f64::NAN))?;
    let opts = GemmOptions { bias: Some(&bias), activation: Activation::Gelu, ..Default::default() };
    let cold_ms = cold(dev, || Ok(gemm(dev, &a, &b, &mut c, m, n, k, &opts)?))?;
    let got = c.to_vec()?;
    let mut err = 0.0f64;
    for _ in 0..64 {
        let (i, j) = (rng.below(m as u64) as usize, rng.below(n as u64) as usize);
        let (mut s, mut mag) = (biasv[j].to_f64(), biasv[j].to_f64().abs());
        for l in 0..k {
            let p = av[i * k + l].to_f64() * bv[l * n + j].to_f64();
            s += p;
            mag += p.abs();
        }
        let want = 0.5 * s * (1.0 + reference::erf(s / std::f64::consts::SQRT_2));
        let g = got[i * n + j].to_f64();
        err = err.max(if g.is_finite() { (g - want).abs() / (want.abs() + mag / 256.0) } else { f64::INFINITY });
    }
    let warm_ms = warm.time(dev, || Ok(gemm(dev, &a, &b, &mut c, m, n, k, &opts)?))?;
    let es = T::DTYPE.size_bytes() as f64;
    out.push(Row {
        kernel: "gemm+bias+gelu",
        dtype: T::DTYPE.to_string(),
        problem: format!("{m}x{n}x{k}"),
        err,
        tol: tol(T::DTYPE),
        cold_ms,
        warm_ms,
        bytes: (m * k + k * n + m * n + n) as f64 * es,
        ops: 2.0 * (m * n * k) as f64,
        math: Math::Tensor16,
    });
    Ok(())
}

/// The library's attention on `[b, h, s, d]` (`bshd`: `[b, s, h, d]`) with
/// `hk` K/V heads and `sq` query rows against `s` keys (`sq` ≤ 16 takes the
/// decode path), checked on sampled rows against the f64 reference; with
/// `backward`, then its backward (checked on sampled dQ, dK and dV rows;
/// its FLOP count is 2.5× the forward's).
#[allow(clippy::too_many_arguments)]
fn attention<T: FloatElement>(
    dev: &Device,
    warm: &mut Warm,
    rng: &mut Rng,
    dims: [usize; 5],
    sq: usize,
    causal: bool,
    bshd: bool,
    backward: bool,
    out: &mut Vec<Row>,
) -> Res<()> {
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
    let cold_ms = cold(dev, || Ok(attention(dev, &q, &k, &v, &mut o, Some(&mut lse), &p, &opts)?))?;
    let got = o.to_vec()?;
    let scale = 1.0 / (d as f64).sqrt();
    let err = reference::attention_sampled_err(&qv, &kv, &vv, &got, &p, rng, 16, scale, None, causal.then_some(0));
    let warm_ms = warm.time(dev, || Ok(attention(dev, &q, &k, &v, &mut o, Some(&mut lse), &p, &opts)?))?;
    // (bottom-right causal with sq ≤ s: the mask removes sq·(sq − 1)/2 of
    // sq·s products — about half when sq = s)
    let frac = if causal { 1.0 - (sq * sq.saturating_sub(1)) as f64 / 2.0 / (sq * s) as f64 } else { 1.0 };
    let flops = 4.0 * (b * h * sq * s * d) as f64 * frac;
    let es = T::DTYPE.size_bytes() as f64;
    let bytes = (2 * qv.len() + kv.len() + vv.len()) as f64 * es;
    let name = format!("{}{b}x{h}/{hk}x{sq}x{s}x{d}{}", if bshd { "bshd " } else { "" }, if causal { " causal" } else { "" });
    let kernel = if sq <= 16 { "attn decode" } else { "attn fwd" };
    out.push(Row {
        kernel,
        dtype: T::DTYPE.to_string(),
        problem: name.clone(),
        err,
        tol: tol(T::DTYPE),
        cold_ms,
        warm_ms,
        bytes,
        ops: flops,
        math: Math::Tensor16,
    });
    if backward {
        let dout = dev.from_slice(&dov)?;
        let nan = T::from_f64(f64::NAN);
        let (mut dq, mut dk, mut dv) = (dev.full(qv.len(), nan)?, dev.full(kv.len(), nan)?, dev.full(vv.len(), nan)?);
        let call = |dq: &mut Buffer<T>, dk: &mut Buffer<T>, dv: &mut Buffer<T>| -> Res<()> {
            Ok(attention_backward(dev, &q, &k, &v, &o, &dout, &lse, dq, dk, dv, &p, &opts)?)
        };
        let cold_ms = cold(dev, || call(&mut dq, &mut dk, &mut dv))?;
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
        let warm_ms = warm.time(dev, || call(&mut dq, &mut dk, &mut dv))?;
        out.push(Row {
            kernel: "attn bwd",
            dtype: T::DTYPE.to_string(),
            problem: name,
            err,
            tol: tol(T::DTYPE),
            cold_ms,
            warm_ms,
            // q, k, v, o, dO, lse in; dQ, dK, dV out
            bytes: (4 * qv.len() + 2 * (kv.len() + vv.len())) as f64 * es + (b * h * sq * 4) as f64,
            ops: 2.5 * flops,
            math: Math::Tensor16,
        });
    }
    Ok(())
}

/// The library's quantized GEMM (`quant::wq_gemm`) on `m × n × k` with
/// random packed weights, checked on sampled outputs against f64 on the
/// dequantized weights (|err| / (|want| + sqrt(Σ terms²)), the library
/// tests' metric).
fn quant<T: FloatElement>(
    dev: &Device,
    warm: &mut Warm,
    rng: &mut Rng,
    (m, n, k): (usize, usize, usize),
    f: ferrotile_kernels::quant::QuantFormat,
    out: &mut Vec<Row>,
) -> Res<()> {
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
    let cold_ms = cold(dev, || Ok(wq_gemm(dev, &x, &w, &mut y, m, &QuantOptions::default())?))?;
    let got = y.to_vec()?;
    let cells: Vec<(usize, usize)> = (0..32).map(|_| (rng.below(m as u64) as usize, rng.below(n as u64) as usize)).collect();
    let err = reference::quant_gemm_err(|i, kk| xv[i * k + kk].to_f64(), &packed.dequantize(), |i, j| got[i * n + j].to_f64(), n, k, &cells);
    let warm_ms = warm.time(dev, || Ok(wq_gemm(dev, &x, &w, &mut y, m, &QuantOptions::default())?))?;
    let bytes = (packed.qweight.len() * 4 + packed.scales.len() * 2 + packed.qzeros.len() * 4 + 2 * (m * k + m * n)) as f64;
    let name = format!("w{}g{}{} {m}x{n}x{k}", f.bits, if f.group == 0 { "ch".to_string() } else { f.group.to_string() }, if f.zeros { "z" } else { "" });
    out.push(Row {
        kernel: "quant gemm",
        dtype: T::DTYPE.to_string(),
        problem: name,
        err,
        tol: 1e-2,
        cold_ms,
        warm_ms,
        bytes,
        ops: 2.0 * (m * n * k) as f64,
        math: Math::Tensor16,
    });
    Ok(())
}

/// W8A8: `quant::quantize_rows` of bf16 activations, then
/// `quant::w8a8_gemm` on int8 weights with per-channel scales (both calls
/// timed together), checked on sampled outputs against f64 on the
/// quantized operands (relative; the output rounds to bf16).
fn w8a8(dev: &Device, warm: &mut Warm, rng: &mut Rng, (m, n, k): (usize, usize, usize), out: &mut Vec<Row>) -> Res<()> {
    use ferrotile_kernels::quant::{quantize_int8, quantize_rows, w8a8_gemm, Int8Weights, W8A8Options};
    let xv: Vec<bf16> = (0..m * k).map(|_| bf16::from_f64(rng.normal())).collect();
    let wf: Vec<f32> = (0..k * n).map(|_| rng.normal() as f32 * 0.05).collect();
    let packed = quantize_int8(&wf, k, n)?;
    let w = Int8Weights::upload(dev, &packed)?;
    let x = dev.from_slice(&xv)?;
    let (mut xq, mut xs) = (dev.zeros::<i8>(m * k)?, dev.zeros::<f32>(m)?);
    let mut y = dev.full(m * n, bf16::NAN)?;
    let call = |xq: &mut Buffer<i8>, xs: &mut Buffer<f32>, y: &mut Buffer<bf16>| -> Res<()> {
        quantize_rows(dev, &x, m, k, 0, xq, xs)?;
        Ok(w8a8_gemm(dev, xq, xs, &w, y, m, &W8A8Options::default())?)
    };
    let cold_ms = cold(dev, || call(&mut xq, &mut xs, &mut y))?;
    let (got, q, s) = (y.to_vec()?, xq.to_vec()?, xs.to_vec()?);
    let mut err = 0.0f64;
    for _ in 0..32 {
        let (i, j) = (rng.below(m as u64) as usize, rng.below(n as u64) as usize);
        let d: i64 = (0..k).map(|kk| q[i * k + kk] as i64 * packed.q[j * k + kk] as i64).sum();
        let want = d as f64 * s[i] as f64 * packed.scales[j] as f64;
        let g = got[i * n + j].to_f64();
        err = err.max(if g.is_finite() { (g - want).abs() / (want.abs() + 1e-3) } else { f64::INFINITY });
    }
    let warm_ms = warm.time(dev, || call(&mut xq, &mut xs, &mut y))?;
    out.push(Row {
        kernel: "w8a8 gemm",
        dtype: "bf16".into(),
        problem: format!("{m}x{n}x{k}"),
        err,
        tol: 1e-2,
        cold_ms,
        warm_ms,
        // bf16 activations in, int8 weights, bf16 out (the int8 copy of the
        // activations is written and read again: counted once each way)
        bytes: (2 * m * k + 2 * m * k + n * k + 4 * n + 2 * m * n) as f64,
        ops: 2.0 * (m * n * k) as f64,
        math: Math::Tensor8,
    });
    Ok(())
}

/// FP8: `quant::fp8_gemm` (e4m3 operands, row-wise scales, bf16 out),
/// checked on sampled outputs against f64 on the operands' values
/// (relative to the terms' magnitude: the tensor cores' fast accumulation).
fn fp8(dev: &Device, warm: &mut Warm, rng: &mut Rng, (m, n, k): (usize, usize, usize), out: &mut Vec<Row>) -> Res<()> {
    use ferrotile::f8e4m3;
    use ferrotile_kernels::quant::{fp8_gemm, Fp8Options, Fp8Scales};
    let a: Vec<f8e4m3> = (0..m * k).map(|_| f8e4m3::from_f32(rng.normal() as f32)).collect();
    let b: Vec<f8e4m3> = (0..n * k).map(|_| f8e4m3::from_f32(rng.normal() as f32)).collect();
    let sa: Vec<f32> = (0..m).map(|_| rng.range(0.5, 2.0) as f32).collect();
    let sb: Vec<f32> = (0..n).map(|_| rng.range(0.5, 2.0) as f32).collect();
    let (ad, bd, sad, sbd) = (dev.from_slice(&a)?, dev.from_slice(&b)?, dev.from_slice(&sa)?, dev.from_slice(&sb)?);
    let mut y = dev.full(m * n, bf16::NAN)?;
    let opts = Fp8Options { scales: Fp8Scales::Rows { a: &sad, b: &sbd }, ..Default::default() };
    let cold_ms = cold(dev, || Ok(fp8_gemm(dev, &ad, &bd, &mut y, m, n, k, &opts)?))?;
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
    let warm_ms = warm.time(dev, || Ok(fp8_gemm(dev, &ad, &bd, &mut y, m, n, k, &opts)?))?;
    out.push(Row {
        kernel: "fp8 gemm",
        dtype: "e4m3".into(),
        problem: format!("{m}x{n}x{k}"),
        err,
        tol: 1e-2,
        cold_ms,
        warm_ms,
        bytes: (m * k + n * k + 4 * (m + n) + 2 * m * n) as f64,
        ops: 2.0 * (m * n * k) as f64,
        math: Math::Tensor8,
    });
    Ok(())
}

/// Opens the device a tool's `--device` names (`None`: `Device::best()`);
/// a named device that is unavailable is an error, never another device.
pub fn open_device(name: Option<&str>) -> Result<Device, String> {
    match name {
        None => Device::best().map_err(|e| e.to_string()),
        Some("cpu") => Ok(Device::cpu()),
        Some("cuda") => Device::cuda(0).map_err(|e| format!("--device cuda: {e}")),
        Some("wgpu") => Device::wgpu().map_err(|e| format!("--device wgpu: {e}")),
        Some(d) => Err(format!("unknown device `{d}` (cpu, cuda or wgpu)")),
    }
}

/// Runs every library kernel on `dev`: the rows of the table, in order.
pub fn run_all(dev: &Device, rng: &mut Rng, quick: bool) -> Res<Vec<Row>> {
    let mut warm = Warm::new(dev)?;
    let gpu = dev.is_hardware() && !quick;
    let mut rows = vec![];
    let mut shown = 0;
    // row kernels: on the GPU large enough not to fit in the L2, and one
    // shape that is not a multiple of any block
    let shapes: &[(usize, usize)] = if gpu {
        &[(8192, 4096), (16384, 1000), (512, 65536), (4097, 777)]
    } else if quick {
        &[(64, 1000), (8, 20000)]
    } else {
        &[(1024, 1000), (512, 4096), (64, 20000), (4096, 777)]
    };
    for &(r, c) in shapes {
        row_kernels::<f32>(dev, &mut warm, rng, r, c, &mut rows)?;
        row_kernels::<f16>(dev, &mut warm, rng, r, c, &mut rows)?;
        row_kernels::<bf16>(dev, &mut warm, rng, r, c, &mut rows)?;
        progress(&rows, &mut shown);
    }
    let gshapes: &[(usize, usize, usize)] = if gpu { &[(4096, 4096, 4096), (16, 8192, 8192)] } else { &[(100, 72, 136)] };
    for &s in gshapes {
        gemm::<bf16>(dev, &mut warm, rng, s, &mut rows)?;
        gemm::<f16>(dev, &mut warm, rng, s, &mut rows)?;
        progress(&rows, &mut shown);
    }
    // attention: forward and backward, MHA and causal GQA on `[b, s, h,
    // d]`; then decode (one query row per head against a long KV cache)
    let attn: &[([usize; 5], usize)] = if gpu {
        &[([2, 16, 16, 2048, 128], 2048), ([2, 16, 4, 2048, 64], 2048), ([16, 32, 8, 8192, 128], 1)]
    } else {
        &[([1, 2, 2, 200, 64], 200), ([1, 4, 2, 150, 128], 150), ([2, 4, 2, 300, 64], 1)]
    };
    for (i, &(dims, sq)) in attn.iter().enumerate() {
        let causal = i == 1;
        let bwd = sq > 16;
        attention::<bf16>(dev, &mut warm, rng, dims, sq, causal, causal, bwd, &mut rows)?;
        attention::<f16>(dev, &mut warm, rng, dims, sq, causal, causal, bwd, &mut rows)?;
        progress(&rows, &mut shown);
    }
    // quantized GEMM: W4A16 (group 128, zero points) and W8A16
    // (per-channel, symmetric) at decode batch 1 and 16
    use ferrotile_kernels::quant::QuantFormat;
    let qshapes: &[(usize, usize, usize)] = if gpu { &[(1, 8192, 8192), (16, 8192, 8192)] } else { &[(1, 64, 256), (5, 48, 128)] };
    for &s in qshapes {
        quant::<bf16>(dev, &mut warm, rng, s, QuantFormat { bits: 4, group: 128, zeros: true }, &mut rows)?;
        quant::<f16>(dev, &mut warm, rng, s, QuantFormat { bits: 8, group: 0, zeros: false }, &mut rows)?;
        progress(&rows, &mut shown);
    }
    // W8A8: int8 activations (quantized per token here) × int8 weights;
    // FP8: e4m3 with row-wise scales
    let wshapes: &[(usize, usize, usize)] = if gpu { &[(16, 8192, 8192), (4096, 4096, 4096)] } else { &[(5, 48, 96)] };
    for &s in wshapes {
        w8a8(dev, &mut warm, rng, s, &mut rows)?;
        fp8(dev, &mut warm, rng, s, &mut rows)?;
        progress(&rows, &mut shown);
    }
    Ok(rows)
}

/// The results not yet shown, one line each on stderr as they come (the
/// table follows at the end; a run cut short still says what it did).
fn progress(rows: &[Row], shown: &mut usize) {
    for r in &rows[*shown..] {
        eprintln!(
            "done: {} {} {} err {:.2e} (tol {:.0e}) warm {:.3} ms {}",
            r.kernel,
            r.dtype,
            r.problem,
            r.err,
            r.tol,
            r.warm_ms,
            if r.ok() { "ok" } else { "FAIL" }
        );
    }
    *shown = rows.len();
}

/// The table `run-library` prints.
pub fn table(rows: &[Row], roofs: &Roofs) -> String {
    let mut s = format!(
        "{:<15} {:<5} {:>30} {:>9} {:>7} {:>10} {:>10} {:>16} {:>7}  status\n",
        "kernel", "dtype", "problem", "max err", "tol", "cold ms", "warm ms", "rate", "% roof"
    );
    for r in rows {
        let roof = r.roof_fraction(roofs).map_or("—".to_string(), |f| format!("{:.1}", 100.0 * f));
        s += &format!(
            "{:<15} {:<5} {:>30} {:>9.2e} {:>7.0e} {:>10.2} {:>10.3} {:>16} {:>7}  {}\n",
            r.kernel,
            r.dtype,
            r.problem,
            r.err,
            r.tol,
            r.cold_ms,
            r.warm_ms,
            r.rate(roofs),
            roof,
            if r.ok() { "ok" } else { "FAIL" }
        );
    }
    s
}

/// The main job: run, print the table, write the JSON and the chart;
/// the process's exit code (0: every result within its tolerance).
pub fn main(args: &JobArgs) -> i32 {
    let dev = match open_device(args.device.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let (mut rng, seed) = Rng::from_time();
    let roofs = match Roofs::measure(&dev) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: copy bandwidth: {e}");
            return 1;
        }
    };
    let peak = roofs
        .tensor16_tflops
        .map_or("not known for this device".to_string(), |p| format!("{p:.0} TFLOP/s (16-bit tensor cores at the reported clock; 8-bit: 2×)"));
    println!("ferrotile kernel library on {} (seed {seed})", dev.name());
    println!("roofline: copy {:.0} GB/s, peak {peak}; warm times: {}", roofs.copy_gbs, dev.timing_method());
    let rows = match run_all(&dev, &mut rng, args.quick) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return 1;
        }
    };
    print!("{}", table(&rows, &roofs));
    if let Some(f) = &args.json {
        let text: String = rows.iter().map(|r| r.json(&roofs, &dev.name()) + "\n").collect();
        if let Err(e) = std::fs::write(f, text) {
            eprintln!("error: {}: {e}", f.display());
            return 1;
        }
    }
    if let Some(f) = &args.svg {
        let title = format!("ferrotile kernel library on {}", dev.name());
        match chart::roofline_svg(&rows, &roofs, &title).map_err(|e| e.to_string()).and_then(|svg| std::fs::write(f, svg).map_err(|e| e.to_string())) {
            Ok(()) => println!("chart: {}", f.display()),
            Err(e) => {
                eprintln!("error: chart {}: {e}", f.display());
                return 1;
            }
        }
    }
    let failed = rows.iter().filter(|r| !r.ok()).count();
    if failed > 0 {
        eprintln!("{failed} result(s) outside tolerance");
        return 1;
    }
    println!("all {} results within tolerance", rows.len());
    0
}
