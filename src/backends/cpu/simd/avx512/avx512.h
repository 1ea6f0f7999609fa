#pragma once

// Kernels of the AVX-512 table (AVX-512 F, BW, VL and VNNI). The table takes
// every other entry from the AVX2 table. Include between target_begin.h and
// target_end.h.

#include <cstddef>
#include <cstdint>

namespace loom::cpu::avx512 {

void gemv_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);
void gemv_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);

} // namespace loom::cpu::avx512
