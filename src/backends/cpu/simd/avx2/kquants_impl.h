// The K-quant matrix-vector products and the Q8_K quantizer on 256-bit
// integer instructions, written once for two tables: avx2/kquants.cpp
// includes this file inside namespace loom::cpu::avx2 under the AVX2 target,
// avx512/kquants.cpp inside loom::cpu::avx512 under the AVX-512 target
// (which adds no 512-bit step here: the compiler gets 32 vector registers
// and EVEX encodings for the same 256-bit operations, so the decoded
// super-block stays in registers). Include only between a target_begin.h and
// its target_end.h, after <immintrin.h>, <cstring>, <type_traits>, core/fp16.h,
// core/types/legacy_k.h, core/types/i_quants.h, core/types/iq_tables.h and
// kernel_table.h, inside the ISA's namespace.
//
// Note [K-quant products]
// A super-block of 256 weights meets a Q8_K column block as integers: the
// weights' levels are unpacked to unsigned bytes u (0..63), in the order of
// the column's 256 values, eight registers of 32; maddubs multiplies them
// with the column's signed bytes into pairs of int16 (|pair| <= 2 * 63 * 127,
// no saturation), and madd with the scales of the two groups of 16 a
// register holds (lanes 0-7 the first group, 8-15 the second) gives int32
// sums, exact. What the unsigned levels leave out goes through the column's
// bsums (sums of its 16 groups of 16):
//  - Q4_K, Q5_K, Q2_K (value = d * scale * u - dmin * min): the mins meet
//    the bsums, and the block adds yd * (d * isum - dmin * msum);
//  - Q6_K and Q3_K (value = d * scale * (u - offset), offset 32 and 4): the
//    products offset * scale meet the bsums and are taken off isum as
//    integers, the block adding yd * d * (isum - msum).
// IQ4_XS (value = d * (scale - 32) * table[u], eight groups of 32) decodes
// to signed levels instead, which meet the column through the sign trick of
// dot_i8 (|level| <= 127, y never -128), with no bias.
// A super-block is decoded once per row and meets every column of the call
// (up to GEMV_MAX_COLS), so the weights are read once for all of them. The
// integer sums are those of the portable dot products (quant_dot.cpp);
// only the order of the f32 additions differs.

#include "block_totals.h"

namespace {

// The matrix-vector products read the rows in order and prefetch the same
// place this many rows on: with the next row only, the prefetch came too
// late for memory (Q4_K_M generation on the Intel Xeon, two threads: 23.1-25.0
// tokens/s with one row, 28.1-28.7 with four, 24.8-25.0 with eight).
constexpr int64_t KQ_PREFETCH_ROWS = 4;

// Prefetch every cache line of a block of weights KQ_PREFETCH_ROWS rows on
// from x (a block is 84 to 210 bytes: one prefetch at its start left the
// rest to the hardware; Q4_K_M generation 29.8-30.1 -> 31.7-32.0 t/s).
template <class W> [[gnu::always_inline]] inline void kq_prefetch_ahead(const W * x, size_t lda) {
    const char * p = reinterpret_cast<const char *>(x) + KQ_PREFETCH_ROWS * lda;
    for (size_t off = 0; off < sizeof(W); off += 64) {
        _mm_prefetch(p + off, _MM_HINT_T0);
    }
}

inline float kq_half(uint16_t h) {
    return _cvtsh_ss(h);
}

inline __m256i kq_load(const void * p) {
    return _mm256_loadu_si256(static_cast<const __m256i *>(p));
}

inline float kq_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline int kq_hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s         = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s         = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

// One super-block of weights, decoded (Note [K-quant products]).
struct KDecoded {
    __m256i u[8];   // levels of values 32j .. 32j + 31 as unsigned bytes
    __m256i sc[8];  // int16 scales of groups 2j (lanes 0-7) and 2j + 1 (8-15)
    __m256i bias;   // int16 per group of 16: what meets the column's bsums
    float   d, dmin; // dmin unused where the decoder folds the bias
    __m256  dd;     // d in lanes 0-3, -dmin in 4-7 (the decoders that keep the bias)
};

// d in lanes 0-3 and -dmin in 4-7 from a block's fp16 d and dmin, stored
// side by side: one conversion, one permute and one sign flip.
template <class W> [[gnu::always_inline]] inline __m256 kq_dd_of(const W & x) {
    static_assert(offsetof(W, dmin) == offsetof(W, d) + sizeof(uint16_t));
    uint32_t both;
    std::memcpy(&both, &x.d, sizeof both);
    const __m256 v = _mm256_castps128_ps256(_mm_cvtph_ps(_mm_cvtsi32_si128(int(both)))); // d, dmin, 0, 0
    const __m256 dd = _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    return _mm256_xor_ps(dd, _mm256_setr_ps(0.0f, 0.0f, 0.0f, 0.0f, -0.0f, -0.0f, -0.0f, -0.0f));
}

// Scales of the 16 groups of 16 into the per-register form.
inline void kq_group_scales(const int16_t (&s)[16], KDecoded & o) {
    for (int j = 0; j < 8; ++j) {
        o.sc[j] = _mm256_set_m128i(_mm_set1_epi16(s[2 * j + 1]), _mm_set1_epi16(s[2 * j]));
    }
}

// acc + a block's product from its lane sums isum (scales times levels)
// and msum (mins times the column's sums), with dd = (d, d, d, d, -dmin,
// ...): four lanes of isum's halves added, beside four of msum's, then one
// conversion and one FMA with yd * dd.
inline __m256 kq_add_sums(__m256i isum, __m256i msum, float yd, __m256 dd, __m256 acc) {
    const __m256i both = _mm256_add_epi32(_mm256_permute2x128_si256(isum, msum, 0x20),
                                          _mm256_permute2x128_si256(isum, msum, 0x31));
    return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(yd), dd), _mm256_cvtepi32_ps(both), acc);
}

