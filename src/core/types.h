#pragma once

// Type traits and the block formats of quantized types. Layouts are
// bit-identical to ggml's so that data and GGUF files interchange.

#include <cstddef>
#include <cstdint>

#include "ggml.h"

namespace loom {

constexpr int QK4_0 = 32;
constexpr int QK8_0 = 32;

// 32 weights: scale d, then 16 bytes; byte j holds weight j in its low
// nibble and weight j+16 in its high nibble; value = (nibble - 8) * d.
struct block_q4_0 {
    uint16_t d; // fp16
    uint8_t  qs[QK4_0 / 2];
};
static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");

// 32 weights: scale d and 32 signed bytes; value = q * d.
struct block_q8_0 {
    uint16_t d; // fp16
    int8_t   qs[QK8_0];
};
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");

// Quantizes nrows rows of n_per_row values into dst (the work of
// ggml_quantize_chunk for one type); imatrix: n_per_row importance weights
// shared by every row, or NULL. Returns the bytes written.
using QuantizeRowsFn = size_t (*)(const float * src, void * dst, int64_t nrows, int64_t n_per_row,
                                  const float * imatrix);
// Checks nblocks blocks of a type's data for non-finite scales; on the first
// bad block stores its index and the scale's value and returns false.
using ValidateFn = bool (*)(const void * data, size_t nblocks, size_t * bad_block, float * bad_value);

struct TypeInfo {
    const char *      name;       // NULL for values that are not a type loom knows
    int64_t           blck_size;  // elements per block; 0 for the removed slots
    size_t            type_size;  // bytes per block
    bool              is_quantized;
    ggml_to_float_t   to_float;   // NULL for integer types
    ggml_from_float_t from_float; // reference conversion; NULL for integer types
    // ggml_quantize_chunk's quantizer; NULL: from_float row by row.
    QuantizeRowsFn quantize = nullptr;
    // ggml_validate_row_data's check of quantized data; NULL: the data of
    // this type is rejected, as ggml rejects types it does not validate.
    ValidateFn validate = nullptr;
    // Tables ggml_quantize_init builds for the type and ggml_quantize_free
    // releases (NULL: none); both may be called any number of times.
    void (*quantize_init)() = nullptr;
    void (*quantize_free)() = nullptr;
};

// Each family of types fills its rows of the type table (src/core/types/,
// one file per family); the table calls them once, at first use.
using TypeRows = TypeInfo[GGML_TYPE_COUNT];
void add_legacy_types(TypeRows & rows);  // Q4_1, Q5_0, Q5_1, Q8_1 (types/legacy.cpp)
void add_k_types(TypeRows & rows);       // Q2_K ... Q8_K (types/k_quants.cpp)
void add_iq_types(TypeRows & rows);      // IQ1_* ... IQ4_* with their grids (types/i_quants.cpp)
void add_other_types(TypeRows & rows);   // TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0, F64 (types/other.cpp)

// The traits of a type; aborts naming caller when type is not one loom knows.
const TypeInfo & type_info(ggml_type type, const char * caller);
// True for the values of types loom has (not the removed slots 4, 5, 31-33,
// 36-38, nor types whose family has not filled its row).
bool type_is_valid(int type);
// The row of any value in [0, GGML_TYPE_COUNT), valid or not (a removed
// slot's row has ggml's name and block size 0; a missing row is all zero).
const TypeInfo & type_row(int type);

// Reference quantization (row of k values, k a multiple of the block size).
void quantize_row_q4_0_ref(const float * x, void * y, int64_t k);
void quantize_row_q8_0_ref(const float * x, void * y, int64_t k);
void dequantize_row_q4_0(const void * x, float * y, int64_t k);
void dequantize_row_q8_0(const void * x, float * y, int64_t k);

} // namespace loom
