//! Devices: [`Device`] is the CPU interpreter, a CUDA GPU or a wgpu adapter
//! (`Device::best()` picks in that order of preference: CUDA, wgpu, CPU);
//! buffer allocation and host↔device copies, `synchronize`, device timing
//! (`time_ms`: CUDA events, GPU timestamps on wgpu, wall clock on the CPU),
//! and CUDA graph capture ([`Device::capture`] → [`Graph`]). No driver or no
//! GPU is an error value from the constructor, never a panic.

use crate::element::Element;
use crate::error::{Error, Result};
use crate::interp::HostMem;
use crate::runtime::buffer::{Buffer, Storage};
use std::sync::Arc;

/// Which backend a [`Device`] runs kernels on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The reference interpreter on host memory.
    Cpu,
    /// An NVIDIA GPU through the PTX backend and the CUDA driver.
    Cuda,
    /// Any GPU wgpu can drive (Vulkan, Metal, DX12; also lavapipe, a CPU
    /// Vulkan driver) through the WGSL backend. Feature `wgpu`.
    Wgpu,
}

/// A place kernels run and buffers live.
#[derive(Clone, Debug)]
pub struct Device {
    kind: DeviceKind,
    threads: usize,
    #[cfg(feature = "cuda")]
    pub(crate) cuda: Option<Arc<crate::runtime::cuda::driver::CudaDevice>>,
    #[cfg(feature = "wgpu")]
    pub(crate) wgpu: Option<Arc<crate::runtime::webgpu::driver::WgpuDevice>>,
}

impl Device {
    /// The CPU interpreter: the reference semantics, available everywhere.
    /// Programs of a grid run in parallel on the host's cores
    /// (`FERROTILE_CPU_THREADS` overrides the count).
    pub fn cpu() -> Device {
        let threads = std::env::var("FERROTILE_CPU_THREADS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
            .max(1);
        Device::cpu_with_threads(threads)
    }

    /// The CPU interpreter on exactly `threads` host threads.
    pub fn cpu_with_threads(threads: usize) -> Device {
        Device {
            kind: DeviceKind::Cpu,
            threads: threads.max(1),
            #[cfg(feature = "cuda")]
            cuda: None,
            #[cfg(feature = "wgpu")]
            wgpu: None,
        }
    }

    /// CUDA device `ordinal`. An error value — never a panic — when this
    /// build lacks the `cuda` feature, no driver is installed, or there is
    /// no such device.
    pub fn cuda(ordinal: usize) -> Result<Device> {
        #[cfg(feature = "cuda")]
        {
            let d = crate::runtime::cuda::driver::CudaDevice::open(ordinal).map_err(Error::DeviceUnavailable)?;
            Ok(Device {
                kind: DeviceKind::Cuda,
                threads: 1,
                cuda: Some(d),
                #[cfg(feature = "wgpu")]
                wgpu: None,
            })
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = ordinal;
            Err(Error::DeviceUnavailable("ferrotile was built without the `cuda` feature".into()))
        }
    }

    /// The wgpu adapter chosen by wgpu's environment variables
    /// (`WGPU_BACKEND`, `WGPU_ADAPTER_NAME`, `WGPU_POWER_PREF`), opened once
    /// per process and shared. An error value — never a panic — when this
    /// build lacks the `wgpu` feature or there is no adapter.
    pub fn wgpu() -> Result<Device> {
        #[cfg(feature = "wgpu")]
        {
            use crate::runtime::webgpu::driver::WgpuDevice;
            use std::sync::OnceLock;
            static D: OnceLock<std::result::Result<Arc<WgpuDevice>, String>> = OnceLock::new();
            let d = D.get_or_init(WgpuDevice::open).clone().map_err(Error::DeviceUnavailable)?;
            Ok(Device {
                kind: DeviceKind::Wgpu,
                threads: 1,
                #[cfg(feature = "cuda")]
                cuda: None,
                wgpu: Some(d),
            })
        }
        #[cfg(not(feature = "wgpu"))]
        {
            Err(Error::DeviceUnavailable("ferrotile was built without the `wgpu` feature".into()))
        }
    }

    /// The best device available: CUDA device 0 if present, else a wgpu
    /// adapter (builds with the `wgpu` feature), else the CPU interpreter.
    /// `FERROTILE_DEVICE=cpu|cuda|wgpu` forces a choice: a forced device
    /// that is unavailable (or another value) is an error, not a silent
    /// fallback. Without it this never fails.
    pub fn best() -> Result<Device> {
        match std::env::var("FERROTILE_DEVICE").as_deref() {
            Ok("cpu") => Ok(Device::cpu()),
            Ok("cuda") => Device::cuda(0).map_err(|e| Error::DeviceUnavailable(format!("FERROTILE_DEVICE=cuda: {e}"))),
            Ok("wgpu") => Device::wgpu().map_err(|e| Error::DeviceUnavailable(format!("FERROTILE_DEVICE=wgpu: {e}"))),
            Ok(other) if !other.is_empty() => Err(Error::DeviceUnavailable(format!("FERROTILE_DEVICE={other}: expected cpu, cuda or wgpu"))),
            _ => Ok(Device::cuda(0).or_else(|_| Device::wgpu()).unwrap_or_else(|_| Device::cpu())),
        }
    }

    /// Which backend this device is: the CPU interpreter, CUDA or wgpu.
    pub fn kind(&self) -> DeviceKind {
        self.kind
    }

    /// An identity for caches keyed by device: equal for clones of one
    /// handle, for every CPU device and for every `Device::cuda(n)` of one
    /// ordinal (one CUDA handle per ordinal and process), different for
    /// different GPUs, whose buffers do not mix.
    pub fn id(&self) -> usize {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            return Arc::as_ptr(c) as *const u8 as usize;
        }
        #[cfg(feature = "wgpu")]
        if let Some(w) = &self.wgpu {
            return Arc::as_ptr(w) as *const u8 as usize;
        }
        0
    }

