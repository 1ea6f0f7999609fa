// The grid-searched encoders: IQ3_XXS, IQ3_S and IQ2_S (ggml's reference
// encoders, and with an importance matrix its quantize_chunk) and IQ2_XXS,
// IQ2_XS (quantize_chunk only, with an importance matrix). Per group: signs
// split off (the grids hold magnitudes), each value weighted (by its square,
// or by the importance matrix scaled with the row's spread), the levels
// searched (search_group), then the groups' scales stored as 4-bit multiples
// of one fp16 scale. The steps and their float operations follow ggml's so
// that the bytes are the same.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/common.h"
#include "core/fp16.h"
#include "core/types/i_quants.h"
#include "core/types/iq_search.h"
#include "core/types/iq_tables.h"

#include "core/types/quant_search.h"

namespace loom {

using namespace iq;

namespace {

// The weights of a group of n values of super-block xbl (256 values) at xb.
void group_weights(const float * xb, int n, const float * qw, float sigma2, float unweighted_bias, float * weight,
                   float * waux) {
    for (int i = 0; i < n; ++i) {
        weight[i] = qw ? qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]) : unweighted_bias + xb[i] * xb[i];
    }
    for (int i = 0; i < n; ++i) waux[i] = std::sqrt(weight[i]);
}

float sum_squares(const float * xbl) {
    float sumx2 = 0;
    for (int i = 0; i < QK_IQ; ++i) sumx2 += xbl[i] * xbl[i];
    return sumx2;
}

float spread(const float * xbl) {
    return 2 * sum_squares(xbl) / QK_IQ;
}

// Magnitudes into xval, the sign bits of each 8 values into signs.
void split_signs(const float * xb, int n, float * xval, uint8_t * signs) {
    for (int k = 0; k < n / 8; ++k) {
        uint8_t s = 0;
        for (int i = 0; i < 8; ++i) {
            const float v = xb[8 * k + i];
            xval[8 * k + i] = v >= 0 ? v : -v;
            if (!(v >= 0)) s = uint8_t(s | (1 << i));
        }
        signs[k] = s;
    }
}

// For formats that store 7 sign bits per 8 values (the eighth makes the
// count of negatives even): an odd count flips the value of least weighted square.
void make_signs_even(const float * xb, const float * weight, int groups, float * xval, uint8_t * signs) {
    for (int k = 0; k < groups; ++k) {
        if (std::popcount(unsigned(signs[k])) % 2 == 0) continue;
        int   imin = 0;
        float min  = weight[8 * k] * xb[8 * k] * xb[8 * k];
        for (int i = 1; i < 8; ++i) {
            const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
            if (ax < min) {
                min  = ax;
                imin = i;
            }
        }
        xval[8 * k + imin] = -xval[8 * k + imin];
        signs[k]           = uint8_t(signs[k] ^ (1 << imin));
    }
}

int grid_point(const GridSearch & g, const int8_t * L) {
    const int p = g.point_of[size_t(g.key_of(L))];
    return p >= 0 ? p : 0; // search_group leaves every point on the grid
}

int scale_code(float id, float scale) {
    return std::clamp(nearest_int(0.5f * (id * scale - 1)), 0, 15);
}

// IQ3_XXS: 7 sign bits per 8 values, a 4-bit scale per 32.
void quantize_iq3_xxs_row(const float * x, block_iq3_xxs * y, int64_t n, const float * qw) {
    const GridSearch & g = grid_search(GGML_TYPE_IQ3_XXS);
    const GroupSearch  p{32, 8, 15, 0.2f, GroupSearch::OffGrid};
    for (int64_t b = 0; b < n / QK_IQ; ++b, x += QK_IQ) {
        block_iq3_xxs & blk = y[b];
        std::memset(&blk, 0, sizeof blk);
        uint32_t    meta[QK_IQ / 32] = {};
        float       scales[QK_IQ / 32];
        float       max_scale = 0;
        const float sigma2    = spread(x);
        for (int ib = 0; ib < QK_IQ / 32; ++ib) {
            const float * xb = x + 32 * ib;
            float         weight[32], waux[32], xval[32];
            uint8_t       signs[4];
            group_weights(xb, 32, qw ? qw + b * QK_IQ + 32 * ib : nullptr, sigma2, 0.0f, weight, waux);
            split_signs(xb, 32, xval, signs);
            make_signs_even(xb, weight, 4, xval, signs);
            float max = xval[0];
            for (int i = 1; i < 32; ++i) max = std::max(max, xval[i]);
            if (max < 1e-8f) {
                scales[ib] = 0;
                continue;
            }
            int8_t L[32];
            float  scale = search_group(g, p, xval, weight, waux, max, max / float(2 * p.kmaxq - 1), L);
            if (scale < 0) {
                scale = -scale;
                for (uint8_t & s : signs) s = uint8_t(~s);
            }
            for (int k = 0; k < 8; ++k) blk.qs[8 * ib + k] = uint8_t(grid_point(g, L + 4 * k));
            meta[ib] = uint32_t(signs[0] & 127) | uint32_t(signs[1] & 127) << 7 | uint32_t(signs[2] & 127) << 14 |
                       uint32_t(signs[3] & 127) << 21;
            scales[ib] = scale;
            max_scale  = std::max(max_scale, scale);
        }
        if (max_scale == 0) {
            std::memset(&blk, 0, sizeof blk);
            continue;
        }
        const float d  = max_scale / 31;
        blk.d          = fp32_to_fp16(d * 1.0125f);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_IQ / 32; ++ib) {
            meta[ib] |= uint32_t(scale_code(id, scales[ib])) << 28;
        }
        std::memcpy(blk.qs + QK_IQ / 4, meta, sizeof meta);
    }
}

