#!/usr/bin/env bash
# Builds loom (Release, tests on) in build/ and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_WERROR=ON
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2 --timeout 600
