// The RPC client backend: remote devices reached over gRPC.
//
// One Connection per endpoint holds the channel and the session (the open
// Connect stream); a reg per endpoint holds a device per remote device.
// Remote buffers are non-host (client_buffer.h).

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend_impl.h"
#include "bulk_client.h"
#include "client_buffer.h"
#include "client_comm.h"
#include "client_connection.h"
#include "ggml_client.h"
#include "core/common.h"
#include "ggml-rpc.h"
#include "loom_rpc.grpc.pb.h"
#include "protocol.h"
#include "validate.h"

using namespace loom::rpc;

namespace {

ggml_guid g_rpc_guid = {0x6c, 0x6f, 0x6f, 0x6d, 0x2d, 0x72, 0x70, 0x63,
                        0x4e, 0x19, 0xb7, 0x02, 0x6d, 0xa3, 0x58, 0xf1};

// An event of an RPC device: the count of frames sent on its connection's
// bulk connection when it was recorded (Note [RPC streams]).
struct RpcEvent final : ggml_backend_event {
    RpcEvent(ggml_backend_device * dev, Connection & c) : ggml_backend_event(dev), conn(c) {}
    Connection & conn;
    uint64_t     frames = 0;
};

// Note [RPC streams]
// The bulk connection is the stream of every backend of a server: the
// server runs its frames in order, one at a time. So a graph computation is
// sent and not waited for (graph_compute returns at once, as ggml's RPC
// does), an upload queued behind it cannot overwrite what it reads, and an
// asynchronous download lands when the replies before it have been read.
// synchronize reads every reply still due; an event is the count of frames
// sent when it was recorded, and waiting for it reads replies up to there.
// A computation's failure comes back as a failed reply (bulk.h): logged when
// it is read, it fails the next computation, and take_async_status reports
// it, so ggml_backend_graph_compute still returns it. Without a bulk
// connection every call waits, as before.
class RpcBackend final : public ggml_backend {
  public:
    RpcBackend(ggml_backend_device * dev, std::shared_ptr<Connection> conn, uint32_t index, const char * name)
        : ggml_backend(&g_rpc_guid, dev), conn_(std::move(conn)), index_(index), name_(name) {}

    const char * name() const override { return name_; }

    ggml_status graph_compute(ggml_cgraph * graph) override;

    void get_tensor_async(const ggml_tensor * t, void * data, size_t offset, size_t n) override {
        auto * buf = dynamic_cast<RpcBuffer *>(t->buffer);
        if (BulkChannel * bulk = conn_->bulk(); bulk != nullptr && buf != nullptr && &buf->conn() == conn_.get()) {
            TensorDesc d;
            buf->describe(t, &d);
            if (bulk->get_async(d, offset, data, n)) {
                return;
            }
        }
        ggml_backend_tensor_get(t, data, offset, n);
    }
    // One transfer for all blocks (the buffer's), not one per block.
    void set_tensor_2d_async(ggml_tensor * t, const void * data, size_t offset, size_t n, size_t n_copies,
                             size_t stride_tensor, size_t stride_data) override {
        ggml_backend_tensor_set_2d(t, data, offset, n, n_copies, stride_tensor, stride_data);
    }
    void get_tensor_2d_async(const ggml_tensor * t, void * data, size_t offset, size_t n, size_t n_copies,
                             size_t stride_tensor, size_t stride_data) override {
        ggml_backend_tensor_get_2d(t, data, offset, n, n_copies, stride_tensor, stride_data);
    }
    // From host memory: an upload on this stream, after the source's own
    // stream has finished.
    bool cpy_tensor_async(ggml_backend * backend_src, const ggml_tensor * src, ggml_tensor * dst) override {
        auto * buf = dynamic_cast<RpcBuffer *>(dst->buffer);
        if (buf == nullptr || &buf->conn() != conn_.get() || src->buffer == nullptr ||
            !ggml_backend_buffer_is_host(src->buffer) || conn_->bulk() == nullptr) {
            return false;
        }
        backend_src->synchronize();
        ggml_backend_tensor_set(dst, src->data, 0, ggml_nbytes(src));
        return true;
    }

