// The server side of the bulk connection (bulk.h, bulk_server.h).

#include "bulk_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "backend/backend_impl.h"
#include "bulk.h"
#include "core/common.h"

namespace loom::rpc {

namespace {

using bulk::Frame;
using bulk::Op;
using bulk::Reply;

// Connections open at once, bound or not; more are closed at once.
constexpr size_t k_max_connections = 256;
// Blocks of 2D transfers at least this large in host memory go straight
// between the socket and the tensor; smaller ones through staging.
constexpr uint64_t k_direct_block_bytes = uint64_t(64) << 10;

void append_reply(std::string * out, const grpc::Status & st, const std::string & payload) {
    const std::string msg = st.ok() ? std::string() : st.error_message();
    Reply             r{};
    r.code          = uint32_t(st.error_code());
    r.message_bytes = uint32_t(msg.size());
    r.size          = payload.size();
    out->append(reinterpret_cast<const char *>(&r), sizeof(r));
    *out += msg;
    *out += payload;
}

// Downloads up to this size are answered among the other replies (Replies),
// larger ones from the tensor's memory.
constexpr uint64_t k_reply_with_others_bytes = uint64_t(64) << 10;

bool send_reply(bulk::Stream & io, const grpc::Status & st, const std::string & payload = {}) {
    std::string out;
    append_reply(&out, st, payload);
    return io.write_all(out.data(), out.size());
}

// Replies of a connection not yet written. A client sends the frames of a
// step (inputs, compute, read the output) back to back and waits only at
// the end, so the replies of frames that arrive while others are waiting
// go out together, in one write and one wake-up of the client, once it has
// sent nothing more (or the replies pile up).
class Replies {
  public:
    explicit Replies(bulk::Stream & io) : io_(io) {}

    void add(const grpc::Status & st, const std::string & payload) { append_reply(&out_, st, payload); }
    bool flush() {
        const bool ok = out_.empty() || io_.write_all(out_.data(), out_.size());
        out_.clear();
        return ok;
    }
    // Flushes unless the next frame is already there.
    bool flush_if_idle() {
        if (out_.empty() || (out_.size() < k_max_held && io_.wait_readable(0))) {
            return true;
        }
        return flush();
    }

  private:
    static constexpr size_t k_max_held = size_t(64) << 10;
    bulk::Stream &          io_;
    std::string             out_;
};

grpc::Status refused(const std::string & why) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
}

// Reads the blocks of req (checked against t) from io into t; false when
// the connection ends or stalls first.
bool receive_blocks(bulk::Stream & io, ggml_tensor & t, const Transfer2d & req, std::vector<uint8_t> * staging) {
    if (req.block() == 0 || req.count() == 0) {
        return true;
    }
    const bool host = ggml_backend_buffer_is_host(t.buffer);
    // Only host memory is addressed directly.
    uint8_t * base = host ? static_cast<uint8_t *>(t.data) + req.offset() : nullptr;
    if (host && req.block() >= k_direct_block_bytes) {
        for (uint64_t i = 0; i < req.count(); ++i) {
            if (!io.read_all(base + i * req.stride(), size_t(req.block()))) {
                return false;
            }
        }
        return true;
    }
    staging->resize(bulk::k_staging_bytes);
    bulk::BlockWalk walk(req.block(), req.stride());
    const uint64_t  total = req.count() * req.block();
    for (uint64_t done = 0; done < total;) {
        const size_t part = size_t(std::min<uint64_t>(staging->size(), total - done));
        if (!io.read_all(staging->data(), part)) {
            return false;
        }
        walk.take(part, [&](uint64_t at, uint64_t from, uint64_t n) {
            if (host) {
                std::memcpy(base + at, staging->data() + from, size_t(n));
            } else {
                t.buffer->set_tensor(&t, staging->data() + from, size_t(req.offset() + at), size_t(n));
            }
        });
        done += part;
    }
    return true;
}

// Writes the blocks of req (checked against t) to io; false when the
// connection fails.
bool send_blocks(bulk::Stream & io, ggml_tensor & t, const Transfer2d & req, std::vector<uint8_t> * staging) {
    if (req.block() == 0 || req.count() == 0) {
        return true;
    }
    const bool      host = ggml_backend_buffer_is_host(t.buffer);
    const uint8_t * base = host ? static_cast<const uint8_t *>(t.data) + req.offset() : nullptr;
    if (host && req.block() >= k_direct_block_bytes) {
        for (uint64_t i = 0; i < req.count(); ++i) {
            if (!io.write_all(base + i * req.stride(), size_t(req.block()))) {
                return false;
            }
        }
        return true;
    }
    staging->resize(bulk::k_staging_bytes);
    bulk::BlockWalk walk(req.block(), req.stride());
    const uint64_t  total = req.count() * req.block();
    for (uint64_t done = 0; done < total;) {
        const size_t part = size_t(std::min<uint64_t>(staging->size(), total - done));
        walk.take(part, [&](uint64_t at, uint64_t to, uint64_t n) {
            if (host) {
                std::memcpy(staging->data() + to, base + at, size_t(n));
            } else {
                t.buffer->get_tensor(&t, staging->data() + to, size_t(req.offset() + at), size_t(n));
            }
        });
        if (!io.write_all(staging->data(), part)) {
            return false;
        }
        done += part;
    }
    return true;
}

} // namespace

