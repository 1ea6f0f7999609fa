// Attacks known against ggml's RPC server, as in test_rpc_attacks.cpp (which describes
// what each test checks): 8-12, graphs that lie, messages announcing more than they carry,
// many sessions with one sending garbage, a client vanishing mid-upload.

#include <gtest/gtest.h>

#include "rpc_attacks_util.h"

using namespace loomtest::rpc_attacks;
using namespace loomtest::rpc;
using loom::rpc::TensorDesc;

namespace {

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