    /// A CUDA device's compute capability as `major·10 + minor` (90 for
    /// Hopper); `None` for other devices.
    pub fn compute_capability(&self) -> Option<u32> {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            return Some(c.sm);
        }
        None
    }

    /// A CUDA device's streaming multiprocessors (132 on an H200); `None`
    /// for other devices. Host code sizes grids with it (e.g. how many
    /// ways to split a decode attention's keys).
    pub fn multiprocessors(&self) -> Option<u32> {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            return Some(c.num_sms);
        }
        None
    }

    /// A CUDA device's maximum SM clock in MHz, as the driver reports it
    /// (1980 on an H200); `None` for other devices or where the driver does
    /// not report it. Peak rates are SMs × per-SM rate × this clock.
    pub fn clock_mhz(&self) -> Option<u32> {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            return (c.clock_khz > 0).then_some(c.clock_khz / 1000);
        }
        None
    }

    /// Whether the device is a GPU (CUDA, or a wgpu adapter other than a
    /// software rasterizer such as lavapipe): tools size their problems by
    /// it.
    pub fn is_hardware(&self) -> bool {
        match self.kind {
            DeviceKind::Cpu => false,
            DeviceKind::Cuda => true,
            DeviceKind::Wgpu => {
                #[cfg(feature = "wgpu")]
                if let Some(w) = &self.wgpu {
                    return w.info.device_type != wgpu::DeviceType::Cpu;
                }
                false
            }
        }
    }

    /// Host threads the CPU interpreter runs programs on (1 elsewhere).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// A name for messages and reports, e.g. `cuda:0 NVIDIA H200 (sm_90)`.
    pub fn name(&self) -> String {
        match self.kind {
            DeviceKind::Cpu => format!("cpu interpreter ({} threads)", self.threads),
            DeviceKind::Cuda => {
                #[cfg(feature = "cuda")]
                if let Some(c) = &self.cuda {
                    return format!("cuda:{} {} (sm_{})", c.ordinal, c.name, c.sm);
                }
                "cuda".into()
            }
            DeviceKind::Wgpu => {
                #[cfg(feature = "wgpu")]
                if let Some(w) = &self.wgpu {
                    return format!("wgpu {}", w.name());
                }
                "wgpu".into()
            }
        }
    }

    /// Wait until all work queued on the device has finished (a no-op on the CPU).
    pub fn synchronize(&self) -> Result<()> {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            return c.synchronize().map_err(|e| Error::Backend { kernel: String::new(), msg: e });
        }
        #[cfg(feature = "wgpu")]
        if let Some(w) = &self.wgpu {
            return w.synchronize().map_err(|e| Error::Backend { kernel: String::new(), msg: e });
        }
        Ok(())
    }

    /// Time `f` on this device, in milliseconds: CUDA events around it on
    /// CUDA (device time of the work `f` queues, gaps included); on wgpu the
    /// sum of the GPU-timestamped intervals of each dispatch and copy `f`
    /// queues (device time without submission gaps), or wall-clock time with
    /// the device drained before and after where the adapter has no
    /// timestamp queries; wall-clock time on the CPU.
    ///
    /// ```
    /// # use ferrotile::Device;
    /// let dev = Device::best()?;
    /// let src = dev.zeros::<u8>(1 << 20)?;
    /// let mut dst = dev.zeros::<u8>(1 << 20)?;
    /// let ms = dev.time_ms(|| src.copy_to(&mut dst))?;
    /// assert!(ms >= 0.0);
    /// # Ok::<(), ferrotile::Error>(())
    /// ```
    pub fn time_ms(&self, f: impl FnOnce() -> Result<()>) -> Result<f64> {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            let be = |m: String| Error::Backend { kernel: String::new(), msg: m };
            let (a, b) = (c.event().map_err(be)?, c.event().map_err(be)?);
            a.record().map_err(be)?;
            f()?;
            b.record().map_err(be)?;
            return a.elapsed_ms(&b).map(|x| x as f64).map_err(be);
        }
        #[cfg(feature = "wgpu")]
        if let Some(w) = &self.wgpu {
            let be = |m: String| Error::Backend { kernel: String::new(), msg: m };
            self.synchronize()?;
            w.begin_timing();
            let t = std::time::Instant::now();
            let r = f();
            let stamped = w.end_timing().map_err(be)?;
            let wall = t.elapsed().as_secs_f64() * 1e3;
            r?;
            return Ok(stamped.unwrap_or(wall));
        }
        let t = std::time::Instant::now();
        f()?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    }

    /// Capture the device work `f` queues into a [`Graph`] instead of
    /// running it; [`Graph::replay`] then submits all of it at once (on
    /// CUDA: a CUDA graph — no per-launch host overhead, no gaps between the
    /// kernels; what decode loops are run with). The work runs only when the
    /// graph is replayed, on the buffers it was captured with (the graph
    /// keeps them alive), with the scalar arguments it was captured with.
    /// Inside `f`, anything that waits for the device — allocating,
    /// copying to or from the host, synchronizing, timing, and so the
    /// autotuner's first run for a key — is an error: run the work once
    /// before capturing it. CUDA only: elsewhere an error value.
    ///
    /// ```
    /// # use ferrotile::Device;
    /// let dev = Device::best()?;
    /// let x = dev.from_slice(&[1.0f32; 64])?;
    /// let mut y = dev.zeros::<f32>(64)?;
    /// match dev.capture(|| x.copy_to(&mut y)) {
    ///     Ok(graph) => {
    ///         graph.replay()?; // the copy runs now
    ///         assert_eq!(y.to_vec()?, vec![1.0; 64]);
    ///     }
    ///     // the CPU interpreter and wgpu have no graphs: an error value
    ///     Err(e) => assert!(dev.kind() != ferrotile::DeviceKind::Cuda, "{e}"),
    /// }
    /// # Ok::<(), ferrotile::Error>(())
    /// ```
    pub fn capture(&self, f: impl FnOnce() -> Result<()>) -> Result<Graph> {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            let be = |m: String| Error::Backend { kernel: String::new(), msg: m };
            c.begin_capture().map_err(be)?;
            // (closed whatever `f` does — returns an error or panics — so
            // that the device stays usable)
            struct Close<'a>(&'a Arc<crate::runtime::cuda::driver::CudaDevice>, bool);
            impl Drop for Close<'_> {
                fn drop(&mut self) {
                    if !self.1 {
                        let _ = self.0.end_capture();
                    }
                }
            }
            let mut close = Close(c, false);
            let r = f();
            close.1 = true;
            let g = c.end_capture();
            r?;
            return Ok(Graph { cuda: g.map_err(be)? });
        }
        let _ = f;
        Err(Error::DeviceUnavailable(format!("graph capture needs a CUDA device, not {}", self.name())))
    }

    /// Which stream the calling thread's device work goes to, as a key:
    /// 0 for the device's own stream, a number of its own for each CUDA
    /// [`crate::Stream`] scope (never reused) — to keep per-stream resources
    /// apart (the kernel library's scratch buffers: work on two streams
    /// runs concurrently). On the CPU interpreter and wgpu, whose streams
    /// are the device's one queue, always 0. Inside a [`Device::capture`],
    /// the key of the scope the capture runs in.
    pub fn stream_key(&self) -> u64 {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            return c.stream_key();
        }
        0
    }

    /// Whether some [`crate::Stream`] with this [`Device::stream_key`] is
    /// still alive (the key 0, the device's own stream, always is): per
    /// stream resources of a dropped stream can be freed.
    pub fn stream_key_live(&self, key: u64) -> bool {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            return c.stream_key_live(key);
        }
        key == 0
    }

    /// Whether the calling thread is inside a [`Device::capture`] on this
    /// device.
    pub fn capturing(&self) -> bool {
        #[cfg(feature = "cuda")]
        if let Some(c) = &self.cuda {
            return c.capturing();
        }
        false
    }

    /// How [`Device::time_ms`] measures on this device: "cuda events",
    /// "gpu timestamps", "gpu timestamps (kernels only)" (the adapter cannot
    /// timestamp copies, which are then timed by the wall clock) or "wall clock".
    pub fn timing_method(&self) -> &'static str {
        #[cfg(feature = "cuda")]
        if self.cuda.is_some() {
            return "cuda events";
        }
        #[cfg(feature = "wgpu")]
        if let Some(w) = &self.wgpu {
            return match (w.has_timestamps(), w.full_timestamps()) {
                (false, _) => "wall clock",
                (true, true) => "gpu timestamps",
                (true, false) => "gpu timestamps (kernels only)",
            };
        }
        "wall clock"
    }

    /// Median bandwidth of a device-to-device copy of `bytes` bytes (GB/s,
    /// counting the read and the write), the ceiling memory-bound kernels are
    /// compared against.
    pub fn copy_bandwidth_gbs(&self, bytes: usize, reps: usize) -> Result<f64> {
        let src = self.zeros::<u8>(bytes)?;
        let mut dst = self.zeros::<u8>(bytes)?;
        let mut ts = vec![];
        for _ in 0..reps.max(3) + 2 {
            // 4 copies back to back per timing: device time, not host latency
            ts.push(self.time_ms(|| (0..4).try_for_each(|_| src.copy_to(&mut dst)))? / 4.0);
        }
        ts.drain(..2);
        ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
        Ok(2.0 * bytes as f64 / (ts[ts.len() / 2] * 1e-3) / 1e9)
    }

    /// Device memory holding `init`: `bytes` zeros, or the given bytes.
    fn storage(&self, init: Init, dtype: ferrotile_ir::DType) -> Result<Storage> {
        match self.kind {
            DeviceKind::Cpu => {
                let bytes = match init {
                    Init::Zeros(n) => host_bytes(n, &[0])?,
                    Init::Bytes(b) => b,
                };
                Ok(Storage::Host(Arc::new(HostMem::new(bytes, dtype))))
            }
            DeviceKind::Cuda => {
                #[cfg(feature = "cuda")]
                {
                    // (fresh device memory reads as zeros: `alloc` fills it)
                    let c = self.cuda.as_ref().expect("cuda device handle");
                    let m = c.alloc(init.len()).map_err(Error::Buffer)?;
                    if let Init::Bytes(b) = &init {
                        if b.iter().any(|&x| x != 0) {
                            m.htod(b).map_err(Error::Buffer)?;
                        }
                    }
                    Ok(Storage::Cuda(Arc::new(m)))
                }
                #[cfg(not(feature = "cuda"))]
                unreachable!()
            }
            DeviceKind::Wgpu => {
                #[cfg(feature = "wgpu")]
                {
                    let w = self.wgpu.as_ref().expect("wgpu device handle");
                    let m = w.alloc(init.len()).map_err(Error::Buffer)?;
                    if let Init::Bytes(b) = &init {
                        if b.iter().any(|&x| x != 0) {
                            m.htod(b).map_err(Error::Buffer)?;
                        }
                    }
                    Ok(Storage::Wgpu(Arc::new(m)))
                }
                #[cfg(not(feature = "wgpu"))]
                unreachable!()
            }
        }
    }

    /// A zero-filled buffer of `len` elements. (On a GPU, no host copy of
    /// the zeros is made; a size the host or the device cannot allocate is
    /// an error, not an abort.)
    pub fn zeros<T: Element>(&self, len: usize) -> Result<Buffer<T>> {
        let bytes = bytes_of::<T>(len)?;
        Ok(Buffer::new(self.clone(), self.storage(Init::Zeros(bytes), T::DTYPE)?, len))
    }

    /// A buffer holding a copy of `data`.
    pub fn from_slice<T: Element>(&self, data: &[T]) -> Result<Buffer<T>> {
        Ok(Buffer::new(self.clone(), self.storage(Init::Bytes(T::to_le_bytes_vec(data)), T::DTYPE)?, data.len()))
    }

    /// A buffer of `len` copies of `value` (e.g. NaN to poison outputs); a
    /// size that cannot be allocated is an error.
    pub fn full<T: Element>(&self, len: usize, value: T) -> Result<Buffer<T>> {
        let bytes = bytes_of::<T>(len)?;
        let init = host_bytes(bytes, &T::to_le_bytes_vec(&[value]))?;
        Ok(Buffer::new(self.clone(), self.storage(Init::Bytes(init), T::DTYPE)?, len))
    }

    pub(crate) fn same(&self, other: &Device) -> bool {
        if self.kind != other.kind {
            return false;
        }
        #[cfg(feature = "cuda")]
        if let (Some(a), Some(b)) = (&self.cuda, &other.cuda) {
            return a.ordinal == b.ordinal;
        }
        #[cfg(feature = "wgpu")]
        if let (Some(a), Some(b)) = (&self.wgpu, &other.wgpu) {
            return Arc::ptr_eq(a, b);
        }
        true
    }
}

