// 2D transfers and init_tensor on remote devices (servers started in the
// process on loopback): strided sets and gets through the backend equal to
// the same transfers on the local CPU, on a device in host memory and on
// one that is not (TestDev0 of the test plugin); init_tensor run by the
// server's device; and the raw frames and calls of both, with numbers a
// client may lie about, refused with a reason while another session's
// bytes stay as they were.

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/rpc/bulk.h"
#include "backend_test_helpers.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "ggml-rpc.h"
#include "rpc_bulk_test_util.h"
#include "rpc_test_util.h"

using namespace loomtest::rpc;
namespace bulk = loom::rpc::bulk;
using loom::rpc::TensorDesc;
using loom::rpc::Transfer2d;

namespace {

// TestDev0 of the test plugin: buffers that are not host memory, tensors
// padded to 256 bytes, an init_tensor that zeroes the padding.
ggml_backend_reg_t test_reg() {
    static ggml_backend_reg_t reg = ggml_backend_load(LOOM_TESTDEV_PATH);
    return reg;
}
ggml_backend_dev_t test_device() {
    return test_reg() != nullptr ? ggml_backend_dev_by_name("TestDev0") : nullptr;
}
size_t test_inits() {
    auto count = reinterpret_cast<size_t (*)(void)>(ggml_backend_reg_get_proc_address(test_reg(), "loom_testdev_init_tensors"));
    return count != nullptr ? count() : 0;
}

// A server exposing the CPU (device 0) and TestDev0 (device 1).
class TwoDeviceServer {
  public:
    TwoDeviceServer() {
        devs_ = {ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU), test_device()};
        if (devs_[1] == nullptr) {
            return;
        }
        loom_rpc_server_params p{};
        p.endpoint  = "127.0.0.1:0";
        p.token     = kToken;
        p.n_threads = 2;
        p.n_devices = devs_.size();
        p.devices   = devs_.data();
        server_     = loom_rpc_server_start(&p);
        if (server_ != nullptr) {
            endpoint_ = "127.0.0.1:" + std::to_string(loom_rpc_server_port(server_));
        }
    }
    ~TwoDeviceServer() { loom_rpc_server_stop(server_); }
    TwoDeviceServer(const TwoDeviceServer &)             = delete;
    TwoDeviceServer & operator=(const TwoDeviceServer &) = delete;

    bool                running() const { return server_ != nullptr; }
    const std::string & endpoint() const { return endpoint_; }
    loom_rpc_server_t   get() const { return server_; }

  private:
    std::vector<ggml_backend_dev_t> devs_;
    loom_rpc_server_t               server_ = nullptr;
    std::string                     endpoint_;
};

class Rpc2d : public ::testing::Test {
  protected:
    void SetUp() override {
        loom_rpc_set_token(kToken);
        loom_rpc_set_timeouts(10000, 20000);
    }
};

