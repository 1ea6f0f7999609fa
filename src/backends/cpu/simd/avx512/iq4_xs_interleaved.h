// IQ4_XS rows interleaved by eight (Note [Interleaved IQ4_XS rows] in
// repack.h) against Q8_K columns on the AVX-512 table: the gemv_repacked
// and decode_rows_repacked entries. avx512/iquants.cpp includes this file
// inside namespace loom::cpu::avx512 under the AVX-512 target, after
// iq4_xs.h and iquant_panels.h.
//
// Note [Interleaved IQ4_XS on 512-bit registers]
// A register of weights is two words of qs (words 2k and 2k + 1, the
// first in lanes 0-7, one row a lane); its low nibbles and its high ones,
// looked up as the levels + 128 (Note [IQ4_XS on 512-bit registers]), meet
// the column's two matching words of each, spread by one vpermd over the
// lanes, in one vpdpbusd each. A group of 32 values is two registers: four
// vpdpbusd give each lane the sum of 16 products, which a vpmulld by the
// rows' scales of the group (each row's twice: lanes r and r + 8) adds to
// the block's sums. What the offset 128 adds to a group, 128 * (the
// column's sum over the group), is taken off where the group's products
// start: -64 times it in every lane, whose two halves meet the same scale.
// The two halves of the sums then add into the eight rows' exact block
// totals (lane r: row r), and those meet the float scales as Note [Block
// totals] in avx2/iquants_impl.h has it, for eight rows at once: the rows'
// d times the column's in one register, one FMA into register i % 8 of the
// column's eight, then the eight registers added in iq_hsum's order (lanes
// l and l + 4, those pairs two apart, the last two). Every row's result is
// thus gemv_iq4_xs's on ggml's layout, bit for bit. The integer sums stay
// below 2^31: a lane's 16 products are at most 16 * 241 * 127, the offset
// 64 * 32 * 127, times |scale| <= 32, eight groups.

