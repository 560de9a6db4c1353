//! Layout assignment: which distributed layout each tile shape of a kernel
//! uses.
//!
//! Takes a specialized kernel, its warp count and the vector width of its
//! memory accesses. Produces a [`Plan`]: by default every shape gets the
//! canonical [`Blocked`] layout; a shape that is the result of `dot`s that
//! can run on tensor cores (`mma.sync`: f16/bf16 inputs, or f32 inputs with
//! tf32 precision; every dimension a multiple of the instruction tile times
//! the warp grid) gets the *mma accumulator layout* instead — a `Blocked`
//! layout with 2 consecutive columns per thread, 8×4 lanes and the warps in
//! a grid, which is exactly the register layout of the `m16n8` accumulator
//! fragments when rows are paired `(r, r + 8·warps_m)`.
//!
//! On sm_90 (`wgmma` on), f16/bf16 and tf32 dots whose shapes fit (see
//! [`wgmma_grid`]) get the accumulator layout Hopper's warpgroup MMAs write
//! ([`Blocked::wgmma_acc`]: every warp along M, 16 rows apart), with A in
//! shared memory in its natural row order — so a bulk tensor copy can
//! bring a whole A tile in one box. A tf32 dot's B tile shape also gets a
//! layout of its own ([`kmajor_b_layout`]): `wgmma` reads tf32 B only
//! K-major, so its elements are copied one by one into a transposed slot,
//! and this layout makes those copies bank-conflict free.
//!
//! Guarantees: the layout is a function of the shape alone, so every tile of
//! a shape shares it and elementwise ops, loop-carried values and the
//! epilogue of a GEMM never move data — the accumulator stays in the
//! registers `mma` writes across the whole K loop. Ops that need another
//! layout (loads of the dot operands, reductions) convert as before, and
//! index arithmetic feeding broadcasts is recomputed in place
//! (rematerialization, in the emitter) rather than converted.
//!
//! Why per shape and not per value: it keeps the emitter's invariant that
//! operands of elementwise ops share the result's layout without inserting
//! conversions; the cost is that other tiles of an accumulator's shape (the
//! output pointers and masks of the epilogue) use it too, which only narrows
//! their vector width to 2.

use crate::plan::layout::Blocked;
use ferrotile_ir::*;
use std::collections::{HashMap, HashSet};

/// Warp grid of an mma accumulator: `wm × wn` warps, each covering rows
/// `{8·wm·i + 8·warp_m + (0..8)}` and columns `{8·wn·j + 8·warp_n + (0..8)}`.
/// `wgmma`: the dot runs as Hopper warpgroup MMAs (`wgmma.mma_async`, sm_90a)
/// instead of per-warp `mma.sync`; then `wn == 1` and `wm` is the warp count
/// (a multiple of 4: whole warpgroups), and the accumulator takes the
/// layout `wgmma` writes ([`Blocked::wgmma_acc`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaGrid {
    /// Warps along M (rows).
    pub wm: u32,
    /// Warps along N (columns); 1 with `wgmma`.
    pub wn: u32,
    /// The dot runs as warpgroup MMAs (`wgmma`) rather than per-warp `mma.sync`.
    pub wgmma: bool,
}

/// The layout of every tile shape of a kernel (see the module doc), and why `dot`s missed the
/// faster paths.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    mma: HashMap<Vec<u32>, MmaGrid>,
    /// Operand tiles with a layout of their own ([`kmajor_b_layout`]).
    operand: HashMap<Vec<u32>, Blocked>,
    /// Shapes whose loads repeat addresses in runs along some dimension,
    /// with the run per dimension ([`load_runs`]).
    runs: HashMap<Vec<u32>, Vec<u32>>,
    /// 2-D shapes whose memory accesses run along dimension 0, with the
    /// widest vector they allow ([`load_columns`]).
    columns: HashMap<Vec<u32>, u32>,
    /// Result shapes of `mma.sync` dots that take both operands from
    /// registers, K interleaved ([`register_operand_dots`]).
    reg_operands: HashSet<Vec<u32>>,
    /// Shapes of computed `wgmma` A operands held K-interleaved, with
    /// their runs ([`computed_a_layouts`]).
    kperm: HashMap<Vec<u32>, u32>,
    /// Why a `dot` stays on the FMA path: (source line, reason), for
    /// `FERROTILE_EXPLAIN=1`.
    pub fma_reasons: Vec<(u32, String)>,
    /// Why a tensor-core `dot` runs on `mma.sync` although `wgmma` was
    /// asked for (sm_90): (source line, reason).
    pub no_wgmma_reasons: Vec<(u32, String)>,
}

impl Plan {
    /// The layout of tiles of `shape`.
    pub fn layout(&self, shape: &[u32], num_warps: u32, vec: u32) -> Blocked {
        match self.mma.get(shape) {
            Some(g) if g.wgmma => Blocked::wgmma_acc(shape, g.wm),
            Some(g) => Blocked::mma_acc(shape, g.wm, g.wn),
            None => match (self.operand.get(shape), self.runs.get(shape), self.columns.get(shape)) {
                (Some(b), _, _) => b.clone(),
                (None, Some(r), _) => Blocked::canonical_runs(shape, num_warps, vec, r),
                (None, None, Some(&w)) => Blocked::canonical_columns(shape, num_warps, w),
                (None, None, None) => Blocked::canonical(shape, num_warps, vec),
            },
        }
    }

    /// This plan with the runs of repeated load addresses of `k` kept in
    /// one thread ([`load_runs`]).
    pub fn with_load_runs(mut self, k: &Kernel, facts: &HashMap<V, crate::plan::axis::Facts>) -> Plan {
        self.runs = load_runs(k, facts);
        self
    }

