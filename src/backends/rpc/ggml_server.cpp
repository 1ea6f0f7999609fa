// ggml's RPC protocol on top of ServerCore (ggml_server.h).

#include "ggml_server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "bulk.h"
#include "core/common.h"
#include "ggml_wire.h"

namespace loom::rpc {

namespace {

namespace gw = ggml_wire;

// Where a buffer appears to the client: handle << k_base_shift. Buffers are
// smaller than 1 << k_base_shift bytes and handles below 1 << (64 - shift).
constexpr int      k_base_shift   = 40;
constexpr uint64_t k_max_buffer   = (uint64_t(1) << k_base_shift) - 1;
constexpr uint64_t k_max_handle   = (uint64_t(1) << (64 - k_base_shift)) - 1;
constexpr size_t   k_chunk        = size_t(4) << 20; // staging of transfers that are not host memory
// The same signature for every graph of a connection: GRAPH_RECOMPUTE runs
// the last graph computed on its device, as in ggml.
constexpr const char * k_signature = "ggml";

const char * cmd_name(gw::Cmd c) {
    switch (c) {
        case gw::Cmd::alloc_buffer: return "ALLOC_BUFFER";
        case gw::Cmd::get_alignment: return "GET_ALIGNMENT";
        case gw::Cmd::get_max_size: return "GET_MAX_SIZE";
        case gw::Cmd::buffer_get_base: return "BUFFER_GET_BASE";
        case gw::Cmd::free_buffer: return "FREE_BUFFER";
        case gw::Cmd::buffer_clear: return "BUFFER_CLEAR";
        case gw::Cmd::set_tensor: return "SET_TENSOR";
        case gw::Cmd::set_tensor_hash: return "SET_TENSOR_HASH";
        case gw::Cmd::get_tensor: return "GET_TENSOR";
        case gw::Cmd::copy_tensor: return "COPY_TENSOR";
        case gw::Cmd::graph_compute: return "GRAPH_COMPUTE";
        case gw::Cmd::get_device_memory: return "GET_DEVICE_MEMORY";
        case gw::Cmd::init_tensor: return "INIT_TENSOR";
        case gw::Cmd::get_alloc_size: return "GET_ALLOC_SIZE";
        case gw::Cmd::hello: return "HELLO";
        case gw::Cmd::device_count: return "DEVICE_COUNT";
        case gw::Cmd::graph_recompute: return "GRAPH_RECOMPUTE";
        case gw::Cmd::memset_tensor: return "MEMSET_TENSOR";
        case gw::Cmd::none: return "NONE";
    }
    return "?";
}

std::string cache_name(uint64_t hash) {
    char s[17];
    std::snprintf(s, sizeof(s), "%016" PRIx64, hash);
    return s;
}

// One client's connection: its session in ServerCore and the buffers it
// holds there (handle → size).
class Connection {
  public:
    Connection(ServerCore & core, const GgmlServerOptions & options, WireIO & io, std::shared_ptr<Session> s)
        : core_(core), options_(options), io_(io), s_(std::move(s)) {}

    // Runs requests until the client leaves or one is refused.
    void run() {
        if (!hello()) {
            return;
        }
        for (;;) {
            uint8_t  cmd  = 0;
            uint64_t size = 0;
            if (!io_.wait(-1) || !io_.read(&cmd, 1)) {
                return; // the client left
            }
            if (cmd >= gw::k_cmd_count) {
                refuse("request", "unknown command " + std::to_string(cmd));
                return;
            }
            if (!io_.read(&size, sizeof(size))) {
                return;
            }
            cmd_ = gw::Cmd(cmd);
            if (!handle(size)) {
                return;
            }
        }
    }

