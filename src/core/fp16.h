#pragma once

// Scalar half and bfloat16 conversions (portable, exact rounding to nearest even).

#include <cstdint>
#include <cstring>

namespace loom {

inline uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
}
inline float bits_f32(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
}

inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp  = (h >> 10) & 0x1fu;
    const uint32_t man  = h & 0x3ffu;
    if (exp == 0) {
        // zero or subnormal: man * 2^-24
        const float v = float(man) * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) {
        return bits_f32(sign | 0x7f800000u | (man << 13));
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

inline uint16_t fp32_to_fp16(float f) {
    const uint32_t x    = f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax   = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) { // inf or nan
        return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
    }
    if (ax >= 0x477ff000u) { // rounds to >= 65520: overflow to inf
        return uint16_t(sign | 0x7c00u);
    }
    if (ax < 0x38800000u) { // below the smallest normal half: subnormal or zero
        // scale so the half's subnormal step becomes 1, rounding by the FPU (nearest even)
        const float    av = bits_f32(ax) * 16777216.0f; // 2^24
        const uint32_t m  = uint32_t(__builtin_nearbyintf(av));
        return uint16_t(sign | m);
    }
    // normal: rebias exponent, round mantissa to nearest even
    const uint32_t mant = ax + 0xc8000fffu + ((ax >> 13) & 1u); // -112 << 23 plus rounding bias
    return uint16_t(sign | (mant >> 13));
}

inline float bf16_to_fp32(uint16_t b) {
    return bits_f32(uint32_t(b) << 16);
}

inline uint16_t fp32_to_bf16(float f) {
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return uint16_t((u >> 16) | 64u); // keep NaN quiet
    }
    return uint16_t((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

} // namespace loom
