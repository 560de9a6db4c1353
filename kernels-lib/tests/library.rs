//! Library kernels vs f64 references on fresh random inputs, every dtype,
//! sizes that are not multiples of the block, single-tile and looped kernels,
//! with outputs poisoned (NaN) so that unwritten elements fail the check.
//!
//! Error metric: max |got - want| / max(|want|, floor). Softmax uses a tiny
//! floor (true relative error); the norms, whose outputs are O(1) by
//! construction, use floor 1 so that cancellation near zero is measured in
//! absolute terms; f16 softmax outputs below f16's smallest normal are
//! measured against that floor. Thresholds: f32 1e-5, f16/bf16 1e-2.

use ferrotile::{Device, FloatElement};

mod common;
use common::devices;
use ferrotile_kernels::norm::{layer_norm_with, rms_norm_with, NormConfig};
use ferrotile_kernels::reference::{self, max_rel_err, Rng};
use ferrotile_kernels::softmax::{softmax_with, SoftmaxConfig};
use ferrotile_kernels::LibError;
use half::{bf16, f16};

fn tol<T: FloatElement>() -> f64 {
    if T::DTYPE == ferrotile::ir::DType::F32 {
        1e-5
    } else {
        1e-2
    }
}

fn rand_vec<T: FloatElement>(rng: &mut Rng, n: usize, scale: f64) -> (Vec<T>, Vec<f64>) {
    let v: Vec<T> = (0..n).map(|_| T::from_f64(rng.normal() * scale)).collect();
    let f = v.iter().map(|x| x.to_f64()).collect();
    (v, f)
}

/// (rows, cols, forced config or None)
fn shapes() -> Vec<(usize, usize, Option<(u32, bool)>)> {
    vec![
        (1, 1, None),
        (3, 17, None),
        (7, 1000, None),
        (4, 1024, None),
        (2, 4097, None),
        (5, 777, Some((128, true))),
        (3, 1000, Some((256, true))),
        // enough long rows that an O(n)-error reduction shows (the WGSL
        // backend's serial cross-invocation sum did: 1.2e-5 on lavapipe)
        (64, 20000, None),
    ]
}

/// Several rows per program (`SoftmaxConfig::rows`): row counts that the
/// row block does and does not divide, rows shorter than the tile, strides
/// wider than the rows.
fn check_softmax_rows_on<T: FloatElement>(dev: &Device, seed: u64) {
    let mut rng = Rng::new(seed);
    for (rows, cols, stride, block, per, warps) in
        [(37, 100, 100, 128, 4, 4), (1000, 33, 40, 64, 16, 8), (5, 256, 256, 256, 8, 4), (3, 17, 17, 32, 2, 1), (65, 8, 8, 8, 64, 2)]
    {
        let (xv, _) = rand_vec::<T>(&mut rng, rows * stride, 3.0);
        let x = dev.from_slice(&xv).unwrap();
        let mut y = dev.full(rows * stride, T::from_f64(f64::NAN)).unwrap();
        let cfg = SoftmaxConfig { block, looped: false, num_warps: warps, rows: per, programs_per_sm: 0 };
        softmax_with(dev, &x, &mut y, rows, cols, stride, stride, cfg).unwrap();
        let yv = y.to_vec().unwrap();
        let dense: Vec<f64> = (0..rows).flat_map(|r| (0..cols).map(move |c| (r, c))).map(|(r, c)| xv[r * stride + c].to_f64()).collect();
        let got: Vec<f64> = (0..rows).flat_map(|r| (0..cols).map(move |c| (r, c))).map(|(r, c)| yv[r * stride + c].to_f64()).collect();
        let want = reference::softmax(&dense, rows, cols);
        let floor = if T::DTYPE == ferrotile::ir::DType::F16 { 6.1e-5 } else { 1e-30 };
        let e = max_rel_err(&got, &want, floor);
        assert!(e <= tol::<T>(), "softmax on {} {rows}x{cols} {cfg:?} seed {seed}: rel err {e:e}", dev.name());
        // the gaps between rows are never written
        for r in 0..rows {
            for c in cols..stride {
                assert!(yv[r * stride + c].to_f64().is_nan(), "softmax {cfg:?} wrote the gap at row {r} column {c}");
            }
        }
    }
}

