// Decoding of the grid-based i-quants (IQ2_*, IQ3_*, IQ1_*). Each weight is
// a grid coordinate times a group scale, with an optional sign; the float
// operations are done in ggml's order so that the values are the same bits.

#include <cstring>

#include "core/common.h"
#include "core/fp16.h"
#include "core/types/i_quants.h"
#include "core/types/iq_tables.h"

namespace loom {

using namespace iq;

namespace {

uint32_t load_u32(const void * p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

uint16_t load_u16(const void * p) {
    uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

constexpr float kIq1Delta = 0.125f;

} // namespace

void dequantize_row_iq2_xxs(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    const auto * x = static_cast<const block_iq2_xxs *>(vx);
    for (int64_t b = 0; b < k / QK_IQ; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int g = 0; g < QK_IQ / 32; ++g) {
            const uint32_t idx  = load_u32(x[b].qs + 4 * g);     // four grid indices
            const uint32_t meta = load_u32(x[b].qs + 4 * g + 2); // signs and scale
            const float    db   = d * (0.5f + float(meta >> 28)) * 0.25f;
            for (int l = 0; l < 4; ++l) {
                const uint64_t entry = iq2xxs_grid[(idx >> (8 * l)) & 0xff];
                const uint8_t  signs = ksigns_iq2xs[(meta >> (7 * l)) & 127];
                for (int j = 0; j < 8; ++j) {
                    *y++ = db * float(grid_byte(entry, j)) * sign_of(signs, j);
                }
            }
        }
    }
}

void dequantize_row_iq2_xs(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    const auto * x = static_cast<const block_iq2_xs *>(vx);
    for (int64_t b = 0; b < k / QK_IQ; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int g = 0; g < QK_IQ / 32; ++g) {
            const float db[2] = {d * (0.5f + float(x[b].scales[g] & 0xf)) * 0.25f,
                                 d * (0.5f + float(x[b].scales[g] >> 4)) * 0.25f};
            for (int l = 0; l < 4; ++l) {
                const uint16_t q     = x[b].qs[4 * g + l];
                const uint64_t entry = iq2xs_grid[q & 511];
                const uint8_t  signs = ksigns_iq2xs[q >> 9];
                for (int j = 0; j < 8; ++j) {
                    *y++ = db[l / 2] * float(grid_byte(entry, j)) * sign_of(signs, j);
                }
            }
        }
    }
}

void dequantize_row_iq2_s(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    const auto * x = static_cast<const block_iq2_s *>(vx);
    for (int64_t b = 0; b < k / QK_IQ; ++b) {
        const float     d     = fp16_to_fp32(x[b].d);
        const uint8_t * qs    = x[b].qs;
        const uint8_t * signs = x[b].qs + QK_IQ / 8;
        for (int g = 0; g < QK_IQ / 32; ++g) {
            const float db[2] = {d * (0.5f + float(x[b].scales[g] & 0xf)) * 0.25f,
                                 d * (0.5f + float(x[b].scales[g] >> 4)) * 0.25f};
            for (int l = 0; l < 4; ++l) {
                const int      index = qs[4 * g + l] | ((x[b].qh[g] << (8 - 2 * l)) & 0x300);
                const uint64_t entry = iq2s_grid[index];
                for (int j = 0; j < 8; ++j) {
                    *y++ = db[l / 2] * float(grid_byte(entry, j)) * sign_of(signs[4 * g + l], j);
                }
            }
        }
    }
}

void dequantize_row_iq3_xxs(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    const auto * x = static_cast<const block_iq3_xxs *>(vx);
    for (int64_t b = 0; b < k / QK_IQ; ++b) {
        const float     d    = fp16_to_fp32(x[b].d);
        const uint8_t * qs   = x[b].qs;
        const uint8_t * meta = x[b].qs + QK_IQ / 4;
        for (int g = 0; g < QK_IQ / 32; ++g) {
            const uint32_t m  = load_u32(meta + 4 * g);
            const float    db = d * (0.5f + float(m >> 28)) * 0.5f;
            for (int l = 0; l < 4; ++l) {
                const uint8_t  signs = ksigns_iq2xs[(m >> (7 * l)) & 127];
                const uint32_t e1    = iq3xxs_grid[qs[8 * g + 2 * l]];
                const uint32_t e2    = iq3xxs_grid[qs[8 * g + 2 * l + 1]];
                for (int j = 0; j < 4; ++j) {
                    y[j]     = db * float(grid_byte(e1, j)) * sign_of(signs, j);
                    y[j + 4] = db * float(grid_byte(e2, j)) * sign_of(signs, j + 4);
                }
                y += 8;
            }
        }
    }
}

void dequantize_row_iq3_s(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    const auto * x = static_cast<const block_iq3_s *>(vx);
    for (int64_t b = 0; b < k / QK_IQ; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int g = 0; g < QK_IQ / 32; ++g) {
            const uint8_t   sc    = x[b].scales[g / 2];
            const float     db    = d * float(1 + 2 * ((g % 2) ? (sc >> 4) : (sc & 0xf)));
            const uint8_t * qs    = x[b].qs + 8 * g;
            const uint8_t * signs = x[b].signs + 4 * g;
            const int       qh    = x[b].qh[g];
            for (int l = 0; l < 4; ++l) {
                const uint32_t e1 = iq3s_grid[qs[2 * l] | ((qh << (8 - 2 * l)) & 256)];
                const uint32_t e2 = iq3s_grid[qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
                for (int j = 0; j < 4; ++j) {
                    y[j]     = db * float(grid_byte(e1, j)) * sign_of(signs[l], j);
                    y[j + 4] = db * float(grid_byte(e2, j)) * sign_of(signs[l], j + 4);
                }
                y += 8;
            }
        }
    }
}

void dequantize_row_iq1_s(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    const auto * x = static_cast<const block_iq1_s *>(vx);
    for (int64_t b = 0; b < k / QK_IQ; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int g = 0; g < QK_IQ / 32; ++g) {
            const uint16_t qh    = x[b].qh[g];
            const float    dl    = d * float(2 * ((qh >> 12) & 7) + 1);
            const float    delta = (qh & 0x8000) ? -kIq1Delta : kIq1Delta;
            for (int l = 0; l < 4; ++l) {
                const uint64_t entry = iq1s_grid[x[b].qs[4 * g + l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int j = 0; j < 8; ++j) {
                    *y++ = dl * (float(int8_t(grid_byte(entry, j))) + delta);
                }
            }
        }
    }
}

void dequantize_row_iq1_m(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    const auto * x = static_cast<const block_iq1_m *>(vx);
    for (int64_t b = 0; b < k / QK_IQ; ++b) {
        uint16_t sc[4];
        for (int i = 0; i < 4; ++i) {
            sc[i] = load_u16(x[b].scales + 2 * i);
        }
        // the fp16 super-block scale: the top nibble of each of the four scale words
        const uint16_t dbits =
            uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const float d = fp16_to_fp32(dbits);
        for (int g = 0; g < QK_IQ / 32; ++g) {
            const uint8_t * qs = x[b].qs + 4 * g;
            const uint8_t * qh = x[b].qh + 2 * g;
            const int       sh = 6 * (g % 2);
            const float     dl[2] = {d * float(2 * ((sc[g / 2] >> sh) & 0x7) + 1),
                                     d * float(2 * ((sc[g / 2] >> (sh + 3)) & 0x7) + 1)};
            for (int l = 0; l < 4; ++l) {
                const uint8_t  h     = qh[l / 2];
                const int      hi    = (l % 2) ? ((h << 4) & 0x700) : ((h << 8) & 0x700);
                const float    delta = (h & ((l % 2) ? 0x80 : 0x08)) ? -kIq1Delta : kIq1Delta;
                const uint64_t entry = iq1s_grid[qs[l] | hi];
                for (int j = 0; j < 8; ++j) {
                    *y++ = dl[l / 2] * (float(int8_t(grid_byte(entry, j))) + delta);
                }
            }
        }
    }
}

} // namespace loom
