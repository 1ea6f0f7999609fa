// The FMA peak and memory bandwidth of loom-bench (bench_limits.h).

#include "bench_limits.h"

#if defined(__x86_64__)
#    include <immintrin.h>
#elif defined(__aarch64__)
#    include <arm_neon.h>
#endif
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ggml-cpu.h"

namespace loom_bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Pins a thread to processor ith (modulo the processors this process may
// use), so that two limit threads never share a core while another idles.
void pin(std::thread & t, int ith) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) == 0) return;
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[size_t(ith) % cpus.size()], &one);
    pthread_setaffinity_np(t.native_handle(), sizeof(one), &one);
}

} // namespace

// Runs fn(ith) on n pinned threads at once and returns the wall time of the
// slowest.
double run_threads(int n, const std::function<void(int)> & fn) {
    std::atomic<int>         ready{0};
    std::atomic<bool>        go{false};
    std::vector<std::thread> threads;
    Clock::time_point        t0;
    for (int i = 0; i < n; ++i) {
        threads.emplace_back([&, i] {
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) {
            }
            fn(i);
        });
        pin(threads.back(), i);
    }
    while (ready.load() < n) {
    }
    t0 = Clock::now();
    go.store(true, std::memory_order_release);
    for (std::thread & t : threads) {
        t.join();
    }
    return seconds_since(t0);
}

namespace {

#if defined(__x86_64__)
template <int N>
__attribute__((target("avx2,fma"), noinline)) float fma_chains_avx2(int64_t iters, float seed) {
    __m256 c[N];
    for (int i = 0; i < N; ++i) {
        c[i] = _mm256_set1_ps(seed * float(i + 1));
    }
    const __m256 a = _mm256_set1_ps(0.999999f);
    const __m256 b = _mm256_set1_ps(seed * 1e-7f);
    for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < N; ++i) {
            c[i] = _mm256_fmadd_ps(c[i], a, b);
        }
    }
    __m256 s = c[0];
    for (int i = 1; i < N; ++i) {
        s = _mm256_add_ps(s, c[i]);
    }
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}

template <int N>
__attribute__((target("avx512f"), noinline)) float fma_chains_avx512(int64_t iters, float seed) {
    __m512 c[N];
    for (int i = 0; i < N; ++i) {
        c[i] = _mm512_set1_ps(seed * float(i + 1));
    }
    const __m512 a = _mm512_set1_ps(0.999999f);
    const __m512 b = _mm512_set1_ps(seed * 1e-7f);
    for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < N; ++i) {
            c[i] = _mm512_fmadd_ps(c[i], a, b);
        }
    }
    __m512 s = c[0];
    for (int i = 1; i < N; ++i) {
        s = _mm512_add_ps(s, c[i]);
    }
    float out[16];
    _mm512_storeu_ps(out, s);
    return out[0];
}

float fma_chains(bool avx512, int chains, int64_t iters, float seed) {
    switch (chains) {
        case 8: return avx512 ? fma_chains_avx512<8>(iters, seed) : fma_chains_avx2<8>(iters, seed);
        case 10: return avx512 ? fma_chains_avx512<10>(iters, seed) : fma_chains_avx2<10>(iters, seed);
        case 12: return avx512 ? fma_chains_avx512<12>(iters, seed) : fma_chains_avx2<12>(iters, seed);
        case 14: return avx512 ? fma_chains_avx512<14>(iters, seed) : fma_chains_avx2<14>(iters, seed);
        default: return avx512 ? fma_chains_avx512<16>(iters, seed) : fma_chains_avx2<16>(iters, seed);
    }
}
#elif defined(__aarch64__)

// 4-lane NEON fused multiply-adds (FMLA), the base architecture's widest.
template <int N> __attribute__((noinline)) float fma_chains_neon(int64_t iters, float seed) {
    float32x4_t c[N];
    for (int i = 0; i < N; ++i) {
        c[i] = vdupq_n_f32(seed * float(i + 1));
    }
    const float32x4_t a = vdupq_n_f32(0.999999f);
    const float32x4_t b = vdupq_n_f32(seed * 1e-7f);
    for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < N; ++i) {
            c[i] = vfmaq_f32(b, c[i], a);
        }
    }
    float32x4_t s = c[0];
    for (int i = 1; i < N; ++i) {
        s = vaddq_f32(s, c[i]);
    }
    return vgetq_lane_f32(s, 0);
}

float fma_chains(bool, int chains, int64_t iters, float seed) {
    switch (chains) {
        case 8: return fma_chains_neon<8>(iters, seed);
        case 10: return fma_chains_neon<10>(iters, seed);
        case 12: return fma_chains_neon<12>(iters, seed);
        case 14: return fma_chains_neon<14>(iters, seed);
        default: return fma_chains_neon<16>(iters, seed);
    }
}
#endif

