// Row steps of the linear recurrences on 512-bit registers (kernel_table.h
// decay_dot_f32 and delta_row_f32): the state updates round as the portable
// loops do (products, then sums, no fused multiply-add), so the states carry
// the same bits; the dot products accumulate on fused multiply-adds in two
// registers, a masked step for the tail.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx512.h"
#include "sum.h"

namespace loom::cpu::avx512 {

namespace {

constexpr __mmask16 k_all = 0xffff;

[[gnu::always_inline]] inline __mmask16 tail_mask(int64_t n) {
    return __mmask16((1u << n) - 1u);
}

template <bool VecA, bool HasC>
float decay_dot(int64_t n, const float * s0, float * s, const float * a, float a0, const float * b, float bx, const float * c, float cx,
                const float * r) {
    const __m512 va0 = _mm512_set1_ps(a0), vbx = _mm512_set1_ps(bx), vcx = _mm512_set1_ps(cx);
    __m512       acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    auto         step   = [&](int64_t i, __mmask16 t, __m512 & sum) {
        const __m512 ai = VecA ? _mm512_maskz_loadu_ps(t, a + i) : va0;
        __m512       v  = _mm512_mul_ps(_mm512_maskz_loadu_ps(t, s0 + i), ai);
        v               = _mm512_add_ps(v, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, b + i), vbx));
        if constexpr (HasC) {
            v = _mm512_add_ps(v, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, c + i), vcx));
        }
        _mm512_mask_storeu_ps(s + i, t, v);
        sum = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(t, r + i), sum);
    };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        step(i, k_all, acc[0]);
        step(i + 16, k_all, acc[1]);
    }
    for (; i < n; i += 16) {
        step(i, n - i >= 16 ? k_all : tail_mask(n - i), acc[0]);
    }
    return sum16(_mm512_add_ps(acc[0], acc[1]));
}

// One pass applies the gate and takes the dot product with k, the second
// adds k d and takes the one with q; the row stays in L1 between them.
template <bool VecG>
float delta_row(int64_t n, float * s, const float * g, float g0, const float * k, float v, float beta,
                const float * q) {
    const __m512 vg0    = _mm512_set1_ps(g0);
    __m512       acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    auto         gate   = [&](int64_t i, __mmask16 t, __m512 & sum) {
        const __m512 gi = VecG ? _mm512_maskz_loadu_ps(t, g + i) : vg0;
        const __m512 x  = _mm512_mul_ps(_mm512_maskz_loadu_ps(t, s + i), gi);
        _mm512_mask_storeu_ps(s + i, t, x);
        sum = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(t, k + i), sum);
    };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        gate(i, k_all, acc[0]);
        gate(i + 16, k_all, acc[1]);
    }
    for (; i < n; i += 16) {
        gate(i, n - i >= 16 ? k_all : tail_mask(n - i), acc[0]);
    }
    const float  d      = (v - sum16(_mm512_add_ps(acc[0], acc[1]))) * beta;
    const __m512 vd     = _mm512_set1_ps(d);
    __m512       out[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    auto         update = [&](int64_t j, __mmask16 t, __m512 & sum) {
        const __m512 ki = _mm512_maskz_loadu_ps(t, k + j);
        const __m512 x  = _mm512_add_ps(_mm512_maskz_loadu_ps(t, s + j), _mm512_mul_ps(ki, vd));
        _mm512_mask_storeu_ps(s + j, t, x);
        sum = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(t, q + j), sum);
    };
    i = 0;
    for (; i + 32 <= n; i += 32) {
        update(i, k_all, out[0]);
        update(i + 16, k_all, out[1]);
    }
    for (; i < n; i += 16) {
        update(i, n - i >= 16 ? k_all : tail_mask(n - i), out[0]);
    }
    return sum16(_mm512_add_ps(out[0], out[1]));
}

// The sum of v's lanes in every lane. The masked forms with every lane
// set compile to the plain shuffles; their unmasked forms pass GCC an
// undefined source that -Wmaybe-uninitialized reports.
[[gnu::always_inline]] inline __m512 all_sum(__m512 v) {
    v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, k_all, v, v, 0x4e));
    v = _mm512_add_ps(v, _mm512_mask_shuffle_f32x4(v, k_all, v, v, 0xb1));
    v = _mm512_add_ps(v, _mm512_mask_permute_ps(v, k_all, v, 0x4e));
    return _mm512_add_ps(v, _mm512_mask_permute_ps(v, k_all, v, 0xb1));
}

