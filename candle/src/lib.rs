//! ferrotile kernels as [candle](https://github.com/huggingface/candle)
//! custom ops: the kernel library's softmax, layer-norm, RMSNorm and GEMM on
//! candle tensors, and a way to run **your own** `#[kernel]`s on them.
//!
//! ```
//! use candle_core::{Device, Tensor};
//! let x = Tensor::new(&[[1.0f32, 2.0, 3.0], [0.0, 0.0, 0.0]], &Device::Cpu)?;
//! let y = ferrotile_candle::softmax_last_dim(&x)?;
//! let y: Vec<Vec<f32>> = y.to_vec2()?;
//! assert!((y[0][2] - 0.665_241).abs() < 1e-5 && (y[1][0] - 1.0 / 3.0).abs() < 1e-6);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! How a tensor reaches a kernel:
//!
//! - **CUDA tensors** (feature `cuda`): without a copy. The tensor's memory
//!   becomes a [`ferrotile::Buffer`] in place
//!   ([`Buffer::from_raw_cuda_ordered`](ferrotile::Buffer)), the output is
//!   allocated by candle's device, and the kernels run on candle's own
//!   stream ([`ferrotile::Stream::from_cudarc`]), so they are ordered with
//!   candle's work and the host never waits. candle and ferrotile share the
//!   device's primary context and the same cudarc.
//! - **CPU tensors**: copied to and from ferrotile's CPU interpreter — the
//!   reference semantics, for tests and for code that runs everywhere, not
//!   for speed.
//!
//! Inputs must be contiguous (`Tensor::contiguous` first) and f32, f16 or
//! bf16, all of one dtype; anything else is a candle error naming the op
//! and the argument. The ops have no backward pass (`apply_op*_no_bwd`).
//!
//! Your own kernels: implement [`Op1`], [`Op2`] or [`Op3`] — a `run` that
//! gets ferrotile buffers on the tensors' device and launches what it
//! likes — and apply it with [`apply1`] / [`apply2`] / [`apply3`]. The
//! library ops below are written that way.

#![warn(missing_docs)]

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Shape, Tensor};
use ferrotile::{Buffer, Device};
use std::sync::OnceLock;

pub use candle_core;
pub use ferrotile;

/// The error of an op's body: ferrotile's [`ferrotile::Error`], the
/// library's `LibError`, or your own.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[cfg(feature = "cuda")]
mod float {
    /// An element type the ops run on: f32, f16 or bf16 (candle and
    /// ferrotile use the same `half` types).
    pub trait Float:
        ferrotile::FloatElement + candle_core::WithDType + candle_core::cuda_backend::CudaDType + ferrotile::interop::cudarc::driver::DeviceRepr
    {
    }
    impl<T> Float for T where
        T: ferrotile::FloatElement + candle_core::WithDType + candle_core::cuda_backend::CudaDType + ferrotile::interop::cudarc::driver::DeviceRepr
    {
    }
}

#[cfg(not(feature = "cuda"))]
mod float {
    /// An element type the ops run on: f32, f16 or bf16 (candle and
    /// ferrotile use the same `half` types).
    pub trait Float: ferrotile::FloatElement + candle_core::WithDType {}
    impl<T> Float for T where T: ferrotile::FloatElement + candle_core::WithDType {}
}

pub use float::Float;

/// A computation on one tensor, written with ferrotile.
pub trait Op1: Send + Sync {
    /// The op's name, in candle's errors.
    fn name(&self) -> &'static str;
    /// The output's shape for an input of shape `x` (default: `x`).
    fn out_shape(&self, x: &Shape) -> Result<Shape, BoxError> {
        Ok(x.clone())
    }
    /// Writes every element of `y` (of [`Op1::out_shape`], row-major;
    /// on CUDA its memory is not initialized) from `x` (contiguous, of
    /// dims `dims`), on `dev` — the tensor's device (or the CPU
    /// interpreter for CPU tensors). Launches go to candle's stream.
    fn run<T: Float>(&self, dev: &Device, x: &Buffer<T>, dims: &[usize], y: &mut Buffer<T>) -> Result<(), BoxError>;
}

