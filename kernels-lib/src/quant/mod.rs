//! Quantized-weight GEMM (W4A16 and W8A16; W8A8 in [`w8a8_gemm`], module
//! `int8`; FP8 in [`fp8_gemm`], module `fp8`): `out = x · dequant(W)`, with
//! `x` of shape `[m, k]` in f16/bf16 and `W` of shape `[k, n]` stored in
//! 4 or 8 bits with one scale (and optionally one zero point) per group of
//! `group` rows of K and column.
//!
//! **The layout the kernel reads** ([`PackedWeights`]) is GPTQ's, without
//! its quirks: `qweight[k / P, n]` holds rows `P·(k/P) … +P−1` of column
//! `n`, row `k` in bits `BITS·(k % P)` (`P = 32 / BITS`), so a warp's
//! 32-bit loads run along N (coalesced) and each word feeds `P` rows of a
//! K step; `scales[g, n]` in the activations' dtype; `qzeros[g, n / P]`
//! packed like the weights but along N (the zero point itself, not GPTQ's
//! `z − 1`), or none (symmetric: `z = 2^(BITS−1)`). [`quantize`] produces
//! it from f32 weights (round to nearest); [`PackedWeights::from_gptq`]
//! and [`PackedWeights::from_awq`] import the two checkpoint layouts
//! (AWQ's interleaved nibble order and `[k, n / 8]` words are repacked;
//! GPTQ's act-order rows are sorted by group, and [`gather_columns`]
//! brings `x`'s columns into that order before the product).
//!
//! **On the device** ([`QuantWeights::upload`]) each word's fields are
//! *paired*: rows `2i` and `2i + 1` of the word sit 16 bits apart (field
//! `i` and field `i + P/2`: for 4 bits the order 0 2 4 6 1 3 5 7, for 8
//! bits 0 2 1 3), so that one mask of a shifted word yields both halves of
//! a 16-bit pair (`(w >> BITS·i) & (m | m << 16)`, the magic-number
//! conversion's `lop3`) — the pairs a tensor-core fragment holds along K.
//! The kernels read row `k`'s field at bit `BITS·((k % P) / 2) + 16·(k %
//! 2)`.
//!
//! **The kernel** ([`wq_gemm_kernel`], written in the DSL as a user would):
//! a `BM × BN` tile per program, a K loop that loads the packed words once
//! per weight row, unpacks with shift and mask, dequantizes `(q − z)·s` to
//! the activations' dtype and feeds it to `dot` (tensor cores, f32
//! accumulation). For few rows (decode: `m ≤ 64`) the grid's third axis
//! splits K so that every SM streams weights; the f32 partials are summed
//! in a fixed order by `gemm::gemm_splitk_reduce` (deterministic). The
//! epilogue — an optional bias (`[n]`) and activation (ReLU, exact GELU),
//! [`QuantOptions`] — runs in f32 on the accumulator (or on the sum of the
//! partials, in the reduction) before the one rounding to the output's
//! dtype, as the dense GEMM's does.
//!
//! Backends: the CPU interpreter, CUDA (autotuned per shape bucket on
//! large problems) and WGSL (small tiles for lavapipe's 32 KiB of
//! workgroup storage).

use crate::gemm::Activation;
use crate::LibError;
use ferrotile::prelude::*;
use ferrotile::FloatElement;

mod fp8;
mod int8;
mod kernels;
pub use fp8::{fp8_candidates, fp8_gemm, fp8_gemm_kernel, Fp8Options, Fp8Scales};
pub use int8::{
    quantize_int8, quantize_rows, quantize_rows_kernel, w8a8_candidates, w8a8_gemm, w8a8_gemm_kernel, Int8Packed, Int8Weights, W8A8Config, W8A8Options,
    W8A8_MAX_K,
};
pub use kernels::{gather_columns, wq_decode_kernel, wq_gemm_kernel, wq_gemv_kernel};

/// Bits per weight and grouping of a quantized matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantFormat {
    /// 4 or 8.
    pub bits: u32,
    /// Rows of K per scale (a multiple of 16, dividing K), or 0: one group
    /// over all of K (per-channel scales).
    pub group: usize,
    /// Asymmetric (a zero point per group and column) or symmetric.
    pub zeros: bool,
}

impl QuantFormat {
    /// Weights per 32-bit word.
    pub fn per_word(&self) -> usize {
        32 / self.bits as usize
    }

    /// The group size for a K of `k` (per-channel: `k`).
    pub fn group_of(&self, k: usize) -> usize {
        if self.group == 0 {
            k
        } else {
            self.group
        }
    }

    fn check(&self, k: usize, n: usize) -> Result<(), LibError> {
        if self.bits != 4 && self.bits != 8 {
            return Err(LibError::Config(format!("quant: bits must be 4 or 8, got {}", self.bits)));
        }
        let p = self.per_word();
        if k == 0 || !k.is_multiple_of(p) {
            return Err(LibError::Shape(format!("quant: K = {k} must be a positive multiple of {p} ({}-bit weights pack {p} to a word)", self.bits)));
        }
        if self.group != 0 && (!self.group.is_multiple_of(16) || !k.is_multiple_of(self.group)) {
            return Err(LibError::Config(format!("quant: group = {} must be a multiple of 16 dividing K = {k} (or 0: per channel)", self.group)));
        }
        if self.zeros && !n.is_multiple_of(p) {
            return Err(LibError::Shape(format!("quant: N = {n} must be a multiple of {p} with zero points (packed {p} to a word)")));
        }
        if [k, n].iter().any(|&x| x > i32::MAX as usize / 2) {
            return Err(LibError::Shape(format!("quant: {k}×{n} exceeds the 32-bit limits")));
        }
        Ok(())
    }
}

/// A quantized `[k, n]` matrix in the layout the kernel reads (module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct PackedWeights<T> {
    /// Rows of the weight matrix (the product's K).
    pub k: usize,
    /// Columns (output channels, N).
    pub n: usize,
    /// Bits, group size and zero points.
    pub format: QuantFormat,
    /// `[k / P, n]`.
    pub qweight: Vec<i32>,
    /// `[groups, n]`.
    pub scales: Vec<T>,
    /// `[groups, n / P]` (empty when symmetric).
    pub qzeros: Vec<i32>,
    /// Act-order (GPTQ `desc_act`): the kernel's weight row `i` is row
    /// `perm[i]` of the matrix, rows sorted so that each group is
    /// contiguous; `x`'s columns are gathered in this order before the
    /// product. None: rows in order.
    pub perm: Option<Vec<i32>>,
}

