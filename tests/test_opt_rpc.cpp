// Training on a remote device: the optimizer steps computed by an RPC
// server, a ggml-opt run whose weights live on the server giving the losses
// of the same run on the CPU, and the scheduler running each optimizer step
// on the device that holds its parameter.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-opt.h"
#include "ggml-rpc.h"
#include "ggml.h"

namespace {

class OptRpc : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        loom_rpc_server_params p{};
        p.endpoint  = "127.0.0.1:0";
        p.token     = "opt-rpc-token";
        p.n_threads = 2;
        server_     = loom_rpc_server_start(&p);
        ASSERT_NE(server_, nullptr);
        loom_rpc_set_token(p.token);
        loom_rpc_set_timeouts(10000, 60000);
        endpoint_ = "127.0.0.1:" + std::to_string(loom_rpc_server_port(server_));
        ASSERT_NE(ggml_backend_rpc_add_server(endpoint_.c_str()), nullptr);
    }
    static void TearDownTestSuite() {
        // The registered devices outlive the suite; the server stays up with them.
    }

    void SetUp() override {
        rpc_ = ggml_backend_rpc_init(endpoint_.c_str(), 0);
        ASSERT_NE(rpc_, nullptr);
        cpu_ = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu_, 2);
    }
    void TearDown() override {
        ggml_backend_free(rpc_);
        ggml_backend_free(cpu_);
    }

    static loom_rpc_server_t server_;
    static std::string       endpoint_;
    ggml_backend_t           rpc_ = nullptr;
    ggml_backend_t           cpu_ = nullptr;
};

loom_rpc_server_t OptRpc::server_ = nullptr;
std::string       OptRpc::endpoint_;

// Uniform in [-1, 1) from a fixed recurrence.
struct Lcg {
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    float    next() {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        return float((s >> 40) & 0xFFFFFF) / float(1 << 23) - 1.0f;
    }
};

ggml_opt_optimizer_params fast_params(void *) {
    ggml_opt_optimizer_params p = ggml_opt_get_default_optimizer_params(nullptr);
    p.adamw.alpha               = 0.02f;
    p.adamw.wd                  = 0.01f;
    p.sgd.alpha                 = 0.1f;
    p.sgd.wd                    = 0.01f;
    return p;
}

// Trains a 3-12-4 MLP (weights and inputs allocated on weights_on) for
// n_epoch epochs over a scheduler of `backends`; returns the training loss
// and accuracy of every epoch.
std::vector<double> train_losses(std::vector<ggml_backend_t> backends, ggml_backend_t weights_on,
                                 ggml_opt_optimizer_type optimizer, int n_epoch) {
    constexpr int64_t kIn = 3, kHidden = 12, kOut = 4, kBatch = 16, kData = 128;
    Lcg               rng;
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends.data(), nullptr, int(backends.size()),
                                                        GGML_DEFAULT_GRAPH_SIZE, false, true);
    ggml_init_params ps = {8 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *   cs = ggml_init(ps);
    ggml_tensor *    x  = ggml_new_tensor_2d(cs, GGML_TYPE_F32, kIn, kBatch);
    ggml_tensor *    w1 = ggml_new_tensor_2d(cs, GGML_TYPE_F32, kIn, kHidden);
    ggml_tensor *    b1 = ggml_new_tensor_1d(cs, GGML_TYPE_F32, kHidden);
    ggml_tensor *    w2 = ggml_new_tensor_2d(cs, GGML_TYPE_F32, kHidden, kOut);
    ggml_tensor *    b2 = ggml_new_tensor_1d(cs, GGML_TYPE_F32, kOut);
    for (ggml_tensor * t : {w1, b1, w2, b2}) {
        ggml_set_param(t);
    }
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(cs, weights_on);
    EXPECT_NE(buf, nullptr);
    for (ggml_tensor * t : {w1, b1, w2, b2}) {
        std::vector<float> v(size_t(ggml_nelements(t)));
        for (float & e : v) {
            e = 0.5f * rng.next();
        }
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    }
    ggml_init_params pc = {GGML_DEFAULT_GRAPH_SIZE * ggml_tensor_overhead() +
                               3 * ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, true),
                           nullptr, true};
    ggml_context *   cc = ggml_init(pc);
    ggml_tensor *    y  = ggml_add(cc, ggml_mul_mat(cc, w2, ggml_relu(cc, ggml_add(cc, ggml_mul_mat(cc, w1, x), b1))), b2);

    ggml_opt_dataset_t data = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, kIn, kOut, kData, 1);
    float *            xs   = ggml_get_data_f32(ggml_opt_dataset_data(data));
    float *            ls   = ggml_get_data_f32(ggml_opt_dataset_labels(data));
    for (int64_t i = 0; i < kData; ++i) {
        float best = -1e30f;
        int   c    = 0;
        for (int64_t k = 0; k < kIn; ++k) {
            xs[i * kIn + k] = rng.next();
        }
        for (int k = 0; k < kOut; ++k) { // the class: the largest of four fixed projections
            const float s = xs[i * kIn] * float(k - 1) + xs[i * kIn + 1] * float((k * 7) % 3 - 1) + xs[i * kIn + 2];
            if (s > best) {
                best = s;
                c    = k;
            }
        }
        for (int k = 0; k < kOut; ++k) {
            ls[i * kOut + k] = k == c ? 1.0f : 0.0f;
        }
    }

    ggml_opt_params op = ggml_opt_default_params(sched, GGML_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.ctx_compute     = cc;
    op.inputs          = x;
    op.outputs         = y;
    op.get_opt_pars    = fast_params;
    op.optimizer       = optimizer;
    ggml_opt_context_t opt = ggml_opt_init(op);
    ggml_opt_result_t  res = ggml_opt_result_init();
    std::vector<double> out;
    for (int e = 0; e < n_epoch; ++e) {
        ggml_opt_result_reset(res);
        ggml_opt_epoch(opt, data, res, nullptr, -1, nullptr, nullptr);
        double loss, unc, acc;
        ggml_opt_result_loss(res, &loss, &unc);
        ggml_opt_result_accuracy(res, &acc, &unc);
        out.push_back(loss);
        out.push_back(acc);
    }
    ggml_opt_result_free(res);
    ggml_opt_free(opt);
    ggml_opt_dataset_free(data);
    ggml_free(cc);
    ggml_backend_buffer_free(buf);
    ggml_free(cs);
    ggml_backend_sched_free(sched);
    return out;
}

