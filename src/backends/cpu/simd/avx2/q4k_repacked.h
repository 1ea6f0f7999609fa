// Q4_K weights in the CPU_REPACK layout on the AVX2 table (Note [Repacked
// Q4_K]): the matrix-vector product (its rows decoded once: q4k_panels.h).
// Included by kquants.cpp inside loom::cpu::avx2, after kquants_impl.h and
// kquant_rows.h.
//
// Note [Repacked Q4_K]
// In ggml's layout a Q4_K block's 128 bytes of qs are four runs of 32, run
// j holding groups 2j (low nibbles) and 2j + 1 (high nibbles): a register
// of levels is one group, so its products need a madd with that group's
// scale before they can be added to another register's. The repacked
// layout (repack.h) transposes the four runs by 8-byte words, word j of run
// k going to word k of run j (the transpose is its own inverse): register k
// then holds bytes 8k .. 8k + 7 of every group 2j (low nibbles) in its word
// j, and the same of group 2j + 1 (high nibbles). Every register's int16
// lanes 4j .. 4j + 3 belong to the same group, so the four registers of low
// nibbles add as int16 (at most 4 * 2 * 15 * 128 = 15360 a lane) and meet
// their group scales in one madd, the high ones in another: per block and
// column 8 maddubs, 6 int16 adds, 2 madds and an add, where ggml's layout
// takes 8 maddubs, 8 madds and 7 adds and 8 shuffles for the scales. The
// columns are laid out the same way once per call (q4k_column_words). The
// block's integer totals are the same as from ggml's layout, and they go
// through Note [Q4_K block totals on 256-bit registers] in the same order:
// the same bits as gemv_q4_K. The scales and mins of two blocks are decoded
// at once in vector registers (q4k_scales_pair).

