// The meta device: tensors split over several member devices, graphs computed
// as one graph per member with partial sums reduced, compared with the same
// graph on one CPU backend.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstddef>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend_test_helpers.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "meta_test_util.h"

namespace {

using namespace loomtest::meta;

TEST(Meta, ApiValues) {
    EXPECT_EQ(int(GGML_BACKEND_DEVICE_TYPE_META), 4);
    EXPECT_EQ(GGML_BACKEND_META_MAX_DEVICES, 16);
    EXPECT_EQ(int(GGML_BACKEND_SPLIT_AXIS_MIRRORED), 10);
    EXPECT_EQ(int(GGML_BACKEND_SPLIT_AXIS_PARTIAL), 11);
    EXPECT_EQ(int(GGML_BACKEND_SPLIT_AXIS_NONE), 98);
    EXPECT_EQ(int(GGML_BACKEND_SPLIT_AXIS_UNKNOWN), 99);
    EXPECT_STREQ(ggml_backend_meta_split_axis_name(GGML_BACKEND_SPLIT_AXIS_2), "2");
    EXPECT_STREQ(ggml_backend_meta_split_axis_name(GGML_BACKEND_SPLIT_AXIS_PARTIAL), "PARTIAL");
    // ggml's layout
    EXPECT_EQ(offsetof(State, ne), 8u);
    EXPECT_EQ(offsetof(State, nr), 8u + 8u * 16 * GGML_BACKEND_META_MAX_DEVICES);
    EXPECT_EQ(offsetof(State, n_segments), offsetof(State, nr) + 4u * 16);
    EXPECT_EQ(sizeof(State), 2128u);
}

TEST(Meta, DeviceProperties) {
    Plan               plan;
    ggml_backend_dev_t devs[2] = {cpu_dev(), cpu_dev()};
    ggml_backend_dev_t meta    = ggml_backend_meta_device(devs, 2, plan_state, &plan);
    ASSERT_NE(meta, nullptr);
    EXPECT_EQ(meta, ggml_backend_meta_device(devs, 2, plan_state, &plan));
    EXPECT_EQ(ggml_backend_dev_type(meta), GGML_BACKEND_DEVICE_TYPE_META);
    const std::string cpu = ggml_backend_dev_name(cpu_dev());
    EXPECT_EQ(std::string(ggml_backend_dev_name(meta)), "Meta(" + cpu + "," + cpu + ")");
    size_t f = 0, t = 0, cf = 0, ct = 0;
    ggml_backend_dev_memory(meta, &f, &t);
    ggml_backend_dev_memory(cpu_dev(), &cf, &ct);
    EXPECT_EQ(t, 2 * ct);
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(meta);
    EXPECT_TRUE(ggml_backend_dev_supports_buft(meta, buft));
    EXPECT_FALSE(ggml_backend_dev_supports_buft(meta, ggml_backend_cpu_buffer_type()));
    EXPECT_FALSE(ggml_backend_buft_is_host(buft));
}

TEST(MetaDeathTest, BadArguments) {
    Plan               plan;
    ggml_backend_dev_t devs[1] = {cpu_dev()};
    EXPECT_DEATH(ggml_backend_meta_device(devs, 0, plan_state, &plan), "ggml_backend_meta_device: 0 devices");
    EXPECT_DEATH(ggml_backend_meta_device(devs, 1, nullptr, &plan), "ggml_backend_meta_device: NULL get_split_state");
    EXPECT_DEATH(ggml_backend_meta_split_axis_name(ggml_backend_meta_split_axis(5)), "5 is not a split axis");
}

// set_tensor / get_tensor round trips for each state, whole and in ranges,
// and a PARTIAL tensor reads as the sum of its members' values.

TEST(Meta, SetGetEveryState) {
    const std::vector<std::pair<std::string, State>> cases = {
        {"axis0", split(0, {3, 0, 4})},        {"axis1", split(1, {1, 2, 2})},
        {"axis2", split(2, {2, 1, 0})},        {"axis3", split(3, {1, 1, 0})},
        {"mirror", mirrored()},                {"seg", segmented(0, {{1, 1, 0}, {2, 0, 3}})},
    };
    Plan               plan;
    for (const auto & c : cases) plan.states[c.first] = c.second;
    ggml_backend_dev_t devs[3] = {cpu_dev(), cpu_dev(), cpu_dev()};
    ggml_backend_dev_t meta    = ggml_backend_meta_device(devs, 3, plan_state, &plan);
    ggml_init_params   ip{16 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *     ctx = ggml_init(ip);
    std::vector<ggml_tensor *> ts;
    for (const auto & c : cases) {
        ggml_tensor * t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 7, 5, 3, 2);
        ggml_set_name(t, c.first.c_str());
        ts.push_back(t);
    }
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_dev_buffer_type(meta));
    ASSERT_NE(buf, nullptr);
    for (size_t i = 0; i < ts.size(); ++i) {
        SCOPED_TRACE(cases[i].first);
        ggml_tensor *      t = ts[i];
        const size_t       n = size_t(ggml_nelements(t));
        std::vector<float> x = random_floats(n, uint32_t(i)), y(n, 0.0f);
        ggml_backend_tensor_set(t, x.data(), 0, ggml_nbytes(t));
        ggml_backend_tensor_get(t, y.data(), 0, ggml_nbytes(t));
        EXPECT_EQ(x, y);
        // A range that starts and ends inside rows.
        std::vector<float> z(n - 20, 0.0f);
        ggml_backend_tensor_get(t, z.data(), 9 * sizeof(float), z.size() * sizeof(float));
        EXPECT_TRUE(std::equal(z.begin(), z.end(), x.begin() + 9));
        std::vector<float> w = random_floats(30, 99);
        ggml_backend_tensor_set(t, w.data(), 11 * sizeof(float), w.size() * sizeof(float));
        std::copy(w.begin(), w.end(), x.begin() + 11);
        ggml_backend_tensor_get(t, y.data(), 0, ggml_nbytes(t));
        EXPECT_EQ(x, y);
    }
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

// Transfers of views of split tensors reach the root's bytes: a strided view
// of columns, a view of a row range that cuts members' pieces, a view of a
// segmented tensor; set, get and memset each.
TEST(Meta, TransfersOfViewsOfSplitTensors) {
    Plan plan;
    plan.states["rows"] = split(1, {2, 0, 3});
    plan.states["cols"] = split(0, {3, 4, 0});
    plan.states["seg"]  = segmented(1, {{1, 1, 0}, {0, 2, 1}});
    ggml_backend_dev_t devs[3] = {cpu_dev(), cpu_dev(), cpu_dev()};
    ggml_backend_dev_t meta    = ggml_backend_meta_device(devs, 3, plan_state, &plan);
    ggml_init_params   ip{32 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *     ctx = ggml_init(ip);
    std::vector<ggml_tensor *> roots, views;
    // Views the meta buffer can place (they keep the split axis whole):
    // columns of every row (strided) of the tensors split by rows, a range
    // of whole rows of the one split by columns.
    const struct {
        const char * name;
        int64_t      row0, rows, col0, cols;
    } cases[] = {{"rows", 0, 5, 2, 4}, {"cols", 1, 3, 0, 7}, {"seg", 0, 5, 1, 4}};
    for (const auto & c : cases) {
        ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 7, 5);
        ggml_set_name(t, c.name);
        roots.push_back(t);
        views.push_back(ggml_view_2d(ctx, t, c.cols, c.rows, t->nb[1],
                                     size_t(c.row0) * t->nb[1] + size_t(c.col0) * sizeof(float)));
    }
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_dev_buffer_type(meta));
    ASSERT_NE(buf, nullptr);
    for (size_t i = 0; i < roots.size(); ++i) {
        SCOPED_TRACE(ggml_get_name(roots[i]));
        ggml_tensor *      t = roots[i], *v = views[i];
        std::vector<float> x = random_floats(35, uint32_t(70 + i)), y(35);
        ggml_backend_tensor_set(t, x.data(), 0, ggml_nbytes(t));
        // The view's bytes are the root's from its offset: ggml_nbytes(v) of them.
        const size_t       first = v->view_offs / sizeof(float), count = ggml_nbytes(v) / sizeof(float);
        std::vector<float> got(count);
        ggml_backend_tensor_get(v, got.data(), 0, ggml_nbytes(v));
        EXPECT_TRUE(std::equal(got.begin(), got.end(), x.begin() + long(first)));
        // Writing the view's rows one at a time, then clearing two elements.
        for (int64_t r = 0; r < v->ne[1]; ++r) {
            std::vector<float> w = random_floats(size_t(v->ne[0]), uint32_t(80 + r));
            ggml_backend_tensor_set(v, w.data(), size_t(r) * v->nb[1], w.size() * sizeof(float));
            std::copy(w.begin(), w.end(), x.begin() + long(first + size_t(r) * 7));
        }
        ggml_backend_tensor_memset(v, 0, 2 * v->nb[1] + sizeof(float), 2 * sizeof(float));
        x[first + 2 * 7 + 1] = x[first + 2 * 7 + 2] = 0.0f;
        ggml_backend_tensor_get(t, y.data(), 0, ggml_nbytes(t));
        EXPECT_EQ(x, y);
    }
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

TEST(Meta, BadSplitStateIsAnError) {
    Plan plan;
    plan.states["w"] = split(1, {2, 2}); // adds up to 4, the tensor has 5
    ggml_backend_dev_t devs[2] = {cpu_dev(), cpu_dev()};
    ggml_backend_dev_t meta    = ggml_backend_meta_device(devs, 2, plan_state, &plan);
    ggml_init_params   ip{4 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *     ctx = ggml_init(ip);
    ggml_tensor *      w   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 5);
    ggml_set_name(w, "w");
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(ggml_backend_dev_buffer_type(meta), 1024);
    ASSERT_NE(buf, nullptr);
    EXPECT_NE(ggml_backend_tensor_alloc(buf, w, ggml_backend_buffer_get_base(buf)), GGML_STATUS_SUCCESS);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

struct BlockCase {
    std::vector<int64_t> heads, ff;
    bool                 sched;
};

class MetaBlock : public ::testing::TestWithParam<BlockCase> {};

TEST_P(MetaBlock, EqualsOneDevice) {
    const BlockCase &               c = GetParam();
    static std::map<std::string, Plan> plans; // the device keeps the pointer
    std::string key;
    for (int64_t h : c.heads) key += std::to_string(h) + ",";
    for (int64_t f : c.ff) key += std::to_string(f) + ",";
    plans[key]                        = block_plan(c.heads, c.ff);
    std::vector<ggml_backend_dev_t> devs(c.heads.size(), cpu_dev());
    ggml_backend_dev_t meta = ggml_backend_meta_device(devs.data(), devs.size(), plan_state, &plans[key]);
    ggml_backend_t     mb   = ggml_backend_dev_init(meta, nullptr);
    ASSERT_NE(mb, nullptr);
    ggml_status        st = GGML_STATUS_FAILED;
    std::vector<float> y  = run_block(mb, ggml_backend_dev_buffer_type(meta), c.sched, &st);
    ASSERT_EQ(st, GGML_STATUS_SUCCESS);
    expect_close(y, reference_block());
    ggml_backend_free(mb);
}

INSTANTIATE_TEST_SUITE_P(Splits, MetaBlock,
                         ::testing::Values(BlockCase{{3, 3}, {9, 9}, false}, BlockCase{{2, 4}, {4, 14}, false},
                                           BlockCase{{2, 2, 2}, {6, 6, 6}, false},
                                           BlockCase{{4, 2, 0}, {10, 0, 8}, false},
                                           BlockCase{{3, 3}, {9, 9}, true}, BlockCase{{1, 3, 2}, {5, 7, 6}, true}));

// A view of a partial sum (the last row of a product over a split inner
// dimension) reads the sum once: the row of the whole product.
TEST(Meta, ViewOfAPartialSum) {
    constexpr int64_t K = 12, N = 5, M = 4;
    static Plan       plan;
    plan.states["w"] = split(0, {4, 8, 0});
    plan.states["a"] = split(0, {4, 8, 0});
    MetaGraph mg(3, &plan, 32);
    ASSERT_NE(mg.backend, nullptr);
    ggml_context * ctx = mg.ctx;
    ggml_tensor *    w   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    ggml_tensor *    a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
    ggml_set_name(w, "w");
    ggml_set_name(a, "a");
    ggml_tensor * y   = ggml_mul_mat(ctx, w, a); // [N, M], partial on each member
    ggml_tensor * row = ggml_view_2d(ctx, y, N, 1, y->nb[1], size_t(M - 1) * y->nb[1]);
    ggml_tensor * out = ggml_scale(ctx, row, 2.0f);
    ggml_cgraph * gf  = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ASSERT_TRUE(mg.alloc());
    const std::vector<float> wv = random_floats(size_t(K * N), 11), av = random_floats(size_t(K * M), 12);
    ggml_backend_tensor_set(w, wv.data(), 0, ggml_nbytes(w));
    ggml_backend_tensor_set(a, av.data(), 0, ggml_nbytes(a));
    ASSERT_EQ(ggml_backend_graph_compute(mg.backend, gf), GGML_STATUS_SUCCESS);
    std::vector<float> got(N);
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    for (int64_t n = 0; n < N; ++n) {
        double ref = 0;
        for (int64_t k = 0; k < K; ++k) ref += double(wv[size_t(n * K + k)]) * av[size_t((M - 1) * K + k)];
        EXPECT_NEAR(got[size_t(n)], 2.0 * ref, 1e-4) << "column " << n;
    }
}

// A mixture of experts' products over three members, one with an empty
// slice: the up experts split by their rows give the hidden values split by
// rows, the down experts split by K then give a partial sum, reduced before
// the scale; the expert ids are mirrored. With the biases gpt-oss has: the
// up experts' bias split with their rows (add_id of row-split values), the
// down experts' bias declared a partial sum (llama.cpp's state for it),
// added to the reduced down product.
class MetaExperts : public ::testing::TestWithParam<bool> {};

TEST_P(MetaExperts, SplitByRowsThenByK) {
    const bool        biases = GetParam();
    constexpr int64_t K = 6, F = 10, E = 3, U = 2, T = 4;
    static Plan       plan;
    plan.states["up"]     = split(1, {4, 6, 0});
    plan.states["up_b"]   = split(0, {4, 6, 0});
    plan.states["down"]   = split(0, {4, 6, 0});
    State partial         = mirrored();
    partial.axis          = GGML_BACKEND_SPLIT_AXIS_PARTIAL;
    plan.states["down_b"] = partial;
    MetaGraph mg(3, &plan, 32);
    ASSERT_NE(mg.backend, nullptr);
    ggml_context * ctx    = mg.ctx;
    ggml_tensor *  up     = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, F, E);
    ggml_tensor *  up_b   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, F, E);
    ggml_tensor *  down   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, F, K, E);
    ggml_tensor *  down_b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, E);
    ggml_tensor *  x      = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, 1, T);
    ggml_tensor *  ids    = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, U, T);
    ggml_set_name(up, "up");
    ggml_set_name(up_b, "up_b");
    ggml_set_name(down, "down");
    ggml_set_name(down_b, "down_b");
    ggml_tensor * h = ggml_mul_mat_id(ctx, up, x, ids); // [F, U, T], rows split
    if (biases) h = ggml_add_id(ctx, h, up_b, ids);
    ggml_tensor * y = ggml_mul_mat_id(ctx, down, h, ids); // [K, U, T], partial
    if (biases) y = ggml_add_id(ctx, y, down_b, ids);
    ggml_tensor * out = ggml_scale(ctx, y, 0.5f);
    ASSERT_TRUE(mg.alloc());
    // The graph is built after the allocation: its flags reach the slices.
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    const std::vector<float> uv = random_floats(size_t(K * F * E), 21), dv = random_floats(size_t(F * K * E), 22),
                             xv = random_floats(size_t(K * T), 23), ubv = random_floats(size_t(F * E), 24),
                             dbv = random_floats(size_t(K * E), 25);
    const std::vector<int32_t> iv = {0, 2, 1, 0, 2, 2, 1, 0}; // two experts per token
    ggml_backend_tensor_set(up, uv.data(), 0, ggml_nbytes(up));
    ggml_backend_tensor_set(up_b, ubv.data(), 0, ggml_nbytes(up_b));
    ggml_backend_tensor_set(down, dv.data(), 0, ggml_nbytes(down));
    ggml_backend_tensor_set(down_b, dbv.data(), 0, ggml_nbytes(down_b));
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ggml_backend_tensor_set(ids, iv.data(), 0, ggml_nbytes(ids));
    // The partial leaf reads back as the value set.
    std::vector<float> back(dbv.size());
    ggml_backend_tensor_get(down_b, back.data(), 0, ggml_nbytes(down_b));
    EXPECT_EQ(back, dbv);
    ASSERT_EQ(ggml_backend_graph_compute(mg.backend, gf), GGML_STATUS_SUCCESS);
    std::vector<float> got(size_t(K * U * T));
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t u = 0; u < U; ++u) {
            const int64_t       e = iv[size_t(t * U + u)];
            std::vector<double> hid(F);
            for (int64_t f = 0; f < F; ++f) {
                hid[size_t(f)] = biases ? ubv[size_t(e * F + f)] : 0.0;
                for (int64_t k = 0; k < K; ++k) hid[size_t(f)] += double(uv[size_t((e * F + f) * K + k)]) * xv[size_t(t * K + k)];
            }
            for (int64_t k = 0; k < K; ++k) {
                double ref = biases ? dbv[size_t(e * K + k)] : 0.0;
                for (int64_t f = 0; f < F; ++f) ref += double(dv[size_t((e * K + k) * F + f)]) * hid[size_t(f)];
                EXPECT_NEAR(got[size_t((t * U + u) * K + k)], 0.5 * ref, 1e-4) << "token " << t << " slot " << u;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Meta, MetaExperts, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool> & i) { return i.param ? "WithBiases" : "NoBiases"; });

