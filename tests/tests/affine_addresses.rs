//! Affine addresses (`PtxOptions::affine_addresses`): a pointer tile's
//! per-element constants as address immediates.
//!
//! The attention backward's one pass adds `dQᵀ` (32 elements a thread, a
//! step) by atomics at `dqrow + rows·DP + d`: every element's address is
//! one root plus a constant byte offset, so the atomics read one address
//! register with immediates instead of 32 computed addresses (an `IMAD`, a
//! `LEA` and a `LEA.HI.X` each, and 64 registers) — and the kernel's
//! registers drop. The facts are exact modulo the register width except
//! at a 32-bit offset's extension (`docs/semantics.md`, "Pointer
//! offsets"); results are checked on CUDA by the conformance suite and the
//! library's tests with `FERROTILE_AFFINE_ADDRESSES=1`. Here: the code,
//! and that ptxas accepts it with fewer registers and no spills.

use ferrotile::ir::passes::guard::guarded_params;
use ferrotile::ir::passes::Safety;
use ferrotile::ir::{specialize, DType};
use ferrotile_backends::ptx::{emit, PtxOptions};
use ferrotile_backends::ptxas;
use std::collections::BTreeSet;

/// The register and immediate of each `red.global` address.
fn red_addresses(text: &str) -> Vec<(String, i64)> {
    text.lines()
        .filter(|l| l.contains("red.global.add.f32") && !l.trim_start().starts_with('@'))
        .map(|l| {
            let a = &l[l.find('[').unwrap() + 1..l.find(']').unwrap()];
            match a.split_once('+') {
                Some((r, c)) => (r.to_string(), c.parse().unwrap()),
                None => (a.to_string(), 0),
            }
        })
        .collect()
}

#[test]
fn one_pass_dq_atomics_share_one_address_register() {
    let k = ferrotile_kernels::attention::attention_bwd_dkdv::ir();
    // BM, BN, DP, G, MASK_HI, MASK_LO, ACC, DQ
    for (consts, warps) in [([32, 64, 128, 1, 0, 0, 0, 1], 4), ([64, 64, 128, 1, 0, 0, 0, 1], 4), ([64, 128, 128, 1, 0, 0, 0, 1], 8)] {
        let spec = specialize(k, &consts, &[DType::BF16]).unwrap();
        let off = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 1, safety: Safety::Unchecked, ..PtxOptions::new(90, warps, k.params.len()) };
        let on = PtxOptions { affine_addresses: true, ..off.clone() };
        let (p0, p1) = (emit(&spec, &off).unwrap(), emit(&spec, &on).unwrap());
        assert_eq!(p0.affine_addresses, 0);
        let (a0, a1) = (red_addresses(&p0.text), red_addresses(&p1.text));
        assert_eq!(a0.len(), a1.len());
        // off: one address register per element
        assert_eq!(a0.iter().map(|a| &a.0).collect::<BTreeSet<_>>().len(), a0.len(), "{consts:?} off");
        // on: one register, distinct 4-byte-aligned offsets: the element
        // (d, row) of a thread at (d_t + d_r, row_t + row_r) is
        // 4·((row_r·DP + d_r)) bytes past the thread's first
        assert_eq!(a1.iter().map(|a| &a.0).collect::<BTreeSet<_>>().len(), 1, "{consts:?} on: {a1:?}");
        let offs: BTreeSet<i64> = a1.iter().map(|a| a.1).collect();
        assert_eq!(offs.len(), a1.len(), "{consts:?}: distinct offsets");
        assert!(offs.iter().all(|c| c % 4 == 0 && *c >= 0 && *c < 4 * 128 * consts[0]), "{consts:?}: {offs:?}");
        assert!(p1.affine_addresses as usize >= a1.len());
        if let Some(px) = ptxas::find_or_skip() {
            let r0 = ptxas::assemble(&px, &p0.text, 90).unwrap();
            let r1 = ptxas::assemble(&px, &p1.text, 90).unwrap();
            assert_eq!(r1.spill_loads + r1.spill_stores, 0, "{consts:?}: spills ({} registers)", r1.registers);
            assert!(r1.registers < r0.registers, "{consts:?}: {} registers with, {} without", r1.registers, r0.registers);
        }
    }
}

/// A pointer tile advanced in a loop: the carried registers have no facts
/// (each iteration's address is the carried register, not the root of the
/// tile it started from), and a tile computed in the body from the
/// induction variable gets its root in the body.
#[test]
fn loop_carried_pointers_keep_their_registers() {
    let k = ferrotile_kernels::quant::wq_gemv_kernel::ir();
    // BN, BK, BITS, GROUP, HAS_ZEROS, SPLIT, HAS_BIAS, ACT
    let spec = specialize(k, &[128, 64, 4, 128, 1, 1, 0, 0], &[DType::BF16]).unwrap();
    let off = PtxOptions { arg_div: vec![16; guarded_params(k)], pipeline: 2, pipeline_every_loop: true, ..PtxOptions::new(90, 4, k.params.len()) };
    let on = PtxOptions { affine_addresses: true, ..off.clone() };
    let (p0, p1) = (emit(&spec, &off).unwrap(), emit(&spec, &on).unwrap());
    // (the same accesses: as many loads and stores of each width)
    let count = |t: &str, w: &str| t.lines().filter(|l| l.contains(w)).count();
    for w in ["ld.global", "st.global", "red.global", "atom.global", "cp.async"] {
        assert_eq!(count(&p0.text, w), count(&p1.text, w), "{w}");
    }
    assert!(p1.affine_addresses > 0, "some access at a root plus an immediate");
    // every root an address is printed at is defined before it is read
    // (roots dominate: here, textually first in straight-line order or in
    // an enclosing block)
    for l in p1.text.lines().filter(|l| l.contains("+") && (l.contains("ld.global") || l.contains("st.global"))) {
        let a = &l[l.find('[').unwrap() + 1..l.find(']').unwrap()];
        let root = a.split_once('+').map_or(a, |x| x.0);
        let first_def = p1.text.lines().position(|x| x.split_whitespace().nth(1).is_some_and(|d| d.trim_end_matches(',') == root));
        let use_at = p1.text.lines().position(|x| x == l).unwrap();
        assert!(first_def.is_some_and(|d| d < use_at), "{root} read at line {use_at} before it is defined");
    }
    if let Some(px) = ptxas::find_or_skip() {
        let r = ptxas::assemble(&px, &p1.text, 90).unwrap();
        assert_eq!(r.spill_loads + r.spill_stores, 0, "spills ({} registers)", r.registers);
    }
}