/// A computation on two tensors of one dtype, written with ferrotile.
pub trait Op2: Send + Sync {
    /// The op's name, in candle's errors.
    fn name(&self) -> &'static str;
    /// The output's shape for inputs of shapes `a` and `b` (an error
    /// names what does not fit).
    fn out_shape(&self, a: &Shape, b: &Shape) -> Result<Shape, BoxError>;
    /// Writes every element of `out` from `a` and `b` (as [`Op1::run`]).
    fn run<T: Float>(&self, dev: &Device, a: (&Buffer<T>, &[usize]), b: (&Buffer<T>, &[usize]), out: &mut Buffer<T>) -> Result<(), BoxError>;
}

/// A computation on three tensors of one dtype, written with ferrotile.
pub trait Op3: Send + Sync {
    /// The op's name, in candle's errors.
    fn name(&self) -> &'static str;
    /// The output's shape for inputs of shapes `a`, `b` and `c`.
    fn out_shape(&self, a: &Shape, b: &Shape, c: &Shape) -> Result<Shape, BoxError>;
    /// Writes every element of `out` from `a`, `b` and `c` (as
    /// [`Op1::run`]).
    #[allow(clippy::type_complexity)]
    fn run<T: Float>(
        &self,
        dev: &Device,
        a: (&Buffer<T>, &[usize]),
        b: (&Buffer<T>, &[usize]),
        c: (&Buffer<T>, &[usize]),
        out: &mut Buffer<T>,
    ) -> Result<(), BoxError>;
}

/// An [`Op1`] / [`Op2`] / [`Op3`] as candle's `CustomOp1/2/3`.
pub struct Custom<O>(pub O);

/// `op` applied to `x` (no backward pass).
pub fn apply1<O: Op1>(x: &Tensor, op: O) -> candle_core::Result<Tensor> {
    x.apply_op1_no_bwd(&Custom(op))
}

/// `op` applied to `a` and `b` (no backward pass).
pub fn apply2<O: Op2>(a: &Tensor, b: &Tensor, op: O) -> candle_core::Result<Tensor> {
    a.apply_op2_no_bwd(b, &Custom(op))
}

/// `op` applied to `a`, `b` and `c` (no backward pass).
pub fn apply3<O: Op3>(a: &Tensor, b: &Tensor, c: &Tensor, op: O) -> candle_core::Result<Tensor> {
    a.apply_op3_no_bwd(b, c, &Custom(op))
}

fn msg(name: &str, e: impl std::fmt::Display) -> candle_core::Error {
    candle_core::Error::Msg(format!("{name}: {e}"))
}

/// The storage's element range, or an error naming the argument.
fn contiguous(name: &str, what: &str, l: &Layout) -> candle_core::Result<(usize, usize)> {
    l.contiguous_offsets()
        .ok_or_else(|| msg(name, format!("`{what}` is not contiguous (shape {:?}, strides {:?}); call .contiguous() first", l.dims(), l.stride())))
}

fn same_dtype(name: &str, d: &[candle_core::DType]) -> candle_core::Result<candle_core::DType> {
    if let Some(o) = d.iter().position(|x| *x != d[0]) {
        return Err(msg(name, format!("argument {} is {:?}, argument 1 is {:?}: the inputs must have one dtype", o + 1, d[o], d[0])));
    }
    Ok(d[0])
}

/// Runs `$body` with `$t` bound to the Rust type of candle dtype `$d`.
macro_rules! dispatch {
    ($name:expr, $d:expr, $t:ident => $body:expr) => {
        match $d {
            candle_core::DType::F32 => {
                type $t = f32;
                $body
            }
            candle_core::DType::F16 => {
                type $t = half::f16;
                $body
            }
            candle_core::DType::BF16 => {
                type $t = half::bf16;
                $body
            }
            d => Err(msg($name, format!("dtype {d:?} is not supported (f32, f16 or bf16)"))),
        }
    };
}

