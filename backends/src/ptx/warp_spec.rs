//! Warp specialization of bulk-copy pipelines: what a dedicated producer
//! warp runs.
//!
//! Takes a specialized (view-lowered, pipelined) kernel and its
//! [`AsyncPlan`]. Where the kernel has TMA rings ([`AsyncPlan::tma`]), the
//! emitter can run it with one extra warp (of an extra warpgroup: see
//! `emit`), the *producer*, which issues every
//! bulk copy, while the kernel's own `num_warps` warps (the *consumers*) run
//! everything else and never issue a copy. Slots then change hands through
//! two mbarriers each: *full* (the copy landed: the producer's
//! `expect_tx`, the copy engine's bytes) and *empty* (every consumer warp
//! finished the `wgmma`s that read it), instead of one CTA-wide barrier per
//! loop iteration that orders every warp's reads before the next copy. The
//! producer runs ahead as far as the ring allows; the consumers wait only
//! for the data they read.
//!
//! This pass decides whether that is possible and what the producer's
//! instruction stream is: the kernel with every op removed except
//! - the TMA `load_block`s (the copies),
//! - the values their block coordinates depend on, transitively — through
//!   loop-carried scalars (their initial and yielded values) and the bounds
//!   of every loop the copies sit in,
//! - those loops,
//! - for a copy of a *dynamic* TMA view (`tma`: an offset or extent the
//!   kernel computes, e.g. loaded from `cu_seqlens`), the view itself and
//!   what it is made of — the issuing lane adds the row offset to the
//!   coordinate and records the view's bounds for the readers.
//!
//! Conditions (otherwise `None`, and the kernel keeps one instruction
//! stream): every value the producer computes is a scalar made by pure ops
//! (parameters, constants, program ids, arithmetic, comparisons, selects,
//! casts; and for a dynamic view, pointer offsets, scalar `load`s and the
//! view itself) — the producer is one warp and owns no tile; no such value
//! is the result of an `if` (a copy or a value inside one is fine: the
//! producer evaluates the condition — a scalar of the slice like any other
//! — and runs the branch's share of the slice, [`WsPlan::ifs`]; the
//! rotated loops of `rotate_chains` sit in an `if lo < hi` guard), and no
//! copied tile leaves an `if` through its yields (its readers would
//! release a slot whose fill was conditional); every TMA ring is read by a
//! `wgmma` (true of TMA classes by construction, checked again here).
//!
//! It also records which copies read the same tile in every program of a
//! cluster along x — coordinates that do not depend on `program_id(0)`
//! other than through its pair index `program_id(0) / c` (`c` even, or
//! `>> s`: equal for the two programs of a cluster of 2), inside loops
//! whose bounds do not either ([`WsPlan::uniform`],
//! [`WsPlan::uniform_trips`]): with clusters (`PtxOptions::cluster`) the
//! emitter multicasts those, one copy for the whole cluster.
//!
//! Guarantees (what the emitter relies on): the producer's stream issues the
//! same copies, in the same order, at the same coordinates as the
//! single-stream kernel would, because it computes them with the same ops;
//! it visits the same loops with the same trip counts and takes the same
//! branches (the same conditions, computed the same way), so its ring cursors
//! and phases advance exactly as the consumers' do (which still step the
//! cursors at every `load_block`, without copying).
//!
//! Why: in one stream, warp 0 issues the copies between its own MMAs, and
//! every warp meets at a CTA barrier per K step before a slot may be
//! refilled: the tensor cores idle while the slowest warp arrives, and the
//! copies for step `i + d` cannot start until step `i − 1`'s reads are
//! done everywhere. The producer/consumer split is how Hopper GEMMs (and
//! cuBLAS's) keep the copy engine and the tensor cores both busy.
//! Measured (session 8, `benches/RESULTS.md`): for the tuned GEMMs as they
//! are — one tile per program, rings of 4 slots that the single stream
//! already keeps full — it is neutral to 2 % slower, so the runtime enables
//! it only on request (`FERROTILE_WS=1`); it is the structure a persistent
//! GEMM (the producer filling the next tile's slots during an epilogue)
//! needs.

use super::async_copy::AsyncPlan;
use ferrotile_ir::*;
use std::collections::{HashMap, HashSet};

