//! Reductions, scans and `dot`: axes, result shapes and dtypes (i8 sums to
//! i32), `dot`'s operand shapes, dtypes and precisions.

use super::*;

impl Builder {
    pub(super) fn axis_of(&self, t: &Type, axis: i64, what: &str) -> R<usize> {
        let r = t.rank() as i64;
        let a = if axis < 0 { axis + r } else { axis };
        if r == 0 {
            return Err(TypeError::new(format!("{what} needs a tile, found the scalar {}", fmt_ty(t))).at(0));
        }
        if a < 0 || a >= r {
            return Err(TypeError::new(format!("axis {axis} is out of range for {what} of the rank-{r} tile {}", fmt_ty(t)))
                .hint(format!("valid axes are 0..{r}"))
                .at(1));
        }
        Ok(a as usize)
    }

    /// `op(x, axis)` (a negative axis counts from the end). Rejects the sum of a bool tile, and
    /// `max`, `min`, `argmax` and `argmin` of a masked `load` without `other`, whose masked-off
    /// zeros they would count.
    pub fn reduce(&mut self, op: ReduceOp, x: V, axis: i64) -> R<V> {
        let t = self.tile_ty(x, 0)?;
        let name = format!("{op:?}").to_lowercase();
        let a = self.axis_of(&t, axis, &name)?;
        let d = t.dtype().ok_or_else(|| TypeError::new(format!("cannot reduce pointers with {name}")).at(0))?;
        if op != ReduceOp::Sum && self.facts.zero_filled.contains(&x) {
            let identity = match (op, d.is_float()) {
                (ReduceOp::Max | ReduceOp::Argmax, true) => "f32::NEG_INFINITY",
                (ReduceOp::Min | ReduceOp::Argmin, true) => "f32::INFINITY",
                (ReduceOp::Max | ReduceOp::Argmax, false) => "the dtype's MIN",
                _ => "the dtype's MAX",
            };
            return Err(TypeError::new(format!(
                "`{name}` over a masked `load` without `other`: masked-off lanes read 0, and `{name}` would count those zeros"
            ))
            .hint(format!("give the load the identity of `{name}`: `load(ptrs, mask, {identity})` (or pass `other = 0` explicitly if zeros are meant)"))
            .at(0));
        }
        if d == DType::Bool && op == ReduceOp::Sum {
            return Err(TypeError::new("sum of a bool tile").hint("cast first: `mask as i32`").at(0));
        }
        let mut shape = t.shape().to_vec();
        shape.remove(a);
        let rd = match op {
            ReduceOp::Argmax | ReduceOp::Argmin => DType::I32,
            ReduceOp::Sum if matches!(d, DType::I8 | DType::U8) => DType::I32,
            _ => d,
        };
        Ok(self.emit1(OpKind::Reduce { op, x, axis: a as u8 }, Type::tile(Elem::Val(rd), shape)))
    }

    /// `cumsum(x, axis)` (a negative axis counts from the end); i8/u8 accumulate to i32, bool is
    /// rejected.
    pub fn scan(&mut self, op: ScanOp, x: V, axis: i64) -> R<V> {
        let t = self.tile_ty(x, 0)?;
        let a = self.axis_of(&t, axis, "cumsum")?;
        let d = t.dtype().ok_or_else(|| TypeError::new("cannot cumsum pointers").at(0))?;
        if d == DType::Bool {
            return Err(TypeError::new("cumsum of a bool tile").hint("cast first: `mask as i32`").at(0));
        }
        let rd = if matches!(d, DType::I8 | DType::U8) { DType::I32 } else { d };
        Ok(self.emit1(OpKind::Scan { op, x, axis: a as u8 }, t.with_elem(Elem::Val(rd))))
    }

