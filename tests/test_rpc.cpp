// The RPC backend against servers started in the process on loopback:
// transfers, the scheduler split across CPU and remote
// devices, authentication, malformed messages, sessions, a dying server.
// (The content cache: test_rpc_content; the server's op rules: test_rpc_rules.)
// (The conformance suite runs on an RPC device in test_rpc_ops.)

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <thread>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-backend-sched.h"
#include "ggml-cpu.h"
#include "ggml-rpc.h"
#include "backends/rpc/content_cache.h"
#include "backends/rpc/protocol.h"
#include "backends/rpc/validate.h"
#include "log_capture.h"
#include "rpc_client_fixture.h"
#include "rpc_test_util.h"

using namespace loomtest::rpc;
using namespace loomtest::rpc_client;

// LeakSanitizer's suppressions for this executable (read by LSan at exit in
// sanitizer builds; unused otherwise). gRPC 1.51 (Debian) leaves two
// 576-byte read slices of a TLS connection that is still open when its
// server shuts down (TlsServerServesTlsClientsOnly: the client's session
// stream outlives the server). They are allocated by gRPC's own allocator,
// which loom never calls, so the suppression cannot hide a leak of loom's.
extern "C" const char * __lsan_default_suppressions() {
    return "leak:gpr_realloc\n";
}

namespace {

TEST_F(Rpc, DevicesAppearInTheRegistry) {
    TestServer server;
    ASSERT_TRUE(server.running());
    ggml_backend_reg_t reg = ggml_backend_rpc_add_server(server.endpoint().c_str());
    ASSERT_NE(reg, nullptr);
    EXPECT_EQ(std::string(ggml_backend_reg_name(reg)), "RPC[" + server.endpoint() + "]");
    ASSERT_EQ(ggml_backend_reg_dev_count(reg), 1u);
    const std::string name = "RPC[" + server.endpoint() + "]CPU";
    EXPECT_EQ(ggml_backend_dev_by_name(name.c_str()), ggml_backend_reg_dev_get(reg, 0));
    EXPECT_EQ(ggml_backend_rpc_add_server(server.endpoint().c_str()), reg);
    size_t free = 0, total = 0;
    ggml_backend_rpc_get_device_memory(server.endpoint().c_str(), 0, &free, &total);
    EXPECT_GT(total, 0u);
    ggml_backend_buffer_type_t buft = ggml_backend_rpc_buffer_type(server.endpoint().c_str(), 0);
    ASSERT_NE(buft, nullptr);
    EXPECT_FALSE(ggml_backend_buft_is_host(buft));
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    EXPECT_TRUE(ggml_backend_is_rpc(backend.get()));
    EXPECT_EQ(ggml_backend_rpc_init(server.endpoint().c_str(), 7), nullptr);
    ASSERT_NE(ggml_backend_reg_by_name("RPC"), nullptr);
    EXPECT_NE(ggml_backend_reg_get_proc_address(ggml_backend_reg_by_name("RPC"), "ggml_backend_rpc_add_server"), nullptr);
}

TEST_F(Rpc, TensorTransfersRoundTrip) {
    TestServer server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    auto          ctx = context();
    ggml_tensor * a   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 300, 7);
    ggml_tensor * b   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 300, 7);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
    ASSERT_NE(buf, nullptr);
    const std::vector<float> v = iota_values(300 * 7);
    ggml_backend_tensor_set(a, v.data(), 0, ggml_nbytes(a));
    std::vector<float> got(v.size());
    ggml_backend_tensor_get(a, got.data(), 0, ggml_nbytes(a));
    EXPECT_EQ(got, v);
    // A part of the tensor, then memset, copy and clear.
    std::vector<float> part(10);
    ggml_backend_tensor_get(a, part.data(), 40 * sizeof(float), sizeof(float) * 10);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), v.begin() + 40));
    ggml_backend_tensor_copy(a, b);
    ggml_backend_tensor_get(b, got.data(), 0, ggml_nbytes(b));
    EXPECT_EQ(got, v);
    ggml_backend_tensor_memset(b, 0, 0, ggml_nbytes(b));
    ggml_backend_tensor_get(b, got.data(), 0, ggml_nbytes(b));
    EXPECT_EQ(got, std::vector<float>(v.size(), 0.0f));
    ggml_backend_buffer_clear(buf.get(), 0);
    ggml_backend_tensor_get(a, got.data(), 0, ggml_nbytes(a));
    EXPECT_EQ(got, std::vector<float>(v.size(), 0.0f));
}