  private:
    bool hello() {
        uint8_t     cmd  = 0;
        uint64_t    size = 0;
        gw::HelloReq req{};
        if (!io_.wait(int(bulk::k_io_timeout_ms)) || !io_.read(&cmd, 1) ||
            !io_.read(&size, sizeof(size))) {
            return false;
        }
        cmd_ = gw::Cmd::hello;
        if (cmd != uint8_t(gw::Cmd::hello)) {
            return refuse("first request", "not HELLO (command " + std::to_string(cmd) + ")");
        }
        if (!take(&req, sizeof(req), size)) {
            return false;
        }
        gw::HelloRsp rsp{};
        rsp.major = gw::k_major;
        rsp.minor = gw::k_minor;
        rsp.patch = gw::k_patch;
        return answer(&rsp, sizeof(rsp)); // capabilities all zero: TCP
    }

    bool handle(uint64_t size) {
        switch (cmd_) {
            case gw::Cmd::hello: return refuse("HELLO", "sent twice");
            case gw::Cmd::none: return refuse("NONE", "not a request");
            case gw::Cmd::device_count: {
                if (!take(nullptr, 0, size)) {
                    return false;
                }
                const gw::DeviceCountRsp rsp{uint32_t(options_.devices.size())};
                return answer(&rsp, sizeof(rsp));
            }
            case gw::Cmd::get_alignment:
            case gw::Cmd::get_max_size: {
                gw::DeviceReq req{};
                if (!take(&req, sizeof(req), size) || !device(req.device)) {
                    return false;
                }
                ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(options_.devices[req.device]);
                const gw::U64Rsp rsp{cmd_ == gw::Cmd::get_alignment
                                         ? uint64_t(ggml_backend_buft_get_alignment(buft))
                                         : std::min<uint64_t>(ggml_backend_buft_get_max_size(buft), k_max_buffer)};
                return answer(&rsp, sizeof(rsp));
            }
            case gw::Cmd::get_device_memory: {
                gw::DeviceReq req{};
                DeviceRequest r;
                DeviceMemory  m;
                if (!take(&req, sizeof(req), size)) {
                    return false;
                }
                r.set_device(req.device);
                if (!ok(core_.get_device_memory(*s_, r, &m))) {
                    return false;
                }
                const gw::DeviceMemoryRsp rsp{m.free(), m.total()};
                return answer(&rsp, sizeof(rsp));
            }
            case gw::Cmd::alloc_buffer: return alloc_buffer(size);
            case gw::Cmd::buffer_get_base: {
                gw::BufferReq req{};
                if (!take(&req, sizeof(req), size) || !known(req.remote_ptr)) {
                    return false;
                }
                const gw::U64Rsp rsp{req.remote_ptr << k_base_shift};
                return answer(&rsp, sizeof(rsp));
            }
            case gw::Cmd::free_buffer: {
                gw::BufferReq req{};
                BufferRequest r;
                Empty         e;
                if (!take(&req, sizeof(req), size) || !known(req.remote_ptr)) {
                    return false;
                }
                r.set_buffer(req.remote_ptr);
                sizes_.erase(req.remote_ptr);
                return ok(core_.free_buffer(*s_, r, &e));
            }
            case gw::Cmd::buffer_clear: {
                gw::BufferClearReq req{};
                ClearBufferRequest r;
                Empty              e;
                if (!take(&req, sizeof(req), size) || !known(req.remote_ptr)) {
                    return false;
                }
                r.set_buffer(req.remote_ptr);
                r.set_value(req.value);
                return ok(core_.clear_buffer(*s_, r, &e));
            }
            case gw::Cmd::memset_tensor: {
                gw::MemsetTensorReq req{};
                MemsetTensorRequest r;
                Empty               e;
                if (!take(&req, sizeof(req), size) || !desc(req.tensor, r.mutable_tensor())) {
                    return false;
                }
                r.set_offset(req.offset);
                r.set_size(req.size);
                r.set_value(req.value);
                return ok(core_.memset_tensor(*s_, r, &e));
            }
            case gw::Cmd::init_tensor: {
                gw::InitTensorReq req{};
                InitTensorRequest r;
                Empty             e;
                return take(&req, sizeof(req), size) && desc(req.tensor, r.mutable_tensor()) &&
                       ok(core_.init_tensor(*s_, r, &e));
            }
            case gw::Cmd::get_alloc_size: {
                gw::GetAllocSizeReq req{};
                AllocSizeRequest    r;
                AllocSizeReply      out;
                if (!take(&req, sizeof(req), size)) {
                    return false;
                }
                // The size a tensor takes on the device, wherever it lies.
                req.tensor.buffer = 0;
                req.tensor.data   = 0;
                r.set_device(req.device);
                if (!desc(req.tensor, r.mutable_tensor()) || !ok(core_.get_alloc_size(*s_, r, &out))) {
                    return false;
                }
                const gw::GetAllocSizeRsp rsp{out.size()};
                return answer(&rsp, sizeof(rsp));
            }
            case gw::Cmd::copy_tensor: {
                gw::CopyTensorReq req{};
                CopyTensorRequest r;
                CopyTensorReply   out;
                if (!take(&req, sizeof(req), size) || !desc(req.src, r.mutable_src()) ||
                    !desc(req.dst, r.mutable_dst()) || !ok(core_.copy_tensor(*s_, r, &out))) {
                    return false;
                }
                const gw::ResultRsp rsp{uint8_t(out.copied() ? 1 : 0)};
                return answer(&rsp, sizeof(rsp));
            }
            case gw::Cmd::set_tensor: return set_tensor(size);
            case gw::Cmd::set_tensor_hash: return set_tensor_hash(size);
            case gw::Cmd::get_tensor: return get_tensor(size);
            case gw::Cmd::graph_compute: return graph_compute(size);
            case gw::Cmd::graph_recompute: {
                gw::DeviceReq       req{};
                GraphComputeRequest r;
                if (!take(&req, sizeof(req), size)) {
                    return false;
                }
                r.set_device(req.device);
                r.set_signature(k_signature);
                return compute(r);
            }
        }
        return refuse("request", "unknown command");
    }