ggml_context_ptr context(size_t n = 16) {
    ggml_init_params p{};
    p.mem_size = n * ggml_tensor_overhead();
    p.no_alloc = true;
    return ggml_context_ptr(ggml_init(p));
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

// A tensor of n bytes on a remote device and its twin on the local CPU.
struct Twins {
    ggml_context_ptr        ctx;
    ggml_tensor *           remote = nullptr;
    ggml_tensor *           local  = nullptr;
    ggml_backend_buffer_ptr remote_buf, local_buf;
};

Twins twins(ggml_backend_t remote, ggml_backend_t local, size_t n) {
    Twins t;
    t.ctx    = context();
    t.remote = ggml_new_tensor_1d(t.ctx.get(), GGML_TYPE_I8, int64_t(n));
    t.remote_buf.reset(ggml_backend_alloc_buffer(remote, ggml_backend_buft_get_alloc_size(
                                                             ggml_backend_get_default_buffer_type(remote), t.remote)));
    t.local_buf.reset(ggml_backend_alloc_buffer(local, n));
    if (!t.remote_buf || !t.local_buf) {
        return t;
    }
    t.local = ggml_new_tensor_1d(t.ctx.get(), GGML_TYPE_I8, int64_t(n));
    EXPECT_EQ(ggml_backend_tensor_alloc(t.remote_buf.get(), t.remote, ggml_backend_buffer_get_base(t.remote_buf.get())),
              GGML_STATUS_SUCCESS);
    EXPECT_EQ(ggml_backend_tensor_alloc(t.local_buf.get(), t.local, ggml_backend_buffer_get_base(t.local_buf.get())),
              GGML_STATUS_SUCCESS);
    const std::vector<uint8_t> start = pattern(n, 99);
    ggml_backend_tensor_set(t.remote, start.data(), 0, n);
    ggml_backend_tensor_set(t.local, start.data(), 0, n);
    return t;
}

std::vector<uint8_t> contents(const ggml_tensor * t) {
    std::vector<uint8_t> v(ggml_nbytes(t));
    ggml_backend_tensor_get(t, v.data(), 0, v.size());
    return v;
}

struct Shape2d {
    const char * what;
    size_t       tensor_bytes, offset, block, count, stride_tensor, stride_data;
};

// Small blocks that cross the client's 1 MiB gathering and the server's
// 4 MiB staging, blocks at the 64 KiB line where both sides stop gathering
// and move them directly, overlapping blocks, a stride of 0, a packed copy.
const Shape2d kShapes[] = {
    {"columns of a matrix", 37 * 23 * 4, 3 * 4, 5 * 4, 23, 37 * 4, 7 * 4},
    {"many small blocks", size_t(11) << 20, 1, 3, (size_t(9) << 20) / 5, 5, 4},
    {"blocks just under 64 KiB", size_t(5) << 20, 17, (64 << 10) - 1, 40, 100000, 70000},
    {"blocks of 64 KiB and more", size_t(9) << 20, 5, (64 << 10) + 3, 60, 150001, (64 << 10) + 3},
    {"overlapping blocks", 4096, 8, 64, 50, 32, 64},
    {"one place again and again", 4096, 100, 12, 9, 0, 12},
    {"packed", size_t(6) << 20, 0, 4096, 1536, 4096, 4096},
};

// A strided set and get through the RPC backend, synchronous and in the
// backend's stream, give what the same calls give on the local CPU: the
// tensor's bytes after the set and the caller's bytes after the get.
TEST_F(Rpc2d, StridedSetAndGetEqualTheLocalCpu) {
    TwoDeviceServer server;
    ASSERT_TRUE(server.running()) << "cannot load " << LOOM_TESTDEV_PATH;
    ggml_backend_ptr local(ggml_backend_cpu_init());
    for (uint32_t d = 0; d < 2; ++d) {
        ggml_backend_ptr remote(ggml_backend_rpc_init(server.endpoint().c_str(), d));
        ASSERT_NE(remote, nullptr);
        for (const Shape2d & s : kShapes) {
            for (bool async : {false, true}) {
                SCOPED_TRACE(std::string(s.what) + (d == 0 ? " on the CPU" : " on TestDev0") +
                             (async ? ", async" : ""));
                Twins t = twins(remote.get(), local.get(), s.tensor_bytes);
                ASSERT_NE(t.local, nullptr);
                const size_t               data_bytes = (s.count - 1) * s.stride_data + s.block;
                const std::vector<uint8_t> in         = pattern(data_bytes, uint32_t(s.count));
                std::vector<uint8_t>       out_remote(data_bytes, 0x5a), out_local(data_bytes, 0x5a);
                if (async) {
                    ggml_backend_tensor_set_2d_async(remote.get(), t.remote, in.data(), s.offset, s.block, s.count,
                                                     s.stride_tensor, s.stride_data);
                    ggml_backend_tensor_set_2d_async(local.get(), t.local, in.data(), s.offset, s.block, s.count,
                                                     s.stride_tensor, s.stride_data);
                    // The get reads other places than the set wrote: the tensor's own start.
                    ggml_backend_tensor_get_2d_async(remote.get(), t.remote, out_remote.data(), 0, s.block, s.count,
                                                     s.stride_tensor, s.stride_data);
                    ggml_backend_tensor_get_2d_async(local.get(), t.local, out_local.data(), 0, s.block, s.count,
                                                     s.stride_tensor, s.stride_data);
                    ggml_backend_synchronize(remote.get());
                    ggml_backend_synchronize(local.get());
                } else {
                    ggml_backend_tensor_set_2d(t.remote, in.data(), s.offset, s.block, s.count, s.stride_tensor,
                                               s.stride_data);
                    ggml_backend_tensor_set_2d(t.local, in.data(), s.offset, s.block, s.count, s.stride_tensor,
                                               s.stride_data);
                    ggml_backend_tensor_get_2d(t.remote, out_remote.data(), 0, s.block, s.count, s.stride_tensor,
                                               s.stride_data);
                    ggml_backend_tensor_get_2d(t.local, out_local.data(), 0, s.block, s.count, s.stride_tensor,
                                               s.stride_data);
                }
                EXPECT_TRUE(contents(t.remote) == contents(t.local));
                EXPECT_TRUE(out_remote == out_local);
            }
        }
    }
}

// No blocks (a count or a size of 0) change nothing; one block is a plain
// set and get.
TEST_F(Rpc2d, ZeroBlocksAndOneBlock) {
    TwoDeviceServer server;
    ASSERT_TRUE(server.running()) << "cannot load " << LOOM_TESTDEV_PATH;
    ggml_backend_ptr local(ggml_backend_cpu_init());
    for (uint32_t d = 0; d < 2; ++d) {
        SCOPED_TRACE(d);
        ggml_backend_ptr remote(ggml_backend_rpc_init(server.endpoint().c_str(), d));
        ASSERT_NE(remote, nullptr);
        Twins t = twins(remote.get(), local.get(), 1000);
        ASSERT_NE(t.local, nullptr);
        const std::vector<uint8_t> before = contents(t.remote);
        const std::vector<uint8_t> in     = pattern(1000, 3);
        std::vector<uint8_t>       out(1000, 0x77);
        ggml_backend_tensor_set_2d(t.remote, in.data(), 0, 10, 0, 20, 10);
        ggml_backend_tensor_set_2d(t.remote, in.data(), 0, 0, 30, 20, 10);
        ggml_backend_tensor_set_2d_async(remote.get(), t.remote, in.data(), 0, 10, 0, 20, 10);
        ggml_backend_tensor_get_2d(t.remote, out.data(), 0, 10, 0, 20, 10);
        ggml_backend_tensor_get_2d_async(remote.get(), t.remote, out.data(), 0, 0, 5, 20, 10);
        ggml_backend_synchronize(remote.get());
        EXPECT_TRUE(contents(t.remote) == before);
        EXPECT_TRUE(out == std::vector<uint8_t>(1000, 0x77));

        ggml_backend_tensor_set_2d(t.remote, in.data(), 990, 10, 1, 1u << 30, 1u << 30);
        ggml_backend_tensor_set_2d(t.local, in.data(), 990, 10, 1, 1u << 30, 1u << 30);
        EXPECT_TRUE(contents(t.remote) == contents(t.local));
        ggml_backend_tensor_get_2d(t.remote, out.data(), 985, 15, 1, 1u << 30, 1u << 30);
        const std::vector<uint8_t> all = contents(t.local);
        EXPECT_EQ(std::memcmp(out.data(), all.data() + 985, 15), 0);
    }
}

} // namespace

