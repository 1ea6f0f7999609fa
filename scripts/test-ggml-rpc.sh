#!/usr/bin/env bash
# ggml 0.25.1's own RPC client against loom-rpc-server --protocol ggml on
# loopback. The client is ggml's RPC backend, built from the reference
# source (scripts/fetch-ggml-reference.sh) as a backend plugin beside npm's
# prebuilt ggml and llama.cpp libraries (@node-llama-cpp/linux-x64@3.22.1),
# so that the programs below are ggml's and llama.cpp's, unchanged:
#
#   scripts/test-ggml-rpc.sh [LOOM_BUILD_DIR [WORK_DIR]]
#
# Checks, each printed as "ok NAME" or "FAIL NAME":
#   rpc-greedy       npm's prebuilt libllama (tests/prebuilt/llama_greedy.cpp)
#                    with every layer on the loom server: the reference's
#                    greedy tokens (tests/data/stories260k-reference.json)
#   rpc-backend-ops  llama.cpp's test-backend-ops, mode test, through the
#                    server's device (RPC0) against ggml's CPU, for the
#                    operators of $OPS (default: those llama's graphs use)
# Also builds ggml's rpc-server into WORK_DIR/ggml-rpc (bench/rpc_vs_ggml.sh
# uses it). WORK_DIR defaults to build/prebuilt (npm's packages are shared
# with scripts/test-prebuilt.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
loom_build=$(cd "${1:-build}" && pwd)
work=${2:-build/prebuilt}
mkdir -p "$work"
work=$(cd "$work" && pwd)
ops=${OPS:-ADD,MUL,SCALE,RMS_NORM,ROPE,SOFT_MAX,GET_ROWS,SET_ROWS,CPY,CONT,GLU,FLASH_ATTN_EXT,MUL_MAT}
# MUL_MAT's cases of the types llama's files hold most (all 1323 take minutes).
mul_mat_params=${MUL_MAT_PARAMS:-'type_a=(f32|f16|q4_0|q8_0|q4_K|q6_K),type_b=f32,m=16,n=(1|9),k=256'}
# Left out of the other operators' cases: BF16 to Q8_0 copies. loom rounds
# a Q8_0 value that lies half-way between two integers away from zero, as
# ggml's reference quantizer (quantize_row_q8_0_ref) does; ggml's x86 and
# Arm CPU code rounds it to even. BF16 data, with its 8-bit mantissa, hits
# such ties often enough to push the two results past test-backend-ops'
# error bound (docs/rpc.md).
other_params=${OTHER_PARAMS:-'^(?!type_src=bf16,type_dst=q8_0)'}

bins=$(scripts/fetch-npm-llama.sh "$work/node") || { echo "cannot install npm's packages"; exit 1; }
src=$(scripts/fetch-ggml-reference.sh "$root/build/reference") || { echo "cannot fetch llama.cpp's source"; exit 1; }

# ggml's programs and its RPC plugin, in a folder beside npm's libraries
# (ggml_backend_load_all looks for plugins next to the executable).
out=$work/ggml-rpc
mkdir -p "$out"
for f in "$bins"/*.so; do ln -sf "$f" "$out/"; done
cxx=(c++ -std=c++17 -O2 -I"$src/include" -I"$src/ggml/include" -Wl,-rpath,'$ORIGIN')
build() { # target, then the compiler's arguments: built once
    local target=$1
    shift
    [ -e "$out/$target" ] && return 0
    echo "building $target" >&2
    "${cxx[@]}" "$@" -o "$out/$target" || { echo "cannot build $target"; exit 1; }
}
build libggml-rpc.so -fPIC -shared -DGGML_BACKEND_DL -DGGML_BACKEND_BUILD -DGGML_BACKEND_SHARED -DGGML_SHARED \
    -I"$src/ggml/src" "$src/ggml/src/ggml-rpc/ggml-rpc.cpp" "$src/ggml/src/ggml-rpc/transport.cpp" "$out/libggml-base.so" -lpthread
build libadd_rpc_servers.so -fPIC -shared "$root/tests/ggml_rpc/add_rpc_servers.cpp" "$out/libggml-base.so" -ldl
build rpc-server "$src/tools/rpc/rpc-server.cpp" "$out/libggml.v0.5.0.so" "$out/libggml-base.so" -lpthread
build llama_greedy "$root/tests/prebuilt/llama_greedy.cpp" "$out/libllama.v0.5.0.so" "$out/libggml.v0.5.0.so" \
    "$out/libggml-base.so"
build test-backend-ops -O1 "$src/tests/test-backend-ops.cpp" "$out/libggml.v0.5.0.so" "$out/libggml-base.so" -lpthread

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

# The loom server, on a free port.
srv_log=$work/logs/loom-rpc-server-ggml.log
mkdir -p "$work/logs"
"$loom_build/tools/loom-rpc-server" --protocol ggml -H 127.0.0.1 -p 0 -t 2 >"$srv_log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null' EXIT
port=
for _ in $(seq 100); do
    port=$(sed -n 's/^loom-rpc-server: listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$srv_log")
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "the server did not start:"; cat "$srv_log"; exit 1; }
endpoint=127.0.0.1:$port

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
check rpc-greedy greedy

backend_ops() {
    local others=${ops//MUL_MAT/}
    others=${others//,,/,}
    others=${others%,}
    others=${others#,}
    local rc=0
    for run in others mul_mat; do
        local args=(-b RPC0)
        if [ $run = others ]; then
            [ -n "$others" ] || continue
            args+=(-o "$others" -p "$other_params")
        else
            [[ ",$ops," == *,MUL_MAT,* ]] || continue
            args+=(-o MUL_MAT -p "$mul_mat_params")
        fi
        GGML_RPC_SERVERS=$endpoint LD_PRELOAD=$out/libadd_rpc_servers.so "$out/test-backend-ops" test "${args[@]}" \
            >"$work/rpc-backend-ops.$run.out" 2>&1 || rc=1
        grep -E "tests passed|Backend RPC0|FAIL" "$work/rpc-backend-ops.$run.out" | grep -v "^  *$" | tail -5
        # A run that tested nothing proves nothing.
        grep -Eq '^  [1-9][0-9]*/[0-9]+ tests passed' "$work/rpc-backend-ops.$run.out" || { echo "no case ran"; rc=1; }
    done
    return $rc
}
check rpc-backend-ops backend_ops

# The server is still there, and no session is left open.
if kill -0 $srv 2>/dev/null; then
    echo "ok server-alive"
    passed=$((passed + 1))
else
    echo "FAIL server-alive"
    cat "$srv_log"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ $failed = 0 ]