// acc + the block's product where the bias is an offset of the levels
// (Q6_K, Q3_K): msum taken off isum as integers, then one conversion and
// one FMA with yd * d. Every path of those types ends here, so their bits
// agree.
inline __m256 kq_add_folded(__m256i isum, __m256i msum, float yd, float d, __m256 acc) {
    return _mm256_fmadd_ps(_mm256_set1_ps(yd * d), _mm256_cvtepi32_ps(_mm256_sub_epi32(isum, msum)), acc);
}

// The same from the 16 scales in the int16 lanes of one register, with
// byte shuffles instead of a broadcast from memory per group: sc[j] takes
// lane 2j in its low half and lane 2j + 1 in its high half.
inline void kq_group_scales16(__m256i s16, KDecoded & o) {
    const __m256i lo = _mm256_permute4x64_epi64(s16, 0x44); // lanes 0-7 in both halves
    const __m256i hi = _mm256_permute4x64_epi64(s16, 0xee); // lanes 8-15 in both halves
    for (int j = 0; j < 8; ++j) {
        o.sc[j] = group_scales16(lo, hi, j);
    }
}

// 2-bit fields of a 64-byte array, as Q2_K and Q3_K pack them: values
// 32j .. 32j + 31 are bits 2 (j % 4) of bytes 32 (j / 4) ...
inline void kq_two_bits(const uint8_t * qs, KDecoded & o) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
        const __m256i q = kq_load(qs + 32 * h);
        o.u[4 * h + 0]  = _mm256_and_si256(q, m3);
        o.u[4 * h + 1]  = _mm256_and_si256(_mm256_srli_epi16(q, 2), m3);
        o.u[4 * h + 2]  = _mm256_and_si256(_mm256_srli_epi16(q, 4), m3);
        o.u[4 * h + 3]  = _mm256_and_si256(_mm256_srli_epi16(q, 6), m3);
    }
}

// Q4_K's nibbles: 32 bytes of qs give values 64k .. 64k + 31 (low) and
// 64k + 32 .. 64k + 63 (high).
inline void kq_nibbles(const uint8_t * qs, KDecoded & o) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int k = 0; k < 4; ++k) {
        const __m256i q = kq_load(qs + 32 * k);
        o.u[2 * k]      = _mm256_and_si256(q, m4);
        o.u[2 * k + 1]  = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    }
}

// Q4_K and Q5_K's six-bit scales and mins, one pair per group of 32, as
// scale_min_k4 reads them, four groups per 32-bit word: groups 0-3 take the
// low six bits of bytes 0-3 (scales) and 4-7 (mins); groups 4-7 the nibbles
// of bytes 8-11 (scales low, mins high) below the top two bits of bytes 0-3
// (scales) and 4-7 (mins).
// int16 lanes 0-7: the scales of groups 0-7; lanes 8-15: their mins.
inline __m256i kq_scales_mins16(const uint8_t * scales) {
    uint32_t w[3];
    std::memcpy(w, scales, sizeof(w));
    constexpr uint32_t six = 0x3f3f3f3f, four = 0x0f0f0f0f, two = 0x03030303;
    const uint32_t     sc_lo = w[0] & six;
    const uint32_t     sc_hi = (w[2] & four) | (((w[0] >> 6) & two) << 4);
    const uint32_t     mn_lo = w[1] & six;
    const uint32_t     mn_hi = ((w[2] >> 4) & four) | (((w[1] >> 6) & two) << 4);
    return _mm256_cvtepu8_epi16(_mm_setr_epi32(int(sc_lo), int(sc_hi), int(mn_lo), int(mn_hi)));
}

// Scale j of kq_scales_mins16's lanes in every int16 lane, from lo = those
// lanes' low 128 bits in both halves.
inline __m256i kq_scale_k4(__m256i lo, int j) {
    return _mm256_shuffle_epi8(lo, _mm256_set1_epi16(int16_t(0x0100 + 0x0202 * j)));
}

