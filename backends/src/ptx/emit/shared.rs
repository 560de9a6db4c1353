//! Shared-memory scratch: allocation (after the operand rings), barriers,
//! tiles stored and reloaded in another layout (`convert`: rows padded by
//! one slot, so that a transpose reads columns without bank conflicts).

use super::*;
use crate::plan::convert::ConvertPlan;

impl<'k> PtxWriter<'k> {
    pub(super) fn smem_need(&mut self, bytes: u32) {
        self.smem = self.smem.max(self.ring + bytes.div_ceil(16) * 16);
    }

    pub(super) fn bar(&mut self) {
        // (a barrier may precede writes to shared memory a pending MMA reads)
        self.wg_wait_all();
        match self.role {
            Role::All => self.line("bar.sync 0;"),
            // (the producer warp is not there: a named barrier of the
            // consumers' threads)
            Role::Consumer => self.line(format!("bar.sync 1, {};", self.o.num_warps * 32)),
            Role::Producer => unreachable!("the producer's stream has no barrier"),
        }
    }

    /// The barrier before writing the scratch (so that no thread still
    /// reads what it held): emitted only where some shared-memory access
    /// may lie between the last CTA barrier and here — in the text emitted
    /// so far, a `ld`/`st`/`atom`/`red` on `.shared`, `ldmatrix`,
    /// `stmatrix`, `wgmma` or an `mbarrier` op after the last `bar.sync`,
    /// or a label (a join point: another path may arrive having touched
    /// it). `cp.async` copies from global memory land in the operand
    /// rings, never in the scratch, and do not count (bulk stores from
    /// shared memory do). A loop whose body refills a ring after
    /// a barrier (the ring's own) then stages a computed operand without
    /// a second one: the W4A16 step's three barriers become two. Pending
    /// `wgmma` groups are waited for either way (they may read it).
    pub(super) fn bar_before_scratch_write(&mut self) {
        self.wg_wait_all();
        if !self.scratch_quiet_since_barrier() {
            self.bar();
        }
    }

    /// No shared-memory access and no label since the last CTA barrier in
    /// the emitted text (or since the kernel's start): see
    /// [`Self::bar_before_scratch_write`].
    fn scratch_quiet_since_barrier(&self) -> bool {
        for line in self.body.lines().rev() {
            let t = line.trim();
            let op = t.strip_prefix('@').map_or(t, |r| r.split_once(' ').map_or(r, |x| x.1)).trim_start();
            // (a predicated barrier is not one every thread passed)
            if (t.starts_with("bar.sync") || t.starts_with("barrier.sync")) && !t.starts_with('@') {
                return true;
            }
            if t.ends_with(':') {
                return false;
            }
            if op.starts_with("cp.async") {
                // (global to shared: a ring slot; shared to global — a
                // bulk store — reads shared memory)
                let name = op.split_whitespace().next().unwrap_or("");
                let (g, sh) = (name.find(".global"), name.find(".shared"));
                if !matches!((g, sh), (Some(g), Some(sh)) if g < sh) {
                    continue;
                }
                return false;
            }
            if op.contains(".shared") || op.contains("ldmatrix") || op.contains("stmatrix") || op.contains("wgmma") || op.contains("mbarrier") {
                return false;
            }
        }
        true
    }

    /// Base of the scratch shared memory (after the operand rings).
    pub(super) fn smem_base(&mut self) -> String {
        let b = self.reg(RegClass::R);
        self.line(format!("mov.u32 {b}, ft_smem;"));
        if self.ring > 0 {
            self.line(format!("add.u32 {b}, {b}, {};", self.ring));
        }
        b
    }

    /// `bytes` of scratch shared memory starting at the first multiple of
    /// `align` bytes at or after the scratch base (`ft_smem` itself is
    /// aligned to 1024 when the kernel uses `wgmma`), reserved with the
    /// padding skipped to get there. `wgmma`'s 128-byte swizzle is a
    /// function of the address bits 4–9, so a staged operand must start on
    /// a 1024-byte boundary: the rings' mbarriers end the ring region on a
    /// 16-byte one.
    pub(super) fn smem_scratch_aligned(&mut self, align: u32, bytes: u32) -> String {
        let pad = self.ring.next_multiple_of(align) - self.ring;
        self.smem_need(pad + bytes);
        let b = self.smem_base();
        if pad > 0 {
            self.line(format!("add.u32 {b}, {b}, {pad};"));
        }
        b
    }

