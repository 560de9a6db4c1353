//! Register operands: whether a tile already held in registers can be a
//! tensor-core instruction's A operand as it is, and which register feeds
//! each fragment slot.
//!
//! Takes the layout a computed tile is held in (any [`Blocked`]: its
//! shape's default, or a per-value layout of [`crate::plan::slices`]), the
//! dot's shape and warp grid. Produces, for every fragment slot of every
//! instruction the dot issues, the index of the tile's register that holds
//! that element *in the thread that needs it* — or `None` when some slot's
//! element lives in another thread (the tile then goes through shared
//! memory, as before).
//!
//! The slots are those of the 16-bit A fragment of `wgmma`'s register
//! form (`m64nNk16`: warp `w % 4` of a warpgroup owns 16 rows; lane `l`
//! holds rows `l/4` and `l/4 + 8`, columns `2·(l%4) + {0,1}` and those
//! `+ 8`, in the order a0..a7 of the PTX ISA) and of `mma.sync`'s
//! `m16n8k16` A fragment (the same pattern over 16 rows of one warp).
//!
//! Why this works for attention's `P` (and any accumulator cast and fed to
//! the next dot): an accumulator's columns `2·(l%4) + {0,1} + 8·j` are
//! exactly an A fragment's `k` slots, two `n8` accumulator tiles making
//! one `k16` step, so when the two dots split the rows over the warps the
//! same way, every element is already where the next instruction reads it
//! — no shared memory, no barrier. The check is general: it compares the
//! two thread→element maps ([`register_remap`]) instead of recognizing the
//! accumulator layout, so any layout that happens to match qualifies.

use crate::plan::layout::{register_remap, Blocked, ThreadLayout};

/// Registers feeding `wgmma`'s register-A fragments for an `m × k` 16-bit
/// tile over `wm` warps (whole warpgroups along M), held in layout `have`:
/// entry `((ks · tcount + t) · 8 + s)` is the register of slot `s` (a0..a7)
/// of the instruction for k-step `ks` (16 columns) and M tile `t` (of
/// `tcount = m / (16 · wm)`; instruction `t` of warpgroup `g` covers the
/// 64-row block `t · wm/4 + g`, as the shared-memory form does).
pub fn wgmma_a(have: &Blocked, m: u32, k: u32, wm: u32) -> Option<Vec<usize>> {
    if have.shape != [m, k] || !wm.is_multiple_of(4) || !m.is_multiple_of(16 * wm) || !k.is_multiple_of(16) {
        return None;
    }
    let (groups, tcount) = (wm / 4, m / (16 * wm));
    let need = |tid: u32, f: usize| -> u32 {
        let f = f as u32;
        let (ks, t, s) = (f / (tcount * 8), (f / 8) % tcount, f % 8);
        let (w, lane) = (tid / 32, tid % 32);
        let row = (t * groups + w / 4) * 64 + 16 * (w % 4) + lane / 4 + 8 * ((s / 2) % 2);
        let col = ks * 16 + 2 * (lane % 4) + (s % 2) + 8 * (s / 4);
        row * k + col
    };
    remap(have, wm * 32, (k / 16 * tcount * 8) as usize, &need)
}

/// Registers feeding `mma.sync.m16n8k16`'s A fragments for an `m × k`
/// 16-bit tile over a `wm × wn` warp grid (warp `w` = `warp_m · wn +
/// warp_n`), held in layout `have`: entry `((t · ksteps + ks) · 8 + s)` is
/// slot `s` of M tile `t`, k-step `ks`. M tile `t` of warp row `warp_m`
/// holds rows `lane/4 + 8·warp_m + 16·wm·t` and those `+ 8·wm` (the row
/// pairing of [`Blocked::mma_acc`], which the accumulator uses too).
pub fn mma_a(have: &Blocked, m: u32, k: u32, wm: u32, wn: u32) -> Option<Vec<usize>> {
    if have.shape != [m, k] || !m.is_multiple_of(16 * wm) || !k.is_multiple_of(16) {
        return None;
    }
    let (ksteps, tcount) = (k / 16, m / (16 * wm));
    let need = |tid: u32, f: usize| -> u32 {
        let f = f as u32;
        let (t, ks, s) = (f / (ksteps * 8), (f / 8) % ksteps, f % 8);
        let (w, lane) = (tid / 32, tid % 32);
        let warp_m = w / wn;
        let row = lane / 4 + 8 * warp_m + 16 * wm * t + 8 * wm * ((s / 2) % 2);
        let col = ks * 16 + 2 * (lane % 4) + (s % 2) + 8 * (s / 4);
        row * k + col
    };
    remap(have, wm * wn * 32, (tcount * ksteps * 8) as usize, &need)
}

