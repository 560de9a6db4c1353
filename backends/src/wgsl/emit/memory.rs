//! Storage buffers: element and word addressing of packed 8/16-bit
//! dtypes, masked loads, stores as atomic read-modify-writes of their
//! word where elements share one, `atomic_add`, `vec4` accesses where
//! the axis analysis proves them legal, and block pointers of views.

use super::*;

impl<'k> WgslWriter<'k> {
    /// Per-buffer helper: packed store (`st`) or atomic add (`add`).
    pub(super) fn buf_helper(&mut self, p: u32, kind: &str) -> String {
        let name = format!("ft_{kind}_b{p}");
        if self.helpers.contains_key(&name) {
            return name;
        }
        let d = self.bufs[p as usize].unwrap().dtype;
        let (sh, bits) = match d.size_bytes() {
            1 => (2u32, 8u32),
            2 => (1, 16),
            _ => (0, 32),
        };
        let code = match (kind, d) {
            ("st", _) => format!(
                r#"// store the {bits}-bit element i of `b{p}` (v in the low bits): CAS on its word
fn {name}(i: u32, v: u32) {{
    let w = i >> {sh}u;
    if (w >= arrayLength(&b{p})) {{ return; }}
    let s = (i & {m}u) * {bits}u;
    var old = atomicLoad(&b{p}[w]);
    loop {{
        let r = atomicCompareExchangeWeak(&b{p}[w], old, insertBits(old, v, s, {bits}u));
        if (r.exchanged) {{ break; }}
        old = r.old_value;
    }}
}}
"#,
                m = (1u32 << sh) - 1
            ),
            ("add", DType::F32) => format!(
                r#"// add v to the f32 element i of `b{p}` (CAS on its word); the old value
fn {name}(i: u32, v: f32) -> f32 {{
    if (i >= arrayLength(&b{p})) {{ return 0.0; }}
    var old = atomicLoad(&b{p}[i]);
    loop {{
        let r = atomicCompareExchangeWeak(&b{p}[i], old, bitcast<u32>(bitcast<f32>(old) + v));
        if (r.exchanged) {{ break; }}
        old = r.old_value;
    }}
    return bitcast<f32>(old);
}}
"#
            ),
            ("add", _) => {
                let (vty, newv) = match d {
                    DType::F16 => {
                        self.helper("ft_f2h");
                        self.helper("ft_h2f");
                        ("f32", "ft_f2h(ft_h2f(e) + v)".to_string())
                    }
                    DType::BF16 => {
                        self.helper("ft_f2b");
                        self.helper("ft_b2f");
                        ("f32", "ft_f2b(ft_b2f(e) + v)".to_string())
                    }
                    DType::I8 => ("i32", "(e + bitcast<u32>(v)) & 0xffu".to_string()),
                    _ => ("u32", "(e + v) & 0xffu".to_string()),
                };
                format!(
                    r#"// add v to the {bits}-bit element i of `b{p}` (CAS on its word); the old bits
fn {name}(i: u32, v: {vty}) -> u32 {{
    let w = i >> {sh}u;
    if (w >= arrayLength(&b{p})) {{ return 0u; }}
    let s = (i & {m}u) * {bits}u;
    var old = atomicLoad(&b{p}[w]);
    loop {{
        let e = extractBits(old, s, {bits}u);
        let r = atomicCompareExchangeWeak(&b{p}[w], old, insertBits(old, {newv}, s, {bits}u));
        if (r.exchanged) {{ break; }}
        old = r.old_value;
    }}
    return extractBits(old, s, {bits}u);
}}
"#,
                    m = (1u32 << sh) - 1
                )
            }
            _ => unreachable!(),
        };
        self.helpers.insert(name.clone(), code);
        name
    }

    /// Expression loading word `wi` of buffer `p`.
    pub(super) fn word(&self, p: u32, wi: &str) -> String {
        let b = self.bufs[p as usize].unwrap();
        if b.atomic {
            format!("atomicLoad(&b{p}[{wi}])")
        } else if b.vec4 {
            format!("b{p}[({wi}) >> 2u][({wi}) & 3u]")
        } else {
            format!("b{p}[{wi}]")
        }
    }

