// The portable kernel table: plain C++ that any compiler and processor run.
// The dot products are the reference ones of kernels/vec.cpp; the rest is
// written so that a compiler may vectorise it, without relying on it.

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernel_table.h"
#include "backends/cpu/kernels/vec.h"

namespace loom::cpu {

namespace {

template <typename T, float (*Dot)(int64_t, const T *, const T *)> struct PortableGemv {
    static void run(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                    float * dst, size_t ldd) {
        for (int c = 0; c < ncols; ++c) {
            const T * bc = reinterpret_cast<const T *>(static_cast<const char *>(b) + size_t(c) * ldb);
            for (int64_t r = 0; r < nrows; ++r) {
                const auto * ar  = reinterpret_cast<const T *>(static_cast<const char *>(a) + size_t(r) * lda);
                dst[size_t(c) * ldd + size_t(r)] = Dot(K, ar, bc);
            }
        }
    }
};

template <typename W, float (*Dot)(int64_t, const W *, const block_q8_0 *)> struct PortableGemvQ {
    static void run(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                    float * dst, size_t ldd) {
        for (int c = 0; c < ncols; ++c) {
            const auto * bc = reinterpret_cast<const block_q8_0 *>(static_cast<const char *>(b) + size_t(c) * ldb);
            for (int64_t r = 0; r < nrows; ++r) {
                const auto * ar  = reinterpret_cast<const W *>(static_cast<const char *>(a) + size_t(r) * lda);
                dst[size_t(c) * ldd + size_t(r)] = Dot(K, ar, bc);
            }
        }
    }
};

void quantize_q8_0(const float * x, block_q8_0 * y, int64_t n) {
    quantize_row_q8_0_ref(x, y, n);
}

void fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = fp16_to_fp32(x[i]);
    }
}

void fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = fp32_to_fp16(x[i]);
    }
}

void bf16_to_fp32_row(const uint16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = bf16_to_fp32(x[i]);
    }
}

void silu_f32(int64_t n, const float * x, float * y) {
    // x / (1 + e^-x) rather than x * sigmoid(x): one rounding fewer
    for (int64_t i = 0; i < n; ++i) {
        y[i] = x[i] / (1.0f + std::exp(-x[i]));
    }
}

void scale_f32(int64_t n, const float * x, float s, float * y) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = x[i] * s;
    }
}

// The lanes in locals while the row passes (acc may alias nothing the
// compiler could prove), written back at the end.
template <bool Squares> void sum_lanes(int64_t n, const float * x, double * acc) {
    double a[8];
    std::memcpy(a, acc, sizeof(a));
    const int64_t nv = n - n % 8;
    for (int64_t i = 0; i < nv; i += 8) {
        for (int j = 0; j < 8; ++j) {
            const double v = x[i + j];
            a[j] += Squares ? v * v : v;
        }
    }
    for (int64_t i = nv; i < n; ++i) {
        const double v = x[i];
        a[i - nv] += Squares ? v * v : v;
    }
    std::memcpy(acc, a, sizeof(a));
}

void adamw_f32(int64_t n, float * w, const float * g, float * m, float * v, const AdamwStep & s) {
    for (int64_t i = 0; i < n; ++i) {
        adamw_one(i, w, g, m, v, s);
    }
}

void rope_f32(int64_t half, const float * x, float * y, const float * cos, const float * sin, bool neox) {
    const int64_t other = neox ? half : 1;
    const int64_t step  = neox ? 1 : 2;
    for (int64_t i = 0; i < half; ++i) {
        const int64_t j  = i * step;
        const float   x0 = x[j];
        const float   x1 = x[j + other];
        const float   a  = x0 * cos[i];
        const float   b  = x1 * sin[i];
        const float   c  = x0 * sin[i];
        const float   d  = x1 * cos[i];
        y[j]             = a - b;
        y[j + other]     = c + d;
    }
}

float decay_dot_f32(int64_t n, const float * s0, float * s, const float * a, float a0, const float * b, float bx, const float * c,
                    float cx, const float * r) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        float v = s0[i] * (a != nullptr ? a[i] : a0) + b[i] * bx;
        if (c != nullptr) {
            v = v + c[i] * cx;
        }
        s[i] = v;
        sum += v * r[i];
    }
    return sum;
}

void wkv7_rows_f32(int64_t n, int64_t rows, const float * s0, float * s, const float * r, const float * w,
                   const float * k, const float * v, const float * a, const float * b, float * out) {
    for (int64_t i = 0; i < rows; ++i) {
        const float * from = s0 + i * n;
        float         sa   = 0.0f;
        for (int64_t j = 0; j < n; ++j) sa += from[j] * a[j];
        out[i] = decay_dot_f32(n, from, s + i * n, w, 0.0f, k, v[i], b, sa, r);
    }
}

