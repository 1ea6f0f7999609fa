// The RPC server's rules (backends/rpc/validate.cpp): each node's
// operator's rule (core/fits*.cpp, the one its constructor checks) and the
// layout of its result. The element-wise, shape, fill, recurrent and
// backward families (the RpcValidate tests at the end), and rope: nodes as
// ggml_rope_ext, ggml_rope_multi and ggml_rope_set_offset build them pass;
// op params a client could forge (a mode the CPU does not have, sections
// past the row, an odd or too large offset, positions that do not match the
// mode) are refused with the reason, without computing anything. Row
// indices the graph computes (a router's argsort_top_k, as in a mixture of
// experts): on a remote CPU they give the local CPU's rows, and an index
// out of range fails the computation instead of reading past the rows.

#include <gtest/gtest.h>

#include <string>

#include "backends/rpc/validate.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "rpc_test_util.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

struct Rules : ::testing::Test {
    ggml_context_ptr ctx{ggml_init({ggml_tensor_overhead() * 64, nullptr, true})};
    std::string      why;

    bool ok(const ggml_tensor * n) {
        why.clear();
        return loom::rpc::check_node(n, &why);
    }
    ggml_tensor * rows(int64_t head, int64_t n_tok) {
        return ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, head, 3, n_tok);
    }
    ggml_tensor * positions(int64_t n) { return ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I32, n); }
};

