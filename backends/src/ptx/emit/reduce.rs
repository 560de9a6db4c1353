//! Reductions and scans: in-thread, then across lanes with `shfl.sync.bfly`,
//! then across warps through shared memory; `argmax`/`argmin` run as the
//! `max`/`min` followed by a `min` of the indices that hold it
//! (`arg_by_value`; where copies of an element lie along the axis they
//! carry the index along instead), and, paired with a `max`/`min` of the
//! same tile, serve it too ([`crate::plan::reduce::siblings`]); `cumsum`
//! as a scan in the same three levels.

use super::*;
use crate::plan::reduce::{paired_core, sibling_op, ReducePlan};

/// One group's partial: the value (accumulation class) and, for an
/// `argmax`/`argmin`, the index along the axis.
type Partial = (String, Option<String>);

/// The register class and PTX type a reduction of `d` accumulates in.
fn acc_class(d: DType) -> (RegClass, &'static str) {
    if d.is_float() {
        (RegClass::F, "f32")
    } else if d == DType::I64 {
        (RegClass::Rd, "s64")
    } else if d == DType::U32 || d == DType::U8 || d == DType::Bool {
        (RegClass::R, "u32")
    } else {
        (RegClass::R, "s32")
    }
}

impl<'k> PtxWriter<'k> {
    pub(super) fn reduce(&mut self, o: ReduceOp, x: V, axis: usize, res: V) -> R<Vec<String>> {
        // computed with its sibling ([`crate::plan::reduce::siblings`])
        if let Some(regs) = self.reduced.remove(&res) {
            return Ok(regs);
        }
        let sib = self.reduce_pairs.get(&res).copied();
        // a pair reduces (value, index) once
        let core = if sib.is_some() { paired_core(o) } else { o };
        let (partial, groups) = self.reduce_partials(core, x, axis)?;
        let out = self.reduce_place(o, &partial, &groups, x, axis, res)?;
        if let Some(s) = sib {
            let regs = self.reduce_place(sibling_op(o), &partial, &groups, x, axis, s)?;
            self.reduced.insert(s, regs);
        }
        Ok(out)
    }

    /// Steps 1–3 of the plan ([`ReducePlan`]): one partial per group of the
    /// result's slice layout, and the groups.
    fn reduce_partials(&mut self, o: ReduceOp, x: V, axis: usize) -> R<(Vec<Partial>, Vec<Vec<usize>>)> {
        if matches!(o, ReduceOp::Argmax | ReduceOp::Argmin) {
            if let Some(r) = self.arg_by_value(o, x, axis)? {
                return Ok(r);
            }
        }
        self.reduce_partials_with(o, x, axis, true)
    }

