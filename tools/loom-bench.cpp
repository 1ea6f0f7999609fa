// loom-bench: throughput of loom's CPU matrix products, as a share of this
// machine's limits measured in the same run, and beside a BLAS library when
// the build found one.
//
//   loom-bench [-t threads] [--min-time seconds] [--only gemm|gemv|limits] [--type TYPE] [--no-blas]
//
// It runs on x86-64 with AVX2 and FMA and on 64-bit Arm (NEON limit
// kernels: 4-lane FMLA chains; a triad without streaming stores). Only the
// public ggml API is used, so the same source built against ggml measures
// ggml's products (bench/arm_vs_ggml.sh).
//
// Limits, measured first with the same thread count:
//   - FMA peak: each thread (pinned to its own processor) runs independent
//     chains of 8-lane (AVX2) fused multiply-adds, the best of kernels of 8,
//     10, 12, 14 and 16 chains over 4 runs each; the kernel that reached it
//     is printed, with the FLOP per cycle and the clock where the kernel
//     lets the process count cycles. The AVX-512 figure is printed beside it
//     where the processor has AVX-512, and the peak of the GEMM's
//     instructions is measured again right before and after each GEMM case;
//   - memory bandwidth: a triad a[i] = b[i] + s * c[i] over arrays of four
//     times the last-level cache or more (Note [Arrays past the last-level
//     cache]), with streaming stores so that the bytes counted
//     (3 x 4 per element) are the bytes moved; a read-only sum is printed too
//     (the best of 1, 2, 4 and 8 streams side by side per thread, 512-bit
//     loads where the processor has AVX-512).
// Cases, through the public API on the CPU backend:
//   - F32 GEMM M=N=K=2048, and M=4096 K=4096 N=512 (a 4096 x 4096 weight
//     matrix times 512 columns), in GFLOP/s (2 M N K per product) and % of the
//     FMA peak of the instructions the GEMM runs on (AVX-512 where loom's
//     table has it), beside the BLAS sgemm of the same shapes and thread
//     count;
//   - GEMV (one column) with Q4_0, Q8_0, F16 (and F32, beside BLAS sgemv)
//     weights, or those of any other type --type names (q4_K, q6_K, ...),
//     of 4096 x 14336 and 14336 x 4096 (K x M), in GB/s of weight
//     bytes read, % of the triad and % of the read-only sum (a product only
//     reads its weights), and the median run's share of triads run just
//     before and after the case (Note [Triads around a case]). Several copies of the weights,
//     together well past the last-level cache, are used in turn so that
//     every product reads its weights from memory.
// Each case runs at least 5 times after a warm-up run; rates come from the
// best run, with the median run's rate in parentheses.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_limits.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#if defined(LOOM_BENCH_BLAS)
// The two CBLAS entry points used, declared here so that any CBLAS
// implementation's header layout will do (enum values are CBLAS's).
extern "C" {
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float * a, int lda,
                 const float * b, int ldb, float beta, float * c, int ldc);
void cblas_sgemv(int order, int trans, int m, int n, float alpha, const float * a, int lda, const float * x,
                 int incx, float beta, float * y, int incy);
// OpenBLAS only; resolved to null with another BLAS.
void openblas_set_num_threads(int n) __attribute__((weak));
char * openblas_get_config(void) __attribute__((weak));
}
constexpr int CBLAS_COL_MAJOR = 102;
constexpr int CBLAS_NO_TRANS  = 111;
constexpr int CBLAS_TRANS     = 112;
#endif