TEST_F(Rules, RopePlainAndMultiSectionModesPass) {
    ggml_context * c = ctx.get();
    int sec[4] = {4, 2, 2, 0};
    ggml_tensor * plain  = ggml_rope_ext(c, rows(16, 5), positions(5), nullptr, 8, GGML_ROPE_TYPE_NEOX, 0, 10000.0f,
                                         1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    ggml_tensor * mrope  = ggml_rope_multi(c, rows(18, 5), positions(20), nullptr, 16, sec, GGML_ROPE_TYPE_MROPE, 0,
                                           10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    ggml_tensor * imrope = ggml_rope_set_offset(ggml_rope_multi(c, rows(20, 5), positions(20), nullptr, 16, sec,
                                                                GGML_ROPE_TYPE_IMROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                                                                32.0f, 1.0f),
                                                2);
    int vsec[4] = {2, 2, 0, 0};
    ggml_tensor * vision = ggml_rope_multi(c, rows(8, 5), positions(20), nullptr, 4, vsec, GGML_ROPE_TYPE_VISION, 0,
                                           10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    for (ggml_tensor * n : {plain, mrope, imrope, vision}) {
        EXPECT_TRUE(ok(n)) << ggml_op_desc(n) << " mode " << n->op_params[2] << ": " << why;
    }
}

TEST_F(Rules, RopeForgedParamsAreRefused) {
    int           sec[4] = {4, 2, 2, 0};
    ggml_tensor * n      = ggml_rope_multi(ctx.get(), rows(18, 5), positions(20), nullptr, 16, sec,
                                           GGML_ROPE_TYPE_IMROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    ASSERT_TRUE(ok(n)) << why;
    auto refused = [&](int index, int32_t value, const char * reason) {
        const int32_t keep  = n->op_params[index];
        n->op_params[index] = value;
        EXPECT_FALSE(ok(n)) << "op_params[" << index << "] = " << value;
        EXPECT_NE(why.find(reason), std::string::npos) << why;
        n->op_params[index] = keep;
        EXPECT_TRUE(ok(n)) << why;
    };
    refused(2, 4, "rope mode");                   // GLM's mode, not computed here
    refused(2, -1, "rope mode");
    refused(11, 16, "rope sections");             // 16 + 2 + 2 > 18 values per row
    refused(12, -3, "rope sections");
    refused(11, 0x7fffffff, "rope sections");     // no wrap in the sum
    refused(15, 1, "offset");                     // odd
    refused(15, 4, "offset");                     // 4 + 16 > 18
    refused(15, -2, "offset");
    refused(1, 0x7ffffffe, "n_dims");             // pairs past the row
    refused(2, GGML_ROPE_TYPE_NEOX, "positions"); // one position per row, but 20 given
}

// A unary or gated node whose op param names no such op (a value outside
// the enum's range, as a fuzzed message carried): refused, and named
// "UNKNOWN" in the reason, never converted to an enum value out of range.
// Results some constructors lay out their own way pass (rope in place on a
// strided view, the depthwise convolution on channels-first data), as do
// the precisions a caller sets on mul_mat_id; the same nodes with strides
// whose elements overlap, or a precision that is none, are refused.
TEST_F(Rules, ResultsInTheirConstructorsLayoutPassAndForgedOnesAreRefused) {
    ggml_context * c    = ctx.get();
    ggml_tensor *  x    = ggml_new_tensor_3d(c, GGML_TYPE_F32, 32, 3, 5);
    ggml_tensor *  view = ggml_view_3d(c, x, 16, 3, 5, x->nb[1], x->nb[2], 0);
    ggml_tensor *  rope = ggml_rope_ext_inplace(c, view, positions(5), nullptr, 16, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                                                32.0f, 1.0f);
    ASSERT_FALSE(ggml_is_contiguous(rope));
    EXPECT_TRUE(ok(rope)) << why;
    ggml_tensor * whcn   = ggml_new_tensor_4d(c, GGML_TYPE_F32, 6, 9, 7, 1); // [C, W, H, N] in memory
    ggml_tensor * input  = ggml_permute(c, whcn, 2, 0, 1, 3);                // seen as [W, H, C, N]
    ggml_tensor * kernel = ggml_new_tensor_4d(c, GGML_TYPE_F32, 3, 3, 1, 6);
    ggml_tensor * dw     = ggml_conv_2d_dw_direct(c, kernel, input, 1, 1, 1, 1, 1, 1);
    ASSERT_FALSE(ggml_is_contiguous(dw));
    EXPECT_TRUE(ok(dw)) << why;
    ggml_tensor * as  = ggml_new_tensor_3d(c, GGML_TYPE_F32, 8, 4, 3);
    ggml_tensor * ids = ggml_new_tensor_2d(c, GGML_TYPE_I32, 2, 5);
    ggml_tensor * b   = ggml_new_tensor_3d(c, GGML_TYPE_F32, 8, 2, 5);
    ggml_tensor * mm  = ggml_mul_mat_id(c, as, b, ids);
    ASSERT_TRUE(ggml_prec_set_src(mm, GGML_PREC_F32, 1));
    EXPECT_TRUE(ok(mm)) << why;

    ggml_tensor forged = *dw;
    forged.nb[2]       = forged.nb[0]; // two channels on the same bytes
    EXPECT_FALSE(ok(&forged));
    EXPECT_NE(why.find("overlap"), std::string::npos) << why;
    ggml_tensor forged_view = *view, forged_rope = *rope;
    forged_view.nb[2] = forged_rope.nb[2] = view->nb[1]; // the tokens on each other
    forged_rope.src[0] = &forged_view;
    EXPECT_FALSE(ok(&forged_rope));
    EXPECT_NE(why.find("overlap"), std::string::npos) << why;
    ggml_tensor bad_prec  = *mm;
    bad_prec.op_params[3] = 7;
    EXPECT_FALSE(ok(&bad_prec));
    EXPECT_NE(why.find("precision"), std::string::npos) << why;
}

TEST_F(Rules, UnknownUnaryAndGluOpsAreRefused) {
    ggml_tensor * u = ggml_silu(ctx.get(), rows(8, 2));
    ggml_tensor * g = ggml_swiglu(ctx.get(), rows(8, 2));
    ASSERT_TRUE(ok(u)) << why;
    ASSERT_TRUE(ok(g)) << why;
    for (int32_t bad : {64, -1, int32_t(GGML_UNARY_OP_COUNT)}) {
        u->op_params[0] = bad;
        EXPECT_EQ(ggml_get_unary_op(u), GGML_UNARY_OP_COUNT);
        EXPECT_STREQ(ggml_op_desc(u), "UNKNOWN");
        EXPECT_FALSE(ok(u)) << bad;
    }
    for (int32_t bad : {64, -1, int32_t(GGML_GLU_OP_COUNT)}) {
        g->op_params[0] = bad;
        EXPECT_EQ(ggml_get_glu_op(g), GGML_GLU_OP_COUNT);
        EXPECT_STREQ(ggml_op_desc(g), "UNKNOWN");
        EXPECT_FALSE(ok(g)) << bad;
    }
}

// Attention sinks (gpt-oss, Granite SWA, MiMo 2): soft max and flash
// attention with one F32 per head pass; sinks of another length or type, or
// with a stride that is not a float's, are refused.
TEST_F(Rules, AttentionSinksPassAndForgedSinksAreRefused) {
    ggml_context * c     = ctx.get();
    constexpr int  H     = 4;
    ggml_tensor *  sinks = ggml_new_tensor_1d(c, GGML_TYPE_F32, H);
    ggml_tensor *  sm    = ggml_soft_max_ext(c, ggml_new_tensor_3d(c, GGML_TYPE_F32, 16, 3, H), nullptr, 0.5f, 0.0f);
    ggml_soft_max_add_sinks(sm, sinks);
    ggml_tensor * q  = ggml_new_tensor_3d(c, GGML_TYPE_F32, 8, 3, H);
    ggml_tensor * k  = ggml_new_tensor_3d(c, GGML_TYPE_F16, 8, 16, 2);
    ggml_tensor * v  = ggml_new_tensor_3d(c, GGML_TYPE_F16, 8, 16, 2);
    ggml_tensor * fa = ggml_flash_attn_ext(c, q, k, v, nullptr, 0.5f, 0.0f, 0.0f);
    ggml_flash_attn_ext_add_sinks(fa, sinks);
    for (ggml_tensor * n : {sm, fa}) {
        ASSERT_TRUE(ok(n)) << ggml_op_desc(n) << ": " << why;
        sinks->ne[0] = H + 1;
        EXPECT_FALSE(ok(n)) << ggml_op_desc(n);
        EXPECT_NE(why.find("sinks"), std::string::npos) << why;
        sinks->ne[0] = H;
        sinks->type  = GGML_TYPE_F16;
        EXPECT_FALSE(ok(n)) << ggml_op_desc(n);
        sinks->type  = GGML_TYPE_F32;
        sinks->nb[0] = 2;
        EXPECT_FALSE(ok(n)) << ggml_op_desc(n);
        sinks->nb[0] = sizeof(float);
        EXPECT_TRUE(ok(n)) << why;
    }
}

// Soft max and flash attention with sinks on a remote CPU give the local CPU's values.
TEST(RpcSinks, RemoteAttentionWithSinksGivesTheLocalValues) {
    loom_rpc_set_token(loomtest::rpc::kToken);
    loomtest::rpc::TestServer server;
    ASSERT_TRUE(server.running());
    ggml_backend_ptr remote(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ggml_backend_ptr local(ggml_backend_cpu_init());
    ASSERT_TRUE(remote && local);
    auto run = [](ggml_backend_t backend, bool flash) {
        ggml_context_ptr ctx(ggml_init({ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true}));
        ggml_context *   c     = ctx.get();
        constexpr int    H = 4, D = 8, N = 5, KV = 7;
        ggml_tensor *    sinks = ggml_new_tensor_1d(c, GGML_TYPE_F32, H);
        ggml_tensor *    a     = ggml_new_tensor_3d(c, GGML_TYPE_F32, flash ? D : KV, N, H);
        ggml_tensor *    k     = ggml_new_tensor_3d(c, GGML_TYPE_F16, D, KV, 2);
        ggml_tensor *    v     = ggml_new_tensor_3d(c, GGML_TYPE_F16, D, KV, 2);
        ggml_tensor *    out;
        if (flash) {
            out = ggml_flash_attn_ext(c, a, k, v, nullptr, 0.3f, 0.0f, 0.0f);
            ggml_flash_attn_ext_add_sinks(out, sinks);
        } else {
            out = ggml_soft_max_ext(c, a, nullptr, 0.3f, 0.0f);
            ggml_soft_max_add_sinks(out, sinks);
        }
        ggml_cgraph * gf = ggml_new_graph(c);
        ggml_build_forward_expand(gf, out);
        ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(c, backend));
        std::vector<float> out_values;
        if (!buf) return out_values;
        const float sv[H] = {0.5f, -2.0f, 3.0f, 0.0f};
        ggml_backend_tensor_set(sinks, sv, 0, sizeof(sv));
        std::vector<float> av(size_t(ggml_nelements(a)));
        for (size_t i = 0; i < av.size(); ++i) av[i] = float((i * 37) % 23) * 0.25f - 2.5f;
        ggml_backend_tensor_set(a, av.data(), 0, ggml_nbytes(a));
        std::vector<ggml_fp16_t> kv(size_t(ggml_nelements(k)));
        for (size_t i = 0; i < kv.size(); ++i) kv[i] = ggml_fp32_to_fp16(float((i * 11) % 13) * 0.125f - 0.75f);
        ggml_backend_tensor_set(k, kv.data(), 0, ggml_nbytes(k));
        std::reverse(kv.begin(), kv.end());
        ggml_backend_tensor_set(v, kv.data(), 0, ggml_nbytes(v));
        if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS) return out_values;
        out_values.resize(size_t(ggml_nelements(out)));
        ggml_backend_tensor_get(out, out_values.data(), 0, ggml_nbytes(out));
        return out_values;
    };
    for (bool flash : {false, true}) {
        SCOPED_TRACE(flash ? "flash attention" : "soft max");
        // The RPC device takes the node itself (the scheduler would move it to the CPU otherwise).
        const std::vector<float> want = run(local.get(), flash), got = run(remote.get(), flash);
        ASSERT_FALSE(want.empty());
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f) << i;
    }
}

// rows[:, argsort(scores)[:k]] on backend; the status of the computation.
ggml_status rows_by_computed_indices(ggml_backend_t backend, int64_t n_rows, int64_t n_scores, int64_t k,
                                     std::vector<float> * out) {
    ggml_context_ptr ctx(ggml_init({ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true}));
    ggml_context *   c      = ctx.get();
    ggml_tensor *    rows   = ggml_new_tensor_2d(c, GGML_TYPE_F32, 5, n_rows);
    ggml_tensor *    scores = ggml_new_tensor_1d(c, GGML_TYPE_F32, n_scores);
    ggml_tensor *    top    = ggml_argsort_top_k(c, scores, int(k));
    ggml_tensor *    picked = ggml_get_rows(c, rows, top);
    ggml_cgraph *    gf     = ggml_new_graph(c);
    ggml_build_forward_expand(gf, picked);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(c, backend));
    if (!buf) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    std::vector<float> r(size_t(5 * n_rows));
    std::vector<float> sc(static_cast<size_t>(n_scores));
    for (size_t i = 0; i < r.size(); ++i) r[i] = float(i) * 0.5f - 3.0f;
    for (size_t i = 0; i < sc.size(); ++i) sc[i] = float((i * 7) % sc.size()); // a permutation of 0 .. n - 1
    ggml_backend_tensor_set(rows, r.data(), 0, r.size() * sizeof(float));
    ggml_backend_tensor_set(scores, sc.data(), 0, sc.size() * sizeof(float));
    std::vector<float> before(size_t(ggml_nelements(picked)), -7.0f);
    ggml_backend_tensor_set(picked, before.data(), 0, before.size() * sizeof(float));
    const ggml_status st = ggml_backend_graph_compute(backend, gf);
    out->assign(size_t(ggml_nelements(picked)), 0.0f);
    ggml_backend_tensor_get(picked, out->data(), 0, out->size() * sizeof(float));
    return st;
}

TEST(RpcComputedIndices, RemoteCpuGivesTheLocalRowsAndFailsOnABadIndex) {
    loom_rpc_set_token(loomtest::rpc::kToken);
    loomtest::rpc::TestServer server;
    ASSERT_TRUE(server.running());
    ggml_backend_ptr remote(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ggml_backend_ptr local(ggml_backend_cpu_init());
    ASSERT_TRUE(remote && local);

    std::vector<float> want, got;
    ASSERT_EQ(rows_by_computed_indices(local.get(), 8, 8, 3, &want), GGML_STATUS_SUCCESS);
    ASSERT_EQ(rows_by_computed_indices(remote.get(), 8, 8, 3, &got), GGML_STATUS_SUCCESS);
    EXPECT_EQ(got, want);

    // 12 scores pick indices up to 11 of 4 rows: the kernel finds them.
    EXPECT_EQ(rows_by_computed_indices(remote.get(), 4, 12, 6, &got), GGML_STATUS_FAILED);
    EXPECT_EQ(got, std::vector<float>(got.size(), -7.0f)) << "nothing written";
    // The session goes on.
    ASSERT_EQ(rows_by_computed_indices(remote.get(), 8, 8, 3, &got), GGML_STATUS_SUCCESS);
    EXPECT_EQ(got, want);
}

} // namespace

// The server's rules for the element-wise, shape and fill operators: nodes
// as the constructors build them pass; nodes whose op params would take a
// kernel outside its sources or result are refused with the rule.
TEST(RpcValidate, FillFamilyRules) {
    ggml_init_params ip{ggml_tensor_overhead() * 64, nullptr, true};
    ggml_context_ptr ctx(ggml_init(ip));
    ggml_context *   c = ctx.get();
    ggml_tensor *    a = ggml_new_tensor_3d(c, GGML_TYPE_F32, 10, 6, 3);
    ggml_tensor *    b = ggml_new_tensor_2d(c, GGML_TYPE_F32, 4, 3);
    ggml_tensor *    t = ggml_new_tensor_1d(c, GGML_TYPE_F32, 5);
    std::string      why;
    auto             ok = [&](ggml_tensor * n) {
        why.clear();
        return loom::rpc::check_node(n, &why);
    };

    ggml_tensor * set = ggml_set(c, a, b, a->nb[1], a->nb[2], a->nb[3], 8);
    ggml_tensor * acc = ggml_acc(c, a, b, a->nb[1], a->nb[2], a->nb[3], 8);
    ggml_tensor * roll = ggml_roll(c, a, 3, -2, 1, 0);
    ggml_tensor * pad  = ggml_pad_ext_circular(c, a, 1, 2, 0, 1, 0, 0, 0, 0);
    ggml_tensor * ar   = ggml_arange(c, 0.0f, 5.0f, 0.5f);
    ggml_tensor * te   = ggml_timestep_embedding(c, t, 8, 10000);
    ggml_tensor * refl = ggml_pad_reflect_1d(c, a, 2, 3);
    for (ggml_tensor * n : {set, acc, roll, pad, ar, te, refl, ggml_clamp(c, a, 0.0f, 1.0f), ggml_cumsum(c, a),
                            ggml_repeat_back(c, a, ggml_new_tensor_2d(c, GGML_TYPE_F32, 5, 3)), ggml_diag(c, t), ggml_tri(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, 4, 4), GGML_TRI_TYPE_UPPER)}) {
        EXPECT_TRUE(ok(n)) << ggml_op_desc(n) << ": " << why;
    }

    set->op_params[3] = int32_t(ggml_nbytes(a)); // the view would start past the result
    EXPECT_FALSE(ok(set));
    EXPECT_NE(why.find("lies inside"), std::string::npos) << why;
    acc->op_params[0] = 1 << 20;
    EXPECT_FALSE(ok(acc));
    roll->op_params[0] = 10;
    EXPECT_FALSE(ok(roll));
    EXPECT_NE(why.find("shifts"), std::string::npos) << why;
    pad->op_params[1] = 5;
    EXPECT_FALSE(ok(pad));
    ar->ne[0] = 11;
    EXPECT_FALSE(ok(ar));
    te->op_params[0] = 16;
    EXPECT_FALSE(ok(te));
    refl->op_params[0] = 10;
    EXPECT_FALSE(ok(refl));
    EXPECT_NE(why.find("PAD_REFLECT_1D"), std::string::npos) << why;
}

