#include "compute.h"
#include "threadpool_api.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <atomic>
#include <memory>
#include <vector>

#include "core/common.h"
#include "core/fits.h"
#include "core/graph.h"
#include "core/indices.h"
#include "kernels/kernels.h"
#include "profile.h"
#include "repack.h"

namespace loom::cpu {

namespace {

// Ops that only reinterpret memory: nothing to compute.
bool is_noop(const ggml_tensor * t) {
    return t->op == GGML_OP_NONE || is_view_op(t->op) || ggml_is_empty(t);
}

// A graph node that computes nothing: a no-op, or a node the graph was built
// without marking (ggml_build_forward_order, ggml_build_forward_select).
bool skipped(const ggml_tensor * t) {
    return is_noop(t) || !(t->flags & GGML_TENSOR_FLAG_COMPUTE);
}

// Note [Index sources] in core/op_table.h: the indices an operator reads
// from data are checked here, for every operator whose row names index
// sources, before its kernel runs; the kernels trust them. Every thread
// reads every index (they are few next to the work they steer), so all
// threads reach the same verdict without a barrier and none writes when
// one index is bad. Thread 0 logs the first bad one; the computation stops
// after this node with GGML_STATUS_FAILED.
bool indices_ok(const ComputeParams & p, const ggml_tensor * node) {
    if (index_srcs(node->op) == 0) {
        return true;
    }
    BadIndex bad;
    if (!find_bad_index(node, [node](int s) -> const void * { return node->src[s]->data; }, &bad)) {
        return true;
    }
    if (p.ith == 0) {
        LOOM_LOG_ERROR("CPU: %s\n", bad_index_text(node, bad).c_str());
    }
    p.fail();
    return false;
}

void compute_node(const ComputeParams & p, ggml_tensor * node) {
    const OpKernel & k = op_kernel(node->op);
    LOOM_ASSERT(k.compute != nullptr && "op without a CPU kernel reached compute");
    if (indices_ok(p, node)) {
        k.compute(p, node);
    }
}

size_t node_work_size(const ggml_tensor * node, int n_threads) {
    const OpKernel & k = op_kernel(node->op);
    return k.work_size != nullptr ? k.work_size(node, n_threads) : 0;
}

bool supports_kernels(const ggml_tensor * op);

bool overlaps(const ggml_tensor * x, const ggml_tensor * y) {
    const auto x0 = reinterpret_cast<uintptr_t>(x->data), x1 = x0 + ggml_nbytes(x);
    const auto y0 = reinterpret_cast<uintptr_t>(y->data), y1 = y0 + ggml_nbytes(y);
    return x0 < y1 && y0 < x1;
}

// The node at i and the matrix products after it that read the same b,
// computed as one (Note [Products sharing a column] in kernels/matmul.cpp);
// nodes that compute nothing may sit between them. With check_memory (the
// graph is allocated), no member may read or write what another writes.
// Returns how many, their indices in members.
int product_group(const ggml_cgraph * graph, int i, bool check_memory, int (&members)[MAX_PRODUCT_GROUP]) {
    members[0]                = i;
    int                 n     = 1;
    const ggml_tensor * first = graph->nodes[i];
    if (!matmul_joins_group(first)) {
        return n;
    }
    for (int j = i + 1; j < graph->n_nodes && n < MAX_PRODUCT_GROUP; ++j) {
        const ggml_tensor * t = graph->nodes[j];
        if (skipped(t)) {
            continue;
        }
        if (t->src[1] != first->src[1] || !matmul_joins_group(t)) {
            break;
        }
        bool apart = true;
        if (check_memory) {
            apart = !overlaps(t, t->src[1]) && !overlaps(t, t->src[0]);
            for (int m = 0; m < n && apart; ++m) {
                const ggml_tensor * o = graph->nodes[members[m]];
                apart = !overlaps(t, o) && !overlaps(t->src[0], o) && !overlaps(o->src[0], t);
            }
        }
        if (!apart) {
            break;
        }
        members[n++] = j;
    }
    return n;
}

size_t group_work_size(const ggml_cgraph * graph, const int (&members)[MAX_PRODUCT_GROUP], int n, int n_threads) {
    ggml_tensor * nodes[MAX_PRODUCT_GROUP];
    for (int m = 0; m < n; ++m) nodes[m] = graph->nodes[members[m]];
    return work_size_products(nodes, n, n_threads);
}

// Nodes computed between two barriers: one node, or a group of products.
struct Phase {
    int n;
    int members[MAX_PRODUCT_GROUP];
};

} // namespace

namespace {

// A weight in the repacked layout, or one its CPU_REPACK buffer will repack
// when it initializes the tensor: ggml's clients (llama.cpp, whisper.cpp)
// choose a weight's buffer type by asking supports_op with the buffer set
// and the tensor not yet initialized.
bool repacked_or_pending(const ggml_tensor * t) {
    if (repacked_base(t) != nullptr) {
        return true;
    }
    const ggml_tensor * base = t != nullptr && t->view_src != nullptr ? t->view_src : t;
    return base != nullptr && base->extra == nullptr && is_repack_buffer(base->buffer) && repackable(base);
}

} // namespace

bool supports_op(const ggml_tensor * op) {
    // Repacked weights (Note [Repacked weights]) serve as the weights of a
    // matrix product and nothing else; no op writes them (views and leaves
    // compute nothing).
    if (repacked_or_pending(op)) {
        return is_noop(op);
    }
    for (int j = 0; j < GGML_MAX_SRC; ++j) {
        const ggml_tensor * src = op->src[j];
        if (repacked_or_pending(src) && !(op->op == GGML_OP_MUL_MAT && j == 0 && src->view_src == nullptr)) {
            return false;
        }
    }
    return supports_kernels(op);
}

namespace {

bool supports_kernels(const ggml_tensor * op) {
    if (op->op == GGML_OP_NONE || is_view_op(op->op)) {
        return true;
    }
    // The operator's rule says which shapes, types and op params it has
    // (Note [Shape rules] in core/fits.h); the kernel's row which of them
    // the CPU takes.
    const OpKernel & k = op_kernel(op->op);
    return k.compute != nullptr && node_fits(op, nullptr) && k.supports(op);
}

} // namespace

size_t graph_work_size(const ggml_cgraph * graph, int n_threads) {
    size_t max_size = 0;
    for (int i = 0; i < graph->n_nodes; ++i) {
        const ggml_tensor * node = graph->nodes[i];
        if (!skipped(node)) {
            max_size = std::max(max_size, node_work_size(node, n_threads));
            // Groups as they could form before allocation shows which
            // members overlap (at most the groups compute_graph forms).
            int       members[MAX_PRODUCT_GROUP];
            const int n = product_group(graph, i, false, members);
            if (n > 1) {
                max_size = std::max(max_size, group_work_size(graph, members, n, n_threads));
            }
        }
    }
    // Room to align the start of the scratch to a cache line.
    return max_size > 0 ? max_size + 64 : 0;
}

ggml_status compute_graph(ThreadPool & pool, const GraphRun & run) {
    ggml_cgraph * const graph = run.graph;
    for (int i = 0; i < graph->n_nodes; ++i) {
        ggml_tensor * node = graph->nodes[i];
        if (skipped(node)) {
            continue;
        }
        if (!supports_op(node)) {
            LOOM_LOG_ERROR("CPU: node %d %s (%s) with these types is not supported\n", i, describe(node).text,
                           ggml_op_desc(node));
            return GGML_STATUS_FAILED;
        }
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            const ggml_tensor * src = node->src[j];
            if (src != nullptr && src->data == nullptr && !ggml_is_empty(src)) {
                LOOM_LOG_ERROR("CPU: source %d of node %s has no data (not allocated)\n", j, describe(node).text);
                return GGML_STATUS_FAILED;
            }
            if (src != nullptr && src->buffer != nullptr && !cpu_reads_buffer(src->buffer)) {
                LOOM_LOG_ERROR("CPU: source %s of node %s is in buffer %s, which is not host memory\n",
                               describe(src).text, describe(node).text, ggml_backend_buffer_name(src->buffer));
                return GGML_STATUS_FAILED;
            }
        }
        if (node->buffer != nullptr && !cpu_reads_buffer(node->buffer)) {
            LOOM_LOG_ERROR("CPU: node %s is in buffer %s, which is not host memory\n", describe(node).text,
                           ggml_backend_buffer_name(node->buffer));
            return GGML_STATUS_FAILED;
        }
        if (node->data == nullptr) {
            LOOM_LOG_ERROR("CPU: node %s has no data (not allocated)\n", describe(node).text);
            return GGML_STATUS_FAILED;
        }
    }

