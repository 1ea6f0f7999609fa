#pragma once

// loom: remote devices over gRPC (the RPC backend) and the server side that
// loom-rpc-server runs. Names and signatures of the ggml_backend_rpc_*
// functions are ggml's; the protocol is loom's own (gRPC, proto/loom_rpc.proto)
// and does not talk to ggml's rpc-server.
//
// Credentials. A server requires a token and refuses every call without it,
// before doing any work. The client sends the token set with
// loom_rpc_set_token, or else the value of the environment variable
// LOOM_RPC_TOKEN (read at the first connection). Servers started by
// ggml_backend_rpc_start_server read LOOM_RPC_TOKEN as well.
//
// TLS. A server given a certificate and key (loom_rpc_server_params, or
// LOOM_RPC_TLS_CERT / LOOM_RPC_TLS_KEY for ggml_backend_rpc_start_server)
// accepts only TLS connections. A client uses TLS when LOOM_RPC_TLS_CA names
// the PEM file of the certificate authority to trust (read at each new
// connection); without it, connections are plain TCP. Use TLS whenever the
// network between client and server is not trusted: the token is sent with
// every call.
//
// Failures. Every call has a deadline (loom_rpc_set_timeouts). A server that
// is unreachable or dies yields NULL / GGML_STATUS_FAILED and a logged
// reason, never a hang. Transfers that fail (ggml's set/get have no status)
// are logged, and the next graph computation of that server fails.
//
// Built when CMake finds gRPC++ and protobuf (option LOOM_RPC).

#include "ggml-backend.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_RPC_MAX_SERVERS 16

// ---- client ------------------------------------------------------------------

// A backend on device `device` of the server at endpoint ("host:port");
// NULL (logged) when the server cannot be reached or has no such device.
// Freed with ggml_backend_free.
GGML_BACKEND_API ggml_backend_t ggml_backend_rpc_init(const char * endpoint, uint32_t device);
GGML_BACKEND_API bool           ggml_backend_is_rpc(ggml_backend_t backend);

// The buffer type of a remote device (non-host memory); NULL (logged) when
// unreachable. Lives as long as the process.
GGML_BACKEND_API ggml_backend_buffer_type_t ggml_backend_rpc_buffer_type(const char * endpoint, uint32_t device);

// Free and total memory of a remote device; 0 and 0 when unreachable.
GGML_BACKEND_API void ggml_backend_rpc_get_device_memory(const char * endpoint, uint32_t device, size_t * free,
                                                         size_t * total);

// The RPC family: no devices of its own; its proc addresses include
// "ggml_backend_rpc_add_server" and "ggml_backend_rpc_start_server".
GGML_BACKEND_API ggml_backend_reg_t ggml_backend_rpc_reg(void);

// Connects to the server at endpoint and registers its devices in the
// registry, each named "RPC[<endpoint>]<device name>" (ggml names them RPC0,
// RPC1, ...), in a reg named "RPC[<endpoint>]". Returns that reg (the same
// one for the same endpoint), or NULL (logged) when the server cannot be
// reached or refuses the token. The connection is one session on the
// server: all buffers of these devices belong to it.
GGML_BACKEND_API ggml_backend_reg_t ggml_backend_rpc_add_server(const char * endpoint);

// loom: the token sent by connections made afterwards (NULL: none; then
// LOOM_RPC_TOKEN is used). The string is copied.
GGML_BACKEND_API void loom_rpc_set_token(const char * token);

// loom: deadlines of client calls in milliseconds, for calls made
// afterwards: transfers and other calls (default 30000, or
// LOOM_RPC_TIMEOUT_MS) and graph computations (default 300000, or
// LOOM_RPC_COMPUTE_TIMEOUT_MS). 0 keeps a value.
GGML_BACKEND_API void loom_rpc_set_timeouts(uint32_t call_ms, uint32_t compute_ms);

// ---- server ------------------------------------------------------------------

// Serves devices at endpoint until the process ends (ggml's signature).
// devices: the devices to expose (n_devices of them; NULL / 0: the CPU).
// cache_dir: where uploaded tensor contents are kept by hash, as files and
// up to 1 GiB in memory (NULL: no content cache, as in ggml). n_threads: threads of CPU backends (0: default). The token
// comes from LOOM_RPC_TOKEN and TLS from LOOM_RPC_TLS_CERT/_KEY; without a
// token, or when the endpoint cannot be bound, it logs why and returns.
GGML_BACKEND_API void ggml_backend_rpc_start_server(const char * endpoint, const char * cache_dir, size_t n_threads,
                                                    size_t n_devices, ggml_backend_dev_t * devices);

// loom: a server running on threads of its own, for programs and tests.
struct loom_rpc_server_params {
    const char *         endpoint;  // "host:port"; port 0 picks a free one (see loom_rpc_server_port)
    const char *         token;     // required, non-empty
    const char *         cache_dir; // content cache files; NULL: none
    size_t               n_threads; // of CPU backends; 0: their default
    size_t               n_devices; // 0: the CPU device
    ggml_backend_dev_t * devices;
    const char *         tls_cert_path; // PEM; both or neither of cert and key
    const char *         tls_key_path;
    // Content cache held in memory, bytes; 0: 1 GiB with a cache_dir, else
    // no content cache (clients then neither hash nor look up uploads).
    size_t               cache_bytes;
    // The protocol served: NULL or "loom" (loom's, with its token), or
    // "ggml": ggml 0.25.1's RPC protocol (7.0.0), for clients built on ggml;
    // it has no authentication, so token is not used, and cache_dir is
    // ggml's file cache (files named by FNV-1a). docs/rpc.md.
    const char *         protocol;
};
typedef struct loom_rpc_server * loom_rpc_server_t;

// Starts serving; NULL (logged) when the parameters are invalid or the
// endpoint cannot be bound. Stop and free with loom_rpc_server_stop.
GGML_BACKEND_API loom_rpc_server_t loom_rpc_server_start(const struct loom_rpc_server_params * params);
// The port the server listens on.
GGML_BACKEND_API int    loom_rpc_server_port(loom_rpc_server_t server);
// Number of open client sessions.
GGML_BACKEND_API size_t loom_rpc_server_session_count(loom_rpc_server_t server);
// Bytes held in the buffers of the open sessions; a session's buffers are
// given back when it frees them or when its connection ends.
GGML_BACKEND_API size_t loom_rpc_server_buffer_bytes(loom_rpc_server_t server);
// Ends every session (freeing its buffers), stops and frees the server.
// Calls in progress are cancelled.
GGML_BACKEND_API void   loom_rpc_server_stop(loom_rpc_server_t server);

#ifdef __cplusplus
}
#endif
