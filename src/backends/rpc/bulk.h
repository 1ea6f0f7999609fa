#pragma once

// Note [RPC bulk connection]
// gRPC carries control; tensor bytes and the calls of a computation go
// through one plain TCP connection per session beside it, so that large
// transfers move at the speed of the socket (no protobuf copies, no message
// limits, no HTTP/2 windows) and small ones cost one trip or none.
//
// The server's ConnectEvent gives a port and a ticket: 32 random bytes bound
// to that session. The client connects, sends k_bulk_magic, the protocol
// version and the ticket; the server answers one Reply (code 0: bound). A
// ticket works once and only while its session is open; a wrong one is
// refused and the connection closed. A server speaking TLS speaks it on the
// bulk connection too (same certificate; the client checks it against
// LOOM_RPC_TLS_CA and the endpoint's host), before the ticket is sent.
//
// Then the client sends frames, the server runs them in order, one at a
// time, and answers each with a Reply:
//   set:     meta = TensorDesc, then `size` bytes for [offset, offset + size)
//            of the tensor. The range is checked (as SetTensor checks it)
//            before any byte is read; a refused frame ends the connection,
//            since what follows its header cannot be trusted.
//   get:     meta = TensorDesc; the reply is followed by `size` bytes.
//   hash:    meta = SetTensorHashRequest; reply payload SetTensorHashReply.
//   compute: meta = GraphComputeRequest; reply payload GraphComputeReply.
//            A graph that ran and did not succeed is answered as a failure
//            (ABORTED for GGML_STATUS_ABORTED, RESOURCE_EXHAUSTED for
//            GGML_STATUS_ALLOC_FAILED, INTERNAL otherwise), so that a
//            client that does not wait for the reply sees it among the
//            failures of later syncs.
//   set_2d:  meta = Transfer2d, offset 0 and size = count * block; then
//            the blocks' bytes, back to back. Every block is checked (as
//            SetTensor checks a range) before any byte is read.
//   get_2d:  meta = Transfer2d, offset 0 and size = count * block; the
//            reply is followed by the blocks' bytes, back to back.
//   init:    meta = InitTensorRequest; no payload either way.
// The client need not wait for a reply before sending the next frame (it
// reads the replies of set frames later, in order), so an upload is a
// stream and a small input costs no trip of its own. A frame whose bytes do
// not all arrive within the server's transfer timeout, or a connection that
// closes mid-frame, is refused; the session keeps its buffers until its
// Connect stream ends, and ending the session closes its bulk connection.
// Numbers are little-endian.

#include <grpcpp/support/status.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ggml.h"

namespace loom::rpc::bulk {

static_assert(std::endian::native == std::endian::little, "the bulk framing is written for little-endian hosts");

constexpr char     k_bulk_magic[8]  = {'L', 'O', 'O', 'M', 'B', 'L', 'K', '1'};
// A Hello with this magic links another server into a group (peer.h); its
// reserved field is the connecting server's rank.
constexpr char     k_peer_magic[8]  = {'L', 'O', 'O', 'M', 'P', 'E', 'E', 'R'};
constexpr size_t   k_ticket_bytes   = 32;
constexpr size_t   k_staging_bytes  = size_t(4) << 20; // per connection, for buffers that are not host memory
constexpr size_t   k_max_meta_bytes = size_t(64) << 20;
constexpr uint32_t k_io_timeout_ms  = 30000; // server: longest wait for the next bytes of a frame

enum class Op : uint32_t {
    set         = 1,
    get         = 2,
    hash        = 3,
    compute     = 4,
    set_2d      = 5,
    get_2d      = 6,
    init        = 7,
    group_open  = 8, // the four frames of Note [Peer links] (peer.h)
    group_join  = 9,
    reduce      = 10,
    group_close = 11,
};

// A computation that ran and did not succeed, as the failure its compute
// frame is answered with, and back (the note above).
inline grpc::Status computation_failed(ggml_status st) {
    const grpc::StatusCode code = st == GGML_STATUS_ABORTED        ? grpc::StatusCode::ABORTED
                                  : st == GGML_STATUS_ALLOC_FAILED ? grpc::StatusCode::RESOURCE_EXHAUSTED
                                                                   : grpc::StatusCode::INTERNAL;
    return grpc::Status(code, std::string("the graph computation ended with ") + ggml_status_to_string(st));
}
inline ggml_status status_of(const grpc::Status & st) {
    switch (st.error_code()) {
        case grpc::StatusCode::OK: return GGML_STATUS_SUCCESS;
        case grpc::StatusCode::ABORTED: return GGML_STATUS_ABORTED;
        case grpc::StatusCode::RESOURCE_EXHAUSTED: return GGML_STATUS_ALLOC_FAILED;
        default: return GGML_STATUS_FAILED;
    }
}

struct Hello {
    char     magic[8];
    uint32_t version;
    uint32_t reserved;
    uint8_t  ticket[k_ticket_bytes];
};
static_assert(sizeof(Hello) == 48);

struct Frame {
    uint32_t op;
    uint32_t meta_bytes;
    uint64_t offset;
    uint64_t size;
};
static_assert(sizeof(Frame) == 24);

struct Reply {
    uint32_t code;          // a grpc::StatusCode; 0: done
    uint32_t message_bytes; // the reason, when code is not 0
    uint64_t size;          // payload bytes after the message
};
static_assert(sizeof(Reply) == 16);

// The blocks of a 2D transfer (block i of `block` bytes at i * stride) as
// one stream of bytes: take(n, fn) walks the next n bytes of the stream,
// calling fn(position of the piece, its offset among the n, its size) for
// each piece that lies in one block. block is not 0; the caller checked
// the positions of all blocks.
class BlockWalk {
  public:
    BlockWalk(uint64_t block, uint64_t stride) : block_(block), stride_(stride) {}

