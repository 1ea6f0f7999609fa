#pragma once

// The grids and sign tables of the i-quants, as ggml defines them (see iq_grids.inc).

#include <cstdint>
#include <cstring>

namespace loom::iq {

#include "iq_grids.inc"

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
