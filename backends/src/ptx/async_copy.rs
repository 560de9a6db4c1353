//! Asynchronous operand copies: which loads go straight from global to
//! shared memory (`cp.async`) instead of through registers.
//!
//! Takes a specialized (possibly software-pipelined) kernel and its layout
//! [`Plan`]. Finds the loads whose only consumer is an
//! operand of a tensor-core `dot` — warpgroup MMAs (`wgmma` reads its
//! operands from shared memory: f16/bf16, and tf32 whose B slot holds the
//! tile transposed) or f16/bf16 `mma.sync` (whose operands pass through
//! shared memory for `ldmatrix` anyway; its tf32 operands stay in
//! registers, where they are rounded to tf32 as the interpreter does):
//! either directly (`a = load(..);
//! dot(a, ..)` in one block) or through a loop-carried value of a `for`
//! whose initial value and yielded value are both such loads — the shape
//! [`ferrotile_ir::passes::pipeline`] produces (a prologue load, and in the body the
//! prefetch of the next iteration's operands before this iteration's `dot`).
//! The masked-off elements of such a load must read as zero (no `other`, or
//! a zero constant), which is what `cp.async`'s zero-fill gives. A
//! `load_block` from a [`super::tma`] view into a `wgmma` (swizzled) slot
//! whose rows run along the view's contiguous dimension in whole 128-byte
//! atoms qualifies too, as a *TMA* class ([`AsyncPlan::tma`]): bulk tensor
//! copies, whose out-of-bounds elements read as zero as `load_block`
//! specifies (for a `dot_tf32`, copies that round f32 to tf32 on the way:
//! [`AsyncPlan::round_tf32`]); every load of a class copies the same way.
//! The slot layout follows the source ([`wgmma_slot`]): a 16-bit B read
//! from a transposed view (a column-major B) gets the K-major slot, a
//! 16-bit A read from one (a column-major A, or the Bᵀ of a swapped
//! product `Cᵀ = Bᵀ·Aᵀ`) the M-major slot, each what a bulk copy fills
//! as the data is stored.
//!
//! On `mma.sync`, a 16-bit B that is `trans(y)` of a ring tile `y` read
//! once (a transposed view, loaded in storage order by
//! `ferrotile_ir::passes::lower_views`) is flipped too: `y`'s padded slot
//! holds B with its rows along N, which `ldmatrix` without `.trans` reads
//! as B fragments.
//!
//! With a prefetch distance `d` (`num_stages - 1`) the carried value is a
//! chain of `d` loop values (the pass's shift register), each initialized by
//! a prologue load.
//!
//! Produces an [`AsyncPlan`]: per operand *class* (one `dot` operand and the
//! loads feeding it) a ring of `d + 1` shared-memory slots in the layout its
//! `dot` reads ([`SlotLayout`]: `wgmma`'s swizzle, or `mma.sync`'s padded
//! rows); the emitter writes each execution of such a load into
//! the class's next slot and represents the loaded tile (and the loop-carried
//! values) by one register, the slot's address.
//!
//! Two more kinds of class, for 16-bit `wgmma` operands: a tile read by
//! several `wgmma` dots, or through a `trans` (`AsyncPlan::flipped`), lies
//! in one slot as its source stores it (in 128-byte atoms along its
//! contiguous dimension: K-major for one reading, N- or M-major for the
//! transposed one), so that `trans` moves no data; and a loop-invariant
//! tile block-loaded before the loop whose `dot` reads it gets a one-slot
//! class filled once (`AsyncPlan::invariant`) — for A when the loop's
//! invariant register-A tiles would take more than 32 registers per thread
//! (they spill: attention's backward at d128), and for every such B (B
//! has no register form: without a slot it is staged from registers at
//! every iteration).
//!
//! Guarantees (what the emitter relies on): every load in the plan is a
//! top-level op of the block holding its consumer (the `dot`'s block, or for
//! carried values the `for`'s parent block and its body; for an invariant
//! class, a block enclosing the loop); every value in the plan has exactly
//! one use, or only `wgmma`-operand readings of one slot (directly or
//! through a `trans` read once); the loads of a class execute in the order
//! their tiles are consumed, and at any time at most `d + 1` of its tiles
//! are live (the one being consumed and `d` prefetched), which the `d + 1`
//! slots hold.
//!
//! Why: staging through registers costs one register per element for the
//! prefetched tiles (the pipelined 128×256 bf16 GEMM spilled) and a second
//! pass through the register file; `cp.async` lands the bytes in shared
//! memory while the tensor cores work on the previous slot.

use super::assign::Plan;
use ferrotile_ir::*;
use std::collections::HashMap;

