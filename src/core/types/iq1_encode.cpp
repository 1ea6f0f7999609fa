// The IQ1 encoders (IQ1_S, IQ1_M), as ggml_quantize_chunk runs them. Each
// value is one of three levels -1, 0, 1 plus a shift of +-1/8, times a group
// scale. For a group, the values sorted, the best split into the three levels
// is found exhaustively from prefix sums of weight * x and weight; points that
// are not on the grid are replaced by their nearest neighbour at that scale.
// The float operations follow ggml's so that the bytes are the same. Values
// equal within a group keep their order when sorted, as with ggml's qsort on
// the GNU C library (a merge sort); other C libraries may order them otherwise.

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/common.h"
#include "core/fp16.h"
#include "core/types/i_quants.h"
#include "core/types/iq_search.h"
#include "core/types/iq_tables.h"

namespace loom {

using namespace iq;

namespace {

constexpr float kDelta = 0.125f;
constexpr float kPlus[3]  = {-1 + kDelta, kDelta, 1 + kDelta};
constexpr float kMinus[3] = {-1 - kDelta, -kDelta, 1 - kDelta};

float weights_spread(const float * xbl) {
    float sumx2 = 0;
    for (int i = 0; i < QK_IQ; ++i) sumx2 += xbl[i] * xbl[i];
    return 2 * sumx2 / QK_IQ;
}

void group_weights(const float * xb, int n, const float * qw, float sigma2, float * weight) {
    for (int i = 0; i < n; ++i) weight[i] = qw ? qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]) : xb[i] * xb[i];
}

// The order of the n values of xb, ascending.
void sorted_order(const float * xb, int n, int * idx) {
    std::iota(idx, idx + n, 0);
    std::stable_sort(idx, idx + n, [xb](int a, int b) { return xb[a] < xb[b]; });
}

