#include "planner.h"

#include <algorithm>
#include <numeric>

namespace loom::alloc {

size_t PoolPlan::total() const {
    return std::accumulate(chunk_sizes.begin(), chunk_sizes.end(), size_t(0));
}

namespace {

// Bytes live at each step.
std::vector<size_t> live_profile(const std::vector<Interval> & items, int32_t n_steps) {
    std::vector<size_t> delta(size_t(n_steps) + 1, 0);
    std::vector<size_t> gone(size_t(n_steps) + 1, 0);
    for (const Interval & it : items) {
        delta[size_t(it.start)] += it.size;
        gone[size_t(it.end) + 1] += it.size;
    }
    std::vector<size_t> live(size_t(n_steps), 0);
    size_t              cur = 0;
    for (int32_t s = 0; s < n_steps; ++s) {
        cur += delta[size_t(s)];
        cur -= gone[size_t(s)];
        live[size_t(s)] = cur;
    }
    return live;
}

// The intervals placed so far, indexed by lifetime: a segment tree over the
// steps where each interval is stored at the O(log T) nodes that exactly
// cover it. Every stored interval intersecting a query range sits at a node
// whose range intersects the query, so a walk that skips empty subtrees
// finds them all in O((k + 1) log T) for k answers (an answer may come more
// than once; the caller filters).
class OverlapIndex {
  public:
    explicit OverlapIndex(int32_t n_steps)
        : n_(std::max<int32_t>(n_steps, 1)), head_(4 * size_t(n_), -1), count_(4 * size_t(n_), 0) {}

    void insert(int32_t item, int32_t lo, int32_t hi) { insert(1, 0, n_ - 1, item, lo, hi); }

    template <typename F> void visit(int32_t lo, int32_t hi, F && f) const { visit(1, 0, n_ - 1, lo, hi, f); }

  private:
    void insert(size_t node, int32_t l, int32_t r, int32_t item, int32_t lo, int32_t hi) {
        count_[node] += 1;
        if (lo <= l && r <= hi) {
            next_.push_back(head_[node]);
            item_.push_back(item);
            head_[node] = int32_t(item_.size() - 1);
            return;
        }
        const int32_t m = l + (r - l) / 2;
        if (lo <= m) {
            insert(2 * node, l, m, item, lo, hi);
        }
        if (hi > m) {
            insert(2 * node + 1, m + 1, r, item, lo, hi);
        }
    }

    template <typename F> void visit(size_t node, int32_t l, int32_t r, int32_t lo, int32_t hi, F & f) const {
        if (count_[node] == 0 || r < lo || l > hi) {
            return;
        }
        for (int32_t e = head_[node]; e >= 0; e = next_[size_t(e)]) {
            f(item_[size_t(e)]);
        }
        if (l == r) {
            return;
        }
        const int32_t m = l + (r - l) / 2;
        visit(2 * node, l, m, lo, hi, f);
        visit(2 * node + 1, m + 1, r, lo, hi, f);
    }

