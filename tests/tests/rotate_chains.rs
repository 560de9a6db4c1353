//! Chained dots rotated by one iteration (`ferrotile_ir::passes::rotate_chains`):
//! the attention loop a user writes the Triton tutorial's way is rotated
//! (the chained P·V dot of the previous key block issued right after this
//! block's Q·Kᵀ, before the softmax), the rotated kernel verifies and
//! computes bit-identical results on the CPU interpreter — causal and not,
//! lengths that are not multiples of the block, one key block — and so
//! does a two-dot chain whose loop runs zero, one or several times; loops
//! without a chain (a GEMM's K loop, the hand-rotated attention) are left
//! alone, and so are the attention backward's loops, whose chained dots
//! read tiles the rest of the body reads too.

use ferrotile::__private::Arg;
use ferrotile::ir::passes::rotate_chains::{count, rotate_chains};
use ferrotile::ir::{specialize, verify::verify, DType, Kernel, OpKind};
use ferrotile::prelude::*;
use ferrotile::Device;

/// `acc = 1 + Σ_j dot(exp(dot(a_j, b_j)·0.1) as T, c_j, acc·0.5)` over
/// `steps` blocks of `BK` columns of `a` (`[m, steps·BK]`), `b`
/// (`[steps·BK, BK]`) and `c` (`[steps·BK, BN]`), every `st`-th block (a
/// run-time step: one ≤ 0 runs no iterations).
#[kernel]
pub fn chain2<T: Float, const BM: i32, const BK: i32, const BN: i32>(a: Ptr<T>, b: Ptr<T>, c: Ptr<T>, o: Ptr<f32>, m: i32, steps: i32, st: i32) {
    let rm = program_id(0) * BM + arange(0, BM);
    let rk = arange(0, BK);
    let rn = arange(0, BN);
    let kk = steps * BK;
    let m_ok = expand_dims(rm < m, 1);
    let mut acc = full([BM, BN], 1.0, f32);
    for j in (0..steps).step_by(st) {
        let cols = j * BK + rk;
        let at = load(a + expand_dims(rm * kk, 1) + expand_dims(cols, 0), m_ok, 0.0);
        let bt = load(b + expand_dims(cols * BK, 1) + expand_dims(rk, 0));
        let ct = load(c + expand_dims(cols * BN, 1) + expand_dims(rn, 0));
        let s = dot(at, bt, zeros([BM, BK], f32));
        let p = exp(s * 0.1) as T;
        acc = dot(p, ct, acc * 0.5);
    }
    store(o + expand_dims(rm * BN, 1) + expand_dims(rn, 0), acc, m_ok);
}

fn rotated(k: &Kernel) -> Kernel {
    let mut r = k.clone();
    assert_eq!(count(k, &|_| true), 1, "one loop qualifies:\n{}", k.to_text());
    assert_eq!(rotate_chains(&mut r, &|_| true), 1);
    verify(&r).unwrap_or_else(|e| panic!("does not verify: {e:?}\n{}", r.to_text()));
    assert_eq!(count(&r, &|_| true), 0, "a rotated loop does not qualify again");
    r
}

