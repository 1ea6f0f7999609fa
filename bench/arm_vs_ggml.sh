#!/usr/bin/env bash
# loom against ggml 0.25.1 on this 64-bit Arm processor, run natively, both
# built for it, alternated, every ratio from runs of the same invocation:
#
#   bench/arm_vs_ggml.sh [WORK_DIR]        (default build/arm-vs-ggml)
#
#   1. loom, Release, for this processor (-mcpu=native): loom-bench,
#      loom-run, loom-synth;
#   2. ggml 0.25.1 for this processor (scripts/build-ggml-reference.sh
#      PREFIX native, GGML_NATIVE and llamafile's tinyBLAS as llama.cpp
#      builds it), then llama.cpp's llama-bench of the same release on that
#      ggml, and loom-bench's source built against it ("ggml-bench": the
#      same cases through the same public API, on ggml's CPU backend and its
#      CPU_REPACK buffer, as loom-bench on loom's);
#   3. REPS rounds, the order of the two sides swapped each round:
#      - the matrix products of loom-bench (--only gemv for each of
#        GEMV_TYPES, then --only gemm: F32 GEMM), loom against ggml-bench;
#      - for each of TYPES a TinyLlama-shaped file of random weights from
#        loom-synth (1.1 B parameters): loom-run (a prompt of about N_PROMPT
#        tokens, then N_GEN greedy tokens) against llama-bench (-p with the
#        prompt's token count as loom-run reports it, and -n N_GEN).
#
# Prints Markdown tables: each round's rates side by side and the ratio
# loom / ggml (above 1: loom faster). Env: THREADS (default: the
# processors), REPS (3), TYPES ("q4_0 q8_0 Q4_K_M"), GEMV_TYPES ("q4_0 q8_0
# q4_K q6_K"), N_PROMPT (442), N_GEN (64). Needs cmake, ninja, a C++20
# compiler, python3, and npm and git for scripts/fetch-ggml-reference.sh
# (or its checkout in build/reference already).
#
# It measures the processor it runs on: on any other than 64-bit Arm Linux
# it refuses (the x86 comparisons: bench/prebuilt_vs_ggml.sh,
# scripts/bench-llama.sh; without an Arm machine, llvm-mca's estimate:
# bench/arm_mca.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

arch=$(uname -m)
if [ "$(uname -s)" != Linux ] || { [ "$arch" != aarch64 ] && [ "$arch" != arm64 ]; }; then
    echo "arm_vs_ggml: this benchmark runs natively on a 64-bit Arm Linux machine, and this one is" \
        "$(uname -s) $arch: nothing run." >&2
    echo "  (x86: bench/prebuilt_vs_ggml.sh or scripts/bench-llama.sh; no Arm machine at hand:" \
        "bench/arm_mca.sh's static estimate)" >&2
    exit 2
fi

work=${1:-build/arm-vs-ggml}
mkdir -p "$work"
work=$(cd "$work" && pwd)
THREADS=${THREADS:-$(nproc)}
REPS=${REPS:-3}
TYPES=${TYPES:-q4_0 q8_0 Q4_K_M}
GEMV_TYPES=${GEMV_TYPES:-q4_0 q8_0 q4_K q6_K}
N_PROMPT=${N_PROMPT:-442}
N_GEN=${N_GEN:-64}
jobs=$(nproc)

# --- builds ------------------------------------------------------------------
echo "arm_vs_ggml: building loom for this processor" >&2
cmake -S . -B "$work/loom" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-mcpu=native \
    -DCMAKE_C_FLAGS=-mcpu=native -DLOOM_RPC=OFF -DLOOM_VULKAN=OFF -DLOOM_BLAS=OFF -DLOOM_BUILD_BENCH=OFF >&2
cmake --build "$work/loom" -j "$jobs" --target loom-bench loom-run loom-synth >&2
loom_bin=$work/loom/tools

echo "arm_vs_ggml: building ggml 0.25.1 and llama-bench for this processor" >&2
src=$(scripts/fetch-ggml-reference.sh "$root/build/reference")
ggml=$(scripts/build-ggml-reference.sh "$work/ggml" native "$src/ggml")
ggml_lib=$(dirname "$(find "$ggml" -name 'libggml-base.so' | head -1)")
cmake -S "$src" -B "$work/llama" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_USE_SYSTEM_GGML=ON \
    -DCMAKE_PREFIX_PATH="$ggml" -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF >&2
cmake --build "$work/llama" -j "$jobs" --target llama-bench >&2
llama_bench=$(find "$work/llama" -name llama-bench -type f -perm -u+x | head -1)
ggml_bench=$work/ggml-bench
c++ -std=c++20 -O2 -mcpu=native -I"$ggml/include" tools/loom-bench.cpp tools/bench_limits.cpp -o "$ggml_bench" \
    -L"$ggml_lib" -Wl,-rpath,"$ggml_lib" -lggml -lggml-base -lggml-cpu -lpthread
export LD_LIBRARY_PATH="$ggml_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- files -------------------------------------------------------------------
for type in $TYPES; do
    [ -f "$work/tl-$type.gguf" ] || "$loom_bin/loom-synth" -o "$work/tl-$type.gguf" \
        --vocab-from "$src/models/ggml-vocab-llama-spm.gguf" --type "$type" >/dev/null