// A concatenation along dimension 0 of sources whose channels (dimension
// 1) are split alike, as a recurrent layer's convolution input (the state's
// columns, then the new tokens'); one along the split axis is refused.
TEST(Meta, ConcatOfSourcesSplitAlike) {
    constexpr int64_t C = 6;
    static Plan       plan;
    plan.states["state"] = split(1, {2, 4});
    plan.states["x"]     = split(1, {2, 4});
    MetaGraph mg(2, &plan, 16);
    ASSERT_NE(mg.backend, nullptr);
    ggml_context * ctx   = mg.ctx;
    ggml_tensor *  state = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, C);
    ggml_tensor *  x     = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, C);
    ggml_set_name(state, "state");
    ggml_set_name(x, "x");
    ggml_tensor * out = ggml_scale(ctx, ggml_concat(ctx, state, x, 0), 2.0f); // [7, C]
    ggml_cgraph * gf  = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ASSERT_TRUE(mg.alloc());
    const std::vector<float> sv = random_floats(3 * C, 101), xv = random_floats(4 * C, 102);
    ggml_backend_tensor_set(state, sv.data(), 0, ggml_nbytes(state));
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ASSERT_EQ(ggml_backend_graph_compute(mg.backend, gf), GGML_STATUS_SUCCESS);
    std::vector<float> got(7 * C);
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    for (int64_t c = 0; c < C; ++c) {
        for (int64_t i = 0; i < 7; ++i) {
            const float want = 2.0f * (i < 3 ? sv[size_t(c * 3 + i)] : xv[size_t(c * 4 + i - 3)]);
            EXPECT_EQ(got[size_t(c * 7 + i)], want) << "channel " << c << " column " << i;
        }
    }
}

