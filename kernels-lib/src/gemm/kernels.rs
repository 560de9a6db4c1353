//! The GEMM library's kernels, written in the DSL as a user would: the
//! tiled product with its fused epilogue, split-K's reduction, and the
//! tf32 rounding transpose. The host side (`super`) picks configurations
//! and launches them.

use crate::epilogue::activation;
use ferrotile::prelude::*;

/// `C[b] = act(alpha · A[b]·B[b] + bias)` for a `BM × BN` tile per program;
/// grid = (tiles of C, batch, K splits). Program `(t, b, s)` covers
/// `k ∈ [s·k_split, min(k, (s+1)·k_split))` and writes to `c + s·scs`
/// (one split: `k_split ≥ k`, `scs` unused). C's element `(i, j)` is at
/// `i·scm + j·scn`, so the kernel computes a transposed product as well: the
/// library's swapped form `Cᵀ = Bᵀ·Aᵀ` (A and B exchanged, their strides
/// transposed, `scm = 1`). `BIAS`: 0 none, 1 a bias per column `j`, 2 per
/// row `i` (the swapped form's columns of C). `GROUP_M = 0`: N is one tile
/// (programs walk M). `TF32`: f32 inputs rounded to
/// tf32 (`dot_tf32`), else exact f32 products. `VIEWS`: the
/// operand tiles are block loads from views of A and B (on Hopper, TMA bulk copies into the
/// `wgmma` operand rings) instead of masked pointer loads; with more than
/// one split, `k_split` must then be a multiple of `BK`.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn gemm_kernel<
    T: Float,
    U: Float,
    const BM: i32,
    const BN: i32,
    const BK: i32,
    const GROUP_M: i32,
    const ACT: i32,
    const BIAS: i32,
    const TF32: bool,
    const VIEWS: bool,
>(
    a: Ptr<T>,
    b: Ptr<T>,
    c: Ptr<U>,
    bias: Ptr<U>,
    m: i32,
    n: i32,
    k: i32,
    sam: i64,
    sak: i64,
    sbk: i64,
    sbn: i64,
    scm: i64,
    scn: i64,
    sab: i64,
    sbb: i64,
    scb: i64,
    alpha: f32,
    k_split: i32,
    scs: i64,
) {
    static_assert(BM >= 16 && BN >= 16 && BK >= 16, "dot tiles must be at least 16 in every dimension");
    let pid = program_id(0);
    let batch = program_id(1) as i64;
    let split = program_id(2);
    let k_lo = split * k_split;
    let k_hi = minimum(k, k_lo + k_split);
    // grouped ordering: GROUP_M row tiles share their B tiles in L2
    let num_pid_m = cdiv(m, BM);
    let num_pid_n = cdiv(n, BN);
    // (GROUP_M = 0: N is one tile wide, so programs simply walk M — and
    // B's block coordinates do not depend on the program id)
    let mut pid_m = pid;
    let mut pid_n = 0;
    if GROUP_M > 0 {
        let in_group = GROUP_M * num_pid_n;
        let first_m = (pid / in_group) * GROUP_M;
        let group_m = minimum(num_pid_m - first_m, GROUP_M);
        pid_m = first_m + (pid % in_group) % group_m;
        pid_n = (pid % in_group) / group_m;
    }
    let rm = pid_m * BM + arange(0, BM);
    let rn = pid_n * BN + arange(0, BN);
    let rk = arange(0, BK);
    let a_rows = expand_dims((rm as i64) * sam, 1);
    let b_cols = expand_dims((rn as i64) * sbn, 0);
    let m_ok = expand_dims(rm < m, 1);
    let n_ok = expand_dims(rn < n, 0);
    let a0 = a + batch * sab;
    let b0 = b + batch * sbb;
    let mut acc = zeros([BM, BN], f32);
    if VIEWS {
        // the operands as views: block loads, zero outside [m, k] / [k, n]
        // (Hopper: TMA bulk copies). K ranges of a split must then be whole
        // BK blocks (the view's K extent is all of k).
        let va = view(a0, [m, k], [sam, sak]);
        let vb = view(b0, [k, n], [sbk, sbn]);
        for k0 in (k_lo..k_hi).step_by(BK) {
            let at = load_block(va, [pid_m * BM, k0], [BM, BK]);
            let bt = load_block(vb, [k0, pid_n * BN], [BK, BN]);
            if TF32 {
                acc = dot_tf32(at, bt, acc);
            } else {
                acc = dot(at, bt, acc);
            }
        }
    } else {
        for k0 in (k_lo..k_hi).step_by(BK) {
            let kk = k0 + rk;
            let k_ok = kk < k_hi;
            let at = load(a0 + a_rows + expand_dims((kk as i64) * sak, 0), m_ok & expand_dims(k_ok, 0), 0.0);
            let bt = load(b0 + expand_dims((kk as i64) * sbk, 1) + b_cols, expand_dims(k_ok, 1) & n_ok, 0.0);
            if TF32 {
                acc = dot_tf32(at, bt, acc);
            } else {
                acc = dot(at, bt, acc);
            }
        }
    }
    let mut out = acc * alpha;
    if BIAS == 1 {
        out = out + expand_dims(load(bias + rn, rn < n, 0.0) as f32, 0);
    }
    if BIAS == 2 {
        out = out + expand_dims(load(bias + rm, rm < m, 0.0) as f32, 1);
    }
    out = activation(out, ACT);
    let c_ptrs = c + batch * scb + (split as i64) * scs + expand_dims((rm as i64) * scm, 1) + expand_dims((rn as i64) * scn, 0);
    store(c_ptrs, out as U, m_ok & n_ok);
}

