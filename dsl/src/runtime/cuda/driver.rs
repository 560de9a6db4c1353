//! CUDA runtime over cudarc's driver API (loaded dynamically).
//!
//! Takes PTX from [`ferrotile_backends::ptx`] and runs it: device discovery (never
//! panics: no driver library or no device is an `Err`), device memory,
//! host↔device copies, module loading (the driver JIT-assembles our PTX),
//! launches with dynamic shared memory (opting in above 48 KiB, checked
//! against the device's limit), and CUDA events for timing. Every driver
//! failure becomes a `String` error that callers wrap with the kernel name.
//!
//! One device handle per ordinal and process ([`CudaDevice::open`] hands out
//! the same one), with one stream: launches, device-to-device copies and
//! events go to it in order; host↔device copies and `synchronize` wait for
//! it. A thread can *capture* its work into a CUDA graph
//! ([`CudaDevice::begin_capture`] / [`CudaDevice::end_capture`]): its
//! launches and copies then go to a capture stream of its own (other
//! threads keep running on the device's stream), and the graph is replayed
//! on the device's stream ([`Graph::launch`]) — the work of many launches
//! submitted at once, without per-launch driver overhead or gaps between
//! kernels. While a thread captures, whatever in it would synchronize with
//! the device (allocation, host copies, `synchronize`, timing) is an error,
//! and the device memory the captured work uses is kept alive by the graph
//! ([`CudaDevice::keep_alive`]).

use cudarc::driver::{result, sys};
use std::ffi::{c_void, CString};
use std::sync::Arc;

pub type CuResult<T> = Result<T, String>;

fn drv(e: result::DriverError) -> String {
    format!("{e:?}")
}

pub struct CudaDevice {
    pub ordinal: usize,
    pub dev: sys::CUdevice,
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    /// The open capture, if any: the capturing thread, its capture stream
    /// and the device memory its work uses (handed to the graph).
    capture: std::sync::Mutex<Option<Capture>>,
    /// Whether `capture` holds one: launches ask for their stream and for
    /// every buffer argument, and with no capture open — the common case —
    /// this answers without the lock.
    capture_open: std::sync::atomic::AtomicBool,
    pub name: String,
    /// Compute capability as major*10 + minor.
    pub sm: u32,
    pub max_smem_optin: u32,
    /// What one SM holds of the programs resident on it: shared memory
    /// and the part the driver reserves per program, registers, threads,
    /// programs ([`SmLimits::programs_per_sm`]).
    pub sm_limits: SmLimits,
    pub num_sms: u32,
    /// The SMs' maximum clock, kHz (0 where the driver does not say).
    pub clock_khz: u32,
    /// Launches may let the next kernel of their stream start while they
    /// run (programmatic dependent launch: sm_90 and a driver of CUDA 12.3
    /// or newer, which also captures it into graphs).
    pub dependent_launch: bool,
    /// Every stream made or wrapped for this device ([`Self::new_stream`],
    /// [`Self::wrap_stream`]) that is still alive: what "all work on the
    /// device" means for reading buffers back, freeing them and
    /// `synchronize`.
    streams: std::sync::Mutex<Vec<std::sync::Weak<StreamInner>>>,
}

/// A CUDA stream of the runtime's: its own (destroyed on drop, after its
/// work) or a caller's (`owned: false`, kept alive by `keep` when the caller
/// handed over a handle that owns it, e.g. cudarc's `Arc<CudaStream>`).
pub struct StreamInner {
    pub raw: sys::CUstream,
    /// Unique in the process, never reused (handles are): see
    /// [`CudaDevice::stream_key`].
    pub id: u64,
    owned: bool,
    dev: Arc<CudaDevice>,
    _keep: Option<Box<dyn std::any::Any + Send + Sync>>,
}

// SAFETY: stream handles are usable from any thread of the process (the
// driver API is thread-safe; each use binds the context first).
unsafe impl Send for StreamInner {}
unsafe impl Sync for StreamInner {}

impl std::fmt::Debug for StreamInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({:p}, {})", self.raw, if self.owned { "own" } else { "the caller's" })
    }
}

impl StreamInner {
    pub fn synchronize(&self) -> CuResult<()> {
        self.dev.not_capturing("synchronize")?;
        self.dev.bind()?;
        unsafe { sys::cuStreamSynchronize(self.raw) }.result().map_err(drv)
    }
    /// An event recorded on this stream now.
    pub fn record(&self) -> CuResult<Event> {
        self.dev.bind()?;
        let e = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(drv)?;
        let ev = Event { e, stream: self.raw };
        ev.record()?;
        Ok(ev)
    }
    /// Work queued on this stream from now on waits for `e`.
    pub fn wait(&self, e: &Event) -> CuResult<()> {
        self.dev.bind()?;
        unsafe { sys::cuStreamWaitEvent(self.raw, e.e, 0) }.result().map_err(drv)
    }
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.owned && self.dev.bind().is_ok() {
            unsafe {
                let _ = sys::cuStreamSynchronize(self.raw);
                let _ = sys::cuStreamDestroy_v2(self.raw);
            }
        }
    }
}

