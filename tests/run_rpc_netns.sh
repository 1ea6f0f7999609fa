#!/bin/sh
# Two hosts on one machine: a loom-rpc-server speaking TLS in one network
# namespace, loom-run in another, joined by a veth pair. The remote run
# gives the greedy text of the CPU run, its transfers cross the bulk
# connection (over TLS, no fallback to gRPC), and a client that does not
# trust the server's certificate gets no device.
# Exits 77 (skipped) when network namespaces or veth pairs cannot be made
# (no root, no CAP_NET_ADMIN, no ip command) or openssl is missing.
# Usage: run_rpc_netns.sh LOOM_RPC_SERVER LOOM_RUN MODEL OUT_DIR
set -eu
server=$1 run=$2 model=$3 dir=$4
skip() { echo "SKIPPED: $*"; exit 77; }

command -v ip >/dev/null 2>&1 || skip "no ip command"
command -v openssl >/dev/null 2>&1 || skip "no openssl command"
srv="loom-srv-$$" cli="loom-cli-$$" va="lsv$$" vb="lcv$$"
srv_addr=10.213.7.1 cli_addr=10.213.7.2
pid=""
cleanup() {
    [ -n "$pid" ] && { kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
    ip netns del "$srv" 2>/dev/null || true
    ip netns del "$cli" 2>/dev/null || true
    ip link del "$va" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$srv" 2>/dev/null || skip "cannot create a network namespace (ip netns add needs CAP_SYS_ADMIN)"
ip netns add "$cli" 2>/dev/null || skip "cannot create a second network namespace"
ip link add "$va" type veth peer name "$vb" 2>/dev/null || skip "cannot create a veth pair"
ip link set "$va" netns "$srv"
ip link set "$vb" netns "$cli"
ip -n "$srv" addr add "$srv_addr/24" dev "$va"
ip -n "$cli" addr add "$cli_addr/24" dev "$vb"
for ns in "$srv" "$cli"; do ip -n "$ns" link set lo up; done
ip -n "$srv" link set "$va" up
ip -n "$cli" link set "$vb" up

# A certificate for the server's address (the client checks the IP SAN).
cert="$dir/rpc-netns.cert.pem" key="$dir/rpc-netns.key.pem"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=$srv_addr" \
    -addext "subjectAltName=IP:$srv_addr" -keyout "$key" -out "$cert" >/dev/null 2>&1 ||
    skip "openssl cannot make a test certificate"

export LOOM_RPC_TOKEN="run-rpc-netns-$$"
log="$dir/rpc-netns.server.log"
# Emptied here, not only by the server's redirection: the background job may
# open it after the loop below has read an earlier run's port from it.
: >"$log"
ip netns exec "$srv" "$server" -H "$srv_addr" -p 0 -t 1 --tls-cert "$cert" --tls-key "$key" >"$log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 100); do
    port=$(sed -n "s/^loom-rpc-server: listening on $srv_addr:\([0-9][0-9]*\)\$/\1/p" "$log")
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "the server did not start:"; cat "$log"; exit 1; }

prompt="Once upon a time"
cpu=$("$run" -m "$model" -p "$prompt" -n 32 --temp 0 -t 1 --device CPU 2>/dev/null)
[ -n "$cpu" ] || { echo "no text generated on the CPU"; exit 1; }
runlog="$dir/rpc-netns.run.log"
rpc=$(LOOM_RPC_TLS_CA="$cert" ip netns exec "$cli" \
    "$run" -m "$model" -p "$prompt" -n 32 --temp 0 -t 1 --rpc "$srv_addr:$port" 2>"$runlog") || {
    echo "loom-run failed in the client namespace:"; cat "$runlog"; exit 1; }
grep -q "RPC\[$srv_addr:$port\]" "$runlog" || {
    echo "loom-run did not use the remote device:"; cat "$runlog"; exit 1; }
if grep -q "transfers go through gRPC" "$runlog"; then
    echo "the bulk connection was not used:"; cat "$runlog"; exit 1
fi
if [ "$cpu" != "$rpc" ]; then
    printf 'cpu: %s\nrpc: %s\n' "$cpu" "$rpc"
    exit 1
fi

# Without the CA the client cannot reach the server's device.
if LOOM_RPC_TLS_CA="" ip netns exec "$cli" \
    "$run" -m "$model" -p "$prompt" -n 4 --temp 0 -t 1 --rpc "$srv_addr:$port" >/dev/null 2>"$dir/rpc-netns.clear.log"; then
    echo "a client without the CA ran on the TLS server:"; cat "$dir/rpc-netns.clear.log"; exit 1
fi
echo "same text on the remote device across network namespaces, over TLS"
