// Q8_0 rows interleaved by eight (Note [Q8_0 rows by eight] in repack.h)
// on the AVX2 table: its qgemm_q8_0_x8 entries, every column count.
//
// Note [Q8_0 by eight on 256-bit registers]
// A register of weights is one word of a group's eight rows (four values of
// each, row r in lane r), stored plus 128. Back to signed bytes (one XOR),
// its magnitudes meet the column's four matching bytes, broadcast and
// given the weights' signs, in one maddubs: the products of a row stay in
// its lane. Each maddubs lane may reach 2 * 127 * 128, so every word takes
// its own madd with ones (as the two-rows-per-register tiles take one per
// half, Note [Two rows per register] in rows2.cpp), and the words of
// values 0-7 and 16-23 add into one int32 sum per row, the others into a
// second: the two exact sums per row and block of those tiles (Note [Four
// rows per conversion]), each converted, scaled by the row's d times the
// column's and added into an f32 accumulator of its own, a row's result the
// sum of the two. So the results have the bits of gemv2_q8_0 and
// qgemm2_q8_0 on the same weights in ggml's layout.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

namespace {

constexpr size_t Q8R_QUAD = 8 * 4 * sizeof(block_q8_0); // a quad of blocks of a group: 1088 bytes
constexpr size_t Q8R_QS   = 64;                          // the quad's qs, after its 32 scales
constexpr size_t Q8R_PREFETCH = 2048;

// A prepared column block: the 32 values and the scale as a float. Block i
// of column c of a call at (i * ncols + c) * PREP_BYTES.
constexpr size_t PREP_D     = 32;
constexpr size_t PREP_BYTES = 48;

// Columns a pass meets: their int32 sums, the word being read and the
// f32 sums fit the 16 registers.
constexpr int PASS_COLS = 4;

[[gnu::always_inline]] inline __m256i bcast4(const uint8_t * p) {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

// Slot of word w in a block (Note [Q8_0 rows by eight]).
constexpr size_t slot_of(size_t w) {
    return 4 * (w / 4) + 2 * (w % 2) + w % 4 / 2;
}

// One group (its rows' results at dst) x columns c0 .. c0 + C - 1 of ncols
// over blocks [i0, i1); register h of column c waits at carry + 8 (2 c + h)
// between parts of K.
template <int C>
void group_cols(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, int c0, float * carry,
                bool first, bool last, bool fetch, float * dst, size_t ldd) {
    __m256 acc[C][2];
    for (int c = 0; c < C; ++c) {
        for (int h = 0; h < 2; ++h) {
            acc[c][h] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(carry + 8 * (2 * (c0 + c) + h));
        }
    }
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    const __m256i one  = _mm256_set1_epi16(1);
    for (int64_t i = i0; i < i1; ++i) {
        const uint8_t * q = g + size_t(i / 4) * Q8R_QUAD;
        const size_t    k = size_t(i % 4);
        if (fetch && k == 0) {
            for (size_t l = 0; l < Q8R_QUAD; l += 64) {
                _mm_prefetch(reinterpret_cast<const char *>(q + Q8R_PREFETCH + l), _MM_HINT_T0);
            }
        }
        const uint8_t * y[C];
        for (int c = 0; c < C; ++c) y[c] = prep + (size_t(i) * size_t(ncols) + size_t(c0 + c)) * PREP_BYTES;
        __m256i sum[C][2];
        for (int c = 0; c < C; ++c) sum[c][0] = sum[c][1] = _mm256_setzero_si256();
        for (size_t w = 0; w < 8; ++w) {
            const __m256i x = _mm256_xor_si256(
                _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + Q8R_QS + 256 * k + 32 * slot_of(w))), flip);
            const __m256i ax = _mm256_sign_epi8(x, x);
            const int     h  = (w / 2) % 2; // words 0, 1, 4, 5: values 0-7 and 16-23
            for (int c = 0; c < C; ++c) {
                const __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(bcast4(y[c] + 4 * w), x));
                sum[c][h]       = _mm256_add_epi32(sum[c][h], _mm256_madd_epi16(p, one));
            }
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 16 * k)));
        for (int c = 0; c < C; ++c) {
            const __m256 s = _mm256_mul_ps(d, _mm256_broadcast_ss(reinterpret_cast<const float *>(y[c] + PREP_D)));
            acc[c][0]      = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sum[c][0]), acc[c][0]);
            acc[c][1]      = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sum[c][1]), acc[c][1]);
        }
    }
    for (int c = 0; c < C; ++c) {
        if (last) {
            _mm256_storeu_ps(dst + size_t(c0 + c) * ldd, _mm256_add_ps(acc[c][0], acc[c][1]));
        } else {
            for (int h = 0; h < 2; ++h) _mm256_storeu_ps(carry + 8 * (2 * (c0 + c) + h), acc[c][h]);
        }
    }
}

