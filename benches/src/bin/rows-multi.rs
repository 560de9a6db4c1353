//! Multi-row softmax written as a user would (`R` rows per program, row
//! statistics broadcast back into their rows), next to the library softmax
//! (autotuned; one row per program until the library took multi-row
//! programs from this experiment), in one process, on short rows where one
//! row per program leaves the GPU's lanes short of work.
//!
//! Measures what slice layouts buy: run it twice, with and without
//! `FERROTILE_SLICE_LAYOUTS=0` (the switch is read when a kernel is
//! compiled, once per process). Each configuration: inputs rotated over
//! copies larger than the L2, warm-up, median of 7 batches of 20 launches
//! timed with CUDA events, back to back and (CUDA) replayed from a graph,
//! batch by batch in turn (`ferrotile_benches::time_both`, as `bench`
//! times); outputs of the last launch checked against f64 on sampled rows
//! (a failed check is printed as FAIL and ends the run with exit code 1).
//! Output: both times; GB/s (read + write), % of the copy bandwidth
//! measured in the same run and the ratio to the library softmax from the
//! back-to-back time.
//!
//! `rows-multi [--device cuda|wgpu|cpu] [--shapes 16384x1024,16384x512]`

use ferrotile::prelude::*;
use ferrotile::{Buffer, Device, FloatElement};
use ferrotile_benches::{time_both, Timing};
use ferrotile_kernels::reference::{self, Rng};
use half::bf16;

/// `R` rows of at most `B` columns per program.
#[kernel]
pub fn softmax_rows<T: Float, const R: i32, const B: i32>(x: Ptr<T>, y: Ptr<T>, m: i32, n: i32) {
    let rows = program_id(0) * R + arange(0, R);
    let cols = arange(0, B);
    let mask = expand_dims(rows < m, 1) & expand_dims(cols < n, 0);
    let offs = expand_dims(rows as i64, 1) * (n as i64) + expand_dims(cols as i64, 0);
    let v = load(x + offs, mask, T::NEG_INFINITY) as f32;
    let e = exp(v - expand_dims(max(v, axis = 1), 1));
    let inv = 1.0 / sum(e, 1);
    store(y + offs, (e * expand_dims(inv, 1)) as T, mask);
}

const ROTATE_BYTES: usize = 256 << 20;

/// Median time of one launch of `f(i)` (i: the rotation index), in ms,
/// after 3 warm-up launches (the library's tuner picks there): batches of
/// 20 back to back and, on CUDA, replayed from a graph ([`time_both`]).
fn time(dev: &Device, copies: usize, mut f: impl FnMut(usize) -> ferrotile::Result<()>) -> ferrotile::Result<Timing> {
    for i in 0..3 {
        f(i % copies)?;
    }
    dev.synchronize()?;
    let mut k = 0;
    time_both(dev, 7 * 20, 20, || {
        k += 1;
        f((k - 1) % copies)
    })
}

fn check<T: FloatElement>(x: &[T], y: &[T], rows: usize, cols: usize) -> f64 {
    let mut worst = 0.0f64;
    for r in (0..rows).step_by((rows / 16).max(1)) {
        let xr: Vec<f64> = x[r * cols..(r + 1) * cols].iter().map(|v| v.to_f64()).collect();
        let want = reference::softmax(&xr, 1, cols);
        for (c, w) in want.iter().enumerate() {
            worst = worst.max((y[r * cols + c].to_f64() - w).abs() / w.abs().max(1e-3));
        }
    }
    worst
}

