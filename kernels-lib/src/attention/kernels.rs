//! The attention library's kernels, written in the DSL as a user would:
//! the forward kernel (FlashAttention-2's loop), the decode kernel (a few
//! query rows per K/V head against a key range) and the combine step of
//! split decode. The host side (`super`) checks arguments, picks
//! configurations and launches them.

use ferrotile::prelude::*;

/// The key blocks query rows `pm..pm + BM` see: `(off, lo, hi)` with `off =
/// nk − nq` the bottom-right alignment (the last query row sees the last
/// key), `lo` the first key (a multiple of `BN`: the window's left edge
/// when `MASK_LO`) and `hi` the end (the causal / window right edge when
/// `MASK_HI`).
#[func]
#[allow(clippy::too_many_arguments)]
fn key_range(pm: Tile, nq: Tile, nk: Tile, win_left: Tile, win_right: Tile, BM: Tile, BN: Tile, MASK_HI: Tile, MASK_LO: Tile) -> (Tile, Tile, Tile) {
    let off = nk - nq;
    let mut lo = 0;
    if MASK_LO {
        lo = maximum(0, pm + off - win_left) / BN * BN;
    }
    let mut hi = nk;
    if MASK_HI {
        hi = minimum(nk, maximum(0, pm + BM + off + win_right));
    }
    (off, lo, hi)
}

/// Sequence `b` of a packed batch: its first token `cu[b]` and its length.
#[func]
fn sequence(cu: Tile, b: Tile) -> (Tile, Tile) {
    let t0 = load(cu + b);
    (t0, load(cu + b + 1) - t0)
}

/// The `[n, d]` view of one head of a sequence in a packed `[total, heads,
/// dim]` tensor: tokens `t0..t0 + n` of head `head` (token stride `ts`,
/// head stride `hs`).
#[func]
#[allow(clippy::too_many_arguments)]
fn tokens(ptr: Tile, t0: Tile, n: Tile, head: Tile, d: Tile, ts: Tile, hs: Tile) -> Tile {
    view(ptr + (t0 as i64) * ts + head * hs, [n, d], [ts, 1])
}

/// One key block of the forward's online softmax ([`attention_fwd`],
/// [`attention_fwd_varlen`]): the scores `s` (`[BM, BN]`, unscaled when
/// `FOLD`) of query rows `rows` against keys `cols` masked (keys past `nk`,
/// and the causal / window bounds with bottom-right offset `off`), the new
/// running maximum (base 2, scaled) from `m_i`, and `p = exp2(scaled s −
/// m)` with the rescale `alpha` of the previous blocks. Returns `(p,
/// alpha, m_new)`.
#[func]
#[allow(clippy::too_many_arguments)]
fn online_softmax_step(
    mut s: Tile,
    cols: Tile,
    rows: Tile,
    nk: Tile,
    off: Tile,
    qk_scale: Tile,
    win_left: Tile,
    win_right: Tile,
    m_i: Tile,
    MASK_HI: Tile,
    MASK_LO: Tile,
    FOLD: Tile,
) -> (Tile, Tile, Tile) {
    if !FOLD {
        s = s * qk_scale;
    }
    s = select(expand_dims(cols < nk, 0), s, f32::NEG_INFINITY);
    if MASK_HI {
        s = select(expand_dims(cols, 0) <= expand_dims(rows + (off + win_right), 1), s, f32::NEG_INFINITY);
    }
    if MASK_LO {
        s = select(expand_dims(cols, 0) >= expand_dims(rows - (win_left - off), 1), s, f32::NEG_INFINITY);
    }
    let mut m_blk = max(s, axis = 1);
    if FOLD {
        m_blk = m_blk * qk_scale;
    }
    let m_new = maximum(m_i, m_blk);
    // (a row with no key yet keeps m = −∞: subtract 0 instead, so that
    // its p and alpha are 0 rather than NaN)
    let m_use = select(m_new == f32::NEG_INFINITY, 0.0, m_new);
    let mut p = s;
    if FOLD {
        p = exp2(fma(s, qk_scale, expand_dims(-m_use, 1)));
    } else {
        p = exp2(s - expand_dims(m_use, 1));
    }
    let alpha = exp2(m_i - m_use);
    (p, alpha, m_new)
}

/// `BM` query rows of head `program_id(1)` in batch entry `program_id(2)`
/// (query blocks in reverse order of `program_id(0)`). Strides are in
/// elements: `(qb, qh, qs)` batch, head and sequence strides of Q, and the
/// same for K, V and O; the head dimension is contiguous. `DP` is the
/// tile's head dimension (a power of two ≥ `d`). `G` query heads share a
/// K/V head. `MASK_HI`: keys `j > i + off + win_right` are masked (causal:
/// `win_right = 0`); `MASK_LO`: keys `j < i + off − win_left`. `LSE`:
/// write the natural-log log-sum-exp of each row to `lse + b·lb + h·lh + i`.
/// `FOLD` (the host sets it when `qk_scale > 0`): the masks and the row
/// maximum see the unscaled scores, the maximum is scaled once per row
/// (`max(c·x) = c·max(x)` for `c > 0`, rounding included), and the scale
/// goes into exp2's argument — one `fma` per score instead of a multiply
/// and a subtraction (the softmax's instruction stream is the d128 loop's
/// limit); a zero or negative scale takes the plain form.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_fwd<
    T: Float,
    const BM: i32,
    const BN: i32,
    const DP: i32,
    const G: i32,
    const MASK_HI: bool,
    const MASK_LO: bool,
    const LSE: bool,
    const FOLD: bool,
