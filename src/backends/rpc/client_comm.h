#pragma once

// The RPC family's ggml_backend_comm_* hooks (client_comm.cpp), found by
// the meta backend through the proc address of a server's reg.

#include <cstddef>
#include <memory>

#include "ggml-backend.h"

namespace loom::rpc {

class Connection;

// The connection of an RPC backend; NULL for any other backend (client.cpp).
std::shared_ptr<Connection> backend_connection(ggml_backend_t backend);

// NULL unless every backend is an RPC backend of its own server and every
// server offers peer links.
void * comm_init(ggml_backend_t * backends, size_t n_backends);
void   comm_free(void * ctx);
// Streams a reduction to every member: true once sent (its failure shows
// when the members synchronize); false, having sent nothing, for tensors it
// does not take (the meta backend then sums through the host).
bool   comm_allreduce(void * ctx, ggml_tensor ** tensors);

} // namespace loom::rpc