    /// This plan with the shapes whose accesses run along dimension 0 read
    /// in columns ([`load_columns`]; `PtxOptions::column_layouts`).
    /// (After [`Self::with_load_runs`]: shapes with runs keep them.)
    pub fn with_load_columns(mut self, k: &Kernel, facts: &HashMap<V, crate::plan::axis::Facts>) -> Plan {
        self.columns = load_columns(k, facts, &self.runs);
        self
    }

    /// Whether tiles of `shape` take the column layout ([`load_columns`],
    /// which leaves out shapes with runs; an accumulator's or operand's
    /// layout comes first).
    pub fn reads_columns(&self, shape: &[u32]) -> bool {
        self.columns.contains_key(shape) && !self.mma.contains_key(shape) && !self.operand.contains_key(shape)
    }

    /// The warp grid when tiles of `shape` use the mma accumulator layout.
    pub fn mma(&self, shape: &[u32]) -> Option<MmaGrid> {
        self.mma.get(shape).copied()
    }

    /// The run of consecutive K each thread holds of A operands of shape
    /// `a` that `wgmma` reads from registers in the interleaved K order
    /// ([`computed_a_layouts`]): their dots' B slots hold B's rows in
    /// that order.
    pub fn a_interleaved(&self, a: &[u32]) -> Option<u32> {
        self.kperm.get(a).copied()
    }

    /// How many A shapes are held K-interleaved ([`Self::a_interleaved`]).
    pub fn interleaved_shapes(&self) -> usize {
        self.kperm.len()
    }

    /// Whether the `mma.sync` dots with an `out`-shaped result take both
    /// operands from registers, K interleaved ([`register_operand_dots`]):
    /// their operand loads fill no ring.
    pub fn register_operands(&self, out: &[u32]) -> bool {
        self.reg_operands.contains(out)
    }
}

/// The instruction's K for a dot of these operand types, if tensor cores
/// can run it: 16 for f16/bf16 (m16n8k16), 8 for tf32 (m16n8k8), 32 for
/// i8 (m16n8k32 on `mma.sync`, k32 on `wgmma`; s32 accumulators —
/// `PtxOptions::mma_i8`) and fp8 (k32, `wgmma` only).
pub fn mma_k(a: DType, precision: DotPrecision) -> Option<u32> {
    match (a, precision) {
        (DType::F16 | DType::BF16, _) => Some(16),
        (DType::F32, p) if p.is_tf32() => Some(8),
        (DType::I8, _) => Some(32),
        // (fp8: `wgmma` only — `plan`)
        (DType::F8E4M3 | DType::F8E5M2, _) => Some(32),
        _ => None,
    }
}

/// Split `num_warps` into a `wm × wn` grid over an `m × n` accumulator so
/// that each warp owns whole `16 × 8` tiles, favouring square warp tiles.
pub fn warp_grid(m: u32, n: u32, num_warps: u32) -> Option<MmaGrid> {
    let (mut wm, mut wn) = (1u32, 1u32);
    while wm * wn < num_warps {
        let can_m = m.is_multiple_of(16 * wm * 2);
        let can_n = n.is_multiple_of(8 * wn * 2);
        if can_m && (!can_n || m / wm >= n / wn) {
            wm *= 2;
        } else if can_n {
            wn *= 2;
        } else {
            return None;
        }
    }
    (m.is_multiple_of(16 * wm) && n.is_multiple_of(8 * wn)).then_some(MmaGrid { wm, wn, wgmma: false })
}

/// The warpgroup grid of a Hopper `wgmma` dot, if `m × k · k × n` with
/// `es`-byte operands (2: f16/bf16, 4: tf32) fits its shared-memory operand
/// layout: every warp along M (whole warpgroups, 16 rows per warp per
/// instruction pair), K in whole 128-byte swizzle atoms (64 16-bit or 32
/// tf32 elements), N in whole 64-column atoms — or, for a B that arrives
/// K-major (`kmajor_b`: a transposed view; tf32 always), any multiple of 8
/// —, at most 256 columns per instruction (wider N splits into
/// 256-column instructions).
pub fn wgmma_grid(m: u32, n: u32, k: u32, num_warps: u32, es: u32, kmajor_b: bool) -> Option<MmaGrid> {
    wgmma_misfit(m, n, k, num_warps, es, kmajor_b, 128 / es).is_none().then_some(MmaGrid { wm: num_warps, wn: 1, wgmma: true })
}

/// Why an `m × k · k × n` dot of `es`-byte operands at `num_warps` warps
/// cannot take `wgmma` (`None`: it can). `k_atom`: the multiple K must be —
/// one 128-byte swizzle atom (`128 / es`) for an A that may come from a
/// ring slot; one instruction's K (16) for a computed 16-bit A with an
/// N-major B: fed from registers, or staged into whole atoms of which it
/// fills the first columns.
pub fn wgmma_misfit(m: u32, n: u32, k: u32, num_warps: u32, es: u32, kmajor_b: bool, k_atom: u32) -> Option<String> {
    let atom = k_atom;
    // (tf32 and 8-bit — i8, fp8 — B are read K-major only: staged
    // transposed when they do not arrive so)
    let kmajor_b = kmajor_b || es != 2;
    // (N-major B: whole 64-column atoms; K-major: any `n8` instruction —
    // for 8-bit operands a multiple of 16: i8's instructions go n8, n16,
    // n24 and then in steps of 16)
    let step_n = if !kmajor_b {
        64
    } else if es == 1 {
        16
    } else {
        8
    };
    if !num_warps.is_multiple_of(4) {
        Some(format!("{num_warps} warps are not whole warpgroups (a multiple of 4)"))
    } else if !m.is_multiple_of(16 * num_warps) {
        Some(format!("M = {m} is not a multiple of 16 rows × {num_warps} warps"))
    } else if !k.is_multiple_of(atom) {
        let what = if atom * es == 128 { "one 128-byte swizzle atom of A" } else { "the instruction's K" };
        Some(format!("K = {k} is not a multiple of {atom} ({what})"))
    } else if !n.is_multiple_of(step_n) || (n > 256 && !n.is_multiple_of(256)) {
        let hint = if kmajor_b { "" } else { " (8 for a B that arrives K-major: a transposed view)" };
        Some(format!("N = {n} is not a multiple of {step_n} up to 256, or of 256 above{hint}"))
    } else {
        None
    }
}

