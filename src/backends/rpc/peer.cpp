// Reductions between servers (Note [Peer links] in peer.h).

#include "peer.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "bulk.h"
#include "protocol.h"

namespace loom::rpc {

namespace {

grpc::Status failed(grpc::StatusCode code, const std::string & why) {
    return grpc::Status(code, "reduction between servers: " + why);
}

// One direction of a link during an exchange: a PeerChunk header, then the
// floats.
struct Transfer {
    PeerChunk chunk{};
    uint8_t * data  = nullptr;
    size_t    bytes = 0;
    size_t    done  = 0; // of sizeof(chunk) + bytes

    bool finished() const { return done == sizeof(chunk) + bytes; }
    // The next piece: where and how long.
    iovec next() {
        if (done < sizeof(chunk)) {
            return {reinterpret_cast<uint8_t *>(&chunk) + done, sizeof(chunk) - done};
        }
        return {data + (done - sizeof(chunk)), bytes - (done - sizeof(chunk))};
    }
};

} // namespace

PeerGroup::PeerGroup(uint32_t rank, uint32_t size, std::string ticket, uint32_t io_timeout_ms)
    : rank_(rank), size_(size), ticket_(std::move(ticket)), io_timeout_ms_(io_timeout_ms), fds_(size, -1) {}

PeerGroup::~PeerGroup() {
    for (int fd : fds_) {
        if (fd >= 0) {
            close(fd);
        }
    }
}

bool PeerGroup::accept_link(uint32_t from, int fd, const std::function<bool()> & answer) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (from <= rank_ || from >= size_ || fds_[from] >= 0 || !broken_.empty() || !answer()) {
        return false;
    }
    fds_[from] = fd;
    linked_.notify_all();
    return true;
}

grpc::Status PeerGroup::join(const GroupJoinRequest & req) {
    if (req.peers_size() != int(size_)) {
        return failed(grpc::StatusCode::INVALID_ARGUMENT, "the group has " + std::to_string(size_) +
                                                              " members and the join names " +
                                                              std::to_string(req.peers_size()));
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (joined_) {
            return failed(grpc::StatusCode::FAILED_PRECONDITION, "the group was joined already");
        }
        joined_ = true;
    }
    for (uint32_t r = 0; r < rank_; ++r) {
        const PeerAddress & peer = req.peers(int(r));
        if (peer.host().empty() || peer.host().size() > 255 || peer.port() == 0 || peer.port() > 65535 ||
            peer.ticket().size() != bulk::k_ticket_bytes) {
            return failed(grpc::StatusCode::INVALID_ARGUMENT, "malformed address of rank " + std::to_string(r));
        }
        const int fd = bulk::connect_to(peer.host(), peer.port());
        if (fd < 0) {
            return failed(grpc::StatusCode::UNAVAILABLE,
                          "cannot connect to rank " + std::to_string(r) + " at " + peer.host() + ":" +
                              std::to_string(peer.port()));
        }
        bulk::tune_socket(fd, io_timeout_ms_);
        bulk::Hello hello{};
        std::memcpy(hello.magic, bulk::k_peer_magic, sizeof(hello.magic));
        hello.version  = k_protocol_version;
        hello.reserved = rank_;
        std::memcpy(hello.ticket, peer.ticket().data(), sizeof(hello.ticket));
        // No read-ahead: the peer's first chunk may follow its reply, and the
        // exchange reads the socket itself.
        bulk::Stream io(fd, nullptr, /*read_ahead=*/false);
        bulk::Reply  reply{};
        std::string  message;
        bool         ok = io.write_all(&hello, sizeof(hello)) && io.read_all(&reply, sizeof(reply));
        if (ok && reply.message_bytes > 0) {
            message.resize(std::min<size_t>(reply.message_bytes, 4096));
            ok = reply.message_bytes <= 4096 && io.read_all(message.data(), message.size());
        }
        if (!ok || reply.code != 0) {
            return failed(grpc::StatusCode::UNAVAILABLE, "rank " + std::to_string(r) + " at " + peer.host() + ":" +
                                                             std::to_string(peer.port()) + " refused the link" +
                                                             (message.empty() ? std::string() : ": " + message));
        }
        (void) io.release(); // the link's now
        std::lock_guard<std::mutex> lock(mutex_);
        if (!broken_.empty()) {
            close(fd);
            return failed(grpc::StatusCode::ABORTED, broken_);
        }
        fds_[r] = fd;
    }
    return grpc::Status::OK;
}

void PeerGroup::shut(const std::string & why) {
    std::lock_guard<std::mutex> lock(mutex_);
    (void) broken_locked(why);
}

grpc::Status PeerGroup::broken_locked(const std::string & why) {
    if (broken_.empty()) {
        broken_ = why;
        for (int fd : fds_) {
            if (fd >= 0) {
                shutdown(fd, SHUT_RDWR);
            }
        }
        linked_.notify_all();
    }
    return failed(grpc::StatusCode::ABORTED, broken_);
}

