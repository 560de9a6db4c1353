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
    wgmma_a_with(have, [m, k, wm], 16, &|ks, c| ks * 16 + c)
}

/// The A fragments of [`wgmma_a`] and [`wgmma_a_interleaved`]: K a
/// multiple of `k_mul` (and of 16), the tile's column of fragment column
/// `c` (0..16) of k-step `ks` given by `col`.
fn wgmma_a_with(have: &Blocked, [m, k, wm]: [u32; 3], k_mul: u32, col: &dyn Fn(u32, u32) -> u32) -> Option<Vec<usize>> {
    if have.shape != [m, k] || !wm.is_multiple_of(4) || !m.is_multiple_of(16 * wm) || !k.is_multiple_of(16) || !k.is_multiple_of(k_mul) {
        return None;
    }
    let (groups, tcount) = (wm / 4, m / (16 * wm));
    let need = |tid: u32, f: usize| -> u32 {
        let f = f as u32;
        let (ks, t, s) = (f / (tcount * 8), (f / 8) % tcount, f % 8);
        let (w, lane) = (tid / 32, tid % 32);
        let row = (t * groups + w / 4) * 64 + 16 * (w % 4) + lane / 4 + 8 * ((s / 2) % 2);
        row * k + col(ks, 2 * (lane % 4) + (s % 2) + 8 * (s / 4))
    };
    remap(have, wm * 32, (k / 16 * tcount * 8) as usize, &need)
}

/// Registers feeding `wgmma`'s register-A fragments with K interleaved
/// ([`interleaved_k`]) for an `m × k` 16-bit tile over `wm` warps, held in
/// layout `have` with runs of `run` along K ([`Blocked::wgmma_a_operand`]):
/// entries as in [`wgmma_a`]. The instructions then take K in the order
/// [`interleaved_k`] gives, so B's rows must be in that order too: its
/// ring slot row `p` holds the tile's row [`interleaved_k`]`(p)` (the
/// copies place row `i` at [`interleaved_row`]`(i)`).
pub fn wgmma_a_interleaved(have: &Blocked, m: u32, k: u32, wm: u32, run: u32) -> Option<Vec<usize>> {
    if run < 4 {
        return None;
    }
    wgmma_a_with(have, [m, k, wm], 4 * run, &|ks, c| interleaved_k(run, ks, c))
}

/// The inverse of [`interleaved_k`]: the position, in the instructions'
/// K order, of the tile's row (or column) `i` — where a K-interleaved
/// dot's B slot holds B's row `i`. Bits of `i`, low to high: `e` (1), `h`
/// (1), `s` (`log2(run/4)`), `j` (2), the block; of the position: `e`,
/// `j`, `h`, `s`, the block.
pub fn interleaved_row(run: u32, i: u32) -> u32 {
    let sb = (run / 4).trailing_zeros();
    let (e, h, s, j) = (i & 1, (i >> 1) & 1, (i >> 2) & ((1 << sb) - 1), (i >> (2 + sb)) & 3);
    (i & !(4 * run - 1)) | e | (j << 1) | (h << 3) | (s << 4)
}

/// Registers feeding `mma.sync.m16n8k16`'s A fragments for an `m × k`
/// 16-bit tile over a `wm × wn` warp grid (warp `w` = `warp_m · wn +
/// warp_n`), held in layout `have`: entry `((t · ksteps + ks) · 8 + s)` is
/// slot `s` of M tile `t`, k-step `ks`. M tile `t` of warp row `warp_m`
/// holds rows `lane/4 + 8·warp_m + 16·wm·t` and those `+ 8·wm` (the row
/// pairing of [`Blocked::mma_acc`], which the accumulator uses too).
pub fn mma_a(have: &Blocked, m: u32, k: u32, wm: u32, wn: u32) -> Option<Vec<usize>> {
    mma_a_with(have, [m, k, wm, wn], 16, &|ks, c| ks * 16 + c)
}

