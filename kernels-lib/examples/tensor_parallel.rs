//! Tensor parallelism over the GPUs of one machine, the Megatron way: a
//! transformer MLP `Y = GELU(X·W1)·W2` with `W1` split by columns and `W2`
//! by rows, so each GPU computes a partial `Y` from its own slices and one
//! NCCL all-reduce sums them. Each GPU is driven by its own thread; the
//! GEMMs and the all-reduce are queued on the device's stream, so a step
//! never waits on the host. Checked against the same MLP on one GPU and
//! against f64 on sampled rows; the step time is compared with one GPU's.
//!
//! `cargo run --release -p ferrotile-kernels --features nccl --example tensor_parallel -- [--m 8192] [--d 8192] [--gpus N] [--iters 20]`
//!
//! Needs CUDA devices and libnccl; elsewhere it says so and exits cleanly.

use ferrotile::nccl::{Comm, ReduceOp};
use ferrotile::{bf16, Buffer, Device};
use ferrotile_kernels::gemm::{gemm, Activation, GemmOptions};
use ferrotile_kernels::reference::Rng;
use std::time::Instant;

type E = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    m: usize,
    d: usize,
    gpus: Option<usize>,
    iters: usize,
}

fn args() -> Result<Args, E> {
    let mut a = Args { m: 8192, d: 8192, gpus: None, iters: 20 };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || -> Result<usize, E> { Ok(it.next().ok_or(format!("{k} needs a value"))?.parse()?) };
        match k.as_str() {
            "--m" => a.m = v()?,
            "--d" => a.d = v()?,
            "--gpus" => a.gpus = Some(v()?),
            "--iters" => a.iters = v()?.max(1),
            _ => return Err(format!("unknown argument {k} (--m, --d, --gpus, --iters)").into()),
        }
    }
    Ok(a)
}

/// One MLP step on `dev`: `h ← GELU(x·w1)`, `y ← h·w2` (f32 out).
#[allow(clippy::too_many_arguments)]
fn mlp(
    dev: &Device,
    x: &Buffer<bf16>,
    w1: &Buffer<bf16>,
    w2: &Buffer<bf16>,
    h: &mut Buffer<bf16>,
    y: &mut Buffer<f32>,
    m: usize,
    d: usize,
    f: usize,
) -> Result<(), E> {
    gemm(dev, x, w1, h, m, f, d, &GemmOptions { activation: Activation::Gelu, ..Default::default() })?;
    gemm(dev, h, w2, y, m, d, f, &GemmOptions::default())?;
    Ok(())
}

