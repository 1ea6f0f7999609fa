#!/usr/bin/env bash
# ggml's RPC protocol between loom and ggml 0.25.1, both ways, on loopback.
# ggml's side is its RPC backend and rpc-server, built from the reference
# source (scripts/fetch-ggml-reference.sh) beside npm's prebuilt ggml and
# llama.cpp libraries (@node-llama-cpp/linux-x64@3.22.1), so that its
# programs are ggml's and llama.cpp's, unchanged:
#
#   scripts/test-ggml-rpc.sh [LOOM_BUILD_DIR [WORK_DIR]]
#
# Checks, each printed as "ok NAME" or "FAIL NAME":
#   ggml-client-greedy  npm's prebuilt libllama (tests/prebuilt/llama_greedy.cpp)
#                       with every layer on loom-rpc-server --protocol ggml:
#                       the reference's greedy tokens
#                       (tests/data/stories260k-reference.json)
#   ggml-client-ops     llama.cpp's test-backend-ops on ggml, mode test,
#                       through the loom server's device (RPC0) against
#                       ggml's CPU, for the cases of $RUNS (below)
#   loom-client-greedy  loom-run --rpc on ggml's own rpc-server: every layer
#                       on its device, the reference's text
#   loom-client-ops     test-backend-ops built on loom, through ggml's server
#                       (RPC[...]ggml0) against loom's CPU
#   mixed-layer-split   loom-run's layers shared out between a loom server
#   mixed-tensor-split  (loom's protocol) and ggml's server, and each layer's
#                       tensors split across both (the meta device): the
#                       reference's text
#   hosted-client-ops   ggml's RPC client plugin (libggml-rpc.so, below)
#                       hosted in loom, talking to ggml's server:
#                       test-backend-ops built on loom through its device
#                       (ggml:RPC<n>) against loom's CPU
#   hosted-layer-split  loom-run with ggml's plugin: layers 0-2 on the ggml
#                       server's device, 3-4 on loom's CPU: the reference's
#                       text
#   hosted-refused      the same with no server at the endpoint, with a
#                       server of loom's own protocol there, and with
#                       endpoints that do not parse: a clear error, not
#                       ggml's abort
# WORK_DIR defaults to build/prebuilt (npm's packages are shared with
# scripts/test-prebuilt.sh); the programs are built into WORK_DIR/ggml-rpc
# once (bench/rpc_vs_ggml.sh uses them too).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
loom_build=$(cd "${1:-build}" && pwd)
work=${2:-build/prebuilt}
mkdir -p "$work"
work=$(cd "$work" && pwd)
# The cases run through each remote device: one test-backend-ops run per
# "OPS|PARAMS" entry (PARAMS: a regex over the case's parameters; a run must
# test something). The default takes a few minutes: the operators of llama's
# graphs, the products and flash attention on the shapes and types llama's
# files use. RUNS=all: every case of every operator (an hour or more).
default_runs=(
    "GET_ROWS,SET_ROWS,CPY,RMS_NORM,SCALE,SOFT_MAX,ROPE,GLU|."
    "ADD,MUL|^type=f32,ne=\[[0-9]+,[0-9]+,1,1\]"
    "MUL_MAT|type_a=(f32|f16|q4_0|q8_0|q4_K|q6_K),type_b=f32,m=16,n=(1|9),k=256"
    "FLASH_ATTN_EXT|^hsk=(64|128),hsv=(64|128),nh=4,nr23=\[1,1\],kv=512,nb=(1|3),mask=1,sinks=0,max_bias=0\.0+,logit_softcap=0\.0+,prec=f32,type_K=(f16|q8_0),type_V=(f16|q8_0)"
)
if [ "${RUNS:-}" = all ]; then
    runs=("|.")
elif [ -n "${RUNS:-}" ]; then
    IFS=';' read -r -a runs <<<"$RUNS"
else
    runs=("${default_runs[@]}")
