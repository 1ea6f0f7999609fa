#!/usr/bin/env bash
# Prebuilt ggml programs on loom, not rebuilt: npm's node-llama-cpp@3.22.1 and
# its prebuilt llama.cpp libraries (@node-llama-cpp/linux-x64@3.22.1, built
# on ggml 0.25.1), run once on their own ggml and once with loom's library
# in its place (the folder lib/loom-ggml of an installed loom, first on
# LD_LIBRARY_PATH).
#
#   scripts/test-prebuilt.sh [LOOM_BUILD_DIR [WORK_DIR]]
#
# LOOM_BUILD_DIR (default build) is a built loom; it is installed into
# WORK_DIR/prefix (default WORK_DIR: build/prebuilt). Checks, each printed as
# "ok NAME" or "FAIL NAME":
#   imports      every ggml symbol npm's libllama, libllama-common and
#                llama-addon.node import is exported by loom's library
#   client-ggml  a client linked against npm's libllama (tests/prebuilt/
#   client-loom  llama_greedy.cpp) gives the reference's greedy tokens for
#                every prompt of tests/data/stories260k-reference.json, on
#                ggml and on loom
#   node-ggml    node-llama-cpp in Node.js (tests/prebuilt/node_greedy.mjs)
#   node-loom    runs the prompts greedily: the reference's token ids, and
#                its text through LlamaCompletion
#   loom-in-use  the loom runs loaded loom's library, not ggml's
# The last line counts them: "N passed, M failed". Needs npm, Node.js 20 or
# later, python3 and a C++ compiler; x86-64 Linux (the npm package's
# platform).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
loom_build=$(cd "${1:-build}" && pwd)
work=${2:-build/prebuilt}
mkdir -p "$work"
work=$(cd "$work" && pwd)
model=$root/tests/data/stories260k-f32.gguf
reference=$root/tests/data/stories260k-reference.json
n_predict=64

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

# loom, installed: lib/loom-ggml holds ggml's library names.
cmake --install "$loom_build" --prefix "$work/prefix" >/dev/null || { echo "cannot install loom"; exit 1; }
libdir=$(dirname "$(find "$work/prefix" -name 'libloom.so.*.*' | head -1)")
dropin=$libdir/loom-ggml
[ -e "$dropin/libggml-base.so" ] || { echo "no $dropin/libggml-base.so in the installed tree"; exit 1; }

# npm's packages and the llama.cpp headers of the same release.
bins=$(scripts/fetch-npm-llama.sh "$work/node") || { echo "npm install failed"; exit 1; }
src=$(scripts/fetch-ggml-reference.sh "$root/build/reference") || { echo "cannot fetch llama.cpp's source"; exit 1; }

imports() {
    local want have missing
    want=$(for f in libllama.v0.5.0.so libllama-common.so llama-addon.node; do
        nm -D --undefined-only "$bins/$f" | awk '{print $2}'
    done | sed 's/@.*//' | sort -u)
    have=$(nm -D --defined-only "$bins/libggml-base.so" "$bins/libggml.v0.5.0.so" | awk 'NF == 3 {print $3}' |
        sed 's/@.*//' | sort -u)
    local from_ggml
    from_ggml=$(comm -12 <(echo "$want") <(echo "$have"))
    missing=$(comm -23 <(echo "$from_ggml") <(nm -D --defined-only "$libdir"/libloom.so.*.* | awk 'NF == 3 {print $3}' |
        sed 's/@.*//' | sort -u))
    echo "$(echo "$from_ggml" | grep -c .) ggml symbols imported by npm's llama.cpp libraries"
    if [ -n "$missing" ]; then
        echo "not exported by loom:"
        echo "$missing"
        return 1
    fi
}
check imports imports

# The reference: prompts, token ids, text.
prompts=()
while IFS= read -r line; do prompts+=("$line"); done < <(python3 -c '
import json, sys
for p in json.load(open(sys.argv[1]))["prompts"]: print(p["prompt"])' "$reference")

same_as_reference() { # kind (ids|node) output-file
    python3 - "$reference" "$1" "$2" <<'EOF'
import json, sys
ref = json.load(open(sys.argv[1]))["prompts"]
kind, path = sys.argv[2], sys.argv[3]
if kind == "ids":
    got = [[int(t) for t in l.split()[1:]] for l in open(path) if l.startswith("ids:")]
    want = [p["generated_token_ids"] for p in ref]
else:
    # node-llama-cpp: the ids, and LlamaCompletion's text, which leaves out
    # the space the first generated piece starts with (on ggml as on loom).
    lines = [json.loads(l) for l in open(path) if l.startswith("{")]
    got = [(l["ids"], l["text"]) for l in lines]
    want = [(p["generated_token_ids"], p["generated_text"]) for p in ref]
    got = [g if i >= len(want) or g[1] != want[i][1].removeprefix(" ") else (g[0], want[i][1])
           for i, g in enumerate(got)]
if len(got) != len(want):
    sys.exit(f"{len(got)} answers for {len(want)} prompts")
bad = [i for i in range(len(want)) if got[i] != want[i]]
for i in bad:
    print(f"prompt {i}: got {got[i]!r}\n          want {want[i]!r}")
print(f"{len(want) - len(bad)} of {len(want)} prompts as the reference")
sys.exit(1 if bad else 0)
EOF
}

client=$work/llama_greedy
c++ -std=c++17 -O1 -I"$src/include" -I"$src/ggml/include" "$root/tests/prebuilt/llama_greedy.cpp" -o "$client" \
    "$bins/libllama.v0.5.0.so" "$bins/libggml.v0.5.0.so" "$bins/libggml-base.so" || { echo "cannot build the client"; exit 1; }

run_client() { # extra library folder ("" for ggml's own)
    LD_LIBRARY_PATH="$1${1:+:}$bins" "$client" "$model" "$n_predict" "$bins" "${prompts[@]}" >"$work/client.out" || return 1
    cat "$work/client.out"
    same_as_reference ids "$work/client.out"
}
check client-ggml run_client ""
check client-loom run_client "$dropin"

run_node() { # extra library folder
    (cd "$work/node" && cp "$root/tests/prebuilt/node_greedy.mjs" . &&
        LD_LIBRARY_PATH="$1" node node_greedy.mjs "$model" "$n_predict" "${prompts[@]}") >"$work/node.out" || return 1
    cat "$work/node.out"
    same_as_reference node "$work/node.out"
}
check node-ggml run_node ""
check node-loom run_node "$dropin"

# The loom runs really ran on loom: the loader's record names its library.
loom_in_use() {
    LD_DEBUG=files LD_LIBRARY_PATH="$dropin:$bins" "$client" "$model" 2 "$bins" "${prompts[0]}" 2>&1 >/dev/null |
        grep -E "calling init: .*(ggml|loom)" | tee "$work/loaded.txt"
    grep -q "$dropin/" "$work/loaded.txt" && ! grep -q "$bins/libggml" "$work/loaded.txt"
}
check loom-in-use loom_in_use

echo "prebuilt: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
