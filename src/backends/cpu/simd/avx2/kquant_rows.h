// Q4_K, Q6_K and IQ4_XS rows decoded once on the AVX2 table (Note [Rows decoded
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

enum class StoredK { q4_K, q6_K, iq4_xs };

struct StoredKBlock {
    uint8_t u[QK_K];   // levels (Q4_K 0..15, Q6_K 0..63, IQ4_XS signed) in the order of the column's values
    int16_t sm[16];    // Q4_K: kq_scales_mins16 (8 scales, 8 mins); Q6_K: the 16 scales; IQ4_XS: 8 scales - 32
    float   d, dmin;   // dmin: Q4_K only
    char    pad[DECODED_BLOCK_BYTES - QK_K - 32 - 2 * sizeof(float)];
};
static_assert(sizeof(StoredKBlock) == DECODED_BLOCK_BYTES);

template <StoredK T> struct StoredKType;
template <> struct StoredKType<StoredK::q4_K> { using D = Q4KDecoder; };
template <> struct StoredKType<StoredK::q6_K> { using D = Q6KDecoder; };
template <> struct StoredKType<StoredK::iq4_xs> { using D = IQ4XSDecoder; };

// Note [Q4_K stored rows by dwords]
// Q4_K's stored levels (0..15) and, once per step of eight blocks, the
// columns' bytes are laid out by dwords: register r holds dword r of each of
// the block's eight groups of 32 (bytes 4g .. 4g + 3: values 32g + 4r ..
// 32g + 4r + 3), the transpose of the 8 x 8 dwords of the block. Every
// int16 lane of a maddubs then stays within one group in all eight
// registers, so the eight products add up as int16 (each lane 16 values:
// at most 16 * 15 * 127 = 30480) and one madd with the group scales (each
// twice) gives the block's sums: per register and column one maddubs and
// one add instead of a maddubs, a madd and an add. The totals are exact
// integers whatever their lanes, and go through Note [Q4_K block totals on
// 256-bit registers] as the one-pass kernel's do: the same bits.

// The 8 x 8 transpose of the dwords of in[0..7] (in may be out).
inline void kq_by_dwords(const __m256i * in, __m256i * out) {
    __m256i t[8], u[8];
    for (int k = 0; k < 4; ++k) {
        t[2 * k]     = _mm256_unpacklo_epi32(in[2 * k], in[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_epi32(in[2 * k], in[2 * k + 1]);
    }
    for (int h = 0; h < 2; ++h) {
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    for (int r = 0; r < 4; ++r) {
        out[r]     = _mm256_permute2x128_si256(u[r], u[4 + r], 0x20);
        out[r + 4] = _mm256_permute2x128_si256(u[r], u[4 + r], 0x31);
    }
}

// One block of Q4_K, Q6_K (by the type's 256-bit decoder) or IQ4_XS as
// stored rows hold it.
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
        if constexpr (T == StoredK::q4_K) {
            kq_by_dwords(w.u, w.u); // Note [Q4_K stored rows by dwords]
        }
        for (int j = 0; j < 8; ++j) {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(o.u + 32 * j), w.u[j]);
        }
        __m256i s16;
        if constexpr (T == StoredK::q6_K) {
            s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(x.scales)));
        } else {
            s16 = kq_scales_mins16(x.scales);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(o.sm), s16);
        o.d    = w.d;
        o.dmin = T == StoredK::q6_K ? 0.0f : w.dmin;
    }
}

// Rows of Q4_K, Q6_K or IQ4_XS.
template <StoredK T>
void kq_decode_rows(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    using W = typename StoredKType<T>::D::W;
    stored_rows_fill<W, StoredKBlock>(K, a, lda, nrows, out,
                                      [](const W & x, StoredKBlock & o) { kq_stored_block<T>(x, o); });
}

