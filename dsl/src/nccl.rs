//! Collectives across GPUs with NCCL (feature `nccl`): all-reduce,
//! all-gather, reduce-scatter and broadcast on ferrotile buffers, queued
//! on the same streams as ferrotile's kernels, so a step of tensor
//! parallelism — GEMM, all-reduce, GEMM — never waits on the host.
//!
//! `libnccl` is loaded at run time (cudarc's `nccl` bindings): a build
//! needs no NCCL, and a machine without it gets an error value from
//! [`Comm::for_devices`], not a crash.
//!
//! One process drives all its GPUs. [`Comm::for_devices`] makes one
//! communicator per device (ranks in the order given). A collective must be
//! called by every rank with buffers of one length; either from one thread
//! per device (the usual way: each thread queues its device's kernels and
//! then its collective), or from one thread inside [`group`], which lets
//! NCCL start the ranks' parts together.
//!
//! Each collective is queued on the calling thread's current stream for
//! the buffer's device — the device's stream, or the one a
//! [`crate::Stream::scope`] selects — after the work queued there before
//! it, and before the work queued after it.

use crate::element::Element;
use crate::error::{Error, Result};
use crate::ir::DType;
use crate::runtime::{Buffer, Device, Storage};
use cudarc::nccl::{result, sys};

fn ne(what: &str, e: result::NcclError) -> Error {
    Error::Backend { kernel: String::new(), msg: format!("NCCL {what}: {e:?}") }
}

/// Whether an NCCL library can be loaded (checked before any call into
/// cudarc's bindings, which would panic without one).
fn nccl_present() -> bool {
    crate::runtime::cuda::driver::library_present(&["libnccl.so.2", "libnccl.so"])
}

/// How a reduction combines the ranks' values.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The product.
    Prod,
    /// The maximum.
    Max,
    /// The minimum.
    Min,
    /// The mean (the sum divided by the number of ranks).
    Avg,
}

impl ReduceOp {
    fn raw(self) -> sys::ncclRedOp_t {
        match self {
            ReduceOp::Sum => sys::ncclRedOp_t::ncclSum,
            ReduceOp::Prod => sys::ncclRedOp_t::ncclProd,
            ReduceOp::Max => sys::ncclRedOp_t::ncclMax,
            ReduceOp::Min => sys::ncclRedOp_t::ncclMin,
            ReduceOp::Avg => sys::ncclRedOp_t::ncclAvg,
        }
    }
}

fn nccl_type(d: DType) -> Result<sys::ncclDataType_t> {
    use sys::ncclDataType_t::*;
    Ok(match d {
        DType::F32 => ncclFloat32,
        DType::F16 => ncclFloat16,
        DType::BF16 => ncclBfloat16,
        DType::I32 => ncclInt32,
        DType::U32 => ncclUint32,
        DType::I64 => ncclInt64,
        DType::I8 => ncclInt8,
        DType::U8 => ncclUint8,
        d => return Err(Error::Buffer(format!("NCCL has no {d} collectives"))),
    })
}

/// One rank of a group of GPUs: the communicator of one device.
pub struct Comm {
    raw: sys::ncclComm_t,
    dev: Device,
    rank: usize,
    world: usize,
}

// SAFETY: an NCCL communicator may be used from any thread (one at a time:
// `Comm` is not `Sync`); every call first makes the device current.
unsafe impl Send for Comm {}

impl std::fmt::Debug for Comm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Comm(rank {} of {}, {})", self.rank, self.world, self.dev.name())
    }
}

impl Comm {
    /// One communicator per device of `devs` (distinct CUDA devices of
    /// this process), rank `i` on `devs[i]`. An error on a device that is
    /// not CUDA, for a device listed twice, or when no NCCL library loads.
    pub fn for_devices(devs: &[Device]) -> Result<Vec<Comm>> {
        let mut ordinals = vec![];
        for d in devs {
            let c = d.cuda.as_ref().ok_or_else(|| Error::DeviceUnavailable(format!("NCCL runs on CUDA devices, not {}", d.name())))?;
            if ordinals.contains(&(c.ordinal as i32)) {
                return Err(Error::Buffer(format!("Comm::for_devices: {} is listed twice", d.name())));
            }
            ordinals.push(c.ordinal as i32);
        }
        if devs.is_empty() {
            return Ok(vec![]);
        }
        if !nccl_present() {
            return Err(Error::DeviceUnavailable("no NCCL library (libnccl.so.2) found on this machine".into()));
        }
        let mut raw = vec![std::ptr::null_mut(); devs.len()];
        // SAFETY: `raw` has room for one communicator per listed device.
        unsafe { result::comm_init_all(raw.as_mut_ptr(), devs.len() as i32, ordinals.as_ptr()) }.map_err(|e| ne("ncclCommInitAll", e))?;
        Ok(raw.into_iter().zip(devs).enumerate().map(|(rank, (raw, dev))| Comm { raw, dev: dev.clone(), rank, world: devs.len() }).collect())
    }

