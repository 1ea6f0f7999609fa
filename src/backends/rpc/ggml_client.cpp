// loom's client of ggml's RPC protocol (ggml_client.h).
//
// One connection per server, its requests one at a time under its mutex.
// GRAPH_COMPUTE and the writes have no answer in ggml's protocol: a server
// that refuses one closes the connection, which the next request with an
// answer finds. From then on the connection is broken: computations fail
// with GGML_STATUS_FAILED, reads give zeros, and each is logged once.

#include "ggml_client.h"

#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend_impl.h"
#include "bulk.h"
#include "core/common.h"
#include "ggml_wire.h"

namespace loom::rpc {

namespace {

namespace gw = ggml_wire;

ggml_guid g_ggml_rpc_guid = {0x6c, 0x6f, 0x6f, 0x6d, 0x2d, 0x67, 0x67, 0x6d,
                             0x6c, 0x2d, 0x72, 0x70, 0x63, 0x2d, 0x37, 0x00};

// Uploads of weights larger than this try the server's file cache first,
// as ggml's client does.
constexpr size_t k_hash_threshold = size_t(10) << 20;
constexpr uint32_t k_timeout_ms   = 600000; // a request without progress for this long breaks the connection

bool split_endpoint(const std::string & endpoint, std::string * host, uint32_t * port) {
    const size_t colon = endpoint.rfind(':');
    if (colon == std::string::npos) {
        return false;
    }
    char *              end = nullptr;
    const unsigned long p   = std::strtoul(endpoint.c_str() + colon + 1, &end, 10);
    if (end == endpoint.c_str() + colon + 1 || *end != '\0' || p == 0 || p > 65535) {
        return false;
    }
    *host = bulk::endpoint_host(endpoint);
    *port = uint32_t(p);
    return true;
}

class Conn {
  public:
    // Connected and past HELLO; NULL (logged) otherwise.
    static std::shared_ptr<Conn> open(const std::string & endpoint, int hello_timeout_ms) {
        std::string host;
        uint32_t    port = 0;
        if (!split_endpoint(endpoint, &host, &port)) {
            LOOM_LOG_ERROR("RPC[%s]: not host:port\n", endpoint.c_str());
            return nullptr;
        }
        const int fd = bulk::connect_to(host, port);
        if (fd < 0) {
            return nullptr;
        }
        bulk::tune_socket(fd, uint32_t(hello_timeout_ms));
        auto         c = std::shared_ptr<Conn>(new Conn(endpoint, fd));
        gw::HelloReq req{};
        gw::HelloRsp rsp{};
        // A server of another protocol fails HELLO: no error of its own.
        c->quiet_ = true;
        if (!c->call(gw::Cmd::hello, &req, sizeof(req), &rsp, sizeof(rsp)) || rsp.major != gw::k_major) {
            return nullptr;
        }
        c->quiet_ = false;
        bulk::tune_socket(fd, k_timeout_ms);
        return c;
    }

    const std::string & endpoint() const { return endpoint_; }

    // A request with an answer of exactly out_n bytes.
    bool call(gw::Cmd cmd, const void * in, size_t in_n, void * out, size_t out_n) {
        std::lock_guard<std::mutex> lock(mutex_);
        uint64_t                    got = 0;
        return usable() && check(put(cmd, in_n) && io_.write_all(in, in_n) && io_.read_all(&got, 8) &&
                                 got == out_n && io_.read_all(out, out_n));
    }
    // A request without an answer.
    bool send(gw::Cmd cmd, const void * in, size_t in_n) {
        std::lock_guard<std::mutex> lock(mutex_);
        return usable() && check(put(cmd, in_n) && io_.write_all(in, in_n));
    }
    // SET_TENSOR without copying the data into one message.
    bool set_tensor(const gw::Tensor & t, uint8_t cache_flag, uint64_t offset, const void * data, size_t n) {
        std::lock_guard<std::mutex> lock(mutex_);
        return usable() && check(put(gw::Cmd::set_tensor, gw::k_set_tensor_header + n) &&
                                 io_.write_all(&t, sizeof(t)) && io_.write_all(&cache_flag, 1) &&
                                 io_.write_all(&offset, 8) && io_.write_all(data, n));
    }
    bool broken() {
        std::lock_guard<std::mutex> lock(mutex_);
        return broken_;
    }

