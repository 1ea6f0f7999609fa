// Thread-count independence and cancellation of graph computations.
//
// Results must be bit-identical whatever the number of threads, through
// ggml_graph_compute and through a CPU backend. An abort callback that
// returns true stops a computation with GGML_STATUS_ABORTED; one that
// returns false (or none) lets it finish.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

#include "backends/cpu/threadpool.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "test_util.h"

using namespace loomtest;

namespace {

constexpr int64_t kDim = 64, kHeads = 4, kHeadsKV = 2, kHeadDim = 16, kTokens = 7, kFF = 96;
constexpr float   kEps = 1e-5f;

struct Block {
    ggml_tensor * x;
    ggml_tensor * pos;
    ggml_tensor * mask;
    ggml_tensor * norm1;
    ggml_tensor * norm2;
    ggml_tensor * wq;
    ggml_tensor * wk;
    ggml_tensor * wv;
    ggml_tensor * wo;
    ggml_tensor * w_gate;
    ggml_tensor * w_up;
    ggml_tensor * w_down;
    ggml_tensor * out;
};

ggml_tensor * rope(ggml_context * ctx, ggml_tensor * t, ggml_tensor * pos) {
    return ggml_rope_ext(ctx, t, pos, nullptr, int(kHeadDim), GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                         32.0f, 1.0f);
}

// A pre-norm transformer block: attention with rotary embeddings and grouped
// heads, then a gated feed-forward; weights of several types, or all f32.
Block build_block(ggml_context * ctx, bool mixed_types = true) {
    auto wt = [mixed_types](ggml_type t) { return mixed_types ? t : GGML_TYPE_F32; };
    Block b{};
    b.x      = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kDim, kTokens);
    b.pos    = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, kTokens);
    b.mask   = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, kTokens, kTokens);
    b.norm1  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, kDim);
    b.norm2  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, kDim);
    b.wq     = ggml_new_tensor_2d(ctx, wt(GGML_TYPE_F16), kDim, kHeads * kHeadDim);
    b.wk     = ggml_new_tensor_2d(ctx, wt(GGML_TYPE_Q8_0), kDim, kHeadsKV * kHeadDim);
    b.wv     = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kDim, kHeadsKV * kHeadDim);
    b.wo     = ggml_new_tensor_2d(ctx, wt(GGML_TYPE_BF16), kHeads * kHeadDim, kDim);
    b.w_gate = ggml_new_tensor_2d(ctx, wt(GGML_TYPE_Q4_0), kDim, kFF);
    b.w_up   = ggml_new_tensor_2d(ctx, wt(GGML_TYPE_F16), kDim, kFF);
    b.w_down = ggml_new_tensor_2d(ctx, wt(GGML_TYPE_Q8_0), kFF, kDim);

    ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, b.x, kEps), b.norm1);
    ggml_tensor * q = rope(ctx, ggml_reshape_3d(ctx, ggml_mul_mat(ctx, b.wq, h), kHeadDim, kHeads, kTokens), b.pos);
    ggml_tensor * k = rope(ctx, ggml_reshape_3d(ctx, ggml_mul_mat(ctx, b.wk, h), kHeadDim, kHeadsKV, kTokens), b.pos);
    ggml_tensor * v = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, b.wv, h), kHeadDim, kHeadsKV, kTokens);

    ggml_tensor * qp  = ggml_permute(ctx, q, 0, 2, 1, 3);                          // [hd, tokens, heads]
    ggml_tensor * kp  = ggml_permute(ctx, k, 0, 2, 1, 3);                          // [hd, tokens, kv heads]
    ggml_tensor * kq  = ggml_mul_mat(ctx, kp, qp);                                 // [kv, q, heads]
    kq                = ggml_soft_max_ext(ctx, kq, b.mask, 1.0f / std::sqrt(float(kHeadDim)), 0.0f);
    ggml_tensor * vt  = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3));          // [tokens, hd, kv heads]
    ggml_tensor * kqv = ggml_mul_mat(ctx, vt, kq);                                 // [hd, q, heads]
    ggml_tensor * merged = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), kDim, kTokens);
    ggml_tensor * x2     = ggml_add(ctx, b.x, ggml_mul_mat(ctx, b.wo, merged));

    ggml_tensor * h2   = ggml_mul(ctx, ggml_rms_norm(ctx, x2, kEps), b.norm2);
    ggml_tensor * gate = ggml_silu(ctx, ggml_mul_mat(ctx, b.w_gate, h2));
    ggml_tensor * up   = ggml_mul_mat(ctx, b.w_up, h2);
    b.out              = ggml_add(ctx, x2, ggml_mul_mat(ctx, b.w_down, ggml_mul(ctx, gate, up)));
    return b;
}

