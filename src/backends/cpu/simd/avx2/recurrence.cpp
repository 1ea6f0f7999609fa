// Row steps of the linear recurrences on 256-bit registers (kernel_table.h
// decay_dot_f32 and delta_row_f32): the state updates round as the portable
// loops do (products, then sums, no fused multiply-add), so the states carry
// the same bits; the dot products accumulate on fused multiply-adds in two
// registers, then the scalar tail.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

namespace {

template <bool VecA, bool HasC>
float decay_dot(int64_t n, const float * s0, float * s, const float * a, float a0, const float * b, float bx, const float * c, float cx,
                const float * r) {
    const __m256 va0 = _mm256_set1_ps(a0), vbx = _mm256_set1_ps(bx), vcx = _mm256_set1_ps(cx);
    __m256       acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    auto         step   = [&](int64_t i, __m256 & sum) {
        const __m256 ai = VecA ? _mm256_loadu_ps(a + i) : va0;
        __m256       v  = _mm256_mul_ps(_mm256_loadu_ps(s0 + i), ai);
        v               = _mm256_add_ps(v, _mm256_mul_ps(_mm256_loadu_ps(b + i), vbx));
        if constexpr (HasC) {
            v = _mm256_add_ps(v, _mm256_mul_ps(_mm256_loadu_ps(c + i), vcx));
        }
        _mm256_storeu_ps(s + i, v);
        sum = _mm256_fmadd_ps(v, _mm256_loadu_ps(r + i), sum);
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        step(i, acc[0]);
        step(i + 8, acc[1]);
    }
    for (; i + 8 <= n; i += 8) {
        step(i, acc[0]);
    }
    float sum = hsum(_mm256_add_ps(acc[0], acc[1]));
    for (; i < n; ++i) {
        float v = s0[i] * (VecA ? a[i] : a0) + b[i] * bx;
        if constexpr (HasC) {
            v = v + c[i] * cx;
        }
        s[i] = v;
        sum += v * r[i];
    }
    return sum;
}

// One pass applies the gate and takes the dot product with k, the second
// adds k d and takes the one with q; the row stays in L1 between them.
template <bool VecG>
float delta_row(int64_t n, float * s, const float * g, float g0, const float * k, float v, float beta,
                const float * q) {
    const __m256 vg0    = _mm256_set1_ps(g0);
    __m256       acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    auto         gate   = [&](int64_t i, __m256 & sum) {
        const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(s + i), VecG ? _mm256_loadu_ps(g + i) : vg0);
        _mm256_storeu_ps(s + i, x);
        sum = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + i), sum);
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        gate(i, acc[0]);
        gate(i + 8, acc[1]);
    }
    for (; i + 8 <= n; i += 8) {
        gate(i, acc[0]);
    }
    float sk = hsum(_mm256_add_ps(acc[0], acc[1]));
    for (; i < n; ++i) {
        s[i] *= VecG ? g[i] : g0;
        sk += s[i] * k[i];
    }
    const float  d      = (v - sk) * beta;
    const __m256 vd     = _mm256_set1_ps(d);
    __m256       out[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    auto         update = [&](int64_t j, __m256 & sum) {
        const __m256 x = _mm256_add_ps(_mm256_loadu_ps(s + j), _mm256_mul_ps(_mm256_loadu_ps(k + j), vd));
        _mm256_storeu_ps(s + j, x);
        sum = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + j), sum);
    };
    i = 0;
    for (; i + 16 <= n; i += 16) {
        update(i, out[0]);
        update(i + 8, out[1]);
    }
    for (; i + 8 <= n; i += 8) {
        update(i, out[0]);
    }
    float sq = hsum(_mm256_add_ps(out[0], out[1]));
    for (; i < n; ++i) {
        s[i] += k[i] * d;
        sq += s[i] * q[i];
    }
    return sq;
}

} // namespace

void wkv7_rows_f32(int64_t n, int64_t rows, const float * s0, float * s, const float * r, const float * w,
                   const float * k, const float * v, const float * a, const float * b, float * out) {
    for (int64_t i = 0; i < rows; ++i) {
        const float * from   = s0 + i * n;
        float *       to     = s + i * n;
        __m256        acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        int64_t       j      = 0;
        for (; j + 16 <= n; j += 16) {
            acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(from + j), _mm256_loadu_ps(a + j), acc[0]);
            acc[1] = _mm256_fmadd_ps(_mm256_loadu_ps(from + j + 8), _mm256_loadu_ps(a + j + 8), acc[1]);
        }
        for (; j + 8 <= n; j += 8) {
            acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(from + j), _mm256_loadu_ps(a + j), acc[0]);
        }
        float sa = hsum(_mm256_add_ps(acc[0], acc[1]));
        for (; j < n; ++j) {
            sa += from[j] * a[j];
        }
        const __m256 vsa  = _mm256_set1_ps(sa), vi = _mm256_set1_ps(v[i]);
        __m256       o[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
        auto         step = [&](int64_t at, __m256 & sum) {
            __m256 y = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(from + at), _mm256_loadu_ps(w + at)),
                                     _mm256_mul_ps(_mm256_loadu_ps(k + at), vi));
            y        = _mm256_add_ps(y, _mm256_mul_ps(_mm256_loadu_ps(b + at), vsa));
            _mm256_storeu_ps(to + at, y);
            sum = _mm256_fmadd_ps(y, _mm256_loadu_ps(r + at), sum);
        };
        j = 0;
        for (; j + 16 <= n; j += 16) {
            step(j, o[0]);
            step(j + 8, o[1]);
        }
        for (; j + 8 <= n; j += 8) {
            step(j, o[0]);
        }
        float sum = hsum(_mm256_add_ps(o[0], o[1]));
        for (; j < n; ++j) {
            const float y = (from[j] * w[j] + k[j] * v[i]) + b[j] * sa;
            to[j]         = y;
            sum += y * r[j];
        }
        out[i] = sum;
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

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif
