#!/usr/bin/env bash
# Prepare a run on the GPU machine (the device tool): build the release test
# binaries, benches and scripts into .devbin/ (git-ignored), stripped so they
# fit the 64 MiB the tool carries, and fetch the Vulkan loader debs into .gl/
# (for wgpu on the GPU) once. Then, with the device tool:
#   run  command: "bash .devbin/gpu-run.sh check"   carry: [".devbin", ".gl"]
#   run  command: "bash .devbin/gpu-run.sh bench"   carry: [".devbin", ".gl"]
#   run  command: "bash .devbin/gpu-run.sh dequant" carry: [".devbin", ".gl", ".whl"]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release --workspace --no-run
cargo build --release -p ferrotile-benches -p ferrotile-cli
mkdir -p .devbin
for t in library gemm attention quant w8a8 fp8 conformance_cuda conformance_wgpu wgpu_runtime streams; do
  f=$(ls -t target/release/deps/$t-* | grep -v '\.d$' | head -1)
  cp "$f" ".devbin/$t"
done
cargo build --release -p ferrotile-kernels --examples
for e in custom_kernel library autotune graphs quantized streams; do cp "target/release/examples/$e" ".devbin/ex_$e"; done
cp target/release/ferrotile target/release/bench target/release/run-library target/release/emit-ptx target/release/rows-multi target/release/attn-user target/release/dequant-user target/release/user-suite .devbin/
for f in .devbin/*; do strip "$f" 2>/dev/null || true; done
cp benches/peers.py benches/compare.py scripts/gpu-run.sh .devbin/
if [ ! -d .gl ]; then
  grep -q '^/.gl/' .git/info/exclude 2>/dev/null || echo /.gl/ >> .git/info/exclude
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update >/dev/null && (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2) \
    || echo "warning: could not fetch the Vulkan loader debs; wgpu runs on the GPU machine will find no adapter"
fi
# Python peers the GPU image lacks (gemlite is a source package: built into
# a wheel here; Liger-Kernel, pure Triton, for the row kernels), carried in
# .whl/ and installed by gpu-run.sh
if [ ! -d .whl ]; then
  grep -q '^/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
  mkdir -p .whl
  (python3 -m pip wheel --no-deps -q gemlite -w .whl && python3 -m pip download --no-deps -q --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 -d .whl tqdm) \
    || echo "warning: could not fetch the gemlite/tqdm wheels; peers.py --dequant will report gemlite unavailable"
fi
ls .whl/liger_kernel-*.whl >/dev/null 2>&1 || python3 -m pip download --no-deps -q --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 -d .whl liger-kernel==0.8.5 \
  || echo "warning: could not fetch the liger-kernel wheel; peers.py's row kernels will leave its column empty"
du -sh .devbin .gl .whl
