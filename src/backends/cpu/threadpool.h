#pragma once

// A persistent pool of worker threads for graph computation, and the
// barrier that separates consecutive nodes.

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace loom::cpu {

// Spin iterations before a wait sleeps: a few microseconds, enough to
// bridge the gap between nodes without burning a core when the pool is idle.
constexpr int k_default_spin = 4096;

// Reusable barrier for a fixed number of threads: spins briefly (nodes are
// often microseconds apart), then sleeps on the phase word.
//
// Note [Adaptive spin]
// The spin adapts: a wait that had to sleep halves the next waits' spin
// (down to k_min_spin), a wait that ended while spinning doubles it (up to
// the configured spin). When the threads outnumber the free cores, a
// waiter whose partner is descheduled then gives its core back almost at
// once instead of spinning through the partner's time slice; on an idle
// machine every wait ends while spinning and the spin stays as configured.
class Barrier {
  public:
    static constexpr int k_min_spin = 32;

    explicit Barrier(int n_threads, int spin = k_default_spin) : n_(n_threads), max_spin_(spin), spin_(spin) {}
    void wait();
    // The spin the next wait starts with.
    int spin() const { return spin_.load(std::memory_order_relaxed); }

  private:
    const int             n_;
    const int             max_spin_;
    std::atomic<int>      spin_;
    std::atomic<int>      arrived_{0};
    std::atomic<uint32_t> phase_{0};
};

// Note [Idle spin]
// Between two jobs (two graphs: during generation the runner samples a token
// and builds the next graph in about half a millisecond) a worker spins up
// to k_idle_spin_factor times the pool's spin before it sleeps, about 1.3 ms
// at the default spin (a pause takes about 19 ns on the machine of
// bench/RESULTS.md). Waking a sleeping worker there took about 100 us: the
// first node of every generation graph, one row of the token embedding,
// took 120-145 us with the worker asleep and 20-32 us with it spinning. As
// in the barrier (Note [Adaptive spin]), a wait that had to sleep halves the
// next idle spin and one that ended while spinning doubles it, so a pool
// left idle, or sharing its cores with more threads, soon stops spinning;
// a paused pool does not spin at all.
constexpr int k_idle_spin_factor = 16;

// How the workers of a pool run (ggml_threadpool_params).
struct ThreadOptions {
    std::vector<int> cpus;               // CPUs the workers may run on; empty: no affinity set
    bool             strict_cpu = false; // worker i on cpus[i % size] alone, instead of all of them
    int              priority   = 0;     // enum ggml_sched_priority
    int              spin       = k_default_spin;
};

// Worker threads that live as long as the pool. run() executes one job on
// n threads, the calling thread being thread 0. run() is not reentrant: one
// job at a time per pool (a backend is a single stream).
class ThreadPool {
  public:
    explicit ThreadPool(int n_threads, ThreadOptions options = {});
    ~ThreadPool();
    ThreadPool(const ThreadPool &)             = delete;
    ThreadPool & operator=(const ThreadPool &) = delete;

    int size() const { return int(workers_.size()) + 1; }

    // Calls fn(ith) for ith in [0, n) concurrently; returns when all calls
    // returned. n must not exceed size().
    void run(int n, const std::function<void(int)> & fn);

    // A paused pool's idle workers sleep at once instead of spinning first;
    // run() on a paused pool works (and spins as little).
    void pause() { paused_.store(true, std::memory_order_relaxed); }
    void resume() { paused_.store(false, std::memory_order_relaxed); }
    bool paused() const { return paused_.load(std::memory_order_relaxed); }
    // Spin iterations for waits of the pool and of its graph computations.
    int  spin() const { return paused() ? 0 : options_.spin; }

  private:
    void worker_main(int ith);
    void apply_options(int ith) const;

    ThreadOptions                     options_;
    std::atomic<bool>                 paused_{false};
    std::vector<std::thread>          workers_;
    std::atomic<uint32_t>             generation_{0};
    std::atomic<int>                  pending_{0};
    std::atomic<bool>                 stop_{false};
    const std::function<void(int)> *  job_   = nullptr; // published by generation_
    int                               job_n_ = 0;
};

} // namespace loom::cpu
