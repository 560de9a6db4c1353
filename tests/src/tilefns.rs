//! Tile functions (`#[func]`) shared by the conformance cases in
//! `conformance/funcs.rs`: written in another module than the kernels that
//! call them, one of them calling two others that its callers never name
//! (their bodies come along), one generic over a dtype, one returning a
//! tuple, one with a loop and a constant passed as an argument, one that
//! only stores.

use ferrotile::prelude::*;

/// The standard normal CDF, Φ(x) = (1 + erf(x / √2)) / 2.
#[func]
fn phi(x: Tile) -> Tile {
    0.5 * (1.0 + erf(x * 0.7071067811865476))
}

/// Exact GELU: x · Φ(x).
#[func]
pub fn gelu(x: Tile) -> Tile {
    x * phi(x)
}

/// SiLU: x · σ(x), spelled out.
#[func]
fn silu(x: Tile) -> Tile {
    x / (1.0 + exp(-x))
}

/// The GEMM epilogue: `acc + bias` broadcast over the rows, then the
/// activation `act` (0 none, 1 ReLU, 2 GELU, 3 SiLU); `act` is a constant
/// at the call, so the branches not taken are never built.
#[func]
pub fn bias_act(acc: Tile, bias: Tile, act: Tile) -> Tile {
    let mut y = acc + expand_dims(bias, 0);
    if act == 1 {
        y = maximum(y, 0.0);
    }
    if act == 2 {
        y = gelu(y);
    }
    if act == 3 {
        y = silu(y);
    }
    y
}

/// A `[rows, cols]` tile of pointers into a row-major matrix with row
/// stride `stride`, and the mask of the elements inside `m × n`.
#[func]
pub fn tile_at(base: Tile, rows: Tile, cols: Tile, stride: Tile, m: Tile, n: Tile) -> (Tile, Tile) {
    let ptrs = base + expand_dims((rows as i64) * (stride as i64), 1) + expand_dims(cols as i64, 0);
    let mask = expand_dims(rows < m, 1) & expand_dims(cols < n, 0);
    (ptrs, mask)
}

/// Round to the output dtype `U` (through f32).
#[func]
pub fn to_out<U: Float>(x: Tile) -> Tile {
    (x as f32).to(U)
}

/// One step of an online log-sum-exp over a `[R, C]` chunk: the running
/// maximum `m` and sum `l` of each row, updated with `x`.
#[func]
pub fn lse_step(m: Tile, l: Tile, x: Tile) -> (Tile, Tile) {
    let m_new = maximum(m, max(x, axis = 1));
    let l_new = l * exp(m - m_new) + sum(exp(x - expand_dims(m_new, 1)), axis = 1);
    (m_new, l_new)
}

/// `Σ_k a[k] · b[k]` over `k < n`, `block` elements at a time (`block` a
/// constant at the call).
#[func]
pub fn dot_1d(a: Tile, b: Tile, n: Tile, block: Tile) -> Tile {
    let mut acc = zeros([block], f32);
    for k0 in (0..n).step_by(block) {
        let k = k0 + arange(0, block);
        acc += load(a + k, k < n, 0.0) * load(b + k, k < n, 0.0);
    }
    sum(acc, axis = 0)
}

/// Store `v` at `ptrs` where `mask` holds.
#[func]
pub fn put(ptrs: Tile, v: Tile, mask: Tile) {
    store(ptrs, v, mask);
}

/// Segment `s` of a ragged batch: its rows `cu[s]..cu[s+1]` of a
/// `[rows, width]` matrix with row stride `stride`, as a view, and how many
/// rows it has — a function that returns a view (built at an offset it
/// loads) next to a scalar.
#[func]
pub fn segment(base: Tile, cu: Tile, s: Tile, stride: Tile, width: Tile) -> (Tile, Tile) {
    let r0 = load(cu + s);
    let n = load(cu + s + 1) - r0;
    (view(base + (r0 as i64) * stride, [n, width], [stride, 1]), n)
}

/// `Σ_i P[:, i] · v[i, :]` over the `n` rows of the view `v`, `bk` at a
/// time, with the fixed pattern `P[m, i] = (m + 2i) mod 5 − 2` in the
/// dtype `U` — a function that takes a view.
#[func]
pub fn pattern_dot<U: Float>(v: Tile, n: Tile, bm: Tile, bk: Tile, width: Tile) -> Tile {
    let m = arange(0, bm);
    let mut acc = zeros([bm, width], f32);
    for i in (0..n).step_by(bk) {
        let c = i + arange(0, bk);
        let p = (expand_dims(m, 1) + expand_dims(c, 0) * 2) % 5 - 2;
        acc = dot(p.to(U), load_block(v, [i, 0], [bk, width]), acc);
    }
    acc
}
