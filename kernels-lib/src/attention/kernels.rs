//! The attention library's kernels, written in the DSL as a user would:
//! the forward kernel (FlashAttention-2's loop), the decode kernel (a few
//! query rows per K/V head against a key range) and the combine step of
//! split decode. The host side (`super`) checks arguments, picks
//! configurations and launches them.

use ferrotile::prelude::*;

/// `BM` query rows of head `program_id(1)` in batch entry `program_id(2)`
/// (query blocks in reverse order of `program_id(0)`). Strides are in
/// elements: `(qb, qh, qs)` batch, head and sequence strides of Q, and the
/// same for K, V and O; the head dimension is contiguous. `DP` is the
/// tile's head dimension (a power of two ≥ `d`). `G` query heads share a
/// K/V head. `MASK_HI`: keys `j > i + off + win_right` are masked (causal:
/// `win_right = 0`); `MASK_LO`: keys `j < i + off − win_left`. `LSE`:
/// write the natural-log log-sum-exp of each row to `lse + b·lb + h·lh + i`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_fwd<T: Float, const BM: i32, const BN: i32, const DP: i32, const G: i32, const MASK_HI: bool, const MASK_LO: bool, const LSE: bool>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    o: Ptr<T>,
    lse: Ptr<f32>,
    nq: i32,
    nk: i32,
    d: i32,
    qk_scale: f32,
    win_left: i32,
    win_right: i32,
    qb: i64,
    qh: i64,
    qs: i64,
    kb: i64,
    kh: i64,
    ks: i64,
    vb: i64,
    vh: i64,
    vs: i64,
    ob: i64,
    oh: i64,
    os: i64,
    lb: i64,
    lh: i64,
) {
    static_assert(BM >= 16 && BN >= 16 && DP >= 16, "dot tiles must be at least 16 in every dimension");
    let pm = (cdiv(nq, BM) - 1 - program_id(0)) * BM;
    let b = program_id(2) as i64;
    let vq = view(q + b * qb + (program_id(1) as i64) * qh, [nq, d], [qs, 1]);
    let vkt = view(k + b * kb + ((program_id(1) / G) as i64) * kh, [d, nk], [1, ks]);
    let vv = view(v + b * vb + ((program_id(1) / G) as i64) * vh, [nk, d], [vs, 1]);
    let qt = load_block(vq, [pm, 0], [BM, DP]);
    let rows = pm + arange(0, BM);
    // (bottom-right alignment: the last query row sees the last key)
    let off = nk - nq;
    let mut lo = 0;
    if MASK_LO {
        lo = maximum(0, pm + off - win_left) / BN * BN;
    }
    let mut hi = nk;
    if MASK_HI {
        hi = minimum(nk, maximum(0, pm + BM + off + win_right));
    }
    let mut m_i = full([BM], f32::NEG_INFINITY, f32);
    let mut l_i = zeros([BM], f32);
    let mut acc = zeros([BM, DP], f32);
    for j in (lo..hi).step_by(BN) {
        let cols = j + arange(0, BN);
        let mut s = dot(qt, load_block(vkt, [0, j], [DP, BN]), zeros([BM, BN], f32)) * qk_scale;
        s = select(expand_dims(cols < nk, 0), s, f32::NEG_INFINITY);
        if MASK_HI {
            s = select(expand_dims(cols, 0) <= expand_dims(rows + (off + win_right), 1), s, f32::NEG_INFINITY);
        }
        if MASK_LO {
            s = select(expand_dims(cols, 0) >= expand_dims(rows - (win_left - off), 1), s, f32::NEG_INFINITY);
        }
        let m_new = maximum(m_i, max(s, axis = 1));
        // (a row with no key yet keeps m = −∞: subtract 0 instead, so that
        // its p and alpha are 0 rather than NaN)
        let m_use = select(m_new == f32::NEG_INFINITY, 0.0, m_new);
        let p = exp2(s - expand_dims(m_use, 1));
        let alpha = exp2(m_i - m_use);
        l_i = l_i * alpha + sum(p, 1);
        acc = dot(p as T, load_block(vv, [j, 0], [BN, DP]), acc * expand_dims(alpha, 1));
        m_i = m_new;
    }
    let inv = select(l_i > 0.0, 1.0 / l_i, 0.0);
    let vo = view(o + b * ob + (program_id(1) as i64) * oh, [nq, d], [os, 1]);
    store_block(vo, [pm, 0], (acc * expand_dims(inv, 1)) as T);
    if LSE {
        // (m is in base 2 and scaled: ln Σ exp(scale·q·k) = ln 2 · (m + log2 l))
        let row_lse = select(l_i > 0.0, (m_i + log2(l_i)) * 0.6931471805599453, f32::INFINITY);
        store(lse + b * lb + (program_id(1) as i64) * lh + (rows as i64), row_lse, rows < nq);
    }
}