namespace {

using namespace loom_bench;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Options {
    int         n_threads = 2;
    double      min_time  = 1.0; // seconds of timed runs per case
    std::string only;            // "", "gemm" or "gemv"
    std::string type;            // "" or one weight type's name: only its cases
    bool        blas = true;
    // --gemv-shape KxM (repeatable): matrix-vector cases of these shapes, for
    // every weight type, instead of the 7B-class FFN shapes.
    std::vector<std::pair<int64_t, int64_t>> gemv_shapes;
};

// ---- timing ----

// Seconds per run of fn(): the best and the median over at least 5 runs and
// min_time seconds, after one warm-up run. The best run is the one least
// disturbed by anything else on the machine; both are printed.
struct Timing {
    double best;
    double median;
};

// warmup: untimed runs first (on the VM of bench/RESULTS.md the first
// product over each copy of the weights read at a third to a half of the
// rate of later ones, so the matrix-vector cases warm up over every copy).
Timing time_runs(double min_time, const std::function<void()> & fn, int warmup = 1) {
    for (int i = 0; i < warmup; ++i) {
        fn();
    }
    std::vector<double> ts;
    const auto          start = Clock::now();
    while (ts.size() < 5 || (seconds_since(start) < min_time && ts.size() < 1000)) {
        const auto t0 = Clock::now();
        fn();
        ts.push_back(seconds_since(t0));
    }
    std::sort(ts.begin(), ts.end());
    return {ts.front(), ts[ts.size() / 2]};
}

// Note [Triads around a case]
// On a shared machine the memory bandwidth a process gets moves by a factor
// of two within minutes, so a product timed now and a triad timed a minute
// earlier do not compare. Each matrix-vector case is therefore compared
// with triads run right before and right after it (best of
// AROUND_TRIAD_RUNS each, on arrays of 128 MiB as the limit's triad): its
// median rate over their mean. The triad is a custom op (ggml_custom_4d) of
// a graph of its own, so it runs on the backend's threads as the products
// do, with no other thread spinning beside it. (Pairing every single product
// with a triad just before it was tried: a triad right after a short Q4_0
// product ran at 85-106 GB/s where one after an F32 product ran at 75-80,
// so the pairs measured the neighbour more than the machine.)
constexpr size_t AROUND_TRIAD_MIB  = 128;
constexpr int    AROUND_TRIAD_RUNS = 3;

class BackendTriad {
  public:
    explicit BackendTriad(ggml_backend_t backend)
        : backend_(backend), n_(AROUND_TRIAD_MIB << 18), a_(n_), b_(n_), c_(n_) {
        for (size_t i = 0; i < n_; ++i) {
            a_.p[i] = 0.0f;
            b_.p[i] = 1.0f;
            c_.p[i] = 2.0f;
        }
        ggml_init_params p = {ggml_tensor_overhead() * 2 + ggml_graph_overhead(), nullptr, false};
        ctx_               = ggml_init(p);
        graph_             = ggml_new_graph(ctx_);
        ggml_build_forward_expand(graph_, ggml_custom_4d(ctx_, GGML_TYPE_F32, 1, 1, 1, 1, nullptr, 0, part,
                                                         GGML_N_TASKS_MAX, this));
    }
    ~BackendTriad() { ggml_free(ctx_); }
    BackendTriad(const BackendTriad &)             = delete;
    BackendTriad & operator=(const BackendTriad &) = delete;

    // GB/s: the best of AROUND_TRIAD_RUNS triads over the arrays.
    double run() {
        double best = 0.0;
        for (int r = 0; r < AROUND_TRIAD_RUNS; ++r) {
            const auto t0 = Clock::now();
            ggml_backend_graph_compute(backend_, graph_);
            best = std::max(best, 3.0 * double(n_) * sizeof(float) / seconds_since(t0) / 1e9);
        }
        return best;
    }

  private:
    static void part(ggml_tensor *, int ith, int nth, void * self) {
        auto &     t        = *static_cast<BackendTriad *>(self);
        const auto [lo, hi] = thread_part(t.n_, ith, nth);
        triad_part(t.a_.p, t.b_.p, t.c_.p, lo, hi, 0.5f);
    }

