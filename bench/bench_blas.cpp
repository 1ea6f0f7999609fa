// Matrix products on the CPU backend and on the BLAS backend, measured in
// the same run on the same tensors (both read the CPU's buffers), at
// batch sizes from 1 to 512 columns. The point where BLAS becomes faster is
// the threshold of the BLAS device's supports_op (src/backends/blas/policy.h).
//
//   bench_blas [--quick] [--threads N] [--min-time SECONDS] [--only TEXT] [--batches N,N,...]
//
// --only keeps the cases whose label ("mul_mat q4_0 4096x4096", "kq f16 Nx128",
// "out_prod f32 1024x1024") contains TEXT.
//
// Shapes:
//   mul_mat  W [K, M] x X [K, N]         weights of type F32, F16, BF16, Q8_0, Q4_0
//   kq       K [128, N, 8] x Q [128, N, 32] attention scores of a prompt (F32, F16 K)
//   out_prod A [M, K] x B [N, K]         F32, as in a weight gradient
// Each line: best time of several runs on each backend, their ratio, the
// rate in GFLOP/s, and the largest difference between the two results
// relative to the largest element (a check that both computed the same).

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-blas.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"

namespace {

struct Options {
    bool                 quick = false;
    std::string          only; // run the cases whose "product type MxK" label contains this
    std::vector<int64_t> batches;
    int    threads  = 0; // 0: every hardware thread
    double min_time = 0.25;
};

struct Case {
    std::string                                           family;
    ggml_type                                             type;
    int64_t                                               m, k; // per-matrix sizes (kq: k = head size)
    std::function<ggml_tensor *(ggml_context *, int64_t)> build;
    double                                                flops_per_n; // multiply by n (and n again for kq)
    bool                                                  square_in_n = false;
};

void fill(ggml_tensor * t, std::mt19937 & rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int64_t                         n = ggml_nelements(t);
    std::vector<float>                    v(static_cast<size_t>(n));
    for (float & x : v) x = u(rng);
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    switch (t->type) {
        case GGML_TYPE_F32: std::memcpy(bytes.data(), v.data(), bytes.size()); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(v.data(), reinterpret_cast<ggml_fp16_t *>(bytes.data()), n); break;
        case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(v.data(), reinterpret_cast<ggml_bf16_t *>(bytes.data()), n); break;
        default: ggml_quantize_chunk(t->type, v.data(), bytes.data(), 0, ggml_nrows(t), t->ne[0], nullptr); break;
    }
    ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
}

// Best wall times of graph on the two backends. The backends take turns so
// that both see the same load on a shared machine; each turn runs the graph
// twice and times the second run, so that each backend is measured with its
// threads awake, as in a run of consecutive products (waking threads after
// the other backend's turn is a cost of switching, which the forward-pass
// measurement with loom-run includes). At least 3 and at most 50 turns each,
// until min_time seconds of timed runs.
void best_seconds(ggml_backend_t a, ggml_backend_t b, ggml_cgraph * g, double min_time, double * best_a,
                  double * best_b, std::vector<float> * out_a, const ggml_tensor * out) {
    using clock = std::chrono::steady_clock;
    auto timed  = [g](ggml_backend_t backend) {
        if (ggml_backend_graph_compute(backend, g) != GGML_STATUS_SUCCESS) {
            std::fprintf(stderr, "bench_blas: %s failed\n", ggml_backend_name(backend));
            std::exit(1);
        }
        const auto t0 = clock::now();
        ggml_backend_graph_compute(backend, g);
        return std::chrono::duration<double>(clock::now() - t0).count();
    };
    timed(a);
    out_a->resize(size_t(ggml_nelements(out)));
    ggml_backend_tensor_get(out, out_a->data(), 0, ggml_nbytes(out));
    timed(b);
    *best_a = *best_b = 1e30;
    double total      = 0;
    for (int runs = 0; runs < 3 || (total < min_time && runs < 50); ++runs) {
        const double ta = timed(a);
        const double tb = timed(b);
        *best_a         = std::min(*best_a, ta);
        *best_b         = std::min(*best_b, tb);
        total += ta + tb;
    }
}

std::vector<float> read(const ggml_tensor * t) {
    std::vector<float> v(size_t(ggml_nelements(t)));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}

struct Row {
    int64_t n;
    double  cpu_s, blas_s, diff;
};

Row measure(const Case & c, int64_t n, ggml_backend_t cpu, ggml_backend_t blas, const Options & o) {
    ggml_init_params p = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context_ptr ctx(ggml_init(p));
    ggml_tensor *    out = c.build(ctx.get(), n);
    ggml_cgraph *    g   = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, out);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), ggml_backend_cpu_buffer_type()));
    if (!buf) {
        std::fprintf(stderr, "bench_blas: out of memory\n");
        std::exit(1);
    }
    std::mt19937 rng(unsigned(n * 7919 + c.m));
    for (int i = 0; i < GGML_MAX_SRC && out->src[i] != nullptr; ++i) fill(out->src[i], rng);

    Row                r{n, 0, 0, 0};
    std::vector<float> ref;
    best_seconds(cpu, blas, g, o.min_time, &r.cpu_s, &r.blas_s, &ref, out);
    const std::vector<float> got = read(out); // the last run was BLAS's
    double                   scale = 0, diff = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        scale = std::max(scale, double(std::fabs(ref[i])));
        diff  = std::max(diff, double(std::fabs(ref[i] - got[i])));
    }
    r.diff = scale > 0 ? diff / scale : diff;
    return r;
}

