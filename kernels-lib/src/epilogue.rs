//! Tile functions (`#[func]`, inlined at each call) of the library's fused
//! epilogues, for its GEMM kernels and for users' own kernels:
//! `use ferrotile_kernels::epilogue::{activation, gelu};`.

use ferrotile::prelude::*;

/// Exact GELU of `x` (f32): `x/2 · (1 + erf(x/√2))`.
#[func]
pub fn gelu(x: Tile) -> Tile {
    0.5 * x * (1.0 + erf(x * 0.7071067811865476))
}

/// The activation `act` of `x` (f32), as [`crate::gemm::Activation::code`]
/// numbers them: 0 none, 1 ReLU, 2 exact GELU. `act` is a constexpr at
/// every call in the library, so only the branch taken is built (a
/// run-time `act` works too: then it is a branch).
#[func]
pub fn activation(x: Tile, act: Tile) -> Tile {
    let mut y = x;
    if act == 1 {
        y = maximum(y, 0.0);
    }
    if act == 2 {
        y = gelu(y);
    }
    y
}
