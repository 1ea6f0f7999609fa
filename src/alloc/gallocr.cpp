// The graph allocator: plans the memory of a compute graph (liveness.h,
// planner.h), owns one buffer per buffer type, and sets the data of the
// graph's tensors from the plan.

#include <algorithm>
#include <chrono>
#include <new>
#include <vector>

#include "core/common.h"
#include "core/graph.h"
#include "gallocr_inspect.h"
#include "gallocr_internal.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "liveness.h"
#include "planner.h"

using namespace loom;
using namespace loom::alloc;

namespace {

// Where one tensor goes; pool < 0 when the plan gives it no memory.
struct Slot {
    int32_t pool     = -1;
    int32_t chunk    = 0;
    size_t  offset   = 0;
    size_t  size_max = 0; // the bytes of its block: the most it may grow to
};

struct Plan {
    bool                             valid   = false;
    int                              n_nodes = 0;
    int                              n_leafs = 0;
    std::vector<uint64_t>            signature;
    std::vector<Slot>                slots; // per tensor id
    std::vector<InplaceUse>          inplace;
    std::vector<Block>               blocks;
    std::vector<Placement>           block_at;    // per block
    std::vector<std::vector<size_t>> chunk_sizes; // per pool
};

struct Pool {
    PoolDesc                           desc;
    size_t                             max_size = 0;
    std::vector<ggml_backend_buffer_t> chunks; // one buffer per chunk of the plan
    GallocrPlanStats                   stats;
};

bool takes_memory(const ggml_tensor * t) {
    return t->view_src == nullptr && t->data == nullptr && t->buffer == nullptr;
}

} // namespace

struct ggml_gallocr {
    std::vector<ggml_backend_buffer_type_t> bufts;   // per buffer id
    std::vector<int32_t>                    pool_of; // per buffer id
    std::vector<Pool>                       pools;
    std::vector<PoolDesc>                   descs; // per pool, as the liveness walk wants them
    Plan                                    plan;

    // Scratch reused between calls.
    TensorIds             ids;
    Liveness              live;
    std::vector<uint64_t> signature;

    ggml_gallocr() = default;
    ggml_gallocr(const ggml_gallocr &) = delete;
    ggml_gallocr & operator=(const ggml_gallocr &) = delete;
    ~ggml_gallocr() {
        for (Pool & p : pools) {
            for (ggml_backend_buffer_t b : p.chunks) {
                ggml_backend_buffer_free(b);
            }
        }
    }

    void make_plan(const ggml_cgraph & graph, const int * node_ids, const int * leaf_ids, Plan & out,
                   const char * caller);
    bool ensure_buffers(const Plan & p);
    bool plan_fits(const ggml_cgraph & graph);
    bool init_tensor(ggml_tensor * t);
    bool reserve(const ggml_cgraph & graph, const int * node_ids, const int * leaf_ids);
    bool alloc_graph(ggml_cgraph & graph);
    bool alloc_unchanged_graph(ggml_cgraph & graph);
    bool assign_memory(ggml_cgraph & graph);

    // The graph ids was built from (its tensors may have changed since).
    const ggml_cgraph * ids_graph = nullptr;
};