#[test]
fn softmax_several_rows_per_program() {
    let seed = seed();
    for dev in devices() {
        check_softmax_rows_on::<f32>(&dev, seed);
        check_softmax_rows_on::<bf16>(&dev, seed ^ 1);
        check_softmax_rows_on::<f16>(&dev, seed ^ 2);
    }
}

fn check_softmax<T: FloatElement>(seed: u64) {
    for dev in devices() {
        check_softmax_on::<T>(&dev, seed);
    }
}

fn check_layer_norm<T: FloatElement>(seed: u64) {
    for dev in devices() {
        check_layer_norm_on::<T>(&dev, seed);
    }
}

fn check_softmax_on<T: FloatElement>(dev: &Device, seed: u64) {
    let dev = dev.clone();
    let mut rng = Rng::new(seed);
    for (rows, cols, forced) in shapes() {
        let (xv, xf) = rand_vec::<T>(&mut rng, rows * cols, 3.0);
        let x = dev.from_slice(&xv).unwrap();
        let mut y = dev.full(rows * cols, T::from_f64(f64::NAN)).unwrap();
        let cfg = match forced {
            Some((block, looped)) => SoftmaxConfig { block, looped, num_warps: 4, rows: 1, programs_per_sm: 0 },
            None => SoftmaxConfig::for_cols(cols, T::DTYPE.size_bytes()),
        };
        softmax_with(&dev, &x, &mut y, rows, cols, cols, cols, cfg).unwrap();
        let got: Vec<f64> = y.to_vec().unwrap().iter().map(|v| v.to_f64()).collect();
        let want = reference::softmax(&xf, rows, cols);
        // f16 outputs below its smallest normal (6.1e-5) cannot carry relative
        // precision: measure those against that floor.
        let floor = if T::DTYPE == ferrotile::ir::DType::F16 { 6.1e-5 } else { 1e-30 };
        let e = max_rel_err(&got, &want, floor);
        assert!(e <= tol::<T>(), "softmax on {} {rows}x{cols} {cfg:?} seed {seed}: rel err {e:e}", dev.name());
    }
}

fn check_layer_norm_on<T: FloatElement>(dev: &Device, seed: u64) {
    let dev = dev.clone();
    let mut rng = Rng::new(seed);
    for (rows, cols, forced) in shapes() {
        let (xv, xf) = rand_vec::<T>(&mut rng, rows * cols, 2.0);
        let (wv, wf) = rand_vec::<T>(&mut rng, cols, 1.0);
        let (bv, bf) = rand_vec::<T>(&mut rng, cols, 1.0);
        let (x, w, b) = (dev.from_slice(&xv).unwrap(), dev.from_slice(&wv).unwrap(), dev.from_slice(&bv).unwrap());
        let cfg = match forced {
            Some((block, looped)) => NormConfig { block, looped, num_warps: 4, programs_per_sm: 0 },
            None => NormConfig::for_cols(cols, T::DTYPE.size_bytes()),
        };
        let mut y = dev.full(rows * cols, T::from_f64(f64::NAN)).unwrap();
        layer_norm_with(&dev, &x, &w, &b, &mut y, rows, cols, 1e-5, cfg).unwrap();
        let got: Vec<f64> = y.to_vec().unwrap().iter().map(|v| v.to_f64()).collect();
        let want = reference::layer_norm(&xf, &wf, &bf, rows, cols, 1e-5);
        let e = max_rel_err(&got, &want, 1.0);
        assert!(e <= tol::<T>(), "layer_norm on {} {rows}x{cols} {cfg:?} seed {seed}: err {e:e}", dev.name());

        let mut y = dev.full(rows * cols, T::from_f64(f64::NAN)).unwrap();
        rms_norm_with(&dev, &x, &w, &mut y, rows, cols, 1e-6, cfg).unwrap();
        let got: Vec<f64> = y.to_vec().unwrap().iter().map(|v| v.to_f64()).collect();
        let want = reference::rms_norm(&xf, &wf, rows, cols, 1e-6);
        let e = max_rel_err(&got, &want, 1.0);
        assert!(e <= tol::<T>(), "rms_norm on {} {rows}x{cols} {cfg:?} seed {seed}: err {e:e}", dev.name());
    }
}

