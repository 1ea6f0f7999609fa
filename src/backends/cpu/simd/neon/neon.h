#pragma once

// Kernels for 64-bit Arm's Advanced SIMD (NEON), with the kernel table's
// contracts (kernel_table.h). neon:: needs only the base architecture
// (armv8-a); neon_dot:: is compiled for the dot-product extension
// (armv8.2-a+dotprod, SDOT) and neon_i8mm:: for it and the 8-bit integer
// matrix multiply (+i8mm, SMMLA); each runs only where the processor has
// its extensions.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/simd/kernel_table.h"

namespace loom::cpu::neon {

// A half's value by the processor's conversion (FCVT): exact, the core's
// fp16_to_fp32 bits for every half but a signaling NaN, which it quiets.
// The core's function is integer code, several times as many instructions.
inline float half_to_f32(ggml_fp16_t h) {
    __fp16 f;
    std::memcpy(&f, &h, sizeof(f));
    return float(f);
}

float dot_f32(int64_t n, const float * x, const float * y);
float dot_f16(int64_t n, const ggml_fp16_t * x, const ggml_fp16_t * y);
float dot_bf16(int64_t n, const uint16_t * x, const uint16_t * y);
void  gemv_f32(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);
void  gemv_f16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);
void  gemv_bf16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void  fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n);
void  fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n);
void  bf16_to_fp32_row(const uint16_t * x, float * y, int64_t n);
float max_f32(int64_t n, const float * x);
// Weighted sums of f32 and f16 rows (attention's values), on fused
// multiply-adds (float.cpp).
void  mad_rows_f32(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w);
void  mad_rows_f16(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w);

// Element-wise rows with the portable table's bits (elementwise.cpp):
// d = a op b (op = +, -, *, / for Op 0..3), y = x s, the normalisations'
// sums in eight double lanes, rotary embedding and the AdamW step.
template <int Op> void binary_f32(int64_t n, const float * a, const float * b, float * d);
void scale_f32(int64_t n, const float * x, float s, float * y);
void sum_lanes_f64(int64_t n, const float * x, double * acc);
void sum_sq_lanes_f64(int64_t n, const float * x, double * acc);
void rope_f32(int64_t half, const float * x, float * y, const float * cos, const float * sin, bool neox);
void adamw_f32(int64_t n, float * w, const float * g, float * m, float * v, const AdamwStep & s);

// The recurrences' row steps (recurrence.cpp): the portable table's states,
// dot products on fused multiply-adds.
float decay_dot_f32(int64_t n, const float * s0, float * s, const float * a, float a0, const float * b, float bx,
                    const float * c, float cx, const float * r);
void  wkv7_rows_f32(int64_t n, int64_t rows, const float * s0, float * s, const float * r, const float * w,
                    const float * k, const float * v, const float * a, const float * b, float * out);
float delta_row_f32(int64_t n, float * s, const float * g, float g0, const float * k, float v, float beta,
                    const float * q);

// The f32 GEMM micro-kernel: a 16 x 4 tile.
constexpr int GEMM_MR = 16;
constexpr int GEMM_NR = 4;
void gemm_micro(int64_t kc, const float * ap, const float * bp, float * c, size_t ldc, int m, int n, bool accumulate);

// Softmax's exponentials and SiLU (activations.cpp).
double exp_sub_sum_f32(int64_t n, float * y, float max);
void   silu_f32(int64_t n, const float * x, float * y);

// The activation quantizers (quants.cpp).
void quantize_row_q8_0(const float * x, block_q8_0 * y, int64_t n);
void quantize_row_q8_K(const float * x, block_q8_K * y, int64_t n);
void quantize_row_q8_1(const float * x, block_q8_1 * y, int64_t n);
#include "quants_decls.h"

} // namespace loom::cpu::neon

namespace loom::cpu::neon_dot {

using neon::half_to_f32;

#include "quants_decls.h"

// Q4_0 rows repacked as Note [Interleaved Q4_0 rows] (repack.h) says, in
// sets of four (nrows a multiple of 4), against Q8_0 columns: the bits of
// gemv_q4_0 on the same rows in ggml's layout.
void gemv_q4_0_x4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd);
// Q4_K rows repacked as Note [Interleaved Q4_K rows] (repack.h) says, in
// sets of four (nrows a multiple of 4), against Q8_K columns: the bits of
// gemv_q4_K on the same rows in ggml's layout.
void gemv_q4_K_x4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd);

} // namespace loom::cpu::neon_dot

namespace loom::cpu::neon_i8mm {

// Q8_0 and Q4_0 rows against Q8_0 columns in tiles of 2 x 2 on SMMLA (i8mm.cpp); one
// column takes neon_dot's kernel. The bits of neon_dot's gemv_q8_0 and gemv_q4_0.
void gemv_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);
void gemv_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);

} // namespace loom::cpu::neon_i8mm
