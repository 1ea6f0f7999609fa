// Decoded rows of Q4_K as panels of 16 rows for VNNI (Note [K-quant
// panels]). avx512/kquants.cpp includes this file inside namespace
// loom::cpu::avx512 under the AVX-512 target, after avx2/kquants_impl.h,
// whose decoder and block totals it uses, and panel_common.h.
//
// Note [K-quant panels]
// The panels of Note [Decoded panels] (avx512/iquant_panels.h) with what a
// K-quant adds: the mins. For each super-block, the levels of 16 rows as
// there (for each group g of 16 values, four registers of values 16g + 4k
// .. 16g + 4k + 3, one row per int32 lane), then per group of 32 the rows'
// scales as int32 (one multiply per 32 values instead of per 16), per pair
// of groups of 32 the rows' two mins as int16 pairs, the rows' biases, d
// and dmin. A column's bytes, offset by 128, meet the levels through
// vpdpbusd 4 at a time; each group's sum times its scale gives T1 plus the
// offset's share (the bias, taken off); the column's sums of 32 values,
// paired, meet the mins through vpdpwssd and give T2. The totals are those
// of Note [K-quant block totals] in avx2/kquants_512.h, added into the
// same f32 lanes in the same order, so the bits are gemv_quant's. With
// levels 0..15 and scales 0..63, a block's sum before the bias is at most
// 8 * 63 * 32 * 15 * 255 < 2^31. A panel's rows past the item's last are
// zero: they add nothing and are not stored.

