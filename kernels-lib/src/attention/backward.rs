//! Attention backward (FlashAttention-2's algorithm): dQ, dK and dV from
//! Q, K, V, the forward's output O and log-sum-exp, and dO.
//!
//! Three steps, each a kernel written in the DSL (`kernels.rs`):
//!
//! 1. [`attention_bwd_pre`]: `delta = rowsum(dO ∘ O)` per query row (f32).
//! 2. [`attention_bwd_dkdv`]: per block of keys, a loop over the query
//!    blocks that see them; `P` is recomputed from the log-sum-exp, so the
//!    attention matrix is never stored. With GQA each query head's dK/dV
//!    goes to an f32 workspace and [`attention_bwd_sum`] adds the heads of
//!    a group (no atomics: the result does not depend on scheduling).
//! 3. [`attention_bwd_dq`]: per block of queries, a loop over the keys (a
//!    second pass instead of FlashAttention-2's atomics, for the same
//!    reason).
//!
//! Or, in one pass (FlashAttention-2's: [`BackwardConfig::atomic_dq`], or
//! the autotuner's pick unless [`AttentionOptions::deterministic`] —
//! that pick is off by default, `FERROTILE_ATTN_ONE_PASS=1` turns it
//! on; on the H200 it ran 0.73–0.91× the two passes, bf16 d128: the
//! atomics' L2 traffic, `s/BN · s · d` reductions per head): step
//! 1 also zeroes an f32 dQ, step 2 adds each step's `dS·K` to it by
//! atomics (five products per step instead of seven over both loops), and
//! [`attention_bwd_dq_cast`] scales it and stores it in dQ's dtype and
//! strides. The atomics' order varies from run to run, and with it dQ's
//! last bits.
//!
//! Masks (causal aligned to the bottom right, sliding windows), scale,
//! GQA/MQA, padded head dims and strides are those of the forward
//! ([`super::attention`]); each gradient has the strides of its tensor
//! (dQ as Q, dK as K, dV as V) and dO has the output's.

use super::kernels::{attention_bwd_dkdv, attention_bwd_dq, attention_bwd_dq_cast, attention_bwd_pre, attention_bwd_sum};
use super::{check_problem, Args, AttentionConfig, AttentionOptions, AttentionProblem};
use crate::LibError;
use ferrotile::prelude::*;
use ferrotile::{DeviceKind, FloatElement};

/// Tile configurations of the backward's two loops. `dkdv`: `bn` keys per
/// program, `bm` query rows per step; `dq`: `bm` query rows per program,
/// `bn` keys per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackwardConfig {
    /// Tiles of the dK/dV kernel.
    pub dkdv: AttentionConfig,
    /// Tiles of the dQ kernel (unused with `atomic_dq`).
    pub dq: AttentionConfig,
    /// dQ accumulated by atomics in the dK/dV loop (one pass; see the
    /// module doc): not with [`AttentionOptions::deterministic`].
    pub atomic_dq: bool,
}

impl BackwardConfig {
    /// Without the autotuner: medium tiles on CUDA GPUs, small ones on the
    /// CPU interpreter and WGSL (whose workgroup storage may be 32 KiB).
    pub fn default_for(dev: &Device, padded_dim: usize) -> Self {
        let c = |bm, bn, num_warps, num_stages| AttentionConfig {
            bm,
            bn,
            num_warps,
            num_stages,
            split_masks: false,
            overlap: false,
            warp_specialize: false,
            rotate_chains: false,
        };
        match dev.kind() {
            DeviceKind::Cuda if padded_dim <= 128 => BackwardConfig { dkdv: c(32, 64, 4, 2), dq: c(64, 64, 4, 2), atomic_dq: false },
            DeviceKind::Cuda => BackwardConfig { dkdv: c(16, 64, 4, 2), dq: c(64, 32, 4, 2), atomic_dq: false },
            _ if padded_dim <= 64 => BackwardConfig { dkdv: c(16, 32, 4, 1), dq: c(32, 32, 4, 1), atomic_dq: false },
            _ => BackwardConfig { dkdv: c(16, 16, 4, 1), dq: c(16, 16, 4, 1), atomic_dq: false },
        }
    }
}

