//! Streams and events: ordering device work, overlapping independent work,
//! and sharing a stream with another library.
//!
//! Work on one device goes to its default stream, in queue order. A
//! [`Stream`] is another queue: inside [`Stream::scope`], everything the
//! calling thread queues on the stream's device — launches, the library's
//! calls (which may launch several kernels), device-to-device copies, graph
//! replays, [`Device::time_ms`] — goes to that stream, in order there, and
//! unordered against other streams unless an [`Event`] orders it
//! ([`Stream::record`], [`Stream::wait`]). Host copies (`from_slice`,
//! `to_vec`, `copy_from_slice`) stay synchronous and safe: reading a buffer
//! back, freeing it, and [`Device::synchronize`] wait for *every* stream of
//! the device, so no buffer is read or freed while queued work may still
//! use it. Two streams writing one buffer without an event between them
//! race, as in CUDA; that gives wrong values, never host memory unsafety.
//!
//! On CUDA a stream is a CUDA stream; it can be one the caller made
//! elsewhere ([`Stream::from_raw_cuda`], or with the `cudarc` interop
//! [`crate::interop`]). The CPU interpreter and wgpu have one queue each,
//! whose work already runs in order: their streams are that queue (scopes,
//! events and waits keep their meaning, and cost nothing).

use crate::error::{Error, Result};
use crate::runtime::Device;
use std::sync::Arc;

fn be(m: String) -> Error {
    Error::Backend { kernel: String::new(), msg: m }
}

/// A queue of device work: see the [module docs](self).
#[derive(Clone, Debug)]
pub struct Stream {
    device: Device,
    inner: Inner,
}

#[derive(Clone, Debug)]
enum Inner {
    /// The device's one queue (CPU interpreter, wgpu).
    Queue,
    #[cfg(feature = "cuda")]
    Cuda(Arc<crate::runtime::cuda::driver::StreamInner>),
}

/// A point in a stream's work: recorded by [`Stream::record`], waited for
/// by another stream ([`Stream::wait`]) or the host ([`Event::synchronize`]),
/// and timed against another event ([`Event::elapsed_ms`]).
#[derive(Clone, Debug)]
pub struct Event {
    inner: EventInner,
}

#[derive(Clone, Debug)]
enum EventInner {
    /// On a device with one queue: the host time of the record, after the
    /// queue drained (work before it is done).
    Done(std::time::Instant),
    #[cfg(feature = "cuda")]
    Cuda(Arc<crate::runtime::cuda::driver::Event>, Arc<crate::runtime::cuda::driver::CudaDevice>),
}

impl Device {
    /// A new stream on this device (on CUDA a new CUDA stream; elsewhere the
    /// device's one queue).
    ///
    /// ```
    /// # use ferrotile::prelude::*;
    /// let dev = Device::cpu();
    /// let s = dev.new_stream()?;
    /// let x = dev.from_slice(&[1.0f32, 2.0])?;
    /// let mut y = dev.zeros::<f32>(2)?;
    /// s.scope(|| x.copy_to(&mut y))?; // queued on `s`
    /// s.synchronize()?;
    /// assert_eq!(y.to_vec()?, vec![1.0, 2.0]);
    /// # Ok::<(), ferrotile::Error>(())
    /// ```
    pub fn new_stream(&self) -> Result<Stream> {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            return Ok(Stream { device: self.clone(), inner: Inner::Cuda(c.new_stream().map_err(be)?) });
        }
        Ok(Stream { device: self.clone(), inner: Inner::Queue })
    }
}