fi
# Left out of the other operators' cases: F16 and BF16 to Q8_0 copies. loom
# rounds a Q8_0 value that lies half-way between two integers away from
# zero, as ggml's reference quantizer (quantize_row_q8_0_ref) does; ggml's
# x86 and Arm CPU code rounds it to even. Half-precision data, with 11 or 8
# bits of mantissa, hits such ties often enough to push the two results
# past test-backend-ops' error bound (docs/rpc.md).
ggml_client_exclude='type_src=b?f16,type_dst=q8_0'
# Through ggml's server, copies into the i-quants are left out too: ggml's
# CPU cannot quantize to them on the fly, and its rpc-server aborts on the
# request (ggml's client sends it as well: an RPC device claims every op).
loom_client_exclude='type_src=b?f16,type_dst=q8_0|type_src=[a-z0-9_]+,type_dst=iq'

bins=$(scripts/fetch-npm-llama.sh "$work/node") || { echo "cannot install npm's packages"; exit 1; }
src=$(scripts/fetch-ggml-reference.sh "$root/build/reference") || { echo "cannot fetch llama.cpp's source"; exit 1; }

# ggml's programs and its RPC plugin, in a folder beside npm's libraries
# (ggml_backend_load_all looks for plugins next to the executable).
out=$work/ggml-rpc
mkdir -p "$out"
for f in "$bins"/*.so; do ln -sf "$f" "$out/"; done
cxx=(c++ -std=c++17 -O2 -I"$src/include" -I"$src/ggml/include" -Wl,-rpath,'$ORIGIN')
build() { # target, then the compiler's arguments: built again when a file among them is newer
    local target=$1 arg stale=0
    shift
    if [ -e "$out/$target" ]; then
        for arg in "$@"; do
            [ -f "$arg" ] && [ "$arg" -nt "$out/$target" ] && stale=1
        done
        [ $stale = 0 ] && return 0
    fi
    echo "building $target" >&2
    "${cxx[@]}" "$@" -o "$out/$target" || { echo "cannot build $target"; exit 1; }
}
build libggml-rpc.so -fPIC -shared -DGGML_BACKEND_DL -DGGML_BACKEND_BUILD -DGGML_BACKEND_SHARED -DGGML_SHARED \
    -I"$src/ggml/src" "$src/ggml/src/ggml-rpc/ggml-rpc.cpp" "$src/ggml/src/ggml-rpc/transport.cpp" "$out/libggml-base.so" -lpthread
# (its ggml symbols are taken from the program it is loaded into: ggml's or loom's)
build libadd_rpc_servers.so -fPIC -shared "$root/tests/ggml_rpc/add_rpc_servers.cpp" -ldl
build rpc-server "$src/tools/rpc/rpc-server.cpp" "$out/libggml.v0.5.0.so" "$out/libggml-base.so" -lpthread
build llama_greedy "$root/tests/prebuilt/llama_greedy.cpp" "$out/libllama.v0.5.0.so" "$out/libggml.v0.5.0.so" \
    "$out/libggml-base.so"
build test-backend-ops -O1 "$src/tests/test-backend-ops.cpp" "$out/libggml.v0.5.0.so" "$out/libggml-base.so" -lpthread
# The same program on loom (its own folder: no ggml plugin beside it).
mkdir -p "$out/on-loom"
build on-loom/test-backend-ops -O1 -I"$root/include" "$src/tests/test-backend-ops.cpp" -L"$loom_build" -lloom \
    -Wl,-rpath,"$loom_build" -lpthread

passed=0
failed=0
check() { # NAME COMMAND...: the command's output in WORK_DIR/logs/NAME.log
    local name=$1
    shift
    mkdir -p "$work/logs"
    if "$@" >"$work/logs/$name.log" 2>&1; then
        echo "ok $name"
        passed=$((passed + 1))
    else
        echo "FAIL $name (log: $work/logs/$name.log)"
        tail -20 "$work/logs/$name.log" | sed 's/^/    | /'
        failed=$((failed + 1))
    fi
}

mkdir -p "$work/logs"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts loom-rpc-server with ARGS on a free port, logged to LOG; sets
# started_pid and started_port.
start_loom_server() { # LOG ARGS...
    local log=$1
    shift
    "$loom_build/tools/loom-rpc-server" -H 127.0.0.1 -p 0 "$@" >"$log" 2>&1 &
    started_pid=$!
    pids+=($started_pid)
    started_port=
    for _ in $(seq 100); do
        started_port=$(sed -n 's/^loom-rpc-server: listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$log")
        [ -n "$started_port" ] && return 0
        sleep 0.1
    done
    echo "the server did not start:"
    cat "$log"
    exit 1
}

# loom's server of ggml's protocol.
start_loom_server "$work/logs/loom-rpc-server-ggml.log" --protocol ggml -t 2
srv=$started_pid
port=$started_port
endpoint=127.0.0.1:$port

# ggml's own server.
ggml_port=$(free_port)
ggml_endpoint=127.0.0.1:$ggml_port
ggml_log=$work/logs/ggml-rpc-server.log
"$out/rpc-server" -H 127.0.0.1 -p "$ggml_port" -t 2 >"$ggml_log" 2>&1 &
ggml_srv=$!
pids+=($ggml_srv)
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$ggml_port") 2>/dev/null && break
    sleep 0.1
done

ref_prompt=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["prompts"][0]["prompt"], end="")' \
    tests/data/stories260k-reference.json)
ref_text=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["prompts"][0]; print(p["prompt"] + p["generated_text"], end="")' \
    tests/data/stories260k-reference.json)
# loom-run on the bundled model with ARGS: the reference's text, its
# placement logged to ERR_FILE and printed.
loom_run_text() { # ERR_FILE ARGS...
    local err=$1 got
    shift
    got=$("$loom_build/tools/loom-run" -m tests/data/stories260k-f32.gguf -p "$ref_prompt" -n 64 --temp 0 "$@" 2>"$err") ||
        { cat "$err"; return 1; }
    grep "layers .* on" "$err"
    [ "$got" = "$ref_text" ] || { printf 'got:  %s\nwant: %s\n' "$got" "$ref_text"; return 1; }
}

greedy() {
    local prompts=() line
    while IFS= read -r line; do prompts+=("$line"); done < <(python3 -c '
import json, sys
for p in json.load(open(sys.argv[1]))["prompts"]: print(p["prompt"])' tests/data/stories260k-reference.json)
    LLAMA_GREEDY_RPC=$endpoint "$out/llama_greedy" tests/data/stories260k-f32.gguf 64 "$out" "${prompts[@]}" \
        >"$work/rpc-greedy.out" || return 1
    cat "$work/rpc-greedy.out"
    python3 - tests/data/stories260k-reference.json "$work/rpc-greedy.out" <<'PY'
import json, sys
want = [p["generated_token_ids"] for p in json.load(open(sys.argv[1]))["prompts"]]
got = [[int(t) for t in l.split()[1:]] for l in open(sys.argv[2]) if l.startswith("ids:")]
bad = [i for i in range(len(want)) if i >= len(got) or got[i] != want[i]]
print(f"{len(want) - len(bad)} of {len(want)} prompts as the reference")
sys.exit(1 if bad or len(got) != len(want) else 0)
PY
}
check ggml-client-greedy greedy

ops_env=() # more of the program's environment
backend_ops() { # program device servers tag exclude: each run of $runs, the exclude regex in front
    local program=$1 device=$2 servers=$3 tag=$4 exclude=$5 rc=0 i=0 entry
    for entry in "${runs[@]}"; do
        i=$((i + 1))
        local run_ops=${entry%%|*} params=${entry#*|}
        local args=(-b "$device" -p "^(?!$exclude)(?:$params)")
        [ -n "$run_ops" ] && args+=(-o "$run_ops")
        local log=$work/$tag.$i.out
        env "${ops_env[@]}" GGML_RPC_SERVERS="$servers" LD_PRELOAD="$out/libadd_rpc_servers.so" \
            "$program" test "${args[@]}" >"$log" 2>&1 || rc=1
        echo "run $i (${run_ops:-every operator}):"
        grep -E "tests passed|FAIL" "$log" | tail -5
        # A run that tested nothing proves nothing.
        grep -Eq '^  [1-9][0-9]*/[0-9]+ tests passed' "$log" || { echo "no case ran"; rc=1; }
    done
    return $rc
}
check ggml-client-ops backend_ops "$out/test-backend-ops" RPC0 "$endpoint" ggml-client-ops "$ggml_client_exclude"

