#include "workers.h"

#include "core/common.h"

namespace loom::blas {

WorkerPool::WorkerPool(int n_threads) {
    LOOM_ASSERT(n_threads >= 1);
    workers_.reserve(size_t(n_threads - 1));
    try {
        for (int i = 1; i < n_threads; ++i) {
            workers_.emplace_back(&WorkerPool::worker_main, this, i);
        }
    } catch (...) {
        // Stop the workers already started before reporting the failure;
        // the destructor does not run for a half-built object.
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        work_ready_.notify_all();
        for (std::thread & t : workers_) {
            t.join();
        }
        throw;
    }
}

WorkerPool::~WorkerPool() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    work_ready_.notify_all();
    for (std::thread & t : workers_) {
        t.join();
    }
}

void WorkerPool::run(int n, const std::function<void(int)> & fn) {
    LOOM_ASSERT(n >= 1 && n <= size());
    if (n == 1) {
        fn(0);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        job_     = &fn;
        job_n_   = n;
        pending_ = n - 1;
        ++generation_;
    }
    work_ready_.notify_all();
    fn(0);
    std::unique_lock<std::mutex> lock(mutex_);
    work_done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
}

void WorkerPool::worker_main(int index) {
    uint64_t seen = 0;
    for (;;) {
        const std::function<void(int)> * job = nullptr;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            work_ready_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) {
                return;
            }
            seen = generation_;
            if (index >= job_n_) {
                continue; // this job needs fewer threads
            }
            job = job_;
        }
        (*job)(index);
        {
            std::lock_guard<std::mutex> lock(mutex_);
            --pending_;
            if (pending_ != 0) {
                continue;
            }
        }
        work_done_.notify_one();
    }
}

} // namespace loom::blas