namespace {

struct KPanelBlock {
    int8_t  q[16][4][DECODED_PANEL_ROWS][4]; // [group of 16][k][row][value]
    int32_t sc[8][DECODED_PANEL_ROWS];       // [group of 32][row]
    int16_t mn[4][DECODED_PANEL_ROWS][2];    // [pair of groups of 32][row][group in the pair]
    int32_t bias[DECODED_PANEL_ROWS];
    float   d[DECODED_PANEL_ROWS];
    float   dmin[DECODED_PANEL_ROWS];
};
static_assert(sizeof(KPanelBlock) <= DECODED_PANEL_ROWS * DECODED_BLOCK_BYTES);

// Panel p of rows decoded with row pitch lda starts at a + p * 16 * lda, its
// blocks one after the other.
template <class D>
void kpanel_decode_rows(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    using W             = typename D::W;
    const int64_t nb    = K / QK_K;
    const size_t  pitch = size_t(DECODED_PANEL_ROWS) * decoded_row_bytes(K);
    for (int64_t r0 = 0; r0 < nrows; r0 += DECODED_PANEL_ROWS) {
        auto * panel = reinterpret_cast<KPanelBlock *>(static_cast<char *>(out) + size_t(r0 / DECODED_PANEL_ROWS) * pitch);
        for (int64_t i = 0; i < nb; ++i) {
            KPanelBlock & p = panel[i];
            std::memset(&p, 0, sizeof p);
            for (int row = 0; row < DECODED_PANEL_ROWS && r0 + row < nrows; ++row) {
                const auto * x = reinterpret_cast<const W *>(static_cast<const char *>(a) + size_t(r0 + row) * lda);
                KDecoded     w;
                D::decode(x[i], w);
                alignas(32) uint8_t  levels[QK_K];
                alignas(32) int16_t  mins[16];
                _mm256_store_si256(reinterpret_cast<__m256i *>(mins), w.bias); // each group of 32's min twice
                for (int j = 0; j < 8; ++j) {
                    _mm256_store_si256(reinterpret_cast<__m256i *>(levels + 32 * j), w.u[j]);
                    // The decoder gives a group of 32 one scale in both its groups of 16.
                    p.sc[j][row] = int16_t(_mm256_extract_epi16(w.sc[j], 0));
                    p.mn[j / 2][row][j % 2] = mins[2 * j];
                }
                for (int g = 0; g < 16; ++g) {
                    int32_t sum = 0;
                    for (int k = 0; k < 4; ++k) {
                        const uint8_t * v = levels + 16 * g + 4 * k;
                        std::memcpy(p.q[g][k][row], v, 4);
                        sum += v[0] + v[1] + v[2] + v[3];
                    }
                    p.bias[row] += 128 * p.sc[g / 2][row] * sum;
                }
                p.d[row]    = w.d;
                p.dmin[row] = w.dmin;
            }
        }
    }
}

template <int C>
void kpanel_gemv_cols(int64_t nb, const char * a, size_t pitch, int64_t nrows, const char * b, size_t ldb,
                      float * dst, size_t ldd) {
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    const __m512i offset = _mm512_set1_epi8(char(0x80));
    for (int64_t r0 = 0; r0 < nrows; r0 += DECODED_PANEL_ROWS) {
        const auto * panel = reinterpret_cast<const KPanelBlock *>(a + size_t(r0 / DECODED_PANEL_ROWS) * pitch);
        __m512       f[C][8];
        for (int c = 0; c < C; ++c) {
            for (int l = 0; l < 8; ++l) {
                f[c][l] = _mm512_setzero_ps();
            }
        }
        for (int64_t i = 0; i < nb; ++i) {
            const KPanelBlock & p = panel[i];
            // The columns' bytes of this block, made unsigned, and their
            // sums of 32 values in int16 pairs (groups 2j and 2j + 1).
            alignas(64) uint8_t y[C][QK_K];
            alignas(16) int16_t ys[C][8];
            for (int c = 0; c < C; ++c) {
                for (int h = 0; h < QK_K / 64; ++h) {
                    _mm512_store_si512(y[c] + 64 * h, _mm512_xor_si512(panel_load(bc[c][i].qs + 64 * h), offset));
                }
                // Sums of adjacent sums of 16 in int16 lanes 0-3 (groups 0-3)
                // and 8-11 (groups 4-7); |sum| <= 32 * 127.
                const __m256i s32 = _mm256_hadd_epi16(kq_load(bc[c][i].bsums), _mm256_setzero_si256());
                _mm_store_si128(reinterpret_cast<__m128i *>(ys[c]),
                                _mm_unpacklo_epi64(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1)));
            }
            __m512i t1[C], t2[C];
            for (int c = 0; c < C; ++c) {
                t1[c] = _mm512_setzero_si512();
                t2[c] = _mm512_setzero_si512();
            }
            for (int g = 0; g < 8; ++g) {
                const __m512i w0 = panel_load(p.q[2 * g][0]), w1 = panel_load(p.q[2 * g][1]);
                const __m512i w2 = panel_load(p.q[2 * g][2]), w3 = panel_load(p.q[2 * g][3]);
                const __m512i w4 = panel_load(p.q[2 * g + 1][0]), w5 = panel_load(p.q[2 * g + 1][1]);
                const __m512i w6 = panel_load(p.q[2 * g + 1][2]), w7 = panel_load(p.q[2 * g + 1][3]);
                const __m512i sc = panel_load(p.sc[g]);
                for (int c = 0; c < C; ++c) {
                    const uint8_t * yg = y[c] + 32 * g;
                    __m512i         t  = _mm512_dpbusd_epi32(_mm512_setzero_si512(), panel_bcast4(yg), w0);
                    t                  = _mm512_dpbusd_epi32(t, panel_bcast4(yg + 4), w1);
                    t                  = _mm512_dpbusd_epi32(t, panel_bcast4(yg + 8), w2);
                    t                  = _mm512_dpbusd_epi32(t, panel_bcast4(yg + 12), w3);
                    t                  = _mm512_dpbusd_epi32(t, panel_bcast4(yg + 16), w4);
                    t                  = _mm512_dpbusd_epi32(t, panel_bcast4(yg + 20), w5);
                    t                  = _mm512_dpbusd_epi32(t, panel_bcast4(yg + 24), w6);
                    t                  = _mm512_dpbusd_epi32(t, panel_bcast4(yg + 28), w7);
                    t1[c]              = _mm512_add_epi32(t1[c], _mm512_mullo_epi32(t, sc));
                }
            }
            for (int j = 0; j < 4; ++j) {
                const __m512i mn = panel_load(p.mn[j]);
                for (int c = 0; c < C; ++c) {
                    t2[c] = _mm512_dpwssd_epi32(t2[c], mn, panel_bcast4(ys[c] + 2 * j));
                }
            }
            const __m512i bias = panel_load(p.bias);
            const __m512  d    = _mm512_loadu_ps(p.d);
            const __m512  dmin = _mm512_loadu_ps(p.dmin);
            for (int c = 0; c < C; ++c) {
                const __m512 yd = _mm512_set1_ps(bc[c][i].d);
                const __m512 T1 = _mm512_maskz_cvtepi32_ps(k_panel_all, _mm512_sub_epi32(t1[c], bias));
                const __m512 T2 = _mm512_maskz_cvtepi32_ps(k_panel_all, t2[c]);
                f[c][i % 8]     = _mm512_fmadd_ps(_mm512_mul_ps(yd, d), T1, f[c][i % 8]);
                f[c][i % 8]     = _mm512_fnmadd_ps(_mm512_mul_ps(yd, dmin), T2, f[c][i % 8]);
            }
        }
        for (int c = 0; c < C; ++c) {
            panel_finish<2>(f[c], nb, dst + size_t(c) * ldd + size_t(r0), nrows - r0);
        }
    }
}

