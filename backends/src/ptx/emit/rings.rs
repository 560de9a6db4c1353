//! Operand rings in shared memory: `cp.async` copies (commit groups, the
//! waits and barriers before a slot is read or reused), TMA bulk tensor
//! copies completing on per-slot mbarriers (parity waits), tensor-map
//! parameters, the producer/consumer hand-over of warp-specialized kernels
//! (empty mbarriers, releases, multicast to the cluster), and tf32
//! rounding of landed slots.

use super::*;

impl<'k> PtxWriter<'k> {
    /// Loop-invariant `cp.async` slot `x` was waited for at the entry of a
    /// loop enclosing the code being emitted.
    pub(super) fn inv_covered(&self, x: V) -> bool {
        self.inv_waited.iter().any(|s| s.contains(&x))
    }

    /// Close the current `cp.async` group (loop and branch boundaries).
    pub(super) fn cp_commit(&mut self) {
        if !self.cp_pending.is_empty() {
            self.line("cp.async.commit_group;");
            self.cp_pending.clear();
        }
    }

    /// The barrier before ring slots are refilled: the CTA's, or with
    /// multicast from one stream the cluster's (the copies write the other
    /// program's slot too: both programs must be past their reads of it).
    pub(super) fn ring_bar(&mut self) {
        // (the slots a pending MMA reads are about to be refilled)
        self.wg_wait_all();
        if self.cluster_bar && self.role == Role::All {
            // (relaxed: the slots' readers are `wgmma`s this warp already
            // waited for, and their next writer is a bulk copy)
            self.line("barrier.cluster.arrive.relaxed.aligned;");
            self.line("barrier.cluster.wait.aligned;");
        } else {
            self.bar();
        }
    }

    /// Round the f32 tiles that `cp.async` copied into `wgmma` ring slots
    /// (`(tile, slot address)`; other operands are skipped) to tf32 in
    /// place, as the interpreter's `dot_tf32` rounds its inputs — the tensor
    /// cores would otherwise truncate them to their top 19 bits, twice the
    /// interpreter's error. Every thread waited for its own copies: a
    /// barrier makes all of them visible, then each thread rounds 16-byte
    /// chunks `tid, tid + T, …` of each slot (nearest-even, non-finite
    /// values unchanged: the interpreter's rounding bit for bit). The
    /// caller's proxy fence and barrier follow. (TMA slots skip this pass:
    /// their bulk copies round on the way, `AsyncPlan::round_tf32`.)
    pub(super) fn round_tf32_slots(&mut self, tiles: &[(V, String)]) {
        let mut first = true;
        for (v, slot) in tiles {
            let Some(c) = self.ring_plan.class_of(*v) else { continue };
            if self.ring_plan.tma[c].is_some() || !matches!(self.ring_plan.layout[c], crate::ptx::async_copy::SlotLayout::Swizzled { es: 4, .. }) {
                continue;
            }
            if first {
                self.bar();
                first = false;
            }
            let threads = self.o.num_warps * 32;
            let chunks = self.ring_plan.slot_bytes[c] / 16;
            let base = self.reg(RegClass::R);
            self.line(format!("mad.lo.u32 {base}, {}, 16, {slot};", self.tid));
            for q in 0..chunks.div_ceil(threads) {
                let guard = (q + 1) * threads > chunks;
                let skip = self.label();
                if guard {
                    let p = self.reg(RegClass::P);
                    self.line(format!("setp.ge.u32 {p}, {}, {};", self.tid, chunks - q * threads));
                    self.line(format!("@{p} bra {skip};"));
                }
                let w: Vec<String> = (0..4).map(|_| self.reg(RegClass::R)).collect();
                self.line(format!("ld.shared.v4.b32 {{{}}}, [{base}+{}];", w.join(", "), q * threads * 16));
                for x in &w {
                    self.tf32_round_bits(x, x);
                }
                self.line(format!("st.shared.v4.b32 [{base}+{}], {{{}}};", q * threads * 16, w.join(", ")));
                if guard {
                    self.body.push_str(&format!("{skip}:\n"));
                }
            }
        }
    }

