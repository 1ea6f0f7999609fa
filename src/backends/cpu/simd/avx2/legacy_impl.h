// Matrix-vector products of the 32-value types Q4_1, Q5_0, Q5_1, IQ4_NL and
// MXFP4 on 256-bit integer instructions, a row at a time, written once for
// the AVX2 table (avx2/legacy_quants.cpp: there only for a matrix's last
// odd row, the others go through the two-row tiles of rows2_legacy.cpp) and
// the AVX-512 one (avx512/legacy_quants.cpp,
// the same code compiled for AVX-512: a block is one 256-bit register, so
// wider registers would only hold two blocks of one row, with nothing to
// gain over the extra registers and encodings the compiler already takes).
// Include as kquants_impl.h is included: inside the ISA's namespace, between
// its target_begin.h and target_end.h.
//
// Note [Legacy quant products]
// A weight block is decoded once per row and meets every column of the call:
//  - Q4_1 and Q5_1 (value = d * u + m, u = 0..15 or 0..31) against Q8_1
//    (value = dy * q, s = dy * sum q): maddubs takes u unsigned, the integer
//    sum is exact, and the block adds d dy isum + m s, as the portable dot
//    product does;
//  - Q5_0 (value = d * (u - 16)), IQ4_NL and MXFP4 (value = d * table[u],
//    the tables' signed bytes looked up with a byte shuffle; MXFP4's d is
//    its E8M0 scale halved, its table the doubled E2M1 values) against
//    Q8_0: the signed levels meet the column through the sign trick of
//    dot_i8 (|level| <= 127 and y never holds -128, so no pair saturates).
// Include after core/types/iq_tables.h (kvalues_iq4nl) and with
// core/types/other.h (e8m0_to_fp32_half) declared.

namespace {

inline float lq_half(uint16_t h) {
    return _cvtsh_ss(h);
}

inline float lq_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// The 32 nibbles of 16 bytes in value order: low nibbles are values 0..15,
// high ones 16..31.
inline __m256i lq_nibbles(const uint8_t * qs) {
    const __m128i q    = _mm_loadu_si128(reinterpret_cast<const __m128i *>(qs));
    const __m128i mask = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), mask), _mm_and_si128(q, mask));
}

// 0x10 in byte j where bit j of the four bytes qh (little-endian) is set.
inline __m256i lq_fifth_bits(const uint8_t * qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof(bits));
    // Byte j takes byte j / 8 of bits, then keeps its bit j % 8.
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)),
                                               _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                  0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

#include "core/types/fp4_values.inc"

// The 16 signed values of a lookup table in both halves of a register.
inline __m256i lq_table(const int8_t * values) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i *>(values)));
}

inline __m256i lq_load(const int8_t * p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
}

struct Q41Decoder {
    using W = block_q4_1;
    using Y = block_q8_1;
    static constexpr bool has_min = true;
    static __m256i levels(const W & x) { return lq_nibbles(x.qs); }
    static float   scale(const W & x) { return lq_half(x.d); }
};

struct Q51Decoder {
    using W = block_q5_1;
    using Y = block_q8_1;
    static constexpr bool has_min = true;
    static __m256i levels(const W & x) { return _mm256_or_si256(lq_nibbles(x.qs), lq_fifth_bits(x.qh)); }
    static float   scale(const W & x) { return lq_half(x.d); }
};

struct Q50Decoder {
    using W = block_q5_0;
    using Y = block_q8_0;
    static constexpr bool has_min = false;
    // Signed: -16..15.
    static __m256i levels(const W & x) {
        return _mm256_sub_epi8(_mm256_or_si256(lq_nibbles(x.qs), lq_fifth_bits(x.qh)), _mm256_set1_epi8(16));
    }
    static float scale(const W & x) { return lq_half(x.d); }
};

struct IQ4NLDecoder {
    using W = block_iq4_nl;
    using Y = block_q8_0;
    static constexpr bool has_min = false;
    static __m256i levels(const W & x) { return _mm256_shuffle_epi8(lq_table(iq::kvalues_iq4nl), lq_nibbles(x.qs)); }
    static float   scale(const W & x) { return lq_half(x.d); }
};

struct MXFP4Decoder {
    using W = block_mxfp4;
    using Y = block_q8_0;
    static constexpr bool has_min = false;
    static __m256i levels(const W & x) { return _mm256_shuffle_epi8(lq_table(kvalues_fp4), lq_nibbles(x.qs)); }
    static float   scale(const W & x) { return e8m0_to_fp32_half(x.e); }
};

