// Automatic differentiation: every gradient rule against central finite
// differences, gradient accumulation, ggml_graph_reset, graph copies, and the
// preconditions of ggml_build_backward_expand.
//
// Each case builds out = f(params...) and the loss sum(out * w) with a random
// constant w, so that every element of out gets its own weight. The analytic
// gradient of each parameter (computed in f32 by the backward graph) is
// compared with (L(x + h) - L(x - h)) / 2h per element, the differences taken
// in double from f32 forward evaluations with h = 1e-2 (the f32 loss rounds
// at about 1e-7 relative; dividing by 2h leaves ~1e-5, the h^2 term of
// smooth functions ~1e-4 relative). Threshold: NMSE 1e-5 over the gradient,
// which a wrong rule (a sign, a transposition, a missing broadcast sum) misses
// by orders of magnitude.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ggml-cpu.h"
#include "ggml.h"

namespace {

constexpr double kStep     = 1e-2;
constexpr double kMaxNmse  = 1e-5;

struct CtxOwner {
    ggml_context * ctx;
    explicit CtxOwner(size_t mem = size_t(64) << 20) {
        ggml_init_params p = {mem, nullptr, false};
        ctx                = ggml_init(p);
    }
    ~CtxOwner() { ggml_free(ctx); }
};

// Values of a parameter's domain.
enum class Domain { any, positive, away_from_zero };

void fill(ggml_tensor * t, std::mt19937 & rng, Domain d) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    float *                               p = static_cast<float *>(t->data);
    for (int64_t i = 0; i < ggml_nelements(t); ++i) {
        float v = u(rng);
        if (d == Domain::positive) {
            v = 0.5f + 0.75f * (v + 1.0f); // [0.5, 2]
        } else if (d == Domain::away_from_zero) {
            v = v < 0 ? v - 0.2f : v + 0.2f; // |v| >= 0.2: away from the kinks of abs, relu
        }
        p[i] = v;
    }
}

void compute(ggml_cgraph * g, int n_threads) {
    ggml_cplan                plan = ggml_graph_plan(g, n_threads, nullptr);
    std::vector<uint8_t>      work(plan.work_size + 1);
    plan.work_data = work.data();
    ASSERT_EQ(ggml_graph_compute(g, &plan), GGML_STATUS_SUCCESS);
}

float scalar(const ggml_tensor * t) {
    return *static_cast<const float *>(t->data);
}

// Element i (in row-major order of the shape) of an f32 tensor that may be a
// strided view (the gradient of a transpose is one).
double element(const ggml_tensor * t, int64_t i) {
    const int64_t i0 = i % t->ne[0], i1 = i / t->ne[0] % t->ne[1], i2 = i / (t->ne[0] * t->ne[1]) % t->ne[2],
                  i3 = i / (t->ne[0] * t->ne[1] * t->ne[2]);
    const char * p = static_cast<const char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    return *reinterpret_cast<const float *>(p);
}

struct Param {
    std::vector<int64_t> ne;
    Domain               domain = Domain::any;
};

using Builder = std::function<ggml_tensor *(ggml_context *, std::vector<ggml_tensor *> &)>;

struct GradCase {
    std::string        name;
    std::vector<Param> params;
    Builder            build;
    // Parameters that get no gradient (their index); checked to have none.
    std::vector<int> no_grad = {};
};