/// The rotated loop's body: the dots in order, and where the first
/// reduction or elementwise op on the first dot's result sits.
fn body_order(k: &Kernel) -> Vec<&'static str> {
    let mut out = vec![];
    k.walk(&mut |op| {
        if let OpKind::For { body, .. } = &op.kind {
            out = body
                .ops
                .iter()
                .filter_map(|o| match o.kind {
                    OpKind::Dot { .. } => Some("dot"),
                    OpKind::Reduce { .. } => Some("reduce"),
                    OpKind::Unary { .. } => Some("unary"),
                    _ => None,
                })
                .collect();
        }
    });
    out
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn attention_in_the_tutorial_form_is_rotated_and_unchanged() {
    let f = ferrotile_tests::conformance::fused::k_attention::ir();
    let dev = Device::cpu();
    let (bm, bn, d, h) = (16usize, 16usize, 32usize, 2usize);
    for causal in [false, true] {
        let spec = specialize(f, &[bm as i64, bn as i64, d as i64, causal as i64], &[DType::BF16]).unwrap();
        let rot = rotated(&spec);
        if std::env::var("ROT_DUMP").is_ok() {
            println!("{}", rot.to_text());
        }
        let order = body_order(&rot);
        // Q·Kᵀ, then the previous block's P·V, then the softmax
        assert_eq!(&order[..2], &["dot", "dot"], "the chained dot right after the first: {order:?}\n{}", rot.to_text());
        for n in [1usize, 16, 23, 40] {
            let len = h * n * d;
            let mut seed = 0x9e37_79b9u64 ^ (n as u64);
            let mut gen = || -> Vec<bf16> {
                (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        bf16::from_f32(((seed >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0)
                    })
                    .collect()
            };
            let (q, kk, v) = (gen(), gen(), gen());
            let run = |k: &Kernel| -> Vec<f32> {
                let (qb, kb, vb) = (dev.from_slice(&q).unwrap(), dev.from_slice(&kk).unwrap(), dev.from_slice(&v).unwrap());
                let mut o = dev.full(len, bf16::NAN).unwrap();
                let args = vec![Arg::buffer(&qb), Arg::buffer(&kb), Arg::buffer(&vb), Arg::buffer_mut(&mut o), Arg::scalar(n as i32), Arg::scalar(0.25f32)];
                ferrotile::runtime::run_interpreted(k, &dev, [n.div_ceil(bm) as u32, h as u32, 1], &args).unwrap();
                drop(args);
                o.to_vec().unwrap().iter().map(|x| x.to_f32()).collect()
            };
            let (want, got) = (run(&spec), run(&rot));
            assert!(want.iter().all(|x| x.is_finite()), "n {n}: the reference wrote every output");
            assert_eq!(bits(&got), bits(&want), "causal {causal} n {n}: the rotated loop computes what the loop did");
        }
    }
}

#[test]
fn two_dot_chain_runs_zero_one_or_many_times() {
    let dev = Device::cpu();
    let (bm, bk, bn) = (16usize, 16usize, 32usize);
    let spec = specialize(chain2::ir(), &[bm as i64, bk as i64, bn as i64], &[DType::F16]).unwrap();
    let rot = rotated(&spec);
    let m = 21usize;
    for steps in [0usize, 1, 2, 5] {
        let kk = steps * bk;
        let mut x = 1u32;
        let mut gen = |len: usize| -> Vec<f16> {
            (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    f16::from_f32(((x >> 16) % 64) as f32 / 64.0 - 0.5)
                })
                .collect()
        };
        let (a, b, c) = (gen(m * kk), gen(kk * bk), gen(kk * bn));
        let run = |k: &Kernel| -> Vec<f32> {
            // (one element at least: a zero-length buffer cannot be allocated)
            let up = |v: &[f16]| dev.from_slice(if v.is_empty() { &[f16::ZERO][..] } else { v }).unwrap();
            let (ab, bb, cb) = (up(&a), up(&b), up(&c));
            let mut o = dev.full(m * bn, f32::NAN).unwrap();
            let args = vec![
                Arg::buffer(&ab),
                Arg::buffer(&bb),
                Arg::buffer(&cb),
                Arg::buffer_mut(&mut o),
                Arg::scalar(m as i32),
                Arg::scalar(steps as i32),
                Arg::scalar(1i32),
            ];
            ferrotile::runtime::run_interpreted(k, &dev, [m.div_ceil(bm) as u32, 1, 1], &args).unwrap();
            drop(args);
            o.to_vec().unwrap()
        };
        let (want, got) = (run(&spec), run(&rot));
        if steps == 0 {
            assert!(want.iter().all(|&v| v == 1.0), "no iterations: the initial accumulator");
        }
        assert_eq!(bits(&got), bits(&want), "{steps} steps: the rotated loop computes what the loop did");
    }
}

#[test]
fn loops_without_a_chain_are_left_alone() {
    let g = ferrotile_kernels::gemm::gemm_kernel::ir();
    let spec = specialize(g, &[32, 16, 16, 2, 0, 0, 0, 0], &[DType::BF16, DType::F32]).unwrap();
    assert_eq!(count(&spec, &|_| true), 0, "a GEMM's K loop has one dot");
    // the library's forward is rotated by hand already: its P·V reads the
    // carried P of the previous block, not a dot of this iteration
    let f = ferrotile_kernels::attention::attention_fwd_overlap::ir();
    let spec = specialize(f, &[64, 32, 64, 1, 1, 0, 1, 1], &[DType::BF16]).unwrap();
    assert_eq!(count(&spec, &|_| true), 0, "the hand-rotated loop");
    // the backward's loops read Q, dO (dK/dV) and K (dQ) in both of their
    // dots' chains: rotated, each would be loaded twice per iteration
    use ferrotile_kernels::attention::{attention_bwd_dkdv, attention_bwd_dq};
    let dkdv = specialize(attention_bwd_dkdv::ir(), &[64, 64, 64, 1, 0, 0, 0, 0], &[DType::BF16]).unwrap();
    let dq = specialize(attention_bwd_dq::ir(), &[64, 64, 64, 1, 0, 0], &[DType::BF16]).unwrap();
    assert_eq!((count(&dkdv, &|_| true), count(&dq, &|_| true)), (0, 0), "tiles read by both stages");
    // the library's forward in source order (`OV = 0`) is rotated
    let fwd = specialize(ferrotile_kernels::attention::attention_fwd::ir(), &[128, 64, 64, 1, 1, 0, 1, 1], &[DType::BF16]).unwrap();
    assert_eq!(count(&fwd, &|_| true), 1);
    // and only chains the caller accepts (the PTX backend: those on `wgmma`)
    assert_eq!(count(&fwd, &|_| false), 0);
}

