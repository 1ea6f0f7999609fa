#!/usr/bin/env bash
# Runs loom as processors this machine may lack, under qemu-user:
#   x86-64 (default):
#     Haswell     AVX2, FMA, F16C, no AVX-512   -> the avx2 table
#     Nehalem     SSE4.2, no AVX                -> the portable table
#   64-bit Arm (--arch aarch64, a cross build, cmake/aarch64-linux-gnu.cmake):
#     max         every extension qemu has      -> the neon_i8mm table
#     neoverse-n1 SDOT, no SMMLA                -> the neon_dotprod table
#     cortex-a72  Advanced SIMD, no SDOT        -> the neon table
# On each: the kernel-table tests, the CPU backend's and the quantized
# products' tests, the bundled model's greedy text against the reference
# (tests/data/stories260k-reference.json), and repacked against plain
# Q4_K, Q4_0 and IQ4_XS weights (the same text where the table repacks the
# type, nothing repacked where it does not). Every step must print the table it
# exercised; a step that ran no test fails.
#
#   scripts/check-cpu-levels.sh [--arch x86_64|aarch64] [BUILD_DIR]   (default: build, build-arm64)
#
# qemu's instruction checks are what count here, not its speed. A probe
# first checks that qemu refuses the instructions each level lacks (and, on
# x86, that it runs the AVX2 gathers right: QEMU 7.2, Debian 12's own
# package, reads vpgatherdd's index register xmm4/ymm4 as no index;
# scripts/install-qemu.sh takes 10.0 from bookworm-backports).
set -euo pipefail
cd "$(dirname "$0")/.."
arch=x86_64
if [ "${1:-}" = --arch ]; then
    arch=$2
    shift 2
fi
case "$arch" in
    x86_64)
        build=${1:-build}
        qemu=(qemu-x86_64)
        levels=(Haswell:avx2 Nehalem:portable)
        cc_target=(cc)
        [ "$(uname -m)" = x86_64 ] || { echo "check-cpu-levels: x86-64 levels need an x86-64 machine"; exit 0; }
        ;;
    aarch64)
        build=${1:-build-arm64}
        qemu=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
        levels=(max:neon_i8mm neoverse-n1:neon_dotprod cortex-a72:neon)
        cc_target=(aarch64-linux-gnu-gcc -march=armv8.2-a+dotprod+i8mm)
        ;;
    *)
        echo "check-cpu-levels: unknown --arch $arch" >&2
        exit 2
        ;;
esac
command -v "${qemu[0]}" >/dev/null || { echo "check-cpu-levels: ${qemu[0]} not found (Debian's qemu-user)" >&2; exit 2; }
for f in tools/loom-run tools/loom-synth tests/test_simd; do
    [ -x "$build/$f" ] || { echo "check-cpu-levels: $build/$f not built" >&2; exit 2; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- the emulator itself -------------------------------------------------
if [ "$arch" = x86_64 ]; then
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
else
    cat >"$work/probe.c" <<'EOF'
#include <string.h>
/* "sdot": one instruction of the dot-product extension; "smmla": one of
   the 8-bit integer matrix multiply. */
int main(int argc, char ** argv) {
    if (argc < 2) return 2;
    if (!strcmp(argv[1], "sdot")) {
        __asm__ volatile("sdot v0.4s, v1.16b, v2.16b" ::: "v0");
        return 0;
    }
    if (!strcmp(argv[1], "smmla")) {
        __asm__ volatile("smmla v0.4s, v1.16b, v2.16b" ::: "v0");
        return 0;
    }
    return 2;
}
EOF
fi
"${cc_target[@]}" -O1 -o "$work/probe" "$work/probe.c"
probe() { # cpu what -> exit status under qemu
    local rc=0
    "${qemu[@]}" -cpu "$1" "$work/probe" "$2" >/dev/null 2>&1 || rc=$?
    echo "$rc"
}
echo "check-cpu-levels: $("${qemu[0]}" --version | head -1)"
if [ "$arch" = x86_64 ]; then
    if [ "$(probe Haswell gather)" != 0 ]; then
        echo "check-cpu-levels: this qemu emulates vpgatherdd with index register ymm4 wrongly (QEMU 7.2 does):" >&2
        echo "  install a newer qemu-user (scripts/install-qemu.sh)" >&2
        exit 2
    fi
    [ "$(probe Haswell avx2)" = 0 ] || { echo "check-cpu-levels: qemu -cpu Haswell does not run AVX2" >&2; exit 2; }
    [ "$(probe Haswell avx512)" = 132 ] || { echo "check-cpu-levels: qemu -cpu Haswell does not refuse AVX-512" >&2; exit 2; }
    [ "$(probe Nehalem avx2)" = 132 ] || { echo "check-cpu-levels: qemu -cpu Nehalem does not refuse AVX2" >&2; exit 2; }
    echo "check-cpu-levels: qemu refuses AVX-512 as Haswell and AVX2 as Nehalem, and runs the AVX2 gathers right"
else
    [ "$(probe max smmla)" = 0 ] || { echo "check-cpu-levels: qemu -cpu max does not run SMMLA" >&2; exit 2; }
    [ "$(probe neoverse-n1 sdot)" = 0 ] || { echo "check-cpu-levels: qemu -cpu neoverse-n1 does not run SDOT" >&2; exit 2; }
    [ "$(probe neoverse-n1 smmla)" = 132 ] || { echo "check-cpu-levels: qemu -cpu neoverse-n1 does not refuse SMMLA" >&2; exit 2; }
    [ "$(probe cortex-a72 sdot)" = 132 ] || { echo "check-cpu-levels: qemu -cpu cortex-a72 does not refuse SDOT" >&2; exit 2; }
    echo "check-cpu-levels: qemu runs SMMLA as max, SDOT but not SMMLA as neoverse-n1, and refuses SDOT as cortex-a72"
fi

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
    # qemu's notes on features it cannot emulate (TSX) are left out.
    out=$("${qemu[@]}" -cpu "$1" "$build/tests/$2" --gtest_brief=1 2>&1) || rc=$?
    out=$(grep -av "TCG doesn't support requested feature" <<<"$out" || true)
    echo "$out"
    [ $rc = 0 ] || return $rc
    # A run that executed nothing fails.
    # (a here-string: with pipefail, "echo | grep -q" fails when grep
    # stops reading before echo is done)
    grep -aEq '^\[  PASSED  \] [1-9][0-9]* tests?\.' <<<"$out" || { echo "ran no test"; return 1; }
}

