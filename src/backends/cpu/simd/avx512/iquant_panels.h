// Decoded rows of the grid i-quants, the ternary types and IQ4_XS as
// panels of 16 rows for VNNI (Note [Decoded panels]). avx512/iquants.cpp includes this
// file inside namespace loom::cpu::avx512 under the AVX-512 target, after
// avx2/iquants_impl.h, whose decoders it uses, and panel_common.h.
//
// Note [Decoded panels]
// With more columns than one gemv call takes, an item's rows are decoded
// once (Note [Rows decoded once] in kernels/matmul.cpp). On this table they
// are decoded into panels of DECODED_PANEL_ROWS = 16 rows, the layout of
// VNNI's vpdpbusd with one row per int32 lane: for each super-block and
// each group g of 16 values, four registers hold values 16g + 4k .. 16g +
// 4k + 3 of the 16 rows (k = 0..3, 4 bytes a row), then the groups' scales
// (int16, 16 rows a group), the rows' biases and d. A column's bytes,
// offset by 128 to make them unsigned, are broadcast 4 at a time against
// those registers: one vpdpbusd gives 16 rows' sums of 4 values, and a
// multiply by the group's scales takes it into the block's sums.
//
// The results are gemv_quant's bits (Note [Block totals] in
// avx2/iquants_impl.h): a row's exact integer total per block, d * y.d
// times it added into f32 sum b % 8 of block b, and those eight added in
// iq_hsum's order. The offset adds 128 * sum over groups (scale * sum of
// levels) to a row's total; the decoder stores that as the row's bias,
// taken off before the conversion to f32. The integer sums are exact: with
// |level| <= 127 and |scale| <= 32 (IQ4_XS; the grid types stay within 62
// and 31) a group's sum is at most 16 * 255 * 127 * 32 and a block's 16
// times that, below 2^31. A panel's rows past the item's last are
// zero: they add nothing and are not stored.