// More columns than a pass takes: a group's blocks are turned back to
// signed bytes and their magnitudes once, CHUNK blocks at a time, into a
// buffer on the stack (in L1), and every pass of PASS_COLS columns reads
// them there instead of decoding them again; the f32 sums of all ncols
// columns wait in memory between passes. Each sum takes the same
// operations in the same order as in group_cols(): the same bits.
constexpr int64_t CHUNK = 16;

struct Decoded {
    __m256i x[8], ax[8]; // words 0..7: signed, and their magnitudes
    __m256  d;
};

template <int C>
void chunk_cols(const Decoded * dec, int64_t i0, int64_t n, const uint8_t * prep, int ncols, int c0, float (*sums)[2][8]) {
    __m256 acc[C][2];
    for (int c = 0; c < C; ++c) {
        for (int h = 0; h < 2; ++h) acc[c][h] = _mm256_load_ps(sums[c0 + c][h]);
    }
    const __m256i one = _mm256_set1_epi16(1);
    for (int64_t j = 0; j < n; ++j) {
        const Decoded & b = dec[j];
        const uint8_t * y[C];
        for (int c = 0; c < C; ++c) y[c] = prep + (size_t(i0 + j) * size_t(ncols) + size_t(c0 + c)) * PREP_BYTES;
        __m256i sum[C][2];
        for (int c = 0; c < C; ++c) sum[c][0] = sum[c][1] = _mm256_setzero_si256();
        for (size_t w = 0; w < 8; ++w) {
            const int h = (w / 2) % 2;
            for (int c = 0; c < C; ++c) {
                const __m256i p = _mm256_maddubs_epi16(b.ax[w], _mm256_sign_epi8(bcast4(y[c] + 4 * w), b.x[w]));
                sum[c][h]       = _mm256_add_epi32(sum[c][h], _mm256_madd_epi16(p, one));
            }
        }
        for (int c = 0; c < C; ++c) {
            const __m256 s = _mm256_mul_ps(b.d, _mm256_broadcast_ss(reinterpret_cast<const float *>(y[c] + PREP_D)));
            acc[c][0]      = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sum[c][0]), acc[c][0]);
            acc[c][1]      = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(sum[c][1]), acc[c][1]);
        }
    }
    for (int c = 0; c < C; ++c) {
        for (int h = 0; h < 2; ++h) _mm256_store_ps(sums[c0 + c][h], acc[c][h]);
    }
}

