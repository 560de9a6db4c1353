//! Structured control flow and the per-op dispatch: blocks, `for` loops
//! (run-time trip counts, loop-carried `var`s), uniform `if`s, and `op`,
//! which routes every IR op to the file that lowers it.

use super::*;
use crate::plan::convert::{ConvertPlan, Movement};

impl<'k> WgslWriter<'k> {
    pub(super) fn block(&mut self, b: &Block) -> R<()> {
        self.remat.enter();
        self.conv.push(HashMap::new());
        self.divrem.push(HashMap::new());
        for op in &b.ops {
            self.loc = op.loc;
            self.op(op)?;
        }
        self.divrem.pop();
        self.conv.pop();
        self.remat.leave();
        Ok(())
    }

    /// Emit a nested region into a separate buffer; returns its text and
    /// whether it contains a barrier.
    pub(super) fn region(&mut self, f: &mut dyn FnMut(&mut Self) -> R<()>) -> R<(String, bool)> {
        let saved = std::mem::take(&mut self.body);
        let b0 = self.barriers;
        self.ind += 1;
        let r = f(self);
        self.ind -= 1;
        let text = std::mem::replace(&mut self.body, saved);
        r?;
        Ok((text, self.barriers > b0))
    }

    pub(super) fn op(&mut self, op: &Op) -> R<()> {
        let k = self.k;
        let res = op.results.first().copied();
        let out: Option<Vec<String>> = match &op.kind {
            OpKind::Param(i) => {
                let i = *i as usize;
                match k.params[i].kind {
                    ParamKind::Ptr(_) => Some(vec!["0u".into()]),
                    ParamKind::Scalar(d) => {
                        let f = format!("ft_args.p{i}");
                        let e = match d {
                            DType::Bool => format!("{f} != 0u"),
                            DType::F16 => format!("{}({f} & 0xffffu)", self.helper("ft_h2f")),
                            DType::BF16 => format!("bitcast<f32>({f} << 16u)"),
                            DType::F8E4M3 | DType::F8E5M2 => return self.err("fp8 scalar arguments are not supported (pass an f32)"),
                            DType::I8 => format!("extractBits({f}, 0u, 8u)"),
                            DType::U8 => format!("({f} & 0xffu)"),
                            DType::I64 => format!("vec2<u32>({f}, {f}h)"),
                            _ => f,
                        };
                        Some(vec![self.let_(wty_of(d), e)])
                    }
                }
            }
            OpKind::Constexpr(_) | OpKind::StaticAssert { .. } => return self.err("unspecialized op reached the WGSL backend"),
            OpKind::Const(l) => {
                let d = self.dtype(res.unwrap());
                let e = match wty_of(d) {
                    WTy::F => {
                        let f = match l {
                            Lit::Float(f) => *f,
                            Lit::Int(i) => *i as f64,
                            Lit::Bool(b) => *b as i64 as f64,
                        };
                        let v = match d {
                            DType::F16 => half::f16::from_f32(f32_round_to_odd(f)).to_f32(),
                            DType::BF16 => half::bf16::from_f32(f32_round_to_odd(f)).to_f32(),
                            d if d.fp8().is_some() => {
                                let fmt = d.fp8().unwrap();
                                ferrotile_ir::numeric::fp8_decode(ferrotile_ir::numeric::fp8_encode(f32_round_to_odd(f), fmt), fmt)
                            }
                            _ => f as f32,
                        };
                        f32_lit(v)
                    }
                    WTy::B => {
                        let b = match l {
                            Lit::Bool(b) => *b,
                            Lit::Int(i) => *i != 0,
                            Lit::Float(f) => *f != 0.0,
                        };
                        b.to_string()
                    }
                    w => {
                        let i = match l {
                            Lit::Int(i) => *i,
                            Lit::Bool(b) => *b as i64,
                            Lit::Float(f) => *f as i64,
                        };
                        match d {
                            DType::I64 => format!("vec2<u32>({}u, {}u)", i as u64 as u32, (i as u64 >> 32) as u32),
                            DType::I8 => i32_lit(i as i8 as i32),
                            DType::U8 => format!("{}u", i as u8),
                            _ if w == WTy::U => format!("{}u", i as u32),
                            _ => i32_lit(i as i32),
                        }
                    }
                };
                Some(vec![self.let_(wty_of(d), e)])
            }
            OpKind::ProgramId(a) | OpKind::NumPrograms(a) => {
                let ax = ["x", "y", "z"][*a as usize];
                let src = if matches!(op.kind, OpKind::ProgramId(_)) { "ft_wid" } else { "ft_nwg" };
                let d = self.dtype(res.unwrap());
                let e = match wty_of(d) {
                    WTy::U => format!("{src}.{ax}"),
                    _ => format!("i32({src}.{ax})"),
                };
                Some(vec![self.let_(wty_of(d), e)])
            }
            OpKind::Arange { start, .. } => {
                let v = res.unwrap();
                let shape = self.shape_u32(v);
                let s = start.known().unwrap();
                let n = self.nregs(v)?;
                // (in a slice layout: the plan's backward rule,
                // `plan::slices::broadcast_seeds`)
                let lay = self.vlay.get(&v).cloned().map(|bl| self.layout_of_bl(&bl));
                let mut regs = vec![];
                for r in 0..n {
                    let i = match &lay {
                        Some(l) => self.index_of(l, r, 0),
                        None => self.index(&shape, r, 0)?,
                    };
                    regs.push(self.let_(WTy::I, format!("i32({i}) + {}", i32_lit(s as i32))));
                }
                Some(regs)
            }
            OpKind::Splat { x, .. } => {
                let n = self.nregs(res.unwrap())?;
                let s = self.get(*x)[0].clone();
                Some(vec![s; n])
            }
            // an expanded slice keeps its registers ([`crate::plan::slices`])
            OpKind::ExpandDims { x, .. } if self.vlay.contains_key(&res.unwrap()) => Some(self.get_raw(*x)),
            // (not of a value in a per-value layout: it is broadcast from its
            // registers below, not recomputed from leaves held in that layout)
            OpKind::Broadcast { x, .. } | OpKind::ExpandDims { x, .. } if !self.vlay.contains_key(x) && crate::plan::remat::remat_into(self, res.unwrap())? => {
                return Ok(())
            }
            OpKind::Broadcast { x, .. } => {
                // a slice broadcast back into the layout it was reduced
                // from moves nothing
                if let Some(have) = self.vlay.get(x).cloned() {
                    if let Some(regs) = self.broadcast_remap(*x, &have, res.unwrap())? {
                        self.vals.insert(res.unwrap(), regs);
                        return Ok(());
                    }
                }
                let (src, dst) = (self.shape_u32(*x), self.shape_u32(res.unwrap()));
                let plan = ConvertPlan::new(&Movement::Broadcast, &src, &dst, false);
                // an `expand_dims` left unconverted (below): from its operand
                if let Some(&(y, _)) = self.expand_then_broadcast.get(x).filter(|_| !self.vals.contains_key(x)) {
                    let ys = self.shape_u32(y);
                    Some(self.convert_from(y, &ys, res.unwrap(), &plan)?)
                } else {
                    Some(self.convert(*x, res.unwrap(), &plan)?)
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
                let (src, dst) = (self.shape_u32(*x), self.shape_u32(res.unwrap()));
                let plan = ConvertPlan::new(&Movement::Linear, &src, &dst, false);
                Some(self.convert(*x, res.unwrap(), &plan)?)
            }
            OpKind::Trans { x, perm } => {
                let (src, dst) = (self.shape_u32(*x), self.shape_u32(res.unwrap()));
                let plan = ConvertPlan::new(&Movement::Permute(perm.iter().map(|&p| p as usize).collect()), &src, &dst, false);
                Some(self.convert(*x, res.unwrap(), &plan)?)
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
                let out = self.elementwise(kind, res.unwrap());
                self.want = prev;
                Some(out?)
            }
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
                // [base (u32 element offset), dims (i64)..., strides (i64)...]
                let mut regs = vec![self.get(*base)[0].clone()];
                for v in shape.iter().chain(strides) {
                    let r = self.get(*v)[0].clone();
                    let d = self.dtype(*v);
                    if !d.is_int() {
                        return self.err(format!("view shape/stride of dtype {d}"));
                    }
                    regs.push(self.cast(&r, d, DType::I64)?);
                }
                Some(regs)
            }
            OpKind::LoadBlock { view, offsets, .. } => {
                let v = res.unwrap();
                let shape = self.shape_u32(v);
                let p = self.base_of(*view)?;
                let (idxs, inb) = self.block_ptrs(*view, offsets, &shape)?;
                let d = self.dtype(v);
                let mut out = vec![];
                for (i, m) in idxs.iter().zip(&inb) {
                    out.push(self.load_masked(p, i, Some(m), zero_of(wty_of(d)), d)?);
                }
                Some(out)
            }
            OpKind::StoreBlock { view, offsets, value } => {
                let shape = self.shape_u32(*value);
                let p = self.base_of(*view)?;
                let (idxs, inb) = self.block_ptrs(*view, offsets, &shape)?;
                let vals = self.get(*value);
                let d = self.dtype(*value);
                for r in 0..idxs.len() {
                    let pred = match self.owner(&shape, r)? {
                        Some(o) => format!("{} && {o}", inb[r]),
                        None => inb[r].clone(),
                    };
                    self.line(format!("if ({pred}) {{"));
                    self.ind += 1;
                    self.store_elem(p, &idxs[r], &vals[r], d, false)?;
                    self.ind -= 1;
                    self.line("}");
                }
                None
            }
            OpKind::Reduce { op: o, x, axis } => Some(self.reduce(*o, *x, *axis as usize, res.unwrap())?),
            OpKind::Scan { x, axis, .. } => Some(self.scan(*x, *axis as usize, res.unwrap())?),
            OpKind::Dot { a, b, acc, precision } => Some(self.dot(*a, *b, *acc, *precision, res.unwrap())?),
            OpKind::For { lo, hi, step, inits, body } => {
                self.for_(op, *lo, *hi, *step, inits, body)?;
                return Ok(());
            }
            OpKind::If { cond, then_, else_ } => {
                self.if_(op, *cond, then_, else_)?;
                return Ok(());
            }
            OpKind::Yield(_) => None,
            // Device printing is honoured by the interpreter only.
            OpKind::Print { .. } => None,
        };
        if let (Some(regs), Some(r)) = (out, res) {
            self.vals.insert(r, regs);
        }
        Ok(())
    }