/// Split-K's second pass: `C[b][row, cols] = act(alpha · Σ_s W[s][b][row,
/// cols] + bias)` over the `split` f32 partials (summed in split order),
/// one `BLOCK`-wide run of a row per program; grid = (rows × column blocks,
/// batch). The workspace is `[split][batch][m][n]`, contiguous.
#[kernel]
#[allow(clippy::too_many_arguments)]
pub fn gemm_splitk_reduce<U: Float, const BLOCK: i32, const ACT: i32, const HAS_BIAS: bool>(
    ws: Ptr<f32>,
    c: Ptr<U>,
    bias: Ptr<U>,
    m: i32,
    n: i32,
    split: i32,
    scm: i64,
    scb: i64,
    alpha: f32,
) {
    let blocks = cdiv(n, BLOCK);
    let row = (program_id(0) / blocks) as i64;
    let cols = (program_id(0) % blocks) * BLOCK + arange(0, BLOCK);
    let batch = program_id(1) as i64;
    let ok = cols < n;
    let mn = (m as i64) * (n as i64);
    let w = ws + batch * mn + row * (n as i64) + cols;
    let mut acc = zeros([BLOCK], f32);
    for s in 0..split {
        acc = acc + load(w + (s as i64) * (num_programs(1) as i64) * mn, ok, 0.0);
    }
    // the same epilogue as `gemm_kernel`'s
    let mut out = acc * alpha;
    if HAS_BIAS {
        out = out + (load(bias + cols, ok, 0.0) as f32);
    }
    out = activation(out, ACT);
    store(c + batch * scb + row * scm + cols, out as U, ok);
}

/// `y[b][j, i] = round_tf32(x[b][i, j])` for `batch` row-major `rows × cols`
/// matrices packed one after the other (grid: (tiles, batch)), a `B × B`
/// tile per program: a tf32 GEMM operand brought into the K-major layout
/// `wgmma` reads (rounded on the way: the copy is read as it is where the
/// bulk copies do not round). The tile is read and written along rows;
/// `trans` moves it through shared memory in between.
#[kernel]
pub fn round_tf32_transpose_kernel<const B: i32>(x: Ptr<f32>, y: Ptr<f32>, rows: i32, cols: i32) {
    let tiles_c = cdiv(cols, B);
    let r = (program_id(0) / tiles_c) * B + arange(0, B);
    let c = (program_id(0) % tiles_c) * B + arange(0, B);
    let base = (program_id(1) as i64) * (rows as i64) * (cols as i64);
    let t = load(x + base + expand_dims((r as i64) * (cols as i64), 1) + expand_dims(c, 0), expand_dims(r < rows, 1) & expand_dims(c < cols, 0), 0.0);
    let ok_t = expand_dims(c < cols, 1) & expand_dims(r < rows, 0);
    store(y + base + expand_dims((c as i64) * (rows as i64), 1) + expand_dims(r, 0), trans(round_tf32(t)), ok_t);
}
