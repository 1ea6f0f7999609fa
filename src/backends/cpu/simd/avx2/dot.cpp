// AVX2 dot products and matrix-vector products.
//
// Float types accumulate 8 lanes per register with FMA and sum the lanes at
// the end; quantized types compute each block's integer product exactly and
// add it, scaled, into 8 float lanes. A matrix-vector call keeps an
// accumulator per (row, column) pair, so each weight is loaded once for all
// the columns of the call.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/fp16.h"
#include "core/types.h"

#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

namespace {

// Loads of the three float storage types: 8 lanes, or one value.
struct F32Ops {
    using T = float;
    static __m256 load8(const T * p) { return _mm256_loadu_ps(p); }
    static float  load1(const T * p) { return *p; }
};
struct F16Ops {
    using T = ggml_fp16_t;
    static __m256 load8(const T * p) { return load_f16x8(p); }
    static float  load1(const T * p) { return half_to_float(*p); }
};
struct BF16Ops {
    using T = uint16_t;
    static __m256 load8(const T * p) { return load_bf16x8(p); }
    static float  load1(const T * p) { return bf16_to_fp32(*p); }
};

template <class Ops> float dot_float(int64_t n, const typename Ops::T * x, const typename Ops::T * y) {
    // Four accumulators hide the latency of FMA.
    __m256  acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256  acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i    = 0;
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm256_fmadd_ps(Ops::load8(x + i), Ops::load8(y + i), acc0);
        acc1 = _mm256_fmadd_ps(Ops::load8(x + i + 8), Ops::load8(y + i + 8), acc1);
        acc2 = _mm256_fmadd_ps(Ops::load8(x + i + 16), Ops::load8(y + i + 16), acc2);
        acc3 = _mm256_fmadd_ps(Ops::load8(x + i + 24), Ops::load8(y + i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) {
        acc0 = _mm256_fmadd_ps(Ops::load8(x + i), Ops::load8(y + i), acc0);
    }
    float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; ++i) {
        sum += Ops::load1(x + i) * Ops::load1(y + i);
    }
    return sum;
}

// R rows x C columns of a float matrix-vector product.
template <class Ops, int R, int C>
inline void gemv_float_tile(int64_t K, const char * a, size_t lda, const char * b, size_t ldb, float * dst,
                            size_t ldd) {
    using T = typename Ops::T;
    const T * ar[R];
    const T * bc[C];
    for (int r = 0; r < R; ++r) {
        ar[r] = reinterpret_cast<const T *>(a + size_t(r) * lda);
    }
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const T *>(b + size_t(c) * ldb);
    }
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            acc[r][c] = _mm256_setzero_ps();
        }
    }
    // Elements per cache line: the rows of the next tile are prefetched once
    // per line (see gemv_quant_tile).
    constexpr int64_t LINE = 64 / sizeof(T);
    int64_t           k    = 0;
    for (; k + 8 <= K; k += 8) {
        if (k % LINE == 0) {
            for (int r = 0; r < R; ++r) {
                _mm_prefetch(reinterpret_cast<const char *>(ar[r] + k) + R * lda, _MM_HINT_T0);
            }
        }
        __m256 bv[C];
        for (int c = 0; c < C; ++c) {
            bv[c] = Ops::load8(bc[c] + k);
        }
        for (int r = 0; r < R; ++r) {
            const __m256 av = Ops::load8(ar[r] + k);
            for (int c = 0; c < C; ++c) {
                acc[r][c] = _mm256_fmadd_ps(av, bv[c], acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            float s = hsum(acc[r][c]);
            for (int64_t t = k; t < K; ++t) {
                s += Ops::load1(ar[r] + t) * Ops::load1(bc[c] + t);
            }
            dst[size_t(c) * ldd + size_t(r)] = s;
        }
    }
}

// Rows in groups of R, then one at a time. Callers start row ranges at
// multiples of GEMV_ROW_ALIGN, which R divides, so a row always falls in the
// same kind of group.
template <class Ops, int C>
void gemv_float_cols(int64_t K, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
                     size_t ldd) {
    constexpr int R = C <= 2 ? 4 : 2; // R * C accumulators + C columns fit in 16 registers
    static_assert(GEMV_ROW_ALIGN % R == 0);
    int64_t r = 0;
    for (; r + R <= nrows; r += R) {
        gemv_float_tile<Ops, R, C>(K, a + size_t(r) * lda, lda, b, ldb, dst + r, ldd);
    }
    for (; r < nrows; ++r) {
        gemv_float_tile<Ops, 1, C>(K, a + size_t(r) * lda, lda, b, ldb, dst + r, ldd);
    }
}

template <class Ops>
void gemv_float_groups(int64_t K, const char * ac, size_t lda, int64_t nrows, const char * bc, size_t ldb, int ncols,
                       float * dst, size_t ldd) {
    for (; ncols > 4; ncols -= 4, bc += 4 * ldb, dst += 4 * ldd) { // four columns fill the registers
        gemv_float_cols<Ops, 4>(K, ac, lda, nrows, bc, ldb, dst, ldd);
    }
    switch (ncols) {
        case 1: gemv_float_cols<Ops, 1>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 2: gemv_float_cols<Ops, 2>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 3: gemv_float_cols<Ops, 3>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
        default: gemv_float_cols<Ops, 4>(K, ac, lda, nrows, bc, ldb, dst, ldd); break;
    }
}

// More than four columns take several passes over the rows; each pass
// takes a block of rows (at most about 512 KiB, whole groups of four rows)
// while the block is still in L2 from the pass before, so the weights come
// from memory once rather than once per four columns. A row's sums are
// computed the same way in a tile of any height, so the bits are those of
// one pass per four columns over all the rows.
template <class Ops>
void gemv_float(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    const auto * ac = static_cast<const char *>(a);
    const auto * bc = static_cast<const char *>(b);
    if (ncols <= 4) {
        gemv_float_groups<Ops>(K, ac, lda, nrows, bc, ldb, ncols, dst, ldd);
        return;
    }
    const int64_t block = std::max<int64_t>(4, int64_t((512u << 10) / std::max<size_t>(lda, 1)) / 4 * 4);
    for (int64_t r0 = 0; r0 < nrows; r0 += block) {
        gemv_float_groups<Ops>(K, ac + size_t(r0) * lda, lda, std::min(block, nrows - r0), bc, ldb, ncols, dst + r0,
                               ldd);
    }
}

// Weights of a quantized block as 32 signed bytes, with the block's scale.
inline __m256i block_weights(const block_q8_0 & b) {
    return load_q8(b.qs);
}
inline __m256i block_weights(const block_q4_0 & b) {
    return q4_0_weights(b);
}

template <class W> float dot_quant(int64_t n, const W * x, const block_q8_0 * y) {
    const int64_t nb   = n / QK8_0;
    __m256        acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t       b    = 0;
    for (; b + 2 <= nb; b += 2) {
        const __m256i p0 = dot_i8(block_weights(x[b]), load_q8(y[b].qs));
        const __m256i p1 = dot_i8(block_weights(x[b + 1]), load_q8(y[b + 1].qs));
        const float   d0 = half_to_float(x[b].d) * half_to_float(y[b].d);
        const float   d1 = half_to_float(x[b + 1].d) * half_to_float(y[b + 1].d);
        acc0             = _mm256_fmadd_ps(_mm256_set1_ps(d0), _mm256_cvtepi32_ps(p0), acc0);
        acc1             = _mm256_fmadd_ps(_mm256_set1_ps(d1), _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; b < nb; ++b) {
        const __m256i p = dot_i8(block_weights(x[b]), load_q8(y[b].qs));
        const float   d = half_to_float(x[b].d) * half_to_float(y[b].d);
        acc0            = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(p), acc0);
    }
    return hsum(_mm256_add_ps(acc0, acc1));
}

// Integer block products of the matrix-vector path, per weight type. A
// column's activation block is prepared once (prepare) and then meets the
// weight block of every row of the call (product: 8 int32 lanes whose sum is
// the block's exact integer dot product).
struct Q8Blocks {
    using W = block_q8_0;
    struct Col {
        __m256i y;
    };
    static Col     prepare(const block_q8_0 & b) { return {load_q8(b.qs)}; }
    static __m256i weights(const W & w) { return load_q8(w.qs); }
    static __m256i product(__m256i x, const Col & c) { return dot_i8(x, c.y); }
};

// Q4_0 weights stay unsigned nibbles (0..15), which maddubs takes as they
// are: sum (n - 8) y = sum n y - 8 sum y, and the 8 sum y part belongs to
// the column, computed once per block for all rows.
struct Q4Blocks {
    using W = block_q4_0;
    struct Col {
        __m256i y;
        __m256i y8; // 8 * (sums of y over each lane's four values)
    };
    static Col prepare(const block_q8_0 & b) {
        const __m256i y = load_q8(b.qs);
        return {y, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), y), _mm256_set1_epi16(1))};
    }
    // Both halves of the register get the 16 bytes; the upper half shifted
    // right by 4 brings the high nibbles down, and the mask keeps one nibble
    // per byte: weights 0..15, then 16..31.
    static __m256i weights(const W & w) {
        const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(w.qs)));
        return _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0f));
    }
    static __m256i product(__m256i n, const Col & c) {
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(n, c.y), _mm256_set1_epi16(1));
        return _mm256_sub_epi32(p, c.y8);
    }
};

