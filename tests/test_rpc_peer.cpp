// Reductions between servers (Note [Peer links] in
// src/backends/rpc/peer.h), spoken with the raw protocol: sums equal to a
// sum in rank order on every member, full-duplex exchanges larger than the
// sockets hold, and every way a group can be misused or broken ending in a
// clear failure, never a hang.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "backends/rpc/bulk.h"
#include "backends/rpc/peer.h"
#include "backends/rpc/server_core.h"
#include "ggml-backend.h"
#include "ggml-rpc.h"
#include "rpc_bulk_test_util.h"
#include "rpc_test_util.h"

using namespace loomtest::rpc;
namespace bulk = loom::rpc::bulk;

namespace {

// A session on one server, bound to its bulk connection, holding an F32
// buffer of n floats.
struct Member {
    Member(const TestServer & server, size_t n_floats) : c(server.endpoint()), n(n_floats) {
        EXPECT_TRUE(c.connect().ok());
        b = std::make_unique<RawBulk>(c.bulk_port());
        EXPECT_TRUE(b->ok() && b->hello(c.bulk_ticket()));
        EXPECT_EQ(b->reply().first, 0);
        buffer = c.alloc(n * sizeof(float));
        EXPECT_NE(buffer, 0u);
    }

    std::string desc(uint32_t type = 0) const {
        loom::rpc::TensorDesc d;
        describe_f32(&d, buffer, 0, int64_t(n));
        d.set_type(type);
        return d.SerializeAsString();
    }
    void set(const std::vector<float> & v) {
        b->frame(bulk::Op::set, desc(), 0, v.size() * sizeof(float));
        ASSERT_TRUE(b->write(v.data(), v.size() * sizeof(float)));
        ASSERT_EQ(b->reply().first, 0);
    }
    std::vector<float> get() {
        b->frame(bulk::Op::get, desc(), 0, n * sizeof(float));
        uint64_t size = 0;
        EXPECT_EQ(b->reply(&size).first, 0);
        std::vector<float> v(n);
        EXPECT_EQ(size, n * sizeof(float));
        EXPECT_TRUE(b->read(v.data(), n * sizeof(float)));
        return v;
    }
    // The reply's code and, on success, the group and ticket.
    int open(uint32_t rank, uint32_t size, loom::rpc::GroupOpenReply * rep = nullptr) {
        loom::rpc::GroupOpenRequest req;
        req.set_rank(rank);
        req.set_size(size);
        b->frame(bulk::Op::group_open, req.SerializeAsString(), 0, 0);
        uint64_t   bytes = 0;
        const auto r     = b->reply(&bytes);
        std::string payload(bytes, '\0');
        EXPECT_TRUE(b->read(payload.data(), payload.size()));
        if (rep != nullptr) {
            EXPECT_TRUE(rep->ParseFromString(payload));
        }
        return r.first;
    }
    std::pair<int, std::string> join(uint64_t group, const std::vector<loom::rpc::PeerAddress> & peers) {
        loom::rpc::GroupJoinRequest req;
        req.set_group(group);
        for (const auto & p : peers) *req.add_peers() = p;
        b->frame(bulk::Op::group_join, req.SerializeAsString(), 0, 0);
        return b->reply();
    }
    void send_reduce(uint64_t group, uint64_t sequence, uint32_t type = 0) {
        loom::rpc::ReduceRequest req;
        req.set_group(group);
        req.set_sequence(sequence);
        req.mutable_tensor()->ParseFromString(desc(type));
        b->frame(bulk::Op::reduce, req.SerializeAsString(), 0, 0);
    }