fn run<T: FloatElement>(dev: &Device, rows: usize, cols: usize, copy_gbs: f64, tol: f64) -> Result<bool, String> {
    let e = |e: ferrotile::Error| e.to_string();
    let bytes = rows * cols * std::mem::size_of::<T>();
    let copies = (ROTATE_BYTES / (2 * bytes)).clamp(1, 8);
    let mut rng = Rng::new(7);
    let xs: Vec<T> = (0..rows * cols).map(|_| T::from_f64(rng.normal() * 2.0)).collect();
    let x: Vec<Buffer<T>> = (0..copies).map(|_| dev.from_slice(&xs)).collect::<Result<_, _>>().map_err(e)?;
    let mut y: Vec<Buffer<T>> = (0..copies).map(|_| dev.zeros(rows * cols)).collect::<Result<_, _>>().map_err(e)?;
    let gbs = |ms: f64| 2.0 * bytes as f64 / (ms * 1e-3) / 1e9;
    let graph = |t: &Timing| t.graph.map_or("       —".to_string(), |g| format!("{:>8.2}", g * 1e3));
    let lib = time(dev, copies, |i| {
        let (xi, yi) = (&x[i], &mut y[i]);
        ferrotile_kernels::softmax::softmax(dev, xi, yi, rows, cols).map_err(|l| ferrotile::Error::Backend { kernel: "softmax".into(), msg: l.to_string() })
    })
    .map_err(e)?;
    let err = check(&xs, &y[0].to_vec().map_err(e)?, rows, cols);
    let mut ok = err <= tol;
    println!(
        "{:<5} {rows}x{cols} library softmax (tuned)             {:>8.2} us (graph {} us) {:>7.0} GB/s {:>5.1}% copy  err {err:.1e}{}",
        T::DTYPE,
        lib.b2b * 1e3,
        graph(&lib),
        gbs(lib.b2b),
        100.0 * gbs(lib.b2b) / copy_gbs,
        if err <= tol { "" } else { "  FAIL" }
    );
    let b = cols.next_power_of_two() as i32;
    for r in [1i32, 2, 4, 8, 16] {
        for warps in [4u32, 8] {
            if (r * b) as usize > 16384 || (r as usize) > rows {
                continue;
            }
            let grid = rows.div_ceil(r as usize) as u32;
            let cfg = LaunchConfig::new([grid, 1, 1]).num_warps(warps);
            let t = time(dev, copies, |i| {
                let (xi, yi) = (&x[i], &mut y[i]);
                softmax_rows::launch(dev, cfg, xi, yi, rows as i32, cols as i32, r, b)
            })
            .map_err(e)?;
            let err = check(&xs, &y[0].to_vec().map_err(e)?, rows, cols);
            ok &= err <= tol;
            println!(
                "{:<5} {rows}x{cols} softmax_rows R={r:<2} warps={warps:<2}          {:>8.2} us (graph {} us) {:>7.0} GB/s {:>5.1}% copy  {:.2}x library  err {err:.1e}{}",
                T::DTYPE,
                t.b2b * 1e3,
                graph(&t),
                gbs(t.b2b),
                100.0 * gbs(t.b2b) / copy_gbs,
                lib.b2b / t.b2b,
                if err <= tol { "" } else { "  FAIL" }
            );
        }
    }
    Ok(ok)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let dev = ferrotile_benches::device_arg(&args);
    let shapes: Vec<(usize, usize)> = arg("--shapes")
        .unwrap_or_else(|| "16384x1024,16384x512,65536x256".into())
        .split(',')
        .filter_map(|s| s.split_once('x').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?))))
        .collect();
    let copy = dev.copy_bandwidth_gbs(256 << 20, 10).unwrap_or(f64::NAN);
    println!(
        "rows-multi on {} (slice layouts {}), copy {copy:.0} GB/s",
        dev.name(),
        if std::env::var("FERROTILE_SLICE_LAYOUTS").is_ok_and(|v| v == "0") { "off" } else { "on" }
    );
    let mut ok = true;
    for &(rows, cols) in &shapes {
        for r in [run::<f32>(&dev, rows, cols, copy, 1e-4), run::<bf16>(&dev, rows, cols, copy, 2e-2)] {
            match r {
                Ok(o) => ok &= o,
                Err(e) => {
                    println!("error: {e}");
                    ok = false;
                }
            }
        }
    }
    if !ok {
        std::process::exit(1);
    }
}