// ---- raw frames ------------------------------------------------------------------

namespace {

constexpr uint64_t kBuf = 4096;

const std::string kCanary = [] {
    std::string s;
    while (s.size() < kBuf) {
        s += "CANARY!\x7f";
    }
    s.resize(kBuf);
    return s;
}();

TensorDesc bytes_desc(uint64_t buffer, uint64_t offset, int64_t n) {
    TensorDesc d;
    d.set_buffer(buffer);
    d.set_offset(offset);
    d.set_type(uint32_t(GGML_TYPE_I8));
    const int64_t ne[4] = {n, 1, 1, 1};
    for (int i = 0; i < 4; ++i) {
        d.add_ne(ne[i]);
        d.add_nb(uint64_t(i == 0 ? 1 : n));
    }
    return d;
}

Transfer2d transfer(const TensorDesc & d, uint64_t offset, uint64_t block, uint64_t count, uint64_t stride) {
    Transfer2d t;
    *t.mutable_tensor() = d;
    t.set_offset(offset);
    t.set_block(block);
    t.set_count(count);
    t.set_stride(stride);
    return t;
}

uint64_t alloc_on(RawClient & c, uint32_t device, uint64_t size) {
    loom::rpc::AllocBufferRequest req;
    req.set_device(device);
    req.set_size(size);
    loom::rpc::AllocBufferReply rep;
    return c.stub().AllocBuffer(c.ctx().get(), req, &rep).ok() ? rep.buffer() : 0;
}

grpc::Status grpc_set(RawClient & c, uint64_t h, const std::string & data) {
    loom::rpc::SetTensorRequest req;
    *req.mutable_tensor() = bytes_desc(h, 0, int64_t(data.size()));
    req.set_data(data);
    loom::rpc::Empty e;
    return c.stub().SetTensor(c.ctx().get(), req, &e);
}

std::string grpc_get(RawClient & c, uint64_t h, uint64_t n) {
    loom::rpc::GetTensorRequest req;
    *req.mutable_tensor() = bytes_desc(h, 0, int64_t(n));
    req.set_size(n);
    loom::rpc::GetTensorReply rep;
    const grpc::Status        st = c.stub().GetTensor(c.ctx().get(), req, &rep);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return rep.data();
}

std::unique_ptr<RawBulk> bind_bulk(RawClient & c) {
    auto b = std::make_unique<RawBulk>(c.bulk_port());
    EXPECT_TRUE(b->ok() && b->hello(c.bulk_ticket()));
    EXPECT_EQ(b->reply().first, 0);
    return b;
}

// A victim session holding canary bytes in a buffer on each device, and an
// attacker session with a buffer of zeros on each; after each test the
// canaries are intact, none came back to the attacker, and a new session
// moves 2D blocks correctly.
class Rpc2dAttacks : public Rpc2d {
  protected:
    void SetUp() override {
        Rpc2d::SetUp();
        ASSERT_TRUE(server.running()) << "cannot load " << LOOM_TESTDEV_PATH;
        victim   = std::make_unique<RawClient>(server.endpoint());
        attacker = std::make_unique<RawClient>(server.endpoint());
        ASSERT_TRUE(victim->connect().ok() && attacker->connect().ok());
        for (uint32_t d = 0; d < 2; ++d) {
            hv[d] = alloc_on(*victim, d, kBuf);
            ha[d] = alloc_on(*attacker, d, kBuf);
            ASSERT_TRUE(hv[d] != 0 && ha[d] != 0);
            ASSERT_TRUE(grpc_set(*victim, hv[d], kCanary).ok());
        }
    }