    bool alloc_buffer(uint64_t size) {
        gw::AllocBufferReq req{};
        if (!take(&req, sizeof(req), size)) {
            return false;
        }
        AllocBufferRequest r;
        AllocBufferReply   out;
        r.set_device(req.device);
        r.set_size(req.size);
        gw::AllocBufferRsp rsp{};
        if (req.size > k_max_buffer) {
            LOOM_LOG_WARN("rpc server (ggml protocol): ALLOC_BUFFER of %" PRIu64 " bytes: above %" PRIu64 "\n", req.size,
                          k_max_buffer);
        } else if (const grpc::Status st = core_.alloc_buffer(*s_, r, &out); !st.ok()) {
            // Not a broken request: the client learns that the buffer is not
            // there and goes on.
            LOOM_LOG_WARN("rpc server (ggml protocol): %s\n", st.error_message().c_str());
        } else if (out.buffer() > k_max_handle) {
            BufferRequest f;
            Empty         e;
            f.set_buffer(out.buffer());
            (void) core_.free_buffer(*s_, f, &e);
        } else {
            rsp.remote_ptr  = out.buffer();
            rsp.remote_size = out.size();
            sizes_[out.buffer()] = out.size();
        }
        return answer(&rsp, sizeof(rsp));
    }

    bool set_tensor(uint64_t size) {
        if (size < gw::k_set_tensor_header) {
            return refuse("SET_TENSOR", std::to_string(size) + " bytes, fewer than its header");
        }
        uint8_t header[gw::k_set_tensor_header];
        gw::Tensor t{};
        uint8_t    cache_flag = 0;
        uint64_t   offset     = 0;
        if (!io_.read(header, sizeof(header))) {
            return false;
        }
        std::memcpy(&t, header, sizeof(t));
        std::memcpy(&cache_flag, header + sizeof(t), 1);
        std::memcpy(&offset, header + sizeof(t) + 1, sizeof(offset));
        TensorDesc d;
        if (!desc(t, &d)) {
            return false;
        }
        const uint64_t n = size - gw::k_set_tensor_header;
        CacheWriter    cache(cache_flag != 0 && n > 0 ? options_.cache_dir : std::string());
        return ok(core_.with_range(*s_, "SetTensor", d, offset, n, [&](ggml_tensor & dst) {
            return stream_in(dst, offset, n, [&](const uint8_t * p, size_t k) {
                cache.add(p, k);
                return true;
            });
        })) && cache.finish();
    }

