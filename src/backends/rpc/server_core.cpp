// The request handlers of loom-rpc-server (see server_core.h).

#include "server_core.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include <sys/socket.h>

#include "backend/backend_impl.h"
#include "core/common.h"
#include "peer.h"

namespace loom::rpc {

// Compares without stopping at the first difference.
bool same_bytes(const std::string & a, const std::string & b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    }
    return diff == 0;
}

std::string random_bytes(size_t n) {
    std::random_device rd;
    std::string        out;
    while (out.size() < n) {
        const uint32_t v = rd();
        for (int k = 0; k < 4 && out.size() < n; ++k) {
            out.push_back(char(uint8_t(v >> (8 * k))));
        }
    }
    return out;
}

namespace {

grpc::Status invalid(const std::string & what, const std::string & why) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what + ": " + why);
}

std::string random_id() {
    std::random_device rd;
    std::string        id;
    static const char  digits[] = "0123456789abcdef";
    for (int i = 0; i < 8; ++i) {
        const uint32_t v = rd();
        for (int k = 0; k < 8; ++k) {
            id.push_back(digits[(v >> (4 * k)) & 15]);
        }
    }
    return id; // 256 random bits
}

} // namespace

// ---- sessions --------------------------------------------------------------

ggml_backend_buffer_t Session::find_buffer(uint64_t handle) const {
    auto it = buffers.find(handle);
    return it != buffers.end() ? it->second.get() : nullptr;
}

ServerCore::ServerCore(ServerOptions options)
    : options_(std::move(options)), cache_(options_.cache_dir, options_.cache_bytes) {
    session_quota_ = options_.max_session_bytes;
    if (session_quota_ == 0) {
        for (ggml_backend_dev_t dev : options_.devices) {
            size_t free = 0, total = 0;
            ggml_backend_dev_memory(dev, &free, &total);
            session_quota_ = std::max(session_quota_, total);
        }
        if (session_quota_ == 0) {
            session_quota_ = SIZE_MAX;
        }
    }
}

ServerCore::~ServerCore() {
    std::vector<std::string> ids;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto & [id, s] : sessions_) {
            ids.push_back(id);
        }
    }
    for (const std::string & id : ids) {
        close_session(id);
    }
}

std::shared_ptr<Session> ServerCore::open_session(std::string * id, std::string * bulk_ticket) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (sessions_.size() >= options_.max_sessions) {
        return nullptr;
    }
    auto s = std::make_shared<Session>();
    s->backends.resize(options_.devices.size());
    s->graphs.resize(options_.devices.size());
    s->bulk_ticket = random_bytes(32);
    if (bulk_ticket != nullptr) {
        *bulk_ticket = s->bulk_ticket;
    }
    *id = random_id();
    sessions_[*id] = s;
    return s;
}

void ServerCore::close_session(const std::string & id) {
    std::shared_ptr<Session> s;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = sessions_.find(id);
        if (it == sessions_.end()) {
            return;
        }
        s = std::move(it->second);
        sessions_.erase(it);
    }
    {
        // Wakes a transfer blocked on the connection, which then ends.
        std::lock_guard<std::mutex> lock(s->bulk_mutex);
        s->bulk_claimed = true;
        if (s->bulk_fd >= 0) {
            shutdown(s->bulk_fd, SHUT_RDWR);
        }
        // And a reduction blocked on its peers; the peers see the links end.
        for (auto & [handle, g] : s->groups) {
            g->shut("the session ended");
        }
        s->groups.clear();
    }
    std::lock_guard<std::mutex> lock(s->mutex);
    s->closed = true;
    s->graphs.clear();
    s->buffers.clear();
    buffer_bytes_ -= s->bytes;
    s->bytes = 0;
    s->backends.clear();
}

std::shared_ptr<Session> ServerCore::find_session(const std::string & id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sessions_.find(id);
    return it != sessions_.end() ? it->second : nullptr;
}

std::shared_ptr<Session> ServerCore::claim_bulk(const std::string & ticket, int fd) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::shared_ptr<Session>    found;
    for (const auto & [id, s] : sessions_) {
        // Every session is compared, so the time says nothing of which matched.
        std::lock_guard<std::mutex> bulk_lock(s->bulk_mutex);
        if (same_bytes(s->bulk_ticket, ticket) && !s->bulk_claimed) {
            found = s;
        }
    }
    if (found) {
        std::lock_guard<std::mutex> bulk_lock(found->bulk_mutex);
        found->bulk_claimed = true;
        found->bulk_fd      = fd;
    }
    return found;
}