// Each min of kq_scales_mins16's lanes twice, for the two groups of 16 of
// its group of 32: what meets the column's bsums.
inline __m256i kq_min_bias_k4(__m256i s16) {
    const __m256i mins = _mm256_permute4x64_epi64(s16, 0xee);
    return _mm256_shuffle_epi8(mins, _mm256_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9, 8, 9, 10,
                                                      11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15));
}

inline void kq_scales_mins_k4(const uint8_t * scales, KDecoded & o) {
    const __m256i s16 = kq_scales_mins16(scales);
    const __m256i lo  = _mm256_permute4x64_epi64(s16, 0x44);
    for (int j = 0; j < 8; ++j) {
        o.sc[j] = kq_scale_k4(lo, j);
    }
    o.bias = kq_min_bias_k4(s16);
}

// The 6-bit scales and mins of blocks x[0] and, when two, x[1] (zero
// otherwise), as bytes: scales 0-7 then mins 0-7 of x[0] in the low half,
// of x[1] in the high one (kq_scales_mins16's values, unwidened). The
// twelve bytes are dwords w0 w1 w2: the low six bits of w0's bytes are
// scales 0-3, of w1's mins 0-3; scale 4 + j is w2's byte j's low nibble
// with w0's byte j's top two bits above it, min 4 + j its high nibble with
// w1's top bits. Two blocks at once, in vector registers: where the
// one-column product is bound by its arithmetic (a Zen 5 core runs it at
// the same speed from L2 and from memory), the scalar decode of one block
// and its moves into a vector register held it at 30.5 GB/s, this at 32-34.
inline __m256i q4k_scales_pair(const block_q4_K * x, bool two) {
    static_assert(sizeof(block_q4_K) >= offsetof(block_q4_K, scales) + 16, "16 bytes readable from scales");
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x[0].scales));
    const __m128i b = two ? _mm_loadu_si128(reinterpret_cast<const __m128i *>(x[1].scales)) : _mm_setzero_si128();
    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
    constexpr int six = 0x3f3f3f3f, four = 0x0f0f0f0f, top = 0x30303030;
    const __m256i p = _mm256_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); // w0 w2 w1 w2
    const __m256i q = _mm256_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)); // w0 w0 w1 w1
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(p, _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4)),
                                        _mm256_setr_epi32(six, four, six, four, six, four, six, four));
    // Each byte's top two bits moved to bits 4-5 of the same byte.
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(q, 2), _mm256_setr_epi32(0, top, 0, top, 0, top, 0, top));
    return _mm256_or_si256(lo, hi);
}

// Block i of a row of nb blocks, its scales and mins as bytes in both
// halves (q4k_scales_pair's), for a walk that takes a row's blocks in
// order from 0: an even block decodes itself and the next into pair, an
// odd one takes its half of it.
inline __m256i q4k_scales_at(const block_q4_K * x, int64_t i, int64_t nb, __m256i & pair) {
    if ((i & 1) == 0) {
        pair = q4k_scales_pair(x + i, i + 1 < nb);
        return _mm256_permute2x128_si256(pair, pair, 0x00);
    }
    return _mm256_permute2x128_si256(pair, pair, 0x11);
}

// Each min of a block's bytes from q4k_scales_at twice, as int16: what
// meets the column's bsums (kq_min_bias_k4's lanes).
inline __m256i q4k_min_bias_s8(__m256i s8) {
    return _mm256_shuffle_epi8(s8, _mm256_setr_epi8(8, -1, 8, -1, 9, -1, 9, -1, 10, -1, 10, -1, 11, -1, 11, -1, 12, -1, 12,
                                                    -1, 13, -1, 13, -1, 14, -1, 14, -1, 15, -1, 15, -1));
}

struct Q4KDecoder {
    static constexpr bool fold = false;
    static constexpr bool signed_levels = false;
    using W = block_q4_K;
    static void decode(const W & x, KDecoded & o) {
        kq_nibbles(x.qs, o);
        kq_scales_mins_k4(x.scales, o);
        o.d    = kq_half(x.d);
        o.dmin = kq_half(x.dmin);
        o.dd   = kq_dd_of(x);
    }
    // The block's lane sums with one column (kq_block_totals' t1 and t2),
    // a run of qs at a time as it is unpacked, from the block's scales and
    // mins as bytes (q4k_scales_at): a whole decoded block (16
    // registers of levels and scales) went through memory with the
    // column's registers beside it. The same integer totals.
    [[gnu::always_inline]] static void totals_plain(const W & x, const block_q8_K & y, __m256i s8, __m256i & t1,
                                                    __m256i & t2) {
        const __m256i m4   = _mm256_set1_epi8(0x0f);
        __m256i       isum = _mm256_setzero_si256();
        for (int k = 0; k < 4; ++k) {
            // Group g's scale in every int16 lane: byte g, then a zero byte.
            const __m256i sl = _mm256_shuffle_epi8(s8, _mm256_set1_epi16(int16_t(0xff00 | (2 * k))));
            const __m256i sh = _mm256_shuffle_epi8(s8, _mm256_set1_epi16(int16_t(0xff00 | (2 * k + 1))));
            const __m256i q  = kq_load(x.qs + 32 * k);
            const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q, m4), kq_load(y.qs + 64 * k)), sl);
            const __m256i ph = _mm256_madd_epi16(
                _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), kq_load(y.qs + 64 * k + 32)), sh);
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(pl, ph));
        }
        t1 = isum;
        t2 = _mm256_madd_epi16(kq_load(y.bsums), q4k_min_bias_s8(s8));
    }
};