// 8 int32 lanes summing to the block's integer product.
template <class D> inline __m256i lq_product(__m256i w, __m256i y) {
    __m256i p;
    if constexpr (D::has_min) {
        p = _mm256_maddubs_epi16(w, y);
    } else {
        p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
    }
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// Rows per pass for C columns. A row's sum is one chain of FMAs, one per
// block and column: with one column its latency, not the decoding, would
// bind, so one column takes four rows at once (four chains, four streams of
// weights) and two columns two. Every row still meets its blocks in order
// through the same operations, so its sum has the same bits in any pass.
template <int C> constexpr int lq_rows() {
    return C == 1 ? 4 : C == 2 ? 2 : 1;
}

// R rows from x0 (lda bytes apart) against C columns.
template <class D, int R, int C>
[[gnu::always_inline]] inline void lq_tile(int64_t nb, const char * x0, size_t lda, const typename D::Y * const * bc,
                                           float * dst, size_t ldd) {
    using W = typename D::W;
    const W * x[R];
    __m256    acc[R][C];
    float     mins[R][C];
    for (int r = 0; r < R; ++r) {
        x[r] = reinterpret_cast<const W *>(x0 + size_t(r) * lda);
        for (int c = 0; c < C; ++c) {
            acc[r][c]  = _mm256_setzero_ps();
            mins[r][c] = 0.0f;
        }
    }
    for (int64_t i = 0; i < nb; ++i) {
        if (i % 4 == 0) {
            for (int r = 0; r < R; ++r) {
                _mm_prefetch(reinterpret_cast<const char *>(x[r] + i) + R * lda, _MM_HINT_T0);
            }
        }
        __m256i w[R];
        float   d[R];
        for (int r = 0; r < R; ++r) {
            w[r] = D::levels(x[r][i]);
            d[r] = D::scale(x[r][i]);
        }
        for (int c = 0; c < C; ++c) {
            const auto &  y  = bc[c][i];
            const float   yd = lq_half(y.d);
            const __m256i yq = lq_load(y.qs);
            for (int r = 0; r < R; ++r) {
                const __m256i p = lq_product<D>(w[r], yq);
                acc[r][c]       = _mm256_fmadd_ps(_mm256_set1_ps(d[r] * yd), _mm256_cvtepi32_ps(p), acc[r][c]);
                if constexpr (D::has_min) {
                    mins[r][c] += lq_half(x[r][i].m) * lq_half(y.s);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            dst[size_t(c) * ldd + size_t(r)] = lq_hsum(acc[r][c]) + mins[r][c];
        }
    }
}

template <class D, int C>
void lq_gemv_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb, float * dst,
                  size_t ldd) {
    using Y = typename D::Y;
    const Y * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const Y *>(b + size_t(c) * ldb);
    }
    constexpr int R = lq_rows<C>();
    int64_t       r = 0;
    for (; r + R <= nrows; r += R) {
        lq_tile<D, R, C>(nb, a + size_t(r) * lda, lda, bc, dst + r, ldd);
    }
    for (; r < nrows; ++r) {
        lq_tile<D, 1, C>(nb, a + size_t(r) * lda, lda, bc, dst + r, ldd);
    }
}

template <class D>
void lq_gemv(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
             float * dst, size_t ldd) {
    const int64_t nb = K / 32;
    const auto *  ac = static_cast<const char *>(a);
    const auto *  bc = static_cast<const char *>(b);
    switch (ncols) {
        case 1: lq_gemv_cols<D, 1>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 2: lq_gemv_cols<D, 2>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 3: lq_gemv_cols<D, 3>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 4: lq_gemv_cols<D, 4>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 5: lq_gemv_cols<D, 5>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 6: lq_gemv_cols<D, 6>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
        case 7: lq_gemv_cols<D, 7>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
        default: lq_gemv_cols<D, 8>(nb, ac, lda, nrows, bc, ldb, dst, ldd); break;
    }
}

} // namespace

void gemv_q4_1(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    lq_gemv<Q41Decoder>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_q5_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    lq_gemv<Q50Decoder>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_q5_1(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    lq_gemv<Q51Decoder>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_iq4_nl(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd) {
    lq_gemv<IQ4NLDecoder>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
void gemv_mxfp4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd) {
    lq_gemv<MXFP4Decoder>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
