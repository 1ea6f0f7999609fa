// Q4_K weights in the Arm tables' repacked layout (Note [Interleaved Q4_K
// rows] in repack.h) against Q8_K columns, on SDOT's indexed form: four
// rows a register, each group's products in the rows' lanes, no sum across
// lanes. Compiled for armv8.2-a+dotprod; the tables that hold it are built
// only where the processor reports the extension.

#if defined(__aarch64__)

#include <arm_neon.h>

#include "core/types/legacy_k.h"
#include "neon.h"

#include "dot_target_begin.h"

namespace loom::cpu::neon_dot {

namespace {

constexpr size_t SET_BLOCK = 4 * sizeof(block_q4_K); // a block of four rows: 576 bytes

// What a block of four rows shares among the columns: the rows' block
// scales, and the six-bit group scales and mins out of their 48 bytes
// (group g, row k in byte lane 4 (g % 4) + k of the vectors of groups 0-3
// and 4-7, as scale_min_k4 decodes them).
struct SetScales {
    float32x4_t d, dmin; // lane k: row k's
    uint8x16_t  sc03, sc47;
    int16x8_t   mins[4]; // mins[q]: groups 2q (lanes 0-3) and 2q + 1 (lanes 4-7), one row a lane
};

inline SetScales set_scales(const uint8_t * p) {
    SetScales        s;
    const uint8x16_t a = vld1q_u8(p + 16), b = vld1q_u8(p + 32), c = vld1q_u8(p + 48);
    const uint8x16_t m6 = vdupq_n_u8(63);
    s.d                 = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p)));
    s.dmin              = vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(p + 8)));
    // Groups 0-3: the low six bits of bytes 0-3 (scales) and 4-7 (mins);
    // groups 4-7: the low (scales) and high (mins) nibbles of bytes 8-11
    // below the top two bits of bytes 0-3 and 4-7.
    s.sc03                = vandq_u8(a, m6);
    s.sc47                = vsliq_n_u8(c, vshrq_n_u8(a, 6), 4);
    const uint8x16_t mn03 = vandq_u8(b, m6);
    const uint8x16_t mn47 = vsliq_n_u8(vshrq_n_u8(c, 4), vshrq_n_u8(b, 6), 4);
    s.mins[0]             = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn03)));
    s.mins[1]             = vreinterpretq_s16_u16(vmovl_high_u8(mn03));
    s.mins[2]             = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn47)));
    s.mins[3]             = vreinterpretq_s16_u16(vmovl_high_u8(mn47));
    return s;
}

// Sixteen products of four weights of each of four rows (w) with four
// values of the column: y's lanes 0-3 for w[0..3], y1's for w[4..7].
inline int32x4_t group_dot(const int8x16_t (&w)[8], int8x16_t y0, int8x16_t y1) {
    int32x4_t s = vdotq_laneq_s32(vdupq_n_s32(0), w[0], y0, 0);
    s           = vdotq_laneq_s32(s, w[1], y0, 1);
    s           = vdotq_laneq_s32(s, w[2], y0, 2);
    s           = vdotq_laneq_s32(s, w[3], y0, 3);
    s           = vdotq_laneq_s32(s, w[4], y1, 0);
    s           = vdotq_laneq_s32(s, w[5], y1, 1);
    s           = vdotq_laneq_s32(s, w[6], y1, 2);
    return vdotq_laneq_s32(s, w[7], y1, 3);
}