fn pack_bits(vals: impl Iterator<Item = u32>, bits: u32) -> i32 {
    vals.enumerate().fold(0u32, |w, (i, v)| w | (v << (bits as usize * i))) as i32
}

/// A `[rows, n]` matrix of `bits`-bit values (`value(row, col)`) packed
/// along rows: `[rows / P, n]` words, row `P·r + i` of column `j` in bits
/// `bits·i` of word `(r, j)` — the weights' layout.
fn pack_rows(rows: usize, n: usize, bits: u32, value: impl Fn(usize, usize) -> u32) -> Vec<i32> {
    let p = 32 / bits as usize;
    (0..rows / p).flat_map(|r| (0..n).map(move |j| (r, j))).map(|(r, j)| pack_bits((0..p).map(|i| value(p * r + i, j)), bits)).collect()
}

/// The same matrix packed along columns: `[rows, n / P]` words — the zero
/// points' layout.
fn pack_cols(rows: usize, n: usize, bits: u32, value: impl Fn(usize, usize) -> u32) -> Vec<i32> {
    let p = 32 / bits as usize;
    (0..rows).flat_map(|g| (0..n / p).map(move |c| (g, c))).map(|(g, c)| pack_bits((0..p).map(|i| value(g, p * c + i)), bits)).collect()
}

impl<T: FloatElement> PackedWeights<T> {
    /// Groups along K.
    pub fn groups(&self) -> usize {
        self.k / self.format.group_of(self.k)
    }

    /// The quantized integer of element `(k, n)`, `k` in the kernel's row
    /// order (with act-order, row `k` of the matrix is `perm[k]`).
    pub fn q(&self, k: usize, n: usize) -> u32 {
        let (b, p) = (self.format.bits as usize, self.format.per_word());
        ((self.qweight[k / p * self.n + n] as u32) >> (b * (k % p))) & ((1 << b) - 1)
    }

    /// The zero point of group `g`, column `n`.
    pub fn z(&self, g: usize, n: usize) -> u32 {
        let (b, p) = (self.format.bits as usize, self.format.per_word());
        if !self.format.zeros {
            return 1 << (b - 1);
        }
        ((self.qzeros[g * (self.n / p) + n / p] as u32) >> (b * (n % p))) & ((1 << b) - 1)
    }

    /// The dequantized matrix `(q − z)·s`, row-major `[k, n]` in the
    /// matrix's own row order (act-order undone), exact (in f64, not
    /// rounded to `T`: the GEMM kernel rounds each weight to `T` for the
    /// tensor cores, the GEMV kernel keeps it in f32).
    pub fn dequantize(&self) -> Vec<f64> {
        let gs = self.format.group_of(self.k);
        let mut out = vec![0f64; self.k * self.n];
        for kk in 0..self.k {
            let row = self.perm.as_ref().map_or(kk, |p| p[kk] as usize);
            for j in 0..self.n {
                let g = kk / gs;
                out[row * self.n + j] = (self.q(kk, j) as f64 - self.z(g, j) as f64) * self.scales[g * self.n + j].to_f64();
            }
        }
        out
    }

    /// Checks the buffers against the declared shape and format.
    pub fn validate(&self) -> Result<(), LibError> {
        self.format.check(self.k, self.n)?;
        let p = self.format.per_word();
        let g = self.groups();
        let want = |what: &str, have: usize, need: usize| {
            if have != need {
                Err(LibError::Shape(format!(
                    "quant: `{what}` has {have} elements, {need} expected for {}×{} ({}-bit, group {})",
                    self.k, self.n, self.format.bits, self.format.group
                )))
            } else {
                Ok(())
            }
        };
        want("qweight", self.qweight.len(), self.k / p * self.n)?;
        want("scales", self.scales.len(), g * self.n)?;
        want("qzeros", self.qzeros.len(), if self.format.zeros { g * self.n / p } else { 0 })?;
        if let Some(perm) = &self.perm {
            let mut seen = vec![false; self.k];
            if perm.len() != self.k || !perm.iter().all(|&r| r >= 0 && (r as usize) < self.k && !std::mem::replace(&mut seen[r as usize], true)) {
                return Err(LibError::Shape(format!("quant: `perm` must be a permutation of 0..{}", self.k)));
            }
        }
        Ok(())
    }

    /// Import a GPTQ checkpoint's tensors (`qweight [k/P, n]`, `qzeros
    /// [groups, n/P]` holding `z − 1` as GPTQ writes them, `scales
    /// [groups, n]`, `g_idx [k]`: the group of each row). With act-order
    /// (`desc_act`: `g_idx` not `k / group`) the rows are sorted by group
    /// — each group must then hold exactly `group` rows, as GPTQ writes
    /// them — and the permutation is kept ([`PackedWeights::perm`]).
    #[allow(clippy::too_many_arguments)]
    pub fn from_gptq(
        qweight: &[i32],
        qzeros: &[i32],
        scales: &[T],
        g_idx: Option<&[i32]>,
        k: usize,
        n: usize,
        bits: u32,
        group: usize,
    ) -> Result<Self, LibError> {
        let format = QuantFormat { bits, group, zeros: true };
        format.check(k, n)?;
        let gs = format.group_of(k);
        if let Some(gi) = g_idx {
            if gi.len() != k {
                return Err(LibError::Shape(format!("quant: `g_idx` has {} elements, K = {k}", gi.len())));
            }
        }
        let act_order = g_idx.is_some_and(|gi| gi.iter().enumerate().any(|(i, &g)| g as i64 != (i / gs) as i64));
        let (b, p) = (bits as usize, format.per_word());
        let mask = (1u32 << b) - 1;
        let groups = k / gs;
        if qzeros.len() != groups * n / p {
            return Err(LibError::Shape(format!("quant: `qzeros` has {} elements, {} expected", qzeros.len(), groups * n / p)));
        }
        // GPTQ stores z − 1 (wrapping in BITS bits)
        let qz: Vec<i32> = qzeros.iter().map(|&w| pack_bits((0..p).map(|i| (((w as u32) >> (b * i)) + 1) & mask), bits)).collect();
        if qweight.len() != k / p * n {
            return Err(LibError::Shape(format!("quant: `qweight` has {} elements, {} expected", qweight.len(), k / p * n)));
        }
        let (qweight, perm) = if act_order {
            let gi = g_idx.unwrap();
            let mut count = vec![0usize; groups];
            for (i, &g) in gi.iter().enumerate() {
                if g < 0 || g as usize >= groups {
                    return Err(LibError::Shape(format!("quant: `g_idx[{i}]` = {g} is not a group (0..{groups})")));
                }
                count[g as usize] += 1;
            }
            if let Some(g) = count.iter().position(|&c| c != gs) {
                return Err(LibError::Config(format!("quant: act-order group {g} has {} rows, {gs} expected", count[g])));
            }
            // rows sorted by group (stable): each group contiguous
            let mut perm: Vec<i32> = (0..k as i32).collect();
            perm.sort_by_key(|&r| gi[r as usize]);
            let q = |row: usize, j: usize| ((qweight[row / p * n + j] as u32) >> (b * (row % p))) & mask;
            let sorted = pack_rows(k, n, bits, |r, j| q(perm[r] as usize, j));
            (sorted, Some(perm))
        } else {
            (qweight.to_vec(), None)
        };
        let out = PackedWeights { k, n, format, qweight, scales: scales.to_vec(), qzeros: qz, perm };
        out.validate()?;
        Ok(out)
    }

