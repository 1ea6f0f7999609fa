// The RPC backend as a stream (Note [RPC streams] in src/backends/rpc/client.cpp):
// computations and downloads that return before they end, in the order they
// were issued; events; failures of computations nobody waited for, reported
// once; graphs the server holds, shared by the backends of one server.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "ggml-rpc.h"
#include "log_capture.h"
#include "rpc_test_util.h"

using namespace loomtest::rpc;

namespace {

class RpcStream : public ::testing::Test {
  protected:
    void SetUp() override {
        loom_rpc_set_token(kToken);
        loom_rpc_set_timeouts(10000, 20000);
    }
};

// y = (a + b) * s on n floats, allocated on backend.
struct Step {
    ggml_context_ptr        ctx;
    ggml_tensor *           a = nullptr;
    ggml_tensor *           b = nullptr;
    ggml_tensor *           y = nullptr;
    ggml_cgraph *           g = nullptr;
    ggml_backend_buffer_ptr buf;

    Step(ggml_backend_t backend, int64_t n, float s) {
        ggml_init_params ip{};
        ip.mem_size = 8 * ggml_tensor_overhead() + ggml_graph_overhead();
        ip.no_alloc = true;
        ctx.reset(ggml_init(ip));
        a = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n);
        b = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n);
        y = ggml_scale(ctx.get(), ggml_add(ctx.get(), a, b), s);
        g = ggml_new_graph(ctx.get());
        ggml_build_forward_expand(g, y);
        buf.reset(ggml_backend_alloc_ctx_tensors(ctx.get(), backend));
    }
};

std::vector<float> values(size_t n, float base) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = base + 0.25f * float(i % 97);
    return v;
}

// Forty steps issued without a wait: each step's input, computation and
// download are queued behind the previous ones, and after one synchronize
// every step's output holds that step's result (a reordered or lost frame
// gives another step's values).
TEST_F(RpcStream, StepsIssuedWithoutWaitingLandInOrder) {
    TestServer       server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    constexpr int64_t n = 300;
    Step              st(backend.get(), n, 2.0f);
    ASSERT_NE(st.buf, nullptr);
    const std::vector<float> b = values(n, -1.0f);
    ggml_backend_tensor_set(st.b, b.data(), 0, sizeof(float) * n);

    constexpr int                   steps = 40;
    std::vector<std::vector<float>> in(steps), out(steps, std::vector<float>(n, -99.0f));
    for (int k = 0; k < steps; ++k) {
        in[size_t(k)] = values(n, float(k));
        ggml_backend_tensor_set_async(backend.get(), st.a, in[size_t(k)].data(), 0, sizeof(float) * n);
        ASSERT_EQ(ggml_backend_graph_compute_async(backend.get(), st.g), GGML_STATUS_SUCCESS) << k;
        ggml_backend_tensor_get_async(backend.get(), st.y, out[size_t(k)].data(), 0, sizeof(float) * n);
    }
    ggml_backend_synchronize(backend.get());
    for (int k = 0; k < steps; ++k) {
        for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(out[size_t(k)][size_t(i)], (in[size_t(k)][size_t(i)] + b[size_t(i)]) * 2.0f)
                << "step " << k << " element " << i;
        }
    }
    EXPECT_EQ(ggml_backend_graph_compute(backend.get(), st.g), GGML_STATUS_SUCCESS);
}

