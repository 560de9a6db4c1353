//! Shape ops: splats, `expand_dims`, NumPy broadcasting made explicit
//! (`broadcast_to`), `reshape`, `trans`.

use super::*;

impl Builder {
    pub(super) fn splat_to(&mut self, x: V, shape: &[Dim]) -> V {
        if shape.is_empty() {
            return x;
        }
        let ty = self.ty(x).with_shape(shape.to_vec());
        self.emit1(OpKind::Splat { x, shape: shape.to_vec() }, ty)
    }

    /// `expand_dims(x, axis)`: a dimension of size 1 inserted at `axis` (a negative axis counts
    /// from the end: `-1` appends one).
    pub fn expand_dims(&mut self, x: V, axis: i64) -> R<V> {
        let ty = self.tile_ty(x, 0)?;
        let r = ty.rank() as i64;
        let a = if axis < 0 { axis + r + 1 } else { axis };
        if a < 0 || a > r {
            return Err(TypeError::new(format!("axis {axis} is out of range for expand_dims of a rank-{r} tile (valid: 0..={r})")).at(1));
        }
        let mut shape = ty.shape().to_vec();
        shape.insert(a as usize, CExpr::Lit(1));
        let nty = ty.with_shape(shape);
        Ok(self.emit1(OpKind::ExpandDims { x, axis: a as u8 }, nty))
    }

    /// Broadcast `x` (lower or equal rank) to `shape`.
    pub fn broadcast_to(&mut self, x: V, shape: &[Dim]) -> R<V> {
        let ty = self.tile_ty(x, 0)?;
        if ty.is_scalar() {
            return Ok(self.splat_to(x, shape));
        }
        if ty.rank() > shape.len() {
            return Err(TypeError::new(format!("cannot broadcast {} to the lower-rank shape {}", fmt_ty(&ty), fmt_shape(shape))));
        }
        if let Some(&a) = self.facts.reduced.get(&x) {
            if ty.rank() < shape.len() {
                return Err(TypeError::new(format!(
                    "this tile was reduced along axis {a}; broadcasting it to {} puts it back as axis 0, which lines its values up with the wrong axis",
                    fmt_shape(shape)
                ))
                .hint(format!("put the reduced axis back where it was: `expand_dims(s, {a})` (a `[.., 1]` column broadcasts along axis {a})")));
            }
        }
        let mut x = x;
        while self.ty(x).rank() < shape.len() {
            x = self.expand_dims(x, 0)?;
        }
        let cur = self.ty(x).shape().to_vec();
        let mut target = Vec::with_capacity(shape.len());
        let mut same = true;
        for (a, b) in cur.iter().zip(shape) {
            match a.provably_eq(b) {
                Some(true) => target.push(a.clone()),
                _ if a.known() == Some(1) => {
                    same = false;
                    target.push(b.clone())
                }
                Some(false) => return Err(TypeError::new(format!("cannot broadcast {} to shape {}", fmt_ty(&ty), fmt_shape(shape)))),
                None => {
                    same = false;
                    target.push(CExpr::bin(CBin::Bcast, a.clone(), b.clone()))
                }
            }
        }
        if same {
            return Ok(x);
        }
        let nty = self.ty(x).with_shape(target.clone());
        Ok(self.emit1(OpKind::Broadcast { x, shape: target }, nty))
    }

    /// Explicit `Broadcast` as the specializer replays it: a no-op when the
    /// shapes already agree.
    pub fn broadcast_exact(&mut self, x: V, shape: Vec<Dim>) -> R<V> {
        self.broadcast_to(x, &shape)
    }

    /// `reshape(x, shape)`: the same elements in row-major order, in a shape (dimensions powers of
    /// two) of as many elements; `x` itself when the shape does not change.
    pub fn reshape(&mut self, x: V, shape: Vec<Dim>) -> R<V> {
        let ty = self.tile_ty(x, 0)?;
        for d in &shape {
            if let Some(n) = d.known() {
                check_tile_len(n, "a reshape dimension")?;
            }
        }
        let new_ty = ty.with_shape(shape.clone());
        if let (Some(a), Some(b)) = (ty.numel(), new_ty.numel()) {
            if a != b {
                return Err(TypeError::new(format!("cannot reshape {} ({a} elements) to {} ({b} elements)", fmt_ty(&ty), fmt_shape(&shape)))
                    .hint("a reshape keeps the number of elements; the dimensions must multiply to the same count")
                    .at(1));
            }
        }
        if ty.shape() == shape.as_slice() {
            return Ok(x);
        }
        Ok(self.emit1(OpKind::Reshape { x, shape }, new_ty))
    }

    /// `trans(x, perm)`: result dimension `i` is dimension `perm[i]` of `x`; `perm: None` swaps
    /// the two dimensions of a rank-2 tile.
    pub fn trans(&mut self, x: V, perm: Option<Vec<i64>>) -> R<V> {
        let ty = self.tile_ty(x, 0)?;
        let r = ty.rank();
        let perm: Vec<i64> = match perm {
            Some(p) => p,
            None if r == 2 => vec![1, 0],
            None => {
                return Err(TypeError::new(format!("trans without a permutation needs a rank-2 tile, found {}", fmt_ty(&ty)))
                    .hint("pass the permutation: trans(x, [2, 0, 1])"))
            }
        };
        let mut seen = vec![false; r];
        if perm.len() != r || perm.iter().any(|&p| p < 0 || p as usize >= r || std::mem::replace(&mut seen[p as usize], true)) {
            return Err(TypeError::new(format!("{perm:?} is not a permutation of the {r} axes of {}", fmt_ty(&ty))));
        }
        let shape = perm.iter().map(|&p| ty.shape()[p as usize].clone()).collect();
        let nty = ty.with_shape(shape);
        Ok(self.emit1(OpKind::Trans { x, perm: perm.iter().map(|&p| p as u8).collect() }, nty))
    }
}
