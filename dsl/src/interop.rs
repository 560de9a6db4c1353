//! Zero-copy interop with [cudarc](https://docs.rs/cudarc) (feature `cuda`):
//! the crate candle, burn's CUDA backend and hand-written CUDA code in Rust
//! build on. ferrotile runs on the device's *primary* context, the one
//! `cudarc::driver::CudaContext::new(ordinal)` retains, so memory and
//! streams pass between the two without copies:
//!
//! - [`Buffer::from_cudarc`] takes a `CudaSlice<T>` over as a buffer
//!   (ferrotile's kernels read and write it in place; the slice frees itself
//!   when the buffer goes), and [`Buffer::into_cudarc`] gives it back;
//! - [`Buffer::as_cudarc`] lends any CUDA buffer to cudarc as a
//!   `CudaSlice<T>` for the length of a borrow (cuBLAS, your kernels);
//! - [`Stream::from_cudarc`] runs ferrotile's work on a cudarc stream
//!   ([`Stream::scope`]), ordered with what cudarc queues there;
//! - [`Buffer::from_raw_cuda`] (and [`Buffer::from_raw_cuda_ordered`],
//!   whose drop leaves the ordering to the caller) / [`Buffer::cuda_ptr`] and
//!   [`Stream::from_raw_cuda`] / [`Stream::raw_cuda`] do the same with raw
//!   handles, for other CUDA libraries.
//!
//! `ferrotile::interop::cudarc` is the cudarc ferrotile is built with.
//!
//! Hand-overs between different streams synchronize (the host waits for
//! the giver's work), so a buffer is never used by both sides at once;
//! sharing one stream ([`Stream::from_cudarc`]) orders the work on the
//! device instead.

/// The cudarc this build uses (its version is the one to use with these
/// functions; taking it from here keeps the two in step).
pub use cudarc;

use crate::element::Element;
use crate::error::{Error, Result};
use crate::runtime::cuda::driver::{DevMem, Owner};
use crate::runtime::{Buffer, Device, Storage, Stream};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DeviceRepr};
use std::sync::Arc;

// SAFETY: one-byte plain values, any bit pattern valid (as cudarc's own u8).
unsafe impl DeviceRepr for crate::f8e4m3 {}
unsafe impl DeviceRepr for crate::f8e5m2 {}

fn be(m: impl std::fmt::Display) -> Error {
    Error::Backend { kernel: String::new(), msg: m.to_string() }
}

fn cuda_of(dev: &Device) -> Result<&Arc<crate::runtime::cuda::driver::CudaDevice>> {
    dev.cuda.as_ref().ok_or_else(|| Error::DeviceUnavailable(format!("cudarc interop needs a CUDA device, not {}", dev.name())))
}

/// An error unless `ctx` is `dev`'s primary context.
fn same_context(dev: &Device, ctx: &Arc<CudaContext>, what: &str) -> Result<()> {
    let c = cuda_of(dev)?;
    if ctx.cu_ctx() != c.raw_context() {
        return Err(Error::Buffer(format!(
            "{what}: the cudarc object lives in another CUDA context than {}'s primary context (make it with CudaContext::new({}))",
            dev.name(),
            c.ordinal
        )));
    }
    Ok(())
}

impl Device {
    /// The cudarc context of this CUDA device: its primary context, the
    /// one ferrotile uses (so slices and streams made from it pass to
    /// ferrotile without copies). An error on other devices.
    pub fn cudarc_context(&self) -> Result<Arc<CudaContext>> {
        let c = cuda_of(self)?;
        CudaContext::new(c.ordinal).map_err(be)
    }
}

impl Stream {
    /// A cudarc stream as a ferrotile [`Stream`] (kept alive by it): inside
    /// [`Stream::scope`], ferrotile's launches and the library's calls go to
    /// the cudarc stream, in order with cudarc's work there. An error if the
    /// stream is not of `dev`'s primary context.
    pub fn from_cudarc(dev: &Device, stream: &Arc<CudaStream>) -> Result<Stream> {
        same_context(dev, stream.context(), "Stream::from_cudarc")?;
        // SAFETY: the Arc handed over keeps the stream alive as long as
        // the wrapper.
        unsafe { Stream::wrap_cuda(dev, stream.cu_stream(), Some(Box::new(stream.clone()))) }
    }
}

