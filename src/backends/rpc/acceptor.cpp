// Accepting TCP connections on threads of their own (acceptor.h).

#include "acceptor.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "core/common.h"

namespace loom::rpc {

bool Acceptor::start(const std::string & host, int port) {
    addrinfo hints{};
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags    = AI_PASSIVE;
    const bool any    = host.empty() || host == "0.0.0.0";
    addrinfo * found  = nullptr;
    const std::string service = std::to_string(port);
    if (getaddrinfo(any ? nullptr : host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
        LOOM_LOG_ERROR("rpc server: cannot resolve %s\n", host.c_str());
        return false;
    }
    for (const addrinfo * a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
        if (any && a->ai_family != AF_INET) {
            continue;
        }
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            continue;
        }
        const int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0) {
            sockaddr_storage addr{};
            socklen_t        len = sizeof(addr);
            getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
            port_      = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port
                                                          : reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
            listen_fd_ = fd;
        } else {
            close(fd);
        }
    }
    freeaddrinfo(found);
    if (listen_fd_ < 0 || pipe2(wake_, O_CLOEXEC) != 0) {
        LOOM_LOG_ERROR("rpc server: cannot listen on %s:%d\n", host.c_str(), port);
        return false;
    }
    thread_ = std::thread([this] { loop(); });
    return true;
}

void Acceptor::loop() {
    for (;;) {
        pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR) {
            return;
        }
        if (p[1].revents != 0) {
            return;
        }
        if ((p[0].revents & POLLIN) == 0) {
            continue;
        }
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        std::lock_guard<std::mutex> lock(mutex_);
        // Threads of connections that ended are joined here.
        for (auto it = workers_.begin(); it != workers_.end();) {
            if (it->done.load()) {
                it->thread.join();
                it = workers_.erase(it);
            } else {
                ++it;
            }
        }
        if (stopped_ || workers_.size() >= max_) {
            close(fd);
            continue;
        }
        // The handler gets a duplicate to own; this fd stays open until the
        // handler returns, so that stop() can shut the socket down.
        const int mine = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        if (mine < 0) {
            close(fd);
            continue;
        }
        Worker & w = workers_.emplace_back();
        w.fd       = fd;
        w.thread   = std::thread([this, &w, mine] {
            handler_(mine);
            std::lock_guard<std::mutex> l(mutex_);
            close(w.fd);
            w.fd = -1;
            w.done.store(true);
        });
    }
}

void Acceptor::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopped_) {
            return;
        }
        stopped_ = true;
        for (Worker & w : workers_) {
            if (w.fd >= 0) {
                shutdown(w.fd, SHUT_RDWR);
            }
        }
    }
    if (wake_[1] >= 0) {
        const char c = 0;
        (void) !write(wake_[1], &c, 1);
    }
    if (thread_.joinable()) {
        thread_.join();
    }
    // No new worker starts now; the running ones see their sockets fail.
    for (Worker & w : workers_) {
        w.thread.join();
    }
    workers_.clear();
    for (int * fd : {&listen_fd_, &wake_[0], &wake_[1]}) {
        if (*fd >= 0) {
            close(*fd);
            *fd = -1;
        }
    }
}

} // namespace loom::rpc
