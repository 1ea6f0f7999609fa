#pragma once

// What the RPC attack tests share (test_rpc_attacks.cpp, test_rpc_attacks_graphs.cpp):
// messages, canary bytes, raw calls, and the parties of every attack: a victim session
// holding canaries and an attacker session, checked after each test.

#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <latch>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/rpc/protocol.h"
#include "backends/rpc/validate.h"
#include "ggml-cpp.h"
#include "ggml-rpc.h"
#include "ggml.h"
#include "rpc_bulk_test_util.h"
#include "rpc_test_util.h"

namespace loomtest::rpc_attacks {

using namespace loomtest::rpc;
namespace bulk = loom::rpc::bulk;
using loom::rpc::TensorDesc;

inline constexpr uint64_t kBuf = 4096; // bytes of each buffer of the parties

// ---- messages ------------------------------------------------------------------

// A tensor of type at offset in buffer with contiguous strides.
inline TensorDesc tensor(uint64_t buffer, uint64_t offset, ggml_type type, std::array<int64_t, 4> ne) {
    TensorDesc d;
    d.set_buffer(buffer);
    d.set_offset(offset);
    d.set_type(uint32_t(type));
    uint64_t nb = ggml_type_size(type);
    for (int i = 0; i < 4; ++i) {
        d.add_ne(ne[i]);
        d.add_nb(nb);
        nb *= uint64_t(i == 0 ? ne[0] / ggml_blck_size(type) : ne[i]);
    }
    return d;
}
inline TensorDesc f32(uint64_t buffer, uint64_t offset, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) {
    return tensor(buffer, offset, GGML_TYPE_F32, {ne0, ne1, ne2, 1});
}

// A graph message built tensor by tensor; ids are 1-based as on the wire.
class Graph {
  public:
    uint32_t leaf(const TensorDesc & d) {
        *req_.mutable_graph()->add_tensors() = d;
        return uint32_t(req_.graph().tensors_size());
    }
    // A tensor computed by op from srcs, listed as the next node.
    uint32_t node(TensorDesc d, ggml_op op, std::vector<uint32_t> srcs, const void * params = nullptr,
                  size_t params_bytes = 0) {
        d.set_op(uint32_t(op));
        d.set_flags(GGML_TENSOR_FLAG_COMPUTE); // backends skip nodes without it
        for (uint32_t s : srcs) {
            d.add_src(s);
        }
        if (params != nullptr) {
            d.set_op_params(params, params_bytes);
        }
        const uint32_t id = leaf(d);
        req_.mutable_graph()->add_nodes(id);
        return id;
    }
    TensorDesc &                      at(uint32_t id) { return *req_.mutable_graph()->mutable_tensors(int(id - 1)); }
    loom::rpc::GraphComputeRequest &  request() { return req_; }
    loom::rpc::GraphMessage &         message() { return *req_.mutable_graph(); }

