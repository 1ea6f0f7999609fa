// The K-quant and IQ4_XS matrix-vector products of the NEON tables against
// Q8_K columns, on integer sums each table supplies (included inside the
// table's namespace, in an anonymous namespace, after them):
//   dot32(l0, l1, y0, y1): the products of 32 levels (l0, l1 as signed
//                          bytes) with 32 column bytes, as four int32 lanes
//                          whose sum is the total;
//   sum32(l0, l1, y0, y1): that total;
//   sum16(l, y):           the products of 16 levels with 16 column bytes.
// Levels are at most 127 in magnitude. Every block's integer totals are the
// portable dot product's (exact); they meet the scales in the portable
// order, so a block's float result is the portable one's.

// Q4_K and Q5_K: group g of 32 values holds the low (g even) or high (g odd)
// nibbles of qs[32 (g / 2) ..], plus 16 where bit g of qh[l] is set (Q5_K).
// The eight six-bit scales and mins (scale_min_k4's) are decoded at once,
// four bytes to a word:
//   scales 0-3: bytes 0-3 & 63;  mins 0-3: bytes 4-7 & 63;
//   scales 4-7: low nibbles of bytes 8-11, top bits of bytes 0-3 above them;
//   mins 4-7:   high nibbles of bytes 8-11, top bits of bytes 4-7 above them.
// Each group's products stay in four lanes, multiplied there by the group's
// scale; the block's isum is their total (at most 8 groups * 63 * 32 * 31 *
// 127 in magnitude, far inside int32), msum the mins against the column's
// sums of 32, both the portable integers.
template <class Block, bool Fifth> struct K4Levels {
    using W = Block;
    template <int G>
    [[gnu::always_inline]] static void group(const W & x, const block_q8_K & y, int32x4_t sc_lo, int32x4_t sc_hi, uint8x16_t & h0,
                      uint8x16_t & h1, int32x4_t & total) {
        const uint8x16_t m4 = vdupq_n_u8(0x0f), one = vdupq_n_u8(1);
        const uint8x16_t q0 = vld1q_u8(x.qs + 32 * (G / 2)), q1 = vld1q_u8(x.qs + 32 * (G / 2) + 16);
        uint8x16_t       l0 = G % 2 == 0 ? vandq_u8(q0, m4) : vshrq_n_u8(q0, 4);
        uint8x16_t       l1 = G % 2 == 0 ? vandq_u8(q1, m4) : vshrq_n_u8(q1, 4);
        if constexpr (Fifth) {
            l0 = vorrq_u8(l0, vshlq_n_u8(vandq_u8(h0, one), 4));
            l1 = vorrq_u8(l1, vshlq_n_u8(vandq_u8(h1, one), 4));
            h0 = vshrq_n_u8(h0, 1);
            h1 = vshrq_n_u8(h1, 1);
        }
        const int32x4_t d = dot32(vreinterpretq_s8_u8(l0), vreinterpretq_s8_u8(l1), vld1q_s8(y.qs + 32 * G),
                                  vld1q_s8(y.qs + 32 * G + 16));
        total = vmlaq_laneq_s32(total, d, G < 4 ? sc_lo : sc_hi, G % 4);
    }

    template <int... G>
    [[gnu::always_inline]] static void groups(const W & x, const block_q8_K & y, int32x4_t sc_lo, int32x4_t sc_hi,
                                              uint8x16_t & h0, uint8x16_t & h1, int32x4_t & total,
                                              std::integer_sequence<int, G...>) {
        (group<G>(x, y, sc_lo, sc_hi, h0, h1, total), ...);
    }

    // Inlined into the column loop (GCC keeps it a call on the neon table).
    [[gnu::always_inline]] static float block(const W & x, const block_q8_K & y) {
        uint32_t w[3];
        std::memcpy(w, x.scales, sizeof(w));
        const uint32_t lo6 = 0x3f3f3f3fu, lo4 = 0x0f0f0f0fu, top2 = 0x03030303u;
        const uint64_t sc  = uint64_t(w[0] & lo6) | uint64_t((w[2] & lo4) | (((w[0] >> 6) & top2) << 4)) << 32;
        const uint64_t mn  = uint64_t(w[1] & lo6) | uint64_t(((w[2] >> 4) & lo4) | (((w[1] >> 6) & top2) << 4)) << 32;
        const int16x8_t s16 = vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(sc)));
        const int16x8_t m16 = vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(mn)));
        // The column's sums of 32: bsums in pairs.
        const int16x8_t g16  = vpaddq_s16(vld1q_s16(y.bsums), vld1q_s16(y.bsums + 8));
        const int32_t   msum = vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(g16), vget_low_s16(m16)), g16, m16));
        uint8x16_t h0 = vdupq_n_u8(0), h1 = h0;
        if constexpr (Fifth) {
            h0 = vld1q_u8(x.qh);
            h1 = vld1q_u8(x.qh + 16);
        }
        const int32x4_t sc_lo = vmovl_s16(vget_low_s16(s16)), sc_hi = vmovl_high_s16(s16);
        int32x4_t       total = vdupq_n_s32(0);
        groups(x, y, sc_lo, sc_hi, h0, h1, total, std::make_integer_sequence<int, 8>{});
        const int isum = vaddvq_s32(total);
        return half_to_f32(x.d) * y.d * float(isum) - half_to_f32(x.dmin) * y.d * float(msum);
    }
};
using Q4K = K4Levels<block_q4_K, false>;
using Q5K = K4Levels<block_q5_K, true>;

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
        return half_to_f32(x.d) * y.d * float(isum);
    }
};

