//! A launch, from the generated launcher to a backend: [`LaunchConfig`]
//! (grid, warps, pipelining depth, clusters), [`Arg`] (what launchers pass),
//! the checks against the kernel's signature (count, kinds, dtypes, devices,
//! configuration ranges), the specialization cache (per kernel × constexprs ×
//! dtypes, with `FERROTILE_DUMP_IR` and an observer for tools), and the
//! dispatch: the CPU interpreter (after the IR passes of its target,
//! `ferrotile_ir::passes`), `cuda::launch` or `webgpu::launch`, with the
//! hidden arguments of the `guard` pass (buffer lengths; the fault counters
//! of a checked launch, read back afterwards).
//! Guarantees: every rejected launch is an [`Error`] naming the kernel (and
//! the argument, where one is at fault); a zero-sized grid launches nothing;
//! a launch through [`launch`] touches no memory outside its buffers on any
//! backend, and a checked one reports the first fault as [`Error::Fault`].

use crate::element::Element;
use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::interp::{self, InterpArg};
use crate::runtime::buffer::{Buffer, Storage};
use crate::runtime::{Device, DeviceKind};
use ferrotile_ir::passes::guard::{self, Fault, Hidden, Safety};
use ferrotile_ir::{specialize, DType, Kernel, ParamKind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Grid and options of one launch. Converts from `u32`, `(u32, u32)`,
/// `(u32, u32, u32)` and `[u32; 3]` (the grid, with default options).
///
/// ```
/// use ferrotile::prelude::*;
///
/// #[kernel]
/// fn scale<const B: i32>(x: Ptr<f32>, a: f32, n: i32) {
///     let i = program_id(0) * B + arange(0, B);
///     store(x + i, load(x + i, i < n, 0.0) * a, i < n);
/// }
///
/// let dev = Device::cpu();
/// let mut x = dev.from_slice(&[1.0f32; 300])?;
/// // a grid of 3 programs with default options (4 warps, 2 stages) ...
/// scale::launch(&dev, 3, &mut x, 2.0, 300, 128)?;
/// // ... or with options: 8 warps, checked (faults become errors)
/// let cfg = LaunchConfig::new([3, 1, 1]).num_warps(8).checked(true);
/// scale::launch(&dev, cfg, &mut x, 2.0, 300, 128)?;
/// assert!(x.to_vec()?.iter().all(|&v| v == 4.0));
/// # Ok::<(), ferrotile::Error>(())
/// ```
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
    /// Checked launch: every run-time fault (an unmasked out-of-bounds
    /// access, a view that does not fit its buffer, a loop step ≤ 0) is
    /// counted by the kernel and the launch returns [`Error::Fault`] naming
    /// the kernel, the source line and the buffer — on every backend. The
    /// launch then waits for the kernel. `None`: the process default,
    /// `FERROTILE_CHECK=1`/`0`, else on in debug builds and off in release
    /// builds. Unchecked launches are memory-safe all the same (faulting
    /// lanes read `other` and write nothing); only the report is missing.
    /// Inside a CUDA graph capture launches are not checked (nothing can be
    /// read back).
    pub checked: Option<bool>,
    /// Programs that must fit on one SM at once (CUDA; 0 or 1: no hint):
    /// the compiler then keeps each thread within the registers that
    /// allows (PTX `.minnctapersm`; ptxas spills if it must). A
    /// performance hint — results do not depend on it; shared memory may
    /// still allow fewer. Other backends ignore it. Must be in 0..=8.
    pub programs_per_sm: u32,
    /// Apply `num_stages` to loops without a `dot` too (GPU backends; a
    /// loop that stores is never pipelined): for streaming reductions
    /// whose only latency hiding is loads issued iterations ahead — a
    /// GEMV, where a program's next weights must be in flight while it
    /// multiplies the current ones. Results do not depend on it. (CUDA
    /// does this anyway for launches of at most 16 warps per SM, where few
    /// warps are left to hide the latency; `FERROTILE_SPARSE_PIPELINE=0`
    /// turns that off.)
    pub pipeline_every_loop: bool,
    /// Run `dot` loops whose last iterations are masked as two loops, the
    /// first without those masks (CUDA; index-set splitting,
    /// `ferrotile_ir::passes::split_masks`): a bound check such as
    /// `cols < n` or a causal diagonal then costs nothing in the
    /// iterations it cannot fail. A performance hint — results do not
    /// depend on it. It pays where the loop's body is issue-bound and
    /// registers are left (attention d64: +13% on the H200) and costs
    /// where a kernel already sits at 255 registers (attention d128: −7%)
    /// or where each copy of the loop takes its own shared-memory rings
    /// (large GEMM tiles no longer fit): a knob for the autotuner.
    /// Other backends ignore it.
    pub split_masks: bool,
    /// Run the kernel's bulk-copy pipelines with a producer warpgroup that
    /// issues every copy, the kernel's own warps consuming (CUDA, Hopper
    /// with TMA; kernels that do not qualify run as they are). A
    /// performance hint — results do not depend on it. `FERROTILE_WS=1`
    /// turns it on for every launch. Other backends ignore it.
    pub warp_specialize: bool,
    /// Loops carrying a register prefetch chain of `d` tiles run `d + 1`
    /// threaded copies of their body per trip (CUDA; the PTX backend's
    /// `unroll_pipelined`): no copies of the chain at the back edge, longer
    /// live ranges. `None`: on, except where the driver reports that the
    /// copies use local memory (spilled registers) and the loop without
    /// them uses less (`FERROTILE_UNROLL_PIPELINED=0`: off). A performance
    /// hint — results do not depend on it; a knob for the autotuner (one
    /// W4A16 shape runs 4 % slower with the copies, others up to 13 %
    /// faster: H200, session 37). Other backends ignore it.
    pub unroll_pipelined: Option<bool>,
    /// A loop whose carried-accumulator `dot` consumes another `dot`'s
    /// result of the same iteration (attention written the Triton
    /// tutorial's way, a two-dot chain) is rotated by one iteration, so the
    /// chained `wgmma` runs under the next iteration's elementwise work
    /// (CUDA on Hopper; `ferrotile_ir::passes::rotate_chains`). `None`:
    /// on (`FERROTILE_ROTATE_CHAINS=0` turns it off), and the compilation
    /// in source order runs where the rotated one uses local memory or
    /// fits fewer programs on an SM. Only chains on `wgmma`, and not where
    /// the chained dots load a tile the rest of the loop reads too. A
    /// performance hint — results do not depend on it (the user attention
    /// per tile: d64 +7 to +20 %, d128 −1 to +5 %: H100, session 48).
    /// Other backends ignore it.
    pub rotate_chains: Option<bool>,
    /// Loaded vectors that are broadcast into a tile are loaded in the
    /// slice of that tile's layout (every thread reads the elements its
    /// registers need) instead of in a layout of their own and converted
    /// through shared memory (CUDA; the PTX backend's `broadcast_slices`).
    /// `None`: the process default (`FERROTILE_BROADCAST_SLICES=1`: on; off
    /// otherwise). Where the compilation with them uses local memory, the
    /// one without runs. A performance hint — results do not depend on it.
    /// Other backends ignore it (WGSL always does it).
    pub broadcast_slices: Option<bool>,
    /// A pointer tile's accesses as one root register plus immediates
    /// (CUDA; the PTX backend's `affine_addresses`): fewer address
    /// instructions and registers per access. `None`: the process default
    /// (`FERROTILE_AFFINE_ADDRESSES=1`: on; off otherwise). Where the
    /// compilation with them uses local memory, the one without runs. A
    /// performance hint — results do not depend on it. Other backends
    /// ignore it.
    pub affine_addresses: Option<bool>,
    /// A `wgmma` `dot` whose A the loop computes in registers stays in
    /// flight across the back edge, waited for where the next A is packed
    /// (CUDA; the PTX backend's `inflight_register_a`). `None`: the
    /// process default (`FERROTILE_INFLIGHT_REG_A=1`: on; off otherwise).
    /// A performance hint — results do not depend on it. Other backends
    /// ignore it.
    pub inflight_register_a: Option<bool>,
    /// This launch reads what the kernel before it in its stream wrote
    /// (a split-K product's reduction, a split-KV combine), and may be
    /// scheduled while that kernel runs: its programs wait for it first
    /// (CUDA on sm_90 and newer: programmatic dependent launch — the
    /// kernel before it lets it start, and it waits with
    /// `griddepcontrol.wait`, so the launch latency between the two is
    /// hidden; `FERROTILE_PDL=0` turns it off). A performance hint —
    /// results do not depend on it. Other backends ignore it.
    pub dependent_launch: bool,
}