TEST(Meta, ConcatAlongTheSplitAxisIsRefused) {
    static Plan plan;
    plan.states["a"] = split(1, {2, 4});
    plan.states["b"] = split(1, {1, 1});
    MetaGraph mg(2, &plan, 16);
    ggml_context * ctx = mg.ctx;
    ggml_tensor *  a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 6);
    ggml_tensor *  b   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 3, 2);
    ggml_set_name(a, "a");
    ggml_set_name(b, "b");
    ggml_concat(ctx, a, b, 1);
    EXPECT_FALSE(mg.alloc()) << "the concatenation's slices would not be the pieces of its result";
}

// The recurrent convolution over time split by channels: the input
// [d_conv - 1 + T, C] and the kernel [d_conv, C] split alike by channels give
// [C, T] split by channels.
TEST(Meta, SsmConvSplitByChannels) {
    constexpr int64_t DC = 3, T = 4, C = 6;
    static Plan       plan;
    plan.states["sx"]     = split(1, {2, 4});
    plan.states["kernel"] = split(1, {2, 4});
    MetaGraph mg(2, &plan, 16);
    ASSERT_NE(mg.backend, nullptr);
    ggml_context * ctx    = mg.ctx;
    ggml_tensor *  sx     = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, DC - 1 + T, C, 1);
    ggml_tensor *  kernel = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, DC, C);
    ggml_set_name(sx, "sx");
    ggml_set_name(kernel, "kernel");
    ggml_tensor * out = ggml_scale(ctx, ggml_ssm_conv(ctx, sx, kernel), 2.0f); // [C, T, 1]
    ggml_cgraph * gf  = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ASSERT_TRUE(mg.alloc());
    const std::vector<float> xv = random_floats(size_t((DC - 1 + T) * C), 111), kv = random_floats(size_t(DC * C), 112);
    ggml_backend_tensor_set(sx, xv.data(), 0, ggml_nbytes(sx));
    ggml_backend_tensor_set(kernel, kv.data(), 0, ggml_nbytes(kernel));
    ASSERT_EQ(ggml_backend_graph_compute(mg.backend, gf), GGML_STATUS_SUCCESS);
    std::vector<float> got(size_t(C * T));
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t c = 0; c < C; ++c) {
            double want = 0;
            for (int64_t k = 0; k < DC; ++k) want += double(xv[size_t(c * (DC - 1 + T) + t + k)]) * kv[size_t(c * DC + k)];
            EXPECT_NEAR(got[size_t(t * C + c)], 2.0 * want, 1e-5) << "channel " << c << " step " << t;
        }
    }
}