    /// A load into an operand ring (`async_copy`): the next slot of its
    /// ring receives the tile by `cp.async` (16-byte copies where the
    /// pointers are provably contiguous and aligned; masked-off vectors are
    /// zero-filled), in the layout its `dot` reads (`wgmma`'s swizzle or
    /// `mma.sync`'s padded rows). The
    /// value is the slot's address. The copy joins the current group; the
    /// consuming `dot` waits for it.
    pub(super) fn load_async(&mut self, ptr: V, mask: Option<V>, res: V) -> R<Vec<String>> {
        let c = self.ring_plan.class_of(res).expect("ring load");
        let shape = self.shape_u32(ptr);
        let es = self.dtype(res).size_bytes() as u32;
        if shape.len() != 2 || !matches!(es, 1 | 2 | 4) {
            return self.err("cp.async ring for a tile that is not a 2-D 8-, 16- or 32-bit operand");
        }
        // the slot this load takes was last read by an earlier `dot` (in
        // every warp): a barrier orders those reads before the copies,
        // unless there was one since the last `dot`
        if self.ring_dirty {
            self.bar();
            self.ring_dirty = false;
        }
        // a group holds at most one tile per ring (the waits count groups
        // as prefetch stages)
        if self.cp_pending.iter().any(|v| self.ring_plan.class_of(*v) == Some(c)) {
            self.cp_commit();
        }
        let (cur, first, end) = self.slot_regs[c].clone();
        let wrap = self.reg(RegClass::P);
        self.line(format!("add.u32 {cur}, {cur}, {};", self.ring_plan.slot_bytes[c]));
        self.line(format!("setp.ge.u32 {wrap}, {cur}, {end};"));
        self.line(format!("@{wrap} mov.u32 {cur}, {first};"));
        let slot = self.reg(RegClass::R);
        self.line(format!("mov.u32 {slot}, {cur};"));
        let lay = self.ring_plan.layout[c];
        // (a transposed slot takes pieces along the tile's dimension 0:
        // its rows run along dimension 1)
        let transposed = matches!(lay, crate::ptx::async_copy::SlotLayout::Swizzled { transposed: true, .. });
        if transposed {
            if let Some(slot) = self.load_async_columns(ptr, mask, res, &shape, &slot, es)? {
                return Ok(vec![slot]);
            }
        }
        let w = if transposed { 1 } else { self.vec_width(ptr, mask).min(16 / es as usize) };
        let bytes = w as u32 * es;
        if bytes < 4 {
            // cp.async copies 4, 8 or 16 bytes: scattered 16-bit elements
            // (a strided operand) go through registers into the slot
            // (`FERROTILE_EXPLAIN=1` says why: a tile of a dot result's
            // shape takes the accumulator's layout — one layout per shape)
            let why = if self.layout_plan.mma(&shape).is_some() {
                format!(": its shape is also a dot result's, so it takes the accumulator's layout (one layout per shape), whose registers do not run along the pointer's contiguous dimension — a block size that differs from the result's ({shape:?}) lets it take its own")
            } else {
                ": no run of its registers lies along a contiguous, aligned dimension of its pointer".to_string()
            };
            self.explain(format!("{shape:?} tile copied into its ring slot element by element{why}"));
            let regs = self.load(ptr, mask, None, res)?;
            match lay {
                crate::ptx::async_copy::SlotLayout::Swizzled { es, transposed } => {
                    let kperm = self.ring_plan.kperm.get(&c).map(|&r| (0, r));
                    self.stage_wgmma(&regs, &shape, &slot, es, transposed, kperm)
                }
                crate::ptx::async_copy::SlotLayout::Padded { pitch } => self.stage(&regs, &shape, 2, pitch, &slot),
            }
            return Ok(vec![slot]);
        }
        let rp = self.get(ptr);
        let masks = mask.map(|m| self.get(m));
        // (B of a dot whose A is K-interleaved: its rows in that order,
        // `AsyncPlan::kperm` — each copy moves a piece of one row)
        let kperm = self.ring_plan.kperm.get(&c).copied();
        for r0 in (0..rp.len()).step_by(w) {
            let (i, j) = self.ring_ij(&shape, r0, kperm);
            let dst = match lay {
                crate::ptx::async_copy::SlotLayout::Swizzled { es, transposed: false } => self.wgmma_addr(&i, &j, shape[0], &slot, es),
                crate::ptx::async_copy::SlotLayout::Swizzled { es, transposed: true } => self.wgmma_addr(&j, &i, shape[1], &slot, es),
                crate::ptx::async_copy::SlotLayout::Padded { pitch } => {
                    let a = self.reg(RegClass::R);
                    self.line(format!("mad.lo.u32 {a}, {i}, {pitch}, {slot};"));
                    self.line(format!("mad.lo.u32 {a}, {j}, 2, {a};"));
                    super::wgmma::SAddr { reg: a, imm: 0 }
                }
            };
            let src = self.gaddr(&rp[r0]);
            self.cp_async(&dst, &src, bytes, masks.as_ref().map(|m| m[r0].as_str()));
        }
        self.cp_pending.push(res);
        Ok(vec![slot])
    }

