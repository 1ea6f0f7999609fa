#pragma once

// The server side of the bulk connection (Note [RPC bulk connection] in
// bulk.h): a listening socket, a thread accepting connections and a thread
// per bound connection running its frames through ServerCore.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bulk.h"
#include "server_core.h"

namespace loom::rpc {

class BulkServer {
  public:
    explicit BulkServer(ServerCore & core) : core_(core) {}
    ~BulkServer() { stop(); }

    // Listens on a free port of host (a name or address; "" or "0.0.0.0":
    // every IPv4 address), speaking TLS with tls when not NULL. False
    // (logged) when it cannot.
    bool listen_on(const std::string & host, std::shared_ptr<SSL_CTX> tls);
    int  port() const { return port_; }
    // Other servers may link to this one (Note [Peer links] in peer.h).
    bool peer_links() const { return !tls_; }
    // Closes the listening socket and every connection, joins the threads.
    void stop();

  private:
    void accept_loop();
    void serve(int fd);
    // A connection whose hello links a peer into a group (peer.h).
    void serve_peer(std::unique_ptr<bulk::Stream> io, const bulk::Hello & hello);

    ServerCore &             core_;
    std::shared_ptr<SSL_CTX> tls_;
    int                      listen_fd_ = -1;
    int                      port_      = 0;
    int                      wake_[2]   = {-1, -1}; // a pipe that ends accept_loop
    std::thread              acceptor_;
    std::mutex               mutex_;
    bool                     stopping_ = false;
    std::vector<int>         open_fds_; // connections not yet closed
    struct Worker {
        std::thread                        thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::vector<Worker>      workers_;
};

} // namespace loom::rpc
