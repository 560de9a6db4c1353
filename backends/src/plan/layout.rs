//! Distributed layouts: which thread holds which element of a tile, in which
//! register.
//!
//! Takes a tile shape and the number of warps; produces a [`Blocked`] layout
//! (Triton's "blocked" encoding): each thread holds `spt[d]` contiguous
//! elements per dimension, `tpw[d]` lanes and `wpc[d]` warps tile each
//! dimension, and the pattern repeats `reps[d]` times to cover the shape.
//! When the layout covers more than the shape along a dimension, indices wrap
//! (`& (S-1)`; shapes are powers of two) and several threads hold copies of
//! the same element ("replication"); those copies are never stored twice and
//! never counted twice in a reduction (see `owner`).
//!
//! The register → element map is affine in (lane_d, warp_d), so the emitter
//! computes one per-thread offset per dimension once and adds per-register
//! constants: `index_d(r) = (reg_offsets[r][d] + thread_d) mod S_d` with
//! `thread_d = spt_d * lane_d + spt_d * warp_mul_d * warp_d` and the
//! repetition offsets `rep_off[d]` in `reg_offsets`. Every layout but one has
//! `warp_mul = tpw` and `rep_off[d][i] = i * coverage(d)`; Hopper's `wgmma`
//! accumulator ([`Blocked::wgmma_acc`]) spaces its warps 16 rows apart with
//! two 8-row repetitions inside, so its rows are exactly the rows `wgmma`
//! writes with A in shared memory in its natural order.
//!
//! Guarantees: for every shape and power-of-two warp count the layout covers
//! every element, registers of one thread along the last dimension come in
//! runs of `spt[last]` consecutive elements (what vector loads need), and all
//! tiles of the same shape share one default layout, so elementwise ops
//! never move data. A reduction's result may stay in the *slice* of its
//! source's layout ([`Blocked::slice`], [`Blocked::expand`]; which values do
//! is [`crate::plan::slices`]): a layout whose lane and warp fields do not
//! use every bit of the lane and warp ids — the threads that differ only in
//! the unused bits hold copies.

/// A blocked layout: per dimension, elements per thread, lanes, warps and repetitions, and how the
/// lane and warp ids map onto them (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Blocked {
    /// The tile's shape (powers of two).
    pub shape: Vec<u32>,
    /// Contiguous elements each thread holds along each dimension ("size per thread").
    pub spt: Vec<u32>,
    /// Lanes along each dimension ("threads per warp").
    pub tpw: Vec<u32>,
    /// Warps along each dimension ("warps per CTA").
    pub wpc: Vec<u32>,
    /// Repetitions of the pattern along each dimension, to cover the shape.
    pub reps: Vec<u32>,
    /// Bit offset of each dimension's lane field inside the lane id.
    pub lane_shift: Vec<u32>,
    /// Bit offset of each dimension's warp field inside the warp id.
    pub warp_shift: Vec<u32>,
    /// Distance between consecutive warps along each dimension, in units of
    /// `spt[d]` (`tpw[d]` but in the `wgmma` accumulator).
    pub warp_mul: Vec<u32>,
    /// Offset of each repetition along each dimension (`reps[d]` entries;
    /// `i · coverage(d)` but in the `wgmma` accumulator).
    pub rep_off: Vec<Vec<u32>>,
    /// The order in which registers enumerate the dimensions, outermost
    /// first: `0, 1, …` (row-major: a thread's run along the last
    /// dimension in consecutive registers, what vector loads and stores
    /// take) but in [`Blocked::mma_b_operand`], whose registers run along
    /// K — the direction a tensor-core fragment pairs 16-bit values in one
    /// word, so packed arithmetic on the tile pairs what the fragment
    /// pairs.
    pub reg_order: Vec<usize>,
}

fn log2(x: u32) -> u32 {
    31 - x.leading_zeros()
}

impl Blocked {
    /// The canonical layout of `shape` over `num_warps` warps, with up to
    /// `vec` contiguous elements per thread along the last dimension: as
    /// many as keep every warp on distinct elements. Warps left over once
    /// the tile is covered would hold copies (replication: the same loads
    /// issued twice, reductions over copies, stores masked to one owner);
    /// fewer elements per thread spread the tile over more threads
    /// instead. Measured on the H200 (session 14): a `[1, 1024]` bf16 row
    /// on 8 warps with 8 elements per thread held the row twice and ran
    /// 73.8 µs against 21.4 on 4 warps. Where no width avoids copies (a
    /// tile smaller than the threads), the widest with the fewest copies
    /// (lanes left over count too).
    pub fn canonical(shape: &[u32], num_warps: u32, vec: u32) -> Blocked {
        let r = shape.len();
        assert!(r >= 1);
        let mut w = vec.min(shape[r - 1]).max(1);
        let mut best = Self::canonical_with(shape, num_warps, w);
        let mut fewest = best.copies();
        while fewest > 1 && w > 1 {
            w /= 2;
            let b = Self::canonical_with(shape, num_warps, w);
            if b.copies() < fewest {
                fewest = b.copies();
                best = b;
            }
        }
        best
    }

