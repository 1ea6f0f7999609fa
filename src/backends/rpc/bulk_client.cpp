// The client side of the bulk connection (bulk_client.h).

#include "bulk_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "core/common.h"
#include "protocol.h"

namespace loom::rpc {

namespace {

// Frames up to this size are written with one call (header, description
// and data copied together); larger data is sent from the caller's memory.
constexpr size_t k_small_frame_bytes = size_t(64) << 10;
// Blocks of 2D transfers smaller than k_small_frame_bytes are gathered
// into writes (and reads) of about this size.
constexpr size_t k_gather_bytes = size_t(1) << 20;
// Replies left unread before a set waits for them (they fill the server's
// socket buffer otherwise).
constexpr size_t k_max_pending = 256;
// Payload bytes of asynchronous reads left unread. The server writes a
// reply whole before it reads the next frame, so unread replies must fit in
// the two sockets' buffers, or client and server both wait on a write; a
// loopback or LAN socket pair holds far more than this.
constexpr size_t k_max_unread_bytes = size_t(256) << 10;
// Bytes of small uploads held back at most (Note [Uploads held back]).
constexpr size_t k_max_held_bytes = size_t(64) << 10;

// Note [Uploads held back]
// An upload's reply is read later, so nothing waits for its frame to leave
// at once; what reads the uploaded bytes is a later frame on the same
// connection. A small upload is therefore held in held_ and written with
// the next frame that is not held (a computation, a download, a call) or
// before the client waits for replies. A step of an inference, inputs set,
// graph computed, output read, then reaches the server as one write: the
// server reads the frames together, answers them with one write (it holds
// replies while more frames are readable), and the client wakes once
// instead of once for each reply. Uploads of other connections never read
// these bytes, and a gRPC call that does waits for this connection's
// replies first (Connection::sync_bulk), which writes them.

} // namespace

std::unique_ptr<BulkChannel> BulkChannel::open(const std::string & endpoint, const std::string & host, uint32_t port,
                                               const std::string & ticket, uint32_t io_timeout_ms,
                                               const char * ca_path) {
    if (ticket.size() != bulk::k_ticket_bytes) {
        LOOM_LOG_WARN("RPC[%s]: the server's bulk ticket has %zu bytes; transfers go through gRPC\n",
                      endpoint.c_str(), ticket.size());
        return nullptr;
    }
    const int fd = bulk::connect_to(host, port);
    if (fd < 0) {
        LOOM_LOG_WARN("RPC[%s]: cannot connect to the bulk port %u; transfers go through gRPC\n", endpoint.c_str(),
                      port);
        return nullptr;
    }
    bulk::tune_socket(fd, io_timeout_ms);
    SSL * ssl = nullptr;
    if (ca_path != nullptr) {
        std::shared_ptr<SSL_CTX> tls = bulk::client_tls(ca_path);
        if (!tls || (ssl = bulk::tls_connect(tls.get(), fd, host)) == nullptr) {
            close(fd);
            LOOM_LOG_WARN("RPC[%s]: no TLS on the bulk port %u; transfers go through gRPC\n", endpoint.c_str(), port);
            return nullptr;
        }
    }
    std::unique_ptr<BulkChannel> c(new BulkChannel(std::make_unique<bulk::Stream>(fd, ssl), io_timeout_ms));
    bulk::Hello                  hello{};
    std::memcpy(hello.magic, bulk::k_bulk_magic, sizeof(hello.magic));
    hello.version = k_protocol_version;
    std::memcpy(hello.ticket, ticket.data(), sizeof(hello.ticket));
    std::lock_guard<std::mutex> lock(c->mutex_);
    bulk::Reply                 r{};
    grpc::Status                st = c->io_->write_all(&hello, sizeof(hello))
                                         ? c->read_reply_locked(io_timeout_ms, &r)
                                         : grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection lost");
    if (!st.ok()) {
        LOOM_LOG_WARN("RPC[%s]: the bulk connection was refused (%s); transfers go through gRPC\n", endpoint.c_str(),
                      st.error_message().c_str());
        return nullptr;
    }
    return c;
}

BulkChannel::~BulkChannel() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!dead_) {
        (void) flush_locked();
    }
}

