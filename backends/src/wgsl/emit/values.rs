//! Values as WGSL `let`s: fresh names, the layout of each tile shape,
//! per-register element coordinates and owners (cached per shape), the
//! WGSL type of each value, 32-bit word views of registers, and
//! uniform copies of values from invocation 0.

use super::*;

impl<'k> WgslWriter<'k> {
    pub(super) fn err<T>(&self, msg: impl Into<String>) -> R<T> {
        Err(EmitError { kernel: self.k.name.clone(), line: self.loc.line, msg: msg.into() })
    }

    pub(super) fn line(&mut self, s: impl AsRef<str>) {
        for _ in 0..self.ind {
            self.body.push_str("    ");
        }
        self.body.push_str(s.as_ref());
        self.body.push('\n');
    }

    pub(super) fn fresh(&mut self) -> String {
        self.tmp += 1;
        format!("t{}", self.tmp)
    }

    /// `let tN: ty = e;` in the body.
    pub(super) fn let_(&mut self, w: WTy, e: impl AsRef<str>) -> String {
        let n = self.fresh();
        self.line(format!("let {n}: {} = {};", w.name(), e.as_ref()));
        n
    }

    /// `let` in the prologue (function scope, visible everywhere).
    pub(super) fn prologue_let(&mut self, w: WTy, e: impl AsRef<str>) -> String {
        let n = self.fresh();
        let _ = writeln!(self.pro, "    let {n}: {} = {};", w.name(), e.as_ref());
        n
    }

    pub(super) fn var_(&mut self, w: WTy, init: Option<&str>) -> String {
        let n = self.fresh();
        match init {
            Some(i) => self.line(format!("var {n}: {} = {i};", w.name())),
            None => self.line(format!("var {n}: {};", w.name())),
        }
        self.vars.insert(n.clone());
        n
    }

    pub(super) fn shape_u32(&self, v: V) -> Vec<u32> {
        self.k.ty(v).shape().iter().map(|d| d.known().unwrap() as u32).collect()
    }

    pub(super) fn layout(&mut self, shape: &[u32]) -> R<Rc<Layout>> {
        if let Some(l) = self.layouts.get(shape) {
            return Ok(l.clone());
        }
        if let Some(d) = shape.iter().find(|d| !d.is_power_of_two()) {
            return self.err(format!("tile dimension {d} is not a power of two"));
        }
        let bl = Blocked::canonical(shape, self.nwarps, self.vec);
        let l = self.thread_layout(bl);
        self.layouts.insert(shape.to_vec(), l.clone());
        Ok(l)
    }

    /// A layout that is not its shape's canonical one (a value of
    /// [`crate::plan::slices`]), with its per-invocation offsets.
    pub(super) fn layout_of_bl(&mut self, bl: &Blocked) -> Rc<Layout> {
        if let Some(l) = self.olayouts.get(bl) {
            return l.clone();
        }
        let l = self.thread_layout(bl.clone());
        self.olayouts.insert(bl.clone(), l.clone());
        l
    }

    /// The per-invocation offset of each dimension of `bl` (prologue).
    fn thread_layout(&mut self, bl: Blocked) -> Rc<Layout> {
        let mut thread = vec![];
        for d in 0..bl.rank() {
            let mut terms = vec![];
            if bl.tpw[d] > 1 {
                terms.push(format!("((ft_lane >> {}u) & {}u)", bl.lane_shift[d], bl.tpw[d] - 1));
            }
            if bl.wpc[d] > 1 {
                terms.push(format!("{}u * ((ft_warp >> {}u) & {}u)", bl.warp_mul[d], bl.warp_shift[d], bl.wpc[d] - 1));
            }
            let e = if terms.is_empty() { "0u".to_string() } else { format!("{}u * ({})", bl.spt[d], terms.join(" + ")) };
            thread.push(self.prologue_let(WTy::U, e));
        }
        let reg_offsets = bl.reg_offsets();
        Rc::new(Layout { bl, reg_offsets, thread })
    }

