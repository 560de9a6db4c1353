//! Instruction selection: specialized IR → one PTX `.entry`.
//!
//! Takes a specialized, verified kernel plus [`PtxOptions`] (target, warps,
//! which integer arguments are divisible by 16 or equal to 1, whether to use
//! tensor cores and to pipeline `dot` loops). Every tile value lives in
//! registers distributed by the [`Blocked`] layout its shape was assigned
//! (`super::assign`: canonical, or the mma accumulator layout);
//! scalars are one register, computed redundantly (hence uniformly) by every
//! thread, which makes scalar `if`/`for` conditions uniform and barriers
//! inside them legal. Guarantees on success: PTX that ptxas accepts for the
//! target, whose results match the interpreter (modulo the documented
//! approximations: `exp`/`exp2`/`log`/`log2` via `ex2`/`lg2.approx`,
//! `rsqrt.approx`, summation order of reductions and `dot`), that never
//! touches memory outside masked-in lanes, and a shared-memory requirement
//! in [`PtxKernel::smem_bytes`] that the runtime checks against the device.

use super::axis::{self, Info};
use super::layout::Blocked;
use super::EmitError;
use ferrotile_ir::*;
use std::collections::HashMap;
use std::fmt::Write;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PtxOptions {
    /// 80 or 90.
    pub sm: u32,
    pub num_warps: u32,
    /// Per kernel parameter: integer scalar known divisible by 16.
    pub arg_div16: Vec<bool>,
    /// Per kernel parameter: integer scalar known to equal 1 (unit strides).
    pub arg_one: Vec<bool>,
    /// Run eligible `dot`s on tensor cores (`mma.sync`); false: FMA loops.
    pub mma: bool,
    /// With `sm: 90` and `mma`: f16/bf16 `dot`s whose shapes fit run as
    /// warpgroup MMAs (`wgmma.mma_async`); the kernel then targets `sm_90a`.
    pub wgmma: bool,
    /// Prefetch the operand loads of `dot` loops this many iterations ahead
    /// ([`ferrotile_ir::passes::pipeline`]; `num_stages - 1`, 0: off).
    pub pipeline: u32,
    /// With `wgmma`: ring loads from views a tensor map describes
    /// ([`super::tma`]) become TMA bulk tensor copies (the kernel then
    /// takes one tensor-map parameter per such view, after its own; see
    /// [`PtxKernel::tensor_maps`]).
    pub tma: bool,
    /// With `tma`: kernels whose bulk copies qualify ([`super::warp_spec`])
    /// run with a producer warpgroup whose first warp issues every copy
    /// (`num_warps + 4` warps: [`PtxKernel::threads`]; `setmaxnreg` hands
    /// the producer's registers to the consumers), slots handed over by
    /// mbarriers.
    pub warp_specialize: bool,
    /// Programs along x launched in clusters of this many (1 or 2; the
    /// grid's x must be a multiple). With 2, a kernel whose copy loops run
    /// the same trips in every program and some of whose copies read the
    /// same tile in both programs of a cluster
    /// ([`super::warp_spec::WsPlan::uniform`]) multicasts those copies:
    /// each program issues half of the tile to both (`.multicast::cluster`),
    /// and a slot is refilled once both programs are done with it — after a
    /// cluster barrier from one stream, or once both programs' consumers
    /// released it with `warp_specialize` (the PTX then declares
    /// `.reqnctapercluster 2, 1, 1`). Otherwise ignored.
    pub cluster: u32,
}

/// Which instruction stream of a warp-specialized kernel is being emitted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    /// Not warp-specialized: every warp runs the whole kernel.
    All,
    /// The kernel's `num_warps` warps: everything but the bulk copies.
    Consumer,
    /// The extra warp: the copies and what their coordinates need.
    Producer,
}

/// How the host passes each parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamAbi {
    /// 64-bit device address.
    Ptr,
    /// 32 bits (i32, u32, f32; i8/u8/bool widened).
    B32,
    /// 64 bits (i64).
    B64,
    /// 16 bits (f16, bf16).
    B16,
}

#[derive(Clone, Debug)]
pub struct PtxKernel {
    pub entry: String,
    pub text: String,
    pub smem_bytes: u32,
    pub threads: u32,
    pub params: Vec<ParamAbi>,
    /// Why `dot`s of this kernel stay on the FMA path: (source line, reason).
    pub fma_dots: Vec<(u32, String)>,
    /// Why tensor-core `dot`s of this kernel run on `mma.sync` rather than
    /// Hopper's `wgmma` (sm_90 only): (source line, reason).
    pub mma_sync_dots: Vec<(u32, String)>,
    /// Tensor maps the kernel takes after its own parameters, in order:
    /// the view and the box (elements per dimension, innermost first; 128-byte
    /// swizzle, out-of-bounds elements zero). The host builds each with
    /// [`super::tma::TmaView::resolve`] and `cuTensorMapEncodeTiled` and
    /// passes its 128 bytes by value (64-byte aligned).
    pub tensor_maps: Vec<TensorMapSpec>,
}

/// One tensor-map parameter of a kernel ([`PtxKernel::tensor_maps`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorMapSpec {
    pub view: super::tma::TmaView,
    pub box_dims: Vec<u32>,
    /// f32 elements rounded to tf32 by the copy (a `TFLOAT32` map).
    pub round_tf32: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cls {
    F,
    H,
    R,
    Rd,
    P,
}

fn cls_of(e: Elem) -> Cls {
    match e {
        Elem::Ptr(_) => Cls::Rd,
        Elem::Val(d) => match d {
            DType::F32 => Cls::F,
            DType::F16 | DType::BF16 => Cls::H,
            DType::I64 => Cls::Rd,
            DType::Bool => Cls::P,
            _ => Cls::R,
        },
    }
}

/// PTX type suffix for integer arithmetic on a dtype held in its register class.
fn ity(d: DType) -> &'static str {
    match d {
        DType::I32 | DType::I8 => "s32",
        DType::U32 | DType::U8 => "u32",
        DType::I64 => "s64",
        _ => "b32",
    }
}

/// f64 → f32 rounding to odd: followed by a nearest-even rounding to a
/// narrower format it gives the correctly rounded result (one rounding).
fn f32_round_to_odd(x: f64) -> f32 {
    let t = x as f32;
    if !t.is_finite() || (t as f64) == x {
        return t;
    }
    // truncate toward zero, then set the sticky bit
    let mut b = t.to_bits();
    if (t as f64).abs() > x.abs() {
        b -= 1;
    }
    f32::from_bits(b | 1)
}

fn f32_hex(v: f64) -> String {
    format!("0f{:08X}", (v as f32).to_bits())
}

type R<T> = Result<T, EmitError>;

struct Layout {
    bl: Blocked,
    konst: Vec<Vec<u32>>,
    /// Per-dim thread offset register (u32), computed in the prologue.
    thread: Vec<String>,
}

struct Em<'k> {
    k: &'k Kernel,
    o: &'k PtxOptions,
    vec: u32,
    body: String,
    pro: String,
    counts: [u32; 5],
    vals: HashMap<V, Vec<String>>,
    layouts: HashMap<Vec<u32>, std::rc::Rc<Layout>>,
    idx_cache: HashMap<(Vec<u32>, usize, usize), String>,
    owner_cache: HashMap<(Vec<u32>, usize), Option<String>>,
    labels: u32,
    smem: u32,
    tid: String,
    lane: String,
    warp: String,
    axis: HashMap<V, Info>,
    loc: Loc,
    /// 16-bit register → (32-bit word it was unpacked from, upper half?):
    /// lets bf16 → f32 read the word directly (one instruction, no unpack).
    h_from_word: HashMap<String, (String, bool)>,
    /// 16-bit register → the f32 register it was rounded from: lets a pair
    /// of stores pack with one `cvt.rn.{bf16,f16}x2.f32`.
    h_from_f32: HashMap<String, String>,
    /// Which values to recompute instead of converting ([`crate::remat`]).
    remat: crate::remat::Remat<'k>,
    zero: Option<String>,
    /// Layouts chosen for this kernel's shapes ([`super::assign`]).
    plan: super::assign::Plan,
    /// Some `dot` was emitted as `wgmma` (target sm_90a).
    uses_wgmma: bool,
    /// Loads that become `cp.async` copies into operand rings (see
    /// `async_copy`); the rings sit at the start of shared memory, the
    /// scratch space of the other ops after them.
    aplan: super::async_copy::AsyncPlan,
    ring: u32,
    /// Per ring: the register holding its current slot's address, and the
    /// addresses of its first slot and one past its last.
    slot_regs: Vec<(String, String, String)>,
    /// `cp.async` loads issued since the last `commit_group`, in program
    /// order. Commits happen at every loop and branch boundary, so this
    /// static list is what is uncommitted at run time too.
    cp_pending: Vec<V>,
    /// A `dot` read the rings since the last barrier.
    ring_dirty: bool,
    /// Ring operands already waited for, fenced and barriered at the top of
    /// the loop body (see `For`): their `dot` synchronizes no further.
    ring_ready: std::collections::HashSet<V>,
    /// TMA views of this kernel ([`super::tma`]).
    tma_views: HashMap<V, super::tma::TmaView>,
    /// Tensor-map parameters (view, box innermost first) and the registers
    /// holding their generic addresses.
    tmaps: Vec<(V, Vec<u32>, bool)>,
    tmap_regs: Vec<String>,
    /// Per ring: for a TMA ring, the shared-memory offset of its slot 0's
    /// mbarrier (one per slot, 8 bytes each) and the register holding the
    /// parity of the current slot's fill.
    tma_bar: Vec<Option<(u32, String)>>,
    /// Thread 0 (initializes the mbarriers).
    leader: String,
    /// Warp specialization ([`super::warp_spec`]): the producer's slice, the
    /// stream being emitted, per TMA ring the register holding the slot a
    /// consumer releases after its next `wgmma` wait (-1: none), and lane 0
    /// of each warp (the consumers' arrivals).
    ws: Option<super::warp_spec::WsPlan>,
    role: Role,
    ws_prev: Vec<Option<String>>,
    lane0: String,
    /// Clusters ([`PtxOptions::cluster`]): per ring, whether its copies are
    /// multicast to both programs of the cluster; this program's rank in
    /// its cluster and the other's (registers; empty when not clustered).
    mcast: Vec<bool>,
    /// One stream with multicast rings: a slot is reused after a cluster
    /// barrier, not a CTA barrier.
    cluster_bar: bool,
    rank: String,
    peer: String,
    /// Index of the last top-level op of the kernel that loads into a ring
    /// (or holds one that does), the nesting depth of the block being
    /// emitted, and whether the rings are dead: past that op at the top
    /// level, with every copy landed and read, so that their shared memory
    /// may serve as scratch ([`Self::store_staged`]).
    last_ring_op: Option<usize>,
    depth: u32,
    rings_dead: bool,
}

pub fn emit(k: &Kernel, o: &PtxOptions) -> R<PtxKernel> {
    let err = |msg: String| EmitError { kernel: k.name.clone(), line: 0, msg };
    if !k.specialized {
        return Err(err("the PTX backend needs a specialized kernel".into()));
    }
    if !(o.num_warps.is_power_of_two() && (1..=32).contains(&o.num_warps)) {
        return Err(err(format!("num_warps must be a power of two in 1..=32, got {}", o.num_warps)));
    }
    if o.sm != 80 && o.sm != 90 {
        return Err(err(format!("unsupported target sm_{}; ferrotile emits sm_80 and sm_90", o.sm)));
    }
    // Block accesses of views become pointer accesses (`lower_views`),
    // except the `load_block`s a TMA copy may serve: of a view a tensor
    // map describes, feeding a `dot` directly (`async_copy` decides).
    // (the TMA views: the lowering and pipelining below keep every
    // `view(..)` op and the values it reads)
    let has_views = k.values.iter().any(|v| matches!(v.ty, Type::View { .. }));
    let tv = if has_views && o.tma && o.mma && o.wgmma && o.sm >= 90 { super::tma::views(k, &axis::analyze(k, &o.arg_div16, &o.arg_one)) } else { HashMap::new() };
    let lowered;
    let piped;
    let k = if has_views {
        // (the slot a TMA copy would fill: a `wgmma` dot's, per the layout
        // plan, in the shape `async_copy` accepts)
        let plan0 = super::assign::plan(k, o.num_warps, o.mma, o.wgmma && o.sm >= 90, &super::async_copy::kmajor_b_sources(k, &tv));
        let shape = |v: V| -> Vec<u32> { k.ty(v).shape().iter().map(|d| d.known().unwrap_or(0) as u32).collect() };
        let mut view_of: HashMap<V, V> = HashMap::new();
        let mut uses: HashMap<V, usize> = HashMap::new();
        let mut tma_slot: std::collections::HashSet<V> = Default::default();
        k.walk(&mut |op| {
            if let OpKind::LoadBlock { view, .. } = &op.kind {
                view_of.insert(op.results[0], *view);
            }
            if let OpKind::Dot { a, b, .. } = &op.kind {
                if plan0.mma(&shape(op.results[0])).is_some_and(|g| g.wgmma) {
                    for (x, is_b) in [(*a, false), (*b, true)] {
                        let es = k.ty(x).elem().map_or(2, |e| e.dtype().size_bytes() as u32);
                        let Some(inner) = view_of.get(&x).and_then(|v| tv.get(v)).map(|t| t.inner) else { continue };
                        let lay = super::async_copy::wgmma_slot(es, is_b, Some(inner), &shape(x));
                        if super::async_copy::tma_slot(lay, &shape(x), inner) {
                            tma_slot.insert(x);
                        }
                    }
                }
            }
            for x in op.kind.operands() {
                *uses.entry(x).or_default() += 1;
            }
        });
        let keep = |r: V| view_of.get(&r).is_some_and(|v| tv.contains_key(v)) && uses.get(&r) == Some(&1) && tma_slot.contains(&r);
        lowered = ferrotile_ir::passes::run(k, &ferrotile_ir::passes::PassOptions::ptx(&keep, o.pipeline)).into_owned();
        &lowered
    } else {
        piped = ferrotile_ir::passes::run(k, &ferrotile_ir::passes::PassOptions::ptx(&|_| false, o.pipeline));
        &piped
    };
    // Widest 16-byte vector of the narrowest memory element decides how many
    // consecutive elements a thread owns along the last dimension.
    let mut min_es = 4usize;
    k.walk(&mut |op| {
        if let OpKind::Load { ptr, .. } | OpKind::Store { ptr, .. } = &op.kind {
            if let Some(e) = k.ty(*ptr).elem() {
                min_es = min_es.min(e.dtype().size_bytes().max(1));
            }
        }
    });
    let vec = (16 / min_es.max(2)).min(8) as u32;
    let plan = super::assign::plan(k, o.num_warps, o.mma, o.wgmma && o.sm >= 90, &super::async_copy::kmajor_b_sources(k, &tv));
    let axis = axis::analyze(k, &o.arg_div16, &o.arg_one);
    let aplan = super::async_copy::plan(k, &plan, &tv);
    // (the producer is a 33rd warp at most; TMA rings feed wgmma, whose
    // warpgroups need num_warps % 4 == 0)
    // (a whole producer warpgroup: at most 32 warps in all)
    // (clusters: the plan also says which copies are uniform across a
    // cluster — kept as the stream structure only with `warp_specialize`)
    let ws = if (o.warp_specialize || o.cluster == 2) && o.num_warps % 4 == 0 && o.num_warps <= 16 { super::warp_spec::plan(k, &aplan) } else { None };
    let mut em = Em {
        k,
        o,
        vec,
        body: String::new(),
        pro: String::new(),
        counts: [0; 5],
        vals: HashMap::new(),
        layouts: HashMap::new(),
        idx_cache: HashMap::new(),
        owner_cache: HashMap::new(),
        labels: 0,
        smem: 0,
        tid: String::new(),
        lane: String::new(),
        warp: String::new(),
        axis,
        loc: Loc::default(),
        h_from_word: HashMap::new(),
        h_from_f32: HashMap::new(),
        remat: crate::remat::Remat::new(k),
        zero: None,
        uses_wgmma: false,
        aplan,
        ring: 0,
        slot_regs: vec![],
        cp_pending: vec![],
        ring_dirty: true,
        ring_ready: Default::default(),
        tma_views: tv,
        tmaps: vec![],
        tmap_regs: vec![],
        tma_bar: vec![],
        leader: String::new(),
        ws,
        role: Role::All,
        ws_prev: vec![],
        lane0: String::new(),
        mcast: vec![],
        cluster_bar: false,
        rank: String::new(),
        peer: String::new(),
        last_ring_op: None,
        depth: 0,
        rings_dead: false,
        plan,
    };
    {
        fn has_ring(op: &Op, ap: &super::async_copy::AsyncPlan) -> bool {
            op.results.iter().any(|r| ap.loads.contains_key(r)) || op.kind.regions().iter().any(|b| b.ops.iter().any(|o| has_ring(o, ap)))
        }
        em.last_ring_op = k.body.ops.iter().rposition(|op| has_ring(op, &em.aplan));
    }
    // multicast rings: clusters of 2 along x, a producer whose loops run
    // the same trips in both programs, every copy of the ring reading the
    // same tile in both, in an even number of 128-byte column atoms (each
    // program issues every other one)
    em.mcast = (0..em.aplan.slot_bytes.len())
        .map(|c| {
            let Some(w) = em.ws.as_ref().filter(|w| o.cluster == 2 && w.uniform_trips && em.aplan.tma[c].is_some()) else { return false };
            let mut loads = em.aplan.loads.iter().filter(|(_, cc)| **cc == c).map(|(v, _)| *v).peekable();
            let Some(&v) = loads.peek() else { return false };
            let shape: Vec<u32> = k.ty(v).shape().iter().map(|d| d.known().unwrap_or(0) as u32).collect();
            let lay = em.aplan.layout[c];
            let (super::async_copy::SlotLayout::Swizzled { es, .. }, Some((_, cols))) = (lay, lay.rows_cols(&shape)) else { return false };
            (cols * es / 128) % 2 == 0 && loads.all(|v| w.uniform.contains(&v))
        })
        .collect();
    let clustered = em.mcast.iter().any(|m| *m);
    // Multicast runs from one stream unless warp specialization is asked
    // for: a slot is then refilled after a cluster barrier (relaxed
    // arrive) instead of the CTA's. Measured (RESULTS, session 10): on par
    // with no cluster, ~1 µs faster than multicast from the producer
    // warpgroup on the decode shape.
    if !o.warp_specialize {
        em.ws = None;
    }
    em.cluster_bar = clustered && em.ws.is_none();
    em.tid = em.reg(Cls::R);
    em.lane = em.reg(Cls::R);
    em.warp = em.reg(Cls::R);
    let (t, l, w) = (em.tid.clone(), em.lane.clone(), em.warp.clone());
    let _ = writeln!(em.pro, "\tmov.u32 {t}, %tid.x;\n\tand.b32 {l}, {t}, 31;\n\tshr.u32 {w}, {t}, 5;");
    em.ring = em.aplan.ring_bytes();
    em.smem = em.ring;
    for c in 0..em.aplan.slot_bytes.len() {
        let (cur, first, end) = (em.reg(Cls::R), em.reg(Cls::R), em.reg(Cls::R));
        let (s0, sb, n) = (em.aplan.slot0(c), em.aplan.slot_bytes[c], em.aplan.slots[c]);
        // start on the last slot, so that the first load takes slot 0
        let _ = writeln!(em.pro, "\tmov.u32 {first}, ft_smem;\n\tadd.u32 {first}, {first}, {s0};\n\tadd.u32 {end}, {first}, {};\n\tadd.u32 {cur}, {first}, {};", n * sb, (n - 1) * sb);
        em.slot_regs.push((cur, first, end));
    }
    // TMA rings: one mbarrier per slot after the rings; thread 0
    // initializes them (arrival count 1: its `expect_tx`) before anything
    // else runs
    // (warp-specialized: each slot also has an *empty* mbarrier after the
    // ring's full ones, on which every consumer warp arrives once per use)
    let specialized = em.ws.is_some();
    let mut bar_off = em.ring;
    let mut inits = vec![];
    for c in 0..em.aplan.slot_bytes.len() {
        if em.aplan.tma[c].is_none() {
            em.tma_bar.push(None);
            em.ws_prev.push(None);
            continue;
        }
        let ph = em.reg(Cls::R);
        // (the cursor starts on the last slot: the first fill, of slot 0,
        // flips this to parity 0)
        let _ = writeln!(em.pro, "\tmov.u32 {ph}, 1;");
        em.tma_bar.push(Some((bar_off, ph)));
        let n = em.aplan.slots[c];
        inits.extend((0..n).map(|i| (bar_off + 8 * i, 1)));
        bar_off += 8 * n;
        if specialized {
            // (a multicast slot is released by the consumers of both
            // programs of the cluster)
            let count = if em.mcast[c] { 2 * o.num_warps } else { o.num_warps };
            inits.extend((0..n).map(|i| (bar_off + 8 * i, count)));
            bar_off += 8 * n;
            let prev = em.reg(Cls::R);
            let _ = writeln!(em.pro, "\tmov.u32 {prev}, -1;");
            em.ws_prev.push(Some(prev));
        } else {
            em.ws_prev.push(None);
        }
    }
    if bar_off > em.ring {
        em.leader = em.reg(Cls::P);
        let (lead, b) = (em.leader.clone(), em.reg(Cls::R));
        let _ = writeln!(em.pro, "\tsetp.eq.u32 {lead}, {t}, 0;\n\tmov.u32 {b}, ft_smem;");
        for (off, count) in inits {
            let _ = writeln!(em.pro, "\t@{lead} mbarrier.init.shared::cta.b64 [{b}+{off}], {count};");
        }
        // (clustered: the other program's copies and arrivals reach these
        // mbarriers too, so both programs wait for both initializations)
        let sync = if clustered { "barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" } else { "bar.sync 0;" };
        let _ = writeln!(em.pro, "\tfence.mbarrier_init.release.cluster;\n\t{sync}");
        em.ring = bar_off.next_multiple_of(16);
        em.smem = em.ring;
    }
    // The producer is a whole warpgroup (warps num_warps..num_warps+3):
    // ptxas budgets registers for the block size rounded up to warpgroups
    // anyway (a single extra warp capped 8 consumer warps at 168 registers,
    // as 384 threads would), and `setmaxnreg` — which moves registers from
    // the producer to the consumers — works per warpgroup. Its first warp
    // runs the producer's stream; the other three leave at once.
    if clustered {
        em.rank = em.reg(Cls::R);
        em.peer = em.reg(Cls::R);
        let _ = writeln!(em.pro, "\tmov.u32 {}, %cluster_ctarank;\n\txor.b32 {}, {}, 1;", em.rank, em.peer, em.rank);
    }
    let threads = (o.num_warps + 4 * specialized as u32) * 32;
    // registers: what ptxas can give every thread of the block, and what
    // the consumers may take once the producer warpgroup is down to 40
    let at_launch = (65536 / threads.next_multiple_of(128)).min(255);
    let consumers = ((65536 - 128 * 40) / (o.num_warps * 32)).min(255) / 8 * 8;
    if specialized {
        // two streams: the consumers (warps 0..num_warps) run the kernel
        // without issuing copies, the producer (warp num_warps) only the
        // copies and what they need; each emission starts from no values
        let (pw, plabel, end) = (em.reg(Cls::P), em.label(), em.label());
        em.lane0 = em.reg(Cls::P);
        let _ = writeln!(em.pro, "\tsetp.eq.u32 {}, {l}, 0;", em.lane0);
        em.l(format!("setp.ge.u32 {pw}, {w}, {};", o.num_warps));
        em.l(format!("@{pw} bra.uni {plabel};"));
        // (only where one program fills an SM: two programs on one SM
        // could each block in `setmaxnreg.inc` on registers the other
        // holds — an SM has 228 KB of shared memory, so rings over half
        // of it rule the second one out)
        let regs = consumers > at_launch && em.ring > 228 * 1024 / 2;
        if regs {
            em.l(format!("setmaxnreg.inc.sync.aligned.u32 {consumers};"));
        }
        em.role = Role::Consumer;
        em.rings_dead = false;
        em.block(&k.body)?;
        em.l(format!("bra.uni {end};"));
        em.body.push_str(&format!("{plabel}:\n"));
        if regs {
            em.l("setmaxnreg.dec.sync.aligned.u32 40;");
        }
        let idle = em.reg(Cls::P);
        em.l(format!("setp.ne.u32 {idle}, {w}, {};", o.num_warps));
        em.l(format!("@{idle} bra.uni {end};"));
        em.role = Role::Producer;
        em.vals.clear();
        em.ring_ready.clear();
        em.ring_dirty = true;
        em.rings_dead = false;
        em.block(&k.body)?;
        em.body.push_str(&format!("{end}:\n"));
    } else {
        em.block(&k.body)?;
    }
    // clustered: neither program leaves while the other may still copy
    // into it or arrive on its mbarriers (exited threads count as arrived);
    // not `.aligned`: warp-specialized streams reach it from different
    // branches, and a kernel may have returned early in some threads
    if clustered {
        em.l("barrier.cluster.arrive.release;");
        em.l("barrier.cluster.wait.acquire;");
    }
    let entry = format!("ft_{}", k.name);
    let mut params = vec![];
    let mut plist = vec![];
    for (i, p) in k.params.iter().enumerate() {
        let (abi, decl) = match p.kind {
            ParamKind::Ptr(_) => (ParamAbi::Ptr, ".param .u64"),
            ParamKind::Scalar(DType::I64) => (ParamAbi::B64, ".param .b64"),
            ParamKind::Scalar(DType::F16 | DType::BF16) => (ParamAbi::B16, ".param .b16"),
            ParamKind::Scalar(_) => (ParamAbi::B32, ".param .b32"),
        };
        params.push(abi);
        plist.push(format!("\t{decl} p{i}"));
    }
    for i in 0..em.tmaps.len() {
        plist.push(format!("\t.param .align 64 .b8 ft_tmap{i}[128]"));
    }
    let tensor_maps = em.tmaps.iter().map(|(v, b, r)| TensorMapSpec { view: em.tma_views[v].clone(), box_dims: b.clone(), round_tf32: *r }).collect();
    let mut text = String::new();
    let _ = writeln!(text, "//\n// Generated by ferrotile from kernel `{}` [{}]\n//", k.name, k.describe_binding());
    // wgmma is an sm_90a ("architecture-specific") instruction; its swizzled
    // operand tiles need 1024-byte aligned shared memory
    let arch = if em.uses_wgmma { "a" } else { "" };
    let _ = writeln!(text, ".version 8.0\n.target sm_{}{arch}\n.address_size 64\n", o.sm);
    if em.smem > 0 {
        let _ = writeln!(text, ".extern .shared .align {} .b8 ft_smem[];\n", if em.uses_wgmma { 1024 } else { 16 });
    }
    let cluster = if clustered { ".reqnctapercluster 2, 1, 1\n" } else { "" };
    let _ = writeln!(text, ".visible .entry {entry}(\n{}\n)\n.maxntid {threads}, 1, 1\n{cluster}{{", plist.join(",\n"));
    let names = [("f32", "%f"), ("b16", "%h"), ("b32", "%r"), ("b64", "%rd"), ("pred", "%p")];
    for (i, (ty, pre)) in names.iter().enumerate() {
        if em.counts[i] > 0 {
            let _ = writeln!(text, "\t.reg .{ty} {pre}<{}>;", em.counts[i]);
        }
    }
    text.push_str(&em.pro);
    text.push_str(&em.body);
    text.push_str("\tret;\n}\n");
    Ok(PtxKernel { entry, text, smem_bytes: em.smem, threads, params, fma_dots: em.plan.fma_reasons.clone(), mma_sync_dots: em.plan.no_wgmma_reasons.clone(), tensor_maps })
}

