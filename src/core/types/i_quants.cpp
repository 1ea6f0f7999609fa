// The i-quants: their rows of the type table, the IQ4 formats (a 16-entry
// non-linear table of values) and the dispatch of ggml_quantize_chunk's work
// for the family.

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstring>

#include "core/common.h"
#include "core/fp16.h"
#include "core/types.h"
#include "core/types/legacy_k.h"
#include "core/types/i_quants.h"
#include "core/types/iq_search.h"
#include "core/types/iq_tables.h"

namespace loom {

using namespace iq;

void dequantize_row_iq4_nl(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK4_NL == 0);
    const auto * x = static_cast<const block_iq4_nl *>(vx);
    for (int64_t b = 0; b < k / QK4_NL; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK4_NL / 2; ++j) {
            y[j]              = d * float(kvalues_iq4nl[x[b].qs[j] & 0xf]);
            y[j + QK4_NL / 2] = d * float(kvalues_iq4nl[x[b].qs[j] >> 4]);
        }
        y += QK4_NL;
    }
}

void dequantize_row_iq4_xs(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    const auto * x = static_cast<const block_iq4_xs *>(vx);
    for (int64_t b = 0; b < k / QK_IQ; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int g = 0; g < QK_IQ / 32; ++g) {
            // 6-bit scale: low nibble from scales_l, two high bits from scales_h; offset 32
            const int ls = ((x[b].scales_l[g / 2] >> (4 * (g % 2))) & 0xf) | (((x[b].scales_h >> (2 * g)) & 3) << 4);
            const float   dl = d * float(ls - 32);
            const uint8_t * qs = x[b].qs + 16 * g;
            for (int j = 0; j < 16; ++j) {
                y[j]      = dl * float(kvalues_iq4nl[qs[j] & 0xf]);
                y[j + 16] = dl * float(kvalues_iq4nl[qs[j] >> 4]);
            }
            y += 32;
        }
    }
}

namespace {

constexpr float kIq4MinMax = 1e-15f; // a group whose largest magnitude is below this is stored as zero

// Quantizes n values of x (n = 32 for IQ4_NL, 256 for IQ4_XS) in groups of
// 32, as ggml does: per group, the scale that maps the value of largest
// magnitude to the table's end, then (ntry > 0) 2*ntry+1 scales around it,
// keeping the one of least weighted error; IQ4_XS then stores the groups'
// scales as 6-bit multiples of one fp16 scale. L keeps its contents between
// calls: a zero IQ4_NL group stores the previous group's indices, as ggml's does.
struct Iq4Encoder {
    uint8_t L[QK_IQ] = {};

