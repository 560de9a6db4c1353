//! Structured control flow: `for` with loop-carried values (types of the
//! carried values fixed by their initial values), `if` with results,
//! `static_assert`, `print`, and raw ops for the specializer's replay.

use super::*;

impl Builder {
    pub(super) fn scalar_index(&mut self, v: V, what: &str, operand: usize) -> R<V> {
        let t = self.tile_ty(v, operand)?;
        match t.dtype() {
            Some(d) if t.is_scalar() && d.is_int() => Ok(v),
            _ => Err(TypeError::new(format!("{what} must be an integer scalar, found {}", fmt_ty(&t))).at(operand)),
        }
    }

    /// Open a `for` loop; returns the induction variable and the block
    /// arguments standing for the carried values inside the body.
    pub fn begin_for(&mut self, lo: V, hi: V, step: V, inits: &[V]) -> R<(V, Vec<V>)> {
        let lo = self.scalar_index(lo, "the loop start", 0)?;
        let hi = self.scalar_index(hi, "the loop end", 1)?;
        let step = self.scalar_index(step, "the loop step", 2)?;
        let (lo, hi, d) = self.unify(lo, hi)?;
        let step = self.coerce_value_to(step, d).map_err(|e| e.at(2))?;
        if let Some(s) = self.info(step).cval.as_ref().and_then(|e| e.known()) {
            if s <= 0 {
                return Err(TypeError::new(format!("the loop step must be positive, found {s}")).at(2));
            }
        }
        let loc = self.loc;
        self.frames.push(Frame::For { lo, hi, step, inits: inits.to_vec(), loc });
        let iv = self.new_value(Type::scalar(d), None, false);
        let mut args = vec![iv];
        for &i in inits {
            let ty = self.ty(i).clone();
            let a = self.new_value(ty, None, false);
            if let Some(n) = self.info(i).name.clone() {
                self.set_name(a, &n);
            }
            args.push(a);
        }
        self.blocks.push(Block { args: args.clone(), ops: vec![] });
        Ok((iv, args[1..].to_vec()))
    }

    /// Coerce `v` to exactly `ty` (weak literals adapt); `None` when impossible.
    pub(super) fn coerce_to_type(&mut self, v: V, ty: &Type) -> R<V> {
        let cur = self.ty(v).clone();
        if &cur == ty {
            return Ok(v);
        }
        let mut v = v;
        if let (Some(d), Some(cd)) = (ty.dtype(), cur.dtype()) {
            if d != cd {
                if !self.info(v).weak {
                    return Err(TypeError::new(format!("{} changes to {}", fmt_ty(ty), fmt_ty(&cur))));
                }
                v = self.coerce_scalar_to(v, d)?;
            }
        }
        let cur = self.ty(v).clone();
        if cur.rank() < ty.rank() && cur.is_scalar() {
            v = self.broadcast_to(v, ty.shape())?;
        }
        let cur = self.ty(v).clone();
        if &cur != ty {
            let all_provable =
                cur.elem() == ty.elem() && cur.rank() == ty.rank() && cur.shape().iter().zip(ty.shape()).all(|(a, b)| a.provably_eq(b) != Some(false));
            if all_provable && cur.shape().iter().zip(ty.shape()).any(|(a, b)| a.provably_eq(b).is_none()) {
                // Symbolically different, possibly equal: let the specializer decide.
                return self.broadcast_to(v, ty.shape());
            }
            return Err(TypeError::new(format!("{} changes to {}", fmt_ty(ty), fmt_ty(&cur))));
        }
        Ok(v)
    }

    /// Close the innermost `for`; `yields[i]` must have the type of carried `i`.
    pub fn end_for(&mut self, yields: Vec<V>) -> R<Vec<V>> {
        let Some(Frame::For { lo, hi, step, inits, loc }) = self.frames.pop() else { panic!("end_for without begin_for") };
        let arg_tys: Vec<Type> = self.blocks.last().unwrap().args[1..].iter().map(|a| self.ty(*a).clone()).collect();
        let mut ys = vec![];
        for (i, (y, t)) in yields.iter().zip(&arg_tys).enumerate() {
            let y2 = self.coerce_to_type(*y, t).map_err(|e| TypeError {
                msg: format!("a loop-carried value changes type inside the loop: {}", e.msg),
                hint: Some("keep the type and shape fixed; cast or broadcast before the loop".into()),
                operand: Some(i),
            })?;
            ys.push(y2);
        }
        self.emit(OpKind::Yield(ys), vec![]);
        let body = self.blocks.pop().unwrap();
        let results: Vec<V> = arg_tys.iter().map(|t| self.new_value(t.clone(), None, false)).collect();
        let saved = self.loc;
        self.loc = loc;
        self.emit(OpKind::For { lo, hi, step, inits, body }, results.clone());
        self.loc = saved;
        Ok(results)
    }