/// A new [`StreamInner::id`] (from 1: 0 is the device's own stream).
fn next_stream_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

thread_local! {
    /// The streams the calling thread's work goes to, innermost scope last
    /// ([`CudaDevice::scoped`]).
    static CURRENT: std::cell::RefCell<Vec<Arc<StreamInner>>> = const { std::cell::RefCell::new(Vec::new()) };
}

// SAFETY: the context handle is process-wide and every use first makes it
// current on the calling thread (`bind`); the driver API is thread-safe.
unsafe impl Send for CudaDevice {}
unsafe impl Sync for CudaDevice {}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaDevice({} {}, sm_{})", self.ordinal, self.name, self.sm)
    }
}

/// Whether a CUDA driver library can be loaded at all: the driver's names
/// on Linux and Windows. (Not `sys::is_culib_present`: it exists only when
/// cudarc loads the library at run time, and another crate in the build —
/// candle's CUDA side — may make cudarc link it instead; then it is loaded
/// already and the open below finds it.)
pub fn driver_present() -> bool {
    library_present(&["libcuda.so.1", "libcuda.so", "nvcuda.dll"])
}

/// Whether a shared library loads under one of `names` (checked before
/// calling into cudarc's bindings for it, which panic without it).
pub(crate) fn library_present(names: &[&str]) -> bool {
    names.iter().any(|name| {
        // SAFETY: loading a library runs its initializers, as cudarc's own
        // loading does; nothing from it is called here.
        unsafe { libloading::Library::new(*name) }.is_ok()
    })
}

impl CudaDevice {
    /// The handle of device `ordinal` (opened once per process: every caller
    /// shares its stream, so work on its buffers stays ordered).
    pub fn open(ordinal: usize) -> CuResult<Arc<CudaDevice>> {
        static OPEN: std::sync::Mutex<Vec<Arc<CudaDevice>>> = std::sync::Mutex::new(Vec::new());
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = open.iter().find(|d| d.ordinal == ordinal) {
            return Ok(d.clone());
        }
        let d = Self::open_new(ordinal)?;
        open.push(d.clone());
        Ok(d)
    }

