// The bulk connection of the RPC backend (Note [RPC bulk connection] in
// src/backends/rpc/bulk.h): large and odd transfers through the backend,
// and the raw framing against a server on loopback: tickets, frames that
// announce more than they carry or name bytes outside their buffer,
// clients that vanish mid-upload.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "backends/rpc/bulk.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-rpc.h"
#include "log_capture.h"
#include "rpc_bulk_test_util.h"
#include "rpc_test_util.h"

using namespace loomtest::rpc;
namespace bulk = loom::rpc::bulk;

namespace {

class RpcBulk : public ::testing::Test {
  protected:
    void SetUp() override {
        loom_rpc_set_token(kToken);
        loom_rpc_set_timeouts(10000, 20000);
    }
};

std::string desc_f32(uint64_t buffer, int64_t ne) {
    loom::rpc::TensorDesc d;
    describe_f32(&d, buffer, 0, ne);
    return d.SerializeAsString();
}

void wait_for_sessions(loom_rpc_server_t server, size_t n) {
    for (int i = 0; i < 250 && loom_rpc_server_session_count(server) != n; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

// A session that can still store and read through gRPC.
void expect_serving(const TestServer & server) {
    RawClient c(server.endpoint());
    ASSERT_TRUE(c.connect().ok());
    const uint64_t h = c.alloc(64);
    ASSERT_NE(h, 0u);
    loom::rpc::SetTensorRequest set;
    describe_f32(set.mutable_tensor(), h, 0, 16);
    set.set_data(std::string(64, 'z'));
    loom::rpc::Empty e;
    EXPECT_TRUE(c.stub().SetTensor(c.ctx().get(), set, &e).ok());
}

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    uint32_t             x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; ++i) {
        x    = x * 1664525u + 1013904223u;
        v[i] = uint8_t(x >> 24);
    }
    return v;
}

// 100 MiB through the backend: new content, the same content again (from
// the server's cache, when it has one) and a download, bit-exact; a compute
// buffer (never hashed) too.
TEST_F(RpcBulk, LargeTensorsRoundTripBitExact) {
    for (size_t cache_bytes : {size_t(0), size_t(256) << 20}) {
        TestServer server(kToken, nullptr, cache_bytes);
        ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
        ASSERT_NE(backend, nullptr);
        const size_t bytes = size_t(100) << 20;
        for (ggml_backend_buffer_usage usage : {GGML_BACKEND_BUFFER_USAGE_ANY, GGML_BACKEND_BUFFER_USAGE_COMPUTE}) {
            SCOPED_TRACE(std::to_string(int(usage)) + (cache_bytes != 0 ? ", content cache" : ", no content cache"));
            ggml_init_params ip{};
            ip.mem_size = 4 * ggml_tensor_overhead();
            ip.no_alloc = true;
            ggml_context_ptr ctx(ggml_init(ip));
            ggml_tensor *    big = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I8, int64_t(bytes));
            ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
            ASSERT_NE(buf, nullptr);
            ggml_backend_buffer_set_usage(buf.get(), usage);
            const std::vector<uint8_t> src = pattern(bytes, 7 + uint32_t(usage));
            std::vector<uint8_t>       got(bytes);
            for (int twice = 0; twice < 2; ++twice) {
                ggml_backend_tensor_set(big, src.data(), 0, bytes);
                std::fill(got.begin(), got.end(), uint8_t(0));
                ggml_backend_tensor_get(big, got.data(), 0, bytes);
                ASSERT_TRUE(got == src);
            }
        }
    }
}

// TestDev0 of the test plugin: buffers that are not host memory, tensors
// padded to 256 bytes.
ggml_backend_dev_t test_device() {
    static ggml_backend_reg_t reg = ggml_backend_load(LOOM_TESTDEV_PATH);
    return reg != nullptr ? ggml_backend_dev_by_name("TestDev0") : nullptr;
}

