// NEON kernels of f32, f16 and bf16 rows: dot products, matrix-vector products,
// conversions, the row maximum, weighted row sums and the f32 GEMM's tile.

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/fp16.h"
#include "neon.h"

namespace loom::cpu::neon {

namespace {

inline float32x4_t load_f16x4(const ggml_fp16_t * p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t *>(p))));
}

// The element formats of the float rows (ggml_fp16_t and bf16 are both
// uint16_t, so the format is a type of its own): four values as f32, and
// one for the tails.
struct F32 {
    using T = float;
    static float32x4_t load4(const T * p) { return vld1q_f32(p); }
    static float       one(T v) { return v; }
};

struct F16 {
    using T = ggml_fp16_t;
    static float32x4_t load4(const T * p) { return load_f16x4(p); }
    static float       one(T v) { return half_to_f32(v); }
};

// A bf16 value is the top half of an f32: widened with a shift of 16.
struct BF16 {
    using T = uint16_t;
    static float32x4_t load4(const T * p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }
    static float       one(T v) { return bf16_to_fp32(v); }
};

template <class F> float dot(int64_t n, const typename F::T * x, const typename F::T * y) {
    float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
    int64_t     i  = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = vfmaq_f32(s0, F::load4(x + i), F::load4(y + i));
        s1 = vfmaq_f32(s1, F::load4(x + i + 4), F::load4(y + i + 4));
        s2 = vfmaq_f32(s2, F::load4(x + i + 8), F::load4(y + i + 8));
        s3 = vfmaq_f32(s3, F::load4(x + i + 12), F::load4(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) {
        s0 = vfmaq_f32(s0, F::load4(x + i), F::load4(y + i));
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
    for (; i < n; ++i) {
        sum += F::one(x[i]) * F::one(y[i]);
    }
    return sum;
}

// Two rows against C columns: each register of the rows is loaded once for
// all the columns; 2 x C running sums.
template <class F, int C>
void gemv_rows(int64_t K, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
               size_t ldd) {
    using T = typename F::T;
    const T * col[C];
    for (int c = 0; c < C; ++c) col[c] = reinterpret_cast<const T *>(b + size_t(c) * ldb);
    int64_t r = 0;
    for (; r + 2 <= nrows; r += 2) {
        const T *   x0 = reinterpret_cast<const T *>(a + size_t(r) * lda);
        const T *   x1 = reinterpret_cast<const T *>(a + size_t(r + 1) * lda);
        float32x4_t s0[C], s1[C];
        for (int c = 0; c < C; ++c) s0[c] = s1[c] = vdupq_n_f32(0.0f);
        int64_t k = 0;
        for (; k + 4 <= K; k += 4) {
            const float32x4_t a0 = F::load4(x0 + k), a1 = F::load4(x1 + k);
            for (int c = 0; c < C; ++c) {
                const float32x4_t y = F::load4(col[c] + k);
                s0[c]               = vfmaq_f32(s0[c], a0, y);
                s1[c]               = vfmaq_f32(s1[c], a1, y);
            }
        }
        for (int c = 0; c < C; ++c) {
            float t0 = vaddvq_f32(s0[c]), t1 = vaddvq_f32(s1[c]);
            for (int64_t j = k; j < K; ++j) {
                t0 += F::one(x0[j]) * F::one(col[c][j]);
                t1 += F::one(x1[j]) * F::one(col[c][j]);
            }
            dst[size_t(c) * ldd + size_t(r)]     = t0;
            dst[size_t(c) * ldd + size_t(r) + 1] = t1;
        }
    }
    for (; r < nrows; ++r) {
        const T * x0 = reinterpret_cast<const T *>(a + size_t(r) * lda);
        for (int c = 0; c < C; ++c) dst[size_t(c) * ldd + size_t(r)] = dot<F>(K, x0, col[c]);
    }
}

template <class F>
void gemv(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
          size_t ldd) {
    const char * pa = static_cast<const char *>(a);
    const char * pb = static_cast<const char *>(b);
    // At most four columns at a time: 16 running sums stay in registers.
    for (int c0 = 0; c0 < ncols; c0 += 4) {
        const int n = ncols - c0 < 4 ? ncols - c0 : 4;
        with_gemv_cols(n, [&](auto cols) {
            gemv_rows<F, decltype(cols)::value>(K, pa, lda, nrows, pb + size_t(c0) * ldb, ldb, dst + size_t(c0) * ldd,
                                                ldd);
        });
    }
}

} // namespace

float dot_f32(int64_t n, const float * x, const float * y) {
    return dot<F32>(n, x, y);
}

float dot_f16(int64_t n, const ggml_fp16_t * x, const ggml_fp16_t * y) {
    return dot<F16>(n, x, y);
}

float dot_bf16(int64_t n, const uint16_t * x, const uint16_t * y) {
    return dot<BF16>(n, x, y);
}

void gemv_f32(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
              float * dst, size_t ldd) {
    gemv<F32>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_f16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
              float * dst, size_t ldd) {
    gemv<F16>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_bf16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv<BF16>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vst1q_f32(y + i, load_f16x4(x + i));
    }
    for (; i < n; ++i) {
        y[i] = half_to_f32(x[i]);
    }
}

void fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vst1_u16(reinterpret_cast<uint16_t *>(y + i), vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    }
    for (; i < n; ++i) {
        y[i] = fp32_to_fp16(x[i]);
    }
}

void bf16_to_fp32_row(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vst1q_f32(y + i, BF16::load4(x + i));
    }
    for (; i < n; ++i) {
        y[i] = bf16_to_fp32(x[i]);
    }
}

float max_f32(int64_t n, const float * x) {
    // FMAXNM takes the number where one operand is a NaN: NaNs are skipped.
    float32x4_t m = vdupq_n_f32(-INFINITY);
    int64_t     i = 0;
    for (; i + 4 <= n; i += 4) {
        m = vmaxnmq_f32(m, vld1q_f32(x + i));
    }
    float r = vmaxnmvq_f32(m);
    for (; i < n; ++i) {
        r = std::fmax(r, x[i]);
    }
    return r;
}

namespace {

// Eight values of a row as f32 (F16: two halves' conversions).
template <class F> inline void load8(const typename F::T * p, float32x4_t & lo, float32x4_t & hi) {
    if constexpr (std::is_same_v<F, F16>) {
        const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(reinterpret_cast<const uint16_t *>(p)));
        lo                  = vcvt_f32_f16(vget_low_f16(h));
        hi                  = vcvt_high_f32_f16(h);
    } else {
        lo = F::load4(p);
        hi = F::load4(p + 4);
    }
}

// 32 values of y stay in eight registers while the rows pass, each value
// taking the rows of nonzero weight in order, one fused multiply-add each
// (the portable loop rounds the product and the sum apart: the results
// differ from it as a dot product's do); then 8 and 4 values, then one.
template <class F> void mad_rows(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w) {
    using T      = typename F::T;
    auto   row   = [&](int64_t i) { return reinterpret_cast<const T *>(static_cast<const char *>(x) + size_t(i) * ldx); };
    int64_t d    = 0;
    for (; d + 32 <= n; d += 32) {
        float32x4x4_t a = vld1q_f32_x4(y + d), b = vld1q_f32_x4(y + d + 16);
        for (int64_t i = 0; i < nrows; ++i) {
            if (w[i] == 0.0f) continue;
            const float32x4_t wi = vdupq_n_f32(w[i]);
            const T *         r  = row(i) + d;
            float32x4_t       v[8];
            load8<F>(r, v[0], v[1]);
            load8<F>(r + 8, v[2], v[3]);
            load8<F>(r + 16, v[4], v[5]);
            load8<F>(r + 24, v[6], v[7]);
            for (int q = 0; q < 4; ++q) {
                a.val[q] = vfmaq_f32(a.val[q], v[q], wi);
                b.val[q] = vfmaq_f32(b.val[q], v[4 + q], wi);
            }
        }
        vst1q_f32_x4(y + d, a);
        vst1q_f32_x4(y + d + 16, b);
    }
    for (; d + 4 <= n; d += 4) {
        float32x4_t a = vld1q_f32(y + d);
        for (int64_t i = 0; i < nrows; ++i) {
            if (w[i] == 0.0f) continue;
            a = vfmaq_n_f32(a, F::load4(row(i) + d), w[i]);
        }
        vst1q_f32(y + d, a);
    }
    for (; d < n; ++d) {
        float a = y[d];
        for (int64_t i = 0; i < nrows; ++i) {
            if (w[i] == 0.0f) continue;
            a = std::fma(F::one(row(i)[d]), w[i], a);
        }
        y[d] = a;
    }
}

} // namespace