impl<T: Element> Buffer<T> {
    /// The device address of a CUDA buffer's first element (`None` on other
    /// devices), valid while the buffer lives; for handing the buffer to
    /// other CUDA code. Work queued by ferrotile on it may still be running:
    /// synchronize (or order by a [`crate::Event`]) first.
    pub fn cuda_ptr(&self) -> Option<u64> {
        match &self.mem {
            Storage::Cuda(m) => Some(m.ptr),
            _ => None,
        }
    }

    /// `len` elements of device memory at `ptr`, as a buffer of `dev`; the
    /// caller owns the memory and may free it once the buffer is dropped
    /// (the drop waits for ferrotile's work queued on it). An error on a
    /// device that is not CUDA or for a misaligned address.
    ///
    /// # Safety
    /// `ptr .. ptr + len·size_of::<T>()` is memory of `dev`'s context
    /// (device or managed), alive and not freed while the buffer (or a
    /// graph that captured it) lives.
    pub unsafe fn from_raw_cuda(dev: &Device, ptr: u64, len: usize) -> Result<Buffer<T>> {
        // SAFETY: the caller's promise.
        unsafe { Self::raw_cuda(dev, ptr, len, Owner::Caller, "Buffer::from_raw_cuda") }
    }

    /// As [`Buffer::from_raw_cuda`], but dropping the buffer does not wait
    /// for ferrotile's work on it: for memory whose release the caller
    /// orders after that work on the device — a framework's tensor, freed
    /// stream-ordered (`cuMemFreeAsync`, as cudarc's `CudaSlice` does) on
    /// the stream ferrotile's work went to ([`Stream::from_cudarc`] +
    /// [`Stream::scope`]). No host synchronization per hand-over: what the
    /// candle integration (`ferrotile-candle`) uses for its tensors.
    ///
    /// # Safety
    /// As [`Buffer::from_raw_cuda`]; and the memory is not freed or reused
    /// before the work ferrotile queued on it while the buffer lived has
    /// finished on the device (stream order or an explicit wait).
    pub unsafe fn from_raw_cuda_ordered(dev: &Device, ptr: u64, len: usize) -> Result<Buffer<T>> {
        // SAFETY: the caller's promise.
        unsafe { Self::raw_cuda(dev, ptr, len, Owner::Ordered, "Buffer::from_raw_cuda_ordered") }
    }

    /// The two constructors above: `len` elements at `ptr`, checked for
    /// alignment and size, freed (or not) as `owner` says.
    ///
    /// # Safety
    /// As [`Buffer::from_raw_cuda`] (and `from_raw_cuda_ordered` for
    /// [`Owner::Ordered`]).
    unsafe fn raw_cuda(dev: &Device, ptr: u64, len: usize, owner: Owner, what: &str) -> Result<Buffer<T>> {
        let c = cuda_of(dev)?;
        if !ptr.is_multiple_of(T::DTYPE.size_bytes().max(1) as u64) {
            return Err(Error::Buffer(format!("{what}: address {ptr:#x} is not aligned to {}", T::DTYPE)));
        }
        let bytes = len.checked_mul(T::DTYPE.size_bytes()).ok_or_else(|| Error::Buffer(format!("{len} elements overflow")))?;
        // SAFETY: the caller's promise, passed on.
        let m = unsafe { DevMem::foreign(c, ptr, bytes, owner) };
        Ok(Buffer::new(dev.clone(), Storage::Cuda(Arc::new(m)), len))
    }
}

impl<T: Element + DeviceRepr> Buffer<T> {
    /// Takes a cudarc slice over as a buffer of `dev`, without a copy. The
    /// slice's pending work (on its stream) is waited for first; when the
    /// buffer goes, the slice is dropped after ferrotile's work on it (and
    /// frees itself). An error if the slice is not of `dev`'s primary
    /// context.
    pub fn from_cudarc(dev: &Device, slice: CudaSlice<T>) -> Result<Buffer<T>> {
        let c = cuda_of(dev)?;
        same_context(dev, slice.context(), "Buffer::from_cudarc")?;
        slice.stream().synchronize().map_err(be)?;
        let len = slice.len();
        let ptr = {
            let (p, _record) = slice.device_ptr(slice.stream());
            p
        };
        c.bind().map_err(be)?;
        // SAFETY: the slice (moved into the buffer) owns the memory and is
        // dropped only when the buffer's memory is.
        let m = unsafe { DevMem::foreign(c, ptr, len * T::DTYPE.size_bytes(), Owner::Handle(Box::new(slice))) };
        Ok(Buffer::new(dev.clone(), Storage::Cuda(Arc::new(m)), len))
    }

