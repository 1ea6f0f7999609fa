#pragma once

// The request handlers of loom-rpc-server, apart from gRPC's transport: the
// gRPC service (server.cpp) authenticates a call, finds its session and
// hands the request here; the fuzzer calls these directly.
//
// Each session has its own table of buffers and its own cached graphs; a
// request can only name buffers of its session (Note [RPC trust boundary]
// in validate.h). Requests of one session run one at a time (the session's
// mutex); sessions run in parallel.

#include <grpcpp/support/status.h>

#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "content_cache.h"
#include "loom_rpc.pb.h"
#include "protocol.h"
#include "validate.h"

namespace loom::rpc {

class PeerGroup;

// Compares without stopping at the first difference.
bool        same_bytes(const std::string & a, const std::string & b);
// n bytes from the system's random device.
std::string random_bytes(size_t n);

struct ServerOptions {
    std::vector<ggml_backend_dev_t> devices;          // exposed, in this order
    std::string                     cache_dir;        // content cache files; empty: none
    int                             n_threads = 0;    // of CPU backends; 0: their default
    size_t                          cache_bytes = 0;  // content cache held in memory; 0 and no cache_dir: no cache
    size_t                          max_sessions = 64;
    // Memory one session may hold in buffers; 0: the total memory of the
    // largest device. A buffer larger than its device's total memory is
    // refused whatever this says.
    size_t                          max_session_bytes = 0;
};

struct Session {
    std::mutex                                        mutex;
    bool                                              closed = false;
    uint64_t                                          next_handle = 1;
    size_t                                            bytes = 0; // held in buffers
    std::unordered_map<uint64_t, ggml_backend_buffer_ptr> buffers;
    std::vector<ggml_backend_ptr>                     backends; // per device, created on first compute
    struct CachedGraph {
        std::string                   signature;
        std::unique_ptr<RebuiltGraph> graph;
    };
    std::vector<CachedGraph> graphs; // per device: the last graph computed

    // The bulk connection (Note [RPC bulk connection]): its ticket (used at
    // most once) and its socket, shut down when the session closes. Under
    // bulk_mutex, not mutex, which a transfer holds.
    std::mutex  bulk_mutex;
    std::string bulk_ticket;
    bool        bulk_claimed = false;
    int         bulk_fd      = -1;
    // Groups of peer links (Note [Peer links] in peer.h), under bulk_mutex.
    std::map<uint64_t, std::shared_ptr<PeerGroup>> groups;
    uint64_t                                       next_group = 1;

    ggml_backend_buffer_t find_buffer(uint64_t handle) const;
};

class ServerCore {
  public:
    explicit ServerCore(ServerOptions options);
    ~ServerCore();

    // A new session, its id and its bulk ticket; NULL when the server holds
    // its maximum.
    std::shared_ptr<Session> open_session(std::string * id, std::string * bulk_ticket = nullptr);
    // Frees the session's buffers once its running request (if any) ends.
    void                     close_session(const std::string & id);
    std::shared_ptr<Session> find_session(const std::string & id);
    size_t                   session_count();
    // Bytes in the buffers of all open sessions (what AllocBuffer gave and
    // neither FreeBuffer nor the end of a session gave back).
    size_t                   buffer_bytes() const { return buffer_bytes_.load(); }

    void describe(ConnectEvent * ev) const;

    // The open session whose unused ticket this is (compared in constant
    // time), with fd recorded as its bulk connection; NULL otherwise.
    std::shared_ptr<Session> claim_bulk(const std::string & ticket, int fd);
    // The bulk connection fd of s ends (before fd is closed).
    void                     release_bulk(Session & s, int fd);
    // Under the session's lock: decodes d and checks [offset, offset + size)
    // as SetTensor/GetTensor do (INVALID_ARGUMENT naming what otherwise),
    // then runs fn on the tensor with the lock still held.
    grpc::Status with_range(Session & s, const char * what, const TensorDesc & d, uint64_t offset, uint64_t size,
                            const std::function<grpc::Status(ggml_tensor & t)> & fn);

    // Under the session's lock: decodes req's tensor and checks its blocks
    // (check_blocks), and that announced, the bytes the frame carries or
    // asks for, is their total; then runs fn on the tensor with the lock
    // still held.
    grpc::Status with_blocks(Session & s, const char * what, const Transfer2d & req, uint64_t announced,
                             const std::function<grpc::Status(ggml_tensor & t)> & fn);

    grpc::Status get_device_memory(Session & s, const DeviceRequest & req, DeviceMemory * out);
    grpc::Status supports_op(Session & s, const GraphMessage & req, Supported * out);
    grpc::Status alloc_buffer(Session & s, const AllocBufferRequest & req, AllocBufferReply * out);
    grpc::Status get_alloc_size(Session & s, const AllocSizeRequest & req, AllocSizeReply * out);
    grpc::Status free_buffer(Session & s, const BufferRequest & req, Empty * out);
    grpc::Status clear_buffer(Session & s, const ClearBufferRequest & req, Empty * out);
    grpc::Status set_tensor(Session & s, const SetTensorRequest & req, Empty * out);
    grpc::Status set_tensor_hash(Session & s, const SetTensorHashRequest & req, SetTensorHashReply * out);
    grpc::Status get_tensor(Session & s, const GetTensorRequest & req, GetTensorReply * out);
    grpc::Status memset_tensor(Session & s, const MemsetTensorRequest & req, Empty * out);
    grpc::Status copy_tensor(Session & s, const CopyTensorRequest & req, CopyTensorReply * out);
    grpc::Status init_tensor(Session & s, const InitTensorRequest & req, Empty * out);
    grpc::Status graph_compute(Session & s, const GraphComputeRequest & req, GraphComputeReply * out);

    // The frames of Note [Peer links] (peer.h; server_peer.cpp).
    grpc::Status open_group(Session & s, const GroupOpenRequest & req, GroupOpenReply * out);
    grpc::Status join_group(Session & s, const GroupJoinRequest & req);
    grpc::Status reduce(Session & s, const ReduceRequest & req);
    grpc::Status close_group(Session & s, const GroupRequest & req);
    // A peer of rank `from` presents ticket on fd: true when a group of an
    // open session issued it and took fd (after answer() told the peer);
    // the caller closes fd otherwise.
    bool         claim_peer(const std::string & ticket, uint32_t from, int fd, const std::function<bool()> & answer);
    // Groups one session may hold.
    static constexpr size_t k_max_groups = 16;

  private:
    ggml_backend_t backend_for(Session & s, uint32_t device);

    ServerOptions                                             options_;
    size_t                                                    session_quota_ = 0;
    ContentCache                                              cache_;
    std::atomic<size_t>                                       buffer_bytes_{0};
    std::mutex                                                mutex_;
    std::unordered_map<std::string, std::shared_ptr<Session>> sessions_;
};

} // namespace loom::rpc