  private:
    loom::rpc::GraphComputeRequest req_;
};

const float kScale[2] = {2.0f, 0.0f}; // SCALE's op params: factor and bias

// ---- canaries ------------------------------------------------------------------

const std::string kCanaryWord = "CANARY!\x7f";

inline std::string canary(size_t n) {
    std::string s;
    while (s.size() < n) {
        s += kCanaryWord;
    }
    s.resize(n);
    return s;
}

// Whether bytes hold 6 consecutive bytes of the endless canary (at any phase).
inline bool holds_canary(const std::string & bytes) {
    for (size_t r = 0; r < kCanaryWord.size(); ++r) {
        const std::string rot = kCanaryWord.substr(r) + kCanaryWord.substr(0, r);
        if (bytes.find(rot.substr(0, 6)) != std::string::npos) {
            return true;
        }
    }
    return false;
}

// ---- calls ---------------------------------------------------------------------

#define EXPECT_REFUSED(st, reason) \
    do { \
        const grpc::Status st_ = (st); \
        EXPECT_EQ(st_.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st_.error_message(); \
        EXPECT_NE(st_.error_message().find(reason), std::string::npos) \
            << "expected \"" << (reason) << "\" in: " << st_.error_message(); \
    } while (0)

inline grpc::Status set(RawClient & c, const TensorDesc & d, uint64_t offset, const std::string & data) {
    loom::rpc::SetTensorRequest req;
    *req.mutable_tensor() = d;
    req.set_offset(offset);
    req.set_data(data);
    loom::rpc::Empty e;
    return c.stub().SetTensor(c.ctx().get(), req, &e);
}

inline grpc::Status get(RawClient & c, const TensorDesc & d, uint64_t offset, uint64_t size, std::string * out) {
    loom::rpc::GetTensorRequest req;
    *req.mutable_tensor() = d;
    req.set_offset(offset);
    req.set_size(size);
    loom::rpc::GetTensorReply rep;
    grpc::Status              st = c.stub().GetTensor(c.ctx().get(), req, &rep);
    *out                         = rep.data();
    return st;
}

inline grpc::Status compute(RawClient & c, const loom::rpc::GraphComputeRequest & req, int32_t * status = nullptr) {
    loom::rpc::GraphComputeReply rep;
    grpc::Status                 st = c.stub().GraphCompute(c.ctx().get(), req, &rep);
    if (status != nullptr) {
        *status = rep.status();
    }
    return st;
}

inline bool supported(RawClient & c, const loom::rpc::GraphMessage & g) {
    loom::rpc::Supported rep;
    const grpc::Status   st = c.stub().SupportsOp(c.ctx().get(), g, &rep);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return rep.supported();
}

// A message of raw bytes to a method ("SetTensor"), as gRPC carries it:
// for bytes that are no valid encoding of the method's request.
inline grpc::Status raw_call(RawClient & c, const std::string & method, const std::string & bytes) {
    grpc::GenericStub          stub(c.channel());
    grpc::Slice                slice(bytes);
    grpc::ByteBuffer           req(&slice, 1), rep;
    std::promise<grpc::Status> done;
    auto                       ctx = c.ctx();
    stub.UnaryCall(ctx.get(), "/loom.rpc.Rpc/" + method, grpc::StubOptions(), &req, &rep,
                   [&done](grpc::Status st) { done.set_value(std::move(st)); });
    return done.get_future().get();
}

// The session's bulk connection, bound.
inline std::unique_ptr<RawBulk> bind_bulk(RawClient & c) {
    auto b = std::make_unique<RawBulk>(c.bulk_port());
    EXPECT_TRUE(b->ok() && b->hello(c.bulk_ticket()));
    EXPECT_EQ(b->reply().first, 0);
    return b;
}

inline void wait_for_sessions(loom_rpc_server_t server, size_t n) {
    for (int i = 0; i < 500 && loom_rpc_server_session_count(server) != n; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

// The session scales 8 values by 2 in buffer h (of at least 512 bytes),
// uploading through gRPC or the bulk connection b, and reads them back.
inline void expect_computes(RawClient & c, uint64_t h, float base = 1.0f, RawBulk * b = nullptr) {
    std::vector<float> x(8);
    for (int i = 0; i < 8; ++i) {
        x[size_t(i)] = base + float(i);
    }
    const std::string bytes(reinterpret_cast<const char *>(x.data()), 32);
    Graph             g;
    const uint32_t    in = g.leaf(f32(h, 0, 8));
    g.node(f32(h, 256, 8), GGML_OP_SCALE, {in}, kScale, sizeof(kScale));
    g.request().set_signature("scale");
    std::string got;
    if (b == nullptr) {
        ASSERT_TRUE(set(c, f32(h, 0, 8), 0, bytes).ok());
        int32_t            status = -1;
        const grpc::Status st     = compute(c, g.request(), &status);
        ASSERT_TRUE(st.ok()) << st.error_message();
        EXPECT_EQ(status, GGML_STATUS_SUCCESS);
        ASSERT_TRUE(get(c, f32(h, 256, 8), 0, 32, &got).ok());
    } else {
        b->frame(bulk::Op::set, f32(h, 0, 8).SerializeAsString(), 0, 32);
        ASSERT_TRUE(b->write(bytes.data(), bytes.size()));
        ASSERT_EQ(b->reply().first, 0);
        b->frame(bulk::Op::compute, g.request().SerializeAsString(), 0, 0);
        uint64_t payload = 0;
        ASSERT_EQ(b->reply(&payload).first, 0);
        std::string rep(size_t(payload), '\0');
        ASSERT_TRUE(b->read(rep.data(), rep.size()));
        loom::rpc::GraphComputeReply r;
        ASSERT_TRUE(r.ParseFromString(rep));
        EXPECT_EQ(r.status(), GGML_STATUS_SUCCESS);
        b->frame(bulk::Op::get, f32(h, 256, 8).SerializeAsString(), 0, 32);
        ASSERT_EQ(b->reply(&payload).first, 0);
        ASSERT_EQ(payload, 32u);
        got.resize(32);
        ASSERT_TRUE(b->read(got.data(), got.size()));
    }
    ASSERT_EQ(got.size(), 32u);
    float y[8];
    std::memcpy(y, got.data(), sizeof(y));
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(y[i], 2.0f * x[size_t(i)]) << i;
    }
}

// A new session of server computes.
inline void expect_new_session_computes(const TestServer & server) {
    RawClient c(server.endpoint());
    ASSERT_TRUE(c.connect().ok());
    const uint64_t h = c.alloc(kBuf);
    ASSERT_NE(h, 0u);
    expect_computes(c, h, 5.0f);
}

// ---- the parties ---------------------------------------------------------------

// A victim session holding canary bytes; an attacker session holding a
// zeroed buffer (ha) to attack from and a second buffer of canary bytes
// (hc). Allocated in turns, so that the buffers are likely neighbours.
// After each test: the canaries are intact, none of their bytes came back
// in what the test recorded in `seen`, and both the attacker's session (if
// still open) and a new one compute.
class RpcAttacks : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_TRUE(server.running());
        victim   = std::make_unique<RawClient>(server.endpoint());
        attacker = std::make_unique<RawClient>(server.endpoint());
        ASSERT_TRUE(victim->connect().ok());
        ASSERT_TRUE(attacker->connect().ok());
        hv1 = victim->alloc(kBuf);
        ha  = attacker->alloc(kBuf);
        hc  = attacker->alloc(kBuf);
        hv2 = victim->alloc(kBuf);
        ASSERT_TRUE(hv1 != 0 && ha != 0 && hc != 0 && hv2 != 0);
        ASSERT_TRUE(set(*victim, f32(hv1, 0, kBuf / 4), 0, canary(kBuf)).ok());
        ASSERT_TRUE(set(*victim, f32(hv2, 0, kBuf / 4), 0, canary(kBuf)).ok());
        ASSERT_TRUE(set(*attacker, f32(hc, 0, kBuf / 4), 0, canary(kBuf)).ok());
    }

    void TearDown() override {
        if (HasFatalFailure()) {
            return;
        }
        for (uint64_t h : {hv1, hv2}) {
            std::string got;
            ASSERT_TRUE(get(*victim, f32(h, 0, kBuf / 4), 0, kBuf, &got).ok());
            EXPECT_EQ(got, canary(kBuf)) << "the victim's buffer " << h << " changed";
        }
        EXPECT_FALSE(holds_canary(seen)) << "canary bytes came back to the attacker";
        if (attacker_open) {
            std::string got;
            ASSERT_TRUE(get(*attacker, f32(hc, 0, kBuf / 4), 0, kBuf, &got).ok());
            EXPECT_EQ(got, canary(kBuf)) << "the attacker's second buffer changed";
            expect_computes(*attacker, ha);
        }
        expect_computes(*victim, victim->alloc(kBuf), 3.0f);
        expect_new_session_computes(server);
    }

    // GetTensor through the attacker, its reply recorded.
    grpc::Status attacker_get(const TensorDesc & d, uint64_t offset, uint64_t size) {
        std::string  got;
        grpc::Status st = get(*attacker, d, offset, size, &got);
        seen += got + st.error_message();
        return st;
    }
    grpc::Status attacker_compute(const loom::rpc::GraphComputeRequest & req) {
        grpc::Status st = compute(*attacker, req);
        seen += st.error_message();
        return st;
    }
    // A bulk reply, recorded with the bytes that follow it.
    std::pair<int, std::string> bulk_reply(RawBulk & b) {
        uint64_t size = 0;
        auto     r    = b.reply(&size);
        std::string payload(size_t(std::min<uint64_t>(size, kBuf * 4)), '\0');
        if (r.first >= 0 && !b.read(payload.data(), payload.size())) {
            payload.clear();
        }
        seen += r.second + payload;
        return r;
    }

    TestServer                 server;
    std::unique_ptr<RawClient> victim, attacker;
    uint64_t                   hv1 = 0, hv2 = 0, ha = 0, hc = 0;
    bool                       attacker_open = true;
    std::string                seen; // every byte the attacker received
};

} // namespace loomtest::rpc_attacks