    /// Gives a buffer made by [`Buffer::from_cudarc`] back as its slice,
    /// after ferrotile's work on it is done. An error for other buffers
    /// (use [`Buffer::as_cudarc`]) and while a graph still holds the buffer
    /// (the buffer is consumed either way).
    pub fn into_cudarc(self) -> Result<CudaSlice<T>> {
        let Storage::Cuda(m) = self.mem else {
            return Err(Error::Buffer("Buffer::into_cudarc: not a CUDA buffer".into()));
        };
        let m = Arc::try_unwrap(m).map_err(|_| Error::Buffer("Buffer::into_cudarc: the buffer's memory is still shared (a captured graph holds it)".into()))?;
        if !m.is_handle() {
            // (not a handle: put it back as it was — dropping `m` frees
            // runtime memory as the buffer would have)
            return Err(Error::Buffer(
                "Buffer::into_cudarc: only buffers made by Buffer::from_cudarc go back as a CudaSlice (lend others with as_cudarc)".into(),
            ));
        }
        let h = m.release().ok_or_else(|| Error::Buffer("Buffer::into_cudarc: no slice".into()))?;
        h.downcast::<CudaSlice<T>>().map(|b| *b).map_err(|_| Error::Buffer("Buffer::into_cudarc: the slice has another element type".into()))
    }

    /// Lends this CUDA buffer to cudarc as a `CudaSlice<T>` on `stream`,
    /// without a copy, for as long as the returned guard lives (it derefs to
    /// the slice; dropping it never frees the buffer's memory). ferrotile's
    /// queued work on the buffer is waited for first, and cudarc's work on
    /// `stream` when the guard drops. An error for a buffer that is not on
    /// CUDA or a stream of another context.
    pub fn as_cudarc(&mut self, stream: &Arc<CudaStream>) -> Result<CudaLoan<'_, T>> {
        let Storage::Cuda(m) = &self.mem else {
            return Err(Error::Buffer(format!("Buffer::as_cudarc: a buffer of {}, not CUDA", self.device().name())));
        };
        same_context(self.device(), stream.context(), "Buffer::as_cudarc")?;
        self.device().synchronize()?;
        // SAFETY: the memory is valid for `len` elements while `self` is
        // borrowed; the loan leaks the slice on drop, so cudarc never frees
        // it.
        let slice = unsafe { stream.upgrade_device_ptr::<T>(m.ptr, self.len()) };
        Ok(CudaLoan { slice: Some(slice), stream: stream.clone(), _buf: std::marker::PhantomData })
    }
}

/// A ferrotile buffer lent to cudarc ([`Buffer::as_cudarc`]): derefs to a
/// `CudaSlice<T>`; on drop waits for the stream's work and gives the
/// memory back without freeing it.
pub struct CudaLoan<'a, T> {
    slice: Option<CudaSlice<T>>,
    stream: Arc<CudaStream>,
    _buf: std::marker::PhantomData<&'a mut ()>,
}

impl<T> std::ops::Deref for CudaLoan<'_, T> {
    type Target = CudaSlice<T>;
    fn deref(&self) -> &CudaSlice<T> {
        self.slice.as_ref().expect("loaned slice")
    }
}

impl<T> std::ops::DerefMut for CudaLoan<'_, T> {
    fn deref_mut(&mut self) -> &mut CudaSlice<T> {
        self.slice.as_mut().expect("loaned slice")
    }
}

impl<T> Drop for CudaLoan<'_, T> {
    fn drop(&mut self) {
        let _ = self.stream.synchronize();
        if let Some(s) = self.slice.take() {
            // (the memory is the buffer's: not freed here)
            let _ = s.leak();
        }
    }
}
