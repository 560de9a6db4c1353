//! Global memory: masked loads and stores (128-bit vectors where the axis
//! analysis proves them legal), atomics, block pointers of views, and
//! stores of accumulator-layout tiles staged through shared memory as
//! 16-byte pieces (`store_staged`).

use super::*;

/// Predicated reductions per thread from which a masked `atomic_add`
/// takes a warp-uniform unpredicated path ([`PtxWriter::red_uniform`]).
const UNIFORM_RED_MIN: usize = 4;

/// The most shared memory a staged store of its own (not in the dead
/// operand rings: [`PtxWriter::store_staged`]) takes: 128 rows of 64 bf16
/// or 32 f32 columns with their padding (18 KiB), which the widest
/// four-stage rings (192 KiB) leave room for within an SM's 227 KiB.
const STAGE_CHUNK_BYTES: u32 = 18 * 1024;

impl<'k> PtxWriter<'k> {
    pub(super) fn ld_ty(d: DType) -> &'static str {
        match d {
            DType::F32 => "f32",
            DType::F16 | DType::BF16 => "b16",
            DType::I32 => "s32",
            DType::U32 => "u32",
            DType::I64 => "b64",
            DType::I8 => "s8",
            DType::U8 => "u8",
            DType::Bool => "u8",
            // (fp8: the code, zero-extended)
            DType::F8E4M3 | DType::F8E5M2 => "u8",
            DType::Generic(_) => unreachable!(),
        }
    }

    /// Vector width for a pointer tile: runs of consecutive registers along
    /// the last dimension that are provably contiguous, aligned and masked
    /// uniformly.
    pub(super) fn vec_width(&mut self, ptr: V, mask: Option<V>) -> usize {
        let shape = self.shape_u32(ptr);
        if shape.is_empty() {
            return 1;
        }
        // (the pointer's layout: its shape's, or a per-value one)
        let bl = match self.vlay.get(&ptr) {
            Some(bl) => bl.clone(),
            None => self.layout(&shape).bl.clone(),
        };
        if bl.any_replication() {
            return 1;
        }
        let es = (self.dtype(ptr).size_bytes() as u64).max(1);
        let Some(pi) = self.axis.get(&ptr).copied() else { return 1 };
        let k = mask.map_or(u64::MAX, |m| self.axis.get(&m).map(|i| i.constancy).unwrap_or(1));
        // (the layout's runs and the widths are powers of two)
        let mut v = (bl.last_run() as u64).min(pi.access_width(es, k));
        if es == 1 {
            v = v.min(4);
        }
        v as usize
    }

    pub(super) fn load(&mut self, ptr: V, mask: Option<V>, other: Option<V>, res: V) -> R<Vec<String>> {
        let d = self.dtype(res);
        // loads of bool are not produced (no Ptr<bool>)
        if d == DType::Bool {
            return self.err("bool memory");
        }
        let rp = self.get(ptr);
        let masks = mask.map(|m| self.get(m));
        let others = other.map(|o| self.get(o));
        let w = self.vec_width(ptr, mask);
        if let Some(regs) = self.load_once_per_run(ptr, mask, &rp, masks.as_deref(), others.as_deref(), d, w, res) {
            return Ok(regs);
        }
        // no vector along the last dimension: one along another, where the
        // layout keeps consecutive elements of it in a thread (`xᵀ` as a
        // register B operand: 8 consecutive K per thread, K contiguous)
        if w == 1 && rp.len() > 1 && self.want.is_none() && !self.vlay.contains_key(&res) && !self.vlay.contains_key(&ptr) {
            let all: Vec<usize> = (0..rp.len()).collect();
            if let Some((order, v)) = self.cross_dim_vectors(ptr, mask, &all, d) {
                let pick = |xs: &[String]| -> Vec<String> { order.iter().map(|&i| xs[i].clone()).collect() };
                let (p2, m2, o2) = (pick(&rp), masks.as_deref().map(pick), others.as_deref().map(pick));
                let got = self.load_regs(&p2, m2.as_deref(), o2.as_deref(), d, v);
                let mut back = vec![String::new(); rp.len()];
                for (j, &i) in order.iter().enumerate() {
                    back[i] = got[j].clone();
                }
                return Ok(back);
            }
        }
        let mut regs = self.load_regs(&rp, masks.as_deref(), others.as_deref(), d, w);
        regs.truncate(rp.len());
        Ok(regs)
    }

    /// For each register of a load, the first register of the same thread
    /// that provably reads the same address: the pointer is constant along
    /// dimension `d` on aligned runs of `c_d` elements (the axis facts),
    /// and the layout keeps `c_d` consecutive elements in a thread
    /// (`assign::load_runs`), whose offset along `d` is a multiple of
    /// `spt_d` — so two registers whose offsets fall in one run read one
    /// address. None when no register repeats another, and for values in a
    /// per-value layout (the plan's runs are per shape).
    fn run_representatives(&mut self, ptr: V, res: V) -> Option<(Vec<usize>, Vec<u32>)> {
        let shape = self.shape_u32(ptr);
        if shape.is_empty() || self.vlay.contains_key(&res) || self.vlay.contains_key(&ptr) {
            return None;
        }
        let f = self.facts.get(&ptr)?.clone();
        let lay = self.layout(&shape);
        let bl = &lay.bl;
        let runs: Vec<u32> = (0..shape.len())
            .map(|d| {
                let i = f.dim(d);
                let c = i.constancy.min(bl.spt[d] as u64) as u32;
                if i.contig > 1 || c < 2 || bl.replicated(d) {
                    return 1;
                }
                let c = 1 << (31 - c.leading_zeros());
                if bl.spt[d].is_multiple_of(c) {
                    c
                } else {
                    1
                }
            })
            .collect();
        if runs.iter().all(|&c| c == 1) {
            return None;
        }
        let mut first: HashMap<Vec<u32>, usize> = HashMap::new();
        let reps: Vec<usize> =
            lay.reg_offsets.iter().enumerate().map(|(r, off)| *first.entry(off.iter().zip(&runs).map(|(o, c)| o / c).collect()).or_insert(r)).collect();
        reps.iter().enumerate().any(|(r, &x)| x != r).then_some((reps, runs))
    }

    /// Vector loads along a dimension other than the last: the heads of a
    /// load issued once per run (one register each) that lie `v`
    /// consecutive elements apart along dimension `d0` in one thread, where
    /// the pointer is contiguous and `v`-element aligned along `d0` and the
    /// mask constant over them (the axis facts per dimension) — `x`
    /// broadcast along N in a GEMV, 8 rows of K in a thread: one 16-byte
    /// load instead of 8 two-byte ones. Returns the heads' indices ordered
    /// into groups of `v` (each group by offset along `d0`) and `v`.
    pub(super) fn cross_dim_vectors(&mut self, ptr: V, mask: Option<V>, heads: &[usize], d: DType) -> Option<(Vec<usize>, usize)> {
        let shape = self.shape_u32(ptr);
        let rank = shape.len();
        let f = self.facts.get(&ptr)?.clone();
        let mf = mask.and_then(|m| self.facts.get(&m).cloned());
        if mask.is_some() && mf.is_none() {
            return None;
        }
        let lay = self.layout(&shape);
        let es = d.size_bytes() as u64;
        for d0 in 0..rank.saturating_sub(1) {
            let k = mf.as_ref().map_or(u64::MAX, |m| m.dim(d0).constancy);
            let mut v = (lay.bl.spt[d0] as u64).min(f.dim(d0).access_width(es, k));
            if es == 1 {
                v = v.min(4);
            }
            if v < 2 || lay.bl.replicated(d0) {
                continue;
            }
            let mut groups: Vec<(Vec<u32>, Vec<Option<usize>>)> = vec![];
            let mut ok = true;
            for (hi, &h) in heads.iter().enumerate() {
                let off = &lay.reg_offsets[h];
                let mut key = off.clone();
                key[d0] /= v as u32;
                let slot = (off[d0] as u64 % v) as usize;
                let g = match groups.iter().position(|(k, _)| *k == key) {
                    Some(g) => g,
                    None => {
                        groups.push((key, vec![None; v as usize]));
                        groups.len() - 1
                    }
                };
                if groups[g].1[slot].replace(hi).is_some() {
                    ok = false;
                }
            }
            if !ok || groups.iter().any(|(_, s)| s.iter().any(|x| x.is_none())) {
                continue;
            }
            return Some((groups.into_iter().flat_map(|(_, s)| s.into_iter().map(|x| x.unwrap())).collect(), v as usize));
        }
        None
    }

    /// For a value loaded once per run whose registers alias (the mask
    /// constant over each run, `other` absent or uniform), the first
    /// register of each register's run — what [`Self::load_once_per_run`]
    /// will produce, known before the load is emitted: a loop-carried copy
    /// of such a tile (a pipelined load) then carries one register per run
    /// instead of moving every copy each iteration.
    pub(super) fn load_alias_pattern(&mut self, v: V) -> Option<Vec<usize>> {
        let OpKind::Load { ptr, mask, other } = &self.remat.def_of(v)?.kind else { return None };
        if self.ring_plan.loads.contains_key(&v) {
            return None;
        }
        let (ptr, mask, other) = (*ptr, *mask, *other);
        if other.is_some_and(|o| !matches!(self.remat.def_of(o).map(|op| &op.kind), Some(OpKind::Splat { .. } | OpKind::Const(_)))) {
            return None;
        }
        let w = self.vec_width(ptr, mask);
        let (reps, mask_same) = self.run_plan(ptr, mask, v, w)?;
        mask_same.then_some(reps)
    }

    /// The loads-once-per-run plan of a load vectorized `w` wide: each
    /// register's run representative ([`Self::run_representatives`]),
    /// when whole vector groups repeat whole vector groups, and whether
    /// the mask is provably constant over every run (then the registers
    /// of a run alias; else each selects by its own mask).
    fn run_plan(&mut self, ptr: V, mask: Option<V>, res: V, w: usize) -> Option<(Vec<usize>, bool)> {
        let (reps, runs) = self.run_representatives(ptr, res)?;
        if (0..reps.len()).step_by(w).any(|g| reps[g] % w != 0 || (0..w).any(|t| reps[g + t] != reps[g] + t)) {
            return None;
        }
        let rank = runs.len();
        let mask_same = mask.is_none_or(|m| self.facts.get(&m).is_some_and(|f| (0..rank).all(|dd| runs[dd] == 1 || f.dim(dd).constancy >= runs[dd] as u64)));
        Some((reps, mask_same))
    }

    /// A load issued once per run of registers that read one address
    /// ([`Self::run_representatives`]), the other registers copying it.
    /// Where the mask is not provably constant over a run, the run's load
    /// is predicated on any of its lanes' masks and each register takes
    /// the loaded value or its `other` by its own mask. None: load as usual.
    #[allow(clippy::too_many_arguments)]
    fn load_once_per_run(
        &mut self,
        ptr: V,
        mask: Option<V>,
        rp: &[String],
        masks: Option<&[String]>,
        others: Option<&[String]>,
        d: DType,
        w: usize,
        res: V,
    ) -> Option<Vec<String>> {
        let (reps, mask_same) = self.run_plan(ptr, mask, res, w)?;
        let n = rp.len();
        let heads: Vec<usize> = (0..n).step_by(w).filter(|&g| reps[g] == g).collect();
        // one load per head group, predicated on the OR of its members' masks
        let mut hp = vec![];
        let mut hm = vec![];
        let mut ho = vec![];
        for &h in &heads {
            for t in 0..w {
                hp.push(rp[h + t].clone());
                if let Some(o) = others {
                    ho.push(o[h + t].clone());
                }
            }
            if let Some(m) = masks {
                let mut p = m[h].clone();
                if !mask_same {
                    for g in (0..n).step_by(w).filter(|&g| g != h && reps[g] == h) {
                        let q = self.reg(RegClass::P);
                        self.line(format!("or.pred {q}, {p}, {};", m[g]));
                        p = q;
                    }
                }
                hm.extend(std::iter::repeat_n(p, w));
            }
        }
        // heads consecutive along a dimension other than the last: one
        // vector each group ([`Self::cross_dim_vectors`])
        let loaded = match (w == 1 && mask_same).then(|| self.cross_dim_vectors(ptr, mask, &heads, d)).flatten() {
            Some((order, v)) => {
                let pick = |xs: &[String]| -> Vec<String> { order.iter().map(|&i| xs[i].clone()).collect() };
                let (hp2, hm2, ho2) = (pick(&hp), if masks.is_some() { pick(&hm) } else { vec![] }, if others.is_some() { pick(&ho) } else { vec![] });
                let got = self.load_regs(&hp2, masks.map(|_| hm2.as_slice()), others.map(|_| ho2.as_slice()), d, v);
                let mut back = vec![String::new(); got.len()];
                for (j, &i) in order.iter().enumerate() {
                    back[i] = got[j].clone();
                }
                back
            }
            None => self.load_regs(&hp, masks.map(|_| hm.as_slice()), others.map(|_| ho.as_slice()), d, w),
        };
        let at: HashMap<usize, usize> = heads.iter().enumerate().map(|(i, &h)| (h, i * w)).collect();
        let c = reg_class(Elem::Val(d));
        let sel = c.mov_ty();
        let mut out = vec![];
        for r in 0..n {
            let g = r - r % w;
            let src = loaded[at[&reps[g]] + r % w].clone();
            match masks {
                Some(m) if !mask_same => {
                    let o = match others {
                        Some(o) => o[r].clone(),
                        None => {
                            let z = self.reg(c);
                            let zero = if c == RegClass::F { "0f00000000" } else { "0" };
                            self.line(format!("mov.{sel} {z}, {zero};"));
                            z
                        }
                    };
                    let v = self.reg(c);
                    self.line(format!("selp.{sel} {v}, {src}, {o}, {};", m[g]));
                    out.push(v);
                }
                // (same mask as the head: its `other` where masked, which a
                // member shares unless `other` differs per element)
                Some(m) if others.is_some_and(|o| o[r] != o[reps[g] + r % w]) => {
                    let v = self.reg(c);
                    self.line(format!("selp.{sel} {v}, {src}, {}, {};", others.unwrap()[r], m[g]));
                    out.push(v);
                }
                _ => out.push(src),
            }
        }
        Some(out)
    }

    pub(super) fn load_regs(&mut self, ptrs: &[String], masks: Option<&[String]>, others: Option<&[String]>, d: DType, w: usize) -> Vec<String> {
        let c = reg_class(Elem::Val(d));
        let t = Self::ld_ty(d);
        let mut out = vec![];
        let n = ptrs.len();
        let mut i = 0;
        while i < n {
            let group: Vec<String> = (0..w).map(|_| self.reg(c)).collect();
            for (j, g) in group.iter().enumerate() {
                match others {
                    Some(o) => self.mov(c, g, &o[i + j]),
                    None => match c {
                        RegClass::F => self.line(format!("mov.f32 {g}, 0f00000000;")),
                        RegClass::H => self.line(format!("mov.b16 {g}, 0;")),
                        RegClass::Rd => self.line(format!("mov.b64 {g}, 0;")),
                        _ => self.line(format!("mov.b32 {g}, 0;")),
                    },
                }
            }
            let pred = masks.map(|m| format!("@{} ", m[i])).unwrap_or_default();
            let at = self.gaddr(&ptrs[i]);
            if w == 1 {
                self.line(format!("{pred}ld.global.{t} {}, [{at}];", group[0]));
            } else if w == 8 && c == RegClass::H {
                // 8 x 16-bit: PTX vectors stop at v4, so move 4 x 32-bit words
                let words: Vec<String> = (0..4).map(|_| self.reg(RegClass::R)).collect();
                for (j, wd) in words.iter().enumerate() {
                    self.line(format!("mov.b32 {wd}, {{{}, {}}};", group[2 * j], group[2 * j + 1]));
                }
                self.line(format!("{pred}ld.global.v4.b32 {{{}}}, [{at}];", words.join(", ")));
                for (j, wd) in words.iter().enumerate() {
                    self.line(format!("mov.b32 {{{}, {}}}, {wd};", group[2 * j], group[2 * j + 1]));
                    self.h_from_word.insert(group[2 * j].clone(), (wd.clone(), false));
                    self.h_from_word.insert(group[2 * j + 1].clone(), (wd.clone(), true));
                }
            } else {
                self.line(format!("{pred}ld.global.v{w}.{t} {{{}}}, [{at}];", group.join(", ")));
            }
            out.extend(group);
            i += w;
        }
        out
    }

    /// Per register of a `shape` access: the predicate of the lanes that
    /// touch memory (the mask, and the owner of an element a replicated
    /// layout holds copies of: [`Self::owner`]), and the owner predicate
    /// alone. `None`: every lane.
    pub(super) fn owned_lanes(&mut self, shape: &[u32], mask: Option<&[String]>, n: usize) -> (Vec<Option<String>>, Vec<Option<String>>) {
        let mut preds = vec![];
        let mut owners = vec![];
        for r in 0..n {
            let own = self.owner(shape, r);
            preds.push(match (mask, &own) {
                (Some(m), Some(o)) => {
                    let q = self.reg(RegClass::P);
                    self.line(format!("and.pred {q}, {}, {o};", m[r]));
                    Some(q)
                }
                (Some(m), None) => Some(m[r].clone()),
                (None, o) => o.clone(),
            });
            owners.push(own);
        }
        (preds, owners)
    }

    pub(super) fn store(&mut self, ptr: V, value: V, mask: Option<V>, atomic: bool) -> R<()> {
        if !atomic && self.store_staged(ptr, value, mask)? {
            return Ok(());
        }
        if !atomic && self.store_slice(ptr, value, mask)? {
            return Ok(());
        }
        let shape = self.shape_u32(ptr);
        let d = self.dtype(value);
        let rp = self.get(ptr);
        let rv = self.get(value);
        let rm = mask.map(|m| self.get(m));
        let (preds, _) = self.owned_lanes(&shape, rm.as_deref(), rp.len());
        let w = if atomic || self.layout_has_repl(&shape) { 1 } else { self.vec_width(ptr, mask) };
        // (over a tile of distinct addresses — masks true but at the edges
        // —; not one address broadcast — the guards' fault counter, a
        // count —, whose masks are the rare case)
        let distinct = || rp.iter().collect::<std::collections::HashSet<_>>().len() == rp.len();
        if atomic && preds.len() >= UNIFORM_RED_MIN && preds.iter().all(|p| p.is_some()) && distinct() {
            return self.red_uniform(&rp, &preds, &rv, d);
        }
        self.store_regs(&rp, &preds, &rv, d, atomic, w)
    }

    /// A 2-D store of a tensor-core accumulator layout (a thread holds runs
    /// of 2 elements along the rows: 4- or 8-byte stores, 8 rows per warp
    /// instruction, so every L2 write request carries half a sector) goes
    /// through shared memory instead: the registers are written row-major
    /// (rows padded by 16 bytes), read back as 16-byte pieces — consecutive
    /// threads, consecutive pieces of a row — and stored with one 16-byte
    /// `st.global` each, the pointers and the mask recomputed at each
    /// piece's index ([`crate::plan::remat`]). Taken when it is provably legal
    /// and free: the pointers run contiguously and 16-byte aligned over
    /// each piece and the mask is constant over it (the axis analysis), both
    /// are cheap to recompute, and there is shared memory for it:
    /// - the operand rings, dead by then (past the kernel's last ring load,
    ///   at the top level): the whole tile at once;
    /// - otherwise (a store inside the loop that also runs the rings — a
    ///   persistent kernel's epilogue, whose program goes on to its next
    ///   tile, the rings' next copies possibly in flight) a scratch region
    ///   of its own after the rings, [`STAGE_CHUNK_BYTES`] at most, filled
    ///   and drained one band of columns at a time. A band must hold a
    ///   fixed set of each thread's registers (the column of register `r`
    ///   lies in the same band in every thread), which the accumulator
    ///   layouts give for bands of 8 columns and more.
    ///
    /// Measured: 4096×4096×64 bf16 with 128×256 tiles took 44 µs, all of it
    /// the store of C (3.1 M single-sector L2 write requests for 32 MB).
    /// And without it, a persistent 128×256 FP8 / int8 GEMM's epilogue (64
    /// guarded 4-byte stores a thread, their 64-bit addresses all live)
    /// spilled 48–480 B where the kernel of one tile per program spills
    /// none (session 52, offline).
    pub(super) fn store_staged(&mut self, ptr: V, value: V, mask: Option<V>) -> R<bool> {
        let shape = self.shape_u32(ptr);
        if shape.len() != 2 || self.layout_plan.mma(&shape).is_none() {
            return Ok(false);
        }
        let d = self.dtype(value);
        let es = d.size_bytes() as u32;
        if !(es == 2 || es == 4) {
            return Ok(false);
        }
        let vw = 16 / es;
        let (rows, cols) = (shape[0], shape[1]);
        let lay = self.layout(&shape);
        let run = lay.bl.last_run();
        if lay.bl.any_replication() || run * es >= 16 || cols % vw != 0 || run > 2 {
            return Ok(false);
        }
        let threads = self.o.num_warps * 32;
        let Some(pi) = self.axis.get(&ptr).copied() else { return Ok(false) };
        if pi.contig < vw as u64 || pi.div < 16 {
            return Ok(false);
        }
        if let Some(m) = mask {
            if self.axis.get(&m).map_or(1, |i| i.constancy) < vw as u64 {
                return Ok(false);
            }
        }
        if !self.remat.worth(ptr) || mask.is_some_and(|m| !self.remat.worth(m)) {
            return Ok(false);
        }
        // the band width: every column in the rings; else the widest band
        // within STAGE_CHUNK_BYTES whose registers are the same in every
        // thread
        let in_rings = self.rings_dead && rows * (cols * es + 16) <= self.ring_plan.ring_bytes();
        let fits = |band: u32| {
            let pieces = rows * band / vw;
            band >= vw && pieces.is_multiple_of(threads) && (band / vw).is_power_of_two() && cols.is_multiple_of(band)
        };
        // each register's lowest and highest column over the threads: its
        // band, where both lie in the same one
        let spans: Vec<(u32, u32)> =
            (0..lay.regs()).map(|r| (0..threads).map(|t| lay.coords_of(t, r)[1]).fold((u32::MAX, 0), |(lo, hi), c| (lo.min(c), hi.max(c)))).collect();
        let band_of = |r: usize, band: u32| -> Option<u32> { (spans[r].0 / band == spans[r].1 / band).then_some(spans[r].0 / band) };
        let band = if in_rings {
            cols
        } else if self.ring_loops == 0 {
            // (elsewhere — a store before the rings die, or a kernel without
            // rings — the 4- and 8-byte stores stay: not measured against)
            return Ok(false);
        } else {
            let mut band = cols;
            while band >= vw && (rows * (band * es + 16) > STAGE_CHUNK_BYTES || !(0..lay.regs()).all(|r| band_of(r, band).is_some())) {
                band /= 2;
            }
            band
        };
        if !fits(band) {
            return Ok(false);
        }
        let pitch = band * es + 16;
        let bands: Vec<u32> = (0..lay.regs()).map(|r| band_of(r, band).unwrap_or(0)).collect();
        let base = if in_rings {
            // every warp is past its last ring read (the loop exits waited
            // for the copies and the MMAs)
            self.bar();
            let base = self.reg(RegClass::R);
            self.line(format!("mov.u32 {base}, ft_smem;"));
            base
        } else {
            self.smem_scratch_aligned(16, rows * pitch)
        };
        let rv = self.get(value);
        let c = self.reg_class_of(value);
        let per_row = (band / vw).trailing_zeros();
        let pieces = rows * band / vw;
        for b in 0..cols / band {
            if !in_rings {
                // (the previous band's, or another op's, readers are done)
                self.bar_before_scratch_write();
            }
            // this band's origin: the scratch address of column `b · band`
            let origin = if b == 0 {
                base.clone()
            } else {
                let o = self.reg(RegClass::R);
                self.line(format!("sub.u32 {o}, {base}, {};", b * band * es));
                o
            };
            for r in (0..rv.len()).step_by(run as usize) {
                if !in_rings && bands[r] != b {
                    continue;
                }
                let (i, j) = (self.index(&shape, r, 0), self.index(&shape, r, 1));
                let a = self.reg(RegClass::R);
                self.line(format!("mad.lo.u32 {a}, {i}, {pitch}, {origin};"));
                self.line(format!("mad.lo.u32 {a}, {j}, {es}, {a};"));
                match (c, run) {
                    (RegClass::H, 2) => {
                        let w = self.pack_b16(&rv[r], &rv[r + 1]);
                        self.line(format!("st.shared.b32 [{a}], {w};"));
                    }
                    (RegClass::H, _) => self.line(format!("st.shared.b16 [{a}], {};", rv[r])),
                    (RegClass::F, 2) => self.line(format!("st.shared.v2.f32 [{a}], {{{}, {}}};", rv[r], rv[r + 1])),
                    (RegClass::F, _) => self.line(format!("st.shared.f32 [{a}], {};", rv[r])),
                    (RegClass::R, 2) => self.line(format!("st.shared.v2.b32 [{a}], {{{}, {}}};", rv[r], rv[r + 1])),
                    (RegClass::R, _) => self.line(format!("st.shared.b32 [{a}], {};", rv[r])),
                    _ => return self.err("staged store of an unsupported register class"),
                }
            }
            self.bar();
            for it in 0..pieces / threads {
                let (p, row, col, a) = (self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R));
                self.line(format!("add.u32 {p}, {}, {};", self.tid, it * threads));
                self.line(format!("shr.u32 {row}, {p}, {per_row};"));
                self.line(format!("and.b32 {col}, {p}, {};", (band / vw) - 1));
                self.line(format!("shl.b32 {col}, {col}, {};", vw.trailing_zeros()));
                self.line(format!("mad.lo.u32 {a}, {row}, {pitch}, {base};"));
                self.line(format!("mad.lo.u32 {a}, {col}, {es}, {a};"));
                if b > 0 {
                    self.line(format!("add.u32 {col}, {col}, {};", b * band));
                }
                let words: Vec<String> = (0..4).map(|_| self.reg(RegClass::R)).collect();
                self.line(format!("ld.shared.v4.b32 {{{}}}, [{a}];", words.join(", ")));
                let at = crate::plan::remat::eval_at(self, ptr, vec![row.clone(), col.clone()])?;
                let pred = match mask {
                    Some(m) => format!("@{} ", crate::plan::remat::eval_at(self, m, vec![row, col])?),
                    None => String::new(),
                };
                let at = self.gaddr(&at);
                self.line(format!("{pred}st.global.v4.b32 [{at}], {{{}}};", words.join(", ")));
            }
        }
        Ok(true)
    }

    /// A store of a value held in a slice layout ([`crate::plan::slices`]:
    /// a row statistic) from the registers it is in: the pointers and the
    /// mask recomputed at each register's index ([`crate::plan::remat`]),
    /// one scalar store per element by its *owner* — the copy whose lane and
    /// warp bits outside the layout's fields are zero (and, along a
    /// dimension the layout wraps, the first copy). Taken when the pointers
    /// and the mask are cheap to recompute; otherwise the value is converted
    /// to its default layout and stored as any tile.
    fn store_slice(&mut self, ptr: V, value: V, mask: Option<V>) -> R<bool> {
        let Some(bl) = self.vlay.get(&value).cloned() else { return Ok(false) };
        if self.vlay.contains_key(&ptr) || mask.is_some_and(|m| self.vlay.contains_key(&m)) {
            return Ok(false);
        }
        if !self.remat.worth(ptr) || mask.is_some_and(|m| !self.remat.worth(m)) {
            return Ok(false);
        }
        let lay = self.layout_of_bl(&bl);
        // the lane and warp bits no dimension uses: copies
        let (free_l, free_w) = bl.unused_bits(self.o.num_warps);
        let first = {
            let p = self.reg(RegClass::P);
            let (t, u) = (self.reg(RegClass::R), self.reg(RegClass::R));
            self.line(format!("and.b32 {t}, {}, {free_l};", self.lane));
            self.line(format!("and.b32 {u}, {}, {free_w};", self.warp));
            self.line(format!("or.b32 {t}, {t}, {u};"));
            self.line(format!("setp.eq.u32 {p}, {t}, 0;"));
            p
        };
        let rv = self.get_raw(value);
        let (mut ptrs, mut preds) = (vec![], vec![]);
        for r in 0..rv.len() {
            let mut idx = vec![];
            let mut own = first.clone();
            for d in 0..bl.rank() {
                let i = self.reg(RegClass::R);
                self.line(format!("add.u32 {i}, {}, {};", lay.thread[d], lay.reg_offsets[r][d]));
                if bl.replicated(d) {
                    let (p, q) = (self.reg(RegClass::P), self.reg(RegClass::P));
                    self.line(format!("setp.lt.u32 {p}, {i}, {};", bl.shape[d]));
                    self.line(format!("and.pred {q}, {p}, {own};"));
                    own = q;
                    self.line(format!("and.b32 {i}, {i}, {};", bl.shape[d] - 1));
                }
                idx.push(i);
            }
            ptrs.push(crate::plan::remat::eval_at(self, ptr, idx.clone())?);
            let pred = match mask {
                Some(m) => {
                    let mv = crate::plan::remat::eval_at(self, m, idx)?;
                    let q = self.reg(RegClass::P);
                    self.line(format!("and.pred {q}, {mv}, {own};"));
                    q
                }
                None => own,
            };
            preds.push(Some(pred));
        }
        let d = self.dtype(value);
        self.store_regs(&ptrs, &preds, &rv, d, false, 1)?;
        Ok(true)
    }

    /// `atomic_add`. Without a result (dead-code elimination drops unused
    /// old values), one `red` per owned element: nothing comes back. With
    /// one, `atom` in the element's owner thread (the result register is 0
    /// in the others and on masked-off lanes), and where the layout holds
    /// copies of an element (a scalar: every thread), the owners' old
    /// values reach the copies through shared memory.
    ///
    /// The ordering (`MemSem`) is the program's, not one thread's: a
    /// release makes every thread fence its earlier writes at device
    /// scope (`fence.acq_rel.gpu`) and then waits at the program's barrier,
    /// so that the atomics, whichever threads perform them, come after all
    /// of the program's earlier memory operations (causality through the
    /// barrier); an acquire puts a barrier after the atomics and a fence in
    /// every thread, so that no thread's later access runs ahead of them.
    /// The elements' atomics themselves are relaxed at device scope.
    pub(super) fn atomic_add(&mut self, ptr: V, value: V, mask: Option<V>, sem: MemSem, res: Option<V>) -> R<Option<Vec<String>>> {
        if sem != MemSem::Relaxed && self.role != Role::All {
            return self.err(format!("an atomic_add with {} ordering in a warp-specialized kernel", sem.name()));
        }
        if sem.releases() {
            self.line("fence.acq_rel.gpu;");
            self.bar();
        }
        if res.is_none() {
            self.store(ptr, value, mask, true)?;
            if sem.acquires() {
                self.bar();
                self.line("fence.acq_rel.gpu;");
            }
            return Ok(None);
        }
        let shape = self.shape_u32(ptr);
        let d = self.dtype(value);
        let (op, c) = match d {
            DType::F32 => ("add.f32", RegClass::F),
            DType::I32 | DType::U32 => ("add.u32", RegClass::R),
            DType::I64 => ("add.u64", RegClass::Rd),
            DType::F16 => ("add.noftz.f16", RegClass::H),
            DType::BF16 if self.o.sm >= 90 => ("add.noftz.bf16", RegClass::H),
            DType::BF16 => return self.err("bf16 atomic_add needs sm_90"),
            _ => return self.err(format!("atomic_add on {d}")),
        };
        let rp = self.get(ptr);
        let rv = self.get(value);
        let rm = mask.map(|m| self.get(m));
        let zero = match c {
            RegClass::F => "0f00000000",
            RegClass::H => "0x0000",
            _ => "0",
        };
        let (preds, owners) = self.owned_lanes(&shape, rm.as_deref(), rp.len());
        let mut old = vec![];
        for (r, pred) in preds.iter().enumerate() {
            let o = self.reg(c);
            self.mov(c, &o, zero);
            let at = pred.as_ref().map(|p| format!("@{p} ")).unwrap_or_default();
            let addr = self.gaddr(&rp[r]);
            self.line(format!("{at}atom.relaxed.gpu.global.{op} {o}, [{addr}], {};", rv[r]));
            old.push(o);
        }
        let copies = shape.is_empty() || self.layout_has_repl(&shape);
        if copies {
            // the owners' old values to every copy
            let sz = if c == RegClass::Rd { 8 } else { 4 };
            let n: u32 = shape.iter().product();
            self.smem_need(n * sz);
            self.bar_before_scratch_write();
            let base = self.smem_base();
            let mut addrs = vec![];
            for (r, o) in old.iter().enumerate() {
                let lin = if shape.is_empty() { "0".to_string() } else { self.lin(&shape, r) };
                let a = self.reg(RegClass::R);
                self.line(format!("mad.lo.u32 {a}, {lin}, {sz}, {base};"));
                // (only the owner writes its slot)
                self.st_shared_if(c, &a, o, owners[r].as_deref());
                addrs.push(a);
            }
            self.bar();
            old = addrs.iter().map(|a| self.ld_shared(c, a)).collect();
            // (the scratch is read before anything reuses it)
            self.bar();
        } else if sem.acquires() {
            self.bar();
        }
        if sem.acquires() {
            self.line("fence.acq_rel.gpu;");
        }
        Ok(Some(old))
    }

    pub(super) fn layout_has_repl(&mut self, shape: &[u32]) -> bool {
        !shape.is_empty() && self.layout(shape).bl.any_replication()
    }

    pub(super) fn store_regs(&mut self, ptrs: &[String], preds: &[Option<String>], vals: &[String], d: DType, atomic: bool, w: usize) -> R<()> {
        let t = match d {
            DType::I8 | DType::U8 => "b8",
            DType::I32 | DType::U32 => "b32",
            DType::I64 => "b64",
            _ => Self::ld_ty(d),
        };
        let mut i = 0;
        while i < ptrs.len() {
            let pred = preds[i].as_ref().map(|p| format!("@{p} ")).unwrap_or_default();
            let at = self.gaddr(&ptrs[i]);
            if atomic {
                let (op, v) = match d {
                    DType::F32 => ("red.global.add.f32", vals[i].clone()),
                    DType::I32 | DType::U32 => ("red.global.add.u32", vals[i].clone()),
                    DType::I64 => ("red.global.add.u64", vals[i].clone()),
                    DType::F16 => ("red.global.add.noftz.f16", vals[i].clone()),
                    DType::BF16 if self.o.sm >= 90 => ("red.global.add.noftz.bf16", vals[i].clone()),
                    DType::BF16 => return self.err("bf16 atomic_add needs sm_90"),
                    _ => return self.err(format!("atomic_add on {d}")),
                };
                self.line(format!("{pred}{op} [{at}], {v};"));
                i += 1;
                continue;
            }
            if w == 1 {
                self.line(format!("{pred}st.global.{t} [{at}], {};", vals[i]));
            } else if w == 8 && d.size_bytes() == 2 {
                let words: Vec<String> = (0..4).map(|_| self.reg(RegClass::R)).collect();
                let x2 = if d == DType::BF16 { "bf16x2" } else { "f16x2" };
                for (j, wd) in words.iter().enumerate() {
                    let (lo, hi) = (&vals[i + 2 * j], &vals[i + 2 * j + 1]);
                    match (self.h_from_f32.get(lo).cloned(), self.h_from_f32.get(hi).cloned()) {
                        // d = {hi: cvt(a), lo: cvt(b)}; the unused single cvts die in ptxas
                        (Some(fl), Some(fh)) => self.line(format!("cvt.rn.{x2}.f32 {wd}, {fh}, {fl};")),
                        _ => self.line(format!("mov.b32 {wd}, {{{lo}, {hi}}};")),
                    }
                }
                self.line(format!("{pred}st.global.v4.b32 [{at}], {{{}}};", words.join(", ")));
            } else {
                self.line(format!("{pred}st.global.v{w}.{t} [{at}], {{{}}};", vals[i..i + w].join(", ")));
            }
            i += w;
        }
        Ok(())
    }

    /// Masked reductions (`atomic_add` without a result), many per thread:
    /// ptxas wraps each predicated `red` in a branch of its own (`BSSY`,
    /// `@P BRA`, `REDG`, `BSYNC`: four instructions and a divergence point
    /// per element), so where every lane's every predicate holds — a
    /// warp-uniform test, one `vote` — the `red`s run unpredicated, and
    /// only a warp with a masked-off element takes the predicated copy
    /// (attention backward's dQ atomics: masked only in the last query
    /// block). Every lane of a warp reaches a store together (masks are
    /// predicates, never divergence), as `vote.sync`'s full mask needs.
    fn red_uniform(&mut self, ptrs: &[String], preds: &[Option<String>], vals: &[String], d: DType) -> R<()> {
        let all = self.reg(RegClass::P);
        self.line(format!("mov.pred {all}, {};", preds[0].as_ref().expect("predicated")));
        for p in &preds[1..] {
            self.line(format!("and.pred {all}, {all}, {};", p.as_ref().expect("predicated")));
        }
        let uni = self.reg(RegClass::P);
        self.line(format!("vote.sync.all.pred {uni}, {all}, 0xffffffff;"));
        let (slow, done) = (self.label(), self.label());
        self.line(format!("@!{uni} bra {slow};"));
        let none: Vec<Option<String>> = vec![None; ptrs.len()];
        self.store_regs(ptrs, &none, vals, d, true, 1)?;
        self.line(format!("bra.uni {done};"));
        self.body.push_str(&format!("{slow}:\n"));
        self.store_regs(ptrs, preds, vals, d, true, 1)?;
        self.body.push_str(&format!("{done}:\n"));
        Ok(())
    }

    /// Addresses and in-bounds predicates of a block access into a view.
    pub(super) fn block_ptrs(&mut self, view: V, offsets: &[V], shape: &[u32]) -> R<(Vec<String>, Vec<String>)> {
        let vr = self.get(view);
        let rank = shape.len();
        let es = match self.k.ty(view) {
            Type::View { dtype, .. } => dtype.size_bytes(),
            _ => unreachable!(),
        };
        let base = vr[0].clone();
        let dims: Vec<String> = vr[1..1 + rank].to_vec();
        let strides: Vec<String> = vr[1 + rank..1 + 2 * rank].to_vec();
        let offs: Vec<String> = offsets
            .iter()
            .map(|o| {
                let r = self.get(*o)[0].clone();
                if self.dtype(*o) == DType::I64 {
                    r
                } else {
                    let w = self.reg(RegClass::Rd);
                    self.line(format!("cvt.s64.s32 {w}, {r};"));
                    w
                }
            })
            .collect();
        let n = self.layout(shape).bl.regs();
        let mut ptrs = vec![];
        let mut preds = vec![];
        for r in 0..n {
            let addr = self.reg(RegClass::Rd);
            self.line(format!("mov.b64 {addr}, {base};"));
            let mut pred: Option<String> = None;
            for d in 0..rank {
                let i = self.index(shape, r, d);
                let c = self.reg(RegClass::Rd);
                self.line(format!("cvt.u64.u32 {c}, {i};"));
                self.line(format!("add.s64 {c}, {c}, {};", offs[d]));
                let (p1, p2) = (self.reg(RegClass::P), self.reg(RegClass::P));
                self.line(format!("setp.ge.s64 {p1}, {c}, 0;"));
                self.line(format!("setp.lt.s64 {p2}, {c}, {};", dims[d]));
                self.line(format!("and.pred {p1}, {p1}, {p2};"));
                if let Some(q) = pred {
                    self.line(format!("and.pred {p1}, {p1}, {q};"));
                }
                pred = Some(p1);
                let t = self.reg(RegClass::Rd);
                self.line(format!("mul.lo.s64 {t}, {c}, {};", strides[d]));
                self.line(format!("mad.lo.s64 {addr}, {t}, {es}, {addr};"));
            }
            ptrs.push(addr);
            preds.push(pred.unwrap());
        }
        Ok((ptrs, preds))
    }
}