/// The layout of a tf32 or 8-bit `wgmma` dot's B tile (`k × n`) on its way
/// into shared memory: `wgmma` reads those B only K-major (row `n` of the slot
/// holds column `n` of the tile), so each element moves on its own, and
/// lanes go 8 along N (fastest) by 4 along K, one element per thread per
/// repetition, warps along K first. A warp's copy then reads 8 consecutive
/// elements (one 32-byte sector) of each of 4 rows of B, and writes 32
/// distinct banks of the swizzled slot (8 rows × 4 columns of one 16-byte
/// chunk each) — the canonical layout (32 lanes along N) would put 16 lanes
/// on one bank.
pub fn kmajor_b_layout(shape: &[u32], num_warps: u32) -> Blocked {
    let (k, n) = (shape[0], shape[1]);
    let tk = 4.min(k);
    let tn = 32 / tk;
    let wk = (k / tk).clamp(1, num_warps);
    let wn = (num_warps / wk).min((n / tn).max(1));
    let wk = num_warps / wn; // leftover warps replicate along K
    Blocked::new(shape, vec![1, 1], vec![tk, tn], vec![wk, wn], &[1, 0], &[0, 1])
}

/// Result shapes of the `dot`s chained through registers: a `dot` whose A
/// is computed element by element (casts, arithmetic, selects) from
/// another `dot`'s result — attention's `P = exp(S − m)` feeding `P·V` —,
/// and that producer. Both get their rows split over the warps alike
/// (`mma.sync`: all warps along M), the dot-operand anchor that lets the
/// producer's accumulator registers be the consumer's A fragments.
fn chained_dot_shapes(k: &Kernel) -> (HashSet<Vec<u32>>, HashSet<V>) {
    let mut def: HashMap<V, &OpKind> = HashMap::new();
    // (an `if`'s results: the values its branches yield — masks that only
    // a loop's last iterations need run under one: `passes::branch_masks`)
    let mut joins: HashMap<V, Vec<V>> = HashMap::new();
    k.walk(&mut |op| {
        for r in &op.results {
            def.insert(*r, &op.kind);
        }
        if let OpKind::If { then_, else_, .. } = &op.kind {
            for (i, r) in op.results.iter().enumerate() {
                joins.insert(*r, [then_, else_].iter().filter_map(|b| b.yields().get(i).copied()).collect());
            }
        }
    });
    let shape = |v: V| -> Option<Vec<u32>> { k.ty(v).shape().iter().map(|d| d.known().map(|x| x as u32)).collect() };
    // the dot result `v` derives from, elementwise (or through a branch
    // yielding such values), at the same shape
    fn source(v: V, def: &HashMap<V, &OpKind>, joins: &HashMap<V, Vec<V>>, depth: u32) -> Option<V> {
        let kind = def.get(&v)?;
        if matches!(kind, OpKind::Dot { .. }) {
            return Some(v);
        }
        if depth == 0 {
            return None;
        }
        if let Some(ys) = joins.get(&v) {
            return ys.iter().find_map(|&y| source(y, def, joins, depth - 1));
        }
        if !kind.is_elementwise() {
            return None;
        }
        kind.operands().into_iter().find_map(|x| source(x, def, joins, depth - 1))
    }
    let (mut out, mut chained) = (HashSet::new(), HashSet::new());
    k.walk(&mut |op| {
        let OpKind::Dot { a, .. } = &op.kind else { return };
        let Some(src) = source(*a, &def, &joins, 16) else { return };
        let (Some(sa), Some(ss), Some(so)) = (shape(*a), shape(src), shape(op.results[0])) else { return };
        if sa == ss {
            out.insert(ss);
            out.insert(so);
            chained.insert(*a);
        }
    });
    (out, chained)
}