    bool set_tensor_hash(uint64_t size) {
        gw::SetTensorHashReq req{};
        TensorDesc           d;
        if (!take(&req, sizeof(req), size) || !desc(req.tensor, &d)) {
            return false;
        }
        gw::ResultRsp rsp{0};
        const int     fd = options_.cache_dir.empty()
                               ? -1
                               : open((options_.cache_dir + "/" + cache_name(req.hash)).c_str(), O_RDONLY | O_CLOEXEC);
        struct stat st {};
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && uint64_t(st.st_size) <= k_max_buffer) {
            const uint64_t n    = uint64_t(st.st_size);
            uint64_t       hash = gw::k_fnv_offset, at = 0;
            bool           read = true;
            const grpc::Status s = core_.with_range(*s_, "SetTensorHash", d, req.offset, n, [&](ggml_tensor & dst) {
                return fill(dst, req.offset, n, [&](uint8_t * p, size_t k) {
                    read = read && pread_all(fd, p, k, off_t(at));
                    at += k;
                    hash = gw::fnv1a(p, k, hash);
                    return true;
                });
            });
            // A file whose bytes are not the hash's (changed on disk) is not
            // used: the client sends the content, which overwrites them.
            rsp.result = s.ok() && read && hash == req.hash ? 1 : 0;
            if (!s.ok()) {
                close(fd);
                return ok(s);
            }
        }
        if (fd >= 0) {
            close(fd);
        }
        return answer(&rsp, sizeof(rsp));
    }

    bool get_tensor(uint64_t size) {
        gw::GetTensorReq req{};
        TensorDesc       d;
        if (!take(&req, sizeof(req), size) || !desc(req.tensor, &d)) {
            return false;
        }
        return ok(core_.with_range(*s_, "GetTensor", d, req.offset, req.size, [&](ggml_tensor & src) {
            const uint64_t n = req.size;
            if (!io_.write(&n, sizeof(n))) {
                return io_error();
            }
            if (ggml_backend_buffer_is_host(src.buffer)) {
                return io_.write(static_cast<const uint8_t *>(src.data) + req.offset, n) ? grpc::Status::OK
                                                                                              : io_error();
            }
            staging_.resize(std::min<uint64_t>(n, k_chunk));
            for (uint64_t done = 0; done < n;) {
                const size_t k = size_t(std::min<uint64_t>(n - done, staging_.size()));
                ggml_backend_tensor_get(&src, staging_.data(), size_t(req.offset + done), k);
                if (!io_.write(staging_.data(), k)) {
                    return io_error();
                }
                done += k;
            }
            return grpc::Status::OK;
        }));
    }

