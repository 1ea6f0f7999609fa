// Q4_0 weights in the Arm tables' repacked layout (Note [Interleaved Q4_0
// rows] in repack.h) against Q8_0 columns, on SDOT's indexed form: four
// rows a register, no sum across lanes per block. Compiled for
// armv8.2-a+dotprod; the tables that hold it are built only where the
// processor reports the extension.

#if defined(__aarch64__)

#include <arm_neon.h>

#include "core/types/legacy_k.h"
#include "neon.h"

#include "dot_target_begin.h"

namespace loom::cpu::neon_dot {

namespace {

constexpr size_t SET_BLOCK = 4 * sizeof(block_q4_0); // a block of four rows: 72 bytes

// One set of four rows (nb blocks from p) against C columns; rows' results
// at dst[c * ldd + k], k < 4. The even blocks' products go to one sum, the
// odd ones' to another, added at the end: per lane the arithmetic of the
// NEON tables' gemv_q4_0 (quants_impl.h), so the bits are the same as from
// ggml's layout.
// One block of a set of four rows against C columns, its products added to acc.
template <int C>
inline void set_block(const int8_t * p, const block_q8_0 * const * col, int64_t i, float32x4_t * acc) {
    const float32x4_t dx   = vcvt_f32_f16(vreinterpret_f16_s8(vld1_s8(p)));
    const int8x16_t   high = vdupq_n_s8(int8_t(0xf0));
    // 16 (q - 8) of weights 4j .. 4j + 3 (lo) and 16 + 4j .. (hi) of each row.
    int8x16_t lo[4], hi[4];
    for (int j = 0; j < 4; ++j) {
        const int8x16_t q = vld1q_s8(p + 8 + 16 * j);
        lo[j]             = vshlq_n_s8(q, 4);
        hi[j]             = vandq_s8(q, high);
    }
    for (int c = 0; c < C; ++c) {
        const block_q8_0 & y  = col[c][i];
        const int8x16_t    y0 = vld1q_s8(y.qs);
        const int8x16_t    y1 = vld1q_s8(y.qs + 16);
        int32x4_t          s  = vdotq_laneq_s32(vdupq_n_s32(0), lo[0], y0, 0);
        s                     = vdotq_laneq_s32(s, lo[1], y0, 1);
        s                     = vdotq_laneq_s32(s, lo[2], y0, 2);
        s                     = vdotq_laneq_s32(s, lo[3], y0, 3);
        s                     = vdotq_laneq_s32(s, hi[0], y1, 0);
        s                     = vdotq_laneq_s32(s, hi[1], y1, 1);
        s                     = vdotq_laneq_s32(s, hi[2], y1, 2);
        s                     = vdotq_laneq_s32(s, hi[3], y1, 3);
        // 16 times the exact sums: converted and divided by 16 in one rounding.
        const float32x4_t isum = vcvtq_n_f32_s32(s, 4);
        acc[c]                 = vaddq_f32(acc[c], vmulq_f32(isum, vmulq_n_f32(dx, half_to_f32(y.d))));
    }
}

// One set of four rows (nb blocks from p) against C columns; rows' results
// at dst[c * ldd + k], k < 4. The even blocks' products go to one sum, the
// odd ones' to another, added at the end: per lane the arithmetic of the
// NEON tables' gemv_q4_0 (quants_impl.h), so the bits are the same as from
// ggml's layout.
template <int C>
void set_cols(int64_t nb, const int8_t * p, const block_q8_0 * const * col, float * dst, size_t ldd) {
    float32x4_t even[C], odd[C];
    for (int c = 0; c < C; ++c) even[c] = odd[c] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 2 <= nb; i += 2, p += 2 * SET_BLOCK) {
        set_block<C>(p, col, i, even);
        set_block<C>(p + SET_BLOCK, col, i + 1, odd);
    }
    if (i < nb) set_block<C>(p, col, i, even);
    for (int c = 0; c < C; ++c) vst1q_f32(dst + size_t(c) * ldd, vaddq_f32(even[c], odd[c]));
}

} // namespace

void gemv_q4_0_x4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd) {
    const int64_t nb = K / QK4_0;
    with_gemv_cols(ncols, [&](auto cols) {
        constexpr int      C = decltype(cols)::value;
        const block_q8_0 * col[C];
        for (int c = 0; c < C; ++c) {
            col[c] = reinterpret_cast<const block_q8_0 *>(static_cast<const char *>(b) + size_t(c) * ldb);
        }
        for (int64_t r = 0; r + 4 <= nrows; r += 4) {
            set_cols<C>(nb, static_cast<const int8_t *>(a) + size_t(r) * lda, col, dst + r, ldd);
        }
    });
}

} // namespace loom::cpu::neon_dot

#include "dot_target_end.h"

#endif // __aarch64__
