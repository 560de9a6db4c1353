//! The ferrotile kernel library, written in the DSL: [`softmax()`],
//! [`norm::layer_norm`], [`norm::rms_norm`], [`gemm::gemm`],
//! [`attention::attention`] and [`quant::wq_gemm`], each with a host API that
//! validates shapes and picks block sizes, and an f64 reference in
//! [`mod@reference`].

#![warn(missing_docs)]

pub mod attention;
pub mod epilogue;
pub mod gemm;
pub mod norm;
pub mod quant;
pub mod reference;
pub mod softmax;

pub use norm::{layer_norm, rms_norm};
pub use softmax::softmax;

/// The library's row kernels (dtype parameter `T`, one constexpr `BLOCK`)
/// with the block sizes their host APIs launch — for tools and tests that
/// compile every library kernel (PTX assembly, WGSL validation).
pub fn row_kernels() -> Vec<(&'static ferrotile::ir::Kernel, Vec<i64>)> {
    use norm::*;
    use softmax::*;
    let single = vec![16, 128, 1024, 4096, 16384];
    let looped = vec![1024, 2048, 4096];
    vec![
        (softmax_row::ir(), single.clone()),
        (softmax_looped::ir(), looped.clone()),
        (layer_norm_row::ir(), single.clone()),
        (layer_norm_looped::ir(), looped.clone()),
        (rms_norm_row::ir(), single),
        (rms_norm_looped::ir(), looped),
    ]
}

/// Every kernel of the library by name, with its generic IR: what `ferrotile
/// dump` specializes and prints, and what tools that walk the whole library
/// iterate over. Each kernel's constexprs and dtype parameters are in its IR
/// (`constexprs`, `dtype_params`).
pub fn catalog() -> Vec<&'static ferrotile::ir::Kernel> {
    vec![
        softmax::softmax_row::ir(),
        softmax::softmax_rows::ir(),
        softmax::softmax_looped::ir(),
        norm::layer_norm_row::ir(),
        norm::layer_norm_looped::ir(),
        norm::rms_norm_row::ir(),
        norm::rms_norm_looped::ir(),
        gemm::gemm_kernel::ir(),
        gemm::gemm_splitk_reduce::ir(),
        gemm::round_tf32_transpose_kernel::ir(),
        attention::attention_fwd::ir(),
        attention::attention_fwd_varlen::ir(),
        attention::attention_fwd_varlen_overlap::ir(),
        attention::attention_decode::ir(),
        attention::attention_combine::ir(),
        attention::attention_bwd_pre::ir(),
        attention::attention_bwd_dkdv::ir(),
        attention::attention_bwd_dq::ir(),
        attention::attention_bwd_dq_cast::ir(),
        attention::attention_bwd_sum::ir(),
        attention::attention_bwd_dkdv_varlen::ir(),
        attention::attention_bwd_dq_varlen::ir(),
        quant::wq_gemm_kernel::ir(),
        quant::wq_gemv_kernel::ir(),
        quant::gather_columns::ir(),
        quant::quantize_rows_kernel::ir(),
        quant::w8a8_gemm_kernel::ir(),
        quant::fp8_gemm_kernel::ir(),
    ]
}

/// Errors of the library's host APIs.
#[derive(Debug)]
pub enum LibError {
    /// Buffer sizes do not hold the declared shape.
    Shape(String),
    /// An invalid configuration or parameter.
    Config(String),
    /// The launch failed.
    Launch(ferrotile::Error),
}