impl LaunchConfig {
    /// A launch of `grid` programs with the defaults: 4 warps, 2 stages,
    /// clusters of 1, checking as the process default, no hints.
    pub fn new(grid: [u32; 3]) -> Self {
        LaunchConfig {
            grid,
            num_warps: 4,
            num_stages: 2,
            cluster: 1,
            checked: None,
            programs_per_sm: 0,
            pipeline_every_loop: false,
            split_masks: false,
            warp_specialize: false,
            unroll_pipelined: None,
            rotate_chains: None,
            broadcast_slices: None,
            affine_addresses: None,
            inflight_register_a: None,
            dependent_launch: false,
        }
    }
    /// Ask for `n` programs per SM (see [`LaunchConfig::programs_per_sm`]).
    pub fn programs_per_sm(mut self, n: u32) -> Self {
        self.programs_per_sm = n;
        self
    }
    /// Force a checked (`true`) or unchecked launch (see [`LaunchConfig::checked`]).
    pub fn checked(mut self, on: bool) -> Self {
        self.checked = Some(on);
        self
    }
    /// Clusters of `c` programs along x (see [`LaunchConfig::cluster`]).
    pub fn cluster(mut self, c: u32) -> Self {
        self.cluster = c;
        self
    }
    /// `w` warps per program.
    pub fn num_warps(mut self, w: u32) -> Self {
        self.num_warps = w;
        self
    }
    /// `s` pipelining stages (see [`LaunchConfig::num_stages`]).
    pub fn num_stages(mut self, s: u32) -> Self {
        self.num_stages = s;
        self
    }
    /// Pipeline loops without a `dot` too (see the field).
    pub fn pipeline_every_loop(mut self, on: bool) -> Self {
        self.pipeline_every_loop = on;
        self
    }
    /// Split masked `dot` loops (see the field).
    pub fn split_masks(mut self, on: bool) -> Self {
        self.split_masks = on;
        self
    }
    /// A producer warpgroup for the bulk copies (see the field).
    pub fn warp_specialize(mut self, on: bool) -> Self {
        self.warp_specialize = on;
        self
    }
    /// Threaded copies of pipelined loop bodies on or off (see the field).
    pub fn unroll_pipelined(mut self, on: bool) -> Self {
        self.unroll_pipelined = Some(on);
        self
    }
    /// Chained dots rotated by one iteration, or not (see the field).
    pub fn rotate_chains(mut self, on: bool) -> Self {
        self.rotate_chains = Some(on);
        self
    }
    /// Scheduled while the kernel before it runs, waiting for it first
    /// (see the field).
    pub fn dependent_launch(mut self, on: bool) -> Self {
        self.dependent_launch = on;
        self
    }
    /// Loaded vectors in the slice of the tile they broadcast into, or
    /// not (see the field).
    pub fn broadcast_slices(mut self, on: bool) -> Self {
        self.broadcast_slices = Some(on);
        self
    }
    /// Affine addresses on or off (see the field).
    pub fn affine_addresses(mut self, on: bool) -> Self {
        self.affine_addresses = Some(on);
        self
    }
    /// Register-A MMAs in flight across the back edge, or not (see the
    /// field).
    pub fn inflight_register_a(mut self, on: bool) -> Self {
        self.inflight_register_a = Some(on);
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

/// The bounds of `bounds` (argument index, least value) that this launch's
/// integer arguments satisfy: masks `arange < n` they make all-true
/// (`ferrotile_ir::passes::proven_masks`).
pub(crate) fn proven_bounds(bounds: &[(u32, i64)], args: &[Arg<'_>]) -> Vec<(u32, i64)> {
    bounds.iter().copied().filter(|&(p, at_least)| matches!(args.get(p as usize), Some(Arg::Scalar(Scalar::I(v, d))) if d.is_int() && *v >= at_least)).collect()
}

/// What the GPU backends specialize on about the launch's integer
/// arguments, per argument: the power of two up to 16 dividing it
/// ([`ferrotile_backends::plan::axis::arg_div`]; 1 for other arguments) —
/// what proves rows aligned for vector loads — and whether it equals 1 (a
/// unit stride). Part of both drivers' compile-cache keys.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub(crate) fn int_arg_facts(args: &[Arg<'_>]) -> (Vec<u32>, Vec<bool>) {
    args.iter()
        .map(|a| match a {
            Arg::Scalar(Scalar::I(v, d)) if d.is_int() => (ferrotile_backends::plan::axis::arg_div(*v), *v == 1),
            _ => (1, false),
        })
        .unzip()
}

/// One launch argument, as generated launchers build them.
#[derive(Clone)]
pub enum Arg<'a> {
    /// A buffer for a `Ptr<T>` parameter.
    Buffer {
        /// Its memory.
        mem: Storage,
        /// Its element type.
        dtype: DType,
        /// Its length in elements.
        len: usize,
        /// Its device.
        device: &'a Device,
        /// Whether the launcher took it by `&mut` (the kernel may write it).
        writable: bool,
    },
    /// A scalar argument.
    Scalar(Scalar),
}

impl<'a> Arg<'a> {
    /// A buffer the kernel only reads.
    pub fn buffer<T: Element>(b: &'a Buffer<T>) -> Self {
        Arg::Buffer { mem: b.mem.clone(), dtype: T::DTYPE, len: b.len(), device: b.device(), writable: false }
    }
    /// A buffer the kernel may write.
    pub fn buffer_mut<T: Element>(b: &'a mut Buffer<T>) -> Self {
        Arg::Buffer { mem: b.mem.clone(), dtype: T::DTYPE, len: b.len(), device: b.device(), writable: true }
    }
    /// A scalar argument of type `T`.
    pub fn scalar<T: Element>(v: T) -> Self {
        Arg::Scalar(v.to_scalar())
    }
}

/// `FERROTILE_INTERP_PIPELINE=1`: the interpreter runs kernels after the
/// IR rewrites the GPU backends apply (software pipelining of `dot` loops,
/// when `num_stages ≥ 2`; their masks under a branch, or split where the
/// launch asks), so that the rewrite is checked against the same
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

/// Whether launches without [`LaunchConfig::checked`] are checked:
/// `FERROTILE_CHECK=1` / `0`, else in debug builds. Read once per process.
pub fn checked_by_default() -> bool {
    static F: OnceLock<bool> = OnceLock::new();
    *F.get_or_init(|| match std::env::var("FERROTILE_CHECK") {
        Ok(v) if v == "1" => true,
        Ok(v) if v == "0" => false,
        _ => cfg!(debug_assertions),
    })
}

static UNGUARDED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Make every launch of this process unguarded, as `launch_unchecked` —
/// to measure what the guards cost (`bench --unchecked`).
///
/// # Safety
/// From this call on, every kernel the process launches must keep its
/// accesses in bounds, as `launch_unchecked` requires.
pub unsafe fn set_unguarded_for_measurement(on: bool) {
    UNGUARDED.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Entry point of generated launchers: check, specialize, run, with every
/// access guarded (and checked, [`LaunchConfig::checked`]).
pub fn launch(k: &'static Kernel, dev: &Device, cfg: LaunchConfig, args: &mut [Arg<'_>], cx: &[i64], dts: &[DType]) -> Result<()> {
    let checked = cfg.checked.unwrap_or_else(checked_by_default) && !dev.capturing();
    let safety = if UNGUARDED.load(std::sync::atomic::Ordering::Relaxed) {
        Safety::Unchecked
    } else if checked {
        Safety::Checked
    } else {
        Safety::Safe
    };
    launch_with(k, dev, cfg, args, cx, dts, safety)
}

/// Entry point of generated `launch_unchecked`: as [`launch`] without
/// guards.
///
/// # Safety
/// Every access the kernel makes must be in bounds of its buffer (or
/// masked off), every view it makes must lie in its buffer, and every loop
/// step must be positive, for this grid and these arguments; otherwise the
/// kernel may read or write memory outside its buffers (on a GPU: other
/// allocations) or never finish.
pub unsafe fn launch_unchecked(k: &'static Kernel, dev: &Device, cfg: LaunchConfig, args: &mut [Arg<'_>], cx: &[i64], dts: &[DType]) -> Result<()> {
    launch_with(k, dev, cfg, args, cx, dts, Safety::Unchecked)
}