/// The A fragments of [`mma_a`] and [`mma_a_interleaved`]: K a multiple of
/// `k_mul`, the tile's column of fragment column `c` (0..16) of k-step
/// `ks` given by `col`.
fn mma_a_with(have: &Blocked, [m, k, wm, wn]: [u32; 4], k_mul: u32, col: &dyn Fn(u32, u32) -> u32) -> Option<Vec<usize>> {
    if have.shape != [m, k] || !m.is_multiple_of(16 * wm) || !k.is_multiple_of(k_mul) {
        return None;
    }
    let (ksteps, tcount) = (k / 16, m / (16 * wm));
    let need = |tid: u32, f: usize| -> u32 {
        let f = f as u32;
        let (t, ks, s) = (f / (ksteps * 8), (f / 8) % ksteps, f % 8);
        let (w, lane) = (tid / 32, tid % 32);
        let warp_m = w / wn;
        let row = lane / 4 + 8 * warp_m + 16 * wm * t + 8 * wm * ((s / 2) % 2);
        row * k + col(ks, 2 * (lane % 4) + (s % 2) + 8 * (s / 4))
    };
    remap(have, wm * wn * 32, (tcount * ksteps * 8) as usize, &need)
}

/// The run of consecutive K each thread holds in a K-interleaved operand
/// of depth `k` ([`interleaved_k`]): 32 where K allows (a 16-byte vector
/// of a K-contiguous 16-bit operand is 8 of them; 32 K of 4-bit weights
/// packed along K are four consecutive words, one 16-byte load), else the
/// largest power of two with `4·run` dividing `k`, at least 8. None when
/// K is not a multiple of 32.
pub fn operand_run(k: u32) -> Option<u32> {
    if !k.is_multiple_of(32) {
        return None;
    }
    [32, 16, 8].into_iter().find(|r| k.is_multiple_of(4 * r))
}

/// The row of a K-*interleaved* `m16n8k16` fragment that holds column
/// `col` (0..16) of k-step `ks`, for threads holding runs of `run`
/// consecutive K ([`operand_run`]): within each `4·run`-deep block `b`,
/// lane `l%4 = j` of the fragments reads `k = 4·run·b + run·j +
/// (0..run)` — step `(run/4)·b + s` takes `run·j + 4·s + {0,1}` at
/// columns `2·j + {0,1}` and `run·j + 4·s + 2 + {0,1}` at columns `2·j +
/// 8 + {0,1}`. A dot sums over K, so any order that A and B share gives
/// the same products; this one puts a thread's `run` consecutive K in its
/// own fragments, so operands held `run` along K per thread
/// ([`Blocked::mma_a_operand`], [`Blocked::mma_b_operand`]) feed the
/// tensor cores from registers, with no `ldmatrix` and no shared memory.
pub fn interleaved_k(run: u32, ks: u32, col: u32) -> u32 {
    let per = run / 4;
    let (b, s) = (ks / per, ks % per);
    let (j, e, h) = ((col % 8) / 2, col % 2, col / 8);
    4 * run * b + run * j + 4 * s + 2 * h + e
}

/// Registers feeding `mma.sync.m16n8k16`'s A fragments with K interleaved
/// ([`interleaved_k`]) for an `m × k` 16-bit tile over a `wm × wn` warp
/// grid, held in layout `have` with runs of `run` along K: entry `((t ·
/// ksteps + ks) · 8 + s)` is slot `s` of M tile `t`, k-step `ks` — rows
/// as in [`mma_a`].
pub fn mma_a_interleaved(have: &Blocked, m: u32, k: u32, wm: u32, wn: u32, run: u32) -> Option<Vec<usize>> {
    mma_a_with(have, [m, k, wm, wn], 4 * run, &|ks, c| interleaved_k(run, ks, c))
}

