// The search tables of the grid-based i-quants, derived from the decoders'
// grids (iq_grids.inc): each byte of a grid entry is one level's value.

#include "core/types/iq_search.h"

#include <algorithm>
#include <cfloat>
#include <mutex>

#include "core/common.h"
#include "core/types/iq_tables.h"

namespace loom::iq {

namespace {

// nwant: how many distinct distances a neighbour list spans.
GridSearch build(const uint64_t * grid64, const uint32_t * grid32, int size, int dim, int bits, int key_count,
                 int nwant, const uint8_t * value_levels) {
    GridSearch g;
    g.dim  = dim;
    g.bits = bits;
    g.levels.resize(size_t(size) * size_t(dim));
    for (int p = 0; p < size; ++p) {
        const uint64_t entry = grid64 ? grid64[p] : grid32[p];
        for (int c = 0; c < dim; ++c) {
            const int level = value_levels[grid_byte(entry, c)];
            LOOM_ASSERT(level != 0xff);
            g.levels[size_t(p) * size_t(dim) + size_t(c)] = uint8_t(level);
        }
    }
    g.point_of.assign(size_t(key_count), -1);
    for (int p = 0; p < size; ++p) {
        int8_t L[8];
        for (int c = 0; c < dim; ++c) L[c] = int8_t(g.levels[size_t(p) * size_t(dim) + size_t(c)]);
        const int u = g.key_of(L);
        LOOM_ASSERT(u < key_count);
        g.point_of[size_t(u)] = p;
    }
    g.first.assign(size_t(key_count), 0);
    g.count.assign(size_t(key_count), 0);
    std::vector<int>  d2(size_t(size), 0);
    std::vector<char> seen(size_t(dim) * size_t(4 << (2 * bits)) + 1, 0); // above any squared distance
    const int        mask = (1 << bits) - 1;
    for (int u = 0; u < key_count; ++u) {
        if (g.point_of[size_t(u)] >= 0) continue;
        int dmax = 0;
        for (int p = 0; p < size; ++p) {
            int s = 0;
            for (int c = 0; c < dim; ++c) {
                const int diff = 2 * (g.levels[size_t(p) * size_t(dim) + size_t(c)] - ((u >> (bits * c)) & mask));
                s += diff * diff;
            }
            d2[size_t(p)] = s;
            dmax          = std::max(dmax, s);
        }
        // the nwant smallest distinct distances, then the points at each in index order
        std::fill(seen.begin(), seen.begin() + dmax + 1, char(0));
        for (int p = 0; p < size; ++p) seen[size_t(d2[size_t(p)])] = 1;
        std::vector<int> dists;
        for (int d = 0; d <= dmax && int(dists.size()) < nwant; ++d) {
            if (seen[size_t(d)]) dists.push_back(d);
        }
        g.first[size_t(u)] = uint32_t(g.neighbours.size());
        for (int d : dists) {
            for (int p = 0; p < size; ++p) {
                if (d2[size_t(p)] == d) g.neighbours.push_back(uint16_t(p));
            }
        }
        g.count[size_t(u)] = uint16_t(g.neighbours.size() - g.first[size_t(u)]);
    }
    return g;
}

// Level of each byte value of a grid; 0xff for values the grid does not use.
struct ValueLevels {
    uint8_t level[256];
    ValueLevels(std::initializer_list<int> values) {
        std::fill(std::begin(level), std::end(level), uint8_t(0xff));
        int l = 0;
        for (int v : values) level[uint8_t(v)] = uint8_t(l++);
    }
};

// The 2-bit keys of 8 levels use values up to 0xaaaa (no level above 2 in the
// searched points), 43692 keys as in ggml; the 3-bit keys of 4 levels, 4096.
constexpr int kKeys2 = 43692;
constexpr int kKeys3 = 4096;

} // namespace

int GridSearch::best_neighbour(int u, const float * x, const float * w, float scale, int8_t * L) const {
    float best_d2 = FLT_MAX;
    int   best    = -1;
    for (uint32_t n = first[size_t(u)]; n < first[size_t(u)] + count[size_t(u)]; ++n) {
        const uint8_t * pl = &levels[size_t(neighbours[n]) * size_t(dim)];
        float           d2 = 0;
        for (int i = 0; i < dim; ++i) {
            const float diff = scale * float(2 * pl[i] + 1) - x[i];
            d2 += w[i] * diff * diff;
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            best    = neighbours[n];
        }
    }
    if (best < 0) best = neighbours[first[size_t(u)]]; // every distance was NaN
    const uint8_t * pl = &levels[size_t(best) * size_t(dim)];
    for (int i = 0; i < dim; ++i) L[i] = int8_t(pl[i]);
    return best;
}

const GridSearch & grid_search(ggml_type type) {
    static const ValueLevels v2({0x08, 0x19, 0x2b, 0x3e});
    static const ValueLevels v1({0xff, 0x00, 0x01}); // int8 -1, 0, 1
    static const ValueLevels v3xxs({0x04, 0x0c, 0x14, 0x1c, 0x24, 0x2c, 0x34, 0x3e});
    static const ValueLevels v3s({1, 3, 5, 7, 9, 11, 13, 15});
    switch (type) {
        case GGML_TYPE_IQ2_XXS: {
            static const GridSearch g = build(iq2xxs_grid, nullptr, 256, 8, 2, kKeys2, 2, v2.level);
            return g;
        }
        case GGML_TYPE_IQ2_XS: {
            static const GridSearch g = build(iq2xs_grid, nullptr, 512, 8, 2, kKeys2, 2, v2.level);
            return g;
        }
        case GGML_TYPE_IQ2_S: {
            static const GridSearch g = build(iq2s_grid, nullptr, 1024, 8, 2, kKeys2, 1, v2.level);
            return g;
        }
        case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ1_M: {
            static const GridSearch g = build(iq1s_grid, nullptr, 2048, 8, 2, kKeys2, 3, v1.level);
            return g;
        }
        case GGML_TYPE_IQ3_XXS: {
            static const GridSearch g = build(nullptr, iq3xxs_grid, 256, 4, 3, kKeys3, 2, v3xxs.level);
            return g;
        }
        case GGML_TYPE_IQ3_S: {
            static const GridSearch g = build(nullptr, iq3s_grid, 512, 4, 3, kKeys3, 3, v3s.level);
            return g;
        }
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K:
        case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64:
        case GGML_TYPE_F64: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            LOOM_ASSERT(false && "no grid search for this type");
    }
    __builtin_unreachable();
}

float search_group(const GridSearch & g, const GroupSearch & p, const float * xval, const float * weight,
                   const float * waux, float max, float scale0, int8_t * L) {
    const int dim    = g.dim;
    const int points = p.n / dim;
    int8_t    Laux[32];
    bool      on_grid[8], on_grid_aux[8];
    std::fill(L, L + p.n, int8_t(0));
    float best  = 0;
    float scale = scale0;
    std::fill(on_grid, on_grid + points, p.research != GroupSearch::OffGridAll);
    for (int is = -p.ntry; is <= p.ntry; ++is) {
        const float id         = (float(2 * p.kmaxq - 1) + float(is) * p.step) / max;
        const float this_scale = 1 / id;
        for (int k = 0; k < points; ++k) {
            for (int i = 0; i < dim; ++i) {
                const int l         = nearest_int(0.5f * (id * xval[dim * k + i] - 1));
                Laux[dim * k + i] = int8_t(std::clamp(l, 0, p.kmaxq - 1));
            }
            const int u    = g.key_of(Laux + dim * k);
            on_grid_aux[k] = g.point_of[size_t(u)] >= 0;
            if (!on_grid_aux[k]) {
                g.best_neighbour(u, xval + dim * k, waux + dim * k, this_scale, Laux + dim * k);
            }
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < p.n; ++i) {
            const float q = float(2 * Laux[i] + 1);
            sumqx += weight[i] * xval[i] * q;
            sumq2 += weight[i] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best  = scale * sumqx;
            std::copy(Laux, Laux + p.n, L);
            std::copy(on_grid_aux, on_grid_aux + points, on_grid);
        }
    }
    const bool any_off = std::find(on_grid, on_grid + points, false) != on_grid + points;
    if ((any_off || p.research == GroupSearch::Always) && scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < points; ++k) {
            if (on_grid[k] && p.research == GroupSearch::OffGrid) continue;
            for (int i = 0; i < dim; ++i) {
                const int l     = nearest_int(0.5f * (id * xval[dim * k + i] - 1));
                L[dim * k + i] = int8_t(std::clamp(l, 0, p.kmaxq - 1));
            }
            const int u = g.key_of(L + dim * k);
            if (g.point_of[size_t(u)] < 0) {
                g.best_neighbour(u, xval + dim * k, waux + dim * k, scale, L + dim * k);
            }
        }
        float sumqx = 0, sumq2 = 0;
        for (int i = 0; i < p.n; ++i) {
            const float q = float(2 * L[i] + 1);
            sumqx += weight[i] * xval[i] * q;
            sumq2 += weight[i] * q * q;
        }
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    return scale;
}

} // namespace loom::iq
