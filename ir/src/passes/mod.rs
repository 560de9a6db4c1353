//! IR → IR passes, one per file, and the pass list of every target.
//!
//! Each pass takes a specialized kernel and returns one with the same
//! observable behaviour (checked on the CPU interpreter: `tests/tests/`
//! `pipeline.rs`, `lower_views.rs`, `conformance_cpu_pipelined.rs`):
//!
//! - [`dce`]: removes ops whose results are never used (run by the
//!   specializer after constexpr folding, for every target);
//! - [`proven_masks`]: comparisons `arange < n` that the launch's
//!   arguments prove true on every element become `true`, and the selects
//!   and masks they fed go;
//! - [`guard`]: memory safety — the buffers' lengths become hidden
//!   parameters and every access is guarded by them; in checked launches,
//!   faults are counted for the host to report;
//! - [`lower_views`]: `load_block` / `store_block` of views as masked
//!   pointer `load` / `store`, except the block loads the caller keeps;
//! - [`private_index`]: a loaded vector only ever broadcast (a bias, a
//!   gain) gets its own copy of the index arithmetic it shares with other
//!   accesses, so the backends can compute it in the broadcast's slice
//!   layout;
//! - [`split_masks`]: a `dot` loop whose last iterations are masked runs
//!   as two loops, the first with the masks known true;
//! - [`branch_masks`]: in such a loop (one loop), the selects only the
//!   last iterations can fail run under a branch on the induction variable;
//! - [`rotate_chains`]: a loop whose carried-accumulator `dot` consumes
//!   another `dot`'s result of the same iteration is rotated by one
//!   iteration, so the chained dot runs under the next iteration's
//!   elementwise work;
//! - [`pipeline`]: software pipelining of the loads of loops that feed
//!   `dot` (prefetch `depth` iterations ahead);
//! - [`remat_widened`]: a tile widened from narrower ones (`x as f32` of a
//!   16-bit load) is recomputed after a reduction instead of held across it.
//!
//! # The pass list per target
//!
//! Written here once; the backends and the interpreter call [`run`] with
//! the options of their target and never call a pass themselves.
//!
//! | target | after `specialize` (fold, `dce`, verify) |
//! |---|---|
//! | CPU interpreter | [`guard`] (with `FERROTILE_INTERP_PIPELINE=1`: [`proven_masks`] with the launch's arguments first, then [`guard`] → [`private_index`] → [`split_masks`] (where the launch asks, or `FERROTILE_SPLIT_MASKS=1`) → [`branch_masks`] → [`rotate_chains`] → [`dce`] → [`pipeline`] at `num_stages − 1` → [`dce`] → [`remat_widened`], to check the rewrites the GPU runs) |
//! | PTX | [`proven_masks`] (the bounds the launch proved: `PtxOptions::proven_masks`) → [`dce`] → [`guard`] (leaving the views of TMA copies to the host's check) → [`lower_views`] (keeping the block loads a TMA copy serves, which the backend picks) → [`private_index`] (where the backward slice rule is on: `PtxOptions::broadcast_slices`) → [`split_masks`] (opt-in: `PtxOptions::split_masks`) → [`branch_masks`] (`PtxOptions::branch_masks`, on by default) → [`rotate_chains`] (opt-in: `PtxOptions::rotate_chains`) → [`dce`] → [`pipeline`] at `num_stages − 1` → [`dce`] (the replaced loads' address arithmetic, the simplified masks) → [`remat_widened`] |
//! | WGSL | [`guard`] (the emitter lowers block accesses itself; no pipelining; no [`remat_widened`]: not measured there, and the WGSL compilers allocate registers their own way; no [`private_index`]: on the conformance kernels it would apply to, it removed no barrier there and only added code) |
//!
//! [`guard`] does nothing for `launch_unchecked` ([`guard::Safety::Unchecked`]).
//!
//! [`PassOptions::ptx`], [`PassOptions::interpreter`] and
//! [`PassOptions::wgsl`] build each row.

pub mod branch_masks;
mod build;
pub mod dce;
pub mod guard;
pub mod lower_views;
pub mod pipeline;
pub mod private_index;
pub mod proven_masks;
pub mod remat_widened;
pub mod rotate_chains;
pub mod split_masks;

use crate::{Kernel, Type, V};
pub use guard::Safety;
use std::borrow::Cow;

