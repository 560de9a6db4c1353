//! Structured control flow and the per-op dispatch: blocks, `for` loops with
//! loop-carried values (and the ring waits at the top of pipelined bodies),
//! uniform `if`s, and `op`, which routes every IR op to the file that
//! lowers it.

use super::*;
use crate::plan::convert::{ConvertPlan, Movement};

impl<'k> PtxWriter<'k> {
    pub(super) fn block(&mut self, b: &Block) -> R<()> {
        self.block_with(b, &[])
    }

    /// A block; with `late`, the body of a loop whose in-flight `dot`
    /// `late` issues its rings' copies after its MMA
    /// ([`crate::ptx::async_copy::AsyncPlan::late`]): those loads are held
    /// back until the `dot` (which waits for the previous iteration's MMA)
    /// and the barrier before a ring's first copy after a `dot` (every
    /// warpgroup has waited), then fill the slots that MMA read. (They only feed the next iterations: nothing in between reads
    /// them.)
    fn block_with(&mut self, b: &Block, late: &[(V, [usize; 2])]) -> R<()> {
        self.remat.enter();
        self.conv.push(HashMap::new());
        self.packed.push(HashMap::new());
        self.depth += 1;
        let mut held: Vec<Vec<&Op>> = vec![vec![]; late.len()];
        for (i, op) in b.ops.iter().enumerate() {
            self.loc = op.loc;
            if self.depth == 1 && self.last_ring_op.is_some_and(|l| i > l) {
                self.rings_dead = true;
            }
            if self.role == Role::Producer && !self.ws.as_ref().is_some_and(|w| w.runs(op)) {
                continue;
            }
            let ring = op.results.first().and_then(|r| self.ring_plan.loads.get(r));
            if let Some(j) =
                late.iter().position(|(_, cs)| matches!(op.kind, OpKind::Load { .. } | OpKind::LoadBlock { .. }) && ring.is_some_and(|c| cs.contains(c)))
            {
                held[j].push(op);
                continue;
            }
            self.op(op)?;
            if let Some(j) = late.iter().position(|(d, _)| op.results.first() == Some(d)) {
                // (the first copy's barrier: `ring_dirty`, set by the `dot`)
                for op in std::mem::take(&mut held[j]) {
                    self.loc = op.loc;
                    self.op(op)?;
                }
            }
        }
        for op in held.into_iter().flatten() {
            self.loc = op.loc;
            self.op(op)?;
        }
        // (nothing in flight leaves a block: a loop's next iteration
        // refills the slots and rewrites the registers its MMAs use; the
        // groups held through a branch are not this block's)
        if self.wg_pending.len() > self.wg_held {
            self.wg_wait_all();
        }
        self.depth -= 1;
        self.conv.pop();
        self.packed.pop();
        self.remat.leave();
        Ok(())
    }