    ggml_backend_t backend_;
    size_t         n_;
    AlignedFloats  a_, b_, c_;
    ggml_context * ctx_   = nullptr;
    ggml_cgraph *  graph_ = nullptr;
};

// ---- loom cases ----

void fill_weights(ggml_tensor * t, std::mt19937 & rng) {
    const int64_t                         K = t->ne[0], M = t->ne[1];
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float>                    row(static_cast<size_t>(K));
    for (int64_t m = 0; m < M; ++m) {
        for (float & x : row) {
            x = d(rng);
        }
        char * dst = static_cast<char *>(t->data) + size_t(m) * t->nb[1];
        switch (t->type) {
            case GGML_TYPE_F32: std::memcpy(dst, row.data(), size_t(K) * sizeof(float)); break;
            case GGML_TYPE_F16: ggml_fp32_to_fp16_row(row.data(), reinterpret_cast<ggml_fp16_t *>(dst), K); break;
            case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
            case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
            case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS:
            case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S:
            case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32:
            case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0:
            case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0:
            case GGML_TYPE_COUNT: ggml_quantize_chunk(t->type, row.data(), dst, 0, 1, K, nullptr); break;
        }
    }
}

// Products of `copies` weight matrices (K x M) of type with an f32 b of N
// columns, one graph per copy, computed in turn on the CPU backend.
// The CPU device's CPU_REPACK buffer type, or nullptr.
ggml_backend_buffer_type_t repack_buffer_type() {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    auto               fn  = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
    for (ggml_backend_buffer_type_t * b = fn != nullptr ? fn(dev) : nullptr; b != nullptr && *b != nullptr; ++b) {
        if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) {
            return *b;
        }
    }
    return nullptr;
}

struct MulMatBench {
    ggml_context *             ctx = nullptr;
    ggml_context *             wctx = nullptr; // weights in a buffer of buft
    ggml_backend_buffer_t      wbuf = nullptr;
    std::vector<ggml_tensor *> weights;
    ggml_tensor *              b = nullptr;
    std::vector<ggml_cgraph *> graphs;

    // Weights in ggml's layout in host memory, or, with buft, in a buffer
    // of that type (written through ggml_backend_tensor_set).
    MulMatBench(ggml_type type, int64_t K, int64_t M, int64_t N, int copies,
                ggml_backend_buffer_type_t buft = nullptr) {
        const size_t   wbytes = ggml_row_size(type, K) * size_t(M);
        const size_t   mem    = size_t(copies) * (wbytes + size_t(M) * size_t(N) * 4 + 4096) +
                           size_t(K) * size_t(N) * 4 + ggml_graph_overhead() * size_t(copies) +
                           ggml_tensor_overhead() * size_t(3 * copies + 4) + (size_t(1) << 20);
        ggml_init_params p = {mem, nullptr, false};
        ctx                = ggml_init(p);
        if (ctx == nullptr) {
            std::fprintf(stderr, "loom-bench: cannot allocate %zu bytes\n", mem);
            std::exit(1);
        }
        std::mt19937 rng(1234);
        b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
        fill_weights(b, rng);
        if (buft != nullptr) {
            ggml_init_params wp = {ggml_tensor_overhead() * size_t(copies), nullptr, true};
            wctx                = ggml_init(wp);
            for (int i = 0; i < copies; ++i) {
                weights.push_back(ggml_new_tensor_2d(wctx, type, K, M));
            }
            wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
            if (wbuf == nullptr) {
                std::fprintf(stderr, "loom-bench: cannot allocate %zu bytes of %s\n", wbytes * size_t(copies),
                             ggml_backend_buft_name(buft));
                std::exit(1);
            }
            ggml_tensor * staging = ggml_new_tensor_2d(ctx, type, K, M);
            for (ggml_tensor * w : weights) {
                fill_weights(staging, rng);
                ggml_backend_tensor_set(w, staging->data, 0, ggml_nbytes(w));
            }
        }
        for (int i = 0; i < copies; ++i) {
            ggml_tensor * w = nullptr;
            if (buft != nullptr) {
                w = weights[size_t(i)];
            } else {
                w = ggml_new_tensor_2d(ctx, type, K, M);
                fill_weights(w, rng);
                weights.push_back(w);
            }
            ggml_cgraph * g = ggml_new_graph(ctx);
            ggml_build_forward_expand(g, ggml_mul_mat(ctx, w, b));
            graphs.push_back(g);
        }
    }
    ~MulMatBench() {
        ggml_backend_buffer_free(wbuf);
        if (wctx != nullptr) ggml_free(wctx);
        ggml_free(ctx);
    }
};

