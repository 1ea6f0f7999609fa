// Q4_K and Q6_K rows decoded once on the AVX2 table (Note [Rows decoded
// once] in kernels/matmul_gemv.cpp). Included by avx2/kquants.cpp after
// kquants_impl.h, inside its namespace and target.
//
// Note [Q4_K stored rows]
// With many columns (the prompt's products) the 256-bit Q4_K kernel decoded
// every super-block again for each group of eight columns, and held a whole
// decoded block (eight level and eight scale registers) beside the columns:
// more than AVX2's sixteen registers, so the levels were read back from the
// stack for every column. Here a row's blocks are decoded once per item
// into the thread's scratch (the levels as bytes, the eight scales and
// eight mins as int16, d and dmin), and the product takes one level
// register and its scale at a time, met by every column: the columns' int32
// sums and these fit the registers. The columns' blocks go eight at a time
// for up to 64 rows before the next eight, so they stay in the first-level
// cache across the rows (stored_rows_walk, as the i-quants' stored rows). Each block's lane
// sums are the integers kq_block gives and go through the same
// kq_add_sums into the row's f32 sum in block order, so the results are the
// bits of gemv_q4_K. Q6_K's rows are stored the same way (levels 0..63, its
// 16 signed scales, d) and meet the columns as kq_block's folded form does:
// the group scales of kq_group_scales16, the offset 32 * scale taken off the
// integer sums, one FMA by y.d * d; the bits of gemv_q6_K.

namespace {

struct StoredKBlock {
    uint8_t u[QK_K];   // levels (Q4_K 0..15, Q6_K 0..63) in the order of the column's values
    int16_t sm[16];    // Q4_K: kq_scales_mins16 (8 scales, 8 mins); Q6_K: the 16 scales
    float   d, dmin;   // dmin: Q4_K only
    char    pad[DECODED_BLOCK_BYTES - QK_K - 32 - 2 * sizeof(float)];
};
static_assert(sizeof(StoredKBlock) == DECODED_BLOCK_BYTES);

// Rows of Q4_K (Q6 false) or Q6_K, decoded by the type's 256-bit decoder.
template <bool Q6>
void kq_decode_rows(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    using D          = std::conditional_t<Q6, Q6KDecoder, Q4KDecoder>;
    stored_rows_fill<typename D::W, StoredKBlock>(K, a, lda, nrows, out, [](const typename D::W & x, StoredKBlock & o) {
        KDecoded w;
        D::decode(x, w);
        for (int j = 0; j < 8; ++j) {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o.u + 32 * j), w.u[j]);
        }
        __m256i s16;
        if constexpr (Q6) {
            s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x.scales)));
        } else {
            s16 = kq_scales_mins16(x.scales);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(o.sm), s16);
        o.d    = w.d;
        o.dmin = Q6 ? 0.0f : w.dmin;
    });
}

// Q6: the rows are Q6_K's, else Q4_K's (kq_decode_rows).
template <bool Q6, int C>
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
            const StoredKBlock & sb  = x[i];
            const __m256i        s16 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb.sm));
            const __m256i        lo  = _mm256_permute4x64_epi64(s16, 0x44);
            const __m256i        hi  = _mm256_permute4x64_epi64(s16, 0xee);
            __m256i              isum[C];
            for (int c = 0; c < C; ++c) {
                isum[c] = _mm256_setzero_si256();
            }
            for (int j = 0; j < 8; ++j) {
                const __m256i sc = Q6 ? group_scales16(lo, hi, j) : kq_scale_k4(lo, j);
                const __m256i u  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb.u + 32 * j));
                for (int c = 0; c < C; ++c) {
                    const __m256i p = _mm256_maddubs_epi16(u, kq_load(bc[c][i].qs + 32 * j));
                    isum[c]         = _mm256_add_epi32(isum[c], _mm256_madd_epi16(p, sc));
                }
            }
            if constexpr (Q6) {
                const __m256i bias = _mm256_slli_epi16(s16, 5); // 32 * scale
                for (int c = 0; c < C; ++c) {
                    const __m256i msum = _mm256_madd_epi16(kq_load(bc[c][i].bsums), bias);
                    _mm256_store_ps(acc[c], _mm256_fmadd_ps(_mm256_set1_ps(bc[c][i].d * sb.d),
                                                            _mm256_cvtepi32_ps(_mm256_sub_epi32(isum[c], msum)),
                                                            _mm256_load_ps(acc[c])));
                }
            } else {
                const __m256i bias = kq_min_bias_k4(s16);
                const __m256  dd   = _mm256_setr_ps(sb.d, sb.d, sb.d, sb.d, -sb.dmin, -sb.dmin, -sb.dmin, -sb.dmin);
                for (int c = 0; c < C; ++c) {
                    const __m256i msum = _mm256_madd_epi16(kq_load(bc[c][i].bsums), bias);
                    _mm256_store_ps(acc[c], kq_add_sums(isum[c], msum, bc[c][i].d, dd, _mm256_load_ps(acc[c])));
                }
            }
        }
    }, kq_hsum);
}

template <bool Q6>
void kq_gemv_decoded(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                     float * dst, size_t ldd) {
    const int64_t nb = K / QK_K;
    const auto *  ac = static_cast<const char *>(a);
    const auto *  bc = static_cast<const char *>(b);
    with_gemv_cols(ncols, [&](auto cols) {
        kq_gemv_decoded_cols<Q6, decltype(cols)::value>(nb, ac, lda, nrows, bc, ldb, dst, ldd);
    });
}

} // namespace

void decode_rows_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    kq_decode_rows<false>(K, a, lda, nrows, out);
}

void decode_rows_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    kq_decode_rows<true>(K, a, lda, nrows, out);
}

void gemv_decoded_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                       float * dst, size_t ldd) {
    kq_gemv_decoded<false>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_decoded_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                       float * dst, size_t ldd) {
    kq_gemv_decoded<true>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