    fn open_new(ordinal: usize) -> CuResult<Arc<CudaDevice>> {
        if !driver_present() {
            return Err("no CUDA driver (libcuda) found on this machine".into());
        }
        result::init().map_err(drv)?;
        let count = result::device::get_count().map_err(drv)?;
        if ordinal as i32 >= count {
            return Err(format!("CUDA device {ordinal} requested, {count} present"));
        }
        let dev = result::device::get(ordinal as i32).map_err(drv)?;
        // SAFETY: `dev` comes from device::get.
        let ctx = unsafe { result::primary_ctx::retain(dev) }.map_err(drv)?;
        unsafe { result::ctx::set_current(ctx) }.map_err(drv)?;
        let attr = |a| unsafe { result::device::get_attribute(dev, a) }.map_err(drv);
        let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32;
        let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32;
        let smem = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32;
        let sms = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        // (each as the driver says; where it does not, an sm_90 SM's:
        // these only weigh one compilation against another)
        let or = |a, d: u32| attr(a).map_or(d, |c| c.max(0) as u32);
        let sm_limits = SmLimits {
            smem: or(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472),
            smem_reserved: or(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024),
            regs: or(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536),
            threads: or(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048),
            programs: or(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32),
        };
        // (deprecated in newer drivers' headers, still answered; 0 if not)
        let clock = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).map_or(0, |c| c.max(0) as u32);
        let name = result::device::get_name(dev).map_err(drv)?;
        let mut version = 0;
        // SAFETY: writes one int.
        let version = if unsafe { sys::cuDriverGetVersion(&mut version) }.result().is_ok() { version } else { 0 };
        // (a blocking stream: it also waits for, and is waited for by, the
        // legacy default stream that synchronous copies use)
        let mut stream = std::ptr::null_mut();
        unsafe { sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_DEFAULT as u32) }.result().map_err(drv)?;
        Ok(Arc::new(CudaDevice {
            ordinal,
            dev,
            ctx,
            stream,
            capture: std::sync::Mutex::new(None),
            capture_open: false.into(),
            name,
            sm: major * 10 + minor,
            max_smem_optin: smem,
            sm_limits,
            num_sms: sms,
            clock_khz: clock,
            dependent_launch: major >= 9 && version >= 12030,
            streams: std::sync::Mutex::new(vec![]),
        }))
    }

    /// Whether the calling thread is capturing a graph on this device.
    pub fn capturing(&self) -> bool {
        self.own_capture(|_| ()).is_some()
    }

    /// `f` on the calling thread's open capture, if it has one. (The flag
    /// is read relaxed: only the capturing thread can find its own capture,
    /// and it set the flag itself before; for any other thread either
    /// value leads to `None`.)
    fn own_capture<R>(&self, f: impl FnOnce(&mut Capture) -> R) -> Option<R> {
        if !self.capture_open.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        self.capture.lock().unwrap_or_else(|p| p.into_inner()).as_mut().filter(|c| c.thread == std::thread::current().id()).map(f)
    }

    /// Which stream scope the calling thread is in for this device: the
    /// innermost scope's [`StreamInner::id`], 0 outside any (the device's
    /// stream). A capture keeps the key of the scope it runs in (its
    /// stream is a detail of the capture).
    pub fn stream_key(&self) -> u64 {
        CURRENT.with(|c| c.borrow().iter().rev().find(|s| std::ptr::eq(Arc::as_ptr(&s.dev), self)).map(|s| s.id)).unwrap_or(0)
    }

    /// Whether a stream with [`StreamInner::id`] `key` is still alive (0,
    /// the device's stream, always is).
    pub fn stream_key_live(&self, key: u64) -> bool {
        key == 0 || self.streams.lock().unwrap_or_else(|p| p.into_inner()).iter().any(|w| w.upgrade().is_some_and(|s| s.id == key))
    }

    /// The stream the calling thread's work goes to: its capture stream
    /// while it captures, else the innermost stream scope of the thread for
    /// this device ([`Self::scoped`]), else the device's stream.
    pub(crate) fn stream(&self) -> sys::CUstream {
        if let Some(s) = self.own_capture(|c| c.stream) {
            return s;
        }
        CURRENT.with(|c| c.borrow().iter().rev().find(|s| std::ptr::eq(Arc::as_ptr(&s.dev), self)).map(|s| s.raw)).unwrap_or(self.stream)
    }

    /// A new stream of the runtime's own. Blocking with respect to the
    /// legacy stream, as the device's stream is: the synchronous host
    /// copies order themselves with its work.
    pub fn new_stream(self: &Arc<Self>) -> CuResult<Arc<StreamInner>> {
        self.bind()?;
        let mut raw = std::ptr::null_mut();
        unsafe { sys::cuStreamCreate(&mut raw, sys::CUstream_flags::CU_STREAM_DEFAULT as u32) }.result().map_err(drv)?;
        Ok(self.register(StreamInner { raw, id: next_stream_id(), owned: true, dev: self.clone(), _keep: None }))
    }

    /// A caller's stream (`raw`, of this device's context), never destroyed
    /// by the runtime; `keep` is held as long as the stream is (the owner
    /// of the handle, when the caller has one).
    ///
    /// # Safety
    /// `raw` is a live stream of this device's primary context and stays
    /// alive as long as the returned stream, unless `keep` keeps it alive.
    pub unsafe fn wrap_stream(self: &Arc<Self>, raw: sys::CUstream, keep: Option<Box<dyn std::any::Any + Send + Sync>>) -> CuResult<Arc<StreamInner>> {
        self.bind()?;
        // the stream must belong to our context (the primary one)
        let mut ctx = std::ptr::null_mut();
        unsafe { sys::cuStreamGetCtx(raw, &mut ctx) }.result().map_err(drv)?;
        if ctx != self.ctx {
            return Err(format!("the stream belongs to another CUDA context than device {}'s primary context", self.ordinal));
        }
        Ok(self.register(StreamInner { raw, id: next_stream_id(), owned: false, dev: self.clone(), _keep: keep }))
    }

    fn register(&self, s: StreamInner) -> Arc<StreamInner> {
        let s = Arc::new(s);
        let mut list = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&s));
        s
    }

    /// Runs `f` with `s` as the calling thread's stream for this device.
    pub fn scoped<R>(s: &Arc<StreamInner>, f: impl FnOnce() -> R) -> R {
        struct Pop;
        impl Drop for Pop {
            fn drop(&mut self) {
                CURRENT.with(|c| c.borrow_mut().pop());
            }
        }
        CURRENT.with(|c| c.borrow_mut().push(s.clone()));
        let _pop = Pop;
        f()
    }

    /// The raw primary context.
    pub fn raw_context(&self) -> sys::CUcontext {
        self.ctx
    }

    /// An error if a capture is open (for operations that synchronize).
    fn not_capturing(&self, what: &str) -> CuResult<()> {
        if self.capturing() {
            return Err(format!("{what} while a CUDA graph is being captured (allocate, copy and tune before the capture: run the work once outside it)"));
        }
        Ok(())
    }

    /// Start capturing the calling thread's work into a graph (one capture
    /// per device at a time), on a capture stream of its own: non-blocking,
    /// so that other threads' synchronous copies (the legacy stream) do
    /// not touch it.
    pub fn begin_capture(&self) -> CuResult<()> {
        self.bind()?;
        let mut cap = self.capture.lock().unwrap_or_else(|p| p.into_inner());
        if cap.is_some() {
            return Err("a CUDA graph capture is already open on this device".into());
        }
        let mut stream = std::ptr::null_mut();
        unsafe { sys::cuStreamCreate(&mut stream, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32) }.result().map_err(drv)?;
        if let Err(e) = unsafe { sys::cuStreamBeginCapture_v2(stream, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) }.result() {
            unsafe {
                let _ = sys::cuStreamDestroy_v2(stream);
            }
            return Err(drv(e));
        }
        *cap = Some(Capture { thread: std::thread::current().id(), stream, keep: vec![] });
        self.capture_open.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Keep `m` alive as long as the graph the calling thread captures (a
    /// no-op when it captures none).
    pub fn keep_alive(&self, m: &Arc<DevMem>) {
        self.own_capture(|c| c.keep.push(m.clone()));
    }

    /// Close the capture: the graph of the work queued since
    /// [`Self::begin_capture`], instantiated (`Ok` only if the capture and
    /// the instantiation succeeded; the capture is closed either way).
    pub fn end_capture(self: &Arc<Self>) -> CuResult<Graph> {
        self.bind()?;
        let cap = {
            let mut c = self.capture.lock().unwrap_or_else(|p| p.into_inner());
            if !c.as_ref().is_some_and(|c| c.thread == std::thread::current().id()) {
                return Err("this thread has no CUDA graph capture open".into());
            }
            self.capture_open.store(false, std::sync::atomic::Ordering::Relaxed);
            c.take().unwrap()
        };
        let mut graph = std::ptr::null_mut();
        let r = unsafe { sys::cuStreamEndCapture(cap.stream, &mut graph) }.result().map_err(drv);
        unsafe {
            let _ = sys::cuStreamDestroy_v2(cap.stream);
        }
        let keep = cap.keep;
        r?;
        let mut exec = std::ptr::null_mut();
        let r = unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) }.result().map_err(drv);
        if let Err(e) = r {
            unsafe {
                let _ = sys::cuGraphDestroy(graph);
            }
            return Err(e);
        }
        Ok(Graph { graph, exec, dev: self.clone(), _keep: keep })
    }

    /// The PTX target to emit for this device (sm_90 for Hopper and newer).
    pub fn ptx_target(&self) -> u32 {
        if self.sm >= 90 {
            90
        } else {
            80
        }
    }

    pub fn bind(&self) -> CuResult<()> {
        unsafe { result::ctx::set_current(self.ctx) }.map_err(drv)
    }

    /// Wait for the device's stream (all work queued on this device:
    /// launches, copies and graph replays go there; synchronous copies wait
    /// for themselves). Not the context: another thread's capture stream is
    /// not to be waited for.
    pub fn synchronize(&self) -> CuResult<()> {
        self.not_capturing("synchronize")?;
        self.bind()?;
        self.wait_stream()
    }

    /// Wait for the device's stream and every live stream made or wrapped
    /// for it (the context bound by the caller): all work that may touch
    /// a buffer of this device.
    fn wait_stream(&self) -> CuResult<()> {
        unsafe { sys::cuStreamSynchronize(self.stream) }.result().map_err(drv)?;
        let live: Vec<Arc<StreamInner>> = self.streams.lock().unwrap_or_else(|p| p.into_inner()).iter().filter_map(|w| w.upgrade()).collect();
        for s in live {
            unsafe { sys::cuStreamSynchronize(s.raw) }.result().map_err(drv)?;
        }
        Ok(())
    }

    pub fn alloc(self: &Arc<Self>, bytes: usize) -> CuResult<DevMem> {
        self.not_capturing("allocation")?;
        self.bind()?;
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }.map_err(drv)?;
        // zero-fill so that fresh buffers read as zeros, as on the CPU
        unsafe { result::memset_d8_sync(ptr, 0, bytes.max(1)) }.map_err(drv)?;
        Ok(DevMem { ptr, bytes, dev: self.clone(), owner: Owner::Runtime })
    }

    pub fn load(&self, ptx: &str, entry: &str) -> CuResult<Loaded> {
        self.bind()?;
        let src = CString::new(ptx).map_err(|e| e.to_string())?;
        // SAFETY: a NUL-terminated PTX image.
        let module = unsafe { result::module::load_data(src.as_ptr() as *const c_void) }.map_err(|e| format!("the driver rejected the PTX: {e:?}"))?;
        let func = unsafe { result::module::get_function(module, CString::new(entry).unwrap()) }.map_err(drv)?;
        Ok(Loaded { module, func, smem_set: std::sync::Mutex::new(0) })
    }

    /// Launch `k` with `params` (one pointer per kernel parameter, each to a
    /// value of the parameter's size). `dependent`: with the
    /// programmatic-stream-serialization attribute — only for a kernel
    /// that waits for the grids it depends on before anything else
    /// (`PtxKernel::dependent_launch`), on a device that has it
    /// ([`Self::dependent_launch`]).
    pub fn launch(&self, k: &Loaded, grid: [u32; 3], threads: u32, smem: u32, params: &mut [*mut c_void], dependent: bool) -> CuResult<()> {
        self.bind()?;
        if smem > self.max_smem_optin {
            return Err(format!("needs {smem} bytes of shared memory per program; the device allows {}", self.max_smem_optin));
        }
        {
            let mut set = k.smem_set.lock().unwrap_or_else(|p| p.into_inner());
            if smem > 48 * 1024 && *set < smem {
                unsafe {
                    result::function::set_function_attribute(k.func, sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)
                }
                .map_err(drv)?;
                *set = smem;
            }
        }
        if dependent && self.dependent_launch {
            // SAFETY: an all-zero attribute value is valid (a union of
            // plain data); the attribute and the config outlive the call.
            let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
            attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attr.value.programmaticStreamSerializationAllowed = 1;
            let cfg = sys::CUlaunchConfig {
                gridDimX: grid[0],
                gridDimY: grid[1],
                gridDimZ: grid[2],
                blockDimX: threads,
                blockDimY: 1,
                blockDimZ: 1,
                sharedMemBytes: smem,
                hStream: self.stream(),
                attrs: &mut attr,
                numAttrs: 1,
            };
            // SAFETY: `params` holds one pointer per kernel parameter, as
            // for `launch_kernel`.
            return unsafe { sys::cuLaunchKernelEx(&cfg, k.func, params.as_mut_ptr(), std::ptr::null_mut()) }.result().map_err(drv);
        }
        unsafe { result::launch_kernel(k.func, (grid[0], grid[1], grid[2]), (threads, 1, 1), smem, self.stream(), params) }.map_err(drv)
    }

    /// Encode a tiled tensor map of `dtype` elements (F16, BF16 or F32; f32
    /// bits travel unchanged unless `round_tf32`: a `TFLOAT32` map, whose
    /// copies round each element to tf32) with 128-byte swizzle, zero out-of-bounds fill and `box_dims`
    /// (innermost first), for a kernel's TMA parameter (`ptx::tma`).
    pub fn encode_tensor_map(
        &self,
        dtype: ferrotile_ir::DType,
        m: &ferrotile_backends::abi::TensorMapArgs,
        box_dims: &[u32],
        round_tf32: bool,
    ) -> CuResult<TensorMap> {
        use sys::CUtensorMapDataType_enum as D;
        let dt = match dtype {
            ferrotile_ir::DType::F16 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            ferrotile_ir::DType::BF16 => D::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            ferrotile_ir::DType::F32 if round_tf32 => D::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
            ferrotile_ir::DType::F32 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            // (bytes copied as they are; out of bounds reads as 0 either way)
            ferrotile_ir::DType::I8 | ferrotile_ir::DType::F8E4M3 | ferrotile_ir::DType::F8E5M2 => D::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            d => return Err(format!("no tensor maps of {d}")),
        };
        let rank = m.dims.len();
        if box_dims.len() != rank || m.strides.len() + 1 != rank {
            return Err("tensor map rank mismatch".into());
        }
        self.bind()?;
        let mut tm = TensorMap([0; 16]);
        let ones = [1u32; 5];
        // SAFETY: `tm` is 128 bytes, 64-byte aligned; the arrays hold
        // `rank` (strides: `rank - 1`) entries.
        let r = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut tm as *mut TensorMap as *mut sys::CUtensorMap,
                dt,
                rank as u32,
                m.address as *mut c_void,
                m.dims.as_ptr(),
                m.strides.as_ptr(),
                box_dims.as_ptr(),
                ones.as_ptr(),
                sys::CUtensorMapInterleave_enum::CU_TENSOR_MAP_INTERLEAVE_NONE,
                sys::CUtensorMapSwizzle_enum::CU_TENSOR_MAP_SWIZZLE_128B,
                // L2 promotion to 128 B: a box row (every map's inner box
                // extent is one 128-byte swizzle atom), so nothing beyond
                // what the copy reads. With 256 B every request also
                // fetched the next line (for the swapped decode's M-major
                // boxes, the neighbouring program's columns): decode
                // 16×8192×8192 bf16 34.4–34.9 → 33.1–33.4 µs, large
                // shapes unchanged (RESULTS, session 11).
                sys::CUtensorMapL2promotion_enum::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                sys::CUtensorMapFloatOOBfill_enum::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        r.result().map_err(drv)?;
        Ok(tm)
    }

    pub fn event(&self) -> CuResult<Event> {
        self.not_capturing("timing")?;
        self.bind()?;
        let e = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(drv)?;
        Ok(Event { e, stream: self.stream() })
    }
}

