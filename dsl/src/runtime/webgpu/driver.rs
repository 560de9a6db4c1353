//! wgpu runtime: runs WGSL from [`ferrotile_backends::wgsl`] on any adapter wgpu finds
//! (Vulkan, Metal, DX12 — including lavapipe, Mesa's CPU Vulkan driver,
//! which CI uses).
//!
//! - Adapter selection respects wgpu's environment variables: `WGPU_BACKEND`
//!   (and the other `InstanceDescriptor::from_env_or_default` variables),
//!   `WGPU_ADAPTER_NAME` (a case-insensitive substring of the adapter name)
//!   and `WGPU_POWER_PREF`. No adapter is an `Err`, never a panic.
//! - The device is requested with the adapter's own limits (so kernels get
//!   the adapter's maxima rather than WebGPU's defaults) and SUBGROUP where
//!   the emitter may use it; f16 values are widened with `unpack2x16float`
//!   where the adapter has SHADER_F16_IN_F32 (`FERROTILE_WGPU_F16=0`: the
//!   integer code path).
//! - Buffers are `STORAGE | COPY_SRC | COPY_DST`, their byte size rounded up
//!   to a multiple of 4 (packed 8/16-bit elements live in u32 words).
//! - Pipelines use explicit bind-group layouts built from
//!   [`BindingAbi`] (an automatic layout would drop unused parameters).
//! - Errors: every call that can fail validation runs inside error scopes;
//!   errors outside a scope and device loss are recorded and reported by the
//!   next operation. All errors are `String`s that callers wrap with the
//!   kernel name.
//!
//! All work goes to the device's one queue, so dispatches and copies are
//! ordered; `synchronize` waits for them.
//!
//! Timing: between [`WgpuDevice::begin_timing`] and
//! [`WgpuDevice::end_timing`] every dispatch (and, where the adapter has
//! TIMESTAMP_QUERY_INSIDE_ENCODERS, every buffer copy) *of the calling
//! thread* is bracketed by GPU timestamps (other threads' work is neither
//! counted nor touched); `end_timing` returns the sum of those intervals — device time
//! of the work itself, without the host's submission gaps. Where some
//! operation could not be timestamped it returns `None` and callers fall
//! back to wall-clock time.

use ferrotile_backends::abi::{BindingAbi, BindingKind};
use ferrotile_backends::wgsl::{WgslKernel, WgslOptions};
use std::sync::{Arc, Mutex};

pub type WgResult<T> = Result<T, String>;

pub struct WgpuDevice {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    /// Options the WGSL emitter must use for this device (workgroup size is
    /// set per launch).
    pub base_options: WgslOptions,
    /// An error raised outside an error scope, or the device-lost reason.
    pending: Arc<Mutex<Option<String>>>,
    /// Error scopes are a per-device stack (wgpu 30's scope guards pop in
    /// order): calls from several threads take turns so that each error
    /// reaches the call that caused it.
    scope_lock: Mutex<()>,
    /// TIMESTAMP_QUERY (dispatches) and TIMESTAMP_QUERY_INSIDE_ENCODERS
    /// (copies) were granted.
    timestamps: bool,
    encoder_timestamps: bool,
    /// Per thread that called `begin_timing`.
    timing: Mutex<std::collections::HashMap<std::thread::ThreadId, Timing>>,
}

/// Timestamp read-backs of the operations queued since `begin_timing`.
#[derive(Default)]
struct Timing {
    reads: Vec<wgpu::Buffer>,
    untimed: usize,
}

impl std::fmt::Debug for WgpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuDevice({} ({:?}))", self.info.name, self.info.backend)
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    pollster::block_on(f)
}

impl WgpuDevice {
    /// Open the adapter chosen by the environment (or wgpu's default).
    pub fn open() -> WgResult<Arc<WgpuDevice>> {
        // wgpu may panic on broken drivers; never let that escape.
        match std::panic::catch_unwind(Self::open_inner) {
            Ok(r) => r,
            Err(p) => {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                Err(format!("wgpu panicked while opening an adapter: {msg}"))
            }
        }
    }

