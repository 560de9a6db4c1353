#!/usr/bin/env bash
# SASS of a GEMM configuration without a GPU: emit-ptx → ptxas → cuobjdump
# (cuobjdump and nvdisasm from NVIDIA's PyPI wheels, installed into .tools/
# on first use), then the instruction mix of the hottest loop (the one
# holding HGMMA / HMMA) per iteration. For comparing code changes offline;
# the GPU machine's `gpu-run.sh gemm` does the same for the tuner's pick.
#   scripts/sass.sh 128x256x64 bf16 8 [stages=3]    (emit-ptx gemm arguments)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-ptxas.sh >/dev/null
if [ ! -x .tools/sass/nvidia/cu13/bin/cuobjdump ] || [ ! -x .tools/sass/nvidia/cu13/bin/nvdisasm ]; then
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check --target .tools/sass "nvidia-cuda-cuobjdump>=13,<14" "nvidia-cuda-nvdisasm>=13,<14"
  chmod +x .tools/sass/nvidia/cu13/bin/*
fi
export PATH="$PWD/.tools/sass/nvidia/cu13/bin:$PATH"
tile=$1 dt=$2 warps=$3; shift 3
out=$(mktemp -d)
cargo build --release -q -p ferrotile-benches --bin emit-ptx
./target/release/emit-ptx gemm "$tile" "$dt" "$warps" 90 "$@" > "$out/k.ptx" 2>/dev/null
"$(cat .tools/ptxas-path)" -arch=sm_90a -v -o "$out/k.cubin" "$out/k.ptx" 2>&1 | grep -E "registers|spill" || true
cuobjdump --dump-sass "$out/k.cubin" > "$out/k.sass"
# the loop: from the backward branch's target to the branch, around the MMAs
python3 - "$out/k.sass" <<'PY'
import re, sys
lines = [l for l in open(sys.argv[1]) if re.match(r'\s+/\*[0-9a-f]{4,}\*/', l)]
ins = []
for l in lines:
    m = re.match(r'\s+/\*([0-9a-f]+)\*/\s+(.*?)\s*;', l)
    if m: ins.append((int(m.group(1), 16), m.group(2)))
mma = [a for a, t in ins if 'HGMMA' in t or 'HMMA' in t]
if not mma: sys.exit("no MMA in the kernel")
loop = None
for a, t in ins:
    m = re.search(r'BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))', t)
    if m and m.group(1):
        tgt = int(m.group(1), 16)
        if tgt <= mma[0] <= a: loop = (tgt, a)
if loop is None:  # labels instead of addresses: take the span of the MMAs' loop by the widest backward branch
    sys.exit("could not find the loop around the MMAs")
body = [t for a, t in ins if loop[0] <= a <= loop[1]]
ops = {}
for t in body:
    op = re.sub(r'^@!?U?P\w+\s+', '', t).split()[0].split('.')[0]
    ops[op] = ops.get(op, 0) + 1
print(f"loop: {len(body)} instructions per iteration")
print("  " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda x: -x[1])))
PY
rm -rf "$out"
