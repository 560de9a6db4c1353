//! Memory typing: `load` / `store` / `atomic_add` through pointer tiles
//! (masks broadcast, `other` coerced), views and block accesses.

use super::*;

impl Builder {
    pub(super) fn ptr_elem(&self, p: V, what: &str) -> R<DType> {
        match self.ty(p).elem() {
            Some(Elem::Ptr(d)) => Ok(d),
            _ => Err(TypeError::new(format!("{what} needs a pointer or pointer tile, found {}", fmt_ty(self.ty(p))))
                .hint("offset a pointer argument: `x + offs`")
                .at(0)),
        }
    }

    pub(super) fn check_mask(&mut self, m: V, operand: usize) -> R<()> {
        let t = self.tile_ty(m, operand)?;
        if t.elem() != Some(Elem::Val(DType::Bool)) {
            return Err(TypeError::new(format!("a mask must be bool, found {}", fmt_ty(&t))).hint("build it with a comparison: `offs < n`").at(operand));
        }
        Ok(())
    }

    /// `load(ptr, mask, other)`: the values behind a pointer tile. `other` needs a mask and is
    /// converted to the pointee dtype if weak; pointer, mask and `other` are broadcast to one
    /// shape.
    pub fn load(&mut self, ptr: V, mask: Option<V>, other: Option<V>) -> R<V> {
        let d = self.ptr_elem(ptr, "load")?;
        if other.is_some() && mask.is_none() {
            return Err(TypeError::new("`other` without a mask has no effect").hint("pass a mask: load(ptrs, mask, other)").at(2));
        }
        let mut shape = self.ty(ptr).shape().to_vec();
        if let Some(m) = mask {
            self.check_mask(m, 1)?;
            shape = broadcast_shapes(&shape, self.ty(m).shape()).map_err(|e| e.at(1))?;
        }
        let other = match other {
            Some(o) => {
                let t = self.tile_ty(o, 2)?;
                if t.elem().is_none_or(|e| e.is_ptr()) {
                    return Err(TypeError::new(format!("`other` must be a value, found {}", fmt_ty(&t))).at(2));
                }
                let o = self.coerce_value_to(o, d).map_err(|e| e.at(2))?;
                shape = broadcast_shapes(&shape, self.ty(o).shape()).map_err(|e| e.at(2))?;
                Some(o)
            }
            None => None,
        };
        let ptr = self.broadcast_to(ptr, &shape)?;
        let mask = match mask {
            Some(m) => Some(self.broadcast_to(m, &shape)?),
            None => None,
        };
        let other = match other {
            Some(o) => Some(self.broadcast_to(o, &shape)?),
            None => None,
        };
        Ok(self.emit1(OpKind::Load { ptr, mask, other }, Type::tile(Elem::Val(d), shape)))
    }

    /// Coerce a value (weak or strong) to dtype `d`, failing on a strong mismatch.
    pub(super) fn coerce_value_to(&mut self, v: V, d: DType) -> R<V> {
        let cur = self.ty(v).dtype();
        if cur == Some(d) {
            return Ok(v);
        }
        if self.info(v).weak {
            return self.coerce_scalar_to(v, d);
        }
        Err(dtype_mismatch(cur.unwrap_or(DType::Bool), d))
    }

    pub(super) fn store_like(&mut self, ptr: V, value: V, mask: Option<V>, atomic: Option<MemSem>) -> R<Option<V>> {
        let what = if atomic.is_some() { "atomic_add" } else { "store" };
        let d = self.ptr_elem(ptr, what)?;
        let vt = self.tile_ty(value, 1)?;
        let vd = match vt.elem().unwrap() {
            Elem::Val(x) => x,
            Elem::Ptr(_) => return Err(TypeError::new("storing pointers to memory is not supported").at(1)),
        };
        if vd != d && !self.info(value).weak {
            return Err(TypeError::new(format!("cannot {what} a value of type {vd} through a pointer to {d}"))
                .hint(format!("cast the value first: `value as {d}`"))
                .at(1));
        }
        if atomic.is_some() && !matches!(d, DType::F32 | DType::I32 | DType::U32 | DType::F16 | DType::BF16 | DType::Generic(_)) {
            return Err(TypeError::new(format!("atomic_add is not supported on {d}")).hint("use an f32, f16, bf16, i32 or u32 tensor").at(0));
        }
        let value = self.coerce_value_to(value, d).map_err(|e| e.at(1))?;
        let pshape = self.ty(ptr).shape().to_vec();
        let mut shape = broadcast_shapes(&pshape, self.ty(value).shape()).map_err(|e| e.at(1))?;
        if let Some(m) = mask {
            self.check_mask(m, 2)?;
            shape = broadcast_shapes(&shape, self.ty(m).shape()).map_err(|e| e.at(2))?;
        }
        let ptr = self.broadcast_to(ptr, &shape)?;
        let value = self.broadcast_to(value, &shape)?;
        let mask = match mask {
            Some(m) => Some(self.broadcast_to(m, &shape)?),
            None => None,
        };
        Ok(match atomic {
            Some(sem) => {
                let ty = self.ty(value).clone();
                Some(self.emit1(OpKind::AtomicAdd { ptr, value, mask, sem }, ty))
            }
            None => {
                self.emit(OpKind::Store { ptr, value, mask }, vec![]);
                None
            }
        })
    }