// Small uploads wait to be written with the next frame (Note [Uploads held
// back] in src/backends/rpc/bulk_client.cpp): thousands of one-float uploads,
// more bytes than are held at once, then a server-side copy and a memset that
// go through gRPC, then a buffer freed with uploads just issued. Every read
// sees every upload issued before it.
TEST_F(RpcStream, HeldUploadsReachTheServerBeforeWhatReadsThem) {
    TestServer       server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    constexpr int64_t n = 3000;
    Step              st(backend.get(), n, 1.0f);
    ASSERT_NE(st.buf, nullptr);
    const std::vector<float> v = values(size_t(n), 5.0f);
    for (int64_t i = 0; i < n; ++i) {
        ggml_backend_tensor_set(st.a, &v[size_t(i)], size_t(i) * sizeof(float), sizeof(float));
    }
    ggml_backend_tensor_copy(st.a, st.b); // the server's copy, through gRPC
    std::vector<float> got(size_t(n), 0.0f);
    ggml_backend_tensor_get(st.b, got.data(), 0, sizeof(float) * size_t(n));
    EXPECT_EQ(got, v);
    // An upload, then a memset of part of it through gRPC, then a read.
    ggml_backend_tensor_set(st.a, v.data(), 0, sizeof(float) * 8);
    ggml_backend_tensor_memset(st.a, 0, 4 * sizeof(float), 4 * sizeof(float));
    ggml_backend_tensor_get(st.a, got.data(), 0, sizeof(float) * 8);
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(got[size_t(i)], i < 4 ? v[size_t(i)] : 0.0f) << i;
    }
    // Uploads into a buffer freed right after them, then a computation on
    // another: the connection goes on.
    {
        Step gone(backend.get(), 16, 1.0f);
        ASSERT_NE(gone.buf, nullptr);
        ggml_backend_tensor_set(gone.a, v.data(), 0, sizeof(float) * 16);
    }
    ggml_backend_tensor_set(st.a, v.data(), 0, sizeof(float) * size_t(n));
    ASSERT_EQ(ggml_backend_graph_compute(backend.get(), st.g), GGML_STATUS_SUCCESS);
    ggml_backend_tensor_get(st.y, got.data(), 0, sizeof(float) * size_t(n));
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[size_t(i)], v[size_t(i)] + v[size_t(i)]) << i;
    }
}

// A download larger than the sockets may hold unread, and downloads whose
// sum is, give their bytes exactly.
TEST_F(RpcStream, LargeAndManyDownloadsWithoutWaiting) {
    TestServer       server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    constexpr int64_t n = 1 << 20; // 4 MiB
    Step              st(backend.get(), n, 1.0f);
    ASSERT_NE(st.buf, nullptr);
    const std::vector<float> a = values(size_t(n), 3.0f);
    ggml_backend_tensor_set(st.a, a.data(), 0, sizeof(float) * size_t(n));
    std::vector<float> whole(size_t(n), 0.0f);
    ggml_backend_tensor_get_async(backend.get(), st.a, whole.data(), 0, sizeof(float) * size_t(n));
    // 64 pieces of 16 KiB each: more than the unread limit together.
    std::vector<float> pieces(size_t(n) / 16, 0.0f);
    const size_t       piece = pieces.size() / 64;
    for (size_t p = 0; p < 64; ++p) {
        ggml_backend_tensor_get_async(backend.get(), st.a, pieces.data() + p * piece, p * piece * 16 * sizeof(float),
                                      piece * sizeof(float));
    }
    ggml_backend_synchronize(backend.get());
    EXPECT_EQ(std::memcmp(whole.data(), a.data(), whole.size() * sizeof(float)), 0);
    for (size_t p = 0; p < 64; ++p) {
        for (size_t i = 0; i < piece; ++i) {
            ASSERT_EQ(pieces[p * piece + i], a[p * piece * 16 + i]) << p << " " << i;
        }
    }
}

// An event recorded after a computation and a download: once it is
// synchronized the download has landed. The device says it has events.
TEST_F(RpcStream, EventsMarkThePlaceInTheStream) {
    TestServer       server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    ggml_backend_dev_t    dev = ggml_backend_get_device(backend.get());
    ggml_backend_dev_props props{};
    ggml_backend_dev_get_props(dev, &props);
    EXPECT_TRUE(props.caps.async);
    EXPECT_TRUE(props.caps.events);
    ggml_backend_event_t ev = ggml_backend_event_new(dev);
    ASSERT_NE(ev, nullptr);
    constexpr int64_t n = 64;
    Step              st(backend.get(), n, 3.0f);
    ASSERT_NE(st.buf, nullptr);
    for (int k = 0; k < 5; ++k) {
        const std::vector<float> a = values(n, float(10 * k)), b = values(n, 1.0f);
        std::vector<float>       out(n, 0.0f);
        ggml_backend_tensor_set(st.a, a.data(), 0, sizeof(float) * n);
        ggml_backend_tensor_set(st.b, b.data(), 0, sizeof(float) * n);
        ASSERT_EQ(ggml_backend_graph_compute_async(backend.get(), st.g), GGML_STATUS_SUCCESS);
        ggml_backend_tensor_get_async(backend.get(), st.y, out.data(), 0, sizeof(float) * n);
        ggml_backend_event_record(ev, backend.get());
        ggml_backend_event_synchronize(ev);
        for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(out[size_t(i)], (a[size_t(i)] + b[size_t(i)]) * 3.0f) << k << " " << i;
        }
    }
    // A CPU backend waiting for the remote event blocks until it is done.
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_event_wait(cpu.get(), ev);
    ggml_backend_event_free(ev);
}

