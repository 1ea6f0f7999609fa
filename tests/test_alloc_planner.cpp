// The placement of the graph allocator on its own: blocks with lifetimes
// placed in buffers, checked for overlaps and against the lower bound (the
// most bytes alive at one step).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "../src/alloc/planner.h"

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
        for (size_t max_chunk : {size_t(SIZE_MAX / 2), size_t(4096)}) {
            const PoolPlan p = plan_placement(items, n_steps, max_chunk);
            EXPECT_TRUE(placement_is_valid(items, p)) << "seed " << seed;
            EXPECT_GE(p.total(), p.lower_bound);
            EXPECT_EQ(p.lower_bound, live_bytes_peak(items, n_steps));
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
    EXPECT_TRUE(placement_is_valid(items, p));
    EXPECT_EQ(p.total(), p.lower_bound);
}

TEST(Planner, OversizedBlockGetsItsOwnChunk) {
    using namespace loom::alloc;
    std::vector<Interval> items = {{512, 0, 3}, {4096, 1, 2}, {256, 2, 4}};
    const PoolPlan        p     = plan_placement(items, 5, 1024);
    EXPECT_TRUE(placement_is_valid(items, p));
    ASSERT_EQ(p.chunk_sizes.size(), 2u);
    EXPECT_EQ(p.chunk_sizes[size_t(p.at[1].chunk)], 4096u);
}
