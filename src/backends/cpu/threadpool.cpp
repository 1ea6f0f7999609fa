#include "threadpool.h"

#if defined(__x86_64__) || defined(__i386__)
#    include <immintrin.h>
#endif

#include "kernels/kernels.h"

namespace loom::cpu {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// Spin iterations before sleeping: a few microseconds, enough to bridge the
// gap between nodes without burning a core when the pool is idle.
constexpr int k_spin = 4096;

template <typename T, typename Pred> void spin_then_wait(const std::atomic<T> & word, T old, Pred done) {
    for (int i = 0; i < k_spin; ++i) {
        if (done()) {
            return;
        }
        cpu_relax();
    }
    while (!done()) {
        word.wait(old, std::memory_order_acquire);
        old = word.load(std::memory_order_acquire);
    }
}

} // namespace

void ComputeParams::sync() const {
    if (barrier != nullptr) {
        barrier->wait();
    }
}

void Barrier::wait() {
    if (n_ <= 1) {
        return;
    }
    const uint32_t phase = phase_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == n_ - 1) {
        arrived_.store(0, std::memory_order_relaxed);
        phase_.fetch_add(1, std::memory_order_acq_rel);
        phase_.notify_all();
        return;
    }
    spin_then_wait(phase_, phase, [&] { return phase_.load(std::memory_order_acquire) != phase; });
}

ThreadPool::ThreadPool(int n_threads) {
    const int n_workers = n_threads > 1 ? n_threads - 1 : 0;
    workers_.reserve(size_t(n_workers));
    for (int i = 0; i < n_workers; ++i) {
        workers_.emplace_back([this, i] { worker_main(i + 1); });
    }
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    for (std::thread & t : workers_) {
        t.join();
    }
}

void ThreadPool::run(int n, const std::function<void(int)> & fn) {
    if (n <= 1 || workers_.empty()) {
        fn(0);
        return;
    }
    if (n > size()) {
        n = size();
    }
    job_   = &fn;
    job_n_ = n;
    // Every worker acknowledges every job, so none can lag into the next one.
    pending_.store(int(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel); // publishes job_ and job_n_
    generation_.notify_all();

    fn(0);

    int left = pending_.load(std::memory_order_acquire);
    spin_then_wait(pending_, left, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    job_ = nullptr;
}

void ThreadPool::worker_main(int ith) {
    uint32_t seen = 0;
    for (;;) {
        spin_then_wait(generation_, seen, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load(std::memory_order_acquire)) {
            return;
        }
        if (ith < job_n_) {
            (*job_)(ith);
        }
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            pending_.notify_one();
        }
    }
}

} // namespace loom::cpu
