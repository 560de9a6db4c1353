//! Attention forward (FlashAttention-2's algorithm), written in the DSL.
//!
//! `out = softmax(Q·Kᵀ·scale + mask)·V` per batch entry and query head, with
//! f32 accumulation, for f16 and bf16 tensors addressed by explicit strides
//! (so `[batch, heads, seq, dim]` and `[batch, seq, heads, dim]` are the same
//! kernel, and neither needs a copy).
//!
//! One program computes `BM` query rows of one head ([`attention_fwd`]):
//! its Q tile stays in registers, a loop walks the keys `BN` at a time with
//! an online softmax (running row maximum and sum, in base 2 with the scale
//! folded into `qk_scale`), and the output is divided by the row sum once
//! at the end. Options, each a constexpr that folds away when unused:
//!
//! - **Causal** masking, aligned to the bottom right when `seqlen_q ≠
//!   seqlen_k` (query row `i` sees keys `j ≤ i + seqlen_k − seqlen_q`, as in
//!   FlashAttention 2.1+), and **sliding windows** (`i + off − left ≤ j ≤ i +
//!   off + right`, `off = seqlen_k − seqlen_q`): the loop skips the key
//!   blocks the mask removes entirely. Causal is the window `(∞, 0)`.
//!   A row that sees no key at all gets zeros (and a log-sum-exp of +∞).
//! - **Grouped heads** (GQA / MQA): query head `h` reads K/V head
//!   `h / (heads_q / heads_kv)`; nothing is copied.
//! - Head dims up to 256: the tile's head dimension is the next power of
//!   two (at least 16); the views' bounds fill the padding with zeros and
//!   the store leaves it out.
//! - The per-row **log-sum-exp** (natural log, `[batch, heads_q, seqlen_q]`
//!   f32), for training and for combining split-KV partial results.
//!
//! Causal programs run heaviest first (program 0 takes the last query
//! block), so the long programs do not end up in the last wave.
//!
//! [`attention_fwd_overlap`] is the same computation with
//! FlashAttention-3's intra-warpgroup overlap written out (the first key
//! block peeled off, each step issuing `Q·K_jᵀ` and then the previous
//! block's `P·V`, whose MMA runs while block `j`'s softmax is computed);
//! the tuner chooses between the two (`AttentionConfig::overlap`).
//!
//! On Hopper the compiler turns the views into TMA bulk copies (tensor maps
//! with a dimension per batch/head term), feeds Q and P to `wgmma` from
//! registers and pipelines the K/V loads; on the CPU interpreter and WGSL
//! the same kernel runs as written. Configurations are autotuned on CUDA
//! GPUs for large problems ([`attention_candidates`]); [`AttentionOptions::config`]
//! forces one.

use crate::LibError;
use ferrotile::prelude::*;
use ferrotile::{DeviceKind, FloatElement};

mod backward;
mod kernels;
mod varlen;
pub use backward::{attention_backward, backward_candidates, BackwardConfig};
pub use kernels::{
    attention_bwd_dkdv, attention_bwd_dkdv_varlen, attention_bwd_dq, attention_bwd_dq_cast, attention_bwd_dq_varlen, attention_bwd_pre, attention_bwd_sum,
    attention_combine, attention_decode, attention_fwd, attention_fwd_overlap, attention_fwd_varlen, attention_fwd_varlen_overlap,
};
pub use varlen::{attention_varlen, attention_varlen_backward, TokenStrides, VarlenProblem};

/// Element strides of a 4-d attention tensor along batch, head and
/// sequence; the head dimension is contiguous (stride 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strides {
    /// Elements between consecutive batch entries.
    pub batch: usize,
    /// Elements between consecutive heads.
    pub head: usize,
    /// Elements between consecutive positions (rows).
    pub seq: usize,
}

impl Strides {
    /// A contiguous `[batch, heads, seq, dim]` tensor.
    pub fn bhsd(heads: usize, seq: usize, dim: usize) -> Self {
        Strides { batch: heads * seq * dim, head: seq * dim, seq: dim }
    }
    /// A contiguous `[batch, seq, heads, dim]` tensor.
    pub fn bshd(heads: usize, seq: usize, dim: usize) -> Self {
        Strides { batch: seq * heads * dim, head: dim, seq: heads * dim }
    }
}

/// The problem: sizes, and the strides of Q, K, V and the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionProblem {
    /// Batch entries.
    pub batch: usize,
    /// Query heads.
    pub heads_q: usize,
    /// K/V heads: divides `heads_q` (GQA; 1: MQA; `heads_q`: MHA).
    pub heads_kv: usize,
    /// Query rows per sequence.
    pub seqlen_q: usize,
    /// Keys per sequence.
    pub seqlen_k: usize,
    /// Head dimension (≤ 256; padded to a power of two inside the kernels).
    pub head_dim: usize,
    /// Strides of `q`.
    pub q: Strides,
    /// Strides of `k`.
    pub k: Strides,
    /// Strides of `v`.
    pub v: Strides,
    /// Strides of `out` (and of `dO`, `dQ` in the backward).
    pub o: Strides,
}