    /// Import an AWQ checkpoint's tensors (4-bit: `qweight [k, n/8]` and
    /// `qzeros [groups, n/8]` with 8 columns to a word in AWQ's
    /// interleaved order 0 2 4 6 1 3 5 7, `scales [groups, n]`), repacked
    /// into the kernel's layout.
    pub fn from_awq(qweight: &[i32], qzeros: &[i32], scales: &[T], k: usize, n: usize, group: usize) -> Result<Self, LibError> {
        const ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];
        let format = QuantFormat { bits: 4, group, zeros: true };
        format.check(k, n)?;
        let groups = k / format.group_of(k);
        if qweight.len() != k * n / 8 || qzeros.len() != groups * n / 8 {
            return Err(LibError::Shape(format!(
                "quant: AWQ `qweight` / `qzeros` have {} / {} elements, {} / {} expected",
                qweight.len(),
                qzeros.len(),
                k * n / 8,
                groups * n / 8
            )));
        }
        // column 8c + ORDER[i] sits in nibble i of word c
        let unpack = |w: &[i32], rows: usize| -> Vec<u32> {
            let mut v = vec![0u32; rows * n];
            for r in 0..rows {
                for c in 0..n / 8 {
                    let word = w[r * (n / 8) + c] as u32;
                    for (i, &col) in ORDER.iter().enumerate() {
                        v[r * n + 8 * c + col] = (word >> (4 * i)) & 15;
                    }
                }
            }
            v
        };
        let (q, z) = (unpack(qweight, k), unpack(qzeros, groups));
        let qweight = pack_rows(k, n, 4, |r, j| q[r * n + j]);
        let qzeros = pack_cols(groups, n, 4, |g, j| z[g * n + j]);
        let out = PackedWeights { k, n, format, qweight, scales: scales.to_vec(), qzeros, perm: None };
        out.validate()?;
        Ok(out)
    }
}

/// Quantize a row-major `[k, n]` f32 matrix: per group and column, scales
/// from the range (asymmetric: `(max − min) / (2^B − 1)`, zero point
/// `round(−min / s)`; symmetric: `max|w| / (2^(B−1) − 1)`, zero point
/// `2^(B−1)`), weights rounded to nearest and clamped.
pub fn quantize<T: FloatElement>(w: &[f32], k: usize, n: usize, format: QuantFormat) -> Result<PackedWeights<T>, LibError> {
    format.check(k, n)?;
    if w.len() != k * n {
        return Err(LibError::Shape(format!("quant: weights have {} elements, {k}×{n} expected", w.len())));
    }
    if let Some(i) = w.iter().position(|v| !v.is_finite()) {
        return Err(LibError::Config(format!("quant: weight {i} is not finite ({})", w[i])));
    }
    let b = format.bits;
    let qmax = ((1u32 << b) - 1) as f32;
    let gs = format.group_of(k);
    let groups = k / gs;
    let mut scales = vec![T::from_f64(0.0); groups * n];
    let mut zs = vec![0u32; groups * n];
    let mut q = vec![0u32; k * n];
    for g in 0..groups {
        for j in 0..n {
            let col = (g * gs..(g + 1) * gs).map(|r| w[r * n + j]);
            let (lo, hi) = col.clone().fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
            // (the scale as `T` holds it, rounded up so that the range
            // still fits: no weight is clipped by more than half a step)
            let in_t = |s: f32| {
                let t = T::from_f64(s as f64).to_f64() as f32;
                if t < s {
                    T::from_f64(s as f64 * (1.0 + 1.0 / 128.0)).to_f64() as f32
                } else {
                    t
                }
            };
            let (s, z) = if format.zeros {
                let (lo, hi) = (lo.min(0.0), hi.max(0.0));
                let s = in_t(if hi > lo { (hi - lo) / qmax } else { 1.0 });
                (s, (-lo / s).round().clamp(0.0, qmax))
            } else {
                let half = (1u32 << (b - 1)) as f32;
                let m = lo.abs().max(hi.abs());
                (in_t(if m > 0.0 { m / (half - 1.0) } else { 1.0 }), half)
            };
            scales[g * n + j] = T::from_f64(s as f64);
            zs[g * n + j] = z as u32;
            for r in g * gs..(g + 1) * gs {
                q[r * n + j] = (w[r * n + j] / s + z).round().clamp(0.0, qmax) as u32;
            }
        }
    }
    let qweight = pack_rows(k, n, b, |r, j| q[r * n + j]);
    let qzeros = if format.zeros { pack_cols(groups, n, b, |g, j| zs[g * n + j]) } else { vec![] };
    Ok(PackedWeights { k, n, format, qweight, scales, qzeros, perm: None })
}

