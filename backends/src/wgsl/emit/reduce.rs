//! Reductions and scans: pairwise in each invocation, then across
//! invocations through subgroup shuffles (option `subgroups`) and/or
//! workgroup memory; `argmax`/`argmin` carry the index along, and a `max`
//! of the same tile comes out of the same reduction
//! ([`crate::plan::reduce::siblings`]).

use super::*;
use crate::plan::reduce::{paired_core, sibling_op, ReducePlan};

/// Up to this many positions along a reduced axis after the in-invocation
/// and subgroup steps, the cross-invocation step reads all partials after
/// one barrier instead of running the barrier-per-level tree loop.
const SMALL_TREE: u32 = 32;
/// ... as long as that is at most this many reads per invocation (the
/// reads are unrolled: many row groups times many positions would bloat the
/// shader — lavapipe's LLVM then compiles for minutes).
const SMALL_TREE_READS: u32 = 64;

/// A partial of a reduction: its value and, for `argmax`/`argmin`, its
/// index.
type Partial = (String, Option<String>);

/// The partials of one reduction (one per group of the result's slice
/// layout), with what placing them needs.
struct Partials {
    partial: Vec<Partial>,
    lay: Rc<Layout>,
    groups: Vec<Vec<usize>>,
    ac: WTy,
}

impl<'k> WgslWriter<'k> {
    pub(super) fn reduce(&mut self, o: ReduceOp, x: V, axis: usize, res: V) -> R<Vec<String>> {
        // computed with its sibling
        if let Some(regs) = self.reduced.remove(&res) {
            return Ok(regs);
        }
        let sib = self.reduce_pairs.get(&res).copied();
        // a pair reduces (value, index) once, the value as `max` computes it
        let core = if sib.is_some() { paired_core(o) } else { o };
        let p = self.reduce_partials(core, x, axis, sib.is_some())?;
        let out = self.reduce_place(o, &p, x, axis, res)?;
        if let Some(s) = sib {
            let regs = self.reduce_place(sibling_op(o), &p, x, axis, s)?;
            self.reduced.insert(s, regs);
        }
        Ok(out)
    }