    /// The canonical layout with at least `runs[d]` consecutive elements
    /// per thread along each dimension `d` (powers of two): runs of equal
    /// addresses of a load stay in one thread, which then loads each once
    /// (`ptx::assign::load_runs`). Runs are halved, largest first, until
    /// the tile's elements per thread hold them; the last dimension keeps
    /// its vector width on top. All runs 1: [`Blocked::canonical`].
    pub fn canonical_runs(shape: &[u32], num_warps: u32, vec: u32, runs: &[u32]) -> Blocked {
        let r = shape.len();
        let base = Self::canonical(shape, num_warps, vec);
        if runs.iter().all(|&x| x <= 1) || base.any_replication() {
            return base;
        }
        let mut spt: Vec<u32> = (0..r).map(|d| runs[d].clamp(1, shape[d])).collect();
        spt[r - 1] = spt[r - 1].max(base.spt[r - 1]);
        let per_thread = (shape.iter().product::<u32>() / (32 * num_warps)).max(1);
        while spt.iter().product::<u32>() > per_thread {
            let (d, _) = spt.iter().enumerate().filter(|(_, &x)| x > 1).max_by_key(|(d, &x)| (x, std::cmp::Reverse(*d))).unwrap();
            spt[d] /= 2;
        }
        let b = Self::canonical_spt(shape, num_warps, spt);
        if b.any_replication() {
            base
        } else {
            b
        }
    }

    /// The canonical layout of a 2-D tile read along dimension 0: that of
    /// the transposed shape, transposed — each thread a run of up to
    /// `vec` consecutive elements along dimension 0 in consecutive
    /// registers ([`Blocked::reg_order`] `[1, 0]`), lanes along dimension
    /// 0 first, warps along dimension 1 first.
    pub fn canonical_columns(shape: &[u32], num_warps: u32, vec: u32) -> Blocked {
        assert!(shape.len() == 2, "column layout of {shape:?}");
        let t = Self::canonical(&[shape[1], shape[0]], num_warps, vec);
        let sw = |v: &Vec<u32>| vec![v[1], v[0]];
        Blocked {
            shape: shape.to_vec(),
            spt: sw(&t.spt),
            tpw: sw(&t.tpw),
            wpc: sw(&t.wpc),
            reps: sw(&t.reps),
            lane_shift: sw(&t.lane_shift),
            warp_shift: sw(&t.warp_shift),
            warp_mul: sw(&t.warp_mul),
            rep_off: vec![t.rep_off[1].clone(), t.rep_off[0].clone()],
            reg_order: vec![1, 0],
        }
    }

    /// How many threads hold each element (lanes and warps left over).
    fn copies(&self) -> u32 {
        (0..self.rank()).map(|d| self.coverage(d).div_ceil(self.shape[d].max(1)).max(1)).product()
    }

    /// The canonical layout at exactly `spt_last` elements per thread along
    /// the last dimension: lanes fill dimensions from the last, warps from
    /// the first, and what is left over replicates.
    fn canonical_with(shape: &[u32], num_warps: u32, spt_last: u32) -> Blocked {
        let r = shape.len();
        let mut spt = vec![1u32; r];
        spt[r - 1] = spt_last.min(shape[r - 1]).max(1);
        Self::canonical_spt(shape, num_warps, spt)
    }

    /// The canonical placement of lanes and warps around `spt`.
    fn canonical_spt(shape: &[u32], num_warps: u32, spt: Vec<u32>) -> Blocked {
        let r = shape.len();
        // lanes: fill from the last dimension
        let mut tpw = vec![1u32; r];
        let mut lanes = 32u32;
        for d in (0..r).rev() {
            let room = (shape[d] / spt[d]).max(1);
            let t = room.min(lanes);
            tpw[d] = t;
            lanes /= t;
        }
        tpw[r - 1] *= lanes; // leftover lanes replicate along the last dim
                             // warps: fill from the first dimension
        let mut wpc = vec![1u32; r];
        let mut warps = num_warps;
        for d in 0..r {
            let room = (shape[d] / (spt[d] * tpw[d])).max(1);
            let w = room.min(warps);
            wpc[d] = w;
            warps /= w;
        }
        wpc[0] *= warps; // leftover warps replicate along the first dim
        let reps: Vec<u32> = (0..r).map(|d| (shape[d] / (spt[d] * tpw[d] * wpc[d])).max(1)).collect();
        let mut lane_shift = vec![0u32; r];
        let mut warp_shift = vec![0u32; r];
        let (mut ls, mut ws) = (0, 0);
        for d in (0..r).rev() {
            lane_shift[d] = ls;
            ls += log2(tpw[d]);
            warp_shift[d] = ws;
            ws += log2(wpc[d]);
        }
        Blocked::with_regular_reps(shape, spt, tpw, wpc, reps, lane_shift, warp_shift)
    }

