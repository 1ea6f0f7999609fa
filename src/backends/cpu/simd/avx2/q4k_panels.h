// Q4_K rows decoded once as panels of eight rows on the AVX2 table (Note
// [Q4_K panels of eight rows]): its decode_rows, decode_rows_repacked and
// gemv_decoded entries for Q4_K. Included by kquants.cpp inside
// loom::cpu::avx2, after kquants_impl.h and q4k_repacked.h.
//
// Note [Q4_K panels of eight rows]
// With many columns (the prompt's products) an item's rows are decoded once
// (Note [Rows decoded once]) into panels of eight rows, as the AVX-512
// table's VNNI panels of sixteen (Note [K-quant panels]) and the rows by
// eight of Q4_0 and Q8_0 (Note [Q4_0 by eight on 256-bit registers]). For
// each super-block a panel holds, per group g of 32 values and word w of
// that group, one register of levels: row r's four levels of values 32g +
// 4w .. 32g + 4w + 3 (0..15) in lane r. The column's four matching bytes,
// broadcast to every lane, meet it in one maddubs, so each register of
// levels gives eight rows' products and nothing is summed across lanes.
// The eight words of a group add as int16 (a lane holds 16 products: at
// most 16 * 15 * 128 = 30720), and one madd with the rows' scales of the
// group (each twice) gives every row's int32 sum of the group; the groups
// add into T1, the row's exact block total. The rows' mins, by pairs of
// groups, meet the column's sums of 32 values (from its bsums, paired) in
// four madds: T2. These are the integer totals of Note [K-quant block
// totals], whatever the lanes that made them, and each goes into the row's
// f32 sums as gemv_q4_K's do (Note [Q4_K block totals on 256-bit
// registers]): block i of a row into sum i % 8 by an FMA with y.d * d and
// an FNMA with y.d * dmin, the sums of blocks past the row's last taking 0
// * 0 twice, and the eight sums added in kq_hsum's order. Here the eight
// sums of a column are eight registers, one lane per row, so the same
// operations on the same numbers give gemv_q4_K's bits. Rows of a panel
// past the item's last are zero: they add nothing and are not stored.
//
// Per column and 256 values of eight rows: 64 maddubs, each with a
// broadcast and an int16 add, 8 madds and their adds, where the stored rows
// one by one took 8 maddubs for each row with the transposes of the block
// totals between (about half of the arithmetic outside maddubs).

namespace {

constexpr int Q4K_PANEL = 8; // rows of a panel

// One super-block of a panel's eight rows.
struct Q4KPanelBlock {
    uint8_t q[8][8][Q4K_PANEL][4]; // [group of 32][word][row][value]
    int16_t sc[8][Q4K_PANEL][2];   // [group of 32][row]: the scale, twice
    int16_t mn[4][Q4K_PANEL][2];   // [pair of groups][row][group in the pair]: the mins
    float   d[Q4K_PANEL], dmin[Q4K_PANEL];
};
static_assert(sizeof(Q4KPanelBlock) <= Q4K_PANEL * DECODED_BLOCK_BYTES);

// The 8 x 8 transpose of the dwords of in[0..7]: dword r of out[w] is dword
// w of in[r] (in may be out).
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

// Panels of nrows rows (the last one filled with zero rows) into out, panel
// p at out + p * 8 * decoded_row_bytes(K), its blocks one after the other;
// block(r, i) gives block i of row r in ggml's layout.
template <class Block> void q4k_panels_fill(int64_t K, int64_t nrows, void * out, Block && block) {
    const int64_t nb    = K / QK_K;
    const size_t  pitch = size_t(Q4K_PANEL) * decoded_row_bytes(K);
    const __m256i m4    = _mm256_set1_epi8(0x0f);
    for (int64_t r0 = 0; r0 < nrows; r0 += Q4K_PANEL) {
        auto *    panel = reinterpret_cast<Q4KPanelBlock *>(static_cast<char *>(out) + size_t(r0 / Q4K_PANEL) * pitch);
        const int n     = int(std::min<int64_t>(Q4K_PANEL, nrows - r0));
        for (int64_t i = 0; i < nb; ++i) {
            Q4KPanelBlock & p = panel[i];
            __m256i         lv[8][Q4K_PANEL]; // [group][row]: values 32g .. 32g + 31
            // Row r's scales, each twice, in dword g; its mins in dwords 0-3
            // by pairs of groups (transposed below as the levels are).
            __m256i sc[Q4K_PANEL], mn[Q4K_PANEL];
            for (int r = 0; r < Q4K_PANEL; ++r) {
                if (r >= n) {
                    for (int g = 0; g < 8; ++g) {
                        lv[g][r] = _mm256_setzero_si256();
                    }
                    sc[r] = mn[r] = _mm256_setzero_si256();
                    p.d[r] = p.dmin[r] = 0.0f;
                    continue;
                }
                const block_q4_K & x = block(r0 + r, i);
                for (int k = 0; k < 4; ++k) {
                    const __m256i v  = kq_load(x.qs + 32 * k);
                    lv[2 * k][r]     = _mm256_and_si256(v, m4);
                    lv[2 * k + 1][r] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                }
                const __m256i sm  = kq_scales_mins16(x.scales);
                const __m256i s32 = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(sm));
                sc[r]             = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
                mn[r]             = _mm256_permute2x128_si256(sm, sm, 0x81);
                p.d[r]            = kq_half(x.d);
                p.dmin[r]         = kq_half(x.dmin);
            }
            for (int g = 0; g < 8; ++g) {
                kq_by_dwords(lv[g], lv[g]); // register w: word w of every row
                for (int w = 0; w < 8; ++w) {
                    _mm256_storeu_si256(reinterpret_cast<__m256i *>(p.q[g][w]), lv[g][w]);
                }
            }
            kq_by_dwords(sc, sc);
            kq_by_dwords(mn, mn);
            for (int g = 0; g < 8; ++g) {
                _mm256_storeu_si256(reinterpret_cast<__m256i *>(p.sc[g]), sc[g]);
            }
            for (int j = 0; j < 4; ++j) {
                _mm256_storeu_si256(reinterpret_cast<__m256i *>(p.mn[j]), mn[j]);
            }
        }
    }
}