struct BlockValues {
    Array                x, mask, norm1, norm2, wq, wk, wv, wo, w_gate, w_up, w_down;
    std::vector<int32_t> pos;
};

BlockValues fill_block(const Block & b, unsigned seed) {
    std::mt19937 rng(seed);
    BlockValues  v;
    v.x     = fill_random(b.x, rng);
    v.norm1 = fill_random(b.norm1, rng, 0.5, 1.5);
    v.norm2 = fill_random(b.norm2, rng, 0.5, 1.5);
    v.wq    = fill_random(b.wq, rng, -0.3, 0.3);
    v.wk    = fill_random(b.wk, rng, -0.3, 0.3);
    v.wv    = fill_random(b.wv, rng, -0.3, 0.3);
    v.wo    = fill_random(b.wo, rng, -0.3, 0.3);
    v.w_gate = fill_random(b.w_gate, rng, -0.3, 0.3);
    v.w_up   = fill_random(b.w_up, rng, -0.3, 0.3);
    v.w_down = fill_random(b.w_down, rng, -0.3, 0.3);
    Array p(Shape{kTokens, 1, 1, 1});
    Array m(Shape{kTokens, kTokens, 1, 1});
    for (int64_t i = 0; i < kTokens; ++i) {
        v.pos.push_back(int32_t(3 + i));
        p(i) = 3.0 + double(i);
        for (int64_t j = 0; j < kTokens; ++j) {
            m(j, i) = j <= i ? 0.0 : -INFINITY;
        }
    }
    write_tensor(b.pos, p);
    write_tensor(b.mask, m);
    v.mask = m;
    return v;
}

// The block computed by the reference, for a sanity check of the whole graph.
Array block_reference(const BlockValues & v) {
    using ref::BinaryOp;
    ref::RopeParams rp;
    rp.n_dims = int(kHeadDim);
    rp.mode   = GGML_ROPE_TYPE_NEOX;

    const Array h = ref::binary(BinaryOp::mul, ref::rms_norm(v.x, double(kEps)), v.norm1);
    const Array q = ref::rope(ref::reshape(ref::mul_mat(v.wq, h), {kHeadDim, kHeads, kTokens, 1}), v.pos, nullptr, rp);
    const Array k =
        ref::rope(ref::reshape(ref::mul_mat(v.wk, h), {kHeadDim, kHeadsKV, kTokens, 1}), v.pos, nullptr, rp);
    const Array vv = ref::reshape(ref::mul_mat(v.wv, h), {kHeadDim, kHeadsKV, kTokens, 1});
    const Array kq = ref::soft_max(ref::mul_mat(ref::permute(k, {0, 2, 1, 3}), ref::permute(q, {0, 2, 1, 3})), &v.mask,
                                   1.0 / std::sqrt(double(kHeadDim)), 0.0);
    const Array kqv    = ref::mul_mat(ref::permute(vv, {1, 2, 0, 3}), kq);
    const Array merged = ref::reshape(ref::permute(kqv, {0, 2, 1, 3}), {kDim, kTokens, 1, 1});
    const Array x2     = ref::binary(BinaryOp::add, v.x, ref::mul_mat(v.wo, merged));
    const Array h2     = ref::binary(BinaryOp::mul, ref::rms_norm(x2, double(kEps)), v.norm2);
    const Array gate   = ref::unary(GGML_UNARY_OP_SILU, ref::mul_mat(v.w_gate, h2));
    const Array up     = ref::mul_mat(v.w_up, h2);
    return ref::binary(BinaryOp::add, x2, ref::mul_mat(v.w_down, ref::binary(BinaryOp::mul, gate, up)));
}