void ggml_gallocr::make_plan(const ggml_cgraph & graph, const int * node_ids, const int * leaf_ids, Plan & out,
                             const char * caller) {
    const auto t0 = std::chrono::steady_clock::now();
    ids.build(graph);
    ids_graph = &graph;
    BufferIds buffer_ids;
    buffer_ids.node_ids  = node_ids;
    buffer_ids.leaf_ids  = leaf_ids;
    buffer_ids.n_buffers = int(bufts.size());
    buffer_ids.pool_of   = &pool_of;
    buffer_ids.caller    = caller;
    analyse_liveness(graph, ids, buffer_ids, descs, live);

    // Each pool is packed on its own: blocks of different buffer types never share memory.
    out.blocks = live.blocks;
    out.block_at.assign(live.blocks.size(), Placement{});
    out.chunk_sizes.assign(pools.size(), {});
    std::vector<Interval> items;
    std::vector<int32_t>  members;
    std::vector<PoolPlan> pool_plans(pools.size());
    for (size_t p = 0; p < pools.size(); ++p) {
        items.clear();
        members.clear();
        for (size_t b = 0; b < live.blocks.size(); ++b) {
            if (live.blocks[b].pool == int32_t(p)) {
                items.push_back(Interval{live.blocks[b].size, live.blocks[b].start, live.blocks[b].end});
                members.push_back(int32_t(b));
            }
        }
        pool_plans[p] = plan_placement(items, live.n_steps, pools[p].max_size);
#ifndef NDEBUG
        LOOM_ASSERT(placement_is_valid(items, pool_plans[p]));
#endif
        for (size_t k = 0; k < members.size(); ++k) {
            out.block_at[size_t(members[k])] = pool_plans[p].at[k];
        }
        out.chunk_sizes[p] = pool_plans[p].chunk_sizes;
        pools[p].stats.n_blocks = members.size();
    }

    out.slots.assign(ids.size(), Slot{});
    for (size_t id = 0; id < ids.size(); ++id) {
        const int32_t b = live.block_of[id];
        if (b >= 0) {
            const Block &     blk = live.blocks[size_t(b)];
            const Placement & at  = out.block_at[size_t(b)];
            out.slots[id]         = Slot{blk.pool, at.chunk, at.offset, blk.size};
        }
    }
    out.inplace = live.inplace;
    out.n_nodes = graph.n_nodes;
    out.n_leafs = graph.n_leafs;
    graph_signature(graph, ids, out.signature);
    out.valid = true;

    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    for (size_t p = 0; p < pools.size(); ++p) {
        GallocrPlanStats & s = pools[p].stats;
        s.planned_bytes      = pool_plans[p].total();
        s.lower_bound        = pool_plans[p].lower_bound;
        s.strategy           = pool_plans[p].strategy;
        s.n_inplace          = live.inplace.size();
        s.plan_us            = us;
        s.n_plans += 1;
    }
}

bool ggml_gallocr::ensure_buffers(const Plan & p) {
    for (size_t i = 0; i < pools.size(); ++i) {
        Pool &                      pool = pools[i];
        const std::vector<size_t> & need = p.chunk_sizes[i];
        for (size_t c = 0; c < need.size(); ++c) {
            const size_t have = c < pool.chunks.size() ? ggml_backend_buffer_get_size(pool.chunks[c]) : 0;
            if (c < pool.chunks.size() && have >= need[c]) {
                continue;
            }
            if (c < pool.chunks.size()) {
                LOOM_LOG_INFO("ggml_gallocr: growing the %s compute buffer%s from %zu to %zu bytes (%.2f MiB)\n",
                              ggml_backend_buft_name(pool.desc.buft), need.size() > 1 ? " chunk" : "", have, need[c],
                              double(need[c]) / 1048576.0);
            }
            ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(pool.desc.buft, need[c]);
            if (buf == nullptr) {
                LOOM_LOG_ERROR("ggml_gallocr: failed to allocate a %s buffer of %zu bytes\n",
                               ggml_backend_buft_name(pool.desc.buft), need[c]);
                return false;
            }
            ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_COMPUTE);
            if (c < pool.chunks.size()) {
                ggml_backend_buffer_free(pool.chunks[c]);
                pool.chunks[c] = buf;
            } else {
                pool.chunks.push_back(buf);
            }
        }
    }
    return true;
}

