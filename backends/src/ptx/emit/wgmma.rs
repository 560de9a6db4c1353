//! Hopper warpgroup MMAs (`wgmma.mma_async`, sm_90a): shared-memory matrix
//! descriptors over 128-byte-swizzled operand slots (from the rings, or
//! staged from registers), the accumulator in the layout `wgmma` writes,
//! one group kept in flight.

use super::*;

/// A shared-memory address as PTX writes it inside brackets: a register
/// plus an immediate byte offset.
#[derive(Clone, Debug)]
pub(super) struct SAddr {
    pub reg: String,
    pub imm: u32,
}

impl SAddr {
    /// The address `bytes` further.
    pub fn plus(&self, bytes: u32) -> SAddr {
        SAddr { reg: self.reg.clone(), imm: self.imm + bytes }
    }
}

impl std::fmt::Display for SAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.imm == 0 {
            write!(f, "{}", self.reg)
        } else {
            write!(f, "{}+{}", self.reg, self.imm)
        }
    }
}

impl<'k> PtxWriter<'k> {
    /// Store a 2-D tile of `es`-byte elements to shared memory in the layout
    /// a `wgmma` operand descriptor with 128-byte swizzling reads (see
    /// `wgmma_addr`), or its transpose (`transposed`: the tile's column `j`
    /// is the slot's row `j` — tf32 and i8 B, read K-major). Returns
    /// nothing; every thread stores its own runs (at most one 16-byte chunk
    /// per store; single elements when transposed, and i8 runs shorter than
    /// a word). `kperm`: `(dim, run)` — the tile's index along `dim` (K)
    /// goes to its position in the interleaved K order
    /// ([`crate::ptx::fragments::interleaved_row`]) of a `dot` whose other
    /// operand is K-interleaved (16-bit elements, not transposed).
    pub(super) fn stage_wgmma(&mut self, regs: &[String], shape: &[u32], base: &str, es: u32, transposed: bool, kperm: Option<(usize, u32)>) {
        let lay = self.layout(shape);
        let ty = match es {
            4 => "f32",
            2 => "b16",
            _ => "b8",
        };
        if transposed {
            for (r, v) in regs.iter().enumerate() {
                let (i, j) = (self.index(shape, r, 0), self.index(shape, r, 1));
                let (i, j) = self.kperm_ij(i, j, kperm);
                let a = self.wgmma_addr(&j, &i, shape[1], base, es);
                self.line(format!("st.shared.{ty} [{a}], {v};"));
            }
            return;
        }
        let run = lay.bl.spt[1] as usize;
        // (K along the columns permuted: pairs stay together — the
        // order's lowest bit is the index's — the rest moves)
        let piece = if kperm.is_some_and(|(d, _)| d == 1) { run.min(2) } else { run.min(16 / es as usize) };
        for r0 in (0..regs.len()).step_by(run) {
            for p0 in (0..run).step_by(piece) {
                let (i, j) = (self.index(shape, r0, 0), self.index(shape, r0 + p0, 1));
                let (i, j) = self.kperm_ij(i, j, kperm);
                let a = self.wgmma_addr(&i, &j, shape[0], base, es);
                let vals = &regs[r0 + p0..r0 + p0 + piece];
                if piece == 1 || (es == 1 && piece < 4) {
                    for (e, v) in vals.iter().enumerate() {
                        self.line(format!("st.shared.{ty} [{}], {v};", a.plus(e as u32)));
                    }
                    continue;
                }
                let words: Vec<String> = match es {
                    4 => vals.to_vec(),
                    2 => vals.chunks(2).map(|p| self.pack_b16(&p[0], &p[1])).collect(),
                    _ => vals.chunks(4).map(|p| self.pack_b8(p)).collect(),
                };
                let wt = if es == 4 { "f32" } else { "b32" };
                match words.len() {
                    1 => self.line(format!("st.shared.{wt} [{a}], {};", words[0])),
                    2 => self.line(format!("st.shared.v2.{wt} [{a}], {{{}, {}}};", words[0], words[1])),
                    _ => self.line(format!("st.shared.v4.{wt} [{a}], {{{}, {}, {}, {}}};", words[0], words[1], words[2], words[3])),
                }
            }
        }
    }

    /// Tile indices `(i, j)` with the one along `kperm`'s dimension moved to
    /// its place in the interleaved K order ([`Self::interleaved_row`]).
    fn kperm_ij(&mut self, i: String, j: String, kperm: Option<(usize, u32)>) -> (String, String) {
        match kperm {
            Some((0, r)) => (self.interleaved_row(&i, r), j),
            Some((_, r)) => (i, self.interleaved_row(&j, r)),
            None => (i, j),
        }
    }