// The scales of block i of R rows as the low R lanes of a register, converted
// with one instruction.
template <class W, int R> inline __m256 row_scales(const W * const (&ar)[R], int64_t i) {
    __m128i h = _mm_cvtsi32_si128(ar[0][i].d);
    if constexpr (R > 1) {
        h = _mm_insert_epi16(h, ar[1][i].d, 1);
    }
    if constexpr (R > 2) {
        h = _mm_insert_epi16(h, ar[2][i].d, 2);
        h = _mm_insert_epi16(h, ar[3][i].d, 3);
    }
    return _mm256_castps128_ps256(_mm_cvtph_ps(h));
}

// R rows x C columns of a quantized matrix-vector product: each weight block
// is decoded once and meets the C activation blocks held in registers.
template <class Q, int R, int C>
inline void gemv_quant_tile(int64_t nb, const char * a, size_t lda, const char * b, size_t ldb, float * dst,
                            size_t ldd) {
    using W = typename Q::W;
    static_assert(R == 1 || R == 2 || R == 4);
    const W *          ar[R];
    const block_q8_0 * bc[C];
    for (int r = 0; r < R; ++r) {
        ar[r] = reinterpret_cast<const W *>(a + size_t(r) * lda);
    }
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_0 *>(b + size_t(c) * ldb);
    }
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            acc[r][c] = _mm256_setzero_ps();
        }
    }
    for (int64_t i = 0; i < nb; ++i) {
        // Each row is a stream of a few KiB, too short for the hardware
        // prefetcher to ramp up on: fetch the same place in the rows of the
        // next tile, which follow in memory, while this tile is computed.
        for (int r = 0; r < R; ++r) {
            _mm_prefetch(reinterpret_cast<const char *>(ar[r] + i) + R * lda, _MM_HINT_T0);
        }
        typename Q::Col col[C];
        __m256          dy[C];
        for (int c = 0; c < C; ++c) {
            col[c] = Q::prepare(bc[c][i]);
            dy[c]  = _mm256_set1_ps(half_to_float(bc[c][i].d));
        }
        const __m256 dx = row_scales<W, R>(ar, i);
        for (int c = 0; c < C; ++c) {
            // Lane r: scale of row r times the column's scale, then spread.
            const __m256 s = _mm256_mul_ps(dx, dy[c]);
            for (int r = 0; r < R; ++r) {
                const __m256  sr = _mm256_permutevar8x32_ps(s, _mm256_set1_epi32(r));
                const __m256i p  = Q::product(Q::weights(ar[r][i]), col[c]);
                acc[r][c]        = _mm256_fmadd_ps(sr, _mm256_cvtepi32_ps(p), acc[r][c]);
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            dst[size_t(c) * ldd + size_t(r)] = hsum(acc[r][c]);
        }
    }
}