>(
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
    let (off, lo, hi) = key_range(pm, nq, nk, win_left, win_right, BM, BN, MASK_HI, MASK_LO);
    let mut m_i = full([BM], f32::NEG_INFINITY, f32);
    let mut l_i = zeros([BM], f32);
    let mut acc = zeros([BM, DP], f32);
    for j in (lo..hi).step_by(BN) {
        let cols = j + arange(0, BN);
        // (`FOLD`: the scores stay unscaled until exp2's argument)
        let s = dot(qt, load_block(vkt, [0, j], [DP, BN]), zeros([BM, BN], f32));
        let (p, alpha, m_new) = online_softmax_step(s, cols, rows, nk, off, qk_scale, win_left, win_right, m_i, MASK_HI, MASK_LO, FOLD);
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

/// The key loop of [`attention_fwd_overlap`] (and of its varlen twin):
/// query tile `qt` (rows `rows`) against the key blocks `lo..hi` of `vkt`
/// (Kᵀ, `[d, nk]`) and `vv`, the softmax of each block overlapping the
/// previous block's `P·V`; block `lo` is computed even when `lo >= hi`
/// (the masks clear it). Returns the unnormalized output, the row sums
/// and the row maxima (base 2, scaled).
#[func]
#[allow(clippy::too_many_arguments)]
fn overlap_loop<U: Float>(
    qt: Tile,
    vkt: Tile,
    vv: Tile,
    rows: Tile,
    lo: Tile,
    hi: Tile,
    nk: Tile,
    off: Tile,
    qk_scale: Tile,
    win_left: Tile,
    win_right: Tile,
    BM: Tile,
    BN: Tile,
    DP: Tile,
    MASK_HI: Tile,
    MASK_LO: Tile,
    FOLD: Tile,
) -> (Tile, Tile, Tile) {
    // key block `lo` (the masks below clear it when `lo >= hi`)
    let cols0 = lo + arange(0, BN);
    let mut s0 = dot(qt, load_block(vkt, [0, lo], [DP, BN]), zeros([BM, BN], f32));
    if !FOLD {
        s0 = s0 * qk_scale;
    }
    s0 = select(expand_dims(cols0 < nk, 0), s0, f32::NEG_INFINITY);
    if MASK_HI {
        s0 = select(expand_dims(cols0, 0) <= expand_dims(rows + (off + win_right), 1), s0, f32::NEG_INFINITY);
    }
    if MASK_LO {
        s0 = select(expand_dims(cols0, 0) >= expand_dims(rows - (win_left - off), 1), s0, f32::NEG_INFINITY);
    }
    let mut m_i = max(s0, axis = 1);
    if FOLD {
        m_i = m_i * qk_scale;
    }
    let m_use0 = select(m_i == f32::NEG_INFINITY, 0.0, m_i);
    let mut p0 = s0;
    if FOLD {
        p0 = exp2(fma(s0, qk_scale, expand_dims(-m_use0, 1)));
    } else {
        p0 = exp2(s0 - expand_dims(m_use0, 1));
    }
    let mut l_i = sum(p0, 1);
    let mut pt = p0 as U;
    let mut acc = zeros([BM, DP], f32);
    for j in (lo + BN..hi).step_by(BN) {
        let cols = j + arange(0, BN);
        let qk = dot(qt, load_block(vkt, [0, j], [DP, BN]), zeros([BM, BN], f32));
        // (the previous block's P·V: on the tensor cores during this softmax)
        acc = dot(pt, load_block(vv, [j - BN, 0], [BN, DP]), acc);
        let mut s = qk;
        if !FOLD {
            s = qk * qk_scale;
        }
        s = select(expand_dims(cols < nk, 0), s, f32::NEG_INFINITY);
        if MASK_HI {
            s = select(expand_dims(cols, 0) <= expand_dims(rows + (off + win_right), 1), s, f32::NEG_INFINITY);
        }
        if MASK_LO {
            s = select(expand_dims(cols, 0) >= expand_dims(rows - (win_left - off), 1), s, f32::NEG_INFINITY);
        }
        let mut m_blk = max(s, axis = 1);
        if FOLD {
            m_blk = m_blk * qk_scale;
        }
        let m_new = maximum(m_i, m_blk);
        // (rows with no key yet keep m = −∞: subtract 0 instead, so that
        // their p and alpha are 0 rather than NaN)
        let m_use = select(m_new == f32::NEG_INFINITY, 0.0, m_new);
        let alpha = exp2(m_i - m_use);
        let mut p = s;
        if FOLD {
            p = exp2(fma(s, qk_scale, expand_dims(-m_use, 1)));
        } else {
            p = exp2(s - expand_dims(m_use, 1));
        }
        l_i = l_i * alpha + sum(p, 1);
        pt = p as U;
        acc = acc * expand_dims(alpha, 1);
        m_i = m_new;
    }
    // the last block's P·V (block `lo` when the loop did not run)
    acc = dot(pt, load_block(vv, [maximum(lo, (hi - 1) / BN * BN), 0], [BN, DP]), acc);
    (acc, l_i, m_i)
}

/// [`attention_fwd`] with FlashAttention-3's intra-warpgroup overlap
/// written out (`AttentionConfig::overlap`): key block `lo` is peeled off
/// before the loop (every key masked when the range is empty), and each
/// step issues `Q·K_jᵀ`, then the previous block's `P·V` — so the softmax
/// of block `j` runs while that product is on the tensor cores (the
/// compiler waits for each `dot` where its result is first read); the last
/// block's `P·V` follows the loop. Same arguments, masks and results.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_fwd_overlap<
    T: Float,
    const BM: i32,
    const BN: i32,
    const DP: i32,
    const G: i32,
    const MASK_HI: bool,
    const MASK_LO: bool,
    const LSE: bool,
    const FOLD: bool,
>(
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
    let (off, lo, hi) = key_range(pm, nq, nk, win_left, win_right, BM, BN, MASK_HI, MASK_LO);
    let (acc, l_i, m_i) = overlap_loop::<T>(qt, vkt, vv, rows, lo, hi, nk, off, qk_scale, win_left, win_right, BM, BN, DP, MASK_HI, MASK_LO, FOLD);
    let inv = select(l_i > 0.0, 1.0 / l_i, 0.0);
    let vo = view(o + b * ob + (program_id(1) as i64) * oh, [nq, d], [os, 1]);
    store_block(vo, [pm, 0], (acc * expand_dims(inv, 1)) as T);
    if LSE {
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
/// covers `[s·chunk, min(keys, (s+1)·chunk))`. `PAGED`: K and V are a
/// paged cache of pages of `2^page_shift` keys — key `c` of entry `b` is
/// row `c mod 2^page_shift` of page `block_table[b · max_pages + (c >>
/// page_shift)]` (`kb`, `vb`: the page stride; `ks`, `vs`: the row stride
/// in a page); a page index outside `0..num_pages` skips its keys.
/// `CAUSAL`: bottom-right
/// aligned to the entry's key count. `SPLIT`: the normalized partial output
/// (f32, rows of `DP`) and the partial natural-log log-sum-exp (−∞ for no
/// key) go to `part_o` / `part_l` at row `((b·Hq + h)·nq + i)·splits + s`
/// for [`attention_combine`]; otherwise the output and `LSE` (if asked)
/// are written directly. `FOLD`: as in [`attention_fwd`].
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
    const PAGED: bool,
    const FOLD: bool,
>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    o: Ptr<T>,
    lse: Ptr<f32>,
    part_o: Ptr<f32>,
    part_l: Ptr<f32>,
    seqlens: Ptr<i32>,
    block_table: Ptr<i32>,
    max_pages: i32,
    page_shift: i32,
    num_pages: i32,
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
        let mut key_ok = cols < keys;
        // (placeholders: one branch below replaces them)
        let mut kt = zeros([DP, BN], f32) as T;
        let mut vt = zeros([BN, DP], f32) as T;
        if PAGED {
            // key `c` of entry `b`: row `c % page_size` of page
            // `block_table[b, c / page_size]`; a page outside the cache
            // skips its keys (never read)
            let pg = load(block_table + b * (max_pages as i64) + ((cols >> page_shift) as i64), key_ok, -1);
            key_ok = key_ok & (pg >= 0) & (pg < num_pages);
            let within = (cols & ((1 << page_shift) - 1)) as i64;
            let ld_ok = expand_dims(key_ok, 1) & expand_dims(dims < d, 0);
            let krow = (pg as i64) * kb + (program_id(1) as i64) * kh + within * ks;
            let vrow = (pg as i64) * vb + (program_id(1) as i64) * vh + within * vs;
            kt = trans(load(k + expand_dims(krow, 1) + expand_dims(dims as i64, 0), ld_ok, 0.0));
            vt = load(v + expand_dims(vrow, 1) + expand_dims(dims as i64, 0), ld_ok, 0.0);
        } else {
            kt = load_block(vkt, [0, j], [DP, BN]);
            vt = load_block(vv, [j, 0], [BN, DP]);
        }
        let mut s = dot(qt, kt, zeros([BM, BN], f32));
        if !FOLD {
            s = s * qk_scale;
        }
        s = select(expand_dims(key_ok, 0), s, f32::NEG_INFINITY);
        if CAUSAL {
            s = select(expand_dims(cols, 0) <= expand_dims(qi + (keys - nq), 1), s, f32::NEG_INFINITY);
        }
        let mut m_blk = max(s, axis = 1);
        if FOLD {
            m_blk = m_blk * qk_scale;
        }
        let m_new = maximum(m_i, m_blk);
        let m_use = select(m_new == f32::NEG_INFINITY, 0.0, m_new);
        let mut p = s;
        if FOLD {
            p = exp2(fma(s, qk_scale, expand_dims(-m_use, 1)));
        } else {
            p = exp2(s - expand_dims(m_use, 1));
        }
        let alpha = exp2(m_i - m_use);
        l_i = l_i * alpha + sum(p, 1);
        acc = dot(p as T, vt, acc * expand_dims(alpha, 1));
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

/// Backward preprocessing: `delta[b, h, i] = Σ_c dO[i, c] · O[i, c]` (f32),
/// the row term of `dS = P ∘ (dP − delta)`. One program per `BM` rows of
/// head `program_id(1)` in batch entry `program_id(2)`; `delta` is laid out
/// like the log-sum-exp (`b·lb + h·lh + i`). `ZERO`: the program also
/// zeroes its rows of the f32 dQ that [`attention_bwd_dkdv`] adds to by
/// atomics (row `b·lb + h·lh + i`, `DP` apart).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_pre<T: Float, const BM: i32, const DP: i32, const ZERO: bool>(
    o: Ptr<T>,
    dout: Ptr<T>,
    delta: Ptr<f32>,
    dq_acc: Ptr<f32>,
    nq: i32,
    d: i32,
    ob: i64,
    oh: i64,
    os: i64,
    db: i64,
    dh: i64,
    ds: i64,
    lb: i64,
    lh: i64,
) {
    let pm = program_id(0) * BM;
    let b = program_id(2) as i64;
    let h = program_id(1) as i64;
    let vo = view(o + b * ob + h * oh, [nq, d], [os, 1]);
    let vdo = view(dout + b * db + h * dh, [nq, d], [ds, 1]);
    let x = (load_block(vo, [pm, 0], [BM, DP]) as f32) * (load_block(vdo, [pm, 0], [BM, DP]) as f32);
    let rows = pm + arange(0, BM);
    store(delta + b * lb + h * lh + (rows as i64), sum(x, 1), rows < nq);
    if ZERO {
        let at = expand_dims((b * lb + h * lh + (rows as i64)) * (DP as i64), 1) + expand_dims(arange(0, DP) as i64, 0);
        store(dq_acc + at, zeros([BM, DP], f32), expand_dims(rows < nq, 1));
    }
}

/// Backward, the last step of the single pass: dQ = `scale` · the f32
/// rows that [`attention_bwd_dkdv`] (`DQ`) added up (row `b·lb + h·lh +
/// i`, `DP` apart), cast to `T` and stored by dQ's strides. One program
/// per `BM` rows of head `program_id(1)` in batch entry `program_id(2)`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_dq_cast<T: Float, const BM: i32, const DP: i32>(
    dq_acc: Ptr<f32>,
    dq: Ptr<T>,
    nq: i32,
    d: i32,
    scale: f32,
    dqb: i64,
    dqh: i64,
    dqs: i64,
    lb: i64,
    lh: i64,
) {
    let pm = program_id(0) * BM;
    let b = program_id(2) as i64;
    let h = program_id(1) as i64;
    let rows = pm + arange(0, BM);
    let at = expand_dims((b * lb + h * lh + (rows as i64)) * (DP as i64), 1) + expand_dims(arange(0, DP) as i64, 0);
    let x = load(dq_acc + at, expand_dims(rows < nq, 1), 0.0) * scale;
    store_block(view(dq + b * dqb + h * dqh, [nq, d], [dqs, 1]), [pm, 0], x as T);
}

/// The loop of [`attention_bwd_dkdv`] (and of its varlen twin): the
/// `BN` keys from `n0` (their K and V tiles `kt`, `vt`) against the query
/// blocks of `vq` / `vdo` that see them (`nq` query rows, `nk` keys; the
/// rows' log-sum-exp and delta at `lrow` / `drow`). Returns the keys'
/// indices and the f32 dK (unscaled) and dV tiles. `DQ`: each step also
/// adds its share of dQ (unscaled, `dSᵀ`'s product with K) to the f32
/// rows at `dqrow` (`DP` apart) by atomics — FlashAttention-2's single
/// pass, in place of [`attention_bwd_dq`].
#[func]
#[allow(clippy::too_many_arguments)]
fn dkdv_loop<U: Float>(
    kt: Tile,
    vt: Tile,
    vq: Tile,
    vdo: Tile,
    lrow: Tile,
    drow: Tile,
    dqrow: Tile,
    n0: Tile,
    nq: Tile,
    nk: Tile,
    qk_scale: Tile,
    win_left: Tile,
    win_right: Tile,
    BM: Tile,
    BN: Tile,
    DP: Tile,
    MASK_HI: Tile,
    MASK_LO: Tile,
    DQ: Tile,
) -> (Tile, Tile, Tile) {
    let keys = n0 + arange(0, BN);
    // query rows that see this key block (bottom-right alignment: `off`)
    let off = nk - nq;
    let mut lo = 0;
    if MASK_HI {
        lo = maximum(0, n0 - off - win_right) / BM * BM;
    }
    let mut hi = nq;
    if MASK_LO {
        hi = minimum(nq, maximum(0, n0 + BN - off + win_left));
    }
    let mut dk_i = zeros([BN, DP], f32);
    let mut dv_i = zeros([BN, DP], f32);
    for i in (lo..hi).step_by(BM) {
        let rows = i + arange(0, BM);
        // (rows past the end: lse +∞, so P = 0)
        let l2 = load(lrow + (rows as i64), rows < nq, f32::INFINITY) * 1.4426950408889634;
        let qi = load_block(vq, [i, 0], [BM, DP]);
        let doi = load_block(vdo, [i, 0], [BM, DP]);
        let mut st = dot(kt, trans(qi), zeros([BN, BM], f32)) * qk_scale;
        if MASK_HI {
            st = select(expand_dims(keys, 1) <= expand_dims(rows + (off + win_right), 0), st, f32::NEG_INFINITY);
        }
        if MASK_LO {
            st = select(expand_dims(keys, 1) >= expand_dims(rows - (win_left - off), 0), st, f32::NEG_INFINITY);
        }
        let pt = exp2(st - expand_dims(l2, 0));
        dv_i = dot(pt as U, doi, dv_i);
        let dpt = dot(vt, trans(doi), zeros([BN, BM], f32));
        let dl = load(drow + (rows as i64), rows < nq, 0.0);
        let dst = pt * (dpt - expand_dims(dl, 0));
        dk_i = dot(dst as U, qi, dk_i);
        if DQ {
            // dQᵀ = Kᵀ·dSᵀ: the head dimension as rows (a `wgmma` needs 64
            // rows a warpgroup; a step has BM query rows)
            let dqt = dot(trans(kt), dst as U, zeros([DP, BM], f32));
            // (32-bit offsets from the head's row 0: the host keeps
            // seqlen·DP below 2³¹)
            let at = expand_dims(rows, 0) * DP + expand_dims(arange(0, DP), 1);
            atomic_add(dqrow + at, dqt, expand_dims(rows < nq, 0));
        }
    }
    (keys, dk_i, dv_i)
}

/// Backward, dK and dV (FlashAttention-2's outer loop over keys): one
/// program per `BN` keys (`program_id(0)`) of query head `program_id(1)` in
/// batch entry `program_id(2)`; its K and V tiles stay in registers while
/// a loop walks the query blocks that see them, `BM` rows at a time. The
/// products are computed transposed (`Sᵀ = K·Qᵀ`, keys as rows), so that
/// `Pᵀ` and `dSᵀ` are the A operands of `dV += Pᵀ·dO` and `dK += dSᵀ·Q`
/// as they come out of the first products (no transpose of a computed
/// tile); each Q and dO tile is loaded once and read both ways (`trans`).
/// `P` is recomputed from the forward's log-sum-exp `lse`
/// (natural log; +∞ for a row that saw no key: `P = 0`). `ACC`: the query
/// head's dK·scale and dV go, in f32, to `dk_acc` / `dv_acc` at row
/// `(b·Hq + h)·nk + j` (rows of `DP`) for [`attention_bwd_sum`] to add
/// over the `G` heads of a K/V head; otherwise (`G = 1`) to `dk` / `dv`
/// by their strides. `DQ`: the program also adds its keys' share of dQ
/// (unscaled) to the f32 rows `b·lb + h·lh + i` of `dq_acc` (zeroed by
/// [`attention_bwd_pre`]; [`attention_bwd_dq_cast`] scales and stores
/// them), in place of [`attention_bwd_dq`]'s second pass.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_dkdv<
    T: Float,
    const BM: i32,
    const BN: i32,
    const DP: i32,
    const G: i32,
    const MASK_HI: bool,
    const MASK_LO: bool,
    const ACC: bool,
    const DQ: bool,
>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    dout: Ptr<T>,
    lse: Ptr<f32>,
    delta: Ptr<f32>,
    dk: Ptr<T>,
    dv: Ptr<T>,
    dk_acc: Ptr<f32>,
    dv_acc: Ptr<f32>,
    dq_acc: Ptr<f32>,
    nq: i32,
    nk: i32,
    d: i32,
    qk_scale: f32,
    scale: f32,
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
    db: i64,
    dh: i64,
    ds: i64,
    dkb: i64,
    dkh: i64,
    dks: i64,
    dvb: i64,
    dvh: i64,
    dvs: i64,
    lb: i64,
    lh: i64,
) {
    static_assert(BM >= 16 && BN >= 16 && DP >= 16, "dot tiles must be at least 16 in every dimension");
    let n0 = program_id(0) * BN;
    let h = program_id(1) as i64;
    let b = program_id(2) as i64;
    let hk = (program_id(1) / G) as i64;
    let kt = load_block(view(k + b * kb + hk * kh, [nk, d], [ks, 1]), [n0, 0], [BN, DP]);
    let vt = load_block(view(v + b * vb + hk * vh, [nk, d], [vs, 1]), [n0, 0], [BN, DP]);
    let vq = view(q + b * qb + h * qh, [nq, d], [qs, 1]);
    let vdo = view(dout + b * db + h * dh, [nq, d], [ds, 1]);
    let lrow = lse + b * lb + h * lh;
    let drow = delta + b * lb + h * lh;
    let dqrow = dq_acc + (b * lb + h * lh) * (DP as i64);
    let (keys, dk_i, dv_i) = dkdv_loop::<T>(kt, vt, vq, vdo, lrow, drow, dqrow, n0, nq, nk, qk_scale, win_left, win_right, BM, BN, DP, MASK_HI, MASK_LO, DQ);
    let dk_out = dk_i * scale;
    if ACC {
        let dims = arange(0, DP);
        let row = ((b * (num_programs(1) as i64) + h) * (nk as i64) + (keys as i64)) * (DP as i64);
        let at = expand_dims(row, 1) + expand_dims(dims as i64, 0);
        let ok = expand_dims(keys < nk, 1) & expand_dims(dims < DP, 0);
        store(dk_acc + at, dk_out, ok);
        store(dv_acc + at, dv_i, ok);
    } else {
        store_block(view(dk + b * dkb + hk * dkh, [nk, d], [dks, 1]), [n0, 0], dk_out as T);
        store_block(view(dv + b * dvb + hk * dvh, [nk, d], [dvs, 1]), [n0, 0], dv_i as T);
    }
}

/// Backward, the sum of [`attention_bwd_dkdv`]'s per-query-head dK and dV
/// (`ACC`) over the `G` query heads of K/V head `program_id(1)`, cast to
/// `T` and stored by the strides of `dk` / `dv`; `BR` key rows per program.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_sum<T: Float, const BR: i32, const DP: i32, const G: i32>(
    dk_acc: Ptr<f32>,
    dv_acc: Ptr<f32>,
    dk: Ptr<T>,
    dv: Ptr<T>,
    nk: i32,
    d: i32,
    heads_q: i32,
    dkb: i64,
    dkh: i64,
    dks: i64,
    dvb: i64,
    dvh: i64,
    dvs: i64,
) {
    let r0 = program_id(0) * BR;
    let hk = program_id(1);
    let b = program_id(2) as i64;
    let keys = r0 + arange(0, BR);
    let dims = arange(0, DP);
    let ok = expand_dims(keys < nk, 1) & expand_dims(dims < DP, 0);
    let mut sk = zeros([BR, DP], f32);
    let mut sv = zeros([BR, DP], f32);
    for g in 0..G {
        let row = ((b * (heads_q as i64) + ((hk * G + g) as i64)) * (nk as i64) + (keys as i64)) * (DP as i64);
        let at = expand_dims(row, 1) + expand_dims(dims as i64, 0);
        sk = sk + load(dk_acc + at, ok, 0.0);
        sv = sv + load(dv_acc + at, ok, 0.0);
    }
    store_block(view(dk + b * dkb + (hk as i64) * dkh, [nk, d], [dks, 1]), [r0, 0], sk as T);
    store_block(view(dv + b * dvb + (hk as i64) * dvh, [nk, d], [dvs, 1]), [r0, 0], sv as T);
}