// Rope, then its inverse (DeepSeek 4 takes the rotation off its attention
// output with ROPE_BACK), on heads split over two members: the input again.
TEST(Meta, RopeBackUndoesRopeOnSplitHeads) {
    constexpr int64_t D = 8, H = 4, T = 3;
    static Plan       plan;
    plan.states["x"] = split(1, {1, 3});
    MetaGraph mg(2, &plan, 16);
    ASSERT_NE(mg.backend, nullptr);
    ggml_context * ctx = mg.ctx;
    ggml_tensor *  x   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, H, T);
    ggml_tensor *  pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, T);
    ggml_set_name(x, "x");
    ggml_tensor * r   = ggml_rope_ext(ctx, x, pos, nullptr, D, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
    ggml_tensor * out = ggml_rope_ext_back(ctx, r, pos, nullptr, D, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                                           0.0f, 0.0f);
    ggml_cgraph * gf  = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ASSERT_TRUE(mg.alloc());
    const std::vector<float> xv = random_floats(size_t(D * H * T), 121);
    const int32_t            pv[T] = {3, 17, 40};
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ggml_backend_tensor_set(pos, pv, 0, sizeof(pv));
    ASSERT_EQ(ggml_backend_graph_compute(mg.backend, gf), GGML_STATUS_SUCCESS);
    std::vector<float> got(xv.size()), rotated(xv.size());
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    ggml_backend_tensor_get(r, rotated.data(), 0, ggml_nbytes(r));
    EXPECT_NE(rotated, xv) << "the positions rotate the rows";
    for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(got[i], xv[i], 1e-5) << i;
}