void kpanel_gemv_decoded(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                         float * dst, size_t ldd) {
    const int64_t nb    = K / QK_K;
    const size_t  pitch = size_t(DECODED_PANEL_ROWS) * lda;
    const auto *  ac    = static_cast<const char *>(a);
    const auto *  bc    = static_cast<const char *>(b);
    with_gemv_cols(ncols, [&](auto cols) { kpanel_gemv_cols<decltype(cols)::value>(nb, ac, pitch, nrows, bc, ldb, dst, ldd); });
}

// Note [Q6_K panels]
// Q6_K's rows in panels of 16 as Q4_K's (Note [K-quant panels]), with
// what Q6_K differs in: sixteen signed scales, one per group of 16 values,
// and no mins but an offset of 32 in every level. The levels are stored
// less the offset (-32 .. 31, signed bytes, what vpdpbusd's second operand
// takes); a column's bytes, offset by 128, meet them four at a time, each
// group's four sums add up (at most 16 * 255 * 32 in magnitude) and meet
// the group's scale (stored as bytes, widened once per group for every
// column) in one multiply; the offset's share, 128 * the sum of scale *
// level, is the row's bias, taken off. What is left is the block's exact
// total T of Note [Folded block totals] (avx2/kquant_totals.h), which goes
// into lane i % 8 of the rows' f32 sums by the same FMA, so the bits are
// those of gemv_q6_K; every intermediate sum stays below 2^28.
struct Q6PanelBlock {
    int8_t  q[16][4][DECODED_PANEL_ROWS][4]; // [group of 16][k][row][value]: level - 32
    int8_t  sc[16][DECODED_PANEL_ROWS];      // [group of 16][row]
    int32_t bias[DECODED_PANEL_ROWS];
    float   d[DECODED_PANEL_ROWS];
};
static_assert(sizeof(Q6PanelBlock) <= DECODED_PANEL_ROWS * DECODED_BLOCK_BYTES);

void q6panel_decode_rows(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    const int64_t nb    = K / QK_K;
    const size_t  pitch = size_t(DECODED_PANEL_ROWS) * decoded_row_bytes(K);
    for (int64_t r0 = 0; r0 < nrows; r0 += DECODED_PANEL_ROWS) {
        auto * panel = reinterpret_cast<Q6PanelBlock *>(static_cast<char *>(out) + size_t(r0 / DECODED_PANEL_ROWS) * pitch);
        for (int64_t i = 0; i < nb; ++i) {
            Q6PanelBlock & p = panel[i];
            std::memset(&p, 0, sizeof p);
            for (int row = 0; row < DECODED_PANEL_ROWS && r0 + row < nrows; ++row) {
                const auto & x =
                    reinterpret_cast<const block_q6_K *>(static_cast<const char *>(a) + size_t(r0 + row) * lda)[i];
                KDecoded w;
                Q6KDecoder::decode(x, w);
                alignas(32) uint8_t levels[QK_K];
                for (int j = 0; j < 8; ++j) {
                    _mm256_store_si256(reinterpret_cast<__m256i *>(levels + 32 * j), w.u[j]);
                }
                for (int g = 0; g < 16; ++g) {
                    int32_t sum = 0;
                    for (int k = 0; k < 4; ++k) {
                        for (int v = 0; v < 4; ++v) {
                            const int level     = int(levels[16 * g + 4 * k + v]) - 32;
                            p.q[g][k][row][v] = int8_t(level);
                            sum += level;
                        }
                    }
                    p.sc[g][row] = x.scales[g];
                    p.bias[row] += 128 * int32_t(x.scales[g]) * sum;
                }
                p.d[row] = kq_half(x.d);
            }
        }
    }
}