    /// Vector width of an access through `ptr`: 4 when every run of 4
    /// registers along the last dimension is provably contiguous, 16-byte
    /// aligned and uniformly masked, the tile is not replicated, and the
    /// buffer holds plain 32-bit elements; else 1.
    pub(super) fn vec_width(&mut self, ptr: V, mask: Option<V>) -> R<u32> {
        let d = self.dtype(ptr);
        let plain = !matches!(self.base.get(&ptr).and_then(|&p| self.bufs[p as usize]), Some(b) if b.atomic);
        if d.size_bytes() != 4 || !plain {
            return Ok(1);
        }
        Ok(if self.runs_of(ptr, mask, 4, 4)? { 4 } else { 1 })
    }

    /// Whether every `n` consecutive registers along the last dimension of
    /// an access through `ptr` (in its shape's layout) make one aligned
    /// access of `n` elements of `es` bytes: the tile is not replicated, an
    /// invocation's run there is a multiple of `n`, and the axis facts'
    /// access width (contiguity, alignment, the mask's constancy) is at
    /// least `n`. The one proof behind `vec4` accesses and whole-word 16-bit
    /// loads and stores.
    fn runs_of(&mut self, ptr: V, mask: Option<V>, es: u64, n: u32) -> R<bool> {
        let shape = self.shape_u32(ptr);
        if shape.is_empty() {
            return Ok(false);
        }
        // (the pointer's layout: its shape's, or a per-value one)
        let bl = match self.vlay.get(&ptr) {
            Some(bl) => bl.clone(),
            None => self.layout(&shape)?.bl.clone(),
        };
        if bl.any_replication() || bl.spt[shape.len() - 1] % n != 0 {
            return Ok(false);
        }
        let Some(pi) = self.axis.get(&ptr).copied() else { return Ok(false) };
        let mk = mask.map_or(u64::MAX, |m| self.axis.get(&m).map_or(1, |i| i.constancy));
        Ok(pi.access_width(es, mk) >= n as u64)
    }

    /// Before emission: a written 16-bit buffer whose every store provably
    /// writes whole aligned words — pairs of consecutive elements that one
    /// invocation holds, in runs of consecutive addresses aligned to 4
    /// bytes, under a mask constant over each pair — is declared
    /// `array<u32>` and written by plain word stores. Otherwise its stores
    /// are atomic read-modify-writes of their word (a neighbour's element
    /// may share it), and so are all of its accesses: on NVIDIA's Vulkan
    /// driver that made 16-bit row kernels ~10× slower than f32 ones.
    pub(super) fn mark_word_buffers(&mut self) -> R<()> {
        let mut stores = vec![];
        let mut other = vec![];
        self.k.walk(&mut |op| match &op.kind {
            OpKind::Store { ptr, value, mask } => stores.push((*ptr, *value, *mask)),
            OpKind::StoreBlock { view, .. } => other.push(*view),
            OpKind::AtomicAdd { ptr, .. } => other.push(*ptr),
            _ => {}
        });
        let mut whole: HashMap<u32, bool> = HashMap::new();
        for v in other {
            if let Some(&p) = self.base.get(&v) {
                whole.insert(p, false);
            }
        }
        for (ptr, value, mask) in stores {
            let Some(&p) = self.base.get(&ptr) else { continue };
            let ok = self.whole_word_pairs(ptr, value, mask)?;
            *whole.entry(p).or_insert(true) &= ok;
        }
        for (p, ok) in whole {
            if let Some(b) = self.bufs[p as usize].as_mut() {
                if ok && b.dtype.size_bytes() == 2 {
                    b.atomic = false;
                }
            }
        }
        Ok(())
    }

    /// Whether a store of a 16-bit tile writes only whole words: the pairs
    /// path of [`Self::store`] (an even run per invocation along the last
    /// dimension, no replication, no slice layout) with an access width of
    /// at least 2 elements.
    fn whole_word_pairs(&mut self, ptr: V, value: V, mask: Option<V>) -> R<bool> {
        if self.dtype(value).size_bytes() != 2 || self.vlay.contains_key(&value) {
            return Ok(false);
        }
        self.runs_of(ptr, mask, 2, 2)
    }

    /// Whether a load of a 16-bit float tile reads whole aligned words:
    /// the tile in its shape's layout (no replication, an even run per
    /// invocation along the last dimension, no per-value layout) and an
    /// access width of at least 2 elements — then each pair of registers
    /// is one `u32` read instead of one read and `extractBits` per element.
    fn word_pairs(&mut self, ptr: V, mask: Option<V>, res: V) -> R<bool> {
        if !self.word_loads || !matches!(self.dtype(res), DType::F16 | DType::BF16) || self.want.is_some() {
            return Ok(false);
        }
        if [ptr, res].iter().chain(mask.as_ref()).any(|v| self.vlay.contains_key(v)) {
            return Ok(false);
        }
        self.runs_of(ptr, mask, 2, 2)
    }