/// A word of `32 / bits` fields in row order (field `r` at bit `bits·r`)
/// with its fields paired for the kernels: row `r` moves to bit `bits·(r /
/// 2) + 16·(r % 2)`, so rows `2i` and `2i + 1` sit 16 bits apart.
pub fn pair_fields(word: i32, bits: u32) -> i32 {
    let (w, m, p) = (word as u32, (1u32 << bits) - 1, 32 / bits);
    (0..p).fold(0u32, |acc, r| acc | (((w >> (bits * r)) & m) << (bits * (r / 2) + 16 * (r % 2)))) as i32
}

/// [`PackedWeights`] on a device.
pub struct QuantWeights<T: FloatElement> {
    /// K.
    pub k: usize,
    /// N.
    pub n: usize,
    /// Bits, group size and zero points.
    pub format: QuantFormat,
    /// Packed weights on the device: [`PackedWeights::qweight`] with each
    /// word's fields paired ([`pair_fields`], module doc).
    pub qweight: Buffer<i32>,
    /// Scales on the device (`[groups, n]`).
    pub scales: Buffer<T>,
    /// A one-element placeholder when symmetric.
    pub qzeros: Buffer<i32>,
    /// Act-order: the column order `x` is gathered in
    /// ([`PackedWeights::perm`]), and the gathered `x` (grown on demand).
    pub perm: Option<Buffer<i32>>,
    gathered: std::sync::Mutex<Option<Buffer<T>>>,
}

impl<T: FloatElement> QuantWeights<T> {
    /// Copies packed weights to `dev` (checked against their format first).
    pub fn upload(dev: &Device, w: &PackedWeights<T>) -> Result<Self, LibError> {
        w.validate()?;
        let qzeros = if w.qzeros.is_empty() { dev.from_slice(&[0i32])? } else { dev.from_slice(&w.qzeros)? };
        let perm = match &w.perm {
            Some(p) => Some(dev.from_slice(p)?),
            None => None,
        };
        Ok(QuantWeights {
            k: w.k,
            n: w.n,
            format: w.format,
            qweight: dev.from_slice(&w.qweight.iter().map(|&x| pair_fields(x, w.format.bits)).collect::<Vec<_>>())?,
            scales: dev.from_slice(&w.scales)?,
            qzeros,
            perm,
            gathered: Default::default(),
        })
    }
}

/// Tile configuration of [`wq_gemm_kernel`] (or, with `bm == 1`, of
/// [`wq_gemv_kernel`]: one row of `x`, no tensor cores; with `decode`, of
/// [`wq_decode_kernel`]: the product computed transposed, the weights the
/// tensor cores' wide operand).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantConfig {
    /// Rows of the output per program (1: the GEMV kernel).
    pub bm: u32,
    /// Output columns per program.
    pub bn: u32,
    /// K per step (divides the group size).
    pub bk: u32,
    /// Warps per program.
    pub num_warps: u32,
    /// Pipelining depth of the K loop.
    pub num_stages: u32,
    /// K split into this many ranges (1: none).
    pub split_k: u32,
    /// The decode form ([`wq_decode_kernel`]): `bn` weight columns (the
    /// `dot`'s rows) against `bm` rows of `x` (its columns, at least 16).
    pub decode: bool,
    /// The decode form with each group's scale on the weights (`(q − z) ·
    /// s` rounded to `T`, accumulated by the tensor cores) instead of on
    /// each step's f32 partial sums: one multiply per pair of weights
    /// instead of one per accumulator element — as many at 64 rows, and
    /// the MMA may then stay in flight under the next step's
    /// dequantization (`LaunchConfig::inflight_register_a`). Ignored
    /// without `decode`.
    pub scale_w: bool,
}

impl QuantConfig {
    fn from_tune(tc: &ferrotile::TuneConfig) -> ferrotile::Result<Self> {
        Ok(QuantConfig {
            bm: tc.get("BM")? as u32,
            bn: tc.get("BN")? as u32,
            bk: tc.get("BK")? as u32,
            num_warps: tc.num_warps,
            num_stages: tc.num_stages,
            split_k: tc.values.get("SPLIT_K").copied().unwrap_or(1) as u32,
            decode: tc.values.get("DECODE").is_some_and(|&d| d != 0),
            scale_w: tc.values.get("SCALE_W").is_some_and(|&d| d != 0),
        })
    }

    fn to_tune(self) -> ferrotile::TuneConfig {
        let t = ferrotile::TuneConfig::new(self.num_warps)
            .with("BM", self.bm as i64)
            .with("BN", self.bn as i64)
            .with("BK", self.bk as i64)
            .with("SPLIT_K", self.split_k as i64)
            .with("DECODE", self.decode as i64)
            .stages(self.num_stages);
        // (only where on: the other configurations keep their keys)
        if self.decode && self.scale_w {
            t.with("SCALE_W", 1)
        } else {
            t
        }
    }

    /// The largest of 128, 64, 32, 16 dividing the group (any with one
    /// group), at most `cap`.
    fn bk_for(group: usize, k: usize, cap: u32) -> u32 {
        [128u32, 64, 32, 16].into_iter().filter(|&b| b <= cap).find(|&b| group >= k || group.is_multiple_of(b as usize)).unwrap_or(16)
    }

    /// A configuration for `dev` without tuning: lavapipe's 32 KiB of
    /// workgroup storage and the CPU take small tiles.
    pub fn default_for(dev: &Device, m: usize, group: usize, k: usize) -> Self {
        let bm = if m == 1 {
            1
        } else if m <= 16 {
            16
        } else if m <= 32 {
            32
        } else {
            64
        };
        match dev.kind() {
            ferrotile::DeviceKind::Cuda => {
                QuantConfig { bm, bn: 128, bk: Self::bk_for(group, k, 64), num_warps: 4, num_stages: 3, split_k: 1, decode: false, scale_w: false }
            }
            _ => QuantConfig { bm: bm.min(16), bn: 32, bk: Self::bk_for(group, k, 32), num_warps: 4, num_stages: 1, split_k: 1, decode: false, scale_w: false },
        }
    }
}

