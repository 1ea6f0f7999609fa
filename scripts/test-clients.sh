#!/usr/bin/env bash
# Builds llama.cpp against an installed loom, unchanged, and runs its programs
# on loom. The llama.cpp source is the one npm's node-llama-cpp@3.22.1 ships
# (the llama.cpp whose ggml is 0.25.1, fetched by fetch-ggml-reference.sh).
#
#   scripts/test-clients.sh [--all] [LOOM_BUILD_DIR [WORK_DIR]]
#
# LOOM_BUILD_DIR (default build) is a configured and built loom; it is
# installed into WORK_DIR/prefix (default WORK_DIR: build/clients). llama.cpp
# is configured with -DLLAMA_USE_SYSTEM_GGML=ON against that prefix.
#
# Checks, each printed as "ok NAME" or "FAIL NAME":
#   simple      llama-simple greedy on the bundled stories260K model gives the
#               reference continuation of every prompt
#               (tests/data/stories260k-reference.json)
#   completion  llama-completion greedy gives the same continuations
#   hosted-device, hosted-device-ot (with LOOM_NPM_LLAMA_VULKAN_BINS, npm's
#               linux-x64-vulkan bins) the same with llama.cpp's --device and
#               -ot naming ggml:Vulkan0, npm's ggml Vulkan plugin hosted by loom
#   archs       test-llama-archs: a small random model of every architecture, one
#               process per architecture
#   backend-ops test-backend-ops mode test on every loom device besides the CPU
#   server      llama-server answers an OpenAI-style chat completion on loopback
#   finetune    llama-finetune trains the model for two epochs; the loss falls
#   ctest       (--all only) llama.cpp's own ctest suite, label main; building
#               every target takes about an hour on two cores
#   thread-safety, state-restore (--all only) llama.cpp's test-thread-safety
#               (two models, four contexts, parallel sequences, on threads of
#               their own) and test-state-restore-fragmented, which its ctest
#               runs only on a downloaded model, run on the bundled one
#   whisper     (with WHISPER_DIR=<whisper.cpp checkout>) whisper.cpp configured
#               with -DWHISPER_USE_SYSTEM_GGML=ON, every target built, and its
#               ctest run on the models its repository ships (test-vad-full
#               is left out: it needs ggml-base.en.bin, which is downloaded)
#   whisper-synth (with WHISPER_DIR) whisper-cli transcribes samples/jfk.wav
#               greedily with a model of whisper's tiny layout and random
#               weights (scripts/whisper-synth.py) into the tokens whisper.cpp
#               on ggml 0.25.1 gives (tests/data/whisper-synth-reference.json)
# The exit status is the number of failed checks.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

all=0
if [ "${1:-}" = "--all" ]; then
    all=1
    shift
fi
loom_build=$(cd "${1:-build}" && pwd)
work=${2:-build/clients}
mkdir -p "$work"
work=$(cd "$work" && pwd)
jobs=${JOBS:-2}
model=$root/tests/data/stories260k-f32.gguf
reference=$root/tests/data/stories260k-reference.json

failed=0
check() { # NAME COMMAND...: runs the command, its output in WORK_DIR/logs/NAME.log
    local name=$1
    shift
    mkdir -p "$work/logs"
    if "$@" > "$work/logs/$name.log" 2>&1; then
        echo "ok $name"
    else
        echo "FAIL $name (log: $work/logs/$name.log)"
        tail -n 15 "$work/logs/$name.log" | sed 's/^/    /'
        failed=$((failed + 1))
    fi
}

cmake --install "$loom_build" --prefix "$work/prefix" > /dev/null || exit 100
llama=$(scripts/fetch-ggml-reference.sh "$work") || exit 100

launcher=()
if command -v ccache > /dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$llama" -B "$work/build-llama-loom" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_USE_SYSTEM_GGML=ON \
      -DCMAKE_PREFIX_PATH="$work/prefix" -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=ON \
      -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON "${launcher[@]}" > "$work/configure.log" 2>&1 \
    || { tail -n 30 "$work/configure.log"; exit 100; }

# llama.cpp's RPC test links ggml-rpc by its library name, which the linker
# finds in the prefix as for an installed ggml. Only for this build: a
# project configured with the prefix on LIBRARY_PATH takes it for a folder
# the linker searches by itself and leaves it out of its programs' run paths
# (whisper.cpp's programs then could not find libloom in the build tree).
library_path="$work/prefix/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
targets=(llama-simple llama-completion llama-server llama-finetune test-llama-archs test-backend-ops)
if [ $all = 1 ]; then
    LIBRARY_PATH=$library_path cmake --build "$work/build-llama-loom" -j"$jobs" > "$work/build.log" 2>&1 \
        || { tail -n 40 "$work/build.log"; exit 100; }