/// The autotuner's candidates for the two loops (`(dkdv, dq)`), head
/// dimension `padded_dim`.
pub fn backward_candidates(padded_dim: usize) -> (Vec<ferrotile::TuneConfig>, Vec<ferrotile::TuneConfig>) {
    let c = |bm: i64, bn: i64, w: u32, s: u32| ferrotile::TuneConfig::new(w).with("BM", bm).with("BN", bn).stages(s);
    if padded_dim <= 64 {
        (
            vec![c(32, 64, 4, 2), c(64, 64, 4, 2), c(32, 128, 8, 2), c(64, 128, 8, 2), c(32, 64, 4, 3)],
            vec![c(64, 64, 4, 2), c(128, 64, 8, 2), c(64, 32, 4, 3), c(128, 32, 8, 2)],
        )
    } else if padded_dim <= 128 {
        (vec![c(32, 64, 4, 2), c(64, 64, 4, 2), c(32, 128, 8, 2), c(64, 128, 8, 2)], vec![c(64, 64, 4, 2), c(128, 64, 8, 2), c(64, 32, 4, 2), c(128, 32, 8, 2)])
    } else {
        (vec![c(16, 64, 4, 2), c(32, 64, 4, 2), c(16, 128, 8, 2)], vec![c(64, 32, 4, 2), c(64, 64, 4, 2)])
    }
}

