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

mod affine;
mod alu;
mod control;
mod dot;
mod math;
mod memory;
mod reduce;
mod rings;
mod shared;
mod values;
mod wgmma;

use super::{EmitError, ParamAbi, PtxKernel, PtxOptions, TensorMapSpec};
use crate::plan::axis::Info;
use crate::plan::layout::ThreadLayout as Layout;
use ferrotile_ir::numeric::f32_round_to_odd;
use ferrotile_ir::*;
use std::collections::HashMap;
use std::fmt::Write;

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

/// A committed `wgmma` group not yet waited for (`PtxWriter::wg_pending`).
struct WgGroup {
    /// The `dot` result its MMAs write.
    res: V,
    /// Warp-specialized: the ring slots its MMAs read (ring, a register
    /// holding the slot), released once it is waited for.
    rel: Vec<(usize, String)>,
    /// `PtxWriter::work` at the commit.
    work: u64,
    /// The PTX text's length at the commit.
    at: usize,
    /// Tensor-core cycles its MMAs keep the SM busy for: this warpgroup's
    /// multiply-adds over ~2048 per cycle (16-bit inputs, H100/H200).
    cycles: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum RegClass {
    F,
    H,
    R,
    Rd,
    P,
}

impl RegClass {
    /// The PTX type a `mov` / `selp` / `ld.shared` / `st.shared` of a whole
    /// register of this class names (bit types where the value's
    /// interpretation does not matter; `f32` keeps float registers readable).
    fn mov_ty(self) -> &'static str {
        match self {
            RegClass::F => "f32",
            RegClass::H => "b16",
            RegClass::R => "b32",
            RegClass::Rd => "b64",
            RegClass::P => "pred",
        }
    }
}