    void synchronize() override {
        if (BulkChannel * bulk = conn_->bulk(); bulk != nullptr) {
            settle(bulk->sync());
        }
    }
    ggml_status take_async_status() override { return std::exchange(async_status_, GGML_STATUS_SUCCESS); }
    const std::shared_ptr<Connection> & connection() const { return conn_; }

    void event_record(ggml_backend_event * event) override {
        BulkChannel * bulk = conn_->bulk();
        static_cast<RpcEvent *>(event)->frames = bulk != nullptr ? bulk->mark() : 0;
    }
    // The same server runs the frames in order; another device's event is
    // waited for here.
    void event_wait(ggml_backend_event * event) override {
        if (&static_cast<RpcEvent *>(event)->conn != conn_.get()) {
            event->device->event_synchronize(event);
        }
    }

    // A failure read among the replies: logged and kept for
    // take_async_status, or else for the next computation.
    void settle(const grpc::Status & st) {
        if (!conn_->check(st, "a transfer or computation on the bulk connection", false) &&
            async_status_ == GGML_STATUS_SUCCESS) {
            async_status_ = bulk::status_of(st);
        }
    }

  private:
    std::shared_ptr<Connection> conn_;
    uint32_t                    index_;
    const char *                name_;
    std::string                 last_signature_;
    std::vector<uint8_t>        last_key_; // graph_key of the graph last sent
    std::vector<uint8_t>        key_;      // reused
    ggml_status                 async_status_ = GGML_STATUS_SUCCESS;
};

// Every field of graph's nodes and their sources that its message carries,
// as raw bytes: equal keys give equal messages, so a graph computed again
// unchanged is neither serialized nor hashed again.
void graph_key(ggml_cgraph * graph, std::vector<uint8_t> * key) {
    key->clear();
    auto put = [key](const void * p, size_t n) {
        const auto * b = static_cast<const uint8_t *>(p);
        key->insert(key->end(), b, b + n);
    };
    auto put_tensor = [&put](const ggml_tensor * t) {
        put(&t, sizeof(t));
        if (t == nullptr) {
            return;
        }
        put(&t->buffer, sizeof(t->buffer));
        put(&t->data, sizeof(t->data));
        put(&t->type, sizeof(t->type));
        put(t->ne, sizeof(t->ne));
        put(t->nb, sizeof(t->nb));
        put(&t->op, sizeof(t->op));
        put(t->op_params, sizeof(t->op_params));
        put(&t->flags, sizeof(t->flags));
        put(t->name, sizeof(t->name));
    };
    const int n = ggml_graph_n_nodes(graph);
    for (int i = 0; i < n; ++i) {
        const ggml_tensor * node = ggml_graph_node(graph, i);
        put_tensor(node);
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            put_tensor(node->src[k]);
        }
    }
}

bool computes(const ggml_tensor * node) {
    return node->op != GGML_OP_NONE && !loom::is_view_op(node->op);
}

// The message of a graph: nodes with their sources; sources that are not
// nodes of this graph travel as data (their op is not computed here).
bool serialize_graph(ggml_cgraph * graph, Connection & conn, uint32_t device, GraphMessage * msg) {
    msg->set_device(device);
    std::unordered_map<const ggml_tensor *, uint32_t> ids;
    const int                                         n_nodes = ggml_graph_n_nodes(graph);
    std::unordered_map<const ggml_tensor *, bool>     is_node;
    for (int i = 0; i < n_nodes; ++i) {
        is_node[ggml_graph_node(graph, i)] = true;
    }
    bool ok  = true;
    auto add = [&](const ggml_tensor * t, auto & self) -> uint32_t {
        if (auto it = ids.find(t); it != ids.end()) {
            return it->second;
        }
        auto * buf = dynamic_cast<RpcBuffer *>(t->buffer);
        if (buf == nullptr || &buf->conn() != &conn || t->data == nullptr) {
            LOOM_LOG_ERROR("RPC[%s]: tensor %s is not in a buffer of this server\n", conn.endpoint().c_str(),
                           loom::describe(t).text);
            ok = false;
            return 0;
        }
        const uint32_t id = uint32_t(msg->tensors_size()) + 1;
        ids[t]            = id;
        TensorDesc * d    = msg->add_tensors();
        buf->describe(t, d);
        d->set_op(uint32_t(t->op));
        d->set_op_params(t->op_params, sizeof(t->op_params));
        d->set_flags(t->flags);
        d->set_name(t->name);
        if (is_node.count(t) != 0) {
            std::vector<uint32_t> srcs;
            for (int s = 0; s < GGML_MAX_SRC; ++s) {
                srcs.push_back(t->src[s] != nullptr ? self(t->src[s], self) : 0);
            }
            while (!srcs.empty() && srcs.back() == 0) {
                srcs.pop_back();
            }
            TensorDesc * dd = msg->mutable_tensors(int(id - 1));
            for (uint32_t s : srcs) {
                dd->add_src(s);
            }
        }
        return id;
    };
    for (int i = 0; i < n_nodes && ok; ++i) {
        // A node of no op, or a view, computes nothing (ggml's backends skip
        // it), so its memory need not be this server's (a scheduler's split
        // holds views of inputs that stay on the CPU); a node that reads it
        // still brings it along as a source.
        if (computes(ggml_graph_node(graph, i))) {
            msg->add_nodes(add(ggml_graph_node(graph, i), add));
        }
    }
    return ok;
}