    /// This communicator's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// The device of this rank.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// The raw stream to queue on and the buffer's address, after checking
    /// that the buffer is on this rank's device.
    fn prepare<T: Element>(&self, b: &Buffer<T>, what: &str) -> Result<(u64, sys::cudaStream_t)> {
        let cuda = self.dev.cuda.as_ref().expect("a CUDA device");
        let (Storage::Cuda(m), true) = (&b.mem, b.device().same(&self.dev)) else {
            return Err(Error::Buffer(format!("{what}: a buffer of {}, not of rank {}'s {}", b.device().name(), self.rank, self.dev.name())));
        };
        cuda.bind().map_err(Error::DeviceUnavailable)?;
        Ok((m.ptr, cuda.stream() as sys::cudaStream_t))
    }

    /// `buf` ← the elementwise reduction of every rank's `buf`, in place.
    pub fn all_reduce<T: Element>(&self, buf: &mut Buffer<T>, op: ReduceOp) -> Result<()> {
        let ty = nccl_type(T::DTYPE)?;
        let (p, s) = self.prepare(buf, "all_reduce")?;
        // SAFETY: `p` holds `buf.len()` elements of `T` on this rank's
        // device; the collective is queued on the device's current stream,
        // before anything that frees the buffer (a drop waits for it).
        unsafe { result::all_reduce(p as *const _, p as *mut _, buf.len(), ty, op.raw(), self.raw, s) }.map_err(|e| ne("ncclAllReduce", e))?;
        Ok(())
    }

    /// `out` ← every rank's `input`, concatenated in rank order (`out`
    /// holds `world_size` × `input.len()` elements).
    pub fn all_gather<T: Element>(&self, input: &Buffer<T>, out: &mut Buffer<T>) -> Result<()> {
        let ty = nccl_type(T::DTYPE)?;
        if out.len() != input.len() * self.world {
            return Err(Error::Buffer(format!("all_gather: `out` has {} elements, {} × {} expected", out.len(), self.world, input.len())));
        }
        let (pi, s) = self.prepare(input, "all_gather")?;
        let (po, _) = self.prepare(out, "all_gather")?;
        // SAFETY: as in `all_reduce`; `out` holds world × count elements.
        unsafe { result::all_gather(pi as *const _, po as *mut _, input.len(), ty, self.raw, s) }.map_err(|e| ne("ncclAllGather", e))?;
        Ok(())
    }

    /// `out` ← this rank's block (`rank` × `out.len()` onwards) of the
    /// reduction of every rank's `input` (`input` holds `world_size` ×
    /// `out.len()` elements).
    pub fn reduce_scatter<T: Element>(&self, input: &Buffer<T>, out: &mut Buffer<T>, op: ReduceOp) -> Result<()> {
        let ty = nccl_type(T::DTYPE)?;
        if input.len() != out.len() * self.world {
            return Err(Error::Buffer(format!("reduce_scatter: `input` has {} elements, {} × {} expected", input.len(), self.world, out.len())));
        }
        let (pi, s) = self.prepare(input, "reduce_scatter")?;
        let (po, _) = self.prepare(out, "reduce_scatter")?;
        // SAFETY: as in `all_reduce`; `input` holds world × count elements.
        unsafe { result::reduce_scatter(pi as *const _, po as *mut _, out.len(), ty, op.raw(), self.raw, s) }.map_err(|e| ne("ncclReduceScatter", e))?;
        Ok(())
    }

    /// `buf` ← rank `root`'s `buf`, on every rank.
    pub fn broadcast<T: Element>(&self, buf: &mut Buffer<T>, root: usize) -> Result<()> {
        let ty = nccl_type(T::DTYPE)?;
        if root >= self.world {
            return Err(Error::Buffer(format!("broadcast: root {root} of {} ranks", self.world)));
        }
        let (p, s) = self.prepare(buf, "broadcast")?;
        // SAFETY: as in `all_reduce`.
        unsafe { result::broadcast(p as *const _, p as *mut _, buf.len(), ty, root as i32, self.raw, s) }.map_err(|e| ne("ncclBroadcast", e))?;
        Ok(())
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // (after the collectives queued on it: the device's work is waited
        // for, then the communicator is finalized and freed)
        let _ = self.dev.synchronize();
        // SAFETY: the communicator came from ncclCommInitAll and is
        // dropped once.
        unsafe {
            let _ = result::comm_finalize(self.raw);
            let _ = result::comm_destroy(self.raw);
        }
    }
}

/// Runs `f` between `ncclGroupStart` and `ncclGroupEnd`: the collectives
/// `f` queues for several ranks from one thread start together (without
/// it, one thread calling every rank's part in turn deadlocks).
pub fn group<R>(f: impl FnOnce() -> Result<R>) -> Result<R> {
    if !nccl_present() {
        return Err(Error::DeviceUnavailable("no NCCL library (libnccl.so.2) found on this machine".into()));
    }
    result::group_start().map_err(|e| ne("ncclGroupStart", e))?;
    let r = f();
    let end = result::group_end().map_err(|e| ne("ncclGroupEnd", e));
    let r = r?;
    end?;
    Ok(r)
}