/// The loop of [`attention_bwd_dq`] (and of its varlen twin): query rows
/// `rows` from `pm` (their Q and dO tiles `qt`, `dot_`, log-sum-exp in
/// base 2 `l2`, delta `dl`) against the key blocks of `vk` / `vv` the
/// masks leave (`nq` query rows, `nk` keys). Returns the f32 dQ
/// (unscaled).
#[func]
#[allow(clippy::too_many_arguments)]
fn dq_loop<U: Float>(
    qt: Tile,
    dot_: Tile,
    vk: Tile,
    vv: Tile,
    rows: Tile,
    l2: Tile,
    dl: Tile,
    pm: Tile,
    nq: Tile,
    nk: Tile,
    qk_scale: Tile,
    win_left: Tile,
    win_right: Tile,
    BM: Tile,
    BN: Tile,
    DP: Tile,
    MASK_HI: Tile,
    MASK_LO: Tile,
) -> Tile {
    let (off, lo, hi) = key_range(pm, nq, nk, win_left, win_right, BM, BN, MASK_HI, MASK_LO);
    let mut dq_i = zeros([BM, DP], f32);
    for j in (lo..hi).step_by(BN) {
        let cols = j + arange(0, BN);
        let kj = load_block(vk, [j, 0], [BN, DP]);
        let mut s = dot(qt, trans(kj), zeros([BM, BN], f32)) * qk_scale;
        // (keys past the end must give P = 0: exp2(0 − lse) may overflow)
        s = select(expand_dims(cols < nk, 0), s, f32::NEG_INFINITY);
        if MASK_HI {
            s = select(expand_dims(cols, 0) <= expand_dims(rows + (off + win_right), 1), s, f32::NEG_INFINITY);
        }
        if MASK_LO {
            s = select(expand_dims(cols, 0) >= expand_dims(rows - (win_left - off), 1), s, f32::NEG_INFINITY);
        }
        let p = exp2(s - expand_dims(l2, 1));
        let dp = dot(dot_, trans(load_block(vv, [j, 0], [BN, DP])), zeros([BM, BN], f32));
        let dsc = p * (dp - expand_dims(dl, 1));
        dq_i = dot(dsc as U, kj, dq_i);
    }
    dq_i
}