// A scheduler over the meta device and the CPU: state rows (weights on the
// meta device) picked through a view of a CPU input, as llama.cpp's
// recurrent models do with rs_s_copy. The view stays on the CPU; the meta
// backend's split holds it and skips it.
TEST(Meta, RowsPickedThroughAViewOfACpuInput) {
    constexpr int64_t D = 6, R = 5, N = 3;
    static Plan       plan;
    plan.states["states"] = split(0, {2, 4});
    MetaGraph mg(2, &plan, 16);
    ASSERT_NE(mg.backend, nullptr);
    ggml_tensor * states = ggml_new_tensor_2d(mg.ctx, GGML_TYPE_F32, D, R);
    ggml_set_name(states, "states");
    ASSERT_TRUE(mg.alloc());
    ggml_backend_buffer_set_usage(mg.buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    const std::vector<float> sv = random_floats(size_t(D * R), 131);
    ggml_backend_tensor_set(states, sv.data(), 0, ggml_nbytes(states));

    ggml_context * ctx = ggml_init({16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
    ggml_tensor *  ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, R);
    ggml_set_input(ids);
    ggml_tensor * out = ggml_scale(ctx, ggml_get_rows(ctx, states, ggml_view_1d(ctx, ids, N, 0)), 2.0f);
    ggml_set_output(out);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out);
    ggml_backend_t       cpu         = ggml_backend_cpu_init();
    ggml_backend_t       backends[2] = {mg.backend, cpu};
    ggml_backend_sched_t sched       = ggml_backend_sched_new(backends, nullptr, 2, 64, false, true);
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, g));
    const int32_t iv[R] = {4, 0, 2, 1, 3};
    ggml_backend_tensor_set(ids, iv, 0, sizeof(iv));
    ASSERT_EQ(ggml_backend_sched_graph_compute(sched, g), GGML_STATUS_SUCCESS);
    std::vector<float> got(size_t(D * N));
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    for (int64_t r = 0; r < N; ++r) {
        for (int64_t d = 0; d < D; ++d) EXPECT_EQ(got[size_t(r * D + d)], 2.0f * sv[size_t(iv[r] * D + d)]) << r;
    }
    ggml_backend_sched_free(sched);
    ggml_backend_free(cpu);
    ggml_free(ctx);
}

// A fused QKV product split by heads in three segments (Q, K, V), viewed
// as llama.cpp's GPT-2 and Falcon graphs view it: [head dim, heads, tokens]
// per part, and [head dim * heads, tokens] of such a view; each member
// holds whole heads of each part, one member none of V's.
TEST(Meta, FusedQkvViewedByHeads) {
    constexpr int64_t D = 4, H = 3, K = 5, T = 2, W = 3 * H * D;
    static Plan       plan;
    plan.states["wqkv"] = segmented(1, {{2 * D, 1 * D}, {1 * D, 2 * D}, {3 * D, 0}});
    MetaGraph mg(2, &plan, 32);
    ASSERT_NE(mg.backend, nullptr);
    ggml_context * ctx = mg.ctx;
    ggml_tensor *    wqkv = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, W);
    ggml_tensor *    x    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, T);
    ggml_set_name(wqkv, "wqkv");
    ggml_tensor * cur  = ggml_mul_mat(ctx, wqkv, x); // [W, T], split by heads
    const size_t  es   = sizeof(float);
    ggml_tensor * q    = ggml_view_3d(ctx, cur, D, H, T, D * es, cur->nb[1], 0);
    ggml_tensor * k    = ggml_view_3d(ctx, cur, D, H, T, D * es, cur->nb[1], H * D * es);
    ggml_tensor * v    = ggml_view_3d(ctx, cur, D, H, T, D * es, cur->nb[1], 2 * H * D * es);
    ggml_tensor * v2   = ggml_view_2d(ctx, v, D * H, T, cur->nb[1], 0); // the heads merged again
    ggml_tensor * outq = ggml_scale(ctx, q, 2.0f);
    ggml_tensor * outk = ggml_scale(ctx, k, 3.0f);
    ggml_tensor * outv = ggml_scale(ctx, v2, 4.0f);
    ggml_cgraph * gf   = ggml_new_graph(ctx);
    for (ggml_tensor * o : {outq, outk, outv}) ggml_build_forward_expand(gf, o);
    ASSERT_TRUE(mg.alloc());
    const std::vector<float> wv = random_floats(size_t(K * W), 31), xv = random_floats(size_t(K * T), 32);
    ggml_backend_tensor_set(wqkv, wv.data(), 0, ggml_nbytes(wqkv));
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ASSERT_EQ(ggml_backend_graph_compute(mg.backend, gf), GGML_STATUS_SUCCESS);
    auto want = [&](int64_t row, int64_t t) {
        double r = 0;
        for (int64_t kk = 0; kk < K; ++kk) r += double(wv[size_t(row * K + kk)]) * xv[size_t(t * K + kk)];
        return r;
    };
    const struct {
        ggml_tensor * out;
        int64_t       part;
        double        scale;
    } parts[] = {{outq, 0, 2.0}, {outk, 1, 3.0}, {outv, 2, 4.0}};
    for (const auto & pc : parts) {
        std::vector<float> got(size_t(H * D * T));
        ggml_backend_tensor_get(pc.out, got.data(), 0, ggml_nbytes(pc.out));
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t e = 0; e < H * D; ++e) {
                EXPECT_NEAR(got[size_t(t * H * D + e)], pc.scale * want(pc.part * H * D + e, t), 1e-4)
                    << "part " << pc.part << " element " << e << " token " << t;
            }
        }
    }
}

