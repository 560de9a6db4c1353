//! Chained dots rotated by one iteration: in a loop where a `dot` with a
//! loop-carried accumulator consumes a tile computed, in the same
//! iteration, from another `dot` (attention's `acc = dot(p, v, acc·α)`
//! with `p` from `s = dot(q, kᵀ)`; a two-dot chain `acc = dot(cast(dot(a,
//! b)), c, acc)`), the chained dot of iteration `j` is issued in
//! iteration `j + 1`, right after that iteration's first dots and before
//! the elementwise work between them.
//!
//! Takes a specialized kernel after `branch_masks`, before `pipeline`, and
//! which chained dots to rotate ([`Accept`], by result shape: the PTX
//! backend takes those it puts on `wgmma`; an `mma.sync` is synchronous,
//! so there is nothing to overlap, and its register-A path wants the
//! chained dot's operand from the same iteration — a rotated `mma.sync`
//! dQ loop of the attention backward measured 1.7× slower).
//! For an innermost `for` whose body has no stores, prints or atomics (a
//! checked launch's fault counts aside: `fault_counters`), a
//! top-level `D = dot(a, b, c)` qualifies when its result is only yielded
//! (as carried value `x_c`), its accumulator `c` is computed from `x_c`,
//! and `a` or `b` depends on another `dot` of the body. A loop is left as
//! it is when a tile the chained dots load is read by the rest of the body
//! too (stage 1 would load it a second time: the attention backward's Q,
//! dO and K tiles — measured slower that way). The body's other
//! ops are *stage 0*; the qualifying dots and the pure ops and loads that
//! compute their operands from the induction variable and loop-invariant
//! values alone (the next key block's `v` tile) are *stage 1*. Every other
//! stage-0 value a stage-1 op reads (`p` as bf16, `acc·α`) is carried into
//! the next iteration. The loop becomes
//!
//! ```text
//! if lo < hi && step > 0 {
//!     stage 0 of iteration lo                           // prologue
//!     for iv in (lo + step..hi).step_by(step), carried.., operands.., prev {
//!         stage 0 up to its last dot     (s_j = dot(q, k_jᵀ) issued)
//!         stage 1 of iteration iv − step (acc = dot(p_{j−1}, v_{j−1}, acc·α))
//!         the rest of stage 0            (softmax of s_j; what reads x_c last)
//!     }
//!     stage 1 of the last iteration (`prev`)             // epilogue
//! } else { the initial values }
//! ```
//!
//! Guarantees: every value is what it was — each stage-1 op reads the
//! values of the iteration it belongs to (carried operands, `iv − step`
//! for the induction variable, recomputed loads of the same addresses: the
//! loop stores nothing), stage 0 of an iteration reads `x_c` only after the
//! previous iteration's dot; a loop that runs zero times runs nothing. The
//! result verifies; its loads stay functions of the induction variable,
//! so [`super::pipeline`] prefetches them as before.
//!
//! Why: a `wgmma` is asynchronous, and the backend waits for it where its
//! result is first read. In the source order the chained dot is issued
//! last and read by the next iteration's first elementwise op, so the
//! tensor cores idle through the softmax; rotated, the chained dot of the
//! previous block runs under this block's softmax (FlashAttention-3's
//! intra-warpgroup overlap, which users otherwise write by hand by
//! rotating the loop themselves). The cost is the carried operands'
//! registers (the chained dot's A tile), which is why the CUDA runtime
//! keeps the unrotated compilation where the rotated one spills.

use super::build::{like, new_value, Copier, Emit};
use crate::ir::*;
use std::collections::{HashMap, HashSet};

/// Which chained dots may be rotated, by their result's shape: the PTX
/// backend accepts those it runs on `wgmma` (asynchronous — where the
/// rotation pays), the interpreter every one.
pub type Accept<'a> = &'a dyn Fn(&[u32]) -> bool;

/// Rotate every qualifying loop of `k` whose chained dots `accept` takes
/// (module doc); how many were.
pub fn rotate_chains(k: &mut Kernel, accept: Accept) -> u32 {
    let counted = fault_counters(k);
    let mut body = std::mem::take(&mut k.body);
    let n = block(k, &mut body, accept, &counted);
    k.body = body;
    n
}

/// How many loops of `k` [`rotate_chains`] would rotate.
pub fn count(k: &Kernel, accept: Accept) -> u32 {
    let counted = fault_counters(k);
    let mut n = 0;
    k.walk(&mut |op| n += plan(k, op, accept, &counted).is_some() as u32);
    n
}

