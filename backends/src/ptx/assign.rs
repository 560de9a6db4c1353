//! Layout assignment: which distributed layout each tile shape of a kernel
//! uses.
//!
//! Takes a specialized kernel, its warp count and the vector width of its
//! memory accesses. Produces a [`Plan`]: by default every shape gets the
//! canonical [`Blocked`] layout; a shape that is the result of `dot`s that
//! can run on tensor cores (`mma.sync`: f16/bf16 inputs, or f32 inputs with
//! tf32 precision; every dimension a multiple of the instruction tile times
//! the warp grid) gets the *mma accumulator layout* instead — a `Blocked`
//! layout with 2 consecutive columns per thread, 8×4 lanes and the warps in
//! a grid, which is exactly the register layout of the `m16n8` accumulator
//! fragments when rows are paired `(r, r + 8·warps_m)`.
//!
//! On sm_90 (`wgmma` on), f16/bf16 dots whose shapes fit (see
//! [`wgmma_grid`]) get the same accumulator layout with every warp along M
//! (`wn = 1`), marked for Hopper's warpgroup MMAs; the emitter permutes A's
//! rows in shared memory so that `wgmma` writes exactly these registers.
//!
//! Guarantees: the layout is a function of the shape alone, so every tile of
//! a shape shares it and elementwise ops, loop-carried values and the
//! epilogue of a GEMM never move data — the accumulator stays in the
//! registers `mma` writes across the whole K loop. Ops that need another
//! layout (loads of the dot operands, reductions) convert as before, and
//! index arithmetic feeding broadcasts is recomputed in place
//! (rematerialization, in the emitter) rather than converted.
//!
//! Why per shape and not per value: it keeps the emitter's invariant that
//! operands of elementwise ops share the result's layout without inserting
//! conversions; the cost is that other tiles of an accumulator's shape (the
//! output pointers and masks of the epilogue) use it too, which only narrows
//! their vector width to 2.

use super::layout::Blocked;
use ferrotile_ir::*;
use std::collections::HashMap;

/// Warp grid of an mma accumulator: `wm × wn` warps, each covering rows
/// `{8·wm·i + 8·warp_m + (0..8)}` and columns `{8·wn·j + 8·warp_n + (0..8)}`.
/// `wgmma`: the dot runs as Hopper warpgroup MMAs (`wgmma.mma_async`, sm_90a)
/// instead of per-warp `mma.sync`; then `wn == 1` and `wm` is the warp count
/// (a multiple of 4: whole warpgroups), and the same accumulator layout is
/// what `wgmma` writes once the rows of A are permuted in shared memory (see
/// `emit::dot_wgmma`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MmaGrid {
    pub wm: u32,
    pub wn: u32,
    pub wgmma: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Plan {
    mma: HashMap<Vec<u32>, MmaGrid>,
    /// Why a `dot` stays on the FMA path: (source line, reason), for
    /// `FERROTILE_EXPLAIN=1`.
    pub fma_reasons: Vec<(u32, String)>,
    /// Why a tensor-core `dot` runs on `mma.sync` although `wgmma` was
    /// asked for (sm_90): (source line, reason).
    pub no_wgmma_reasons: Vec<(u32, String)>,
}

impl Plan {
    /// The layout of tiles of `shape`.
    pub fn layout(&self, shape: &[u32], num_warps: u32, vec: u32) -> Blocked {
        match self.mma.get(shape) {
            Some(g) => Blocked::mma_acc(shape, g.wm, g.wn),
            None => Blocked::canonical(shape, num_warps, vec),
        }
    }

    /// The warp grid when tiles of `shape` use the mma accumulator layout.
    pub fn mma(&self, shape: &[u32]) -> Option<MmaGrid> {
        self.mma.get(shape).copied()
    }
}

/// The instruction's K for a dot of these operand types, if tensor cores
/// can run it: 16 for f16/bf16 (m16n8k16), 8 for tf32 (m16n8k8).
pub fn mma_k(a: DType, precision: DotPrecision) -> Option<u32> {
    match (a, precision) {
        (DType::F16 | DType::BF16, _) => Some(16),
        (DType::F32, DotPrecision::Tf32) => Some(8),
        _ => None,
    }
}