// The point of the grid for 8 levels L; off the grid, the neighbour of least
// weighted error sum w (scale * xx[level] - x)^2 (the first on a tie), whose
// levels replace L. Sets *on_grid.
int iq1_point(const GridSearch & g, int8_t * L, const float * x, const float * w, float scale, const float * xx,
              bool * on_grid) {
    const int u = g.key_of(L);
    int       p = g.point_of[size_t(u)];
    *on_grid    = p >= 0;
    if (p >= 0) return p;
    float best_d2 = FLT_MAX;
    p             = g.neighbours[g.first[size_t(u)]];
    for (uint32_t n = g.first[size_t(u)]; n < g.first[size_t(u)] + g.count[size_t(u)]; ++n) {
        const uint8_t * pl = &g.levels[size_t(g.neighbours[n]) * 8];
        float           d2 = 0;
        for (int i = 0; i < 8; ++i) {
            const float diff = scale * xx[pl[i]] - x[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            p       = g.neighbours[n];
        }
    }
    for (int i = 0; i < 8; ++i) L[i] = int8_t(g.levels[size_t(p) * 8 + size_t(i)]);
    return p;
}

// The least-squares scale of the points' values against xb, if positive.
void refit(const GridSearch & g, const int * points, int npoints, const float * const * xx, const float * xb,
           const float * weight, float * scale) {
    float sumqx = 0, sumq2 = 0;
    for (int k = 0; k < npoints; ++k) {
        const uint8_t * pl = &g.levels[size_t(points[k]) * 8];
        for (int j = 0; j < 8; ++j) {
            const float w = weight[8 * k + j];
            const float q = xx[k][pl[j]];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
        }
    }
    if (sumqx > 0 && sumq2 > 0) *scale = sumqx / sumq2;
}

int code3(float id, float scale) {
    return std::clamp(nearest_int(0.5f * (id * scale - 1)), 0, 7);
}

// IQ1_S: groups of 32, one shift sign per group.
void quantize_iq1_s_row(const float * x, block_iq1_s * y, int64_t n, const float * qw) {
    const GridSearch & g = grid_search(GGML_TYPE_IQ1_S);
    constexpr int      bs = 32;
    for (int64_t b = 0; b < n / QK_IQ; ++b, x += QK_IQ) {
        block_iq1_s & blk = y[b];
        std::memset(&blk, 0, sizeof blk);
        float       scales[QK_IQ / bs];
        int         shifts[QK_IQ / bs];
        float       max_scale = 0;
        const float sigma2    = weights_spread(x);
        for (int ib = 0; ib < QK_IQ / bs; ++ib) {
            const float * xb = x + bs * ib;
            float         weight[bs];
            group_weights(xb, bs, qw + b * QK_IQ + bs * ib, sigma2, weight);
            scales[ib] = 0;
            shifts[ib] = 1;
            float max  = std::fabs(xb[0]);
            for (int i = 1; i < bs; ++i) max = std::max(max, std::fabs(xb[i]));
            if (max < 1e-12f) continue;
            int idx[bs];
            sorted_order(xb, bs, idx);
            float sumx[bs + 1] = {}, sumw[bs + 1] = {};
            for (int j = 0; j < bs; ++j) {
                sumx[j + 1] = sumx[j] + weight[idx[j]] * xb[idx[j]];
                sumw[j + 1] = sumw[j] + weight[idx[j]];
            }
            float best_score = -FLT_MAX, scale = max;
            int   besti1 = -1, besti2 = -1, best_shift = 0;
            for (int i1 = 0; i1 <= bs; ++i1) {
                for (int i2 = i1; i2 <= bs; ++i2) {
                    for (int shift : {1, -1}) {
                        const float * v     = shift == 1 ? kPlus : kMinus;
                        const float   sumqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] +
                                            (sumx[bs] - sumx[i2]) * v[2];
                        const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                                            (sumw[bs] - sumw[i2]) * v[2] * v[2];
                        if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                            scale      = sumqx / sumq2;
                            best_score = scale * sumqx;
                            besti1     = i1;
                            besti2     = i2;
                            best_shift = shift;
                        }
                    }
                }
            }
            if (besti1 < 0 || besti2 < 0 || best_shift == 0) continue;
            int8_t L[bs];
            for (int j = 0; j < bs; ++j) L[idx[j]] = int8_t(j < besti1 ? 0 : j < besti2 ? 1 : 2);
            if (scale < 0) {
                for (int8_t & l : L) l = int8_t(2 - l);
                scale      = -scale;
                best_shift = -best_shift;
            }
            const float * xx = best_shift == 1 ? kPlus : kMinus;
            const float * xxs[bs / 8];
            int           points[bs / 8];
            bool          all_on_grid = true;
            for (int k = 0; k < bs / 8; ++k) {
                bool on_grid;
                points[k] = iq1_point(g, L + 8 * k, xb + 8 * k, weight + 8 * k, scale, xx, &on_grid);
                xxs[k]    = xx;
                all_on_grid &= on_grid;
            }
            if (!all_on_grid) refit(g, points, bs / 8, xxs, xb, weight, &scale);
            uint16_t h = 0;
            for (int k = 0; k < bs / 8; ++k) {
                blk.qs[(bs / 8) * ib + k] = uint8_t(points[k] & 255);
                h                         = uint16_t(h | ((points[k] >> 8) << (3 * k)));
            }
            blk.qh[ib] = h;
            scales[ib] = scale;
            shifts[ib] = best_shift;
            max_scale  = std::max(max_scale, scale);
        }
        if (max_scale == 0) continue;
        const float d  = max_scale / 15;
        blk.d          = fp32_to_fp16(d * 1.125f);
        const float id = 1 / d;
        for (int ib = 0; ib < QK_IQ / bs; ++ib) {
            const int l = code3(id, scales[ib]) | (shifts[ib] == -1 ? 8 : 0);
            blk.qh[ib]  = uint16_t(blk.qh[ib] | (l << 12));
        }
    }
}

