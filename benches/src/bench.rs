//! GPU benchmark of the kernel library (softmax, layer-norm, RMSNorm).
//!
//! For each kernel × shape × dtype: fresh random inputs, rotated over enough
//! buffer copies that every repetition reads memory the L2 (60 MB on H200)
//! does not hold; warm-up, then the median over batches of 10 back-to-back
//! launches timed with CUDA events (device time per launch: the host
//! enqueues faster than the kernels run); outputs of the last run checked against the f64 reference on
//! sampled rows. The device-to-device copy bandwidth is measured in the same
//! run and every result is reported as GB/s and % of it.
//!
//! `--gemm`: the library GEMM instead (bf16/f16 4096³ and 8192³, the
//! 16×8192×8192 decode shape, bf16 4096³ with a column-major B (`bf16_bT`)
//! and with a column-major A (`bf16_aT`),
//! f32 with tf32 and exact), TFLOP/s, sampled
//! outputs checked against f64 dot products. `--gemm-small` runs 1024³ and
//! 2048³ only (for slow backends such as wgpu's FMA path); `--gemm-shape
//! MxNxK` one shape; `--dtypes f32,tf32,...` only those rows.
//! `--gemm-configs LIST` (with `--gemm-shape` and one of `--dtypes bf16|f16`):
//! each listed tile configuration instead of the tuner's pick, timed the
//! same way, round-robin over `--rounds N` (default 3) so that clock drift
//! falls on all of them alike; an entry reads
//! `BMxBNxBK/wWARPS/sSTAGES[/swap][/c2][/kSPLIT]`, comma-separated.
//!
//! Timing follows [`Device::time_ms`]: CUDA events on CUDA, GPU timestamps
//! on wgpu (`--device wgpu`); the header line names the method. On CUDA
//! every kernel (row kernels and GEMMs) is timed both ways the peers'
//! script can be, batch by batch in turn (the same clocks for both):
//! batches captured into a graph and replayed (`time us`, what the JSON's
//! `ms` holds — the method `peers.py` times PyTorch and cuBLAS with) and
//! back-to-back launches (`b2b us`, the JSON's `ms_b2b`).
//!
//! `bench [--device cpu|cuda|wgpu] [--quick] [--json FILE] [--gemm | --gemm-small]
//!        [--shapes 16384x4096,4096x16384] [--kernels softmax,layer_norm] [--dtypes f32]`
//!
//! Results print as they are measured. Besides the API copy (`%copy`), a
//! copy kernel written in the DSL (`%kcopy`) and, on wgpu, the CUDA copy of
//! the same GPU (`%cuda`) are measured in the same run.
//! (default device: `Device::best()`; a named device that is unavailable is
//! an error, not a fallback).

use crate::{median_of, time_both, Timing};
use ferrotile::ir::DType;
use ferrotile::prelude::*;
use ferrotile::{Buffer, Device, FloatElement};
use ferrotile_kernels::norm::{layer_norm_with, NormConfig};
use ferrotile_kernels::reference::{self, max_rel_err, Rng};
use ferrotile_kernels::softmax::{softmax_with, SoftmaxConfig};
use half::bf16;
use std::path::PathBuf;

struct Res {
    kernel: &'static str,
    dtype: DType,
    rows: usize,
    cols: usize,
    t: Timing,
    gbs: f64,
    err: f64,
    tol: f64,
}

const ROTATE_BYTES: usize = 512 << 20; // ≥ 8x L2 across the rotation
const BATCH: usize = 10;

