#!/usr/bin/env bash
# Fetches the reference ggml (0.25.1, the llama.cpp source that npm's
# node-llama-cpp@3.22.1 ships as a git bundle) into a folder, once:
#   scripts/fetch-ggml-reference.sh [DIR]     (default: build/reference)
# Prints the path of the llama.cpp checkout; its ggml/ is ggml 0.25.1.
set -euo pipefail
dir=${1:-build/reference}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ ! -d "$dir/llama.cpp/ggml/include" ]; then
    (cd "$dir" && npm pack --silent node-llama-cpp@3.22.1 >/dev/null && tar xzf node-llama-cpp-3.22.1.tgz \
        && git -c advice.detachedHead=false clone -q package/llama/gitRelease.bundle llama.cpp && rm -rf package node-llama-cpp-3.22.1.tgz) >&2
fi
echo "$dir/llama.cpp"