// Builds the case, runs the backward graph with n_threads and compares each
// parameter's gradient with central differences.
void check_case(const GradCase & c, unsigned seed, int n_threads) {
    SCOPED_TRACE(c.name + " seed " + std::to_string(seed) + " threads " + std::to_string(n_threads));
    CtxOwner                   owner;
    ggml_context *             ctx = owner.ctx;
    std::mt19937               rng(seed);
    std::vector<ggml_tensor *> ps;
    for (const Param & p : c.params) {
        ggml_tensor * t = ggml_new_tensor(ctx, GGML_TYPE_F32, int(p.ne.size()), p.ne.data());
        fill(t, rng, p.domain);
        ggml_set_param(t);
        ps.push_back(t);
    }
    ggml_tensor * out = c.build(ctx, ps);
    ggml_tensor * w   = ggml_new_tensor(ctx, GGML_TYPE_F32, GGML_MAX_DIMS, out->ne);
    fill(w, rng, Domain::any);
    ggml_tensor * loss = ggml_sum(ctx, ggml_mul(ctx, out, w));
    ggml_set_loss(loss);

    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 4096, false);
    ggml_build_forward_expand(gf, loss);
    ggml_cgraph * gb = ggml_new_graph_custom(ctx, 4096, true);
    ggml_build_forward_expand(gb, loss);
    ggml_build_backward_expand(ctx, gb, nullptr);
    ggml_graph_reset(gb);
    compute(gb, n_threads);

    for (int no : c.no_grad) {
        EXPECT_EQ(ggml_graph_get_grad(gb, ps[size_t(no)]), nullptr) << "param " << no;
    }
    for (size_t k = 0; k < ps.size(); ++k) {
        if (std::find(c.no_grad.begin(), c.no_grad.end(), int(k)) != c.no_grad.end()) continue;
        ggml_tensor * x    = ps[k];
        ggml_tensor * grad = ggml_graph_get_grad(gb, x);
        ASSERT_NE(grad, nullptr) << "param " << k;
        ASSERT_TRUE(ggml_are_same_shape(grad, x));
        float * xd = static_cast<float *>(x->data);
        double  err = 0, ref = 0;
        for (int64_t i = 0; i < ggml_nelements(x); ++i) {
            const float x0 = xd[i];
            xd[i]          = float(x0 + kStep);
            compute(gf, n_threads);
            const double lp = scalar(loss);
            xd[i]           = float(x0 - kStep);
            compute(gf, n_threads);
            const double lm = scalar(loss);
            xd[i]           = x0;
            const double fd = (lp - lm) / (2 * kStep);
            const double g  = element(grad, i);
            err += (g - fd) * (g - fd);
            ref += fd * fd;
        }
        // The backward graph ran before the differences; its gradient is read
        // from memory the forward graph does not touch.
        const double nmse = ref > 0 ? err / ref : err;
        EXPECT_LE(nmse, kMaxNmse) << "param " << k << " " << ggml_nelements(x) << " elements";
    }
}

ggml_tensor * P(std::vector<ggml_tensor *> & p, size_t i) {
    return p[i];
}

