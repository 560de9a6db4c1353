//! Fuzzing the specializer, the passes, the interpreter and both emitters:
//! random kernels built through the IR builder (random chains of elementwise
//! ops, casts, reductions, scans, 2-D broadcasts, loops, masked loads with
//! and without `other`, atomics) are specialized, run on the interpreter
//! with buffers too short as often as not (safe and checked launches),
//! emitted as PTX (sm_80 / sm_90; unchecked, safe, checked) and WGSL, the
//! WGSL validated by naga and some PTX assembled by `ptxas` where it is
//! installed. Every failure must be an error value: a panic anywhere, PTX
//! that `ptxas` rejects or WGSL that naga rejects fails the test, printing
//! the seed (`FERROTILE_FUZZ_SEED` reproduces a run; `FERROTILE_FUZZ_N`
//! sets the number of kernels, default 120).

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::passes::Safety;
use ferrotile::ir::*;
use ferrotile::runtime::{launch, Arg};
use ferrotile::{Device, LaunchConfig};
use ferrotile_backends::ptx::{self, PtxOptions};
use ferrotile_backends::{ptxas, wgsl};
use ferrotile_kernels::reference::Rng;

/// A random kernel `fuzz(x: Ptr<f32>, y: Ptr<f32>, c: Ptr<i32>, n: i32)`
/// over one tile of `b` elements per program; `None` when the builder
/// refused its first steps (every later refusal just skips that op).
fn gen(rng: &mut Rng, b: i64) -> Option<Kernel> {
    let p = |name: &str, kind, written| Param { name: name.into(), kind, written };
    let params = vec![
        p("x", ParamKind::Ptr(DType::F32), false),
        p("y", ParamKind::Ptr(DType::F32), true),
        p("c", ParamKind::Ptr(DType::I32), true),
        p("n", ParamKind::Scalar(DType::I32), false),
    ];
    let mut k = Builder::new("fuzz", "fuzz.rs", params, vec![], vec![]);
    let (x, y, c, n) = (k.param(0), k.param(1), k.param(2), k.param(3));
    let pid = k.program_id(0).ok()?;
    let bs = k.const_int(b, Some(DType::I32)).ok()?;
    let base = k.binary(BinOp::Mul, pid, bs).ok()?;
    let ar = k.arange(CExpr::Lit(0), CExpr::Lit(b)).ok()?;
    let offs = k.binary(BinOp::Add, base, ar).ok()?;
    let mask = k.cmp(CmpOp::Lt, offs, n).ok()?;
    let xp = k.binary(BinOp::Add, x, offs).ok()?;
    let v0 = match rng.below(3) {
        0 => k.load(xp, None, None).ok()?,
        1 => k.load(xp, Some(mask), None).ok()?,
        _ => {
            let o = k.const_float(rng.pick(&[0.0, -1.5, f64::NEG_INFINITY]), None);
            k.load(xp, Some(mask), Some(o)).ok()?
        }
    };
    let mut vals = vec![v0];
    for _ in 0..1 + rng.below(12) {
        let a = vals[rng.below(vals.len() as u64) as usize];
        let other = vals[rng.below(vals.len() as u64) as usize];
        let r = match rng.below(11) {
            0 => k.unary(
                rng.pick(&[UnOp::Exp, UnOp::Log, UnOp::Sqrt, UnOp::Abs, UnOp::Neg, UnOp::Tanh, UnOp::Sigmoid, UnOp::Erf, UnOp::Floor, UnOp::Round, UnOp::Sin]),
                a,
            ),
            1 | 2 => k.binary(rng.pick(&[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div, BinOp::Max, BinOp::Min]), a, other),
            3 => {
                let cst = k.const_float(rng.pick(&[0.5, 2.0, -3.0, 1e30]), None);
                k.binary(rng.pick(&[BinOp::Add, BinOp::Mul, BinOp::Max]), a, cst)
            }
            4 => k.cmp(rng.pick(&[CmpOp::Lt, CmpOp::Ge, CmpOp::Eq]), a, other).and_then(|m| k.select(m, a, other)),
            5 => {
                let d = rng.pick(&[DType::F16, DType::BF16, DType::I32, DType::I8, DType::U32]);
                k.cast(a, d).and_then(|t| k.cast(t, DType::F32))
            }
            6 => k.reduce(rng.pick(&[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min]), a, 0).and_then(|s| k.binary(BinOp::Sub, a, s)),
            7 => k.scan(ScanOp::Cumsum, a, 0),
            8 => {
                // a 2-D detour: [b] → [b, 2] → reduce along axis 1 → [b]
                let e = k.expand_dims(a, 1);
                e.and_then(|e| k.broadcast_to(e, &[CExpr::Lit(b), CExpr::Lit(2)])).and_then(|t| k.reduce(rng.pick(&[ReduceOp::Sum, ReduceOp::Max]), t, 1))
            }
            9 => {
                // a loop carrying a tile: acc = acc * 0.5 + a, lo..hi from n
                let (lo, hi) = (k.const_int(0, None), k.const_int(rng.int(0, 4), None));
                match (lo, hi) {
                    (Ok(lo), Ok(hi)) => {
                        let one = k.const_int(1, None).ok()?;
                        k.begin_for(lo, hi, one, &[a]).and_then(|(_, carried)| {
                            let h = k.const_float(0.5, None);
                            let t = k.binary(BinOp::Mul, carried[0], h)?;
                            let t = k.binary(BinOp::Add, t, a)?;
                            Ok(k.end_for(vec![t])?[0])
                        })
                    }
                    _ => continue,
                }
            }
            _ => {
                let cp = k.binary(BinOp::Add, c, offs).ok()?;
                let iv = k.cast(a, DType::I32).ok()?;
                let m = if rng.chance(0.5) { Some(mask) } else { None };
                let _ = k.atomic_add(cp, iv, m, MemSem::Relaxed);
                continue;
            }
        };
        if let Ok(r) = r {
            if k.ty(r).shape().len() == 1 && k.ty(r).dtype() == Some(DType::F32) {
                vals.push(r);
            }
        }
    }
    let out = *vals.last()?;
    let yp = k.binary(BinOp::Add, y, offs).ok()?;
    let m = if rng.chance(0.7) { Some(mask) } else { None };
    k.store(yp, out, m).ok()?;
    Some(k.finish())
}