void ServerCore::release_bulk(Session & s, int fd) {
    std::lock_guard<std::mutex> lock(s.bulk_mutex);
    if (s.bulk_fd == fd) {
        s.bulk_fd = -1;
    }
}

size_t ServerCore::session_count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return sessions_.size();
}

void ServerCore::describe(ConnectEvent * ev) const {
    ev->set_protocol_version(k_protocol_version);
    for (ggml_backend_dev_t dev : options_.devices) {
        DeviceInfo * d = ev->add_devices();
        d->set_name(ggml_backend_dev_name(dev));
        d->set_description(ggml_backend_dev_description(dev));
        d->set_type(uint32_t(ggml_backend_dev_type(dev)));
        size_t free = 0, total = 0;
        ggml_backend_dev_memory(dev, &free, &total);
        d->set_memory_free(free);
        d->set_memory_total(total);
        ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev);
        d->set_alignment(ggml_backend_buft_get_alignment(buft));
        d->set_max_size(ggml_backend_buft_get_max_size(buft));
        d->set_init_tensor(buft->needs_init_tensor());
    }
    ev->set_content_cache(cache_.enabled());
}

// ---- handlers --------------------------------------------------------------

// Every handler: the session's lock, then checks, then work.
#define LOOM_RPC_LOCK_SESSION(s) \
    std::lock_guard<std::mutex> session_lock((s).mutex); \
    if ((s).closed) { \
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "session closed"); \
    }

grpc::Status ServerCore::get_device_memory(Session & s, const DeviceRequest & req, DeviceMemory * out) {
    LOOM_RPC_LOCK_SESSION(s);
    if (req.device() >= options_.devices.size()) {
        return invalid("GetDeviceMemory", "no device " + std::to_string(req.device()));
    }
    size_t free = 0, total = 0;
    ggml_backend_dev_memory(options_.devices[req.device()], &free, &total);
    out->set_free(free);
    out->set_total(total);
    return grpc::Status::OK;
}

grpc::Status ServerCore::supports_op(Session & s, const GraphMessage & req, Supported * out) {
    LOOM_RPC_LOCK_SESSION(s);
    if (req.device() >= options_.devices.size()) {
        return invalid("SupportsOp", "no device " + std::to_string(req.device()));
    }
    std::string why;
    out->set_supported(rebuild_graph(req, nullptr, options_.devices[req.device()], &why) != nullptr);
    if (!out->supported()) {
        out->set_reason(why);
    }
    return grpc::Status::OK;
}

grpc::Status ServerCore::alloc_buffer(Session & s, const AllocBufferRequest & req, AllocBufferReply * out) {
    LOOM_RPC_LOCK_SESSION(s);
    if (req.device() >= options_.devices.size()) {
        return invalid("AllocBuffer", "no device " + std::to_string(req.device()));
    }
    ggml_backend_dev_t         dev  = options_.devices[req.device()];
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev);
    size_t                     free = 0, total = 0;
    ggml_backend_dev_memory(dev, &free, &total);
    // (Devices that share another's memory, like BLAS, report none of their own.)
    if (req.size() > ggml_backend_buft_get_max_size(buft) || (total > 0 && req.size() > total)) {
        return invalid("AllocBuffer", "size " + std::to_string(req.size()) + " above the device's maximum");
    }
    if (req.size() > session_quota_ - s.bytes) {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "AllocBuffer: the session would hold more than " + std::to_string(session_quota_) +
                                " bytes");
    }
    ggml_backend_buffer_ptr buf(ggml_backend_buft_alloc_buffer(buft, size_t(req.size())));
    if (!buf) {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "AllocBuffer: cannot allocate " + std::to_string(req.size()) + " bytes");
    }
    // Memory comes back from the allocator as another session left it: a new
    // buffer starts cleared, so no byte of one session reaches another.
    ggml_backend_buffer_clear(buf.get(), 0);
    const uint64_t handle = s.next_handle++;
    out->set_buffer(handle);
    out->set_size(ggml_backend_buffer_get_size(buf.get()));
    s.bytes += ggml_backend_buffer_get_size(buf.get()); // what free_buffer gives back
    buffer_bytes_ += ggml_backend_buffer_get_size(buf.get());
    s.buffers[handle] = std::move(buf);
    return grpc::Status::OK;
}