    void encode(int n, const float * x, uint16_t * dh, uint8_t * q4, uint16_t * scales_h, uint8_t * scales_l,
                const float * qw, int ntry) {
        const int8_t * values = kvalues_iq4nl;
        float          sigma2 = 0;
        for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
        sigma2 *= 2.f / float(n);

        std::memset(q4, 0, size_t(n / 2));
        *dh = fp32_to_fp16(0.f);

        float scales[QK_IQ / 32];
        float weight[32];
        float max_scale = 0, amax_scale = 0;
        for (int ib = 0; ib < n / 32; ++ib) {
            const float * xb = x + ib * 32;
            uint8_t *     Lb = L + ib * 32;
            for (int j = 0; j < 32; ++j) {
                weight[j] = qw ? qw[ib * 32 + j] * std::sqrt(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
            }
            float amax = 0, max = 0;
            for (int j = 0; j < 32; ++j) {
                const float ax = std::fabs(xb[j]);
                if (ax > amax) {
                    amax = ax;
                    max  = xb[j];
                }
            }
            if (amax < kIq4MinMax) {
                scales[ib] = 0;
                continue;
            }
            float d     = ntry > 0 ? -max / float(values[0]) : max / float(values[0]);
            float id    = 1 / d;
            float sumqx = 0, sumq2 = 0;
            for (int j = 0; j < 32; ++j) {
                const int l = best_index_int8(16, values, id * xb[j]);
                Lb[j]       = uint8_t(l);
                const float q = float(values[l]);
                sumqx += weight[j] * q * xb[j];
                sumq2 += weight[j] * q * q;
            }
            d          = sumq2 > 0 ? sumqx / sumq2 : 0.f;
            float best = d * sumqx;
            for (int itry = -ntry; itry <= ntry; ++itry) {
                id    = float(itry + values[0]) / max;
                sumqx = sumq2 = 0;
                for (int j = 0; j < 32; ++j) {
                    const float q = float(values[best_index_int8(16, values, id * xb[j])]);
                    sumqx += weight[j] * q * xb[j];
                    sumq2 += weight[j] * q * q;
                }
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    d    = sumqx / sumq2;
                    best = d * sumqx;
                }
            }
            scales[ib] = d;
            if (std::fabs(d) > amax_scale) {
                amax_scale = std::fabs(d);
                max_scale  = d;
            }
        }

        if (n > 32) {
            *scales_h = 0;
            const float d  = -max_scale / 32;
            *dh            = fp32_to_fp16(d);
            const float id = d != 0 ? 1 / d : 0.f;
            for (int ib = 0; ib < n / 32; ++ib) {
                const int   l   = std::clamp(nearest_int(id * scales[ib]), -32, 31);
                const float dl  = d * float(l);
                const float idl = dl != 0 ? 1 / dl : 0.f;
                for (int j = 0; j < 32; ++j) {
                    L[ib * 32 + j] = uint8_t(best_index_int8(16, values, idl * x[ib * 32 + j]));
                }
                const int u = l + 32;
                if (ib % 2 == 0) {
                    scales_l[ib / 2] = uint8_t(u & 0xf);
                } else {
                    scales_l[ib / 2] = uint8_t(scales_l[ib / 2] | ((u & 0xf) << 4));
                }
                *scales_h = uint16_t(*scales_h | ((u >> 4) << (2 * ib)));
            }
        } else {
            *dh = fp32_to_fp16(scales[0]);
            if (ntry > 0) {
                const float id = scales[0] != 0 ? 1 / scales[0] : 0;
                for (int j = 0; j < 32; ++j) {
                    L[j] = uint8_t(best_index_int8(16, values, id * x[j]));
                }
            }
        }
        for (int i = 0; i < n / 32; ++i) {
            for (int j = 0; j < 16; ++j) {
                q4[16 * i + j] = uint8_t(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
            }
        }
    }
};

void quantize_iq4_nl(const float * x, void * vy, int64_t nrows, int64_t n_per_row, const float * qw, int ntry) {
    auto *     y = static_cast<block_iq4_nl *>(vy);
    Iq4Encoder enc;
    for (int64_t r = 0; r < nrows; ++r) {
        for (int64_t b = 0; b < n_per_row / QK4_NL; ++b) {
            block_iq4_nl & blk      = *y++;
            uint16_t       unused_h = 0;
            enc.encode(QK4_NL, x + r * n_per_row + b * QK4_NL, &blk.d, blk.qs, &unused_h, nullptr,
                       qw ? qw + b * QK4_NL : nullptr, ntry);
        }
    }
}

// IQ4_XS encodes per row: the importance matrix has one weight per column.
void quantize_iq4_xs(const float * x, void * vy, int64_t nrows, int64_t n_per_row, const float * qw) {
    auto *     y = static_cast<block_iq4_xs *>(vy);
    Iq4Encoder enc;
    for (int64_t r = 0; r < nrows; ++r) {
        for (int64_t b = 0; b < n_per_row / QK_IQ; ++b) {
            block_iq4_xs & blk = *y++;
            enc.encode(QK_IQ, x + r * n_per_row + b * QK_IQ, &blk.d, blk.qs, &blk.scales_h, blk.scales_l,
                       qw ? qw + b * QK_IQ : nullptr, 7);
        }
    }
}

} // namespace

void quantize_row_iq4_nl_ref(const float * x, void * y, int64_t k) {
    LOOM_ASSERT(k % QK4_NL == 0);
    quantize_iq4_nl(x, y, 1, k, nullptr, -1);
}

void quantize_row_iq4_xs_ref(const float * x, void * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    quantize_iq4_xs(x, y, 1, k, nullptr);
}

bool quantize_chunk_iq(ggml_type type, const float * src, void * dst, int64_t nrows, int64_t n_per_row,
                       const float * imatrix, size_t * written) {
    const size_t row = ggml_row_size(type, n_per_row);
    switch (type) {
        case GGML_TYPE_IQ4_NL:
            // ggml searches 15 scales per group here, where its reference tries one
            quantize_iq4_nl(src, dst, nrows, n_per_row, imatrix, 7);
            break;
        case GGML_TYPE_IQ4_XS: quantize_iq4_xs(src, dst, nrows, n_per_row, imatrix); break;
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K:
        case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S:
        case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64:
        case GGML_TYPE_IQ1_M: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            if (!quantize_chunk_grid(type, src, dst, nrows, n_per_row, imatrix)) {
                return false;
            }
            break;
    }
    *written = size_t(nrows) * row;
    return true;
}

bool iq_requires_imatrix(ggml_type type) {
    return type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS || type == GGML_TYPE_IQ1_S;
}

ggml_type iq_vec_dot_type(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ3_S:
        case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ1_M:
        case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_TQ1_0:
        case GGML_TYPE_TQ2_0: return GGML_TYPE_Q8_K;
        case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4:
        case GGML_TYPE_Q1_0:
        case GGML_TYPE_Q2_0: return GGML_TYPE_Q8_0;
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K:
        case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_I8:
        case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_BF16:
        case GGML_TYPE_COUNT: return GGML_TYPE_COUNT;
    }
    return GGML_TYPE_COUNT;
}