/// Which loads fill shared-memory operand rings, grouped in classes, and each class's ring (see
/// the module doc).
#[derive(Clone, Debug, Default)]
pub struct AsyncPlan {
    /// Load result → class index.
    pub loads: HashMap<V, usize>,
    /// Loop-carried block argument → (class index, prefetch distance: how
    /// many iterations before its use the tile it holds was loaded).
    pub carried: HashMap<V, (usize, u32)>,
    /// Per class: bytes of one slot (the operand tile in its dtype).
    pub slot_bytes: Vec<u32>,
    /// Per class: slots in its ring (prefetch distance + 1).
    pub slots: Vec<u32>,
    /// `dot` results whose MMAs may stay in flight across the loop's back
    /// edge: both operands come from rings (with one slot more than the
    /// prefetch distance needs, for the tiles the in-flight MMA still
    /// reads), and the accumulator is a loop-carried value used only by this
    /// `dot`, whose result is used only as the next iteration's
    /// accumulator — so no other instruction touches those registers until
    /// the loop ends. Value: the carried accumulator.
    pub inflight: HashMap<V, V>,
    /// In-flight `dot`s ([`Self::inflight`]) of `cp.async` rings that do
    /// without the extra slot ([`late_prefetch`]): their loop issues the
    /// next tiles' copies after the MMA, once a barrier says every
    /// warpgroup has waited for the previous iteration's MMA — whose slots
    /// the copies then refill.
    pub late: std::collections::HashSet<V>,
    /// Per class: how a tile is laid out in its slot.
    pub layout: Vec<SlotLayout>,
    /// Per class: the TMA view its loads read (`load_block`s of a
    /// [`super::tma`] view into a swizzled slot: bulk tensor copies
    /// completing on a per-slot mbarrier), `None` for `cp.async` rings.
    pub tma: Vec<Option<V>>,
    /// Per class: its bulk copies round f32 elements to tf32 on the way
    /// (nearest; a `TFLOAT32` tensor map), for a `dot_tf32` — the slot then
    /// holds what the interpreter's rounding gives, with no pass over it.
    pub round_tf32: Vec<bool>,
    /// `trans(y)` results read straight from `y`'s slot, the other way
    /// round (value → `y`): a 16-bit swizzled slot holds a tile in 128-byte
    /// atoms along its contiguous dimension, which is K-major for one
    /// reading and N-major (B) or M-major (A) for the transposed one, so
    /// the transpose moves no data; likewise an `mma.sync` B whose padded
    /// slot holds it as `[N, K]` rows. No code is emitted for such a `trans`.
    pub flipped: HashMap<V, V>,
    /// Loads of loop-invariant operands (a `load_block` — or, with
    /// `PtxOptions::cp_invariant_slots`, the pointer load a view no tensor
    /// map describes was lowered to — before the loop whose `dot` runs
    /// inside it) that fill a one-slot class once. A bulk copy: the `dot`s
    /// wait on its mbarrier (at once after the first time), and the loop's
    /// exit waits too (a loop of no iterations). A `cp.async` (16-bit
    /// tiles): waited for, fenced and barriered once, before the loop
    /// ([`Self::invariant_cp`]).
    pub invariant: std::collections::HashSet<V>,
    /// Loop-invariant operands that would take `cp.async`-filled slots
    /// with `PtxOptions::cp_invariant_slots` (0 where it is on, or would
    /// change nothing).
    pub cp_invariant_candidates: u32,
    /// `cp.async` classes holding a `wgmma` B whose rows go into the slot
    /// in the interleaved K order of its K-interleaved register A
    /// ([`Plan::a_interleaved`], [`crate::ptx::fragments::interleaved_row`]),
    /// with the run.
    pub kperm: HashMap<usize, u32>,
}

/// The shared-memory layout of a ring slot: the one its `dot` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotLayout {
    /// `wgmma`'s 128-byte swizzled operand layout (`emit::stage_wgmma`) of
    /// `es`-byte elements; `transposed`: slot row `j` holds the tile's column
    /// `j` (tf32 B, which `wgmma` reads only K-major).
    Swizzled {
        /// Element size in bytes.
        es: u32,
        /// Slot row `j` holds the tile's column `j`.
        transposed: bool,
    },
    /// `mma.sync`'s: row `i` at `i · pitch` bytes, 16 bytes of padding per
    /// row so that `ldmatrix` reads are bank-conflict free (`emit::stage`).
    Padded {
        /// Bytes from one row to the next: the row's 16-bit elements plus 16 bytes of padding.
        pitch: u32,
    },
}

impl SlotLayout {
    /// A swizzled slot holding a 2-D tile of `shape`: its rows (along the
    /// tile's dimension 0, or 1 when `transposed`) and its columns, in
    /// elements (the columns run in 128-byte atoms); `None` for padded slots.
    pub fn rows_cols(self, shape: &[u32]) -> Option<(u32, u32)> {
        match self {
            SlotLayout::Swizzled { transposed, .. } if shape.len() == 2 => Some(if transposed { (shape[1], shape[0]) } else { (shape[0], shape[1]) }),
            _ => None,
        }
    }
}

impl AsyncPlan {
    /// `v` (or the tile it is read from) lies in a loop-invariant slot
    /// filled by `cp.async`.
    pub fn invariant_cp(&self, v: V) -> bool {
        let x = self.source(v);
        self.invariant.contains(&x) && self.class_of(x).is_some_and(|c| self.tma[c].is_none())
    }

    /// The class of a planned load or loop-carried value (a flipped `trans` counts as its source);
    /// `None` for other values.
    pub fn class_of(&self, v: V) -> Option<usize> {
        let v = self.source(v);
        self.loads.get(&v).copied().or_else(|| self.carried.get(&v).map(|c| c.0))
    }
    /// The ring value `v` reads: itself, or for a flipped `trans`, its
    /// input.
    pub fn source(&self, v: V) -> V {
        self.flipped.get(&v).copied().unwrap_or(v)
    }
    /// Shared memory the rings take, at the start of the kernel's shared
    /// memory.
    pub fn ring_bytes(&self) -> u32 {
        self.slot_bytes.iter().zip(&self.slots).map(|(b, n)| b * n).sum()
    }
    /// Offset of slot 0 of class `c`.
    pub fn slot0(&self, c: usize) -> u32 {
        self.slot_bytes[..c].iter().zip(&self.slots).map(|(b, n)| b * n).sum()
    }
}

