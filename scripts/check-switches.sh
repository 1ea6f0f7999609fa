#!/bin/sh
# Checks STYLE.md's "switches only where the compiler can see every case":
# a switch over ggml_op, ggml_unary_op, ggml_glu_op or ggml_type in src/,
# tools/ or include/ has no `default:`, so that -Wswitch names every switch
# a new operator or type must be added to. Facts about an operator or a
# type belong in its row (src/core/op_table.h, src/core/types.cpp); a
# switch that must branch lists every case.
#
# A switch is taken to be over one of these enums when one of its own case
# labels (not those of a switch nested in it) is one of the enum's values,
# as include/ggml.h declares them. Comments, string and character literals
# are skipped.
#
# Usage: check-switches.sh [REPOSITORY_ROOT]   (exit status 1 on a
# violation, each named as file:line)
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"

files=$(find src tools include -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.inc' -o -name '*.c' \) |
        sort | tr '\n' '\0' | xargs -0 grep -l 'switch' || true)
[ -n "$files" ] || exit 0
# shellcheck disable=SC2086 # file names without blanks, one a word
awk '
# The values of the four enums, from the public header (the first file).
FILENAME == ARGV[1] {
    if (match($0, /^[ \t]*enum[ \t]+ggml_(op|unary_op|glu_op|type)[ \t]*\{/)) {
        cur = $0; sub(/^[ \t]*enum[ \t]+/, "", cur); sub(/[ \t]*\{.*/, "", cur); next
    }
    if (cur != "" && $0 ~ /^[ \t]*\}/) { cur = ""; next }
    if (cur != "" && match($0, /^[ \t]*GGML_[A-Z0-9_]+/)) {
        v = substr($0, RSTART, RLENGTH); sub(/^[ \t]*/, "", v); value[v] = cur
    }
    next
}
FNR == 1 { depth = 0; n = 0; pending = 0; in_comment = 0; in_raw = 0 }
{
    # The line without comments and literals.
    line = $0; out = ""
    while (line != "") {
        if (in_comment) {
            k = index(line, "*/"); if (k == 0) { line = ""; break }
            line = substr(line, k + 2); in_comment = 0; continue
        }
        if (in_raw) {
            k = index(line, ")" raw "\""); if (k == 0) { line = ""; break }
            line = substr(line, k + length(raw) + 2); in_raw = 0; continue
        }
        if (!match(line, /\/\/|\/\*|R"|"|\047/)) { out = out line; break }
        out = out substr(line, 1, RSTART - 1); tok = substr(line, RSTART, RLENGTH)
        line = substr(line, RSTART + RLENGTH)
        if (tok == "//") break
        if (tok == "/*") { in_comment = 1; continue }
        # R" right after a name ends that name: a plain quote.
        if (tok == "R\"" && out ~ /[A-Za-z_0-9]$/) tok = "\""
        out = out "0"
        if (tok == "R\"") { # R"delimiter( ... )delimiter"
            k = index(line, "("); raw = substr(line, 1, k - 1); line = substr(line, k + 1); in_raw = 1; continue
        }
        if (tok == "\"") rx = "^([^\"\\\\]|\\\\.)*\""; else rx = "^([^\047\\\\]|\\\\.)*\047"
        if (match(line, rx)) line = substr(line, RLENGTH + 1); else line = ""
    }
    if (out !~ /[{}]|switch|case|default/) next
    while (match(out, /[A-Za-z_][A-Za-z_0-9]*|[{}]/)) {
        tok = substr(out, RSTART, RLENGTH); out = substr(out, RSTART + RLENGTH)
        if (tok == "{") {
            ++depth
            if (pending) { ++n; sdepth[n] = depth; sline[n] = pending; senum[n] = ""; sdefault[n] = 0; pending = 0 }
        } else if (tok == "}") {
            if (n > 0 && sdepth[n] == depth) {
                if (senum[n] != "" && sdefault[n]) {
                    printf "%s:%d: switch over %s has a default: (line %d); list every case, or read a table\n",
                           FILENAME, sline[n], senum[n], sdefault[n]
                    bad = 1
                }
                --n
            }
            --depth
        } else if (tok == "switch") {
            pending = FNR
        } else if (tok == "case" && n > 0) {
            if (match(out, /^[ \t]*(::)?[A-Za-z_][A-Za-z_0-9]*/)) {
                v = substr(out, RSTART, RLENGTH); sub(/^[ \t]*(::)?/, "", v)
                if ((v in value) && senum[n] == "") senum[n] = value[v]
            }
        } else if (tok == "default" && n > 0 && out ~ /^[ \t]*:([^:]|$)/) {
            sdefault[n] = FNR
        }
    }
}
END { exit bad }
' include/ggml.h $files
