// The AVX2 f32 GEMM micro-kernel: a 16 x 6 tile of dst in 12 registers.
// Per k it loads 16 values of the packed a panel (two registers) and
// broadcasts 6 of the packed b panel, for 12 FMAs: two FMA units stay busy
// while loads use the remaining ports.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "core/types.h"

#include "backends/cpu/simd/kernel_table.h"
#include "backends/cpu/simd/tile_prefetch.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

namespace {

constexpr int MR = GEMM_MR;
constexpr int NR = GEMM_NR;

// The k loop on a tile held in registers: lo[j] and hi[j] are rows 0..7 and
// 8..15 of column j.
inline void tile_loop(int64_t kc, const float * ap, const float * bp, __m256 (&lo)[NR], __m256 (&hi)[NR]) {
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; ++k) {
        const __m256 a0 = _mm256_loadu_ps(ap);
        const __m256 a1 = _mm256_loadu_ps(ap + 8);
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) {
            const __m256 b = _mm256_broadcast_ss(bp + j);
            lo[j]          = _mm256_fmadd_ps(a0, b, lo[j]);
            hi[j]          = _mm256_fmadd_ps(a1, b, hi[j]);
        }
        ap += MR;
        bp += NR;
    }
}

} // namespace

void gemm_micro(int64_t kc, const float * ap, const float * bp, float * c, size_t ldc, int m, int n,
                bool accumulate) {
    __m256 lo[NR], hi[NR];
    prefetch_next_tile<NR>(c, ldc, MR * sizeof(float)); // Note [C lines ahead]
    if (m == MR && n == NR) {
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) {
            lo[j] = accumulate ? _mm256_loadu_ps(c + size_t(j) * ldc) : _mm256_setzero_ps();
            hi[j] = accumulate ? _mm256_loadu_ps(c + size_t(j) * ldc + 8) : _mm256_setzero_ps();
        }
        tile_loop(kc, ap, bp, lo, hi);
#pragma GCC unroll 6
        for (int j = 0; j < NR; ++j) {
            _mm256_storeu_ps(c + size_t(j) * ldc, lo[j]);
            _mm256_storeu_ps(c + size_t(j) * ldc + 8, hi[j]);
        }
        return;
    }
    // An edge tile goes through a full-size buffer so the k loop is the same
    // code; each element still sees the same sequence of operations.
    alignas(32) float buf[NR][MR] = {};
    if (accumulate) {
        for (int j = 0; j < n; ++j) {
            std::memcpy(buf[j], c + size_t(j) * ldc, size_t(m) * sizeof(float));
        }
    }
    for (int j = 0; j < NR; ++j) {
        lo[j] = _mm256_load_ps(buf[j]);
        hi[j] = _mm256_load_ps(buf[j] + 8);
    }
    tile_loop(kc, ap, bp, lo, hi);
    for (int j = 0; j < NR; ++j) {
        _mm256_store_ps(buf[j], lo[j]);
        _mm256_store_ps(buf[j] + 8, hi[j]);
    }
    for (int j = 0; j < n; ++j) {
        std::memcpy(c + size_t(j) * ldc, buf[j], size_t(m) * sizeof(float));
    }
}

namespace {

// In-register transpose of 8 rows of 8 floats: on return r[k] holds element
// k of every row.
inline void transpose8(__m256 (&r)[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// Rows [i0, i0 + 8) of a panel of the given width, 8 values of k at a time;
// rows past nrows read as zeros. Returns the k where the 8-wide steps ended.
// keep: how many of the 8 transposed values go into the panel per k (8, or
// 6 for the last group of a 6-wide panel).
inline int64_t pack8(const float * const * rows, int i0, int nrows, int width, int keep, int64_t kb,
                     float * panel) {
    int64_t k = 0;
    for (; k + 8 <= kb; k += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) {
            r[i] = i0 + i < nrows ? _mm256_loadu_ps(rows[i0 + i] + k) : _mm256_setzero_ps();
        }
        transpose8(r);
        for (int t = 0; t < 8; ++t) {
            float * out = panel + (k + t) * width + i0;
            if (keep == 8) {
                _mm256_storeu_ps(out, r[t]);
            } else {
                _mm_storeu_ps(out, _mm256_castps256_ps128(r[t]));
                _mm_storel_pi(reinterpret_cast<__m64 *>(out + 4), _mm256_extractf128_ps(r[t], 1));
            }
        }
    }
    return k;
}

} // namespace

// 8 x 8 transposes in registers for the widths of this table (16 for a,
// 6 for b), the scalar loop for the remainder of k and any other width.
void gemm_pack(const float * const * rows, int nrows, int width, int64_t kb, float * panel) {
    int64_t k_done = 0;
    if (width == MR) {
        pack8(rows, 0, nrows, width, 8, kb, panel);
        k_done = pack8(rows, 8, nrows, width, 8, kb, panel);
    } else if (width == NR) {
        k_done = pack8(rows, 0, nrows, width, NR, kb, panel);
    }
    for (int64_t k = k_done; k < kb; ++k) {
        for (int i = 0; i < width; ++i) {
            panel[k * width + i] = i < nrows ? rows[i][k] : 0.0f;
        }
    }
}

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
