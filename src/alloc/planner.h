#pragma once

// Placement of blocks in a buffer, with every lifetime known in advance.
//
// Each block is a rectangle: its lifetime [start, end] (in steps) by its
// size (in bytes). Placing them is a strip-packing problem: give each an
// offset so that blocks whose lifetimes intersect do not share bytes, and
// keep the highest end offset small. No placement can beat the peak of the
// live bytes over time (the lower bound below); ggml's allocator, which
// decides online with a first-fit free list, typically lands a few to a few
// tens of percent above it.
//
// plan_placement tries several offline greedy orders plus an online
// best-fit pass and keeps the smallest result; see planner.cpp for why.
// The cost is O(P log T) per strategy, where P counts pairs of blocks with
// intersecting lifetimes (a small multiple of the number of blocks in
// neural-network graphs) and T the number of steps.
//
// max_chunk bounds the bytes of one buffer (a buffer type's max size): when
// a plan needs more, blocks are spread over several chunks, each a buffer of
// its own. A block larger than max_chunk gets a chunk of its size (the
// buffer type then decides whether it can have it).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ggml.h"

// GGML_API on the functions below only keeps them visible to loom's own
// tests; they are not part of the public API.

namespace loom::alloc {

struct Interval {
    size_t  size  = 0; // already rounded to the alignment
    int32_t start = 0;
    int32_t end   = 0; // inclusive
};

struct Placement {
    int32_t chunk  = 0;
    size_t  offset = 0;
};

struct PoolPlan {
    std::vector<Placement> at;          // per interval
    std::vector<size_t>    chunk_sizes; // bytes each chunk needs
    size_t                 lower_bound = 0;
    const char *           strategy    = "none";

    size_t total() const;
};

// The largest sum of sizes of intervals live at one step.
GGML_API size_t live_bytes_peak(const std::vector<Interval> & items, int32_t n_steps);

GGML_API PoolPlan plan_placement(const std::vector<Interval> & items, int32_t n_steps, size_t max_chunk);

// True when no two intervals that are live at a common step overlap in the
// same chunk, and every interval lies inside its chunk's size.
GGML_API bool placement_is_valid(const std::vector<Interval> & items, const PoolPlan & plan);

} // namespace loom::alloc