    /// The position of K index `i` (a register) in the interleaved K order
    /// of runs of `run` ([`crate::ptx::fragments::interleaved_row`]: the
    /// same bit fields, moved with `bfe` / `bfi`). `i` is a tile index
    /// ([`Self::index`]: a prologue register), so this is computed once,
    /// in the prologue, too.
    pub(super) fn interleaved_row(&mut self, i: &str, run: u32) -> String {
        let key = (i.to_string(), run);
        if let Some(p) = self.kperm_cache.get(&key) {
            return p.clone();
        }
        // (the order moves bits inside blocks of `4·run` rows only: an index
        // `t + c` is the permuted `t + c % 4run` plus the rest of `c`, and
        // stays a root plus a constant for `wgmma_addr`'s immediates)
        let block = 4 * run;
        if let Some((t, c)) = self.idx_parts.get(i).cloned().filter(|&(_, c)| c >= block) {
            let (lo, hi) = (c % block, c - c % block);
            let r = self.reg(RegClass::R);
            self.pro.push_str(&format!("\tadd.u32 {r}, {t}, {lo};\n"));
            self.idx_parts.insert(r.clone(), (t, lo));
            let root = self.interleaved_row(&r, run);
            let p = self.reg(RegClass::R);
            self.pro.push_str(&format!("\tadd.u32 {p}, {root}, {hi};\n"));
            self.idx_parts.insert(p.clone(), (root, hi));
            self.kperm_cache.insert(key, p.clone());
            return p;
        }
        let sb = (run / 4).trailing_zeros();
        let (p, t) = (self.reg(RegClass::R), self.reg(RegClass::R));
        // (the block and `e` stay)
        let mut s = format!("\tand.b32 {p}, {i}, {};\n", !(4 * run - 1) | 1);
        s += &format!("\tbfe.u32 {t}, {i}, {}, 2;\n\tbfi.b32 {p}, {t}, {p}, 1, 2;\n", 2 + sb);
        s += &format!("\tbfe.u32 {t}, {i}, 1, 1;\n\tbfi.b32 {p}, {t}, {p}, 3, 1;\n");
        if sb > 0 {
            s += &format!("\tbfe.u32 {t}, {i}, 2, {sb};\n\tbfi.b32 {p}, {t}, {p}, 4, {sb};\n");
        }
        self.pro.push_str(&s);
        self.kperm_cache.insert(key, p.clone());
        self.idx_parts.insert(p.clone(), (p.clone(), 0));
        p
    }

    /// Shared-memory address of element `(i, j)` of a `rows`-row tile of
    /// `es`-byte elements in the swizzled `wgmma` operand layout: the
    /// columns split into atoms of 128 bytes, each atom `rows × 128` bytes,
    /// atoms one after another; inside an atom, row `i`'s 16-byte chunk `c`
    /// lives at `i·128 + ((c ^ (i % 8))·16)`.
    ///
    /// Where `i` and `j` are index registers that are the thread's offset
    /// plus a constant ([`Self::index`]: `i = tᵢ + cᵢ`), the constants'
    /// multiples of 8 rows and of one atom's columns move the element by a
    /// constant — the swizzle depends on `i % 8` and on `j` within its atom
    /// only — so the address is `base + off(tᵢ + cᵢ % 8, tⱼ + cⱼ % atom) +
    /// immediate`: the root offset is computed once, in the prologue (few
    /// distinct ones: a thread's copies are usually 8-row multiples
    /// apart, so one root serves them all), and each access adds the slot's
    /// base and writes the rest as an address immediate. Otherwise (a
    /// wrapped or permuted index) the whole offset is computed here.
    pub(super) fn wgmma_addr(&mut self, i: &str, j: &str, rows: u32, base: &str, es: u32) -> SAddr {
        let atom = 128 / es;
        if let (Some((ti, ci)), Some((tj, cj))) = (self.idx_parts.get(i).cloned(), self.idx_parts.get(j).cloned()) {
            let (ci_lo, cj_lo) = (ci % 8, cj % atom);
            let imm = (ci - ci_lo) * 128 + (cj - cj_lo) / atom * rows * 128;
            let key = (format!("{ti}+{ci_lo}"), format!("{tj}+{cj_lo}"), rows, es);
            let root = match self.swizzle_cache.get(&key) {
                Some(r) => r.clone(),
                None => {
                    let (ri, rj) = (self.reg(RegClass::R), self.reg(RegClass::R));
                    let mut s = format!("\tadd.u32 {ri}, {ti}, {ci_lo};\n\tadd.u32 {rj}, {tj}, {cj_lo};\n");
                    let off = self.reg(RegClass::R);
                    s += &self.swizzle_offset(&off, &ri, &rj, rows, es);
                    self.pro.push_str(&s);
                    self.swizzle_cache.insert(key, off.clone());
                    off
                }
            };
            let a = self.reg(RegClass::R);
            self.line(format!("add.u32 {a}, {root}, {base};"));
            return SAddr { reg: a, imm };
        }
        let a = self.reg(RegClass::R);
        let s = self.swizzle_offset(&a, i, j, rows, es);
        for l in s.lines() {
            self.line(l.trim());
        }
        self.line(format!("add.u32 {a}, {a}, {base};"));
        SAddr { reg: a, imm: 0 }
    }