    RawClient                c;
    std::unique_ptr<RawBulk> b;
    size_t                   n;
    uint64_t                 buffer = 0;
    uint64_t                 group  = 0;
    std::string              ticket;
};

loom::rpc::PeerAddress address(const Member & m) {
    loom::rpc::PeerAddress a;
    a.set_host("127.0.0.1");
    a.set_port(m.c.bulk_port());
    a.set_ticket(m.ticket);
    return a;
}

// Opens a group over members (rank = index) and joins them in rank order.
void form_group(std::vector<std::unique_ptr<Member>> & ms) {
    const uint32_t size = uint32_t(ms.size());
    for (uint32_t r = 0; r < size; ++r) {
        loom::rpc::GroupOpenReply rep;
        ASSERT_EQ(ms[r]->open(r, size, &rep), 0);
        ASSERT_NE(rep.group(), 0u);
        ASSERT_EQ(rep.ticket().size(), bulk::k_ticket_bytes);
        ms[r]->group  = rep.group();
        ms[r]->ticket = rep.ticket();
    }
    std::vector<loom::rpc::PeerAddress> peers;
    for (const auto & m : ms) peers.push_back(address(*m));
    for (uint32_t r = 0; r < size; ++r) {
        const auto j = ms[r]->join(ms[r]->group, peers);
        ASSERT_EQ(j.first, 0) << j.second;
    }
}

std::vector<float> values(size_t n, uint32_t seed) {
    std::mt19937                          g(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float>                    v(n);
    // Magnitudes far apart, so that the order of the sum shows in its bits.
    for (size_t i = 0; i < n; ++i) v[i] = u(g) * (i % 3 == 0 ? 1e7f : 1.0f);
    return v;
}

class RpcPeer : public ::testing::Test {
  protected:
    void SetUp() override { loom_rpc_set_token(kToken); }
};

// Three servers: every member ends with the sum in rank order from 0.0f,
// bit for bit, and within rounding of the sum in double precision; then a
// second reduction of 16 MiB per member, more than the sockets between
// them hold, which only a full-duplex exchange finishes.
TEST_F(RpcPeer, ThreeServersEachHoldTheSumInRankOrder) {
    TestServer s0, s1, s2;
    ASSERT_TRUE(s0.running() && s1.running() && s2.running());
    for (const size_t n : {size_t(2053), size_t(1) << 22}) {
        std::vector<std::unique_ptr<Member>> ms;
        for (TestServer * s : {&s0, &s1, &s2}) ms.push_back(std::make_unique<Member>(*s, n));
        form_group(ms);
        std::vector<std::vector<float>> parts;
        for (uint32_t r = 0; r < 3; ++r) {
            parts.push_back(values(n, 17 + r + uint32_t(n)));
            ms[r]->set(parts[r]);
        }
        for (uint64_t seq = 0; seq < 2; ++seq) {
            // Every member's frame is sent before any reply is read: the
            // members meet each other, not the client.
            for (auto & m : ms) m->send_reduce(m->group, seq);
            for (auto & m : ms) {
                const auto r = m->b->reply();
                ASSERT_EQ(r.first, 0) << r.second;
            }
            std::vector<float> expect(n, 0.0f);
            for (size_t i = 0; i < n; ++i) {
                for (uint32_t r = 0; r < 3; ++r) expect[i] += parts[r][i];
            }
            for (uint32_t r = 0; r < 3; ++r) {
                const std::vector<float> got = ms[r]->get();
                ASSERT_EQ(std::memcmp(got.data(), expect.data(), n * sizeof(float)), 0) << "rank " << r;
                for (size_t i = 0; i < n; i += 97) {
                    const double d = double(parts[0][i]) + double(parts[1][i]) + double(parts[2][i]);
                    const double mag =
                        std::fabs(double(parts[0][i])) + std::fabs(double(parts[1][i])) + std::fabs(double(parts[2][i]));
                    ASSERT_NEAR(got[i], d, 2 * 0x1p-24 * 2 * mag + 1e-30) << i; // two roundings of at most 2^-24 of sums below mag, twice over

                }
            }
            // The next reduction sums the sums.
            for (uint32_t r = 0; r < 3; ++r) parts[r] = expect;
        }
    }
}

// Peer hellos: a forged ticket, a rank that may not link to this member and
// a ticket used twice are refused and their connections closed.
TEST_F(RpcPeer, ForgedTicketsAndMisplacedRanksAreRefused) {
    TestServer s0;
    ASSERT_TRUE(s0.running());
    Member                    m(s0, 16);
    loom::rpc::GroupOpenReply rep;
    ASSERT_EQ(m.open(1, 3, &rep), 0);
    auto peer_hello = [&](const std::string & ticket, uint32_t rank) {
        RawBulk           p(m.c.bulk_port());
        bulk::Hello       h{};
        std::memcpy(h.magic, bulk::k_peer_magic, sizeof(h.magic));
        h.version  = loom::rpc::k_protocol_version;
        h.reserved = rank;
        std::memcpy(h.ticket, ticket.data(), std::min(ticket.size(), sizeof(h.ticket)));
        EXPECT_TRUE(p.ok() && p.write(&h, sizeof(h)));
        const int code = p.reply().first;
        if (code != 0) {
            EXPECT_TRUE(p.closed_by_server());
        }
        return code;
    };
    std::string forged = rep.ticket();
    forged[0] ^= 1;
    EXPECT_EQ(peer_hello(forged, 2), int(grpc::StatusCode::UNAUTHENTICATED));
    EXPECT_EQ(peer_hello(rep.ticket(), 0), int(grpc::StatusCode::UNAUTHENTICATED)); // below: 1 links to 0
    EXPECT_EQ(peer_hello(rep.ticket(), 1), int(grpc::StatusCode::UNAUTHENTICATED)); // itself
    EXPECT_EQ(peer_hello(rep.ticket(), 3), int(grpc::StatusCode::UNAUTHENTICATED)); // beyond the group
    {
        RawBulk     keep(m.c.bulk_port());
        bulk::Hello h{};
        std::memcpy(h.magic, bulk::k_peer_magic, sizeof(h.magic));
        h.version  = loom::rpc::k_protocol_version;
        h.reserved = 2;
        std::memcpy(h.ticket, rep.ticket().data(), sizeof(h.ticket));
        ASSERT_TRUE(keep.ok() && keep.write(&h, sizeof(h)));
        EXPECT_EQ(keep.reply().first, 0);
        EXPECT_EQ(peer_hello(rep.ticket(), 2), int(grpc::StatusCode::UNAUTHENTICATED)); // linked already
    }
    // A session's bulk ticket is no peer ticket, and a peer ticket binds no session.
    EXPECT_EQ(peer_hello(m.c.bulk_ticket(), 2), int(grpc::StatusCode::UNAUTHENTICATED));
    RawBulk as_session(m.c.bulk_port());
    ASSERT_TRUE(as_session.ok() && as_session.hello(rep.ticket()));
    EXPECT_EQ(as_session.reply().first, int(grpc::StatusCode::UNAUTHENTICATED));
}

// Requests that cannot form a group are refused with the reason; the
// session serves on.
TEST_F(RpcPeer, MalformedGroupsAreRefused) {
    TestServer s0;
    ASSERT_TRUE(s0.running());
    Member m(s0, 16);
    EXPECT_EQ(m.open(0, 1), int(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_EQ(m.open(2, 2), int(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_EQ(m.open(0, loom::rpc::PeerGroup::k_max_size + 1), int(grpc::StatusCode::INVALID_ARGUMENT));
    loom::rpc::GroupOpenReply rep;
    ASSERT_EQ(m.open(1, 2, &rep), 0);
    m.group  = rep.group();
    m.ticket = rep.ticket();
    // The join names every member; this one names one.
    EXPECT_EQ(m.join(m.group, {address(m)}).first, int(grpc::StatusCode::INVALID_ARGUMENT));
    // A peer that is not there (port 1 on loopback: nothing listens).
    loom::rpc::PeerAddress nobody = address(m);
    nobody.set_port(1);
    const auto gone = m.join(m.group, {nobody, address(m)});
    EXPECT_EQ(gone.first, int(grpc::StatusCode::UNAVAILABLE)) << gone.second;
    EXPECT_EQ(m.join(m.group, {nobody, address(m)}).first, int(grpc::StatusCode::FAILED_PRECONDITION));
    EXPECT_EQ(m.join(m.group + 100, {nobody, address(m)}).first, int(grpc::StatusCode::INVALID_ARGUMENT));
    m.send_reduce(m.group + 100, 0);
    EXPECT_EQ(m.b->reply().first, int(grpc::StatusCode::INVALID_ARGUMENT));
    // A session holds a bounded number of groups.
    int last = 0;
    for (size_t i = 0; i < loom::rpc::ServerCore::k_max_groups + 1 && last == 0; ++i) last = m.open(0, 2);
    EXPECT_EQ(last, int(grpc::StatusCode::RESOURCE_EXHAUSTED));
    loom::rpc::GroupRequest close;
    close.set_group(m.group);
    m.b->frame(bulk::Op::group_close, close.SerializeAsString(), 0, 0);
    EXPECT_EQ(m.b->reply().first, 0);
    EXPECT_EQ(m.open(0, 2), 0);
    m.set(std::vector<float>(16, 1.0f));
    EXPECT_EQ(m.get(), std::vector<float>(16, 1.0f));
}

// A member out of step, a tensor the reduction does not take, a member
// that ends its session and a server that stops: each fails the reduction
// on every member for that reason, not for want of progress within the
// transfer timeout, and the group stays broken.
TEST_F(RpcPeer, BrokenGroupsFailEveryMemberWithoutWaiting) {
    TestServer s0, s1;
    ASSERT_TRUE(s0.running() && s1.running());
    // A failure that waited for the timeout says so ("no progress with a
    // peer within N ms", "not every peer linked in within N ms").
    auto not_timed_out = [](const std::string & why) { return why.find(" ms") == std::string::npos; };
    for (int how = 0; how < 4; ++how) {
        std::vector<std::unique_ptr<Member>> ms;
        ms.push_back(std::make_unique<Member>(s0, 64));
        ms.push_back(std::make_unique<Member>(s1, 64));
        form_group(ms);
        ms[0]->set(std::vector<float>(64, 1.0f));
        ms[1]->set(std::vector<float>(64, 2.0f));
        // One good reduction first.
        for (auto & m : ms) m->send_reduce(m->group, 0);
        for (auto & m : ms) ASSERT_EQ(m->b->reply().first, 0);
        if (how == 0) {
            ms[0]->send_reduce(ms[0]->group, 5); // out of step
        } else if (how == 1) {
            ms[0]->send_reduce(ms[0]->group, 1, GGML_TYPE_F16); // not F32
        } else if (how == 2) {
            ms[0]->b->end();
            ms[0]->c.disconnect();
        }
        if (how == 3) {
            std::unique_ptr<Member> keep = std::move(ms[0]);
            s0.stop();
            ms[1]->send_reduce(ms[1]->group, 1);
            const auto r = ms[1]->b->reply();
            EXPECT_NE(r.first, 0);
            EXPECT_TRUE(not_timed_out(r.second)) << r.second;
            break;
        }
        ms[1]->send_reduce(ms[1]->group, 1);
        const auto r1 = ms[1]->b->reply();
        EXPECT_NE(r1.first, 0);
        EXPECT_NE(r1.second.find("reduction between servers"), std::string::npos) << r1.second;
        EXPECT_TRUE(not_timed_out(r1.second)) << r1.second;
        if (how < 2) {
            const auto r0 = ms[0]->b->reply();
            EXPECT_NE(r0.first, 0);
            EXPECT_TRUE(not_timed_out(r0.second)) << r0.second;
            // Broken for good: the next reduction in step fails too.
            ms[0]->send_reduce(ms[0]->group, 2);
            EXPECT_NE(ms[0]->b->reply().first, 0);
            EXPECT_EQ(ms[0]->get(), std::vector<float>(64, 3.0f)); // the data of the last good sum
        }
    }
}

} // namespace