bool BulkChannel::alive() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !dead_;
}

grpc::Status BulkChannel::broken_locked(const char * what) {
    dead_ = true;
    io_->shut();
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string("bulk connection lost during ") + what);
}

bool BulkChannel::flush_locked() {
    if (held_.empty()) {
        return true;
    }
    const bool ok = io_->write_all(held_.data(), held_.size());
    held_.clear();
    return ok;
}

bool BulkChannel::send_frame_locked(bulk::Op op, const std::string & meta, uint64_t offset, uint64_t size,
                                    const void * data, bool may_hold) {
    bulk::Frame f{};
    f.op         = uint32_t(op);
    f.meta_bytes = uint32_t(meta.size());
    f.offset     = offset;
    f.size       = size;
    const size_t inline_data = data != nullptr && size <= k_small_frame_bytes ? size_t(size) : 0;
    frame_.assign(reinterpret_cast<const char *>(&f), sizeof(f));
    frame_ += meta;
    if (inline_data > 0) {
        frame_.append(static_cast<const char *>(data), inline_data);
    }
    const bool whole = data == nullptr || inline_data == size;
    if (whole && (may_hold || !held_.empty()) && held_.size() + frame_.size() <= k_max_held_bytes) {
        held_ += frame_;
        return may_hold || flush_locked();
    }
    if (!flush_locked() || !io_->write_all(frame_.data(), frame_.size())) {
        return false;
    }
    return data == nullptr || inline_data == size || io_->write_all(data, size_t(size));
}

grpc::Status BulkChannel::read_reply_locked(uint32_t timeout_ms, bulk::Reply * r) {
    if (!io_->wait_readable(int(timeout_ms))) {
        // A late reply would be taken for the next one's: the connection ends.
        dead_ = true;
        io_->shut();
        return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "no reply on the bulk connection in time");
    }
    if (!io_->read_all(r, sizeof(*r))) {
        return broken_locked("a reply");
    }
    if (r->code == 0) {
        return grpc::Status::OK;
    }
    std::string msg(std::min<size_t>(r->message_bytes, 1 << 16), '\0');
    if (r->message_bytes > msg.size() || !io_->read_all(msg.data(), msg.size())) {
        return broken_locked("a reply");
    }
    return grpc::Status(grpc::StatusCode(r->code), msg);
}

grpc::Status BulkChannel::drain_locked(uint64_t until) {
    if (!dead_ && !pending_.empty() && !flush_locked()) {
        (void) broken_locked("an upload");
    }
    grpc::Status first       = deferred_;
    deferred_                = grpc::Status::OK;
    const bool   had_pending = !pending_.empty();
    while (!pending_.empty() && !dead_ && sent_ - pending_.size() < until) {
        const Expected e = pending_.front();
        pending_.pop_front();
        pending_bytes_ -= e.n;
        bulk::Reply  r{};
        grpc::Status st = read_reply_locked(io_timeout_ms_, &r);
        if (st.ok() && e.dst != nullptr) {
            if (r.size != e.n) {
                st = broken_locked("a download (the server sent another size)");
            } else if (!io_->read_all(e.dst, size_t(e.n))) {
                st = broken_locked("a download");
            }
        } else if (st.ok()) {
            std::string skip(size_t(std::min<uint64_t>(r.size, bulk::k_max_meta_bytes)), '\0');
            if (r.size > skip.size() || !io_->read_all(skip.data(), skip.size())) {
                st = broken_locked("a reply");
            }
        }
        if (first.ok() && !st.ok()) {
            first = st;
        }
    }
    if (dead_ && had_pending && first.ok()) {
        // Frames whose outcome is unknown: reported once.
        first = grpc::Status(grpc::StatusCode::UNAVAILABLE, "bulk connection lost");
    }
    if (dead_) {
        pending_.clear();
        pending_bytes_ = 0;
    }
    return first;
}

