// ggml-opt: datasets and batches, result statistics, a small regression
// trained with AdamW and SGD, and the preconditions.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-opt.h"
#include "ggml.h"

namespace {

ggml_opt_dataset_t counting_dataset(int64_t ndata, int64_t shard, int64_t ne = 2) {
    ggml_opt_dataset_t d    = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, ne, 1, ndata, shard);
    float *            data = ggml_get_data_f32(ggml_opt_dataset_data(d));
    float *            lab  = ggml_get_data_f32(ggml_opt_dataset_labels(d));
    for (int64_t i = 0; i < ndata; ++i) {
        for (int64_t j = 0; j < ne; ++j) data[i * ne + j] = float(10 * i + j);
        lab[i] = float(-i);
    }
    return d;
}

TEST(OptDataset, ShapesAndBatchesInOrder) {
    ggml_opt_dataset_t d = counting_dataset(6, 2);
    EXPECT_EQ(ggml_opt_dataset_ndata(d), 6);
    EXPECT_EQ(ggml_opt_dataset_data(d)->ne[0], 2);
    EXPECT_EQ(ggml_opt_dataset_data(d)->ne[1], 6);
    EXPECT_EQ(ggml_opt_dataset_labels(d)->ne[0], 1);
    float data[4], labels[2];
    ggml_opt_dataset_get_batch_host(d, data, sizeof(data), labels, 2);
    EXPECT_EQ(data[0], 40.0f);
    EXPECT_EQ(data[3], 51.0f);
    EXPECT_EQ(labels[1], -5.0f);
    ggml_opt_dataset_free(d);

    ggml_opt_dataset_t u = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 3, 0, 4, 1);
    EXPECT_EQ(ggml_opt_dataset_labels(u), nullptr);
    ggml_opt_dataset_free(u);
}

TEST(OptResult, EmptyAndStatistics) {
    ggml_opt_result_t r = ggml_opt_result_init();
    int64_t           n = -1;
    double            loss, unc, acc, acc_unc;
    ggml_opt_result_ndata(r, &n);
    EXPECT_EQ(n, 0);
    ggml_opt_result_loss(r, &loss, &unc);
    EXPECT_EQ(loss, 0.0);
    EXPECT_TRUE(std::isnan(unc));
    ggml_opt_result_accuracy(r, &acc, &acc_unc);
    EXPECT_TRUE(std::isnan(acc));
    ggml_opt_result_free(r);
}

TEST(OptParams, DefaultsAndNames) {
    const ggml_opt_optimizer_params p = ggml_opt_get_default_optimizer_params(nullptr);
    EXPECT_FLOAT_EQ(p.adamw.alpha, 1e-3f);
    EXPECT_FLOAT_EQ(p.adamw.beta1, 0.9f);
    EXPECT_FLOAT_EQ(p.adamw.beta2, 0.999f);
    EXPECT_FLOAT_EQ(p.adamw.eps, 1e-8f);
    EXPECT_EQ(p.adamw.wd, 0.0f);
    EXPECT_FLOAT_EQ(p.sgd.alpha, 1e-3f);
    ggml_opt_optimizer_params c = p;
    c.sgd.alpha                 = 0.5f;
    EXPECT_EQ(ggml_opt_get_constant_optimizer_params(&c).sgd.alpha, 0.5f);
    EXPECT_STREQ(ggml_opt_optimizer_name(GGML_OPT_OPTIMIZER_TYPE_ADAMW), "adamw");
    EXPECT_STREQ(ggml_opt_optimizer_name(GGML_OPT_OPTIMIZER_TYPE_SGD), "sgd");
    const ggml_opt_params d = ggml_opt_default_params(nullptr, GGML_OPT_LOSS_TYPE_SUM);
    EXPECT_EQ(d.build_type, GGML_OPT_BUILD_TYPE_OPT);
    EXPECT_EQ(d.opt_period, 1);
    EXPECT_EQ(d.optimizer, GGML_OPT_OPTIMIZER_TYPE_ADAMW);
}

// y = a x + b fitted to y = 2 x - 1 (mean squared error) on the CPU.
struct Line {
    ggml_backend_t       cpu   = ggml_backend_cpu_init();
    ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    ggml_context *       ctx_static;
    ggml_context *       ctx_compute;
    ggml_backend_buffer_t buf = nullptr;
    ggml_tensor *        x, *a, *b, *y;

    Line() {
        ggml_init_params ps = {8 * ggml_tensor_overhead(), nullptr, true};
        ctx_static          = ggml_init(ps);
        ggml_init_params pc = {GGML_DEFAULT_GRAPH_SIZE * ggml_tensor_overhead() + 3 * ggml_graph_overhead(), nullptr,
                               true};
        ctx_compute         = ggml_init(pc);
        x                   = ggml_new_tensor_2d(ctx_static, GGML_TYPE_F32, 1, 4);
        a                   = ggml_new_tensor_1d(ctx_static, GGML_TYPE_F32, 1);
        b                   = ggml_new_tensor_1d(ctx_static, GGML_TYPE_F32, 1);
        ggml_set_param(a);
        ggml_set_param(b);
        buf = ggml_backend_alloc_ctx_tensors(ctx_static, cpu);
        const float zero = 0.0f;
        ggml_backend_tensor_set(a, &zero, 0, sizeof(zero));
        ggml_backend_tensor_set(b, &zero, 0, sizeof(zero));
        y = ggml_add(ctx_compute, ggml_mul(ctx_compute, x, a), b);
    }
    ~Line() {
        ggml_backend_sched_free(sched);
        ggml_backend_buffer_free(buf);
        ggml_free(ctx_compute);
        ggml_free(ctx_static);
        ggml_backend_free(cpu);
    }
    float get(ggml_tensor * t) const {
        float v;
        ggml_backend_tensor_get(t, &v, 0, sizeof(v));
        return v;
    }
};