    /// Row-major linear index of register `r` of a value in layout `bl`
    /// (not its shape's canonical one; u32, prologue).
    pub(super) fn lin_bl(&mut self, bl: &Blocked, r: usize) -> String {
        let lay = self.layout_of_bl(bl);
        let strides = bl.strides();
        let mut terms = vec![];
        for d in 0..bl.rank() {
            if bl.shape[d] > 1 {
                let c = lay.reg_offsets[r][d];
                let i = if bl.replicated(d) { format!("(({} + {c}u) & {}u)", lay.thread[d], bl.shape[d] - 1) } else { format!("({} + {c}u)", lay.thread[d]) };
                terms.push(format!("{i} * {}u", strides[d]));
            }
        }
        let e = if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
        self.prologue_let(WTy::U, e)
    }

    pub(super) fn nregs(&mut self, v: V) -> R<usize> {
        if let Some(bl) = self.vlay.get(&v) {
            return Ok(bl.regs());
        }
        let s = self.shape_u32(v);
        if s.is_empty() {
            Ok(1)
        } else {
            Ok(self.layout(&s)?.regs())
        }
    }

    /// Index along `d` of register `r` of a per-value layout `lay` (u32,
    /// prologue): [`Self::index`] for a layout that is not its shape's
    /// default.
    pub(super) fn index_of(&mut self, lay: &Layout, r: usize, d: usize) -> String {
        let c = lay.reg_offsets[r][d];
        let e = if lay.bl.replicated(d) { format!("({} + {c}u) & {}u", lay.thread[d], lay.bl.shape[d] - 1) } else { format!("{} + {c}u", lay.thread[d]) };
        self.prologue_let(WTy::U, e)
    }

    /// Index along `d` of register `r` (u32, prologue).
    pub(super) fn index(&mut self, shape: &[u32], r: usize, d: usize) -> R<String> {
        let key = (shape.to_vec(), r, d);
        if let Some(s) = self.idx_cache.get(&key) {
            return Ok(s.clone());
        }
        let lay = self.layout(shape)?;
        let out = self.index_of(&lay, r, d);
        self.idx_cache.insert(key, out.clone());
        Ok(out)
    }

    /// Row-major linear index of register `r` (u32, prologue).
    pub(super) fn lin(&mut self, shape: &[u32], r: usize) -> R<String> {
        if shape.is_empty() {
            return Ok("0u".into());
        }
        let key = (shape.to_vec(), r);
        if let Some(s) = self.lin_cache.get(&key) {
            return Ok(s.clone());
        }
        let strides = self.layout(shape)?.bl.strides();
        let mut terms = vec![];
        for d in 0..shape.len() {
            let i = self.index(shape, r, d)?;
            if shape[d] > 1 {
                terms.push(if strides[d] == 1 { i } else { format!("{i} * {}u", strides[d]) });
            }
        }
        let e = if terms.is_empty() { "0u".into() } else { terms.join(" + ") };
        let out = self.prologue_let(WTy::U, e);
        self.lin_cache.insert(key, out.clone());
        Ok(out)
    }

    /// Predicate true in exactly one of the invocations holding register
    /// `r`'s element (None: every holder is the only one). Scalars:
    /// invocation 0.
    pub(super) fn owner(&mut self, shape: &[u32], r: usize) -> R<Option<String>> {
        let key = (shape.to_vec(), r);
        if let Some(o) = self.owner_cache.get(&key) {
            return Ok(o.clone());
        }
        let res = if shape.is_empty() {
            Some(self.prologue_let(WTy::B, "ft_tid == 0u"))
        } else {
            let lay = self.layout(shape)?;
            let mut terms = vec![];
            for (d, &s) in shape.iter().enumerate() {
                if lay.bl.replicated(d) {
                    terms.push(format!("({} + {}u < {s}u)", lay.thread[d], lay.reg_offsets[r][d]));
                }
            }
            if terms.is_empty() {
                None
            } else {
                Some(self.prologue_let(WTy::B, terms.join(" && ")))
            }
        };
        self.owner_cache.insert(key, res.clone());
        Ok(res)
    }

