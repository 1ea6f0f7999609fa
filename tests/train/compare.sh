#!/bin/sh
# Runs the training program and compares its per-epoch losses and accuracies
# with the reference file: loss within 1e-4 relative, accuracy within 2/240.
set -eu
out=$("$1")
echo "$out"
echo "$out" | awk -v ref="$2" '
BEGIN { while ((getline line < ref) > 0) { split(line, f, " "); loss[f[1]] = f[2]; acc[f[1]] = f[3]; n++ } }
{
    e = $1; seen++
    d = $2 - loss[e]; if (d < 0) d = -d
    if (!(e in loss) || d > 1e-4 * loss[e]) { printf "epoch %s: loss %s, ggml %s\n", e, $2, loss[e]; bad = 1 }
    a = $3 - acc[e]; if (a < 0) a = -a
    if (a > 2.0 / 240 + 1e-9) { printf "epoch %s: accuracy %s, ggml %s\n", e, $3, acc[e]; bad = 1 }
}
END { if (seen != n) { printf "%d epochs, the reference has %d\n", seen, n; bad = 1 } exit bad }'