impl AttentionProblem {
    /// Contiguous `[batch, heads, seq, dim]` tensors (the output like Q).
    pub fn bhsd(batch: usize, heads_q: usize, heads_kv: usize, seqlen_q: usize, seqlen_k: usize, head_dim: usize) -> Self {
        let (q, kv) = (Strides::bhsd(heads_q, seqlen_q, head_dim), Strides::bhsd(heads_kv, seqlen_k, head_dim));
        AttentionProblem { batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, q, k: kv, v: kv, o: q }
    }
    /// Contiguous `[batch, seq, heads, dim]` tensors (the output like Q).
    pub fn bshd(batch: usize, heads_q: usize, heads_kv: usize, seqlen_q: usize, seqlen_k: usize, head_dim: usize) -> Self {
        let (q, kv) = (Strides::bshd(heads_q, seqlen_q, head_dim), Strides::bshd(heads_kv, seqlen_k, head_dim));
        AttentionProblem { batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim, q, k: kv, v: kv, o: q }
    }
    /// The head dimension of the kernel's tiles: the next power of two, at
    /// least 16.
    pub fn padded_dim(&self) -> usize {
        self.head_dim.next_power_of_two().max(16)
    }
}

/// Tile configuration of [`attention_fwd`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionConfig {
    /// Query rows per program.
    pub bm: u32,
    /// Keys per loop step.
    pub bn: u32,
    /// Warps per program.
    pub num_warps: u32,
    /// 2 or more: K/V loads run `num_stages − 1` steps ahead.
    pub num_stages: u32,
    /// The key loop runs as two loops, the first without the key-length
    /// and causal masks ([`ferrotile::LaunchConfig::split_masks`]; CUDA).
    pub split_masks: bool,
    /// The softmax of each key block overlaps the previous block's `P·V`
    /// ([`attention_fwd_overlap`]; pays off where `dot`s are asynchronous:
    /// `wgmma`, sm_90a).
    pub overlap: bool,
    /// A producer warpgroup issues the Q/K/V copies, the program's own
    /// warps only compute ([`ferrotile::LaunchConfig::warp_specialize`];
    /// CUDA, sm_90a): no CTA barrier per key block, and `setmaxnreg` gives
    /// the consumers the producer's registers.
    pub warp_specialize: bool,
    /// The key loop's `P·V` runs one iteration behind `QKᵀ` and its
    /// softmax, rotated by the compiler
    /// ([`ferrotile::LaunchConfig::rotate_chains`]; CUDA, `wgmma` tiles of
    /// the plain kernel — the overlapped one is rotated by hand). `false`:
    /// not rotated (the runtime's default for launches that do not say is
    /// on; the library's forward says, so its tuned tiles run as tuned,
    /// whatever `FERROTILE_ROTATE_CHAINS` is). Not among the
    /// tuner's candidates: with the rotated plain tiles among them, two
    /// fresh tunings on the H200 picked the overlapped tiles on every cell
    /// (session 46). `ROT = 1` in a [`ferrotile::TuneConfig`] sets it.
    pub rotate_chains: bool,
}

impl AttentionConfig {
    /// Both tile sizes powers of two ≥ 16 (what every attention kernel's
    /// `dot`s need); the error names them as `{prefix}bm` / `{prefix}bn`.
    fn check_tiles(&self, prefix: &str) -> Result<(), LibError> {
        for (name, x) in [("bm", self.bm), ("bn", self.bn)] {
            if x < 16 || !x.is_power_of_two() {
                return Err(LibError::Config(format!("{prefix}{name} = {x} must be a power of two ≥ 16")));
            }
        }
        Ok(())
    }

    /// The configuration an [`attention_candidates`] entry describes.
    pub fn from_tune(tc: &ferrotile::TuneConfig) -> ferrotile::Result<Self> {
        let split_masks = tc.values.get("SPLIT").is_some_and(|&v| v != 0);
        let overlap = tc.values.get("OV").is_some_and(|&v| v != 0);
        let warp_specialize = tc.values.get("WS").is_some_and(|&v| v != 0);
        let rotate_chains = tc.values.get("ROT").is_some_and(|&v| v != 0);
        Ok(AttentionConfig {
            bm: tc.get("BM")? as u32,
            bn: tc.get("BN")? as u32,
            num_warps: tc.num_warps,
            num_stages: tc.num_stages,
            split_masks,
            overlap,
            warp_specialize,
            rotate_chains,
        })
    }

    /// The configuration used without the autotuner: on GPUs the best
    /// measured on the H200 for the head dimension (RESULTS, "Attention";
    /// the masks split off at d64: +13% there, session 29; a producer
    /// warpgroup at d128: +10 % / +13 % causal, session 33);
    /// small tiles on the CPU interpreter and WGSL (whose workgroup storage
    /// may be 32 KiB: lavapipe).
    pub fn default_for(dev: &Device, padded_dim: usize) -> Self {
        Self::default_for_kind(dev.kind(), padded_dim)
    }