    /// The registers of `v` as the op being emitted reads them: in its
    /// shape's canonical layout, or in [`Self::want`]'s layout when the op
    /// computes in one ([`crate::plan::slices`]: then `v` is in that layout
    /// or a splat). A value held in another layout is converted to its
    /// canonical one on first use (per open block).
    pub(super) fn get(&mut self, v: V) -> Vec<String> {
        let raw = self.get_raw(v);
        let have = self.vlay.get(&v).cloned();
        match (self.want.clone(), have) {
            (Some(w), None) if self.k.ty(v).rank() >= 1 => {
                assert!(raw.iter().all(|r| *r == raw[0]), "wgsl: %{} is neither in the op's layout nor a splat", v.0);
                vec![raw[0].clone(); w.regs()]
            }
            (_, None) => raw,
            (Some(w), Some(h)) => {
                assert!(w == h, "wgsl: %{} is in another layout than the op computes in", v.0);
                raw
            }
            (None, Some(h)) => self.in_canonical_layout(v, &h, raw),
        }
    }

    /// The registers of `v` in the layout it is held in.
    pub(super) fn get_raw(&self, v: V) -> Vec<String> {
        self.vals.get(&v).cloned().unwrap_or_else(|| panic!("wgsl: value %{} not emitted", v.0))
    }

    /// The registers of `v` in the layout `like` is held in (a loop's
    /// initial and yielded values in its carried value's layout).
    pub(super) fn get_as(&mut self, v: V, like: V) -> Vec<String> {
        let prev = std::mem::replace(&mut self.want, self.vlay.get(&like).cloned());
        let out = self.get(v);
        self.want = prev;
        out
    }

    /// `v` (registers `raw` in layout `have`) in its shape's canonical
    /// layout: renamed registers when no element crosses invocations, else
    /// through workgroup memory (each register written at its linear index —
    /// copies write equal values —, read back in the canonical layout).
    fn in_canonical_layout(&mut self, v: V, have: &Blocked, raw: Vec<String>) -> Vec<String> {
        if let Some(r) = self.conv.iter().rev().find_map(|m| m.get(&v)) {
            return r.clone();
        }
        let shape = self.shape_u32(v);
        let dst = self.layout(&shape).expect("a slice layout's shape has a canonical layout");
        let out = if let Some(map) = crate::plan::layout::relayout_remap(self.nt, have, &dst) {
            map.iter().map(|&i| raw[i].clone()).collect()
        } else {
            let w = self.wty_of_val(v);
            self.smem_need(have.numel() * w.nw());
            self.bar();
            for (r, x) in raw.iter().enumerate() {
                let lin = self.lin_bl(have, r);
                let a = if w.nw() == 1 { lin } else { format!("{lin} * {}u", w.nw()) };
                self.st_slot(&a, x, w);
            }
            self.bar();
            let mut out = vec![];
            for r in 0..dst.regs() {
                let lin = self.lin(&shape, r).expect("canonical layout");
                let a = if w.nw() == 1 { lin } else { format!("{lin} * {}u", w.nw()) };
                out.push(self.let_(w, Self::ld_slot(&a, w)));
            }
            self.bar();
            out
        };
        if let Some(m) = self.conv.last_mut() {
            m.insert(v, out.clone());
        }
        out
    }