template <int C>
void q6panel_gemv_cols(int64_t nb, const char * a, size_t pitch, int64_t nrows, const char * b, size_t ldb,
                       float * dst, size_t ldd) {
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    const __m512i offset = _mm512_set1_epi8(char(0x80));
    for (int64_t r0 = 0; r0 < nrows; r0 += DECODED_PANEL_ROWS) {
        const auto * panel = reinterpret_cast<const Q6PanelBlock *>(a + size_t(r0 / DECODED_PANEL_ROWS) * pitch);
        __m512       f[C][8];
        for (int c = 0; c < C; ++c) {
            for (int l = 0; l < 8; ++l) {
                f[c][l] = _mm512_setzero_ps();
            }
        }
        for (int64_t i = 0; i < nb; ++i) {
            const Q6PanelBlock & p = panel[i];
            alignas(64) uint8_t  y[C][QK_K];
            __m512i              t[C];
            for (int c = 0; c < C; ++c) {
                for (int h = 0; h < QK_K / 64; ++h) {
                    _mm512_store_si512(y[c] + 64 * h, _mm512_xor_si512(panel_load(bc[c][i].qs + 64 * h), offset));
                }
                t[c] = _mm512_setzero_si512();
            }
            for (int g = 0; g < 16; ++g) {
                const __m512i w0 = panel_load(p.q[g][0]), w1 = panel_load(p.q[g][1]);
                const __m512i w2 = panel_load(p.q[g][2]), w3 = panel_load(p.q[g][3]);
                const __m512i sc = _mm512_maskz_cvtepi8_epi32(k_panel_all, _mm_loadu_si128(reinterpret_cast<const __m128i *>(p.sc[g])));
                for (int c = 0; c < C; ++c) {
                    const uint8_t * yg = y[c] + 16 * g;
                    __m512i         s  = _mm512_dpbusd_epi32(_mm512_setzero_si512(), panel_bcast4(yg), w0);
                    s                  = _mm512_dpbusd_epi32(s, panel_bcast4(yg + 4), w1);
                    s                  = _mm512_dpbusd_epi32(s, panel_bcast4(yg + 8), w2);
                    s                  = _mm512_dpbusd_epi32(s, panel_bcast4(yg + 12), w3);
                    t[c]               = _mm512_add_epi32(t[c], _mm512_mullo_epi32(s, sc));
                }
            }
            const __m512i bias = panel_load(p.bias);
            const __m512  d    = _mm512_loadu_ps(p.d);
            for (int c = 0; c < C; ++c) {
                const __m512 T = _mm512_maskz_cvtepi32_ps(k_panel_all, _mm512_sub_epi32(t[c], bias));
                f[c][i % 8]    = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(bc[c][i].d), d), T, f[c][i % 8]);
            }
        }
        for (int c = 0; c < C; ++c) {
            panel_finish<1>(f[c], nb, dst + size_t(c) * ldd + size_t(r0), nrows - r0);
        }
    }
}

void q6panel_gemv_decoded(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                          float * dst, size_t ldd) {
    const int64_t nb    = K / QK_K;
    const size_t  pitch = size_t(DECODED_PANEL_ROWS) * lda;
    const auto *  ac    = static_cast<const char *>(a);
    const auto *  bc    = static_cast<const char *>(b);
    with_gemv_cols(ncols, [&](auto cols) { q6panel_gemv_cols<decltype(cols)::value>(nb, ac, pitch, nrows, bc, ldb, dst, ldd); });
}

} // namespace

void add_kquant_panel_kernels(KernelTable & t) {
    t.decode_rows[GGML_TYPE_Q4_K]  = kpanel_decode_rows<Q4KDecoder>;
    t.gemv_decoded[GGML_TYPE_Q4_K] = kpanel_gemv_decoded;
    t.decode_rows[GGML_TYPE_Q6_K]  = q6panel_decode_rows;
    t.gemv_decoded[GGML_TYPE_Q6_K] = q6panel_gemv_decoded;
}
