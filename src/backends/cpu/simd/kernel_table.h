#pragma once

// The row and tile primitives that have instruction-set specific versions,
// gathered in one table of function pointers. One table per instruction set
// (portable C++, x86 AVX2+FMA+F16C, AVX-512, AVX-512 with BF16, later NEON);
// the best one the processor supports is chosen once, on first use, and
// never changes.
//
// Contract shared by every table:
//  - each function is a pure function of its arguments: the same inputs give
//    the same bits, whatever thread calls it and whatever the alignment of
//    the pointers (they need only the alignment of their element type);
//  - the portable table is the reference; another table may differ from it
//    only by the order of floating-point additions and, for exponentials, by
//    a few ulp (integer block products and conversions are exact and give
//    the same bits);
//  - BF16 products made with a BF16 dot-product instruction (vdpbf16ps: the
//    AVX-512 BF16 table's gemv_bf16 and gemm_bf16) may differ in two more
//    ways: they take bf16 subnormal inputs and subnormal results as zero,
//    and round to nearest even whatever the rounding mode;
//  - no function allocates, locks or calls through another table.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/types.h"
#include "core/types/legacy_k.h"
#include "ggml.h"

namespace loom::cpu {

// Rows of weights handled together by a gemv call; callers cut row ranges
// at multiples of this so the same rows always meet the same code.
constexpr int GEMV_ROW_ALIGN = 16;
// Largest number of columns one gemv call takes.
constexpr int GEMV_MAX_COLS = 8;

// Calls f(std::integral_constant<int, C>{}) with C = ncols, for kernels that
// take their column count as a template argument (1 <= ncols; more than
// GEMV_MAX_COLS is taken as GEMV_MAX_COLS).
template <class F> inline void with_gemv_cols(int ncols, F && f) {
    static_assert(GEMV_MAX_COLS == 8);
    switch (ncols) {
        case 1: f(std::integral_constant<int, 1>{}); break;
        case 2: f(std::integral_constant<int, 2>{}); break;
        case 3: f(std::integral_constant<int, 3>{}); break;
        case 4: f(std::integral_constant<int, 4>{}); break;
        case 5: f(std::integral_constant<int, 5>{}); break;
        case 6: f(std::integral_constant<int, 6>{}); break;
        case 7: f(std::integral_constant<int, 7>{}); break;
        default: f(std::integral_constant<int, 8>{}); break;
    }
}

// dst[c * ldd + r] = dot(row r of a, column c of b) for r < nrows, c < ncols
// (1 <= ncols <= GEMV_MAX_COLS). Rows of a are lda bytes apart and columns
// of b ldb bytes apart, each K elements of its type (K a multiple of the
// block size). Weights are read once for all ncols columns.
// A super-block of one row decoded for gemv_decoded, at most
// DECODED_BLOCK_BYTES: 256 signed levels, the 16 group scales (int16), the
// block's scale with the type's constant factor (f32), and in VNNI panels
// an int32 bias (Note [Decoded panels]).
constexpr size_t DECODED_BLOCK_BYTES = 320;
inline size_t    decoded_row_bytes(int64_t K) {
    return size_t(K / QK_K) * DECODED_BLOCK_BYTES;
}
// A table may decode rows in panels of up to DECODED_PANEL_ROWS rows (the
// AVX-512 table's VNNI layout, Note [Decoded panels]): the bytes nrows
// decoded rows take count whole panels.
constexpr int64_t DECODED_PANEL_ROWS = 16;
inline size_t     decoded_rows_bytes(int64_t K, int64_t nrows) {
    return size_t((nrows + DECODED_PANEL_ROWS - 1) / DECODED_PANEL_ROWS * DECODED_PANEL_ROWS) * decoded_row_bytes(K);
}
using DecodeRowsFn = void (*)(int64_t K, const void * a, size_t lda, int64_t nrows, void * out);

using GemvFn = void (*)(int64_t K, const void * a, size_t lda, int64_t nrows, const void * b, size_t ldb, int ncols,
                        float * dst, size_t ldd);

// Quantized products on prepared columns: up to QGEMM_COLS Q8_0 columns
// (ldb bytes apart, K values each) are first prepared into a layout of the
// kernel's own (cols_bytes(K) bytes, 4-byte aligned), once for every row of
// the weights.
constexpr int QGEMM_COLS = 8;
using QColsPrepareFn = void (*)(int64_t K, const void * b, size_t ldb, int ncols, void * out);
// dst[c * ldd + r] = dot(row r of a, column c) as for GemvFn, over blocks
// [i0, i1) of K (i0 a multiple of QGEMM_K_ALIGN): partial sums continue from
// acc unless i0 == 0 and stay in acc unless i1 is the last block, when dst
// is written. Cutting K this way, or not, gives the same bits, and so does
// cutting the rows at multiples of GEMV_ROW_ALIGN. acc: qgemm_acc_floats(nrows) floats (unused, may be null, when one
// call covers all of K). b, ldb: the columns as Q8_0, for kernels that need
// them besides the prepared ones.
using QGemmFn = void (*)(int64_t K, int64_t i0, int64_t i1, const void * a, size_t lda, int64_t nrows,
                         const void * prep, const void * b, size_t ldb, int ncols, float * acc, float * dst,
                         size_t ldd);
constexpr int64_t QGEMM_K_ALIGN = 4;
constexpr size_t  qgemm_acc_floats(int64_t nrows) {
    return size_t(nrows < 8 ? 8 : nrows) * 16 * QGEMM_COLS;
}
struct QGemmKernels {
    size_t (*cols_bytes)(int64_t K) = nullptr;
    QColsPrepareFn prepare          = nullptr;
    QGemmFn        gemm             = nullptr;
    // Products with fewer columns than this call the table's gemv instead.
    int64_t min_cols = 1;
};

// Packs rows of f32 values into a panel of the GEMM: panel[k * width + i] =
// rows[i][k] for i < nrows, 0 for nrows <= i < width, k < kb.
// nrows <= width <= 32; width is the table's mr or nr.
using PackFn = void (*)(const float * const * rows, int nrows, int width, int64_t kb, float * panel);

// The f32 GEMM micro-kernel on packed panels (see Note [GEMM panels] in
// kernels/gemm.cpp): C[i + j * ldc] (+)= sum_k ap[k * mr + i] * bp[k * nr + j]
// for i < m <= mr, j < n <= nr. With accumulate the sum continues from C's
// value, so cutting K into blocks leaves every element's sequence of
// operations unchanged.
using BinaryFn = void (*)(int64_t n, const float * a, const float * b, float * d);

// y[d] += w[i] * row i of x [d] for d < n, rows i < nrows in increasing
// order, ldx bytes apart; rows whose weight is 0 are skipped (their values
// may be anything, NaN included).
using MadRowsFn = void (*)(int64_t n, float * y, const void * x, size_t ldx, int64_t nrows, const float * w);

// The AdamW step of values i < n of four different rows:
//   m = m beta1 + g (1 - beta1);  v = v beta2 + (g g) (1 - beta2);
//   w = w keep - (alpha (m beta1h)) / (sqrt(v beta2h) + eps)
// each operation an IEEE single rounding, in this order (no fused
// multiply-add), one_minus_beta1/2 being the rounded 1 - beta1/2.
struct AdamwStep {
    float beta1, beta2, one_minus_beta1, one_minus_beta2, beta1h, beta2h, eps, alpha, keep;
};
using AdamwRowFn = void (*)(int64_t n, float * w, const float * g, float * m, float * v, const AdamwStep & s);

// The step of value i alone: the portable loop, and the tails of the SIMD ones.
inline void adamw_one(int64_t i, float * w, const float * g, float * m, float * v, const AdamwStep & s) {
        const float mi = m[i] * s.beta1 + g[i] * s.one_minus_beta1;
        const float vi = v[i] * s.beta2 + (g[i] * g[i]) * s.one_minus_beta2;
        m[i]           = mi;
        v[i]           = vi;
        w[i]           = w[i] * s.keep - (s.alpha * (mi * s.beta1h)) / (std::sqrt(vi * s.beta2h) + s.eps);
}

using GemmMicroFn = void (*)(int64_t kc, const float * ap, const float * bp, float * c, size_t ldc, int m, int n,
                             bool accumulate);

// The BF16 GEMM on a BF16 dot-product instruction (see Note [BF16 GEMM
// panels] in kernels/gemm.cpp). Its panels hold k in pairs: one 32-bit word
// per row or column and pair p, with the bf16 value of k = 2p in the low half
// and that of k = 2p + 1 in the high half; an odd kb ends with a zero
// partner, and rows or columns past the matrix are packed as zeros.
struct GemmBf16 {
    // bf16 weight rows into an mr-wide panel: panel[p * mr + i] = the pair p
    // of rows[i] (i < nrows <= mr), for the (kb + 1) / 2 pairs of kb values.
    void (*pack_a)(const uint16_t * const * rows, int nrows, int64_t kb, uint32_t * panel);
    // f32 activation columns, values step bytes apart, rounded to bf16 as the
    // core's fp32_to_bf16 rounds (same bits), into an nr-wide panel the same
    // way (ncols <= nr).
    void (*pack_b)(const char * const * cols, size_t step, int ncols, int64_t kb, uint32_t * panel);
    // C[i + j * ldc] (+)= sum over the pairs of ap[p * mr + i] . bp[p * nr + j]
    // for i < m <= mr, j < n <= nr; accumulate continues from C's value, as
    // the f32 micro-kernel does.
    void (*micro)(int64_t kb, const uint32_t * ap, const uint32_t * bp, float * c, size_t ldc, int m, int n,
                  bool accumulate);
    int     mr, nr;     // register tile
    int64_t mc, kc, nc; // cache blocks, as the f32 GEMM's; kc even
};

struct KernelTable {
    const char * name; // "portable", "avx2", ...