std::vector<GradCase> cases() {
    using V = std::vector<ggml_tensor *>;
    const Domain pos = Domain::positive, nz = Domain::away_from_zero;
    return {
        {"dup", {{{5, 3}}}, [](ggml_context * c, V & p) { return ggml_dup(c, P(p, 0)); }},
        {"add", {{{5, 3, 2}}, {{5, 3, 2}}}, [](ggml_context * c, V & p) { return ggml_add(c, P(p, 0), P(p, 1)); }},
        {"add_broadcast", {{{7, 3, 4, 2}}, {{7, 1, 2, 1}}},
         [](ggml_context * c, V & p) { return ggml_add(c, P(p, 0), P(p, 1)); }},
        {"add1", {{{5, 3}}, {{1}}}, [](ggml_context * c, V & p) { return ggml_add1(c, P(p, 0), P(p, 1)); }},
        {"acc", {{{6, 5, 2}}, {{3, 2, 2}}},
         [](ggml_context * c, V & p) {
             ggml_tensor * a = P(p, 0);
             return ggml_acc(c, a, P(p, 1), a->nb[1], a->nb[2], a->nb[3], a->nb[1] + 2 * a->nb[0]);
         }},
        {"sub", {{{9, 2, 3}}, {{9, 2, 3}}}, [](ggml_context * c, V & p) { return ggml_sub(c, P(p, 0), P(p, 1)); }},
        {"mul", {{{5, 3, 2}}, {{5, 3, 2}}}, [](ggml_context * c, V & p) { return ggml_mul(c, P(p, 0), P(p, 1)); }},
        {"mul_broadcast", {{{5, 3, 2, 3}}, {{5, 1, 1, 3}}},
         [](ggml_context * c, V & p) { return ggml_mul(c, P(p, 0), P(p, 1)); }},
        {"div", {{{7, 3}}, {{7, 3}, pos}}, [](ggml_context * c, V & p) { return ggml_div(c, P(p, 0), P(p, 1)); }},
        {"sqr", {{{7, 5}}}, [](ggml_context * c, V & p) { return ggml_sqr(c, P(p, 0)); }},
        {"sqrt", {{{7, 5}, pos}}, [](ggml_context * c, V & p) { return ggml_sqrt(c, P(p, 0)); }},
        {"log", {{{7, 5}, pos}}, [](ggml_context * c, V & p) { return ggml_log(c, P(p, 0)); }},
        {"sin", {{{7, 5}}}, [](ggml_context * c, V & p) { return ggml_sin(c, P(p, 0)); }},
        {"cos", {{{7, 5}}}, [](ggml_context * c, V & p) { return ggml_cos(c, P(p, 0)); }},
        {"sum", {{{7, 3, 2}}}, [](ggml_context * c, V & p) { return ggml_sum(c, P(p, 0)); }},
        {"sum_twice", {{{7, 3}}},
         [](ggml_context * c, V & p) { return ggml_add(c, ggml_sum(c, P(p, 0)), ggml_sum(c, ggml_sqr(c, P(p, 0)))); }},
        {"sum_rows", {{{7, 3, 2}}}, [](ggml_context * c, V & p) { return ggml_sum_rows(c, P(p, 0)); }},
        {"mean", {{{7, 3, 2}}}, [](ggml_context * c, V & p) { return ggml_mean(c, P(p, 0)); }},
        {"repeat", {{{3, 1, 2}}},
         [](ggml_context * c, V & p) {
             return ggml_repeat(c, P(p, 0), ggml_new_tensor_4d(c, GGML_TYPE_F32, 6, 5, 4, 3));
         }},
        {"repeat_back", {{{6, 4, 2}}},
         [](ggml_context * c, V & p) {
             return ggml_repeat_back(c, P(p, 0), ggml_new_tensor_3d(c, GGML_TYPE_F32, 3, 1, 2));
         }},
        {"mul_mat", {{{7, 5}}, {{7, 3}}},
         [](ggml_context * c, V & p) { return ggml_mul_mat(c, P(p, 0), P(p, 1)); }},
        {"mul_mat_batched", {{{5, 4, 3}}, {{5, 2, 3}}},
         [](ggml_context * c, V & p) { return ggml_mul_mat(c, P(p, 0), P(p, 1)); }},
        {"mul_mat_broadcast", {{{5, 4, 2}}, {{5, 3, 6}}},
         [](ggml_context * c, V & p) { return ggml_mul_mat(c, P(p, 0), P(p, 1)); }},
        {"scale", {{{7, 3}}}, [](ggml_context * c, V & p) { return ggml_scale(c, P(p, 0), -1.75f); }},
        {"set", {{{6, 5}}, {{3, 2}}},
         [](ggml_context * c, V & p) {
             ggml_tensor * a = P(p, 0);
             return ggml_set_2d(c, a, P(p, 1), a->nb[1], 2 * a->nb[1] + a->nb[0]);
         }},
        {"cpy", {{{5, 3}}, {{15}}},
         [](ggml_context * c, V & p) { return ggml_cpy(c, P(p, 0), P(p, 1)); }, {1}},
        {"cont_transposed", {{{5, 3}}},
         [](ggml_context * c, V & p) { return ggml_cont(c, ggml_transpose(c, P(p, 0))); }},
        {"reshape", {{{6, 5}}},
         [](ggml_context * c, V & p) { return ggml_sqr(c, ggml_reshape_3d(c, P(p, 0), 3, 5, 2)); }},
        {"reshape_of_transposed", {{{6, 5}}},
         [](ggml_context * c, V & p) {
             return ggml_reshape_2d(c, ggml_cont(c, ggml_transpose(c, ggml_sqr(c, P(p, 0)))), 3, 10);
         }},
        {"view", {{{7, 5, 2}}},
         [](ggml_context * c, V & p) {
             ggml_tensor * a = P(p, 0);
             return ggml_sqr(c, ggml_view_2d(c, a, 3, 4, a->nb[1], a->nb[1] + a->nb[0]));
         }},
        {"two_views", {{{7, 5}}},
         [](ggml_context * c, V & p) {
             ggml_tensor * a = P(p, 0);
             ggml_tensor * v1 = ggml_view_2d(c, a, 3, 2, a->nb[1], 0);
             ggml_tensor * v2 = ggml_view_2d(c, a, 3, 2, a->nb[1], 2 * a->nb[1] + 2 * a->nb[0]);
             return ggml_mul(c, v1, v2);
         }},
        {"permute", {{{3, 4, 5, 2}}},
         [](ggml_context * c, V & p) { return ggml_sqr(c, ggml_permute(c, P(p, 0), 2, 0, 3, 1)); }},
        {"transpose", {{{7, 5}}}, [](ggml_context * c, V & p) { return ggml_sqr(c, ggml_transpose(c, P(p, 0))); }},
        {"diag_mask_zero", {{{5, 5, 2}}}, [](ggml_context * c, V & p) { return ggml_diag_mask_zero(c, P(p, 0), 1); }},
        {"diag_mask_inf", {{{5, 5, 2}}},
         [](ggml_context * c, V & p) { return ggml_exp(c, ggml_diag_mask_inf(c, P(p, 0), 0)); }},
        {"abs", {{{7, 5}, nz}}, [](ggml_context * c, V & p) { return ggml_abs(c, P(p, 0)); }},
        {"neg", {{{7, 5}}}, [](ggml_context * c, V & p) { return ggml_neg(c, P(p, 0)); }},
        {"relu", {{{7, 5}, nz}}, [](ggml_context * c, V & p) { return ggml_relu(c, P(p, 0)); }},
        {"exp", {{{7, 5}}}, [](ggml_context * c, V & p) { return ggml_exp(c, P(p, 0)); }},
        {"expm1", {{{7, 5}}}, [](ggml_context * c, V & p) { return ggml_expm1(c, P(p, 0)); }},
        {"softplus", {{{7, 5}}}, [](ggml_context * c, V & p) { return ggml_softplus(c, P(p, 0)); }},
        {"sgn_step", {{{7, 5}, nz}, {{7, 5}}},
         [](ggml_context * c, V & p) {
             return ggml_add(c, ggml_mul(c, ggml_sgn(c, P(p, 0)), P(p, 1)), ggml_step(c, P(p, 0)));
         },
         {0}},
        {"silu", {{{7, 5}}}, [](ggml_context * c, V & p) { return ggml_silu(c, P(p, 0)); }},
        {"swiglu_split", {{{7, 5}}, {{7, 5}}},
         [](ggml_context * c, V & p) { return ggml_swiglu_split(c, P(p, 0), P(p, 1)); }},
        {"rms_norm", {{{9, 4, 2}}}, [](ggml_context * c, V & p) { return ggml_rms_norm(c, P(p, 0), 1e-5f); }},
        {"soft_max", {{{7, 4, 2}}}, [](ggml_context * c, V & p) { return ggml_soft_max(c, P(p, 0)); }},
        {"soft_max_ext_scaled", {{{7, 4}}},
         [](ggml_context * c, V & p) { return ggml_soft_max_ext(c, P(p, 0), nullptr, 0.75f, 0.0f); }},
        {"get_rows", {{{5, 6}}},
         [](ggml_context * c, V & p) {
             ggml_tensor * idx = ggml_new_tensor_1d(c, GGML_TYPE_I32, 7);
             const int32_t rows[7] = {3, 0, 5, 3, 1, 5, 5}; // repeats add up
             std::memcpy(idx->data, rows, sizeof(rows));
             return ggml_get_rows(c, P(p, 0), idx);
         }},
        {"cross_entropy_loss", {{{6, 5}}},
         [](ggml_context * c, V & p) {
             ggml_tensor * labels = ggml_new_tensor_2d(c, GGML_TYPE_F32, 6, 5);
             float *       l      = static_cast<float *>(labels->data);
             for (int r = 0; r < 5; ++r) {
                 for (int i = 0; i < 6; ++i) l[r * 6 + i] = i == (r * 7) % 6 ? 0.75f : 0.05f;
             }
             return ggml_cross_entropy_loss(c, P(p, 0), labels);
         }},
        {"rope_neox", {{{8, 3, 4}}},
         [](ggml_context * c, V & p) {
             ggml_tensor * positions = ggml_new_tensor_1d(c, GGML_TYPE_I32, 4);
             for (int i = 0; i < 4; ++i) static_cast<int32_t *>(positions->data)[i] = 3 * i + 1;
             return ggml_rope_ext(c, P(p, 0), positions, nullptr, 8, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                                  0.0f, 0.0f);
         }},
        {"pool_2d_avg", {{{6, 5, 2}}},
         [](ggml_context * c, V & p) { return ggml_pool_2d(c, P(p, 0), GGML_OP_POOL_AVG, 2, 2, 2, 2, 0, 0); }},
        {"mlp", {{{6, 5}}, {{5}}, {{5, 3}}, {{3}}, {{6, 9}}},
         [](ggml_context * c, V & p) {
             // softplus rather than relu: the differences must not step over a kink.
             ggml_tensor * h = ggml_softplus(c, ggml_add(c, ggml_mul_mat(c, P(p, 0), P(p, 4)), P(p, 1)));
             return ggml_add(c, ggml_mul_mat(c, P(p, 2), h), P(p, 3));
         }},
    };
}