/// Attention backward: given `q`, `k`, `v`, the forward's `out` and `lse`
/// (natural log, `[batch, heads_q, seqlen_q]`, as [`super::attention`]
/// writes it) and `dout` (with `out`'s strides), writes `dq` (strides of
/// Q), `dk` (of K) and `dv` (of V). `opts` must be the forward's (causal,
/// window, scale); `seqlens_k`, `decode` and `config` do not apply
/// (errors), `backward` forces tile configurations. For GQA, dK and dV are
/// summed over the query heads of each K/V head.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward<T: FloatElement>(
    dev: &Device,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    out: &Buffer<T>,
    dout: &Buffer<T>,
    lse: &Buffer<f32>,
    dq: &mut Buffer<T>,
    dk: &mut Buffer<T>,
    dv: &mut Buffer<T>,
    p: &AttentionProblem,
    opts: &AttentionOptions<'_>,
) -> Result<(), LibError> {
    const WHAT: &str = "attention_backward";
    if opts.seqlens_k.is_some() || opts.decode.is_some() || opts.config.is_some() {
        return Err(LibError::Config(format!("{WHAT}: `seqlens_k`, `decode` and `config` are forward options (the backward's tiles are `backward`)")));
    }
    let (hq, hk, nq, nk) = (p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k);
    let args = check_problem::<T>(
        WHAT,
        p,
        opts,
        &[
            ("q", q.len(), hq, nq, &p.q),
            ("k", k.len(), hk, nk, &p.k),
            ("v", v.len(), hk, nk, &p.v),
            ("out", out.len(), hq, nq, &p.o),
            ("dout", dout.len(), hq, nq, &p.o),
        ],
        &[("dq", dq.len(), hq, nq, &p.q), ("dk", dk.len(), hk, nk, &p.k), ("dv", dv.len(), hk, nk, &p.v)],
    )?;
    let rows = p.batch * hq * nq;
    if lse.len() < rows {
        return Err(LibError::Shape(format!("{WHAT}: `lse` has {} elements, [{}, {hq}, {nq}] = {rows} needed", lse.len(), p.batch)));
    }
    if let Some(cfg) = opts.backward {
        for (name, c) in [("dkdv", cfg.dkdv), ("dq", cfg.dq)] {
            c.check_tiles(&format!("{WHAT}: backward.{name}."))?;
        }
    }
    if p.batch == 0 || (nq == 0 && nk == 0) {
        return Ok(());
    }
    let dp = p.padded_dim();
    let g = hq / hk;
    if opts.deterministic && opts.backward.is_some_and(|c| c.atomic_dq) {
        return Err(LibError::Config(format!("{WHAT}: `backward.atomic_dq` sums dQ by atomics, whose order varies: not with `deterministic`")));
    }
    // (tensors of length 0 have one-element placeholders; nothing reads
    // them: no program of a kernel over them runs)
    let acc_len = if g > 1 { p.batch * hq * nk * dp } else { 1 };
    let mut ws = crate::scratch::tf32_copies(dev, acc_len, acc_len)?;
    let (dk_acc, dv_acc) = ws.pair_mut();
    let flops = 10.0 * (p.batch * hq) as f64 * nq as f64 * nk as f64 * p.head_dim as f64;
    let tuned = opts.backward.is_none() && dev.kind() == DeviceKind::Cuda && flops >= (1u64 << 33) as f64;
    // (the f32 dQ only where the one pass may run)
    let atomic_ok = !opts.deterministic
        && match opts.backward {
            Some(c) => c.atomic_dq,
            None => tuned && one_pass_tuned(),
        };
    let mut rows_ws = crate::scratch::workspace_pair(dev, rows.max(1), if atomic_ok { rows * dp } else { 0 })?;
    let (delta, dq_acc) = rows_ws.pair_mut();
    let l = Launch { dev, q, k, v, dout, lse, a: &args, g, dp };
    let key = |which: &str| {
        let b2 = |x: usize| x.max(1).next_power_of_two();
        format!(
            "{which}|{}|d{dp}|g{g}|{}{}|b*h<={}|sq<={}|sk<={}",
            T::DTYPE,
            if args.mask_hi { "hi" } else { "" },
            if args.mask_lo { "lo" } else { "" },
            b2(p.batch * hq),
            b2(nq),
            b2(nk)
        )
    };
    // The whole backward by one of the two algorithms, with the given
    // tiles or (`None`) each loop's tuned ones.
    let mut backward = |atomic: bool, fixed: Option<BackwardConfig>| -> Result<(), LibError> {
        if atomic && nq * dp > i32::MAX as usize {
            // (the loop adds at 32-bit offsets from each head's first row)
            return Err(LibError::Shape(format!("{WHAT}: dQ by atomics needs seqlen_q · {dp} below 2³¹ (seqlen_q = {nq})")));
        }
        // (with atomics the pre-pass, which zeroes the f32 dQ, runs with
        // each dK/dV launch — so that every launch the tuner times, and
        // the one it makes after tuning, leaves exactly one pass's sums)
        if nq > 0 && (!atomic || nk == 0) {
            launch_delta(dev, out, dout, &mut *delta, &mut *dq_acc, atomic, p, dp)?;
        }
        if nk > 0 {
            let mut dkdv = |cfg: AttentionConfig| -> Result<(), LibError> {
                if atomic && nq > 0 {
                    launch_delta(dev, out, dout, &mut *delta, &mut *dq_acc, true, p, dp)?;
                }
                l.dkdv(cfg, delta, dk, dv, dk_acc, dv_acc, dq_acc, atomic)
            };
            match fixed {
                Some(c) => dkdv(c.dkdv)?,
                None => {
                    tuner(dp, if atomic { 2 } else { 0 }).run(dev, &key(if atomic { "dkdvq" } else { "dkdv" }), |tc| {
                        let cfg = AttentionConfig::from_tune(tc)?;
                        dkdv(cfg).map_err(crate::lib_to_launch)
                    })?;
                }
            }
            if g > 1 {
                launch_group_sum(dev, dk_acc, dv_acc, dk, dv, p, dp)?;
            }
        }
        if nq > 0 {
            if atomic {
                launch_dq_cast(dev, dq_acc, dq, p, args.scale, dp)?;
            } else {
                match fixed {
                    Some(c) => l.dq(c.dq, delta, dq)?,
                    None => {
                        tuner(dp, 1).run(dev, &key("dq"), |tc| {
                            let cfg = AttentionConfig::from_tune(tc)?;
                            l.dq(cfg, delta, dq).map_err(crate::lib_to_launch)
                        })?;
                    }
                }
            }
        }
        Ok(())
    };
    if !tuned {
        let c = opts.backward.unwrap_or_else(|| BackwardConfig::default_for(dev, dp));
        return backward(c.atomic_dq, Some(c));
    }
    if opts.deterministic || !one_pass_tuned() {
        return backward(false, None);
    }
    // (which algorithm: timed as whole backwards, each with its loops'
    // tuned tiles — the first run of each tunes them)
    pass_tuner(dp).run(dev, &key("pass"), |tc| backward(tc.get("ATOMIC")? == 1, None).map_err(crate::lib_to_launch))?;
    Ok(())
}