int copies_for(size_t bytes) {
    // At least 512 MiB of weights in turn: several times any last-level cache.
    const size_t want = size_t(512) << 20;
    return int(std::max<size_t>(2, (want + bytes - 1) / bytes));
}

struct Row {
    std::string  name;
    double       amount; // FLOP or bytes per run
    Timing       t;
    const char * unit;   // GFLOP/s or GB/s
    double       limit;  // same unit
    const char * limit_name;
    Timing       ref;    // BLAS timing, {0, 0} when none
    double       read_limit = 0; // GB/s of the read-only sum, for cases that only read
    double       around[2]  = {0, 0}; // matrix-vector cases: the triads before and after (GB/s)
};

// Rates from the best run, the median run's rate in parentheses.
void print_row(const Row & r) {
    const double best = r.amount / r.t.best / 1e9, med = r.amount / r.t.median / 1e9;
    std::printf("%-36s %7.1f (%7.1f) %-7s %5.1f%% of %-6s", r.name.c_str(), best, med, r.unit,
                100.0 * best / r.limit, r.limit_name);
    if (r.read_limit > 0.0) {
        std::printf(" %5.1f%% of read", 100.0 * best / r.read_limit);
    }
    if (r.around[0] > 0.0) {
        const bool gemv = std::string(r.unit) == "GB/s";
        std::printf("  median %5.1f%% of the %s around it (%.1f, %.1f)",
                    100.0 * med / (0.5 * (r.around[0] + r.around[1])), gemv ? "triads" : "FMA peaks", r.around[0],
                    r.around[1]);
    }
    if (r.ref.best > 0.0) {
        const double rb = r.amount / r.ref.best / 1e9, rm = r.amount / r.ref.median / 1e9;
        std::printf("  BLAS %7.1f (%7.1f)  loom/BLAS %.2f", rb, rm, best / rb);
    }
    std::printf("\n");
    std::fflush(stdout);
}

std::string cpu_name() {
    std::string name = "unknown CPU";
    if (FILE * f = std::fopen("/proc/cpuinfo", "r")) {
        char line[512];
        while (std::fgets(line, sizeof(line), f)) {
            if (std::strncmp(line, "model name", 10) == 0) {
                if (const char * c = std::strchr(line, ':')) {
                    name = c + 2;
                    name.erase(name.find_last_not_of(" \n") + 1);
                }
                break;
            }
        }
        std::fclose(f);
    }
    return name;
}

void usage() {
    std::fprintf(stderr, "usage: loom-bench [-t threads] [--min-time seconds] [--only gemm|gemv|limits] [--type TYPE] [--gemv-shape KxM ...] [--no-blas]\n"
                         "  TYPE: f32 (the gemm and gemv cases) or a weight type of the gemv cases (q4_0, q8_0, f16 by\n"
                         "  default; any other quantized type by name, as q4_K or q6_K)\n");
}

} // namespace

