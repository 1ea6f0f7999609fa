// The K-quant decoders and products on 512-bit registers (Note [K-quant
// products on 512-bit registers]), for the AVX-512 table only. Included by
// kquants_impl.h inside its anonymous namespace, after the 256-bit
// decoders, where avx512/kquants.cpp defines LOOM_KQ_512.
// Note [K-quant products on 512-bit registers]
// Where the table has AVX-512 BW and VNNI (avx512/kquants.cpp defines
// LOOM_KQ_512), a super-block is decoded straight into four 512-bit
// registers of levels (values 64j .. 64j + 63, the 256-bit decoder's u[2j]
// low and u[2j + 1] high) and four of scales, once per row (kq_decode512);
// every column then meets it with four maddubs and
// four vpdpwssd (the madd and the add in one) instead of eight of each, and
// the sixteen int32 sums are folded into eight before the bias, exactly as
// integers. Products with several columns, the prompt's, are bound by these
// instructions, not by the weights' bytes, so they run about twice as fast.
// The integer sums per column are those of the 256-bit code; the f32
// additions differ in order (the eight lanes hold other partial sums).
// IQ4_XS, whose levels are signed, has its own kernels on that table
// (avx512/iq4_xs.h, Note [IQ4_XS on 512-bit registers]).
struct KDecoded512 {
    __m512i u[4];
    __m512i sc[4];
    __m256i bias;
    float   d, dmin;
};

// lo in the low half, hi in the high one (the masked forms, whose every
// operand is defined: GCC 12 warns on the others' undefined operands).
inline __m512i kq_join(__m256i lo, __m256i hi) {
    const __m512i z = _mm512_setzero_si512();
    return _mm512_mask_inserti64x4(z, 0xff, _mm512_mask_inserti64x4(z, 0xff, z, lo, 0), hi, 1);
}

template <bool Fold> inline __m256 kq_block512(const KDecoded512 & w, const block_q8_K & y, __m256 acc) {
    __m512i isum = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
        const __m512i q = _mm512_loadu_si512(y.qs + 64 * j);
        isum            = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(w.u[j], q), w.sc[j]);
    }
    const __m256i s8   = _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xff, isum, 0),
                                          _mm512_maskz_extracti64x4_epi64(0xff, isum, 1));
    const __m256i msum = _mm256_madd_epi16(kq_load(y.bsums), w.bias);
    if constexpr (Fold) {
        return kq_add_folded(s8, msum, y.d, w.d, acc);
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y.d * w.d), _mm256_cvtepi32_ps(s8), acc);
    return _mm256_fnmadd_ps(_mm256_set1_ps(y.d * w.dmin), _mm256_cvtepi32_ps(msum), acc);
}

// Note [K-quant block totals]
// Q2_K, Q4_K and Q5_K on this table add exact block totals, as the i-quants
// do (Note [Block totals] in avx2/iquants_impl.h), so that Q4_K's rows
// decoded into VNNI panels (avx512/kquant_panels.h) give the same bits, and
// so that the f32 work of eight blocks is done at once: block i's two exact
// integer totals with a column, T1 = sum of scale * level * y and T2 = sum of
// min * (the column's sums of 16), go, eight blocks at a time, into lane
// i % 8 of an f32 sum as  f = fma(y.d * d, T1, f)  then  f = fnmadd(y.d *
// dmin, T2, f)  (blocks past the last add 0 * 0 both times), and the lanes
// are added in kq_hsum's order. T1 is at most 256 * 31 * 63 * 127 (Q5_K) and
// T2 8 * 63 * 32 * 127 in magnitude: exact in int32; every path converts the
// same totals to f32, so they round alike.

// A decoded super-block's lane sums with a column's block: T1's in isum,
// T2's in msum (eight int32 lanes each).
inline void kq_block512_sums(const KDecoded512 & w, const block_q8_K & y, __m256i & isum, __m256i & msum) {
    __m512i s = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(w.u[j], _mm512_loadu_si512(y.qs + 64 * j)), w.sc[j]);
    }
    isum = _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xff, s, 0), _mm512_maskz_extracti64x4_epi64(0xff, s, 1));
    msum = _mm256_madd_epi16(kq_load(y.bsums), w.bias);
}