else
    LIBRARY_PATH=$library_path cmake --build "$work/build-llama-loom" -j"$jobs" --target "${targets[@]}" \
        > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 100; }
fi
bin=$work/build-llama-loom/bin

# Runs PROGRAM once per reference prompt (ARGS... then the prompt) and requires
# its standard output to hold the reference continuation.
greedy_matches() { # PROGRAM ARGS...
    python3 - "$reference" "$@" <<'EOF'
import json, subprocess, sys
ref = json.load(open(sys.argv[1]))
bad = 0
for case in ref["prompts"]:
    if not case["prompt"]:
        continue  # the programs treat an empty prompt as "no prompt"
    out = subprocess.run(sys.argv[2:] + [case["prompt"]], capture_output=True, text=True, timeout=300).stdout
    if case["generated_text"] in out:
        print(f"matches: {case['prompt']!r}")
    else:
        bad += 1
        print(f"differs: {case['prompt']!r}\n  want: {case['generated_text']!r}\n  got:  {out!r}")
sys.exit(1 if bad else 0)
EOF
}

check simple greedy_matches "$bin/llama-simple" -m "$model" -n 64
check completion greedy_matches "$bin/llama-completion" -m "$model" -n 64 --temp 0 -no-cnv --no-warmup -t 2 \
      --ctx-size 512 --simple-io --no-display-prompt -p
# With npm's ggml Vulkan plugin hosted by loom (LOOM_NPM_LLAMA_VULKAN_BINS,
# on Mesa's lavapipe): llama.cpp names the hosted device itself, every
# layer on it by --device, then only the attention matrices by -ot.
if [ -n "${LOOM_NPM_LLAMA_VULKAN_BINS:-}" ]; then
    hosted=(env GGML_VK_VISIBLE_DEVICES="${GGML_VK_VISIBLE_DEVICES:-0}" GGML_BACKEND_PATH="$LOOM_NPM_LLAMA_VULKAN_BINS"
            LOOM_GGML_PLUGINS=vulkan "$bin/llama-completion" -m "$model" -n 64 --temp 0 -no-cnv --no-warmup -t 2
            --ctx-size 512 --simple-io --no-display-prompt)
    check hosted-device greedy_matches "${hosted[@]}" --device ggml:Vulkan0 -ngl 99 -p
    check hosted-device-ot greedy_matches "${hosted[@]}" -ngl 0 -ot 'attn_(q|k|v|output)=ggml:Vulkan0' -p
fi
# One process per architecture (a model that fails to decode ends the
# program, which would hide the architectures after it); every failing one
# is listed. With LOOM_RPC_SERVERS naming two servers the devices include a
# Meta row (llama.cpp's tensor split over them).
archs_check() {
    local names bad=0
    names=$(grep -oE '\{ *LLM_ARCH_[A-Z0-9_]+, *"[^"]+" *\}' "$llama/src/llama-arch.cpp" | sed -E 's/.*"([^"]+)".*/\1/')
    [ -n "$names" ] || { echo "no architecture names in $llama/src/llama-arch.cpp"; return 1; }
    for a in $names; do
        if ! timeout 600 "$bin/test-llama-archs" -a "$a" > "$work/logs/archs-$a.log" 2>&1; then
            echo "FAIL $a: $(grep -E '^\|' "$work/logs/archs-$a.log" | grep -vE 'OK|SKIP|Model arch|---' | head -n 1 | cut -c1-200)"
            bad=$((bad + 1))
        fi
    done
    echo "$(echo "$names" | wc -w) architectures, $bad failed"
    [ $bad -eq 0 ]
}
check archs archs_check
check backend-ops "$bin/test-backend-ops" test