// A graph computed on server B whose only node lives in server A's memory:
// a node of no op computes nothing and succeeds, as on ggml's RPC (llama.cpp's
// test-rpc-multi-server); one with an op is refused with the reason and
// sends nothing.
TEST_F(Rpc, ANodeInAnotherServersMemory) {
    TestServer       a_server, b_server;
    ggml_backend_ptr a(ggml_backend_rpc_init(a_server.endpoint().c_str(), 0));
    ggml_backend_ptr b(ggml_backend_rpc_init(b_server.endpoint().c_str(), 0));
    ASSERT_TRUE(a && b);
    auto                    ctx = context();
    ggml_tensor *           t   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), a.get()));
    ASSERT_NE(buf, nullptr);
    ggml_cgraph * g = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, t);
    EXPECT_EQ(ggml_backend_graph_compute(b.get(), g), GGML_STATUS_SUCCESS);

    ggml_tensor *           s = ggml_scale(ctx.get(), t, 2.0f);
    ggml_backend_buffer_ptr sbuf(ggml_backend_alloc_ctx_tensors(ctx.get(), b.get()));
    ASSERT_NE(sbuf, nullptr);
    ggml_graph_clear(g);
    ggml_cgraph * g2 = g;
    ggml_build_forward_expand(g2, s);
    loomtest::LogCapture log;
    EXPECT_EQ(ggml_backend_graph_compute(b.get(), g2), GGML_STATUS_FAILED);
    EXPECT_TRUE(log.contains("is not in a buffer of this server")) << log.text();
    // B still serves.
    const std::vector<float> v = {1, 2, 3, 4};
    ggml_backend_tensor_set(s, v.data(), 0, sizeof(float) * 4);
    std::vector<float> got(4);
    ggml_backend_tensor_get(s, got.data(), 0, sizeof(float) * 4);
    EXPECT_EQ(got, v);
}

// y = (W x + b) * s, split by a scheduler between CPU and remote devices
// (parallel: with the pipeline's copies and events).
std::vector<float> run_split(const std::vector<ggml_backend_t> & backends, bool pin_to_first, bool parallel = false) {
    auto          ctx = context(32);
    ggml_tensor * w   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 64, 48);
    ggml_tensor * x   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 64, 5);
    ggml_tensor * b   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 48);
    ggml_set_input(x);
    ggml_tensor * h  = ggml_mul_mat(ctx.get(), w, x);
    ggml_tensor * h2 = ggml_add(ctx.get(), h, b);
    ggml_tensor * h3 = ggml_scale(ctx.get(), ggml_silu(ctx.get(), h2), 0.5f);
    ggml_tensor * out = ggml_sum_rows(ctx.get(), h3);
    ggml_set_output(out);
    ggml_cgraph * gf = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(gf, out);

    // Weights on the first backend's device.
    ggml_backend_buffer_ptr wbuf(ggml_backend_alloc_buffer(backends[0], 64 * 48 * 4 + 48 * 4 + 256));
    ggml_backend_buffer_set_usage(wbuf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    ggml_tallocr            ta = ggml_tallocr_new(wbuf.get());
    ggml_tallocr_alloc(&ta, w);
    ggml_tallocr_alloc(&ta, b);
    const auto wv = iota_values(64 * 48, 0.01f), bv = iota_values(48, 0.1f);
    ggml_backend_tensor_set(w, wv.data(), 0, ggml_nbytes(w));
    ggml_backend_tensor_set(b, bv.data(), 0, ggml_nbytes(b));

    std::vector<ggml_backend_t> list = backends;
    std::unique_ptr<ggml_backend_sched, decltype(&ggml_backend_sched_free)> sched(
        ggml_backend_sched_new(list.data(), nullptr, int(list.size()), 256, parallel, true), &ggml_backend_sched_free);
    if (pin_to_first && list.size() > 2) {
        ggml_backend_sched_set_tensor_backend(sched.get(), h3, list[1]);
    }
    EXPECT_TRUE(ggml_backend_sched_alloc_graph(sched.get(), gf));
    // Every remote backend computes part of the graph.
    for (size_t k = 0; k + 1 < list.size(); ++k) {
        int on_k = 0;
        for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
            on_k += ggml_backend_sched_get_tensor_backend(sched.get(), ggml_graph_node(gf, i)) == list[k];
        }
        EXPECT_GT(on_k, 0) << "no node on " << ggml_backend_name(list[k]);
    }
    const auto xv = iota_values(64 * 5, 0.05f);
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    EXPECT_EQ(ggml_backend_sched_graph_compute(sched.get(), gf), GGML_STATUS_SUCCESS);
    std::vector<float> result(size_t(ggml_nelements(out)));
    ggml_backend_tensor_get(out, result.data(), 0, ggml_nbytes(out));
    // Again: the same graph is computed from the servers' cached copies.
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    EXPECT_EQ(ggml_backend_sched_graph_compute(sched.get(), gf), GGML_STATUS_SUCCESS);
    std::vector<float> again(result.size());
    ggml_backend_tensor_get(out, again.data(), 0, ggml_nbytes(out));
    EXPECT_EQ(again, result);
    return result;
}