// The bytes of every node of gf that owns its memory.
std::vector<std::vector<uint8_t>> snapshot(ggml_cgraph * gf) {
    std::vector<std::vector<uint8_t>> s;
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        const ggml_tensor * t = ggml_graph_node(gf, i);
        if (t->view_src != nullptr) {
            continue;
        }
        const auto * p = static_cast<const uint8_t *>(t->data);
        s.emplace_back(p, p + ggml_nbytes(t));
    }
    return s;
}

void poison(ggml_cgraph * gf) {
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        ggml_tensor * t = ggml_graph_node(gf, i);
        if (t->view_src == nullptr) {
            std::memset(t->data, 0xff, ggml_nbytes(t));
        }
    }
}

ggml_status compute_plan(ggml_cgraph * gf, int n_threads) {
    ggml_cplan           plan = ggml_graph_plan(gf, n_threads, nullptr);
    std::vector<uint8_t> work(plan.work_size);
    plan.work_data = work.empty() ? nullptr : work.data();
    return ggml_graph_compute(gf, &plan);
}

} // namespace

TEST(Threads, TransformerBlockBitIdentical) {
    for (bool mixed : {true, false}) {
        for (unsigned seed : {1u, 2u}) {
            SCOPED_TRACE(std::string(mixed ? "mixed weight types" : "f32 weights") + ", seed " + std::to_string(seed));
            Context           ctx;
            const Block       b  = build_block(ctx, mixed);
            const BlockValues v  = fill_block(b, seed);
            ggml_cgraph *     gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, b.out);

            ASSERT_EQ(compute_plan(gf, 1), GGML_STATUS_SUCCESS);
            const auto one = snapshot(gf);
            // The graph computes the block: with quantized weights, src1 of their
            // products is quantized too (NMSE ~1e-4 after the whole block).
            const ::testing::AssertionResult vs_ref = matches(b.out, block_reference(v), mixed ? 1e-3 : 1e-10);
            EXPECT_TRUE(vs_ref);
            if (verbose()) {
                std::printf("  block vs reference: %s\n", vs_ref.message());
            }

            for (int n_threads : {2, 3, 4}) {
                SCOPED_TRACE(std::to_string(n_threads) + " threads");
                poison(gf);
                ASSERT_EQ(compute_plan(gf, n_threads), GGML_STATUS_SUCCESS);
                const auto many = snapshot(gf);
                ASSERT_EQ(many.size(), one.size());
                for (size_t i = 0; i < one.size(); ++i) {
                    EXPECT_TRUE(one[i] == many[i]) << "node " << i << " differs from the 1-thread result";
                }
            }
            // ggml_graph_compute_with_ctx takes the same path.
            poison(gf);
            ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 4), GGML_STATUS_SUCCESS);
            EXPECT_TRUE(snapshot(gf) == one);
        }
    }
}

TEST(Threads, BackendBitIdentical) {
    ggml_backend_t backend = ggml_backend_cpu_init();
    ASSERT_NE(backend, nullptr);

    // Reference result through ggml_graph_compute with one thread.
    Context     host;
    const Block hb = build_block(host);
    fill_block(hb, 5);
    ggml_cgraph * hgf = ggml_new_graph(host);
    ggml_build_forward_expand(hgf, hb.out);
    ASSERT_EQ(compute_plan(hgf, 1), GGML_STATUS_SUCCESS);
    const Array want = read_tensor(hb.out);

    ggml_init_params params{};
    params.mem_size = ggml_tensor_overhead() * 256 + ggml_graph_overhead();
    params.no_alloc = true;
    ggml_context * ctx = ggml_init(params);
    ASSERT_NE(ctx, nullptr);
    const Block b = build_block(ctx);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, b.out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    ASSERT_NE(buf, nullptr);
    fill_block(b, 5);

    for (int n_threads : {1, 2, 4}) {
        SCOPED_TRACE(std::to_string(n_threads) + " threads");
        ggml_backend_cpu_set_n_threads(backend, n_threads);
        std::memset(b.out->data, 0xff, ggml_nbytes(b.out));
        ASSERT_EQ(ggml_backend_graph_compute(backend, gf), GGML_STATUS_SUCCESS);
        EXPECT_TRUE(matches(b.out, want, 0.0, 0.0));
    }
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(backend);
}