/// Everything one kernel goes through; `Err` names the first failure.
fn exercise(rng: &mut Rng, k: &'static Kernel, b: i64, px: Option<&std::path::Path>, assemble: bool, stats: &mut [usize; 4]) -> Result<(), String> {
    let spec = match specialize(k, &[], &[]) {
        Ok(s) => s,
        Err(e) => return Err(format!("a kernel the builder accepted fails to specialize: {e}")),
    };
    stats[0] += 1;
    let dev = Device::cpu();
    let grid = 1 + rng.below(3) as u32;
    let total = grid as usize * b as usize;
    let n = rng.below(total as u64 + 8) as usize;
    let xlen = if rng.chance(0.5) { total } else { rng.below(total as u64 + 1) as usize };
    let x = dev.from_slice(&(0..xlen).map(|i| i as f32 * 0.25 - 3.0).collect::<Vec<f32>>()).map_err(|e| e.to_string())?;
    let mut y = dev.zeros::<f32>(if rng.chance(0.5) { total } else { n.min(total) }).map_err(|e| e.to_string())?;
    let mut c = dev.zeros::<i32>(total).map_err(|e| e.to_string())?;
    for checked in [false, true] {
        let cfg = LaunchConfig::from(grid).checked(checked);
        let mut args = [Arg::buffer(&x), Arg::buffer_mut(&mut y), Arg::buffer_mut(&mut c), Arg::scalar(n as i32)];
        // (an error is fine: a fault in a checked launch, say; a panic is not)
        let _ = launch(k, &dev, cfg, &mut args, &[], &[]);
    }
    for sm in [80, 90] {
        for safety in [Safety::Unchecked, Safety::Safe, Safety::Checked] {
            let o =
                PtxOptions { arg_div: vec![if rng.chance(0.5) { 16 } else { 1 }; guarded_params(&spec)], safety, ..PtxOptions::new(sm, 4, spec.params.len()) };
            // (an emitter error is a value; only what it emits must assemble)
            if let Ok(p) = ptx::emit(&spec, &o) {
                stats[1] += 1;
                if let (Some(px), true) = (px, assemble && safety == Safety::Safe) {
                    ptxas::assemble(px, &p.text, sm).map_err(|e| format!("ptxas sm_{sm}: {}", e.lines().take(4).collect::<Vec<_>>().join(" | ")))?;
                    stats[2] += 1;
                }
            }
        }
    }
    for safety in [Safety::Unchecked, Safety::Safe, Safety::Checked] {
        let o = wgsl::WgslOptions { safety, ..Default::default() };
        if let Ok(w) = wgsl::emit(&spec, &o) {
            stats[3] += 1;
            wgsl::validate::validate(&w).map_err(|e| format!("naga ({safety:?}): {}", e.lines().take(4).collect::<Vec<_>>().join(" | ")))?;
        }
    }
    Ok(())
}

#[test]
fn random_kernels_never_panic() {
    let seed = std::env::var("FERROTILE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| Rng::from_time().1);
    let count: usize = std::env::var("FERROTILE_FUZZ_N").ok().and_then(|s| s.parse().ok()).unwrap_or(120);
    eprintln!("fuzz seed {seed} (FERROTILE_FUZZ_SEED={seed} reproduces it), {count} kernels");
    let px = ptxas::find_or_skip();
    let mut rng = Rng::new(seed);
    let (mut built, mut failures, mut stats) = (0, vec![], [0usize; 4]);
    for i in 0..count {
        let b = rng.pick(&[1i64, 2, 8, 32, 128, 256]);
        let Some(k) = gen(&mut rng, b) else { continue };
        built += 1;
        let text = k.to_text();
        let k: &'static Kernel = Box::leak(Box::new(k));
        // (ptxas takes a moment: assemble every fourth kernel)
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exercise(&mut rng, k, b, px.as_deref(), i % 4 == 0, &mut stats)));
        let r = r.unwrap_or_else(|p| {
            Err(format!("PANIC: {}", p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()))
        });
        if let Err(e) = r {
            failures.push(format!("kernel {i} (B={b}): {e}\n{text}"));
        }
    }
    eprintln!("{built} kernels built, {} specialized, {} PTX emitted ({} assembled), {} WGSL validated", stats[0], stats[1], stats[2], stats[3]);
    assert!(built >= count / 2, "only {built} of {count} random kernels built");
    assert!(failures.is_empty(), "seed {seed}: {} of {built} kernels failed:\n{}", failures.len(), failures.join("\n\n"));
}
