// Sockets of the bulk connection, in clear or through TLS (bulk.h).

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <utility>

#include "bulk.h"
#include "core/common.h"

namespace loom::rpc::bulk {

namespace {

// OpenSSL reads and writes its socket with read() and write(); a write
// (also inside SSL_read: alerts, session tickets) to a peer that has gone
// raises SIGPIPE. While a guard lives the signal is blocked in this thread,
// and a SIGPIPE raised meanwhile is taken off the thread before the old
// mask returns.
class SigpipeGuard {
  public:
    SigpipeGuard() {
        sigemptyset(&pipe_set_);
        sigaddset(&pipe_set_, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set_, &old_);
    }
    ~SigpipeGuard() {
        sigset_t pending;
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE) == 1 && sigismember(&old_, SIGPIPE) == 0) {
            const timespec zero{};
            (void) sigtimedwait(&pipe_set_, nullptr, &zero);
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }
    SigpipeGuard(const SigpipeGuard &)             = delete;
    SigpipeGuard & operator=(const SigpipeGuard &) = delete;

  private:
    sigset_t pipe_set_, old_;
};

} // namespace

Stream::~Stream() {
    if (ssl_ != nullptr) {
        SigpipeGuard guard;
        SSL_free(ssl_);
    }
    if (fd_ >= 0) {
        close(fd_);
    }
}

bool Stream::read_all(void * data, size_t n) {
    auto * p = static_cast<uint8_t *>(data);
    if (ssl_ != nullptr) {
        SigpipeGuard guard;
        while (n > 0) {
            const int r = SSL_read(ssl_, p, int(std::min<size_t>(n, INT_MAX)));
            if (r <= 0) {
                ERR_clear_error();
                return false;
            }
            p += r;
            n -= size_t(r);
        }
        return true;
    }
    const size_t had = take_buffered(p, n);
    p += had;
    n -= had;
    while (n > 0) {
        if (read_ahead_ && n < k_read_ahead) {
            // What the socket holds (at least one byte), kept for the reads
            // that follow.
            if (!ahead_) {
                ahead_ = std::make_unique<uint8_t[]>(k_read_ahead);
            }
            const ssize_t r = recv(fd_, ahead_.get(), k_read_ahead, 0);
            if (r < 0 && errno == EINTR) {
                continue;
            }
            if (r <= 0) {
                return false;
            }
            ahead_at_  = 0;
            ahead_end_ = size_t(r);
            const size_t k = take_buffered(p, n);
            p += k;
            n -= k;
            continue;
        }
        const ssize_t r = recv(fd_, p, n, MSG_WAITALL);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return false;
        }
        p += r;
        n -= size_t(r);
    }
    return true;
}

size_t Stream::take_buffered(uint8_t * p, size_t n) {
    const size_t k = std::min(n, ahead_end_ - ahead_at_);
    if (k > 0) {
        std::memcpy(p, ahead_.get() + ahead_at_, k);
        ahead_at_ += k;
    }
    return k;
}

bool Stream::write_all(const void * data, size_t n) {
    const auto * p = static_cast<const uint8_t *>(data);
    if (ssl_ != nullptr) {
        SigpipeGuard guard;
        while (n > 0) {
            const int w = SSL_write(ssl_, p, int(std::min<size_t>(n, INT_MAX)));
            if (w <= 0) {
                ERR_clear_error();
                return false;
            }
            p += w;
            n -= size_t(w);
        }
        return true;
    }
    while (n > 0) {
        const ssize_t w = send(fd_, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return false;
        }
        p += w;
        n -= size_t(w);
    }
    return true;
}

bool Stream::wait_readable(int timeout_ms) {
    if (ahead_at_ < ahead_end_ || (ssl_ != nullptr && SSL_pending(ssl_) > 0)) {
        return true;
    }
    if (ssl_ == nullptr && fd_ >= 0 && read_ahead_) {
        if (socket_timeout_ms_ < 0) {
            timeval   tv{};
            socklen_t len      = sizeof(tv);
            socket_timeout_ms_ = getsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) == 0
                                     ? int(std::min<int64_t>(int64_t(tv.tv_sec) * 1000 + tv.tv_usec / 1000, INT_MAX))
                                     : 0;
        }
        // In clear, the wait is a read of what the socket holds into the
        // read-ahead buffer, which the reads that follow take: one system
        // call instead of a poll and a read. A blocking read waits at most
        // the socket's timeout, so only waits of no time, for ever, or at
        // least that timeout (checked against the clock) go this way.
        if (timeout_ms <= 0 || (socket_timeout_ms_ > 0 && timeout_ms >= socket_timeout_ms_)) {
            if (!ahead_) {
                ahead_ = std::make_unique<uint8_t[]>(k_read_ahead);
            }
            const auto start = std::chrono::steady_clock::now();
            for (;;) {
                const ssize_t r = recv(fd_, ahead_.get(), k_read_ahead, timeout_ms == 0 ? MSG_DONTWAIT : 0);
                if (r > 0) {
                    ahead_at_  = 0;
                    ahead_end_ = size_t(r);
                    return true;
                }
                if (r < 0 && errno == EINTR) {
                    continue;
                }
                if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                    return true; // the end of the stream or an error, which the next read returns
                }
                if (timeout_ms == 0 || (timeout_ms > 0 && std::chrono::steady_clock::now() - start >=
                                                              std::chrono::milliseconds(timeout_ms))) {
                    return false;
                }
            }
        }
    }
    pollfd p{};
    p.fd     = fd_;
    p.events = POLLIN;
    for (;;) {
        const int r = poll(&p, 1, timeout_ms);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        return r > 0;
    }
}

