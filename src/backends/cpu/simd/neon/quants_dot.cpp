// The Q8_0/Q4_0 products of the NEON dot-product table: four byte products
// per 32-bit lane in one SDOT. Compiled for armv8.2-a+dotprod; the table
// that holds them is built only where the processor reports the extension.

#if defined(__aarch64__)

#include <arm_neon.h>

#include "core/fp16.h"
#include "neon.h"

#if defined(__clang__)
#    pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#elif defined(__GNUC__)
#    pragma GCC push_options
#    pragma GCC target("arch=armv8.2-a+dotprod")
#endif

namespace loom::cpu::neon_dot {

namespace {

inline int32_t block_sum(int8x16_t x0, int8x16_t x1, int8x16_t y0, int8x16_t y1) {
    return vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), x0, y0), x1, y1));
}

#include "quants_impl.h"

} // namespace

float dot_q8_0_q8_0(int64_t n, const block_q8_0 * x, const block_q8_0 * y) {
    return dot_blocks<Q80>(n, x, y);
}

float dot_q4_0_q8_0(int64_t n, const block_q4_0 * x, const block_q8_0 * y) {
    return dot_blocks<Q40>(n, x, y);
}

void gemv_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv<Q80>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

void gemv_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd) {
    gemv<Q40>(K, a, lda, nrows, b, ldb, ncols, dst, ldd);
}

} // namespace loom::cpu::neon_dot

#if defined(__clang__)
#    pragma clang attribute pop
#elif defined(__GNUC__)
#    pragma GCC pop_options
#endif

#endif // __aarch64__