    /// [`AttentionConfig::default_for`] a device of this kind.
    pub fn default_for_kind(kind: DeviceKind, padded_dim: usize) -> Self {
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
        match kind {
            DeviceKind::Cuda if padded_dim <= 64 => AttentionConfig { split_masks: true, overlap: true, ..c(128, 64, 4, 2) },
            DeviceKind::Cuda if padded_dim <= 128 => AttentionConfig { overlap: true, warp_specialize: true, ..c(128, 128, 8, 2) },
            DeviceKind::Cuda => c(64, 64, 4, 2),
            _ if padded_dim <= 64 => c(32, 32, 4, 1),
            _ => c(16, 16, 4, 1),
        }
    }
}

/// The autotuner's candidates for head dimension `padded_dim` (sizes from
/// the H200 sweeps of `attn-user`: RESULTS, "Attention written by a user").
pub fn attention_candidates(padded_dim: usize) -> Vec<ferrotile::TuneConfig> {
    let c = |bm: i64, bn: i64, w: u32, s: u32| ferrotile::TuneConfig::new(w).with("BM", bm).with("BN", bn).stages(s);
    let tiles = if padded_dim <= 64 {
        vec![c(128, 64, 4, 2), c(64, 64, 4, 3), c(128, 128, 8, 2), c(128, 64, 8, 2)]
    } else if padded_dim <= 128 {
        // (128×64 on 4 warps spills over a kilobyte here: left out)
        vec![c(128, 128, 8, 2), c(128, 64, 8, 2), c(64, 64, 4, 3)]
    } else {
        // (every d256 tile spills ~1.2 KB on sm_90: Q's 64 registers of
        // `wgmma` A fragments on top of a 128-register accumulator; BN 32
        // would put P·V, K = 32, on mma.sync)
        vec![c(64, 64, 4, 2), c(128, 64, 8, 2)]
    };
    // at d64 each with the key loop's masks split off and without
    // (`SPLIT`: `AttentionConfig::split_masks`; measured on the H200,
    // session 29: the tuner takes the split on all four d64 cells, +13%).
    // Not above: at d128 the two copies of the loop cost 7% (255
    // registers, spills) and the 128×128 tile's rings, one set per loop,
    // no longer fit in shared memory.
    // each also with the softmax overlapping the previous block's P·V
    // (`OV`: `AttentionConfig::overlap`; measured on the H200, session 32:
    // the tuner takes it on all eight d64/d128 cells, +11–20 %). Not at
    // d256: the peeled first and last blocks take two more 32 KB slots
    // (128×64 no longer fits) and nothing was measured there.
    if padded_dim > 128 {
        return tiles;
    }
    let tiles: Vec<_> = tiles.into_iter().flat_map(|t| [t.clone().with("OV", 1), t.with("OV", 0)]).collect();
    // at d128 the overlapped 8-warp tiles also with a producer warpgroup
    // (`WS`: `AttentionConfig::warp_specialize`; measured on the H200,
    // session 33: the user kernel's 128×128 +4–12 %, causal +13–15 %).
    // Not at d64: there it cost 5–12 % on the 8-warp tiles, and the best
    // tiles have one warpgroup.
    if padded_dim > 64 {
        let ws = tiles.iter().filter(|t| t.num_warps == 8 && t.values.get("OV") == Some(&1)).map(|t| t.clone().with("WS", 1));
        return ws.chain(tiles.iter().cloned()).collect();
    }
    let mut out = vec![];
    for t in tiles {
        out.push(t.clone().with("SPLIT", 1));
        out.push(t.with("SPLIT", 0));
    }
    out
}

/// Configuration of the decode path ([`attention_decode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeConfig {
    /// Keys per loop step.
    pub bn: u32,
    /// Warps per program.
    pub num_warps: u32,
    /// Pipelining depth of the key loop.
    pub num_stages: u32,
    /// Key splits (flash-decoding) before the combine step; `None`: as
    /// many as fill the GPU (1 on the CPU interpreter and WGSL).
    pub splits: Option<u32>,
}

impl DecodeConfig {
    /// The default for a tile of `rows` query rows (all query heads of a
    /// K/V head × the query length, padded to a power of two ≥ 16): on
    /// CUDA 64-key tiles in a 3-deep ring, on 4 warps, 2 for 32-row tiles
    /// (the best of nine configurations on the H200: RESULTS, "Attention in
    /// the library", decode); small tiles elsewhere.
    pub fn default_for(dev: &Device, rows: usize) -> Self {
        let rows = rows.next_power_of_two().max(16);
        match dev.kind() {
            DeviceKind::Cuda => DecodeConfig { bn: 64, num_warps: if rows == 32 { 2 } else { 4 }, num_stages: 3, splits: None },
            _ => DecodeConfig { bn: 16, num_warps: 4, num_stages: 1, splits: None },
        }
    }
}

