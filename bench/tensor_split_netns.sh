#!/bin/bash
# The placements of bench/tensor_split_rpc.sh inside a network namespace of
# their own, whose loopback is limited by a token bucket (tc tbf) to each
# RATE given, and the bytes that loopback carries per generated token
# (measured once, without a limit: the count of the difference between a
# 33-token and a 1-token run, over 32).
#   bench/tensor_split_netns.sh MODEL.gguf [BUILD_DIR] [RATE...]   (root; RATE as tc writes it: 1gbit, 300mbit)
# Every byte between the client and the servers and between the servers
# crosses that loopback, uploads of the weights too (they are not timed).
set -u
model=${1:?usage: $0 MODEL.gguf [BUILD_DIR] [RATE...]}
build=$(realpath "${2:-build}")
shift $(($# >= 2 ? 2 : 1))
rates=("$@")
[ ${#rates[@]} -eq 0 ] && rates=(none 1gbit 300mbit)
ns=loom-split-$$
ip netns add "$ns" || exit 1
trap 'ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null; sleep 0.5; ip netns del "$ns"' EXIT
ip netns exec "$ns" ip link set lo up
export LOOM_RPC_TOKEN=${LOOM_RPC_TOKEN:-bench-tensor-split}
in_ns() { ip netns exec "$ns" "$@"; }
in_ns taskset -c 0 "$build/tools/loom-rpc-server" -p 50201 -t 1 > /dev/null 2>&1 &
in_ns taskset -c 1 "$build/tools/loom-rpc-server" -p 50202 -t 1 > /dev/null 2>&1 &
sleep 1
a='RPC[127.0.0.1:50201]CPU' b='RPC[127.0.0.1:50202]CPU'
prompt="Once upon a time, in a small village at the edge of a great forest, there lived an old woodcutter and his three children, who spent their days"
tx() { in_ns cat /sys/class/net/lo/statistics/tx_bytes; }
loom_run() { # N ARGS...
    local n=$1
    shift
    in_ns "$build/tools/loom-run" -m "$model" -p "$prompt" -n "$n" --temp 0 -t 1 -fa \
        --rpc 127.0.0.1:50201,127.0.0.1:50202 "$@" 2>&1 > /dev/null
}
placements=(one layer tensor tensor-client-sums)
args_of() {
    case $1 in
        one) echo "--device $a -sm none" ;;
        layer) echo "--device $a,$b -sm layer" ;;
        *) echo "--device $a,$b -sm tensor" ;;
    esac
}
peers_of() { [ "$1" = tensor-client-sums ] && echo 0 || echo 1; }
echo "bytes on the loopback per generated token:"
for p in "${placements[@]}"; do
    t0=$(tx)
    LOOM_RPC_PEER_LINKS=$(peers_of "$p") loom_run 1 $(args_of "$p") > /dev/null
    t1=$(tx)
    LOOM_RPC_PEER_LINKS=$(peers_of "$p") loom_run 33 $(args_of "$p") > /dev/null
    t2=$(tx)
    echo "  $p: $(((t2 - t1 - (t1 - t0)) / 32)) bytes"
done
for rate in "${rates[@]}"; do
    in_ns tc qdisc del dev lo root 2> /dev/null
    if [ "$rate" != none ]; then
        in_ns tc qdisc add dev lo root tbf rate "$rate" burst 256kb latency 200ms || exit 1
    fi
    for p in "${placements[@]}"; do
        LOOM_RPC_PEER_LINKS=$(peers_of "$p") loom_run 33 $(args_of "$p") |
            grep -E "prompt  |generation  " | sed "s/^/$rate $p: /"
    done
done