  private:
    Conn(std::string endpoint, int fd) : endpoint_(std::move(endpoint)), io_(fd) {}

    bool put(gw::Cmd cmd, uint64_t n) {
        const uint8_t c = uint8_t(cmd);
        return io_.write_all(&c, 1) && io_.write_all(&n, 8);
    }
    bool usable() const { return !broken_; }
    bool check(bool ok) {
        if (!ok && !broken_) {
            broken_ = true;
            if (quiet_) {
                return ok;
            }
            LOOM_LOG_ERROR("RPC[%s]: the server closed the connection or stopped answering (a refused request "
                           "closes it: see the server's log); its devices no longer work\n",
                           endpoint_.c_str());
        }
        return ok;
    }

    std::string  endpoint_;
    std::mutex   mutex_;
    bulk::Stream io_;
    bool         broken_ = false;
    bool         quiet_  = false;
};

class GgmlBuffer;

bool is_ggml_buffer(const ggml_backend_buffer * b);

class GgmlBufferType final : public ggml_backend_buffer_type {
  public:
    GgmlBufferType(ggml_backend_device * dev, std::shared_ptr<Conn> conn, uint32_t device, std::string name,
                   size_t alignment, size_t max_size)
        : ggml_backend_buffer_type(dev), conn_(std::move(conn)), device_(device), name_(std::move(name)),
          alignment_(alignment), max_size_(max_size) {}

    const char *          name() const override { return name_.c_str(); }
    ggml_backend_buffer * alloc_buffer(size_t size) override;
    size_t                alignment() const override { return alignment_; }
    size_t                max_size() const override { return max_size_; }
    size_t                alloc_size(const ggml_tensor * t) const override {
        // Only padded quantized rows may take more than their bytes; the
        // server says how much, once per shape.
        if (!ggml_is_quantized(t->type) || t->ne[0] % 512 == 0 || t->view_src != nullptr) {
            return ggml_nbytes(t);
        }
        std::lock_guard<std::mutex> lock(mutex_);
        const auto key = std::make_tuple(int(t->type), int(t->op), t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
        if (auto it = sizes_.find(key); it != sizes_.end()) {
            return it->second;
        }
        gw::GetAllocSizeReq req{};
        req.device = device_;
        req.tensor = describe(t);
        gw::GetAllocSizeRsp rsp{};
        const size_t n = conn_->call(gw::Cmd::get_alloc_size, &req, sizeof(req), &rsp, sizeof(rsp))
                             ? size_t(rsp.alloc_size)
                             : ggml_nbytes(t);
        sizes_[key] = n;
        return n;
    }
    bool needs_init_tensor() const override { return false; }

    // The wire form of t; buffer and data only when t lies in a buffer of
    // this connection.
    gw::Tensor describe(const ggml_tensor * t) const;

    const std::shared_ptr<Conn> & conn() const { return conn_; }
    uint32_t                      device() const { return device_; }

  private:
    std::shared_ptr<Conn> conn_;
    uint32_t              device_;
    std::string           name_;
    size_t                alignment_, max_size_;
    mutable std::mutex    mutex_;
    mutable std::map<std::tuple<int, int, int64_t, int64_t, int64_t, int64_t>, size_t> sizes_;
};

class GgmlBuffer final : public ggml_backend_buffer {
  public:
    GgmlBuffer(GgmlBufferType * type, size_t size, uint64_t remote, uint64_t base)
        : ggml_backend_buffer(type, size), type_(type), remote_(remote), base_(base) {}
    ~GgmlBuffer() override {
        gw::BufferReq req{remote_};
        (void) type_->conn()->send(gw::Cmd::free_buffer, &req, sizeof(req));
    }

    uint64_t remote() const { return remote_; }
    void *   base() override { return reinterpret_cast<void *>(uintptr_t(base_)); }