#[derive(Default)]
struct Defs<'k> {
    /// value → (defining op, block index of that op's block)
    def: HashMap<V, (&'k Op, usize)>,
    /// for-body block argument → (the `for` op, carried index, block index
    /// of the `for`'s block, block index of its body)
    arg: HashMap<V, (&'k Op, usize, usize, usize)>,
    uses: HashMap<V, usize>,
    /// value → the ops that read it (once per operand slot)
    users: HashMap<V, Vec<&'k Op>>,
    /// every `dot`, with the block index it sits in, in program order
    dots: Vec<(&'k Op, usize)>,
    /// block index → the index of the block it is nested in
    parent: HashMap<usize, usize>,
    /// the block indices of `for` bodies
    loop_body: std::collections::HashSet<usize>,
}

/// Whether block `blk` is a loop body or nested in one.
fn in_loop(d: &Defs, mut blk: usize) -> bool {
    loop {
        if d.loop_body.contains(&blk) {
            return true;
        }
        match d.parent.get(&blk) {
            Some(&p) => blk = p,
            None => return false,
        }
    }
}

fn index_block<'k>(b: &'k Block, id: usize, next: &mut usize, d: &mut Defs<'k>) {
    for op in &b.ops {
        for r in &op.results {
            d.def.insert(*r, (op, id));
        }
        for o in op.kind.operands() {
            *d.uses.entry(o).or_default() += 1;
            d.users.entry(o).or_default().push(op);
        }
        if matches!(op.kind, OpKind::Dot { .. }) {
            d.dots.push((op, id));
        }
        match &op.kind {
            OpKind::For { body, .. } => {
                *next += 1;
                let bid = *next;
                d.parent.insert(bid, id);
                d.loop_body.insert(bid);
                for (i, a) in body.args.iter().enumerate().skip(1) {
                    d.arg.insert(*a, (op, i - 1, id, bid));
                }
                index_block(body, bid, next, d);
            }
            OpKind::If { then_, else_, .. } => {
                for blk in [then_, else_] {
                    *next += 1;
                    let bid = *next;
                    d.parent.insert(bid, id);
                    index_block(blk, bid, next, d);
                }
            }
            _ => {}
        }
    }
}

fn is_zero(d: &Defs, v: V) -> bool {
    match d.def.get(&v).map(|(op, _)| &op.kind) {
        Some(OpKind::Const(Lit::Float(x))) => *x == 0.0 && x.is_sign_positive(),
        Some(OpKind::Const(Lit::Int(0))) => true,
        Some(OpKind::Splat { x, .. } | OpKind::Broadcast { x, .. } | OpKind::Cast { x, .. }) => is_zero(d, *x),
        _ => false,
    }
}

/// The ring slot layout of a `wgmma` operand (`is_b`: the dot's B) of
/// `es`-byte elements and tile `shape`, whose loads read a TMA view with
/// unit-stride dimension `view_inner` (`None`: not a TMA view). Each
/// operand lies in shared memory as its source stores it where `wgmma` can
/// read that, so that a bulk copy brings a tile as it is:
/// - A is K-major (row `i` of the slot is row `i` of the tile), or for a
///   16-bit A from a transposed view (`view(a, [m, k], [1, lda])`: a
///   column-major A, or the swapped product's Bᵀ) M-major (`transposed`:
///   slot row `j` holds the tile's column `j`, 64-row atoms along M);
///   tf32 and 8-bit A only K-major (`wgmma` reads them in no other layout).
/// - B is N-major (as stored) for 16-bit row-major sources, K-major
///   (`transposed`) for tf32 and 8-bit (i8, fp8) — the only B layout
///   `wgmma` reads for them —,
///   for 16-bit B from a transposed view (a column-major B), and for a B
///   narrower than one 128-byte atom row of N (N-major needs whole atoms;
///   K-major takes any N in steps of 8).
pub fn wgmma_slot(es: u32, is_b: bool, view_inner: Option<usize>, shape: &[u32]) -> SlotLayout {
    let transposed =
        if is_b { es != 2 || view_inner == Some(0) || shape.get(1).is_some_and(|n| !(n * es).is_multiple_of(128)) } else { es == 2 && view_inner == Some(0) };
    SlotLayout::Swizzled { es, transposed }
}

/// The `dot` B operands that arrive K-major: 16-bit tiles block-loaded
/// (directly, or as a loop-carried value whose initial value is) from a
/// TMA view whose unit stride is on K (a column-major B), and transposes
/// of tiles loaded along N — or may be placed so: tiles computed in
/// registers (no load, no `trans`, no loop-carried value: never a ring
/// slot), which the emitter stages K-major where N is narrower than a
/// 128-byte atom (attention backward's `dSᵀ` as the B of `dQᵀ = Kᵀ·dSᵀ`
/// at 32 query rows a step) — and 16-bit tiles loaded (directly, or as a
/// loop-carried value whose initial value is) through a pointer tile
/// `along_k` says runs along K. `wgmma` takes
/// such a B at any N in steps of 8 (`assign`), where an N-major one needs
/// whole 64-column atoms.
pub fn kmajor_b_sources(k: &Kernel, tma_views: &HashMap<V, super::tma::TmaView>, along_k: &dyn Fn(V) -> bool) -> std::collections::HashSet<V> {
    let mut d = Defs::default();
    let mut next = 0;
    index_block(&k.body, 0, &mut next, &mut d);
    d.dots
        .iter()
        .filter_map(|(op, _)| match &op.kind {
            OpKind::Dot { b, .. } => Some(*b),
            _ => None,
        })
        .filter(|b| k.ty(*b).elem().is_some_and(|e| matches!(e.dtype().size_bytes(), 1 | 2)))
        .filter(|b| {
            // (computed 16-bit: staged from registers in the layout the
            // emitter picks — `PtxWriter::dot_wgmma`; 8-bit B are staged
            // K-major always, in `assign::kmajor_b_layout`)
            let computed = k.ty(*b).elem().is_some_and(|e| e.dtype().size_bytes() == 2)
                && !d.arg.contains_key(b)
                && d.def.get(b).is_some_and(|(op, _)| !matches!(op.kind, OpKind::LoadBlock { .. } | OpKind::Load { .. } | OpKind::Trans { .. }));
            // (`trans(y)` of a tile read along its rows arrives K-major: the
            // slot of `y` read the other way — [`AsyncPlan::flipped`])
            let (src, flip) = trans_source(&d, *b).map_or((*b, false), |y| (y, true));
            let init = match d.arg.get(b).map(|(fop, i, _, _)| (&fop.kind, *i)) {
                Some((OpKind::For { inits, .. }, i)) => inits[i],
                _ => *b,
            };
            let loaded = d.def.get(&init).is_some_and(|(op, _)| matches!(op.kind, OpKind::Load { ptr, .. } if along_k(ptr)));
            computed || loaded || source_view(&d, src).and_then(|v| tma_views.get(&v)).is_some_and(|t| (t.inner == 0) != flip)
        })
        .collect()
}

/// Whether bulk tensor copies can fill a slot of this layout with a tile
/// of this shape from a view whose unit-stride dimension is `view_inner`:
/// a bulk copy writes 128-byte rows of the view's contiguous dimension, in
/// boxes of at most 256 rows, into `wgmma`'s swizzled layout only — so the
/// slot's rows must run along that dimension (a transposed slot for a
/// transposed view), in whole 128-byte atoms.
pub fn tma_slot(lay: SlotLayout, shape: &[u32], view_inner: usize) -> bool {
    let SlotLayout::Swizzled { es, transposed } = lay else { return false };
    let Some((rows, cols)) = lay.rows_cols(shape).filter(|_| transposed == (view_inner == 0)) else { return false };
    (cols * es) % 128 == 0 && rows <= 256
}

/// `x = trans(y)` (a 2-D transpose, read once) → `y`.
fn trans_source(d: &Defs, x: V) -> Option<V> {
    match &d.def.get(&x)?.0.kind {
        OpKind::Trans { x: y, perm } if perm.as_slice() == [1, 0] && d.uses.get(&x) == Some(&1) => Some(*y),
        _ => None,
    }
}

/// Whether one swizzled slot can serve every use of `v`: each is an A or
/// B operand (not both of one `dot`, not the accumulator) of a `wgmma`
/// dot, directly or through a `trans` read once by such a dot.
fn shared_slot_ok(k: &Kernel, d: &Defs, layouts: &Plan, v: V) -> bool {
    let wgmma_use = |op: &Op, x: V| match &op.kind {
        OpKind::Dot { a, b, acc, .. } if (*a == x) != (*b == x) && *acc != x => {
            let out: Option<Vec<u32>> = k.ty(op.results[0]).shape().iter().map(|s| s.known().map(|y| y as u32)).collect();
            out.and_then(|o| layouts.mma(&o)).is_some_and(|g| g.wgmma)
        }
        _ => false,
    };
    d.users.get(&v).is_some_and(|users| {
        users.iter().all(|op| match &op.kind {
            OpKind::Trans { perm, .. } if perm.as_slice() == [1, 0] => {
                let r = op.results[0];
                d.uses.get(&r) == Some(&1) && d.users.get(&r).is_some_and(|u| u.iter().all(|o| wgmma_use(o, r)))
            }
            _ => wgmma_use(op, v),
        })
    })
}

/// The values one swizzled slot would serve in more than one reading — read
/// more than once, or through a `trans` — all of them `wgmma` operand
/// readings (`shared_slot_ok`): what `compile.rs` keeps as bulk-copied
/// block loads for [`AsyncPlan::flipped`] slots.
pub fn shared_slot_sources(k: &Kernel, layouts: &Plan) -> std::collections::HashSet<V> {
    let mut d = Defs::default();
    let mut next = 0;
    index_block(&k.body, 0, &mut next, &mut d);
    let read_transposed = |v: V| d.users.get(&v).is_some_and(|u| u.iter().any(|op| matches!(op.kind, OpKind::Trans { .. })));
    d.def.keys().copied().filter(|&v| (d.uses.get(&v) != Some(&1) || read_transposed(v)) && shared_slot_ok(k, &d, layouts, v)).collect()
}

/// The block of `x`'s definition when it is a load in a block enclosing
/// `blk` through a `for` that sits in that same block: a tile loaded once
/// before the loop whose `dot` reads it. (The loop's exit then waits for
/// the copy, which covers a loop of no iterations; a load before an `if`
/// would leave the copy unwaited when the branch is not taken.)
fn invariant_load(d: &Defs, x: V, blk: usize) -> Option<usize> {
    let (op, home) = d.def.get(&x)?;
    if !matches!(op.kind, OpKind::LoadBlock { .. } | OpKind::Load { .. }) || *home == blk {
        return None;
    }
    let mut b = blk;
    while let Some(&p) = d.parent.get(&b) {
        if p == *home {
            return d.loop_body.contains(&b).then_some(*home);
        }
        b = p;
    }
    None
}

/// The loop-invariant A operands that go to slots: per block of `dot`s,
/// the 16-bit TMA-loaded invariant A tiles of its `wgmma` dots, when
/// together they would hold more than `a_regs` (32 by default) registers
/// per thread as register A fragments (below that the register path wins:
/// no shared-memory reads; above it, they spill — attention's backward at
/// d128).
fn invariant_a_to_slots(k: &Kernel, d: &Defs, layouts: &Plan, tma_views: &HashMap<V, super::tma::TmaView>, a_regs: u32) -> std::collections::HashSet<V> {
    let mut per_block: HashMap<usize, (u32, Vec<V>)> = HashMap::new();
    for (op, blk) in &d.dots {
        let OpKind::Dot { a, b, .. } = &op.kind else { continue };
        let out: Option<Vec<u32>> = k.ty(op.results[0]).shape().iter().map(|s| s.known().map(|y| y as u32)).collect();
        let Some(g) = out.and_then(|o| layouts.mma(&o)).filter(|g| g.wgmma) else { continue };
        let (src, _) = trans_source(d, *a).map_or((*a, false), |y| (y, true));
        if a == b || k.ty(src).elem().is_none_or(|e| e.dtype().size_bytes() != 2) || invariant_load(d, src, *blk).is_none() {
            continue;
        }
        // (a bulk copy, or a pointer load `cp.async` can copy)
        let tma = source_view(d, src).and_then(|v| tma_views.get(&v)).is_some();
        let cp = matches!(d.def.get(&src).map(|(o, _)| &o.kind), Some(OpKind::Load { other, .. }) if other.is_none_or(|o| is_zero(d, o)));
        if !tma && !cp {
            continue;
        }
        let elems: u32 = k.ty(src).shape().iter().map(|s| s.known().unwrap_or(0) as u32).product();
        let e = per_block.entry(*blk).or_default();
        if !e.1.contains(&src) {
            e.0 += elems * 2 / (g.wm * 32);
            e.1.push(src);
        }
    }
    per_block.into_values().filter(|(bytes, _)| *bytes > 4 * a_regs).flat_map(|(_, vs)| vs).collect()
}

/// The block loads that stay register A: 16-bit A operands of `wgmma`
/// dots, loaded before the loop each such dot sits in, that
/// [`invariant_a_to_slots`] leaves in registers (within `a_regs`), and read
/// by nothing else. No copy fills a slot for them, so the caller lowers
/// them to pointer loads, which load whole runs of the fragments' layout
/// at once (kept as block loads without a ring, they would load element
/// by element: attention's Q tile, 64 scalar loads per thread at d64).
pub fn register_a_invariants(k: &Kernel, layouts: &Plan, tma_views: &HashMap<V, super::tma::TmaView>, a_regs: u32) -> std::collections::HashSet<V> {
    let mut d = Defs::default();
    let mut next = 0;
    index_block(&k.body, 0, &mut next, &mut d);
    let slots = invariant_a_to_slots(k, &d, layouts, tma_views, a_regs);
    let mut reads: HashMap<V, usize> = HashMap::new();
    for (op, blk) in &d.dots {
        let OpKind::Dot { a, b, .. } = &op.kind else { continue };
        let out: Option<Vec<u32>> = k.ty(op.results[0]).shape().iter().map(|s| s.known().map(|y| y as u32)).collect();
        let wgmma = out.and_then(|o| layouts.mma(&o)).is_some_and(|g| g.wgmma);
        let block_load = matches!(d.def.get(a).map(|(o, _)| &o.kind), Some(OpKind::LoadBlock { .. }));
        let two_bytes = k.ty(*a).elem().is_some_and(|e| e.dtype().size_bytes() == 2);
        if wgmma && a != b && block_load && two_bytes && !slots.contains(a) && invariant_load(&d, *a, *blk).is_some() {
            *reads.entry(*a).or_default() += 1;
        }
    }
    reads.into_iter().filter(|(v, n)| d.uses.get(v) == Some(n)).map(|(v, _)| v).collect()
}

/// How a ring load copies its tile.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    CpAsync,
    Tma(V),
}