[[gnu::always_inline]] inline __m256i q4k_bcast4(const int8_t * p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

// An empty statement that takes v and gives it back in a register: after
// each add of a group's sums, it keeps GCC from issuing all 32 maddubs of
// the group first and spilling their results (a third slower).
[[gnu::always_inline]] inline void q4k_in_order(__m256i & v) {
    __asm__("" : "+x"(v));
}

// The walk of the products of panels of eight rows with C columns (Q4_K's
// and Q6_K's): panels of blocks P, pitch bytes apart; block(p, i, bc, f)
// adds block i of a panel (p) with the columns' blocks i (bc[c] + i) into
// f[c][i % 8], column c's f32 sums, one lane per row; they end as
// rows8_finish<Adds> gives them.
template <class P, int C, int Adds, class Block>
[[gnu::always_inline]] inline void panels8_walk(int64_t nb, const char * a, size_t pitch, int64_t nrows, const char * b,
                                                size_t ldb, float * dst, size_t ldd, Block && block) {
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    for (int64_t r0 = 0; r0 < nrows; r0 += Q4K_PANEL) {
        const auto * panel = reinterpret_cast<const P *>(a + size_t(r0 / Q4K_PANEL) * pitch);
        __m256       f[C][8];
        for (int c = 0; c < C; ++c) {
            for (int l = 0; l < 8; ++l) {
                f[c][l] = _mm256_setzero_ps();
            }
        }
        for (int64_t i = 0; i < nb; ++i) {
            block(panel[i], i, bc, f);
        }
        for (int c = 0; c < C; ++c) {
            rows8_store(rows8_finish<Adds>(f[c], nb), dst + size_t(c) * ldd + size_t(r0), nrows - r0);
        }
    }
}

template <int C>
void q4k_panels_cols(int64_t nb, const char * a, size_t pitch, int64_t nrows, const char * b, size_t ldb, float * dst,
                     size_t ldd) {
    panels8_walk<Q4KPanelBlock, C, 2>(nb, a, pitch, nrows, b, ldb, dst, ldd,
                                      [](const Q4KPanelBlock & p, int64_t i, const block_q8_K * const * bc,
                                         __m256 (*f)[8]) __attribute__((always_inline)) {
            __m256i               t1[C];
            // Four columns at a time: their int16 and int32 sums, a register
            // of levels and a broadcast fit the sixteen registers.
            auto four = [&](auto c0) __attribute__((always_inline)) {
                constexpr int  c_0 = decltype(c0)::value;
                constexpr int  n_c = C - c_0 < 4 ? C - c_0 : 4;
                const int8_t * y[n_c];
                __m256i        s[n_c];
                for (int c = 0; c < n_c; ++c) {
                    y[c] = bc[c_0 + c][i].qs;
                    s[c] = _mm256_setzero_si256();
                }
                for (int g = 0; g < 8; ++g) {
                    __m256i h[n_c];
                    for (int c = 0; c < n_c; ++c) {
                        h[c] = _mm256_setzero_si256();
                    }
                    for (int w = 0; w < 8; ++w) {
                        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p.q[g][w]));
                        for (int c = 0; c < n_c; ++c) {
                            h[c] = _mm256_add_epi16(h[c], _mm256_maddubs_epi16(q, q4k_bcast4(y[c] + 32 * g + 4 * w)));
                            q4k_in_order(h[c]);
                        }
                    }
                    const __m256i sc = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p.sc[g]));
                    for (int c = 0; c < n_c; ++c) {
                        s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(h[c], sc));
                    }
                }
                for (int c = 0; c < n_c; ++c) {
                    t1[c_0 + c] = s[c];
                }
            };
            four(std::integral_constant<int, 0>{});
            if constexpr (C > 4) {
                four(std::integral_constant<int, 4>{});
            }
            __m256i mn[4];
            for (int j = 0; j < 4; ++j) {
                mn[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p.mn[j]));
            }
            const __m256 d    = _mm256_loadu_ps(p.d);
            const __m256 dmin = _mm256_loadu_ps(p.dmin);
            for (int c = 0; c < C; ++c) {
                // The column's sums of 32 values, int16 pairs (groups 2j, 2j +
                // 1) in 32-bit lanes 0, 1 (j = 0, 1) and 4, 5 (j = 2, 3).
                const __m256i bs = kq_load(bc[c][i].bsums);
                const __m256i ys = _mm256_hadd_epi16(bs, bs);
                __m256i       t2 = _mm256_madd_epi16(mn[0], _mm256_permutevar8x32_epi32(ys, _mm256_set1_epi32(0)));
                t2 = _mm256_add_epi32(t2, _mm256_madd_epi16(mn[1], _mm256_permutevar8x32_epi32(ys, _mm256_set1_epi32(1))));
                t2 = _mm256_add_epi32(t2, _mm256_madd_epi16(mn[2], _mm256_permutevar8x32_epi32(ys, _mm256_set1_epi32(4))));
                t2 = _mm256_add_epi32(t2, _mm256_madd_epi16(mn[3], _mm256_permutevar8x32_epi32(ys, _mm256_set1_epi32(5))));
                const __m256 yd = _mm256_set1_ps(bc[c][i].d);
                __m256 &     fl = f[c][i % 8];
                fl              = _mm256_fmadd_ps(_mm256_mul_ps(yd, d), _mm256_cvtepi32_ps(t1[c]), fl);
                fl              = _mm256_fnmadd_ps(_mm256_mul_ps(yd, dmin), _mm256_cvtepi32_ps(t2), fl);
            }
    });
}

} // namespace