    /// [`Self::reduce_partials`] as the plan prints it; `trail`: the
    /// barrier after the shared-memory step.
    fn reduce_partials_with(&mut self, o: ReduceOp, x: V, axis: usize, trail: bool) -> R<(Vec<Partial>, Vec<Vec<usize>>)> {
        let shape = self.shape_u32(x);
        let d = self.dtype(x);
        let lay = self.layout(&shape);
        let regs = self.get(x);
        let arg = matches!(o, ReduceOp::Argmax | ReduceOp::Argmin);
        let plan = ReducePlan::new(&lay.bl, &lay.reg_offsets, axis);
        let (ac, at) = acc_class(d);
        let identity = |o: ReduceOp| -> String {
            match (o, ac) {
                (ReduceOp::Sum, RegClass::F) => "0f00000000".into(),
                (ReduceOp::Sum, _) => "0".into(),
                (ReduceOp::Max | ReduceOp::Argmax, RegClass::F) => "0fFF800000".into(),
                (ReduceOp::Min | ReduceOp::Argmin, RegClass::F) => "0f7F800000".into(),
                (ReduceOp::Max | ReduceOp::Argmax, RegClass::Rd) => i64::MIN.to_string(),
                (ReduceOp::Min | ReduceOp::Argmin, RegClass::Rd) => i64::MAX.to_string(),
                (ReduceOp::Max | ReduceOp::Argmax, _) => {
                    if at == "u32" {
                        "0".into()
                    } else {
                        i32::MIN.to_string()
                    }
                }
                (ReduceOp::Min | ReduceOp::Argmin, _) => {
                    if at == "u32" {
                        u32::MAX.to_string()
                    } else {
                        i32::MAX.to_string()
                    }
                }
            }
        };
        let mv = RegClass::mov_ty;
        // values in accumulation class, masked to identity where not owner along axis
        let mut vals = vec![];
        let mut idxs = vec![];
        for (r, v) in regs.iter().enumerate() {
            let a = match ac {
                RegClass::F => self.widen_f32(v, d),
                RegClass::R if d == DType::Bool => {
                    let t = self.reg(RegClass::R);
                    self.line(format!("selp.u32 {t}, 1, 0, {v};"));
                    t
                }
                _ => v.clone(),
            };
            let a = if plan.replicated {
                // copies along the axis must not be counted twice
                let t = self.reg(RegClass::R);
                let p = self.reg(RegClass::P);
                self.line(format!("add.u32 {t}, {}, {};", lay.thread[axis], lay.reg_offsets[r][axis]));
                self.line(format!("setp.lt.u32 {p}, {t}, {};", shape[axis]));
                let y = self.reg(ac);
                // (an argmax's copies lose to every element, NaN included,
                // and to its index: a NaN, or the identity, at the largest
                // index)
                let id = if arg && ac == RegClass::F { "0f7FC00000".to_string() } else { identity(o) };
                self.line(format!("selp.{} {y}, {a}, {id}, {p};", mv(ac)));
                if arg {
                    let (i, at) = (self.index(&shape, r, axis), self.reg(RegClass::R));
                    self.line(format!("selp.b32 {at}, {i}, -1, {p};"));
                    idxs.push(at);
                }
                y
            } else {
                if arg {
                    idxs.push(self.index(&shape, r, axis));
                }
                a
            };
            vals.push(a);
        }
        let groups = plan.groups.clone();
        // what each group's in-thread step combines: its registers, or the
        // chains of an accumulator carried pre-summed
        let inputs: Vec<Vec<usize>> = match self.partial.get(&x) {
            Some(p) if o == ReduceOp::Sum && p.axis == axis => (0..p.groups.len()).map(|g| (g * p.chains..(g + 1) * p.chains).collect()).collect(),
            Some(_) => return self.err("an accumulator carried pre-summed is reduced only by a sum along its axis"),
            None => groups.clone(),
        };
        // `ordered`: every index `a` may hold is below every index `b` may
        // hold (known statically in-thread), so a tie keeps `a` without
        // comparing indices.
        let combine = |em: &mut Self, a: &str, ai: Option<&str>, b: &str, bi: Option<&str>, ordered: bool| -> Partial {
            let y = em.reg(ac);
            let (ins, better) = match o {
                ReduceOp::Sum if ac == RegClass::F => ("add.rn.f32".to_string(), ""),
                ReduceOp::Sum => (format!("add.{at}"), ""),
                ReduceOp::Max | ReduceOp::Argmax => (format!("max.{at}"), "gt"),
                ReduceOp::Min | ReduceOp::Argmin => (format!("min.{at}"), "lt"),
            };
            // (the value of an (value, index) pair is max/min of the two:
            // it compares as the element the index picks — `max.f32` of a
            // NaN and a number is the number — so it is the `max` as well)
            em.line(format!("{ins} {y}, {a}, {b};"));
            let (Some(ai), Some(bi)) = (ai, bi) else { return (y, None) };
            // take b if it is better, or equal with a smaller index; NaN
            // loses to any number, two NaNs tie
            let take = em.reg(RegClass::P);
            // (a float pair is only combined here where copies lie along
            // the axis — elsewhere `arg_by_value` reduces it — so never
            // `ordered`)
            match (ac == RegClass::F, ordered) {
                (false, true) => em.line(format!("setp.{better}.{at} {take}, {b}, {a};")),
                (fl, _) => {
                    let li = em.reg(RegClass::P);
                    em.line(format!("setp.lt.u32 {li}, {bi}, {ai};"));
                    let t = if fl { em.reg(RegClass::P) } else { take.clone() };
                    em.line(format!("setp.eq.and.{at} {t}, {b}, {a}, {li};"));
                    em.line(format!("setp.{better}.or.{at} {t}, {b}, {a}, {t};"));
                    if fl {
                        // a NaN: take b unless b is a NaN with a larger index
                        let (q, n) = (em.reg(RegClass::P), em.reg(RegClass::P));
                        em.line(format!("setp.nan.and.f32 {q}, {b}, {b}, !{li};"));
                        em.line(format!("setp.nan.and.f32 {n}, {a}, {a}, !{q};"));
                        em.line(format!("or.pred {take}, {t}, {n};"));
                    }
                }
            }
            let i = em.reg(RegClass::R);
            em.line(format!("selp.b32 {i}, {bi}, {ai}, {take};"));
            (y, Some(i))
        };
        // 1. in-thread
        let offs = |r: usize| lay.reg_offsets.get(r).map_or(0, |o| o[axis]);
        let mut partial: Vec<Partial> = vec![];
        for rs in &inputs {
            // pairwise tree: short dependency chains; each node's span of
            // axis offsets says whether a pair is ordered
            let mut level: Vec<(Partial, u32, u32)> =
                rs.iter().map(|&r| ((vals[r].clone(), if arg { Some(idxs[r].clone()) } else { None }), offs(r), offs(r))).collect();
            while level.len() > 1 {
                let mut next = vec![];
                for pair in level.chunks(2) {
                    if let [(p0, lo0, hi0), (p1, lo1, hi1)] = pair {
                        let ordered = !plan.replicated && hi0 < lo1;
                        next.push((combine(self, &p0.0, p0.1.as_deref(), &p1.0, p1.1.as_deref(), ordered), *lo0.min(lo1), *hi0.max(hi1)));
                    } else {
                        next.push(pair[0].clone());
                    }
                }
                level = next;
            }
            partial.push(level.pop().unwrap().0);
        }
        let combine_pairs = |em: &mut Self, a: &Partial, b: &Partial| combine(em, &a.0, a.1.as_deref(), &b.0, b.1.as_deref(), false);
        let partial = self.across_threads(partial, &plan, ac, arg, 0, true, trail, &combine_pairs);
        Ok((partial, groups))
    }