/// A load that can be a `cp.async` (or, from a TMA view into a swizzled
/// slot, a bulk tensor copy) into an operand slot, in block `blk`.
/// `shared`: `v` may have several uses ([`shared_slot_ok`], checked by
/// the caller).
fn async_load(k: &Kernel, d: &Defs, v: V, blk: usize, shape: &[u32], tma: &dyn Fn(V) -> bool, shared: bool) -> Option<Via> {
    let (op, b) = d.def.get(&v)?;
    let sh: Option<Vec<u32>> = k.ty(v).shape().iter().map(|x| x.known().map(|y| y as u32)).collect();
    if *b != blk || (!shared && d.uses.get(&v) != Some(&1)) || sh.as_deref() != Some(shape) {
        return None;
    }
    match &op.kind {
        OpKind::Load { other, .. } => other.is_none_or(|o| is_zero(d, o)).then_some(Via::CpAsync),
        OpKind::LoadBlock { view, .. } => tma(*view).then_some(Via::Tma(*view)),
        _ => None,
    }
}

/// The view a `load_block` producing `x` reads — directly, or for a
/// loop-carried value, the one its initial value's load reads.
fn source_view(d: &Defs, x: V) -> Option<V> {
    let x = match d.arg.get(&x) {
        Some((fop, i, _, _)) => match &fop.kind {
            OpKind::For { inits, .. } => inits[*i],
            _ => return None,
        },
        None => x,
    };
    match &d.def.get(&x)?.0.kind {
        OpKind::LoadBlock { view, .. } => Some(*view),
        _ => None,
    }
}

