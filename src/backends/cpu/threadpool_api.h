#pragma once

// The object behind ggml_threadpool_t.

#include <mutex>

#include "compute.h"
#include "ggml-cpu.h"
#include "threadpool.h"

struct ggml_threadpool {
    ggml_threadpool(const ggml_threadpool_params & p, loom::cpu::ThreadOptions options);

    ggml_threadpool_params params;
    loom::cpu::ThreadPool  pool;
    std::mutex             run_mutex; // one graph at a time, whoever computes it
};

namespace loom::cpu {

// Computes run.graph on the threads of tp, with at most the pool's threads.
ggml_status compute_graph_on(ggml_threadpool & tp, GraphRun run);

} // namespace loom::cpu
