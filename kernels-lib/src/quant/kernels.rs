//! The quantized-weight GEMM kernel, written in the DSL as a user of the
//! GPTQ-style Triton kernels writes it: nothing here is special to the
//! compiler. Its speed rests on three general mechanisms of the PTX
//! backend (`backends/src/plan/axis.rs`, `ptx/assign.rs::load_runs`,
//! `ptx/emit/memory.rs::load_once_per_run`): the packed word of 8 (or 4)
//! weights is addressed once per weight row (`kk >> 3`), the layout keeps
//! each run of 8 rows in one thread and the word is loaded once per run;
//! scale and zero-point rows are addressed the same way (broadcast along
//! K); and `(q − z)` — bounded by the range analysis to `[−15, 15]` —
//! converts to float by an OR into a float's mantissa instead of an
//! `I2F`.

use crate::epilogue::activation;
use ferrotile::prelude::*;

/// `out[m, n] = act(Σ_k x[m, k] · ((q[k, n] − z[g, n]) · s[g, n]) + bias[n])` with
/// `g = k / GROUP` (a constexpr: the group index is a shift, not a run-time
/// division per K step; per-channel scales pass `GROUP = K`), for `BITS`-bit weights packed `32 / BITS` to an `i32`
/// along K (`q[k, n] = (qweight[k / P, n] >> sh(k)) & (2^BITS − 1)`, `P =
/// 32 / BITS`, with the fields paired as `QuantWeights::upload` stores
/// them: `sh(k) = BITS·((k % P) / 2) + 16·(k % 2)`), zero points packed the same way along N
/// (`qzeros[g, n / P]`) or, without `HAS_ZEROS`, `2^(BITS−1)` (symmetric).
///
/// One program computes a `BM × BN` tile of `out` over the K range
/// `[program_id(2) · k_split, +k_split)`; with `SPLIT` it writes its f32
/// partial to `ws[program_id(2)]` (`[splits, m, n]`, summed by
/// `gemm::gemm_splitk_reduce`, which applies the epilogue), else the tile
/// through the epilogue — `bias` added (`HAS_BIAS`), then `ACT` (0 none, 1
/// ReLU, 2 exact GELU), in f32 — cast to `T`. `BK` divides
/// `GROUP` (or `GROUP ≥ k`: one group) and `k_split`, so a K step reads one
/// scale row. K is a multiple of `P`; with zero points N is too. `EVEN`:
/// K is a multiple of `BK` and N of `BN` (the launch checks), so the
/// weights, scales and zero points are read without masks — Triton's
/// `EVEN_K` (only the rows of `x` past M stay masked).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn wq_gemm_kernel<
    T: Float,
    const BM: i32,
    const BN: i32,
    const BK: i32,
    const BITS: i32,
    const GROUP: i32,
    const HAS_ZEROS: bool,
    const SPLIT: bool,
    const EVEN: bool,
    const HAS_BIAS: bool,
    const ACT: i32,