// A computation the server refuses, not waited for: the synchronize logs it,
// the next computation reports it (once) and is not run, and the one after
// runs. Waited for (ggml_backend_graph_compute), the refusal is its result.
TEST_F(RpcStream, AFailureNobodyWaitedForIsReportedOnce) {
    TestServer       server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    constexpr int64_t n = 64;
    Step              st(backend.get(), n, 2.0f);
    ASSERT_NE(st.buf, nullptr);
    // A result placed past the end of its buffer: the client sends it as it
    // is, the server refuses it.
    ggml_init_params ip{};
    ip.mem_size = 4 * ggml_tensor_overhead() + ggml_graph_overhead();
    ip.no_alloc = true;
    ggml_context_ptr bad_ctx(ggml_init(ip));
    ggml_tensor *    bad = ggml_scale(bad_ctx.get(), st.a, 5.0f);
    bad->buffer          = st.buf.get();
    bad->data            = static_cast<char *>(ggml_backend_buffer_get_base(st.buf.get())) +
                ggml_backend_buffer_get_size(st.buf.get()) + 4096;
    ggml_cgraph * bad_g = ggml_new_graph(bad_ctx.get());
    ggml_build_forward_expand(bad_g, bad);

    const std::vector<float> a = values(n, 1.0f), b = values(n, 2.0f);
    ggml_backend_tensor_set(st.a, a.data(), 0, sizeof(float) * n);
    ggml_backend_tensor_set(st.b, b.data(), 0, sizeof(float) * n);
    {
        loomtest::LogCapture log(true);
        EXPECT_EQ(ggml_backend_graph_compute_async(backend.get(), bad_g), GGML_STATUS_SUCCESS);
        ggml_backend_synchronize(backend.get());
        EXPECT_TRUE(log.contains("GraphCompute")) << log.text();
        EXPECT_EQ(ggml_backend_graph_compute_async(backend.get(), st.g), GGML_STATUS_FAILED);
        EXPECT_TRUE(log.contains("an earlier computation failed")) << log.text();
    }
    std::vector<float> out(n, 0.0f);
    ASSERT_EQ(ggml_backend_graph_compute(backend.get(), st.g), GGML_STATUS_SUCCESS);
    ggml_backend_tensor_get(st.y, out.data(), 0, sizeof(float) * n);
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[size_t(i)], (a[size_t(i)] + b[size_t(i)]) * 2.0f) << i;
    }
    {
        loomtest::LogCapture log(true);
        EXPECT_EQ(ggml_backend_graph_compute(backend.get(), bad_g), GGML_STATUS_FAILED);
    }
    EXPECT_EQ(ggml_backend_graph_compute(backend.get(), st.g), GGML_STATUS_SUCCESS);
}

