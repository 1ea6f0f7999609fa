#!/usr/bin/env bash
# Builds test programs written against ggml's headers (ggml's tests/*.c,
# *.cpp, or llama.cpp's) unchanged against an installed loom, runs each, and
# prints one line per program: ok, FAIL (exit status), or NO BUILD.
#   scripts/test-ggml-programs.sh BUILD_DIR FILE... [-- ARGS for every program]
# BUILD_DIR is a configured and built loom build folder; it is installed
# into a temporary prefix, and the programs find it with find_package(ggml).
# Exits 1 when any program does not build or fails.
set -uo pipefail
build_dir=$(cd "$1" && pwd)
shift
files=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do files+=("$(readlink -f "$1")"); shift; done
[ "${1:-}" = "--" ] && shift
args=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null || { echo "cannot install $build_dir"; exit 1; }

mkdir -p "$work/src"
{
    echo 'cmake_minimum_required(VERSION 3.16)'
    echo 'project(ggml_programs C CXX)'
    echo 'set(CMAKE_CXX_STANDARD 17)'
    echo 'find_package(ggml REQUIRED)'
    echo 'find_package(Threads REQUIRED)'
    for f in "${files[@]}"; do
        name=$(basename "${f%.*}")
        echo "add_executable($name \"$f\")"
        echo "target_link_libraries($name PRIVATE ggml::ggml Threads::Threads m)"
    done
} > "$work/src/CMakeLists.txt"
cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/prefix" \
    >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j "${JOBS:-2}" -- -k 0 >"$work/build.log" 2>&1

status=0
for f in "${files[@]}"; do
    name=$(basename "${f%.*}")
    exe="$work/build/$name"
    if [ ! -x "$exe" ]; then
        echo "$name: NO BUILD"
        grep -E "error:" "$work/build.log" | grep -F "$(basename "$f")" | head -3 | sed 's/^/    /'
        status=1
        continue
    fi
    (cd "$work" && timeout "${TIMEOUT:-300}" "$exe" "${args[@]}" >"$work/$name.log" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "$name: ok"
    else
        echo "$name: FAIL (exit $rc)"
        tail -5 "$work/$name.log" | sed 's/^/    /'
        status=1
    fi
done
exit $status
