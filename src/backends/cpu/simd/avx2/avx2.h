#pragma once

// The AVX2 kernels. Include only between target_begin.h and target_end.h,
// so that declarations and definitions carry the same target, and include
// the headers below first, outside that region (see target_begin.h).

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"

namespace loom::cpu::avx2 {

float dot_f32(int64_t n, const float * x, const float * y);
float dot_f16(int64_t n, const ggml_fp16_t * x, const ggml_fp16_t * y);
float dot_bf16(int64_t n, const uint16_t * x, const uint16_t * y);
float dot_q8_0_q8_0(int64_t n, const block_q8_0 * x, const block_q8_0 * y);
float dot_q4_0_q8_0(int64_t n, const block_q4_0 * x, const block_q8_0 * y);

void quantize_row_q8_0(const float * x, block_q8_0 * y, int64_t n);
void fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n);
void fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n);
void bf16_to_fp32_row(const uint16_t * x, float * y, int64_t n);

void gemv_f32(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
              float * dst, size_t ldd);
void gemv_f16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
              float * dst, size_t ldd);
void gemv_bf16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);
void gemv_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);
void gemv_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);

#include "../quant_gemv.inc"
// Q4_K, Q6_K and IQ4_XS rows decoded once and their products (kquants.cpp,
// Notes [Q4_K panels of eight rows], [Q6_K panels of eight rows] and [IQ4_XS
// stored rows]): the decode_rows and gemv_decoded entries of this table.
void decode_rows_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, void * out);
void gemv_decoded_q4_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                       float * dst, size_t ldd);
// Q4_K in the CPU_REPACK layout (Note [Repacked Q4_K] in q4k_repacked.h):
// the gemv_repacked and decode_rows_repacked entries of this table.
void gemv_q4_K_repacked(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                        float * dst, size_t ldd);
void decode_rows_q4_K_repacked(int64_t K, const void * a, size_t lda, int64_t nrows, void * out);
// IQ4_XS rows interleaved by eight (Note [Interleaved IQ4_XS rows] in
// repack.h; Note [Interleaved IQ4_XS on 256-bit registers] in
// iq4_xs_interleaved.h): the gemv_repacked and decode_rows_repacked entries
// of this table, with the bits of gemv_iq4_xs and the rows of
// decode_rows_iq4_xs.
void gemv_iq4_xs_interleaved(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb,
                             int ncols, float * dst, size_t ldd);
void decode_rows_iq4_xs_interleaved(int64_t K, const void * a, size_t lda, int64_t nrows, void * out);
void decode_rows_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, void * out);
void gemv_decoded_q6_K(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                       float * dst, size_t ldd);
void decode_rows_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, void * out);
void gemv_decoded_iq4_xs(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                         float * dst, size_t ldd);

// Q4_0 and Q8_0 with two rows per register (rows2.cpp, Note [Two rows per
// register]): every column count, and on prepared columns (the same bits).
void   gemv2_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd);
void   gemv2_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd);
size_t qcols2_bytes(int64_t K);
void   qcols2_prepare_q4_0(int64_t K, const void * b, size_t ldb, int ncols, void * out);
void   qcols2_prepare_q8_0(int64_t K, const void * b, size_t ldb, int ncols, void * out);
void   qgemm2_q4_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                   const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd);
void   qgemm2_q8_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                   const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd);


// Q4_1, Q5_0, Q5_1, IQ4_NL and MXFP4 the same way (rows2_legacy.cpp, Note
// [Legacy rows per register]); Q5_0, IQ4_NL and MXFP4 on prepared columns.
void gemv2_q4_1(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void gemv2_q5_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void gemv2_q5_1(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void gemv2_iq4_nl(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd);
void gemv2_mxfp4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd);
void qcols2_prepare_q5_0(int64_t K, const void * b, size_t ldb, int ncols, void * out);
void qcols2_prepare_iq4_nl(int64_t K, const void * b, size_t ldb, int ncols, void * out);
void qcols2_prepare_mxfp4(int64_t K, const void * b, size_t ldb, int ncols, void * out);
void qgemm2_q5_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                 const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd);
void qgemm2_iq4_nl(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                   const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd);
void qgemm2_mxfp4(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                  const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd);

float  max_f32(int64_t n, const float * x);
double exp_sub_sum_f32(int64_t n, float * y, float max);
void   silu_f32(int64_t n, const float * x, float * y);
void   scale_f32(int64_t n, const float * x, float s, float * y);
// The normalisations' sums in eight double lanes (kernel_table.h).
void   sum_lanes_f64(int64_t n, const float * x, double * acc);
void   sum_sq_lanes_f64(int64_t n, const float * x, double * acc);
void   adamw_f32(int64_t n, float * w, const float * g, float * m, float * v, const AdamwStep & s);
void   rope_f32(int64_t half, const float * x, float * y, const float * cos, const float * sin, bool neox);
void   mad_rows_f32(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w);
void   mad_rows_f16(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w);
template <int Op> void binary_f32(int64_t n, const float * a, const float * b, float * d);

// Row steps of the linear recurrences (kernel_table.h; recurrence.cpp).
float decay_dot_f32(int64_t n, const float * s0, float * s, const float * a, float a0, const float * b, float bx, const float * c,
                    float cx, const float * r);
void wkv7_rows_f32(int64_t n, int64_t rows, const float * s0, float * s, const float * r, const float * w,
                   const float * k, const float * v, const float * a, const float * b, float * out);
float delta_row_f32(int64_t n, float * s, const float * g, float g0, const float * k, float v, float beta,
                    const float * q);

// 16 x 6 register tile.
constexpr int GEMM_MR = 16;
constexpr int GEMM_NR = 6;
void gemm_micro(int64_t kc, const float * ap, const float * bp, float * c, size_t ldc, int m, int n, bool accumulate);
void gemm_pack(const float * const * rows, int nrows, int width, int64_t kb, float * panel);

// ---- helpers shared by the AVX2 files ----

// Sum of the 8 lanes: halves added, then pairs.
static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float half_to_float(uint16_t h) {
    return _cvtsh_ss(h);
}

// 8 halves or bfloat16 values to floats.
static inline __m256 load_f16x8(const ggml_fp16_t * p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
}
static inline __m256 load_bf16x8(const uint16_t * p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// The 32 weights of a Q4_0 block as signed bytes in [-8, 7], in the order of
// a Q8_0 block's values (low nibbles are weights 0..15, high ones 16..31).
static inline __m256i q4_0_weights(const block_q4_0 & b) {
    const __m128i q    = _mm_loadu_si128(reinterpret_cast<const __m128i *>(b.qs));
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m128i lo   = _mm_and_si128(q, mask);
    const __m128i hi   = _mm_and_si128(_mm_srli_epi16(q, 4), mask);
    return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

static inline __m256i load_q8(const int8_t * qs) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(qs));
}

// Sum of x[i] * y[i] over 32 signed bytes, as 8 int32 lanes. maddubs wants
// an unsigned left operand, so |x| meets y with x's sign moved onto it. The
// products cannot saturate (2 * 128 * 127 < 32768) and are exact as long as
// y holds no -128, which the Q8_0 quantizer never produces (|q| <= 127).
static inline __m256i dot_i8(__m256i x, __m256i y) {
    const __m256i ax  = _mm256_sign_epi8(x, x);
    const __m256i sy  = _mm256_sign_epi8(y, x);
    const __m256i p16 = _mm256_maddubs_epi16(ax, sy);
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

} // namespace loom::cpu::avx2
