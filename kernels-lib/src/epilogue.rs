//! Tile functions the library's GEMM kernels share (`#[func]`, inlined at
//! each call): the activations of the fused epilogues.

use ferrotile::prelude::*;

/// The epilogue activation `act` of `x` (f32): 0 none, 1 ReLU, 2 exact
/// GELU `x/2 · (1 + erf(x/√2))`. `act` is a constexpr at every call, so
/// only the branch taken is built.
#[func]
pub fn activation(x: Tile, act: Tile) -> Tile {
    let mut y = x;
    if act == 1 {
        y = maximum(y, 0.0);
    }
    if act == 2 {
        y = 0.5 * y * (1.0 + erf(y * 0.7071067811865476));
    }
    y
}
