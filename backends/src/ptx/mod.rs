//! PTX backend: specialized IR → PTX text, written by us (no LLVM, no NVRTC).
//!
//! [`compile`] is the driver (option checks, the PTX target's IR passes,
//! the plans, in that order — ARCHITECTURE.md lists it); the analyses it
//! runs, each in its own file:
//! - [`assign`]: which layout each tile shape gets in a kernel (and which
//!   `dot`s run as Hopper warpgroup MMAs);
//! - [`async_copy`]: which loads become `cp.async` copies into shared-memory
//!   operand rings (or, from [`tma`] views, TMA bulk tensor copies);
//! - [`tma`]: which views a Hopper tensor map describes, and the recipe the
//!   host evaluates per launch to encode it;
//! - [`warp_spec`]: whether a kernel's bulk copies can move to a producer
//!   warp of their own, and which ops that warp runs;
//!
//! plus the target-neutral ones in [`crate::plan`]. `emit/` is the printer:
//! it writes those decisions out (elementwise ops in registers, index
//! arithmetic rematerialized under broadcasts, reductions in-thread →
//! `shfl.sync` → shared memory, other layout conversions through shared
//! memory, structured control flow, `dot` on tensor cores — `wgmma` on
//! sm_90a, `mma.sync` — or as an FMA loop), one file per concern.
//!
//! Output targets `sm_80`, `sm_90` or (kernels using `wgmma`) `sm_90a`
//! with PTX ISA 8.0 (accepted by driver
//! 580 and by ptxas 12.x/13.x).

use ferrotile_ir::passes::Safety;

pub mod assign;
pub mod async_copy;
pub mod compile;
mod emit;
pub mod fragments;
pub mod tma;
pub mod warp_spec;

pub use crate::abi::ParamAbi;
pub use compile::emit;