    bool graph_compute(uint64_t size) {
        // | device | n_nodes | node ids | n_tensors | tensors |, every count
        // checked before it sizes anything.
        constexpr uint64_t k_fixed = 3 * sizeof(uint32_t);
        const uint64_t     most    = k_fixed + k_max_graph_tensors * (sizeof(uint64_t) + sizeof(gw::Tensor));
        if (size < k_fixed || size > most) {
            return refuse("GRAPH_COMPUTE", std::to_string(size) + " bytes, outside [12, " + std::to_string(most) + "]");
        }
        std::vector<uint8_t> in(size);
        if (!io_.read(in.data(), in.size())) {
            return false;
        }
        uint32_t device = 0, n_nodes = 0, n_tensors = 0;
        std::memcpy(&device, in.data(), 4);
        std::memcpy(&n_nodes, in.data() + 4, 4);
        const uint64_t nodes_end = 8 + uint64_t(n_nodes) * 8;
        if (n_nodes == 0 || n_nodes > k_max_graph_tensors || nodes_end + 4 > size) {
            return refuse("GRAPH_COMPUTE", std::to_string(n_nodes) + " nodes in " + std::to_string(size) + " bytes");
        }
        std::memcpy(&n_tensors, in.data() + nodes_end, 4);
        if (n_tensors > k_max_graph_tensors || nodes_end + 4 + uint64_t(n_tensors) * sizeof(gw::Tensor) != size) {
            return refuse("GRAPH_COMPUTE", std::to_string(n_tensors) + " tensors after " + std::to_string(n_nodes) +
                                               " nodes do not make " + std::to_string(size) + " bytes");
        }
        const uint8_t * tensors = in.data() + nodes_end + 4;

        GraphComputeRequest r;
        r.set_device(device);
        r.set_signature(k_signature);
        GraphMessage * g = r.mutable_graph();
        g->set_device(device);
        std::unordered_map<uint64_t, uint32_t> index; // id → 1-based position
        index.reserve(n_tensors);
        for (uint32_t i = 0; i < n_tensors; ++i) {
            gw::Tensor t;
            std::memcpy(&t, tensors + size_t(i) * sizeof(t), sizeof(t));
            if (t.id == 0 || !index.emplace(t.id, i + 1).second) {
                return refuse("GRAPH_COMPUTE", "tensor " + std::to_string(i) + " has id 0 or the id of another");
            }
        }
        auto position = [&index](uint64_t id, uint32_t * at) {
            if (id == 0) {
                *at = 0;
                return true;
            }
            auto it = index.find(id);
            *at     = it != index.end() ? it->second : 0;
            return it != index.end();
        };
        for (uint32_t i = 0; i < n_tensors; ++i) {
            gw::Tensor t;
            std::memcpy(&t, tensors + size_t(i) * sizeof(t), sizeof(t));
            TensorDesc * d = g->add_tensors();
            if (!desc(t, d)) {
                return false;
            }
            uint64_t srcs[GGML_MAX_SRC]; // (copied out: the wire struct is packed)
            std::memcpy(srcs, t.src, sizeof(srcs));
            for (uint64_t id : srcs) {
                uint32_t at = 0;
                if (!position(id, &at)) {
                    return refuse("GRAPH_COMPUTE", "a source of tensor " + std::to_string(i) + " is not in the graph");
                }
                d->add_src(at);
            }
            uint32_t at = 0;
            if (!position(t.view_src, &at)) {
                return refuse("GRAPH_COMPUTE", "the view source of tensor " + std::to_string(i) + " is not in the graph");
            }
            d->set_view_src(at);
        }
        for (uint32_t i = 0; i < n_nodes; ++i) {
            uint64_t id = 0;
            uint32_t at = 0;
            std::memcpy(&id, in.data() + 8 + size_t(i) * 8, 8);
            if (id == 0 || !position(id, &at)) {
                return refuse("GRAPH_COMPUTE", "node " + std::to_string(i) + " is not among the graph's tensors");
            }
            g->add_nodes(at);
        }
        return compute(r);
    }

    bool compute(const GraphComputeRequest & r) {
        GraphComputeReply out;
        if (!ok(core_.graph_compute(*s_, r, &out))) {
            return false;
        }
        if (out.status() != GGML_STATUS_SUCCESS) {
            return refuse(cmd_name(cmd_), "the computation ended with status " + std::to_string(out.status()));
        }
        return true;
    }

