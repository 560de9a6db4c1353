//! The candle ops against f64 references on fresh random inputs (odd
//! shapes, every dtype), a user's own `#[kernel]` as a candle op, and the
//! errors — on candle's CPU tensors (the interpreter) always, and on CUDA
//! tensors where the build has `cuda` and the machine a GPU (there also:
//! the kernels read the tensors' own memory, and outputs are poisoned).

use candle_core::{DType, Device, Tensor};
use ferrotile::prelude::*;
#[cfg(feature = "cuda")]
use ferrotile_candle::Float;
use ferrotile_candle::{apply2, BoxError, Op2};
use ferrotile_kernels::reference::{self, max_rel_err, Rng};

fn devices() -> Vec<Device> {
    #[allow(unused_mut)]
    let mut d = vec![Device::Cpu];
    #[cfg(feature = "cuda")]
    match Device::new_cuda(0) {
        Ok(c) => d.push(c),
        Err(e) => eprintln!("skipped: candle CUDA device: {e}"),
    }
    #[cfg(not(feature = "cuda"))]
    eprintln!("skipped: candle CUDA tensors (built without the `cuda` feature)");
    d
}

fn seed() -> u64 {
    let (_, s) = Rng::from_time();
    eprintln!("seed {s}");
    s
}

/// A random tensor of `dims` in `dt`, and its values (as rounded) in f64.
fn rand_t(rng: &mut Rng, dims: &[usize], scale: f64, dt: DType, dev: &Device) -> (Tensor, Vec<f64>) {
    let n: usize = dims.iter().product();
    let v: Vec<f32> = (0..n).map(|_| (rng.normal() * scale) as f32).collect();
    let t = Tensor::from_vec(v, dims, &Device::Cpu).unwrap().to_dtype(dt).unwrap();
    let f = t.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
    (t.to_device(dev).unwrap(), f)
}

fn values(t: &Tensor) -> Vec<f64> {
    t.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap()
}

fn tol(dt: DType) -> f64 {
    if dt == DType::F32 {
        1e-5
    } else {
        1e-2
    }
}

/// Fills the CUDA allocator's pool with NaN so an output the op forgot
/// to write shows (freed memory is reused stream-ordered).
fn poison(dev: &Device, elems: usize) {
    if dev.is_cuda() {
        let t = Tensor::full(f32::NAN, elems, dev).unwrap();
        drop(t);
    }
}

const DTYPES: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

#[test]
fn softmax_and_norms_match_f64() {
    let s = seed();
    let mut rng = Rng::new(s);
    for dev in devices() {
        for dt in DTYPES {
            for dims in [vec![1usize], vec![3, 17], vec![2, 5, 777], vec![4, 1000]] {
                let (rows, cols) = (dims[..dims.len() - 1].iter().product::<usize>(), dims[dims.len() - 1]);
                let what = format!("{dev:?} {dt:?} {dims:?} seed {s}");
                let (x, xf) = rand_t(&mut rng, &dims, 3.0, dt, &dev);
                poison(&dev, 4 * rows * cols);
                let y = ferrotile_candle::softmax_last_dim(&x).unwrap();
                assert_eq!(y.dims(), &dims[..]);
                let e = max_rel_err(&values(&y), &reference::softmax(&xf, rows, cols), 1e-30_f64.max(if dt == DType::F16 { 6.1e-5 } else { 0.0 }));
                assert!(e <= tol(dt), "softmax {what}: rel err {e:e}");

                let (w, wf) = rand_t(&mut rng, &[cols], 1.0, dt, &dev);
                let (b, bf) = rand_t(&mut rng, &[cols], 1.0, dt, &dev);
                poison(&dev, 4 * rows * cols);
                let y = ferrotile_candle::rms_norm(&x, &w, 1e-5).unwrap();
                let e = max_rel_err(&values(&y), &reference::rms_norm(&xf, &wf, rows, cols, 1e-5), 1.0);
                assert!(e <= tol(dt), "rms_norm {what}: err {e:e}");
                poison(&dev, 4 * rows * cols);
                let y = ferrotile_candle::layer_norm(&x, &w, &b, 1e-5).unwrap();
                let e = max_rel_err(&values(&y), &reference::layer_norm(&xf, &wf, &bf, rows, cols, 1e-5), 1.0);
                assert!(e <= tol(dt), "layer_norm {what}: err {e:e}");
            }
        }
    }
}

