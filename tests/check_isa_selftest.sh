#!/bin/sh
# scripts/check-isa.sh on small shared libraries: kernels in their
# namespaces pass; AVX2 code outside loom::cpu::avx2, AVX-512 code in
# loom::cpu::avx2, an AVX2 static initializer, and a library with no kernel
# namespace each fail.
# Usage: check_isa_selftest.sh CHECK_ISA_SCRIPT WORK_DIR
set -eu
check=$1 work=$2/check-isa-selftest
rm -rf "$work"
mkdir -p "$work"
case "$(uname -m)" in x86_64) ;; *) echo "not x86-64: nothing to check"; exit 0 ;; esac
kernels='
#include <immintrin.h>
namespace loom::cpu::avx2 {
__attribute__((target("avx2,fma"))) float dot(const float * a, const float * b, int n) {
    __m256 s = _mm256_setzero_ps();
    for (int i = 0; i + 8 <= n; i += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s);
    float o[8]; _mm256_storeu_ps(o, s); return o[0] + o[7];
}
}
namespace loom::cpu::avx512 {
__attribute__((target("avx512f"))) float dot(const float * a, const float * b, int n) {
    __m512 s = _mm512_setzero_ps();
    for (int i = 0; i + 16 <= n; i += 16) s = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s);
    return _mm512_reduce_add_ps(s);
}
}
float plain(const float * a, int n) { float s = 0; for (int i = 0; i < n; ++i) s += a[i]; return s; }
'
lib() { # name, extra source -> path of the library
    printf '%s\n%s\n' "$kernels" "$2" >"$work/$1.cpp"
    c++ -std=c++20 -O2 -shared -fPIC -o "$work/lib$1.so" "$work/$1.cpp"
    echo "$work/lib$1.so"
}
expect() { # status library what
    if bash "$check" "$2" >"$work/out" 2>&1; then got=0; else got=1; fi
    if [ "$got" != "$1" ]; then
        echo "check-isa on $3: exit status $got, expected $1"
        cat "$work/out"
        exit 1
    fi
}
expect 0 "$(lib clean '')" "kernels in their namespaces"
expect 1 "$(lib leak '__attribute__((target("avx2"))) void leak(int * p) { _mm256_storeu_si256((__m256i *) p, _mm256_set1_epi32(*p + 1)); }')" "AVX2 outside the kernel namespaces"
grep -q "leak" "$work/out" || { echo "the leak is not named:"; cat "$work/out"; exit 1; }
expect 1 "$(lib wide 'namespace loom::cpu::avx2 { __attribute__((target("avx512f"))) void wide(float * p) { _mm512_storeu_ps(p, _mm512_set1_ps(*p)); } }')" "AVX-512 in loom::cpu::avx2"
expect 1 "$(lib init 'static float table[64];
__attribute__((target("avx2"))) static float sum8(const float * p) { __m256 s = _mm256_loadu_ps(p); for (int i = 8; i < 64; i += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(p + i)); float o[8]; _mm256_storeu_ps(o, s); return o[0] + o[5]; }
float g = sum8(table);')" "an AVX2 static initializer"
printf 'int plain(int x) { return x + 1; }\n' >"$work/none.cpp"
c++ -O2 -shared -fPIC -o "$work/libnone.so" "$work/none.cpp"
expect 1 "$work/libnone.so" "a library without kernel namespaces"
echo "check-isa self-test: 5 cases as expected"