    const int n_threads = std::max(1, std::min(run.n_threads, pool.size()));
    void *    wdata     = run.wdata;
    size_t    wsize     = run.wsize;
    if (wdata != nullptr) {
        // Kernels may rely on cache-line alignment of the scratch.
        const uintptr_t p   = reinterpret_cast<uintptr_t>(wdata);
        const uintptr_t al  = (p + 63) & ~uintptr_t(63);
        const size_t    cut = size_t(al - p);
        wdata               = reinterpret_cast<void *>(al);
        wsize               = wsize > cut ? wsize - cut : 0;
    }

    // The phases: groups of products where they fit the scratch.
    std::vector<Phase> phases;
    phases.reserve(size_t(graph->n_nodes));
    for (int i = 0; i < graph->n_nodes; ++i) {
        if (skipped(graph->nodes[i])) {
            continue;
        }
        Phase ph{1, {i}};
        if (!run.use_ref) {
            int       members[MAX_PRODUCT_GROUP];
            const int n = product_group(graph, i, true, members);
            if (n > 1 && group_work_size(graph, members, n, n_threads) <= wsize) {
                ph.n = n;
                std::copy(members, members + n, ph.members);
            }
        }
        phases.push_back(ph);
        i = ph.members[ph.n - 1];
    }

    Barrier barrier(n_threads, pool.spin());
    // The node after which the abort callback asked to stop. Threads compare
    // it with the node they just passed, not as a plain flag: a thread may
    // see thread 0's store one barrier early and must not leave before the
    // others reach the barrier of that node.
    std::atomic<int> abort_after{INT_MAX};
    // The node whose kernel found its data unusable (ComputeParams::fail),
    // stored before the barrier after that node. Compared with the node a
    // thread just passed, like abort_after: a thread the others are waiting
    // for may see the store of a faster thread from the next node.
    std::atomic<int> failed_at{INT_MAX};