/// Decode attention (a few query rows against a long KV cache), one
/// program per (key split `program_id(0)`, K/V head `program_id(1)`, batch
/// entry `program_id(2)`): its `BM` rows are the `G · nq` query rows of the
/// `G` query heads that share the K/V head (row `r`: head `G·kv + r / nq`,
/// query `r % nq`), so each K/V tile is read once for all of them. Keys of
/// batch entry `b`: `seqlens[b]` with `SEQLENS`, else `nk`; the program
/// covers `[s·chunk, min(keys, (s+1)·chunk))`. `CAUSAL`: bottom-right
/// aligned to the entry's key count. `SPLIT`: the normalized partial output
/// (f32, rows of `DP`) and the partial natural-log log-sum-exp (−∞ for no
/// key) go to `part_o` / `part_l` at row `((b·Hq + h)·nq + i)·splits + s`
/// for [`attention_combine`]; otherwise the output and `LSE` (if asked)
/// are written directly.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_decode<
    T: Float,
    const BM: i32,
    const BN: i32,
    const DP: i32,
    const G: i32,
    const CAUSAL: bool,
    const SEQLENS: bool,
    const SPLIT: bool,
    const LSE: bool,
>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    o: Ptr<T>,
    lse: Ptr<f32>,
    part_o: Ptr<f32>,
    part_l: Ptr<f32>,
    seqlens: Ptr<i32>,
    nq: i32,
    nk: i32,
    d: i32,
    qk_scale: f32,
    chunk: i32,
    heads_q: i32,
    qb: i64,
    qh: i64,
    qs: i64,
    kb: i64,
    kh: i64,
    ks: i64,
    vb: i64,
    vh: i64,
    vs: i64,
    ob: i64,
    oh: i64,
    os: i64,
    lb: i64,
    lh: i64,
) {
    static_assert(BM >= 16 && BN >= 16 && DP >= 16, "dot tiles must be at least 16 in every dimension");
    let split = program_id(0);
    let b = program_id(2) as i64;
    let r = arange(0, BM);
    let row_ok = r < G * nq;
    let qi = r % nq;
    let head = program_id(1) * G + r / nq;
    let dims = arange(0, DP);
    let q_off = b * qb + (head as i64) * qh + (qi as i64) * qs;
    let qt = load(q + expand_dims(q_off, 1) + expand_dims(dims as i64, 0), expand_dims(row_ok, 1) & expand_dims(dims < d, 0), 0.0);
    let mut keys = nk;
    if SEQLENS {
        keys = minimum(nk, load(seqlens + b));
    }
    let vkt = view(k + b * kb + (program_id(1) as i64) * kh, [d, nk], [1, ks]);
    let vv = view(v + b * vb + (program_id(1) as i64) * vh, [nk, d], [vs, 1]);
    let lo = split * chunk;
    let hi = minimum(keys, lo + chunk);
    let mut m_i = full([BM], f32::NEG_INFINITY, f32);
    let mut l_i = zeros([BM], f32);
    let mut acc = zeros([BM, DP], f32);
    for j in (lo..hi).step_by(BN) {
        let cols = j + arange(0, BN);
        let mut s = dot(qt, load_block(vkt, [0, j], [DP, BN]), zeros([BM, BN], f32)) * qk_scale;
        s = select(expand_dims(cols < keys, 0), s, f32::NEG_INFINITY);
        if CAUSAL {
            s = select(expand_dims(cols, 0) <= expand_dims(qi + (keys - nq), 1), s, f32::NEG_INFINITY);
        }
        let m_new = maximum(m_i, max(s, axis = 1));
        let m_use = select(m_new == f32::NEG_INFINITY, 0.0, m_new);
        let p = exp2(s - expand_dims(m_use, 1));
        let alpha = exp2(m_i - m_use);
        l_i = l_i * alpha + sum(p, 1);
        acc = dot(p as T, load_block(vv, [j, 0], [BN, DP]), acc * expand_dims(alpha, 1));
        m_i = m_new;
    }
    let inv = select(l_i > 0.0, 1.0 / l_i, 0.0);
    let out = acc * expand_dims(inv, 1);
    let out_ok = expand_dims(row_ok, 1) & expand_dims(dims < d, 0);
    if SPLIT {
        let prow = ((b * (heads_q as i64) + (head as i64)) * (nq as i64) + (qi as i64)) * (num_programs(0) as i64) + (split as i64);
        store(part_o + expand_dims(prow * (DP as i64), 1) + expand_dims(dims as i64, 0), out, out_ok);
        let part = select(l_i > 0.0, (m_i + log2(l_i)) * 0.6931471805599453, f32::NEG_INFINITY);
        store(part_l + prow, part, row_ok);
    } else {
        let o_off = b * ob + (head as i64) * oh + (qi as i64) * os;
        store(o + expand_dims(o_off, 1) + expand_dims(dims as i64, 0), out as T, out_ok);
        if LSE {
            let row_lse = select(l_i > 0.0, (m_i + log2(l_i)) * 0.6931471805599453, f32::INFINITY);
            store(lse + b * lb + (head as i64) * lh + (qi as i64), row_lse, row_ok);
        }
    }
}