// A fused gate and up product split as two segments of equal shares, then
// ggml_swiglu of it (one source): each member computes its share of the
// unit's rows; one member has none.
TEST(Meta, OneSourceSwigluOfAFusedGateAndUp) {
    constexpr int64_t K = 6, F = 7, T = 3;
    static Plan       plan;
    plan.states["wgu"] = segmented(1, {{4, 3, 0}, {4, 3, 0}});
    MetaGraph mg(3, &plan, 32);
    ASSERT_NE(mg.backend, nullptr);
    ggml_context * ctx = mg.ctx;
    ggml_tensor *    wgu = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, 2 * F);
    ggml_tensor *    x   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, T);
    ggml_set_name(wgu, "wgu");
    ggml_tensor * out = ggml_scale(ctx, ggml_swiglu(ctx, ggml_mul_mat(ctx, wgu, x)), 2.0f); // [F, T]
    ggml_cgraph * gf  = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ASSERT_TRUE(mg.alloc());
    const std::vector<float> wv = random_floats(size_t(K * 2 * F), 41), xv = random_floats(size_t(K * T), 42);
    ggml_backend_tensor_set(wgu, wv.data(), 0, ggml_nbytes(wgu));
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ASSERT_EQ(ggml_backend_graph_compute(mg.backend, gf), GGML_STATUS_SUCCESS);
    std::vector<float> got(size_t(F * T));
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    auto dot = [&](int64_t row, int64_t t) {
        double r = 0;
        for (int64_t k = 0; k < K; ++k) r += double(wv[size_t(row * K + k)]) * xv[size_t(t * K + k)];
        return r;
    };
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t f = 0; f < F; ++f) {
            const double g = dot(f, t), u = dot(F + f, t);
            EXPECT_NEAR(got[size_t(t * F + f)], 2.0 * g / (1.0 + std::exp(-g)) * u, 1e-4) << "row " << f << " token " << t;
        }
    }
}

// A single KV head (multi-query attention) held whole by one member, the
// other with an empty slice: the K product reshaped to [head dim, 1, tokens]
// is split by heads, not inside the head, so the per-head RMS norm (Qwen 3's
// k_norm) and its weight apply on the member that has the head.
TEST(Meta, SingleKvHeadNormedOnTheMemberThatHoldsIt) {
    constexpr int64_t D = 8, K = 6, T = 3;
    constexpr float   kEps = 1e-6f;
    static Plan       plan;
    plan.states["wk"] = split(1, {D, 0});
    MetaGraph mg(2, &plan, 32);
    ASSERT_NE(mg.backend, nullptr);
    ggml_context * ctx = mg.ctx;
    ggml_tensor *    wk  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, D);
    ggml_tensor *    nw  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, D);
    ggml_tensor *    x   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, T);
    ggml_set_name(wk, "wk");
    ggml_tensor * k   = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, wk, x), D, 1, T);
    ggml_tensor * kn  = ggml_mul(ctx, ggml_rms_norm(ctx, k, kEps), nw);
    ggml_tensor * out = ggml_scale(ctx, ggml_reshape_2d(ctx, kn, D, T), 3.0f);
    ggml_cgraph * gf  = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ASSERT_TRUE(mg.alloc());
    const std::vector<float> wv = random_floats(size_t(K * D), 61), nv = random_floats(size_t(D), 62),
                             xv = random_floats(size_t(K * T), 63);
    ggml_backend_tensor_set(wk, wv.data(), 0, ggml_nbytes(wk));
    ggml_backend_tensor_set(nw, nv.data(), 0, ggml_nbytes(nw));
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ASSERT_EQ(ggml_backend_graph_compute(mg.backend, gf), GGML_STATUS_SUCCESS);
    std::vector<float> got(size_t(D * T));
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    for (int64_t t = 0; t < T; ++t) {
        std::vector<double> row(D);
        double              ss = 0;
        for (int64_t d = 0; d < D; ++d) {
            for (int64_t kk = 0; kk < K; ++kk) row[size_t(d)] += double(wv[size_t(d * K + kk)]) * xv[size_t(t * K + kk)];
            ss += row[size_t(d)] * row[size_t(d)];
        }
        const double inv = 1.0 / std::sqrt(ss / D + kEps);
        for (int64_t d = 0; d < D; ++d) {
            EXPECT_NEAR(got[size_t(t * D + d)], 3.0 * row[size_t(d)] * inv * nv[size_t(d)], 1e-4) << "token " << t;
        }
    }
}

// Attention as llama.cpp builds it without a KV cache (Dream, LLaDA), over
// two members holding two query heads and one KV head each: q, k and v
// products split by heads, permuted to [head dim, tokens, heads], and
//  - with flash attention: k and v cast to F16 (ggml_cast: a copy whose
//    destination is the result itself), sinks split with the heads;
//  - without: kq = k x q (one KV head for two query heads on each member),
//    soft max with the sinks split with the heads, then v x kq.
// Also with a single KV head (multi-query, Qwen 3's test model): all four
// query heads and the KV head on one member, the other empty, k and v
// [D, T, 1] split along dimension 0 as a one-head cache is; and with one
// KV head that every member holds (k and v mirrored, DeepSeek 4).
// Each gives the naive attention of one device.
// How the KV heads lie: two, split with the query heads; one, held by the
// member that has every query head; one that every member holds (DeepSeek
// 4's shared KV: k and v mirrored).
enum class Kv { two_split, one_held, one_shared };

struct AttentionCase {
    bool flash;
    Kv   kv;
};