/// Split `num_warps` into a `wm × wn` grid over an `m × n` accumulator so
/// that each warp owns whole `16 × 8` tiles, favouring square warp tiles.
pub fn warp_grid(m: u32, n: u32, num_warps: u32) -> Option<MmaGrid> {
    let (mut wm, mut wn) = (1u32, 1u32);
    while wm * wn < num_warps {
        let can_m = m % (16 * wm * 2) == 0;
        let can_n = n % (8 * wn * 2) == 0;
        if can_m && (!can_n || m / wm >= n / wn) {
            wm *= 2;
        } else if can_n {
            wn *= 2;
        } else {
            return None;
        }
    }
    (m % (16 * wm) == 0 && n % (8 * wn) == 0).then_some(MmaGrid { wm, wn, wgmma: false })
}

/// The warpgroup grid of a Hopper `wgmma` dot, if `m × k · k × n` (f16/bf16)
/// fits its shared-memory operand layout: every warp along M (whole
/// warpgroups, 16 rows per warp per instruction pair), K in whole 128-byte
/// swizzle atoms (64 elements) for A, N in whole 64-column atoms for B, at
/// most 256 columns per instruction (wider N splits into 256-column
/// instructions).
pub fn wgmma_grid(m: u32, n: u32, k: u32, num_warps: u32) -> Option<MmaGrid> {
    wgmma_misfit(m, n, k, num_warps).is_none().then_some(MmaGrid { wm: num_warps, wn: 1, wgmma: true })
}

/// Why an `m × k · k × n` dot at `num_warps` warps cannot take `wgmma`
/// (`None`: it can).
pub fn wgmma_misfit(m: u32, n: u32, k: u32, num_warps: u32) -> Option<String> {
    if num_warps % 4 != 0 {
        Some(format!("{num_warps} warps are not whole warpgroups (a multiple of 4)"))
    } else if m % (16 * num_warps) != 0 {
        Some(format!("M = {m} is not a multiple of 16 rows × {num_warps} warps"))
    } else if k % 64 != 0 {
        Some(format!("K = {k} is not a multiple of 64 (one 128-byte swizzle atom of A)"))
    } else if n % 64 != 0 || (n > 256 && n % 256 != 0) {
        Some(format!("N = {n} is not a multiple of 64 up to 256, or of 256 above"))
    } else {
        None
    }
}