namespace {

template <ggml_type T>
size_t quantize_rows_iq(const float * src, void * dst, int64_t nrows, int64_t n_per_row, const float * imatrix) {
    size_t written = 0;
    const bool ok  = quantize_chunk_iq(T, src, dst, nrows, n_per_row, imatrix, &written);
    LOOM_ASSERT(ok); // the caller checked the importance matrix the type needs
    return written;
}

void init_tables() {
    quantize_init_iq(GGML_TYPE_IQ2_XXS);
    quantize_init_iq(GGML_TYPE_IQ2_XS);
    quantize_init_iq(GGML_TYPE_IQ2_S);
    quantize_init_iq(GGML_TYPE_IQ3_XXS);
    quantize_init_iq(GGML_TYPE_IQ3_S);
    quantize_init_iq(GGML_TYPE_IQ1_S);
}

bool validate_iq1_m(const void * data, size_t nblocks, size_t * bad_block, float * bad_value) {
    const auto * b = static_cast<const block_iq1_m *>(data);
    for (size_t i = 0; i < nblocks; ++i) {
        uint16_t sc[4];
        std::memcpy(sc, b[i].scales, sizeof(sc));
        const uint16_t h = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        if ((h & 0x7c00) == 0x7c00) {
            *bad_block = i;
            *bad_value = fp16_to_fp32(h);
            return false;
        }
    }
    return true;
}

} // namespace

