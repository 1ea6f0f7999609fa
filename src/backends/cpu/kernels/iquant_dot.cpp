// Portable dot products of the grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and the ternary types (TQ1_0, TQ2_0)
// against Q8_K.
//
// Every one of these types is, per super-block of 256 weights, a float
// scale times an integer level times an integer scale per group of 16:
//  - IQ2_*: level = grid byte * sign, scale 2s + 1, value d (2s + 1) l / 8;
//  - IQ3_XXS: the same with a factor 1/4; IQ3_S with none;
//  - IQ1_S and IQ1_M: value d (2s + 1) (g + delta) with g in {-1, 0, 1}
//    and delta = +-1/8, taken as the integer level 8 g +- 1 with a factor
//    1/8 (what ggml sums as sum g q + sum delta q, in one integer);
//  - TQ2_0 and TQ1_0: level q - 1 in {-1, 0, 1}, scale 1.
// A decoder writes those levels and scales; one loop takes the integer sum
// against the column's bytes (exact) and adds d * y.d * sum per block in
// f32, the type's constant factor (a power of two) applied at the end. The
// SIMD kernels (simd/avx2/iquants_impl.h) sum the same integers.

#include <cstring>

#include "core/common.h"
#include "core/fp16.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"
#include "quant_dot.h"

