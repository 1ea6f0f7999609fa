#pragma once

// Threads that convert weights to F32 before a BLAS product.
//
// The jobs are coarse (a slice of a weight matrix, typically tens of
// microseconds to milliseconds), so idle workers sleep on a condition
// variable instead of spinning: spinning threads would compete with the
// BLAS library's own threads and with the CPU backend's pool on the same
// cores.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::blas {

class WorkerPool {
  public:
    // n_threads - 1 workers; the thread calling run() is the n-th.
    // Throws std::system_error when a thread cannot be started.
    explicit WorkerPool(int n_threads);
    ~WorkerPool();
    WorkerPool(const WorkerPool &)             = delete;
    WorkerPool & operator=(const WorkerPool &) = delete;

    int size() const { return int(workers_.size()) + 1; }

    // Calls fn(i) for i in [0, n) concurrently, the caller taking i = 0;
    // returns when every call has returned. 1 <= n <= size(). One job at a
    // time (a backend is a single stream).
    void run(int n, const std::function<void(int)> & fn);

  private:
    void worker_main(int index);

    std::mutex                       mutex_;
    std::condition_variable          work_ready_;
    std::condition_variable          work_done_;
    uint64_t                         generation_ = 0;
    int                              job_n_      = 0;
    int                              pending_    = 0;
    bool                             stop_       = false;
    const std::function<void(int)> * job_        = nullptr;
    std::vector<std::thread>         workers_;
};

} // namespace loom::blas