void decode_rows_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    q4k_panels_fill(K, nrows, out, [&](int64_t r, int64_t i) -> const block_q4_K & {
        return reinterpret_cast<const block_q4_K *>(static_cast<const char *>(a) + size_t(r) * lda)[i];
    });
}

void decode_rows_q4_K_repacked(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    // Each block back in ggml's layout (the transpose of Note [Repacked
    // Q4_K] is its own inverse), then as decode_rows_q4_K takes it.
    block_q4_K plain;
    q4k_panels_fill(K, nrows, out, [&](int64_t r, int64_t i) -> const block_q4_K & {
        const block_q4_K & x = reinterpret_cast<const block_q4_K *>(static_cast<const char *>(a) + size_t(r) * lda)[i];
        std::memcpy(&plain, &x, offsetof(block_q4_K, qs));
        __m256i v[4];
        for (int q = 0; q < 4; ++q) {
            v[q] = kq_load(x.qs + 32 * q);
        }
        q4k_words4(v);
        for (int q = 0; q < 4; ++q) {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(plain.qs + 32 * q), v[q]);
        }
        return plain;
    });
}

void gemv_decoded_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                       float * dst, size_t ldd) {
    const int64_t nb    = K / QK_K;
    const size_t  pitch = size_t(Q4K_PANEL) * lda;
    const auto *  ac    = static_cast<const char *>(a);
    const auto *  bc    = static_cast<const char *>(b);
    with_gemv_cols(ncols,
                   [&](auto cols) { q4k_panels_cols<decltype(cols)::value>(nb, ac, pitch, nrows, bc, ldb, dst, ldd); });
}
