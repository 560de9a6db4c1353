//! Launch on a CUDA device: PTX emission (cached), module load, argument
//! marshalling, launch.
//!
//! Cache key: (kernel, constexprs, dtypes, divisibility-by-16 of each
//! integer argument — buffer lengths included —, which integer arguments
//! equal 1, num_warps, num_stages, target, TMA on/off, safety) — the same
//! key decides the PTX. A kernel with TMA view loads gets its tensor maps
//! built per launch from the arguments (`ptx::tma`); where the run-time
//! values do not fit a tensor map, or (guarded launches) a map addresses
//! memory outside its buffer, its TMA-free compilation, which guards every
//! view in the kernel, runs instead. `num_stages >= 2`
//! turns on software pipelining of `dot` loops.
//! The PTX of every compiled specialization is also written out
//! (`$FERROTILE_CACHE_DIR`, default `$HOME/.cache/ferrotile`, one file per
//! kernel and hash of the text) for inspection and tools; it is not read
//! back: emitting PTX takes milliseconds, and the driver keeps its own
//! cache of the assembled binaries across processes.

use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::runtime::cuda::driver::Loaded;
use crate::runtime::{Arg, Device, LaunchConfig, Storage};
use ferrotile_backends::abi::ParamAbi;
use ferrotile_backends::ptx::{self, PtxOptions};
use ferrotile_ir::passes::Safety;
use ferrotile_ir::{DType, Kernel};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

struct Compiled {
    loaded: Loaded,
    threads: u32,
    smem: u32,
    params: Vec<ParamAbi>,
    tensor_maps: Vec<ptx::TensorMapSpec>,
    /// It waits for the grids it depends on first: launched so that it
    /// may be scheduled before they finish (`PtxOptions::dependent_launch`).
    dependent_launch: bool,
}

type Key = (
    usize,
    usize,
    Vec<i64>,
    Vec<DType>,
    Vec<u32>,
    Vec<bool>,
    u32,
    u32,
    u32,
    u32,
    bool,
    (Safety, bool, bool, Vec<(u32, i64)>, bool, Option<bool>, Option<bool>, Option<bool>, Option<bool>, bool, Option<bool>),
);

/// The mask bounds of a specialization (`proven_masks::bounds`), found
/// once per (kernel, constexprs, dtypes): launches only compare them with
/// their arguments.
fn mask_bounds(k: &'static Kernel, spec: &Kernel, cx: &[i64], dts: &[DType]) -> Arc<Vec<(u32, i64)>> {
    type BKey = (usize, Vec<i64>, Vec<DType>);
    static B: OnceLock<Mutex<HashMap<BKey, Arc<Vec<(u32, i64)>>>>> = OnceLock::new();
    let key = (k as *const Kernel as usize, cx.to_vec(), dts.to_vec());
    let mut m = B.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    m.entry(key).or_insert_with(|| Arc::new(ferrotile_ir::passes::proven_masks::bounds(spec))).clone()
}

/// Compiler switches for A/B runs, on unless set to 0: `FERROTILE_MMA`
/// (tensor-core `dot`), `FERROTILE_PIPELINE` (prefetching `dot` loops),
/// `FERROTILE_WGMMA`, `FERROTILE_TMA` (bulk tensor copies for view loads);
/// `FERROTILE_SLICE_LAYOUTS`, `FERROTILE_REGISTER_A` (a computed `dot` A
/// operand fed from registers);
/// off unless set to 1: `FERROTILE_WS` (a producer warpgroup for those
/// copies; its one-warp version was correct on the H200 — every GEMM
/// test, racecheck — but 1–2 % slower than one stream for the tuned GEMMs
/// of session 8, so not the default).
/// Read once per process, so they cannot disagree with the in-memory cache.
fn env_flag(name: &'static str, default_on: bool) -> bool {
    static FLAGS: OnceLock<Mutex<HashMap<&'static str, bool>>> = OnceLock::new();
    *FLAGS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(name)
        .or_insert_with(|| std::env::var(name).map_or(default_on, |v| if default_on { v != "0" } else { v == "1" }))
}

