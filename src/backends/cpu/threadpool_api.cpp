// ggml's thread pool API over loom's ThreadPool.

#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

#include "core/common.h"
#include "ggml-cpu.h"
#include "threadpool_api.h"

using loom::cpu::ThreadOptions;

ggml_threadpool::ggml_threadpool(const ggml_threadpool_params & p, ThreadOptions options)
    : params(p), pool(p.n_threads, std::move(options)) {
    if (p.paused) pool.pause();
}

namespace {

ThreadOptions options_of(const ggml_threadpool_params & p) {
    ThreadOptions o;
    for (int c = 0; c < GGML_MAX_N_THREADS; ++c) {
        if (p.cpumask[c]) o.cpus.push_back(c);
    }
    o.strict_cpu = p.strict_cpu;
    o.priority   = int(p.prio);
    // poll 50 (ggml's default) spins as long as loom's default.
    o.spin = int(std::min<uint64_t>(uint64_t(p.poll) * loom::cpu::k_default_spin / 50, 8u * loom::cpu::k_default_spin));
    return o;
}

} // namespace

extern "C" {

void ggml_threadpool_params_init(ggml_threadpool_params * p, int n_threads) {
    LOOM_REQUIRE(p != nullptr, "NULL params");
    std::memset(p, 0, sizeof(*p));
    p->n_threads  = n_threads;
    p->prio       = GGML_SCHED_PRIO_NORMAL;
    p->poll       = 50;
    p->strict_cpu = false;
    p->paused     = false;
}

ggml_threadpool_params ggml_threadpool_params_default(int n_threads) {
    ggml_threadpool_params p;
    ggml_threadpool_params_init(&p, n_threads);
    return p;
}

bool ggml_threadpool_params_match(const ggml_threadpool_params * p0, const ggml_threadpool_params * p1) {
    LOOM_REQUIRE(p0 != nullptr && p1 != nullptr, "NULL params");
    return p0->n_threads == p1->n_threads && p0->prio == p1->prio && p0->poll == p1->poll &&
           p0->strict_cpu == p1->strict_cpu && std::memcmp(p0->cpumask, p1->cpumask, sizeof(p0->cpumask)) == 0;
}

ggml_threadpool * ggml_threadpool_new(ggml_threadpool_params * params) {
    LOOM_REQUIRE(params != nullptr, "NULL params");
    if (params->n_threads < 1 || params->n_threads > GGML_MAX_N_THREADS) {
        LOOM_LOG_ERROR("ggml_threadpool_new: n_threads = %d out of range (1..%d)\n", params->n_threads,
                       GGML_MAX_N_THREADS);
        return nullptr;
    }
    try {
        return new ggml_threadpool(*params, options_of(*params));
    } catch (const std::exception & e) {
        LOOM_LOG_ERROR("ggml_threadpool_new: cannot start %d threads: %s\n", params->n_threads, e.what());
        return nullptr;
    }
}

void ggml_threadpool_free(ggml_threadpool * threadpool) {
    delete threadpool;
}

int ggml_threadpool_get_n_threads(ggml_threadpool * threadpool) {
    LOOM_REQUIRE(threadpool != nullptr, "NULL threadpool");
    return threadpool->pool.size();
}

void ggml_threadpool_pause(ggml_threadpool * threadpool) {
    LOOM_REQUIRE(threadpool != nullptr, "NULL threadpool");
    threadpool->pool.pause();
}

void ggml_threadpool_resume(ggml_threadpool * threadpool) {
    LOOM_REQUIRE(threadpool != nullptr, "NULL threadpool");
    threadpool->pool.resume();
}

} // extern "C"

namespace loom::cpu {

ggml_status compute_graph_on(ggml_threadpool & tp, GraphRun run) {
    std::lock_guard<std::mutex> lock(tp.run_mutex);
    tp.pool.resume(); // as ggml does: a graph wakes a paused pool
    run.n_threads = std::min(run.n_threads, tp.pool.size());
    return compute_graph(tp.pool, run);
}

} // namespace loom::cpu