namespace {

constexpr size_t IQ4R_SET = size_t(8) * sizeof(block_iq4_xs); // block i of a group of 8 rows

// The scales (ls - 32) of group j of the eight rows, each row's in lanes r
// and r + 8, from scales_l (lo: each row's 32 bits, in both halves) and
// scales_h (hi: each row's 16 bits, zero-extended, in both halves).
inline __m512i iq4r_scales(__m512i lo, __m512i hi, int j) {
    // (The zero-masking forms: the plain ones pass GCC an undefined source,
    // see panel_common.h.)
    const __m512i l4 = _mm512_maskz_srli_epi32(k_panel_all, lo, unsigned(4 * j));
    // Bits 2j, 2j + 1 of scales_h to bits 4, 5; below them, bits that the
    // select takes from l4.
    const __m512i h2 =
        _mm512_maskz_srli_epi32(k_panel_all, _mm512_maskz_slli_epi32(k_panel_all, hi, unsigned(30 - 2 * j)), 26);
    // 0xca: bits of l4 where the mask is set, of h2 where it is not.
    const __m512i s  = _mm512_ternarylogic_epi32(_mm512_set1_epi32(0x0f), l4, h2, 0xca);
    return _mm512_sub_epi32(s, _mm512_set1_epi32(32));
}

// dst rows r0 .. r0 + 7 (one group) with C columns.
template <int C>
[[gnu::always_inline]] inline void iq4r_group(int64_t nb, const uint8_t * g, const block_q8_K * const * bc,
                                              float * dst, size_t ldd) {
    const __m128i t16   = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(iq::kvalues_iq4nl)),
                                        _mm_set1_epi8(char(0x80)));
    const __m512i table = _mm512_maskz_broadcast_i32x4(0xffff, t16);
    const __m512i m4    = _mm512_set1_epi8(0x0f);
    // The column's words 0, 1 (2, 3; 4, 5; 6, 7) of a group, each in its
    // half's eight lanes: the low nibbles' of qs words 4j, 4j + 1 (4j + 2,
    // 4j + 3), and the high ones' of the same.
    const __m512i pick01 = _mm512_mask_blend_epi32(0xff00, _mm512_set1_epi32(0), _mm512_set1_epi32(1));
    const __m512i pick23 = _mm512_add_epi32(pick01, _mm512_set1_epi32(2));
    const __m512i pick45 = _mm512_add_epi32(pick01, _mm512_set1_epi32(4));
    const __m512i pick67 = _mm512_add_epi32(pick01, _mm512_set1_epi32(6));
    __m256 f[C][8];
    for (int c = 0; c < C; ++c) {
        for (int l = 0; l < 8; ++l) {
            f[c][l] = _mm256_setzero_ps();
        }
    }
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t * p = g + IQ4R_SET * size_t(i);
        prefetch_stream_ahead(p, IQ4R_SET); // Note [Reading ahead of interleaved rows]
        // -64 times the column's sums of its eight groups of 32.
        alignas(32) int32_t off[C][8];
        for (int c = 0; c < C; ++c) {
            const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bc[c][i].bsums));
            _mm256_store_si256(reinterpret_cast<__m256i *>(off[c]), _mm256_madd_epi16(b, _mm256_set1_epi16(-64)));
        }
        const __m512i lo = _mm512_maskz_broadcast_i64x4(0xff, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p + 32)));
        const __m512i hi = _mm512_maskz_cvtepu16_epi32(
            0xffff, _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16))));
        __m512i isum[C];
        for (int c = 0; c < C; ++c) {
            isum[c] = _mm512_setzero_si512();
        }
        for (int j = 0; j < 8; ++j) {
            const __m512i q0  = _mm512_loadu_si512(p + 64 + 128 * j);
            const __m512i q1  = _mm512_loadu_si512(p + 128 + 128 * j);
            const __m512i l0  = _mm512_shuffle_epi8(table, _mm512_and_si512(q0, m4));
            const __m512i h0  = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_maskz_srli_epi16(~__mmask32(0), q0, 4), m4));
            const __m512i l1  = _mm512_shuffle_epi8(table, _mm512_and_si512(q1, m4));
            const __m512i h1  = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_maskz_srli_epi16(~__mmask32(0), q1, 4), m4));
            const __m512i sc  = iq4r_scales(lo, hi, j);
            for (int c = 0; c < C; ++c) {
                // The group's 32 bytes and the next 32 (at most the
                // block's bsums: inside the block).
                const __m512i y = _mm512_loadu_si512(bc[c][i].qs + 32 * j);
                __m512i       t = panel_bcast4(&off[c][j]);
                t               = _mm512_dpbusd_epi32(t, l0, _mm512_maskz_permutexvar_epi32(0xffff, pick01, y));
                t               = _mm512_dpbusd_epi32(t, h0, _mm512_maskz_permutexvar_epi32(0xffff, pick45, y));
                t               = _mm512_dpbusd_epi32(t, l1, _mm512_maskz_permutexvar_epi32(0xffff, pick23, y));
                t               = _mm512_dpbusd_epi32(t, h1, _mm512_maskz_permutexvar_epi32(0xffff, pick67, y));
                isum[c]         = _mm512_add_epi32(isum[c], _mm512_mullo_epi32(t, sc));
            }
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        for (int c = 0; c < C; ++c) {
            const __m256i tot = _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xff, isum[c], 0),
                                                 _mm512_maskz_extracti64x4_epi64(0xff, isum[c], 1));
            const __m256  s   = _mm256_mul_ps(_mm256_set1_ps(bc[c][i].d), d);
            f[c][i % 8]       = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(tot), f[c][i % 8]);
        }
    }
    for (int c = 0; c < C; ++c) {
        _mm256_storeu_ps(dst + size_t(c) * ldd, rows8_finish<1>(f[c], nb));
    }
}

} // namespace

#include "../iq4_xs_interleaved.inc"

// The panels decode_rows writes (panel_decode_rows<IQ4Levels>), each block
// of eight rows put back in ggml's layout first (the walk asks for a
// block's rows one after the other).
void decode_rows_iq4_xs_interleaved(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    const auto * ac = static_cast<const uint8_t *>(a);
    block_iq4_xs plain[8];
    int64_t      at_group = -1, at_block = -1;
    panel_decode_blocks<IQ4Levels>(K, nrows, out,
                                   [&](int64_t row, int64_t i, block_iq4_xs &) -> const block_iq4_xs & {
        if (row / 8 != at_group || i != at_block) {
            at_group = row / 8;
            at_block = i;
            iq4_xs_interleaved_unpack8(ac + size_t(at_group) * 8 * lda + IQ4R_SET * size_t(i),
                                       reinterpret_cast<uint8_t *>(plain));
        }
        return plain[row % 8];
    });
}