// IQ1_M: groups of 16, a shift sign per 8 values, 3-bit scales per 16 and
// the fp16 super-block scale fitted at the end, spread over the scale words.
void quantize_iq1_m_row(const float * x, block_iq1_m * y, int64_t n, const float * qw) {
    const GridSearch & g = grid_search(GGML_TYPE_IQ1_M);
    constexpr int      bs = 16;
    constexpr uint8_t  masks[4] = {0x00, 0x80, 0x08, 0x88};
    // shift k: bit 1 chooses the first 8 values' levels (kPlus or kMinus), bit 0 the last 8's
    auto levels_of = [](int k, int half) { return (half == 0 ? k < 2 : k % 2 == 0) ? kPlus : kMinus; };
    for (int64_t b = 0; b < n / QK_IQ; ++b, x += QK_IQ) {
        block_iq1_m & blk = y[b];
        std::memset(&blk, 0, sizeof blk);
        float       scales[QK_IQ / bs];
        int         shifts[QK_IQ / bs];
        float       max_scale = 0;
        const float sigma2    = weights_spread(x);
        for (int ib = 0; ib < QK_IQ / bs; ++ib) {
            const float * xb = x + bs * ib;
            float         weight[bs];
            group_weights(xb, bs, qw ? qw + b * QK_IQ + bs * ib : nullptr, sigma2, weight);
            scales[ib] = 0;
            shifts[ib] = 0;
            float max  = std::fabs(xb[0]);
            for (int i = 1; i < bs; ++i) max = std::max(max, std::fabs(xb[i]));
            if (max < 1e-7f) continue;
            int idx[bs];
            sorted_order(xb, bs, idx);
            // prefix sums per half, each half having its own shift
            float px[2][bs + 1] = {}, pw[2][bs + 1] = {};
            for (int j = 0; j < bs; ++j) {
                const int i     = idx[j];
                const int h     = i < bs / 2 ? 0 : 1;
                px[h][j + 1]     = px[h][j] + weight[i] * xb[i];
                px[1 - h][j + 1] = px[1 - h][j];
                pw[h][j + 1]     = pw[h][j] + weight[i];
                pw[1 - h][j + 1] = pw[1 - h][j];
            }
            const float txs[2] = {px[0][bs], px[1][bs]};
            const float tws[2] = {pw[0][bs], pw[1][bs]};
            const float p2 = kPlus[2], m2 = kMinus[2];
            const float cp1 = kPlus[0] * kPlus[0] - kPlus[1] * kPlus[1];
            const float cp2 = kPlus[1] * kPlus[1] - kPlus[2] * kPlus[2];
            const float cm1 = kMinus[0] * kMinus[0] - kMinus[1] * kMinus[1];
            const float cm2 = kMinus[1] * kMinus[1] - kMinus[2] * kMinus[2];
            float       best_score = -FLT_MAX, scale = max;
            int         besti1 = -1, besti2 = -1, best_k = -1;
            for (int i1 = 0; i1 <= bs; ++i1) {
                for (int i2 = i1; i2 <= bs; ++i2) {
                    float qx_p[2], qx_m[2], q2_p[2], q2_m[2];
                    for (int h = 0; h < 2; ++h) {
                        const float sx = px[h][i1] + px[h][i2];
                        qx_p[h]        = txs[h] * p2 - sx;
                        qx_m[h]        = txs[h] * m2 - sx;
                        q2_p[h]        = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                        q2_m[h]        = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
                    }
                    const float sumqx[4] = {qx_p[0] + qx_p[1], qx_p[0] + qx_m[1], qx_m[0] + qx_p[1], qx_m[0] + qx_m[1]};
                    const float sumq2[4] = {q2_p[0] + q2_p[1], q2_p[0] + q2_m[1], q2_m[0] + q2_p[1], q2_m[0] + q2_m[1]};
                    for (int k = 0; k < 4; ++k) {
                        if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
                            scale      = sumqx[k] / sumq2[k];
                            best_score = scale * sumqx[k];
                            besti1     = i1;
                            besti2     = i2;
                            best_k     = k;
                        }
                    }
                }
            }
            if (besti1 < 0 || besti2 < 0 || best_k < 0) continue;
            int8_t L[bs];
            for (int j = 0; j < bs; ++j) L[idx[j]] = int8_t(j < besti1 ? 0 : j < besti2 ? 1 : 2);
            if (scale < 0) {
                for (int8_t & l : L) l = int8_t(2 - l);
                scale  = -scale;
                best_k = 3 - best_k;
            }
            const float * xxs[2] = {levels_of(best_k, 0), levels_of(best_k, 1)};
            int           points[2];
            bool          all_on_grid = true;
            for (int k = 0; k < 2; ++k) {
                bool on_grid;
                points[k] = iq1_point(g, L + 8 * k, xb + 8 * k, weight + 8 * k, scale, xxs[k], &on_grid);
                all_on_grid &= on_grid;
            }
            if (!all_on_grid) refit(g, points, 2, xxs, xb, weight, &scale);
            blk.qs[2 * ib]     = uint8_t(points[0] & 255);
            blk.qs[2 * ib + 1] = uint8_t(points[1] & 255);
            blk.qh[ib]         = uint8_t((points[0] >> 8) | ((points[1] >> 8) << 4));
            scales[ib]         = scale;
            shifts[ib]         = best_k;
            max_scale          = std::max(max_scale, scale);
        }
        if (max_scale == 0) continue;
        uint16_t sc[4] = {};
        float    d     = max_scale / 15;
        const float id = 1 / d;
        float    sumqx = 0, sumq2 = 0;
        for (int ib = 0; ib < QK_IQ / bs; ++ib) {
            const int l = code3(id, scales[ib]);
            sc[ib / 4]  = uint16_t(sc[ib / 4] | (l << (3 * (ib % 4))));
            blk.qh[ib]  = uint8_t(blk.qh[ib] | masks[shifts[ib]]);
            const float * xb = x + bs * ib;
            float         weight[bs];
            group_weights(xb, bs, qw ? qw + b * QK_IQ + bs * ib : nullptr, sigma2, weight);
            for (int k = 0; k < 2; ++k) {
                const float * xx    = levels_of(shifts[ib], k);
                const int     point = blk.qs[2 * ib + k] | ((blk.qh[ib] << (8 - 4 * k)) & 0x700);
                const uint8_t * pl  = &g.levels[size_t(point) * 8];
                for (int j = 0; j < 8; ++j) {
                    const float w = weight[8 * k + j];
                    const float q = xx[pl[j]] * float(2 * l + 1);
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            }
        }
        if (sumq2 > 0) d = sumqx / sumq2;
        const uint16_t s = fp32_to_fp16(d * 1.1125f);
        sc[0] = uint16_t(sc[0] | ((s & 0x000f) << 12));
        sc[1] = uint16_t(sc[1] | ((s & 0x00f0) << 8));
        sc[2] = uint16_t(sc[2] | ((s & 0x0f00) << 4));
        sc[3] = uint16_t(sc[3] | (s & 0xf000));
        std::memcpy(blk.scales, sc, sizeof sc);
    }
}

} // namespace

namespace iq {

bool quantize_chunk_iq1(ggml_type type, const float * src, void * dst, int64_t nrows, int64_t n_per_row,
                        const float * imatrix) {
    const int64_t nb = n_per_row / QK_IQ;
    if (type != GGML_TYPE_IQ1_S && type != GGML_TYPE_IQ1_M) return false;
    if (type == GGML_TYPE_IQ1_S && !imatrix) return false;
    for (int64_t r = 0; r < nrows; ++r) {
        const float * x = src + r * n_per_row;
        if (type == GGML_TYPE_IQ1_S) {
            quantize_iq1_s_row(x, static_cast<block_iq1_s *>(dst) + r * nb, n_per_row, imatrix);
        } else {
            quantize_iq1_m_row(x, static_cast<block_iq1_m *>(dst) + r * nb, n_per_row, imatrix);
        }
    }
    return true;
}

} // namespace iq

} // namespace loom