fn cpu_device() -> &'static Device {
    static D: OnceLock<Device> = OnceLock::new();
    D.get_or_init(Device::cpu)
}

/// The CPU side: inputs copied into the interpreter's buffers, the output
/// copied back.
mod cpu {
    use super::*;

    pub fn input<T: Float>(name: &str, what: &str, s: &CpuStorage, l: &Layout) -> candle_core::Result<Buffer<T>> {
        let (a, b) = contiguous(name, what, l)?;
        let v = T::cpu_storage_as_slice(s)?;
        cpu_device().from_slice(&v[a..b]).map_err(|e| msg(name, e))
    }

    pub fn output<T: Float>(name: &str, shape: &Shape) -> candle_core::Result<Buffer<T>> {
        cpu_device().zeros::<T>(shape.elem_count()).map_err(|e| msg(name, e))
    }

    pub fn finish<T: Float>(name: &str, y: Buffer<T>, shape: Shape) -> candle_core::Result<(CpuStorage, Shape)> {
        Ok((T::to_cpu_storage_owned(y.to_vec().map_err(|e| msg(name, e))?), shape))
    }
}

/// The CUDA side: tensors' memory as buffers in place, the output
/// allocated by candle, the work on candle's stream.
#[cfg(feature = "cuda")]
mod cuda {
    use super::*;
    use candle_core::{CudaDevice, CudaStorage};
    use ferrotile::interop::cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    /// ferrotile's device for a CUDA ordinal, opened once.
    fn device(ordinal: usize) -> ferrotile::Result<Device> {
        static D: OnceLock<Mutex<HashMap<usize, Device>>> = OnceLock::new();
        let mut m = D.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = m.get(&ordinal) {
            return Ok(d.clone());
        }
        let d = Device::cuda(ordinal)?;
        m.insert(ordinal, d.clone());
        Ok(d)
    }

    /// What one op's call works with.
    pub struct Ctx {
        pub cdev: CudaDevice,
        pub cstream: Arc<CudaStream>,
        pub dev: Device,
        pub stream: ferrotile::Stream,
    }

    pub fn ctx(name: &str, s: &CudaStorage) -> candle_core::Result<Ctx> {
        let cdev = s.device().clone();
        let cstream = cdev.cuda_stream();
        let dev = device(cstream.context().ordinal()).map_err(|e| msg(name, e))?;
        let stream = ferrotile::Stream::from_cudarc(&dev, &cstream).map_err(|e| msg(name, e))?;
        Ok(Ctx { cdev, cstream, dev, stream })
    }

    /// `s`'s elements as a buffer, in place.
    pub fn input<T: Float>(name: &str, what: &str, cx: &Ctx, s: &CudaStorage, l: &Layout) -> candle_core::Result<Buffer<T>> {
        let (a, b) = contiguous(name, what, l)?;
        let slice = s.as_cuda_slice::<T>()?;
        // (taken on candle's stream, where the kernels go: with cudarc's
        // event tracking that stream first waits for the tensor's writers
        // on other streams; [`finish`] records the kernels' reads after
        // them)
        let (base, _read) = slice.device_ptr(&cx.cstream);
        let ptr = base + (a * std::mem::size_of::<T>()) as u64;
        // SAFETY: `a..b` lies in the slice (candle's layout); the tensor
        // outlives the op, and candle frees its memory stream-ordered on
        // `cstream`, after the kernels queued there.
        unsafe { Buffer::from_raw_cuda_ordered(&cx.dev, ptr, b - a) }.map_err(|e| msg(name, e))
    }

    /// The output, allocated by candle on its stream (not initialized).
    pub fn output<T: Float>(name: &str, cx: &Ctx, shape: &Shape) -> candle_core::Result<(CudaSlice<T>, Buffer<T>)> {
        let n = shape.elem_count();
        // SAFETY: every element is written by the op before it is read
        // (`Op*::run`'s contract).
        let mut out = unsafe { cx.cdev.alloc::<T>(n) }?;
        let ptr = {
            let (p, _write) = out.device_ptr_mut(&cx.cstream);
            p
        };
        // SAFETY: `out` holds `n` elements at `ptr`, is returned to candle
        // as the output tensor and freed stream-ordered on `cstream`.
        let buf = unsafe { Buffer::from_raw_cuda_ordered(&cx.dev, ptr, n) }.map_err(|e| msg(name, e))?;
        Ok((out, buf))
    }