// One block of a set of four rows against C columns, its results added to
// acc[c] (lane k: row k). Each row's integer totals are the plain kernel's
// (isum, the groups' products times their scales; msum, the mins against
// the column's sums of 32) and meet the block scales in its order (the
// K-quant products of kquants_impl.h), lane by lane: the same bits as the
// plain gemv_q4_K.
template <int C>
[[gnu::always_inline]] inline void set_block(const uint8_t * p, const block_q8_K * const * col, int64_t i,
                                             float32x4_t * acc) {
    const SetScales  s  = set_scales(p);
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    int32x4_t        isum[C];
    for (int c = 0; c < C; ++c) isum[c] = vdupq_n_s32(0);
    for (int j = 0; j < 4; ++j) {
        // Run j of qs: groups 2j (low nibbles) and 2j + 1 (high nibbles),
        // four bytes of each row a register.
        const uint8x16_t * q = reinterpret_cast<const uint8x16_t *>(p + 64 + 128 * j);
        int8x16_t          lo[8], hi[8];
        for (int t = 0; t < 8; ++t) {
            const uint8x16_t v = vld1q_u8(reinterpret_cast<const uint8_t *>(q + t));
            lo[t]              = vreinterpretq_s8_u8(vandq_u8(v, m4));
            hi[t]              = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        }
        // The two groups' scales, one row a lane.
        const uint16x8_t sc16 = vmovl_u8(j < 2 ? (j == 0 ? vget_low_u8(s.sc03) : vget_high_u8(s.sc03))
                                               : (j == 2 ? vget_low_u8(s.sc47) : vget_high_u8(s.sc47)));
        const int32x4_t  sc_e = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(sc16)));
        const int32x4_t  sc_o = vreinterpretq_s32_u32(vmovl_high_u16(sc16));
        for (int c = 0; c < C; ++c) {
            const int8_t *  y  = col[c][i].qs + 64 * j;
            const int32x4_t de = group_dot(lo, vld1q_s8(y), vld1q_s8(y + 16));
            const int32x4_t dd = group_dot(hi, vld1q_s8(y + 32), vld1q_s8(y + 48));
            isum[c]            = vmlaq_s32(vmlaq_s32(isum[c], de, sc_e), dd, sc_o);
        }
    }
    for (int c = 0; c < C; ++c) {
        const block_q8_K & y = col[c][i];
        // The column's sums of 32 (bsums in pairs) against each row's mins.
        const int16x8_t g = vpaddq_s16(vld1q_s16(y.bsums), vld1q_s16(y.bsums + 8));
        int32x4_t       m = vmull_laneq_s16(vget_low_s16(s.mins[0]), g, 0);
        m                 = vmlal_high_laneq_s16(m, s.mins[0], g, 1);
        m                 = vmlal_laneq_s16(m, vget_low_s16(s.mins[1]), g, 2);
        m                 = vmlal_high_laneq_s16(m, s.mins[1], g, 3);
        m                 = vmlal_laneq_s16(m, vget_low_s16(s.mins[2]), g, 4);
        m                 = vmlal_high_laneq_s16(m, s.mins[2], g, 5);
        m                 = vmlal_laneq_s16(m, vget_low_s16(s.mins[3]), g, 6);
        m                 = vmlal_high_laneq_s16(m, s.mins[3], g, 7);
        // d * yd * isum - dmin * yd * msum, then added to the row's sum.
        const float32x4_t t1 = vmulq_f32(vmulq_n_f32(s.d, y.d), vcvtq_f32_s32(isum[c]));
        const float32x4_t t2 = vmulq_f32(vmulq_n_f32(s.dmin, y.d), vcvtq_f32_s32(m));
        acc[c]               = vaddq_f32(acc[c], vsubq_f32(t1, t2));
    }
}

// One set of four rows (nb blocks from p) against C columns; the rows'
// results at dst[c * ldd + k], k < 4. (A function of its own for each C,
// its block loop whole.)
template <int C>
[[gnu::noinline]] void set_cols(int64_t nb, const uint8_t * p, const block_q8_K * const * col, float * dst, size_t ldd) {
    float32x4_t acc[C];
    for (int c = 0; c < C; ++c) acc[c] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nb; ++i, p += SET_BLOCK) set_block<C>(p, col, i, acc);
    for (int c = 0; c < C; ++c) vst1q_f32(dst + size_t(c) * ldd, acc[c]);
}

} // namespace

void gemv_q4_K_x4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd) {
    const int64_t      nb = K / QK_K;
    const block_q8_K * col[GEMV_MAX_COLS];
    for (int c = 0; c < ncols; ++c) {
        col[c] = reinterpret_cast<const block_q8_K *>(static_cast<const char *>(b) + size_t(c) * ldb);
    }
    // A set's blocks (576 bytes each) stay in the first-level cache while
    // up to four columns at a time pass: the weights of a run and four
    // columns' running sums fit in the registers.
    for (int64_t r = 0; r + 4 <= nrows; r += 4) {
        const uint8_t * p = static_cast<const uint8_t *>(a) + size_t(r) * lda;
        for (int c0 = 0; c0 < ncols; c0 += 4) {
            const int n = ncols - c0 < 4 ? ncols - c0 : 4;
            with_gemv_cols(n, [&](auto cols) {
                constexpr int C = decltype(cols)::value;
                if constexpr (C <= 4) set_cols<C>(nb, p, col + c0, dst + size_t(c0) * ldd + r, ldd);
            });
        }
    }
}

} // namespace loom::cpu::neon_dot

#include "dot_target_end.h"

#endif // __aarch64__