struct Q5KDecoder {
    static constexpr bool fold = false;
    static constexpr bool signed_levels = false;
    static constexpr bool has_plain = true; // product_plain
    using W = block_q5_K;
    static void decode(const W & x, KDecoded & o) {
        kq_nibbles(x.qs, o);
        // Bit j of qh[l] is the fifth bit of value 32j + l.
        const __m256i h   = kq_load(x.qh);
        const __m256i one = _mm256_set1_epi8(1);
        for (int j = 0; j < 8; ++j) {
            const __m256i b = _mm256_and_si256(_mm256_srli_epi16(h, j), one);
            o.u[j]          = _mm256_or_si256(o.u[j], _mm256_slli_epi16(b, 4));
        }
        kq_scales_mins_k4(x.scales, o);
        o.d    = kq_half(x.d);
        o.dmin = kq_half(x.dmin);
        o.dd   = kq_dd_of(x);
    }
    // acc + the block's product with one column, each register of levels
    // meeting it as it is unpacked (as Q4KDecoder::totals_plain). The
    // integer sums are kq_block's, so the bits are.
    [[gnu::always_inline]] static __m256 product_plain(const W & x, const block_q8_K & y, __m256 acc) {
        const __m256i m4   = _mm256_set1_epi8(0x0f);
        const __m256i one  = _mm256_set1_epi8(1);
        const __m256i s16  = kq_scales_mins16(x.scales);
        const __m256i lo   = _mm256_permute4x64_epi64(s16, 0x44);
        const __m256i h    = kq_load(x.qh);
        __m256i       isum = _mm256_setzero_si256();
        for (int k = 0; k < 4; ++k) {
            const __m256i q = kq_load(x.qs + 32 * k);
            for (int e = 0; e < 2; ++e) {
                const int     j = 2 * k + e;
                const __m256i n = e == 0 ? _mm256_and_si256(q, m4) : _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                const __m256i u = _mm256_or_si256(n, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, j), one), 4));
                isum = _mm256_add_epi32(
                    isum, _mm256_madd_epi16(_mm256_maddubs_epi16(u, kq_load(y.qs + 32 * j)), kq_scale_k4(lo, j)));
            }
        }
        const __m256i msum = _mm256_madd_epi16(kq_load(y.bsums), kq_min_bias_k4(s16));
        return kq_add_sums(isum, msum, y.d, kq_dd_of(x), acc);
    }
};

struct Q6KDecoder {
    static constexpr bool fold = true;
    static constexpr bool signed_levels = false;
    using W = block_q6_K;
    // The levels of half h of a block: ql's 64 bytes hold the low nibbles of
    // values 0..127 of the half (bytes 0-31: values 0-31 low, 64-95 high;
    // bytes 32-63: 32-63 low, 96-127 high), qh's 32 bytes their two high
    // bits, two bits per quarter; u[q] the values 32q .. 32q + 31.
    [[gnu::always_inline]] static void half(const W & x, int h, __m256i (&u)[4]) {
        const __m256i m4 = _mm256_set1_epi8(0x0f);
        const __m256i m3 = _mm256_set1_epi8(0x30);
        const __m256i l0 = kq_load(x.ql + 64 * h);
        const __m256i l1 = kq_load(x.ql + 64 * h + 32);
        const __m256i hb = kq_load(x.qh + 32 * h);
        // Low nibbles, then the quarter's two high bits moved to bits 4-5.
        const __m256i n0 = _mm256_and_si256(l0, m4), n1 = _mm256_and_si256(l1, m4);
        const __m256i n2 = _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4);
        const __m256i n3 = _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4);
        u[0]             = _mm256_or_si256(n0, _mm256_and_si256(_mm256_slli_epi16(hb, 4), m3));
        u[1]             = _mm256_or_si256(n1, _mm256_and_si256(_mm256_slli_epi16(hb, 2), m3));
        u[2]             = _mm256_or_si256(n2, _mm256_and_si256(hb, m3));
        u[3]             = _mm256_or_si256(n3, _mm256_and_si256(_mm256_srli_epi16(hb, 2), m3));
    }
    static __m256i scales16(const W & x) {
        return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x.scales)));
    }
    static void decode(const W & x, KDecoded & o) {
        for (int h = 0; h < 2; ++h) {
            __m256i u[4];
            half(x, h, u);
            for (int q = 0; q < 4; ++q) {
                o.u[4 * h + q] = u[q];
            }
        }
        const __m256i s16 = scales16(x);
        kq_group_scales16(s16, o);
        o.bias = _mm256_slli_epi16(s16, 5); // 32 * scale
        o.d    = kq_half(x.d);
    }
    // The block's lane sums with one column, a half at a time as it is
    // decoded: isum of scale * level * y, msum of 32 * scale * the column's
    // sums of 16 (the block totals' t1 and t2, Note [Folded block totals]).
    // Decoded whole first, a block (16 registers of levels and scales) went
    // through memory with the column's registers beside it (in L2 on a Zen 5
    // core, AVX2 table: 25-28 GB/s, ggml's 32-33).
    [[gnu::always_inline]] static void sums_plain(const W & x, const block_q8_K & y, __m256i & isum, __m256i & msum) {
        const __m256i s16  = scales16(x);
        const __m256i lo   = _mm256_permute4x64_epi64(s16, 0x44); // lanes 0-7 in both halves
        const __m256i hi   = _mm256_permute4x64_epi64(s16, 0xee); // lanes 8-15 in both halves
        isum               = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            __m256i u[4];
            half(x, h, u);
            __m256i p[4];
            for (int q = 0; q < 4; ++q) {
                const int j = 4 * h + q;
                p[q] = _mm256_madd_epi16(_mm256_maddubs_epi16(u[q], kq_load(y.qs + 32 * j)), group_scales16(lo, hi, j));
            }
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3])));
        }
        msum = _mm256_madd_epi16(kq_load(y.bsums), _mm256_slli_epi16(s16, 5));
    }
};

