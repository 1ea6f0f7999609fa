#!/usr/bin/env bash
# Fails when a function outside an instruction set's kernel namespace holds
# that set's instructions, so that nothing compiled for AVX2 or AVX-512 can
# run on a processor before the kernel-table checks have passed.
#
#   scripts/check-isa.sh [build/libloom.so ...]
#
# Each function of each file is read from its disassembly (objdump, with the
# symbol table) and given a level by its encodings and registers:
#   0  plain x86-64 (SSE2 and legacy encodings)
#   1  VEX: AVX, AVX2, FMA, F16C, BMI (c4/c5 prefixes, ymm registers)
#   2  EVEX: AVX-512 (62 prefix, zmm or mask registers)
# and may hold at most the level its namespace allows:
#   loom::cpu::avx512::, loom::cpu::avx512bf16::  2
#   loom::cpu::avx2::                             1
#   everything else (the portable code, the core, every other library part,
#   static initializers)                          0
# A function defined in a header that two kernel targets include is one
# symbol after linking: if the copy kept is the wider one, the check sees it.
# It also fails when it finds no function of a kernel namespace (a stripped
# file, or one without the x86 kernels): then it has checked nothing.
set -euo pipefail

files=("$@")
if [ "${#files[@]}" -eq 0 ]; then
    files=("$(dirname "$0")/../build/libloom.so")
fi
case "$(uname -m)" in
    x86_64 | i?86) ;;
    *)
        echo "check-isa: not an x86 build ($(uname -m)); nothing to check"
        exit 0
        ;;
esac

status=0
for f in "${files[@]}"; do
    if [ ! -f "$f" ]; then
        echo "check-isa: $f: no such file" >&2
        exit 2
    fi
    objdump -d -C -w --insn-width=15 "$f" | awk -F '\t' -v file="$f" '
        function allowed(name) {
            # demangled, or mangled where the demangler gave up
            if (name ~ /loom::cpu::avx512(bf16)?::|4loom3cpu(6avx512|10avx512bf16)[0-9_]/) return 2
            if (name ~ /loom::cpu::avx2::|4loom3cpu4avx2[0-9_]/) return 1
            return 0
        }
        function close_fn() {
            if (fn == "") return
            nfn++
            if (allow == 1) n1++
            if (allow == 2) n2++
            if (level > allow) {
                bad++
                printf "%s: %s\n    holds %s code (allowed: %s), first at %s\n", file, fn, lvl[level], lvl[allow], example
            }
            fn = ""
        }
        BEGIN { lvl[0] = "plain x86-64"; lvl[1] = "VEX (AVX/AVX2)"; lvl[2] = "EVEX (AVX-512)" }
        /^[0-9a-f]+ <.*>:$/ {
            close_fn()
            fn = $0
            sub(/^[0-9a-f]+ </, "", fn)
            sub(/>:$/, "", fn)
            allow = allowed(fn)
            level = 0
            example = ""
            next
        }
        fn != "" && NF >= 3 && $1 ~ /^ *[0-9a-f]+:$/ {
            n = split($2, b, " ")
            i = 1
            # legacy prefixes may stand before a VEX or EVEX prefix
            while (i <= n && b[i] ~ /^(66|67|f0|f2|f3|2e|3e|26|36|64|65)$/) i++
            l = 0
            if (b[i] == "62" || $3 ~ /%zmm|%k[0-7]/) l = 2
            else if (b[i] == "c4" || b[i] == "c5" || $3 ~ /%ymm/) l = 1
            if (l > level) {
                level = l
                if (l > allow) example = $1 " " $3
            }
        }
        END {
            close_fn()
            printf "check-isa: %s: %d functions, %d in loom::cpu::avx2, %d in the AVX-512 namespaces, %d holding instructions their namespace does not allow\n", file, nfn, n1, n2, bad
            if (bad > 0) exit 1
            if (n1 == 0 || n2 == 0) {
                printf "check-isa: %s: no kernel-namespace functions found (stripped, or built without the x86 tables): nothing was checked\n", file
                exit 1
            }
        }
    ' || status=1
done
exit $status