    /// Steps 2–3 of the plan: each group's partial combined with the
    /// other lanes' along the axis (butterfly shuffles), then with the
    /// other warps' through shared memory — one slot per thread and group
    /// (the value of class `xc`, and the index after all the values when
    /// `with_index`) from `at` bytes into the scratch. `lead`/`trail`: a
    /// barrier before the stores (earlier readers of those bytes) and
    /// after the loads (later writers); two exchanges in a row that use
    /// different bytes need neither between them.
    #[allow(clippy::too_many_arguments)]
    fn across_threads(
        &mut self,
        mut partial: Vec<Partial>,
        plan: &ReducePlan,
        xc: RegClass,
        with_index: bool,
        at: u32,
        lead: bool,
        trail: bool,
        combine: &dyn Fn(&mut Self, &Partial, &Partial) -> Partial,
    ) -> Vec<Partial> {
        let mv = RegClass::mov_ty;
        // 2. across lanes along the axis
        for &m in &plan.lane_xor {
            for g in partial.iter_mut() {
                let other = self.shfl(&g.0, xc, m);
                let oi = g.1.as_ref().map(|i| self.shfl(i, RegClass::R, m));
                *g = combine(self, g, &(other, oi));
            }
        }
        // 3. across warps along the axis, through shared memory
        let wpc = plan.warps;
        if wpc <= 1 {
            return partial;
        }
        let sz = if xc == RegClass::Rd { 8 } else { 4 };
        let ng = partial.len() as u32;
        // slot (warp_axis, other-warp-coords, group): index by warp id and group
        // one slot per (thread, group): lanes off the axis hold different
        // partials, lanes along it were already combined by the shuffles
        let nt = self.o.num_warps * 32;
        let per = ng * sz * if with_index { 2 } else { 1 };
        self.smem_need(at + nt * per);
        if lead {
            self.bar_before_scratch_write();
        }
        let base = self.smem_base();
        let slot = self.reg(RegClass::R);
        self.line(format!("mad.lo.u32 {slot}, {}, {per}, {base};", self.tid));
        for (gi, g) in partial.iter().enumerate() {
            let a = self.reg(RegClass::R);
            self.line(format!("add.u32 {a}, {slot}, {};", at + gi as u32 * sz));
            self.line(format!("st.shared.{} [{a}], {};", mv(xc), g.0));
            if let Some(i) = &g.1 {
                self.line(format!("st.shared.b32 [{a}+{}], {i};", ng * sz));
            }
        }
        self.bar();
        // read the other warps along the axis: same warp id except the axis field
        let wsh = plan.warp_shift;
        let clear = self.reg(RegClass::R);
        self.line(format!("and.b32 {clear}, {}, {};", self.warp, !((wpc - 1) << wsh)));
        let mut acc: Vec<Partial> = vec![];
        for j in 0..wpc {
            let w = self.reg(RegClass::R);
            self.line(format!("or.b32 {w}, {clear}, {};", j << wsh));
            let s = self.reg(RegClass::R);
            self.line(format!("mad.lo.u32 {s}, {w}, 32, {};", self.lane));
            self.line(format!("mad.lo.u32 {s}, {s}, {per}, {base};"));
            for gi in 0..partial.len() {
                let a = self.reg(RegClass::R);
                self.line(format!("add.u32 {a}, {s}, {};", at + gi as u32 * sz));
                let v = self.reg(xc);
                self.line(format!("ld.shared.{} {v}, [{a}];", mv(xc)));
                let iv = if with_index {
                    let i = self.reg(RegClass::R);
                    self.line(format!("ld.shared.b32 {i}, [{a}+{}];", ng * sz));
                    Some(i)
                } else {
                    None
                };
                if j == 0 {
                    acc.push((v, iv));
                } else {
                    acc[gi] = combine(self, &acc[gi].clone(), &(v, iv));
                }
            }
        }
        if trail {
            self.bar();
        }
        acc
    }