TEST_F(Rpc, SchedulerSplitMatchesTheCpu) {
    TestServer s1, s2;
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_ptr r1(ggml_backend_rpc_init(s1.endpoint().c_str(), 0));
    ggml_backend_ptr r2(ggml_backend_rpc_init(s2.endpoint().c_str(), 0));
    ASSERT_NE(r1, nullptr);
    ASSERT_NE(r2, nullptr);
    const std::vector<float> want = run_split({cpu.get()}, false);
    const std::vector<float> one  = run_split({r1.get(), cpu.get()}, false);
    const std::vector<float> two  = run_split({r1.get(), r2.get(), cpu.get()}, true);
    // With pipeline copies: the remote devices' events order the copies.
    const std::vector<float> piped = run_split({r1.get(), r2.get(), cpu.get()}, true, true);
    ASSERT_EQ(one.size(), want.size());
    ASSERT_EQ(piped.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(one[i], want[i], 1e-4f * std::max(1.0f, std::fabs(want[i]))) << i;
        EXPECT_NEAR(two[i], want[i], 1e-4f * std::max(1.0f, std::fabs(want[i]))) << i;
        EXPECT_NEAR(piped[i], want[i], 1e-4f * std::max(1.0f, std::fabs(want[i]))) << i;
    }
}

namespace {
void negate_rows(ggml_tensor * dst, const ggml_tensor * a, int ith, int nth, void *) {
    for (int64_t r = ith; r < ggml_nrows(dst); r += nth) {
        for (int64_t i = 0; i < dst->ne[0]; ++i) {
            static_cast<float *>(dst->data)[r * dst->ne[0] + i] = -static_cast<const float *>(a->data)[r * a->ne[0] + i];
        }
    }
}
} // namespace

// A custom op runs on the CPU even with the remote device first: the device
// does not take it, and the scheduler places it where it runs.
TEST_F(Rpc, CustomOpsStayOnTheCpu) {
    TestServer       s1;
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_ptr r1(ggml_backend_rpc_init(s1.endpoint().c_str(), 0));
    ASSERT_NE(r1, nullptr);
    ggml_init_params p   = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true};
    ggml_context *   ctx = ggml_init(p);
    ggml_tensor *    x   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 3);
    ggml_set_input(x);
    ggml_tensor * y   = ggml_scale(ctx, x, 2.0f);
    ggml_tensor * z   = ggml_map_custom1(ctx, y, negate_rows, GGML_N_TASKS_MAX, nullptr);
    ggml_tensor * out = ggml_scale(ctx, z, 0.5f);
    ggml_set_output(out);
    EXPECT_FALSE(ggml_backend_supports_op(r1.get(), z));
    EXPECT_TRUE(ggml_backend_supports_op(cpu.get(), z));
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out);
    ggml_backend_t       backends[2] = {r1.get(), cpu.get()};
    ggml_backend_sched_t sched       = ggml_backend_sched_new(backends, nullptr, 2, 64, false, true);
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, g));
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(sched, z), cpu.get());
    std::vector<float> xs(24);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(i) - 5.0f;
    ggml_backend_tensor_set(x, xs.data(), 0, sizeof(float) * xs.size());
    ASSERT_EQ(ggml_backend_sched_graph_compute(sched, g), GGML_STATUS_SUCCESS);
    std::vector<float> got(24);
    ggml_backend_tensor_get(out, got.data(), 0, sizeof(float) * got.size());
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(got[i], -xs[i]) << i;
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
}

// A recurrent model's state rows picked through a view of an input (as
// llama.cpp's rs_s_copy views): the states are remote weights, the index
// input and its views stay on the CPU, the remote split reads a copy of the
// view. The allocator plans the split without the input (it takes its
// clone's memory later), and the remote graph leaves the view out.
TEST_F(Rpc, RowsPickedThroughAViewOfACpuInput) {
    TestServer       s1;
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_ptr r1(ggml_backend_rpc_init(s1.endpoint().c_str(), 0));
    ASSERT_NE(r1, nullptr);
    constexpr int64_t D = 6, R = 5, N = 3;
    ggml_init_params  p      = {ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true};
    ggml_context *    wctx   = ggml_init(p);
    ggml_tensor *     states = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, D, R);
    ggml_backend_buffer_ptr wbuf(ggml_backend_alloc_ctx_tensors(wctx, r1.get()));
    ASSERT_NE(wbuf, nullptr);
    ggml_backend_buffer_set_usage(wbuf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    const std::vector<float> sv = iota_values(size_t(D * R), 0.5f);
    ggml_backend_tensor_set(states, sv.data(), 0, ggml_nbytes(states));

    ggml_context * ctx  = ggml_init(p);
    ggml_tensor *  copy = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, R);
    ggml_set_input(copy);
    ggml_tensor * main_ids = ggml_view_1d(ctx, copy, N, 0);
    ggml_tensor * out      = ggml_scale(ctx, ggml_get_rows(ctx, states, main_ids), 2.0f);
    ggml_set_output(out);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out);
    ggml_backend_t       backends[2] = {r1.get(), cpu.get()};
    ggml_backend_sched_t sched       = ggml_backend_sched_new(backends, nullptr, 2, 64, false, true);
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, g));
    const int32_t ids[R] = {4, 0, 2, 1, 3};
    ggml_backend_tensor_set(copy, ids, 0, sizeof(ids));
    ASSERT_EQ(ggml_backend_sched_graph_compute(sched, g), GGML_STATUS_SUCCESS);
    std::vector<float> got(size_t(D * N));
    ggml_backend_tensor_get(out, got.data(), 0, ggml_nbytes(out));
    for (int64_t r = 0; r < N; ++r) {
        for (int64_t d = 0; d < D; ++d) {
            EXPECT_EQ(got[size_t(r * D + d)], 2.0f * sv[size_t(ids[r] * D + d)]) << "row " << r;
        }
    }
    ggml_backend_sched_free(sched);
    ggml_free(ctx);
    wbuf.reset();
    ggml_free(wctx);
}

