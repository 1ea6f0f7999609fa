// A fixed training run on the public API: a 2-16-3 MLP with a relu hidden
// layer classifying three interleaved spirals, 240 points generated from a fixed recurrence, AdamW (alpha 0.01),
// cross-entropy loss, batches of 24, no shuffling, 20 epochs on the CPU
// backend with one thread. Prints one line per epoch: the epoch and the
// training loss with 9 significant digits.
//
// Built against ggml 0.25.1 it wrote tests/data/train/mlp_losses.txt (see the
// README there); built against loom, CTest compares its output with that file.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-opt.h"
#include "ggml.h"

namespace {

constexpr int64_t kPoints = 240, kClasses = 3, kHidden = 16, kBatch = 24, kEpochs = 20;

// Uniform in [-1, 1) from a 64-bit linear congruential generator.
struct Lcg {
    uint64_t s = 0x2545F4914F6CDD1DULL;
    float    next() {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        return float((s >> 40) & 0xFFFFFF) / float(1 << 23) - 1.0f;
    }
};

ggml_opt_optimizer_params params(void *) {
    ggml_opt_optimizer_params p = ggml_opt_get_default_optimizer_params(nullptr);
    p.adamw.alpha               = 0.01f;
    return p;
}

} // namespace

int main() {
    Lcg rng;
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 1);
    ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);

    ggml_init_params ps = {16 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *   cs = ggml_init(ps);
    ggml_tensor *    x  = ggml_new_tensor_2d(cs, GGML_TYPE_F32, 2, kBatch);
    ggml_tensor *    w1 = ggml_new_tensor_2d(cs, GGML_TYPE_F32, 2, kHidden);
    ggml_tensor *    b1 = ggml_new_tensor_1d(cs, GGML_TYPE_F32, kHidden);
    ggml_tensor *    w2 = ggml_new_tensor_2d(cs, GGML_TYPE_F32, kHidden, kClasses);
    ggml_tensor *    b2 = ggml_new_tensor_1d(cs, GGML_TYPE_F32, kClasses);
    for (ggml_tensor * t : {w1, b1, w2, b2}) ggml_set_param(t);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(cs, cpu);
    for (ggml_tensor * t : {w1, b1, w2, b2}) {
        std::vector<float> v(size_t(ggml_nelements(t)));
        for (float & e : v) e = 0.5f * rng.next();
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    }

    ggml_init_params pc = {GGML_DEFAULT_GRAPH_SIZE * ggml_tensor_overhead() + 3 * ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, true), nullptr, true};
    ggml_context *   cc = ggml_init(pc);
    ggml_tensor *    h  = ggml_relu(cc, ggml_add(cc, ggml_mul_mat(cc, w1, x), b1));
    ggml_tensor *    y  = ggml_add(cc, ggml_mul_mat(cc, w2, h), b2);

    ggml_opt_dataset_t data = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 2, kClasses, kPoints, 1);
    float *            xs   = ggml_get_data_f32(ggml_opt_dataset_data(data));
    float *            ls   = ggml_get_data_f32(ggml_opt_dataset_labels(data));
    for (int64_t i = 0; i < kPoints; ++i) {
        const int64_t c = i % kClasses;
        const float   r = float(i / kClasses) / float(kPoints / kClasses);
        const float   a = 4.0f * r + 2.0943951f * float(c) + 0.2f * rng.next();
        xs[2 * i]       = r * std::cos(a);
        xs[2 * i + 1]   = r * std::sin(a);
        for (int64_t k = 0; k < kClasses; ++k) ls[i * kClasses + k] = k == c ? 1.0f : 0.0f;
    }

    ggml_opt_params op = ggml_opt_default_params(sched, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.ctx_compute     = cc;
    op.inputs          = x;
    op.outputs         = y;
    op.get_opt_pars    = params;
    ggml_opt_context_t opt = ggml_opt_init(op);
    ggml_opt_result_t  res = ggml_opt_result_init();
    for (int64_t e = 1; e <= kEpochs; ++e) {
        ggml_opt_result_reset(res);
        ggml_opt_epoch(opt, data, res, nullptr, -1, nullptr, nullptr);
        double loss, unc, acc, acc_unc;
        ggml_opt_result_loss(res, &loss, &unc);
        ggml_opt_result_accuracy(res, &acc, &acc_unc);
        std::printf("%lld %.9g %.6f\n", (long long) e, loss, acc);
    }
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
