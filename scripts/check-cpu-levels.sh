#!/usr/bin/env bash
# Runs loom as x86 processors this machine may exceed, under qemu-user:
#   Haswell  AVX2, FMA, F16C, no AVX-512   -> the avx2 table
#   Nehalem  SSE4.2, no AVX                -> the portable table
# On each: the kernel-table tests, the CPU backend's and the quantized
# products' tests, the bundled model's greedy text against the reference
# (tests/data/stories260k-reference.json), and repacked against plain Q4_K
# weights. Every step must print the table it exercised; a step that ran no
# test fails.
#
#   scripts/check-cpu-levels.sh [BUILD_DIR]    (default: build)
#
# qemu's instruction checks are what count here, not its speed. It needs a
# qemu-user whose x86 emulation is right for the AVX2 gathers (QEMU 7.2 reads
# vpgatherdd's index register xmm4/ymm4 as no index, Debian 12's own
# package; bookworm-backports has 10.0): a probe checks that, and that qemu
# refuses the instructions each level lacks, before anything else runs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
qemu=${QEMU_X86_64:-qemu-x86_64}

case "$(uname -m)" in
    x86_64) ;;
    *)
        echo "check-cpu-levels: not an x86-64 machine ($(uname -m)); nothing to run"
        exit 0
        ;;
esac
command -v "$qemu" >/dev/null || { echo "check-cpu-levels: $qemu not found (Debian's qemu-user)" >&2; exit 2; }
for f in tools/loom-run tools/loom-synth tests/test_simd; do
    [ -x "$build/$f" ] || { echo "check-cpu-levels: $build/$f not built" >&2; exit 2; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- the emulator itself -------------------------------------------------
cat >"$work/probe.c" <<'EOF'
#include <immintrin.h>
#include <stdio.h>
#include <string.h>
/* "gather": a masked vpgatherdd whose index register is ymm4 (VSIB index
   100b, which a plain SIB byte would read as no index).
   "avx2", "avx512": one instruction of the set. */
__attribute__((target("avx2"), noinline)) static int gather(void) {
    static int data[64];
    for (int i = 0; i < 64; ++i) data[i] = i * 3 + 1;
    __m256i idx = _mm256_setr_epi32(0, 36, 72, 108, 144, 180, 216, 252), r;
    __asm__ volatile("vmovdqu %1, %%ymm4\n\tvpcmpeqd %%ymm1, %%ymm1, %%ymm1\n\t"
                     "vpxor %%ymm0, %%ymm0, %%ymm0\n\tvpgatherdd %%ymm1, (%2, %%ymm4, 1), %%ymm0\n\t"
                     "vmovdqu %%ymm0, %0"
                     : "=m"(r) : "m"(idx), "r"(data) : "xmm0", "xmm1", "xmm4", "memory");
    int out[8];
    memcpy(out, &r, sizeof out);
    for (int i = 0; i < 8; ++i) {
        if (out[i] != data[i * 9]) return 1;
    }
    return 0;
}
static int avx2(void) {
    __asm__ volatile("vpaddd %%ymm0, %%ymm0, %%ymm0" ::: "xmm0");
    return 0;
}
static int avx512(void) {
    __asm__ volatile("vpaddd %%zmm0, %%zmm0, %%zmm0" ::: "xmm0");
    return 0;
}
int main(int argc, char ** argv) {
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "gather")) return gather();
    if (!strcmp(argv[1], "avx2")) return avx2();
    if (!strcmp(argv[1], "avx512")) return avx512();
    return 2;
}
EOF
cc -O1 -o "$work/probe" "$work/probe.c"
probe() { # cpu what -> exit status under qemu
    local rc=0
    "$qemu" -cpu "$1" "$work/probe" "$2" >/dev/null 2>&1 || rc=$?
    echo "$rc"
}
echo "check-cpu-levels: $("$qemu" --version | head -1)"
if [ "$(probe Haswell gather)" != 0 ]; then
    echo "check-cpu-levels: this qemu emulates vpgatherdd with index register ymm4 wrongly (QEMU 7.2 does):" >&2
    echo "  install a newer qemu-user (Debian 12: apt-get install -t bookworm-backports qemu-user)" >&2
    exit 2
fi
[ "$(probe Haswell avx2)" = 0 ] || { echo "check-cpu-levels: qemu -cpu Haswell does not run AVX2" >&2; exit 2; }
[ "$(probe Haswell avx512)" = 132 ] || { echo "check-cpu-levels: qemu -cpu Haswell does not refuse AVX-512" >&2; exit 2; }
[ "$(probe Nehalem avx2)" = 132 ] || { echo "check-cpu-levels: qemu -cpu Nehalem does not refuse AVX2" >&2; exit 2; }
echo "check-cpu-levels: qemu refuses AVX-512 as Haswell and AVX2 as Nehalem, and runs the AVX2 gathers right"

