#!/bin/bash
# loom-run over two loom-rpc-servers on loopback, each pinned to one core
# with one thread: one server alone, the layers split between the two
# (-sm layer), every matrix split between them (-sm tensor, meta device;
# the servers sum partial results over peer links, and again with the
# client summing them, LOOM_RPC_PEER_LINKS=0).
# Prints loom-run's prompt, generation and split lines, two runs each.
#   bench/tensor_split_rpc.sh MODEL.gguf [BUILD_DIR]
# (a 1.1 B model: build/tools/loom-synth -o tl-1b-q4_0.gguf --vocab-from
#  tests/data/tokenizer/ggml-vocab-llama-spm.gguf --type q4_0 --embd 2048
#  --ff 5632 --layers 22 --heads 32 --heads-kv 4 --ctx 2048)
set -u
model=${1:?usage: $0 MODEL.gguf [BUILD_DIR]}
build=${2:-build}
export LOOM_RPC_TOKEN=${LOOM_RPC_TOKEN:-bench-tensor-split}
taskset -c 0 "$build/tools/loom-rpc-server" -p 50201 -t 1 > /dev/null 2>&1 &
s1=$!
taskset -c 1 "$build/tools/loom-rpc-server" -p 50202 -t 1 > /dev/null 2>&1 &
s2=$!
trap 'kill $s1 $s2 2>/dev/null; wait 2>/dev/null' EXIT
sleep 1
a='RPC[127.0.0.1:50201]CPU' b='RPC[127.0.0.1:50202]CPU'
prompt="Once upon a time, in a small village at the edge of a great forest, there lived an old woodcutter and his three children, who spent their days"
run() { # LABEL ARGS...
    local label=$1
    shift
    for rep in 1 2; do
        "$build/tools/loom-run" -m "$model" -p "$prompt" -n 32 --temp 0 -t 1 -fa \
            --rpc 127.0.0.1:50201,127.0.0.1:50202 "$@" 2>&1 > /dev/null |
            grep -E "prompt  |generation|graph splits" | sed "s/^/$label #$rep: /"
    done
}
run one --device "$a" -sm none
run layer --device "$a,$b" -sm layer
run tensor --device "$a,$b" -sm tensor
# The same split with the client summing the partial results (no peer links).
LOOM_RPC_PEER_LINKS=0 run tensor-client-sums --device "$a,$b" -sm tensor
