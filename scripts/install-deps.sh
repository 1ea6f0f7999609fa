#!/usr/bin/env bash
# Installs the Debian packages loom needs to build and test, and the extra
# packages named as arguments (the Arm cross build: scripts/build-arm64.sh
# names its own). Skips apt when everything is already present; uses sudo
# when not root.
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config libgtest-dev libgmock-dev ccache libopenblas-dev nlohmann-json3-dev
          libvulkan-dev glslc mesa-vulkan-drivers
          libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libssl-dev
          iproute2 openssl python3 "$@")

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
echo "installing: ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
