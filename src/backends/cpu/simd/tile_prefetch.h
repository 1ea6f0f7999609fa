#pragma once

// Note [C lines ahead]
// The GEMM micro-kernels walk a row of C's tiles left to right (Note [GEMM
// panels]): the next tile has the same rows and starts NR columns on. Its
// columns lie ldc floats apart, a stride no hardware prefetcher follows, and
// a depth block after the first starts each tile with loads of C that the
// first FMAs wait for. A micro-kernel therefore asks for the next tile's
// lines as it starts its own. A prefetch never faults, so past the last tile
// of a row the requests cost nothing but themselves; the addresses are
// computed as integers for the same reason. Included by files of every
// instruction set: the function has internal linkage, as in gemm_common.h.
// (loom-bench, AVX2 table, one thread, 2048^3: 64.1 -> 73.6 GFLOP/s.)

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>

namespace loom::cpu {
namespace {

// The lines of columns [NR, 2 NR) of the tile at c, rows_bytes bytes each.
template <int NR> [[gnu::always_inline]] inline void prefetch_next_tile(const float * c, size_t ldc, size_t row_bytes) {
    const uintptr_t stride = uintptr_t(ldc) * sizeof(float);
    uintptr_t       col    = reinterpret_cast<uintptr_t>(c) + uintptr_t(NR) * stride;
    for (int j = 0; j < NR; ++j, col += stride) {
        for (uintptr_t off = 0; off < row_bytes; off += 64) {
            _mm_prefetch(reinterpret_cast<const char *>(col + off), _MM_HINT_T0);
        }
        _mm_prefetch(reinterpret_cast<const char *>(col + row_bytes - 1), _MM_HINT_T0);
    }
}

} // namespace
} // namespace loom::cpu