// Two backends of one server computing different graphs in turn, and a
// buffer freed between computations (the server then drops the graph it
// holds): each computation gives its own graph's result, none fails.
TEST_F(RpcStream, GraphsHeldByTheServerAreKnownToEveryBackend) {
    TestServer       server;
    ggml_backend_ptr one(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ggml_backend_ptr two(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_TRUE(one && two);
    constexpr int64_t n = 32;
    Step              s1(one.get(), n, 2.0f), s2(two.get(), n, 3.0f);
    ASSERT_TRUE(s1.buf && s2.buf);
    const std::vector<float> a = values(n, 1.0f), b = values(n, 0.5f);
    for (Step * s : {&s1, &s2}) {
        ggml_backend_tensor_set(s->a, a.data(), 0, sizeof(float) * n);
        ggml_backend_tensor_set(s->b, b.data(), 0, sizeof(float) * n);
    }
    loomtest::LogCapture log(true);
    for (int k = 0; k < 6; ++k) {
        if (k == 3) {
            // Another buffer comes and goes.
            ggml_backend_buffer_ptr extra(
                ggml_backend_buft_alloc_buffer(ggml_backend_get_default_buffer_type(one.get()), 4096));
            ASSERT_NE(extra, nullptr);
        }
        std::vector<float> o1(n), o2(n);
        ASSERT_EQ(ggml_backend_graph_compute_async(one.get(), s1.g), GGML_STATUS_SUCCESS) << k;
        ggml_backend_tensor_get_async(one.get(), s1.y, o1.data(), 0, sizeof(float) * n);
        ASSERT_EQ(ggml_backend_graph_compute_async(two.get(), s2.g), GGML_STATUS_SUCCESS) << k;
        ggml_backend_tensor_get_async(two.get(), s2.y, o2.data(), 0, sizeof(float) * n);
        ggml_backend_synchronize(one.get());
        ggml_backend_synchronize(two.get());
        EXPECT_EQ(ggml_backend_graph_compute(one.get(), s1.g), GGML_STATUS_SUCCESS);
        for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(o1[size_t(i)], (a[size_t(i)] + b[size_t(i)]) * 2.0f) << k << " " << i;
            ASSERT_EQ(o2[size_t(i)], (a[size_t(i)] + b[size_t(i)]) * 3.0f) << k << " " << i;
        }
    }
    EXPECT_FALSE(log.contains("failed")) << log.text();
}

// A copy from host memory on the remote stream, through the scheduler's
// entry point: the destination holds the source after the synchronize.
TEST_F(RpcStream, CopiesFromHostMemoryGoOnTheStream) {
    TestServer       server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ASSERT_TRUE(backend && cpu);
    constexpr int64_t n = 128;
    Step              remote(backend.get(), n, 4.0f);
    Step              host(cpu.get(), n, 1.0f);
    ASSERT_TRUE(remote.buf && host.buf);
    const std::vector<float> a = values(n, 7.0f), b = values(n, -2.0f);
    ggml_backend_tensor_set(host.a, a.data(), 0, sizeof(float) * n);
    ggml_backend_tensor_set(remote.b, b.data(), 0, sizeof(float) * n);
    ggml_backend_tensor_copy_async(cpu.get(), backend.get(), host.a, remote.a);
    ASSERT_EQ(ggml_backend_graph_compute_async(backend.get(), remote.g), GGML_STATUS_SUCCESS);
    std::vector<float> out(n, 0.0f);
    ggml_backend_tensor_get_async(backend.get(), remote.y, out.data(), 0, sizeof(float) * n);
    ggml_backend_synchronize(backend.get());
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[size_t(i)], (a[size_t(i)] + b[size_t(i)]) * 4.0f) << i;
    }
}

} // namespace

namespace {

// A buffer the server refuses is NULL for its caller and nothing more: the
// next computation runs (the refusal is not a failed transfer).
TEST_F(RpcStream, ARefusedBufferDoesNotFailTheNextComputation) {
    TestServer       server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    constexpr int64_t n = 16;
    Step              st(backend.get(), n, 2.0f);
    ASSERT_NE(st.buf, nullptr);
    const std::vector<float> a = values(n, 1.0f), b = values(n, 2.0f);
    ggml_backend_tensor_set(st.a, a.data(), 0, sizeof(float) * n);
    ggml_backend_tensor_set(st.b, b.data(), 0, sizeof(float) * n);
    {
        loomtest::LogCapture log(true);
        ggml_backend_buffer_t huge =
            ggml_backend_buft_alloc_buffer(ggml_backend_get_default_buffer_type(backend.get()), size_t(1) << 50);
        EXPECT_EQ(huge, nullptr);
        EXPECT_TRUE(log.contains("AllocBuffer")) << log.text();
    }
    ASSERT_EQ(ggml_backend_graph_compute(backend.get(), st.g), GGML_STATUS_SUCCESS);
    std::vector<float> out(n, 0.0f);
    ggml_backend_tensor_get(st.y, out.data(), 0, sizeof(float) * n);
    for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[size_t(i)], (a[size_t(i)] + b[size_t(i)]) * 2.0f) << i;
    }
}

} // namespace