/// Options of [`wq_gemm`].
pub struct QuantOptions<'a, T: FloatElement> {
    /// Added to every row (`[n]`, the activations' dtype), in f32 before
    /// the activation and the cast.
    pub bias: Option<&'a Buffer<T>>,
    /// The activation after the bias.
    pub activation: Activation,
    /// Row stride of `x` in elements (0: `k`, contiguous).
    pub x_row_stride: usize,
    /// Row stride of `out` in elements (0: `n`).
    pub out_row_stride: usize,
    /// A fixed configuration instead of the tuner's.
    pub config: Option<QuantConfig>,
}

impl<T: FloatElement> Default for QuantOptions<'_, T> {
    fn default() -> Self {
        QuantOptions { bias: None, activation: Activation::None, x_row_stride: 0, out_row_stride: 0, config: None }
    }
}

impl<T: FloatElement> Clone for QuantOptions<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: FloatElement> Copy for QuantOptions<'_, T> {}

impl<T: FloatElement> std::fmt::Debug for QuantOptions<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuantOptions")
            .field("bias", &self.bias.map(|b| format!("[{}; {}]", T::DTYPE, b.len())))
            .field("activation", &self.activation)
            .field("x_row_stride", &self.x_row_stride)
            .field("out_row_stride", &self.out_row_stride)
            .field("config", &self.config)
            .finish()
    }
}

/// Whether the process asked for register-A MMAs in flight
/// (`FERROTILE_INFLIGHT_REG_A=1`): the decode form's `scale_w`
/// candidates are offered only then, until measured.
fn inflight_reg_a_asked() -> bool {
    std::env::var("FERROTILE_INFLIGHT_REG_A").is_ok_and(|v| v == "1")
}

/// The tuner's candidates for `m` rows (decode shapes split K).
pub fn quant_candidates(m: usize, group: usize, k: usize) -> Vec<ferrotile::TuneConfig> {
    let mut v = vec![];
    if m == 1 {
        // one row: the GEMV kernel (`bm = 1`), K split until the SMs fill
        for &bn in &[64u32, 128, 256] {
            for &bkcap in &[32u32, 64, 128] {
                let bk = QuantConfig::bk_for(group, k, bkcap);
                for &split in &[1u32, 4, 8, 16] {
                    for &warps in &[4u32, 8] {
                        // (8 warps with 32 weights per thread spill at 3
                        // stages on sm_90 — 24–32 B — since the scales and
                        // zero points are prefetched with the words: 2; so
                        // do 4 warps with 64 per thread on sm_80 — 12–18 B
                        // of 16-bit scales, at 168 registers, since the
                        // accumulator is carried pre-summed)
                        let per_thread = bn * bk / (32 * warps);
                        // (and, since shifts are immediates — session 25 —,
                        // 4 warps with 32 per thread at 3 stages: ptxas
                        // then aims at 96 registers and spills 8 B)
                        let stages = if (warps == 8 && per_thread <= 32) || (warps == 4 && per_thread >= 32) { 2 } else { 3 };
                        let c = QuantConfig { bm: 1, bn, bk, num_warps: warps, num_stages: stages, split_k: split, decode: false, scale_w: false };
                        let t = c.to_tune();
                        if !v.contains(&t) && bn * bk / (32 * warps) <= 64 {
                            v.push(t);
                        }
                    }
                }
            }
        }
        // and the 16-row tensor-core kernel, fifteen rows masked off: its
        // dequantization runs two weights per instruction (`.bf16x2`),
        // the GEMV's one weight per FMA chain
    }
    // the decode form (`wq_decode_kernel`): the weights as the tensor
    // cores' wide operand, straight from their words to `wgmma`'s register
    // fragments, the rows of `x` its narrow one — for up to 64 rows.
    // (BN, BK, warps, stages) as ptxas takes them without spilling (offline
    // SASS per weight at 16 rows, session 49: 256×128 8 warps 3.4, 64×128 4
    // warps 4.3, 256×64 and 128×64 8 warps 4.4–5.8); BK ≠ BN, since the
    // `xᵀ` tile `[BK, BM]` would otherwise share the accumulator's shape
    // `[BN, BM]` and its layout (layouts are per shape), copied element by
    // element
    if m <= 64 {
        let bm = (m as u32).next_power_of_two().max(16);
        let tiles: &[(u32, u32, u32, u32)] = if bm <= 32 {
            &[(256, 128, 8, 2), (256, 64, 8, 2), (128, 64, 8, 3), (64, 128, 4, 2), (64, 128, 4, 3)]
        } else {
            &[(256, 128, 8, 2), (64, 128, 4, 2)]
        };
        for &(bn, bkcap, warps, stages) in tiles {
            // (and BK ≠ BM: the weight tile `[BN, BK]` would share the
            // accumulator's shape, so its layout — each word then read by
            // every thread holding one of its pairs)
            let Some(bk) = [bkcap, bkcap / 2, bkcap / 4].into_iter().map(|c| QuantConfig::bk_for(group, k, c)).find(|&b| b != bn && b != bm) else {
                continue;
            };
            for &split in &[4u32, 8, 16] {
                // (at 64 rows the scales on the weights too: as many
                // multiplies, and the MMA in flight — offered only with
                // `FERROTILE_INFLIGHT_REG_A=1` until measured on a GPU)
                for scale_w in [false, bm == 64 && inflight_reg_a_asked()] {
                    let t = QuantConfig { bm, bn, bk, num_warps: warps, num_stages: stages, split_k: split, decode: true, scale_w }.to_tune();
                    if !v.contains(&t) {
                        v.push(t);
                    }
                }
            }
        }
    }
    let bms: &[u32] = if m <= 16 {
        &[16]
    } else if m <= 32 {
        &[32]
    } else {
        &[64, 128]
    };
    let gemv_candidates = v.len();
    for avoid_square in [true, false] {
        if v.len() > gemv_candidates {
            break;
        }
        for &bm in bms {
            for &bn in &[64u32, 128] {
                for &bkcap in &[64u32, 128] {
                    let bk = QuantConfig::bk_for(group, k, bkcap);
                    // (BK = BM would give the weight tile the accumulator's
                    // shape, and layouts are chosen per shape: the accumulator's
                    // would keep the weight loads from running once per word —
                    // avoided unless the group leaves no other BK: group 16
                    // at M ≤ 16, group 32 at 17 ≤ M ≤ 32)
                    if bk == bm && avoid_square {
                        continue;
                    }
                    for &split in if m <= 64 { &[1u32, 2, 4, 8][..] } else { &[1u32][..] } {
                        // (four stages of 128-deep steps spill; so do three
                        // of 32-deep steps of 128-row tiles and of 128-deep
                        // ones at 16 rows on sm_80 — 12–28 B — since the
                        // scales and zero points are prefetched too: two)
                        // (session 25, packed dequantization: ptxas aims
                        // at fewer registers and spills 8–24 B at 16×64×64
                        // and 64×128×32 from three stages: two)
                        let deep: &[u32] = if (bm == 128 && bk <= 32)
                            || (bm == 16 && bk >= 128)
                            || (bm == 64 && bn == 64 && bk <= 32)
                            || (bm == 16 && bn == 64 && bk == 64)
                            || (bm == 64 && bn == 128 && bk <= 32)
                        {
                            &[2]
                        } else {
                            &[3]
                        };
                        for &stages in if bk <= 64 && deep == [3] { &[3u32, 4][..] } else { deep } {
                            let c = QuantConfig {
                                bm,
                                bn,
                                bk,
                                num_warps: if bm * bn >= 128 * 128 { 8 } else { 4 },
                                num_stages: stages,
                                split_k: split,
                                decode: false,
                                scale_w: false,
                            };
                            let t = c.to_tune();
                            if !v.contains(&t) {
                                v.push(t);
                            }
                        }
                    }
                }
            }
        }
    }
    v
}

