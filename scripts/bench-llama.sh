#!/bin/sh
# llama-bench on the same llama.cpp built twice: on its own ggml and on loom.
#
#   scripts/bench-llama.sh GGML_BIN_DIR LOOM_BIN_DIR MODEL.gguf [MODEL.gguf ...]
#
# For each model: pp512 and tg128 with THREADS threads (default 2), REPS
# repetitions (default 3), each build in turn; then a Markdown table of the
# tokens per second, the ratio loom / ggml, and the compute buffer sizes
# llama.cpp reports for each build. Extra llama-bench arguments go in
# BENCH_ARGS; LOOM_ENV is put in front of the loom-backed runs only (for
# example "LOOM_CPU_KERNELS=avx2"). Logs are kept in OUT (default
# ./bench-llama-out).
set -eu

if [ $# -lt 3 ]; then
    sed -n '2,12p' "$0" >&2
    exit 2
fi
GGML_BIN=$1
LOOM_BIN=$2
shift 2
THREADS=${THREADS:-2}
REPS=${REPS:-3}
OUT=${OUT:-bench-llama-out}
BENCH_ARGS=${BENCH_ARGS:-}
LOOM_ENV=${LOOM_ENV:-}
mkdir -p "$OUT"

for bin in "$GGML_BIN" "$LOOM_BIN"; do
    if [ ! -x "$bin/llama-bench" ]; then
        echo "bench-llama: no llama-bench in $bin" >&2
        exit 2
    fi
done

run() { # side model test-args log
    side=$1 model=$2 args=$3 log=$4
    if [ "$side" = loom ]; then
        # shellcheck disable=SC2086
        env $LOOM_ENV "$LOOM_BIN/llama-bench" -m "$model" -t "$THREADS" -r "$REPS" $args $BENCH_ARGS -v -o jsonl > "$log" 2>&1
    else
        # shellcheck disable=SC2086
        "$GGML_BIN/llama-bench" -m "$model" -t "$THREADS" -r "$REPS" $args $BENCH_ARGS -v -o jsonl > "$log" 2>&1
    fi
}

for model in "$@"; do
    name=$(basename "$model" .gguf)
    for side in ggml loom; do
        echo "bench-llama: $name $side" >&2
        run "$side" "$model" "-p 512 -n 0" "$OUT/$name.$side.pp.log"
        run "$side" "$model" "-p 0 -n 128" "$OUT/$name.$side.tg.log"
    done
done

python3 - "$OUT" "$@" <<'EOF'
import json, os, re, sys

out, models = sys.argv[1], sys.argv[2:]

def result(path):
    ts, bufs = None, {}
    for line in open(path, errors="replace"):
        if line.startswith("{"):
            ts = json.loads(line)["avg_ts"]
        m = re.search(r"sched_reserve:\s+(\S+) compute buffer size =\s+([0-9.]+) MiB", line)
        if m:
            bufs[m.group(1)] = float(m.group(2))
    if ts is None:
        sys.exit(f"bench-llama: no result in {path}")
    return ts, bufs

def fmt(bufs):
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(bufs.items())) or "-"

print("| model | test | ggml t/s | loom t/s | loom / ggml | ggml compute MiB | loom compute MiB |")
print("|---|---|---:|---:|---:|---|---|")
for model in models:
    name = os.path.basename(model)[:-5] if model.endswith(".gguf") else os.path.basename(model)
    for test, label in (("pp", "pp512"), ("tg", "tg128")):
        g, gb = result(f"{out}/{name}.ggml.{test}.log")
        l, lb = result(f"{out}/{name}.loom.{test}.log")
        print(f"| {name} | {label} | {g:.2f} | {l:.2f} | {l / g:.2f} | {fmt(gb)} | {fmt(lb)} |")
EOF
