// loom-rpc-server's gRPC service: authentication, sessions, and the glue
// from gRPC calls to the handlers of ServerCore.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/common.h"
#include "ggml-cpu.h"
#include "ggml-rpc.h"
#include "loom_rpc.grpc.pb.h"
#include "bulk_server.h"
#include "ggml_server.h"
#include "ggml_wire.h"
#include "server_core.h"

using namespace loom::rpc;

namespace {

bool read_file(const char * path, std::string * out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return false;
    }
    std::ostringstream s;
    s << in.rdbuf();
    *out = s.str();
    return true;
}

// Compares without stopping at the first difference.
bool same_secret(const std::string & a, const std::string & b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size(); ++i) {
        diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
    }
    return diff == 0;
}

class Service final : public Rpc::Service {
  public:
    Service(ServerCore & core, std::string token) : core_(core), expected_("Bearer " + std::move(token)) {}

    // The port of the bulk connection offered to new sessions (0: none).
    void set_bulk_port(int port, bool peer_links) {
        bulk_port_  = port;
        peer_links_ = peer_links;
    }

    void stop() {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
        cv_.notify_all();
    }

    grpc::Status Connect(grpc::ServerContext * ctx, const ConnectRequest * req,
                         grpc::ServerWriter<ConnectEvent> * writer) override {
        if (grpc::Status st = authenticate(ctx); !st.ok()) {
            return st;
        }
        if (req->protocol_version() != k_protocol_version) {
            return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                "protocol version " + std::to_string(req->protocol_version()) + " is not " +
                                    std::to_string(k_protocol_version));
        }
        std::string id, ticket;
        if (!core_.open_session(&id, &ticket)) {
            return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "too many sessions");
        }
        ConnectEvent ev;
        ev.set_session_id(id);
        core_.describe(&ev);
        if (bulk_port_ != 0) {
            ev.set_bulk_port(uint32_t(bulk_port_));
            ev.set_bulk_ticket(ticket);
            ev.set_peer_links(peer_links_);
        }
        if (writer->Write(ev)) {
            // The session lives until the client ends the call or the server stops.
            std::unique_lock<std::mutex> lock(mutex_);
            while (!stopping_ && !ctx->IsCancelled()) {
                cv_.wait_for(lock, std::chrono::milliseconds(50));
            }
        }
        core_.close_session(id);
        return grpc::Status::OK;
    }

#define LOOM_RPC_HANDLER(Name, Req, Rep, fn) \
    grpc::Status Name(grpc::ServerContext * ctx, const Req * req, Rep * rep) override { \
        std::shared_ptr<Session> s; \
        if (grpc::Status st = session(ctx, &s); !st.ok()) { \
            return st; \
        } \
        return core_.fn(*s, *req, rep); \
    }

    LOOM_RPC_HANDLER(GetDeviceMemory, DeviceRequest, DeviceMemory, get_device_memory)
    LOOM_RPC_HANDLER(SupportsOp, GraphMessage, Supported, supports_op)
    LOOM_RPC_HANDLER(AllocBuffer, AllocBufferRequest, AllocBufferReply, alloc_buffer)
    LOOM_RPC_HANDLER(GetAllocSize, AllocSizeRequest, AllocSizeReply, get_alloc_size)
    LOOM_RPC_HANDLER(FreeBuffer, BufferRequest, Empty, free_buffer)
    LOOM_RPC_HANDLER(ClearBuffer, ClearBufferRequest, Empty, clear_buffer)
    LOOM_RPC_HANDLER(SetTensor, SetTensorRequest, Empty, set_tensor)
    LOOM_RPC_HANDLER(SetTensorHash, SetTensorHashRequest, SetTensorHashReply, set_tensor_hash)
    LOOM_RPC_HANDLER(GetTensor, GetTensorRequest, GetTensorReply, get_tensor)
    LOOM_RPC_HANDLER(MemsetTensor, MemsetTensorRequest, Empty, memset_tensor)
    LOOM_RPC_HANDLER(CopyTensor, CopyTensorRequest, CopyTensorReply, copy_tensor)
    LOOM_RPC_HANDLER(InitTensor, InitTensorRequest, Empty, init_tensor)
    LOOM_RPC_HANDLER(GraphCompute, GraphComputeRequest, GraphComputeReply, graph_compute)
