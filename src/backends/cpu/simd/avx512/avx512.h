#pragma once

// Kernels of the AVX-512 table (AVX-512 F, BW, VL and VNNI). The table takes
// every other entry from the AVX2 table. Include between target_begin.h and
// target_end.h.

#include <cstddef>
#include <cstdint>

namespace loom {
struct block_q8_K;
}

namespace loom::cpu {
struct AdamwStep;
struct KernelTable;
}

namespace loom::cpu::avx512 {

// F32 and F16 weights, every column count in one pass (gemv_float.cpp).
void gemv_f32(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
              size_t ldd);
void gemv_f16(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
              size_t ldd);
void gemv_f16_x8(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols, float * dst,
                 size_t ldd);
void gemv_q8_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);
void gemv_q4_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
               float * dst, size_t ldd);

#include "../quant_gemv.inc"

// Rows of the grid i-quants and the ternary types decoded once into VNNI
// panels of 16 rows, and their product (iquants.cpp, Note [Decoded
// panels]): replaces add_iquant_kernels' decode_rows and gemv_decoded.
void add_iquant_panel_kernels(KernelTable & t);
// Q4_K's rows decoded once into VNNI panels of 16 rows, and their product
// (kquants.cpp, Note [K-quant panels]).
void add_kquant_panel_kernels(KernelTable & t);
// IQ4_XS rows interleaved by eight (Note [Interleaved IQ4_XS rows] in
// repack.h; iquants.cpp, Note [Interleaved IQ4_XS on 512-bit registers]):
// the gemv_repacked and decode_rows_repacked entries of this table, with
// the bits of gemv_iq4_xs and the panels of its decode_rows.
void gemv_iq4_xs_interleaved(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb,
                             int ncols, float * dst, size_t ldd);
void decode_rows_iq4_xs_interleaved(int64_t K, const void * a, size_t lda, int64_t nrows, void * out);

// Q5_0, IQ4_NL and MXFP4 with four rows per register (gemv.cpp), for every
// column count, with qgemm_* on prepared columns (the same bits; MXFP4's
// columns prepared as IQ4_NL's); the table's gemv_quant entries for these
// types.
void gemv4_q5_0(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void gemv4_iq4_nl(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                  float * dst, size_t ldd);
void gemv4_mxfp4(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                 float * dst, size_t ldd);
// Q4_1 and Q5_1 on the same tiles against Q8_1 (gemv.cpp), every column
// count through the matrix-vector product.
void gemv4_q4_1(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void gemv4_q5_1(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                float * dst, size_t ldd);
void qcols_prepare_q5_0(int64_t K, const void * b, size_t ldb, int ncols, void * out);
void qcols_prepare_iq4_nl(int64_t K, const void * b, size_t ldb, int ncols, void * out);
void qgemm_q5_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd);
void qgemm_iq4_nl(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                  const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd);
void qgemm_mxfp4(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                 const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd);

// Many-column products on prepared columns (kernel_table.h): Q4_0 and Q8_0
// with four rows per register (gemv.cpp).
size_t qcols_bytes(int64_t K);
void   qcols_prepare_q4_0(int64_t K, const void * b, size_t ldb, int ncols, void * out);
void   qcols_prepare_q8_0(int64_t K, const void * b, size_t ldb, int ncols, void * out);
void   qgemm_q4_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                  const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd);
void   qgemm_q8_0(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows, const void * prep,
                  const void * b, size_t ldb, int ncols, float * acc, float * dst, size_t ldd);

// The f32 GEMM (kernel_table.h GemmMicroFn and PackFn; gemm.cpp): a 32 x 14
// register tile; the packer takes any width up to 32.
constexpr int GEMM_MR = 32;
constexpr int GEMM_NR = 14;
void          gemm_micro(int64_t kc, const float * ap, const float * bp, float * c, size_t ldc, int m, int n,
                         bool accumulate);
void          gemm_pack(const float * const * rows, int nrows, int width, int64_t kb, float * panel);

// Weighted sums of rows (kernel_table.h MadRowsFn; rows.cpp).
void mad_rows_f32(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w);
void mad_rows_f16(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w);

// Softmax's row helpers, SiLU and the scaling of rows (kernel_table.h;
// activations.cpp).
float  max_f32(int64_t n, const float * x);
double exp_sub_sum_f32(int64_t n, float * y, float max);
void   silu_f32(int64_t n, const float * x, float * y);
void   scale_f32(int64_t n, const float * x, float s, float * y);
void   adamw_f32(int64_t n, float * w, const float * g, float * m, float * v, const AdamwStep & s);
void   rope_f32(int64_t half, const float * x, float * y, const float * cos, const float * sin, bool neox);

// Row steps of the linear recurrences (kernel_table.h; recurrence.cpp).
float decay_dot_f32(int64_t n, const float * s0, float * s, const float * a, float a0, const float * b, float bx, const float * c,
                    float cx, const float * r);
void wkv7_rows_f32(int64_t n, int64_t rows, const float * s0, float * s, const float * r, const float * w,
                   const float * k, const float * v, const float * a, const float * b, float * out);
float delta_row_f32(int64_t n, float * s, const float * g, float g0, const float * k, float v, float beta,
                    const float * q);

// Element-wise f32 ops, Op 0-3: add, sub, mul, div (kernel_table.h BinaryFn; rows.cpp).
template <int Op> void binary_f32(int64_t n, const float * a, const float * b, float * d);

} // namespace loom::cpu::avx512