/// The producer warp's share of a kernel.
#[derive(Clone, Debug, Default)]
pub struct WsPlan {
    /// Values the producer computes (scalars, block arguments included).
    pub vals: HashSet<V>,
    /// Loops the producer runs, by induction variable.
    pub loops: HashSet<V>,
    /// Branches the producer runs, by condition (a scalar it computes):
    /// those with a copy or a value it needs inside. It runs their
    /// branches' share of the slice and none of their results.
    pub ifs: HashSet<V>,
    /// TMA `load_block` results: the copies it issues.
    pub loads: HashSet<V>,
    /// The copies whose block coordinates do not depend on `program_id(0)`
    /// — the same tile for every program of a cluster along x, which one
    /// bulk copy can multicast to all of them.
    pub uniform: HashSet<V>,
    /// Every loop the producer runs has bounds that do not depend on
    /// `program_id(0)`: the programs of a cluster along x fill their rings
    /// in lockstep (the same number of fills per slot), which multicast
    /// slots shared between them need.
    pub uniform_trips: bool,
}

impl WsPlan {
    /// The producer runs this op (a loop: some of its body; a `load_block`:
    /// the copy; anything else: its result is needed for a coordinate).
    pub fn runs(&self, op: &Op) -> bool {
        match &op.kind {
            OpKind::For { body, .. } => self.loops.contains(&body.args[0]),
            OpKind::If { cond, .. } => self.ifs.contains(cond),
            OpKind::Yield(_) => false,
            _ => op.results.iter().any(|r| self.vals.contains(r) || self.loads.contains(r)),
        }
    }
}

struct ForInfo<'k> {
    op: &'k Op,
    /// Induction variables of the enclosing loops, outermost first.
    encl: Vec<V>,
    /// Conditions of the enclosing branches.
    ifs: Vec<V>,
}

enum Def<'k> {
    /// Result `i` of `op`, defined inside these loops and these branches
    /// (by condition).
    Op { op: &'k Op, encl: Vec<V>, ifs: Vec<V> },
    /// Block argument `i` of the loop with this induction variable.
    Arg { iv: V, i: usize },
}

