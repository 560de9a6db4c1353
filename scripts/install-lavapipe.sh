#!/usr/bin/env bash
# Installs lavapipe (Mesa's CPU Vulkan driver) and the Vulkan loader so the
# wgpu conformance test (tests/tests/conformance_wgpu.rs) has an adapter on
# a machine without a GPU. Uses apt-get when it is available and the
# packages are missing (through sudo only when not root and sudo exists).
# Never fails the caller: without lavapipe the wgpu tests report
# "skipped: no wgpu adapter".
set -uo pipefail

PKGS=(mesa-vulkan-drivers libvulkan1)

if ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: apt-get not available; not installing lavapipe (wgpu tests may report 'skipped: no wgpu adapter')" >&2
    exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "lavapipe: ${PKGS[*]} already installed"
    exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=(sudo -n)
    else
        echo "warning: not root and no sudo; cannot install ${missing[*]} (wgpu tests will report 'skipped: no wgpu adapter')" >&2
        exit 0
    fi
fi

echo "lavapipe: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! { "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}" \
        || { "${SUDO[@]}" apt-get update && "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; }; }; then
    echo "warning: installing ${missing[*]} failed; wgpu tests will report 'skipped: no wgpu adapter'" >&2
fi
exit 0