// The server's rules for the recurrent, state-space and mixture-of-experts
// operators are their constructors' (Note [Shape rules] in core/fits.h):
// nodes as the constructors build them pass; a node whose shape, op params
// or sources the constructor would not produce is refused with the rule's
// message, which names the operator, and the server keeps running.
TEST(RpcValidate, ConstructorRules) {
    ggml_init_params ip{ggml_tensor_overhead() * 128, nullptr, true};
    ggml_context_ptr ctx(ggml_init(ip));
    ggml_context *   c  = ctx.get();
    auto             f3 = [&](int64_t a, int64_t b, int64_t d) { return ggml_new_tensor_3d(c, GGML_TYPE_F32, a, b, d); };
    std::string      why;
    auto             ok = [&](ggml_tensor * n) {
        why.clear();
        return loom::rpc::check_node(n, &why);
    };

    ggml_tensor * ids  = ggml_new_tensor_2d(c, GGML_TYPE_I32, 2, 4);
    ggml_tensor * mmid = ggml_mul_mat_id(c, f3(8, 5, 3), f3(8, 2, 4), ids);
    ggml_tensor * conv = ggml_ssm_conv(c, f3(7, 6, 2), ggml_new_tensor_2d(c, GGML_TYPE_F32, 4, 6));
    ggml_tensor * solve = ggml_solve_tri(c, f3(4, 4, 2), f3(3, 4, 2), true, true, false);
    ggml_tensor * state = ggml_new_tensor_2d(c, GGML_TYPE_F32, 4 * 4 * 2, 2);
    ggml_tensor * wkv6 = ggml_rwkv_wkv6(c, f3(4, 2, 6), f3(4, 2, 6), f3(4, 2, 6), ggml_new_tensor_2d(c, GGML_TYPE_F32, 4, 2),
                                        f3(4, 2, 6), state);
    ggml_tensor * gla  = ggml_gated_linear_attn(c, f3(4, 2, 6), f3(4, 2, 6), f3(4, 2, 6), f3(4, 2, 6), state, 0.5f);
    ggml_tensor * wkv7 = ggml_rwkv_wkv7(c, f3(4, 2, 6), f3(4, 2, 6), f3(4, 2, 6), f3(4, 2, 6), f3(4, 2, 6), f3(4, 2, 6),
                                        state);
    ggml_tensor * sc_s = ggml_new_tensor_4d(c, GGML_TYPE_F32, 16, 4, 2, 3);
    ggml_tensor * scan = ggml_ssm_scan(c, sc_s, ggml_new_tensor_4d(c, GGML_TYPE_F32, 4, 2, 5, 2), f3(2, 5, 2),
                                       ggml_new_tensor_2d(c, GGML_TYPE_F32, 1, 2),
                                       ggml_new_tensor_4d(c, GGML_TYPE_F32, 16, 1, 5, 2),
                                       ggml_new_tensor_4d(c, GGML_TYPE_F32, 16, 1, 5, 2),
                                       ggml_new_tensor_1d(c, GGML_TYPE_I32, 2), 1);
    for (ggml_tensor * n : {mmid, conv, solve, wkv6, gla, wkv7, scan}) {
        EXPECT_TRUE(ok(n)) << ggml_op_desc(n) << ": " << why;
    }

    // A shape the constructor would not give.
    mmid->ne[2] = 3; // 4 tokens in b and ids
    EXPECT_FALSE(ok(mmid));
    EXPECT_NE(why.find("shape"), std::string::npos) << why;
    mmid->ne[2] = 4;
    // A source the constructor refuses: its message, and no abort.
    mmid->src[2] = ggml_new_tensor_2d(c, GGML_TYPE_F32, 2, 4);
    EXPECT_FALSE(ok(mmid));
    EXPECT_NE(why.find("must be i32"), std::string::npos) << why;
    mmid->src[2] = ggml_new_tensor_2d(c, GGML_TYPE_I32, 2, 5); // one list per token of b: 4
    EXPECT_FALSE(ok(mmid));
    EXPECT_NE(why.find("MUL_MAT_ID"), std::string::npos) << why;
    mmid->src[2] = ids;
    EXPECT_TRUE(ok(mmid)) << why;
    // Op params: ssm_scan's K decides the size of the saved states.
    scan->op_params[0] = 2;
    EXPECT_FALSE(ok(scan)) << "K = 2 needs a longer result";
    scan->op_params[0] = 0;
    EXPECT_FALSE(ok(scan));
    EXPECT_NE(why.find("K 0 must be in"), std::string::npos) << why;
    scan->op_params[0] = 1;
    scan->op_params[5] = 7; // a parameter the constructor never sets
    EXPECT_FALSE(ok(scan));
    EXPECT_NE(why.find("op params"), std::string::npos) << why;
    scan->op_params[5] = 0;
    EXPECT_TRUE(ok(scan)) << why;
    // Sources in other places.
    std::swap(gla->src[0], gla->src[1]);
    EXPECT_TRUE(ok(gla)) << "k and v of one shape may trade places";
    gla->src[4] = f3(4, 2, 6);
    EXPECT_FALSE(ok(gla));
    conv->type = GGML_TYPE_F16;
    EXPECT_FALSE(ok(conv));
    solve->src[1] = f3(3, 5, 2);
    EXPECT_FALSE(ok(solve));
    EXPECT_NE(why.find("SOLVE_TRI"), std::string::npos) << why;
    wkv7->nb[1] *= 2;
    EXPECT_FALSE(ok(wkv7));
}