grpc::Status ServerCore::get_alloc_size(Session & s, const AllocSizeRequest & req, AllocSizeReply * out) {
    LOOM_RPC_LOCK_SESSION(s);
    if (req.device() >= options_.devices.size()) {
        return invalid("GetAllocSize", "no device " + std::to_string(req.device()));
    }
    ggml_tensor t{};
    std::string why;
    if (req.tensor().buffer() != 0 || !decode_tensor(req.tensor(), BufferLookup(), &t, &why)) {
        return invalid("GetAllocSize", req.tensor().buffer() != 0 ? "the tensor names a buffer" : why);
    }
    if (req.tensor().op() < GGML_OP_COUNT) {
        t.op = ggml_op(req.tensor().op());
    }
    out->set_size(ggml_backend_buft_get_alloc_size(ggml_backend_dev_buffer_type(options_.devices[req.device()]), &t));
    return grpc::Status::OK;
}

grpc::Status ServerCore::free_buffer(Session & s, const BufferRequest & req, Empty *) {
    LOOM_RPC_LOCK_SESSION(s);
    auto it = s.buffers.find(req.buffer());
    if (it == s.buffers.end()) {
        return invalid("FreeBuffer", "unknown buffer " + std::to_string(req.buffer()));
    }
    // Cached graphs may point into it.
    for (Session::CachedGraph & g : s.graphs) {
        g = {};
    }
    s.bytes -= ggml_backend_buffer_get_size(it->second.get());
    buffer_bytes_ -= ggml_backend_buffer_get_size(it->second.get());
    s.buffers.erase(it);
    return grpc::Status::OK;
}

grpc::Status ServerCore::clear_buffer(Session & s, const ClearBufferRequest & req, Empty *) {
    LOOM_RPC_LOCK_SESSION(s);
    ggml_backend_buffer_t buf = s.find_buffer(req.buffer());
    if (buf == nullptr) {
        return invalid("ClearBuffer", "unknown buffer " + std::to_string(req.buffer()));
    }
    ggml_backend_buffer_clear(buf, uint8_t(req.value()));
    return grpc::Status::OK;
}

grpc::Status ServerCore::set_tensor(Session & s, const SetTensorRequest & req, Empty *) {
    LOOM_RPC_LOCK_SESSION(s);
    ggml_tensor t{};
    std::string why;
    auto        lookup = [&s](uint64_t h) { return s.find_buffer(h); };
    if (!decode_tensor(req.tensor(), lookup, &t, &why) || !check_range(&t, req.offset(), req.data().size(), &why)) {
        return invalid("SetTensor", why);
    }
    if (!req.data().empty()) {
        t.buffer->set_tensor(&t, req.data().data(), size_t(req.offset()), req.data().size());
    }
    return grpc::Status::OK;
}

grpc::Status ServerCore::with_range(Session & s, const char * what, const TensorDesc & d, uint64_t offset,
                                    uint64_t size, const std::function<grpc::Status(ggml_tensor & t)> & fn) {
    LOOM_RPC_LOCK_SESSION(s);
    ggml_tensor t{};
    std::string why;
    auto        lookup = [&s](uint64_t h) { return s.find_buffer(h); };
    if (!decode_tensor(d, lookup, &t, &why) || !check_range(&t, offset, size, &why)) {
        return invalid(what, why);
    }
    return fn(t);
}

grpc::Status ServerCore::with_blocks(Session & s, const char * what, const Transfer2d & req, uint64_t announced,
                                     const std::function<grpc::Status(ggml_tensor & t)> & fn) {
    LOOM_RPC_LOCK_SESSION(s);
    ggml_tensor t{};
    std::string why;
    uint64_t    total  = 0;
    auto        lookup = [&s](uint64_t h) { return s.find_buffer(h); };
    if (!decode_tensor(req.tensor(), lookup, &t, &why) ||
        !check_blocks(&t, req.offset(), req.block(), req.count(), req.stride(), &total, &why)) {
        return invalid(what, why);
    }
    if (announced != total) {
        return invalid(what, "the frame announces " + std::to_string(announced) + " bytes for " +
                                 std::to_string(req.count()) + " blocks of " + std::to_string(req.block()) +
                                 " bytes");
    }
    return fn(t);
}