class MetaAttention : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(MetaAttention, GroupedHeadsWithSinks) {
    const bool        flash = GetParam().flash, single = GetParam().kv == Kv::one_held;
    const bool        shared = GetParam().kv == Kv::one_shared;
    constexpr int64_t D = 4, H = 4, K = 5, T = 3;
    const int64_t     HKV = single || shared ? 1 : 2;
    constexpr float   kScale = 0.5f;
    static Plan       plan;
    plan.states["wq"]    = single ? split(1, {4 * D, 0}) : split(1, {2 * D, 2 * D});
    plan.states["wk"]    = single ? split(1, {D, 0}) : shared ? mirrored() : split(1, {D, D});
    plan.states["wv"]    = plan.states["wk"];
    plan.states["sinks"] = single ? split(0, {4, 0}) : split(0, {2, 2});
    MetaGraph mg(2, &plan, 64);
    ASSERT_NE(mg.backend, nullptr);
    ggml_context * ctx = mg.ctx;
    ggml_tensor *    wq    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, D * H);
    ggml_tensor *    wk    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, D * HKV);
    ggml_tensor *    wv    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, D * HKV);
    ggml_tensor *    sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, H);
    ggml_tensor *    x     = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, T);
    ggml_set_name(wq, "wq");
    ggml_set_name(wk, "wk");
    ggml_set_name(wv, "wv");
    ggml_set_name(sinks, "sinks");
    auto heads = [&](ggml_tensor * w, int64_t n) {
        return ggml_permute(ctx, ggml_reshape_3d(ctx, ggml_mul_mat(ctx, w, x), D, n, T), 0, 2, 1, 3);
    };
    ggml_tensor * q = heads(wq, H);   // [D, T, H]
    // [D, T, HKV]; one KV head as a cache of one head is viewed: [D, T, 1]
    // of the product [D, T], split along dimension 0 and held by one member.
    auto kv_of = [&](ggml_tensor * w) {
        return single || shared ? ggml_reshape_3d(ctx, ggml_mul_mat(ctx, w, x), D, T, 1) : heads(w, HKV);
    };
    ggml_tensor * k = kv_of(wk);
    ggml_tensor * v = kv_of(wv);
    ggml_tensor * att;                // [D, H, T]
    if (flash) {
        att = ggml_flash_attn_ext(ctx, q, ggml_cast(ctx, k, GGML_TYPE_F16), ggml_cast(ctx, v, GGML_TYPE_F16), nullptr,
                                  kScale, 0.0f, 0.0f);
        ggml_flash_attn_ext_add_sinks(att, sinks);
        ggml_flash_attn_ext_set_prec(att, GGML_PREC_F32);
    } else {
        ggml_tensor * kq = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, k, q), nullptr, kScale, 0.0f); // [T, T, H]
        ggml_soft_max_add_sinks(kq, sinks);
        ggml_tensor * vt = ggml_cont(ctx, ggml_transpose(ctx, v)); // [T, D, HKV]
        att              = ggml_cont(ctx, ggml_permute(ctx, ggml_mul_mat(ctx, vt, kq), 0, 2, 1, 3));
    }
    ggml_tensor * out = ggml_scale(ctx, ggml_reshape_2d(ctx, att, D * H, T), 2.0f);
    ggml_cgraph * gf  = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ASSERT_TRUE(mg.alloc());
    const std::vector<float> qv = random_floats(size_t(K * D * H), 51), kv = random_floats(size_t(K * D * HKV), 52),
                             vv = random_floats(size_t(K * D * HKV), 53), xv = random_floats(size_t(K * T), 54),
                             sv = {0.3f, -1.0f, 2.0f, 0.0f};
    ggml_backend_tensor_set(wq, qv.data(), 0, ggml_nbytes(wq));
    ggml_backend_tensor_set(wk, kv.data(), 0, ggml_nbytes(wk));
    ggml_backend_tensor_set(wv, vv.data(), 0, ggml_nbytes(wv));
    ggml_backend_tensor_set(sinks, sv.data(), 0, ggml_nbytes(sinks));
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ASSERT_EQ(ggml_backend_graph_compute(mg.backend, gf), GGML_STATUS_SUCCESS);
    std::vector<float> got(size_t(D * H * T));
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    // Naive attention in double precision: row r of w times token t's x.
    auto prod = [&](const std::vector<float> & w, int64_t r, int64_t t) {
        double a = 0;
        for (int64_t kk = 0; kk < K; ++kk) a += double(w[size_t(r * K + kk)]) * xv[size_t(t * K + kk)];
        return a;
    };
    const double tol = flash ? 2e-2 : 1e-4; // F16 k and v
    for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / HKV);
        for (int64_t tq = 0; tq < T; ++tq) {
            std::vector<double> s(T);
            double              m = sv[size_t(h)];
            for (int64_t tk = 0; tk < T; ++tk) {
                for (int64_t d = 0; d < D; ++d) s[size_t(tk)] += prod(qv, h * D + d, tq) * prod(kv, g * D + d, tk);
                s[size_t(tk)] *= kScale;
                m = std::max(m, s[size_t(tk)]);
            }
            double z = std::exp(sv[size_t(h)] - m);
            for (double & e : s) z += (e = std::exp(e - m));
            for (int64_t d = 0; d < D; ++d) {
                double o = 0;
                for (int64_t tk = 0; tk < T; ++tk) o += s[size_t(tk)] / z * prod(vv, g * D + d, tk);
                EXPECT_NEAR(got[size_t(tq * D * H + h * D + d)], 2.0 * o, tol)
                    << "head " << h << " token " << tq << " element " << d;
            }
        }
    }
}

std::string attention_case_name(const ::testing::TestParamInfo<AttentionCase> & i) {
    static const char * const kv[] = {"TwoKvHeads", "OneKvHead", "SharedKvHead"};
    return std::string(i.param.flash ? "Flash" : "SoftMax") + kv[int(i.param.kv)];
}