grpc::Status PeerGroup::reduce(uint64_t sequence, float * data, size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!broken_.empty()) {
        return failed(grpc::StatusCode::ABORTED, broken_);
    }
    if (sequence != next_sequence_) {
        return broken_locked("reduction " + std::to_string(sequence) + " asked for where " +
                             std::to_string(next_sequence_) + " was due");
    }
    ++next_sequence_;
    // Peers of higher rank link in when their own join runs.
    const auto all_linked = [&] {
        if (!broken_.empty()) {
            return true;
        }
        for (uint32_t r = 0; r < size_; ++r) {
            if (r != rank_ && fds_[r] < 0) {
                return false;
            }
        }
        return true;
    };
    if (!linked_.wait_for(lock, std::chrono::milliseconds(io_timeout_ms_), all_linked)) {
        return broken_locked("not every peer linked in within " + std::to_string(io_timeout_ms_) + " ms");
    }
    if (!broken_.empty()) {
        return failed(grpc::StatusCode::ABORTED, broken_);
    }
    // The links are used without the lock, so that shut() can wake a
    // reduction blocked on them; they stay open while this group lives.
    const std::vector<int>          fds = fds_;
    std::vector<std::vector<float>> theirs(size_);
    lock.unlock();
    const std::string why = exchange(fds, sequence, data, count, &theirs);
    lock.lock();
    if (!why.empty()) {
        return broken_locked(why);
    }
    // In rank order from zero, as every member sums and as the client would.
    std::vector<float> sum(count, 0.0f);
    for (uint32_t r = 0; r < size_; ++r) {
        const float * p = r == rank_ ? data : theirs[r].data();
        for (size_t i = 0; i < count; ++i) sum[i] += p[i];
    }
    std::memcpy(data, sum.data(), count * sizeof(float));
    return grpc::Status::OK;
}

std::string PeerGroup::exchange(const std::vector<int> & fds, uint64_t sequence, const float * mine, size_t count,
                                std::vector<std::vector<float>> * theirs) const {
    const size_t          bytes = count * sizeof(float);
    std::vector<Transfer> out(size_), in(size_);
    std::vector<pollfd>   polled;
    std::vector<uint32_t> rank_of;
    for (uint32_t r = 0; r < size_; ++r) {
        if (r == rank_) {
            continue;
        }
        out[r].chunk = {sequence, bytes};
        out[r].data  = const_cast<uint8_t *>(reinterpret_cast<const uint8_t *>(mine));
        out[r].bytes = bytes;
        (*theirs)[r].resize(count);
        in[r].data  = reinterpret_cast<uint8_t *>((*theirs)[r].data());
        in[r].bytes = bytes;
        polled.push_back({fds[r], 0, 0});
        rank_of.push_back(r);
    }
    // Every link is written and read at once, so that no two members wait
    // on each other's full socket buffers.
    for (;;) {
        bool pending = false;
        for (size_t k = 0; k < polled.size(); ++k) {
            const uint32_t r = rank_of[k];
            polled[k].events = short((out[r].finished() ? 0 : POLLOUT) | (in[r].finished() ? 0 : POLLIN));
            pending          = pending || polled[k].events != 0;
        }
        if (!pending) {
            return {};
        }
        const int n = poll(polled.data(), polled.size(), int(io_timeout_ms_));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return (n == 0 ? "no progress with a peer within " + std::to_string(io_timeout_ms_) + " ms"
                                        : std::string("poll failed: ") + std::strerror(errno));
        }
        for (size_t k = 0; k < polled.size(); ++k) {
            const uint32_t r = rank_of[k];
            if ((polled[k].revents & POLLOUT) != 0 && !out[r].finished()) {
                const iovec   v = out[r].next();
                const ssize_t w = send(polled[k].fd, v.iov_base, v.iov_len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    return ("the link to rank " + std::to_string(r) + " failed");
                }
                out[r].done += w > 0 ? size_t(w) : 0;
            }
            if ((polled[k].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !in[r].finished()) {
                const iovec   v = in[r].next();
                const ssize_t g = recv(polled[k].fd, v.iov_base, v.iov_len, MSG_DONTWAIT);
                if (g == 0 || (g < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                    return ("rank " + std::to_string(r) + " closed its link");
                }
                const bool had_header = in[r].done >= sizeof(PeerChunk);
                in[r].done += g > 0 ? size_t(g) : 0;
                if (!had_header && in[r].done >= sizeof(PeerChunk) &&
                    (in[r].chunk.sequence != sequence || in[r].chunk.bytes != bytes)) {
                    return ("rank " + std::to_string(r) + " sent reduction " +
                                         std::to_string(in[r].chunk.sequence) + " of " +
                                         std::to_string(in[r].chunk.bytes) + " bytes where " +
                                         std::to_string(sequence) + " of " + std::to_string(bytes) + " was due");
                }
            }
        }
    }
}

} // namespace loom::rpc