#undef LOOM_RPC_HANDLER

  private:
    grpc::Status authenticate(grpc::ServerContext * ctx) const {
        const auto & md = ctx->client_metadata();
        auto         it = md.find(k_auth_key);
        if (it == md.end()) {
            return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no token (authorization metadata missing)");
        }
        if (!same_secret(std::string(it->second.data(), it->second.size()), expected_)) {
            return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong token");
        }
        return grpc::Status::OK;
    }

    grpc::Status session(grpc::ServerContext * ctx, std::shared_ptr<Session> * out) {
        if (grpc::Status st = authenticate(ctx); !st.ok()) {
            return st;
        }
        const auto & md = ctx->client_metadata();
        auto         it = md.find(k_session_key);
        if (it != md.end()) {
            *out = core_.find_session(std::string(it->second.data(), it->second.size()));
        }
        if (!*out) {
            return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no open session with this id");
        }
        return grpc::Status::OK;
    }

    ServerCore &            core_;
    const std::string       expected_;
    std::mutex              mutex_;
    std::condition_variable cv_;
    bool                    stopping_ = false;
    int                     bulk_port_  = 0;
    bool                    peer_links_ = false;
};

} // namespace

struct loom_rpc_server {
    std::unique_ptr<ServerCore>   core;
    std::unique_ptr<BulkServer>   bulk;
    std::unique_ptr<Service>      service;
    std::unique_ptr<grpc::Server> server;
    std::unique_ptr<GgmlServer>   ggml; // instead of the three above
    int                           port = 0;
};