// Constant word indices and shift counts of the 512-bit decoders, loaded
// from memory (GCC does not fold the masked inserts and blends that would
// build them, and rebuilt them for every block).
struct KqPick512 {
    alignas(64) int16_t q4k[4][32];   // [register] lanes 0-15: 2j; 16-31: 2j + 1
    alignas(64) int16_t q6k[4][32];   // [register] lanes 8k .. 8k + 7: 4j + k
    alignas(64) int16_t q6k_up[32];   // 4 in the low half, 2 in the high one
    alignas(64) int16_t q6k_down[32]; // 0 in the low half, 2 in the high one
    alignas(64) uint8_t bit[4][64];   // [register j] 1 << 2j in the low half, 1 << (2j + 1) in the high one
    alignas(64) int16_t two_bits[2][32]; // [j % 2] 4 (j % 2) in the low half, 4 (j % 2) + 2 in the high one
};
constexpr KqPick512 kq_pick512_make() {
    KqPick512 p{};
    for (int j = 0; j < 4; ++j) {
        for (int l = 0; l < 32; ++l) {
            p.q4k[j][l] = int16_t(2 * j + l / 16);
            p.q6k[j][l] = int16_t(4 * j + l / 8);
        }
    }
    for (int l = 0; l < 32; ++l) {
        p.q6k_up[l]   = int16_t(l < 16 ? 4 : 2);
        p.q6k_down[l] = int16_t(l < 16 ? 0 : 2);
        for (int s = 0; s < 2; ++s) {
            p.two_bits[s][l] = int16_t(4 * s + (l < 16 ? 0 : 2));
        }
    }
    for (int j = 0; j < 4; ++j) {
        for (int l = 0; l < 64; ++l) {
            p.bit[j][l] = uint8_t(1u << (2 * j + (l < 32 ? 0 : 1)));
        }
    }
    return p;
}
inline constexpr KqPick512 kq_pick512 = kq_pick512_make();

// The scales of 16 groups of 16 values (int16 lanes of s16) in the 512-bit
// form: register j's lanes 8k .. 8k + 7 take group 4j + k's.
inline void kq_scales16_512(__m256i s16, KDecoded512 & o) {
    const __m512i s = kq_join(s16, _mm256_setzero_si256());
    for (int j = 0; j < 4; ++j) {
        o.sc[j] = _mm512_maskz_permutexvar_epi16(0xffffffffu, _mm512_load_si512(kq_pick512.q6k[j]), s);
    }
}

// Q4_K decoded straight into the 512-bit form (u[j] the 256-bit decoder's
// u[2j] and u[2j + 1] joined, sc[j] likewise) for the products with few columns, where decoding weighs as much
// as the product: one 512-bit load gives two 32-byte runs of qs, whose low
// and high nibbles are values 128h + (0..31 | 64..95) and 128h + (32..63 |
// 96..127), put in order by two 128-bit-lane shuffles; the scales and mins
// are unpacked in vector lanes, and each register's two group scales come
// from one word permute of them.
// Q5_K's blocks share this layout but for qh (k4_decode512 takes the
// fields).
inline void k4_decode512(const uint8_t * qs, const uint8_t * scales, KDecoded512 & o) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int h = 0; h < 2; ++h) {
        const __m512i q  = _mm512_loadu_si512(qs + 64 * h);
        const __m512i lo = _mm512_and_si512(q, m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        o.u[2 * h]       = _mm512_maskz_shuffle_i64x2(0xff, lo, hi, 0x44);
        o.u[2 * h + 1]   = _mm512_maskz_shuffle_i64x2(0xff, lo, hi, 0xee);
    }
    // kq_scales_mins_k4's words in vector lanes: w0..w2 are the 12 bytes
    // of scales (the load's last four bytes, qs's first, are not used).
    const __m128i v    = _mm_loadu_si128(reinterpret_cast<const __m128i *>(scales));
    const __m128i lo6  = _mm_and_si128(v, _mm_set1_epi8(0x3f)); // lanes 0, 1: sc_lo, mn_lo
    const __m128i w2   = _mm_srlv_epi32(_mm_shuffle_epi32(v, 0xaa), _mm_setr_epi32(0, 4, 0, 0)); // w2, w2 >> 4
    const __m128i top2 = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(v, 6), _mm_set1_epi8(0x03)), 4);
    const __m128i hi   = _mm_or_si128(_mm_and_si128(w2, _mm_set1_epi8(0x0f)), top2); // lanes 0, 1: sc_hi, mn_hi
    // int16 lanes 0-7: the scales of groups 0-7; lanes 8-15: their mins.
    const __m256i s16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi32(lo6, hi));
    const __m512i s   = kq_join(s16, _mm256_setzero_si256());
    for (int j = 0; j < 4; ++j) {
        // Lanes 0-15: group 2j's scale; 16-31: group 2j + 1's.
        o.sc[j] = _mm512_maskz_permutexvar_epi16(0xffffffffu, _mm512_load_si512(kq_pick512.q4k[j]), s);
    }
    const __m256i mins = _mm256_permute4x64_epi64(s16, 0xee);
    o.bias             = _mm256_shuffle_epi8(mins, _mm256_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9,
                                                                    8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15,
                                                                    14, 15));
}

