#pragma once

// Checks of untrusted RPC messages, apart from the network so that the
// fuzzer and the tests drive them directly.
//
// Note [RPC trust boundary]: a client may read and write only memory of its
// own buffers. Every tensor of a message is checked to lie inside the buffer
// it names (the buffer must belong to the session), with a conservative
// extent that covers both strided and contiguous access (tensor_extent),
// and at an offset and strides aligned for its element type.
// A graph's nodes must come in ggml's order (a source that is a node is
// listed before the nodes it feeds: no cycles), and a tensor with a view
// source lies inside that source's bytes, as ggml_view requires.
// The nodes are then checked against the rule of their operator, the one
// its constructor checks too (check_node, Note [Shape rules] in
// core/fits.h), so that a kernel iterating over a node's shape stays inside
// its sources, and against the layouts the kernels write; custom operators
// (a function of the sender's) are refused. Index sources (Note [Index
// sources] in core/op_table.h) are scanned before compute, and must not be
// written by the same graph. Finally the server device's supports_op must
// accept every node. Anything else is an error message, never an abort.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "loom_rpc.pb.h"

namespace loom::rpc {

// A buffer of the session by handle; NULL when the session has none such.
// An empty lookup checks tensors without placing them in memory (shapes
// only, for supports_op); such a graph must never be computed.
using BufferLookup = std::function<ggml_backend_buffer_t(uint64_t handle)>;

// The bytes a tensor of this shape and these strides may touch from its
// data pointer; false when the numbers are out of range. Also used by the
// client for its own checks.
bool tensor_extent(ggml_type type, const int64_t ne[4], const uint64_t nb[4], uint64_t * extent, std::string * why);

// Fills t (type, ne, nb, buffer, data) from a description of a tensor in
// one of the session's buffers. The other fields are left to the caller.
bool decode_tensor(const TensorDesc & d, const BufferLookup & buffers, ggml_tensor * t, std::string * why);

// [offset, offset + size) lies inside t's data (ggml_nbytes).
bool check_range(const ggml_tensor * t, uint64_t offset, uint64_t size, std::string * why);

// The count blocks of a 2D transfer, block i being [offset + i * stride,
// + block), all lie inside t's data, and *total (count * block, the bytes
// that travel) is set; computed without overflow, so that every number a
// client sends may be anything. With count or block 0 nothing is touched,
// and offset must still lie inside the data.
bool check_blocks(const ggml_tensor * t, uint64_t offset, uint64_t block, uint64_t count, uint64_t stride,
                  uint64_t * total, std::string * why);

// The rule of node's operator (node_fits) and the layout of its result;
// false (why set) for a node that breaks them or a custom operator.
bool check_node(const ggml_tensor * node, std::string * why);

// An index source of a node (its op's row names it, Note [Index sources]
// in core/op_table.h), scanned before each compute, unless the graph
// itself computes the indices (Note [Computed indices]).
struct IndexCheck {
    const ggml_tensor * node;
    int                 src;                // node->src[src] holds the indices
    bool                at_compute = false; // checked by the device before the node runs instead
};

// A graph rebuilt from a message: its own context, tensors pointing into
// the session's buffers.
struct RebuiltGraph {
    ggml_context_ptr                   ctx;
    ggml_cgraph *                      graph = nullptr;
    std::vector<ggml_backend_buffer_t> buffers; // every buffer the graph touches
    std::vector<IndexCheck>            index_checks;
};

// Checks and rebuilds msg; NULL with why set when anything is wrong.
// dev, when not NULL, must support every node.
std::unique_ptr<RebuiltGraph> rebuild_graph(const GraphMessage & msg, const BufferLookup & buffers,
                                            ggml_backend_dev_t dev, std::string * why);

// Every index source of every node of g holds only indices inside its
// bound (read through the buffers); false with why naming the operator,
// the node and the value.
bool check_indices(const RebuiltGraph & g, std::string * why);

} // namespace loom::rpc
