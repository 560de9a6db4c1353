//! Variable-length attention forward: FlashAttention's packed "varlen"
//! layout, where the sequences of a batch lie one after another along the
//! token dimension (`[total, heads, dim]`) and `cu_seqlens` (batch + 1
//! offsets) says where each starts, so that a batch of ragged sequences
//! needs no padding.
//!
//! [`attention_fwd_varlen`] is [`super::attention_fwd`]'s loop with the
//! sequence bounds loaded from `cu_seqlens_q` / `cu_seqlens_k`
//! ([`attention_fwd_varlen_overlap`] the overlapped loop of
//! [`super::attention_fwd_overlap`], which `AttentionConfig::overlap` —
//! the CUDA default up to d128 — picks); causal
//! masks and windows align to the bottom right of each sequence (as
//! FlashAttention 2.1+). By default the offsets are read back to the host
//! once per call to check them (monotone, within the tensors, each length
//! within its `max_seqlen`): bad offsets are an error, never a wrong
//! answer. That read-back waits for the GPU and cannot happen inside a
//! CUDA graph capture; a caller that builds the offsets itself (as
//! FlashAttention's varlen API assumes) turns it off with
//! [`VarlenProblem::check_offsets`] `= false`: no host synchronization,
//! capturable, and still memory-safe — the kernels are guarded, so offsets
//! that break the contract give unspecified outputs, never an access
//! outside the tensors.

use super::kernels::{attention_fwd_varlen, attention_fwd_varlen_overlap};
use super::{check_problem, AttentionConfig, AttentionOptions, AttentionProblem, BackwardConfig, Strides};
use crate::LibError;
use ferrotile::prelude::*;
use ferrotile::FloatElement;

/// Element strides of a packed `[total, heads, dim]` tensor (the head
/// dimension contiguous).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenStrides {
    /// Elements between consecutive tokens.
    pub token: usize,
    /// Elements between consecutive heads.
    pub head: usize,
}

impl TokenStrides {
    /// A contiguous `[total, heads, dim]` tensor.
    pub fn packed(heads: usize, dim: usize) -> Self {
        TokenStrides { token: heads * dim, head: dim }
    }
}

/// A packed variable-length problem: `batch` sequences, `total_q` query
/// and `total_k` key tokens in all, the longest `max_seqlen_q` /
/// `max_seqlen_k` tokens long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarlenProblem {
    /// Sequences (`cu_seqlens` has `batch + 1` entries).
    pub batch: usize,
    /// Query heads.
    pub heads_q: usize,
    /// K/V heads: divides `heads_q`.
    pub heads_kv: usize,
    /// Head dimension.
    pub head_dim: usize,
    /// Query tokens of all sequences together.
    pub total_q: usize,
    /// Key tokens of all sequences together.
    pub total_k: usize,
    /// The longest query sequence (sizes the grid).
    pub max_seqlen_q: usize,
    /// The longest key sequence.
    pub max_seqlen_k: usize,
    /// Strides of `q`.
    pub q: TokenStrides,
    /// Strides of `k`.
    pub k: TokenStrides,
    /// Strides of `v`.
    pub v: TokenStrides,
    /// Strides of `out`.
    pub o: TokenStrides,
    /// Read `cu_seqlens` back and check them before launching (the
    /// default: a host synchronization per call, refused inside a graph
    /// capture). `false`: the caller vouches for them — each sequence a
    /// range within the tensors, at most its `max_seqlen` long (for the
    /// backward, covering the tensors exactly); the call then neither
    /// waits for the GPU nor reads anything back, and offsets that break
    /// that give unspecified outputs, but never an access outside the
    /// tensors (the launches are guarded).
    pub check_offsets: bool,
}