class Gradient : public ::testing::TestWithParam<size_t> {};

TEST_P(Gradient, MatchesCentralDifferences) {
    const GradCase c = cases()[GetParam()];
    check_case(c, 1, 1);
    check_case(c, 2, 3);
}

INSTANTIATE_TEST_SUITE_P(Rules, Gradient, ::testing::Range(size_t(0), cases().size()),
                         [](const ::testing::TestParamInfo<size_t> & i) { return cases()[i.param].name; });

// y = sum(x * x * a): the graph structure, accumulation and reset.
struct Quadratic {
    CtxOwner      owner;
    ggml_tensor * x    = nullptr;
    ggml_tensor * a    = nullptr;
    ggml_tensor * loss = nullptr;
    ggml_tensor * acc  = nullptr;
    ggml_cgraph * gb   = nullptr;

    explicit Quadratic(bool with_acc) {
        ggml_context * ctx = owner.ctx;
        x                  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 3);
        a                  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 3);
        for (int i = 0; i < 15; ++i) {
            static_cast<float *>(x->data)[i] = 0.25f * float(i) - 1.0f;
            static_cast<float *>(a->data)[i] = 0.5f + 0.125f * float(i % 4);
        }
        ggml_set_param(x);
        loss = ggml_sum(ctx, ggml_mul(ctx, ggml_sqr(ctx, x), a));
        ggml_set_loss(loss);
        gb = ggml_new_graph_custom(ctx, 256, true);
        ggml_build_forward_expand(gb, loss);
        std::vector<ggml_tensor *> accs(size_t(ggml_graph_n_nodes(gb)), nullptr);
        if (with_acc) {
            acc = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 3);
            for (int i = 0; i < ggml_graph_n_nodes(gb); ++i) {
                if (ggml_graph_node(gb, i) == x) accs[size_t(i)] = acc;
            }
        }
        ggml_build_backward_expand(ctx, gb, accs.data());
    }
    float want(int i) const { // d loss / d x = 2 a x
        return 2.0f * static_cast<float *>(a->data)[i] * static_cast<float *>(x->data)[i];
    }
};

