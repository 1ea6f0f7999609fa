// The AVX-512 table's K-quant matrix-vector products and Q8_K quantizer:
// the code of avx2/kquants_impl.h (Note [K-quant products]) compiled for
// AVX-512, where the decoded super-block stays in the 32 vector registers,
// with each column's block product on 512-bit registers (Note [K-quant
// products on 512-bit registers]), every K-quant decoded straight into that
// form; Q2_K, Q4_K and Q5_K with exact block totals (Note [K-quant block
// totals]), Q6_K with folded ones (Note [Folded block totals]), the rows of
// Q4_K and Q6_K decoded once into VNNI panels for products of many columns
// (Notes [K-quant panels], [Q6_K panels]).

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"

#include "target_begin.h"
#include "avx512.h"

namespace loom::cpu::avx512 {

#define LOOM_KQ_512 1
#include "../avx2/kquants_impl.h"
#undef LOOM_KQ_512
#include "panel_common.h"
#include "kquant_panels.h"

} // namespace loom::cpu::avx512

#include "target_end.h"

#endif // x86