>(
    x: Ptr<T>,
    qweight: Ptr<i32>,
    scales: Ptr<T>,
    qzeros: Ptr<i32>,
    out: Ptr<T>,
    ws: Ptr<f32>,
    bias: Ptr<T>,
    m: i32,
    n: i32,
    k: i32,
    k_split: i32,
    sxm: i64,
    som: i64,
) {
    // P = 32 / BITS weights per word: k / P is k >> (4 − BITS/4) for 4 and 8 bits
    let word_shift = 4 - BITS / 4;
    let lane_mask = 32 / BITS - 1;
    let qmask = (1 << BITS) - 1;
    let rm = program_id(0) * BM + arange(0, BM);
    let rn = program_id(1) * BN + arange(0, BN);
    let m_ok = expand_dims(rm < m, 1);
    let n_ok = expand_dims(rn < n, 0);
    let k_lo = program_id(2) * k_split;
    let k_hi = minimum(k_lo + k_split, k);
    let xrow = x + expand_dims((rm as i64) * sxm, 1);
    let wcol = qweight + expand_dims(rn as i64, 0);
    let mut acc = zeros([BM, BN], f32);
    for k0 in (k_lo..k_hi).step_by(BK) {
        let kk = k0 + arange(0, BK);
        let k_ok = expand_dims(kk < k, 1);
        let xp = xrow + expand_dims(kk as i64, 0);
        // each word once per weight row: runs of P equal addresses along K
        let wp = wcol + expand_dims(((kk >> word_shift) as i64) * (n as i64), 1);
        // this step's scale (and zero-point) row, broadcast along K
        let g = (k0 / GROUP) as i64;
        let sp = broadcast_to(expand_dims(scales + g * (n as i64) + (rn as i64), 0), [BK, BN]);
        let zp = broadcast_to(expand_dims(qzeros + g * ((n >> word_shift) as i64) + ((rn >> word_shift) as i64), 0), [BK, BN]);
        // (the masked reads, replaced by plain ones under `EVEN`: what a
        // specialization does not use is dropped)
        let mut a = load(xp, m_ok & expand_dims(kk < k, 0), 0.0);
        let mut words = load(wp, k_ok & n_ok, 0);
        let mut s = load(sp, k_ok & n_ok, 0.0);
        let mut zw = full([BK, BN], 0, i32);
        if HAS_ZEROS {
            zw = load(zp, k_ok & n_ok, 0);
        }
        if EVEN {
            a = load(xp, m_ok, 0.0);
            words = load(wp);
            s = load(sp);
            if HAS_ZEROS {
                zw = load(zp);
            }
        }
        // (fields paired on the device: row k at BITS·((k % P) / 2) + 16·(k % 2))
        let q = (words >> expand_dims(((kk & lane_mask) >> 1) * BITS + (kk & 1) * 16, 1)) & qmask;
        let mut z = full([BK, BN], 1 << (BITS - 1), i32);
        if HAS_ZEROS {
            z = (zw >> expand_dims((rn & lane_mask) * BITS, 0)) & qmask;
        }
        // (q − z)·s in T: q − z is exact, so the product rounds once, as
        // the f32 product cast to T would; in pairs (`.bf16x2`)
        let b = ((q as T) - (z as T)) * s;
        acc = dot(a, b, acc);
    }
    if SPLIT {
        let mn = (m as i64) * (n as i64);
        store(ws + (program_id(2) as i64) * mn + expand_dims((rm as i64) * (n as i64), 1) + expand_dims(rn as i64, 0), acc, m_ok & n_ok);
    } else {
        // the epilogue in f32, then one rounding to T
        let mut o = acc;
        if HAS_BIAS {
            o = o + expand_dims(load(bias + rn, rn < n, 0.0) as f32, 0);
        }
        o = activation(o, ACT);
        store(out + expand_dims((rm as i64) * som, 1) + expand_dims(rn as i64, 0), o as T, m_ok & n_ok);
    }
}

/// The same product for one row of `x` (decode at batch 1), without
/// tensor cores: a `[BK, BN]` tile of products accumulated elementwise in
/// f32 — `x` broadcast along N, each weight dequantized as in
/// [`wq_gemm_kernel`] — and summed over K once at the end. A 16-row MMA
/// tile would spend fifteen rows on padding and stage every dequantized
/// tile through shared memory; here each weight costs its unpacking, the
/// scale and one FMA. Grid: `(n / BN, splits)`; with `SPLIT` the partial
/// row goes to `ws[program_id(1)]`, else the row through the same epilogue
/// (`HAS_BIAS`, `ACT`).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn wq_gemv_kernel<
    T: Float,
    const BN: i32,
    const BK: i32,
    const BITS: i32,
    const GROUP: i32,
    const HAS_ZEROS: bool,
    const SPLIT: bool,
    const HAS_BIAS: bool,
    const ACT: i32,
