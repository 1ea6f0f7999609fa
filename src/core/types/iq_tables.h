#pragma once

// The grids and sign tables of the i-quants, as ggml defines them (see iq_grids.inc).

#include <cstdint>
#include <cstring>

namespace loom::iq {

#include "iq_grids.inc"

// iq1s_grid with each byte (-1, 0 or 1) times 8: the IQ1 kernels add the
// delta of 8 values to these bytes to get their levels (8 g + delta).
struct Iq1sGrid8 {
    uint64_t v[2048];
};
constexpr Iq1sGrid8 make_iq1s_grid8() {
    Iq1sGrid8 t{};
    for (int i = 0; i < 2048; ++i) {
        uint64_t e = 0;
        for (int c = 0; c < 8; ++c) {
            const auto b = int8_t(uint8_t(iq1s_grid[i] >> (8 * c)));
            e |= uint64_t(uint8_t(int8_t(b * 8))) << (8 * c);
        }
        t.v[i] = e;
    }
    return t;
}
alignas(64) inline constexpr Iq1sGrid8 iq1s_grid8 = make_iq1s_grid8();

// The byte c (0..7) of a grid entry, as the decoders read it.
inline uint8_t grid_byte(uint64_t entry, int c) {
    return uint8_t(entry >> (8 * c));
}

// +1 or -1: whether bit j of a sign pattern is set.
inline float sign_of(uint8_t signs, int j) {
    return (signs & kmask_iq2xs[j]) ? -1.0f : 1.0f;
}

// The integer nearest to v, halves to even, for |v| < 2^22: adding 1.5 * 2^23
// leaves the rounded value in the low mantissa bits.
inline int nearest_int(float v) {
    const float shifted = v + 12582912.0f;
    uint32_t    bits;
    std::memcpy(&bits, &shifted, sizeof bits);
    return int(bits & 0x007fffff) - 0x00400000;
}

// The index of the entry of the ascending table val[0..n) nearest to v; a tie
// goes to the upper entry.
inline int best_index_int8(int n, const int8_t * val, float v) {
    if (v <= float(val[0])) return 0;
    if (v >= float(val[n - 1])) return n - 1;
    int lo = 0, hi = n - 1;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < float(val[mid])) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return v - float(val[hi - 1]) < float(val[hi]) - v ? hi - 1 : hi;
}

} // namespace loom::iq
