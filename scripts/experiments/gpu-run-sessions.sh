#!/usr/bin/env bash
# Experiment modes of past GPU sessions, moved here from scripts/gpu-run.sh
# when that script was cut down to its general modes. These are the commands
# that earlier entries of benches/RESULTS.md and benches/NOTES.md cited (see
# `git log -p benches/RESULTS.md`); some set switches that no longer exist
# (FERROTILE_X_EARLY, FERROTILE_X_RELNOW, FERROTILE_X_CLUSTER1,
# FERROTILE_X_NOMMA, FERROTILE_X_L2PROMO, FERROTILE_REMAT_LOADS: the runtime ignores them now, so
# those runs no longer measure what they measured then). Kept to reproduce
# or adapt a past experiment, not for routine checks.
#
# Same structure and helpers as scripts/gpu-run.sh: run on the GPU machine
# from the repository root, over .devbin/ built by scripts/devbin.sh, e.g.
#   run  command: "bash scripts/experiments/gpu-run-sessions.sh final11"
#        carry:   [".devbin", ".gl"]
# (scripts/devbin.sh copies only gpu-run.sh into .devbin/; run this one from
# its place in the tree). Logs go to $OUT; a summary prints last.
#
# Modes (session of 2026-11-29/30 in which each was used):
#   remat:      session 22 (2026-12-02): loads re-read per row instead of
#               broadcast through shared memory (`FERROTILE_REMAT_LOADS`,
#               reverted after this run: slower), dead code removed after
#               pipelining; tests, memcheck, paged decode off/on, W4A16
#   swap:       session 9: swapped decode product tests, racecheck, decode
#               tuned with every candidate's time, one stream and producer
#               warpgroup, cuBLAS, ncu of the winner
#   verify9:    session 9's closing check: view-path GEMM tests, racecheck,
#               conformance on CUDA, GEMM suite next to cuBLAS
#   ncufull:    session 9: every ncu section for one tuned decode launch and
#               one of cuBLAS's
#   cluster:    session 9: clusters of 2 with multicast Aᵀ tiles: tests,
#               racecheck, decode tuned next to cuBLAS
#   ncucluster: session 9: ncu of the clustered swapped decode kernel (forced
#               through the tuner's disk cache) next to the unclustered one;
#               the tuner now ignores cached entries that are not among its
#               candidates, and these 6-stage ones are not
#   sweep10:    session 10, call 1: decode tiles round-robin with refills
#               late/early and the producer warpgroup (FERROTILE_X_* switches)
#   graph10:    session 10, call 2: GEMM from graphs, early vs late refills
#   pdl10:      session 10, call 3: programmatic dependent launch (reverted)
#   verify10:   session 10, call 4: GEMM tests after the per-thread capture
#               stream, racecheck, decode from graphs
#   final10, final11: sessions 10 and 11's headline GEMM runs (suite next to
#               cuBLAS, alternated 8192³/decode rounds, ncu decode pair;
#               final11 adds GEMM tests) — scripts/gpu-run.sh gemm-rounds
#               runs the final11 body
#   cluster1:   session 10, calls 7–8: multicast from one stream vs the
#               producer warpgroup's (FERROTILE_X_CLUSTER1; QUICK=1 skips
#               cuBLAS)
#   last10:     session 10's last check: swapped tests, new decode candidates
#   x11a:       session 11, call 1: decode with the MMAs dropped, L2
#               promotion, deep rings (FERROTILE_X_NOMMA, FERROTILE_X_L2PROMO)
#   x11b:       session 11, call 2: width of a program's Bᵀ rows, under ncu
#   x11c:       session 11, call 3: L2 promotion 256 B vs 128 B alternated
#               with cuBLAS
#   x11d:       session 11, call 4: decode ring depths with 128-byte
#               promotion, then every GEMM test on CUDA
#   rows11:     session 11: row kernels on 16384x4096,4096x16384 from graphs
#               next to PyTorch (same body as scripts/gpu-run.sh rows)
#   rows-wgpu:  the wgpu row-kernel bench alone (was `rows` in gpu-run.sh)
set -uo pipefail
D=.devbin
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
L=$OUT/all.log
S=$OUT/summary.txt
# the Vulkan loader (device/README.md), on the GPU machine only
if command -v nvidia-smi >/dev/null && ls .gl/*.deb >/dev/null 2>&1; then for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
step() { local name=$1 limit=$2; shift 2; local s; s=$(date +%s); echo "=== $name: $*" >> "$L"; timeout "$limit" "$@" >> "$L" 2>&1; echo "$name rc=$? $(( $(date +%s) - s ))s" | tee -a "$S"; }
case "${1:-}" in
  swap)
    # the swapped decode product (Cᵀ = Bᵀ·Aᵀ on wgmma m64n16): its tests on
    # CUDA (every configuration, views and pointers) and racecheck, then the
    # decode shapes tuned with every candidate's time printed, one stream
    # and with the producer warpgroup, next to cuBLAS; ncu of the winner
    FERROTILE_TEST_DEVICES=cuda step gemm_swap 300 $D/gemm --nocapture gemm_swapped gemm_views_every gemm_split_k gemm_half gemm_every
    FERROTILE_AUTOTUNE=0 FERROTILE_TEST_DEVICES=cuda step racecheck_swap 120 compute-sanitizer --tool racecheck --error-exitcode 9 $D/gemm --nocapture gemm_swapped
    FERROTILE_AUTOTUNE_PRINT=all FERROTILE_CACHE_DIR=/tmp/ft_one step bench_decode 150 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16,f16
    FERROTILE_WS=1 FERROTILE_AUTOTUNE_PRINT=all FERROTILE_CACHE_DIR=/tmp/ft_ws step bench_decode_ws 150 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16,f16
    step peers_gemm 60 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    FERROTILE_CACHE_DIR=/tmp/ft_one step ncu_decode 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --kernel-name regex:gemm_kernel --launch-skip 5 --launch-count 1 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16 --quick
    grep -E "TFLOP|16x8192|FAILED|panicked|test result|RACECHECK SUMMARY|autotune|^  [A-Z].*(Throughput|Duration|Stall|Registers|Bandwidth|Warp Cycles|Grid|Block)" "$L" | tail -70
    ;;
  verify9)
    # session 9's closing check: the view-path GEMM tests (swapped
    # configurations, column-major A on M-major slots) alone, racecheck of
    # the swapped product, conformance on CUDA, then the GEMM suite next to
    # cuBLAS in the same call
    FERROTILE_TEST_DEVICES=cuda step gemm_views 280 $D/gemm --nocapture gemm_views_every gemm_swapped
    FERROTILE_AUTOTUNE=0 FERROTILE_TEST_DEVICES=cuda step racecheck_views 100 compute-sanitizer --tool racecheck --error-exitcode 9 $D/gemm --nocapture gemm_swapped
    step conformance_cuda 150 $D/conformance_cuda
    FERROTILE_AUTOTUNE_PRINT=1 step bench_gemm 200 $D/bench --device cuda --gemm --json "$OUT/gemm_ft.json"
    step peers_gemm 60 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    grep -E "TFLOP|FAILED|panicked|test result|RACECHECK SUMMARY|conformance on|-> " "$L" | grep -v "autotune.*/[0-9]" | tail -40
    ;;
  ncufull)
    # every ncu section for one launch of the tuned decode kernel and one of
    # cuBLAS's, side by side (reports under $OUT)
    step tune_decode 120 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16
    step ncu_ft 180 ncu --clock-control none --set full --kernel-name regex:gemm_kernel --launch-skip 5 --launch-count 1 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16 --quick
    step ncu_cublas 180 ncu --clock-control none --set full --kernel-name regex:'gemm|gemv|sm90|nvjet' --launch-skip 5 --launch-count 1 python3 -c "import torch; a=torch.randn(16,8192,device='cuda',dtype=torch.bfloat16); b=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); [torch.matmul(a,b) for _ in range(10)]; torch.cuda.synchronize()"
    sed -n '/=== ncu_ft/,/=== ncu_cublas/p' "$L" > "$OUT/ncu_ft.txt"
    sed -n '/=== ncu_cublas/,$p' "$L" > "$OUT/ncu_cublas.txt"
    grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Grid Size|Block Size" "$L" | tail -12
    ;;
  cluster)
    # clusters of 2 with multicast Aᵀ tiles (the swapped decode product):
    # the swapped tests on CUDA (short limits: a protocol error hangs),
    # racecheck, then the decode shapes tuned with every candidate printed
    # next to cuBLAS
    FERROTILE_TEST_DEVICES=cuda step gemm_swap 60 $D/gemm --nocapture gemm_swapped
    FERROTILE_AUTOTUNE=0 FERROTILE_TEST_DEVICES=cuda step racecheck_swap 90 compute-sanitizer --tool racecheck --error-exitcode 9 $D/gemm --nocapture gemm_swapped
    FERROTILE_AUTOTUNE_PRINT=all step bench_decode 90 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16,f16
    step peers_gemm 60 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    grep -E "TFLOP|16x8192|FAILED|panicked|test result|RACECHECK SUMMARY|autotune.*->|SWAP|rror" "$L" | grep -v "autotune.*/[0-9]" | tail -50
    ;;
  ncucluster)
    # ncu of the clustered swapped decode kernel (forced through the tuner's
    # disk cache: last entry wins) next to the unclustered one
    export FERROTILE_CACHE_DIR=/tmp/ftc
    step tune 90 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16
    KEY=$(grep 'bf16>bf16' /tmp/ftc/autotune.tsv | tail -1 | cut -f1)
    NCU="ncu --clock-control none --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --metrics sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg"
    printf '%s\tBK=128,BM=64,BN=16,GROUP_M=8,SWAP=1,num_warps=4,num_stages=6\n' "$KEY" >> /tmp/ftc/autotune.tsv
    step ncu_plain 60 $NCU --kernel-name regex:gemm_kernel --launch-skip 5 --launch-count 1 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16 --quick
    printf '%s\tBK=128,BM=64,BN=16,CLUSTER=2,GROUP_M=8,SWAP=1,num_warps=4,num_stages=6\n' "$KEY" >> /tmp/ftc/autotune.tsv
    step ncu_cluster 60 $NCU --kernel-name regex:gemm_kernel --launch-skip 5 --launch-count 1 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16 --quick
    sed -n '/=== ncu_plain/,$p' "$L" > "$OUT/ncu_cluster.txt"
    grep -E "Duration|DRAM Throughput|Cluster Size|Grid Size|Block Size|sm__cycles_active|Achieved Active Warps|Warp Cycles Per Issued|^(bf16) " "$L" | tail -24
    ;;
  sweep10)
    # session 10: decode tile configurations side by side (`bench
    # --gemm-configs`, round-robin), one stream with each refill issued
    # after the iteration's MMAs (as in session 9) and before its wait
    # (FERROTILE_X_EARLY=1), warp-specialized with the release after the
    # next iteration's wait (as in session 9) and right after the
    # iteration's own MMAs (FERROTILE_X_RELNOW=1); 4096³ with both
    # refill placements; cuBLAS from a graph and back to back. (The
    # FERROTILE_X_* switches were the session's A/B, removed after it: the
    # refill is now always issued before the wait, and "late" runs the same
    # code as "early".)
    C1="64x16x128/w4/s3/swap,64x16x128/w4/s4/swap,64x16x128/w4/s5/swap,64x16x128/w4/s6/swap,64x16x128/w4/s8/swap,64x16x128/w4/s10/swap,64x16x64/w4/s6/swap,64x16x64/w4/s8/swap,64x16x64/w4/s12/swap,64x16x64/w4/s16/swap,64x16x64/w4/s20/swap,64x16x256/w4/s3/swap,64x16x256/w4/s4/swap"
    C2="64x16x128/w4/s4/swap/c2,64x16x128/w4/s6/swap/c2,64x16x128/w4/s8/swap/c2,64x16x64/w4/s12/swap/c2,64x16x64/w4/s16/swap/c2,64x16x256/w4/s4/swap/c2"
    C3="128x256x64/w8/s3,128x256x64/w8/s4,256x128x64/w8/s3,128x128x64/w8/s4"
    step peers_decode 60 python3 $D/peers.py --gemm-decode
    FERROTILE_X_EARLY=1 FERROTILE_X_RELNOW=1 FERROTILE_TEST_DEVICES=cuda step test_early 120 $D/gemm --nocapture gemm_swapped
    FERROTILE_WS=1 FERROTILE_X_RELNOW=1 FERROTILE_TEST_DEVICES=cuda step test_relnow 120 $D/gemm --nocapture gemm_swapped
    step late 150 $D/bench --device cuda --gemm-configs "$C1,$C2" --dtypes bf16
    FERROTILE_X_EARLY=1 step early 150 $D/bench --device cuda --gemm-configs "$C1" --dtypes bf16
    FERROTILE_WS=1 step ws 150 $D/bench --device cuda --gemm-configs "$C1" --dtypes bf16
    FERROTILE_WS=1 FERROTILE_X_RELNOW=1 step ws_relnow 150 $D/bench --device cuda --gemm-configs "$C1,$C2" --dtypes bf16
    step late_4096 100 $D/bench --device cuda --gemm-configs "$C3" --gemm-shape 4096x4096x4096 --dtypes bf16
    FERROTILE_X_EARLY=1 step early_4096 100 $D/bench --device cuda --gemm-configs "$C3" --gemm-shape 4096x4096x4096 --dtypes bf16
    step peers_decode2 60 python3 $D/peers.py --gemm-decode
    grep -E "^=== |^config|/w[48]/|cublas|test result|panicked|FAILED" "$L" | cut -c1-110 | tail -90
    ;;
  graph10)
    # session 10, second call: GEMM timed from graphs (as cuBLAS is) and
    # back to back; the graph test; the whole GEMM suite tuned with the
    # refill issued early (FERROTILE_X_EARLY=1) and late, next to cuBLAS;
    # the decode configurations again (prefetched tensor maps now). (The
    # switch is gone since: both runs now issue early.)
    C1="64x16x128/w4/s3/swap,64x16x128/w4/s4/swap,64x16x128/w4/s5/swap,64x16x256/w4/s3/swap,64x16x256/w4/s4/swap,64x16x128/w4/s4/swap/c2"
    FERROTILE_X_EARLY=1 FERROTILE_TEST_DEVICES=cuda step test_graph 120 $D/gemm --nocapture graph_capture gemm_swapped
    step peers_decode 60 python3 $D/peers.py --gemm-decode
    FERROTILE_X_EARLY=1 step early 100 $D/bench --device cuda --gemm-configs "$C1" --dtypes bf16
    step late 100 $D/bench --device cuda --gemm-configs "$C1" --dtypes bf16
    FERROTILE_X_EARLY=1 FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ft_e step bench_early 240 $D/bench --device cuda --gemm --json "$OUT/gemm_early.json"
    FERROTILE_AUTOTUNE_PRINT=1 FERROTILE_CACHE_DIR=/tmp/ft_l step bench_late 240 $D/bench --device cuda --gemm --json "$OUT/gemm_late.json"
    step peers_gemm 90 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    step peers_decode2 60 python3 $D/peers.py --gemm-decode
    grep -E "^=== |^config|/w[48]/|cublas|test result|panicked|FAILED|^(bf16|f16|tf32|f32)|autotune.*->|no graph" "$L" | grep -v "autotune.*/[0-9]" | cut -c1-120 | tail -100
    ;;
  pdl10)
    # session 10, third call: programmatic dependent launch (every kernel on
    # sm_90: griddepcontrol, launched with programmatic stream
    # serialization) — correctness first (conformance, library, GEMM tests
    # on CUDA but the long view sweep), then decode configurations and the
    # GEMM suite from graphs next to cuBLAS
    C1="64x16x128/w4/s3/swap,64x16x128/w4/s4/swap,64x16x256/w4/s3/swap,64x16x256/w4/s4/swap,64x16x128/w4/s4/swap/c2"
    step conformance_cuda 150 $D/conformance_cuda
    FERROTILE_TEST_DEVICES=cpu,cuda step library 150 $D/library
    FERROTILE_TEST_DEVICES=cuda step gemm 250 $D/gemm --nocapture --skip gemm_views_every
    step peers_decode 60 python3 $D/peers.py --gemm-decode
    step decode 100 $D/bench --device cuda --gemm-configs "$C1" --dtypes bf16
    FERROTILE_AUTOTUNE_PRINT=1 step bench_gemm 200 $D/bench --device cuda --gemm --json "$OUT/gemm_ft.json"
    step peers_gemm 90 python3 $D/peers.py --gemm --json "$OUT/gemm_cublas.json"
    step peers_decode2 60 python3 $D/peers.py --gemm-decode
    grep -E "^=== |^config|/w[48]/|cublas|test result|panicked|FAILED|^(bf16|f16|tf32|f32)|no graph|conformance on" "$L" | cut -c1-120 | tail -80
    ;;
  verify10)
    # session 10, fourth call: after the capture moved to a per-thread
    # stream (call 3's GEMM test binary crashed: a capture on the shared
    # stream while other test threads launched on it) — every GEMM test on
    # CUDA with dependent launches and graphs, racecheck of the swapped and
    # graph tests, then the decode configurations from graphs
    C1="64x16x128/w4/s3/swap,64x16x256/w4/s3/swap,64x16x256/w4/s4/swap"
    FERROTILE_TEST_DEVICES=cuda step gemm 200 $D/gemm --nocapture --skip gemm_views_every
    FERROTILE_TEST_DEVICES=cuda step gemm_views 280 $D/gemm --nocapture gemm_views_every
    FERROTILE_AUTOTUNE=0 FERROTILE_TEST_DEVICES=cuda step racecheck 150 compute-sanitizer --tool racecheck --error-exitcode 9 $D/gemm --nocapture gemm_swapped graph_capture
    step peers_decode 60 python3 $D/peers.py --gemm-decode
    step decode 100 $D/bench --device cuda --gemm-configs "$C1" --dtypes bf16
    step peers_decode2 60 python3 $D/peers.py --gemm-decode
    grep -E "^=== |^config|/w[48]/|cublas|test result|panicked|FAILED|RACECHECK SUMMARY|error" "$L" | cut -c1-120 | tail -60
    ;;
  final10|final11)
    # session 10's headline: the GEMM suite from graphs next to cuBLAS (one
    # pass each), then the shapes whose ratio moves with the GPU's clocks
    # (8192³ draws the power limit; decode) alternated ours / cuBLAS three
    # times, each process timing the same way (graphs; our tuner's choice
    # from the first pass, on disk); final11 (session 11) then runs the
    # GEMM tests its changes touch
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
    if [ "$1" = final11 ]; then
      # (x11d's run of the whole GEMM test file outlived its 300 s limit)
      FERROTILE_TEST_DEVICES=cuda step tests 200 $D/gemm --nocapture gemm_swapped gemm_views_every graph_capture
    fi
    grep -E "^=== |cublas|^(bf16|f16|tf32|f32)|autotune.*->|no graph" "$L" | grep -v "^=== " | cut -c1-120 | tail -60
    grep -E "gpu__time|sm__cycles_active|dram__bytes|hit_rate|DRAM Throughput|  Duration" "$L" | tail -16
    grep -E "^test |test result" "$L" | tail -8
    ;;
  cluster1)
    # session 10, last call: multicast from one stream (cluster barrier
    # before each refill; FERROTILE_X_CLUSTER1=1) against the producer
    # warpgroup's multicast and no cluster; correctness first. (Since the
    # session, one stream is how clusters multicast by default; the switch
    # is gone, and the producer warpgroup's form needs FERROTILE_WS=1.)
    C="64x16x128/w4/s4/swap,64x16x128/w4/s4/swap/c2,64x16x128/w4/s5/swap/c2,64x16x256/w4/s3/swap,64x16x256/w4/s3/swap/c2"
    FERROTILE_X_CLUSTER1=1 FERROTILE_TEST_DEVICES=cuda step test 60 $D/gemm --nocapture gemm_swapped
    FERROTILE_X_CLUSTER1=1 FERROTILE_AUTOTUNE=0 FERROTILE_TEST_DEVICES=cuda step racecheck 90 compute-sanitizer --tool racecheck --error-exitcode 9 $D/gemm --nocapture gemm_swapped
    step ws_mcast 60 $D/bench --device cuda --gemm-configs "$C" --dtypes bf16
    FERROTILE_X_CLUSTER1=1 step one_stream_mcast 60 $D/bench --device cuda --gemm-configs "$C" --dtypes bf16
    [ -n "${QUICK:-}" ] || step peers_decode 60 python3 $D/peers.py --gemm-decode
    grep -E "^=== |^config|/w[48]/|cublas|test result|panicked|FAILED|RACECHECK SUMMARY" "$L" | cut -c1-120 | tail -40
    ;;
  last10)
    # session 10's last check, after clusters went one-stream by default and
    # the decode candidates changed: the swapped tests, the new candidates
    # verified on sampled outputs, and the tuned decode
    C="64x16x128/w4/s3/swap,64x16x256/w4/s3/swap,64x16x256/w4/s3/swap/c2,64x16x128/w4/s4/swap/c2"
    FERROTILE_TEST_DEVICES=cuda step test 60 $D/gemm --nocapture gemm_swapped graph_capture
    step configs 60 $D/bench --device cuda --gemm-configs "$C" --dtypes bf16
    FERROTILE_AUTOTUNE_PRINT=1 step decode 90 $D/bench --device cuda --gemm-shape 16x8192x8192 --dtypes bf16,f16
    grep -E "^config|/w[48]/|test result|panicked|FAILED|^(bf16|f16) |autotune.*->" "$L" | cut -c1-160 | tail -20
    ;;
  x11a)
    # (x11a–x11c used temporary switches, FERROTILE_X_NOMMA and
    # FERROTILE_X_L2PROMO, now gone: L2 promotion is 128 B since)
    # session 11, decode bf16: what limits the stream? (NOTES "Session 11"): the MMAs dropped (FERROTILE_X_NOMMA: the streaming
    # bound of the same rings), L2 promotion of the tensor maps, rings as
    # deep as cuBLAS's (BK = 64, 12–16 slots); then session 10's last check
    C="64x16x128/w4/s4/swap,64x16x256/w4/s3/swap,64x16x128/w4/s8/swap,64x16x64/w4/s8/swap,64x16x64/w4/s12/swap,64x16x64/w4/s16/swap"
    step peers 60 python3 $D/peers.py --gemm-decode
    step bw 60 python3 -c "
