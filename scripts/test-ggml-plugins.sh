#!/bin/sh
# test-ggml-plugins.sh [BUILD_DIR]
#
# ggml's own CPU backend, hosted by loom as a plugin, against loom's CPU:
# builds llama.cpp's tests/test-backend-ops.cpp (ggml 0.25.1's) unchanged
# against the loom library in BUILD_DIR (default build), lets it load the
# best variant of npm's prebuilt ggml CPU plugins for this processor
# (GGML_BACKEND_PATH=<npm's folder>, LOOM_GGML_PLUGINS=cpu) and runs its
# mode test on the hosted device ggml:CPU, which compares every case with
# loom's CPU: two independent implementations. The operators are those of
# llama's graphs; MUL_MAT only for the types of common model files.
# Fetches llama.cpp (scripts/fetch-ggml-reference.sh BUILD_DIR/reference)
# and npm's package (scripts/fetch-npm-llama.sh BUILD_DIR/npm-llama) once.
# Fails when a case fails other than those below, or when no case ran.
set -u

# CPY of bf16 or f16 to q8_0: ggml's CPU quantizes with its SIMD rows
# (_mm256_round_ps, ties to even), loom's CPU as ggml's reference rows do
# (roundf, ties away from zero). Sources with few mantissa bits make ties
# likely: bf16's cases fail in every run (ERR about 3e-7, over the 6e-8
# allowed), f16's now and then (8.5e-8).
expected='CPY\(type_src=b?f16,type_dst=q8_0,'

build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd) || exit 2
[ -e "$build/libloom.so" ] || { echo "no $build/libloom.so: build loom first" >&2; exit 2; }
cd "$root" || exit 2
llama=$(scripts/fetch-ggml-reference.sh "$build/reference") || { echo "FAIL: cannot fetch llama.cpp"; exit 1; }
bins=${LOOM_NPM_LLAMA_BINS:-}
if [ -z "$bins" ]; then
    bins=$(scripts/fetch-npm-llama.sh "$build/npm-llama") || { echo "FAIL: cannot install npm's packages"; exit 1; }
fi

work=$build/ggml-plugins
tbo=$work/test-backend-ops
mkdir -p "$work"
if [ ! -x "$tbo" ] || [ "$llama/tests/test-backend-ops.cpp" -nt "$tbo" ] || [ "$build/libloom.so" -nt "$tbo" ]; then
    echo "building test-backend-ops against $build/libloom.so"
    if ! ${CXX:-g++} -std=c++17 -O2 -I"$root/include" "$llama/tests/test-backend-ops.cpp" -L"$build" -lloom \
            -Wl,-rpath,"$build" -o "$tbo" > "$work/build.log" 2>&1; then
        cat "$work/build.log"
        echo "FAIL: test-backend-ops does not build against loom"
        exit 1
    fi
fi

n_run=0 bad=0
run() { # run NAME test-backend-ops-arguments...
    name=$1; shift
    log=$work/$name.log
    GGML_BACKEND_PATH=$bins LOOM_GGML_PLUGINS=cpu stdbuf -oL "$tbo" test -b ggml:CPU "$@" > "$log" 2>&1
    rc=$?
    grep -q 'loaded backend ggml:CPU' "$log" || { echo "FAIL $name: ggml's CPU plugin was not loaded"; bad=1; return; }
    counts=$(sed -n 's/^ *\([0-9]*\)\/\([0-9]*\) tests passed$/\1 \2/p' "$log")
    [ -n "$counts" ] || { echo "FAIL $name (status $rc): no result"; tail -n 5 "$log"; bad=1; return; }
    set -- $counts
    n_run=$((n_run + $2))
    unexpected=$(grep 'FAIL' "$log" | grep '^\[' | grep -v -E "$expected")
    n_expected=$(grep 'FAIL' "$log" | grep '^\[' | grep -c -E "$expected")
    if [ $rc -gt 1 ] || [ -n "$unexpected" ]; then
        echo "FAIL $name (status $rc): $1/$2 cases pass"
        echo "$unexpected" | head -n 20
        bad=1
        return
    fi
    note=""
    [ "$n_expected" -gt 0 ] && note=" ($n_expected expected failures of CPY to q8_0)"
    echo "ok   $name: $1/$2 cases pass$note"
}

start=$(date +%s)
run ops -o GET_ROWS,SET_ROWS,CPY,RMS_NORM,SCALE,SOFT_MAX,ROPE,GLU,ADD,MUL
run mul_mat -o MUL_MAT -p 'type_a=(f32|f16|q4_0|q8_0|q4_K|q6_K),type_b=f32'
echo "$n_run cases in $(( $(date +%s) - start )) s (logs in $work)"
[ "$n_run" -gt 0 ] || { echo "FAIL: no case ran"; exit 1; }
[ "$bad" -eq 0 ]