// The server's rules for the backward operators, the loss and the optimizer
// steps: nodes as the constructors build them pass; nodes whose shapes or op
// params would take a kernel outside its sources or result are refused.
TEST(RpcValidate, BackwardFamilyRules) {
    ggml_init_params ip{ggml_tensor_overhead() * 64, nullptr, true};
    ggml_context_ptr ctx(ggml_init(ip));
    ggml_context *   c = ctx.get();
    ggml_tensor *    a = ggml_new_tensor_2d(c, GGML_TYPE_F32, 10, 6);
    ggml_tensor *    s = ggml_new_tensor_1d(c, GGML_TYPE_F32, 1);
    ggml_tensor *    i = ggml_new_tensor_1d(c, GGML_TYPE_I32, 4);
    std::string      why;
    auto             ok = [&](ggml_tensor * n) {
        why.clear();
        return loom::rpc::check_node(n, &why);
    };
    ggml_tensor * w = ggml_new_tensor_2d(c, GGML_TYPE_F32, 10, 6);
    ggml_set_param(w);
    ggml_tensor * img     = ggml_new_tensor_4d(c, GGML_TYPE_F32, 9, 7, 3, 2);
    int64_t       ne[4]   = {9, 7, 3, 2};
    ggml_tensor * kern    = ggml_new_tensor_4d(c, GGML_TYPE_F16, 3, 2, 3, 4);
    ggml_tensor * im2col  = ggml_im2col_back(c, ggml_new_tensor_4d(c, GGML_TYPE_F32, 18, 5, 5, 2), kern, ne, 2, 1, 1,
                                             0, 1, 2, true);
    ggml_tensor * pool    = ggml_pool_2d_back(c, ggml_new_tensor_4d(c, GGML_TYPE_F32, 5, 4, 3, 2), img,
                                              GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, 0);
    ggml_tensor * sgd     = ggml_opt_step_sgd(c, w, a, ggml_new_tensor_1d(c, GGML_TYPE_F32, 2));
    ggml_tensor * rows    = ggml_get_rows_back(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, 10, 4), i, a);
    ggml_tensor * ce_back = ggml_cross_entropy_loss_back(c, s, a, a);
    for (ggml_tensor * n : {ggml_silu_back(c, a, a), ggml_rms_norm_back(c, a, a, 1e-6f),
                            ggml_soft_max_ext_back(c, a, a, 1.0f, 0.0f), ggml_cross_entropy_loss(c, a, a), ce_back,
                            sgd, rows,
                            pool, im2col}) {
        EXPECT_TRUE(ok(n)) << ggml_op_desc(n) << ": " << why;
    }

    im2col->op_params[0] = 1; // stride 1 makes a wider result than the gradient holds
    EXPECT_FALSE(ok(im2col));
    EXPECT_NE(why.find("IM2COL_BACK"), std::string::npos) << why;
    pool->op_params[3] = 1 << 20; // a stride past the rule's bound (2^16)
    EXPECT_FALSE(ok(pool));
    pool->op_params[3] = 2;
    pool->op_params[1] = 1 << 20; // a window far larger than the plane: computed (OpsBackward)
    EXPECT_TRUE(ok(pool)) << why;
    pool->op_params[1] = 2;
    pool->op_params[0] = 7;
    EXPECT_FALSE(ok(pool));
    sgd->src[2] = ggml_new_tensor_1d(c, GGML_TYPE_F32, 3);
    EXPECT_FALSE(ok(sgd));
    rows->ne[0] = 11;
    EXPECT_FALSE(ok(rows));
    ce_back->src[0] = a;
    EXPECT_FALSE(ok(ce_back));
    ggml_tensor * adamw = ggml_opt_step_adamw(c, w, a, a, a, ggml_new_tensor_1d(c, GGML_TYPE_F32, 7));
    EXPECT_TRUE(ok(adamw)) << why;
    adamw->src[3] = ggml_new_tensor_2d(c, GGML_TYPE_F32, 6, 10); // a moment of another shape
    EXPECT_FALSE(ok(adamw));
    EXPECT_NE(why.find("moments"), std::string::npos) << why;
    adamw->src[3] = a;
    adamw->src[4] = ggml_new_tensor_1d(c, GGML_TYPE_F32, 6);
    EXPECT_FALSE(ok(adamw));
    adamw->src[4] = ggml_new_tensor_1d(c, GGML_TYPE_F16, 7);
    EXPECT_FALSE(ok(adamw));
}