// Whether graph has a node with an op, which the server must run.
bool computes_anything(ggml_cgraph * graph) {
    for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
        if (computes(ggml_graph_node(graph, i))) {
            return true;
        }
    }
    return false;
}

ggml_status RpcBackend::graph_compute(ggml_cgraph * graph) {
    if (conn_->take_failure()) {
        LOOM_LOG_ERROR("RPC[%s]: an earlier transfer failed; the computation is not run\n", conn_->endpoint().c_str());
        return GGML_STATUS_FAILED;
    }
    if (take_async_status() != GGML_STATUS_SUCCESS) {
        LOOM_LOG_ERROR("RPC[%s]: an earlier computation failed; this one is not run\n", conn_->endpoint().c_str());
        return GGML_STATUS_FAILED;
    }
    if (!computes_anything(graph)) {
        return GGML_STATUS_SUCCESS;
    }
    GraphComputeRequest req;
    req.set_device(index_);
    auto serialize = [&]() {
        if (!serialize_graph(graph, *conn_, index_, req.mutable_graph())) {
            return false;
        }
        std::string bytes;
        req.graph().SerializeToString(&bytes);
        const Sha256 h = sha256(bytes.data(), bytes.size());
        req.set_signature(h.data(), h.size());
        return true;
    };
    // A graph computed again unchanged is neither serialized nor hashed again.
    graph_key(graph, &key_);
    if (!last_signature_.empty() && key_ == last_key_) {
        req.set_signature(last_signature_);
    } else if (serialize()) {
        last_signature_ = req.signature();
        last_key_.swap(key_);
    } else {
        last_signature_.clear();
        return GGML_STATUS_FAILED;
    }
    // The message: the graph only when the server does not hold it (Note
    // [Graphs the server holds]).
    auto message = [&](bool resend, GraphComputeRequest * sent) {
        sent->set_device(index_);
        sent->set_signature(req.signature());
        if (resend) {
            if (!req.has_graph() && !serialize()) {
                return false;
            }
            *sent->mutable_graph() = req.graph();
        }
        return true;
    };
    if (BulkChannel * bulk = conn_->bulk(); bulk != nullptr) {
        // Sent, not waited for (Note [RPC streams]).
        grpc::Status st;
        const bool   built = conn_->with_graphs([&](std::vector<std::string> & held) {
            GraphComputeRequest sent;
            if (!message(held[index_] != req.signature(), &sent)) {
                return false;
            }
            st           = bulk->call(bulk::Op::compute, sent, nullptr, 0);
            held[index_] = st.ok() ? req.signature() : std::string();
            return true;
        });
        if (!built) {
            return GGML_STATUS_FAILED;
        }
        return conn_->check(st, "GraphCompute", false) ? GGML_STATUS_SUCCESS : GGML_STATUS_FAILED;
    }
    for (int attempt = 0; attempt < 2; ++attempt) {
        const bool resend =
            attempt > 0 || conn_->with_graphs([&](std::vector<std::string> & held) { return held[index_]; }) !=
                               req.signature();
        GraphComputeRequest sent;
        if (!message(resend, &sent)) {
            return GGML_STATUS_FAILED;
        }
        GraphComputeReply   rep;
        grpc::ClientContext ctx;
        conn_->prepare(ctx, true);
        const grpc::Status st = conn_->stub().GraphCompute(&ctx, sent, &rep);
        if (!resend && st.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
            continue; // the server no longer holds it
        }
        if (!conn_->check(st, "GraphCompute", false)) {
            return GGML_STATUS_FAILED;
        }
        conn_->with_graphs([&](std::vector<std::string> & held) { held[index_] = req.signature(); });
        return ggml_status(rep.status());
    }
    return GGML_STATUS_FAILED;
}

