#pragma once

// Kernels of the AVX-512 BF16 table (the AVX-512 table plus BF16 products on
// vdpbf16ps). The table takes every other entry from the AVX-512 table.
// Include between target_begin.h and target_end.h.

#include <cstddef>
#include <cstdint>

namespace loom::cpu::avx512bf16 {

void gemv_bf16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);

// The BF16 GEMM (GemmBf16 in kernel_table.h): a 32 x 12 register tile.
constexpr int GEMM_BF16_MR = 32;
constexpr int GEMM_BF16_NR = 12;
void gemm_bf16_micro(int64_t kb, const uint32_t * ap, const uint32_t * bp, float * c, size_t ldc, int m, int n,
                     bool accumulate);
void gemm_bf16_pack_a(const uint16_t * const * rows, int nrows, int64_t kb, uint32_t * panel);
void gemm_bf16_pack_b(const char * const * cols, size_t step, int ncols, int64_t kb, uint32_t * panel);

} // namespace loom::cpu::avx512bf16