impl VarlenProblem {
    /// Contiguous `[total, heads, dim]` tensors (the output like Q).
    #[allow(clippy::too_many_arguments)]
    pub fn packed(
        batch: usize,
        heads_q: usize,
        heads_kv: usize,
        total_q: usize,
        total_k: usize,
        max_seqlen_q: usize,
        max_seqlen_k: usize,
        head_dim: usize,
    ) -> Self {
        let (q, kv) = (TokenStrides::packed(heads_q, head_dim), TokenStrides::packed(heads_kv, head_dim));
        VarlenProblem { batch, heads_q, heads_kv, head_dim, total_q, total_k, max_seqlen_q, max_seqlen_k, q, k: kv, v: kv, o: q, check_offsets: true }
    }

    /// The same problem with `cu_seqlens` taken on trust
    /// ([`Self::check_offsets`] `= false`): no read-back, capturable in a
    /// CUDA graph.
    pub fn trusted_offsets(self) -> Self {
        VarlenProblem { check_offsets: false, ..self }
    }
}

/// The packed tensors as one batch entry of `total` tokens (what sizes,
/// spans and overlaps are checked on).
fn whole(p: &VarlenProblem) -> AttentionProblem {
    let st = |t: &TokenStrides| Strides { batch: 0, head: t.head, seq: t.token };
    AttentionProblem {
        batch: 1,
        heads_q: p.heads_q,
        heads_kv: p.heads_kv,
        seqlen_q: p.total_q,
        seqlen_k: p.total_k,
        head_dim: p.head_dim,
        q: st(&p.q),
        k: st(&p.k),
        v: st(&p.v),
        o: st(&p.o),
    }
}

/// The offsets: batch + 1 of them, non-decreasing, within the tensors,
/// each length within its maximum; `tile`: the sequences cover their
/// tensors exactly (the first starts at 0, the last ends at the total).
/// Their lengths are always checked; their values only with
/// `p.check_offsets` (outside a graph capture: inside one, an error that
/// says how to capture).
fn check_offsets(what: &str, dev: &Device, p: &VarlenProblem, cu_q: &Buffer<i32>, cu_k: &Buffer<i32>, tile: bool) -> Result<(), LibError> {
    for (name, cu, total, max) in [("cu_seqlens_q", cu_q, p.total_q, p.max_seqlen_q), ("cu_seqlens_k", cu_k, p.total_k, p.max_seqlen_k)] {
        if cu.len() < p.batch + 1 {
            return Err(LibError::Shape(format!("{what}: `{name}` has {} elements, batch + 1 = {} needed", cu.len(), p.batch + 1)));
        }
        if !p.check_offsets {
            continue;
        }
        if dev.capturing() {
            return Err(LibError::Config(format!(
                "{what}: `{name}` cannot be read back to be checked while a graph is being captured; to capture the call, take the offsets on trust (`VarlenProblem::trusted_offsets`)"
            )));
        }
        let c = cu.to_vec()?;
        for b in 0..p.batch {
            let (s, e) = (c[b], c[b + 1]);
            if s < 0 || e < s || e as usize > total || (e - s) as usize > max {
                return Err(LibError::Shape(format!("{what}: `{name}`[{b}..={}] = {s}..{e} is not a range of at most {max} tokens within 0..{total}", b + 1)));
            }
        }
        if tile && (c[0] != 0 || c[p.batch] as usize != total) {
            return Err(LibError::Shape(format!(
                "{what}: `{name}` = {}..{} must cover the {total} tokens exactly (every token's gradient belongs to one sequence)",
                c[0], c[p.batch]
            )));
        }
    }
    Ok(())
}