    void TearDown() override {
        if (HasFatalFailure()) {
            return;
        }
        for (uint32_t d = 0; d < 2; ++d) {
            EXPECT_EQ(grpc_get(*victim, hv[d], kBuf), kCanary) << "the victim's buffer on device " << d << " changed";
        }
        EXPECT_EQ(seen.find("CANARY"), std::string::npos) << "canary bytes came back to the attacker";
        expect_2d_round_trip();
    }

    // A refused frame's reply, recorded with any bytes that follow it.
    std::pair<int, std::string> reply(RawBulk & b) {
        uint64_t size = 0;
        auto     r    = b.reply(&size);
        std::string payload(size_t(std::min<uint64_t>(size, 4 * kBuf)), '\0');
        if (r.first >= 0 && !b.read(payload.data(), payload.size())) {
            payload.clear();
        }
        seen += r.second + payload;
        return r;
    }

    // A new session writes every other 16-byte block and reads them back
    // through the raw frames, on both devices.
    void expect_2d_round_trip() {
        RawClient c(server.endpoint());
        ASSERT_TRUE(c.connect().ok());
        auto b = bind_bulk(c);
        for (uint32_t d = 0; d < 2; ++d) {
            const uint64_t h = alloc_on(c, d, kBuf);
            ASSERT_NE(h, 0u);
            const Transfer2d  t    = transfer(bytes_desc(h, 0, int64_t(kBuf)), 16, 16, 64, 32);
            const std::string data = std::string(512, 'a') + std::string(512, 'b');
            b->frame(bulk::Op::set_2d, t.SerializeAsString(), 0, data.size());
            ASSERT_TRUE(b->write(data.data(), data.size()));
            ASSERT_EQ(b->reply().first, 0);
            b->frame(bulk::Op::get_2d, t.SerializeAsString(), 0, data.size());
            uint64_t size = 0;
            ASSERT_EQ(b->reply(&size).first, 0);
            ASSERT_EQ(size, data.size());
            std::string got(data.size(), '\0');
            ASSERT_TRUE(b->read(got.data(), got.size()));
            EXPECT_EQ(got, data);
            const std::string all = grpc_get(c, h, kBuf);
            for (size_t i = 0; i < 64; ++i) {
                EXPECT_EQ(all.substr(i * 32 + 16, 16), data.substr(i * 16, 16)) << i;
                EXPECT_EQ(all.substr(i * 32, 16), std::string(16, '\0')) << i;
            }
        }
    }

