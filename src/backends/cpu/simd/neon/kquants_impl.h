// Q4_K and Q6_K matrix-vector products of the NEON tables against Q8_K
// columns, on integer sums each table supplies (included inside the table's
// namespace, in an anonymous namespace, after them):
//   sum32_u4(q, y0, y1): the products of 32 levels 0..15 (q0, q1 as bytes)
//                        with 32 column bytes;
//   sum16_s8(q, y):      the products of 16 signed levels with 16 column bytes.
// Every block's integer totals are the portable dot product's (exact); they
// meet the scales in the portable order: d * yd * isum - dmin * yd * msum.

struct Q4K {
    using W = block_q4_K;
    static float block(const W & x, const block_q8_K & y) {
        int isum = 0, msum = 0;
        for (int p = 0; p < 4; ++p) {
            // Groups 2p (low nibbles) and 2p + 1 (high ones) of 32 values.
            const uint8x16_t q0 = vld1q_u8(x.qs + 32 * p), q1 = vld1q_u8(x.qs + 32 * p + 16);
            const uint8x16_t m4 = vdupq_n_u8(0x0f);
            for (int h = 0; h < 2; ++h) {
                const int  g  = 2 * p + h;
                uint8_t    sc, m;
                scale_min_k4(g, x.scales, sc, m);
                const int8x16_t l0 = vreinterpretq_s8_u8(h == 0 ? vandq_u8(q0, m4) : vshrq_n_u8(q0, 4));
                const int8x16_t l1 = vreinterpretq_s8_u8(h == 0 ? vandq_u8(q1, m4) : vshrq_n_u8(q1, 4));
                const int       s  = sum32(l0, l1, vld1q_s8(y.qs + 32 * g), vld1q_s8(y.qs + 32 * g + 16));
                isum += int(sc) * s;
                msum += int(m) * (int(y.bsums[2 * g]) + int(y.bsums[2 * g + 1]));
            }
        }
        return fp16_to_fp32(x.d) * y.d * float(isum) - fp16_to_fp32(x.dmin) * y.d * float(msum);
    }
};

struct Q6K {
    using W = block_q6_K;
    static float block(const W & x, const block_q8_K & y) {
        const uint8x16_t m4 = vdupq_n_u8(0x0f), m2 = vdupq_n_u8(0x03);
        const int8x16_t  k32 = vdupq_n_s8(32);
        int              isum = 0;
        for (int h = 0; h < 2; ++h) {
            const uint8_t * ql = x.ql + 64 * h;
            const uint8_t * qh = x.qh + 32 * h;
            // Values 128 h + l, + 32, + 64, + 96 for l < 32, 16 at a time.
            for (int half = 0; half < 2; ++half) {
                const uint8x16_t a  = vld1q_u8(ql + 16 * half);
                const uint8x16_t b  = vld1q_u8(ql + 32 + 16 * half);
                const uint8x16_t hb = vld1q_u8(qh + 16 * half);
                const uint8x16_t v[4] = {
                    vorrq_u8(vandq_u8(a, m4), vshlq_n_u8(vandq_u8(hb, m2), 4)),
                    vorrq_u8(vandq_u8(b, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m2), 4)),
                    vorrq_u8(vshrq_n_u8(a, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m2), 4)),
                    vorrq_u8(vshrq_n_u8(b, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4)),
                };
                for (int j = 0; j < 4; ++j) {
                    const int at = 128 * h + 32 * j + 16 * half; // the first of the 16 values
                    const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(v[j]), k32);
                    isum += int(x.scales[at / 16]) * sum16(q, vld1q_s8(y.qs + at));
                }
            }
        }
        return fp16_to_fp32(x.d) * y.d * float(isum);
    }
};

template <class Q, int C>
void kq_gemv_cols(int64_t K, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
                  size_t ldd) {
    const int64_t      nb = K / QK_K;
    const block_q8_K * col[C];
    for (int c = 0; c < C; ++c) col[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    for (int64_t r = 0; r < nrows; ++r) {
        const auto * x = reinterpret_cast<const typename Q::W *>(a + size_t(r) * lda);
        for (int c = 0; c < C; ++c) {
            float sum = 0.0f;
            for (int64_t i = 0; i < nb; ++i) sum = sum + Q::block(x[i], col[c][i]);
            dst[size_t(c) * ldd + size_t(r)] = sum;
        }
    }
}

template <class Q>
void kq_gemv(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
             size_t ldd) {
    with_gemv_cols(ncols, [&](auto cols) {
        kq_gemv_cols<Q, decltype(cols)::value>(K, static_cast<const char *>(a), lda, nrows,
                                               static_cast<const char *>(b), ldb, dst, ldd);
    });
}