fn seed() -> u64 {
    let (_, s) = Rng::from_time();
    eprintln!("seed = {s}");
    s
}

#[test]
fn softmax_f32() {
    check_softmax::<f32>(seed());
}
#[test]
fn softmax_f16() {
    check_softmax::<f16>(seed());
}
#[test]
fn softmax_bf16() {
    check_softmax::<bf16>(seed());
}
#[test]
fn norms_f32() {
    check_layer_norm::<f32>(seed());
}
#[test]
fn norms_f16() {
    check_layer_norm::<f16>(seed());
}
#[test]
fn norms_bf16() {
    check_layer_norm::<bf16>(seed());
}

#[test]
fn softmax_handles_extreme_rows() {
    for dev in devices() {
        softmax_extreme_on(&dev);
    }
}

fn softmax_extreme_on(dev: &Device) {
    // -inf entries, huge magnitudes and a row of equal values.
    let dev = dev.clone();
    let cols = 37;
    let mut xv = vec![0f32; 3 * cols];
    xv[0] = f32::NEG_INFINITY;
    xv[1] = 1e30;
    for c in 0..cols {
        xv[cols + c] = -1e4 + c as f32;
        xv[2 * cols + c] = 7.0;
    }
    let x = dev.from_slice(&xv).unwrap();
    for (looped, rows) in [(false, 1), (true, 1), (false, 2), (false, 4)] {
        let mut y = dev.full(3 * cols, f32::NAN).unwrap();
        let cfg = SoftmaxConfig { block: if looped { 16 } else { 64 }, looped, num_warps: 4, rows, programs_per_sm: 0 };
        softmax_with(&dev, &x, &mut y, 3, cols, cols, cols, cfg).unwrap();
        let want = reference::softmax(&xv.iter().map(|&v| v as f64).collect::<Vec<_>>(), 3, cols);
        let got: Vec<f64> = y.to_vec().unwrap().iter().map(|&v| v as f64).collect();
        assert!(max_rel_err(&got, &want, 1e-30) < 1e-5, "looped={looped} rows={rows}: {got:?}");
    }
}

/// Rows of magnitude 1e20–1e30 (squares overflow f32) normalize like the f64
/// reference, single-tile and looped, layer-norm and RMSNorm.
#[test]
fn norms_handle_huge_rows() {
    for dev in devices() {
        let mut rng = Rng::new(seed());
        for (scale, cols) in [(1e20, 37), (1e30, 37), (1e30, 1000), (-3e29, 300)] {
            let rows = 3;
            let xf: Vec<f64> = (0..rows * cols).map(|i| (rng.normal() + if i % 7 == 0 { 3.0 } else { 0.0 }) * scale).collect();
            let xv: Vec<f32> = xf.iter().map(|&v| v as f32).collect();
            let xf: Vec<f64> = xv.iter().map(|&v| v as f64).collect();
            let (wv, wf) = rand_vec::<f32>(&mut rng, cols, 1.0);
            let (bv, bf) = rand_vec::<f32>(&mut rng, cols, 1.0);
            let (x, w, b) = (dev.from_slice(&xv).unwrap(), dev.from_slice(&wv).unwrap(), dev.from_slice(&bv).unwrap());
            for (block, looped) in [(64, false), (1024, false), (32, true)] {
                if !looped && (block as usize) < cols {
                    continue;
                }
                let cfg = NormConfig { block, looped, num_warps: 4, programs_per_sm: 0 };
                let mut y = dev.full(rows * cols, f32::NAN).unwrap();
                layer_norm_with(&dev, &x, &w, &b, &mut y, rows, cols, 1e-5, cfg).unwrap();
                let got: Vec<f64> = y.to_vec().unwrap().iter().map(|&v| v as f64).collect();
                let e = max_rel_err(&got, &reference::layer_norm(&xf, &wf, &bf, rows, cols, 1e-5), 1.0);
                assert!(e <= 1e-5, "layer_norm on {} scale {scale:e} {rows}x{cols} {cfg:?}: err {e:e}", dev.name());
                let mut y = dev.full(rows * cols, f32::NAN).unwrap();
                rms_norm_with(&dev, &x, &w, &mut y, rows, cols, 1e-6, cfg).unwrap();
                let got: Vec<f64> = y.to_vec().unwrap().iter().map(|&v| v as f64).collect();
                let e = max_rel_err(&got, &reference::rms_norm(&xf, &wf, rows, cols, 1e-6), 1.0);
                assert!(e <= 1e-5, "rms_norm on {} scale {scale:e} {rows}x{cols} {cfg:?}: err {e:e}", dev.name());
            }
        }
    }
}