TEST_F(Rpc, WrongOrMissingTokenIsRefused) {
    TestServer server;
    loom_rpc_set_token("not-the-token");
    EXPECT_EQ(ggml_backend_rpc_add_server(server.endpoint().c_str()), nullptr);
    EXPECT_EQ(ggml_backend_rpc_init(server.endpoint().c_str(), 0), nullptr);
    RawClient none(server.endpoint(), "");
    EXPECT_EQ(none.connect().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    grpc::Status st;
    EXPECT_EQ(none.alloc(1024, &st), 0u);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    RawClient wrong(server.endpoint(), "test-token-0124");
    EXPECT_EQ(wrong.connect().error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(loom_rpc_server_session_count(server.get()), 0u);
    // A server never starts without a token.
    loom_rpc_server_params p{};
    p.endpoint = "127.0.0.1:0";
    EXPECT_EQ(loom_rpc_server_start(&p), nullptr);
}

// A client of another protocol version (another operator table, core/
// op_table.h) is refused with a message naming both versions, and opens no
// session; one of this version then connects.
TEST_F(Rpc, ClientOfAnotherProtocolVersionIsRefused) {
    TestServer server;
    for (const uint32_t version : {loom::rpc::k_protocol_version + 1, loom::rpc::k_protocol_version - 1, 0u}) {
        SCOPED_TRACE("version " + std::to_string(version));
        RawClient          old(server.endpoint(), kToken);
        const grpc::Status st = old.connect(version);
        EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
        EXPECT_EQ(st.error_message(), "protocol version " + std::to_string(version) + " is not " +
                                          std::to_string(loom::rpc::k_protocol_version));
        EXPECT_EQ(loom_rpc_server_session_count(server.get()), 0u);
    }
    RawClient current(server.endpoint(), kToken);
    EXPECT_TRUE(current.connect().ok());
    EXPECT_EQ(loom_rpc_server_session_count(server.get()), 1u);
}

TEST_F(Rpc, MalformedMessagesAreRejectedAndTheServerServesOn) {
    TestServer server;
    RawClient  c(server.endpoint());
    ASSERT_TRUE(c.connect().ok());
    const uint64_t h = c.alloc(4096);
    ASSERT_NE(h, 0u);
    auto expect_invalid = [](const grpc::Status & st, const char * what) {
        EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << what << ": " << st.error_message();
        EXPECT_FALSE(st.error_message().empty()) << what;
    };
    {   // a tensor past the end of its buffer
        loom::rpc::SetTensorRequest req;
        describe_f32(req.mutable_tensor(), h, 4000, 100);
        req.set_data(std::string(400, 'x'));
        loom::rpc::Empty rep;
        expect_invalid(c.stub().SetTensor(c.ctx().get(), req, &rep), "out of bounds");
    }
    {   // a range outside its tensor
        loom::rpc::GetTensorRequest req;
        describe_f32(req.mutable_tensor(), h, 0, 16);
        req.set_offset(60);
        req.set_size(8);
        loom::rpc::GetTensorReply rep;
        expect_invalid(c.stub().GetTensor(c.ctx().get(), req, &rep), "range");
    }
    {   // offsets that overflow
        loom::rpc::MemsetTensorRequest req;
        describe_f32(req.mutable_tensor(), h, UINT64_MAX - 8, 16);
        req.set_size(4);
        loom::rpc::Empty rep;
        expect_invalid(c.stub().MemsetTensor(c.ctx().get(), req, &rep), "overflow");
    }
    {   // a bad type, and strides that reach past the buffer
        loom::rpc::SetTensorRequest req;
        describe_f32(req.mutable_tensor(), h, 0, 4);
        req.mutable_tensor()->set_type(999);
        loom::rpc::Empty rep;
        expect_invalid(c.stub().SetTensor(c.ctx().get(), req, &rep), "type");
        describe_f32(req.mutable_tensor(), h, 0, 4, 4);
        req.mutable_tensor()->set_type(0);
        req.mutable_tensor()->set_nb(1, 1 << 20);
        expect_invalid(c.stub().SetTensor(c.ctx().get(), req, &rep), "strides");
    }
    {   // an unknown buffer handle
        loom::rpc::ClearBufferRequest req;
        req.set_buffer(h + 1000);
        loom::rpc::Empty rep;
        expect_invalid(c.stub().ClearBuffer(c.ctx().get(), req, &rep), "handle");
    }
    {   // graphs: a dangling source, a node whose shape does not follow its op, an unknown op
        loom::rpc::GraphComputeRequest req;
        auto *                         g = req.mutable_graph();
        describe_f32(g->add_tensors(), h, 0, 16);
        auto * node = g->add_tensors();
        describe_f32(node, h, 64, 16);
        node->set_op(GGML_OP_ADD);
        node->add_src(1);
        node->add_src(7);
        g->add_nodes(2);
        loom::rpc::GraphComputeReply rep;
        expect_invalid(c.stub().GraphCompute(c.ctx().get(), req, &rep), "dangling source");
        node->set_src(1, 1);
        node->set_ne(0, 32); // 32 results from 16 inputs: reads past src0
        node->set_nb(1, 128);
        node->set_nb(2, 128);
        node->set_nb(3, 128);
        expect_invalid(c.stub().GraphCompute(c.ctx().get(), req, &rep), "shape");
        node->set_op(5000);
        expect_invalid(c.stub().GraphCompute(c.ctx().get(), req, &rep), "op");
        g->set_nodes(0, 9);
        expect_invalid(c.stub().GraphCompute(c.ctx().get(), req, &rep), "node reference");
    }
    {   // GLU: one input makes rows half as long; the unit must be known.
        loom::rpc::GraphComputeRequest req;
        auto *                         g = req.mutable_graph();
        describe_f32(g->add_tensors(), h, 0, 16);
        auto * node = g->add_tensors();
        describe_f32(node, h, 64, 16);
        node->set_op(GGML_OP_GLU);
        int32_t params[2] = {GGML_GLU_OP_SWIGLU, 0};
        node->set_op_params(params, sizeof(params));
        node->add_src(1);
        g->add_nodes(2);
        loom::rpc::GraphComputeReply rep;
        expect_invalid(c.stub().GraphCompute(c.ctx().get(), req, &rep), "half as long");
        params[0] = GGML_GLU_OP_COUNT;
        node->set_op_params(params, sizeof(params));
        expect_invalid(c.stub().GraphCompute(c.ctx().get(), req, &rep), "unknown gated linear unit");
    }
    {   // The convolution family's rules: a pooling's stride and length follow its source.
        loom::rpc::GraphComputeRequest req;
        auto *                         g = req.mutable_graph();
        describe_f32(g->add_tensors(), h, 0, 16);
        auto * node = g->add_tensors();
        describe_f32(node, h, 64, 8);
        node->set_op(GGML_OP_POOL_1D);
        int32_t params[4] = {GGML_OP_POOL_MAX, 2, 2, 0};
        node->set_op_params(params, sizeof(params));
        node->add_src(1);
        g->add_nodes(2);
        loom::rpc::GraphComputeReply rep;
        EXPECT_TRUE(c.stub().GraphCompute(c.ctx().get(), req, &rep).ok());
        params[2] = 0;
        node->set_op_params(params, sizeof(params));
        expect_invalid(c.stub().GraphCompute(c.ctx().get(), req, &rep), "pooling stride 0");
        params[2] = 2;
        node->set_op_params(params, sizeof(params));
        node->set_ne(0, 9); // (16 - 2) / 2 + 1 = 8 windows
        for (int i = 1; i < 4; ++i) {
            node->set_nb(i, 36);
        }
        const grpc::Status st = c.stub().GraphCompute(c.ctx().get(), req, &rep);
        expect_invalid(st, "pooling length");
        EXPECT_NE(st.error_message().find("do not follow its sources"), std::string::npos) << st.error_message();
    }
    {   // Custom ops name a function of the sender's process: never run.
        for (ggml_op op : {GGML_OP_MAP_CUSTOM1, GGML_OP_CUSTOM}) {
            loom::rpc::GraphComputeRequest req;
            auto *                         g = req.mutable_graph();
            describe_f32(g->add_tensors(), h, 0, 16);
            auto * node = g->add_tensors();
            describe_f32(node, h, 64, 16);
            node->set_op(uint32_t(op));
            const uint64_t params[3] = {0x401000, 1, 0}; // a function address, n_tasks, userdata
            node->set_op_params(params, sizeof(params));
            node->add_src(1);
            g->add_nodes(2);
            loom::rpc::GraphComputeReply rep;
            expect_invalid(c.stub().GraphCompute(c.ctx().get(), req, &rep), "op not accepted");
        }
    }
    {   // GET_ROWS: an index outside the rows is found before the kernel runs,
        // and a node that writes over its own indices is refused (Note
        // [Computed indices]), even on the CPU.
        loom::rpc::SetTensorRequest set;
        describe_f32(set.mutable_tensor(), h, 2048, 2);
        set.mutable_tensor()->set_type(26); // GGML_TYPE_I32
        const int32_t idx[2] = {1, 1000};
        set.set_data(idx, sizeof(idx));
        loom::rpc::Empty e;
        ASSERT_TRUE(c.stub().SetTensor(c.ctx().get(), set, &e).ok());
        loom::rpc::GraphComputeRequest req;
        auto *                         g = req.mutable_graph();
        describe_f32(g->add_tensors(), h, 0, 8, 4); // 4 rows of 8
        *g->add_tensors() = set.tensor();
        auto * node = g->add_tensors();
        describe_f32(node, h, 1024, 8, 2);
        node->set_op(GGML_OP_GET_ROWS);
        node->add_src(1);
        node->add_src(2);
        g->add_nodes(3);
        loom::rpc::GraphComputeReply rep;
        const grpc::Status st = c.stub().GraphCompute(c.ctx().get(), req, &rep);
        expect_invalid(st, "index");
        EXPECT_NE(st.error_message().find("GET_ROWS '': index 1000 at [1, 0, 0, 0] of src[1]"), std::string::npos)
            << st.error_message();
        node->set_offset(2048 - 32); // the result's memory covers the indices
        node->set_flags(GGML_TENSOR_FLAG_COMPUTE);
        const grpc::Status st2 = c.stub().GraphCompute(c.ctx().get(), req, &rep);
        expect_invalid(st2, "indices written by their own node");
        EXPECT_NE(st2.error_message().find("writes the indices of GET_ROWS (src[1])"), std::string::npos) << st2.error_message();
    }
    {   // An AdamW step writes its moments: on the CPU, one whose moment
        // covers the row indices of a GET_ROWS in the same graph leaves them
        // to the kernel (valid here), as does one moved off them.
        loom::rpc::SetTensorRequest set;
        describe_f32(set.mutable_tensor(), h, 2560, 2);
        set.mutable_tensor()->set_type(26); // GGML_TYPE_I32
        const int32_t idx_values[2] = {1, 2};
        set.set_data(idx_values, sizeof(idx_values));
        loom::rpc::Empty e;
        ASSERT_TRUE(c.stub().SetTensor(c.ctx().get(), set, &e).ok());
        loom::rpc::GraphComputeRequest req;
        auto *                         g = req.mutable_graph();
        describe_f32(g->add_tensors(), h, 0, 8, 4); // 1: 4 rows of 8
        *g->add_tensors() = set.tensor();           // 2: the indices
        auto * rows = g->add_tensors(); // 3
        describe_f32(rows, h, 1024, 8, 2);
        rows->set_op(GGML_OP_GET_ROWS);
        rows->add_src(1);
        rows->add_src(2);
        auto * w = g->add_tensors(); // 4: the parameter
        describe_f32(w, h, 3072, 2);
        w->set_flags(GGML_TENSOR_FLAG_PARAM);
        describe_f32(g->add_tensors(), h, 3136, 2); // 5: gradient
        auto * m = g->add_tensors();                // 6: first moment, over the indices
        describe_f32(m, h, 2560, 2);
        describe_f32(g->add_tensors(), h, 3200, 2); // 7: second moment
        describe_f32(g->add_tensors(), h, 3264, 7); // 8: hyperparameters
        auto * step = g->add_tensors();             // 9
        describe_f32(step, h, 3072, 2);
        step->set_op(GGML_OP_OPT_STEP_ADAMW);
        step->set_view_src(4);
        for (uint32_t s : {4u, 5u, 6u, 7u, 8u}) {
            step->add_src(s);
        }
        g->add_nodes(3);
        g->add_nodes(9);
        loom::rpc::GraphComputeReply rep;
        const grpc::Status st = c.stub().GraphCompute(c.ctx().get(), req, &rep);
        ASSERT_TRUE(st.ok()) << st.error_message();
        EXPECT_EQ(rep.status(), int32_t(GGML_STATUS_SUCCESS));
        m->set_offset(3328);
        const grpc::Status st2 = c.stub().GraphCompute(c.ctx().get(), req, &rep);
        EXPECT_TRUE(st2.ok()) << st2.error_message();
    }
    {   // a message above the size limit
        loom::rpc::SetTensorRequest req;
        describe_f32(req.mutable_tensor(), h, 0, 16);
        req.set_data(std::string(size_t(80) << 20, 'x'));
        loom::rpc::Empty rep;
        EXPECT_EQ(c.stub().SetTensor(c.ctx().get(), req, &rep).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    }
    {   // a buffer larger than the device allows
        grpc::Status st;
        EXPECT_EQ(c.alloc(UINT64_MAX, &st), 0u);
        EXPECT_FALSE(st.ok());
    }
    // A good client is still served.
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    auto          ctx = context();
    ggml_tensor * a   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 8);
    ggml_tensor * s   = ggml_scale(ctx.get(), a, 2.0f);
    ggml_cgraph * gf  = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(gf, s);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
    const float             v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ggml_backend_tensor_set(a, v, 0, sizeof(v));
    EXPECT_EQ(ggml_backend_graph_compute(backend.get(), gf), GGML_STATUS_SUCCESS);
    float got[8];
    ggml_backend_tensor_get(s, got, 0, sizeof(got));
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(got[i], 2 * v[i]);
    }
}

TEST_F(Rpc, SessionsAreSeparateAndFreedOnDisconnect) {
    TestServer server;
    RawClient  a(server.endpoint()), b(server.endpoint());
    ASSERT_TRUE(a.connect().ok());
    ASSERT_TRUE(b.connect().ok());
    EXPECT_EQ(loom_rpc_server_session_count(server.get()), 2u);
    const uint64_t ha = a.alloc(1024);
    const uint64_t hb = b.alloc(1024);
    ASSERT_NE(ha, 0u);
    ASSERT_NE(hb, 0u);
    loom::rpc::SetTensorRequest set;
    describe_f32(set.mutable_tensor(), ha, 0, 4);
    set.set_data(std::string(16, 'a'));
    loom::rpc::Empty e;
    ASSERT_TRUE(a.stub().SetTensor(a.ctx().get(), set, &e).ok());
    // b cannot name a's buffer even with a's handle number.
    loom::rpc::GetTensorRequest get;
    describe_f32(get.mutable_tensor(), ha == hb ? ha : ha, 0, 4);
    get.set_size(16);
    loom::rpc::GetTensorReply got;
    const grpc::Status st = b.stub().GetTensor(b.ctx().get(), get, &got);
    if (st.ok()) {
        EXPECT_NE(got.data(), std::string(16, 'a')); // its own buffer of the same number
    }
    a.disconnect();
    for (int i = 0; i < 100 && loom_rpc_server_session_count(server.get()) != 1; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(loom_rpc_server_session_count(server.get()), 1u);
    // a's session (and buffers) are gone.
    EXPECT_EQ(a.stub().SetTensor(a.ctx().get(), set, &e).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// A buffer a session receives starts cleared: what another session wrote
// into memory it then freed (or left by disconnecting) is never readable.
TEST_F(Rpc, NewBuffersHoldNothingOfAnotherSession) {
    TestServer server;
    for (uint64_t size : {uint64_t(4) << 10, uint64_t(64) << 10, uint64_t(256) << 10}) {
        SCOPED_TRACE(size);
        for (bool disconnect : {false, true}) {
            RawClient v(server.endpoint());
            ASSERT_TRUE(v.connect().ok());
            const uint64_t hv = v.alloc(size);
            ASSERT_NE(hv, 0u);
            loom::rpc::SetTensorRequest set;
            describe_f32(set.mutable_tensor(), hv, 0, int64_t(size / 4));
            set.set_data(std::string(size_t(size), '\x5a'));
            loom::rpc::Empty e;
            ASSERT_TRUE(v.stub().SetTensor(v.ctx().get(), set, &e).ok());
            if (disconnect) {
                v.disconnect();
                for (int i = 0; i < 100 && loom_rpc_server_session_count(server.get()) != 0; ++i) {
                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                }
            } else {
                loom::rpc::BufferRequest fr;
                fr.set_buffer(hv);
                ASSERT_TRUE(v.stub().FreeBuffer(v.ctx().get(), fr, &e).ok());
            }
            RawClient w(server.endpoint());
            ASSERT_TRUE(w.connect().ok());
            const uint64_t hw = w.alloc(size);
            ASSERT_NE(hw, 0u);
            loom::rpc::GetTensorRequest get;
            describe_f32(get.mutable_tensor(), hw, 0, int64_t(size / 4));
            get.set_size(size);
            loom::rpc::GetTensorReply got;
            ASSERT_TRUE(w.stub().GetTensor(w.ctx().get(), get, &got).ok());
            ASSERT_EQ(got.data().size(), size_t(size));
            EXPECT_EQ(got.data(), std::string(size_t(size), '\0'));
        }
    }
}

// A server that dies under a computation: the call returns an error (the
// deadline set here ends it; a hang would run into the test's timeout), so do
// later calls, and the library keeps working locally.
TEST_F(Rpc, DeadServerGivesAnError) {
    loom_rpc_set_timeouts(2000, 3000);
    auto server = std::make_unique<TestServer>();
    ggml_backend_ptr backend(ggml_backend_rpc_init(server->endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    auto          ctx = context();
    ggml_tensor * a   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 256, 256);
    ggml_tensor * m   = ggml_mul_mat(ctx.get(), a, a);
    ggml_cgraph * gf  = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(gf, m);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
    ASSERT_NE(buf, nullptr);
    const auto v = iota_values(256 * 256, 0.001f);
    ggml_backend_tensor_set(a, v.data(), 0, ggml_nbytes(a));

    // Computations run until the server goes away under them.
    std::atomic<bool> stop_seen{false};
    std::thread       worker([&] {
        for (int i = 0; i < 10000; ++i) {
            const ggml_status st = ggml_backend_graph_compute(backend.get(), gf);
            if (st != GGML_STATUS_SUCCESS) {
                stop_seen = true;
                return;
            }
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    server->stop();
    worker.join();
    EXPECT_TRUE(stop_seen);
    // Later calls fail too, and the library keeps working locally.
    std::vector<float> got(16);
    ggml_backend_tensor_get(a, got.data(), 0, 64);
    EXPECT_EQ(ggml_backend_graph_compute(backend.get(), gf), GGML_STATUS_FAILED);
    buf.reset();
    backend.reset();
    // An endpoint nobody listens on: NULL, not a hang.
    EXPECT_EQ(ggml_backend_rpc_add_server("127.0.0.1:1"), nullptr);
}

// A server with a certificate accepts TLS clients that trust it (LOOM_RPC_TLS_CA)
// and nothing in clear. Needs the openssl command to make a certificate.
TEST_F(Rpc, TlsServerServesTlsClientsOnly) {
    const auto dir = std::filesystem::temp_directory_path() / ("loom-rpc-tls-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
    const std::string cmd  = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                             "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
                            key + " -out " + cert + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) {
        std::filesystem::remove_all(dir);
        GTEST_SKIP() << "openssl cannot make a test certificate";
    }
    loom_rpc_server_params p{};
    p.endpoint         = "127.0.0.1:0";
    p.token            = kToken;
    p.tls_cert_path    = cert.c_str();
    p.tls_key_path     = key.c_str();
    loom_rpc_server_t server = loom_rpc_server_start(&p);
    ASSERT_NE(server, nullptr);
    const std::string endpoint = "127.0.0.1:" + std::to_string(loom_rpc_server_port(server));
    // In clear: refused (the connection fails).
    EXPECT_EQ(ggml_backend_rpc_add_server(endpoint.c_str()), nullptr);
    // Over TLS, trusting the certificate (a failed connection is not kept,
    // so the same endpoint connects anew), the bulk connection too: no
    // warning that transfers fall back to gRPC.
    setenv("LOOM_RPC_TLS_CA", cert.c_str(), 1);
    loomtest::LogCapture log;
    ggml_backend_ptr     backend(ggml_backend_rpc_init(endpoint.c_str(), 0));
    unsetenv("LOOM_RPC_TLS_CA");
    ASSERT_NE(backend, nullptr);
    EXPECT_FALSE(log.contains("bulk")) << log.text();
    auto          ctx = context();
    ggml_tensor * a   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_tensor * big = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, (40 << 20) / 4 + 3);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
    const float             v[4] = {1, 2, 3, 4};
    float                   got[4];
    ggml_backend_tensor_set(a, v, 0, sizeof(v));
    ggml_backend_tensor_get(a, got, 0, sizeof(got));
    EXPECT_EQ(std::memcmp(v, got, sizeof(v)), 0);
    const std::vector<float> bv = iota_values(size_t(ggml_nelements(big)), 0.125f);
    std::vector<float>       bgot(bv.size());
    ggml_backend_tensor_set(big, bv.data(), 0, ggml_nbytes(big));
    ggml_backend_tensor_get(big, bgot.data(), 0, ggml_nbytes(big));
    EXPECT_TRUE(bgot == bv);
    EXPECT_FALSE(log.contains("failed")) << log.text();
    // Servers speaking TLS offer no peer links (Note [Peer links]): the
    // collective hooks decline them, and a meta device sums through the client.
    loom_rpc_server_t other = loom_rpc_server_start(&p);
    ASSERT_NE(other, nullptr);
    const std::string other_endpoint = "127.0.0.1:" + std::to_string(loom_rpc_server_port(other));
    setenv("LOOM_RPC_TLS_CA", cert.c_str(), 1);
    ggml_backend_ptr backend2(ggml_backend_rpc_init(other_endpoint.c_str(), 0));
    unsetenv("LOOM_RPC_TLS_CA");
    ASSERT_NE(backend2, nullptr);
    auto comm_init = reinterpret_cast<ggml_backend_comm_init_t>(ggml_backend_reg_get_proc_address(
        ggml_backend_dev_backend_reg(ggml_backend_get_device(backend.get())), "ggml_backend_comm_init"));
    ASSERT_NE(comm_init, nullptr);
    ggml_backend_t pair[2] = {backend.get(), backend2.get()};
    EXPECT_EQ(comm_init(pair, 2), nullptr);
    backend2.reset();
    loom_rpc_server_stop(other);
    buf.reset();
    backend.reset();
    loom_rpc_server_stop(server);
    std::filesystem::remove_all(dir);
}

} // namespace