    /// An `argmax`/`argmin` of a layout without copies along the axis
    /// (`None` otherwise: [`Self::reduce_partials`] carries the (value,
    /// index) pair), in two passes that each combine one 32-bit word a
    /// step: first the `max` (`min`) `m` of the tile as a plain reduction,
    /// then the least index whose element equals `m` — each thread picks
    /// its own first candidate in registers, the threads combine them by
    /// `min.u32`. Where every element is a NaN, `m` is a NaN (`max.f32`
    /// of NaNs) and every element is a candidate: index 0. A NaN loses to
    /// every number (it never equals `m`), −0 ties with +0 (they compare
    /// equal), ties go to the lower index: the pair's semantics, with one
    /// `max.f32` (`min.u32`) a step where the pair needs a NaN-aware
    /// compare of value and index, and the `max` exactly as the plain
    /// reduction gives it.
    fn arg_by_value(&mut self, o: ReduceOp, x: V, axis: usize) -> R<Option<(Vec<Partial>, Vec<Vec<usize>>)>> {
        let shape = self.shape_u32(x);
        let d = self.dtype(x);
        let lay = self.layout(&shape);
        let plan = ReducePlan::new(&lay.bl, &lay.reg_offsets, axis);
        let (ac, at) = acc_class(d);
        if plan.replicated || ac == RegClass::Rd || d == DType::Bool || self.partial.contains_key(&x) {
            return Ok(None);
        }
        let vo = if o == ReduceOp::Argmax { ReduceOp::Max } else { ReduceOp::Min };
        // (no barrier after the value pass's loads: the index pass
        // writes the bytes after the value pass's slots, and its own
        // trailing barrier serves both)
        let (values, groups) = self.reduce_partials_with(vo, x, axis, false)?;
        let regs = self.get(x);
        let mut firsts: Vec<Partial> = vec![];
        for (g, rs) in groups.iter().enumerate() {
            let m = values[g].0.clone();
            let nan = (ac == RegClass::F).then(|| {
                let p = self.reg(RegClass::P);
                self.line(format!("setp.nan.f32 {p}, {m}, {m};"));
                p
            });
            // the thread's first candidate: registers from the highest
            // index down, each taking the index where its element equals m
            // (none: u32::MAX, which loses every `min`)
            let mut order = rs.clone();
            order.sort_by_key(|&r| std::cmp::Reverse(lay.reg_offsets[r][axis]));
            let mut first = "-1".to_string();
            for r in order {
                let v = if ac == RegClass::F { self.widen_f32(&regs[r], d) } else { regs[r].clone() };
                let c = self.reg(RegClass::P);
                match &nan {
                    Some(n) => self.line(format!("setp.eq.or.f32 {c}, {v}, {m}, {n};")),
                    None => self.line(format!("setp.eq.{at} {c}, {v}, {m};")),
                }
                let i = self.index(&shape, r, axis);
                let y = self.reg(RegClass::R);
                self.line(format!("selp.b32 {y}, {i}, {first}, {c};"));
                first = y;
            }
            firsts.push((first, None));
        }
        let least = |em: &mut Self, a: &Partial, b: &Partial| -> Partial {
            let y = em.reg(RegClass::R);
            em.line(format!("min.u32 {y}, {}, {};", a.0, b.0));
            (y, None)
        };
        // (after the value pass's 4-byte slots)
        let after = self.o.num_warps * 32 * groups.len() as u32 * 4;
        let firsts = self.across_threads(firsts, &plan, RegClass::R, false, after, false, true, &least);
        Ok(Some((values.into_iter().zip(firsts).map(|(v, i)| (v.0, Some(i.0))).collect(), groups)))
    }