loom_greedy() {
    loom_run_text "$work/loom-client-greedy.err" --rpc "$ggml_endpoint" || return 1
    grep -q "layers 0-4 on RPC\[$ggml_endpoint\]ggml0" "$work/loom-client-greedy.err" || { echo "not on ggml's server"; return 1; }
    echo "the reference's text"
}
check loom-client-greedy loom_greedy
check loom-client-ops backend_ops "$out/on-loom/test-backend-ops" "RPC[$ggml_endpoint]ggml0" "$ggml_endpoint" \
    loom-client-ops "$loom_client_exclude"

# A loom server of loom's own protocol beside ggml's.
export LOOM_RPC_TOKEN=${LOOM_RPC_TOKEN:-test-ggml-rpc}
start_loom_server "$work/logs/loom-rpc-server.log" -t 1
loom_srv=$started_pid
loom_port=$started_port
mixed() { # split mode
    local err=$work/mixed-$1.err
    loom_run_text "$err" -fa --rpc "127.0.0.1:$loom_port,$ggml_endpoint" -sm "$1" \
        --device "RPC[127.0.0.1:$loom_port]CPU,RPC[$ggml_endpoint]ggml0" || return 1
    grep -q "RPC\[$ggml_endpoint\]ggml0" "$err" && grep -q "RPC\[127.0.0.1:$loom_port\]CPU" "$err" ||
        { echo "not on both servers"; return 1; }
    echo "the reference's text"
}
check mixed-layer-split mixed layer
check mixed-tensor-split mixed tensor