/// `invariant_slots`: [`AsyncPlan::invariant`] classes may be made
/// (`PtxOptions::invariant_slots`, and no warp specialization).
/// `cp_invariant`: such classes may also be filled by `cp.async`, for
/// 16-bit tiles no tensor map describes (`PtxOptions::cp_invariant_slots`);
/// where it is false, [`AsyncPlan::cp_invariant_candidates`] counts the
/// operands it would move.
/// `a_regs`: the register-A budget of invariant A tiles (`PtxOptions::invariant_a_regs`).
pub fn plan(k: &Kernel, layouts: &Plan, tma_views: &HashMap<V, super::tma::TmaView>, invariant_slots: bool, cp_invariant: bool, a_regs: u32) -> AsyncPlan {
    let mut d = Defs::default();
    let mut next = 0;
    index_block(&k.body, 0, &mut next, &mut d);
    let mut out = AsyncPlan::default();
    let invariant_a = if invariant_slots { invariant_a_to_slots(k, &d, layouts, tma_views, a_regs) } else { Default::default() };
    for (op, blk) in d.dots.clone() {
        let OpKind::Dot { a, b, acc, precision } = &op.kind else { continue };
        let (a, b, acc, precision) = (*a, *b, *acc, *precision);
        let out_shape: Option<Vec<u32>> = k.ty(op.results[0]).shape().iter().map(|x| x.known().map(|y| y as u32)).collect();
        let Some(out_shape) = out_shape else { continue };
        let Some(g) = layouts.mma(&out_shape) else { continue };
        // (operands fed from registers, K interleaved: no ring)
        if layouts.register_operands(&out_shape) {
            continue;
        }
        // f16/bf16, and tf32, i8 and fp8 on wgmma (mma.sync rounds tf32
        // operands in registers and stages i8 B transposed byte by byte)
        let es = match k.ty(a).elem().map(|e| e.dtype()) {
            Some(DType::F16 | DType::BF16) => 2,
            Some(DType::F32) if g.wgmma => 4,
            Some(DType::I8 | DType::F8E4M3 | DType::F8E5M2) if g.wgmma => 1,
            _ => continue,
        };
        let first_class = out.slot_bytes.len();
        for x in [a, b] {
            if a == b {
                continue;
            }
            // (`trans(y)`, or a tile with several uses: one slot read each
            // way — 16-bit `wgmma` operands only)
            let (src, flip) = match trans_source(&d, x) {
                Some(y) => (y, true),
                None => (x, false),
            };
            // (a 16-bit `mma.sync` B read once through `trans` of a tile
            // read once: its padded slot holds the tile as stored, rows
            // along N, and `ldmatrix` reads it without `.trans` — the
            // transposed views `lower_views` loads in storage order)
            let mma_flip = !g.wgmma && es == 2 && x == b && flip && d.uses.get(&src) == Some(&1);
            let shared = (flip || d.uses.get(&x) != Some(&1)) && !mma_flip;
            // (8-bit operands — i8, fp8 —: only a B read through `trans` of
            // a tile stored along K; `wgmma` reads them K-major only)
            let kmajor_byte = es == 1 && x == b && flip && d.uses.get(&src) == Some(&1);
            if shared && !(g.wgmma && (es == 2 || kmajor_byte) && shared_slot_ok(k, &d, layouts, src)) {
                continue;
            }
            if let Some(c) = out.class_of(src) {
                // (a second reading of a tile already in a ring)
                if flip && matches!(out.layout[c], SlotLayout::Swizzled { .. }) {
                    out.flipped.insert(x, src);
                }
                continue;
            }
            let x_dot = x;
            let x = src;
            let Some(shape): Option<Vec<u32>> = k.ty(x).shape().iter().map(|s| s.known().map(|y| y as u32)).collect() else { continue };
            if shape.len() != 2 {
                continue;
            }
            let (lay, bytes) = if g.wgmma {
                let inner = source_view(&d, x).and_then(|v| tma_views.get(&v)).map(|t| t.inner);
                let lay = if shared {
                    // the tile as its source stores it, in whole atoms
                    // along its contiguous dimension (read K-major one way,
                    // N- or M-major the other; 8-bit only K-major)
                    if es == 1 && inner == Some(0) {
                        continue;
                    }
                    let lay = SlotLayout::Swizzled { es, transposed: inner == Some(0) };
                    if lay.rows_cols(&shape).is_none_or(|(_, cols)| !(cols * es).is_multiple_of(128)) {
                        continue;
                    }
                    lay
                } else {
                    // (a 16-bit B read in columns — pointers contiguous
                    // along K, `assign::load_columns` — lies in the slot as
                    // a view with that unit stride would, K-major: its runs
                    // are pieces of slot rows, and `wgmma` takes a K-major
                    // B at any N in steps of 8. An A read in columns keeps
                    // its K-major slot: an M-major one needs whole 64-row
                    // atoms)
                    let stored = inner.or_else(|| (es == 2 && x == b && layouts.reads_columns(&shape)).then_some(0));
                    wgmma_slot(es, x == b, stored, &shape)
                };
                (lay, shape[0] * shape[1] * es)
            } else {
                let pitch = shape[1] * 2 + 16;
                (SlotLayout::Padded { pitch }, shape[0] * pitch)
            };
            let tma_ok = |view: V| tma_views.get(&view).is_some_and(|t| tma_slot(lay, &shape, t.inner));
            // (f32 tiles of a dot that rounds to tf32: the bulk copy rounds)
            let round = es == 4 && precision == DotPrecision::Tf32;
            // (the tile the dots read may have several readings; the
            // chain's other links are read once, by the yield)
            let single = |v: V| if shared && v == x { shared_slot_ok(k, &d, layouts, v) } else { d.uses.get(&v) == Some(&1) };
            // a loop-invariant tile: one slot, filled once before the loop
            // (by a bulk copy, or by `cp.async` for 16-bit tiles: an f32
            // slot for `dot_tf32` would need its rounding pass once)
            let invariant = invariant_slots
                && g.wgmma
                && (x_dot == b || invariant_a.contains(&x))
                && invariant_load(&d, x, blk).is_some_and(|home| match async_load(k, &d, x, home, &shape, &tma_ok, shared) {
                    Some(Via::Tma(_)) => true,
                    Some(Via::CpAsync) if es == 2 => {
                        out.cp_invariant_candidates += !cp_invariant as u32;
                        cp_invariant
                    }
                    _ => false,
                });
            if invariant {
                let Some(via) = async_load(k, &d, x, d.def[&x].1, &shape, &tma_ok, shared) else { continue };
                let c = out.slot_bytes.len();
                out.slot_bytes.push(bytes);
                out.slots.push(1);
                out.layout.push(lay);
                out.tma.push(match via {
                    Via::Tma(view) => Some(view),
                    Via::CpAsync => None,
                });
                out.round_tf32.push(round && matches!(via, Via::Tma(_)));
                out.loads.insert(x, c);
                out.invariant.insert(x);
                if flip {
                    out.flipped.insert(x_dot, x);
                }
            } else if let Some(via) = async_load(k, &d, x, blk, &shape, &tma_ok, shared) {
                let c = out.slot_bytes.len();
                out.slot_bytes.push(bytes);
                // (outside every loop the copy runs once: one slot — a key
                // block peeled off before an attention loop, the last one
                // after it)
                out.slots.push(if in_loop(&d, blk) { 2 } else { 1 });
                out.layout.push(lay);
                out.tma.push(match via {
                    Via::Tma(view) => Some(view),
                    Via::CpAsync => None,
                });
                out.round_tf32.push(round && matches!(via, Via::Tma(_)));
                out.loads.insert(x, c);
                if flip {
                    out.flipped.insert(x_dot, x);
                }
            } else if let Some((fop, _, parent, body)) = d.arg.get(&x).copied() {
                let OpKind::For { inits, body: fb, .. } = &fop.kind else { continue };
                let Some(OpKind::Yield(ys)) = fb.ops.last().map(|o| &o.kind) else { continue };
                if body != blk {
                    continue;
                }
                // the chain x = arg_0 → yield arg_1 → ... → yield load: every
                // link a single-use carried value of this loop with a ring
                // load as its initial value and an unused final value
                // (every load of the chain copies the same way)
                let mut chain = vec![];
                let mut cur = x;
                let mut via = None;
                let mut same = |v: Option<Via>| match (v, via) {
                    (None, _) => false,
                    (Some(v), None) => {
                        via = Some(v);
                        true
                    }
                    (Some(v), Some(w)) => v == w,
                };
                let ok = loop {
                    let Some((f2, i, _, _)) = d.arg.get(&cur).copied() else { break false };
                    if !std::ptr::eq(f2, fop)
                        || !single(cur)
                        || d.uses.contains_key(&fop.results[i])
                        || !same(async_load(k, &d, inits[i], parent, &shape, &tma_ok, false))
                    {
                        break false;
                    }
                    chain.push((cur, inits[i]));
                    let y = ys[i];
                    if let Some(v) = async_load(k, &d, y, body, &shape, &tma_ok, false) {
                        if !same(Some(v)) {
                            break false;
                        }
                        chain.push((y, y));
                        break true;
                    }
                    cur = y;
                };
                if ok {
                    out.tma.push(match via {
                        Some(Via::Tma(view)) => Some(view),
                        _ => None,
                    });
                    out.round_tf32.push(round && matches!(via, Some(Via::Tma(_))));
                    let c = out.slot_bytes.len();
                    let depth = chain.len() as u32 - 1;
                    out.slot_bytes.push(bytes);
                    out.slots.push(depth + 1);
                    out.layout.push(lay);
                    for (j, (v, init)) in chain.iter().enumerate() {
                        out.loads.insert(*init, c);
                        if v != init {
                            out.carried.insert(*v, (c, depth - j as u32));
                        }
                    }
                    if flip {
                        out.flipped.insert(x_dot, x);
                    }
                }
            }
        }
        // wgmma with both operands carried through rings, the accumulator a
        // private loop-carried value: the MMA may stay in flight
        let res = op.results[0];
        // (not for a slot another reading shares)
        let both = g.wgmma && [a, b].iter().all(|x| out.carried.contains_key(x) && d.uses.get(x) == Some(&1)) && out.slot_bytes.len() == first_class + 2;
        if both && private_acc(&d, acc, res, blk) {
            out.slots[first_class] += 1;
            out.slots[first_class + 1] += 1;
            out.inflight.insert(res, acc);
        }
    }
    out.kperm = kperm_classes(k, layouts, &out);
    out
}

