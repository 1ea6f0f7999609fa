#include "threadpool.h"

#include <algorithm>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#    include <immintrin.h>
#endif

#include "core/common.h"
#include "ggml.h"
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

// Returns whether the wait ended while spinning (false: it slept).
template <typename T, typename Pred> bool spin_then_wait(const std::atomic<T> & word, T old, int spin, Pred done) {
    for (int i = 0; i < spin; ++i) {
        if (done()) {
            return true;
        }
        cpu_relax();
    }
    while (!done()) {
        word.wait(old, std::memory_order_acquire);
        old = word.load(std::memory_order_acquire);
    }
    return false;
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
    // Note [Adaptive spin] in threadpool.h.
    const int  spin = spin_.load(std::memory_order_relaxed);
    const bool spun = spin_then_wait(phase_, phase, spin, [&] { return phase_.load(std::memory_order_acquire) != phase; });
    const int  next = spun ? std::min(max_spin_, spin * 2) : std::max(std::min(k_min_spin, max_spin_), spin / 2);
    if (next != spin) {
        spin_.store(next, std::memory_order_relaxed);
    }
}

ThreadPool::ThreadPool(int n_threads, ThreadOptions options) : options_(std::move(options)) {
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
    spin_then_wait(pending_, left, spin(), [&] { return pending_.load(std::memory_order_acquire) == 0; });
    job_ = nullptr;
}

// Affinity and priority of worker ith, as far as the system allows: a
// refusal (a CPU outside the process's set, a priority that needs
// privileges) is logged and the worker runs as it is.
void ThreadPool::apply_options(int ith) const {
    if (!options_.cpus.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (options_.strict_cpu) {
            CPU_SET(options_.cpus[size_t(ith - 1) % options_.cpus.size()], &set);
        } else {
            for (int c : options_.cpus) CPU_SET(c, &set);
        }
        if (const int err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set); err != 0) {
            LOOM_LOG_WARN("threadpool: cannot set the affinity of worker %d (error %d)\n", ith, err);
        }
    }
    if (options_.priority == GGML_SCHED_PRIO_NORMAL) {
        return;
    }
    if (options_.priority == GGML_SCHED_PRIO_REALTIME) {
        sched_param sp{};
        sp.sched_priority = sched_get_priority_max(SCHED_FIFO);
        if (const int err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp); err != 0) {
            LOOM_LOG_WARN("threadpool: cannot give worker %d real-time priority (error %d)\n", ith, err);
        }
        return;
    }
    // Low, medium and high: a nice value for this thread alone.
    const int nice = options_.priority == GGML_SCHED_PRIO_LOW ? 5 : options_.priority == GGML_SCHED_PRIO_MEDIUM ? -5 : -10;
    if (setpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)), nice) != 0) {
        LOOM_LOG_WARN("threadpool: cannot set the priority of worker %d to nice %d\n", ith, nice);
    }
}

void ThreadPool::worker_main(int ith) {
    apply_options(ith);
    uint32_t seen = 0;
    // Note [Idle spin] in threadpool.h.
    int idle = spin() * k_idle_spin_factor;
    for (;;) {
        const int  most = spin() * k_idle_spin_factor;
        const int  now  = std::min(idle, most);
        const bool spun = spin_then_wait(generation_, seen, now,
                                         [&] { return generation_.load(std::memory_order_acquire) != seen; });
        idle = spun ? std::min(most, std::max(2 * now, Barrier::k_min_spin))
                    : std::max(std::min(Barrier::k_min_spin, most), now / 2);
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