/// A paged K/V cache, as vLLM and FlashAttention's `block_table` keep
/// it: K and V hold `num_pages` pages of `page_size` keys each, and key
/// `c` of batch entry `b` is row `c % page_size` of page `block_table[b ·
/// max_pages + c / page_size]`. The problem's `k` / `v` strides then
/// describe the cache: `batch` steps from one page to the next, `seq`
/// from one row of a page to the next, `head` between K/V heads (vLLM's
/// `[num_pages, page_size, heads_kv, head_dim]` is
/// [`Strides::bshd`]`(heads_kv, page_size, head_dim)`), and `seqlen_k`
/// bounds every entry's keys (`seqlens_k` gives each its own count).
/// Decode path only (`seqlen_q ≤ 16`).
///
/// The table lives on the device and is not read on the host: an entry
/// outside `0..num_pages` skips its keys (they are never read, as keys
/// past `seqlens_k`).
#[derive(Clone, Copy, Debug)]
pub struct PagedKv<'a> {
    /// `[batch, max_pages]` page indices (i32).
    pub block_table: &'a Buffer<i32>,
    /// Entries per batch row of `block_table`.
    pub max_pages: usize,
    /// Keys per page: a power of two.
    pub page_size: usize,
    /// Pages in the K and V caches.
    pub num_pages: usize,
}

/// Options of [`attention`].
#[derive(Clone, Copy, Debug, Default)]
pub struct AttentionOptions<'a> {
    /// A paged K/V cache ([`PagedKv`]); `None`: K and V are `[batch,
    /// heads_kv, seqlen_k, head_dim]` tensors as the strides say.
    pub paged: Option<PagedKv<'a>>,
    /// Keys of each batch entry (decode against a KV cache of `seqlen_k`
    /// rows, of which entry `b` uses the first `seqlens_k[b]`; values are
    /// clamped to `0..=seqlen_k`). Only with the decode path (`seqlen_q ≤
    /// 16`, no window). The causal mask is then aligned to each entry's
    /// own key count.
    pub seqlens_k: Option<&'a Buffer<i32>>,
    /// Decode path's configuration; `None`: [`DecodeConfig::default_for`].
    /// (Not autotuned yet.)
    pub decode: Option<DecodeConfig>,
    /// Causal mask, aligned to the bottom right (see the module doc).
    pub causal: bool,
    /// Softmax scale; `None`: `1/√head_dim`.
    pub scale: Option<f32>,
    /// Sliding window: keys at most `left` before and `right` after the
    /// query's diagonal (`None`: unbounded on that side). With `causal`,
    /// `right` is 0.
    pub window: (Option<usize>, Option<usize>),
    /// Tile configuration; `None` picks one (autotuned on GPUs for large
    /// problems).
    pub config: Option<AttentionConfig>,
    /// Tile configurations of [`attention_backward`]; `None` picks them
    /// (autotuned on GPUs for large problems).
    pub backward: Option<BackwardConfig>,
    /// The backward sums dQ in a fixed order (its second pass over the
    /// keys), so that runs on the same inputs give the same bits;
    /// otherwise the autotuner may pick FlashAttention-2's single pass
    /// with dQ by atomics where it is faster (`backward.atomic_dq` forces
    /// it; the tuner's pick is off by default — measured slower than the
    /// two passes on the H200 — and on with `FERROTILE_ATTN_ONE_PASS=1`).
    pub deterministic: bool,
}

fn max_index(batch: usize, heads: usize, seq: usize, dim: usize, s: &Strides) -> Option<usize> {
    let last = |n: usize, st: usize| (n - 1).checked_mul(st);
    last(batch, s.batch)?.checked_add(last(heads, s.head)?)?.checked_add(last(seq, s.seq)?)?.checked_add(dim - 1)
}

/// A tensor argument: name, length, heads, sequence length, strides.
type Tensor<'s> = (&'static str, usize, usize, usize, &'s Strides);

