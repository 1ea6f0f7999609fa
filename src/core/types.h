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

struct TypeInfo {
    const char *      name;       // NULL for values that are not a type loom knows
    int64_t           blck_size;  // elements per block
    size_t            type_size;  // bytes per block
    bool              is_quantized;
    ggml_to_float_t   to_float;   // NULL for integer types
    ggml_from_float_t from_float; // reference conversion; NULL for integer types
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
bool             type_is_valid(int type);

// Reference quantization (row of k values, k a multiple of the block size).
void quantize_row_q4_0_ref(const float * x, void * y, int64_t k);
void quantize_row_q8_0_ref(const float * x, void * y, int64_t k);
void dequantize_row_q4_0(const void * x, float * y, int64_t k);
void dequantize_row_q8_0(const void * x, float * y, int64_t k);

} // namespace loom
