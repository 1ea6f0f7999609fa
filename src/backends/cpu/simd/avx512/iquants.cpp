// The AVX-512 table's matrix-vector products of the grid i-quants and the
// ternary types: the 256-bit code of avx2/iquants_impl.h (Note [I-quant
// products]) compiled for AVX-512, as avx512/kquants.cpp compiles the
// K-quant products; IQ4_XS on 512-bit registers (iq4_xs.h), also with its
// rows interleaved (iq4_xs_interleaved.h); rows decoded once go into VNNI
// panels (iquant_panels.h, Note [Decoded panels]).

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"
#include "backends/cpu/simd/stream_prefetch.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"

#include "target_begin.h"
#include "avx512.h"

namespace loom::cpu::avx512 {

#include "../avx2/iquants_impl.h"
#include "iq4_xs.h"
#include "panel_common.h"
#include "iquant_panels.h"
#include "iq4_xs_interleaved.h"

#undef LOOM_IQ_TYPES

} // namespace loom::cpu::avx512

#include "target_end.h"

#endif // x86
