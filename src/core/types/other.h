#pragma once

// The ternary (TQ1_0, TQ2_0), FP4 (MXFP4, NVFP4) and one/two-bit (Q1_0,
// Q2_0) block formats, bit-identical to ggml's; see types/other.cpp.

#include <cstdint>

namespace loom {

constexpr int QK_TQ    = 256;
constexpr int QK_MXFP4 = 32;
constexpr int QK_NVFP4 = 64;
constexpr int QK_NVFP4_SUB = 16; // weights per E4M3 scale
constexpr int QK1_0    = 128;
constexpr int QK2_0    = 64;

// 5 trits per byte in qs (240 weights), 4 per byte in qh (16 weights).
struct block_tq1_0 {
    uint8_t  qs[(QK_TQ - 4 * QK_TQ / 64) / 5];
    uint8_t  qh[QK_TQ / 64];
    uint16_t d;
};
static_assert(sizeof(block_tq1_0) == 54, "block_tq1_0 layout");

struct block_tq2_0 {
    uint8_t  qs[QK_TQ / 4];
    uint16_t d;
};
static_assert(sizeof(block_tq2_0) == 66, "block_tq2_0 layout");

// E8M0 scale (a power of two), then 32 E2M1 nibbles.
struct block_mxfp4 {
    uint8_t e;
    uint8_t qs[QK_MXFP4 / 2];
};
static_assert(sizeof(block_mxfp4) == 17, "block_mxfp4 layout");

// Four unsigned E4M3 scales, one per 16 weights, then 64 E2M1 nibbles.
struct block_nvfp4 {
    uint8_t d[QK_NVFP4 / QK_NVFP4_SUB];
    uint8_t qs[QK_NVFP4 / 2];
};
static_assert(sizeof(block_nvfp4) == 36, "block_nvfp4 layout");

// One sign bit per weight: +d or -d.
struct block_q1_0 {
    uint16_t d;
    uint8_t  qs[QK1_0 / 8];
};
static_assert(sizeof(block_q1_0) == 18, "block_q1_0 layout");

// Two bits per weight: (q - 1) * d, q in 0..3.
struct block_q2_0 {
    uint16_t d;
    uint8_t  qs[QK2_0 / 4];
};
static_assert(sizeof(block_q2_0) == 18, "block_q2_0 layout");

// The scales: E8M0 as half its power of two (the E2M1 table is doubled);
// unsigned E4M3 likewise halved, with 0 and 0x7f reading as zero.
float e8m0_to_fp32_half(uint8_t e);
float ue4m3_to_fp32_half(uint8_t x);
uint8_t fp32_to_ue4m3(float x);

} // namespace loom