    /// The output as candle storage, once the kernels are queued: their
    /// reads of `inputs` and write of `out` are recorded on candle's stream
    /// after them (cudarc's events), so work on other streams that uses
    /// these tensors waits for the kernels, not just for their queueing.
    pub fn finish<T: Float>(cx: Ctx, inputs: &[&CudaStorage], mut out: CudaSlice<T>, shape: Shape) -> candle_core::Result<(CudaStorage, Shape)> {
        for s in inputs {
            drop(s.as_cuda_slice::<T>()?.device_ptr(&cx.cstream));
        }
        drop(out.device_ptr_mut(&cx.cstream));
        Ok((CudaStorage::wrap_cuda_slice(out, cx.cdev), shape))
    }
}

fn boxed(name: &str, r: Result<Shape, BoxError>) -> candle_core::Result<Shape> {
    r.map_err(|e| msg(name, e))
}

impl<O: Op1> CustomOp1 for Custom<O> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let name = self.0.name();
        let shape = boxed(name, self.0.out_shape(l.shape()))?;
        dispatch!(name, s.dtype(), T => {
            let x = cpu::input::<T>(name, "x", s, l)?;
            let mut y = cpu::output::<T>(name, &shape)?;
            self.0.run(cpu_device(), &x, l.dims(), &mut y).map_err(|e| msg(name, e))?;
            cpu::finish(name, y, shape)
        })
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, s: &candle_core::CudaStorage, l: &Layout) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let name = self.0.name();
        let shape = boxed(name, self.0.out_shape(l.shape()))?;
        let cx = cuda::ctx(name, s)?;
        dispatch!(name, s.dtype(), T => {
            let x = cuda::input::<T>(name, "x", &cx, s, l)?;
            let (out, mut y) = cuda::output::<T>(name, &cx, &shape)?;
            cx.stream.scope(|| self.0.run(&cx.dev, &x, l.dims(), &mut y)).map_err(|e| msg(name, e))?;
            cuda::finish(cx, &[s], out, shape)
        })
    }
}

impl<O: Op2> CustomOp2 for Custom<O> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let name = self.0.name();
        let shape = boxed(name, self.0.out_shape(l1.shape(), l2.shape()))?;
        dispatch!(name, same_dtype(name, &[s1.dtype(), s2.dtype()])?, T => {
            let a = cpu::input::<T>(name, "a", s1, l1)?;
            let b = cpu::input::<T>(name, "b", s2, l2)?;
            let mut y = cpu::output::<T>(name, &shape)?;
            self.0.run(cpu_device(), (&a, l1.dims()), (&b, l2.dims()), &mut y).map_err(|e| msg(name, e))?;
            cpu::finish(name, y, shape)
        })
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let name = self.0.name();
        let shape = boxed(name, self.0.out_shape(l1.shape(), l2.shape()))?;
        let cx = cuda::ctx(name, s1)?;
        dispatch!(name, same_dtype(name, &[s1.dtype(), s2.dtype()])?, T => {
            let a = cuda::input::<T>(name, "a", &cx, s1, l1)?;
            let b = cuda::input::<T>(name, "b", &cx, s2, l2)?;
            let (out, mut y) = cuda::output::<T>(name, &cx, &shape)?;
            cx.stream.scope(|| self.0.run(&cx.dev, (&a, l1.dims()), (&b, l2.dims()), &mut y)).map_err(|e| msg(name, e))?;
            cuda::finish(cx, &[s1, s2], out, shape)
        })
    }
}

