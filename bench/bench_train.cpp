// One training epoch of a fixed MLP on the CPU backend, timed: written
// against the public ggml API only, so that bench_train.sh builds it against
// loom and against ggml 0.25.1 and compares the two in one run.
//
//   bench_train [--inputs N] [--hidden N] [--classes N] [--samples N]
//               [--batch N] [--threads N] [--reps N]
//
// Defaults: an MLP 64-256-256-10 (ReLU), 16384 generated samples, batches
// of 64, AdamW, 2 threads, 5 timed epochs after one untimed. Prints one line
// per timed epoch ("epoch_ms <ms> loss <loss>") and the median.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-opt.h"
#include "ggml.h"

namespace {

struct Lcg {
    uint64_t s = 0x853C49E6748FEA9BULL;
    float    next() { // uniform in [-1, 1)
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        return float((s >> 40) & 0xFFFFFF) / float(1 << 23) - 1.0f;
    }
};

ggml_opt_optimizer_params adamw(void *) {
    ggml_opt_optimizer_params p = ggml_opt_get_default_optimizer_params(nullptr);
    p.adamw.alpha               = 1e-3f;
    return p;
}

} // namespace

int main(int argc, char ** argv) {
    int64_t n_in = 64, n_hidden = 256, n_classes = 10, n_samples = 16384, n_batch = 64, n_threads = 2, n_reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char * k = argv[i];
        const long long v = std::atoll(argv[i + 1]);
        int64_t *       dst = !std::strcmp(k, "--inputs")    ? &n_in
                            : !std::strcmp(k, "--hidden")    ? &n_hidden
                            : !std::strcmp(k, "--classes")   ? &n_classes
                            : !std::strcmp(k, "--samples")   ? &n_samples
                            : !std::strcmp(k, "--batch")     ? &n_batch
                            : !std::strcmp(k, "--threads")   ? &n_threads
                            : !std::strcmp(k, "--reps")      ? &n_reps
                                                             : nullptr;
        if (dst == nullptr || v < 1) {
            std::fprintf(stderr, "bench_train: bad option %s %s\n", k, argv[i + 1]);
            return 2;
        }
        *dst = v;
    }
    n_samples -= n_samples % n_batch;
    if (n_samples == 0) {
        std::fprintf(stderr, "bench_train: fewer samples than a batch\n");
        return 2;
    }

    Lcg            rng;
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, int(n_threads));
    ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);

    ggml_init_params ps = {16 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *   cs = ggml_init(ps);
    ggml_tensor *    x  = ggml_new_tensor_2d(cs, GGML_TYPE_F32, n_in, n_batch);
    ggml_tensor *    w1 = ggml_new_tensor_2d(cs, GGML_TYPE_F32, n_in, n_hidden);
    ggml_tensor *    b1 = ggml_new_tensor_1d(cs, GGML_TYPE_F32, n_hidden);
    ggml_tensor *    w2 = ggml_new_tensor_2d(cs, GGML_TYPE_F32, n_hidden, n_hidden);
    ggml_tensor *    b2 = ggml_new_tensor_1d(cs, GGML_TYPE_F32, n_hidden);
    ggml_tensor *    w3 = ggml_new_tensor_2d(cs, GGML_TYPE_F32, n_hidden, n_classes);
    ggml_tensor *    b3 = ggml_new_tensor_1d(cs, GGML_TYPE_F32, n_classes);
    for (ggml_tensor * t : {w1, b1, w2, b2, w3, b3}) {
        ggml_set_param(t);
    }
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(cs, cpu);
    for (ggml_tensor * t : {w1, b1, w2, b2, w3, b3}) {
        std::vector<float> v(size_t(ggml_nelements(t)));
        const float        scale = t->ne[1] > 1 ? 1.0f / float(t->ne[0]) : 0.0f;
        for (float & e : v) {
            e = 3.0f * scale * rng.next();
        }
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    }

    ggml_init_params pc = {GGML_DEFAULT_GRAPH_SIZE * ggml_tensor_overhead() +
                               3 * ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, true),
                           nullptr, true};
    ggml_context *   cc = ggml_init(pc);
    ggml_tensor *    h1 = ggml_relu(cc, ggml_add(cc, ggml_mul_mat(cc, w1, x), b1));
    ggml_tensor *    h2 = ggml_relu(cc, ggml_add(cc, ggml_mul_mat(cc, w2, h1), b2));
    ggml_tensor *    y  = ggml_add(cc, ggml_mul_mat(cc, w3, h2), b3);

    // Labels: the largest of n_classes fixed random projections of the input.
    ggml_opt_dataset_t data = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, n_in, n_classes, n_samples, 1);
    float *            xs   = ggml_get_data_f32(ggml_opt_dataset_data(data));
    float *            ls   = ggml_get_data_f32(ggml_opt_dataset_labels(data));
    std::vector<float> proj(size_t(n_in * n_classes));
    for (float & e : proj) {
        e = rng.next();
    }
    for (int64_t i = 0; i < n_samples; ++i) {
        for (int64_t k = 0; k < n_in; ++k) {
            xs[i * n_in + k] = rng.next();
        }
        int64_t best = 0;
        float   top  = -1e30f;
        for (int64_t c = 0; c < n_classes; ++c) {
            float s = 0.0f;
            for (int64_t k = 0; k < n_in; ++k) {
                s += proj[size_t(c * n_in + k)] * xs[i * n_in + k];
            }
            if (s > top) {
                top  = s;
                best = c;
            }
        }
        for (int64_t c = 0; c < n_classes; ++c) {
            ls[i * n_classes + c] = c == best ? 1.0f : 0.0f;
        }
    }

    ggml_opt_params op = ggml_opt_default_params(sched, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.ctx_compute     = cc;
    op.inputs          = x;
    op.outputs         = y;
    op.get_opt_pars    = adamw;
    ggml_opt_context_t opt = ggml_opt_init(op);
    ggml_opt_result_t  res = ggml_opt_result_init();

    std::printf("# MLP %lld-%lld-%lld-%lld, %lld samples, batch %lld, AdamW, %lld threads\n", (long long) n_in,
                (long long) n_hidden, (long long) n_hidden, (long long) n_classes, (long long) n_samples,
                (long long) n_batch, (long long) n_threads);
    std::vector<double> ms;
    for (int64_t e = 0; e <= n_reps; ++e) {
        ggml_opt_result_reset(res);
        const auto t0 = std::chrono::steady_clock::now();
        ggml_opt_epoch(opt, data, res, nullptr, -1, nullptr, nullptr);
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        double       loss, unc;
        ggml_opt_result_loss(res, &loss, &unc);
        if (e == 0) {
            std::printf("# untimed first epoch: loss %.6f\n", loss);
            continue;
        }
        ms.push_back(t);
        std::printf("epoch_ms %.3f loss %.6f\n", t, loss);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("median_epoch_ms %.3f\n", ms[ms.size() / 2]);

    ggml_opt_result_free(res);
    ggml_opt_free(opt);
    ggml_opt_dataset_free(data);
    ggml_free(cc);
    ggml_backend_buffer_free(buf);
    ggml_free(cs);
    ggml_backend_sched_free(sched);
    ggml_backend_free(cpu);
    return 0;
}