/// `out[m, n] = act(x[m, k] · dequant(w) + bias)` (module doc; the bias and
/// the activation from `opts`, applied in f32 before the one rounding to
/// `T`). `x` and `out` are row-major with the strides of `opts`; `T` is
/// f16 or bf16.
///
/// ```
/// use ferrotile::{f16, Device};
/// use ferrotile_kernels::quant::{quantize, wq_gemm, QuantFormat, QuantOptions, QuantWeights};
/// let dev = Device::cpu();
/// let (m, n, k) = (1, 8, 64);
/// let w: Vec<f32> = (0..k * n).map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0).collect(); // [k, n]
/// // W4A16, groups of 32 rows, zero points
/// let packed = quantize::<f16>(&w, k, n, QuantFormat { bits: 4, group: 32, zeros: true })?;
/// let wq = QuantWeights::upload(&dev, &packed)?;
/// let x = dev.from_slice(&vec![f16::ONE; m * k])?;
/// let mut y = dev.zeros::<f16>(m * n)?;
/// wq_gemm(&dev, &x, &wq, &mut y, m, &QuantOptions::default())?;
/// // against the product with the dequantized weights (what the kernel computes)
/// let dq = packed.dequantize(); // [k, n], f64
/// let want: f64 = (0..k).map(|r| dq[r * n]).sum();
/// assert!((y.to_vec()?[0].to_f64() - want).abs() < 0.05);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn wq_gemm<T: FloatElement>(
    dev: &Device,
    x: &Buffer<T>,
    w: &QuantWeights<T>,
    out: &mut Buffer<T>,
    m: usize,
    opts: &QuantOptions<T>,
) -> Result<(), LibError> {
    use ferrotile::ir::DType;
    if !matches!(T::DTYPE, DType::F16 | DType::BF16) {
        return Err(LibError::Config(format!("quant: activations must be f16 or bf16, got {}", T::DTYPE)));
    }
    let (k, n) = (w.k, w.n);
    w.format.check(k, n)?;
    let sx = if opts.x_row_stride == 0 { k } else { opts.x_row_stride };
    let so = if opts.out_row_stride == 0 { n } else { opts.out_row_stride };
    if sx < k || so < n {
        return Err(LibError::Shape(format!("quant: row strides ({sx} for x, {so} for out) must be at least K = {k} / N = {n}")));
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    if m > i32::MAX as usize / 2 {
        return Err(LibError::Shape(format!("quant: M = {m} exceeds the 32-bit limits")));
    }
    let need = |what: &str, have: usize, rows: usize, stride: usize, cols: usize| {
        let want = crate::rows_extent("quant", what, rows, stride, cols)?;
        if have < want {
            Err(LibError::Shape(format!("quant: `{what}` has {have} elements, {want} needed for {rows} rows of stride {stride}")))
        } else {
            Ok(())
        }
    };
    need("x", x.len(), m, sx, k)?;
    need("out", out.len(), m, so, n)?;
    if let Some(b) = opts.bias {
        if b.len() < n {
            return Err(LibError::Shape(format!("quant: `bias` has {} elements, N = {n} needed", b.len())));
        }
    }
    if let Some(perm) = &w.perm {
        // act-order: x's columns in the weights' row order, then the product
        let mut g = w.gathered.lock().unwrap_or_else(|e| e.into_inner());
        if g.as_ref().is_none_or(|b| b.len() < m * k) {
            *g = Some(dev.zeros::<T>(m * k)?);
        }
        let xg = g.as_mut().unwrap();
        const BLOCK: usize = 256;
        let grid = [m as u32, k.div_ceil(BLOCK) as u32, 1];
        gather_columns::launch(dev, LaunchConfig::new(grid).num_warps(2), x, perm, xg, k as i32, sx as i64, BLOCK as i32)?;
        let opts = QuantOptions { x_row_stride: k, ..*opts };
        return wq_gemm_ordered(dev, xg, w, out, m, &opts, (k, so));
    }
    wq_gemm_ordered(dev, x, w, out, m, opts, (sx, so))
}

/// [`wq_gemm`] once `x`'s columns are in the weights' row order.
fn wq_gemm_ordered<T: FloatElement>(
    dev: &Device,
    x: &Buffer<T>,
    w: &QuantWeights<T>,
    out: &mut Buffer<T>,
    m: usize,
    opts: &QuantOptions<T>,
    (sx, so): (usize, usize),
) -> Result<(), LibError> {
    let (k, n) = (w.k, w.n);
    let placeholder = crate::scratch::placeholder::<T>(dev)?;
    let epi = Epilogue { bias: opts.bias.unwrap_or(&placeholder), has_bias: opts.bias.is_some(), act: opts.activation.code() };
    if let Some(c) = opts.config {
        return launch(dev, x, w, out, m, (sx, so), epi, c, None);
    }
    let group = w.format.group_of(k);
    // (decode shapes are bound by the weights' bytes: tuned from 4 M weights)
    let big = (m as u64) * (n as u64) * (k as u64) >= (1 << 26) || (n as u64) * (k as u64) >= (1 << 22);
    if dev.kind() != ferrotile::DeviceKind::Cuda || !big {
        return launch(dev, x, w, out, m, (sx, so), epi, QuantConfig::default_for(dev, m, group, k), None);
    }
    let b2 = |v: usize| v.max(1).next_power_of_two();
    let key = format!("{}|w{}g{}{}|m<={}|n<={}|k<={}", T::DTYPE, w.format.bits, group.min(k), if w.format.zeros { "z" } else { "" }, b2(m), b2(n), b2(k));
    let tuner = quant_tuner(m, group, k);
    // (`UNROLL`: the finalist knob of `quant_tuner`)
    tuner.run(dev, &key, |tc| {
        launch(dev, x, w, out, m, (sx, so), epi, QuantConfig::from_tune(tc)?, tc.values.get("UNROLL").map(|&u| u == 1)).map_err(crate::lib_to_launch)
    })?;
    Ok(())
}

fn quant_tuner(m: usize, group: usize, k: usize) -> std::sync::Arc<ferrotile::Autotuner> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    // One tuner per candidate list, looked up by what the list depends on
    // (`quant_candidates`: the M bucket, and the group and K through the
    // BKs that divide them). The list is built only on a miss: building and
    // comparing it on every call cost ~90 µs of host time per call, more
    // than the M = 1 kernel itself (31 µs on an H200).
    let bucket = match m {
        1 => 1,
        2..=16 => 16,
        17..=32 => 32,
        33..=64 => 64,
        _ => usize::MAX,
    };
    static T: OnceLock<Mutex<HashMap<(usize, usize, usize), Arc<ferrotile::Autotuner>>>> = OnceLock::new();
    let mut map = T.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    // The threaded copies of the K loop's body (`LaunchConfig::unroll_pipelined`)
    // speed some tiles up (W8A16 M = 1 −13 %, W4A16 16×8192² −3 %) and
    // slow others down (W4A16 16×4096×14336 +4 %; H200, session 37): the
    // finalists of each tuning are timed both ways.
    map.entry((bucket, group, k))
        .or_insert_with(|| Arc::new(ferrotile::Autotuner::new("wq_gemm", quant_candidates(m, group, k)).reps(5).finalist_knob("UNROLL", 0, &[1])))
        .clone()
}