    ggml_status init_tensor(ggml_tensor * t) override {
        // Padded quantized rows: the server places them (ggml's client asks
        // for exactly these).
        if (t->view_src == nullptr && ggml_is_quantized(t->type) && t->ne[0] % 512 != 0) {
            gw::InitTensorReq req{type_->describe(t)};
            if (!type_->conn()->send(gw::Cmd::init_tensor, &req, sizeof(req))) {
                return GGML_STATUS_FAILED;
            }
        }
        return GGML_STATUS_SUCCESS;
    }
    void set_tensor(ggml_tensor * t, const void * data, size_t offset, size_t n) override {
        const gw::Tensor d          = type_->describe(t);
        uint8_t          cache_flag = 0;
        if (n > k_hash_threshold && usage == GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
            gw::SetTensorHashReq req{d, offset, gw::fnv1a(data, n)};
            gw::ResultRsp        rsp{};
            if (type_->conn()->call(gw::Cmd::set_tensor_hash, &req, sizeof(req), &rsp, sizeof(rsp)) && rsp.result) {
                return; // the server had the content
            }
            cache_flag = 1;
        }
        (void) type_->conn()->set_tensor(d, cache_flag, offset, data, n);
    }
    void get_tensor(const ggml_tensor * t, void * data, size_t offset, size_t n) override {
        gw::GetTensorReq req{type_->describe(t), offset, n};
        if (!type_->conn()->call(gw::Cmd::get_tensor, &req, sizeof(req), data, n)) {
            std::memset(data, 0, n);
        }
    }
    void memset_tensor(ggml_tensor * t, uint8_t value, size_t offset, size_t n) override {
        gw::MemsetTensorReq req{type_->describe(t), offset, n, value};
        (void) type_->conn()->send(gw::Cmd::memset_tensor, &req, sizeof(req));
    }
    bool cpy_tensor(const ggml_tensor * src, ggml_tensor * dst) override {
        if (!is_ggml_buffer(src->buffer) ||
            static_cast<const GgmlBuffer *>(src->buffer)->type_->conn() != type_->conn()) {
            return false;
        }
        gw::CopyTensorReq req{type_->describe(src), type_->describe(dst)};
        gw::ResultRsp     rsp{};
        return type_->conn()->call(gw::Cmd::copy_tensor, &req, sizeof(req), &rsp, sizeof(rsp)) && rsp.result != 0;
    }
    void clear(uint8_t value) override {
        gw::BufferClearReq req{remote_, value};
        (void) type_->conn()->send(gw::Cmd::buffer_clear, &req, sizeof(req));
    }

  private:
    GgmlBufferType * type_;
    uint64_t         remote_, base_;
};

bool is_ggml_buffer(const ggml_backend_buffer * b) {
    return b != nullptr && dynamic_cast<const GgmlBuffer *>(b) != nullptr;
}

gw::Tensor GgmlBufferType::describe(const ggml_tensor * t) const {
    gw::Tensor d{};
    d.id   = reinterpret_cast<uint64_t>(t);
    d.type = uint32_t(t->type);
    if (is_ggml_buffer(t->buffer) &&
        static_cast<const GgmlBufferType *>(t->buffer->buft)->conn() == conn_) {
        d.buffer = static_cast<const GgmlBuffer *>(t->buffer)->remote();
        d.data   = reinterpret_cast<uint64_t>(t->data);
    }
    for (int i = 0; i < 4; ++i) {
        d.ne[i] = uint32_t(t->ne[i]);
        d.nb[i] = uint32_t(t->nb[i]);
    }
    d.op = uint32_t(t->op);
    std::memcpy(d.op_params, t->op_params, sizeof(d.op_params));
    d.flags = t->flags;
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        d.src[i] = reinterpret_cast<uint64_t>(t->src[i]);
    }
    d.view_src  = reinterpret_cast<uint64_t>(t->view_src);
    d.view_offs = t->view_offs;
    std::memcpy(d.name, t->name, strnlen(t->name, sizeof(d.name) - 1)); // d is zeroed: NUL-terminated
    return d;
}

ggml_backend_buffer * GgmlBufferType::alloc_buffer(size_t size) {
    gw::AllocBufferReq req{device_, size};
    gw::AllocBufferRsp rsp{};
    if (!conn_->call(gw::Cmd::alloc_buffer, &req, sizeof(req), &rsp, sizeof(rsp)) || rsp.remote_ptr == 0) {
        LOOM_LOG_ERROR("RPC[%s]: the server cannot allocate %zu bytes on device %u\n", conn_->endpoint().c_str(), size,
                       device_);
        return nullptr;
    }
    gw::BufferReq b{rsp.remote_ptr};
    gw::U64Rsp    base{};
    if (!conn_->call(gw::Cmd::buffer_get_base, &b, sizeof(b), &base, sizeof(base))) {
        return nullptr;
    }
    return new GgmlBuffer(this, size_t(rsp.remote_size), rsp.remote_ptr, base.value);
}

class GgmlBackend final : public ggml_backend {
  public:
    GgmlBackend(ggml_backend_device * dev, GgmlBufferType * buft, std::string name)
        : ggml_backend(&g_ggml_rpc_guid, dev), buft_(buft), name_(std::move(name)) {}