float delta_row_f32(int64_t n, float * s, const float * g, float g0, const float * k, float v, float beta,
                    const float * q) {
    float sk = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        s[i] *= g != nullptr ? g[i] : g0;
        sk += s[i] * k[i];
    }
    const float d  = (v - sk) * beta;
    float       sq = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
        s[i] += k[i] * d;
        sq += s[i] * q[i];
    }
    return sq;
}

template <int Op> void binary_f32(int64_t n, const float * a, const float * b, float * d) {
    for (int64_t i = 0; i < n; ++i) {
        if constexpr (Op == 0) d[i] = a[i] + b[i];
        if constexpr (Op == 1) d[i] = a[i] - b[i];
        if constexpr (Op == 2) d[i] = a[i] * b[i];
        if constexpr (Op == 3) d[i] = a[i] / b[i];
    }
}

void gemm_pack(const float * const * rows, int nrows, int width, int64_t kb, float * panel) {
    for (int i = 0; i < width; ++i) {
        if (i < nrows) {
            const float * src = rows[i];
            for (int64_t k = 0; k < kb; ++k) {
                panel[k * width + i] = src[k];
            }
        } else {
            for (int64_t k = 0; k < kb; ++k) {
                panel[k * width + i] = 0.0f;
            }
        }
    }
}

constexpr int MR = 16;
constexpr int NR = 4;

// The tile lives in a local array the compiler can keep in vector
// registers; each element is one running sum over k.
void gemm_micro(int64_t kc, const float * ap, const float * bp, float * c, size_t ldc, int m, int n,
                bool accumulate) {
    float acc[NR][MR];
    for (int j = 0; j < NR; ++j) {
        for (int i = 0; i < MR; ++i) {
            acc[j][i] = accumulate && i < m && j < n ? c[size_t(j) * ldc + size_t(i)] : 0.0f;
        }
    }
    for (int64_t k = 0; k < kc; ++k) {
        const float * a = ap + k * MR;
        const float * b = bp + k * NR;
        for (int j = 0; j < NR; ++j) {
            for (int i = 0; i < MR; ++i) {
                acc[j][i] += a[i] * b[j];
            }
        }
    }
    for (int j = 0; j < n; ++j) {
        std::memcpy(c + size_t(j) * ldc, acc[j], size_t(m) * sizeof(float));
    }
}

template <class T> void mad_rows(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w) {
    for (int64_t i = 0; i < nrows; ++i) {
        if (w[i] == 0.0f) {
            continue;
        }
        const T * row = reinterpret_cast<const T *>(static_cast<const char *>(x) + size_t(i) * ldx);
        for (int64_t d = 0; d < n; ++d) {
            if constexpr (sizeof(T) == 2) {
                y[d] += fp16_to_fp32(row[d]) * w[i];
            } else {
                y[d] += row[d] * w[i];
            }
        }
    }
}

const KernelTable k_portable_base = {
    "portable",
    dot_f32,
    dot_f16,
    dot_bf16,
    dot_q8_0_q8_0,
    dot_q4_0_q8_0,
    quantize_q8_0,
    fp16_to_fp32_row,
    fp32_to_fp16_row,
    bf16_to_fp32_row,
    PortableGemv<float, dot_f32>::run,
    PortableGemv<ggml_fp16_t, dot_f16>::run,
    PortableGemv<uint16_t, dot_bf16>::run,
    PortableGemvQ<block_q8_0, dot_q8_0_q8_0>::run,
    PortableGemvQ<block_q4_0, dot_q4_0_q8_0>::run,
    max_f32,
    exp_sub_sum_f32,
    silu_f32,
    {binary_f32<0>, binary_f32<1>, binary_f32<2>, binary_f32<3>},
    gemm_pack,
    gemm_micro,
    MR,
    NR,
    64,
    256,
    4092,
    nullptr,
    false,
};

} // namespace

const KernelTable k_portable = [] {
    KernelTable t  = k_portable_base;
    t.mad_rows_f32 = mad_rows<float>;
    t.mad_rows_f16 = mad_rows<ggml_fp16_t>;
    t.scale_f32    = scale_f32;
    t.sum_lanes_f64    = sum_lanes<false>;
    t.sum_sq_lanes_f64 = sum_lanes<true>;
    t.adamw_f32    = adamw_f32;
    t.rope_f32     = rope_f32;
    t.decay_dot_f32 = decay_dot_f32;
    t.wkv7_rows_f32 = wkv7_rows_f32;
    t.delta_row_f32 = delta_row_f32;
    return t;
}();

const KernelTable & portable_kernels() {
    return k_portable;
}

} // namespace loom::cpu
