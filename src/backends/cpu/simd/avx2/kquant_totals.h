// Exact block totals of the K-quant matrix-vector products (Note [K-quant
// block totals]): one row loop for both tables, the block's decode and sums
// per table. Included by kquants_impl.h inside its anonymous namespace, after
// the decoders (and, on the AVX-512 table, the 512-bit ones).

// Note [Q4_K block totals on 256-bit registers]
// The AVX2 table's Q4_K products add exact block totals too (Note [K-quant
// block totals]: T1 and T2 are kq_block's isum and msum, summed), in every
// path, the one pass over the rows here and the decoded panels
// (avx2/q4k_panels.h, Note [Q4_K panels of eight rows]), so that both
// give the same bits whatever lanes their integer sums take: per block and
// column two int32 sums wait in memory, and the conversions, products and
// FMAs of eight blocks are done at once.

// The lanes below n, as a mask of -1 and 0.
inline __m256i kq_live8(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#if defined(LOOM_KQ_512)
inline __mmask8 kq_live_mask8(int64_t n) {
    return n >= 8 ? __mmask8(0xff) : __mmask8((1u << n) - 1);
}
#endif

// d and dmin of blocks x[0 .. n), as floats in lanes (0 from n on).
template <class W> inline void kq_dm8(const W * x, int64_t n, __m256 & d8, __m256 & m8) {
    static_assert(offsetof(W, dmin) == offsetof(W, d) + sizeof(uint16_t), "d and dmin in one 32-bit word");
    const __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(int(sizeof(W))));
    const char *  p  = reinterpret_cast<const char *>(x) + offsetof(W, d);
#if defined(LOOM_KQ_512)
    const __m256i dm = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), kq_live_mask8(n), at, p, 1);
    d8               = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm));
    m8               = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dm, 16)));
#else
    const __m256i dm =
        _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), reinterpret_cast<const int *>(p), at, kq_live8(n), 1);
    // The low halves (d) then the high ones (dmin), in order.
    const __m256i both = _mm256_permute4x64_epi64(
        _mm256_packus_epi32(_mm256_and_si256(dm, _mm256_set1_epi32(0xffff)), _mm256_srli_epi32(dm, 16)), 0xd8);
    d8 = _mm256_cvtph_ps(_mm256_castsi256_si128(both));
    m8 = _mm256_cvtph_ps(_mm256_extracti128_si256(both, 1));
#endif
}

// y[0 .. n).d in lanes (0 from n on).
inline __m256 kq_yd8(const block_q8_K * y, int64_t n) {
    const __m256i at =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(int(sizeof(block_q8_K))));
#if defined(LOOM_KQ_512)
    return _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), kq_live_mask8(n), at, &y->d, 1);
#else
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), &y->d, at, _mm256_castsi256_ps(kq_live8(n)), 1);
#endif
}

// d of blocks x[0 .. n) of a type without dmin whose fp16 d follows two
// other bytes of the block (Q6_K: the last two bytes), as floats in lanes (0
// from n on): the 32-bit gather ends at d, never past the block.
template <class W> inline __m256 kq_d8(const W * x, int64_t n) {
    static_assert(offsetof(W, d) >= 2 && offsetof(W, d) + sizeof(uint16_t) <= sizeof(W));
    const __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(int(sizeof(W))));
    const char *  p  = reinterpret_cast<const char *>(x) + offsetof(W, d) - 2;
#if defined(LOOM_KQ_512)
    const __m256i w  = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), kq_live_mask8(n), at, p, 1);
    return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(w, 16)));
#else
    const __m256i w =
        _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), reinterpret_cast<const int *>(p), at, kq_live8(n), 1);
    // The high halves, in order, in the low 128 bits.
    const __m256i h = _mm256_srli_epi32(w, 16);
    return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0xd8)));
#endif
}