impl Stream {
    /// The device the stream belongs to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Runs `f` with this stream as the calling thread's stream for its
    /// device: the device work `f` queues goes here. Scopes nest (the
    /// innermost wins) and end when `f` returns or panics; other threads
    /// are not affected.
    pub fn scope<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.inner {
            Inner::Queue => f(),
            #[cfg(feature = "cuda")]
            Inner::Cuda(s) => crate::runtime::cuda::driver::CudaDevice::scoped(s, f),
        }
    }

    /// Waits on the host until the work queued on this stream is done.
    pub fn synchronize(&self) -> Result<()> {
        match &self.inner {
            Inner::Queue => self.device.synchronize(),
            #[cfg(feature = "cuda")]
            Inner::Cuda(s) => s.synchronize().map_err(be),
        }
    }

    /// An event at the current end of this stream's work.
    pub fn record(&self) -> Result<Event> {
        match &self.inner {
            Inner::Queue => {
                self.device.synchronize()?;
                Ok(Event { inner: EventInner::Done(std::time::Instant::now()) })
            }
            #[cfg(feature = "cuda")]
            Inner::Cuda(s) => Ok(Event { inner: EventInner::Cuda(Arc::new(s.record().map_err(be)?), s.device().clone()) }),
        }
    }

    /// Work queued on this stream from now on starts after `event`'s work
    /// (on the device: the host does not wait). An event of another device
    /// is an error.
    pub fn wait(&self, event: &Event) -> Result<()> {
        match (&self.inner, &event.inner) {
            (Inner::Queue, EventInner::Done(_)) => Ok(()),
            #[cfg(feature = "cuda")]
            (Inner::Cuda(s), EventInner::Cuda(e, d)) if Arc::ptr_eq(s.device(), d) => s.wait(e).map_err(be),
            _ => Err(Error::Buffer("Stream::wait: the event was recorded on another device".into())),
        }
    }

    /// The raw `CUstream` handle (CUDA only): to hand the stream to other
    /// CUDA code. It stays valid as long as this stream (or a clone) lives.
    #[cfg(feature = "cuda")]
    pub fn raw_cuda(&self) -> Option<cudarc::driver::sys::CUstream> {
        match &self.inner {
            Inner::Cuda(s) => Some(s.raw),
            Inner::Queue => None,
        }
    }

    /// A caller's CUDA stream, for use with [`Stream::scope`]; the runtime
    /// never destroys it, and waits for it (as for its own streams) before
    /// reading back or freeing buffers while this `Stream` lives. An error
    /// if `dev` is not a CUDA device or the stream belongs to another
    /// context than the device's primary context (the one ferrotile and
    /// cudarc's `CudaContext::new` use).
    ///
    /// # Safety
    /// `raw` is a live CUDA stream and stays alive as long as the returned
    /// `Stream` and its clones.
    #[cfg(feature = "cuda")]
    pub unsafe fn from_raw_cuda(dev: &Device, raw: cudarc::driver::sys::CUstream) -> Result<Stream> {
        // SAFETY: the caller's promise.
        unsafe { Self::wrap_cuda(dev, raw, None) }
    }

    /// # Safety
    /// As [`Stream::from_raw_cuda`], unless `keep` owns the stream.
    #[cfg(feature = "cuda")]
    pub(crate) unsafe fn wrap_cuda(dev: &Device, raw: cudarc::driver::sys::CUstream, keep: Option<Box<dyn std::any::Any + Send + Sync>>) -> Result<Stream> {
        let c = dev.cuda.as_ref().ok_or_else(|| Error::DeviceUnavailable(format!("a CUDA stream needs a CUDA device, not {}", dev.name())))?;
        // SAFETY: forwarded.
        let s = unsafe { c.wrap_stream(raw, keep) }.map_err(be)?;
        Ok(Stream { device: dev.clone(), inner: Inner::Cuda(s) })
    }
}

impl Event {
    /// Waits on the host until the work before the event is done.
    pub fn synchronize(&self) -> Result<()> {
        match &self.inner {
            EventInner::Done(_) => Ok(()),
            #[cfg(feature = "cuda")]
            EventInner::Cuda(e, d) => {
                d.bind().map_err(be)?;
                e.synchronize().map_err(be)
            }
        }
    }

    /// Whether the work before the event is done (never waits).
    pub fn is_done(&self) -> Result<bool> {
        match &self.inner {
            EventInner::Done(_) => Ok(true),
            #[cfg(feature = "cuda")]
            EventInner::Cuda(e, d) => {
                d.bind().map_err(be)?;
                e.query().map_err(be)
            }
        }
    }

    /// Milliseconds from this event to `later` (waits for `later`): device
    /// time on CUDA; on the CPU and wgpu the host time between the two
    /// records, each taken once the queue had drained.
    pub fn elapsed_ms(&self, later: &Event) -> Result<f64> {
        match (&self.inner, &later.inner) {
            (EventInner::Done(a), EventInner::Done(b)) => Ok(b.saturating_duration_since(*a).as_secs_f64() * 1e3),
            #[cfg(feature = "cuda")]
            (EventInner::Cuda(a, d), EventInner::Cuda(b, d2)) if Arc::ptr_eq(d, d2) => {
                d.bind().map_err(be)?;
                a.elapsed_ms(b).map(|x| x as f64).map_err(be)
            }
            _ => Err(Error::Buffer("Event::elapsed_ms: events of different devices".into())),
        }
    }
}