    /// Step 4: `o`'s result (the index of an `argmax`/`argmin`, else the
    /// value) from the partials, in `res`'s dtype and layout.
    fn reduce_place(&mut self, o: ReduceOp, partial: &[Partial], groups: &[Vec<usize>], x: V, axis: usize, res: V) -> R<Vec<String>> {
        let shape = self.shape_u32(x);
        let (ac, _) = acc_class(self.dtype(x));
        let arg = matches!(o, ReduceOp::Argmax | ReduceOp::Argmin);
        let rd = self.dtype(res);
        let finals: Vec<String> = partial
            .iter()
            .map(|(v, i)| {
                if arg {
                    return i.clone().expect("an argmax's partials carry indices");
                }
                match ac {
                    RegClass::F => self.narrow_f32(v, rd),
                    _ if rd == DType::Bool => {
                        let p = self.reg(RegClass::P);
                        self.line(format!("setp.ne.u32 {p}, {v}, 0;"));
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
        // kept in the slice layout: one register per group, in group order
        // ([`crate::plan::slices`])
        if self.vlay.contains_key(&res) {
            return Ok(finals);
        }
        // slice layout → canonical: write each group's value at its output
        // linear index, read back in the canonical layout.
        self.explain(format!("the result of a reduction of {shape:?} along axis {axis} to the default layout of {out_shape:?} (slice layouts off, or the reduced tile not in its default layout)"));
        let rc = reg_class(Elem::Val(rd));
        let sz = if rc == RegClass::Rd { 8 } else { 4 };
        let n_out: u32 = out_shape.iter().product();
        self.smem_need(n_out * sz);
        self.bar_before_scratch_write();
        let base = self.smem_base();
        let out_strides = {
            let mut s = vec![1u32; out_shape.len()];
            for dd in (0..out_shape.len().saturating_sub(1)).rev() {
                s[dd] = s[dd + 1] * out_shape[dd + 1];
            }
            s
        };
        for (gi, rs) in groups.iter().enumerate() {
            let r = rs[0];
            let a = self.reg(RegClass::R);
            self.line(format!("mov.u32 {a}, 0;"));
            let mut od = 0;
            for dd in 0..shape.len() {
                if dd == axis {
                    continue;
                }
                let i = self.index(&shape, r, dd);
                self.line(format!("mad.lo.u32 {a}, {i}, {}, {a};", out_strides[od] * sz));
                od += 1;
            }
            self.line(format!("add.u32 {a}, {a}, {base};"));
            self.st_shared(rc, &a, &finals[gi]);
        }
        self.bar();
        let m = self.layout(&out_shape).bl.regs();
        let mut out = vec![];
        for r in 0..m {
            let lin = self.lin(&out_shape, r);
            let a = self.reg(RegClass::R);
            self.line(format!("mad.lo.u32 {a}, {lin}, {sz}, {base};"));
            out.push(self.ld_shared(rc, &a));
        }
        self.bar();
        Ok(out)
    }

    /// Registers of a tile (`full`, in its default layout) folded into the
    /// chains of the partial accumulator `p` ([`crate::plan::partial`]):
    /// each chain the sum of the registers that add into it.
    pub(super) fn fold_partial(&mut self, p: &crate::plan::partial::Partial, full: &[String]) -> Vec<String> {
        let mut out: Vec<Option<String>> = vec![None; p.regs()];
        for (r, s) in p.slot_of().into_iter().enumerate() {
            let x = self.widen_f32(&full[r], DType::F32);
            out[s] = Some(match out[s].take() {
                None => x,
                Some(t) => {
                    let y = self.reg(RegClass::F);
                    self.line(format!("add.rn.f32 {y}, {t}, {x};"));
                    y
                }
            });
        }
        out.into_iter().map(|r| r.expect("every chain has a register")).collect()
    }

    /// The update of an accumulator carried pre-summed — `fma(a, b, acc)`
    /// or `acc + e` — added into its chains: each register of the
    /// operands into the chain of its position, positions across groups
    /// interleaved (independent chains side by side).
    pub(super) fn partial_update(&mut self, kind: &OpKind, res: V) -> R<Vec<String>> {
        let p = self.partial.get(&res).cloned().expect("a partial accumulator");
        let (acc, fa, fb) = match kind {
            OpKind::Fma { a, b, c } => (*c, *a, Some(*b)),
            OpKind::Binary { op: BinOp::Add, a, b } if self.partial.contains_key(a) => (*a, *b, None),
            OpKind::Binary { op: BinOp::Add, a, b } => (*b, *a, None),
            _ => return self.err("an accumulator carried pre-summed is updated by an fma or an add only"),
        };
        let mut cur = self.get_raw(acc);
        let (da, ra) = (self.dtype(fa), self.get(fa));
        let rb = fb.map(|b| (self.dtype(b), self.get(b)));
        let at = |r: &Vec<String>, i: usize| r[i.min(r.len() - 1)].clone();
        let slot = p.slot_of();
        let n = p.groups[0].len();
        for pos in 0..n {
            for g in &p.groups {
                let r = g[pos];
                let s = slot[r];
                let x = self.widen_f32(&at(&ra, r), da);
                let y = self.reg(RegClass::F);
                match &rb {
                    Some((db, rb)) => {
                        let w = self.widen_f32(&at(rb, r), *db);
                        self.line(format!("fma.rn.f32 {y}, {x}, {w}, {};", cur[s]));
                    }
                    None => self.line(format!("add.rn.f32 {y}, {}, {x};", cur[s])),
                }
                cur[s] = y;
            }
        }
        Ok(cur)
    }

    /// The scan of [`Self::scan`] where the layout allows it (no copies of
    /// an element, the canonical lane/warp/repetition order along the
    /// axis), as Triton scans: each thread runs over its contiguous
    /// elements in registers, the threads' totals are scanned across the
    /// lanes of the axis by `shfl.up` (log₂ lanes steps), the warps'
    /// totals go through shared memory (one slot per warp and row, one
    /// barrier), repetitions carry their running total. `None`: not this
    /// layout ([`Self::scan`] takes the general path).
    fn scan_by_threads(&mut self, shape: &[u32], axis: usize, vals: &[String], ac: RegClass, at: &str, ty: &str) -> R<Option<Vec<String>>> {
        let lay = self.layout(shape);
        let bl = lay.bl.clone();
        let (spt, tpw, wpc, reps) = (bl.spt[axis], bl.tpw[axis], bl.wpc[axis], bl.reps[axis]);
        let cov = bl.coverage(axis);
        let canonical = bl.warp_mul[axis] == tpw && bl.rep_off[axis].iter().enumerate().all(|(q, &o)| o == q as u32 * cov);
        if bl.any_replication() || !canonical || ac == RegClass::Rd || shape[axis] < 2 {
            return Ok(None);
        }
        let strides = bl.strides();
        let stride = strides[axis];
        let zero = if ac == RegClass::F { "0f00000000" } else { "0" };
        // the registers of each row (the other dimensions' offsets), by
        // position along the axis
        let mut rows: Vec<(Vec<u32>, Vec<(u32, usize)>)> = vec![];
        for (r, off) in lay.reg_offsets.iter().enumerate() {
            let mut key = off.clone();
            key[axis] = 0;
            match rows.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push((off[axis], r)),
                None => rows.push((key, vec![(off[axis], r)])),
            }
        }
        // this thread's lane and warp fields along the axis
        let lf = self.reg(RegClass::R);
        self.line(format!("bfe.u32 {lf}, {}, {}, {};", self.lane, bl.lane_shift[axis], tpw.trailing_zeros().max(1)));
        if tpw == 1 {
            self.line(format!("mov.u32 {lf}, 0;"));
        }
        let wf = self.reg(RegClass::R);
        if wpc > 1 {
            self.line(format!("bfe.u32 {wf}, {}, {}, {};", self.warp, bl.warp_shift[axis], wpc.trailing_zeros()));
        } else {
            self.line(format!("mov.u32 {wf}, 0;"));
        }
        let add = |me: &mut Self, a: &str, b: &str| -> String {
            let o = me.reg(ac);
            me.line(format!("add.{at} {o}, {a}, {b};"));
            o
        };
        let mut out = vals.to_vec();
        let base = if wpc > 1 {
            self.smem_need(shape.iter().product::<u32>() * 4);
            self.bar_before_scratch_write();
            Some(self.smem_base())
        } else {
            None
        };
        for (_, regs) in rows.iter_mut() {
            regs.sort();
            // the row's first element's linear index (slots: row + w·stride)
            let row0 = {
                let (_, r0) = regs[0];
                let lin = self.lin(shape, r0);
                let i = self.index(shape, r0, axis);
                let o = self.reg(RegClass::R);
                self.line(format!("mul.lo.u32 {o}, {i}, {stride};"));
                self.line(format!("sub.u32 {o}, {lin}, {o};"));
                o
            };
            let mut carry: Option<String> = None;
            for q in 0..reps {
                let mine: Vec<usize> = regs.iter().filter(|(p, _)| p / cov == q).map(|&(_, r)| r).collect();
                debug_assert_eq!(mine.len() as u32, spt);
                // 1. the thread's run, in registers
                let mut run = vec![out[mine[0]].clone()];
                for &r in &mine[1..] {
                    let prev = run.last().unwrap().clone();
                    run.push(add(self, &prev, &out[r]));
                }
                let total = run.last().unwrap().clone();
                // 2. inclusive scan of the totals over the lanes
                let mut incl = total.clone();
                let mut d = 1;
                while d < tpw {
                    let t = self.reg(ac);
                    let p = self.reg(RegClass::P);
                    self.line(format!("shfl.sync.up.b32 {t}, {incl}, {}, 0, -1;", d << bl.lane_shift[axis]));
                    self.line(format!("setp.ge.u32 {p}, {lf}, {d};"));
                    let n2 = self.reg(ac);
                    self.line(format!("mov.{ty} {n2}, {incl};"));
                    self.line(format!("@{p} add.{at} {n2}, {n2}, {t};"));
                    incl = n2;
                    d *= 2;
                }
                // the exclusive prefix: the previous lane's inclusive one
                let excl = self.reg(ac);
                if tpw > 1 {
                    let p = self.reg(RegClass::P);
                    self.line(format!("shfl.sync.up.b32 {excl}, {incl}, {}, 0, -1;", 1u32 << bl.lane_shift[axis]));
                    self.line(format!("setp.eq.u32 {p}, {lf}, 0;"));
                    self.line(format!("@{p} mov.{ty} {excl}, {zero};"));
                } else {
                    self.line(format!("mov.{ty} {excl}, {zero};"));
                }
                // 3. the warps before this one, and the repetition's total
                let mut offset = excl;
                let rep_total;
                if let Some(base) = &base {
                    let last = self.reg(RegClass::P);
                    self.line(format!("setp.eq.u32 {last}, {lf}, {};", tpw - 1));
                    let a = self.reg(RegClass::R);
                    self.line(format!("mad.lo.u32 {a}, {wf}, {stride}, {row0};"));
                    self.line(format!("mad.lo.u32 {a}, {a}, 4, {base};"));
                    self.st_shared_if(ac, &a, &incl, Some(&last));
                    self.bar();
                    let mut before = self.reg(ac);
                    self.line(format!("mov.{ty} {before}, {zero};"));
                    let mut all = self.reg(ac);
                    self.line(format!("mov.{ty} {all}, {zero};"));
                    for w in 0..wpc {
                        let a = self.reg(RegClass::R);
                        self.line(format!("add.u32 {a}, {row0}, {};", w * stride));
                        self.line(format!("mad.lo.u32 {a}, {a}, 4, {base};"));
                        let v = self.ld_shared(ac, &a);
                        let p = self.reg(RegClass::P);
                        self.line(format!("setp.gt.u32 {p}, {wf}, {w};"));
                        let b2 = self.reg(ac);
                        self.line(format!("mov.{ty} {b2}, {before};"));
                        self.line(format!("@{p} add.{at} {b2}, {b2}, {v};"));
                        before = b2;
                        all = add(self, &all, &v);
                    }
                    // (the slots are read before the next repetition writes them)
                    self.bar();
                    offset = add(self, &offset, &before);
                    rep_total = all;
                } else {
                    // the last lane's inclusive prefix
                    let t = self.reg(ac);
                    let clear = !(((tpw - 1) << bl.lane_shift[axis]) as i32);
                    let src = self.reg(RegClass::R);
                    self.line(format!("and.b32 {src}, {}, {clear};", self.lane));
                    self.line(format!("or.b32 {src}, {src}, {};", (tpw - 1) << bl.lane_shift[axis]));
                    self.line(format!("shfl.sync.idx.b32 {t}, {incl}, {src}, 31, -1;"));
                    rep_total = t;
                }
                if let Some(c) = &carry {
                    offset = add(self, &offset, c);
                }
                for (k, &r) in mine.iter().enumerate() {
                    out[r] = add(self, &run[k], &offset);
                }
                if q + 1 < reps {
                    carry = Some(match &carry {
                        Some(c) => add(self, c, &rep_total),
                        None => rep_total,
                    });
                }
            }
        }
        Ok(Some(out))
    }

    pub(super) fn shfl(&mut self, v: &str, c: RegClass, mask: u32) -> String {
        match c {
            RegClass::Rd => {
                let (lo, hi) = (self.reg(RegClass::R), self.reg(RegClass::R));
                self.line(format!("mov.b64 {{{lo}, {hi}}}, {v};"));
                self.line(format!("shfl.sync.bfly.b32 {lo}, {lo}, {mask}, 31, -1;"));
                self.line(format!("shfl.sync.bfly.b32 {hi}, {hi}, {mask}, 31, -1;"));
                let o = self.reg(RegClass::Rd);
                self.line(format!("mov.b64 {o}, {{{lo}, {hi}}};"));
                o
            }
            _ => {
                let o = self.reg(c);
                self.line(format!("shfl.sync.bfly.b32 {o}, {v}, {mask}, 31, -1;"));
                o
            }
        }
    }

    /// Inclusive cumulative sum along `axis` through shared memory, in
    /// ⌈log₂ len⌉ rounds (Hillis–Steele): in round `k` each element adds
    /// the value `2ᵏ` places before it along the axis, read from the
    /// previous round's copy of the tile (two copies, one barrier a
    /// round). Any layout, any axis; every thread updates the elements it
    /// holds (the copies of a replicated layout write equal values). Float
    /// partial sums combine in a tree in f32, within the accumulation bound
    /// docs/semantics.md gives `cumsum`; integer sums are exact. (Was one
    /// serial loop per element over all of its predecessors: O(len²) —
    /// 36× slower than Triton's scan on 1024-wide rows, `user-suite`.)
    pub(super) fn scan(&mut self, x: V, axis: usize, res: V) -> R<Vec<String>> {
        let shape = self.shape_u32(x);
        let d = self.dtype(x);
        let rd = self.dtype(res);
        let regs = self.get(x);
        let (ac, at) = if d.is_float() {
            (RegClass::F, "rn.f32")
        } else if rd == DType::I64 {
            (RegClass::Rd, "s64")
        } else {
            (RegClass::R, "s32")
        };
        let (sz, ty) = match ac {
            RegClass::Rd => (8u32, "b64"),
            RegClass::F => (4, "f32"),
            _ => (4, "b32"),
        };
        let mut cur: Vec<String> = regs.iter().map(|v| if ac == RegClass::F { self.widen_f32(v, d) } else { v.clone() }).collect();
        let n: u32 = shape.iter().product();
        let len = shape[axis];
        let stride = self.layout(&shape).bl.strides()[axis];
        let rounds = len.next_power_of_two().trailing_zeros();
        if let Some(done) = self.scan_by_threads(&shape, axis, &cur, ac, at, ty)? {
            cur = done;
        } else if rounds > 0 {
            self.smem_need(2 * n * sz);
            self.bar_before_scratch_write();
            let base = self.smem_base();
            self.store_tile_smem(&cur, &shape, ac, &base);
            self.bar();
            // each register's byte offset and index along the axis
            let at_of: Vec<(String, String)> = (0..regs.len())
                .map(|r| {
                    let lin = self.lin(&shape, r);
                    let o = self.reg(RegClass::R);
                    self.line(format!("mul.lo.u32 {o}, {lin}, {sz};"));
                    (o, self.index(&shape, r, axis))
                })
                .collect();
            for k in 0..rounds {
                let off = 1u32 << k;
                // (round k reads copy k % 2 and writes the other)
                let (src, dst) = if k % 2 == 0 { (0, n * sz) } else { (n * sz, 0) };
                let mut next = vec![];
                for (r, (o, i)) in at_of.iter().enumerate() {
                    let p = self.reg(RegClass::P);
                    self.line(format!("setp.ge.u32 {p}, {i}, {off};"));
                    let a = self.reg(RegClass::R);
                    self.line(format!("add.u32 {a}, {base}, {o};"));
                    let v = self.reg(ac);
                    let rel = src as i64 - (off * stride * sz) as i64;
                    // (PTX spells a negative displacement `+-4`)
                    let rel = format!("+{rel}");
                    self.line(format!("@{p} ld.shared.{ty} {v}, [{a}{rel}];"));
                    let t = self.reg(ac);
                    self.line(format!("mov.{ty} {t}, {};", cur[r]));
                    self.line(format!("@{p} add.{at} {t}, {t}, {v};"));
                    if k + 1 < rounds {
                        self.line(format!("st.shared.{ty} [{a}+{dst}], {t};"));
                    }
                    next.push(t);
                }
                cur = next;
                if k + 1 < rounds {
                    self.bar();
                }
            }
        }
        let out = cur.iter().map(|v| if ac == RegClass::F { self.narrow_f32(v, rd) } else { v.clone() }).collect();
        self.bar();
        Ok(out)
    }
}
