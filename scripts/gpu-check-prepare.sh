#!/usr/bin/env bash
# Makes .gpu/, the ignored folder that travels with the working tree to the
# machine that runs scripts/gpu-check.sh, and prints the `carry` list and the
# command line of that run:
#   scripts/gpu-check-prepare.sh [LLAMA_SOURCE]
#
# - .gpu/llama.cpp: the part of ggml 0.25.1's llama.cpp (LLAMA_SOURCE, by
#   default what scripts/fetch-ggml-reference.sh fetches into
#   build/reference) that scripts/gpu-check/CMakeLists.txt builds: ggml with
#   its CPU and CUDA backends, src/, include/, common/, vendor/,
#   tools/llama-bench/ and tests/test-backend-ops.cpp.
# - .gpu/vulkan-kit.tar.gz, when this machine has them: the Vulkan loader
#   (libvulkan.so.1), Vulkan's C headers and glslc with its libshaderc, so that
#   loom's Vulkan backend can be built and run where only the NVIDIA driver
#   is installed.
# - .gpu/ggml-vulkan.tar.gz, when LOOM_NPM_LLAMA_VULKAN_BINS names npm's
#   @node-llama-cpp/linux-x64-vulkan folder of libraries
#   (scripts/fetch-npm-llama.sh --vulkan): ggml's Vulkan plugin and its
#   libggml-base.so, the reference for loom's Vulkan backend.
# The optional parts are left out, saying so, when the whole would pass the
# 64 MiB that may travel. Nothing here is committed (.gitignore: /.gpu/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
limit=$((64 * 1024 * 1024))
src=${1:-}
if [ -z "$src" ]; then
    src=$(scripts/fetch-ggml-reference.sh build/reference)
fi
src=$(cd "$src" && pwd)
[ -f "$src/ggml/src/ggml-cuda/ggml-cuda.cu" ] || { echo "$src is not a llama.cpp tree with ggml-cuda" >&2; exit 2; }

out=.gpu
rm -rf "$out"
mkdir -p "$out/llama.cpp"

# The sources scripts/gpu-check/CMakeLists.txt configures, and no others:
# ggml's other backends are only named in ggml/src/CMakeLists.txt, reached
# when enabled; vendor/miniaudio/miniaudio.h serves llama.cpp's mtmd tool only.
paths=(CMakeLists.txt cmake LICENSE include src common vendor tools/llama-bench tests/test-backend-ops.cpp
       ggml/CMakeLists.txt ggml/cmake ggml/include ggml/src/ggml-cpu ggml/src/ggml-cuda)
while IFS= read -r f; do paths+=("$f"); done < <(cd "$src" && find ggml/src -maxdepth 1 -type f)
if git -C "$src" rev-parse --verify -q HEAD >/dev/null; then
    # What the commit holds, not what a build left in the checkout.
    git -C "$src" archive HEAD -- "${paths[@]}" | tar -x -C "$out/llama.cpp"
    git -C "$src" rev-parse HEAD > "$out/llama.cpp/.commit"
else
    (cd "$src" && tar -cf - "${paths[@]}") | tar -x -C "$out/llama.cpp"
fi
rm -f "$out/llama.cpp/vendor/miniaudio/miniaudio.h"

size() { du -sb "$@" | awk '{s += $1} END {print s}'; }
# What travels besides the carried folder: tracked files and untracked ones
# git does not ignore.
tree_bytes=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -n1 | cut -f1)
total=$((tree_bytes + $(size "$out")))

# The Vulkan kit: loader, C headers, glslc (run through a wrapper that finds
# its libshaderc).
loader=$(ldconfig -p | sed -n 's/.*libvulkan\.so\.1 (libc6,x86-64) => //p' | head -n1)
glslc=$(command -v glslc || true)
if [ -n "$loader" ] && [ -n "$glslc" ] && [ -f /usr/include/vulkan/vulkan_core.h ]; then
    kit=$(mktemp -d)
    mkdir -p "$kit/vulkan-kit/lib" "$kit/vulkan-kit/include" "$kit/vulkan-kit/bin"
    cp -L "$loader" "$kit/vulkan-kit/lib/libvulkan.so.1"
    ln -s libvulkan.so.1 "$kit/vulkan-kit/lib/libvulkan.so"
    mkdir -p "$kit/vulkan-kit/include/vulkan"
    cp /usr/include/vulkan/*.h "$kit/vulkan-kit/include/vulkan/"
    [ -d /usr/include/vk_video ] && cp -r /usr/include/vk_video "$kit/vulkan-kit/include/"
    cp "$glslc" "$kit/vulkan-kit/bin/glslc.bin"
    ldd "$glslc" | awk '/libshaderc/ {print $3}' | xargs -r -I{} cp -L {} "$kit/vulkan-kit/lib/"
    cat > "$kit/vulkan-kit/bin/glslc" <<'EOF'
#!/bin/sh
here=$(dirname "$0")
LD_LIBRARY_PATH=$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec "$here/glslc.bin" "$@"
EOF
    chmod +x "$kit/vulkan-kit/bin/glslc"
    tar -czf "$out/vulkan-kit.tar.gz" -C "$kit" vulkan-kit
    rm -rf "$kit"
    total=$((total + $(size "$out/vulkan-kit.tar.gz")))
    if [ "$total" -gt "$limit" ]; then
        echo "leaving out the Vulkan kit: past 64 MiB" >&2
        total=$((total - $(size "$out/vulkan-kit.tar.gz")))
        rm -f "$out/vulkan-kit.tar.gz"
    fi
else
    echo "no Vulkan kit: this machine lacks the loader, glslc or Vulkan's headers" >&2
fi

vk_bins=${LOOM_NPM_LLAMA_VULKAN_BINS:-}
if [ -n "$vk_bins" ] && [ -f "$vk_bins/libggml-vulkan.so" ]; then
    tar -czf "$out/ggml-vulkan.tar.gz" -C "$vk_bins" libggml-vulkan.so libggml-base.so
    total=$((total + $(size "$out/ggml-vulkan.tar.gz")))
    if [ "$total" -gt "$limit" ]; then
        echo "leaving out ggml's Vulkan plugin: past 64 MiB" >&2
        total=$((total - $(size "$out/ggml-vulkan.tar.gz")))
        rm -f "$out/ggml-vulkan.tar.gz"
    fi
else
    echo "no ggml Vulkan plugin (LOOM_NPM_LLAMA_VULKAN_BINS names npm's linux-x64-vulkan folder)" >&2
fi

mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "travels: $(mib "$tree_bytes") of working tree + $(mib $((total - tree_bytes))) in .gpu/ = $(mib "$total") (limit 64 MiB)"
if [ "$total" -gt "$limit" ]; then
    echo "too large to travel" >&2
    exit 1
fi
echo 'carry: [".gpu"]'
echo 'run:   command="scripts/gpu-check.sh" carry=[".gpu"] timeout_s=540'