    pub(super) fn base_of(&self, v: V) -> R<u32> {
        match self.base.get(&v) {
            Some(p) => Ok(*p),
            None => self.err("pointer of unknown provenance"),
        }
    }

    pub(super) fn for_(&mut self, op: &Op, lo: V, hi: V, step: V, inits: &[V], body: &Block) -> R<()> {
        let ivd = self.dtype(body.args[0]);
        let (rlo, rhi, rst) = (self.get(lo)[0].clone(), self.get(hi)[0].clone(), self.get(step)[0].clone());
        // Trip count in u32: no overflow of the induction variable, step <= 0 runs nothing.
        let n = match wty_of(ivd) {
            WTy::U => {
                let d = self.let_(WTy::U, format!("{rhi} - {rlo}"));
                let s = self.let_(WTy::U, format!("max({rst}, 1u)"));
                self.let_(WTy::U, format!("select(0u, {d} / {s} + select(0u, 1u, {d} % {s} != 0u), {rhi} > {rlo} && {rst} > 0u)"))
            }
            WTy::I => {
                let d = self.let_(WTy::U, format!("bitcast<u32>({rhi}) - bitcast<u32>({rlo})"));
                let s = self.let_(WTy::U, format!("bitcast<u32>(max({rst}, 1i))"));
                self.let_(WTy::U, format!("select(0u, {d} / {s} + select(0u, 1u, {d} % {s} != 0u), {rhi} > {rlo} && {rst} > 0i)"))
            }
            WTy::L => {
                let (sub, lt, dm) = (self.helper("ft_sub64"), self.helper("ft_lt64"), self.helper("ft_udivrem64"));
                let q = self.let_(WTy::Q, format!("{dm}({sub}({rhi}, {rlo}), {rst})"));
                let c = self.let_(WTy::U, format!("{q}.x + select(0u, 1u, any({q}.zw != vec2<u32>(0u, 0u)))"));
                // more than 2^32 - 1 iterations: as many as a u32 counts
                let c = self.let_(WTy::U, format!("select({c}, 0xffffffffu, {q}.y != 0u || {c} < {q}.x)"));
                self.let_(WTy::U, format!("select(0u, {c}, {lt}({rlo}, {rhi}) && {lt}(vec2<u32>(0u, 0u), {rst}))"))
            }
            _ => return self.err(format!("loop induction variable of dtype {ivd}")),
        };
        // loop-carried registers
        let mut carried: Vec<(Vec<WTy>, Vec<String>)> = vec![];
        for (a, init) in body.args[1..].iter().zip(inits) {
            let tys = self.reg_tys(*a)?;
            // (in the carried value's layout: [`crate::plan::slices`])
            let src = self.get_as(*init, *a);
            let vars: Vec<String> = tys.iter().zip(&src).map(|(w, s)| self.var_(*w, Some(s))).collect();
            carried.push((tys, vars));
        }
        let it = self.fresh();
        let iv_w = wty_of(ivd);
        let ctl_uniform = self.uni.contains(&lo) && self.uni.contains(&hi) && self.uni.contains(&step);
        let (text, has_bar) = self.region(&mut |em: &mut Self| {
            let iv = match iv_w {
                WTy::U => em.let_(WTy::U, format!("{rlo} + {it} * {rst}")),
                WTy::L => {
                    let (add, mul) = (em.helper("ft_add64"), em.helper("ft_mul64"));
                    em.let_(WTy::L, format!("{add}({rlo}, {mul}(vec2<u32>({it}, 0u), {rst}))"))
                }
                _ => em.let_(WTy::I, format!("{rlo} + bitcast<i32>({it} * bitcast<u32>({rst}))")),
            };
            em.vals.insert(body.args[0], vec![iv]);
            for (a, (tys, vars)) in body.args[1..].iter().zip(&carried) {
                let regs: Vec<String> = tys.iter().zip(vars).map(|(w, v)| em.let_(*w, v)).collect();
                em.vals.insert(*a, regs);
            }
            em.block(body)?;
            let ys = body.yields();
            // (conversions for the yields are `let`s of the loop body)
            em.conv.push(HashMap::new());
            for (((_, vars), y), a) in carried.iter().zip(ys).zip(&body.args[1..]) {
                let src = em.get_as(*y, *a);
                for (d, s) in vars.iter().zip(&src) {
                    em.line(format!("{d} = {s};"));
                }
            }
            em.conv.pop();
            Ok(())
        })?;
        let n = if has_bar && !ctl_uniform { self.uniformize(&n, WTy::U) } else { n };
        self.line(format!("for (var {it}: u32 = 0u; {it} < {n}; {it} = {it} + 1u) {{"));
        self.body.push_str(&text);
        self.line("}");
        for (r, (_, vars)) in op.results.iter().zip(carried) {
            self.vals.insert(*r, vars);
        }
        Ok(())
    }