// Q4_K's stored rows against C columns (Note [Q4_K stored rows by dwords]):
// stored_rows_walk, each step's column blocks laid out by dwords once for
// all the rows of the chunk.
template <int C>
void q4k_gemv_decoded_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb,
                           float * dst, size_t ldd) {
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    alignas(32) int8_t yt[8][C][QK_K]; // the step's column blocks by dwords
    __m256             yd[C];
    const __m256i      at  = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                                _mm256_set1_epi32(int(sizeof(StoredKBlock))));
    const __m256i      dup = _mm256_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9, 8, 9, 10, 11, 10, 11,
                                              12, 13, 12, 13, 14, 15, 14, 15);
    auto step = [&](int64_t i0, int64_t n) __attribute__((always_inline)) {
        for (int c = 0; c < C; ++c) {
            for (int64_t k = 0; k < n; ++k) {
                __m256i v[8];
                for (int j = 0; j < 8; ++j) {
                    v[j] = kq_load(bc[c][i0 + k].qs + 32 * j);
                }
                kq_by_dwords(v, v);
                for (int j = 0; j < 8; ++j) {
                    _mm256_store_si256(reinterpret_cast<__m256i *>(yt[k][c] + 32 * j), v[j]);
                }
            }
            yd[c] = kq_yd8(bc[c] + i0, n);
        }
    };
    auto add = [&](int64_t row, int64_t i0, int64_t n, float (*acc)[8]) __attribute__((always_inline)) {
        const auto * x = reinterpret_cast<const StoredKBlock *>(a + size_t(row) * lda) + i0;
        __m256i      t1[C][8], t2[C][8];
        kq_zero_totals<C>(t1, t2, n);
        for (int64_t k = 0; k < n; ++k) {
            const StoredKBlock & sb   = x[k];
            const __m256i        s16  = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb.sm));
            const __m256i        sc   = _mm256_shuffle_epi8(_mm256_permute4x64_epi64(s16, 0x44), dup);
            const __m256i        bias = kq_min_bias_k4(s16);
            // Four columns at a time (no sum spilled beside eight).
            auto four = [&](auto c0) __attribute__((always_inline)) {
                constexpr int c_0 = decltype(c0)::value;
                constexpr int n_c = C - c_0 < 4 ? C - c_0 : 4;
                __m256i       p[n_c];
                for (int c = 0; c < n_c; ++c) {
                    p[c] = _mm256_setzero_si256();
                }
                for (int j = 0; j < 8; ++j) {
                    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(sb.u + 32 * j));
                    for (int c = 0; c < n_c; ++c) {
                        const __m256i y = _mm256_load_si256(reinterpret_cast<const __m256i *>(yt[k][c_0 + c] + 32 * j));
                        p[c]            = _mm256_add_epi16(p[c], _mm256_maddubs_epi16(u, y));
                    }
                }
                for (int c = 0; c < n_c; ++c) {
                    t1[c_0 + c][k] = _mm256_madd_epi16(p[c], sc);
                    t2[c_0 + c][k] = _mm256_madd_epi16(kq_load(bc[c_0 + c][i0 + k].bsums), bias);
                }
            };
            four(std::integral_constant<int, 0>{});
            if constexpr (C > 4) {
                four(std::integral_constant<int, 4>{});
            }
        }
        const __m256 live = _mm256_castsi256_ps(kq_live8(n));
        const __m256 d8   = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), &x->d, at, live, 1);
        const __m256 m8   = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), &x->dmin, at, live, 1);
        for (int c = 0; c < C; ++c) {
            _mm256_store_ps(acc[c], kq_add_totals8(_mm256_load_ps(acc[c]), yd[c], d8, m8, t1[c], t2[c]));
        }
    };
    stored_rows_walk<C>(nb, nrows, dst, ldd, add, kq_hsum, step);
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
                static_assert(T == StoredK::q6_K, "Q4_K's stored rows go through q4k_gemv_decoded_cols");
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
        if constexpr (T == StoredK::q4_K) {
            q4k_gemv_decoded_cols<decltype(cols)::value>(nb, ac, lda, nrows, bc, ldb, dst, ldd);
        } else {
            kq_gemv_decoded_cols<T, decltype(cols)::value>(nb, ac, lda, nrows, bc, ldb, dst, ldd);
        }
    });
}

} // namespace

void decode_rows_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    kq_decode_rows<StoredK::q4_K>(K, a, lda, nrows, out);
}

void decode_rows_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    kq_decode_rows<StoredK::q6_K>(K, a, lda, nrows, out);
}

void decode_rows_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    kq_decode_rows<StoredK::iq4_xs>(K, a, lda, nrows, out);
}

void gemv_decoded_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                       float * dst, size_t ldd) {
    kq_gemv_decoded<StoredK::q4_K>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_decoded_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                       float * dst, size_t ldd) {
    kq_gemv_decoded<StoredK::q6_K>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_decoded_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                         float * dst, size_t ldd) {
    kq_gemv_decoded<StoredK::iq4_xs>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}