// Whether the current plan is valid for graph: the same structure (so the
// same lifetimes), every tensor that needs memory has a slot at least as
// large, and every in-place pair still has one layout.
bool ggml_gallocr::plan_fits(const ggml_cgraph & graph) {
    if (!plan.valid || graph.n_nodes != plan.n_nodes || graph.n_leafs != plan.n_leafs) {
        return false;
    }
    ids.build(graph);
    ids_graph = &graph;
    graph_signature(graph, ids, signature);
    if (signature != plan.signature) {
        return false;
    }
    // The tensors assign_memory places: leafs, nodes and their sources. A
    // tensor reached only as a view's source (a scheduler's user tensor that
    // takes its clone's memory after the allocation) is not the plan's.
    auto fits = [&](const ggml_tensor * t) {
        if (!takes_memory(t)) {
            return true;
        }
        const Slot & s = plan.slots[size_t(ids.id(t))];
        if (s.pool < 0) {
            return false;
        }
        const PoolDesc & d = pools[size_t(s.pool)].desc;
        return align_up(ggml_backend_buft_get_alloc_size(d.buft, t), d.alignment) <= s.size_max;
    };
    for (int i = 0; i < graph.n_leafs; ++i) {
        if (!fits(graph.leafs[i])) return false;
    }
    for (int i = 0; i < graph.n_nodes; ++i) {
        const ggml_tensor * node = graph.nodes[i];
        if (!fits(node)) return false;
        for (const ggml_tensor * src : node->src) {
            if (src != nullptr && !fits(src)) return false;
        }
    }
    for (const InplaceUse & u : plan.inplace) {
        const ggml_tensor * t = ids.tensor(u.tensor);
        if (takes_memory(t) && !inplace_still_valid(t, t->src[u.slot])) {
            return false;
        }
    }
    return true;
}

bool ggml_gallocr::init_tensor(ggml_tensor * t) {
    ggml_status st = GGML_STATUS_SUCCESS;
    if (t->view_src != nullptr) {
        // A view of memory the caller manages without a buffer, or of an
        // empty tensor, is left as it is (as ggml does).
        if (t->buffer == nullptr && t->view_src->buffer != nullptr && t->view_src->data != nullptr) {
            st = ggml_backend_view_init(t);
        }
    } else if (takes_memory(t)) {
        // The plan fits (plan_fits, or the caller of alloc_unchanged_graph),
        // so the tensor lies inside its slot, which lies inside the chunk:
        // what ggml_backend_tensor_alloc would check again for every tensor.
        const Slot &          s    = plan.slots[size_t(ids.id(t))];
        ggml_backend_buffer_t buf  = pools[size_t(s.pool)].chunks[size_t(s.chunk)];
        char *                base = static_cast<char *>(ggml_backend_buffer_get_base(buf));
        LOOM_ASSERT(s.offset + s.size_max <= ggml_backend_buffer_get_size(buf));
        t->buffer = buf;
        t->data   = base == nullptr ? nullptr : base + s.offset;
        st        = ggml_backend_buffer_init_tensor(buf, t);
    }
    if (st != GGML_STATUS_SUCCESS) {
        LOOM_LOG_ERROR("ggml_gallocr_alloc_graph: failed to initialise tensor %s: %s\n", describe(t).text,
                       ggml_status_to_string(st));
        return false;
    }
    return true;
}

bool ggml_gallocr::reserve(const ggml_cgraph & graph, const int * node_ids, const int * leaf_ids) {
    Plan fresh;
    make_plan(graph, node_ids, leaf_ids, fresh, "ggml_gallocr_reserve_n");
    if (!ensure_buffers(fresh)) {
        plan.valid = false;
        return false;
    }
    plan = std::move(fresh);
    return true;
}

bool ggml_gallocr::alloc_graph(ggml_cgraph & graph) {
    if (!plan_fits(graph)) {
        // Debug builds say why (as ggml's do); these are normal events, not errors.
        if (bufts.size() != 1) {
#ifndef NDEBUG
            LOOM_LOG_DEBUG("ggml_gallocr_alloc_graph: the graph differs from the reserved one and the allocator has "
                           "%zu buffer ids; call ggml_gallocr_reserve_n first\n",
                           bufts.size());
#endif
            return false;
        }
#ifndef NDEBUG
        if (plan.valid) {
            LOOM_LOG_DEBUG("ggml_gallocr_alloc_graph: the graph differs from the reserved one; planning it anew\n");
        }
#endif
        if (!reserve(graph, nullptr, nullptr)) {
            return false;
        }
    }
    return assign_memory(graph);
}

