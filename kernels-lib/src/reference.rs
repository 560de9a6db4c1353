//! f64 host references for the library kernels (used by tests and the main job).

/// Row-wise softmax in f64.
pub fn softmax(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut y = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
        for c in 0..cols {
            y[r * cols + c] = (row[c] - m).exp() / s;
        }
    }
    y
}

/// Layer norm in f64 (biased variance, as PyTorch).
pub fn layer_norm(x: &[f64], w: &[f64], b: &[f64], rows: usize, cols: usize, eps: f64) -> Vec<f64> {
    let mut y = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let mean = row.iter().sum::<f64>() / cols as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / cols as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        for c in 0..cols {
            y[r * cols + c] = (row[c] - mean) * rstd * w[c] + b[c];
        }
    }
    y
}

/// RMSNorm in f64.
pub fn rms_norm(x: &[f64], w: &[f64], rows: usize, cols: usize, eps: f64) -> Vec<f64> {
    let mut y = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let ms = row.iter().map(|v| v * v).sum::<f64>() / cols as f64;
        let rstd = 1.0 / (ms + eps).sqrt();
        for c in 0..cols {
            y[r * cols + c] = row[c] * rstd * w[c];
        }
    }
    y
}

/// A small deterministic generator for test data (SplitMix64), so tests
/// need no extra dependency and every run draws fresh data from its seed.
/// The library tests, the benches and the op conformance suite all use it.
pub struct Rng(u64);

impl Rng {
    /// A generator with this seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// Seed from the clock: fresh inputs every run (the seed is printed by callers).
    pub fn from_time() -> (Self, u64) {
        let s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0x5eed);
        (Rng(s), s)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Approximately standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }
    /// Uniform integer in [lo, hi] (inclusive).
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo.wrapping_add(self.below(hi.wrapping_sub(lo) as u64 + 1) as i64)
    }
    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.uniform() < p
    }
    /// A uniformly chosen element of `xs`.
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// Max over elements of |got - want| / max(|want|, floor): a relative error
/// that does not explode on values near zero.
pub fn max_rel_err(got: &[f64], want: &[f64], floor: f64) -> f64 {
    got.iter().zip(want).map(|(g, w)| if g.is_nan() { f64::INFINITY } else { (g - w).abs() / w.abs().max(floor) }).fold(0.0, f64::max)
}

/// `act(alpha · A·B + bias)` in f64; `a` is M×K and `b` K×N, row-major.
#[allow(clippy::too_many_arguments)]
pub fn gemm(a: &[f64], b: &[f64], bias: Option<&[f64]>, m: usize, n: usize, k: usize, alpha: f64, act: u8) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut s = 0.0;
            for l in 0..k {
                s += a[i * k + l] * b[l * n + j];
            }
            let mut v = alpha * s + bias.map_or(0.0, |bb| bb[j]);
            v = match act {
                1 => v.max(0.0),
                2 => 0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2)),
                _ => v,
            };
            c[i * n + j] = v;
        }
    }
    c
}