    TwoDeviceServer            server;
    std::unique_ptr<RawClient> victim, attacker;
    uint64_t                   hv[2] = {}, ha[2] = {};
    std::string                seen;
};

struct BadTransfer {
    const char * what;
    Transfer2d   t;
    uint64_t     announced; // the frame's size
    const char * reason;
};

// Transfers in buffer h (kBuf bytes, the tensor covering all of it or its
// last 64 bytes) that reach outside the tensor, wrap around 2^64, or whose
// frame announces another size than its blocks.
std::vector<BadTransfer> bad_transfers(uint64_t h) {
    const TensorDesc all  = bytes_desc(h, 0, int64_t(kBuf));
    const TensorDesc tail = bytes_desc(h, kBuf - 64, 64);
    const uint64_t   max  = UINT64_MAX;
    std::vector<BadTransfer> v = {
        {"the last block past the buffer", transfer(all, 0, 16, 2, kBuf - 8), 32, "outside the tensor's 4096 bytes"},
        {"blocks past a tensor, inside the buffer", transfer(tail, 0, 16, 5, 16), 80, "outside the tensor's 64 bytes"},
        {"an offset past the tensor", transfer(tail, 64, 1, 1, 0), 1, "outside the tensor's 64 bytes"},
        {"an offset that wraps", transfer(all, max - 3, 8, 1, 0), 8, "outside the tensor"},
        {"a stride that wraps to a small offset", transfer(all, 32, 16, 2, max - 15), 32, "past 2^64"},
        {"a stride of 2^63 three times", transfer(all, 0, 16, 3, uint64_t(1) << 63), 48, "past 2^64"},
        {"count times stride exactly 2^64", transfer(all, 0, 1, (uint64_t(1) << 32) + 1, uint64_t(1) << 32),
         (uint64_t(1) << 32) + 1, "past 2^64"},
        {"count times block past 2^64", transfer(all, 0, uint64_t(1) << 32, (uint64_t(1) << 32) + 1, 0), 0,
         "more than 2^64 bytes"},
        {"a count that says more than the frame", transfer(all, 0, 16, 8, 16), 64, "announces 64 bytes for 8 blocks"},
        {"a count that says less than the frame", transfer(all, 0, 16, 2, 16), 4096, "announces 4096 bytes"},
        {"a block larger than the tensor", transfer(tail, 0, 65, 1, 0), 65, "outside the tensor's 64 bytes"},
        {"another session's buffer", transfer(bytes_desc(h + 1000, 0, 16), 0, 16, 1, 0), 16, "unknown buffer"},
    };
    return v;
}

// Get frames: each refused with its reason on the same connection, which
// then still serves.
TEST_F(Rpc2dAttacks, GetBlocksOutsideTheirTensorOrWrapping) {
    auto b = bind_bulk(*attacker);
    for (uint32_t d = 0; d < 2; ++d) {
        for (const BadTransfer & c : bad_transfers(ha[d])) {
            SCOPED_TRACE(std::string(c.what) + " on device " + std::to_string(d));
            b->frame(bulk::Op::get_2d, c.t.SerializeAsString(), 0, c.announced);
            const auto r = reply(*b);
            EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT)) << r.second;
            EXPECT_NE(r.second.find("GetTensor2d: "), std::string::npos) << r.second;
            EXPECT_NE(r.second.find(c.reason), std::string::npos) << r.second;
        }
    }
    b->frame(bulk::Op::get_2d, transfer(bytes_desc(ha[0], 0, 16), 0, 16, 1, 0).SerializeAsString(), 8, 16);
    const auto r = reply(*b);
    EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
    EXPECT_NE(r.second.find("malformed"), std::string::npos) << r.second;
    b->frame(bulk::Op::get_2d, transfer(bytes_desc(ha[1], 0, int64_t(kBuf)), 0, 16, 4, 1024).SerializeAsString(), 0,
             64);
    uint64_t size = 0;
    ASSERT_EQ(b->reply(&size).first, 0);
    std::string zeros(size_t(size), 'x');
    ASSERT_TRUE(b->read(zeros.data(), zeros.size()));
    EXPECT_EQ(zeros, std::string(64, '\0'));
}

