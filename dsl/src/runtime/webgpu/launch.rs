//! Launch on a wgpu device: WGSL emission and pipeline creation (cached),
//! scalar marshalling into the uniform block, dispatch.
//!
//! Cache key: (kernel, device, constexprs, dtypes, workgroup size, which
//! integer arguments — buffer lengths included — are divisible by 16 /
//! equal to 1, safety) — the same key
//! decides the WGSL. The workgroup size is the launch's
//! `num_warps · 32`, capped by the adapter's invocation limits; one
//! workgroup runs one program, so the grid is the workgroup count.
//! `FERROTILE_DUMP_WGSL=1` (or a comma-separated list of kernel names)
//! prints the emitted WGSL.

use crate::element::Scalar;
use crate::error::{Error, Result};
use crate::runtime::webgpu::driver::{WgpuMem, WgpuPipeline};
use crate::runtime::{Arg, Device, LaunchConfig, Storage};
use ferrotile_backends::abi::BindingKind;
use ferrotile_backends::wgsl::{self, WgslOptions};
use ferrotile_ir::passes::Safety;
use ferrotile_ir::{DType, Kernel};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

struct Compiled {
    pipeline: WgpuPipeline,
    fields: Vec<wgsl::UniformField>,
}

type Key = (usize, usize, Vec<i64>, Vec<DType>, u32, Vec<u32>, Vec<bool>, Safety);

fn cache() -> &'static Mutex<HashMap<Key, Arc<Compiled>>> {
    static C: OnceLock<Mutex<HashMap<Key, Arc<Compiled>>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

/// Emit the WGSL for this specialization with `opts`; public for tools.
pub fn wgsl_for(spec: &Kernel, opts: &WgslOptions) -> Result<wgsl::WgslKernel> {
    wgsl::emit(spec, opts).map_err(|e| Error::Backend { kernel: spec.name.clone(), msg: e.to_string() })
}

fn put(u: &mut Vec<u8>, off: u32, bytes: &[u8]) {
    let off = off as usize;
    if u.len() < off + bytes.len() {
        u.resize(off + bytes.len(), 0);
    }
    u[off..off + bytes.len()].copy_from_slice(bytes);
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn launch(
    k: &'static Kernel,
    spec: &Kernel,
    dev: &Device,
    cfg: LaunchConfig,
    args: &[Arg<'_>],
    cx: &[i64],
    dts: &[DType],
    safety: Safety,
) -> Result<()> {
    let w = dev.wgpu.as_ref().expect("wgpu device");
    let berr = |msg: String| Error::Backend { kernel: k.name.clone(), msg };
    let lim = &w.limits;
    let cap = lim.max_compute_invocations_per_workgroup.min(lim.max_compute_workgroup_size_x);
    let mut wg = (cfg.num_warps * 32).min(cap).max(32);
    if !wg.is_power_of_two() {
        wg = 1 << (31 - wg.leading_zeros());
    }
    // (what lets the emitter prove accesses contiguous and aligned, vec4,
    // as on CUDA)
    let (div, one) = crate::runtime::launch::int_arg_facts(args);
    let key: Key = (k as *const Kernel as usize, Arc::as_ptr(w) as usize, cx.to_vec(), dts.to_vec(), wg, div.clone(), one.clone(), safety);
    let compiled = {
        let hit = cache().lock().unwrap_or_else(|p| p.into_inner()).get(&key).cloned();
        match hit {
            Some(c) => c,
            None => {
                let opts = WgslOptions { workgroup_size: wg, arg_div: div, arg_one: one, safety, ..w.base_options.clone() };
                let wk = wgsl_for(spec, &opts)?;
                if std::env::var("FERROTILE_DUMP_WGSL").is_ok_and(|v| v == "1" || v.split(',').any(|n| n == k.name)) {
                    eprintln!("{}", wk.text);
                }
                let pipeline = w.load(&wk).map_err(berr)?;
                let fields = wk
                    .bindings
                    .iter()
                    .find_map(|b| match &b.kind {
                        BindingKind::Uniform { fields, .. } => Some(fields.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                let c = Arc::new(Compiled { pipeline, fields });
                cache().lock().unwrap_or_else(|p| p.into_inner()).insert(key, c.clone());
                c
            }
        }
    };
    // storage buffers by parameter index
    let mut mems: Vec<Option<&WgpuMem>> = Vec::with_capacity(args.len());
    for a in args.iter() {
        mems.push(match a {
            Arg::Buffer { mem: Storage::Wgpu(m), .. } => Some(&**m),
            Arg::Buffer { .. } => return Err(berr("a buffer of another device was passed to a wgpu launch".into())),
            Arg::Scalar(_) => None,
        });
    }
    // scalars into the uniform block, as the emitter's ABI lays them out
    let mut u: Vec<u8> = vec![];
    for f in &compiled.fields {
        let s = match args.get(f.param as usize) {
            Some(Arg::Scalar(s)) => *s,
            _ => return Err(berr(format!("parameter {} should be a scalar", f.param))),
        };
        match (s, f.dtype) {
            (Scalar::I(v, _), DType::I64) => put(&mut u, f.offset, &v.to_le_bytes()),
            (Scalar::I(v, _), _) => put(&mut u, f.offset, &(v as u32).to_le_bytes()),
            (Scalar::F(v, _), DType::F32) => put(&mut u, f.offset, &(v as f32).to_bits().to_le_bytes()),
            (Scalar::F(v, _), DType::F16) => put(&mut u, f.offset, &(half::f16::from_f64(v).to_bits() as u32).to_le_bytes()),
            (Scalar::F(v, _), DType::BF16) => put(&mut u, f.offset, &(half::bf16::from_f64(v).to_bits() as u32).to_le_bytes()),
            (s, d) => return Err(berr(format!("scalar {s:?} does not match the uniform field of type {d}"))),
        }
    }
    w.dispatch(&compiled.pipeline, cfg.grid, &mems, &u).map_err(berr)?;
    if std::env::var("FERROTILE_SYNC").is_ok() {
        w.synchronize().map_err(berr)?;
    }
    Ok(())
}
