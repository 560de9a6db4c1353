//! A launch, from the generated launcher to a backend: [`LaunchConfig`]
//! (grid, warps, pipelining depth, clusters), [`Arg`] (what launchers pass),
//! the checks against the kernel's signature (count, kinds, dtypes, devices,
//! configuration ranges), the specialization cache (per kernel × constexprs ×
//! dtypes, with `FERROTILE_DUMP_IR` and an observer for tools), and the
//! dispatch: the CPU interpreter (after the IR passes of its target,
//! `ferrotile_ir::passes`), `cuda::launch` or `webgpu::launch`.
//! Guarantees: every rejected launch is an [`Error`] naming the kernel (and
//! the argument, where one is at fault); a zero-sized grid launches nothing.

use crate::element::Element;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::interp::{self, InterpArg};
use crate::runtime::buffer::{Buffer, Storage};
use crate::runtime::{Device, DeviceKind};
use ferrotile_ir::{specialize, DType, Kernel, ParamKind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Grid and options of one launch. Converts from `u32`, `(u32, u32)`,
/// `(u32, u32, u32)` and `[u32; 3]` (the grid, with default options).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Programs along each axis; a zero anywhere launches nothing.
    pub grid: [u32; 3],
    /// Warps per program (GPU backends); the interpreter ignores it.
    pub num_warps: u32,
    /// Software-pipelining depth of loops feeding `dot` (GPU backends): 1
    /// runs loads where they are written, `s` ≥ 2 prefetches them `s − 1`
    /// iterations ahead (the PTX backend, through rings of shared-memory
    /// slots where the loads feed tensor cores). Must be in 1..=16.
    pub num_stages: u32,
    /// Programs along x run in clusters of this many (1 or 2; the grid's x
    /// must be a multiple). A performance hint: results do not depend on
    /// it. On Hopper, bulk copies that read the same tile in every program
    /// of a cluster (block coordinates independent of `program_id(0)`) are
    /// then copied once for both (multicast), each program issuing half of
    /// every such tile to both. Other backends ignore it.
    pub cluster: u32,
}

impl LaunchConfig {
    pub fn new(grid: [u32; 3]) -> Self {
        LaunchConfig { grid, num_warps: 4, num_stages: 2, cluster: 1 }
    }
    pub fn cluster(mut self, c: u32) -> Self {
        self.cluster = c;
        self
    }
    pub fn num_warps(mut self, w: u32) -> Self {
        self.num_warps = w;
        self
    }
    pub fn num_stages(mut self, s: u32) -> Self {
        self.num_stages = s;
        self
    }
}

impl From<u32> for LaunchConfig {
    fn from(x: u32) -> Self {
        LaunchConfig::new([x, 1, 1])
    }
}
impl From<(u32, u32)> for LaunchConfig {
    fn from((x, y): (u32, u32)) -> Self {
        LaunchConfig::new([x, y, 1])
    }
}
impl From<(u32, u32, u32)> for LaunchConfig {
    fn from((x, y, z): (u32, u32, u32)) -> Self {
        LaunchConfig::new([x, y, z])
    }
}
impl From<[u32; 3]> for LaunchConfig {
    fn from(g: [u32; 3]) -> Self {
        LaunchConfig::new(g)
    }
}

/// One launch argument, as generated launchers build them.
pub enum Arg<'a> {
    Buffer { mem: Storage, dtype: DType, len: usize, device: &'a Device, writable: bool },
    Scalar(Scalar),
}

impl<'a> Arg<'a> {
    pub fn buffer<T: Element>(b: &'a Buffer<T>) -> Self {
        Arg::Buffer { mem: b.mem.clone(), dtype: T::DTYPE, len: b.len(), device: b.device(), writable: false }
    }
    pub fn buffer_mut<T: Element>(b: &'a mut Buffer<T>) -> Self {
        Arg::Buffer { mem: b.mem.clone(), dtype: T::DTYPE, len: b.len(), device: b.device(), writable: true }
    }
    pub fn scalar<T: Element>(v: T) -> Self {
        Arg::Scalar(v.to_scalar())
    }
}

/// `FERROTILE_INTERP_PIPELINE=1`: the interpreter runs kernels after the
/// IR rewrite the GPU backends apply (software pipelining of `dot` loops,
/// when `num_stages ≥ 2`), so that the rewrite is checked against the same
/// references on any machine (`tests/tests/conformance_cpu_pipelined.rs`).
/// Read once per process.
fn interp_runs_gpu_passes() -> bool {
    static F: OnceLock<bool> = OnceLock::new();
    *F.get_or_init(|| std::env::var("FERROTILE_INTERP_PIPELINE").is_ok_and(|v| v == "1"))
}

type CacheKey = (usize, Vec<i64>, Vec<DType>);

fn cache() -> &'static Mutex<HashMap<CacheKey, Arc<Kernel>>> {
    static C: OnceLock<Mutex<HashMap<CacheKey, Arc<Kernel>>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

fn dump_wanted(name: &str) -> bool {
    match std::env::var("FERROTILE_DUMP_IR") {
        Ok(v) if v == "1" || v == "all" => true,
        Ok(v) => v.split(',').any(|n| n.trim() == name),
        Err(_) => false,
    }
}

type Observer = Box<dyn Fn(&Kernel) + Send + Sync>;

fn observer() -> &'static Mutex<Option<Observer>> {
    static O: OnceLock<Mutex<Option<Observer>>> = OnceLock::new();
    O.get_or_init(|| Mutex::new(None))
}

