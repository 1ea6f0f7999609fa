// Socket helpers of the bulk connection (bulk.h).

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>

#include "bulk.h"

namespace loom::rpc::bulk {

bool read_all(int fd, void * data, size_t n) {
    auto * p = static_cast<uint8_t *>(data);
    while (n > 0) {
        const ssize_t r = recv(fd, p, n, MSG_WAITALL);
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

bool write_all(int fd, const void * data, size_t n) {
    const auto * p = static_cast<const uint8_t *>(data);
    while (n > 0) {
        const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
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

bool wait_readable(int fd, int timeout_ms) {
    pollfd p{};
    p.fd     = fd;
    p.events = POLLIN;
    for (;;) {
        const int r = poll(&p, 1, timeout_ms);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        return r > 0;
    }
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

} // namespace loom::rpc::bulk
