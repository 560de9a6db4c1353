use crate::element::Element;
use crate::error::{Error, Result};
use crate::runtime::buffer::{Buffer, HostMem};
use std::sync::Arc;

/// Which backend a [`Device`] runs kernels on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The reference interpreter on host memory.
    Cpu,
}

/// A place kernels run and buffers live.
#[derive(Clone, Debug)]
pub struct Device {
    kind: DeviceKind,
    threads: usize,
}

impl Device {
    /// The CPU interpreter: the reference semantics, available everywhere.
    /// Programs of a grid run in parallel on the host's cores.
    pub fn cpu() -> Device {
        let threads = std::env::var("FERROTILE_CPU_THREADS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
            .max(1);
        Device { kind: DeviceKind::Cpu, threads }
    }

    /// The CPU interpreter on exactly `threads` host threads.
    pub fn cpu_with_threads(threads: usize) -> Device {
        Device { kind: DeviceKind::Cpu, threads: threads.max(1) }
    }

    /// The best device available on this machine. GPU backends are tried
    /// first once they exist; today this is the CPU interpreter.
    pub fn best() -> Device {
        Device::cpu()
    }

    pub fn kind(&self) -> DeviceKind {
        self.kind
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    pub fn name(&self) -> String {
        match self.kind {
            DeviceKind::Cpu => format!("cpu interpreter ({} threads)", self.threads),
        }
    }

    /// A zero-filled buffer of `len` elements.
    pub fn zeros<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        let bytes = len.checked_mul(T::DTYPE.size_bytes()).ok_or_else(|| Error::Buffer(format!("{len} elements overflow")))?;
        Ok(Buffer::new(self.clone(), Arc::new(HostMem::new(vec![0u8; bytes], T::DTYPE)), len))
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice<T: Element>(&self, data: &[T]) -> Result<Buffer<T>> {
        Ok(Buffer::new(self.clone(), Arc::new(HostMem::new(T::to_le_bytes_vec(data), T::DTYPE)), data.len()))
    }

    /// A buffer of `len` copies of `value` (e.g. NaN to poison outputs).
    pub fn full<T: Element>(&self, len: usize, value: T) -> Result<Buffer<T>> {
        self.from_slice(&vec![value; len])
    }

    pub(crate) fn same(&self, other: &Device) -> bool {
        self.kind == other.kind
    }
}