server_check() {
    local port=$((20000 + RANDOM % 20000))
    "$bin/llama-server" -m "$model" --host 127.0.0.1 --port $port -c 512 -t 2 > "$work/logs/server-process.log" 2>&1 &
    local pid=$!
    python3 - $port <<'EOF'
import json, sys, time, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
for _ in range(300):
    try:
        if urllib.request.urlopen(base + "/health", timeout=2).status == 200:
            break
    except Exception:
        time.sleep(0.2)
body = {"messages": [{"role": "user", "content": "Tell me a story about a dog."}], "max_tokens": 24, "temperature": 0}
req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                             headers={"Content-Type": "application/json"})
reply = json.load(urllib.request.urlopen(req, timeout=120))
print(json.dumps(reply, indent=1))
text = reply["choices"][0]["message"]["content"]
assert reply["object"] == "chat.completion" and text.strip(), "empty completion"
assert reply["usage"]["completion_tokens"] > 0
EOF
    local rc=$?
    kill $pid 2> /dev/null
    wait $pid 2> /dev/null
    return $rc
}
check server server_check

finetune_check() {
    local text=$work/finetune.txt
    python3 -c "
import json, sys
ref = json.load(open(sys.argv[1]))
print(' '.join(c['generated_text'].strip() for c in ref['prompts']) * 3)" "$reference" > "$text"
    "$bin/llama-finetune" -m "$model" -f "$text" -c 64 -b 64 -ub 64 -t 2 -epochs 2 -lr 1e-3 \
        -o "$work/finetuned.gguf" 2>&1 | tr '\r' '\n' > "$work/logs/finetune-progress.log"
    [ -s "$work/finetuned.gguf" ] || { echo "no finetuned model written"; return 1; }
    # The last progress line of each epoch holds that epoch's mean training loss.
    python3 - "$work/logs/finetune-progress.log" <<'EOF'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
ends = []
for i, line in enumerate(lines):
    m = re.search(r"train: .*loss=([0-9.]+)", line)
    if m and (i + 1 == len(lines) or "train:" not in lines[i + 1]):
        ends.append(float(m.group(1)))
print("mean training loss per epoch:", ends)
assert len(ends) >= 2, "fewer than two epochs reported"
assert ends[-1] < ends[0], "the loss did not fall"
EOF
}
check finetune finetune_check

whisper_check() {
    cmake -S "$WHISPER_DIR" -B "$work/build-whisper-loom" -G Ninja -DCMAKE_BUILD_TYPE=Release \
          -DWHISPER_USE_SYSTEM_GGML=ON -DCMAKE_PREFIX_PATH="$work/prefix" -DWHISPER_BUILD_TESTS=ON \
          -DWHISPER_BUILD_EXAMPLES=ON "${launcher[@]}" &&
        cmake --build "$work/build-whisper-loom" -j"$jobs" &&
        ctest --test-dir "$work/build-whisper-loom" --output-on-failure -j1 --timeout 600 -E "^test-vad-full$"
}
# The models whisper.cpp ships for its tests hold no weights (whisper.cpp
# then computes on memory nobody wrote), so its ctest shows that the programs
# run, not what they compute: this check transcribes with a model of random
# weights and compares the tokens with those of whisper.cpp on ggml.
whisper_synth_check() {
    local m=$work/whisper-synth.bin
    python3 scripts/whisper-synth.py "$WHISPER_DIR/models/for-tests-ggml-tiny.en.bin" "$m" &&
        "$work/build-whisper-loom/bin/whisper-cli" -m "$m" -f "$WHISPER_DIR/samples/jfk.wav" -nf -bs 1 -bo 1 -t 2 \
            -ojf -of "$work/whisper-synth" &&
        python3 scripts/whisper-tokens.py compare "$work/whisper-synth.json" tests/data/whisper-synth-reference.json \
            --model "$m"
}
if [ -n "${WHISPER_DIR:-}" ]; then
    check whisper whisper_check
    check whisper-synth whisper_synth_check
fi

if [ $all = 1 ]; then
    # loom's RPC servers want a shared token (llama.cpp's test-rpc-multi-server
    # starts two of its rpc-server programs and a client). Left out: the tests
    # that download from the network (test-download-model, test-arg-parser's
    # remote cases) and test-thread-safety, which ctest runs on the downloaded
    # model and the two checks after it run on the bundled one.
    LOOM_RPC_TOKEN=${LOOM_RPC_TOKEN:-test-clients-$$} \
        check ctest ctest --test-dir "$work/build-llama-loom" -L main --output-on-failure -j"$jobs" --timeout 900 \
        -E '^(test-download-model|test-arg-parser|test-thread-safety)$'
    check thread-safety "$bin/test-thread-safety" -m "$model" -ngl 99 -p "The meaning of life is" -n 128 -c 256 \
        -ub 32 -np 4 -t 2
    check state-restore "$bin/test-state-restore-fragmented" -m "$model"
fi

echo "$failed check(s) failed"
exit $failed