int main(int argc, char ** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-t" && i + 1 < argc) {
            o.n_threads = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--min-time" && i + 1 < argc) {
            o.min_time = std::atof(argv[++i]);
        } else if (a == "--type" && i + 1 < argc) {
            o.type = argv[++i];
        } else if (a == "--only" && i + 1 < argc) {
            o.only = argv[++i];
        } else if (a == "--no-blas") {
            o.blas = false;
        } else if (a == "--gemv-shape" && i + 1 < argc) {
            long long K = 0, M = 0;
            if (std::sscanf(argv[++i], "%lldx%lld", &K, &M) != 2 || K <= 0 || M <= 0 || K % 128 != 0) {
                std::fprintf(stderr, "loom-bench: --gemv-shape wants KxM with K a multiple of 128, got %s\n", argv[i]);
                return 2;
            }
            o.gemv_shapes.push_back({K, M});
        } else {
            usage();
            return a == "-h" || a == "--help" ? 0 : 2;
        }
    }
    ggml_type gemv_extra = GGML_TYPE_COUNT; // a weight type beside the four of the default cases
    if (!o.type.empty()) {
        ggml_type named = GGML_TYPE_COUNT;
        for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
            const char * n = ggml_type_name(ggml_type(t));
            if (ggml_blck_size(ggml_type(t)) > 0 && n != nullptr && o.type == n) {
                named = ggml_type(t);
            }
        }
        const bool plain = named == GGML_TYPE_F32 || named == GGML_TYPE_F16;
        if (named == GGML_TYPE_COUNT || (!plain && (!ggml_is_quantized(named) ||
                                                    ggml_quantize_requires_imatrix(named)))) {
            std::fprintf(stderr,
                         "loom-bench: --type %s: the matrix-vector cases take f32, f16 and the quantized types "
                         "whose rows quantize without an importance matrix\n",
                         o.type.c_str());
            return 2;
        }
        if (!plain && named != GGML_TYPE_Q4_0 && named != GGML_TYPE_Q8_0) {
            gemv_extra = named;
        }
    }
    if (!o.only.empty() && o.only != "gemm" && o.only != "gemv" && o.only != "limits") {
        std::fprintf(stderr, "loom-bench: --only %s: the case families are gemm and gemv (limits: no cases)\n",
                     o.only.c_str());
        return 2;
    }
    if (o.only == "gemm" && !o.type.empty() && o.type != "f32") {
        std::fprintf(stderr, "loom-bench: the gemm cases are f32 only; --type %s selects none\n", o.type.c_str());
        return 2;
    }
#if defined(__aarch64__)
    // NEON is the base architecture: the limit kernels run on any 64-bit Arm.
#else
    if (!ggml_cpu_has_avx2() || !ggml_cpu_has_fma()) {
        std::fprintf(stderr, "loom-bench: the limit kernels need AVX2 and FMA\n");
        return 1;
    }
#endif
#if defined(LOOM_BENCH_BLAS)
    const bool have_blas = o.blas;
    if (have_blas && openblas_set_num_threads != nullptr) {
        openblas_set_num_threads(o.n_threads);
    }
#else
    [[maybe_unused]] const bool have_blas = false;
#endif

    std::printf("loom-bench: %s, %d thread(s)\n", cpu_name().c_str(), o.n_threads);
    const char * kernels_env = std::getenv("LOOM_CPU_KERNELS");
    std::printf("loom kernels: %s\n", kernels_env != nullptr ? kernels_env : "best for this processor");
#if defined(LOOM_BENCH_BLAS)
    if (have_blas) {
        std::printf("reference: BLAS (%s)\n",
                    openblas_get_config != nullptr ? openblas_get_config() : "not OpenBLAS");
    }
