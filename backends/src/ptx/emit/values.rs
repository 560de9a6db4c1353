//! Values in registers: register allocation, labels, the layout of each tile
//! shape, per-register element coordinates and owners (index arithmetic
//! cached per shape), moves and fresh copies of a value's registers.

use super::*;

impl<'k> PtxWriter<'k> {
    pub(super) fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(EmitError { kernel: self.k.name.clone(), line: self.loc.line, msg: msg.into() })
    }

    pub(super) fn reg(&mut self, c: RegClass) -> String {
        let (i, pre) = match c {
            RegClass::F => (0, "%f"),
            RegClass::H => (1, "%h"),
            RegClass::R => (2, "%r"),
            RegClass::Rd => (3, "%rd"),
            RegClass::P => (4, "%p"),
        };
        let n = self.counts[i];
        self.counts[i] += 1;
        format!("{pre}{n}")
    }

    pub(super) fn line(&mut self, s: impl AsRef<str>) {
        self.body.push('\t');
        self.body.push_str(s.as_ref());
        self.body.push('\n');
    }

    pub(super) fn label(&mut self) -> String {
        self.labels += 1;
        format!("$L{}", self.labels)
    }

    pub(super) fn shape_u32(&self, v: V) -> Vec<u32> {
        self.k.ty(v).shape().iter().map(|d| d.known().unwrap() as u32).collect()
    }

    pub(super) fn layout(&mut self, shape: &[u32]) -> std::rc::Rc<Layout> {
        if let Some(l) = self.layouts.get(shape) {
            return l.clone();
        }
        let bl = self.layout_plan.layout(shape, self.o.num_warps, self.vec);
        let l = self.thread_layout(bl);
        self.layouts.insert(shape.to_vec(), l.clone());
        l
    }

    /// A layout that is not its shape's default (a value of
    /// [`crate::plan::slices`]), with its per-thread offsets.
    pub(super) fn layout_of_bl(&mut self, bl: &crate::plan::layout::Blocked) -> std::rc::Rc<Layout> {
        if let Some(l) = self.olayouts.get(bl) {
            return l.clone();
        }
        let l = self.thread_layout(bl.clone());
        self.olayouts.insert(bl.clone(), l.clone());
        l
    }

    /// The per-thread offset of each dimension of `bl`, computed in the
    /// prologue.
    fn thread_layout(&mut self, bl: crate::plan::layout::Blocked) -> std::rc::Rc<Layout> {
        let mut thread = vec![];
        for d in 0..bl.rank() {
            let t = self.reg(RegClass::R);
            let (lane, warp) = (self.lane.clone(), self.warp.clone());
            let mut s = String::new();
            let _ = writeln!(s, "\tbfe.u32 {t}, {lane}, {}, {};", bl.lane_shift[d], bl.tpw[d].trailing_zeros());
            let tw = self.reg(RegClass::R);
            let _ = writeln!(s, "\tbfe.u32 {tw}, {warp}, {}, {};", bl.warp_shift[d], bl.wpc[d].trailing_zeros());
            let _ = writeln!(s, "\tmad.lo.u32 {t}, {tw}, {}, {t};", bl.warp_mul[d]);
            let _ = writeln!(s, "\tmul.lo.u32 {t}, {t}, {};", bl.spt[d]);
            self.pro.push_str(&s);
            thread.push(t);
        }
        let reg_offsets = bl.reg_offsets();
        std::rc::Rc::new(Layout { bl, reg_offsets, thread })
    }

    /// Row-major linear index of register `r` of a value in layout `bl`
    /// (not its shape's default; u32 register, prologue).
    pub(super) fn lin_bl(&mut self, bl: &crate::plan::layout::Blocked, r: usize) -> String {
        let lay = self.layout_of_bl(bl);
        let strides = bl.strides();
        let out = self.reg(RegClass::R);
        let mut s = format!("\tmov.u32 {out}, 0;\n");
        for d in 0..bl.rank() {
            let key = (bl.clone(), r, d);
            let i = match self.oidx_cache.get(&key) {
                Some(i) => i.clone(),
                None => {
                    let i = self.reg(RegClass::R);
                    let _ = writeln!(s, "\tadd.u32 {i}, {}, {};", lay.thread[d], lay.reg_offsets[r][d]);
                    if bl.replicated(d) {
                        let _ = writeln!(s, "\tand.b32 {i}, {i}, {};", bl.shape[d] - 1);
                    }
                    self.oidx_cache.insert(key, i.clone());
                    i
                }
            };
            let _ = writeln!(s, "\tmad.lo.u32 {out}, {i}, {}, {out};", strides[d]);
        }
        self.pro.push_str(&s);
        out
    }

    pub(super) fn nregs(&mut self, v: V) -> usize {
        if self.ring_plan.class_of(v).is_some() {
            return 1; // a ring slot's address
        }
        if let Some(bl) = self.vlay.get(&v) {
            return bl.regs();
        }
        if let Some(p) = self.partial.get(&v) {
            return p.regs();
        }
        let s = self.shape_u32(v);
        if s.is_empty() {
            1
        } else {
            self.layout(&s).bl.regs()
        }
    }

    /// Index along `d` of register `r` of the canonical layout of `shape`
    /// (u32 register, computed once in the prologue). Registers at one
    /// offset along `d` share it — so does what is recomputed from it
    /// (`plan::remat` caches by index register): a row's index arithmetic
    /// is done once per row a thread holds, not once per element.
    pub(super) fn index(&mut self, shape: &[u32], r: usize, d: usize) -> String {
        let lay = self.layout(shape);
        let c = lay.reg_offsets[r][d];
        let key = (shape.to_vec(), c as usize, d);
        if let Some(s) = self.idx_cache.get(&key) {
            return s.clone();
        }
        let out = self.reg(RegClass::R);
        let mut s = format!("\tadd.u32 {out}, {}, {c};\n", lay.thread[d]);
        if lay.bl.replicated(d) {
            let _ = writeln!(s, "\tand.b32 {out}, {out}, {};", shape[d] - 1);
        } else {
            self.idx_parts.insert(out.clone(), (lay.thread[d].clone(), c));
            if self.o.affine_addresses {
                self.affine.insert(out.clone(), (lay.thread[d].clone(), c as i64));
            }
        }
        self.pro.push_str(&s);
        self.idx_cache.insert(key, out.clone());
        // (the thread's offset is spt_d · (lane and warp fields): a
        // multiple of spt_d, also after wrapping at a power-of-two shape)
        let align = lay.bl.spt[d].min(shape[d]).max(1);
        if align.is_power_of_two() {
            self.idx_residue.insert(out.clone(), (align, c % align));
        }
        out
    }

    /// Index along `d` of register `r` of a per-value layout `lay` (u32
    /// register, prologue): [`Self::index`] for a layout that is not its
    /// shape's default.
    pub(super) fn index_of(&mut self, lay: &Layout, r: usize, d: usize) -> String {
        // (the cache `lin_bl` shares: the same register per (layout, r, d))
        let key = (lay.bl.clone(), r, d);
        if let Some(s) = self.oidx_cache.get(&key) {
            return s.clone();
        }
        let out = self.reg(RegClass::R);
        let mut s = format!("\tadd.u32 {out}, {}, {};\n", lay.thread[d], lay.reg_offsets[r][d]);
        if lay.bl.replicated(d) {
            let _ = writeln!(s, "\tand.b32 {out}, {out}, {};", lay.bl.shape[d] - 1);
        } else {
            self.idx_parts.insert(out.clone(), (lay.thread[d].clone(), lay.reg_offsets[r][d]));
            if self.o.affine_addresses {
                self.affine.insert(out.clone(), (lay.thread[d].clone(), lay.reg_offsets[r][d] as i64));
            }
        }
        self.pro.push_str(&s);
        self.oidx_cache.insert(key, out.clone());
        out
    }

    /// Row-major linear index of register `r` (u32 register, prologue).
    pub(super) fn lin(&mut self, shape: &[u32], r: usize) -> String {
        let lay = self.layout(shape);
        let strides = lay.bl.strides();
        let out = self.reg(RegClass::R);
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
    pub(super) fn owner(&mut self, shape: &[u32], r: usize) -> Option<String> {
        let key = (shape.to_vec(), r);
        if let Some(o) = self.owner_cache.get(&key) {
            return o.clone();
        }
        let res = if shape.is_empty() {
            let p = self.reg(RegClass::P);
            let _ = writeln!(self.pro, "\tsetp.eq.u32 {p}, {}, 0;", self.tid);
            Some(p)
        } else {
            let lay = self.layout(shape);
            let mut pred: Option<String> = None;
            for d in 0..shape.len() {
                if !lay.bl.replicated(d) {
                    continue;
                }
                let t = self.reg(RegClass::R);
                let p = self.reg(RegClass::P);
                let _ = writeln!(self.pro, "\tadd.u32 {t}, {}, {};\n\tsetp.lt.u32 {p}, {t}, {};", lay.thread[d], lay.reg_offsets[r][d], shape[d]);
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

    /// The registers of `v` as the op being emitted reads them: in its
    /// shape's default layout, or in [`Self::want`]'s layout when the op
    /// computes in one ([`crate::plan::slices`]: then `v` is in that layout
    /// or a splat). A value held in another layout is converted to its
    /// default one on first use (per open block).
    pub(super) fn get(&mut self, v: V) -> Vec<String> {
        let raw = self.get_raw(v);
        let have = self.vlay.get(&v).cloned();
        match (self.want.clone(), have) {
            (Some(w), None) if self.k.ty(v).rank() >= 1 => {
                assert!(raw.iter().all(|r| *r == raw[0]), "ptx: %{} is neither in the op's layout nor a splat", v.0);
                vec![raw[0].clone(); w.regs()]
            }
            (_, None) => raw,
            (Some(w), Some(h)) => {
                assert!(w == h, "ptx: %{} is in another layout than the op computes in", v.0);
                raw
            }
            (None, Some(h)) => self.in_default_layout(v, &h, raw),
        }
    }

    /// Record a conversion through shared memory at the current op's line.
    pub(super) fn explain(&mut self, what: String) {
        let e = (self.loc.line, what);
        if !self.explain.contains(&e) {
            self.explain.push(e);
        }
    }

    /// The registers of `v` in the layout `like` is held in (a loop's
    /// initial and yielded values in its carried value's layout).
    pub(super) fn get_as(&mut self, v: V, like: V) -> Vec<String> {
        let prev = std::mem::replace(&mut self.want, self.vlay.get(&like).cloned());
        let out = self.get(v);
        self.want = prev;
        out
    }

    /// The registers of `v` in the layout it is held in.
    pub(super) fn get_raw(&self, v: V) -> Vec<String> {
        self.vals.get(&v).cloned().unwrap_or_else(|| panic!("ptx: value %{} not emitted", v.0))
    }

    /// `v` (registers `raw` in layout `have`) in its shape's default
    /// layout: a register remap when no element crosses threads, else
    /// through shared memory (each register written at its linear index —
    /// copies write equal values —, read back in the default layout).
    fn in_default_layout(&mut self, v: V, have: &crate::plan::layout::Blocked, raw: Vec<String>) -> Vec<String> {
        if let Some(r) = self.conv.iter().rev().find_map(|m| m.get(&v)) {
            return r.clone();
        }
        let shape = self.shape_u32(v);
        let dst = self.layout(&shape);
        let out = if let Some(map) = crate::plan::layout::relayout_remap(self.o.num_warps * 32, have, &dst) {
            map.iter().map(|&i| raw[i].clone()).collect()
        } else {
            self.explain(format!("a {shape:?} row statistic (slice layout of a reduction) to its shape's default layout, for an op that takes only that"));
            let c = reg_class(self.elem(v));
            let sz = if c == RegClass::Rd { 8 } else { 4 };
            self.smem_need(have.numel() * sz);
            self.bar();
            let base = self.smem_base();
            for (r, x) in raw.iter().enumerate() {
                let lin = self.lin_bl(have, r);
                let a = self.reg(RegClass::R);
                self.line(format!("mad.lo.u32 {a}, {lin}, {sz}, {base};"));
                self.st_shared(c, &a, x);
            }
            self.bar();
            let mut out = vec![];
            for r in 0..dst.reg_offsets.len() {
                let lin = self.lin(&shape, r);
                let a = self.reg(RegClass::R);
                self.line(format!("mad.lo.u32 {a}, {lin}, {sz}, {base};"));
                out.push(self.ld_shared(c, &a));
            }
            self.bar();
            out
        };
        if let Some(m) = self.conv.last_mut() {
            m.insert(v, out.clone());
        }
        out
    }

    /// A broadcast of `x` (in layout `have`, not its shape's default) into
    /// `res`'s default layout as a register remap, if every thread already
    /// holds the elements it needs (an expanded slice broadcast back into
    /// the layout it was reduced from).
    pub(super) fn broadcast_remap(&mut self, x: V, have: &crate::plan::layout::Blocked, res: V) -> Option<Vec<String>> {
        let dst = self.layout(&self.shape_u32(res));
        let map = crate::plan::layout::broadcast_remap(self.o.num_warps * 32, have, &dst)?;
        let raw = self.get_raw(x);
        Some(map.iter().map(|&i| raw[i].clone()).collect())
    }

    /// Register class of `v`'s registers (a ring slot address for values
    /// that live in an operand ring).
    pub(super) fn reg_class_of(&self, v: V) -> RegClass {
        if self.ring_plan.class_of(v).is_some() {
            RegClass::R
        } else {
            reg_class(self.elem(v))
        }
    }

    pub(super) fn elem(&self, v: V) -> Elem {
        self.k.ty(v).elem().expect("tile type")
    }

    pub(super) fn dtype(&self, v: V) -> DType {
        self.elem(v).dtype()
    }

    pub(super) fn zero_reg(&mut self) -> String {
        if let Some(z) = &self.zero {
            return z.clone();
        }
        let z = self.reg(RegClass::R);
        let _ = writeln!(self.pro, "\tmov.u32 {z}, 0;");
        self.zero = Some(z.clone());
        z
    }

    pub(super) fn mov(&mut self, c: RegClass, dst: &str, src: &str) {
        self.line(format!("mov.{} {dst}, {src};", c.mov_ty()));
    }

    pub(super) fn fresh_like(&mut self, v: V) -> Vec<String> {
        let n = self.nregs(v);
        let c = self.reg_class_of(v);
        (0..n).map(|_| self.reg(c)).collect()
    }
}

impl<'k> crate::plan::remat::Emitter<'k> for PtxWriter<'k> {
    fn remat_state(&mut self) -> &mut crate::plan::remat::Remat<'k> {
        &mut self.remat
    }
    fn vals_mut(&mut self) -> &mut crate::plan::remat::Vals {
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
        let o = self.reg(RegClass::R);
        self.line(format!("add.s32 {o}, {i}, {start};"));
        self.affine_binary(BinOp::Add, DType::I32, &o, (i, None), ("", Some(start)));
        o
    }
    fn zero_index(&mut self) -> String {
        self.zero_reg()
    }
    fn elementwise_op(&mut self, kind: &OpKind, _v: V) -> R<Vec<String>> {
        self.elementwise(kind)
    }
    fn scalar_multiple_of(&mut self, v: V, m: u64) -> bool {
        self.facts.get(&v).is_some_and(|f| f.dim(0).div >= m)
    }
}