// Q2_K and Q3_K: group g of 16 values holds bits 2 s, 2 s + 1 (s = g / 2 % 4)
// of qs[32 (g / 8) + 16 (g % 2) ..]; Q3_K subtracts 4 where bit g / 2 of
// hmask[16 (g % 2) + l] is clear. Both walk the groups in the order of g:
// the shifted copies of qs (and hmask) serve both halves of a pair.
struct Q2K {
    using W = block_q2_K;
    static float block(const W & x, const block_q8_K & y) {
        const uint8x16_t m2   = vdupq_n_u8(0x03);
        int              isum = 0, mins = 0;
        for (int j = 0; j < 2; ++j) {
            uint8x16_t q[2] = {vld1q_u8(x.qs + 32 * j), vld1q_u8(x.qs + 32 * j + 16)};
            for (int s = 0; s < 4; ++s) {
                for (int part = 0; part < 2; ++part) {
                    const int       g = 8 * j + 2 * s + part;
                    const int8x16_t l = vreinterpretq_s8_u8(vandq_u8(q[part], m2));
                    isum += int(x.scales[g] & 0xf) * sum16(l, vld1q_s8(y.qs + 16 * g));
                    mins += int(y.bsums[g]) * int(x.scales[g] >> 4);
                    q[part] = vshrq_n_u8(q[part], 2);
                }
            }
        }
        return y.d * half_to_f32(x.d) * float(isum) - y.d * half_to_f32(x.dmin) * float(mins);
    }
};

struct Q3K {
    using W = block_q3_K;
    static float block(const W & x, const block_q8_K & y) {
        const uint8x16_t m2 = vdupq_n_u8(0x03), one = vdupq_n_u8(1);
        const int8x16_t  k4 = vdupq_n_s8(4);
        uint8x16_t       hm[2] = {vld1q_u8(x.hmask), vld1q_u8(x.hmask + 16)};
        int              isum  = 0;
        for (int j = 0; j < 2; ++j) {
            uint8x16_t q[2] = {vld1q_u8(x.qs + 32 * j), vld1q_u8(x.qs + 32 * j + 16)};
            for (int s = 0; s < 4; ++s) {
                for (int part = 0; part < 2; ++part) {
                    const int g = 8 * j + 2 * s + part;
                    // (q & 3) + 4 * bit - 4: the level minus 4 where the bit is clear.
                    const uint8x16_t u = vorrq_u8(vandq_u8(q[part], m2), vshlq_n_u8(vandq_u8(hm[part], one), 2));
                    const int8x16_t  l = vsubq_s8(vreinterpretq_s8_u8(u), k4);
                    isum += scale_q3_K(x.scales, g) * sum16(l, vld1q_s8(y.qs + 16 * g));
                    q[part]  = vshrq_n_u8(q[part], 2);
                    hm[part] = vshrq_n_u8(hm[part], 1);
                }
            }
        }
        return half_to_f32(x.d) * y.d * float(isum);
    }
};

// IQ4_XS: eight groups of 32, each 16 bytes of nibbles (low: the first 16
// values, high: the next 16) into IQ4_NL's levels, with a six-bit scale
// (low four bits in scales_l, high two in scales_h) offset by 32.
struct IQ4XS {
    using W = block_iq4_xs;
    static float block(const W & x, const block_q8_K & y) {
        const int8x16_t  levels = vld1q_s8(iq::kvalues_iq4nl);
        const uint8x16_t m4     = vdupq_n_u8(0x0f);
        int              isum   = 0;
        for (int g = 0; g < QK_K / 32; ++g) {
            const uint8x16_t q  = vld1q_u8(x.qs + 16 * g);
            const int8x16_t  l0 = vqtbl1q_s8(levels, vandq_u8(q, m4));
            const int8x16_t  l1 = vqtbl1q_s8(levels, vshrq_n_u8(q, 4));
            const int ls = ((x.scales_l[g / 2] >> (4 * (g % 2))) & 0xf) | (((x.scales_h >> (2 * g)) & 3) << 4);
            isum += (ls - 32) * sum32(l0, l1, vld1q_s8(y.qs + 32 * g), vld1q_s8(y.qs + 32 * g + 16));
        }
        return half_to_f32(x.d) * y.d * float(isum);
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
