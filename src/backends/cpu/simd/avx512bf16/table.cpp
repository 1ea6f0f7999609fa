// The AVX-512 BF16 kernel table: the AVX-512 table with the BF16 products
// (matrix-vector and GEMM) on vdpbf16ps, built on the first call of
// avx512bf16_kernels() after avx512bf16_table_runs() said yes: the AVX-512
// table runs and the processor and the OS support AVX512_BF16 as well.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx512bf16.h"
#include "target_end.h"

namespace loom::cpu {

namespace {

const GemmBf16 k_gemm_bf16 = {
    avx512bf16::gemm_bf16_pack_a,
    avx512bf16::gemm_bf16_pack_b,
    avx512bf16::gemm_bf16_micro,
    avx512bf16::GEMM_BF16_MR,
    avx512bf16::GEMM_BF16_NR,
    // an a panel of 32 rows x 256 k (16 KiB) stays in L1 next to a b panel
    // (6 KiB); a chunk of 64 rows and the b block of 256 x 4092 (2 MiB)
    // stay in L2 and L3 as the f32 GEMM's do.
    64,
    256,
    4092,
};

} // namespace

const KernelTable * avx512bf16_kernels() {
    if (!avx512bf16_table_runs()) return nullptr;
    static const KernelTable table = [] {
        KernelTable t = *avx512_kernels();
        t.name        = "avx512_bf16";
        t.gemv_bf16   = avx512bf16::gemv_bf16;
        t.gemm_bf16   = &k_gemm_bf16;
        return t;
    }();
    return &table;
}

} // namespace loom::cpu

#endif // x86
