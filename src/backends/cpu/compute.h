#pragma once

// Graph computation on the CPU: work-buffer sizing, node dispatch and the
// per-thread loop over the nodes of a graph.

#include <cstddef>

#include "ggml-cpu.h"
#include "threadpool.h"

namespace loom::cpu {

// True when the CPU kernels compute op for its types and layouts.
bool supports_op(const ggml_tensor * op);

// Bytes of shared scratch a graph needs with n_threads threads.
size_t graph_work_size(const ggml_cgraph * graph, int n_threads);

struct GraphRun {
    ggml_cgraph *       graph     = nullptr;
    int                 n_threads = 1;
    void *              wdata     = nullptr;
    size_t              wsize     = 0;
    ggml_abort_callback abort_cb  = nullptr;
    void *              abort_data = nullptr;
    bool                use_ref   = false;
};

// Computes run.graph on pool (run.n_threads <= pool.size()).
ggml_status compute_graph(ThreadPool & pool, const GraphRun & run);

} // namespace loom::cpu