/// The `mma.sync` dots that take both operands from registers (16-bit
/// operands, K a multiple of 32), and the layouts of their operand shapes:
/// dots one of whose operands is *computed* — elementwise from loads (a
/// dequantized weight tile: `(q − z)·s` cast to bf16), not from another
/// dot's result — which `mma.sync` would otherwise stage from registers
/// into shared memory behind two CTA barriers every K step. Both operand
/// shapes then get the K-interleaved operand layouts
/// ([`Blocked::mma_a_operand`], [`Blocked::mma_b_operand`]: runs of
/// consecutive K per thread — 32 where the depth allows,
/// [`crate::ptx::fragments::operand_run`] —, the warps of the other grid dimension holding copies),
/// every tile of those shapes computes in place, and the fragments are
/// the operands' own registers ([`crate::ptx::fragments::mma_a_interleaved`]).
/// A loaded operand of such a dot is loaded by each warp that needs it
/// (L1 serves the copies) instead of once into a ring; a computed one
/// must not be held by several warps (each would compute it): a computed
/// A needs all warps along M (`wn = 1`), a computed B all along N — the
/// weights as A of a decode product `outᵀ = W·xᵀ`, or as B of a 16-row
/// tile.
///
/// Only where it is safe with per-shape layouts: the two operand shapes
/// and the result shape are distinct, no other dot's result has an operand
/// shape, all dots of the result shape qualify alike, and every op that
/// touches a tile of an operand shape is a load, an elementwise op, a
/// broadcast into it, loop plumbing, or the dot reading it as A or B —
/// nothing that stores, reduces or moves tiles of those shapes, which the
/// copies (unused warp bits) would otherwise double.
///
/// Off by default (`PtxOptions::register_operands`): on the quantized GEMM
/// the staging it saves was ~30 of 559 instructions per step, while the
/// weights' loads lose their vectors (GPTQ words are N-contiguous, the
/// operand layout puts a thread's columns 8 apart) — 45 µs against 27 at
/// 16×8192² on the H200 (benches/NOTES.md, session 25). With weights
/// repacked K-major and runs of 32 (session 36, offline) the loop still
/// costs more than the staged one (604 against 330 SASS per 64 weights
/// and thread): per-element addresses and guards of the operands' many
/// small loads, and 16-bit pipelined copies moved a half at a time.
fn register_operand_dots(k: &Kernel, mma: &HashMap<Vec<u32>, Option<MmaGrid>>, chained_a: &HashSet<V>) -> (HashSet<Vec<u32>>, HashMap<Vec<u32>, Blocked>) {
    let mut def: HashMap<V, &OpKind> = HashMap::new();
    k.walk(&mut |op| {
        for r in &op.results {
            def.insert(*r, &op.kind);
        }
    });
    let dims = |v: V| -> Option<Vec<u32>> { k.ty(v).shape().iter().map(|d| d.known().map(|x| x as u32)).collect() };
    // elementwise from loads and constants, not from a dot's result
    fn from_dot(v: V, def: &HashMap<V, &OpKind>, depth: u32) -> bool {
        match def.get(&v) {
            Some(OpKind::Dot { .. }) => true,
            Some(kind) if kind.is_elementwise() && depth > 0 => kind.operands().into_iter().any(|x| from_dot(x, def, depth - 1)),
            _ => false,
        }
    }
    let computed = |v: V| def.get(&v).is_some_and(|kind| kind.is_elementwise()) && !from_dot(v, &def, 32);
    // per result shape: the operand layouts its dots need (None: some dot of the shape does not qualify)
    let mut want: HashMap<Vec<u32>, Option<(Vec<u32>, Blocked, Vec<u32>, Blocked)>> = HashMap::new();
    k.walk(&mut |op| {
        let OpKind::Dot { a, b, .. } = &op.kind else { return };
        let (Some(sa), Some(sb), Some(so)) = (dims(*a), dims(*b), dims(op.results[0])) else { return };
        let grid = mma.get(&so).copied().flatten();
        let ok = match grid {
            Some(g) if !g.wgmma => {
                let d = k.ty(*a).elem().map(|e| e.dtype());
                matches!(d, Some(DType::F16 | DType::BF16))
                    && sa[1].is_multiple_of(32)
                    && sa != sb
                    && sa != so
                    && sb != so
                    && !chained_a.contains(a)
                    && !from_dot(*a, &def, 32)
                    && !from_dot(*b, &def, 32)
                    && (computed(*a) || computed(*b))
                    // (a computed operand is computed by every warp that
                    // holds it: only where no other warp holds a copy)
                    && (!computed(*a) || g.wn == 1)
                    && (!computed(*b) || g.wm == 1)
                    && !mma.contains_key(&sa)
                    && !mma.contains_key(&sb)
            }
            _ => false,
        };
        let entry = ok.then(|| {
            let g = grid.unwrap();
            let run = crate::ptx::fragments::operand_run(sa[1]).expect("K checked above");
            (sa.clone(), Blocked::mma_a_operand(&sa, g.wm, g.wn, run), sb.clone(), Blocked::mma_b_operand(&sb, g.wm, g.wn, run))
        });
        let e = want.entry(so).or_insert_with(|| entry.clone());
        if *e != entry {
            *e = None;
        }
    });
    let mut layouts: HashMap<Vec<u32>, Option<Blocked>> = HashMap::new();
    let mut outs = HashSet::new();
    for (so, w) in &want {
        let Some((sa, la, sb, lb)) = w else { continue };
        outs.insert(so.clone());
        for (s, l) in [(sa, la), (sb, lb)] {
            let e = layouts.entry(s.clone()).or_insert_with(|| Some(l.clone()));
            if e.as_ref() != Some(l) {
                *e = None;
            }
        }
    }
    // every op touching a tile of an operand shape must be one that the copies cannot double
    let mut bad: HashSet<Vec<u32>> = layouts.iter().filter(|(_, l)| l.is_none()).map(|(s, _)| s.clone()).collect();
    k.walk(&mut |op| {
        let reads_ok = |x: V| match &op.kind {
            OpKind::Dot { a, b, acc, .. } => x != *acc && (x == *a || x == *b),
            kind => kind.is_elementwise() || matches!(kind, OpKind::Load { .. } | OpKind::For { .. } | OpKind::If { .. } | OpKind::Yield(_)),
        };
        let makes_ok = op.kind.is_elementwise()
            || matches!(
                op.kind,
                OpKind::Load { .. }
                    | OpKind::Splat { .. }
                    | OpKind::Broadcast { .. }
                    | OpKind::ExpandDims { .. }
                    | OpKind::Const(_)
                    | OpKind::For { .. }
                    | OpKind::If { .. }
            );
        for x in op.kind.operands() {
            if let Some(s) = dims(x).filter(|s| layouts.contains_key(s)) {
                if !reads_ok(x) {
                    bad.insert(s);
                }
            }
        }
        for r in &op.results {
            if let Some(s) = dims(*r).filter(|s| layouts.contains_key(s)) {
                if !makes_ok {
                    bad.insert(s);
                }
            }
        }
    });
    // a result shape qualifies when both of its operand shapes do
    outs.retain(|so| {
        let Some(Some((sa, _, sb, _))) = want.get(so) else { return false };
        !bad.contains(sa) && !bad.contains(sb)
    });
    let mut keep: HashMap<Vec<u32>, Blocked> = HashMap::new();
    for so in &outs {
        let Some(Some((sa, la, sb, lb))) = want.get(so) else { continue };
        keep.insert(sa.clone(), la.clone());
        keep.insert(sb.clone(), lb.clone());
    }
    (outs, keep)
}