// RWKV-7's rows, n = 16 * NV: the token's five vectors stay in registers
// for all the rows, and a row is read once into registers, its sa summed
// across lanes without leaving them.
template <int NV>
void wkv7_fixed(int64_t rows, const float * s0, float * s, const float * r, const float * w, const float * k,
                const float * v, const float * a, const float * b, float * out) {
    constexpr int64_t n = 16 * NV;
    __m512            W[NV], K[NV], A[NV], B[NV], R[NV];
    for (int q = 0; q < NV; ++q) {
        W[q] = _mm512_loadu_ps(w + 16 * q);
        K[q] = _mm512_loadu_ps(k + 16 * q);
        A[q] = _mm512_loadu_ps(a + 16 * q);
        B[q] = _mm512_loadu_ps(b + 16 * q);
        R[q] = _mm512_loadu_ps(r + 16 * q);
    }
    for (int64_t i = 0; i < rows; ++i) {
        const float * from = s0 + i * n;
        float *       to   = s + i * n;
        __m512        x[NV];
        __m512        acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int q = 0; q < NV; ++q) {
            x[q]       = _mm512_loadu_ps(from + 16 * q);
            acc[q & 1] = _mm512_fmadd_ps(x[q], A[q], acc[q & 1]);
        }
        const __m512 sa = all_sum(_mm512_add_ps(acc[0], acc[1]));
        const __m512 vi = _mm512_set1_ps(v[i]);
        __m512       o[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int q = 0; q < NV; ++q) {
            __m512 y = _mm512_add_ps(_mm512_mul_ps(x[q], W[q]), _mm512_mul_ps(K[q], vi));
            y        = _mm512_add_ps(y, _mm512_mul_ps(B[q], sa));
            _mm512_storeu_ps(to + 16 * q, y);
            o[q & 1] = _mm512_fmadd_ps(y, R[q], o[q & 1]);
        }
        out[i] = _mm512_cvtss_f32(all_sum(_mm512_add_ps(o[0], o[1])));
    }
}

// Any n: the row read from memory in steps of 16, a masked step for the tail.
void wkv7_any(int64_t n, int64_t rows, const float * s0, float * s, const float * r, const float * w,
              const float * k, const float * v, const float * a, const float * b, float * out) {
    for (int64_t i = 0; i < rows; ++i) {
        const float * from = s0 + i * n;
        float *       to   = s + i * n;
        __m512        acc  = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j += 16) {
            const __mmask16 t = n - j >= 16 ? k_all : tail_mask(n - j);
            acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(t, from + j), _mm512_maskz_loadu_ps(t, a + j), acc);
        }
        const __m512 sa = all_sum(acc);
        const __m512 vi = _mm512_set1_ps(v[i]);
        __m512       o  = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j += 16) {
            const __mmask16 t = n - j >= 16 ? k_all : tail_mask(n - j);
            __m512          y = _mm512_add_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(t, from + j), _mm512_maskz_loadu_ps(t, w + j)),
                                              _mm512_mul_ps(_mm512_maskz_loadu_ps(t, k + j), vi));
            y = _mm512_add_ps(y, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, b + j), sa));
            _mm512_mask_storeu_ps(to + j, t, y);
            o = _mm512_fmadd_ps(y, _mm512_maskz_loadu_ps(t, r + j), o);
        }
        out[i] = _mm512_cvtss_f32(all_sum(o));
    }
}

} // namespace

void wkv7_rows_f32(int64_t n, int64_t rows, const float * s0, float * s, const float * r, const float * w,
                   const float * k, const float * v, const float * a, const float * b, float * out) {
    switch (n) {
        case 16: wkv7_fixed<1>(rows, s0, s, r, w, k, v, a, b, out); break;
        case 32: wkv7_fixed<2>(rows, s0, s, r, w, k, v, a, b, out); break;
        case 64: wkv7_fixed<4>(rows, s0, s, r, w, k, v, a, b, out); break;
        default: wkv7_any(n, rows, s0, s, r, w, k, v, a, b, out); break;
    }
}

float decay_dot_f32(int64_t n, const float * s0, float * s, const float * a, float a0, const float * b, float bx, const float * c,
                    float cx, const float * r) {
    if (a != nullptr) {
        return c != nullptr ? decay_dot<true, true>(n, s0, s, a, a0, b, bx, c, cx, r)
                            : decay_dot<true, false>(n, s0, s, a, a0, b, bx, c, cx, r);
    }
    return c != nullptr ? decay_dot<false, true>(n, s0, s, a, a0, b, bx, c, cx, r)
                        : decay_dot<false, false>(n, s0, s, a, a0, b, bx, c, cx, r);
}

float delta_row_f32(int64_t n, float * s, const float * g, float g0, const float * k, float v, float beta,
                    const float * q) {
    return g != nullptr ? delta_row<true>(n, s, g, g0, k, v, beta, q) : delta_row<false>(n, s, g, g0, k, v, beta, q);
}

} // namespace loom::cpu::avx512

#include "target_end.h"

#endif
