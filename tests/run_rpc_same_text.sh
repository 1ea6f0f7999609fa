#!/bin/sh
# loom-run --rpc against a loom-rpc-server started here on loopback gives
# the greedy text of the CPU run on the bundled model: every layer runs on
# the remote device (the default placement), weights and inputs cross the
# bulk connection. Then the same with the server named in LOOM_RPC_SERVERS
# instead of --rpc, as a program that knows nothing of RPC would get it.
# Usage: run_rpc_same_text.sh LOOM_RPC_SERVER LOOM_RUN MODEL OUT_DIR
set -eu
server=$1 run=$2 model=$3 dir=$4
log="$dir/rpc-same-text.server.log"
# Emptied here, not only by the server's redirection: the background job may
# open it after the loop below has read an earlier run's port from it.
: >"$log"
export LOOM_RPC_TOKEN="run-rpc-same-text-$$"
"$server" -H 127.0.0.1 -p 0 -t 1 >"$log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 100); do
    port=$(sed -n 's/^loom-rpc-server: listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$log")
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "the server did not start:"; cat "$log"; exit 1; }
prompt="Once upon a time"
cpu=$("$run" -m "$model" -p "$prompt" -n 32 --temp 0 -t 1 --device CPU 2>/dev/null)
rpc=$("$run" -m "$model" -p "$prompt" -n 32 --temp 0 -t 1 --rpc "127.0.0.1:$port" 2>"$dir/rpc-same-text.run.log")
grep -q "RPC\[127.0.0.1:$port\]" "$dir/rpc-same-text.run.log" || {
    echo "loom-run did not use the remote device:"; cat "$dir/rpc-same-text.run.log"; exit 1; }
[ -n "$cpu" ] || { echo "no text generated"; exit 1; }
if [ "$cpu" != "$rpc" ]; then
    printf 'cpu: %s\nrpc: %s\n' "$cpu" "$rpc"
    exit 1
fi
env=$(LOOM_RPC_SERVERS=" 127.0.0.1:$port, " "$run" -m "$model" -p "$prompt" -n 32 --temp 0 -t 1 \
      --device "RPC[127.0.0.1:$port]CPU" 2>"$dir/rpc-same-text.env.log") || {
    echo "loom-run with LOOM_RPC_SERVERS failed:"; cat "$dir/rpc-same-text.env.log"; exit 1; }
if [ "$cpu" != "$env" ]; then
    printf 'cpu: %s\nLOOM_RPC_SERVERS: %s\n' "$cpu" "$env"
    exit 1
fi
echo "same text on the remote device, added by --rpc and by LOOM_RPC_SERVERS"
