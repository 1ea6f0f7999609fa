// ggml_build_forward_select and ggml_build_forward_order: nodes added without
// GGML_TENSOR_FLAG_COMPUTE stay in the graph but are not computed, on the
// CPU directly, through a backend and through the scheduler.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "test_util.h"

namespace {

using loomtest::Context;

constexpr float k_sentinel = -12345.0f;

void fill(ggml_tensor * t, float v) {
    float * d = static_cast<float *>(t->data);
    for (int64_t i = 0; i < ggml_nelements(t); ++i) d[i] = v;
}

bool all_equal(const ggml_tensor * t, float v) {
    const float * d = static_cast<const float *>(t->data);
    for (int64_t i = 0; i < ggml_nelements(t); ++i) {
        if (d[i] != v) return false;
    }
    return true;
}

bool has_node(ggml_cgraph * g, const ggml_tensor * t) {
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
        if (ggml_graph_node(g, i) == t) return true;
    }
    return false;
}

// Three branches from x = 2: x+1, x*x, sqrt(x) (each through a scale by 10
// so a branch has two nodes). Only the selected one is computed.
TEST(GraphSelect, OnlyTheSelectedBranchIsComputed) {
    for (int idx = 0; idx < 3; ++idx) {
        Context       ctx;
        ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 7);
        fill(x, 2.0f);
        ggml_tensor * b[3] = {
            ggml_scale(ctx, ggml_add1(ctx, x, ggml_new_f32(ctx, 1.0f)), 10.0f),
            ggml_scale(ctx, ggml_mul(ctx, x, x), 10.0f),
            ggml_scale(ctx, ggml_sqrt(ctx, x), 10.0f),
        };
        for (ggml_tensor * t : b) {
            fill(t, k_sentinel);
            fill(t->src[0], k_sentinel);
        }
        ggml_cgraph * g   = ggml_new_graph(ctx);
        ggml_tensor * out = ggml_build_forward_select(g, b, 3, idx);
        EXPECT_EQ(out, b[idx]);
        for (ggml_tensor * t : b) {
            EXPECT_TRUE(has_node(g, t)) << "every branch is in the graph";
            EXPECT_EQ((t->flags & GGML_TENSOR_FLAG_COMPUTE) != 0, t == b[idx]);
        }
        ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, g, 2), GGML_STATUS_SUCCESS);
        const float want[3] = {30.0f, 40.0f, 10.0f * std::sqrt(2.0f)};
        for (int i = 0; i < 3; ++i) {
            if (i == idx) {
                EXPECT_TRUE(all_equal(b[i], want[i])) << "branch " << i;
            } else {
                EXPECT_TRUE(all_equal(b[i], k_sentinel)) << "branch " << i << " was computed";
                EXPECT_TRUE(all_equal(b[i]->src[0], k_sentinel)) << "branch " << i << " was computed";
            }
        }
    }
}

// A node added by ggml_build_forward_order is computed once a computing node
// that depends on it is added, and the marks reach its sources too.
TEST(GraphSelect, OrderThenExpandMarksTheSources) {
    Context       ctx;
    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 5);
    fill(x, 3.0f);
    ggml_tensor * a = ggml_scale(ctx, x, 2.0f);     // 6
    ggml_tensor * b = ggml_add1(ctx, a, ggml_new_f32(ctx, 1.0f)); // 7
    ggml_tensor * c = ggml_sqr(ctx, x);             // 9, never needed
    fill(a, k_sentinel);
    fill(b, k_sentinel);
    fill(c, k_sentinel);

    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_order(g, b);
    ggml_build_forward_order(g, c);
    EXPECT_FALSE(a->flags & GGML_TENSOR_FLAG_COMPUTE);
    EXPECT_FALSE(b->flags & GGML_TENSOR_FLAG_COMPUTE);
    const int n = ggml_graph_n_nodes(g);
    ggml_tensor * d = ggml_scale(ctx, b, 0.5f); // 3.5
    fill(d, k_sentinel);
    ggml_build_forward_expand(g, d);
    EXPECT_EQ(ggml_graph_n_nodes(g), n + 1) << "nodes already in the graph are not added twice";
    EXPECT_TRUE(a->flags & GGML_TENSOR_FLAG_COMPUTE);
    EXPECT_TRUE(b->flags & GGML_TENSOR_FLAG_COMPUTE);
    EXPECT_FALSE(c->flags & GGML_TENSOR_FLAG_COMPUTE);
    EXPECT_FALSE(x->flags & GGML_TENSOR_FLAG_COMPUTE) << "leafs are never marked";

    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, g, 1), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(all_equal(a, 6.0f));
    EXPECT_TRUE(all_equal(b, 7.0f));
    EXPECT_TRUE(all_equal(d, 3.5f));
    EXPECT_TRUE(all_equal(c, k_sentinel));
}

// Through the scheduler (allocated by it, computed on the CPU backend): the
// branch not selected is not computed and the result is the selected one.
TEST(GraphSelect, ThroughTheScheduler) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ASSERT_NE(cpu, nullptr);
    for (int idx = 0; idx < 2; ++idx) {
        ggml_init_params ip = {ggml_tensor_overhead() * 64 + ggml_graph_overhead(), nullptr, true};
        ggml_context *   ctx = ggml_init(ip);
        ggml_tensor *    x   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 33);
        ggml_set_input(x);
        ggml_tensor * br[2] = {ggml_scale(ctx, x, 3.0f), ggml_neg(ctx, x)};
        ggml_cgraph * g     = ggml_new_graph(ctx);
        ggml_tensor * sel   = ggml_build_forward_select(g, br, 2, idx);
        ggml_tensor * out   = ggml_add1(ctx, sel, ggml_arange(ctx, 1.0f, 2.0f, 1.0f));
        ggml_build_forward_expand(g, out);
        ggml_set_output(out);

        ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, nullptr, 1, 256, false, true);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, g));
        float xs[33];
        for (int i = 0; i < 33; ++i) xs[i] = float(i) - 16.0f;
        ggml_backend_tensor_set(x, xs, 0, sizeof(xs));
        ASSERT_EQ(ggml_backend_sched_graph_compute(sched, g), GGML_STATUS_SUCCESS);
        float got[33];
        ggml_backend_tensor_get(out, got, 0, sizeof(got));
        for (int i = 0; i < 33; ++i) {
            const float want = (idx == 0 ? 3.0f * xs[i] : -xs[i]) + 1.0f;
            EXPECT_EQ(got[i], want) << "element " << i << ", branch " << idx;
        }
        ggml_backend_sched_free(sched);
        ggml_free(ctx);
    }
    ggml_backend_free(cpu);
}

TEST(GraphSelectDeath, IndexOutOfRange) {
    Context       ctx;
    ggml_tensor * x    = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 3);
    ggml_tensor * b[2] = {ggml_neg(ctx, x), ggml_abs(ctx, x)};
    ggml_cgraph * g    = ggml_new_graph(ctx);
    EXPECT_DEATH(ggml_build_forward_select(g, b, 2, 2), "index 2 out of the 2 tensors");
    EXPECT_DEATH(ggml_build_forward_select(g, b, 2, -1), "index -1 out of the 2 tensors");
}

} // namespace
