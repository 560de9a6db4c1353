//! Workgroup memory: allocation, barriers, word slots, tiles stored
//! and reloaded in another layout (`convert`), with a register remap
//! instead where no data crosses invocations.

use super::*;
use crate::plan::convert::ConvertPlan;

impl<'k> WgslWriter<'k> {
    pub(super) fn bar(&mut self) {
        self.barriers += 1;
        self.line("workgroupBarrier();");
    }

    pub(super) fn smem_need(&mut self, words: u32) {
        self.smem_words = self.smem_words.max(words.max(1));
    }

    /// Store register `v` in the workgroup-memory slot at word `a`.
    pub(super) fn st_slot(&mut self, a: &str, v: &str, w: WTy) {
        if w == WTy::L {
            self.line(format!("ft_smem[{a}] = {v}.x;"));
            self.line(format!("ft_smem[{a} + 1u] = {v}.y;"));
        } else {
            self.line(format!("ft_smem[{a}] = {};", Self::to_u32(v, w)));
        }
    }

    /// Expression reading the slot at word `a`.
    pub(super) fn ld_slot(a: &str, w: WTy) -> String {
        if w == WTy::L {
            format!("vec2<u32>(ft_smem[{a}], ft_smem[{a} + 1u])")
        } else {
            Self::from_u32(&format!("ft_smem[{a}]"), w)
        }
    }

    /// Write registers (canonical layout of `shape`) to the slots from word
    /// `base` on, in row-major order.
    pub(super) fn stage(&mut self, regs: &[String], shape: &[u32], w: WTy, base: u32) -> R<()> {
        for (r, v) in regs.iter().enumerate() {
            let lin = self.lin(shape, r)?;
            let mut a = if w.nw() == 1 { lin } else { format!("{lin} * {}u", w.nw()) };
            if base != 0 {
                a = format!("{a} + {base}u");
            }
            self.st_slot(&a, v, w);
        }
        Ok(())
    }

    /// Layout conversion: element `idx` of the result is the source element
    /// at slot `Σ_d plan.dst_coef[d] · idx[d]` ([`crate::plan::convert`]).
    /// Register renaming when every invocation already holds what it needs
    /// (`register_remap`); otherwise through workgroup memory.
    pub(super) fn convert(&mut self, x: V, res: V, plan: &ConvertPlan) -> R<Vec<String>> {
        let src = self.shape_u32(x);
        self.convert_from(x, &src, res, plan)
    }

    /// [`Self::convert`] from the registers of `x`, of shape `src` — `x`
    /// itself, or the operand of an `expand_dims` whose result the plan
    /// converts (the same row-major order, so the same slots: the plan's
    /// are dense here).
    pub(super) fn convert_from(&mut self, x: V, src: &[u32], res: V, plan: &ConvertPlan) -> R<Vec<String>> {
        let coef = &plan.dst_coef;
        let (src, dst) = (src.to_vec(), self.shape_u32(res));
        let regs = self.get(x);
        if src.is_empty() {
            let n = self.nregs(res)?;
            return Ok(vec![regs[0].clone(); n]);
        }
        let sl = self.layout(&src)?;
        let dl = if dst.is_empty() { None } else { Some(self.layout(&dst)?) };
        let n_dst = dl.as_ref().map(|l| l.regs()).unwrap_or(1);
        let src_lin = |t: u32, r: usize| sl.lin_of(t, r);
        let dst_need = |t: u32, r: usize| match &dl {
            None => 0,
            Some(l) => l.coords_of(t, r).iter().zip(coef).map(|(i, c)| i * c).sum(),
        };
        if let Some(m) = register_remap(self.nt, sl.regs(), &src_lin, n_dst, &dst_need) {
            return Ok(m.iter().map(|&s| regs[s].clone()).collect());
        }
        let w = match self.k.ty(x) {
            Type::Tile { elem, .. } => wty_of_elem(*elem),
            Type::View { .. } => return self.err("layout conversion of a view"),
        };
        self.smem_need(plan.slots * w.nw());
        self.bar();
        self.stage(&regs, &src, w, 0)?;
        self.bar();
        let mut out = vec![];
        for r in 0..n_dst {
            let mut terms = vec![];
            for (d, &c) in coef.iter().enumerate() {
                let c = c * w.nw();
                if c != 0 && dst[d] > 1 {
                    let i = self.index(&dst, r, d)?;
                    terms.push(if c == 1 { i } else { format!("{i} * {c}u") });
                }
            }
            let a = if terms.is_empty() { "0u".to_string() } else { terms.join(" + ") };
            out.push(self.let_(w, Self::ld_slot(&a, w)));
        }
        self.bar();
        Ok(out)
    }
}
