#!/bin/sh
# scripts/check-layers.sh on small trees: a clean one passes; an include of
# a higher layer, of another backend's private folder, of a backend's
# public header below the backends, and a stale allow-list entry each fail;
# an allow-listed include passes.
# Usage: check_layers_selftest.sh CHECK_LAYERS_SCRIPT WORK_DIR
set -eu
check=$1 work=$2/check-layers-selftest
rm -rf "$work"
tree() { # name: a minimal repository
    d="$work/$1"
    mkdir -p "$d/src/core" "$d/src/alloc" "$d/src/backend" "$d/src/backends/cpu/simd" "$d/src/backends/blas" \
             "$d/include" "$d/scripts" "$d/tools"
    echo '#pragma once' >"$d/src/core/common.h"
    echo '#pragma once' >"$d/src/backend/backend_impl.h"
    echo '#pragma once' >"$d/src/backend/registry.h"
    echo '#pragma once' >"$d/src/backends/cpu/simd/kernel_table.h"
    echo '#pragma once' >"$d/include/ggml-cpu.h"
    echo '#pragma once' >"$d/include/ggml-backend.h"
    printf '#include "core/common.h"\n#include "ggml-backend.h"\n' >"$d/src/alloc/a.cpp"
    printf '#include "backend/backend_impl.h"\n#include "ggml-cpu.h"\n' >"$d/src/backends/blas/b.cpp"
    printf '#include "backends/cpu/simd/kernel_table.h"\n' >"$d/src/backends/cpu/c.cpp"
    echo "$d"
}
expect() { # status dir what
    if sh "$check" "$2" >"$work/out" 2>&1; then got=0; else got=1; fi
    if [ "$got" != "$1" ]; then
        echo "check-layers on $3: exit status $got, expected $1"
        cat "$work/out"
        exit 1
    fi
}
d=$(tree clean)
expect 0 "$d" "a clean tree"
d=$(tree up)
echo '#include "backend/backend_impl.h"' >>"$d/src/alloc/a.cpp"
expect 1 "$d" "alloc including the backend layer"
grep -q "src/alloc/a.cpp:3: layer alloc includes src/backend/backend_impl.h" "$work/out" || { cat "$work/out"; exit 1; }
d=$(tree private)
echo '#include "backends/cpu/simd/kernel_table.h"' >>"$d/src/backends/blas/b.cpp"
expect 1 "$d" "a backend including another's private header"
d=$(tree registry)
echo '#include "backend/registry.h"' >>"$d/src/backends/blas/b.cpp"
expect 1 "$d" "a backend including the registry's internals"
d=$(tree named)
echo '#include "ggml-cpu.h"' >>"$d/src/core/common.h"
expect 1 "$d" "core including a backend's public header"
echo 'src/core/common.h include/ggml-cpu.h  # kept on purpose' >"$d/scripts/layers-allow.txt"
expect 0 "$d" "an allow-listed include"
d=$(tree stale)
echo 'src/alloc/a.cpp src/backend/registry.h  # gone' >"$d/scripts/layers-allow.txt"
expect 1 "$d" "a stale allow-list entry"
echo "check-layers: every case as expected"