// Set frames (no bytes after them): each refused with its reason before a
// byte would be read, which
// ends the connection (what follows cannot be told from a frame); one
// session each. The attacker's buffer and the victim's stay unchanged.
TEST_F(Rpc2dAttacks, SetBlocksOutsideTheirTensorOrWrapping) {
    for (uint32_t d = 0; d < 2; ++d) {
        for (const BadTransfer & c : bad_transfers(1)) {
            SCOPED_TRACE(std::string(c.what) + " on device " + std::to_string(d));
            RawClient a(server.endpoint());
            ASSERT_TRUE(a.connect().ok());
            ASSERT_EQ(alloc_on(a, d, kBuf), 1u); // handle 1, as the descriptions say
            auto b = bind_bulk(a);
            b->frame(bulk::Op::set_2d, c.t.SerializeAsString(), 0, c.announced);
            const auto r = reply(*b);
            EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT)) << r.second;
            EXPECT_NE(r.second.find("SetTensor2d: "), std::string::npos) << r.second;
            EXPECT_NE(r.second.find(c.reason), std::string::npos) << r.second;
            EXPECT_TRUE(b->closed_by_server());
            EXPECT_EQ(grpc_get(a, 1, kBuf), std::string(kBuf, '\0'));
        }
    }
}

// A count that lies about the bytes that follow: the frame announces 100
// blocks, 40 arrive and the connection ends. Those that arrived may have
// landed in the attacker's own buffer; the server refuses the frame and
// serves on.
TEST_F(Rpc2dAttacks, CountsThatLieAboutTheBytesThatFollow) {
    for (uint32_t d = 0; d < 2; ++d) {
        SCOPED_TRACE(d);
        RawClient a(server.endpoint());
        ASSERT_TRUE(a.connect().ok());
        const uint64_t h = alloc_on(a, d, kBuf);
        ASSERT_NE(h, 0u);
        auto b = bind_bulk(a);
        b->frame(bulk::Op::set_2d, transfer(bytes_desc(h, 0, int64_t(kBuf)), 0, 16, 100, 40).SerializeAsString(), 0,
                 1600);
        const std::string part(640, '\x22');
        ASSERT_TRUE(b->write(part.data(), part.size()));
        b->end_writes();
        const auto r = reply(*b);
        EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT));
        EXPECT_NE(r.second.find("announced 1600 bytes"), std::string::npos) << r.second;
        const std::string mine = grpc_get(a, h, kBuf);
        for (size_t i = 0; i < kBuf; ++i) {
            ASSERT_TRUE(mine[i] == '\0' || mine[i] == '\x22') << i;
        }
    }
}

} // namespace