/// The layouts of computed `dot` A operands held as `wgmma`'s register-A
/// fragments with K interleaved ([`crate::ptx::fragments::wgmma_a_interleaved`]):
/// the dot-operand anchor of issue 20, propagated backward through the
/// whole shape. A 16-bit A operand computed element by element — `(x · r
/// ∘ g) as bf16`, anything but a load or another dot's result — of a
/// `wgmma` dot whose shape is not the accumulator's is otherwise staged
/// through shared memory: a store, a proxy fence and a CTA barrier every K
/// step, and the previous step's MMAs waited for before the scratch is
/// rewritten. Its shape `[m, k]` then takes [`Blocked::wgmma_a_operand`]
/// instead: the accumulator's rows, and runs of `run` consecutive K per
/// thread (8 where K allows: one 16-byte vector of a row, as the canonical
/// layout loads it) which the `dot` reads as its fragments in the
/// interleaved K order — and B's ring copies put B's rows in that order
/// (`AsyncPlan::kperm`), which is free: each copy moves a piece of one row.
/// Every tile of that shape (the loads A is computed from, their index
/// arithmetic, the broadcasts into it, and the same shape elsewhere in the
/// kernel: the row statistic of a fused norm reduced from it) is computed
/// in place.
///
/// Only where no tile of the shape is read from shared memory (the shape
/// is no `dot`'s B, and no `dot` reads an A of that shape that is a load
/// or another dot's result), it is no accumulator's shape and has no
/// operand layout of its own yet, every `dot` with a computed A of the
/// shape agrees, and B can take the permuted rows: 16-bit, not through a
/// TMA copy (a box copy keeps the rows in order; a B that arrives K-major
/// is copied element by element, each to its place) — where the emitter
/// still finds B's slot in natural order, it stages A as before. Value:
/// `(layout, run)`.
fn computed_a_layouts(k: &Kernel, mma: &HashMap<Vec<u32>, MmaGrid>, taken: &HashMap<Vec<u32>, Blocked>) -> HashMap<Vec<u32>, (Blocked, u32)> {
    let mut def: HashMap<V, &OpKind> = HashMap::new();
    // (a loop-carried value's sources: its initial and yielded values — a
    // pipelined operand arrives at its `dot` through them)
    let mut carried: HashMap<V, Vec<V>> = HashMap::new();
    k.walk(&mut |op| {
        for r in &op.results {
            def.insert(*r, &op.kind);
        }
        if let OpKind::For { inits, body, .. } = &op.kind {
            for (i, init) in inits.iter().enumerate() {
                let src = vec![*init, body.yields()[i]];
                carried.insert(body.args[1 + i], src.clone());
                carried.insert(op.results[i], src);
            }
        }
    });
    let by_tma = |b: V| {
        let mut stack = vec![b];
        let mut seen = HashSet::new();
        while let Some(v) = stack.pop() {
            if !seen.insert(v) {
                continue;
            }
            match (def.get(&v), carried.get(&v)) {
                (Some(OpKind::LoadBlock { .. }), _) => return true,
                (_, Some(src)) => stack.extend(src),
                _ => {}
            }
        }
        false
    };
    let dims = |v: V| -> Option<Vec<u32>> { k.ty(v).shape().iter().map(|d| d.known().map(|x| x as u32)).collect() };
    let mut want: HashMap<Vec<u32>, Option<(Blocked, u32)>> = HashMap::new();
    let mut bad: HashSet<Vec<u32>> = HashSet::new();
    k.walk(&mut |op| {
        let OpKind::Dot { a, b, .. } = &op.kind else { return };
        let (Some(sa), Some(sb), Some(so)) = (dims(*a), dims(*b), dims(op.results[0])) else { return };
        bad.insert(sb);
        bad.insert(so.clone());
        if !def.get(a).is_some_and(|kind| kind.is_elementwise()) {
            bad.insert(sa);
            return;
        }
        let sixteen = |v: V| matches!(k.ty(v).elem().map(|e| e.dtype()), Some(DType::F16 | DType::BF16));
        let (m, kk) = (sa[0], sa[1]);
        let run = if kk.is_multiple_of(32) { 8 } else { 4 };
        let layout = match mma.get(&so) {
            Some(g) if g.wgmma && sixteen(*a) && sixteen(*b) && !by_tma(*b) && m.is_multiple_of(16 * g.wm) && kk.is_multiple_of(16) => {
                let l = Blocked::wgmma_a_operand(&sa, g.wm, run);
                crate::ptx::fragments::wgmma_a_interleaved(&l, m, kk, g.wm, run).map(|_| (l, run))
            }
            _ => None,
        };
        let e = want.entry(sa).or_insert_with(|| layout.clone());
        if *e != layout {
            *e = None;
        }
    });
    want.into_iter().filter_map(|(s, l)| Some((s, l?))).filter(|(s, _)| !bad.contains(s) && !mma.contains_key(s) && !taken.contains_key(s)).collect()
}