    // Dot products of n elements (block types: n a multiple of 32). Q8_0
    // activation blocks (the y side) must not hold -128, which the Q8_0
    // quantizer never produces.
    float (*dot_f32)(int64_t n, const float * x, const float * y);
    float (*dot_f16)(int64_t n, const ggml_fp16_t * x, const ggml_fp16_t * y);
    float (*dot_bf16)(int64_t n, const uint16_t * x, const uint16_t * y);
    float (*dot_q8_0_q8_0)(int64_t n, const block_q8_0 * x, const block_q8_0 * y);
    float (*dot_q4_0_q8_0)(int64_t n, const block_q4_0 * x, const block_q8_0 * y);

    // Activations to Q8_0 (n a multiple of 32); same bits as the reference
    // quantizer of the core.
    void (*quantize_row_q8_0)(const float * x, block_q8_0 * y, int64_t n);
    // Row conversions, round to nearest even; same bits as the core's,
    // except that a signaling NaN half may come out as a quiet NaN.
    void (*fp16_to_fp32_row)(const ggml_fp16_t * x, float * y, int64_t n);
    void (*fp32_to_fp16_row)(const float * x, ggml_fp16_t * y, int64_t n);
    void (*bf16_to_fp32_row)(const uint16_t * x, float * y, int64_t n);

