#pragma once

// The inputs of the quants-iq reference data, computed the same way by the
// generator (gen.cpp, against ggml) and by tests/test_quants_iq.cpp: integer
// hashing and exactly rounded float operations only, so both get the same bits.

#include <cstdint>

namespace quants_iq {

constexpr int kRows     = 2;
constexpr int kPerRow   = 512;
constexpr int kRandomN  = 256;  // values of the random blocks per type
constexpr char kMagic[4] = {'L', 'Q', 'I', '1'};

inline uint32_t mix(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

// A uniform in [-1, 1] in steps of 1/1000.
inline float uniform(uint32_t key) {
    return float(int(mix(key) % 2001u) - 1000) / 1000.0f;
}

// Value i (0 <= i < kRows * kPerRow): bell-shaped (a sum of three uniforms)
// with a scale that changes every 32 values, an outlier every 97th value of
// values 256..511 (the others have none, so that a block's largest value is
// not always an outlier),
// one group of 32 zeros (values 640..671, in the second row) and one group of
// 32 that is almost all negative (values 192..223).
inline float input_value(uint32_t i) {
    if (i >= 640 && i < 672) return 0.0f;
    const float scale = float(1 + mix(i / 32 + 7777u) % 8u) / 4.0f;
    float       v     = (uniform(3 * i) + uniform(3 * i + 1) + uniform(3 * i + 2)) * scale;
    if (i >= 256 && i < 512 && i % 97 == 5) v *= 8.0f;
    if (i >= 192 && i < 224 && i % 11 != 0) v = v < 0 ? v : -v - 0.0625f;
    return v;
}

// The importance matrix: one positive weight per column.
inline float imatrix_value(uint32_t j) {
    return 0.25f + float(mix(j + 99991u) % 1000u) / 500.0f;
}

} // namespace quants_iq