/// A thread's open capture ([`CudaDevice::begin_capture`]).
struct Capture {
    thread: std::thread::ThreadId,
    stream: sys::CUstream,
    keep: Vec<Arc<DevMem>>,
}

/// An instantiated CUDA graph ([`CudaDevice::end_capture`]); holds the device
/// memory its work uses.
pub struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    dev: Arc<CudaDevice>,
    _keep: Vec<Arc<DevMem>>,
}

unsafe impl Send for Graph {}
unsafe impl Sync for Graph {}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Graph({} buffers)", self._keep.len())
    }
}

impl Graph {
    /// Queue the graph's work on the calling thread's stream.
    pub fn launch(&self) -> CuResult<()> {
        self.dev.not_capturing("replaying a graph")?;
        self.dev.bind()?;
        unsafe { sys::cuGraphLaunch(self.exec, self.dev.stream()) }.result().map_err(drv)
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // (the graph's work may still run: wait for it before the memory
        // it holds goes)
        if self.dev.bind().is_ok() {
            let _ = self.dev.wait_stream();
            unsafe {
                let _ = sys::cuGraphExecDestroy(self.exec);
                let _ = sys::cuGraphDestroy(self.graph);
            }
        }
    }
}

/// A Hopper tensor map: opaque, 128 bytes, 64-byte aligned (the driver's
/// requirement), passed to a kernel by value.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug)]
pub struct TensorMap(pub [u64; 16]);