    /// The tile indices `(i, j)` of register `r` of a ring copy, `i` moved
    /// to its place in the interleaved K order where the slot holds B's
    /// rows so (`kperm`: the run of the dot's K-interleaved A).
    fn ring_ij(&mut self, shape: &[u32], r: usize, kperm: Option<u32>) -> (String, String) {
        let (i, j) = (self.index(shape, r, 0), self.index(shape, r, 1));
        match kperm {
            Some(run) => (self.interleaved_row(&i, run), j),
            None => (i, j),
        }
    }

    /// One `cp.async` of `bytes` (4, 8 or 16) from global `src` to shared
    /// `dst`, zero-filled where the predicate `mask` is false.
    fn cp_async(&mut self, dst: &super::wgmma::SAddr, src: &str, bytes: u32, mask: Option<&str>) {
        let kind = if bytes == 16 { "cg" } else { "ca" };
        match mask {
            Some(m) => {
                let sz = self.reg(RegClass::R);
                self.line(format!("selp.u32 {sz}, {bytes}, 0, {m};"));
                self.line(format!("cp.async.{kind}.shared.global [{dst}], [{src}], {bytes}, {sz};"));
            }
            None => self.line(format!("cp.async.{kind}.shared.global [{dst}], [{src}], {bytes};")),
        }
    }

    /// [`Self::load_async`] into a transposed (K-major) slot — slot row `j`
    /// holds the tile's column `j` — of a tile whose layout keeps runs
    /// along dimension 0 in a thread and whose pointer is contiguous and
    /// aligned along it (`xᵀ` read along K, `assign::load_columns`): each
    /// run is one piece of a slot row, copied by one `cp.async` of 4–16
    /// bytes. Where the slot's rows are K-interleaved (`kperm`: the dot's A
    /// holds runs of K, `interleaved_row`), only pairs stay adjacent: 4-byte
    /// pieces. None where no piece reaches 4 bytes (the caller copies
    /// element by element).
    fn load_async_columns(&mut self, ptr: V, mask: Option<V>, res: V, shape: &[u32], slot: &str, es: u32) -> R<Option<String>> {
        if self.vlay.contains_key(&ptr) || self.vlay.contains_key(&res) {
            return Ok(None);
        }
        let rp = self.get(ptr);
        let all: Vec<usize> = (0..rp.len()).collect();
        let d = self.dtype(res);
        let Some((order, v)) = self.cross_dim_vectors(ptr, mask, &all, d) else { return Ok(None) };
        let c = self.ring_plan.class_of(res).expect("ring load");
        let kperm = self.ring_plan.kperm.get(&c).copied();
        let piece = if kperm.is_some() { v.min(2) } else { v };
        let bytes = piece as u32 * es;
        if bytes < 4 {
            return Ok(None);
        }
        let masks = mask.map(|m| self.get(m));
        // (`order`: groups of `v` registers, each by its offset along
        // dimension 0; the mask is constant over a group)
        for at in (0..order.len()).step_by(piece) {
            let r0 = order[at];
            let (i, j) = self.ring_ij(shape, r0, kperm);
            let dst = self.wgmma_addr(&j, &i, shape[1], slot, es);
            let src = self.gaddr(&rp[r0]);
            self.cp_async(&dst, &src, bytes, masks.as_ref().map(|m| m[r0].as_str()));
        }
        self.cp_pending.push(res);
        Ok(Some(slot.to_string()))
    }

    /// The mbarrier of the TMA ring slot holding tile value `v` (the slot's
    /// address with its fill's parity in bit 0: `load_tma`).
    pub(super) fn tma_bar_addr(&mut self, c: usize, v: &str) -> String {
        self.tma_bar_addr_of(c, v, false)
    }

    /// The full (or, `empty`, the empty: warp specialization) mbarrier of
    /// the TMA ring slot holding tile value `v`.
    pub(super) fn tma_bar_addr_of(&mut self, c: usize, v: &str, empty: bool) -> String {
        let (bar0, _) = self.tma_bar[c].clone().expect("TMA ring");
        let bar0 = if empty { bar0 + 8 * self.ring_plan.slots[c] } else { bar0 };
        self.slot_entry_addr(c, v, bar0)
    }

    /// The 8-byte entry of the slot holding tile value `v` (its address,
    /// the fill's parity in bit 0) in a per-slot table of ring `c` at
    /// shared-memory offset `table`: mbarriers, valid-row records.
    fn slot_entry_addr(&mut self, c: usize, v: &str, table: u32) -> String {
        let first = self.slot_regs[c].1.clone();
        let (t, b) = (self.reg(RegClass::R), self.reg(RegClass::R));
        self.line(format!("and.b32 {t}, {v}, -2;"));
        self.line(format!("sub.u32 {t}, {t}, {first};"));
        let sb = self.ring_plan.slot_bytes[c];
        if sb.is_power_of_two() {
            self.line(format!("shr.u32 {t}, {t}, {};", sb.trailing_zeros()));
        } else {
            self.line(format!("div.u32 {t}, {t}, {sb};"));
        }
        self.line(format!("mov.u32 {b}, ft_smem;"));
        self.line(format!("add.u32 {b}, {b}, {table};"));
        self.line(format!("mad.lo.u32 {t}, {t}, 8, {b};"));
        t
    }