/// Backward, dQ (a separate pass instead of atomics: deterministic): one
/// program per `BM` query rows, as [`attention_fwd`] (heaviest first), over
/// the key blocks the mask leaves: `dQ = scale · Σ_j dS_j · K_j` with
/// `dS = P ∘ (dO·Vᵀ − delta)` and `P` recomputed from `lse`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_dq<T: Float, const BM: i32, const BN: i32, const DP: i32, const G: i32, const MASK_HI: bool, const MASK_LO: bool>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    dout: Ptr<T>,
    lse: Ptr<f32>,
    delta: Ptr<f32>,
    dq: Ptr<T>,
    nq: i32,
    nk: i32,
    d: i32,
    qk_scale: f32,
    scale: f32,
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
    db: i64,
    dh: i64,
    ds: i64,
    dqb: i64,
    dqh: i64,
    dqs: i64,
    lb: i64,
    lh: i64,
) {
    static_assert(BM >= 16 && BN >= 16 && DP >= 16, "dot tiles must be at least 16 in every dimension");
    let pm = (cdiv(nq, BM) - 1 - program_id(0)) * BM;
    let h = program_id(1) as i64;
    let b = program_id(2) as i64;
    let hk = (program_id(1) / G) as i64;
    let qt = load_block(view(q + b * qb + h * qh, [nq, d], [qs, 1]), [pm, 0], [BM, DP]);
    let dot_ = load_block(view(dout + b * db + h * dh, [nq, d], [ds, 1]), [pm, 0], [BM, DP]);
    let vk = view(k + b * kb + hk * kh, [nk, d], [ks, 1]);
    let vv = view(v + b * vb + hk * vh, [nk, d], [vs, 1]);
    let rows = pm + arange(0, BM);
    let l2 = load(lse + b * lb + h * lh + (rows as i64), rows < nq, f32::INFINITY) * 1.4426950408889634;
    let dl = load(delta + b * lb + h * lh + (rows as i64), rows < nq, 0.0);
    let dq_i = dq_loop::<T>(qt, dot_, vk, vv, rows, l2, dl, pm, nq, nk, qk_scale, win_left, win_right, BM, BN, DP, MASK_HI, MASK_LO);
    store_block(view(dq + b * dqb + h * dqh, [nq, d], [dqs, 1]), [pm, 0], (dq_i * scale) as T);
}