check_table() { # cpu expected-table
    local out
    out=$("${qemu[@]}" -cpu "$1" "$build/tests/test_simd" --gtest_filter=Simd.TableIsChosenOnce 2>&1) || { echo "$out"; return 1; }
    grep -a "kernel table:" <<<"$out"
    grep -aq "^kernel table: $2 " <<<"$out" || { echo "expected the $2 table"; return 1; }
}

greedy_text() { # cpu expected-table
    local got
    got=$("${qemu[@]}" -cpu "$1" "$build/tools/loom-run" -m "$model" -p "$prompt" -n "$n_gen" --temp 0 -t 2 2>"$work/stderr")
    grep -a "CPU kernel table" "$work/stderr"
    grep -aq "CPU kernel table $2\$" "$work/stderr" || { cat "$work/stderr"; echo "expected the $2 table"; return 1; }
    if [ "$got" != "$want_text" ]; then
        printf 'got:  %s\nwant: %s\n' "$got" "$want_text"
        return 1
    fi
    echo "the reference's $n_gen greedy tokens"
}

# Whether a table repacks the matrices of a file type: Q4_K and IQ4_XS on
# avx2 (Notes [Repacked Q4_K] and [Interleaved IQ4_XS rows]), Q4_0 and Q4_K
# on the Arm tables with SDOT (Notes [Interleaved Q4_0 rows] and
# [Interleaved Q4_K rows]); the tables of these levels repack nothing else
# of them.
repacks() { # table file-type
    case "$1:$2" in
        avx2:Q4_K_M | avx2:IQ4_XS | avx2:Q4_0 | neon_dotprod:Q4_0 | neon_i8mm:Q4_0 | neon_dotprod:Q4_K_M | neon_i8mm:Q4_K_M)
            return 0 ;;
        *) return 1 ;;
    esac
}

repack_same() { # cpu expected-table file-type
    local tool
    for tool in loom-run loom-synth; do
        printf '#!/bin/sh\nexec %s -cpu %s %s "$@"\n' "${qemu[*]}" "$1" "$PWD/$build/tools/$tool" >"$work/$tool-$1"
        chmod +x "$work/$tool-$1"
    done
    local rc=0
    sh tests/repack_same_text.sh "$work/loom-synth-$1" "$work/loom-run-$1" "$model" "$work" "$3" || rc=$?
    if repacks "$2" "$3"; then
        [ $rc = 0 ]
    else
        # No repacked kernels for the type: the script says so.
        [ $rc = 77 ]
    fi
}

for level in "${levels[@]}"; do
    cpu=${level%%:*}
    table=${level#*:}
    echo "check-cpu-levels: qemu -cpu $cpu (expects the $table table)"
    step "kernel table chosen" check_table "$cpu" "$table" && sed -n 's/^kernel table: /    /p' "$work/log"
    step "loom-run greedy text, bundled model" greedy_text "$cpu" "$table" || true
    step "repacked Q4_K gives the same text" repack_same "$cpu" "$table" Q4_K_M && tail -1 "$work/log" | sed 's/^/    /'
    step "repacked Q4_0 gives the same text" repack_same "$cpu" "$table" Q4_0 && tail -1 "$work/log" | sed 's/^/    /'
    step "repacked IQ4_XS gives the same text" repack_same "$cpu" "$table" IQ4_XS && tail -1 "$work/log" | sed 's/^/    /'
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
echo "check-cpu-levels: all $steps steps passed on ${levels[*]}"