impl<'k> Em<'k> {
    fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(EmitError { kernel: self.k.name.clone(), line: self.loc.line, msg: msg.into() })
    }

    fn reg(&mut self, c: Cls) -> String {
        let (i, pre) = match c {
            Cls::F => (0, "%f"),
            Cls::H => (1, "%h"),
            Cls::R => (2, "%r"),
            Cls::Rd => (3, "%rd"),
            Cls::P => (4, "%p"),
        };
        let n = self.counts[i];
        self.counts[i] += 1;
        format!("{pre}{n}")
    }

    fn l(&mut self, s: impl AsRef<str>) {
        self.body.push('\t');
        self.body.push_str(s.as_ref());
        self.body.push('\n');
    }

    fn label(&mut self) -> String {
        self.labels += 1;
        format!("$L{}", self.labels)
    }

    fn shape_u32(&self, v: V) -> Vec<u32> {
        self.k.ty(v).shape().iter().map(|d| d.known().unwrap() as u32).collect()
    }

    fn layout(&mut self, shape: &[u32]) -> std::rc::Rc<Layout> {
        if let Some(l) = self.layouts.get(shape) {
            return l.clone();
        }
        let bl = self.plan.layout(shape, self.o.num_warps, self.vec);
        let mut thread = vec![];
        for d in 0..bl.rank() {
            let t = self.reg(Cls::R);
            let (lane, warp) = (self.lane.clone(), self.warp.clone());
            let mut s = String::new();
            let _ = writeln!(s, "\tbfe.u32 {t}, {lane}, {}, {};", bl.lane_shift[d], bl.tpw[d].trailing_zeros());
            let tw = self.reg(Cls::R);
            let _ = writeln!(s, "\tbfe.u32 {tw}, {warp}, {}, {};", bl.warp_shift[d], bl.wpc[d].trailing_zeros());
            let _ = writeln!(s, "\tmad.lo.u32 {t}, {tw}, {}, {t};", bl.warp_mul[d]);
            let _ = writeln!(s, "\tmul.lo.u32 {t}, {t}, {};", bl.spt[d]);
            self.pro.push_str(&s);
            thread.push(t);
        }
        let konst = bl.konst();
        let l = std::rc::Rc::new(Layout { bl, konst, thread });
        self.layouts.insert(shape.to_vec(), l.clone());
        l
    }

    fn nregs(&mut self, v: V) -> usize {
        if self.aplan.class_of(v).is_some() {
            return 1; // a ring slot's address
        }
        let s = self.shape_u32(v);
        if s.is_empty() {
            1
        } else {
            self.layout(&s).bl.regs()
        }
    }

    /// Index along `d` of register `r` of the canonical layout of `shape`
    /// (u32 register, computed once in the prologue).
    fn index(&mut self, shape: &[u32], r: usize, d: usize) -> String {
        let key = (shape.to_vec(), r, d);
        if let Some(s) = self.idx_cache.get(&key) {
            return s.clone();
        }
        let lay = self.layout(shape);
        let out = self.reg(Cls::R);
        let c = lay.konst[r][d];
        let mut s = format!("\tadd.u32 {out}, {}, {c};\n", lay.thread[d]);
        if lay.bl.replicated(d) {
            let _ = writeln!(s, "\tand.b32 {out}, {out}, {};", shape[d] - 1);
        }
        self.pro.push_str(&s);
        self.idx_cache.insert(key, out.clone());
        out
    }

    /// Row-major linear index of register `r` (u32 register, prologue).
    fn lin(&mut self, shape: &[u32], r: usize) -> String {
        let lay = self.layout(shape);
        let strides = lay.bl.strides();
        let out = self.reg(Cls::R);
        let mut s = format!("\tmov.u32 {out}, 0;\n");
        for d in 0..shape.len() {
            let i = self.index(shape, r, d);
            let _ = writeln!(s, "\tmad.lo.u32 {out}, {i}, {}, {out};", strides[d]);
        }
        self.pro.push_str(&s);
        out
    }

    /// Predicate true in exactly one of the threads holding register `r`'s
    /// element (None: every holder is the only one). Scalars: thread 0.
    fn owner(&mut self, shape: &[u32], r: usize) -> Option<String> {
        let key = (shape.to_vec(), r);
        if let Some(o) = self.owner_cache.get(&key) {
            return o.clone();
        }
        let res = if shape.is_empty() {
            let p = self.reg(Cls::P);
            let _ = writeln!(self.pro, "\tsetp.eq.u32 {p}, {}, 0;", self.tid);
            Some(p)
        } else {
            let lay = self.layout(shape);
            let mut pred: Option<String> = None;
            for d in 0..shape.len() {
                if !lay.bl.replicated(d) {
                    continue;
                }
                let t = self.reg(Cls::R);
                let p = self.reg(Cls::P);
                let _ = writeln!(self.pro, "\tadd.u32 {t}, {}, {};\n\tsetp.lt.u32 {p}, {t}, {};", lay.thread[d], lay.konst[r][d], shape[d]);
                pred = Some(match pred {
                    None => p,
                    Some(q) => {
                        let _ = writeln!(self.pro, "\tand.pred {p}, {p}, {q};");
                        p
                    }
                });
            }
            // warps replicated beyond the shape along dim 0 are covered by the
            // wrap check above (coverage counts them).
            pred
        };
        self.owner_cache.insert(key, res.clone());
        res
    }

    fn get(&self, v: V) -> Vec<String> {
        self.vals.get(&v).cloned().unwrap_or_else(|| panic!("ptx: value %{} not emitted", v.0))
    }

    /// Register class of `v`'s registers (a ring slot address for values
    /// that live in an operand ring).
    fn cls_of_val(&self, v: V) -> Cls {
        if self.aplan.class_of(v).is_some() {
            Cls::R
        } else {
            cls_of(self.elem(v))
        }
    }

    /// Close the current `cp.async` group (loop and branch boundaries).
    fn cp_commit(&mut self) {
        if !self.cp_pending.is_empty() {
            self.l("cp.async.commit_group;");
            self.cp_pending.clear();
        }
    }

    fn elem(&self, v: V) -> Elem {
        self.k.ty(v).elem().expect("tile type")
    }

    fn dtype(&self, v: V) -> DType {
        self.elem(v).dtype()
    }

    fn smem_need(&mut self, bytes: u32) {
        self.smem = self.smem.max(self.ring + bytes.div_ceil(16) * 16);
    }

    /// The barrier before ring slots are refilled: the CTA's, or with
    /// multicast from one stream the cluster's (the copies write the other
    /// program's slot too: both programs must be past their reads of it).
    fn ring_bar(&mut self) {
        if self.cluster_bar && self.role == Role::All {
            // (relaxed: the slots' readers are `wgmma`s this warp already
            // waited for, and their next writer is a bulk copy)
            self.l("barrier.cluster.arrive.relaxed.aligned;");
            self.l("barrier.cluster.wait.aligned;");
        } else {
            self.bar();
        }
    }

    fn bar(&mut self) {
        match self.role {
            Role::All => self.l("bar.sync 0;"),
            // (the producer warp is not there: a named barrier of the
            // consumers' threads)
            Role::Consumer => self.l(format!("bar.sync 1, {};", self.o.num_warps * 32)),
            Role::Producer => unreachable!("the producer's stream has no barrier"),
        }
    }

    // ------------------------------------------------------------ blocks

    fn block(&mut self, b: &Block) -> R<()> {
        self.remat.enter();
        self.depth += 1;
        for (i, op) in b.ops.iter().enumerate() {
            self.loc = op.loc;
            if self.depth == 1 && self.last_ring_op.is_some_and(|l| i > l) {
                self.rings_dead = true;
            }
            if self.role == Role::Producer && !self.ws.as_ref().is_some_and(|w| w.runs(op)) {
                continue;
            }
            self.op(op)?;
        }
        self.depth -= 1;
        self.remat.leave();
        Ok(())
    }

    // ------------------------------------------------- rematerialization

    fn zero_reg(&mut self) -> String {
        if let Some(z) = &self.zero {
            return z.clone();
        }
        let z = self.reg(Cls::R);
        let _ = writeln!(self.pro, "\tmov.u32 {z}, 0;");
        self.zero = Some(z.clone());
        z
    }

    fn yields(&self, b: &Block) -> Vec<V> {
        match b.ops.last().map(|o| &o.kind) {
            Some(OpKind::Yield(v)) => v.clone(),
            _ => vec![],
        }
    }

    fn mov(&mut self, c: Cls, dst: &str, src: &str) {
        let t = match c {
            Cls::F => "f32",
            Cls::H => "b16",
            Cls::R => "b32",
            Cls::Rd => "b64",
            Cls::P => "pred",
        };
        self.l(format!("mov.{t} {dst}, {src};"));
    }

    fn fresh_like(&mut self, v: V) -> Vec<String> {
        let n = self.nregs(v);
        let c = self.cls_of_val(v);
        (0..n).map(|_| self.reg(c)).collect()
    }

    // ------------------------------------------------- f16/bf16 helpers

    fn to_f32(&mut self, r: &str, d: DType) -> String {
        match d {
            DType::F32 => r.to_string(),
            DType::F16 => {
                let f = self.reg(Cls::F);
                self.l(format!("cvt.f32.f16 {f}, {r};"));
                f
            }
            DType::BF16 => {
                let f = self.reg(Cls::F);
                match self.h_from_word.get(r).cloned() {
                    // bf16 is the upper half of an f32: one bit operation on the word
                    Some((w, true)) => self.l(format!("and.b32 {f}, {w}, -65536;")),
                    Some((w, false)) => self.l(format!("shl.b32 {f}, {w}, 16;")),
                    None => {
                        let t = self.reg(Cls::R);
                        self.l(format!("cvt.u32.u16 {t}, {r};"));
                        self.l(format!("shl.b32 {f}, {t}, 16;"));
                    }
                }
                f
            }
            _ => unreachable!(),
        }
    }

    fn from_f32(&mut self, f: &str, d: DType) -> String {
        match d {
            DType::F32 => f.to_string(),
            DType::F16 => {
                let h = self.reg(Cls::H);
                self.l(format!("cvt.rn.f16.f32 {h}, {f};"));
                self.h_from_f32.insert(h.clone(), f.to_string());
                h
            }
            DType::BF16 => {
                let h = self.reg(Cls::H);
                self.l(format!("cvt.rn.bf16.f32 {h}, {f};"));
                self.h_from_f32.insert(h.clone(), f.to_string());
                h
            }
            _ => unreachable!(),
        }
    }

    /// Re-normalize an 8-bit integer held in 32 bits after arithmetic.
    fn norm8(&mut self, r: &str, d: DType) {
        match d {
            DType::I8 => self.l(format!("cvt.s32.s8 {r}, {r};")),
            DType::U8 => self.l(format!("and.b32 {r}, {r}, 255;")),
            _ => {}
        }
    }

    // --------------------------------------------------------------- ops

    fn op(&mut self, op: &Op) -> R<()> {
        let k = self.k;
        let res = op.results.first().copied();
        let out: Option<Vec<String>> = match &op.kind {
            OpKind::Param(i) => {
                let i = *i as usize;
                let p = &k.params[i];
                let r = match p.kind {
                    ParamKind::Ptr(_) => {
                        let r = self.reg(Cls::Rd);
                        self.l(format!("ld.param.u64 {r}, [p{i}];"));
                        self.l(format!("cvta.to.global.u64 {r}, {r};"));
                        r
                    }
                    ParamKind::Scalar(d) => {
                        let c = cls_of(Elem::Val(d));
                        let r = self.reg(c);
                        match c {
                            Cls::F => self.l(format!("ld.param.f32 {r}, [p{i}];")),
                            Cls::H => self.l(format!("ld.param.b16 {r}, [p{i}];")),
                            Cls::Rd => self.l(format!("ld.param.b64 {r}, [p{i}];")),
                            Cls::R => self.l(format!("ld.param.b32 {r}, [p{i}];")),
                            Cls::P => {
                                let t = self.reg(Cls::R);
                                self.l(format!("ld.param.b32 {t}, [p{i}];"));
                                self.l(format!("setp.ne.u32 {r}, {t}, 0;"));
                            }
                        }
                        r
                    }
                };
                Some(vec![r])
            }
            OpKind::Constexpr(_) | OpKind::StaticAssert { .. } => return self.err("unspecialized op reached the PTX backend"),
            OpKind::Const(l) => {
                let v = res.unwrap();
                let d = self.dtype(v);
                let c = cls_of(Elem::Val(d));
                let r = self.reg(c);
                match (c, l) {
                    (Cls::F, _) => {
                        let f = match l {
                            Lit::Float(f) => *f,
                            Lit::Int(i) => *i as f64,
                            Lit::Bool(b) => *b as i64 as f64,
                        };
                        self.l(format!("mov.f32 {r}, {};", f32_hex(f)));
                    }
                    (Cls::H, _) => {
                        let f = match l {
                            Lit::Float(f) => *f,
                            Lit::Int(i) => *i as f64,
                            Lit::Bool(b) => *b as i64 as f64,
                        };
                        let o = f32_round_to_odd(f);
                        let bits = if d == DType::F16 { half::f16::from_f32(o).to_bits() } else { half::bf16::from_f32(o).to_bits() };
                        self.l(format!("mov.b16 {r}, 0x{bits:04X};"));
                    }
                    (Cls::P, _) => {
                        let b = match l {
                            Lit::Bool(b) => *b,
                            Lit::Int(i) => *i != 0,
                            Lit::Float(f) => *f != 0.0,
                        };
                        self.l(format!("setp.eq.u32 {r}, 0, {};", if b { 0 } else { 1 }));
                    }
                    (Cls::R, _) => {
                        let i = match l {
                            Lit::Int(i) => *i,
                            Lit::Bool(b) => *b as i64,
                            Lit::Float(f) => *f as i64,
                        };
                        let i = match d {
                            DType::I8 => i as i8 as i64,
                            DType::U8 => i as u8 as i64,
                            DType::U32 => i as u32 as i64,
                            _ => i as i32 as i64,
                        };
                        self.l(format!("mov.b32 {r}, {};", i as i32));
                    }
                    (Cls::Rd, _) => {
                        let i = match l {
                            Lit::Int(i) => *i,
                            Lit::Bool(b) => *b as i64,
                            Lit::Float(f) => *f as i64,
                        };
                        self.l(format!("mov.b64 {r}, {i};"));
                    }
                }
                Some(vec![r])
            }
            OpKind::ProgramId(a) | OpKind::NumPrograms(a) => {
                let r = self.reg(Cls::R);
                let ax = ["x", "y", "z"][*a as usize];
                let sreg = if matches!(op.kind, OpKind::ProgramId(_)) { "ctaid" } else { "nctaid" };
                self.l(format!("mov.u32 {r}, %{sreg}.{ax};"));
                Some(vec![r])
            }
            OpKind::Arange { start, .. } => {
                let v = res.unwrap();
                let shape = self.shape_u32(v);
                let s = start.known().unwrap();
                let n = self.nregs(v);
                let mut regs = vec![];
                for r in 0..n {
                    let i = self.index(&shape, r, 0);
                    if s == 0 {
                        regs.push(i);
                    } else {
                        let o = self.reg(Cls::R);
                        self.l(format!("add.s32 {o}, {i}, {s};"));
                        regs.push(o);
                    }
                }
                Some(regs)
            }
            OpKind::Splat { x, .. } => {
                let v = res.unwrap();
                let n = self.nregs(v);
                let s = self.get(*x)[0].clone();
                Some(vec![s; n])
            }
            // index arithmetic is recomputed in place ([`crate::remat`])
            OpKind::Broadcast { .. } | OpKind::ExpandDims { .. } if crate::remat::remat_into(self, res.unwrap())? => return Ok(()),
            OpKind::Broadcast { x, .. } => {
                let v = res.unwrap();
                let (src, dst) = (self.shape_u32(*x), self.shape_u32(v));
                Some(self.convert(*x, &src, &dst, &|idx: &[u32]| idx.iter().zip(&src).map(|(&i, &s)| if s == 1 { 0 } else { i }).collect(), v)?)
            }
            OpKind::ExpandDims { x, .. } | OpKind::Reshape { x, .. } => {
                let v = res.unwrap();
                let (src, dst) = (self.shape_u32(*x), self.shape_u32(v));
                if src.is_empty() {
                    let n = self.nregs(v);
                    let s = self.get(*x)[0].clone();
                    Some(vec![s; n])
                } else {
                    Some(self.convert_linear(*x, &src, &dst, v)?)
                }
            }
            OpKind::Trans { x, perm } => {
                let v = res.unwrap();
                let (src, dst) = (self.shape_u32(*x), self.shape_u32(v));
                let perm = perm.clone();
                Some(self.convert(*x, &src, &dst, &|idx: &[u32]| {
                    let mut s = vec![0u32; idx.len()];
                    for (a, &p) in perm.iter().enumerate() {
                        s[p as usize] = idx[a];
                    }
                    s
                }, v)?)
            }
            // the elementwise ops (`OpKind::is_elementwise`), listed for
            // the exhaustive match
            kind @ (OpKind::Binary { .. }
            | OpKind::Cmp { .. }
            | OpKind::Unary { .. }
            | OpKind::Fma { .. }
            | OpKind::Select { .. }
            | OpKind::Cast { .. }
            | OpKind::AddPtr { .. }) => Some(self.elementwise(kind)?),
            OpKind::Load { ptr, mask, .. } if self.aplan.loads.contains_key(&res.unwrap()) => Some(self.load_async(*ptr, *mask, res.unwrap())?),
            OpKind::LoadBlock { view, offsets, .. } if self.aplan.loads.contains_key(&res.unwrap()) => Some(self.load_tma(*view, offsets, res.unwrap())?),
            OpKind::Load { ptr, mask, other } => Some(self.load(*ptr, *mask, *other, res.unwrap())?),
            OpKind::Store { ptr, value, mask } => {
                self.store(*ptr, *value, *mask, false)?;
                None
            }
            OpKind::AtomicAdd { ptr, value, mask } => {
                self.store(*ptr, *value, *mask, true)?;
                None
            }
            OpKind::MakeView { base, shape, strides } => {
                // A view is kept as [base, dims..., strides...] (64-bit).
                let mut regs = vec![self.get(*base)[0].clone()];
                for v in shape.iter().chain(strides) {
                    let r = self.get(*v)[0].clone();
                    if self.dtype(*v) == DType::I64 {
                        regs.push(r);
                    } else {
                        let w = self.reg(Cls::Rd);
                        self.l(format!("cvt.s64.s32 {w}, {r};"));
                        regs.push(w);
                    }
                }
                if let Some(v) = res {
                    self.vals.insert(v, regs);
                }
                return Ok(());
            }
            OpKind::LoadBlock { view, offsets, .. } => {
                let v = res.unwrap();
                let shape = self.shape_u32(v);
                let (ptrs, inb) = self.block_ptrs(*view, offsets, &shape)?;
                let d = self.dtype(v);
                Some(self.load_regs(&ptrs, Some(&inb), None, d, 1))
            }
            OpKind::StoreBlock { view, offsets, value } => {
                let shape = self.shape_u32(*value);
                let (ptrs, inb) = self.block_ptrs(*view, offsets, &shape)?;
                let vals = self.get(*value);
                let d = self.dtype(*value);
                let mut preds = vec![];
                for (r, p) in inb.iter().enumerate() {
                    let pr = match self.owner(&shape, r) {
                        Some(o) => {
                            let q = self.reg(Cls::P);
                            self.l(format!("and.pred {q}, {p}, {o};"));
                            q
                        }
                        None => p.clone(),
                    };
                    preds.push(Some(pr));
                }
                self.store_regs(&ptrs, &preds, &vals, d, false, 1)?;
                None
            }
            OpKind::Reduce { op: o, x, axis } => Some(self.reduce(*o, *x, *axis as usize, res.unwrap())?),
            OpKind::Scan { x, axis, .. } => Some(self.scan(*x, *axis as usize, res.unwrap())?),
            OpKind::Dot { a, b, acc, precision } => Some(self.dot(*a, *b, *acc, *precision, res.unwrap())?),
            OpKind::For { lo, hi, step, inits, body } => {
                let ivd = self.dtype(body.args[0]);
                let iv = self.reg(cls_of(Elem::Val(ivd)));
                let (rlo, rhi, rst) = (self.get(*lo)[0].clone(), self.get(*hi)[0].clone(), self.get(*step)[0].clone());
                let ivc = cls_of(Elem::Val(ivd));
                self.mov(ivc, &iv, &rlo);
                self.vals.insert(body.args[0], vec![iv.clone()]);
                // (the producer carries only the scalars its copies need)
                let keep: Vec<bool> = body.args[1..].iter().map(|a| self.role != Role::Producer || self.ws.as_ref().is_some_and(|w| w.vals.contains(a))).collect();
                let mut carried = vec![];
                for ((a, init), _) in body.args[1..].iter().zip(inits).zip(&keep).filter(|(_, k)| **k) {
                    let regs = self.fresh_like(*a);
                    let c = self.cls_of_val(*a);
                    let src = self.get(*init);
                    for (d, s) in regs.iter().zip(&src) {
                        self.mov(c, d, s);
                    }
                    self.vals.insert(*a, regs.clone());
                    carried.push((c, regs));
                }
                let (head, end) = (self.label(), self.label());
                let p = self.reg(Cls::P);
                let t = ity(ivd);
                self.cp_commit();
                self.body.push_str(&format!("{head}:\n"));
                self.ring_dirty = true;
                self.l(format!("setp.ge.{t} {p}, {iv}, {rhi};"));
                self.l(format!("@{p} bra.uni {end};"));
                // A wgmma `dot` of this body whose operands both arrive
                // through rings, `d` iterations ahead: this iteration's
                // tiles are the oldest of the `d` groups in flight. Wait for
                // them, fence them for the async proxy and barrier here,
                // before this iteration's prefetches are issued (the fence
                // then has at most d − 1 groups in flight to order, and the
                // barrier also frees the ring slots the prefetches reuse):
                // one barrier per iteration, none at the `dot`.
                // (warp-specialized: the producer reads no ring; consumers
                // synchronize with it per slot, so bulk-copied operands need
                // nothing here)
                let ring_dot = body.ops.iter().find_map(|o| match &o.kind {
                    OpKind::Dot { a, b, precision, .. } => {
                        let (da, db) = (self.aplan.carried.get(a)?.1, self.aplan.carried.get(b)?.1);
                        Some((*a, *b, da.min(db), *precision))
                    }
                    _ => None,
                });
                let tma_only = |em: &Self, v: V| em.aplan.class_of(v).is_some_and(|c| em.aplan.tma[c].is_some());
                let ring_dot = ring_dot.filter(|(a, b, ..)| match self.role {
                    Role::All => true,
                    Role::Consumer => !(tma_only(self, *a) && tma_only(self, *b)),
                    Role::Producer => false,
                });
                if let Some((a, b, d, precision)) = ring_dot {
                    // (TMA rings complete on their mbarriers, which the
                    // `dot` waits on; the barrier here frees the slots the
                    // prefetches reuse)
                    let ap = &self.aplan;
                    let cp = |v: V| ap.class_of(v).is_some_and(|c| ap.tma[c].is_none());
                    // (only the tensor cores' async proxy needs the fence;
                    // `mma.sync` operands are read with `ldmatrix`)
                    let swizzled = |v: V| cp(v) && matches!(ap.class_of(v).map(|c| ap.layout[c]), Some(super::async_copy::SlotLayout::Swizzled { .. }));
                    let (wait, fence) = (cp(a) || cp(b), swizzled(a) || swizzled(b));
                    if wait {
                        self.l(format!("cp.async.wait_group {};", d - 1));
                    }
                    if precision == DotPrecision::Tf32 {
                        let (ra, rb) = (self.get(a)[0].clone(), self.get(b)[0].clone());
                        self.round_tf32_slots(&[(a, ra), (b, rb)]);
                    }
                    if fence {
                        self.l("fence.proxy.async.shared::cta;");
                    }
                    self.ring_bar();
                    self.ring_dirty = false;
                    self.ring_ready.insert(a);
                    self.ring_ready.insert(b);
                }
                self.block(body)?;
                self.cp_commit();
                let ys: Vec<V> = self.yields(body).into_iter().zip(&keep).filter(|(_, k)| **k).map(|(y, _)| y).collect();
                // parallel copy through temporaries
                let mut tmps = vec![];
                // (a register yielded to itself — an accumulator updated in
                // place — is not copied: an in-flight wgmma writes it)
                for ((c, regs), y) in carried.iter().zip(&ys) {
                    let src = self.get(*y);
                    let mut ts = vec![];
                    for (s, d) in src.iter().zip(regs) {
                        if s == d {
                            ts.push(None);
                            continue;
                        }
                        let t = self.reg(*c);
                        self.mov(*c, &t, s);
                        ts.push(Some(t));
                    }
                    tmps.push(ts);
                }
                for ((c, regs), ts) in carried.iter().zip(&tmps) {
                    for (d, s) in regs.iter().zip(ts) {
                        if let Some(s) = s {
                            self.mov(*c, d, s);
                        }
                    }
                }
                self.l(format!("add.{t} {iv}, {iv}, {rst};"));
                self.l(format!("bra.uni {head};"));
                self.body.push_str(&format!("{end}:\n"));
                // (the producer leaves all of this to the consumers: they
                // wait for the copies still landing; `carried` holds
                // only the kept values there)
                if self.role != Role::Producer {
                    // the last iteration's prefetch (of an iteration that does not
                    // run) may still be landing in a ring slot
                    // (ring loads are top-level ops of the body: `async_copy`)
                    if body.ops.iter().any(|o| o.results.iter().any(|r| self.aplan.loads.get(r).is_some_and(|c| self.aplan.tma[*c].is_none()))) {
                        self.l("cp.async.wait_all;");
                    }
                    // (TMA: the tiles still landing are exactly the carried
                    // ones the loop leaves behind; the program must not exit
                    // while a bulk copy writes its shared memory)
                    // (warp-specialized: nothing reads them, so their slots are
                    // released at once — a loop around this one refills them)
                    for (a, (_, regs)) in body.args[1..].iter().zip(&carried) {
                        if let Some(c) = self.aplan.carried.get(a).map(|x| x.0).filter(|c| self.aplan.tma[*c].is_some()) {
                            self.tma_wait(c, &regs[0].clone());
                            if self.role == Role::Consumer {
                                self.ws_release(c, &regs[0].clone(), None);
                            }
                        }
                    }
                    // the last in-flight MMA must land before its accumulator
                    // is read
                    if body.ops.iter().any(|o| o.results.iter().any(|r| self.aplan.inflight.contains_key(r))) {
                        self.l("wgmma.wait_group.sync.aligned 0;");
                        // (and the slots of the last MMAs are free)
                        for c in 0..self.ws_prev.len() {
                            self.ws_release_prev(c);
                        }
                    }
                }
                let results = op.results.iter().zip(&keep).filter(|(_, k)| **k).map(|(r, _)| *r);
                for (r, (_, regs)) in results.zip(carried) {
                    self.vals.insert(r, regs);
                }
                return Ok(());
            }
            OpKind::If { cond, then_, else_ } => {
                let p = self.get(*cond)[0].clone();
                let outs: Vec<(Cls, Vec<String>)> = op
                    .results
                    .iter()
                    .map(|r| {
                        let c = cls_of(self.elem(*r));
                        (c, self.fresh_like(*r))
                    })
                    .collect();
                let (lelse, lend) = (self.label(), self.label());
                self.cp_commit();
                let dirty = self.ring_dirty;
                let mut dirty_after = false;
                self.l(format!("@!{p} bra.uni {lelse};"));
                for (blk, last) in [(then_, false), (else_, true)] {
                    self.ring_dirty = dirty;
                    self.block(blk)?;
                    self.cp_commit();
                    dirty_after |= self.ring_dirty;
                    self.ring_dirty = dirty_after;
                    let ys = self.yields(blk);
                    for ((c, regs), y) in outs.iter().zip(&ys) {
                        let src = self.get(*y);
                        for (d, s) in regs.iter().zip(&src) {
                            self.mov(*c, d, s);
                        }
                    }
                    if !last {
                        self.l(format!("bra.uni {lend};"));
                        self.body.push_str(&format!("{lelse}:\n"));
                    }
                }
                self.body.push_str(&format!("{lend}:\n"));
                for (r, (_, regs)) in op.results.iter().zip(outs) {
                    self.vals.insert(*r, regs);
                }
                return Ok(());
            }
            OpKind::Yield(_) => None,
            // Device printing is honoured by the interpreter only.
            OpKind::Print { .. } => None,
        };
        if let (Some(regs), Some(r)) = (out, res) {
            debug_assert_eq!(regs.len(), self.nregs(r), "{:?}", op.kind);
            self.vals.insert(r, regs);
        }
        Ok(())
    }

    /// Elementwise ops: register i of the result from register i of each
    /// operand (operands have the result's shape, hence its layout).
    fn elementwise(&mut self, kind: &OpKind) -> R<Vec<String>> {
        Ok(match kind {
            OpKind::Binary { op: o, a, b } => self.binary(*o, *a, *b)?,
            OpKind::Cmp { op: o, a, b } => self.cmp(*o, *a, *b),
            OpKind::Unary { op: o, x } => self.unary(*o, *x)?,
            OpKind::Fma { a, b, c } => {
                let d = self.dtype(*a);
                let (ra, rb, rc) = (self.get(*a), self.get(*b), self.get(*c));
                let mut out = vec![];
                for i in 0..ra.len() {
                    let (x, y, z) = (self.to_f32(&ra[i], d), self.to_f32(&rb[i], d), self.to_f32(&rc[i], d));
                    let f = self.reg(Cls::F);
                    self.l(format!("fma.rn.f32 {f}, {x}, {y}, {z};"));
                    out.push(self.from_f32(&f, d));
                }
                out
            }
            OpKind::Select { cond, a, b } => {
                let c = cls_of(self.elem(*a));
                let (rc, ra, rb) = (self.get(*cond), self.get(*a), self.get(*b));
                let mut out = vec![];
                for i in 0..ra.len() {
                    let d = self.reg(c);
                    match c {
                        Cls::P => {
                            let t = self.reg(Cls::P);
                            let u = self.reg(Cls::P);
                            self.l(format!("and.pred {t}, {}, {};", rc[i], ra[i]));
                            self.l(format!("not.pred {u}, {};", rc[i]));
                            self.l(format!("and.pred {u}, {u}, {};", rb[i]));
                            self.l(format!("or.pred {d}, {t}, {u};"));
                        }
                        _ => {
                            let t = match c {
                                Cls::F => "f32",
                                Cls::H => "b16",
                                Cls::R => "b32",
                                _ => "b64",
                            };
                            self.l(format!("selp.{t} {d}, {}, {}, {};", ra[i], rb[i], rc[i]));
                        }
                    }
                    out.push(d);
                }
                out
            }
            OpKind::Cast { x, to } => self.cast(*x, *to)?,
            OpKind::AddPtr { ptr, offset } => {
                let es = self.dtype(*ptr).size_bytes();
                let od = self.dtype(*offset);
                let (rp, ro) = (self.get(*ptr), self.get(*offset));
                let mut out = vec![];
                for i in 0..rp.len() {
                    let d = self.reg(Cls::Rd);
                    match od {
                        DType::I64 => self.l(format!("mad.lo.s64 {d}, {}, {es}, {};", ro[i], rp[i])),
                        DType::U32 | DType::U8 => self.l(format!("mad.wide.u32 {d}, {}, {es}, {};", ro[i], rp[i])),
                        _ => self.l(format!("mad.wide.s32 {d}, {}, {es}, {};", ro[i], rp[i])),
                    }
                    out.push(d);
                }
                out
            }
            _ => return self.err(format!("not an elementwise op: {kind:?}")),
        })
    }

    fn binary(&mut self, o: BinOp, a: V, b: V) -> R<Vec<String>> {
        let d = self.dtype(a);
        let (ra, rb) = (self.get(a), self.get(b));
        let mut out = vec![];
        for i in 0..ra.len() {
            let (x, y) = (&ra[i], &rb[i]);
            let r = if d.is_float() {
                let (fx, fy) = (self.to_f32(x, d), self.to_f32(y, d));
                let f = self.reg(Cls::F);
                let ins = match o {
                    BinOp::Add => "add.rn.f32",
                    BinOp::Sub => "sub.rn.f32",
                    BinOp::Mul => "mul.rn.f32",
                    BinOp::Div => "div.rn.f32",
                    BinOp::Max => "max.f32",
                    BinOp::Min => "min.f32",
                    _ => return self.err(format!("{o:?} on floats")),
                };
                self.l(format!("{ins} {f}, {fx}, {fy};"));
                self.from_f32(&f, d)
            } else if d == DType::Bool {
                let p = self.reg(Cls::P);
                let ins = match o {
                    BinOp::And | BinOp::LAnd | BinOp::Min => "and",
                    BinOp::Or | BinOp::LOr | BinOp::Max => "or",
                    BinOp::Xor => "xor",
                    _ => return self.err(format!("{o:?} on bool")),
                };
                self.l(format!("{ins}.pred {p}, {x}, {y};"));
                p
            } else {
                let c = cls_of(Elem::Val(d));
                let r = self.reg(c);
                let t = ity(d);
                let bits = if d == DType::I64 { 64 } else { 32 };
                let ins = match o {
                    BinOp::Add => format!("add.{t}"),
                    BinOp::Sub => format!("sub.{t}"),
                    BinOp::Mul => format!("mul.lo.{t}"),
                    BinOp::Div => format!("div.{t}"),
                    BinOp::Rem => format!("rem.{t}"),
                    BinOp::And => format!("and.b{bits}"),
                    BinOp::Or => format!("or.b{bits}"),
                    BinOp::Xor => format!("xor.b{bits}"),
                    BinOp::Max => format!("max.{t}"),
                    BinOp::Min => format!("min.{t}"),
                    BinOp::Shl | BinOp::Shr => {
                        // shift amount: 32-bit; amounts ≥ width saturate (PTX clamps)
                        let amt = if d == DType::I64 {
                            let a = self.reg(Cls::R);
                            let big = self.reg(Cls::P);
                            self.l(format!("cvt.u32.u64 {a}, {y};"));
                            self.l(format!("setp.gt.u64 {big}, {y}, 63;"));
                            self.l(format!("selp.b32 {a}, 64, {a}, {big};"));
                            a
                        } else {
                            y.clone()
                        };
                        let st = if o == BinOp::Shl {
                            format!("shl.b{bits}")
                        } else if d.is_signed() {
                            format!("shr.s{bits}")
                        } else {
                            format!("shr.u{bits}")
                        };
                        // 8-bit types: width is 8, not 32
                        if matches!(d, DType::I8 | DType::U8) {
                            let big = self.reg(Cls::P);
                            let a2 = self.reg(Cls::R);
                            self.l(format!("setp.gt.u32 {big}, {amt}, 8;"));
                            self.l(format!("selp.b32 {a2}, 8, {amt}, {big};"));
                            self.l(format!("{st} {r}, {x}, {a2};"));
                        } else {
                            self.l(format!("{st} {r}, {x}, {amt};"));
                        }
                        self.norm8(&r, d);
                        out.push(r);
                        continue;
                    }
                    BinOp::LAnd | BinOp::LOr => return self.err("logical op on integers"),
                };
                self.l(format!("{ins} {r}, {x}, {y};"));
                self.norm8(&r, d);
                r
            };
            out.push(r);
        }
        Ok(out)
    }

    fn cmp(&mut self, o: CmpOp, a: V, b: V) -> Vec<String> {
        let d = self.dtype(a);
        let (ra, rb) = (self.get(a), self.get(b));
        let mut out = vec![];
        for i in 0..ra.len() {
            let p = self.reg(Cls::P);
            if d == DType::Bool {
                // compare as integers 0/1
                let (x, y) = (self.reg(Cls::R), self.reg(Cls::R));
                self.l(format!("selp.u32 {x}, 1, 0, {};", ra[i]));
                self.l(format!("selp.u32 {y}, 1, 0, {};", rb[i]));
                self.l(format!("setp.{}.u32 {p}, {x}, {y};", cmp_s(o, false)));
            } else if d.is_float() {
                let (x, y) = (self.to_f32(&ra[i], d), self.to_f32(&rb[i], d));
                self.l(format!("setp.{}.f32 {p}, {x}, {y};", cmp_s(o, true)));
            } else {
                self.l(format!("setp.{}.{} {p}, {}, {};", cmp_s(o, false), ity(d), ra[i], rb[i]));
            }
            out.push(p);
        }
        out
    }

    fn unary(&mut self, o: UnOp, x: V) -> R<Vec<String>> {
        let d = self.dtype(x);
        let rx = self.get(x);
        let mut out = vec![];
        for r in rx {
            let o_r = if d.is_float() {
                let f = self.to_f32(&r, d);
                let y = self.funary(o, &f)?;
                self.from_f32(&y, d)
            } else if d == DType::Bool {
                let p = self.reg(Cls::P);
                self.l(format!("not.pred {p}, {r};"));
                p
            } else {
                let c = cls_of(Elem::Val(d));
                let y = self.reg(c);
                let bits = if d == DType::I64 { 64 } else { 32 };
                match o {
                    UnOp::Neg => self.l(format!("neg.s{bits} {y}, {r};")),
                    UnOp::Not => self.l(format!("not.b{bits} {y}, {r};")),
                    UnOp::Abs if !d.is_signed() => self.l(format!("mov.b{bits} {y}, {r};")),
                    UnOp::Abs => self.l(format!("abs.s{bits} {y}, {r};")),
                    _ => return self.err(format!("{} on integers", o.name())),
                }
                self.norm8(&y, d);
                y
            };
            out.push(o_r);
        }
        Ok(out)
    }

    fn fconst(&mut self, v: f64) -> String {
        f32_hex(v)
    }

    fn fexp(&mut self, x: &str) -> String {
        // exp(x) = 2^(x * log2 e), ex2.approx: ~2 ulp
        let t = self.reg(Cls::F);
        let y = self.reg(Cls::F);
        let c = self.fconst(std::f64::consts::LOG2_E);
        self.l(format!("mul.rn.f32 {t}, {x}, {c};"));
        self.l(format!("ex2.approx.f32 {y}, {t};"));
        y
    }

    /// Natural log with ~1 ulp error: x = m·2^e with m in [√½, √2),
    /// log m = 2·atanh(s), s = (m-1)/(m+1), odd series to s^11; zero,
    /// negative, infinite and NaN inputs take `lg2.approx`'s special values.
    fn flog(&mut self, x: &str) -> String {
        let (xs, bits, e, mb) = (self.reg(Cls::F), self.reg(Cls::R), self.reg(Cls::R), self.reg(Cls::R));
        let sub = self.reg(Cls::P);
        // scale subnormals into the normal range
        self.l(format!("setp.lt.f32 {sub}, {x}, 0f00800000;"));
        self.l(format!("mul.rn.f32 {xs}, {x}, 0f4B000000;"));
        self.l(format!("selp.f32 {xs}, {xs}, {x}, {sub};"));
        self.l(format!("mov.b32 {bits}, {xs};"));
        self.l(format!("shr.u32 {e}, {bits}, 23;"));
        self.l(format!("and.b32 {e}, {e}, 255;"));
        self.l(format!("sub.s32 {e}, {e}, 127;"));
        self.l(format!("@{sub} sub.s32 {e}, {e}, 23;"));
        self.l(format!("and.b32 {mb}, {bits}, 8388607;"));
        self.l(format!("or.b32 {mb}, {mb}, 1065353216;"));
        let m = self.reg(Cls::F);
        self.l(format!("mov.b32 {m}, {mb};"));
        let big = self.reg(Cls::P);
        self.l(format!("setp.gt.f32 {big}, {m}, 0f3FB504F3;"));
        self.l(format!("@{big} mul.rn.f32 {m}, {m}, 0f3F000000;"));
        self.l(format!("@{big} add.s32 {e}, {e}, 1;"));
        let (num, den, sv, s2) = (self.reg(Cls::F), self.reg(Cls::F), self.reg(Cls::F), self.reg(Cls::F));
        self.l(format!("sub.rn.f32 {num}, {m}, 0f3F800000;"));
        self.l(format!("add.rn.f32 {den}, {m}, 0f3F800000;"));
        self.l(format!("div.rn.f32 {sv}, {num}, {den};"));
        self.l(format!("mul.rn.f32 {s2}, {sv}, {sv};"));
        let p = self.reg(Cls::F);
        self.l(format!("mov.f32 {p}, {};", f32_hex(2.0 / 11.0)));
        for c in [2.0 / 9.0, 2.0 / 7.0, 2.0 / 5.0, 2.0 / 3.0] {
            self.l(format!("fma.rn.f32 {p}, {p}, {s2}, {};", f32_hex(c)));
        }
        self.l(format!("mul.rn.f32 {p}, {p}, {s2};"));
        // log m = 2s + s·p  (p carries the s^3.. terms over s)
        let lm = self.reg(Cls::F);
        self.l(format!("fma.rn.f32 {lm}, {sv}, {p}, {sv};"));
        self.l(format!("add.rn.f32 {lm}, {lm}, {sv};"));
        let ef = self.reg(Cls::F);
        self.l(format!("cvt.rn.f32.s32 {ef}, {e};"));
        // e·ln2 in two parts
        let r = self.reg(Cls::F);
        self.l(format!("fma.rn.f32 {r}, {ef}, {}, {lm};", f32_hex(-2.1219444e-4)));
        self.l(format!("fma.rn.f32 {r}, {ef}, {}, {r};", f32_hex(0.693359375)));
        // specials: x <= 0, inf, nan
        let (ok, t) = (self.reg(Cls::P), self.reg(Cls::P));
        self.l(format!("setp.gt.f32 {ok}, {x}, 0f00000000;"));
        self.l(format!("setp.lt.f32 {t}, {x}, 0f7F800000;"));
        self.l(format!("and.pred {ok}, {ok}, {t};"));
        let sp = self.reg(Cls::F);
        self.l(format!("lg2.approx.f32 {sp}, {x};"));
        self.l(format!("selp.f32 {r}, {r}, {sp}, {ok};"));
        r
    }

    fn funary(&mut self, o: UnOp, x: &str) -> R<String> {
        let y = self.reg(Cls::F);
        match o {
            UnOp::Neg => self.l(format!("neg.f32 {y}, {x};")),
            UnOp::Abs => self.l(format!("abs.f32 {y}, {x};")),
            UnOp::Exp => return Ok(self.fexp(x)),
            UnOp::Exp2 => self.l(format!("ex2.approx.f32 {y}, {x};")),
            UnOp::Log => {
                let l = self.flog(x);
                self.l(format!("mov.f32 {y}, {l};"));
            }
            UnOp::Log2 => {
                let l = self.flog(x);
                self.l(format!("mul.rn.f32 {y}, {l}, {};", f32_hex(std::f64::consts::LOG2_E)));
            }
            UnOp::Sqrt => self.l(format!("sqrt.rn.f32 {y}, {x};")),
            UnOp::Rsqrt => self.l(format!("rsqrt.approx.f32 {y}, {x};")),
            UnOp::Floor => self.l(format!("cvt.rmi.f32.f32 {y}, {x};")),
            UnOp::Ceil => self.l(format!("cvt.rpi.f32.f32 {y}, {x};")),
            UnOp::RoundTf32 => return Ok(self.tf32_round(x)),
            UnOp::Sigmoid => {
                let n = self.reg(Cls::F);
                self.l(format!("neg.f32 {n}, {x};"));
                let e = self.fexp(&n);
                let d = self.reg(Cls::F);
                self.l(format!("add.rn.f32 {d}, {e}, 0f3F800000;"));
                self.l(format!("rcp.rn.f32 {y}, {d};"));
            }
            UnOp::Tanh => {
                // |x| < 0.25: odd Taylor polynomial; else sign(x)(1-e)/(1+e), e = exp(-2|x|)
                let a = self.reg(Cls::F);
                self.l(format!("abs.f32 {a}, {x};"));
                let m2 = self.reg(Cls::F);
                self.l(format!("mul.rn.f32 {m2}, {a}, 0fC0000000;"));
                let e = self.fexp(&m2);
                let (num, den, q) = (self.reg(Cls::F), self.reg(Cls::F), self.reg(Cls::F));
                self.l(format!("sub.rn.f32 {num}, 0f3F800000, {e};"));
                self.l(format!("add.rn.f32 {den}, 0f3F800000, {e};"));
                self.l(format!("div.rn.f32 {q}, {num}, {den};"));
                self.l(format!("copysign.f32 {q}, {x}, {q};"));
                // polynomial
                let x2 = self.reg(Cls::F);
                self.l(format!("mul.rn.f32 {x2}, {x}, {x};"));
                let coef = [62.0 / 2835.0, -17.0 / 315.0, 2.0 / 15.0, -1.0 / 3.0, 1.0];
                let p = self.reg(Cls::F);
                self.l(format!("mov.f32 {p}, {};", f32_hex(coef[0])));
                for c in &coef[1..] {
                    self.l(format!("fma.rn.f32 {p}, {p}, {x2}, {};", f32_hex(*c)));
                }
                self.l(format!("mul.rn.f32 {p}, {p}, {x};"));
                let small = self.reg(Cls::P);
                self.l(format!("setp.lt.f32 {small}, {a}, 0f3E800000;"));
                self.l(format!("selp.f32 {y}, {p}, {q}, {small};"));
            }
            UnOp::Erf => {
                // |x| < 0.5: Taylor series; else Abramowitz–Stegun 7.1.26
                let a = self.reg(Cls::F);
                self.l(format!("abs.f32 {a}, {x};"));
                let x2 = self.reg(Cls::F);
                self.l(format!("mul.rn.f32 {x2}, {x}, {x};"));
                let p = self.reg(Cls::F);
                // sum_{n} (-1)^n x^(2n+1) / (n! (2n+1)) * 2/sqrt(pi), Horner in x^2
                let mut cs = vec![];
                let mut fact = 1.0f64;
                for n in 0..9 {
                    if n > 0 {
                        fact *= n as f64;
                    }
                    let s = if n % 2 == 0 { 1.0 } else { -1.0 };
                    cs.push(s / (fact * (2 * n + 1) as f64) * 2.0 / std::f64::consts::PI.sqrt());
                }
                self.l(format!("mov.f32 {p}, {};", f32_hex(cs[8])));
                for c in cs[..8].iter().rev() {
                    self.l(format!("fma.rn.f32 {p}, {p}, {x2}, {};", f32_hex(*c)));
                }
                self.l(format!("mul.rn.f32 {p}, {p}, {x};"));
                let t = self.reg(Cls::F);
                self.l(format!("fma.rn.f32 {t}, {a}, {}, 0f3F800000;", f32_hex(0.3275911)));
                self.l(format!("rcp.rn.f32 {t}, {t};"));
                let q = self.reg(Cls::F);
                let ac = [1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592];
                self.l(format!("mov.f32 {q}, {};", f32_hex(ac[0])));
                for c in &ac[1..] {
                    self.l(format!("fma.rn.f32 {q}, {q}, {t}, {};", f32_hex(*c)));
                }
                self.l(format!("mul.rn.f32 {q}, {q}, {t};"));
                let nx2 = self.reg(Cls::F);
                self.l(format!("neg.f32 {nx2}, {x2};"));
                let e = self.fexp(&nx2);
                self.l(format!("mul.rn.f32 {q}, {q}, {e};"));
                self.l(format!("sub.rn.f32 {q}, 0f3F800000, {q};"));
                self.l(format!("copysign.f32 {q}, {x}, {q};"));
                let small = self.reg(Cls::P);
                self.l(format!("setp.lt.f32 {small}, {a}, 0f3F000000;"));
                self.l(format!("selp.f32 {y}, {p}, {q}, {small};"));
            }
            UnOp::Sin | UnOp::Cos => {
                // k = rint(x * 2/pi); r = x - k*pi/2 (3-part Cody–Waite); Taylor on |r| <= pi/4
                let kf = self.reg(Cls::F);
                self.l(format!("mul.rn.f32 {kf}, {x}, {};", f32_hex(std::f64::consts::FRAC_2_PI)));
                self.l(format!("cvt.rni.f32.f32 {kf}, {kf};"));
                let r = self.reg(Cls::F);
                let c1 = 1.5707963705062866f64; // f32(pi/2)
                let c2 = -4.371139000186243e-8f64;
                let c3 = -1.7151245100059164e-15f64;
                self.l(format!("fma.rn.f32 {r}, {kf}, {}, {x};", f32_hex(-c1)));
                self.l(format!("fma.rn.f32 {r}, {kf}, {}, {r};", f32_hex(-c2)));
                self.l(format!("fma.rn.f32 {r}, {kf}, {}, {r};", f32_hex(-c3)));
                let r2 = self.reg(Cls::F);
                self.l(format!("mul.rn.f32 {r2}, {r}, {r};"));
                // sin poly
                let s = self.reg(Cls::F);
                let sc = [-1.0 / 39916800.0, 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0];
                self.l(format!("mov.f32 {s}, {};", f32_hex(sc[0])));
                for c in &sc[1..] {
                    self.l(format!("fma.rn.f32 {s}, {s}, {r2}, {};", f32_hex(*c)));
                }
                self.l(format!("mul.rn.f32 {s}, {s}, {r2};"));
                self.l(format!("fma.rn.f32 {s}, {s}, {r}, {r};"));
                let cpoly = self.reg(Cls::F);
                let cc = [1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0, -1.0 / 720.0, 1.0 / 24.0, -0.5, 1.0];
                self.l(format!("mov.f32 {cpoly}, {};", f32_hex(cc[0])));
                for c in &cc[1..] {
                    self.l(format!("fma.rn.f32 {cpoly}, {cpoly}, {r2}, {};", f32_hex(*c)));
                }
                let q = self.reg(Cls::R);
                self.l(format!("cvt.rzi.s32.f32 {q}, {kf};"));
                if o == UnOp::Cos {
                    self.l(format!("add.s32 {q}, {q}, 1;"));
                }
                // quadrant: q&1 → use the other polynomial; q&2 → negate
                let (b0, b1) = (self.reg(Cls::R), self.reg(Cls::R));
                self.l(format!("and.b32 {b0}, {q}, 1;"));
                self.l(format!("and.b32 {b1}, {q}, 2;"));
                let (p0, p1) = (self.reg(Cls::P), self.reg(Cls::P));
                self.l(format!("setp.ne.u32 {p0}, {b0}, 0;"));
                self.l(format!("setp.ne.u32 {p1}, {b1}, 0;"));
                self.l(format!("selp.f32 {y}, {cpoly}, {s}, {p0};"));
                let n = self.reg(Cls::F);
                self.l(format!("neg.f32 {n}, {y};"));
                self.l(format!("selp.f32 {y}, {n}, {y}, {p1};"));
            }
            UnOp::Not => return self.err("`!` on floats"),
        }
        Ok(y)
    }

    fn cast(&mut self, x: V, to: DType) -> R<Vec<String>> {
        let from = self.dtype(x);
        let rx = self.get(x);
        let mut out = vec![];
        for r in rx {
            let o = if from == to {
                r.clone()
            } else if from == DType::Bool {
                match cls_of(Elem::Val(to)) {
                    Cls::F => {
                        let f = self.reg(Cls::F);
                        self.l(format!("selp.f32 {f}, 0f3F800000, 0f00000000, {r};"));
                        f
                    }
                    Cls::H => {
                        let f = self.reg(Cls::F);
                        self.l(format!("selp.f32 {f}, 0f3F800000, 0f00000000, {r};"));
                        self.from_f32(&f, to)
                    }
                    Cls::Rd => {
                        let y = self.reg(Cls::Rd);
                        self.l(format!("selp.b64 {y}, 1, 0, {r};"));
                        y
                    }
                    _ => {
                        let y = self.reg(Cls::R);
                        self.l(format!("selp.b32 {y}, 1, 0, {r};"));
                        y
                    }
                }
            } else if to == DType::Bool {
                let p = self.reg(Cls::P);
                if from.is_float() {
                    let f = self.to_f32(&r, from);
                    self.l(format!("setp.neu.f32 {p}, {f}, 0f00000000;"));
                } else {
                    self.l(format!("setp.ne.{} {p}, {r}, 0;", if from == DType::I64 { "s64" } else { "s32" }));
                }
                p
            } else if from.is_float() && to.is_float() {
                let f = self.to_f32(&r, from);
                self.from_f32(&f, to)
            } else if from.is_float() {
                let f0 = self.to_f32(&r, from);
                // NaN converts to 0 (cvt.rzi leaves it implementation-defined for 64-bit)
                let f = self.reg(Cls::F);
                let nan = self.reg(Cls::P);
                self.l(format!("setp.nan.f32 {nan}, {f0}, {f0};"));
                self.l(format!("selp.f32 {f}, 0f00000000, {f0}, {nan};"));
                match to {
                    DType::I64 => {
                        let y = self.reg(Cls::Rd);
                        self.l(format!("cvt.rzi.s64.f32 {y}, {f};"));
                        y
                    }
                    DType::I32 | DType::I8 => {
                        let y = self.reg(Cls::R);
                        self.l(format!("cvt.rzi.s32.f32 {y}, {f};"));
                        if to == DType::I8 {
                            self.l(format!("max.s32 {y}, {y}, -128;"));
                            self.l(format!("min.s32 {y}, {y}, 127;"));
                        }
                        y
                    }
                    _ => {
                        let y = self.reg(Cls::R);
                        self.l(format!("cvt.rzi.u32.f32 {y}, {f};"));
                        if to == DType::U8 {
                            self.l(format!("min.u32 {y}, {y}, 255;"));
                        }
                        y
                    }
                }
            } else if to.is_float() {
                // int → float (via f32 for f16/bf16)
                let f = self.reg(Cls::F);
                let src = if from == DType::I64 { "s64" } else if from.is_signed() { "s32" } else { "u32" };
                if to == DType::F16 && from != DType::I64 {
                    let h = self.reg(Cls::H);
                    self.l(format!("cvt.rn.f16.{src} {h}, {r};"));
                    h
                } else if to == DType::F32 {
                    self.l(format!("cvt.rn.f32.{src} {f}, {r};"));
                    f
                } else {
                    // Round once: truncate to f32, make it sticky (round to
                    // odd) if inexact, then round to nearest-even in 16 bits.
                    self.l(format!("cvt.rz.f32.{src} {f}, {r};"));
                    let back = self.reg(if from == DType::I64 { Cls::Rd } else { Cls::R });
                    self.l(format!("cvt.rzi.{src}.f32 {back}, {f};"));
                    let inexact = self.reg(Cls::P);
                    self.l(format!("setp.ne.{src} {inexact}, {back}, {r};"));
                    let bits = self.reg(Cls::R);
                    self.l(format!("mov.b32 {bits}, {f};"));
                    self.l(format!("@{inexact} or.b32 {bits}, {bits}, 1;"));
                    self.l(format!("mov.b32 {f}, {bits};"));
                    self.from_f32(&f, to)
                }
            } else {
                // int → int
                match (from, to) {
                    (DType::I64, _) => {
                        let y = self.reg(Cls::R);
                        self.l(format!("cvt.u32.u64 {y}, {r};"));
                        self.norm8(&y, to);
                        y
                    }
                    (_, DType::I64) => {
                        let y = self.reg(Cls::Rd);
                        if from.is_signed() {
                            self.l(format!("cvt.s64.s32 {y}, {r};"));
                        } else {
                            self.l(format!("cvt.u64.u32 {y}, {r};"));
                        }
                        y
                    }
                    _ => {
                        let y = self.reg(Cls::R);
                        self.l(format!("mov.b32 {y}, {r};"));
                        self.norm8(&y, to);
                        y
                    }
                }
            };
            out.push(o);
        }
        Ok(out)
    }

    // --------------------------------------------------------- memory

    fn ld_ty(d: DType) -> &'static str {
        match d {
            DType::F32 => "f32",
            DType::F16 | DType::BF16 => "b16",
            DType::I32 => "s32",
            DType::U32 => "u32",
            DType::I64 => "b64",
            DType::I8 => "s8",
            DType::U8 => "u8",
            DType::Bool => "u8",
            DType::Generic(_) => unreachable!(),
        }
    }

    /// Vector width for a pointer tile: runs of consecutive registers along
    /// the last dimension that are provably contiguous, aligned and masked
    /// uniformly.
    fn vec_width(&mut self, ptr: V, mask: Option<V>) -> usize {
        let shape = self.shape_u32(ptr);
        if shape.is_empty() {
            return 1;
        }
        let lay = self.layout(&shape);
        if lay.bl.any_replication() {
            return 1;
        }
        let es = self.dtype(ptr).size_bytes() as u64;
        let pi = self.axis.get(&ptr).copied();
        let mut v = lay.bl.spt[shape.len() - 1] as u64;
        v = v.min(16 / es);
        if let Some(i) = pi {
            v = v.min(i.contig).min(i.div / es.max(1));
        } else {
            v = 1;
        }
        if let Some(m) = mask {
            let k = self.axis.get(&m).map(|i| i.konst).unwrap_or(1);
            v = v.min(k);
        }
        if es == 1 {
            v = v.min(4);
        }
        let mut w = 1;
        while w * 2 <= v {
            w *= 2;
        }
        w as usize
    }

    fn load(&mut self, ptr: V, mask: Option<V>, other: Option<V>, res: V) -> R<Vec<String>> {
        let d = self.dtype(res);
        let rp = self.get(ptr);
        let masks = mask.map(|m| self.get(m));
        let others = other.map(|o| self.get(o));
        let w = self.vec_width(ptr, mask);
        let preds: Option<Vec<String>> = masks;
        let mut regs = self.load_regs(&rp, preds.as_deref(), others.as_deref(), d, w);
        // loads of bool are not produced (no Ptr<bool>)
        if d == DType::Bool {
            return self.err("bool memory");
        }
        regs.truncate(rp.len());
        Ok(regs)
    }

    fn load_regs(&mut self, ptrs: &[String], masks: Option<&[String]>, others: Option<&[String]>, d: DType, w: usize) -> Vec<String> {
        let c = cls_of(Elem::Val(d));
        let t = Self::ld_ty(d);
        let mut out = vec![];
        let n = ptrs.len();
        let mut i = 0;
        while i < n {
            let group: Vec<String> = (0..w).map(|_| self.reg(c)).collect();
            for (j, g) in group.iter().enumerate() {
                match others {
                    Some(o) => self.mov(c, g, &o[i + j]),
                    None => match c {
                        Cls::F => self.l(format!("mov.f32 {g}, 0f00000000;")),
                        Cls::H => self.l(format!("mov.b16 {g}, 0;")),
                        Cls::Rd => self.l(format!("mov.b64 {g}, 0;")),
                        _ => self.l(format!("mov.b32 {g}, 0;")),
                    },
                }
            }
            let pred = masks.map(|m| format!("@{} ", m[i])).unwrap_or_default();
            if w == 1 {
                self.l(format!("{pred}ld.global.{t} {}, [{}];", group[0], ptrs[i]));
            } else if w == 8 && c == Cls::H {
                // 8 x 16-bit: PTX vectors stop at v4, so move 4 x 32-bit words
                let words: Vec<String> = (0..4).map(|_| self.reg(Cls::R)).collect();
                for (j, wd) in words.iter().enumerate() {
                    self.l(format!("mov.b32 {wd}, {{{}, {}}};", group[2 * j], group[2 * j + 1]));
                }
                self.l(format!("{pred}ld.global.v4.b32 {{{}}}, [{}];", words.join(", "), ptrs[i]));
                for (j, wd) in words.iter().enumerate() {
                    self.l(format!("mov.b32 {{{}, {}}}, {wd};", group[2 * j], group[2 * j + 1]));
                    self.h_from_word.insert(group[2 * j].clone(), (wd.clone(), false));
                    self.h_from_word.insert(group[2 * j + 1].clone(), (wd.clone(), true));
                }
            } else {
                self.l(format!("{pred}ld.global.v{w}.{t} {{{}}}, [{}];", group.join(", "), ptrs[i]));
            }
            out.extend(group);
            i += w;
        }
        out
    }

    fn store(&mut self, ptr: V, value: V, mask: Option<V>, atomic: bool) -> R<()> {
        if !atomic && self.store_staged(ptr, value, mask)? {
            return Ok(());
        }
        let shape = self.shape_u32(ptr);
        let d = self.dtype(value);
        let rp = self.get(ptr);
        let rv = self.get(value);
        let rm = mask.map(|m| self.get(m));
        let mut preds = vec![];
        for r in 0..rp.len() {
            let own = self.owner(&shape, r);
            let p = match (&rm, own) {
                (Some(m), Some(o)) => {
                    let q = self.reg(Cls::P);
                    self.l(format!("and.pred {q}, {}, {o};", m[r]));
                    Some(q)
                }
                (Some(m), None) => Some(m[r].clone()),
                (None, o) => o,
            };
            preds.push(p);
        }
        let w = if atomic || self.layout_has_repl(&shape) { 1 } else { self.vec_width(ptr, mask) };
        self.store_regs(&rp, &preds, &rv, d, atomic, w)
    }

    /// A 2-D store of a tensor-core accumulator layout (a thread holds runs
    /// of 2 elements along the rows: 4- or 8-byte stores, 8 rows per warp
    /// instruction, so every L2 write request carries half a sector) goes
    /// through shared memory instead: the registers are written row-major
    /// (rows padded by 16 bytes), read back as 16-byte pieces — consecutive
    /// threads, consecutive pieces of a row — and stored with one 16-byte
    /// `st.global` each, the pointers and the mask recomputed at each
    /// piece's index ([`crate::remat`]). Taken when it is provably legal
    /// and free: the pointers run contiguously and 16-byte aligned over
    /// each piece and the mask is constant over it (the axis analysis), both
    /// are cheap to recompute, and the scratch fits in the operand rings,
    /// dead by then (past the kernel's last ring load, at the top level).
    /// Measured: 4096×4096×64 bf16 with 128×256 tiles took 44 µs, all of it
    /// the store of C (3.1 M single-sector L2 write requests for 32 MB).
    fn store_staged(&mut self, ptr: V, value: V, mask: Option<V>) -> R<bool> {
        let shape = self.shape_u32(ptr);
        if shape.len() != 2 || !self.rings_dead || self.plan.mma(&shape).is_none() {
            return Ok(false);
        }
        let d = self.dtype(value);
        let es = d.size_bytes() as u32;
        if !(es == 2 || es == 4) {
            return Ok(false);
        }
        let vw = 16 / es;
        let (rows, cols) = (shape[0], shape[1]);
        let lay = self.layout(&shape);
        let run = lay.bl.spt[1];
        if lay.bl.any_replication() || run * es >= 16 || cols % vw != 0 || run > 2 {
            return Ok(false);
        }
        let threads = self.o.num_warps * 32;
        let pieces = rows * cols / vw;
        if pieces % threads != 0 || !(cols / vw).is_power_of_two() {
            return Ok(false);
        }
        let Some(pi) = self.axis.get(&ptr).copied() else { return Ok(false) };
        if pi.contig < vw as u64 || pi.div < 16 {
            return Ok(false);
        }
        if let Some(m) = mask {
            if self.axis.get(&m).map_or(1, |i| i.konst) < vw as u64 {
                return Ok(false);
            }
        }
        if !self.remat.worth(ptr) || mask.is_some_and(|m| !self.remat.worth(m)) {
            return Ok(false);
        }
        let pitch = cols * es + 16;
        if rows * pitch > self.aplan.ring_bytes() {
            return Ok(false);
        }
        // every warp is past its last ring read (the loop exits waited for
        // the copies and the MMAs)
        self.bar();
        let base = self.reg(Cls::R);
        self.l(format!("mov.u32 {base}, ft_smem;"));
        let rv = self.get(value);
        let c = self.cls_of_val(value);
        for r in (0..rv.len()).step_by(run as usize) {
            let (i, j) = (self.index(&shape, r, 0), self.index(&shape, r, 1));
            let a = self.reg(Cls::R);
            self.l(format!("mad.lo.u32 {a}, {i}, {pitch}, {base};"));
            self.l(format!("mad.lo.u32 {a}, {j}, {es}, {a};"));
            match (c, run) {
                (Cls::H, 2) => {
                    let w = self.reg(Cls::R);
                    self.l(format!("mov.b32 {w}, {{{}, {}}};", rv[r], rv[r + 1]));
                    self.l(format!("st.shared.b32 [{a}], {w};"));
                }
                (Cls::H, _) => self.l(format!("st.shared.b16 [{a}], {};", rv[r])),
                (Cls::F, 2) => self.l(format!("st.shared.v2.f32 [{a}], {{{}, {}}};", rv[r], rv[r + 1])),
                (Cls::F, _) => self.l(format!("st.shared.f32 [{a}], {};", rv[r])),
                (Cls::R, 2) => self.l(format!("st.shared.v2.b32 [{a}], {{{}, {}}};", rv[r], rv[r + 1])),
                (Cls::R, _) => self.l(format!("st.shared.b32 [{a}], {};", rv[r])),
                _ => return self.err("staged store of an unsupported register class"),
            }
        }
        self.bar();
        let per_row = (cols / vw).trailing_zeros();
        for it in 0..pieces / threads {
            let (p, row, col, a) = (self.reg(Cls::R), self.reg(Cls::R), self.reg(Cls::R), self.reg(Cls::R));
            self.l(format!("add.u32 {p}, {}, {};", self.tid, it * threads));
            self.l(format!("shr.u32 {row}, {p}, {per_row};"));
            self.l(format!("and.b32 {col}, {p}, {};", (cols / vw) - 1));
            self.l(format!("shl.b32 {col}, {col}, {};", vw.trailing_zeros()));
            self.l(format!("mad.lo.u32 {a}, {row}, {pitch}, {base};"));
            self.l(format!("mad.lo.u32 {a}, {col}, {es}, {a};"));
            let words: Vec<String> = (0..4).map(|_| self.reg(Cls::R)).collect();
            self.l(format!("ld.shared.v4.b32 {{{}}}, [{a}];", words.join(", ")));
            let at = crate::remat::eval_at(self, ptr, vec![row.clone(), col.clone()])?;
            let pred = match mask {
                Some(m) => format!("@{} ", crate::remat::eval_at(self, m, vec![row, col])?),
                None => String::new(),
            };
            self.l(format!("{pred}st.global.v4.b32 [{at}], {{{}}};", words.join(", ")));
        }
        Ok(true)
    }

    fn layout_has_repl(&mut self, shape: &[u32]) -> bool {
        !shape.is_empty() && self.layout(shape).bl.any_replication()
    }

    fn store_regs(&mut self, ptrs: &[String], preds: &[Option<String>], vals: &[String], d: DType, atomic: bool, w: usize) -> R<()> {
        let t = match d {
            DType::I8 | DType::U8 => "b8",
            DType::I32 | DType::U32 => "b32",
            DType::I64 => "b64",
            _ => Self::ld_ty(d),
        };
        let mut i = 0;
        while i < ptrs.len() {
            let pred = preds[i].as_ref().map(|p| format!("@{p} ")).unwrap_or_default();
            if atomic {
                let (op, v) = match d {
                    DType::F32 => ("red.global.add.f32", vals[i].clone()),
                    DType::I32 | DType::U32 => ("red.global.add.u32", vals[i].clone()),
                    DType::I64 => ("red.global.add.u64", vals[i].clone()),
                    DType::F16 => ("red.global.add.noftz.f16", vals[i].clone()),
                    DType::BF16 if self.o.sm >= 90 => ("red.global.add.noftz.bf16", vals[i].clone()),
                    DType::BF16 => return self.err("bf16 atomic_add needs sm_90"),
                    _ => return self.err(format!("atomic_add on {d}")),
                };
                self.l(format!("{pred}{op} [{}], {v};", ptrs[i]));
                i += 1;
                continue;
            }
            if w == 1 {
                self.l(format!("{pred}st.global.{t} [{}], {};", ptrs[i], vals[i]));
            } else if w == 8 && d.size_bytes() == 2 {
                let words: Vec<String> = (0..4).map(|_| self.reg(Cls::R)).collect();
                let x2 = if d == DType::BF16 { "bf16x2" } else { "f16x2" };
                for (j, wd) in words.iter().enumerate() {
                    let (lo, hi) = (&vals[i + 2 * j], &vals[i + 2 * j + 1]);
                    match (self.h_from_f32.get(lo).cloned(), self.h_from_f32.get(hi).cloned()) {
                        // d = {hi: cvt(a), lo: cvt(b)}; the unused single cvts die in ptxas
                        (Some(fl), Some(fh)) => self.l(format!("cvt.rn.{x2}.f32 {wd}, {fh}, {fl};")),
                        _ => self.l(format!("mov.b32 {wd}, {{{lo}, {hi}}};")),
                    }
                }
                self.l(format!("{pred}st.global.v4.b32 [{}], {{{}}};", ptrs[i], words.join(", ")));
            } else {
                self.l(format!("{pred}st.global.v{w}.{t} [{}], {{{}}};", ptrs[i], vals[i..i + w].join(", ")));
            }
            i += w;
        }
        Ok(())
    }

    /// Addresses and in-bounds predicates of a block access into a view.
    fn block_ptrs(&mut self, view: V, offsets: &[V], shape: &[u32]) -> R<(Vec<String>, Vec<String>)> {
        let vr = self.get(view);
        let rank = shape.len();
        let es = match self.k.ty(view) {
            Type::View { dtype, .. } => dtype.size_bytes(),
            _ => unreachable!(),
        };
        let base = vr[0].clone();
        let dims: Vec<String> = vr[1..1 + rank].to_vec();
        let strides: Vec<String> = vr[1 + rank..1 + 2 * rank].to_vec();
        let offs: Vec<String> = offsets
            .iter()
            .map(|o| {
                let r = self.get(*o)[0].clone();
                if self.dtype(*o) == DType::I64 {
                    r
                } else {
                    let w = self.reg(Cls::Rd);
                    self.l(format!("cvt.s64.s32 {w}, {r};"));
                    w
                }
            })
            .collect();
        let n = self.layout(shape).bl.regs();
        let mut ptrs = vec![];
        let mut preds = vec![];
        for r in 0..n {
            let addr = self.reg(Cls::Rd);
            self.l(format!("mov.b64 {addr}, {base};"));
            let mut pred: Option<String> = None;
            for d in 0..rank {
                let i = self.index(shape, r, d);
                let c = self.reg(Cls::Rd);
                self.l(format!("cvt.u64.u32 {c}, {i};"));
                self.l(format!("add.s64 {c}, {c}, {};", offs[d]));
                let (p1, p2) = (self.reg(Cls::P), self.reg(Cls::P));
                self.l(format!("setp.ge.s64 {p1}, {c}, 0;"));
                self.l(format!("setp.lt.s64 {p2}, {c}, {};", dims[d]));
                self.l(format!("and.pred {p1}, {p1}, {p2};"));
                if let Some(q) = pred {
                    self.l(format!("and.pred {p1}, {p1}, {q};"));
                }
                pred = Some(p1);
                let t = self.reg(Cls::Rd);
                self.l(format!("mul.lo.s64 {t}, {c}, {};", strides[d]));
                self.l(format!("mad.lo.s64 {addr}, {t}, {es}, {addr};"));
            }
            ptrs.push(addr);
            preds.push(pred.unwrap());
        }
        Ok((ptrs, preds))
    }

    // --------------------------------------------- shared-memory movement

    /// Base of the scratch shared memory (after the operand rings).
    fn smem_base(&mut self) -> String {
        let b = self.reg(Cls::R);
        self.l(format!("mov.u32 {b}, ft_smem;"));
        if self.ring > 0 {
            self.l(format!("add.u32 {b}, {b}, {};", self.ring));
        }
        b
    }

    /// Store registers of a value (canonical layout of `shape`) to shared
    /// memory at `base + lin * es` as 32/64-bit slots.
    fn to_smem(&mut self, regs: &[String], shape: &[u32], c: Cls, base: &str) -> u32 {
        let sz = if c == Cls::Rd { 8 } else { 4 };
        for (r, v) in regs.iter().enumerate() {
            let lin = if shape.is_empty() { "0".to_string() } else { self.lin(shape, r) };
            let a = self.reg(Cls::R);
            self.l(format!("mad.lo.u32 {a}, {lin}, {sz}, {base};"));
            self.st_shared(c, &a, v);
        }
        sz
    }

    /// Store one register to shared memory at address `a`: 64-bit values in
    /// 8 bytes, everything else widened to a 32-bit slot (the inverse of
    /// [`Self::from_smem_addr`]).
    fn st_shared(&mut self, c: Cls, a: &str, v: &str) {
        match c {
            Cls::F => self.l(format!("st.shared.f32 [{a}], {v};")),
            Cls::R => self.l(format!("st.shared.b32 [{a}], {v};")),
            Cls::Rd => self.l(format!("st.shared.b64 [{a}], {v};")),
            Cls::H => {
                let t = self.reg(Cls::R);
                self.l(format!("cvt.u32.u16 {t}, {v};"));
                self.l(format!("st.shared.b32 [{a}], {t};"));
            }
            Cls::P => {
                let t = self.reg(Cls::R);
                self.l(format!("selp.b32 {t}, 1, 0, {v};"));
                self.l(format!("st.shared.b32 [{a}], {t};"));
            }
        }
    }

    fn from_smem_addr(&mut self, c: Cls, a: &str) -> String {
        let v = self.reg(c);
        match c {
            Cls::F => self.l(format!("ld.shared.f32 {v}, [{a}];")),
            Cls::R => self.l(format!("ld.shared.b32 {v}, [{a}];")),
            Cls::Rd => self.l(format!("ld.shared.b64 {v}, [{a}];")),
            Cls::H => {
                let t = self.reg(Cls::R);
                self.l(format!("ld.shared.b32 {t}, [{a}];"));
                self.l(format!("cvt.u16.u32 {v}, {t};"));
            }
            Cls::P => {
                let t = self.reg(Cls::R);
                self.l(format!("ld.shared.b32 {t}, [{a}];"));
                self.l(format!("setp.ne.u32 {v}, {t}, 0;"));
            }
        }
        v
    }

    /// General layout conversion: element `idx` of the result reads element
    /// `map(idx)` of the source, through shared memory.
    fn convert(&mut self, x: V, src: &[u32], dst: &[u32], map: &dyn Fn(&[u32]) -> Vec<u32>, res: V) -> R<Vec<String>> {
        let c = cls_of(self.elem(x));
        let regs = self.get(x);
        let sz = if c == Cls::Rd { 8 } else { 4 };
        // The source tile in shared memory, row-major with each innermost
        // row padded by one slot: a permutation then reads what was one
        // row as a column, and the padding puts consecutive rows of a
        // column in different banks (a 64×64 f32 transpose read 16 lanes
        // from one bank without it).
        let rank = src.len();
        let src_strides: Vec<u32> = {
            let mut s = vec![1u32; rank];
            for d in (0..rank.saturating_sub(1)).rev() {
                let pad = (d + 2 == rank && src[d + 1] > 1) as u32;
                s[d] = s[d + 1] * src[d + 1] + pad;
            }
            s
        };
        let n_src = src.first().map_or(1, |&d0| d0 * src_strides[0]).max(1);
        self.smem_need(n_src * sz);
        self.bar();
        let base = self.smem_base();
        self.to_smem_strided(&regs, src, c, &base, &src_strides);
        self.bar();
        let lay = self.layout(dst);
        // The map is affine per dimension (identity/zero/permutation): find,
        // for each destination dim, the source dim it feeds (if any).
        let rank = dst.len();
        let mut feeds: Vec<Option<usize>> = vec![None; rank];
        for d in 0..rank {
            let mut probe = vec![0u32; rank];
            probe[d] = 1;
            let m = map(&probe);
            feeds[d] = m.iter().position(|&v| v == 1);
        }
        let mut out = vec![];
        for r in 0..lay.bl.regs() {
            let a = self.reg(Cls::R);
            self.l(format!("mov.u32 {a}, 0;"));
            for d in 0..rank {
                if let Some(sd) = feeds[d] {
                    let i = self.index(dst, r, d);
                    self.l(format!("mad.lo.u32 {a}, {i}, {}, {a};", src_strides[sd] * sz));
                }
            }
            self.l(format!("add.u32 {a}, {a}, {base};"));
            out.push(self.from_smem_addr(c, &a));
        }
        self.bar();
        let _ = res;
        Ok(out)
    }

    /// Conversion that keeps the row-major linear index (reshape, expand_dims).
    fn convert_linear(&mut self, x: V, src: &[u32], dst: &[u32], _res: V) -> R<Vec<String>> {
        let c = cls_of(self.elem(x));
        let regs = self.get(x);
        let n: u32 = src.iter().product();
        let sz = if c == Cls::Rd { 8 } else { 4 };
        // same layout shape → nothing moves
        if self.layout(src).bl.regs() == self.layout(dst).bl.regs() && self.layout(src).konst.len() == 1 && n == 1 {
            return Ok(regs);
        }
        self.smem_need(n * sz);
        self.bar();
        let base = self.smem_base();
        self.to_smem(&regs, src, c, &base);
        self.bar();
        let m = self.layout(dst).bl.regs();
        let mut out = vec![];
        for r in 0..m {
            let lin = self.lin(dst, r);
            let a = self.reg(Cls::R);
            self.l(format!("mad.lo.u32 {a}, {lin}, {sz}, {base};"));
            out.push(self.from_smem_addr(c, &a));
        }
        self.bar();
        Ok(out)
    }

    // ------------------------------------------------------- reductions

    fn reduce(&mut self, o: ReduceOp, x: V, axis: usize, res: V) -> R<Vec<String>> {
        let shape = self.shape_u32(x);
        let d = self.dtype(x);
        let lay = self.layout(&shape);
        let regs = self.get(x);
        let arg = matches!(o, ReduceOp::Argmax | ReduceOp::Argmin);
        // accumulation class
        let (ac, at) = if d.is_float() {
            (Cls::F, "f32")
        } else if d == DType::I64 {
            (Cls::Rd, "s64")
        } else if d == DType::U32 || d == DType::U8 || d == DType::Bool {
            (Cls::R, "u32")
        } else {
            (Cls::R, "s32")
        };
        let identity = |o: ReduceOp| -> String {
            match (o, ac) {
                (ReduceOp::Sum, Cls::F) => "0f00000000".into(),
                (ReduceOp::Sum, _) => "0".into(),
                (ReduceOp::Max | ReduceOp::Argmax, Cls::F) => "0fFF800000".into(),
                (ReduceOp::Min | ReduceOp::Argmin, Cls::F) => "0f7F800000".into(),
                (ReduceOp::Max | ReduceOp::Argmax, Cls::Rd) => i64::MIN.to_string(),
                (ReduceOp::Min | ReduceOp::Argmin, Cls::Rd) => i64::MAX.to_string(),
                (ReduceOp::Max | ReduceOp::Argmax, _) => if at == "u32" { "0".into() } else { i32::MIN.to_string() },
                (ReduceOp::Min | ReduceOp::Argmin, _) => if at == "u32" { u32::MAX.to_string() } else { i32::MAX.to_string() },
            }
        };
        let mv = |c: Cls| match c {
            Cls::F => "f32",
            Cls::Rd => "b64",
            _ => "b32",
        };
        // values in accumulation class, masked to identity where not owner along axis
        let mut vals = vec![];
        let mut idxs = vec![];
        for (r, v) in regs.iter().enumerate() {
            let a = match ac {
                Cls::F => self.to_f32(v, d),
                Cls::R if d == DType::Bool => {
                    let t = self.reg(Cls::R);
                    self.l(format!("selp.u32 {t}, 1, 0, {v};"));
                    t
                }
                _ => v.clone(),
            };
            let a = if lay.bl.replicated(axis) {
                // copies along the axis must not be counted twice
                let t = self.reg(Cls::R);
                let p = self.reg(Cls::P);
                self.l(format!("add.u32 {t}, {}, {};", lay.thread[axis], lay.konst[r][axis]));
                self.l(format!("setp.lt.u32 {p}, {t}, {};", shape[axis]));
                let y = self.reg(ac);
                self.l(format!("selp.{} {y}, {a}, {}, {p};", mv(ac), identity(o)));
                y
            } else {
                a
            };
            vals.push(a);
            if arg {
                idxs.push(self.index(&shape, r, axis));
            }
        }
        // group registers by their coordinates off the axis
        let mut groups: Vec<(Vec<u32>, Vec<usize>)> = vec![];
        for r in 0..regs.len() {
            let key: Vec<u32> = (0..shape.len()).filter(|&dd| dd != axis).map(|dd| lay.konst[r][dd]).collect();
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some(g) => g.1.push(r),
                None => groups.push((key, vec![r])),
            }
        }
        let combine = |em: &mut Self, a: &str, ai: Option<&str>, b: &str, bi: Option<&str>| -> (String, Option<String>) {
            if let (Some(ai), Some(bi)) = (ai, bi) {
                // (value, index): take b if better, or equal with smaller index, or a is NaN
                let take = em.reg(Cls::P);
                let better = if o == ReduceOp::Argmax { "gt" } else { "lt" };
                let t = em.reg(Cls::P);
                let eq = em.reg(Cls::P);
                let li = em.reg(Cls::P);
                em.l(format!("setp.{better}.{at} {take}, {b}, {a};"));
                em.l(format!("setp.eq.{at} {eq}, {b}, {a};"));
                em.l(format!("setp.lt.u32 {li}, {bi}, {ai};"));
                em.l(format!("and.pred {t}, {eq}, {li};"));
                em.l(format!("or.pred {take}, {take}, {t};"));
                if ac == Cls::F {
                    let (an, bn) = (em.reg(Cls::P), em.reg(Cls::P));
                    em.l(format!("setp.nan.f32 {an}, {a}, {a};"));
                    em.l(format!("setp.nan.f32 {bn}, {b}, {b};"));
                    // a NaN and b not NaN → take b; both NaN → smaller index
                    let q = em.reg(Cls::P);
                    em.l(format!("not.pred {q}, {bn};"));
                    em.l(format!("and.pred {q}, {q}, {an};"));
                    em.l(format!("or.pred {take}, {take}, {q};"));
                    em.l(format!("and.pred {q}, {an}, {bn};"));
                    em.l(format!("and.pred {q}, {q}, {li};"));
                    em.l(format!("or.pred {take}, {take}, {q};"));
                    // b NaN and a not NaN → keep a
                    em.l(format!("not.pred {q}, {an};"));
                    em.l(format!("and.pred {q}, {q}, {bn};"));
                    em.l(format!("not.pred {q}, {q};"));
                    em.l(format!("and.pred {take}, {take}, {q};"));
                }
                let (v, i) = (em.reg(ac), em.reg(Cls::R));
                em.l(format!("selp.{} {v}, {b}, {a}, {take};", mv(ac)));
                em.l(format!("selp.b32 {i}, {bi}, {ai}, {take};"));
                return (v, Some(i));
            }
            let y = em.reg(ac);
            let ins = match o {
                ReduceOp::Sum => if ac == Cls::F { "add.rn.f32".to_string() } else { format!("add.{at}") },
                ReduceOp::Max => format!("max.{at}"),
                _ => format!("min.{at}"),
            };
            em.l(format!("{ins} {y}, {a}, {b};"));
            (y, None)
        };
        // 1. in-thread
        let mut partial: Vec<(String, Option<String>)> = vec![];
        for (_, rs) in &groups {
            // pairwise tree: short dependency chains, index order kept for argmax ties
            let mut level: Vec<(String, Option<String>)> =
                rs.iter().map(|&r| (vals[r].clone(), if arg { Some(idxs[r].clone()) } else { None })).collect();
            while level.len() > 1 {
                let mut next = vec![];
                for pair in level.chunks(2) {
                    if pair.len() == 2 {
                        next.push(combine(self, &pair[0].0, pair[0].1.as_deref(), &pair[1].0, pair[1].1.as_deref()));
                    } else {
                        next.push(pair[0].clone());
                    }
                }
                level = next;
            }
            partial.push(level.pop().unwrap());
        }
        // 2. across lanes along the axis
        let lbits = lay.bl.tpw[axis].trailing_zeros();
        for b in 0..lbits {
            let m = 1u32 << (lay.bl.lane_shift[axis] + b);
            for g in partial.iter_mut() {
                let other = self.shfl(&g.0, ac, m);
                let oi = g.1.as_ref().map(|i| self.shfl(i, Cls::R, m));
                *g = combine(self, &g.0, g.1.as_deref(), &other, oi.as_deref());
            }
        }
        // 3. across warps along the axis, through shared memory
        let wpc = lay.bl.wpc[axis];
        if wpc > 1 {
            let sz = if ac == Cls::Rd { 8 } else { 4 };
            let ng = groups.len() as u32;
            // slot (warp_axis, other-warp-coords, group): index by warp id and group
            // one slot per (thread, group): lanes off the axis hold different
            // partials, lanes along it were already combined by the shuffles
            let nt = self.o.num_warps * 32;
            let per = ng * sz * if arg { 2 } else { 1 };
            self.smem_need(nt * per);
            self.bar();
            let base = self.smem_base();
            let slot = self.reg(Cls::R);
            self.l(format!("mad.lo.u32 {slot}, {}, {per}, {base};", self.tid));
            for (gi, g) in partial.iter().enumerate() {
                let a = self.reg(Cls::R);
                self.l(format!("add.u32 {a}, {slot}, {};", gi as u32 * sz));
                self.l(format!("st.shared.{} [{a}], {};", mv(ac), g.0));
                if let Some(i) = &g.1 {
                    self.l(format!("st.shared.b32 [{a}+{}], {i};", ng * sz));
                }
            }
            self.bar();
            // read the other warps along the axis: same warp id except the axis field
            let wsh = lay.bl.warp_shift[axis];
            let clear = self.reg(Cls::R);
            self.l(format!("and.b32 {clear}, {}, {};", self.warp, !(((wpc - 1) as u32) << wsh)));
            let mut acc: Vec<(String, Option<String>)> = vec![];
            for j in 0..wpc {
                let w = self.reg(Cls::R);
                self.l(format!("or.b32 {w}, {clear}, {};", j << wsh));
                let s = self.reg(Cls::R);
                self.l(format!("mad.lo.u32 {s}, {w}, 32, {};", self.lane));
                self.l(format!("mad.lo.u32 {s}, {s}, {per}, {base};"));
                for gi in 0..partial.len() {
                    let a = self.reg(Cls::R);
                    self.l(format!("add.u32 {a}, {s}, {};", gi as u32 * sz));
                    let v = self.reg(ac);
                    self.l(format!("ld.shared.{} {v}, [{a}];", mv(ac)));
                    let iv = if arg {
                        let i = self.reg(Cls::R);
                        self.l(format!("ld.shared.b32 {i}, [{a}+{}];", ng * sz));
                        Some(i)
                    } else {
                        None
                    };
                    if j == 0 {
                        acc.push((v, iv));
                    } else {
                        let cur = acc[gi].clone();
                        acc[gi] = combine(self, &cur.0, cur.1.as_deref(), &v, iv.as_deref());
                    }
                }
            }
            self.bar();
            partial = acc;
        }
        // 4. to the result's dtype and canonical layout
        let rd = self.dtype(res);
        let finals: Vec<String> = partial
            .iter()
            .map(|(v, i)| {
                if arg {
                    return i.clone().unwrap();
                }
                match ac {
                    Cls::F => self.from_f32(v, rd),
                    _ if rd == DType::Bool => {
                        let p = self.reg(Cls::P);
                        self.l(format!("setp.ne.u32 {p}, {v}, 0;"));
                        p
                    }
                    _ => {
                        if matches!(rd, DType::I8 | DType::U8) {
                            self.norm8(v, rd);
                        }
                        v.clone()
                    }
                }
            })
            .collect();
        let out_shape = self.shape_u32(res);
        if out_shape.is_empty() {
            return Ok(vec![finals[0].clone()]);
        }
        // slice layout → canonical: write each group's value at its output
        // linear index, read back in the canonical layout.
        let rc = cls_of(Elem::Val(rd));
        let sz = if rc == Cls::Rd { 8 } else { 4 };
        let n_out: u32 = out_shape.iter().product();
        self.smem_need(n_out * sz);
        self.bar();
        let base = self.smem_base();
        let out_strides = {
            let mut s = vec![1u32; out_shape.len()];
            for dd in (0..out_shape.len().saturating_sub(1)).rev() {
                s[dd] = s[dd + 1] * out_shape[dd + 1];
            }
            s
        };
        for (gi, (_, rs)) in groups.iter().enumerate() {
            let r = rs[0];
            let a = self.reg(Cls::R);
            self.l(format!("mov.u32 {a}, 0;"));
            let mut od = 0;
            for dd in 0..shape.len() {
                if dd == axis {
                    continue;
                }
                let i = self.index(&shape, r, dd);
                self.l(format!("mad.lo.u32 {a}, {i}, {}, {a};", out_strides[od] * sz));
                od += 1;
            }
            self.l(format!("add.u32 {a}, {a}, {base};"));
            self.st_shared(rc, &a, &finals[gi]);
        }
        self.bar();
        let m = self.layout(&out_shape).bl.regs();
        let mut out = vec![];
        for r in 0..m {
            let lin = self.lin(&out_shape, r);
            let a = self.reg(Cls::R);
            self.l(format!("mad.lo.u32 {a}, {lin}, {sz}, {base};"));
            out.push(self.from_smem_addr(rc, &a));
        }
        self.bar();
        Ok(out)
    }

    fn shfl(&mut self, v: &str, c: Cls, mask: u32) -> String {
        match c {
            Cls::Rd => {
                let (lo, hi) = (self.reg(Cls::R), self.reg(Cls::R));
                self.l(format!("mov.b64 {{{lo}, {hi}}}, {v};"));
                self.l(format!("shfl.sync.bfly.b32 {lo}, {lo}, {mask}, 31, -1;"));
                self.l(format!("shfl.sync.bfly.b32 {hi}, {hi}, {mask}, 31, -1;"));
                let o = self.reg(Cls::Rd);
                self.l(format!("mov.b64 {o}, {{{lo}, {hi}}};"));
                o
            }
            _ => {
                let o = self.reg(c);
                self.l(format!("shfl.sync.bfly.b32 {o}, {v}, {mask}, 31, -1;"));
                o
            }
        }
    }

    /// Inclusive cumulative sum along `axis` through shared memory.
    fn scan(&mut self, x: V, axis: usize, res: V) -> R<Vec<String>> {
        let shape = self.shape_u32(x);
        let d = self.dtype(x);
        let rd = self.dtype(res);
        let regs = self.get(x);
        let (ac, at) = if d.is_float() { (Cls::F, "f32") } else if rd == DType::I64 { (Cls::Rd, "s64") } else { (Cls::R, "s32") };
        let sz = if ac == Cls::Rd { 8 } else { 4 };
        let vals: Vec<String> = regs.iter().map(|v| if ac == Cls::F { self.to_f32(v, d) } else { v.clone() }).collect();
        let n: u32 = shape.iter().product();
        self.smem_need(n * sz);
        self.bar();
        let base = self.smem_base();
        self.to_smem(&vals, &shape, ac, &base);
        self.bar();
        let strides = self.layout(&shape).bl.strides();
        let mut out = vec![];
        for r in 0..regs.len() {
            let lin = self.lin(&shape, r);
            let i = self.index(&shape, r, axis);
            // start = lin - i*stride
            let start = self.reg(Cls::R);
            self.l(format!("mul.lo.u32 {start}, {i}, {};", strides[axis]));
            self.l(format!("sub.u32 {start}, {lin}, {start};"));
            let acc = self.reg(ac);
            let zero = if ac == Cls::F { "0f00000000" } else { "0" };
            self.l(format!("mov.{} {acc}, {zero};", if ac == Cls::Rd { "b64" } else if ac == Cls::F { "f32" } else { "b32" }));
            let j = self.reg(Cls::R);
            self.l(format!("mov.u32 {j}, 0;"));
            let (head, end) = (self.label(), self.label());
            self.body.push_str(&format!("{head}:\n"));
            let p = self.reg(Cls::P);
            self.l(format!("setp.gt.u32 {p}, {j}, {i};"));
            self.l(format!("@{p} bra {end};"));
            let a = self.reg(Cls::R);
            self.l(format!("mad.lo.u32 {a}, {j}, {}, {start};", strides[axis]));
            self.l(format!("mad.lo.u32 {a}, {a}, {sz}, {base};"));
            let v = self.from_smem_addr(ac, &a);
            if ac == Cls::F {
                self.l(format!("add.rn.f32 {acc}, {acc}, {v};"));
            } else {
                self.l(format!("add.{at} {acc}, {acc}, {v};"));
            }
            self.l(format!("add.u32 {j}, {j}, 1;"));
            self.l(format!("bra {head};"));
            self.body.push_str(&format!("{end}:\n"));
            out.push(if ac == Cls::F { self.from_f32(&acc, rd) } else { acc });
        }
        self.bar();
        Ok(out)
    }

    /// An f32 register reduced to tf32 as `precision` says: rounded
    /// (`Tf32`) or truncated (`Tf32Trunc`; finite values).
    fn tf32_reduce(&mut self, f: &str, precision: DotPrecision) -> String {
        if precision == DotPrecision::Tf32 {
            return self.tf32_round(f);
        }
        let (bits, r, fin) = (self.reg(Cls::R), self.reg(Cls::F), self.reg(Cls::P));
        self.l(format!("mov.b32 {bits}, {f};"));
        self.l(format!("testp.finite.f32 {fin}, {f};"));
        self.l(format!("@{fin} and.b32 {bits}, {bits}, -8192;"));
        self.l(format!("mov.b32 {r}, {bits};"));
        r
    }

    /// Round an f32 register to tf32 (10-bit mantissa, nearest-even; finite
    /// values), as the interpreter's `dot_tf32` does.
    fn tf32_round(&mut self, f: &str) -> String {
        let (bits, r) = (self.reg(Cls::R), self.reg(Cls::F));
        self.l(format!("mov.b32 {bits}, {f};"));
        self.tf32_round_bits(&bits, f);
        self.l(format!("mov.b32 {r}, {bits};"));
        r
    }

    /// `tf32_round` in place on the bits of an f32 in a `.b32` register;
    /// `value` is the same f32 in whichever register holds it (tested for
    /// being finite).
    fn tf32_round_bits(&mut self, bits: &str, value: &str) {
        let (lsb, fin) = (self.reg(Cls::R), self.reg(Cls::P));
        self.l(format!("bfe.u32 {lsb}, {bits}, 13, 1;"));
        self.l(format!("add.u32 {lsb}, {lsb}, 4095;"));
        self.l(format!("testp.finite.f32 {fin}, {value};"));
        self.l(format!("@{fin} add.u32 {bits}, {bits}, {lsb};"));
        self.l(format!("@{fin} and.b32 {bits}, {bits}, -8192;"));
    }

    /// Store a 2-D tile (registers in the layout of `shape`) to shared
    /// memory row-major with a row pitch of `ld` bytes, in its own 16- or
    /// 32-bit format, each thread's runs of consecutive columns packed into
    /// one vector store.
    fn stage(&mut self, regs: &[String], shape: &[u32], es: u32, ld: u32, base: &str) {
        let lay = self.layout(shape);
        let run = lay.bl.spt[1] as usize;
        for r0 in (0..regs.len()).step_by(run) {
            let (i, j) = (self.index(shape, r0, 0), self.index(shape, r0, 1));
            let a = self.reg(Cls::R);
            self.l(format!("mad.lo.u32 {a}, {i}, {ld}, {base};"));
            self.l(format!("mad.lo.u32 {a}, {j}, {es}, {a};"));
            let vals = &regs[r0..r0 + run];
            if es == 2 && run == 1 {
                self.l(format!("st.shared.b16 [{a}], {};", vals[0]));
                continue;
            }
            let words: Vec<String> = if es == 2 {
                vals.chunks(2)
                    .map(|p| {
                        let w = self.reg(Cls::R);
                        self.l(format!("mov.b32 {w}, {{{}, {}}};", p[0], p[1]));
                        w
                    })
                    .collect()
            } else {
                vals.iter()
                    .map(|v| {
                        let w = self.reg(Cls::R);
                        self.l(format!("mov.b32 {w}, {v};"));
                        w
                    })
                    .collect()
            };
            for (ci, c) in words.chunks(4).enumerate() {
                let off = ci * 16;
                match c.len() {
                    1 => self.l(format!("st.shared.b32 [{a}+{off}], {};", c[0])),
                    2 => self.l(format!("st.shared.v2.b32 [{a}+{off}], {{{}, {}}};", c[0], c[1])),
                    3 => {
                        self.l(format!("st.shared.v2.b32 [{a}+{off}], {{{}, {}}};", c[0], c[1]));
                        self.l(format!("st.shared.b32 [{a}+{}], {};", off + 8, c[2]));
                    }
                    _ => self.l(format!("st.shared.v4.b32 [{a}+{off}], {{{}, {}, {}, {}}};", c[0], c[1], c[2], c[3])),
                }
            }
        }
    }

    /// `dot` on tensor cores (`mma.sync`): the operands are staged in
    /// shared memory in their own dtype, rows padded by 16 bytes (32 for
    /// tf32 B) so that the 8 rows one fragment load touches fall in distinct
    /// banks; fragments are read with `ldmatrix` (f16/bf16; `.trans` for B)
    /// or `ld.shared` (tf32), and multiplied into the accumulator registers,
    /// which the mma layout of the result shape (see `assign`) already holds
    /// as `m16n8` fragments: the accumulator never moves.
    fn dot_mma(&mut self, a: V, b: V, acc: V, precision: DotPrecision, g: super::assign::MmaGrid) -> R<Vec<String>> {
        let (sa, sb) = (self.shape_u32(a), self.shape_u32(b));
        let (m, kk, n) = (sa[0], sa[1], sb[1]);
        let d = self.dtype(a);
        let tf32 = d == DType::F32;
        if tf32 && !precision.is_tf32() {
            return self.err("mma path for an exact f32 dot");
        }
        let es = if tf32 { 4 } else { 2 };
        // (an operand ring's padded rows are these: `async_copy`)
        let (lda, ldb) = (kk * es + 16, n * es + if tf32 { 32 } else { 16 });
        let (ca, cb) = (self.aplan.class_of(a), self.aplan.class_of(b));
        let (mut ra, mut rb) = (self.get(a), self.get(b));
        if tf32 {
            ra = ra.iter().map(|f| self.tf32_reduce(f, precision)).collect();
            rb = rb.iter().map(|f| self.tf32_reduce(f, precision)).collect();
        }
        // operands in registers are staged in the scratch space; a ring
        // operand's register is its slot's address
        let (mut base, mut base_b) = (ra[0].clone(), rb[0].clone());
        if ca.is_none() || cb.is_none() {
            let bytes_a = if ca.is_none() { m * lda } else { 0 };
            self.smem_need(bytes_a + if cb.is_none() { kk * ldb } else { 0 });
            self.bar();
            let scratch = self.smem_base();
            if ca.is_none() {
                self.stage(&ra, &sa, es, lda, &scratch);
                base = scratch.clone();
            }
            if cb.is_none() {
                base_b = self.reg(Cls::R);
                self.l(format!("add.u32 {base_b}, {scratch}, {bytes_a};"));
                self.stage(&rb, &sb, es, ldb, &base_b);
            }
        }
        let ready = self.ring_ready.contains(&a) && self.ring_ready.contains(&b);
        if ready {
            // waited for (and barriered) at the top of the loop body
            self.cp_commit();
        } else {
            if ca.is_some() || cb.is_some() {
                // as in `dot_wgmma`: the newest groups younger than the
                // operands' prefetch distance may stay in flight
                let dist = |v: V| self.aplan.carried.get(&v).map_or(0, |c| c.1);
                let keep = [(a, ca), (b, cb)].iter().filter(|(_, c)| c.is_some()).map(|(v, _)| dist(*v)).min().unwrap_or(0);
                self.cp_commit();
                self.l(format!("cp.async.wait_group {keep};"));
            }
            self.bar();
        }
        if ca.is_some() || cb.is_some() {
            // the slots this dot reads must not be refilled before every
            // warp has read them
            self.ring_dirty = true;
        }
        // per-lane fragment offsets (prologue)
        let (lane, warp) = (self.lane.clone(), self.warp.clone());
        let (wm, wn) = (g.wm, g.wn);
        let (wmr, wnr, oa, ob, t) = (self.reg(Cls::R), self.reg(Cls::R), self.reg(Cls::R), self.reg(Cls::R), self.reg(Cls::R));
        let mut p = String::new();
        let _ = writeln!(p, "\tshr.u32 {wmr}, {warp}, {};\n\tand.b32 {wnr}, {warp}, {};", wn.trailing_zeros(), wn - 1);
        if tf32 {
            // a: row lane/4 + 8·warp_m, column lane%4; b: k lane%4, n lane/4 + 8·warp_n
            let _ = writeln!(p, "\tshr.u32 {oa}, {lane}, 2;\n\tmad.lo.u32 {oa}, {wmr}, 8, {oa};\n\tmul.lo.u32 {oa}, {oa}, {lda};");
            let _ = writeln!(p, "\tand.b32 {t}, {lane}, 3;\n\tmad.lo.u32 {oa}, {t}, 4, {oa};");
            let _ = writeln!(p, "\tmul.lo.u32 {ob}, {t}, {ldb};\n\tshr.u32 {t}, {lane}, 2;\n\tmad.lo.u32 {t}, {wnr}, 8, {t};\n\tmad.lo.u32 {ob}, {t}, 4, {ob};");
        } else {
            // ldmatrix row addresses: lane l feeds row l%8 of matrix l/8
            // a: matrices (rows 0-7 | 8-15) × (k 0-7 | 8-15)
            let _ = writeln!(p, "\tand.b32 {oa}, {lane}, 7;\n\tmad.lo.u32 {oa}, {wmr}, 8, {oa};\n\tbfe.u32 {t}, {lane}, 3, 1;\n\tmad.lo.u32 {oa}, {t}, {}, {oa};", 8 * wm);
            let _ = writeln!(p, "\tmul.lo.u32 {oa}, {oa}, {lda};\n\tshr.u32 {t}, {lane}, 4;\n\tmad.lo.u32 {oa}, {t}, 16, {oa};");
            // b (.trans): matrices (k 0-7 | 8-15) × (n tile j | j+1)
            let _ = writeln!(p, "\tand.b32 {ob}, {lane}, 7;\n\tbfe.u32 {t}, {lane}, 3, 1;\n\tmad.lo.u32 {ob}, {t}, 8, {ob};\n\tmul.lo.u32 {ob}, {ob}, {ldb};");
            let _ = writeln!(p, "\tshr.u32 {t}, {lane}, 4;\n\tmul.lo.u32 {t}, {t}, {};\n\tmad.lo.u32 {t}, {wnr}, 8, {t};\n\tmad.lo.u32 {ob}, {t}, 2, {ob};", 8 * wn);
        }
        self.pro.push_str(&p);
        let (pa, pb) = (self.reg(Cls::R), self.reg(Cls::R));
        self.l(format!("add.u32 {pa}, {base}, {oa};"));
        self.l(format!("add.u32 {pb}, {base_b}, {ob};"));
        let racc = self.get(acc);
        let accs: Vec<String> = racc
            .iter()
            .map(|v| {
                let t = self.reg(Cls::F);
                self.mov(Cls::F, &t, v);
                t
            })
            .collect();
        let (tm, rn) = (m / (16 * wm), n / (8 * wn));
        let kstep = if tf32 { 8 } else { 16 };
        let ty = match d {
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            _ => "tf32",
        };
        for ks in 0..kk / kstep {
            let mut af = vec![];
            for i in 0..tm {
                let r: Vec<String> = (0..4).map(|_| self.reg(Cls::R)).collect();
                let off = i * 16 * wm * lda + ks * kstep * es;
                if tf32 {
                    let h = 8 * wm * lda;
                    for (q, o) in [0, h, 16, h + 16].iter().enumerate() {
                        self.l(format!("ld.shared.b32 {}, [{pa}+{}];", r[q], off + o));
                    }
                } else {
                    self.l(format!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{}, {}, {}, {}}}, [{pa}+{off}];", r[0], r[1], r[2], r[3]));
                }
                af.push(r);
            }
            let mut bf: Vec<Vec<String>> = vec![];
            let mut j = 0;
            while j < rn {
                let off = ks * kstep * ldb + j * 8 * wn * es;
                if tf32 {
                    let r: Vec<String> = (0..2).map(|_| self.reg(Cls::R)).collect();
                    self.l(format!("ld.shared.b32 {}, [{pb}+{off}];", r[0]));
                    self.l(format!("ld.shared.b32 {}, [{pb}+{}];", r[1], off + 4 * ldb));
                    bf.push(r);
                    j += 1;
                } else if j + 1 < rn {
                    let r: Vec<String> = (0..4).map(|_| self.reg(Cls::R)).collect();
                    self.l(format!("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{{}, {}, {}, {}}}, [{pb}+{off}];", r[0], r[1], r[2], r[3]));
                    bf.push(r[..2].to_vec());
                    bf.push(r[2..].to_vec());
                    j += 2;
                } else {
                    let r: Vec<String> = (0..2).map(|_| self.reg(Cls::R)).collect();
                    self.l(format!("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {{{}, {}}}, [{pb}+{off}];", r[0], r[1]));
                    bf.push(r);
                    j += 1;
                }
            }
            for (i, a4) in af.iter().enumerate() {
                for (j, b2) in bf.iter().enumerate() {
                    let reg = |rep0: usize, e: usize| accs[rep0 * 2 * rn as usize + 2 * j + e].clone();
                    let c = [reg(2 * i, 0), reg(2 * i, 1), reg(2 * i + 1, 0), reg(2 * i + 1, 1)];
                    let shape = if tf32 { "m16n8k8" } else { "m16n8k16" };
                    self.l(format!(
                        "mma.sync.aligned.{shape}.row.col.f32.{ty}.{ty}.f32 {{{c0}, {c1}, {c2}, {c3}}}, {{{}, {}, {}, {}}}, {{{}, {}}}, {{{c0}, {c1}, {c2}, {c3}}};",
                        a4[0],
                        a4[1],
                        a4[2],
                        a4[3],
                        b2[0],
                        b2[1],
                        c0 = c[0],
                        c1 = c[1],
                        c2 = c[2],
                        c3 = c[3]
                    ));
                }
            }
        }
        // No trailing barrier: every shared-memory writer in this emitter
        // (conversions, reductions, scans, both dots) starts with one, which
        // is what orders these fragment reads before the next writes.
        Ok(accs)
    }

    /// Round the f32 tiles that `cp.async` copied into `wgmma` ring slots
    /// (`(tile, slot address)`; other operands are skipped) to tf32 in
    /// place, as the interpreter's `dot_tf32` rounds its inputs — the tensor
    /// cores would otherwise truncate them to their top 19 bits, twice the
    /// interpreter's error. Every thread waited for its own copies: a
    /// barrier makes all of them visible, then each thread rounds 16-byte
    /// chunks `tid, tid + T, …` of each slot (nearest-even, non-finite
    /// values unchanged: the interpreter's rounding bit for bit). The
    /// caller's proxy fence and barrier follow. (TMA slots skip this pass:
    /// their bulk copies round on the way, `AsyncPlan::round_tf32`.)
    fn round_tf32_slots(&mut self, tiles: &[(V, String)]) {
        let mut first = true;
        for (v, slot) in tiles {
            let Some(c) = self.aplan.class_of(*v) else { continue };
            if self.aplan.tma[c].is_some() || !matches!(self.aplan.layout[c], super::async_copy::SlotLayout::Swizzled { es: 4, .. }) {
                continue;
            }
            if first {
                self.bar();
                first = false;
            }
            let threads = self.o.num_warps * 32;
            let chunks = self.aplan.slot_bytes[c] / 16;
            let base = self.reg(Cls::R);
            self.l(format!("mad.lo.u32 {base}, {}, 16, {slot};", self.tid));
            for q in 0..chunks.div_ceil(threads) {
                let guard = (q + 1) * threads > chunks;
                let skip = self.label();
                if guard {
                    let p = self.reg(Cls::P);
                    self.l(format!("setp.ge.u32 {p}, {}, {};", self.tid, chunks - q * threads));
                    self.l(format!("@{p} bra {skip};"));
                }
                let w: Vec<String> = (0..4).map(|_| self.reg(Cls::R)).collect();
                self.l(format!("ld.shared.v4.b32 {{{}}}, [{base}+{}];", w.join(", "), q * threads * 16));
                for x in &w {
                    self.tf32_round_bits(x, x);
                }
                self.l(format!("st.shared.v4.b32 [{base}+{}], {{{}}};", q * threads * 16, w.join(", ")));
                if guard {
                    self.body.push_str(&format!("{skip}:\n"));
                }
            }
        }
    }

    /// Store a 2-D tile of `es`-byte elements to shared memory in the layout
    /// a `wgmma` operand descriptor with 128-byte swizzling reads (see
    /// `wgmma_addr`), or its transpose (`transposed`: the tile's column `j`
    /// is the slot's row `j` — tf32 B, read K-major). Returns nothing; every
    /// thread stores its own runs (at most one 16-byte chunk per store;
    /// single elements when transposed).
    fn stage_wgmma(&mut self, regs: &[String], shape: &[u32], base: &str, es: u32, transposed: bool) {
        let lay = self.layout(shape);
        let ty = if es == 4 { "f32" } else { "b16" };
        if transposed {
            for (r, v) in regs.iter().enumerate() {
                let (i, j) = (self.index(shape, r, 0), self.index(shape, r, 1));
                let a = self.wgmma_addr(&j, &i, shape[1], base, es);
                self.l(format!("st.shared.{ty} [{a}], {v};"));
            }
            return;
        }
        let run = lay.bl.spt[1] as usize;
        let piece = run.min(16 / es as usize);
        for r0 in (0..regs.len()).step_by(run) {
            for p0 in (0..run).step_by(piece) {
                let (i, j) = (self.index(shape, r0, 0), self.index(shape, r0 + p0, 1));
                let a = self.wgmma_addr(&i, &j, shape[0], base, es);
                let vals = &regs[r0 + p0..r0 + p0 + piece];
                if piece == 1 {
                    self.l(format!("st.shared.{ty} [{a}], {};", vals[0]));
                    continue;
                }
                let words: Vec<String> = if es == 4 {
                    vals.to_vec()
                } else {
                    vals.chunks(2)
                        .map(|p| {
                            let w = self.reg(Cls::R);
                            self.l(format!("mov.b32 {w}, {{{}, {}}};", p[0], p[1]));
                            w
                        })
                        .collect()
                };
                let wt = if es == 4 { "f32" } else { "b32" };
                match words.len() {
                    1 => self.l(format!("st.shared.{wt} [{a}], {};", words[0])),
                    2 => self.l(format!("st.shared.v2.{wt} [{a}], {{{}, {}}};", words[0], words[1])),
                    _ => self.l(format!("st.shared.v4.{wt} [{a}], {{{}, {}, {}, {}}};", words[0], words[1], words[2], words[3])),
                }
            }
        }
    }

    /// Shared-memory address of element `(i, j)` of a `rows`-row tile of
    /// `es`-byte elements in the swizzled `wgmma` operand layout: the
    /// columns split into atoms of 128 bytes, each atom `rows × 128` bytes,
    /// atoms one after another; inside an atom, row `i`'s 16-byte chunk `c`
    /// lives at `i·128 + ((c ^ (i % 8))·16)`.
    fn wgmma_addr(&mut self, i: &str, j: &str, rows: u32, base: &str, es: u32) -> String {
        let (atom, chunk) = (128 / es, 16 / es);
        let (a, t, u) = (self.reg(Cls::R), self.reg(Cls::R), self.reg(Cls::R));
        // (the offset first, a function of the thread alone that ptxas can
        // hoist out of loops; the slot base last)
        self.l(format!("shr.u32 {t}, {j}, {};", atom.trailing_zeros()));
        self.l(format!("mul.lo.u32 {a}, {t}, {};", rows * 128));
        self.l(format!("mad.lo.u32 {a}, {i}, 128, {a};"));
        self.l(format!("bfe.u32 {t}, {j}, {}, 3;", chunk.trailing_zeros()));
        self.l(format!("and.b32 {u}, {i}, 7;"));
        self.l(format!("xor.b32 {t}, {t}, {u};"));
        self.l(format!("mad.lo.u32 {a}, {t}, 16, {a};"));
        self.l(format!("and.b32 {t}, {j}, {};", chunk - 1));
        self.l(format!("mad.lo.u32 {a}, {t}, {es}, {a};"));
        self.l(format!("add.u32 {a}, {a}, {base};"));
        a
    }

    /// A load into an operand ring (`async_copy`): the next slot of its
    /// ring receives the tile by `cp.async` (16-byte copies where the
    /// pointers are provably contiguous and aligned; masked-off vectors are
    /// zero-filled), in the layout its `dot` reads (`wgmma`'s swizzle or
    /// `mma.sync`'s padded rows). The
    /// value is the slot's address. The copy joins the current group; the
    /// consuming `dot` waits for it.
    fn load_async(&mut self, ptr: V, mask: Option<V>, res: V) -> R<Vec<String>> {
        let c = self.aplan.class_of(res).expect("ring load");
        let shape = self.shape_u32(ptr);
        let es = self.dtype(res).size_bytes() as u32;
        if shape.len() != 2 || !(es == 2 || es == 4) {
            return self.err("cp.async ring for a tile that is not a 2-D 16- or 32-bit operand");
        }
        // the slot this load takes was last read by an earlier `dot` (in
        // every warp): a barrier orders those reads before the copies,
        // unless there was one since the last `dot`
        if self.ring_dirty {
            self.bar();
            self.ring_dirty = false;
        }
        // a group holds at most one tile per ring (the waits count groups
        // as prefetch stages)
        if self.cp_pending.iter().any(|v| self.aplan.class_of(*v) == Some(c)) {
            self.cp_commit();
        }
        let (cur, first, end) = self.slot_regs[c].clone();
        let wrap = self.reg(Cls::P);
        self.l(format!("add.u32 {cur}, {cur}, {};", self.aplan.slot_bytes[c]));
        self.l(format!("setp.ge.u32 {wrap}, {cur}, {end};"));
        self.l(format!("@{wrap} mov.u32 {cur}, {first};"));
        let slot = self.reg(Cls::R);
        self.l(format!("mov.u32 {slot}, {cur};"));
        let lay = self.aplan.layout[c];
        // (a transposed slot takes each element on its own)
        let transposed = matches!(lay, super::async_copy::SlotLayout::Swizzled { transposed: true, .. });
        let w = if transposed { 1 } else { self.vec_width(ptr, mask).min(16 / es as usize) };
        let bytes = w as u32 * es;
        if bytes < 4 {
            // cp.async copies 4, 8 or 16 bytes: scattered 16-bit elements
            // (a strided operand) go through registers into the slot
            let regs = self.load(ptr, mask, None, res)?;
            match lay {
                super::async_copy::SlotLayout::Swizzled { es, transposed } => self.stage_wgmma(&regs, &shape, &slot, es, transposed),
                super::async_copy::SlotLayout::Padded { pitch } => self.stage(&regs, &shape, 2, pitch, &slot),
            }
            return Ok(vec![slot]);
        }
        let rp = self.get(ptr);
        let masks = mask.map(|m| self.get(m));
        for r0 in (0..rp.len()).step_by(w) {
            let (i, j) = (self.index(&shape, r0, 0), self.index(&shape, r0, 1));
            let dst = match lay {
                super::async_copy::SlotLayout::Swizzled { es, transposed: false } => self.wgmma_addr(&i, &j, shape[0], &slot, es),
                super::async_copy::SlotLayout::Swizzled { es, transposed: true } => self.wgmma_addr(&j, &i, shape[1], &slot, es),
                super::async_copy::SlotLayout::Padded { pitch } => {
                    let a = self.reg(Cls::R);
                    self.l(format!("mad.lo.u32 {a}, {i}, {pitch}, {slot};"));
                    self.l(format!("mad.lo.u32 {a}, {j}, 2, {a};"));
                    a
                }
            };
            let kind = if bytes == 16 { "cg" } else { "ca" };
            match &masks {
                Some(m) => {
                    let sz = self.reg(Cls::R);
                    self.l(format!("selp.u32 {sz}, {bytes}, 0, {};", m[r0]));
                    self.l(format!("cp.async.{kind}.shared.global [{dst}], [{}], {bytes}, {sz};", rp[r0]));
                }
                None => self.l(format!("cp.async.{kind}.shared.global [{dst}], [{}], {bytes};", rp[r0])),
            }
        }
        self.cp_pending.push(res);
        Ok(vec![slot])
    }

    /// The mbarrier of the TMA ring slot holding tile value `v` (the slot's
    /// address with its fill's parity in bit 0: `load_tma`).
    fn tma_bar_addr(&mut self, c: usize, v: &str) -> String {
        self.tma_bar_addr_of(c, v, false)
    }

    /// The full (or, `empty`, the empty: warp specialization) mbarrier of
    /// the TMA ring slot holding tile value `v`.
    fn tma_bar_addr_of(&mut self, c: usize, v: &str, empty: bool) -> String {
        let (bar0, _) = self.tma_bar[c].clone().expect("TMA ring");
        let bar0 = if empty { bar0 + 8 * self.aplan.slots[c] } else { bar0 };
        let first = self.slot_regs[c].1.clone();
        let (t, b) = (self.reg(Cls::R), self.reg(Cls::R));
        self.l(format!("and.b32 {t}, {v}, -2;"));
        self.l(format!("sub.u32 {t}, {t}, {first};"));
        let sb = self.aplan.slot_bytes[c];
        if sb.is_power_of_two() {
            self.l(format!("shr.u32 {t}, {t}, {};", sb.trailing_zeros()));
        } else {
            self.l(format!("div.u32 {t}, {t}, {sb};"));
        }
        self.l(format!("mov.u32 {b}, ft_smem;"));
        self.l(format!("add.u32 {b}, {b}, {bar0};"));
        self.l(format!("mad.lo.u32 {t}, {t}, 8, {b};"));
        t
    }

    /// Wait (every thread) until the bulk copies of TMA tile `v` landed.
    fn tma_wait(&mut self, c: usize, v: &str) {
        let bar = self.tma_bar_addr(c, v);
        let (par, p) = (self.reg(Cls::R), self.reg(Cls::P));
        self.l(format!("and.b32 {par}, {v}, 1;"));
        let lbl = self.label();
        self.body.push_str(&format!("{lbl}:\n"));
        self.l(format!("mbarrier.try_wait.parity.shared::cta.b64 {p}, [{bar}], {par};"));
        self.l(format!("@!{p} bra {lbl};"));
    }

    /// Warp-specialized consumers: every warp has finished reading the slot
    /// of TMA tile `v` (its `wgmma`s were waited for): lane 0 arrives on
    /// the slot's empty mbarrier, which the producer waits on before
    /// refilling it.
    fn ws_release(&mut self, c: usize, v: &str, valid: Option<String>) {
        let bar = self.tma_bar_addr_of(c, v, true);
        let p = match valid {
            Some(q) => {
                let p = self.reg(Cls::P);
                self.l(format!("and.pred {p}, {q}, {};", self.lane0));
                p
            }
            None => self.lane0.clone(),
        };
        let sink = self.reg(Cls::Rd);
        self.l(format!("@{p} mbarrier.arrive.shared::cta.b64 {sink}, [{bar}];"));
        // multicast: the other program's producer refills this slot in
        // both programs too, so it waits for this release as well
        if self.mcast[c] {
            let remote = self.reg(Cls::R);
            self.l(format!("mapa.shared::cluster.u32 {remote}, {bar}, {};", self.peer));
            // (default semantics: the slot's readers are `wgmma`s this
            // warp already waited for, and its next writer is a bulk copy
            // ordered by this mbarrier; a cluster-scope release here — a
            // fence over the warp's memory operations — measured 2× slower)
            self.l(format!("@{p} mbarrier.arrive.shared::cluster.b64 _, [{remote}];"));
        }
    }

    /// Release the slot recorded for ring `c` (if any) and clear the record.
    fn ws_release_prev(&mut self, c: usize) {
        let Some(prev) = self.ws_prev[c].clone() else { return };
        let q = self.reg(Cls::P);
        self.l(format!("setp.ne.u32 {q}, {prev}, -1;"));
        self.ws_release(c, &prev, Some(q));
        self.l(format!("mov.u32 {prev}, -1;"));
    }

    /// The generic address of the tensor-map parameter for `view` with this
    /// box (declared on first use).
    fn tmap(&mut self, view: V, box_dims: Vec<u32>, round_tf32: bool) -> String {
        let key = (view, box_dims, round_tf32);
        if let Some(i) = self.tmaps.iter().position(|t| *t == key) {
            return self.tmap_regs[i].clone();
        }
        let r = self.reg(Cls::Rd);
        let _ = writeln!(self.pro, "\tmov.u64 {r}, ft_tmap{};\n\tcvta.param.u64 {r}, {r};", self.tmaps.len());
        // (thread 0 brings the 128-byte descriptor close before the first
        // copy needs it: otherwise that copy's latency includes its fetch)
        if !self.leader.is_empty() {
            let _ = writeln!(self.pro, "\t@{} prefetch.tensormap [{r}];", self.leader);
        }
        self.tmaps.push(key);
        self.tmap_regs.push(r.clone());
        r
    }

    /// A `load_block` into a TMA ring (`async_copy`, `tma`): the next slot
    /// of its ring receives the tile by bulk tensor copies, issued by
    /// thread 0 and completing on the slot's mbarrier, in `wgmma`'s
    /// 128-byte swizzled layout (the tensor map swizzles as `stage_wgmma`
    /// does: slots are 1024-byte aligned), in boxes of all the tile's rows,
    /// one per 64 columns. The value is the slot's address with the
    /// parity of this fill of the slot in bit 0 (what a consumer waits on).
    fn load_tma(&mut self, view: V, offsets: &[V], res: V) -> R<Vec<String>> {
        let c = self.aplan.class_of(res).expect("ring load");
        let shape = self.shape_u32(res);
        let tv = self.tma_views[&view].clone();
        let lay = self.aplan.layout[c];
        let super::async_copy::SlotLayout::Swizzled { es, .. } = lay else {
            return self.err("TMA ring without the wgmma layout");
        };
        if !super::async_copy::tma_slot(lay, &shape, tv.inner) {
            return self.err("TMA ring whose slot rows do not run along the view's contiguous dimension");
        }
        // (warp-specialized: the slot is free when its empty mbarrier says
        // so, which only the producer waits for)
        if self.ring_dirty && self.role == Role::All {
            self.ring_bar();
            self.ring_dirty = false;
        }
        let (cur, first, end) = self.slot_regs[c].clone();
        let ph = self.tma_bar[c].clone().expect("TMA ring").1;
        let wrap = self.reg(Cls::P);
        self.l(format!("add.u32 {cur}, {cur}, {};", self.aplan.slot_bytes[c]));
        self.l(format!("setp.ge.u32 {wrap}, {cur}, {end};"));
        self.l(format!("@{wrap} mov.u32 {cur}, {first};"));
        self.l(format!("@{wrap} xor.b32 {ph}, {ph}, 1;"));
        let slot = self.reg(Cls::R);
        self.l(format!("or.b32 {slot}, {cur}, {ph};"));
        if self.role == Role::Consumer {
            // the consumers only follow the ring (the producer copies)
            return Ok(vec![slot]);
        }
        let bar = self.tma_bar_addr(c, &slot);
        let empty = if self.role == Role::Producer { Some(self.tma_bar_addr_of(c, &slot, true)) } else { None };
        // coordinates, innermost (the view's unit-stride dimension) first,
        // as s32 (clamped: anything beyond is outside every tensor-map
        // extent, hence zeros, as it should be)
        let mut coords = vec![];
        for o in [offsets[tv.inner], offsets[1 - tv.inner]] {
            let r = self.get(o)[0].clone();
            if self.dtype(o) == DType::I64 {
                let (t, c32) = (self.reg(Cls::Rd), self.reg(Cls::R));
                self.l(format!("max.s64 {t}, {r}, -2147483648;"));
                self.l(format!("min.s64 {t}, {t}, 2147483647;"));
                self.l(format!("cvt.u32.u64 {c32}, {t};"));
                coords.push(c32);
            } else {
                coords.push(r);
            }
        }
        if let Some((axis, _)) = tv.batch {
            let p = self.reg(Cls::R);
            self.l(format!("mov.u32 {p}, %ctaid.{};", ["x", "y", "z"][axis as usize]));
            coords.push(p);
        }
        // the slot: `cols / atom` column atoms of `rows` 128-byte rows
        // (`[cols/atom][rows][atom]`, swizzled), rows along the view's
        // outer dimension
        let (rows, cols) = lay.rows_cols(&shape).expect("a 2-D tile (tma_slot)");
        let atom = 128 / es;
        let mut box_dims = vec![atom, rows];
        if tv.batch.is_some() {
            box_dims.push(1);
        }
        let tm = self.tmap(view, box_dims, self.aplan.round_tf32[c]);
        let base = self.reg(Cls::R);
        self.l(format!("mov.u32 {base}, {cur};"));
        // Issued here, where the pipeliner put the prefetch: before the wait
        // for this iteration's tile, so that while a program waits, every
        // slot but the one being read is being filled (the slot refilled
        // here was freed by the previous iteration's `wgmma.wait_group` and
        // this barrier). Deferring the issue past the iteration's `wgmma`s
        // (sessions 5–9, when a step issued up to 20 copies) left one slot
        // idle through every wait: decode 16×8192×8192 bf16 took 41 µs with
        // 3 stages deferred and 36 issued here; tf32 4096³ 388 → 374 µs
        // (RESULTS, session 10).
        // warp 0 alone (a warp-uniform branch), one lane of it elected
        // (`elect.sync`: ptxas then issues each copy once, without a loop
        // over the lanes' operand values)
        let skip = self.label();
        let (w0, lead, lane) = (self.reg(Cls::P), self.reg(Cls::P), self.reg(Cls::R));
        if self.role == Role::All {
            self.l(format!("setp.ne.u32 {w0}, {}, 0;", self.warp));
            self.l(format!("@{w0} bra.uni {skip};"));
        }
        self.l(format!("elect.sync {lane}|{lead}, -1;"));
        self.l(format!("@!{lead} bra {skip};"));
        if let Some(empty) = empty {
            // wait until every consumer warp released this slot's previous
            // fill (parity of the previous phase: a first fill passes)
            let (par, p, lbl) = (self.reg(Cls::R), self.reg(Cls::P), self.label());
            self.l(format!("and.b32 {par}, {slot}, 1;"));
            self.l(format!("xor.b32 {par}, {par}, 1;"));
            self.body.push_str(&format!("{lbl}:\n"));
            // (multicast: the other program's consumers released it too)
            self.l(format!("mbarrier.try_wait.parity.shared::cta.b64 {p}, [{empty}], {par};"));
            self.l(format!("@!{p} bra {lbl};"));
        }
        let sink = self.reg(Cls::Rd);
        self.l(format!("mbarrier.arrive.expect_tx.shared::cta.b64 {sink}, [{bar}], {};", rows * cols * es));
        let dim = coords.len();
        // multicast: this program copies every other column atom into the
        // same slot of both programs (completing on both full mbarriers,
        // whose `expect_tx` counts the whole tile), the other program the rest
        let mc = if self.mcast[c] {
            let (mask, mine) = (self.reg(Cls::H), [self.reg(Cls::P), self.reg(Cls::P)]);
            self.l(format!("mov.b16 {mask}, 3;"));
            for (r, p) in mine.iter().enumerate() {
                self.l(format!("setp.eq.u32 {p}, {}, {r};", self.rank));
            }
            Some((mask, mine))
        } else {
            None
        };
        for ka in 0..cols / atom {
            // destination: column atom `ka`
            let dst = self.reg(Cls::R);
            self.l(format!("add.u32 {dst}, {base}, {};", ka * rows * 128));
            let c0 = self.reg(Cls::R);
            self.l(format!("add.s32 {c0}, {}, {};", coords[0], ka * atom));
            let cs = std::iter::once(c0).chain(coords[1..].iter().cloned()).collect::<Vec<_>>().join(", ");
            match &mc {
                Some((mask, mine)) => self.l(format!("@{} cp.async.bulk.tensor.{dim}d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [{dst}], [{tm}, {{{cs}}}], [{bar}], {mask};", mine[(ka % 2) as usize])),
                None => self.l(format!("cp.async.bulk.tensor.{dim}d.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{tm}, {{{cs}}}], [{bar}];")),
            }
        }
        self.body.push_str(&format!("{skip}:\n"));
        Ok(vec![slot])
    }

    /// `dot` as Hopper warpgroup MMAs (`wgmma.mma_async`, sm_90a), f16/bf16
    /// or tf32 into f32. Both operands are staged in shared memory in the
    /// 128-byte swizzled layouts the tensor cores read through 64-bit
    /// descriptors: A K-major (`[k/64][m][64]` for 16-bit elements) or,
    /// from a 16-bit transposed view, M-major (`[m/64][k][64]`, the
    /// instruction's "transposed A"), B N-major for 16-bit elements
    /// (`[n/64][k][64]`, "transposed B") and K-major for tf32, for a
    /// transposed view and for B narrower than 64 columns (`[k/64][n][64]`
    /// for 16-bit elements: B's tile transposed, which its ring's copies or
    /// the staging do) — `async_copy::wgmma_slot`. The accumulator has the layout `wgmma` writes
    /// (`Blocked::wgmma_acc`, over `wm = num_warps` warps along M):
    /// instruction `t` of warpgroup `g` reads A's 64-row block `t·G + g`
    /// (G warpgroups) and gives warp `w%4` rows `16·(w%4) + lane/4 + 8·h` of
    /// it — the registers the layout says; no data moves after the MMA.
    fn dot_wgmma(&mut self, a: V, b: V, acc: V, g: super::assign::MmaGrid, precision: DotPrecision, res: V) -> R<Vec<String>> {
        let (sa, sb) = (self.shape_u32(a), self.shape_u32(b));
        let (m, kk, n) = (sa[0], sa[1], sb[1]);
        // (f32 operands: the dot asked for tf32 — `assign` gives f32 dots a
        // tensor-core grid only then; the tensor cores read the top 19 bits
        // of each element, so a `dot_tf32`'s operands are rounded before:
        // in registers when staged, by a pass over `cp.async` slots, by the
        // bulk copies of TMA slots)
        let (ty, es) = match self.dtype(a) {
            DType::BF16 => ("bf16", 2),
            DType::F16 => ("f16", 2),
            DType::F32 => ("tf32", 4),
            d => return self.err(format!("wgmma path for a {d} dot")),
        };
        self.uses_wgmma = true;
        let wm = g.wm;
        let groups = wm / 4;
        let (ca, cb) = (self.aplan.class_of(a), self.aplan.class_of(b));
        let (ra, rb) = (self.get(a), self.get(b));
        // the operands' shared-memory layouts: a ring slot's
        // (`async_copy::wgmma_slot`); staged from registers, A K-major and B
        // as `wgmma_slot` would place it (K-major for tf32 and below 64
        // columns, else N-major)
        let slot_transposed = |c: Option<usize>| c.is_some_and(|c| matches!(self.aplan.layout[c], super::async_copy::SlotLayout::Swizzled { transposed: true, .. }));
        let mmajor_a = slot_transposed(ca);
        let kmajor_b = match cb {
            Some(_) => slot_transposed(cb),
            None => es == 4 || (n * es) % 128 != 0,
        };
        // operands in registers are staged in the scratch space
        let (mut base, mut base_b) = (ra[0].clone(), rb[0].clone());
        if ca.is_none() || cb.is_none() {
            let bytes_a = if ca.is_none() { m * kk * es } else { 0 };
            self.smem_need(bytes_a + if cb.is_none() { kk * n * es } else { 0 });
            self.bar();
            let scratch = self.smem_base();
            // (tf32 operands rounded on the way, as the interpreter does;
            // truncated ones the tensor cores truncate themselves)
            let tf = |em: &mut Self, r: &[String]| -> Vec<String> { if precision == DotPrecision::Tf32 { r.iter().map(|f| em.tf32_round(f)).collect() } else { r.to_vec() } };
            if ca.is_none() {
                let ra = tf(self, &ra);
                self.stage_wgmma(&ra, &sa, &scratch, es, false);
                base = scratch.clone();
            }
            if cb.is_none() {
                base_b = self.reg(Cls::R);
                self.l(format!("add.u32 {base_b}, {scratch}, {bytes_a};"));
                let rb = tf(self, &rb);
                self.stage_wgmma(&rb, &sb, &base_b, es, kmajor_b);
            }
        }
        let ready = self.ring_ready.contains(&a) && self.ring_ready.contains(&b);
        let tma = |c: Option<usize>| c.is_some_and(|c| self.aplan.tma[c].is_some());
        let (cp_a, cp_b) = (ca.is_some() && !tma(ca), cb.is_some() && !tma(cb));
        if ready {
            // waited for at the top of the loop body; close this
            // iteration's prefetch group
            self.cp_commit();
        } else if cp_a || cp_b {
            // the operands' copies: loaded directly (in the open group or an
            // older one): wait for everything; carried from `d` iterations
            // back: every iteration since closed at least one group (the
            // one with its ring's prefetch, closed here at the latest), so
            // the newest `d` groups may stay in flight
            let dist = |v: V| self.aplan.carried.get(&v).map_or(0, |c| c.1);
            let keep = [(a, cp_a), (b, cp_b)].iter().filter(|(_, c)| *c).map(|(v, _)| dist(*v)).min().unwrap_or(0);
            self.cp_commit();
            self.l(format!("cp.async.wait_group {keep};"));
        }
        // generic-proxy writes (stores, cp.async) read by the async proxy
        // (the tensor cores): fence in every writing thread, then a barrier
        // (bulk tensor copies are async-proxy writes: their mbarrier is
        // all the tensor cores need)
        if !ready && (cp_a || cp_b) && precision == DotPrecision::Tf32 {
            self.round_tf32_slots(&[(a, ra[0].clone()), (b, rb[0].clone())]);
        }
        if !ready && (ca.is_none() || cb.is_none() || cp_a || cp_b) {
            self.l("fence.proxy.async.shared::cta;");
            self.bar();
        }
        for (c, r) in [(ca, &ra[0]), (cb, &rb[0])] {
            if let Some(c) = c.filter(|c| self.aplan.tma[*c].is_some()) {
                self.tma_wait(c, r);
            }
        }
        self.ring_dirty = true;
        // descriptors: start address >> 4 (bits 0-13), leading byte offset
        // >> 4 (16-29), stride byte offset >> 4 (32-45), swizzle 128B (62-63)
        let desc = |em: &mut Self, addr: &str, lbo: u32, sbo: u32| -> String {
            let (lo, d) = (em.reg(Cls::R), em.reg(Cls::Rd));
            em.l(format!("bfe.u32 {lo}, {addr}, 4, 14;"));
            em.l(format!("cvt.u64.u32 {d}, {lo};"));
            let hi: u64 = ((lbo as u64 >> 4) << 16) | ((sbo as u64 >> 4) << 32) | (1u64 << 62);
            em.l(format!("or.b64 {d}, {d}, {hi};"));
            d
        };
        // A: this warpgroup's first 64-row block. K-major: rows of 128-byte
        // atoms, LBO unused (1), SBO = between groups of 8 rows; M-major
        // (16-bit, from a transposed view): a 64-row block is one atom
        // column `[k][64]`, `k·128` bytes, SBO = between groups of 8
        // k-rows (LBO, between atoms along M, is not crossed by m64)
        let wg = self.reg(Cls::R);
        self.l(format!("shr.u32 {wg}, {}, 2;", self.warp));
        let addr_a = self.reg(Cls::R);
        let block_a = if mmajor_a { kk * 128 } else { 8192 };
        self.l(format!("mad.lo.u32 {addr_a}, {wg}, {block_a}, {base};"));
        let da = if mmajor_a { desc(self, &addr_a, kk * 128, 1024) } else { desc(self, &addr_a, 16, 1024) };
        // B, 16-bit as stored row-major: N-major; LBO = distance between
        // 64-column atoms, SBO = between groups of 8 k-rows. tf32, 16-bit
        // from a transposed view and B narrower than an atom: K-major like
        // A (the slot holds B transposed: row n, one 128-byte atom row of K)
        let db = if kmajor_b { desc(self, &base_b, 16, 1024) } else { desc(self, &base_b, kk * 128, 1024) };
        let racc = self.get(acc);
        // in flight across the back edge (`async_copy`): accumulate in the
        // carried registers themselves, which nothing else reads until the
        // loop ends (a copy would make ptxas serialize the MMAs)
        let inflight = self.aplan.inflight.get(&res) == Some(&acc);
        let accs: Vec<String> = if inflight {
            racc.clone()
        } else {
            racc.iter()
                .map(|v| {
                    let t = self.reg(Cls::F);
                    self.mov(Cls::F, &t, v);
                    t
                })
                .collect()
        };
        let scale_d = self.reg(Cls::P);
        // scale-d: accumulate into d (always true; a register operand)
        self.l(format!("setp.eq.u32 {scale_d}, {}, {};", self.lane, self.lane));
        self.l("wgmma.fence.sync.aligned;");
        let ni = n.min(256);
        let rn = (n / 8) as usize;
        let tcount = m / (16 * wm);
        // one instruction step takes 32 bytes of K (k16 of 16-bit, k8 of
        // tf32); four of them make a 128-byte atom
        let kstep = 32 / es;
        for ks in 0..kk / kstep {
            for t in 0..tcount {
                let off_a = if mmajor_a { (t * groups) * block_a + ks * kstep * 128 } else { (t * groups) * 8192 + (ks / 4) * m * 128 + (ks % 4) * 32 };
                let dai = self.reg(Cls::Rd);
                self.l(format!("add.s64 {dai}, {da}, {};", off_a >> 4));
                for u in 0..n / ni {
                    let off_b = if kmajor_b { (ks / 4) * n * 128 + (ks % 4) * 32 + u * ni * 128 } else { u * (ni / 64) * kk * 128 + ks * 16 * 128 };
                    let dbi = self.reg(Cls::Rd);
                    self.l(format!("add.s64 {dbi}, {db}, {};", off_b >> 4));
                    let mut d = vec![];
                    for q in 0..(ni / 2) as usize {
                        let (jj, h, e) = (q / 4, (q % 4) / 2, q % 2);
                        let j = (u * ni / 8) as usize + jj;
                        d.push(accs[(2 * t as usize + h) * 2 * rn + 2 * j + e].clone());
                    }
                    // (tf32 has no transpose immediates: both operands
                    // K-major; 16-bit: "transposed" = M-major A, N-major B)
                    let imm = if es == 4 { "1, 1".to_string() } else { format!("1, 1, {}, {}", mmajor_a as u32, !kmajor_b as u32) };
                    self.l(format!("wgmma.mma_async.sync.aligned.m64n{ni}k{kstep}.f32.{ty}.{ty} {{{}}}, {dai}, {dbi}, {scale_d}, {imm};", d.join(", ")));
                }
            }
        }
        self.l("wgmma.commit_group.sync.aligned;");
        // In flight: wait for the previous iteration's group only (its ring
        // slots are then free; the loop's exit waits for the last). No
        // trailing barrier, as for mma.sync: the wait makes this
        // warpgroup's shared-memory reads complete, and the next writer
        // starts with a barrier.
        self.l(format!("wgmma.wait_group.sync.aligned {};", inflight as u32));
        // warp-specialized: the slots the waited-for MMAs read are free (in
        // flight: the previous dot's, recorded; else this one's)
        for (c, r) in [(ca, &ra[0]), (cb, &rb[0])] {
            let Some(c) = c.filter(|c| self.ws_prev.get(*c).is_some_and(|p| p.is_some())) else { continue };
            if inflight {
                self.ws_release_prev(c);
                let prev = self.ws_prev[c].clone().unwrap();
                self.l(format!("mov.u32 {prev}, {r};"));
            } else {
                self.ws_release(c, r, None);
            }
        }
        Ok(accs)
    }

    fn dot(&mut self, a: V, b: V, acc: V, precision: DotPrecision, res: V) -> R<Vec<String>> {
        let out_shape = self.shape_u32(res);
        if let Some(g) = self.plan.mma(&out_shape) {
            if g.wgmma {
                return self.dot_wgmma(a, b, acc, g, precision, res);
            }
            return self.dot_mma(a, b, acc, precision, g);
        }
        let (sa, sb) = (self.shape_u32(a), self.shape_u32(b));
        let (m, kk, n) = (sa[0], sa[1], sb[1]);
        let d = self.dtype(a);
        let int = d == DType::I8;
        let ac = if int { Cls::R } else { Cls::F };
        let conv = |em: &mut Self, regs: Vec<String>| -> Vec<String> {
            regs.iter()
                .map(|v| {
                    if int {
                        return v.clone();
                    }
                    let f = em.to_f32(v, d);
                    if precision.is_tf32() {
                        em.tf32_reduce(&f, precision)
                    } else {
                        f
                    }
                })
                .collect()
        };
        let ra = self.get(a);
        let rb = self.get(b);
        let va = conv(self, ra);
        let vb = conv(self, rb);
        // A's rows padded by one slot: the threads of a warp read one k of
        // several rows at once, which would otherwise share a bank when K
        // is a multiple of 32
        let pitch_a = kk + 1;
        let bytes_a = m * pitch_a * 4;
        self.smem_need(bytes_a + kk * n * 4);
        self.bar();
        let base = self.smem_base();
        self.to_smem_strided(&va, &sa, ac, &base, &[pitch_a, 1]);
        let base_b = self.reg(Cls::R);
        self.l(format!("add.u32 {base_b}, {base}, {bytes_a};"));
        self.to_smem(&vb, &sb, ac, &base_b);
        self.bar();
        let out_shape = self.shape_u32(res);
        let racc = self.get(acc);
        let accs: Vec<String> = racc
            .iter()
            .map(|v| {
                let t = self.reg(ac);
                self.mov(ac, &t, v);
                t
            })
            .collect();
        // A register-blocked outer product: a thread's outputs cover a few
        // distinct rows and columns (the layout's per-register offsets), so
        // each k loads one element of A per distinct row and one of B per
        // distinct column, and every output is one FMA of those — instead
        // of two loads per output.
        let (rows, cols, at) = self.layout(&out_shape).bl.outer_product();
        // a pointer per distinct row of A and column of B, from a register
        // of that row / column
        let mut pa = vec![String::new(); rows.len()];
        let mut pb = vec![String::new(); cols.len()];
        for (r, &(u, v)) in at.iter().enumerate() {
            if pa[u].is_empty() {
                let i = self.index(&out_shape, r, 0);
                let x = self.reg(Cls::R);
                self.l(format!("mad.lo.u32 {x}, {i}, {}, {base};", pitch_a * 4));
                pa[u] = x;
            }
            if pb[v].is_empty() {
                let j = self.index(&out_shape, r, 1);
                let y = self.reg(Cls::R);
                self.l(format!("mad.lo.u32 {y}, {j}, 4, {base_b};"));
                pb[v] = y;
            }
        }
        // k unrolled by `un` (a power of two dividing K), immediate offsets
        let un = kk.min(8);
        let kc = self.reg(Cls::R);
        self.l(format!("mov.u32 {kc}, 0;"));
        let (head, end) = (self.label(), self.label());
        self.body.push_str(&format!("{head}:\n"));
        let p = self.reg(Cls::P);
        self.l(format!("setp.ge.u32 {p}, {kc}, {kk};"));
        self.l(format!("@{p} bra.uni {end};"));
        for q in 0..un {
            let xs: Vec<String> = pa.iter().map(|pp| self.ld_shared_off(ac, pp, q * 4)).collect();
            let ys: Vec<String> = pb.iter().map(|pp| self.ld_shared_off(ac, pp, q * n * 4)).collect();
            for (r, &(u, v)) in at.iter().enumerate() {
                if int {
                    self.l(format!("mad.lo.s32 {}, {}, {}, {};", accs[r], xs[u], ys[v], accs[r]));
                } else {
                    self.l(format!("fma.rn.f32 {}, {}, {}, {};", accs[r], xs[u], ys[v], accs[r]));
                }
            }
        }
        for pp in &pa {
            self.l(format!("add.u32 {pp}, {pp}, {};", un * 4));
        }
        for pp in &pb {
            self.l(format!("add.u32 {pp}, {pp}, {};", un * n * 4));
        }
        self.l(format!("add.u32 {kc}, {kc}, {un};"));
        self.l(format!("bra.uni {head};"));
        self.body.push_str(&format!("{end}:\n"));
        self.bar();
        Ok(accs)
    }

    /// One 32-bit shared-memory load at `[a + off]`.
    fn ld_shared_off(&mut self, c: Cls, a: &str, off: u32) -> String {
        let v = self.reg(c);
        let ty = if c == Cls::F { "f32" } else { "b32" };
        self.l(format!("ld.shared.{ty} {v}, [{a}+{off}];"));
        v
    }

    /// Store a tile's registers to shared memory with element strides
    /// `strides` per dimension (a padded layout; [`Self::to_smem`] is the
    /// dense one).
    fn to_smem_strided(&mut self, regs: &[String], shape: &[u32], c: Cls, base: &str, strides: &[u32]) {
        let sz = if c == Cls::Rd { 8 } else { 4 };
        for (r, v) in regs.iter().enumerate() {
            let a = self.reg(Cls::R);
            self.l(format!("mov.u32 {a}, {base};"));
            for (d, &st) in strides.iter().enumerate() {
                if shape[d] > 1 {
                    let i = self.index(shape, r, d);
                    self.l(format!("mad.lo.u32 {a}, {i}, {}, {a};", st * sz));
                }
            }
            self.st_shared(c, &a, v);
        }
    }
}