    /// A layout with these per-thread, per-warp and per-CTA extents, whose
    /// lane fields are packed into the lane id in the order `lane_order`
    /// (fastest dimension first) and warp fields likewise by `warp_order`.
    pub fn new(shape: &[u32], spt: Vec<u32>, tpw: Vec<u32>, wpc: Vec<u32>, lane_order: &[usize], warp_order: &[usize]) -> Blocked {
        let r = shape.len();
        let reps: Vec<u32> = (0..r).map(|d| (shape[d] / (spt[d] * tpw[d] * wpc[d])).max(1)).collect();
        let (mut lane_shift, mut warp_shift) = (vec![0u32; r], vec![0u32; r]);
        let (mut ls, mut ws) = (0, 0);
        for &d in lane_order {
            lane_shift[d] = ls;
            ls += log2(tpw[d]);
        }
        for &d in warp_order {
            warp_shift[d] = ws;
            ws += log2(wpc[d]);
        }
        Blocked::with_regular_reps(shape, spt, tpw, wpc, reps, lane_shift, warp_shift)
    }

    fn with_regular_reps(shape: &[u32], spt: Vec<u32>, tpw: Vec<u32>, wpc: Vec<u32>, reps: Vec<u32>, lane_shift: Vec<u32>, warp_shift: Vec<u32>) -> Blocked {
        let rep_off = (0..shape.len()).map(|d| (0..reps[d]).map(|i| i * spt[d] * tpw[d] * wpc[d]).collect()).collect();
        let warp_mul = tpw.clone();
        let reg_order = (0..shape.len()).collect();
        Blocked { shape: shape.to_vec(), spt, tpw, wpc, reps, lane_shift, warp_shift, warp_mul, rep_off, reg_order }
    }

    /// The `m16n8` mma accumulator layout of an `m × n` tile over a
    /// `wm × wn` warp grid: thread `lane` of warp `(warp_m, warp_n)` holds
    /// rows `lane/4 + 8·warp_m + 8·wm·i` and the column pairs
    /// `2·(lane%4) + {0,1} + 8·warp_n + 8·wn·j`. Rows `i = 2t, 2t+1` form
    /// the two row halves of one 16×8 instruction tile. Needs
    /// `m % (16·wm) == 0` and `n % (8·wn) == 0`; warp id = `warp_m·wn + warp_n`.
    pub fn mma_acc(shape: &[u32], wm: u32, wn: u32) -> Blocked {
        assert!(shape.len() == 2 && shape[0].is_multiple_of(16 * wm) && shape[1].is_multiple_of(8 * wn), "mma layout of {shape:?} over {wm}x{wn} warps");
        Blocked::with_regular_reps(shape, vec![1, 2], vec![8, 4], vec![wm, wn], vec![shape[0] / (8 * wm), shape[1] / (8 * wn)], vec![2, 0], vec![log2(wn), 0])
    }

    /// The accumulator layout Hopper's `wgmma` writes for an `m × n` tile
    /// over `wm` warps (whole warpgroups, all along M), each warpgroup's
    /// instructions covering 64-row blocks `g, g + wm/4, …` with A in shared
    /// memory in natural row order: thread `lane` of warp `w` holds rows
    /// `lane/4 + 16·w + 8·h + 16·wm·t` (`h` ∈ {0, 1}: the fragment's two row
    /// halves, `t`: the instruction tile along M) and the column pairs
    /// `2·(lane%4) + {0,1} + 8·j`. Registers are ordered as in
    /// [`Blocked::mma_acc`] (`(2t + h, j, e)`), so the `m16n8` fragment code
    /// reads both. Needs `m % (16·wm) == 0`, `n % 8 == 0`.
    pub fn wgmma_acc(shape: &[u32], wm: u32) -> Blocked {
        assert!(shape.len() == 2 && shape[0].is_multiple_of(16 * wm) && shape[1].is_multiple_of(8), "wgmma layout of {shape:?} over {wm} warps");
        let mut b = Blocked::mma_acc(shape, wm, 1);
        b.warp_mul[0] = 16;
        b.rep_off[0] = (0..b.reps[0]).map(|r| 8 * (r % 2) + 16 * wm * (r / 2)).collect();
        b
    }