#endif
    // The limits are measured before and after the cases and the higher
    // figure kept, so that a disturbance during one measurement does not
    // lower the limit the cases are compared with.
    const bool has512 = ggml_cpu_has_avx512();
    // The GEMM is compared with the peak of the instructions it runs on:
    // AVX-512 unless LOOM_CPU_KERNELS keeps a lesser table.
    const bool gemm512 = has512 && (kernels_env == nullptr || (std::strcmp(kernels_env, "avx2") != 0 &&
                                                               std::strcmp(kernels_env, "portable") != 0));
    Peak       peak   = fma_peak(o.n_threads, false);
    Peak       peak5  = has512 ? fma_peak(o.n_threads, true) : Peak{};
    Bandwidth  bw     = memory_bandwidth(o.n_threads);
    const auto keep_best = [](Peak & into, const Peak & p) {
        if (p.gflops > into.gflops) into = p;
    };
    std::vector<Row> rows;

    ggml_backend_t backend = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(backend, o.n_threads);

    if ((o.only.empty() || o.only == "gemm") && (o.type.empty() || o.type == "f32")) {
        struct G {
            int64_t M, N, K;
        };
        for (const G & g : {G{2048, 2048, 2048}, G{4096, 512, 4096}}) {
            MulMatBench  mb(GGML_TYPE_F32, g.K, g.M, g.N, 1);
            const double flop = 2.0 * double(g.M) * double(g.N) * double(g.K);
            // The peak of the GEMM's instructions right before and after the
            // case, as the triads beside the matrix-vector cases.
            const Peak   before = fma_peak(o.n_threads, gemm512);
            const Timing t      = time_runs(o.min_time, [&] { ggml_backend_graph_compute(backend, mb.graphs[0]); });
            const Peak   after  = fma_peak(o.n_threads, gemm512);
            keep_best(gemm512 ? peak5 : peak, before);
            keep_best(gemm512 ? peak5 : peak, after);
            Timing       ref{0.0, 0.0};
#if defined(LOOM_BENCH_BLAS)
            if (have_blas) {
                // dst[m + n M] = sum_k a[k + m K] b[k + n K]: column-major
                // C (M x N) = A^T B with A stored K x M and B K x N.
                std::vector<float> c(size_t(g.M * g.N));
                const auto *       A = static_cast<const float *>(mb.weights[0]->data);
                const auto *       B = static_cast<const float *>(mb.b->data);
                ref                  = time_runs(o.min_time, [&] {
                    cblas_sgemm(CBLAS_COL_MAJOR, CBLAS_TRANS, CBLAS_NO_TRANS, int(g.M), int(g.N), int(g.K), 1.0f, A,
                                int(g.K), B, int(g.K), 0.0f, c.data(), int(g.M));
                });
            }
#endif
            char name[96];
            std::snprintf(name, sizeof(name), "gemm f32 M=%lld N=%lld K=%lld", (long long) g.M, (long long) g.N,
                          (long long) g.K);
            rows.push_back({name, flop, t, "GFLOP/s", 0.0, "FMA", ref, 0.0, {before.gflops, after.gflops}});
            std::fprintf(stderr, "%s done\n", name);
        }
    }

    if (o.only.empty() || o.only == "gemv") {
        struct V {
            ggml_type type;
            int64_t   K, M;
        };
        std::vector<V> cases = {
            {GGML_TYPE_Q4_0, 4096, 14336}, {GGML_TYPE_Q4_0, 14336, 4096}, {GGML_TYPE_Q8_0, 4096, 14336},
            {GGML_TYPE_Q8_0, 14336, 4096}, {GGML_TYPE_F16, 4096, 14336},  {GGML_TYPE_F16, 14336, 4096},
            {GGML_TYPE_F32, 4096, 14336},  {GGML_TYPE_F32, 14336, 4096},
        };
        if (gemv_extra != GGML_TYPE_COUNT) {
            cases = {{gemv_extra, 4096, 14336}, {gemv_extra, 14336, 4096}};
        }
        if (!o.gemv_shapes.empty()) {
            cases.clear();
            for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_F16, GGML_TYPE_F32, gemv_extra}) {
                if (t == GGML_TYPE_COUNT) {
                    continue;
                }
                for (const auto & [K, M] : o.gemv_shapes) {
                    if (K % ggml_blck_size(t) == 0) {
                        cases.push_back({t, K, M});
                    }
                }
            }
        }
        // Each case in ggml's layout, then, where the CPU offers it for the
        // type, in the CPU_REPACK buffer (Note [Repacked weights]).
        ggml_backend_buffer_type_t repack = repack_buffer_type();
        BackendTriad               triad(backend);
        std::vector<std::pair<V, bool>> runs;
        for (const V & v : cases) {
            runs.push_back({v, false});
            if (repack != nullptr && (v.type == GGML_TYPE_Q4_0 || v.type == GGML_TYPE_Q8_0 || v.type == GGML_TYPE_F16)) {
                runs.push_back({v, true});
            }
        }
        for (const auto & [v, repacked] : runs) {
            if (!o.type.empty() && o.type != ggml_type_name(v.type)) {
                continue;
            }
            const size_t wbytes = ggml_row_size(v.type, v.K) * size_t(v.M);
            const int    copies = copies_for(wbytes);
            MulMatBench  mb(v.type, v.K, v.M, 1, copies, repacked ? repack : nullptr);
            size_t       next = 0;
            const double before = triad.run();
            const Timing t      = time_runs(
                o.min_time,
                [&] {
                    ggml_backend_graph_compute(backend, mb.graphs[next]);
                    next = (next + 1) % mb.graphs.size();
                },
                copies);
            const double after = triad.run();
            Timing       ref{0.0, 0.0};
#if defined(LOOM_BENCH_BLAS)
            if (have_blas && v.type == GGML_TYPE_F32) {
                std::vector<float> y(size_t(v.M));
                const auto *       x  = static_cast<const float *>(mb.b->data);
                size_t             nb = 0;
                const auto         one = [&] {
                    const auto * A = static_cast<const float *>(mb.weights[nb]->data);
                    cblas_sgemv(CBLAS_COL_MAJOR, CBLAS_TRANS, int(v.K), int(v.M), 1.0f, A, int(v.K), x, 1, 0.0f,
                                y.data(), 1);
                    nb = (nb + 1) % mb.weights.size();
                };
                ref = time_runs(o.min_time, one, copies);
            }
#endif
            char name[96];
            std::snprintf(name, sizeof(name), "gemv %s%s K=%lld M=%lld (%.0f MB)", ggml_type_name(v.type),
                          repacked ? " repacked" : "", (long long) v.K, (long long) v.M, double(wbytes) / 1e6);
            rows.push_back({name, double(wbytes), t, "GB/s", 0.0, "triad", ref, 0.0, {before, after}});
            std::fprintf(stderr, "%s done\n", name);
        }
    }

    ggml_backend_free(backend);

    keep_best(peak, fma_peak(o.n_threads, false));
    if (has512) keep_best(peak5, fma_peak(o.n_threads, true));
    const Bandwidth b2 = memory_bandwidth(o.n_threads);
    bw.triad           = std::max(bw.triad, b2.triad);
    if (b2.read > bw.read) {
        bw.read         = b2.read;
        bw.read_streams = b2.read_streams;
    }
    const auto print_peak = [](const char * what, const Peak & p) {
        std::printf("%s %7.1f GFLOP/s (best kernel: %d chains per thread; ", what, p.gflops, p.chains);
        if (p.flop_per_cycle > 0.0) {
            std::printf("%.1f FLOP per cycle per thread at %.2f GHz)", p.flop_per_cycle, p.ghz);
        } else {
            std::printf("cycles not readable here)");
        }
    };