    /// Steps 1 and 2 of the plan: the partials, one per group. `paired`: a
    /// (value, index) reduction whose value also serves its sibling `max`
    /// (`min`): the value is combined as that reduction combines it.
    fn reduce_partials(&mut self, o: ReduceOp, x: V, axis: usize, paired: bool) -> R<Partials> {
        let shape = self.shape_u32(x);
        let d = self.dtype(x);
        let lay = self.layout(&shape)?;
        let regs = self.get(x);
        let arg = matches!(o, ReduceOp::Argmax | ReduceOp::Argmin);
        let plan = ReducePlan::new(&lay.bl, &lay.reg_offsets, axis);
        let ac = match wty_of(d) {
            WTy::F => WTy::F,
            WTy::I => WTy::I,
            WTy::L => WTy::L,
            _ => WTy::U,
        };
        let identity = match (o, ac) {
            (ReduceOp::Sum, WTy::L) => "vec2<u32>(0u, 0u)".to_string(),
            (ReduceOp::Max | ReduceOp::Argmax, WTy::L) => "vec2<u32>(0u, 0x80000000u)".into(),
            (ReduceOp::Min | ReduceOp::Argmin, WTy::L) => "vec2<u32>(0xffffffffu, 0x7fffffffu)".into(),
            (ReduceOp::Sum, WTy::F) => "0.0f".to_string(),
            (ReduceOp::Sum, WTy::I) => "0i".into(),
            (ReduceOp::Sum, _) => "0u".into(),
            (ReduceOp::Max | ReduceOp::Argmax, WTy::F) => "bitcast<f32>(0xff800000u)".into(),
            (ReduceOp::Min | ReduceOp::Argmin, WTy::F) => "bitcast<f32>(0x7f800000u)".into(),
            (ReduceOp::Max | ReduceOp::Argmax, WTy::I) => i32_lit(i32::MIN),
            (ReduceOp::Min | ReduceOp::Argmin, WTy::I) => i32_lit(i32::MAX),
            (ReduceOp::Max | ReduceOp::Argmax, _) => "0u".into(),
            (ReduceOp::Min | ReduceOp::Argmin, _) => "4294967295u".into(),
        };
        // values in the accumulation type; copies along a replicated axis
        // become the identity so they are not counted twice
        let mut vals = vec![];
        let mut idxs = vec![];
        for (r, v) in regs.iter().enumerate() {
            let a = if d == DType::Bool { format!("select(0u, 1u, {v})") } else { v.clone() };
            let a = if plan.replicated {
                let own = format!("{} + {}u < {}u", lay.thread[axis], lay.reg_offsets[r][axis], shape[axis]);
                // (an argmax's copies lose to every element, NaN included,
                // and to its index: a NaN, or the identity, at the largest
                // index)
                let id = if arg && ac == WTy::F { "bitcast<f32>(0x7fc00000u)" } else { identity.as_str() };
                if arg {
                    let i = self.index(&shape, r, axis)?;
                    idxs.push(self.let_(WTy::U, format!("select(0xffffffffu, {i}, {own})")));
                }
                self.let_(ac, format!("select({id}, {a}, {own})"))
            } else {
                if arg {
                    idxs.push(self.index(&shape, r, axis)?);
                }
                if a != *v {
                    self.let_(ac, a)
                } else {
                    a
                }
            };
            vals.push(a);
        }
        let groups = plan.groups.clone();
        type P = Partial;
        // 1. in-invocation, pairwise
        let mut partial: Vec<P> = vec![];
        for rs in &groups {
            let level: Vec<P> = rs.iter().map(|&r| (vals[r].clone(), if arg { Some(idxs[r].clone()) } else { None })).collect();
            partial.push(self.combine_pairwise(o, ac, level, paired));
        }
        // 2. across invocations along the axis
        let (tpw, wpc) = (plan.lanes, plan.warps);
        let mut lanes_left = tpw;
        if self.o.subgroups && tpw > 1 {
            self.uses_subgroups = true;
            for &m in &plan.lane_xor {
                let mut next = vec![];
                for g in &partial {
                    let ov = self.let_(ac, format!("subgroupShuffleXor({}, {m}u)", g.0));
                    let oi = g.1.as_ref().map(|i| self.let_(WTy::U, format!("subgroupShuffleXor({i}, {m}u)")));
                    let (v, i) = self.combine(o, ac, g, &(ov, oi), paired);
                    let v = self.let_(ac, v);
                    let i = i.map(|i| self.let_(WTy::U, i));
                    next.push((v, i));
                }
                partial = next;
            }
            lanes_left = 1;
        }
        let tcount = lanes_left * wpc;
        if tcount > 1 {
            let ng = partial.len() as u32;
            let slot = ac.nw() + arg as u32;
            let per = ng * slot;
            self.smem_need(self.nt * per);
            self.bar();
            for (gi, g) in partial.iter().enumerate() {
                let s = gi as u32 * slot;
                self.st_slot(&format!("ft_tid * {per}u + {s}u"), &g.0, ac);
                if let Some(i) = &g.1 {
                    self.line(format!("ft_smem[ft_tid * {per}u + {}u] = {i};", s + ac.nw()));
                }
            }
            self.bar();
            // invocation j along the axis: same id except the axis fields
            let lmask = if lanes_left > 1 { (tpw - 1) << plan.lane_shift } else { 0 };
            let wmask = (wpc - 1) << (5 + plan.warp_shift);
            let basetid = self.let_(WTy::U, format!("ft_tid & {}u", !(lmask | wmask)));
            let tid_of = |j: &str| -> String {
                let mut t = basetid.clone();
                if lanes_left > 1 {
                    t = format!("{t} | (({j} & {}u) << {}u)", tpw - 1, plan.lane_shift);
                    t = format!("{t} | (({j} >> {}u) << {}u)", tpw.trailing_zeros(), 5 + plan.warp_shift);
                } else {
                    t = format!("{t} | ({j} << {}u)", 5 + plan.warp_shift);
                }
                t
            };
            if tcount <= SMALL_TREE && tcount * partial.len() as u32 <= SMALL_TREE_READS {
                // Few positions (the warps of a workgroup, after subgroup
                // shuffles): every invocation reads all `tcount` partials
                // after the one barrier and combines them pairwise in
                // registers — the same log-depth rounding as the loop below,
                // without its log2(tcount) barriers.
                let mut res = vec![];
                for gi in 0..partial.len() {
                    let sl = gi as u32 * slot;
                    let mut level: Vec<P> = vec![];
                    for j in 0..tcount {
                        let tj = self.let_(WTy::U, tid_of(&format!("{j}u")));
                        let v = self.let_(ac, Self::ld_slot(&format!("{tj} * {per}u + {sl}u"), ac));
                        let i = if arg { Some(self.let_(WTy::U, format!("ft_smem[{tj} * {per}u + {}u]", sl + ac.nw()))) } else { None };
                        level.push((v, i));
                    }
                    res.push(self.combine_pairwise(o, ac, level, paired));
                }
                self.bar();
                partial = res;
            } else {
                // A tree over the `tcount` positions along the axis: at step
                // `h`, position p < h combines its slots with position p + h's,
                // in place; after log2(tcount) steps position 0 holds the result
                // (log-depth rounding error, log2(tcount) barriers).
                let pos = if lanes_left > 1 {
                    format!(
                        "((ft_tid >> {}u) & {}u) | (((ft_tid >> {}u) & {}u) << {}u)",
                        plan.lane_shift,
                        tpw - 1,
                        5 + plan.warp_shift,
                        wpc - 1,
                        tpw.trailing_zeros()
                    )
                } else {
                    format!("(ft_tid >> {}u) & {}u", 5 + plan.warp_shift, wpc - 1)
                };
                let p = self.let_(WTy::U, pos);
                // one loop (not unrolled: shader size stays that of one step);
                // its trip count is uniform, so the barrier inside is legal
                let h = self.fresh();
                self.line(format!("for (var {h}: u32 = {}u; {h} >= 1u; {h} = {h} >> 1u) {{", tcount / 2));
                self.ind += 1;
                self.line(format!("if ({p} < {h}) {{"));
                self.ind += 1;
                let q = self.let_(WTy::U, format!("{p} + {h}"));
                let tq = self.let_(WTy::U, tid_of(&q));
                for gi in 0..partial.len() {
                    let sl = gi as u32 * slot;
                    let me = format!("ft_tid * {per}u + {sl}u");
                    let other = format!("{tq} * {per}u + {sl}u");
                    let mv = self.let_(ac, Self::ld_slot(&me, ac));
                    let mi = if arg { Some(self.let_(WTy::U, format!("ft_smem[{me} + {}u]", ac.nw()))) } else { None };
                    let ov = self.let_(ac, Self::ld_slot(&other, ac));
                    let oi = if arg { Some(self.let_(WTy::U, format!("ft_smem[{other} + {}u]", ac.nw()))) } else { None };
                    let (v, i) = self.combine(o, ac, &(mv, mi), &(ov, oi), paired);
                    let v = self.let_(ac, v);
                    self.st_slot(&me, &v, ac);
                    if let Some(i) = i {
                        let i = self.let_(WTy::U, i);
                        self.line(format!("ft_smem[{me} + {}u] = {i};", ac.nw()));
                    }
                }
                self.ind -= 1;
                self.line("}");
                self.bar();
                self.ind -= 1;
                self.line("}");
                let t0 = self.let_(WTy::U, tid_of("0u"));
                let mut res = vec![];
                for gi in 0..partial.len() {
                    let sl = gi as u32 * slot;
                    let v = self.let_(ac, Self::ld_slot(&format!("{t0} * {per}u + {sl}u"), ac));
                    let i = if arg { Some(self.let_(WTy::U, format!("ft_smem[{t0} * {per}u + {}u]", sl + ac.nw()))) } else { None };
                    res.push((v, i));
                }
                self.bar();
                partial = res;
            }
        }
        Ok(Partials { partial, lay, groups, ac })
    }