    int32_t              n_;
    std::vector<int32_t> head_;  // first entry stored at a node
    std::vector<int32_t> count_; // entries stored in a node's subtree
    std::vector<int32_t> next_;  // entry -> next entry at the same node
    std::vector<int32_t> item_;  // entry -> interval
};

// Offline greedy: take the intervals in the given order and put each at the
// start of the smallest gap that fits it among the already placed intervals
// whose lifetimes intersect its own, or above all of them when no gap fits.
// Placing large and long-lived blocks first leaves the small ones to fill
// the holes, which is what keeps the result near the lower bound.
PoolPlan greedy_offline(const std::vector<Interval> & items, const std::vector<int32_t> & order, int32_t n_steps,
                        size_t max_chunk, const char * name) {
    struct Occupied {
        int32_t chunk;
        size_t  begin;
        size_t  end;
    };
    PoolPlan plan;
    plan.strategy = name;
    plan.at.resize(items.size());
    OverlapIndex          index(n_steps);
    std::vector<int32_t>  seen(items.size(), -1);
    std::vector<Occupied> occupied;

    for (const int32_t k : order) {
        const Interval & it = items[size_t(k)];
        if (it.size == 0) {
            // Nothing to overlap with; it only needs an address in a buffer.
            plan.at[size_t(k)] = Placement{0, 0};
            if (plan.chunk_sizes.empty()) {
                plan.chunk_sizes.push_back(0);
            }
            continue;
        }
        occupied.clear();
        index.visit(it.start, it.end, [&](int32_t o) {
            if (seen[size_t(o)] != k) {
                seen[size_t(o)]     = k;
                const Placement & p = plan.at[size_t(o)];
                occupied.push_back(Occupied{p.chunk, p.offset, p.offset + items[size_t(o)].size});
            }
        });
        std::sort(occupied.begin(), occupied.end(), [](const Occupied & a, const Occupied & b) {
            return a.chunk != b.chunk ? a.chunk < b.chunk : a.begin < b.begin;
        });

        Placement where{-1, 0};
        size_t    pos = 0;
        for (int32_t c = 0; c < int32_t(plan.chunk_sizes.size()) && where.chunk < 0; ++c) {
            size_t cursor   = 0;
            size_t best     = SIZE_MAX;
            size_t best_gap = SIZE_MAX;
            for (; pos < occupied.size() && occupied[pos].chunk == c; ++pos) {
                if (occupied[pos].begin > cursor) {
                    const size_t gap = occupied[pos].begin - cursor;
                    if (gap >= it.size && gap < best_gap) {
                        best_gap = gap;
                        best     = cursor;
                    }
                }
                cursor = std::max(cursor, occupied[pos].end);
            }
            if (best != SIZE_MAX) {
                where = Placement{c, best};
            } else if (cursor <= max_chunk && it.size <= max_chunk - cursor) {
                where = Placement{c, cursor};
            }
        }
        if (where.chunk < 0) {
            where = Placement{int32_t(plan.chunk_sizes.size()), 0};
            plan.chunk_sizes.push_back(0);
        }
        plan.at[size_t(k)]                 = where;
        size_t & chunk_size                = plan.chunk_sizes[size_t(where.chunk)];
        chunk_size                         = std::max(chunk_size, where.offset + it.size);
        index.insert(k, it.start, it.end);
    }
    return plan;
}

// Online best fit in execution order, the way ggml's allocator works: at
// each step take the blocks that start there from the smallest free hole
// that fits (or the top of the buffer), then return the blocks that end
// there. Kept as a candidate because on some graphs the order of execution
// is itself a good packing order; one chunk only.
PoolPlan online_best_fit(const std::vector<Interval> & items, int32_t n_steps) {
    struct Hole {
        size_t offset;
        size_t size;
    };
    PoolPlan plan;
    plan.strategy = "online-best-fit";
    plan.at.resize(items.size());
    if (items.empty()) {
        return plan;
    }

    // Counting sort of the intervals by start and by end, stable in index.
    auto bucket = [&](auto key) {
        std::vector<int32_t> first(size_t(n_steps) + 1, 0);
        for (const Interval & it : items) {
            first[size_t(key(it)) + 1] += 1;
        }
        std::partial_sum(first.begin(), first.end(), first.begin());
        std::vector<int32_t> sorted(items.size());
        std::vector<int32_t> fill(first.begin(), first.end() - 1);
        for (size_t k = 0; k < items.size(); ++k) {
            sorted[size_t(fill[size_t(key(items[k]))]++)] = int32_t(k);
        }
        return std::make_pair(std::move(first), std::move(sorted));
    };
    const auto [start_first, by_start] = bucket([](const Interval & it) { return it.start; });
    const auto [end_first, by_end]     = bucket([](const Interval & it) { return it.end; });

    std::vector<Hole> holes; // sorted by offset, never adjacent to each other or to the top
    size_t            top  = 0;
    size_t            high = 0;

    for (int32_t s = 0; s < n_steps; ++s) {
        for (int32_t e = start_first[size_t(s)]; e < start_first[size_t(s) + 1]; ++e) {
            const int32_t k    = by_start[size_t(e)];
            const size_t  size = items[size_t(k)].size;
            if (size == 0) {
                plan.at[size_t(k)] = Placement{0, 0};
                continue;
            }
            size_t best = SIZE_MAX;
            for (size_t h = 0; h < holes.size(); ++h) {
                if (holes[h].size >= size && (best == SIZE_MAX || holes[h].size < holes[best].size)) {
                    best = h;
                }
            }
            if (best != SIZE_MAX) {
                plan.at[size_t(k)] = Placement{0, holes[best].offset};
                holes[best].offset += size;
                holes[best].size -= size;
                if (holes[best].size == 0) {
                    holes.erase(holes.begin() + std::ptrdiff_t(best));
                }
            } else {
                plan.at[size_t(k)] = Placement{0, top};
                top += size;
                high = std::max(high, top);
            }
        }
        for (int32_t e = end_first[size_t(s)]; e < end_first[size_t(s) + 1]; ++e) {
            const int32_t k    = by_end[size_t(e)];
            const size_t  size = items[size_t(k)].size;
            if (size == 0) {
                continue;
            }
            Hole   h{plan.at[size_t(k)].offset, size};
            auto   it = std::lower_bound(holes.begin(), holes.end(), h.offset,
                                         [](const Hole & a, size_t off) { return a.offset < off; });
            if (it != holes.begin() && std::prev(it)->offset + std::prev(it)->size == h.offset) {
                --it;
                it->size += h.size;
            } else {
                it = holes.insert(it, h);
            }
            const auto next = std::next(it);
            if (next != holes.end() && it->offset + it->size == next->offset) {
                it->size += next->size;
                holes.erase(next);
            }
            if (it->offset + it->size == top) {
                top = it->offset;
                holes.erase(it);
            }
        }
    }
    plan.chunk_sizes.push_back(high);
    return plan;
}

// Range maximum over the live profile (sparse table), for the "pressure"
// order: the most bytes live at any step of an interval's lifetime.
class RangeMax {
  public:
    explicit RangeMax(const std::vector<size_t> & v) {
        levels_.push_back(v);
        for (size_t w = 1; 2 * w <= v.size(); w *= 2) {
            const std::vector<size_t> & prev = levels_.back();
            std::vector<size_t>         next(prev.size() - w);
            for (size_t i = 0; i < next.size(); ++i) {
                next[i] = std::max(prev[i], prev[i + w]);
            }
            levels_.push_back(std::move(next));
        }
    }
    size_t max(int32_t lo, int32_t hi) const {
        const size_t len   = size_t(hi - lo) + 1;
        size_t       level = 0;
        while ((size_t(2) << level) <= len) {
            ++level;
        }
        const size_t w = size_t(1) << level;
        return std::max(levels_[level][size_t(lo)], levels_[level][size_t(hi) + 1 - w]);
    }