// IQ3_S keeps all 8 sign bits and a 9th index bit per point in qh. Like
// ggml's, the cursors into qs and signs move only past groups that are not
// zero, so a zero group shifts the later groups' points and signs down.
void quantize_iq3_s_row(const float * x, block_iq3_s * y, int64_t n, const float * qw) {
    const GridSearch & g = grid_search(GGML_TYPE_IQ3_S);
    const GroupSearch  p{32, 8, 9, 0.2f, GroupSearch::OffGridAll};
    for (int64_t b = 0; b < n / QK_IQ; ++b, x += QK_IQ) {
        block_iq3_s & blk = y[b];
        std::memset(&blk, 0, sizeof blk);
        uint8_t *   qs    = blk.qs;
        uint8_t *   sg    = blk.signs;
        float       scales[QK_IQ / 32];
        float       max_scale = 0;
        const float sigma2    = spread(x);
        for (int ib = 0; ib < QK_IQ / 32; ++ib) {
            const float * xb = x + 32 * ib;
            float         weight[32], waux[32], xval[32];
            uint8_t       signs[4];
            group_weights(xb, 32, qw ? qw + b * QK_IQ + 32 * ib : nullptr, sigma2, 0.0f, weight, waux);
            split_signs(xb, 32, xval, signs);
            float max = xval[0];
            for (int i = 1; i < 32; ++i) max = std::max(max, xval[i]);
            if (max == 0) {
                scales[ib] = 0;
                continue;
            }
            int8_t L[32];
            float  scale = search_group(g, p, xval, weight, waux, max, max / float(2 * p.kmaxq - 1), L);
            if (scale < 0) {
                scale = -scale;
                for (uint8_t & s : signs) s = uint8_t(~s);
            }
            for (int k = 0; k < 8; ++k) {
                const int point = grid_point(g, L + 4 * k);
                qs[k]           = uint8_t(point & 255);
                blk.qh[ib]      = uint8_t(blk.qh[ib] | ((point >> 8) << k));
            }
            qs += 8;
            std::memcpy(sg, signs, 4);
            sg += 4;
            scales[ib] = scale;
            max_scale  = std::max(max_scale, scale);
        }
        if (max_scale == 0) continue;
        const float d  = max_scale / 31;
        blk.d          = fp32_to_fp16(d * 1.033f);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_IQ / 32; ib += 2) {
            blk.scales[ib / 2] = uint8_t(scale_code(id, scales[ib]) | (scale_code(id, scales[ib + 1]) << 4));
        }
    }
}