// A kernel that fails on its data (Note [Index sources] in core/op_table.h) stops
// every thread at that node: on the CPU backend, with 1 to 6 threads, graph
// after graph on the same pool, the status is GGML_STATUS_FAILED, nothing
// after the node is computed, and a good graph computes next.
TEST(Threads, DataFailureStopsEveryThreadAtTheNode) {
    ggml_backend_t backend = ggml_backend_cpu_init();
    ASSERT_NE(backend, nullptr);
    ggml_init_params params{};
    params.mem_size = ggml_tensor_overhead() * 16 + ggml_graph_overhead();
    params.no_alloc = true;
    ggml_context * ctx = ggml_init(params);
    ASSERT_NE(ctx, nullptr);
    ggml_tensor * a    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 9);
    ggml_tensor * idx  = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 24);
    ggml_tensor * rows = ggml_get_rows(ctx, ggml_scale(ctx, a, 0.5f), idx);
    ggml_tensor * out  = ggml_sum_rows(ctx, ggml_sqr(ctx, rows));
    ggml_cgraph * gf   = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    ASSERT_NE(buf, nullptr);
    std::vector<float> av(64 * 9, 1.0f);
    ggml_backend_tensor_set(a, av.data(), 0, ggml_nbytes(a));
    std::vector<int32_t> good(24), bad(24);
    for (int i = 0; i < 24; ++i) {
        good[size_t(i)] = bad[size_t(i)] = i % 9;
    }
    bad[17] = 9;
    const std::vector<float> marker(24, -7.0f);
    for (int n_threads : {1, 2, 3, 4, 6}) {
        SCOPED_TRACE(std::to_string(n_threads) + " threads");
        ggml_backend_cpu_set_n_threads(backend, n_threads);
        for (int round = 0; round < 20; ++round) {
            ggml_backend_tensor_set(idx, bad.data(), 0, ggml_nbytes(idx));
            ggml_backend_tensor_set(out, marker.data(), 0, ggml_nbytes(out));
            ggml_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
            const ggml_status st = ggml_backend_graph_compute(backend, gf);
            ggml_log_set(nullptr, nullptr);
            ASSERT_EQ(st, GGML_STATUS_FAILED);
            std::vector<float> got(24);
            ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
            ASSERT_EQ(got, marker);
            ggml_backend_tensor_set(idx, good.data(), 0, ggml_nbytes(idx));
            ASSERT_EQ(ggml_backend_graph_compute(backend, gf), GGML_STATUS_SUCCESS);
            ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
            ASSERT_EQ(got, std::vector<float>(24, 64 * 0.25f));
        }
    }
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(backend);
}

// ---- ggml's threadpool API ----

TEST(ThreadsPoolApi, ParamsDefaultsAndMatch) {
    ggml_threadpool_params a = ggml_threadpool_params_default(3);
    EXPECT_EQ(a.n_threads, 3);
    EXPECT_EQ(a.prio, GGML_SCHED_PRIO_NORMAL);
    EXPECT_EQ(a.poll, 50u);
    EXPECT_FALSE(a.strict_cpu);
    EXPECT_FALSE(a.paused);
    for (bool c : a.cpumask) ASSERT_FALSE(c);
    ggml_threadpool_params b;
    ggml_threadpool_params_init(&b, 3);
    EXPECT_TRUE(ggml_threadpool_params_match(&a, &b));
    b.cpumask[0] = true;
    EXPECT_FALSE(ggml_threadpool_params_match(&a, &b));
    b = a;
    b.n_threads = 4;
    EXPECT_FALSE(ggml_threadpool_params_match(&a, &b));
}

TEST(ThreadsPoolApi, BadThreadCountIsRefused) {
    static std::string logged;
    logged.clear();
    ggml_log_callback prev_cb = nullptr;
    void *            prev_ud = nullptr;
    ggml_log_get(&prev_cb, &prev_ud);
    ggml_log_set([](ggml_log_level, const char * text, void *) { logged += text; }, nullptr);
    ggml_threadpool_params p = ggml_threadpool_params_default(0);
    EXPECT_EQ(ggml_threadpool_new(&p), nullptr);
    p.n_threads = GGML_MAX_N_THREADS + 1;
    EXPECT_EQ(ggml_threadpool_new(&p), nullptr);
    ggml_log_set(prev_cb, prev_ud);
    EXPECT_NE(logged.find("n_threads = 0 out of range"), std::string::npos) << logged;
}

