// Custom operators (ggml_map_custom1..3, ggml_custom_4d, ggml_custom_inplace)
// on the CPU: which threads call the function and with what, the values it
// computes in a graph between other nodes, the in-place forms, and misuse.

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-backend-sched.h"
#include "ggml-cpu.h"
#include "test_util.h"

using namespace loomtest;

namespace {

struct Calls;
Calls * g_calls = nullptr; // the calls of the node being tested

// What one node's calls saw: each call's (ith, nth) and userdata. The
// functions below record into the Calls object alive at the time.
struct Calls {
    Calls() { g_calls = this; }
    ~Calls() { g_calls = nullptr; }
    Calls(const Calls &)             = delete;
    Calls & operator=(const Calls &) = delete;

    std::mutex                       mu;
    std::vector<std::pair<int, int>> seen;
    std::vector<void *>              userdata;
    void add(int ith, int nth, void * ud) {
        std::lock_guard<std::mutex> lock(mu);
        seen.push_back({ith, nth});
        userdata.push_back(ud);
    }
    // Every ith in [0, n) exactly once, all with nth == n.
    ::testing::AssertionResult once_each(int n) {
        std::vector<std::pair<int, int>> s = seen;
        std::sort(s.begin(), s.end());
        if (int(s.size()) != n) {
            return ::testing::AssertionFailure() << s.size() << " calls, expected " << n;
        }
        for (int i = 0; i < n; ++i) {
            if (s[size_t(i)] != std::pair<int, int>(i, n)) {
                return ::testing::AssertionFailure()
                       << "call " << i << " had ith " << s[size_t(i)].first << ", nth " << s[size_t(i)].second;
            }
        }
        return ::testing::AssertionSuccess();
    }
};

// The element range [lo, hi) of thread ith of nth over n elements.
std::pair<int64_t, int64_t> share(int64_t n, int ith, int nth) {
    const int64_t per = (n + nth - 1) / nth;
    return {std::min(n, per * ith), std::min(n, per * (ith + 1))};
}

void twice(ggml_tensor * dst, const ggml_tensor * a, int ith, int nth, void * ud) {
    g_calls->add(ith, nth, ud);
    const auto [lo, hi] = share(ggml_nelements(dst), ith, nth);
    for (int64_t i = lo; i < hi; ++i) {
        static_cast<float *>(dst->data)[i] = 2.0f * static_cast<const float *>(a->data)[i];
    }
}

void sum2(ggml_tensor * dst, const ggml_tensor * a, const ggml_tensor * b, int ith, int nth, void * ud) {
    g_calls->add(ith, nth, ud);
    const auto [lo, hi] = share(ggml_nelements(dst), ith, nth);
    for (int64_t i = lo; i < hi; ++i) {
        static_cast<float *>(dst->data)[i] =
            static_cast<const float *>(a->data)[i] + static_cast<const float *>(b->data)[i];
    }
}

void fma3(ggml_tensor * dst, const ggml_tensor * a, const ggml_tensor * b, const ggml_tensor * c, int ith, int nth,
          void * ud) {
    g_calls->add(ith, nth, ud);
    const auto [lo, hi] = share(ggml_nelements(dst), ith, nth);
    for (int64_t i = lo; i < hi; ++i) {
        static_cast<float *>(dst->data)[i] = static_cast<const float *>(a->data)[i] *
                                                 static_cast<const float *>(b->data)[i] +
                                             static_cast<const float *>(c->data)[i];
    }
}

// dst (i32) = src0 + src1 * src2 - src3 * src4, elements strided by thread.
void combine5(ggml_tensor * dst, int ith, int nth, void * ud) {
    g_calls->add(ith, nth, ud);
    auto at = [&](int s, int64_t i) { return static_cast<const float *>(dst->src[s]->data)[i]; };
    for (int64_t i = ith; i < ggml_nelements(dst); i += nth) {
        static_cast<int32_t *>(dst->data)[i] = int32_t(at(0, i) + at(1, i) * at(2, i) - at(3, i) * at(4, i));
    }
}

// dst (a view of src0) += src1, in place.
void add_in_place(ggml_tensor * dst, int ith, int nth, void * ud) {
    g_calls->add(ith, nth, ud);
    const auto [lo, hi] = share(ggml_nelements(dst), ith, nth);
    for (int64_t i = lo; i < hi; ++i) {
        static_cast<float *>(dst->data)[i] += static_cast<const float *>(dst->src[1]->data)[i];
    }
}

void fill_f32(ggml_tensor * t, float scale) {
    for (int64_t i = 0; i < ggml_nelements(t); ++i) {
        static_cast<float *>(t->data)[i] = scale * float(i + 1);
    }
}

// A new F32 vector of n elements, filled as fill_f32 does.
ggml_tensor * filled_1d(ggml_context * ctx, int64_t n, float scale) {
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
    fill_f32(t, scale);
    return t;
}

float f32_at(const ggml_tensor * t, int64_t i) {
    return static_cast<const float *>(t->data)[i];
}

char g_userdata[] = "userdata";

} // namespace

