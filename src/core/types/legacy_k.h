#pragma once

// Block formats of the legacy types Q4_1, Q5_0, Q5_1, Q8_1 and of the
// K-quants Q2_K ... Q8_K, bit-identical to ggml 0.25.1 (ggml-common.h), and
// their reference codecs (types/legacy.cpp, types/k_quants.cpp). fp16 fields
// hold the half's bits. Every function here is a pure function of its
// arguments; k is a multiple of the block size.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "core/types.h"

namespace loom {

constexpr int QK4_1 = 32;
constexpr int QK5_0 = 32;
constexpr int QK5_1 = 32;
constexpr int QK8_1 = 32;
constexpr int QK_K  = 256; // super-block of the K-quants
constexpr int K_SCALE_SIZE = 12;

// value = q * d + m, q in [0, 15]; byte j holds weights j (low) and j + 16.
struct block_q4_1 {
    uint16_t d, m;
    uint8_t  qs[QK4_1 / 2];
};
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");

// value = (q - 16) * d; the fifth bit of weight j is bit j of qh.
struct block_q5_0 {
    uint16_t d;
    uint8_t  qh[4];
    uint8_t  qs[QK5_0 / 2];
};
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");

// value = q * d + m, q in [0, 31].
struct block_q5_1 {
    uint16_t d, m;
    uint8_t  qh[4];
    uint8_t  qs[QK5_1 / 2];
};
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");

// Activations of the Q4_1/Q5_1 products: q * d, and s = d * sum(q).
struct block_q8_1 {
    uint16_t d, s;
    int8_t   qs[QK8_1];
};
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 layout");

// 16 groups of 16: value = d * (scales & 15) * q - dmin * (scales >> 4),
// q two bits; qs byte 32 h + l holds the weights 128 h + l + 32 s at bits 2 s.
struct block_q2_K {
    uint8_t  scales[QK_K / 16];
    uint8_t  qs[QK_K / 4];
    uint16_t d, dmin;
};
static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");

// 16 groups of 16: value = d * (scale - 32) * (q - 4 * !high bit); six-bit
// scales in 12 bytes (low nibbles in 0-7, high pairs in 8-11).
struct block_q3_K {
    uint8_t  hmask[QK_K / 8];
    uint8_t  qs[QK_K / 4];
    uint8_t  scales[K_SCALE_SIZE];
    uint16_t d;
};
static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");

// 8 groups of 32: value = d * scale * q - dmin * min, six-bit scales and
// mins packed in 12 bytes.
struct block_q4_K {
    uint16_t d, dmin;
    uint8_t  scales[K_SCALE_SIZE];
    uint8_t  qs[QK_K / 2];
};
static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");

struct block_q5_K {
    uint16_t d, dmin;
    uint8_t  scales[K_SCALE_SIZE];
    uint8_t  qh[QK_K / 8];
    uint8_t  qs[QK_K / 2];
};
static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");

// 16 groups of 16: value = d * scale * (q - 32), q six bits.
struct block_q6_K {
    uint8_t  ql[QK_K / 2];
    uint8_t  qh[QK_K / 4];
    int8_t   scales[QK_K / 16];
    uint16_t d;
};
static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");

// Activations of the K-quant products: value = d * q, d a float, and the
// sums of the 16 groups of 16 quants.
struct block_q8_K {
    float   d;
    int8_t  qs[QK_K];
    int16_t bsums[QK_K / 16];
};
static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");

// Reference codecs (ggml's quantize_row_*_ref and dequantize_row_*).
void quantize_row_q4_1_ref(const float * x, void * y, int64_t k);
void quantize_row_q5_0_ref(const float * x, void * y, int64_t k);
void quantize_row_q5_1_ref(const float * x, void * y, int64_t k);
void quantize_row_q8_1_ref(const float * x, void * y, int64_t k);
void dequantize_row_q4_1(const void * x, float * y, int64_t k);
void dequantize_row_q5_0(const void * x, float * y, int64_t k);
void dequantize_row_q5_1(const void * x, float * y, int64_t k);

void quantize_row_q2_K_ref(const float * x, void * y, int64_t k);
void quantize_row_q3_K_ref(const float * x, void * y, int64_t k);
void quantize_row_q4_K_ref(const float * x, void * y, int64_t k);
void quantize_row_q5_K_ref(const float * x, void * y, int64_t k);
void quantize_row_q6_K_ref(const float * x, void * y, int64_t k);
void quantize_row_q8_K_ref(const float * x, void * y, int64_t k);
void dequantize_row_q2_K(const void * x, float * y, int64_t k);
void dequantize_row_q3_K(const void * x, float * y, int64_t k);
void dequantize_row_q4_K(const void * x, float * y, int64_t k);
void dequantize_row_q5_K(const void * x, float * y, int64_t k);
void dequantize_row_q6_K(const void * x, float * y, int64_t k);
void dequantize_row_q8_K(const void * x, float * y, int64_t k);

// The six-bit scale and min j (< 8) of a Q4_K/Q5_K block's 12 bytes.
inline void scale_min_k4(int j, const uint8_t * q, uint8_t & sc, uint8_t & m) {
    if (j < 4) {
        sc = q[j] & 63;
        m  = q[j + 4] & 63;
    } else {
        sc = uint8_t((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4));
        m  = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// The scale j (< 16) of a Q3_K block, in [-32, 31].
inline int scale_q3_K(const uint8_t * s, int j) {
    const int low  = j < 8 ? s[j] & 0xf : s[j - 8] >> 4;
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
}

// A ValidateFn for blocks of Size bytes whose fp16 scales at byte offsets
// Off0 and Off1 (Off1 == Size: only one) must be finite.
template <size_t Size, size_t Off0, size_t Off1 = Size>
bool validate_halves(const void * data, size_t nblocks, size_t * bad_block, float * bad_value) {
    const auto * p = static_cast<const uint8_t *>(data);
    for (size_t i = 0; i < nblocks; ++i) {
        const size_t offs[2] = {Off0, Off1};
        for (size_t off : offs) {
            if (off >= Size) {
                continue;
            }
            uint16_t h;
            std::memcpy(&h, p + i * Size + off, sizeof(h));
            if ((h & 0x7c00) == 0x7c00) {
                *bad_block = i;
                *bad_value = fp16_to_fp32(h);
                return false;
            }
        }
    }
    return true;
}

} // namespace loom