/// Register a function called with every kernel specialization this process
/// creates (once per cache miss). Tools use it to compile every kernel a
/// program launches for another backend, e.g. to assemble PTX in CI.
pub fn set_specialization_observer(f: impl Fn(&Kernel) + Send + Sync + 'static) {
    *observer().lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(f));
}

/// Specialize `k` for a binding, memoized per (kernel, constexprs, dtypes).
/// With `FERROTILE_DUMP_IR=1` (or a comma-separated list of kernel names)
/// the specialized IR is printed to stderr when first built.
pub fn specialize_cached(k: &'static Kernel, cx: &[i64], dts: &[DType]) -> Result<Arc<Kernel>> {
    let key = (k as *const Kernel as usize, cx.to_vec(), dts.to_vec());
    if let Some(s) = cache().lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(s.clone());
    }
    let spec = Arc::new(specialize(k, cx, dts)?);
    if dump_wanted(&k.name) {
        eprintln!("// ferrotile: specialized IR of `{}` [{}]\n{}", k.name, spec.describe_binding(), spec.to_text());
    }
    if let Some(f) = observer().lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
        f(&spec);
    }
    cache().lock().unwrap_or_else(|p| p.into_inner()).insert(key, spec.clone());
    Ok(spec)
}

/// Entry point of generated launchers: check, specialize, run.
pub fn launch(k: &'static Kernel, dev: &Device, cfg: LaunchConfig, args: &mut [Arg<'_>], cx: &[i64], dts: &[DType]) -> Result<()> {
    let lerr = |msg: String| Error::Launch { kernel: k.name.clone(), msg };
    if args.len() != k.params.len() {
        return Err(lerr(format!("expected {} arguments, got {}", k.params.len(), args.len())));
    }
    for (p, a) in k.params.iter().zip(args.iter()) {
        match (&p.kind, a) {
            (ParamKind::Ptr(d), Arg::Buffer { dtype, device, .. }) => {
                let want = d.subst(dts);
                if want != *dtype {
                    return Err(lerr(format!("argument `{}` must be a buffer of {want}, got {dtype}", p.name)));
                }
                if !device.same(dev) {
                    return Err(lerr(format!("argument `{}` lives on {}, but the launch is on {}", p.name, device.name(), dev.name())));
                }
            }
            (ParamKind::Scalar(d), Arg::Scalar(s)) => {
                if d.subst(dts) != s.dtype() {
                    return Err(lerr(format!("argument `{}` must be a {} scalar, got {}", p.name, d.subst(dts), s.dtype())));
                }
            }
            _ => return Err(lerr(format!("argument `{}` has the wrong kind", p.name))),
        }
    }
    if cfg.num_warps == 0 || !cfg.num_warps.is_power_of_two() || cfg.num_warps > 32 {
        return Err(lerr(format!("num_warps must be a power of two in 1..=32, got {}", cfg.num_warps)));
    }
    if !(1..=16).contains(&cfg.num_stages) {
        return Err(lerr(format!("num_stages must be in 1..=16 (1: no software pipelining), got {}", cfg.num_stages)));
    }
    if !(1..=2).contains(&cfg.cluster) || !cfg.grid[0].is_multiple_of(cfg.cluster) {
        return Err(lerr(format!("cluster must be 1 or 2 and divide the grid's x ({}), got {}", cfg.grid[0], cfg.cluster)));
    }
    let spec = specialize_cached(k, cx, dts)?;
    if cfg.grid.contains(&0) {
        return Ok(());
    }
    match dev.kind() {
        DeviceKind::Cpu if cfg.num_stages >= 2 && interp_runs_gpu_passes() => {
            let piped = ferrotile_ir::passes::run(&spec, &ferrotile_ir::passes::PassOptions::interpreter(cfg.num_stages - 1));
            interp::run(&piped, dev.threads(), cfg.grid, &interp_args(k, args)?)
        }
        DeviceKind::Cpu => interp::run(&spec, dev.threads(), cfg.grid, &interp_args(k, args)?),
        DeviceKind::Cuda => {
            #[cfg(feature = "cuda")]
            {
                super::cuda::launch::launch(k, &spec, dev, cfg, args, cx, dts)
            }
            #[cfg(not(feature = "cuda"))]
            unreachable!("no CUDA devices without the cuda feature")
        }
        DeviceKind::Wgpu => {
            #[cfg(feature = "wgpu")]
            {
                super::webgpu::launch::launch(k, &spec, dev, cfg, args, cx, dts)
            }
            #[cfg(not(feature = "wgpu"))]
            unreachable!("no wgpu devices without the wgpu feature")
        }
    }
}

/// Run an already specialized kernel (say, one a test rewrote with an IR
/// pass) on the CPU interpreter with launch arguments of `dev`'s buffers.
pub fn run_interpreted(k: &Kernel, dev: &Device, grid: [u32; 3], args: &[Arg<'_>]) -> Result<()> {
    interp::run(k, dev.threads(), grid, &interp_args(k, args)?)
}

/// The interpreter's view of a launch's arguments: host memory and scalars.
fn interp_args<'a>(k: &Kernel, args: &'a [Arg<'_>]) -> Result<Vec<InterpArg<'a>>> {
    args.iter()
        .map(|a| match a {
            Arg::Buffer { mem: Storage::Host(h), dtype, len, .. } => Ok(InterpArg::Buffer { mem: h, len: *len, dtype: *dtype }),
            Arg::Scalar(s) => Ok(InterpArg::Scalar(*s)),
            #[allow(unreachable_patterns)]
            Arg::Buffer { .. } => Err(Error::Launch { kernel: k.name.clone(), msg: "a device buffer was passed to the CPU interpreter".into() }),
        })
        .collect()
}