    /// Wait (every thread) until the bulk copies of TMA tile `v` landed.
    /// `read`: the tile is read next — a dynamic view's rows outside the
    /// view are zeroed first ([`Self::tma_bounds`]).
    pub(super) fn tma_wait(&mut self, c: usize, v: &str, read: bool) {
        let bar = self.tma_bar_addr(c, v);
        let (par, p) = (self.reg(RegClass::R), self.reg(RegClass::P));
        self.line(format!("and.b32 {par}, {v}, 1;"));
        let lbl = self.label();
        self.body.push_str(&format!("{lbl}:\n"));
        self.line(format!("mbarrier.try_wait.parity.shared::cta.b64 {p}, [{bar}], {par};"));
        self.line(format!("@!{p} bra {lbl};"));
        if read && self.tma_range[c].is_some() {
            self.tma_bounds(c, v);
        }
    }

    /// Scalar integer `v` as a signed 64-bit register.
    fn as_s64(&mut self, v: V) -> String {
        let r = self.get(v)[0].clone();
        if self.dtype(v) == DType::I64 {
            return r;
        }
        let w = self.reg(RegClass::Rd);
        self.line(format!("cvt.s64.s32 {w}, {r};"));
        w
    }

    /// The slot rows and columns of TMA ring `c` (`[cols/atom][rows][atom]`).
    fn tma_rows_cols(&self, c: usize) -> (u32, u32) {
        let v = self.ring_plan.loads.iter().find(|(_, cc)| **cc == c).map(|(v, _)| *v).expect("a TMA ring has loads");
        let shape: Vec<u32> = self.k.ty(v).shape().iter().map(|d| d.known().unwrap_or(0) as u32).collect();
        self.ring_plan.layout[c].rows_cols(&shape).expect("a 2-D tile (tma_slot)")
    }

    /// The valid-row range entry of the slot holding TMA tile `v` (a
    /// dynamic view's ring: `tma_range`).
    fn tma_range_addr(&mut self, c: usize, v: &str) -> String {
        let off = self.tma_range[c].expect("a dynamic view's ring");
        self.slot_entry_addr(c, v, off)
    }