/// How to compile a kernel to PTX: the target, the warp count, what the launch knows about the
/// integer arguments, and which code paths to take ([`PtxOptions::new`] sets the defaults).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PtxOptions {
    /// 80 or 90.
    pub sm: u32,
    /// Warps per program (a power of two, 1 to 32), not counting a warp-specialized kernel's
    /// producer warpgroup.
    pub num_warps: u32,
    /// Per kernel parameter: a power of two (1 to 16) known to divide the
    /// integer argument ([`crate::plan::axis::arg_div`]; 1: nothing known).
    pub arg_div: Vec<u32>,
    /// Per kernel parameter: integer scalar known to equal 1 (unit strides).
    pub arg_one: Vec<bool>,
    /// Run eligible `dot`s on tensor cores (`mma.sync`); false: FMA loops.
    pub mma: bool,
    /// With `sm: 90` and `mma`: f16/bf16 `dot`s whose shapes fit run as
    /// warpgroup MMAs (`wgmma.mma_async`); the kernel then targets `sm_90a`.
    pub wgmma: bool,
    /// With `mma`: i8 `dot`s run on `mma.sync` m16n8k32 (s32
    /// accumulators; both operands staged, B K-contiguous) instead of the
    /// FMA path (the CUDA runtime reads `FERROTILE_MMA_I8`).
    pub mma_i8: bool,
    /// Prefetch the operand loads of `dot` loops this many iterations ahead
    /// ([`ferrotile_ir::passes::pipeline`]; `num_stages - 1`, 0: off).
    pub pipeline: u32,
    /// Pipeline loops without a `dot` as well (their loads prefetched
    /// `pipeline` iterations ahead, unless the loop stores): a streaming
    /// reduction such as a GEMV then keeps its next tiles' loads in flight
    /// while it computes ([`ferrotile_ir::passes::pipeline`]).
    pub pipeline_every_loop: bool,
    /// In-flight `wgmma` loops on `cp.async` rings issue their copies
    /// after the MMA when smaller rings let more programs share an SM
    /// ([`async_copy::late_prefetch`]); false: one slot more per ring
    /// (off in `new`; on in the CUDA runtime, `FERROTILE_LATE_PREFETCH=0`
    /// turns it off: the user grouped GEMM 145.6 -> 135.3 us on an H100,
    /// 143.9 -> 142.3 on the H200 — the smaller rings' occupancy matters
    /// where DRAM is slower; the GEMM and W8A8 tests pass with it).
    pub late_prefetch: bool,
    /// A `wgmma` `dot` whose A is computed in its loop body (register A)
    /// and whose B has a ring of its own stays in flight across the back
    /// edge, waited for where the next iteration writes A again
    /// ([`async_copy::register_a_inflight`]): the arithmetic that makes A
    /// runs under the previous MMA. Off in `new` and, until measured, in
    /// the CUDA runtime (`FERROTILE_INFLIGHT_REG_A=1` turns it on); not
    /// with warp specialization or clusters.
    pub inflight_register_a: bool,
    /// Threaded copies (`unroll_pipelined`) also for loop bodies with
    /// `wgmma` `dot`s whose operands come from `cp.async` rings or
    /// registers (not TMA): the register prefetch chains of such a loop
    /// (RMSNorm fused into a GEMM: the next `x` tile) stop being copied at
    /// every back edge. Off in `new` and, until measured, in the CUDA
    /// runtime (`FERROTILE_UNROLL_WGMMA=1` turns it on).
    pub unroll_wgmma: bool,
    /// With `wgmma`: ring loads from views a tensor map describes
    /// ([`tma`]) become TMA bulk tensor copies (the kernel then
    /// takes one tensor-map parameter per such view, after its own; see
    /// [`PtxKernel::tensor_maps`]).
    pub tma: bool,
    /// With `tma`: kernels whose bulk copies qualify ([`warp_spec`])
    /// run with a producer warpgroup whose first warp issues every copy
    /// (`num_warps + 4` warps: [`PtxKernel::threads`]; `setmaxnreg` hands
    /// the producer's registers to the consumers), slots handed over by
    /// mbarriers.
    pub warp_specialize: bool,
    /// Programs along x launched in clusters of this many (1 or 2; the
    /// grid's x must be a multiple). With 2, a kernel whose copy loops run
    /// the same trips in every program and some of whose copies read the
    /// same tile in both programs of a cluster
    /// ([`warp_spec::WsPlan::uniform`]) multicasts those copies:
    /// each program issues half of the tile to both (`.multicast::cluster`),
    /// and a slot is refilled once both programs are done with it — after a
    /// cluster barrier from one stream, or once both programs' consumers
    /// released it with `warp_specialize` (the PTX then declares
    /// `.reqnctapercluster 2, 1, 1`). Otherwise ignored.
    pub cluster: u32,
    /// How accesses are guarded ([`ferrotile_ir::passes::guard`]): the
    /// kernel then takes the hidden parameters
    /// [`ferrotile_ir::passes::guard::hidden_params`] after its own (and
    /// before the tensor maps). Views read by TMA copies are left to the
    /// host, which must check each tensor map's extent against its buffer
    /// ([`crate::abi::TensorMapArgs::fits`]) and run the kernel compiled without TMA
    /// where one does not fit.
    pub safety: Safety,
    /// Reduction results (and `expand_dims` / elementwise ops over them)
    /// stay in the slice layout the reduction leaves them in
    /// ([`crate::plan::slices`]); false: every value in its shape's default
    /// layout (the code before slice layouts, kept for A/B measurements:
    /// the CUDA runtime reads `FERROTILE_SLICE_LAYOUTS=0`).
    pub slice_layouts: bool,
    /// With [`Self::slice_layouts`], also the backward rule of
    /// [`crate::plan::slices`]: a vector only ever broadcast (a loaded bias,
    /// gather indices, the row offsets of a tile) is computed — `arange`,
    /// index arithmetic, load — in the slice of the broadcast's layout, so
    /// the broadcast is a register remap. Off by default on PTX until it has
    /// run on a GPU (session 39: checked on lavapipe through WGSL, where it
    /// is on, and by ptxas here); the CUDA runtime reads
    /// `FERROTILE_BROADCAST_SLICES=1`.
    pub broadcast_slices: bool,
    /// A computed `dot` operand whose registers already hold the tensor
    /// cores' A fragments ([`fragments`]) feeds them from registers
    /// (`wgmma`'s register-A form; `mma.sync`) instead of going through
    /// shared memory; false: the staging path (kept for A/B measurements:
    /// the CUDA runtime reads `FERROTILE_REGISTER_A=0`).
    pub register_a: bool,
    /// A loop whose body carries a register prefetch chain of `d` tiles
    /// (the pipelining pass's shift register) is emitted with `d + 1`
    /// threaded copies of its body per trip, so that the chain's
    /// registers are not copied at every back edge
    /// (`emit::control::unroll_copies`). On the H200 the W4A16 16-row step
    /// lost ~9 % of its SASS and 16×8192² ran 7 % faster, M = 1 1 %, but
    /// the copies' longer live ranges make ptxas spill in tiles with wider
    /// carried tiles (W8A16 16×128×64, 3 stages: 8 bytes) — which the PTX
    /// cannot tell. Off here (the text is then what it was before the
    /// option); the CUDA runtime turns it on and keeps the compilation
    /// only where the driver reports no more local memory than without it
    /// ([`PtxKernel::unrolled_loops`]; `FERROTILE_UNROLL_PIPELINED=0`: never).
    pub unroll_pipelined: bool,
    /// 64-bit offsets extended from 32 bits taken from their 32-bit
    /// registers: a pointer plus one as one `mad.wide`, the product of two
    /// as one `mul.wide` (a sign shift and three multiply-adds each
    /// otherwise). Fewer instructions everywhere (16×128×64 W4A16 step 269
    /// → 252 SASS); in a tile at ptxas's register target it can tip the
    /// allocation into spilling (W8A16 f16 16×128×64, 3 stages, masked: 8
    /// bytes) — so, like the threaded copies, the CUDA runtime keeps it
    /// only where the driver reports no more local memory than without
    /// ([`PtxKernel::wide_offsets`]). On by default.
    pub wide_offsets: bool,
    /// A pointer tile's per-element constants as address immediates: facts
    /// `r = root + c` about integer registers, a root per op, loads,
    /// stores and atomics at `[root+c]` ([`emit`]'s `affine` module).
    /// Fewer instructions and registers wherever a tile of addresses is
    /// computed (attention backward's dQ atomics: an `IMAD`, a `LEA` and
    /// a `LEA.HI.X` per element). Not exact where a 32-bit offset's
    /// arithmetic wraps (`docs/semantics.md`, "Pointer offsets"). Off
    /// here; the CUDA runtime reads `FERROTILE_AFFINE_ADDRESSES=1`.
    pub affine_addresses: bool,
    /// `expand_dims` of a value in its default layout read only by
    /// broadcasts is not converted where it is written: each broadcast
    /// converts from the value itself, one trip through shared memory
    /// (two barriers, three where shared memory was touched since the
    /// last one) instead of two (five): the attention backward's dK/dV
    /// step 17 → 13 barriers. On by default; false: the two-trip form,
    /// for A/B measurements (the CUDA runtime reads
    /// `FERROTILE_EXPAND_BROADCAST=0`).
    pub expand_broadcast: bool,
    /// `dot` loops whose last iterations are masked run as two loops, the
    /// first with those masks known true
    /// ([`ferrotile_ir::passes::split_masks`]). Off by default; a launch
    /// asks for it (`LaunchConfig::split_masks`: the attention library's
    /// d64 tuner candidates, +13% there) or `FERROTILE_SPLIT_MASKS=1` turns
    /// it on for every launch. The attention forward's
    /// loop loses its 33 compares and 66 selects per iteration, but with
    /// two copies of the loop ptxas spills kernels that sit at 255
    /// registers (attention d64/d128, the 128×128 GEMMs), and each copy
    /// takes its own shared-memory rings (large GEMM tiles no longer fit;
    /// session 29).
    pub split_masks: bool,
    /// The selects that only a `dot` loop's last iterations can fail run
    /// under a uniform branch on the induction variable
    /// ([`ferrotile_ir::passes::branch_masks`]: one loop, no second set of
    /// rings or registers). On by default; the CUDA runtime reads
    /// `FERROTILE_BRANCH_MASKS=0` for A/B runs.
    pub branch_masks: bool,
    /// A loop whose carried-accumulator `dot` consumes another `dot`'s
    /// result of the same iteration is rotated by one iteration
    /// ([`ferrotile_ir::passes::rotate_chains`]): the chained dot of the
    /// previous iteration runs under this iteration's elementwise work.
    /// Off here; the CUDA runtime turns it on for launches that do not
    /// say (`LaunchConfig::rotate_chains`; `FERROTILE_ROTATE_CHAINS=0`
    /// turns it off) and keeps the compilation in source order where the
    /// rotated one spills or fits fewer programs on an SM (H100, session
    /// 48: the user's tutorial-form attention per tile +7 to +20 % at d64,
    /// −1 to +5 % at d128). The library's attention forward says: its own tiles
    /// are rotated by hand.
    pub rotate_chains: bool,
    /// Tiles widened from narrower ones are recomputed after reductions
    /// instead of held across them ([`ferrotile_ir::passes::remat_widened`]:
    /// fewer registers in row kernels of 16-bit data). On by default; the
    /// CUDA runtime reads `FERROTILE_REMAT_WIDENED=0` for A/B runs.
    pub remat_widened: bool,
    /// A `wgmma` group is waited for where its result is first read, not
    /// right after it is issued ([`emit`]'s `wg_pending`): independent
    /// MMAs issued one after the other overlap, and the work between an
    /// MMA and the first read of its result overlaps with it (FlashAttention-3's
    /// softmax of one key block under the P·V of the previous one). On by
    /// default; the CUDA runtime reads `FERROTILE_WGMMA_DEFER=0` for A/B runs.
    pub defer_wgmma_waits: bool,
    /// Bounds on integer arguments this launch satisfies (argument index,
    /// least value), from [`ferrotile_ir::passes::proven_masks::bounds`] of
    /// the kernel: masks `arange < n` they prove all-true are dropped.
    /// Empty by default; the CUDA runtime fills it per launch
    /// (`FERROTILE_PROVEN_MASKS=0`: never).
    pub proven_masks: Vec<(u32, i64)>,
    /// Programs that must fit on one SM (`.minnctapersm`; 0 or 1: no
    /// directive): ptxas keeps registers per thread within what that
    /// allows.
    pub programs_per_sm: u32,
    /// With `tma`: views whose base adds several program-id terms (batch
    /// and head of a strided tensor, a head divided by a group size) get
    /// tensor maps of rank up to 5 ([`tma::views`]); false: one plain
    /// batch term at most. On by default since the conformance case
    /// `attention` (strided, GQA) passed on the H200 under memcheck and
    /// racecheck (session 16); the CUDA runtime reads
    /// `FERROTILE_TMA_TERMS=0` to turn it off for A/B runs.
    pub tma_terms: bool,
    /// TMA copies for views at offsets or of extents computed in the
    /// kernel (`tma` module doc: a sequence of a packed varlen batch);
    /// `FERROTILE_TMA_DYNAMIC=0` turns them off.
    pub tma_dynamic: bool,
    /// A loop-invariant `wgmma` operand block-loaded by a TMA view before
    /// its loop (K and V of attention's backward, Q of a d256 forward)
    /// lands once in a shared-memory slot of its own, read by descriptor
    /// every iteration — an A when the loop's invariant register-A
    /// operands would take more than 32 registers per thread
    /// (`async_copy`); false:
    /// the register path (the CUDA runtime reads
    /// `FERROTILE_INVARIANT_SLOTS=0`, for A/B runs).
    pub invariant_slots: bool,
    /// The register-A budget of [`Self::invariant_slots`]: a block of
    /// `dot`s whose loop-invariant A fragments would take more than this
    /// many registers per thread puts them in slots (default 32; the CUDA
    /// runtime reads `FERROTILE_INVARIANT_A_REGS`, for A/B runs).
    pub invariant_a_regs: u32,
    /// Loop-invariant `wgmma` A tiles that stay in registers (no slot:
    /// within [`Self::invariant_a_regs`]) are read as pointer loads, which
    /// load whole runs of the fragments' layout per instruction, instead of
    /// as block loads without a ring, element by element
    /// (`async_copy::register_a_invariants`; offline, the user's d64
    /// attention: 64 scalar loads → 32 pairs per thread, 255 registers and
    /// 40 bytes of spills → 250 and none). Off by default until measured
    /// on a GPU; the CUDA runtime reads `FERROTILE_LOWER_REGISTER_A=1`.
    pub lower_register_a: bool,
    /// With `invariant_slots`: a 16-bit loop-invariant operand whose view
    /// no tensor map describes (its base from a loaded offset: the varlen
    /// backward's K and V) takes such a slot too, filled by `cp.async`
    /// (copies as wide as its register layout allows, once) and waited for
    /// once at the loop's entry. Off by default: held as register A it
    /// costs no shared memory and no wait, and is cheaper where it fits;
    /// the CUDA runtime turns it on where a compilation without it uses
    /// local memory ([`PtxKernel::cp_invariant_slots`];
    /// `FERROTILE_CP_INVARIANT_SLOTS=1` always, `=0` never).
    pub cp_invariant_slots: bool,
    /// A loop-carried f32 accumulator that the loop only adds into and
    /// that is only summed along one axis afterwards is carried pre-summed
    /// inside each thread ([`crate::plan::partial`]: a GEMV's `[BK, BN]`
    /// accumulator takes one register per column a thread holds instead of
    /// one per element); false: carried whole (the CUDA runtime reads
    /// `FERROTILE_PARTIAL_ACC=0`, for A/B runs).
    pub partial_accumulators: bool,
    /// A 16-bit `mma.sync` dot with a computed operand (a dequantized
    /// weight tile) takes both operands from registers, K interleaved
    /// ([`assign`]'s `register_operand_dots`, [`fragments`]): no staging
    /// through shared memory, no `ldmatrix`, no barriers. Off by default:
    /// on the quantized GEMM it costs more than the staging it saves —
    /// the weights' loads lose their vectors (one 4-byte word per column
    /// and thread) and the other operand is loaded by every warp (offline
    /// SASS, session 25: 640 instructions per 16×128×64 step against 330
    /// staged). The CUDA runtime reads `FERROTILE_REGISTER_OPERANDS=1`.
    pub register_operands: bool,
    /// The shape of a 16-bit A operand computed element by element (not
    /// a load, not another dot's result) takes the layout whose registers
    /// are the tensor cores' A fragments ([`assign`]'s
    /// `computed_a_layouts`): the loads and arithmetic it is computed from
    /// run in that layout and the `dot` reads A from registers — no
    /// staging through shared memory, no barrier, no wait for the previous
    /// step's MMAs before the scratch is rewritten. Off here; on in the
    /// CUDA runtime (`FERROTILE_OPERAND_LAYOUTS=0` turns it off), which
    /// keeps the staged compilation where this one spills: RMSNorm fused
    /// into a GEMM ran 11.5 % faster with it (H100, session 48). No
    /// library kernel has such an operand.
    pub operand_layouts: bool,
    /// Elementwise add, sub and mul of 16-bit floats, and casts of small
    /// integers to them, two elements per instruction (`.f16x2`,
    /// `.bf16x2`; the values the widened f32 operations round to); false:
    /// one element at a time through f32 (the CUDA runtime reads
    /// `FERROTILE_PACKED_16BIT=0`, for A/B runs).
    pub packed_16bit: bool,
    /// A 2-D tile shape whose loads and stores all run contiguous along
    /// dimension 0 (none along the last: `x + kk[:, None] + rows[None, :]
    /// · stride`, a column-major or transposed operand) takes the
    /// canonical layout of the transposed shape ([`assign`]'s
    /// `load_columns`): each thread holds a vector along dimension 0, so
    /// the loads are vectors and a warp's accesses coalesce, and a copy
    /// into a K-major `wgmma` slot moves 4–16 bytes at a time instead of
    /// one element (the decode form's `xᵀ`). The CUDA runtime reads
    /// `FERROTILE_COLUMN_LAYOUTS=0` (off, for A/B runs).
    pub column_layouts: bool,
    /// Programmatic dependent launch (sm_90+), the waiting side: every
    /// thread first waits for the grids this launch depends on
    /// (`griddepcontrol.wait`: they have completed and their writes are
    /// visible — nothing of this kernel reads or writes global memory
    /// before it). Launched with the driver's
    /// programmatic-stream-serialization attribute
    /// ([`PtxKernel::dependent_launch`]), the kernel is scheduled while
    /// the one before it in its stream (or captured graph) still runs,
    /// once every program of that one has let it start
    /// ([`Self::launch_dependents`]): its programs are resident and
    /// waiting when it ends, so a chain of short kernels (a split-K
    /// product and its reduction) loses the launch latency between them.
    /// Without the attribute the wait returns at once. Implies
    /// `launch_dependents`. The CUDA runtime sets it for launches that ask
    /// (`LaunchConfig::dependent_launch`; `FERROTILE_PDL=0`: none,
    /// `FERROTILE_PDL_ALL=1`: every launch).
    pub dependent_launch: bool,
    /// Programmatic dependent launch, the other side: every program
    /// first lets a dependent launch start (`griddepcontrol.
    /// launch_dependents`; where the next kernel is not launched as a
    /// dependent, nothing happens). The CUDA runtime sets it for every
    /// launch on sm_90 (`FERROTILE_PDL=0`: off).
    pub launch_dependents: bool,
}