/// Variable-length forward (FlashAttention's packed "varlen" layout): the
/// sequences of a batch lie one after another along the token dimension
/// of Q (`[total_q, Hq, d]` by strides `qs`, `qh`) and K/V; sequence `b =
/// program_id(2)` holds query tokens `cu_q[b]..cu_q[b+1]` and keys
/// `cu_k[b]..cu_k[b+1]`. One program per `BM` query rows (of at most
/// `max_q`) of head `program_id(1)`; programs past their sequence's end
/// do nothing. Masks, GQA and the online softmax as [`attention_fwd`]
/// (the causal diagonal aligned to the bottom right of each sequence); K
/// is read as `trans` of its `[keys, d]` tile. (On Hopper the views, at
/// offsets loaded from `cu_q` / `cu_k`, are dynamic TMA views: `ptx::tma`.)
/// `LSE`: the natural-log log-sum-exp of token `t` of head `h` at `lse +
/// h·lh + t` (`[Hq, total_q]`, as FlashAttention's varlen API).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_fwd_varlen<
    T: Float,
    const BM: i32,
    const BN: i32,
    const DP: i32,
    const G: i32,
    const MASK_HI: bool,
    const MASK_LO: bool,
    const LSE: bool,
    const FOLD: bool,
>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    o: Ptr<T>,
    lse: Ptr<f32>,
    cu_q: Ptr<i32>,
    cu_k: Ptr<i32>,
    d: i32,
    qk_scale: f32,
    win_left: i32,
    win_right: i32,
    qh: i64,
    qs: i64,
    kh: i64,
    ks: i64,
    vh: i64,
    vs: i64,
    oh: i64,
    os: i64,
    lh: i64,
) {
    static_assert(BM >= 16 && BN >= 16 && DP >= 16, "dot tiles must be at least 16 in every dimension");
    let b = program_id(2);
    let (q0, nq) = sequence(cu_q, b);
    let (k0, nk) = sequence(cu_k, b);
    let pm = program_id(0) * BM;
    let h = program_id(1) as i64;
    let hk = (program_id(1) / G) as i64;
    let vq = tokens(q, q0, nq, h, d, qs, qh);
    let vk = tokens(k, k0, nk, hk, d, ks, kh);
    let vv = tokens(v, k0, nk, hk, d, vs, vh);
    let qt = load_block(vq, [pm, 0], [BM, DP]);
    let rows = pm + arange(0, BM);
    let (off, lo, mut hi) = key_range(pm, nq, nk, win_left, win_right, BM, BN, MASK_HI, MASK_LO);
    // (a program past its sequence's end: no keys, nothing stored)
    hi = select(pm < nq, hi, lo);
    let mut m_i = full([BM], f32::NEG_INFINITY, f32);
    let mut l_i = zeros([BM], f32);
    let mut acc = zeros([BM, DP], f32);
    for j in (lo..hi).step_by(BN) {
        let cols = j + arange(0, BN);
        let s = dot(qt, trans(load_block(vk, [j, 0], [BN, DP])), zeros([BM, BN], f32));
        let (p, alpha, m_new) = online_softmax_step(s, cols, rows, nk, off, qk_scale, win_left, win_right, m_i, MASK_HI, MASK_LO, FOLD);
        l_i = l_i * alpha + sum(p, 1);
        acc = dot(p as T, load_block(vv, [j, 0], [BN, DP]), acc * expand_dims(alpha, 1));
        m_i = m_new;
    }
    let inv = select(l_i > 0.0, 1.0 / l_i, 0.0);
    let vo = tokens(o, q0, nq, h, d, os, oh);
    store_block(vo, [pm, 0], (acc * expand_dims(inv, 1)) as T);
    if LSE {
        let row_lse = select(l_i > 0.0, (m_i + log2(l_i)) * 0.6931471805599453, f32::INFINITY);
        store(lse + h * lh + ((q0 + rows) as i64), row_lse, rows < nq);
    }
}

