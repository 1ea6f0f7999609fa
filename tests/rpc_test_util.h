#pragma once

// Servers and raw protocol clients for the RPC tests.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "ggml-rpc.h"
#include "loom_rpc.grpc.pb.h"
#include "../src/backends/rpc/protocol.h"

namespace loomtest::rpc {

constexpr const char * kToken = "test-token-0123";

// A server on a free loopback port, stopped when destroyed.
class TestServer {
  public:
    // cache_bytes 0 and no cache_dir: no content cache.
    explicit TestServer(const char * token = kToken, const char * cache_dir = nullptr, size_t cache_bytes = 0) {
        loom_rpc_server_params p{};
        p.endpoint    = "127.0.0.1:0";
        p.token       = token;
        p.cache_dir   = cache_dir;
        p.cache_bytes = cache_bytes;
        p.n_threads = 2;
        server_     = loom_rpc_server_start(&p);
        if (server_ != nullptr) {
            endpoint_ = "127.0.0.1:" + std::to_string(loom_rpc_server_port(server_));
        }
    }
    ~TestServer() { stop(); }
    void stop() {
        loom_rpc_server_stop(server_);
        server_ = nullptr;
    }
    bool                running() const { return server_ != nullptr; }
    const std::string & endpoint() const { return endpoint_; }
    loom_rpc_server_t   get() const { return server_; }

  private:
    loom_rpc_server_t server_ = nullptr;
    std::string       endpoint_;
};

// A session opened with the raw protocol, for requests the backend never sends.
class RawClient {
  public:
    RawClient(const std::string & endpoint, std::string token = kToken) : token_(std::move(token)) {
        grpc::ChannelArguments args;
        args.SetMaxSendMessageSize(256 << 20);
        channel_ = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
        stub_    = loom::rpc::Rpc::NewStub(channel_);
    }
    ~RawClient() { disconnect(); }

    // Opens the session, announcing protocol version; the status of the
    // stream when it fails.
    grpc::Status connect(uint32_t version = loom::rpc::k_protocol_version) {
        stream_ctx_ = std::make_unique<grpc::ClientContext>();
        if (!token_.empty()) {
            stream_ctx_->AddMetadata("authorization", "Bearer " + token_);
        }
        loom::rpc::ConnectRequest req;
        req.set_protocol_version(version);
        stream_ = stub_->Connect(stream_ctx_.get(), req);
        loom::rpc::ConnectEvent ev;
        if (!stream_->Read(&ev)) {
            grpc::Status st = stream_->Finish();
            stream_.reset();
            return st;
        }
        session_     = ev.session_id();
        bulk_port_   = ev.bulk_port();
        bulk_ticket_ = ev.bulk_ticket();
        content_cache_ = ev.content_cache();
        return grpc::Status::OK;
    }
    void disconnect() {
        if (stream_) {
            stream_ctx_->TryCancel();
            (void) stream_->Finish();
            stream_.reset();
        }
    }

    // A context for one call of the session, with a deadline.
    std::unique_ptr<grpc::ClientContext> ctx() const {
        auto c = std::make_unique<grpc::ClientContext>();
        if (!token_.empty()) {
            c->AddMetadata("authorization", "Bearer " + token_);
        }
        c->AddMetadata("loom-session", session_);
        c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        return c;
    }
    loom::rpc::Rpc::Stub & stub() { return *stub_; }
    std::shared_ptr<grpc::Channel> channel() const { return channel_; }
    // The bulk connection the server offered the session (port 0: none).
    uint32_t            bulk_port() const { return bulk_port_; }
    const std::string & bulk_ticket() const { return bulk_ticket_; }
    // The server keeps uploaded contents by hash.
    bool                content_cache() const { return content_cache_; }

    uint64_t alloc(uint64_t size, grpc::Status * st = nullptr) {
        loom::rpc::AllocBufferRequest req;
        req.set_size(size);
        loom::rpc::AllocBufferReply rep;
        grpc::Status                s = stub_->AllocBuffer(ctx().get(), req, &rep);
        if (st != nullptr) {
            *st = s;
        }
        return s.ok() ? rep.buffer() : 0;
    }

  private:
    std::string                                                 token_;
    std::string                                                 session_;
    uint32_t                                                    bulk_port_ = 0;
    std::string                                                 bulk_ticket_;
    bool                                                        content_cache_ = false;
    std::shared_ptr<grpc::Channel>                              channel_;
    std::unique_ptr<loom::rpc::Rpc::Stub>                       stub_;
    std::unique_ptr<grpc::ClientContext>                        stream_ctx_;
    std::unique_ptr<grpc::ClientReader<loom::rpc::ConnectEvent>> stream_;
};

// A contiguous F32 tensor of ne elements (1-D) at offset in buffer.
inline void describe_f32(loom::rpc::TensorDesc * d, uint64_t buffer, uint64_t offset, int64_t ne0, int64_t ne1 = 1) {
    d->set_buffer(buffer);
    d->set_offset(offset);
    d->set_type(0); // GGML_TYPE_F32
    const int64_t ne[4] = {ne0, ne1, 1, 1};
    for (int i = 0; i < 4; ++i) {
        d->add_ne(ne[i]);
    }
    d->add_nb(4);
    d->add_nb(uint64_t(4 * ne0));
    d->add_nb(uint64_t(4 * ne0 * ne1));
    d->add_nb(uint64_t(4 * ne0 * ne1));
}

} // namespace loomtest::rpc
