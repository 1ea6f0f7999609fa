// libFuzzer target over loom-rpc-server's handling of ggml's RPC protocol
// (src/backends/rpc/ggml_server.h), without a network: an input is the
// whole byte stream a client sends on one connection, HELLO first, served
// in a fresh session until the bytes run out or a request is refused.
// Answers are discarded. Graphs that pass the checks are computed on the
// CPU, so a check that lets a bad request through shows up as an
// AddressSanitizer report or an abort.
//
// LOOM_FUZZ_RPC_GGML_WRITE_SEEDS=<dir> writes the seed corpus (streams of
// valid requests of every kind, and the attacks of tests/test_rpc_ggml.cpp)
// into dir and exits.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "backends/rpc/ggml_server.h"
#include "backends/rpc/ggml_wire.h"
#include "ggml-cpu.h"
#include "ggml.h"

using namespace loom::rpc;
namespace gw = loom::rpc::ggml_wire;

namespace {

void quiet(ggml_log_level, const char *, void *) {}

GgmlServer & server() {
    static GgmlServer * s = [] {
        ServerOptions o;
        o.devices.push_back(ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0));
        o.n_threads         = 1;
        o.max_session_bytes = 64 << 20;
        auto *            core = new ServerCore(o);
        GgmlServerOptions g;
        g.devices = o.devices;
        return new GgmlServer(*core, g);
    }();
    return *s;
}

class MemoryIO final : public WireIO {
  public:
    MemoryIO(const uint8_t * data, size_t size) : p_(data), left_(size) {}
    bool wait(int) override { return left_ > 0; }
    bool read(void * data, size_t n) override {
        if (n > left_) {
            return false;
        }
        std::memcpy(data, p_, n);
        p_ += n;
        left_ -= n;
        return true;
    }
    bool write(const void *, size_t) override { return true; }

  private:
    const uint8_t * p_;
    size_t          left_;
};

// Seeds: streams as ggml's client writes them. The first buffer of a
// session is handle 1, at base 1 << 40.
class Stream {
  public:
    Stream() {
        gw::HelloReq h{};
        add(gw::Cmd::hello, &h, sizeof(h));
    }
    void add(gw::Cmd cmd, const void * p, uint64_t n) {
        bytes.push_back(uint8_t(cmd));
        append(&n, 8);
        append(p, size_t(n));
    }
    void append(const void * p, size_t n) {
        const auto * b = static_cast<const uint8_t *>(p);
        bytes.insert(bytes.end(), b, b + n);
    }
    void alloc(uint64_t size) {
        gw::AllocBufferReq r{0, size};
        add(gw::Cmd::alloc_buffer, &r, sizeof(r));
    }
    void set(const gw::Tensor & t, uint64_t offset, const void * data, size_t n, uint8_t flag = 0) {
        const uint64_t size = gw::k_set_tensor_header + n;
        bytes.push_back(uint8_t(gw::Cmd::set_tensor));
        append(&size, 8);
        append(&t, sizeof(t));
        append(&flag, 1);
        append(&offset, 8);
        append(data, n);
    }
    void compute(const std::vector<const gw::Tensor *> & nodes, const std::vector<gw::Tensor> & tensors) {
        std::vector<uint8_t> m;
        const uint32_t       dev = 0, nn = uint32_t(nodes.size()), nt = uint32_t(tensors.size());
        auto                 put = [&m](const void * p, size_t n) {
            m.insert(m.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n);
        };
        put(&dev, 4);
        put(&nn, 4);
        for (const gw::Tensor * t : nodes) {
            put(&t->id, 8);
        }
        put(&nt, 4);
        put(tensors.data(), tensors.size() * sizeof(gw::Tensor));
        add(gw::Cmd::graph_compute, m.data(), m.size());
    }
    std::vector<uint8_t> bytes;
};

constexpr uint64_t k_base = uint64_t(1) << 40;

gw::Tensor f32(uint64_t id, uint64_t offset, uint32_t ne0, uint32_t ne1 = 1) {
    gw::Tensor t{};
    t.id     = id;
    t.type   = GGML_TYPE_F32;
    t.buffer = 1;
    t.data   = k_base + offset;
    t.ne[0]  = ne0;
    t.ne[1]  = ne1;
    t.ne[2] = t.ne[3] = 1;
    t.nb[0]           = 4;
    t.nb[1]           = 4 * ne0;
    t.nb[2] = t.nb[3] = 4 * ne0 * ne1;
    return t;
}

gw::Tensor node(gw::Tensor t, ggml_op op, const gw::Tensor * a, const gw::Tensor * b = nullptr) {
    t.op     = op;
    t.flags  = GGML_TENSOR_FLAG_COMPUTE;
    t.src[0] = a != nullptr ? a->id : 0;
    t.src[1] = b != nullptr ? b->id : 0;
    return t;
}