impl PtxOptions {
    /// Options for `sm_{sm}` with `num_warps` warps and a kernel of
    /// `n_params` parameters: every tensor-core path on (`mma`, `wgmma`,
    /// `tma`), no pipelining, no warp specialization, clusters of 1,
    /// nothing known about the integer arguments, accesses guarded
    /// ([`Safety::Safe`]), slice layouts on. Set the rest with struct
    /// update syntax (`PtxOptions { pipeline: 2, ..PtxOptions::new(90, 4, n) }`).
    pub fn new(sm: u32, num_warps: u32, n_params: usize) -> Self {
        PtxOptions {
            sm,
            num_warps,
            arg_div: vec![1; n_params],
            arg_one: vec![false; n_params],
            mma: true,
            wgmma: true,
            mma_i8: true,
            pipeline: 0,
            pipeline_every_loop: false,
            late_prefetch: false,
            inflight_register_a: false,
            unroll_wgmma: false,
            tma: true,
            warp_specialize: false,
            cluster: 1,
            safety: Safety::Safe,
            slice_layouts: true,
            broadcast_slices: false,
            register_a: true,
            unroll_pipelined: false,
            wide_offsets: true,
            affine_addresses: false,
            expand_broadcast: true,
            split_masks: false,
            branch_masks: true,
            rotate_chains: false,
            invariant_a_regs: 32,
            lower_register_a: false,
            remat_widened: true,
            defer_wgmma_waits: true,
            proven_masks: vec![],
            programs_per_sm: 0,
            tma_terms: true,
            tma_dynamic: true,
            invariant_slots: true,
            cp_invariant_slots: false,
            partial_accumulators: true,
            register_operands: false,
            operand_layouts: false,
            packed_16bit: true,
            column_layouts: true,
            dependent_launch: false,
            launch_dependents: false,
        }
    }
}

