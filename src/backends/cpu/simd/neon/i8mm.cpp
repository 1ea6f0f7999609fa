// The products of the NEON i8mm table: Q8_0 and Q4_0 rows against several
// Q8_0 columns in tiles of two rows by two columns, one SMMLA a tile and 8
// weights (the 2 x 8 by 8 x 2 integer product of the 8-bit integer matrix
// multiply extension). Compiled for armv8.2-a+dotprod+i8mm; the table that
// holds them is built only where the processor reports both extensions.

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>

#include "core/fp16.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"
#include "neon.h"

#include "i8mm_target_begin.h"

namespace loom::cpu::neon_i8mm {

using neon::half_to_f32;

namespace {

// quants_impl.h's block readers want these; the SDOT forms, as neon_dot's.
inline int32x4_t dot32(int8x16_t x0, int8x16_t x1, int8x16_t y0, int8x16_t y1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), x0, y0), x1, y1);
}
inline int32_t block_sum(int8x16_t x0, int8x16_t x1, int8x16_t y0, int8x16_t y1) {
    return vaddvq_s32(dot32(x0, x1, y0, y1));
}

#include "core/types/fp4_values.inc"
#include "quants_impl.h"

// The 8-byte halves of two registers side by side: (a's first, b's first)
// and (a's second, b's second), the operands of SMMLA for two rows (or
// columns) of 16 values each.
inline int8x16_t zip_lo(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
inline int8x16_t zip_hi(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

// Block i of two rows against P pairs of columns, added to acc[p]: lanes
// (row 0, col 0), (row 0, col 1), (row 1, col 0), (row 1, col 1) of pair p.
template <class Q, int P>
inline void tile_block(const typename Q::W & x0, const typename Q::W & x1, const block_q8_0 * const * col, int64_t i,
                       float32x4_t * acc) {
    int8x16_t a0, a1, b0, b1;
    Q::load(x0, a0, a1);
    Q::load(x1, b0, b1);
    const int8x16_t   r0 = zip_lo(a0, b0), r1 = zip_hi(a0, b0), r2 = zip_lo(a1, b1), r3 = zip_hi(a1, b1);
    const float32x4_t dx = vcombine_f32(vdup_n_f32(Q::scale(x0)), vdup_n_f32(Q::scale(x1)));
    for (int p = 0; p < P; ++p) {
        const block_q8_0 & y0 = col[2 * p][i];
        const block_q8_0 & y1 = col[2 * p + 1][i];
        const int8x16_t    c0 = vld1q_s8(y0.qs), c1 = vld1q_s8(y0.qs + 16);
        const int8x16_t    e0 = vld1q_s8(y1.qs), e1 = vld1q_s8(y1.qs + 16);
        int32x4_t          s  = vmmlaq_s32(vdupq_n_s32(0), r0, zip_lo(c0, e0));
        s                     = vmmlaq_s32(s, r1, zip_hi(c0, e0));
        s                     = vmmlaq_s32(s, r2, zip_lo(c1, e1));
        s                     = vmmlaq_s32(s, r3, zip_hi(c1, e1));
        const float32x2_t dy  = {half_to_f32(y0.d), half_to_f32(y1.d)};
        acc[p] = vaddq_f32(acc[p], vmulq_f32(vcvtq_f32_s32(s), vmulq_f32(dx, vcombine_f32(dy, dy))));
    }
}

// Two rows against 2P columns. Even and odd blocks summed apart and added at
// the end, each lane's arithmetic that of the other NEON tables'
// gemv_q8_0 and gemv_q4_0 (quants_impl.h's gemv_cols): the same bits.
template <class Q, int P>
void tile_rows(int64_t nb, const typename Q::W * x0, const typename Q::W * x1, const block_q8_0 * const * col,
               float * dst, size_t ldd) {
    float32x4_t even[P], odd[P];
    for (int p = 0; p < P; ++p) even[p] = odd[p] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2) {
        tile_block<Q, P>(x0[i], x1[i], col, i, even);
        tile_block<Q, P>(x0[i + 1], x1[i + 1], col, i + 1, odd);
    }
    if (i < nb) tile_block<Q, P>(x0[i], x1[i], col, i, even);
    for (int p = 0; p < P; ++p) {
        const float32x4_t s = vaddq_f32(even[p], odd[p]);
        float * const     d = dst + size_t(2 * p) * ldd;
        d[0]                = vgetq_lane_f32(s, 0);
        d[ldd]              = vgetq_lane_f32(s, 1);
        d[1]                = vgetq_lane_f32(s, 2);
        d[ldd + 1]          = vgetq_lane_f32(s, 3);
    }
}

// Pairs of rows against pairs of columns; a last odd column and a last odd
// row take the dot-product table's kernel (one = its gemv_q8_0 or gemv_q4_0).
template <class Q>
void gemv(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
          size_t ldd, GemvFn one) {
    if (ncols < 2) {
        one(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
        return;
    }
    using W          = typename Q::W;
    const int64_t nb = K / QK8_0;
    const int     pairs = (ncols > GEMV_MAX_COLS ? GEMV_MAX_COLS : ncols) / 2;
    const auto *  rows  = static_cast<const char *>(a);
    const auto *  cols  = static_cast<const char *>(b);
    const block_q8_0 * col[GEMV_MAX_COLS];
    for (int c = 0; c < 2 * pairs; ++c) col[c] = reinterpret_cast<const block_q8_0 *>(cols + size_t(c) * ldb);
    int64_t r = 0;
    for (; r + 2 <= nrows; r += 2) {
        const W * x0 = reinterpret_cast<const W *>(rows + size_t(r) * lda);
        const W * x1 = reinterpret_cast<const W *>(rows + size_t(r + 1) * lda);
        switch (pairs) {
            case 1: tile_rows<Q, 1>(nb, x0, x1, col, dst + r, ldd); break;
            case 2: tile_rows<Q, 2>(nb, x0, x1, col, dst + r, ldd); break;
            case 3: tile_rows<Q, 3>(nb, x0, x1, col, dst + r, ldd); break;
            default: tile_rows<Q, 4>(nb, x0, x1, col, dst + r, ldd); break;
        }
    }
    if (r < nrows) {
        one(K, rows + size_t(r) * lda, lda, 1, b, ldb, 2 * pairs, dst + r, ldd);
    }
    if (2 * pairs < ncols && ncols <= GEMV_MAX_COLS) {
        one(K, a, lda, nrows, cols + size_t(2 * pairs) * ldb, ldb, 1, dst + size_t(2 * pairs) * ldd, ldd);
    }
}

} // namespace

void gemv_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv<Q80>(K, a, lda, nrows, b, ldb, ncols, dst, ldd, neon_dot::gemv_q8_0);
}

void gemv_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv<Q40>(K, a, lda, nrows, b, ldb, ncols, dst, ldd, neon_dot::gemv_q4_0);
}

} // namespace loom::cpu::neon_i8mm

#include "i8mm_target_end.h"

#endif // __aarch64__