/// A loaded kernel.
pub struct Loaded {
    module: sys::CUmodule,
    func: sys::CUfunction,
    smem_set: std::sync::Mutex<u32>,
}

impl Loaded {
    /// Local memory per thread the compiled function uses (spilled
    /// registers, a stack frame), in bytes.
    pub fn local_bytes(&self) -> CuResult<u32> {
        // SAFETY: a function of a loaded module, which `self` keeps loaded.
        let v = unsafe { result::function::get_function_attribute(self.func, sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES) }.map_err(drv)?;
        Ok(v.max(0) as u32)
    }
    /// Registers per thread of the compiled function.
    pub fn registers(&self) -> CuResult<u32> {
        // SAFETY: as above.
        let v = unsafe { result::function::get_function_attribute(self.func, sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS) }.map_err(drv)?;
        Ok(v.max(0) as u32)
    }
}

/// Per-SM resources that bound how many programs share an SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmLimits {
    /// Shared memory of an SM, bytes.
    pub smem: u32,
    /// Shared memory the driver reserves per program, bytes.
    pub smem_reserved: u32,
    /// 32-bit registers of an SM.
    pub regs: u32,
    /// Threads resident at once.
    pub threads: u32,
    /// Programs resident at once.
    pub programs: u32,
}

impl SmLimits {
    /// The programs of `threads` threads, `regs` registers per thread and
    /// `smem` bytes of shared memory that fit on one SM at once: the least
    /// of what shared memory, registers (allocated per warp in units of
    /// 256), threads and the program limit allow.
    pub fn programs_per_sm(&self, threads: u32, regs: u32, smem: u32) -> u32 {
        let warps = threads.div_ceil(32).max(1);
        let by_smem = if smem == 0 { u32::MAX } else { self.smem / (smem + self.smem_reserved) };
        let per_warp = (regs.max(1) * 32).next_multiple_of(256);
        let by_regs = (self.regs / per_warp) / warps;
        let by_threads = self.threads / (warps * 32);
        by_smem.min(by_regs).min(by_threads).min(self.programs)
    }
}

