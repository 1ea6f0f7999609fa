// The RPC family's collective hooks for the meta backend
// (ggml_backend_comm_* in ggml-backend.h): the servers of a tensor split sum
// their partial results among themselves over peer links (Note [Peer links]
// in peer.h), and a reduction is two frames in each member's stream, sent
// and not waited for, like a computation.

#include "client_comm.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bulk_client.h"
#include "client_buffer.h"
#include "client_connection.h"
#include "core/common.h"
#include "peer.h"

namespace loom::rpc {

namespace {

struct Comm {
    std::vector<std::shared_ptr<Connection>> conns;  // by rank
    std::vector<uint64_t>                    groups; // the group's handle on each server; 0: not opened
    uint64_t                                 sequence = 0;
    bool                                     broken   = false;
};

// Closes the groups opened so far; frames are not waited for.
void close_groups(Comm & c) {
    for (size_t j = 0; j < c.conns.size(); ++j) {
        BulkChannel * bulk = c.conns[j]->bulk();
        if (c.groups[j] == 0 || bulk == nullptr) {
            continue;
        }
        GroupRequest req;
        req.set_group(c.groups[j]);
        (void) bulk->call(bulk::Op::group_close, req, nullptr, 0);
        c.groups[j] = 0;
    }
}

} // namespace

void * comm_init(ggml_backend_t * backends, size_t n_backends) {
    if (n_backends < 2 || n_backends > PeerGroup::k_max_size) {
        return nullptr;
    }
    // LOOM_RPC_PEER_LINKS=0: the client sums, as with servers that offer no links.
    if (const char * e = std::getenv("LOOM_RPC_PEER_LINKS"); e != nullptr && std::strcmp(e, "0") == 0) {
        return nullptr;
    }
    auto c = std::make_unique<Comm>();
    for (size_t j = 0; j < n_backends; ++j) {
        std::shared_ptr<Connection> conn = backend_connection(backends[j]);
        // One member per server: the devices of one server would reduce
        // among themselves through the host anyway.
        for (const auto & other : c->conns) {
            if (other == conn) {
                return nullptr;
            }
        }
        if (!conn || !conn->peer_links()) {
            return nullptr;
        }
        c->conns.push_back(std::move(conn));
    }
    c->groups.assign(n_backends, 0);
    const uint32_t           timeout = ClientConfig::get().call_timeout();
    std::vector<std::string> tickets(n_backends);
    for (size_t j = 0; j < n_backends; ++j) {
        GroupOpenRequest req;
        GroupOpenReply   rep;
        req.set_rank(uint32_t(j));
        req.set_size(uint32_t(n_backends));
        BulkChannel *      bulk = c->conns[j]->bulk();
        const grpc::Status st   = bulk != nullptr ? bulk->call(bulk::Op::group_open, req, &rep, timeout)
                                                  : grpc::Status(grpc::StatusCode::UNAVAILABLE, "no bulk connection");
        if (!st.ok() || rep.group() == 0 || rep.ticket().size() != bulk::k_ticket_bytes) {
            LOOM_LOG_WARN("RPC[%s]: no group for reductions between servers (%s); the client sums partial results\n",
                          c->conns[j]->endpoint().c_str(), st.error_message().c_str());
            close_groups(*c);
            return nullptr;
        }
        c->groups[j] = rep.group();
        tickets[j]   = rep.ticket();
    }
    // In rank order: each server links to those before it, whose groups exist.
    for (size_t j = 0; j < n_backends; ++j) {
        GroupJoinRequest req;
        req.set_group(c->groups[j]);
        for (size_t r = 0; r < n_backends; ++r) {
            PeerAddress * p = req.add_peers();
            p->set_host(c->conns[r]->bulk_host());
            p->set_port(c->conns[r]->bulk_port());
            p->set_ticket(tickets[r]);
        }
        Empty              rep;
        BulkChannel *      bulk = c->conns[j]->bulk();
        const grpc::Status st   = bulk != nullptr ? bulk->call(bulk::Op::group_join, req, &rep, timeout)
                                                  : grpc::Status(grpc::StatusCode::UNAVAILABLE, "no bulk connection");
        if (!st.ok()) {
            LOOM_LOG_WARN("RPC[%s]: cannot link to the other servers (%s); the client sums partial results\n",
                          c->conns[j]->endpoint().c_str(), st.error_message().c_str());
            close_groups(*c);
            return nullptr;
        }
    }
    LOOM_LOG_INFO("RPC: %zu servers sum partial results among themselves\n", n_backends);
    return c.release();
}

void comm_free(void * ctx) {
    std::unique_ptr<Comm> c(static_cast<Comm *>(ctx));
    if (c) {
        close_groups(*c);
    }
}

bool comm_allreduce(void * ctx, ggml_tensor ** tensors) {
    Comm & c = *static_cast<Comm *>(ctx);
    if (c.broken) {
        return false;
    }
    const size_t n = c.conns.size();
    std::vector<ReduceRequest> reqs(n);
    for (size_t j = 0; j < n; ++j) {
        const ggml_tensor * t   = tensors[j];
        const auto *        buf = t != nullptr ? dynamic_cast<const RpcBuffer *>(t->buffer) : nullptr;
        if (buf == nullptr || &buf->conn() != c.conns[j].get() || t->type != GGML_TYPE_F32 ||
            !ggml_is_contiguous(t) || ggml_nelements(t) != ggml_nelements(tensors[0])) {
            return false; // the meta backend sums through the host
        }
        reqs[j].set_group(c.groups[j]);
        reqs[j].set_sequence(c.sequence);
        buf->describe(t, reqs[j].mutable_tensor());
    }
    ++c.sequence;
    for (size_t j = 0; j < n; ++j) {
        BulkChannel * bulk = c.conns[j]->bulk();
        if (bulk == nullptr || !bulk->call(bulk::Op::reduce, reqs[j], nullptr, 0).ok()) {
            // The members sent this reduction fail it once their links to
            // this one end or time out; later ones go through the host.
            LOOM_LOG_ERROR("RPC[%s]: a reduction could not be sent\n", c.conns[j]->endpoint().c_str());
            c.broken = true;
            return false;
        }
    }
    return true;
}

} // namespace loom::rpc
