#pragma once

// A listening TCP socket with a thread that accepts connections and a
// thread per connection running a handler; stop() shuts every connection
// down and joins the threads. The handler owns the fd it is given (it
// closes it) and must return once a read or write on it fails.

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace loom::rpc {

class Acceptor {
  public:
    using Handler = std::function<void(int fd)>;

    Acceptor(size_t max_connections, Handler handler) : max_(max_connections), handler_(std::move(handler)) {}
    ~Acceptor() { stop(); }
    Acceptor(const Acceptor &)             = delete;
    Acceptor & operator=(const Acceptor &) = delete;

    // Binds host:port ("" or "0.0.0.0": every IPv4 address; port 0: a free
    // one) and starts accepting. False (logged) when it cannot.
    bool start(const std::string & host, int port);
    int  port() const { return port_; }
    void stop();

  private:
    void loop();

    struct Worker {
        std::thread       thread;
        std::atomic<bool> done{false};
        int               fd = -1;
    };

    size_t            max_;
    Handler           handler_;
    int               listen_fd_ = -1;
    int               port_      = 0;
    int               wake_[2]   = {-1, -1};
    std::thread       thread_;
    std::mutex        mutex_;
    bool              stopped_ = false;
    std::list<Worker> workers_; // under mutex_
};

} // namespace loom::rpc