unsafe impl Send for Loaded {}
unsafe impl Sync for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        unsafe {
            let _ = result::module::unload(self.module);
        }
    }
}

/// Device memory; freed (after the device's streams are done with it) on
/// drop when the runtime owns it.
pub struct DevMem {
    pub ptr: u64,
    pub bytes: usize,
    dev: Arc<CudaDevice>,
    owner: Owner,
}

/// Who frees a [`DevMem`].
pub enum Owner {
    /// The runtime (`cuMemAlloc`; `cuMemFree` on drop).
    Runtime,
    /// The caller, who keeps it alive until the buffer is dropped (the
    /// drop waits for the work queued on it; raw pointers).
    Caller,
    /// The caller, who releases it only after the work ferrotile queued on
    /// it (stream-ordered, as a cudarc `CudaSlice` on the stream the work
    /// went to): the drop does not wait.
    Ordered,
    /// This value, dropped after the device's streams are done (a
    /// cudarc `CudaSlice` handed over, which frees itself).
    Handle(Box<dyn std::any::Any + Send + Sync>),
}

impl std::fmt::Debug for DevMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DevMem({:#x}, {} bytes)", self.ptr, self.bytes)
    }
}

impl DevMem {
    /// Memory the runtime did not allocate, `bytes` long at `ptr`.
    ///
    /// # Safety
    /// `ptr .. ptr + bytes` is device memory of `dev`'s context, alive until
    /// the `DevMem` drops (`Owner::Caller`) or as long as `owner` is.
    pub unsafe fn foreign(dev: &Arc<CudaDevice>, ptr: u64, bytes: usize, owner: Owner) -> DevMem {
        DevMem { ptr, bytes, dev: dev.clone(), owner }
    }
    /// Gives up the memory without freeing it: the handle it came with,
    /// if any (the caller takes over).
    pub fn release(mut self) -> Option<Box<dyn std::any::Any + Send + Sync>> {
        if self.dev.bind().is_ok() {
            let _ = self.dev.wait_stream();
        }
        match std::mem::replace(&mut self.owner, Owner::Caller) {
            Owner::Handle(h) => Some(h),
            _ => None,
        }
    }
    /// Whether a handed-over owner ([`Owner::Handle`]) holds the memory.
    pub fn is_handle(&self) -> bool {
        matches!(self.owner, Owner::Handle(_))
    }
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }
    pub fn htod(&self, src: &[u8]) -> CuResult<()> {
        self.dev.not_capturing("a host-to-device copy")?;
        if src.len() != self.bytes {
            return Err(format!("copy of {} bytes into {}", src.len(), self.bytes));
        }
        self.dev.bind()?;
        if src.is_empty() {
            return Ok(());
        }
        // (after every stream's queued work: a caller's non-blocking stream
        // does not order itself with this synchronous copy)
        self.dev.wait_stream()?;
        unsafe { result::memcpy_htod_sync(self.ptr, src) }.map_err(drv)
    }
    /// Device-to-device copy of all of `src` (same size), queued on the stream.
    pub fn copy_from(&self, src: &DevMem) -> CuResult<()> {
        if src.bytes != self.bytes {
            return Err(format!("copy of {} bytes into {}", src.bytes, self.bytes));
        }
        self.dev.bind()?;
        unsafe { result::memcpy_dtod_async(self.ptr, src.ptr, self.bytes, self.dev.stream()) }.map_err(drv)
    }
    pub fn dtoh(&self) -> CuResult<Vec<u8>> {
        self.dev.not_capturing("a device-to-host copy")?;
        self.dev.bind()?;
        let mut v = vec![0u8; self.bytes];
        if self.bytes > 0 {
            self.dev.wait_stream()?;
            unsafe { result::memcpy_dtoh_sync(&mut v, self.ptr) }.map_err(drv)?;
        }
        Ok(v)
    }
}