// A remote device's tensor sizes are its server's: padded on a device that
// pads, the data's size on the CPU.
TEST_F(RpcBulk, AllocSizeIsTheServerDevices) {
    std::vector<ggml_backend_dev_t> devs = {ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU), test_device()};
    ASSERT_NE(devs[1], nullptr) << "cannot load " << LOOM_TESTDEV_PATH;
    loom_rpc_server_params p{};
    p.endpoint               = "127.0.0.1:0";
    p.token                  = kToken;
    p.n_devices              = devs.size();
    p.devices                = devs.data();
    loom_rpc_server_t server = loom_rpc_server_start(&p);
    ASSERT_NE(server, nullptr);
    const std::string endpoint = "127.0.0.1:" + std::to_string(loom_rpc_server_port(server));
    ggml_init_params  ip{};
    ip.mem_size = 8 * ggml_tensor_overhead();
    ip.no_alloc = true;
    ggml_context_ptr ctx(ggml_init(ip));
    ggml_tensor *    a = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 25, 3);  // 300 bytes
    ggml_tensor *    b = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F16, 128);    // 256 bytes
    ggml_tensor *    c = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_Q4_0, 96);    // 54 bytes
    ggml_tensor *    v = ggml_view_1d(ctx.get(), a, 10, 4 * sizeof(float));    // 40 bytes
    for (uint32_t d = 0; d < 2; ++d) {
        SCOPED_TRACE(d);
        ggml_backend_buffer_type_t buft = ggml_backend_rpc_buffer_type(endpoint.c_str(), d);
        ASSERT_NE(buft, nullptr);
        for (ggml_tensor * t : {a, b, c, v, a}) {
            const size_t want = d == 0 ? ggml_nbytes(t) : (ggml_nbytes(t) + 255) / 256 * 256;
            EXPECT_EQ(ggml_backend_buft_get_alloc_size(buft, t), want) << ggml_nbytes(t);
        }
    }
    loom_rpc_server_stop(server);
}

// Pieces at odd offsets and of odd sizes, across the server's 4 MiB staging
// chunks and the client's 64 KiB small-frame limit, on every device of the
// server (the CPU's memory is written directly, TestDev0's through staging),
// checked against a copy kept here; many small uploads in a row are not
// waited for one by one and still land in order.
TEST_F(RpcBulk, OddPiecesLandWhereTheyAreSent) {
    std::vector<ggml_backend_dev_t> devs = {ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU), test_device()};
    ASSERT_NE(devs[1], nullptr) << "cannot load " << LOOM_TESTDEV_PATH;
    loom_rpc_server_params p{};
    p.endpoint               = "127.0.0.1:0";
    p.token                  = kToken;
    p.n_devices              = devs.size();
    p.devices                = devs.data();
    loom_rpc_server_t server = loom_rpc_server_start(&p);
    ASSERT_NE(server, nullptr);
    const std::string endpoint = "127.0.0.1:" + std::to_string(loom_rpc_server_port(server));
    const size_t      bytes    = (size_t(9) << 20) + 13;
    const size_t      staging  = bulk::k_staging_bytes;
    for (uint32_t d = 0; d < devs.size(); ++d) {
        SCOPED_TRACE(ggml_backend_dev_name(devs[d]));
        ggml_backend_ptr backend(ggml_backend_rpc_init(endpoint.c_str(), d));
        ASSERT_NE(backend, nullptr);
        ggml_init_params ip{};
        ip.mem_size = 4 * ggml_tensor_overhead();
        ip.no_alloc = true;
        ggml_context_ptr        ctx(ggml_init(ip));
        ggml_tensor *           t = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I8, int64_t(bytes));
        ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
        ASSERT_NE(buf, nullptr);
        ggml_backend_buffer_set_usage(buf.get(), GGML_BACKEND_BUFFER_USAGE_COMPUTE);
        std::vector<uint8_t> mirror(bytes, 0);
        const std::pair<size_t, size_t> pieces[] = {
            {0, bytes},           {1, 1},
            {staging - 3, 7},     {staging - 1, staging + 2},
            {3, (64 << 10) - 1},  {100, (64 << 10) + 1},
            {bytes - 5, 5},       {2 * staging + 11, (1 << 20) + 2},
        };
        uint32_t seed = 1;
        for (const auto & [off, n] : pieces) {
            const std::vector<uint8_t> v = pattern(n, seed++);
            ggml_backend_tensor_set(t, v.data(), off, n);
            std::memcpy(mirror.data() + off, v.data(), n);
        }
        for (size_t i = 0; i < 500; ++i) {
            const uint8_t b = uint8_t(i * 7 + 1);
            ggml_backend_tensor_set(t, &b, i * 977, 1);
            mirror[i * 977] = b;
        }
        std::vector<uint8_t> got(bytes);
        ggml_backend_tensor_get(t, got.data(), 0, bytes);
        EXPECT_TRUE(got == mirror);
        for (const auto & [off, n] : pieces) {
            std::vector<uint8_t> part(n);
            ggml_backend_tensor_get(t, part.data(), off, n);
            EXPECT_EQ(std::memcmp(part.data(), mirror.data() + off, n), 0) << off << " " << n;
        }
    }
    loom_rpc_server_stop(server);
}

