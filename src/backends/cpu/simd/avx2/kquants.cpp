// The AVX2 table's K-quant matrix-vector products and Q8_K quantizer (the
// code: kquants_impl.h, Note [K-quant products]), those of rows decoded
// once (q4k_panels.h, q6k_panels.h, kquant_rows.h), and those of Q4_K and
// IQ4_XS in the CPU_REPACK layout (q4k_repacked.h, iq4_xs_interleaved.h).

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>

#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"
#include "backends/cpu/simd/stream_prefetch.h"
#include "core/common.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"

#include "target_begin.h"
#include "avx2.h"

namespace loom::cpu::avx2 {

#include "kquants_impl.h"
#include "kquant_rows.h"
#include "q4k_repacked.h"
#include "q4k_panels.h"
#include "q6k_panels.h"
#include "iq4_xs_interleaved.h"

} // namespace loom::cpu::avx2

#include "target_end.h"

#endif // x86