ggml_opt_dataset_t line_data() {
    ggml_opt_dataset_t d = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 1, 1, 32, 1);
    float *            xs = ggml_get_data_f32(ggml_opt_dataset_data(d));
    float *            ys = ggml_get_data_f32(ggml_opt_dataset_labels(d));
    for (int i = 0; i < 32; ++i) {
        xs[i] = float(i) / 16.0f - 1.0f;
        ys[i] = 2.0f * xs[i] - 1.0f;
    }
    return d;
}

ggml_opt_optimizer_params fast(void * userdata) {
    (void) userdata;
    ggml_opt_optimizer_params p = ggml_opt_get_default_optimizer_params(nullptr);
    p.adamw.alpha               = 0.05f;
    p.sgd.alpha                 = 0.2f;
    return p;
}

class OptFit : public ::testing::TestWithParam<ggml_opt_optimizer_type> {};

TEST_P(OptFit, LineConverges) {
    Line               l;
    ggml_opt_dataset_t d = line_data();
    ggml_opt_fit(l.sched, l.ctx_compute, l.x, l.y, d, GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR, GetParam(), fast, 200, 8,
                 0.0f, true);
    EXPECT_NEAR(l.get(l.a), 2.0f, 0.05f);
    EXPECT_NEAR(l.get(l.b), -1.0f, 0.05f);
    ggml_opt_dataset_free(d);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, OptFit,
                         ::testing::Values(GGML_OPT_OPTIMIZER_TYPE_ADAMW, GGML_OPT_OPTIMIZER_TYPE_SGD));

TEST(OptContext, EpochCollectsLossPerBatch) {
    Line            l;
    ggml_opt_params p = ggml_opt_default_params(l.sched, GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR);
    p.ctx_compute     = l.ctx_compute;
    p.inputs          = l.x;
    p.outputs         = l.y;
    p.build_type      = GGML_OPT_BUILD_TYPE_FORWARD;
    ggml_opt_context_t o = ggml_opt_init(p);
    EXPECT_TRUE(ggml_opt_static_graphs(o));
    EXPECT_EQ(ggml_opt_inputs(o), l.x);
    EXPECT_EQ(ggml_opt_outputs(o), l.y);
    ASSERT_NE(ggml_opt_labels(o), nullptr);
    EXPECT_EQ(ggml_opt_pred(o), nullptr);
    ggml_opt_dataset_t d = line_data();
    ggml_opt_result_t  r = ggml_opt_result_init();
    ggml_opt_epoch(o, d, nullptr, r, 0, nullptr, nullptr); // evaluation only: a = b = 0
    int64_t n;
    double  loss, unc;
    ggml_opt_result_ndata(r, &n);
    EXPECT_EQ(n, 32);
    ggml_opt_result_loss(r, &loss, &unc);
    double want = 0;
    for (int i = 0; i < 32; ++i) {
        const double y = 2.0 * (i / 16.0 - 1.0) - 1.0;
        want += y * y;
    }
    EXPECT_NEAR(loss, want / 32, 1e-5);
    EXPECT_TRUE(std::isfinite(unc));
    ggml_opt_result_free(r);
    ggml_opt_dataset_free(d);
    ggml_opt_free(o);
}

using OptDeathTest = ::testing::Test;

TEST(OptDeathTest, BadInputs) {
    Line l;
    // A dataset whose datapoints do not match the model's inputs.
    ggml_opt_dataset_t wide = ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 3, 1, 8, 1);
    EXPECT_DEATH(ggml_opt_fit(l.sched, l.ctx_compute, l.x, l.y, wide, GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR,
                              GGML_OPT_OPTIMIZER_TYPE_ADAMW, fast, 1, 4, 0.0f, true),
                 "ggml_opt_epoch.*3 values per datapoint.*inputs 1");
    ggml_opt_dataset_free(wide);
    // A batch that is not a whole number of shards.
    ggml_opt_dataset_t d = counting_dataset(6, 2);
    float              buf[8];
    EXPECT_DEATH(ggml_opt_dataset_get_batch_host(d, buf, 3 * 2 * sizeof(float), buf, 0), "whole number of shards");
    EXPECT_DEATH(ggml_opt_dataset_get_batch_host(d, buf, 4 * sizeof(float), nullptr, 0), "labels_batch missing");
    ggml_opt_dataset_free(d);
    EXPECT_DEATH(ggml_opt_dataset_init(GGML_TYPE_F32, GGML_TYPE_F32, 0, 1, 8, 1), "bad sizes");
    // A graph without parameters.
    ggml_tensor *   c = ggml_scale(l.ctx_compute, l.x, 2.0f);
    ggml_opt_params p = ggml_opt_default_params(l.sched, GGML_OPT_LOSS_TYPE_SUM);
    p.ctx_compute     = l.ctx_compute;
    p.inputs          = l.x;
    p.outputs         = c;
    EXPECT_DEATH(ggml_opt_init(p), "no parameters");
    // Inputs without a compute context.
    ggml_opt_params q = ggml_opt_default_params(l.sched, GGML_OPT_LOSS_TYPE_SUM);
    q.inputs          = l.x;
    EXPECT_DEATH(ggml_opt_init(q), "inputs and outputs without ctx_compute");
    q.inputs     = nullptr;
    q.opt_period = 0;
    EXPECT_DEATH(ggml_opt_init(q), "opt_period 0");
}

} // namespace
