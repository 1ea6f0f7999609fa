// loom-rpc-server speaking ggml's RPC protocol (src/backends/rpc/
// ggml_server.h), driven by raw messages on a socket as ggml 0.25.1's client
// writes them: the requests a client makes, with their results checked
// against values computed here, and each class of attack published against
// ggml's own rpc-server (the advisories named in the test names), each
// refused by closing that connection, the server healthy for the next one.
// Then loom's own client of the protocol (ggml_client.h) on such a server.

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/rpc/ggml_wire.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-rpc.h"
#include "ggml.h"

namespace gw = loom::rpc::ggml_wire;

namespace {

class Server {
  public:
    explicit Server(const char * cache_dir = nullptr) {
        loom_rpc_server_params p{};
        p.endpoint  = "127.0.0.1:0";
        p.protocol  = "ggml";
        p.cache_dir = cache_dir;
        p.n_threads = 1;
        s_          = loom_rpc_server_start(&p);
    }
    ~Server() { loom_rpc_server_stop(s_); }
    int                port() const { return loom_rpc_server_port(s_); }
    loom_rpc_server_t  get() const { return s_; }

  private:
    loom_rpc_server_t s_ = nullptr;
};

// A client of ggml's protocol on one connection.
class Client {
  public:
    explicit Client(int port, bool say_hello = true) {
        fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family      = AF_INET;
        a.sin_port        = htons(uint16_t(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        timeval tv{10, 0}; // a server that hangs fails the test
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        const int one = 1;
        setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        ok_ = connect(fd_, reinterpret_cast<sockaddr *>(&a), sizeof(a)) == 0;
        if (ok_ && say_hello) {
            gw::HelloReq req{};
            gw::HelloRsp rsp{};
            ok_ = call(gw::Cmd::hello, &req, sizeof(req), &rsp, sizeof(rsp)) && rsp.major == gw::k_major;
        }
    }
    ~Client() { close(fd_); }
    bool ok() const { return ok_; }

    bool send_raw(const void * p, size_t n) {
        const auto * b = static_cast<const uint8_t *>(p);
        while (n > 0) {
            const ssize_t k = ::send(fd_, b, n, MSG_NOSIGNAL);
            if (k <= 0) {
                return false;
            }
            b += k;
            n -= size_t(k);
        }
        return true;
    }
    bool recv_raw(void * p, size_t n) {
        auto * b = static_cast<uint8_t *>(p);
        while (n > 0) {
            const ssize_t k = ::recv(fd_, b, n, 0);
            if (k <= 0) {
                return false;
            }
            b += k;
            n -= size_t(k);
        }
        return true;
    }
    bool send(gw::Cmd cmd, const void * p, uint64_t n) {
        const uint8_t c = uint8_t(cmd);
        return send_raw(&c, 1) && send_raw(&n, 8) && send_raw(p, size_t(n));
    }
    bool call(gw::Cmd cmd, const void * p, uint64_t n, void * out, uint64_t out_n) {
        uint64_t got = 0;
        return send(cmd, p, n) && recv_raw(&got, 8) && got == out_n && recv_raw(out, size_t(out_n));
    }
    // The server closed the connection: an end of stream, or a reset (a
    // socket closed with bytes of the refused request still unread sends
    // one).
    bool closed() {
        uint8_t       b = 0;
        const ssize_t r = ::recv(fd_, &b, 1, 0);
        return r == 0 || (r < 0 && errno == ECONNRESET);
    }

    uint32_t device_count() {
        gw::DeviceCountRsp r{};
        return call(gw::Cmd::device_count, nullptr, 0, &r, sizeof(r)) ? r.device_count : 0;
    }
    // A buffer of size bytes on device 0: its remote_ptr and base (0: none).
    uint64_t alloc(uint64_t size, uint64_t * base = nullptr) {
        gw::AllocBufferReq req{0, size};
        gw::AllocBufferRsp rsp{};
        if (!call(gw::Cmd::alloc_buffer, &req, sizeof(req), &rsp, sizeof(rsp))) {
            return 0;
        }
        if (base != nullptr && rsp.remote_ptr != 0) {
            gw::BufferReq b{rsp.remote_ptr};
            gw::U64Rsp    r{};
            *base = call(gw::Cmd::buffer_get_base, &b, sizeof(b), &r, sizeof(r)) ? r.value : 0;
        }
        return rsp.remote_ptr;
    }
    bool set(const gw::Tensor & t, uint64_t offset, const void * data, size_t n, uint8_t cache_flag = 0) {
        std::vector<uint8_t> m(gw::k_set_tensor_header + n);
        std::memcpy(m.data(), &t, sizeof(t));
        m[sizeof(t)] = cache_flag;
        std::memcpy(m.data() + sizeof(t) + 1, &offset, 8);
        std::memcpy(m.data() + gw::k_set_tensor_header, data, n);
        return send(gw::Cmd::set_tensor, m.data(), m.size());
    }
    bool get(const gw::Tensor & t, uint64_t offset, void * data, size_t n) {
        gw::GetTensorReq req{t, offset, n};
        return call(gw::Cmd::get_tensor, &req, sizeof(req), data, n);
    }
    bool compute(uint32_t device, const std::vector<const gw::Tensor *> & nodes, const std::vector<gw::Tensor> & tensors) {
        std::vector<uint8_t> m(12 + nodes.size() * 8 + tensors.size() * sizeof(gw::Tensor));
        const uint32_t       nn = uint32_t(nodes.size()), nt = uint32_t(tensors.size());
        std::memcpy(m.data(), &device, 4);
        std::memcpy(m.data() + 4, &nn, 4);
        for (size_t i = 0; i < nodes.size(); ++i) {
            std::memcpy(m.data() + 8 + i * 8, &nodes[i]->id, 8);
        }
        std::memcpy(m.data() + 8 + nodes.size() * 8, &nt, 4);
        std::memcpy(m.data() + 12 + nodes.size() * 8, tensors.data(), tensors.size() * sizeof(gw::Tensor));
        return send(gw::Cmd::graph_compute, m.data(), m.size());
    }
    // Answers only once the requests before it ran: a barrier.
    bool sync() { return device_count() == 1; }

  private:
    int  fd_ = -1;
    bool ok_ = false;
};

// An F32 tensor of ne elements (1-D) at base + offset of buffer.
gw::Tensor f32(uint64_t id, uint64_t buffer, uint64_t data, uint32_t ne0, uint32_t ne1 = 1) {
    gw::Tensor t{};
    t.id     = id;
    t.type   = GGML_TYPE_F32;
    t.buffer = buffer;
    t.data   = data;
    t.ne[0]  = ne0;
    t.ne[1]  = ne1;
    t.ne[2] = t.ne[3] = 1;
    t.nb[0]           = 4;
    t.nb[1]           = 4 * ne0;
    t.nb[2] = t.nb[3] = 4 * ne0 * ne1;
    t.op              = GGML_OP_NONE;
    return t;
}

class RpcGgml : public ::testing::Test {
  protected:
    // After an attack: a new client is served as usual, and the server
    // holds no session but that one.
    void expect_healthy() {
        Client c(server.port());
        ASSERT_TRUE(c.ok());
        EXPECT_EQ(c.device_count(), 1u);
        uint64_t base = 0;
        EXPECT_NE(c.alloc(256, &base), 0u);
        EXPECT_NE(base, 0u);
    }
    // The connection was closed after its last request, and the server is
    // healthy.
    void expect_refused(Client & c) {
        EXPECT_TRUE(c.closed());
        expect_healthy();
    }

    Server server;
};

TEST_F(RpcGgml, HelloDevicesAndMemory) {
    ASSERT_NE(server.get(), nullptr);
    Client c(server.port(), false);
    ASSERT_TRUE(c.ok());
    gw::HelloReq req{};
    gw::HelloRsp rsp{};
    ASSERT_TRUE(c.call(gw::Cmd::hello, &req, sizeof(req), &rsp, sizeof(rsp)));
    EXPECT_EQ(rsp.major, 7);
    EXPECT_EQ(rsp.minor, 0);
    for (uint8_t b : rsp.conn_caps) {
        EXPECT_EQ(b, 0) << "a TCP server advertises no transport capabilities";
    }
    EXPECT_EQ(c.device_count(), 1u);
    gw::DeviceReq      d{0};
    gw::U64Rsp         align{}, max{};
    gw::DeviceMemoryRsp mem{};
    ASSERT_TRUE(c.call(gw::Cmd::get_alignment, &d, sizeof(d), &align, sizeof(align)));
    ASSERT_TRUE(c.call(gw::Cmd::get_max_size, &d, sizeof(d), &max, sizeof(max)));
    ASSERT_TRUE(c.call(gw::Cmd::get_device_memory, &d, sizeof(d), &mem, sizeof(mem)));
    EXPECT_GE(align.value, 16u);
    EXPECT_EQ(align.value & (align.value - 1), 0u) << "a power of two";
    EXPECT_GT(max.value, uint64_t(1) << 30);
    EXPECT_GT(mem.total_mem, 0u);
    EXPECT_LE(mem.free_mem, mem.total_mem);
}

TEST_F(RpcGgml, TensorsRoundTripAndAGraphComputes) {
    Client c(server.port());
    ASSERT_TRUE(c.ok());
    uint64_t       base = 0;
    const uint64_t buf  = c.alloc(4096, &base);
    ASSERT_NE(buf, 0u);
    constexpr uint32_t n = 37;
    gw::Tensor         a = f32(0x100, buf, base, n), b = f32(0x200, buf, base + 512, n);
    gw::Tensor         sum = f32(0x300, buf, base + 1024, n);
    sum.op                 = GGML_OP_ADD;
    sum.flags              = GGML_TENSOR_FLAG_COMPUTE;
    sum.src[0]             = a.id;
    sum.src[1]             = b.id;
    std::vector<float> x(n), y(n);
    std::mt19937       rng(7);
    std::uniform_real_distribution<float> u(-4, 4);
    for (uint32_t i = 0; i < n; ++i) {
        x[i] = u(rng);
        y[i] = u(rng);
    }
    ASSERT_TRUE(c.set(a, 0, x.data(), n * 4));
    ASSERT_TRUE(c.set(b, 0, y.data(), n * 4));
    std::vector<float> back(n);
    ASSERT_TRUE(c.get(a, 0, back.data(), n * 4));
    EXPECT_EQ(back, x);
    // Part of a tensor, at an offset.
    float part[3] = {};
    ASSERT_TRUE(c.get(b, 8, part, sizeof(part)));
    EXPECT_EQ(part[0], y[2]);
    EXPECT_EQ(part[2], y[4]);

    ASSERT_TRUE(c.compute(0, {&sum}, {a, b, sum}));
    std::vector<float> got(n);
    ASSERT_TRUE(c.get(sum, 0, got.data(), n * 4));
    for (uint32_t i = 0; i < n; ++i) {
        EXPECT_EQ(got[i], x[i] + y[i]) << i;
    }
    // GRAPH_RECOMPUTE runs the same graph on new inputs.
    for (float & v : x) {
        v *= 2;
    }
    ASSERT_TRUE(c.set(a, 0, x.data(), n * 4));
    gw::DeviceReq d{0};
    ASSERT_TRUE(c.send(gw::Cmd::graph_recompute, &d, sizeof(d)));
    ASSERT_TRUE(c.get(sum, 0, got.data(), n * 4));
    for (uint32_t i = 0; i < n; ++i) {
        EXPECT_EQ(got[i], x[i] + y[i]) << i;
    }
    // COPY_TENSOR, MEMSET_TENSOR, BUFFER_CLEAR.
    gw::CopyTensorReq cp{a, b};
    gw::ResultRsp     copied{};
    ASSERT_TRUE(c.call(gw::Cmd::copy_tensor, &cp, sizeof(cp), &copied, sizeof(copied)));
    EXPECT_EQ(copied.result, 1);
    ASSERT_TRUE(c.get(b, 0, back.data(), n * 4));
    EXPECT_EQ(back, x);
    gw::MemsetTensorReq ms{a, 4, 8, 0xff};
    ASSERT_TRUE(c.send(gw::Cmd::memset_tensor, &ms, sizeof(ms)));
    ASSERT_TRUE(c.get(a, 0, back.data(), n * 4));
    EXPECT_EQ(back[0], x[0]);
    EXPECT_TRUE(std::isnan(back[1]) && std::isnan(back[2]));
    EXPECT_EQ(back[3], x[3]);
    gw::BufferClearReq clr{buf, 0};
    ASSERT_TRUE(c.send(gw::Cmd::buffer_clear, &clr, sizeof(clr)));
    ASSERT_TRUE(c.get(a, 0, back.data(), n * 4));
    EXPECT_EQ(back, std::vector<float>(n, 0.0f));
    // GET_ALLOC_SIZE of a tensor: its bytes on the CPU.
    gw::GetAllocSizeReq as{};
    as.device = 0;
    as.tensor = sum;
    gw::GetAllocSizeRsp size{};
    ASSERT_TRUE(c.call(gw::Cmd::get_alloc_size, &as, sizeof(as), &size, sizeof(size)));
    EXPECT_EQ(size.alloc_size, n * 4u);
}

TEST_F(RpcGgml, AFailedAllocationIsAnAnswerNotAClosedConnection) {
    Client c(server.port());
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.alloc(uint64_t(1) << 62), 0u);
    EXPECT_EQ(c.device_count(), 1u) << "the connection goes on";
}

TEST_F(RpcGgml, GraphNodesThatComputeNothingAreAccepted) {
    Client c(server.port());
    uint64_t       base = 0;
    const uint64_t buf  = c.alloc(1024, &base);
    gw::Tensor     a    = f32(1, buf, base, 4); // an input flagged into the graph (op NONE)
    ASSERT_TRUE(c.compute(0, {&a}, {a}));
    EXPECT_TRUE(c.sync());
}

// Framing.
TEST_F(RpcGgml, UnknownCommandIsRefused) {
    Client c(server.port());
    const uint8_t bad = gw::k_cmd_count;
    ASSERT_TRUE(c.send_raw(&bad, 1));
    expect_refused(c);
}

TEST_F(RpcGgml, FirstRequestMustBeHelloOfItsSize) {
    {
        Client c(server.port(), false);
        EXPECT_TRUE(c.send(gw::Cmd::device_count, nullptr, 0));
        expect_refused(c);
    }
    {
        Client  c(server.port(), false);
        uint8_t short_hello[8] = {};
        EXPECT_TRUE(c.send(gw::Cmd::hello, short_hello, sizeof(short_hello)));
        expect_refused(c);
    }
}

TEST_F(RpcGgml, RequestOfTheWrongSizeIsRefused) {
    Client        c(server.port());
    const uint8_t four[4] = {};
    ASSERT_TRUE(c.send(gw::Cmd::alloc_buffer, four, sizeof(four)));
    expect_refused(c);
}

TEST_F(RpcGgml, HugeAnnouncedSizesAreRefusedBeforeAnyAllocation) {
    for (gw::Cmd cmd : {gw::Cmd::graph_compute, gw::Cmd::set_tensor}) {
        Client         c(server.port());
        const uint8_t  b    = uint8_t(cmd);
        const uint64_t huge = uint64_t(1) << 62;
        ASSERT_TRUE(c.send_raw(&b, 1) && c.send_raw(&huge, 8));
        if (cmd == gw::Cmd::set_tensor) { // a header naming no buffer of this connection
            gw::Tensor t = f32(1, 1, uint64_t(1) << 40, 16);
            uint8_t    rest[9] = {};
            ASSERT_TRUE(c.send_raw(&t, sizeof(t)) && c.send_raw(rest, sizeof(rest)));
        }
        expect_refused(c);
    }
}

// CVE-2024-42477: GET_TENSOR reading past its buffer; and offsets that wrap.
TEST_F(RpcGgml, Cve2024_42477_ReadsOutsideTheBufferAreRefused) {
    for (uint64_t offset : {uint64_t(1000), ~uint64_t(0) - 8}) {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(1024, &base);
        gw::Tensor     t    = f32(1, buf, base + 512, 64);
        gw::GetTensorReq req{t, offset, 64};
        ASSERT_TRUE(c.send(gw::Cmd::get_tensor, &req, sizeof(req)));
        expect_refused(c);
    }
}

// CVE-2024-42479 / CVE-2024-42478: a data address outside the buffer, for a
// write anywhere in the server's memory or a read from anywhere.
TEST_F(RpcGgml, Cve2024_42479_DataAddressesOutsideTheBufferAreRefused) {
    for (int64_t shift : {-int64_t(64), int64_t(4096), int64_t(1) << 36}) {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(1024, &base);
        const float    v[4] = {1, 2, 3, 4};
        ASSERT_TRUE(c.set(f32(1, buf, base + uint64_t(shift), 4), 0, v, sizeof(v)));
        expect_refused(c);
    }
    {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(1024, &base);
        float          v[4] = {};
        gw::GetTensorReq req{f32(1, buf, 0x7f0000000000ull, 4), 0, sizeof(v)};
        ASSERT_TRUE(c.send(gw::Cmd::get_tensor, &req, sizeof(req)));
        expect_refused(c);
    }
}

// A tensor whose extent (ne and nb) runs past its buffer, with the data
// address inside it.
TEST_F(RpcGgml, TensorExtentPastTheBufferIsRefused) {
    Client         c(server.port());
    uint64_t       base = 0;
    const uint64_t buf  = c.alloc(1024, &base);
    gw::Tensor     t    = f32(1, buf, base, 16, 1);
    t.nb[1]             = 1u << 30;
    t.ne[1]             = 4;
    t.nb[2] = t.nb[3] = 1u << 31;
    const float v[4]  = {};
    ASSERT_TRUE(c.set(t, 0, v, sizeof(v)));
    expect_refused(c);
}

// COPY_TENSOR into a smaller destination (a write past its end).
TEST_F(RpcGgml, CopyIntoASmallerTensorIsRefused) {
    Client            c(server.port());
    uint64_t          base = 0;
    const uint64_t    buf  = c.alloc(1024, &base);
    gw::CopyTensorReq req{f32(1, buf, base, 128), f32(2, buf, base + 1000, 4)};
    gw::ResultRsp     r{};
    ASSERT_TRUE(c.send(gw::Cmd::copy_tensor, &req, sizeof(req)));
    (void) r;
    expect_refused(c);
}

TEST_F(RpcGgml, MemsetOutsideTheTensorIsRefused) {
    Client              c(server.port());
    uint64_t            base = 0;
    const uint64_t      buf  = c.alloc(1024, &base);
    gw::MemsetTensorReq req{f32(1, buf, base + 1000, 4), 8, 64, 0x41};
    ASSERT_TRUE(c.send(gw::Cmd::memset_tensor, &req, sizeof(req)));
    expect_refused(c);
}

// Types out of range, and the removed types whose block size is 0 (a
// division by zero in ggml's server).
TEST_F(RpcGgml, InvalidTypesAreRefused) {
    for (uint32_t type : {uint32_t(4), uint32_t(5), uint32_t(GGML_TYPE_COUNT), uint32_t(0xffffffff)}) {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(1024, &base);
        gw::Tensor     t    = f32(1, buf, base, 16);
        t.type              = type;
        const uint8_t v[16] = {};
        ASSERT_TRUE(c.set(t, 0, v, sizeof(v)));
        expect_refused(c);
    }
    Client              c(server.port());
    gw::GetAllocSizeReq req{};
    req.tensor      = f32(1, 0, 0, 16);
    req.tensor.type = 4;
    ASSERT_TRUE(c.send(gw::Cmd::get_alloc_size, &req, sizeof(req)));
    expect_refused(c);
}

TEST_F(RpcGgml, DevicesOutOfRangeAreRefused) {
    for (gw::Cmd cmd : {gw::Cmd::get_alignment, gw::Cmd::get_max_size, gw::Cmd::get_device_memory,
                        gw::Cmd::graph_recompute}) {
        Client        c(server.port());
        gw::DeviceReq d{7};
        ASSERT_TRUE(c.send(cmd, &d, sizeof(d)));
        expect_refused(c);
    }
}

// A buffer handle this connection did not allocate: another client's, or
// a forged one (ggml's server took any address it had handed out).
TEST_F(RpcGgml, AnotherClientsBufferIsOutOfReach) {
    Client         owner(server.port());
    uint64_t       base = 0;
    const uint64_t buf  = owner.alloc(1024, &base);
    const float    secret[4] = {1, 2, 3, 4};
    ASSERT_TRUE(owner.set(f32(1, buf, base, 4), 0, secret, sizeof(secret)));
    ASSERT_TRUE(owner.sync());
    {
        Client           thief(server.port());
        float            v[4] = {};
        gw::GetTensorReq req{f32(1, buf, base, 4), 0, sizeof(v)};
        ASSERT_TRUE(thief.send(gw::Cmd::get_tensor, &req, sizeof(req)));
        EXPECT_TRUE(thief.closed());
    }
    for (gw::Cmd cmd : {gw::Cmd::free_buffer, gw::Cmd::buffer_get_base}) {
        Client        thief(server.port());
        gw::BufferReq req{buf};
        ASSERT_TRUE(thief.send(cmd, &req, sizeof(req)));
        EXPECT_TRUE(thief.closed());
    }
    float v[4] = {};
    ASSERT_TRUE(owner.get(f32(1, buf, base, 4), 0, v, sizeof(v)));
    EXPECT_EQ(std::memcmp(v, secret, sizeof(v)), 0) << "the owner's buffer is untouched";
}

// A buffer never shows what a client before held in the same memory.
TEST_F(RpcGgml, NewBuffersStartCleared) {
    const size_t n = 1 << 20;
    {
        Client               a(server.port());
        uint64_t             base = 0;
        const uint64_t       buf  = a.alloc(n, &base);
        std::vector<uint8_t> secret(n, 0x5a);
        gw::Tensor           t = f32(1, buf, base, uint32_t(n / 4));
        ASSERT_TRUE(a.set(t, 0, secret.data(), n));
        gw::BufferReq f{buf};
        ASSERT_TRUE(a.send(gw::Cmd::free_buffer, &f, sizeof(f)));
        ASSERT_TRUE(a.sync());
    }
    Client               b(server.port());
    uint64_t             base = 0;
    const uint64_t       buf  = b.alloc(n, &base);
    std::vector<uint8_t> got(n, 1);
    ASSERT_TRUE(b.get(f32(1, buf, base, uint32_t(n / 4)), 0, got.data(), n));
    EXPECT_EQ(got, std::vector<uint8_t>(n, 0));
}

// GRAPH_RECOMPUTE after FREE_BUFFER: the graph pointed into freed memory.
TEST_F(RpcGgml, FreeingABufferForgetsTheGraphsInIt) {
    Client         c(server.port());
    uint64_t       base = 0;
    const uint64_t buf  = c.alloc(1024, &base);
    gw::Tensor     a = f32(1, buf, base, 4), r = f32(2, buf, base + 64, 4);
    r.op             = GGML_OP_SCALE;
    r.flags          = GGML_TENSOR_FLAG_COMPUTE;
    r.src[0]         = a.id;
    float s          = 2.0f;
    std::memcpy(&r.op_params[0], &s, 4);
    ASSERT_TRUE(c.compute(0, {&r}, {a, r}));
    ASSERT_TRUE(c.sync());
    gw::BufferReq f{buf};
    ASSERT_TRUE(c.send(gw::Cmd::free_buffer, &f, sizeof(f)));
    gw::DeviceReq d{0};
    ASSERT_TRUE(c.send(gw::Cmd::graph_recompute, &d, sizeof(d)));
    expect_refused(c);
}

// Graphs: ids that are 0, missing, repeated, or that make cycles (ggml's
// server recursed on them); node counts that disagree with the size.
TEST_F(RpcGgml, MalformedGraphsAreRefused) {
    auto attempt = [this](auto && make) {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(4096, &base);
        gw::Tensor     a = f32(1, buf, base, 4), b = f32(2, buf, base + 64, 4), r = f32(3, buf, base + 128, 4);
        r.op             = GGML_OP_ADD;
        r.flags          = GGML_TENSOR_FLAG_COMPUTE;
        r.src[0]         = a.id;
        r.src[1]         = b.id;
        make(c, a, b, r);
        expect_refused(c);
    };
    attempt([](Client & c, gw::Tensor & a, gw::Tensor &, gw::Tensor & r) { // a source not sent
        ASSERT_TRUE(c.compute(0, {&r}, {a, r}));
    });
    attempt([](Client & c, gw::Tensor & a, gw::Tensor & b, gw::Tensor & r) { // node id 0
        gw::Tensor zero = r;
        zero.id         = 0;
        ASSERT_TRUE(c.compute(0, {&zero}, {a, b, r}));
    });
    attempt([](Client & c, gw::Tensor & a, gw::Tensor & b, gw::Tensor & r) { // an id twice
        b.id = a.id;
        ASSERT_TRUE(c.compute(0, {&r}, {a, b, r}));
    });
    attempt([](Client & c, gw::Tensor & a, gw::Tensor & b, gw::Tensor & r) { // a cycle
        a.op     = GGML_OP_ADD;
        a.flags  = GGML_TENSOR_FLAG_COMPUTE;
        a.src[0] = r.id;
        a.src[1] = b.id;
        ASSERT_TRUE(c.compute(0, {&a, &r}, {b, a, r}));
    });
    attempt([](Client & c, gw::Tensor & a, gw::Tensor & b, gw::Tensor & r) { // its own source
        r.src[1] = r.id;
        ASSERT_TRUE(c.compute(0, {&r}, {a, b, r}));
    });
    attempt([](Client & c, gw::Tensor & a, gw::Tensor & b, gw::Tensor & r) { // counts and size disagree
        std::vector<uint8_t> m(12 + 8 + 3 * sizeof(gw::Tensor));
        const uint32_t       dev = 0, nn = 1, nt = 9;
        std::memcpy(m.data(), &dev, 4);
        std::memcpy(m.data() + 4, &nn, 4);
        std::memcpy(m.data() + 8, &r.id, 8);
        std::memcpy(m.data() + 16, &nt, 4);
        std::memcpy(m.data() + 20, &a, sizeof(a));
        std::memcpy(m.data() + 20 + sizeof(a), &b, sizeof(b));
        std::memcpy(m.data() + 20 + 2 * sizeof(a), &r, sizeof(r));
        ASSERT_TRUE(c.send(gw::Cmd::graph_compute, m.data(), m.size()));
    });
    attempt([](Client & c, gw::Tensor & a, gw::Tensor & b, gw::Tensor & r) { // no nodes
        (void) r;
        ASSERT_TRUE(c.compute(0, {}, {a, b}));
    });
}

// Operators a server must not run for a client: custom ones (a function
// pointer from the wire), and ops out of range.
TEST_F(RpcGgml, CustomAndUnknownOperatorsAreRefused) {
    for (uint32_t op : {uint32_t(GGML_OP_MAP_CUSTOM1), uint32_t(GGML_OP_CUSTOM), uint32_t(GGML_OP_COUNT)}) {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(1024, &base);
        gw::Tensor     a = f32(1, buf, base, 4), r = f32(2, buf, base + 64, 4);
        r.op             = op;
        r.flags          = GGML_TENSOR_FLAG_COMPUTE;
        r.src[0]         = a.id;
        const uint64_t fn = 0x4141414141414141ull; // a "function pointer"
        std::memcpy(r.op_params, &fn, sizeof(fn));
        ASSERT_TRUE(c.compute(0, {&r}, {a, r}));
        expect_refused(c);
    }
}

// Indices out of range in GET_ROWS stop the computation before it reads.
TEST_F(RpcGgml, BadIndicesStopTheComputation) {
    for (int32_t bad : {4, -1, 1 << 30}) {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(4096, &base);
        gw::Tensor     rows = f32(1, buf, base, 8, 4);
        gw::Tensor     idx{};
        idx.id    = 2;
        idx.type  = GGML_TYPE_I32;
        idx.buffer = buf;
        idx.data  = base + 256;
        idx.ne[0] = 2;
        idx.ne[1] = idx.ne[2] = idx.ne[3] = 1;
        idx.nb[0] = 4;
        idx.nb[1] = idx.nb[2] = idx.nb[3] = 8;
        gw::Tensor out = f32(3, buf, base + 512, 8, 2);
        out.op         = GGML_OP_GET_ROWS;
        out.flags      = GGML_TENSOR_FLAG_COMPUTE;
        out.src[0]     = rows.id;
        out.src[1]     = idx.id;
        const int32_t ids[2] = {1, bad};
        ASSERT_TRUE(c.set(idx, 0, ids, sizeof(ids)));
        ASSERT_TRUE(c.compute(0, {&out}, {rows, idx, out}));
        expect_refused(c);
    }
}

// A client that vanishes mid-message frees its session.
TEST_F(RpcGgml, AClientThatLeavesMidMessageLosesItsSession) {
    {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(1 << 20, &base);
        ASSERT_NE(buf, 0u);
        const uint8_t  b    = uint8_t(gw::Cmd::set_tensor);
        const uint64_t size = gw::k_set_tensor_header + 4096;
        gw::Tensor     t    = f32(1, buf, base, 1024);
        ASSERT_TRUE(c.send_raw(&b, 1) && c.send_raw(&size, 8) && c.send_raw(&t, sizeof(t)));
    }
    // (the session leaves the server's table, then its buffers are freed)
    for (int i = 0; i < 200 && (loom_rpc_server_session_count(server.get()) != 0 ||
                                loom_rpc_server_buffer_bytes(server.get()) != 0);
         ++i) {
        usleep(10000);
    }
    EXPECT_EQ(loom_rpc_server_session_count(server.get()), 0u);
    EXPECT_EQ(loom_rpc_server_buffer_bytes(server.get()), 0u);
    expect_healthy();
}

// Many clients at once, each with its own buffers and graphs.
TEST_F(RpcGgml, ClientsRunInParallel) {
    constexpr int            k_clients = 4;
    std::vector<std::thread> threads;
    std::atomic<int>         good{0};
    for (int k = 0; k < k_clients; ++k) {
        threads.emplace_back([&, k] {
            Client         c(server.port());
            uint64_t       base = 0;
            const uint64_t buf  = c.alloc(1024, &base);
            gw::Tensor     a = f32(1, buf, base, 16), r = f32(2, buf, base + 128, 16);
            r.op             = GGML_OP_SCALE;
            r.flags          = GGML_TENSOR_FLAG_COMPUTE;
            r.src[0]         = a.id;
            const float s    = float(k + 1);
            std::memcpy(&r.op_params[0], &s, 4);
            std::vector<float> x(16, 1.5f), y(16);
            bool               all = c.set(a, 0, x.data(), 64);
            for (int round = 0; round < 20 && all; ++round) {
                all = c.compute(0, {&r}, {a, r}) && c.get(r, 0, y.data(), 64) && y == std::vector<float>(16, 1.5f * s);
            }
            good += all ? 1 : 0;
        });
    }
    for (auto & t : threads) {
        t.join();
    }
    EXPECT_EQ(good.load(), k_clients);
}

// ggml's file cache: an upload flagged for it is kept under its FNV-1a;
// SET_TENSOR_HASH then finds it (for another client too), and a file whose
// bytes were changed on disk is not used.
TEST(RpcGgmlCache, UploadsAreFoundByHash) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("loom-ggml-cache-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    Server             server(dir.c_str());
    std::vector<float> w(4096);
    for (size_t i = 0; i < w.size(); ++i) {
        w[i] = float(i) * 0.25f;
    }
    const uint64_t hash = gw::fnv1a(w.data(), w.size() * 4);
    {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(w.size() * 4, &base);
        gw::SetTensorHashReq req{f32(1, buf, base, uint32_t(w.size())), 0, hash};
        gw::ResultRsp        r{};
        ASSERT_TRUE(c.call(gw::Cmd::set_tensor_hash, &req, sizeof(req), &r, sizeof(r)));
        EXPECT_EQ(r.result, 0) << "not yet in the cache";
        ASSERT_TRUE(c.set(req.tensor, 0, w.data(), w.size() * 4, 1));
        ASSERT_TRUE(c.sync());
    }
    char name[17];
    std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(hash));
    ASSERT_TRUE(std::filesystem::exists(dir / name));
    EXPECT_EQ(std::filesystem::file_size(dir / name), w.size() * 4);
    {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(w.size() * 4, &base);
        gw::SetTensorHashReq req{f32(1, buf, base, uint32_t(w.size())), 0, hash};
        gw::ResultRsp        r{};
        ASSERT_TRUE(c.call(gw::Cmd::set_tensor_hash, &req, sizeof(req), &r, sizeof(r)));
        EXPECT_EQ(r.result, 1);
        std::vector<float> got(w.size());
        ASSERT_TRUE(c.get(req.tensor, 0, got.data(), got.size() * 4));
        EXPECT_EQ(got, w);
    }
    {
        std::fstream f(dir / name, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(100);
        f.put('\x7f');
    }
    {
        Client         c(server.port());
        uint64_t       base = 0;
        const uint64_t buf  = c.alloc(w.size() * 4, &base);
        gw::SetTensorHashReq req{f32(1, buf, base, uint32_t(w.size())), 0, hash};
        gw::ResultRsp        r{};
        ASSERT_TRUE(c.call(gw::Cmd::set_tensor_hash, &req, sizeof(req), &r, sizeof(r)));
        EXPECT_EQ(r.result, 0) << "a changed file is not the content of its name";
    }
    std::filesystem::remove_all(dir);
}

// loom's own client on a server of ggml's protocol: ggml_backend_rpc_add_server
// finds the protocol, and graphs computed there match a naive product.
TEST(RpcGgmlClient, LoomComputesOnAServerOfGgmlsProtocol) {
    Server            server;
    const std::string endpoint = "127.0.0.1:" + std::to_string(server.port());
    ggml_backend_reg_t reg     = ggml_backend_rpc_add_server(endpoint.c_str());
    ASSERT_NE(reg, nullptr);
    ASSERT_EQ(ggml_backend_reg_dev_count(reg), 1u);
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
    EXPECT_EQ(std::string(ggml_backend_dev_name(dev)), "RPC[" + endpoint + "]ggml0");
    ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
    ASSERT_NE(backend, nullptr);

    constexpr int       K = 67, M = 5, N = 3;
    ggml_init_params    ip{16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context *      ctx = ggml_init(ip);
    ggml_tensor *       a   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
    ggml_tensor *       b   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    ggml_tensor *       c   = ggml_scale(ctx, ggml_mul_mat(ctx, a, b), 0.5f);
    ggml_tensor *       a2  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
    ggml_cgraph *       gf  = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, c);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    ASSERT_NE(buf, nullptr);
    std::mt19937                          rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float>                    x(K * M), y(K * N), got(M * N);
    auto check = [&](const char * what) {
        ggml_backend_tensor_get(c, got.data(), 0, got.size() * 4);
        for (int n = 0; n < N; ++n) {
            for (int m = 0; m < M; ++m) {
                double want = 0;
                for (int k = 0; k < K; ++k) {
                    want += double(x[m * K + k]) * double(y[n * K + k]);
                }
                EXPECT_NEAR(got[n * M + m], 0.5 * want, 1e-4) << what << " " << m << "," << n;
            }
        }
    };
    for (float & v : x) v = u(rng);
    for (float & v : y) v = u(rng);
    ggml_backend_tensor_set(a, x.data(), 0, x.size() * 4);
    ggml_backend_tensor_set(b, y.data(), 0, y.size() * 4);
    ASSERT_EQ(ggml_backend_graph_compute(backend, gf), GGML_STATUS_SUCCESS);
    check("first");
    // The same graph again (sent as GRAPH_RECOMPUTE) on new inputs.
    for (float & v : x) v = u(rng);
    ggml_backend_tensor_set(a, x.data(), 0, x.size() * 4);
    ASSERT_EQ(ggml_backend_graph_compute(backend, gf), GGML_STATUS_SUCCESS);
    check("recomputed");
    // A copy on the server, and clearing the buffer.
    ggml_backend_tensor_copy(a, a2);
    std::vector<float> back(x.size());
    ggml_backend_tensor_get(a2, back.data(), 0, back.size() * 4);
    EXPECT_EQ(back, x);
    ggml_backend_buffer_clear(buf, 0);
    ggml_backend_tensor_get(a2, back.data(), 0, back.size() * 4);
    EXPECT_EQ(back, std::vector<float>(x.size(), 0.0f));
    EXPECT_EQ(loom_rpc_server_session_count(server.get()), 1u);

    ggml_backend_buffer_free(buf);
    ggml_backend_free(backend);
    ggml_free(ctx);
}

// A graph the server refuses closes the connection: the computation
// reports the failure, later ones fail too, and the process lives on.
TEST(RpcGgmlClient, ARefusedGraphFailsTheComputationsAfterIt) {
    Server            server;
    const std::string endpoint = "127.0.0.1:" + std::to_string(server.port());
    ggml_backend_reg_t reg     = ggml_backend_rpc_add_server(endpoint.c_str());
    ASSERT_NE(reg, nullptr);
    ggml_backend_t backend = ggml_backend_dev_init(ggml_backend_reg_dev_get(reg, 0), nullptr);
    ggml_init_params ip{8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    ggml_context *   ctx  = ggml_init(ip);
    ggml_tensor *    rows = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 4);
    ggml_tensor *    ids  = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2);
    ggml_tensor *    out  = ggml_get_rows(ctx, rows, ids);
    ggml_cgraph *    gf   = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    ASSERT_NE(buf, nullptr);
    const int32_t bad[2] = {0, 9};
    ggml_backend_tensor_set(ids, bad, 0, sizeof(bad));
    const ggml_status first = ggml_backend_graph_compute(backend, gf);
    ggml_backend_synchronize(backend);
    const ggml_status second = ggml_backend_graph_compute(backend, gf);
    EXPECT_TRUE(first == GGML_STATUS_FAILED || second == GGML_STATUS_FAILED);
    EXPECT_EQ(second, GGML_STATUS_FAILED);
    ggml_backend_buffer_free(buf);
    ggml_backend_free(backend);
    ggml_free(ctx);
    for (int i = 0; i < 200 && loom_rpc_server_session_count(server.get()) != 0; ++i) {
        usleep(10000);
    }
    EXPECT_EQ(loom_rpc_server_session_count(server.get()), 0u) << "the server closed the session";
}

} // namespace