    // ggml's file cache: the content of an upload the client flagged,
    // written to a file of its own and named by its FNV-1a once complete.
    class CacheWriter {
      public:
        explicit CacheWriter(std::string dir) : dir_(std::move(dir)) {
            if (!dir_.empty()) {
                tmp_ = dir_ + "/.upload-" + std::to_string(getpid()) + "-" + std::to_string(reinterpret_cast<uintptr_t>(this));
                f_   = std::fopen(tmp_.c_str(), "wb");
                if (f_ == nullptr) {
                    LOOM_LOG_WARN("rpc server (ggml protocol): cannot write the cache file %s\n", tmp_.c_str());
                }
            }
        }
        ~CacheWriter() {
            if (f_ != nullptr) {
                std::fclose(f_);
                std::remove(tmp_.c_str());
            }
        }
        void add(const uint8_t * p, size_t n) {
            if (f_ != nullptr) {
                hash_ = gw::fnv1a(p, n, hash_);
                ok_   = ok_ && std::fwrite(p, 1, n, f_) == n;
            }
        }
        // Publishes the file (a cache that cannot be written is no error).
        bool finish() {
            if (f_ == nullptr) {
                return true;
            }
            ok_ = std::fclose(f_) == 0 && ok_;
            f_  = nullptr;
            if (!ok_ || std::rename(tmp_.c_str(), (dir_ + "/" + cache_name(hash_)).c_str()) != 0) {
                std::remove(tmp_.c_str());
            }
            return true;
        }

      private:
        std::string dir_, tmp_;
        std::FILE * f_    = nullptr;
        uint64_t    hash_ = gw::k_fnv_offset;
        bool        ok_   = true;
    };

    static bool pread_all(int fd, uint8_t * p, size_t n, off_t at) {
        while (n > 0) {
            const ssize_t k = pread(fd, p, n, at);
            if (k <= 0) {
                return false;
            }
            p += k;
            n -= size_t(k);
            at += k;
        }
        return true;
    }

    // Writes n bytes at offset of dst's data, each piece produced by
    // make(p, k) in place (host memory) or through staging.
    template <class Make> grpc::Status fill(ggml_tensor & dst, uint64_t offset, uint64_t n, Make && make) {
        const bool host = ggml_backend_buffer_is_host(dst.buffer);
        if (!host) {
            staging_.resize(std::min<uint64_t>(n, k_chunk));
        }
        for (uint64_t done = 0; done < n;) {
            const size_t k = size_t(std::min<uint64_t>(n - done, host ? k_chunk * 16 : staging_.size()));
            uint8_t *    p = host ? static_cast<uint8_t *>(dst.data) + offset + done : staging_.data();
            if (!make(p, k)) {
                return io_error();
            }
            if (!host) {
                ggml_backend_tensor_set(&dst, p, size_t(offset + done), k);
            }
            done += k;
        }
        return grpc::Status::OK;
    }

    // fill() from the socket; seen(p, k) is shown each piece.
    template <class Seen> grpc::Status stream_in(ggml_tensor & dst, uint64_t offset, uint64_t n, Seen && seen) {
        return fill(dst, offset, n, [&](uint8_t * p, size_t k) { return io_.read(p, k) && seen(p, k); });
    }

    // A request's fixed body: exactly n bytes announced.
    bool take(void * p, size_t n, uint64_t size) {
        if (size != n) {
            return refuse(cmd_name(cmd_), std::to_string(size) + " bytes where the request has " + std::to_string(n));
        }
        return n == 0 || io_.read(p, n);
    }

    bool answer(const void * p, uint64_t n) {
        return io_.write(&n, sizeof(n)) && io_.write(p, size_t(n));
    }

    bool device(uint32_t d) {
        return d < options_.devices.size() || refuse(cmd_name(cmd_), "no device " + std::to_string(d));
    }

    bool known(uint64_t remote_ptr) {
        return sizes_.count(remote_ptr) != 0 ||
               refuse(cmd_name(cmd_), "no buffer " + std::to_string(remote_ptr) + " on this connection");
    }