TEST(OpsCustom, Custom1OnTwoOfFourThreads) {
    Calls calls;
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 10, 2);
    fill_f32(a, 1.0f);
    ggml_tensor * r = ggml_map_custom1(ctx, a, twice, 2, nullptr);
    EXPECT_EQ(r->op, GGML_OP_MAP_CUSTOM1);
    EXPECT_EQ(r->src[0], a);
    EXPECT_TRUE(ggml_are_same_shape(r, a));
    EXPECT_NE(r->data, a->data);
    ASSERT_EQ(compute(ctx, r, 4), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(calls.once_each(2));
    EXPECT_EQ(calls.userdata[0], nullptr);
    for (int64_t i = 0; i < ggml_nelements(r); ++i) {
        EXPECT_EQ(f32_at(r, i), 2.0f * float(i + 1)) << i;
    }
    EXPECT_STREQ(ggml_op_name(GGML_OP_MAP_CUSTOM1), "MAP_CUSTOM1");
    EXPECT_STREQ(ggml_op_name(GGML_OP_CUSTOM), "CUSTOM");
}

TEST(OpsCustom, Custom2OnEveryThread) {
    for (int n_threads : {1, 3, 4}) {
        Calls calls;
        Context       ctx;
        ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 10, 7);
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 10, 7);
        fill_f32(a, 1.0f);
        fill_f32(b, 2.0f);
        ggml_tensor * r = ggml_map_custom2(ctx, a, b, sum2, GGML_N_TASKS_MAX, g_userdata);
        ASSERT_EQ(compute(ctx, r, n_threads), GGML_STATUS_SUCCESS);
        EXPECT_TRUE(calls.once_each(n_threads)) << n_threads << " threads";
        for (void * ud : calls.userdata) EXPECT_EQ(ud, g_userdata);
        for (int64_t i = 0; i < ggml_nelements(r); ++i) {
            EXPECT_EQ(f32_at(r, i), 3.0f * float(i + 1)) << i;
        }
    }
}