    /// A dynamic view's tile has landed in the slot of `v`: its map spans
    /// the buffer, so rows of the box outside the view (before its start,
    /// past its extent, or all of them for an empty view) hold neighbouring
    /// data. Lane 0 of each warp reads the slot's valid rows `[lo, hi)`
    /// (written by the issuing thread before the copy, ordered by the
    /// mbarrier) and shares them with its warp;
    /// where some row is invalid — the one uniform branch, taken only by a
    /// box on the view's edge — the threads zero those rows' 16-byte
    /// chunks (a row keeps its 128 bytes per column atom under the
    /// swizzle), fence them for the tensor cores and meet at a barrier.
    /// (MMAs still in flight may read the slot from an earlier reading of
    /// the same fill: they are waited for first, in the branch only.)
    fn tma_bounds(&mut self, c: usize, v: &str) {
        let (rows, cols) = self.tma_rows_cols(c);
        let es = match self.ring_plan.layout[c] {
            crate::ptx::async_copy::SlotLayout::Swizzled { es, .. } => es,
            _ => unreachable!("TMA rings are swizzled"),
        };
        let at = self.tma_range_addr(c, v);
        let (lo, hi) = (self.reg(RegClass::R), self.reg(RegClass::R));
        // (lane 0 reads the record and shares it: with the producer
        // warpgroup, the slot's release — and so the record's next write —
        // is ordered after lane 0's accesses only)
        let l0 = self.reg(RegClass::P);
        self.line(format!("setp.eq.u32 {l0}, {}, 0;", self.lane));
        self.line(format!("mov.u32 {lo}, 0;"));
        self.line(format!("mov.u32 {hi}, 0;"));
        self.line(format!("@{l0} ld.shared.v2.u32 {{{lo}, {hi}}}, [{at}];"));
        self.line(format!("shfl.sync.idx.b32 {lo}, {lo}, 0, 31, -1;"));
        self.line(format!("shfl.sync.idx.b32 {hi}, {hi}, 0, 31, -1;"));
        let (p, q) = (self.reg(RegClass::P), self.reg(RegClass::P));
        self.line(format!("setp.ne.u32 {p}, {lo}, 0;"));
        self.line(format!("setp.ne.u32 {q}, {hi}, {rows};"));
        self.line(format!("or.pred {p}, {p}, {q};"));
        let skip = self.label();
        self.line(format!("@!{p} bra.uni {skip};"));
        if self.uses_wgmma {
            self.line("wgmma.wait_group.sync.aligned 0;");
        }
        let base = self.reg(RegClass::R);
        self.line(format!("and.b32 {base}, {v}, -2;"));
        let threads = self.o.num_warps * 32;
        let chunks = rows * cols * es / 16;
        for i in 0..chunks.div_ceil(threads) {
            // chunk q = tid + i·T: byte q·16, row (q / 8) mod rows
            let (qv, r, z, a) = (self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::P), self.reg(RegClass::P));
            self.line(format!("add.u32 {qv}, {}, {};", self.tid, i * threads));
            self.line(format!("shr.u32 {r}, {qv}, 3;"));
            if rows.is_power_of_two() {
                self.line(format!("and.b32 {r}, {r}, {};", rows - 1));
            } else {
                self.line(format!("rem.u32 {r}, {r}, {rows};"));
            }
            self.line(format!("setp.lt.u32 {z}, {r}, {lo};"));
            self.line(format!("setp.ge.u32 {a}, {r}, {hi};"));
            self.line(format!("or.pred {z}, {z}, {a};"));
            if (i + 1) * threads > chunks {
                self.line(format!("setp.lt.and.u32 {z}, {qv}, {chunks}, {z};"));
            }
            let addr = self.reg(RegClass::R);
            self.line(format!("mad.lo.u32 {addr}, {qv}, 16, {base};"));
            self.line(format!("@{z} st.shared.v4.b32 [{addr}], {{0, 0, 0, 0}};"));
        }
        self.line("fence.proxy.async.shared::cta;");
        // (raw: `bar` would also wait for the MMAs in the emitter's
        // books, which this branch must not change)
        match self.role {
            Role::Consumer => self.line(format!("bar.sync 1, {threads};")),
            _ => self.line("bar.sync 0;"),
        }
        self.body.push_str(&format!("{skip}:\n"));
    }

    /// Warp-specialized consumers: every warp has finished reading the slot
    /// of TMA tile `v` (its `wgmma`s were waited for): lane 0 arrives on
    /// the slot's empty mbarrier, which the producer waits on before
    /// refilling it.
    pub(super) fn ws_release(&mut self, c: usize, v: &str, valid: Option<String>) {
        let bar = self.tma_bar_addr_of(c, v, true);
        let p = match valid {
            Some(q) => {
                let p = self.reg(RegClass::P);
                self.line(format!("and.pred {p}, {q}, {};", self.lane0));
                p
            }
            None => self.lane0.clone(),
        };
        let sink = self.reg(RegClass::Rd);
        self.line(format!("@{p} mbarrier.arrive.shared::cta.b64 {sink}, [{bar}];"));
        // multicast: the other program's producer refills this slot in
        // both programs too, so it waits for this release as well
        if self.mcast[c] {
            let remote = self.reg(RegClass::R);
            self.line(format!("mapa.shared::cluster.u32 {remote}, {bar}, {};", self.peer));
            // (default semantics: the slot's readers are `wgmma`s this
            // warp already waited for, and its next writer is a bulk copy
            // ordered by this mbarrier; a cluster-scope release here — a
            // fence over the warp's memory operations — measured 2× slower)
            self.line(format!("@{p} mbarrier.arrive.shared::cluster.b64 _, [{remote}];"));
        }
    }

    /// Whether the `dot` writing `res` releases its operand's slot of ring
    /// `c` ([`ws_release_plan`]; empty unless warp-specialized).
    pub(super) fn ws_releases(&self, res: V, c: usize) -> bool {
        self.ws_rel.get(&res).is_some_and(|cs| cs.contains(&c))
    }

    /// Release the slot recorded for ring `c` (if any) and clear the record.
    pub(super) fn ws_release_prev(&mut self, c: usize) {
        let Some(prev) = self.ws_prev[c].clone() else { return };
        let q = self.reg(RegClass::P);
        self.line(format!("setp.ne.u32 {q}, {prev}, -1;"));
        self.ws_release(c, &prev, Some(q));
        self.line(format!("mov.u32 {prev}, -1;"));
    }

    /// The generic address of the tensor-map parameter for `view` with this
    /// box (declared on first use).
    pub(super) fn tmap(&mut self, view: V, box_dims: Vec<u32>, round_tf32: bool) -> String {
        let key = (view, box_dims, round_tf32);
        if let Some(i) = self.tmaps.iter().position(|t| *t == key) {
            return self.tmap_regs[i].clone();
        }
        let r = self.reg(RegClass::Rd);
        let _ = writeln!(self.pro, "\tmov.u64 {r}, ft_tmap{};\n\tcvta.param.u64 {r}, {r};", self.tmaps.len());
        // (thread 0 brings the 128-byte descriptor close before the first
        // copy needs it: otherwise that copy's latency includes its fetch)
        if !self.leader.is_empty() {
            let _ = writeln!(self.pro, "\t@{} prefetch.tensormap [{r}];", self.leader);
        }
        self.tmaps.push(key);
        self.tmap_regs.push(r.clone());
        r
    }

    /// A `load_block` into a TMA ring (`async_copy`, `tma`): the next slot
    /// of its ring receives the tile by bulk tensor copies, issued by
    /// thread 0 and completing on the slot's mbarrier, in `wgmma`'s
    /// 128-byte swizzled layout (the tensor map swizzles as `stage_wgmma`
    /// does: slots are 1024-byte aligned), in boxes of all the tile's rows,
    /// one per 64 columns. The value is the slot's address with the
    /// parity of this fill of the slot in bit 0 (what a consumer waits on).
    pub(super) fn load_tma(&mut self, view: V, offsets: &[V], res: V) -> R<Vec<String>> {
        let c = self.ring_plan.class_of(res).expect("ring load");
        let shape = self.shape_u32(res);
        let tma_view = self.tma_views[&view].clone();
        let lay = self.ring_plan.layout[c];
        let crate::ptx::async_copy::SlotLayout::Swizzled { es, .. } = lay else {
            return self.err("TMA ring without the wgmma layout");
        };
        if !crate::ptx::async_copy::tma_slot(lay, &shape, tma_view.inner) {
            return self.err("TMA ring whose slot rows do not run along the view's contiguous dimension");
        }
        // (warp-specialized: the slot is free when its empty mbarrier says
        // so, which only the producer waits for)
        if self.ring_dirty && self.role == Role::All {
            self.ring_bar();
            self.ring_dirty = false;
        }
        let (cur, first, end) = self.slot_regs[c].clone();
        let ph = self.tma_bar[c].clone().expect("TMA ring").1;
        let wrap = self.reg(RegClass::P);
        self.line(format!("add.u32 {cur}, {cur}, {};", self.ring_plan.slot_bytes[c]));
        self.line(format!("setp.ge.u32 {wrap}, {cur}, {end};"));
        self.line(format!("@{wrap} mov.u32 {cur}, {first};"));
        self.line(format!("@{wrap} xor.b32 {ph}, {ph}, 1;"));
        let slot = self.reg(RegClass::R);
        self.line(format!("or.b32 {slot}, {cur}, {ph};"));
        if self.role == Role::Consumer {
            // the consumers only follow the ring (the producer copies)
            return Ok(vec![slot]);
        }
        let bar = self.tma_bar_addr(c, &slot);
        let empty = if self.role == Role::Producer { Some(self.tma_bar_addr_of(c, &slot, true)) } else { None };
        // coordinates, innermost (the view's unit-stride dimension) first,
        // as s32 (clamped: anything beyond is outside every tensor-map
        // extent, hence zeros, as it should be)
        let mut coords = vec![];
        // (a dynamic view: its row offset joins the outer coordinate, in
        // 64 bits before the clamp)
        let row64 = tma_view.row.map(|r| self.as_s64(r));
        let outer64 = row64.as_ref().map(|r| {
            let (i0, t) = (self.as_s64(offsets[1 - tma_view.inner]), self.reg(RegClass::Rd));
            self.line(format!("add.s64 {t}, {i0}, {r};"));
            t
        });
        for (n, o) in [offsets[tma_view.inner], offsets[1 - tma_view.inner]].into_iter().enumerate() {
            if let (1, Some(t64)) = (n, &outer64) {
                let (t, c32) = (self.reg(RegClass::Rd), self.reg(RegClass::R));
                self.line(format!("max.s64 {t}, {t64}, -2147483648;"));
                self.line(format!("min.s64 {t}, {t}, 2147483647;"));
                self.line(format!("cvt.u32.u64 {c32}, {t};"));
                coords.push(c32);
                continue;
            }
            let r = self.get(o)[0].clone();
            if self.dtype(o) == DType::I64 {
                let (t, c32) = (self.reg(RegClass::Rd), self.reg(RegClass::R));
                self.line(format!("max.s64 {t}, {r}, -2147483648;"));
                self.line(format!("min.s64 {t}, {t}, 2147483647;"));
                self.line(format!("cvt.u32.u64 {c32}, {t};"));
                coords.push(c32);
            } else {
                coords.push(r);
            }
        }
        for t in &tma_view.batch {
            let p = self.reg(RegClass::R);
            self.line(format!("mov.u32 {p}, %ctaid.{};", ["x", "y", "z"][t.axis as usize]));
            if t.div > 1 {
                self.line(format!("div.u32 {p}, {p}, {};", t.div));
            }
            if t.modulo > 0 {
                self.line(format!("rem.u32 {p}, {p}, {};", t.modulo));
            }
            coords.push(p);
        }
        // the slot: `cols / atom` column atoms of `rows` 128-byte rows
        // (`[cols/atom][rows][atom]`, swizzled), rows along the view's
        // outer dimension
        let (rows, cols) = lay.rows_cols(&shape).expect("a 2-D tile (tma_slot)");
        let atom = 128 / es;
        let mut box_dims = vec![atom, rows];
        box_dims.extend(tma_view.batch.iter().map(|_| 1));
        let tm = self.tmap(view, box_dims, self.ring_plan.round_tf32[c]);
        let base = self.reg(RegClass::R);
        self.line(format!("mov.u32 {base}, {cur};"));
        // Issued here, where the pipeliner put the prefetch: before the wait
        // for this iteration's tile, so that while a program waits, every
        // slot but the one being read is being filled (the slot refilled
        // here was freed by the previous iteration's `wgmma.wait_group` and
        // this barrier). Deferring the issue past the iteration's `wgmma`s
        // (sessions 5–9, when a step issued up to 20 copies) left one slot
        // idle through every wait: decode 16×8192×8192 bf16 took 41 µs with
        // 3 stages deferred and 36 issued here; tf32 4096³ 388 → 374 µs
        // (RESULTS, session 10).
        // warp 0 alone (a warp-uniform branch), one lane of it elected
        // (`elect.sync`: ptxas then issues each copy once, without a loop
        // over the lanes' operand values)
        let skip = self.label();
        let (w0, lead, lane) = (self.reg(RegClass::P), self.reg(RegClass::P), self.reg(RegClass::R));
        if self.role == Role::All {
            self.line(format!("setp.ne.u32 {w0}, {}, 0;", self.warp));
            self.line(format!("@{w0} bra.uni {skip};"));
        }
        self.line(format!("elect.sync {lane}|{lead}, -1;"));
        self.line(format!("@!{lead} bra {skip};"));
        if let Some(empty) = empty {
            // wait until every consumer warp released this slot's previous
            // fill (parity of the previous phase: a first fill passes)
            let (par, p, lbl) = (self.reg(RegClass::R), self.reg(RegClass::P), self.label());
            self.line(format!("and.b32 {par}, {slot}, 1;"));
            self.line(format!("xor.b32 {par}, {par}, 1;"));
            self.body.push_str(&format!("{lbl}:\n"));
            // (multicast: the other program's consumers released it too)
            self.line(format!("mbarrier.try_wait.parity.shared::cta.b64 {p}, [{empty}], {par};"));
            self.line(format!("@!{p} bra {lbl};"));
        }
        if self.tma_range[c].is_some() {
            // the box's rows inside the view, [lo, hi) of 0..rows (none
            // where the view is empty), for the readers (`tma_bounds`):
            // before the arrival, whose release orders it before their wait
            let vr = self.get(view);
            let (e_out, e_in) = (vr[1 + 1 - tma_view.inner].clone(), vr[1 + tma_view.inner].clone());
            let i0 = self.as_s64(offsets[1 - tma_view.inner]);
            let (lo, hi, t, e) = (self.reg(RegClass::Rd), self.reg(RegClass::Rd), self.reg(RegClass::Rd), self.reg(RegClass::P));
            self.line(format!("neg.s64 {lo}, {i0};"));
            self.line(format!("max.s64 {lo}, {lo}, 0;"));
            self.line(format!("min.s64 {lo}, {lo}, {rows};"));
            self.line(format!("sub.s64 {t}, {e_out}, {i0};"));
            self.line(format!("max.s64 {hi}, {t}, {lo};"));
            self.line(format!("min.s64 {hi}, {hi}, {rows};"));
            self.line(format!("setp.le.s64 {e}, {e_out}, 0;"));
            let e2 = self.reg(RegClass::P);
            self.line(format!("setp.le.s64 {e2}, {e_in}, 0;"));
            self.line(format!("or.pred {e}, {e}, {e2};"));
            let (l32, h32) = (self.reg(RegClass::R), self.reg(RegClass::R));
            self.line(format!("cvt.u32.u64 {l32}, {lo};"));
            self.line(format!("cvt.u32.u64 {h32}, {hi};"));
            self.line(format!("@{e} mov.u32 {l32}, 0;"));
            self.line(format!("@{e} mov.u32 {h32}, 0;"));
            let at = self.tma_range_addr(c, &slot);
            self.line(format!("st.shared.v2.u32 [{at}], {{{l32}, {h32}}};"));
        }
        let sink = self.reg(RegClass::Rd);
        self.line(format!("mbarrier.arrive.expect_tx.shared::cta.b64 {sink}, [{bar}], {};", rows * cols * es));
        let dim = coords.len();
        // multicast: this program copies every other column atom into the
        // same slot of both programs (completing on both full mbarriers,
        // whose `expect_tx` counts the whole tile), the other program the rest
        let mc = if self.mcast[c] {
            let (mask, mine) = (self.reg(RegClass::H), [self.reg(RegClass::P), self.reg(RegClass::P)]);
            self.line(format!("mov.b16 {mask}, 3;"));
            for (r, p) in mine.iter().enumerate() {
                self.line(format!("setp.eq.u32 {p}, {}, {r};", self.rank));
            }
            Some((mask, mine))
        } else {
            None
        };
        for ka in 0..cols / atom {
            // destination: column atom `ka`
            let dst = self.reg(RegClass::R);
            self.line(format!("add.u32 {dst}, {base}, {};", ka * rows * 128));
            let c0 = self.reg(RegClass::R);
            self.line(format!("add.s32 {c0}, {}, {};", coords[0], ka * atom));
            let cs = std::iter::once(c0).chain(coords[1..].iter().cloned()).collect::<Vec<_>>().join(", ");
            match &mc {
                Some((mask, mine)) => self.line(format!("@{} cp.async.bulk.tensor.{dim}d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [{dst}], [{tm}, {{{cs}}}], [{bar}], {mask};", mine[(ka % 2) as usize])),
                None => self.line(format!("cp.async.bulk.tensor.{dim}d.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{tm}, {{{cs}}}], [{bar}];")),
            }
        }
        self.body.push_str(&format!("{skip}:\n"));
        Ok(vec![slot])
    }
}