bool BulkServer::listen_on(const std::string & host, std::shared_ptr<SSL_CTX> tls) {
    tls_ = std::move(tls);
    addrinfo hints{};
    hints.ai_family   = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags    = AI_PASSIVE;
    addrinfo * found  = nullptr;
    const bool any    = host.empty() || host == "0.0.0.0" || host == "[::]";
    if (getaddrinfo(any ? nullptr : host.c_str(), "0", &hints, &found) != 0 || found == nullptr) {
        LOOM_LOG_ERROR("rpc server: cannot resolve %s for the bulk connection\n", host.c_str());
        return false;
    }
    for (addrinfo * a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
        if (any && a->ai_family != AF_INET) {
            continue;
        }
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            continue;
        }
        if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
            close(fd);
            continue;
        }
        sockaddr_storage addr{};
        socklen_t        len = sizeof(addr);
        getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
        port_      = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port)
                                                : ntohs(reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
        listen_fd_ = fd;
    }
    freeaddrinfo(found);
    if (listen_fd_ < 0 || pipe2(wake_, O_CLOEXEC) != 0) {
        LOOM_LOG_ERROR("rpc server: cannot listen on %s for the bulk connection\n", host.c_str());
        return false;
    }
    acceptor_ = std::thread([this] { accept_loop(); });
    return true;
}

void BulkServer::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_ && !acceptor_.joinable()) {
            return;
        }
        stopping_ = true;
        for (int fd : open_fds_) {
            shutdown(fd, SHUT_RDWR);
        }
    }
    if (wake_[1] >= 0) {
        const char c = 0;
        (void) !write(wake_[1], &c, 1);
    }
    if (acceptor_.joinable()) {
        acceptor_.join();
    }
    for (Worker & w : workers_) {
        w.thread.join();
    }
    workers_.clear();
    for (int & fd : {std::ref(listen_fd_), std::ref(wake_[0]), std::ref(wake_[1])}) {
        if (fd >= 0) {
            close(fd);
            fd = -1;
        }
    }
}

void BulkServer::accept_loop() {
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
        if (stopping_ || open_fds_.size() >= k_max_connections) {
            close(fd);
            continue;
        }
        // Threads of connections that ended are joined here.
        for (auto it = workers_.begin(); it != workers_.end();) {
            if (it->done->load()) {
                it->thread.join();
                it = workers_.erase(it);
            } else {
                ++it;
            }
        }
        open_fds_.push_back(fd);
        auto done = std::make_shared<std::atomic<bool>>(false);
        workers_.push_back({std::thread([this, fd, done] {
                                serve(fd);
                                done->store(true);
                            }),
                            done});
    }
}