fn cache() -> &'static Mutex<HashMap<Key, Arc<Compiled>>> {
    static C: OnceLock<Mutex<HashMap<Key, Arc<Compiled>>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

fn disk_dir() -> Option<std::path::PathBuf> {
    if let Ok(d) = std::env::var("FERROTILE_CACHE_DIR") {
        return Some(d.into());
    }
    std::env::var("HOME").ok().map(|h| std::path::Path::new(&h).join(".cache/ferrotile"))
}

fn fnv(s: &str) -> u64 {
    crate::runtime::fnv1a(crate::runtime::FNV_OFFSET, s.bytes())
}

/// Emit (or fetch) the PTX for this specialization; public for tools.
pub fn ptx_for(spec: &Kernel, opts: &PtxOptions) -> Result<ptx::PtxKernel> {
    ptx::emit(spec, opts).map_err(|e| Error::Backend { kernel: spec.name.clone(), msg: e.to_string() })
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn launch(
    k: &'static Kernel,
    spec: &Kernel,
    dev: &Device,
    cfg: LaunchConfig,
    args: &[Arg<'_>],
    cx: &[i64],
    dts: &[DType],
    safety: Safety,
) -> Result<()> {
    let cuda = dev.cuda.as_ref().expect("cuda device");
    let berr = |msg: String| Error::Backend { kernel: k.name.clone(), msg };
    let (div, one) = crate::runtime::launch::int_arg_facts(args);
    // Loops without a `dot` are pipelined when asked for, and when the
    // launch leaves the GPU sparse — at most 16 warps per SM (a quarter of
    // Hopper's 64): with few warps to switch between, a streaming loop's
    // next loads must already be in flight while it computes (a 256-row
    // logsumexp over 131072 columns: 62 -> 46 us on the H200). A full
    // launch hides the latency with other warps, and keeps the registers.
    // Measured across the user suite, the row kernels and the W4A16 library
    // (session 28): no launch slower; the W4A16 library within its tuner's
    // run-to-run spread.
    // (`FERROTILE_SPARSE_PIPELINE=0` turns it off;
    // `FERROTILE_PIPELINE_EVERY_LOOP=1`: always)
    let programs = cfg.grid.iter().map(|&g| g as u64).product::<u64>();
    let sparse = programs * cfg.num_warps as u64 <= 16 * cuda.num_sms as u64 && env_flag("FERROTILE_SPARSE_PIPELINE", true);
    let every_loop = cfg.pipeline_every_loop || sparse || env_flag("FERROTILE_PIPELINE_EVERY_LOOP", false);
    // (`FERROTILE_SPLIT_MASKS=1`: every launch, for A/B runs)
    let split = cfg.split_masks || env_flag("FERROTILE_SPLIT_MASKS", false);
    // (`FERROTILE_WS=1`: every launch)
    let ws = cfg.warp_specialize || env_flag("FERROTILE_WS", false);
    // masks `arange < n` this launch's arguments make all-true
    // (`FERROTILE_PROVEN_MASKS=0`: none, for A/B runs)
    let proven = if env_flag("FERROTILE_PROVEN_MASKS", true) { crate::runtime::launch::proven_bounds(&mask_bounds(k, spec, cx, dts), args) } else { vec![] };
    // Programmatic dependent launch (sm_90, a CUDA 12.3 driver): every
    // kernel lets the next one start at once; a launch that asks
    // (`LaunchConfig::dependent_launch`: a split-K reduction after its
    // product) is then scheduled while the kernel before it runs and waits
    // for it. Not every launch: measured on the H200 (session 50) with
    // every launch waiting, chains of one kernel repeated gained nothing
    // and the 16-bit norms of 16384×1000 ran 19 → 23 µs, while split-K
    // products with their reductions ran up to 6 % faster.
    // (`FERROTILE_PDL=0`: off; `FERROTILE_PDL_ALL=1`: every launch waits)
    let pdl = cuda.dependent_launch && env_flag("FERROTILE_PDL", true);
    let compile = |tma: bool| -> Result<Arc<Compiled>> {
        let key: Key = (
            k as *const Kernel as usize,
            cuda.ordinal,
            cx.to_vec(),
            dts.to_vec(),
            div.clone(),
            one.clone(),
            cfg.num_warps,
            cfg.num_stages,
            cfg.cluster,
            cfg.programs_per_sm,
            tma,
            (
                safety,
                every_loop,
                split,
                proven.clone(),
                ws,
                cfg.unroll_pipelined,
                cfg.rotate_chains,
                cfg.broadcast_slices,
                cfg.affine_addresses,
                cfg.dependent_launch,
                cfg.inflight_register_a,
            ),
        );
        let hit = cache().lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        if let Some(c) = hit {
            return Ok(c);
        }
        let opts = PtxOptions {
            sm: cuda.ptx_target(),
            num_warps: cfg.num_warps,
            arg_div: div.clone(),
            arg_one: one.clone(),
            mma: env_flag("FERROTILE_MMA", true),
            wgmma: env_flag("FERROTILE_WGMMA", true),
            mma_i8: env_flag("FERROTILE_MMA_I8", true),
            pipeline: if env_flag("FERROTILE_PIPELINE", true) { cfg.num_stages - 1 } else { 0 },
            pipeline_every_loop: every_loop,
            late_prefetch: env_flag("FERROTILE_LATE_PREFETCH", true),
            inflight_register_a: cfg.inflight_register_a.unwrap_or_else(|| env_flag("FERROTILE_INFLIGHT_REG_A", false)),
            unroll_wgmma: env_flag("FERROTILE_UNROLL_WGMMA", false),
            tma,
            warp_specialize: ws,
            cluster: cfg.cluster,
            safety,
            slice_layouts: env_flag("FERROTILE_SLICE_LAYOUTS", true),
            broadcast_slices: cfg.broadcast_slices.unwrap_or_else(|| env_flag("FERROTILE_BROADCAST_SLICES", false)),
            register_a: env_flag("FERROTILE_REGISTER_A", true),
            unroll_pipelined: cfg.unroll_pipelined.unwrap_or_else(|| env_flag("FERROTILE_UNROLL_PIPELINED", true)),
            split_masks: split,
            branch_masks: env_flag("FERROTILE_BRANCH_MASKS", true),
            rotate_chains: cfg.rotate_chains.unwrap_or_else(|| env_flag("FERROTILE_ROTATE_CHAINS", true)),
            invariant_a_regs: std::env::var("FERROTILE_INVARIANT_A_REGS").ok().and_then(|v| v.parse().ok()).unwrap_or(32),
            lower_register_a: env_flag("FERROTILE_LOWER_REGISTER_A", false),
            remat_widened: env_flag("FERROTILE_REMAT_WIDENED", true),
            defer_wgmma_waits: env_flag("FERROTILE_WGMMA_DEFER", true),
            proven_masks: proven.clone(),
            programs_per_sm: cfg.programs_per_sm,
            tma_terms: env_flag("FERROTILE_TMA_TERMS", true),
            tma_dynamic: env_flag("FERROTILE_TMA_DYNAMIC", true),
            invariant_slots: env_flag("FERROTILE_INVARIANT_SLOTS", true),
            cp_invariant_slots: std::env::var("FERROTILE_CP_INVARIANT_SLOTS").is_ok_and(|v| v == "1"),
            partial_accumulators: env_flag("FERROTILE_PARTIAL_ACC", true),
            register_operands: env_flag("FERROTILE_REGISTER_OPERANDS", false),
            operand_layouts: env_flag("FERROTILE_OPERAND_LAYOUTS", true),
            packed_16bit: env_flag("FERROTILE_PACKED_16BIT", true),
            wide_offsets: env_flag("FERROTILE_WIDE_OFFSETS", true),
            affine_addresses: cfg.affine_addresses.unwrap_or_else(|| env_flag("FERROTILE_AFFINE_ADDRESSES", false)),
            expand_broadcast: env_flag("FERROTILE_EXPAND_BROADCAST", true),
            column_layouts: env_flag("FERROTILE_COLUMN_LAYOUTS", true),
            dependent_launch: pdl && (cfg.dependent_launch || env_flag("FERROTILE_PDL_ALL", false)),
            launch_dependents: pdl,
        };
        let mut pk = ptx_for(spec, &opts)?;
        if pk.smem_bytes > cuda.max_smem_optin {
            return Err(berr(format!(
                "this configuration needs {} bytes of shared memory per program, more than the {} bytes {} allows; use smaller blocks",
                pk.smem_bytes, cuda.max_smem_optin, cuda.name
            )));
        }
        let mut loaded = cuda.load(&pk.text, &pk.entry).map_err(berr)?;
        // Threaded copies of pipelined bodies (`unroll_pipelined`) lengthen
        // the prefetched tiles' live ranges, and offsets taken from their
        // 32-bit registers (`wide_offsets`) and addresses as a root plus
        // immediates (`affine_addresses`) change ptxas's allocation;
        // whether ptxas then spills, only the compiled code says: where it
        // uses local memory, the compilations without either (of those
        // that changed the text, and that the launch did not ask for) are
        // tried in turn, and the one using the least runs (the first on a
        // tie: the copies, then the wide offsets, are kept where they cost
        // nothing). First of all, where loop-invariant operands held as
        // register A could take `cp.async`-filled slots instead
        // (`cp_invariant_slots`: the register-pressure test of that
        // choice is this one). Last, where the backward slice rule placed
        // loaded vectors (`broadcast_slices`), the compilation that
        // converts them through shared memory instead; where computed A
        // operands took the fragments' layout (`operand_layouts`), the one
        // that stages them.
        let unroll_free = pk.unrolled_loops > 0 && cfg.unroll_pipelined.is_none();
        let wide_free = pk.wide_offsets > 0;
        let affine_free = pk.affine_addresses > 0;
        let cp_free = pk.cp_invariant_slots > 0 && std::env::var("FERROTILE_CP_INVARIANT_SLOTS").as_deref() != Ok("0");
        // (slices of loaded vectors held across a loop add registers)
        let slices_free = pk.broadcast_slices > 0;
        // (a rotated loop carries the chained dot's operands: registers)
        let rotate_free = pk.rotated_loops > 0 && cfg.rotate_chains.is_none();
        // (computed A operands held as fragments: registers the staging
        // path would not hold across the MMAs)
        let oplay_free = pk.operand_layouts > 0;
        let with = if unroll_free || wide_free || affine_free || cp_free || slices_free || rotate_free || oplay_free {
            loaded.local_bytes().map_err(berr)?
        } else {
            0
        };
        if with > 0 {
            let mut alts: Vec<(&str, PtxOptions)> = vec![];
            if cp_free {
                alts.push(("loop-invariant operands in shared memory", PtxOptions { cp_invariant_slots: true, ..opts.clone() }));
            }
            if unroll_free {
                alts.push(("the plain loop", PtxOptions { unroll_pipelined: false, ..opts.clone() }));
            }
            if wide_free {
                alts.push(("64-bit offset arithmetic", PtxOptions { wide_offsets: false, ..opts.clone() }));
            }
            if unroll_free && wide_free {
                alts.push(("both", PtxOptions { unroll_pipelined: false, wide_offsets: false, ..opts.clone() }));
            }
            if affine_free {
                alts.push(("per-element addresses", PtxOptions { affine_addresses: false, ..opts.clone() }));
            }
            if slices_free {
                alts.push(("loaded vectors converted through shared memory", PtxOptions { broadcast_slices: false, ..opts.clone() }));
            }
            if rotate_free {
                alts.push(("chained dots in source order", PtxOptions { rotate_chains: false, ..opts.clone() }));
            }
            if oplay_free {
                alts.push(("computed A operands staged", PtxOptions { operand_layouts: false, ..opts.clone() }));
            }
            let mut best = with;
            for (what, o) in alts {
                let alt = ptx_for(spec, &o)?;
                // (slots of its own may not fit where the registers did)
                if alt.smem_bytes > cuda.max_smem_optin {
                    continue;
                }
                let l = cuda.load(&alt.text, &alt.entry).map_err(berr)?;
                let bytes = l.local_bytes().map_err(berr)?;
                if std::env::var("FERROTILE_EXPLAIN").is_ok_and(|v| v == "1") {
                    eprintln!(
                        "ferrotile: `{}` [{}], {} warps: {with} bytes of local memory per thread as compiled, {bytes} with {what}{}",
                        k.name,
                        spec.describe_binding(),
                        cfg.num_warps,
                        if bytes < best { ": that runs" } else { "" }
                    );
                }
                if bytes < best {
                    best = bytes;
                    (pk, loaded) = (alt, l);
                    if best == 0 {
                        break;
                    }
                }
            }
        }
        // A rotated loop keeps the chained dot's operand slots one iteration
        // longer (a ring slot more), which can cost programs per SM: where
        // the compilation in source order fits more of them on an SM, it
        // runs instead (measured on an H100, session 46: the user's 64×64
        // d128 tile, rotated, 131 KB and one program per SM against 98 KB
        // and two, ran 18 % slower; where the count stays, the rotated
        // tiles ran 3–19 % faster).
        if pk.rotated_loops > 0 && cfg.rotate_chains.is_none() {
            let plain = ptx_for(spec, &PtxOptions { rotate_chains: false, ..opts.clone() })?;
            if plain.smem_bytes <= cuda.max_smem_optin {
                let l = cuda.load(&plain.text, &plain.entry).map_err(berr)?;
                let lim = cuda.sm_limits;
                let here = lim.programs_per_sm(pk.threads, loaded.registers().map_err(berr)?, pk.smem_bytes);
                let there = lim.programs_per_sm(plain.threads, l.registers().map_err(berr)?, plain.smem_bytes);
                let takes = there > here && l.local_bytes().map_err(berr)? <= loaded.local_bytes().map_err(berr)?;
                if std::env::var("FERROTILE_EXPLAIN").is_ok_and(|v| v == "1") {
                    eprintln!(
                        "ferrotile: `{}` [{}], {} warps: {here} programs per SM with chained dots rotated, {there} in source order{}",
                        k.name,
                        spec.describe_binding(),
                        cfg.num_warps,
                        if takes { ": that runs" } else { "" }
                    );
                }
                if takes {
                    (pk, loaded) = (plain, l);
                }
            }
        }
        if std::env::var("FERROTILE_DUMP_PTX").is_ok_and(|v| v == "1" || v.split(',').any(|n| n == k.name)) {
            eprintln!("{}", pk.text);
        }
        if std::env::var("FERROTILE_EXPLAIN").is_ok_and(|v| v == "1") {
            for (line, why) in &pk.fma_dots {
                eprintln!("ferrotile: `{}` ({}:{line}) [{}]: dot on the FMA path: {why}", k.name, k.file, spec.describe_binding());
            }
            for (line, why) in &pk.mma_sync_dots {
                eprintln!("ferrotile: `{}` ({}:{line}) [{}], {} warps: dot not on wgmma: {why}", k.name, k.file, spec.describe_binding(), cfg.num_warps);
            }
            for (line, what) in &pk.conversions {
                eprintln!("ferrotile: `{}` ({}:{line}) [{}], {} warps: through shared memory: {what}", k.name, k.file, spec.describe_binding(), cfg.num_warps);
            }
            for (line, whole, held) in &pk.partial_sums {
                eprintln!(
                    "ferrotile: `{}` ({}:{line}) [{}], {} warps: accumulator carried pre-summed: {held} registers per thread instead of {whole}",
                    k.name,
                    k.file,
                    spec.describe_binding(),
                    cfg.num_warps
                );
            }
        }
        if let Some(dir) = disk_dir() {
            let f = dir.join(format!("{}-{:016x}.ptx", k.name, fnv(&pk.text)));
            if !f.exists() {
                let _ = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&f, &pk.text));
            }
        }
        let c = Arc::new(Compiled {
            loaded,
            threads: pk.threads,
            smem: pk.smem_bytes,
            params: pk.params,
            tensor_maps: pk.tensor_maps,
            dependent_launch: pk.dependent_launch,
        });
        cache().lock().unwrap_or_else(|p| p.into_inner()).insert(key, c.clone());
        Ok(c)
    };
    // Tensor maps for this launch's arguments; where they do not fit a map
    // (a zero extent, a stride not a multiple of 16 bytes, ...), the kernel
    // compiled without TMA runs instead.
    let ints: Vec<i64> = args
        .iter()
        .map(|a| match a {
            Arg::Scalar(Scalar::I(v, _)) => *v,
            _ => 0,
        })
        .collect();
    let encode = |c: &Compiled| -> Option<Vec<crate::runtime::cuda::driver::TensorMap>> {
        c.tensor_maps
            .iter()
            .map(|t| {
                let (ptr, len) = match args.get(t.view.param as usize) {
                    Some(Arg::Buffer { mem: Storage::Cuda(m), len, .. }) => (m.ptr, (*len).min(m.bytes / t.view.dtype.size_bytes().max(1)) as u64),
                    _ => return None,
                };
                let m = t.view.resolve(&ints, ptr, len, cfg.grid)?;
                // (the kernel does not guard a TMA view: the map must lie
                // in its buffer, or the guarded compilation runs)
                let es = t.view.dtype.size_bytes() as u64;
                if safety != Safety::Unchecked && !m.fits(es, ptr, len.checked_mul(es)?) {
                    return None;
                }
                cuda.encode_tensor_map(t.view.dtype, &m, &t.box_dims, t.round_tf32).ok()
            })
            .collect()
    };
    let mut compiled = compile(env_flag("FERROTILE_TMA", true))?;
    let mut maps = vec![];
    if !compiled.tensor_maps.is_empty() {
        match encode(&compiled) {
            Some(m) => maps = m,
            None => compiled = compile(false)?,
        }
    }
    // marshal: one 8-byte slot per parameter, little-endian
    let mut slots: Vec<u64> = Vec::with_capacity(args.len());
    for (a, abi) in args.iter().zip(&compiled.params) {
        let v: u64 = match (a, abi) {
            (Arg::Buffer { mem: Storage::Cuda(m), .. }, ParamAbi::Ptr) => {
                // (a graph being captured holds the memory it reads)
                cuda.keep_alive(m);
                m.ptr
            }
            (Arg::Scalar(Scalar::I(v, _)), ParamAbi::B32) => *v as u32 as u64,
            (Arg::Scalar(Scalar::I(v, _)), ParamAbi::B64) => *v as u64,
            (Arg::Scalar(Scalar::F(v, DType::F32)), ParamAbi::B32) => (*v as f32).to_bits() as u64,
            (Arg::Scalar(Scalar::F(v, DType::F16)), ParamAbi::B16) => half::f16::from_f64(*v).to_bits() as u64,
            (Arg::Scalar(Scalar::F(v, DType::BF16)), ParamAbi::B16) => half::bf16::from_f64(*v).to_bits() as u64,
            _ => return Err(berr("argument does not match the kernel's ABI (a host buffer passed to a CUDA launch?)".into())),
        };
        slots.push(v);
    }
    let mut ptrs: Vec<*mut c_void> = slots.iter_mut().map(|s| s as *mut u64 as *mut c_void).collect();
    ptrs.extend(maps.iter_mut().map(|m| m as *mut _ as *mut c_void));
    cuda.launch(&compiled.loaded, cfg.grid, compiled.threads, compiled.smem, &mut ptrs, compiled.dependent_launch).map_err(berr)?;
    if std::env::var("FERROTILE_SYNC").is_ok() {
        cuda.synchronize().map_err(berr)?;
    }
    Ok(())
}