// ---- init_tensor -----------------------------------------------------------------

namespace {

// Tensors placed in a remote TestDev0 buffer are initialised by the
// server's device (their padding zeroed), views and tensors on the
// server's CPU (whose buffers need no init) are not sent.
TEST_F(Rpc2d, InitTensorRunsOnTheServersDevice) {
    TwoDeviceServer server;
    ASSERT_TRUE(server.running()) << "cannot load " << LOOM_TESTDEV_PATH;
    for (uint32_t d = 0; d < 2; ++d) {
        SCOPED_TRACE(d);
        ggml_backend_buffer_type_t buft = ggml_backend_rpc_buffer_type(server.endpoint().c_str(), d);
        ASSERT_NE(buft, nullptr);
        ggml_context_ptr ctx = context();
        ggml_tensor *    a   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 25, 3); // 300 bytes
        ggml_tensor *    q   = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_Q4_0, 96);   // 54 bytes
        ggml_tensor *    v   = ggml_view_1d(ctx.get(), a, 10, 4 * sizeof(float));
        ggml_backend_buffer_ptr buf(ggml_backend_buft_alloc_buffer(buft, 1024));
        ASSERT_NE(buf, nullptr);
        ggml_backend_buffer_clear(buf.get(), 0xab);
        const size_t before = test_inits();
        ggml_tallocr talloc = ggml_tallocr_new(buf.get());
        ASSERT_EQ(ggml_tallocr_alloc(&talloc, a), GGML_STATUS_SUCCESS);
        ASSERT_EQ(ggml_tallocr_alloc(&talloc, q), GGML_STATUS_SUCCESS);
        ASSERT_EQ(ggml_backend_view_init(v), GGML_STATUS_SUCCESS);
        // The whole buffer, read as one tensor (1024 bytes: no padding of its own).
        ggml_tensor * whole = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I8, 1024);
        ASSERT_EQ(ggml_backend_tensor_alloc(buf.get(), whole, ggml_backend_buffer_get_base(buf.get())),
                  GGML_STATUS_SUCCESS);
        const std::vector<uint8_t> got = contents(whole);
        const size_t               qa  = size_t(static_cast<char *>(q->data) - static_cast<char *>(a->data));
        if (d == 0) {
            EXPECT_EQ(test_inits(), before);
            EXPECT_TRUE(got == std::vector<uint8_t>(1024, 0xab));
            continue;
        }
        EXPECT_EQ(test_inits(), before + 3); // a, q and whole
        ASSERT_EQ(qa, 512u);
        for (size_t i = 0; i < 1024; ++i) {
            const bool padding = (i >= 300 && i < 512) || (i >= 512 + 54 && i < 768);
            ASSERT_EQ(got[i], padding ? 0 : 0xab) << i;
        }
    }
}

grpc::Status init_call(RawClient & c, const TensorDesc & d) {
    loom::rpc::InitTensorRequest req;
    *req.mutable_tensor() = d;
    loom::rpc::Empty e;
    return c.stub().InitTensor(c.ctx().get(), req, &e);
}

TensorDesc f32_desc(uint64_t buffer, uint64_t offset, int64_t n) {
    TensorDesc d;
    describe_f32(&d, buffer, offset, n);
    return d;
}