done
# A prompt of about N_PROMPT tokens of ordinary text.
sentence="Once upon a time there was a little girl who liked to play in the park with her friends. "
prompt=""
while [ "${#prompt}" -lt $((N_PROMPT * 9 / 2)) ]; do prompt+=$sentence; done
# Its length in tokens as loom-run counts it (one vocabulary for every file):
# llama-bench's prompt is as long.
first=${TYPES%% *}
n_tokens=$("$loom_bin/loom-run" -m "$work/tl-$first.gguf" -p "$prompt" -n 1 --temp 0 -t "$THREADS" 2>&1 >/dev/null |
    sed -n 's/^loom-run: prompt *\([0-9]*\) tokens.*/\1/p')
[ -n "$n_tokens" ] || { echo "arm_vs_ggml: loom-run did not report the prompt's tokens" >&2; exit 1; }

# --- runs --------------------------------------------------------------------
log=$work/log
mkdir -p "$log"
products() { # side round -> $log/bench-side-round.txt
    local exe=$loom_bin/loom-bench
    [ "$1" = ggml ] && exe=$ggml_bench
    : >"$log/bench-$1-$2.txt"
    for t in $GEMV_TYPES; do
        "$exe" -t "$THREADS" --no-blas --only gemv --type "$t" >>"$log/bench-$1-$2.txt"
    done
    "$exe" -t "$THREADS" --no-blas --only gemm >>"$log/bench-$1-$2.txt"
}
model_run() { # side round type -> $log/run-side-round-type.txt
    local f=$work/tl-$3.gguf out=$log/run-$1-$2-$3.txt
    if [ "$1" = loom ]; then
        "$loom_bin/loom-run" -m "$f" -p "$prompt" -n "$N_GEN" --temp 0 -t "$THREADS" >/dev/null 2>"$out"
    else
        "$llama_bench" -m "$f" -t "$THREADS" -r 1 -p "$n_tokens" -n 0 -o jsonl >"$out" 2>/dev/null
        "$llama_bench" -m "$f" -t "$THREADS" -r 1 -p 0 -n "$N_GEN" -o jsonl >>"$out" 2>/dev/null
    fi
}
for round in $(seq "$REPS"); do
    sides=(loom ggml)
    [ $((round % 2)) = 0 ] && sides=(ggml loom)
    echo "arm_vs_ggml: round $round of $REPS (${sides[*]})" >&2
    for side in "${sides[@]}"; do products "$side" "$round"; done
    for type in $TYPES; do
        for side in "${sides[@]}"; do model_run "$side" "$round" "$type"; done
    done
done

python3 - "$log" "$REPS" "$TYPES" "$THREADS" "$(grep -m1 'model name\|^CPU part' /proc/cpuinfo || true)" <<'PY'
import json, re, sys
log, reps, types, threads, cpu = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4], sys.argv[5]
row = re.compile(r"^((?:gemv|gemm) .*?) +([0-9.]+) \( *([0-9.]+)\) (GB/s|GFLOP/s)")
def cases(path):
    out = {}
    for line in open(path):
        m = row.match(line)
        if m:
            out[m.group(1).replace(" repacked", "")] = (float(m.group(2)), m.group(4), "repacked" in m.group(1))
    return out
print(f"arm_vs_ggml: {threads} threads; {cpu}\n")
print("| case | round | loom | ggml | unit | loom / ggml |")
print("|---|---|---|---|---|---|")
for r in range(1, reps + 1):
    lo, gg = cases(f"{log}/bench-loom-{r}.txt"), cases(f"{log}/bench-ggml-{r}.txt")
    for name in lo:
        if name in gg:
            l, unit, lr = lo[name]
            g, _, gr = gg[name]
            tag = f"{name} (repacked: loom {'yes' if lr else 'no'}, ggml {'yes' if gr else 'no'})"
            print(f"| {tag} | {r} | {l:.1f} | {g:.1f} | {unit} | {l / g:.2f} |")
print()
print("| file | round | loom pp t/s | ggml pp t/s | loom / ggml | loom tg t/s | ggml tg t/s | loom / ggml |")
print("|---|---|---|---|---|---|---|---|")
for t in types:
    for r in range(1, reps + 1):
        text = open(f"{log}/run-loom-{r}-{t}.txt").read()
        pp = re.search(r"prompt +(\d+) tokens in .*?\( *([0-9.]+) tokens/s", text)
        tg = re.search(r"generation +\d+ tokens in .*?\( *([0-9.]+) tokens/s", text)
        g = {"pp": None, "tg": None}
        for line in open(f"{log}/run-ggml-{r}-{t}.txt"):
            if line.startswith("{"):
                j = json.loads(line)
                g["pp" if j["n_prompt"] > 0 else "tg"] = j["avg_ts"]
        if not (pp and tg and g["pp"] and g["tg"]):
            print(f"| {t} | {r} | (a run failed: see {log}) |")
            continue
        lpp, ltg = float(pp.group(2)), float(tg.group(1))
        print(f"| {t} ({pp.group(1)}-token prompt) | {r} | {lpp:.1f} | {g['pp']:.1f} | {lpp / g['pp']:.2f} | "
              f"{ltg:.1f} | {g['tg']:.1f} | {ltg / g['tg']:.2f} |")
PY
