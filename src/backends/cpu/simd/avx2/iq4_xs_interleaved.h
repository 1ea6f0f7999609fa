// IQ4_XS rows interleaved by eight (Note [Interleaved IQ4_XS rows] in
// repack.h) against Q8_K columns on the AVX2 table: the gemv_repacked and
// decode_rows_repacked entries. Included by kquants.cpp inside
// loom::cpu::avx2, after kquants_impl.h and kquant_rows.h.
//
// Note [Interleaved IQ4_XS on 256-bit registers]
// gemv_iq4_xs (kquants_impl.h, iq4_xs_fused) keeps eight int32 lanes per
// block and column: lane l sums, over the block's eight groups of 32, the
// group's scale times its values 4l .. 4l + 3 (l < 4: low nibbles of
// bytes 4l .. 4l + 3 of the group's qs; l >= 4: the high nibbles of bytes
// 4 (l - 4) ..), and one FMA per block adds y.d * d times the lanes into
// the row's f32 sum, whose lanes iq_hsum's order adds at the end. Here a
// register is one word t of a group's qs (w = 4 j + t) of the eight rows:
// its low nibbles give every row's lane t, its high ones lane t + 4. The
// levels meet the column's four matching bytes, broadcast, through the
// sign trick (maddubs of |level| with the bytes carrying the level's
// sign), and madd with the rows' scales of the group (each row's in both
// int16 of its lane) gives each row's exact integer; over the eight groups
// these are the integers of lanes t and t + 4 of every row. Register l of
// the column's eight f32 sums holds lane l of the eight rows, each added
// by the same FMA with y.d * d as gemv_iq4_xs adds it, block after block,
// and the eight registers are added as iq_hsum adds lanes (l and l + 4,
// those pairs two apart, the last two): the bits of gemv_iq4_xs on ggml's
// layout, for eight rows without a sum across lanes.

namespace {

constexpr size_t IQ4R_SET = size_t(8) * sizeof(block_iq4_xs); // block i of a group of 8 rows

// The scales (ls - 32) of the eight groups of the eight rows of block p:
// sc[j], group j, row r's scale in both int16 of lane r.
inline void iq4r_scales16(const uint8_t * p, __m256i (&sc)[8]) {
    const __m256i lo = kq_load(p + 32); // scales_l, one row a lane
    const __m256i hi = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16)));
    const __m256i m4 = _mm256_set1_epi32(0x0f), m2 = _mm256_set1_epi32(3);
    for (int j = 0; j < 8; ++j) {
        const __m256i l4 = _mm256_and_si256(_mm256_srli_epi32(lo, 4 * j), m4);
        const __m256i h2 = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hi, 2 * j), m2), 4);
        const __m256i s  = _mm256_sub_epi32(_mm256_or_si256(l4, h2), _mm256_set1_epi32(32));
        sc[j]            = _mm256_blend_epi16(s, _mm256_slli_epi32(s, 16), 0xaa);
    }
}

inline __m256i iq4r_bcast4(const int8_t * p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

// dst rows r0 .. r0 + 7 (one group, at g) with C columns.
template <int C>
[[gnu::always_inline]] inline void iq4r_group(int64_t nb, const uint8_t * g, const block_q8_K * const * bc,
                                              float * dst, size_t ldd) {
    const __m256i table =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(iq::kvalues_iq4nl)));
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256        acc[C][8];
    for (int c = 0; c < C; ++c) {
        for (int l = 0; l < 8; ++l) {
            acc[c][l] = _mm256_setzero_ps();
        }
    }
    for (int64_t i = 0; i < nb; ++i) {
        const uint8_t * p = g + IQ4R_SET * size_t(i);
        prefetch_stream_ahead(p, IQ4R_SET); // Note [Reading ahead of interleaved rows]
        __m256i sc[8];
        iq4r_scales16(p, sc);
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
        __m256       s[C];
        for (int c = 0; c < C; ++c) {
            s[c] = _mm256_mul_ps(_mm256_set1_ps(bc[c][i].d), d);
        }
        for (int t = 0; t < 4; ++t) {
            __m256i ilo[C], ihi[C];
            for (int c = 0; c < C; ++c) {
                ilo[c] = _mm256_setzero_si256();
                ihi[c] = _mm256_setzero_si256();
            }
            for (int j = 0; j < 8; ++j) {
                const __m256i q  = kq_load(p + 64 + 32 * (4 * j + t));
                const __m256i vl = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
                const __m256i vh = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
                const __m256i al = _mm256_sign_epi8(vl, vl), ah = _mm256_sign_epi8(vh, vh);
                for (int c = 0; c < C; ++c) {
                    const int8_t * y  = bc[c][i].qs + 32 * j + 4 * t;
                    const __m256i  pl = _mm256_maddubs_epi16(al, _mm256_sign_epi8(iq4r_bcast4(y), vl));
                    const __m256i  ph = _mm256_maddubs_epi16(ah, _mm256_sign_epi8(iq4r_bcast4(y + 16), vh));
                    ilo[c]            = _mm256_add_epi32(ilo[c], _mm256_madd_epi16(pl, sc[j]));
                    ihi[c]            = _mm256_add_epi32(ihi[c], _mm256_madd_epi16(ph, sc[j]));
                }
            }
            for (int c = 0; c < C; ++c) {
                acc[c][t]     = _mm256_fmadd_ps(s[c], _mm256_cvtepi32_ps(ilo[c]), acc[c][t]);
                acc[c][t + 4] = _mm256_fmadd_ps(s[c], _mm256_cvtepi32_ps(ihi[c]), acc[c][t + 4]);
            }
        }
    }
    for (int c = 0; c < C; ++c) {
        _mm256_storeu_ps(dst + size_t(c) * ldd, rows8_add(acc[c]));
    }
}

} // namespace

#include "../iq4_xs_interleaved.inc"

// The stored rows decode_rows_iq4_xs writes (row r's block i at r * nb +
// i), each block of eight rows put back in ggml's layout first.
void decode_rows_iq4_xs_interleaved(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    const int64_t nb = K / QK_K;
    auto *        o  = static_cast<StoredIQ4XSBlock *>(out);
    for (int64_t r0 = 0; r0 < nrows; r0 += 8) {
        const auto * group = static_cast<const uint8_t *>(a) + size_t(r0) * lda;
        for (int64_t i = 0; i < nb; ++i) {
            block_iq4_xs x[8];
            iq4_xs_interleaved_unpack8(group + IQ4R_SET * size_t(i), reinterpret_cast<uint8_t *>(x));
            for (int64_t r = 0; r < 8; ++r) {
                iq4_xs_stored_block(x[r], o[(r0 + r) * nb + i]);
            }
        }
    }
}
