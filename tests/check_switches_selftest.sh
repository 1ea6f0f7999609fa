#!/bin/sh
# scripts/check-switches.sh on small trees: a clean one passes (switches
# over other enums, defaults in comments and strings, a nested switch's
# default); a default: in a switch over ggml_op, ggml_type or
# ggml_glu_op fails, naming file:line.
# Usage: check_switches_selftest.sh CHECK_SWITCHES_SCRIPT WORK_DIR
set -eu
check=$1 work=$2/check-switches-selftest
rm -rf "$work"
tree() { # name: a minimal repository
    d="$work/$1"
    mkdir -p "$d/include" "$d/src" "$d/tools" "$d/scripts"
    cat >"$d/include/ggml.h" <<'H'
    enum ggml_type {
        GGML_TYPE_F32 = 0,
        GGML_TYPE_F16 = 1,
        GGML_TYPE_COUNT,
    };
    enum ggml_op_pool { GGML_OP_POOL_MAX, GGML_OP_POOL_AVG };
    enum ggml_op {
        GGML_OP_NONE = 0,
        GGML_OP_ADD,
        GGML_OP_COUNT,
    };
H
    cat >"$d/src/a.cpp" <<'C'
// switch (op) { case GGML_OP_ADD: default: }
int f(ggml_op op, ggml_op_pool p, int k) {
    const char * s = "switch (op) { case GGML_OP_ADD: default: }"; char c = '{';
    switch (p) {
        case GGML_OP_POOL_MAX: return 1;
        default: return 2;
    }
    switch (op) {
        case GGML_OP_NONE:
        case GGML_OP_COUNT: return 0;
        case GGML_OP_ADD: {
            switch (k) {
                case 1: return 1;
                default: return 2;
            }
        }
    }
    return 0;
}
C
    echo "$d"
}
expect() { # status dir what
    if sh "$check" "$2" >"$work/out" 2>&1; then got=0; else got=1; fi
    if [ "$got" != "$1" ]; then
        echo "check-switches on $3: exit status $got, expected $1"
        cat "$work/out"
        exit 1
    fi
}
d=$(tree clean)
expect 0 "$d" "a clean tree"
d=$(tree op)
printf 'int g(ggml_op op) {\n    switch (op) {\n        case GGML_OP_ADD: return 1;\n        default: return 0;\n    }\n}\n' >>"$d/src/a.cpp"
expect 1 "$d" "a default: in a switch over ggml_op"
grep -q "^src/a.cpp:21: switch over ggml_op has a default: (line 23)" "$work/out" || { cat "$work/out"; exit 1; }
d=$(tree type)
printf 'int g(ggml_type t) {\n    switch (t) {\n        case GGML_TYPE_F16: { return 1; }\n        default : return 0;\n    }\n}\n' >"$d/tools/b.h"
expect 1 "$d" "a default: in a switch over ggml_type"
grep -q "^tools/b.h:2: switch over ggml_type" "$work/out" || { cat "$work/out"; exit 1; }
d=$(tree glu)
printf 'enum ggml_glu_op {\n    GGML_GLU_OP_REGLU,\n    GGML_GLU_OP_COUNT,\n};\n' >>"$d/include/ggml.h"
printf 'int g(int u) {\n    switch (u) {\n        case GGML_GLU_OP_REGLU: return 1;\n        default: return 0;\n    }\n}\n' >"$d/src/c.cpp"
expect 1 "$d" "a default: in a switch over ggml_glu_op"
grep -q "^src/c.cpp:2: switch over ggml_glu_op" "$work/out" || { cat "$work/out"; exit 1; }
echo "check-switches: every case as expected"