>(
    x: Ptr<T>,
    qweight: Ptr<i32>,
    scales: Ptr<T>,
    qzeros: Ptr<i32>,
    out: Ptr<T>,
    ws: Ptr<f32>,
    bias: Ptr<T>,
    n: i32,
    k: i32,
    k_split: i32,
) {
    let word_shift = 4 - BITS / 4;
    let lane_mask = 32 / BITS - 1;
    let qmask = (1 << BITS) - 1;
    let rn = program_id(0) * BN + arange(0, BN);
    let n_ok = expand_dims(rn < n, 0);
    let k_lo = program_id(1) * k_split;
    let k_hi = minimum(k_lo + k_split, k);
    let wcol = qweight + expand_dims(rn as i64, 0);
    let mut acc = zeros([BK, BN], f32);
    for k0 in (k_lo..k_hi).step_by(BK) {
        let kk = k0 + arange(0, BK);
        let k_ok = expand_dims(kk < k, 1);
        // x along K, the same for every column: runs of equal addresses along N
        let xv = load(broadcast_to(expand_dims(x + (kk as i64), 1), [BK, BN]), k_ok, 0.0) as f32;
        let words = load(wcol + expand_dims(((kk >> word_shift) as i64) * (n as i64), 1), k_ok & n_ok, 0);
        // (fields paired on the device: row k at BITS·((k % P) / 2) + 16·(k % 2))
        let q = (words >> expand_dims(((kk & lane_mask) >> 1) * BITS + (kk & 1) * 16, 1)) & qmask;
        let g = (k0 / GROUP) as i64;
        let s = load(broadcast_to(expand_dims(scales + g * (n as i64) + (rn as i64), 0), [BK, BN]), k_ok & n_ok, 0.0) as f32;
        let mut z = full([BK, BN], 1 << (BITS - 1), i32);
        if HAS_ZEROS {
            let zp = broadcast_to(expand_dims(qzeros + g * ((n >> word_shift) as i64) + ((rn >> word_shift) as i64), 0), [BK, BN]);
            z = (load(zp, k_ok & n_ok, 0) >> expand_dims((rn & lane_mask) * BITS, 0)) & qmask;
        }
        acc = fma(xv, fma(q as f32, s, -((z as f32) * s)), acc);
    }
    let y = sum(acc, 0);
    let ok = rn < n;
    if SPLIT {
        store(ws + (program_id(1) as i64) * (n as i64) + (rn as i64), y, ok);
    } else {
        let mut o = y;
        if HAS_BIAS {
            o = o + (load(bias + rn, ok, 0.0) as f32);
        }
        o = activation(o, ACT);
        store(out + (rn as i64), o as T, ok);
    }
}

/// The same product in the decode form: `out[m, n]` computed as `outᵀ[n, m]
/// = Σ_k W̃[n, k] · xᵀ[k, m]` with the dequantized weights `W̃ = wᵀ` as the
/// `dot`'s left operand — `[BN, BK]`, computed in registers from the
/// words as in [`wq_gemm_kernel`] — and the few rows of `x` as its narrow
/// right operand (`xᵀ`, `[BK, BM]`). For M ≤ 16 the tensor cores' wide
/// side then holds the weights, not fifteen rows of padding; on Hopper
/// the compiler gives the computed left operand the `wgmma` fragments'
/// layout (`FERROTILE_OPERAND_LAYOUTS`), so the weights go from their
/// words to the tensor cores without touching shared memory — only the
/// `[BK, BM]` slice of `x` is staged. A K step lies inside one group (BK
/// divides the group size), so the tensor cores take `q − z` (small
/// integers, exact in `T`) and the group's scale multiplies the step's
/// f32 partial sums — one `FFMA` per accumulator element instead of a
/// multiply per pair of weights. With `SCALE_W` the scale goes on the
/// weights instead (`(q − z) · s`, rounded to `T`) and the tensor cores
/// accumulate: a multiply per pair of weights, as many as accumulator
/// elements at 64 rows, and a loop-carried accumulator only the `dot`
/// touches — whose MMA may stay in flight under the next step's
/// dequantization. Grid: `(n / BN, m / BM, splits)`;
/// `SPLIT`, `EVEN`, `HAS_BIAS`, `ACT` and the packing as in
/// [`wq_gemm_kernel`] (`EVEN`: K a multiple of `BK`, N of `BN`).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn wq_decode_kernel<
    T: Float,
    const BN: i32,
    const BM: i32,
    const BK: i32,
    const BITS: i32,
    const GROUP: i32,
    const HAS_ZEROS: bool,
    const SPLIT: bool,
    const EVEN: bool,
    const HAS_BIAS: bool,
    const ACT: i32,
    const SCALE_W: bool,