    /// `store(ptr, value, mask)`: writes `value` (a weak one converted to the pointee dtype)
    /// through `ptr` where `mask` holds, all three broadcast to one shape.
    pub fn store(&mut self, ptr: V, value: V, mask: Option<V>) -> R<()> {
        self.store_like(ptr, value, mask, None).map(|_| ())
    }

    /// `atomic_add(ptr, value, mask, sem)`: as [`Builder::store`], adding atomically; pointees
    /// f32, f16, bf16, i32 or u32 only. Returns the old values (a tile of the broadcast shape;
    /// 0 on masked-off lanes), ordered with the program's other memory operations by `sem`.
    pub fn atomic_add(&mut self, ptr: V, value: V, mask: Option<V>, sem: MemSem) -> R<V> {
        Ok(self.store_like(ptr, value, mask, Some(sem))?.expect("an atomic_add has a result"))
    }

    pub(super) fn int_scalars(&mut self, vs: &[V], what: &str, first_operand: usize) -> R<Vec<V>> {
        let mut out = vec![];
        for (i, &v) in vs.iter().enumerate() {
            let t = self.tile_ty(v, first_operand)?;
            match t.dtype() {
                Some(d) if t.is_scalar() && d.is_int() => {
                    let v = if d != DType::I64 && d != DType::I32 { self.cast(v, DType::I32)? } else { v };
                    out.push(v)
                }
                _ => return Err(TypeError::new(format!("{what} must be integer scalars; entry {i} is {}", fmt_ty(&t))).at(first_operand)),
            }
        }
        Ok(out)
    }

    /// `view(base, shape, strides)`: a view of rank 1 to 3 of the tensor at scalar pointer `base`;
    /// dims and strides are integer scalars, those not i32 or i64 cast to i32.
    pub fn make_view(&mut self, base: V, shape: Vec<V>, strides: Vec<V>) -> R<V> {
        let d = self.ptr_elem(base, "view")?;
        if !self.ty(base).is_scalar() {
            return Err(TypeError::new("the base of a view must be a scalar pointer (a kernel argument)").at(0));
        }
        if shape.len() != strides.len() || shape.is_empty() || shape.len() > 3 {
            return Err(TypeError::new(format!(
                "a view needs as many strides as dimensions (1 to 3); found {} dims and {} strides",
                shape.len(),
                strides.len()
            ))
            .at(2));
        }
        let shape = self.int_scalars(&shape, "view dimensions", 1)?;
        let strides = self.int_scalars(&strides, "view strides", 2)?;
        let rank = shape.len();
        let v = self.new_value(Type::View { dtype: d, rank }, None, false);
        self.emit(OpKind::MakeView { base, shape, strides }, vec![v]);
        Ok(v)
    }

    pub(super) fn view_ty(&self, v: V) -> R<(DType, usize)> {
        match self.ty(v) {
            Type::View { dtype, rank } => Ok((*dtype, *rank)),
            t => Err(TypeError::new(format!("expected a view (from `view(ptr, shape, strides)`), found {}", fmt_ty(t))).at(0)),
        }
    }

    /// `load_block(view, offsets, shape)`: the tile of `shape` whose first element is at `offsets`
    /// in the view, one offset and one dimension per view dimension.
    pub fn load_block(&mut self, view: V, offsets: Vec<V>, shape: Vec<Dim>) -> R<V> {
        let (d, rank) = self.view_ty(view)?;
        if offsets.len() != rank || shape.len() != rank {
            return Err(TypeError::new(format!(
                "a rank-{rank} view needs {rank} offsets and a rank-{rank} block shape; found {} and {}",
                offsets.len(),
                shape.len()
            ))
            .at(1));
        }
        for s in &shape {
            if let Some(n) = s.known() {
                check_tile_len(n, "a block dimension")?;
            }
        }
        let offsets = self.int_scalars(&offsets, "block offsets", 1)?;
        Ok(self.emit1(OpKind::LoadBlock { view, offsets, shape: shape.clone() }, Type::tile(Elem::Val(d), shape)))
    }

    /// `store_block(view, offsets, value)`: writes a tile of the view's dtype and rank with its
    /// first element at `offsets`.
    pub fn store_block(&mut self, view: V, offsets: Vec<V>, value: V) -> R<()> {
        let (d, rank) = self.view_ty(view)?;
        let vt = self.tile_ty(value, 2)?;
        if vt.rank() != rank || offsets.len() != rank {
            return Err(TypeError::new(format!("storing a {} tile into a rank-{rank} view needs a rank-{rank} tile and {rank} offsets", fmt_ty(&vt))).at(2));
        }
        if vt.dtype() != Some(d) {
            return Err(TypeError::new(format!("cannot store {} into a view of {d}", fmt_ty(&vt))).hint(format!("cast the value first: `value as {d}`")).at(2));
        }
        let offsets = self.int_scalars(&offsets, "block offsets", 1)?;
        self.emit(OpKind::StoreBlock { view, offsets, value }, vec![]);
        Ok(())
    }
}