std::vector<Case> cases(const Options & o) {
    std::vector<Case> out;
    const ggml_type   weight_types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
    std::vector<std::pair<int64_t, int64_t>> sizes = {{4096, 4096}, {1024, 1024}, {256, 256}, {64, 64}};
    if (o.quick) sizes = {{1024, 1024}, {64, 64}};
    for (const auto & [m, k] : sizes) {
        for (ggml_type t : weight_types) {
            out.push_back({"mul_mat", t, m, k,
                           [t, m = m, k = k](ggml_context * c, int64_t n) {
                               return ggml_mul_mat(c, ggml_new_tensor_2d(c, t, k, m),
                                                   ggml_new_tensor_2d(c, GGML_TYPE_F32, k, n));
                           },
                           2.0 * double(m) * double(k)});
        }
    }
    // Attention scores of an n-token prompt: 32 query heads over 8 key heads of 128.
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        out.push_back({"kq", t, 0, 128,
                       [t](ggml_context * c, int64_t n) {
                           return ggml_mul_mat(c, ggml_new_tensor_3d(c, t, 128, n, 8),
                                               ggml_new_tensor_3d(c, GGML_TYPE_F32, 128, n, 32));
                       },
                       2.0 * 128 * 32, true});
    }
    for (const auto & [m, k] : sizes) {
        if (m > 1024) continue;
        out.push_back({"out_prod", GGML_TYPE_F32, m, k,
                       [m = m, k = k](ggml_context * c, int64_t n) {
                           return ggml_out_prod(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, m, k),
                                                ggml_new_tensor_2d(c, GGML_TYPE_F32, n, k));
                       },
                       2.0 * double(m) * double(k)});
    }
    return out;
}

} // namespace

int main(int argc, char ** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0) {
            o.quick = true;
        } else if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            o.threads = std::atoi(argv[++i]);
        } else if (std::strcmp(argv[i], "--min-time") == 0 && i + 1 < argc) {
            o.min_time = std::atof(argv[++i]);
        } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            o.only = argv[++i];
        } else if (std::strcmp(argv[i], "--batches") == 0 && i + 1 < argc) {
            for (char * p = argv[++i]; *p != '\0';) {
                o.batches.push_back(std::strtoll(p, &p, 10));
                if (*p == ',') ++p;
                else if (*p != '\0') { std::fprintf(stderr, "bench_blas: bad --batches\n"); return 2; }
            }
        } else {
            std::fprintf(stderr,
                         "usage: %s [--quick] [--threads N] [--min-time SECONDS] [--only TEXT] [--batches N,N,...]\n",
                         argv[0]);
            return 2;
        }
    }
    if (o.threads <= 0) {
        o.threads = int(std::max(1u, std::thread::hardware_concurrency()));
    }

    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_ptr blas(ggml_backend_blas_init());
    if (!cpu || !blas) {
        std::fprintf(stderr, "bench_blas: cannot create the backends\n");
        return 1;
    }
    ggml_backend_cpu_set_n_threads(cpu.get(), o.threads);
    ggml_backend_blas_set_n_threads(blas.get(), o.threads);
    std::printf("threads: %d, BLAS device: %s\n\n", o.threads,
                ggml_backend_dev_description(ggml_backend_get_device(blas.get())));

    std::vector<int64_t> batches = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512};
    if (o.quick) batches = {1, 8, 32, 128};
    if (!o.batches.empty()) batches = o.batches;

    std::printf("| product | type | M | K | N | CPU ms | BLAS ms | CPU/BLAS | CPU GFLOP/s | BLAS GFLOP/s | diff |\n");
    std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    std::vector<std::string> summary;
    for (const Case & c : cases(o)) {
        const std::string label = c.family + " " + ggml_type_name(c.type) + " " +
                                  (c.square_in_n ? std::string("N") : std::to_string(c.m)) + "x" + std::to_string(c.k);
        if (!o.only.empty() && label.find(o.only) == std::string::npos) continue;
        int64_t crossover = -1; // smallest n from which BLAS won at every larger n
        for (int64_t n : batches) {
            const Row    r     = measure(c, n, cpu.get(), blas.get(), o);
            const double flops = c.flops_per_n * double(n) * (c.square_in_n ? double(n) : 1.0);
            std::printf("| %s | %s | %lld | %lld | %lld | %.3f | %.3f | %.2f | %.1f | %.1f | %.1e |\n",
                        c.family.c_str(), ggml_type_name(c.type), (long long) (c.square_in_n ? n : c.m),
                        (long long) c.k, (long long) n, r.cpu_s * 1e3, r.blas_s * 1e3, r.cpu_s / r.blas_s,
                        flops / r.cpu_s * 1e-9, flops / r.blas_s * 1e-9, r.diff);
            std::fflush(stdout);
            if (r.blas_s < r.cpu_s) {
                if (crossover < 0) crossover = n;
            } else {
                crossover = -1;
            }
        }
        char line[160];
        std::snprintf(line, sizeof(line), "%s %s M=%s K=%lld: %s", c.family.c_str(), ggml_type_name(c.type),
                      c.square_in_n ? "N" : std::to_string(c.m).c_str(), (long long) c.k,
                      crossover < 0 ? "BLAS never faster through the largest N"
                                    : ("BLAS faster from N = " + std::to_string(crossover)).c_str());
        summary.emplace_back(line);
    }
    std::printf("\ncrossover (smallest N from which BLAS was faster at every larger N measured):\n");
    for (const std::string & s : summary) std::printf("  %s\n", s.c_str());
    return 0;
}
