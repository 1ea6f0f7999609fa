// Q6_K and IQ4_XS rows decoded once on the AVX2 table (Note [Rows decoded
// once] in kernels/matmul_gemv.cpp; Q4_K's panels: q4k_panels.h). Included
// by avx2/kquants.cpp after kquants_impl.h, inside its namespace and target.
//
// Note [Q6_K stored rows]
// With many columns (the prompt's products) the 256-bit K-quant kernels
// decoded every super-block again for each group of eight columns, and
// held a whole decoded block (eight level and eight scale registers) beside
// the columns: more than AVX2's sixteen registers, so the levels were read
// back from the stack for every column. Here a row's blocks are decoded
// once per item into the thread's scratch (the levels as bytes, 0..63, its
// 16 signed scales as int16, d), and the product takes one level register
// and its scales at a time, met by four columns: the columns' int32 sums
// and these fit the registers. They meet the columns as kq_block's folded
// form does: the group scales of kq_group_scales16, the offset 32 * scale
// taken off the integer sums, one FMA by y.d * d into the row's f32 sum in
// block order; the bits of gemv_q6_K. The columns' blocks go eight at a
// time for up to 64 rows before the next eight, so they stay in the
// first-level cache across the rows (stored_rows_walk, as the i-quants'
// stored rows).

namespace {

// Note [IQ4_XS stored rows]
// IQ4_XS's levels are signed (-127 .. 113): they cannot take an offset
// into unsigned bytes without pairs overflowing maddubs, so its stored rows
// keep the signed levels and meet each column through the sign trick, as
// iq4_xs_fused does (maddubs of |level| with the column's bytes carrying
// the level's sign): |level| is taken once per register for every column,
// and each column pays one sign. The eight group scales (scale - 32) are
// stored as int16. Each block's integer sums are iq4_xs_fused's and go into
// the row's f32 sum by the same FMA with y.d * d, so the bits are those of
// gemv_iq4_xs; the gain is the decode done once per row instead of once per
// group of eight columns, and no levels spilled beside eight columns' sums.

enum class StoredK { q6_K, iq4_xs };

struct StoredKBlock {
    uint8_t u[QK_K];   // levels (Q6_K 0..63, IQ4_XS signed) in the order of the column's values
    int16_t sm[16];    // Q6_K: the 16 scales; IQ4_XS: 8 scales - 32
    float   d, dmin;   // dmin: 0 (unused)
    char    pad[DECODED_BLOCK_BYTES - QK_K - 32 - 2 * sizeof(float)];
};
static_assert(sizeof(StoredKBlock) == DECODED_BLOCK_BYTES);

template <StoredK T> struct StoredKType;
template <> struct StoredKType<StoredK::q6_K> { using D = Q6KDecoder; };
template <> struct StoredKType<StoredK::iq4_xs> { using D = IQ4XSDecoder; };

// One block of Q6_K (by its 256-bit decoder) or IQ4_XS as stored rows hold
// it.
template <StoredK T> inline void kq_stored_block(const typename StoredKType<T>::D::W & x, StoredKBlock & o) {
    using D = typename StoredKType<T>::D;
    if constexpr (T == StoredK::iq4_xs) {
        for (int j = 0; j < 8; ++j) {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o.u + 32 * j), iq4_xs_levels(x, j));
            o.sm[j]     = int16_t(iq4_xs_scale(x, j));
            o.sm[8 + j] = 0;
        }
        o.d    = kq_half(x.d);
        o.dmin = 0.0f;
    } else {
        KDecoded w;
        D::decode(x, w);
        for (int j = 0; j < 8; ++j) {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o.u + 32 * j), w.u[j]);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(o.sm),
                            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x.scales))));
        o.d    = w.d;
        o.dmin = 0.0f;
    }
}

// Rows of Q6_K or IQ4_XS.
template <StoredK T>
void kq_decode_rows(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    using W = typename StoredKType<T>::D::W;
    stored_rows_fill<W, StoredKBlock>(K, a, lda, nrows, out,
                                      [](const W & x, StoredKBlock & o) { kq_stored_block<T>(x, o); });
}