    pub(super) fn if_(&mut self, op: &Op, cond: V, then_: &Block, else_: &Block) -> R<()> {
        let c = self.get(cond)[0].clone();
        let mut outs: Vec<Vec<String>> = vec![];
        for r in &op.results {
            let tys = self.reg_tys(*r)?;
            outs.push(tys.iter().map(|w| self.var_(*w, None)).collect());
        }
        let mut texts = vec![];
        let mut any_bar = false;
        for blk in [then_, else_] {
            let (t, b) = self.region(&mut |em: &mut Self| {
                em.block(blk)?;
                let ys = blk.yields();
                // (conversions for the yields are `let`s of the branch)
                em.conv.push(HashMap::new());
                for ((vars, y), r) in outs.iter().zip(ys).zip(&op.results) {
                    let src = em.get_as(*y, *r);
                    for (d, s) in vars.iter().zip(&src) {
                        em.line(format!("{d} = {s};"));
                    }
                }
                em.conv.pop();
                Ok(())
            })?;
            any_bar |= b;
            texts.push(t);
        }
        let c = if any_bar && !self.uni.contains(&cond) { self.uniformize(&c, WTy::B) } else { c };
        self.line(format!("if ({c}) {{"));
        self.body.push_str(&texts[0]);
        if texts[1].trim().is_empty() {
            self.line("}");
        } else {
            self.line("} else {");
            self.body.push_str(&texts[1]);
            self.line("}");
        }
        for (r, vars) in op.results.iter().zip(outs) {
            self.vals.insert(*r, vars);
        }
        Ok(())
    }
}
