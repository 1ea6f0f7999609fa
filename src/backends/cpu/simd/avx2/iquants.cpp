// The AVX2 table's matrix-vector products of the grid i-quants and the
// ternary types (the code: iquants_impl.h, Note [I-quant products]).

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

#include "iquants_impl.h"

#undef LOOM_IQ_TYPES

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