    /// Steps 3 and 4: `o`'s result `res` from the partials (the index of a
    /// (value, index) pair for `argmax`/`argmin`, its value otherwise), in
    /// the result's layout.
    fn reduce_place(&mut self, o: ReduceOp, p: &Partials, x: V, axis: usize, res: V) -> R<Vec<String>> {
        let Partials { partial, lay, groups, ac } = p;
        let (lay, ac) = (lay.clone(), *ac);
        let shape = self.shape_u32(x);
        let arg = matches!(o, ReduceOp::Argmax | ReduceOp::Argmin);
        // 3. to the result's dtype
        let rd = self.dtype(res);
        let mut finals = vec![];
        for (v, i) in partial {
            let f = if arg {
                let i = i.clone().unwrap();
                match wty_of(rd) {
                    WTy::U => i,
                    _ => self.let_(WTy::I, format!("bitcast<i32>({i})")),
                }
            } else if ac == WTy::F {
                let e = self.round_to(v, rd);
                if e == *v {
                    e
                } else {
                    self.let_(WTy::F, e)
                }
            } else {
                // integer accumulations to the result dtype (wrapping)
                self.cast(v, ac.int_acc_dtype(), rd)?
            };
            finals.push(f);
        }
        let out_shape = self.shape_u32(res);
        if out_shape.is_empty() {
            return Ok(vec![finals[0].clone()]);
        }
        // kept in the slice layout: one register per group, in group order
        // ([`crate::plan::slices`])
        if self.vlay.contains_key(&res) {
            return Ok(finals);
        }
        // 4. slice layout -> canonical layout of the result
        let ol = self.layout(&out_shape)?;
        let ostr = strides(&out_shape);
        let group_lin = |t: u32, g: usize| -> u32 {
            let c = lay.coords_of(t, groups[g][0]);
            let mut od = 0;
            let mut lin = 0;
            for (dd, &ci) in c.iter().enumerate() {
                if dd == axis {
                    continue;
                }
                lin += ci * ostr[od];
                od += 1;
            }
            lin
        };
        if let Some(m) = register_remap(self.nt, groups.len(), &group_lin, ol.regs(), &|t, r| ol.lin_of(t, r)) {
            return Ok(m.iter().map(|&g| finals[g].clone()).collect());
        }
        let rw = wty_of(rd);
        let n_out: u32 = out_shape.iter().product();
        self.smem_need(n_out * rw.nw());
        self.bar();
        for (gi, rs) in groups.iter().enumerate() {
            let r = rs[0];
            let mut terms = vec![];
            let mut od = 0;
            for dd in 0..shape.len() {
                if dd == axis {
                    continue;
                }
                let i = self.index(&shape, r, dd)?;
                terms.push(format!("{i} * {}u", ostr[od] * rw.nw()));
                od += 1;
            }
            let a = if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
            self.st_slot(&a, &finals[gi], rw);
        }
        self.bar();
        let mut out = vec![];
        for r in 0..ol.regs() {
            let lin = self.lin(&out_shape, r)?;
            let a = if rw.nw() == 1 { lin } else { format!("{lin} * {}u", rw.nw()) };
            out.push(self.let_(rw, Self::ld_slot(&a, rw)));
        }
        self.bar();
        Ok(out)
    }