    /// `dot(a, b, acc)`; `acc: None` starts from zeros of the accumulator type.
    pub fn dot(&mut self, a: V, b: V, acc: Option<V>, precision: DotPrecision) -> R<V> {
        let (ta, tb) = (self.tile_ty(a, 0)?, self.tile_ty(b, 1)?);
        if ta.rank() != 2 {
            return Err(TypeError::new(format!("dot needs rank-2 tiles, the left operand is {}", fmt_ty(&ta)))
                .hint("dot multiplies [M, K] by [K, N] tiles; for two vectors write `sum(a * b, 0)`")
                .at(0));
        }
        if tb.rank() != 2 {
            return Err(TypeError::new(format!("dot needs rank-2 tiles, the right operand is {}", fmt_ty(&tb)))
                .hint("dot multiplies [M, K] by [K, N] tiles; for two vectors write `sum(a * b, 0)`")
                .at(1));
        }
        let (da, db) = (ta.dtype(), tb.dtype());
        let (da, db) = match (da, db) {
            (Some(x), Some(y)) => (x, y),
            _ => return Err(TypeError::new("dot of pointer tiles").at(0)),
        };
        if da != db {
            return Err(TypeError::new(format!("dot operands must have the same dtype, found {da} and {db}"))
                .hint(format!("cast one side: `b as {da}`"))
                .at(1));
        }
        let acc_d = match da {
            DType::F16 | DType::BF16 | DType::F32 | DType::F8E4M3 | DType::F8E5M2 | DType::Generic(_) => DType::F32,
            DType::I8 => DType::I32,
            other => {
                return Err(TypeError::new(format!("dot does not support {other} inputs"))
                    .hint("supported: f16, bf16, f32, f8e4m3, f8e5m2 (f32 accumulate) and i8 (i32 accumulate)")
                    .at(0))
            }
        };
        if precision.is_tf32() && da != DType::F32 && !da.is_generic() {
            return Err(TypeError::new(format!("tf32 precision applies to f32 inputs, found {da}")).at(0));
        }
        let (m, k1) = (ta.shape()[0].clone(), ta.shape()[1].clone());
        let (k2, n) = (tb.shape()[0].clone(), tb.shape()[1].clone());
        if k1.provably_eq(&k2) == Some(false) {
            return Err(TypeError::new(format!("dot inner dimensions differ: {} is {} and {} is {}", "left", fmt_ty(&ta), "right", fmt_ty(&tb)))
                .hint("the left operand's columns must equal the right operand's rows")
                .at(1));
        }
        for (dim, which) in [(&m, 0usize), (&k1, 0), (&n, 1)] {
            if let Some(v) = dim.known() {
                if v < 16 {
                    return Err(TypeError::new(format!("dot needs every dimension to be at least 16, found {v}"))
                        .hint("use a larger block, or broadcasting multiply and sum for tiny products")
                        .at(which));
                }
            }
        }
        let out_shape = vec![m, n];
        let acc = match acc {
            Some(c) => {
                let tc = self.tile_ty(c, 2)?;
                if tc.dtype() != Some(acc_d) {
                    return Err(TypeError::new(format!("the accumulator of a {da} dot must be {acc_d}, found {}", fmt_ty(&tc)))
                        .hint(format!("start it with zeros([BM, BN], {acc_d})"))
                        .at(2));
                }
                if tc.rank() != 2 {
                    return Err(TypeError::new(format!("the accumulator must be a rank-2 tile, found {}", fmt_ty(&tc))).at(2));
                }
                for (x, y) in tc.shape().iter().zip(&out_shape) {
                    if x.provably_eq(y) == Some(false) {
                        return Err(TypeError::new(format!("the accumulator is {} but the product is {}", fmt_ty(&tc), fmt_shape(&out_shape))).at(2));
                    }
                }
                c
            }
            None => {
                let z = if acc_d == DType::F32 { self.const_float(0.0, Some(DType::F32)) } else { self.const_int(0, Some(DType::I32))? };
                self.splat_to(z, &out_shape)
            }
        };
        let shape = self.ty(acc).shape().to_vec();
        Ok(self.emit1(OpKind::Dot { a, b, acc, precision }, Type::tile(Elem::Val(acc_d), shape)))
    }
}