// A graph through ggml_graph_plan with a pool (plain, paused, pinned to the
// first CPU, polling or not) gives the bits of a one-thread run.
TEST(ThreadsPoolApi, PlansOnAPoolGiveTheSameBits) {
    Context           ctx;
    const Block       b  = build_block(ctx, true);
    fill_block(b, 7);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, b.out);
    ASSERT_EQ(compute_plan(gf, 1), GGML_STATUS_SUCCESS);
    const auto one = snapshot(gf);

    for (int variant = 0; variant < 4; ++variant) {
        SCOPED_TRACE("variant " + std::to_string(variant));
        ggml_threadpool_params p = ggml_threadpool_params_default(3);
        if (variant == 1) p.paused = true;
        if (variant == 2) {
            p.cpumask[0] = true;
            p.strict_cpu = true;
        }
        if (variant == 3) p.poll = 0;
        ggml_threadpool_t tp = ggml_threadpool_new(&p);
        ASSERT_NE(tp, nullptr);
        EXPECT_EQ(ggml_threadpool_get_n_threads(tp), 3);
        for (int n_threads : {0, 2, 3, 8}) { // 0: the pool's count; 8: capped at the pool's
            ggml_cplan plan = ggml_graph_plan(gf, n_threads, tp);
            EXPECT_EQ(plan.threadpool, tp);
            std::vector<uint8_t> work(plan.work_size);
            plan.work_data = work.empty() ? nullptr : work.data();
            poison(gf);
            ASSERT_EQ(ggml_graph_compute(gf, &plan), GGML_STATUS_SUCCESS);
            EXPECT_TRUE(snapshot(gf) == one) << n_threads << " threads";
            ggml_threadpool_pause(tp);
        }
        ggml_threadpool_resume(tp);
        ggml_threadpool_free(tp);
    }
}

// Two CPU backends share one pool and compute from two threads at once:
// the pool runs one graph at a time, both results are right.
TEST(ThreadsPoolApi, BackendsShareAPool) {
    Context     host;
    const Block hb = build_block(host);
    fill_block(hb, 9);
    ggml_cgraph * hgf = ggml_new_graph(host);
    ggml_build_forward_expand(hgf, hb.out);
    ASSERT_EQ(compute_plan(hgf, 1), GGML_STATUS_SUCCESS);
    const Array want = read_tensor(hb.out);

    ggml_threadpool_params p  = ggml_threadpool_params_default(2);
    ggml_threadpool_t      tp = ggml_threadpool_new(&p);
    ASSERT_NE(tp, nullptr);
    struct Side {
        ggml_backend_t        backend = nullptr;
        ggml_context *        ctx     = nullptr;
        ggml_backend_buffer_t buf     = nullptr;
        Block                 b{};
        ggml_cgraph *         gf = nullptr;
    } side[2];
    for (Side & sd : side) {
        sd.backend = ggml_backend_cpu_init();
        ASSERT_NE(sd.backend, nullptr);
        ggml_backend_cpu_set_n_threads(sd.backend, 2);
        ggml_backend_cpu_set_threadpool(sd.backend, tp);
        ggml_init_params params{ggml_tensor_overhead() * 256 + ggml_graph_overhead(), nullptr, true};
        sd.ctx = ggml_init(params);
        sd.b   = build_block(sd.ctx);
        sd.gf  = ggml_new_graph(sd.ctx);
        ggml_build_forward_expand(sd.gf, sd.b.out);
        sd.buf = ggml_backend_alloc_ctx_tensors(sd.ctx, sd.backend);
        ASSERT_NE(sd.buf, nullptr);
        fill_block(sd.b, 9);
    }
    std::vector<int> failures(2, 0);
    std::thread      t1([&] {
        for (int r = 0; r < 20; ++r) {
            if (ggml_backend_graph_compute(side[1].backend, side[1].gf) != GGML_STATUS_SUCCESS) ++failures[1];
        }
    });
    for (int r = 0; r < 20; ++r) {
        if (ggml_backend_graph_compute(side[0].backend, side[0].gf) != GGML_STATUS_SUCCESS) ++failures[0];
    }
    t1.join();
    EXPECT_EQ(failures[0] + failures[1], 0);
    for (Side & sd : side) {
        EXPECT_TRUE(matches(sd.b.out, want, 0.0, 0.0));
        // Back on the backend's own threads.
        ggml_backend_cpu_set_threadpool(sd.backend, nullptr);
        std::memset(sd.b.out->data, 0xff, ggml_nbytes(sd.b.out));
        ASSERT_EQ(ggml_backend_graph_compute(sd.backend, sd.gf), GGML_STATUS_SUCCESS);
        EXPECT_TRUE(matches(sd.b.out, want, 0.0, 0.0));
        ggml_backend_buffer_free(sd.buf);
        ggml_free(sd.ctx);
        ggml_backend_free(sd.backend);
    }
    ggml_threadpool_free(tp);
}

