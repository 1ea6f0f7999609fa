// The client's connection to one server (client_connection.h).

#include "client_connection.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/common.h"
#include "protocol.h"

namespace loom::rpc {

namespace {

uint32_t env_ms(const char * name, uint32_t fallback) {
    const char * v = std::getenv(name);
    const long   n = v != nullptr ? std::strtol(v, nullptr, 10) : 0;
    return n > 0 ? uint32_t(n) : fallback;
}

} // namespace

// ---- configuration -----------------------------------------------------------

ClientConfig & ClientConfig::get() {
    static ClientConfig c;
    return c;
}

std::string ClientConfig::current_token() {
    std::lock_guard<std::mutex> lock(mutex);
    if (!token_set) {
        const char * env = std::getenv("LOOM_RPC_TOKEN");
        token            = env != nullptr ? env : "";
        token_set        = true;
    }
    return token;
}

uint32_t ClientConfig::call_timeout() {
    std::lock_guard<std::mutex> lock(mutex);
    if (call_ms == 0) {
        call_ms = env_ms("LOOM_RPC_TIMEOUT_MS", 30000);
    }
    return call_ms;
}

uint32_t ClientConfig::compute_timeout() {
    std::lock_guard<std::mutex> lock(mutex);
    if (compute_ms == 0) {
        compute_ms = env_ms("LOOM_RPC_COMPUTE_TIMEOUT_MS", 300000);
    }
    return compute_ms;
}

// ---- connection --------------------------------------------------------------

std::shared_ptr<Connection> Connection::open(const std::string & endpoint) {
    auto c = std::shared_ptr<Connection>(new Connection(endpoint));
    return c->connect() ? c : nullptr;
}

Connection::~Connection() {
    stream_ctx_.TryCancel();
    if (stream_) {
        (void) stream_->Finish();
    }
}

void Connection::prepare(grpc::ClientContext & ctx, bool compute) {
    sync_bulk();
    ctx.AddMetadata(k_auth_key, "Bearer " + token_);
    ctx.AddMetadata(k_session_key, session_);
    const uint32_t ms = compute ? ClientConfig::get().compute_timeout() : ClientConfig::get().call_timeout();
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
}

bool Connection::check(const grpc::Status & st, const char * what, bool mark) {
    if (st.ok()) {
        return true;
    }
    failed_ = failed_ || mark;
    forget_graphs(); // resent next time, whatever the server kept
    LOOM_LOG_ERROR("RPC[%s]: %s failed: %s (%s)\n", endpoint_.c_str(), what, st.error_message().c_str(),
                   code_name(st.error_code()));
    return false;
}

void Connection::sync_bulk() {
    if (bulk_) {
        check(bulk_->sync(), "a transfer or computation on the bulk connection");
    }
}

const char * Connection::code_name(grpc::StatusCode c) {
    switch (c) {
        case grpc::StatusCode::DEADLINE_EXCEEDED: return "deadline exceeded";
        case grpc::StatusCode::UNAVAILABLE: return "server unavailable";
        case grpc::StatusCode::UNAUTHENTICATED: return "unauthenticated";
        case grpc::StatusCode::INVALID_ARGUMENT: return "invalid argument";
        case grpc::StatusCode::RESOURCE_EXHAUSTED: return "resource exhausted";
        case grpc::StatusCode::FAILED_PRECONDITION: return "failed precondition";
        default: return "error";
    }
}

bool Connection::connect() {
    token_ = ClientConfig::get().current_token();
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (const char * ca = std::getenv("LOOM_RPC_TLS_CA"); ca != nullptr && ca[0] != '\0') {
        std::ifstream      in(ca, std::ios::binary);
        std::ostringstream s;
        s << in.rdbuf();
        if (!in) {
            LOOM_LOG_ERROR("RPC[%s]: cannot read LOOM_RPC_TLS_CA file %s\n", endpoint_.c_str(), ca);
            return false;
        }
        grpc::SslCredentialsOptions ssl;
        ssl.pem_root_certs = s.str();
        creds              = grpc::SslCredentials(ssl);
    }
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(int(k_max_message_bytes));
    args.SetMaxSendMessageSize(int(k_max_message_bytes));
    tune_transport([&args](const char * name, int value) { args.SetInt(name, value); });
    channel_ = grpc::CreateCustomChannel(endpoint_, creds, args);
    stub_    = Rpc::NewStub(channel_);

    // A deadline on a stream covers the whole stream, so the session
    // stream has none; a plain call with a deadline first checks that
    // the server answers and accepts the token.
    stream_ctx_.AddMetadata(k_auth_key, "Bearer " + token_);
    grpc::ClientContext probe;
    probe.AddMetadata(k_auth_key, "Bearer " + token_);
    probe.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(ClientConfig::get().call_timeout()));
    DeviceRequest dreq;
    DeviceMemory  drep;
    const grpc::Status probe_st = stub_->GetDeviceMemory(&probe, dreq, &drep);
    if (probe_st.error_code() == grpc::StatusCode::UNAVAILABLE ||
        probe_st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
        probe_st.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
        LOOM_LOG_ERROR("RPC[%s]: cannot connect: %s (%s)\n", endpoint_.c_str(), probe_st.error_message().c_str(),
                       code_name(probe_st.error_code()));
        return false;
    }
    return open_stream();
}

bool Connection::open_stream() {
    ConnectRequest req;
    req.set_protocol_version(k_protocol_version);
    stream_ = stub_->Connect(&stream_ctx_, req);
    ConnectEvent ev;
    if (!stream_->Read(&ev)) {
        const grpc::Status st = stream_->Finish();
        stream_.reset();
        LOOM_LOG_ERROR("RPC[%s]: cannot open a session: %s (%s)\n", endpoint_.c_str(), st.error_message().c_str(),
                       code_name(st.error_code()));
        return false;
    }
    session_ = ev.session_id();
    devices_.assign(ev.devices().begin(), ev.devices().end());
    content_cache_ = ev.content_cache();
    const char * ca = std::getenv("LOOM_RPC_TLS_CA");
    if (ev.bulk_port() != 0) {
        bulk_host_  = bulk::endpoint_host(endpoint_);
        bulk_port_  = ev.bulk_port();
        peer_links_ = ev.peer_links();
        bulk_ = BulkChannel::open(endpoint_, bulk_host_, ev.bulk_port(), ev.bulk_ticket(),
                                  ClientConfig::get().call_timeout(), ca != nullptr && ca[0] != '\0' ? ca : nullptr);
    }
    return true;
}

} // namespace loom::rpc