    /// Before emission: buffers with a `vec4` access are declared as
    /// `array<vec4<T>>` (the declaration must be known before any access).
    pub(super) fn mark_vec4_buffers(&mut self) -> R<()> {
        let mut acc = vec![];
        self.k.walk(&mut |op| match &op.kind {
            OpKind::Load { ptr, mask, .. } => acc.push((*ptr, *mask)),
            OpKind::Store { ptr, mask, .. } => acc.push((*ptr, *mask)),
            _ => {}
        });
        for (ptr, mask) in acc {
            if self.vec_width(ptr, mask)? == 4 {
                let p = self.base_of(ptr)?;
                if let Some(b) = self.bufs[p as usize].as_mut() {
                    b.vec4 = true;
                }
            }
        }
        Ok(())
    }

    /// Expression of element `i` (a u32 register) of buffer `p`.
    pub(super) fn load_elem(&mut self, p: u32, i: &str, d: DType) -> R<String> {
        let atomic = self.bufs[p as usize].unwrap().atomic;
        Ok(match d {
            DType::F32 if atomic => format!("bitcast<f32>(atomicLoad(&b{p}[{i}]))"),
            DType::F32 | DType::I32 | DType::U32 => self.word(p, i),
            DType::I64 if atomic => format!("vec2<u32>(atomicLoad(&b{p}[2u * {i}]), atomicLoad(&b{p}[2u * {i} + 1u]))"),
            DType::I64 => format!("b{p}[{i}]"),
            DType::F16 => {
                let w = self.word(p, &format!("{i} >> 1u"));
                format!("{}(extractBits({w}, ({i} & 1u) << 4u, 16u))", self.helper("ft_h2f"))
            }
            DType::BF16 => {
                let w = self.word(p, &format!("{i} >> 1u"));
                format!("bitcast<f32>(extractBits({w}, ({i} & 1u) << 4u, 16u) << 16u)")
            }
            DType::I8 => {
                let w = self.word(p, &format!("{i} >> 2u"));
                format!("extractBits(bitcast<i32>({w}), ({i} & 3u) << 3u, 8u)")
            }
            DType::U8 => {
                let w = self.word(p, &format!("{i} >> 2u"));
                format!("extractBits({w}, ({i} & 3u) << 3u, 8u)")
            }
            DType::F8E4M3 | DType::F8E5M2 => {
                let w = self.word(p, &format!("{i} >> 2u"));
                let dec = self.helper(if d == DType::F8E4M3 { "ft_e4m3_dec" } else { "ft_e5m2_dec" });
                format!("{dec}(extractBits({w}, ({i} & 3u) << 3u, 8u))")
            }
            _ => return self.err(format!("memory of dtype {d}")),
        })
    }

    /// Masked load: masked-off lanes read element 0 and take `other`.
    pub(super) fn load_masked(&mut self, p: u32, i: &str, mask: Option<&String>, other: &str, d: DType) -> R<String> {
        let w = wty_of(d);
        match mask {
            None => {
                let e = self.load_elem(p, i, d)?;
                Ok(self.let_(w, e))
            }
            Some(m) => {
                let j = self.let_(WTy::U, format!("select(0u, {i}, {m})"));
                let e = self.load_elem(p, &j, d)?;
                Ok(self.let_(w, format!("select({other}, {e}, {m})")))
            }
        }
    }