    const char * name() const override { return name_.c_str(); }

    ggml_status graph_compute(ggml_cgraph * graph) override {
        const int n_nodes = ggml_graph_n_nodes(graph);
        if (n_nodes == 0) {
            return GGML_STATUS_SUCCESS;
        }
        // | device | n_nodes | node ids | n_tensors | tensors |: every
        // tensor the nodes reach, sources before their users.
        std::vector<gw::Tensor>                           tensors;
        std::unordered_map<const ggml_tensor *, size_t>   at;
        std::vector<const ggml_tensor *>                  stack;
        auto visit = [&](const ggml_tensor * root) {
            if (root == nullptr || at.count(root) != 0) {
                return;
            }
            stack.push_back(root);
            while (!stack.empty()) {
                const ggml_tensor * t    = stack.back();
                bool                ready = true;
                for (const ggml_tensor * s : {t->src[0], t->src[1], t->src[2], t->src[3], t->src[4], t->src[5],
                                              t->src[6], t->src[7], t->src[8], t->src[9], t->view_src}) {
                    if (s != nullptr && at.count(s) == 0) {
                        stack.push_back(s);
                        ready = false;
                    }
                }
                if (!ready) {
                    continue;
                }
                stack.pop_back();
                if (at.count(t) == 0) {
                    at[t] = tensors.size();
                    tensors.push_back(buft_->describe(t));
                }
            }
        };
        for (int i = 0; i < n_nodes; ++i) {
            visit(ggml_graph_node(graph, i));
        }
        // Uses of each node by the nodes, as ggml's graphs count them.
        for (int i = 0; i < n_nodes; ++i) {
            const ggml_tensor * n = ggml_graph_node(graph, i);
            for (const ggml_tensor * s : n->src) {
                if (s != nullptr) {
                    tensors[at[s]].use_count++;
                }
            }
        }
        const uint32_t dev = buft_->device(), nn = uint32_t(n_nodes), nt = uint32_t(tensors.size());
        msg_.resize(12 + size_t(nn) * 8 + size_t(nt) * sizeof(gw::Tensor));
        std::memcpy(msg_.data(), &dev, 4);
        std::memcpy(msg_.data() + 4, &nn, 4);
        for (uint32_t i = 0; i < nn; ++i) {
            const uint64_t id = reinterpret_cast<uint64_t>(ggml_graph_node(graph, int(i)));
            std::memcpy(msg_.data() + 8 + size_t(i) * 8, &id, 8);
        }
        std::memcpy(msg_.data() + 8 + size_t(nn) * 8, &nt, 4);
        std::memcpy(msg_.data() + 12 + size_t(nn) * 8, tensors.data(), size_t(nt) * sizeof(gw::Tensor));
        // The same graph as the last one (the same tensors at the same
        // places): the server computes its copy again.
        bool sent = false;
        if (msg_ == last_) {
            gw::DeviceReq req{dev};
            sent = buft_->conn()->send(gw::Cmd::graph_recompute, &req, sizeof(req));
        } else {
            sent = buft_->conn()->send(gw::Cmd::graph_compute, msg_.data(), msg_.size());
            last_.swap(msg_);
        }
        return sent ? GGML_STATUS_SUCCESS : GGML_STATUS_FAILED;
    }

    // The server runs requests in order: an answered request means the
    // computations before it ended.
    void synchronize() override {
        gw::DeviceReq req{buft_->device()};
        gw::U64Rsp    rsp{};
        (void) buft_->conn()->call(gw::Cmd::get_alignment, &req, sizeof(req), &rsp, sizeof(rsp));
    }
    ggml_status take_async_status() override {
        return buft_->conn()->broken() ? GGML_STATUS_FAILED : GGML_STATUS_SUCCESS;
    }

  private:
    GgmlBufferType *     buft_;
    std::string          name_;
    std::vector<uint8_t> msg_, last_;
};

class GgmlDevice final : public ggml_backend_device {
  public:
    GgmlDevice(ggml_backend_reg * reg, std::shared_ptr<Conn> conn, uint32_t index, size_t alignment, size_t max_size)
        : ggml_backend_device(reg), conn_(conn), index_(index) {
        name_        = "RPC[" + conn->endpoint() + "]ggml" + std::to_string(index);
        description_ = "device " + std::to_string(index) + " of ggml's RPC server at " + conn->endpoint();
        buft_        = std::make_unique<GgmlBufferType>(this, conn, index, name_, alignment, max_size);
    }