// IQ2_S: groups of 16 (two points of 8), weights biased by a quarter of the
// row's spread when there is no importance matrix.
void quantize_iq2_s_row(const float * x, block_iq2_s * y, int64_t n, const float * qw) {
    const GridSearch & g = grid_search(GGML_TYPE_IQ2_S);
    const GroupSearch  p{16, 3, 9, 0.1f, GroupSearch::OffGrid};
    for (int64_t b = 0; b < n / QK_IQ; ++b, x += QK_IQ) {
        block_iq2_s & blk = y[b];
        std::memset(&blk, 0, sizeof blk);
        float       scales[QK_IQ / 16];
        float       max_scale = 0;
        const float sigma2    = spread(x);
        for (int ib = 0; ib < QK_IQ / 16; ++ib) {
            const float * xb = x + 16 * ib;
            float         weight[16], waux[16], xval[16];
            uint8_t       signs[2];
            group_weights(xb, 16, qw ? qw + b * QK_IQ + 16 * ib : nullptr, sigma2, 0.25f * sigma2, weight, waux);
            split_signs(xb, 16, xval, signs);
            float max = xval[0];
            for (int i = 1; i < 16; ++i) max = std::max(max, xval[i]);
            if (max < 1e-8f) {
                scales[ib] = 0;
                continue;
            }
            int8_t L[16];
            float  scale = search_group(g, p, xval, weight, waux, max, max / float(2 * p.kmaxq - 1), L);
            if (scale < 0) {
                scale = -scale;
                for (uint8_t & s : signs) s = uint8_t(~s);
            }
            for (int k = 0; k < 2; ++k) {
                const int point       = grid_point(g, L + 8 * k);
                const int i8          = 2 * ib + k;
                blk.qs[i8]            = uint8_t(point & 255);
                blk.qh[i8 / 4]        = uint8_t(blk.qh[i8 / 4] | ((point >> 8) << (2 * (i8 % 4))));
                blk.qs[QK_IQ / 8 + i8] = signs[k];
            }
            scales[ib] = scale;
            max_scale  = std::max(max_scale, scale);
        }
        if (max_scale == 0) continue;
        const float d  = max_scale / 31;
        blk.d          = fp32_to_fp16(d * 0.9875f);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_IQ / 16; ib += 2) {
            blk.scales[ib / 2] = uint8_t(scale_code(id, scales[ib]) | (scale_code(id, scales[ib + 1]) << 4));
        }
    }
}

// The scale of n <= 32 values x >= 0 (largest >= 1e-15) on levels 0..nmax
// by weighted least squares (quant::fit_positive, ggml's make_qp_quants).
float fit_qp_scale(int n, int nmax, const float * x, const float * w) {
    uint8_t levels[32];
    return quant::fit_positive(n, nmax, x, levels, w);
}

// IQ2_XXS: groups of 32 (four points of 8, 7 sign bits each, a 4-bit scale);
// the search starts from a least-squares fit on levels 0..3. Needs qw.
void quantize_iq2_xxs_row(const float * x, block_iq2_xxs * y, int64_t n, const float * qw) {
    const GridSearch & g = grid_search(GGML_TYPE_IQ2_XXS);
    const GroupSearch  p{32, 3, 6, 0.1f, GroupSearch::Always};
    for (int64_t b = 0; b < n / QK_IQ; ++b, x += QK_IQ) {
        block_iq2_xxs & blk          = y[b];
        uint32_t        q2[QK_IQ / 16] = {};
        float           scales[QK_IQ / 32];
        float           max_scale = 0;
        const float     sigma2    = sum_squares(x) / QK_IQ;
        for (int ib = 0; ib < QK_IQ / 32; ++ib) {
            const float * xb = x + 32 * ib;
            float         weight[32], waux[32], xval[32];
            uint8_t       signs[4];
            group_weights(xb, 32, qw + b * QK_IQ + 32 * ib, sigma2, 0.0f, weight, waux);
            split_signs(xb, 32, xval, signs);
            make_signs_even(xb, weight, 4, xval, signs);
            float max = xval[0];
            for (int i = 1; i < 32; ++i) max = std::max(max, xval[i]);
            scales[ib] = 0;
            if (max < 1e-15f) continue;
            const float qp_scale = fit_qp_scale(32, p.kmaxq + 1, xval, weight);
            const float eff_max  = qp_scale * float(p.kmaxq);
            if (!(eff_max > 0)) continue;
            int8_t L[32];
            float  scale = search_group(g, p, xval, weight, waux, eff_max, qp_scale, L);
            if (scale < 0) {
                scale = -scale;
                for (uint8_t & s : signs) s = uint8_t(~s);
            }
            for (int k = 0; k < 4; ++k) {
                q2[2 * ib] |= uint32_t(grid_point(g, L + 8 * k)) << (8 * k);
                q2[2 * ib + 1] |= uint32_t(signs[k] & 127) << (7 * k);
            }
            scales[ib] = scale;
            max_scale  = std::max(max_scale, scale);
        }
        std::memset(&blk, 0, sizeof blk);
        if (max_scale == 0) continue;
        const float d  = max_scale / 31;
        blk.d          = fp32_to_fp16(d);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_IQ / 32; ++ib) q2[2 * ib + 1] |= uint32_t(scale_code(id, scales[ib])) << 28;
        std::memcpy(blk.qs, q2, sizeof q2);
    }
}