/// Assign layouts for `k` (see the module documentation). `enable_mma`
/// false keeps every shape canonical (the FMA path for every `dot`);
/// `wgmma` lets f16/bf16 dots whose shapes fit take Hopper's warpgroup
/// MMAs; `register_operands` lets `mma.sync` dots with a computed operand
/// take both operands from registers ([`register_operand_dots`]);
/// `operand_layouts` gives the shapes of computed A operands the A
/// fragments' layout ([`computed_a_layouts`]).
pub fn plan(
    k: &Kernel,
    num_warps: u32,
    enable_mma: bool,
    wgmma: bool,
    kmajor_b: &HashSet<V>,
    mma_i8: bool,
    register_operands: bool,
    operand_layouts: bool,
) -> Plan {
    let (rows, chained_a) = chained_dot_shapes(k);
    // `mma.sync` grid of an `m × n` result: warps along M only where a
    // dot's A is computed from another dot's result (so that the first
    // accumulator's registers are the second's A fragments:
    // `ptx::fragments`), else square warp tiles
    let sync_grid = |out: &[u32]| -> Option<MmaGrid> {
        if rows.contains(out) && out[0].is_multiple_of(16 * num_warps) && out[1].is_multiple_of(8) {
            return Some(MmaGrid { wm: num_warps, wn: 1, wgmma: false });
        }
        warp_grid(out[0], out[1], num_warps)
    };
    let mut mma: HashMap<Vec<u32>, Option<MmaGrid>> = HashMap::new();
    let mut lines: HashMap<Vec<u32>, Vec<u32>> = HashMap::new();
    let mut fma_reasons = vec![];
    let mut no_wgmma_reasons = vec![];
    let mut operand: HashMap<Vec<u32>, Blocked> = HashMap::new();
    // (an operand computed element by element: fed from registers where
    // `operand_layouts` gives its shape the fragments' layout)
    let mut def: HashMap<V, bool> = HashMap::new();
    k.walk(&mut |op| {
        for r in &op.results {
            def.insert(*r, op.kind.is_elementwise());
        }
    });
    let computed = |v: V| def.get(&v).copied().unwrap_or(false);
    k.walk(&mut |op| {
        let OpKind::Dot { a, b, precision, .. } = &op.kind else { return };
        let dims = |v: V| -> Option<Vec<u32>> { k.ty(v).shape().iter().map(|d| d.known().map(|x| x as u32)).collect() };
        let (Some(sa), Some(sb)) = (dims(*a), dims(*b)) else { return };
        let out = vec![sa[0], sb[1]];
        let (da, db) = (k.ty(*a).elem().map(|e| e.dtype()), k.ty(*b).elem().map(|e| e.dtype()));
        let why = if !enable_mma {
            Some("tensor cores are off (FERROTILE_MMA=0)".to_string())
        } else if da == Some(DType::I8) && !mma_i8 {
            Some("i8 tensor cores are off (FERROTILE_MMA_I8=0)".to_string())
        } else if da.is_some_and(|d| d.fp8().is_some()) && !wgmma {
            Some("fp8 dots take tensor cores through wgmma only (sm_90a)".to_string())
        } else if da != db {
            Some(format!("operands of different dtypes ({da:?}, {db:?})"))
        } else {
            match da.and_then(|d| mma_k(d, *precision).map(|kk| (d, kk))) {
                None => Some(format!(
                    "{} inputs with {precision:?} precision: tensor cores take f16/bf16, i8, or f32 through `dot_tf32`",
                    da.map_or("?".into(), |d| d.to_string())
                )),
                Some((_, kk)) if sa[1] % kk != 0 => Some(format!("K = {} is not a multiple of the instruction's {kk}", sa[1])),
                Some(_) => match warp_grid(out[0], out[1], num_warps) {
                    None => Some(format!("a {}×{} result cannot give each of {num_warps} warps whole 16×8 tiles", out[0], out[1])),
                    Some(_) => None,
                },
            }
        };
        let grid = match why {
            Some(_) => None,
            None if wgmma => {
                let es = da.map_or(2, |d| d.size_bytes() as u32);
                let kb = kmajor_b.contains(b);
                // (a computed A: fed from registers, or staged; never a
                // ring slot, so K needs no whole swizzle atom)
                let k_atom = if (chained_a.contains(a) || operand_layouts && computed(*a)) && es == 2 && !kb { 16 } else { 128 / es };
                match wgmma_misfit(out[0], out[1], sa[1], num_warps, es, kb, k_atom) {
                    None => {
                        if es == 4 || (es == 1 && !kb) {
                            operand.insert(sb.clone(), kmajor_b_layout(&sb, num_warps));
                        }
                        Some(MmaGrid { wm: num_warps, wn: 1, wgmma: true })
                    }
                    // (fp8 has no mma.sync path here: the FMA path)
                    Some(r) if da.is_some_and(|d| d.fp8().is_some()) => {
                        fma_reasons.push((op.loc.line, format!("{r}: fp8 dots take tensor cores through wgmma only")));
                        None
                    }
                    Some(r) => {
                        no_wgmma_reasons.push((op.loc.line, format!("{r}; runs on mma.sync")));
                        sync_grid(&out)
                    }
                }
            }
            None => sync_grid(&out),
        };
        if let Some(w) = why {
            fma_reasons.push((op.loc.line, w));
        }
        lines.entry(out.clone()).or_default().push(op.loc.line);
        let e = mma.entry(out.clone()).or_insert(grid);
        if *e != grid {
            // dots of one shape must agree on the layout: where one can
            // take `wgmma` and another only `mma.sync` (a B that does not
            // arrive K-major at a narrow N), both take `mma.sync`; any other
            // disagreement leaves the shape on the FMA path
            *e = match (*e, grid) {
                (Some(x), Some(y)) if x.wgmma != y.wgmma => Some(if x.wgmma { y } else { x }),
                _ => None,
            };
        }
    });
    for (shape, g) in &mma {
        if g.is_none() {
            for &l in &lines[shape] {
                if !fma_reasons.iter().any(|(x, _)| *x == l) {
                    fma_reasons
                        .push((l, format!("another dot with a {}×{} result stays on the FMA path, and dots of one shape share a layout", shape[0], shape[1])));
                }
            }
        }
    }
    for (shape, g) in &mma {
        if wgmma && g.is_some_and(|g| !g.wgmma) {
            for &l in &lines[shape] {
                if !no_wgmma_reasons.iter().any(|(x, _)| *x == l) && !fma_reasons.iter().any(|(x, _)| *x == l) {
                    no_wgmma_reasons
                        .push((l, format!("another dot with a {}×{} result runs on mma.sync, and dots of one shape share a layout", shape[0], shape[1])));
                }
            }
        }
    }
    fma_reasons.sort();
    no_wgmma_reasons.sort();
    let (reg_operands, reg_layouts) = if register_operands { register_operand_dots(k, &mma, &chained_a) } else { Default::default() };
    let mma: HashMap<Vec<u32>, MmaGrid> = mma.into_iter().filter_map(|(s, g)| Some((s, g?))).collect();
    // (an operand tile of an accumulator's shape keeps the accumulator's
    // layout: correct, only its copies are slower)
    operand.retain(|s, _| !mma.contains_key(s));
    operand.extend(reg_layouts);
    let mut kperm = HashMap::new();
    if operand_layouts {
        for (s, (l, run)) in computed_a_layouts(k, &mma, &operand) {
            operand.insert(s.clone(), l);
            kperm.insert(s, run);
        }
    }
    Plan { mma, operand, runs: HashMap::new(), columns: HashMap::new(), reg_operands, kperm, fma_reasons, no_wgmma_reasons }
}

