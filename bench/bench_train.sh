#!/bin/sh
# bench_train.sh LOOM_BUILD_DIR [GGML_BIN_DIR [GGML_INCLUDE_DIR]] [-- BENCH_OPTIONS...]
#
# Builds bench/bench_train.cpp twice with the same compiler and flags, once
# against loom (LOOM_BUILD_DIR/libloom.so) and once against ggml 0.25.1
# (default /work/ref/build-ggml/bin, headers /work/ref/llama.cpp/ggml/include),
# runs them in turn (ROUNDS times each, default 3, alternating), and prints
# every run's median epoch time and the ratio loom / ggml of the medians.
# Options after -- go to both programs (for example --samples 256 --reps 1
# for a quick check that everything runs).
set -eu
[ $# -ge 1 ] || { echo "usage: $0 LOOM_BUILD_DIR [GGML_BIN_DIR [GGML_INCLUDE_DIR]] [-- OPTIONS]" >&2; exit 2; }
loom_build=$(cd "$1" && pwd); shift
ggml_bin=/work/ref/build-ggml/bin
ggml_inc=/work/ref/llama.cpp/ggml/include
if [ $# -ge 1 ] && [ "$1" != "--" ]; then ggml_bin=$(cd "$1" && pwd); shift; fi
if [ $# -ge 1 ] && [ "$1" != "--" ]; then ggml_inc=$(cd "$1" && pwd); shift; fi
[ $# -ge 1 ] && [ "$1" = "--" ] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${ROUNDS:-3}
cxx=${CXX:-g++}
flags="-std=c++17 -O2 -march=native"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
$cxx $flags -I"$root/include" "$root/bench/bench_train.cpp" -o "$work/train_loom" \
    -L"$loom_build" -lloom -Wl,-rpath,"$loom_build"
$cxx $flags -I"$ggml_inc" "$root/bench/bench_train.cpp" -o "$work/train_ggml" \
    -L"$ggml_bin" -lggml -lggml-base -lggml-cpu -Wl,-rpath,"$ggml_bin"

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
: > "$work/loom.txt"
: > "$work/ggml.txt"
r=1
while [ $r -le "$rounds" ]; do
    for lib in loom ggml; do
        out=$("$work/train_$lib" "$@")
        [ $r -eq 1 ] && [ $lib = loom ] && echo "$out" | grep '^#' | head -n 1
        m=$(echo "$out" | awk '/^median_epoch_ms/ { print $2 }')
        loss=$(echo "$out" | awk '/^epoch_ms/ { l = $4 } END { print l }')
        echo "round $r $lib: median epoch $m ms (last loss $loss)"
        echo "$m" >> "$work/$lib.txt"
    done
    r=$((r + 1))
done
lm=$(median < "$work/loom.txt")
gm=$(median < "$work/ggml.txt")
echo "loom $lm ms, ggml $gm ms per epoch: loom / ggml = $(awk -v a="$lm" -v b="$gm" 'BEGIN { printf "%.3f", a / b }')"