    /// A broadcast of `x` (in layout `have`, not its shape's canonical one)
    /// into `res`'s canonical layout as renamed registers, if every
    /// invocation already holds the elements it needs (an expanded slice
    /// broadcast back into the layout it was reduced from).
    pub(super) fn broadcast_remap(&mut self, x: V, have: &Blocked, res: V) -> R<Option<Vec<String>>> {
        let dst = self.layout(&self.shape_u32(res))?;
        let Some(map) = crate::plan::layout::broadcast_remap(self.nt, have, &dst) else { return Ok(None) };
        let raw = self.get_raw(x);
        Ok(Some(map.iter().map(|&i| raw[i].clone()).collect()))
    }

    pub(super) fn elem(&self, v: V) -> Elem {
        self.k.ty(v).elem().expect("tile type")
    }

    pub(super) fn dtype(&self, v: V) -> DType {
        self.elem(v).dtype()
    }

    pub(super) fn wty_of_val(&self, v: V) -> WTy {
        wty_of_elem(self.elem(v))
    }

    pub(super) fn to_u32(e: &str, w: WTy) -> String {
        match w {
            WTy::F | WTy::I => format!("bitcast<u32>({e})"),
            WTy::U => e.to_string(),
            WTy::B => format!("select(0u, 1u, {e})"),
            WTy::L | WTy::Q => unreachable!("a multi-word value in one slot"),
        }
    }

    pub(super) fn from_u32(e: &str, w: WTy) -> String {
        match w {
            WTy::F => format!("bitcast<f32>({e})"),
            WTy::I => format!("bitcast<i32>({e})"),
            WTy::U => e.to_string(),
            WTy::B => format!("({e} != 0u)"),
            WTy::L | WTy::Q => unreachable!("a multi-word value in one slot"),
        }
    }

    /// Broadcast a scalar from invocation 0 through `workgroupUniformLoad`
    /// (the result is uniform for WGSL's analysis).
    pub(super) fn uniformize(&mut self, e: &str, w: WTy) -> String {
        self.uses_uni = true;
        self.bar();
        self.line(format!("if (ft_tid == 0u) {{ ft_uni = {}; }}", Self::to_u32(e, w)));
        self.barriers += 1;
        let u = self.let_(WTy::U, "workgroupUniformLoad(&ft_uni)");
        let r = Self::from_u32(&u, w);
        self.let_(w, r)
    }

    // As in the PTX emitter: broadcasts / expand_dims of index arithmetic are
    // recomputed per element in the consumer's layout instead of moving
    // through workgroup memory (two barriers each).

    /// WGSL types of a value's registers (views: base, dims, strides).
    pub(super) fn reg_tys(&mut self, v: V) -> R<Vec<WTy>> {
        Ok(match self.k.ty(v) {
            Type::View { rank, .. } => std::iter::once(WTy::U).chain(std::iter::repeat_n(WTy::L, 2 * rank)).collect(),
            Type::Tile { elem, .. } => {
                let w = wty_of_elem(*elem);
                let n = self.nregs(v)?;
                vec![w; n]
            }
        })
    }
}

impl<'k> crate::plan::remat::Emitter<'k> for WgslWriter<'k> {
    fn remat_state(&mut self) -> &mut crate::plan::remat::Remat<'k> {
        &mut self.remat
    }
    fn vals_mut(&mut self) -> &mut crate::plan::remat::Vals {
        &mut self.vals
    }
    fn nregs_of(&mut self, v: V) -> R<usize> {
        self.nregs(v)
    }
    fn index_of(&mut self, shape: &[u32], r: usize, d: usize) -> R<String> {
        self.index(shape, r, d)
    }
    fn arange_at(&mut self, i: &str, start: i64) -> String {
        self.let_(WTy::I, format!("i32({i}) + {}", i32_lit(start as i32)))
    }
    fn zero_index(&mut self) -> String {
        "0u".to_string()
    }
    fn elementwise_op(&mut self, kind: &OpKind, v: V) -> R<Vec<String>> {
        self.elementwise(kind, v)
    }
    fn scalar_multiple_of(&mut self, v: V, m: u64) -> bool {
        self.axis.get(&v).is_some_and(|i| i.div >= m)
    }
}