#[test]
fn matmul_matches_f64() {
    let s = seed();
    let mut rng = Rng::new(s);
    for dev in devices() {
        for dt in DTYPES {
            for (batch, m, k, n) in [(vec![], 33, 17, 29), (vec![2], 5, 64, 3), (vec![2, 3], 65, 130, 31), (vec![], 4, 0, 5)] {
                let dims = |r: usize, c: usize| [batch.clone(), vec![r, c]].concat();
                let (a, af) = rand_t(&mut rng, &dims(m, k), 1.0, dt, &dev);
                let (b, bf) = rand_t(&mut rng, &dims(k, n), 1.0, dt, &dev);
                poison(&dev, 4 * m * n * 6);
                let c = ferrotile_candle::matmul(&a, &b).unwrap();
                assert_eq!(c.dims(), &dims(m, n)[..]);
                let got = values(&c);
                let nb: usize = batch.iter().product();
                for i in 0..nb {
                    let want = reference::gemm(&af[i * m * k..(i + 1) * m * k], &bf[i * k * n..(i + 1) * k * n], None, m, n, k, 1.0, 0);
                    // (errors relative to the terms' scale, sqrt(k))
                    let e = max_rel_err(&got[i * m * n..(i + 1) * m * n], &want, (k as f64).sqrt().max(1.0));
                    assert!(e <= tol(dt), "matmul {dev:?} {dt:?} {batch:?}×{m}×{k}×{n} product {i} seed {s}: err {e:e}");
                }
            }
        }
    }
}

/// A kernel as a user writes it, run on candle tensors through [`Op2`]:
/// `y = x · sigmoid(g)` (a SwiGLU-style gate), any length.
#[kernel]
fn gate<T: Float, const BLOCK: i32>(x: Ptr<T>, g: Ptr<T>, y: Ptr<T>, n: i32) {
    let i = program_id(0) * BLOCK + arange(0, BLOCK);
    let ok = i < n;
    let xv = load(x + i, ok, 0.0) as f32;
    let gv = load(g + i, ok, 0.0) as f32;
    store(y + i, (xv / (1.0 + exp(-gv))) as T, ok);
}

struct Gate;

impl Op2 for Gate {
    fn name(&self) -> &'static str {
        "gate"
    }
    fn out_shape(&self, x: &candle_core::Shape, g: &candle_core::Shape) -> Result<candle_core::Shape, BoxError> {
        if x != g {
            return Err(format!("gate: x is {x:?}, g is {g:?}").into());
        }
        Ok(x.clone())
    }
    fn run<T: ferrotile_candle::Float>(
        &self,
        dev: &ferrotile::Device,
        (x, _): (&Buffer<T>, &[usize]),
        (g, _): (&Buffer<T>, &[usize]),
        y: &mut Buffer<T>,
    ) -> Result<(), BoxError> {
        const BLOCK: u32 = 1024;
        let n = x.len();
        gate::launch(dev, LaunchConfig::new([(n as u32).div_ceil(BLOCK), 1, 1]), x, g, y, n as i32, BLOCK as i32)?;
        Ok(())
    }
}

