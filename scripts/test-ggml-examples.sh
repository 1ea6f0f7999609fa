#!/usr/bin/env bash
# Builds ggml's examples (examples/ of a github.com/ggml-org/ggml checkout:
# simple, gpt-2 in all its variants, gpt-j, mnist, sam, yolo, magika, and the
# stand-alone test-cmake project) unchanged against an installed loom.
#   scripts/test-ggml-examples.sh BUILD_DIR GGML_CHECKOUT
# BUILD_DIR is a configured and built loom; it is installed into a temporary
# prefix. The examples' own CMakeLists link a target named ggml, which inside
# ggml's tree is the library itself; here it is an interface target over the
# installed package's ggml::all. test-cmake is configured on its own with
# find_package(ggml 0.19.0), as a user's project would be, and run.
# Prints one line per program (ok or NO BUILD); exits 1 when any is missing.
set -uo pipefail
build_dir=$(cd "$1" && pwd)
examples=$(cd "$2/examples" && pwd)
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > /dev/null || { echo "cannot install $build_dir"; exit 1; }

mkdir -p "$work/src"
cat > "$work/src/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.16)
project(ggml_examples C CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(ggml REQUIRED)
add_library(ggml INTERFACE)
target_link_libraries(ggml INTERFACE ggml::all)
add_subdirectory("$examples" examples)
EOF
cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" \
    > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j "${JOBS:-2}" -- -k 0 > "$work/build.log" 2>&1

status=0
# The targets the examples' CMakeLists define (lines not commented out), but
# for perf-metal, which is built only for Metal.
programs=$(grep -rhE "^\s*set\(TEST_TARGET [A-Za-z0-9_-]+\)" "$examples" --include=CMakeLists.txt \
    | sed -E 's/.*set\(TEST_TARGET ([^)]*)\).*/\1/' | sort -u)
for name in $programs; do
    case $name in test-cmake | perf-metal) continue ;; esac
    exe=$(find "$work/build" -name "$name" -type f -perm -u+x | head -1)
    lib=$(find "$work/build" -name "lib$name.a" | head -1)
    if [ -n "$exe" ] || [ -n "$lib" ]; then
        echo "$name: ok"
    else
        echo "$name: NO BUILD"
        grep -E "error:" "$work/build.log" | head -3 | sed 's/^/    /'
        status=1
    fi
done

# simple-ctx and simple-backend multiply the example's fixed 4x2 and 3x2
# matrices (A B^T); the product, worked by hand, is printed transposed.
expected="[ 60.00 55.00 50.00 110.00
 90.00 54.00 54.00 126.00
 42.00 29.00 28.00 64.00 ]"
for name in simple-ctx simple-backend; do
    exe=$(find "$work/build" -name "$name" -type f -perm -u+x | head -1)
    [ -n "$exe" ] || continue
    if [ "$("$exe" 2> /dev/null | tail -3)" = "$expected" ]; then
        echo "$name (run): ok"
    else
        echo "$name (run): FAIL"
        status=1
    fi
done

cmake -S "$examples/test-cmake" -B "$work/test-cmake" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
    > "$work/test-cmake.log" 2>&1 && cmake --build "$work/test-cmake" >> "$work/test-cmake.log" 2>&1 \
    && "$work/test-cmake/test-cmake" >> "$work/test-cmake.log" 2>&1
if [ $? -eq 0 ]; then
    echo "test-cmake: ok"
else
    echo "test-cmake: FAIL"
    tail -5 "$work/test-cmake.log" | sed 's/^/    /'
    status=1
fi
exit $status