TEST(Threads, AttentionAndLargeProductsBitIdentical) {
    std::mt19937  rng(211);
    Context       ctx;
    ggml_tensor * q    = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 64, 9, 8, 1);
    ggml_tensor * k    = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, 64, 77, 2, 1);
    ggml_tensor * v    = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, 64, 77, 2, 1);
    ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 77, 9);
    ggml_tensor * w    = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, 256, 131);
    ggml_tensor * x    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 37);
    ggml_tensor * wf   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 131);
    for (ggml_tensor * t : {q, k, v, mask, w, x, wf}) {
        fill_random(t, rng);
    }
    ggml_tensor * attn = ggml_flash_attn_ext(ctx, q, k, v, mask, 0.125f, 0.0f, 0.0f);
    ggml_tensor * p1   = ggml_mul_mat(ctx, w, x);
    ggml_tensor * p2   = ggml_mul_mat(ctx, wf, x);
    ggml_tensor * s    = ggml_sum(ctx, p2);
    ggml_tensor * srt  = ggml_argsort(ctx, p1, GGML_SORT_ORDER_DESC);
    ggml_cgraph * gf   = ggml_new_graph(ctx);
    for (ggml_tensor * t : {attn, p1, p2, s, srt}) {
        ggml_build_forward_expand(gf, t);
    }
    ASSERT_EQ(compute_plan(gf, 1), GGML_STATUS_SUCCESS);
    const auto one = snapshot(gf);
    for (int n_threads : {2, 4, 7}) {
        SCOPED_TRACE(std::to_string(n_threads) + " threads");
        poison(gf);
        ASSERT_EQ(compute_plan(gf, n_threads), GGML_STATUS_SUCCESS);
        const auto many = snapshot(gf);
        ASSERT_EQ(many.size(), one.size());
        for (size_t i = 0; i < one.size(); ++i) {
            EXPECT_TRUE(one[i] == many[i]) << "node " << i << " (" << ggml_op_desc(ggml_graph_node(gf, int(i)))
                                           << ") differs from the 1-thread result";
        }
    }
}

namespace {

constexpr int kChain = 2000;

// Ends the process with a message when a computation does not return in
// time: a deadlocked thread cannot be stopped, so the test cannot go on.
class Watchdog {
public:
    explicit Watchdog(const char * what, int seconds = 20) : what_(what) {
        thread_ = std::thread([this, seconds] {
            std::unique_lock<std::mutex> lock(mutex_);
            if (!cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) {
                std::fprintf(stderr, "FATAL: %s did not return within %d s (threads deadlocked)\n", what_, seconds);
                std::fflush(stderr);
                std::_Exit(3);
            }
        });
    }
    ~Watchdog() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    Watchdog(const Watchdog &)             = delete;
    Watchdog & operator=(const Watchdog &) = delete;

private:
    const char *            what_;
    std::mutex              mutex_;
    std::condition_variable cv_;
    bool                    done_ = false;
    std::thread             thread_;
};

struct Chain {
    ggml_tensor * x;
    ggml_tensor * one;
    ggml_tensor * out;
    ggml_cgraph * gf;
};

// out = x + 1 + 1 + ... (kChain additions).
Chain build_chain(ggml_context * ctx) {
    Chain c{};
    c.x   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 257);
    c.one = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 257);
    ggml_tensor * t = c.x;
    for (int i = 0; i < kChain; ++i) {
        t = ggml_add(ctx, t, c.one);
    }
    c.out = t;
    c.gf  = ggml_new_graph_custom(ctx, 2 * kChain + 16, false);
    ggml_build_forward_expand(c.gf, c.out);
    return c;
}

