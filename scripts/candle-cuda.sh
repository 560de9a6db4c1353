#!/usr/bin/env bash
# Builds (or tests) ferrotile-candle with candle's CUDA side:
#   scripts/candle-cuda.sh test --no-run      (the test binary, for a GPU machine)
# candle-core/cuda compiles candle's own kernels to PTX with nvcc (NVIDIA's
# PyPI wheels of CUDA 13.0, installed into .tools/nvcc130: the PTX must not
# be newer than the GPU machine's driver, CUDA 13.0 / PTX 9.0) and links
# libcuda, libcublas(Lt), libcurand and libnvrtc: give it a CUDA toolkit, or
# just the toolkit's link stubs, as $CUDA_HOME (lib/ or lib/stubs/ under it).
# Not part of CI (no GPU there and no stubs to link with); the CPU side of
# the crate is tested by `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA_PIN="${CANDLE_NVCC_VERSION:-13.0}"
if [ ! -x .tools/nvcc130/nvidia/cu13/bin/nvcc ]; then
  python3 -m pip install --quiet --disable-pip-version-check --target .tools/nvcc130 \
    "nvidia-cuda-nvcc==$CUDA_PIN.*" "nvidia-cuda-cccl==$CUDA_PIN.*" "nvidia-cuda-crt==$CUDA_PIN.*" \
    "nvidia-cuda-runtime==$CUDA_PIN.*" "nvidia-nvvm==$CUDA_PIN.*"
  chmod +x .tools/nvcc130/nvidia/cu13/bin/* .tools/nvcc130/nvidia/cu13/nvvm/bin/*
fi
nvcc_dir="$(pwd)/.tools/nvcc130/nvidia/cu13/bin"
if [ -z "${CUDA_HOME:-}" ]; then
  if [ -d /usr/local/cuda/lib64 ]; then export CUDA_HOME=/usr/local/cuda
  else echo "candle-cuda.sh: set CUDA_HOME to a CUDA toolkit (or a folder with its link stubs in lib/stubs)" >&2; exit 1; fi
fi
# One folder to link against: the toolkit's libraries (or stubs) and the
# wheel's libcudart (candle's MoE kernels are a static library that needs it).
link=.tools/candle-link/lib
rm -rf "$link" && mkdir -p "$link"
for d in "$CUDA_HOME"/lib64/stubs "$CUDA_HOME"/lib/stubs "$CUDA_HOME"/lib64 "$CUDA_HOME"/lib; do
  [ -d "$d" ] || continue
  for f in "$d"/lib{cuda,nvrtc,curand,cublas,cublasLt}.so; do
    [ -e "$f" ] && [ ! -e "$link/$(basename "$f")" ] && ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$link/"
  done
done
ln -sf "$(pwd)/.tools/nvcc130/nvidia/cu13/lib/libcudart.so.13" "$link/libcudart.so"
export CUDA_HOME="$(pwd)/.tools/candle-link"
export PATH="$nvcc_dir:$PATH"
# (candle's kernels for the H200 by default; set CUDA_COMPUTE_CAP for others)
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
cmd="$1"; shift
exec cargo "$cmd" -p ferrotile-candle --features cuda "$@"