fn rand_vec<T: FloatElement>(rng: &mut Rng, n: usize, scale: f64) -> Vec<T> {
    (0..n).map(|_| T::from_f64(((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale)).collect()
}

fn bench_kernel<T: FloatElement>(
    dev: &Device,
    rng: &mut Rng,
    kernel: &'static str,
    rows: usize,
    cols: usize,
    reps: usize,
) -> Result<Res, Box<dyn std::error::Error>> {
    let n = rows * cols;
    let es = T::DTYPE.size_bytes();
    let copies = (ROTATE_BYTES / (2 * n * es).max(1)).clamp(1, 8);
    let host_x: Vec<T> = rand_vec(rng, n, 4.0);
    let w: Vec<T> = rand_vec(rng, cols, 1.0);
    let b: Vec<T> = rand_vec(rng, cols, 1.0);
    let xs: Vec<Buffer<T>> = (0..copies).map(|_| dev.from_slice(&host_x)).collect::<Result<_, _>>()?;
    let mut ys: Vec<Buffer<T>> = (0..copies).map(|_| dev.full(n, T::from_f64(f64::NAN))).collect::<Result<_, _>>()?;
    let (wb, bb) = (dev.from_slice(&w)?, dev.from_slice(&b)?);
    let run = |i: usize, ys: &mut Vec<Buffer<T>>| -> Result<(), ferrotile_kernels::LibError> {
        let (x, y) = (&xs[i % copies], &mut ys[i % copies]);
        match kernel {
            "softmax" => ferrotile_kernels::softmax(dev, x, y, rows, cols),
            "layer_norm" => ferrotile_kernels::layer_norm(dev, x, &wb, &bb, y, rows, cols, 1e-5),
            _ => ferrotile_kernels::rms_norm(dev, x, &wb, y, rows, cols, 1e-6),
        }
    };
    for i in 0..3 {
        run(i, &mut ys)?;
    }
    dev.synchronize()?;
    // Batches of BATCH calls (rotating over the copies) between two events,
    // timed both ways in turn: replayed from a CUDA graph — as `peers.py`
    // times PyTorch — and launched back to back (the host enqueues in ~6 us,
    // faster than the kernels run, so the GPU rarely idles; what a graph
    // still saves is the gap between kernels).
    let mut i = 0;
    let t = time_both(dev, reps, BATCH, || {
        let r = run(i, &mut ys).map_err(lib);
        i += 1;
        r
    })?;
    // verify the output of every copy on sampled rows
    let sample: Vec<usize> = (0..16).map(|_| rng.below(rows as u64) as usize).chain([0, rows - 1]).collect();
    let xf: Vec<f64> = host_x.iter().map(|v| v.to_f64()).collect();
    let (wf, bf): (Vec<f64>, Vec<f64>) = (w.iter().map(|v| v.to_f64()).collect(), b.iter().map(|v| v.to_f64()).collect());
    let mut err: f64 = 0.0;
    for y in &ys {
        let out = y.to_vec()?;
        for &r in &sample {
            let row = &xf[r * cols..(r + 1) * cols];
            let want = match kernel {
                "softmax" => reference::softmax(row, 1, cols),
                "layer_norm" => reference::layer_norm(row, &wf, &bf, 1, cols, 1e-5),
                _ => reference::rms_norm(row, &wf, 1, cols, 1e-6),
            };
            let got: Vec<f64> = out[r * cols..(r + 1) * cols].iter().map(|v| v.to_f64()).collect();
            let floor = if kernel == "softmax" { 1e-30 } else { 1.0 };
            err = err.max(max_rel_err(&got, &want, floor));
        }
    }
    let bytes = 2.0 * (n * es) as f64;
    let tol = if T::DTYPE == DType::F32 { 1e-5 } else { 1e-2 };
    Ok(Res { kernel, dtype: T::DTYPE, rows, cols, t, gbs: bytes / (t.ms() * 1e-3) / 1e9, err, tol })
}

/// The structure of the single-tile row kernels without their arithmetic:
/// one program per row, one masked load and one store. Its bandwidth is the
/// ceiling of that launch geometry (`--sweep` prints it).
#[ferrotile::kernel]
fn row_copy<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, n_cols: i32) {
    let row = program_id(0) as i64;
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let v = load(x + row * (n_cols as i64) + cols, mask, 0.0);
    store(y + row * (n_cols as i64) + cols, v, mask);
}

/// One block of a 1-D copy per program.
#[ferrotile::kernel]
fn copy_1d<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, n: i32) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    let m = offs < n;
    store(y + offs, load(x + offs, m, 0.0), m);
}

/// GB/s (read + write) of `copy_1d` over 256 MiB of f32 (64 MiB where the
/// adapter's buffers are smaller), median of batches.
pub(crate) fn kernel_copy_gbs(dev: &Device) -> Result<f64, Box<dyn std::error::Error>> {
    kernel_copy_n(dev, 1 << 26).or_else(|_| kernel_copy_n(dev, 1 << 24))
}

fn kernel_copy_n(dev: &Device, n: usize) -> Result<f64, Box<dyn std::error::Error>> {
    let x = dev.zeros::<f32>(n)?;
    let mut y = dev.zeros::<f32>(n)?;
    let cfg = LaunchConfig::new([(n / 4096) as u32, 1, 1]).num_warps(8);
    copy_1d::launch(dev, cfg, &x, &mut y, n as i32, 4096)?;
    let ms = median(dev, 40, || copy_1d::launch(dev, cfg, &x, &mut y, n as i32, 4096))?;
    Ok(8.0 * n as f64 / (ms * 1e-3) / 1e9)
}

/// Probe: persistent variant of the library's `softmax_row`: a grid of a few programs per SM,
/// each looping over rows `pid, pid + num_programs, ...`, so that the per-program
/// setup (parameter loads, layout index math) is paid once, not per row.
#[ferrotile::kernel]
pub fn softmax_row_persistent<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, n_rows: i32, n_cols: i32, x_stride: i32, y_stride: i32) {
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    for row in range(program_id(0), n_rows, num_programs(0)) {
        let r = row as i64;
        let v = load(x + r * (x_stride as i64) + cols, mask, T::NEG_INFINITY) as f32;
        let e = exp(v - max(v, axis = 0));
        let inv = 1.0 / sum(e, 0);
        store(y + r * (y_stride as i64) + cols, (e * inv) as T, mask);
    }
}

// (Measured slower than one row per program on the H200; see git history of benches/NOTES.md.)

/// Probe: the library's `layer_norm_row` with the weight and bias loaded
/// before the row's reductions (as Liger-Kernel's forward orders them), so
/// their latency overlaps the row's; more registers live across the
/// reductions. `--sweep` times it next to the library's order.
#[ferrotile::kernel]
pub fn layer_norm_row_wb_first<T: Float, const BLOCK: i32>(x: Ptr<T>, y: Ptr<T>, w: Ptr<T>, b: Ptr<T>, n_cols: i32, eps: f32) {
    let row = program_id(0) as i64;
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let wv = load(w + cols, mask, 0.0) as f32;
    let bv = load(b + cols, mask, 0.0) as f32;
    let v = load(x + row * (n_cols as i64) + cols, mask, 0.0) as f32;
    let n = n_cols as f32;
    let mean = sum(v, 0) / n;
    let d = select(mask, v - mean, 0.0);
    let rstd = rsqrt(sum(d * d, 0) / n + eps);
    store(y + row * (n_cols as i64) + cols, (d * rstd * wv + bv) as T, mask);
}