    /// Store registers of a value (canonical layout of `shape`) to shared
    /// memory at `base + lin * es` as 32/64-bit slots.
    pub(super) fn store_tile_smem(&mut self, regs: &[String], shape: &[u32], c: RegClass, base: &str) -> u32 {
        let sz = if c == RegClass::Rd { 8 } else { 4 };
        for (r, v) in regs.iter().enumerate() {
            let lin = if shape.is_empty() { "0".to_string() } else { self.lin(shape, r) };
            let a = self.reg(RegClass::R);
            self.line(format!("mad.lo.u32 {a}, {lin}, {sz}, {base};"));
            self.st_shared(c, &a, v);
        }
        sz
    }

    /// Store one register to shared memory at address `a`: 64-bit values in
    /// 8 bytes, everything else widened to a 32-bit slot (the inverse of
    /// [`Self::from_smem_addr`]).
    pub(super) fn st_shared(&mut self, c: RegClass, a: &str, v: &str) {
        self.st_shared_if(c, a, v, None)
    }

    /// [`Self::st_shared`] in the threads where `pred` holds.
    pub(super) fn st_shared_if(&mut self, c: RegClass, a: &str, v: &str, pred: Option<&str>) {
        let at = pred.map(|p| format!("@{p} ")).unwrap_or_default();
        match c {
            RegClass::F => self.line(format!("{at}st.shared.f32 [{a}], {v};")),
            RegClass::R => self.line(format!("{at}st.shared.b32 [{a}], {v};")),
            RegClass::Rd => self.line(format!("{at}st.shared.b64 [{a}], {v};")),
            RegClass::H => {
                let t = self.reg(RegClass::R);
                self.line(format!("cvt.u32.u16 {t}, {v};"));
                self.line(format!("{at}st.shared.b32 [{a}], {t};"));
            }
            RegClass::P => {
                let t = self.reg(RegClass::R);
                self.line(format!("selp.b32 {t}, 1, 0, {v};"));
                self.line(format!("{at}st.shared.b32 [{a}], {t};"));
            }
        }
    }

    pub(super) fn ld_shared(&mut self, c: RegClass, a: &str) -> String {
        let v = self.reg(c);
        match c {
            RegClass::F => self.line(format!("ld.shared.f32 {v}, [{a}];")),
            RegClass::R => self.line(format!("ld.shared.b32 {v}, [{a}];")),
            RegClass::Rd => self.line(format!("ld.shared.b64 {v}, [{a}];")),
            RegClass::H => {
                let t = self.reg(RegClass::R);
                self.line(format!("ld.shared.b32 {t}, [{a}];"));
                self.line(format!("cvt.u16.u32 {v}, {t};"));
            }
            RegClass::P => {
                let t = self.reg(RegClass::R);
                self.line(format!("ld.shared.b32 {t}, [{a}];"));
                self.line(format!("setp.ne.u32 {v}, {t}, 0;"));
            }
        }
        v
    }

    /// A layout conversion through shared memory, as `plan` lays it out
    /// (a broadcast or a permutation: [`crate::plan::convert`]).
    pub(super) fn convert(&mut self, x: V, src: &[u32], dst: &[u32], plan: &ConvertPlan) -> R<Vec<String>> {
        self.explain(format!(
            "{src:?} to {dst:?} (a broadcast or permutation of a value that is neither index arithmetic to recompute nor a slice of the destination's layout)"
        ));
        self.convert_from(x, src, &plan.src_strides, src, dst, plan)
    }

