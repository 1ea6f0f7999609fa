// Q6_K rows decoded once as panels of eight rows on the AVX2 table (Note
// [Q6_K panels of eight rows]): its decode_rows and gemv_decoded entries
// for Q6_K. Included by kquants.cpp inside loom::cpu::avx2, after
// kquants_impl.h and q4k_panels.h (kq_by_dwords, q4k_bcast4,
// q4k_in_order).
//
// Note [Q6_K panels of eight rows]
// Q6_K's rows in panels of eight as Q4_K's (Note [Q4_K panels of eight
// rows]): per group g of 16 values and word w of it, one register holds
// row r's four levels of values 16g + 4w .. 16g + 4w + 3 in lane r, so a
// broadcast word of a column meets eight rows in one maddubs. What Q6_K
// differs in is taken as the AVX-512 table's panels take it (Note [Q6_K
// panels]): the levels are stored less their offset of 32 (-32 .. 31,
// signed bytes, maddubs' second operand), and the column's bytes, offset by
// 128 (1 .. 255 for the quantizer's -127 .. 127), are the unsigned operand.
// A maddubs pair is then at most 2 * 255 * 32 = 16320 in magnitude, so two
// words add in int16 (four products, at most 32640) and one madd with the
// group's scale (each row's twice) widens them: two madds per group of 16
// and column. The offset's share, 128 * the sum of scale * (level - 32),
// depends on the row alone: stored once per block as the row's bias and
// taken off the column's sum. What is left is T, the block's exact total
// of Note [Folded block totals], which goes into lane i % 8 of the row's
// f32 sums by gemv_q6_K's FMA with y.d * d, so the bits are gemv_q6_K's.
// Rows of a panel past the item's last are zero and are not stored.
//
// Per column and 256 values of eight rows: 64 maddubs, 32 int16 adds, 32
// madds and their adds, where the stored rows one by one took 64 maddubs,
// 64 madds and 64 adds, with the per-row conversion and FMA of each block
// besides.

namespace {

// One super-block of a panel's eight rows.
struct Q6KPanelBlock {
    int8_t  q[16][4][Q4K_PANEL][4]; // [group of 16][word][row][value]: level - 32
    int8_t  sc[16][Q4K_PANEL][2];   // [group of 16][row]: the scale, twice
    int32_t bias[Q4K_PANEL];        // 128 * the sum of scale * (level - 32)
    float   d[Q4K_PANEL];
};
static_assert(sizeof(Q6KPanelBlock) <= Q4K_PANEL * DECODED_BLOCK_BYTES);

void q6k_panels_fill(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    const int64_t nb     = K / QK_K;
    const size_t  pitch  = size_t(Q4K_PANEL) * decoded_row_bytes(K);
    const __m256i offset = _mm256_set1_epi8(32);
    const __m256i ones   = _mm256_set1_epi8(1);
    for (int64_t r0 = 0; r0 < nrows; r0 += Q4K_PANEL) {
        auto *    panel = reinterpret_cast<Q6KPanelBlock *>(static_cast<char *>(out) + size_t(r0 / Q4K_PANEL) * pitch);
        const int n     = int(std::min<int64_t>(Q4K_PANEL, nrows - r0));
        for (int64_t i = 0; i < nb; ++i) {
            Q6KPanelBlock & p = panel[i];
            __m256i         lv[8][Q4K_PANEL]; // [32 values][row]: levels - 32 of groups 2j, 2j + 1
            for (int r = 0; r < Q4K_PANEL; ++r) {
                if (r >= n) {
                    for (int j = 0; j < 8; ++j) {
                        lv[j][r] = _mm256_setzero_si256();
                    }
                    for (int g = 0; g < 16; ++g) {
                        p.sc[g][r][0] = p.sc[g][r][1] = 0;
                    }
                    p.bias[r] = 0;
                    p.d[r]    = 0.0f;
                    continue;
                }
                const block_q6_K & x = reinterpret_cast<const block_q6_K *>(static_cast<const char *>(a) +
                                                                             size_t(r0 + r) * lda)[i];
                const __m256i      s16 = Q6KDecoder::scales16(x);
                const __m256i      lo  = _mm256_permute4x64_epi64(s16, 0x44);
                const __m256i      hi  = _mm256_permute4x64_epi64(s16, 0xee);
                __m256i            sum = _mm256_setzero_si256();
                for (int h = 0; h < 2; ++h) {
                    __m256i u[4];
                    Q6KDecoder::half(x, h, u);
                    for (int q = 0; q < 4; ++q) {
                        const int j = 4 * h + q;
                        lv[j][r]    = _mm256_sub_epi8(u[q], offset);
                        // The pairs' sums, then each group's with its scale.
                        const __m256i pairs = _mm256_maddubs_epi16(ones, lv[j][r]);
                        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, group_scales16(lo, hi, j)));
                    }
                }
                for (int g = 0; g < 16; ++g) {
                    p.sc[g][r][0] = p.sc[g][r][1] = x.scales[g];
                }
                p.bias[r] = 128 * kq_hsum_i32(sum);
                p.d[r]    = kq_half(x.d);
            }
            for (int j = 0; j < 8; ++j) {
                // Register k: word k of every row, words 0-3 of group 2j then
                // those of group 2j + 1.
                kq_by_dwords(lv[j], lv[j]);
                for (int k = 0; k < 8; ++k) {
                    _mm256_storeu_si256(reinterpret_cast<__m256i *>(p.q[2 * j + k / 4][k % 4]), lv[j][k]);
                }
            }
        }
    }
}

