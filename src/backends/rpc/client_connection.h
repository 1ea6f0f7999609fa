#pragma once

// The client's side of one server: the configuration shared by every
// connection (token, deadlines), and a Connection per endpoint holding the
// gRPC channel, the session (the open Connect stream) and the session's
// bulk connection (Note [RPC bulk connection] in bulk.h). Thread-safe.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bulk_client.h"
#include "loom_rpc.grpc.pb.h"

namespace loom::rpc {

// Read from the environment on first use, unless set before.
struct ClientConfig {
    std::mutex  mutex;
    bool        token_set  = false;
    std::string token;
    uint32_t    call_ms    = 0;
    uint32_t    compute_ms = 0;

    static ClientConfig & get();
    std::string           current_token();
    uint32_t              call_timeout();    // LOOM_RPC_TIMEOUT_MS, 30 s
    uint32_t              compute_timeout(); // LOOM_RPC_COMPUTE_TIMEOUT_MS, 300 s
};

class Connection {
  public:
    // NULL (logged) when the server cannot be reached or refuses.
    static std::shared_ptr<Connection> open(const std::string & endpoint);
    ~Connection();

    Rpc::Stub &                     stub() { return *stub_; }
    const std::string &             endpoint() const { return endpoint_; }
    const std::vector<DeviceInfo> & devices() const { return devices_; }
    // The server keeps uploaded contents by hash (ConnectEvent.content_cache).
    bool                            content_cache() const { return content_cache_; }
    // The server links to other servers (ConnectEvent.peer_links) on its
    // bulk port at bulk_host():bulk_port() (Note [Peer links]).
    bool                            peer_links() const { return peer_links_ && bulk_ != nullptr; }
    const std::string &             bulk_host() const { return bulk_host_; }
    uint32_t                        bulk_port() const { return bulk_port_; }

    // The bulk connection while it works; NULL: every transfer goes
    // through gRPC.
    BulkChannel * bulk() { return bulk_ && bulk_->alive() ? bulk_.get() : nullptr; }

    // Metadata and deadline of one call. Frames still in flight on the bulk
    // connection are finished first, so the call sees what they wrote.
    void prepare(grpc::ClientContext & ctx, bool compute = false);
    // Logs a failed call; true when it succeeded. A failed transfer
    // (mark) also fails the next graph computation.
    bool check(const grpc::Status & st, const char * what, bool mark = true);
    // A transfer failed since the last graph computation.
    bool take_failure() { return failed_.exchange(false); }
    // Reads the replies of uploads sent without waiting; a failure among
    // them is logged and fails the next graph computation.
    void sync_bulk();

    static const char * code_name(grpc::StatusCode c);

    // Note [Graphs the server holds]
    // The server keeps one graph per device and session: the last one sent
    // that it could rebuild, until any buffer of the session is freed. The
    // client keeps the signature of that graph here, for every backend on
    // this connection, so that a graph computed again travels as its
    // signature alone even when the computation is not waited for (a
    // refusal could not be answered by sending the graph then).
    // with_graphs runs fn(signatures) with the record locked: a caller that
    // sends its frame inside fn keeps the record in the order of the frames.
    template <class Fn> auto with_graphs(Fn && fn) {
        std::lock_guard<std::mutex> lock(graphs_mutex_);
        if (held_graphs_.size() < devices_.size()) {
            held_graphs_.resize(devices_.size());
        }
        return fn(held_graphs_);
    }
    // A buffer was freed, or a computation failed: the server may hold none.
    void forget_graphs() {
        std::lock_guard<std::mutex> lock(graphs_mutex_);
        for (std::string & s : held_graphs_) s.clear();
    }

  private:
    explicit Connection(std::string endpoint) : endpoint_(std::move(endpoint)) {}
    bool connect();
    bool open_stream();

    std::string                                        endpoint_;
    std::string                                        token_;
    std::string                                        session_;
    std::shared_ptr<grpc::Channel>                     channel_;
    std::unique_ptr<Rpc::Stub>                         stub_;
    grpc::ClientContext                                stream_ctx_;
    std::unique_ptr<grpc::ClientReader<ConnectEvent>> stream_;
    std::vector<DeviceInfo>                            devices_;
    bool                                               content_cache_ = false;
    bool                                               peer_links_    = false;
    std::string                                        bulk_host_;
    uint32_t                                           bulk_port_ = 0;
    std::unique_ptr<BulkChannel>                       bulk_;
    std::atomic<bool>                                  failed_{false};
    std::mutex                                         graphs_mutex_;
    std::vector<std::string>                           held_graphs_; // per device (Note [Graphs the server holds])
};

} // namespace loom::rpc
