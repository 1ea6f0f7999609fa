#pragma once

// The machine's limits that loom-bench divides by: the FMA peak and the
// memory bandwidth, measured on pinned threads (Note [Arrays past the
// last-level cache] in bench_limits.cpp).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <utility>

namespace loom_bench {

// The FMA peak is the best of kernels of 8 to 16 independent FMA chains
// per thread: with a latency of 4 cycles and two FMA units, eight are the
// least that keep both busy, and more leave the scheduler room when a
// hypervisor or a sibling thread takes cycles. Each chain starts from its
// own value, taken from an argument, so that no compiler can merge chains
// it could prove equal.
constexpr int kChainCounts[] = {8, 10, 12, 14, 16};

// Runs fn(ith) on n pinned threads at once and returns the wall time of the
// slowest.
double run_threads(int n, const std::function<void(int)> & fn);

struct Peak {
    double gflops = 0.0; // over all threads
    int    chains = 0;   // the kernel that reached it
    double flop_per_cycle = 0.0; // per thread, 0 when cycles cannot be read
    double ghz            = 0.0; // the clock the cycle count implies, 0 likewise
};

// Lanes of the FMA peak's kernels: AVX2's 8 (AVX-512's twice as many), NEON's 4.
#if defined(__aarch64__)
constexpr int FMA_LANES = 4;
#else
constexpr int FMA_LANES = 8;
#endif

// The best of every chain count, 4 runs each, in GFLOP/s over all threads
// (pinned, one per processor); avx512 only where the processor has it.
Peak fma_peak(int n_threads, bool avx512);

struct AlignedFloats {
    float * p = nullptr;
    size_t  n = 0;
    explicit AlignedFloats(size_t count) : n(count) {
        p = static_cast<float *>(std::aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64));
        if (p == nullptr) {
            std::fprintf(stderr, "loom-bench: out of memory\n");
            std::exit(1);
        }
    }
    ~AlignedFloats() { std::free(p); }
    AlignedFloats(const AlignedFloats &)             = delete;
    AlignedFloats & operator=(const AlignedFloats &) = delete;
};

// a[i] = b[i] + s * c[i] over [begin, end), with streaming stores (x86).
void triad_part(float * a, const float * b, const float * c, size_t begin, size_t end, float s);

struct Bandwidth {
    double triad;            // GB/s
    double read;             // GB/s
    int    read_streams = 0; // streams per thread of the best read
};

// Thread ith's part [first, second) of n elements: a multiple of 256 each,
// the last thread taking the rest.
std::pair<size_t, size_t> thread_part(size_t n, int ith, int nth);

// Bytes of the last-level cache, as the system describes it (0 where it
// does not).
size_t last_level_cache_bytes();

// The triad and the read-only sum over arrays past the last-level cache.
Bandwidth memory_bandwidth(int n_threads);

} // namespace loom_bench
