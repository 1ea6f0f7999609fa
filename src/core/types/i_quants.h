#pragma once

// The i-quants (IQ1_S ... IQ4_XS) and the types of types/other.cpp (TQ1_0,
// TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0, F64): block layouts bit-identical to
// ggml's, their rows of the type table, and the entry points the type table
// and the CPU backend use.

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace loom {

constexpr int QK_IQ  = 256; // super-block of the i-quants and the ternary types
constexpr int QK4_NL = 32;

// 256 weights in 32 groups of 8: each uint16 pair of a 32-weight run holds
// four 8-bit grid indices (iq2xxs_grid), four 7-bit sign patterns and a 4-bit scale.
struct block_iq2_xxs {
    uint16_t d;
    uint16_t qs[QK_IQ / 8];
};
static_assert(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs layout");

// 9-bit grid index and 7-bit signs per uint16; two 4-bit scales per 32 weights.
struct block_iq2_xs {
    uint16_t d;
    uint16_t qs[QK_IQ / 8];
    uint8_t  scales[QK_IQ / 32];
};
static_assert(sizeof(block_iq2_xs) == 74, "block_iq2_xs layout");

// qs: 32 low bytes of the 10-bit grid indices, then 32 sign bytes.
struct block_iq2_s {
    uint16_t d;
    uint8_t  qs[QK_IQ / 4];
    uint8_t  qh[QK_IQ / 32];
    uint8_t  scales[QK_IQ / 32];
};
static_assert(sizeof(block_iq2_s) == 82, "block_iq2_s layout");

// qs: 64 grid indices (iq3xxs_grid, 4 weights each), then 8 uint32 of
// four 7-bit sign patterns and a 4-bit scale.
struct block_iq3_xxs {
    uint16_t d;
    uint8_t  qs[3 * QK_IQ / 8];
};
static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs layout");

struct block_iq3_s {
    uint16_t d;
    uint8_t  qs[QK_IQ / 4];
    uint8_t  qh[QK_IQ / 32];
    uint8_t  signs[QK_IQ / 8];
    uint8_t  scales[QK_IQ / 64];
};
static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s layout");

// qh per 32 weights: 3 high index bits for each of four groups, a 3-bit scale, the delta's sign.
struct block_iq1_s {
    uint16_t d;
    uint8_t  qs[QK_IQ / 8];
    uint16_t qh[QK_IQ / 32];
};
static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s layout");

// The fp16 super-block scale is spread over the top nibbles of the four uint16 of scales.
struct block_iq1_m {
    uint8_t qs[QK_IQ / 8];
    uint8_t qh[QK_IQ / 16];
    uint8_t scales[QK_IQ / 32];
};
static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m layout");

struct block_iq4_nl {
    uint16_t d;
    uint8_t  qs[QK4_NL / 2];
};
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl layout");

struct block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t  scales_l[QK_IQ / 64];
    uint8_t  qs[QK_IQ / 2];
};
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs layout");

// Rows of k values (k a multiple of the block size); decoding reads only
// masked indices into the grids, so any bytes decode without fault.
void dequantize_row_iq2_xxs(const void * x, float * y, int64_t k);
void dequantize_row_iq2_xs(const void * x, float * y, int64_t k);
void dequantize_row_iq2_s(const void * x, float * y, int64_t k);
void dequantize_row_iq3_xxs(const void * x, float * y, int64_t k);
void dequantize_row_iq3_s(const void * x, float * y, int64_t k);
void dequantize_row_iq1_s(const void * x, float * y, int64_t k);
void dequantize_row_iq1_m(const void * x, float * y, int64_t k);
void dequantize_row_iq4_nl(const void * x, float * y, int64_t k);
void dequantize_row_iq4_xs(const void * x, float * y, int64_t k);

// ggml's reference encoders (its from_float_ref): the same bytes as ggml.
void quantize_row_iq4_nl_ref(const float * x, void * y, int64_t k);
void quantize_row_iq4_xs_ref(const float * x, void * y, int64_t k);
void quantize_row_iq3_xxs_ref(const float * x, void * y, int64_t k);
void quantize_row_iq3_s_ref(const float * x, void * y, int64_t k);
void quantize_row_iq2_s_ref(const float * x, void * y, int64_t k);

// What ggml_quantize_chunk computes for the i-quants, the same bytes as
// ggml's: nrows rows of n_per_row values from src into dst (both at row 0),
// the error weighted by imatrix (n_per_row values, may be NULL) where the
// format uses one. IQ2_XXS, IQ2_XS and IQ1_S need an imatrix, as in ggml.
// Returns false, writing nothing, for a type without such an encoder here
// (the other types, whose chunk is their from_float row by row, among them
// TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0) and for a missing required imatrix;
// otherwise stores the bytes written in *written. n_per_row must be a
// multiple of the type's block size (the caller checks). Thread-safe.
bool quantize_chunk_iq(ggml_type type, const float * src, void * dst, int64_t nrows, int64_t n_per_row,
                       const float * imatrix, size_t * written);

// Whether quantize_chunk_iq needs an importance matrix for type (ggml's
// ggml_quantize_requires_imatrix: IQ2_XXS, IQ2_XS, IQ1_S).
bool iq_requires_imatrix(ggml_type type);

// Builds the search tables the IQ2/IQ3/IQ1 encoders use (also built on first
// use; thread-safe). Does nothing for other types.
void quantize_init_iq(ggml_type type);

// The activation type ggml's CPU backend pairs a weight type of this family
// (or of types/other.cpp) with in mul_mat: Q8_K for the IQ*_XXS/XS/S/M,
// IQ4_XS, TQ1_0 and TQ2_0; Q8_0 for IQ4_NL, MXFP4, NVFP4, Q1_0 and Q2_0.
// GGML_TYPE_COUNT for any other type (F64 included: ggml's CPU has no product for it).
ggml_type iq_vec_dot_type(ggml_type type);

} // namespace loom