// IQ2_XS: groups of 16 (two points of 8 with a 9-bit index and 7 sign bits
// each), two 4-bit scales a byte. Needs qw.
void quantize_iq2_xs_row(const float * x, block_iq2_xs * y, int64_t n, const float * qw) {
    const GridSearch & g = grid_search(GGML_TYPE_IQ2_XS);
    const GroupSearch  p{16, 3, 9, 0.1f, GroupSearch::OffGrid};
    for (int64_t b = 0; b < n / QK_IQ; ++b, x += QK_IQ) {
        block_iq2_xs & blk             = y[b];
        uint16_t       q2[QK_IQ / 8] = {};
        float          scales[QK_IQ / 16];
        float          max_scale = 0;
        const float    sigma2    = sum_squares(x) / QK_IQ;
        for (int ib = 0; ib < QK_IQ / 16; ++ib) {
            const float * xb = x + 16 * ib;
            float         weight[16], waux[16], xval[16];
            uint8_t       signs[2];
            group_weights(xb, 16, qw + b * QK_IQ + 16 * ib, sigma2, 0.0f, weight, waux);
            split_signs(xb, 16, xval, signs);
            make_signs_even(xb, weight, 2, xval, signs);
            float max = xval[0];
            for (int i = 1; i < 16; ++i) max = std::max(max, xval[i]);
            scales[ib] = 0;
            if (max < 1e-15f) continue;
            int8_t L[16];
            float  scale = search_group(g, p, xval, weight, waux, max, max / float(2 * p.kmaxq - 1), L);
            if (scale < 0) {
                scale = -scale;
                for (uint8_t & s : signs) s = uint8_t(~s);
            }
            for (int k = 0; k < 2; ++k) {
                q2[2 * ib + k] = uint16_t(grid_point(g, L + 8 * k) | ((signs[k] & 127) << 9));
            }
            scales[ib] = scale;
            max_scale  = std::max(max_scale, scale);
        }
        std::memset(&blk, 0, sizeof blk);
        if (max_scale == 0) continue;
        const float d  = max_scale / 31;
        blk.d          = fp32_to_fp16(d);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_IQ / 16; ib += 2) {
            blk.scales[ib / 2] = uint8_t(scale_code(id, scales[ib]) | (scale_code(id, scales[ib + 1]) << 4));
        }
        std::memcpy(blk.qs, q2, sizeof q2);
    }
}

} // namespace

void quantize_row_iq3_xxs_ref(const float * x, void * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    quantize_iq3_xxs_row(x, static_cast<block_iq3_xxs *>(y), k, nullptr);
}

void quantize_row_iq3_s_ref(const float * x, void * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    quantize_iq3_s_row(x, static_cast<block_iq3_s *>(y), k, nullptr);
}

void quantize_row_iq2_s_ref(const float * x, void * y, int64_t k) {
    LOOM_ASSERT(k % QK_IQ == 0);
    quantize_iq2_s_row(x, static_cast<block_iq2_s *>(y), k, nullptr);
}

namespace iq {

bool quantize_chunk_grid(ggml_type type, const float * src, void * dst, int64_t nrows, int64_t n_per_row,
                         const float * imatrix) {
    if (type == GGML_TYPE_IQ1_S || type == GGML_TYPE_IQ1_M) {
        return quantize_chunk_iq1(type, src, dst, nrows, n_per_row, imatrix);
    }
    const int64_t nb = n_per_row / QK_IQ;
    for (int64_t r = 0; r < nrows; ++r) {
        const float * x = src + r * n_per_row;
        switch (type) {
            case GGML_TYPE_IQ3_XXS:
                quantize_iq3_xxs_row(x, static_cast<block_iq3_xxs *>(dst) + r * nb, n_per_row, imatrix);
                break;
            case GGML_TYPE_IQ3_S:
                quantize_iq3_s_row(x, static_cast<block_iq3_s *>(dst) + r * nb, n_per_row, imatrix);
                break;
            case GGML_TYPE_IQ2_S:
                quantize_iq2_s_row(x, static_cast<block_iq2_s *>(dst) + r * nb, n_per_row, imatrix);
                break;
            case GGML_TYPE_IQ2_XXS:
                if (!imatrix) return false;
                quantize_iq2_xxs_row(x, static_cast<block_iq2_xxs *>(dst) + r * nb, n_per_row, imatrix);
                break;
            case GGML_TYPE_IQ2_XS:
                if (!imatrix) return false;
                quantize_iq2_xs_row(x, static_cast<block_iq2_xs *>(dst) + r * nb, n_per_row, imatrix);
                break;
            case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
            case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K:
            case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ1_S:
            case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32:
            case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0:
            case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0:
            case GGML_TYPE_COUNT: return false;
        }
    }
    return true;
}

} // namespace iq

void quantize_init_iq(ggml_type type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ1_M:
        case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ3_S: grid_search(type); break;
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K:
        case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64:
        case GGML_TYPE_F64: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT: break;
    }
}

} // namespace loom