void fill_chain(const Chain & c) {
    write_tensor(c.x, Array(shape_of(c.x), 0.0));
    write_tensor(c.one, Array(shape_of(c.one), 1.0));
    write_tensor(c.out, Array(shape_of(c.out), NAN));
}

struct AbortState {
    int calls    = 0;
    int stop_at  = 0; // stop when calls reaches this; 0: never
};

bool abort_after(void * data) {
    auto * s = static_cast<AbortState *>(data);
    ++s->calls;
    return s->stop_at > 0 && s->calls >= s->stop_at;
}

bool all_equal(const ggml_tensor * t, double value) {
    const Array a = read_tensor(t);
    for (double x : a.v) {
        if (!(x == value || (std::isnan(value) && std::isnan(x)))) {
            return false;
        }
    }
    return true;
}

} // namespace

// Note [Adaptive spin]: a waiter whose partner arrives late halves the spin
// of the next waits, never below k_min_spin; waits stay correct throughout.
TEST(ThreadsBarrier, SpinShrinksWhenAPartnerIsLate) {
    constexpr int     kSpin = 4096, kRounds = 12;
    loom::cpu::Barrier barrier(2, kSpin);
    std::atomic<int>  round{0};
    std::thread       late([&] {
        for (int i = 0; i < kRounds; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
            round.store(i + 1, std::memory_order_relaxed);
            barrier.wait();
        }
    });
    for (int i = 0; i < kRounds; ++i) {
        barrier.wait();
        // The barrier let this thread through only after the late one came.
        EXPECT_GE(round.load(std::memory_order_relaxed), i + 1);
    }
    late.join();
    // Twelve sleeping waits: 4096 halved down to the floor (a wait that the
    // late thread happened to reach first can only have doubled it once).
    EXPECT_LE(barrier.spin(), kSpin / 4);
    EXPECT_GE(barrier.spin(), loom::cpu::Barrier::k_min_spin);
}

namespace {

// The scheduler's state of thread tid of this process, as
// /proc/self/task/<tid>/stat gives it: 'R' running or runnable (a thread
// that spins is 'R' even while descheduled), 'S' asleep; '?' unknown.
char thread_state(pid_t tid) {
    std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string   line;
    std::getline(f, line);
    const size_t close = line.rfind(')'); // the name in parentheses may hold spaces
    return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : '?';
}

} // namespace