/// Step 1: `delta = rowsum(dO ∘ O)` of `p`'s query rows, laid out like
/// the log-sum-exp (`[batch, heads_q, seqlen_q]`; `dout` has `out`'s
/// strides). The varlen backward passes its packed tensors as one batch
/// entry of `total_q` rows (delta is row-wise).
#[allow(clippy::too_many_arguments)]
pub(super) fn launch_delta<T: FloatElement>(
    dev: &Device,
    out: &Buffer<T>,
    dout: &Buffer<T>,
    delta: &mut Buffer<f32>,
    dq_acc: &mut Buffer<f32>,
    zero_dq: bool,
    p: &AttentionProblem,
    dp: usize,
) -> Result<(), LibError> {
    let (hq, nq) = (p.heads_q, p.seqlen_q);
    let s = |x: usize| x as i64;
    let bm = 64usize.min(nq.next_power_of_two()).max(16);
    let launch = LaunchConfig::new([nq.div_ceil(bm) as u32, hq as u32, p.batch as u32]).num_warps(4);
    let (ob, oh, os) = (s(p.o.batch), s(p.o.head), s(p.o.seq));
    attention_bwd_pre::launch(
        dev,
        launch,
        out,
        dout,
        delta,
        dq_acc,
        nq as i32,
        p.head_dim as i32,
        ob,
        oh,
        os,
        ob,
        oh,
        os,
        s(hq * nq),
        s(nq),
        bm as i32,
        dp as i32,
        zero_dq,
    )?;
    Ok(())
}

/// The single pass's last step: dQ = `scale` · the f32 rows the dK/dV
/// loop added up (laid out like the log-sum-exp, `dp` apart), stored by
/// Q's strides. The varlen backward passes its packed tensors as one
/// batch entry of `total_q` rows.
pub(super) fn launch_dq_cast<T: FloatElement>(
    dev: &Device,
    dq_acc: &Buffer<f32>,
    dq: &mut Buffer<T>,
    p: &AttentionProblem,
    scale: f32,
    dp: usize,
) -> Result<(), LibError> {
    let (hq, nq) = (p.heads_q, p.seqlen_q);
    let s = |x: usize| x as i64;
    let bm = 64usize.min(nq.next_power_of_two()).max(16);
    let launch = LaunchConfig::new([nq.div_ceil(bm) as u32, hq as u32, p.batch as u32]).num_warps(4);
    attention_bwd_dq_cast::launch(
        dev,
        launch,
        dq_acc,
        dq,
        nq as i32,
        p.head_dim as i32,
        scale,
        s(p.q.batch),
        s(p.q.head),
        s(p.q.seq),
        s(hq * nq),
        s(nq),
        bm as i32,
        dp as i32,
    )?;
    Ok(())
}

/// GQA: each K/V head's dK and dV, the sum of its query heads' f32
/// partials (`[batch, heads_q, seqlen_k, dp]` in `dk_acc` / `dv_acc`),
/// stored by the strides of K and V. The varlen backward passes its
/// packed tensors as one batch entry of `total_k` keys (the sum is per key
/// token).
#[allow(clippy::too_many_arguments)]
pub(super) fn launch_group_sum<T: FloatElement>(
    dev: &Device,
    dk_acc: &Buffer<f32>,
    dv_acc: &Buffer<f32>,
    dk: &mut Buffer<T>,
    dv: &mut Buffer<T>,
    p: &AttentionProblem,
    dp: usize,
) -> Result<(), LibError> {
    let (nk, br) = (p.seqlen_k, 32usize);
    let s = |x: usize| x as i64;
    let launch = LaunchConfig::new([nk.div_ceil(br) as u32, p.heads_kv as u32, p.batch as u32]).num_warps(4);
    attention_bwd_sum::launch(
        dev,
        launch,
        dk_acc,
        dv_acc,
        dk,
        dv,
        nk as i32,
        p.head_dim as i32,
        p.heads_q as i32,
        s(p.k.batch),
        s(p.k.head),
        s(p.k.seq),
        s(p.v.batch),
        s(p.v.head),
        s(p.v.seq),
        br as i32,
        dp as i32,
        (p.heads_q / p.heads_kv) as i32,
    )?;
    Ok(())
}