    /// Combine partials in a balanced tree (neighbours first): log-depth
    /// rounding error. `level` is not empty.
    pub(super) fn combine_pairwise(&mut self, o: ReduceOp, ac: WTy, mut level: Vec<Partial>, paired: bool) -> Partial {
        while level.len() > 1 {
            let mut next = vec![];
            for pair in level.chunks(2) {
                if pair.len() == 2 {
                    let (v, i) = self.combine(o, ac, &pair[0], &pair[1], paired);
                    let v = self.let_(ac, v);
                    let i = i.map(|i| self.let_(WTy::U, i));
                    next.push((v, i));
                } else {
                    next.push(pair[0].clone());
                }
            }
            level = next;
        }
        level.pop().expect("partials to combine")
    }

    /// Combine two partials (value, index): expressions of the new value
    /// and index (not yet bound).
    /// `paired` (an `argmax`/`argmin` whose value serves a `max`/`min`
    /// too): a float value is combined as that reduction combines it
    /// (`ft_fmax(a, b)`: bit for bit its result, ±0 included, wherever the
    /// group holds a number — a group of NaN only gives NaN, where the
    /// `max` alone may give its −inf identity: neither is pinned down), and
    /// it compares exactly as the element the index picks; integer values
    /// are equal either way.
    pub(super) fn combine(&mut self, o: ReduceOp, ac: WTy, a: &Partial, b: &Partial, paired: bool) -> Partial {
        if let (Some(ai), Some(bi)) = (&a.1, &b.1) {
            let (av, bv) = (&a.0, &b.0);
            let better = if o == ReduceOp::Argmax { ">" } else { "<" };
            // take b if better, or equal with a smaller index; NaN is the worst value
            let mut take = format!("({bv} {better} {av}) || ({bv} == {av} && {bi} < {ai})");
            if ac == WTy::L {
                let lt = self.helper("ft_lt64");
                let b_better = if o == ReduceOp::Argmax { format!("{lt}({av}, {bv})") } else { format!("{lt}({bv}, {av})") };
                take = format!("{b_better} || (all({bv} == {av}) && {bi} < {ai})");
            }
            if ac == WTy::F {
                let isnan = self.helper("ft_isnan");
                take = format!("{take} || ({isnan}({av}) && (!{isnan}({bv}) || {bi} < {ai}))");
            }
            let t = self.let_(WTy::B, take);
            let v = if paired && ac == WTy::F {
                format!("{}({av}, {bv})", self.helper(if o == ReduceOp::Argmax { "ft_fmax" } else { "ft_fmin" }))
            } else {
                format!("select({av}, {bv}, {t})")
            };
            return (v, Some(format!("select({ai}, {bi}, {t})")));
        }
        let (x, y) = (&a.0, &b.0);
        let e = match (o, ac) {
            (ReduceOp::Sum, WTy::L) => format!("{}({x}, {y})", self.helper("ft_add64")),
            (ReduceOp::Max, WTy::L) => format!("select({x}, {y}, {}({x}, {y}))", self.helper("ft_lt64")),
            (ReduceOp::Min, WTy::L) => format!("select({x}, {y}, {}({y}, {x}))", self.helper("ft_lt64")),
            (ReduceOp::Sum, _) => format!("{x} + {y}"),
            (ReduceOp::Max, WTy::F) => format!("{}({x}, {y})", self.helper("ft_fmax")),
            (ReduceOp::Min, WTy::F) => format!("{}({x}, {y})", self.helper("ft_fmin")),
            (ReduceOp::Max, _) => format!("max({x}, {y})"),
            _ => format!("min({x}, {y})"),
        };
        (e, None)
    }