// Note [Idle spin]: after a job the worker spins a little, then sleeps; an
// idle pool does not keep a core busy. After a few jobs, every worker is
// seen asleep. (How little CPU time an idle pool costs is measured by the
// benchmarks, not here.)
TEST(ThreadsPool, IdleWorkersGoToSleep) {
    if (thread_state(pid_t(syscall(SYS_gettid))) == '?') {
        GTEST_SKIP() << "no /proc/self/task here to read the workers' state from";
    }
    loom::cpu::ThreadPool pool(3);
    std::vector<pid_t>    tids(3, 0);
    for (int i = 0; i < 20; ++i) {
        pool.run(3, [&](int ith) { tids[size_t(ith)] = pid_t(syscall(SYS_gettid)); });
        std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    ASSERT_NE(tids[1], 0);
    ASSERT_NE(tids[2], 0);
    // Asked until both are asleep at once; the bound only keeps a worker
    // that never sleeps from hanging the test.
    std::string seen;
    for (int i = 0; i < 2000; ++i) {
        seen = {thread_state(tids[1]), thread_state(tids[2])};
        if (seen == "SS") {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(seen, "SS") << "the idle workers' states (R: running or spinning)";
}

TEST(Abort, PlanCallbackStopsLongGraph) {
    for (int n_threads : {1, 4}) {
        SCOPED_TRACE(std::to_string(n_threads) + " threads");
        Context     ctx;
        const Chain c = build_chain(ctx);
        ASSERT_EQ(ggml_graph_n_nodes(c.gf), kChain);
        fill_chain(c);

        ggml_cplan           plan = ggml_graph_plan(c.gf, n_threads, nullptr);
        std::vector<uint8_t> work(plan.work_size);
        plan.work_data = work.empty() ? nullptr : work.data();
        AbortState state;
        state.stop_at             = 10;
        plan.abort_callback       = abort_after;
        plan.abort_callback_data  = &state;
        {
            Watchdog w("ggml_graph_compute stopped by its abort callback");
            EXPECT_EQ(ggml_graph_compute(c.gf, &plan), GGML_STATUS_ABORTED);
        }
        EXPECT_GE(state.calls, 10);
        EXPECT_LT(state.calls, 100) << "the callback kept being called after it asked to stop";
        EXPECT_TRUE(all_equal(c.out, NAN)) << "the last node was computed";

        // A callback that never asks to stop: the whole chain runs.
        AbortState keep_going;
        plan.abort_callback_data = &keep_going;
        EXPECT_EQ(ggml_graph_compute(c.gf, &plan), GGML_STATUS_SUCCESS);
        EXPECT_GT(keep_going.calls, 0);
        EXPECT_TRUE(all_equal(c.out, double(kChain)));

        // No callback at all.
        fill_chain(c);
        plan.abort_callback      = nullptr;
        plan.abort_callback_data = nullptr;
        EXPECT_EQ(ggml_graph_compute(c.gf, &plan), GGML_STATUS_SUCCESS);
        EXPECT_TRUE(all_equal(c.out, double(kChain)));
    }
}

TEST(Abort, StopAtFirstCheck) {
    Context     ctx;
    const Chain c = build_chain(ctx);
    fill_chain(c);
    ggml_cplan           plan = ggml_graph_plan(c.gf, 2, nullptr);
    std::vector<uint8_t> work(plan.work_size);
    plan.work_data = work.empty() ? nullptr : work.data();
    AbortState state;
    state.stop_at            = 1;
    plan.abort_callback      = abort_after;
    plan.abort_callback_data = &state;
    {
        Watchdog w("ggml_graph_compute stopped by its abort callback");
        EXPECT_EQ(ggml_graph_compute(c.gf, &plan), GGML_STATUS_ABORTED);
    }
    EXPECT_EQ(state.calls, 1);
    EXPECT_TRUE(all_equal(c.out, NAN));
}

TEST(Abort, CpuBackendCallback) {
    ggml_backend_t backend = ggml_backend_cpu_init();
    ASSERT_NE(backend, nullptr);
    ggml_backend_cpu_set_n_threads(backend, 2);

    ggml_init_params params{};
    params.mem_size = ggml_tensor_overhead() * (kChain + 16) + ggml_graph_overhead_custom(2 * kChain + 16, false);
    params.no_alloc = true;
    ggml_context * ctx = ggml_init(params);
    ASSERT_NE(ctx, nullptr);
    const Chain           c   = build_chain(ctx);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    ASSERT_NE(buf, nullptr);
    fill_chain(c);

    AbortState state;
    state.stop_at = 5;
    ggml_backend_cpu_set_abort_callback(backend, abort_after, &state);
    {
        Watchdog w("ggml_backend_graph_compute stopped by the abort callback");
        EXPECT_EQ(ggml_backend_graph_compute(backend, c.gf), GGML_STATUS_ABORTED);
    }
    EXPECT_GE(state.calls, 5);
    EXPECT_LT(state.calls, 100);
    EXPECT_TRUE(all_equal(c.out, NAN));

    AbortState keep_going;
    ggml_backend_cpu_set_abort_callback(backend, abort_after, &keep_going);
    EXPECT_EQ(ggml_backend_graph_compute(backend, c.gf), GGML_STATUS_SUCCESS);
    EXPECT_GT(keep_going.calls, 0);
    EXPECT_TRUE(all_equal(c.out, double(kChain)));

    fill_chain(c);
    ggml_backend_cpu_set_abort_callback(backend, nullptr, nullptr);
    EXPECT_EQ(ggml_backend_graph_compute(backend, c.gf), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(all_equal(c.out, double(kChain)));

    // The same setter reached through the registry.
    auto set_cb = reinterpret_cast<ggml_backend_set_abort_callback_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(), "ggml_backend_set_abort_callback"));
    if (set_cb != nullptr) {
        fill_chain(c);
        AbortState again;
        again.stop_at = 3;
        set_cb(backend, abort_after, &again);
        Watchdog w("ggml_backend_graph_compute stopped by the abort callback");
        EXPECT_EQ(ggml_backend_graph_compute(backend, c.gf), GGML_STATUS_ABORTED);
        EXPECT_TRUE(all_equal(c.out, NAN));
    }

    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    ggml_backend_free(backend);
}
