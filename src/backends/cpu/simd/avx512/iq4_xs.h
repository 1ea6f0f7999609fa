// IQ4_XS against Q8_K on the AVX-512 table, one column at a time or many
// (Note [IQ4_XS on 512-bit registers]). avx512/iquants.cpp includes this
// file inside namespace loom::cpu::avx512 under the AVX-512 target, after
// avx2/iquants_impl.h (whose block totals it follows) and before
// iquant_panels.h (which decodes its rows into panels).
//
// Note [IQ4_XS on 512-bit registers]
// A level l (-127 .. 113, the table's entry for a nibble) is stored as the
// unsigned byte l + 128, four registers of 64 values. vpdpbusd sums four
// products of those bytes with the column's into an int32 without
// saturation (maddubs would saturate: 2 * 241 * 127 > 32767); each lane is
// multiplied by its group's scale (ls - 32) and the lanes added. What the
// offset added, 128 * scale * (the column's sum over the group), meets the
// column's bsums through madd with 128 * scale per group of 16 and is taken
// off as an integer: the eight lanes hold exact integers whose sum is the
// block's total. (Keeping |l| and the signs as a mask, with the column's
// bytes negated by a masked subtraction for maddubs and vpdpwssd, measured
// 1.45x slower with eight columns on Zen 5.) The totals then go into f32
// as the grid i-quants' do (Note [Block totals] in avx2/iquants_impl.h), so
// the VNNI panels, into which IQ4Levels decodes the rows for many columns,
// give the same bits.

namespace {

struct IQ4Decoded512 {
    __m512i u[4];  // levels + 128 of values 64j .. 64j + 63
    __m512i sc[4]; // int32 scales of groups 2j (lanes 0-7) and 2j + 1 (8-15)
    __m256i bias;  // int16 128 * scale per group of 16
    float   d;
};

// lo in the low half, hi in the high one (the masked forms, whose every
// operand is defined: GCC 12 warns on the others' undefined operands).
inline __m512i iq4_join(__m256i lo, __m256i hi) {
    const __m512i z = _mm512_setzero_si512();
    return _mm512_mask_inserti64x4(z, 0xff, _mm512_mask_inserti64x4(z, 0xff, z, lo, 0), hi, 1);
}

// The eight six-bit scales of a block less 32, in int32 lanes: lane g takes
// nibble g of scales_l and bit pair g of scales_h.
inline __m256i iq4_scales(const block_iq4_xs & x) {
    const __m256i lo4 = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(int(iq_u32(x.scales_l))), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
        _mm256_set1_epi32(0xf));
    const __m256i hi2 = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(x.scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm256_set1_epi32(3));
    return _mm256_sub_epi32(_mm256_or_si256(lo4, _mm256_slli_epi32(hi2, 4)), _mm256_set1_epi32(32));
}

inline void iq4_xs_decode512(const block_iq4_xs & x, IQ4Decoded512 & o) {
    const __m128i t16   = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(iq::kvalues_iq4nl)),
                                        _mm_set1_epi8(char(0x80)));
    const __m512i table = _mm512_maskz_broadcast_i32x4(0xffff, t16);
    const __m256i m4    = _mm256_set1_epi8(0x0f);
    for (int j = 0; j < 4; ++j) {
        // Groups 2j and 2j + 1: low nibbles of each 16 bytes, then high.
        const __m256i q  = iq_load(x.qs + 32 * j);
        const __m512i lh = iq4_join(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
        o.u[j]           = _mm512_shuffle_epi8(table, _mm512_maskz_shuffle_i64x2(0xff, lh, lh, _MM_SHUFFLE(3, 1, 2, 0)));
    }
    const __m256i ls = iq4_scales(x);
    const __m512i s  = iq4_join(ls, _mm256_setzero_si256());
    for (int j = 0; j < 4; ++j) {
        o.sc[j] = _mm512_maskz_permutexvar_epi32(0xffff, iq4_join(_mm256_set1_epi32(2 * j), _mm256_set1_epi32(2 * j + 1)), s);
    }
    // 128 * scale (|.| <= 4096) in the int16 lanes of its two groups of 16:
    // the low half of int32 lane k / 2.
    o.bias = _mm256_maskz_permutexvar_epi16(0xffff, _mm256_setr_epi16(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14),
                                            _mm256_slli_epi32(ls, 7));
    o.d    = _cvtsh_ss(x.d);
}

// The block's eight exact lane sums with a column's block.
inline __m256i iq4_block_sums512(const IQ4Decoded512 & w, const block_q8_K & y) {
    const __m512i zero = _mm512_setzero_si512();
    __m512i       isum = zero;
    for (int j = 0; j < 4; ++j) {
        const __m512i p = _mm512_dpbusd_epi32(zero, w.u[j], _mm512_loadu_si512(y.qs + 64 * j));
        isum            = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, w.sc[j]));
    }
    const __m256i s8   = _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xff, isum, 0),
                                          _mm512_maskz_extracti64x4_epi64(0xff, isum, 1));
    const __m256i msum = _mm256_madd_epi16(iq_load(y.bsums), w.bias);
    return _mm256_sub_epi32(s8, msum);
}

template <int C>
void iq4_xs_gemv_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
                      size_t ldd) {
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    for (int64_t r = 0; r < nrows; ++r) {
        const auto * x = reinterpret_cast<const block_iq4_xs *>(a + size_t(r) * lda);
        iq_row_totals<C>(nb, bc, [&](int64_t i, __m256i (*part)[8], int64_t slot) {
            // The same place in the next row, which follows in memory.
            _mm_prefetch(reinterpret_cast<const char *>(x + i) + lda, _MM_HINT_T0);
            IQ4Decoded512 w;
            iq4_xs_decode512(x[i], w);
            for (int c = 0; c < C; ++c) {
                part[c][slot] = iq4_block_sums512(w, bc[c][i]);
            }
            return w.d;
        }, dst + r, ldd);
    }
}

// IQ4_XS as signed levels and scales of groups of 16 (a group of 32 is two
// with one scale), for the panels (Note [Decoded panels]).
struct IQ4Levels {
    using W = block_iq4_xs;
    static void decode(const W & x, IDecoded & o) {
        const __m256i table =
            _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(iq::kvalues_iq4nl)));
        const __m128i m4 = _mm_set1_epi8(0x0f);
        alignas(32) int32_t ls[8];
        _mm256_store_si256(reinterpret_cast<__m256i *>(ls), iq4_scales(x));
        for (int j = 0; j < 8; ++j) {
            // Group j: 16 bytes, low nibbles values 0..15, high ones 16..31.
            const __m128i q   = _mm_loadu_si128(reinterpret_cast<const __m128i *>(x.qs + 16 * j));
            const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
            o.q[j]            = _mm256_shuffle_epi8(table, nib);
            o.sc[j]           = _mm256_set1_epi16(int16_t(ls[j]));
        }
        o.d = _cvtsh_ss(x.d);
    }
};

} // namespace

void gemv_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd) {
    const int64_t nb = K / QK_K;
    const auto *  ac = static_cast<const char *>(a);
    const auto *  bc = static_cast<const char *>(b);
    with_gemv_cols(ncols, [&](auto cols) { iq4_xs_gemv_cols<decltype(cols)::value>(nb, ac, lda, nrows, bc, ldb, dst, ldd); });
}