fn block(k: &mut Kernel, b: &mut Block, accept: Accept, counted: &HashSet<V>) -> u32 {
    let mut n = 0;
    let mut out = Vec::with_capacity(b.ops.len());
    for mut op in std::mem::take(&mut b.ops) {
        match &mut op.kind {
            OpKind::For { body, .. } => n += block(k, body, accept, counted),
            OpKind::If { then_, else_, .. } => {
                n += block(k, then_, accept, counted);
                n += block(k, else_, accept, counted);
            }
            _ => {}
        }
        match plan(k, &op, accept, counted) {
            Some(p) => {
                rotate(k, op, &p, &mut out);
                n += 1;
            }
            None => out.push(op),
        }
    }
    b.ops = out;
    n
}

/// Whether `op` or an op of its regions writes memory, prints or loops.
/// (A checked launch's fault counts — `atomic_add`s into the hidden
/// counter buffer that `guard` adds beside each access, `counted`'s
/// pointers — are not effects here: they stay in stage 0 with the access
/// they count, in its own iteration, while stage 1's recomputed loads are
/// as guarded as the originals; the counts stay exact.)
fn effects(op: &Op, counted: &HashSet<V>) -> bool {
    let count = matches!(&op.kind, OpKind::AtomicAdd { ptr, .. } if counted.contains(ptr)) && op.results.is_empty();
    (!count && matches!(op.kind, OpKind::Store { .. } | OpKind::StoreBlock { .. } | OpKind::AtomicAdd { .. } | OpKind::Print { .. } | OpKind::For { .. }))
        || op.kind.regions().iter().any(|r| r.ops.iter().any(|o| effects(o, counted)))
}

/// The pointers into `guard`'s fault-counter buffer (the hidden parameter
/// "fault counters"): the parameter, and offsets and splats of such.
fn fault_counters(k: &Kernel) -> HashSet<V> {
    let mut out = HashSet::new();
    k.walk(&mut |op| match &op.kind {
        OpKind::Param(i) if k.params.get(*i as usize).is_some_and(|p| p.name == "fault counters") => {
            out.insert(op.results[0]);
        }
        OpKind::AddPtr { ptr: x, .. } | OpKind::Splat { x, .. } if out.contains(x) => {
            out.insert(op.results[0]);
        }
        _ => {}
    });
    out
}

/// Ops a stage-1 operand may be recomputed with: the pure, region-free
/// ops the pipelining pass evaluates early, reshapes, and loads (the loop
/// stores nothing).
fn recomputable_kind(kind: &OpKind) -> bool {
    super::pipeline::is_pure(kind)
        || matches!(kind, OpKind::Reshape { .. } | OpKind::Trans { .. } | OpKind::Load { .. } | OpKind::MakeView { .. } | OpKind::LoadBlock { .. })
}

/// What [`rotate`] moves: indices into the loop body's ops.
struct Plan {
    /// The chained dots, with the carried slot (0-based, among the carried
    /// values) each result is yielded in.
    dots: Vec<(usize, usize)>,
    /// Stage-1 ops in body order: the chained dots and the ops that
    /// recompute their operands.
    stage1: Vec<usize>,
    /// Stage-0 values the stage-1 ops read (carried into the next iteration).
    carried: Vec<V>,
    /// Stage 0 split: before the chained dots (`a1`), after them (`a2`:
    /// independent of the dots' carried values; `b`: reading them).
    a1: Vec<usize>,
    a2: Vec<usize>,
    b: Vec<usize>,
}

