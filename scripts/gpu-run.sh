#!/usr/bin/env bash
# Runs on the GPU machine from the repository root, over .devbin/ built by
# scripts/devbin.sh, with the device tool:
#   run  command: "bash .devbin/gpu-run.sh MODE"   carry: [".devbin", ".gl"]
# (`bash scripts/gpu-run.sh MODE` does the same from the tree). Logs go to
# $OUT (the device tool brings back at most 8 files); a summary prints last.
# Modes:
#   check:   conformance (CUDA, wgpu/Vulkan), library and GEMM tests on every
#            device, compute-sanitizer memcheck + racecheck
#   bench:   every row-kernel shape next to PyTorch eager / torch.compile, the
#            GEMM suite next to cuBLAS, the wgpu row-kernel bench
#   rows:    row kernels on 16384x1024, 16384x4096 and 4096x16384 from CUDA
#            graphs next to PyTorch eager / torch.compile / Liger-Kernel (wheel
#            in .whl/, carry it) in the same call, twice (RESULTS: row-kernel
#            table)
#   gemm:    GEMM tests on CUDA, wgmma SASS check, GEMM suite vs cuBLAS,
#            racecheck of every tuner configuration
#   gemm-rounds: GEMM suite vs cuBLAS from graphs, then 8192³ and decode
#            alternated with cuBLAS three times, ncu of one decode launch each,
#            the swapped/view/graph GEMM tests (RESULTS: GEMM tables)
#   decode:  GEMM tuner configurations' tests + the decode shape vs cuBLAS
#   tma:     GEMM tests (+ the view tests with the producer warpgroup, memcheck
#            of the view path), SASS of the TMA kernel, GEMM vs cuBLAS with
#            TMA on, off, and with the producer warpgroup
#   ws:      the producer warpgroup (FERROTILE_WS=1): view/tf32 GEMM tests,
#            racecheck, GEMM with and without it next to cuBLAS
#   wgsl:    only the wgpu side: conformance, library/GEMM tests, row-kernel
#            and GEMM benches, the (unreliable on wgpu) warps sweep
#   profile: ncu side by side: the tuner's decode (16×8192×8192 bf16) and
#            4096³ bf16 kernels against cuBLAS's
#   overhead: launch overhead and cold compile time, then the CUDA warps sweep
#   verify:  CUDA conformance, library and GEMM tests (`verify rest`: the
#            GEMM tuner-configuration sweeps) — for changes that must not
#            alter what runs
#   safety:  conformance (CUDA) and library tests, memcheck and racecheck of
#            the conformance suite (the guarded out-of-bounds cases included)
#   guards:  the row-kernel and GEMM benches guarded and `--unchecked`,
#            alternated twice, each tuned for itself (RESULTS: "Guards")
#   slices:  slice layouts: CUDA conformance, memcheck / racecheck of the
#            multi-row and reduction cases (`slices-bench [SHAPES]`: the
#            multi-row softmax with slice layouts off and on, the library
#            softmax and PyTorch on the same shapes)
#   attention [SHAPES]: the user-written FlashAttention-2 (`attn-user`, issue
#            20's test kernel; checked against f64) next to SDPA per backend
#            and a Triton FA2 of the same algorithm (`peers.py --attention`),
#            then the CUDA conformance case `attention` under memcheck and
#            racecheck
#   attn-lib: the library's attention: its tests on CUDA, memcheck, MHA
#            and GQA timings next to the peers (`peers.py --attention`)
#   attn-bwd: the library's attention backward: its tests on CUDA,
#            memcheck and racecheck (`attn-bwd-bench [SHAPES]`: B:H:S:D shapes,
#            MHA, next to SDPA's backward per backend and a Triton FA2
#            backward of the same algorithm: `peers.py --attn-backward`)
#   varlen [SHAPES]: the varlen attention (forward and backward): its tests
#            on CUDA, racecheck and memcheck of the varlen backward, then
#            `attn-user --library --varlen` (B:H:S:D shapes: the varlen
#            backward next to the dense one on the same tokens, and on a
#            ragged batch of the same total)
#   s55a: session 55 — CUDA conformance with register-A MMAs in flight
#            (FERROTILE_INFLIGHT_REG_A=1), and with threaded copies of wgmma
#            bodies too (FERROTILE_UNROLL_WGMMA=1)
#   s55b: session 55 — the user's norm_matmul with each of the two, both,
#            neither (alternated twice), next to its Triton twin
#   s55x: session 55 — s55a-c's essentials in one call (s55y: ~5 minutes of it)
#   s55c: session 55 — W4A16's decode form with the scales on the weights
#            (MMA in flight) against on the partial sums, forced, 64 rows
#   s54e: session 54 — FP8 tuned with sustained samples
#            (FERROTILE_AUTOTUNE_SUSTAIN_MS=5) against the default, the peer
#   s54c: session 54 — FP8 with split K for few rows against the build
#            before it (dequant-user-base), its tests, the peers
#   s54a: session 54 — W4A16 / W8A16 tuned next to cuBLAS, tinygemm and
#            gemlite (carry .whl)
#   s54b: session 54 — W8A8 / FP8 (row-wise, block-wise) tuned next to
#            _int_mm / _scaled_mm (FP8 also with FERROTILE_AUTOTUNE_SUSTAIN_MS=5,
#            and forced tiles); s54d: the user's attention with and without
#            the producer warpgroup next to SDPA and Triton's twin
#   s50c: session 50 — dependent launches asked for per launch: the
#            chains' tests, the W4A16 library and 16-bit norms off / on
#   s50b: session 50 — programmatic dependent launch off / on: tests,
#            the W4A16 library, the main job
#   s50a: session 50 — the decode form with per-step scaled partials
#            (dequant-user-e1) against HEAD's, tuned and forced, peers
#            (carry .whl)
#   s49a / s49b: session 49 — correctness (conformance, quant incl. the
#            decode form, W8A8, GEMM) / the W4A16 library with the decode
#            form next to the peers
#   tuner [SHAPES]: the tuner's picks are stable: the library's W4A16 and
#            W8A16 decode shapes tuned twice, each into a fresh cache
#            (FERROTILE_AUTOTUNE_PRINT shows both picks), W4A16 with a
#            fused bias + GELU, then the W4A16 peers (carry .whl)
#   attn-decode [SHAPES]: the library's decode attention: tests on CUDA, memcheck,
#            racecheck, then B:H:HK:SQ:SK:D shapes next to SDPA per backend
#   tma-terms: the attention case with FERROTILE_TMA_TERMS=1, memcheck and
#            racecheck
#   quant [SHAPES]: the library's quantized GEMM: CUDA conformance, its
#            tests on CUDA, memcheck and racecheck, then decode shapes next to
#            the W4A16 peers (`dequant-user --library`, `peers.py --dequant`)
#   quant-lib [SHAPES]: only the library's quantized GEMM, tuned, no peers
#   w8a8 [SHAPES]: int8 conformance, W8A8 tests (memcheck, racecheck), the
#            library's W8A8 GEMM next to cuBLAS bf16 and torch._int_mm
#   fp8 [SHAPES]: the same for the FP8 GEMM next to torch._scaled_mm
#   dequant [SHAPES]: the user-written W4A16 GEMM (`dequant-user`, issue 20's
#            second test kernel, checked against f64) next to cuBLAS bf16
#            dense, a Triton kernel of the same algorithm, gemlite (wheel in
#            .whl/, carry it) and tinygemm (`peers.py --dequant`)
#   ab:      the row-kernel and GEMM benches from a before and an after build,
#            alternated twice (.devbin/bench-before, .devbin/bench)
#   cli:     streams + cudarc interop tests (memcheck), `ferrotile devices`,
#            `ferrotile run-library` with its chart, the row and GEMM benches
#            next to their peers and their comparison chart
#   ecosystem: candle's CUDA tensors through ferrotile-candle (memcheck
#            too), NCCL collectives, the tensor-parallel example, the W4A16
#            GEMV's host time per call
#   facts:   tests on CUDA, row kernels on short rows next to PyTorch, the
#            main job, the W4A16 host time (session 21's launch facts and
#            autotuner fix)
#   views [SHAPES]: transposed views on `mma.sync` (session 22): CUDA
#            conformance with and without `wgmma`, the column-major GEMM
#            tests on `mma.sync`, attention and quant tests, memcheck and
#            racecheck of the decode tests, then decode shapes (default and
#            forced configurations) next to SDPA per backend
#   paged:   index loads pipelined with the loads they address (session
#            22): CUDA conformance, attention (paged cases) and quant tests,
#            memcheck over attention, decode from contiguous and paged
#            caches next to SDPA per backend, the W4A16 library next to its
#            peers (carry .whl)
#   partial: partial accumulators (session 23): CUDA conformance (case
#            partial_sums), the quantized-GEMM tests on CUDA, memcheck, then
#            the W4A16 and W8A16 library with FERROTILE_PARTIAL_ACC=0 and on,
#            alternated twice, each tuned into its own cache, next to the
#            W4A16 peers (carry .whl)
#   reduce:  the split-K reduction pipelined (session 23): quantized-GEMM,
#            split-K GEMM and W8A8 tests on CUDA, memcheck, then W4A16 /
#            W8A16 / W8A8 decode and the dense bf16/f16 16x8192x8192 GEMM next
#            to their peers, and ncu of one reduction (carry .whl)
#   odd:     the thread runs follow the widest access (session 23): CUDA
#            conformance, library and quantized-GEMM tests on CUDA, then the
#            row kernels on odd and aligned widths next to PyTorch
#   libcheck: the library's attention, GEMM (tuner sweeps skipped), FP8
#            and W8A8 tests on CUDA after a layout change (session 23:
#            `vector_elems`)
#   packed:  packed 16-bit dequantization (session 25): CUDA conformance,
#            quantized-GEMM tests (register operands off and on), memcheck
#   packed-bench [SHAPES] [SHAPES8] [CONFIGS]: W4A16 / W8A16 before
#            (.devbin/dequant-user-before) and after, alternated, then the
#            W4A16 peers (carry .whl) and forced M = 1 configurations
#   packed-ncu [CONFIGS] [CONFIG]: forced 16-row W4A16 configurations at
#            16x8192x8192 and 1x8192x8192, ncu of one (and its reduction)
#   fused [SHAPES]: split-K summed in the GEMM's last program (session 26:
#            atomic_add with old values and AcqRel): the atomic conformance
#            cases under memcheck and racecheck, the quantized-GEMM tests on
#            CUDA (every tuner candidate, memcheck), then W4A16 / W8A16
#            before (.devbin/dequant-user-before) and after, alternated
#            twice, each tuned into its own cache, forced split 8 / 16
#            configurations and the W4A16 peers (carry .whl)
#   s42:     session 42's offline work on the GPU (first): racecheck of the
#            dynamic views' valid-row reads with the producer (owed since
#            session 41), the CUDA conformance suite (one-trip expand +
#            broadcast in every kernel; `func_segment_*`), the library's
#            attention / GEMM / quantized / W8A8 / FP8 tests (scratch per
#            stream, split-K on two streams, varlen tuned and on trust,
#            graph capture), then conformance and attention tests with
#            FERROTILE_BROADCAST_SLICES=1
#   s42-bench [SHAPES]: the backward with FERROTILE_EXPAND_BROADCAST=0/1
#            and FERROTILE_BROADCAST_SLICES=0/1, alternated twice, each
#            tuned into its own cache; the varlen bench (tuned, checked and
#            trusted offsets) next to dense
#   s43:     session 42's checks ordered by what they guard, CUDA only, for
#            one 600 s call: conformance, the attention library tests,
#            racecheck of the views' valid-row reads (owed since session 41),
#            W8A8 / FP8 / quantized / library tests, racecheck of varlen,
#            then the GEMM tests (their tuner sweeps last)
#   s43t:    the library's attention tests on CUDA alone (one pass on)
#   s43b [SHAPE]: s43a's tests and A/B only (a short device budget)
#   s43a [SHAPE]: the one-pass backward's tests on CUDA, its A/B against
#            the dQ pass (every candidate, the tuner's picks), the peers,
#            then the CUDA conformance suite
#   s44a [SHAPE]: affine addresses (FERROTILE_AFFINE_ADDRESSES=1) under
#            the CUDA conformance suite and the attention tests (one pass
#            on), then the backward's A/B without and with them
#   s46a:    session 45's opt-in options (rotated chains, lowered register-A
#            tiles) through the conformance suite and the user's
#            attention, off / on: the measurements to turn them on by
#   s46b:    the library's decode and forward with rotated chains off / on
#   s48:     s48a and s48b's decisive parts in one call (a short budget)
#   s48a:    s47a and s46e's grouped-GEMM half in one call (session 48)
#   s48b:    the suite guarded and unchecked, with its Triton twins
#   s48c:    s46a's rotation half (conformance, user attention per tile)
#   s46e:    late prefetch (opt-in) through the tests, the grouped GEMM on / off
#   s46d:    the grouped GEMM's variants next to Triton's, and ncu of both
#   s46c:    the library's attention tuned twice from fresh caches (its
#            picks printed), then the attention tests on CUDA
#   s45a:    affine addresses through the GEMM/quantized tests, the grouped
#            GEMM with them off/on, FP8 next to torch._scaled_mm
#   s45b [SHAPES]: the user's tutorial-form attention next to Triton's
#   s45c [SHAPES]: the same with FERROTILE_ROTATE_CHAINS off / on, the
#            hand-rotated kernel, the peers
#   s44b [SHAPE]: the backward with affine addresses and broadcast slices,
#            the peers, the attention tests with slices, the GEMM and
#            quantized tests with affine addresses
#   s43-bench [SHAPE]: the backward (one shape, both dtypes, not causal):
#            each dK/dV candidate with the dQ pass and with dQ by atomics,
#            the tuner's pick (free, deterministic); the backward peers
#   suite:   issue 20's generality suite: `user-suite` (nine kernels of
#            different kinds written in the DSL, checked against f64) and
#            their Triton twins (`peers.py --suite`), then each ratio and
#            the geometric mean (graph-replayed times)
#   vulkan-lib: conformance and the library's tests (attention, quantized,
#            W8A8, FP8) on wgpu through the H200's Vulkan driver, then
#            `run-library --device wgpu` (session 24)
#   final:   the end-of-session check: conformance (CUDA, Vulkan), library
#            tests, GEMM tests on Vulkan, memcheck/racecheck of the GEMM paths
#            and the conformance suite, the wgpu row-kernel bench
# Experiment modes of past sessions (x11a, final11, sweep10, ...) live in
# scripts/experiments/gpu-run-sessions.sh.
set -uo pipefail
D=${DEVBIN:-.devbin}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
L=$OUT/all.log
S=$OUT/summary.txt
# the Vulkan loader (device/README.md), on the GPU machine only
if command -v nvidia-smi >/dev/null && ls .gl/*.deb >/dev/null 2>&1; then for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
# Python peers the image lacks (gemlite, tqdm) travel as wheels in .whl/
if command -v nvidia-smi >/dev/null && ls .whl/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site; fi
step() { local name=$1 limit=$2; shift 2; local s; s=$(date +%s); echo "=== $name: $*" >> "$L"; timeout "$limit" "$@" >> "$L" 2>&1; echo "$name rc=$? $(( $(date +%s) - s ))s" | tee -a "$S"; }
# block-wise FP8 tuned with loops rotated (the default) and in source
# order (FERROTILE_ROTATE_CHAINS=0), each from a fresh cache, alternated
# twice, on the shapes $1
fp8_blocks_rot_src() {
  local r
  for r in 1 2; do
    FP8_BLOCKS=1 FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_b$r step blocks_rot_$r 60 $D/dequant-user --fp8 --device cuda --shapes "$1"
    FERROTILE_ROTATE_CHAINS=0 FP8_BLOCKS=1 FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_s$r step blocks_src_$r 60 $D/dequant-user --fp8 --device cuda --shapes "$1"
  done
}
case "${1:-check}" in
  s55a)
    # session 55: the CUDA conformance suite with register-A MMAs in flight
    # (FERROTILE_INFLIGHT_REG_A=1), then with threaded copies of wgmma
    # bodies too (FERROTILE_UNROLL_WGMMA=1)
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    FERROTILE_INFLIGHT_REG_A=1 step conf_inflight 240 $D/conformance_cuda --nocapture
    FERROTILE_INFLIGHT_REG_A=1 FERROTILE_UNROLL_WGMMA=1 step conf_inflight_unroll 240 $D/conformance_cuda --nocapture
    grep -E "^=== |FAILED|panicked|test result|conformance on" "$L" | cut -c1-170 | tail -30
    ;;
  s55b)
    # session 55: the user's norm_matmul (RMSNorm fused into a 4096³ bf16
    # GEMM; each run checked against f64) with neither option, register-A
    # MMAs in flight, threaded copies of wgmma bodies, both — alternated
    # twice — then its Triton twin
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    for r in 1 2; do
      for v in "0 0" "1 0" "0 1" "1 1"; do
        set -- $v
        FERROTILE_INFLIGHT_REG_A=$1 FERROTILE_UNROLL_WGMMA=$2 step nm_i$1_u$2_$r 60 $D/user-suite --device cuda --only norm_matmul
      done
    done
    step nm_triton 150 python3 $D/peers.py --suite --only norm_matmul
    grep -E "^=== |FAILED|panicked|suite norm|FAIL" "$L" | cut -c1-170 | tail -40
    ;;
  s55x)
    # session 55, one call for what s55a-c ask (device time was short):
    # the fused CUDA conformance cases with register-A MMAs in flight and
    # threaded wgmma copies, the decode tests with `scale_w`, then
    # norm_matmul with neither / in flight / both and W4A16's 64-row
    # decode tiles `xD` / `xDS`, alternated twice; Triton's twin
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    CASES=dot_chain,norm_matmul,decode_t,moe_expert,func_gemm,colmajor_matmul,invariant_operands,attention
    FERROTILE_INFLIGHT_REG_A=1 FERROTILE_UNROLL_WGMMA=1 FERROTILE_CASE=$CASES step conf_iu 80 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step quant_decode 80 $D/quant --nocapture wq_decode_form
    C64=64x256x128x8x2x4xD,64x256x128x8x2x4xDS,64x64x128x4x2x4xD,64x64x128x4x2x4xDS
    for r in 1 2; do
      for v in "0 0" "1 0" "1 1"; do
        set -- $v
        FERROTILE_INFLIGHT_REG_A=$1 FERROTILE_UNROLL_WGMMA=$2 step nm_i$1_u$2_$r 40 $D/user-suite --device cuda --only norm_matmul
      done
      step w4_64_$r 50 $D/dequant-user --library --device cuda --only-forced --shapes 64x8192x8192 --lib-configs $C64
    done
    step nm_triton 80 python3 $D/peers.py --suite --only norm_matmul
    grep -E "^=== |FAILED|panicked|test result|conformance on|suite norm|FAIL|^library|-> " "$L" | cut -c1-170 | tail -60
    ;;
  s55y)
    # s55x cut to ~5 minutes: the fused conformance cases with both
    # options, norm_matmul neither / in flight alternated twice, the
    # 64-row decode tiles once
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    FERROTILE_INFLIGHT_REG_A=1 FERROTILE_UNROLL_WGMMA=1 FERROTILE_CASE=dot_chain,norm_matmul,decode_t,attention step conf_iu 70 $D/conformance_cuda --nocapture
    for r in 1 2; do
      FERROTILE_INFLIGHT_REG_A=0 step nm_i0_$r 35 $D/user-suite --device cuda --only norm_matmul
      FERROTILE_INFLIGHT_REG_A=1 step nm_i1_$r 35 $D/user-suite --device cuda --only norm_matmul
    done
    step w4_64 50 $D/dequant-user --library --device cuda --only-forced --shapes 64x8192x8192 --lib-configs 64x256x128x8x2x4xD,64x256x128x8x2x4xDS,64x64x128x4x2x4xD,64x64x128x4x2x4xDS
    grep -E "^=== |FAILED|panicked|test result|conformance on|suite norm|FAIL|^library|-> " "$L" | cut -c1-170 | tail -40
    ;;
  s55z)
    # s55y cut to ~2 minutes: norm_matmul's conformance case with the MMA
    # in flight, then norm_matmul off / on once
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    FERROTILE_INFLIGHT_REG_A=1 FERROTILE_CASE=norm_matmul,dot_chain step conf_i 40 $D/conformance_cuda --nocapture
    FERROTILE_INFLIGHT_REG_A=0 step nm_i0 30 $D/user-suite --device cuda --only norm_matmul
    FERROTILE_INFLIGHT_REG_A=1 step nm_i1 30 $D/user-suite --device cuda --only norm_matmul
    grep -E "^=== |FAILED|panicked|test result|conformance on|suite norm|FAIL" "$L" | cut -c1-170 | tail -20
    ;;
  s55c)
    # session 55: the decode form with the scales on the weights and its
    # MMA in flight (`xDS`) against the scales on the partial sums (`xD`),
    # forced tiles at 64 (and 16) rows, alternated twice; the quant tests'
    # decode cases on CUDA first (every `scale_w` tile among them)
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    FERROTILE_TEST_DEVICES=cuda step quant_decode 120 $D/quant --nocapture wq_decode_form
    C64=64x256x128x8x2x4xD,64x256x128x8x2x4xDS,64x64x128x4x2x4xD,64x64x128x4x2x4xDS,64x64x128x4x2x8xD,64x64x128x4x2x8xDS
    for r in 1 2; do
      step w4_64_$r 90 $D/dequant-user --library --device cuda --only-forced --shapes 64x8192x8192,48x4096x14336 --lib-configs $C64
    done
    step peers_64 90 python3 $D/peers.py --dequant --dq-shapes 64x8192x8192,48x4096x14336
    grep -E "^=== |FAILED|panicked|test result|^library|-> |cublas|gemlite" "$L" | cut -c1-170 | tail -50
    ;;
  s54e1)
    # s54e with one round (device time was short)
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    G=4096x4096x4096,8192x8192x8192
    FERROTILE_AUTOTUNE_SUSTAIN_MS=5 FERROTILE_AUTOTUNE_PRINT=all FERROTILE_CACHE_DIR=/tmp/ftl_s1 step fp8_sustain_1 60 $D/dequant-user --fp8 --device cuda --shapes $G
    FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_d1 step fp8_default_1 60 $D/dequant-user --fp8 --device cuda --shapes $G
    step peers_fp8 40 python3 $D/peers.py --fp8 --w8-shapes $G
    grep -E "^=== |FAILED|panicked|-> |scaled_mm|^library|^fp8" "$L" | cut -c1-170 | tail -30
    ;;
  s54e)
    # session 54: FP8 tuned with every sample a sustained batch
    # (FERROTILE_AUTOTUNE_SUSTAIN_MS=5) against the default sampling, each
    # from a fresh cache, alternated twice, next to the tile forced and
    # torch._scaled_mm
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    G=4096x4096x4096,8192x8192x8192
    for r in 1 2; do
      FERROTILE_AUTOTUNE_SUSTAIN_MS=5 FERROTILE_AUTOTUNE_PRINT=all FERROTILE_CACHE_DIR=/tmp/ftl_s$r step fp8_sustain_$r 60 $D/dequant-user --fp8 --device cuda --shapes $G
      FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_d$r step fp8_default_$r 60 $D/dequant-user --fp8 --device cuda --shapes $G
    done
    step fp8_forced 40 $D/dequant-user --fp8 --device cuda --shapes $G --w8-configs 128x256x128x8x3x1x1
    step peers_fp8 40 python3 $D/peers.py --fp8 --w8-shapes $G
    grep -E "^=== |FAILED|panicked|-> |scaled_mm|^library" "$L" | cut -c1-170 | tail -40
    ;;
  s54c)
    # session 54: FP8 with K split for few rows — its CUDA tests (every
    # few-rows candidate, tuned), then this build against the one before
    # it (dequant-user-base: no split, the many-rows list) on decode
    # shapes, each tuned from a fresh cache, alternated twice; block-wise
    # with the split once; cuBLAS bf16 and torch._scaled_mm on the same
    # shapes (s54a's W4A16 / W8A16 table: a call of its own)
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    FERROTILE_TEST_DEVICES=cuda step fp8_tests 60 $D/fp8 --nocapture split
    F=1x8192x8192,16x8192x8192,16x4096x14336
    for r in 1 2; do
      FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_n$r step fp8_split_$r 45 $D/dequant-user --fp8 --device cuda --shapes $F
      FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_o$r step fp8_base_$r 45 $D/dequant-user-base --fp8 --device cuda --shapes $F
    done
    step peers_fp8_small 45 python3 $D/peers.py --fp8 --w8-shapes $F
    FP8_BLOCKS=1 FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_bn step blocks_split 40 $D/dequant-user --fp8 --device cuda --shapes $F
    grep -E "^=== |FAILED|panicked|test result|-> |scaled_mm|cublas|^library" "$L" | cut -c1-170 | tail -60
    ;;
  s54a)
    # session 54, call 1 (the first H200 since session 50): W4A16 and
    # W8A16 from the library, tuned, next to cuBLAS bf16, tinygemm and
    # gemlite in the same call (carry .whl)
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    SH=1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096
    FERROTILE_AUTOTUNE_PRINT=1 step lib_w4 150 $D/dequant-user --library --device cuda --shapes $SH
    FERROTILE_AUTOTUNE_PRINT=1 step lib_w8 150 $D/dequant-user --library --w8 --device cuda --shapes $SH
    step peers_dq 200 python3 $D/peers.py --dequant --dq-shapes $SH
    grep -E "^=== |FAILED|panicked|^library|-> |cublas|tinygemm|gemlite" "$L" | cut -c1-170 | tail -60
    ;;
  s54b)
    # session 54: W8A8 and FP8 (row-wise and block-wise) tuned next to
    # torch._int_mm / torch._scaled_mm; FP8 tuned again with the finalists
    # timed under sustained load (FERROTILE_AUTOTUNE_SUSTAIN_MS=5), and
    # three tiles forced
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    G=4096x4096x4096,8192x8192x8192
    FERROTILE_AUTOTUNE_PRINT=1 step w8a8_lib 120 $D/dequant-user --w8a8 --device cuda --shapes $G
    FERROTILE_AUTOTUNE_PRINT=all FERROTILE_CACHE_DIR=/tmp/ftl_f0 step fp8_lib 120 $D/dequant-user --fp8 --device cuda --shapes $G
    FERROTILE_AUTOTUNE_SUSTAIN_MS=5 FERROTILE_AUTOTUNE_PRINT=all FERROTILE_CACHE_DIR=/tmp/ftl_f5 step fp8_lib_sustain 120 $D/dequant-user --fp8 --device cuda --shapes $G
    step fp8_forced 90 $D/dequant-user --fp8 --device cuda --shapes $G --w8-configs 128x256x256x8x2x1x1,128x256x128x8x3x1x1,128x256x128x8x4x1x1
    FP8_BLOCKS=1 FERROTILE_AUTOTUNE_PRINT=1 step fp8_blocks 90 $D/dequant-user --fp8 --device cuda --shapes $G
    step peers_w8a8 100 python3 $D/peers.py --w8a8 --w8-shapes $G
    step peers_fp8 100 python3 $D/peers.py --fp8 --w8-shapes $G
    grep -E "^=== |FAILED|panicked|test result|-> |int_mm|scaled_mm|^library|^fp8|^w8a8" "$L" | cut -c1-170 | tail -70
    ;;
  s54d)
    # session 54: the user's tutorial-form attention (bf16 and f16) with
    # the producer warpgroup and without, next to SDPA per backend and
    # Triton's twin
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    AS=4:32:4096:64,4:32:4096:128
    FERROTILE_WS=1 step user_ws 120 $D/attn-user --device cuda --shapes $AS --causal both --configs 128x128x8x2,128x64x8x2
    step user_one 120 $D/attn-user --device cuda --shapes $AS --causal both --configs 128x64x4x2,128x128x8x2,64x64x4x3
    step peers_attn 200 python3 $D/peers.py --attention --attn-shapes $AS
    grep -E "^=== |FAILED|panicked|test result|-> |int_mm|scaled_mm|BEST|triton|cudnn|flash2|^library|^fp8|^w8a8" "$L" | cut -c1-170 | tail -90
    ;;
  check)
    step conformance_cuda 150 $D/conformance_cuda --nocapture
    step conformance_wgpu 240 $D/conformance_wgpu --nocapture
    step library 150 $D/library
    step gemm 150 $D/gemm
    FERROTILE_TEST_DEVICES=cpu,cuda step memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cpu,cuda step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 $D/gemm --nocapture gemm_half gemm_epi
    grep -E "conformance on|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|skipped" "$L" | head -20
    ;;
  bench)
    FERROTILE_AUTOTUNE_PRINT=1 step bench_lib 240 $D/bench --json "$OUT/ft.json"
    step peers_lib 240 python3 $D/peers.py --json "$OUT/peers.json"
    FERROTILE_AUTOTUNE_PRINT=1 step bench_gemm 150 $D/bench --device cuda --gemm --json "$OUT/gemm_ft.json"
    step peers_gemm 60 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    step bench_wgpu 120 $D/bench --device wgpu --shapes 16384x4096,4096x16384 --kernels softmax,layer_norm --dtypes f32
    python3 $D/compare.py "$OUT/ft.json" "$OUT/peers.json" > "$OUT/table.md" 2>&1
    grep -E "TFLOP|GB/s|ok$|FAIL" "$L" | grep -v autotune | tail -40
    ;;
  rows)
    # the row kernels timed as their peers are (CUDA graphs; back to back
    # alongside), next to PyTorch eager / torch.compile in the same call, on
    # the two shapes of the row-kernel table's headline rows (session 11
    # ran this as `rows11`)
    SH=16384x1024,16384x4096,4096x16384
    FERROTILE_AUTOTUNE_PRINT=1 step bench_lib 150 $D/bench --device cuda --shapes $SH --json "$OUT/ft.json"
    step peers_lib 200 python3 $D/peers.py --shapes $SH --json "$OUT/peers.json"
    step bench_lib2 150 $D/bench --device cuda --shapes $SH
    python3 $D/compare.py "$OUT/ft.json" "$OUT/peers.json" > "$OUT/table.md" 2>&1
    grep -E "GB/s|ok$|FAIL|no graph" "$L" | grep -v autotune | tail -30
    cat "$OUT/table.md"
    ;;
  gemm)
    FERROTILE_TEST_DEVICES=cuda step gemm 300 $D/gemm --nocapture
    $D/emit-ptx gemm 128x256x64 bf16 8 90 stages=3 > "$OUT/wgmma.ptx" 2>/dev/null
    (cd "$OUT" && ptxas -arch=sm_90a -o wgmma.cubin wgmma.ptx && cuobjdump --dump-sass wgmma.cubin > wgmma.sass; echo "HGMMA in SASS: $(grep -c HGMMA wgmma.sass)"; rm -f wgmma.cubin) >> "$S" 2>&1
    FERROTILE_AUTOTUNE_PRINT=1 step bench_gemm 200 $D/bench --device cuda --gemm --json "$OUT/gemm_ft.json"
    step peers_gemm 60 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    FERROTILE_TEST_DEVICES=cuda step racecheck 200 compute-sanitizer --tool racecheck --error-exitcode 9 $D/gemm --nocapture gemm_every
    grep -E "TFLOP|FAILED|panicked|-> |RACECHECK SUMMARY" "$L" | grep -v "autotune.*/" | tail -40
    ;;
  gemm-rounds)
    # the GEMM suite from graphs next to cuBLAS (one pass each), then the
    # shapes whose ratio moves with the GPU's clocks (8192³ draws the power
    # limit; decode) alternated ours / cuBLAS three times, each process
    # timing the same way (graphs; our tuner's choice from the first pass,
    # on disk); then the GEMM tests of the swapped, view and graph paths
    # (the whole GEMM test file outlives a 300 s limit). Session 11 ran this
    # as `final11` (scripts/experiments/gpu-run-sessions.sh).
    export FERROTILE_CACHE_DIR=/tmp/ftf
    FERROTILE_AUTOTUNE_PRINT=1 step bench_gemm 220 $D/bench --device cuda --gemm --json "$OUT/gemm_ft.json"
    step peers_gemm 90 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    for r in 1 2 3; do
      for sh in 8192x8192x8192 16x8192x8192; do
        step "ft_${sh}_$r" 90 $D/bench --device cuda --gemm-shape $sh --dtypes bf16,f16
        step "cublas_${sh}_$r" 60 python3 $D/peers.py --gemm --gemm-shape $sh --dtypes bf16,f16
      done
    done
    # one decode launch of each under ncu (clocks as they are)
    NCU="ncu --clock-control none --section SpeedOfLight --metrics gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_active.max,dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
    step ncu_ft 90 $NCU --kernel-name regex:gemm_kernel --launch-skip 5 --launch-count 1 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16 --quick
    step ncu_cublas 90 $NCU --kernel-name regex:'gemm|gemv|sm90|nvjet' --launch-skip 5 --launch-count 1 python3 -c "import torch; a=torch.randn(16,8192,device='cuda',dtype=torch.bfloat16); b=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); [torch.matmul(a,b) for _ in range(10)]; torch.cuda.synchronize()"
    FERROTILE_TEST_DEVICES=cuda step tests 200 $D/gemm --nocapture gemm_swapped gemm_views_every graph_capture
    grep -E "^=== |cublas|^(bf16|f16|tf32|f32)|autotune.*->|no graph" "$L" | grep -v "^=== " | cut -c1-120 | tail -60
    grep -E "gpu__time|sm__cycles_active|dram__bytes|hit_rate|DRAM Throughput|  Duration" "$L" | tail -16
    grep -E "^test |test result" "$L" | tail -8
    ;;
  decode)
    FERROTILE_TEST_DEVICES=cuda step gemm_every 200 $D/gemm --nocapture gemm_every gemm_split_k
    FERROTILE_AUTOTUNE_PRINT=1 step bench_decode 120 $D/bench --device cuda --gemm-shape 16x8192x8192
    step peers_gemm 60 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    grep -E "TFLOP|16x8192|FAILED|panicked|test result|autotune.*->" "$L" | grep -v "autotune.*/[0-9]" | tail -20
    ;;
  tma)
    # the TMA view path: GEMM tests on CUDA (memcheck on the view tests),
    # the SASS of the large-shape configuration, GEMM vs cuBLAS with TMA on
    # and off (the tuner's picks from the first run are reused) and with the
    # producer warp (tuned on its own)
    FERROTILE_TEST_DEVICES=cuda step gemm 240 $D/gemm --nocapture
    FERROTILE_WS=1 FERROTILE_TEST_DEVICES=cuda step gemm_ws 150 $D/gemm --nocapture gemm_views gemm_tf32
    FERROTILE_ATTN_LARGE=0 FERROTILE_TEST_DEVICES=cuda step memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 $D/gemm --nocapture gemm_views
    $D/emit-ptx gemm 128x256x64 bf16 8 90 stages=3 views > "$OUT/tma.ptx" 2>/dev/null
    (cd "$OUT" && ptxas -arch=sm_90a -o tma.cubin tma.ptx && cuobjdump --dump-sass tma.cubin > tma.sass; echo "HGMMA $(grep -c HGMMA tma.sass) UTMALDG $(grep -c UTMALDG tma.sass)"; rm -f tma.cubin) >> "$S" 2>&1
    FERROTILE_AUTOTUNE_PRINT=1 step bench_gemm 200 $D/bench --device cuda --gemm --json "$OUT/gemm_ft.json"
    FERROTILE_TMA=0 step bench_gemm_notma 120 $D/bench --device cuda --gemm --json "$OUT/gemm_ft_notma.json"
    FERROTILE_WS=1 FERROTILE_CACHE_DIR=/tmp/ft_ws step bench_gemm_ws 120 $D/bench --device cuda --gemm --json "$OUT/gemm_ft_ws.json"
    step peers_gemm 60 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    grep -E "TFLOP|FAILED|panicked|-> |ERROR SUMMARY|test result" "$L" | grep -v "autotune.*/" | tail -45
    ;;
  ws)
    # the producer warpgroup (FERROTILE_WS=1): the view and tf32 GEMM tests
    # and racecheck with it, then GEMM with and without it (each tuned on
    # its own) next to cuBLAS
    FERROTILE_WS=1 FERROTILE_TEST_DEVICES=cuda step gemm_ws 150 $D/gemm --nocapture gemm_views gemm_tf32
    FERROTILE_WS=1 FERROTILE_AUTOTUNE=0 FERROTILE_TEST_DEVICES=cuda step racecheck_ws 100 compute-sanitizer --tool racecheck --error-exitcode 9 $D/gemm --nocapture gemm_views_every
    FERROTILE_WS=1 FERROTILE_CACHE_DIR=/tmp/ft_ws step bench_ws 150 $D/bench --device cuda --gemm --dtypes bf16,f16,tf32 --json "$OUT/gemm_ft_ws.json"
    FERROTILE_CACHE_DIR=/tmp/ft_one step bench_one 150 $D/bench --device cuda --gemm --dtypes bf16,f16,tf32 --json "$OUT/gemm_ft.json"
    step peers_gemm 60 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    grep -E "TFLOP|FAILED|panicked|RACECHECK SUMMARY|test result|^(bf16|f16|tf32) " "$L" | tail -40
    ;;
  wgsl)
    step conformance_wgpu 240 $D/conformance_wgpu --nocapture
    FERROTILE_TEST_DEVICES=cpu,wgpu step library 120 $D/library
    FERROTILE_TEST_DEVICES=cpu,wgpu step gemm 120 $D/gemm
    FERROTILE_AUTOTUNE_PRINT=1 step bench_wgpu 150 $D/bench --device wgpu --shapes 16384x4096,4096x16384 --kernels softmax,layer_norm --dtypes f32
    step bench_wgpu_gemm 60 $D/bench --device wgpu --gemm-small
    step sweep_wgpu 240 $D/bench --device wgpu --sweep
    grep -E "conformance on|FAILED|skipped|GB/s|TFLOP|autotune" "$L" | tail -40
    ;;
  profile)
    # tune first (the winner goes to the disk cache), then profile one
    # launch of the winner and one of cuBLAS's kernel for the same shape
    NCU="ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats"
    for shape in 16x8192x8192 4096x4096x4096; do
      step tune_$shape 120 $D/bench --device cuda --gemm-shape $shape --dtypes bf16
      step ncu_ft_$shape 120 $NCU --kernel-name regex:gemm_kernel --launch-skip 5 --launch-count 1 $D/bench --device cuda --gemm-shape $shape --dtypes bf16 --quick
      IFS=x read -r M N K <<< "$shape"
      step ncu_cublas_$shape 120 $NCU --kernel-name regex:'gemm|gemv|sm90|cutlass' --launch-skip 5 --launch-count 1 python3 -c "import torch; a=torch.randn($M,$K,device='cuda',dtype=torch.bfloat16); b=torch.randn($K,$N,device='cuda',dtype=torch.bfloat16); [torch.matmul(a,b) for _ in range(10)]; torch.cuda.synchronize()"
    done
    grep -E "^  [A-Z].*(Throughput|Duration|Stall|Occupancy|Registers|Bandwidth|Warp Cycles)" "$L" | head -80
    ;;
  overhead)
    # cold compile + first launch, cached launch enqueue and round trip;
    # then warps-per-program sweeps of the row kernels on CUDA
    step overhead 120 $D/bench --overhead
    step sweep 240 $D/bench --sweep
    grep -vE "^=== |autotune" "$L" | tail -60
    ;;
  verify)
    # a change that must not alter what runs on the GPU (a refactor): the
    # CUDA conformance suite, the library tests and the GEMM tests on CUDA
    # (every tuner configuration included: pass `rest` as $2 for the two
    # sweeps, which outlive one call together with the rest)
    if [ "${2:-}" = rest ]; then
      FERROTILE_TEST_DEVICES=cuda step gemm_sweeps 500 $D/gemm --nocapture every_tuner_configuration
    else
      step conformance_cuda 150 $D/conformance_cuda --nocapture
      FERROTILE_TEST_DEVICES=cpu,cuda step library 150 $D/library
      FERROTILE_TEST_DEVICES=cuda step gemm 280 $D/gemm --skip every_tuner_configuration
    fi
    grep -E "conformance on|test result|FAILED|panicked" "$L" | head -20
    ;;
  safety)
    # memory safety (issue 19): the conformance suite on CUDA (out-of-bounds
    # accesses, views outside their buffers, loop steps, checked launches),
    # the library tests, and compute-sanitizer memcheck over the suite —
    # the guarded out-of-bounds cases must touch nothing outside their buffers
    step conformance_cuda 150 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cpu,cuda step library 150 $D/library
    FERROTILE_TEST_DEVICES=cuda step memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 $D/conformance_cuda --nocapture
    grep -E "conformance on|test result|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|case .* failed" "$L" | head -30
    ;;
  guards)
    # what the guards cost: the row-kernel and GEMM benches guarded (as
    # `launch` runs) and unguarded (`--unchecked`), alternated twice; each
    # mode with a tuner cache of its own (its first pass tunes), so each
    # runs the configurations best for its code
    for r in 1 2; do
      for flag in "" --unchecked; do
        n=${flag:+unchecked}; n=${n:-guarded}
        export FERROTILE_CACHE_DIR=/tmp/ftguards_$n
        step "rows_${n}_$r" 150 $D/bench --device cuda --shapes 16384x4096,4096x16384 $flag
        for sh in 4096x4096x4096 16x8192x8192; do
          step "gemm_${sh}_${n}_$r" 120 $D/bench --device cuda --gemm-shape $sh --dtypes bf16,f16 $flag
        done
      done
    done
    grep -E "^=== |launches:|GB/s|TFLOP|FAIL" "$L" | grep -v autotune | tail -80
    ;;
  slices)
    # slice layouts (issue 20), part 1: the CUDA conformance suite (the
    # multi-row case `row_stats` included), memcheck of `row_stats`,
    # racecheck of `row_stats` and `reduce` (the conversions that remain)
    step conformance_cuda 150 $D/conformance_cuda --nocapture
    FERROTILE_CASE=row_stats step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 $D/conformance_cuda --nocapture
    for c in row_stats reduce_float; do
      FERROTILE_CASE=$c step racecheck_$c 120 compute-sanitizer --tool racecheck --error-exitcode 9 $D/conformance_cuda --nocapture
    done
    grep -E "conformance on|test result|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|case .* failed" "$L" | head -30
    ;;
  attention)
    SH=${2:-4:32:4096:128,4:32:4096:64}
    step attn_user 400 $D/attn-user --device cuda --shapes $SH
    step peers 400 python3 $D/peers.py --attention --attn-shapes $SH
    FERROTILE_CASE=attention step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 $D/conformance_cuda --nocapture
    FERROTILE_CASE=attention step racecheck 120 compute-sanitizer --tool racecheck --error-exitcode 9 $D/conformance_cuda --nocapture
    grep -E "^=== |BEST|TFLOP|FAIL|error|ERROR SUMMARY|RACECHECK SUMMARY" "$L" | grep -v "^triton-fa2 .*wrong" | tail -80
    ;;
  attn-lib)
    # the library's attention (issue 21): its tests on CUDA (every tuner
    # candidate forced, the autotuned sizes), memcheck of them, then the
    # timings next to the peers in the same call
    FERROTILE_TEST_DEVICES=cpu,cuda step attention_tests 240 $D/attention --nocapture
    FERROTILE_ATTN_LARGE=0 FERROTILE_TEST_DEVICES=cuda step memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 $D/attention --nocapture attention_matches
    step lib_mha 200 $D/attn-user --library --shapes 4:32:4096:128,4:32:4096:64
    step lib_gqa 120 $D/attn-user --library --layout bshd --group 4 --shapes 4:32:4096:128,4:32:4096:64
    step peers 300 python3 $D/peers.py --attention --attn-group 4
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|test result|^library|^(sdpa|triton)" "$L" | tail -80
    ;;
  attn-bwd)
    FERROTILE_TEST_DEVICES=cuda step backward_tests 240 $D/attention --nocapture attention_backward
    FERROTILE_ATTN_LARGE=0 FERROTILE_TEST_DEVICES=cuda step memcheck 170 compute-sanitizer --tool memcheck --error-exitcode 9 $D/attention --nocapture attention_backward
    FERROTILE_ATTN_LARGE=0 FERROTILE_TEST_DEVICES=cuda step racecheck 170 compute-sanitizer --tool racecheck --error-exitcode 9 $D/attention --nocapture attention_backward
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|max err" "$L" | tail -60
    ;;
  s43t)
    # the one pass's correctness alone: the library's attention tests on CUDA
    export FERROTILE_ATTN_ONE_PASS=1
    FERROTILE_TEST_DEVICES=cuda step lib_attention 200 $D/attention --nocapture
    grep -E "^=== |FAILED|panicked|test result|error" "$L" | tail -30
    ;;
  s44a)
    # session 44: affine addresses (FERROTILE_AFFINE_ADDRESSES=1) checked
    # by the conformance suite and the attention tests (with the one pass
    # on), then the backward's A/B without and with them
    SH=${2:-4:32:4096:128}
    export FERROTILE_ATTN_ONE_PASS=1
    FERROTILE_AFFINE_ADDRESSES=1 FERROTILE_TEST_DEVICES=cuda step conformance_cuda 100 $D/conformance_cuda --nocapture
    FERROTILE_AFFINE_ADDRESSES=1 FERROTILE_TEST_DEVICES=cuda step lib_attention 150 $D/attention --nocapture
    FERROTILE_AUTOTUNE_PRINT=1 step bwd_plain 140 $D/attn-user --library --backward --causal 0 --shapes $SH
    FERROTILE_AFFINE_ADDRESSES=1 FERROTILE_AUTOTUNE_PRINT=1 step bwd_affine 140 $D/attn-user --library --backward --causal 0 --shapes $SH
    grep -E "^=== |FAILED|panicked|test result|conformance on|^library|-> |error" "$L" | tail -70
    ;;
  s46a)
    # to decide session 45's two opt-in options: the CUDA conformance
    # suite with both on (the new dot_chain case in every setting), then
    # the user's plain attention with FERROTILE_LOWER_REGISTER_A off / on
    # (rotated and not)
    export FERROTILE_TEST_DEVICES=cuda
    FERROTILE_CASE=dot_chain,attention step conformance_plain 60 $D/conformance_cuda --nocapture
    FERROTILE_ROTATE_CHAINS=1 FERROTILE_LOWER_REGISTER_A=1 step conformance_both 150 $D/conformance_cuda --nocapture
    for r in 0 1; do for x in 0 1; do FERROTILE_ROTATE_CHAINS=$r FERROTILE_LOWER_REGISTER_A=$x step "user_rot${r}_lra$x" 60 $D/attn-user --device cuda --dtype bf16 --shapes 4:32:4096:64,4:32:4096:128 --causal 0 --configs 128x64x4x2,128x128x8x2,64x64x4x3; done; done
    grep -E "^=== |conformance on|FAIL|panicked|BEST|error" "$L" | tail -60
    ;;
  s46b)
    # the library with FERROTILE_ROTATE_CHAINS off / on, each tuned into
    # its own cache: decode (q1, q8, GQA and not) and the dense forward
    # (the backward's loops are not rotated: a stage-1 load read by stage 0)
    for x in 0 1; do
      FERROTILE_CACHE_DIR=/tmp/c46_$x FERROTILE_ROTATE_CHAINS=$x step "decode_rot$x" 90 $D/attn-user --decode-shapes 32:32:8:1:8192:128,32:32:32:1:8192:128,32:32:8:8:8192:128
      FERROTILE_CACHE_DIR=/tmp/c46_$x FERROTILE_ROTATE_CHAINS=$x step "lib_rot$x" 150 $D/attn-user --library --device cuda --dtype bf16 --shapes 4:32:4096:64,4:32:4096:128 --causal both
    done
    grep -E "^=== |FAIL|panicked|auto|^decode|error|TFLOP|µs" "$L" | tail -60
    ;;
  s46c)
    # the library's forward tuned twice, each into a fresh cache, its picks
    # printed (session 46 ran it with the rotated plain tiles as a finalist
    # knob, then as candidates: neither won); then the attention tests on
    # CUDA (every candidate forced, the plain ones rotated too; the varlen
    # cases)
    for r in 1 2; do
      FERROTILE_CACHE_DIR=/tmp/c46k_$r FERROTILE_AUTOTUNE_PRINT=1 step "lib_knob_r$r" 150 $D/attn-user --library --device cuda --dtype bf16 --shapes 4:32:4096:64,4:32:4096:128 --causal both
    done
    FERROTILE_TEST_DEVICES=cuda step lib_attention 240 $D/attention --nocapture
    grep -E "^=== |FAIL|panicked|-> |^library|test result|error" "$L" | grep -v "autotune.*/[0-9]" | tail -60
    ;;
  s46d)
    # the grouped GEMM (the suite's one kernel below 0.9× Triton): its
    # variants (late prefetch: 3 slots and 2 programs per SM as Triton's;
    # 2 and 4 stages; no threaded copies; unguarded), Triton's twin, then
    # ncu of ours (default and late prefetch) and of Triton's
    G="$D/user-suite --device cuda --only grouped_gemm"
    step gg_default 60 $G
    FERROTILE_LATE_PREFETCH=1 step gg_late 60 $G
    SUITE_GG_STAGES=4 step gg_s4 60 $G
    SUITE_GG_STAGES=2 step gg_s2 60 $G
    FERROTILE_UNROLL_PIPELINED=0 step gg_nounroll 60 $G
    step gg_unchecked 60 $G --unchecked
    step gg_default2 60 $G
    step suite_peers 120 python3 $D/peers.py --suite
    NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
    step ncu_ours 120 $NCU --kernel-name regex:grouped_gemm --launch-skip 3 --launch-count 1 $G
    FERROTILE_LATE_PREFETCH=1 step ncu_late 120 $NCU --kernel-name regex:grouped_gemm --launch-skip 3 --launch-count 1 $G
    step ncu_triton 150 $NCU --kernel-name regex:grouped_gemm --launch-skip 3 --launch-count 1 python3 $D/peers.py --suite
    grep -E "^=== |suite grouped|FAIL|error" "$L" | tail -30
    grep -E "^=== ncu|Duration|hit_rate|dram__bytes|gmma_cycles|bank_conflicts|Achieved Occupancy|Theoretical Occupancy|Block Limit Shared|Issued Ipc|No Eligible|Warp Cycles Per Issued|L2 Hit|Mem Busy|Max Bandwidth|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Dynamic Shared" "$L" | cut -c1-150 | tail -80
    ;;
  s47a)
    # computed A operands in the fragments' layout, K interleaved
    # (FERROTILE_OPERAND_LAYOUTS=1, opt-in): the CUDA conformance suite
    # with it (norm_matmul's 128x128x64 8-warp case takes the path: B's
    # ring rows permuted, A from registers; K = 333 and 200 leave tails;
    # decode_t's: the decode form, a narrow B copied element by element
    # into its K-major slot in the interleaved order), memcheck of those
    # two cases, then the suite's norm_matmul off / on alternated twice and
    # its Triton twin
    FERROTILE_OPERAND_LAYOUTS=1 step conformance_oplay 90 $D/conformance_cuda --nocapture
    FERROTILE_OPERAND_LAYOUTS=1 FERROTILE_CASE=norm_matmul,decode_t step memcheck_oplay 120 compute-sanitizer --tool memcheck $D/conformance_cuda --nocapture
    N="$D/user-suite --device cuda --only norm_matmul"
    for r in 1 2; do
      FERROTILE_OPERAND_LAYOUTS=0 step "nm_off_$r" 40 $N
      FERROTILE_OPERAND_LAYOUTS=1 step "nm_on_$r" 40 $N
      FERROTILE_OPERAND_LAYOUTS=1 FERROTILE_BROADCAST_SLICES=1 step "nm_on_slices_$r" 40 $N
    done
    step suite_peers 120 python3 $D/peers.py --suite --only norm_matmul
    grep -E "^=== |conformance on|FAILED|panicked|test result|ERROR SUMMARY|^suite|norm_matmul" "$L" | tail -40
    ;;
  s49a)
    # session 49, correctness: the CUDA conformance suite (column layouts:
    # tiles read along dimension 0 vectorized), the quantized-GEMM tests
    # (the decode form `wq_decode_kernel`, every tuner candidate), memcheck
    # of the decode form, then the GEMM and W8A8 tests (session 48's
    # swizzled slot offsets, never run through the library on a GPU)
    export FERROTILE_TEST_DEVICES=cuda
    step conformance 100 $D/conformance_cuda --nocapture
    step quant_tests 150 $D/quant --nocapture
    step memcheck_decode 90 compute-sanitizer --tool memcheck --error-exitcode 9 $D/quant --nocapture wq_decode_form
    step w8a8_tests 100 $D/w8a8
    step gemm_tests 200 $D/gemm --skip every_tuner_configuration
    grep -E "conformance on|FAILED|panicked|test result|ERROR SUMMARY" "$L" | tail -20
    ;;
  s49b)
    # session 49, speed: the W4A16 library tuned (the decode form among the
    # candidates; picks printed), forced decode-form tiles next to the
    # previous pick (16×128×128 split 8), then the peers in the same call
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    FERROTILE_AUTOTUNE_PRINT=1 step library 240 $D/dequant-user --library --device cuda --shapes $SH
    step forced 120 $D/dequant-user --library --device cuda --only-forced --shapes 1x8192x8192,16x8192x8192 --lib-configs 16x128x128x4x2x8,16x256x128x8x2x8xD,16x256x128x8x2x4xD,16x256x128x8x2x16xD,16x64x128x4x2x8xD,16x128x64x8x3x8xD,16x256x64x8x2x8xD
    step peers 200 python3 $D/peers.py --dequant --dq-shapes $SH
    grep -E "^=== |FAILED|panicked|^library|-> |cublas|tinygemm|gemlite|triton" "$L" | tail -70
    ;;
  s49c)
    # where the decode form's time goes: ncu (caches kept between kernels,
    # as in the timing loop) of the tuned 64×128 4-warp tile and of the
    # 256×128 8-warp one at 1x8192x8192, and of the split-K reduction
    NCU="ncu --clock-control none --cache-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis"
    for P in ${2:-16x64x128x4x2x4xD 16x256x128x8x2x4xD}; do
      step "ncu_$P" 120 $NCU --kernel-name regex:wq_decode --launch-skip 4 --launch-count 1 $D/dequant-user --library --only-forced --device cuda --shapes 1x8192x8192 --lib-configs $P
    done
    step ncu_red 120 $NCU --kernel-name regex:splitk --launch-skip 4 --launch-count 1 $D/dequant-user --library --only-forced --device cuda --shapes 1x8192x8192 --lib-configs 16x64x128x4x2x4xD
    grep -E "^=== |^library|error|Duration|Throughput|Issue Slots|Issued Ipc|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|No Eligible|Eligible Warps|Stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Waves Per SM|Grid Size" "$L" | cut -c1-180 | tail -120
    ;;
  s49d)
    # session 49, the decode form's split K summed by the last program of
    # each tile (no reduction kernel; built at 58c495b only — measured
    # slower from graphs and removed, so later builds run the reduction
    # kernel both ways): the quantized-GEMM tests on CUDA,
    # memcheck and racecheck of the decode form, then the library tuned
    # with it on / off (FERROTILE_QUANT_LAST_SUMS) alternated, each into its
    # own cache, and the peers in the same call
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    FERROTILE_TEST_DEVICES=cuda step quant_tests 150 $D/quant --nocapture
    FERROTILE_TEST_DEVICES=cuda step memcheck_decode 90 compute-sanitizer --tool memcheck --error-exitcode 9 $D/quant --nocapture wq_decode_form
    FERROTILE_TEST_DEVICES=cuda step racecheck_decode 90 compute-sanitizer --tool racecheck --error-exitcode 9 $D/quant --nocapture wq_decode_form
    for r in 1 2; do
      FERROTILE_QUANT_LAST_SUMS=1 FERROTILE_CACHE_DIR=/tmp/ftl_on FERROTILE_AUTOTUNE_PRINT=1 step "lib_on_$r" 120 $D/dequant-user --library --device cuda --shapes $SH
      FERROTILE_QUANT_LAST_SUMS=0 FERROTILE_CACHE_DIR=/tmp/ftl_off FERROTILE_AUTOTUNE_PRINT=1 step "lib_off_$r" 120 $D/dequant-user --library --device cuda --shapes $SH
    done
    step peers 200 python3 $D/peers.py --dequant --dq-shapes $SH
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|^library|-> |cublas|tinygemm|gemlite" "$L" | tail -80
    ;;
  s49e)
    # session 49: deeper pipelines and other grids for the decode form
    # (latency-bound at M = 1), forced, next to the tuned pick
    CF=${2:-16x64x128x4x2x4xD,16x64x128x4x3x4xD,16x64x128x4x3x8xD,16x64x128x4x4x4xD,16x64x128x4x4x8xD,16x256x64x8x3x8xD,16x256x64x8x4x8xD,16x128x64x8x4x8xD,16x256x64x8x3x4xD}
    step forced 300 $D/dequant-user --library --only-forced --device cuda --shapes 1x8192x8192,16x8192x8192,1x4096x14336 --lib-configs $CF
    grep -E "^=== |FAILED|panicked|^library" "$L" | sed 's/QuantConfig //' | tail -40
    ;;
  s50c)
    # session 50: programmatic dependent launch asked for per launch (the
    # split-K reductions, the split-KV combine; every kernel lets the next
    # start): correctness of those chains on CUDA, the W4A16 library tuned
    # with FERROTILE_PDL=0 / 1 alternated, the 16-bit norms of 16384×1000
    # (slower with every launch waiting) off / on
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    step dependent_launch 60 $D/dependent_launch --nocapture
    FERROTILE_TEST_DEVICES=cuda step quant_tests 150 $D/quant --nocapture
    FERROTILE_TEST_DEVICES=cuda step attention_f64 150 $D/attention --nocapture attention_matches_f64
    FERROTILE_TEST_DEVICES=cuda step gemm_split 90 $D/gemm --nocapture split_k
    for r in 1 2; do
      FERROTILE_PDL=0 FERROTILE_CACHE_DIR=/tmp/ftl_off FERROTILE_AUTOTUNE_PRINT=1 step "lib_off_$r" 120 $D/dequant-user --library --device cuda --shapes $SH
      FERROTILE_PDL=1 FERROTILE_CACHE_DIR=/tmp/ftl_on FERROTILE_AUTOTUNE_PRINT=1 step "lib_on_$r" 120 $D/dequant-user --library --device cuda --shapes $SH
    done
    for r in 1 2; do
      FERROTILE_PDL=0 FERROTILE_CACHE_DIR=/tmp/ftl_off step "norms_off_$r" 60 $D/bench --device cuda --shapes 16384x1000 --kernels layer_norm,rms_norm --dtypes f16,bf16
      FERROTILE_PDL=1 FERROTILE_CACHE_DIR=/tmp/ftl_on step "norms_on_$r" 60 $D/bench --device cuda --shapes 16384x1000 --kernels layer_norm,rms_norm --dtypes f16,bf16
    done
    grep -E "^=== |FAILED|panicked|test result|^library .*tuned|GB/s" "$L" | cut -c1-120 | tail -70
    ;;
  s50b)
    # session 50: programmatic dependent launch (FERROTILE_PDL, on by
    # default on sm_90): correctness with it (the chain test, the CUDA
    # conformance suite, the quantized-GEMM tests), then the W4A16 library
    # tuned with it off / on alternated (own caches), and the main job
    # with it off / on
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    step dependent_launch 60 $D/dependent_launch --nocapture
    step conformance 150 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step quant_tests 150 $D/quant --nocapture
    for r in 1 2; do
      FERROTILE_PDL=0 FERROTILE_CACHE_DIR=/tmp/ftl_off FERROTILE_AUTOTUNE_PRINT=1 step "lib_off_$r" 120 $D/dequant-user --library --device cuda --shapes $SH
      FERROTILE_PDL=1 FERROTILE_CACHE_DIR=/tmp/ftl_on FERROTILE_AUTOTUNE_PRINT=1 step "lib_on_$r" 120 $D/dequant-user --library --device cuda --shapes $SH
    done
    FERROTILE_PDL=0 FERROTILE_CACHE_DIR=/tmp/ftl_off step run_library_off 200 $D/run-library --device cuda
    FERROTILE_PDL=1 FERROTILE_CACHE_DIR=/tmp/ftl_on step run_library_on 200 $D/run-library --device cuda
    grep -E "^=== |FAILED|panicked|test result|^library .*tuned" "$L" | cut -c1-120 | tail -60
    ;;
  s52d)
    # session 52: block-wise FP8 with its scales in the accumulator's
    # slice, the K loop rotated (the dot one block ahead of the scaling)
    # and in source order (FERROTILE_ROTATE_CHAINS=0), alternated; its
    # tests (every candidate forced, the persistent grid); the tuned FP8
    # (row-wise: the wide tiles on a persistent grid) and W8A8 from a
    # fresh cache; the peers
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    G=4096x4096x4096,8192x8192x8192
    FERROTILE_TEST_DEVICES=cuda step fp8_tests 120 $D/fp8 --nocapture every persistent
    fp8_blocks_rot_src "$G"
    FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_1 step fp8_1 60 $D/dequant-user --fp8 --device cuda --shapes $G
    FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_1 step w8a8_1 60 $D/dequant-user --w8a8 --device cuda --shapes $G
    step peers_fp8 60 python3 $D/peers.py --fp8 --w8-shapes $G
    step peers_w8a8 60 python3 $D/peers.py --w8a8 --w8-shapes $G
    grep -E "^=== |FAILED|panicked|test result|-> |int_mm|scaled_mm|^library" "$L" | cut -c1-220 | tail -60
    ;;
  s52c)
    # session 52: the tuners with the persistent grid as a finalist knob
    # (FP8 row-wise and block-wise, W8A8), each from a fresh cache twice,
    # next to the persistent 128x256x256 tile forced and the peers
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    G=4096x4096x4096,8192x8192x8192
    for r in 1 2; do
      FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_$r step fp8_$r 150 $D/dequant-user --fp8 --device cuda --shapes $G --w8-configs 128x256x256x8x2x1x1
      FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_$r step w8a8_$r 150 $D/dequant-user --w8a8 --device cuda --shapes $G --w8-configs 128x256x256x8x2x1x1
      FP8_BLOCKS=1 FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_$r step fp8_blocks_$r 150 $D/dequant-user --fp8 --device cuda --shapes $G
    done
    step peers_fp8 150 python3 $D/peers.py --fp8 --w8-shapes $G
    step peers_w8a8 150 python3 $D/peers.py --w8a8 --w8-shapes $G
    grep -E "^=== |FAILED|panicked|-> |int_mm|scaled_mm|^library" "$L" | cut -c1-220 | tail -60
    ;;
  s52b)
    # session 52: FP8 and W8A8 on a persistent grid (one program per SM
    # looping over tiles; the epilogue staged through a band of shared
    # memory of its own). Their tests (W8A8 with the producer warpgroup by
    # default), then the 128x256x256 tile forced with and without the
    # persistent grid, alternated twice next to the session-51 build
    # (`dequant-user-base`; each run's first line is the tuned pick, its
    # own cache), then the peers and the attention tests (late prefetch)
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    FERROTILE_TEST_DEVICES=cuda step fp8_tests 150 $D/fp8 --nocapture
    FERROTILE_TEST_DEVICES=cuda step w8a8_tests 150 $D/w8a8 --nocapture --skip w8a8_every
    G=4096x4096x4096,8192x8192x8192
    for r in 1 2; do
      FERROTILE_CACHE_DIR=/tmp/ftl_base step fp8_base_$r 120 $D/dequant-user-base --fp8 --device cuda --shapes $G --w8-configs 128x256x256x8x2
      FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_new step fp8_new_$r 150 $D/dequant-user --fp8 --device cuda --shapes $G --w8-configs 128x256x256x8x2x1x0,128x256x256x8x2x1x1
    done
    for r in 1 2; do
      FERROTILE_CACHE_DIR=/tmp/ftl_base step w8a8_base_$r 120 $D/dequant-user-base --w8a8 --device cuda --shapes $G --w8-configs 128x256x256x8x2
      FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_new step w8a8_new_$r 150 $D/dequant-user --w8a8 --device cuda --shapes $G --w8-configs 128x256x256x8x2x1x0,128x256x256x8x2x1x1
    done
    step peers_fp8 150 python3 $D/peers.py --fp8 --w8-shapes $G
    step peers_w8a8 150 python3 $D/peers.py --w8a8 --w8-shapes $G
    FERROTILE_TEST_DEVICES=cuda step attention_tests 300 $D/attention --nocapture
    grep -E "^=== |FAILED|panicked|test result|^library|-> |int_mm|scaled_mm|w8a8 |fp8 " "$L" | cut -c1-170 | tail -90
    ;;
  s53a)
    # session 53: the producer warpgroup follows a rotated loop's guard.
    # Block-wise FP8 (rotated by default: the dot one block ahead of its
    # scaling) — its tests, then rotated / source order alternated; the
    # CUDA conformance attention and two-dot chain with a producer
    # warpgroup (FERROTILE_WS=1: rotated by default); the user's
    # tutorial-form attention with the producer, rotated / not, alternated,
    # next to the rotated one-stream tiles and Triton's twin (s53b)
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    G=4096x4096x4096,8192x8192x8192
    FERROTILE_TEST_DEVICES=cuda step fp8_tests 150 $D/fp8 --nocapture
    FERROTILE_WS=1 FERROTILE_TEST_DEVICES=cuda FERROTILE_CASE=dot_chain,attention step conformance_ws 90 $D/conformance_cuda --nocapture
    FERROTILE_WS=1 FERROTILE_TEST_DEVICES=cuda FERROTILE_CASE=dot_chain,attention step synccheck_ws 150 compute-sanitizer --tool synccheck --error-exitcode 9 $D/conformance_cuda --nocapture
    fp8_blocks_rot_src "$G"
    grep -E "^=== |FAILED|panicked|test result|conformance on|ERROR SUMMARY|-> |error" "$L" | cut -c1-200 | tail -60
    ;;
  s53e)
    # session 53, call 3 (what ran: little device time was left):
    # block-wise FP8 written with two K blocks a step (the second block's
    # MMAs in flight while the first is scaled) against the build before
    # it (dequant-user-base, one block a step, in source order:
    # FERROTILE_ROTATE_CHAINS=0), each tuned from a fresh cache, alternated
    # twice; the forced-candidate FP8 tests
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    G=4096x4096x4096,8192x8192x8192
    FERROTILE_TEST_DEVICES=cuda step fp8_tests 60 $D/fp8 --nocapture every
    for r in 1 2; do
      FP8_BLOCKS=1 FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_n$r step blocks_two_$r 40 $D/dequant-user --fp8 --device cuda --shapes $G
      FERROTILE_ROTATE_CHAINS=0 FP8_BLOCKS=1 FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ftl_o$r step blocks_one_$r 40 $D/dequant-user-base --fp8 --device cuda --shapes $G
    done
    grep -E "^=== |FAILED|panicked|test result|-> |blockwise" "$L" | cut -c1-200 | tail -30
    ;;
  s53d)
    # session 53, call 3 as planned: s53e, then the persistent FP8 tests
    # and the row-wise peer
    bash "$0" s53e
    FERROTILE_TEST_DEVICES=cuda step fp8_persistent 150 $D/fp8 --nocapture persistent
    step peers_fp8 100 python3 $D/peers.py --fp8 --w8-shapes 4096x4096x4096,8192x8192x8192
    grep -E "^=== |FAILED|panicked|test result|scaled_mm" "$L" | cut -c1-200 | tail -20
    ;;
  s53c)
    # session 53, call 2: block-wise FP8 with stage 1's scale loads issued
    # ahead again (rotate_chains' second form no longer carries the
    # iteration), rotated / source order alternated; the forced-candidate
    # FP8 tests; then s53b's attention runs
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    G=4096x4096x4096,8192x8192x8192
    fp8_blocks_rot_src "$G"
    FERROTILE_TEST_DEVICES=cuda step fp8_every 90 $D/fp8 --nocapture every
    grep -E "^=== |FAILED|panicked|test result|-> |blockwise" "$L" | cut -c1-200 | tail -30
    bash "$0" s53b
    ;;
  s53b)
    # (the attention half of s53a)
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    AS=4:32:4096:64,4:32:4096:128
    for r in 1 2; do
      for x in 1 0; do
        FERROTILE_WS=1 FERROTILE_ROTATE_CHAINS=$x step "user_ws_rot${x}_$r" 90 $D/attn-user --device cuda --dtype bf16 --shapes $AS --causal both --configs 128x128x8x2,128x64x8x2,128x64x4x2
      done
    done
    step user_rot1 90 $D/attn-user --device cuda --dtype bf16 --shapes $AS --causal both --configs 128x64x4x2,128x128x8x2,64x64x4x3
    step peers_attn 300 python3 $D/peers.py --attention --attn-shapes $AS
    grep -E "^=== |FAILED|panicked|test result|conformance on|ERROR SUMMARY|BEST|-> |error|scaled_mm|triton|cudnn" "$L" | cut -c1-200 | tail -80
    ;;
  s52a)
    # session 52: W8A8 launches ask for the producer warpgroup: its tests
    # (split-K small-M tiles included); the library attention tests with
    # late prefetch on (the default since session 51); then, on whatever
    # card came, W4A16 / W8A16 tuned next to cuBLAS, tinygemm and gemlite,
    # and W8A8 / FP8 tuned next to torch._int_mm / torch._scaled_mm
    nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$S"
    FERROTILE_TEST_DEVICES=cuda step w8a8_tests 150 $D/w8a8 --nocapture --skip w8a8_every
    FERROTILE_TEST_DEVICES=cuda step attention_tests 300 $D/attention --nocapture
    SH=1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096
    FERROTILE_AUTOTUNE_PRINT=1 step lib_w4 150 $D/dequant-user --library --device cuda --shapes $SH
    FERROTILE_AUTOTUNE_PRINT=1 step lib_w8 150 $D/dequant-user --library --w8 --device cuda --shapes $SH
    step peers_dq 200 python3 $D/peers.py --dequant --dq-shapes $SH
    G=4096x4096x4096,8192x8192x8192
    FERROTILE_AUTOTUNE_PRINT=1 step w8a8_lib 150 $D/dequant-user --w8a8 --device cuda --shapes $G
    FERROTILE_AUTOTUNE_PRINT=1 step fp8_lib 150 $D/dequant-user --fp8 --device cuda --shapes $G
    step peers_w8a8 150 python3 $D/peers.py --w8a8 --w8-shapes $G
    step peers_fp8 150 python3 $D/peers.py --fp8 --w8-shapes $G
    grep -E "^=== |FAILED|panicked|test result|^library|-> |cublas|tinygemm|gemlite|int_mm|scaled_mm" "$L" | cut -c1-170 | tail -70
    ;;
  s51g)
    # session 51: the W8A8 tests with its launches asking for the producer
    # warpgroup (the default since this build)
    FERROTILE_TEST_DEVICES=cuda step w8a8_tests 120 $D/w8a8 --nocapture --skip w8a8_every
    grep -E "^=== |FAILED|panicked|test result" "$L" | tail -10
    ;;
  s51f)
    # session 51: W8A8 with and without a producer warpgroup (its b is read
    # through trans, which the producer split now takes)
    SH=${2:-4096x4096x4096,8192x8192x8192}
    export FERROTILE_CACHE_DIR=/tmp/ftl_w8a8
    step w8a8_plain 100 $D/dequant-user --w8a8 --device cuda --shapes $SH --w8-configs 128x256x256x8x2
    FERROTILE_WS=1 step w8a8_ws 60 $D/dequant-user --w8a8 --device cuda --shapes $SH --w8-configs 128x256x256x8x2
    step w8a8_plain2 60 $D/dequant-user --w8a8 --device cuda --shapes $SH --w8-configs 128x256x256x8x2
    grep -E "^=== |w8a8 |error|-> " "$L" | cut -c1-170 | tail -20
    ;;
  s51e)
    # session 51: FP8 launches with a producer warpgroup by default (the
    # compiler now splits copies read through `trans` off to it): the FP8
    # tests, then the library tuned next to torch._scaled_mm
    SH=${2:-4096x4096x4096,8192x8192x8192}
    FERROTILE_TEST_DEVICES=cuda step fp8_tests 200 $D/fp8 --nocapture
    FERROTILE_AUTOTUNE_PRINT=1 step fp8_lib 150 $D/dequant-user --fp8 --device cuda --shapes $SH
    step peers 200 python3 $D/peers.py --fp8 --w8-shapes $SH
    grep -E "^=== |fp8 |FAILED|panicked|error|test result|-> |cublas|scaled_mm" "$L" | cut -c1-170 | tail -40
    ;;
  s51d)
    # session 51: FP8 in clusters of two (FERROTILE_FP8_CLUSTER=2, an
    # experiment: the pair's tile of b multicast): the FP8 tests with it
    # (and with a producer warpgroup), then forced tiles with clusters
    # off / on, plain and WS, alternated, next to torch._scaled_mm
    SH=${2:-4096x4096x4096,8192x8192x8192}
    CF=${3:-128x256x256x8x2,256x128x256x8x2}
    export FERROTILE_CACHE_DIR=/tmp/ftl_fp8
    FERROTILE_FP8_CLUSTER=2 FERROTILE_TEST_DEVICES=cuda step fp8_tests_cl2 200 $D/fp8 --nocapture
    FERROTILE_FP8_CLUSTER=2 FERROTILE_WS=1 FERROTILE_TEST_DEVICES=cuda step fp8_tests_cl2_ws 200 $D/fp8 --nocapture fp8_gemm_matches
    for r in 1 2; do
      for cl in 1 2; do
        FERROTILE_FP8_CLUSTER=$cl step "fp8_cl${cl}_$r" 120 $D/dequant-user --fp8 --device cuda --shapes $SH --w8-configs $CF
        FERROTILE_FP8_CLUSTER=$cl FERROTILE_WS=1 step "fp8_cl${cl}_ws_$r" 120 $D/dequant-user --fp8 --device cuda --shapes $SH --w8-configs $CF
      done
    done
    step peers 200 python3 $D/peers.py --fp8 --w8-shapes $SH
    grep -E "^=== |fp8 |FAILED|panicked|error|test result|cublas|scaled_mm" "$L" | sed 's/W8A8Config //; s/num_warps: 8, //; s/split_k: 1 //' | cut -c1-150 | tail -80
    ;;
  s51c)
    # session 51: where FP8 stands against torch._scaled_mm — the tuned
    # pick and forced tiles (deeper rings, 256-deep steps, 256-row tiles),
    # plain and with a producer warpgroup (FERROTILE_WS=1), then the peers
    SH=${2:-4096x4096x4096,8192x8192x8192}
    CF=${3:-128x256x128x8x3,128x256x128x8x4,128x256x256x8x2,256x128x128x8x3,256x128x256x8x2,128x128x128x8x4}
    FERROTILE_AUTOTUNE_PRINT=1 step fp8_plain 300 $D/dequant-user --fp8 --device cuda --shapes $SH --w8-configs $CF
    FERROTILE_WS=1 step fp8_ws 300 $D/dequant-user --fp8 --device cuda --shapes $SH --w8-configs $CF
    step peers 200 python3 $D/peers.py --fp8 --w8-shapes $SH
    grep -E "^=== |fp8 |FAILED|panicked|error|-> |cublas|scaled_mm" "$L" | cut -c1-170 | tail -60
    ;;
  s51b)
    # session 51: 8-bit fields by one byte pick and q − z as one f32
    # subtraction (the W8 paths): the quantized-GEMM tests and the CUDA
    # conformance suite, W8A16 tuned with this build and the session's
    # first (dequant-user-base), each its own cache, alternated twice, the
    # peers, then the user suite with late prefetch on by default
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    FERROTILE_TEST_DEVICES=cuda step quant_tests 150 $D/quant --nocapture
    FERROTILE_TEST_DEVICES=cuda step conformance 120 $D/conformance_cuda --nocapture
    for r in 1 2; do
      FERROTILE_CACHE_DIR=/tmp/ftl_new FERROTILE_AUTOTUNE_PRINT=1 step "w8_new_$r" 150 $D/dequant-user --library --w8 --device cuda --shapes $SH
      FERROTILE_CACHE_DIR=/tmp/ftl_base FERROTILE_AUTOTUNE_PRINT=1 step "w8_base_$r" 150 $D/dequant-user-base --library --w8 --device cuda --shapes $SH
    done
    step peers 200 python3 $D/peers.py --dequant --dq-shapes $SH
    step user_suite 150 $D/user-suite --device cuda
    grep -E "^=== |FAILED|panicked|test result|conformance on|^library|-> |cublas|tinygemm|gemlite|^suite" "$L" | sed 's/QuantConfig //' | cut -c1-170 | tail -100
    ;;
  s51a)
    # session 51: W8A16 tuned (the decode tiles among its candidates, never
    # timed) and W4A16 at HEAD, next to cuBLAS dense / tinygemm / gemlite;
    # then late prefetch (opt-in): the GEMM and W8A8 tests with it, the
    # grouped GEMM on / off alternated twice, the suite with Triton's twins
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    FERROTILE_AUTOTUNE_PRINT=1 step lib_w8 150 $D/dequant-user --library --w8 --device cuda --shapes $SH
    FERROTILE_AUTOTUNE_PRINT=1 step lib_w4 150 $D/dequant-user --library --device cuda --shapes $SH
    step peers 200 python3 $D/peers.py --dequant --dq-shapes $SH
    (export FERROTILE_LATE_PREFETCH=1
     FERROTILE_TEST_DEVICES=cuda step gemm_late 200 $D/gemm --nocapture --skip every_tuner_configuration
     FERROTILE_TEST_DEVICES=cuda step w8a8_late 60 $D/w8a8 --nocapture --skip w8a8_every)
    G="$D/user-suite --device cuda --only grouped_gemm"
    for r in 1 2; do FERROTILE_LATE_PREFETCH=1 step "gg_on_$r" 40 $G; FERROTILE_LATE_PREFETCH=0 step "gg_off_$r" 40 $G; done
    step suite_peers 120 python3 $D/peers.py --suite
    grep -E "^=== |FAILED|panicked|test result|^library|-> |cublas|tinygemm|gemlite|^suite" "$L" | sed 's/QuantConfig //' | cut -c1-160 | tail -90
    ;;
  s50a)
    # session 50: the decode form with each step's group scale applied to
    # its f32 partial sums (dequant-user-e1, quant) against HEAD's
    # (dequant-user): the quantized-GEMM tests on CUDA, the library tuned
    # alternated (each build its own cache), forced decode tiles, peers
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    FERROTILE_TEST_DEVICES=cuda step quant_tests 150 $D/quant --nocapture
    for r in 1 2; do
      FERROTILE_CACHE_DIR=/tmp/ftl_e1 FERROTILE_AUTOTUNE_PRINT=1 step "lib_e1_$r" 120 $D/dequant-user-e1 --library --device cuda --shapes $SH
      FERROTILE_CACHE_DIR=/tmp/ftl_base FERROTILE_AUTOTUNE_PRINT=1 step "lib_base_$r" 120 $D/dequant-user --library --device cuda --shapes $SH
    done
    CF=${3:-16x64x128x4x2x4xD,16x64x128x4x2x8xD,16x256x128x8x2x4xD,16x256x64x8x2x8xD,16x128x64x8x3x8xD}
    step forced_e1 150 $D/dequant-user-e1 --library --only-forced --device cuda --shapes 1x8192x8192,16x8192x8192 --lib-configs $CF
    step forced_base 150 $D/dequant-user --library --only-forced --device cuda --shapes 1x8192x8192,16x8192x8192 --lib-configs $CF
    step peers 200 python3 $D/peers.py --dequant --dq-shapes $SH
    grep -E "^=== |FAILED|panicked|test result|^library|-> |cublas|tinygemm|gemlite" "$L" | sed 's/QuantConfig //' | cut -c1-160 | tail -90
    ;;
  s49f)
    # what the decode form's warps wait on (stall reasons per issued
    # instruction), the tuned M = 1 tile and the 16-row GEMM tile it replaced
    for P in ${2:-16x64x128x4x2x4xD 16x128x128x4x2x8}; do
      step "ncu_$P" 120 ncu --clock-control none --cache-control none --kernel-name regex:'wq_(decode|gemm)' --launch-skip 20 --launch-count 1 --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,gpu__time_duration.sum,smsp__issue_active.avg.pct_of_peak_sustained_active' $D/dequant-user --library --only-forced --device cuda --shapes 1x8192x8192 --lib-configs $P
    done
    grep -E "^=== |stalled|duration|issue_active" "$L" | awk '$NF+0 > 0.05 || /===|duration|issue_active/' | cut -c1-150 | tail -70
    ;;
  s49g)
    # session 49: loops whose dot reads an A computed in the iteration
    # rotated (rotate_chains' ComputedA: the MMAs of one step run while
    # the next A is computed; built at 91cad83 only — measured level on the
    # decode form and 16 % slower on norm_matmul, reverted, so later builds
    # run the same code both ways) — the CUDA conformance suite and the
    # quantized-GEMM tests with it (the default), then forced decode tiles
    # and the user suite's norm_matmul with FERROTILE_ROTATE_CHAINS=0 / 1
    # alternated twice
    export FERROTILE_TEST_DEVICES=cuda
    step conformance 100 $D/conformance_cuda --nocapture
    step quant_tests 100 $D/quant --nocapture
    CF=${2:-16x64x128x4x2x4xD,16x256x64x8x2x8xD,16x64x128x4x1x4xD,16x256x64x8x1x8xD}
    for r in 1 2; do
      for rot in 0 1; do
        FERROTILE_ROTATE_CHAINS=$rot step "decode_rot${rot}_$r" 60 $D/dequant-user --library --only-forced --device cuda --shapes 1x8192x8192,16x8192x8192 --lib-configs $CF
        FERROTILE_ROTATE_CHAINS=$rot step "nm_rot${rot}_$r" 25 $D/user-suite --device cuda --only norm_matmul
      done
    done
    grep -E "^=== |conformance on|FAILED|panicked|test result|^library|norm_matmul" "$L" | sed 's/QuantConfig //' | cut -c1-200 | tail -60
    ;;
  s48)
    # session 48 in one call (a short device budget), most decisive first:
    # the CUDA conformance suite (default: the swizzled slot offsets
    # computed once, in the prologue), norm_matmul with
    # FERROTILE_OPERAND_LAYOUTS off / on and the grouped GEMM with
    # FERROTILE_LATE_PREFETCH on / off alternated twice, the whole suite and
    # its Triton twins, then the conformance suite with each option and
    # memcheck of the operand-layout cases
    export FERROTILE_TEST_DEVICES=cuda
    step conformance 90 $D/conformance_cuda --nocapture
    N="$D/user-suite --device cuda --only norm_matmul"
    G="$D/user-suite --device cuda --only grouped_gemm"
    for r in 1 2; do
      FERROTILE_OPERAND_LAYOUTS=0 step "nm_off_$r" 25 $N
      FERROTILE_OPERAND_LAYOUTS=1 step "nm_on_$r" 25 $N
      FERROTILE_LATE_PREFETCH=1 step "gg_on_$r" 25 $G
      FERROTILE_LATE_PREFETCH=0 step "gg_off_$r" 25 $G
    done
    step user_suite 100 $D/user-suite --device cuda
    step suite_peers 150 python3 $D/peers.py --suite
    grep -E "conformance on|FAILED|panicked|test result|^suite" "$L" | tail -40
    FERROTILE_OPERAND_LAYOUTS=1 step conformance_oplay 90 $D/conformance_cuda --nocapture
    FERROTILE_LATE_PREFETCH=1 step conformance_late 90 $D/conformance_cuda --nocapture
    FERROTILE_OPERAND_LAYOUTS=1 FERROTILE_CASE=norm_matmul,decode_t step memcheck_oplay 80 compute-sanitizer --tool memcheck $D/conformance_cuda --nocapture
    grep -E "conformance on|FAILED|panicked|test result|ERROR SUMMARY" "$L" | tail -12
    ;;
  s48a)
    # session 48's first call: s47a (computed A operands in the fragments'
    # layout: CUDA conformance and memcheck with FERROTILE_OPERAND_LAYOUTS=1,
    # norm_matmul off / on / on + slices alternated twice) and s46e's
    # decisive half (late prefetch: CUDA conformance with it, the grouped
    # GEMM on / off alternated twice), then both kernels' Triton twins
    export FERROTILE_TEST_DEVICES=cuda
    FERROTILE_OPERAND_LAYOUTS=1 step conformance_oplay 90 $D/conformance_cuda --nocapture
    FERROTILE_OPERAND_LAYOUTS=1 FERROTILE_CASE=norm_matmul,decode_t step memcheck_oplay 100 compute-sanitizer --tool memcheck $D/conformance_cuda --nocapture
    FERROTILE_LATE_PREFETCH=1 step conformance_late 90 $D/conformance_cuda --nocapture
    N="$D/user-suite --device cuda --only norm_matmul"
    G="$D/user-suite --device cuda --only grouped_gemm"
    for r in 1 2; do
      FERROTILE_OPERAND_LAYOUTS=0 step "nm_off_$r" 30 $N
      FERROTILE_OPERAND_LAYOUTS=1 step "nm_on_$r" 30 $N
      FERROTILE_OPERAND_LAYOUTS=1 FERROTILE_BROADCAST_SLICES=1 step "nm_on_slices_$r" 30 $N
      FERROTILE_LATE_PREFETCH=1 step "gg_on_$r" 30 $G
      FERROTILE_LATE_PREFETCH=0 step "gg_off_$r" 30 $G
    done
    step suite_peers 100 python3 $D/peers.py --suite --only norm_matmul,grouped_gemm
    grep -E "^=== |conformance on|FAILED|panicked|test result|ERROR SUMMARY|^suite|norm_matmul|grouped" "$L" | grep -v "^=== " | tail -40
    ;;
  s48b)
    # issue 20's suite (nine kernels, norm_matmul's first timing) guarded
    # and `--unchecked` (what the memory-safety guards cost each user
    # kernel), then the Triton twins (the ratios: `suite` mode's table)
    step user_suite 200 $D/user-suite --device cuda
    step user_suite_unchecked 150 $D/user-suite --device cuda --unchecked
    step suite_peers 200 python3 $D/peers.py --suite
    grep -E "^suite" "$L" | tee -a "$S"
    ;;
  s48c)
    # session 46's rotation occupancy rule (s46a without the decided
    # lower_register_a): the CUDA conformance suite with rotated chains,
    # then the user's plain attention per tile with rotation off / on
    export FERROTILE_TEST_DEVICES=cuda
    FERROTILE_ROTATE_CHAINS=1 step conformance_rot 100 $D/conformance_cuda --nocapture
    for r in 0 1 0 1; do FERROTILE_ROTATE_CHAINS=$r step "user_rot$r" 70 $D/attn-user --device cuda --dtype bf16 --shapes 4:32:4096:64,4:32:4096:128 --causal 0 --configs 128x64x4x2,128x128x8x2,64x64x4x3; done
    grep -E "^=== |conformance on|FAIL|panicked|BEST|error" "$L" | tail -60
    ;;
  s46e)
    # late prefetch (FERROTILE_LATE_PREFETCH=1, opt-in): the CUDA
    # conformance suite, the GEMM tests (its cp.async wgmma shapes change)
    # and the W8A8 tests with it, then the grouped GEMM on / off
    # alternated twice, the whole suite once with it and Triton's twins
    export FERROTILE_LATE_PREFETCH=1
    step conformance_cuda 90 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step gemm 200 $D/gemm --nocapture --skip every_tuner_configuration
    FERROTILE_TEST_DEVICES=cuda step w8a8 60 $D/w8a8 --nocapture --skip w8a8_every
    G="$D/user-suite --device cuda --only grouped_gemm"
    for r in 1 2; do step "gg_on_$r" 40 $G; FERROTILE_LATE_PREFETCH=0 step "gg_off_$r" 40 $G; done
    step user_suite 120 $D/user-suite --device cuda
    step suite_peers 120 python3 $D/peers.py --suite
    grep -E "^=== |conformance on|FAILED|panicked|test result|^suite" "$L" | tail -40
    ;;
  s45d)
    # the library with FERROTILE_ROTATE_CHAINS off / on (each tuned into
    # its own cache): the forward (bf16, d64 and d128, causal both; the
    # tuner's OV=0 tiles rotate) and the backward (bf16 d128; its dK/dV and
    # dQ loops rotate)
    for x in 0 1; do
      FERROTILE_CACHE_DIR=/tmp/cache_f$x FERROTILE_EXPLAIN=$x FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_ROTATE_CHAINS=$x step "lib_fwd_rot$x" 130 $D/attn-user --library --device cuda --dtype bf16 --shapes 4:32:4096:64,4:32:4096:128 --causal both
    done
    for x in 0 1; do
      FERROTILE_CACHE_DIR=/tmp/cache_b$x FERROTILE_EXPLAIN=$x FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_ROTATE_CHAINS=$x step "lib_bwd_rot$x" 115 $D/attn-user --library --backward --device cuda --dtype bf16 --shapes 4:32:4096:128 --causal 0
    done
    grep -E "^=== |auto|FAIL|error|chained|-> " "$L" | grep -v "^\s*$" | tail -60
    ;;
  s45c)
    # chained dots rotated (FERROTILE_ROTATE_CHAINS=1): the fused
    # conformance cases with it, then the user's tutorial-form attention
    # with it off / on (alternated twice), the hand-rotated one, the peers
    SH=${2:-4:32:4096:128,4:32:4096:64}
    C=128x128x8x2,128x64x4x2,128x64x8x2
    FERROTILE_ROTATE_CHAINS=1 FERROTILE_CASE=attention,invariant_operands FERROTILE_TEST_DEVICES=cuda step conformance_rot 100 $D/conformance_cuda --nocapture
    for r in 1 2; do
      for x in 0 1; do FERROTILE_EXPLAIN=$x FERROTILE_ROTATE_CHAINS=$x step "attn_rot${x}_r$r" 100 $D/attn-user --device cuda --dtype bf16 --shapes $SH --causal both --configs $C; done
      # (Q's invariant fragments in a TMA slot instead of 32 registers)
      FERROTILE_INVARIANT_A_REGS=16 step "attn_aregs16_r$r" 100 $D/attn-user --device cuda --dtype bf16 --shapes $SH --causal both --configs $C
    done
    ATTN_OV=1 step attn_ov 100 $D/attn-user --device cuda --dtype bf16 --shapes $SH --causal both --configs $C
    step attn_peers 130 python3 $D/peers.py --attention --attn-shapes $SH
    grep -E "^=== |BEST|FAIL|error|conformance on|attention |chained" "$L" | grep -v "^triton-fa2 .*wrong\|sdpa-eff\|sdpa-flash" | tail -70
    ;;
  s45a)
    # affine addresses on (session 44's FERROTILE_AFFINE_ADDRESSES=1): the
    # GEMM / quantized tests that had not run with them; the grouped GEMM
    # with them off / on (alternated) and unguarded; FP8 row-wise next to
    # torch._scaled_mm (last measured in session 19)
    FERROTILE_AFFINE_ADDRESSES=1 FERROTILE_TEST_DEVICES=cuda step gemm_affine 110 $D/gemm --nocapture --skip every_tuner_configuration
    for t in quant w8a8 fp8; do FERROTILE_AFFINE_ADDRESSES=1 FERROTILE_TEST_DEVICES=cuda step "${t}_affine" 70 $D/$t --nocapture; done
    for a in 0 1 0 1; do FERROTILE_AFFINE_ADDRESSES=$a step gg_affine$a 40 $D/user-suite --device cuda --only grouped_gemm; done
    FERROTILE_AFFINE_ADDRESSES=1 step gg_unchecked 40 $D/user-suite --device cuda --only grouped_gemm --unchecked
    FERROTILE_AUTOTUNE_PRINT=1 step fp8_lib 100 $D/dequant-user --fp8 --device cuda --shapes 4096x4096x4096,8192x8192x8192
    step fp8_peers 70 python3 $D/peers.py --fp8 --w8-shapes 4096x4096x4096,8192x8192x8192
    grep -E "^=== |FAILED|panicked|test result|suite grouped|fp8 |^library|cublas|scaled_mm|error" "$L" | tail -60
    ;;
  s45b)
    # the user's attention in the Triton tutorial's form (attn_fwd, not
    # the hand-rotated attn_fwd_ov) next to Triton's, bf16: where issue
    # 20's "≥ 1.0× Triton" stands for the kernel a user writes first
    SH=${2:-4:32:4096:128,4:32:4096:64}
    step attn_plain 200 $D/attn-user --device cuda --dtype bf16 --shapes $SH --causal both --configs 128x128x8x2,128x64x4x2
    ATTN_OV=1 step attn_ov 180 $D/attn-user --device cuda --dtype bf16 --shapes $SH --causal both --configs 128x128x8x2,128x64x4x2
    step attn_peers 170 python3 $D/peers.py --attention --attn-shapes $SH
    grep -E "^=== |BEST|TFLOP|FAIL|error" "$L" | grep -v "^triton-fa2 .*wrong" | tail -60
    ;;
  s44b)
    # broadcast slices with affine addresses: the backward's A/B and the
    # attention tests; the peers; the other libraries' tests with affine
    # addresses
    SH=${2:-4:32:4096:128}
    export FERROTILE_ATTN_ONE_PASS=1 FERROTILE_AFFINE_ADDRESSES=1
    FERROTILE_BROADCAST_SLICES=1 FERROTILE_AUTOTUNE_PRINT=1 step bwd_affine_slices 140 $D/attn-user --library --backward --causal 0 --shapes $SH
    step peers_bwd 100 python3 $D/peers.py --attn-backward --attn-shapes $SH
    FERROTILE_BROADCAST_SLICES=1 FERROTILE_TEST_DEVICES=cuda step lib_attention_slices 150 $D/attention --nocapture
    for t in gemm quant; do FERROTILE_TEST_DEVICES=cuda step "lib_$t" 80 $D/$t --nocapture; done
    grep -E "^=== |FAILED|panicked|test result|^library|-> |-bwd |error" "$L" | tail -70
    ;;
  s43b)
    # s43a within a short budget: the tests, then the A/B
    export FERROTILE_ATTN_ONE_PASS=1
    SH=${2:-4:32:4096:128}
    FERROTILE_TEST_DEVICES=cuda step lib_attention 170 $D/attention --nocapture
    FERROTILE_AUTOTUNE_PRINT=1 step bwd 250 $D/attn-user --library --backward --causal 0 --shapes $SH
    grep -E "^=== |FAILED|panicked|test result|^library|-> |error" "$L" | tail -70
    ;;
  s43a)
    # the one-pass backward first: its tests on CUDA, the A/B (every
    # dK/dV candidate with the dQ pass and with atomics, the tuner's picks)
    # and the peers; then the conformance suite
    SH=${2:-4:32:4096:128}
    export FERROTILE_ATTN_ONE_PASS=1
    FERROTILE_TEST_DEVICES=cuda step lib_attention 200 $D/attention --nocapture
    FERROTILE_AUTOTUNE_PRINT=1 step bwd 240 $D/attn-user --library --backward --causal 0 --shapes $SH
    step peers_bwd 100 python3 $D/peers.py --attn-backward --attn-shapes $SH
    FERROTILE_TEST_DEVICES=cuda step conformance_cuda 150 $D/conformance_cuda --nocapture
    grep -E "^=== |FAILED|panicked|test result|conformance on|^library|-> |-bwd |error" "$L" | tail -70
    ;;
  s43)
    export FERROTILE_TEST_DEVICES=cuda
    step conformance_cuda 150 $D/conformance_cuda --nocapture
    step lib_attention 200 $D/attention --nocapture
    FERROTILE_WS=1 FERROTILE_CASE=segment_sum,func_segment_view step racecheck_views 120 compute-sanitizer --tool racecheck --error-exitcode 9 $D/conformance_cuda --nocapture
    for t in w8a8 fp8 quant library; do step "lib_$t" 120 $D/$t --nocapture; done
    step racecheck_varlen 150 compute-sanitizer --tool racecheck --error-exitcode 9 $D/attention --nocapture attention_varlen_matches_f64
    step lib_gemm 200 $D/gemm --nocapture
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|conformance on" "$L" | tail -60
    ;;
  s43-bench)
    # the backward: every dK/dV candidate with the dQ pass and with dQ by
    # atomics, the tuner's pick free and deterministic; the peers after
    SH=${2:-4:32:4096:128}
    FERROTILE_AUTOTUNE_PRINT=1 step bwd 300 $D/attn-user --library --backward --causal 0 --shapes $SH
    step peers_bwd 150 python3 $D/peers.py --attn-backward --attn-shapes $SH
    grep -E "^=== |FAILED|panicked|^library|-> |-bwd |error" "$L" | tail -60
    ;;
  s42)
    FERROTILE_WS=1 FERROTILE_CASE=segment_sum,func_segment_view step racecheck_views 200 compute-sanitizer --tool racecheck --error-exitcode 9 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step racecheck_varlen 200 compute-sanitizer --tool racecheck --error-exitcode 9 $D/attention --nocapture attention_varlen_matches_f64
    step conformance_cuda 200 $D/conformance_cuda --nocapture
    for t in attention gemm quant w8a8 fp8 library; do FERROTILE_TEST_DEVICES=cpu,cuda step "lib_$t" 300 $D/$t --nocapture; done
    FERROTILE_BROADCAST_SLICES=1 step conformance_slices 200 $D/conformance_cuda --nocapture
    FERROTILE_BROADCAST_SLICES=1 FERROTILE_TEST_DEVICES=cuda step attention_slices 300 $D/attention --nocapture
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|conformance on" "$L" | tail -60
    ;;
  s42-bench)
    SH=${2:-4:32:4096:128,4:32:4096:64}
    for r in 1 2; do
      for e in 0 1; do
        FERROTILE_CACHE_DIR=/tmp/ft42_e$e FERROTILE_EXPAND_BROADCAST=$e step "bwd_expand${e}_$r" 300 $D/attn-user --library --backward --shapes $SH
      done
      FERROTILE_CACHE_DIR=/tmp/ft42_s1 FERROTILE_BROADCAST_SLICES=1 step "bwd_slices_$r" 300 $D/attn-user --library --backward --shapes $SH
    done
    step varlen_bench 300 $D/attn-user --library --varlen --shapes $SH
    grep -E "^=== |FAILED|panicked|^library|^varlen" "$L" | tail -60
    ;;
  attn-bwd-bench)
    SH=${2:-4:32:4096:128,4:32:4096:64}
    step lib_bwd 300 $D/attn-user --library --backward --shapes $SH
    step peers 300 python3 $D/peers.py --attn-backward --attn-shapes $SH
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|^library|^(sdpa|triton)" "$L" | tail -90
    ;;
  varlen)
    FERROTILE_TEST_DEVICES=cuda step varlen_tests 300 $D/attention --nocapture varlen
    FERROTILE_TEST_DEVICES=cuda step racecheck 200 compute-sanitizer --tool racecheck --error-exitcode 9 $D/attention --nocapture attention_varlen_backward_matches
    FERROTILE_TEST_DEVICES=cuda step memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 $D/attention --nocapture attention_varlen_backward_matches
    SH=${2:-4:32:4096:128,4:32:4096:64}
    step varlen_bench 300 $D/attn-user --library --varlen --shapes $SH
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|^varlen-bwd|error" "$L" | tail -40
    ;;
  tuner)
    SH=${2:-1x8192x8192,16x8192x8192,1x4096x14336}
    for r in 1 2; do
      for w in 4 8; do
        flag=; [ $w = 8 ] && flag=--w8
        FERROTILE_CACHE_DIR=/tmp/fttune_${w}_$r FERROTILE_AUTOTUNE_PRINT=1 step "w${w}_tune_$r" 300 $D/dequant-user --library $flag --device cuda --shapes $SH
      done
    done
    step w4_epilogue 200 $D/dequant-user --library --epilogue --device cuda --shapes $SH
    step peers 300 python3 $D/peers.py --dequant --dq-shapes $SH
    grep -E "^=== |-> |^library|cublas|tinygemm|gemlite|FAIL|error" "$L" | tail -60
    ;;
  attn-decode)
    # the library's decode attention: its tests on CUDA, memcheck, then the
    # serving shapes next to SDPA's backends in the same call
    FERROTILE_TEST_DEVICES=cpu,cuda step attention_tests 240 $D/attention --nocapture
    FERROTILE_ATTN_LARGE=0 FERROTILE_TEST_DEVICES=cuda step memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 $D/attention --nocapture attention_matches
    FERROTILE_ATTN_LARGE=0 FERROTILE_TEST_DEVICES=cuda step racecheck 240 compute-sanitizer --tool racecheck --error-exitcode 9 $D/attention --nocapture attention_matches
    SH=${2:-32:32:32:1:8192:128,32:32:8:1:8192:128,32:32:32:8:8192:128,32:32:8:8:8192:128}
    step decode 200 $D/attn-user --decode-shapes $SH
    step peers 200 python3 $D/peers.py --decode --decode-shapes $SH
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|^decode|^copy|^sdpa" "$L" | tail -60
    ;;
  views)
    step conformance_cuda 200 $D/conformance_cuda --nocapture
    FERROTILE_WGMMA=0 step conformance_mma 200 $D/conformance_cuda --nocapture
    FERROTILE_WGMMA=0 step gemm_mma 240 $D/gemm --nocapture gemm_half_precisions_and_layouts gemm_views
    FERROTILE_TEST_DEVICES=cpu,cuda step attention_tests 300 $D/attention
    FERROTILE_TEST_DEVICES=cuda step quant_tests 200 $D/quant
    FERROTILE_ATTN_LARGE=0 FERROTILE_TEST_DEVICES=cuda step memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 $D/attention attention_matches
    FERROTILE_ATTN_LARGE=0 FERROTILE_TEST_DEVICES=cuda step racecheck 240 compute-sanitizer --tool racecheck --error-exitcode 9 $D/attention attention_matches
    SH=${2:-32:32:32:1:8192:128,32:32:8:1:8192:128,32:32:32:8:8192:128,32:32:8:8:8192:128}
    step decode 300 $D/attn-user --decode-shapes $SH ${3:+--decode-configs $3}
    step peers 200 python3 $D/peers.py --decode --decode-shapes $SH
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|^decode|^copy|^sdpa" "$L" | tail -70
    ;;
  paged)
    step conformance_cuda 200 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cpu,cuda step attention_tests 300 $D/attention
    FERROTILE_TEST_DEVICES=cuda step quant_tests 200 $D/quant
    FERROTILE_ATTN_LARGE=0 FERROTILE_TEST_DEVICES=cuda step memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 $D/attention attention_matches
    SH=32:32:32:1:8192:128,32:32:8:1:8192:128,32:32:32:8:8192:128,32:32:8:8:8192:128
    step decode 400 $D/attn-user --decode-shapes $SH --paged 16,64,256
    step peers 200 python3 $D/peers.py --decode --decode-shapes $SH
    QS=1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096
    FERROTILE_AUTOTUNE_PRINT=1 step library 300 $D/dequant-user --library --device cuda --shapes $QS
    step peers_dq 300 python3 $D/peers.py --dequant --dq-shapes $QS
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|test result|^decode|^copy|^sdpa|^library|cublas|tinygemm|gemlite" "$L" | tail -90
    ;;
  tma-terms)
    # TMA views whose base has program-id terms (strided [b,s,h,d], GQA):
    # the attention case with them on, under memcheck and racecheck
    FERROTILE_TMA_TERMS=1 FERROTILE_CASE=attention step conformance_terms 150 $D/conformance_cuda --nocapture
    FERROTILE_TMA_TERMS=1 FERROTILE_CASE=attention FERROTILE_TEST_DEVICES=cpu,cuda step memcheck_terms 150 compute-sanitizer --tool memcheck --error-exitcode 9 $D/conformance_cuda --nocapture
    FERROTILE_TMA_TERMS=1 FERROTILE_CASE=attention FERROTILE_TEST_DEVICES=cpu,cuda step racecheck_terms 150 compute-sanitizer --tool racecheck --error-exitcode 9 $D/conformance_cuda --nocapture
    grep -E "^=== |attention|FAILED|ERROR SUMMARY|RACECHECK SUMMARY" "$L" | tail -30
    ;;
  quant)
    # the library's quantized GEMM (issue 22): the CUDA conformance suite
    # (the compiler changes it rests on), its tests on CUDA, memcheck and
    # racecheck, then the decode shapes next to the W4A16 peers
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    step conformance_cuda 200 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step quant_tests 200 $D/quant --nocapture
    FERROTILE_TEST_DEVICES=cuda step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 $D/quant --nocapture wq_gemm_matches
    FERROTILE_TEST_DEVICES=cuda step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 $D/quant --nocapture wq_gemm_matches
    FERROTILE_AUTOTUNE_PRINT=1 step library 300 $D/dequant-user --library --device cuda --shapes $SH
    step peers 300 python3 $D/peers.py --dequant --dq-shapes $SH
    grep -E "^=== |conformance on|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|^library|cublas|tinygemm|gemlite|triton" "$L" | tail -70
    ;;
  w8a8)
    # W8A8 (issue 22): the CUDA conformance suite (i8 dots on mma.sync and
    # wgmma, round, invariant B slots), the library's tests, memcheck and racecheck of the wgmma
    # path, then the library next to cuBLAS bf16 and torch._int_mm
    SH=${2:-4096x4096x4096,8192x8192x8192,16x8192x8192,128x8192x8192}
    step conformance_cuda 250 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step w8a8_tests 250 $D/w8a8 --nocapture
    FERROTILE_TEST_DEVICES=cuda step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 $D/w8a8 --nocapture w8a8_gemm_matches
    FERROTILE_TEST_DEVICES=cuda step racecheck 200 compute-sanitizer --tool racecheck --error-exitcode 9 $D/w8a8 --nocapture w8a8_gemm_matches
    FERROTILE_AUTOTUNE_PRINT=1 step library 300 $D/dequant-user --w8a8 --device cuda --shapes $SH
    step peers 300 python3 $D/peers.py --w8a8 --w8-shapes $SH
    grep -E "^=== |conformance on|dot_i8|invariant|float_ops|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|^library|cublas|int_mm" "$L" | tail -60
    ;;
  fp8)
    # FP8 (issue 22): the CUDA conformance case, the library's tests
    # (memcheck, racecheck), then the library next to cuBLAS bf16 and
    # torch._scaled_mm (row-wise, with and without fast accumulation)
    SH=${2:-4096x4096x4096,8192x8192x8192}
    FERROTILE_CASE=fp8 step conformance_fp8 200 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step fp8_tests 250 $D/fp8 --nocapture
    FERROTILE_TEST_DEVICES=cuda step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 $D/fp8 --nocapture fp8_gemm_matches
    FERROTILE_TEST_DEVICES=cuda step racecheck 200 compute-sanitizer --tool racecheck --error-exitcode 9 $D/fp8 --nocapture fp8_gemm_matches
    FERROTILE_AUTOTUNE_PRINT=1 step library 300 $D/dequant-user --fp8 --device cuda --shapes $SH
    step peers 300 python3 $D/peers.py --fp8 --w8-shapes $SH
    grep -E "^=== |conformance on|fp8 |FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|test result|^library|cublas|scaled_mm" "$L" | tail -60
    ;;
  partial)
    SH=${2:-1x8192x8192,16x8192x8192,1x4096x14336,1x14336x4096}
    SH8=${3:-1x8192x8192,16x8192x8192,1x4096x14336}
    step conformance_cuda 250 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step quant_tests 250 $D/quant --nocapture
    FERROTILE_TEST_DEVICES=cuda step memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 $D/quant --nocapture wq_gemm_matches
    for r in 1 2; do
      for v in 0 1; do
        FERROTILE_PARTIAL_ACC=$v FERROTILE_CACHE_DIR=/tmp/cache$v FERROTILE_AUTOTUNE_PRINT=1 step "w4_partial$v" 300 $D/dequant-user --library --device cuda --shapes $SH
        FERROTILE_PARTIAL_ACC=$v FERROTILE_CACHE_DIR=/tmp/cache$v FERROTILE_AUTOTUNE_PRINT=1 step "w8_partial$v" 300 $D/dequant-user --library --w8 --device cuda --shapes $SH8
      done
    done
    step peers 300 python3 $D/peers.py --dequant --dq-shapes $SH
    grep -E "^=== |conformance on|partial_sums|FAILED|panicked|ERROR SUMMARY|test result|^library|-> |cublas|tinygemm|gemlite" "$L" | tail -90
    ;;
  gemv)
    # the one-row quantized GEMV (session 23): forced configurations of the
    # W4A16 and W8A16 library at 1x8192x8192 (BMxBNxBKxWARPSxSTAGESxSPLIT),
    # then ncu of one GEMV launch and of its split-K reduction
    CF=${2:-1x128x64x4x2x8,1x128x64x4x3x8,1x128x64x4x4x8,1x256x64x8x2x4,1x256x64x8x3x4,1x128x128x4x2x8,1x128x128x8x3x4,1x64x128x4x3x8,1x128x64x8x3x8,1x128x64x4x2x16,1x128x64x4x2x4,1x128x64x4x2x1}
    step w4_forced 300 $D/dequant-user --library --device cuda --shapes 1x8192x8192 --lib-configs $CF
    step w8_forced 300 $D/dequant-user --library --w8 --device cuda --shapes 1x8192x8192 --lib-configs $CF
    NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis"
    P=${3:-1x128x64x4x2x8}
    step ncu_w4 120 $NCU --kernel-name regex:wq_gemv --launch-skip 2 --launch-count 1 $D/dequant-user --library --only-forced --device cuda --shapes 1x8192x8192 --lib-configs $P
    step ncu_red 120 $NCU --kernel-name regex:splitk --launch-skip 2 --launch-count 1 $D/dequant-user --library --only-forced --device cuda --shapes 1x8192x8192 --lib-configs $P
    step ncu_w8 120 $NCU --kernel-name regex:wq_gemv --launch-skip 2 --launch-count 1 $D/dequant-user --library --w8 --only-forced --device cuda --shapes 1x8192x8192 --lib-configs $P
    grep -E "^=== |^library|error|Duration|Throughput|Issue Slots|Issued Ipc|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|No Eligible|Eligible Warps|Stall|L2 Hit|Mem Busy|Max Bandwidth" "$L" | tail -120
    ;;
  reduce)
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    SH8=${3:-1x8192x8192,16x8192x8192,1x4096x14336}
    FERROTILE_TEST_DEVICES=cuda step quant_tests 250 $D/quant --nocapture
    FERROTILE_TEST_DEVICES=cuda step gemm_split 200 $D/gemm --nocapture gemm_split_k
    FERROTILE_TEST_DEVICES=cuda step w8a8_tests 250 $D/w8a8 --nocapture w8a8_gemm_matches
    FERROTILE_TEST_DEVICES=cuda step memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 $D/gemm --nocapture gemm_split_k
    FERROTILE_AUTOTUNE_PRINT=1 step w4 300 $D/dequant-user --library --device cuda --shapes $SH
    FERROTILE_AUTOTUNE_PRINT=1 step w8 300 $D/dequant-user --library --w8 --device cuda --shapes $SH8
    FERROTILE_AUTOTUNE_PRINT=1 step w8a8 200 $D/dequant-user --w8a8 --device cuda --shapes 16x8192x8192,64x8192x8192
    FERROTILE_AUTOTUNE_PRINT=1 step gemm_decode 120 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16,f16
    step peers 300 python3 $D/peers.py --dequant --dq-shapes $SH
    step peers_gemm 90 python3 $D/peers.py --gemm --gemm-shape 16x8192x8192 --dtypes bf16,f16
    NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy"
    step ncu_red 120 $NCU --kernel-name regex:splitk --launch-skip 2 --launch-count 1 $D/dequant-user --library --only-forced --device cuda --shapes 1x8192x8192 --lib-configs 1x128x64x4x2x8
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|test result|^library|-> |cublas|tinygemm|gemlite|TFLOP|GB/s|Duration|Achieved Occ" "$L" | grep -v "autotune.*/" | cut -c1-200 | tail -90
    ;;
  odd)
    SH=${2:-4097x777,4096x4095,16384x1000,16384x1024}
    step conformance_cuda 250 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step library_tests 250 $D/library --nocapture
    FERROTILE_TEST_DEVICES=cuda step quant_tests 250 $D/quant --nocapture
    FERROTILE_AUTOTUNE_PRINT=1 step bench_rows 200 $D/bench --device cuda --shapes $SH --json "$OUT/ft.json"
    step peers_rows 200 python3 $D/peers.py --shapes $SH --json "$OUT/peers.json"
    python3 $D/compare.py "$OUT/ft.json" "$OUT/peers.json" > "$OUT/table.md" 2>&1
    grep -E "^=== |conformance on|FAILED|panicked|test result|GB/s|ok$|FAIL|no graph" "$L" | grep -v autotune | cut -c1-160 | tail -60
    cat "$OUT/table.md"
    ;;
  libcheck)
    FERROTILE_TEST_DEVICES=cuda step attention_tests 240 $D/attention --nocapture
    FERROTILE_TEST_DEVICES=cuda step gemm_tests 150 $D/gemm --nocapture --skip every_tuner_configuration
    FERROTILE_TEST_DEVICES=cuda step fp8_tests 90 $D/fp8 --nocapture
    FERROTILE_TEST_DEVICES=cuda step w8a8_tests 60 $D/w8a8 --nocapture --skip w8a8_every --skip w8a8_gemm_matches
    grep -E "^=== |FAILED|panicked|test result" "$L" | tail -30
    ;;
  quant-lib)
    # only the library's quantized GEMM on the decode shapes (tuned; no peers)
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    FERROTILE_AUTOTUNE_PRINT=1 step library 300 $D/dequant-user --library --device cuda --shapes $SH
    grep -E "^library|-> " "$L" | tail -20
    ;;
  dequant)
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336}
    step dequant_user 300 $D/dequant-user --device cuda --shapes $SH
    step peers 300 python3 $D/peers.py --dequant --dq-shapes $SH
    grep -E "^=== |w4a16|cublas|tinygemm|gemlite|FAIL|error" "$L" | tail -60
    ;;
  slices-bench)
    # slice layouts, part 2: the multi-row softmax written as a user would
    # (`rows-multi`) with slice layouts off and on, alternated twice, next
    # to the library softmax in each process, then PyTorch eager /
    # torch.compile on the same shapes (RESULTS: "Slice layouts")
    SH=${2:-16384x1024,16384x512,65536x256}
    for r in 1 2; do
      FERROTILE_SLICE_LAYOUTS=0 step rows_off_$r 120 $D/rows-multi --device cuda --shapes $SH
      step rows_on_$r 120 $D/rows-multi --device cuda --shapes $SH
    done
    step peers 240 python3 $D/peers.py --shapes $SH --json "$OUT/peers.json"
    grep -E "^=== |rows-multi|GB/s|FAIL|error" "$L" | tail -150
    ;;
  ab)
    # the same benchmarks from the build before a change (.devbin/bench-before,
    # copied in by hand) and after it (.devbin/bench), alternated, with one
    # tuner cache so both time the same configurations (the first pass,
    # `before`, tunes; logs only: $OUT holds 8 files at most): row kernels on 16384x4096 and 4096x16384, GEMM bf16/f16
    # 4096³ and the 16x8192x8192 decode shape
    export FERROTILE_CACHE_DIR=/tmp/ftab
    for r in 1 2; do
      for b in bench-before bench; do
        step "rows_${b}_$r" 150 $D/$b --device cuda --shapes 16384x4096,4096x16384
        for sh in 4096x4096x4096 16x8192x8192; do
          step "gemm_${sh}_${b}_$r" 120 $D/$b --device cuda --gemm-shape $sh --dtypes bf16,f16
        done
      done
    done
    grep -E "^=== |GB/s|TFLOP|FAIL" "$L" | grep -v autotune | tail -60
    ;;
  cli)
    # streams and cudarc interop (tests, memcheck of the cross-stream drop
    # and the hand-overs), the `ferrotile` CLI: devices, the main job with
    # its roofline chart, the row-kernel and GEMM benches next to their
    # peers, and the comparison chart of those JSON lines
    step streams 200 $D/streams --nocapture
    step example 60 $D/ex_streams
    step memcheck_streams 200 compute-sanitizer --tool memcheck --error-exitcode 9 $D/streams --nocapture cuda_buffer cudarc cuda_graph
    step devices 60 $D/ferrotile devices
    step run_library 400 $D/ferrotile run-library --svg "$OUT/library.svg" --json "$OUT/library.json"
    step bench_rows 200 $D/ferrotile bench --device cuda --shapes 16384x4096,4096x16384 --json "$OUT/ft.json"
    step peers_rows 240 python3 $D/peers.py --shapes 16384x4096,4096x16384 --json "$OUT/peers.json"
    step bench_gemm 150 $D/ferrotile bench --device cuda --gemm --dtypes bf16,f16 --json "$OUT/gemm_ft.json"
    step peers_gemm 60 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    step chart 30 $D/ferrotile chart "$OUT/ft.json" "$OUT/peers.json" "$OUT/gemm_ft.json" "$OUT/gemm_cublas.json" -o "$OUT/peers.svg" --title "ferrotile and its peers, H200"
    grep -E "^test |overlap|one-program|ERROR SUMMARY|^(cpu|cuda|wgpu|ptxas|best) " "$L" | head -30
    grep -E "^(softmax|layer_norm|rms_norm|gemm|attn|quant|w8a8|fp8|roofline|all )" "$L" | tail -60
    ;;
  ecosystem)
    # the candle integration with candle's CUDA side (scripts/candle-cuda.sh
    # builds the test binary: $D/candle_ops, linked against the machine's
    # CUDA libraries), under memcheck too; NCCL collectives on every GPU;
    # the tensor-parallel example; the W4A16 GEMV's host time per call
    # (`dequant-user --library`: tuned and forced configurations)
    export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
    step candle 300 $D/candle_ops --nocapture
    step memcheck_candle 300 compute-sanitizer --tool memcheck --error-exitcode 9 $D/candle_ops --nocapture
    step nccl 120 $D/nccl --nocapture
    step tp 300 $D/ex_tensor_parallel
    step tp_4096 120 $D/ex_tensor_parallel --m 4096 --d 4096
    SH=${2:-1x8192x8192,16x8192x8192}
    step host_time 200 $D/dequant-user --device cuda --library --shapes $SH --lib-configs 1x256x64x8x2x4,1x256x64x8x3x4,16x64x128x4x3x4
    grep -E "^test |panicked|ERROR SUMMARY|skipped|^\| |^MLP|library wq_gemm" "$L" | head -60
    ;;
  facts)
    # the launch's power-of-two divisibility facts (session 21): CUDA
    # conformance, library / GEMM / quant tests, then the row kernels on
    # short unaligned-to-16 rows next to PyTorch, the main job, and the
    # W4A16 host time per call after the autotuner fix
    step conformance_cuda 200 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step library 200 $D/library
    FERROTILE_TEST_DEVICES=cuda step gemm 300 $D/gemm
    FERROTILE_TEST_DEVICES=cuda step quant 200 $D/quant
    SH=${2:-16384x1000,4097x777,16384x1024}
    step bench_rows 200 $D/ferrotile bench --device cuda --shapes $SH --json "$OUT/ft.json"
    step peers_rows 240 python3 $D/peers.py --shapes $SH --json "$OUT/peers.json"
    step run_library 420 $D/ferrotile run-library --svg "$OUT/library.svg" --json "$OUT/library.json"
    step host_time 200 $D/dequant-user --device cuda --library --shapes 1x8192x8192,16x8192x8192
    grep -E "conformance on|test result|FAILED|panicked|library wq_gemm" "$L" | head -30
    grep -E "^(softmax|layer_norm|rms_norm|gemm|attn|quant|w8a8|fp8|roofline|all )" "$L" | tail -70
    ;;
  packed)
    # packed 16-bit dequantization (session 25): the CUDA conformance suite
    # (packed f16/bf16 add/sub/mul, constant shifts), the quantized-GEMM
    # tests on CUDA — every tuner candidate — with register operands off
    # (default) and on, memcheck
    step conformance_cuda 240 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step quant_tests 200 $D/quant --nocapture
    FERROTILE_REGISTER_OPERANDS=1 FERROTILE_TEST_DEVICES=cuda step quant_regops 200 $D/quant --nocapture
    FERROTILE_TEST_DEVICES=cuda step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 $D/quant --nocapture wq_gemm_matches
    grep -E "^=== |conformance on|FAILED|panicked|ERROR SUMMARY|test result" "$L" | tail -40
    ;;
  packed-bench)
    # the W4A16 / W8A16 library before (.devbin/dequant-user-before) and
    # after, alternated twice, each tuned into its own cache, then the
    # peers; forced configurations at M = 1 (GEMV against the 16-row kernel)
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096}
    SH8=${3:-1x8192x8192,16x8192x8192,1x4096x14336}
    for r in 1 2; do
      FERROTILE_CACHE_DIR=/tmp/cb FERROTILE_AUTOTUNE_PRINT=1 step "w4_before$r" 240 $D/dequant-user-before --library --device cuda --shapes $SH
      FERROTILE_CACHE_DIR=/tmp/ca FERROTILE_AUTOTUNE_PRINT=1 step "w4_after$r" 240 $D/dequant-user --library --device cuda --shapes $SH
    done
    FERROTILE_CACHE_DIR=/tmp/cb step w8_before 200 $D/dequant-user-before --library --w8 --device cuda --shapes $SH8
    FERROTILE_CACHE_DIR=/tmp/ca step w8_after 200 $D/dequant-user --library --w8 --device cuda --shapes $SH8
    step forced 200 $D/dequant-user --library --only-forced --device cuda --shapes 1x8192x8192 --lib-configs ${4:-1x128x64x4x2x8,16x128x64x4x3x8,16x128x64x4x3x4,16x64x128x4x2x8,16x128x128x4x2x4}
    step peers 240 python3 $D/peers.py --dequant --dq-shapes $SH
    grep -E "^=== |FAILED|panicked|^library|-> |cublas|tinygemm|gemlite" "$L" | grep -v "autotune.*/" | cut -c1-200 | tail -90
    ;;
  packed-ncu)
    # where the 16-row W4A16 kernel's time goes after packing (session 25):
    # forced configurations at 16x8192x8192, then ncu of the tuned one and
    # of its split-K reduction
    CF=${2:-16x128x64x4x3x8,16x128x64x4x3x16,16x128x64x4x4x8,16x128x64x4x4x16,16x256x64x8x3x8,16x128x64x8x3x8,16x64x64x4x2x16,16x128x32x4x4x16}
    step forced16 200 $D/dequant-user --library --only-forced --device cuda --shapes 16x8192x8192,1x8192x8192 --lib-configs $CF
    NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --section MemoryWorkloadAnalysis"
    P=${3:-16x128x64x4x3x8}
    step ncu_gemm 150 $NCU --kernel-name regex:wq_gemm --launch-skip 2 --launch-count 1 $D/dequant-user --library --only-forced --device cuda --shapes 16x8192x8192 --lib-configs $P
    step ncu_red 120 $NCU --kernel-name regex:splitk --launch-skip 2 --launch-count 1 $D/dequant-user --library --only-forced --device cuda --shapes 16x8192x8192 --lib-configs $P
    grep -E "^=== |^library|error|Duration|Throughput|Issue Slots|Issued Ipc|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|No Eligible|Eligible Warps|Stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Shared Memory Config|Dynamic Shared" "$L" | cut -c1-180 | tail -100
    ;;
  fused)
    for c in atomic_add_old last_program atomic_add; do
      FERROTILE_CASE=$c step "conf_$c" 60 $D/conformance_cuda --nocapture
      FERROTILE_CASE=$c step "memcheck_$c" 90 compute-sanitizer --tool memcheck --error-exitcode 9 $D/conformance_cuda --nocapture
      FERROTILE_CASE=$c step "racecheck_$c" 90 compute-sanitizer --tool racecheck --error-exitcode 9 $D/conformance_cuda --nocapture
    done
    FERROTILE_TEST_DEVICES=cuda step quant_tests 200 $D/quant --nocapture
    FERROTILE_TEST_DEVICES=cuda step memcheck_quant 150 compute-sanitizer --tool memcheck --error-exitcode 9 $D/quant --nocapture split_k
    SH=${2:-1x8192x8192,16x8192x8192,64x8192x8192,16x4096x14336,1x14336x4096}
    for r in 1 2; do
      FERROTILE_CACHE_DIR=/tmp/cb FERROTILE_AUTOTUNE_PRINT=1 step "w4_before$r" 240 $D/dequant-user-before --library --device cuda --shapes $SH
      FERROTILE_CACHE_DIR=/tmp/ca FERROTILE_AUTOTUNE_PRINT=1 step "w4_after$r" 240 $D/dequant-user --library --device cuda --shapes $SH
    done
    FERROTILE_CACHE_DIR=/tmp/cb step w8_before 200 $D/dequant-user-before --library --w8 --device cuda --shapes 1x8192x8192,16x8192x8192
    FERROTILE_CACHE_DIR=/tmp/ca step w8_after 200 $D/dequant-user --library --w8 --device cuda --shapes 1x8192x8192,16x8192x8192
    CF=${3:-16x128x64x4x3x4,16x128x64x4x3x8,16x128x64x4x3x16,16x64x64x4x3x16}
    step forced_before 200 $D/dequant-user-before --library --only-forced --device cuda --shapes 16x8192x8192,1x8192x8192 --lib-configs $CF
    step forced_after 200 $D/dequant-user --library --only-forced --device cuda --shapes 16x8192x8192,1x8192x8192 --lib-configs $CF
    step peers 240 python3 $D/peers.py --dequant --dq-shapes $SH
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|test result|^library|-> |cublas|tinygemm|gemlite" "$L" | grep -v "autotune.*/" | cut -c1-200 | tail -90
    ;;
  suite)
    step user_suite 300 $D/user-suite --device cuda
    step suite_peers 300 python3 $D/peers.py --suite
    python3 - "$L" <<'PY' | tee -a "$S"