/// [`attention_fwd_varlen`] with the key loop of [`attention_fwd_overlap`]
/// (each block's softmax overlapping the previous block's `P·V`), K read
/// through a transposed view of the sequence; same arguments, grid and
/// outputs (`AttentionConfig::overlap` picks it).
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_fwd_varlen_overlap<
    T: Float,
    const BM: i32,
    const BN: i32,
    const DP: i32,
    const G: i32,
    const MASK_HI: bool,
    const MASK_LO: bool,
    const LSE: bool,
    const FOLD: bool,
>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    o: Ptr<T>,
    lse: Ptr<f32>,
    cu_q: Ptr<i32>,
    cu_k: Ptr<i32>,
    d: i32,
    qk_scale: f32,
    win_left: i32,
    win_right: i32,
    qh: i64,
    qs: i64,
    kh: i64,
    ks: i64,
    vh: i64,
    vs: i64,
    oh: i64,
    os: i64,
    lh: i64,
) {
    static_assert(BM >= 16 && BN >= 16 && DP >= 16, "dot tiles must be at least 16 in every dimension");
    let b = program_id(2);
    let (q0, nq) = sequence(cu_q, b);
    let (k0, nk) = sequence(cu_k, b);
    let pm = program_id(0) * BM;
    let h = program_id(1) as i64;
    let hk = (program_id(1) / G) as i64;
    let vq = tokens(q, q0, nq, h, d, qs, qh);
    let vkt = view(k + (k0 as i64) * ks + hk * kh, [d, nk], [1, ks]);
    let vv = tokens(v, k0, nk, hk, d, vs, vh);
    let qt = load_block(vq, [pm, 0], [BM, DP]);
    let rows = pm + arange(0, BM);
    let (off, lo, mut hi) = key_range(pm, nq, nk, win_left, win_right, BM, BN, MASK_HI, MASK_LO);
    // (a program past its sequence's end: only the first block, which it
    // does not store)
    hi = select(pm < nq, hi, lo);
    let (acc, l_i, m_i) = overlap_loop::<T>(qt, vkt, vv, rows, lo, hi, nk, off, qk_scale, win_left, win_right, BM, BN, DP, MASK_HI, MASK_LO, FOLD);
    let inv = select(l_i > 0.0, 1.0 / l_i, 0.0);
    let vo = tokens(o, q0, nq, h, d, os, oh);
    store_block(vo, [pm, 0], (acc * expand_dims(inv, 1)) as T);
    if LSE {
        let row_lse = select(l_i > 0.0, (m_i + log2(l_i)) * 0.6931471805599453, f32::INFINITY);
        store(lse + h * lh + ((q0 + rows) as i64), row_lse, rows < nq);
    }
}

