#pragma once

// The search tables of the grid-based i-quant encoders and the search of one
// group's levels, shared by the IQ2/IQ3 encoders. A grid point is dim levels
// (coordinate value 2 * level + 1 times the group scale); its key packs the
// levels, bits per level. Keys that are not grid points have a list of
// neighbours: the grid points at the nwant smallest squared distances, in
// order of distance, then of index (ggml's order, which decides ties).

#include <cstdint>
#include <vector>

#include "ggml.h"

namespace loom::iq {

struct GridSearch {
    int                   dim  = 0; // levels per point: 8 (IQ2, IQ1) or 4 (IQ3)
    int                   bits = 0; // bits per level in a key
    std::vector<uint8_t>  levels;   // the grid, dim levels per point
    std::vector<int32_t>  point_of; // key -> grid index, -1 when the key is not on the grid
    std::vector<uint32_t> first;    // key -> its first neighbour in neighbours (keys off the grid)
    std::vector<uint16_t> count;    // key -> its number of neighbours
    std::vector<uint16_t> neighbours;

    int key_of(const int8_t * L) const {
        int u = 0;
        for (int i = 0; i < dim; ++i) u |= L[i] << (bits * i);
        return u;
    }
    // The neighbour of key u (off the grid) with the least error sum_i
    // w[i] (scale (2 L_i + 1) - x[i])^2, the first on a tie; writes its levels to L.
    int best_neighbour(int u, const float * x, const float * w, float scale, int8_t * L) const;
};

// The tables, built at first use (thread-safe) and kept for the process:
// by the ggml type whose grid they search (IQ1_S and IQ1_M share one).
const GridSearch & grid_search(ggml_type type);

// The levels of a group of n values (n = dim * points): the best of the
// scales (2 kmaxq - 1 + s * step) / max for s in [-ntry, ntry] by weighted
// error, points off the grid replaced by their best neighbour. Then, at the
// best scale (or scale0 when none fitted), points are searched again and the
// scale refitted: the points the best scale left off the grid (OffGrid), all
// points when one was left off (OffGridAll), or all points (Always). Returns
// the scale; L gets n levels, each point on the grid. xval >= 0, max > 0.
struct GroupSearch {
    enum Research { OffGrid, OffGridAll, Always };
    int      n;
    int      kmaxq;
    int      ntry;
    float    step;
    Research research;
};
float search_group(const GridSearch & g, const GroupSearch & p, const float * xval, const float * weight,
                   const float * waux, float max, float scale0, int8_t * L);

// The grid-searched encoders as ggml_quantize_chunk runs them; false for
// types without one, and for IQ2_XXS, IQ2_XS and IQ1_S without an importance
// matrix (ggml requires one). dst at row 0.
bool quantize_chunk_grid(ggml_type type, const float * src, void * dst, int64_t nrows, int64_t n_per_row,
                         const float * imatrix);

// The same for IQ1_S and IQ1_M (types/iq1_encode.cpp).
bool quantize_chunk_iq1(ggml_type type, const float * src, void * dst, int64_t nrows, int64_t n_per_row,
                        const float * imatrix);

} // namespace loom::iq