TEST(Autodiff, ParamsAreNodesAndConstantsHaveNoGradient) {
    Quadratic q(false);
    bool      x_is_node = false;
    for (int i = 0; i < ggml_graph_n_nodes(q.gb); ++i) x_is_node = x_is_node || ggml_graph_node(q.gb, i) == q.x;
    EXPECT_TRUE(x_is_node);
    EXPECT_EQ(ggml_graph_get_grad(q.gb, q.a), nullptr);
    EXPECT_NE(ggml_graph_get_grad(q.gb, q.x), nullptr);
    EXPECT_EQ(ggml_graph_get_grad_acc(q.gb, q.x), nullptr);
    // The loss has an accumulator, its gradient.
    ggml_tensor * lacc = ggml_graph_get_grad_acc(q.gb, q.loss);
    ASSERT_NE(lacc, nullptr);
    EXPECT_EQ(lacc, ggml_graph_get_grad(q.gb, q.loss));
    EXPECT_EQ(lacc->type, GGML_TYPE_F32);
    EXPECT_TRUE(ggml_is_scalar(lacc));
    EXPECT_EQ(std::string(ggml_graph_get_grad(q.gb, q.x)->name), "grad for " + std::string(q.x->name));
    // A tensor outside the graph has none.
    ggml_tensor * other = ggml_new_tensor_1d(q.owner.ctx, GGML_TYPE_F32, 3);
    EXPECT_EQ(ggml_graph_get_grad(q.gb, other), nullptr);
    EXPECT_EQ(ggml_graph_get_grad_acc(q.gb, other), nullptr);
    // A graph without gradients answers NULL.
    ggml_cgraph * gf = ggml_new_graph(q.owner.ctx);
    ggml_build_forward_expand(gf, q.loss);
    EXPECT_EQ(ggml_graph_get_grad(gf, q.x), nullptr);
    EXPECT_EQ(ggml_graph_get_grad_acc(gf, q.x), nullptr);
}