template <class Q, int C>
void gemv_quant_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
                     size_t ldd) {
    constexpr int R = C == 1 ? 4 : 2;
    static_assert(GEMV_ROW_ALIGN % R == 0);
    int64_t r = 0;
    for (; r + R <= nrows; r += R) {
        gemv_quant_tile<Q, R, C>(nb, a + size_t(r) * lda, lda, b, ldb, dst + r, ldd);
    }
    for (; r < nrows; ++r) {
        gemv_quant_tile<Q, 1, C>(nb, a + size_t(r) * lda, lda, b, ldb, dst + r, ldd);
    }
}

template <class Q>
void gemv_quant(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    const int64_t nb = K / QK8_0;
    const auto *  ac = static_cast<const char *>(a);
    const auto *  bc = static_cast<const char *>(b);
    for (; ncols > 4; ncols -= 4, bc += 4 * ldb, dst += 4 * ldd) { // four columns fill the registers
        gemv_quant_cols<Q, 4>(nb, ac, lda, nrows, bc, ldb, dst, ldd);
    }
    switch (ncols) {
        case 1: gemv_quant_cols<Q, 1>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 2: gemv_quant_cols<Q, 2>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 3: gemv_quant_cols<Q, 3>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
        default: gemv_quant_cols<Q, 4>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
    }
}

} // namespace

float dot_f32(int64_t n, const float * x, const float * y) {
    return dot_float<F32Ops>(n, x, y);
}
float dot_f16(int64_t n, const ggml_fp16_t * x, const ggml_fp16_t * y) {
    return dot_float<F16Ops>(n, x, y);
}
float dot_bf16(int64_t n, const uint16_t * x, const uint16_t * y) {
    return dot_float<BF16Ops>(n, x, y);
}
float dot_q8_0_q8_0(int64_t n, const block_q8_0 * x, const block_q8_0 * y) {
    return dot_quant(n, x, y);
}
float dot_q4_0_q8_0(int64_t n, const block_q4_0 * x, const block_q8_0 * y) {
    return dot_quant(n, x, y);
}

void gemv_f32(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
              float * dst, size_t ldd) {
    gemv_float<F32Ops>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_f16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
              float * dst, size_t ldd) {
    gemv_float<F16Ops>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_bf16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv_float<BF16Ops>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv_quant<Q8Blocks>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv_quant<Q4Blocks>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