// A ticket binds one connection of its session: a forged one and a used one
// are refused and their connections closed; a ticket dies with its session.
TEST_F(RpcBulk, ForgedOrReusedTicketsAreRefused) {
    TestServer server;
    RawClient  c(server.endpoint());
    ASSERT_TRUE(c.connect().ok());
    ASSERT_NE(c.bulk_port(), 0u);
    ASSERT_EQ(c.bulk_ticket().size(), bulk::k_ticket_bytes);

    std::string forged = c.bulk_ticket();
    forged[5] ^= 1;
    RawBulk f(c.bulk_port());
    ASSERT_TRUE(f.ok() && f.hello(forged));
    auto r = f.reply();
    EXPECT_EQ(r.first, int(grpc::StatusCode::UNAUTHENTICATED));
    EXPECT_TRUE(f.closed_by_server());

    RawBulk old(c.bulk_port());
    ASSERT_TRUE(old.ok() && old.hello(c.bulk_ticket(), loom::rpc::k_protocol_version + 1));
    EXPECT_EQ(old.reply().first, int(grpc::StatusCode::FAILED_PRECONDITION));

    RawBulk first(c.bulk_port());
    ASSERT_TRUE(first.ok() && first.hello(c.bulk_ticket()));
    EXPECT_EQ(first.reply().first, 0);
    for (bool first_open : {true, false}) {
        if (!first_open) {
            first.end();
        }
        RawBulk again(c.bulk_port());
        ASSERT_TRUE(again.ok() && again.hello(c.bulk_ticket()));
        EXPECT_EQ(again.reply().first, int(grpc::StatusCode::UNAUTHENTICATED));
        EXPECT_TRUE(again.closed_by_server());
    }

    // The ticket of a session that ended binds nothing.
    RawClient gone(server.endpoint());
    ASSERT_TRUE(gone.connect().ok());
    const std::string ticket = gone.bulk_ticket();
    gone.disconnect();
    wait_for_sessions(server.get(), 1);
    RawBulk late(gone.bulk_port());
    ASSERT_TRUE(late.ok() && late.hello(ticket));
    EXPECT_EQ(late.reply().first, int(grpc::StatusCode::UNAUTHENTICATED));
}