// A thread's core cycles, where the kernel lets a process count them
// (perf_event_open; many virtual machines do not pass the counter on).
class CycleCounter {
  public:
    CycleCounter() {
        perf_event_attr a{};
        a.type           = PERF_TYPE_HARDWARE;
        a.size           = sizeof(a);
        a.config         = PERF_COUNT_HW_CPU_CYCLES;
        a.exclude_kernel = 1;
        a.exclude_hv     = 1;
        fd_              = int(syscall(SYS_perf_event_open, &a, 0, -1, -1, 0));
    }
    ~CycleCounter() {
        if (fd_ >= 0) close(fd_);
    }
    CycleCounter(const CycleCounter &)             = delete;
    CycleCounter & operator=(const CycleCounter &) = delete;
    // Cycles so far, or -1 when they cannot be read.
    int64_t read_cycles() const {
        int64_t v = -1;
        if (fd_ < 0 || ::read(fd_, &v, sizeof(v)) != ssize_t(sizeof(v))) return -1;
        return v;
    }

  private:
    int fd_ = -1;
};


} // namespace

// The best of every chain count, 4 runs each, in GFLOP/s over all threads
// (pinned, one per processor).
Peak fma_peak(int n_threads, bool avx512) {
    const int64_t      flop_per_run = int64_t(2.4e9); // per thread, about 0.1 s
    const int          lanes        = FMA_LANES * (avx512 ? 2 : 1);
    Peak               best;
    std::vector<float> sink(static_cast<size_t>(n_threads));
    std::vector<double> cyc(static_cast<size_t>(n_threads));
    for (int rep = 0; rep < 4; ++rep) {
        for (int chains : kChainCounts) {
            const int64_t iters = flop_per_run / (int64_t(chains) * lanes * 2);
            const double  t     = run_threads(n_threads, [&](int ith) {
                const float        seed = 1.0f + float(rep + ith) * 1e-3f;
                const CycleCounter cc;
                const int64_t      c0 = cc.read_cycles();
                sink[size_t(ith)]     = fma_chains(avx512, chains, iters, seed);
                const int64_t c1      = cc.read_cycles();
                cyc[size_t(ith)]      = c0 >= 0 && c1 > c0 ? double(c1 - c0) : 0.0;
            });
            const double flop = double(iters) * chains * lanes * 2.0;
            const double rate = double(n_threads) * flop / t / 1e9;
            if (rate > best.gflops) {
                best = {rate, chains, cyc[0] > 0.0 ? flop / cyc[0] : 0.0, cyc[0] > 0.0 ? cyc[0] / t / 1e9 : 0.0};
            }
        }
    }
    if (sink[0] == 12345.0f) {
        std::printf(" ");
    }
    return best;
}


#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void triad_part(float * a, const float * b, const float * c, size_t begin,
                                                    size_t end, float s) {
    const __m256 vs = _mm256_set1_ps(s);
    for (size_t i = begin; i < end; i += 8) {
        _mm256_stream_ps(a + i, _mm256_fmadd_ps(_mm256_load_ps(c + i), vs, _mm256_load_ps(b + i)));
    }
    _mm_sfence();
}

namespace {

// A read-only sum of b[begin, end), taken as `streams` equal parts read
// side by side, 256 bytes of each in turn: several streams keep more reads
// in flight than one (on a 2-vCPU EPYC VM, four streams per thread read
// about 10% faster than one; on the Intel Xeon VM 27 GB/s against 23). The
// read limit is the best of one, two, four and eight streams.
__attribute__((target("avx2"))) float read_part(const float * b, size_t begin, size_t end, int streams) {
    __m256       s[8] = {};
    const size_t len  = (end - begin) / size_t(streams) / 64 * 64;
    for (size_t i = 0; i < len; i += 64) {
        for (int k = 0; k < streams; ++k) {
            const float * p = b + begin + size_t(k) * len + i;
            for (int j = 0; j < 8; ++j) s[j] = _mm256_add_ps(s[j], _mm256_load_ps(p + 8 * j));
        }
    }
    for (int j = 1; j < 8; ++j) s[0] = _mm256_add_ps(s[0], s[j]);
    float out[8];
    _mm256_storeu_ps(out, s[0]);
    return out[0] + out[7];
}

// The same with 512-bit loads, for processors with AVX-512.
__attribute__((target("avx512f"))) float read_part512(const float * b, size_t begin, size_t end, int streams) {
    __m512       s[4] = {};
    const size_t len  = (end - begin) / size_t(streams) / 64 * 64;
    for (size_t i = 0; i < len; i += 64) {
        for (int k = 0; k < streams; ++k) {
            const float * p = b + begin + size_t(k) * len + i;
            for (int j = 0; j < 4; ++j) s[j] = _mm512_add_ps(s[j], _mm512_load_ps(p + 16 * j));
        }
    }
    float out[16];
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])));
    return out[0] + out[15];
}

#elif defined(__aarch64__)