    pub(super) fn load(&mut self, ptr: V, mask: Option<V>, other: Option<V>, res: V) -> R<Vec<String>> {
        let d = self.dtype(res);
        let p = self.base_of(ptr)?;
        let rp = self.get(ptr);
        let masks = mask.map(|m| self.get(m));
        let others = other.map(|o| self.get(o));
        let zero = zero_of(wty_of(d));
        let w = self.vec_width(ptr, mask)? as usize;
        let pairs = self.word_pairs(ptr, mask, res)?;
        let mut out = vec![];
        let mut r = 0;
        while r < rp.len() {
            let other = |r: usize| others.as_ref().map(|o| o[r].clone()).unwrap_or_else(|| zero.to_string());
            if pairs && r + 1 < rp.len() {
                // one word for two 16-bit elements (`word_pairs`): the
                // pair's masks are equal, its first element is even;
                // masked-off pairs read word 0
                let m = masks.as_ref().map(|m| m[r].clone());
                let j = match &m {
                    Some(m) => format!("select(0u, {} >> 1u, {m})", rp[r]),
                    None => format!("{} >> 1u", rp[r]),
                };
                let wv = self.word(p, &j);
                let wv = self.let_(WTy::U, wv);
                let (lo, hi) = if d == DType::BF16 {
                    (format!("bitcast<f32>({wv} << 16u)"), format!("bitcast<f32>({wv} & 0xffff0000u)"))
                } else {
                    let h2f = self.helper("ft_h2f");
                    (format!("{h2f}({wv} & 0xffffu)"), format!("{h2f}({wv} >> 16u)"))
                };
                for (j, e) in [(r, lo), (r + 1, hi)] {
                    out.push(match &m {
                        Some(m) => self.let_(WTy::F, format!("select({}, {e}, {m})", other(j))),
                        None => self.let_(WTy::F, e),
                    });
                }
                r += 2;
                continue;
            }
            if w == 4 {
                // one aligned vec4: masked-off groups read vector 0
                let m = masks.as_ref().map(|m| m[r].clone());
                let q = match &m {
                    Some(m) => self.let_(WTy::U, format!("select(0u, {} >> 2u, {m})", rp[r])),
                    None => self.let_(WTy::U, format!("{} >> 2u", rp[r])),
                };
                let v = self.fresh();
                self.line(format!("let {v} = b{p}[{q}];"));
                for j in 0..4 {
                    out.push(match &m {
                        Some(m) => self.let_(wty_of(d), format!("select({}, {v}[{j}], {m})", other(r + j))),
                        None => self.let_(wty_of(d), format!("{v}[{j}]")),
                    });
                }
                r += 4;
                continue;
            }
            out.push(self.load_masked(p, &rp[r], masks.as_ref().map(|m| &m[r]), &other(r), d)?);
            r += 1;
        }
        Ok(out)
    }

    /// `atomic_add` ([`Self::store`] without a result). With one: each
    /// owner's atomic returns the element's old value (0 in the other
    /// invocations and on masked-off lanes); a scalar's reaches every
    /// invocation through `workgroupUniformLoad` (uniform for WGSL's
    /// analysis, so a branch on it may hold barriers), a replicated tile's
    /// through workgroup memory. WGSL's atomics are relaxed and its
    /// barriers order memory within a workgroup only: an ordering other
    /// than `Relaxed` between programs cannot be expressed, and is an error.
    pub(super) fn atomic_add(&mut self, ptr: V, value: V, mask: Option<V>, sem: MemSem, res: Option<V>) -> R<Option<Vec<String>>> {
        if sem != MemSem::Relaxed {
            return self.err(format!(
                "atomic_add with {} ordering: WGSL's atomics are relaxed and its barriers order memory within a workgroup only, so one program cannot publish its writes to another (use the CUDA backend)",
                sem.name()
            ));
        }
        if res.is_none() {
            self.store(ptr, value, mask, true)?;
            return Ok(None);
        }
        let shape = self.shape_u32(ptr);
        let d = self.dtype(value);
        let p = self.base_of(ptr)?;
        let rp = self.get(ptr);
        let rv = self.get(value);
        let rm = mask.map(|m| self.get(m));
        let w = wty_of(d);
        let (preds, owners) = self.owned_lanes(&shape, rm.as_deref(), rp.len())?;
        let mut old = vec![];
        for (r, pred) in preds.iter().enumerate() {
            let (i, v) = (&rp[r], &rv[r]);
            let e = match d {
                DType::I32 | DType::U32 => format!("atomicAdd(&b{p}[{i}], {v})"),
                DType::F32 => format!("{}({i}, {v})", self.buf_helper(p, "add")),
                DType::F16 => {
                    let h2f = self.helper("ft_h2f");
                    format!("{h2f}({}({i}, {v}))", self.buf_helper(p, "add"))
                }
                DType::BF16 => {
                    let b2f = self.helper("ft_b2f");
                    format!("{b2f}({}({i}, {v}))", self.buf_helper(p, "add"))
                }
                _ => return self.err(format!("atomic_add on {d}")),
            };
            let o = self.fresh();
            let zero = match w {
                WTy::F => "0.0",
                WTy::I => "0i",
                _ => "0u",
            };
            self.line(format!("var {o}: {} = {zero};", w.name()));
            match &pred {
                Some(c) => self.line(format!("if ({c}) {{ {o} = {e}; }}")),
                None => self.line(format!("{o} = {e};")),
            }
            old.push(o);
        }
        if shape.is_empty() {
            let u = self.uniformize(&old[0], w);
            return Ok(Some(vec![u]));
        }
        if self.layout(&shape)?.bl.any_replication() {
            // the owners' old values to every copy
            let n: u32 = shape.iter().product();
            self.smem_need(n);
            self.bar();
            for (r, o) in old.iter().enumerate() {
                let lin = self.lin(&shape, r)?;
                match &owners[r] {
                    Some(c) => {
                        let st = format!("ft_smem[{lin}] = {};", Self::to_u32(o, w));
                        self.line(format!("if ({c}) {{ {st} }}"));
                    }
                    None => self.st_slot(&lin, o, w),
                }
            }
            self.bar();
            let mut out = vec![];
            for r in 0..old.len() {
                let lin = self.lin(&shape, r)?;
                let e = Self::ld_slot(&lin, w);
                out.push(self.let_(w, e));
            }
            self.bar();
            return Ok(Some(out));
        }
        Ok(Some(old.iter().map(|o| self.let_(w, o)).collect()))
    }