>(
    x: Ptr<T>,
    qweight: Ptr<i32>,
    scales: Ptr<T>,
    qzeros: Ptr<i32>,
    out: Ptr<T>,
    ws: Ptr<f32>,
    bias: Ptr<T>,
    m: i32,
    n: i32,
    k: i32,
    k_split: i32,
    sxm: i64,
    som: i64,
) {
    let word_shift = 4 - BITS / 4;
    let lane_mask = 32 / BITS - 1;
    let qmask = (1 << BITS) - 1;
    let rn = program_id(0) * BN + arange(0, BN);
    let rm = program_id(1) * BM + arange(0, BM);
    let n_in = rn < n;
    let n_ok = expand_dims(n_in, 1);
    let m_ok = expand_dims(rm < m, 0);
    let k_lo = program_id(2) * k_split;
    let k_hi = minimum(k_lo + k_split, k);
    let wrow = qweight + expand_dims(rn as i64, 1);
    let xcol = x + expand_dims((rm as i64) * sxm, 0);
    let mut acc = zeros([BN, BM], f32);
    for k0 in (k_lo..k_hi).step_by(BK) {
        let kk = k0 + arange(0, BK);
        let k_in = kk < k;
        // each word once per run of P rows of K, as in the GEMM kernel
        let wp = wrow + expand_dims(((kk >> word_shift) as i64) * (n as i64), 0);
        let xp = xcol + expand_dims(kk as i64, 1);
        // this step's scale (and zero-point) column, one per output row
        let g = (k0 / GROUP) as i64;
        let sp = scales + g * (n as i64) + (rn as i64);
        let zp = qzeros + g * ((n >> word_shift) as i64) + ((rn >> word_shift) as i64);
        let mut xt = load(xp, expand_dims(k_in, 1) & m_ok, 0.0);
        let mut words = load(wp, n_ok & expand_dims(k_in, 0), 0);
        let mut s = load(sp, n_in, 0.0);
        let mut zw = full([BN], 0, i32);
        if HAS_ZEROS {
            zw = load(zp, n_in, 0);
        }
        if EVEN {
            xt = load(xp, m_ok, 0.0);
            words = load(wp);
            s = load(sp);
            if HAS_ZEROS {
                zw = load(zp);
            }
        }
        // (fields paired on the device: row k at BITS·((k % P) / 2) + 16·(k % 2))
        let q = (words >> expand_dims(((kk & lane_mask) >> 1) * BITS + (kk & 1) * 16, 0)) & qmask;
        let mut z = full([BN], 1 << (BITS - 1), i32);
        if HAS_ZEROS {
            z = (zw >> ((rn & lane_mask) * BITS)) & qmask;
        }
        // (q − z is exact in T; the group's scale multiplies the step's
        // f32 partial sums, one per output row, not every weight — or,
        // with SCALE_W, the weights, and the tensor cores accumulate)
        let a = (q as T) - expand_dims(z as T, 1);
        if SCALE_W {
            acc = dot(a * expand_dims(s, 1), xt, acc);
        } else {
            let part = dot(a, xt, zeros([BN, BM], f32));
            acc = fma(part, expand_dims(s as f32, 1), acc);
        }
    }
    let ok = n_ok & m_ok;
    let dst = out + expand_dims((rm as i64) * som, 0) + expand_dims(rn as i64, 1);
    if SPLIT {
        let mn = (m as i64) * (n as i64);
        let at = expand_dims((rm as i64) * (n as i64), 0) + expand_dims(rn as i64, 1);
        store(ws + (program_id(2) as i64) * mn + at, acc, ok);
    } else {
        let mut o = acc;
        if HAS_BIAS {
            o = o + expand_dims(load(bias + rn, n_in, 0.0) as f32, 1);
        }
        o = activation(o, ACT);
        store(dst, o as T, ok);
    }
}

/// `xg[r, c] = x[r, perm[c]]` for one row `r = program_id(0)` and a
/// `BLOCK`-wide run of columns per `program_id(1)`: the activations of an
/// act-order (GPTQ `desc_act`) product gathered into the weights' sorted
/// row order. `xg` is `[rows, k]` contiguous; `x`'s rows are `sx` apart.
#[kernel]
pub fn gather_columns<T: Float, const BLOCK: i32>(x: Ptr<T>, perm: Ptr<i32>, xg: Ptr<T>, k: i32, sx: i64) {
    let r = program_id(0) as i64;
    let c = program_id(1) * BLOCK + arange(0, BLOCK);
    let ok = c < k;
    let src = load(perm + c, ok, 0);
    store(xg + r * (k as i64) + (c as i64), load(x + r * sx + (src as i64), ok, 0.0), ok);
}