/// The `cp.async` classes whose copies put B's rows in the interleaved K
/// order of the `wgmma` dots that read A K-interleaved from registers
/// ([`Plan::a_interleaved`]), with the run: every reading of the class is
/// the B of such a dot with that run, its slot is a 16-bit swizzled one
/// (N-major: each copy moves a piece of one row to the row's place;
/// K-major — a B narrower than an atom, or arriving transposed —: its
/// elements are copied one by one already, each to its place), no TMA, no
/// flipped reading, no loop-invariant copy.
fn kperm_classes(k: &Kernel, layouts: &Plan, p: &AsyncPlan) -> HashMap<usize, u32> {
    let dims = |v: V| -> Option<Vec<u32>> { k.ty(v).shape().iter().map(|d| d.known().map(|x| x as u32)).collect() };
    let mut want: HashMap<usize, Option<u32>> = HashMap::new();
    k.walk(&mut |op| {
        let OpKind::Dot { a, b, .. } = &op.kind else { return };
        let run = dims(*a).and_then(|s| layouts.a_interleaved(&s));
        for (x, r) in [(*a, None), (*b, run)] {
            let Some(c) = p.class_of(x) else { continue };
            let ok = r.is_some()
                && !p.flipped.contains_key(&x)
                && p.tma[c].is_none()
                && matches!(p.layout[c], SlotLayout::Swizzled { es: 2, .. })
                && !p.invariant.iter().any(|v| p.class_of(*v) == Some(c));
            let e = want.entry(c).or_insert(if ok { r } else { None });
            if *e != r || !ok {
                *e = None;
            }
        }
    });
    want.into_iter().filter_map(|(c, r)| Some((c, r?))).collect()
}

