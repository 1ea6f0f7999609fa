#pragma once

// A raw bulk connection of the RPC protocol (Note [RPC bulk connection] in
// src/backends/rpc/bulk.h) for the tests: the socket and the framing,
// written here again, so that a test can send what the backend never sends.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "backends/rpc/bulk.h"
#include "backends/rpc/protocol.h"

namespace loomtest::rpc {

class RawBulk {
  public:
    explicit RawBulk(uint32_t port) {
        fd_ = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family      = AF_INET;
        a.sin_port        = htons(uint16_t(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd_, reinterpret_cast<sockaddr *>(&a), sizeof(a)) != 0) {
            close(fd_);
            fd_ = -1;
        }
        timeval tv{10, 0};
        setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    ~RawBulk() { end(); }
    RawBulk(const RawBulk &)             = delete;
    RawBulk & operator=(const RawBulk &) = delete;
    void end() {
        if (fd_ >= 0) {
            close(fd_);
            fd_ = -1;
        }
    }
    bool ok() const { return fd_ >= 0; }

    bool write(const void * p, size_t n) {
        const auto * b = static_cast<const uint8_t *>(p);
        while (n > 0) {
            const ssize_t w = send(fd_, b, n, MSG_NOSIGNAL);
            if (w <= 0) {
                return false;
            }
            b += w;
            n -= size_t(w);
        }
        return true;
    }
    bool read(void * p, size_t n) { return n == 0 || recv(fd_, p, n, MSG_WAITALL) == ssize_t(n); }
    // True when the server closed the connection (end of stream).
    bool closed_by_server() {
        char c;
        return recv(fd_, &c, 1, 0) == 0;
    }
    void end_writes() { shutdown(fd_, SHUT_WR); }

    bool hello(const std::string & ticket, uint32_t version = loom::rpc::k_protocol_version) {
        loom::rpc::bulk::Hello h{};
        std::memcpy(h.magic, loom::rpc::bulk::k_bulk_magic, sizeof(h.magic));
        h.version = version;
        std::memcpy(h.ticket, ticket.data(), std::min(ticket.size(), sizeof(h.ticket)));
        return write(&h, sizeof(h));
    }
    void frame(loom::rpc::bulk::Op op, const std::string & meta, uint64_t offset, uint64_t size) {
        loom::rpc::bulk::Frame f{uint32_t(op), uint32_t(meta.size()), offset, size};
        ASSERT_TRUE(write(&f, sizeof(f)));
        ASSERT_TRUE(write(meta.data(), meta.size()));
    }
    // The next reply's code and message; code -1 when none came.
    std::pair<int, std::string> reply(uint64_t * size = nullptr) {
        loom::rpc::bulk::Reply r{};
        if (!read(&r, sizeof(r))) {
            return {-1, ""};
        }
        std::string msg(r.message_bytes, '\0');
        if (!read(msg.data(), msg.size())) {
            return {-1, ""};
        }
        if (size != nullptr) {
            *size = r.size;
        }
        return {int(r.code), msg};
    }

  private:
    int fd_ = -1;
};

} // namespace loomtest::rpc