/// Registers feeding `mma.sync.m16n8k16`'s B fragments with K interleaved
/// ([`interleaved_k`]) for a `k × n` 16-bit tile over a `wm × wn` warp
/// grid, held in layout `have` with runs of `run` along K: entry `((j ·
/// ksteps + ks) · 4 + s)` is slot `s` (b0..b3) of N tile `j`, k-step
/// `ks`; N tile `j` of warp column `warp_n` is columns `8·warp_n + 8·wn·j
/// + (0..8)` (the accumulator's, [`Blocked::mma_acc`]), lane `l` reading
/// column `l/4`.
pub fn mma_b_interleaved(have: &Blocked, k: u32, n: u32, wm: u32, wn: u32, run: u32) -> Option<Vec<usize>> {
    if have.shape != [k, n] || !n.is_multiple_of(8 * wn) || !k.is_multiple_of(4 * run) {
        return None;
    }
    let (ksteps, tcount) = (k / 16, n / (8 * wn));
    let need = |tid: u32, f: usize| -> u32 {
        let f = f as u32;
        let (j, ks, s) = (f / (ksteps * 4), (f / 4) % ksteps, f % 4);
        let (w, lane) = (tid / 32, tid % 32);
        let warp_n = w % wn;
        let col = lane / 4 + 8 * warp_n + 8 * wn * j;
        let row = interleaved_k(run, ks, 2 * (lane % 4) + (s % 2) + 8 * (s / 2));
        row * n + col
    };
    remap(have, wm * wn * 32, (tcount * ksteps * 4) as usize, &need)
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

    /// The K-interleaved `wgmma` A operand: its layout's registers are the
    /// register-A fragments once K is read in [`interleaved_k`]'s order,
    /// each register feeding one slot, and [`interleaved_row`] is that
    /// order's inverse (where B's rows go).
    #[test]
    fn interleaved_wgmma_a_operands() {
        for (m, k, wm, run) in [(128, 64, 8, 8), (64, 64, 4, 8), (64, 128, 4, 8), (128, 16, 4, 4), (256, 32, 8, 8), (64, 64, 4, 16)] {
            let l = Blocked::wgmma_a_operand(&[m, k], wm, run);
            assert!(!l.any_replication(), "{m}x{k}");
            let map = wgmma_a_interleaved(&l, m, k, wm, run).unwrap_or_else(|| panic!("{m}x{k} over {wm} warps, run {run}"));
            assert_eq!(map.len() as u32, m * k / (wm * 32));
            let mut seen = map.clone();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), map.len(), "every register feeds exactly one slot");
            // the natural order does not fit it, nor it the accumulator
            assert!(wgmma_a(&l, m, k, wm).is_none());
            assert!(wgmma_a_interleaved(&Blocked::wgmma_acc(&[m, k], wm), m, k, wm, run).is_none());
            for i in 0..k {
                let p = interleaved_row(run, i);
                assert_eq!(interleaved_k(run, p / 16, p % 16), i, "run {run} row {i}");
            }
        }
        // thread 0 holds columns 0..8 of rows 0 and 8: slots of (ks 0) are
        // columns 0, 1 (row 0), 0, 1 (row 8), 2, 3, 2, 3 — step 1 takes 4..8
        let l = Blocked::wgmma_a_operand(&[64, 32], 4, 8);
        let map = wgmma_a_interleaved(&l, 64, 32, 4, 8).unwrap();
        let src = ThreadLayout { bl: l.clone(), reg_offsets: l.reg_offsets(), thread: vec![] };
        let at: Vec<Vec<u32>> = map.iter().map(|&r| src.coords_of(0, r)).collect();
        assert_eq!(&at[..8], &[vec![0, 0], vec![0, 1], vec![8, 0], vec![8, 1], vec![0, 2], vec![0, 3], vec![8, 2], vec![8, 3]]);
        assert_eq!(&at[8..10], &[vec![0, 4], vec![0, 5]]);
    }

    #[test]
    fn interleaved_k_is_a_permutation_of_each_block() {
        for run in [8, 16, 32] {
            let per = run / 4;
            for b in 0..3 {
                let mut seen: Vec<u32> = (0..per).flat_map(|s| (0..16).map(move |c| interleaved_k(run, per * b + s, c))).collect();
                seen.sort_unstable();
                assert_eq!(seen, (4 * run * b..4 * run * (b + 1)).collect::<Vec<_>>(), "run {run}");
            }
            // lane j of a quad reads k = run·j .. run·(j + 1) of the block, pairs in order
            for j in 0..4 {
                let mut ks: Vec<u32> = (0..per).flat_map(|s| [0, 1, 8, 9].map(|c| interleaved_k(run, s, 2 * j + c))).collect();
                ks.sort_unstable();
                assert_eq!(ks, (run * j..run * (j + 1)).collect::<Vec<_>>(), "run {run}");
            }
        }
        // (the 32-deep blocks of runs of 8, as before)
        assert_eq!(interleaved_k(8, 3, 9), 32 + 4 + 2 + 1);
        assert_eq!(operand_run(64), Some(16));
        assert_eq!(operand_run(32), Some(8));
        assert_eq!(operand_run(256), Some(32));
        assert_eq!(operand_run(48), None);
    }

    #[test]
    fn operand_layouts_feed_interleaved_fragments() {
        for (m, n, k, wm, wn) in
            [(16, 128, 64, 1, 4), (16, 64, 128, 1, 4), (64, 64, 64, 2, 2), (32, 256, 32, 2, 4), (16, 32, 32, 1, 1), (128, 128, 64, 2, 4), (16, 128, 256, 1, 4)]
        {
            let run = operand_run(k).unwrap();
            let la = Blocked::mma_a_operand(&[m, k], wm, wn, run);
            let lb = Blocked::mma_b_operand(&[k, n], wm, wn, run);
            let ma = mma_a_interleaved(&la, m, k, wm, wn, run).unwrap_or_else(|| panic!("A {m}x{k} {wm}x{wn}"));
            let mb = mma_b_interleaved(&lb, k, n, wm, wn, run).unwrap_or_else(|| panic!("B {k}x{n} {wm}x{wn}"));
            // the B operand's registers run along K: a packed 16-bit op's
            // pair (registers 2i, 2i + 1) is one column's consecutive K —
            // the pair a B fragment register holds
            let ob = lb.reg_offsets();
            for p in ob.chunks(2) {
                assert_eq!((p[1][0], p[1][1]), (p[0][0] + 1, p[0][1]), "{m}x{n}x{k}: B pair {p:?}");
            }
            // every register feeds exactly one slot
            for (map, regs) in [(&ma, la.regs()), (&mb, lb.regs())] {
                assert_eq!(map.len(), regs);
                let mut s = map.clone();
                s.sort_unstable();
                s.dedup();
                assert_eq!(s.len(), regs);
            }
            // the product over the slots is the dot product: for thread 0's
            // first tiles, slot (ks, column) of A and of B name the same k
            let sa = ThreadLayout { bl: la.clone(), reg_offsets: la.reg_offsets(), thread: vec![] };
            let sb = ThreadLayout { bl: lb.clone(), reg_offsets: lb.reg_offsets(), thread: vec![] };
            for tid in [0, 5, 33 % (32 * wm * wn), 32 * wm * wn - 1] {
                for ks in 0..k / 16 {
                    for s in 0..4usize {
                        // A slot (row half 0) 2·(s/2)·2 + s%2 and B slot s read the same column
                        let a_slot = (ks as usize) * 8 + (s / 2) * 4 + s % 2;
                        let b_slot = (ks as usize) * 4 + s;
                        assert_eq!(sa.coords_of(tid, ma[a_slot])[1], sb.coords_of(tid, mb[b_slot])[0], "{m}x{n}x{k} tid {tid} ks {ks} s {s}");
                    }
                }
            }
        }
        // the canonical layout of a loaded tile does not qualify
        assert!(mma_b_interleaved(&Blocked::canonical(&[64, 128], 4, 8), 64, 128, 1, 4, 16).is_none());
        // nor does K = 16 (one step: no 32-deep block to interleave)
        assert!(mma_a_interleaved(&Blocked::canonical(&[16, 16], 1, 8), 16, 16, 1, 1, 8).is_none());
        // a layout of runs of 8 does not feed fragments interleaved by 16
        let l8 = Blocked::mma_b_operand(&[64, 128], 1, 4, 8);
        assert!(mma_b_interleaved(&l8, 64, 128, 1, 4, 16).is_none());
    }
}