/// GB/s of the single-tile softmax and layer-norm on `rows × cols` of `T`
/// with `warps` warps (one sweep cell).
fn sweep_one<T: FloatElement>(dev: &Device, rng: &mut Rng, rows: usize, cols: usize, warps: u32) -> Result<(f64, f64), Box<dyn std::error::Error>> {
    let block = cols.next_power_of_two() as u32;
    let n = rows * cols;
    let gbs = |ms: f64| 2.0 * (n * T::DTYPE.size_bytes()) as f64 / (ms * 1e-3) / 1e9;
    let x = dev.from_slice(&rand_vec::<T>(rng, n, 4.0))?;
    let mut y = dev.zeros::<T>(n)?;
    let w = dev.from_slice(&rand_vec::<T>(rng, cols, 1.0))?;
    let sm = SoftmaxConfig { block, looped: false, num_warps: warps, rows: 1, programs_per_sm: 0 };
    let nm = NormConfig { block, looped: false, num_warps: warps, programs_per_sm: 0 };
    softmax_with(dev, &x, &mut y, rows, cols, cols, cols, sm)?;
    layer_norm_with(dev, &x, &w, &w, &mut y, rows, cols, 1e-5, nm)?;
    let t1 = median(dev, 20, || softmax_with(dev, &x, &mut y, rows, cols, cols, cols, sm).map_err(lib))?;
    let t2 = median(dev, 20, || layer_norm_with(dev, &x, &w, &w, &mut y, rows, cols, 1e-5, nm).map_err(lib))?;
    Ok((gbs(t1), gbs(t2)))
}

/// `--sweep`: GB/s of the single-tile kernels for every num_warps.
fn sweep(dev: &Device, rng: &mut Rng) -> Result<(), Box<dyn std::error::Error>> {
    println!("sweep: GB/s by num_warps (single-tile kernels)");
    for &(rows, cols) in &[(16384usize, 1024usize), (16384, 4096), (4096, 16384)] {
        for dt in ["f32", "bf16"] {
            let mut line = format!("{:<10} {:<5} {:>11}", "softmax/ln", dt, format!("{rows}x{cols}"));
            for warps in [1u32, 2, 4, 8, 16, 32] {
                let (a, b) = if dt == "f32" { sweep_one::<f32>(dev, rng, rows, cols, warps)? } else { sweep_one::<bf16>(dev, rng, rows, cols, warps)? };
                line += &format!("  w{warps}:{a:.0}/{b:.0}");
            }
            println!("{line}");
        }
    }
    // geometry ceiling: the row-copy kernel with the library's warps
    for &(rows, cols) in &[(16384usize, 1024usize), (16384, 4096), (4096, 16384)] {
        let n = rows * cols;
        let block = cols.next_power_of_two() as i32;
        let x = dev.from_slice(&rand_vec::<f32>(rng, n, 4.0))?;
        let mut y = dev.zeros::<f32>(n)?;
        let xb = dev.from_slice(&rand_vec::<bf16>(rng, n, 4.0))?;
        let mut yb = dev.zeros::<bf16>(n)?;
        let mut line = format!("row_copy {rows}x{cols}");
        for warps in [2u32, 4, 8, 16] {
            let cfg = LaunchConfig::new([rows as u32, 1, 1]).num_warps(warps);
            row_copy::launch(dev, cfg, &x, &mut y, cols as i32, block)?;
            row_copy::launch(dev, cfg, &xb, &mut yb, cols as i32, block)?;
            let t1 = median(dev, 20, || row_copy::launch(dev, cfg, &x, &mut y, cols as i32, block))?;
            let t2 = median(dev, 20, || row_copy::launch(dev, cfg, &xb, &mut yb, cols as i32, block))?;
            line += &format!("  w{warps}: f32 {:.0} bf16 {:.0}", 8.0 * n as f64 / (t1 * 1e6), 4.0 * n as f64 / (t2 * 1e6));
        }
        println!("{line}");
    }
    // persistent one-row-per-iteration softmax vs one row per program
    {
        let sms = 132u32;
        for &(rows, cols) in &[(16384usize, 1024usize), (16384, 4096)] {
            let n = rows * cols;
            let block = cols.next_power_of_two() as i32;
            let xb = dev.from_slice(&rand_vec::<bf16>(rng, n, 4.0))?;
            let mut yb = dev.zeros::<bf16>(n)?;
            let x = dev.from_slice(&rand_vec::<f32>(rng, n, 4.0))?;
            let mut y = dev.zeros::<f32>(n)?;
            let mut line = format!("persistent softmax {rows}x{cols}");
            for per_sm in [4u32, 8, 16, 32] {
                let warps = ferrotile_kernels::softmax::warps_for(block as usize, 2);
                let cfg = LaunchConfig::new([(sms * per_sm).min(rows as u32), 1, 1]).num_warps(warps);
                let (r, c) = (rows as i32, cols as i32);
                softmax_row_persistent::launch(dev, cfg, &xb, &mut yb, r, c, c, c, block)?;
                softmax_row_persistent::launch(dev, cfg, &x, &mut y, r, c, c, c, block)?;
                let t1 = median(dev, 20, || softmax_row_persistent::launch(dev, cfg, &x, &mut y, r, c, c, c, block))?;
                let t2 = median(dev, 20, || softmax_row_persistent::launch(dev, cfg, &xb, &mut yb, r, c, c, c, block))?;
                line += &format!("  {per_sm}/SM: f32 {:.0} bf16 {:.0}", 8.0 * n as f64 / (t1 * 1e6), 4.0 * n as f64 / (t2 * 1e6));
            }
            println!("{line}");
        }
    }
    // layer norm on 16k-wide rows: the library's single tile, the probe
    // with weight and bias loaded first, the looped kernel (separate w, b)
    for &(rows, cols) in &[(4096usize, 16384usize), (16384, 4096)] {
        for dt in ["f32", "bf16"] {
            let line = if dt == "f32" { ln_probe::<f32>(dev, rng, rows, cols)? } else { ln_probe::<bf16>(dev, rng, rows, cols)? };
            println!("layer_norm {dt:<4} {rows}x{cols} GB/s: {line}");
        }
    }
    // looped kernels on long rows: chunk width × warps
    for &(rows, cols, blocks) in &[(1024usize, 262144usize, &[2048u32, 4096, 8192][..]), (4096, 16384, &[1024, 2048, 4096][..])] {
        let n = rows * cols;
        let x = dev.from_slice(&rand_vec::<f32>(rng, n, 4.0))?;
        let mut y = dev.zeros::<f32>(n)?;
        let w = dev.from_slice(&rand_vec::<f32>(rng, cols, 1.0))?;
        for &block in blocks {
            let mut line = format!("looped f32 {rows}x{cols} block {block:>5}");
            for warps in [4u32, 8, 16] {
                let sm = SoftmaxConfig { block, looped: true, num_warps: warps, rows: 1, programs_per_sm: 0 };
                let nm = NormConfig { block, looped: true, num_warps: warps, programs_per_sm: 0 };
                softmax_with(dev, &x, &mut y, rows, cols, cols, cols, sm)?;
                layer_norm_with(dev, &x, &w, &w, &mut y, rows, cols, 1e-5, nm)?;
                let t1 = median(dev, 10, || softmax_with(dev, &x, &mut y, rows, cols, cols, cols, sm).map_err(lib))?;
                let t2 = median(dev, 10, || layer_norm_with(dev, &x, &w, &w, &mut y, rows, cols, 1e-5, nm).map_err(lib))?;
                let g = |t: f64| 2.0 * (n * 4) as f64 / (t * 1e-3) / 1e9;
                line += &format!("  w{warps}:{:.0}/{:.0}", g(t1), g(t2));
            }
            println!("{line}");
        }
    }
    Ok(())
}

