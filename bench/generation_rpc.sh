#!/bin/bash
# loom-run with every layer on the local CPU (one thread, pinned to core 1)
# against the same layers on a loom-rpc-server on loopback (one thread,
# pinned to core 1, the client pinned to core 0). Prints loom-run's prompt,
# generation and split lines, three alternated runs each.
#   bench/generation_rpc.sh MODEL.gguf [BUILD_DIR]
# (the model: the loom-synth line in bench/tensor_split_rpc.sh)
set -u
model=${1:?usage: $0 MODEL.gguf [BUILD_DIR]}
build=${2:-build}
export LOOM_RPC_TOKEN=${LOOM_RPC_TOKEN:-bench-generation}
taskset -c 1 "$build/tools/loom-rpc-server" -p 50203 -t 1 > /dev/null 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait 2>/dev/null' EXIT
sleep 1
prompt="Once upon a time, in a small village at the edge of a great forest, there lived an old woodcutter and his three children, who spent their days"
for rep in 1 2 3; do
    taskset -c 1 "$build/tools/loom-run" -m "$model" -p "$prompt" -n 64 --temp 0 -t 1 -fa --device cpu 2>&1 > /dev/null |
        grep -E "prompt  |generation|graph splits" | sed "s/^/local #$rep: /"
    taskset -c 0 "$build/tools/loom-run" -m "$model" -p "$prompt" -n 64 --temp 0 -t 1 -fa --rpc 127.0.0.1:50203 \
        --device 'RPC[127.0.0.1:50203]CPU' 2>&1 > /dev/null |
        grep -E "prompt  |generation|graph splits" | sed "s/^/remote #$rep: /"
done