/// An emitted kernel: its PTX text and what the CUDA driver needs to launch it.
#[derive(Clone, Debug)]
pub struct PtxKernel {
    /// Name of the `.entry` function (`ft_` and the kernel's name).
    pub entry: String,
    /// The PTX module.
    pub text: String,
    /// Dynamic shared memory the launch must request, in bytes (0: none).
    pub smem_bytes: u32,
    /// Threads per program (the CUDA block): `32 · num_warps`, plus 128 for the producer
    /// warpgroup when the kernel is warp-specialized.
    pub threads: u32,
    /// How each parameter is passed, in order: the kernel's own, then the guard's hidden ones; the
    /// tensor maps ([`PtxKernel::tensor_maps`]) follow them.
    pub params: Vec<ParamAbi>,
    /// Why `dot`s of this kernel stay on the FMA path: (source line, reason).
    pub fma_dots: Vec<(u32, String)>,
    /// Why tensor-core `dot`s of this kernel run on `mma.sync` rather than
    /// Hopper's `wgmma` (sm_90 only): (source line, reason).
    pub mma_sync_dots: Vec<(u32, String)>,
    /// Where a tile goes through shared memory to change layout, and why:
    /// (source line, what moves) — `FERROTILE_EXPLAIN=1` prints them.
    pub conversions: Vec<(u32, String)>,
    /// Accumulators carried pre-summed along the axis their loop's result
    /// is summed over ([`crate::plan::partial`]): (source line of the
    /// update, registers per thread the tile would take, registers it
    /// takes) — `FERROTILE_EXPLAIN=1` prints them.
    pub partial_sums: Vec<(u32, usize, usize)>,
    /// Consecutive elements a thread owns along the last dimension of the
    /// canonical layouts: the widest access the kernel's loads and stores
    /// can make (1 where none is provably wider than one element).
    pub vector_elems: u32,
    /// Tensor maps the kernel takes after its own parameters, in order:
    /// the view and the box (elements per dimension, innermost first; 128-byte
    /// swizzle, out-of-bounds elements zero). The host builds each with
    /// [`tma::TmaView::resolve`] and `cuTensorMapEncodeTiled` and
    /// passes its 128 bytes by value (64-byte aligned).
    pub tensor_maps: Vec<TensorMapSpec>,
    /// Loops written as threaded copies of their body
    /// ([`PtxOptions::unroll_pipelined`]): 0 where the option changed
    /// nothing, and a compilation without it would print the same text.
    pub unrolled_loops: u32,
    /// Offsets taken from their 32-bit registers
    /// ([`PtxOptions::wide_offsets`]): 0 where the option changed nothing.
    pub wide_offsets: u32,
    /// Global accesses printed at a root address plus an immediate
    /// ([`PtxOptions::affine_addresses`]): 0 where the option is off or
    /// changed no access.
    pub affine_addresses: u32,
    /// Loops rotated by [`PtxOptions::rotate_chains`]: 0 where the option
    /// is off or found no chain.
    pub rotated_loops: u32,
    /// Loop-invariant operands [`PtxOptions::cp_invariant_slots`] would put
    /// in `cp.async`-filled slots: 0 where the option is on or would
    /// change nothing.
    pub cp_invariant_slots: u32,
    /// Values [`PtxOptions::broadcast_slices`]'s backward rule put in a
    /// slice layout: 0 where the option is off or changed nothing.
    pub broadcast_slices: u32,
    /// Computed A shapes [`PtxOptions::operand_layouts`] gave the
    /// K-interleaved fragments' layout: 0 where the option is off or found
    /// none.
    pub operand_layouts: u32,
    /// The kernel waits for the grids it depends on before anything else
    /// ([`PtxOptions::dependent_launch`], sm_90+ only): the launch may
    /// carry the programmatic-stream-serialization attribute. A kernel
    /// without the wait must not: it could read what the previous kernel
    /// has not written yet.
    pub dependent_launch: bool,
}

/// One tensor-map parameter of a kernel ([`PtxKernel::tensor_maps`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TensorMapSpec {
    /// The view the map describes, with the recipe the host resolves per launch.
    pub view: tma::TmaView,
    /// The box one bulk copy moves: elements per dimension, innermost first.
    pub box_dims: Vec<u32>,
    /// f32 elements rounded to tf32 by the copy (a `TFLOAT32` map).
    pub round_tf32: bool,
}

pub use crate::EmitError;