/// One `--sweep` line of layer-norm variants on `rows × cols` of `T`.
fn ln_probe<T: FloatElement>(dev: &Device, rng: &mut Rng, rows: usize, cols: usize) -> Result<String, Box<dyn std::error::Error>> {
    let n = rows * cols;
    let block = cols.next_power_of_two() as u32;
    let gbs = |ms: f64| 2.0 * (n * T::DTYPE.size_bytes()) as f64 / (ms * 1e-3) / 1e9;
    let x = dev.from_slice(&rand_vec::<T>(rng, n, 4.0))?;
    let mut y = dev.zeros::<T>(n)?;
    let w = dev.from_slice(&rand_vec::<T>(rng, cols, 1.0))?;
    let b = dev.from_slice(&rand_vec::<T>(rng, cols, 1.0))?;
    let mut line = String::new();
    for warps in [8u32, 16, 32] {
        let nm = NormConfig { block, looped: false, num_warps: warps, programs_per_sm: 0 };
        layer_norm_with(dev, &x, &w, &b, &mut y, rows, cols, 1e-5, nm)?;
        let t1 = median(dev, 20, || layer_norm_with(dev, &x, &w, &b, &mut y, rows, cols, 1e-5, nm).map_err(lib))?;
        let cfg = LaunchConfig::new([rows as u32, 1, 1]).num_warps(warps);
        let c = cols as i32;
        layer_norm_row_wb_first::launch(dev, cfg, &x, &mut y, &w, &b, c, 1e-5, block as i32)?;
        let t2 = median(dev, 20, || layer_norm_row_wb_first::launch(dev, cfg, &x, &mut y, &w, &b, c, 1e-5, block as i32))?;
        line += &format!(" w{warps}: lib {:.0} wb-first {:.0};", gbs(t1), gbs(t2));
    }
    for (blk, warps) in [(2048u32, 8u32), (2048, 16), (4096, 8), (4096, 16)] {
        let nm = NormConfig { block: blk, looped: true, num_warps: warps, programs_per_sm: 0 };
        layer_norm_with(dev, &x, &w, &b, &mut y, rows, cols, 1e-5, nm)?;
        let t = median(dev, 20, || layer_norm_with(dev, &x, &w, &b, &mut y, rows, cols, 1e-5, nm).map_err(lib))?;
        line += &format!(" looped {blk}/w{warps} {:.0};", gbs(t));
    }
    Ok(line)
}

fn lib(e: ferrotile_kernels::LibError) -> ferrotile::Error {
    match e {
        ferrotile_kernels::LibError::Launch(e) => e,
        other => ferrotile::Error::Buffer(other.to_string()),
    }
}

/// The GEMM tolerances of issue 5 (normwise, against f64).
fn gemm_tol(dtype: DType, tf32: bool) -> f64 {
    match (dtype, tf32) {
        (DType::BF16, _) => 1e-2,
        (DType::F16, _) => 5e-3,
        (_, true) => 1e-3,
        _ => 1e-5,
    }
}

/// Max |got − want| / max |want| over 256 sampled outputs of an m×n
/// product (the four corners first), `want` the f64 dot product of the
/// stored inputs (`a_at(i, p)`, `b_at(p, j)`); infinite if a sample is not
/// finite (unwritten: outputs start as NaN).
fn sampled_err<T: FloatElement>(
    rng: &mut Rng,
    out: &[T],
    (m, n, k): (usize, usize, usize),
    a_at: impl Fn(usize, usize) -> T,
    b_at: impl Fn(usize, usize) -> T,
) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for s in 0..256 {
        let (i, j) = if s < 4 { [(0, 0), (0, n - 1), (m - 1, 0), (m - 1, n - 1)][s] } else { (rng.below(m as u64) as usize, rng.below(n as u64) as usize) };
        let want: f64 = (0..k).map(|p| a_at(i, p).to_f64() * b_at(p, j).to_f64()).sum();
        let got = out[i * n + j].to_f64();
        num = if got.is_finite() { num.max((got - want).abs()) } else { f64::INFINITY };
        den = den.max(want.abs());
    }
    num / den.max(1e-30)
}

