// The AVX-512 BF16 kernel table: the AVX-512 table with the BF16 products on
// vdpbf16ps. Built without AVX-512 (it only copies addresses), so
// avx512bf16_kernels() is safe to call on any x86 processor; the dispatcher
// calls into the table only where the AVX-512 table runs and the processor
// and the OS support AVX512_BF16 as well.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "backends/cpu/simd/kernel_table.h"

#include "target_begin.h"
#include "avx512bf16.h"
#include "target_end.h"

namespace loom::cpu {

const KernelTable * avx512bf16_kernels() {
    static const KernelTable table = [] {
        KernelTable t = *avx512_kernels();
        t.name        = "avx512_bf16";
        t.gemv_bf16   = avx512bf16::gemv_bf16;
        return t;
    }();
    return &table;
}

} // namespace loom::cpu

#endif // x86
