//! The library's attention forward against an f64 reference on fresh random
//! inputs: odd sequence lengths (not multiples of any block), `seqlen_q ≠
//! seqlen_k` with the causal mask aligned to the bottom right (including
//! rows that see no key), sliding windows, GQA and MQA, padded head dims,
//! `[b, h, s, d]`, `[b, s, h, d]` and strided tensors, the log-sum-exp —
//! with outputs poisoned (NaN) so that unwritten elements fail and the gaps
//! of a strided output must stay unwritten. Then every kind of bad
//! argument, which must come back as an error naming it.
//!
//! Error metric: |got − want| / (1 + |want|) on the output (its rows are
//! averages of O(1) values), |got − want| / (1 + |want|) on the
//! log-sum-exp; thresholds 1e-2 (bf16) and 4e-3 (f16) for the output,
//! 1e-3 for the f32 log-sum-exp.

use ferrotile::{Device, DeviceKind, FloatElement};

mod common;
use common::devices;
use ferrotile_kernels::attention::{attention, attention_backward, AttentionConfig, AttentionOptions, AttentionProblem, BackwardConfig, DecodeConfig, Strides};
use ferrotile_kernels::reference;
use ferrotile_kernels::reference::{attention_row, Rng};
use ferrotile_kernels::LibError;
use half::{bf16, f16};

/// One case: the problem, causal, window, scale, and whether to ask for the
/// log-sum-exp.
#[derive(Clone)]
struct Case {
    p: AttentionProblem,
    causal: bool,
    window: (Option<usize>, Option<usize>),
    scale: Option<f32>,
    lse: bool,
    config: Option<AttentionConfig>,
    /// keys per batch entry (decode)
    seqlens: Option<Vec<i32>>,
    /// decode path: forced splits
    splits: Option<u32>,
    /// backward tiles, forced
    backward: Option<BackwardConfig>,
    /// decode from a paged copy of K and V with pages of this many keys
    /// (vLLM's `[pages, page_size, heads_kv, d]`, pages in a scrambled
    /// order with unused ones between them)
    paged: Option<usize>,
}

fn case(p: AttentionProblem) -> Case {
    Case { p, causal: false, window: (None, None), scale: None, lse: true, config: None, seqlens: None, splits: None, backward: None, paged: None }
}

/// The paged copy of a `[batch, heads_kv, seqlen_k, d]` tensor `x` (strides
/// `st`) in pages of `ps` keys: the cache `[pages, ps, heads_kv, d]`, its
/// page count and the block table (`[batch, max_pages]`; slots past an
/// entry's pages hold an index far outside the cache, which must never be
/// read). Entry `b`'s page `j` is cache page `(b·mp + j)·7 mod pages` — a
/// scramble, with every third page unused.
fn paged_copy<T: FloatElement>(x: &[T], p: &AttentionProblem, st: &Strides, ps: usize) -> (Vec<T>, usize, Vec<i32>, usize) {
    let used = p.seqlen_k.div_ceil(ps).max(1);
    let mp = used + 1;
    let pages = (p.batch * mp * 3).div_ceil(2).max(2) | 1;
    let (hk, d) = (p.heads_kv, p.head_dim);
    let cs = Strides::bshd(hk, ps, d);
    let mut cache = vec![T::from_f64(f64::NAN); pages * ps * hk * d];
    let mut table = vec![i32::MAX / 2; p.batch * mp];
    for b in 0..p.batch {
        for j in 0..used {
            let pg = ((b * mp + j) * 7) % pages;
            table[b * mp + j] = pg as i32;
            for r in 0..ps.min(p.seqlen_k.saturating_sub(j * ps)) {
                for h in 0..hk {
                    for e in 0..d {
                        cache[pg * cs.batch + r * cs.seq + h * cs.head + e] = x[b * st.batch + h * st.head + (j * ps + r) * st.seq + e];
                    }
                }
            }
        }
    }
    (cache, pages, table, mp)
}

/// Elements a tensor of `heads × seq` rows of `d` with strides `s` spans.
fn span(batch: usize, heads: usize, seq: usize, d: usize, s: &Strides) -> usize {
    if seq == 0 {
        // (no keys: a one-element buffer that is never read)
        return 1;
    }
    (batch - 1) * s.batch + (heads - 1) * s.head + (seq - 1) * s.seq + d
}

