//! Page-locked host buffers and asynchronous copies: [`PinnedBuffer<T>`]
//! ([`Device::pinned`]) is host memory that [`Buffer::upload`] and
//! [`Buffer::download`] copy from and to *without the host waiting*: on
//! CUDA the copy is queued on the calling thread's stream (see
//! [`crate::Stream`]) and overlaps kernels on other streams. The host side
//! stays safe: reading or writing a pinned buffer ([`PinnedBuffer::to_vec`],
//! [`PinnedBuffer::copy_from_slice`]) and dropping it first wait for the
//! copies queued on it. On the CPU interpreter and wgpu the copies are the
//! synchronous ones and the buffer is ordinary memory.
//!
//! ```
//! # use ferrotile::Device;
//! let dev = Device::best()?;
//! let s = dev.new_stream()?;
//! let host = dev.pinned_from_slice(&[1.0f32, 2.0, 3.0])?;
//! let mut x = dev.zeros::<f32>(3)?;
//! s.scope(|| x.upload(&host))?; // queued on `s`; returns at once on CUDA
//! let mut back = dev.pinned::<f32>(3)?;
//! s.scope(|| x.download(&mut back))?;
//! assert_eq!(back.to_vec()?, vec![1.0, 2.0, 3.0]); // waits for the copies
//! # Ok::<(), ferrotile::Error>(())
//! ```

use crate::element::Element;
use crate::error::{Error, Result};
use crate::runtime::{Buffer, Device, Storage};
use std::marker::PhantomData;

/// Host memory for asynchronous copies: see the [module docs](self).
pub struct PinnedBuffer<T: Element> {
    device: Device,
    mem: Mem,
    len: usize,
    _t: PhantomData<T>,
}

enum Mem {
    /// Ordinary memory (devices whose copies are synchronous).
    Plain(Vec<u8>),
    #[cfg(feature = "cuda")]
    Cuda(crate::runtime::cuda::driver::PinnedMem),
}

impl<T: Element> std::fmt::Debug for PinnedBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuffer<{}>({} elements, {})", T::DTYPE, self.len, self.device.name())
    }
}

fn be(m: String) -> Error {
    Error::Buffer(m)
}

impl Device {
    /// A zero-filled pinned host buffer of `len` elements for this device's
    /// asynchronous copies (on CUDA page-locked memory, which the GPU's
    /// copy engines read and write directly).
    pub fn pinned<T: Element>(&self, len: usize) -> Result<PinnedBuffer<T>> {
        let bytes = len.checked_mul(T::DTYPE.size_bytes()).ok_or_else(|| Error::Buffer(format!("{len} elements overflow")))?;
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            let m = crate::runtime::cuda::driver::PinnedMem::new(c, bytes).map_err(be)?;
            return Ok(PinnedBuffer { device: self.clone(), mem: Mem::Cuda(m), len, _t: PhantomData });
        }
        Ok(PinnedBuffer { device: self.clone(), mem: Mem::Plain(vec![0; bytes]), len, _t: PhantomData })
    }

    /// A pinned host buffer holding `data`.
    pub fn pinned_from_slice<T: Element>(&self, data: &[T]) -> Result<PinnedBuffer<T>> {
        let mut p = self.pinned(data.len())?;
        p.copy_from_slice(data)?;
        Ok(p)
    }
}

impl<T: Element> PinnedBuffer<T> {
    /// Elements in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The device whose copies this buffer serves.
    pub fn device(&self) -> &Device {
        &self.device
    }
    /// The contents, once the copies queued on this buffer are done.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        match &self.mem {
            Mem::Plain(v) => Ok(T::from_le_bytes_slice(v)),
            #[cfg(feature = "cuda")]
            Mem::Cuda(m) => m.with(|b| T::from_le_bytes_slice(b)).map_err(be),
        }
    }
    /// Overwrites the contents (same length), once the copies queued on
    /// this buffer are done.
    pub fn copy_from_slice(&mut self, src: &[T]) -> Result<()> {
        if src.len() != self.len {
            return Err(Error::Buffer(format!("copy of {} elements into a pinned buffer of {}", src.len(), self.len)));
        }
        let bytes = T::to_le_bytes_vec(src);
        match &mut self.mem {
            Mem::Plain(v) => *v = bytes,
            #[cfg(feature = "cuda")]
            Mem::Cuda(m) => m.with_mut(|b| b.copy_from_slice(&bytes)).map_err(be)?,
        }
        Ok(())
    }
    /// Waits until the copies queued on this buffer are done.
    pub fn synchronize(&self) -> Result<()> {
        match &self.mem {
            Mem::Plain(_) => Ok(()),
            #[cfg(feature = "cuda")]
            Mem::Cuda(m) => m.wait().map_err(be),
        }
    }
}

impl<T: Element> Buffer<T> {
    /// Copies `src` (same length, a pinned buffer of this buffer's device)
    /// into this buffer: on CUDA queued on the calling thread's stream, the
    /// host not waiting; elsewhere at once.
    pub fn upload(&mut self, src: &PinnedBuffer<T>) -> Result<()> {
        if src.len != self.len() || !self.device().same(&src.device) {
            return Err(Error::Buffer("upload needs a pinned buffer of equal length for the same device".into()));
        }
        match (&self.mem, &src.mem) {
            #[cfg(feature = "cuda")]
            // (no capture to keep the memory for: uploads refuse captures)
            (Storage::Cuda(d), Mem::Cuda(h)) => d.upload(h).map_err(be),
            (_, Mem::Plain(v)) => self.copy_from_slice(&T::from_le_bytes_slice(v)),
            #[allow(unreachable_patterns)]
            _ => Err(Error::Buffer("upload: pinned memory of another kind of device".into())),
        }
    }

    /// Copies this buffer into `dst` (same length, a pinned buffer of this
    /// buffer's device): on CUDA queued on the calling thread's stream
    /// after the work queued there before, the host not waiting; elsewhere
    /// at once. Read `dst` with [`PinnedBuffer::to_vec`], which waits.
    pub fn download(&self, dst: &mut PinnedBuffer<T>) -> Result<()> {
        if dst.len != self.len() || !self.device().same(&dst.device) {
            return Err(Error::Buffer("download needs a pinned buffer of equal length for the same device".into()));
        }
        match (&self.mem, &mut dst.mem) {
            #[cfg(feature = "cuda")]
            (Storage::Cuda(d), Mem::Cuda(h)) => d.download(h).map_err(be),
            (_, Mem::Plain(v)) => {
                *v = T::to_le_bytes_vec(&self.to_vec()?);
                Ok(())
            }
            #[allow(unreachable_patterns)]
            _ => Err(Error::Buffer("download: pinned memory of another kind of device".into())),
        }
    }
}