    // Matrix-vector products per weight type (operands as in vec.h's
    // vec_dot_info: f32, f16, bf16, q8_0 and q4_0 against q8_0).
    GemvFn gemv_f32;
    GemvFn gemv_f16;
    GemvFn gemv_bf16;
    GemvFn gemv_q8_0;
    GemvFn gemv_q4_0;

    // Row helpers of softmax and activations (y may be x):
    // largest element, NaNs skipped (-INFINITY for n == 0);
    float (*max_f32)(int64_t n, const float * x);
    // y[i] = exp(y[i] - max), returning the sum of the results in double;
    double (*exp_sub_sum_f32)(int64_t n, float * y, float max);
    // y[i] = x[i] / (1 + exp(-x[i])).
    void (*silu_f32)(int64_t n, const float * x, float * y);
    // d[i] = a[i] op b[i] for op = +, -, *, / (index 0..3); d may be a or b.
    // One IEEE operation per element: every table gives the same bits.
    BinaryFn binary_f32[4];

    // f32 GEMM: packing, micro-kernel, and its tile and cache-block sizes.
    PackFn      gemm_pack;
    GemmMicroFn gemm_micro;
    int         mr, nr;     // register tile (mr along dst rows, nr along columns)
    int64_t     mc, kc, nc; // cache blocks: a chunk mc x kc (L2), b block kc x nc (L3)