/// The hidden arguments the `guard` pass asks for (buffer lengths, the
/// fault counters), appended to `args`; returns the counters of a checked
/// launch.
fn append_hidden<'a>(spec: &Kernel, dev: &'a Device, safety: Safety, args: &mut Vec<Arg<'a>>) -> Result<Option<Buffer<u32>>> {
    let mut report = None;
    for h in guard::hidden_params(spec, safety) {
        match h {
            Hidden::Len(p) => {
                // (never more than the memory behind the argument holds:
                // `Arg`'s fields are public)
                let len = match args.get(p as usize) {
                    Some(Arg::Buffer { len, mem, dtype, .. }) => (*len).min(mem.bytes() / dtype.size_bytes().max(1)),
                    _ => return Err(Error::Launch { kernel: spec.name.clone(), msg: format!("parameter {p} is not a buffer") }),
                };
                args.push(Arg::Scalar(Scalar::I(len as i64, DType::I64)));
            }
            Hidden::Report => {
                let n = guard::sites(spec).len().max(1);
                let b = dev.zeros::<u32>(n)?;
                args.push(Arg::Buffer { mem: b.mem.clone(), dtype: DType::U32, len: n, device: dev, writable: true });
                report = Some(b);
            }
        }
    }
    Ok(report)
}