    /// Store (or atomically add) the register `v` at element `i` of `p`.
    pub(super) fn store_elem(&mut self, p: u32, i: &str, v: &str, d: DType, atomic_add: bool) -> R<()> {
        let b = self.bufs[p as usize].unwrap();
        if atomic_add {
            match d {
                DType::I32 | DType::U32 => self.line(format!("atomicAdd(&b{p}[{i}], {v});")),
                DType::I64 => {
                    // low word, then the high word with the carry: the sum is
                    // exact under contention (readers may see a torn value)
                    let o = self.let_(WTy::U, format!("atomicAdd(&b{p}[2u * {i}], {v}.x)"));
                    self.line(format!("atomicAdd(&b{p}[2u * {i} + 1u], {v}.y + select(0u, 1u, {o} + {v}.x < {o}));"));
                }
                DType::F32 | DType::F16 | DType::BF16 | DType::I8 | DType::U8 => {
                    let h = self.buf_helper(p, "add");
                    self.line(format!("{h}({i}, {v});"));
                }
                _ => return self.err(format!("atomic_add on {d}")),
            }
            return Ok(());
        }
        match d {
            DType::F32 | DType::I32 | DType::U32 => {
                if b.atomic {
                    let val = if d == DType::F32 { format!("bitcast<u32>({v})") } else { v.to_string() };
                    self.line(format!("atomicStore(&b{p}[{i}], {val});"));
                } else if b.vec4 {
                    self.line(format!("b{p}[({i}) >> 2u][({i}) & 3u] = {v};"));
                } else {
                    self.line(format!("b{p}[{i}] = {v};"));
                }
            }
            DType::I64 if b.atomic => {
                self.line(format!("atomicStore(&b{p}[2u * {i}], {v}.x);"));
                self.line(format!("atomicStore(&b{p}[2u * {i} + 1u], {v}.y);"));
            }
            DType::I64 => self.line(format!("b{p}[{i}] = {v};")),
            DType::F16 | DType::BF16 | DType::I8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 => {
                let bits = self.bits16(v, d);
                let h = self.buf_helper(p, "st");
                self.line(format!("{h}({i}, {bits});"));
            }
            _ => return self.err(format!("memory of dtype {d}")),
        }
        Ok(())
    }