// Note [Folded block totals]
// Q6_K adds exact block totals too, on both tables, for the same reason as
// Note [K-quant block totals] (its rows decoded into panels, Notes [Q6_K
// panels] and [Q6_K panels of eight rows], give the same bits): its offset
// of 32 is part of the levels, so a block has one total, T = T1 - T2 (the
// sum of scale * level * y, less 32 * the sum of scale * the column's sums
// of 16), at most 256 * 128 * 32 * 127 in magnitude; eight blocks' go into
// lanes i % 8 as  f = fma(y.d * d, T, f)  (blocks past the last add 0 * 0
// once). A block's lane sums give T as one register, t1 - t2, before their
// totals are taken: t holds them.
inline __m256 kq_add_folded8(__m256 acc, __m256 yd, __m256 d8, const __m256i * t) {
    return _mm256_fmadd_ps(_mm256_mul_ps(yd, d8), _mm256_cvtepi32_ps(block_totals8(t)), acc);
}

// acc + eight blocks' totals (Note [K-quant block totals]).
inline __m256 kq_add_totals8(__m256 acc, __m256 yd, __m256 d8, __m256 m8, const __m256i * t1, const __m256i * t2) {
    acc = _mm256_fmadd_ps(_mm256_mul_ps(yd, d8), _mm256_cvtepi32_ps(block_totals8(t1)), acc);
    return _mm256_fnmadd_ps(_mm256_mul_ps(yd, m8), _mm256_cvtepi32_ps(block_totals8(t2)), acc);
}

// One block of a row and its lane sums with C columns' blocks (Note
// [K-quant block totals]): the 512-bit decoder and products where the
// table has them, else the 256-bit ones (kq_block's isum and msum).
template <class D, int C>
[[gnu::always_inline]] inline void kq_block_totals(const typename D::W & x, const block_q8_K * const * bc, int64_t i,
                                                   __m256i (*t1)[8], __m256i (*t2)[8], int64_t k) {
#if defined(LOOM_KQ_512)
    KDecoded512 w5;
    kq_decode512<D>(x, w5);
    for (int c = 0; c < C; ++c) {
        kq_block512_sums(w5, bc[c][i], t1[c][k], t2[c][k]);
        if constexpr (D::fold) {
            t1[c][k] = _mm256_sub_epi32(t1[c][k], t2[c][k]);
        }
    }
#else
    KDecoded w;
    D::decode(x, w);
    for (int c = 0; c < C; ++c) {
        const block_q8_K & y    = bc[c][i];
        __m256i            isum = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
            const __m256i p = _mm256_maddubs_epi16(w.u[j], kq_load(y.qs + 32 * j));
            isum            = _mm256_add_epi32(isum, _mm256_madd_epi16(p, w.sc[j]));
        }
        t2[c][k] = _mm256_madd_epi16(kq_load(y.bsums), w.bias);
        t1[c][k] = D::fold ? _mm256_sub_epi32(isum, t2[c][k]) : isum;
    }
#endif
}

// Blocks n .. 7 of a group of eight add 0 (past the row's last block).
template <int C> inline void kq_zero_totals(__m256i (*t1)[8], __m256i (*t2)[8], int64_t n) {
    for (int64_t k = n; k < 8; ++k) {
        for (int c = 0; c < C; ++c) {
            t1[c][k] = t2[c][k] = _mm256_setzero_si256();
        }
    }
}

