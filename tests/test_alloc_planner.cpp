// The placement of the graph allocator on its own: blocks with lifetimes
// placed in buffers. Plans are judged by a checker written here, not by the
// planner's own functions: every pair of blocks live at a common step is
// compared byte range against byte range, and the plan's size against the
// most bytes alive at one step, counted step by step.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../src/alloc/planner.h"

using loom::alloc::Interval;
using loom::alloc::Placement;
using loom::alloc::PoolPlan;

namespace {

// Every block inside its chunk, and no two blocks whose lifetimes
// [start, end] (both inclusive) share a step share a byte of one chunk:
// all pairs, by brute force.
::testing::AssertionResult no_overlaps(const std::vector<Interval> & items, const PoolPlan & plan) {
    if (plan.at.size() != items.size()) {
        return ::testing::AssertionFailure() << plan.at.size() << " placements for " << items.size() << " blocks";
    }
    for (size_t i = 0; i < items.size(); ++i) {
        const Placement & p = plan.at[i];
        if (items[i].size == 0) {
            continue;
        }
        if (p.chunk < 0 || size_t(p.chunk) >= plan.chunk_sizes.size()) {
            return ::testing::AssertionFailure() << "block " << i << " in chunk " << p.chunk << " of "
                                                 << plan.chunk_sizes.size();
        }
        const size_t cap = plan.chunk_sizes[size_t(p.chunk)];
        if (p.offset > cap || items[i].size > cap - p.offset) {
            return ::testing::AssertionFailure() << "block " << i << " [" << p.offset << ", "
                                                 << p.offset + items[i].size << ") outside its chunk of " << cap;
        }
    }
    for (size_t i = 0; i < items.size(); ++i) {
        for (size_t j = i + 1; j < items.size(); ++j) {
            const Interval & a = items[i];
            const Interval & b = items[j];
            if (a.size == 0 || b.size == 0 || plan.at[i].chunk != plan.at[j].chunk) {
                continue;
            }
            const bool same_time  = a.start <= b.end && b.start <= a.end;
            const bool same_bytes = plan.at[i].offset < plan.at[j].offset + b.size &&
                                    plan.at[j].offset < plan.at[i].offset + a.size;
            if (same_time && same_bytes) {
                return ::testing::AssertionFailure()
                       << "blocks " << i << " (steps " << a.start << ".." << a.end << ", bytes [" << plan.at[i].offset
                       << ", " << plan.at[i].offset + a.size << ")) and " << j << " (steps " << b.start << ".."
                       << b.end << ", bytes [" << plan.at[j].offset << ", " << plan.at[j].offset + b.size
                       << ")) overlap in chunk " << plan.at[i].chunk;
            }
        }
    }
    return ::testing::AssertionSuccess();
}

// The most bytes alive at one step: at each step, the sum of the sizes of
// the blocks live then. No placement needs fewer bytes.
size_t peak_live_bytes(const std::vector<Interval> & items, int32_t n_steps) {
    size_t peak = 0;
    for (int32_t t = 0; t < n_steps; ++t) {
        size_t live = 0;
        for (const Interval & it : items) {
            if (it.start <= t && t <= it.end) {
                live += it.size;
            }
        }
        peak = std::max(peak, live);
    }
    return peak;
}

size_t total(const PoolPlan & p) {
    size_t s = 0;
    for (size_t c : p.chunk_sizes) {
        s += c;
    }
    return s;
}

} // namespace

// The checker itself finds overlaps in time and bytes, and only those.
TEST(Planner, CheckerFindsOverlaps) {
    const std::vector<Interval> items = {{64, 0, 2}, {64, 2, 3}, {64, 3, 4}};
    PoolPlan                    p;
    p.chunk_sizes = {192};
    p.at          = {{0, 0}, {0, 64}, {0, 0}}; // 0 and 2 share bytes, not steps
    EXPECT_TRUE(no_overlaps(items, p));
    p.at = {{0, 0}, {0, 32}, {0, 128}}; // 0 and 1 share step 2 and bytes [32, 64)
    EXPECT_FALSE(no_overlaps(items, p));
    p.at = {{0, 0}, {0, 64}, {0, 160}}; // 2 reaches past its chunk
    EXPECT_FALSE(no_overlaps(items, p));
    p.chunk_sizes = {128, 64};
    p.at          = {{0, 0}, {1, 0}, {0, 64}}; // 1 alone in its chunk
    EXPECT_TRUE(no_overlaps(items, p));
    EXPECT_EQ(peak_live_bytes(items, 5), 128u);
}

TEST(Planner, RandomIntervalsAreValidAndAboveTheLowerBound) {
    using namespace loom::alloc;
    for (unsigned seed = 1; seed <= 50; ++seed) {
        std::mt19937          rng(seed);
        const int32_t         n_steps = 60;
        std::vector<Interval> items(std::uniform_int_distribution<size_t>(1, 150)(rng));
        for (Interval & it : items) {
            it.size  = 64 * std::uniform_int_distribution<size_t>(0, 40)(rng);
            it.start = std::uniform_int_distribution<int32_t>(0, n_steps - 1)(rng);
            it.end   = std::min<int32_t>(n_steps - 1, it.start + std::uniform_int_distribution<int32_t>(0, 8)(rng));
        }
        const size_t peak = peak_live_bytes(items, n_steps);
        for (size_t max_chunk : {size_t(SIZE_MAX / 2), size_t(4096)}) {
            SCOPED_TRACE("seed " + std::to_string(seed) + " max chunk " + std::to_string(max_chunk));
            const PoolPlan p = plan_placement(items, n_steps, max_chunk);
            EXPECT_TRUE(no_overlaps(items, p));
            EXPECT_GE(total(p), peak);
            EXPECT_EQ(p.total(), total(p));
            EXPECT_EQ(p.lower_bound, peak) << "the bound the planner reports";
            for (size_t c : p.chunk_sizes) {
                EXPECT_LE(c, max_chunk);
            }
        }
    }
}

TEST(Planner, ReachesTheLowerBoundOnChains) {
    using namespace loom::alloc;
    // Each block lives while the next one is computed: two at a time.
    std::vector<Interval> items;
    for (int32_t i = 0; i < 100; ++i) {
        items.push_back(Interval{size_t(64 * (1 + i % 7)), i, i + 1});
    }
    const PoolPlan p = plan_placement(items, 102, SIZE_MAX / 2);
    EXPECT_TRUE(no_overlaps(items, p));
    // The largest neighbours live together: 64 * 6 and 64 * 7 bytes.
    EXPECT_EQ(peak_live_bytes(items, 102), size_t(64 * 13));
    EXPECT_EQ(total(p), size_t(64 * 13));
}

TEST(Planner, OversizedBlockGetsItsOwnChunk) {
    using namespace loom::alloc;
    std::vector<Interval> items = {{512, 0, 3}, {4096, 1, 2}, {256, 2, 4}};
    const PoolPlan        p     = plan_placement(items, 5, 1024);
    EXPECT_TRUE(no_overlaps(items, p));
    ASSERT_EQ(p.chunk_sizes.size(), 2u);
    EXPECT_EQ(p.chunk_sizes[size_t(p.at[1].chunk)], 4096u);
}