import re, sys, math
ft, tr = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r"suite (\S+)\s+(\S+)\s+(ferrotile|triton)\s+([\d.]+) us", line)
    if m:
        (ft if m.group(3) == "ferrotile" else tr)[m.group(1)] = (m.group(2), float(m.group(4)))
rs = []
print(f"{'kernel':<15} {'shape':<22} {'ferrotile us':>12} {'triton us':>10} {'x Triton':>9}")
for k, (sh, t) in ft.items():
    if k in tr:
        r = tr[k][1] / t
        rs.append(r)
        print(f"{k:<15} {sh:<22} {t:12.2f} {tr[k][1]:10.2f} {r:9.2f}")
if rs:
    print(f"geometric mean {math.exp(sum(map(math.log, rs)) / len(rs)):.2f}x Triton over {len(rs)} kernels, slowest {min(rs):.2f}x")
PY
    ;;
  vulkan-lib)
    # the whole library through WGSL on the H200's Vulkan driver: the
    # conformance suite, the attention / quantized / W8A8 / FP8 / library
    # tests on wgpu only, then the main job on wgpu (GPU-sized problems,
    # L2 evicted before each timed call) for the figures
    step conformance_wgpu 150 $D/conformance_wgpu --nocapture
    for t in attention quant w8a8 fp8 library; do FERROTILE_TEST_DEVICES=wgpu step "${t}_wgpu" 120 $D/$t; done
    FERROTILE_AUTOTUNE_PRINT=1 step run_library_wgpu 240 $D/run-library --device wgpu --json "$OUT/lib_wgpu.json"
    grep -E "conformance on|test result|FAILED|panicked|FAIL$| ok$" "$L" | head -80
    ;;
  final)
    # everything that changed in a session, under one machine start: the
    # conformance suites (CUDA, Vulkan), library tests on every device, the
    # GEMM tests on Vulkan (CUDA ran in `gemm`), memcheck/racecheck of the
    # GEMM paths (cp.async rings, split-K) and of the conformance suite, and
    # the Vulkan row-kernel bench
    step conformance_cuda 150 $D/conformance_cuda --nocapture
    step conformance_wgpu 200 $D/conformance_wgpu --nocapture
    step library 120 $D/library
    FERROTILE_TEST_DEVICES=wgpu step gemm_wgpu 100 $D/gemm
    FERROTILE_TEST_DEVICES=cuda step memcheck_gemm 150 compute-sanitizer --tool memcheck --error-exitcode 9 $D/gemm --nocapture gemm_split_k gemm_epi gemm_half
    FERROTILE_TEST_DEVICES=cpu,cuda step memcheck 150 compute-sanitizer --tool memcheck --error-exitcode 9 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cuda step racecheck 100 compute-sanitizer --tool racecheck --error-exitcode 9 $D/gemm --nocapture gemm_split_k gemm_half
    FERROTILE_AUTOTUNE_PRINT=1 step bench_wgpu 100 $D/bench --device wgpu --shapes 16384x4096,4096x16384 --kernels softmax,layer_norm --dtypes f32
    grep -E "conformance on|FAILED|panicked|ERROR SUMMARY|RACECHECK SUMMARY|skipped|GB/s|^(softmax|layer_norm) " "$L" | head -30
    ;;
  *) echo "usage: gpu-run.sh check|bench|rows|gemm|gemm-rounds|decode|tma|ws|wgsl|profile|overhead|final (experiments: scripts/experiments/gpu-run-sessions.sh)"; exit 2 ;;
esac
cat "$S"
