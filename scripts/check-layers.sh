#!/bin/sh
# Checks the layering of docs/DESIGN-layers.md: every quoted #include of a
# file under src/ or tools/ must name a public header (include/), a file of
# its own layer, or a file of a layer below it; a backend's folder is
# private to it. Exceptions kept on purpose are listed, with the reason, in
# scripts/layers-allow.txt as "including-file included-file  # reason".
#
# Usage: check-layers.sh [REPOSITORY_ROOT]   (exit status 1 on a violation
# or on an entry of the allow-list that matches no include)
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"
allow=scripts/layers-allow.txt
[ -f "$allow" ] || allow=/dev/null

files=$(find src tools include -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.inc' \) | sort)
# "file:line:text" for every quoted include of src/ and tools/, after the
# list of every file (so that includes can be resolved) and the allow-list.
{
    echo "$files" | sed 's/^/F /'
    grep -v '^[[:space:]]*\(#\|$\)' "$allow" | sed 's/^/A /'
    echo "$files" | grep -E '^(src|tools)/' | tr '\n' '\0' |
        xargs -0 grep -Hn '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' | sed 's/^/I /'
} | awk '
function norm(p,    a, n, i, k, out, s) {
    n = split(p, a, "/"); k = 0
    for (i = 1; i <= n; ++i) {
        if (a[i] == "..") --k
        else if (a[i] != "." && a[i] != "") out[++k] = a[i]
    }
    s = out[1]; for (i = 2; i <= k; ++i) s = s "/" out[i]
    return s
}
function dirname(p) { sub(/\/[^\/]*$/, "", p); return p }
function layer(p,    b) {
    if (p ~ /^src\/core\//) return "core"
    if (p ~ /^src\/alloc\//) return "alloc"
    if (p ~ /^src\/gguf\//) return "gguf"
    if (p ~ /^src\/backend\//) return "backend"
    if (p ~ /^src\/sched\//) return "sched"
    if (p ~ /^src\/opt\//) return "opt"
    if (p ~ /^src\/backends\/[^\/]+\//) { b = p; sub(/^src\/backends\//, "", b); sub(/\/.*/, "", b); return "backends/" b }
    if (p ~ /^src\/backends\//) return "backends"
    if (p ~ /^tools\//) return "tools"
    # The public header of one backend (ggml-cpu.h, ggml-vulkan.h, ...)
    # belongs to the backends: the layers below them do not name one.
    if (p ~ /^include\/ggml-(cpu|blas|vulkan|rpc|cuda|metal|sycl|opencl|cann|musa|kompute|webgpu|zdnn)\.h$/) return "backend-api"
    if (p ~ /^include\//) return "public"
    return "other"
}
# The layers a layer may include (the public API always).
function allowed(from, to, target) {
    if (to == "public" || to == from) return 1
    if (to == "backend-api") return from ~ /^backends/ || from == "tools"
    if (from == "alloc" || from == "gguf") return to == "core"
    if (from == "backend") return to == "core" || to == "alloc"
    if (from == "sched") return to == "core" || to == "alloc" || to == "backend"
    # Training (ggml-opt) is a client of the public API that shares the
    # checks and graph layout of core.
    if (from == "opt") return to == "core"
    # A backend reaches the backend layer through its interfaces for
    # backends alone (not the registry or the loader); the list of the
    # built-in backends (src/backends/builtin.cpp) feeds the registry.
    if (from ~ /^backends\//) return to == "core" || target == "src/backend/backend_impl.h"
    if (from == "backends") return to == "core" || to == "backend"
    return 0 # core and tools: nothing but themselves and the public API
}
$1 == "F" { exists[$2] = 1; next }
$1 == "A" { allow[$2 " " $3] = 0; next }
$1 == "I" {
    rest = substr($0, 3)
    file = rest; sub(/:.*/, "", file)
    line = rest; sub(/^[^:]*:/, "", line); sub(/:.*/, "", line)
    inc = rest; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    target = ""
    n = split(dirname(file) "/" inc " src/" inc " include/" inc, cand, " ")
    for (i = 1; i <= n; ++i) {
        c = norm(cand[i])
        if (c in exists) { target = c; break }
    }
    if (target == "") next # generated (protocol stubs, SPIR-V) or a system header
    from = layer(file); to = layer(target)
    if (allowed(from, to, target)) next
    if ((file " " target) in allow) { allow[file " " target] = 1; next }
    printf "%s:%s: layer %s includes %s (layer %s)\n", file, line, from, target, to
    bad = 1
}
END {
    for (k in allow) {
        if (!allow[k]) { printf "stale entry in the allow-list (no such include): %s\n", k; bad = 1 }
    }
    exit bad
}' || {
    echo "check-layers: violations above (docs/DESIGN-layers.md; an exception goes in scripts/layers-allow.txt with its reason)"
    exit 1
}
echo "check-layers: $(echo "$files" | grep -cE '^(src|tools)/') files, every include within its layer, below it or public"