fn median(dev: &Device, reps: usize, mut f: impl FnMut() -> ferrotile::Result<()>) -> ferrotile::Result<f64> {
    let mut ts = vec![];
    for _ in 0..reps.div_ceil(BATCH).max(3) {
        ts.push(
            dev.time_ms(|| {
                for _ in 0..BATCH {
                    f()?;
                }
                Ok(())
            })? / BATCH as f64,
        );
    }
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Ok(ts[ts.len() / 2])
}

/// `--overhead`: cold compile (IR → PTX → loaded module → first launch) and
/// cached launch overhead, host wall clock.
fn overhead(dev: &Device) -> Result<(), Box<dyn std::error::Error>> {
    use ferrotile_kernels::softmax::{softmax_with, SoftmaxConfig};
    let x = dev.from_slice(&[1.0f32; 64])?;
    let mut y = dev.zeros::<f32>(64)?;
    // a specialization no one has launched yet: block 64, 2 warps
    let cfg = SoftmaxConfig { block: 64, looped: false, num_warps: 2, rows: 1, programs_per_sm: 0 };
    let t = std::time::Instant::now();
    softmax_with(dev, &x, &mut y, 1, 64, 64, 64, cfg)?;
    dev.synchronize()?;
    let cold = t.elapsed().as_secs_f64() * 1e3;
    let n = 2000;
    let t = std::time::Instant::now();
    for _ in 0..n {
        softmax_with(dev, &x, &mut y, 1, 64, 64, 64, cfg)?;
    }
    let enqueue = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    dev.synchronize()?;
    let t = std::time::Instant::now();
    for _ in 0..200 {
        softmax_with(dev, &x, &mut y, 1, 64, 64, 64, cfg)?;
        dev.synchronize()?;
    }
    let roundtrip = t.elapsed().as_secs_f64() * 1e6 / 200.0;
    println!("cold compile+load+first launch: {cold:.1} ms; cached launch (host enqueue): {enqueue:.2} us; launch+sync round trip: {roundtrip:.1} us");
    Ok(())
}

struct GemmRes {
    dtype: &'static str,
    m: usize,
    n: usize,
    k: usize,
    t: Timing,
    err: f64,
    tol: f64,
}

/// Median time of the library GEMM on `m×n×k` (A, B of dtype `T`, C f32
/// for f32 inputs and `T` otherwise), with its error on sampled outputs.
/// `dtype` ending in `_bT`: B column-major (stored N×K, as a linear layer's
/// weight in `x·Wᵀ`); in `_aT`: A column-major (stored K×M).
fn bench_gemm<T: FloatElement>(
    dev: &Device,
    rng: &mut Rng,
    dtype: &'static str,
    m: usize,
    n: usize,
    k: usize,
    tf32: bool,
    reps: usize,
) -> Result<GemmRes, Box<dyn std::error::Error>> {
    use ferrotile_kernels::gemm::Layout;
    let a: Vec<T> = (0..m * k).map(|_| T::from_f64(rng.normal())).collect();
    let b: Vec<T> = (0..k * n).map(|_| T::from_f64(rng.normal())).collect();
    let b_layout = if dtype.ends_with("_bT") { Layout::ColMajor } else { Layout::RowMajor };
    let a_layout = if dtype.ends_with("_aT") { Layout::ColMajor } else { Layout::RowMajor };
    // (as stored: element (p, j) of B at p·n + j, or at j·k + p; (i, p)
    // of A at i·k + p, or at p·m + i)
    let b_at = |p: usize, j: usize| if b_layout == Layout::RowMajor { b[p * n + j] } else { b[j * k + p] };
    let a_at = |i: usize, p: usize| if a_layout == Layout::RowMajor { a[i * k + p] } else { a[p * m + i] };
    let (ab, bb) = (dev.from_slice(&a)?, dev.from_slice(&b)?);
    let mut c = dev.full(m * n, T::from_f64(f64::NAN))?;
    let opts = ferrotile_kernels::gemm::GemmOptions::<T> { tf32, a_layout, b_layout, ..Default::default() };
    let run = |c: &mut Buffer<T>| ferrotile_kernels::gemm::gemm(dev, &ab, &bb, c, m, n, k, &opts);
    run(&mut c)?; // compile (and tune) outside the timing
    dev.synchronize()?;
    let batch = if m * n * k >= 1 << 33 { 2 } else { BATCH };
    let t = time_both(dev, reps, batch, || run(&mut c).map_err(lib))?;
    // sampled outputs vs f64 dot products of the stored inputs
    let err = sampled_err(rng, &c.to_vec()?, (m, n, k), a_at, b_at);
    let tol = gemm_tol(T::DTYPE, tf32);
    Ok(GemmRes { dtype, m, n, k, t, err, tol })
}

/// A `--gemm-configs` entry: `BMxBNxBK/wWARPS/sSTAGES[/swap][/c2][/kSPLIT]`.
fn parse_config(s: &str) -> Option<ferrotile_kernels::gemm::GemmConfig> {
    let mut parts = s.split('/');
    let t: Vec<u32> = parts.next()?.split('x').map(|v| v.parse().ok()).collect::<Option<_>>()?;
    let [bm, bn, bk] = t[..] else { return None };
    let mut cfg = ferrotile_kernels::gemm::GemmConfig { bm, bn, bk, group_m: 8, num_warps: 4, num_stages: 2, split_k: 1, swap: false, cluster: 1 };
    for p in parts {
        match p.split_at(1) {
            ("w", v) => cfg.num_warps = v.parse().ok()?,
            ("s", "wap") => cfg.swap = true,
            ("s", v) => cfg.num_stages = v.parse().ok()?,
            ("c", v) => cfg.cluster = v.parse().ok()?,
            ("k", v) => cfg.split_k = v.parse().ok()?,
            _ => return None,
        }
    }
    Some(cfg)
}

