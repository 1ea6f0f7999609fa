#!/usr/bin/env bash
# Installs npm's node-llama-cpp@3.22.1 and its prebuilt llama.cpp libraries
# (@node-llama-cpp/linux-x64@3.22.1, built on ggml 0.25.1) into DIR once, and
# prints the folder of the prebuilt libraries:
#   scripts/fetch-npm-llama.sh DIR
# With --vulkan, the package of the same build with ggml's Vulkan backend
# (@node-llama-cpp/linux-x64-vulkan@3.22.1: libggml-vulkan.so, ggml 0.25.1's
# Vulkan plugin, beside its CPU variants and libggml-base.so), into the same
# DIR, and prints its folder of libraries:
#   scripts/fetch-npm-llama.sh --vulkan DIR
set -euo pipefail
variant=linux-x64
if [ "${1:-}" = --vulkan ]; then
    variant=linux-x64-vulkan
    shift
fi
dir=${1:?usage: $0 [--vulkan] DIR}
mkdir -p "$dir"
bins=$dir/node_modules/@node-llama-cpp/$variant/bins/$variant
if [ ! -d "$bins" ]; then
    if [ "$variant" = linux-x64 ]; then
        packages=(node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1)
    else
        packages=(@node-llama-cpp/$variant@3.22.1)
    fi
    (cd "$dir" && npm install --silent --no-audit --no-fund --ignore-scripts --omit=optional "${packages[@]}") >&2
fi
echo "$(cd "$bins" && pwd)"
