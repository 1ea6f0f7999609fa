// The Q8_0, Q4_0, IQ4_NL and MXFP4 products of the NEON tables, on an integer block sum
// that each table supplies: block_sum(x0, x1, y0, y1), the sum of the
// products of 32 signed bytes (x0, x1 with y0, y1). Included inside the
// namespace of its table (neon:: or neon_dot::), after block_sum.
//
// Both tables supply dot32 as well, the same products as four int32 lanes
// whose sum is the total. Each block's sum is exact; it meets the blocks' scales as the portable
// table's dot products do (isum * (dx * dy)); the dot products add the
// blocks in the portable order, the matrix-vector products the even and
// the odd blocks apart.

struct Q80 {
    using W = block_q8_0;
    static float scale(const W & x) { return half_to_f32(x.d); }
    static void load(const W & x, int8x16_t & x0, int8x16_t & x1) {
        x0 = vld1q_s8(x.qs);
        x1 = vld1q_s8(x.qs + 16);
    }
};

struct Q40 {
    using W = block_q4_0;
    static float scale(const W & x) { return half_to_f32(x.d); }
    static void load(const W & x, int8x16_t & x0, int8x16_t & x1) {
        const uint8x16_t q = vld1q_u8(x.qs);
        const int8x16_t  e = vdupq_n_s8(8);
        x0                 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0f))), e);
        x1                 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), e);
    }
};

// IQ4_NL: Q4_0's layout, each nibble an index into the type's 16 levels
// (one table lookup per 16 values).
struct IQ4NL {
    using W = block_iq4_nl;
    static float scale(const W & x) { return half_to_f32(x.d); }
    static void load(const W & x, int8x16_t & x0, int8x16_t & x1) {
        const int8x16_t  levels = vld1q_s8(iq::kvalues_iq4nl);
        const uint8x16_t q      = vld1q_u8(x.qs);
        x0                      = vqtbl1q_s8(levels, vandq_u8(q, vdupq_n_u8(0x0f)));
        x1                      = vqtbl1q_s8(levels, vshrq_n_u8(q, 4));
    }
};

// MXFP4: Q4_0's layout, each nibble an E2M1 value doubled (an integer of
// -12..12), the block's E8M0 scale halved to match: 2^(e - 128), the float
// of bits (e - 1) << 23, or for e < 2 the subnormal 0x00200000 << e.
struct MXFP4 {
    using W = block_mxfp4;
    static float scale(const W & x) {
        const uint32_t bits = x.e >= 2 ? uint32_t(x.e - 1) << 23 : 0x00200000u << x.e;
        float          f;
        std::memcpy(&f, &bits, sizeof(f));
        return f;
    }
    static void load(const W & x, int8x16_t & x0, int8x16_t & x1) {
        const int8x16_t  levels = vld1q_s8(kvalues_fp4);
        const uint8x16_t q      = vld1q_u8(x.qs);
        x0                      = vqtbl1q_s8(levels, vandq_u8(q, vdupq_n_u8(0x0f)));
        x1                      = vqtbl1q_s8(levels, vshrq_n_u8(q, 4));
    }
};

template <class Q> float dot_blocks(int64_t n, const typename Q::W * x, const block_q8_0 * y) {
    float sum = 0.0f;
    for (int64_t b = 0; b < n / QK8_0; ++b) {
        int8x16_t x0, x1;
        Q::load(x[b], x0, x1);
        const int32_t isum = block_sum(x0, x1, vld1q_s8(y[b].qs), vld1q_s8(y[b].qs + 16));
        sum                = sum + float(isum) * (Q::scale(x[b]) * half_to_f32(y[b].d));
    }
    return sum;
}

// One row against C columns: each block of the row is unpacked once for all
// the columns. Two blocks a step, the even blocks' sum in lane 0 and the odd
// ones' in lane 1 until the row's end: the two blocks' integer sums are
// reduced together (two pairwise additions), converted and scaled in one
// instruction each, each lane rounding as the scalar arithmetic would.
template <class Q, int C>
void gemv_cols(int64_t K, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
               size_t ldd) {
    using W         = typename Q::W;
    const int64_t nb = K / QK8_0;
    const block_q8_0 * col[C];
    for (int c = 0; c < C; ++c) col[c] = reinterpret_cast<const block_q8_0 *>(b + size_t(c) * ldb);
    for (int64_t r = 0; r < nrows; ++r) {
        const W *   x = reinterpret_cast<const W *>(a + size_t(r) * lda);
        float32x2_t sum[C];
        for (int c = 0; c < C; ++c) sum[c] = vdup_n_f32(0.0f);
        int64_t i = 0;
        for (; i + 2 <= nb; i += 2) {
            int8x16_t x0, x1, z0, z1;
            Q::load(x[i], x0, x1);
            Q::load(x[i + 1], z0, z1);
            const float dx = Q::scale(x[i]), dz = Q::scale(x[i + 1]);
            for (int c = 0; c < C; ++c) {
                const block_q8_0 & y0 = col[c][i];
                const block_q8_0 & y1 = col[c][i + 1];
                const int32x4_t    p  = vpaddq_s32(dot32(x0, x1, vld1q_s8(y0.qs), vld1q_s8(y0.qs + 16)),
                                                   dot32(z0, z1, vld1q_s8(y1.qs), vld1q_s8(y1.qs + 16)));
                const float32x2_t  isum  = vcvt_f32_s32(vget_low_s32(vpaddq_s32(p, p)));
                const float32x2_t  scale = {dx * half_to_f32(y0.d), dz * half_to_f32(y1.d)};
                sum[c]                   = vadd_f32(sum[c], vmul_f32(isum, scale));
            }
        }
        if (i < nb) {
            int8x16_t x0, x1;
            Q::load(x[i], x0, x1);
            const float dx = Q::scale(x[i]);
            for (int c = 0; c < C; ++c) {
                const int32_t s0 = block_sum(x0, x1, vld1q_s8(col[c][i].qs), vld1q_s8(col[c][i].qs + 16));
                sum[c] = vset_lane_f32(vget_lane_f32(sum[c], 0) + float(s0) * (dx * half_to_f32(col[c][i].d)), sum[c], 0);
            }
        }
        for (int c = 0; c < C; ++c) dst[size_t(c) * ldd + size_t(r)] = vget_lane_f32(sum[c], 0) + vget_lane_f32(sum[c], 1);
    }
}