// The rows' products with C columns through their block totals: block(x,
// i, t1, t2, k) gives block i of row x's lane sums with every column c in
// t1[c][k] and t2[c][k], or where Fold, t1 - t2 in t1[c][k]
// (kq_block_totals' contract, whatever the layout of the weights' bits:
// Note [Repacked Q4_K] has one of its own).
template <class W, int C, bool Fold, class Block>
[[gnu::always_inline]] inline void kq_totals_rows(int64_t nb, const char * a, size_t lda, int64_t nrows,
                                                  const block_q8_K * const * bc, float * dst, size_t ldd,
                                                  Block && block) {
    // The columns' d, the same for every row: in lanes from memory where
    // the row is short enough (written once per call, so nothing waits on
    // a store), else gathered for each eight blocks.
    constexpr int64_t   k_max_blocks = 128;
    alignas(32) float   yds[C][k_max_blocks];
    const bool          yd_stored = nb <= k_max_blocks;
    if (yd_stored) {
        for (int c = 0; c < C; ++c) {
            for (int64_t i = 0; i < nb; ++i) {
                yds[c][i] = bc[c][i].d;
            }
        }
    }
    auto yd8 = [&](int c, int64_t i0, int64_t n) __attribute__((always_inline)) {
#if defined(LOOM_KQ_512)
        return yd_stored ? _mm256_maskz_loadu_ps(kq_live_mask8(n), yds[c] + i0) : kq_yd8(bc[c] + i0, n);
#else
        return yd_stored ? _mm256_maskload_ps(yds[c] + i0, kq_live8(n)) : kq_yd8(bc[c] + i0, n);
#endif
    };
    for (int64_t r = 0; r < nrows; ++r) {
        const auto * x = reinterpret_cast<const W *>(a + size_t(r) * lda);
        __m256       acc[C];
        for (int c = 0; c < C; ++c) {
            acc[c] = _mm256_setzero_ps();
        }
        auto add8 = [&](int64_t i0, int64_t n) __attribute__((always_inline)) {
            __m256i t1[C][8], t2[C][8];
            for (int64_t k = 0; k < n; ++k) {
                kq_prefetch_ahead(x + i0 + k, lda);
                block(x, i0 + k, t1, t2, k);
            }
            kq_zero_totals<C>(t1, t2, n);
            // The eight blocks' d and dmin gathered into lanes, and each
            // column's d (yd8; 0 past the row's last block): the products
            // y.d * d and y.d * dmin of the scalar code, without a vector
            // load of eight scalar stores just made, which the processor
            // cannot forward.
            if constexpr (Fold) {
                const __m256 d8 = kq_d8(x + i0, n);
                for (int c = 0; c < C; ++c) {
                    acc[c] = kq_add_folded8(acc[c], yd8(c, i0, n), d8, t1[c]);
                }
            } else {
                __m256 d8, m8;
                kq_dm8(x + i0, n, d8, m8);
                for (int c = 0; c < C; ++c) {
                    acc[c] = kq_add_totals8(acc[c], yd8(c, i0, n), d8, m8, t1[c], t2[c]);
                }
            }
        };
        by_eight_blocks(nb, add8);
        for (int c = 0; c < C; ++c) {
            dst[size_t(c) * ldd + size_t(r)] = kq_hsum(acc[c]);
        }
    }
}

template <class D, int C>
void kq_totals_gemv_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb,
                         float * dst, size_t ldd) {
    using W = typename D::W;
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    if constexpr (C == 1 && std::is_same_v<D, Q4KDecoder>) {
        // One column: the levels meet it as they are unpacked, the scales
        // and mins of two blocks decoded at once (q4k_scales_pair).
        __m256i pair = _mm256_setzero_si256();
        kq_totals_rows<W, C, false>(nb, a, lda, nrows, bc, dst, ldd,
                             [&](const W * x, int64_t i, __m256i (*t1)[8], __m256i (*t2)[8], int64_t k)
                                 __attribute__((always_inline)) {
            D::totals_plain(x[i], bc[0][i], q4k_scales_at(x, i, nb, pair), t1[0][k], t2[0][k]);
        });
        return;
    }
    if constexpr (C == 1 && std::is_same_v<D, Q6KDecoder>) {
        kq_totals_rows<W, C, true>(nb, a, lda, nrows, bc, dst, ldd,
                                   [&](const W * x, int64_t i, __m256i (*t1)[8], __m256i (*)[8], int64_t k)
                                       __attribute__((always_inline)) {
            __m256i isum, msum;
            D::sums_plain(x[i], bc[0][i], isum, msum);
            t1[0][k] = _mm256_sub_epi32(isum, msum);
        });
        return;
    }
    kq_totals_rows<W, C, D::fold>(nb, a, lda, nrows, bc, dst, ldd,
                         [&](const W * x, int64_t i, __m256i (*t1)[8], __m256i (*t2)[8], int64_t k)
                             __attribute__((always_inline)) { kq_block_totals<D, C>(x[i], bc, i, t1, t2, k); });
}