// InitTensor with tensors that do not fit their buffer once padded (the
// device would zero bytes past it), outside it, of unknown buffers or ops:
// refused with the reason, through gRPC and the bulk connection, and the
// device's init never runs for them; the victim's bytes stay.
TEST_F(Rpc2dAttacks, InitTensorWithBadTensorsIsRefused) {
    struct Case {
        const char * what;
        TensorDesc   d;
        const char * reason;
    };
    std::vector<Case> cases = {
        {"padding past the buffer", f32_desc(ha[1], kBuf - 40, 10), "do not fit its buffer of 4096 bytes"},
        {"data past the buffer", f32_desc(ha[1], kBuf - 16, 16), "does not fit its buffer"},
        {"an offset that wraps", f32_desc(ha[1], UINT64_MAX - 7, 4), "does not fit its buffer"},
        {"an unknown buffer", f32_desc(ha[1] + 1000, 0, 4), "unknown buffer"},
        {"an unknown type", f32_desc(ha[1], 0, 4), "unknown tensor type"},
        {"an unknown op", f32_desc(ha[1], 0, 4), "unknown op"},
    };
    cases[4].d.set_type(GGML_TYPE_COUNT + 3);
    cases[5].d.set_op(GGML_OP_COUNT + 1);
    const size_t before = test_inits();
    auto         b      = bind_bulk(*attacker);
    for (const Case & c : cases) {
        SCOPED_TRACE(c.what);
        const grpc::Status st = init_call(*attacker, c.d);
        seen += st.error_message();
        EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
        EXPECT_NE(st.error_message().find("InitTensor: "), std::string::npos) << st.error_message();
        EXPECT_NE(st.error_message().find(c.reason), std::string::npos) << st.error_message();
        loom::rpc::InitTensorRequest req;
        *req.mutable_tensor() = c.d;
        b->frame(bulk::Op::init, req.SerializeAsString(), 0, 0);
        const auto r = reply(*b);
        EXPECT_EQ(r.first, int(grpc::StatusCode::INVALID_ARGUMENT)) << r.second;
        EXPECT_NE(r.second.find(c.reason), std::string::npos) << r.second;
    }
    EXPECT_EQ(test_inits(), before);
    // A tensor that fits once padded is initialised, on both paths; on the
    // CPU (no init) the call succeeds and does nothing.
    EXPECT_TRUE(init_call(*attacker, f32_desc(ha[1], kBuf - 256, 10)).ok());
    loom::rpc::InitTensorRequest req;
    *req.mutable_tensor() = f32_desc(ha[1], 0, 10);
    b->frame(bulk::Op::init, req.SerializeAsString(), 0, 0);
    EXPECT_EQ(reply(*b).first, 0);
    EXPECT_EQ(test_inits(), before + 2);
    EXPECT_TRUE(init_call(*attacker, f32_desc(ha[0], kBuf - 40, 10)).ok());
    EXPECT_EQ(test_inits(), before + 2);
}

} // namespace

namespace {

// A tensor that computes nothing (a leaf, a view) is supported by a remote
// device only when it fits in one of the device's buffers, as the device
// says of itself; so a program that asks before it allocates (test-backend-ops)
// is not sent to an allocation the server refuses.
TEST_F(Rpc2d, LeavesLargerThanTheDevicesBuffersAreNotSupported) {
    ASSERT_NE(test_device(), nullptr) << "cannot load " << LOOM_TESTDEV_PATH;
    ASSERT_TRUE(loomtest::testdev_configure(test_device(), "max_buffer_size", "4096"));
    TwoDeviceServer server;
    ASSERT_TRUE(server.running());
    ggml_backend_reg_t reg = ggml_backend_rpc_add_server(server.endpoint().c_str());
    ASSERT_NE(reg, nullptr);
    ggml_backend_dev_t remote = ggml_backend_dev_by_name(("RPC[" + server.endpoint() + "]TestDev0").c_str());
    ASSERT_NE(remote, nullptr);
    ggml_init_params ip{};
    ip.mem_size = 8 * ggml_tensor_overhead();
    ip.no_alloc = true;
    ggml_context_ptr ctx(ggml_init(ip));
    ggml_tensor *    small = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 1024);
    ggml_tensor *    large = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 1025);
    EXPECT_TRUE(ggml_backend_dev_supports_op(remote, small));
    EXPECT_FALSE(ggml_backend_dev_supports_op(remote, large));
    EXPECT_FALSE(ggml_backend_dev_supports_op(remote, ggml_view_1d(ctx.get(), large, 1025, 0)));
    EXPECT_TRUE(ggml_backend_dev_supports_op(remote, ggml_view_1d(ctx.get(), large, 16, 0)));
    EXPECT_TRUE(loomtest::testdev_configure(test_device(), "max_buffer_size", "0"));
}

} // namespace