template <StoredK T, int C>
void kq_gemv_decoded_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb,
                           float * dst, size_t ldd) {
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    stored_rows_walk<C>(nb, nrows, dst, ldd, [&](int64_t row, int64_t i0, int64_t n, float (*acc)[8])
                                                 __attribute__((always_inline)) {
        const auto * x = reinterpret_cast<const StoredKBlock *>(a + size_t(row) * lda);
        for (int64_t i = i0; i < i0 + n; ++i) {
            const StoredKBlock & sb = x[i];
            __m256i              isum[C];
            for (int c = 0; c < C; ++c) {
                isum[c] = _mm256_setzero_si256();
            }
            if constexpr (T == StoredK::iq4_xs) {
                // Four columns at a time: eight columns' sums beside the
                // levels, their magnitudes and the scale spill registers.
                auto four = [&](auto c0) __attribute__((always_inline)) {
                    constexpr int c_0 = decltype(c0)::value;
                    constexpr int n_c = C - c_0 < 4 ? C - c_0 : 4;
                    // Not unrolled: GCC would load every level register
                    // ahead and spill the sums.
#pragma GCC unroll 1
                    for (int j = 0; j < 8; ++j) {
                        const __m256i sc = _mm256_set1_epi16(sb.sm[j]);
                        const __m256i l  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb.u + 32 * j));
                        const __m256i al = _mm256_abs_epi8(l);
                        for (int c = c_0; c < c_0 + n_c; ++c) {
                            const __m256i y = kq_load(bc[c][i].qs + 32 * j);
                            const __m256i p = _mm256_maddubs_epi16(al, _mm256_sign_epi8(y, l));
                            isum[c]         = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, sc));
                        }
                    }
                    for (int c = c_0; c < c_0 + n_c; ++c) {
                        _mm256_store_ps(acc[c], _mm256_fmadd_ps(_mm256_set1_ps(bc[c][i].d * sb.d),
                                                                _mm256_cvtepi32_ps(isum[c]), _mm256_load_ps(acc[c])));
                    }
                };
                four(std::integral_constant<int, 0>{});
                if constexpr (C > 4) {
                    four(std::integral_constant<int, 4>{});
                }
            } else {
                static_assert(T == StoredK::q6_K);
                const __m256i s16 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb.sm));
                const __m256i lo  = _mm256_permute4x64_epi64(s16, 0x44);
                const __m256i hi  = _mm256_permute4x64_epi64(s16, 0xee);
                // Four columns at a time, as IQ4_XS's: with eight, GCC
                // issues every column's maddubs first and spills a sum.
                auto four = [&](auto c0) __attribute__((always_inline)) {
                    constexpr int c_0 = decltype(c0)::value;
                    constexpr int n_c = C - c_0 < 4 ? C - c_0 : 4;
#pragma GCC unroll 1
                    for (int j = 0; j < 8; ++j) {
                        const __m256i sc = group_scales16(lo, hi, j);
                        const __m256i u  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb.u + 32 * j));
                        for (int c = c_0; c < c_0 + n_c; ++c) {
                            const __m256i p = _mm256_maddubs_epi16(u, kq_load(bc[c][i].qs + 32 * j));
                            isum[c]         = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, sc));
                        }
                    }
                };
                four(std::integral_constant<int, 0>{});
                if constexpr (C > 4) {
                    four(std::integral_constant<int, 4>{});
                }
                const __m256i bias = _mm256_slli_epi16(s16, 5); // 32 * scale
                for (int c = 0; c < C; ++c) {
                    const __m256i msum = _mm256_madd_epi16(kq_load(bc[c][i].bsums), bias);
                    _mm256_store_ps(acc[c], _mm256_fmadd_ps(_mm256_set1_ps(bc[c][i].d * sb.d),
                                                            _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[c], msum)),
                                                            _mm256_load_ps(acc[c])));
                }
            }
        }
    }, kq_hsum);
}

template <StoredK T>
void kq_gemv_decoded(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                     float * dst, size_t ldd) {
    const int64_t nb = K / QK_K;
    const auto *  ac = static_cast<const char *>(a);
    const auto *  bc = static_cast<const char *>(b);
    with_gemv_cols(ncols, [&](auto cols) {
        kq_gemv_decoded_cols<T, decltype(cols)::value>(nb, ac, lda, nrows, bc, ldb, dst, ldd);
    });
}

} // namespace

void decode_rows_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    kq_decode_rows<StoredK::q6_K>(K, a, lda, nrows, out);
}

void decode_rows_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    kq_decode_rows<StoredK::iq4_xs>(K, a, lda, nrows, out);
}

void gemv_decoded_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                       float * dst, size_t ldd) {
    kq_gemv_decoded<StoredK::q6_K>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_decoded_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                         float * dst, size_t ldd) {
    kq_gemv_decoded<StoredK::iq4_xs>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