void group_chunked(const uint8_t * g, int64_t i0, int64_t i1, const uint8_t * prep, int ncols, float * carry,
                   bool first, bool last, float * dst, size_t ldd) {
    alignas(32) float sums[QGEMM_COLS][2][8];
    for (int c = 0; c < ncols; ++c) {
        for (int h = 0; h < 2; ++h) {
            const __m256 v = first ? _mm256_setzero_ps() : _mm256_loadu_ps(carry + 8 * (2 * c + h));
            _mm256_store_ps(sums[c][h], v);
        }
    }
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    Decoded       dec[CHUNK];
    for (int64_t s0 = i0; s0 < i1; s0 += CHUNK) {
        const int64_t n = std::min(CHUNK, i1 - s0);
        for (int64_t j = 0; j < n; ++j) {
            const uint8_t * q = g + size_t((s0 + j) / 4) * Q8R_QUAD;
            const size_t    k = size_t((s0 + j) % 4);
            for (size_t w = 0; w < 8; ++w) {
                dec[j].x[w] = _mm256_xor_si256(
                    _mm256_loadu_si256(reinterpret_cast<const __m256i *>(q + Q8R_QS + 256 * k + 32 * slot_of(w))), flip);
                dec[j].ax[w] = _mm256_sign_epi8(dec[j].x[w], dec[j].x[w]);
            }
            dec[j].d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(q + 16 * k)));
        }
        for (int c0 = 0; c0 < ncols; c0 += PASS_COLS) {
            switch (std::min(PASS_COLS, ncols - c0)) {
                case 1: chunk_cols<1>(dec, s0, n, prep, ncols, c0, sums); break;
                case 2: chunk_cols<2>(dec, s0, n, prep, ncols, c0, sums); break;
                case 3: chunk_cols<3>(dec, s0, n, prep, ncols, c0, sums); break;
                default: chunk_cols<4>(dec, s0, n, prep, ncols, c0, sums); break;
            }
        }
    }
    for (int c = 0; c < ncols; ++c) {
        if (last) {
            _mm256_storeu_ps(dst + size_t(c) * ldd, _mm256_add_ps(_mm256_load_ps(sums[c][0]), _mm256_load_ps(sums[c][1])));
        } else {
            for (int h = 0; h < 2; ++h) _mm256_storeu_ps(carry + 8 * (2 * c + h), _mm256_load_ps(sums[c][h]));
        }
    }
}

} // namespace

size_t qcols_bytes_q8_0_by8(int64_t K) {
    return size_t(K / QK8_0) * size_t(QGEMM_COLS) * PREP_BYTES;
}

void qcols_prepare_q8_0_by8(int64_t K, const void * b, size_t ldb, int ncols, void * out) {
    const int64_t nb = K / QK8_0;
    auto *        o  = static_cast<uint8_t *>(out);
    for (int c = 0; c < ncols; ++c) {
        const auto * bc = reinterpret_cast<const block_q8_0 *>(static_cast<const char *>(b) + size_t(c) * ldb);
        for (int64_t i = 0; i < nb; ++i) {
            uint8_t * p = o + (size_t(i) * size_t(ncols) + size_t(c)) * PREP_BYTES;
            std::memcpy(p, bc[i].qs, QK8_0);
            const float d = half_to_float(bc[i].d);
            std::memcpy(p + PREP_D, &d, sizeof d);
            std::memset(p + PREP_D + sizeof d, 0, PREP_BYTES - PREP_D - sizeof d);
        }
    }
}

void qgemm_q8_0_by8(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                    const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd) {
    (void) b;
    (void) ldb;
    const int64_t nb     = K / QK8_0;
    const bool    first  = i0 == 0;
    const bool    last   = i1 == nb;
    const bool    stream = first && last; // weights read once, from memory
    const auto *  ac     = static_cast<const uint8_t *>(a);
    const auto *  pc     = static_cast<const uint8_t *>(prep);
    for (int64_t g = 0; g < nrows / 8; ++g) {
        const uint8_t * base  = ac + size_t(g) * 8 * lda;
        float *         carry = acc != nullptr && !stream ? acc + size_t(g) * 16 * QGEMM_COLS : nullptr;
        float *         out   = dst + 8 * g;
        if (ncols > PASS_COLS) {
            group_chunked(base, i0, i1, pc, ncols, carry, first, last, out, ldd);
            continue;
        }
        for (int c0 = 0; c0 < ncols; c0 += PASS_COLS) {
            const bool fetch = stream && c0 == 0;
            switch (std::min(PASS_COLS, ncols - c0)) {
                case 1: group_cols<1>(base, i0, i1, pc, ncols, c0, carry, first, last, fetch, out, ldd); break;
                case 2: group_cols<2>(base, i0, i1, pc, ncols, c0, carry, first, last, fetch, out, ldd); break;
                case 3: group_cols<3>(base, i0, i1, pc, ncols, c0, carry, first, last, fetch, out, ldd); break;
                default: group_cols<4>(base, i0, i1, pc, ncols, c0, carry, first, last, fetch, out, ldd); break;
            }
        }
    }
}

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