/// Assign layouts for `k` (see the module documentation). `enable_mma`
/// false keeps every shape canonical (the FMA path for every `dot`);
/// `wgmma` lets f16/bf16 dots whose shapes fit take Hopper's warpgroup MMAs.
pub fn plan(k: &Kernel, num_warps: u32, enable_mma: bool, wgmma: bool) -> Plan {
    let mut mma: HashMap<Vec<u32>, Option<MmaGrid>> = HashMap::new();
    let mut lines: HashMap<Vec<u32>, Vec<u32>> = HashMap::new();
    let mut fma_reasons = vec![];
    let mut no_wgmma_reasons = vec![];
    k.walk(&mut |op| {
        let OpKind::Dot { a, b, precision, .. } = &op.kind else { return };
        let dims = |v: V| -> Option<Vec<u32>> { k.ty(v).shape().iter().map(|d| d.known().map(|x| x as u32)).collect() };
        let (Some(sa), Some(sb)) = (dims(*a), dims(*b)) else { return };
        let out = vec![sa[0], sb[1]];
        let (da, db) = (k.ty(*a).elem().map(|e| e.dtype()), k.ty(*b).elem().map(|e| e.dtype()));
        let why = if !enable_mma {
            Some("tensor cores are off (FERROTILE_MMA=0)".to_string())
        } else if da != db {
            Some(format!("operands of different dtypes ({da:?}, {db:?})"))
        } else {
            match da.and_then(|d| mma_k(d, *precision).map(|kk| (d, kk))) {
                None => Some(format!("{} inputs with {precision:?} precision: tensor cores take f16/bf16, or f32 through `dot_tf32`", da.map_or("?".into(), |d| d.to_string()))),
                Some((_, kk)) if sa[1] % kk != 0 => Some(format!("K = {} is not a multiple of the instruction's {kk}", sa[1])),
                Some(_) => match warp_grid(out[0], out[1], num_warps) {
                    None => Some(format!("a {}×{} result cannot give each of {num_warps} warps whole 16×8 tiles", out[0], out[1])),
                    Some(_) => None,
                },
            }
        };
        let grid = match why {
            Some(_) => None,
            None if wgmma && matches!(da, Some(DType::F16 | DType::BF16)) => match wgmma_misfit(out[0], out[1], sa[1], num_warps) {
                None => wgmma_grid(out[0], out[1], sa[1], num_warps),
                Some(r) => {
                    no_wgmma_reasons.push((op.loc.line, format!("{r}; runs on mma.sync")));
                    warp_grid(out[0], out[1], num_warps)
                }
            },
            None if wgmma => {
                no_wgmma_reasons.push((op.loc.line, "tf32 runs on mma.sync (wgmma's tf32 needs a K-major B, not staged yet)".into()));
                warp_grid(out[0], out[1], num_warps)
            }
            None => warp_grid(out[0], out[1], num_warps),
        };
        if let Some(w) = why {
            fma_reasons.push((op.loc.line, w));
        }
        lines.entry(out.clone()).or_default().push(op.loc.line);
        let e = mma.entry(out).or_insert(grid);
        if *e != grid {
            *e = None; // dots of one shape must agree on the layout
        }
    });
    for (shape, g) in &mma {
        if g.is_none() {
            for &l in &lines[shape] {
                if !fma_reasons.iter().any(|(x, _)| *x == l) {
                    fma_reasons.push((l, format!("another dot with a {}×{} result stays on the FMA path, and dots of one shape share a layout", shape[0], shape[1])));
                }
            }
        }
    }
    fma_reasons.sort();
    no_wgmma_reasons.sort();
    Plan { mma: mma.into_iter().filter_map(|(s, g)| Some((s, g?))).collect(), fma_reasons, no_wgmma_reasons }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warp_grids() {
        let g = |wm, wn| Some(MmaGrid { wm, wn, wgmma: false });
        assert_eq!(warp_grid(128, 128, 4), g(2, 2));
        assert_eq!(warp_grid(64, 64, 4), g(2, 2));
        assert_eq!(warp_grid(16, 64, 4), g(1, 4));
        assert_eq!(warp_grid(128, 256, 8), g(2, 4));
        assert_eq!(warp_grid(16, 8, 4), None);
        assert_eq!(warp_grid(16, 16, 1), g(1, 1));
        let w = |wm| Some(MmaGrid { wm, wn: 1, wgmma: true });
        assert_eq!(wgmma_grid(128, 256, 64, 8), w(8));
        assert_eq!(wgmma_grid(128, 128, 64, 4), w(4));
        assert_eq!(wgmma_grid(64, 512, 128, 4), w(4));
        assert_eq!(wgmma_grid(128, 128, 32, 4), None); // K not a whole swizzle atom
        assert_eq!(wgmma_grid(64, 128, 64, 8), None); // 8 warps need 128 rows
        assert_eq!(wgmma_grid(64, 128, 64, 2), None); // not a warpgroup
        // FERROTILE_EXPLAIN's words for the misfits
        assert!(wgmma_misfit(128, 128, 32, 4).unwrap().contains("K = 32"));
        assert!(wgmma_misfit(64, 128, 64, 8).unwrap().contains("M = 64"));
        assert!(wgmma_misfit(64, 128, 64, 2).unwrap().contains("warpgroups"));
        assert!(wgmma_misfit(64, 96, 64, 4).unwrap().contains("N = 96"));
        assert_eq!(wgmma_misfit(128, 256, 64, 8), None);
    }
}