/// Which `dot` releases each TMA ring's slots (warp-specialized kernels):
/// every fill of a slot is released exactly once, after its last reader —
/// the consumers' arrivals complete one phase of the slot's *empty*
/// mbarrier per fill, which is what the producer counts on. A ring loaded
/// inside a loop is released by the last `dot` (in program order) inside
/// that loop that reads it (a reading after the loop, of the fill the loop
/// leaves behind, does not take the release away from the iterations); a
/// ring loaded outside every loop is filled once and never released (a
/// tile read by several `dot`s, or by one inside a loop — Q of attention —
/// would otherwise complete a phase per reading, which nobody waits for).
pub(super) fn ws_release_plan(k: &Kernel, ap: &crate::ptx::async_copy::AsyncPlan) -> HashMap<V, Vec<usize>> {
    use crate::ptx::async_copy::AsyncPlan;
    /// What one walk finds: the innermost loop (by induction variable)
    /// that refills each ring — around an in-loop load site, or carrying
    /// the ring's tile — and every `dot` reading of a ring, in program
    /// order, with the loops around it.
    #[derive(Default)]
    struct Found {
        home: HashMap<usize, V>,
        reads: Vec<(usize, V, Vec<V>)>,
    }
    fn walk(b: &Block, encl: &mut Vec<V>, ap: &AsyncPlan, f: &mut Found) {
        for op in &b.ops {
            for r in &op.results {
                if let (Some(&c), Some(&l)) = (ap.loads.get(r), encl.last()) {
                    f.home.insert(c, l);
                }
            }
            if let OpKind::Dot { a, b: bb, .. } = &op.kind {
                for x in [*a, *bb] {
                    if let Some(c) = ap.class_of(x).filter(|c| ap.tma[*c].is_some()) {
                        f.reads.push((c, op.results[0], encl.clone()));
                    }
                }
            }
            for r in op.kind.regions() {
                let lp = matches!(op.kind, OpKind::For { .. });
                if lp {
                    encl.push(r.args[0]);
                    // (a tile the loop carries to its `dot`s: refilled by
                    // every iteration)
                    for a in &r.args[1..] {
                        if let Some(c) = ap.class_of(*a) {
                            f.home.insert(c, r.args[0]);
                        }
                    }
                }
                walk(r, encl, ap, f);
                if lp {
                    encl.pop();
                }
            }
        }
    }
    let mut f = Found::default();
    walk(&k.body, &mut vec![], ap, &mut f);
    // the last reading inside the refilling loop takes the release
    let mut last: HashMap<usize, V> = HashMap::new();
    for (c, dot, encl) in f.reads {
        if f.home.get(&c).is_some_and(|l| encl.contains(l)) {
            last.insert(c, dot);
        }
    }
    let mut out: HashMap<V, Vec<usize>> = HashMap::new();
    for (c, d) in last {
        out.entry(d).or_default().push(c);
    }
    out
}