/// Variable-length backward, dK and dV: [`attention_bwd_dkdv`]'s loop
/// over the packed layout of [`attention_fwd_varlen`] — sequence `b =
/// program_id(2)` holds query tokens `cu_q[b]..cu_q[b+1]` and keys
/// `cu_k[b]..cu_k[b+1]`; one program per `BN` keys (of at most the
/// longest sequence's) of query head `program_id(1)`; programs past their
/// sequence's end see no query rows and store nothing. `lse` and `delta`
/// are `[Hq, total_q]` (`h·lh + token`). `ACC`: the query head's f32
/// dK·scale and dV go to row `h·total_k + token` (rows of `DP`) of
/// `dk_acc` / `dv_acc`, which [`attention_bwd_sum`] over one batch entry
/// of `total_k` keys adds over the group; otherwise to `dk` / `dv` by
/// their strides. `DQ`: dQ's f32 rows by atomics as the dense kernel's,
/// row `h·lh + token` of `dq_acc`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_dkdv_varlen<
    T: Float,
    const BM: i32,
    const BN: i32,
    const DP: i32,
    const G: i32,
    const MASK_HI: bool,
    const MASK_LO: bool,
    const ACC: bool,
    const DQ: bool,
>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    dout: Ptr<T>,
    lse: Ptr<f32>,
    delta: Ptr<f32>,
    dk: Ptr<T>,
    dv: Ptr<T>,
    dk_acc: Ptr<f32>,
    dv_acc: Ptr<f32>,
    dq_acc: Ptr<f32>,
    cu_q: Ptr<i32>,
    cu_k: Ptr<i32>,
    d: i32,
    total_k: i32,
    qk_scale: f32,
    scale: f32,
    win_left: i32,
    win_right: i32,
    qh: i64,
    qs: i64,
    kh: i64,
    ks: i64,
    vh: i64,
    vs: i64,
    dh: i64,
    ds: i64,
    dkh: i64,
    dks: i64,
    dvh: i64,
    dvs: i64,
    lh: i64,
) {
    static_assert(BM >= 16 && BN >= 16 && DP >= 16, "dot tiles must be at least 16 in every dimension");
    let b = program_id(2);
    let (q0, nq_b) = sequence(cu_q, b);
    let (k0, nk) = sequence(cu_k, b);
    let n0 = program_id(0) * BN;
    let h = program_id(1) as i64;
    let hk = (program_id(1) / G) as i64;
    let kt = load_block(tokens(k, k0, nk, hk, d, ks, kh), [n0, 0], [BN, DP]);
    let vt = load_block(tokens(v, k0, nk, hk, d, vs, vh), [n0, 0], [BN, DP]);
    let vq = tokens(q, q0, nq_b, h, d, qs, qh);
    let vdo = tokens(dout, q0, nq_b, h, d, ds, dh);
    let lrow = lse + h * lh + (q0 as i64);
    let drow = delta + h * lh + (q0 as i64);
    let dqrow = dq_acc + (h * lh + (q0 as i64)) * (DP as i64);
    // (a program past its sequence's end: no query rows, so no steps)
    let nq = select(n0 < nk, nq_b, 0);
    let (keys, dk_i, dv_i) = dkdv_loop::<T>(kt, vt, vq, vdo, lrow, drow, dqrow, n0, nq, nk, qk_scale, win_left, win_right, BM, BN, DP, MASK_HI, MASK_LO, DQ);
    let dk_out = dk_i * scale;
    if ACC {
        let dims = arange(0, DP);
        let row = (h * (total_k as i64) + ((k0 + keys) as i64)) * (DP as i64);
        let at = expand_dims(row, 1) + expand_dims(dims as i64, 0);
        let ok = expand_dims(keys < nk, 1) & expand_dims(dims < DP, 0);
        store(dk_acc + at, dk_out, ok);
        store(dv_acc + at, dv_i, ok);
    } else {
        store_block(tokens(dk, k0, nk, hk, d, dks, dkh), [n0, 0], dk_out as T);
        store_block(tokens(dv, k0, nk, hk, d, dvs, dvh), [n0, 0], dv_i as T);
    }
}