namespace loom::cpu {

namespace {

using namespace iq;

// A super-block as integers: levels in the order of the values, one scale
// per group of 16, and the fp16 bits of the float scale.
struct IntBlock {
    int8_t   q[QK_K];
    int      scale[QK_K / 16];
    uint16_t d;
};

uint32_t load_u32(const void * p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// The 8 values of a grid entry with their signs: -l where bit j of signs is set.
void signed_grid8(uint64_t entry, uint8_t signs, int8_t * q) {
    for (int j = 0; j < 8; ++j) {
        const int l = grid_byte(entry, j);
        q[j]        = int8_t((signs >> j) & 1 ? -l : l);
    }
}

// The odd scale 2s + 1 of a 4-bit (or 3-bit) field.
int odd(unsigned s) {
    return int(2 * s + 1);
}

void decode(const block_iq2_xxs & x, IntBlock & o) {
    for (int g = 0; g < QK_K / 32; ++g) {
        const uint32_t idx  = load_u32(x.qs + 4 * g);     // four grid indices
        const uint32_t meta = load_u32(x.qs + 4 * g + 2); // four sign patterns, the scale
        for (int l = 0; l < 4; ++l) {
            signed_grid8(iq2xxs_grid[(idx >> (8 * l)) & 0xff], ksigns_iq2xs[(meta >> (7 * l)) & 127],
                         o.q + 32 * g + 8 * l);
        }
        o.scale[2 * g] = o.scale[2 * g + 1] = odd(meta >> 28);
    }
    o.d = x.d;
}

void decode(const block_iq2_xs & x, IntBlock & o) {
    for (int g = 0; g < QK_K / 32; ++g) {
        for (int l = 0; l < 4; ++l) {
            const uint16_t q = x.qs[4 * g + l];
            signed_grid8(iq2xs_grid[q & 511], ksigns_iq2xs[q >> 9], o.q + 32 * g + 8 * l);
        }
        o.scale[2 * g]     = odd(x.scales[g] & 0xf);
        o.scale[2 * g + 1] = odd(x.scales[g] >> 4);
    }
    o.d = x.d;
}

void decode(const block_iq2_s & x, IntBlock & o) {
    const uint8_t * signs = x.qs + QK_K / 8;
    for (int g = 0; g < QK_K / 32; ++g) {
        for (int l = 0; l < 4; ++l) {
            const int index = x.qs[4 * g + l] | ((x.qh[g] << (8 - 2 * l)) & 0x300);
            signed_grid8(iq2s_grid[index], signs[4 * g + l], o.q + 32 * g + 8 * l);
        }
        o.scale[2 * g]     = odd(x.scales[g] & 0xf);
        o.scale[2 * g + 1] = odd(x.scales[g] >> 4);
    }
    o.d = x.d;
}

// Two 4-value grid entries as one of 8 values.
uint64_t pair(uint32_t lo, uint32_t hi) {
    return uint64_t(lo) | (uint64_t(hi) << 32);
}

void decode(const block_iq3_xxs & x, IntBlock & o) {
    const uint8_t * meta = x.qs + QK_K / 4;
    for (int g = 0; g < QK_K / 32; ++g) {
        const uint32_t m  = load_u32(meta + 4 * g);
        const uint8_t * q = x.qs + 8 * g;
        for (int l = 0; l < 4; ++l) {
            signed_grid8(pair(iq3xxs_grid[q[2 * l]], iq3xxs_grid[q[2 * l + 1]]), ksigns_iq2xs[(m >> (7 * l)) & 127],
                         o.q + 32 * g + 8 * l);
        }
        o.scale[2 * g] = o.scale[2 * g + 1] = odd(m >> 28);
    }
    o.d = x.d;
}

void decode(const block_iq3_s & x, IntBlock & o) {
    for (int g = 0; g < QK_K / 32; ++g) {
        const uint8_t * q  = x.qs + 8 * g;
        const int       qh = x.qh[g];
        for (int l = 0; l < 4; ++l) {
            const uint32_t e1 = iq3s_grid[q[2 * l] | ((qh << (8 - 2 * l)) & 256)];
            const uint32_t e2 = iq3s_grid[q[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
            signed_grid8(pair(e1, e2), x.signs[4 * g + l], o.q + 32 * g + 8 * l);
        }
        const uint8_t sc   = x.scales[g / 2];
        o.scale[2 * g]     = odd(g % 2 ? sc >> 4 : sc & 0xf);
        o.scale[2 * g + 1] = o.scale[2 * g];
    }
    o.d = x.d;
}

// 8 values of an IQ1 grid entry (signed bytes -1, 0, 1) as 8 g + delta.
void iq1_levels8(uint64_t entry, int delta, int8_t * q) {
    for (int j = 0; j < 8; ++j) {
        q[j] = int8_t(8 * int8_t(grid_byte(entry, j)) + delta);
    }
}

void decode(const block_iq1_s & x, IntBlock & o) {
    for (int g = 0; g < QK_K / 32; ++g) {
        const uint16_t qh    = x.qh[g];
        const int      delta = qh & 0x8000 ? -1 : 1;
        for (int l = 0; l < 4; ++l) {
            iq1_levels8(iq1s_grid[x.qs[4 * g + l] | (((qh >> (3 * l)) & 7) << 8)], delta, o.q + 32 * g + 8 * l);
        }
        o.scale[2 * g] = o.scale[2 * g + 1] = odd((qh >> 12) & 7);
    }
    o.d = x.d;
}

void decode(const block_iq1_m & x, IntBlock & o) {
    uint16_t sc[4];
    std::memcpy(sc, x.scales, sizeof sc);
    for (int g = 0; g < QK_K / 32; ++g) {
        for (int l = 0; l < 4; ++l) {
            const uint8_t h     = x.qh[2 * g + l / 2];
            const int     hi    = l % 2 ? (h << 4) & 0x700 : (h << 8) & 0x700;
            const int     delta = h & (l % 2 ? 0x80 : 0x08) ? -1 : 1;
            iq1_levels8(iq1s_grid[x.qs[4 * g + l] | hi], delta, o.q + 32 * g + 8 * l);
        }
        const int sh       = 6 * (g % 2);
        o.scale[2 * g]     = odd((sc[g / 2] >> sh) & 7);
        o.scale[2 * g + 1] = odd((sc[g / 2] >> (sh + 3)) & 7);
    }
    // The fp16 scale: the top nibble of each of the four scale words.
    o.d = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
}

void decode(const block_tq2_0 & x, IntBlock & o) {
    for (int h = 0; h < 2; ++h) {
        for (int l = 0; l < 4; ++l) {
            for (int m = 0; m < 32; ++m) {
                o.q[128 * h + 32 * l + m] = int8_t(((x.qs[32 * h + m] >> (2 * l)) & 3) - 1);
            }
        }
    }
    for (int & s : o.scale) s = 1;
    o.d = x.d;
}

// The base-3 digit n of a TQ1_0 byte (times 3^n, the top digit read as
// (q * 3) >> 8), minus 1.
int8_t tq1_level(uint8_t byte, int n) {
    static constexpr uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t            q       = uint8_t(byte * pow3[n]);
    return int8_t(((q * 3) >> 8) - 1);
}

void decode(const block_tq1_0 & x, IntBlock & o) {
    // 32 bytes of 5 digits (values 32n + m), 16 bytes of 5 (160 + 16n + m),
    // qh's 4 bytes of 4 (240 + 4n + m).
    for (int n = 0; n < 5; ++n) {
        for (int m = 0; m < 32; ++m) o.q[32 * n + m] = tq1_level(x.qs[m], n);
        for (int m = 0; m < 16; ++m) o.q[160 + 16 * n + m] = tq1_level(x.qs[32 + m], n);
    }
    for (int n = 0; n < 4; ++n) {
        for (int m = 0; m < 4; ++m) o.q[240 + 4 * n + m] = tq1_level(x.qh[m], n);
    }
    for (int & s : o.scale) s = 1;
    o.d = x.d;
}

// factor * the sum over blocks of d * y.d * sum_g scale_g sum_{k in g} q_k y_k.
template <class W> float dot_levels(int64_t n, const void * vx, const void * vy, float factor) {
    LOOM_ASSERT(n % QK_K == 0);
    const auto * x   = static_cast<const W *>(vx);
    const auto * y   = static_cast<const block_q8_K *>(vy);
    float        sum = 0.0f;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        IntBlock b;
        decode(x[i], b);
        int isum = 0;
        for (int g = 0; g < QK_K / 16; ++g) {
            int s = 0;
            for (int k = 16 * g; k < 16 * g + 16; ++k) {
                s += int(b.q[k]) * int(y[i].qs[k]);
            }
            isum += b.scale[g] * s;
        }
        sum += fp16_to_fp32(b.d) * y[i].d * float(isum);
    }
    return factor * sum;
}

} // namespace

float dot_iq2_xxs_q8_K(int64_t n, const void * x, const void * y) {
    return dot_levels<block_iq2_xxs>(n, x, y, 0.125f);
}
float dot_iq2_xs_q8_K(int64_t n, const void * x, const void * y) {
    return dot_levels<block_iq2_xs>(n, x, y, 0.125f);
}
float dot_iq2_s_q8_K(int64_t n, const void * x, const void * y) {
    return dot_levels<block_iq2_s>(n, x, y, 0.125f);
}
float dot_iq3_xxs_q8_K(int64_t n, const void * x, const void * y) {
    return dot_levels<block_iq3_xxs>(n, x, y, 0.25f);
}
float dot_iq3_s_q8_K(int64_t n, const void * x, const void * y) {
    return dot_levels<block_iq3_s>(n, x, y, 1.0f);
}
float dot_iq1_s_q8_K(int64_t n, const void * x, const void * y) {
    return dot_levels<block_iq1_s>(n, x, y, 0.125f);
}
float dot_iq1_m_q8_K(int64_t n, const void * x, const void * y) {
    return dot_levels<block_iq1_m>(n, x, y, 0.125f);
}
float dot_tq2_0_q8_K(int64_t n, const void * x, const void * y) {
    return dot_levels<block_tq2_0>(n, x, y, 1.0f);
}
float dot_tq1_0_q8_K(int64_t n, const void * x, const void * y) {
    return dot_levels<block_tq1_0>(n, x, y, 1.0f);
}

} // namespace loom::cpu