    fn open_inner() -> WgResult<Arc<WgpuDevice>> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = match std::env::var("WGPU_ADAPTER_NAME") {
            Ok(want) if !want.is_empty() => {
                let want = want.to_lowercase();
                let all = block_on(instance.enumerate_adapters(wgpu::Backends::all()));
                let names: Vec<String> = all.iter().map(|a| a.get_info().name).collect();
                all.into_iter()
                    .find(|a| a.get_info().name.to_lowercase().contains(&want))
                    .ok_or_else(|| format!("WGPU_ADAPTER_NAME={want} matches none of the adapters {names:?}"))?
            }
            _ => block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::from_env().unwrap_or(wgpu::PowerPreference::HighPerformance),
                force_fallback_adapter: false,
                compatible_surface: None,
                // (the adapter's own limits, not rounded down to a bucket:
                // kernels size their workgroup storage by them)
                apply_limit_buckets: false,
            }))
            .map_err(|e| format!("no wgpu adapter: {e}"))?,
        };
        let info = adapter.get_info();
        let limits = adapter.limits();
        let features = adapter.features();
        // Subgroup shuffles only where subgroups hold at least a warp of
        // consecutive invocations (the emitter's assumption);
        // FERROTILE_WGPU_SUBGROUPS=0 turns them off.
        let subgroups =
            features.contains(wgpu::Features::SUBGROUP) && info.subgroup_min_size >= 32 && std::env::var("FERROTILE_WGPU_SUBGROUPS").map_or(true, |v| v != "0");
        let mut required_features = wgpu::Features::empty();
        if subgroups {
            required_features |= wgpu::Features::SUBGROUP;
        }
        let timestamps = features.contains(wgpu::Features::TIMESTAMP_QUERY);
        let encoder_timestamps = timestamps && features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS);
        if timestamps {
            required_features |= wgpu::Features::TIMESTAMP_QUERY;
        }
        if encoder_timestamps {
            required_features |= wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
        }
        let (device, queue) = block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("ferrotile"),
            required_features,
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| format!("wgpu adapter {} refused a device: {e}", info.name))?;
        let pending = Arc::new(Mutex::new(None::<String>));
        {
            let p = pending.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                let mut g = p.lock().unwrap_or_else(|x| x.into_inner());
                if g.is_none() {
                    *g = Some(format!("wgpu error: {e}"));
                }
            }));
            let p = pending.clone();
            device.set_device_lost_callback(move |reason, msg| {
                if reason != wgpu::DeviceLostReason::Destroyed {
                    *p.lock().unwrap_or_else(|x| x.into_inner()) = Some(format!("wgpu device lost ({reason:?}): {msg}"));
                }
            });
        }
        // f16 → f32 widening with `unpack2x16float` (exact) where the adapter
        // supports it; rounding to f16 stays in software either way.
        let shader_f16 = adapter.get_downlevel_capabilities().flags.contains(wgpu::DownlevelFlags::SHADER_F16_IN_F32)
            && std::env::var("FERROTILE_WGPU_F16").map_or(true, |v| v != "0");
        let base_options = WgslOptions {
            workgroup_size: 128,
            subgroups,
            shader_f16,
            max_workgroup_storage: limits.max_compute_workgroup_storage_size,
            word_stores: std::env::var("FERROTILE_WGSL_WORD_STORES").map_or(true, |v| v != "0"),
            ..WgslOptions::default()
        };
        Ok(Arc::new(WgpuDevice {
            device,
            queue,
            info,
            limits,
            base_options,
            pending,
            scope_lock: Mutex::new(()),
            timestamps,
            encoder_timestamps,
            timing: Mutex::new(Default::default()),
        }))
    }

    /// Adapter name and backend, e.g. "llvmpipe (LLVM 15.0.7, 256 bits) (Vulkan)".
    pub fn name(&self) -> String {
        format!("{} ({:?})", self.info.name, self.info.backend)
    }

    fn take_pending(&self) -> WgResult<()> {
        match self.pending.lock().unwrap_or_else(|x| x.into_inner()).take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Run `f` inside validation / out-of-memory / internal error scopes and
    /// turn any error they catch into an `Err`.
    fn scoped<T>(&self, f: impl FnOnce() -> T) -> WgResult<T> {
        let _turn = self.scope_lock.lock().unwrap_or_else(|x| x.into_inner());
        self.take_pending()?;
        let internal = self.device.push_error_scope(wgpu::ErrorFilter::Internal);
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let r = f();
        let mut errs = vec![];
        // (innermost first: scopes pop as a stack)
        for scope in [validation, oom, internal] {
            if let Some(e) = block_on(scope.pop()) {
                errs.push(e.to_string());
            }
        }
        self.take_pending()?;
        if errs.is_empty() {
            Ok(r)
        } else {
            Err(errs.join("; "))
        }
    }

    /// Whether dispatches can be timestamped (TIMESTAMP_QUERY).
    pub fn has_timestamps(&self) -> bool {
        self.timestamps
    }

    /// Whether dispatches and copies can both be timestamped.
    pub fn full_timestamps(&self) -> bool {
        self.encoder_timestamps
    }

    /// Start bracketing queued work with GPU timestamps. Returns false
    /// (and times nothing) when the adapter has no timestamp queries.
    pub fn begin_timing(&self) -> bool {
        if self.timestamps {
            self.timing.lock().unwrap_or_else(|x| x.into_inner()).insert(std::thread::current().id(), Timing::default());
        }
        self.timestamps
    }

    /// Milliseconds of device time of the dispatches and copies queued since
    /// `begin_timing` (waits for them), or `None` when timing was not
    /// started or some operation could not be timestamped.
    pub fn end_timing(&self) -> WgResult<Option<f64>> {
        let Some(t) = self.timing.lock().unwrap_or_else(|x| x.into_inner()).remove(&std::thread::current().id()) else {
            return Ok(None);
        };
        let (tx, rx) = std::sync::mpsc::channel();
        for (i, b) in t.reads.iter().enumerate() {
            let tx = tx.clone();
            b.slice(..).map_async(wgpu::MapMode::Read, move |r| {
                let _ = tx.send((i, r));
            });
        }
        drop(tx);
        self.synchronize()?;
        let mut ticks = 0u64;
        for (i, r) in rx.iter() {
            r.map_err(|e| format!("wgpu map_async (timestamps): {e}"))?;
            let b = &t.reads[i];
            let v = b.slice(..).get_mapped_range().map_err(|e| format!("wgpu get_mapped_range (timestamps): {e}"))?;
            let begin = u64::from_le_bytes(v[0..8].try_into().unwrap());
            let end = u64::from_le_bytes(v[8..16].try_into().unwrap());
            ticks += end.saturating_sub(begin);
            drop(v);
            b.unmap();
        }
        if t.untimed > 0 {
            return Ok(None);
        }
        Ok(Some(ticks as f64 * self.queue.get_timestamp_period() as f64 * 1e-6))
    }

    /// When timing is on: a two-entry query set and the buffer its resolved
    /// values are read back from (the caller resolves and copies).
    fn timing_slot(&self, can_time: bool) -> Option<(wgpu::QuerySet, wgpu::Buffer, wgpu::Buffer)> {
        let mut g = self.timing.lock().unwrap_or_else(|x| x.into_inner());
        let t = g.get_mut(&std::thread::current().id())?;
        if !can_time {
            t.untimed += 1;
            return None;
        }
        let qs = self.device.create_query_set(&wgpu::QuerySetDescriptor { label: None, ty: wgpu::QueryType::Timestamp, count: 2 });
        let resolve = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let read = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 16,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        t.reads.push(read.clone());
        Some((qs, resolve, read))
    }

    /// Wait until all submitted work has finished.
    pub fn synchronize(&self) -> WgResult<()> {
        self.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| format!("wgpu poll: {e}"))?;
        self.take_pending()
    }

    /// A zero-filled buffer of `bytes` bytes, rounded up to a multiple of 16
    /// so that a shader declaring it `array<vec4<T>>` sees every element.
    pub fn alloc(self: &Arc<Self>, bytes: usize) -> WgResult<WgpuMem> {
        let padded = bytes.div_ceil(16).max(1) * 16;
        if padded as u64 > self.limits.max_buffer_size || padded as u64 > self.limits.max_storage_buffer_binding_size {
            return Err(format!(
                "a buffer of {bytes} bytes exceeds the adapter's limits (max_buffer_size {}, max_storage_buffer_binding_size {})",
                self.limits.max_buffer_size, self.limits.max_storage_buffer_binding_size
            ));
        }
        let buf = self.scoped(|| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size: padded as u64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        Ok(WgpuMem { buf, bytes, dev: self.clone() })
    }

    /// Compile a kernel: shader module, explicit layouts, pipeline.
    pub fn load(&self, k: &WgslKernel) -> WgResult<WgpuPipeline> {
        let mut entries = vec![];
        let mut uniform_size = 0;
        for b in &k.bindings {
            if b.group != 0 {
                return Err(format!("binding group {} (only group 0 is supported)", b.group));
            }
            let ty = match &b.kind {
                BindingKind::Storage { read_only, .. } => wgpu::BufferBindingType::Storage { read_only: *read_only },
                BindingKind::Uniform { size, .. } => {
                    uniform_size = *size;
                    wgpu::BufferBindingType::Uniform
                }
            };
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: b.binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer { ty, has_dynamic_offset: false, min_binding_size: None },
                count: None,
            });
        }
        let nstorage = k.bindings.iter().filter(|b| matches!(b.kind, BindingKind::Storage { .. })).count() as u32;
        if nstorage > self.limits.max_storage_buffers_per_shader_stage {
            return Err(format!(
                "{nstorage} pointer parameters, more than the {} storage buffers per shader stage this adapter allows",
                self.limits.max_storage_buffers_per_shader_stage
            ));
        }
        let (layout, pipeline) = self.scoped(|| {
            let module = self
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor { label: Some(&k.entry), source: wgpu::ShaderSource::Wgsl(k.text.as_str().into()) });
            let layout = self.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: None, entries: &entries });
            let pl =
                self.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor { label: None, bind_group_layouts: &[Some(&layout)], immediate_size: 0 });
            let pipeline = self.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&k.entry),
                layout: Some(&pl),
                module: &module,
                entry_point: Some(&k.entry),
                compilation_options: Default::default(),
                cache: None,
            });
            (layout, pipeline)
        })?;
        Ok(WgpuPipeline { pipeline, layout, bindings: k.bindings.clone(), uniform_size })
    }

    /// Dispatch `grid` workgroups. `buffers[i]` is bound to pointer
    /// parameter `i`'s binding (None for scalar parameters); `uniform` is the
    /// packed scalar block (ignored when the kernel has no scalars).
    pub fn dispatch(&self, p: &WgpuPipeline, grid: [u32; 3], buffers: &[Option<&WgpuMem>], uniform: &[u8]) -> WgResult<()> {
        let maxd = self.limits.max_compute_workgroups_per_dimension;
        if grid.iter().any(|&g| g > maxd) {
            return Err(format!("grid {grid:?} exceeds the adapter's {maxd} workgroups per dimension"));
        }
        self.scoped(|| {
            let ubuf = if p.uniform_size > 0 {
                let mut data = uniform.to_vec();
                data.resize(p.uniform_size as usize, 0);
                let b = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: p.uniform_size as u64,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: true,
                });
                b.slice(..).get_mapped_range_mut().map_err(|e| format!("wgpu get_mapped_range_mut: {e}"))?.copy_from_slice(&data);
                b.unmap();
                Some(b)
            } else {
                None
            };
            let mut entries = vec![];
            for b in &p.bindings {
                let resource = match &b.kind {
                    BindingKind::Storage { param, .. } => match buffers.get(*param as usize).copied().flatten() {
                        Some(m) => m.buf.as_entire_binding(),
                        None => return Err(format!("no buffer for pointer parameter {param}")),
                    },
                    BindingKind::Uniform { .. } => ubuf.as_ref().expect("uniform buffer").as_entire_binding(),
                };
                entries.push(wgpu::BindGroupEntry { binding: b.binding, resource });
            }
            let bg = self.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &p.layout, entries: &entries });
            let mut enc = self.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            let slot = self.timing_slot(true);
            {
                let timestamp_writes = slot.as_ref().map(|(qs, ..)| wgpu::ComputePassTimestampWrites {
                    query_set: qs,
                    beginning_of_pass_write_index: Some(0),
                    end_of_pass_write_index: Some(1),
                });
                let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes });
                pass.set_pipeline(&p.pipeline);
                pass.set_bind_group(0, &bg, &[]);
                pass.dispatch_workgroups(grid[0], grid[1], grid[2]);
            }
            if let Some((qs, resolve, read)) = &slot {
                enc.resolve_query_set(qs, 0..2, resolve, 0);
                enc.copy_buffer_to_buffer(resolve, 0, read, 0, 16);
            }
            self.queue.submit([enc.finish()]);
            Ok(())
        })?
    }
}