    /// A store of a value held in a slice layout ([`crate::plan::slices`])
    /// from the registers it is in, as the PTX printer does: pointers and
    /// mask recomputed at each register's index, one store per element by
    /// the copy whose lane and warp bits outside the layout's fields are
    /// zero. Taken when the pointers and the mask are cheap to recompute.
    fn store_slice(&mut self, ptr: V, value: V, mask: Option<V>) -> R<bool> {
        let Some(bl) = self.vlay.get(&value).cloned() else { return Ok(false) };
        if self.vlay.contains_key(&ptr) || mask.is_some_and(|m| self.vlay.contains_key(&m)) {
            return Ok(false);
        }
        if !self.remat.worth(ptr) || mask.is_some_and(|m| !self.remat.worth(m)) {
            return Ok(false);
        }
        let p = self.base_of(ptr)?;
        let d = self.dtype(value);
        let lay = self.layout_of_bl(&bl);
        let (free_l, free_w) = bl.unused_bits(self.nwarps);
        let first = self.prologue_let(WTy::B, format!("((ft_lane & {free_l}u) | (ft_warp & {free_w}u)) == 0u"));
        let rv = self.get_raw(value);
        for (r, v) in rv.iter().enumerate() {
            let mut idx = vec![];
            let mut own = vec![first.clone()];
            for dd in 0..bl.rank() {
                let c = lay.reg_offsets[r][dd];
                if bl.replicated(dd) {
                    own.push(format!("({} + {c}u < {}u)", lay.thread[dd], bl.shape[dd]));
                    idx.push(self.let_(WTy::U, format!("({} + {c}u) & {}u", lay.thread[dd], bl.shape[dd] - 1)));
                } else {
                    idx.push(self.let_(WTy::U, format!("{} + {c}u", lay.thread[dd])));
                }
            }
            let at = crate::plan::remat::eval_at(self, ptr, idx.clone())?;
            if let Some(m) = mask {
                own.push(crate::plan::remat::eval_at(self, m, idx)?);
            }
            self.line(format!("if ({}) {{", own.join(" && ")));
            self.ind += 1;
            self.store_elem(p, &at, v, d, false)?;
            self.ind -= 1;
            self.line("}");
        }
        Ok(true)
    }

    /// Per register of a `shape` access: the condition of the invocations
    /// that touch memory (the mask, and the owner of an element a
    /// replicated layout holds copies of: [`Self::owner`]), and the owner
    /// condition alone. `None`: every invocation.
    pub(super) fn owned_lanes(&mut self, shape: &[u32], mask: Option<&[String]>, n: usize) -> R<(Vec<Option<String>>, Vec<Option<String>>)> {
        let mut preds = vec![];
        let mut owners = vec![];
        for r in 0..n {
            let own = self.owner(shape, r)?;
            preds.push(match (mask, &own) {
                (Some(m), Some(o)) => Some(format!("{} && {o}", m[r])),
                (Some(m), None) => Some(m[r].clone()),
                (None, o) => o.clone(),
            });
            owners.push(own);
        }
        Ok((preds, owners))
    }