/// The loops' tuners: `which` 0 the dK/dV loop, 1 the dQ loop, 2 the
/// dK/dV loop with dQ by atomics.
fn tuner(padded_dim: usize, which: usize) -> &'static ferrotile::Autotuner {
    use std::sync::OnceLock;
    static T: [OnceLock<ferrotile::Autotuner>; 9] = [const { OnceLock::new() }; 9];
    let (i, name) = super::dim_class(padded_dim);
    T[3 * i + which].get_or_init(|| {
        let (a, b) = backward_candidates(padded_dim);
        let kind = ["dkdv", "dq", "dkdvq"][which];
        ferrotile::Autotuner::new(&format!("attention_bwd_{kind}_{name}"), if which == 1 { b } else { a }).reps(5)
    })
}

/// Whether the autotuner may pick the one pass (dQ by atomics): only with
/// `FERROTILE_ATTN_ONE_PASS=1` — measured on the H200 (session 44) it ran
/// 0.73–0.91× the two passes on every tile, and the tuner picked the two
/// passes; timing both algorithms costs tuning time for nothing by
/// default (`BackwardConfig::atomic_dq` forces it either way).
pub(super) fn one_pass_tuned() -> bool {
    std::env::var("FERROTILE_ATTN_ONE_PASS").is_ok_and(|v| v == "1")
}

/// The choice between the two algorithms (`ATOMIC` 0: the dQ loop's
/// second pass, 1: dQ by atomics in the dK/dV loop), each timed as a whole
/// backward.
fn pass_tuner(padded_dim: usize) -> &'static ferrotile::Autotuner {
    use std::sync::OnceLock;
    static T: [OnceLock<ferrotile::Autotuner>; 3] = [const { OnceLock::new() }; 3];
    let (i, name) = super::dim_class(padded_dim);
    T[i].get_or_init(|| {
        let c = |a| ferrotile::TuneConfig::new(4).with("ATOMIC", a);
        ferrotile::Autotuner::new(&format!("attention_bwd_pass_{name}"), vec![c(0), c(1)]).reps(5)
    })
}

/// The arguments both loops take.
struct Launch<'a, T: FloatElement> {
    dev: &'a Device,
    q: &'a Buffer<T>,
    k: &'a Buffer<T>,
    v: &'a Buffer<T>,
    dout: &'a Buffer<T>,
    lse: &'a Buffer<f32>,
    a: &'a Args,
    g: usize,
    dp: usize,
}