// A set frame is checked before any of its bytes is read: outside the
// buffer it is refused at once (and ends the connection); one announcing
// more bytes than arrive is refused when the connection ends. The session
// and the server serve on.
TEST_F(RpcBulk, FramesOutsideTheBufferOrShortOfBytesAreRefused) {
    TestServer server;
    RawClient  c(server.endpoint());
    ASSERT_TRUE(c.connect().ok());
    const uint64_t h = c.alloc(4096);
    ASSERT_NE(h, 0u);
    auto bind = [&](RawBulk & b) {
        ASSERT_TRUE(b.ok() && b.hello(c.bulk_ticket()));
        EXPECT_EQ(b.reply().first, 0);
    };
    {
        RawBulk b(c.bulk_port());
        bind(b);
        // A frame inside the tensor, then one reaching past it (no bytes sent).
        b.frame(bulk::Op::set, desc_f32(h, 1024), 0, 8);
        ASSERT_TRUE(b.write("abcdefgh", 8));
        EXPECT_EQ(b.reply().first, 0);
        b.frame(bulk::Op::set, desc_f32(h, 1024), 4090, 16);
        auto r = b.reply();
        EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
        EXPECT_NE(r.second.find("SetTensor"), std::string::npos) << r.second;
        EXPECT_TRUE(b.closed_by_server());
    }
    // The ticket was used: a new session for the next connection.
    RawClient c2(server.endpoint());
    ASSERT_TRUE(c2.connect().ok());
    const uint64_t h2 = c2.alloc(1 << 20);
    ASSERT_NE(h2, 0u);
    {
        RawBulk b(c2.bulk_port());
        ASSERT_TRUE(b.ok() && b.hello(c2.bulk_ticket()));
        EXPECT_EQ(b.reply().first, 0);
        b.frame(bulk::Op::set, desc_f32(h2, 1 << 18), 0, 1 << 20);
        ASSERT_TRUE(b.write(std::string(1000, 'q').data(), 1000));
        b.end_writes();
        auto r = b.reply();
        EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
        EXPECT_NE(r.second.find("announced 1048576 bytes"), std::string::npos) << r.second;
    }
    // Both sessions still answer through gRPC: what the first frame wrote is there.
    loom::rpc::GetTensorRequest get;
    describe_f32(get.mutable_tensor(), h, 0, 1024);
    get.set_size(8);
    loom::rpc::GetTensorReply got;
    ASSERT_TRUE(c.stub().GetTensor(c.ctx().get(), get, &got).ok());
    EXPECT_EQ(got.data(), "abcdefgh");
    get.mutable_tensor()->Clear();
    describe_f32(get.mutable_tensor(), h2, 0, 1 << 18);
    const grpc::Status st = c2.stub().GetTensor(c2.ctx().get(), get, &got);
    EXPECT_TRUE(st.ok()) << st.error_message();
    expect_serving(server);
}

// A client that vanishes mid-upload: its session ends (buffers freed) when
// its Connect stream ends, even while the upload waits for bytes, and the
// server serves others.
TEST_F(RpcBulk, UploadCutOffMidwayFreesTheSession) {
    TestServer server;
    for (bool close_socket_first : {true, false}) {
        SCOPED_TRACE(close_socket_first);
        auto c = std::make_unique<RawClient>(server.endpoint());
        ASSERT_TRUE(c->connect().ok());
        const uint64_t size = uint64_t(64) << 20;
        const uint64_t h    = c->alloc(size);
        ASSERT_NE(h, 0u);
        RawBulk b(c->bulk_port());
        ASSERT_TRUE(b.ok() && b.hello(c->bulk_ticket()));
        EXPECT_EQ(b.reply().first, 0);
        b.frame(bulk::Op::set, desc_f32(h, int64_t(size / 4)), 0, size);
        const std::string part(8 << 20, 'x');
        ASSERT_TRUE(b.write(part.data(), part.size()));
        if (close_socket_first) {
            b.end();
        }
        c.reset(); // the Connect stream ends
        // The session ends with its stream: wait_for_sessions gives up long
        // before the server's 30 s transfer timeout could end it instead.
        wait_for_sessions(server.get(), 0);
        EXPECT_EQ(loom_rpc_server_session_count(server.get()), 0u);
        if (!close_socket_first) {
            EXPECT_TRUE(b.closed_by_server());
        }
        expect_serving(server);
        wait_for_sessions(server.get(), 0);
    }
}

} // namespace

