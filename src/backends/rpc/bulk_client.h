#pragma once

// The client side of the bulk connection (Note [RPC bulk connection] in
// bulk.h). Thread-safe: frames of concurrent callers go one after another.

#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bulk.h"
#include "loom_rpc.pb.h"

namespace loom::rpc {

class BulkChannel {
  public:
    // Connects to host:port (through TLS, trusting the certificates of the
    // file ca_path, when not NULL) and binds the connection to the session
    // of ticket; NULL (logged, naming endpoint) when it cannot.
    // io_timeout_ms bounds every wait for progress on the socket.
    static std::unique_ptr<BulkChannel> open(const std::string & endpoint, const std::string & host, uint32_t port,
                                             const std::string & ticket, uint32_t io_timeout_ms,
                                             const char * ca_path);

    // Writes the uploads still held (Note [Uploads held back]).
    ~BulkChannel();
    BulkChannel(const BulkChannel &)             = delete;
    BulkChannel & operator=(const BulkChannel &) = delete;

    // False once the connection failed; the caller then uses gRPC.
    bool alive();

    // Sends [offset, offset + n) of the tensor without waiting for the
    // server; a failure shows in a later sync. False when the connection
    // failed before the bytes were sent.
    bool set(const TensorDesc & d, uint64_t offset, const void * data, size_t n);
    // Reads [offset, offset + n) into data.
    grpc::Status get(const TensorDesc & d, uint64_t offset, void * data, size_t n);
    // Asks for [offset, offset + n) without waiting: the bytes land in data
    // when the reply is read (sync, wait_for, or any waited call), so data
    // must stay valid until then. Large reads, and reads beyond the bytes
    // the sockets can hold unread, wait at once (a server blocked writing a
    // reply reads no frames). False when the connection failed first.
    bool         get_async(const TensorDesc & d, uint64_t offset, void * data, size_t n);
    // The blocks of a 2D transfer in one frame: block i of req.block()
    // bytes at i * stride_data of data. set_2d does not wait, as set.
    bool         set_2d(const Transfer2d & req, const void * data, size_t stride_data);
    grpc::Status get_2d(const Transfer2d & req, void * data, size_t stride_data);
    // A hash or compute frame: waits up to timeout_ms for the reply and
    // parses it into rep; with rep NULL, does not wait (see sync).
    grpc::Status call(bulk::Op op, const google::protobuf::Message & req, google::protobuf::Message * rep,
                      uint32_t timeout_ms);
    // Reads the replies of the frames sent without waiting; the first of
    // their failures (OK when none).
    grpc::Status sync();
    // The count of frames sent so far: wait_for(mark()) returns once every
    // one of them is answered, with the first failure among the replies it
    // read (failures read by others were returned to them).
    uint64_t     mark();
    grpc::Status wait_for(uint64_t frames);

  private:
    BulkChannel(std::unique_ptr<bulk::Stream> io, uint32_t io_timeout_ms)
        : io_(std::move(io)), io_timeout_ms_(io_timeout_ms) {}

    // What the reply of a frame sent without waiting carries: nothing to
    // keep, or n payload bytes for dst.
    struct Expected {
        void *   dst = nullptr;
        uint64_t n   = 0;
    };

    grpc::Status drain_locked(uint64_t until = UINT64_MAX);
    bool         expect_locked(Expected e); // after a frame was sent
    // may_hold: the frame may wait in held_ for the next frame written or
    // the next wait for replies (Note [Uploads held back]).
    bool         send_frame_locked(bulk::Op op, const std::string & meta, uint64_t offset, uint64_t size,
                                   const void * data, bool may_hold = false);
    bool         flush_locked(); // writes held_
    // Reads one reply header and its message; the payload stays unread.
    grpc::Status read_reply_locked(uint32_t timeout_ms, bulk::Reply * r);
    grpc::Status broken_locked(const char * what);
    // The connection broke while a caller waits: its failure stands for the
    // frames sent before whose replies are lost too.
    grpc::Status lost_locked(const char * what);
    // Keeps the first failure for the next sync, get or waited call.
    void         defer_locked(const grpc::Status & st);

    std::mutex  mutex_;
    std::unique_ptr<bulk::Stream> io_;
    uint32_t    io_timeout_ms_;
    bool        dead_    = false;
    std::deque<Expected> pending_;      // replies not read yet, in order
    uint64_t     sent_          = 0;     // frames sent
    uint64_t     pending_bytes_ = 0;     // payload bytes of pending_
    grpc::Status deferred_;    // a failure read while no caller waited
    std::string frame_;       // reused: the bytes of a small frame
    std::string held_;        // small upload frames not written yet
    std::vector<uint8_t> staging_; // reused: small blocks of a 2D download
};

} // namespace loom::rpc
