//! A `max` and an `argmax` (a `min` and an `argmin`) of one tile along one
//! axis come out of one (value, index) reduction on both GPU backends
//! ([`ferrotile_backends::plan::reduce::siblings`]): the pair costs what
//! the `argmax` alone costs — the same barriers, the same shuffles. Their
//! results are checked on every backend by the conformance case `arg_nan`
//! (and `reduce_float` / `reduce_int`); here, what the pairing takes and
//! that it saves the second reduction.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::{specialize, Kernel, OpKind};
use ferrotile::kernel;
use ferrotile_backends::plan::reduce::siblings;
use ferrotile_backends::ptx::{emit as emit_ptx, PtxOptions};
use ferrotile_backends::wgsl::{emit as emit_wgsl, WgslOptions};

#[kernel]
pub fn max_then_argmax<const B: i32>(x: Ptr<f32>, mx: Ptr<f32>, am: Ptr<i32>, n: i32) {
    let c = arange(0, B);
    let v = load(x + program_id(0) * n + c, c < n, f32::NEG_INFINITY);
    store(mx + program_id(0), max(v, axis = 0));
    store(am + program_id(0), argmax(v, 0));
}

#[kernel]
pub fn argmin_then_min<const B: i32>(x: Ptr<f32>, mn: Ptr<f32>, am: Ptr<i32>, n: i32) {
    let c = arange(0, B);
    let v = load(x + program_id(0) * n + c, c < n, f32::NEG_INFINITY);
    store(am + program_id(0), argmin(v, 0));
    store(mn + program_id(0), min(v, axis = 0));
}

#[kernel]
pub fn argmax_alone<const B: i32>(x: Ptr<f32>, am: Ptr<i32>, n: i32) {
    let c = arange(0, B);
    let v = load(x + program_id(0) * n + c, c < n, f32::NEG_INFINITY);
    store(am + program_id(0), argmax(v, 0));
}

/// Not pairs: a `max` and an `argmin`; reductions along different axes; a
/// `max` of another tile.
#[kernel]
pub fn unrelated<const R: i32, const B: i32>(x: Ptr<f32>, out: Ptr<f32>, idx: Ptr<i32>) {
    let r = arange(0, R);
    let c = arange(0, B);
    let t = load(x + expand_dims(r, 1) * B + expand_dims(c, 0));
    store(out + r, max(t, axis = 1));
    store(idx + c, argmax(t, 0));
    store(idx + B + r, argmin(t, 1));
    store(out + R + c, max(t * 2.0, axis = 0));
}

fn spec(k: &'static Kernel, cx: &[i64]) -> Kernel {
    specialize(k, cx, &[]).unwrap()
}

/// Result values of the reductions of `k`, in walk order.
fn reductions(k: &Kernel) -> Vec<ferrotile::ir::V> {
    let mut out = vec![];
    k.walk(&mut |op| {
        if matches!(op.kind, OpKind::Reduce { .. }) {
            out.push(op.results[0]);
        }
    });
    out
}

#[test]
fn siblings_pair_a_max_with_the_argmax_of_its_tile_in_either_order() {
    for (k, cx) in [(max_then_argmax::ir(), vec![256]), (argmin_then_min::ir(), vec![256])] {
        let k = spec(k, &cx);
        let r = reductions(&k);
        let pairs = siblings(&k);
        assert_eq!(pairs.len(), 1, "{}: {pairs:?}", k.name);
        // the first emitted computes the other
        assert_eq!(pairs.get(&r[0]), Some(&r[1]), "{}", k.name);
    }
    let k = spec(unrelated::ir(), &[8, 32]);
    assert!(siblings(&k).is_empty(), "{:?}", siblings(&k));
}

#[test]
fn a_paired_max_costs_no_barrier_and_no_shuffle_more_than_the_argmax() {
    let count = |text: &str, what: &str| text.matches(what).count();
    for warps in [1u32, 4, 8] {
        let ptx = |k: &'static Kernel| {
            let k = spec(k, &[1024]);
            let o = PtxOptions { arg_div: vec![16; guarded_params(&k)], ..PtxOptions::new(90, warps, k.params.len()) };
            emit_ptx(&k, &o).unwrap().text
        };
        let (pair, alone) = (ptx(max_then_argmax::ir()), ptx(argmax_alone::ir()));
        for what in ["bar.sync", "shfl.sync"] {
            assert_eq!(count(&pair, what), count(&alone, what), "PTX, {warps} warps: {what}");
        }
        for subgroups in [false, true] {
            let wgsl = |k: &'static Kernel| {
                let k = spec(k, &[1024]);
                let o = WgslOptions { workgroup_size: 32 * warps, subgroups, ..WgslOptions::default() };
                emit_wgsl(&k, &o).unwrap().text
            };
            let (pair, alone) = (wgsl(max_then_argmax::ir()), wgsl(argmax_alone::ir()));
            for what in ["workgroupBarrier", "subgroupShuffleXor"] {
                assert_eq!(count(&pair, what), count(&alone, what), "WGSL, {warps} warps, subgroups {subgroups}: {what}");
            }
        }
    }
}