#if defined(__aarch64__)
    print_peak("FMA peak (NEON, 4 lanes):    ", peak);
#else
    print_peak("FMA peak (AVX2, 8 lanes):    ", peak);
#endif
    std::printf("\n");
    if (has512) {
        print_peak("FMA peak (AVX-512, 16 lanes):", peak5);
        std::printf("\n  loom's AVX-512 kernels: the F32 GEMM, the Q4_0, Q8_0 and BF16 products\n");
    }
    std::printf("threads pinned, one per processor; chain counts tried:");
    for (int c : kChainCounts) std::printf(" %d", c);
    std::printf("\nmemory bandwidth, triad:      %7.1f GB/s (read-only sum: %.1f GB/s, best with %d stream(s) per thread)\n\n",
                bw.triad, bw.read, bw.read_streams);
    if (!rows.empty()) {
        std::printf("%-36s %7s (%7s)\n", "case", "best", "median");
    }
    for (Row & r : rows) {
        const bool gemv = std::string(r.limit_name) != "FMA";
        if (!gemv && gemm512) {
            r.limit_name = "FMA512";
        }
        r.limit         = gemv ? bw.triad : gemm512 ? peak5.gflops : peak.gflops;
        r.read_limit    = gemv ? bw.read : 0.0; // a matrix-vector product only reads its weights
        print_row(r);
    }
    return 0;
}