namespace {

// The 4 x 4 transpose of the 8-byte words of r[0..3] (in place).
inline void q4k_words4(__m256i (&r)[4]) {
    const __m256i t0 = _mm256_unpacklo_epi64(r[0], r[1]), t1 = _mm256_unpackhi_epi64(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi64(r[2], r[3]), t3 = _mm256_unpackhi_epi64(r[2], r[3]);
    r[0]             = _mm256_permute2x128_si256(t0, t2, 0x20);
    r[1]             = _mm256_permute2x128_si256(t1, t3, 0x20);
    r[2]             = _mm256_permute2x128_si256(t0, t2, 0x31);
    r[3]             = _mm256_permute2x128_si256(t1, t3, 0x31);
}

// A column's block as the repacked products read it: out[0..3] the values
// of the even groups by words as the low nibbles of the registers hold
// them, out[4..7] the odd groups'.
inline void q4k_column_words(const block_q8_K & y, int8_t * out) {
    __m256i e[4], o[4];
    for (int j = 0; j < 4; ++j) {
        e[j] = kq_load(y.qs + 64 * j);
        o[j] = kq_load(y.qs + 64 * j + 32);
    }
    q4k_words4(e);
    q4k_words4(o);
    for (int k = 0; k < 4; ++k) {
        _mm256_store_si256(reinterpret_cast<__m256i *>(out + 32 * k), e[k]);
        _mm256_store_si256(reinterpret_cast<__m256i *>(out + 128 + 32 * k), o[k]);
    }
}

// Columns laid out by q4k_column_words, a thread's own, reused across calls.
inline int8_t * q4k_column_scratch(size_t bytes) {
    struct Free {
        void operator()(int8_t * p) const { std::free(p); }
    };
    thread_local std::unique_ptr<int8_t, Free> buf;
    thread_local size_t                        size = 0;
    if (size < bytes) {
        buf.reset(static_cast<int8_t *>(std::aligned_alloc(32, (bytes + 31) / 32 * 32)));
        size = buf ? bytes : 0;
    }
    return buf.get();
}

template <int C>
void q4k_repacked_gemv_cols(int64_t nb, const char * a, size_t lda, int64_t nrows, const char * b, size_t ldb,
                            const int8_t * yw, float * dst, size_t ldd) {
    using W = block_q4_K;
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    const __m256i m4     = _mm256_set1_epi8(0x0f);
    // From the bytes of q4k_scales_pair (scales 0-7, mins 0-7), int16
    // lanes: the scales of groups 0, 2, 4, 6 (even) and 1, 3, 5, 7 (odd) in
    // words 0..3, and each min twice (what meets the column's bsums).
    const __m256i pick_e = _mm256_setr_epi8(0, -1, 0, -1, 0, -1, 0, -1, 2, -1, 2, -1, 2, -1, 2, -1, 4, -1, 4, -1, 4, -1, 4,
                                            -1, 6, -1, 6, -1, 6, -1, 6, -1);
    const __m256i pick_o = _mm256_setr_epi8(1, -1, 1, -1, 1, -1, 1, -1, 3, -1, 3, -1, 3, -1, 3, -1, 5, -1, 5, -1, 5, -1, 5,
                                            -1, 7, -1, 7, -1, 7, -1, 7, -1);
    __m256i       pair   = _mm256_setzero_si256();
    kq_totals_rows<W, C, false>(nb, a, lda, nrows, bc, dst, ldd,
                         [&](const W * x, int64_t i, __m256i (*t1)[8], __m256i (*t2)[8], int64_t k)
                             __attribute__((always_inline)) {
        __m256i lo[4], hi[4];
        for (int q = 0; q < 4; ++q) {
            const __m256i v = kq_load(x[i].qs + 32 * q);
            lo[q]           = _mm256_and_si256(v, m4);
            hi[q]           = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
        const __m256i s8   = q4k_scales_at(x, i, nb, pair);
        const __m256i sc_e = _mm256_shuffle_epi8(s8, pick_e);
        const __m256i sc_o = _mm256_shuffle_epi8(s8, pick_o);
        const __m256i bias = q4k_min_bias_s8(s8);
        for (int c = 0; c < C; ++c) {
            const int8_t * y  = yw + (size_t(c) * size_t(nb) + size_t(i)) * QK_K;
            __m256i        pe = _mm256_maddubs_epi16(lo[0], kq_load(y));
            __m256i        po = _mm256_maddubs_epi16(hi[0], kq_load(y + 128));
            for (int q = 1; q < 4; ++q) {
                pe = _mm256_add_epi16(pe, _mm256_maddubs_epi16(lo[q], kq_load(y + 32 * q)));
                po = _mm256_add_epi16(po, _mm256_maddubs_epi16(hi[q], kq_load(y + 128 + 32 * q)));
            }
            t1[c][k] = _mm256_add_epi32(_mm256_madd_epi16(pe, sc_e), _mm256_madd_epi16(po, sc_o));
            t2[c][k] = _mm256_madd_epi16(kq_load(bc[c][i].bsums), bias);
        }
    });
}

} // namespace

void gemv_q4_K_repacked(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                        float * dst, size_t ldd) {
    const int64_t nb = K / QK_K;
    const auto *  bc = static_cast<const char *>(b);
    int8_t *      yw = q4k_column_scratch(size_t(ncols) * size_t(nb) * QK_K);
    LOOM_REQUIRE(yw != nullptr, "out of memory for the columns of a Q4_K product");
    for (int c = 0; c < ncols; ++c) {
        const auto * y = reinterpret_cast<const block_q8_K *>(bc + size_t(c) * ldb);
        for (int64_t i = 0; i < nb; ++i) {
            q4k_column_words(y[i], yw + (size_t(c) * size_t(nb) + size_t(i)) * QK_K);
        }
    }
    with_gemv_cols(ncols, [&](auto cols) {
        q4k_repacked_gemv_cols<decltype(cols)::value>(nb, static_cast<const char *>(a), lda, nrows, bc, ldb, yw, dst,
                                                      ldd);
    });
}