TEST(Autodiff, ResetSetsLossGradientToOne) {
    Quadratic q(false);
    ggml_tensor * lacc = ggml_graph_get_grad_acc(q.gb, q.loss);
    *static_cast<float *>(lacc->data) = 7.0f;
    ggml_graph_reset(q.gb);
    EXPECT_EQ(*static_cast<float *>(lacc->data), 1.0f);
    compute(q.gb, 2);
    const float * g = static_cast<const float *>(ggml_graph_get_grad(q.gb, q.x)->data);
    for (int i = 0; i < 15; ++i) EXPECT_FLOAT_EQ(g[i], q.want(i)) << i;
    ggml_graph_reset(nullptr); // no graph: nothing to do
}

TEST(Autodiff, AccumulatorSumsOverStepsUntilReset) {
    Quadratic q(true);
    EXPECT_EQ(ggml_graph_get_grad_acc(q.gb, q.x), q.acc);
    EXPECT_EQ(ggml_graph_get_grad(q.gb, q.x)->view_src != nullptr || ggml_graph_get_grad(q.gb, q.x) == q.acc, true);
    std::fill_n(static_cast<float *>(q.acc->data), 15, 123.0f);
    ggml_graph_reset(q.gb);
    for (int i = 0; i < 15; ++i) EXPECT_EQ(static_cast<float *>(q.acc->data)[i], 0.0f);
    for (int step = 1; step <= 3; ++step) {
        compute(q.gb, 3);
        for (int i = 0; i < 15; ++i) {
            EXPECT_NEAR(static_cast<float *>(q.acc->data)[i], float(step) * q.want(i), 1e-5f) << step << " " << i;
        }
    }
    ggml_graph_reset(q.gb);
    for (int i = 0; i < 15; ++i) EXPECT_EQ(static_cast<float *>(q.acc->data)[i], 0.0f);
    compute(q.gb, 1);
    for (int i = 0; i < 15; ++i) EXPECT_FLOAT_EQ(static_cast<float *>(q.acc->data)[i], q.want(i));
}