/// The epilogue of a launch: the bias buffer (a placeholder without one),
/// whether it is added, and the activation's `ACT` code.
#[derive(Clone, Copy)]
pub(crate) struct Epilogue<'a, T: FloatElement> {
    pub(crate) bias: &'a Buffer<T>,
    pub(crate) has_bias: bool,
    pub(crate) act: i32,
}

#[allow(clippy::too_many_arguments)]
fn launch<T: FloatElement>(
    dev: &Device,
    x: &Buffer<T>,
    w: &QuantWeights<T>,
    out: &mut Buffer<T>,
    m: usize,
    (sx, so): (usize, usize),
    epi: Epilogue<T>,
    c: QuantConfig,
    unroll: Option<bool>,
) -> Result<(), LibError> {
    let (k, n) = (w.k, w.n);
    let group = w.format.group_of(k);
    if !c.bk.is_power_of_two() || !(16..=128).contains(&c.bk) || (group < k && !group.is_multiple_of(c.bk as usize)) {
        return Err(LibError::Config(format!("quant: BK = {} must be 16..=128, a power of two dividing the group ({group})", c.bk)));
    }
    let gemv = c.bm == 1 && !c.decode;
    if !c.bm.is_power_of_two() || !c.bn.is_power_of_two() || (c.bm < 16 && !gemv) || c.bn < 16 || c.bm > 256 || c.bn > 256 || !(1..=16).contains(&c.split_k) {
        return Err(LibError::Config(format!("quant: invalid configuration {c:?}")));
    }
    if gemv && m != 1 {
        return Err(LibError::Config(format!("quant: BM = 1 (the GEMV kernel) computes one row, M = {m}")));
    }
    // (the weights' buffers are public fields: checked here, at every
    // launch, against the shape and format they claim)
    let p = w.format.per_word();
    let groups = k.div_ceil(group);
    let have = |what: &str, len: usize, want: usize| {
        if len < want {
            Err(LibError::Shape(format!("quant: `{what}` has {len} elements, {want} needed for K = {k}, N = {n} ({:?})", w.format)))
        } else {
            Ok(())
        }
    };
    have("qweight", w.qweight.len(), k / p * n)?;
    have("scales", w.scales.len(), groups * n)?;
    if w.format.zeros {
        have("qzeros", w.qzeros.len(), groups * (n / p))?;
    }
    // UNCHECKED: the kernels below are launched without guards (their
    // 64-bit address comparisons are ~12 % of the 16-row tile's loop). The
    // checks above keep every access in its buffer: `x` is read at
    // `r·sx + c` for `r < m`, `c < k` (masked) and `out` written at `r·so +
    // c` for `c < n`, inside the `need` lengths of `wq_gemm`; the words at
    // `(c / P)·n + j` for `c < k`, `j < n` (`K` a multiple of `P`:
    // `format.check`), the scales at `g·n + j` and the zero points at
    // `g·(n / P) + j / P` for `g = c / group < groups` (`N` a multiple of
    // `P` with zero points), inside the lengths checked just above; the
    // partials at `s·m·n + r·n + j` for `s < splits` inside the workspace
    // of `splits·m·n`; no index overflows (`m`, `n`, `k` ≤ 2³⁰,
    // products in `i64`). Memcheck over the quantized-GEMM tests on the
    // H200: benches/NOTES.md, session 36.
    let bk = c.bk as usize;
    let split = c.split_k as usize;
    let k_split = k.div_ceil(split).div_ceil(bk) * bk;
    let splits = k.div_ceil(k_split);
    let grid = if c.decode {
        [n.div_ceil(c.bn as usize) as u32, m.div_ceil(c.bm as usize) as u32, splits as u32]
    } else {
        [m.div_ceil(c.bm as usize) as u32, n.div_ceil(c.bn as usize) as u32, splits as u32]
    };
    let mut cfg = LaunchConfig::new(grid).num_warps(c.num_warps).num_stages(c.num_stages.max(1));
    cfg.unroll_pipelined = unroll;
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    let zeros = w.format.zeros;
    let bits = w.format.bits as i32;
    // with SPLIT, f32 partials go to a `[splits, m, n]` workspace that the
    // reduction sums into `out` (which the kernel then does not write);
    // without, the kernel writes `out` and the workspace is not written
    let split = splits > 1;
    // (K a multiple of BK — and so every split's range — and N of BN: no
    // masks on the weights' side)
    let even = k.is_multiple_of(bk) && n.is_multiple_of(c.bn as usize);
    let mut ws = crate::scratch::workspace(dev, if split { splits * m * n } else { 1 })?;
    if gemv {
        // (its K loop has no `dot`: pipelined on request, so the next
        // weights are in flight while the current ones are multiplied)
        let cfg = LaunchConfig { grid: [grid[1], grid[2], 1], ..cfg }.pipeline_every_loop(true);
        // SAFETY: see `UNCHECKED` above
        unsafe {
            wq_gemv_kernel::launch_unchecked(
                dev,
                cfg,
                x,
                &w.qweight,
                &w.scales,
                &w.qzeros,
                out,
                ws.buffer(),
                epi.bias,
                ni,
                ki,
                k_split as i32,
                c.bn as i32,
                c.bk as i32,
                bits,
                group as i32,
                zeros,
                split,
                epi.has_bias,
                epi.act,
            )?;
        }
    } else if c.decode {
        // (the scale and zero-point columns are loaded in the slice of the
        // weights' fragment layout they broadcast into, not converted
        // through shared memory with two barriers a step; the words'
        // addresses as one root plus immediates)
        let cfg = cfg.broadcast_slices(true).affine_addresses(true);
        // (scales on the weights: the MMA in flight under the next step's
        // dequantization)
        let cfg = if c.scale_w { cfg.inflight_register_a(true) } else { cfg };
        // SAFETY: see `UNCHECKED` above (the same accesses, transposed)
        unsafe {
            wq_decode_kernel::launch_unchecked(
                dev,
                cfg,
                x,
                &w.qweight,
                &w.scales,
                &w.qzeros,
                out,
                ws.buffer(),
                epi.bias,
                mi,
                ni,
                ki,
                k_split as i32,
                sx as i64,
                so as i64,
                c.bn as i32,
                c.bm as i32,
                c.bk as i32,
                bits,
                group as i32,
                zeros,
                split,
                even,
                epi.has_bias,
                epi.act,
                c.scale_w,
            )?;
        }
    } else {
        // SAFETY: see `UNCHECKED` above
        unsafe {
            wq_gemm_kernel::launch_unchecked(
                dev,
                cfg,
                x,
                &w.qweight,
                &w.scales,
                &w.qzeros,
                out,
                ws.buffer(),
                epi.bias,
                mi,
                ni,
                ki,
                k_split as i32,
                sx as i64,
                so as i64,
                c.bm as i32,
                c.bn as i32,
                c.bk as i32,
                bits,
                group as i32,
                zeros,
                split,
                even,
                epi.has_bias,
                epi.act,
            )?;
        }
    }
    if split {
        reduce(dev, "wq_gemm", &mut ws, out, epi, (m, n, splits, so))
    } else {
        Ok(())
    }
}