// Q3_K's 16 six-bit scales, as scale_q3_K reads them, minus 32, in the
// int16 lanes of a register: the low four bits of scales j and j + 8 are
// the nibbles of byte j (j < 8), the top two bits of scale j bits
// 2 (j / 4) of byte 8 + j % 4; four bytes of each at once in 32-bit words.
inline __m256i q3k_scales16(const uint8_t * scales) {
    uint32_t w[3];
    std::memcpy(w, scales, sizeof(w));
    constexpr uint32_t four = 0x0f0f0f0f, two = 0x03030303;
    const __m128i      v    = _mm_setr_epi32(int((w[0] & four) | ((w[2] & two) << 4)),
                                             int((w[1] & four) | (((w[2] >> 2) & two) << 4)),
                                             int(((w[0] >> 4) & four) | (((w[2] >> 4) & two) << 4)),
                                             int(((w[1] >> 4) & four) | (((w[2] >> 6) & two) << 4)));
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(v, _mm_set1_epi8(32)));
}

struct Q3KDecoder {
    static constexpr bool fold = true;
    static constexpr bool signed_levels = false;
    static constexpr bool has_plain = true; // product_plain
    using W = block_q3_K;
    static void decode(const W & x, KDecoded & o) {
        kq_two_bits(x.qs, o);
        // Bit j of hmask[l] set: level u = low bits + 4, else low bits (and
        // the value is u - 4 either way): bit j moved to bit 2.
        const __m256i h    = kq_load(x.hmask);
        const __m256i four = _mm256_set1_epi8(4);
        o.u[0]             = _mm256_or_si256(o.u[0], _mm256_and_si256(_mm256_slli_epi16(h, 2), four));
        o.u[1]             = _mm256_or_si256(o.u[1], _mm256_and_si256(_mm256_slli_epi16(h, 1), four));
        o.u[2]             = _mm256_or_si256(o.u[2], _mm256_and_si256(h, four));
        o.u[3]             = _mm256_or_si256(o.u[3], _mm256_and_si256(_mm256_srli_epi16(h, 1), four));
        o.u[4]             = _mm256_or_si256(o.u[4], _mm256_and_si256(_mm256_srli_epi16(h, 2), four));
        o.u[5]             = _mm256_or_si256(o.u[5], _mm256_and_si256(_mm256_srli_epi16(h, 3), four));
        o.u[6]             = _mm256_or_si256(o.u[6], _mm256_and_si256(_mm256_srli_epi16(h, 4), four));
        o.u[7]             = _mm256_or_si256(o.u[7], _mm256_and_si256(_mm256_srli_epi16(h, 5), four));
        const __m256i s16  = q3k_scales16(x.scales);
        kq_group_scales16(s16, o);
        o.bias = _mm256_slli_epi16(s16, 2); // 4 * scale
        o.d    = kq_half(x.d);
    }
    // acc + the block's product with one column, each register of levels
    // meeting it as it is unpacked (as Q6KDecoder::sums_plain). The
    // integer sums are kq_block's, so the bits are.
    [[gnu::always_inline]] static __m256 product_plain(const W & x, const block_q8_K & y, __m256 acc) {
        const __m256i m3   = _mm256_set1_epi8(3);
        const __m256i four = _mm256_set1_epi8(4);
        const __m256i h    = kq_load(x.hmask);
        const __m256i s16  = q3k_scales16(x.scales);
        const __m256i lo   = _mm256_permute4x64_epi64(s16, 0x44); // lanes 0-7 in both halves
        const __m256i hi   = _mm256_permute4x64_epi64(s16, 0xee); // lanes 8-15 in both halves
        __m256i       isum = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
            const __m256i q  = kq_load(x.qs + 32 * (j / 4));
            const __m256i u2 = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (j % 4)), m3);
            // Bit j of hmask moved to bit 2 (shifts left by 2 - j for j < 2).
            const __m256i hj = j < 2 ? _mm256_slli_epi16(h, 2 - j) : _mm256_srli_epi16(h, j - 2);
            const __m256i u  = _mm256_or_si256(u2, _mm256_and_si256(hj, four));
            isum = _mm256_add_epi32(
                isum, _mm256_madd_epi16(_mm256_maddubs_epi16(u, kq_load(y.qs + 32 * j)), group_scales16(lo, hi, j)));
        }
        const __m256i msum = _mm256_madd_epi16(kq_load(y.bsums), _mm256_slli_epi16(s16, 2));
        return kq_add_folded(isum, msum, y.d, kq_half(x.d), acc);
    }
};

