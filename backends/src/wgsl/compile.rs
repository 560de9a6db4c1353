//! The WGSL backend's driver: checks the options, runs the IR passes of the
//! WGSL target (`ferrotile_ir::passes`: the guards), and computes what the
//! printer (`emit`) reads: how many consecutive elements an invocation owns,
//! the axis facts (`crate::plan::axis`), which buffer every pointer points
//! into (provenance), how each buffer is declared, and which scalar values
//! are uniform in WGSL's sense.

use super::emit::{self, Buf, Plans};
use super::{WgslKernel, WgslOptions};
use crate::plan::axis;
use crate::EmitError;
use ferrotile_ir::*;
use std::collections::{HashMap, HashSet};

/// Specialized IR → one WGSL compute entry point (see `emit` for the
/// semantics the text keeps).
pub fn emit(k: &Kernel, o: &WgslOptions) -> Result<WgslKernel, EmitError> {
    let err = |line: u32, msg: String| EmitError { kernel: k.name.clone(), line, msg };
    if !k.specialized {
        return Err(err(0, "the WGSL backend needs a specialized kernel".into()));
    }
    if !(o.workgroup_size.is_power_of_two() && (32..=1024).contains(&o.workgroup_size)) {
        return Err(err(0, format!("workgroup_size must be a power of two in 32..=1024, got {}", o.workgroup_size)));
    }
    // (no `private_index`: with it the norm-matmul, GEMM-bias and conv1d
    // conformance kernels kept every barrier here and grew by up to 12 %)
    let k = &*ferrotile_ir::passes::run(k, &ferrotile_ir::passes::PassOptions::wgsl(o.safety));
    for p in &k.params {
        if let ParamKind::Ptr(DType::Bool) = p.kind {
            return Err(err(0, format!("parameter `{}`: bool memory is not supported", p.name)));
        }
    }
    // Narrowest memory element: one invocation owns a whole 32-bit word
    // along the last dimension (2 x 16-bit, 4 x 8-bit). Kernels whose memory
    // is all 32-bit and whose memory tiles are large enough for every
    // invocation to own 4 elements without replication own 16 bytes, as on
    // PTX, so that aligned runs can move as one `vec4` (small tiles keep one
    // element per invocation: replicating them 4 ways only adds code).
    let (mut min_es, mut max_es, mut max_tile) = (4usize, 1usize, 0u64);
    k.walk(&mut |op| {
        if let OpKind::Load { ptr, .. } | OpKind::Store { ptr, .. } = &op.kind {
            let n: Option<u64> = k.ty(*ptr).shape().iter().map(|d| d.known().map(|x| x as u64)).product();
            max_tile = max_tile.max(n.unwrap_or(0));
        }
        let p = match &op.kind {
            OpKind::Load { ptr, .. } | OpKind::Store { ptr, .. } => k.ty(*ptr).elem().map(|e| e.dtype()),
            OpKind::LoadBlock { view, .. } | OpKind::StoreBlock { view, .. } => match k.ty(*view) {
                Type::View { dtype, .. } => Some(*dtype),
                _ => None,
            },
            _ => None,
        };
        if let Some(d) = p {
            min_es = min_es.min(d.size_bytes().max(1));
            max_es = max_es.max(d.size_bytes());
        }
    });
    let vec = if min_es == 4 && max_es == 4 && max_tile >= 4 * o.workgroup_size as u64 { 4 } else { (4 / min_es) as u32 };
    let base = provenance(k).map_err(|(line, msg)| err(line, msg))?;
    let mut bufs: Vec<Option<Buf>> = k
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Ptr(d) => Some(Buf { dtype: d, written: p.written, atomic: p.written && d.size_bytes() < 4, vec4: false }),
            _ => None,
        })
        .collect();
    k.walk(&mut |op| {
        if let OpKind::AtomicAdd { ptr, .. } = &op.kind {
            if let Some(b) = base.get(ptr).and_then(|&p| bufs[p as usize].as_mut()) {
                b.atomic = true;
                b.written = true;
            }
        }
    });
    let nwarps = o.workgroup_size / 32;
    let values = if o.slice_layouts {
        crate::plan::slices::assign(k, &mut |s| crate::plan::layout::Blocked::canonical(s, nwarps, vec), true)
    } else {
        Default::default()
    };
    emit::write(Plans { kernel: k, vec, axis: axis::analyze(k, &o.arg_div, &o.arg_one), base, uniform: uniform_values(k), bufs, values }, o)
}