    // The BF16 GEMM for bf16 weights, activations rounded to bf16 as the
    // matrix-vector path rounds them; nullptr in tables without a BF16
    // dot-product instruction, where bf16 weights take the f32 GEMM.
    const GemmBf16 * gemm_bf16;

    // The quantized products use 8-bit integer dot-product instructions
    // (VNNI), fast enough that BLAS's F32 products never beat them.
    bool int8_dot_products;

    // Quantized products on prepared columns (null where the table has
    // none; mul_mat then calls the gemv functions).
    QGemmKernels qgemm_q4_0;
    QGemmKernels qgemm_q8_0;
    // The same for Q4_0 and Q8_0 weights in the repacked layout of the CPU_REPACK
    // buffer (Note [Repacked weights] in repack.h; Q4_0: Note [Q4_0 rows by
    // eight]; rows in groups of 8, K a multiple of 128); null where the
    // table has none, and then no tensor is repacked. The same bits as
    // qgemm_q4_0 on the same weights in ggml's layout.
    QGemmKernels qgemm_q4_0_x8;
    QGemmKernels qgemm_q8_0_x8;
    // F16 weights in the repacked layout (rows in groups of 8, K a multiple
    // of 32), any number of rows in whole groups; null where the table has
    // none. The same bits as gemv_f16 on the same weights in ggml's layout.
    GemvFn gemv_f16_x8 = nullptr;

    // Weighted sums of f32 and f16 rows (attention's values).
    MadRowsFn mad_rows_f32 = nullptr;
    MadRowsFn mad_rows_f16 = nullptr;

    // y[i] = x[i] * s, one IEEE multiplication per element (every table
    // gives the same bits); y may be x.
    void (*scale_f32)(int64_t n, const float * x, float s, float * y) = nullptr;

    // Sums of the normalisations (NORM, RMS_NORM, GROUP_NORM) in double
    // precision, in eight lanes: acc[i % 8] += x[i] (sum_lanes_f64) or
    // x[i] * x[i] (sum_sq_lanes_f64; a float's square is exact in double)
    // for i < n in increasing order. One rounding per value in a fixed
    // order: every table gives the same bits.
    void (*sum_lanes_f64)(int64_t n, const float * x, double * acc)    = nullptr;
    void (*sum_sq_lanes_f64)(int64_t n, const float * x, double * acc) = nullptr;

    // One row of the AdamW step (OPT_STEP_ADAMW), see AdamwStep; every
    // table gives the same bits.
    AdamwRowFn adamw_f32 = nullptr;

    // Rotary embedding of one row's first 2 * half values: pair i, (x[2i],
    // x[2i + 1]) in normal mode or (x[i], x[i + half]) in NeoX mode, turns
    // by the angle of cos[i], sin[i]: y[a] = x[a] c - x[b] s and y[b] = x[a]
    // s + x[b] c, each product rounded, then the sum (the same bits in every
    // table). y may be x.
    void (*rope_f32)(int64_t half, const float * x, float * y, const float * cos, const float * sin,
                     bool neox) = nullptr;

