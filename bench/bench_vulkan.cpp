// Matrix products on the first Vulkan device and on the CPU backend, in the
// same run on the same values: weights [K, M] of type F32, F16, Q8_0, Q4_0
// times activations [K, N] (F32) at a few batch sizes N.
//
//   bench_vulkan [--size M] [--batches N,N,...] [--min-time SECONDS] [--threads N]
//
// Each line: the best time of repeated graph computations on each backend
// (the Vulkan time includes submitting and waiting, not uploads), GFLOP/s,
// and the largest difference between the results relative to the largest
// element. On a CPU Vulkan device such as lavapipe
// (GGML_VK_VISIBLE_DEVICES=0) the numbers only give a scale.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "ggml-vulkan.h"

namespace {

struct Options {
    int64_t              size     = 1024;
    std::vector<int64_t> batches  = {1, 8, 32, 128};
    double               min_time = 0.3;
    int                  threads  = 2;
};

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best time of one graph computation on backend, repeated for min_time.
double best_time(ggml_backend_t backend, ggml_cgraph * gf, double min_time) {
    double best = 1e30;
    double start = now();
    int    runs  = 0;
    while (runs < 3 || now() - start < min_time) {
        const double t0 = now();
        if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS) {
            std::fprintf(stderr, "bench_vulkan: %s failed to compute\n", ggml_backend_name(backend));
            std::exit(1);
        }
        best = std::min(best, now() - t0);
        ++runs;
    }
    return best;
}

struct Result {
    double             seconds;
    std::vector<float> out;
};

Result run(ggml_backend_t backend, ggml_type type, int64_t M, int64_t N, const std::vector<float> & w,
           const std::vector<float> & x, double min_time) {
    ggml_init_params p = {8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context_ptr ctx(ggml_init(p));
    ggml_tensor *    W  = ggml_new_tensor_2d(ctx.get(), type, M, M);
    ggml_tensor *    X  = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, M, N);
    ggml_tensor *    Y  = ggml_mul_mat(ctx.get(), W, X);
    ggml_cgraph *    gf = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(gf, Y);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend));
    if (!buf) {
        std::fprintf(stderr, "bench_vulkan: cannot allocate on %s\n", ggml_backend_name(backend));
        std::exit(1);
    }
    std::vector<uint8_t> bytes(ggml_nbytes(W));
    switch (type) {
        case GGML_TYPE_F32: std::memcpy(bytes.data(), w.data(), bytes.size()); break;
        case GGML_TYPE_F16:
            ggml_fp32_to_fp16_row(w.data(), reinterpret_cast<ggml_fp16_t *>(bytes.data()), int64_t(w.size()));
            break;
        default: ggml_quantize_chunk(type, w.data(), bytes.data(), 0, M, M, nullptr); break;
    }
    ggml_backend_tensor_set(W, bytes.data(), 0, bytes.size());
    ggml_backend_tensor_set(X, x.data(), 0, ggml_nbytes(X));
    Result r;
    r.seconds = best_time(backend, gf, min_time);
    r.out.resize(size_t(ggml_nelements(Y)));
    ggml_backend_tensor_get(Y, r.out.data(), 0, ggml_nbytes(Y));
    return r;
}

std::vector<int64_t> parse_list(const char * s) {
    std::vector<int64_t> v;
    for (const char * p = s; *p != '\0';) {
        char * end;
        v.push_back(std::strtoll(p, &end, 10));
        p = *end == ',' ? end + 1 : end;
        if (end == p && *p != '\0') break;
    }
    return v;
}

} // namespace

int main(int argc, char ** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--size" && i + 1 < argc) {
            o.size = std::atoll(argv[++i]);
        } else if (a == "--batches" && i + 1 < argc) {
            o.batches = parse_list(argv[++i]);
        } else if (a == "--min-time" && i + 1 < argc) {
            o.min_time = std::atof(argv[++i]);
        } else if (a == "--threads" && i + 1 < argc) {
            o.threads = std::atoi(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: bench_vulkan [--size M] [--batches N,N,...] [--min-time S] [--threads N]\n");
            return 2;
        }
    }
    if (ggml_backend_vk_get_device_count() == 0) {
        std::printf("no Vulkan device (GGML_VK_VISIBLE_DEVICES=<index> opts in to CPU devices such as lavapipe)\n");
        return 0;
    }
    char desc[256];
    ggml_backend_vk_get_device_description(0, desc, sizeof(desc));
    std::printf("Vulkan0: %s\nCPU backend: %d threads\n\n", desc, o.threads);
    ggml_backend_ptr vk(ggml_backend_vk_init(0));
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    if (!vk || !cpu) {
        return 1;
    }
    ggml_backend_cpu_set_n_threads(cpu.get(), o.threads);

    const int64_t                         M = o.size;
    std::mt19937                          rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float>                    w(size_t(M * M));
    for (float & v : w) v = u(rng);

    std::printf("%-8s %6s %6s %12s %12s %10s %10s %9s\n", "weights", "M=K", "N", "Vulkan ms", "CPU ms", "Vk GF/s",
                "CPU GF/s", "max diff");
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        for (int64_t N : o.batches) {
            std::vector<float> x(size_t(M * N));
            for (float & v : x) v = u(rng);
            const Result a = run(vk.get(), type, M, N, w, x, o.min_time);
            const Result b = run(cpu.get(), type, M, N, w, x, o.min_time);
            double       diff = 0, top = 0;
            for (size_t i = 0; i < a.out.size(); ++i) {
                diff = std::max(diff, double(std::fabs(a.out[i] - b.out[i])));
                top  = std::max(top, double(std::fabs(b.out[i])));
            }
            const double flops = 2.0 * double(M) * double(M) * double(N);
            std::printf("%-8s %6lld %6lld %12.3f %12.3f %10.2f %10.2f %9.2e\n", ggml_type_name(type), (long long) M,
                        (long long) N, a.seconds * 1e3, b.seconds * 1e3, flops / a.seconds * 1e-9,
                        flops / b.seconds * 1e-9, top > 0 ? diff / top : diff);
        }
    }
    return 0;
}