    /// The layout of an `m × k` 16-bit A operand that `mma.sync` takes from
    /// registers with K *interleaved* ([`crate::ptx::fragments::mma_a_interleaved`]):
    /// lane `l` of warp `(warp_m, warp_n)` holds rows `l/4 + 8·warp_m +
    /// 8·wm·i` — the accumulator's rows ([`Blocked::mma_acc`]) — and `run`
    /// consecutive columns `run·(l%4) + 4·run·c + (0..run)`. The `wn` warps
    /// of one row of the grid hold copies (the warp id's low `log2 wn` bits
    /// are unused): each needs the whole of its rows' K. Needs `m % (16·wm)
    /// == 0`, `k % (4·run) == 0`; warp id = `warp_m·wn + warp_n`.
    pub fn mma_a_operand(shape: &[u32], wm: u32, wn: u32, run: u32) -> Blocked {
        assert!(
            shape.len() == 2 && shape[0].is_multiple_of(16 * wm) && shape[1].is_multiple_of(4 * run),
            "mma A operand layout of {shape:?} over {wm}x{wn} warps"
        );
        Blocked::with_regular_reps(shape, vec![1, run], vec![8, 4], vec![wm, 1], vec![shape[0] / (8 * wm), shape[1] / (4 * run)], vec![2, 0], vec![log2(wn), 0])
    }

    /// The layout of an `m × k` 16-bit A operand that `wgmma` takes from
    /// registers with K *interleaved*
    /// ([`crate::ptx::fragments::wgmma_a_interleaved`]): the rows of
    /// [`Blocked::wgmma_acc`] (lane `l` of warp `w` holds rows
    /// `l/4 + 16·w + 8·h + 16·wm·t`) and `run` consecutive columns
    /// `run·(l%4) + 4·run·c + (0..run)` — a 16-byte vector of the tile's
    /// row per run at `run = 8`, where the accumulator's layout holds pairs
    /// 8 columns apart.
    /// Needs `m % (16·wm) == 0`, `k % (4·run) == 0`.
    pub fn wgmma_a_operand(shape: &[u32], wm: u32, run: u32) -> Blocked {
        assert!(shape.len() == 2 && shape[0].is_multiple_of(16 * wm), "wgmma A operand layout of {shape:?} over {wm} warps");
        let mut b = Blocked::mma_a_operand(shape, wm, 1, run);
        b.warp_mul[0] = 16;
        b.rep_off[0] = (0..b.reps[0]).map(|r| 8 * (r % 2) + 16 * wm * (r / 2)).collect();
        b
    }

    /// The layout of a `k × n` 16-bit B operand that `mma.sync` takes from
    /// registers with K interleaved ([`crate::ptx::fragments::mma_b_interleaved`]):
    /// lane `l` of warp `(warp_m, warp_n)` holds columns `l/4 + 8·warp_n +
    /// 8·wn·j` — the accumulator's column tiles — and `run` consecutive
    /// rows `run·(l%4) + 4·run·c + (0..run)`: a run along K stays in one
    /// thread (a 32-bit word of 4-bit weights packed along K is loaded
    /// once; with K contiguous in memory, four of them are one 16-byte
    /// load). The `wm` warps of one column of the grid hold copies. Needs
    /// `k % (4·run) == 0`, `n % (8·wn) == 0`.
    pub fn mma_b_operand(shape: &[u32], wm: u32, wn: u32, run: u32) -> Blocked {
        assert!(
            shape.len() == 2 && shape[0].is_multiple_of(4 * run) && shape[1].is_multiple_of(8 * wn),
            "mma B operand layout of {shape:?} over {wm}x{wn} warps"
        );
        let _ = wm; // (the warp_m bits stay unused: copies)
        let mut b =
            Blocked::with_regular_reps(shape, vec![run, 1], vec![4, 8], vec![1, wn], vec![shape[0] / (4 * run), shape[1] / (8 * wn)], vec![0, 2], vec![0, 0]);
        // registers run along K (columns outermost): consecutive K of one
        // column — the pairs of a B fragment — are consecutive registers,
        // so a packed 16-bit op's pair is the fragment's pair
        b.reg_order = vec![1, 0];
        b
    }

    /// The *slice* of this layout along `axis`: the layout of a reduction's
    /// result (rank − 1) in the registers the reduction leaves it in. Each
    /// thread holds the reduced value of every element group it held, so
    /// the lanes and warps that were along `axis` hold copies (their bits
    /// of the lane / warp id address nothing any more). Registers keep the
    /// source's order with `axis`'s registers collapsed — the order of
    /// [`crate::plan::reduce::ReducePlan::groups`].
    pub fn slice(&self, axis: usize) -> Blocked {
        let drop = |v: &Vec<u32>| -> Vec<u32> { v.iter().enumerate().filter(|(d, _)| *d != axis).map(|(_, x)| *x).collect() };
        Blocked {
            shape: drop(&self.shape),
            spt: drop(&self.spt),
            tpw: drop(&self.tpw),
            wpc: drop(&self.wpc),
            reps: drop(&self.reps),
            lane_shift: drop(&self.lane_shift),
            warp_shift: drop(&self.warp_shift),
            warp_mul: drop(&self.warp_mul),
            rep_off: self.rep_off.iter().enumerate().filter(|(d, _)| *d != axis).map(|(_, x)| x.clone()).collect(),
            reg_order: self.reg_order.iter().filter(|&&d| d != axis).map(|&d| if d > axis { d - 1 } else { d }).collect(),
        }
    }

