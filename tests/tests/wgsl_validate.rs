//! Every library kernel (blocks 16..16384, f32/f16/bf16) and every kernel
//! specialization the conformance suite launches (captured on the CPU
//! interpreter) is emitted as WGSL, with and without `shader_f16`, and
//! validated by naga. A failure names the kernel, its binding and naga's
//! diagnostic. Library kernels are also validated with `subgroups` on and
//! with 64- and 256-invocation workgroups. i64 is emulated by the backend;
//! a kernel it still rejects for i64 would be reported as "unsupported:
//! i64" and counted, not failed. An `atomic_add` ordered between programs
//! (`Acquire`/`Release`/`AcqRel`) cannot be expressed in WGSL: its clear
//! error is counted as "unsupported: ordering" (the conformance case
//! `last_program` checks the error on lavapipe).

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, DType, Kernel};
use ferrotile::Device;
use ferrotile_backends::wgsl::{emit, validate::validate, WgslOptions};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Tally {
    ok: usize,
    i64: Vec<String>,
    ordering: usize,
    failures: Vec<String>,
    max_wg_bytes: (u32, String),
}

fn check(k: &Kernel, what: &str, t: &mut Tally) {
    // the last variant: every integer argument divisible by 16 (vec4 accesses where provable)
    let aligned = WgslOptions { arg_div: vec![16; guarded_params(k)], ..WgslOptions::default() };
    check_with(k, what, t, &[WgslOptions::default(), WgslOptions { shader_f16: true, ..WgslOptions::default() }, aligned]);
}

fn check_with(k: &Kernel, what: &str, t: &mut Tally, variants: &[WgslOptions]) {
    for opts in variants {
        let shader_f16 = opts.shader_f16;
        match emit(k, opts) {
            Err(e) if e.msg.contains("i64 is not supported") => {
                if std::ptr::eq(opts, &variants[0]) {
                    t.i64.push(format!("{what}: {e}"));
                }
            }
            Err(e) if e.msg.contains("ordering: WGSL's atomics are relaxed") => t.ordering += 1,
            Err(e) => t.failures.push(format!("emit {what} ({opts:?}): {e}")),
            Ok(w) => match validate(&w) {
                Ok(()) => {
                    t.ok += 1;
                    if w.workgroup_storage_bytes > t.max_wg_bytes.0 {
                        t.max_wg_bytes = (w.workgroup_storage_bytes, what.to_string());
                    }
                }
                Err(msg) => {
                    let path =
                        std::env::temp_dir().join(format!("ferrotile-fail-{}-f16{shader_f16}-sg{}-wg{}.wgsl", k.name, opts.subgroups, opts.workgroup_size));
                    let _ = std::fs::write(&path, &w.text);
                    let msg: String = msg.lines().take(12).collect::<Vec<_>>().join("\n");
                    t.failures.push(format!("naga {what} ({opts:?}; WGSL in {}):\n{msg}", path.display()));
                }
            },
        }
    }
}

#[test]
fn library_kernels_validate() {
    let mut t = Tally::default();
    let mut n = 0;
    for (k, blocks) in ferrotile_kernels::row_kernels() {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            for &b in &blocks {
                let spec = specialize(k, &[b], &[dt]).unwrap();
                n += 1;
                let d = WgslOptions::default();
                let variants = [
                    d.clone(),
                    WgslOptions { shader_f16: true, ..d.clone() },
                    WgslOptions { subgroups: true, ..d.clone() },
                    WgslOptions { workgroup_size: 64, ..d.clone() },
                    WgslOptions { workgroup_size: 256, subgroups: true, ..d.clone() },
                    WgslOptions { subgroups: true, arg_div: vec![16; guarded_params(&spec)], ..d.clone() },
                ];
                check_with(&spec, &format!("{} [{}]", k.name, spec.describe_binding()), &mut t, &variants);
            }
        }
    }
    println!(
        "wgsl library: {n} specializations, {} shaders emitted+validated (6 option sets each), {} unsupported: i64, largest workgroup storage {} bytes ({})",
        t.ok,
        t.i64.len(),
        t.max_wg_bytes.0,
        t.max_wg_bytes.1
    );
    assert!(t.failures.is_empty(), "{} failures:\n{}", t.failures.len(), t.failures.join("\n\n"));
}

#[test]
fn conformance_kernels_validate() {
    let specs: Arc<Mutex<Vec<Kernel>>> = Arc::default();
    let s2 = specs.clone();
    ferrotile::runtime::set_specialization_observer(move |k| s2.lock().unwrap().push(k.clone()));
    let dev = Device::cpu();
    for c in ferrotile_tests::conformance::cases() {
        // outcomes are checked by conformance_cpu; here we only want the kernels
        let _ = ferrotile_tests::conformance::run_case(&c, &dev, 7);
    }
    let specs = specs.lock().unwrap().clone();
    assert!(specs.len() >= 20, "too few specializations captured: {}", specs.len());
    let mut t = Tally::default();
    for k in &specs {
        check(k, &format!("{} [{}]", k.name, k.describe_binding()), &mut t);
    }
    for s in &t.i64 {
        println!("unsupported: i64: {s}");
    }
    println!(
        "wgsl conformance: {} specializations, {} shaders emitted+validated (shader_f16 off and on), {} unsupported: i64, {} unsupported: ordering between programs, {} failures; largest workgroup storage {} bytes ({})",
        specs.len(),
        t.ok,
        t.i64.len(),
        t.ordering,
        t.failures.len(),
        t.max_wg_bytes.0,
        t.max_wg_bytes.1
    );
    assert!(t.failures.is_empty(), "{} failures:\n{}", t.failures.len(), t.failures.join("\n\n"));
}

