#!/usr/bin/env bash
# npm's prebuilt llama.cpp (@node-llama-cpp/linux-x64@3.22.1, on ggml 0.25.1,
# which picks its best CPU variant for the processor) on its own ggml and on
# loom's library in its place, alternated, on TinyLlama-shaped files with
# random weights (loom-synth's default shape, 1.1 B parameters).
#
#   bench/prebuilt_vs_ggml.sh [LOOM_BUILD_DIR [WORK_DIR]]
#
# Env: TYPES (default "q4_0 Q4_K_M"), N_PROMPT (442), N_GEN (64), THREADS (2),
# REPS (3). Needs what scripts/test-prebuilt.sh needs; it runs that first
# (the install, npm's packages, the checks) in WORK_DIR (default
# build/prebuilt). Prints a Markdown table: tokens/s per side and the ratio
# loom / ggml, each repetition's pair side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-build}
work=${2:-build/prebuilt}
TYPES=${TYPES:-q4_0 Q4_K_M}
N_PROMPT=${N_PROMPT:-442}
N_GEN=${N_GEN:-64}
THREADS=${THREADS:-2}
REPS=${REPS:-3}

scripts/test-prebuilt.sh "$build" "$work" >/dev/null || { echo "scripts/test-prebuilt.sh failed"; exit 1; }
work=$(cd "$work" && pwd)
bins=$work/node/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
dropin=$(dirname "$(find "$work/prefix" -name 'libloom.so.*.*' | head -1)")/loom-ggml
src=$(scripts/fetch-ggml-reference.sh "$root/build/reference")
exe=$work/llama_speed
c++ -std=c++17 -O2 -I"$src/include" -I"$src/ggml/include" bench/prebuilt/llama_speed.cpp -o "$exe" \
    "$bins/libllama.v0.5.0.so" "$bins/libggml.v0.5.0.so" "$bins/libggml-base.so"

echo "| file | rep | ggml pp t/s | loom pp t/s | loom/ggml | ggml tg t/s | loom tg t/s | loom/ggml |"
echo "|---|---|---|---|---|---|---|---|"
for type in $TYPES; do
    model=$work/tl-$type.gguf
    [ -f "$model" ] || "$build/tools/loom-synth" -o "$model" --vocab-from "$src/models/ggml-vocab-llama-spm.gguf" \
        --type "$type" >/dev/null
    for rep in $(seq "$REPS"); do
        g=$(LD_LIBRARY_PATH="$bins" "$exe" "$model" "$N_PROMPT" "$N_GEN" "$THREADS" "$bins")
        l=$(LD_LIBRARY_PATH="$dropin:$bins" "$exe" "$model" "$N_PROMPT" "$N_GEN" "$THREADS" "$bins")
        python3 - "$type" "$rep" "$g" "$l" <<'PY'
import json, sys
t, r, g, l = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
print(f"| {t} | {r} | {g['pp']:.1f} | {l['pp']:.1f} | {l['pp']/g['pp']:.2f} | {g['tg']:.1f} | {l['tg']:.1f} | {l['tg']/g['tg']:.2f} |")
if r == "1":
    print(f"<!-- ggml devices {g['devices']}; loom devices {l['devices']} -->", file=sys.stderr)
PY
    done
done