// Note [Q2_K levels times scales]
// Q2_K's levels (0..3) times its group scales (0..15) are at most 45, so
// the decoder stores the products as the unsigned levels and gives every
// group the scale 1: a maddubs pair is then at most 2 * 45 * 127 = 11430,
// two registers' pairs add in int16 without overflow, and one madd with
// ones widens both, 12 multiplies per super-block and column instead of
// 16. The integer sums, and so the bits, are those of the unscaled levels.
// A group's products come from a byte shuffle of the four values 0, s, 2s,
// 3s, which s * 0x03020100 puts in the bytes of an int32.
struct Q2KDecoder {
    static constexpr bool fold = false;
    static constexpr bool signed_levels = false;
    static constexpr bool prescaled = true;
    static constexpr bool has_plain = true; // product_plain
    using W = block_q2_K;
    static void decode(const W & x, KDecoded & o) {
        kq_two_bits(x.qs, o);
        const __m128i v    = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x.scales));
        const __m128i four = _mm_set1_epi8(0x0f);
        o.bias             = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), four));
        o.d                = kq_half(x.d);
        o.dmin             = kq_half(x.dmin);
        o.dd               = kq_dd_of(x);
        const __m128i sc   = _mm_and_si128(v, four);
        const __m256i mul  = _mm256_set1_epi32(0x03020100);
        const __m256i t[2] = {_mm256_mullo_epi32(_mm256_cvtepu8_epi32(sc), mul),
                              _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(sc, 8)), mul)};
        // The even groups of each half of t in the low lane, the odd ones in
        // the high lane: register j's groups 2j and 2j + 1 are then int32
        // lane j % 4 of their lanes of tt[j / 4], whose bytes 4 (j % 4) + u
        // the levels u pick.
        const __m256i spread = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
        const __m256i tt[2]  = {_mm256_permutevar8x32_epi32(t[0], spread), _mm256_permutevar8x32_epi32(t[1], spread)};
        for (int j = 0; j < 8; ++j) {
            const __m256i at = j % 4 == 0 ? o.u[j] : _mm256_add_epi8(o.u[j], _mm256_set1_epi8(char(4 * (j % 4))));
            o.u[j]           = _mm256_shuffle_epi8(tt[j / 4], at);
            o.sc[j]          = _mm256_set1_epi16(1);
        }
    }
    // acc + the block's product with one column, the levels as they are
    // with their group scales: the products above pay for themselves only
    // when several columns share them. Each register of levels meets the
    // column as it is decoded, so that the levels, their scales and the sum
    // are not all live at once (with a whole decoded block the accumulator
    // went through memory). The integer sums are kq_block's, so the bits
    // are.
    [[gnu::always_inline]] static __m256 product_plain(const W & x, const block_q8_K & y, __m256 acc) {
        const __m128i v    = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x.scales));
        const __m128i four = _mm_set1_epi8(0x0f);
        const __m256i s16  = _mm256_cvtepu8_epi16(_mm_and_si128(v, four));
        const __m256i lo   = _mm256_permute4x64_epi64(s16, 0x44); // lanes 0-7 in both halves
        const __m256i hi   = _mm256_permute4x64_epi64(s16, 0xee); // lanes 8-15 in both halves
        const __m256i m3   = _mm256_set1_epi8(3);
        __m256i       isum = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
            const __m256i u = _mm256_and_si256(_mm256_srli_epi16(kq_load(x.qs + 32 * (j / 4)), 2 * (j % 4)), m3);
            const __m256i p = _mm256_maddubs_epi16(u, kq_load(y.qs + 32 * j));
            isum            = _mm256_add_epi32(isum, _mm256_madd_epi16(p, group_scales16(lo, hi, j)));
        }
        const __m256i bias = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), four));
        const __m256i msum = _mm256_madd_epi16(kq_load(y.bsums), bias);
        return kq_add_sums(isum, msum, y.d, kq_dd_of(x), acc);
    }
};

// Whether a decoder's levels carry their group scales (Note [Q2_K levels
// times scales]).
template <class D, class = void> struct kq_prescaled : std::false_type {};
template <class D> struct kq_prescaled<D, std::void_t<decltype(D::prescaled)>> : std::bool_constant<D::prescaled> {};