bool BulkChannel::expect_locked(Expected e) {
    ++sent_;
    pending_.push_back(e);
    pending_bytes_ += e.n;
    return true;
}

grpc::Status BulkChannel::lost_locked(const char * what) {
    grpc::Status st = broken_locked(what);
    if (!deferred_.ok()) {
        st = deferred_;
    }
    // The caller's failure stands for the frames whose replies are lost.
    deferred_ = grpc::Status::OK;
    pending_.clear();
    pending_bytes_ = 0;
    return st;
}

void BulkChannel::defer_locked(const grpc::Status & st) {
    if (deferred_.ok()) {
        deferred_ = st;
    }
}

grpc::Status BulkChannel::sync() {
    std::lock_guard<std::mutex> lock(mutex_);
    return drain_locked();
}

uint64_t BulkChannel::mark() {
    std::lock_guard<std::mutex> lock(mutex_);
    return sent_;
}

grpc::Status BulkChannel::wait_for(uint64_t frames) {
    std::lock_guard<std::mutex> lock(mutex_);
    return drain_locked(frames);
}

bool BulkChannel::set(const TensorDesc & d, uint64_t offset, const void * data, size_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dead_) {
        return false;
    }
    if (pending_.size() >= k_max_pending) {
        defer_locked(drain_locked());
    }
    if (!send_frame_locked(bulk::Op::set, d.SerializeAsString(), offset, n, data, true)) {
        (void) broken_locked("an upload");
        return false;
    }
    return expect_locked({});
}

grpc::Status BulkChannel::get(const TensorDesc & d, uint64_t offset, void * data, size_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dead_) {
        return broken_locked("a download");
    }
    // The frame first: the replies of earlier frames come before its own.
    if (!send_frame_locked(bulk::Op::get, d.SerializeAsString(), offset, n, nullptr)) {
        return lost_locked("a download");
    }
    ++sent_;
    const grpc::Status earlier = drain_locked();
    if (dead_) {
        return earlier;
    }
    bulk::Reply  r{};
    grpc::Status st = read_reply_locked(io_timeout_ms_, &r);
    if (!st.ok()) {
        return earlier.ok() ? st : earlier;
    }
    if (r.size != n) {
        return broken_locked("a download (the server sent another size)");
    }
    if (!io_->read_all(data, n)) {
        return broken_locked("a download");
    }
    return earlier;
}

bool BulkChannel::get_async(const TensorDesc & d, uint64_t offset, void * data, size_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dead_) {
        return false;
    }
    if (n > k_max_unread_bytes) {
        // Read at once (the caller's wait, as a synchronous read).
        if (!send_frame_locked(bulk::Op::get, d.SerializeAsString(), offset, n, nullptr)) {
            (void) broken_locked("a download");
            return false;
        }
        expect_locked({data, n});
        defer_locked(drain_locked());
        return true;
    }
    if (pending_.size() >= k_max_pending || pending_bytes_ + n > k_max_unread_bytes) {
        defer_locked(drain_locked());
    }
    if (!send_frame_locked(bulk::Op::get, d.SerializeAsString(), offset, n, nullptr)) {
        (void) broken_locked("a download");
        return false;
    }
    return expect_locked({data, n});
}