void write_seeds(const std::string & dir) {
    auto save = [&dir](const char * name, const Stream & s) {
        std::ofstream(dir + "/" + name, std::ios::binary)
            .write(reinterpret_cast<const char *>(s.bytes.data()), std::streamsize(s.bytes.size()));
    };
    const float v[16] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, -14, 15, -16};
    {
        Stream s;
        s.add(gw::Cmd::device_count, nullptr, 0);
        gw::DeviceReq d{0};
        s.add(gw::Cmd::get_alignment, &d, sizeof(d));
        s.add(gw::Cmd::get_max_size, &d, sizeof(d));
        s.add(gw::Cmd::get_device_memory, &d, sizeof(d));
        save("devices", s);
    }
    gw::Tensor a = f32(1, 0, 16), b = f32(2, 64, 16), r = f32(3, 128, 16);
    {
        Stream s;
        s.alloc(4096);
        gw::BufferReq base{1};
        s.add(gw::Cmd::buffer_get_base, &base, sizeof(base));
        s.set(a, 0, v, sizeof(v));
        gw::GetTensorReq g{a, 4, 32};
        s.add(gw::Cmd::get_tensor, &g, sizeof(g));
        gw::MemsetTensorReq m{a, 8, 8, 0x7f};
        s.add(gw::Cmd::memset_tensor, &m, sizeof(m));
        gw::CopyTensorReq c{a, b};
        s.add(gw::Cmd::copy_tensor, &c, sizeof(c));
        gw::BufferClearReq clr{1, 3};
        s.add(gw::Cmd::buffer_clear, &clr, sizeof(clr));
        gw::InitTensorReq init{a};
        s.add(gw::Cmd::init_tensor, &init, sizeof(init));
        gw::GetAllocSizeReq as{};
        as.tensor = f32(1, 0, 16);
        s.add(gw::Cmd::get_alloc_size, &as, sizeof(as));
        gw::SetTensorHashReq h{a, 0, 12345};
        s.add(gw::Cmd::set_tensor_hash, &h, sizeof(h));
        gw::BufferReq f{1};
        s.add(gw::Cmd::free_buffer, &f, sizeof(f));
        save("tensors", s);
    }
    const std::pair<const char *, ggml_op> graphs[] = {{"graph_add", GGML_OP_ADD},
                                                        {"graph_mul", GGML_OP_MUL},
                                                        {"graph_mul_mat", GGML_OP_MUL_MAT},
                                                        {"graph_get_rows", GGML_OP_GET_ROWS}};
    for (const auto & [name, op] : graphs) {
        Stream s;
        s.alloc(4096);
        s.set(a, 0, v, sizeof(v));
        s.set(b, 0, v, sizeof(v));
        gw::Tensor x = a, y = b, out = r;
        if (op == GGML_OP_MUL_MAT) {
            x   = f32(1, 0, 4, 4);
            y   = f32(2, 64, 4, 4);
            out = f32(3, 128, 4, 4);
        } else if (op == GGML_OP_GET_ROWS) {
            x     = f32(1, 0, 4, 4);
            y     = f32(2, 64, 2);
            y.type = GGML_TYPE_I32;
            const int32_t ids[2] = {3, 1};
            s.set(y, 0, ids, sizeof(ids));
            out = f32(3, 128, 4, 2);
        }
        gw::Tensor n = node(out, op, &x, &y);
        s.compute({&n}, {x, y, n});
        gw::DeviceReq d{0};
        s.add(gw::Cmd::graph_recompute, &d, sizeof(d));
        gw::GetTensorReq g{n, 0, 16};
        s.add(gw::Cmd::get_tensor, &g, sizeof(g));
        save(name, s);
    }
    {
        Stream s; // a chain: scale, then a view, then add
        s.alloc(4096);
        gw::Tensor sc = node(f32(4, 256, 16), GGML_OP_SCALE, &a);
        float      k  = 0.5f;
        std::memcpy(sc.op_params, &k, 4);
        gw::Tensor view = f32(5, 256, 8);
        view.op         = GGML_OP_VIEW;
        view.src[0]     = sc.id;
        view.view_src   = sc.id;
        gw::Tensor sum  = node(f32(6, 512, 8), GGML_OP_ADD, &view, &view);
        s.compute({&sc, &view, &sum}, {a, sc, view, sum});
        save("graph_chain", s);
    }
    // Attacks (each refused).
    {
        Stream s;
        s.alloc(1024);
        gw::GetTensorReq g{f32(1, 512, 64), 1000, 64};
        s.add(gw::Cmd::get_tensor, &g, sizeof(g));
        save("attack_read_past_buffer", s);
    }
    {
        Stream s;
        s.alloc(1024);
        gw::Tensor t = f32(1, 0, 4);
        t.data       = 0x7f0000000000ull;
        s.set(t, 0, v, 16);
        save("attack_write_anywhere", s);
    }
    {
        Stream s;
        s.alloc(1024);
        gw::Tensor t = a;
        t.type       = 4;
        s.set(t, 0, v, 16);
        save("attack_block_size_zero", s);
    }
    {
        Stream s;
        s.alloc(1024);
        gw::Tensor x = a, n = node(r, GGML_OP_ADD, &a, &r);
        x.op         = GGML_OP_ADD;
        x.src[0]     = n.id;
        s.compute({&x, &n}, {x, n});
        save("attack_graph_cycle", s);
    }
    {
        Stream s;
        s.alloc(1024);
        gw::Tensor n = node(r, GGML_OP_CUSTOM, &a);
        s.compute({&n}, {a, n});
        save("attack_custom_op", s);
    }
    {
        Stream s;
        s.alloc(1024);
        gw::Tensor sc = node(r, GGML_OP_SCALE, &a);
        s.compute({&sc}, {a, sc});
        gw::BufferReq f{1};
        s.add(gw::Cmd::free_buffer, &f, sizeof(f));
        gw::DeviceReq d{0};
        s.add(gw::Cmd::graph_recompute, &d, sizeof(d));
        save("attack_recompute_after_free", s);
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    if (const char * dir = std::getenv("LOOM_FUZZ_RPC_GGML_WRITE_SEEDS")) {
        write_seeds(dir);
        std::exit(0);
    }
    if (std::getenv("LOOM_FUZZ_RPC_VERBOSE") == nullptr) {
        ggml_log_set(quiet, nullptr);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    MemoryIO io(data, size);
    server().serve(io);
    return 0;
}