grpc::Status ServerCore::set_tensor_hash(Session & s, const SetTensorHashRequest & req, SetTensorHashReply * out) {
    LOOM_RPC_LOCK_SESSION(s);
    ggml_tensor t{};
    std::string why;
    auto        lookup = [&s](uint64_t h) { return s.find_buffer(h); };
    if (!decode_tensor(req.tensor(), lookup, &t, &why) || !check_range(&t, req.offset(), req.size(), &why)) {
        return invalid("SetTensorHash", why);
    }
    if (req.store()) {
        // The client uploaded the range: keep what it holds.
        if (!cache_.keeps(size_t(req.size()))) {
            out->set_found(false);
            return grpc::Status::OK;
        }
        std::shared_ptr<Blob> bytes = cache_.take(size_t(req.size()));
        if (!bytes->ok()) {
            return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "SetTensorHash: no memory to keep the content");
        }
        if (bytes->size() != 0) {
            t.buffer->get_tensor(&t, bytes->data(), size_t(req.offset()), bytes->size());
        }
        cache_.put(std::move(bytes));
        out->set_found(true);
        return grpc::Status::OK;
    }
    // A lookup by probe (no hash), or by hash with the probe or without.
    const bool by_probe = req.sha256().empty();
    if (by_probe ? req.probe().size() != sizeof(Sha256) : req.sha256().size() != sizeof(Sha256)) {
        return invalid("SetTensorHash", by_probe ? "the probe must be a SHA-256 of 32 bytes"
                                                 : "the hash must be a SHA-256 of 32 bytes");
    }
    if (!req.probe().empty() && req.probe().size() != sizeof(Sha256)) {
        return invalid("SetTensorHash", "the probe must be a SHA-256 of 32 bytes");
    }
    Sha256 probe, key;
    std::memcpy(probe.data(), req.probe().data(), req.probe().size());
    if (by_probe) {
        out->set_found(false);
        out->set_probe_known(cache_.may_hold(probe));
        return grpc::Status::OK;
    }
    std::memcpy(key.data(), req.sha256().data(), key.size());
    auto bytes = cache_.find(key, size_t(req.size()), req.probe().empty() ? nullptr : &probe);
    if (!bytes) {
        out->set_found(false);
        return grpc::Status::OK;
    }
    if (bytes->size() != 0) {
        t.buffer->set_tensor(&t, bytes->data(), size_t(req.offset()), bytes->size());
    }
    out->set_found(true);
    return grpc::Status::OK;
}

grpc::Status ServerCore::get_tensor(Session & s, const GetTensorRequest & req, GetTensorReply * out) {
    LOOM_RPC_LOCK_SESSION(s);
    ggml_tensor t{};
    std::string why;
    auto        lookup = [&s](uint64_t h) { return s.find_buffer(h); };
    if (!decode_tensor(req.tensor(), lookup, &t, &why) || !check_range(&t, req.offset(), req.size(), &why)) {
        return invalid("GetTensor", why);
    }
    if (req.size() > k_max_message_bytes - 4096) {
        return invalid("GetTensor", "size " + std::to_string(req.size()) + " above the message limit");
    }
    std::string * data = out->mutable_data();
    data->resize(size_t(req.size()));
    if (!data->empty()) {
        t.buffer->get_tensor(&t, data->data(), size_t(req.offset()), data->size());
    }
    return grpc::Status::OK;
}

grpc::Status ServerCore::memset_tensor(Session & s, const MemsetTensorRequest & req, Empty *) {
    LOOM_RPC_LOCK_SESSION(s);
    ggml_tensor t{};
    std::string why;
    auto        lookup = [&s](uint64_t h) { return s.find_buffer(h); };
    if (!decode_tensor(req.tensor(), lookup, &t, &why) || !check_range(&t, req.offset(), req.size(), &why)) {
        return invalid("MemsetTensor", why);
    }
    if (req.size() > 0) {
        t.buffer->memset_tensor(&t, uint8_t(req.value()), size_t(req.offset()), size_t(req.size()));
    }
    return grpc::Status::OK;
}

grpc::Status ServerCore::copy_tensor(Session & s, const CopyTensorRequest & req, CopyTensorReply * out) {
    LOOM_RPC_LOCK_SESSION(s);
    ggml_tensor src{}, dst{};
    std::string why;
    auto        lookup = [&s](uint64_t h) { return s.find_buffer(h); };
    if (!decode_tensor(req.src(), lookup, &src, &why)) {
        return invalid("CopyTensor", "source: " + why);
    }
    if (!decode_tensor(req.dst(), lookup, &dst, &why)) {
        return invalid("CopyTensor", "destination: " + why);
    }
    const size_t n = ggml_nbytes(&src);
    if (n > ggml_nbytes(&dst)) {
        return invalid("CopyTensor", "the source (" + std::to_string(n) + " bytes) is larger than the destination (" +
                                         std::to_string(ggml_nbytes(&dst)) + " bytes)");
    }
    // The copy is a memcpy of n bytes, which ranges that overlap must not be.
    const auto * from = static_cast<const uint8_t *>(src.data);
    const auto * to   = static_cast<const uint8_t *>(dst.data);
    if (n > 0 && src.buffer == dst.buffer && from < to + n && to < from + n) {
        return invalid("CopyTensor", "the source and the destination overlap");
    }
    if (n > 0 && !dst.buffer->cpy_tensor(&src, &dst)) {
        std::vector<uint8_t> staging(n);
        src.buffer->get_tensor(&src, staging.data(), 0, n);
        dst.buffer->set_tensor(&dst, staging.data(), 0, n);
    }
    out->set_copied(true);
    return grpc::Status::OK;
}