/// Variable-length backward, dQ: [`attention_bwd_dq`]'s loop over the
/// packed layout (as [`attention_bwd_dkdv_varlen`]); one program per `BM`
/// query rows of a sequence; programs past their sequence's end see no
/// keys and store nothing.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn attention_bwd_dq_varlen<T: Float, const BM: i32, const BN: i32, const DP: i32, const G: i32, const MASK_HI: bool, const MASK_LO: bool>(
    q: Ptr<T>,
    k: Ptr<T>,
    v: Ptr<T>,
    dout: Ptr<T>,
    lse: Ptr<f32>,
    delta: Ptr<f32>,
    dq: Ptr<T>,
    cu_q: Ptr<i32>,
    cu_k: Ptr<i32>,
    d: i32,
    qk_scale: f32,
    scale: f32,
    win_left: i32,
    win_right: i32,
    qh: i64,
    qs: i64,
    kh: i64,
    ks: i64,
    vh: i64,
    vs: i64,
    dh: i64,
    ds: i64,
    dqh: i64,
    dqs: i64,
    lh: i64,
) {
    static_assert(BM >= 16 && BN >= 16 && DP >= 16, "dot tiles must be at least 16 in every dimension");
    let b = program_id(2);
    let (q0, nq) = sequence(cu_q, b);
    let (k0, nk_b) = sequence(cu_k, b);
    let pm = program_id(0) * BM;
    let h = program_id(1) as i64;
    let hk = (program_id(1) / G) as i64;
    let qt = load_block(tokens(q, q0, nq, h, d, qs, qh), [pm, 0], [BM, DP]);
    let dot_ = load_block(tokens(dout, q0, nq, h, d, ds, dh), [pm, 0], [BM, DP]);
    let vk = tokens(k, k0, nk_b, hk, d, ks, kh);
    let vv = tokens(v, k0, nk_b, hk, d, vs, vh);
    let rows = pm + arange(0, BM);
    let at = h * lh + ((q0 + rows) as i64);
    let l2 = load(lse + at, rows < nq, f32::INFINITY) * 1.4426950408889634;
    let dl = load(delta + at, rows < nq, 0.0);
    // (a program past its sequence's end: no keys, so no steps)
    let nk = select(pm < nq, nk_b, 0);
    let dq_i = dq_loop::<T>(qt, dot_, vk, vv, rows, l2, dl, pm, nq, nk, qk_scale, win_left, win_right, BM, BN, DP, MASK_HI, MASK_LO);
    store_block(tokens(dq, q0, nq, h, d, dqs, dqh), [pm, 0], (dq_i * scale) as T);
}