/// `--gemm-configs`: the listed configurations on one shape and dtype (A, B
/// row-major), checked on sampled outputs, timed round-robin.
fn gemm_config_sweep<T: FloatElement>(
    dev: &Device,
    rng: &mut Rng,
    (m, n, k): (usize, usize, usize),
    list: &str,
    rounds: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<T> = (0..m * k).map(|_| T::from_f64(rng.normal())).collect();
    let b: Vec<T> = (0..k * n).map(|_| T::from_f64(rng.normal())).collect();
    let (ab, bb) = (dev.from_slice(&a)?, dev.from_slice(&b)?);
    let mut c = dev.zeros::<T>(m * n)?;
    let tol = gemm_tol(T::DTYPE, false);
    // (entry, configuration, error, back-to-back and graph times per round)
    let mut rows: Vec<(String, ferrotile_kernels::gemm::GemmConfig, f64, Vec<f64>, Vec<f64>)> = vec![];
    for entry in list.split(',') {
        let Some(cfg) = parse_config(entry) else {
            println!("{entry}: not a configuration (BMxBNxBK/wW/sS[/swap][/c2][/kS])");
            continue;
        };
        let opts = ferrotile_kernels::gemm::GemmOptions::<T> { config: Some(cfg), ..Default::default() };
        c.copy_from_slice(&vec![T::from_f64(f64::NAN); m * n])?;
        if let Err(e) = ferrotile_kernels::gemm::gemm(dev, &ab, &bb, &mut c, m, n, k, &opts).map_err(lib).and_then(|_| dev.synchronize()) {
            println!("{entry}: {e}");
            continue;
        }
        let err = sampled_err(rng, &c.to_vec()?, (m, n, k), |i, p| a[i * k + p], |p, j| b[p * n + j]);
        rows.push((entry.to_string(), cfg, err, vec![], vec![]));
    }
    for _ in 0..rounds {
        for (_, cfg, _, ts, gs) in rows.iter_mut() {
            let opts = ferrotile_kernels::gemm::GemmOptions::<T> { config: Some(*cfg), ..Default::default() };
            let t = time_both(dev, 30, BATCH, || ferrotile_kernels::gemm::gemm(dev, &ab, &bb, &mut c, m, n, k, &opts).map_err(lib))?;
            ts.push(t.b2b);
            gs.extend(t.graph);
        }
    }
    // (medians over the rounds; `graph`: batches replayed from a graph)
    println!("{:<28} {:>9} {:>9} {:>9} {:>9}  check", "config", "b2b us", "graph us", "TFLOP/s", "max err");
    for (name, _, err, ts, gs) in rows {
        let b2b = median_of(ts).unwrap_or(f64::NAN);
        let g = median_of(gs);
        let tflops = 2.0 * (m * n * k) as f64 / (g.unwrap_or(b2b) * 1e-3) / 1e12;
        println!(
            "{:<28} {:>9.1} {:>9.1} {:>9.1} {:>9.1e}  {}",
            name,
            b2b * 1e3,
            g.unwrap_or(f64::NAN) * 1e3,
            tflops,
            err,
            if err <= tol { "ok" } else { "FAIL" }
        );
    }
    Ok(())
}

fn gemm_suite(
    dev: &Device,
    rng: &mut Rng,
    small: bool,
    quick: bool,
    shape: Option<(usize, usize, usize)>,
    only: Option<&[String]>,
) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let want = |d: &str| only.is_none_or(|o| o.iter().any(|x| x == d));
    let reps = if quick { 10 } else { 30 };
    let cube: Vec<(usize, usize, usize)> = match shape {
        Some(s) => vec![s],
        None if small => vec![(1024, 1024, 1024), (2048, 2048, 2048)],
        None => vec![(4096, 4096, 4096), (8192, 8192, 8192)],
    };
    let decode = if small || shape.is_some() { [].iter() } else { [(16, 8192, 8192)].iter() };
    let mut res = vec![];
    for &(m, n, k) in cube.iter().chain(decode) {
        if want("bf16") {
            res.push(bench_gemm::<bf16>(dev, rng, "bf16", m, n, k, false, reps)?);
        }
        if want("f16") {
            res.push(bench_gemm::<half::f16>(dev, rng, "f16", m, n, k, false, reps)?);
        }
    }
    for &(m, n, k) in &cube[..1] {
        if want("bf16_bT") {
            res.push(bench_gemm::<bf16>(dev, rng, "bf16_bT", m, n, k, false, reps)?);
        }
        if want("bf16_aT") {
            res.push(bench_gemm::<bf16>(dev, rng, "bf16_aT", m, n, k, false, reps)?);
        }
        if want("tf32") {
            res.push(bench_gemm::<f32>(dev, rng, "tf32", m, n, k, true, reps)?);
        }
        if want("f32") {
            res.push(bench_gemm::<f32>(dev, rng, "f32", m, n, k, false, reps)?);
        }
    }
    // (`time us`: from a graph where the device has them, as the peers'
    // script times cuBLAS; `b2b us`: back-to-back launches)
    println!("{:<7} {:>16} {:>10} {:>9} {:>9} {:>9}  check", "dtype", "m×n×k", "time us", "TFLOP/s", "b2b us", "max err");
    let mut lines = vec![];
    let mut bad = 0;
    for r in &res {
        let ms = r.t.ms();
        let tflops = 2.0 * (r.m * r.n * r.k) as f64 / (ms * 1e-3) / 1e12;
        let ok = r.err <= r.tol;
        bad += !ok as usize;
        println!(
            "{:<7} {:>16} {:>10.1} {:>9.1} {:>9.1} {:>9.1e}  {}",
            r.dtype,
            format!("{}x{}x{}", r.m, r.n, r.k),
            ms * 1e3,
            tflops,
            r.t.b2b * 1e3,
            r.err,
            if ok { "ok" } else { "FAIL" }
        );
        lines.push(format!(
            "{{\"impl\":\"ferrotile\",\"kernel\":\"gemm\",\"dtype\":\"{}\",\"m\":{},\"n\":{},\"k\":{},\"ms\":{},\"ms_b2b\":{},\"graph\":{},\"tflops\":{},\"max_err\":{},\"ok\":{}}}",
            r.dtype, r.m, r.n, r.k, ms, r.t.b2b, r.t.graph.is_some(), tflops, r.err, ok
        ));
    }
    if bad > 0 {
        return Err(format!("{bad} GEMM result(s) failed verification").into());
    }
    Ok(lines)
}