impl Drop for DevMem {
    fn drop(&mut self) {
        // (the caller's memory too: once the buffer is gone, the caller may
        // free it, so no queued work may still use it — unless the caller
        // orders its release after that work itself)
        if matches!(self.owner, Owner::Ordered) {
            return;
        }
        if self.dev.bind().is_ok() {
            let _ = self.dev.wait_stream();
            if matches!(self.owner, Owner::Runtime) {
                unsafe {
                    let _ = result::free_sync(self.ptr);
                }
            }
        }
        // (a handle drops after the wait, and frees what it owns)
    }
}

/// Page-locked host memory (`cuMemHostAlloc`): what asynchronous copies
/// read from and write to. Every copy queued on it leaves an event in
/// `pending`; the host touches the bytes, and frees them, only after those.
pub struct PinnedMem {
    ptr: *mut u8,
    pub bytes: usize,
    dev: Arc<CudaDevice>,
    pending: std::sync::Mutex<Vec<Event>>,
}

// SAFETY: the allocation is process-wide host memory; access to its bytes
// goes through `with`/`with_mut`, after the pending copies, under `&`/`&mut`.
unsafe impl Send for PinnedMem {}
unsafe impl Sync for PinnedMem {}

impl PinnedMem {
    pub fn new(dev: &Arc<CudaDevice>, bytes: usize) -> CuResult<PinnedMem> {
        dev.not_capturing("a pinned allocation")?;
        dev.bind()?;
        let ptr = unsafe { result::malloc_host(bytes.max(1), 0) }.map_err(drv)? as *mut u8;
        // zero-filled, as device buffers are
        unsafe { std::ptr::write_bytes(ptr, 0, bytes.max(1)) };
        Ok(PinnedMem { ptr, bytes, dev: dev.clone(), pending: std::sync::Mutex::new(vec![]) })
    }
    /// Waits for every copy queued on this memory.
    pub fn wait(&self) -> CuResult<()> {
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if p.is_empty() {
            return Ok(());
        }
        self.dev.bind()?;
        for e in p.iter() {
            e.synchronize()?;
        }
        p.clear();
        Ok(())
    }
    /// The bytes, after the pending copies.
    pub fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> CuResult<R> {
        self.wait()?;
        // SAFETY: no copy is in flight (waited for), and a new one needs
        // `&mut self` (download) or is a read (upload), which `&self` allows.
        Ok(f(unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }))
    }
    /// The bytes, writable, after the pending copies.
    pub fn with_mut<R>(&mut self, f: impl FnOnce(&mut [u8]) -> R) -> CuResult<R> {
        self.wait()?;
        // SAFETY: `&mut self`: no other access; no copy in flight.
        Ok(f(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }))
    }
    fn note(&self, stream: sys::CUstream) -> CuResult<()> {
        let e = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(drv)?;
        let ev = Event { e, stream };
        ev.record()?;
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        // (drop the events already passed)
        p.retain(|e| !e.query().unwrap_or(false));
        p.push(ev);
        Ok(())
    }
}