void Stream::shut() {
    shutdown(fd_, SHUT_RDWR);
}

int Stream::release() {
    if (ssl_ != nullptr || ahead_at_ != ahead_end_ || fd_ < 0) {
        return -1;
    }
    return std::exchange(fd_, -1);
}

std::string endpoint_host(const std::string & endpoint) {
    const size_t colon = endpoint.rfind(':');
    std::string  host  = colon == std::string::npos ? endpoint : endpoint.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    return host;
}

int connect_to(const std::string & host, uint32_t port) {
    addrinfo hints{};
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo * found  = nullptr;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
        return -1;
    }
    int fd = -1;
    for (addrinfo * a = found; a != nullptr && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    return fd;
}

void tune_socket(int fd, uint32_t io_timeout_ms) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    timeval tv{};
    tv.tv_sec  = time_t(io_timeout_ms / 1000);
    tv.tv_usec = suseconds_t((io_timeout_ms % 1000) * 1000);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

namespace {

std::string tls_error() {
    char buf[256] = "unknown error";
    if (const unsigned long e = ERR_get_error(); e != 0) {
        ERR_error_string_n(e, buf, sizeof(buf));
    }
    ERR_clear_error();
    return buf;
}

std::shared_ptr<SSL_CTX> make_ctx(const SSL_METHOD * method) {
    SSL_CTX * ctx = SSL_CTX_new(method);
    if (ctx == nullptr) {
        return nullptr;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_AUTO_RETRY);
    return std::shared_ptr<SSL_CTX>(ctx, SSL_CTX_free);
}

} // namespace

std::shared_ptr<SSL_CTX> server_tls(const char * cert_path, const char * key_path) {
    auto ctx = make_ctx(TLS_server_method());
    if (!ctx || SSL_CTX_use_certificate_chain_file(ctx.get(), cert_path) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx.get(), key_path, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx.get()) != 1) {
        LOOM_LOG_ERROR("rpc server: TLS of the bulk connection: %s\n", tls_error().c_str());
        return nullptr;
    }
    return ctx;
}

std::shared_ptr<SSL_CTX> client_tls(const char * ca_path) {
    auto ctx = make_ctx(TLS_client_method());
    if (!ctx || SSL_CTX_load_verify_locations(ctx.get(), ca_path, nullptr) != 1) {
        LOOM_LOG_ERROR("RPC: TLS of the bulk connection: cannot use the CA file %s: %s\n", ca_path,
                       tls_error().c_str());
        return nullptr;
    }
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
    return ctx;
}

SSL * tls_accept(SSL_CTX * ctx, int fd) {
    SigpipeGuard guard;
    SSL *        ssl = SSL_new(ctx);
    if (ssl == nullptr || SSL_set_fd(ssl, fd) != 1 || SSL_accept(ssl) != 1) {
        ERR_clear_error();
        SSL_free(ssl);
        return nullptr;
    }
    return ssl;
}

SSL * tls_connect(SSL_CTX * ctx, int fd, const std::string & host) {
    SigpipeGuard guard;
    SSL *        ssl = SSL_new(ctx);
    if (ssl == nullptr) {
        return nullptr;
    }
    // The certificate must name the host as the client wrote it: an address
    // (IP SAN) or a name (DNS SAN).
    unsigned char addr[16];
    const bool    is_ip = inet_pton(AF_INET, host.c_str(), addr) == 1 || inet_pton(AF_INET6, host.c_str(), addr) == 1;
    X509_VERIFY_PARAM * param = SSL_get0_param(ssl);
    const bool named = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str()) == 1
                             : SSL_set1_host(ssl, host.c_str()) == 1 &&
                                   SSL_set_tlsext_host_name(ssl, host.c_str()) == 1;
    if (!named || SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1) {
        LOOM_LOG_ERROR("RPC: TLS handshake of the bulk connection with %s failed: %s\n", host.c_str(),
                       tls_error().c_str());
        SSL_free(ssl);
        return nullptr;
    }
    return ssl;
}

} // namespace loom::rpc::bulk