    /// This layout with a dimension of size 1 inserted at `axis` (held by
    /// every thread, no lane or warp bits): `expand_dims` of a slice, whose
    /// registers and their order stay as they are.
    pub fn expand(&self, axis: usize) -> Blocked {
        let mut b = self.clone();
        b.shape.insert(axis, 1);
        for v in [&mut b.spt, &mut b.tpw, &mut b.wpc, &mut b.reps, &mut b.warp_mul] {
            v.insert(axis, 1);
        }
        b.lane_shift.insert(axis, 0);
        b.warp_shift.insert(axis, 0);
        b.rep_off.insert(axis, vec![0]);
        // (the new dimension holds one register: outermost)
        b.reg_order = std::iter::once(axis).chain(self.reg_order.iter().map(|&d| if d >= axis { d + 1 } else { d })).collect();
        b
    }

    /// The lane-id and warp-id bits (of `num_warps` warps) that no
    /// dimension's field uses: threads that differ only there hold copies
    /// (a slice layout's collapsed axis). The copy with all of them zero is
    /// the one that stores.
    pub fn unused_bits(&self, num_warps: u32) -> (u32, u32) {
        let (mut lanes, mut warps) = (0u32, 0u32);
        for d in 0..self.rank() {
            lanes |= (self.tpw[d] - 1) << self.lane_shift[d];
            warps |= (self.wpc[d] - 1) << self.warp_shift[d];
        }
        (31 & !lanes, (num_warps - 1) & !warps)
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The run of consecutive elements along the last dimension that a
    /// thread holds in consecutive registers: `spt[last]` where the last
    /// dimension is the registers' innermost ([`Blocked::reg_order`]), else
    /// 1 — what a vector access along the last dimension can take.
    pub fn last_run(&self) -> u32 {
        let r = self.rank();
        if r == 0 || self.reg_order.last() == Some(&(r - 1)) {
            self.spt.last().copied().unwrap_or(1)
        } else {
            1
        }
    }

    /// Registers per thread.
    pub fn regs(&self) -> usize {
        (0..self.rank()).map(|d| (self.spt[d] * self.reps[d]) as usize).product()
    }

    /// Coverage of one repetition along `d`.
    pub fn coverage(&self, d: usize) -> u32 {
        self.spt[d] * self.tpw[d] * self.wpc[d]
    }

    /// Whether indices wrap along `d` (the layout is larger than the shape).
    pub fn replicated(&self, d: usize) -> bool {
        self.coverage(d) > self.shape[d]
    }

    /// Whether indices wrap along some dimension, so that several threads hold copies of an
    /// element.
    pub fn any_replication(&self) -> bool {
        (0..self.rank()).any(|d| self.replicated(d))
    }

    /// A rank-2 layout's registers as an outer product (the FMA `dot`'s
    /// register blocking, in both emitters): the distinct row offsets, the
    /// distinct column offsets (both in first-use order), and per register
    /// the index of its row and of its column among them. Registers with
    /// equal offsets hold the same row (column) in every thread.
    pub fn outer_product(&self) -> (Vec<u32>, Vec<u32>, Vec<(usize, usize)>) {
        let (mut rows, mut cols, mut at) = (vec![], vec![], vec![]);
        let slot = |v: &mut Vec<u32>, x: u32| {
            v.iter().position(|&y| y == x).unwrap_or_else(|| {
                v.push(x);
                v.len() - 1
            })
        };
        for kc in self.reg_offsets() {
            at.push((slot(&mut rows, kc[0]), slot(&mut cols, kc[1])));
        }
        (rows, cols, at)
    }

    /// Per-register constant offsets, registers ordered over (rep_d, e_d)
    /// of the dimensions in [`Blocked::reg_order`] — row-major (rep_0, e_0,
    /// rep_1, e_1, …) but in the B operand layout —, so the innermost
    /// dimension's elements of one repetition are consecutive registers.
    pub fn reg_offsets(&self) -> Vec<Vec<u32>> {
        let r = self.rank();
        let mut out = vec![vec![0u32; r]];
        for &d in &self.reg_order {
            let mut next = vec![];
            for prefix in &out {
                for rep in 0..self.reps[d] as usize {
                    for e in 0..self.spt[d] {
                        let mut p = prefix.clone();
                        p[d] = e + self.rep_off[d][rep];
                        next.push(p);
                    }
                }
            }
            out = next;
        }
        out
    }

    /// Row-major strides of the shape.
    pub fn strides(&self) -> Vec<u32> {
        let r = self.rank();
        let mut s = vec![1u32; r];
        for d in (0..r.saturating_sub(1)).rev() {
            s[d] = s[d + 1] * self.shape[d + 1];
        }
        s
    }

    /// Number of elements of the shape.
    pub fn numel(&self) -> u32 {
        self.shape.iter().product()
    }
}

/// A layout as an emitter holds it: the [`Blocked`] layout, each register's
/// constant coordinate offsets ([`Blocked::reg_offsets`]) and the names the
/// emitter gave the per-thread offset of each dimension, computed once in
/// the kernel's prologue (a PTX register, a WGSL `let`). Element `r` of a
/// thread sits at `(reg_offsets[r][d] + thread[d]) mod shape[d]`.
pub struct ThreadLayout {
    /// The layout.
    pub bl: Blocked,
    /// Each register's constant coordinate offsets ([`Blocked::reg_offsets`]).
    pub reg_offsets: Vec<Vec<u32>>,
    /// The emitter's name of this thread's offset along each dimension.
    pub thread: Vec<String>,
}

impl ThreadLayout {
    /// Registers per thread.
    pub fn regs(&self) -> usize {
        self.reg_offsets.len()
    }
    /// Row-major linear index of register `r` in invocation `t` (host side).
    pub fn lin_of(&self, t: u32, r: usize) -> u32 {
        let bl = &self.bl;
        let (lane, warp) = (t % 32, t / 32);
        let mut lin = 0u32;
        for d in 0..bl.rank() {
            let ld = (lane >> bl.lane_shift[d]) & (bl.tpw[d] - 1);
            let wd = (warp >> bl.warp_shift[d]) & (bl.wpc[d] - 1);
            let i = (self.reg_offsets[r][d] + bl.spt[d] * (ld + bl.warp_mul[d] * wd)) % bl.shape[d];
            lin = lin * bl.shape[d] + i;
        }
        lin
    }
    /// Coordinates of register `r` of invocation `t` (host side).
    pub fn coords_of(&self, t: u32, r: usize) -> Vec<u32> {
        let mut lin = self.lin_of(t, r);
        let mut c = vec![0u32; self.bl.rank()];
        for d in (0..self.bl.rank()).rev() {
            c[d] = lin % self.bl.shape[d];
            lin /= self.bl.shape[d];
        }
        c
    }
}

/// A layout conversion without data movement: for each destination
/// register, a source register that holds, in every one of `nt` threads,
/// the element that destination register needs (`src`/`dst`: linear
/// element index of thread `t`'s register `r`); `None` when some data would
/// have to move between threads. (The WGSL backend converts this way where
/// it can; both printers place slice layouts with it: [`relayout_remap`],
/// [`broadcast_remap`].)
pub fn register_remap(nt: u32, n_src: usize, src: &dyn Fn(u32, usize) -> u32, n_dst: usize, dst: &dyn Fn(u32, usize) -> u32) -> Option<Vec<usize>> {
    let mut at0: std::collections::HashMap<u32, Vec<usize>> = std::collections::HashMap::new();
    for s in 0..n_src {
        at0.entry(src(0, s)).or_default().push(s);
    }
    let mut out = Vec::with_capacity(n_dst);
    for r in 0..n_dst {
        let cands = at0.get(&dst(0, r))?;
        let pick = cands.iter().copied().find(|&c| (1..nt).all(|t| src(t, c) == dst(t, r)))?;
        out.push(pick);
    }
    Some(out)
}

/// [`register_remap`] from a value in layout `have` (no per-thread names
/// needed) to the same elements in `dst`, over `nt` threads.
pub fn relayout_remap(nt: u32, have: &Blocked, dst: &ThreadLayout) -> Option<Vec<usize>> {
    let src = ThreadLayout { bl: have.clone(), reg_offsets: have.reg_offsets(), thread: vec![] };
    register_remap(nt, src.regs(), &|t, r| src.lin_of(t, r), dst.regs(), &|t, r| dst.lin_of(t, r))
}

/// [`register_remap`] for a broadcast of a value in layout `have` (its
/// size-1 dimensions repeated) into `dst`, over `nt` threads: an expanded
/// slice broadcast back into the layout it was reduced from.
pub fn broadcast_remap(nt: u32, have: &Blocked, dst: &ThreadLayout) -> Option<Vec<usize>> {
    let src = ThreadLayout { bl: have.clone(), reg_offsets: have.reg_offsets(), thread: vec![] };
    // destination element → the linear index of the source element it repeats
    let need = |t: u32, r: usize| -> u32 {
        let c = dst.coords_of(t, r);
        c.iter().zip(&have.shape).fold(0u32, |lin, (&i, &n)| lin * n + if n == 1 { 0 } else { i })
    };
    register_remap(nt, src.regs(), &|t, r| src.lin_of(t, r), dst.regs(), &need)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Every element is held by at least one (thread, register), and
    /// non-replicated layouts hold each exactly once.
    fn check(shape: &[u32], warps: u32, vec: u32) {
        check_layout(&Blocked::canonical(shape, warps, vec), warps);
    }

    fn check_layout(l: &Blocked, warps: u32) {
        let mut seen: HashMap<Vec<u32>, u32> = HashMap::new();
        for t in 0..warps * 32 {
            let (lane, warp) = (t % 32, t / 32);
            for k in l.reg_offsets() {
                let idx: Vec<u32> = (0..l.rank())
                    .map(|d| {
                        let ld = (lane >> l.lane_shift[d]) & (l.tpw[d] - 1);
                        let wd = (warp >> l.warp_shift[d]) & (l.wpc[d] - 1);
                        (k[d] + l.spt[d] * ld + l.spt[d] * l.warp_mul[d] * wd) % l.shape[d]
                    })
                    .collect();
                *seen.entry(idx).or_default() += 1;
            }
        }
        assert_eq!(seen.len() as u32, l.numel(), "{l:?}");
        if !l.any_replication() {
            assert!(seen.values().all(|&c| c == 1), "{l:?}");
        }
    }

    #[test]
    fn mma_layouts_cover_their_shapes_and_match_the_fragments() {
        for (m, n, wm, wn) in [(16, 8, 1, 1), (64, 64, 2, 2), (128, 128, 2, 2), (128, 256, 2, 4), (32, 64, 1, 4)] {
            let l = Blocked::mma_acc(&[m, n], wm, wn);
            check_layout(&l, wm * wn);
            // register (2t + h, j, e) of lane `lane` in warp (0, 0) is the
            // fragment element c[2h + e] of instruction tile (t, j)
            let k = l.reg_offsets();
            let rn = l.reps[1] as usize;
            for lane in 0..32u32 {
                for (r, kc) in k.iter().enumerate() {
                    let (rep0, j, e) = (r / (2 * rn), (r % (2 * rn)) / 2, r % 2);
                    let row = kc[0] + lane / 4;
                    let col = kc[1] + 2 * (lane % 4);
                    assert_eq!(row, lane / 4 + 8 * wm * rep0 as u32);
                    assert_eq!(col, 2 * (lane % 4) + e as u32 + 8 * wn * j as u32);
                }
            }
        }
    }

    /// The K-interleaved `wgmma` A operand: covers its shape once; lane
    /// `l` of warp `w` holds the accumulator's rows and `run` consecutive
    /// columns from `run·(l%4)`, in consecutive registers (one vector).
    #[test]
    fn wgmma_a_operand_layout() {
        for (m, k, wm, run) in [(128, 64, 8, 8), (64, 64, 4, 8), (64, 16, 4, 4), (256, 32, 8, 8), (128, 128, 4, 8)] {
            let l = Blocked::wgmma_a_operand(&[m, k], wm, run);
            check_layout(&l, wm);
            assert!(!l.any_replication());
            let acc = Blocked::wgmma_acc(&[m, 8], wm);
            let rows: std::collections::BTreeSet<u32> = acc.reg_offsets().iter().map(|o| o[0]).collect();
            let mine: std::collections::BTreeSet<u32> = l.reg_offsets().iter().map(|o| o[0]).collect();
            assert_eq!(rows, mine, "{m}x{k}: the accumulator's row offsets");
            let offs = l.reg_offsets();
            for (r, o) in offs.iter().enumerate() {
                assert_eq!(o[1] % run, (r as u32) % run, "{m}x{k}: a run in consecutive registers");
                assert_eq!((o[1] / run) % 4, 0, "{m}x{k}: runs 4·run apart across a thread's registers");
            }
            assert_eq!(l.lane_shift, vec![2, 0]);
            assert_eq!(l.tpw, vec![8, 4]);
        }
    }

    #[test]
    fn wgmma_layout_is_what_wgmma_writes() {
        for (m, n, wm) in [(64, 64, 4), (128, 256, 8), (128, 128, 4), (256, 128, 8), (256, 64, 4)] {
            let l = Blocked::wgmma_acc(&[m, n], wm);
            check_layout(&l, wm);
            let k = l.reg_offsets();
            let rn = l.reps[1] as usize;
            let groups = wm / 4;
            for w in 0..wm {
                for lane in 0..32u32 {
                    for (r, kc) in k.iter().enumerate() {
                        let (rep0, j, e) = ((r / (2 * rn)) as u32, (r % (2 * rn)) / 2, r % 2);
                        let (t, h) = (rep0 / 2, rep0 % 2);
                        let row = kc[0] + lane / 4 + 16 * w;
                        let col = kc[1] + 2 * (lane % 4);
                        // wgmma: warpgroup w/4's instruction t covers A's
                        // 64-row block t·G + w/4; within it warp w%4 holds
                        // rows 16·(w%4) + 8·h + lane/4 of D
                        assert_eq!(row, 64 * (t * groups + w / 4) + 16 * (w % 4) + 8 * h + lane / 4);
                        assert_eq!(col, 2 * (lane % 4) + e as u32 + 8 * j as u32);
                    }
                }
            }
        }
    }

    #[test]
    fn leftover_warps_narrow_the_vectors_instead_of_copying() {
        // a [1, 1024] row on 8 warps: 8 elements per thread would cover it
        // twice; 4 per thread cover it once
        let b = Blocked::canonical(&[1, 1024], 8, 8);
        assert_eq!((b.spt[1], b.any_replication()), (4, false), "{b:?}");
        let b = Blocked::canonical(&[1024], 8, 8);
        assert_eq!((b.spt[0], b.any_replication()), (4, false), "{b:?}");
        // [2, 512] on 8 warps: 4 per thread
        let b = Blocked::canonical(&[2, 512], 8, 8);
        assert!(!b.any_replication() && b.spt[1] == 4, "{b:?}");
        // tiles that fill the threads keep the widest vectors
        assert_eq!(Blocked::canonical(&[64, 256], 4, 4).spt[1], 4);
        assert_eq!(Blocked::canonical(&[4, 2048], 8, 8).spt[1], 8);
        // smaller than the threads: the fewest copies, widest first
        let b = Blocked::canonical(&[16], 4, 4);
        assert_eq!(b.spt[0], 1, "{b:?}");
        assert_eq!((0..1).map(|d| b.coverage(d) / 16).product::<u32>(), 8);
    }

    #[test]
    fn layouts_cover_their_shapes() {
        for warps in [1, 2, 4, 8, 16] {
            for shape in [
                vec![1],
                vec![4],
                vec![16],
                vec![128],
                vec![1024],
                vec![16384],
                vec![1, 1],
                vec![16, 16],
                vec![64, 32],
                vec![2, 256],
                vec![128, 64],
                vec![4, 8, 16],
            ] {
                check(&shape, warps, 4);
                check(&shape, warps, 1);
            }
        }
    }

    /// The column layout covers its shape, and a thread's registers come
    /// in runs of `spt[0]` consecutive rows of one column.
    #[test]
    fn column_layouts_cover_their_shapes_with_runs_down_the_columns() {
        for warps in [1, 4, 8] {
            for shape in [[128u32, 16], [64, 16], [16, 64], [64, 64], [8, 8]] {
                for vec in [1, 4, 8] {
                    let l = Blocked::canonical_columns(&shape, warps, vec);
                    check_layout(&l, warps);
                    assert_eq!(l.last_run(), 1);
                    let offs = l.reg_offsets();
                    for (r, o) in offs.iter().enumerate() {
                        let e = r as u32 % l.spt[0];
                        assert_eq!(o[0] % l.spt[0], e, "{shape:?} {warps} {vec}: register {r}");
                        if e > 0 {
                            assert_eq!((o[0] - 1, o[1]), (offs[r - 1][0], offs[r - 1][1]));
                        }
                    }
                }
            }
        }
        // the decode form's `xᵀ` (`[BK, BM]`, K contiguous): 8 rows of K a thread
        let l = Blocked::canonical_columns(&[128, 16], 8, 8);
        assert_eq!((l.spt.clone(), l.reps.clone()), (vec![8, 1], vec![1, 1]));
    }

    #[test]
    fn register_remap_identity_and_transpose() {
        let bl = Blocked::canonical(&[64], 4, 1);
        let l = ThreadLayout { reg_offsets: bl.reg_offsets(), bl, thread: vec![] };
        let m = register_remap(128, l.regs(), &|t, r| l.lin_of(t, r), l.regs(), &|t, r| l.lin_of(t, r));
        assert!(m.is_some());
        let bl = Blocked::canonical(&[32, 32], 4, 1);
        let l = ThreadLayout { reg_offsets: bl.reg_offsets(), bl, thread: vec![] };
        let tr = |t: u32, r: usize| {
            let c = l.coords_of(t, r);
            c[1] * 32 + c[0]
        };
        assert!(register_remap(128, l.regs(), &|t, r| l.lin_of(t, r), l.regs(), &tr).is_none());
    }
}
