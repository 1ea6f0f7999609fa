#!/usr/bin/env bash
# ggml's RPC protocol: loom-rpc-server --protocol ggml against ggml 0.25.1's
# own rpc-server, each serving the same client — npm's prebuilt llama.cpp
# with ggml's RPC plugin (what llama.cpp's --rpc users run) — alternated, on
# loopback and on a loopback limited by a token bucket (tc tbf) in a network
# namespace of its own for each RATE:
#
#   bench/rpc_vs_ggml.sh [LOOM_BUILD_DIR [WORK_DIR]] [RATE...]   (RATE: none, or as tc writes it: 1gbit; root)
#
# Per rate: a TinyLlama-shaped Q4_0 file from loom-synth with every layer on
# the server (prompt N_PROMPT tokens, then N_GEN generated), and bulk
# uploads and downloads of MIB MiB (bench/prebuilt/rpc_transfer.cpp). Each
# server runs on processor 1 with 1 thread, the client on processor 0.
# Env: N_PROMPT (128), N_GEN (32), MIB (256), REPS (3). Builds what it needs
# with scripts/test-ggml-rpc.sh (run first). Prints a Markdown table: each
# measure per side and loom / ggml, medians of REPS alternated pairs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=$(cd "${1:-build}" && pwd)
work=${2:-build/prebuilt}
shift $(($# >= 2 ? 2 : $#))
rates=("$@")
[ ${#rates[@]} -eq 0 ] && rates=(none)
N_PROMPT=${N_PROMPT:-128}
N_GEN=${N_GEN:-32}
MIB=${MIB:-256}
REPS=${REPS:-3}

# (its checks on one operator only: it is run here for what it builds)
RUNS="GET_ROWS|." scripts/test-ggml-rpc.sh "$build" "$work" >/dev/null || { echo "scripts/test-ggml-rpc.sh failed"; exit 1; }
work=$(cd "$work" && pwd)
out=$work/ggml-rpc
src=$(scripts/fetch-ggml-reference.sh "$root/build/reference")
for prog in llama_speed rpc_transfer; do
    c++ -std=c++17 -O2 -I"$src/include" -I"$src/ggml/include" "bench/prebuilt/$prog.cpp" -o "$out/$prog" \
        -Wl,-rpath,'$ORIGIN' "$out/libllama.v0.5.0.so" "$out/libggml.v0.5.0.so" "$out/libggml-base.so"
done
model=$work/tl-q4_0.gguf
[ -f "$model" ] || "$build/tools/loom-synth" -o "$model" --vocab-from "$src/models/ggml-vocab-llama-spm.gguf" \
    --type q4_0 >/dev/null

median() { python3 -c 'import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

echo "| network | measure | ggml rpc-server | loom --protocol ggml | loom / ggml |"
echo "|---|---|---|---|---|"
for rate in "${rates[@]}"; do
    run=()
    if [ "$rate" != none ]; then
        ns=loom-rpcbench-$$
        ip netns add "$ns"
        ip netns exec "$ns" ip link set lo up
        ip netns exec "$ns" tc qdisc add dev lo root tbf rate "$rate" burst 256kb latency 50ms
        run=(ip netns exec "$ns")
    fi
    "${run[@]}" taskset -c 1 "$out/rpc-server" -H 127.0.0.1 -p 50411 -t 1 >/dev/null 2>&1 &
    ggml_srv=$!
    "${run[@]}" taskset -c 1 "$build/tools/loom-rpc-server" --protocol ggml -H 127.0.0.1 -p 50412 -t 1 \
        >/dev/null 2>&1 &
    loom_srv=$!
    sleep 1
    declare -A v=()
    for rep in $(seq "$REPS"); do
        for side in ggml loom; do
            port=$([ $side = ggml ] && echo 50411 || echo 50412)
            s=$("${run[@]}" taskset -c 0 env LLAMA_SPEED_RPC=127.0.0.1:$port "$out/llama_speed" "$model" "$N_PROMPT" \
                "$N_GEN" 1 "$out")
            t=$("${run[@]}" taskset -c 0 "$out/rpc_transfer" 127.0.0.1:$port "$MIB" 2 "$out")
            v[$side.pp]+=" $(field "$s" pp)"
            v[$side.tg]+=" $(field "$s" tg)"
            v[$side.up]+=" $(field "$t" up)"
            v[$side.down]+=" $(field "$t" down)"
        done
    done
    for m in pp tg up down; do
        g=$(median ${v[ggml.$m]})
        l=$(median ${v[loom.$m]})
        unit=$([ $m = pp ] || [ $m = tg ] && echo "t/s" || echo "MB/s")
        printf '| %s | %s (%s) | %s | %s | %.2f |\n' "$rate" "$m" "$unit" "$g" "$l" "$(python3 -c "print($l / $g)")"
    done
    kill $ggml_srv $loom_srv 2>/dev/null || true
    wait $ggml_srv $loom_srv 2>/dev/null || true
    [ "$rate" != none ] && ip netns del "$ns"
done