/// Per tile shape, the runs of equal addresses its loads repeat along each
/// dimension (the axis analysis's `constancy` of the pointer, a power of
/// two ≥ 2, at most the dimension), the largest over the shape's loads: a
/// GPTQ-style `w + (k >> 3)[:, None] · n + cols[None, :]` repeats each
/// word over 8 rows. The layout then keeps each run inside one thread
/// ([`Blocked::canonical_runs`]) and the load emitter issues one load per
/// run. Only dimensions along which the pointer is not contiguous count
/// (a contiguous dimension is vectorized instead), and a pointer constant
/// along a whole dimension of more than 8 elements (a row broadcast into a
/// tile) asks for 8: more registers per thread buy no fewer loads than a
/// run's worth of them.
pub fn load_runs(k: &Kernel, facts: &HashMap<V, crate::plan::axis::Facts>) -> HashMap<Vec<u32>, Vec<u32>> {
    let mut out: HashMap<Vec<u32>, Vec<u32>> = HashMap::new();
    k.walk(&mut |op| {
        let OpKind::Load { ptr, .. } = &op.kind else { return };
        let Some(shape) = k.ty(*ptr).shape().iter().map(|d| d.known().map(|x| x as u32)).collect::<Option<Vec<u32>>>() else { return };
        let Some(f) = facts.get(ptr) else { return };
        if shape.is_empty() {
            return;
        }
        let runs: Vec<u32> = (0..shape.len())
            .map(|d| {
                let i = f.dim(d);
                if i.contig > 1 || shape[d] < 2 {
                    return 1;
                }
                let c = i.constancy.min(shape[d] as u64).min(8) as u32;
                if c >= 2 {
                    1 << (31 - c.leading_zeros())
                } else {
                    1
                }
            })
            .collect();
        if runs.iter().all(|&r| r == 1) {
            return;
        }
        let e = out.entry(shape).or_insert_with(|| vec![1; runs.len()]);
        for (x, r) in e.iter_mut().zip(runs) {
            *x = (*x).max(r);
        }
    });
    out
}