// Products on the CPU quantize the activations to iq_vec_dot_type(type).
void add_iq_types(TypeRows & rows) {
    // name, block size, bytes, quantized, to_float, from_float (ggml's from_float_ref: none for
    // IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M, which encode through quantize_chunk_iq only)
    rows[GGML_TYPE_IQ2_XXS] = {"iq2_xxs", QK_IQ, sizeof(block_iq2_xxs), true, dequantize_row_iq2_xxs, nullptr};
    rows[GGML_TYPE_IQ2_XS]  = {"iq2_xs", QK_IQ, sizeof(block_iq2_xs), true, dequantize_row_iq2_xs, nullptr};
    rows[GGML_TYPE_IQ2_S]   = {"iq2_s", QK_IQ, sizeof(block_iq2_s), true, dequantize_row_iq2_s, quantize_row_iq2_s_ref};
    rows[GGML_TYPE_IQ3_XXS] = {"iq3_xxs", QK_IQ, sizeof(block_iq3_xxs), true, dequantize_row_iq3_xxs,
                               quantize_row_iq3_xxs_ref};
    rows[GGML_TYPE_IQ3_S]   = {"iq3_s", QK_IQ, sizeof(block_iq3_s), true, dequantize_row_iq3_s, quantize_row_iq3_s_ref};
    rows[GGML_TYPE_IQ1_S]   = {"iq1_s", QK_IQ, sizeof(block_iq1_s), true, dequantize_row_iq1_s, nullptr};
    rows[GGML_TYPE_IQ1_M]   = {"iq1_m", QK_IQ, sizeof(block_iq1_m), true, dequantize_row_iq1_m, nullptr};
    rows[GGML_TYPE_IQ4_NL]  = {"iq4_nl", QK4_NL, sizeof(block_iq4_nl), true, dequantize_row_iq4_nl,
                               quantize_row_iq4_nl_ref};
    rows[GGML_TYPE_IQ4_XS]  = {"iq4_xs", QK_IQ, sizeof(block_iq4_xs), true, dequantize_row_iq4_xs,
                               quantize_row_iq4_xs_ref};

    // ggml_quantize_chunk goes through the family's encoders (IQ4_NL too: its
    // chunk encoder searches more scales than its reference one).
    rows[GGML_TYPE_IQ2_XXS].quantize = quantize_rows_iq<GGML_TYPE_IQ2_XXS>;
    rows[GGML_TYPE_IQ2_XS].quantize  = quantize_rows_iq<GGML_TYPE_IQ2_XS>;
    rows[GGML_TYPE_IQ2_S].quantize   = quantize_rows_iq<GGML_TYPE_IQ2_S>;
    rows[GGML_TYPE_IQ3_XXS].quantize = quantize_rows_iq<GGML_TYPE_IQ3_XXS>;
    rows[GGML_TYPE_IQ3_S].quantize   = quantize_rows_iq<GGML_TYPE_IQ3_S>;
    rows[GGML_TYPE_IQ1_S].quantize   = quantize_rows_iq<GGML_TYPE_IQ1_S>;
    rows[GGML_TYPE_IQ1_M].quantize   = quantize_rows_iq<GGML_TYPE_IQ1_M>;
    rows[GGML_TYPE_IQ4_NL].quantize  = quantize_rows_iq<GGML_TYPE_IQ4_NL>;
    rows[GGML_TYPE_IQ4_XS].quantize  = quantize_rows_iq<GGML_TYPE_IQ4_XS>;
    for (ggml_type t : {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,
                        GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M}) {
        rows[t].quantize_init = init_tables;
    }

    // ggml_validate_row_data: the fp16 scale d first in the block; IQ1_M's
    // scale is spread over the top nibbles of its four scale words.
    rows[GGML_TYPE_IQ2_XXS].validate = validate_halves<sizeof(block_iq2_xxs), offsetof(block_iq2_xxs, d)>;
    rows[GGML_TYPE_IQ2_XS].validate  = validate_halves<sizeof(block_iq2_xs), offsetof(block_iq2_xs, d)>;
    rows[GGML_TYPE_IQ2_S].validate   = validate_halves<sizeof(block_iq2_s), offsetof(block_iq2_s, d)>;
    rows[GGML_TYPE_IQ3_XXS].validate = validate_halves<sizeof(block_iq3_xxs), offsetof(block_iq3_xxs, d)>;
    rows[GGML_TYPE_IQ3_S].validate   = validate_halves<sizeof(block_iq3_s), offsetof(block_iq3_s, d)>;
    rows[GGML_TYPE_IQ1_S].validate   = validate_halves<sizeof(block_iq1_s), offsetof(block_iq1_s, d)>;
    rows[GGML_TYPE_IQ4_NL].validate  = validate_halves<sizeof(block_iq4_nl), offsetof(block_iq4_nl, d)>;
    rows[GGML_TYPE_IQ4_XS].validate  = validate_halves<sizeof(block_iq4_xs), offsetof(block_iq4_xs, d)>;
    rows[GGML_TYPE_IQ1_M].validate   = validate_iq1_m;
}

} // namespace loom
