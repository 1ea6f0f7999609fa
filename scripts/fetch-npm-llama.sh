#!/usr/bin/env bash
# Installs npm's node-llama-cpp@3.22.1 and its prebuilt llama.cpp libraries
# (@node-llama-cpp/linux-x64@3.22.1, built on ggml 0.25.1) into DIR once, and
# prints the folder of the prebuilt libraries:
#   scripts/fetch-npm-llama.sh DIR
set -euo pipefail
dir=${1:?usage: $0 DIR}
mkdir -p "$dir"
bins=$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if [ ! -d "$bins" ]; then
    (cd "$dir" && npm install --silent --no-audit --no-fund --ignore-scripts --omit=optional \
        node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1) >&2
fi
echo "$(cd "$bins" && pwd)"