/// The first fault a checked launch counted (in program order), as an
/// error.
fn read_report(k: &Kernel, spec: &Kernel, report: &Buffer<u32>, args: &[Arg<'_>]) -> Result<()> {
    let counts = report.to_vec()?;
    let sites = guard::sites(spec);
    let Some((site, &n)) = sites.iter().zip(&counts).find(|(_, &n)| n > 0) else { return Ok(()) };
    let msg = match site.fault {
        Fault::View | Fault::LoopStep => format!("{} (in {n} program(s))", site.describe(spec)),
        _ => {
            let lens: Vec<String> = site
                .params
                .iter()
                .filter_map(|&p| match args.get(p as usize) {
                    Some(Arg::Buffer { len, .. }) => Some(format!("`{}` has {len} elements", spec.params[p as usize].name)),
                    _ => None,
                })
                .collect();
            format!("{} in {n} lane(s) ({}); mask the access or fix the offsets", site.describe(spec), lens.join(", "))
        }
    };
    Err(Error::Fault { kernel: k.name.clone(), file: k.file.clone(), line: site.loc.line, msg })
}

fn launch_with(k: &'static Kernel, dev: &Device, cfg: LaunchConfig, args: &mut [Arg<'_>], cx: &[i64], dts: &[DType], safety: Safety) -> Result<()> {
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
    if cfg.programs_per_sm > 8 {
        return Err(lerr(format!("programs_per_sm must be in 0..=8 (0: no hint), got {}", cfg.programs_per_sm)));
    }
    if !(1..=2).contains(&cfg.cluster) || !cfg.grid[0].is_multiple_of(cfg.cluster) {
        return Err(lerr(format!("cluster must be 1 or 2 and divide the grid's x ({}), got {}", cfg.grid[0], cfg.cluster)));
    }
    let spec = specialize_cached(k, cx, dts)?;
    if cfg.grid.contains(&0) {
        return Ok(());
    }
    let mut all: Vec<Arg<'_>> = args.to_vec();
    let report = append_hidden(&spec, dev, safety, &mut all)?;
    match dev.kind() {
        DeviceKind::Cpu => {
            let gpu_passes = interp_runs_gpu_passes();
            let depth = if cfg.num_stages >= 2 && gpu_passes { cfg.num_stages - 1 } else { 0 };
            // (with the GPU's rewrites: the masks the arguments prove true
            // go too, as on CUDA)
            let proven = if gpu_passes { proven_bounds(&ferrotile_ir::passes::proven_masks::bounds(&spec), &all) } else { vec![] };
            let k2 = ferrotile_ir::passes::run(
                &spec,
                &ferrotile_ir::passes::PassOptions::interpreter(safety, depth)
                    .every_loop(cfg.pipeline_every_loop)
                    .proven_masks(&proven)
                    // (as CUDA: loops split where the launch asks, or
                    // `FERROTILE_SPLIT_MASKS=1`; masks under a branch otherwise)
                    .split_masks(depth > 0 && (cfg.split_masks || std::env::var("FERROTILE_SPLIT_MASKS").is_ok_and(|v| v == "1"))),
            );
            interp::run(&k2, dev.threads(), cfg.grid, &interp_args(k, &all)?)?
        }
        DeviceKind::Cuda => {
            #[cfg(feature = "cuda")]
            {
                super::cuda::launch::launch(k, &spec, dev, cfg, &all, cx, dts, safety)?
            }
            #[cfg(not(feature = "cuda"))]
            return Err(lerr("no CUDA devices without the cuda feature".into()));
        }
        DeviceKind::Wgpu => {
            #[cfg(feature = "wgpu")]
            {
                super::webgpu::launch::launch(k, &spec, dev, cfg, &all, cx, dts, safety)?
            }
            #[cfg(not(feature = "wgpu"))]
            return Err(lerr("no wgpu devices without the wgpu feature".into()));
        }
    }
    match report {
        Some(r) => read_report(k, &spec, &r, args),
        None => Ok(()),
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
