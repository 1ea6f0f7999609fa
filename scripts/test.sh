#!/usr/bin/env bash
# Builds loom (Release, tests on) in build/ and runs the whole test suite.
# It configures build/ as the README's first command does, so that it reuses
# what that command built. LOOM_WERROR=1 in the environment turns warnings
# into errors (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
werror=()
if [ "${LOOM_WERROR:-0}" = 1 ]; then
    werror=(-DLOOM_WERROR=ON)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${werror[@]}"
cmake --build build -j2
ctest --test-dir build --output-on-failure -j2 --timeout 600