/// Which passes [`run`] applies, and their parameters.
pub struct PassOptions<'a> {
    /// How accesses are guarded ([`guard`]).
    pub safety: Safety,
    /// The views whose fit the caller checks on the host before each
    /// launch (the PTX backend's TMA views); `None`: none.
    pub host_checked_views: Option<&'a dyn Fn(V) -> bool>,
    /// Pointers are unsigned element indices from their buffer's start
    /// (WGSL): the guard compares against the end only.
    pub index_pointers: bool,
    /// Lower block accesses of views to pointer accesses, keeping the
    /// `load_block`s whose result this predicate accepts; `None`: keep
    /// every block access.
    pub lower_views: Option<&'a dyn Fn(V) -> bool>,
    /// Values known to be 1 at launch (unit strides: [`lower_views`]).
    pub unit: Option<&'a dyn Fn(V) -> bool>,
    /// Prefetch distance of `dot` loops (`num_stages − 1`); 0: off.
    pub pipeline_depth: u32,
    /// Prefetch the loads of loops without a `dot` too.
    pub pipeline_every_loop: bool,
    /// Split `dot` loops whose last iterations are masked ([`split_masks`]).
    pub split_masks: bool,
    /// Put the selects that only a `dot` loop's last iterations can fail
    /// under a branch on the induction variable ([`branch_masks`]).
    pub branch_masks: bool,
    /// Rotate loops whose carried-accumulator `dot` consumes another
    /// `dot`'s result by one iteration ([`rotate_chains`]), for the chained
    /// dots this accepts; `None`: off.
    pub rotate_chains: Option<rotate_chains::Accept<'a>>,
    /// Recompute widened tiles after reductions ([`remat_widened`]), for
    /// programs of this many threads; `None`: off.
    pub remat_widened: Option<u32>,
    /// Bounds on arguments the launch proved ([`proven_masks`]).
    pub proven_masks: &'a [proven_masks::Bound],
    /// Give broadcast-only loads index arithmetic of their own
    /// ([`private_index`]).
    pub private_index: bool,
}

impl<'a> PassOptions<'a> {
    /// The PTX backend: accesses guarded except the views in
    /// `host_checked`, views lowered except the block loads in `keep`,
    /// loops pipelined.
    pub fn ptx(safety: Safety, host_checked: &'a dyn Fn(V) -> bool, keep: &'a dyn Fn(V) -> bool, pipeline_depth: u32) -> Self {
        PassOptions {
            safety,
            host_checked_views: Some(host_checked),
            index_pointers: false,
            lower_views: Some(keep),
            unit: None,
            pipeline_depth,
            pipeline_every_loop: false,
            split_masks: false,
            branch_masks: true,
            rotate_chains: None,
            remat_widened: None,
            proven_masks: &[],
            private_index: false,
        }
    }
    /// The CPU interpreter; `gpu_pipeline_depth` > 0 runs the GPU's
    /// rewrites as well (`FERROTILE_INTERP_PIPELINE=1`): the masks under a
    /// branch ([`branch_masks`]), pipelining, and [`split_masks`] where the
    /// caller turns it on.
    pub fn interpreter(safety: Safety, gpu_pipeline_depth: u32) -> Self {
        PassOptions {
            safety,
            host_checked_views: None,
            index_pointers: false,
            lower_views: None,
            unit: None,
            pipeline_depth: gpu_pipeline_depth,
            pipeline_every_loop: false,
            split_masks: false,
            branch_masks: gpu_pipeline_depth > 0,
            rotate_chains: (gpu_pipeline_depth > 0).then_some(&|_: &[u32]| true),
            // (one thread: every value large enough in any launch is rewritten)
            remat_widened: (gpu_pipeline_depth > 0).then_some(1),
            proven_masks: &[],
            private_index: gpu_pipeline_depth > 0,
        }
    }
    /// These options with `unit` naming the values known to be 1.
    pub fn unit(mut self, unit: &'a dyn Fn(V) -> bool) -> Self {
        self.unit = Some(unit);
        self
    }
    /// These options with [`split_masks`] on or off.
    pub fn split_masks(mut self, on: bool) -> Self {
        self.split_masks = on;
        self
    }
    /// These options with [`branch_masks`] on or off.
    pub fn branch_masks(mut self, on: bool) -> Self {
        self.branch_masks = on;
        self
    }
    /// These options with the bounds a launch proved ([`proven_masks`]).
    pub fn proven_masks(mut self, proven: &'a [proven_masks::Bound]) -> Self {
        self.proven_masks = proven;
        self
    }
    /// These options with [`remat_widened`] for programs of `threads`
    /// threads, or off (`None`).
    pub fn remat_widened(mut self, threads: Option<u32>) -> Self {
        self.remat_widened = threads;
        self
    }
    /// These options with loops without a `dot` pipelined as well.
    pub fn every_loop(mut self, on: bool) -> Self {
        self.pipeline_every_loop = on;
        self
    }
    /// The WGSL backend: accesses guarded (against their buffer's end:
    /// pointers are u32 indices).
    pub fn wgsl(safety: Safety) -> Self {
        PassOptions {
            safety,
            host_checked_views: None,
            index_pointers: true,
            lower_views: None,
            unit: None,
            pipeline_depth: 0,
            pipeline_every_loop: false,
            split_masks: false,
            branch_masks: false,
            rotate_chains: None,
            remat_widened: None,
            proven_masks: &[],
            private_index: false,
        }
    }
    /// These options with [`private_index`] on or off.
    pub fn private_index(mut self, on: bool) -> Self {
        self.private_index = on;
        self
    }
    /// These options with [`rotate_chains`] for the chained dots `accept`
    /// takes, or off (`None`).
    pub fn rotate_chains(mut self, accept: Option<rotate_chains::Accept<'a>>) -> Self {
        self.rotate_chains = accept;
        self
    }
}