    /// Check an `if` condition: a scalar bool, never a tile.
    pub fn check_if_cond(&mut self, cond: V) -> R<V> {
        let t = self.tile_ty(cond, 0)?;
        if !t.is_scalar() {
            return Err(TypeError::new(format!("cannot branch on the tile value {}", fmt_ty(&t)))
                .hint("tiles are never branched on: use `select(cond, a, b)` for elementwise choice")
                .at(0));
        }
        if t.dtype() != Some(DType::Bool) {
            return Err(TypeError::new(format!("the condition of `if` must be bool, found {}", fmt_ty(&t))).hint("compare explicitly: `x != 0`").at(0));
        }
        Ok(cond)
    }

    /// Open an `if` on a scalar bool; the ops appended next form the then-branch.
    pub fn begin_if(&mut self, cond: V) -> R<()> {
        let cond = self.check_if_cond(cond)?;
        let loc = self.loc;
        self.frames.push(Frame::IfThen { cond, loc });
        self.blocks.push(Block::default());
        Ok(())
    }

    /// Close the then-branch, whose values out are `then_yields` (one per variable the `if`
    /// assigns), and open the else-branch.
    pub fn begin_else(&mut self, then_yields: Vec<V>) {
        let Some(Frame::IfThen { cond, loc }) = self.frames.pop() else { panic!("begin_else without begin_if") };
        let then_ = self.blocks.pop().unwrap();
        self.frames.push(Frame::IfElse { cond, then_, then_yields, loc });
        self.blocks.push(Block::default());
    }

    /// Close the `if`. The then-branch fixes the result types; weak values on
    /// either side adapt to the other side.
    pub fn end_if(&mut self, else_yields: Vec<V>) -> R<Vec<V>> {
        let Some(Frame::IfElse { cond, mut then_, then_yields, loc }) = self.frames.pop() else { panic!("end_if without begin_else") };
        let mut else_b = self.blocks.pop().unwrap();
        let mut tys = vec![];
        let mut ey = vec![];
        let mut ty_then = vec![];
        for (i, (&t, &e)) in then_yields.iter().zip(&else_yields).enumerate() {
            let (tt, et) = (self.ty(t).clone(), self.ty(e).clone());
            // Decide the common type: strong side wins.
            let (target, fix_then) = if self.info(t).weak && !self.info(e).weak { (et.clone(), true) } else { (tt.clone(), false) };
            let err = |m: String| TypeError {
                msg: format!("a variable assigned in an `if` has different types in its branches: {m}"),
                hint: Some("give both branches the same dtype and shape".into()),
                operand: Some(i),
            };
            if fix_then {
                self.blocks.push(std::mem::take(&mut then_));
                let t2 = self.coerce_to_type(t, &target).map_err(|x| err(x.msg))?;
                then_ = self.blocks.pop().unwrap();
                ty_then.push(t2);
                ey.push(e);
            } else {
                self.blocks.push(std::mem::take(&mut else_b));
                let e2 = self.coerce_to_type(e, &target).map_err(|x| err(x.msg));
                else_b = self.blocks.pop().unwrap();
                ty_then.push(t);
                ey.push(e2?);
            }
            let _ = et;
            tys.push(target);
        }
        then_.ops.push(Op { kind: OpKind::Yield(ty_then), results: vec![], loc });
        else_b.ops.push(Op { kind: OpKind::Yield(ey), results: vec![], loc });
        let results: Vec<V> = tys.into_iter().map(|t| self.new_value(t, None, false)).collect();
        let saved = self.loc;
        self.loc = loc;
        self.emit(OpKind::If { cond, then_, else_: else_b }, results.clone());
        self.loc = saved;
        Ok(results)
    }

    /// `static_assert(cond, msg)`: `cond` must be a bool constexpr. An error at once when it is
    /// known false, nothing when known true; otherwise an [`OpKind::StaticAssert`] the specializer
    /// decides.
    pub fn static_assert(&mut self, cond: V, msg: &str) -> R<()> {
        let e = self.cexpr_of(cond, "the condition of static_assert").map_err(|e| e.at(0))?;
        if self.ty(cond).dtype() != Some(DType::Bool) {
            return Err(TypeError::new("the condition of static_assert must be bool").hint("compare explicitly: `BLOCK % 16 == 0`").at(0));
        }
        if e.known() == Some(0) {
            return Err(TypeError::new(format!("static_assert failed: {msg}"))
                .hint("the condition is evaluated on constants before anything runs; change the constants or the condition")
                .at(0));
        }
        if e.known().is_none() {
            self.emit(OpKind::StaticAssert { cond, msg: msg.to_string() }, vec![]);
        }
        Ok(())
    }

    /// `print(prefix, args)`: a debug print of tiles and scalars ([`OpKind::Print`]).
    pub fn print(&mut self, prefix: &str, args: Vec<V>) -> R<()> {
        for (i, a) in args.iter().enumerate() {
            self.tile_ty(*a, i + 1)?;
        }
        self.emit(OpKind::Print { prefix: prefix.to_string(), args }, vec![]);
        Ok(())
    }

    /// Append an op verbatim with pre-computed result types (used by the
    /// specializer for leaves whose typing is trivial).
    pub fn raw(&mut self, kind: OpKind, tys: Vec<(Type, Option<CExpr>, bool)>) -> Vec<V> {
        let vs: Vec<V> = tys.into_iter().map(|(t, c, w)| self.new_value(t, c, w)).collect();
        self.emit(kind, vs.clone());
        vs
    }
}
