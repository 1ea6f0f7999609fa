#pragma once

// A persistent pool of worker threads for graph computation, and the
// barrier that separates consecutive nodes.

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace loom::cpu {

// Reusable barrier for a fixed number of threads: spins briefly (nodes are
// often microseconds apart), then sleeps on the phase word.
class Barrier {
  public:
    explicit Barrier(int n_threads) : n_(n_threads) {}
    void wait();

  private:
    const int             n_;
    std::atomic<int>      arrived_{0};
    std::atomic<uint32_t> phase_{0};
};

// Worker threads that live as long as the pool. run() executes one job on
// n threads, the calling thread being thread 0. run() is not reentrant: one
// job at a time per pool (a backend is a single stream).
class ThreadPool {
  public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &)             = delete;
    ThreadPool & operator=(const ThreadPool &) = delete;

    int size() const { return int(workers_.size()) + 1; }

    // Calls fn(ith) for ith in [0, n) concurrently; returns when all calls
    // returned. n must not exceed size().
    void run(int n, const std::function<void(int)> & fn);

  private:
    void worker_main(int ith);

    std::vector<std::thread>          workers_;
    std::atomic<uint32_t>             generation_{0};
    std::atomic<int>                  pending_{0};
    std::atomic<bool>                 stop_{false};
    const std::function<void(int)> *  job_   = nullptr; // published by generation_
    int                               job_n_ = 0;
};

} // namespace loom::cpu
