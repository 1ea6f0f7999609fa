// The BF16 GEMM micro-kernel and its packing, on vdpbf16ps.
//
// Tile: MR = 32 rows (two registers of 16 fp32 lanes) x NR = 12 columns, 24
// accumulators. Per pair of k the kernel loads the 32 rows' pairs from the a
// panel and broadcasts each column's pair from the b panel, for 24
// vdpbf16ps: each multiplies two values of k per lane (Note [BF16 pairs] in
// gemv.cpp), twice the work of an FMA on f32 panels.
//
// Packing transposes 16 x 16 blocks of 32-bit words in registers
// (avx512/gemm_common.h): 16 rows (or columns) times 16 pairs of k in, 16
// pairs times 16 rows out. Loads past the end of k are masked, so an odd kb
// gets its zero partner and no byte past a row is read.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx512bf16.h"
#include "backends/cpu/simd/avx512/gemm_common.h"

namespace loom::cpu::avx512bf16 {

namespace {

constexpr int MR = GEMM_BF16_MR;
constexpr int NR = GEMM_BF16_NR;
constexpr int G  = MR / 16; // registers per column of the tile

inline __m512bh as_bf16(__m512i v) {
    return (__m512bh) v;
}

// GCC 12 reports the undefined inputs that the unmasked forms of some
// AVX-512 intrinsics pass to their builtins as maybe uninitialized; the
// zero-masked forms with every lane selected are the same instructions.
constexpr __mmask16 k_all = 0xffff;

// ---- the micro-kernel ----

inline void tile_loop(int64_t kp, const uint32_t * ap, const uint32_t * bp, __m512 (&acc)[NR][G]) {
#pragma GCC unroll 2
    for (int64_t p = 0; p < kp; ++p) {
        __m512i a[G];
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) a[g] = _mm512_loadu_si512(ap + 16 * g);
#pragma GCC unroll 12
        for (int j = 0; j < NR; ++j) {
            const __m512i b = _mm512_set1_epi32(int(bp[j]));
#pragma GCC unroll 2
            for (int g = 0; g < G; ++g) acc[j][g] = _mm512_dpbf16_ps(acc[j][g], as_bf16(a[g]), as_bf16(b));
        }
        ap += MR;
        bp += NR;
    }
}

// ---- packing ----

// Stores the first np pairs of transposed rows: the width lanes selected by
// keep go to panel + t * width.
inline void store_pairs(const __m512i (&r)[16], int np, int width, __mmask16 keep, uint32_t * panel) {
    for (int t = 0; t < np; ++t) _mm512_mask_storeu_epi32(panel + size_t(t) * size_t(width), keep, r[t]);
}

// 16 f32 values (as bits) rounded to bf16 as the core's fp32_to_bf16: to
// nearest even, NaNs kept quiet. Each result in the low half of its lane.
inline __m512i round_bf16(__m512i u) {
    const __m512i   hi  = _mm512_maskz_srli_epi32(k_all, u, 16);
    const __m512i   lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i   r   = _mm512_maskz_srli_epi32(
        k_all, _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(64));
}

// 32 values of a column from k (n of them, the rest zeros) as 16 pairs.
inline __m512i column_pairs(const char * col, size_t step, int64_t k, int n) {
    __m512i u0, u1;
    if (step == sizeof(float)) {
        const auto * f = reinterpret_cast<const float *>(col) + k;
        u0             = _mm512_castps_si512(_mm512_maskz_loadu_ps(first16(n), f));
        u1             = _mm512_castps_si512(_mm512_maskz_loadu_ps(first16(n - 16 > 0 ? n - 16 : 0), f + 16));
    } else {
        alignas(64) float tmp[32] = {};
        for (int i = 0; i < n; ++i) std::memcpy(&tmp[i], col + size_t(k + i) * step, sizeof(float));
        u0 = _mm512_castps_si512(_mm512_load_ps(tmp));
        u1 = _mm512_castps_si512(_mm512_load_ps(tmp + 16));
    }
    // The low halves of the 32 lanes, in order: word 2i of u0 then of u1.
    const __m512i even = _mm512_setr_epi32(0x00020000, 0x00060004, 0x000a0008, 0x000e000c, 0x00120010, 0x00160014,
                                           0x001a0018, 0x001e001c, 0x00220020, 0x00260024, 0x002a0028, 0x002e002c,
                                           0x00320030, 0x00360034, 0x003a0038, 0x003e003c);
    return _mm512_permutex2var_epi16(round_bf16(u0), even, round_bf16(u1));
}

} // namespace

void gemm_bf16_micro(int64_t kb, const uint32_t * ap, const uint32_t * bp, float * c, size_t ldc, int m, int n,
                     bool accumulate) {
    const int64_t kp = (kb + 1) / 2;
    gemm_tile<NR, G>(c, ldc, m, n, accumulate, [&](__m512 (&acc)[NR][G]) { tile_loop(kp, ap, bp, acc); });
}

void gemm_bf16_pack_a(const uint16_t * const * rows, int nrows, int64_t kb, uint32_t * panel) {
    for (int g = 0; g < G; ++g) {
        for (int64_t k = 0; k < kb; k += 32) {
            const int n = int(kb - k < 32 ? kb - k : 32);
            const auto m = __mmask32(n == 32 ? 0xffffffffu : (1u << n) - 1);
            __m512i    r[16];
            for (int i = 0; i < 16; ++i) {
                const int row = 16 * g + i;
                r[i]          = row < nrows ? _mm512_maskz_loadu_epi16(m, rows[row] + k) : _mm512_setzero_si512();
            }
            transpose16_words(r);
            store_pairs(r, (n + 1) / 2, MR, 0xffff, panel + (k / 2) * MR + 16 * g);
        }
    }
}

void gemm_bf16_pack_b(const char * const * cols, size_t step, int ncols, int64_t kb, uint32_t * panel) {
    static_assert(NR <= 16);
    for (int64_t k = 0; k < kb; k += 32) {
        const int n = int(kb - k < 32 ? kb - k : 32);
        __m512i   r[16];
        for (int j = 0; j < 16; ++j) r[j] = j < ncols ? column_pairs(cols[j], step, k, n) : _mm512_setzero_si512();
        transpose16_words(r);
        store_pairs(r, (n + 1) / 2, NR, first16(NR), panel + (k / 2) * NR);
    }
}

} // namespace loom::cpu::avx512bf16

#include "target_end.h"

#endif // x86