fn reg_class(e: Elem) -> RegClass {
    match e {
        Elem::Ptr(_) => RegClass::Rd,
        Elem::Val(d) => match d {
            DType::F32 => RegClass::F,
            DType::F16 | DType::BF16 => RegClass::H,
            DType::I64 => RegClass::Rd,
            DType::Bool => RegClass::P,
            _ => RegClass::R,
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

fn f32_hex(v: f64) -> String {
    format!("0f{:08X}", (v as f32).to_bits())
}

type R<T> = Result<T, EmitError>;

struct PtxWriter<'k> {
    k: &'k Kernel,
    o: &'k PtxOptions,
    vec: u32,
    body: String,
    pro: String,
    counts: [u32; 5],
    vals: HashMap<V, Vec<String>>,
    layouts: HashMap<Vec<u32>, std::rc::Rc<Layout>>,
    /// (shape, offset along the dimension, dimension) → index register.
    idx_cache: HashMap<(Vec<u32>, usize, usize), String>,
    /// (index register, run) → its position in the interleaved K order
    /// (prologue: `interleaved_row`).
    kperm_cache: HashMap<(String, u32), String>,
    /// Index registers (`index`, `index_of`) that are the thread's offset
    /// register plus a constant, without wrapping: `(thread register, c)`.
    idx_parts: HashMap<String, (String, u32)>,
    /// (row root, column root, rows, element size) → the root's offset in
    /// a swizzled `wgmma` slot (prologue: `wgmma_addr`).
    swizzle_cache: HashMap<(String, String, u32, u32), String>,
    /// Index registers (`index`) whose value is a per-thread offset that is
    /// a multiple of `align` plus the constant `c`: `(align, c)`.
    idx_residue: HashMap<String, (u32, u32)>,
    /// Registers holding a constant known while emitting (residues of
    /// indices and what is computed from them and from constants only).
    reg_const: HashMap<String, i64>,
    /// `r = w >> c` with a constant `c` (`reg_const`): `r` → `(w, c)`.
    shifted: HashMap<String, (String, i64)>,
    /// 64-bit registers that extend a 32-bit one (`cvt.s64.s32` /
    /// `cvt.u64.u32`): → (the 32-bit register, signed?). A 64-bit product
    /// of two such registers is one `mul.wide` (ptxas does not see through
    /// the extensions: a 64×64-bit multiply is three `IMAD`s and a sign
    /// shift — the `(k as i64) * (n as i64)` row offsets of a pointer
    /// tile) — and a pointer plus such an offset one `mad.wide` (the
    /// `IMAD.WIDE` of an address, where the 64-bit `mad` takes a sign shift
    /// and three multiply-adds: 16×128×64 W4A16 step 269 → 252 SASS). Once
    /// only in `wgmma` kernels (session 29: an opt-in register-operand
    /// W4A16 tile spilled 8 bytes with it); every tuner configuration of
    /// the library assembles without spills with both now (session 38).
    wide32: HashMap<String, (String, bool)>,
    /// Integer and address registers known as `root + c` (a register and
    /// a constant; addresses in bytes): [`affine`].
    affine: HashMap<String, (String, i64)>,
    /// Accesses printed at `[root+c]` ([`super::PtxKernel::affine_addresses`]).
    affine_uses: u32,
    /// `mad.wide` / `mul.wide` printed from `wide32`
    /// ([`super::PtxKernel::wide_offsets`]).
    wide_uses: u32,
    /// Loops written as threaded copies of their body
    /// (`control::unroll_copies`): [`super::PtxKernel::unrolled_loops`].
    unrolled: u32,
    /// A packed pair of small integers converted to 16-bit floats
    /// (`small_ints_to_16bit`): its word → the word before the magic
    /// number is subtracted, that number's offset (`lo`) and the target.
    magic_words: HashMap<String, (String, i64, DType)>,
    /// A small integer converted to a 16-bit float through f32
    /// (`small_int_to_float`): its register → the f32 `2²³ + x − lo`
    /// before the subtraction, and the range `[lo, hi]` — so `(x as T) − (y as T)` of two
    /// such values subtracts in f32 and rounds once (`fused_int_sub`).
    magic_f32: HashMap<String, (String, i64, i64)>,
    /// 16-bit float constants (`Const`): register → value.
    h_const: HashMap<String, f64>,
    /// Values not in their shape's default layout ([`crate::plan::slices`]),
    /// the thread layouts of those layouts, and their index registers.
    vlay: crate::plan::slices::ValueLayouts,
    /// Accumulators carried pre-summed along the axis their loop's result
    /// is summed over ([`crate::plan::partial`]): one register per chain.
    partial: crate::plan::partial::PartialAccs,
    olayouts: HashMap<crate::plan::layout::Blocked, std::rc::Rc<Layout>>,
    oidx_cache: HashMap<(crate::plan::layout::Blocked, usize, usize), String>,
    /// The layout the op being emitted computes in, when it is not its
    /// shape's default: `get` hands its operands over in it.
    want: Option<crate::plan::layout::Blocked>,
    /// Values converted to their default layout, per open block (a
    /// conversion emitted inside a branch or a loop body is not visible
    /// after it).
    conv: Vec<HashMap<V, Vec<String>>>,
    /// Layout conversions through shared memory: (line, what), for
    /// `FERROTILE_EXPLAIN=1` ([`super::PtxKernel::conversions`]).
    explain: Vec<(u32, String)>,
    owner_cache: HashMap<(Vec<u32>, usize), Option<String>>,
    labels: u32,
    smem: u32,
    tid: String,
    lane: String,
    warp: String,
    axis: HashMap<V, Info>,
    /// Every dimension's axis facts and integer ranges.
    facts: HashMap<V, crate::plan::axis::Facts>,
    loc: Loc,
    /// 16-bit register → (32-bit word it was unpacked from, upper half?):
    /// lets bf16 → f32 read the word directly (one instruction, no unpack).
    h_from_word: HashMap<String, (String, bool)>,
    /// 16-bit register → the f32 register it was rounded from: lets a pair
    /// of stores pack with one `cvt.rn.{bf16,f16}x2.f32`.
    h_from_f32: HashMap<String, String>,
    /// Pairs of 16-bit registers already packed into a 32-bit one, per
    /// open block (`block` pushes and pops a level): `pack_b16` reuses them.
    packed: Vec<HashMap<(String, String), String>>,
    /// 32-bit constants already set in the prologue ([`PtxWriter::b32_const`]).
    b32_consts: HashMap<u32, String>,
    /// Which values to recompute instead of converting ([`crate::plan::remat`]).
    remat: crate::plan::remat::Remat<'k>,
    /// `max`/`argmax` pairs reduced once ([`crate::plan::reduce::siblings`]):
    /// the first emitted → the other.
    reduce_pairs: HashMap<V, V>,
    /// `expand_dims` results read only by broadcasts, of a value in its
    /// default layout: → (that value, the new axis). Not converted where
    /// they are defined: each broadcast converts from the value itself,
    /// one trip through shared memory instead of two (`control.rs`).
    expand_then_broadcast: HashMap<V, (V, usize)>,
    /// The other's registers, computed with the first.
    reduced: HashMap<V, Vec<String>>,
    zero: Option<String>,
    /// Layouts chosen for this kernel's shapes ([`super::assign`]).
    layout_plan: super::assign::Plan,
    /// Some `dot` was emitted as `wgmma` (target sm_90a).
    uses_wgmma: bool,
    /// Loads that become `cp.async` copies into operand rings (see
    /// `async_copy`); the rings sit at the start of shared memory, the
    /// scratch space of the other ops after them.
    ring_plan: super::async_copy::AsyncPlan,
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
    /// `wgmma` groups committed and not yet waited for, oldest first: the
    /// `dot` results they write (see `wgmma.rs`, `wg_wait_for`). A group is
    /// waited for (`wgmma.wait_group n`, n = the groups committed after it)
    /// before the first op that reads its result, and every pending group
    /// before a barrier, a nested region (loop, branch) and the end of a
    /// block — so the registers an MMA reads or writes are untouched while
    /// it runs, and no ring slot it reads is refilled. A branch with no
    /// loop or `dot` inside is the exception: only the groups whose results
    /// it reads are waited for before it; the others stay in flight through
    /// it (`wg_held`).
    /// Warp-specialized, each group also lists the ring slots its MMAs
    /// read (ring, a register holding the slot): released once the group
    /// is waited for.
    /// Each group also records where it was committed (see `WgGroup`).
    wg_pending: Vec<WgGroup>,
    /// Ops other than `dot`s and yields emitted so far (`wg_boundary` asks
    /// for some between a group's commit and its wait).
    work: u64,
    /// Waits may be deferred in this kernel (`PtxOptions::defer_wgmma_waits`,
    /// and none of its MMAs stays in flight across a loop's back edge: those
    /// keep their own wait discipline).
    wg_defer: bool,
    /// The oldest `wg_held` pending groups stay in flight through the
    /// branch being emitted (see `op`): a wait inside it that covers them
    /// is emitted, but they stay listed — they are complete on this path
    /// only — and are released by the waits after the branch, on both
    /// paths. The end of a branch block leaves them pending.
    wg_held: usize,
    /// Ring operands already waited for, fenced and barriered at the top of
    /// the loop body (see `For`): their `dot` synchronizes no further.
    ring_ready: std::collections::HashSet<V>,
    /// Loop-invariant `cp.async` slots waited for at the entry of each
    /// enclosing loop being emitted (`OpKind::For`), innermost last.
    inv_waited: Vec<std::collections::HashSet<V>>,
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
    /// Per ring: for a TMA ring of a dynamic view (`tma` module doc), the
    /// shared-memory offset of its slots' valid-row ranges (`[lo, hi)` as
    /// two u32 per slot, written by the issuing thread before each copy).
    tma_range: Vec<Option<u32>>,
    /// Thread 0 (initializes the mbarriers).
    leader: String,
    /// Warp specialization ([`super::warp_spec`]): the producer's slice, the
    /// stream being emitted, per TMA ring the register holding the slot a
    /// consumer releases after its next `wgmma` wait (-1: none), and lane 0
    /// of each warp (the consumers' arrivals).
    ws: Option<super::warp_spec::WsPlan>,
    role: Role,
    ws_prev: Vec<Option<String>>,
    /// Warp-specialized: per `dot` result, the TMA rings whose slot it
    /// releases once its MMAs are complete (`rings.rs`, `ws_release_plan`).
    ws_rel: HashMap<V, Vec<usize>>,
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
    /// Enclosing loops being emitted whose bodies load into a ring: a store
    /// there comes around to the rings again ([`Self::store_staged`]).
    ring_loops: u32,
}

/// `op` loads into an operand ring, or holds an op that does.
fn has_ring(op: &Op, ap: &super::async_copy::AsyncPlan) -> bool {
    op.results.iter().any(|r| ap.loads.contains_key(r)) || op.kind.regions().iter().any(|b| b.ops.iter().any(|o| has_ring(o, ap)))
}

/// What the driver (`super::compile`) decided, for the printer: the kernel
/// after the IR passes and the analyses over it.
pub(super) struct Plans<'k> {
    pub kernel: &'k Kernel,
    /// Consecutive elements a thread owns along the last dimension.
    pub vec: u32,
    /// The layout of each tile shape ([`super::assign`]).
    pub layouts: super::assign::Plan,
    pub axis: HashMap<V, Info>,
    pub facts: HashMap<V, crate::plan::axis::Facts>,
    /// Loads that become copies into shared-memory operand rings.
    pub rings: super::async_copy::AsyncPlan,
    pub tma_views: HashMap<V, super::tma::TmaView>,
    pub warp_spec: Option<super::warp_spec::WsPlan>,
    /// Values in a layout other than their shape's ([`crate::plan::slices`]).
    pub values: crate::plan::slices::ValueLayouts,
    /// Accumulators carried pre-summed ([`crate::plan::partial`]).
    pub partial: crate::plan::partial::PartialAccs,
}

/// Print the kernel the plans describe.
pub(super) fn write(p: Plans<'_>, o: &PtxOptions) -> R<PtxKernel> {
    let Plans { kernel: k, vec, layouts: layout_plan, axis, facts, rings: ring_plan, tma_views, warp_spec: ws, values: vlay, partial } = p;
    let pinned: Vec<V> = vlay.keys().copied().collect();
    let mut em = PtxWriter {
        k,
        o,
        vec,
        body: String::new(),
        pro: String::new(),
        counts: [0; 5],
        vals: HashMap::new(),
        layouts: HashMap::new(),
        idx_cache: HashMap::new(),
        kperm_cache: HashMap::new(),
        idx_parts: HashMap::new(),
        swizzle_cache: HashMap::new(),
        idx_residue: HashMap::new(),
        reg_const: HashMap::new(),
        wide32: HashMap::new(),
        affine: HashMap::new(),
        affine_uses: 0,
        wide_uses: 0,
        unrolled: 0,
        shifted: HashMap::new(),
        magic_words: HashMap::new(),
        magic_f32: HashMap::new(),
        h_const: HashMap::new(),
        vlay,
        partial,
        olayouts: HashMap::new(),
        oidx_cache: HashMap::new(),
        want: None,
        conv: vec![],
        explain: vec![],
        owner_cache: HashMap::new(),
        labels: 0,
        smem: 0,
        tid: String::new(),
        lane: String::new(),
        warp: String::new(),
        axis,
        facts,
        loc: Loc::default(),
        h_from_word: HashMap::new(),
        h_from_f32: HashMap::new(),
        packed: vec![HashMap::new()],
        b32_consts: HashMap::new(),
        remat: crate::plan::remat::Remat::with_pinned(k, pinned),
        reduce_pairs: crate::plan::reduce::siblings(k),
        expand_then_broadcast: if o.expand_broadcast { crate::plan::convert::expand_then_broadcast(k) } else { HashMap::new() },
        reduced: HashMap::new(),
        zero: None,
        uses_wgmma: false,
        ring_plan,
        ring: 0,
        slot_regs: vec![],
        cp_pending: vec![],
        ring_dirty: true,
        wg_pending: vec![],
        work: 0,
        wg_defer: false,
        wg_held: 0,
        ring_ready: Default::default(),
        inv_waited: Default::default(),
        tma_views,
        tmaps: vec![],
        tmap_regs: vec![],
        tma_bar: vec![],
        tma_range: vec![],
        leader: String::new(),
        ws,
        role: Role::All,
        ws_prev: vec![],
        ws_rel: HashMap::new(),
        lane0: String::new(),
        mcast: vec![],
        cluster_bar: false,
        rank: String::new(),
        peer: String::new(),
        last_ring_op: None,
        depth: 0,
        rings_dead: false,
        ring_loops: 0,
        layout_plan,
    };
    em.last_ring_op = k.body.ops.iter().rposition(|op| has_ring(op, &em.ring_plan));
    em.wg_defer = o.defer_wgmma_waits && em.ring_plan.inflight.is_empty();
    // multicast rings: clusters of 2 along x, a producer whose loops run
    // the same trips in both programs, every copy of the ring reading the
    // same tile in both, in an even number of 128-byte column atoms (each
    // program issues every other one)
    em.mcast = (0..em.ring_plan.slot_bytes.len())
        .map(|c| {
            let Some(w) = em.ws.as_ref().filter(|w| o.cluster == 2 && w.uniform_trips && em.ring_plan.tma[c].is_some()) else { return false };
            // (a base term on program_id(0) gives the two programs
            // different tiles)
            if em.ring_plan.tma[c].and_then(|view| em.tma_views.get(&view)).is_none_or(|t| t.dynamic || t.batch.iter().any(|b| b.axis == 0)) {
                return false;
            }
            let mut loads = em.ring_plan.loads.iter().filter(|(_, cc)| **cc == c).map(|(v, _)| *v).peekable();
            let Some(&v) = loads.peek() else { return false };
            let shape: Vec<u32> = k.ty(v).shape().iter().map(|d| d.known().unwrap_or(0) as u32).collect();
            let lay = em.ring_plan.layout[c];
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
    em.tid = em.reg(RegClass::R);
    em.lane = em.reg(RegClass::R);
    em.warp = em.reg(RegClass::R);
    let (t, l, w) = (em.tid.clone(), em.lane.clone(), em.warp.clone());
    let _ = writeln!(em.pro, "\tmov.u32 {t}, %tid.x;\n\tand.b32 {l}, {t}, 31;\n\tshr.u32 {w}, {t}, 5;");
    em.ring = em.ring_plan.ring_bytes();
    em.smem = em.ring;
    for c in 0..em.ring_plan.slot_bytes.len() {
        let (cur, first, end) = (em.reg(RegClass::R), em.reg(RegClass::R), em.reg(RegClass::R));
        let (s0, sb, n) = (em.ring_plan.slot0(c), em.ring_plan.slot_bytes[c], em.ring_plan.slots[c]);
        // start on the last slot, so that the first load takes slot 0
        let _ = writeln!(
            em.pro,
            "\tmov.u32 {first}, ft_smem;\n\tadd.u32 {first}, {first}, {s0};\n\tadd.u32 {end}, {first}, {};\n\tadd.u32 {cur}, {first}, {};",
            n * sb,
            (n - 1) * sb
        );
        em.slot_regs.push((cur, first, end));
    }
    // TMA rings: one mbarrier per slot after the rings; thread 0
    // initializes them (arrival count 1: its `expect_tx`) before anything
    // else runs
    // (warp-specialized: each slot also has an *empty* mbarrier after the
    // ring's full ones, on which every consumer warp arrives once per use)
    let specialized = em.ws.is_some();
    if specialized {
        em.ws_rel = rings::ws_release_plan(k, &em.ring_plan);
    }
    let mut bar_off = em.ring;
    let mut inits = vec![];
    for c in 0..em.ring_plan.slot_bytes.len() {
        if em.ring_plan.tma[c].is_none() {
            em.tma_bar.push(None);
            em.ws_prev.push(None);
            continue;
        }
        let ph = em.reg(RegClass::R);
        // (the cursor starts on the last slot: the first fill, of slot 0,
        // flips this to parity 0)
        let _ = writeln!(em.pro, "\tmov.u32 {ph}, 1;");
        em.tma_bar.push(Some((bar_off, ph)));
        let n = em.ring_plan.slots[c];
        inits.extend((0..n).map(|i| (bar_off + 8 * i, 1)));
        bar_off += 8 * n;
        if specialized {
            // (a multicast slot is released by the consumers of both
            // programs of the cluster)
            let count = if em.mcast[c] { 2 * o.num_warps } else { o.num_warps };
            inits.extend((0..n).map(|i| (bar_off + 8 * i, count)));
            bar_off += 8 * n;
            let prev = em.reg(RegClass::R);
            let _ = writeln!(em.pro, "\tmov.u32 {prev}, -1;");
            em.ws_prev.push(Some(prev));
        } else {
            em.ws_prev.push(None);
        }
    }
    // (dynamic views: each slot's valid rows, next to the mbarriers)
    for c in 0..em.ring_plan.slot_bytes.len() {
        let dynamic = em.ring_plan.tma[c].and_then(|v| em.tma_views.get(&v)).is_some_and(|t| t.dynamic);
        em.tma_range.push(dynamic.then_some(bar_off));
        if dynamic {
            bar_off += 8 * em.ring_plan.slots[c];
        }
    }
    if bar_off > em.ring {
        em.leader = em.reg(RegClass::P);
        let (lead, b) = (em.leader.clone(), em.reg(RegClass::R));
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
        em.rank = em.reg(RegClass::R);
        em.peer = em.reg(RegClass::R);
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
        let (pw, plabel, end) = (em.reg(RegClass::P), em.label(), em.label());
        em.lane0 = em.reg(RegClass::P);
        let _ = writeln!(em.pro, "\tsetp.eq.u32 {}, {l}, 0;", em.lane0);
        em.line(format!("setp.ge.u32 {pw}, {w}, {};", o.num_warps));
        em.line(format!("@{pw} bra.uni {plabel};"));
        // (only where one program fills an SM: two programs on one SM
        // could each block in `setmaxnreg.inc` on registers the other
        // holds — an SM has 228 KB of shared memory, so rings over half
        // of it rule the second one out)
        let regs = consumers > at_launch && em.ring > 228 * 1024 / 2;
        if regs {
            em.line(format!("setmaxnreg.inc.sync.aligned.u32 {consumers};"));
        }
        em.role = Role::Consumer;
        em.rings_dead = false;
        em.block(&k.body)?;
        em.line(format!("bra.uni {end};"));
        em.body.push_str(&format!("{plabel}:\n"));
        if regs {
            em.line("setmaxnreg.dec.sync.aligned.u32 40;");
        }
        let idle = em.reg(RegClass::P);
        em.line(format!("setp.ne.u32 {idle}, {w}, {};", o.num_warps));
        em.line(format!("@{idle} bra.uni {end};"));
        em.role = Role::Producer;
        em.vals.clear();
        em.ring_ready.clear();
        em.inv_waited.clear();
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
        em.line("barrier.cluster.arrive.release;");
        em.line("barrier.cluster.wait.acquire;");
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
    if em.uses_wgmma {
        // The warp index through a shuffle from lane 0: the same value,
        // but ptxas then knows it is uniform across the warp and keeps what
        // is computed from it alone — a warpgroup's `wgmma` descriptors —
        // in uniform registers instead of moving them there every
        // iteration (`R2UR`): 154 -> 138 SASS instructions in the loop of
        // the user grouped GEMM (122 with the widening multiplies of
        // `wide32`; together 143.7 -> 136.5 us on the H200). Only where
        // `wgmma` runs: elsewhere nothing uniform is gained and it cost
        // registers (a quantized-GEMM tuner configuration spilled 8 bytes).
        let w = em.warp.clone();
        let at = format!("\tshr.u32 {w}, {}, 5;\n", em.tid);
        em.pro = em.pro.replacen(&at, &format!("{at}\tshfl.sync.idx.b32 {w}, {w}, 0, 31, -1;\n"), 1);
    }
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
    let occupancy = if o.programs_per_sm > 1 { format!(".minnctapersm {}\n", o.programs_per_sm) } else { String::new() };
    let _ = writeln!(text, ".visible .entry {entry}(\n{}\n)\n.maxntid {threads}, 1, 1\n{occupancy}{cluster}{{", plist.join(",\n"));
    let names = [("f32", "%f"), ("b16", "%h"), ("b32", "%r"), ("b64", "%rd"), ("pred", "%p")];
    for (i, (ty, pre)) in names.iter().enumerate() {
        if em.counts[i] > 0 {
            let _ = writeln!(text, "\t.reg .{ty} {pre}<{}>;", em.counts[i]);
        }
    }
    // (first of all: the prologue may already read global memory — a
    // tensor map's prefetch, an invariant slot's copy)
    let dependent_launch = o.dependent_launch && o.sm >= 90;
    if dependent_launch {
        text.push_str("\tgriddepcontrol.wait;\n");
    }
    if (o.dependent_launch || o.launch_dependents) && o.sm >= 90 {
        text.push_str("\tgriddepcontrol.launch_dependents;\n");
    }
    text.push_str(&em.pro);
    text.push_str(&em.body);
    text.push_str("\tret;\n}\n");
    let mut partial_sums = vec![];
    k.walk(&mut |op| {
        if let Some(p) = op.results.first().and_then(|r| em.partial.get(r)).filter(|_| matches!(op.kind, OpKind::Fma { .. } | OpKind::Binary { .. })) {
            partial_sums.push((op.loc.line, p.groups.iter().map(|g| g.len()).sum::<usize>(), p.regs()));
        }
    });
    Ok(PtxKernel {
        entry,
        text,
        smem_bytes: em.smem,
        threads,
        params,
        fma_dots: em.layout_plan.fma_reasons.clone(),
        mma_sync_dots: em.layout_plan.no_wgmma_reasons.clone(),
        conversions: em.explain.clone(),
        partial_sums,
        vector_elems: em.vec,
        tensor_maps,
        unrolled_loops: em.unrolled,
        wide_offsets: em.wide_uses,
        affine_addresses: em.affine_uses,
        rotated_loops: 0,
        cp_invariant_slots: em.ring_plan.cp_invariant_candidates,
        broadcast_slices: 0,
        operand_layouts: em.layout_plan.interleaved_shapes() as u32,
        dependent_launch,
    })
}