#[test]
fn a_users_kernel_runs_on_candle_tensors() {
    let s = seed();
    let mut rng = Rng::new(s);
    for dev in devices() {
        for dt in DTYPES {
            let (x, xf) = rand_t(&mut rng, &[3, 1001], 2.0, dt, &dev);
            let (g, gf) = rand_t(&mut rng, &[3, 1001], 2.0, dt, &dev);
            poison(&dev, 4 * 3003);
            let y = apply2(&x, &g, Gate).unwrap();
            let want: Vec<f64> = xf.iter().zip(&gf).map(|(x, g)| x / (1.0 + (-g).exp())).collect();
            let e = max_rel_err(&values(&y), &want, 1.0);
            assert!(e <= tol(dt), "gate {dev:?} {dt:?} seed {s}: err {e:e}");
            // (it composes with candle's own ops, in order on one stream;
            // the kernel is deterministic and × 2 exact)
            let z = values(&(apply2(&x, &g, Gate).unwrap() * 2.0).unwrap());
            assert!(z.iter().zip(values(&y)).all(|(z, y)| *z == 2.0 * y), "gate then × 2 on {dev:?} {dt:?}");
        }
    }
}

#[test]
fn bad_inputs_are_candle_errors() {
    for dev in devices() {
        let x = Tensor::zeros((4, 6), DType::F32, &dev).unwrap();
        let e = ferrotile_candle::softmax_last_dim(&x.t().unwrap()).unwrap_err().to_string();
        assert!(e.contains("not contiguous") && e.contains("ferrotile-softmax"), "{e}");
        let e = ferrotile_candle::softmax_last_dim(&x.to_dtype(DType::U32).unwrap()).unwrap_err().to_string();
        assert!(e.contains("U32") && e.contains("not supported"), "{e}");
        let w = Tensor::zeros(5, DType::F32, &dev).unwrap();
        let e = ferrotile_candle::rms_norm(&x, &w, 1e-5).unwrap_err().to_string();
        assert!(e.contains("`w` has shape [5], [6] expected"), "{e}");
        let w16 = Tensor::zeros(6, DType::F16, &dev).unwrap();
        let e = ferrotile_candle::rms_norm(&x, &w16, 1e-5).unwrap_err().to_string();
        assert!(e.contains("argument 2 is F16"), "{e}");
        let b = Tensor::zeros((5, 3), DType::F32, &dev).unwrap();
        let e = ferrotile_candle::matmul(&x, &b).unwrap_err().to_string();
        assert!(e.contains("do not fit"), "{e}");
        let e = ferrotile_candle::softmax_last_dim(&Tensor::new(1.0f32, &dev).unwrap()).unwrap_err().to_string();
        assert!(e.contains("at least one dimension"), "{e}");
    }
}

/// On CUDA the kernels read and write candle's memory itself: the buffer
/// an op sees is at the tensor's own device address.
#[cfg(feature = "cuda")]
#[test]
fn cuda_tensors_are_not_copied() {
    use candle_core::Storage;
    use ferrotile::interop::cudarc::driver::DevicePtr;
    use std::sync::Mutex;
    let Ok(dev) = Device::new_cuda(0) else {
        eprintln!("skipped: no CUDA device");
        return;
    };
    static SEEN: Mutex<Vec<u64>> = Mutex::new(vec![]);
    struct Spy;
    impl ferrotile_candle::Op1 for Spy {
        fn name(&self) -> &'static str {
            "spy"
        }
        fn run<T: Float>(&self, _: &ferrotile::Device, x: &Buffer<T>, _: &[usize], y: &mut Buffer<T>) -> Result<(), BoxError> {
            SEEN.lock().unwrap().extend([x.cuda_ptr().unwrap(), y.cuda_ptr().unwrap()]);
            Ok(())
        }
    }
    let x = Tensor::zeros((8, 8), DType::F32, &dev).unwrap();
    let row = x.narrow(0, 2, 3).unwrap(); // (a view at an offset)
    let y = ferrotile_candle::apply1(&row, Spy).unwrap();
    let ptr_of = |t: &Tensor| -> u64 {
        let (s, l) = t.storage_and_layout();
        let Storage::Cuda(c) = &*s else { panic!("not CUDA") };
        let sl = c.as_cuda_slice::<f32>().unwrap();
        let stream = sl.stream().clone();
        let (p, _g) = sl.device_ptr(&stream);
        p + (l.start_offset() * 4) as u64
    };
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(seen, vec![ptr_of(&row), ptr_of(&y)]);
}