TEST_F(OptRpc, TrainingWithWeightsOnTheServerGivesTheCpuLosses) {
    for (ggml_opt_optimizer_type optimizer : {GGML_OPT_OPTIMIZER_TYPE_ADAMW, GGML_OPT_OPTIMIZER_TYPE_SGD}) {
        SCOPED_TRACE(ggml_opt_optimizer_name(optimizer));
        const std::vector<double> on_cpu = train_losses({cpu_}, cpu_, optimizer, 8);
        const std::vector<double> on_rpc = train_losses({rpc_, cpu_}, rpc_, optimizer, 8);
        ASSERT_EQ(on_cpu.size(), on_rpc.size());
        for (size_t i = 0; i < on_cpu.size(); i += 2) {
            EXPECT_NEAR(on_rpc[i], on_cpu[i], 1e-5 * on_cpu[i]) << "epoch " << i / 2 + 1;
            EXPECT_NEAR(on_rpc[i + 1], on_cpu[i + 1], 1.5 / 128) << "epoch " << i / 2 + 1;
        }
        EXPECT_LT(on_cpu[on_cpu.size() - 2], 0.8 * on_cpu[0]) << "the model did not learn";
    }
}

// One optimizer step of a parameter held by `holder` over a scheduler of
// the RPC device and the CPU: it runs on holder, and the parameter (and
// AdamW's moments) take the values of the step computed here in double.
void step_runs_where_the_parameter_lives(ggml_backend_t rpc, ggml_backend_t cpu, ggml_backend_t holder, bool adamw) {
    constexpr int64_t n = 37;
    ggml_init_params  pw = {8 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *    cw = ggml_init(pw);
    ggml_tensor *     w  = ggml_new_tensor_2d(cw, GGML_TYPE_F32, n, 3);
    ggml_tensor *     m  = ggml_new_tensor_2d(cw, GGML_TYPE_F32, n, 3);
    ggml_tensor *     v  = ggml_new_tensor_2d(cw, GGML_TYPE_F32, n, 3);
    ggml_set_param(w);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(cw, holder);
    ASSERT_NE(wbuf, nullptr);
    // The gradient and the hyperparameters are inputs the scheduler copies.
    ggml_init_params pg = {8 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *   cg = ggml_init(pg);
    ggml_tensor *    g  = ggml_new_tensor_2d(cg, GGML_TYPE_F32, n, 3);
    ggml_tensor *    hp = ggml_new_tensor_1d(cg, GGML_TYPE_F32, adamw ? 7 : 2);
    ggml_backend_buffer_t gbuf = ggml_backend_alloc_ctx_tensors(cg, cpu);
    ASSERT_NE(gbuf, nullptr);

    Lcg                rng;
    const size_t       ne = size_t(3 * n);
    std::vector<float> w0(ne), g0(ne), m0(ne), v0(ne);
    for (size_t i = 0; i < ne; ++i) {
        w0[i] = rng.next();
        g0[i] = rng.next();
        m0[i] = 0.1f * rng.next();
        v0[i] = 0.05f * (rng.next() + 1.0f);
    }
    ggml_backend_tensor_set(w, w0.data(), 0, ggml_nbytes(w));
    ggml_backend_tensor_set(g, g0.data(), 0, ggml_nbytes(g));
    ggml_backend_tensor_set(m, m0.data(), 0, ggml_nbytes(m));
    ggml_backend_tensor_set(v, v0.data(), 0, ggml_nbytes(v));
    // alpha, beta1, beta2, eps, wd, 1/(1 - beta1^t), 1/(1 - beta2^t) at t = 3; or alpha, wd.
    const std::vector<float> h = adamw ? std::vector<float>{0.01f, 0.9f, 0.999f, 1e-8f, 0.02f, 1.0f / (1.0f - 0.729f),
                                                            1.0f / (1.0f - 0.997003f)}
                                       : std::vector<float>{0.1f, 0.02f};
    ggml_backend_tensor_set(hp, h.data(), 0, ggml_nbytes(hp));

    ggml_init_params pc = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context *   cc = ggml_init(pc);
    ggml_tensor *    step = adamw ? ggml_opt_step_adamw(cc, w, g, m, v, hp) : ggml_opt_step_sgd(cc, w, g, hp);
    ggml_cgraph *    gf   = ggml_new_graph(cc);
    ggml_build_forward_expand(gf, step);

    ggml_backend_t       list[2] = {rpc, cpu};
    ggml_backend_sched_t sched   = ggml_backend_sched_new(list, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, gf));
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(sched, step), holder)
        << "the step of a parameter on " << ggml_backend_name(holder) << " runs on "
        << ggml_backend_name(ggml_backend_sched_get_tensor_backend(sched, step));
    ASSERT_EQ(ggml_backend_sched_graph_compute(sched, gf), GGML_STATUS_SUCCESS);

    std::vector<float> w1(ne), m1(ne), v1(ne);
    ggml_backend_tensor_get(w, w1.data(), 0, ggml_nbytes(w));
    ggml_backend_tensor_get(m, m1.data(), 0, ggml_nbytes(m));
    ggml_backend_tensor_get(v, v1.data(), 0, ggml_nbytes(v));
    for (size_t i = 0; i < ne; ++i) {
        const double gi = g0[i];
        if (adamw) {
            const double mi = 0.9 * m0[i] + 0.1 * gi;
            const double vi = 0.999 * v0[i] + 0.001 * gi * gi;
            const double wi = w0[i] * (1.0 - 0.01 * 0.02) -
                              0.01 * (mi * double(h[5])) / (std::sqrt(vi * double(h[6])) + 1e-8);
            EXPECT_NEAR(m1[i], mi, 1e-6) << i;
            EXPECT_NEAR(v1[i], vi, 1e-6) << i;
            EXPECT_NEAR(w1[i], wi, 1e-5) << i;
        } else {
            EXPECT_NEAR(w1[i], w0[i] * (1.0 - 0.1 * 0.02) - 0.1 * gi, 1e-6) << i;
            EXPECT_EQ(m1[i], m0[i]) << i; // SGD has no moments
        }
    }
    ggml_backend_sched_free(sched);
    ggml_free(cc);
    ggml_backend_buffer_free(gbuf);
    ggml_free(cg);
    ggml_backend_buffer_free(wbuf);
    ggml_free(cw);
}

TEST_F(OptRpc, OptimizerStepRunsWhereTheParameterLives) {
    for (bool adamw : {true, false}) {
        SCOPED_TRACE(adamw ? "AdamW" : "SGD");
        {
            SCOPED_TRACE("parameter on the RPC device");
            step_runs_where_the_parameter_lives(rpc_, cpu_, rpc_, adamw);
        }
        {
            SCOPED_TRACE("parameter on the CPU");
            step_runs_where_the_parameter_lives(rpc_, cpu_, cpu_, adamw);
        }
    }
}

} // namespace