# ggml's RPC client plugin hosted in loom (the same client as above, as a
# plugin of loom's registry) on ggml's server. Its device's name counts
# the servers the process added: the first is ggml:RPC0.
ops_env=(GGML_BACKEND_PATH="$out/libggml-rpc.so" GGML_RPC_REG=ggml:RPC)
check hosted-client-ops backend_ops "$out/on-loom/test-backend-ops" ggml:RPC0 "$ggml_endpoint" hosted-client-ops \
    "$loom_client_exclude"
ops_env=()
hosted=(--load-backend "$out/libggml-rpc.so" --rpc-backend ggml:RPC)
hosted_split() {
    loom_run_text "$work/hosted-layer-split.err" "${hosted[@]}" --rpc "$ggml_endpoint" --layers-on ggml:RPC0=3 ||
        return 1
    grep -q "layers 0-2 on ggml:RPC0, 3-4 on CPU" "$work/hosted-layer-split.err" || { echo "not split"; return 1; }
    echo "the reference's text"
}
check hosted-layer-split hosted_split
hosted_refused() {
    local endpoint rc
    for endpoint in "127.0.0.1:$(free_port)" "127.0.0.1:$loom_port"; do
        "$loom_build/tools/loom-run" "${hosted[@]}" --rpc "$endpoint" --list-devices 2>"$work/hosted-refused.err"
        rc=$?
        cat "$work/hosted-refused.err"
        [ $rc = 1 ] && grep -q "no server of ggml's RPC protocol 7 answers at $endpoint" "$work/hosted-refused.err" ||
            { echo "rc $rc: not the error expected"; return 1; }
    done
    # Endpoints ggml's client cannot parse: refused before the plugin sees them.
    for endpoint in ":$ggml_port" "127.0.0.1:99999"; do
        "$loom_build/tools/loom-run" "${hosted[@]}" --rpc "$endpoint" --list-devices 2>"$work/hosted-refused.err"
        rc=$?
        cat "$work/hosted-refused.err"
        [ $rc = 1 ] && grep -q "'$endpoint' is not HOST:PORT" "$work/hosted-refused.err" ||
            { echo "rc $rc: not the error expected"; return 1; }
    done
}
check hosted-refused hosted_refused

# The servers are still there.
for pid in $srv $ggml_srv $loom_srv; do
    if kill -0 "$pid" 2>/dev/null; then
        echo "ok server-alive-$pid"
        passed=$((passed + 1))
    else
        echo "FAIL server-alive-$pid"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ $failed = 0 ]