template <int C>
void q6k_panels_cols(int64_t nb, const char * a, size_t pitch, int64_t nrows, const char * b, size_t ldb, float * dst,
                     size_t ldd) {
    const __m256i offset = _mm256_set1_epi8(char(0x80));
    panels8_walk<Q6KPanelBlock, C, 1>(nb, a, pitch, nrows, b, ldb, dst, ldd,
                                      [&](const Q6KPanelBlock & p, int64_t i, const block_q8_K * const * bc,
                                          __m256 (*f)[8]) __attribute__((always_inline)) {
            // The columns' bytes of the block, offset by 128.
            alignas(32) int8_t y[C][QK_K];
            for (int c = 0; c < C; ++c) {
                for (int j = 0; j < QK_K / 32; ++j) {
                    _mm256_store_si256(reinterpret_cast<__m256i *>(y[c] + 32 * j),
                                       _mm256_xor_si256(kq_load(bc[c][i].qs + 32 * j), offset));
                }
            }
            __m256i t[C];
            // Four columns at a time, as Q4_K's panels.
            auto four = [&](auto c0) __attribute__((always_inline)) {
                constexpr int c_0 = decltype(c0)::value;
                constexpr int n_c = C - c_0 < 4 ? C - c_0 : 4;
                __m256i       s[n_c];
                for (int c = 0; c < n_c; ++c) {
                    s[c] = _mm256_setzero_si256();
                }
                for (int g = 0; g < 16; ++g) {
                    const __m256i sc =
                        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p.sc[g])));
                    for (int half = 0; half < 2; ++half) {
                        const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p.q[g][2 * half]));
                        const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p.q[g][2 * half + 1]));
                        for (int c = 0; c < n_c; ++c) {
                            const int8_t * yw = y[c_0 + c] + 16 * g + 8 * half;
                            // The column's bytes are the unsigned operand here.
                            __m256i h = _mm256_add_epi16(_mm256_maddubs_epi16(q4k_bcast4(yw), q0),
                                                         _mm256_maddubs_epi16(q4k_bcast4(yw + 4), q1));
                            q4k_in_order(h);
                            s[c] = _mm256_add_epi32(s[c], _mm256_madd_epi16(h, sc));
                        }
                    }
                }
                for (int c = 0; c < n_c; ++c) {
                    t[c_0 + c] = s[c];
                }
            };
            four(std::integral_constant<int, 0>{});
            if constexpr (C > 4) {
                four(std::integral_constant<int, 4>{});
            }
            const __m256i bias = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p.bias));
            const __m256  d    = _mm256_loadu_ps(p.d);
            for (int c = 0; c < C; ++c) {
                const __m256 T  = _mm256_cvtepi32_ps(_mm256_sub_epi32(t[c], bias));
                __m256 &     fl = f[c][i % 8];
                fl              = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(bc[c][i].d), d), T, fl);
            }
    });
}

} // namespace

void decode_rows_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    q6k_panels_fill(K, a, lda, nrows, out);
}

void gemv_decoded_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                       float * dst, size_t ldd) {
    const int64_t nb    = K / QK_K;
    const size_t  pitch = size_t(Q4K_PANEL) * lda;
    const auto *  ac    = static_cast<const char *>(a);
    const auto *  bc    = static_cast<const char *>(b);
    with_gemv_cols(ncols,
                   [&](auto cols) { q6k_panels_cols<decltype(cols)::value>(nb, ac, pitch, nrows, bc, ldb, dst, ldd); });
}
