// The quantized products of the NEON dot-product table: four byte products
// per 32-bit lane in one SDOT. Compiled for armv8.2-a+dotprod; the table
// that holds them is built only where the processor reports the extension.

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>
#include <utility>

#include "core/fp16.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"
#include "neon.h"

#include "dot_target_begin.h"

namespace loom::cpu::neon_dot {

namespace {

// The products of 32 signed bytes as four 32-bit lanes summing to the total.
inline int32x4_t dot32(int8x16_t x0, int8x16_t x1, int8x16_t y0, int8x16_t y1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), x0, y0), x1, y1);
}

inline int32_t block_sum(int8x16_t x0, int8x16_t x1, int8x16_t y0, int8x16_t y1) {
    return vaddvq_s32(dot32(x0, x1, y0, y1));
}

inline int sum32(int8x16_t x0, int8x16_t x1, int8x16_t y0, int8x16_t y1) {
    return block_sum(x0, x1, y0, y1);
}

inline int sum16(int8x16_t q, int8x16_t y) {
    return vaddvq_s32(vdotq_s32(vdupq_n_s32(0), q, y));
}

#include "core/types/fp4_values.inc"
#include "quants_impl.h"
#include "kquants_impl.h"

} // namespace

#include "quants_entries.h"

} // namespace loom::cpu::neon_dot

#include "dot_target_end.h"

#endif // __aarch64__