impl<T: FloatElement> Launch<'_, T> {
    #[allow(clippy::too_many_arguments)]
    fn dkdv(
        &self,
        cfg: AttentionConfig,
        delta: &Buffer<f32>,
        dk: &mut Buffer<T>,
        dv: &mut Buffer<T>,
        dk_acc: &mut Buffer<f32>,
        dv_acc: &mut Buffer<f32>,
        dq_acc: &mut Buffer<f32>,
        dq_on: bool,
    ) -> Result<(), LibError> {
        let (a, p) = (self.a, &self.a.p);
        let s = |x: usize| x as i64;
        let grid = [p.seqlen_k.div_ceil(cfg.bn as usize) as u32, p.heads_q as u32, p.batch as u32];
        // (its loops are not rotated: the chained dots load tiles the rest of the body reads)
        let launch = LaunchConfig::new(grid).num_warps(cfg.num_warps).num_stages(cfg.num_stages).rotate_chains(false);
        // SAFETY: every access lies inside its buffer (`check_problem`
        // checked the tensors' extents by their strides; the callers size
        // the rest): K, V, Q, dO, dK and dV through views of `[seqlen, d]`
        // at `b·batch + h·head` (block accesses stay in the view); the
        // rows' `lse` and `delta` at `(b·Hq + h)·nq + row`, masked to `row
        // < nq` (`lse` holds `batch·Hq·nq`, the workspace as many); with
        // `acc` the f32 dK/dV rows `((b·Hq + h)·nk + key)·dp + c`, masked
        // to `key < nk`, `c < dp` (`dk_acc`, `dv_acc` hold `batch·Hq·nk·dp`
        // when `g > 1`); with `dq_on` the f32 dQ at `((b·Hq + h)·nq)·dp`
        // plus the 32-bit `row·dp + c`, masked to `row < nq` (`dq_acc`
        // holds `batch·Hq·nq·dp`; `nq·dp < 2³¹`, checked by the caller).
        // Unguarded because the guard's per-element bounds test of those
        // atomics costs ~30 registers in a loop at the register limit.
        unsafe {
            attention_bwd_dkdv::launch_unchecked(
                self.dev,
                launch,
                self.q,
                self.k,
                self.v,
                self.dout,
                self.lse,
                delta,
                dk,
                dv,
                dk_acc,
                dv_acc,
                dq_acc,
                p.seqlen_q as i32,
                p.seqlen_k as i32,
                p.head_dim as i32,
                a.qk_scale(),
                a.scale,
                a.win_left,
                a.win_right,
                s(p.q.batch),
                s(p.q.head),
                s(p.q.seq),
                s(p.k.batch),
                s(p.k.head),
                s(p.k.seq),
                s(p.v.batch),
                s(p.v.head),
                s(p.v.seq),
                s(p.o.batch),
                s(p.o.head),
                s(p.o.seq),
                s(p.k.batch),
                s(p.k.head),
                s(p.k.seq),
                s(p.v.batch),
                s(p.v.head),
                s(p.v.seq),
                s(p.heads_q * p.seqlen_q),
                s(p.seqlen_q),
                cfg.bm as i32,
                cfg.bn as i32,
                self.dp as i32,
                self.g as i32,
                a.mask_hi,
                a.mask_lo,
                self.g > 1,
                dq_on,
            )?;
        }
        Ok(())
    }

    fn dq(&self, cfg: AttentionConfig, delta: &Buffer<f32>, dq: &mut Buffer<T>) -> Result<(), LibError> {
        let (a, p) = (self.a, &self.a.p);
        let s = |x: usize| x as i64;
        let grid = [p.seqlen_q.div_ceil(cfg.bm as usize) as u32, p.heads_q as u32, p.batch as u32];
        // (its loops are not rotated: the chained dots load tiles the rest of the body reads)
        let launch = LaunchConfig::new(grid).num_warps(cfg.num_warps).num_stages(cfg.num_stages).rotate_chains(false);
        attention_bwd_dq::launch(
            self.dev,
            launch,
            self.q,
            self.k,
            self.v,
            self.dout,
            self.lse,
            delta,
            dq,
            p.seqlen_q as i32,
            p.seqlen_k as i32,
            p.head_dim as i32,
            a.qk_scale(),
            a.scale,
            a.win_left,
            a.win_right,
            s(p.q.batch),
            s(p.q.head),
            s(p.q.seq),
            s(p.k.batch),
            s(p.k.head),
            s(p.k.seq),
            s(p.v.batch),
            s(p.v.head),
            s(p.v.seq),
            s(p.o.batch),
            s(p.o.head),
            s(p.o.seq),
            s(p.q.batch),
            s(p.q.head),
            s(p.q.seq),
            s(p.heads_q * p.seqlen_q),
            s(p.seqlen_q),
            cfg.bm as i32,
            cfg.bn as i32,
            self.dp as i32,
            self.g as i32,
            a.mask_hi,
            a.mask_lo,
        )?;
        Ok(())
    }
}