inline void q4k_decode512(const block_q4_K & x, KDecoded512 & o) {
    k4_decode512(x.qs, x.scales, o);
    o.d    = kq_half(x.d);
    o.dmin = kq_half(x.dmin);
}

// add added to the levels of u[j] where the bits of h (32 bytes: bit j of
// byte l for value 32j + l, Q5_K's qh and Q3_K's hmask) are set: register
// j's low half meets bit 2j of the bytes, its high half bit 2j + 1.
inline void kq_high_bits512(const uint8_t * h, char add, KDecoded512 & o) {
    const __m256i q  = kq_load(h);
    const __m512i hb = kq_join(q, q);
    for (int j = 0; j < 4; ++j) {
        const __mmask64 set = _mm512_test_epi8_mask(hb, _mm512_load_si512(kq_pick512.bit[j]));
        o.u[j]              = _mm512_mask_add_epi8(o.u[j], set, o.u[j], _mm512_set1_epi8(add));
    }
}

inline void q5k_decode512(const block_q5_K & x, KDecoded512 & o) {
    k4_decode512(x.qs, x.scales, o);
    kq_high_bits512(x.qh, 16, o);
    o.d    = kq_half(x.d);
    o.dmin = kq_half(x.dmin);
}

// The 2-bit fields of Q2_K and Q3_K (kq_two_bits' order): register j
// holds bytes 32 (j / 2) .. + 31 of qs in both halves, shifted by 4 (j % 2)
// in the low half and 4 (j % 2) + 2 in the high one.
inline void kq_two_bits512(const uint8_t * qs, KDecoded512 & o) {
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
        const __m256i q  = kq_load(qs + 32 * h);
        const __m512i qq = kq_join(q, q);
        for (int s = 0; s < 2; ++s) {
            o.u[2 * h + s] = _mm512_and_si512(_mm512_srlv_epi16(qq, _mm512_load_si512(kq_pick512.two_bits[s])), m3);
        }
    }
}

// Q2_K with the levels as they are and the group scales beside them, as
// the other K-quants. The levels carrying their scales (Note [Q2_K levels
// times scales], the 256-bit decoder's form) saved nothing measurable on
// 512-bit registers (test-backend-ops, n = 2 / 4 / 8: 64-83 / 95 / 91-102
// GFLOP/s against 79-83 / 87-93 / 97-101) and cost byte shuffles and a
// multiply per block. The integer sums are the same.
inline void q2k_decode512(const block_q2_K & x, KDecoded512 & o) {
    kq_two_bits512(x.qs, o);
    const __m128i v    = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x.scales));
    const __m128i four = _mm_set1_epi8(0x0f);
    kq_scales16_512(_mm256_cvtepu8_epi16(_mm_and_si128(v, four)), o);
    o.bias = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(v, 4), four));
    o.d    = kq_half(x.d);
    o.dmin = kq_half(x.dmin);
}

