#pragma once

// Note [Peer links]
// A tensor split over devices of several servers (the meta device) sums
// partial results with an all-reduce after many of its products. Through
// the client each reduction costs a read from every server and a write to
// every server, and the client's computation waits for both. Instead the
// servers of a split form a group and exchange the partial results among
// themselves, as four bulk frames (bulk.h) that the client streams between
// its compute frames without waiting:
//   group_open:  meta GroupOpenRequest {rank, size}; reply GroupOpenReply
//                {group, ticket}: a group of `size` members in which this
//                server has `rank`, and 32 random bytes for its peers.
//   group_join:  meta GroupJoinRequest {group, peers by rank}: the server
//                connects to the bulk port of every peer of lower rank and
//                sends a Hello with k_peer_magic, its own rank and that
//                peer's ticket; the peer answers one Reply (code 0: linked)
//                and the socket becomes the link between the two. Peers of
//                higher rank link to this server the same way, whenever
//                their own join runs. Answered once its own links are up.
//   reduce:      meta ReduceRequest {group, sequence, tensor}: the tensor
//                (F32, contiguous) goes to every peer and every peer's comes
//                back, each as a PeerChunk header then the floats; the
//                tensor becomes the sum of all members' in rank order,
//                starting from 0.0f, so that every member holds the same
//                bits, the bits of the client's own sum through the host.
//                Sequences count 0, 1, 2 ... per group; a peer at another
//                sequence or with another size fails the reduction.
//   group_close: meta GroupRequest {group}: closes the links (the end of the
//                session closes its groups too).
// A reduction that fails (a peer gone, nothing from it within the transfer
// timeout, out of step) breaks the group: its links are shut, so the peers
// fail theirs at once instead of waiting, and every later reduction of the
// group fails. The failure reaches the client as the failure of a
// computation (bulk.h).
// Links are plain TCP: a server speaking TLS offers none
// (ConnectEvent.peer_links is false). Before a peer has answered the hello
// with a ticket it issued, a joining server sends it nothing but the hello,
// so a client cannot make a server send tensor bytes to anything but a
// server of the group.

#include <grpcpp/support/status.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "loom_rpc.pb.h"

namespace loom::rpc {

struct PeerChunk {
    uint64_t sequence;
    uint64_t bytes; // the floats that follow
};
static_assert(sizeof(PeerChunk) == 16);

class PeerGroup {
  public:
    // Groups have 2 to k_max_size members.
    static constexpr uint32_t k_max_size = 64;

    PeerGroup(uint32_t rank, uint32_t size, std::string ticket, uint32_t io_timeout_ms);
    ~PeerGroup();
    PeerGroup(const PeerGroup &)             = delete;
    PeerGroup & operator=(const PeerGroup &) = delete;

    uint32_t            rank() const { return rank_; }
    uint32_t            size() const { return size_; }
    const std::string & ticket() const { return ticket_; }

    // A peer of rank `from` links in with fd: taken (true) when from is a
    // rank above this server's and not linked yet, and answer() (which
    // tells the peer so) succeeds; the caller closes fd otherwise.
    bool accept_link(uint32_t from, int fd, const std::function<bool()> & answer);
    // Links to the peers of lower rank (group_join).
    grpc::Status join(const GroupJoinRequest & req);
    // Sums data[0, count) with the peers' (reduce).
    grpc::Status reduce(uint64_t sequence, float * data, size_t count);
    // Breaks the group: its links are shut and later reductions fail.
    void         shut(const std::string & why);

  private:
    grpc::Status broken_locked(const std::string & why);
    // Sends mine to every peer and receives theirs over fds (by rank); the
    // reason of a failure, empty on success.
    std::string  exchange(const std::vector<int> & fds, uint64_t sequence, const float * mine, size_t count,
                          std::vector<std::vector<float>> * theirs) const;

    const uint32_t          rank_, size_;
    const std::string       ticket_;
    const uint32_t          io_timeout_ms_;
    std::mutex              mutex_;
    std::condition_variable linked_;
    std::vector<int>        fds_; // by rank; -1: no link (yet)
    bool                    joined_        = false;
    std::string             broken_;      // why, once broken
    uint64_t                next_sequence_ = 0;
};

} // namespace loom::rpc