TEST(Autodiff, DupAndCopyKeepGradients) {
    Quadratic     q(true);
    ggml_cgraph * d = ggml_graph_dup(q.owner.ctx, q.gb, false);
    ASSERT_EQ(ggml_graph_n_nodes(d), ggml_graph_n_nodes(q.gb));
    for (int i = 0; i < ggml_graph_n_nodes(d); ++i) {
        EXPECT_EQ(ggml_graph_get_grad(d, ggml_graph_node(d, i)), ggml_graph_get_grad(q.gb, ggml_graph_node(q.gb, i)));
        EXPECT_EQ(ggml_graph_get_grad_acc(d, ggml_graph_node(d, i)), ggml_graph_get_grad_acc(q.gb, ggml_graph_node(q.gb, i)));
    }
    EXPECT_EQ(ggml_graph_get_grad_acc(d, q.x), q.acc);

    // A forward graph duplicated with force_grads has room for gradients, all NULL.
    ggml_cgraph * gf = ggml_new_graph_custom(q.owner.ctx, 256, false);
    ggml_build_forward_expand(gf, q.loss);
    ggml_cgraph * gd = ggml_graph_dup(q.owner.ctx, gf, true);
    EXPECT_EQ(ggml_graph_get_grad(gd, q.x), nullptr);
    ggml_build_backward_expand(q.owner.ctx, gd, nullptr);
    EXPECT_NE(ggml_graph_get_grad(gd, q.x), nullptr);

    // Copying into a graph with grads clears those it had.
    ggml_cgraph * g2 = ggml_new_graph_custom(q.owner.ctx, 256, true);
    ggml_graph_cpy(gf, g2);
    EXPECT_EQ(ggml_graph_get_grad(g2, q.x), nullptr);
    ggml_graph_cpy(q.gb, g2);
    EXPECT_EQ(ggml_graph_get_grad_acc(g2, q.x), q.acc);
}

TEST(Autodiff, RebuildingStartsFromNoGradients) {
    // Expanding a graph twice resets its gradients first: the second build
    // gives the same gradients, not twice the graph.
    Quadratic q(false);
    compute(q.gb, 1);
    ggml_graph_reset(q.gb);
    compute(q.gb, 1);
    const float * g = static_cast<const float *>(ggml_graph_get_grad(q.gb, q.x)->data);
    for (int i = 0; i < 15; ++i) EXPECT_FLOAT_EQ(g[i], q.want(i));
}

using AutodiffDeathTest = ::testing::Test;

TEST(AutodiffDeathTest, Preconditions) {
    CtxOwner       o;
    ggml_context * ctx = o.ctx;
    ggml_tensor *  x   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    ggml_tensor *  y   = ggml_sum(ctx, ggml_sqr(ctx, x));

    EXPECT_DEATH(ggml_set_loss(ggml_sqr(ctx, x)), "ggml_set_loss.*scalar");
    EXPECT_DEATH(ggml_set_param(y), "ggml_set_param");

    ggml_cgraph * no_grads = ggml_new_graph(ctx);
    ggml_build_forward_expand(no_grads, y);
    EXPECT_DEATH(ggml_build_backward_expand(ctx, no_grads, nullptr), "ggml_build_backward_expand.*grads = true");
    EXPECT_DEATH(ggml_graph_reset(no_grads), "ggml_graph_reset.*no gradients");

    ggml_cgraph * g = ggml_new_graph_custom(ctx, 64, true);
    ggml_build_forward_expand(g, y);
    EXPECT_DEATH(ggml_build_backward_expand(ctx, g, nullptr), "no trainable parameters");
    ggml_set_param(x);
    ggml_cgraph * g2 = ggml_new_graph_custom(ctx, 64, true);
    ggml_build_forward_expand(g2, y);
    EXPECT_DEATH(ggml_build_backward_expand(ctx, g2, nullptr), "no loss");

    ggml_cgraph * empty = ggml_new_graph_custom(ctx, 64, true);
    EXPECT_DEATH(ggml_build_backward_expand(ctx, empty, nullptr), "no nodes");

    // An operator without a gradient rule names itself.
    ggml_tensor * z = ggml_sum(ctx, ggml_tanh(ctx, x));
    ggml_set_loss(z);
    ggml_cgraph * g3 = ggml_new_graph_custom(ctx, 64, true);
    ggml_build_forward_expand(g3, z);
    EXPECT_DEATH(ggml_build_backward_expand(ctx, g3, nullptr), "no gradient for unary op TANH");
}

} // namespace