    /// [`Self::convert`] from the registers of `x` (shape `xs`, in its
    /// default layout) written at slot strides `strides`: `x` itself, or
    /// the operand of an `expand_dims` whose result `src` the plan is for
    /// (the same elements: its strides less the new axis's).
    pub(super) fn convert_from(&mut self, x: V, xs: &[u32], strides: &[u32], src: &[u32], dst: &[u32], plan: &ConvertPlan) -> R<Vec<String>> {
        let c = reg_class(self.elem(x));
        let regs = self.get(x);
        let sz = if c == RegClass::Rd { 8 } else { 4 };
        if xs != src {
            self.explain(format!("{xs:?} expanded to {src:?} and broadcast to {dst:?} (a value that is neither index arithmetic to recompute nor in a slice of the destination's layout)"));
        }
        // the source tile in shared memory as the plan lays it out (rows
        // padded: crate::plan::convert), read back in the destination's
        // layout
        self.smem_need(plan.slots * sz);
        self.bar_before_scratch_write();
        let base = self.smem_base();
        self.store_tile_smem_strided(&regs, xs, c, &base, strides);
        self.bar();
        let lay = self.layout(dst);
        let mut out = vec![];
        for r in 0..lay.bl.regs() {
            let a = self.reg(RegClass::R);
            self.line(format!("mov.u32 {a}, 0;"));
            for (d, &coef) in plan.dst_coef.iter().enumerate() {
                if coef != 0 {
                    let i = self.index(dst, r, d);
                    self.line(format!("mad.lo.u32 {a}, {i}, {}, {a};", coef * sz));
                }
            }
            self.line(format!("add.u32 {a}, {a}, {base};"));
            out.push(self.ld_shared(c, &a));
        }
        self.bar();
        Ok(out)
    }

    /// Conversion that keeps the row-major linear index (reshape, expand_dims).
    pub(super) fn convert_linear(&mut self, x: V, src: &[u32], dst: &[u32], _res: V) -> R<Vec<String>> {
        let c = reg_class(self.elem(x));
        let regs = self.get(x);
        let n: u32 = src.iter().product();
        let sz = if c == RegClass::Rd { 8 } else { 4 };
        // same layout shape → nothing moves
        if self.layout(src).bl.regs() == self.layout(dst).bl.regs() && self.layout(src).reg_offsets.len() == 1 && n == 1 {
            return Ok(regs);
        }
        self.explain(format!("{src:?} reshaped to {dst:?} (reshape or expand_dims of a value not in a slice layout)"));
        self.smem_need(n * sz);
        self.bar();
        let base = self.smem_base();
        self.store_tile_smem(&regs, src, c, &base);
        self.bar();
        let m = self.layout(dst).bl.regs();
        let mut out = vec![];
        for r in 0..m {
            let lin = self.lin(dst, r);
            let a = self.reg(RegClass::R);
            self.line(format!("mad.lo.u32 {a}, {lin}, {sz}, {base};"));
            out.push(self.ld_shared(c, &a));
        }
        self.bar();
        Ok(out)
    }

    /// One 32-bit shared-memory load at `[a + off]`.
    pub(super) fn ld_shared_off(&mut self, c: RegClass, a: &str, off: u32) -> String {
        let v = self.reg(c);
        let ty = if c == RegClass::F { "f32" } else { "b32" };
        self.line(format!("ld.shared.{ty} {v}, [{a}+{off}];"));
        v
    }

    /// Store a tile's registers to shared memory with element strides
    /// `strides` per dimension (a padded layout; [`Self::to_smem`] is the
    /// dense one).
    pub(super) fn store_tile_smem_strided(&mut self, regs: &[String], shape: &[u32], c: RegClass, base: &str, strides: &[u32]) {
        let sz = if c == RegClass::Rd { 8 } else { 4 };
        for (r, v) in regs.iter().enumerate() {
            let a = self.reg(RegClass::R);
            self.line(format!("mov.u32 {a}, {base};"));
            for (d, &st) in strides.iter().enumerate() {
                if shape[d] > 1 {
                    let i = self.index(shape, r, d);
                    self.line(format!("mad.lo.u32 {a}, {i}, {}, {a};", st * sz));
                }
            }
            self.st_shared(c, &a, v);
        }
    }
}