class RpcDevice final : public ggml_backend_device {
  public:
    RpcDevice(ggml_backend_reg * reg, std::shared_ptr<Connection> conn, uint32_t index)
        : ggml_backend_device(reg), conn_(std::move(conn)), index_(index) {
        const DeviceInfo & info = conn_->devices()[index];
        name_        = "RPC[" + conn_->endpoint() + "]" + info.name();
        description_ = info.description() + " at " + conn_->endpoint();
        buft_        = std::make_unique<RpcBufferType>(this, conn_, index, name_, info);
    }

    const char * name() const override { return name_.c_str(); }
    const char * description() const override { return description_.c_str(); }
    void         memory(size_t * free, size_t * total) const override {
        *free  = 0;
        *total = 0;
        DeviceRequest req;
        req.set_device(index_);
        grpc::ClientContext ctx;
        conn_->prepare(ctx);
        DeviceMemory rep;
        if (conn_->check(conn_->stub().GetDeviceMemory(&ctx, req, &rep), "GetDeviceMemory", false)) {
            *free  = size_t(rep.free());
            *total = size_t(rep.total());
        }
    }
    // Like ggml's RPC devices: an offload target for schedulers.
    enum ggml_backend_dev_type type() const override { return GGML_BACKEND_DEVICE_TYPE_GPU; }
    // Computations and downloads that return before they end, and events
    // (Note [RPC streams]).
    ggml_backend_dev_caps caps() const override {
        ggml_backend_dev_caps c = ggml_backend_device::caps();
        c.async                 = true;
        c.events                = true;
        return c;
    }
    ggml_backend_event * event_new() override { return new RpcEvent(this, *conn_); }
    void                 event_synchronize(ggml_backend_event * event) override {
        if (BulkChannel * bulk = conn_->bulk(); bulk != nullptr) {
            conn_->check(bulk->wait_for(static_cast<RpcEvent *>(event)->frames), "a transfer or computation on the bulk connection");
        }
    }

    ggml_backend * init_backend(const char * params) override {
        (void) params;
        return new RpcBackend(this, conn_, index_, name_.c_str());
    }
    ggml_backend_buffer_type * buffer_type() override { return buft_.get(); }

    // The server's own answer, asked once per node shape (cached).
    bool supports_op(const ggml_tensor * op) const override {
        if (loom::is_view_op(op->op) || op->op == GGML_OP_NONE) {
            // Nothing to compute: the tensor need only fit in one of the
            // device's buffers (as a local device with a binding limit says).
            return ggml_nbytes(op) <= buft_->max_size();
        }
        auto refused = [&](const std::string & why) {
            if (!why.empty()) {
                LOOM_LOG_DEBUG("%s: the server does not compute %s: %s\n", name_.c_str(), ggml_op_desc(op),
                               why.c_str());
            }
            return false;
        };
        std::string why;
        if (!check_node(op, &why)) {
            return refused(why);
        }
        GraphMessage msg;
        msg.set_device(index_);
        auto describe = [&msg](const ggml_tensor * t) {
            TensorDesc * d = msg.add_tensors();
            d->set_type(uint32_t(t->type));
            for (int i = 0; i < 4; ++i) {
                d->add_ne(t->ne[i]);
                d->add_nb(t->nb[i]);
            }
            d->set_op(uint32_t(t->op));
            d->set_op_params(t->op_params, sizeof(t->op_params));
            return d;
        };
        TensorDesc * node = describe(op);
        int          last = 0;
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if (op->src[s] != nullptr) {
                last = s + 1;
            }
        }
        std::vector<uint32_t> srcs(size_t(last), 0);
        for (int s = 0; s < last; ++s) {
            if (op->src[s] != nullptr) {
                describe(op->src[s])->set_op(GGML_OP_NONE);
                srcs[size_t(s)] = uint32_t(msg.tensors_size());
            }
        }
        node = msg.mutable_tensors(0);
        for (uint32_t s : srcs) {
            node->add_src(s);
        }
        msg.add_nodes(1);
        std::string key;
        msg.SerializeToString(&key);
        {
            std::lock_guard<std::mutex> lock(cache_mutex_);
            if (auto it = supported_.find(key); it != supported_.end()) {
                return it->second;
            }
        }
        grpc::ClientContext ctx;
        conn_->prepare(ctx);
        Supported  rep;
        const bool ok = conn_->check(conn_->stub().SupportsOp(&ctx, msg, &rep), "SupportsOp", false) && rep.supported();
        if (!ok) {
            refused(rep.reason());
        }
        std::lock_guard<std::mutex> lock(cache_mutex_);
        supported_[key] = ok;
        return ok;
    }
    bool supports_buft(const ggml_backend_buffer_type * buft) const override { return buft == buft_.get(); }

  private:
    std::shared_ptr<Connection>                   conn_;
    uint32_t                                      index_;
    std::string                                   name_;
    std::string                                   description_;
    std::unique_ptr<RpcBufferType>                buft_;
    mutable std::mutex                            cache_mutex_;
    mutable std::unordered_map<std::string, bool> supported_;
};