impl std::fmt::Display for LibError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LibError::Shape(s) | LibError::Config(s) => f.write_str(s),
            LibError::Launch(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LibError {}

impl From<ferrotile::Error> for LibError {
    fn from(e: ferrotile::Error) -> Self {
        LibError::Launch(e)
    }
}

/// Candidate launch configurations for the row kernels on a GPU, heuristic
/// first: warps around the heuristic for single-tile rows (plus the chunked
/// kernel for rows of 8192 and more), chunk widths × warps for looped rows
/// (ranges from the sweeps in benches/NOTES.md).
pub(crate) fn row_candidates(heuristic: softmax::SoftmaxConfig, multi_row: bool) -> Vec<ferrotile::TuneConfig> {
    use ferrotile::TuneConfig;
    // (`ROWS` only where it is not 1, `PER_SM` where it is not 0: entries
    // keep their names in tuner caches written before those existed)
    let enc = |c: softmax::SoftmaxConfig| {
        let mut t = TuneConfig::new(c.num_warps).with("BLOCK", c.block as i64).with("LOOPED", c.looped as i64);
        if c.rows != 1 {
            t = t.with("ROWS", c.rows as i64);
        }
        if c.programs_per_sm != 0 {
            t = t.with("PER_SM", c.programs_per_sm as i64);
        }
        t
    };
    let mut v = vec![enc(heuristic)];
    let mut push = |c: softmax::SoftmaxConfig| {
        let t = enc(c);
        if !v.contains(&t) {
            v.push(t);
        }
    };
    if heuristic.looped {
        for block in [2048u32, 4096] {
            for w in [8u32, 16] {
                push(softmax::SoftmaxConfig { block, looped: true, num_warps: w, rows: 1, programs_per_sm: 0 });
            }
        }
    } else {
        for w in [1u32, 2, 4, 8, 16, 32] {
            // 32 warps (1024 threads) only for long rows: fewer values per thread
            if (heuristic.block / 32).max(1) >= w && (w < 32 || heuristic.block >= 8192) {
                push(softmax::SoftmaxConfig { num_warps: w, ..heuristic });
            }
        }
        // Short rows: several per program, 2048–8192 elements per tile
        // (measured on the H200, benches/RESULTS.md "Slice layouts": one
        // row of 256 per program ran bf16 at 38 % of copy, 16 rows at 82 %).
        if multi_row && heuristic.block <= 2048 {
            for rows in [2u32, 4, 8, 16, 32, 64] {
                if (2048..=8192).contains(&(rows * heuristic.block)) {
                    for w in [4u32, 8] {
                        push(softmax::SoftmaxConfig { num_warps: w, rows, ..heuristic });
                    }
                }
            }
        }
        // Long rows held whole in registers can lose to the chunked kernel
        // on some backends (WGSL on NVIDIA's Vulkan driver ran 16384-wide
        // rows at 51–62 % of its copy kernel): let the timings decide.
        if heuristic.block >= 8192 {
            for block in [2048u32, 4096] {
                for w in [8u32, 16] {
                    push(softmax::SoftmaxConfig { block, looped: true, num_warps: w, rows: 1, programs_per_sm: 0 });
                }
            }
        }
    }
    v
}

pub(crate) fn decode(c: &ferrotile::TuneConfig) -> ferrotile::Result<softmax::SoftmaxConfig> {
    let rows = if c.values.contains_key("ROWS") { c.get("ROWS")? as u32 } else { 1 };
    let programs_per_sm = if c.values.contains_key("PER_SM") { c.get("PER_SM")? as u32 } else { 0 };
    Ok(softmax::SoftmaxConfig { block: c.get("BLOCK")? as u32, looped: c.get("LOOPED")? != 0, num_warps: c.num_warps, rows, programs_per_sm })
}

/// A library error as a runtime error (a launch failure as it was; shape
/// and configuration errors as `Launch` errors with the message), so that
/// library calls compose with `?` in closures returning
/// `ferrotile::Result` — `Device::capture`, the autotuner.
impl From<LibError> for ferrotile::Error {
    fn from(e: LibError) -> Self {
        lib_to_launch(e)
    }
}

/// `Err(Shape)` naming buffer `what` of function `func` when it holds fewer
/// than `want` elements.
/// Elements a row-major operand of `rows ≥ 1` rows of `cols` elements,
/// `stride` apart, reaches: `(rows − 1)·stride + cols`, or an error naming
/// it where that overflows (a stride near `usize::MAX` must not wrap into
/// a small requirement that a short buffer then passes).
pub(crate) fn rows_extent(func: &str, what: &str, rows: usize, stride: usize, cols: usize) -> Result<usize, LibError> {
    (rows.max(1) - 1)
        .checked_mul(stride)
        .and_then(|v| v.checked_add(cols))
        .ok_or_else(|| LibError::Shape(format!("{func}: `{what}`: {rows} rows of {cols} elements, {stride} apart, overflow the address space")))
}

pub(crate) fn need_len(func: &str, what: &str, have: usize, want: usize) -> Result<(), LibError> {
    if have < want {
        Err(LibError::Shape(format!("{func}: `{what}` has {have} elements, {want} needed")))
    } else {
        Ok(())
    }
}

pub(crate) fn lib_to_launch(e: LibError) -> ferrotile::Error {
    match e {
        LibError::Launch(e) => e,
        other => ferrotile::Error::Launch { kernel: String::new(), msg: other.to_string() },
    }
}

/// Run `f` with the configuration the autotuner picks on GPUs (keyed by
/// dtype and row length), or with the heuristic on the CPU interpreter,
/// where timings say nothing about GPUs.
pub(crate) fn with_tuned(
    tuner: &ferrotile::Autotuner,
    dev: &ferrotile::Device,
    key: String,
    rows: usize,
    elements: usize,
    heuristic: softmax::SoftmaxConfig,
    mut f: impl FnMut(softmax::SoftmaxConfig) -> Result<(), LibError>,
) -> Result<(), LibError> {
    // Tiny problems run in a few microseconds: their timings are launch
    // noise and say nothing about larger shapes, so they use the heuristic.
    if dev.kind() == ferrotile::DeviceKind::Cpu || elements < (1 << 22) {
        return f(heuristic);
    }
    // Shape buckets: row length and row count, both to the next power of two.
    let key = format!("{key}|rows<={}", rows.max(1).next_power_of_two());
    tuner.run(dev, &key, |c| f(decode(c)?).map_err(lib_to_launch))?;
    Ok(())
}

pub(crate) fn check_rows(op: &str, name: &str, len: usize, rows: usize, cols: usize, stride: usize) -> Result<(), LibError> {
    if stride < cols {
        return Err(LibError::Shape(format!("{op}: row stride {stride} of `{name}` is smaller than the row length {cols}")));
    }
    let need = if rows == 0 { 0 } else { rows_extent(op, name, rows, stride, cols)? };
    if len < need {
        return Err(LibError::Shape(format!("{op}: `{name}` has {len} elements, but {rows} rows of {cols} with stride {stride} need {need}")));
    }
    if rows > u32::MAX as usize || stride > i32::MAX as usize || cols > i32::MAX as usize {
        return Err(LibError::Shape(format!("{op}: {rows}×{cols} (stride {stride}) exceeds the 32-bit grid/stride limits")));
    }
    Ok(())
}

/// A row kernel walks columns `start + arange(0, block)` in i32: the last
/// chunk must not overflow (so that the unguarded launches behind the host
/// checks stay in bounds).
pub(crate) fn check_row_blocks(op: &str, cols: usize, block: usize) -> Result<(), LibError> {
    if cols.checked_add(block).is_none_or(|e| e > i32::MAX as usize) {
        return Err(LibError::Shape(format!("{op}: rows of {cols} elements (blocks of {block}) exceed the 32-bit column index")));
    }
    Ok(())
}

/// Device buffers the library keeps between calls, per device
/// ([`ferrotile::Device::id`]) and, where written, per stream: a placeholder for pointer parameters that a
/// constexpr flag leaves unused (e.g. GEMM without bias), the split-K
/// workspace and the tf32 GEMM's rounded operand copies. Allocating them per call would put an allocation, a memset
/// and a free — which synchronizes a CUDA device — into every call.
///
/// Per device and stream: the workspace and the f32 copies are written, so
/// each stream has its own (a split-K GEMM on one stream and another on a
/// second stream run at once on a GPU), each behind a lock of its own
/// (calls on other devices or streams never wait for it).
///
/// Lock order: a call that holds both takes [`scratch::tf32_copies`] first,
/// then [`scratch::workspace`] (a split-K GEMM on tf32 copies, the decode
/// attention, both backwards); [`scratch::placeholder`] holds its lock only
/// while it looks up. Taking them the other way round deadlocks against a
/// concurrent call (the test `scratch_locks_in_one_order`).
pub(crate) mod scratch {
    use crate::LibError;
    use ferrotile::{Buffer, Device, Element};
    use std::any::Any;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

    type Placeholders = HashMap<(usize, ferrotile::ir::DType), Arc<dyn Any + Send + Sync>>;

    /// Written scratch belongs to a device *and a stream*
    /// ([`Device::stream_key`]): work queued on two streams runs
    /// concurrently, and two calls sharing one workspace would overwrite
    /// each other's partial sums. A dropped stream's scratch is freed at
    /// the device's next scratch request. (Placeholders are never written:
    /// one per device.)
    type Key = (usize, u64);

    /// One key's buffers behind a lock of its own: calls on other devices
    /// or streams do not wait for it (a tuner timing candidates on one GPU
    /// holds its scratch for seconds). A dropped stream's slot is emptied
    /// and reused for the next new key: the locks allocated are as many as
    /// streams ever used scratch *at once*.
    type Slot<B> = &'static Mutex<Option<B>>;

    /// The slots of the live keys, and the emptied ones to reuse.
    struct Table<B: 'static> {
        map: HashMap<Key, Slot<B>>,
        free: Vec<Slot<B>>,
    }

    impl<B> Default for Table<B> {
        fn default() -> Self {
            Table { map: HashMap::new(), free: vec![] }
        }
    }

    /// The slot of `dev`'s current stream in `table`, after freeing the
    /// buffers of `dev`'s dropped streams (freeing waits for the device's
    /// work: done only when a stream died, and not inside a graph capture,
    /// which cannot wait).
    fn slot<B: Send>(table: &'static OnceLock<Mutex<Table<B>>>, dev: &Device) -> Slot<B> {
        let mut t = table.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
        if !dev.capturing() {
            let dead: Vec<Key> = t.map.keys().copied().filter(|&(d, s)| d == dev.id() && !dev.stream_key_live(s)).collect();
            for k in dead {
                let slot = t.map[&k];
                // (one still held — a guard kept past its stream — is
                // freed at a later request)
                let Ok(mut b) = slot.try_lock() else { continue };
                b.take();
                drop(b);
                t.map.remove(&k);
                t.free.push(slot);
            }
        }
        let key = (dev.id(), dev.stream_key());
        if let Some(&slot) = t.map.get(&key) {
            return slot;
        }
        let slot = t.free.pop().unwrap_or_else(|| Box::leak(Box::new(Mutex::new(None))));
        t.map.insert(key, slot);
        slot
    }

    /// A one-element buffer of `U` on `dev`, never written.
    pub fn placeholder<U: Element>(dev: &Device) -> Result<Arc<Buffer<U>>, LibError> {
        static M: OnceLock<Mutex<Placeholders>> = OnceLock::new();
        let mut m = M.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
        let key = (dev.id(), U::DTYPE);
        if let Some(b) = m.get(&key).and_then(|b| b.clone().downcast::<Buffer<U>>().ok()) {
            return Ok(b);
        }
        let b = Arc::new(dev.zeros::<U>(1)?);
        m.insert(key, b.clone());
        Ok(b)
    }

    /// The f32 workspace of the device and stream, at least `len` elements
    /// (grown, never shrunk), held exclusively while the guard lives:
    /// callers queue all the kernels that use it before releasing it (work
    /// on one stream runs in queue order). It has a second buffer for calls
    /// that need two ([`workspace_pair`]: the attention backward's row
    /// statistics and its f32 dQ).
    pub struct Workspace {
        guard: MutexGuard<'static, Option<[Buffer<f32>; 2]>>,
    }

    impl Workspace {
        pub fn buffer(&mut self) -> &mut Buffer<f32> {
            &mut self.guard.as_mut().expect("workspace present")[0]
        }
        pub fn pair_mut(&mut self) -> (&mut Buffer<f32>, &mut Buffer<f32>) {
            let [a, b] = self.guard.as_mut().expect("workspace present");
            (a, b)
        }
    }

    /// The two f32 buffers of the device and stream for tf32-rounded GEMM
    /// operands (and decode attention's partial outputs and log-sum-exps),
    /// at least `len_a` and `len_b` elements, held exclusively while the
    /// guard lives (separate from [`workspace`], which a split-K GEMM on
    /// them takes too).
    pub struct Tf32Copies {
        guard: MutexGuard<'static, Option<[Buffer<f32>; 2]>>,
    }

    impl Tf32Copies {
        pub fn buffer(&mut self, which: usize) -> &mut Buffer<f32> {
            &mut self.guard.as_mut().expect("copies present")[which]
        }
        pub fn pair_mut(&mut self) -> (&mut Buffer<f32>, &mut Buffer<f32>) {
            let [a, b] = self.guard.as_mut().expect("copies present");
            (a, b)
        }
        pub fn pair(&self) -> (&Buffer<f32>, &Buffer<f32>) {
            let [a, b] = self.guard.as_ref().expect("copies present");
            (a, b)
        }
    }

    static COPIES: OnceLock<Mutex<Table<[Buffer<f32>; 2]>>> = OnceLock::new();
    static WORKSPACES: OnceLock<Mutex<Table<[Buffer<f32>; 2]>>> = OnceLock::new();

    pub fn tf32_copies(dev: &Device, len_a: usize, len_b: usize) -> Result<Tf32Copies, LibError> {
        let mut guard = slot(&COPIES, dev).lock().unwrap_or_else(|p| p.into_inner());
        if guard.as_ref().is_none_or(|[a, b]| a.len() < len_a || b.len() < len_b) {
            let (oa, ob) = guard.take().map_or((0, 0), |[a, b]| (a.len(), b.len()));
            *guard = Some([dev.zeros::<f32>(len_a.max(oa).max(1))?, dev.zeros::<f32>(len_b.max(ob).max(1))?]);
        }
        Ok(Tf32Copies { guard })
    }

    pub fn workspace(dev: &Device, len: usize) -> Result<Workspace, LibError> {
        workspace_pair(dev, len, 0)
    }

    /// [`workspace`] with its second buffer at least `len_b` elements too.
    pub fn workspace_pair(dev: &Device, len_a: usize, len_b: usize) -> Result<Workspace, LibError> {
        let mut guard = slot(&WORKSPACES, dev).lock().unwrap_or_else(|p| p.into_inner());
        if guard.as_ref().is_none_or(|[a, b]| a.len() < len_a || b.len() < len_b) {
            // (each buffer grown only where it is short; the old ones are
            // freed first)
            let old = guard.take();
            let (oa, ob) = old.as_ref().map_or((0, 0), |[a, b]| (a.len(), b.len()));
            let [a, b] = match old {
                Some([a, b]) => [(a.len() >= len_a).then_some(a), (b.len() >= len_b).then_some(b)],
                None => [None, None],
            };
            let a = match a {
                Some(a) => a,
                None => dev.zeros::<f32>(len_a.max(oa).max(1))?,
            };
            let b = match b {
                Some(b) => b,
                None => dev.zeros::<f32>(len_b.max(ob).max(1))?,
            };
            *guard = Some([a, b]);
        }
        Ok(Workspace { guard })
    }

    /// Whether the workspace of `dev`'s stream `key` holds a buffer.
    #[cfg(test)]
    fn has_workspace(dev: &Device, key: u64) -> bool {
        // (a request from the device's stream frees dropped streams' first)
        drop(workspace(dev, 1).expect("workspace"));
        let slot = WORKSPACES.get().and_then(|t| t.lock().unwrap().map.get(&(dev.id(), key)).copied());
        slot.is_some_and(|s| s.lock().unwrap().is_some())
    }

    /// A stream's workspace is its own and goes with the stream (CUDA;
    /// elsewhere every stream is the device's queue, key 0); a held
    /// workspace does not stop another stream's request.
    #[test]
    fn workspaces_per_stream_freed_with_the_stream() {
        for dev in [Device::cpu()].into_iter().chain(Device::cuda(0).ok()) {
            let s = dev.new_stream().unwrap();
            let key = s.scope(|| {
                let mut w = workspace(&dev, 1000).unwrap();
                assert!(w.buffer().len() >= 1000);
                dev.stream_key()
            });
            if dev.kind() == ferrotile::DeviceKind::Cuda {
                assert_ne!(key, 0);
                assert!(has_workspace(&dev, key));
                // (held on the device's stream, requested on `s`: no wait)
                let held = workspace(&dev, 10).unwrap();
                s.scope(|| drop(workspace(&dev, 10).unwrap()));
                drop(held);
                drop(s);
                assert!(!dev.stream_key_live(key));
                assert!(!has_workspace(&dev, key), "the dropped stream's workspace stays");
                // (its emptied slot serves the next new stream)
                let table = || WORKSPACES.get().unwrap().lock().unwrap();
                let freed: Vec<*const Mutex<Option<[Buffer<f32>; 2]>>> = table().free.iter().map(|s| *s as *const _).collect();
                assert!(!freed.is_empty());
                let s2 = dev.new_stream().unwrap();
                let k2 = s2.scope(|| {
                    drop(workspace(&dev, 10).unwrap());
                    dev.stream_key()
                });
                let reused = table().map.get(&(dev.id(), k2)).map(|s| *s as *const _);
                assert!(reused.is_some_and(|r| freed.contains(&r)), "a new slot was allocated");
            } else {
                assert_eq!(key, 0);
            }
        }
    }
}