INSTANTIATE_TEST_SUITE_P(Meta, MetaAttention,
                         ::testing::Values(AttentionCase{false, Kv::two_split}, AttentionCase{true, Kv::two_split},
                                           AttentionCase{false, Kv::one_held}, AttentionCase{true, Kv::one_held},
                                           AttentionCase{false, Kv::one_shared}, AttentionCase{true, Kv::one_shared}),
                         attention_case_name);

// The members compute side by side: a custom op on mirrored data, which
// every member runs, waits (up to 10 s) until the other member is inside it
// too. Members called one after the other would never meet.
std::atomic<int>  g_inside{0};
std::atomic<bool> g_met{true};

void meet_then_double(ggml_tensor * dst, const ggml_tensor * a, int ith, int nth, void *) {
    (void) ith;
    (void) nth;
    g_inside.fetch_add(1);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (g_inside.load() < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (g_inside.load() < 2) g_met = false;
    for (int64_t i = 0; i < ggml_nelements(dst); ++i) {
        static_cast<float *>(dst->data)[i] = 2.0f * static_cast<const float *>(a->data)[i];
    }
}

TEST(Meta, MembersComputeSideBySide) {
    static Plan plan; // everything mirrored
    MetaGraph   mg(2, &plan, 8);
    ASSERT_NE(mg.backend, nullptr);
    ggml_tensor * x   = ggml_new_tensor_1d(mg.ctx, GGML_TYPE_F32, 8);
    ggml_tensor * out = ggml_map_custom1(mg.ctx, x, meet_then_double, 1, nullptr);
    ggml_cgraph * gf  = ggml_new_graph(mg.ctx);
    ggml_build_forward_expand(gf, out);
    ASSERT_TRUE(mg.alloc());
    const std::vector<float> xv = random_floats(8, 141);
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    g_inside = 0;
    g_met    = true;
    ASSERT_EQ(ggml_backend_graph_compute(mg.backend, gf), GGML_STATUS_SUCCESS);
    EXPECT_EQ(g_inside.load(), 2);
    EXPECT_TRUE(g_met.load()) << "one member ran the op alone";
    std::vector<float> got(8);
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], 2.0f * xv[i]);
}

// Members whose memory is not host memory (the test device): transfers and
// sums go through the buffer interface; also a meta device over two
// different kinds of device.
class MetaTestDev : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_NE(loomtest::testdev_reg(), nullptr);
        loomtest::testdev_reset();
        dev0_ = ggml_backend_dev_by_name("TestDev0");
        dev1_ = ggml_backend_dev_by_name("TestDev1");
        ASSERT_NE(dev0_, nullptr);
        ASSERT_NE(dev1_, nullptr);
    }
    void TearDown() override { loomtest::testdev_reset(); }

    void expect_block(std::vector<ggml_backend_dev_t> devs, Plan * plan, bool sched) {
        expect_block_on(devs, plan, sched);
    }

    ggml_backend_dev_t dev0_ = nullptr, dev1_ = nullptr;
};

TEST_F(MetaTestDev, TwoTestDevices) {
    static Plan plan = block_plan({2, 4}, {11, 7});
    expect_block({dev0_, dev1_}, &plan, false);
    expect_block({dev0_, dev1_}, &plan, true);
}

// A registry with collective operations: the meta backend's all-reduces go
// through them.
TEST_F(MetaTestDev, AllReduceThroughTheMembersCommFunctions) {
    auto count = reinterpret_cast<size_t (*)()>(
        ggml_backend_reg_get_proc_address(loomtest::testdev_reg(), "loom_testdev_comm_allreduces"));
    ASSERT_NE(count, nullptr);
    static Plan  plan   = block_plan({2, 4}, {11, 7});
    const size_t before = count();
    expect_block({dev0_, dev1_}, &plan, false);
    EXPECT_EQ(count(), before); // not offered
    ASSERT_TRUE(loomtest::testdev_configure(dev0_, "comm", "1"));
    expect_block({dev0_, dev1_}, &plan, false);
    EXPECT_EQ(count(), before + 2); // the attention output and the FFN output
}

TEST_F(MetaTestDev, TestDeviceAndCpu) {
    static Plan plan = block_plan({3, 1, 2}, {0, 9, 9});
    expect_block({dev0_, cpu_dev(), dev1_}, &plan, true);
}

TEST_F(MetaTestDev, MemberOutOfMemoryIsAnAllocationFailure) {
    static Plan plan = block_plan({3, 3}, {9, 9});
    ASSERT_TRUE(loomtest::testdev_configure(dev1_, "memory", "4096"));
    ggml_backend_dev_t devs[2] = {dev0_, dev1_};
    ggml_backend_dev_t meta    = ggml_backend_meta_device(devs, 2, plan_state, &plan);
    EXPECT_EQ(ggml_backend_buft_alloc_buffer(ggml_backend_dev_buffer_type(meta), 1 << 20), nullptr);
    // The memory of the member that could allocate is given back.
    size_t free0 = 0, total0 = 0;
    ggml_backend_dev_memory(dev0_, &free0, &total0);
    EXPECT_EQ(free0, total0);
}

TEST_F(MetaTestDev, UnsupportedOperationOfAMember) {
    static Plan plan;
    ASSERT_TRUE(loomtest::testdev_configure(dev1_, "ops", "ADD,MUL_MAT"));
    ggml_backend_dev_t devs[2] = {dev0_, dev1_};
    ggml_backend_dev_t meta    = ggml_backend_meta_device(devs, 2, plan_state, &plan);
    ggml_init_params   ip{8 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *     ctx = ggml_init(ip);
    ggml_tensor *      a   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    EXPECT_TRUE(ggml_backend_dev_supports_op(meta, ggml_add(ctx, a, a)));
    EXPECT_FALSE(ggml_backend_dev_supports_op(meta, ggml_silu(ctx, a)));
    ggml_free(ctx);
}

} // namespace
