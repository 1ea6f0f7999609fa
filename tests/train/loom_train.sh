#!/bin/sh
# Checks of loom-train, one per mode:
#   loom_train.sh LOOM_TRAIN WORKDIR train   -- a short run: the last epoch's training loss is below a
#                                               quarter of the first's, the model is written
#   loom_train.sh LOOM_TRAIN WORKDIR eval    -- --eval of the written model gives its final losses and
#                                               accuracies (loss within 1e-5 relative)
#   loom_train.sh LOOM_TRAIN WORKDIR bad OTHER_GGUF
#                                            -- bad input ends with a message and exit status 1 or 2,
#                                               never a signal
set -u
bin=$1 dir=$2 mode=$3
model=$dir/loom-train-model.gguf
mkdir -p "$dir"

run_train() {
    "$bin" --epochs 12 --points 768 --batch 32 --hidden 24 --lr 0.02 --seed 7 -t 2 --no-progress -o "$model"
}

case $mode in
train)
    out=$(run_train) || { echo "loom-train failed"; exit 1; }
    echo "$out"
    echo "$out" | awk '
        /^epoch/ { n++; if (n == 1) first = $5; last = $5 }
        END {
            if (n != 12) { printf "%d epochs printed, 12 expected\n", n; exit 1 }
            if (!(last < first / 4)) { printf "last loss %s is not below a quarter of the first %s\n", last, first; exit 1 }
            printf "loss %s -> %s\n", first, last
        }' || exit 1
    test -s "$model" || { echo "no model written"; exit 1; }
    ;;
eval)
    out=$(run_train) || { echo "loom-train failed"; exit 1; }
    final=$(echo "$out" | grep '^final:')
    got=$("$bin" --eval "$model" -t 1) || { echo "--eval failed"; exit 1; }
    echo "$final"
    echo "$got"
    printf '%s\n%s\n' "$final" "$got" | awk '
        NR == 1 { for (i = 2; i <= NF; i++) f[i] = $i; nf = NF }
        NR == 2 {
            if (NF != nf) { print "the lines differ in shape"; exit 1 }
            for (i = 2; i <= NF; i++) {
                if (f[i] ~ /^[a-z]/) { if (f[i] != $i) { print "field", i, "differs"; exit 1 } continue }
                d = f[i] - $i; if (d < 0) d = -d
                m = f[i] < 0 ? -f[i] : f[i]
                if (d > 1e-5 * m + 1e-9) { printf "field %d: %s after training, %s from the file\n", i, f[i], $i; exit 1 }
            }
        }' || exit 1
    ;;
bad)
    other=$4
    expect() { # expect STATUS ARGS...: the run exits with STATUS and says something on stderr
        want=$1; shift
        err=$("$bin" "$@" 2>&1 >/dev/null); rc=$?
        if [ "$rc" -ne "$want" ] || [ -z "$err" ]; then
            echo "loom-train $*: status $rc (expected $want), message '$err'"; exit 1
        fi
        echo "loom-train $*: $err"
    }
    expect 2 --epochs 0
    expect 2 --epochs x
    expect 2 --optimizer adam
    expect 2 --lr -1
    expect 2 --val-split 1
    expect 2 --points 40 --batch 32 --val-split 0.5
    expect 2 --no-such-option
    expect 2 --eval
    expect 1 --device no-such-device --epochs 1 --no-progress
    expect 1 --eval "$dir/does-not-exist.gguf"
    expect 1 --eval "$other"
    # A truncated model file and one whose tensors are not the stated shape.
    "$bin" --epochs 1 --points 64 --batch 32 --val-split 0 --hidden 4 --no-progress -o "$dir/small.gguf" >/dev/null 2>&1 ||
        { echo "cannot write a small model"; exit 1; }
    head -c 200 "$dir/small.gguf" > "$dir/truncated.gguf"
    expect 1 --eval "$dir/truncated.gguf"
    # hidden_size is a u32 key: its name, the type (4 bytes), the value. 4 -> 5 makes every
    # tensor the wrong shape.
    off=$(grep -obUa 'loom-mlp.hidden_size' "$dir/small.gguf" | head -n 1 | cut -d: -f1)
    [ -n "$off" ] || { echo "no hidden_size key in the model"; exit 1; }
    cp "$dir/small.gguf" "$dir/reshaped.gguf"
    printf '\005' | dd of="$dir/reshaped.gguf" bs=1 seek=$((off + 20 + 4)) conv=notrunc 2>/dev/null
    expect 1 --eval "$dir/reshaped.gguf"
    ;;
*)
    echo "unknown mode $mode"; exit 2
    ;;
esac