    // Row steps of the linear recurrences (SSM_SCAN, RWKV_WKV7,
    // GATED_DELTA_NET) on one row s of n state values. The state updates
    // round alike in every table (each product rounded, then the sums in the
    // order written, no fused multiply-add), so the states carry the same
    // bits; the returned dot products differ only by the order of their
    // additions.
    //   decay_dot_f32: s[i] = s0[i] * (a ? a[i] : a0) + b[i] * bx
    //                  (+ c[i] * cx when c is not null); returns the sum of
    //                  s[i] * r[i] over the new values. s0 is the old row,
    //                  s itself or another (a first token's input state).
    float (*decay_dot_f32)(int64_t n, const float * s0, float * s, const float * a, float a0, const float * b, float bx,
                           const float * c, float cx, const float * r) = nullptr;
    //   wkv7_rows_f32: RWKV-7's step of rows [0, rows) of an n-wide
    //                  matrix, row i at s0 + i * n, written at s + i * n
    //                  (s0 == s in place): sa = sum s0[j] a[j]; then
    //                  s[j] = (s0[j] * w[j] + k[j] * v[i]) + b[j] * sa, and
    //                  out[i] = sum s[j] r[j]. The token's vectors are read
    //                  once for all the rows.
    void (*wkv7_rows_f32)(int64_t n, int64_t rows, const float * s0, float * s, const float * r, const float * w,
                          const float * k, const float * v, const float * a, const float * b, float * out) = nullptr;
    //   delta_row_f32: s[i] *= (g ? g[i] : g0); d = (v - sum s[i] k[i]) * beta;
    //                  s[i] += k[i] * d; returns the sum of s[i] * q[i].
    float (*delta_row_f32)(int64_t n, float * s, const float * g, float g0, const float * k, float v, float beta,
                           const float * q) = nullptr;