fn plan(k: &Kernel, op: &Op, accept: Accept, counted: &HashSet<V>) -> Option<Plan> {
    let OpKind::For { body, .. } = &op.kind else { return None };
    let ops = &body.ops;
    let n = ops.len().checked_sub(1)?; // (the closing yield)
    if !matches!(ops[n].kind, OpKind::Yield(_)) || ops[..n].iter().any(|o| effects(o, counted)) {
        return None;
    }
    let ys = body.yields();
    let iv = body.args[0];
    let args: HashSet<V> = body.args.iter().copied().collect();
    let mut def: HashMap<V, usize> = HashMap::new();
    for (i, o) in ops[..n].iter().enumerate() {
        for r in &o.results {
            def.insert(*r, i);
        }
    }
    let mut uses: Vec<HashSet<V>> = vec![];
    for o in &ops[..n] {
        uses.push(o.deep_operands().into_iter().collect::<HashSet<V>>());
    }
    // every body value's transitive body inputs: ops (indices) and block arguments
    let mut anc: Vec<(HashSet<usize>, HashSet<V>)> = vec![];
    for u_i in &uses {
        let (mut a, mut b) = (HashSet::new(), HashSet::new());
        for u in u_i {
            if let Some(&j) = def.get(u) {
                a.insert(j);
                a.extend(anc[j].0.iter().copied());
                b.extend(anc[j].1.iter().copied());
            } else if args.contains(u) {
                b.insert(*u);
            }
        }
        anc.push((a, b));
    }
    let is_dot = |i: usize| matches!(ops[i].kind, OpKind::Dot { .. });
    let reads = |v: V, i: usize| uses[i].contains(&v);
    let mut dots = vec![];
    for (d, dop) in ops[..n].iter().enumerate() {
        let OpKind::Dot { a, b, acc, .. } = dop.kind else { continue };
        let r = dop.results[0];
        // only yielded, once
        let slots: Vec<usize> = ys.iter().enumerate().filter(|(_, y)| **y == r).map(|(s, _)| s).collect();
        if slots.len() != 1 || (0..n).any(|i| reads(r, i)) {
            continue;
        }
        let x_c = body.args[1 + slots[0]];
        // the accumulator computed from x_c
        let acc_from_xc = acc == x_c || def.get(&acc).is_some_and(|&j| anc[j].1.contains(&x_c));
        // an operand computed from another dot of this iteration
        let chained = [a, b].iter().any(|v| def.get(v).is_some_and(|&j| is_dot(j) || anc[j].0.iter().any(|&i| is_dot(i))));
        let shape: Option<Vec<u32>> = k.ty(r).shape().iter().map(|d| d.known().map(|x| x as u32)).collect();
        if acc_from_xc && chained && shape.is_some_and(|s| accept(&s)) {
            dots.push((d, slots[0]));
        }
    }
    if dots.is_empty() {
        return None;
    }
    // a value stage 1 can recompute: iv, loop-invariant, or a recomputable
    // op of such values
    let mut memo: HashMap<V, bool> = HashMap::new();
    fn recomp(v: V, iv: V, ops: &[Op], def: &HashMap<V, usize>, args: &HashSet<V>, memo: &mut HashMap<V, bool>) -> bool {
        if v == iv {
            return true;
        }
        if let Some(&r) = memo.get(&v) {
            return r;
        }
        let r = match def.get(&v) {
            None => !args.contains(&v),
            Some(&i) => recomputable_kind(&ops[i].kind) && ops[i].kind.operands().iter().all(|&o| recomp(o, iv, ops, def, args, memo)),
        };
        memo.insert(v, r);
        r
    }
    let mut stage1: HashSet<usize> = HashSet::new();
    let mut carried: Vec<V> = vec![];
    let mut todo: Vec<V> = vec![];
    for &(d, _) in &dots {
        stage1.insert(d);
        todo.extend(ops[d].kind.operands());
    }
    while let Some(v) = todo.pop() {
        if v == iv {
            continue;
        }
        match def.get(&v) {
            // (recomputed in stage 1, its operands in turn: once)
            Some(&i) if recomp(v, iv, ops, &def, &args, &mut memo) => todo.extend(if stage1.insert(i) { ops[i].kind.operands() } else { vec![] }),
            // (a stage-0 value or a carried argument: carried over)
            Some(_) if !carried.contains(&v) => carried.push(v),
            None if args.contains(&v) && !carried.contains(&v) => carried.push(v),
            _ => {}
        }
    }
    let dot_set: HashSet<usize> = dots.iter().map(|d| d.0).collect();
    // a tile the chained dots load that stage 0 reads as well would be
    // loaded twice per iteration (the attention backward's Q, dO and K:
    // measured slower) — such loops stay as they are
    let loads_twice = stage1.iter().any(|&i| {
        matches!(ops[i].kind, OpKind::Load { .. } | OpKind::LoadBlock { .. })
            && ops[i].results.iter().any(|r| (0..n).any(|j| !stage1.contains(&j) && uses[j].contains(r)))
    });
    if loads_twice {
        return None;
    }
    let xcs: HashSet<V> = dots.iter().map(|&(_, s)| body.args[1 + s]).collect();
    let stage0: Vec<usize> = (0..n).filter(|i| !dot_set.contains(i)).collect();
    let in_b = |i: usize| anc[i].1.iter().any(|a| xcs.contains(a));
    let (b, a): (Vec<usize>, Vec<usize>) = stage0.iter().partition(|&&i| in_b(i));
    let cut = a.iter().rposition(|&i| is_dot(i)).map_or(0, |p| p + 1);
    let (a1, a2) = (a[..cut].to_vec(), a[cut..].to_vec());
    let mut stage1: Vec<usize> = stage1.into_iter().collect();
    stage1.sort();
    // (nothing to overlap when no stage-0 dot is issued before the chained ones)
    if a1.is_empty() {
        return None;
    }
    Some(Plan { dots, stage1, carried, a1, a2, b })
}