bool BulkChannel::set_2d(const Transfer2d & req, const void * data, size_t stride_data) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dead_) {
        return false;
    }
    if (pending_.size() >= k_max_pending) {
        defer_locked(drain_locked());
    }
    const uint64_t block = req.block();
    bulk::Frame    f{};
    f.op         = uint32_t(bulk::Op::set_2d);
    f.size       = req.count() * block;
    std::string meta = req.SerializeAsString();
    f.meta_bytes = uint32_t(meta.size());
    frame_.assign(reinterpret_cast<const char *>(&f), sizeof(f));
    frame_ += meta;
    // Small blocks are gathered behind the header; large ones go from the
    // caller's memory.
    bool         ok    = flush_locked();
    const auto * bytes = static_cast<const char *>(data);
    for (uint64_t i = 0; ok && i < req.count(); ++i) {
        const char * b = bytes + i * stride_data;
        if (block >= k_small_frame_bytes) {
            ok = (frame_.empty() || io_->write_all(frame_.data(), frame_.size())) && io_->write_all(b, size_t(block));
            frame_.clear();
            continue;
        }
        frame_.append(b, size_t(block));
        if (frame_.size() >= k_gather_bytes) {
            ok = io_->write_all(frame_.data(), frame_.size());
            frame_.clear();
        }
    }
    if (ok && !frame_.empty()) {
        ok = io_->write_all(frame_.data(), frame_.size());
    }
    if (!ok) {
        (void) broken_locked("an upload");
        return false;
    }
    return expect_locked({});
}

grpc::Status BulkChannel::get_2d(const Transfer2d & req, void * data, size_t stride_data) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dead_) {
        return broken_locked("a download");
    }
    const uint64_t block = req.block();
    const uint64_t total = req.count() * block;
    if (!send_frame_locked(bulk::Op::get_2d, req.SerializeAsString(), 0, total, nullptr)) {
        return lost_locked("a download");
    }
    ++sent_;
    const grpc::Status earlier = drain_locked();
    if (dead_) {
        return earlier;
    }
    bulk::Reply  r{};
    grpc::Status st = read_reply_locked(io_timeout_ms_, &r);
    if (!st.ok()) {
        return earlier.ok() ? st : earlier;
    }
    if (r.size != total) {
        return broken_locked("a download (the server sent another size)");
    }
    auto * bytes = static_cast<uint8_t *>(data);
    if (block >= k_small_frame_bytes) {
        for (uint64_t i = 0; i < req.count(); ++i) {
            if (!io_->read_all(bytes + i * stride_data, size_t(block))) {
                return broken_locked("a download");
            }
        }
        return earlier;
    }
    staging_.resize(k_gather_bytes);
    bulk::BlockWalk walk(block, stride_data);
    for (uint64_t done = 0; done < total;) {
        const size_t part = size_t(std::min<uint64_t>(staging_.size(), total - done));
        if (!io_->read_all(staging_.data(), part)) {
            return broken_locked("a download");
        }
        walk.take(part, [&](uint64_t at, uint64_t from, uint64_t n) {
            std::memcpy(bytes + at, staging_.data() + from, size_t(n));
        });
        done += part;
    }
    return earlier;
}

grpc::Status BulkChannel::call(bulk::Op op, const google::protobuf::Message & req, google::protobuf::Message * rep,
                               uint32_t timeout_ms) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dead_) {
        return broken_locked("a call");
    }
    if (rep == nullptr && pending_.size() >= k_max_pending) {
        defer_locked(drain_locked());
    }
    if (!send_frame_locked(op, req.SerializeAsString(), 0, 0, nullptr)) {
        return lost_locked("a call"); // its failure stands for the frames before it
    }
    if (rep == nullptr) {
        expect_locked({});
        return grpc::Status::OK;
    }
    ++sent_;
    const grpc::Status earlier = drain_locked();
    if (dead_) {
        return earlier;
    }
    bulk::Reply  r{};
    grpc::Status st = read_reply_locked(timeout_ms, &r);
    if (!st.ok()) {
        return earlier.ok() ? st : earlier;
    }
    std::string payload(size_t(std::min<uint64_t>(r.size, bulk::k_max_meta_bytes)), '\0');
    if (r.size > payload.size() || !io_->read_all(payload.data(), payload.size()) ||
        !rep->ParseFromString(payload)) {
        return broken_locked("a call (malformed reply)");
    }
    return earlier.ok() ? st : earlier;
}

} // namespace loom::rpc