fn main() -> Result<(), E> {
    let a = args()?;
    let (m, d) = (a.m, a.d);
    let f = 4 * d;
    let count = (0..).take_while(|&i| Device::cuda(i).is_ok()).count();
    if count == 0 {
        println!("tensor_parallel: no CUDA device here ({}); nothing to run", Device::cuda(0).err().map_or(String::new(), |e| e.to_string()));
        return Ok(());
    }
    let n = a.gpus.unwrap_or(count);
    if n == 0 || n > count || !f.is_multiple_of(n) {
        return Err(format!("--gpus {n}: between 1 and the {count} devices here, dividing 4·d = {f}").into());
    }
    let devs: Vec<Device> = (0..n).map(Device::cuda).collect::<Result<_, _>>()?;
    let comms = match Comm::for_devices(&devs) {
        Ok(c) => c,
        Err(e) => {
            println!("tensor_parallel: {e}; nothing to run");
            return Ok(());
        }
    };

    // the weights (scaled so activations stay O(1)) and the input
    let (mut rng, seed) = Rng::from_time();
    let rand = |rng: &mut Rng, len: usize, s: f64| -> Vec<bf16> { (0..len).map(|_| bf16::from_f64(rng.normal() * s)).collect() };
    let x = rand(&mut rng, m * d, 1.0);
    let w1 = rand(&mut rng, d * f, 1.0 / (d as f64).sqrt());
    let w2 = rand(&mut rng, f * d, 1.0 / (f as f64).sqrt());

    // one GPU: the whole MLP
    let dev0 = &devs[0];
    let (xb, w1b, w2b) = (dev0.from_slice(&x)?, dev0.from_slice(&w1)?, dev0.from_slice(&w2)?);
    let (mut h, mut y1) = (dev0.zeros::<bf16>(m * f)?, dev0.zeros::<f32>(m * d)?);
    mlp(dev0, &xb, &w1b, &w2b, &mut h, &mut y1, m, d, f)?; // (compiles and tunes)
    dev0.synchronize()?;
    let t = Instant::now();
    for _ in 0..a.iters {
        mlp(dev0, &xb, &w1b, &w2b, &mut h, &mut y1, m, d, f)?;
    }
    dev0.synchronize()?;
    let one_ms = t.elapsed().as_secs_f64() * 1e3 / a.iters as f64;
    let want = y1.to_vec()?;
    drop((xb, w1b, w2b, h, y1));

    // n GPUs: rank r holds columns [r·f/n, (r+1)·f/n) of W1 and those rows of W2
    let fr = f / n;
    let barrier = std::sync::Barrier::new(n);
    let results: Vec<Result<(f64, Vec<f32>), E>> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .map(|comm| {
                let (x, w1, w2, barrier) = (&x, &w1, &w2, &barrier);
                s.spawn(move || -> Result<(f64, Vec<f32>), E> {
                    let dev = comm.device().clone();
                    let r = comm.rank();
                    let step = |bufs: &mut (Buffer<bf16>, Buffer<bf16>, Buffer<bf16>, Buffer<bf16>, Buffer<f32>)| -> Result<(), E> {
                        let (xb, w1b, w2b, h, y) = bufs;
                        mlp(&dev, xb, w1b, w2b, h, y, m, d, fr)?;
                        comm.all_reduce(y, ReduceOp::Sum)?;
                        Ok(())
                    };
                    // (every rank reaches both barriers, also after an error:
                    // the others would wait for it forever)
                    let setup = (|| -> Result<_, E> {
                        let w1r: Vec<bf16> = (0..d).flat_map(|row| w1[row * f + r * fr..row * f + (r + 1) * fr].iter().copied()).collect();
                        let mut bufs = (
                            dev.from_slice(x)?,
                            dev.from_slice(&w1r)?,
                            dev.from_slice(&w2[r * fr * d..(r + 1) * fr * d])?,
                            dev.zeros::<bf16>(m * fr)?,
                            dev.zeros::<f32>(m * d)?,
                        );
                        step(&mut bufs)?;
                        let got = bufs.4.to_vec()?;
                        Ok((bufs, got))
                    })();
                    barrier.wait();
                    let t = Instant::now();
                    let timed = setup.and_then(|(mut bufs, got)| {
                        (0..a.iters).try_for_each(|_| step(&mut bufs))?;
                        dev.synchronize()?;
                        Ok(got)
                    });
                    barrier.wait();
                    Ok((t.elapsed().as_secs_f64() * 1e3 / a.iters as f64, timed?))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a rank's thread panicked".into()))).collect()
    });
    let mut n_ms: f64 = 0.0;
    let mut worst: f64 = 0.0;
    let scale = want.iter().fold(0f64, |s, v| s.max(v.abs() as f64)).max(1.0);
    for (r, res) in results.into_iter().enumerate() {
        let (ms, got) = res?;
        n_ms = n_ms.max(ms);
        let e = got.iter().zip(&want).map(|(g, w)| (*g as f64 - *w as f64).abs()).fold(0.0, f64::max) / scale;
        worst = worst.max(e);
        if e > 1e-2 {
            return Err(format!("rank {r}: max |n GPUs − 1 GPU| = {e:.2e} of the output's scale (seed {seed})").into());
        }
    }
    // f64 on sampled rows (H rounded to bf16, as the kernels store it)
    let mut f64_err: f64 = 0.0;
    for i in [0, m / 2, m - 1] {
        let xr: Vec<f64> = x[i * d..(i + 1) * d].iter().map(|v| v.to_f64()).collect();
        let hr: Vec<f64> = (0..f)
            .map(|c| {
                let z: f64 = (0..d).map(|k| xr[k] * w1[k * f + c].to_f64()).sum();
                bf16::from_f64(0.5 * z * (1.0 + ferrotile_kernels::reference::erf(z / std::f64::consts::SQRT_2))).to_f64()
            })
            .collect();
        for c in 0..d {
            let yv: f64 = (0..f).map(|k| hr[k] * w2[k * d + c].to_f64()).sum();
            f64_err = f64_err.max((want[i * d + c] as f64 - yv).abs() / scale);
        }
    }
    if f64_err > 2e-2 {
        return Err(format!("one GPU vs f64 on sampled rows: {f64_err:.2e} of the output's scale (seed {seed})").into());
    }
    let flop = 2.0 * 2.0 * (m * d * f) as f64;
    println!("MLP {m}×{d} → {f} → {d}, bf16 (f32 partial sums, all-reduced in f32), {} iterations", a.iters);
    println!("| GPUs | ms / step | TFLOP/s | speedup | max err vs 1 GPU | 1 GPU vs f64 (3 rows) |");
    println!("|---:|---:|---:|---:|---:|---:|");
    println!("| 1 | {one_ms:.3} | {:.0} | 1.00× | — | {f64_err:.1e} |", flop / one_ms / 1e9);
    println!("| {n} | {n_ms:.3} | {:.0} | {:.2}× | {worst:.1e} | |", flop / n_ms / 1e9, one_ms / n_ms);
    Ok(())
}