void mad_rows_f32(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w) {
    mad_rows<F32>(n, y, x, ldx, nrows, w);
}

void mad_rows_f16(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w) {
    mad_rows<F16>(n, y, x, ldx, nrows, w);
}

void gemm_micro(int64_t kc, const float * ap, const float * bp, float * c, size_t ldc, int m, int n,
                bool accumulate) {
    // 16 rows in four registers times four columns, each column's value
    // taken from one lane of the b register.
    float32x4_t acc[GEMM_NR][4];
    for (int j = 0; j < GEMM_NR; ++j) {
        for (int q = 0; q < 4; ++q) {
            if (accumulate && j < n && m == GEMM_MR) {
                acc[j][q] = vld1q_f32(c + size_t(j) * ldc + size_t(4 * q));
            } else {
                acc[j][q] = vdupq_n_f32(0.0f);
            }
        }
    }
    if (accumulate && m < GEMM_MR) {
        float t[GEMM_MR] = {};
        for (int j = 0; j < n; ++j) {
            std::memcpy(t, c + size_t(j) * ldc, size_t(m) * sizeof(float));
            for (int q = 0; q < 4; ++q) acc[j][q] = vld1q_f32(t + 4 * q);
        }
    }
    for (int64_t k = 0; k < kc; ++k) {
        const float *     a  = ap + k * GEMM_MR;
        const float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4), a2 = vld1q_f32(a + 8), a3 = vld1q_f32(a + 12);
        const float32x4_t b  = vld1q_f32(bp + k * GEMM_NR);
        acc[0][0] = vfmaq_laneq_f32(acc[0][0], a0, b, 0);
        acc[0][1] = vfmaq_laneq_f32(acc[0][1], a1, b, 0);
        acc[0][2] = vfmaq_laneq_f32(acc[0][2], a2, b, 0);
        acc[0][3] = vfmaq_laneq_f32(acc[0][3], a3, b, 0);
        acc[1][0] = vfmaq_laneq_f32(acc[1][0], a0, b, 1);
        acc[1][1] = vfmaq_laneq_f32(acc[1][1], a1, b, 1);
        acc[1][2] = vfmaq_laneq_f32(acc[1][2], a2, b, 1);
        acc[1][3] = vfmaq_laneq_f32(acc[1][3], a3, b, 1);
        acc[2][0] = vfmaq_laneq_f32(acc[2][0], a0, b, 2);
        acc[2][1] = vfmaq_laneq_f32(acc[2][1], a1, b, 2);
        acc[2][2] = vfmaq_laneq_f32(acc[2][2], a2, b, 2);
        acc[2][3] = vfmaq_laneq_f32(acc[2][3], a3, b, 2);
        acc[3][0] = vfmaq_laneq_f32(acc[3][0], a0, b, 3);
        acc[3][1] = vfmaq_laneq_f32(acc[3][1], a1, b, 3);
        acc[3][2] = vfmaq_laneq_f32(acc[3][2], a2, b, 3);
        acc[3][3] = vfmaq_laneq_f32(acc[3][3], a3, b, 3);
    }
    for (int j = 0; j < n; ++j) {
        float t[GEMM_MR];
        for (int q = 0; q < 4; ++q) vst1q_f32(t + 4 * q, acc[j][q]);
        std::memcpy(c + size_t(j) * ldc, t, size_t(m) * sizeof(float));
    }
}

} // namespace loom::cpu::neon

#endif // __aarch64__