    // Note [Node profile]
    const bool prof = profiling();
    GraphTimes times;
    if (prof) {
        times.nth = n_threads;
        times.done.assign(size_t(graph->n_nodes) * size_t(n_threads), 0);
        times.released.assign(size_t(graph->n_nodes), 0);
        times.begin = profile_now();
    }

    pool.run(n_threads, [&](int ith) {
        ComputeParams p;
        p.ith     = ith;
        p.nth     = n_threads;
        p.wdata   = wdata;
        p.wsize   = wsize;
        p.barrier = &barrier;
        p.use_ref = run.use_ref;
        p.failed_at = &failed_at;
        for (const Phase & ph : phases) {
            p.node = ph.members[ph.n - 1];
            if (ph.n == 1) {
                compute_node(p, graph->nodes[ph.members[0]]);
            } else {
                ggml_tensor * nodes[MAX_PRODUCT_GROUP];
                for (int m = 0; m < ph.n; ++m) nodes[m] = graph->nodes[ph.members[m]];
                compute_products(p, nodes, ph.n);
            }
            const int last = ph.members[ph.n - 1];
            if (prof) {
                const int64_t t = profile_now();
                for (int m = 0; m < ph.n; ++m) times.done[size_t(ph.members[m]) * size_t(n_threads) + size_t(ith)] = t;
            }
            if (ith == 0 && run.abort_cb != nullptr && run.abort_cb(run.abort_data)) {
                abort_after.store(last, std::memory_order_relaxed);
            }
            barrier.wait(); // makes thread 0's store visible to all
            if (prof && ith == 0) {
                const int64_t t = profile_now();
                for (int m = 0; m < ph.n; ++m) times.released[size_t(ph.members[m])] = t;
            }
            if (failed_at.load(std::memory_order_relaxed) <= last) {
                break;
            }
            if (abort_after.load(std::memory_order_relaxed) <= last) {
                break;
            }
        }
    });
    if (prof) {
        times.end = profile_now();
        profile_record(graph, times);
    }
    if (const int f = failed_at.load(); f != INT_MAX) {
        const ggml_tensor * node = graph->nodes[f];
        LOOM_LOG_ERROR("CPU: node %d %s (%s) failed on its data; the graph stops there\n", f, describe(node).text,
                       ggml_op_desc(node));
        return GGML_STATUS_FAILED;
    }
    return abort_after.load() != INT_MAX ? GGML_STATUS_ABORTED : GGML_STATUS_SUCCESS;
}

} // namespace loom::cpu

