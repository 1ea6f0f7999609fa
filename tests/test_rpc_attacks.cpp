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

// Attacks 1-7: reads and writes outside a buffer, copies, types, use after free,
// function pointers, writes through op params and indices (attacks 8-12:
// test_rpc_attacks_graphs.cpp).

#include <gtest/gtest.h>

#include "rpc_attacks_util.h"

using namespace loomtest::rpc_attacks;
using namespace loomtest::rpc;
using loom::rpc::TensorDesc;

namespace {

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
                           "index " + std::to_string(c.index_type == GGML_TYPE_I32 ? int64_t(int32_t(v)) : v) +
                               " at [1, 0, 0, 0] of src[1]");
        }
        if (c.index_type == GGML_TYPE_I64) {
            ASSERT_TRUE(set(*attacker, idx, 0, indices(c.index_type, {0, int64_t(1) << 40, 1})).ok());
            EXPECT_REFUSED(attacker_compute(g.request()), "index 1099511627776 at [1, 0, 0, 0]");
        }
        // Valid indices compute; changed to an invalid one, the recompute by
        // signature is refused.
        ASSERT_TRUE(set(*attacker, idx, 0, indices(c.index_type, {3, 0, 2})).ok());
        const grpc::Status st = attacker_compute(g.request());
        ASSERT_TRUE(st.ok()) << st.error_message();
        ASSERT_TRUE(set(*attacker, idx, 0, indices(c.index_type, {3, 4, 2})).ok());
        loom::rpc::GraphComputeRequest again;
        again.set_signature(g.request().signature());
        EXPECT_REFUSED(attacker_compute(again), "index 4 at [1, 0, 0, 0] of src[1]");
    }
    // GET_ROWS takes I32 indices only.
    Graph g;
    rows_graph(g, ha, GGML_OP_GET_ROWS, GGML_TYPE_I64);
    EXPECT_REFUSED(attacker_compute(g.request()), "GET_ROWS: indices (src[1]) '' [3, 1, 1, 1] i64 must be i32");
}

// The same for the other operators with index sources (Note [Index
// sources] in core/op_table.h): MUL_MAT_ID's experts and ADD_ID's rows of
// its bias, read from the session's memory, are checked before every
// computation. MUL_MAT_ID multiplies 2 of 3 experts [8, 4] with 2 tokens
// [8, 1]; ADD_ID adds rows of b [8, 3] to a [8, 2, 2]. The 2 x 2 ids are at
// 1024, the result at 2048.
TEST_F(RpcAttacks, ExpertAndBiasIndicesOutsideTheirTensor) {
    const TensorDesc ids  = tensor(ha, 1024, GGML_TYPE_I32, {2, 2, 1, 1});
    auto             four = [](int32_t a, int32_t b, int32_t c, int32_t d) {
        const int32_t v[4] = {a, b, c, d};
        return std::string(reinterpret_cast<const char *>(v), sizeof(v));
    };
    for (ggml_op op : {GGML_OP_MUL_MAT_ID, GGML_OP_ADD_ID}) {
        SCOPED_TRACE(ggml_op_name(op));
        Graph          g;
        const uint32_t id = g.leaf(ids);
        uint32_t       node;
        if (op == GGML_OP_MUL_MAT_ID) {
            const uint32_t as = g.leaf(f32(ha, 0, 8, 4, 3));
            const uint32_t b  = g.leaf(f32(ha, 512, 8, 1, 2));
            node              = g.node(f32(ha, 2048, 4, 2, 2), op, {as, b, id});
        } else {
            const uint32_t a = g.leaf(f32(ha, 0, 8, 2, 2));
            const uint32_t b = g.leaf(f32(ha, 512, 8, 3));
            node             = g.node(f32(ha, 2048, 8, 2, 2), op, {a, b, id});
        }
        g.at(node).set_name("moe");
        g.request().set_signature(ggml_op_name(op));
        const std::string prefix = std::string(ggml_op_name(op)) + " 'moe': index ";
        for (const int64_t v : {int64_t(3), int64_t(-1), int64_t(INT32_MAX), int64_t(INT32_MIN)}) {
            SCOPED_TRACE(v);
            ASSERT_TRUE(set(*attacker, ids, 0, four(0, int32_t(v), 1, 2)).ok());
            EXPECT_REFUSED(attacker_compute(g.request()), prefix + std::to_string(v) + " at [1, 0, 0, 0] of src[2]");
        }
        // Good ids compute; changed to a bad one, the recompute by
        // signature is refused.
        ASSERT_TRUE(set(*attacker, ids, 0, four(2, 0, 1, 2)).ok());
        const grpc::Status st = attacker_compute(g.request());
        ASSERT_TRUE(st.ok()) << st.error_message();
        ASSERT_TRUE(set(*attacker, ids, 0, four(2, 0, 1, 3)).ok());
        loom::rpc::GraphComputeRequest again;
        again.set_signature(g.request().signature());
        EXPECT_REFUSED(attacker_compute(again), prefix + "3 at [1, 1, 0, 0] of src[2]");
    }
}

} // namespace