    pub(super) fn op(&mut self, op: &Op) -> R<()> {
        // pending `wgmma` groups: waited for before an op reads their
        // results, all of them before a nested region — except a branch
        // with no loop or `dot` inside, which waits only for the groups it
        // reads (attention's masks under `iv < E`: the previous block's
        // P·V keeps running through them)
        let mut hold = false;
        if !self.wg_pending.is_empty() {
            if op.kind.regions().is_empty() {
                for v in op.kind.operands() {
                    self.wg_wait_for(v);
                }
            } else if let Some(reads) = branch_reads(op) {
                for v in reads {
                    self.wg_wait_for(v);
                }
                hold = true;
            } else {
                self.wg_wait_all();
            }
        }
        if !matches!(op.kind, OpKind::Dot { .. } | OpKind::Yield(_)) {
            self.work += 1;
        }
        let k = self.k;
        let res = op.results.first().copied();
        let out: Option<Vec<String>> = match &op.kind {
            OpKind::Param(i) => {
                let i = *i as usize;
                let p = &k.params[i];
                let r = match p.kind {
                    ParamKind::Ptr(_) => {
                        let r = self.reg(RegClass::Rd);
                        self.line(format!("ld.param.u64 {r}, [p{i}];"));
                        self.line(format!("cvta.to.global.u64 {r}, {r};"));
                        r
                    }
                    ParamKind::Scalar(d) => {
                        if d.fp8().is_some() {
                            return self.err("fp8 scalar arguments are not supported (pass an f32)");
                        }
                        let c = reg_class(Elem::Val(d));
                        let r = self.reg(c);
                        match c {
                            RegClass::F => self.line(format!("ld.param.f32 {r}, [p{i}];")),
                            RegClass::H => self.line(format!("ld.param.b16 {r}, [p{i}];")),
                            RegClass::Rd => self.line(format!("ld.param.b64 {r}, [p{i}];")),
                            RegClass::R => self.line(format!("ld.param.b32 {r}, [p{i}];")),
                            RegClass::P => {
                                let t = self.reg(RegClass::R);
                                self.line(format!("ld.param.b32 {t}, [p{i}];"));
                                self.line(format!("setp.ne.u32 {r}, {t}, 0;"));
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
                let c = reg_class(Elem::Val(d));
                let r = self.reg(c);
                match (c, l) {
                    (RegClass::F, _) => {
                        let f = match l {
                            Lit::Float(f) => *f,
                            Lit::Int(i) => *i as f64,
                            Lit::Bool(b) => *b as i64 as f64,
                        };
                        self.line(format!("mov.f32 {r}, {};", f32_hex(f)));
                    }
                    (RegClass::H, _) => {
                        let f = match l {
                            Lit::Float(f) => *f,
                            Lit::Int(i) => *i as f64,
                            Lit::Bool(b) => *b as i64 as f64,
                        };
                        let o = f32_round_to_odd(f);
                        let bits = if d == DType::F16 { half::f16::from_f32(o).to_bits() } else { half::bf16::from_f32(o).to_bits() };
                        self.line(format!("mov.b16 {r}, 0x{bits:04X};"));
                        let back = if d == DType::F16 { half::f16::from_bits(bits).to_f64() } else { half::bf16::from_bits(bits).to_f64() };
                        self.h_const.insert(r.clone(), back);
                    }
                    (RegClass::P, _) => {
                        let b = match l {
                            Lit::Bool(b) => *b,
                            Lit::Int(i) => *i != 0,
                            Lit::Float(f) => *f != 0.0,
                        };
                        self.line(format!("setp.eq.u32 {r}, 0, {};", if b { 0 } else { 1 }));
                    }
                    (RegClass::R, _) => {
                        let i = match l {
                            Lit::Int(i) => *i,
                            Lit::Bool(b) => *b as i64,
                            Lit::Float(f) => *f as i64,
                        };
                        // (an fp8 constant: its code)
                        let i = match (d.fp8(), l) {
                            (Some(fmt), Lit::Float(f)) => ferrotile_ir::numeric::fp8_encode(f32_round_to_odd(*f), fmt) as i64,
                            (Some(fmt), _) => ferrotile_ir::numeric::fp8_encode(i as f32, fmt) as i64,
                            (None, _) => i,
                        };
                        let i = match d {
                            DType::I8 => i as i8 as i64,
                            DType::U8 => i as u8 as i64,
                            DType::U32 => i as u32 as i64,
                            _ => i as i32 as i64,
                        };
                        self.line(format!("mov.b32 {r}, {};", i as i32));
                    }
                    (RegClass::Rd, _) => {
                        let i = match l {
                            Lit::Int(i) => *i,
                            Lit::Bool(b) => *b as i64,
                            Lit::Float(f) => *f as i64,
                        };
                        self.line(format!("mov.b64 {r}, {i};"));
                    }
                }
                Some(vec![r])
            }
            OpKind::ProgramId(a) | OpKind::NumPrograms(a) => {
                let r = self.reg(RegClass::R);
                let ax = ["x", "y", "z"][*a as usize];
                let sreg = if matches!(op.kind, OpKind::ProgramId(_)) { "ctaid" } else { "nctaid" };
                self.line(format!("mov.u32 {r}, %{sreg}.{ax};"));
                Some(vec![r])
            }
            OpKind::Arange { start, .. } => {
                let v = res.unwrap();
                let shape = self.shape_u32(v);
                let s = start.known().unwrap();
                let n = self.nregs(v);
                // (in a slice layout: the plan's backward rule,
                // `plan::slices::broadcast_seeds`)
                let lay = self.vlay.get(&v).cloned().map(|bl| self.layout_of_bl(&bl));
                let mut regs = vec![];
                for r in 0..n {
                    let i = match &lay {
                        Some(l) => self.index_of(l, r, 0),
                        None => self.index(&shape, r, 0),
                    };
                    if s == 0 {
                        regs.push(i);
                    } else {
                        let o = self.reg(RegClass::R);
                        self.line(format!("add.s32 {o}, {i}, {s};"));
                        self.affine_binary(BinOp::Add, DType::I32, &o, (&i, None), ("", Some(s)));
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
            // an expanded slice keeps its registers ([`crate::plan::slices`])
            OpKind::ExpandDims { x, .. } if self.vlay.contains_key(&res.unwrap()) => Some(self.get_raw(*x)),
            // index arithmetic is recomputed in place ([`crate::plan::remat`])
            // (not of a value in a per-value layout: it is broadcast from its
            // registers below, not recomputed from leaves held in that layout)
            OpKind::Broadcast { x, .. } | OpKind::ExpandDims { x, .. } if !self.vlay.contains_key(x) && crate::plan::remat::remat_into(self, res.unwrap())? => {
                return Ok(())
            }
            OpKind::Broadcast { x, .. } => {
                let v = res.unwrap();
                // a slice broadcast back into the layout it was reduced
                // from moves nothing
                if let Some(regs) = self.vlay.get(x).cloned().and_then(|have| self.broadcast_remap(*x, &have, v)) {
                    self.vals.insert(v, regs);
                    return Ok(());
                }
                let (src, dst) = (self.shape_u32(*x), self.shape_u32(v));
                let plan = ConvertPlan::new(&Movement::Broadcast, &src, &dst, true);
                // an `expand_dims` left unconverted (below): the
                // broadcast reads its operand's registers, laid out as the
                // expanded tile would be (the new axis's stride unused)
                if let Some(&(y, axis)) = self.expand_then_broadcast.get(x).filter(|_| !self.vals.contains_key(x)) {
                    let ysh = self.shape_u32(y);
                    let strides: Vec<u32> = plan.src_strides.iter().enumerate().filter(|(d, _)| *d != axis).map(|(_, s)| *s).collect();
                    Some(self.convert_from(y, &ysh, &strides, &src, &dst, &plan)?)
                } else {
                    Some(self.convert(*x, &src, &dst, &plan)?)
                }
            }
            // an `expand_dims` only broadcasts read, of a value in its
            // default layout: converted once, by each broadcast
            OpKind::ExpandDims { x, .. }
                if self.expand_then_broadcast.contains_key(&res.unwrap()) && !self.vlay.contains_key(x) && !self.vlay.contains_key(&res.unwrap()) =>
            {
                return Ok(())
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
            // (read from its input's ring slot the other way: no data moves)
            OpKind::Trans { x, .. } if self.ring_plan.flipped.contains_key(&res.unwrap()) => Some(self.get(*x)),
            OpKind::Trans { x, perm } => {
                let v = res.unwrap();
                let (src, dst) = (self.shape_u32(*x), self.shape_u32(v));
                let perm = perm.iter().map(|&p| p as usize).collect();
                let plan = ConvertPlan::new(&Movement::Permute(perm), &src, &dst, true);
                Some(self.convert(*x, &src, &dst, &plan)?)
            }
            // an accumulator's update, added into its chains
            // ([`crate::plan::partial`])
            kind @ (OpKind::Fma { .. } | OpKind::Binary { .. }) if res.is_some_and(|r| self.partial.contains_key(&r)) => {
                Some(self.partial_update(kind, res.unwrap())?)
            }
            // the elementwise ops (`OpKind::is_elementwise`), listed for
            // the exhaustive match
            kind @ (OpKind::Binary { .. }
            | OpKind::Cmp { .. }
            | OpKind::Unary { .. }
            | OpKind::Fma { .. }
            | OpKind::Select { .. }
            | OpKind::Cast { .. }
            | OpKind::Bitcast { .. }
            | OpKind::AddPtr { .. }) => {
                // computed in the layout the plan gives the result
                let prev = std::mem::replace(&mut self.want, res.and_then(|r| self.vlay.get(&r).cloned()));
                let out = self.elementwise_once(kind);
                self.want = prev;
                Some(out?)
            }
            OpKind::Load { ptr, mask, .. } if self.ring_plan.loads.contains_key(&res.unwrap()) => Some(self.load_async(*ptr, *mask, res.unwrap())?),
            OpKind::LoadBlock { view, offsets, .. } if self.ring_plan.loads.contains_key(&res.unwrap()) => Some(self.load_tma(*view, offsets, res.unwrap())?),
            OpKind::Load { ptr, mask, other } => {
                // (a load in a per-value layout reads its operands in it)
                let prev = std::mem::replace(&mut self.want, res.and_then(|r| self.vlay.get(&r).cloned()));
                let out = self.load(*ptr, *mask, *other, res.unwrap());
                self.want = prev;
                Some(out?)
            }
            OpKind::Store { ptr, value, mask } => {
                self.store(*ptr, *value, *mask, false)?;
                None
            }
            OpKind::AtomicAdd { ptr, value, mask, sem } => self.atomic_add(*ptr, *value, *mask, *sem, res)?,
            OpKind::MakeView { base, shape, strides } => {
                // A view is kept as [base, dims..., strides...] (64-bit).
                let mut regs = vec![self.get(*base)[0].clone()];
                for v in shape.iter().chain(strides) {
                    let r = self.get(*v)[0].clone();
                    if self.dtype(*v) == DType::I64 {
                        regs.push(r);
                    } else {
                        let w = self.reg(RegClass::Rd);
                        self.line(format!("cvt.s64.s32 {w}, {r};"));
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
                let (preds, _) = self.owned_lanes(&shape, Some(&inb), inb.len());
                self.store_regs(&ptrs, &preds, &vals, d, false, 1)?;
                None
            }
            OpKind::Reduce { op: o, x, axis } => Some(self.reduce(*o, *x, *axis as usize, res.unwrap())?),
            OpKind::Scan { x, axis, .. } => Some(self.scan(*x, *axis as usize, res.unwrap())?),
            OpKind::Dot { a, b, acc, precision } => Some(self.dot(*a, *b, *acc, *precision, res.unwrap())?),
            OpKind::For { lo, hi, step, inits, body } => {
                // loop-invariant operands copied by `cp.async` into slots
                // of their own ([`crate::ptx::async_copy::AsyncPlan::invariant`]):
                // waited for, fenced for the tensor cores and barriered here,
                // at the entry of the outermost loop whose `dot`s read them
                // (with the copies issued since: the pipeline's first tiles,
                // a one-time wait), so the `dot`s inside read them as ready
                // — only inside this loop: an entry in one branch does not
                // cover a loop after the branch (`inv_waited` is a stack)
                let mut fresh = std::collections::HashSet::new();
                if self.role == Role::All {
                    let mut ops = vec![];
                    dot_operand_values(body, &mut ops);
                    fresh = ops
                        .into_iter()
                        .map(|x| self.ring_plan.source(x))
                        .filter(|x| self.ring_plan.invariant_cp(*x) && self.vals.contains_key(x) && !self.inv_covered(*x))
                        .collect();
                    if !fresh.is_empty() {
                        self.cp_commit();
                        self.line("cp.async.wait_group 0;");
                        self.line("fence.proxy.async.shared::cta;");
                        self.bar();
                        self.ring_dirty = false;
                    }
                }
                self.inv_waited.push(fresh);
                let ring_loop = super::has_ring(op, &self.ring_plan);
                self.ring_loops += ring_loop as u32;
                let ivd = self.dtype(body.args[0]);
                let iv = self.reg(reg_class(Elem::Val(ivd)));
                let (rlo, rhi, rst) = (self.get(*lo)[0].clone(), self.get(*hi)[0].clone(), self.get(*step)[0].clone());
                let ivc = reg_class(Elem::Val(ivd));
                self.mov(ivc, &iv, &rlo);
                self.vals.insert(body.args[0], vec![iv.clone()]);
                // (the producer carries only the scalars its copies need)
                let keep: Vec<bool> =
                    body.args[1..].iter().map(|a| self.role != Role::Producer || self.ws.as_ref().is_some_and(|w| w.vals.contains(a))).collect();
                let mut carried = vec![];
                // (per carried value: held as 16-bit pairs in words)
                let mut as_words: Vec<bool> = vec![];
                let yields_all: Vec<V> = body.yields().to_vec();
                // the repetition each carried tile's registers keep: of the
                // load it is yielded from, or of the carried value it is
                // yielded from (a pipelined load's shift register)
                let mut pats: Vec<Option<Vec<usize>>> = yields_all.iter().map(|y| self.load_alias_pattern(*y)).collect();
                for _ in 0..pats.len() {
                    for i in 0..pats.len() {
                        if pats[i].is_none() {
                            if let Some(j) = body.args[1..].iter().position(|a| *a == yields_all[i]) {
                                pats[i] = pats[j].clone();
                            }
                        }
                    }
                }
                for (((a, init), _), pat) in body.args[1..].iter().zip(inits).zip(&keep).zip(&pats).filter(|((_, k), _)| **k) {
                    let mut regs = self.fresh_like(*a);
                    let c = self.reg_class_of(*a);
                    // (in the carried value's layout: [`crate::plan::slices`])
                    let src = self.get_as(*init, *a);
                    // (an accumulator carried pre-summed enters as the sums
                    // of its initial value's registers: [`crate::plan::partial`])
                    let src = match self.partial.get(a).cloned() {
                        Some(p) => self.fold_partial(&p, &src),
                        None => src,
                    };
                    // a tile whose registers repeat (loaded once per run:
                    // `load_alias_pattern`) entering and yielded with the
                    // same repetition carries one register per run
                    if !self.vlay.contains_key(a) && !self.partial.contains_key(a) {
                        if let Some(pat) = pat {
                            if pat.len() == src.len() && (0..src.len()).all(|i| src[i] == src[pat[i]]) {
                                for i in 0..regs.len() {
                                    regs[i] = regs[pat[i]].clone();
                                }
                            }
                        }
                    }
                    // a 16-bit tile of distinct registers is carried as
                    // words, two elements each: what packs its pairs (a
                    // tensor-core fragment, a packed op, a vector store)
                    // then takes the word instead of rebuilding it from
                    // two halves every iteration, and a tile loaded as
                    // words (a prefetch) is carried as it came
                    let distinct = (0..regs.len()).all(|i| !regs[..i].contains(&regs[i]));
                    if c == RegClass::H && self.o.packed_16bit && regs.len() >= 2 && regs.len().is_multiple_of(2) && distinct {
                        let words: Vec<String> = (0..regs.len() / 2).map(|_| self.reg(RegClass::R)).collect();
                        for (i, w) in words.iter().enumerate() {
                            let s = self.pack_b16(&src[2 * i], &src[2 * i + 1]);
                            self.mov(RegClass::R, w, &s);
                        }
                        as_words.push(true);
                        carried.push((RegClass::R, words));
                        continue;
                    }
                    for (d, s) in regs.iter().zip(&src) {
                        self.mov(c, d, s);
                    }
                    self.vals.insert(*a, regs.clone());
                    as_words.push(false);
                    carried.push((c, regs));
                }
                let (head, end) = (self.label(), self.label());
                let p = self.reg(RegClass::P);
                let t = ity(ivd);
                // The trip count of `(lo..hi).step_by(step)`, whatever the
                // values (docs/semantics.md): no iteration unless lo < hi
                // and step > 0; then another one while hi − iv > step, an
                // unsigned comparison that cannot overflow (iv < hi holds
                // inside the loop), where `iv + step < hi` could wrap.
                self.cp_commit();
                self.line(format!("setp.ge.{t} {p}, {iv}, {rhi};"));
                self.line(format!("setp.le.or.{t} {p}, {rst}, 0, {p};"));
                self.line(format!("@{p} bra.uni {end};"));
                self.body.push_str(&format!("{head}:\n"));
                // (word-carried values: their halves, known as the words'
                // so that packing them again takes the word)
                self.unpack_carried(&carried, &as_words, &body.args[1..], &keep);
                // copies of the body per trip of the emitted loop
                // (`unroll_copies`), each after the first entered only if
                // its iteration runs: exits after copy j − 1 (registers of
                // its yields, kept for the stubs after the loop)
                let copies = self.unroll_copies(body, &carried);
                self.unrolled += (copies > 1) as u32;
                let mut exits: Vec<(String, Vec<Vec<String>>)> = vec![];
                // (each copy's induction value in a register of its own:
                // facts the printer keeps about registers derived from it
                // — widenings, shifts — stay true for the copy that made
                // them; the loop's register is advanced at the back edge)
                let mut cur_iv = iv.clone();
                for copy in 0..copies {
                    if copy > 0 {
                        let ys: Vec<V> = body.yields().to_vec();
                        // (in a scope of their own, as the back edge's)
                        self.conv.push(HashMap::new());
                        let prev: Vec<Vec<String>> = ys.iter().zip(&body.args[1..]).map(|(y, a)| self.get_as(*y, *a)).collect();
                        self.conv.pop();
                        let (ut, wide) = if t == "s64" { ("u64", RegClass::Rd) } else { ("u32", RegClass::R) };
                        let (rem, more) = (self.reg(wide), self.reg(RegClass::P));
                        let exit = self.label();
                        let next_iv = self.reg(ivc);
                        self.line(format!("sub.{t} {rem}, {rhi}, {cur_iv};"));
                        self.line(format!("setp.gt.{ut} {more}, {rem}, {rst};"));
                        self.line(format!("add.{t} {next_iv}, {cur_iv}, {rst};"));
                        self.line(format!("@!{more} bra.uni {exit};"));
                        self.vals.insert(body.args[0], vec![next_iv.clone()]);
                        cur_iv = next_iv;
                        // the next copy reads the previous one's yields where
                        // they are: no copy into the carried registers
                        for (a, regs) in body.args[1..].iter().zip(&prev) {
                            self.vals.insert(*a, regs.clone());
                        }
                        exits.push((exit, prev));
                    }
                    self.ring_dirty = true;
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
                            let (da, db) = (self.ring_plan.carried.get(a)?.1, self.ring_plan.carried.get(b)?.1);
                            Some((*a, *b, da.min(db), *precision))
                        }
                        _ => None,
                    });
                    let tma_only = |em: &Self, v: V| em.ring_plan.class_of(v).is_some_and(|c| em.ring_plan.tma[c].is_some());
                    let ring_dot = ring_dot.filter(|(a, b, ..)| match self.role {
                        Role::All => true,
                        Role::Consumer => !(tma_only(self, *a) && tma_only(self, *b)),
                        Role::Producer => false,
                    });
                    // (every `dot` of the body the plan made late: its rings
                    // have no slot to spare for early copies)
                    let late: Vec<(V, [usize; 2])> = body
                        .ops
                        .iter()
                        .filter_map(|o| match &o.kind {
                            OpKind::Dot { a, b, .. } if self.ring_plan.late.contains(&o.results[0]) => {
                                Some((o.results[0], [self.ring_plan.class_of(*a)?, self.ring_plan.class_of(*b)?]))
                            }
                            _ => None,
                        })
                        .collect();
                    if let Some((a, b, d, precision)) = ring_dot {
                        // (TMA rings complete on their mbarriers, which the
                        // `dot` waits on; the barrier here frees the slots the
                        // prefetches reuse)
                        let ap = &self.ring_plan;
                        let cp = |v: V| ap.class_of(v).is_some_and(|c| ap.tma[c].is_none());
                        // (only the tensor cores' async proxy needs the fence;
                        // `mma.sync` operands are read with `ldmatrix`)
                        let swizzled =
                            |v: V| cp(v) && matches!(ap.class_of(v).map(|c| ap.layout[c]), Some(crate::ptx::async_copy::SlotLayout::Swizzled { .. }));
                        let (wait, fence) = (cp(a) || cp(b), swizzled(a) || swizzled(b));
                        if wait {
                            self.line(format!("cp.async.wait_group {};", d - 1));
                        }
                        if precision == DotPrecision::Tf32 {
                            let (ra, rb) = (self.get(a)[0].clone(), self.get(b)[0].clone());
                            self.round_tf32_slots(&[(a, ra), (b, rb)]);
                        }
                        if fence {
                            self.line("fence.proxy.async.shared::cta;");
                        }
                        self.ring_bar();
                        self.ring_dirty = false;
                        self.ring_ready.insert(a);
                        self.ring_ready.insert(b);
                    }
                    self.block_with(body, &late)?;
                    self.cp_commit();
                }
                let ys: Vec<V> = body.yields().iter().copied().zip(&keep).filter(|(_, k)| **k).map(|(y, _)| y).collect();
                // parallel copy through temporaries
                // (conversions for the yields run inside the loop: their
                // registers must not be reused after it, where a loop of
                // no iterations left them unset)
                self.conv.push(HashMap::new());
                // (a register yielded to itself — an accumulator updated in
                // place — is not copied: an in-flight wgmma writes it)
                let kept_args: Vec<V> = body.args[1..].iter().zip(&keep).filter(|(_, k)| **k).map(|(a, _)| *a).collect();
                let srcs: Vec<Vec<String>> = ys.iter().zip(&kept_args).map(|(y, a)| self.get_as(*y, *a)).collect();
                let srcs = self.carry_words(&as_words, srcs);
                self.carried_copy(&carried, &srcs, &kept_args)?;
                self.conv.pop();
                let (ut, wide) = if t == "s64" { ("u64", RegClass::Rd) } else { ("u32", RegClass::R) };
                let (rem, more) = (self.reg(wide), self.reg(RegClass::P));
                self.line(format!("sub.{t} {rem}, {rhi}, {cur_iv};"));
                self.line(format!("setp.gt.{ut} {more}, {rem}, {rst};"));
                self.line(format!("add.{t} {iv}, {cur_iv}, {rst};"));
                self.line(format!("@{more} bra.uni {head};"));
                if !exits.is_empty() {
                    self.line(format!("bra.uni {end};"));
                    for (exit, prev) in exits {
                        self.body.push_str(&format!("{exit}:\n"));
                        let prev = self.carry_words(&as_words, prev);
                        self.carried_copy(&carried, &prev, &body.args[1..])?;
                        self.line(format!("bra.uni {end};"));
                    }
                }
                self.body.push_str(&format!("{end}:\n"));
                let carried: Vec<(RegClass, Vec<String>)> =
                    carried.into_iter().zip(&as_words).map(|((c, regs), &w)| if w { (RegClass::H, self.unpack_words(&regs)) } else { (c, regs) }).collect();
                // (the producer leaves all of this to the consumers: they
                // wait for the copies still landing; `carried` holds
                // only the kept values there)
                if self.role != Role::Producer {
                    // the last iteration's prefetch (of an iteration that does not
                    // run) may still be landing in a ring slot
                    // (ring loads are top-level ops of the body: `async_copy`)
                    if body.ops.iter().any(|o| o.results.iter().any(|r| self.ring_plan.loads.get(r).is_some_and(|c| self.ring_plan.tma[*c].is_none()))) {
                        self.line("cp.async.wait_all;");
                    }
                    // (TMA: the tiles still landing are exactly the carried
                    // ones the loop leaves behind; the program must not exit
                    // while a bulk copy writes its shared memory)
                    // (warp-specialized: nothing reads them, so their slots are
                    // released at once — a loop around this one refills them)
                    for (a, (_, regs)) in body.args[1..].iter().zip(&carried) {
                        if let Some(c) = self.ring_plan.carried.get(a).map(|x| x.0).filter(|c| self.ring_plan.tma[*c].is_some()) {
                            self.tma_wait(c, &regs[0].clone(), false);
                            if self.role == Role::Consumer {
                                self.ws_release(c, &regs[0].clone(), None);
                            }
                        }
                    }
                    // (a loop-invariant slot filled before a loop that ran
                    // no iteration: its bulk copy may still be landing; a
                    // `cp.async` one was waited for before the loop)
                    let mut inv: Vec<V> = vec![];
                    dot_operand_values(body, &mut inv);
                    let mut waited = std::collections::HashSet::new();
                    let inv: Vec<V> = inv.into_iter().map(|x| self.ring_plan.source(x)).collect();
                    for x in inv {
                        if self.ring_plan.invariant.contains(&x) && !self.ring_plan.invariant_cp(x) && waited.insert(x) {
                            let c = self.ring_plan.class_of(x).expect("invariant slot");
                            let r = self.get(x)[0].clone();
                            self.tma_wait(c, &r, false);
                        }
                    }
                    // the last in-flight MMA must land before its accumulator
                    // is read
                    if body.ops.iter().any(|o| o.results.iter().any(|r| self.ring_plan.inflight.contains_key(r))) {
                        self.line("wgmma.wait_group.sync.aligned 0;");
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
                self.inv_waited.pop();
                self.ring_loops -= ring_loop as u32;
                return Ok(());
            }
            OpKind::If { cond, then_, else_ } if self.role == Role::Producer => {
                // (the producer's share of both branches — the copies and
                // their coordinates — and none of the results: `warp_spec`
                // gives it no value an `if` yields)
                let p = self.get(*cond)[0].clone();
                let (lelse, lend) = (self.label(), self.label());
                self.line(format!("@!{p} bra.uni {lelse};"));
                self.block(then_)?;
                self.line(format!("bra.uni {lend};"));
                self.body.push_str(&format!("{lelse}:\n"));
                self.block(else_)?;
                self.body.push_str(&format!("{lend}:\n"));
                return Ok(());
            }
            OpKind::If { cond, then_, else_ } => {
                let p = self.get(*cond)[0].clone();
                let outs: Vec<(RegClass, Vec<String>)> = op
                    .results
                    .iter()
                    .map(|r| {
                        let c = reg_class(self.elem(*r));
                        (c, self.fresh_like(*r))
                    })
                    .collect();
                let (lelse, lend) = (self.label(), self.label());
                self.cp_commit();
                let outer_held = self.wg_held;
                if hold {
                    self.wg_held = self.wg_pending.len();
                }
                let dirty = self.ring_dirty;
                let mut dirty_after = false;
                self.line(format!("@!{p} bra.uni {lelse};"));
                for (blk, last) in [(then_, false), (else_, true)] {
                    self.ring_dirty = dirty;
                    self.block(blk)?;
                    self.cp_commit();
                    dirty_after |= self.ring_dirty;
                    self.ring_dirty = dirty_after;
                    let ys = blk.yields();
                    // (a conversion for a yield belongs to this branch)
                    self.conv.push(HashMap::new());
                    for (((c, regs), y), r) in outs.iter().zip(ys).zip(&op.results) {
                        let src = self.get_as(*y, *r);
                        for (d, s) in regs.iter().zip(&src) {
                            self.mov(*c, d, s);
                        }
                    }
                    self.conv.pop();
                    if !last {
                        self.line(format!("bra.uni {lend};"));
                        self.body.push_str(&format!("{lelse}:\n"));
                    }
                }
                self.body.push_str(&format!("{lend}:\n"));
                self.wg_held = outer_held;
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
}

impl<'k> PtxWriter<'k> {
    /// At the top of a loop body: each word-carried value's halves (one
    /// `mov.b32 {lo, hi}` per word, remembered as that word's) as its
    /// registers.
    fn unpack_carried(&mut self, carried: &[(RegClass, Vec<String>)], as_words: &[bool], args: &[V], keep: &[bool]) {
        let kept = args.iter().zip(keep).filter(|(_, k)| **k).map(|(a, _)| *a);
        for ((a, (_, words)), &w) in kept.zip(carried).zip(as_words) {
            if w {
                let halves = self.unpack_words(words);
                self.vals.insert(a, halves);
            }
        }
    }

    /// Words of 16-bit pairs as their halves, low first (`unpack_b16`).
    fn unpack_words(&mut self, words: &[String]) -> Vec<String> {
        words
            .iter()
            .flat_map(|x| {
                let (lo, hi) = self.unpack_b16(x);
                [lo, hi]
            })
            .collect()
    }

    /// The registers yielded into word-carried values as words (pairs of
    /// halves packed: free where they are one word's halves already).
    fn carry_words(&mut self, as_words: &[bool], srcs: Vec<Vec<String>>) -> Vec<Vec<String>> {
        srcs.into_iter().zip(as_words).map(|(src, &w)| if w { src.chunks(2).map(|p| self.pack_b16(&p[0], &p[1])).collect() } else { src }).collect()
    }

    /// The values `srcs` (registers of the carried values `args`) into the
    /// loop's carried registers, as one parallel copy through temporaries
    /// (a source may be another destination): at the back edge, and in the
    /// exit stubs of [`Self::unroll_copies`]' copies. A register carried
    /// for several elements is set once, and they must arrive equal
    /// (`load_alias_pattern`); a register copied to itself is left alone.
    fn carried_copy(&mut self, carried: &[(RegClass, Vec<String>)], srcs: &[Vec<String>], args: &[V]) -> R<()> {
        let mut tmps = vec![];
        for (((c, regs), src), a) in carried.iter().zip(srcs).zip(args) {
            let mut ts = vec![];
            for (i, (s, d)) in src.iter().zip(regs).enumerate() {
                if let Some(j) = regs[..i].iter().position(|x| x == d) {
                    if src[j] != *s {
                        return self.err(format!("loop-carried %{} lost the repetition of its registers", a.0));
                    }
                    ts.push(None);
                    continue;
                }
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
        Ok(())
    }

    /// How many copies of a loop body one trip of the emitted loop runs:
    /// `d + 1` for a body whose deepest register-carried prefetch chain
    /// (the pipelining pass's shift register: carried value `k` yielded
    /// from carried value `k + 1`, the last one from a load of the body)
    /// holds `d` tiles, else 1. Emitted once, such a chain is copied
    /// register by register at every back edge, and ptxas cannot coalesce
    /// the copies: a prefetched tile is loaded while the one it replaces
    /// is still live. In `d + 1` threaded copies (each reading the
    /// previous copy's yields where they are) every tile but the last `d`
    /// is dead before the load that would take its registers, so the
    /// copies at the one back edge coalesce away (the W4A16 step: ~28
    /// `IMAD.MOV`/`PRMT` per iteration). Only plain bodies: no nested
    /// loop, no `wgmma` (unless `PtxOptions::unroll_wgmma`: each copy
    /// then issues, defers and waits for its own groups as an iteration
    /// does — an in-flight accumulator yields itself, a deferred group is
    /// waited for at the end of its copy, a ring `dot`'s wait and barrier
    /// open every copy), no TMA copy (its slots' mbarrier phases step per
    /// iteration), at most 400 ops; a ring's carried slot addresses are
    /// not copies. `PtxOptions::unroll_pipelined`.
    pub(super) fn unroll_copies(&self, body: &Block, carried: &[(RegClass, Vec<String>)]) -> usize {
        if !self.o.unroll_pipelined || self.role != Role::All || carried.len() + 1 != body.args.len() {
            return 1;
        }
        let args = &body.args[1..];
        let ys = body.yields();
        if ys.len() != args.len() {
            return 1;
        }
        let loaded: std::collections::HashSet<V> = body
            .ops
            .iter()
            .filter(|o| matches!(o.kind, OpKind::Load { .. }) && o.results.first().is_some_and(|r| !self.ring_plan.loads.contains_key(r)))
            .flat_map(|o| o.results.iter().copied())
            .collect();
        let mut deepest = 0;
        for i in 0..args.len() {
            let (mut j, mut d) = (i, 1);
            while let Some(k) = args.iter().position(|a| *a == ys[j]) {
                if k == j || d > args.len() {
                    break;
                }
                j = k;
                d += 1;
            }
            if loaded.contains(&ys[j]) && !self.ring_plan.carried.contains_key(&args[i]) {
                deepest = deepest.max(d);
            }
        }
        if deepest == 0 {
            return 1;
        }
        fn plain(em: &PtxWriter, b: &Block, n: &mut usize) -> bool {
            b.ops.iter().all(|o| {
                *n += 1;
                let ok = match &o.kind {
                    OpKind::For { .. } | OpKind::LoadBlock { .. } | OpKind::StoreBlock { .. } => false,
                    OpKind::Dot { a, b, .. } => {
                        let shape: Vec<u32> = em.k.ty(o.results[0]).shape().iter().map(|d| d.known().unwrap_or(0) as u32).collect();
                        let wgmma = em.layout_plan.mma(&shape).is_some_and(|g| g.wgmma);
                        let tma = [a, b].iter().any(|x| em.ring_plan.class_of(**x).is_some_and(|c| em.ring_plan.tma[c].is_some()));
                        // (`unroll_wgmma`: `wgmma` bodies too, their
                        // operands in `cp.async` rings or registers)
                        if em.o.unroll_wgmma {
                            !tma
                        } else {
                            !wgmma && !em.ring_plan.inflight.contains_key(&o.results[0])
                        }
                    }
                    _ => true,
                };
                ok && o.kind.regions().iter().all(|r| plain(em, r, n))
            })
        }
        let mut n = 0;
        if !plain(self, body, &mut n) || n > 400 {
            return 1;
        }
        deepest + 1
    }
}

/// A branch that pending `wgmma` groups may run through: an `If` with no
/// loop and no `dot` inside (nested branches included). Its reads: every
/// operand of its ops (values from outside among them), its condition.
fn branch_reads(op: &Op) -> Option<Vec<V>> {
    fn walk(b: &Block, reads: &mut Vec<V>) -> bool {
        b.ops.iter().all(|o| {
            if matches!(o.kind, OpKind::For { .. } | OpKind::Dot { .. }) {
                return false;
            }
            reads.extend(o.kind.operands());
            o.kind.regions().into_iter().all(|r| walk(r, reads))
        })
    }
    let OpKind::If { cond, then_, else_ } = &op.kind else { return None };
    let mut reads = vec![*cond];
    (walk(then_, &mut reads) && walk(else_, &mut reads)).then_some(reads)
}

/// The operands of every `dot` in `b` and its regions.
fn dot_operand_values(b: &Block, out: &mut Vec<V>) {
    for o in &b.ops {
        if let OpKind::Dot { a, b, .. } = &o.kind {
            out.extend([*a, *b]);
        }
        for r in o.kind.regions() {
            dot_operand_values(r, out);
        }
    }
}