/// The checks every attention entry point shares, for the function `what`:
/// dtype, sizes, heads, scale, grid limits; each input `(name, len,
/// heads, seq, strides)` must hold its `[batch, heads, seq, head_dim]`
/// elements, and each output too, with no two of its elements overlapping
/// (each is written by one program). Returns the launch's arguments.
fn check_problem<T: FloatElement>(
    what: &str,
    p: &AttentionProblem,
    opts: &AttentionOptions<'_>,
    inputs: &[Tensor<'_>],
    outputs: &[Tensor<'_>],
) -> Result<Args, LibError> {
    use ferrotile::ir::DType;
    if !matches!(T::DTYPE, DType::F16 | DType::BF16) {
        return Err(LibError::Config(format!("{what}: dtype {} is not supported (f16 or bf16)", T::DTYPE)));
    }
    if p.head_dim == 0 || p.head_dim > 256 {
        return Err(LibError::Shape(format!("{what}: head_dim = {} must be in 1..=256", p.head_dim)));
    }
    if p.heads_q == 0 || p.heads_kv == 0 || !p.heads_q.is_multiple_of(p.heads_kv) {
        return Err(LibError::Shape(format!("{what}: heads_kv = {} must divide heads_q = {} (and neither be 0)", p.heads_kv, p.heads_q)));
    }
    if let Some(s) = opts.scale {
        if !s.is_finite() {
            return Err(LibError::Config(format!("{what}: scale must be finite, got {s}")));
        }
    }
    if p.batch > 65535 || p.heads_q > 65535 {
        return Err(LibError::Shape(format!("{what}: batch = {} and heads_q = {} must be at most 65535 (grid)", p.batch, p.heads_q)));
    }
    let lim = i32::MAX as usize / 2;
    if p.seqlen_q > lim || p.seqlen_k > lim {
        return Err(LibError::Shape(format!("{what}: seqlen_q = {} and seqlen_k = {} must be below 2^30", p.seqlen_q, p.seqlen_k)));
    }
    let d = p.head_dim;
    for &(name, len, heads, seq, s) in inputs.iter().chain(outputs) {
        if seq == 0 || p.batch == 0 {
            continue;
        }
        match max_index(p.batch, heads, seq, d, s) {
            Some(m) if m < len && m <= i64::MAX as usize => {}
            _ => {
                return Err(LibError::Shape(format!(
                    "{what}: `{name}` has {len} elements; its shape [{}, {heads}, {seq}, {d}] with strides {s:?} reaches past them",
                    p.batch
                )))
            }
        }
    }
    // an output's strides, sorted, must each step over the span below
    for &(name, _, heads, seq, s) in outputs {
        if seq == 0 || p.batch == 0 {
            continue;
        }
        let mut dims = [(s.batch, p.batch), (s.head, heads), (s.seq, seq)];
        dims.sort();
        let mut span = d;
        for (st, n) in dims {
            if n > 1 && st < span {
                return Err(LibError::Shape(format!("{what}: `{name}` strides {s:?} make elements overlap (head_dim {d})")));
            }
            if n > 1 {
                span += st * (n - 1);
            }
        }
    }
    let (left, right) = opts.window;
    let right = if opts.causal { Some(0) } else { right };
    // (beyond the other sequence's length a bound no longer changes the
    // mask; clamped so that the kernel's index arithmetic stays in i32)
    let clamp = |w: usize| w.min(p.seqlen_q + p.seqlen_k) as i32;
    let (mask_lo, win_left) = left.map_or((false, 0), |w| (true, clamp(w)));
    let (mask_hi, win_right) = right.map_or((false, 0), |w| (true, clamp(w)));
    let scale = opts.scale.unwrap_or(1.0 / (d as f32).sqrt());
    Ok(Args { p: *p, scale, mask_lo, mask_hi, win_left, win_right })
}

/// Attention forward: `out = softmax(Q·Kᵀ·scale + mask)·V` (see the
/// module doc), and the per-row log-sum-exp into `lse` (`[batch, heads_q,
/// seqlen_q]`, f32) when given. Every size, stride and option is checked
/// first; errors name the argument.
///
/// ```
/// use ferrotile::{f16, Device};
/// use ferrotile_kernels::attention::{attention, AttentionOptions, AttentionProblem};
/// let dev = Device::cpu();
/// // batch 1, 2 query heads sharing 1 K/V head (MQA), 3 queries, 5 keys, d = 64
/// let p = AttentionProblem::bhsd(1, 2, 1, 3, 5, 64);
/// let q = dev.from_slice(&vec![f16::ZERO; 2 * 3 * 64])?; // equal scores everywhere
/// let k = dev.from_slice(&vec![f16::ONE; 5 * 64])?;
/// let v = dev.from_slice(&(0..5 * 64).map(|i| f16::from_f32((i / 64) as f32)).collect::<Vec<_>>())?;
/// let mut out = dev.zeros::<f16>(2 * 3 * 64)?;
/// attention(&dev, &q, &k, &v, &mut out, None, &p, &AttentionOptions::default())?;
/// // uniform weights over the 5 keys: the mean of 0..5
/// assert!(out.to_vec()?.iter().all(|o| (o.to_f32() - 2.0).abs() < 1e-3));
/// // bottom-right causal: query i sees keys 0..=i + 2
/// let opts = AttentionOptions { causal: true, ..Default::default() };
/// attention(&dev, &q, &k, &v, &mut out, None, &p, &opts)?;
/// assert!((out.to_vec()?[0].to_f32() - 1.0).abs() < 1e-3); // mean of 0, 1, 2
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn attention<T: FloatElement>(
    dev: &Device,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    out: &mut Buffer<T>,
    lse: Option<&mut Buffer<f32>>,
    p: &AttentionProblem,
    opts: &AttentionOptions<'_>,
) -> Result<(), LibError> {
    if p.batch == 0 || p.seqlen_q == 0 {
        check_problem::<T>("attention", p, opts, &[], &[])?;
        return Ok(());
    }
    let kv: &[Tensor<'_>] = &[("k", k.len(), p.heads_kv, p.seqlen_k, &p.k), ("v", v.len(), p.heads_kv, p.seqlen_k, &p.v)];
    let inputs: Vec<Tensor<'_>> =
        std::iter::once(("q", q.len(), p.heads_q, p.seqlen_q, &p.q)).chain(kv.iter().copied().filter(|_| opts.paged.is_none())).collect();
    let args = check_problem::<T>("attention", p, opts, &inputs, &[("out", out.len(), p.heads_q, p.seqlen_q, &p.o)])?;
    if let Some(pg) = &opts.paged {
        check_paged(p, pg, k.len(), v.len())?;
    }
    let d = p.head_dim;
    let lse_buf = match lse {
        Some(l) => {
            let need = p.batch * p.heads_q * p.seqlen_q;
            if l.len() < need {
                return Err(LibError::Shape(format!(
                    "attention: `lse` has {} elements, [{}, {}, {}] = {need} needed",
                    l.len(),
                    p.batch,
                    p.heads_q,
                    p.seqlen_q
                )));
            }
            Some(l)
        }
        None => None,
    };
    let (left, right) = opts.window;
    let right = if opts.causal { Some(0) } else { right };
    let (mask_lo, mask_hi) = (args.mask_lo, args.mask_hi);
    // decode: a few query rows per K/V head (all its query heads' rows in
    // one tile) against many keys, split over programs when the grid would
    // not fill the GPU
    let rows = (p.heads_q / p.heads_kv) * p.seqlen_q;
    // (a forced `config` is the forward kernel's; on WGSL adapters, which
    // may have 32 KiB of workgroup storage — lavapipe —, the decode tile of
    // Q, `[rows, head dim]` padded, is held to 4096 elements)
    let fits = dev.kind() == DeviceKind::Cuda || rows.next_power_of_two().max(16) * p.padded_dim() <= 4096;
    let decode = p.seqlen_q <= 16 && rows <= 128 && fits && left.is_none() && (right.is_none() || opts.causal) && opts.config.is_none();
    if let Some(sl) = opts.seqlens_k {
        if !decode {
            return Err(LibError::Config(format!(
                "attention: `seqlens_k` needs the decode path (seqlen_q ≤ 16 with at most 128 query rows per K/V head — on WGSL at most 4096 elements of them —, no window, no forced `config`); here seqlen_q = {}, {rows} rows",
                p.seqlen_q
            )));
        }
        if sl.len() < p.batch {
            return Err(LibError::Shape(format!("attention: `seqlens_k` has {} elements, batch = {}", sl.len(), p.batch)));
        }
    }
    if opts.paged.is_some() && !decode {
        return Err(LibError::Config(format!(
            "attention: a paged K/V cache (`paged`) needs the decode path (seqlen_q ≤ 16 with at most 128 query rows per K/V head — on WGSL at most 4096 elements of them —, no window, no forced `config`); here seqlen_q = {}, {rows} rows",
            p.seqlen_q
        )));
    }
    if decode || opts.decode.is_some() {
        if !decode {
            return Err(LibError::Config("attention: `decode` config given but the problem does not take the decode path (seqlen_q ≤ 16, no window, no forced `config`; see `seqlens_k`)".into()));
        }
        return decode_fwd(dev, q, k, v, out, lse_buf, &args, opts);
    }
    let dp = p.padded_dim();
    let mut placeholder;
    let (lse_ref, has_lse): (&mut Buffer<f32>, bool) = match lse_buf {
        Some(l) => (l, true),
        None => {
            placeholder = crate::scratch::workspace(dev, 1)?;
            // (never written: `LSE` is false)
            (placeholder.buffer(), false)
        }
    };
    if let Some(cfg) = opts.config {
        return launch_fwd(dev, q, k, v, out, lse_ref, has_lse, &args, cfg);
    }
    let flops = 4.0 * (p.batch * p.heads_q) as f64 * p.seqlen_q as f64 * p.seqlen_k as f64 * d as f64;
    // (the candidates are sized for CUDA GPUs: WGSL adapters may have
    // 32 KiB of workgroup storage — lavapipe — and take the default)
    if dev.kind() != DeviceKind::Cuda || flops < (1u64 << 33) as f64 {
        return launch_fwd(dev, q, k, v, out, lse_ref, has_lse, &args, AttentionConfig::default_for(dev, dp));
    }
    let b2 = |x: usize| x.max(1).next_power_of_two();
    let key = format!(
        "{}|d{}|g{}|{}{}{}|b*h<={}|sq<={}|sk<={}",
        T::DTYPE,
        dp,
        p.heads_q / p.heads_kv,
        if mask_hi { "hi" } else { "" },
        if mask_lo { "lo" } else { "" },
        if has_lse { "|lse" } else { "" },
        b2(p.batch * p.heads_q),
        b2(p.seqlen_q),
        b2(p.seqlen_k)
    );
    let tuner = tuner(dp);
    tuner.run(dev, &key, |tc| {
        let cfg = AttentionConfig::from_tune(tc)?;
        launch_fwd(dev, q, k, v, out, lse_ref, has_lse, &args, cfg).map_err(crate::lib_to_launch)
    })?;
    Ok(())
}

/// The head-dimension class every attention tuner is kept per: its index
/// (0, 1, 2) and name in the tuners' cache names (`d64`, `d128`, `d256`).
pub(super) fn dim_class(padded_dim: usize) -> (usize, &'static str) {
    match padded_dim {
        0..=64 => (0, "d64"),
        65..=128 => (1, "d128"),
        _ => (2, "d256"),
    }
}

fn tuner(padded_dim: usize) -> &'static ferrotile::Autotuner {
    use std::sync::OnceLock;
    static T: [OnceLock<ferrotile::Autotuner>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let (i, name) = dim_class(padded_dim);
    T[i].get_or_init(|| ferrotile::Autotuner::new(&format!("attention_{name}"), attention_candidates(padded_dim)).reps(5))
}

/// The launch's arguments after the checks.
struct Args {
    p: AttentionProblem,
    scale: f32,
    mask_lo: bool,
    mask_hi: bool,
    win_left: i32,
    win_right: i32,
}

impl Args {
    /// The kernels' scale: base-2 exponents (`scale · log2 e`).
    fn qk_scale(&self) -> f32 {
        self.scale * std::f32::consts::LOG2_E
    }

    /// Whether the kernels may fold the scale into `exp2`'s argument
    /// (their `FOLD`: only a positive scale keeps the row maximum's order).
    fn fold(&self) -> bool {
        self.qk_scale() > 0.0
    }
}

#[allow(clippy::too_many_arguments)]
fn launch_fwd<T: FloatElement>(
    dev: &Device,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    out: &mut Buffer<T>,
    lse: &mut Buffer<f32>,
    has_lse: bool,
    a: &Args,
    cfg: AttentionConfig,
) -> Result<(), LibError> {
    let p = &a.p;
    cfg.check_tiles("attention: config ")?;
    let grid = [p.seqlen_q.div_ceil(cfg.bm as usize) as u32, p.heads_q as u32, p.batch as u32];
    let mut launch =
        LaunchConfig::new(grid).num_warps(cfg.num_warps).num_stages(cfg.num_stages).split_masks(cfg.split_masks).warp_specialize(cfg.warp_specialize);
    // (the compiler's rotation only where the configuration asks: the
    // forward's tiles are rotated by hand, `OV`)
    launch = launch.rotate_chains(cfg.rotate_chains);
    let qk_scale = a.qk_scale();
    let s = |x: usize| x as i64;
    let (lb, lh) = (s(p.heads_q * p.seqlen_q), s(p.seqlen_q));
    // (the two kernels take the same arguments)
    macro_rules! go {
        ($kernel:ident) => {
            $kernel::launch(
                dev,
                launch,
                q,
                k,
                v,
                out,
                lse,
                p.seqlen_q as i32,
                p.seqlen_k as i32,
                p.head_dim as i32,
                qk_scale,
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
                lb,
                lh,
                cfg.bm as i32,
                cfg.bn as i32,
                p.padded_dim() as i32,
                (p.heads_q / p.heads_kv) as i32,
                a.mask_hi,
                a.mask_lo,
                has_lse,
                a.fold(),
            )
        };
    }
    if cfg.overlap {
        go!(attention_fwd_overlap)?;
    } else {
        go!(attention_fwd)?;
    }
    Ok(())
}

/// The decode path: [`attention_decode`] over `splits` key ranges, then
/// [`attention_combine`] when there is more than one.
#[allow(clippy::too_many_arguments)]
/// The checks of a paged cache: the table's size, a power-of-two page
/// size, keys per entry within the table, and K and V holding `[num_pages,
/// heads_kv, page_size, head_dim]` by their strides.
fn check_paged(p: &AttentionProblem, pg: &PagedKv<'_>, k_len: usize, v_len: usize) -> Result<(), LibError> {
    if !pg.page_size.is_power_of_two() || pg.page_size > 1 << 20 {
        return Err(LibError::Config(format!("attention: paged `page_size` = {} must be a power of two (at most 2^20)", pg.page_size)));
    }
    if pg.num_pages == 0 || pg.num_pages > i32::MAX as usize || pg.max_pages == 0 {
        return Err(LibError::Shape(format!(
            "attention: paged `num_pages` = {} and `max_pages` = {} must be at least 1 (num_pages below 2^31)",
            pg.num_pages, pg.max_pages
        )));
    }
    let keys = pg.max_pages.checked_mul(pg.page_size);
    if keys.is_none_or(|x| x < p.seqlen_k) {
        return Err(LibError::Shape(format!(
            "attention: paged `seqlen_k` = {} is more than `max_pages` × `page_size` = {} × {} keys",
            p.seqlen_k, pg.max_pages, pg.page_size
        )));
    }
    let need = p.batch.checked_mul(pg.max_pages).filter(|&n| n <= i32::MAX as usize);
    if need.is_none_or(|n| pg.block_table.len() < n) {
        return Err(LibError::Shape(format!(
            "attention: paged `block_table` has {} elements, [batch, max_pages] = [{}, {}] needed",
            pg.block_table.len(),
            p.batch,
            pg.max_pages
        )));
    }
    for (name, len, st) in [("k", k_len, &p.k), ("v", v_len, &p.v)] {
        match max_index(pg.num_pages, p.heads_kv, pg.page_size, p.head_dim, st) {
            Some(m) if m < len && m <= i64::MAX as usize => {}
            _ => {
                return Err(LibError::Shape(format!(
                    "attention: paged `{name}` has {len} elements; its pages [{}, {}, {}, {}] with strides {st:?} reach past them",
                    pg.num_pages, p.heads_kv, pg.page_size, p.head_dim
                )))
            }
        }
    }
    Ok(())
}

fn decode_fwd<T: FloatElement>(
    dev: &Device,
    q: &Buffer<T>,
    k: &Buffer<T>,
    v: &Buffer<T>,
    out: &mut Buffer<T>,
    lse: Option<&mut Buffer<f32>>,
    a: &Args,
    opts: &AttentionOptions<'_>,
) -> Result<(), LibError> {
    let p = &a.p;
    let g = p.heads_q / p.heads_kv;
    let cfg = opts.decode.unwrap_or_else(|| DecodeConfig::default_for(dev, g * p.seqlen_q));
    if cfg.bn < 16 || !cfg.bn.is_power_of_two() {
        return Err(LibError::Config(format!("attention: decode bn = {} must be a power of two ≥ 16", cfg.bn)));
    }
    let bm = (g * p.seqlen_q).next_power_of_two().max(16);
    // (a paged key tile `[bn, dp]` of the accumulator's shape `[bm, dp]`
    // would take its mma layout — layouts are per shape — and be copied 4
    // bytes at a time; views of a contiguous cache take TMA instead)
    let cfg = if opts.decode.is_none() && opts.paged.is_some() && cfg.bn as usize == bm { DecodeConfig { bn: 32, ..cfg } } else { cfg };
    let bn = cfg.bn as usize;
    let tiles = p.seqlen_k.div_ceil(bn).max(1);
    let splits = match cfg.splits {
        Some(0) => return Err(LibError::Config("attention: decode splits must be at least 1".into())),
        Some(sp) => sp as usize,
        None => match dev.multiprocessors() {
            // two programs per SM, each over at least two key tiles
            Some(sms) => (2 * sms as usize).div_ceil(p.batch * p.heads_kv).min(tiles.div_ceil(2)).clamp(1, 64),
            None => 1,
        },
    };
    // (whole tiles per split; then no split is empty but the last)
    let chunk = tiles.div_ceil(splits) * bn;
    let splits = p.seqlen_k.div_ceil(chunk).max(1);
    if splits > 1024 {
        return Err(LibError::Config(format!("attention: {splits} decode splits (at most 1024)")));
    }
    let dp = p.padded_dim();
    let nq = p.seqlen_q;
    let rows_total = p.batch * p.heads_q * nq;
    let split = splits > 1;
    let mut parts = crate::scratch::tf32_copies(dev, if split { rows_total * splits * dp } else { 1 }, if split { rows_total * splits } else { 1 })?;
    let (part_o, part_l) = parts.pair_mut();
    let mut lse_scratch;
    let (lse_ref, has_lse): (&mut Buffer<f32>, bool) = match lse {
        Some(l) => (l, true),
        None => {
            lse_scratch = crate::scratch::workspace(dev, 1)?;
            (lse_scratch.buffer(), false)
        }
    };
    let seq_placeholder;
    let seqlens: &Buffer<i32> = match opts.seqlens_k {
        Some(s) => s,
        None => {
            seq_placeholder = crate::scratch::placeholder::<i32>(dev)?;
            &seq_placeholder
        }
    };
    let table_placeholder;
    let (table, max_pages, page_shift, num_pages) = match &opts.paged {
        Some(pg) => (pg.block_table, pg.max_pages as i32, pg.page_size.trailing_zeros() as i32, pg.num_pages as i32),
        None => {
            table_placeholder = crate::scratch::placeholder::<i32>(dev)?;
            (&*table_placeholder, 0, 0, 0)
        }
    };
    let s = |x: usize| x as i64;
    let (lb, lh) = (s(p.heads_q * nq), s(nq));
    let grid = [splits as u32, p.heads_kv as u32, p.batch as u32];
    // (decode's chained dots run on `mma.sync`: nothing to rotate)
    let launch = LaunchConfig::new(grid).num_warps(cfg.num_warps).num_stages(cfg.num_stages).rotate_chains(false);
    attention_decode::launch(
        dev,
        launch,
        q,
        k,
        v,
        out,
        lse_ref,
        part_o,
        part_l,
        seqlens,
        table,
        max_pages,
        page_shift,
        num_pages,
        nq as i32,
        p.seqlen_k as i32,
        p.head_dim as i32,
        a.qk_scale(),
        chunk as i32,
        p.heads_q as i32,
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
        lb,
        lh,
        bm as i32,
        cfg.bn as i32,
        dp as i32,
        g as i32,
        a.mask_hi,
        opts.seqlens_k.is_some(),
        split,
        has_lse,
        opts.paged.is_some(),
        a.fold(),
    )?;
    if split {
        // (it reads the partials the kernel above wrote: a dependent launch)
        let launch = LaunchConfig::new([rows_total as u32, 1, 1]).num_warps(4).dependent_launch(true);
        attention_combine::launch(
            dev,
            launch,
            part_o,
            part_l,
            out,
            lse_ref,
            splits as i32,
            nq as i32,
            p.heads_q as i32,
            p.head_dim as i32,
            s(p.o.batch),
            s(p.o.head),
            s(p.o.seq),
            lb,
            lh,
            splits.next_power_of_two() as i32,
            dp as i32,
            has_lse,
        )?;
    }
    Ok(())
}