// Note [One column, two rows a step]
// The one-column product (what generation runs) takes two rows at once, so
// that each block of the column (its two registers of values and its
// scale's conversion) serves both rows: per two blocks of two rows, 18
// loads instead of 24. Each row's arithmetic is gemv_cols<Q, 1>'s, in lanes
// of its own: the even blocks' sums of the two rows in lanes 0 and 2, the
// odd ones' in lanes 1 and 3, each block's exact sum times (dx * dy), each
// lane multiplied by its scale by element rather than the scales inserted
// into one register (an insert costs more than the product it saves): the
// same bits. A last odd row takes gemv_cols.
template <class Q>
[[gnu::noinline]] void gemv_one_col(int64_t K, const char * a, size_t lda, int64_t nrows, const char * b,
                                    float * dst) {
    using W          = typename Q::W;
    const int64_t      nb = K / QK8_0;
    const block_q8_0 * y  = reinterpret_cast<const block_q8_0 *>(b);
    int64_t            r  = 0;
    for (; r + 2 <= nrows; r += 2) {
        const W * x = reinterpret_cast<const W *>(a + size_t(r) * lda);
        const W * z = reinterpret_cast<const W *>(a + size_t(r + 1) * lda);
        // sum[k]'s lane k holds lane k's running sum (the other lanes are
        // left over from the products by element).
        float32x4_t sum[4];
        for (float32x4_t & v : sum) v = vdupq_n_f32(0.0f);
        int64_t i = 0;
        for (; i + 2 <= nb; i += 2) {
            int8x16_t x0, x1, x2, x3, z0, z1, z2, z3;
            Q::load(x[i], x0, x1);
            Q::load(x[i + 1], x2, x3);
            Q::load(z[i], z0, z1);
            Q::load(z[i + 1], z2, z3);
            const int8x16_t y0 = vld1q_s8(y[i].qs), y1 = vld1q_s8(y[i].qs + 16);
            const int8x16_t y2 = vld1q_s8(y[i + 1].qs), y3 = vld1q_s8(y[i + 1].qs + 16);
            const int32x4_t px = vpaddq_s32(dot32(x0, x1, y0, y1), dot32(x2, x3, y2, y3));
            const int32x4_t pz = vpaddq_s32(dot32(z0, z1, y0, y1), dot32(z2, z3, y2, y3));
            const float32x4_t isum = vcvtq_f32_s32(vpaddq_s32(px, pz));
            // Each lane times its scale by element (no lane inserts).
            const float dy0 = half_to_f32(y[i].d), dy1 = half_to_f32(y[i + 1].d);
            sum[0]          = vaddq_f32(sum[0], vmulq_n_f32(isum, Q::scale(x[i]) * dy0));
            sum[1]          = vaddq_f32(sum[1], vmulq_n_f32(isum, Q::scale(x[i + 1]) * dy1));
            sum[2]          = vaddq_f32(sum[2], vmulq_n_f32(isum, Q::scale(z[i]) * dy0));
            sum[3]          = vaddq_f32(sum[3], vmulq_n_f32(isum, Q::scale(z[i + 1]) * dy1));
        }
        float even_x = vgetq_lane_f32(sum[0], 0), even_z = vgetq_lane_f32(sum[2], 2);
        if (i < nb) {
            int8x16_t x0, x1, z0, z1;
            Q::load(x[i], x0, x1);
            Q::load(z[i], z0, z1);
            const int8x16_t y0 = vld1q_s8(y[i].qs), y1 = vld1q_s8(y[i].qs + 16);
            const float     dy = half_to_f32(y[i].d);
            even_x             = even_x + float(block_sum(x0, x1, y0, y1)) * (Q::scale(x[i]) * dy);
            even_z             = even_z + float(block_sum(z0, z1, y0, y1)) * (Q::scale(z[i]) * dy);
        }
        dst[r]     = even_x + vgetq_lane_f32(sum[1], 1);
        dst[r + 1] = even_z + vgetq_lane_f32(sum[3], 3);
    }
    if (r < nrows) {
        gemv_cols<Q, 1>(K, a + size_t(r) * lda, lda, 1, b, 0, dst + r, 0);
    }
}

template <class Q>
void gemv(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
          size_t ldd) {
    if (ncols == 1) {
        gemv_one_col<Q>(K, static_cast<const char *>(a), lda, nrows, static_cast<const char *>(b), dst);
        return;
    }
    with_gemv_cols(ncols, [&](auto cols) {
        gemv_cols<Q, decltype(cols)::value>(K, static_cast<const char *>(a), lda, nrows, static_cast<const char *>(b),
                                            ldb, dst, ldd);
    });
}