/// Which parameter every pointer and view value points into
/// (`ferrotile_ir::analysis::provenance`, which must name one).
fn provenance(k: &Kernel) -> Result<HashMap<V, u32>, (u32, String)> {
    let prov = ferrotile_ir::analysis::provenance(k);
    // (in program order, so that the error names the first such pointer)
    let mut order: Vec<(V, u32)> = vec![];
    k.walk(&mut |op| {
        for r in op.kind.regions().iter().flat_map(|b| &b.args).chain(&op.results) {
            order.push((*r, op.loc.line));
        }
    });
    let mut m = HashMap::new();
    for (v, line) in order {
        let Some(ps) = prov.get(&v) else { continue };
        if ps.len() > 1 {
            return Err((
                line,
                "a pointer that may point into different buffers (select/if/loop over pointers to different arguments) is not supported by the WGSL backend"
                    .into(),
            ));
        }
        if let Some(&p) = ps.iter().next() {
            m.insert(v, p);
        }
    }
    Ok(m)
}

/// Scalars that are uniform in WGSL's sense: computed from constants, scalar
/// parameters and program ids only (not from memory, workgroup memory or
/// anything that went through them), including loop-carried values whose
/// initial value and every update are.
fn uniform_values(k: &Kernel) -> HashSet<V> {
    fn block(k: &Kernel, b: &Block, u: &mut HashSet<V>) {
        for op in &b.ops {
            let scalar_res = op.results.first().is_some_and(|r| k.ty(*r).is_scalar());
            match &op.kind {
                OpKind::Const(_) | OpKind::Param(_) | OpKind::ProgramId(_) | OpKind::NumPrograms(_) => {
                    u.extend(op.results.iter().copied());
                }
                kind if kind.is_elementwise() && scalar_res && op.kind.operands().iter().all(|v| u.contains(v)) => {
                    u.extend(op.results.iter().copied());
                }
                OpKind::For { lo, hi, step, inits, body } => {
                    let ctl = u.contains(lo) && u.contains(hi) && u.contains(step);
                    let mut assume: Vec<bool> = inits.iter().map(|i| ctl && u.contains(i)).collect();
                    loop {
                        let mut u2 = u.clone();
                        if ctl {
                            u2.insert(body.args[0]);
                        }
                        for (a, &ok) in body.args[1..].iter().zip(&assume) {
                            if ok {
                                u2.insert(*a);
                            }
                        }
                        block(k, body, &mut u2);
                        let ys = body.yields();
                        let next: Vec<bool> = assume.iter().zip(ys).map(|(&a, y)| a && u2.contains(y)).collect();
                        if next == assume {
                            *u = u2;
                            break;
                        }
                        assume = next;
                    }
                    for (r, &ok) in op.results.iter().zip(&assume) {
                        if ok {
                            u.insert(*r);
                        }
                    }
                }
                OpKind::If { cond, then_, else_ } => {
                    block(k, then_, u);
                    block(k, else_, u);
                    let (yt, ye) = (then_.yields(), else_.yields());
                    for (i, r) in op.results.iter().enumerate() {
                        if u.contains(cond) && yt.get(i).is_some_and(|y| u.contains(y)) && ye.get(i).is_some_and(|y| u.contains(y)) {
                            u.insert(*r);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    let mut u = HashSet::new();
    block(k, &k.body, &mut u);
    u
}