fn cmp_s(o: CmpOp, float: bool) -> &'static str {
    match (o, float) {
        (CmpOp::Eq, _) => "eq",
        (CmpOp::Ne, true) => "neu",
        (CmpOp::Ne, false) => "ne",
        (CmpOp::Lt, _) => "lt",
        (CmpOp::Le, _) => "le",
        (CmpOp::Gt, _) => "gt",
        (CmpOp::Ge, _) => "ge",
    }
}

impl<'k> crate::remat::Emitter<'k> for Em<'k> {
    fn remat_state(&mut self) -> &mut crate::remat::Remat<'k> {
        &mut self.remat
    }
    fn vals_mut(&mut self) -> &mut crate::remat::Vals {
        &mut self.vals
    }
    fn nregs_of(&mut self, v: V) -> R<usize> {
        Ok(self.nregs(v))
    }
    fn index_of(&mut self, shape: &[u32], r: usize, d: usize) -> R<String> {
        Ok(self.index(shape, r, d))
    }
    fn arange_at(&mut self, i: &str, start: i64) -> String {
        if start == 0 {
            return i.to_string();
        }
        let o = self.reg(Cls::R);
        self.l(format!("add.s32 {o}, {i}, {start};"));
        o
    }
    fn zero_index(&mut self) -> String {
        self.zero_reg()
    }
    fn elementwise_op(&mut self, kind: &OpKind, _v: V) -> R<Vec<String>> {
        self.elementwise(kind)
    }
}
