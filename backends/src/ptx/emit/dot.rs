//! `dot`: the dispatch to `wgmma` (`wgmma.rs`), `mma.sync` m16n8k16 (f16/bf16,
//! `ldmatrix` from the rings or from operands staged with padded rows),
//! m16n8k8 (tf32) and m16n8k32 (i8 → s32: both operands staged as bytes,
//! B transposed so that its K runs are contiguous), or the FMA path (exact
//! f32; i8 with `FERROTILE_MMA_I8=0`): a register-blocked outer product
//! over shared-memory copies of the operands.

use super::*;

impl<'k> PtxWriter<'k> {
    /// Two 16-bit registers packed into a new 32-bit one, `lo` in the low
    /// half (the order of a tile's consecutive elements in memory and in
    /// a tensor-core fragment).
    pub(super) fn pack_b16(&mut self, lo: &str, hi: &str) -> String {
        // (the two halves of one loaded word, in order: that word)
        if let (Some((w, false)), Some((w2, true))) = (self.h_from_word.get(lo), self.h_from_word.get(hi)) {
            if w == w2 {
                return w.clone();
            }
        }
        let key = (lo.to_string(), hi.to_string());
        if let Some(w) = self.packed.iter().rev().find_map(|m| m.get(&key)) {
            return w.clone();
        }
        let w = self.reg(RegClass::R);
        self.line(format!("mov.b32 {w}, {{{lo}, {hi}}};"));
        if let Some(m) = self.packed.last_mut() {
            m.insert(key, w.clone());
        }
        w
    }

    /// A 32-bit register's two 16-bit halves as new registers (low first),
    /// remembered as that word's halves (`h_from_word`): packing them again
    /// in order gives the word back, and widening a bf16 half to f32 reads
    /// the word.
    pub(super) fn unpack_b16(&mut self, w: &str) -> (String, String) {
        let (lo, hi) = (self.reg(RegClass::H), self.reg(RegClass::H));
        self.line(format!("mov.b32 {{{lo}, {hi}}}, {w};"));
        self.h_from_word.insert(lo.clone(), (w.to_string(), false));
        self.h_from_word.insert(hi.clone(), (w.to_string(), true));
        if let Some(m) = self.packed.last_mut() {
            m.insert((lo.clone(), hi.clone()), w.to_string());
        }
        (lo, hi)
    }