/// The PTX backend rotates a chain only where its dots run on `wgmma`
/// (asynchronous): the user's attention on sm_90 (and ptxas assembles
/// it, when a ptxas is configured), not on sm_80, whose `mma.sync` is
/// synchronous; with the option off, nothing.
#[test]
fn ptx_rotates_only_wgmma_chains() {
    use ferrotile::ir::passes::guard::guarded_params;
    use ferrotile_backends::ptx::{emit, PtxOptions};
    let f = ferrotile_tests::conformance::fused::k_attention::ir();
    for causal in [0, 1] {
        let spec = specialize(f, &[128, 64, 64, causal], &[DType::BF16]).unwrap();
        for (sm, on, want) in [(90, true, 1), (80, true, 0), (90, false, 0)] {
            let o = PtxOptions { arg_div: vec![16; guarded_params(f)], pipeline: 1, tma: true, rotate_chains: on, ..PtxOptions::new(sm, 4, f.params.len()) };
            let p = emit(&spec, &o).unwrap_or_else(|e| panic!("sm_{sm}: {e:?}"));
            assert_eq!(p.rotated_loops, want, "sm_{sm}, rotate_chains {on}");
            if want == 1 {
                if let Some(ptxas) = ferrotile_backends::ptxas::find_or_skip() {
                    let r = ferrotile_backends::ptxas::assemble(&ptxas, &p.text, 90).unwrap_or_else(|e| panic!("ptxas: {e}"));
                    assert_eq!(r.spill_stores, 0, "the rotated 128×64 d64 tile spills nothing:\n{}", r.log);
                }
            }
        }
    }
}

/// A checked launch counts faults with `atomic_add`s beside each access in
/// the loop; they are no reason to leave the loop alone (they stay with
/// the access they count, in its iteration), and every load the rotated
/// loop issues is still guarded.
#[test]
fn checked_launches_rotate_too() {
    use ferrotile::ir::passes::guard::guard;
    use ferrotile::ir::passes::Safety;
    let mut spec = specialize(chain2::ir(), &[16, 16, 32], &[DType::F16]).unwrap();
    guard(&mut spec, Safety::Checked, &|_| false, true);
    let counts = |k: &Kernel| {
        let mut n = 0;
        k.walk(&mut |op| {
            if let OpKind::For { body, .. } = &op.kind {
                n = body.ops.iter().filter(|o| matches!(o.kind, OpKind::AtomicAdd { .. })).count();
            }
        });
        n
    };
    assert_eq!(counts(&spec), 3, "the loop counts the faults of its three loads");
    let rot = rotated(&spec);
    assert_eq!(counts(&rot), 3, "and still does, rotated");
    // every load of the kernel has a mask (the guard's)
    let mut unmasked = 0;
    rot.walk(&mut |op| unmasked += matches!(op.kind, OpKind::Load { mask: None, .. }) as u32);
    assert_eq!(unmasked, 0);
}

/// `chain2` with run-time steps ≤ 0 runs no iterations, rotated or not
/// (no prologue either).
#[test]
fn steps_that_are_not_positive_run_nothing() {
    let dev = Device::cpu();
    let (bm, bk, bn) = (16usize, 16usize, 16usize);
    let spec = specialize(chain2::ir(), &[bm as i64, bk as i64, bn as i64], &[DType::F16]).unwrap();
    let rot = rotated(&spec);
    let (m, steps) = (16usize, 3usize);
    let kk = steps * bk;
    let a = vec![f16::from_f32(0.25); m * kk];
    let b = vec![f16::from_f32(0.5); kk * bk];
    let c = vec![f16::from_f32(1.0); kk * bn];
    for st in [-1i32, 0, 1, 2] {
        let run = |k: &Kernel| -> Vec<f32> {
            let (ab, bb, cb) = (dev.from_slice(&a).unwrap(), dev.from_slice(&b).unwrap(), dev.from_slice(&c).unwrap());
            let mut o = dev.full(m * bn, f32::NAN).unwrap();
            let args = vec![
                Arg::buffer(&ab),
                Arg::buffer(&bb),
                Arg::buffer(&cb),
                Arg::buffer_mut(&mut o),
                Arg::scalar(m as i32),
                Arg::scalar(steps as i32),
                Arg::scalar(st),
            ];
            ferrotile::runtime::run_interpreted(k, &dev, [1, 1, 1], &args).unwrap();
            drop(args);
            o.to_vec().unwrap()
        };
        let (want, got) = (run(&spec), run(&rot));
        if st <= 0 {
            assert!(want.iter().all(|&v| v == 1.0), "step {st}: no iterations");
        } else {
            assert!(want.iter().all(|&v| v != 1.0), "step {st}: some iterations");
        }
        assert_eq!(bits(&got), bits(&want), "step {st}");
    }
}