namespace {

// Inference steps: an input set without waiting, the graph computed, the
// output read, many times over; each step sees its own input. A graph
// changed in place (an op parameter, a source) between computations is
// sent again, not taken for the cached one.
TEST_F(RpcBulk, StepsSeeTheirInputsAndChangedGraphsAreResent) {
    TestServer       server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    ggml_init_params ip{};
    ip.mem_size = 16 * ggml_tensor_overhead() + ggml_graph_overhead();
    ip.no_alloc = true;
    ggml_context_ptr ctx(ggml_init(ip));
    const int64_t    n = 37;
    ggml_tensor *    a = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n);
    ggml_tensor *    b = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n);
    ggml_tensor *    c = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n);
    ggml_tensor *    s = ggml_add(ctx.get(), a, b);
    ggml_tensor *    y = ggml_scale(ctx.get(), s, 2.0f);
    ggml_cgraph *    g = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, y);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
    ASSERT_NE(buf, nullptr);
    std::vector<float> av(n), bv(n), cv(n), out(n);
    for (int64_t i = 0; i < n; ++i) {
        bv[size_t(i)] = float(i) * 0.5f;
        cv[size_t(i)] = 100.0f + float(i);
    }
    ggml_backend_tensor_set(b, bv.data(), 0, ggml_nbytes(b));
    ggml_backend_tensor_set(c, cv.data(), 0, ggml_nbytes(c));
    auto expect_y = [&](float scale, const std::vector<float> & second) {
        ASSERT_EQ(ggml_backend_graph_compute(backend.get(), g), GGML_STATUS_SUCCESS);
        ggml_backend_tensor_get(y, out.data(), 0, ggml_nbytes(y));
        for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(out[size_t(i)], (av[size_t(i)] + second[size_t(i)]) * scale) << i;
        }
    };
    for (int step = 0; step < 200; ++step) {
        for (int64_t i = 0; i < n; ++i) {
            av[size_t(i)] = float(step * 3 - i);
        }
        ggml_backend_tensor_set(a, av.data(), 0, ggml_nbytes(a));
        expect_y(2.0f, bv);
    }
    const float three = 3.0f;
    std::memcpy(y->op_params, &three, sizeof(three));
    expect_y(3.0f, bv);
    s->src[1] = c;
    expect_y(3.0f, cv);
    s->src[1] = b;
    expect_y(3.0f, bv);
}

} // namespace

namespace {

// An upload the server refuses (a view whose strides break the type's
// alignment) ends the bulk connection: the refusal is logged, the next
// computation fails (a transfer before it failed), and from then on
// transfers and computations go through gRPC and succeed.
TEST_F(RpcBulk, RefusedUploadFailsOneComputationThenGrpcServes) {
    TestServer       server;
    ggml_backend_ptr backend(ggml_backend_rpc_init(server.endpoint().c_str(), 0));
    ASSERT_NE(backend, nullptr);
    ggml_init_params ip{};
    ip.mem_size = 16 * ggml_tensor_overhead() + ggml_graph_overhead();
    ip.no_alloc = true;
    ggml_context_ptr ctx(ggml_init(ip));
    ggml_tensor *    a = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 64);
    ggml_tensor *    y = ggml_scale(ctx.get(), a, 2.0f);
    ggml_cgraph *    g = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, y);
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()));
    ASSERT_NE(buf, nullptr);
    ggml_tensor * odd = ggml_view_2d(ctx.get(), a, 2, 4, 6, 0); // nb1 = 6: not a multiple of 4
    ggml_backend_view_init(odd);

    std::vector<float> v(64), out(64);
    for (int i = 0; i < 64; ++i) {
        v[size_t(i)] = float(i) - 20.0f;
    }
    ggml_backend_tensor_set(a, v.data(), 0, sizeof(float) * 64);
    {
        loomtest::LogCapture log(true);
        const float junk[4] = {9, 9, 9, 9};
        ggml_backend_tensor_set(odd, junk, 0, 8);
        EXPECT_EQ(ggml_backend_graph_compute(backend.get(), g), GGML_STATUS_FAILED);
        // The refusal, or (when the server's close came first) the lost connection.
        EXPECT_TRUE(log.contains("nb[1] = 6") || log.contains("bulk connection lost")) << log.text();
    }
    for (int round = 0; round < 3; ++round) {
        v[0] = float(round);
        ggml_backend_tensor_set(a, v.data(), 0, sizeof(float) * 64);
        ASSERT_EQ(ggml_backend_graph_compute(backend.get(), g), GGML_STATUS_SUCCESS) << round;
        ggml_backend_tensor_get(y, out.data(), 0, sizeof(float) * 64);
        for (int i = 0; i < 64; ++i) {
            ASSERT_EQ(out[size_t(i)], 2.0f * v[size_t(i)]) << i;
        }
    }
}

} // namespace