// Q3_K (Q3KDecoder's bits): the levels u = low bits + 4 where hmask's bit
// is set; the 16 six-bit scales (scale_q3_K) unpacked from 64- and 32-bit
// words: low nibbles from bytes 0-7 (groups 0-7 the low, 8-15 the high
// nibbles), the top two bits from bytes 8-11 (groups 4k .. 4k + 3: bits
// 2k of those four bytes).
inline void q3k_decode512(const block_q3_K & x, KDecoded512 & o) {
    kq_two_bits512(x.qs, o);
    kq_high_bits512(x.hmask, 4, o);
    uint64_t w;
    uint32_t t;
    std::memcpy(&w, x.scales, sizeof w);
    std::memcpy(&t, x.scales + 8, sizeof t);
    constexpr uint64_t four = 0x0f0f0f0f0f0f0f0full;
    constexpr uint32_t two  = 0x03030303u;
    const uint64_t top_lo = uint64_t(t & two) | uint64_t((t >> 2) & two) << 32;
    const uint64_t top_hi = uint64_t((t >> 4) & two) | uint64_t((t >> 6) & two) << 32;
    const __m128i  b      = _mm_set_epi64x(int64_t(((w >> 4) & four) | top_hi << 4), int64_t((w & four) | top_lo << 4));
    const __m256i  s16    = _mm256_sub_epi16(_mm256_cvtepu8_epi16(b), _mm256_set1_epi16(32));
    kq_scales16_512(s16, o);
    o.bias = _mm256_slli_epi16(s16, 2); // 4 * scale
    o.d    = kq_half(x.d);
    o.dmin = 0.0f;
}

// Q6_K the same way (Q6KDecoder's bits): one 512-bit load gives ql's two
// runs of 32 bytes of a half, whose low nibbles are values 128h + (0..31 |
// 32..63) and high nibbles 128h + (64..95 | 96..127); qh's 32 bytes of the
// half, in both 256-bit halves, give their two high bits through per-half
// shifts (4 and 2 up for the low nibbles, 0 and 2 down for the high ones).
inline void q6k_decode512(const block_q6_K & x, KDecoded512 & o) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m3 = _mm512_set1_epi8(0x30);
    const __m512i up = _mm512_load_si512(kq_pick512.q6k_up);
    const __m512i dn = _mm512_load_si512(kq_pick512.q6k_down);
    for (int h = 0; h < 2; ++h) {
        const __m512i l  = _mm512_loadu_si512(x.ql + 64 * h);
        const __m256i q  = kq_load(x.qh + 32 * h);
        const __m512i hb = kq_join(q, q);
        o.u[2 * h]       = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_sllv_epi16(hb, up), m3));
        o.u[2 * h + 1]   = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                           _mm512_and_si512(_mm512_srlv_epi16(hb, dn), m3));
    }
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x.scales)));
    kq_scales16_512(s16, o);
    o.bias = _mm256_slli_epi16(s16, 5); // 32 * scale
    o.d    = kq_half(x.d);
    o.dmin = 0.0f;
}

// A block of the row decoded into the 512-bit form, the levels and scales
// of the type's 256-bit decoder joined in pairs of registers.
template <class D> inline void kq_decode512(const typename D::W & x, KDecoded512 & o) {
    if constexpr (std::is_same_v<D, Q4KDecoder>) {
        q4k_decode512(x, o);
    } else if constexpr (std::is_same_v<D, Q5KDecoder>) {
        q5k_decode512(x, o);
    } else if constexpr (std::is_same_v<D, Q6KDecoder>) {
        q6k_decode512(x, o);
    } else if constexpr (std::is_same_v<D, Q2KDecoder>) {
        q2k_decode512(x, o);
    } else {
        static_assert(std::is_same_v<D, Q3KDecoder>, "a K-quant decoder");
        q3k_decode512(x, o);
    }
}