/// The producer's slice of `k`, or `None` when the kernel cannot be
/// split. `dynamic`: the views whose copies need the view's own values
/// (`tma::TmaView::dynamic`).
pub fn plan(k: &Kernel, ap: &AsyncPlan, dynamic: &HashSet<V>) -> Option<WsPlan> {
    let tma_loads: HashSet<V> = ap.loads.iter().filter(|(_, c)| ap.tma[**c].is_some()).map(|(v, _)| *v).collect();
    if tma_loads.is_empty() {
        return None;
    }
    let mut defs: HashMap<V, Def> = HashMap::new();
    let mut fors: HashMap<V, ForInfo> = HashMap::new();
    let mut dots_ok = true;
    fn scan<'k>(
        b: &'k Block,
        encl: &mut Vec<V>,
        ifs: &mut Vec<V>,
        defs: &mut HashMap<V, Def<'k>>,
        fors: &mut HashMap<V, ForInfo<'k>>,
        ap: &AsyncPlan,
        dots_ok: &mut bool,
        trans_of_tma: &mut HashSet<V>,
    ) {
        for op in &b.ops {
            for r in &op.results {
                defs.insert(*r, Def::Op { op, encl: encl.clone(), ifs: ifs.clone() });
            }
            match &op.kind {
                OpKind::For { body, .. } => {
                    let iv = body.args[0];
                    for (i, a) in body.args.iter().enumerate() {
                        defs.insert(*a, Def::Arg { iv, i });
                    }
                    fors.insert(iv, ForInfo { op, encl: encl.clone(), ifs: ifs.clone() });
                    encl.push(iv);
                    scan(body, encl, ifs, defs, fors, ap, dots_ok, trans_of_tma);
                    encl.pop();
                }
                OpKind::If { cond, then_, else_ } => {
                    ifs.push(*cond);
                    scan(then_, encl, ifs, defs, fors, ap, dots_ok, trans_of_tma);
                    scan(else_, encl, ifs, defs, fors, ap, dots_ok, trans_of_tma);
                    ifs.pop();
                    // (a TMA tile yielded out of a branch would be read
                    // where its fill is conditional: the consumers'
                    // releases would not match the producer's fills)
                    let tma = |v: &V| ap.class_of(*v).is_some_and(|c| ap.tma[c].is_some()) || trans_of_tma.contains(v);
                    if then_.yields().iter().chain(else_.yields()).any(tma) {
                        *dots_ok = false;
                    }
                }
                _ => {}
            }
            // a TMA tile is read by a `dot` only (the consumers release its
            // slot after the dot's MMAs), or carried to one, or through a
            // `trans` that only `dot`s read (the slot read transposed by
            // the `wgmma` descriptors — fp8's and int8's `b` stored along K)
            for x in op.kind.operands() {
                let tma = ap.class_of(x).is_some_and(|c| ap.tma[c].is_some());
                if tma && matches!(op.kind, OpKind::Trans { .. }) {
                    trans_of_tma.extend(op.results.iter().copied());
                } else if (tma && !matches!(op.kind, OpKind::Dot { .. } | OpKind::For { .. } | OpKind::Yield(_)))
                    || (trans_of_tma.contains(&x) && !matches!(op.kind, OpKind::Dot { .. }))
                {
                    *dots_ok = false;
                }
            }
        }
    }
    scan(&k.body, &mut vec![], &mut vec![], &mut defs, &mut fors, ap, &mut dots_ok, &mut HashSet::new());
    if !dots_ok {
        return None;
    }
    let mut out = WsPlan { loads: tma_loads.clone(), ..Default::default() };
    let mut work: Vec<V> = vec![];
    // the branches around a value the producer needs: it runs them, and
    // computes their conditions
    fn need_branches(ifs: &[V], out: &mut WsPlan, work: &mut Vec<V>) {
        for c in ifs {
            out.ifs.insert(*c);
            work.push(*c);
        }
    }
    let need_loop = |iv: V, out: &mut WsPlan, work: &mut Vec<V>, fors: &HashMap<V, ForInfo>| {
        let mut stack = vec![iv];
        while let Some(iv) = stack.pop() {
            if !out.loops.insert(iv) {
                continue;
            }
            let f = &fors[&iv];
            if let OpKind::For { lo, hi, step, .. } = &f.op.kind {
                work.extend([*lo, *hi, *step]);
            }
            stack.extend(f.encl.iter().copied());
            // (the branches around it: the producer evaluates them too)
            need_branches(&f.ifs, out, work);
        }
    };
    for v in &tma_loads {
        let Some(Def::Op { op, encl, ifs }) = defs.get(v) else { return None };
        need_branches(ifs, &mut out, &mut work);
        let OpKind::LoadBlock { view, offsets, .. } = &op.kind else { return None };
        work.extend(offsets.iter().copied());
        if dynamic.contains(view) {
            work.push(*view);
        }
        for iv in encl.clone() {
            need_loop(iv, &mut out, &mut work, &fors);
        }
    }
    while let Some(v) = work.pop() {
        if !out.vals.insert(v) {
            continue;
        }
        if !k.ty(v).shape().is_empty() {
            return None;
        }
        match defs.get(&v)? {
            Def::Arg { iv, i } => {
                need_loop(*iv, &mut out, &mut work, &fors);
                if *i > 0 {
                    let OpKind::For { inits, body, .. } = &fors[iv].op.kind else { return None };
                    work.push(inits[i - 1]);
                    match body.ops.last().map(|o| &o.kind) {
                        Some(OpKind::Yield(ys)) => work.push(ys[i - 1]),
                        _ => return None,
                    }
                }
            }
            Def::Op { op, encl, ifs } => {
                need_branches(ifs, &mut out, &mut work);
                for iv in encl.clone() {
                    need_loop(iv, &mut out, &mut work, &fors);
                }
                match &op.kind {
                    OpKind::Param(_) | OpKind::Const(_) | OpKind::ProgramId(_) | OpKind::NumPrograms(_) => {}
                    OpKind::Binary { .. } | OpKind::Cmp { .. } | OpKind::Unary { .. } | OpKind::Fma { .. } | OpKind::Select { .. } | OpKind::Cast { .. } => {
                        work.extend(op.kind.operands())
                    }
                    // (what a dynamic view is made of: its offsets are
                    // loaded; elsewhere the producer stays pure)
                    OpKind::AddPtr { .. } | OpKind::MakeView { .. } | OpKind::Load { .. } if !dynamic.is_empty() => work.extend(op.kind.operands()),
                    OpKind::For { body, inits, .. } => {
                        // a loop's final value of a carried scalar
                        let iv = body.args[0];
                        let i = op.results.iter().position(|r| *r == v)?;
                        need_loop(iv, &mut out, &mut work, &fors);
                        work.push(body.args[i + 1]);
                        work.push(inits[i]);
                    }
                    _ => return None,
                }
            }
        }
    }
    uniformity(&mut out, &defs, &fors);
    Some(out)
}