/// Options of `bench` (`ferrotile bench`, or the `bench` binary).
#[derive(clap::Args, Debug, Clone, Default)]
#[command(after_help = "Row kernels: fresh inputs rotated past the L2, graph-replayed and back-to-back times, outputs checked against f64. \
--gemm: the library GEMM on the standard shapes. --overhead: launch overhead and cold compile time. --sweep: GB/s per warp count. \
Results (and the peers' figures) are in benches/RESULTS.md; `ferrotile chart` draws --json output next to peers.py's.")]
pub struct BenchArgs {
    /// The device: cpu, cuda or wgpu (default: what `Device::best()` picks).
    #[arg(long, value_name = "cpu|cuda|wgpu")]
    pub device: Option<String>,
    /// Fewer repetitions, one row shape (4096x4096).
    #[arg(long)]
    pub quick: bool,
    /// Write one JSON object per result to FILE (as `peers.py --json`).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Launch without the bounds guards, to measure what they cost.
    #[arg(long)]
    pub unchecked: bool,
    /// Row-kernel shapes, ROWSxCOLS,... (default: 16384x1024,16384x4096,4096x16384,1024x262144).
    #[arg(long, value_name = "RxC,..", value_delimiter = ',')]
    pub shapes: Vec<String>,
    /// Row kernels to run (default: all three).
    #[arg(long, value_name = "softmax,layer_norm,rms_norm", value_delimiter = ',')]
    pub kernels: Vec<String>,
    /// Dtypes: f32,bf16 for row kernels; with --gemm bf16,f16,bf16_bT,bf16_aT,tf32,f32.
    #[arg(long, value_delimiter = ',')]
    pub dtypes: Vec<String>,
    /// The library GEMM on the standard shapes instead (4096³, 8192³, 16×8192², transposed operands, tf32, f32).
    #[arg(long)]
    pub gemm: bool,
    /// The GEMM at 1024³ and 2048³ only (slow backends).
    #[arg(long)]
    pub gemm_small: bool,
    /// One GEMM shape, MxNxK.
    #[arg(long, value_name = "MxNxK")]
    pub gemm_shape: Option<String>,
    /// GEMM tile configurations instead of the tuner's pick, BMxBNxBK/wWARPS/sSTAGES[/swap][/c2][/kSPLIT],.. (with --gemm-shape).
    #[arg(long, value_name = "LIST")]
    pub gemm_configs: Option<String>,
    /// Round-robin rounds over --gemm-configs.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Launch overhead and cold compile time.
    #[arg(long)]
    pub overhead: bool,
    /// GB/s per warp count of the row kernels.
    #[arg(long)]
    pub sweep: bool,
}

/// Runs `bench`; the process's exit code.
pub fn main(args: &BenchArgs) -> i32 {
    match run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

fn run(args: &BenchArgs) -> Result<(), String> {
    let quick = args.quick;
    let json = args.json.clone();
    let dev = crate::job::open_device(args.device.as_deref())?;
    // `--unchecked`: every launch without guards, to measure what they cost
    // (the library checks its shapes on the host, so its kernels stay in
    // bounds)
    let unchecked = args.unchecked;
    if unchecked {
        // SAFETY: the benchmarks launch library kernels after the library's
        // own shape checks, and the conformance-tested kernels index in bounds.
        unsafe { ferrotile::runtime::set_unguarded_for_measurement(true) };
    }
    let (mut rng, seed) = Rng::from_time();
    let reps = if quick { 10 } else { 50 };
    // 1 GiB, or 64 MiB on adapters with small buffer limits (lavapipe)
    let copy = dev.copy_bandwidth_gbs(1 << 30, 20).or_else(|_| dev.copy_bandwidth_gbs(1 << 26, 20)).map_err(|e| format!("copy bandwidth: {e}"))?;
    println!(
        "device: {}  seed: {seed}  device copy: {copy:.0} GB/s  timing: {}  launches: {}",
        dev.name(),
        dev.timing_method(),
        if unchecked { "unguarded (--unchecked)" } else { "guarded" }
    );
    let only = (!args.dtypes.is_empty()).then(|| args.dtypes.clone());
    if args.gemm || args.gemm_small || args.gemm_shape.is_some() || args.gemm_configs.is_some() {
        let small = args.gemm_small;
        let shape = match &args.gemm_shape {
            None => None,
            Some(v) => {
                let d: Vec<usize> = v.split('x').filter_map(|x| x.parse().ok()).collect();
                if d.len() != 3 {
                    return Err(format!("--gemm-shape {v}: expected MxNxK"));
                }
                Some((d[0], d[1], d[2]))
            }
        };
        if let Some(list) = &args.gemm_configs {
            let shape = shape.unwrap_or((16, 8192, 8192));
            let r = match only.as_ref().and_then(|o| o.first()).map(String::as_str) {
                Some("f16") => gemm_config_sweep::<half::f16>(&dev, &mut rng, shape, list, args.rounds),
                _ => gemm_config_sweep::<bf16>(&dev, &mut rng, shape, list, args.rounds),
            };
            return r.map_err(|e| format!("gemm configs: {e}"));
        }
        let lines = gemm_suite(&dev, &mut rng, small, quick, shape, only.as_deref()).map_err(|e| format!("gemm: {e}"))?;
        if let Some(f) = json {
            std::fs::write(&f, lines.join("\n") + "\n").map_err(|e| format!("{}: {e}", f.display()))?;
        }
        return Ok(());
    }
    if args.overhead {
        if let Err(e) = overhead(&dev) {
            eprintln!("overhead: {e}");
        }
    }
    if args.sweep {
        return sweep(&dev, &mut rng).map_err(|e| format!("sweep: {e}"));
    }
    let shapes: Vec<(usize, usize)> = if !args.shapes.is_empty() {
        let mut v = vec![];
        for s in &args.shapes {
            match s.split_once('x').and_then(|(r, c)| Some((r.parse().ok()?, c.parse().ok()?))) {
                Some(x) => v.push(x),
                None => return Err(format!("--shapes {s}: expected ROWSxCOLS")),
            }
        }
        v
    } else if quick {
        vec![(4096, 4096)]
    } else {
        vec![(16384, 1024), (16384, 4096), (4096, 16384), (1024, 262144)]
    };
    let kernels = if args.kernels.is_empty() { vec!["softmax".into(), "layer_norm".into(), "rms_norm".into()] } else { args.kernels.clone() };
    let dtypes = only.unwrap_or_else(|| vec!["f32".into(), "bf16".into()]);
    // A copy written in the DSL (one 4096-element block per program): the
    // ceiling a kernel on this backend reaches, next to the API copy.
    let kcopy = kernel_copy_gbs(&dev).map_err(|e| format!("kernel copy: {e}"))?;
    // On wgpu, the CUDA copy of the same GPU (when there is one) in the same run.
    let cuda_copy = if dev.kind() == ferrotile::DeviceKind::Wgpu { Device::cuda(0).ok().and_then(|c| c.copy_bandwidth_gbs(1 << 30, 20).ok()) } else { None };
    println!("kernel copy (DSL copy_1d, f32): {kcopy:.0} GB/s{}", cuda_copy.map(|c| format!("  CUDA copy on the same GPU: {c:.0} GB/s")).unwrap_or_default());
    let pct = |g: f64| match cuda_copy {
        Some(c) => format!("{:>6.1}% {:>6.1}% {:>6.1}%", 100.0 * g / copy, 100.0 * g / kcopy, 100.0 * g / c),
        None => format!("{:>6.1}% {:>6.1}%", 100.0 * g / copy, 100.0 * g / kcopy),
    };
    println!(
        "{:<11} {:<5} {:>13} {:>9} {:>9} {:>9} {:>7} {:>7}{} {:>9}  check",
        "kernel",
        "dtype",
        "shape",
        "time us",
        "b2b us",
        "GB/s",
        "%copy",
        "%kcopy",
        if cuda_copy.is_some() { "   %cuda" } else { "" },
        "max err"
    );
    let mut bad = 0;
    let mut lines = vec![];
    for &(rows, cols) in &shapes {
        for kernel in ["softmax", "layer_norm", "rms_norm"] {
            if !kernels.iter().any(|k| k == kernel) {
                continue;
            }
            for dt in ["f32", "bf16"] {
                if !dtypes.iter().any(|d| d == dt) {
                    continue;
                }
                let res = if dt == "f32" {
                    bench_kernel::<f32>(&dev, &mut rng, kernel, rows, cols, reps)
                } else {
                    bench_kernel::<bf16>(&dev, &mut rng, kernel, rows, cols, reps)
                };
                let r = res.map_err(|e| format!("{kernel} {rows}x{cols}: {e}"))?;
                let ok = r.err <= r.tol;
                bad += !ok as usize;
                println!(
                    "{:<11} {:<5} {:>13} {:>9.1} {:>9.1} {:>9.0} {} {:>9.1e}  {}",
                    r.kernel,
                    r.dtype.to_string(),
                    format!("{}x{}", r.rows, r.cols),
                    r.t.ms() * 1e3,
                    r.t.b2b * 1e3,
                    r.gbs,
                    pct(r.gbs),
                    r.err,
                    if ok { "ok" } else { "FAIL" }
                );
                lines.push(format!(
                    "{{\"impl\":\"ferrotile\",\"kernel\":\"{}\",\"dtype\":\"{}\",\"rows\":{},\"cols\":{},\"ms\":{},\"ms_b2b\":{},\"graph\":{},\"gbs\":{},\"copy_gbs\":{},\"kernel_copy_gbs\":{},\"max_err\":{},\"ok\":{}}}",
                    r.kernel, r.dtype, r.rows, r.cols, r.t.ms(), r.t.b2b, r.t.graph.is_some(), r.gbs, copy, kcopy, r.err, ok
                ));
                if let Some(f) = &json {
                    std::fs::write(f, lines.join("\n") + "\n").map_err(|e| format!("{}: {e}", f.display()))?;
                }
            }
        }
    }
    if bad > 0 {
        return Err(format!("{bad} result(s) failed verification"));
    }
    Ok(())
}