    // Matrix-vector products of the other quantized weight types (K-quants
    // and the rest), indexed by the weight type, against columns in the
    // type's activation type (quant_operand_type: Q8_K for the K-quants,
    // the i-quants but IQ4_NL, and the ternary types; Q8_1 for Q4_1 and
    // Q5_1; Q8_0 for Q5_0, IQ4_NL and MXFP4).
    // Same contract as the gemv entries above; rows need no alignment of
    // their count and K is a multiple of the weight block. Null where the
    // table has none: mul_mat then dequantizes those weights
    // (kernels/matmul_dequant.cpp). The portable dot products of
    // kernels/quant_dot.h are their reference.
    GemvFn gemv_quant[GGML_TYPE_COUNT] = {};
    // Products of those types on prepared columns, as qgemm_q4_0 (the same
    // bits as their gemv_quant entry); null where the table has none.
    QGemmKernels qgemm_quant[GGML_TYPE_COUNT] = {};
    // Rows of the grid i-quants, the ternary types, Q4_K and Q6_K (and
    // IQ4_XS on the x86 tables) decoded once, for products whose items meet
    // several groups of columns (Note [Rows decoded once] in
    // kernels/matmul.cpp): decode_rows[type] writes nrows rows of K values
    // into decoded_rows_bytes(K, nrows) bytes, a row or panel per
    // decoded_row_bytes(K) a row, and gemv_decoded[type] multiplies such
    // rows (lda = decoded_row_bytes(K)) with Q8_K columns, with
    // gemv_quant's contract (decoded rows 4-byte aligned). Its results are
    // the bits of the type's gemv_quant entry, whether rows are decoded one
    // by one or in panels of rows (the AVX2 table's Q4_K: 8 rows, Note [Q4_K
    // panels of eight rows]; the AVX-512 table's VNNI panels of 16, Note
    // [Decoded panels]). Both null where the table has none.
    DecodeRowsFn decode_rows[GGML_TYPE_COUNT]  = {};
    GemvFn       gemv_decoded[GGML_TYPE_COUNT] = {};
    // Weights of these types in the CPU_REPACK layout (repack.h; Q4_K on
    // the AVX2 table, Note [Repacked Q4_K]; IQ4_XS on the AVX2 and AVX-512
    // tables, Note [Interleaved IQ4_XS rows], rows in groups of 8; Q4_0 and
    // Q4_K on the Arm tables with the dot product, Notes [Interleaved Q4_0
    // rows] and [Interleaved Q4_K rows]): gemv_repacked[type] with
    // gemv_quant's contract and bits, reading repacked rows, and
    // decode_rows_repacked[type] writing from them the rows decode_rows
    // writes from ggml's layout. A type is
    // repacked only where the table has gemv_repacked, and
    // decode_rows_repacked too if it decodes the type's rows (gemv_decoded).
    // Q4_0's gemv_repacked chooses the interleaved layout (on x86 Q4_0 takes
    // qgemm_q4_0_x8 instead); Q4_K's layout is q4_K_rows_interleaved's.
    GemvFn       gemv_repacked[GGML_TYPE_COUNT]        = {};
    DecodeRowsFn decode_rows_repacked[GGML_TYPE_COUNT] = {};
    // Whether gemv_repacked[GGML_TYPE_Q4_K] reads Q4_K rows interleaved by
    // four (Note [Interleaved Q4_K rows]) rather than blocks in place with
    // their qs by 8-byte words (Note [Repacked Q4_K]).
    bool q4_K_rows_interleaved = false;
    // Activations to Q8_K (n a multiple of 256); same bits as the core's
    // reference quantizer for finite inputs. Null: the reference one.
    void (*quantize_row_q8_K)(const float * x, block_q8_K * y, int64_t n) = nullptr;
    // Activations to Q8_1 (the Q4_1 and Q5_1 products' type; n a multiple
    // of 32) with the bits of the core's reference quantizer. Null: the
    // reference one.
    void (*quantize_row_q8_1)(const float * x, block_q8_1 * y, int64_t n) = nullptr;
};

// The activation type of a weight type's products in gemv_quant (ggml's
// vec_dot_type); GGML_TYPE_COUNT for types outside gemv_quant's reach.
ggml_type quant_operand_type(ggml_type weight_type);

// The portable table (always available).
const KernelTable & portable_kernels();
// The best table this processor runs, chosen on the first call; the
// environment variable LOOM_CPU_KERNELS, read then, may name a lesser table
// ("portable", "avx2", "avx512", "neon", ...) to use instead.
const KernelTable & best_kernels();
// best_kernels(), or portable_kernels() when use_ref asks for the portable
// code paths.
inline const KernelTable & kernels(bool use_ref) {
    return use_ref ? portable_kernels() : best_kernels();
}

// Whether this processor and its OS run each table's instructions (read
// from features(); compiled for every processor, dispatch.cpp). A table that
// is not in the build still answers here by the processor alone.
bool avx2_table_runs();       // AVX2, FMA, F16C and the YMM state
bool avx512_table_runs();     // and AVX-512 F, BW, VL, VNNI with the ZMM state
bool avx512bf16_table_runs(); // and AVX512_BF16

// Tables of the other instruction sets: nullptr when the build does not
// contain them or the processor cannot run them. Each is built on its first
// call, and only after its *_table_runs() check passed: building one calls
// code compiled for its instruction set.
const KernelTable * avx2_kernels();
const KernelTable * avx512_kernels();
const KernelTable * avx512bf16_kernels(); // "avx512_bf16"

// The 64-bit Arm tables (simd/neon/): Advanced SIMD, with the dot-product
// extension, and with the 8-bit integer matrix multiply too; the same rules.
bool                neon_table_runs();         // Advanced SIMD (HWCAP_ASIMD)
bool                neon_dotprod_table_runs(); // and SDOT (HWCAP_ASIMDDP)
bool                neon_i8mm_table_runs();    // and SMMLA (HWCAP2_I8MM)
const KernelTable * neon_kernels();            // "neon"
const KernelTable * neon_dotprod_kernels();    // "neon_dotprod"
const KernelTable * neon_i8mm_kernels();       // "neon_i8mm"

// Every table this processor and OS can run, the portable one first, then in
// order of preference (best_kernels() picks the last unless
// LOOM_CPU_KERNELS names another).
std::vector<const KernelTable *> runnable_kernels();

} // namespace loom::cpu