/// erf in f64 (series below 3, asymptotic above), for references.
pub fn erf(x: f64) -> f64 {
    let a = x.abs();
    let r = if a < 3.0 {
        let (mut term, mut sum, x2) = (a, a, a * a);
        for n in 1..200 {
            term *= -x2 / n as f64;
            let t = term / (2 * n + 1) as f64;
            sum += t;
            if t.abs() <= 1e-17 * sum.abs() {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let x2 = a * a;
        let (mut s, mut term) = (1.0, 1.0);
        for kk in 1..12 {
            let nt = term * -((2 * kk - 1) as f64) / (2.0 * x2);
            if nt.abs() > term.abs() {
                break;
            }
            term = nt;
            s += term;
        }
        1.0 - (-x2).exp() / (a * std::f64::consts::PI.sqrt()) * s
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

/// `x` rounded to tf32 (a 10-bit mantissa): nearest, ties to even on the 13
/// dropped bits, non-finite values unchanged — the interpreter's rounding,
/// restated independently for the tests.
pub fn tf32_rne(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    let b = x.to_bits();
    f32::from_bits(b.wrapping_add(0xfff + ((b >> 13) & 1)) & !0x1fff)
}

/// f64 attention of one query row: row `i` of head `h` in batch entry `b`
/// of [`crate::attention::attention`]'s problem `p` (tensors as f64, laid
/// out by `p`'s strides), with softmax scale `scale` and key window
/// `[i + off − left, i + off + right]` (`off = seqlen_k − seqlen_q`; `None`:
/// unbounded). Returns the output row and its natural-log log-sum-exp
/// (`+∞` and a zero row where no key is visible).
#[allow(clippy::too_many_arguments)]
pub fn attention_row(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    p: &crate::attention::AttentionProblem,
    b: usize,
    h: usize,
    i: usize,
    scale: f64,
    left: Option<usize>,
    right: Option<usize>,
) -> (Vec<f64>, f64) {
    attention_row_of(q, k, v, |x| *x, p, b, h, i, scale, left, right)
}

/// Whether query row `i` sees key `j` under the window `[i + off − left,
/// i + off + right]` (`off = seqlen_k − seqlen_q`; `None`: unbounded).
fn sees(p: &crate::attention::AttentionProblem, i: usize, j: usize, left: Option<usize>, right: Option<usize>) -> bool {
    let diag = i as i64 + p.seqlen_k as i64 - p.seqlen_q as i64;
    left.is_none_or(|l| j as i64 >= diag - l as i64) && right.is_none_or(|r| j as i64 <= diag + r as i64)
}

/// The softmax of query row `i` of head `h` in batch entry `b` over the keys
/// it sees (tensors read through `f64_of`): those keys, their
/// probabilities, and the natural-log log-sum-exp of the scaled logits
/// (`+∞` where no key is visible).
#[allow(clippy::too_many_arguments)]
fn row_softmax<X>(
    q: &[X],
    k: &[X],
    f64_of: &impl Fn(&X) -> f64,
    p: &crate::attention::AttentionProblem,
    b: usize,
    h: usize,
    i: usize,
    scale: f64,
    left: Option<usize>,
    right: Option<usize>,
) -> (Vec<usize>, Vec<f64>, f64) {
    let hk = h / (p.heads_q / p.heads_kv);
    let qi = b * p.q.batch + h * p.q.head + i * p.q.seq;
    let keys: Vec<usize> = (0..p.seqlen_k).filter(|&j| sees(p, i, j, left, right)).collect();
    if keys.is_empty() {
        return (keys, vec![], f64::INFINITY);
    }
    let logits: Vec<f64> = keys
        .iter()
        .map(|&j| {
            let kj = b * p.k.batch + hk * p.k.head + j * p.k.seq;
            (0..p.head_dim).map(|c| f64_of(&q[qi + c]) * f64_of(&k[kj + c])).sum::<f64>() * scale
        })
        .collect();
    let mx = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let w: Vec<f64> = logits.iter().map(|l| (l - mx).exp()).collect();
    let z: f64 = w.iter().sum();
    (keys, w.iter().map(|x| x / z).collect(), mx + z.ln())
}

/// [`attention_row`] on tensors of any element type, read through `f64_of`
/// (only the elements the row needs are converted).
#[allow(clippy::too_many_arguments)]
fn attention_row_of<X>(
    q: &[X],
    k: &[X],
    v: &[X],
    f64_of: impl Fn(&X) -> f64,
    p: &crate::attention::AttentionProblem,
    b: usize,
    h: usize,
    i: usize,
    scale: f64,
    left: Option<usize>,
    right: Option<usize>,
) -> (Vec<f64>, f64) {
    let hk = h / (p.heads_q / p.heads_kv);
    let (keys, pr, lse) = row_softmax(q, k, &f64_of, p, b, h, i, scale, left, right);
    let out =
        (0..p.head_dim).map(|c| keys.iter().zip(&pr).map(|(&j, pj)| pj * f64_of(&v[b * p.v.batch + hk * p.v.head + j * p.v.seq + c])).sum::<f64>()).collect();
    (out, lse)
}

/// The worst error of attention output `got` over `samples` rows drawn
/// with `rng` (batch entry, head, query row, in that order), against
/// [`attention_row`]: `|got − want| / (1 + |want|)` per element, `∞` for a
/// non-finite element. The benches' and main job's check; reads only the
/// sampled rows' data.
#[allow(clippy::too_many_arguments)]
pub fn attention_sampled_err<T: ferrotile::FloatElement>(
    q: &[T],
    k: &[T],
    v: &[T],
    got: &[T],
    p: &crate::attention::AttentionProblem,
    rng: &mut Rng,
    samples: usize,
    scale: f64,
    left: Option<usize>,
    right: Option<usize>,
) -> f64 {
    let mut worst = 0.0f64;
    for _ in 0..samples {
        let (b, h, i) = (rng.below(p.batch as u64) as usize, rng.below(p.heads_q as u64) as usize, rng.below(p.seqlen_q as u64) as usize);
        let (want, _) = attention_row_of(q, k, v, |x| x.to_f64(), p, b, h, i, scale, left, right);
        let at = b * p.o.batch + h * p.o.head + i * p.o.seq;
        for (c, w) in want.iter().enumerate() {
            let g = got[at + c].to_f64();
            worst = worst.max(if g.is_finite() { (g - w).abs() / (1.0 + w.abs()) } else { f64::INFINITY });
        }
    }
    worst
}

/// The gradients of attention (f64): `(dq, dk, dv)` of
/// [`crate::attention::attention`]'s problem `p` given `dout` (laid out by
/// the output's strides), each returned dense as `[batch, heads, seq,
/// head_dim]` (dk, dv with `heads_kv` heads, summed over each group of
/// query heads). Masks and scale as [`attention_row`].
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    dout: &[f64],
    p: &crate::attention::AttentionProblem,
    scale: f64,
    left: Option<usize>,
    right: Option<usize>,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (d, nq, nk) = (p.head_dim, p.seqlen_q, p.seqlen_k);
    let g = p.heads_q / p.heads_kv;
    let mut dq = vec![0.0; p.batch * p.heads_q * nq * d];
    let mut dk = vec![0.0; p.batch * p.heads_kv * nk * d];
    let mut dv = vec![0.0; p.batch * p.heads_kv * nk * d];
    for b in 0..p.batch {
        for h in 0..p.heads_q {
            let hk = h / g;
            let kv_row = |s: &crate::attention::Strides, j: usize| b * s.batch + hk * s.head + j * s.seq;
            for i in 0..nq {
                let qi = b * p.q.batch + h * p.q.head + i * p.q.seq;
                let oi = b * p.o.batch + h * p.o.head + i * p.o.seq;
                let (keys, pr, _) = row_softmax(q, k, &|x: &f64| *x, p, b, h, i, scale, left, right);
                let dp: Vec<f64> = keys.iter().map(|&j| (0..d).map(|c| dout[oi + c] * v[kv_row(&p.v, j) + c]).sum()).collect();
                let delta: f64 = pr.iter().zip(&dp).map(|(a, b)| a * b).sum();
                let dqi = ((b * p.heads_q + h) * nq + i) * d;
                for (t, &j) in keys.iter().enumerate() {
                    let ds = pr[t] * (dp[t] - delta);
                    let (kj, vj) = (kv_row(&p.k, j), ((b * p.heads_kv + hk) * nk + j) * d);
                    for c in 0..d {
                        dq[dqi + c] += scale * ds * k[kj + c];
                        dk[vj + c] += scale * ds * q[qi + c];
                        dv[vj + c] += pr[t] * dout[oi + c];
                    }
                }
            }
        }
    }
    (dq, dk, dv)
}

/// The worst error of attention gradients `dq`, `dk`, `dv` (laid out by
/// the strides of Q, K and V) over `samples` rows of each, drawn with
/// `rng`: a dQ row from scratch in f64; a dK/dV row from the forward's
/// `out` and `lse` (`P_ij = exp(scale·q_i·k_j − lse_i)`, `delta_i =
/// dO_i·O_i`), summed over the query heads of its K/V head. Per row,
/// `max |got − want| / (1 + max |want|)`; `∞` for a non-finite element.
/// The benches' check (large problems: the full reference would take
/// minutes).
#[allow(clippy::too_many_arguments)]
pub fn attention_backward_sampled_err<T: ferrotile::FloatElement>(
    t: [&[T]; 5],
    lse: &[f32],
    grads: [&[T]; 3],
    p: &crate::attention::AttentionProblem,
    rng: &mut Rng,
    samples: usize,
    scale: f64,
    left: Option<usize>,
    right: Option<usize>,
) -> f64 {
    let [q, k, v, out, dout] = t;
    let [dq, dk, dv] = grads;
    let f = |x: &T| x.to_f64();
    let (d, nq, nk) = (p.head_dim, p.seqlen_q, p.seqlen_k);
    let g = p.heads_q / p.heads_kv;
    let row_err = |got: &[T], at: usize, want: &[f64]| -> f64 {
        let norm = 1.0 + want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        want.iter().enumerate().fold(0.0f64, |m, (c, w)| {
            let x = f(&got[at + c]);
            m.max(if x.is_finite() { (x - w).abs() / norm } else { f64::INFINITY })
        })
    };
    let dotp = |a: &[T], ai: usize, b: &[T], bi: usize| (0..d).map(|c| f(&a[ai + c]) * f(&b[bi + c])).sum::<f64>();
    let mut worst = 0.0f64;
    for _ in 0..samples {
        // a dQ row
        let (b, h, i) = (rng.below(p.batch as u64) as usize, rng.below(p.heads_q as u64) as usize, rng.below(nq as u64) as usize);
        let hk = h / g;
        let (qi, oi) = (b * p.q.batch + h * p.q.head + i * p.q.seq, b * p.o.batch + h * p.o.head + i * p.o.seq);
        let (keys, pr, _) = row_softmax(q, k, &f, p, b, h, i, scale, left, right);
        let mut want = vec![0.0; d];
        let kr = |j: usize| b * p.k.batch + hk * p.k.head + j * p.k.seq;
        let vr = |j: usize| b * p.v.batch + hk * p.v.head + j * p.v.seq;
        let dp: Vec<f64> = keys.iter().map(|&j| dotp(dout, oi, v, vr(j))).collect();
        let delta: f64 = pr.iter().zip(&dp).map(|(a, b)| a * b).sum();
        for (t, &j) in keys.iter().enumerate() {
            let ds = pr[t] * (dp[t] - delta);
            for (c, x) in want.iter_mut().enumerate() {
                *x += scale * ds * f(&k[kr(j) + c]);
            }
        }
        worst = worst.max(row_err(dq, qi, &want));
        // a dK and a dV row
        if nk == 0 {
            continue;
        }
        let (b, hk, j) = (rng.below(p.batch as u64) as usize, rng.below(p.heads_kv as u64) as usize, rng.below(nk as u64) as usize);
        let (kj, vj) = (b * p.k.batch + hk * p.k.head + j * p.k.seq, b * p.v.batch + hk * p.v.head + j * p.v.seq);
        let (mut wk, mut wv) = (vec![0.0; d], vec![0.0; d]);
        for h in hk * g..(hk + 1) * g {
            for i in (0..nq).filter(|&i| sees(p, i, j, left, right)) {
                let l = lse[(b * p.heads_q + h) * nq + i] as f64;
                if !l.is_finite() {
                    continue;
                }
                let (qi, oi) = (b * p.q.batch + h * p.q.head + i * p.q.seq, b * p.o.batch + h * p.o.head + i * p.o.seq);
                let pij = (dotp(q, qi, k, kj) * scale - l).exp();
                let ds = pij * (dotp(dout, oi, v, vj) - dotp(dout, oi, out, oi));
                for c in 0..d {
                    wk[c] += scale * ds * f(&q[qi + c]);
                    wv[c] += pij * f(&dout[oi + c]);
                }
            }
        }
        worst = worst.max(row_err(dk, kj, &wk)).max(row_err(dv, vj, &wv));
    }
    worst
}

/// The worst error of a quantized GEMM's outputs `got(i, j)` at `cells`
/// against f64 on the dequantized weights `w` (`[k, n]` row-major, as
/// `quant::PackedWeights::dequantize` gives them) and activations
/// `x(i, kk)`: per output `|got − want| / (|want| + sqrt(Σ_k (x·w)²))` —
/// the second term the size of the products' rounding errors (the GEMM
/// rounds each weight to the activations' dtype), `∞` for a non-finite
/// output. The library tests', benches' and main job's check.
pub fn quant_gemm_err(x: impl Fn(usize, usize) -> f64, w: &[f64], got: impl Fn(usize, usize) -> f64, n: usize, k: usize, cells: &[(usize, usize)]) -> f64 {
    quant_gemm_epilogue_err(x, w, |_, s| s, got, n, k, cells)
}

/// [`quant_gemm_err`] with an epilogue: the reference of cell `(i, j)` is
/// `post(j, Σ_k x·w)` (a bias of column `j`, an activation), the error
/// scale the same (the activations the library has change an error by at
/// most ~1.13×).
pub fn quant_gemm_epilogue_err(
    x: impl Fn(usize, usize) -> f64,
    w: &[f64],
    post: impl Fn(usize, f64) -> f64,
    got: impl Fn(usize, usize) -> f64,
    n: usize,
    k: usize,
    cells: &[(usize, usize)],
) -> f64 {
    cells
        .iter()
        .map(|&(i, j)| {
            let (sum, sq) = (0..k).map(|kk| x(i, kk) * w[kk * n + j]).fold((0.0, 0.0), |(s, q), t| (s + t, q + t * t));
            let want = post(j, sum);
            let g = got(i, j);
            if g.is_finite() {
                (g - want).abs() / (want.abs() + sq.sqrt())
            } else {
                f64::INFINITY
            }
        })
        .fold(0.0, f64::max)
}