impl Drop for PinnedMem {
    fn drop(&mut self) {
        if self.wait().is_ok() {
            unsafe {
                let _ = result::free_host(self.ptr as *mut c_void);
            }
        }
        // (a failed wait leaks the memory rather than free it under a copy)
    }
}

impl DevMem {
    /// Queues a copy of `src` (same size) into this memory on the calling
    /// thread's stream; the host does not wait.
    pub fn upload(&self, src: &PinnedMem) -> CuResult<()> {
        self.dev.not_capturing("an asynchronous copy")?;
        if src.bytes != self.bytes {
            return Err(format!("copy of {} bytes into {}", src.bytes, self.bytes));
        }
        self.dev.bind()?;
        let stream = self.dev.stream();
        if self.bytes > 0 {
            unsafe { sys::cuMemcpyHtoDAsync_v2(self.ptr, src.ptr as *const c_void, self.bytes, stream) }.result().map_err(drv)?;
        }
        src.note(stream)
    }
    /// Queues a copy of this memory into `dst` (same size) on the calling
    /// thread's stream; the host does not wait.
    pub fn download(&self, dst: &mut PinnedMem) -> CuResult<()> {
        self.dev.not_capturing("an asynchronous copy")?;
        if dst.bytes != self.bytes {
            return Err(format!("copy of {} bytes into {}", self.bytes, dst.bytes));
        }
        // (no earlier copy may still read what this one overwrites)
        dst.wait()?;
        self.dev.bind()?;
        let stream = self.dev.stream();
        if self.bytes > 0 {
            unsafe { sys::cuMemcpyDtoHAsync_v2(dst.ptr as *mut c_void, self.ptr, self.bytes, stream) }.result().map_err(drv)?;
        }
        dst.note(stream)
    }
}

pub struct Event {
    e: sys::CUevent,
    stream: sys::CUstream,
}

unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Event({:p})", self.e)
    }
}

impl Event {
    pub fn record(&self) -> CuResult<()> {
        unsafe { result::event::record(self.e, self.stream) }.map_err(drv)
    }
    /// Wait on the host until the work before the event is done.
    pub fn synchronize(&self) -> CuResult<()> {
        unsafe { result::event::synchronize(self.e) }.map_err(drv)
    }
    /// Whether the work before the event is done (never waits).
    pub fn query(&self) -> CuResult<bool> {
        match unsafe { sys::cuEventQuery(self.e) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            e => Err(format!("{e:?}")),
        }
    }
    /// The calling thread's current stream waits for this event.
    pub fn wait_on_current(&self, dev: &CudaDevice) -> CuResult<()> {
        dev.bind()?;
        unsafe { sys::cuStreamWaitEvent(dev.stream(), self.e, 0) }.result().map_err(drv)
    }
    pub fn raw(&self) -> sys::CUevent {
        self.e
    }
    /// Milliseconds from `self` to `end` (waits for `end`).
    pub fn elapsed_ms(&self, end: &Event) -> CuResult<f32> {
        unsafe { result::event::synchronize(end.e) }.map_err(drv)?;
        unsafe { result::event::elapsed(self.e, end.e) }.map_err(drv)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        unsafe {
            let _ = result::event::destroy(self.e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SmLimits;

    /// An H100's / H200's SM (sm_90): 228 KB of shared memory, 1 KB
    /// reserved per program, 64 K registers, 2048 threads, 32 programs.
    const SM90: SmLimits = SmLimits { smem: 233472, smem_reserved: 1024, regs: 65536, threads: 2048, programs: 32 };

    #[test]
    fn programs_per_sm_take_the_tightest_resource() {
        // the user attention's tiles (ptxas 13, sm_90a, session 46): 64×64
        // d128 on 4 warps, rotated (188 registers, 131 KB) against source
        // order (254, 98 KB) — shared memory decides, 1 against 2
        assert_eq!(SM90.programs_per_sm(128, 188, 131392), 1);
        assert_eq!(SM90.programs_per_sm(128, 254, 98352), 2);
        // 64×64 d64: 3 either way (shared memory rotated, registers not)
        assert_eq!(SM90.programs_per_sm(128, 136, 65856), 3);
        assert_eq!(SM90.programs_per_sm(128, 166, 49200), 3);
        // registers round up to 8 a thread (256 a warp): 255 → 256
        assert_eq!(SM90.programs_per_sm(256, 255, 0), 1);
        // threads and the program limit
        assert_eq!(SM90.programs_per_sm(1024, 32, 0), 2);
        assert_eq!(SM90.programs_per_sm(32, 16, 0), 32);
    }
}