/// The 2-D tile shapes whose loads and stores run along dimension 0 —
/// each pointer contiguous along dimension 0 and not along dimension 1
/// (`x + kk[:, None] + rows[None, :] · stride`: a transposed or
/// column-major operand; `xᵀ` of the decode form) — with the widest
/// vector their accesses allow along dimension 0 ([`axis::Info::access_width`],
/// the mask's constancy along it included). The canonical layout would
/// put each thread's run and the warp's lanes along dimension 1, where
/// consecutive elements lie a row stride apart: one element per access,
/// a warp's accesses scattered over 32 rows. [`Blocked::canonical_columns`]
/// turns that layout around. A shape with any access contiguous along
/// dimension 1 keeps the canonical layout (elementwise work between the
/// two kinds would convert), and so does one whose loads repeat
/// addresses in runs (`runs`, from [`load_runs`]).
///
/// [`axis::Info::access_width`]: crate::plan::axis::Info::access_width
pub fn load_columns(k: &Kernel, facts: &HashMap<V, crate::plan::axis::Facts>, runs: &HashMap<Vec<u32>, Vec<u32>>) -> HashMap<Vec<u32>, u32> {
    let mut cols: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut rows: HashSet<Vec<u32>> = HashSet::new();
    k.walk(&mut |op| {
        let (OpKind::Load { ptr, mask, .. } | OpKind::Store { ptr, mask, .. }) = &op.kind else { return };
        let Some(shape) = k.ty(*ptr).shape().iter().map(|d| d.known().map(|x| x as u32)).collect::<Option<Vec<u32>>>() else { return };
        if shape.len() != 2 {
            return;
        }
        let Some(f) = facts.get(ptr) else {
            rows.insert(shape);
            return;
        };
        let es = k.ty(*ptr).elem().map_or(4, |e| e.dtype().size_bytes().max(1) as u64);
        let (d0, d1) = (f.dim(0), f.dim(1));
        if d1.contig > 1 && shape[1] > 1 {
            rows.insert(shape);
        } else if d0.contig > 1 && shape[0] > 1 {
            let c = mask.map_or(u64::MAX, |m| facts.get(&m).map_or(1, |f| f.dim(0).constancy));
            let w = d0.access_width(es, c).min(shape[0] as u64) as u32;
            let e = cols.entry(shape).or_insert(1);
            *e = (*e).max(w);
        }
    });
    cols.retain(|s, w| *w > 1 && !rows.contains(s) && !runs.contains_key(s));
    cols
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warp_grids() {
        let g = |wm, wn| Some(MmaGrid { wm, wn, wgmma: false });
        assert_eq!(warp_grid(128, 128, 4), g(2, 2));
        assert_eq!(warp_grid(64, 64, 4), g(2, 2));
        assert_eq!(warp_grid(16, 64, 4), g(1, 4));
        assert_eq!(warp_grid(128, 256, 8), g(2, 4));
        assert_eq!(warp_grid(16, 8, 4), None);
        assert_eq!(warp_grid(16, 16, 1), g(1, 1));
        let w = |wm| Some(MmaGrid { wm, wn: 1, wgmma: true });
        assert_eq!(wgmma_grid(128, 256, 64, 8, 2, false), w(8));
        assert_eq!(wgmma_grid(128, 128, 64, 4, 2, false), w(4));
        assert_eq!(wgmma_grid(64, 512, 128, 4, 2, false), w(4));
        assert_eq!(wgmma_grid(128, 128, 32, 4, 2, false), None); // K not a whole swizzle atom
        assert_eq!(wgmma_grid(64, 128, 64, 8, 2, false), None); // 8 warps need 128 rows
        assert_eq!(wgmma_grid(64, 128, 64, 2, 2, false), None); // not a warpgroup
                                                                // FERROTILE_EXPLAIN's words for the misfits
        assert!(wgmma_misfit(128, 128, 32, 4, 2, false, 64).unwrap().contains("K = 32"));
        // (a computed A: K in whole instructions)
        assert!(wgmma_misfit(128, 128, 32, 4, 2, false, 16).is_none());
        assert!(wgmma_misfit(64, 128, 64, 8, 2, false, 64).unwrap().contains("M = 64"));
        assert!(wgmma_misfit(64, 128, 64, 2, 2, false, 64).unwrap().contains("warpgroups"));
        assert!(wgmma_misfit(64, 96, 64, 4, 2, false, 64).unwrap().contains("N = 96"));
        assert_eq!(wgmma_misfit(128, 256, 64, 8, 2, false, 64), None);
        // a B that arrives K-major: N in steps of 8 (the swapped decode
        // product's 64×16 tile)
        assert_eq!(wgmma_grid(64, 16, 128, 4, 2, true), w(4));
        assert!(wgmma_misfit(64, 16, 128, 4, 2, false, 64).unwrap().contains("N = 16"));
        assert!(wgmma_misfit(64, 20, 128, 4, 2, true, 64).unwrap().contains("N = 20"));
        // tf32: a 128-byte atom is 32 elements
        assert_eq!(wgmma_grid(128, 256, 32, 8, 4, false), w(8));
        assert!(wgmma_misfit(128, 256, 16, 8, 4, false, 32).unwrap().contains("multiple of 32"));
    }

    /// The K-major B layout: covers the tile once, and a warp's 32 lanes
    /// (one element each) hit 32 distinct banks of the swizzled slot (row
    /// `n`, 16-byte chunk `(k/4) ^ (n%8)`, word `k%4`).
    #[test]
    fn kmajor_b_copies_are_conflict_free() {
        for (k, n, w) in [(32, 256, 8), (32, 128, 4), (64, 128, 8), (32, 64, 4), (64, 256, 8)] {
            let l = kmajor_b_layout(&[k, n], w);
            assert!(!l.any_replication(), "{l:?}");
            assert_eq!(l.regs() as u32 * 32 * w, k * n);
            for warp in 0..w {
                for (r, kc) in l.reg_offsets().iter().enumerate() {
                    let mut banks = std::collections::HashSet::new();
                    for lane in 0..32u32 {
                        let kk = kc[0] + (lane >> l.lane_shift[0] & (l.tpw[0] - 1)) + l.warp_mul[0] * (warp >> l.warp_shift[0] & (l.wpc[0] - 1));
                        let nn = kc[1] + (lane >> l.lane_shift[1] & (l.tpw[1] - 1)) + l.warp_mul[1] * (warp >> l.warp_shift[1] & (l.wpc[1] - 1));
                        let byte = nn * 128 + (((kk / 4) % 8) ^ (nn % 8)) * 16 + (kk % 4) * 4;
                        banks.insert((byte / 4) % 32);
                    }
                    assert_eq!(banks.len(), 32, "{k}x{n} warps {w} register {r}");
                }
            }
        }
    }
}