impl<O: Op3> CustomOp3 for Custom<O> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout, s3: &CpuStorage, l3: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let name = self.0.name();
        let shape = boxed(name, self.0.out_shape(l1.shape(), l2.shape(), l3.shape()))?;
        dispatch!(name, same_dtype(name, &[s1.dtype(), s2.dtype(), s3.dtype()])?, T => {
            let a = cpu::input::<T>(name, "a", s1, l1)?;
            let b = cpu::input::<T>(name, "b", s2, l2)?;
            let c = cpu::input::<T>(name, "c", s3, l3)?;
            let mut y = cpu::output::<T>(name, &shape)?;
            self.0.run(cpu_device(), (&a, l1.dims()), (&b, l2.dims()), (&c, l3.dims()), &mut y).map_err(|e| msg(name, e))?;
            cpu::finish(name, y, shape)
        })
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        let name = self.0.name();
        let shape = boxed(name, self.0.out_shape(l1.shape(), l2.shape(), l3.shape()))?;
        let cx = cuda::ctx(name, s1)?;
        dispatch!(name, same_dtype(name, &[s1.dtype(), s2.dtype(), s3.dtype()])?, T => {
            let a = cuda::input::<T>(name, "a", &cx, s1, l1)?;
            let b = cuda::input::<T>(name, "b", &cx, s2, l2)?;
            let c = cuda::input::<T>(name, "c", &cx, s3, l3)?;
            let (out, mut y) = cuda::output::<T>(name, &cx, &shape)?;
            cx.stream
                .scope(|| self.0.run(&cx.dev, (&a, l1.dims()), (&b, l2.dims()), (&c, l3.dims()), &mut y))
                .map_err(|e| msg(name, e))?;
            cuda::finish(cx, &[s1, s2, s3], out, shape)
        })
    }
}

/// `(rows, cols)` of a row-wise op over the last dimension.
fn rows_cols(dims: &[usize]) -> Result<(usize, usize), BoxError> {
    let (&cols, rest) = dims.split_last().ok_or("needs at least one dimension")?;
    Ok((rest.iter().product(), cols))
}

/// Softmax over the last dimension (`ferrotile_kernels::softmax`).
pub struct Softmax;

impl Op1 for Softmax {
    fn name(&self) -> &'static str {
        "ferrotile-softmax"
    }
    fn out_shape(&self, x: &Shape) -> Result<Shape, BoxError> {
        rows_cols(x.dims())?;
        Ok(x.clone())
    }
    fn run<T: Float>(&self, dev: &Device, x: &Buffer<T>, dims: &[usize], y: &mut Buffer<T>) -> Result<(), BoxError> {
        let (rows, cols) = rows_cols(dims)?;
        Ok(ferrotile_kernels::softmax(dev, x, y, rows, cols)?)
    }
}

/// Softmax over the last dimension of `x`, by ferrotile's library kernel.
pub fn softmax_last_dim(x: &Tensor) -> candle_core::Result<Tensor> {
    apply1(x, Softmax)
}

/// RMSNorm over the last dimension: `x / sqrt(mean(x²) + eps) · w`
/// (`ferrotile_kernels::rms_norm`); inputs `(x, w)`, `w` of the last
/// dimension's length.
pub struct RmsNorm {
    /// Added to the mean square.
    pub eps: f32,
}

/// An error unless `w` is `[cols]` for a row op over `x`.
fn per_column(op: &str, what: &str, x: &Shape, w: &Shape) -> Result<(), BoxError> {
    let (_, cols) = rows_cols(x.dims())?;
    if w.dims() != [cols] {
        return Err(format!("{op}: `{what}` has shape {:?}, [{cols}] expected (the last dimension of x {:?})", w.dims(), x.dims()).into());
    }
    Ok(())
}

impl Op2 for RmsNorm {
    fn name(&self) -> &'static str {
        "ferrotile-rms-norm"
    }
    fn out_shape(&self, x: &Shape, w: &Shape) -> Result<Shape, BoxError> {
        per_column("rms_norm", "w", x, w)?;
        Ok(x.clone())
    }
    fn run<T: Float>(&self, dev: &Device, (x, dims): (&Buffer<T>, &[usize]), (w, _): (&Buffer<T>, &[usize]), y: &mut Buffer<T>) -> Result<(), BoxError> {
        let (rows, cols) = rows_cols(dims)?;
        Ok(ferrotile_kernels::rms_norm(dev, x, w, y, rows, cols, self.eps)?)
    }
}