namespace {

struct PanelBlock {
    int8_t  q[16][4][DECODED_PANEL_ROWS][4]; // [group][k][row][value]
    int16_t sc[16][DECODED_PANEL_ROWS];
    int32_t bias[DECODED_PANEL_ROWS];
    float   d[DECODED_PANEL_ROWS];
};
static_assert(sizeof(PanelBlock) <= DECODED_PANEL_ROWS * DECODED_BLOCK_BYTES);

// Panel p of rows decoded with row pitch lda starts at a + p * 16 * lda, its
// blocks one after the other. block(row, i, scratch) gives block i of row
// `row` (a reference to it, or to scratch filled with it).
template <class D, class Block>
void panel_decode_blocks(int64_t K, int64_t nrows, void * out, Block && block) {
    using W             = typename D::W;
    const int64_t nb    = K / QK_K;
    const size_t  pitch = size_t(DECODED_PANEL_ROWS) * decoded_row_bytes(K);
    for (int64_t r0 = 0; r0 < nrows; r0 += DECODED_PANEL_ROWS) {
        auto * panel = reinterpret_cast<PanelBlock *>(static_cast<char *>(out) + size_t(r0 / DECODED_PANEL_ROWS) * pitch);
        for (int64_t i = 0; i < nb; ++i) {
            PanelBlock & p = panel[i];
            std::memset(&p, 0, sizeof p);
            for (int row = 0; row < DECODED_PANEL_ROWS && r0 + row < nrows; ++row) {
                W        scratch;
                IDecoded w;
                D::decode(block(r0 + row, i, scratch), w);
                alignas(32) int8_t levels[QK_K];
                for (int j = 0; j < 8; ++j) {
                    _mm256_store_si256(reinterpret_cast<__m256i *>(levels + 32 * j), w.q[j]);
                    p.sc[2 * j][row]     = int16_t(_mm256_extract_epi16(w.sc[j], 0));
                    p.sc[2 * j + 1][row] = int16_t(_mm256_extract_epi16(w.sc[j], 8));
                }
                for (int g = 0; g < 16; ++g) {
                    for (int k = 0; k < 4; ++k) {
                        const int8_t * v = levels + 16 * g + 4 * k;
                        std::memcpy(p.q[g][k][row], v, 4);
                        p.bias[row] += 128 * int32_t(p.sc[g][row]) * (v[0] + v[1] + v[2] + v[3]);
                    }
                }
                p.d[row] = w.d;
            }
        }
    }
}

template <class D>
void panel_decode_rows(int64_t K, const void * a, size_t lda, int64_t nrows, void * out) {
    using W = typename D::W;
    panel_decode_blocks<D>(K, nrows, out, [&](int64_t row, int64_t i, W &) -> const W & {
        return reinterpret_cast<const W *>(static_cast<const char *>(a) + size_t(row) * lda)[i];
    });
}

template <int C>
void panel_gemv_cols(int64_t nb, const char * a, size_t pitch, int64_t nrows, const char * b, size_t ldb, float * dst,
                     size_t ldd) {
    const block_q8_K * bc[C];
    for (int c = 0; c < C; ++c) {
        bc[c] = reinterpret_cast<const block_q8_K *>(b + size_t(c) * ldb);
    }
    const __m512i offset = _mm512_set1_epi8(char(0x80));
    for (int64_t r0 = 0; r0 < nrows; r0 += DECODED_PANEL_ROWS) {
        const auto * panel = reinterpret_cast<const PanelBlock *>(a + size_t(r0 / DECODED_PANEL_ROWS) * pitch);
        __m512       f[C][8];
        for (int c = 0; c < C; ++c) {
            for (int l = 0; l < 8; ++l) {
                f[c][l] = _mm512_setzero_ps();
            }
        }
        for (int64_t i = 0; i < nb; ++i) {
            const PanelBlock & p = panel[i];
            // The columns' bytes of this block, made unsigned.
            alignas(64) uint8_t y[C][QK_K];
            for (int c = 0; c < C; ++c) {
                for (int h = 0; h < QK_K / 64; ++h) {
                    _mm512_store_si512(y[c] + 64 * h, _mm512_xor_si512(panel_load(bc[c][i].qs + 64 * h), offset));
                }
            }
            __m512i acc[C];
            for (int c = 0; c < C; ++c) {
                acc[c] = _mm512_setzero_si512();
            }
            for (int g = 0; g < 16; ++g) {
                const __m512i w0 = panel_load(p.q[g][0]), w1 = panel_load(p.q[g][1]);
                const __m512i w2 = panel_load(p.q[g][2]), w3 = panel_load(p.q[g][3]);
                const __m512i sc =
                    _mm512_maskz_cvtepi16_epi32(k_panel_all, _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p.sc[g])));
                for (int c = 0; c < C; ++c) {
                    const uint8_t * yg = y[c] + 16 * g;
                    __m512i         t  = _mm512_dpbusd_epi32(_mm512_setzero_si512(), panel_bcast4(yg), w0);
                    t                  = _mm512_dpbusd_epi32(t, panel_bcast4(yg + 4), w1);
                    t                  = _mm512_dpbusd_epi32(t, panel_bcast4(yg + 8), w2);
                    t                  = _mm512_dpbusd_epi32(t, panel_bcast4(yg + 12), w3);
                    acc[c]             = _mm512_add_epi32(acc[c], _mm512_mullo_epi32(t, sc));
                }
            }
            const __m512i bias = panel_load(p.bias);
            const __m512  d    = _mm512_loadu_ps(p.d);
            for (int c = 0; c < C; ++c) {
                const __m512 isum  = _mm512_maskz_cvtepi32_ps(k_panel_all, _mm512_sub_epi32(acc[c], bias));
                const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(bc[c][i].d), d);
                f[c][i % 8]        = _mm512_fmadd_ps(scale, isum, f[c][i % 8]);
            }
        }
        for (int c = 0; c < C; ++c) {
            panel_finish<1>(f[c], nb, dst + size_t(c) * ldd + size_t(r0), nrows - r0);
        }
    }
}

void panel_gemv_decoded(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                        float * dst, size_t ldd) {
    const int64_t nb    = K / QK_K;
    const size_t  pitch = size_t(DECODED_PANEL_ROWS) * lda;
    const auto *  ac    = static_cast<const char *>(a);
    const auto *  bc    = static_cast<const char *>(b);
    with_gemv_cols(ncols, [&](auto cols) { panel_gemv_cols<decltype(cols)::value>(nb, ac, pitch, nrows, bc, ldb, dst, ldd); });
}

} // namespace

void add_iquant_panel_kernels(KernelTable & t) {
#define LOOM_IQ_PANEL_SET(E, D)                                                                                    \
    t.decode_rows[GGML_TYPE_##E]  = panel_decode_rows<D>;                                                              \
    t.gemv_decoded[GGML_TYPE_##E] = panel_gemv_decoded;
    LOOM_IQ_TYPES(LOOM_IQ_PANEL_SET)
#undef LOOM_IQ_PANEL_SET
    t.decode_rows[GGML_TYPE_IQ4_XS]  = panel_decode_rows<IQ4Levels>;
    t.gemv_decoded[GGML_TYPE_IQ4_XS] = panel_gemv_decoded;
}