#[test]
fn strided_rows_leave_gaps_untouched() {
    for dev in devices() {
        strided_on(&dev);
    }
}

fn strided_on(dev: &Device) {
    let dev = dev.clone();
    let (rows, cols, stride) = (4, 10, 13);
    let mut rng = Rng::new(seed());
    let xv: Vec<f32> = (0..rows * stride).map(|_| rng.normal() as f32).collect();
    let x = dev.from_slice(&xv).unwrap();
    let mut y = dev.full(rows * stride, -7.0f32).unwrap();
    softmax_with(&dev, &x, &mut y, rows, cols, stride, stride, SoftmaxConfig::for_cols(cols, 4)).unwrap();
    let out = y.to_vec().unwrap();
    for r in 0..rows {
        let row: Vec<f64> = xv[r * stride..r * stride + cols].iter().map(|&v| v as f64).collect();
        let want = reference::softmax(&row, 1, cols);
        for c in 0..stride {
            let g = out[r * stride + c];
            if c < cols {
                assert!(((g as f64) - want[c]).abs() <= 1e-6 * want[c].abs().max(1e-30) + 1e-7);
            } else {
                assert_eq!(g, -7.0, "gap element {r},{c} was written");
            }
        }
    }
}

#[test]
fn bad_shapes_are_errors() {
    let dev = Device::cpu();
    let x = dev.zeros::<f32>(10).unwrap();
    let mut y = dev.zeros::<f32>(10).unwrap();
    assert!(matches!(ferrotile_kernels::softmax(&dev, &x, &mut y, 3, 4), Err(LibError::Shape(_))));
    let cfg = SoftmaxConfig { block: 2, looped: false, num_warps: 1, rows: 1, programs_per_sm: 0 };
    assert!(matches!(softmax_with(&dev, &x, &mut y, 2, 4, 4, 4, cfg), Err(LibError::Config(_))));
    // rows per program: a power of two, not looped
    for (rows, looped) in [(3, false), (2, true), (0, false)] {
        let cfg = SoftmaxConfig { block: 4, looped, num_warps: 1, rows, programs_per_sm: 0 };
        assert!(matches!(softmax_with(&dev, &x, &mut y, 2, 4, 4, 4, cfg), Err(LibError::Config(_))), "rows {rows} looped {looped}");
    }
    let w = dev.zeros::<f32>(3).unwrap();
    assert!(matches!(ferrotile_kernels::rms_norm(&dev, &x, &w, &mut y, 2, 5, 1e-5), Err(LibError::Shape(_))));
    let w = dev.zeros::<f32>(5).unwrap();
    assert!(matches!(ferrotile_kernels::rms_norm(&dev, &x, &w, &mut y, 2, 5, f32::NAN), Err(LibError::Config(_))));
}

#[test]
fn softmax_4096_square_is_fast_enough_for_ci() {
    // The brief: 4096x4096 f32 softmax well under a few seconds (release).
    // Under the test profile (opt-level 2) allow a generous margin.
    let dev = Device::cpu();
    let n = 4096;
    let mut rng = Rng::new(seed());
    let xv: Vec<f32> = (0..n * n).map(|_| rng.normal() as f32).collect();
    let x = dev.from_slice(&xv).unwrap();
    let mut y = dev.zeros::<f32>(n * n).unwrap();
    let t = std::time::Instant::now();
    ferrotile_kernels::softmax(&dev, &x, &mut y, n, n).unwrap();
    let dt = t.elapsed();
    eprintln!("softmax 4096x4096 f32 on {}: {:?}", dev.name(), dt);
    assert!(dt.as_secs_f64() < 10.0, "took {dt:?}");
    let out = y.to_vec().unwrap();
    let s: f32 = out[..n].iter().sum();
    assert!((s - 1.0).abs() < 1e-4);
}