/// Attention forward over packed variable-length sequences: for each
/// sequence `b`, query tokens `cu_seqlens_q[b]..cu_seqlens_q[b+1]` attend
/// to key tokens `cu_seqlens_k[b]..cu_seqlens_k[b+1]` (see the module
/// doc); `lse`, when given, receives the natural-log log-sum-exp as
/// `[heads_q, total_q]` f32. `opts`: `causal`, `window`, `scale` and a
/// forced `config` apply; `seqlens_k`, `decode` and `backward` do not
/// (errors). Every size, stride and offset is checked first (the offsets
/// unless taken on trust); errors name the argument. Autotuned on CUDA
/// for large problems (the dense forward's candidates, tuned apart).
#[allow(clippy::too_many_arguments)]
pub fn attention_varlen<T: FloatElement>(
    dev: &Device,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    out: &mut Buffer<T>,
    lse: Option<&mut Buffer<f32>>,
    cu_seqlens_q: &Buffer<i32>,
    cu_seqlens_k: &Buffer<i32>,
    p: &VarlenProblem,
    opts: &AttentionOptions<'_>,
) -> Result<(), LibError> {
    const WHAT: &str = "attention_varlen";
    if opts.seqlens_k.is_some() || opts.decode.is_some() || opts.backward.is_some() {
        return Err(LibError::Config(format!("{WHAT}: `seqlens_k`, `decode` and `backward` do not apply (cu_seqlens give the lengths)")));
    }
    // the tensors as one sequence of `total` tokens: sizes, spans, overlap
    let whole = whole(p);
    let args = check_problem::<T>(
        WHAT,
        &whole,
        opts,
        &[("q", q.len(), p.heads_q, p.total_q, &whole.q), ("k", k.len(), p.heads_kv, p.total_k, &whole.k), ("v", v.len(), p.heads_kv, p.total_k, &whole.v)],
        &[("out", out.len(), p.heads_q, p.total_q, &whole.o)],
    )?;
    if p.batch > 65535 {
        return Err(LibError::Shape(format!("{WHAT}: batch = {} must be at most 65535 (grid)", p.batch)));
    }
    if let Some(l) = &lse {
        if l.len() < p.heads_q * p.total_q {
            return Err(LibError::Shape(format!("{WHAT}: `lse` has {} elements, [{}, {}] needed", l.len(), p.heads_q, p.total_q)));
        }
    }
    check_offsets(WHAT, dev, p, cu_seqlens_q, cu_seqlens_k, false)?;
    if p.batch == 0 || p.max_seqlen_q == 0 || p.total_q == 0 {
        return Ok(());
    }
    let dp = whole.padded_dim();
    // (untuned, on CUDA, the dense forward's defaults — d64: 128×64 on 4
    // warps, masks split, the overlapped loop; d128: 128×128 on 8 warps,
    // overlapped, with the producer warpgroup — on Hopper the sequences'
    // views are dynamic TMA views, `ptx::tma`, which the producer
    // computes itself; nothing spills: `ptx_assemble`)
    if let Some(cfg) = opts.config {
        cfg.check_tiles(&format!("{WHAT}: config "))?;
    }
    let mut placeholder;
    let (lse_ref, has_lse): (&mut Buffer<f32>, bool) = match lse {
        Some(l) => (l, true),
        None => {
            placeholder = crate::scratch::workspace(dev, 1)?;
            (placeholder.buffer(), false)
        }
    };
    let s = |x: usize| x as i64;
    let mut run = |cfg: AttentionConfig| -> Result<(), LibError> {
        // (no sequence is longer than the tokens: a larger maximum sizes no grid)
        let grid = [p.max_seqlen_q.min(p.total_q).div_ceil(cfg.bm as usize) as u32, p.heads_q as u32, p.batch as u32];
        let mut launch =
            LaunchConfig::new(grid).num_warps(cfg.num_warps).num_stages(cfg.num_stages).split_masks(cfg.split_masks).warp_specialize(cfg.warp_specialize);
        // (the compiler's rotation only where the configuration asks: the
        // forward's tiles are rotated by hand, `OV`)
        launch = launch.rotate_chains(cfg.rotate_chains);
        macro_rules! go {
            ($k:ident) => {
                $k::launch(
                    dev,
                    launch,
                    q,
                    k,
                    v,
                    &mut *out,
                    &mut *lse_ref,
                    cu_seqlens_q,
                    cu_seqlens_k,
                    p.head_dim as i32,
                    args.qk_scale(),
                    args.win_left,
                    args.win_right,
                    s(p.q.head),
                    s(p.q.token),
                    s(p.k.head),
                    s(p.k.token),
                    s(p.v.head),
                    s(p.v.token),
                    s(p.o.head),
                    s(p.o.token),
                    s(p.total_q),
                    cfg.bm as i32,
                    cfg.bn as i32,
                    dp as i32,
                    (p.heads_q / p.heads_kv) as i32,
                    args.mask_hi,
                    args.mask_lo,
                    has_lse,
                    args.fold(),
                )
            };
        }
        if cfg.overlap {
            go!(attention_fwd_varlen_overlap)?;
        } else {
            go!(attention_fwd_varlen)?;
        }
        Ok(())
    };
    if let Some(cfg) = opts.config {
        return run(cfg);
    }
    // autotuned on CUDA where the work is large (its bound: every query
    // token against the longest key sequence), per key of sizes; the
    // dense forward's candidates, tuned apart (the loaded offsets and
    // dynamic views change what is fastest)
    let flops = 4.0 * p.heads_q as f64 * p.total_q as f64 * p.max_seqlen_k.min(p.total_k) as f64 * p.head_dim as f64;
    if dev.kind() != ferrotile::DeviceKind::Cuda || flops < (1u64 << 33) as f64 {
        return run(AttentionConfig::default_for(dev, dp));
    }
    let key = varlen_key::<T>("fwd", p, dp, args.mask_hi, args.mask_lo, has_lse);
    tuner(dp, 0).run(dev, &key, |tc| {
        let cfg = AttentionConfig::from_tune(tc)?;
        run(cfg).map_err(crate::lib_to_launch)
    })?;
    Ok(())
}