    /// Inclusive cumulative sum along `axis` through workgroup memory, in
    /// ⌈log₂ len⌉ rounds (Hillis–Steele, as the PTX printer's `scan`): in
    /// round `k` each element adds the value `2ᵏ` places before it along
    /// the axis from the previous round's copy of the tile (two copies, one
    /// barrier a round).
    pub(super) fn scan(&mut self, x: V, axis: usize, res: V) -> R<Vec<String>> {
        let shape = self.shape_u32(x);
        let d = self.dtype(x);
        let rd = self.dtype(res);
        let regs = self.get(x);
        let ac = match wty_of(d) {
            WTy::F => WTy::F,
            WTy::I => WTy::I,
            WTy::L => WTy::L,
            _ => WTy::U,
        };
        let mut cur: Vec<String> = regs.iter().map(|v| if d == DType::Bool { format!("select(0u, 1u, {v})") } else { v.clone() }).collect();
        let n: u32 = shape.iter().product();
        let len = shape[axis];
        let rounds = len.next_power_of_two().trailing_zeros();
        let st = strides(&shape)[axis];
        let nw = ac.nw();
        if rounds > 0 {
            self.smem_need(2 * n * nw);
            self.bar();
            self.stage(&cur, &shape, ac, 0)?;
            self.bar();
            let at_of: Vec<(String, String)> = (0..regs.len()).map(|r| Ok((self.lin(&shape, r)?, self.index(&shape, r, axis)?))).collect::<R<_>>()?;
            // (one WGSL loop over the rounds, not the rounds unrolled:
            // lavapipe's LLVM compiled the unrolled form 4× slower than the
            // old serial loop; the tile's registers are `var`s updated in
            // place)
            let cur_vars: Vec<String> = cur.iter().map(|c| self.var_(ac, Some(c))).collect();
            let (k, off) = (self.fresh(), self.fresh());
            self.line(format!("for (var {k}: u32 = 0u; {k} < {rounds}u; {k} = {k} + 1u) {{"));
            self.ind += 1;
            self.line(format!("let {off}: u32 = 1u << {k};"));
            let src = self.let_(WTy::U, format!("({k} & 1u) * {}u", n * nw));
            let dst = self.let_(WTy::U, format!("{}u - {src}", n * nw));
            for ((lin, i), t) in at_of.iter().zip(&cur_vars) {
                let v = Self::ld_slot(&format!("({lin} - {off} * {st}u) * {nw}u + {src}"), ac);
                if ac == WTy::L {
                    let add = self.helper("ft_add64");
                    self.line(format!("if ({i} >= {off}) {{ {t} = {add}({t}, {v}); }}"));
                } else {
                    self.line(format!("if ({i} >= {off}) {{ {t} = {t} + {v}; }}"));
                }
            }
            // (all of this round's reads are done before any write of the
            // copy the next round reads)
            for ((lin, _), t) in at_of.iter().zip(&cur_vars) {
                self.st_slot(&format!("{lin} * {nw}u + {dst}"), t, ac);
            }
            self.bar();
            self.ind -= 1;
            self.line("}");
            cur = cur_vars;
        }
        let mut out = vec![];
        for acc in cur {
            let f = if ac == WTy::F {
                let e = self.round_to(&acc, rd);
                self.let_(WTy::F, e)
            } else {
                let c = self.cast(&acc, ac.int_acc_dtype(), rd)?;
                if c == acc {
                    self.let_(wty_of(rd), c)
                } else {
                    c
                }
            };
            out.push(f);
        }
        self.bar();
        Ok(out)
    }
}