/// RMSNorm of `x` over its last dimension, scaled by `w`.
pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> candle_core::Result<Tensor> {
    apply2(x, w, RmsNorm { eps })
}

/// Layer normalization over the last dimension, `(x − mean) /
/// sqrt(var + eps) · w + b` (`ferrotile_kernels::layer_norm`); inputs
/// `(x, w, b)`.
pub struct LayerNorm {
    /// Added to the variance.
    pub eps: f32,
}

impl Op3 for LayerNorm {
    fn name(&self) -> &'static str {
        "ferrotile-layer-norm"
    }
    fn out_shape(&self, x: &Shape, w: &Shape, b: &Shape) -> Result<Shape, BoxError> {
        per_column("layer_norm", "w", x, w)?;
        per_column("layer_norm", "b", x, b)?;
        Ok(x.clone())
    }
    fn run<T: Float>(
        &self,
        dev: &Device,
        (x, dims): (&Buffer<T>, &[usize]),
        (w, _): (&Buffer<T>, &[usize]),
        (b, _): (&Buffer<T>, &[usize]),
        y: &mut Buffer<T>,
    ) -> Result<(), BoxError> {
        let (rows, cols) = rows_cols(dims)?;
        Ok(ferrotile_kernels::layer_norm(dev, x, w, b, y, rows, cols, self.eps)?)
    }
}

/// Layer normalization of `x` over its last dimension, with weight `w`
/// and bias `b`.
pub fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor, eps: f32) -> candle_core::Result<Tensor> {
    apply3(x, w, b, LayerNorm { eps })
}

/// Matrix product `a · b` of `[.., m, k]` and `[.., k, n]` with equal
/// leading (batch) dimensions, by the library GEMM (f32 accumulation;
/// f32 inputs exactly, not tf32).
pub struct Matmul;

/// `(batch, m, k, n)` of a product, or an error naming the mismatch.
fn mkn(a: &[usize], b: &[usize]) -> Result<(usize, usize, usize, usize), BoxError> {
    if a.len() < 2 || a.len() != b.len() {
        return Err(format!("matmul: shapes {a:?} and {b:?}: both [.., m, k] · [.., k, n] of one rank ≥ 2 (no broadcasting)").into());
    }
    let r = a.len();
    if a[..r - 2] != b[..r - 2] || a[r - 1] != b[r - 2] {
        return Err(format!("matmul: shapes {a:?} and {b:?} do not fit [.., m, k] · [.., k, n]").into());
    }
    Ok((a[..r - 2].iter().product(), a[r - 2], a[r - 1], b[r - 1]))
}

impl Op2 for Matmul {
    fn name(&self) -> &'static str {
        "ferrotile-matmul"
    }
    fn out_shape(&self, a: &Shape, b: &Shape) -> Result<Shape, BoxError> {
        let (_, _, _, n) = mkn(a.dims(), b.dims())?;
        let mut d = a.dims().to_vec();
        *d.last_mut().expect("rank ≥ 2") = n;
        Ok(Shape::from(d))
    }
    fn run<T: Float>(&self, dev: &Device, (a, ad): (&Buffer<T>, &[usize]), (b, bd): (&Buffer<T>, &[usize]), c: &mut Buffer<T>) -> Result<(), BoxError> {
        let (batch, m, k, n) = mkn(ad, bd)?;
        if batch == 0 || m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            // (an empty sum: zeros — the output is not initialized on CUDA)
            return Ok(dev.zeros::<T>(c.len())?.copy_to(c)?);
        }
        let opts = ferrotile_kernels::gemm::GemmOptions { batch, ..Default::default() };
        Ok(ferrotile_kernels::gemm::gemm(dev, a, b, c, m, n, k, &opts)?)
    }
}

/// `a · b` by ferrotile's library GEMM.
pub fn matmul(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    apply2(a, b, Matmul)
}