grpc::Status ServerCore::init_tensor(Session & s, const InitTensorRequest & req, Empty *) {
    LOOM_RPC_LOCK_SESSION(s);
    ggml_tensor t{};
    std::string why;
    auto        lookup = [&s](uint64_t h) { return s.find_buffer(h); };
    if (!decode_tensor(req.tensor(), lookup, &t, &why)) {
        return invalid("InitTensor", why);
    }
    if (req.tensor().op() >= GGML_OP_COUNT) {
        return invalid("InitTensor", "unknown op " + std::to_string(req.tensor().op()));
    }
    t.op = ggml_op(req.tensor().op());
    // The device may touch every byte it places the tensor in (padding
    // included): those must lie in the buffer too.
    ggml_backend_buffer_type_t buft   = ggml_backend_buffer_get_type(t.buffer);
    const uint64_t             placed = ggml_backend_buft_get_alloc_size(buft, &t);
    const uint64_t             offset = req.tensor().offset();
    if (placed > t.buffer->size || offset > t.buffer->size - placed) {
        return invalid("InitTensor", "the tensor takes " + std::to_string(placed) + " bytes on the device at offset " +
                                         std::to_string(offset) + ", which do not fit its buffer of " +
                                         std::to_string(t.buffer->size) + " bytes");
    }
    if (!buft->needs_init_tensor()) {
        return grpc::Status::OK;
    }
    const ggml_status st = t.buffer->init_tensor(&t);
    if (st != GGML_STATUS_SUCCESS) {
        return grpc::Status(grpc::StatusCode::INTERNAL,
                            "InitTensor: the device's init_tensor failed (status " + std::to_string(int(st)) + ")");
    }
    if (t.extra != nullptr) {
        // State the device attached to the tensor object, which lives only for this call.
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "InitTensor: the device keeps per-tensor state, which a remote tensor cannot hold");
    }
    return grpc::Status::OK;
}

ggml_backend_t ServerCore::backend_for(Session & s, uint32_t device) {
    if (!s.backends[device]) {
        ggml_backend_dev_t dev = options_.devices[device];
        s.backends[device].reset(ggml_backend_dev_init(dev, nullptr));
        if (s.backends[device] && options_.n_threads > 0) {
            auto set_threads = reinterpret_cast<ggml_backend_set_n_threads_t>(
                ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_set_n_threads"));
            if (set_threads != nullptr) {
                set_threads(s.backends[device].get(), options_.n_threads);
            }
        }
    }
    return s.backends[device].get();
}

grpc::Status ServerCore::graph_compute(Session & s, const GraphComputeRequest & req, GraphComputeReply * out) {
    LOOM_RPC_LOCK_SESSION(s);
    if (req.device() >= options_.devices.size()) {
        return invalid("GraphCompute", "no device " + std::to_string(req.device()));
    }
    if (req.signature().size() > 64) {
        return invalid("GraphCompute", "signature longer than 64 bytes");
    }
    Session::CachedGraph & cached = s.graphs[req.device()];
    if (req.has_graph()) {
        if (req.graph().device() != req.device()) {
            return invalid("GraphCompute", "the graph names another device");
        }
        std::string why;
        auto        lookup = [&s](uint64_t h) { return s.find_buffer(h); };
        auto        g      = rebuild_graph(req.graph(), lookup, options_.devices[req.device()], &why);
        if (!g) {
            cached = {};
            return invalid("GraphCompute", why);
        }
        cached = {req.signature(), std::move(g)};
    } else if (!cached.graph || cached.signature != req.signature()) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "GraphCompute: no cached graph with this signature");
    }
    std::string why;
    if (!check_indices(*cached.graph, &why)) {
        return invalid("GraphCompute", why);
    }
    ggml_backend_t backend = backend_for(s, req.device());
    if (backend == nullptr) {
        return grpc::Status(grpc::StatusCode::INTERNAL, "GraphCompute: cannot create a backend on the device");
    }
    const ggml_status st = ggml_backend_graph_compute(backend, cached.graph->graph);
    out->set_status(int32_t(st));
    return grpc::Status::OK;
}

} // namespace loom::rpc