import torch
b=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); o=torch.empty((),device='cuda',dtype=torch.bfloat16)
for _ in range(3): torch.sum(b,out=o)
g=torch.cuda.CUDAGraph(); s=torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
  for _ in range(3): torch.sum(b,out=o)
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
  for _ in range(10): torch.sum(b,out=o)
ts=[]
for _ in range(20):
  e0=torch.cuda.Event(enable_timing=True); e1=torch.cuda.Event(enable_timing=True); e0.record(); g.replay(); e1.record(); e1.synchronize(); ts.append(e0.elapsed_time(e1)/10)
ts.sort(); print('torch.sum bf16 8192x8192 graph us', ts[len(ts)//2]*1e3, 'TB/s', 134.2e6/(ts[len(ts)//2]*1e-3)/1e12)
"
    FERROTILE_CACHE_DIR=/tmp/c_base step base 90 $D/bench --device cuda --gemm-configs "$C" --dtypes bf16 --rounds 3
    FERROTILE_CACHE_DIR=/tmp/c_nomma FERROTILE_X_NOMMA=1 step nomma 90 $D/bench --device cuda --gemm-configs "$C" --dtypes bf16 --rounds 3
    for p in 0 128; do
      FERROTILE_CACHE_DIR=/tmp/c_base FERROTILE_X_L2PROMO=$p step promo$p 90 $D/bench --device cuda --gemm-configs "64x16x128/w4/s4/swap,64x16x256/w4/s3/swap,64x16x64/w4/s12/swap" --dtypes bf16 --rounds 3
    done
    FERROTILE_CACHE_DIR=/tmp/c_base step base2 90 $D/bench --device cuda --gemm-configs "64x16x128/w4/s4/swap,64x16x256/w4/s3/swap,64x16x64/w4/s12/swap" --dtypes bf16 --rounds 3
    step peers2 60 python3 $D/peers.py --gemm-decode
    FERROTILE_TEST_DEVICES=cuda step test 90 $D/gemm --nocapture gemm_swapped graph_capture
    grep -E "^config|/w[48]/|test result|panicked|FAILED|torch.sum|decode|graph" "$L" | cut -c1-160 | tail -60
    ;;
  x11b)
    # session 11, decode bf16: does the width of a program's Bᵀ rows matter
    # (128 B per K row at 64 columns, 256 B at 128, 512 B at 256 — the
    # wider ones with K split to keep 128 programs)? Kernel-only times
    # under ncu (the split ones' reduction is a separate kernel), with and
    # without the MMAs (FERROTILE_X_NOMMA), L2 promotion off
    N="64x16x128/w4/s4/swap 64x16x128/w4/s4/swap/c2 128x16x128/w8/s3/swap 128x16x128/w8/s3/swap/k2 256x16x64/w8/s3/swap 256x16x64/w8/s3/swap/k4 64x16x128/w4/s4/swap/k2"
    NCU="ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,sm__cycles_active.avg,sm__cycles_active.max,lts__t_sector_hit_rate.pct -k regex:gemm_kernel"
    for c in $N; do
      FERROTILE_CACHE_DIR=/tmp/c_nomma FERROTILE_X_NOMMA=1 FERROTILE_X_L2PROMO=0 step "nomma $c" 60 $NCU $D/bench --device cuda --gemm-configs $c --dtypes bf16 --rounds 0
      FERROTILE_CACHE_DIR=/tmp/c_base FERROTILE_X_L2PROMO=0 step "mma $c" 60 $NCU $D/bench --device cuda --gemm-configs $c --dtypes bf16 --rounds 0
    done
    step ncu_cublas 60 ncu --clock-control none --metrics gpu__time_duration.sum,dram__bytes_read.sum,sm__cycles_active.avg,sm__cycles_active.max,lts__t_sector_hit_rate.pct -k regex:nvjet --launch-skip 5 --launch-count 1 python3 -c "import torch; a=torch.randn(16,8192,device='cuda',dtype=torch.bfloat16); b=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); [torch.matmul(a,b) for _ in range(10)]; torch.cuda.synchronize()"
    FERROTILE_CACHE_DIR=/tmp/c_base FERROTILE_X_L2PROMO=0 step graphs 90 $D/bench --device cuda --gemm-configs "$(echo $N | tr ' ' ',')" --dtypes bf16 --rounds 3
    step peers 60 python3 $D/peers.py --gemm-decode
    grep -E "^=== |gpu__time|dram__bytes|sm__cycles|hit_rate|^config|/w[48]/|cublas bf16" "$L" | sed -e 's/^=== \([^:]*\):.*/=== \1/' | cut -c1-120 | tail -120
    ;;
  x11c)
    # session 11: L2 promotion of the tensor maps, 256 B (until now) against
    # 128 B (= a box row: no promotion), processes alternated with cuBLAS for
    # decode, then the large shapes' tuned tiles
    for r in 1 2 3; do
      for p in 256 128; do
        FERROTILE_CACHE_DIR=/tmp/c_base FERROTILE_X_L2PROMO=$p step "decode promo$p r$r" 60 $D/bench --device cuda --gemm-configs "64x16x128/w4/s4/swap,64x16x256/w4/s3/swap" --dtypes bf16 --rounds 3
      done
      step "cublas r$r" 60 python3 $D/peers.py --gemm-decode
    done
    for r in 1 2; do
      for p in 256 128; do
        FERROTILE_CACHE_DIR=/tmp/c_base FERROTILE_X_L2PROMO=$p step "4096 promo$p r$r" 60 $D/bench --device cuda --gemm-configs "128x256x64/w8/s2,128x256x64/w8/s3" --gemm-shape 4096x4096x4096 --dtypes bf16 --rounds 3
      done
    done
    for r in 1 2 3; do
      for p in 256 128; do
        FERROTILE_CACHE_DIR=/tmp/c_base FERROTILE_X_L2PROMO=$p step "8192 promo$p r$r" 90 $D/bench --device cuda --gemm-configs "128x256x64/w8/s2" --gemm-shape 8192x8192x8192 --dtypes bf16 --rounds 3
      done
    done
    grep -E "^=== |/w[48]/|cublas bf16" "$L" | sed -e 's/^=== \([^:]*\):.*/=== \1/' | cut -c1-100 | tail -80
    ;;
  x11d)
    # session 11, after L2 promotion went to 128 B: the decode ring depths
    # and the clustered form again, then the GEMM tests on CUDA (every tuner
    # configuration through views and pointers, swapped, graphs)
    C="64x16x128/w4/s3/swap,64x16x128/w4/s4/swap,64x16x128/w4/s5/swap,64x16x128/w4/s6/swap,64x16x256/w4/s2/swap,64x16x256/w4/s3/swap,64x16x64/w4/s6/swap,64x16x64/w4/s8/swap,64x16x128/w4/s4/swap/c2,64x16x256/w4/s3/swap/c2,64x32x128/w4/s4/swap"
    step sweep 120 $D/bench --device cuda --gemm-configs "$C" --dtypes bf16 --rounds 3
    step cublas 60 python3 $D/peers.py --gemm-decode
    step sweep_f16 120 $D/bench --device cuda --gemm-configs "64x16x128/w4/s4/swap,64x16x256/w4/s3/swap,64x16x128/w4/s3/swap" --dtypes f16 --rounds 3
    FERROTILE_TEST_DEVICES=cuda step tests 300 $D/gemm --nocapture
    grep -E "^=== |/w[48]/|cublas|test result|panicked|FAILED" "$L" | sed -e 's/^=== \([^:]*\):.*/=== \1/' | cut -c1-100 | tail -40
    ;;
  rows11)
    # session 11: the row kernels timed as their peers are (CUDA graphs;
    # back to back alongside), next to PyTorch eager / torch.compile in the
    # same call, on the two shapes of the issue-3 table's headline rows
    SH=16384x4096,4096x16384
    FERROTILE_AUTOTUNE_PRINT=1 step bench_lib 150 $D/bench --device cuda --shapes $SH --json "$OUT/ft.json"
    step peers_lib 200 python3 $D/peers.py --shapes $SH --json "$OUT/peers.json"
    python3 $D/compare.py "$OUT/ft.json" "$OUT/peers.json" > "$OUT/table.md" 2>&1
    grep -E "GB/s|ok$|FAIL|no graph" "$L" | grep -v autotune | tail -30
    cat "$OUT/table.md"
    ;;
  rows-wgpu)
    FERROTILE_AUTOTUNE_PRINT=1 step bench_wgpu 150 $D/bench --device wgpu --shapes 16384x4096,4096x16384 --kernels softmax,layer_norm --dtypes f32
    grep -E "GB/s|autotune.*->" "$L" | tail -12
    ;;
  remat)
    step conformance_cuda 200 $D/conformance_cuda --nocapture
    FERROTILE_TEST_DEVICES=cpu,cuda step attention_tests 300 $D/attention
    FERROTILE_TEST_DEVICES=cuda step quant_tests 200 $D/quant
    FERROTILE_ATTN_LARGE=0 FERROTILE_TEST_DEVICES=cuda step memcheck 240 compute-sanitizer --tool memcheck --error-exitcode 9 $D/attention attention_matches
    SH=32:32:32:1:8192:128,32:32:8:1:8192:128
    FERROTILE_REMAT_LOADS=0 step decode_off 300 $D/attn-user --decode-shapes $SH --decode-configs 64x4x3 --paged 64
    step decode_on 300 $D/attn-user --decode-shapes $SH --decode-configs 64x4x3 --paged 64
    QS=1x8192x8192,16x8192x8192,64x8192x8192,1x4096x14336,16x4096x14336,1x14336x4096
    FERROTILE_AUTOTUNE_PRINT=1 step library 300 $D/dequant-user --library --device cuda --shapes $QS
    step peers_dq 120 python3 $D/peers.py --dequant --dq-shapes 1x8192x8192,16x8192x8192
    grep -E "^=== |FAILED|panicked|ERROR SUMMARY|test result|^decode|^copy|^library|cublas|tinygemm|gemlite" "$L" | tail -60
    ;;
  *) echo "usage: gpu-run-sessions.sh remat|swap|verify9|ncufull|cluster|ncucluster|sweep10|graph10|pdl10|verify10|final10|final11|cluster1|last10|x11a|x11b|x11c|x11d|rows11|rows-wgpu"; exit 2 ;;
esac
cat "$S"