// The caller guarantees that graph is the graph of the last successful
// alloc_graph or reserve, with the same tensors, shapes and flags; only the
// addresses of tensors the plan does not place may have changed.
bool ggml_gallocr::alloc_unchanged_graph(ggml_cgraph & graph) {
    if (!plan.valid || ids_graph != &graph || graph.n_nodes != plan.n_nodes || graph.n_leafs != plan.n_leafs) {
        return alloc_graph(graph);
    }
    return assign_memory(graph);
}

bool ggml_gallocr::assign_memory(ggml_cgraph & graph) {
    for (Pool & p : pools) {
        for (ggml_backend_buffer_t b : p.chunks) {
            ggml_backend_buffer_reset(b);
        }
    }
    // Sources before the nodes that read them, so that views find their
    // source placed.
    for (int i = 0; i < graph.n_leafs; ++i) {
        if (!init_tensor(graph.leafs[i])) {
            return false;
        }
    }
    for (int i = 0; i < graph.n_nodes; ++i) {
        ggml_tensor * node = graph.nodes[i];
        for (ggml_tensor * s : node->src) {
            if (s != nullptr && !init_tensor(s)) {
                return false;
            }
        }
        if (!init_tensor(node)) {
            return false;
        }
    }
    return true;
}

extern "C" {

ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int n_bufs) {
    LOOM_REQUIRE(bufts != nullptr && n_bufs > 0, "need at least one buffer type (bufts = %p, n_bufs = %d)",
                 static_cast<void *>(bufts), n_bufs);
    for (int i = 0; i < n_bufs; ++i) {
        LOOM_REQUIRE(bufts[i] != nullptr, "buffer type %d is NULL", i);
        const size_t align = ggml_backend_buft_get_alignment(bufts[i]);
        LOOM_REQUIRE(align > 0 && (align & (align - 1)) == 0, "buffer type %s has alignment %zu, not a power of two",
                     ggml_backend_buft_name(bufts[i]), align);
    }
    try {
        auto * g = new ggml_gallocr();
        for (int i = 0; i < n_bufs; ++i) {
            g->bufts.push_back(bufts[i]);
            int32_t pool = -1;
            for (size_t p = 0; p < g->pools.size(); ++p) {
                if (g->pools[p].desc.buft == bufts[i]) {
                    pool = int32_t(p);
                }
            }
            if (pool < 0) {
                Pool p;
                p.desc.buft      = bufts[i];
                p.desc.alignment = ggml_backend_buft_get_alignment(bufts[i]);
                // Half the address space at most, so offsets plus sizes never wrap.
                p.max_size = std::min(ggml_backend_buft_get_max_size(bufts[i]), SIZE_MAX / 2);
                g->descs.push_back(p.desc);
                g->pools.push_back(std::move(p));
                pool = int32_t(g->pools.size() - 1);
            }
            g->pool_of.push_back(pool);
        }
        return g;
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("ggml_gallocr_new_n: out of memory\n");
        return nullptr;
    }
}

ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft) {
    return ggml_gallocr_new_n(&buft, 1);
}

void ggml_gallocr_free(ggml_gallocr_t galloc) {
    delete galloc;
}

bool ggml_gallocr_reserve_n(ggml_gallocr_t galloc, ggml_cgraph * graph, const int * node_buffer_ids,
                            const int * leaf_buffer_ids) {
    LOOM_REQUIRE(galloc != nullptr && graph != nullptr, "NULL allocator or graph");
    try {
        return galloc->reserve(*graph, node_buffer_ids, leaf_buffer_ids);
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("ggml_gallocr_reserve_n: out of memory while planning a graph of %d nodes\n", graph->n_nodes);
        galloc->plan.valid = false;
        return false;
    }
}

bool ggml_gallocr_reserve(ggml_gallocr_t galloc, ggml_cgraph * graph) {
    return ggml_gallocr_reserve_n(galloc, graph, nullptr, nullptr);
}