// Whether a prescaled decoder has a plain form for products of one column.
template <class D, class = void> struct kq_has_plain : std::false_type {};
template <class D> struct kq_has_plain<D, std::void_t<decltype(D::has_plain)>> : std::bool_constant<D::has_plain> {};

#if !defined(LOOM_KQ_512)
// IQ4_XS's rows are decoded group by group as the columns meet them
// (iq4_xs_fused); the AVX-512 table has kernels of its own
// (avx512/iq4_xs.h).
struct IQ4XSDecoder {
    using W = block_iq4_xs;
    static constexpr bool signed_levels = true;
};
#endif

// acc + the product of a decoded super-block with a column's block; Fold:
// the bias is an offset of the levels, taken off as integers; Prescaled:
// the levels carry the scales (Note [Q2_K levels times scales]).
template <bool Fold, bool Prescaled = false>
inline __m256 kq_block(const KDecoded & w, const block_q8_K & y, __m256 acc) {
    __m256i isum = _mm256_setzero_si256();
    if constexpr (Prescaled) {
        const __m256i ones = _mm256_set1_epi16(1);
        for (int j = 0; j < 8; j += 2) {
            const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(w.u[j], kq_load(y.qs + 32 * j)),
                                               _mm256_maddubs_epi16(w.u[j + 1], kq_load(y.qs + 32 * j + 32)));
            isum            = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
        }
    } else {
        for (int j = 0; j < 8; ++j) {
            const __m256i p = _mm256_maddubs_epi16(w.u[j], kq_load(y.qs + 32 * j));
            isum            = _mm256_add_epi32(isum, _mm256_madd_epi16(p, w.sc[j]));
        }
    }
    const __m256i msum = _mm256_madd_epi16(kq_load(y.bsums), w.bias);
    if constexpr (Fold) {
        return kq_add_folded(isum, msum, y.d, w.d, acc);
    }
    return kq_add_sums(isum, msum, y.d, w.dd, acc);
}

#if defined(LOOM_KQ_512)
#include "kquants_512.h"
#endif

#include "kquant_totals.h"

#if !defined(LOOM_KQ_512)
// IQ4_XS on 256-bit registers, each group of 32 decoded and met by the
// columns at once: a super-block decoded whole (eight level registers and
// eight scale registers) does not fit the 16 registers beside the columns'
// sums. The levels meet the columns through the sign trick (maddubs of
// |level| with the column's bytes carrying the level's sign).
// Group j's 32 signed levels, in the order of the column's values.
inline __m256i iq4_xs_levels(const block_iq4_xs & x, int j) {
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(iq::kvalues_iq4nl)));
    const __m128i m4  = _mm_set1_epi8(0x0f);
    const __m128i q   = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x.qs + 16 * j));
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    return _mm256_shuffle_epi8(table, nib);
}

// Group j's scale, 6 bits less 32.
inline int iq4_xs_scale(const block_iq4_xs & x, int j) {
    return (((x.scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | (((x.scales_h >> (2 * j)) & 3) << 4)) - 32;
}

template <int C>
inline void iq4_xs_fused(const block_iq4_xs & x, const block_q8_K * const * bc, int64_t i, __m256 * acc) {
    __m256i isum[C];
    for (int c = 0; c < C; ++c) {
        isum[c] = _mm256_setzero_si256();
    }
    for (int j = 0; j < 8; ++j) {
        const __m256i u  = iq4_xs_levels(x, j);
        const __m256i au = _mm256_sign_epi8(u, u);
        const __m256i sc = _mm256_set1_epi16(int16_t(iq4_xs_scale(x, j)));
        for (int c = 0; c < C; ++c) {
            const __m256i y = kq_load(bc[c][i].qs + 32 * j);
            isum[c] = _mm256_add_epi32(isum[c], _mm256_madd_epi16(_mm256_maddubs_epi16(au, _mm256_sign_epi8(y, u)), sc));
        }
    }
    const float d = kq_half(x.d);
    for (int c = 0; c < C; ++c) {
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(bc[c][i].d * d), _mm256_cvtepi32_ps(isum[c]), acc[c]);
    }
}
#endif

// acc[c] + the product of block i of a row, x, with column c's block i.
template <class D, int C>
[[gnu::always_inline]] inline void kq_block_cols(const typename D::W & x, const block_q8_K * const * bc, int64_t i, __m256 * acc) {
#if defined(LOOM_KQ_512)
    KDecoded512 w5;
    kq_decode512<D>(x, w5);
    for (int c = 0; c < C; ++c) {
        acc[c] = kq_block512<D::fold>(w5, bc[c][i], acc[c]);
    }
#else
    KDecoded w;
    if constexpr (C == 1 && kq_has_plain<D>::value) {
        acc[0] = D::product_plain(x, bc[0][i], acc[0]);
        return;
    }
    D::decode(x, w);
    for (int c = 0; c < C; ++c) {
        acc[c] = kq_block<D::fold, kq_prescaled<D>::value>(w, bc[c][i], acc[c]);
    }
#endif
}

template <class D, int C>
void kq_gemv_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
                  size_t ldd) {
    using W = typename D::W;
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    for (int64_t r = 0; r < nrows; ++r) {
        const auto * x = reinterpret_cast<const W *>(a + size_t(r) * lda);
        __m256       acc[C];
        for (int c = 0; c < C; ++c) {
            acc[c] = _mm256_setzero_ps();
        }
        for (int64_t i = 0; i < nb; ++i) {
            kq_prefetch_ahead(x + i, lda);
#if !defined(LOOM_KQ_512)
            if constexpr (D::signed_levels) {
                iq4_xs_fused<C>(x[i], bc, i, acc);
            } else {
                kq_block_cols<D, C>(x[i], bc, i, acc);
            }
#else
            kq_block_cols<D, C>(x[i], bc, i, acc);
#endif
        }
        for (int c = 0; c < C; ++c) {
            dst[size_t(c) * ldd + size_t(r)] = kq_hsum(acc[c]);
        }
    }
}