# --- loom on each level ----------------------------------------------------
fail=0
steps=0
ref=tests/data/stories260k-reference.json
model=tests/data/stories260k-f32.gguf
# The first reference prompt and its 64 greedy tokens' text.
prompt=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompts"][0]["prompt"], end="")' "$ref")
want_text=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["prompts"][0]; print(p["prompt"] + p["generated_text"], end="")' "$ref")
n_gen=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["prompts"][0]["generated_token_ids"]))' "$ref")

# The test executables that hold the kernel tables' tests, the CPU backend's
# and the quantized products' (those built).
tests=()
for t in test_simd test_simd_gemm test_simd_quant test_repack test_backend_cpu test_ops_matmul test_ops_moe; do
    [ -x "$build/tests/$t" ] && tests+=("$t")
done

step() { # name, then the command; its output in $work/log
    local name=$1
    shift
    steps=$((steps + 1))
    local t0=$SECONDS rc=0
    "$@" >"$work/log" 2>&1 || rc=$?
    printf '  %-44s %s (%ds)\n' "$name" "$([ $rc = 0 ] && echo ok || echo "FAILED ($rc)")" $((SECONDS - t0))
    if [ $rc != 0 ]; then
        tail -40 "$work/log" | sed 's/^/    | /'
        fail=1
    fi
    return $rc
}

run_gtest() { # cpu exe
    local out rc=0
    out=$("$qemu" -cpu "$1" "$build/tests/$2" --gtest_brief=1 2>&1) || rc=$?
    echo "$out"
    [ $rc = 0 ] || return $rc
    # A run that executed nothing fails.
    echo "$out" | grep -Eq '^\[  PASSED  \] [1-9][0-9]* tests?\.' || { echo "ran no test"; return 1; }
}

check_table() { # cpu expected-table
    local out
    out=$("$qemu" -cpu "$1" "$build/tests/test_simd" --gtest_filter=Simd.TableIsChosenOnce 2>&1) || { echo "$out"; return 1; }
    echo "$out" | grep -a "kernel table:"
    echo "$out" | grep -aq "^kernel table: $2 " || { echo "expected the $2 table"; return 1; }
}

greedy_text() { # cpu expected-table
    local got
    got=$("$qemu" -cpu "$1" "$build/tools/loom-run" -m "$model" -p "$prompt" -n "$n_gen" --temp 0 -t 2 2>"$work/stderr")
    grep -a "CPU kernel table" "$work/stderr"
    grep -aq "CPU kernel table $2\$" "$work/stderr" || { cat "$work/stderr"; echo "expected the $2 table"; return 1; }
    if [ "$got" != "$want_text" ]; then
        printf 'got:  %s\nwant: %s\n' "$got" "$want_text"
        return 1
    fi
    echo "the reference's $n_gen greedy tokens"
}

repack_same() { # cpu expected-table
    printf '#!/bin/sh\nexec %s -cpu %s %s "$@"\n' "$qemu" "$1" "$PWD/$build/tools/loom-run" >"$work/loom-run-$1"
    chmod +x "$work/loom-run-$1"
    local rc=0
    sh tests/repack_same_text.sh "$build/tools/loom-synth" "$work/loom-run-$1" "$model" "$work" Q4_K_M || rc=$?
    if [ "$2" = portable ]; then
        # The portable table has no repacked kernels: the script says so.
        [ $rc = 77 ]
    else
        [ $rc = 0 ]
    fi
}

for level in Haswell:avx2 Nehalem:portable; do
    cpu=${level%%:*}
    table=${level#*:}
    echo "check-cpu-levels: qemu -cpu $cpu (expects the $table table)"
    step "kernel table chosen" check_table "$cpu" "$table" && sed -n 's/^kernel table: /    /p' "$work/log"
    step "loom-run greedy text, bundled model" greedy_text "$cpu" "$table" || true
    step "repacked Q4_K gives the same text" repack_same "$cpu" "$table" || true
    for t in "${tests[@]}"; do
        step "$t" run_gtest "$cpu" "$t" && grep -a '^\[  PASSED  \]\|SKIPPED \]' "$work/log" | head -3 | sed 's/^/    /'
    done
done

if [ $steps -eq 0 ]; then
    echo "check-cpu-levels: nothing ran"
    exit 1
fi
if [ $fail != 0 ]; then
    echo "check-cpu-levels: FAILED"
    exit 1
fi
echo "check-cpu-levels: all $steps steps passed on Haswell (avx2) and Nehalem (portable)"
