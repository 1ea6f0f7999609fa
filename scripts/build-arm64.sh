#!/usr/bin/env bash
# Cross-builds loom for 64-bit Arm Linux with Debian's cross compiler
# (installed here when missing) into build-arm64/: the core, allocator,
# backend layer, scheduler, CPU backend, GGUF, tools and tests; the backends
# that need libraries of the target (RPC's gRPC, OpenBLAS, Vulkan) are off.
#
#   scripts/build-arm64.sh [--all]
#
# Without --all only what scripts/check-cpu-levels.sh --arch aarch64 runs is
# built. Programs run under qemu-user: qemu-aarch64 -L /usr/aarch64-linux-gnu
# build-arm64/tools/loom-run (CTest does so by itself). LOOM_WERROR=1 in the
# environment turns warnings into errors.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh g++-aarch64-linux-gnu libc6-dev-arm64-cross
werror=()
if [ "${LOOM_WERROR:-0}" = 1 ]; then
    werror=(-DLOOM_WERROR=ON)
fi
cmake -S . -B build-arm64 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
    -DLOOM_RPC=OFF -DLOOM_VULKAN=OFF -DLOOM_BLAS=OFF -DLOOM_BUILD_BENCH=OFF "${werror[@]}"
if [ "${1:-}" = --all ]; then
    cmake --build build-arm64 -j2
else
    cmake --build build-arm64 -j2 --target loom-run loom-synth test_simd test_simd_gemm test_simd_quant \
        test_repack test_backend_cpu test_ops_matmul test_ops_moe
fi