using namespace loom;
using namespace loom::cpu;

extern "C" {

ggml_cplan ggml_graph_plan(const ggml_cgraph * cgraph, int n_threads, ggml_threadpool * threadpool) {
    LOOM_REQUIRE(cgraph != nullptr, "NULL graph");
    if (n_threads <= 0) {
        n_threads = threadpool != nullptr ? threadpool->pool.size() : GGML_DEFAULT_N_THREADS;
    }
    n_threads = std::min(n_threads, GGML_MAX_N_THREADS);
    ggml_cplan plan{};
    plan.n_threads  = n_threads;
    plan.threadpool = threadpool;
    plan.work_size = graph_work_size(cgraph, n_threads);
    return plan;
}

ggml_status ggml_graph_compute(ggml_cgraph * cgraph, ggml_cplan * cplan) {
    LOOM_REQUIRE(cgraph != nullptr && cplan != nullptr, "NULL graph or plan");
    LOOM_REQUIRE(cplan->n_threads > 0, "n_threads = %d must be positive", cplan->n_threads);
    const size_t needed = graph_work_size(cgraph, cplan->n_threads);
    if (cplan->work_size < needed || (needed > 0 && cplan->work_data == nullptr)) {
        LOOM_LOG_ERROR("ggml_graph_compute: the plan's work buffer (%zu bytes at %p) is smaller than the %zu bytes "
                       "the graph needs; call ggml_graph_plan first\n",
                       cplan->work_size, static_cast<void *>(cplan->work_data), needed);
        return GGML_STATUS_FAILED;
    }
    GraphRun run;
    run.graph      = cgraph;
    run.n_threads  = cplan->n_threads;
    run.wdata      = cplan->work_data;
    run.wsize      = cplan->work_size;
    run.abort_cb   = cplan->abort_callback;
    run.abort_data = cplan->abort_callback_data;
    run.use_ref    = cplan->use_ref;
    if (cplan->threadpool != nullptr) {
        return compute_graph_on(*cplan->threadpool, run);
    }
    ThreadPool pool(cplan->n_threads); // a pool of the moment, as ggml makes one
    return compute_graph(pool, run);
}

ggml_status ggml_graph_compute_with_ctx(ggml_context * ctx, ggml_cgraph * cgraph, int n_threads) {
    ggml_cplan plan = ggml_graph_plan(cgraph, n_threads, nullptr);
    if (plan.work_size > 0) {
        plan.work_data = static_cast<uint8_t *>(ggml_new_buffer(ctx, plan.work_size));
    }
    return ggml_graph_compute(cgraph, &plan);
}

} // extern "C"
