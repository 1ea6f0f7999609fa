#pragma once

// Constants of the RPC protocol shared by the client and the server, and the
// content hash used by the tensor cache.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../../core/op_table.h"

namespace loom::rpc {

// Bumped whenever a message changes meaning; a server refuses other versions.
constexpr uint32_t k_protocol_version = 7;

// Graphs travel with raw operator numbers, so the version belongs to one
// operator table. A change to the table (core/op_table.h) stops the build
// here until k_protocol_version is bumped and the fingerprint updated.
static_assert(loom::op_table_fingerprint() == 0xba27ff98240e64cbull,
              "the operator table changed: bump k_protocol_version and update this fingerprint");

// Metadata keys (gRPC metadata keys are lower case).
constexpr const char * k_auth_key    = "authorization";
constexpr const char * k_session_key = "loom-session";

// Limits on what one message may hold. The server rejects anything larger;
// the client splits tensor transfers into chunks that fit.
constexpr size_t   k_max_message_bytes = size_t(64) << 20; // gRPC's receive limit on both sides
constexpr size_t   k_chunk_bytes       = size_t(8) << 20;  // tensor data per set/get call
constexpr size_t   k_max_graph_tensors = size_t(1) << 18;
constexpr size_t   k_max_name_bytes    = 64;
constexpr int64_t  k_max_ne            = int64_t(1) << 40; // per dimension
constexpr uint64_t k_max_elements      = uint64_t(1) << 48;
constexpr uint64_t k_max_stride        = uint64_t(1) << 48;

// Uploads at least this large go through the content cache (SetTensorHash first).
constexpr size_t k_hash_threshold = size_t(1) << 20;

// HTTP/2 and TCP settings for large messages on both sides: a stream
// window and frames as large as a chunk, and large socket reads, instead of
// gRPC's defaults tuned for small messages. Applied with set(name, value).
template <class SetInt> void tune_transport(SetInt set) {
    set("grpc.http2.lookahead_bytes", int(k_chunk_bytes * 2));
    set("grpc.http2.max_frame_size", (1 << 24) - 1);
    set("grpc.experimental.tcp_read_chunk_size", 1 << 20);
    set("grpc.experimental.tcp_min_read_chunk_size", 1 << 20);
    set("grpc.experimental.tcp_max_read_chunk_size", 8 << 20);
}

using Sha256 = std::array<uint8_t, 32>;
Sha256      sha256(const void * data, size_t size);
std::string to_hex(const Sha256 & h);

// The key of the content cache: SHA-256 over the size (8 bytes,
// little-endian) and the SHA-256 of each k_content_leaf_bytes piece of the
// data in order, the pieces hashed on several threads.
constexpr size_t k_content_leaf_bytes = size_t(4) << 20;
Sha256           content_key(const void * data, size_t size);

// A cheap first look at content: SHA-256 over the size (8 bytes,
// little-endian) and k_probe_samples pieces of k_probe_sample_bytes spread
// evenly from the first byte to the last (all of it when it is smaller).
// Equal contents have equal probes; content whose probe the server does not
// know is new to it, so a new upload costs a hash of 64 KiB, not of all of it.
constexpr size_t k_probe_samples      = 4;
constexpr size_t k_probe_sample_bytes = size_t(16) << 10;
Sha256           content_probe(const void * data, size_t size);

} // namespace loom::rpc