/// Push the rotated form of loop `op` (module doc) to `out`.
fn rotate(k: &mut Kernel, op: Op, p: &Plan, out: &mut Vec<Op>) {
    let OpKind::For { lo, hi, step, inits, body } = op.kind else { unreachable!() };
    let loc = op.loc;
    let iv = body.args[0];
    let xs = &body.args[1..];
    let ys = body.yields().to_vec();
    let ops = &body.ops;
    let slots: HashSet<usize> = p.dots.iter().map(|d| d.1).collect();
    let kept: Vec<usize> = (0..xs.len()).filter(|s| !slots.contains(s)).collect();
    let ivt = k.ty(iv).clone();

    // prologue: stage 0 of iteration lo
    let mut then_ops = vec![];
    let mut pro = Copier::new();
    pro.map.insert(iv, lo);
    for (x, i) in xs.iter().zip(&inits) {
        pro.map.insert(*x, *i);
    }
    let mut s0: Vec<usize> = p.a1.iter().chain(&p.a2).chain(&p.b).copied().collect();
    s0.sort();
    for &i in &s0 {
        pro.op(k, &ops[i], &mut then_ops);
    }
    let lo2 = Emit { k, out: &mut then_ops, loc }.bin(BinOp::Add, lo, step);
    let mut loop_inits: Vec<V> = kept.iter().map(|&s| pro.get(ys[s])).collect();
    loop_inits.extend(p.carried.iter().map(|&v| pro.get(v)));
    loop_inits.push(lo);

    // the rotated body
    let niv = like(k, iv);
    let mut lp = Copier::new();
    lp.map.insert(iv, niv);
    let mut args = vec![niv];
    for &s in &kept {
        let a = like(k, xs[s]);
        lp.map.insert(xs[s], a);
        args.push(a);
    }
    let cargs: Vec<V> = p.carried.iter().map(|&v| like(k, v)).collect();
    args.extend(&cargs);
    let prev = new_value(k, ivt.clone());
    args.push(prev);
    let mut bops = vec![];
    for &i in &p.a1 {
        lp.op(k, &ops[i], &mut bops);
    }
    let ivp = Emit { k, out: &mut bops, loc }.bin(BinOp::Sub, niv, step);
    let mut st = Copier::new();
    st.map.insert(iv, ivp);
    for (v, c) in p.carried.iter().zip(&cargs) {
        st.map.insert(*v, *c);
    }
    for &i in &p.stage1 {
        st.op(k, &ops[i], &mut bops);
    }
    for &(d, s) in &p.dots {
        let r = st.get(ops[d].results[0]);
        lp.map.insert(xs[s], r);
    }
    for &i in p.a2.iter().chain(&p.b) {
        lp.op(k, &ops[i], &mut bops);
    }
    let mut next: Vec<V> = kept.iter().map(|&s| lp.get(ys[s])).collect();
    next.extend(p.carried.iter().map(|&v| lp.get(v)));
    next.push(niv);
    bops.push(Op { kind: OpKind::Yield(next), results: vec![], loc });
    let lres: Vec<V> = loop_inits.iter().map(|&v| like(k, v)).collect();
    then_ops.push(Op { kind: OpKind::For { lo: lo2, hi, step, inits: loop_inits, body: Block { args, ops: bops } }, results: lres.clone(), loc });

    // epilogue: stage 1 of the last iteration
    let last = *lres.last().unwrap();
    let mut ep = Copier::new();
    ep.map.insert(iv, last);
    for (v, r) in p.carried.iter().zip(&lres[kept.len()..]) {
        ep.map.insert(*v, *r);
    }
    for &i in &p.stage1 {
        ep.op(k, &ops[i], &mut then_ops);
    }
    let mut fin = vec![V(0); xs.len()];
    for (j, &s) in kept.iter().enumerate() {
        fin[s] = lres[j];
    }
    for &(d, s) in &p.dots {
        fin[s] = ep.get(ops[d].results[0]);
    }
    then_ops.push(Op { kind: OpKind::Yield(fin), results: vec![], loc });

    // (the loop runs when lo < hi and its step is positive: a step ≤ 0
    // runs no iterations, so no prologue either)
    let mut e = Emit { k, out, loc };
    let runs = e.cmp(CmpOp::Lt, lo, hi);
    let dt = e.k.ty(step).dtype().expect("an integer step");
    let zero = e.konst(Lit::Int(0), dt);
    let forward = e.cmp(CmpOp::Gt, step, zero);
    let cond = e.bin(BinOp::And, runs, forward);
    let else_ = Block { args: vec![], ops: vec![Op { kind: OpKind::Yield(inits.clone()), results: vec![], loc }] };
    out.push(Op { kind: OpKind::If { cond, then_: Block { args: vec![], ops: then_ops }, else_ }, results: op.results, loc });
}