// The collective hooks (client_comm.h), the same for every server's reg.
void * comm_proc(const char * fn) {
    if (std::strcmp(fn, "ggml_backend_comm_init") == 0) return reinterpret_cast<void *>(&comm_init);
    if (std::strcmp(fn, "ggml_backend_comm_free") == 0) return reinterpret_cast<void *>(&comm_free);
    if (std::strcmp(fn, "ggml_backend_comm_allreduce_tensor") == 0) return reinterpret_cast<void *>(&comm_allreduce);
    return nullptr;
}

class RpcServerReg final : public ggml_backend_reg {
  public:
    explicit RpcServerReg(std::shared_ptr<Connection> conn) : name_("RPC[" + conn->endpoint() + "]") {
        for (uint32_t i = 0; i < conn->devices().size(); ++i) {
            devices_.push_back(std::make_unique<RpcDevice>(this, conn, i));
        }
    }
    const char *          name() const override { return name_.c_str(); }
    size_t                device_count() const override { return devices_.size(); }
    ggml_backend_device * device(size_t index) override {
        LOOM_REQUIRE(index < devices_.size(), "index %zu out of range (%zu devices)", index, devices_.size());
        return devices_[index].get();
    }
    void * proc_address(const char * fn) override { return comm_proc(fn); }

  private:
    std::string                             name_;
    std::vector<std::unique_ptr<RpcDevice>> devices_;
};

bool speaks_ggml_at(const char * endpoint, int timeout_ms) {
    return endpoint != nullptr && speaks_ggml(endpoint, timeout_ms);
}

class RpcReg final : public ggml_backend_reg {
  public:
    const char *          name() const override { return "RPC"; }
    size_t                device_count() const override { return 0; }
    ggml_backend_device * device(size_t index) override {
        LOOM_REQUIRE(false, "the RPC family has no devices of its own (index %zu); see ggml_backend_rpc_add_server",
                     index);
        return nullptr;
    }
    void * proc_address(const char * fn) override {
        if (std::strcmp(fn, "ggml_backend_rpc_add_server") == 0) {
            return reinterpret_cast<void *>(&ggml_backend_rpc_add_server);
        }
        if (std::strcmp(fn, "ggml_backend_rpc_start_server") == 0) {
            return reinterpret_cast<void *>(&ggml_backend_rpc_start_server);
        }
        // bool (const char * endpoint, int timeout_ms): whether a server of
        // ggml's protocol answers there (ggml_client.h), for the hosting of
        // ggml's RPC plugin (backends/ggml_plugin), which aborts where none does.
        if (std::strcmp(fn, "loom_rpc_speaks_ggml") == 0) {
            return reinterpret_cast<void *>(&speaks_ggml_at);
        }
        return comm_proc(fn);
    }
};

// Servers by endpoint. Never destroyed: devices and buffers of these regs
// may be used until the process ends.
struct Servers {
    std::mutex                                    mutex;
    std::map<std::string, ggml_backend_reg *>     regs;
};
Servers & servers() {
    static auto * s = new Servers;
    return *s;
}