// No streaming stores in the base architecture: a's lines are read before
// they are written, so the triad moves 4 x 4 bytes per element where 3 x 4
// are counted (the figure is the rate of the counted bytes).
void triad_part(float * a, const float * b, const float * c, size_t begin, size_t end, float s) {
    for (size_t i = begin; i < end; i += 4) {
        vst1q_f32(a + i, vfmaq_n_f32(vld1q_f32(b + i), vld1q_f32(c + i), s));
    }
}

namespace {

float read_part(const float * b, size_t begin, size_t end, int streams) {
    float32x4_t  s[8] = {};
    const size_t len  = (end - begin) / size_t(streams) / 64 * 64;
    for (size_t i = 0; i < len; i += 64) {
        for (int k = 0; k < streams; ++k) {
            const float * p = b + begin + size_t(k) * len + i;
            for (int j = 0; j < 16; ++j) s[j % 8] = vaddq_f32(s[j % 8], vld1q_f32(p + 4 * j));
        }
    }
    for (int j = 1; j < 8; ++j) s[0] = vaddq_f32(s[0], s[j]);
    return vgetq_lane_f32(s[0], 0) + vgetq_lane_f32(s[0], 3);
}

float read_part512(const float * b, size_t begin, size_t end, int streams) {
    return read_part(b, begin, end, streams);
}

#endif

} // namespace

// Thread ith's part [first, second) of n elements: a multiple of 256 each,
// the last thread taking the rest.
std::pair<size_t, size_t> thread_part(size_t n, int ith, int nth) {
    const size_t per = n / size_t(nth) / 256 * 256;
    const size_t lo  = per * size_t(ith);
    return {lo, ith == nth - 1 ? n : lo + per};
}

// Bytes of the last-level cache, as the system describes it (0 where it
// does not).
size_t last_level_cache_bytes() {
    size_t best = 0;
    for (int index = 0; index < 8; ++index) {
        const std::string dir  = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
        FILE *            file = std::fopen((dir + "size").c_str(), "r");
        if (file == nullptr) {
            break;
        }
        unsigned long value = 0;
        char          unit  = 0;
        const int     got   = std::fscanf(file, "%lu%c", &value, &unit);
        std::fclose(file);
        if (got >= 1) {
            const size_t scale = unit == 'K' ? size_t(1) << 10 : unit == 'M' ? size_t(1) << 20 : 1;
            best               = std::max(best, size_t(value) * scale);
        }
    }
    return best;
}

// Note [Arrays past the last-level cache]
// Each array is at least four times the last-level cache and 128 MiB, and
// the read-only sum reads all three: on the Intel Xeon VM of
// bench/RESULTS.md (260 MiB of L3) one array of 128 MiB was read at 46-48
// GB/s with four streams, partly from the cache, and one of 1 GiB, read
// again and again, at 29-32 GB/s (a cache that resists streams keeps part
// of it), where a separate program reading 2 GiB measured 25-29 GB/s.
Bandwidth memory_bandwidth(int n_threads) {
    const size_t  bytes = std::max(size_t(128) << 20, 4 * last_level_cache_bytes());
    const size_t  n     = bytes / sizeof(float) / 4096 * 4096;
    AlignedFloats a(n), b(n), c(n);
    // Each thread first touches the part it works on.
    auto part = [&](int ith) { return thread_part(n, ith, n_threads); };
    run_threads(n_threads, [&](int ith) {
        const auto [lo, hi] = part(ith);
        for (size_t i = lo; i < hi; ++i) {
            a.p[i] = 0.0f;
            b.p[i] = 1.0f;
            c.p[i] = 2.0f;
        }
    });
    Bandwidth          bw{0.0, 0.0};
    const bool         wide = ggml_cpu_has_avx512() != 0;
    std::vector<float> sink(static_cast<size_t>(n_threads));
    for (int rep = 0; rep < 6; ++rep) {
        const double t = run_threads(n_threads, [&](int ith) {
            const auto [lo, hi] = part(ith);
            triad_part(a.p, b.p, c.p, lo, hi, 0.5f);
        });
        bw.triad = std::max(bw.triad, 3.0 * double(n) * sizeof(float) / t / 1e9);
        for (int streams : {1, 2, 4, 8}) {
            // Each part is a multiple of 64 * streams floats, so the whole
            // of each array is read; all three in turn, twelve times the
            // cache or more.
            const double r = run_threads(n_threads, [&](int ith) {
                const auto [lo, hi] = part(ith);
                float sum           = 0.0f;
                for (const float * arr : {a.p, b.p, c.p}) {
                    sum += wide ? read_part512(arr, lo, hi, streams) : read_part(arr, lo, hi, streams);
                }
                sink[size_t(ith)] = sum;
            });
            const double rate = 3.0 * double(n) * sizeof(float) / r / 1e9;
            if (rate > bw.read) {
                bw.read         = rate;
                bw.read_streams = streams;
            }
        }
    }
    if (sink[0] == 12345.0f) {
        std::printf(" ");
    }
    return bw;
}

} // namespace loom_bench