/// What a new buffer holds.
enum Init {
    /// This many zero bytes (no host copy needed on a GPU).
    Zeros(usize),
    /// These bytes.
    Bytes(Vec<u8>),
}

impl Init {
    #[cfg_attr(not(any(feature = "cuda", feature = "wgpu")), allow(dead_code))]
    fn len(&self) -> usize {
        match self {
            Init::Zeros(n) => *n,
            Init::Bytes(b) => b.len(),
        }
    }
}

/// The bytes of `len` elements of `T`, or an error where they overflow.
fn bytes_of<T: Element>(len: usize) -> Result<usize> {
    len.checked_mul(T::DTYPE.size_bytes()).ok_or_else(|| Error::Buffer(format!("{len} elements overflow")))
}

/// `bytes` bytes of host memory repeating `pattern` (whose length divides
/// `bytes`), or an error where the host cannot allocate them — never the
/// abort of a failed infallible allocation.
fn host_bytes(bytes: usize, pattern: &[u8]) -> Result<Vec<u8>> {
    let mut v: Vec<u8> = Vec::new();
    v.try_reserve_exact(bytes).map_err(|e| Error::Buffer(format!("{bytes} bytes of host memory: {e}")))?;
    if pattern.iter().all(|&b| b == 0) {
        v.resize(bytes, 0);
    } else {
        while v.len() < bytes {
            v.extend_from_slice(pattern);
        }
    }
    Ok(v)
}

/// Device work captured by [`Device::capture`], replayed as a whole.
/// (Only [`Device::capture`] makes one.)
#[derive(Debug)]
pub struct Graph {
    #[cfg(feature = "cuda")]
    cuda: crate::runtime::cuda::driver::Graph,
    #[cfg(not(feature = "cuda"))]
    _none: (),
}

impl Graph {
    /// Queue the captured work again (asynchronously, like a launch).
    pub fn replay(&self) -> Result<()> {
        #[cfg(feature = "cuda")]
        return self.cuda.launch().map_err(|m| Error::Backend { kernel: String::new(), msg: m });
        #[cfg(not(feature = "cuda"))]
        Err(Error::DeviceUnavailable("graphs need the `cuda` feature".into()))
    }
}
