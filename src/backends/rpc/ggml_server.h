#pragma once

// loom-rpc-server speaking ggml's RPC protocol (ggml_wire.h), so that
// programs built on ggml 0.25.1 (llama.cpp's --rpc, ggml's RPC backend) use
// a loom server unchanged.
//
// Every request becomes the request of loom's own protocol that does the
// same thing and runs through ServerCore: the same validation before any
// byte is written or any node computed (Note [RPC trust boundary] in
// validate.h), one session per connection (its buffers freed when the
// connection ends), the same quotas. ggml's protocol has no error answers:
// a request that is refused is logged with its reason and closes that
// connection; the server and its other clients go on.
//
// Buffers are named on the wire by their session handle (remote_ptr) and
// placed, as the client sees them, at handle << 40 (BUFFER_GET_BASE): a
// tensor's data address is that base plus its offset, which is all a
// client does with it.
//
// ggml's protocol has no authentication: the server binds to loopback
// unless told otherwise, warns when it is not, and can serve TLS only (a
// ggml client then reaches it through a local TLS tunnel; docs/rpc.md).

#include <memory>
#include <string>
#include <vector>

#include <openssl/ssl.h>

#include "acceptor.h"
#include "ggml-backend.h"
#include "server_core.h"

namespace loom::rpc {

struct GgmlServerOptions {
    std::vector<ggml_backend_dev_t> devices;    // as given to ServerCore, in this order
    std::string                     cache_dir;  // ggml's file cache (-c): files named by FNV-1a; empty: none
    std::shared_ptr<SSL_CTX>        tls;        // NULL: clear TCP
    size_t                          max_connections = 64;
};

// The bytes of one connection: whole reads and writes, false once the
// connection cannot go on. wait(ms) waits for the next request (ms < 0:
// for ever). A socket in the server; memory in the fuzzer.
class WireIO {
  public:
    virtual ~WireIO()                                = default;
    virtual bool wait(int ms)                        = 0;
    virtual bool read(void * data, size_t n)         = 0;
    virtual bool write(const void * data, size_t n)  = 0;
};

class GgmlServer {
  public:
    GgmlServer(ServerCore & core, GgmlServerOptions options);
    ~GgmlServer();

    bool start(const std::string & host, int port);
    int  port() const { return acceptor_.port(); }
    void stop() { acceptor_.stop(); }

    // Serves one connection on fd (which it closes) until the client leaves
    // or a request is refused.
    void serve(int fd);
    // The same on any stream of bytes, in a session of its own (the fuzzer's
    // entry). False when the server holds its most sessions.
    bool serve(WireIO & io);

  private:
    ServerCore &      core_;
    GgmlServerOptions options_;
    Acceptor          acceptor_;
};

} // namespace loom::rpc