namespace {

bool is_loopback(const std::string & host) {
    return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// ggml's protocol (ggml_server.h) on the endpoint.
loom_rpc_server_t start_ggml(const loom_rpc_server_params * p, ServerOptions opt) {
    const std::string endpoint = p->endpoint;
    const size_t      colon    = endpoint.rfind(':');
    char *            end      = nullptr;
    const long        port     = colon == std::string::npos ? -1 : std::strtol(endpoint.c_str() + colon + 1, &end, 10);
    if (port < 0 || port > 65535 || end == nullptr || *end != '\0') {
        LOOM_LOG_ERROR("rpc server: endpoint %s is not host:port\n", p->endpoint);
        return nullptr;
    }
    GgmlServerOptions g;
    g.devices   = opt.devices;
    g.cache_dir = opt.cache_dir;
    if (p->tls_cert_path != nullptr && !(g.tls = bulk::server_tls(p->tls_cert_path, p->tls_key_path))) {
        return nullptr;
    }
    // The file cache is ggml's, not loom's content cache.
    opt.cache_dir.clear();
    opt.cache_bytes = 0;
    auto srv  = std::make_unique<loom_rpc_server>();
    srv->core = std::make_unique<ServerCore>(std::move(opt));
    srv->ggml = std::make_unique<GgmlServer>(*srv->core, std::move(g));
    const std::string host = bulk::endpoint_host(endpoint);
    if (!srv->ggml->start(host, int(port))) {
        return nullptr;
    }
    srv->port = srv->ggml->port();
    if (!is_loopback(host) && p->tls_cert_path == nullptr) {
        LOOM_LOG_WARN("rpc server: ggml's RPC protocol has no authentication and this server listens on %s:%d in "
                      "clear: anyone who reaches that port can use its devices and read what its clients upload. "
                      "Serve it on loopback, or with --tls-cert/--tls-key behind a TLS tunnel (docs/rpc.md).\n",
                      host.c_str(), srv->port);
    }
    LOOM_LOG_INFO("rpc server: ggml protocol %d.%d.%d on %s (port %d)%s\n", int(ggml_wire::k_major), int(ggml_wire::k_minor), int(ggml_wire::k_patch), p->endpoint,
                  srv->port, p->tls_cert_path != nullptr ? " with TLS" : "");
    return srv.release();
}

} // namespace

extern "C" {

loom_rpc_server_t loom_rpc_server_start(const loom_rpc_server_params * p) {
    LOOM_REQUIRE(p != nullptr && p->endpoint != nullptr, "NULL parameters or endpoint");
    const std::string protocol = p->protocol != nullptr ? p->protocol : "loom";
    if (protocol != "loom" && protocol != "ggml") {
        LOOM_LOG_ERROR("rpc server: unknown protocol %s (loom or ggml)\n", protocol.c_str());
        return nullptr;
    }
    if (protocol == "loom" && (p->token == nullptr || p->token[0] == '\0')) {
        LOOM_LOG_ERROR("rpc server: a token is required (LOOM_RPC_TOKEN or loom_rpc_server_params.token)\n");
        return nullptr;
    }
    if ((p->tls_cert_path == nullptr) != (p->tls_key_path == nullptr)) {
        LOOM_LOG_ERROR("rpc server: TLS needs both a certificate and a key\n");
        return nullptr;
    }
    ServerOptions opt;
    if (p->n_devices == 0 || p->devices == nullptr) {
        opt.devices.push_back(ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0));
    } else {
        opt.devices.assign(p->devices, p->devices + p->n_devices);
    }
    opt.cache_dir   = p->cache_dir != nullptr ? p->cache_dir : "";
    opt.cache_bytes = p->cache_bytes != 0 ? p->cache_bytes : opt.cache_dir.empty() ? 0 : size_t(1) << 30;
    opt.n_threads = int(p->n_threads);
    if (protocol == "ggml") {
        return start_ggml(p, std::move(opt));
    }

    std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
    if (p->tls_cert_path != nullptr) {
        grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
        if (!read_file(p->tls_key_path, &pair.private_key) || !read_file(p->tls_cert_path, &pair.cert_chain)) {
            LOOM_LOG_ERROR("rpc server: cannot read the TLS certificate %s or key %s\n", p->tls_cert_path,
                           p->tls_key_path);
            return nullptr;
        }
        grpc::SslServerCredentialsOptions ssl;
        ssl.pem_key_cert_pairs.push_back(pair);
        creds = grpc::SslServerCredentials(ssl);
    }

    auto srv     = std::make_unique<loom_rpc_server>();
    srv->core    = std::make_unique<ServerCore>(std::move(opt));
    srv->service = std::make_unique<Service>(*srv->core, p->token);
    std::shared_ptr<SSL_CTX> bulk_tls;
    if (p->tls_cert_path != nullptr && !(bulk_tls = bulk::server_tls(p->tls_cert_path, p->tls_key_path))) {
        return nullptr;
    }
    srv->bulk = std::make_unique<BulkServer>(*srv->core);
    if (!srv->bulk->listen_on(bulk::endpoint_host(p->endpoint), std::move(bulk_tls))) {
        return nullptr;
    }
    srv->service->set_bulk_port(srv->bulk->port(), srv->bulk->peer_links());
    grpc::ServerBuilder builder;
    builder.AddListeningPort(p->endpoint, creds, &srv->port);
    builder.SetMaxReceiveMessageSize(int(k_max_message_bytes));
    builder.SetMaxSendMessageSize(int(k_max_message_bytes));
    tune_transport([&builder](const char * name, int value) { builder.AddChannelArgument(name, value); });
    // A client whose machine vanishes without closing its connection is
    // found by keep-alive pings, which ends its session and frees its buffers.
    builder.AddChannelArgument("grpc.keepalive_time_ms", 30000);
    builder.AddChannelArgument("grpc.keepalive_timeout_ms", 10000);
    builder.RegisterService(srv->service.get());
    srv->server = builder.BuildAndStart();
    if (!srv->server || srv->port == 0) {
        LOOM_LOG_ERROR("rpc server: cannot listen on %s\n", p->endpoint);
        return nullptr;
    }
    LOOM_LOG_INFO("rpc server: listening on %s (port %d)%s\n", p->endpoint, srv->port,
                  p->tls_cert_path != nullptr ? " with TLS" : "");
    return srv.release();
}

int loom_rpc_server_port(loom_rpc_server_t server) {
    LOOM_REQUIRE(server != nullptr, "NULL server");
    return server->port;
}

size_t loom_rpc_server_session_count(loom_rpc_server_t server) {
    LOOM_REQUIRE(server != nullptr, "NULL server");
    return server->core->session_count();
}

size_t loom_rpc_server_buffer_bytes(loom_rpc_server_t server) {
    LOOM_REQUIRE(server != nullptr, "NULL server");
    return server->core->buffer_bytes();
}

void loom_rpc_server_stop(loom_rpc_server_t server) {
    if (server == nullptr) {
        return;
    }
    if (server->ggml) {
        server->ggml->stop();
        delete server;
        return;
    }
    server->service->stop();
    if (server->bulk) {
        server->bulk->stop();
    }
    server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server->server->Wait();
    delete server;
}

void ggml_backend_rpc_start_server(const char * endpoint, const char * cache_dir, size_t n_threads, size_t n_devices,
                                   ggml_backend_dev_t * devices) {
    loom_rpc_server_params p{};
    p.endpoint      = endpoint;
    p.token         = std::getenv("LOOM_RPC_TOKEN");
    p.cache_dir     = cache_dir;
    p.n_threads     = n_threads;
    p.n_devices     = n_devices;
    p.devices       = devices;
    p.tls_cert_path = std::getenv("LOOM_RPC_TLS_CERT");
    p.tls_key_path  = std::getenv("LOOM_RPC_TLS_KEY");
    p.protocol      = std::getenv("LOOM_RPC_PROTOCOL");
    loom_rpc_server_t server = loom_rpc_server_start(&p);
    if (server != nullptr && server->ggml) {
        for (;;) {
            std::this_thread::sleep_for(std::chrono::hours(24)); // until the process ends
        }
    }
    if (server != nullptr) {
        server->server->Wait();
    }
}

} // extern "C"