void BulkServer::serve(int fd) {
    bulk::tune_socket(fd, bulk::k_io_timeout_ms);
    SSL * ssl = nullptr;
    if (tls_ && (ssl = bulk::tls_accept(tls_.get(), fd)) == nullptr) {
        std::lock_guard<std::mutex> lock(mutex_);
        open_fds_.erase(std::find(open_fds_.begin(), open_fds_.end(), fd));
        close(fd);
        return;
    }
    auto                     io = std::make_unique<bulk::Stream>(fd, ssl);
    std::shared_ptr<Session> s;
    bulk::Hello              hello{};
    if (io->wait_readable(int(bulk::k_io_timeout_ms)) && io->read_all(&hello, sizeof(hello))) {
        if (std::memcmp(hello.magic, bulk::k_peer_magic, sizeof(hello.magic)) == 0) {
            serve_peer(std::move(io), hello);
            return;
        }
        if (std::memcmp(hello.magic, bulk::k_bulk_magic, sizeof(hello.magic)) != 0 ||
            hello.version != k_protocol_version) {
            send_reply(*io, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "not a bulk connection of protocol " +
                                                                                   std::to_string(k_protocol_version)));
        } else {
            s = core_.claim_bulk(std::string(reinterpret_cast<const char *>(hello.ticket), sizeof(hello.ticket)), fd);
            if (!s) {
                send_reply(*io, grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "unknown or used bulk ticket"));
            } else if (!send_reply(*io, grpc::Status::OK)) {
                core_.release_bulk(*s, fd);
                s.reset();
            }
        }
    }
    std::vector<uint8_t> staging;
    std::string          meta;
    Replies              replies(*io);
    while (s) {
        Frame f{};
        if (!replies.flush_if_idle() || !io->wait_readable(-1) || !io->read_all(&f, sizeof(f))) {
            break;
        }
        if (f.meta_bytes > bulk::k_max_meta_bytes) {
            replies.add(refused("bulk frame: " + std::to_string(f.meta_bytes) + " bytes of description"), {});
            break;
        }
        meta.resize(f.meta_bytes);
        if (!io->read_all(meta.data(), meta.size())) {
            replies.add(refused("bulk frame: the connection ended or stalled before its " +
                                std::to_string(f.meta_bytes) + " bytes of description arrived"),
                        {});
            break;
        }
        bool         io_ok      = true;  // false: the connection can no longer be used
        bool         sent_reply = false; // a get that answered with its bytes
        grpc::Status st;
        std::string  payload;
        switch (Op(f.op)) {
            case Op::set: {
                TensorDesc d;
                if (!d.ParseFromString(meta)) {
                    st = refused("SetTensor: malformed tensor description");
                    break;
                }
                st = core_.with_range(*s, "SetTensor", d, f.offset, f.size, [&](ggml_tensor & t) {
                    uint64_t done = 0;
                    if (ggml_backend_buffer_is_host(t.buffer)) {
                        io_ok = io->read_all(static_cast<uint8_t *>(t.data) + f.offset, size_t(f.size));
                        done  = io_ok ? f.size : 0;
                    } else {
                        staging.resize(bulk::k_staging_bytes);
                        while (io_ok && done < f.size) {
                            const size_t part = size_t(std::min<uint64_t>(staging.size(), f.size - done));
                            io_ok             = io->read_all(staging.data(), part);
                            if (io_ok) {
                                t.buffer->set_tensor(&t, staging.data(), size_t(f.offset + done), part);
                                done += part;
                            }
                        }
                    }
                    return io_ok ? grpc::Status::OK
                                 : refused("SetTensor: the frame announced " + std::to_string(f.size) +
                                           " bytes and the connection ended or stalled before they arrived");
                });
                if (!st.ok()) {
                    io_ok = false; // the bytes after the header cannot be told from a next frame
                }
                break;
            }
            case Op::get: {
                TensorDesc d;
                if (!d.ParseFromString(meta)) {
                    st = refused("GetTensor: malformed tensor description");
                    break;
                }
                st = core_.with_range(*s, "GetTensor", d, f.offset, f.size, [&](ggml_tensor & t) {
                    if (f.size <= k_reply_with_others_bytes) {
                        // With the replies around it, in one write.
                        payload.resize(size_t(f.size));
                        t.buffer->get_tensor(&t, payload.data(), size_t(f.offset), size_t(f.size));
                        return grpc::Status::OK;
                    }
                    sent_reply = true;
                    Reply r{};
                    r.size = f.size;
                    io_ok  = replies.flush() && io->write_all(&r, sizeof(r));
                    if (ggml_backend_buffer_is_host(t.buffer)) {
                        io_ok = io_ok &&
                                io->write_all(static_cast<const uint8_t *>(t.data) + f.offset, size_t(f.size));
                    } else {
                        staging.resize(bulk::k_staging_bytes);
                        for (uint64_t done = 0; io_ok && done < f.size;) {
                            const size_t part = size_t(std::min<uint64_t>(staging.size(), f.size - done));
                            t.buffer->get_tensor(&t, staging.data(), size_t(f.offset + done), part);
                            io_ok = io->write_all(staging.data(), part);
                            done += part;
                        }
                    }
                    return grpc::Status::OK;
                });
                break;
            }
            case Op::set_2d: {
                Transfer2d req;
                if (f.offset != 0 || !req.ParseFromString(meta)) {
                    st = refused("SetTensor2d: malformed frame");
                    io_ok = false;
                    break;
                }
                st = core_.with_blocks(*s, "SetTensor2d", req, f.size, [&](ggml_tensor & t) {
                    io_ok = receive_blocks(*io, t, req, &staging);
                    return io_ok ? grpc::Status::OK
                                 : refused("SetTensor2d: the frame announced " + std::to_string(f.size) +
                                           " bytes and the connection ended or stalled before they arrived");
                });
                if (!st.ok()) {
                    io_ok = false; // the bytes after the header cannot be told from a next frame
                }
                break;
            }
            case Op::get_2d: {
                Transfer2d req;
                if (f.offset != 0 || !req.ParseFromString(meta)) {
                    st = refused("GetTensor2d: malformed frame");
                    break;
                }
                st = core_.with_blocks(*s, "GetTensor2d", req, f.size, [&](ggml_tensor & t) {
                    sent_reply = true;
                    Reply r{};
                    r.size = f.size;
                    io_ok  = replies.flush() && io->write_all(&r, sizeof(r)) && send_blocks(*io, t, req, &staging);
                    return grpc::Status::OK;
                });
                break;
            }
            case Op::init: {
                InitTensorRequest req;
                Empty             rep;
                st = req.ParseFromString(meta) ? core_.init_tensor(*s, req, &rep)
                                               : refused("InitTensor: malformed request");
                break;
            }
            case Op::hash: {
                SetTensorHashRequest req;
                SetTensorHashReply   rep;
                st = req.ParseFromString(meta) ? core_.set_tensor_hash(*s, req, &rep)
                                               : refused("SetTensorHash: malformed request");
                payload = rep.SerializeAsString();
                break;
            }
            case Op::compute: {
                GraphComputeRequest req;
                GraphComputeReply   rep;
                st = req.ParseFromString(meta) ? core_.graph_compute(*s, req, &rep)
                                               : refused("GraphCompute: malformed request");
                if (st.ok() && rep.status() != GGML_STATUS_SUCCESS) {
                    st = bulk::computation_failed(ggml_status(rep.status()));
                }
                payload = rep.SerializeAsString();
                break;
            }
            case Op::group_open: {
                GroupOpenRequest req;
                GroupOpenReply   rep;
                st = !peer_links() ? grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                                  "GroupOpen: this server offers no peer links (it speaks TLS)")
                     : req.ParseFromString(meta) ? core_.open_group(*s, req, &rep)
                                                 : refused("GroupOpen: malformed request");
                payload = rep.SerializeAsString();
                break;
            }
            case Op::group_join: {
                GroupJoinRequest req;
                st = req.ParseFromString(meta) ? core_.join_group(*s, req) : refused("GroupJoin: malformed request");
                break;
            }
            case Op::reduce: {
                ReduceRequest req;
                st = req.ParseFromString(meta) ? core_.reduce(*s, req) : refused("Reduce: malformed request");
                if (!st.ok() && st.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {
                    // Answered as a computation's failure, which a client that
                    // streams reductions between computations reads as one.
                    st = grpc::Status(grpc::StatusCode::INTERNAL, st.error_message());
                }
                break;
            }
            case Op::group_close: {
                GroupRequest req;
                st = req.ParseFromString(meta) ? core_.close_group(*s, req) : refused("GroupClose: malformed request");
                break;
            }
            default:
                st    = refused("bulk frame: unknown operation " + std::to_string(f.op));
                io_ok = false;
                break;
        }
        if (!sent_reply) {
            replies.add(st, st.ok() ? payload : std::string());
        }
        if (!io_ok) {
            break;
        }
    }
    (void) replies.flush(); // the last ones, also the reason of a refusal that ends the connection
    if (s) {
        core_.release_bulk(*s, fd);
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        open_fds_.erase(std::find(open_fds_.begin(), open_fds_.end(), fd));
    }
    io.reset(); // closes fd, now no longer shut down by stop()
}

void BulkServer::serve_peer(std::unique_ptr<bulk::Stream> io, const bulk::Hello & hello) {
    const int fd = io->fd();
    bool      taken = false;
    if (!peer_links() || hello.version != k_protocol_version) {
        send_reply(*io, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                     !peer_links() ? "this server offers no peer links"
                                                   : "not a peer link of protocol " + std::to_string(k_protocol_version)));
    } else {
        const std::string ticket(reinterpret_cast<const char *>(hello.ticket), sizeof(hello.ticket));
        // The reply goes out before the group may write to the link.
        const int released = io->release();
        taken = released >= 0 && core_.claim_peer(ticket, hello.reserved, released, [&] {
                    const Reply ok{};
                    return send(released, &ok, sizeof(ok), MSG_NOSIGNAL) == ssize_t(sizeof(ok));
                });
        if (released >= 0 && !taken) {
            io = std::make_unique<bulk::Stream>(released);
            send_reply(*io, grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "unknown, used or misplaced peer ticket"));
        }
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        open_fds_.erase(std::find(open_fds_.begin(), open_fds_.end(), fd));
    }
    io.reset(); // closes the socket unless the group took it
}

} // namespace loom::rpc