#[test]
fn limits_are_clear_errors() {
    let k = ferrotile_kernels::softmax::softmax_row::ir();
    let spec = specialize(k, &[1024], &[DType::F32]).unwrap();
    let e = emit(&spec, &WgslOptions { max_workgroup_storage: 64, ..WgslOptions::default() }).unwrap_err();
    assert!(e.to_string().contains("softmax_row") && e.msg.contains("64 bytes") && e.msg.contains("max_workgroup_storage"), "{e}");
    let e = emit(&spec, &WgslOptions { workgroup_size: 96, ..WgslOptions::default() }).unwrap_err();
    assert!(e.msg.contains("workgroup_size"), "{e}");
    let generic = emit(k, &WgslOptions::default()).unwrap_err();
    assert!(generic.msg.contains("specialized"), "{generic}");
}

#[test]
fn gemm_kernel_validates() {
    let k = ferrotile_kernels::gemm::gemm_kernel::ir();
    let mut t = Tally::default();
    // constexprs: BM, BN, BK, GROUP_M, ACT, HAS_BIAS, TF32, VIEWS
    for (a, c, cx) in [
        (DType::F32, DType::F32, [32i64, 32, 16, 8, 0, 0, 0, 0]),
        (DType::F32, DType::F32, [32, 32, 16, 8, 2, 1, 1, 0]),
        (DType::BF16, DType::BF16, [32, 32, 16, 4, 1, 1, 0, 0]),
        (DType::F16, DType::F32, [16, 16, 16, 1, 0, 0, 0, 0]),
    ] {
        let spec = specialize(k, &cx, &[a, c]).unwrap();
        check(&spec, &format!("gemm_kernel [{}]", spec.describe_binding()), &mut t);
    }
    let r = ferrotile_kernels::gemm::gemm_splitk_reduce::ir();
    for u in [DType::F32, DType::BF16] {
        let spec = specialize(r, &[256, 2, 1], &[u]).unwrap();
        check(&spec, &format!("gemm_splitk_reduce [{}]", spec.describe_binding()), &mut t);
    }
    println!("wgsl gemm: {} shaders validated, largest workgroup storage {} bytes", t.ok, t.max_wg_bytes.0);
    assert!(t.failures.is_empty(), "{}", t.failures.join("\n\n"));
}

/// Loads and stores move whole `vec4`s exactly where the axis analysis
/// proves 4-element runs contiguous and 16-byte aligned: the row kernel with
/// strides divisible by 16 reads and writes `vec4<f32>`; with an unknown
/// input stride the input stays scalar (the output still vectorizes); a
/// 16-bit kernel never does.
#[test]
fn vec4_access_where_provable() {
    let k = ferrotile_kernels::softmax::softmax_row::ir();
    // params: x, y, n_cols, x_stride, y_stride
    let spec = specialize(k, &[4096], &[DType::F32]).unwrap();
    // (5 parameters, then the guard's two buffer lengths, divisible by 16)
    let all = WgslOptions { workgroup_size: 256, arg_div: vec![16; 7], ..WgslOptions::default() };
    let w = emit(&spec, &all).unwrap();
    validate(&w).unwrap();
    assert!(w.text.contains("b0: array<vec4<f32>>") && w.text.contains("b1: array<vec4<f32>>"), "{}", w.text);
    // 4096 elements over 256 invocations: 4 vec4 loads and 4 vec4 stores each
    assert_eq!(w.text.matches("= b0[").count(), 4, "{}", w.text);
    assert_eq!(w.text.matches(" >> 2u] = vec4<f32>(").count(), 4, "{}", w.text);
    let odd_x = WgslOptions { arg_div: vec![16, 16, 16, 1, 16, 16, 16], ..all.clone() };
    let w = emit(&spec, &odd_x).unwrap();
    validate(&w).unwrap();
    assert!(w.text.contains("b0: array<f32>") && w.text.contains("b1: array<vec4<f32>>"), "{}", w.text);
    let none = emit(&spec, &WgslOptions { workgroup_size: 256, ..WgslOptions::default() }).unwrap();
    assert!(!none.text.contains("vec4<f32>"), "{}", none.text);
    let half = specialize(k, &[4096], &[DType::BF16]).unwrap();
    let w = emit(&half, &all).unwrap();
    assert!(!w.text.contains("array<vec4"), "{}", w.text);
}
