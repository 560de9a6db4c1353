//! Buffers: [`Buffer<T>`] is a typed 1-D array on one device; [`Storage`]
//! says where its bytes live (the interpreter's host memory, CUDA device
//! memory, a wgpu buffer). Kernels see a buffer as a `Ptr<T>`; shapes and
//! strides are the kernel's business. Reads back and writes are checked
//! against the length: a mismatch is an error, never a short copy.

use crate::element::Element;
use crate::error::{Error, Result};
use crate::runtime::Device;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::interp::HostMem;

/// Where a buffer's bytes live.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub enum Storage {
    Host(Arc<HostMem>),
    #[cfg(feature = "cuda")]
    Cuda(Arc<crate::runtime::cuda::driver::DevMem>),
    #[cfg(feature = "wgpu")]
    Wgpu(Arc<crate::runtime::webgpu::driver::WgpuMem>),
}

impl Storage {
    /// Bytes of memory behind this storage: what bounds every access, whatever
    /// length an argument claims.
    pub fn bytes(&self) -> usize {
        match self {
            Storage::Host(h) => h.data.read().map(|g| g.len()).unwrap_or_else(|g| g.into_inner().len()),
            #[cfg(feature = "cuda")]
            Storage::Cuda(m) => m.bytes,
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(m) => m.bytes,
        }
    }
}

/// A 1-D array of `T` on a [`Device`]. Kernels see it as a `Ptr<T>`; shapes
/// and strides are the kernel's business (passed as scalars or via views).
#[derive(Debug)]
pub struct Buffer<T: Element> {
    device: Device,
    pub(crate) mem: Storage,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Element> Buffer<T> {
    pub(crate) fn new(device: Device, mem: Storage, len: usize) -> Self {
        Buffer { device, mem, len, _t: PhantomData }
    }
    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device the buffer lives on.
    pub fn device(&self) -> &Device {
        &self.device
    }
    /// Copy the contents back to the host (waits for queued device work).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        match &self.mem {
            Storage::Host(h) => {
                let d = h.data.read().map_err(|_| Error::Buffer("buffer lock poisoned".into()))?;
                Ok(T::from_le_bytes_slice(&d))
            }
            #[cfg(feature = "cuda")]
            Storage::Cuda(m) => Ok(T::from_le_bytes_slice(&m.dtoh().map_err(Error::Buffer)?)),
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(m) => Ok(T::from_le_bytes_slice(&m.dtoh().map_err(Error::Buffer)?)),
        }
    }
    /// Copy all elements into `dst` (same length, same device), on the device.
    pub fn copy_to(&self, dst: &mut Buffer<T>) -> Result<()> {
        if dst.len != self.len || !self.device.same(&dst.device) {
            return Err(Error::Buffer("copy_to needs buffers of equal length on one device".into()));
        }
        match (&self.mem, &dst.mem) {
            (Storage::Host(a), Storage::Host(b)) => {
                let v = a.data.read().map_err(|_| Error::Buffer("buffer lock poisoned".into()))?.clone();
                *b.data.write().map_err(|_| Error::Buffer("buffer lock poisoned".into()))? = v;
                Ok(())
            }
            #[cfg(feature = "cuda")]
            (Storage::Cuda(a), Storage::Cuda(b)) => {
                a.device().keep_alive(a);
                a.device().keep_alive(b);
                b.copy_from(a).map_err(Error::Buffer)
            }
            #[cfg(feature = "wgpu")]
            (Storage::Wgpu(a), Storage::Wgpu(b)) => b.copy_from(a).map_err(Error::Buffer),
            #[allow(unreachable_patterns)]
            _ => Err(Error::Buffer("copy_to across devices".into())),
        }
    }
    /// Overwrite the contents from the host; lengths must match.
    pub fn copy_from_slice(&mut self, src: &[T]) -> Result<()> {
        if src.len() != self.len {
            return Err(Error::Buffer(format!("copy of {} elements into a buffer of {}", src.len(), self.len)));
        }
        match &self.mem {
            Storage::Host(h) => {
                let mut d = h.data.write().map_err(|_| Error::Buffer("buffer lock poisoned".into()))?;
                *d = T::to_le_bytes_vec(src);
                Ok(())
            }
            #[cfg(feature = "cuda")]
            Storage::Cuda(m) => m.htod(&T::to_le_bytes_vec(src)).map_err(Error::Buffer),
            #[cfg(feature = "wgpu")]
            Storage::Wgpu(m) => m.htod(&T::to_le_bytes_vec(src)).map_err(Error::Buffer),
        }
    }
}
