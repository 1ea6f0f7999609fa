// Attacks known against ggml's RPC server, each sent to loom's server (a
// server started in the process on loopback) through the raw gRPC stub and
// the raw bulk connection, as a client would send them. Each test is named
// after the advisory or report it replays and checks three things: the
// reply is an error naming the reason (INVALID_ARGUMENT, or the bulk
// protocol's reply of that code); no memory outside the attacking
// session's own buffers was read or written (canary bytes in a buffer of
// another session and in a second buffer of the attacker stay intact, and
// none of them ever comes back in a reply); and the server serves on: the
// attacking session (where the protocol keeps it) and a new one then
// compute a graph correctly.

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

using namespace loomtest::rpc;
namespace bulk = loom::rpc::bulk;
using loom::rpc::TensorDesc;

namespace {

constexpr uint64_t kBuf = 4096; // bytes of each buffer of the parties

// ---- messages ------------------------------------------------------------------

// A tensor of type at offset in buffer with contiguous strides.
TensorDesc tensor(uint64_t buffer, uint64_t offset, ggml_type type, std::array<int64_t, 4> ne) {
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
TensorDesc f32(uint64_t buffer, uint64_t offset, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) {
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

std::string canary(size_t n) {
    std::string s;
    while (s.size() < n) {
        s += kCanaryWord;
    }
    s.resize(n);
    return s;
}

// Whether bytes hold 6 consecutive bytes of the endless canary (at any phase).
bool holds_canary(const std::string & bytes) {
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

grpc::Status set(RawClient & c, const TensorDesc & d, uint64_t offset, const std::string & data) {
    loom::rpc::SetTensorRequest req;
    *req.mutable_tensor() = d;
    req.set_offset(offset);
    req.set_data(data);
    loom::rpc::Empty e;
    return c.stub().SetTensor(c.ctx().get(), req, &e);
}

grpc::Status get(RawClient & c, const TensorDesc & d, uint64_t offset, uint64_t size, std::string * out) {
    loom::rpc::GetTensorRequest req;
    *req.mutable_tensor() = d;
    req.set_offset(offset);
    req.set_size(size);
    loom::rpc::GetTensorReply rep;
    grpc::Status              st = c.stub().GetTensor(c.ctx().get(), req, &rep);
    *out                         = rep.data();
    return st;
}

grpc::Status compute(RawClient & c, const loom::rpc::GraphComputeRequest & req, int32_t * status = nullptr) {
    loom::rpc::GraphComputeReply rep;
    grpc::Status                 st = c.stub().GraphCompute(c.ctx().get(), req, &rep);
    if (status != nullptr) {
        *status = rep.status();
    }
    return st;
}

bool supported(RawClient & c, const loom::rpc::GraphMessage & g) {
    loom::rpc::Supported rep;
    const grpc::Status   st = c.stub().SupportsOp(c.ctx().get(), g, &rep);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return rep.supported();
}

// A message of raw bytes to a method ("SetTensor"), as gRPC carries it:
// for bytes that are no valid encoding of the method's request.
grpc::Status raw_call(RawClient & c, const std::string & method, const std::string & bytes) {
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
std::unique_ptr<RawBulk> bind_bulk(RawClient & c) {
    auto b = std::make_unique<RawBulk>(c.bulk_port());
    EXPECT_TRUE(b->ok() && b->hello(c.bulk_ticket()));
    EXPECT_EQ(b->reply().first, 0);
    return b;
}

void wait_for_sessions(loom_rpc_server_t server, size_t n) {
    for (int i = 0; i < 500 && loom_rpc_server_session_count(server) != n; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

// The session scales 8 values by 2 in buffer h (of at least 512 bytes),
// uploading through gRPC or the bulk connection b, and reads them back.
void expect_computes(RawClient & c, uint64_t h, float base = 1.0f, RawBulk * b = nullptr) {
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
void expect_new_session_computes(const TestServer & server) {
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

// ---- 1, 2: reads and writes outside a buffer -----------------------------------

// Tensor descriptions that reach outside the buffer they name, each with
// the reason the server gives. loom's tensors are a buffer handle and an
// offset, not a pointer: a pointer outside the buffer is an offset past it.
struct OutsideCase {
    const char * what;
    TensorDesc   desc;
    const char * reason;
};

std::vector<OutsideCase> outside_cases(uint64_t h) {
    std::vector<OutsideCase> cases;
    cases.push_back({"past the end", f32(h, kBuf - 16, 16), "does not fit its buffer"});
    cases.push_back({"offset past the buffer", f32(h, kBuf + 64, 4), "does not fit its buffer"});
    cases.push_back({"offset that wraps", f32(h, UINT64_MAX - 7, 4), "does not fit its buffer"});
    TensorDesc strided = f32(h, 0, 4, 4);
    strided.set_nb(1, 1 << 20);
    cases.push_back({"rows strided past the end", strided, "does not fit its buffer"});
    TensorDesc zero_strides = f32(h, 0, 4);
    zero_strides.set_ne(0, int64_t(1) << 30);
    for (int i = 0; i < 4; ++i) {
        zero_strides.set_nb(i, 0);
    }
    cases.push_back({"many elements on zero strides", zero_strides, "does not fit its buffer"});
    TensorDesc negative = f32(h, 0, 4);
    negative.set_ne(1, -1);
    cases.push_back({"a negative dimension", negative, "out of range"});
    TensorDesc product = f32(h, 0, 4);
    for (int i = 0; i < 4; ++i) {
        product.set_ne(i, int64_t(1) << 20);
    }
    cases.push_back({"dimensions whose product overflows", product, "too many elements"});
    TensorDesc huge_stride = f32(h, 0, 4, 2);
    huge_stride.set_nb(1, uint64_t(1) << 63);
    cases.push_back({"a stride near 2^63", huge_stride, "out of range"});
    cases.push_back({"another session's handle", f32(h + 1000, 0, 4), "unknown buffer"});
    cases.push_back({"no buffer", f32(0, 0, 4), "unknown buffer"});
    TensorDesc short_shape = f32(h, 0, 4);
    short_shape.mutable_ne()->RemoveLast();
    cases.push_back({"three dimensions", short_shape, "4 ne and 4 nb"});
    return cases;
}

// CVE-2024-42478: get_tensor reading outside the tensor's buffer (ggml
// checked the data pointer against the buffer but not the range's end).
TEST_F(RpcAttacks, CVE_2024_42478_GetTensorOutsideItsBuffer) {
    for (const OutsideCase & c : outside_cases(ha)) {
        SCOPED_TRACE(c.what);
        EXPECT_REFUSED(attacker_get(c.desc, 0, 16), c.reason);
    }
    // Ranges outside a tensor that fits: past it (inside the buffer), and
    // offset + size wrapping around.
    const TensorDesc t = f32(ha, kBuf - 64, 16);
    EXPECT_REFUSED(attacker_get(t, 60, 8), "outside the tensor's 64 bytes");
    EXPECT_REFUSED(attacker_get(t, 0, 65), "outside the tensor's 64 bytes");
    EXPECT_REFUSED(attacker_get(t, UINT64_MAX - 3, 8), "outside the tensor");
    EXPECT_REFUSED(attacker_get(t, 8, UINT64_MAX - 4), "outside the tensor");
    EXPECT_REFUSED(attacker_get(f32(ha, 0, 16), 64, 1), "outside the tensor");
    // The same through the bulk connection's get frames, which the server
    // refuses one by one on the same connection.
    auto b = bind_bulk(*attacker);
    for (const OutsideCase & c : outside_cases(ha)) {
        SCOPED_TRACE(c.what);
        b->frame(bulk::Op::get, c.desc.SerializeAsString(), 0, 16);
        const auto r = bulk_reply(*b);
        EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
        EXPECT_NE(r.second.find(c.reason), std::string::npos) << r.second;
    }
    b->frame(bulk::Op::get, t.SerializeAsString(), UINT64_MAX - 3, 8);
    EXPECT_EQ(bulk_reply(*b).first, int(grpc::StatusCode::INVALID_ARGUMENT));
    b->frame(bulk::Op::get, t.SerializeAsString(), 32, 64);
    const auto r = bulk_reply(*b);
    EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_NE(r.second.find("outside the tensor's 64 bytes"), std::string::npos) << r.second;
    // The connection still serves the session.
    expect_computes(*attacker, ha, 7.0f, b.get());
}

// CVE-2024-42479: set_tensor writing outside the tensor's buffer; the same
// ranges through MemsetTensor, SetTensorHash (which reads the range), and
// the bulk connection's set frames (each refused before a byte is read,
// ending the connection, since what follows cannot be told from a frame).
TEST_F(RpcAttacks, CVE_2024_42479_SetTensorOutsideItsBuffer) {
    const std::string bytes(64, '\x11');
    for (const OutsideCase & c : outside_cases(ha)) {
        SCOPED_TRACE(c.what);
        EXPECT_REFUSED(set(*attacker, c.desc, 0, bytes), c.reason);
        loom::rpc::MemsetTensorRequest ms;
        *ms.mutable_tensor() = c.desc;
        ms.set_size(16);
        ms.set_value(0x22);
        loom::rpc::Empty e;
        EXPECT_REFUSED(attacker->stub().MemsetTensor(attacker->ctx().get(), ms, &e), c.reason);
        loom::rpc::SetTensorHashRequest sh;
        *sh.mutable_tensor() = c.desc;
        sh.set_size(16);
        sh.set_sha256(std::string(32, '\0'));
        sh.set_store(true);
        loom::rpc::SetTensorHashReply shr;
        EXPECT_REFUSED(attacker->stub().SetTensorHash(attacker->ctx().get(), sh, &shr), c.reason);
    }
    const TensorDesc t = f32(ha, kBuf - 64, 16);
    EXPECT_REFUSED(set(*attacker, t, 8, bytes), "outside the tensor's 64 bytes");
    EXPECT_REFUSED(set(*attacker, t, UINT64_MAX - 3, "12345678"), "outside the tensor");
    loom::rpc::MemsetTensorRequest ms;
    *ms.mutable_tensor() = t;
    ms.set_offset(4);
    ms.set_size(UINT64_MAX - 1);
    loom::rpc::Empty e;
    EXPECT_REFUSED(attacker->stub().MemsetTensor(attacker->ctx().get(), ms, &e), "outside the tensor");
    loom::rpc::SetTensorHashRequest sh;
    *sh.mutable_tensor() = t;
    sh.set_offset(32);
    sh.set_size(64);
    sh.set_sha256(std::string(32, '\0'));
    loom::rpc::SetTensorHashReply shr;
    EXPECT_REFUSED(attacker->stub().SetTensorHash(attacker->ctx().get(), sh, &shr), "outside the tensor");
    loom::rpc::ClearBufferRequest cb;
    cb.set_buffer(ha + hc + hv1 + hv2 + 100);
    EXPECT_REFUSED(attacker->stub().ClearBuffer(attacker->ctx().get(), cb, &e), "unknown buffer");

    // Bulk set frames: one session each, since a refused frame ends the connection.
    std::vector<std::pair<TensorDesc, std::array<uint64_t, 2>>> frames;
    for (const OutsideCase & c : outside_cases(1)) {
        frames.push_back({c.desc, {0, 16}});
    }
    frames.push_back({f32(1, kBuf - 64, 16), {8, 64}});
    frames.push_back({f32(1, kBuf - 64, 16), {UINT64_MAX - 3, 8}});
    for (const auto & [desc, range] : frames) {
        RawClient c(server.endpoint());
        ASSERT_TRUE(c.connect().ok());
        ASSERT_EQ(c.alloc(kBuf), 1u); // handle 1, as the descriptions say
        auto b = bind_bulk(c);
        b->frame(bulk::Op::set, desc.SerializeAsString(), range[0], range[1]);
        const auto r = b->reply();
        EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT)) << r.second;
        EXPECT_NE(r.second.find("SetTensor: "), std::string::npos) << r.second;
        EXPECT_TRUE(b->closed_by_server());
        // The session serves on through gRPC.
        expect_computes(c, 1, 9.0f);
    }
}

// ---- 3: copy_tensor ------------------------------------------------------------

// ggml#1103: copy_tensor copying a source larger than its destination, into
// a destination in another, smaller buffer; and a destination without
// elements (CVE-2026-137567), which ggml's check of the destination's end
// let through. Also a copy whose source and destination overlap, which a
// memcpy may not do.
TEST_F(RpcAttacks, Ggml1103_CopyTensorOutOfBounds) {
    const uint64_t hs = attacker->alloc(64);
    ASSERT_NE(hs, 0u);
    auto copy = [&](const TensorDesc & src, const TensorDesc & dst) {
        loom::rpc::CopyTensorRequest req;
        *req.mutable_src() = src;
        *req.mutable_dst() = dst;
        loom::rpc::CopyTensorReply rep;
        grpc::Status               st = attacker->stub().CopyTensor(attacker->ctx().get(), req, &rep);
        seen += st.error_message();
        return st;
    };
    EXPECT_REFUSED(copy(f32(ha, 0, 256), f32(hs, 0, 16)), "larger than the destination");
    EXPECT_REFUSED(copy(f32(ha, 0, 256), f32(hs, 0, 256)), "destination: tensor of 1024 bytes at offset 0 does not fit");
    EXPECT_REFUSED(copy(f32(hc, 0, 1024), f32(hs, 0, 1024)), "destination: ");
    EXPECT_REFUSED(copy(f32(hs, 0, 16), f32(ha, kBuf - 32, 16)), "destination: ");
    EXPECT_REFUSED(copy(f32(hs, 32, 16), f32(ha, 0, 16)), "source: ");
    EXPECT_REFUSED(copy(f32(ha, 0, 16), f32(hs, 0, 0)), "larger than the destination (0 bytes)");
    TensorDesc empty = f32(hs, 0, 16);
    empty.set_ne(2, 0);
    EXPECT_REFUSED(copy(f32(ha, 0, 16), empty), "larger than the destination (0 bytes)");
    TensorDesc strided = f32(ha, 0, 16); // 16 values 8 bytes apart: 124 bytes
    strided.set_nb(0, 8);
    EXPECT_REFUSED(copy(strided, f32(hs, 0, 16)), "the source (124 bytes) is larger");
    EXPECT_REFUSED(copy(f32(ha, 0, 16), f32(ha + hc + hs + 100, 0, 16)), "unknown buffer");
    EXPECT_REFUSED(copy(f32(ha, 0, 256), f32(ha, 512, 256)), "overlap");
    EXPECT_REFUSED(copy(f32(ha, 512, 256), f32(ha, 0, 256)), "overlap");
    EXPECT_REFUSED(copy(f32(ha, 0, 16), f32(ha, 0, 16)), "overlap");
    // A copy that fits is done, and lands where it should.
    ASSERT_TRUE(set(*attacker, f32(ha, 0, 16), 0, std::string(64, '\x33')).ok());
    EXPECT_TRUE(copy(f32(ha, 0, 16), f32(hs, 0, 16)).ok());
    EXPECT_TRUE(copy(f32(ha, 0, 16), f32(ha, 64, 16)).ok()); // adjacent, not overlapping
    std::string got;
    ASSERT_TRUE(get(*attacker, f32(hs, 0, 16), 0, 64, &got).ok());
    EXPECT_EQ(got, std::string(64, '\x33'));
    ASSERT_TRUE(get(*attacker, f32(ha, 64, 16), 0, 64, &got).ok());
    EXPECT_EQ(got, std::string(64, '\x33'));
}

// ---- 4: types ------------------------------------------------------------------

// Type ids that name no type: past GGML_TYPE_COUNT, a negative int sent
// into the uint32 field, and the slots of removed types (Q4_2, Q4_3, the
// interleaved Q4_0 and IQ4_NL layouts), whose block size is 0 in ggml's
// table (llama.cpp #13067: a division by that block size). Every message
// that carries a tensor refuses them; SupportsOp answers false.
TEST_F(RpcAttacks, Llama13067_InvalidAndRemovedTypes) {
    const uint32_t bad[] = {GGML_TYPE_COUNT, GGML_TYPE_COUNT + 1, 1000, uint32_t(-1), uint32_t(INT32_MIN),
                            4, 5, 31, 32, 33, 36, 37, 38};
    for (uint32_t type : bad) {
        SCOPED_TRACE(type);
        const std::string reason = "unknown tensor type " + std::to_string(type);
        TensorDesc        d      = f32(ha, 0, 32);
        d.set_type(type);
        EXPECT_REFUSED(set(*attacker, d, 0, std::string(16, '\x44')), reason);
        EXPECT_REFUSED(attacker_get(d, 0, 16), reason);
        loom::rpc::AllocSizeRequest as;
        *as.mutable_tensor() = d;
        as.mutable_tensor()->set_buffer(0);
        loom::rpc::AllocSizeReply asr;
        EXPECT_REFUSED(attacker->stub().GetAllocSize(attacker->ctx().get(), as, &asr), reason);
        loom::rpc::CopyTensorRequest cp;
        *cp.mutable_src() = f32(ha, 0, 4);
        *cp.mutable_dst() = d;
        loom::rpc::CopyTensorReply cpr;
        EXPECT_REFUSED(attacker->stub().CopyTensor(attacker->ctx().get(), cp, &cpr), reason);
        // In a graph: as a source and as the node.
        for (bool as_node : {false, true}) {
            Graph          g;
            const uint32_t in = g.leaf(f32(ha, 0, 32));
            g.node(f32(ha, 1024, 32), GGML_OP_SCALE, {in}, kScale, sizeof(kScale));
            g.at(as_node ? 2 : 1).set_type(type);
            EXPECT_REFUSED(attacker_compute(g.request()), reason);
            EXPECT_FALSE(supported(*attacker, g.message()));
        }
        RawClient c(server.endpoint());
        ASSERT_TRUE(c.connect().ok());
        ASSERT_EQ(c.alloc(kBuf), 1u);
        auto b = bind_bulk(c);
        d.set_buffer(1);
        b->frame(bulk::Op::set, d.SerializeAsString(), 0, 16);
        const auto r = b->reply();
        EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
        EXPECT_NE(r.second.find(reason), std::string::npos) << r.second;
    }
    // Quantized tensors whose rows are not whole blocks, or whose blocks are strided.
    TensorDesc q = tensor(ha, 0, GGML_TYPE_Q4_0, {64, 2, 1, 1});
    q.set_ne(0, 31);
    EXPECT_REFUSED(set(*attacker, q, 0, std::string(18, '\0')), "whole number of blocks");
    q = tensor(ha, 0, GGML_TYPE_Q4_0, {64, 2, 1, 1});
    q.set_nb(0, 1);
    EXPECT_REFUSED(set(*attacker, q, 0, std::string(18, '\0')), "must be contiguous");
}

// ---- 5: use after free ---------------------------------------------------------

// GHSA-2phh-px2f-2qmx: a graph computed, the buffer its tensors live in
// freed, then the stored graph computed again. loom recomputes the
// session's last graph by signature (a GraphComputeRequest without a
// graph): freeing any buffer of the session forgets its stored graphs, so
// the recompute is refused (FAILED_PRECONDITION: the client is to send the
// graph again), and the graph sent again names a buffer that is gone.
TEST_F(RpcAttacks, GHSA_2phh_px2f_2qmx_GraphRecomputeAfterFreeBuffer) {
    const uint64_t hg = attacker->alloc(kBuf);
    ASSERT_NE(hg, 0u);
    Graph          g;
    const uint32_t in = g.leaf(f32(hg, 0, 8));
    g.node(f32(hg, 256, 8), GGML_OP_SCALE, {in}, kScale, sizeof(kScale));
    g.request().set_signature("stored");
    ASSERT_TRUE(attacker_compute(g.request()).ok());
    loom::rpc::GraphComputeRequest again;
    again.set_signature("stored");
    ASSERT_TRUE(attacker_compute(again).ok()); // recomputed from the stored graph

    loom::rpc::BufferRequest fr;
    fr.set_buffer(hg);
    loom::rpc::Empty e;
    ASSERT_TRUE(attacker->stub().FreeBuffer(attacker->ctx().get(), fr, &e).ok());
    // New buffers of the same size may take the freed memory; they get new handles.
    const uint64_t reuse = attacker->alloc(kBuf);
    ASSERT_NE(reuse, hg);
    grpc::Status st = attacker_compute(again);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
    EXPECT_NE(st.error_message().find("no cached graph"), std::string::npos) << st.error_message();
    EXPECT_REFUSED(attacker_compute(g.request()), "unknown buffer " + std::to_string(hg));
    EXPECT_REFUSED(attacker->stub().FreeBuffer(attacker->ctx().get(), fr, &e), "unknown buffer");
    EXPECT_REFUSED(attacker_get(f32(hg, 0, 8), 0, 32), "unknown buffer");

    // The same through the bulk connection: the graph stored, its buffer
    // freed through gRPC, the recompute frame refused.
    const uint64_t hb = attacker->alloc(kBuf);
    ASSERT_NE(hb, 0u);
    Graph          gb;
    const uint32_t inb = gb.leaf(f32(hb, 0, 8));
    gb.node(f32(hb, 256, 8), GGML_OP_SCALE, {inb}, kScale, sizeof(kScale));
    gb.request().set_signature("stored-bulk");
    auto b = bind_bulk(*attacker);
    b->frame(bulk::Op::compute, gb.request().SerializeAsString(), 0, 0);
    EXPECT_EQ(bulk_reply(*b).first, 0);
    fr.set_buffer(hb);
    ASSERT_TRUE(attacker->stub().FreeBuffer(attacker->ctx().get(), fr, &e).ok());
    loom::rpc::GraphComputeRequest again_bulk;
    again_bulk.set_signature("stored-bulk");
    b->frame(bulk::Op::compute, again_bulk.SerializeAsString(), 0, 0);
    auto r = bulk_reply(*b);
    EXPECT_EQ(r.first, int(grpc::StatusCode::FAILED_PRECONDITION));
    EXPECT_NE(r.second.find("no cached graph"), std::string::npos) << r.second;
    b->frame(bulk::Op::compute, gb.request().SerializeAsString(), 0, 0);
    r = bulk_reply(*b);
    EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_NE(r.second.find("unknown buffer " + std::to_string(hb)), std::string::npos) << r.second;
    expect_computes(*attacker, reuse, 11.0f, b.get());
}

// ---- 6: function pointers ------------------------------------------------------

std::atomic<int> g_custom_calls{0};

void custom1(ggml_tensor *, const ggml_tensor *, int, int, void *) {
    ++g_custom_calls;
}
void custom2(ggml_tensor *, const ggml_tensor *, const ggml_tensor *, int, int, void *) {
    ++g_custom_calls;
}
void custom3(ggml_tensor *, const ggml_tensor *, const ggml_tensor *, const ggml_tensor *, int, int, void *) {
    ++g_custom_calls;
}
void custom(ggml_tensor *, int, int, void *) {
    ++g_custom_calls;
}

// llama.cpp #25289: GGML_OP_CUSTOM and the MAP_CUSTOM ops carry a function
// pointer in their op params, which a server would call. The server here
// runs in the same process as the functions named, so a call would land:
// none is made, and the ops are refused (and never supported).
TEST_F(RpcAttacks, Llama25289_CustomOpsAreNeverRun) {
    struct Case {
        ggml_op op;
        uint64_t fn;
        int     n_src;
    };
    const Case cases[] = {{GGML_OP_MAP_CUSTOM1, reinterpret_cast<uintptr_t>(&custom1), 1},
                          {GGML_OP_MAP_CUSTOM2, reinterpret_cast<uintptr_t>(&custom2), 2},
                          {GGML_OP_MAP_CUSTOM3, reinterpret_cast<uintptr_t>(&custom3), 3},
                          {GGML_OP_CUSTOM, reinterpret_cast<uintptr_t>(&custom), 1},
                          {GGML_OP_CUSTOM, reinterpret_cast<uintptr_t>(&custom), 0}};
    auto b = bind_bulk(*attacker);
    for (const Case & c : cases) {
        SCOPED_TRACE(ggml_op_name(c.op));
        Graph                 g;
        std::vector<uint32_t> srcs;
        for (int i = 0; i < c.n_src; ++i) {
            srcs.push_back(g.leaf(f32(ha, uint64_t(i) * 64, 16)));
        }
        // fun, n_tasks, userdata: ggml's layout of these op params
        const uint64_t params[3] = {c.fn, 1, 0};
        g.node(f32(ha, 1024, 16), c.op, srcs, params, sizeof(params));
        EXPECT_REFUSED(attacker_compute(g.request()), "op not accepted by the RPC server");
        EXPECT_FALSE(supported(*attacker, g.message()));
        b->frame(bulk::Op::compute, g.request().SerializeAsString(), 0, 0);
        const auto r = bulk_reply(*b);
        EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
        EXPECT_NE(r.second.find("op not accepted"), std::string::npos) << r.second;
    }
    EXPECT_EQ(g_custom_calls.load(), 0);
}

// ---- 7: writes through op params and indices -----------------------------------

// llama.cpp #25764: ACC and SET write src1 into a view of their result
// described by op params (nb1, nb2, nb3, offset, as int32): negative values,
// strides or offsets that reach past the result, are refused. Overlapping
// rows inside the result are allowed (the last row written wins, as in
// ggml's single-threaded order) and computed.
TEST_F(RpcAttacks, Llama25764_AccAndSetViewsOutsideTheirDestination) {
    struct Case {
        const char *           what;
        std::array<int32_t, 5> params; // nb1, nb2, nb3, offset, inplace
        int64_t                b0, b1;
    };
    const Case cases[] = {
        {"offset past the result", {64, 64, 64, 52, 0}, 4, 1},
        {"negative offset", {64, 64, 64, -4, 0}, 4, 1},
        {"offset near 2^31", {64, 64, 64, INT32_MAX - 3, 0}, 4, 1},
        {"negative row stride", {-8, 64, 64, 32, 0}, 2, 2},
        {"row stride past the result", {24, 96, 96, 0, 0}, 2, 4},
        {"INT32_MIN stride and offset", {INT32_MIN, 64, 64, INT32_MIN, 0}, 1, 2},
    };
    auto b = bind_bulk(*attacker);
    for (ggml_op op : {GGML_OP_ACC, GGML_OP_SET}) {
        for (const Case & c : cases) {
            SCOPED_TRACE(std::string(ggml_op_name(op)) + ": " + c.what);
            Graph          g;
            const uint32_t a  = g.leaf(f32(ha, 0, 16));
            const uint32_t bb = g.leaf(f32(ha, 256, c.b0, c.b1));
            g.node(f32(ha, 512, 16), op, {a, bb}, c.params.data(), sizeof(c.params));
            EXPECT_REFUSED(attacker_compute(g.request()), "lies inside a node");
            EXPECT_FALSE(supported(*attacker, g.message()));
            b->frame(bulk::Op::compute, g.request().SerializeAsString(), 0, 0);
            EXPECT_EQ(bulk_reply(*b).first, int(grpc::StatusCode::INVALID_ARGUMENT));
        }
    }
    // Rows 4 bytes apart overlap inside the result: computed, and equal to
    // writing the rows in order.
    std::vector<float> av(16), bv(6);
    for (int i = 0; i < 16; ++i) {
        av[size_t(i)] = float(i);
    }
    for (int i = 0; i < 6; ++i) {
        bv[size_t(i)] = 100.0f + float(i);
    }
    ASSERT_TRUE(set(*attacker, f32(ha, 0, 16), 0, std::string(reinterpret_cast<char *>(av.data()), 64)).ok());
    ASSERT_TRUE(set(*attacker, f32(ha, 256, 3, 2), 0, std::string(reinterpret_cast<char *>(bv.data()), 24)).ok());
    Graph                        g;
    const uint32_t               a  = g.leaf(f32(ha, 0, 16));
    const uint32_t               bb = g.leaf(f32(ha, 256, 3, 2));
    const std::array<int32_t, 5> params{4, 8, 8, 8, 0};
    g.node(f32(ha, 512, 16), GGML_OP_SET, {a, bb}, params.data(), sizeof(params));
    const grpc::Status st = attacker_compute(g.request());
    ASSERT_TRUE(st.ok()) << st.error_message();
    std::vector<float> want = av;
    for (int r = 0; r < 2; ++r) {
        for (int i = 0; i < 3; ++i) {
            want[size_t(2 + r + i)] = bv[size_t(r * 3 + i)];
        }
    }
    std::string got;
    ASSERT_TRUE(get(*attacker, f32(ha, 512, 16), 0, 64, &got).ok());
    std::vector<float> y(16);
    std::memcpy(y.data(), got.data(), 64);
    EXPECT_EQ(y, want);
}

// The same rule where 64-bit arithmetic would wrap: a view of 2^33 rows
// 2^31 bytes apart starting at 2^31 ends, modulo 2^64, at byte 0. No test
// can hold such tensors, so the rule is checked on tensors without memory.
TEST(RpcAttacksRules, Llama25764_ViewArithmeticThatWrapsAround) {
    ggml_init_params ip{ggml_tensor_overhead() * 8, nullptr, true};
    ggml_context_ptr ctx(ggml_init(ip));
    const int64_t    rows = int64_t(1) << 33;
    ggml_tensor *    a    = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 1, rows);
    ggml_tensor *    b    = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 1, rows);
    for (ggml_op op : {GGML_OP_ACC, GGML_OP_SET}) {
        ggml_tensor * n = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 1, rows);
        n->op           = op;
        n->src[0]       = a;
        n->src[1]       = b;
        const int32_t params[5] = {INT32_MIN, INT32_MIN, INT32_MIN, INT32_MIN, 0};
        std::memcpy(n->op_params, params, sizeof(params));
        std::string why;
        EXPECT_FALSE(loom::rpc::check_node(n, &why)) << ggml_op_name(op);
        EXPECT_NE(why.find("lies inside"), std::string::npos) << why;
        // In range, the same view is accepted.
        const int32_t fine[5] = {4, 4, 4, 0, 0};
        std::memcpy(n->op_params, fine, sizeof(fine));
        EXPECT_TRUE(loom::rpc::check_node(n, &why)) << why;
    }
}

// A GET_ROWS / SET_ROWS graph in the attacker's buffer: GET_ROWS reads 3
// of 4 rows of 8 values at 0 into 2048; SET_ROWS writes 3 rows at 0 into
// 4 rows at 2048 (its node a view of that destination, its last source,
// as ggml_set_rows builds it). The 3 indices are at 1024.
void rows_graph(Graph & g, uint64_t h, ggml_op op, ggml_type index_type) {
    const uint32_t idx = g.leaf(tensor(h, 1024, index_type, {3, 1, 1, 1}));
    if (op == GGML_OP_GET_ROWS) {
        const uint32_t src = g.leaf(f32(h, 0, 8, 4));
        g.node(f32(h, 2048, 8, 3), op, {src, idx});
    } else {
        const uint32_t src    = g.leaf(f32(h, 0, 8, 3));
        const uint32_t target = g.leaf(f32(h, 2048, 8, 4));
        const uint32_t node   = g.node(f32(h, 2048, 8, 4), op, {src, idx, target});
        g.at(node).set_view_src(target);
    }
    g.request().set_signature(ggml_op_name(op));
}

std::string indices(ggml_type type, std::array<int64_t, 3> v) {
    std::string out;
    for (int64_t x : v) {
        if (type == GGML_TYPE_I32) {
            const int32_t y = int32_t(x);
            out.append(reinterpret_cast<const char *>(&y), 4);
        } else {
            out.append(reinterpret_cast<const char *>(&x), 8);
        }
    }
    return out;
}

// llama.cpp #26825 (GET_ROWS reading rows outside its source) and #26912
// (SET_ROWS writing rows outside its destination): the indices are read
// from the session's memory and checked before every computation, also
// when the graph is recomputed by signature after its indices changed.
TEST_F(RpcAttacks, Llama26825_26912_RowIndicesOutsideTheRows) {
    struct Case {
        ggml_op   op;
        ggml_type index_type;
    };
    const Case cases[] = {{GGML_OP_GET_ROWS, GGML_TYPE_I32}, {GGML_OP_SET_ROWS, GGML_TYPE_I64},
                          {GGML_OP_SET_ROWS, GGML_TYPE_I32}};
    for (const Case & c : cases) {
        SCOPED_TRACE(std::string(ggml_op_name(c.op)) + " " + ggml_type_name(c.index_type));
        Graph g;
        rows_graph(g, ha, c.op, c.index_type);
        const TensorDesc idx = tensor(ha, 1024, c.index_type, {3, 1, 1, 1});
        const int64_t    bad[] = {4, -1, 1000000, INT32_MIN, INT32_MAX};
        for (int64_t v : bad) {
            SCOPED_TRACE(v);
            ASSERT_TRUE(set(*attacker, idx, 0, indices(c.index_type, {0, v, 1})).ok());
            EXPECT_REFUSED(attacker_compute(g.request()),
                           "row index " + std::to_string(c.index_type == GGML_TYPE_I32 ? int64_t(int32_t(v)) : v) +
                               " outside [0, 4)");
        }
        if (c.index_type == GGML_TYPE_I64) {
            ASSERT_TRUE(set(*attacker, idx, 0, indices(c.index_type, {0, int64_t(1) << 40, 1})).ok());
            EXPECT_REFUSED(attacker_compute(g.request()), "row index 1099511627776 outside [0, 4)");
        }
        // Valid indices compute; changed to an invalid one, the recompute by
        // signature is refused.
        ASSERT_TRUE(set(*attacker, idx, 0, indices(c.index_type, {3, 0, 2})).ok());
        const grpc::Status st = attacker_compute(g.request());
        ASSERT_TRUE(st.ok()) << st.error_message();
        ASSERT_TRUE(set(*attacker, idx, 0, indices(c.index_type, {3, 4, 2})).ok());
        loom::rpc::GraphComputeRequest again;
        again.set_signature(g.request().signature());
        EXPECT_REFUSED(attacker_compute(again), "row index 4 outside [0, 4)");
    }
    // GET_ROWS takes I32 indices only.
    Graph g;
    rows_graph(g, ha, GGML_OP_GET_ROWS, GGML_TYPE_I64);
    EXPECT_REFUSED(attacker_compute(g.request()), "get_rows shapes");
}

// ---- 8, 9: graphs that lie -----------------------------------------------------

// Graphs whose counts or references lie: more nodes than tensors, node and
// source ids that name no tensor, a node that is its own source, a cycle,
// a node whose source is computed after it. (Counts are the lengths of
// repeated fields in loom's messages, so a count cannot exceed what is
// sent; the nearest lie is a node list longer than the tensors.) The one
// self-reference ggml builds, ggml_cast's copy naming itself as its
// destination, is computed.
TEST_F(RpcAttacks, GraphWhoseCountsOrSourcesLie) {
    {
        Graph          g;
        const uint32_t in = g.leaf(f32(ha, 0, 8));
        g.node(f32(ha, 256, 8), GGML_OP_SCALE, {in}, kScale, sizeof(kScale));
        g.message().add_nodes(2);
        g.message().add_nodes(2);
        EXPECT_REFUSED(attacker_compute(g.request()), "a graph needs 1 to");
        g.message().clear_nodes();
        EXPECT_REFUSED(attacker_compute(g.request()), "a graph needs 1 to");
        g.message().add_nodes(0);
        EXPECT_REFUSED(attacker_compute(g.request()), "node 0 refers to 0");
        g.message().set_nodes(0, 3);
        EXPECT_REFUSED(attacker_compute(g.request()), "node 0 refers to 3");
        g.message().set_nodes(0, UINT32_MAX);
        EXPECT_REFUSED(attacker_compute(g.request()), "not a tensor of the message");
        g.message().set_nodes(0, 2);
        g.at(2).set_src(0, 3);
        EXPECT_REFUSED(attacker_compute(g.request()), "source 0 refers to 3");
        g.at(2).set_src(0, UINT32_MAX);
        EXPECT_REFUSED(attacker_compute(g.request()), "not another tensor of the message");
        g.at(2).set_src(0, 0);
        EXPECT_REFUSED(attacker_compute(g.request()), "source 0 missing");
        g.at(2).set_src(0, 1);
        for (int i = 0; i < GGML_MAX_SRC; ++i) {
            g.at(2).add_src(1);
        }
        EXPECT_REFUSED(attacker_compute(g.request()), "invalid op, op params, sources or name");
        loom::rpc::GraphComputeRequest empty;
        empty.mutable_graph();
        EXPECT_REFUSED(attacker_compute(empty), "a graph needs 1 to");
    }
    {   // A node that is its own source.
        Graph g;
        g.leaf(f32(ha, 0, 8));
        g.node(f32(ha, 256, 8), GGML_OP_SCALE, {2}, kScale, sizeof(kScale));
        EXPECT_REFUSED(attacker_compute(g.request()), "node 0: its source 0 is not computed before it");
        EXPECT_FALSE(supported(*attacker, g.message()));
    }
    {   // A cycle: each of two nodes the other's source.
        Graph g;
        g.node(f32(ha, 0, 8), GGML_OP_SCALE, {2}, kScale, sizeof(kScale));
        g.node(f32(ha, 256, 8), GGML_OP_SCALE, {1}, kScale, sizeof(kScale));
        EXPECT_REFUSED(attacker_compute(g.request()), "node 0: its source 0 is not computed before it");
    }
    {   // A node whose source is a node listed after it.
        Graph          g;
        const uint32_t in = g.leaf(f32(ha, 0, 8));
        g.node(f32(ha, 256, 8), GGML_OP_SCALE, {3}, kScale, sizeof(kScale));
        g.node(f32(ha, 512, 8), GGML_OP_SCALE, {in}, kScale, sizeof(kScale));
        EXPECT_REFUSED(attacker_compute(g.request()), "node 0: its source 0 is not computed before it");
        // In ggml's order the same graph computes.
        g.message().set_nodes(0, 3);
        g.message().set_nodes(1, 2);
        EXPECT_TRUE(attacker_compute(g.request()).ok());
    }
    {   // A copy that names itself as its destination (ggml_cast) converts.
        const float x[8] = {1.5f, -2.0f, 3.25f, 0.0f, 65504.0f, -0.5f, 7.0f, 0.125f}; // exact in F16
        ASSERT_TRUE(set(*attacker, f32(ha, 0, 8), 0, std::string(reinterpret_cast<const char *>(x), 32)).ok());
        Graph          g;
        const uint32_t in = g.leaf(f32(ha, 0, 8));
        g.node(tensor(ha, 1024, GGML_TYPE_F16, {8, 1, 1, 1}), GGML_OP_CPY, {in, 2});
        const grpc::Status st = attacker_compute(g.request());
        ASSERT_TRUE(st.ok()) << st.error_message();
        std::string got;
        ASSERT_TRUE(get(*attacker, tensor(ha, 1024, GGML_TYPE_F16, {8, 1, 1, 1}), 0, 16, &got).ok());
        ggml_fp16_t h[8];
        std::memcpy(h, got.data(), sizeof(h));
        for (int i = 0; i < 8; ++i) {
            EXPECT_EQ(ggml_fp16_to_fp32(h[i]), x[i]) << i;
        }
        // A copy into itself as its source is still refused.
        g.at(2).set_src(0, 2);
        EXPECT_REFUSED(attacker_compute(g.request()), "its source 0 is not computed before it");
    }
}

// A tensor whose view points outside its view source: view_src +
// view_offs beyond the source's bytes (still inside the buffer, or past
// it), a view_offs that wraps around, a view source in another buffer or
// the view itself. A view inside its source computes.
TEST_F(RpcAttacks, ViewOutsideItsViewSource) {
    struct Case {
        const char * what;
        uint64_t     offset;    // of the view in ha
        uint64_t     view_offs; // from its source, 16 values at 64 in ha
        int64_t      ne;
        const char * reason;
    };
    const Case cases[] = {
        {"past the source, inside the buffer", 128, 64, 16, "lies outside its view source"},
        {"straddling the source's end", 96, 32, 16, "lies outside its view source"},
        {"past the buffer", kBuf, kBuf - 64, 16, "does not fit its buffer"},
        {"an offset that wraps", 32, UINT64_MAX - 31, 4, "not a tensor of the message at its place"},
    };
    for (const Case & c : cases) {
        SCOPED_TRACE(c.what);
        Graph          g;
        const uint32_t src  = g.leaf(f32(ha, 64, 16));
        const uint32_t view = g.node(f32(ha, c.offset, c.ne), GGML_OP_VIEW, {src});
        g.at(view).set_view_src(src);
        g.at(view).set_view_offs(c.view_offs);
        g.node(f32(ha, 1024, c.ne), GGML_OP_SCALE, {view}, kScale, sizeof(kScale));
        EXPECT_REFUSED(attacker_compute(g.request()), c.reason);
        // Not as a view op either: a tensor that computes in place into a view.
        Graph          h;
        const uint32_t s2 = h.leaf(f32(ha, 64, 16));
        const uint32_t in = h.leaf(f32(ha, 2048, c.ne));
        const uint32_t n  = h.node(f32(ha, c.offset, c.ne), GGML_OP_SCALE, {in}, kScale, sizeof(kScale));
        h.at(n).set_view_src(s2);
        h.at(n).set_view_offs(c.view_offs);
        EXPECT_REFUSED(attacker_compute(h.request()), c.reason);
    }
    {
        Graph          g;
        const uint32_t src  = g.leaf(f32(hc, 0, 16));
        const uint32_t view = g.node(f32(ha, 0, 16), GGML_OP_VIEW, {src});
        g.at(view).set_view_src(src);
        EXPECT_REFUSED(attacker_compute(g.request()), "not a tensor of the message at its place");
        g.at(view).set_view_src(view);
        EXPECT_REFUSED(attacker_compute(g.request()), "not a tensor of the message at its place");
        g.at(view).set_view_src(7);
        EXPECT_REFUSED(attacker_compute(g.request()), "not a tensor of the message at its place");
    }
    // The second half of the source, viewed and scaled.
    std::vector<float> x(16);
    for (int i = 0; i < 16; ++i) {
        x[size_t(i)] = float(i) - 4.0f;
    }
    ASSERT_TRUE(set(*attacker, f32(ha, 0, 16), 0, std::string(reinterpret_cast<char *>(x.data()), 64)).ok());
    Graph          g;
    const uint32_t src  = g.leaf(f32(ha, 0, 16));
    const uint32_t view = g.node(f32(ha, 32, 8), GGML_OP_VIEW, {src});
    g.at(view).set_view_src(src);
    g.at(view).set_view_offs(32);
    g.node(f32(ha, 1024, 8), GGML_OP_SCALE, {view}, kScale, sizeof(kScale));
    const grpc::Status st = attacker_compute(g.request());
    ASSERT_TRUE(st.ok()) << st.error_message();
    std::string got;
    ASSERT_TRUE(get(*attacker, f32(ha, 1024, 8), 0, 32, &got).ok());
    float y[8];
    std::memcpy(y, got.data(), sizeof(y));
    for (int i = 0; i < 8; ++i) {
        EXPECT_EQ(y[i], 2.0f * x[size_t(8 + i)]) << i;
    }
}

// ---- 10: messages that announce more than they carry ---------------------------

// On the bulk connection: a set frame announcing more bytes than follow,
// the client then closing or stalling; a description announcing more
// bytes than follow; a description larger than the server takes. On gRPC,
// where every field carries its own length: a hash field of the wrong
// length, a range larger than its tensor, and an encoding whose field
// claims more bytes than the message holds (refused by gRPC's protobuf
// layer, INTERNAL, before any handler runs).
TEST_F(RpcAttacks, MessagesAnnouncingMoreBytesThanTheyCarry) {
    const uint64_t big = uint64_t(1) << 20;
    for (int how = 0; how < 2; ++how) { // 0: the client closes; 1: it stalls, then closes
        SCOPED_TRACE(how == 0 ? "closes" : "stalls");
        RawClient c(server.endpoint());
        ASSERT_TRUE(c.connect().ok());
        const uint64_t h = c.alloc(big);
        ASSERT_NE(h, 0u);
        auto b = bind_bulk(c);
        b->frame(bulk::Op::set, f32(h, 0, int64_t(big / 4)).SerializeAsString(), 0, big);
        ASSERT_TRUE(b->write(std::string(1000, 'q').data(), 1000));
        if (how == 1) {
            // While the upload waits, other sessions are served.
            expect_computes(*victim, victim->alloc(kBuf), 13.0f);
            expect_new_session_computes(server);
        }
        b->end_writes();
        const auto r = b->reply();
        EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
        EXPECT_NE(r.second.find("announced 1048576 bytes"), std::string::npos) << r.second;
        EXPECT_TRUE(b->closed_by_server());
        expect_computes(c, h, 15.0f);
    }
    {   // a description announcing 1000 bytes, 10 sent
        RawClient c(server.endpoint());
        ASSERT_TRUE(c.connect().ok());
        auto              b = bind_bulk(c);
        const bulk::Frame f{uint32_t(bulk::Op::set), 1000, 0, 16};
        ASSERT_TRUE(b->write(&f, sizeof(f)));
        ASSERT_TRUE(b->write("0123456789", 10));
        b->end_writes();
        const auto r = b->reply();
        EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
        EXPECT_NE(r.second.find("before its 1000 bytes of description arrived"), std::string::npos) << r.second;
        EXPECT_TRUE(b->closed_by_server());
    }
    {   // a description above the limit, and an unknown operation
        for (const bulk::Frame f : {bulk::Frame{uint32_t(bulk::Op::set), uint32_t(bulk::k_max_meta_bytes + 1), 0, 16},
                                    bulk::Frame{77, 0, 0, 0}}) {
            RawClient c(server.endpoint());
            ASSERT_TRUE(c.connect().ok());
            auto b = bind_bulk(c);
            ASSERT_TRUE(b->write(&f, sizeof(f)));
            const auto r = b->reply();
            EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
            EXPECT_NE(r.second.find("bulk frame: "), std::string::npos) << r.second;
            EXPECT_TRUE(b->closed_by_server());
        }
    }
    {   // half a frame header, then the end of the stream: the connection closes
        RawClient c(server.endpoint());
        ASSERT_TRUE(c.connect().ok());
        auto b = bind_bulk(c);
        ASSERT_TRUE(b->write("\x01\x00\x00\x00\x10\x00", 6));
        b->end_writes();
        EXPECT_TRUE(b->closed_by_server());
        ASSERT_NE(c.alloc(kBuf), 0u);
    }
    // gRPC
    loom::rpc::SetTensorHashRequest sh;
    *sh.mutable_tensor() = f32(ha, 0, 16);
    sh.set_size(64);
    sh.set_sha256(std::string(16, '\x01'));
    loom::rpc::SetTensorHashReply shr;
    EXPECT_REFUSED(attacker->stub().SetTensorHash(attacker->ctx().get(), sh, &shr), "SHA-256 of 32 bytes");
    sh.set_sha256(std::string(33, '\x01'));
    EXPECT_REFUSED(attacker->stub().SetTensorHash(attacker->ctx().get(), sh, &shr), "SHA-256 of 32 bytes");
    sh.set_sha256(std::string(32, '\x01'));
    sh.set_size(65);
    EXPECT_REFUSED(attacker->stub().SetTensorHash(attacker->ctx().get(), sh, &shr), "outside the tensor's 64 bytes");
    EXPECT_REFUSED(attacker_get(f32(ha, 0, 16), 0, 4096), "outside the tensor's 64 bytes");
    EXPECT_REFUSED(set(*attacker, f32(ha, 0, 16), 0, std::string(65, '\x01')), "outside the tensor's 64 bytes");

    loom::rpc::SetTensorRequest st;
    *st.mutable_tensor() = f32(ha, 0, 16);
    st.set_data(std::string(64, '\x55'));
    const std::string whole = st.SerializeAsString();
    const grpc::Status cut  = raw_call(*attacker, "SetTensor", whole.substr(0, whole.size() - 30));
    EXPECT_EQ(cut.error_code(), grpc::StatusCode::INTERNAL) << cut.error_message();
    std::string got;
    ASSERT_TRUE(get(*attacker, f32(ha, 0, 16), 0, 64, &got).ok());
    EXPECT_EQ(got, std::string(64, '\0')) << "a part of the cut message was written";
}

// ---- 11: many sessions, one sending garbage ------------------------------------

// 64 sessions at once (the server's limit): 63 upload inputs, compute and
// read results, half through gRPC and half through the bulk connection,
// several times each, while the 64th sends random bytes on its bulk
// connection, random encodings to every gRPC method and random valid
// messages. Every correct session gets correct results; a 65th session is
// refused for the limit, not for the garbage.
TEST(RpcAttacksSessions, SixtyFourSessionsOneSendingGarbage) {
    TestServer server;
    ASSERT_TRUE(server.running());
    constexpr int kGood = 63;
    std::vector<std::unique_ptr<RawClient>> good;
    for (int i = 0; i < kGood; ++i) {
        good.push_back(std::make_unique<RawClient>(server.endpoint()));
        ASSERT_TRUE(good.back()->connect().ok()) << i;
    }
    RawClient bad(server.endpoint());
    ASSERT_TRUE(bad.connect().ok());
    ASSERT_EQ(bad.alloc(kBuf), 1u); // for the random graphs to name
    {
        RawClient extra(server.endpoint());
        const grpc::Status st = extra.connect();
        EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    }
    std::latch            start(kGood + 1);
    std::atomic<int>      done{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kGood; ++i) {
        threads.emplace_back([&, i] {
            RawClient & c = *good[size_t(i)];
            start.arrive_and_wait();
            const uint64_t h = c.alloc(kBuf);
            if (h == 0) {
                ADD_FAILURE() << "session " << i << " cannot allocate";
                return;
            }
            std::unique_ptr<RawBulk> b = i % 2 == 0 ? bind_bulk(c) : nullptr;
            for (int round = 0; round < 4; ++round) {
                expect_computes(c, h, float(i * 10 + round), b.get());
            }
            ++done;
        });
    }
    std::thread garbage([&] {
        start.arrive_and_wait();
        std::mt19937 rng(1234);
        auto         noise = [&](size_t n) {
            std::string s(n, '\0');
            for (char & ch : s) {
                ch = char(rng());
            }
            return s;
        };
        // Random bytes after binding, and in place of the hello.
        auto b = std::make_unique<RawBulk>(bad.bulk_port());
        if (b->ok() && b->hello(bad.bulk_ticket())) {
            (void) b->reply();
            (void) b->write(noise(1 << 16).data(), 1 << 16);
        }
        for (int k = 0; k < 4; ++k) {
            RawBulk raw(bad.bulk_port());
            (void) raw.write(noise(size_t(100 + 4000 * k)).data(), size_t(100 + 4000 * k));
        }
        // (Not AllocBuffer: random bytes may well ask for gigabytes, which
        // the session's quota grants.)
        const char * methods[] = {"GetDeviceMemory", "SupportsOp", "GetAllocSize", "FreeBuffer",
                                  "ClearBuffer",     "SetTensor",  "SetTensorHash", "GetTensor",
                                  "MemsetTensor",    "CopyTensor", "GraphCompute"};
        for (int k = 0; k < 3; ++k) {
            for (const char * m : methods) {
                (void) raw_call(bad, m, noise(size_t(1 + rng() % 300)));
            }
        }
        // Well-formed messages of random content.
        for (int k = 0; k < 50; ++k) {
            loom::rpc::GraphComputeRequest req;
            auto *                         g = req.mutable_graph();
            for (int t = 0; t < 3; ++t) {
                TensorDesc * d = g->add_tensors();
                d->set_buffer(rng() % 3);
                d->set_offset(rng() % 8192);
                d->set_type(rng() % 50);
                for (int i = 0; i < 4; ++i) {
                    d->add_ne(int64_t(rng() % 64) - 2);
                    d->add_nb(rng() % 512);
                }
                d->set_op(rng() % 100);
                d->add_src(rng() % 4);
                d->set_op_params(noise(16));
            }
            g->add_nodes(rng() % 4);
            (void) compute(bad, req);
        }
        b->end();
    });
    for (std::thread & t : threads) {
        t.join();
    }
    garbage.join();
    EXPECT_EQ(done.load(), kGood);
    expect_computes(bad, 1, 1.0f); // the garbage session's gRPC still serves it
}

// ---- 12: a client that vanishes mid-upload -------------------------------------

// A client cut off in the middle of a large bulk upload (its socket closed,
// its Connect stream cancelled, in either order; or the socket only): its
// session ends when the Connect stream ends and every byte of its buffers
// is given back (the server's count of bytes held in session buffers); a
// session only losing its bulk connection keeps its buffers and serves on
// through gRPC. Another session holding canary bytes computes meanwhile
// and keeps them.
TEST(RpcAttacksSessions, ClientVanishingMidUploadFreesItsMemory) {
    TestServer server;
    ASSERT_TRUE(server.running());
    RawClient other(server.endpoint());
    ASSERT_TRUE(other.connect().ok());
    const uint64_t ho = other.alloc(kBuf);
    ASSERT_NE(ho, 0u);
    ASSERT_TRUE(set(other, f32(ho, 0, kBuf / 4), 0, canary(kBuf)).ok());
    const uint64_t hw = other.alloc(kBuf);
    ASSERT_NE(hw, 0u);
    const size_t baseline = loom_rpc_server_buffer_bytes(server.get());
    EXPECT_GE(baseline, 2 * kBuf);
    const uint64_t size = uint64_t(32) << 20;
    for (int how = 0; how < 3; ++how) { // 0: socket, then stream; 1: stream, then socket; 2: socket only
        SCOPED_TRACE(how);
        auto c = std::make_unique<RawClient>(server.endpoint());
        ASSERT_TRUE(c->connect().ok());
        loom::rpc::AllocBufferRequest ar;
        ar.set_size(size);
        loom::rpc::AllocBufferReply arr;
        ASSERT_TRUE(c->stub().AllocBuffer(c->ctx().get(), ar, &arr).ok());
        const uint64_t sz2 = arr.size();
        const uint64_t h2  = c->alloc(kBuf);
        ASSERT_NE(h2, 0u);
        EXPECT_EQ(loom_rpc_server_buffer_bytes(server.get()), baseline + sz2 + kBuf);
        auto b = bind_bulk(*c);
        b->frame(bulk::Op::set, f32(arr.buffer(), 0, int64_t(size / 4)).SerializeAsString(), 0, size);
        const std::string part(size_t(4) << 20, 'x');
        ASSERT_TRUE(b->write(part.data(), part.size()));
        expect_computes(other, hw, 21.0f); // served while the upload waits
        if (how == 0 || how == 2) {
            b->end();
        }
        if (how == 2) {
            // The session lives on with its buffers; the refused upload is over.
            expect_computes(*c, h2, 23.0f);
            EXPECT_EQ(loom_rpc_server_buffer_bytes(server.get()), baseline + sz2 + kBuf);
        }
        c.reset();
        wait_for_sessions(server.get(), 1);
        EXPECT_EQ(loom_rpc_server_session_count(server.get()), 1u);
        for (int i = 0; i < 500 && loom_rpc_server_buffer_bytes(server.get()) != baseline; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        EXPECT_EQ(loom_rpc_server_buffer_bytes(server.get()), baseline);
        if (how == 1) {
            EXPECT_TRUE(b->closed_by_server());
        }
    }
    std::string got;
    ASSERT_TRUE(get(other, f32(ho, 0, kBuf / 4), 0, kBuf, &got).ok());
    EXPECT_EQ(got, canary(kBuf));
    expect_computes(other, hw, 25.0f);
    other.disconnect();
    wait_for_sessions(server.get(), 0);
    EXPECT_EQ(loom_rpc_server_buffer_bytes(server.get()), 0u);
}

} // namespace