    /// Four i8 values (one per 32-bit register, in their low bytes) as one
    /// 32-bit word, the first in the lowest byte.
    pub(super) fn pack_b8(&mut self, b: &[String]) -> String {
        let (lo, hi, w) = (self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R));
        self.line(format!("prmt.b32 {lo}, {}, {}, 0x0040;", b[0], b[1]));
        self.line(format!("prmt.b32 {hi}, {}, {}, 0x0040;", b[2], b[3]));
        self.line(format!("prmt.b32 {w}, {lo}, {hi}, 0x5410;"));
        w
    }

    /// Store a 2-D tile (registers in the layout of `shape`) to shared
    /// memory row-major with a row pitch of `ld` bytes, in its own 16- or
    /// 32-bit format, each thread's runs of consecutive columns packed into
    /// one vector store.
    pub(super) fn stage(&mut self, regs: &[String], shape: &[u32], es: u32, ld: u32, base: &str) {
        let lay = self.layout(shape);
        let run = lay.bl.last_run() as usize;
        for r0 in (0..regs.len()).step_by(run) {
            let (i, j) = (self.index(shape, r0, 0), self.index(shape, r0, 1));
            let a = self.reg(RegClass::R);
            self.line(format!("mad.lo.u32 {a}, {i}, {ld}, {base};"));
            self.line(format!("mad.lo.u32 {a}, {j}, {es}, {a};"));
            let vals = &regs[r0..r0 + run];
            if es == 2 && run == 1 {
                self.line(format!("st.shared.b16 [{a}], {};", vals[0]));
                continue;
            }
            let words: Vec<String> = if es == 2 {
                vals.chunks(2).map(|p| self.pack_b16(&p[0], &p[1])).collect()
            } else {
                vals.iter()
                    .map(|v| {
                        let w = self.reg(RegClass::R);
                        self.line(format!("mov.b32 {w}, {v};"));
                        w
                    })
                    .collect()
            };
            for (ci, c) in words.chunks(4).enumerate() {
                let off = ci * 16;
                match c.len() {
                    1 => self.line(format!("st.shared.b32 [{a}+{off}], {};", c[0])),
                    2 => self.line(format!("st.shared.v2.b32 [{a}+{off}], {{{}, {}}};", c[0], c[1])),
                    3 => {
                        self.line(format!("st.shared.v2.b32 [{a}+{off}], {{{}, {}}};", c[0], c[1]));
                        self.line(format!("st.shared.b32 [{a}+{}], {};", off + 8, c[2]));
                    }
                    _ => self.line(format!("st.shared.v4.b32 [{a}+{off}], {{{}, {}, {}, {}}};", c[0], c[1], c[2], c[3])),
                }
            }
        }
    }

    /// Store a 2-D i8 tile (one byte per 32-bit register, in the layout of
    /// `shape`) to shared memory, `ld` bytes per row: row-major, or with
    /// `transposed` each column as a row (element `(r, c)` at `c·ld + r`:
    /// a B operand K-contiguous per column, the order the m16n8k32 `mma`
    /// reads B in — `ldmatrix` cannot transpose bytes).
    pub(super) fn stage_bytes(&mut self, regs: &[String], shape: &[u32], ld: u32, base: &str, transposed: bool) {
        for (r, v) in regs.iter().enumerate() {
            let (i, j) = (self.index(shape, r, 0), self.index(shape, r, 1));
            let (row, col) = if transposed { (j, i) } else { (i, j) };
            let a = self.reg(RegClass::R);
            self.line(format!("mad.lo.u32 {a}, {row}, {ld}, {base};"));
            self.line(format!("add.u32 {a}, {a}, {col};"));
            self.line(format!("st.shared.b8 [{a}], {v};"));
        }
    }

    /// `dot` on tensor cores (`mma.sync`): the operands are staged in
    /// shared memory in their own dtype, rows padded by 16 bytes (32 for
    /// tf32 B) so that the 8 rows one fragment load touches fall in distinct
    /// banks; fragments are read with `ldmatrix` (f16/bf16; `.trans` for B
    /// but a B read from the slot of its transpose, `AsyncPlan::flipped`)
    /// or `ld.shared` (tf32), and multiplied into the accumulator registers,
    /// which the mma layout of the result shape (see `assign`) already holds
    /// as `m16n8` fragments: the accumulator never moves.
    pub(super) fn dot_mma(&mut self, a: V, b: V, acc: V, precision: DotPrecision, g: crate::ptx::assign::MmaGrid) -> R<Vec<String>> {
        let (sa, sb) = (self.shape_u32(a), self.shape_u32(b));
        let (m, kk, n) = (sa[0], sa[1], sb[1]);
        let d = self.dtype(a);
        let tf32 = d == DType::F32;
        // i8 (m16n8k32, s32 accumulators): A staged as bytes, B staged
        // transposed — K contiguous per column — because `ldmatrix` can
        // transpose only 16-bit elements; no rings (`async_copy`)
        let int = d == DType::I8;
        if tf32 && !precision.is_tf32() {
            return self.err("mma path for an exact f32 dot");
        }
        // both operands in registers, K interleaved (`assign`'s
        // register-operand dots): the fragments are their own registers
        if !tf32 && !int && self.layout_plan.register_operands(&[m, n]) {
            let have_a = self.vlay.get(&a).cloned().unwrap_or_else(|| self.layout(&sa).bl.clone());
            let have_b = self.vlay.get(&b).cloned().unwrap_or_else(|| self.layout(&sb).bl.clone());
            let (raw_a, raw_b) = (self.get_raw(a), self.get_raw(b));
            let run = crate::ptx::fragments::operand_run(kk).unwrap_or(8);
            let ma = crate::ptx::fragments::mma_a_interleaved(&have_a, m, kk, g.wm, g.wn, run).filter(|_| raw_a.len() == have_a.regs());
            let mb = crate::ptx::fragments::mma_b_interleaved(&have_b, kk, n, g.wm, g.wn, run).filter(|_| raw_b.len() == have_b.regs());
            if let (Some(ma), Some(mb)) = (ma, mb) {
                return Ok(self.dot_mma_registers(&raw_a, &ma, &raw_b, &mb, acc, d, [m, kk, n], g));
            }
            self.explain(format!("dot {sa:?} · {sb:?}: the operands' registers do not hold the K-interleaved fragments; staged through shared memory"));
        }
        let es = if tf32 {
            4
        } else if int {
            1
        } else {
            2
        };
        // (an operand ring's padded rows are these: `async_copy`; i8's B
        // rows are its columns)
        let (ca, cb) = (self.ring_plan.class_of(a), self.ring_plan.class_of(b));
        // B read from the ring slot of its transpose (`AsyncPlan::flipped`:
        // rows along N, K contiguous): `ldmatrix` without `.trans`
        let flip_b = !tf32 && !int && self.ring_plan.flipped.contains_key(&b);
        let (lda, ldb) = (kk * es + 16, if int || flip_b { kk * es + 16 } else { n * es + if tf32 { 32 } else { 16 } });
        // A computed in registers that already hold the m16n8k16 A
        // fragments (an accumulator of the same warp rows, cast to 16 bits)
        // feeds the MMAs from its registers (`ptx::fragments`)
        let reg_a: Option<Vec<String>> = if ca.is_none() && !tf32 && !int && self.o.register_a {
            let have = self.vlay.get(&a).cloned().unwrap_or_else(|| self.layout(&sa).bl.clone());
            let raw = self.get_raw(a);
            crate::ptx::fragments::mma_a(&have, m, kk, g.wm, g.wn)
                .filter(|_| raw.len() == have.regs())
                .map(|map| map.chunks(2).map(|p| self.pack_b16(&raw[p[0]], &raw[p[1]])).collect())
        } else {
            None
        };
        let stage_a = ca.is_none() && reg_a.is_none();
        // (why A is not fed from registers, for FERROTILE_EXPLAIN)
        let a_why = if !self.o.register_a {
            ": register A is off"
        } else if tf32 || int {
            ": tf32 and i8 operands are read from shared memory"
        } else {
            ": its registers do not hold the m16n8k16 A fragments in the threads that read them (register A needs the warps along M, as an accumulator of chained dots has them)"
        };
        let mut ra = if reg_a.is_some() { vec![String::new()] } else { self.get(a) };
        let mut rb = self.get(b);
        if tf32 {
            ra = ra.iter().map(|f| self.tf32_reduce(f, precision)).collect();
            rb = rb.iter().map(|f| self.tf32_reduce(f, precision)).collect();
        }
        // operands in registers are staged in the scratch space; a ring
        // operand's register is its slot's address
        let (mut base, mut base_b) = (ra[0].clone(), rb[0].clone());
        if stage_a || cb.is_none() {
            for (x, name, s) in [(stage_a, "A", &sa), (cb.is_none(), "B", &sb)] {
                if x {
                    self.explain(format!(
                        "dot operand {name} {s:?} staged from registers into shared memory for `mma.sync` (computed, or loaded without a copy ring){}",
                        if name == "A" { a_why } else { "" }
                    ));
                }
            }
            // (16-byte aligned: `ldmatrix` rows)
            let bytes_a = if stage_a { (m * lda).next_multiple_of(16) } else { 0 };
            let bytes_b = if int { n * ldb } else { kk * ldb };
            self.smem_need(bytes_a + if cb.is_none() { bytes_b } else { 0 });
            self.bar_before_scratch_write();
            let scratch = self.smem_base();
            if stage_a {
                if int {
                    self.stage_bytes(&ra, &sa, lda, &scratch, false);
                } else {
                    self.stage(&ra, &sa, es, lda, &scratch);
                }
                base = scratch.clone();
            }
            if cb.is_none() {
                base_b = self.reg(RegClass::R);
                self.line(format!("add.u32 {base_b}, {scratch}, {bytes_a};"));
                if int {
                    self.stage_bytes(&rb, &sb, ldb, &base_b, true);
                } else {
                    self.stage(&rb, &sb, es, ldb, &base_b);
                }
            }
        }
        let ready = self.ring_ready.contains(&a) && self.ring_ready.contains(&b);
        if ready {
            // waited for (and barriered) at the top of the loop body
            self.cp_commit();
        } else {
            if ca.is_some() || cb.is_some() {
                // as in `dot_wgmma`: the newest groups younger than the
                // operands' prefetch distance may stay in flight
                let dist = |v: V| self.ring_plan.carried.get(&v).map_or(0, |c| c.1);
                let keep = [(a, ca), (b, cb)].iter().filter(|(_, c)| c.is_some()).map(|(v, _)| dist(*v)).min().unwrap_or(0);
                self.cp_commit();
                self.line(format!("cp.async.wait_group {keep};"));
            }
            self.bar();
        }
        if ca.is_some() || cb.is_some() {
            // the slots this dot reads must not be refilled before every
            // warp has read them
            self.ring_dirty = true;
        }
        // per-lane fragment offsets (prologue)
        let (lane, warp) = (self.lane.clone(), self.warp.clone());
        let (wm, wn) = (g.wm, g.wn);
        let (wmr, wnr, oa, ob, t) = (self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R), self.reg(RegClass::R));
        let mut p = String::new();
        let _ = writeln!(p, "\tshr.u32 {wmr}, {warp}, {};\n\tand.b32 {wnr}, {warp}, {};", wn.trailing_zeros(), wn - 1);
        if tf32 {
            // a: row lane/4 + 8·warp_m, column lane%4; b: k lane%4, n lane/4 + 8·warp_n
            let _ = writeln!(p, "\tshr.u32 {oa}, {lane}, 2;\n\tmad.lo.u32 {oa}, {wmr}, 8, {oa};\n\tmul.lo.u32 {oa}, {oa}, {lda};");
            let _ = writeln!(p, "\tand.b32 {t}, {lane}, 3;\n\tmad.lo.u32 {oa}, {t}, 4, {oa};");
            let _ =
                writeln!(p, "\tmul.lo.u32 {ob}, {t}, {ldb};\n\tshr.u32 {t}, {lane}, 2;\n\tmad.lo.u32 {t}, {wnr}, 8, {t};\n\tmad.lo.u32 {ob}, {t}, 4, {ob};");
        } else if int {
            // a: as for 16-bit operands, in bytes (matrices (rows 0-7 |
            // 8-15) × (k 0-15 | 16-31)); b from its transposed staging:
            // matrices (k 0-15 | 16-31) × (n tile j | j+1), rows along n
            let _ = writeln!(
                p,
                "\tand.b32 {oa}, {lane}, 7;\n\tmad.lo.u32 {oa}, {wmr}, 8, {oa};\n\tbfe.u32 {t}, {lane}, 3, 1;\n\tmad.lo.u32 {oa}, {t}, {}, {oa};",
                8 * wm
            );
            let _ = writeln!(p, "\tmul.lo.u32 {oa}, {oa}, {lda};\n\tshr.u32 {t}, {lane}, 4;\n\tmad.lo.u32 {oa}, {t}, 16, {oa};");
            let _ = writeln!(
                p,
                "\tand.b32 {ob}, {lane}, 7;\n\tmad.lo.u32 {ob}, {wnr}, 8, {ob};\n\tshr.u32 {t}, {lane}, 4;\n\tmad.lo.u32 {ob}, {t}, {}, {ob};\n\tmul.lo.u32 {ob}, {ob}, {ldb};",
                8 * wn
            );
            let _ = writeln!(p, "\tbfe.u32 {t}, {lane}, 3, 1;\n\tmad.lo.u32 {ob}, {t}, 16, {ob};");
        } else {
            // ldmatrix row addresses: lane l feeds row l%8 of matrix l/8
            // a: matrices (rows 0-7 | 8-15) × (k 0-7 | 8-15)
            let _ = writeln!(
                p,
                "\tand.b32 {oa}, {lane}, 7;\n\tmad.lo.u32 {oa}, {wmr}, 8, {oa};\n\tbfe.u32 {t}, {lane}, 3, 1;\n\tmad.lo.u32 {oa}, {t}, {}, {oa};",
                8 * wm
            );
            let _ = writeln!(p, "\tmul.lo.u32 {oa}, {oa}, {lda};\n\tshr.u32 {t}, {lane}, 4;\n\tmad.lo.u32 {oa}, {t}, 16, {oa};");
            if flip_b {
                // b from `[N, K]` rows: matrices (n tile j: k 0-7 | 8-15)
                // then (n tile j+1: k 0-7 | 8-15)
                let _ = writeln!(
                    p,
                    "\tshr.u32 {ob}, {lane}, 4;\n\tmul.lo.u32 {ob}, {ob}, {};\n\tmad.lo.u32 {ob}, {wnr}, 8, {ob};\n\tand.b32 {t}, {lane}, 7;\n\tadd.u32 {ob}, {ob}, {t};",
                    8 * wn
                );
                let _ = writeln!(p, "\tmul.lo.u32 {ob}, {ob}, {ldb};\n\tbfe.u32 {t}, {lane}, 3, 1;\n\tmad.lo.u32 {ob}, {t}, 16, {ob};");
            } else {
                // b (.trans): matrices (k 0-7 | 8-15) × (n tile j | j+1)
                let _ =
                    writeln!(p, "\tand.b32 {ob}, {lane}, 7;\n\tbfe.u32 {t}, {lane}, 3, 1;\n\tmad.lo.u32 {ob}, {t}, 8, {ob};\n\tmul.lo.u32 {ob}, {ob}, {ldb};");
                let _ = writeln!(
                    p,
                    "\tshr.u32 {t}, {lane}, 4;\n\tmul.lo.u32 {t}, {t}, {};\n\tmad.lo.u32 {t}, {wnr}, 8, {t};\n\tmad.lo.u32 {ob}, {t}, 2, {ob};",
                    8 * wn
                );
            }
        }
        self.pro.push_str(&p);
        let (pa, pb) = (self.reg(RegClass::R), self.reg(RegClass::R));
        if reg_a.is_none() {
            self.line(format!("add.u32 {pa}, {base}, {oa};"));
        }
        self.line(format!("add.u32 {pb}, {base_b}, {ob};"));
        let racc = self.get(acc);
        let acls = if int { RegClass::R } else { RegClass::F };
        let accs: Vec<String> = racc
            .iter()
            .map(|v| {
                let t = self.reg(acls);
                self.mov(acls, &t, v);
                t
            })
            .collect();
        let (tm, rn) = (m / (16 * wm), n / (8 * wn));
        let kstep = if tf32 {
            8
        } else if int {
            32
        } else {
            16
        };
        let ty = match d {
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::I8 => "s8",
            _ => "tf32",
        };
        for ks in 0..kk / kstep {
            let mut af = vec![];
            for i in 0..tm {
                if let Some(f) = &reg_a {
                    let at = ((i * (kk / kstep) + ks) * 4) as usize;
                    af.push(f[at..at + 4].to_vec());
                    continue;
                }
                let r: Vec<String> = (0..4).map(|_| self.reg(RegClass::R)).collect();
                let off = i * 16 * wm * lda + ks * kstep * es;
                if tf32 {
                    let h = 8 * wm * lda;
                    for (q, o) in [0, h, 16, h + 16].iter().enumerate() {
                        self.line(format!("ld.shared.b32 {}, [{pa}+{}];", r[q], off + o));
                    }
                } else {
                    self.line(format!("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{}, {}, {}, {}}}, [{pa}+{off}];", r[0], r[1], r[2], r[3]));
                }
                af.push(r);
            }
            let mut bf: Vec<Vec<String>> = vec![];
            let mut j = 0;
            while j < rn {
                let off = if int {
                    j * 8 * wn * ldb + ks * kstep
                } else if flip_b {
                    j * 8 * wn * ldb + ks * kstep * es
                } else {
                    ks * kstep * ldb + j * 8 * wn * es
                };
                let tr = if int || flip_b { "" } else { ".trans" };
                if tf32 {
                    let r: Vec<String> = (0..2).map(|_| self.reg(RegClass::R)).collect();
                    self.line(format!("ld.shared.b32 {}, [{pb}+{off}];", r[0]));
                    self.line(format!("ld.shared.b32 {}, [{pb}+{}];", r[1], off + 4 * ldb));
                    bf.push(r);
                    j += 1;
                } else if j + 1 < rn {
                    let r: Vec<String> = (0..4).map(|_| self.reg(RegClass::R)).collect();
                    self.line(format!("ldmatrix.sync.aligned.m8n8.x4{tr}.shared.b16 {{{}, {}, {}, {}}}, [{pb}+{off}];", r[0], r[1], r[2], r[3]));
                    bf.push(r[..2].to_vec());
                    bf.push(r[2..].to_vec());
                    j += 2;
                } else {
                    let r: Vec<String> = (0..2).map(|_| self.reg(RegClass::R)).collect();
                    self.line(format!("ldmatrix.sync.aligned.m8n8.x2{tr}.shared.b16 {{{}, {}}}, [{pb}+{off}];", r[0], r[1]));
                    bf.push(r);
                    j += 1;
                }
            }
            let shape = if tf32 {
                "m16n8k8"
            } else if int {
                "m16n8k32"
            } else {
                "m16n8k16"
            };
            self.mma_tiles(&format!("{shape}.row.col.{at}.{ty}.{ty}.{at}", at = if int { "s32" } else { "f32" }), &af, &bf, &accs);
        }
        // No trailing barrier: every shared-memory writer in this emitter
        // (conversions, reductions, scans, both dots) starts with one, which
        // is what orders these fragment reads before the next writes.
        Ok(accs)
    }

    /// `dot` on `mma.sync.m16n8k16` with both operands in registers, K
    /// interleaved (`ptx::fragments::interleaved_k`): `ma` / `mb` name,
    /// per fragment slot, the register of `ra` / `rb` that holds it
    /// ([`crate::ptx::fragments::mma_a_interleaved`],
    /// [`crate::ptx::fragments::mma_b_interleaved`]); slot pairs are packed
    /// into the instructions' 32-bit operands per K step. No shared memory,
    /// no barrier: each warp reads only its own registers.
    #[allow(clippy::too_many_arguments)]
    fn dot_mma_registers(
        &mut self,
        ra: &[String],
        ma: &[usize],
        rb: &[String],
        mb: &[usize],
        acc: V,
        d: DType,
        mkn: [u32; 3],
        g: crate::ptx::assign::MmaGrid,
    ) -> Vec<String> {
        let [m, kk, n] = mkn;
        let racc = self.get(acc);
        let accs: Vec<String> = racc
            .iter()
            .map(|v| {
                let t = self.reg(RegClass::F);
                self.mov(RegClass::F, &t, v);
                t
            })
            .collect();
        let (tm, rn, ksteps) = ((m / (16 * g.wm)) as usize, (n / (8 * g.wn)) as usize, (kk / 16) as usize);
        let ty = if d == DType::BF16 { "bf16" } else { "f16" };
        for ks in 0..ksteps {
            let af: Vec<Vec<String>> = (0..tm)
                .map(|t| {
                    let at = (t * ksteps + ks) * 8;
                    (0..4).map(|q| self.pack_b16(&ra[ma[at + 2 * q]], &ra[ma[at + 2 * q + 1]])).collect()
                })
                .collect();
            let bf: Vec<Vec<String>> = (0..rn)
                .map(|j| {
                    let at = (j * ksteps + ks) * 4;
                    (0..2).map(|q| self.pack_b16(&rb[mb[at + 2 * q]], &rb[mb[at + 2 * q + 1]])).collect()
                })
                .collect();
            self.mma_tiles(&format!("m16n8k16.row.col.f32.{ty}.{ty}.f32"), &af, &bf, &accs);
        }
        accs
    }

    /// One `mma.sync.aligned.{kind}` per (M tile `i`, N tile `j`) of a K
    /// step: A fragments `af[i]` (4 registers), B fragments `bf[j]` (2),
    /// accumulating in place into the `m16n8` accumulator registers `accs`
    /// (ordered `(2i + h, j, e)`, [`crate::plan::layout::Blocked::mma_acc`]).
    fn mma_tiles(&mut self, kind: &str, af: &[Vec<String>], bf: &[Vec<String>], accs: &[String]) {
        let rn = bf.len();
        for (i, a4) in af.iter().enumerate() {
            for (j, b2) in bf.iter().enumerate() {
                let reg = |rep0: usize, e: usize| accs[rep0 * 2 * rn + 2 * j + e].clone();
                let c = [reg(2 * i, 0), reg(2 * i, 1), reg(2 * i + 1, 0), reg(2 * i + 1, 1)];
                self.line(format!(
                    "mma.sync.aligned.{kind} {{{c0}, {c1}, {c2}, {c3}}}, {{{}, {}, {}, {}}}, {{{}, {}}}, {{{c0}, {c1}, {c2}, {c3}}};",
                    a4[0],
                    a4[1],
                    a4[2],
                    a4[3],
                    b2[0],
                    b2[1],
                    c0 = c[0],
                    c1 = c[1],
                    c2 = c[2],
                    c3 = c[3]
                ));
            }
        }
    }

    pub(super) fn dot(&mut self, a: V, b: V, acc: V, precision: DotPrecision, res: V) -> R<Vec<String>> {
        let out_shape = self.shape_u32(res);
        if let Some(g) = self.layout_plan.mma(&out_shape) {
            if g.wgmma {
                return self.dot_wgmma(a, b, acc, g, precision, res);
            }
            return self.dot_mma(a, b, acc, precision, g);
        }
        let (sa, sb) = (self.shape_u32(a), self.shape_u32(b));
        let (m, kk, n) = (sa[0], sa[1], sb[1]);
        let d = self.dtype(a);
        let int = d == DType::I8;
        let ac = if int { RegClass::R } else { RegClass::F };
        let conv = |em: &mut Self, regs: Vec<String>| -> Vec<String> {
            regs.iter()
                .map(|v| {
                    if int {
                        return v.clone();
                    }
                    let f = em.widen_f32(v, d);
                    if precision.is_tf32() {
                        em.tf32_reduce(&f, precision)
                    } else {
                        f
                    }
                })
                .collect()
        };
        let ra = self.get(a);
        let rb = self.get(b);
        let va = conv(self, ra);
        let vb = conv(self, rb);
        // A's rows padded by one slot: the threads of a warp read one k of
        // several rows at once, which would otherwise share a bank when K
        // is a multiple of 32
        let pitch_a = kk + 1;
        let bytes_a = m * pitch_a * 4;
        self.smem_need(bytes_a + kk * n * 4);
        self.bar_before_scratch_write();
        let base = self.smem_base();
        self.store_tile_smem_strided(&va, &sa, ac, &base, &[pitch_a, 1]);
        let base_b = self.reg(RegClass::R);
        self.line(format!("add.u32 {base_b}, {base}, {bytes_a};"));
        self.store_tile_smem(&vb, &sb, ac, &base_b);
        self.bar();
        let out_shape = self.shape_u32(res);
        let racc = self.get(acc);
        let accs: Vec<String> = racc
            .iter()
            .map(|v| {
                let t = self.reg(ac);
                self.mov(ac, &t, v);
                t
            })
            .collect();
        // A register-blocked outer product: a thread's outputs cover a few
        // distinct rows and columns (the layout's per-register offsets), so
        // each k loads one element of A per distinct row and one of B per
        // distinct column, and every output is one FMA of those — instead
        // of two loads per output.
        let (rows, cols, at) = self.layout(&out_shape).bl.outer_product();
        // a pointer per distinct row of A and column of B, from a register
        // of that row / column
        let mut pa = vec![String::new(); rows.len()];
        let mut pb = vec![String::new(); cols.len()];
        for (r, &(u, v)) in at.iter().enumerate() {
            if pa[u].is_empty() {
                let i = self.index(&out_shape, r, 0);
                let x = self.reg(RegClass::R);
                self.line(format!("mad.lo.u32 {x}, {i}, {}, {base};", pitch_a * 4));
                pa[u] = x;
            }
            if pb[v].is_empty() {
                let j = self.index(&out_shape, r, 1);
                let y = self.reg(RegClass::R);
                self.line(format!("mad.lo.u32 {y}, {j}, 4, {base_b};"));
                pb[v] = y;
            }
        }
        // k unrolled by `un` (a power of two dividing K), immediate offsets
        let un = kk.min(8);
        let kc = self.reg(RegClass::R);
        self.line(format!("mov.u32 {kc}, 0;"));
        let (head, end) = (self.label(), self.label());
        self.body.push_str(&format!("{head}:\n"));
        let p = self.reg(RegClass::P);
        self.line(format!("setp.ge.u32 {p}, {kc}, {kk};"));
        self.line(format!("@{p} bra.uni {end};"));
        for q in 0..un {
            let xs: Vec<String> = pa.iter().map(|pp| self.ld_shared_off(ac, pp, q * 4)).collect();
            let ys: Vec<String> = pb.iter().map(|pp| self.ld_shared_off(ac, pp, q * n * 4)).collect();
            for (r, &(u, v)) in at.iter().enumerate() {
                if int {
                    self.line(format!("mad.lo.s32 {}, {}, {}, {};", accs[r], xs[u], ys[v], accs[r]));
                } else {
                    self.line(format!("fma.rn.f32 {}, {}, {}, {};", accs[r], xs[u], ys[v], accs[r]));
                }
            }
        }
        for pp in &pa {
            self.line(format!("add.u32 {pp}, {pp}, {};", un * 4));
        }
        for pp in &pb {
            self.line(format!("add.u32 {pp}, {pp}, {};", un * n * 4));
        }
        self.line(format!("add.u32 {kc}, {kc}, {un};"));
        self.line(format!("bra.uni {head};"));
        self.body.push_str(&format!("{end}:\n"));
        self.bar();
        Ok(accs)
    }
}
