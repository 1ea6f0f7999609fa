#pragma once

// ggml's own RPC protocol, version 7.0.0 (ggml 0.25.1's ggml-rpc), as it
// travels on the wire: the facts of the format, transcribed from ggml's
// ggml/src/ggml-rpc/ggml-rpc.cpp and transport.h (the packed structs, the
// command numbers, the framing). loom's server speaks it with
// `loom-rpc-server --protocol ggml` (ggml_server.h).
//
// Framing. A request is | command (1 byte) | size (u64) | size bytes |; a
// command with an answer gets | size (u64) | size bytes | back. HELLO comes
// first on every connection. There are no error answers: a server that
// refuses a request closes the connection. Integers are little-endian.

#include <bit>
#include <cstddef>
#include <cstdint>

namespace loom::rpc::ggml_wire {

static_assert(std::endian::native == std::endian::little, "ggml's RPC protocol is written for little-endian hosts");

constexpr uint8_t k_major = 7;
constexpr uint8_t k_minor = 0;
constexpr uint8_t k_patch = 0;

constexpr size_t k_conn_caps_bytes = 24; // transport capabilities (RDMA); all zero: TCP

enum class Cmd : uint8_t {
    alloc_buffer      = 0,
    get_alignment     = 1,
    get_max_size      = 2,
    buffer_get_base   = 3,
    free_buffer       = 4,
    buffer_clear      = 5,
    set_tensor        = 6,
    set_tensor_hash   = 7,
    get_tensor        = 8,
    copy_tensor       = 9,
    graph_compute     = 10,
    get_device_memory = 11,
    init_tensor       = 12,
    get_alloc_size    = 13,
    hello             = 14,
    device_count      = 15,
    graph_recompute   = 16,
    memset_tensor     = 17,
    none              = 18, // the client's own marker; never sent
};
constexpr uint8_t k_cmd_count = 19;

#pragma pack(push, 1)
struct Tensor {
    uint64_t id; // the client's address of the tensor; names it in a graph
    uint32_t type;
    uint64_t buffer; // the server's handle of its buffer (remote_ptr); 0: none
    uint32_t ne[4];
    uint32_t nb[4];
    uint32_t op;
    int32_t  op_params[16];
    int32_t  flags;
    uint64_t src[10]; // ids; 0: none
    uint64_t view_src;
    uint64_t view_offs;
    uint64_t data; // an address within [base, base + size) of its buffer
    char     name[64];
    int32_t  use_count;
};
static_assert(sizeof(Tensor) == 296);

struct HelloReq {
    uint8_t conn_caps[k_conn_caps_bytes];
};
struct HelloRsp {
    uint8_t major, minor, patch, padding;
    uint8_t conn_caps[k_conn_caps_bytes];
};
struct DeviceCountRsp {
    uint32_t device_count;
};
struct GetAllocSizeReq {
    uint32_t device;
    Tensor   tensor;
    Tensor   srcs[10];
};
struct GetAllocSizeRsp {
    uint64_t alloc_size;
};
struct InitTensorReq {
    Tensor tensor;
};
struct AllocBufferReq {
    uint32_t device;
    uint64_t size;
};
struct AllocBufferRsp {
    uint64_t remote_ptr; // 0: not allocated
    uint64_t remote_size;
};
struct DeviceReq { // get_alignment, get_max_size, get_device_memory, graph_recompute
    uint32_t device;
};
struct U64Rsp { // get_alignment, get_max_size, buffer_get_base
    uint64_t value;
};
struct BufferReq { // buffer_get_base, free_buffer
    uint64_t remote_ptr;
};
struct BufferClearReq {
    uint64_t remote_ptr;
    uint8_t  value;
};
struct MemsetTensorReq {
    Tensor   tensor;
    uint64_t offset;
    uint64_t size;
    uint8_t  value;
};
struct SetTensorHashReq {
    Tensor   tensor;
    uint64_t offset;
    uint64_t hash; // FNV-1a of the content
};
struct ResultRsp { // set_tensor_hash, copy_tensor
    uint8_t result;
};
struct GetTensorReq {
    Tensor   tensor;
    uint64_t offset;
    uint64_t size;
};
struct CopyTensorReq {
    Tensor src;
    Tensor dst;
};
struct DeviceMemoryRsp {
    uint64_t free_mem;
    uint64_t total_mem;
};
#pragma pack(pop)

// set_tensor: | Tensor | cache flag (1 byte) | offset (u64) | data |
constexpr size_t k_set_tensor_header = sizeof(Tensor) + 1 + 8;
// graph_compute: | device (u32) | n_nodes (u32) | node ids (u64 each) |
// n_tensors (u32) | Tensor each |

// The name of ggml's file cache entries: FNV-1a over the bytes.
constexpr uint64_t k_fnv_offset = 0xcbf29ce484222325ull;
inline uint64_t fnv1a(const void * data, size_t n, uint64_t h = k_fnv_offset) {
    const auto * p = static_cast<const uint8_t *>(data);
    for (size_t i = 0; i < n; ++i) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    return h;
}

} // namespace loom::rpc::ggml_wire
