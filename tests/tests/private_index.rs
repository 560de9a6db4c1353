//! Broadcast-only loads get index arithmetic of their own
//! (`ferrotile_ir::passes::private_index`): RMSNorm fused into a GEMM
//! (`k_norm_matmul`) loads its gain with the column offsets that also
//! address the matrix tile and mask the second operand's rows. After the
//! pass the gain's load reads offsets no other access reads, the kernel
//! verifies and computes bit-identical results on the CPU interpreter, and
//! the PTX backend with the backward slice rule computes the gain in the
//! broadcast's slice (no conversion through shared memory left on its
//! line); without the rule the pass does not run and nothing changes.

use ferrotile::__private::Arg;
use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::passes::private_index::private_index;
use ferrotile::ir::{specialize, verify::verify, DType, Kernel, OpKind, V};
use ferrotile::prelude::*;
use ferrotile::Device;
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_tests::conformance::fused::k_norm_matmul;
use std::collections::HashSet;

/// The tiles a load's pointer and mask are computed from, through
/// elementwise ops, `expand_dims` and broadcasts (down to `arange`s), in
/// `k` (splats of scalars, which every access may share, left out).
fn index_of(k: &Kernel, load: &OpKind) -> HashSet<V> {
    let mut defs = std::collections::HashMap::new();
    k.walk(&mut |op| {
        for &r in &op.results {
            defs.insert(r, op.kind.clone());
        }
    });
    let OpKind::Load { ptr, mask, .. } = load else { panic!("not a load") };
    let mut out = HashSet::new();
    let mut stack: Vec<V> = [*ptr].into_iter().chain(*mask).collect();
    while let Some(v) = stack.pop() {
        if k.ty(v).rank() == 0 || matches!(defs.get(&v), Some(OpKind::Splat { .. })) || !out.insert(v) {
            continue;
        }
        if let Some(kind) = defs.get(&v) {
            if kind.is_elementwise() || matches!(kind, OpKind::ExpandDims { .. } | OpKind::Broadcast { .. }) {
                stack.extend(kind.operands());
            }
        }
    }
    out
}

/// The second loop's loads: the gain (rank 1) and the two tiles (rank 2).
fn loop_loads(k: &Kernel) -> (OpKind, Vec<OpKind>) {
    let mut loops = vec![];
    k.walk(&mut |op| {
        if let OpKind::For { body, .. } = &op.kind {
            loops.push(
                body.ops.iter().filter(|o| matches!(o.kind, OpKind::Load { .. })).map(|o| (o.kind.clone(), k.ty(o.results[0]).rank())).collect::<Vec<_>>(),
            );
        }
    });
    let second = loops.pop().expect("two loops");
    let gain = second.iter().find(|(_, r)| *r == 1).expect("the gain's load").0.clone();
    (gain, second.into_iter().filter(|(_, r)| *r == 2).map(|(k, _)| k).collect())
}

#[test]
fn the_gain_gets_offsets_of_its_own() {
    let spec = specialize(k_norm_matmul::ir(), &[16, 16, 16], &[DType::F16]).unwrap();
    let (gain, tiles) = loop_loads(&spec);
    let shared = |k: &Kernel, gain: &OpKind, tiles: &[OpKind]| tiles.iter().any(|t| !index_of(k, gain).is_disjoint(&index_of(k, t)));
    assert!(shared(&spec, &gain, &tiles), "as written, the gain's offsets are the tiles' too");
    let mut k = spec.clone();
    assert!(private_index(&mut k), "the pass applies");
    verify(&k).unwrap();
    let (gain2, tiles2) = loop_loads(&k);
    assert!(!shared(&k, &gain2, &tiles2), "the gain's offsets are its own:\n{}", k.to_text());
    // a second run finds nothing more to do
    let mut again = k.clone();
    assert!(!private_index(&mut again));
    // bit-identical on the interpreter, tails in every dimension
    let dev = Device::cpu();
    let (m, n, kk) = (37usize, 21usize, 50usize);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut gen = |len: usize| -> Vec<f16> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                f16::from_f32(((seed >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0)
            })
            .collect()
    };
    let (x, g, w) = (gen(m * kk), gen(kk), gen(kk * n));
    let run = |k: &Kernel| -> Vec<u32> {
        let (xb, gb, wb) = (dev.from_slice(&x).unwrap(), dev.from_slice(&g).unwrap(), dev.from_slice(&w).unwrap());
        let mut y = dev.full(m * n, f32::NAN).unwrap();
        let args = vec![
            Arg::buffer(&xb),
            Arg::buffer(&gb),
            Arg::buffer(&wb),
            Arg::buffer_mut(&mut y),
            Arg::scalar(m as i32),
            Arg::scalar(n as i32),
            Arg::scalar(kk as i32),
            Arg::scalar(1e-5f32),
        ];
        ferrotile::runtime::run_interpreted(k, &dev, [m.div_ceil(16) as u32, n.div_ceil(16) as u32, 1], &args).unwrap();
        drop(args);
        y.to_vec().unwrap().iter().map(|v| v.to_bits()).collect()
    };
    let want = run(&spec);
    assert!(want.iter().all(|&b| f32::from_bits(b).is_finite()), "the reference wrote every output");
    assert_eq!(run(&k), want, "the copies compute what the originals did");
}

/// On PTX the backward slice rule (`broadcast_slices`) then computes the
/// gain in its broadcast's slice: the conversion through shared memory on
/// its line goes (the computed A operand's staging for the tensor cores
/// stays: another matter); with the rule off, as by default, the pass
/// does not run and the gain still goes through shared memory.
#[test]
fn ptx_computes_the_gain_in_its_slice() {
    let k = k_norm_matmul::ir();
    for (bm, bn, bk, warps, sm) in [(128i64, 128i64, 64i64, 8u32, 90u32), (64, 128, 64, 4, 90), (128, 128, 32, 4, 80)] {
        let spec = specialize(k, &[bm, bn, bk], &[DType::BF16]).unwrap();
        for slices in [false, true] {
            let o = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, broadcast_slices: slices, ..PtxOptions::new(sm, warps, k.params.len()) };
            let p = emit(&spec, &o).unwrap_or_else(|e| panic!("{bm}x{bn}x{bk} sm_{sm}: {e:?}"));
            let broadcasts = p.conversions.iter().filter(|(_, w)| w.contains("expanded to [1,")).count();
            assert_eq!(broadcasts, (!slices) as usize, "{bm}x{bn}x{bk} {warps} warps sm_{sm}, broadcast_slices {slices}: {:?}", p.conversions);
            if let Some(px) = ferrotile_backends::ptxas::find_or_skip() {
                let r = ferrotile_backends::ptxas::assemble(&px, &p.text, sm).unwrap_or_else(|e| panic!("ptxas: {e}"));
                assert_eq!(r.spill_stores, 0, "{bm}x{bn}x{bk} sm_{sm} slices {slices} spills:\n{}", r.log);
            }
        }
    }
}