    /// The PTX lines that set `a` to element `(i, j)`'s offset from the
    /// slot's base ([`Self::wgmma_addr`]'s layout).
    fn swizzle_offset(&mut self, a: &str, i: &str, j: &str, rows: u32, es: u32) -> String {
        let (atom, chunk) = (128 / es, 16 / es);
        let (t, u) = (self.reg(RegClass::R), self.reg(RegClass::R));
        let mut s = format!("\tshr.u32 {t}, {j}, {};\n", atom.trailing_zeros());
        s += &format!("\tmul.lo.u32 {a}, {t}, {};\n", rows * 128);
        s += &format!("\tmad.lo.u32 {a}, {i}, 128, {a};\n");
        s += &format!("\tbfe.u32 {t}, {j}, {}, 3;\n", chunk.trailing_zeros());
        s += &format!("\tand.b32 {u}, {i}, 7;\n");
        s += &format!("\txor.b32 {t}, {t}, {u};\n");
        s += &format!("\tmad.lo.u32 {a}, {t}, 16, {a};\n");
        s += &format!("\tand.b32 {t}, {j}, {};\n", chunk - 1);
        s += &format!("\tmad.lo.u32 {a}, {t}, {es}, {a};\n");
        s
    }

    /// `dot` as Hopper warpgroup MMAs (`wgmma.mma_async`, sm_90a), f16/bf16
    /// or tf32 into f32. Both operands are staged in shared memory in the
    /// 128-byte swizzled layouts the tensor cores read through 64-bit
    /// descriptors: A K-major (`[k/64][m][64]` for 16-bit elements) or,
    /// from a 16-bit transposed view, M-major (`[m/64][k][64]`, the
    /// instruction's "transposed A"), B N-major for 16-bit elements
    /// (`[n/64][k][64]`, "transposed B") and K-major for tf32, for a
    /// transposed view and for B narrower than 64 columns (`[k/64][n][64]`
    /// for 16-bit elements: B's tile transposed, which its ring's copies or
    /// the staging do) — `async_copy::wgmma_slot`. The accumulator has the layout `wgmma` writes
    /// (`Blocked::wgmma_acc`, over `wm = num_warps` warps along M):
    /// instruction `t` of warpgroup `g` reads A's 64-row block `t·G + g`
    /// (G warpgroups) and gives warp `w%4` rows `16·(w%4) + lane/4 + 8·h` of
    /// it — the registers the layout says; no data moves after the MMA.
    pub(super) fn dot_wgmma(&mut self, a: V, b: V, acc: V, g: crate::ptx::assign::MmaGrid, precision: DotPrecision, res: V) -> R<Vec<String>> {
        let (sa, sb) = (self.shape_u32(a), self.shape_u32(b));
        let (m, kk, n) = (sa[0], sa[1], sb[1]);
        // (f32 operands: the dot asked for tf32 — `assign` gives f32 dots a
        // tensor-core grid only then; the tensor cores read the top 19 bits
        // of each element, so a `dot_tf32`'s operands are rounded before:
        // in registers when staged, by a pass over `cp.async` slots, by the
        // bulk copies of TMA slots)
        let (ty, es) = match self.dtype(a) {
            DType::BF16 => ("bf16", 2),
            DType::F16 => ("f16", 2),
            DType::F32 => ("tf32", 4),
            DType::I8 => ("s8", 1),
            DType::F8E4M3 => ("e4m3", 1),
            DType::F8E5M2 => ("e5m2", 1),
            d => return self.err(format!("wgmma path for a {d} dot")),
        };
        self.uses_wgmma = true;
        let wm = g.wm;
        let groups = wm / 4;
        let (ca, cb) = (self.ring_plan.class_of(a), self.ring_plan.class_of(b));
        // A computed in registers whose layout already holds `wgmma`'s
        // register-A fragments (an accumulator cast to 16 bits: attention's
        // P) feeds the instructions from its registers: no staging, no
        // barrier (`ptx::fragments`)
        // A computed K-interleaved (`assign`'s `computed_a_layouts`) takes
        // K in the interleaved order, and B's rows must be in it too: its
        // ring's copies put them there (`AsyncPlan::kperm`), a staged B is
        // staged so; where B's slot is permuted and A's registers do not
        // fit, A is staged permuted too
        let run_a = self.layout_plan.a_interleaved(&sa);
        let ring_perm = cb.and_then(|c| self.ring_plan.kperm.get(&c).copied());
        let mut perm_used: Option<u32> = None;
        // A computed here and the MMA in flight across the back edge
        // (`async_copy::register_a_inflight`): the previous iteration's
        // MMA read the registers A is packed into now — wait for it first
        // (the work since its issue ran under it)
        let planned = self.ring_plan.inflight.get(&res) == Some(&acc);
        let reg_flight = planned && ca.is_none() && self.role == Role::All;
        let fresh_from = self.counts[2];
        if reg_flight {
            self.line("wgmma.wait_group.sync.aligned 0;");
            let n = self.wg_pending.len();
            self.wg_done(n);
        }
        let reg_a: Option<Vec<String>> = if ca.is_none() && es == 2 && self.o.register_a {
            let have = self.vlay.get(&a).cloned().unwrap_or_else(|| self.layout(&sa).bl.clone());
            let raw = self.get_raw(a);
            let interleaved = match (run_a, ring_perm) {
                (Some(run), Some(r)) if run == r => Some(run),
                (Some(run), None) if cb.is_none() => Some(run),
                _ => None,
            };
            let map = match (interleaved, ring_perm) {
                (Some(run), _) => crate::ptx::fragments::wgmma_a_interleaved(&have, m, kk, wm, run),
                (None, None) => crate::ptx::fragments::wgmma_a(&have, m, kk, wm),
                (None, Some(_)) => None,
            };
            let map = map.filter(|_| raw.len() == have.regs());
            if map.is_some() {
                perm_used = interleaved;
            }
            map.map(|map| map.chunks(2).map(|p| self.pack_b16(&raw[p[0]], &raw[p[1]])).collect())
        } else {
            None
        };
        // (in flight: A's words written after that wait only — a word
        // packed before it, kept from an earlier pack or load, is copied
        // into a register of its own)
        let reg_a = reg_a.map(|ws| {
            if !reg_flight {
                return ws;
            }
            ws.into_iter()
                .map(|w| {
                    let fresh = w.strip_prefix("%r").and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n >= fresh_from);
                    if fresh {
                        return w;
                    }
                    let t = self.reg(RegClass::R);
                    self.line(format!("mov.b32 {t}, {w};"));
                    t
                })
                .collect()
        });
        // (the K order both operands take: B's ring's, or A's registers')
        let kperm = ring_perm.or(perm_used);
        let stage_a = ca.is_none() && reg_a.is_none();
        // (why A is not fed from registers, for FERROTILE_EXPLAIN)
        let a_why = if !self.o.register_a {
            ": register A is off"
        } else if es != 2 {
            ": wgmma takes A from registers as 16-bit elements only"
        } else {
            if self.o.operand_layouts || run_a.is_some() {
                ": its registers do not hold wgmma's A fragments in the threads that read them (register A needs the rows split over warps as the accumulator splits them; a computed A's shape takes the fragments' layout only where no tile of it is read from shared memory and B's copies can reorder its rows)"
            } else {
                ": its registers do not hold wgmma's A fragments in the threads that read them (register A needs the rows split over warps as the accumulator splits them; FERROTILE_OPERAND_LAYOUTS=1 gives a computed A's shape the fragments' layout)"
            }
        };
        let ra = if reg_a.is_some() { vec![String::new()] } else { self.get(a) };
        let rb = self.get(b);
        // the operands' shared-memory layouts: a ring slot's
        // (`async_copy::wgmma_slot`); staged from registers, A K-major and B
        // as `wgmma_slot` would place it (K-major for tf32 and below 64
        // columns, else N-major)
        // (a flipped `trans` reads its input's slot the other way round)
        let slot_transposed = |c: Option<usize>, v: V| {
            c.is_some_and(|c| matches!(self.ring_plan.layout[c], crate::ptx::async_copy::SlotLayout::Swizzled { transposed: true, .. }))
                != self.ring_plan.flipped.contains_key(&v)
        };
        let mmajor_a = slot_transposed(ca, a);
        let kmajor_b = match cb {
            Some(_) => slot_transposed(cb, b),
            None => es != 2 || (n * es) % 128 != 0,
        };
        // operands in registers are staged in the scratch space
        let (mut base, mut base_b) = (ra[0].clone(), rb[0].clone());
        if stage_a || cb.is_none() {
            for (x, name, s) in [(stage_a, "A", &sa), (cb.is_none(), "B", &sb)] {
                if x {
                    self.explain(format!(
                        "dot operand {name} {s:?} staged from registers into shared memory for `wgmma` (computed, or loaded without a copy ring){}",
                        if name == "A" { a_why } else { "" }
                    ));
                }
            }
            // (whole 128-byte atoms along K: a computed A or a K-major B
            // with K below an atom fills only the first columns of each)
            let k_atoms = kk.next_multiple_of(128 / es);
            let bytes_a = if stage_a { m * k_atoms * es } else { 0 };
            let bytes_b = if kmajor_b { k_atoms * n * es } else { kk * n * es };
            self.bar();
            let scratch = self.smem_scratch_aligned(1024, bytes_a + if cb.is_none() { bytes_b } else { 0 });
            // (tf32 operands rounded on the way, as the interpreter does;
            // truncated ones the tensor cores truncate themselves)
            let tf = |em: &mut Self, r: &[String]| -> Vec<String> {
                if precision == DotPrecision::Tf32 {
                    r.iter().map(|f| em.tf32_round(f)).collect()
                } else {
                    r.to_vec()
                }
            };
            if stage_a {
                let ra = tf(self, &ra);
                self.stage_wgmma(&ra, &sa, &scratch, es, false, kperm.map(|r| (1, r)));
                base = scratch.clone();
            }
            if cb.is_none() {
                base_b = self.reg(RegClass::R);
                self.line(format!("add.u32 {base_b}, {scratch}, {bytes_a};"));
                let rb = tf(self, &rb);
                self.stage_wgmma(&rb, &sb, &base_b, es, kmajor_b, kperm.map(|r| (0, r)));
            }
        }
        let ready = self.ring_ready.contains(&a) && self.ring_ready.contains(&b);
        let tma = |c: Option<usize>| c.is_some_and(|c| self.ring_plan.tma[c].is_some());
        // (a loop-invariant `cp.async` slot was waited for before the loop)
        let inv = |v: V| self.ring_plan.invariant_cp(v) && self.inv_covered(self.ring_plan.source(v));
        let (cp_a, cp_b) = (ca.is_some() && !tma(ca) && !inv(a), cb.is_some() && !tma(cb) && !inv(b));
        if ready {
            // waited for at the top of the loop body; close this
            // iteration's prefetch group
            self.cp_commit();
        } else if cp_a || cp_b {
            // the operands' copies: loaded directly (in the open group or an
            // older one): wait for everything; carried from `d` iterations
            // back: every iteration since closed at least one group (the
            // one with its ring's prefetch, closed here at the latest), so
            // the newest `d` groups may stay in flight
            let dist = |v: V| self.ring_plan.carried.get(&self.ring_plan.source(v)).map_or(0, |c| c.1);
            let keep = [(a, cp_a), (b, cp_b)].iter().filter(|(_, c)| *c).map(|(v, _)| dist(*v)).min().unwrap_or(0);
            self.cp_commit();
            self.line(format!("cp.async.wait_group {keep};"));
        }
        // generic-proxy writes (stores, cp.async) read by the async proxy
        // (the tensor cores): fence in every writing thread, then a barrier
        // (bulk tensor copies are async-proxy writes: their mbarrier is
        // all the tensor cores need)
        if !ready && (cp_a || cp_b) && precision == DotPrecision::Tf32 {
            self.round_tf32_slots(&[(a, ra[0].clone()), (b, rb[0].clone())]);
        }
        if !ready && (stage_a || cb.is_none() || cp_a || cp_b) {
            self.line("fence.proxy.async.shared::cta;");
            self.bar();
        }
        for (c, r) in [(ca, &ra[0]), (cb, &rb[0])] {
            if let Some(c) = c.filter(|c| self.ring_plan.tma[*c].is_some()) {
                self.tma_wait(c, r, true);
            }
        }
        self.ring_dirty = true;
        // descriptors: start address >> 4 (bits 0-13), leading byte offset
        // >> 4 (16-29), stride byte offset >> 4 (32-45), swizzle 128B (62-63)
        let desc = |em: &mut Self, addr: &str, lbo: u32, sbo: u32| -> String {
            let (lo, d) = (em.reg(RegClass::R), em.reg(RegClass::Rd));
            em.line(format!("bfe.u32 {lo}, {addr}, 4, 14;"));
            em.line(format!("cvt.u64.u32 {d}, {lo};"));
            let hi: u64 = ((lbo as u64 >> 4) << 16) | ((sbo as u64 >> 4) << 32) | (1u64 << 62);
            em.line(format!("or.b64 {d}, {d}, {hi};"));
            d
        };
        // A: this warpgroup's first 64-row block. K-major: rows of 128-byte
        // atoms, LBO unused (1), SBO = between groups of 8 rows; M-major
        // (16-bit, from a transposed view): a 64-row block is one atom
        // column `[k][64]`, `k·128` bytes, SBO = between groups of 8
        // k-rows (LBO, between atoms along M, is not crossed by m64)
        let block_a = if mmajor_a { kk * 128 } else { 8192 };
        let da = if reg_a.is_some() {
            String::new()
        } else {
            let wg = self.reg(RegClass::R);
            self.line(format!("shr.u32 {wg}, {}, 2;", self.warp));
            let addr_a = self.reg(RegClass::R);
            self.line(format!("mad.lo.u32 {addr_a}, {wg}, {block_a}, {base};"));
            if mmajor_a {
                desc(self, &addr_a, kk * 128, 1024)
            } else {
                desc(self, &addr_a, 16, 1024)
            }
        };
        // B, 16-bit as stored row-major: N-major; LBO = distance between
        // 64-column atoms, SBO = between groups of 8 k-rows. tf32, 16-bit
        // from a transposed view and B narrower than an atom: K-major like
        // A (the slot holds B transposed: row n, one 128-byte atom row of K)
        let db = if kmajor_b { desc(self, &base_b, 16, 1024) } else { desc(self, &base_b, kk * 128, 1024) };
        let racc = self.get(acc);
        // in flight across the back edge (`async_copy`): accumulate in the
        // carried registers themselves, which nothing else reads until the
        // loop ends (a copy would make ptxas serialize the MMAs)
        // (planned with A from registers: only where A is fed from them)
        let inflight = planned && (ca.is_some() || reg_flight && reg_a.is_some());
        let reg_flight = reg_flight && inflight;
        // (s32 accumulators for i8)
        let int = self.dtype(a) == DType::I8;
        let acls = if int { RegClass::R } else { RegClass::F };
        let accs: Vec<String> = if inflight {
            racc.clone()
        } else {
            racc.iter()
                .map(|v| {
                    let t = self.reg(acls);
                    self.mov(acls, &t, v);
                    t
                })
                .collect()
        };
        let scale_d = self.reg(RegClass::P);
        // scale-d: accumulate into d (always true; a register operand)
        self.line(format!("setp.eq.u32 {scale_d}, {}, {};", self.lane, self.lane));
        self.line("wgmma.fence.sync.aligned;");
        let ni = n.min(256);
        let rn = (n / 8) as usize;
        let tcount = m / (16 * wm);
        // one instruction step takes 32 bytes of K (k16 of 16-bit, k8 of
        // tf32, k32 of i8); four of them make a 128-byte atom
        let kstep = 32 / es;
        for ks in 0..kk / kstep {
            for t in 0..tcount {
                // A: four 32-bit fragment registers, or a descriptor
                let dai = match &reg_a {
                    Some(f) => {
                        let at = ((ks * tcount + t) * 4) as usize;
                        format!("{{{}}}", f[at..at + 4].join(", "))
                    }
                    None => {
                        let off_a = if mmajor_a { (t * groups) * block_a + ks * kstep * 128 } else { (t * groups) * 8192 + (ks / 4) * m * 128 + (ks % 4) * 32 };
                        let dai = self.reg(RegClass::Rd);
                        self.line(format!("add.s64 {dai}, {da}, {};", off_a >> 4));
                        dai
                    }
                };
                for u in 0..n / ni {
                    let off_b = if kmajor_b { (ks / 4) * n * 128 + (ks % 4) * 32 + u * ni * 128 } else { u * (ni / 64) * kk * 128 + ks * 16 * 128 };
                    let dbi = self.reg(RegClass::Rd);
                    self.line(format!("add.s64 {dbi}, {db}, {};", off_b >> 4));
                    let mut d = vec![];
                    for q in 0..(ni / 2) as usize {
                        let (jj, h, e) = (q / 4, (q % 4) / 2, q % 2);
                        let j = (u * ni / 8) as usize + jj;
                        d.push(accs[(2 * t as usize + h) * 2 * rn + 2 * j + e].clone());
                    }
                    // (tf32 has no transpose immediates: both operands
                    // K-major; 16-bit: "transposed" = M-major A, N-major B)
                    // (register A has no transpose immediate)
                    // (i8: no scale or transpose immediates, both
                    // operands K-major, s32 accumulators)
                    if int {
                        self.line(format!("wgmma.mma_async.sync.aligned.m64n{ni}k{kstep}.s32.s8.s8 {{{}}}, {dai}, {dbi}, {scale_d};", d.join(", ")));
                        continue;
                    }
                    // (fp8: scale immediates, no transposes — both K-major)
                    if es == 1 {
                        self.line(format!("wgmma.mma_async.sync.aligned.m64n{ni}k{kstep}.f32.{ty}.{ty} {{{}}}, {dai}, {dbi}, {scale_d}, 1, 1;", d.join(", ")));
                        continue;
                    }
                    let imm = if es == 4 {
                        "1, 1".to_string()
                    } else if reg_a.is_some() {
                        format!("1, 1, {}", !kmajor_b as u32)
                    } else {
                        format!("1, 1, {}, {}", mmajor_a as u32, !kmajor_b as u32)
                    };
                    self.line(format!("wgmma.mma_async.sync.aligned.m64n{ni}k{kstep}.f32.{ty}.{ty} {{{}}}, {dai}, {dbi}, {scale_d}, {imm};", d.join(", ")));
                }
            }
        }
        self.line("wgmma.commit_group.sync.aligned;");
        // Deferred: waited for before the first op that reads the result
        // (`wg_wait_for`). Operands staged in the scratch space are not:
        // the next op that writes the scratch space does not know it.
        // Warp-specialized: the ring slots it reads are released when it is
        // waited for (by their registers: a carried slot's register changes
        // only in the loop's parallel copy, after the block's last wait).
        // (register A in flight: waited for where the next A is packed,
        // and after the loop)
        if reg_flight {
            return Ok(accs);
        }
        if self.wg_defer && !inflight && !stage_a && cb.is_some() && self.role != Role::Producer {
            let rel = [(ca, &ra[0]), (cb, &rb[0])].into_iter().filter_map(|(c, r)| c.filter(|c| self.ws_releases(res, *c)).map(|c| (c, r.clone()))).collect();
            // (this warpgroup's rows; 8-bit inputs run twice as fast, tf32 half)
            let cycles = (m / groups.max(1)) as u64 * (n * kk) as u64 * es as u64 / 4096;
            self.wg_pending.push(WgGroup { res, rel, work: self.work, at: self.body.len(), cycles });
            return Ok(accs);
        }
        // In flight: wait for the previous iteration's group only (its ring
        // slots are then free; the loop's exit waits for the last). No
        // trailing barrier, as for mma.sync: the wait makes this
        // warpgroup's shared-memory reads complete, and the next writer
        // starts with a barrier.
        self.line(format!("wgmma.wait_group.sync.aligned {};", inflight as u32));
        // (every older group is complete too)
        let n = self.wg_pending.len();
        self.wg_done(n);
        // warp-specialized: the slots the waited-for MMAs read are free (in
        // flight: the previous dot's, recorded; else this one's)
        for (c, r) in [(ca, &ra[0]), (cb, &rb[0])] {
            let Some(c) = c.filter(|c| self.ws_releases(res, *c)) else { continue };
            if inflight {
                self.ws_release_prev(c);
                let prev = self.ws_prev[c].clone().unwrap();
                self.line(format!("mov.u32 {prev}, {r};"));
            } else {
                self.ws_release(c, r, None);
            }
        }
        Ok(accs)
    }

    /// Wait for the pending `wgmma` group that writes `v`, if there is one
    /// (groups complete in order: the older ones are then complete too).
    pub(super) fn wg_wait_for(&mut self, v: V) {
        if let Some(i) = self.wg_pending.iter().position(|p| p.res == v) {
            let newer = self.wg_pending.len() - 1 - i;
            self.wg_boundary(i);
            self.line(format!("wgmma.wait_group.sync.aligned {newer};"));
            self.wg_done(i + 1);
        }
    }

    /// Wait for every pending `wgmma` group.
    pub(super) fn wg_wait_all(&mut self) {
        if !self.wg_pending.is_empty() {
            self.wg_boundary(self.wg_pending.len() - 1);
            self.line("wgmma.wait_group.sync.aligned 0;");
            let n = self.wg_pending.len();
            self.wg_done(n);
        }
    }

    /// Before a deferred wait for pending group `i`: where its MMAs are
    /// long next to the work written between their issue and the wait,
    /// end the basic block here. ptxas schedules a `wgmma.wait_group` at
    /// the top of its basic block (after the MMAs it waits for, if they
    /// are in it), whatever the PTX order: the MMAs would overlap none of
    /// that work (attention's previous P·V and the softmax). A branch
    /// ptxas cannot remove ends the block: it jumps over a `membar.cta`
    /// unless the grid has no programs along x, which never happens.
    /// Long: their tensor-core cycles at least half the PTX instructions in
    /// between (about the warp's issue cycles for them). Short MMAs are
    /// done before the wait anyway, and the boundary would only take
    /// ptxas' freedom to spread the work after the wait (measured on the
    /// H200, session 35: attention's d128 P·V, 512 cycles against ~700
    /// instructions, +4–8 %; d64's, 128 cycles, −3 to −7 %).
    fn wg_boundary(&mut self, i: usize) {
        let g = &self.wg_pending[i];
        let lines = self.body[g.at..].bytes().filter(|&b| b == b'\n').count() as u64;
        if self.work == g.work || lines < 256 || 2 * g.cycles < lines {
            return;
        }
        let (r, p, l) = (self.reg(RegClass::R), self.reg(RegClass::P), self.label());
        self.line(format!("mov.u32 {r}, %nctaid.x;"));
        self.line(format!("setp.ne.u32 {p}, {r}, 0;"));
        self.line(format!("@{p} bra.uni {l};"));
        self.line("membar.cta;");
        self.body.push_str(&format!("{l}:\n"));
    }

    /// The oldest `n` pending groups are complete: forget them and release
    /// the ring slots they read (warp-specialized) — but those held through
    /// the branch being emitted (`wg_held`), complete on this path only.
    fn wg_done(&mut self, n: usize) {
        let lo = self.wg_held.min(n);
        let done: Vec<_> = self.wg_pending.drain(lo..n).collect();
        for WgGroup { rel, .. } in done {
            for (c, r) in rel {
                self.ws_release(c, &r, None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::ptx::fragments::interleaved_row;

    /// `swizzle_offset`'s arithmetic on numbers.
    fn offset(i: u32, j: u32, rows: u32, es: u32) -> u32 {
        let (atom, chunk) = (128 / es, 16 / es);
        (j >> atom.trailing_zeros()) * rows * 128 + i * 128 + ((((j >> chunk.trailing_zeros()) & 7) ^ (i & 7)) * 16) + (j & (chunk - 1)) * es
    }

    /// `wgmma_addr`'s split: an index `t + c` addresses the root `t + c %
    /// 8` (rows) / `t + c % atom` (columns) plus an immediate, for every
    /// thread offset `t`; and the interleaved K order commutes with adding
    /// multiples of its block (`interleaved_row`'s split).
    #[test]
    fn swizzled_offsets_split_into_a_root_and_an_immediate() {
        for es in [1, 2, 4] {
            let atom = 128 / es;
            let rows = 128;
            for ti in (0..64).step_by(3) {
                for ci in [0, 5, 8, 13, 32, 40, 64] {
                    for tj in (0..2 * atom).step_by(5) {
                        for cj in [0, 1, 8, atom / 2, atom, atom + 3, 2 * atom] {
                            let (ci_lo, cj_lo) = (ci % 8, cj % atom);
                            let imm = (ci - ci_lo) * 128 + (cj - cj_lo) / atom * rows * 128;
                            assert_eq!(offset(ti + ci, tj + cj, rows, es), offset(ti + ci_lo, tj + cj_lo, rows, es) + imm, "es {es} i {ti}+{ci} j {tj}+{cj}");
                        }
                    }
                }
            }
        }
        for run in [4, 8] {
            for t in 0..200 {
                for c in [0, 4 * run, 8 * run, 12 * run] {
                    assert_eq!(interleaved_row(run, t + c), interleaved_row(run, t) + c, "run {run} t {t} c {c}");
                }
            }
        }
    }
}