fn check<T: FloatElement>(dev: &Device, c: &Case, seed: u64, tol: f64) {
    let p = &c.p;
    let mut rng = Rng::new(seed);
    let mut gen = |len: usize| -> Vec<T> { (0..len).map(|_| T::from_f64(rng.normal())).collect() };
    let (qh, kh, vh) = (
        gen(span(p.batch, p.heads_q, p.seqlen_q, p.head_dim, &p.q)),
        gen(span(p.batch, p.heads_kv, p.seqlen_k, p.head_dim, &p.k)),
        gen(span(p.batch, p.heads_kv, p.seqlen_k, p.head_dim, &p.v)),
    );
    let f = |x: &[T]| -> Vec<f64> { x.iter().map(|e| e.to_f64()).collect() };
    let (qf, kf, vf) = (f(&qh), f(&kh), f(&vh));
    let olen = span(p.batch, p.heads_q, p.seqlen_q, p.head_dim, &p.o);
    let q = dev.from_slice(&qh).unwrap();
    // (paged: K and V from a scrambled paged copy, the problem's K/V strides
    // those of the cache)
    let mut pc = *p;
    let (k, v, table, paged) = match c.paged {
        Some(ps) => {
            let ((kc, pages, table, mp), (vc, _, _, _)) = (paged_copy(&kh, p, &p.k, ps), paged_copy(&vh, p, &p.v, ps));
            pc.k = Strides::bshd(p.heads_kv, ps, p.head_dim);
            pc.v = pc.k;
            let table = dev.from_slice(&table).unwrap();
            (dev.from_slice(&kc).unwrap(), dev.from_slice(&vc).unwrap(), Some(table), Some((ps, pages, mp)))
        }
        None => (dev.from_slice(&kh).unwrap(), dev.from_slice(&vh).unwrap(), None, None),
    };
    let paged = paged.map(|(page_size, num_pages, max_pages)| ferrotile_kernels::attention::PagedKv {
        block_table: table.as_ref().unwrap(),
        max_pages,
        page_size,
        num_pages,
    });
    let mut o = dev.full(olen, T::from_f64(f64::NAN)).unwrap();
    let nl = p.batch * p.heads_q * p.seqlen_q;
    let mut l = dev.full(nl, f32::NAN).unwrap();
    let seqlens = c.seqlens.as_ref().map(|s| dev.from_slice(s).unwrap());
    let decode = c.splits.map(|sp| DecodeConfig { splits: Some(sp), ..DecodeConfig::default_for(dev, (p.heads_q / p.heads_kv) * p.seqlen_q) });
    let opts = AttentionOptions {
        causal: c.causal,
        window: c.window,
        scale: c.scale,
        config: c.config,
        seqlens_k: seqlens.as_ref(),
        decode,
        backward: None,
        paged,
        deterministic: false,
    };
    let what = format!(
        "attention {} on {}: {p:?} causal={} window={:?} scale={:?} config={:?} seqlens={:?} splits={:?} paged={:?}",
        T::DTYPE,
        dev.name(),
        c.causal,
        c.window,
        c.scale,
        c.config,
        c.seqlens,
        c.splits,
        c.paged
    );
    attention(dev, &q, &k, &v, &mut o, if c.lse { Some(&mut l) } else { None }, &pc, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = o.to_vec().unwrap();
    let got_l = l.to_vec().unwrap();
    let scale = c.scale.map_or(1.0 / (p.head_dim as f64).sqrt(), |s| s as f64);
    let right = if c.causal { Some(0) } else { c.window.1 };
    // every row of small problems; sampled rows (and the corners) of large ones
    let all = p.batch * p.heads_q * p.seqlen_q <= 4096;
    let mut rows: Vec<(usize, usize, usize)> = if all {
        (0..p.batch).flat_map(|b| (0..p.heads_q).flat_map(move |h| (0..p.seqlen_q).map(move |i| (b, h, i)))).collect()
    } else {
        let mut r = Rng::new(seed + 1);
        (0..64).map(|_| (r.below(p.batch as u64) as usize, r.below(p.heads_q as u64) as usize, r.below(p.seqlen_q as u64) as usize)).collect()
    };
    if !all {
        rows.extend([(0, 0, 0), (p.batch - 1, p.heads_q - 1, p.seqlen_q - 1)]);
    }
    let mut written = vec![false; olen];
    let (mut worst, mut worst_l) = (0.0f64, 0.0f64);
    for (b, h, i) in rows {
        // (per-entry key counts: the same tensors with fewer keys)
        let pb = AttentionProblem { seqlen_k: c.seqlens.as_ref().map_or(p.seqlen_k, |s| s[b].clamp(0, p.seqlen_k as i32) as usize), ..*p };
        let (want, want_l) = attention_row(&qf, &kf, &vf, &pb, b, h, i, scale, c.window.0, right);
        let at = b * p.o.batch + h * p.o.head + i * p.o.seq;
        for (e, w) in want.iter().enumerate() {
            let g = got[at + e].to_f64();
            let err = if g.is_finite() { (g - w).abs() / (1.0 + w.abs()) } else { f64::INFINITY };
            assert!(err <= tol, "{what}: out[b={b}, h={h}, i={i}, {e}] = {g}, want {w} (err {err:.2e})");
            worst = worst.max(err);
            written[at + e] = true;
        }
        if c.lse {
            let g = got_l[(b * p.heads_q + h) * p.seqlen_q + i] as f64;
            let err = if want_l.is_infinite() {
                if g == want_l {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                (g - want_l).abs() / (1.0 + want_l.abs())
            };
            assert!(err <= 1e-3, "{what}: lse[b={b}, h={h}, i={i}] = {g}, want {want_l}");
            worst_l = worst_l.max(err);
        }
    }
    if all {
        // the gaps of a strided output are never written
        for (x, w) in got.iter().zip(&written) {
            assert!(*w || x.to_f64().is_nan(), "{what}: wrote outside the output's rows");
        }
    }
    eprintln!("{what}: max err {worst:.2e}, lse {worst_l:.2e}");
}

fn cases(dev: &Device) -> Vec<Case> {
    let bhsd = AttentionProblem::bhsd;
    let bshd = AttentionProblem::bshd;
    let mut v = vec![
        // MHA, odd length, both layouts
        case(bhsd(2, 2, 2, 37, 37, 64)),
        case(bshd(1, 3, 3, 29, 29, 32)),
        // GQA and MQA, causal
        Case { causal: true, ..case(bshd(2, 4, 2, 50, 50, 32)) },
        Case { causal: true, ..case(bhsd(1, 4, 1, 33, 33, 64)) },
        // causal with seqlen_q < seqlen_k and > seqlen_k (the first rows see
        // no key: zeros, lse +inf)
        Case { causal: true, ..case(bhsd(1, 2, 2, 20, 45, 64)) },
        Case { causal: true, ..case(bhsd(1, 2, 1, 40, 25, 32)) },
        // sliding windows, with and without causal, and a scale
        Case { window: (Some(8), Some(4)), ..case(bhsd(1, 2, 2, 33, 33, 32)) },
        Case { causal: true, window: (Some(10), None), scale: Some(0.3), ..case(bshd(1, 4, 2, 47, 39, 64)) },
        // a negative and a zero scale (the kernels fold only a positive
        // scale into exp2's argument)
        Case { causal: true, scale: Some(-0.4), ..case(bhsd(1, 2, 1, 31, 45, 64)) },
        Case { window: (Some(6), Some(2)), scale: Some(0.0), ..case(bshd(1, 2, 2, 27, 27, 32)) },
        // padded head dims (80 → 128, 24 → 32), no lse
        Case { lse: false, ..case(bshd(1, 2, 1, 21, 26, 80)) },
        Case { causal: true, lse: false, ..case(bhsd(2, 1, 1, 19, 19, 24)) },
        // head dims 128 and 256 (200 padded)
        Case { causal: true, ..case(bhsd(1, 2, 2, 70, 70, 128)) },
        Case { causal: true, ..case(bshd(1, 2, 1, 9, 17, 200)) },
    ];
    // the same forward problems through the overlapped loop
    // (`AttentionConfig::overlap`: key block `lo` peeled off, the last P·V
    // after the loop) on every device, its default tiles; and with no keys
    let overlapped = |p: &AttentionProblem| Some(AttentionConfig { overlap: true, ..AttentionConfig::default_for(dev, p.padded_dim()) });
    let ov: Vec<Case> =
        v.iter().map(|c| Case { p: c.p, causal: c.causal, window: c.window, scale: c.scale, lse: c.lse, config: overlapped(&c.p), ..case(c.p) }).collect();
    v.extend(ov);
    v.push(Case { causal: true, config: overlapped(&bhsd(1, 2, 2, 20, 0, 32)), ..case(bhsd(1, 2, 2, 20, 0, 32)) });
    // decode: 1–16 query rows against more keys, all query heads of a K/V
    // head in one tile, keys split over programs (forced splits: the
    // combine step runs on every device), per-entry key counts (0, more
    // than the cache: clamped), causal aligned to each entry's keys
    v.extend([
        Case { splits: Some(3), ..case(bhsd(2, 4, 4, 1, 300, 64)) },
        Case { splits: Some(4), seqlens: Some(vec![200, 0]), ..case(bshd(2, 8, 2, 1, 257, 128)) },
        Case { causal: true, seqlens: Some(vec![190, 7, 64]), ..case(bhsd(3, 4, 1, 5, 190, 64)) },
        Case { causal: true, splits: Some(5), seqlens: Some(vec![190, 7, 500]), ..case(bhsd(3, 4, 1, 5, 190, 64)) },
        Case { causal: true, ..case(bhsd(1, 2, 2, 16, 100, 32)) },
        Case { splits: Some(2), lse: false, ..case(bshd(1, 4, 2, 3, 77, 80)) },
        Case { causal: true, splits: Some(2), scale: Some(-0.3), ..case(bhsd(1, 4, 2, 2, 90, 64)) },
        // no keys at all: zero rows and a log-sum-exp of +inf, forward and decode
        Case { causal: true, ..case(bhsd(1, 2, 2, 20, 0, 32)) },
        case(bhsd(1, 2, 1, 3, 0, 64)),
        // a paged cache: pages smaller than, equal to and larger than a key
        // step, with splits, per-entry key counts, causal and GQA
        Case { paged: Some(16), splits: Some(3), ..case(bhsd(2, 4, 2, 1, 300, 64)) },
        Case { paged: Some(32), causal: true, seqlens: Some(vec![190, 7, 0]), ..case(bshd(3, 4, 1, 5, 190, 64)) },
        Case { paged: Some(256), lse: false, ..case(bshd(1, 4, 2, 3, 77, 80)) },
        Case { paged: Some(64), seqlens: Some(vec![100, 257]), ..case(bhsd(2, 8, 8, 1, 257, 128)) },
    ]);
    // strided: Q with padded rows, K and V in different layouts, the output
    // `[b, h, s, d]` with a gap after each row
    let mut p = bshd(2, 2, 1, 23, 31, 64);
    p.q = Strides { batch: 23 * 2 * 72, head: 72, seq: 2 * 72 };
    p.v = Strides::bhsd(1, 31, 64);
    p.o = Strides { batch: 2 * 23 * 80, head: 23 * 80, seq: 80 };
    v.push(case(p));
    if dev.kind() == DeviceKind::Cuda {
        v.extend([
            Case { causal: true, ..case(bhsd(2, 4, 4, 300, 300, 128)) },
            Case { causal: true, ..case(bhsd(1, 2, 2, 130, 257, 256)) },
            case(bshd(2, 8, 2, 1000, 1000, 64)),
            Case { window: (Some(100), Some(50)), ..case(bhsd(1, 4, 2, 777, 777, 128)) },
            // decode at serving sizes: splits chosen to fill the GPU
            case(bshd(32, 32, 8, 1, 8192, 128)),
            Case { paged: Some(16), seqlens: Some((0..8).map(|b| 4096 - 333 * b).collect()), ..case(bshd(8, 32, 8, 1, 4096, 128)) },
            Case { causal: true, seqlens: Some((0..4).map(|b| 4096 - 1000 * b).collect()), ..case(bhsd(4, 32, 32, 8, 4096, 128)) },
        ]);
        // large enough for the autotuner (every candidate then runs; left
        // out with FERROTILE_ATTN_LARGE=0, e.g. under compute-sanitizer)
        if std::env::var("FERROTILE_ATTN_LARGE").as_deref() != Ok("0") {
            v.extend([Case { causal: true, ..case(bshd(2, 8, 2, 2048, 2048, 128)) }, case(bhsd(2, 8, 8, 2048, 2048, 64))]);
        }
        // a producer warpgroup (`AttentionConfig::warp_specialize`):
        // causal, a window, GQA with a transposed layout, programs whose key
        // range is empty
        let ws = Some(AttentionConfig {
            bm: 128,
            bn: 128,
            num_warps: 8,
            num_stages: 2,
            split_masks: false,
            overlap: true,
            warp_specialize: true,
            rotate_chains: false,
        });
        v.extend([
            Case { causal: true, config: ws, ..case(bhsd(2, 4, 4, 300, 300, 128)) },
            Case { window: (Some(100), Some(50)), config: ws, ..case(bhsd(1, 4, 2, 777, 777, 128)) },
            Case { causal: true, config: ws, ..case(bshd(2, 8, 2, 130, 457, 128)) },
            Case { causal: true, config: ws, ..case(bhsd(1, 2, 2, 300, 20, 100)) },
        ]);
        // every tuner candidate forced on a problem with ragged edges
        for (dim, causal) in [(64, true), (128, false), (256, true)] {
            let pd = AttentionProblem::bhsd(1, 2, 1, 0, 0, dim).padded_dim();
            for tc in ferrotile_kernels::attention::attention_candidates(pd) {
                let cfg = AttentionConfig::from_tune(&tc).unwrap();
                v.push(Case { causal, config: Some(cfg), ..case(bhsd(1, 2, 1, 211, 333, dim)) });
                // and the plain loop with its chained dots rotated (`ROT`)
                if !cfg.overlap && dim <= 128 {
                    let rot = AttentionConfig::from_tune(&tc.clone().with("ROT", 1)).unwrap();
                    assert!(rot.rotate_chains);
                    v.push(Case { causal, config: Some(rot), ..case(bhsd(1, 2, 1, 211, 333, dim)) });
                }
            }
        }
    }
    v
}

#[test]
fn attention_matches_f64() {
    for dev in devices() {
        for (i, c) in cases(&dev).iter().enumerate() {
            if i % 2 == 0 {
                check::<bf16>(&dev, c, 100 + i as u64, 1e-2);
            } else {
                check::<f16>(&dev, c, 100 + i as u64, 4e-3);
            }
        }
    }
}

#[test]
fn attention_rejects_bad_arguments() {
    let dev = Device::cpu();
    let p = AttentionProblem::bhsd(1, 2, 2, 8, 8, 16);
    let n = 2 * 8 * 16;
    let buf = |len: usize| dev.zeros::<f16>(len).unwrap();
    let (q, k, v) = (buf(n), buf(n), buf(n));
    let mut o = buf(n);
    let opts = AttentionOptions::default();
    let err = |r: Result<(), LibError>| r.expect_err("must be an error").to_string();
    let e = err(attention(&dev, &q, &k, &v, &mut o, None, &AttentionProblem { head_dim: 300, ..p }, &opts));
    assert!(e.contains("head_dim"), "{e}");
    let e = err(attention(&dev, &q, &k, &v, &mut o, None, &AttentionProblem { heads_kv: 3, ..p }, &opts));
    assert!(e.contains("heads_kv"), "{e}");
    let short = buf(n - 1);
    let e = err(attention(&dev, &q, &short, &v, &mut o, None, &p, &opts));
    assert!(e.contains("`k`"), "{e}");
    let e = err(attention(&dev, &q, &k, &v, &mut o, None, &AttentionProblem { o: Strides { batch: 0, head: 8, seq: 16 }, ..p }, &opts));
    assert!(e.contains("`out`") && e.contains("overlap"), "{e}");
    let mut l = dev.zeros::<f32>(15).unwrap();
    let e = err(attention(&dev, &q, &k, &v, &mut o, Some(&mut l), &p, &opts));
    assert!(e.contains("`lse`"), "{e}");
    let e = err(attention(&dev, &q, &k, &v, &mut o, None, &p, &AttentionOptions { scale: Some(f32::NAN), ..opts }));
    assert!(e.contains("scale"), "{e}");
    let e = err(attention(
        &dev,
        &q,
        &k,
        &v,
        &mut o,
        None,
        &p,
        &AttentionOptions {
            config: Some(AttentionConfig {
                bm: 24,
                bn: 16,
                num_warps: 4,
                num_stages: 1,
                split_masks: false,
                overlap: false,
                warp_specialize: false,
                rotate_chains: false,
            }),
            ..opts
        },
    ));
    assert!(e.contains("bm"), "{e}");
    let (q32, k32, v32) = (dev.zeros::<f32>(n).unwrap(), dev.zeros::<f32>(n).unwrap(), dev.zeros::<f32>(n).unwrap());
    let mut o32 = dev.zeros::<f32>(n).unwrap();
    let e = err(attention(&dev, &q32, &k32, &v32, &mut o32, None, &p, &opts));
    assert!(e.contains("dtype"), "{e}");
    let sl = dev.from_slice(&[8i32]).unwrap();
    let long = AttentionProblem::bhsd(1, 2, 2, 40, 8, 16);
    let (q2, o2_len) = (buf(2 * 40 * 16), 2 * 40 * 16);
    let mut o2 = buf(o2_len);
    let e = err(attention(&dev, &q2, &k, &v, &mut o2, None, &long, &AttentionOptions { seqlens_k: Some(&sl), ..opts }));
    assert!(e.contains("`seqlens_k`"), "{e}");
    let p2 = AttentionProblem { batch: 2, ..AttentionProblem::bhsd(1, 2, 2, 1, 8, 16) };
    let (q3, k3, v3) = (buf(2 * 2 * 16), buf(2 * 2 * 8 * 16), buf(2 * 2 * 8 * 16));
    let mut o3 = buf(2 * 2 * 16);
    let p2 = AttentionProblem { q: Strides::bhsd(2, 1, 16), k: Strides::bhsd(2, 8, 16), v: Strides::bhsd(2, 8, 16), o: Strides::bhsd(2, 1, 16), ..p2 };
    let e = err(attention(&dev, &q3, &k3, &v3, &mut o3, None, &p2, &AttentionOptions { seqlens_k: Some(&sl), ..opts }));
    assert!(e.contains("`seqlens_k`") && e.contains("batch"), "{e}");
    // paged caches: decode only; the table's size, a power-of-two page
    // size, keys within the table, pages within K and V
    use ferrotile_kernels::attention::PagedKv;
    let table = dev.from_slice(&[0i32, 1, 2, 3]).unwrap();
    let pk = |max_pages: usize, page_size: usize, num_pages: usize| PagedKv { block_table: &table, max_pages, page_size, num_pages };
    let pd = AttentionProblem { k: Strides::bshd(2, 4, 16), v: Strides::bshd(2, 4, 16), ..p2 };
    let paged = |pg: PagedKv<'_>, pr: &AttentionProblem, o: &mut ferrotile::Buffer<f16>| {
        err(attention(&dev, &q3, &k3, &v3, o, None, pr, &AttentionOptions { paged: Some(pg), ..opts }))
    };
    let e = paged(pk(3, 4, 2), &pd, &mut o3);
    assert!(e.contains("`block_table`"), "{e}");
    let e = paged(pk(2, 3, 2), &AttentionProblem { batch: 1, ..pd }, &mut o3);
    assert!(e.contains("`page_size`"), "{e}");
    let e = paged(pk(1, 4, 2), &AttentionProblem { batch: 1, ..pd }, &mut o3);
    assert!(e.contains("`seqlen_k`") && e.contains("max_pages"), "{e}");
    let e = paged(pk(2, 4, 9), &AttentionProblem { batch: 1, ..pd }, &mut o3);
    assert!(e.contains("paged `k`"), "{e}");
    let e = paged(pk(2, 4, 0), &AttentionProblem { batch: 1, ..pd }, &mut o3);
    assert!(e.contains("`num_pages`"), "{e}");
    let long_paged = AttentionProblem { k: Strides::bshd(2, 4, 16), v: Strides::bshd(2, 4, 16), ..long };
    let e = err(attention(&dev, &q2, &k, &v, &mut o2, None, &long_paged, &AttentionOptions { paged: Some(pk(2, 4, 2)), ..opts }));
    assert!(e.contains("`paged`") && e.contains("decode"), "{e}");
    // a valid paged problem runs
    attention(&dev, &q3, &k3, &v3, &mut o3, None, &AttentionProblem { batch: 1, ..pd }, &AttentionOptions { paged: Some(pk(2, 4, 2)), ..opts }).unwrap();
    // empty problems are no work, not errors
    attention(&dev, &q, &k, &v, &mut o, None, &AttentionProblem { seqlen_q: 0, ..p }, &opts).unwrap();
}

/// The backward against the f64 gradients: the library's forward gives O
/// and the log-sum-exp, `dO` is random, dQ/dK/dV are poisoned. Error: the
/// worst |got − want| over a tensor, relative to `1 + max |want|` of that
/// tensor (a gradient's elements are sums of many signed terms: an element
/// near 0 says nothing about the precision of the others).
fn check_backward<T: FloatElement>(dev: &Device, c: &Case, seed: u64, tol: f64) {
    let p = &c.p;
    let mut rng = Rng::new(seed);
    let mut gen = |len: usize| -> Vec<T> { (0..len).map(|_| T::from_f64(rng.normal())).collect() };
    let (qlen, klen, vlen, olen) = (
        span(p.batch, p.heads_q, p.seqlen_q, p.head_dim, &p.q),
        span(p.batch, p.heads_kv, p.seqlen_k, p.head_dim, &p.k),
        span(p.batch, p.heads_kv, p.seqlen_k, p.head_dim, &p.v),
        span(p.batch, p.heads_q, p.seqlen_q, p.head_dim, &p.o),
    );
    let (qh, kh, vh, doh) = (gen(qlen), gen(klen), gen(vlen), gen(olen));
    let f = |x: &[T]| -> Vec<f64> { x.iter().map(|e| e.to_f64()).collect() };
    let (q, k, v, dout) = (dev.from_slice(&qh).unwrap(), dev.from_slice(&kh).unwrap(), dev.from_slice(&vh).unwrap(), dev.from_slice(&doh).unwrap());
    let mut o = dev.full(olen, T::from_f64(f64::NAN)).unwrap();
    let mut l = dev.full(p.batch * p.heads_q * p.seqlen_q, f32::NAN).unwrap();
    let opts = AttentionOptions { causal: c.causal, window: c.window, scale: c.scale, ..Default::default() };
    let what = format!(
        "attention_backward {} on {}: {p:?} causal={} window={:?} scale={:?} backward={:?}",
        T::DTYPE,
        dev.name(),
        c.causal,
        c.window,
        c.scale,
        c.backward
    );
    attention(dev, &q, &k, &v, &mut o, Some(&mut l), p, &opts).unwrap_or_else(|e| panic!("{what}: forward: {e}"));
    let nan = T::from_f64(f64::NAN);
    let (mut dq, mut dk, mut dv) = (dev.full(qlen, nan).unwrap(), dev.full(klen, nan).unwrap(), dev.full(vlen, nan).unwrap());
    let bopts = AttentionOptions { backward: c.backward, ..opts };
    attention_backward(dev, &q, &k, &v, &o, &dout, &l, &mut dq, &mut dk, &mut dv, p, &bopts).unwrap_or_else(|e| panic!("{what}: {e}"));
    let scale = c.scale.map_or(1.0 / (p.head_dim as f64).sqrt(), |s| s as f64);
    let right = if c.causal { Some(0) } else { c.window.1 };
    let (wq, wk, wv) = reference::attention_backward(&f(&qh), &f(&kh), &f(&vh), &f(&doh), p, scale, c.window.0, right);
    let mut worst = [0.0f64; 3];
    for (t, (name, got, want, heads, seq, st)) in [
        ("dq", dq.to_vec().unwrap(), &wq, p.heads_q, p.seqlen_q, &p.q),
        ("dk", dk.to_vec().unwrap(), &wk, p.heads_kv, p.seqlen_k, &p.k),
        ("dv", dv.to_vec().unwrap(), &wv, p.heads_kv, p.seqlen_k, &p.v),
    ]
    .into_iter()
    .enumerate()
    {
        let norm = 1.0 + want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let mut written = vec![false; got.len()];
        let d = p.head_dim;
        for b in 0..p.batch {
            for h in 0..heads {
                for i in 0..seq {
                    for e in 0..d {
                        let at = b * st.batch + h * st.head + i * st.seq + e;
                        let w = want[((b * heads + h) * seq + i) * d + e];
                        let g = got[at].to_f64();
                        let err = if g.is_finite() { (g - w).abs() / norm } else { f64::INFINITY };
                        assert!(err <= tol, "{what}: {name}[b={b}, h={h}, s={i}, {e}] = {g}, want {w} (err {err:.2e}, tensor max {norm:.1})");
                        worst[t] = worst[t].max(err);
                        written[at] = true;
                    }
                }
            }
        }
        for (x, w) in got.iter().zip(&written) {
            assert!(*w || x.to_f64().is_nan(), "{what}: {name}: wrote outside the tensor's rows");
        }
    }
    eprintln!("{what}: max err dq {:.2e} dk {:.2e} dv {:.2e}", worst[0], worst[1], worst[2]);
}

fn backward_cases(dev: &Device) -> Vec<Case> {
    let bhsd = AttentionProblem::bhsd;
    let bshd = AttentionProblem::bshd;
    let mut v = vec![
        case(bhsd(2, 2, 2, 37, 37, 64)),
        case(bshd(1, 3, 3, 29, 45, 32)),
        // GQA and MQA (dK/dV summed over the group), causal
        Case { causal: true, ..case(bshd(2, 4, 2, 50, 50, 32)) },
        Case { causal: true, ..case(bhsd(1, 4, 1, 33, 33, 64)) },
        // causal with seqlen_q < and > seqlen_k (rows that see no key)
        Case { causal: true, ..case(bhsd(1, 2, 2, 20, 45, 64)) },
        Case { causal: true, ..case(bhsd(1, 2, 1, 40, 25, 32)) },
        // windows and a scale
        Case { window: (Some(8), Some(4)), ..case(bhsd(1, 2, 2, 33, 33, 32)) },
        Case { causal: true, window: (Some(10), None), scale: Some(0.3), ..case(bshd(1, 4, 2, 47, 39, 64)) },
        // padded head dims, 128 and 256
        case(bshd(1, 2, 1, 21, 26, 80)),
        Case { causal: true, ..case(bhsd(2, 1, 1, 19, 19, 24)) },
        Case { causal: true, ..case(bhsd(1, 2, 2, 40, 40, 128)) },
        case(bshd(1, 2, 1, 9, 17, 200)),
        // no keys, no queries: zero gradients
        case(bhsd(1, 2, 2, 20, 0, 32)),
        case(bhsd(1, 2, 1, 0, 20, 32)),
    ];
    // strided: Q (and so dQ) with padded rows, V `[b, h, s, d]`
    let mut p = bshd(2, 2, 1, 23, 31, 64);
    p.q = Strides { batch: 23 * 2 * 72, head: 72, seq: 2 * 72 };
    p.v = Strides::bhsd(1, 31, 64);
    v.push(case(p));
    // FlashAttention-2's single pass (dQ by atomics in the dK/dV loop) on
    // the cases where it differs most: GQA, masks on both sides, rows that
    // see no key, no keys, padded and strided head dims
    let single = |c: Case| {
        let pd = c.p.padded_dim();
        Case { backward: Some(BackwardConfig { atomic_dq: true, ..BackwardConfig::default_for(dev, pd) }), ..c }
    };
    let picks: Vec<Case> = [2, 3, 5, 7, 8, 10, 12, 13].iter().filter_map(|&i| v.get(i).cloned()).chain(v.last().cloned()).map(single).collect();
    v.extend(picks);
    if dev.kind() == DeviceKind::Cuda {
        v.extend([
            Case { causal: true, ..case(bhsd(2, 4, 4, 300, 300, 128)) },
            Case { causal: true, ..case(bhsd(1, 2, 2, 130, 257, 256)) },
            Case { window: (Some(100), Some(50)), ..case(bshd(1, 4, 2, 500, 400, 64)) },
        ]);
        if std::env::var("FERROTILE_ATTN_LARGE").as_deref() != Ok("0") {
            // large enough for the autotuner (every candidate runs)
            v.push(Case { causal: true, ..case(bshd(1, 8, 2, 1024, 1024, 128)) });
        }
        for (dim, causal) in [(64, true), (128, false), (256, true)] {
            let pd = AttentionProblem::bhsd(1, 2, 1, 0, 0, dim).padded_dim();
            let (a, b) = ferrotile_kernels::attention::backward_candidates(pd);
            for (i, tc) in a.iter().enumerate() {
                let dkdv = AttentionConfig::from_tune(tc).unwrap();
                let dq = AttentionConfig::from_tune(&b[i % b.len()]).unwrap();
                // (every other pair with dQ by atomics in the dK/dV loop)
                let atomic_dq = i % 2 == 1;
                v.push(Case { causal, backward: Some(BackwardConfig { dkdv, dq, atomic_dq }), ..case(bhsd(1, 2, 1, 211, 333, dim)) });
            }
        }
    }
    v
}

#[test]
fn attention_backward_matches_f64() {
    for dev in devices() {
        for (i, c) in backward_cases(&dev).iter().enumerate() {
            if i % 2 == 0 {
                check_backward::<bf16>(&dev, c, 500 + i as u64, 1e-2);
            } else {
                check_backward::<f16>(&dev, c, 500 + i as u64, 2e-3);
            }
        }
    }
}

/// (lengths q, k per sequence; heads q / kv; head dim; causal; window)
type VarlenCase = (Vec<(usize, usize)>, usize, usize, usize, bool, (Option<usize>, Option<usize>));

/// Packed variable-length sequences (`attention_varlen`) against the f64
/// reference of each sequence on its own: ragged lengths (0, 1, not
/// multiples of any block, keys fewer and more than queries), causal,
/// windows, GQA, padded head dims, the log-sum-exp as `[heads, total]`;
/// poisoned outputs, and the tokens no sequence covers stay unwritten.
#[test]
fn attention_varlen_matches_f64() {
    for dev in devices() {
        let cuda = dev.kind() == DeviceKind::Cuda;
        let mut cases: Vec<VarlenCase> = vec![
            (vec![(37, 37), (0, 5), (1, 20), (16, 16)], 2, 2, 64, false, (None, None)),
            (vec![(50, 70), (9, 9), (33, 12)], 4, 2, 32, true, (None, None)),
            (vec![(21, 26), (40, 40)], 2, 1, 80, false, (Some(7), Some(3))),
        ];
        if cuda {
            cases.push((vec![(300, 300), (1, 517), (129, 64), (0, 0), (640, 640)], 8, 2, 128, true, (None, None)));
            cases.push((vec![(200, 333), (77, 77)], 4, 4, 64, false, (Some(40), None)));
        }
        for (i, (lens, hq, hkv, d, causal, window)) in cases.into_iter().enumerate() {
            // the default tiles, then the other loop: on CUDA the plain one
            // (the default up to d128 overlaps the softmax with P·V, with
            // the producer warpgroup at d128), elsewhere the overlapped one
            let dp = d.next_power_of_two().max(16);
            let other = if cuda {
                (dp <= 128).then_some(AttentionConfig {
                    bm: 128,
                    bn: 64,
                    num_warps: 8,
                    num_stages: 2,
                    split_masks: false,
                    overlap: false,
                    warp_specialize: false,
                    // (odd cases with chained dots rotated)
                    rotate_chains: i % 2 == 1,
                })
            } else {
                Some(AttentionConfig { overlap: true, ..AttentionConfig::default_for(&dev, dp) })
            };
            for config in std::iter::once(None).chain(other.map(Some)) {
                if i % 2 == 0 {
                    check_varlen::<bf16>(&dev, &lens, hq, hkv, d, causal, window, config, 700 + i as u64, 1e-2);
                } else {
                    check_varlen::<f16>(&dev, &lens, hq, hkv, d, causal, window, config, 700 + i as u64, 4e-3);
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn check_varlen<T: FloatElement>(
    dev: &Device,
    lens: &[(usize, usize)],
    hq: usize,
    hkv: usize,
    d: usize,
    causal: bool,
    window: (Option<usize>, Option<usize>),
    config: Option<AttentionConfig>,
    seed: u64,
    tol: f64,
) {
    use ferrotile_kernels::attention::{attention_varlen, VarlenProblem};
    // (a gap of 3 unused tokens after the last sequence: never written)
    let mut cu_q = vec![0i32];
    let mut cu_k = vec![0i32];
    for (lq, lk) in lens {
        cu_q.push(cu_q.last().unwrap() + *lq as i32);
        cu_k.push(cu_k.last().unwrap() + *lk as i32);
    }
    let (tq, tk) = (*cu_q.last().unwrap() as usize + 3, *cu_k.last().unwrap() as usize + 3);
    let (mq, mk) = (lens.iter().map(|l| l.0).max().unwrap(), lens.iter().map(|l| l.1).max().unwrap());
    let p = VarlenProblem::packed(lens.len(), hq, hkv, tq, tk, mq, mk, d);
    let mut rng = Rng::new(seed);
    let mut gen = |len: usize| -> Vec<T> { (0..len).map(|_| T::from_f64(rng.normal())).collect() };
    let (qh, kh, vh) = (gen(tq * hq * d), gen(tk * hkv * d), gen(tk * hkv * d));
    let f = |x: &[T]| -> Vec<f64> { x.iter().map(|e| e.to_f64()).collect() };
    let (qf, kf, vf) = (f(&qh), f(&kh), f(&vh));
    let (q, k, v) = (dev.from_slice(&qh).unwrap(), dev.from_slice(&kh).unwrap(), dev.from_slice(&vh).unwrap());
    let mut o = dev.full(tq * hq * d, T::from_f64(f64::NAN)).unwrap();
    let mut l = dev.full(hq * tq, f32::NAN).unwrap();
    let (cq, ck) = (dev.from_slice(&cu_q).unwrap(), dev.from_slice(&cu_k).unwrap());
    let opts = AttentionOptions { causal, window, config, ..Default::default() };
    let what =
        format!("attention_varlen {} on {}: lens {lens:?} heads {hq}/{hkv} d {d} causal={causal} window={window:?} config={config:?}", T::DTYPE, dev.name());
    attention_varlen(dev, &q, &k, &v, &mut o, Some(&mut l), &cq, &ck, &p, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = o.to_vec().unwrap();
    let got_l = l.to_vec().unwrap();
    let scale = 1.0 / (d as f64).sqrt();
    let right = if causal { Some(0) } else { window.1 };
    let mut written = vec![false; got.len()];
    let mut worst = 0.0f64;
    for (b, (lq, lk)) in lens.iter().enumerate() {
        let (q0, k0) = (cu_q[b] as usize, cu_k[b] as usize);
        let st = |h: usize| Strides { batch: 0, head: d, seq: h * d };
        let pb =
            AttentionProblem { batch: 1, heads_q: hq, heads_kv: hkv, seqlen_q: *lq, seqlen_k: *lk, head_dim: d, q: st(hq), k: st(hkv), v: st(hkv), o: st(hq) };
        for h in 0..hq {
            for i in 0..*lq {
                let (want, want_l) = attention_row(&qf[q0 * hq * d..], &kf[k0 * hkv * d..], &vf[k0 * hkv * d..], &pb, 0, h, i, scale, window.0, right);
                let at = (q0 + i) * hq * d + h * d;
                for (e, w) in want.iter().enumerate() {
                    let g = got[at + e].to_f64();
                    let err = if g.is_finite() { (g - w).abs() / (1.0 + w.abs()) } else { f64::INFINITY };
                    assert!(err <= tol, "{what}: out[seq {b}, h {h}, i {i}, {e}] = {g}, want {w}");
                    worst = worst.max(err);
                    written[at + e] = true;
                }
                let g = got_l[h * tq + q0 + i] as f64;
                let ok = if want_l.is_infinite() { g == want_l } else { (g - want_l).abs() / (1.0 + want_l.abs()) <= 1e-3 };
                assert!(ok, "{what}: lse[h {h}, token {}] = {g}, want {want_l}", q0 + i);
            }
        }
    }
    for (x, w) in got.iter().zip(&written) {
        assert!(*w || x.to_f64().is_nan(), "{what}: wrote a token no sequence covers");
    }
    eprintln!("{what}: max err {worst:.2e}");
}

#[test]
fn attention_varlen_rejects_bad_offsets() {
    use ferrotile_kernels::attention::{attention_varlen, VarlenProblem};
    let dev = Device::cpu();
    let p = VarlenProblem::packed(2, 2, 2, 20, 20, 12, 12, 16);
    let buf = |len: usize| dev.zeros::<f16>(len).unwrap();
    let (q, k, v) = (buf(20 * 2 * 16), buf(20 * 2 * 16), buf(20 * 2 * 16));
    let mut o = buf(20 * 2 * 16);
    let opts = AttentionOptions::default();
    let good = dev.from_slice(&[0i32, 10, 20]).unwrap();
    attention_varlen(&dev, &q, &k, &v, &mut o, None, &good, &good, &p, &opts).unwrap();
    for bad in [vec![0i32, 12, 10], vec![0, 10, 21], vec![0, 13, 20], vec![-1, 5, 10], vec![0, 10]] {
        let c = dev.from_slice(&bad).unwrap();
        let e = attention_varlen(&dev, &q, &k, &v, &mut o, None, &c, &good, &p, &opts).expect_err("bad offsets").to_string();
        assert!(e.contains("cu_seqlens_q"), "{bad:?}: {e}");
        let e = attention_varlen(&dev, &q, &k, &v, &mut o, None, &good, &c, &p, &opts).expect_err("bad offsets").to_string();
        assert!(e.contains("cu_seqlens_k"), "{bad:?}: {e}");
    }
    let mut l = dev.zeros::<f32>(39).unwrap();
    let e = attention_varlen(&dev, &q, &k, &v, &mut o, Some(&mut l), &good, &good, &p, &opts).expect_err("short lse").to_string();
    assert!(e.contains("`lse`"), "{e}");
    // on trust (no read-back): too few offsets are still refused (their
    // count needs no read-back); bad values reach the guarded kernels,
    // which never touch memory outside the tensors — a checked launch
    // (debug builds) reports the view outside its buffer as a fault
    let trusted = p.trusted_offsets();
    let short = dev.from_slice(&[0i32, 10]).unwrap();
    let e = attention_varlen(&dev, &q, &k, &v, &mut o, None, &short, &good, &trusted, &opts).expect_err("short offsets").to_string();
    assert!(e.contains("cu_seqlens_q"), "{e}");
    for bad in [vec![0i32, 12, 10], vec![0, 10, 21], vec![0, 13, 20], vec![-1, 5, 10], vec![7, 3, 2000]] {
        let c = dev.from_slice(&bad).unwrap();
        for (cq, ck) in [(&c, &good), (&good, &c)] {
            match attention_varlen(&dev, &q, &k, &v, &mut o, None, cq, ck, &trusted, &opts) {
                Ok(()) | Err(ferrotile_kernels::LibError::Launch(ferrotile::Error::Fault { .. })) => {}
                Err(e) => panic!("{bad:?} on trust: {e}"),
            }
        }
    }
}

/// `cu_seqlens` on trust (`VarlenProblem::trusted_offsets`): the same
/// outputs as the checked call, forward and backward; on CUDA the calls
/// are captured in a graph and replayed (the checked call refuses a
/// capture, saying how to make one).
#[test]
fn attention_varlen_trusted_offsets() {
    use ferrotile_kernels::attention::{attention_varlen, attention_varlen_backward, VarlenProblem};
    for dev in devices() {
        let cuda = dev.kind() == DeviceKind::Cuda;
        let (hq, d) = (2usize, if cuda { 64 } else { 16 });
        let lens = [23usize, 0, 40, 1];
        let mut cu = vec![0i32];
        for l in lens {
            cu.push(cu.last().unwrap() + l as i32);
        }
        let t = *cu.last().unwrap() as usize;
        let checked = VarlenProblem::packed(lens.len(), hq, hq, t, t, 40, 40, d);
        let trusted = checked.trusted_offsets();
        let mut rng = Rng::new(91);
        let mut gen = |n: usize| -> Vec<f16> { (0..n).map(|_| f16::from_f64(rng.normal())).collect() };
        let n = t * hq * d;
        let (q, k, v, dout) =
            (dev.from_slice(&gen(n)).unwrap(), dev.from_slice(&gen(n)).unwrap(), dev.from_slice(&gen(n)).unwrap(), dev.from_slice(&gen(n)).unwrap());
        let cu = dev.from_slice(&cu).unwrap();
        let opts = AttentionOptions { causal: true, ..Default::default() };
        let run = |p: &VarlenProblem, o: &mut ferrotile::Buffer<f16>, l: &mut ferrotile::Buffer<f32>, grads: &mut [ferrotile::Buffer<f16>; 3]| {
            attention_varlen(&dev, &q, &k, &v, o, Some(l), &cu, &cu, p, &opts)?;
            let [dq, dk, dv] = grads;
            attention_varlen_backward(&dev, &q, &k, &v, o, &dout, l, dq, dk, dv, &cu, &cu, p, &opts)
        };
        let fresh = || (dev.full(n, f16::NAN).unwrap(), dev.full(hq * t, f32::NAN).unwrap(), [0, 1, 2].map(|_| dev.full(n, f16::NAN).unwrap()));
        let (mut o1, mut l1, mut g1) = fresh();
        run(&checked, &mut o1, &mut l1, &mut g1).unwrap();
        let (mut o2, mut l2, mut g2) = fresh();
        run(&trusted, &mut o2, &mut l2, &mut g2).unwrap();
        let bits = |b: &ferrotile::Buffer<f16>| b.to_vec().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&o1), bits(&o2), "{}: out", dev.name());
        assert_eq!(l1.to_vec().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>(), l2.to_vec().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        for (a, b) in g1.iter().zip(&g2) {
            assert_eq!(bits(a), bits(b), "{}: gradients", dev.name());
        }
        if !cuda {
            continue;
        }
        // a capture: refused with the offsets checked, replayed on trust
        let (mut o3, mut l3, mut g3) = fresh();
        let e = dev.capture(|| run(&checked, &mut o3, &mut l3, &mut g3).map_err(|e| ferrotile::Error::Buffer(e.to_string()))).expect_err("checked capture");
        assert!(e.to_string().contains("trusted_offsets"), "{e}");
        let graph = dev.capture(|| run(&trusted, &mut o3, &mut l3, &mut g3).map_err(|e| ferrotile::Error::Buffer(e.to_string()))).unwrap();
        graph.replay().unwrap();
        assert_eq!(bits(&o1), bits(&o3), "replayed out");
        for (a, b) in g1.iter().zip(&g3) {
            assert_eq!(bits(a), bits(b), "replayed gradients");
        }
    }
}

/// The varlen backward (`attention_varlen_backward`) against the f64
/// gradients of each sequence on its own: ragged lengths (empty query or
/// key sequences, 1 token, not multiples of any block, more and fewer keys
/// than queries), causal (each sequence's bottom right), windows, a scale,
/// GQA (the group's sum per key token), padded head dims; gradients
/// poisoned before. Then the offsets it refuses (sequences that do not
/// cover the tensors).
#[test]
fn attention_varlen_backward_matches_f64() {
    for dev in devices() {
        let cuda = dev.kind() == DeviceKind::Cuda;
        let mut cases: Vec<(VarlenCase, Option<f32>)> = vec![
            ((vec![(37, 37), (0, 5), (1, 20), (16, 16)], 2, 2, 64, false, (None, None)), None),
            ((vec![(50, 70), (9, 9), (33, 12), (5, 0)], 4, 2, 32, true, (None, None)), None),
            ((vec![(21, 26), (40, 40)], 2, 1, 80, false, (Some(7), Some(3))), Some(0.3)),
            ((vec![(19, 19), (3, 30)], 3, 3, 24, true, (Some(10), None)), None),
        ];
        if cuda {
            cases.push(((vec![(300, 300), (1, 517), (129, 64), (0, 0), (640, 640)], 8, 2, 128, true, (None, None)), None));
            cases.push(((vec![(200, 333), (77, 77)], 4, 4, 64, false, (Some(40), None)), None));
            cases.push(((vec![(130, 257), (64, 64)], 2, 1, 256, true, (None, None)), None));
        }
        // (each case with the dQ pass, then with dQ by atomics)
        for (i, (c, scale)) in cases.into_iter().enumerate() {
            for atomic in [false, true] {
                if i % 2 == 0 {
                    check_varlen_backward::<bf16>(&dev, &c, scale, atomic, 800 + i as u64, 1e-2);
                } else {
                    check_varlen_backward::<f16>(&dev, &c, scale, atomic, 800 + i as u64, 2e-3);
                }
            }
        }
    }
}

fn check_varlen_backward<T: FloatElement>(dev: &Device, c: &VarlenCase, scale: Option<f32>, atomic: bool, seed: u64, tol: f64) {
    use ferrotile_kernels::attention::{attention_varlen, attention_varlen_backward, VarlenProblem};
    let (lens, hq, hkv, d, causal, window) = (&c.0, c.1, c.2, c.3, c.4, c.5);
    let mut cu_q = vec![0i32];
    let mut cu_k = vec![0i32];
    for (lq, lk) in lens {
        cu_q.push(cu_q.last().unwrap() + *lq as i32);
        cu_k.push(cu_k.last().unwrap() + *lk as i32);
    }
    let (tq, tk) = (*cu_q.last().unwrap() as usize, *cu_k.last().unwrap() as usize);
    let (mq, mk) = (lens.iter().map(|l| l.0).max().unwrap(), lens.iter().map(|l| l.1).max().unwrap());
    let p = VarlenProblem::packed(lens.len(), hq, hkv, tq, tk, mq, mk, d);
    let mut rng = Rng::new(seed);
    let mut gen = |len: usize| -> Vec<T> { (0..len).map(|_| T::from_f64(rng.normal())).collect() };
    let (qh, kh, vh, doh) = (gen(tq * hq * d), gen(tk * hkv * d), gen(tk * hkv * d), gen(tq * hq * d));
    let f = |x: &[T]| -> Vec<f64> { x.iter().map(|e| e.to_f64()).collect() };
    let (qf, kf, vf, dof) = (f(&qh), f(&kh), f(&vh), f(&doh));
    let up = |x: &[T]| dev.from_slice(x).unwrap();
    let (q, k, v, dout) = (up(&qh), up(&kh), up(&vh), up(&doh));
    let nan = T::from_f64(f64::NAN);
    let mut o = dev.full((tq * hq * d).max(1), nan).unwrap();
    let mut l = dev.full((hq * tq).max(1), f32::NAN).unwrap();
    let (cq, ck) = (dev.from_slice(&cu_q).unwrap(), dev.from_slice(&cu_k).unwrap());
    let opts = AttentionOptions { causal, window, scale, ..Default::default() };
    let dp = d.next_power_of_two().max(16);
    let bwd = AttentionOptions { backward: atomic.then(|| BackwardConfig { atomic_dq: true, ..BackwardConfig::default_for(dev, dp) }), ..opts };
    let what = format!(
        "attention_varlen_backward {} on {}: lens {lens:?} heads {hq}/{hkv} d {d} causal={causal} window={window:?} scale={scale:?} atomic dQ={atomic}",
        T::DTYPE,
        dev.name()
    );
    attention_varlen(dev, &q, &k, &v, &mut o, Some(&mut l), &cq, &ck, &p, &opts).unwrap_or_else(|e| panic!("{what}: forward: {e}"));
    let (mut dq, mut dk, mut dv) =
        (dev.full((tq * hq * d).max(1), nan).unwrap(), dev.full((tk * hkv * d).max(1), nan).unwrap(), dev.full((tk * hkv * d).max(1), nan).unwrap());
    attention_varlen_backward(dev, &q, &k, &v, &o, &dout, &l, &mut dq, &mut dk, &mut dv, &cq, &ck, &p, &bwd).unwrap_or_else(|e| panic!("{what}: {e}"));
    let (gq, gk, gv) = (dq.to_vec().unwrap(), dk.to_vec().unwrap(), dv.to_vec().unwrap());
    let sc = scale.map_or(1.0 / (d as f64).sqrt(), |s| s as f64);
    let right = if causal { Some(0) } else { window.1 };
    let mut worst = [0.0f64; 3];
    for (b, (lq, lk)) in lens.iter().enumerate() {
        let (q0, k0) = (cu_q[b] as usize, cu_k[b] as usize);
        let st = |h: usize| Strides { batch: 0, head: d, seq: h * d };
        let pb =
            AttentionProblem { batch: 1, heads_q: hq, heads_kv: hkv, seqlen_q: *lq, seqlen_k: *lk, head_dim: d, q: st(hq), k: st(hkv), v: st(hkv), o: st(hq) };
        let (wq, wk, wv) =
            reference::attention_backward(&qf[q0 * hq * d..], &kf[k0 * hkv * d..], &vf[k0 * hkv * d..], &dof[q0 * hq * d..], &pb, sc, window.0, right);
        for (t, (name, got, want, heads, seq, tok0)) in
            [("dq", &gq, &wq, hq, *lq, q0), ("dk", &gk, &wk, hkv, *lk, k0), ("dv", &gv, &wv, hkv, *lk, k0)].into_iter().enumerate()
        {
            let norm = 1.0 + want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            for h in 0..heads {
                for i in 0..seq {
                    for e in 0..d {
                        let at = (tok0 + i) * heads * d + h * d + e;
                        let w = want[(h * seq + i) * d + e];
                        let g = got[at].to_f64();
                        let err = if g.is_finite() { (g - w).abs() / norm } else { f64::INFINITY };
                        assert!(err <= tol, "{what}: {name}[seq {b}, h {h}, token {}, {e}] = {g}, want {w} (err {err:.2e})", tok0 + i);
                        worst[t] = worst[t].max(err);
                    }
                }
            }
        }
    }
    eprintln!("{what}: max err dq {:.2e} dk {:.2e} dv {:.2e}", worst[0], worst[1], worst[2]);
}

#[test]
fn attention_varlen_backward_rejects_bad_arguments() {
    use ferrotile_kernels::attention::{attention_varlen_backward, VarlenProblem};
    let dev = Device::cpu();
    let p = VarlenProblem::packed(2, 2, 2, 20, 20, 12, 12, 16);
    let buf = |len: usize| dev.zeros::<f16>(len).unwrap();
    let n = 20 * 2 * 16;
    let (q, k, v, o, dout) = (buf(n), buf(n), buf(n), buf(n), buf(n));
    let (mut dq, mut dk, mut dv) = (buf(n), buf(n), buf(n));
    let l = dev.zeros::<f32>(40).unwrap();
    let opts = AttentionOptions::default();
    let good = dev.from_slice(&[0i32, 10, 20]).unwrap();
    attention_varlen_backward(&dev, &q, &k, &v, &o, &dout, &l, &mut dq, &mut dk, &mut dv, &good, &good, &p, &opts).unwrap();
    // not covering the tokens (a gap at either end), and the forward's refusals
    for bad in [vec![0i32, 10, 19], vec![1, 10, 20], vec![0i32, 12, 10], vec![0, 13, 20], vec![0, 10]] {
        let c = dev.from_slice(&bad).unwrap();
        let e =
            attention_varlen_backward(&dev, &q, &k, &v, &o, &dout, &l, &mut dq, &mut dk, &mut dv, &c, &good, &p, &opts).expect_err("bad offsets").to_string();
        assert!(e.contains("cu_seqlens_q"), "{bad:?}: {e}");
        let e =
            attention_varlen_backward(&dev, &q, &k, &v, &o, &dout, &l, &mut dq, &mut dk, &mut dv, &good, &c, &p, &opts).expect_err("bad offsets").to_string();
        assert!(e.contains("cu_seqlens_k"), "{bad:?}: {e}");
    }
    let short = dev.zeros::<f32>(39).unwrap();
    let e =
        attention_varlen_backward(&dev, &q, &k, &v, &o, &dout, &short, &mut dq, &mut dk, &mut dv, &good, &good, &p, &opts).expect_err("short lse").to_string();
    assert!(e.contains("`lse`"), "{e}");
    let mut short_dk = buf(n - 1);
    let e =
        attention_varlen_backward(&dev, &q, &k, &v, &o, &dout, &l, &mut dq, &mut short_dk, &mut dv, &good, &good, &p, &opts).expect_err("short dk").to_string();
    assert!(e.contains("dk"), "{e}");
    let e = attention_varlen_backward(
        &dev,
        &q,
        &k,
        &v,
        &o,
        &dout,
        &l,
        &mut dq,
        &mut dk,
        &mut dv,
        &good,
        &good,
        &p,
        &AttentionOptions { decode: Some(DecodeConfig { bn: 32, num_warps: 4, num_stages: 1, splits: None }), ..opts },
    )
    .expect_err("decode")
    .to_string();
    assert!(e.contains("decode"), "{e}");
}

/// A `max_seqlen` far above every sequence (even `usize::MAX`, which an
/// unchecked grid size would wrap to zero programs) gives the same results
/// as the exact one, forward and backward.
#[test]
fn attention_varlen_max_seqlen_above_the_lengths() {
    use ferrotile_kernels::attention::{attention_varlen, attention_varlen_backward, VarlenProblem};
    let dev = Device::cpu();
    let (hq, d, tq) = (2usize, 16usize, 30usize);
    let exact = VarlenProblem::packed(2, hq, hq, tq, tq, 20, 20, d);
    let huge = VarlenProblem { max_seqlen_q: usize::MAX, max_seqlen_k: usize::MAX, ..exact };
    let mut rng = Rng::new(77);
    let mut gen = |n: usize| -> Vec<f16> { (0..n).map(|_| f16::from_f64(rng.normal())).collect() };
    let n = tq * hq * d;
    let (q, k, v, dout) =
        (dev.from_slice(&gen(n)).unwrap(), dev.from_slice(&gen(n)).unwrap(), dev.from_slice(&gen(n)).unwrap(), dev.from_slice(&gen(n)).unwrap());
    let cu = dev.from_slice(&[0i32, 20, 30]).unwrap();
    let opts = AttentionOptions { causal: true, ..Default::default() };
    let mut outs = vec![];
    for p in [&exact, &huge] {
        let nan = f16::from_f64(f64::NAN);
        let (mut o, mut l) = (dev.full(n, nan).unwrap(), dev.full(hq * tq, f32::NAN).unwrap());
        attention_varlen(&dev, &q, &k, &v, &mut o, Some(&mut l), &cu, &cu, p, &opts).unwrap();
        let (mut dq, mut dk, mut dv) = (dev.full(n, nan).unwrap(), dev.full(n, nan).unwrap(), dev.full(n, nan).unwrap());
        attention_varlen_backward(&dev, &q, &k, &v, &o, &dout, &l, &mut dq, &mut dk, &mut dv, &cu, &cu, p, &opts).unwrap();
        let bits = |b: &ferrotile::Buffer<f16>| b.to_vec().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
        outs.push([bits(&o), bits(&dq), bits(&dk), bits(&dv)]);
    }
    for (i, name) in ["out", "dq", "dk", "dv"].iter().enumerate() {
        assert!(outs[0][i].iter().all(|x| f16::from_bits(*x).is_finite()), "{name}: not every element written");
        let differ = outs[0][i].iter().zip(&outs[1][i]).filter(|(a, b)| a != b).count();
        assert!(differ == 0, "{name}: max_seqlen = usize::MAX changed {differ} of {} elements", outs[0][i].len());
    }
}

/// The varlen autotuners (CUDA, problems large enough to tune): the tuned
/// forward and backward agree with the forced default tiles (each checked
/// against f64 by the tests above) on ragged sequences — whatever tiles
/// the tuner keeps, and with the offsets checked or on trust.
#[test]
fn attention_varlen_tuned_matches_forced() {
    use ferrotile_kernels::attention::{attention_varlen, attention_varlen_backward, BackwardConfig, VarlenProblem};
    for dev in devices().into_iter().filter(|d| d.kind() == DeviceKind::Cuda) {
        let (hq, hkv, d) = (8usize, 2usize, 64usize);
        let lens = [1500usize, 2600, 77];
        let mut cu = vec![0i32];
        for l in lens {
            cu.push(cu.last().unwrap() + l as i32);
        }
        let t = *cu.last().unwrap() as usize;
        let p = VarlenProblem::packed(lens.len(), hq, hkv, t, t, 2600, 2600, d);
        let mut rng = Rng::new(93);
        let mut gen = |n: usize| -> Vec<bf16> { (0..n).map(|_| bf16::from_f64(rng.normal())).collect() };
        let (nq, nk) = (t * hq * d, t * hkv * d);
        let (q, k, v, dout) =
            (dev.from_slice(&gen(nq)).unwrap(), dev.from_slice(&gen(nk)).unwrap(), dev.from_slice(&gen(nk)).unwrap(), dev.from_slice(&gen(nq)).unwrap());
        let cu = dev.from_slice(&cu).unwrap();
        let tuned = AttentionOptions { causal: true, ..Default::default() };
        let forced = AttentionOptions { config: Some(AttentionConfig::default_for(&dev, d)), backward: Some(BackwardConfig::default_for(&dev, d)), ..tuned };
        let mut outs = vec![];
        for (opts, p) in [(&forced, p), (&tuned, p), (&tuned, p.trusted_offsets())] {
            let mut o = dev.full(nq, bf16::NAN).unwrap();
            let mut l = dev.full(hq * t, f32::NAN).unwrap();
            let fwd = AttentionOptions { backward: None, ..*opts };
            attention_varlen(&dev, &q, &k, &v, &mut o, Some(&mut l), &cu, &cu, &p, &fwd).unwrap();
            let (mut dq, mut dk, mut dv) = (dev.full(nq, bf16::NAN).unwrap(), dev.full(nk, bf16::NAN).unwrap(), dev.full(nk, bf16::NAN).unwrap());
            let bwd = AttentionOptions { config: None, ..*opts };
            attention_varlen_backward(&dev, &q, &k, &v, &o, &dout, &l, &mut dq, &mut dk, &mut dv, &cu, &cu, &p, &bwd).unwrap();
            outs.push([o, dq, dk, dv].map(|b| b.to_vec().unwrap().iter().map(|x| x.to_f64()).collect::<Vec<f64>>()));
        }
        for run in &outs[1..] {
            for (what, (a, b)) in ["out", "dq", "dk", "dv"].iter().zip(outs[0].iter().zip(run)) {
                let scale = a.iter().fold(1f64, |m, x| m.max(x.abs()));
                let err = a.iter().zip(b).fold(0f64, |m, (x, y)| if x.is_finite() && y.is_finite() { m.max((x - y).abs() / scale) } else { f64::INFINITY });
                assert!(err <= 2e-2, "{what}: tuned against forced, max error {err} (of {scale})");
            }
        }
    }
}

/// `deterministic`: the backward sums dQ in a fixed order — two runs give
/// the same bits, also where the autotuner would be free to pick dQ by
/// atomics (CUDA, large enough to tune) — and forcing the atomics with it
/// is an error naming both.
#[test]
fn attention_backward_deterministic() {
    for dev in devices() {
        let cuda = dev.kind() == DeviceKind::Cuda;
        let p = if cuda { AttentionProblem::bhsd(1, 8, 2, 1024, 1024, 64) } else { AttentionProblem::bhsd(1, 2, 1, 45, 37, 32) };
        let mut rng = Rng::new(71);
        let mut gen = |n: usize| -> Vec<bf16> { (0..n).map(|_| bf16::from_f64(rng.normal())).collect() };
        let (nq, nk) = (p.batch * p.heads_q * p.seqlen_q * p.head_dim, p.batch * p.heads_kv * p.seqlen_k * p.head_dim);
        let (q, k, v, dout) =
            (dev.from_slice(&gen(nq)).unwrap(), dev.from_slice(&gen(nk)).unwrap(), dev.from_slice(&gen(nk)).unwrap(), dev.from_slice(&gen(nq)).unwrap());
        let opts = AttentionOptions { causal: true, deterministic: true, ..Default::default() };
        let mut o = dev.full(nq, bf16::NAN).unwrap();
        let mut l = dev.full(p.batch * p.heads_q * p.seqlen_q, f32::NAN).unwrap();
        attention(&dev, &q, &k, &v, &mut o, Some(&mut l), &p, &opts).unwrap();
        let mut runs = vec![];
        for _ in 0..2 {
            let (mut dq, mut dk, mut dv) = (dev.full(nq, bf16::NAN).unwrap(), dev.full(nk, bf16::NAN).unwrap(), dev.full(nk, bf16::NAN).unwrap());
            attention_backward(&dev, &q, &k, &v, &o, &dout, &l, &mut dq, &mut dk, &mut dv, &p, &opts).unwrap();
            runs.push([dq, dk, dv].map(|b| b.to_vec().unwrap().iter().map(|x| x.to_bits()).collect::<Vec<u16>>()));
        }
        assert!(runs[0] == runs[1], "deterministic backward on {}: two runs differ", dev.name());
        let forced = AttentionOptions { backward: Some(BackwardConfig { atomic_dq: true, ..BackwardConfig::default_for(&dev, 64) }), ..opts };
        let (mut dq, mut dk, mut dv) = (dev.full(nq, bf16::NAN).unwrap(), dev.full(nk, bf16::NAN).unwrap(), dev.full(nk, bf16::NAN).unwrap());
        let e =
            attention_backward(&dev, &q, &k, &v, &o, &dout, &l, &mut dq, &mut dk, &mut dv, &p, &forced).expect_err("atomic dQ with deterministic").to_string();
        assert!(e.contains("atomic_dq") && e.contains("deterministic"), "{e}");
    }
}

/// The library's scratch buffers are locked in one order: a decode
/// attention (f32 partials, then a log-sum-exp workspace) and a varlen
/// backward (which once took the workspace first) called from two threads
/// at once finish — before, they deadlocked within a few calls.
#[test]
fn scratch_locks_in_one_order() {
    use ferrotile_kernels::attention::{attention_varlen, attention_varlen_backward, VarlenProblem};
    use std::sync::mpsc;
    const ROUNDS: usize = 400;
    let (tx, rx) = mpsc::channel();
    let decode = {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let dev = Device::cpu();
            let p = AttentionProblem::bshd(1, 2, 2, 1, 40, 16);
            let (q, kv) = (dev.zeros::<f16>(2 * 16).unwrap(), dev.zeros::<f16>(40 * 2 * 16).unwrap());
            for _ in 0..ROUNDS {
                let mut o = dev.zeros::<f16>(2 * 16).unwrap();
                attention(&dev, &q, &kv, &kv, &mut o, None, &p, &AttentionOptions::default()).unwrap();
            }
            tx.send("decode").unwrap();
        })
    };
    let varlen = std::thread::spawn(move || {
        let dev = Device::cpu();
        let p = VarlenProblem::packed(2, 2, 2, 24, 24, 16, 16, 16);
        let cu = dev.from_slice(&[0i32, 8, 24]).unwrap();
        let x = dev.zeros::<f16>(24 * 2 * 16).unwrap();
        let opts = AttentionOptions::default();
        for _ in 0..ROUNDS {
            let (mut o, mut l) = (dev.zeros::<f16>(24 * 32).unwrap(), dev.zeros::<f32>(2 * 24).unwrap());
            attention_varlen(&dev, &x, &x, &x, &mut o, Some(&mut l), &cu, &cu, &p, &opts).unwrap();
            let (mut dq, mut dk, mut dv) = (dev.zeros::<f16>(24 * 32).unwrap(), dev.zeros::<f16>(24 * 32).unwrap(), dev.zeros::<f16>(24 * 32).unwrap());
            attention_varlen_backward(&dev, &x, &x, &x, &o, &x, &l, &mut dq, &mut dk, &mut dv, &cu, &cu, &p, &opts).unwrap();
        }
        tx.send("varlen").unwrap();
    });
    for _ in 0..2 {
        let who = rx.recv_timeout(std::time::Duration::from_secs(120)).expect("the two calls deadlocked on the library's scratch locks");
        eprintln!("{who} done");
    }
    decode.join().unwrap();
    varlen.join().unwrap();
}