/// Whether `acc` is a value carried by the loop whose body is block `blk`,
/// read only by the `dot` producing `res`, which is read only by the
/// body's yield into `acc` (an accumulator nothing else touches until the
/// loop ends).
fn private_acc(d: &Defs, acc: V, res: V, blk: usize) -> bool {
    d.arg.get(&acc).is_some_and(|(fop, i, _, body)| {
        let OpKind::For { body: fb, .. } = &fop.kind else { return false };
        let y = match fb.ops.last().map(|o| &o.kind) {
            Some(OpKind::Yield(ys)) => ys[*i],
            _ => return false,
        };
        *body == blk && y == res && d.uses.get(&acc) == Some(&1) && d.uses.get(&res) == Some(&1)
    })
}

/// `wgmma` `dot`s whose A is computed in the loop body (16-bit: the
/// register-A form) and whose B arrives through a ring of its own, with a
/// private accumulator ([`private_acc`]), join [`AsyncPlan::inflight`]:
/// the MMA stays in flight across the back edge, under the next
/// iteration's work up to its own `dot`, where the emitter waits for it
/// before A's registers are written again (`emit::wgmma`: one group in
/// flight, waited before the pack of the next A, not after the issue). B's
/// ring takes one slot more (the in-flight MMA still reads the previous
/// slot while the next copies land). What it is for: a loop whose A is
/// arithmetic (RMSNorm fused into a GEMM, a dequantized or rescaled
/// operand) runs that arithmetic while the tensor cores work, where the
/// MMA was waited for inside its own iteration. Guarantees: only dots
/// with no ring for A, B's class read by this dot alone and not
/// loop-invariant; the emitter falls back to waiting inside the
/// iteration where A is not fed from registers after all (staged).
/// `PtxOptions::inflight_register_a`.
pub fn register_a_inflight(k: &Kernel, layouts: &Plan, p: &mut AsyncPlan) {
    let mut d = Defs::default();
    let mut next = 0;
    index_block(&k.body, 0, &mut next, &mut d);
    for (op, blk) in d.dots.clone() {
        let OpKind::Dot { a, b, acc, .. } = &op.kind else { continue };
        let (a, b, acc, res) = (*a, *b, *acc, op.results[0]);
        let shape: Option<Vec<u32>> = k.ty(res).shape().iter().map(|x| x.known().map(|y| y as u32)).collect();
        if !shape.and_then(|s| layouts.mma(&s)).is_some_and(|g| g.wgmma) || p.inflight.contains_key(&res) {
            continue;
        }
        if !matches!(k.ty(a).elem().map(|e| e.dtype()), Some(DType::F16 | DType::BF16)) {
            continue;
        }
        // (A: a value of this body, in no ring)
        let a_here = d.def.get(&a).is_some_and(|(_, bb)| *bb == blk) && p.class_of(a).is_none() && d.loop_body.contains(&blk);
        // (B: carried through a ring of its own, read once)
        let Some(cb) = p.class_of(b) else { continue };
        let b_ring = p.carried.contains_key(&b) && d.uses.get(&b) == Some(&1) && !p.invariant.iter().any(|v| p.class_of(*v) == Some(cb));
        let b_alone = d.dots.iter().all(|(o, _)| {
            std::ptr::eq(*o, op) || !matches!(&o.kind, OpKind::Dot { a: a2, b: b2, .. } if p.class_of(*a2) == Some(cb) || p.class_of(*b2) == Some(cb))
        });
        if a_here && b_ring && b_alone && private_acc(&d, acc, res, blk) {
            p.slots[cb] += 1;
            p.inflight.insert(res, acc);
        }
    }
}

