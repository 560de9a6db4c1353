//! `dot` as a register-tiled FMA loop over operands staged in workgroup
//! memory.

use super::*;

impl<'k> WgslWriter<'k> {
    /// `acc + a @ b` with operands staged in workgroup memory as f32 (i32
    /// for i8), one FMA chain per output element in k order.
    pub(super) fn dot(&mut self, a: V, b: V, acc: V, precision: DotPrecision, res: V) -> R<Vec<String>> {
        let (sa, sb) = (self.shape_u32(a), self.shape_u32(b));
        let (m, kk, n) = (sa[0], sa[1], sb[1]);
        let d = self.dtype(a);
        let int = wty_of(d) != WTy::F;
        let ac = if int { WTy::I } else { WTy::F };
        let conv = |em: &mut Self, regs: Vec<String>| -> Vec<String> {
            regs.iter()
                .map(|v| {
                    if int {
                        if wty_of(d) == WTy::U {
                            format!("bitcast<i32>({v})")
                        } else {
                            v.clone()
                        }
                    } else if precision == DotPrecision::Tf32 {
                        format!("{}({v})", em.helper("ft_tf32"))
                    } else if precision == DotPrecision::Tf32Trunc {
                        format!("{}({v})", em.helper("ft_tf32_trunc"))
                    } else {
                        v.clone()
                    }
                })
                .collect()
        };
        let ra = self.get(a);
        let rb = self.get(b);
        let va = conv(self, ra);
        let vb = conv(self, rb);
        self.smem_need(m * kk + kk * n);
        self.bar();
        self.stage(&va, &sa, ac, 0)?;
        self.stage(&vb, &sb, ac, m * kk)?;
        self.bar();
        let out_shape = self.shape_u32(res);
        let racc = self.get(acc);
        let accs: Vec<String> = racc.iter().map(|v| self.var_(ac, Some(v))).collect();
        // Register tiling: a thread's outputs span few distinct rows and
        // columns (its layout's repetitions); each k reads every distinct A
        // row value and B column value once and reuses it for all outputs
        // that share it, instead of two workgroup-memory reads per FMA.
        let (rows, cols, at) = self.layout(&out_shape)?.bl.outer_product();
        let first_reg = |which: usize, idx: usize| at.iter().position(|p| if which == 0 { p.0 == idx } else { p.1 == idx }).unwrap();
        let mut pa = vec![];
        for ri in 0..rows.len() {
            let i = self.index(&out_shape, first_reg(0, ri), 0)?;
            pa.push(format!("{i} * {kk}u"));
        }
        let mut pb = vec![];
        for ci in 0..cols.len() {
            let j = self.index(&out_shape, first_reg(1, ci), 1)?;
            pb.push(format!("{j} + {}u", m * kk));
        }
        let kc = self.fresh();
        self.line(format!("for (var {kc}: u32 = 0u; {kc} < {kk}u; {kc} = {kc} + 1u) {{"));
        self.ind += 1;
        let read = |em: &mut Self, addrs: Vec<String>| -> Vec<String> {
            addrs
                .iter()
                .map(|a| {
                    let x = em.fresh();
                    em.line(format!("let {x} = {};", Self::from_u32(&format!("ft_smem[{a}]"), ac)));
                    x
                })
                .collect()
        };
        let xs = read(self, pa.iter().map(|p| format!("{p} + {kc}")).collect());
        let ys = read(self, pb.iter().map(|p| format!("{p} + {kc} * {n}u")).collect());
        for (r, &(ri, ci)) in at.iter().enumerate() {
            let (x, y) = (&xs[ri], &ys[ci]);
            if int {
                self.line(format!("{} = {} + {x} * {y};", accs[r], accs[r]));
            } else {
                self.line(format!("{} = fma({x}, {y}, {});", accs[r], accs[r]));
            }
        }
        self.ind -= 1;
        self.line("}");
        self.bar();
        Ok(accs)
    }
}
