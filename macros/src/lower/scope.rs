//! The scope stack: variables (immutable bindings, `let mut` rebinding,
//! loop-carried and `if`-assigned variables), source locations, and
//! turning a builder's `TypeError` into a rustc error on the operand it blames.

use super::*;

impl<'a> Lower<'a> {
    pub(super) fn set_loc(&mut self, span: Span) {
        self.b.loc = self.loc_override.unwrap_or_else(|| loc_of(span));
    }

    /// The dtype a dtype parameter in scope stands for.
    pub(super) fn dtype_param(&self, name: &str) -> Option<DType> {
        self.dtypes.iter().find(|(n, _)| n == name).map(|(_, d)| *d)
    }

    /// A type written in the body as a dtype (`f16`, `T`).
    pub(super) fn dtype_of_type(&self, t: &syn::Type) -> Option<DType> {
        match t {
            syn::Type::Path(p) if p.qself.is_none() => {
                let id = p.path.get_ident()?.to_string();
                self.dtype_param(&id).or_else(|| DType::from_rust(&id))
            }
            _ => None,
        }
    }

    pub(super) fn lookup(&self, name: &str) -> Option<&Var> {
        self.scopes.iter().rev().flat_map(|s| s.iter().rev()).find(|v| v.name == name)
    }

    pub(super) fn lookup_mut(&mut self, name: &str) -> Option<&mut Var> {
        self.scopes.iter_mut().rev().flat_map(|s| s.iter_mut().rev()).find(|v| v.name == name)
    }

    pub(super) fn define(&mut self, name: String, v: V, mutable: bool) {
        self.b.set_name(v, &name);
        self.scopes.last_mut().unwrap().push(Var { name, v, mutable, what: VarKind::Local });
    }

    /// Turn a builder error into a spanned error: on the blamed operand when
    /// the builder says which, otherwise on the whole expression.
    pub(super) fn te(&self, e: TypeError, operands: &[Sp], whole: Sp) -> Error {
        let at = e.operand.and_then(|i| operands.get(i).copied()).unwrap_or(whole);
        mk_err(at, &e.msg, e.hint.as_deref().unwrap_or(""))
    }
}