/// Run the passes `o` selects on a specialized kernel, in the order of the
/// table above; borrows `k` unchanged when none applies.
pub fn run<'k>(k: &'k Kernel, o: &PassOptions) -> Cow<'k, Kernel> {
    let mut k = Cow::Borrowed(k);
    if !o.proven_masks.is_empty() {
        let mut f = (*k).clone();
        if proven_masks::fold(&mut f, o.proven_masks) {
            // (the masks' compares and the `other`s of unmasked loads)
            dce::dce(&mut f);
            k = Cow::Owned(f);
        }
    }
    if o.safety != Safety::Unchecked {
        guard::guard(k.to_mut(), o.safety, o.host_checked_views.unwrap_or(&|_| false), !o.index_pointers);
    }
    if let Some(keep) = o.lower_views {
        if k.values.iter().any(|v| matches!(v.ty, Type::View { .. })) {
            lower_views::lower_views(k.to_mut(), keep, o.unit.unwrap_or(&|_| false));
        }
    }
    if o.private_index {
        // (copies only where a load qualifies: a kernel without one stays borrowed)
        let mut r = (*k).clone();
        if private_index::private_index(&mut r) {
            k = Cow::Owned(r);
        }
    }
    let split = o.split_masks && split_masks::has_dot_loops(&k) && split_masks::split_masks(k.to_mut());
    // (after a split only the second loop keeps its masks)
    let branched = o.branch_masks && split_masks::has_dot_loops(&k) && branch_masks::branch_masks(k.to_mut());
    let rotated = o.rotate_chains.is_some_and(|a| rotate_chains::count(&k, a) > 0 && rotate_chains::rotate_chains(k.to_mut(), a) > 0);
    if rotated {
        // (stage 0's copies of the operand loads only the chained dots read)
        dce::dce(k.to_mut());
    }
    if o.pipeline_depth > 0 || split || branched || rotated {
        let before: Kernel = (*k).clone();
        pipeline::pipeline_loops(k.to_mut(), o.pipeline_depth, o.pipeline_every_loop);
        // (a pipelined loop keeps its body's address and mask arithmetic for
        // the loads it replaced: dead, and where it held a layout conversion
        // the emitter would still write its shared-memory round trip)
        if *k != before {
            dce::dce(k.to_mut());
        }
    }
    if let Some(threads) = o.remat_widened {
        // (clones only where a value qualifies: a kernel without one stays borrowed)
        let mut r = (*k).clone();
        if remat_widened::remat_widened(&mut r, threads) {
            // (an original whose every read followed a reduction is dead now)
            dce::dce(&mut r);
            k = Cow::Owned(r);
        }
    }
    k
}