ggml_backend_device * remote_device(const char * endpoint, uint32_t device) {
    ggml_backend_reg_t reg = ggml_backend_rpc_add_server(endpoint);
    if (reg == nullptr) {
        return nullptr;
    }
    if (device >= reg->device_count()) {
        LOOM_LOG_ERROR("RPC[%s]: no device %u (the server has %zu)\n", endpoint, device, reg->device_count());
        return nullptr;
    }
    return reg->device(device);
}

} // namespace

std::shared_ptr<Connection> loom::rpc::backend_connection(ggml_backend_t backend) {
    auto * b = dynamic_cast<RpcBackend *>(backend);
    return b != nullptr ? b->connection() : nullptr;
}

extern "C" {

void loom_rpc_set_token(const char * token) {
    ClientConfig &              c = ClientConfig::get();
    std::lock_guard<std::mutex> lock(c.mutex);
    c.token_set = token != nullptr;
    c.token     = token != nullptr ? token : "";
}

void loom_rpc_set_timeouts(uint32_t call_ms, uint32_t compute_ms) {
    ClientConfig &              c = ClientConfig::get();
    std::lock_guard<std::mutex> lock(c.mutex);
    if (call_ms != 0) {
        c.call_ms = call_ms;
    }
    if (compute_ms != 0) {
        c.compute_ms = compute_ms;
    }
}

ggml_backend_reg_t ggml_backend_rpc_reg(void) {
    static RpcReg reg;
    return &reg;
}

ggml_backend_reg_t ggml_backend_rpc_add_server(const char * endpoint) {
    LOOM_REQUIRE(endpoint != nullptr, "NULL endpoint");
    // The registry first: made for the first time, it adds the servers of
    // LOOM_RPC_SERVERS through this function, which must not find the lock
    // below taken.
    (void) ggml_backend_reg_count();
    Servers &                   s = servers();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (auto it = s.regs.find(endpoint); it != s.regs.end()) {
        return it->second;
    }
    // Which protocol the server speaks: LOOM_RPC_PROTOCOL (loom or ggml),
    // else ggml's when it answers ggml's HELLO (ggml's rpc-server,
    // loom-rpc-server --protocol ggml), else loom's.
    const char *      forced = std::getenv("LOOM_RPC_PROTOCOL");
    const std::string protocol =
        forced != nullptr && *forced != '\0' ? forced : speaks_ggml(endpoint, 2000) ? "ggml" : "loom";
    ggml_backend_reg * reg = nullptr;
    if (protocol == "ggml") {
        reg = ggml_protocol_reg(endpoint);
    } else if (protocol == "loom") {
        std::shared_ptr<Connection> conn = Connection::open(endpoint);
        reg                              = conn ? new RpcServerReg(conn) : nullptr;
    } else {
        LOOM_LOG_ERROR("RPC[%s]: LOOM_RPC_PROTOCOL=%s: loom or ggml\n", endpoint, forced);
    }
    if (reg == nullptr) {
        return nullptr;
    }
    s.regs[endpoint] = reg;
    ggml_backend_register(reg);
    return reg;
}

ggml_backend_t ggml_backend_rpc_init(const char * endpoint, uint32_t device) {
    ggml_backend_device * dev = remote_device(endpoint, device);
    return dev != nullptr ? dev->init_backend(nullptr) : nullptr;
}

bool ggml_backend_is_rpc(ggml_backend_t backend) {
    return backend != nullptr && ggml_guid_matches(backend->guid, &g_rpc_guid);
}

ggml_backend_buffer_type_t ggml_backend_rpc_buffer_type(const char * endpoint, uint32_t device) {
    ggml_backend_device * dev = remote_device(endpoint, device);
    return dev != nullptr ? dev->buffer_type() : nullptr;
}

void ggml_backend_rpc_get_device_memory(const char * endpoint, uint32_t device, size_t * free, size_t * total) {
    LOOM_REQUIRE(free != nullptr && total != nullptr, "NULL free or total");
    ggml_backend_device * dev = remote_device(endpoint, device);
    if (dev == nullptr) {
        *free  = 0;
        *total = 0;
        return;
    }
    dev->memory(free, total);
}

} // extern "C"