/// Combines [`attention_decode`]'s `splits` partial results of each query
/// row (program `program_id(0)` = row `(b·Hq + h)·nq + i`): weights
/// `exp(lse_s − max)`, the output `Σ w_s·O_s / Σ w_s` and, with `LSE`, the
/// row's log-sum-exp `max + ln Σ w_s` (+∞ and a zero row where no split saw
/// a key). `SP`: the splits padded to a power of two.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_combine<T: Float, const SP: i32, const DP: i32, const LSE: bool>(
    part_o: Ptr<f32>,
    part_l: Ptr<f32>,
    o: Ptr<T>,
    lse: Ptr<f32>,
    splits: i32,
    nq: i32,
    heads_q: i32,
    d: i32,
    ob: i64,
    oh: i64,
    os: i64,
    lb: i64,
    lh: i64,
) {
    let row = program_id(0);
    let i = row % nq;
    let h = (row / nq) % heads_q;
    let b = row / (nq * heads_q);
    let sp = arange(0, SP);
    let dims = arange(0, DP);
    let base = (row as i64) * (splits as i64);
    let ls = load(part_l + base + (sp as i64), sp < splits, f32::NEG_INFINITY);
    let m = max(ls, axis = 0);
    let m_use = select(m == f32::NEG_INFINITY, 0.0, m);
    let w = exp(ls - m_use);
    let tot = sum(w, axis = 0);
    let parts = load(
        part_o + expand_dims((base + (sp as i64)) * (DP as i64), 1) + expand_dims(dims as i64, 0),
        expand_dims(sp < splits, 1) & expand_dims(dims < d, 0),
        0.0,
    );
    let inv = select(tot > 0.0, 1.0 / tot, 0.0);
    let out = sum(parts * expand_dims(w, 1), axis = 0) * inv;
    let o_off = (b as i64) * ob + (h as i64) * oh + (i as i64) * os;
    store(o + o_off + (dims as i64), out as T, dims < d);
    if LSE {
        let row_lse = select(tot > 0.0, m_use + log(tot), f32::INFINITY);
        store(lse + (b as i64) * lb + (h as i64) * lh + (i as i64), row_lse);
    }
}