// Totals: with exact block totals where the table adds them (Note [K-quant
// block totals]).
template <class D, bool Totals = false>
void kq_gemv(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
             float * dst, size_t ldd) {
    const int64_t nb = K / QK_K;
    const auto *  ac = static_cast<const char *>(a);
    const auto *  bc = static_cast<const char *>(b);
    with_gemv_cols(ncols, [&](auto cols) {
        // Note [K-quant block totals]: every Totals type on the AVX-512
        // table, Q4_K and Q6_K on the AVX2 one (Notes [Q4_K block totals on
        // 256-bit registers] and [Folded block totals]).
#if defined(LOOM_KQ_512)
        constexpr bool totals = Totals;
#else
        constexpr bool totals = Totals && (std::is_same_v<D, Q4KDecoder> || std::is_same_v<D, Q6KDecoder>);
#endif
        if constexpr (totals) {
            kq_totals_gemv_cols<D, decltype(cols)::value>(nb, ac, lda, nrows, bc, ldb, dst, ldd);
            return;
        }
        kq_gemv_cols<D, decltype(cols)::value>(nb, ac, lda, nrows, bc, ldb, dst, ldd);
    });
}

// Q8_K, as the core's reference quantizer computes it: the value of largest
// magnitude (the first of equal ones, NaNs skipped), iscale = -127 / it,
// each value times iscale rounded to nearest even (cvtps under the default
// rounding mode, as nearest_int), at most 127, then the sums of the groups.
void kq_quantize_q8_K(const float * x, block_q8_K * y, int64_t n) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < n / QK_K; ++i, x += QK_K) {
        __m256 amax = _mm256_setzero_ps();
        for (int k = 0; k < QK_K / 8; ++k) {
            // max_ps returns its second operand when either is NaN: NaNs
            // never enter amax.
            amax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + 8 * k), abs_mask), amax);
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m        = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m        = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float am = _mm_cvtss_f32(m);
        if (am == 0.0f) {
            std::memset(&y[i], 0, sizeof(y[i]));
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < QK_K; ++j) {
            if (std::fabs(x[j]) == am) {
                max = x[j];
                break;
            }
        }
        const float   iscale = -127.0f / max;
        const __m256  vs     = _mm256_set1_ps(iscale);
        const __m256i top    = _mm256_set1_epi32(127);
        const __m256i order  = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (int k = 0; k < QK_K / 32; ++k) {
            __m256i q[4];
            for (int v = 0; v < 4; ++v) {
                const __m256 v8 = _mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * k + 8 * v));
                q[v]            = _mm256_min_epi32(_mm256_cvtps_epi32(v8), top);
            }
            y[i].bsums[2 * k]     = int16_t(kq_hsum_i32(_mm256_add_epi32(q[0], q[1])));
            y[i].bsums[2 * k + 1] = int16_t(kq_hsum_i32(_mm256_add_epi32(q[2], q[3])));
            // packs work within 128-bit halves; the permutation puts the
            // four-byte groups back in order.
            const __m256i p16 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(y[i].qs + 32 * k), _mm256_permutevar8x32_epi32(p16, order));
        }
        y[i].d = 1.0f / iscale;
    }
}

} // namespace

void gemv_q2_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    kq_gemv<Q2KDecoder, true>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_q3_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    kq_gemv<Q3KDecoder>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    kq_gemv<Q4KDecoder, true>(K, a, lda, nrows, b, ldb, ncols, dst, ldd); // Note [K-quant block totals]
}
void gemv_q5_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    kq_gemv<Q5KDecoder, true>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    kq_gemv<Q6KDecoder, true>(K, a, lda, nrows, b, ldb, ncols, dst, ldd); // Note [Folded block totals]
}
#if !defined(LOOM_KQ_512)
void gemv_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd) {
    kq_gemv<IQ4XSDecoder>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
#endif
void quantize_row_q8_K(const float * x, block_q8_K * y, int64_t n) {
    kq_quantize_q8_K(x, y, n);
}
