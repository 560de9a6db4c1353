#!/usr/bin/env bash
# Installs ptxas from the `nvidia-cuda-nvcc` PyPI wheel into .tools/ and
# records its path in .tools/ptxas-path. Idempotent; no GPU or CUDA needed.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tools
if [ -f .tools/ptxas-path ] && [ -x "$(cat .tools/ptxas-path)" ]; then exit 0; fi
python3 -m pip install --quiet --disable-pip-version-check --target .tools/py "nvidia-cuda-nvcc>=13,<14"
p="$(find .tools/py -type f -name ptxas | head -n1)"
if [ -z "$p" ]; then echo "ptxas not found in the wheel" >&2; exit 1; fi
chmod +x "$p"
echo "$(cd "$(dirname "$p")" && pwd)/ptxas" > .tools/ptxas-path
"$p" --version | tail -n1