fn remap(have: &Blocked, nt: u32, slots: usize, need: &dyn Fn(u32, usize) -> u32) -> Option<Vec<usize>> {
    let src = ThreadLayout { bl: have.clone(), reg_offsets: have.reg_offsets(), thread: vec![] };
    // (a layout with fewer threads than the dot's, or one that replicates
    // across warps the dot splits, cannot hold every fragment in place:
    // `register_remap` finds out)
    register_remap(nt, src.regs(), &|t, r| src.lin_of(t, r), slots, need)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_accumulator_is_the_next_dots_register_a() {
        // attention's P: the accumulator of S = Q·Kᵀ (m × n) is the A of
        // P·V (m × k with k = n), with the same warps along M
        for (m, k, wm) in [(128, 64, 8), (64, 64, 4), (128, 128, 4), (256, 64, 8)] {
            let acc = Blocked::wgmma_acc(&[m, k], wm);
            let map = wgmma_a(&acc, m, k, wm).unwrap_or_else(|| panic!("{m}x{k} over {wm} warps"));
            assert_eq!(map.len() as u32, m * k / (wm * 32), "one slot per element a thread holds");
            let mut seen = map.clone();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), map.len(), "every register feeds exactly one slot");
        }
        for (m, k, wm) in [(64, 64, 2), (128, 32, 4), (32, 64, 1)] {
            let acc = Blocked::mma_acc(&[m, k], wm, 1);
            let map = mma_a(&acc, m, k, wm, 1).unwrap_or_else(|| panic!("mma {m}x{k} over {wm} warps"));
            assert_eq!(map.len() as u32, m * k / (wm * 32));
        }
    }

    #[test]
    fn other_layouts_do_not_qualify() {
        // the canonical (row-major, vectorized) layout of a loaded tile
        assert!(wgmma_a(&Blocked::canonical(&[128, 64], 8, 8), 128, 64, 8).is_none());
        // an accumulator whose warps split the columns (mma grid 2 × 2):
        // each warp lacks half of its rows' k
        assert!(mma_a(&Blocked::mma_acc(&[64, 64], 2, 2), 64, 64, 2, 2).is_none());
        // the rows spread over the warps another way (wgmma's 16-row
        // warp stride against mma.sync's 8-row one)
        assert!(mma_a(&Blocked::wgmma_acc(&[128, 64], 4), 128, 64, 4, 1).is_none());
        // shape mismatch
        assert!(wgmma_a(&Blocked::wgmma_acc(&[128, 64], 8), 128, 32, 8).is_none());
    }

    #[test]
    fn slots_follow_the_fragment_pattern() {
        // thread 0 of the 64 × 16 tile over one warpgroup: slot s of
        // instruction (ks 0, t 0) holds rows 0/8, columns 0,1 / 8,9
        let acc = Blocked::wgmma_acc(&[64, 16], 4);
        let map = wgmma_a(&acc, 64, 16, 4).unwrap();
        let src = ThreadLayout { bl: acc.clone(), reg_offsets: acc.reg_offsets(), thread: vec![] };
        let at: Vec<Vec<u32>> = map.iter().map(|&r| src.coords_of(0, r)).collect();
        assert_eq!(at, vec![vec![0, 0], vec![0, 1], vec![8, 0], vec![8, 1], vec![0, 8], vec![0, 9], vec![8, 8], vec![8, 9]]);
        // lane 5 of warp 1: rows 16 + 1 (+ 8), columns 2, 3 (+ 8)
        let at: Vec<Vec<u32>> = map.iter().map(|&r| src.coords_of(37, r)).collect();
        assert_eq!(at[0], vec![17, 2]);
        assert_eq!(at[7], vec![25, 11]);
    }
}