/// The autotuner's key of a varlen problem: dtype, padded head dim, group
/// size, masks, sizes rounded up to powers of two (heads, sequences,
/// tokens, longest sequences).
fn varlen_key<T: FloatElement>(which: &str, p: &VarlenProblem, dp: usize, mask_hi: bool, mask_lo: bool, lse: bool) -> String {
    let b2 = |x: usize| x.max(1).next_power_of_two();
    format!(
        "{which}|{}|d{dp}|g{}|{}{}{}|h<={}|b<={}|tq<={}|tk<={}|mq<={}|mk<={}",
        T::DTYPE,
        p.heads_q / p.heads_kv.max(1),
        if mask_hi { "hi" } else { "" },
        if mask_lo { "lo" } else { "" },
        if lse { "|lse" } else { "" },
        b2(p.heads_q),
        b2(p.batch),
        b2(p.total_q),
        b2(p.total_k),
        b2(p.max_seqlen_q.min(p.total_q)),
        b2(p.max_seqlen_k.min(p.total_k)),
    )
}

/// The varlen autotuners: `which` 0 the forward (the dense forward's
/// candidates), 1 and 2 the backward's dK/dV and dQ loops (the dense
/// backward's), 3 the dK/dV loop with dQ by atomics, 4 the backward's
/// choice between the two algorithms; per padded head dimension.
fn tuner(padded_dim: usize, which: usize) -> &'static ferrotile::Autotuner {
    use std::sync::OnceLock;
    static T: [OnceLock<ferrotile::Autotuner>; 15] = [const { OnceLock::new() }; 15];
    let (i, name) = super::dim_class(padded_dim);
    T[5 * i + which].get_or_init(|| {
        let (a, b) = super::backward::backward_candidates(padded_dim);
        let (kind, cands) = match which {
            0 => ("fwd", super::attention_candidates(padded_dim)),
            1 => ("bwd_dkdv", a),
            2 => ("bwd_dq", b),
            3 => ("bwd_dkdvq", a),
            _ => ("bwd_pass", (0..2).map(|x| ferrotile::TuneConfig::new(4).with("ATOMIC", x)).collect()),
        };
        ferrotile::Autotuner::new(&format!("attention_varlen_{kind}_{name}"), cands).reps(5)
    })
}