    const char * name() const override { return name_.c_str(); }
    const char * description() const override { return description_.c_str(); }
    void         memory(size_t * free, size_t * total) const override {
        gw::DeviceReq       req{index_};
        gw::DeviceMemoryRsp rsp{};
        const bool          ok = conn_->call(gw::Cmd::get_device_memory, &req, sizeof(req), &rsp, sizeof(rsp));
        *free                  = ok ? size_t(rsp.free_mem) : 0;
        *total                 = ok ? size_t(rsp.total_mem) : 0;
    }
    enum ggml_backend_dev_type type() const override { return GGML_BACKEND_DEVICE_TYPE_GPU; }
    ggml_backend * init_backend(const char *) override { return new GgmlBackend(this, buft_.get(), name_); }
    ggml_backend_buffer_type * buffer_type() override { return buft_.get(); }
    // ggml's protocol cannot ask; a server runs what its devices run, which
    // for loom's and ggml's CPUs is every operator but the custom ones (a
    // function pointer does not cross machines).
    bool supports_op(const ggml_tensor * op) const override {
        return op->op != GGML_OP_CUSTOM && op->op != GGML_OP_MAP_CUSTOM1 && op->op != GGML_OP_MAP_CUSTOM2 &&
               op->op != GGML_OP_MAP_CUSTOM3;
    }
    bool supports_buft(const ggml_backend_buffer_type * buft) const override { return buft == buft_.get(); }

  private:
    std::shared_ptr<Conn>           conn_;
    uint32_t                        index_;
    std::string                     name_, description_;
    std::unique_ptr<GgmlBufferType> buft_;
};

class GgmlServerReg final : public ggml_backend_reg {
  public:
    explicit GgmlServerReg(std::string name) : name_(std::move(name)) {}
    const char *          name() const override { return name_.c_str(); }
    size_t                device_count() const override { return devices_.size(); }
    ggml_backend_device * device(size_t index) override {
        LOOM_REQUIRE(index < devices_.size(), "index %zu out of range (%zu devices)", index, devices_.size());
        return devices_[index].get();
    }
    void add(std::unique_ptr<GgmlDevice> d) { devices_.push_back(std::move(d)); }

  private:
    std::string                              name_;
    std::vector<std::unique_ptr<GgmlDevice>> devices_;
};

} // namespace

bool speaks_ggml(const std::string & endpoint, int timeout_ms) {
    return Conn::open(endpoint, timeout_ms) != nullptr;
}

ggml_backend_reg_t ggml_protocol_reg(const std::string & endpoint) {
    std::shared_ptr<Conn> conn = Conn::open(endpoint, 10000);
    if (!conn) {
        LOOM_LOG_ERROR("RPC[%s]: no server of ggml's protocol answers\n", endpoint.c_str());
        return nullptr;
    }
    gw::DeviceCountRsp count{};
    if (!conn->call(gw::Cmd::device_count, nullptr, 0, &count, sizeof(count)) || count.device_count == 0 ||
        count.device_count > 256) {
        LOOM_LOG_ERROR("RPC[%s]: the server names no usable device\n", endpoint.c_str());
        return nullptr;
    }
    auto reg = std::make_unique<GgmlServerReg>("RPC[" + endpoint + "]");
    for (uint32_t i = 0; i < count.device_count; ++i) {
        gw::DeviceReq req{i};
        gw::U64Rsp    align{}, max{};
        if (!conn->call(gw::Cmd::get_alignment, &req, sizeof(req), &align, sizeof(align)) ||
            !conn->call(gw::Cmd::get_max_size, &req, sizeof(req), &max, sizeof(max)) || align.value == 0 ||
            (align.value & (align.value - 1)) != 0) {
            LOOM_LOG_ERROR("RPC[%s]: device %u: no usable alignment\n", endpoint.c_str(), i);
            return nullptr;
        }
        reg->add(std::make_unique<GgmlDevice>(reg.get(), conn, i, size_t(align.value), size_t(max.value)));
    }
    return reg.release();
}

} // namespace loom::rpc
