// IQ4_XS rows decoded once on the AVX2 table (Note [Rows decoded once] in
// kernels/matmul_gemv.cpp; Q4_K's and Q6_K's panels: q4k_panels.h,
// q6k_panels.h). Included by avx2/kquants.cpp after kquants_impl.h, inside
// its namespace and target.

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
// The columns' blocks go eight at a time for up to 64 rows before the next
// eight, so they stay in the first-level cache across the rows
// (stored_rows_walk).

struct StoredIQ4XSBlock {
    int8_t  u[QK_K]; // signed levels in the order of the column's values
    int16_t sm[8];   // the eight scales - 32
    float   d;
    char    pad[DECODED_BLOCK_BYTES - QK_K - 16 - sizeof(float)];
};
static_assert(sizeof(StoredIQ4XSBlock) == DECODED_BLOCK_BYTES);

// One block as stored rows hold it.
inline void iq4_xs_stored_block(const block_iq4_xs & x, StoredIQ4XSBlock & o) {
    for (int j = 0; j < 8; ++j) {
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(o.u + 32 * j), iq4_xs_levels(x, j));
        o.sm[j] = int16_t(iq4_xs_scale(x, j));
    }
    o.d = kq_half(x.d);
}

template <int C>
void iq4_xs_stored_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb,
                        float * dst, size_t ldd) {
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    stored_rows_walk<C>(nb, nrows, dst, ldd, [&](int64_t row, int64_t i0, int64_t n, float (*acc)[8])
                                                 __attribute__((always_inline)) {
        const auto * x = reinterpret_cast<const StoredIQ4XSBlock *>(a + size_t(row) * lda);
        for (int64_t i = i0; i < i0 + n; ++i) {
            const StoredIQ4XSBlock & sb = x[i];
            // Four columns at a time: eight columns' sums beside the levels,
            // their magnitudes and the scale spill registers.
            auto four = [&](auto c0) __attribute__((always_inline)) {
                constexpr int c_0 = decltype(c0)::value;
                constexpr int n_c = C - c_0 < 4 ? C - c_0 : 4;
                __m256i       isum[n_c];
                for (int c = 0; c < n_c; ++c) {
                    isum[c] = _mm256_setzero_si256();
                }
                // Not unrolled: GCC would load every level register ahead
                // and spill the sums.
#pragma GCC unroll 1
                for (int j = 0; j < 8; ++j) {
                    const __m256i sc = _mm256_set1_epi16(sb.sm[j]);
                    const __m256i l  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb.u + 32 * j));
                    const __m256i al = _mm256_abs_epi8(l);
                    for (int c = 0; c < n_c; ++c) {
                        const __m256i y = kq_load(bc[c_0 + c][i].qs + 32 * j);
                        const __m256i p = _mm256_maddubs_epi16(al, _mm256_sign_epi8(y, l));
                        isum[c]         = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, sc));
                    }
                }
                for (int c = 0; c < n_c; ++c) {
                    float * s = acc[c_0 + c];
                    _mm256_store_ps(s, _mm256_fmadd_ps(_mm256_set1_ps(bc[c_0 + c][i].d * sb.d),
                                                       _mm256_cvtepi32_ps(isum[c]), _mm256_load_ps(s)));
                }
            };
            four(std::integral_constant<int, 0>{});
            if constexpr (C > 4) {
                four(std::integral_constant<int, 4>{});
            }
        }
    }, kq_hsum);
}

} // namespace

void decode_rows_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    stored_rows_fill<block_iq4_xs, StoredIQ4XSBlock>(K, a, lda, nrows, out, iq4_xs_stored_block);
}

void gemv_decoded_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                         float * dst, size_t ldd) {
    const int64_t nb = K / QK_K;
    const auto *  ac = static_cast<const char *>(a);
    const auto *  bc = static_cast<const char *>(b);
    with_gemv_cols(ncols, [&](auto cols) {
        iq4_xs_stored_cols<decltype(cols)::value>(nb, ac, lda, nrows, bc, ldb, dst, ldd);
    });
}
