#pragma once

// loom's client of ggml's RPC protocol (ggml_wire.h): the devices of a
// server that speaks it (ggml's own rpc-server, or loom-rpc-server
// --protocol ggml) as loom devices, so that ggml_backend_rpc_add_server and
// loom-run --rpc work with either kind of server (client.cpp asks
// speaks_ggml first).

#include <string>

#include "ggml-backend.h"

namespace loom::rpc {

// Whether the server at endpoint ("host:port") answers ggml's HELLO with
// ggml's protocol 7.x: one connection, closed again, waiting at most
// timeout_ms for the answer.
bool speaks_ggml(const std::string & endpoint, int timeout_ms);

// A reg of the server's devices, named "RPC[endpoint]" (its devices
// "RPC[endpoint]ggml<i>"); NULL (logged) when the server cannot be used.
// The reg lives until the process ends.
ggml_backend_reg_t ggml_protocol_reg(const std::string & endpoint);

} // namespace loom::rpc
