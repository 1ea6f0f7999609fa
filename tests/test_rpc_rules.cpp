// The RPC server's rules (backends/rpc/validate.cpp). Rope: nodes as
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