/// `out = act(Σ_s ws[s] + bias)` over the split-K partials `[splits, m,
/// n]`, summed in split order (deterministic), cast to `T` — for the
/// quantized GEMMs (`what` names the caller in the error).
pub(crate) fn reduce<T: FloatElement>(
    dev: &Device,
    what: &str,
    ws: &mut crate::scratch::Workspace,
    out: &mut Buffer<T>,
    epi: Epilogue<T>,
    (m, n, splits, so): (usize, usize, usize, usize),
) -> Result<(), LibError> {
    let launch =
        crate::gemm::splitk_reduce_launch(m, n, 1, splits).ok_or_else(|| LibError::Shape(format!("{what}: {m}×{n} exceeds the split-K reduction's grid")))?;
    crate::gemm::gemm_splitk_reduce::launch(
        dev,
        launch,
        ws.buffer(),
        out,
        epi.bias,
        m as i32,
        n as i32,
        splits as i32,
        so as i64,
        0,
        1.0,
        crate::gemm::SPLITK_REDUCE_BLOCK as i32,
        epi.act,
        epi.has_bias,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The device words' fields, where the kernels read them.
    #[test]
    fn pair_fields_puts_row_pairs_16_bits_apart() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let w = x as i32;
            for bits in [4u32, 8] {
                let (p, m) = (32 / bits, (1u32 << bits) - 1);
                let d = super::pair_fields(w, bits) as u32;
                for r in 0..p {
                    // where the kernels read row r (kernels.rs)
                    let sh = bits * (r / 2) + 16 * (r % 2);
                    assert_eq!((d >> sh) & m, (w as u32 >> (bits * r)) & m, "{bits} bits, row {r} of {w:#x}");
                }
            }
        }
        // 4 bits: rows 0 2 4 6 in the low half, 1 3 5 7 in the high one
        assert_eq!(super::pair_fields(0x7654_3210, 4) as u32, 0x7531_6420);
        assert_eq!(super::pair_fields(0x0302_0100, 8) as u32, 0x0301_0200);
    }

    /// `quant_tuner` keys its tuners by (M bucket, group, K): within a
    /// bucket the candidate list must not depend on M.
    #[test]
    fn candidate_lists_are_constant_within_a_tuner_bucket() {
        for (group, k) in [(128, 8192), (16, 4096), (32, 4096), (4096, 4096), (64, 14336)] {
            for (lo, hi) in [(1, 1), (2, 16), (17, 32), (33, 64), (65, 300)] {
                let first = quant_candidates(lo, group, k);
                // (every group size has candidates, at every M)
                assert!(!first.is_empty(), "no candidate for m = {lo}, group {group}");
                for m in lo..=hi {
                    assert_eq!(quant_candidates(m, group, k), first, "m = {m}, group {group}, k {k}");
                }
            }
        }
    }
}
