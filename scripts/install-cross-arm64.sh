#!/usr/bin/env bash
# Installs Debian's cross compiler for 64-bit Arm (the C library and
# headers of the target with it), for the cross build of
# cmake/aarch64-linux-gnu.cmake. Does nothing when it is present.
set -euo pipefail
packages=(g++-aarch64-linux-gnu libc6-dev-arm64-cross)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