/// Fill in [`WsPlan::uniform`] and [`WsPlan::uniform_trips`]: which values
/// of the producer's (dependency-closed) slice depend on `program_id(0)`,
/// to a fixpoint through loop-carried scalars.
fn uniformity(out: &mut WsPlan, defs: &HashMap<V, Def>, fors: &HashMap<V, ForInfo>) {
    let bounds = |iv: V| -> Vec<V> {
        match &fors[&iv].op.kind {
            OpKind::For { lo, hi, step, .. } => vec![*lo, *hi, *step],
            _ => vec![],
        }
    };
    // the values each slice value is computed from
    let deps = |v: V| -> Vec<V> {
        match defs.get(&v) {
            Some(Def::Arg { iv, i: 0 }) => bounds(*iv),
            Some(Def::Arg { iv, i }) => match &fors[iv].op.kind {
                OpKind::For { inits, body, .. } => {
                    let mut d = vec![inits[i - 1]];
                    if let Some(OpKind::Yield(ys)) = body.ops.last().map(|o| &o.kind) {
                        d.push(ys[i - 1]);
                    }
                    d
                }
                _ => vec![],
            },
            Some(Def::Op { op, .. }) => match &op.kind {
                OpKind::For { body, inits, .. } => {
                    let i = op.results.iter().position(|r| *r == v).unwrap_or(0);
                    vec![body.args[i + 1], inits[i]]
                }
                k => k.operands(),
            },
            None => vec![],
        }
    };
    let is_pid0 = |v: V| matches!(defs.get(&v), Some(Def::Op { op, .. }) if matches!(op.kind, OpKind::ProgramId(0)));
    let int_const = |v: V| match defs.get(&v) {
        Some(Def::Op { op: Op { kind: OpKind::Const(Lit::Int(c)), .. }, .. }) => Some(*c),
        _ => None,
    };
    // `program_id(0) / c` for an even `c` (or `>> s`, s ≥ 1) is the same for
    // both programs of a cluster of 2 along x (x = 2i and 2i + 1): the
    // index of the pair, from which a kernel computes the tile both read
    let pair_index = |v: V| match defs.get(&v) {
        Some(Def::Op { op: Op { kind: OpKind::Binary { op: BinOp::Div, a, b }, .. }, .. }) => is_pid0(*a) && int_const(*b).is_some_and(|c| c > 0 && c % 2 == 0),
        Some(Def::Op { op: Op { kind: OpKind::Binary { op: BinOp::Shr, a, b }, .. }, .. }) => {
            is_pid0(*a) && int_const(*b).is_some_and(|s| (1..31).contains(&s))
        }
        _ => false,
    };
    let mut tainted: HashSet<V> = out.vals.iter().copied().filter(|v| is_pid0(*v)).collect();
    loop {
        let before = tainted.len();
        for v in &out.vals {
            if !tainted.contains(v) && !pair_index(*v) && deps(*v).iter().any(|d| tainted.contains(d)) {
                tainted.insert(*v);
            }
        }
        if tainted.len() == before {
            break;
        }
    }
    // (a loop runs as often in every program of the cluster when its
    // bounds and the conditions of the branches around it are the same)
    let loop_ok = |iv: V| bounds(iv).iter().chain(&fors[&iv].ifs).all(|b| !tainted.contains(b));
    out.uniform_trips = out.loops.iter().all(|iv| loop_ok(*iv)) && out.ifs.iter().all(|c| !tainted.contains(c));
    for v in &out.loads {
        if let Some(Def::Op { op: Op { kind: OpKind::LoadBlock { offsets, .. }, .. }, encl, ifs }) = defs.get(v) {
            if offsets.iter().chain(ifs).all(|o| !tainted.contains(o)) && encl.iter().all(|iv| loop_ok(*iv)) {
                out.uniform.insert(*v);
            }
        }
    }
}
