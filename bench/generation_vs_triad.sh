#!/usr/bin/env bash
# Generation speed of loom-run as a share of the memory bandwidth measured
# right beside it: each round runs loom-bench's triad, then loom-run, then the
# triad again, and compares the weight bytes generation read per second
# (loom-run's "GB/s of weights") with the mean of the two triads. On a shared
# machine the bandwidth moves within minutes, so only figures taken side by
# side compare.
#
#   bench/generation_vs_triad.sh BUILD_DIR MODEL.gguf [ROUNDS] [loom-run flags...]
#
# Prints one line per round and the median ratio.
set -euo pipefail

build=${1:?usage: $0 BUILD_DIR MODEL.gguf [ROUNDS] [loom-run flags...]}
model=${2:?usage: $0 BUILD_DIR MODEL.gguf [ROUNDS] [loom-run flags...]}
rounds=${3:-5}
shift $(($# < 3 ? $# : 3))

triad() {
    "$build/tools/loom-bench" --only limits -t 2 2>/dev/null | sed -n 's/^memory bandwidth, triad: *\([0-9.]*\) GB\/s.*/\1/p'
}

ratios=()
for r in $(seq "$rounds"); do
    before=$(triad)
    line=$("$build/tools/loom-run" -m "$model" -p "Once upon a time" -n 128 --temp 0 -t 2 "$@" 2>&1 >/dev/null |
        grep '^loom-run: generation')
    after=$(triad)
    tps=$(echo "$line" | sed -n 's/.*(\s*\([0-9.]*\) tokens\/s.*/\1/p')
    gbs=$(echo "$line" | sed -n 's/.*tokens\/s, \([0-9.]*\) GB\/s of weights.*/\1/p')
    ratio=$(awk -v g="$gbs" -v a="$before" -v b="$after" 'BEGIN { printf "%.1f", 100 * g / ((a + b) / 2) }')
    ratios+=("$ratio")
    echo "round $r: triad $before / $after GB/s, generation $tps tokens/s, $gbs GB/s of weights: $ratio% of the triad"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { printf "median: %.1f%% of the triad over %d rounds\n", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), NR }'
