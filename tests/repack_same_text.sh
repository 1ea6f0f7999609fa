#!/bin/sh
# loom-run gives the same text with its CPU's Q4_0/Q8_0/F16 (Q4_K, IQ4_XS) matrices repacked
# (CPU_REPACK, the default where the processor has the kernels) and in the
# file's layout (--no-repack): the products give the same bits. A prompt of
# more than eight tokens takes the many-column kernels, generation the
# one-column ones. Without the kernels nothing is repacked and the two runs
# would be the same run: the test reports itself skipped (exit status 77).
# Usage: repack_same_text.sh LOOM_SYNTH LOOM_RUN VOCAB_GGUF OUT_DIR TYPE
set -eu
synth=$1 run=$2 vocab=$3 dir=$4 type=$5
mkdir -p "$dir"
model="$dir/synth-repack-$type.gguf"
log="$dir/synth-repack-$type.log"
"$synth" -o "$model" --vocab-from "$vocab" --type "$type" --embd 256 --ff 640 --layers 2 --heads 4 --heads-kv 2 >/dev/null
prompt="Once upon a time there was a little girl who liked to play in the park"
a=$("$run" -m "$model" -p "$prompt" -n 24 --temp 0 -t 2 2>"$log")
if ! grep -q "matrices repacked for the CPU" "$log"; then
    echo "SKIP: nothing repacked ($type): this processor has no CPU_REPACK kernels"
    exit 77
fi
b=$("$run" -m "$model" -p "$prompt" -n 24 --temp 0 -t 2 --no-repack 2>"$log")
if grep -q "matrices repacked for the CPU" "$log"; then
    echo "--no-repack still repacked matrices"
    exit 1
fi
[ -n "$a" ] || { echo "no text generated"; exit 1; }
if [ "$a" != "$b" ]; then
    printf 'repacked:    %s\nfile layout: %s\n' "$a" "$b"
    exit 1
fi
echo "same text ($type)"
