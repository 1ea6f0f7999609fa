#!/usr/bin/env bash
# loom-run against ik_llama.cpp (github.com/ikawrakow/ik_llama.cpp, the CPU
# fork of llama.cpp with run-time repacking) on the same TinyLlama-shaped
# files (loom-synth's default shape, 1.1 B parameters, random weights), the
# same prompt length, threads and generated tokens, alternated.
#
#   bench/ik_vs_loom.sh IK_SOURCE [LOOM_BUILD_DIR [WORK_DIR]]
#
# IK_SOURCE is a git repository of ik_llama.cpp (a clone, or a bare mirror)
# or a source tree. Its llama-bench is built in WORK_DIR (default build/ik)
# for LEVEL: "native" (-march=native, against loom's own choice of table)
# or "haswell" (AVX2 + FMA + F16C, against loom's avx2 table through
# LOOM_CPU_KERNELS).
#
# Env: LEVEL (native), TYPES (default "q4_0 q8_0 Q4_K_M Q6_K IQ4_XS"),
# WORDS (prompt length in words, default 330: 331 tokens), N_GEN (64),
# THREADS (2), REPS (2), IK_FLAGS (default "-rtr 1 -fa 1": ik's fastest CPU
# flags), LOOM_FLAGS (default "-fa -ctk f16 -ctv f16 --no-mmap").
# Prints a Markdown table, one row per repetition: tokens/s per side and the
# ratio loom / ik.
set -euo pipefail
cd "$(dirname "$0")/.."
ik_src=${1:?usage: $0 IK_SOURCE [LOOM_BUILD_DIR [WORK_DIR]]}
build=${2:-build}
work=${3:-build/ik}
LEVEL=${LEVEL:-native}
TYPES=${TYPES-q4_0 q8_0 Q4_K_M Q6_K IQ4_XS}
WORDS=${WORDS:-330}
N_GEN=${N_GEN:-64}
THREADS=${THREADS:-2}
REPS=${REPS:-2}
IK_FLAGS=${IK_FLAGS:--rtr 1 -fa 1}
LOOM_FLAGS=${LOOM_FLAGS:--fa -ctk f16 -ctv f16 --no-mmap}
mkdir -p "$work"
work=$(cd "$work" && pwd)

case $LEVEL in
    native) arch=(-DGGML_NATIVE=ON); loom_env=() ;;
    haswell) arch=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF)
             loom_env=(LOOM_CPU_KERNELS=avx2) ;;
    *) echo "LEVEL is native or haswell" >&2; exit 2 ;;
esac

# The source tree.
src=$work/src
if [ ! -f "$src/CMakeLists.txt" ]; then
    if git --git-dir="$ik_src" rev-parse HEAD >/dev/null 2>&1 || git -C "$ik_src" rev-parse HEAD >/dev/null 2>&1; then
        gitdir=$(git -C "$ik_src" rev-parse --git-dir 2>/dev/null || echo "$ik_src")
        gitdir=$(cd "$ik_src" && cd "$gitdir" && pwd)
        mkdir -p "$src"
        # Every file whose content the repository holds (a mirror may lack
        # large web assets and vocabularies the benchmark does not read).
        git --git-dir="$gitdir" ls-tree -r HEAD | while read -r mode kind blob path; do
            [ "$kind" = blob ] && git --git-dir="$gitdir" cat-file -e "$blob" 2>/dev/null || continue
            mkdir -p "$src/$(dirname "$path")"
            if [ "$mode" = 120000 ]; then
                ln -sf "$(git --git-dir="$gitdir" cat-file blob "$blob")" "$src/$path"
            else
                git --git-dir="$gitdir" cat-file blob "$blob" > "$src/$path"
                if [ "$mode" = 100755 ]; then chmod +x "$src/$path"; fi
            fi
        done
        git --git-dir="$gitdir" rev-parse HEAD > "$src/.commit"
    else
        rm -rf "$src"
        cp -r "$ik_src" "$src"
    fi
fi
commit=$(cat "$src/.commit" 2>/dev/null || echo unknown)

# ik's llama-bench for the level.
ikb=$work/build-$LEVEL
if [ ! -x "$ikb/bin/llama-bench" ]; then
    cmake -S "$src" -B "$ikb" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DGGML_CUDA=OFF \
        -DBUILD_SHARED_LIBS=OFF "${arch[@]}" >/dev/null
    cmake --build "$ikb" -j"$(nproc)" --target llama-bench >/dev/null
fi

# The files, and a prompt of WORDS words.
vocab=$src/models/ggml-vocab-llama-spm.gguf
prompt=$(python3 -c "
import random
random.seed(7)
w = 'once upon a time there was a little girl who lived in a village near the forest and every day she walked to the river to see the birds'.split()
print(' '.join(random.choice(w) for _ in range($WORDS)))")
echo "ik_llama.cpp $commit ($LEVEL); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $THREADS threads"
echo "ik: llama-bench $IK_FLAGS; loom: ${loom_env[*]} loom-run $LOOM_FLAGS"
echo
echo "| file | rep | ik pp t/s | loom pp t/s | loom/ik | ik tg t/s | loom tg t/s | loom/ik |"
echo "|---|---|---|---|---|---|---|---|"
for type in $TYPES; do
    model=$work/tl-$type.gguf
    [ -f "$model" ] || "$build/tools/loom-synth" -o "$model" --vocab-from "$vocab" --type "$type" >/dev/null
    for rep in $(seq "$REPS"); do
        # loom first: it says how many tokens the prompt has.
        # shellcheck disable=SC2086
        log=$(env "${loom_env[@]}" "$build/tools/loom-run" -m "$model" -p "$prompt" -n "$N_GEN" --temp 0 \
              -t "$THREADS" --device cpu $LOOM_FLAGS 2>&1 >/dev/null)
        n_prompt=$(echo "$log" | sed -n 's/^loom-run: prompt *\([0-9]*\) tokens.*/\1/p')
        lpp=$(echo "$log" | sed -n 's/^loom-run: prompt .*(\s*\([0-9.]*\) tokens\/s.*/\1/p')
        ltg=$(echo "$log" | sed -n 's/^loom-run: generation .*(\s*\([0-9.]*\) tokens\/s.*/\1/p')
        # shellcheck disable=SC2086
        csv=$("$ikb/bin/llama-bench" -m "$model" -p "$n_prompt" -n "$N_GEN" -t "$THREADS" -r 1 $IK_FLAGS -o csv 2>/dev/null)
        read -r ipp itg < <(python3 -c "
import csv, io, sys
rows = list(csv.DictReader(io.StringIO(sys.argv[1])))
pp = [float(r['avg_ts']) for r in rows if int(r['n_prompt']) > 0]
tg = [float(r['avg_ts']) for r in rows if int(r['n_gen']) > 0]
print(pp[0], tg[0])" "$csv")
        awk -v t="$type" -v r="$rep" -v n="$n_prompt" -v ipp="$ipp" -v lpp="$lpp" -v itg="$itg" -v ltg="$ltg" 'BEGIN {
            printf "| %s (pp%d) | %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", t, n, r, ipp, lpp, lpp / ipp, itg, ltg, ltg / itg }'
    done
done