void ggml_gallocr_reserve_n_size(ggml_gallocr_t galloc, ggml_cgraph * graph, const int * node_buffer_ids,
                                 const int * leaf_buffer_ids, size_t * sizes) {
    LOOM_REQUIRE(galloc != nullptr && graph != nullptr && sizes != nullptr, "NULL allocator, graph or sizes");
    Plan p;
    try {
        galloc->make_plan(*graph, node_buffer_ids, leaf_buffer_ids, p, __func__);
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("ggml_gallocr_reserve_n_size: out of memory while planning a graph of %d nodes\n",
                       graph->n_nodes);
        std::fill(sizes, sizes + galloc->bufts.size(), size_t(0));
        return;
    }
    for (size_t i = 0; i < galloc->bufts.size(); ++i) {
        const int32_t pool  = galloc->pool_of[i];
        const bool    first = std::find(galloc->pool_of.begin(), galloc->pool_of.end(), pool) ==
                           galloc->pool_of.begin() + std::ptrdiff_t(i);
        sizes[i] = 0;
        if (first) {
            for (size_t c : p.chunk_sizes[size_t(pool)]) {
                sizes[i] += c;
            }
        }
    }
}

bool ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, ggml_cgraph * graph) {
    LOOM_REQUIRE(galloc != nullptr && graph != nullptr, "NULL allocator or graph");
    try {
        return galloc->alloc_graph(*graph);
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("ggml_gallocr_alloc_graph: out of memory while planning a graph of %d nodes\n", graph->n_nodes);
        galloc->plan.valid = false;
        return false;
    }
}

size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc, int buffer_id) {
    LOOM_REQUIRE(galloc != nullptr, "NULL allocator");
    LOOM_REQUIRE(buffer_id >= 0 && size_t(buffer_id) < galloc->bufts.size(), "buffer id %d out of [0, %zu)", buffer_id,
                 galloc->bufts.size());
    const int32_t pool = galloc->pool_of[size_t(buffer_id)];
    for (int i = 0; i < buffer_id; ++i) {
        if (galloc->pool_of[size_t(i)] == pool) {
            return 0; // counted at the first id with this buffer type
        }
    }
    size_t total = 0;
    for (ggml_backend_buffer_t b : galloc->pools[size_t(pool)].chunks) {
        total += ggml_backend_buffer_get_size(b);
    }
    return total;
}

} // extern "C"

namespace loom {

std::vector<GallocrRegion> gallocr_regions_released_after(ggml_gallocr_t galloc, int node_index) {
    LOOM_REQUIRE(galloc != nullptr, "NULL allocator");
    std::vector<GallocrRegion> out;
    const Plan & p = galloc->plan;
    if (!p.valid) {
        return out;
    }
    LOOM_REQUIRE(node_index >= 0 && node_index < p.n_nodes, "node %d out of the plan's %d nodes", node_index,
                 p.n_nodes);
    for (size_t b = 0; b < p.blocks.size(); ++b) {
        const Block &     blk = p.blocks[b];
        const Placement & at  = p.block_at[b];
        if (blk.end != node_index + 1 || blk.size == 0) {
            continue;
        }
        const Pool & pool = galloc->pools[size_t(blk.pool)];
        if (size_t(at.chunk) < pool.chunks.size()) {
            out.push_back(GallocrRegion{pool.chunks[size_t(at.chunk)], at.offset, blk.size});
        }
    }
    return out;
}

GallocrPlanStats gallocr_last_plan_stats(ggml_gallocr_t galloc, int buffer_id) {
    LOOM_REQUIRE(galloc != nullptr, "NULL allocator");
    LOOM_REQUIRE(buffer_id >= 0 && size_t(buffer_id) < galloc->bufts.size(), "buffer id %d out of [0, %zu)", buffer_id,
                 galloc->bufts.size());
    return galloc->pools[size_t(galloc->pool_of[size_t(buffer_id)])].stats;
}

bool gallocr_alloc_unchanged_graph(ggml_gallocr_t galloc, ggml_cgraph * graph) {
    LOOM_REQUIRE(galloc != nullptr && graph != nullptr, "NULL allocator or graph");
    try {
        return galloc->alloc_unchanged_graph(*graph);
    } catch (const std::bad_alloc &) {
        LOOM_LOG_ERROR("ggml_gallocr_alloc_graph: out of memory while planning a graph of %d nodes\n", graph->n_nodes);
        galloc->plan.valid = false;
        return false;
    }
}

} // namespace loom