/// Shared memory of an sm_90 SM, and what the driver reserves per block.
const SMEM_PER_SM: u32 = 228 * 1024;
const SMEM_PER_BLOCK_RESERVED: u32 = 1024;

/// Which in-flight `dot`s give up their rings' extra slot
/// ([`AsyncPlan::late`]), for kernels of `num_warps` warps without a
/// producer warp. An in-flight MMA still reads the previous iteration's
/// slots while this iteration's copies are issued, so its rings hold one
/// slot more than the prefetch distance needs; issuing the copies after
/// the MMA instead, behind one more barrier per iteration, lets them refill
/// those slots. Taken for `cp.async` rings (bulk copies complete on
/// mbarriers, a schedule of their own) when the smaller rings let more
/// programs share an SM — by shared memory, and by registers as far as the
/// accumulator (plus 48 registers for addresses and predicates) shows it:
/// a 128×128×64 bf16 ring GEMM on 8 warps takes 96 KB instead of 128 KB,
/// two programs per SM instead of one. Guarantees: every class keeps at
/// least the prefetch distance + 1 slots.
pub fn late_prefetch(k: &Kernel, p: &mut AsyncPlan, num_warps: u32) {
    let threads = num_warps * 32;
    let blocks = |bytes: u32| SMEM_PER_SM / (bytes + SMEM_PER_BLOCK_RESERVED);
    let mut dots = vec![];
    k.walk(&mut |op| {
        if let OpKind::Dot { a, b, .. } = &op.kind {
            if p.inflight.contains_key(&op.results[0]) {
                let elems: u64 = k.ty(op.results[0]).shape().iter().map(|d| d.known().unwrap_or(0) as u64).product();
                dots.push((op.results[0], *a, *b, elems));
            }
        }
    });
    for (res, a, b, elems) in dots {
        let (Some(ca), Some(cb)) = (p.class_of(a), p.class_of(b)) else { continue };
        if ca == cb || p.tma[ca].is_some() || p.tma[cb].is_some() || p.slots[ca] < 3 || p.slots[cb] < 3 {
            continue;
        }
        let now = p.ring_bytes();
        let smaller = now - p.slot_bytes[ca] - p.slot_bytes[cb];
        let regs = ((elems / threads as u64) as u32 + 48).next_multiple_of(8);
        let by_regs = 65536 / (regs * threads);
        if blocks(smaller) > blocks(now) && by_regs > blocks(now) {
            p.slots[ca] -= 1;
            p.slots[cb] -= 1;
            p.late.insert(res);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_layouts_follow_the_source() {
        let sw = |es, transposed| SlotLayout::Swizzled { es, transposed };
        // A K-major, but M-major from a 16-bit transposed view; B K-major
        // for tf32, for transposed views and when narrower than an atom
        let (a, b) = ([128, 64], [64, 128]);
        assert_eq!(wgmma_slot(2, false, Some(1), &a), sw(2, false));
        assert_eq!(wgmma_slot(2, false, None, &a), sw(2, false));
        assert_eq!(wgmma_slot(2, false, Some(0), &a), sw(2, true));
        assert_eq!(wgmma_slot(4, false, Some(0), &[128, 32]), sw(4, false), "tf32 A is read K-major only");
        assert_eq!(wgmma_slot(2, true, Some(1), &b), sw(2, false));
        assert_eq!(wgmma_slot(2, true, None, &b), sw(2, false));
        assert_eq!(wgmma_slot(2, true, Some(0), &b), sw(2, true));
        assert_eq!(wgmma_slot(2, true, None, &[64, 16]), sw(2, true), "16 columns are not an atom row");
        assert_eq!(wgmma_slot(4, true, None, &b), sw(4, true));
        assert_eq!(wgmma_slot(4, false, Some(1), &[128, 32]), sw(4, false));
    }

    #[test]
    fn bulk_copies_fill_slots_whose_rows_run_along_the_view() {
        let sw = |es, transposed| SlotLayout::Swizzled { es, transposed };
        // 16-bit A 128×64: 128-byte rows along the view's unit stride
        assert!(tma_slot(sw(2, false), &[128, 64], 1));
        // a transposed view cannot fill a slot whose rows run the other way
        assert!(!tma_slot(sw(2, false), &[128, 64], 0));
        assert!(!tma_slot(sw(2, true), &[64, 128], 1));
        // an M-major A (Bᵀ of the swapped product, 64×128 from a view
        // whose unit stride is on M): 128 rows of K, one 64-element atom
        assert!(tma_slot(sw(2, true), &[64, 128], 0));
        // a 16-row K-major B (Aᵀ of the swapped product, K×N = 128×16)
        assert!(tma_slot(sw(2, true), &[128, 16], 0));
        // a column-major B (K×N = 64×256) into a K-major slot: 256 rows of K
        assert!(tma_slot(sw(2, true), &[64, 256], 0));
        assert!(!tma_slot(sw(2, true), &[64, 512], 0), "boxes have at most 256 rows");
        // tf32: 32 f32 per 128-byte row
        assert!(tma_slot(sw(4, false), &[128, 32], 1));
        assert!(tma_slot(sw(4, true), &[32, 128], 0));
        assert!(!tma_slot(sw(2, false), &[128, 32], 1), "64-byte rows are not a swizzle atom");
        assert!(!tma_slot(SlotLayout::Padded { pitch: 144 }, &[128, 64], 1));
    }
}