    pub(super) fn store(&mut self, ptr: V, value: V, mask: Option<V>, atomic: bool) -> R<()> {
        if !atomic && self.store_slice(ptr, value, mask)? {
            return Ok(());
        }
        let shape = self.shape_u32(ptr);
        let d = self.dtype(value);
        let p = self.base_of(ptr)?;
        let rp = self.get(ptr);
        let rv = self.get(value);
        let rm = mask.map(|m| self.get(m));
        let (preds, _) = self.owned_lanes(&shape, rm.as_deref(), rp.len())?;
        // Pairs of 16-bit elements one invocation holds consecutively: one
        // word store when they turn out to share an aligned word.
        let pairs = !atomic && d.size_bytes() == 2 && !shape.is_empty() && {
            let lay = self.layout(&shape)?;
            !lay.bl.any_replication() && lay.bl.spt[shape.len() - 1] % 2 == 0
        };
        if atomic && matches!(d, DType::I32 | DType::U32) && rp.len() > 1 && rp.iter().all(|x| *x == rp[0]) && rv.iter().all(|x| *x == rv[0]) {
            // the same value added by every lane at one address (a tile
            // counted into a scalar: the guard's fault counters): one
            // atomic per invocation, of the lanes' count
            let terms: Vec<String> = preds.iter().map(|c| c.as_ref().map_or("1u".to_string(), |c| format!("select(0u, 1u, {c})"))).collect();
            let n = self.let_(WTy::U, terms.join(" + "));
            let v = if d == DType::U32 { format!("{n} * {}", rv[0]) } else { format!("i32({n}) * {}", rv[0]) };
            self.line(format!("if ({n} > 0u) {{ atomicAdd(&b{p}[{}], {v}); }}", rp[0]));
            return Ok(());
        }
        let w = if atomic { 1 } else { self.vec_width(ptr, mask)? as usize };
        let mut r = 0;
        while r < rp.len() {
            if w == 4 {
                // one aligned vec4 (no replication: the mask is the predicate)
                let v = format!("vec4<{}>({})", wty_of(d).name(), rv[r..r + 4].join(", "));
                let st = format!("b{p}[{} >> 2u] = {v};", rp[r]);
                match &preds[r] {
                    Some(c) => self.line(format!("if ({c}) {{ {st} }}")),
                    None => self.line(st),
                }
                r += 4;
                continue;
            }
            if pairs && r + 1 < rp.len() {
                let (p0, p1) = (&rp[r], &rp[r + 1]);
                let both = match (&preds[r], &preds[r + 1]) {
                    (Some(a), Some(b)) => format!("({a}) && ({b}) && "),
                    _ => String::new(),
                };
                let (h0, h1) = (self.bits16(&rv[r], d), self.bits16(&rv[r + 1], d));
                let (h0, h1) = (self.let_(WTy::U, h0), self.let_(WTy::U, h1));
                if !self.bufs[p as usize].is_some_and(|b| b.atomic) {
                    // whole words by proof (`mark_word_buffers`): the pair's
                    // predicates are equal, its first element is even
                    let st = format!("b{p}[{p0} >> 1u] = {h0} | ({h1} << 16u);");
                    match &preds[r] {
                        Some(c) => self.line(format!("if ({c}) {{ {st} }}")),
                        None => self.line(st),
                    }
                    r += 2;
                    continue;
                }
                self.line(format!("if ({both}({p0} & 1u) == 0u && {p1} == {p0} + 1u && ({p0} >> 1u) < arrayLength(&b{p})) {{"));
                self.line(format!("    atomicStore(&b{p}[{p0} >> 1u], {h0} | ({h1} << 16u));"));
                self.line("} else {");
                self.ind += 1;
                let h = self.buf_helper(p, "st");
                for (j, hv) in [(r, &h0), (r + 1, &h1)] {
                    match &preds[j] {
                        Some(c) => self.line(format!("if ({c}) {{ {h}({}, {hv}); }}", rp[j])),
                        None => self.line(format!("{h}({}, {hv});", rp[j])),
                    }
                }
                self.ind -= 1;
                self.line("}");
                r += 2;
                continue;
            }
            match &preds[r] {
                Some(c) => {
                    self.line(format!("if ({c}) {{"));
                    self.ind += 1;
                    self.store_elem(p, &rp[r], &rv[r], d, atomic)?;
                    self.ind -= 1;
                    self.line("}");
                }
                None => self.store_elem(p, &rp[r], &rv[r], d, atomic)?,
            }
            r += 1;
        }
        Ok(())
    }

    /// Element indices and in-bounds predicates of a block access.
    pub(super) fn block_ptrs(&mut self, view: V, offsets: &[V], shape: &[u32]) -> R<(Vec<String>, Vec<String>)> {
        let vr = self.get(view);
        let rank = shape.len();
        let base = vr[0].clone();
        let dims: Vec<String> = vr[1..1 + rank].to_vec();
        let strides: Vec<String> = vr[1 + rank..1 + 2 * rank].to_vec();
        let mut offs = vec![];
        for o in offsets {
            let r = self.get(*o)[0].clone();
            let d = self.dtype(*o);
            if !d.is_int() {
                return self.err("block offset of a non-integer dtype");
            }
            offs.push(self.cast(&r, d, DType::I64)?);
        }
        let n = self.layout(shape)?.regs();
        let (add, lt) = (self.helper("ft_add64"), self.helper("ft_lt64"));
        let mut idxs = vec![];
        let mut preds = vec![];
        for r in 0..n {
            let mut addr = vec![base.clone()];
            let mut pred = vec![];
            for d in 0..rank {
                let i = self.index(shape, r, d)?;
                // coordinates and bounds in 64 bits; the index needs only the low word
                let c = self.let_(WTy::L, format!("{add}({}, vec2<u32>({i}, 0u))", offs[d]));
                pred.push(format!("bitcast<i32>({c}.y) >= 0i && {lt}({c}, {})", dims[d]));
                addr.push(format!("{c}.x * {}.x", strides[d]));
            }
            idxs.push(self.let_(WTy::U, addr.join(" + ")));
            preds.push(self.let_(WTy::B, pred.join(" && ")));
        }
        Ok((idxs, preds))
    }
}