  private:
    std::vector<std::vector<size_t>> levels_;
};

} // namespace

size_t live_bytes_peak(const std::vector<Interval> & items, int32_t n_steps) {
    const std::vector<size_t> live = live_profile(items, n_steps);
    return live.empty() ? 0 : *std::max_element(live.begin(), live.end());
}

PoolPlan plan_placement(const std::vector<Interval> & items, int32_t n_steps, size_t max_chunk) {
    const std::vector<size_t> live        = live_profile(items, n_steps);
    const size_t              lower_bound = live.empty() ? 0 : *std::max_element(live.begin(), live.end());

    std::vector<int32_t> order(items.size());
    auto                 reset_order = [&] { std::iota(order.begin(), order.end(), 0); };
    auto                 length      = [&](int32_t k) { return items[size_t(k)].end - items[size_t(k)].start; };

    // Largest first; among equals the longest-lived, then the earliest.
    reset_order();
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        const Interval & x = items[size_t(a)];
        const Interval & y = items[size_t(b)];
        if (x.size != y.size) return x.size > y.size;
        if (length(a) != length(b)) return length(a) > length(b);
        return x.start < y.start;
    });
    PoolPlan best = greedy_offline(items, order, n_steps, max_chunk, "greedy-size");

    // The other strategies run only while the best plan is above the lower
    // bound: reaching it proves a plan optimal, which is the common case.
    auto done     = [&] { return best.total() <= lower_bound; };
    auto consider = [&](PoolPlan && p) {
        if (p.total() < best.total()) {
            best = std::move(p);
        }
    };

    if (!done()) {
        // Intervals crossing the busiest steps first (they decide the peak),
        // largest first among those.
        std::vector<size_t> pressure(items.size(), 0);
        const RangeMax      range(live);
        for (size_t k = 0; k < items.size(); ++k) {
            pressure[k] = range.max(items[k].start, items[k].end);
        }
        reset_order();
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
            if (pressure[size_t(a)] != pressure[size_t(b)]) return pressure[size_t(a)] > pressure[size_t(b)];
            if (items[size_t(a)].size != items[size_t(b)].size) return items[size_t(a)].size > items[size_t(b)].size;
            return items[size_t(a)].start < items[size_t(b)].start;
        });
        consider(greedy_offline(items, order, n_steps, max_chunk, "greedy-pressure"));
    }
    if (!done()) {
        // Longest-lived first: inputs and outputs at the bottom of the
        // buffer, short-lived intermediates stacked over them.
        reset_order();
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
            if (length(a) != length(b)) return length(a) > length(b);
            return items[size_t(a)].size > items[size_t(b)].size;
        });
        consider(greedy_offline(items, order, n_steps, max_chunk, "greedy-lifetime"));
    }
    if (!done()) {
        PoolPlan online = online_best_fit(items, n_steps);
        if (!online.chunk_sizes.empty() && online.chunk_sizes[0] <= max_chunk) {
            consider(std::move(online));
        }
    }
    best.lower_bound = lower_bound;
    return best;
}

bool placement_is_valid(const std::vector<Interval> & items, const PoolPlan & plan) {
    if (plan.at.size() != items.size()) {
        return false;
    }
    std::vector<int32_t> order;
    for (size_t k = 0; k < items.size(); ++k) {
        const Placement & p = plan.at[k];
        if (items[k].size == 0) {
            continue;
        }
        if (p.chunk < 0 || size_t(p.chunk) >= plan.chunk_sizes.size() ||
            p.offset + items[k].size > plan.chunk_sizes[size_t(p.chunk)]) {
            return false;
        }
        order.push_back(int32_t(k));
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return items[size_t(a)].start < items[size_t(b)].start; });
    // Sweep over time with the set of live intervals.
    std::vector<int32_t> live;
    for (const int32_t k : order) {
        const Interval &  it = items[size_t(k)];
        const Placement & p  = plan.at[size_t(k)];
        std::erase_if(live, [&](int32_t o) { return items[size_t(o)].end < it.start; });
        for (const int32_t o : live) {
            const Placement & q = plan.at[size_t(o)];
            if (q.chunk == p.chunk && q.offset < p.offset + it.size && p.offset < q.offset + items[size_t(o)].size) {
                return false;
            }
        }
        live.push_back(k);
    }
    return true;
}

} // namespace loom::alloc