    template <class Fn> void take(uint64_t n, Fn && fn) {
        for (uint64_t done = 0; done < n;) {
            const uint64_t k = std::min(block_ - at_, n - done);
            fn(index_ * stride_ + at_, done, k);
            done += k;
            at_ += k;
            if (at_ == block_) {
                at_ = 0;
                ++index_;
            }
        }
    }

  private:
    uint64_t block_, stride_;
    uint64_t index_ = 0; // the block the stream is in
    uint64_t at_    = 0; // bytes of it already walked
};

// A connected socket, in clear or through TLS; owns both. Whole reads and
// writes on a blocking socket: a read or write gives up after the socket's
// timeout without progress (tune_socket). False on end of stream, error or
// timeout. In clear, small reads take what the socket holds, up to
// k_read_ahead bytes, and later reads start from those: a small frame's
// header, description and data cost one system call instead of three
// (TLS buffers records itself).
class Stream {
  public:
    // read_ahead false: reads take exactly the bytes asked for (a socket
    // that another reader takes over after a handshake, release()).
    explicit Stream(int fd, SSL * ssl = nullptr, bool read_ahead = true) : fd_(fd), ssl_(ssl), read_ahead_(read_ahead) {}
    ~Stream();
    Stream(const Stream &)             = delete;
    Stream & operator=(const Stream &) = delete;

    int  fd() const { return fd_; }
    bool read_all(void * data, size_t n);
    bool write_all(const void * data, size_t n);
    // Waits until bytes can be read; timeout_ms < 0 waits for ever. False on
    // timeout.
    bool wait_readable(int timeout_ms);
    // Wakes and fails every blocked and later read and write (any thread).
    void shut();
    // Gives up the socket without closing it: its fd, or -1 (nothing given
    // up) when TLS runs on it or bytes were read ahead of what was asked.
    int  release();

  private:
    static constexpr size_t k_read_ahead = size_t(16) << 10;
    // Copies buffered bytes to p; the count taken.
    size_t take_buffered(uint8_t * p, size_t n);

    int                        fd_;
    SSL *                      ssl_;
    std::unique_ptr<uint8_t[]> ahead_; // bytes read ahead: [ahead_at_, ahead_end_)
    size_t                     ahead_at_ = 0, ahead_end_ = 0;
    int                        socket_timeout_ms_ = -1; // SO_RCVTIMEO, read once; 0: none
    bool                       read_ahead_;
};

// The host part of an endpoint "host:port" ("[v6]:port" gives v6).
std::string endpoint_host(const std::string & endpoint);

// A connected TCP socket to host:port (close-on-exec, blocking); -1 when
// none of the host's addresses answers.
int connect_to(const std::string & host, uint32_t port);

// No delay for small frames; the progress timeout of reads and writes.
void tune_socket(int fd, uint32_t io_timeout_ms);

// TLS contexts of the bulk connection; NULL (logged) when the files cannot
// be read. The client's checks the server's certificate against ca_path.
std::shared_ptr<SSL_CTX> server_tls(const char * cert_path, const char * key_path);
std::shared_ptr<SSL_CTX> client_tls(const char * ca_path);
// The TLS handshake on a connected fd (server: accept; client: connect,
// checking the certificate names host); NULL on failure, fd untouched.
SSL * tls_accept(SSL_CTX * ctx, int fd);
SSL * tls_connect(SSL_CTX * ctx, int fd, const std::string & host);

} // namespace loom::rpc::bulk