TEST(OpsCustom, Custom3OnOneThread) {
    Calls calls;
    Context       ctx;
    ggml_tensor * a = filled_1d(ctx, 33, 1.0f);
    ggml_tensor * b = filled_1d(ctx, 33, 0.5f);
    ggml_tensor * c = filled_1d(ctx, 33, -1.0f);
    ggml_tensor * r = ggml_map_custom3(ctx, a, b, c, fma3, 1, g_userdata);
    ASSERT_EQ(compute(ctx, r, 4), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(calls.once_each(1));
    for (int64_t i = 0; i < 33; ++i) {
        const double x = double(i + 1);
        EXPECT_EQ(double(f32_at(r, i)), x * 0.5 * x - x) << i;
    }
}

TEST(OpsCustom, Custom4dWithFiveArguments) {
    Calls calls;
    Context       ctx;
    ggml_tensor * args[5];
    for (int s = 0; s < 5; ++s) {
        args[s] = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 10, 2);
        fill_f32(args[s], float(s % 3 + 1));
    }
    ggml_tensor * r = ggml_custom_4d(ctx, GGML_TYPE_I32, 10, 2, 1, 1, args, 5, combine5, GGML_N_TASKS_MAX, g_userdata);
    EXPECT_EQ(r->op, GGML_OP_CUSTOM);
    EXPECT_EQ(r->type, GGML_TYPE_I32);
    for (int s = 0; s < 5; ++s) EXPECT_EQ(r->src[s], args[s]);
    EXPECT_EQ(r->src[5], nullptr);
    ASSERT_EQ(compute(ctx, r, 3), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(calls.once_each(3));
    for (int64_t i = 0; i < 20; ++i) {
        const int64_t x    = i + 1;
        const int64_t want = x + 2 * x * 3 * x - 1 * x * 2 * x; // scales 1, 2, 3, 1, 2
        EXPECT_EQ(static_cast<const int32_t *>(r->data)[i], want) << i;
    }
}

TEST(OpsCustom, InPlaceForms) {
    Calls calls;
    Context       ctx;
    ggml_tensor * a = filled_1d(ctx, 100, 1.0f);
    ggml_tensor * b = filled_1d(ctx, 100, 10.0f);
    ggml_tensor * args[] = {b};
    ggml_tensor * r      = ggml_custom_inplace(ctx, a, args, 1, add_in_place, 2, nullptr);
    EXPECT_EQ(r->data, a->data);
    EXPECT_EQ(r->src[0], a);
    EXPECT_EQ(r->src[1], b);
    ASSERT_EQ(compute(ctx, r, 2), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(calls.once_each(2));
    for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(f32_at(a, i), 11.0f * float(i + 1)) << i;

    Calls calls1;
    ggml_tensor * r1 = ggml_map_custom1_inplace(ctx, a, twice, 1, nullptr);
    EXPECT_EQ(r1->data, a->data);
    ASSERT_EQ(compute(ctx, r1, 2), GGML_STATUS_SUCCESS);
    for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(f32_at(a, i), 22.0f * float(i + 1)) << i;
    EXPECT_EQ(ggml_map_custom2_inplace(ctx, a, b, sum2, 1, nullptr)->data, a->data);
    EXPECT_EQ(ggml_map_custom3_inplace(ctx, a, b, b, fma3, 1, nullptr)->data, a->data);
}

// A custom node between kernels, through the backend API and the scheduler:
// it sees its source complete (every thread's share of the node before it)
// and the node after it sees its result, on every thread count.
TEST(OpsCustom, BetweenOtherNodesOnTheBackend) {
    constexpr int64_t n = 100003;
    for (int n_threads : {1, 2, 4}) {
        Calls calls;
        ggml_backend_t backend = ggml_backend_cpu_init();
        ASSERT_NE(backend, nullptr);
        ggml_backend_cpu_set_n_threads(backend, n_threads);
        ggml_init_params p   = {ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true};
        ggml_context *   ctx = ggml_init(p);
        ggml_tensor *    x   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        ggml_tensor *    y   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n);
        ggml_set_input(x);
        ggml_set_input(y);
        ggml_tensor * s   = ggml_add(ctx, x, y);                                  // 3 (i + 1)
        ggml_tensor * c   = ggml_map_custom2(ctx, s, x, sum2, GGML_N_TASKS_MAX, g_userdata); // 4 (i + 1)
        ggml_tensor * out = ggml_scale(ctx, c, 0.5f);                             // 2 (i + 1)
        ggml_set_output(out);
        ggml_cgraph * g = ggml_new_graph(ctx);
        ggml_build_forward_expand(g, out);

        ggml_backend_sched_t sched = ggml_backend_sched_new(&backend, nullptr, 1, 64, false, true);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, g));
        std::vector<float> xs(static_cast<size_t>(n)), ys(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            xs[size_t(i)] = float(i + 1);
            ys[size_t(i)] = 2.0f * float(i + 1);
        }
        ggml_backend_tensor_set(x, xs.data(), 0, sizeof(float) * size_t(n));
        ggml_backend_tensor_set(y, ys.data(), 0, sizeof(float) * size_t(n));
        ASSERT_EQ(ggml_backend_sched_graph_compute(sched, g), GGML_STATUS_SUCCESS);
        std::vector<float> got(static_cast<size_t>(n));
        ggml_backend_tensor_get(out, got.data(), 0, sizeof(float) * size_t(n));
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) bad += got[size_t(i)] != 2.0f * float(i + 1);
        EXPECT_EQ(bad, 0) << n_threads << " threads";
        EXPECT_TRUE(calls.once_each(n_threads));
        EXPECT_EQ(ggml_backend_sched_get_tensor_backend(sched, c), backend);
        ggml_backend_sched_free(sched);
        ggml_free(ctx);
        ggml_backend_free(backend);
    }
}

TEST(OpsCustomDeath, BadArguments) {
    Context       ctx;
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 4);
    EXPECT_DEATH(ggml_map_custom1(ctx, a, twice, 0, nullptr), "n_tasks = 0");
    EXPECT_DEATH(ggml_map_custom2(ctx, a, a, sum2, -2, nullptr), "n_tasks = -2");
    EXPECT_DEATH(ggml_map_custom1(ctx, a, nullptr, 1, nullptr), "NULL function");
    EXPECT_DEATH(ggml_map_custom2(ctx, a, nullptr, sum2, 1, nullptr), "source 1 is NULL");
    ggml_tensor * args[GGML_MAX_SRC] = {};
    for (ggml_tensor *& t : args) t = a;
    EXPECT_DEATH(ggml_custom_4d(ctx, GGML_TYPE_F32, 4, 1, 1, 1, args, GGML_MAX_SRC, combine5, 1, nullptr),
                 "at most");
    EXPECT_DEATH(ggml_custom_inplace(ctx, a, args, GGML_MAX_SRC - 1, add_in_place, 1, nullptr), "at most");
    EXPECT_DEATH(ggml_custom_4d(ctx, GGML_TYPE_F32, 4, 1, 1, 1, nullptr, 2, combine5, 1, nullptr), "NULL args");
    EXPECT_DEATH(ggml_custom_4d(ctx, GGML_TYPE_F32, 4, 1, 1, 1, args, 1, nullptr, 1, nullptr), "NULL function");
}