    // A wire tensor as loom's description: its buffer and its data address
    // as a handle and an offset.
    bool desc(const gw::Tensor & t, TensorDesc * d) {
        d->set_type(t.type);
        for (int i = 0; i < 4; ++i) {
            d->add_ne(int64_t(t.ne[i]));
            d->add_nb(uint64_t(t.nb[i]));
        }
        d->set_op(t.op);
        d->set_op_params(t.op_params, sizeof(t.op_params));
        d->set_flags(t.flags);
        d->set_view_offs(t.view_offs);
        d->set_name(t.name, strnlen(t.name, sizeof(t.name)));
        // (copied out: the wire struct is packed)
        const uint64_t buffer = t.buffer, data = t.data;
        if (buffer == 0) {
            return data == 0 || refuse(cmd_name(cmd_), "a tensor with data but no buffer");
        }
        auto it = sizes_.find(buffer);
        if (it == sizes_.end()) {
            return refuse(cmd_name(cmd_), "a tensor in buffer " + std::to_string(buffer) + ", not one of this connection");
        }
        const uint64_t base = buffer << k_base_shift;
        if (data < base || data - base > it->second) {
            return refuse(cmd_name(cmd_), "tensor data at 0x" + cache_name(data) + ", outside its buffer");
        }
        d->set_buffer(buffer);
        d->set_offset(data - base);
        return true;
    }

    bool ok(const grpc::Status & st) {
        return st.ok() || refuse(cmd_name(cmd_), st.error_message());
    }

    static grpc::Status io_error() {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the connection ended or stalled");
    }

    bool refuse(const char * what, const std::string & why) {
        LOOM_LOG_ERROR("rpc server (ggml protocol): %s refused: %s; the connection is closed\n", what, why.c_str());
        return false;
    }

    ServerCore &                           core_;
    const GgmlServerOptions &              options_;
    WireIO &                               io_;
    std::shared_ptr<Session>               s_;
    gw::Cmd                                cmd_ = gw::Cmd::none;
    std::unordered_map<uint64_t, uint64_t> sizes_; // buffers of the connection: handle → size
    std::vector<uint8_t>                   staging_;
};

} // namespace

GgmlServer::GgmlServer(ServerCore & core, GgmlServerOptions options)
    : core_(core), options_(std::move(options)), acceptor_(options_.max_connections, [this](int fd) { serve(fd); }) {}

GgmlServer::~GgmlServer() { stop(); }

bool GgmlServer::start(const std::string & host, int port) {
    return acceptor_.start(host, port);
}

namespace {

class SocketIO final : public WireIO {
  public:
    SocketIO(int fd, SSL * ssl) : s_(fd, ssl) {}
    bool wait(int ms) override { return s_.wait_readable(ms); }
    bool read(void * data, size_t n) override { return s_.read_all(data, n); }
    bool write(const void * data, size_t n) override { return s_.write_all(data, n); }

  private:
    bulk::Stream s_;
};

} // namespace

void GgmlServer::serve(int fd) {
    bulk::tune_socket(fd, bulk::k_io_timeout_ms);
    SSL * ssl = nullptr;
    if (options_.tls && (ssl = bulk::tls_accept(options_.tls.get(), fd)) == nullptr) {
        close(fd);
        return;
    }
    SocketIO io(fd, ssl);
    if (!serve(io)) {
        LOOM_LOG_WARN("rpc server (ggml protocol): a client is turned away: the server holds its most sessions\n");
    }
}

bool GgmlServer::serve(WireIO & io) {
    std::string id;
    auto        s = core_.open_session(&id);
    if (!s) {
        return false;
    }
    Connection(core_, options_, io, s).run();
    s.reset(); // the session's last holder is then the server's table
    core_.close_session(id);
    return true;
}

} // namespace loom::rpc
