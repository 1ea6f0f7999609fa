#pragma once

// Kernels of the AVX-512 BF16 table (the AVX-512 table plus BF16 products on
// vdpbf16ps). The table takes every other entry from the AVX-512 table.
// Include between target_begin.h and target_end.h.

#include <cstddef>
#include <cstdint>

namespace loom::cpu::avx512bf16 {

void gemv_bf16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);

} // namespace loom::cpu::avx512bf16
