// The AVX-512 table's products of Q4_1, Q5_0 and Q5_1 weights: the 256-bit
// code of avx2/legacy_impl.h (Note [Legacy quant products]) compiled for
// AVX-512.

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"

#include "target_begin.h"
#include "avx512.h"

namespace loom::cpu::avx512 {

#include "../avx2/legacy_impl.h"

} // namespace loom::cpu::avx512

#include "target_end.h"

#endif // x86