/// A compiled kernel.
#[derive(Debug)]
pub struct WgpuPipeline {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    bindings: Vec<BindingAbi>,
    uniform_size: u32,
}

/// Device memory: `bytes` meaningful bytes in a buffer padded to 4.
#[derive(Debug)]
pub struct WgpuMem {
    pub buf: wgpu::Buffer,
    pub bytes: usize,
    dev: Arc<WgpuDevice>,
}

impl WgpuMem {
    /// Overwrite the first `data.len()` bytes (ordered after queued work).
    pub fn htod(&self, data: &[u8]) -> WgResult<()> {
        if data.len() > self.bytes {
            return Err(format!("upload of {} bytes into a buffer of {}", data.len(), self.bytes));
        }
        if data.is_empty() {
            return Ok(());
        }
        let mut v = data.to_vec();
        if !v.len().is_multiple_of(4) {
            // keep the padding bytes of the last word as they are
            if data.len() == self.bytes {
                v.resize(data.len().div_ceil(4) * 4, 0);
            } else {
                return Err("partial uploads must be a multiple of 4 bytes".into());
            }
        }
        self.dev.scoped(|| self.dev.queue.write_buffer(&self.buf, 0, &v))
    }

    /// Copy the contents back to the host (waits for queued work).
    pub fn dtoh(&self) -> WgResult<Vec<u8>> {
        let d = &self.dev;
        let size = self.buf.size();
        let staging = d.scoped(|| {
            let staging = d.device.create_buffer(&wgpu::BufferDescriptor {
                label: None,
                size,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut enc = d.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            enc.copy_buffer_to_buffer(&self.buf, 0, &staging, 0, size);
            d.queue.submit([enc.finish()]);
            staging
        })?;
        let (tx, rx) = std::sync::mpsc::channel();
        staging.slice(..).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        d.synchronize()?;
        rx.recv().map_err(|_| "wgpu map callback dropped".to_string())?.map_err(|e| format!("wgpu map_async: {e}"))?;
        let out = staging.slice(..).get_mapped_range().map_err(|e| format!("wgpu get_mapped_range: {e}"))?[..self.bytes].to_vec();
        staging.unmap();
        Ok(out)
    }

    /// Device-to-device copy of the whole buffer (equal sizes).
    pub fn copy_from(&self, src: &WgpuMem) -> WgResult<()> {
        if src.buf.size() != self.buf.size() {
            return Err("copy between buffers of different sizes".into());
        }
        let d = &self.dev;
        d.scoped(|| {
            let mut enc = d.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            let slot = d.timing_slot(d.encoder_timestamps);
            if let Some((qs, ..)) = &slot {
                enc.write_timestamp(qs, 0);
            }
            enc.copy_buffer_to_buffer(&src.buf, 0, &self.buf, 0, self.buf.size());
            if let Some((qs, resolve, read)) = &slot {
                enc.write_timestamp(qs, 1);
                enc.resolve_query_set(qs, 0..2, resolve, 0);
                enc.copy_buffer_to_buffer(resolve, 0, read, 0, 16);
            }
            d.queue.submit([enc.finish()]);
        })
    }

    pub fn device(&self) -> &Arc<WgpuDevice> {
        &self.dev
    }
}