/// The gradients of [`attention_varlen`]: given its inputs, its `out` and
/// `lse` (`[heads_q, total_q]`) and `dout` (with `out`'s strides), writes
/// `dq` (strides of Q), `dk` (of K) and `dv` (of V) — FlashAttention-2's
/// algorithm as [`super::attention_backward`], each sequence on its own
/// (its causal diagonal at its bottom right); for GQA dK and dV are summed
/// over the query heads of each K/V head. The sequences must cover the
/// tensors exactly (`cu_seqlens[0] = 0`, `cu_seqlens[batch] = total`: every
/// token's gradient is written). `opts` must be the forward's (causal,
/// window, scale); `backward` forces tile configurations; `seqlens_k`,
/// `decode` and `config` do not apply (errors). Autotuned on CUDA for
/// large problems (each loop on its own, the dense backward's candidates).
#[allow(clippy::too_many_arguments)]
pub fn attention_varlen_backward<T: FloatElement>(
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
    cu_seqlens_q: &Buffer<i32>,
    cu_seqlens_k: &Buffer<i32>,
    p: &VarlenProblem,
    opts: &AttentionOptions<'_>,
) -> Result<(), LibError> {
    use super::kernels::{attention_bwd_dkdv_varlen, attention_bwd_dq_varlen};
    const WHAT: &str = "attention_varlen_backward";
    if opts.seqlens_k.is_some() || opts.decode.is_some() || opts.config.is_some() {
        return Err(LibError::Config(format!(
            "{WHAT}: `seqlens_k`, `decode` and `config` do not apply (cu_seqlens give the lengths; the backward's tiles are `backward`)"
        )));
    }
    let whole = whole(p);
    let (hq, hk, tq, tk) = (p.heads_q, p.heads_kv, p.total_q, p.total_k);
    let args = check_problem::<T>(
        WHAT,
        &whole,
        opts,
        &[
            ("q", q.len(), hq, tq, &whole.q),
            ("k", k.len(), hk, tk, &whole.k),
            ("v", v.len(), hk, tk, &whole.v),
            ("out", out.len(), hq, tq, &whole.o),
            ("dout", dout.len(), hq, tq, &whole.o),
        ],
        &[("dq", dq.len(), hq, tq, &whole.q), ("dk", dk.len(), hk, tk, &whole.k), ("dv", dv.len(), hk, tk, &whole.v)],
    )?;
    if p.batch > 65535 {
        return Err(LibError::Shape(format!("{WHAT}: batch = {} must be at most 65535 (grid)", p.batch)));
    }
    if lse.len() < hq * tq {
        return Err(LibError::Shape(format!("{WHAT}: `lse` has {} elements, [{hq}, {tq}] = {} needed", lse.len(), hq * tq)));
    }
    check_offsets(WHAT, dev, p, cu_seqlens_q, cu_seqlens_k, true)?;
    let dp = whole.padded_dim();
    // (untuned, on CUDA up to d128 64×64 tiles in both loops: their
    // dots all take `wgmma`, the loops' tiles arrive by TMA copies of the
    // sequences' dynamic views (`ptx::tma`) and nothing spills; without
    // those maps — `FERROTILE_TMA_DYNAMIC=0` — by `cp.async`, the
    // loop-invariant K, V (Q, dO) tiles in slots of their own:
    // `ptx_assemble`)
    let cfg = opts.backward.unwrap_or_else(|| match dev.kind() {
        ferrotile::DeviceKind::Cuda if dp <= 128 => {
            let c = AttentionConfig {
                bm: 64,
                bn: 64,
                num_warps: 4,
                num_stages: 2,
                split_masks: false,
                overlap: false,
                warp_specialize: false,
                rotate_chains: false,
            };
            BackwardConfig { dkdv: c, dq: c, atomic_dq: false }
        }
        _ => BackwardConfig::default_for(dev, dp),
    });
    // autotuned on CUDA where the work is large (as the forward: its
    // bound), each loop on its own, with the dense backward's candidates
    let flops = 10.0 * hq as f64 * tq as f64 * p.max_seqlen_k.min(tk) as f64 * p.head_dim as f64;
    let tuned = opts.backward.is_none() && dev.kind() == ferrotile::DeviceKind::Cuda && flops >= (1u64 << 33) as f64;
    for (name, c) in [("dkdv", cfg.dkdv), ("dq", cfg.dq)] {
        c.check_tiles(&format!("{WHAT}: backward.{name}."))?;
    }
    if p.batch == 0 || (tq == 0 && tk == 0) {
        return Ok(());
    }
    if opts.deterministic && cfg.atomic_dq {
        return Err(LibError::Config(format!("{WHAT}: `backward.atomic_dq` sums dQ by atomics, whose order varies: not with `deterministic`")));
    }
    let s = |x: usize| x as i64;
    let g = hq / hk;
    // (the scratch in the library's one lock order: the f32 copies, then
    // the workspace — the decode and dense backward take them so; the
    // other order deadlocked against a concurrent decode)
    let acc_len = if g > 1 && tk > 0 && p.max_seqlen_k > 0 { hq * tk * dp } else { 1 };
    let mut ws = crate::scratch::tf32_copies(dev, acc_len, acc_len)?;
    let atomic_ok = !opts.deterministic && ((tuned && super::backward::one_pass_tuned()) || cfg.atomic_dq);
    let mut rows_ws = crate::scratch::workspace_pair(dev, (hq * tq).max(1), if atomic_ok { hq * tq * dp } else { 0 })?;
    let (delta, dq_acc) = rows_ws.pair_mut();
    let (dk_acc, dv_acc) = ws.pair_mut();
    let has_keys = tk > 0 && p.max_seqlen_k > 0;
    let has_queries = tq > 0 && p.max_seqlen_q > 0;
    // The whole backward by one of the two algorithms (see the dense
    // one), with `cfg`'s tiles or (`tuned`) each loop's tuned ones.
    let mut backward = |atomic: bool| -> Result<(), LibError> {
        if atomic && p.max_seqlen_q.min(tq) * dp > i32::MAX as usize {
            // (the loop adds at 32-bit offsets from each sequence's first row)
            return Err(LibError::Shape(format!("{WHAT}: dQ by atomics needs max_seqlen_q · {dp} below 2³¹ (max_seqlen_q = {})", p.max_seqlen_q)));
        }
        // (delta is row-wise: the packed tensors as one batch entry; with
        // atomics it runs with each dK/dV launch, zeroing the f32 dQ, as
        // in the dense backward)
        if tq > 0 && (!atomic || !has_keys) {
            super::backward::launch_delta(dev, out, dout, &mut *delta, &mut *dq_acc, atomic, &whole, dp)?;
        }
        if has_keys {
            let mut dkdv = |c: AttentionConfig| -> Result<(), LibError> {
                if atomic && tq > 0 {
                    super::backward::launch_delta(dev, out, dout, &mut *delta, &mut *dq_acc, true, &whole, dp)?;
                }
                // (no sequence is longer than the tokens: a larger maximum sizes no grid)
                let grid = [p.max_seqlen_k.min(tk).div_ceil(c.bn as usize) as u32, hq as u32, p.batch as u32];
                let launch = LaunchConfig::new(grid).num_warps(c.num_warps).num_stages(c.num_stages);
                attention_bwd_dkdv_varlen::launch(
                    dev,
                    launch,
                    q,
                    k,
                    v,
                    dout,
                    lse,
                    delta,
                    &mut *dk,
                    &mut *dv,
                    &mut *dk_acc,
                    &mut *dv_acc,
                    &mut *dq_acc,
                    cu_seqlens_q,
                    cu_seqlens_k,
                    p.head_dim as i32,
                    tk as i32,
                    args.qk_scale(),
                    args.scale,
                    args.win_left,
                    args.win_right,
                    s(p.q.head),
                    s(p.q.token),
                    s(p.k.head),
                    s(p.k.token),
                    s(p.v.head),
                    s(p.v.token),
                    s(p.o.head),
                    s(p.o.token),
                    s(p.k.head),
                    s(p.k.token),
                    s(p.v.head),
                    s(p.v.token),
                    s(tq),
                    c.bm as i32,
                    c.bn as i32,
                    dp as i32,
                    g as i32,
                    args.mask_hi,
                    args.mask_lo,
                    g > 1,
                    atomic,
                )?;
                Ok(())
            };
            if tuned {
                let (which, name) = if atomic { (3, "dkdvq") } else { (1, "dkdv") };
                tuner(dp, which).run(dev, &varlen_key::<T>(name, p, dp, args.mask_hi, args.mask_lo, false), |tc| {
                    let c = AttentionConfig::from_tune(tc)?;
                    dkdv(c).map_err(crate::lib_to_launch)
                })?;
            } else {
                dkdv(cfg.dkdv)?;
            }
            if g > 1 {
                // (the group's sum is per key token: the packed tensors as one batch entry)
                super::backward::launch_group_sum(dev, dk_acc, dv_acc, &mut *dk, &mut *dv, &whole, dp)?;
            }
        }
        if has_queries && !atomic {
            let mut dq_loop = |c: AttentionConfig| -> Result<(), LibError> {
                let grid = [p.max_seqlen_q.min(tq).div_ceil(c.bm as usize) as u32, hq as u32, p.batch as u32];
                let launch = LaunchConfig::new(grid).num_warps(c.num_warps).num_stages(c.num_stages);
                attention_bwd_dq_varlen::launch(
                    dev,
                    launch,
                    q,
                    k,
                    v,
                    dout,
                    lse,
                    &*delta,
                    &mut *dq,
                    cu_seqlens_q,
                    cu_seqlens_k,
                    p.head_dim as i32,
                    args.qk_scale(),
                    args.scale,
                    args.win_left,
                    args.win_right,
                    s(p.q.head),
                    s(p.q.token),
                    s(p.k.head),
                    s(p.k.token),
                    s(p.v.head),
                    s(p.v.token),
                    s(p.o.head),
                    s(p.o.token),
                    s(p.q.head),
                    s(p.q.token),
                    s(tq),
                    c.bm as i32,
                    c.bn as i32,
                    dp as i32,
                    g as i32,
                    args.mask_hi,
                    args.mask_lo,
                )?;
                Ok(())
            };
            if tuned {
                tuner(dp, 2).run(dev, &varlen_key::<T>("dq", p, dp, args.mask_hi, args.mask_lo, false), |tc| {
                    let c = AttentionConfig::from_tune(tc)?;
                    dq_loop(c).map_err(crate::lib_to_launch)
                })?;
            } else {
                dq_loop(cfg.dq)?;
            }
        }
        if tq > 0 && atomic {
            super::backward::launch_dq_cast(dev, dq_acc, &mut *dq, &whole, args.scale, dp)?;
        }
        Ok(())
    };
    if !tuned || opts.deterministic || !super::backward::one_pass_tuned() {
        return backward(!tuned && cfg.atomic_dq);
    }
    tuner(dp, 4)
        .run(dev, &varlen_key::<T>("pass", p, dp, args.mask_hi, args.mask_lo, false), |tc| backward(tc.get("ATOMIC")? == 1).map_err(crate::lib_to_launch))?;
    Ok(())
}
