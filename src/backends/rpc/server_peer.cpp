// The server's frames of Note [Peer links] (peer.h): groups of a session,
// links claimed by peers, reductions on a session's tensors.

#include <vector>

#include "backend/backend_impl.h"
#include "bulk.h"
#include "peer.h"
#include "server_core.h"

namespace loom::rpc {

namespace {

grpc::Status invalid(const std::string & what, const std::string & why) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what + ": " + why);
}

std::shared_ptr<PeerGroup> find_group(Session & s, uint64_t handle) {
    std::lock_guard<std::mutex> lock(s.bulk_mutex);
    auto                        it = s.groups.find(handle);
    return it != s.groups.end() ? it->second : nullptr;
}

} // namespace

grpc::Status ServerCore::open_group(Session & s, const GroupOpenRequest & req, GroupOpenReply * out) {
    if (req.size() < 2 || req.size() > PeerGroup::k_max_size || req.rank() >= req.size()) {
        return invalid("GroupOpen", "rank " + std::to_string(req.rank()) + " of " + std::to_string(req.size()) +
                                        " members (2 to " + std::to_string(PeerGroup::k_max_size) + ")");
    }
    std::lock_guard<std::mutex> lock(s.bulk_mutex);
    if (s.groups.size() >= k_max_groups) {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "GroupOpen: the session holds " + std::to_string(k_max_groups) + " groups");
    }
    const uint64_t handle = s.next_group++;
    auto g = std::make_shared<PeerGroup>(req.rank(), req.size(), random_bytes(bulk::k_ticket_bytes),
                                         bulk::k_io_timeout_ms);
    out->set_group(handle);
    out->set_ticket(g->ticket());
    s.groups[handle] = std::move(g);
    return grpc::Status::OK;
}

grpc::Status ServerCore::join_group(Session & s, const GroupJoinRequest & req) {
    std::shared_ptr<PeerGroup> g = find_group(s, req.group());
    if (!g) {
        return invalid("GroupJoin", "no group " + std::to_string(req.group()) + " in this session");
    }
    return g->join(req);
}

grpc::Status ServerCore::close_group(Session & s, const GroupRequest & req) {
    std::shared_ptr<PeerGroup> g;
    {
        std::lock_guard<std::mutex> lock(s.bulk_mutex);
        auto                        it = s.groups.find(req.group());
        if (it == s.groups.end()) {
            return invalid("GroupClose", "no group " + std::to_string(req.group()) + " in this session");
        }
        g = std::move(it->second);
        s.groups.erase(it);
    }
    g->shut("the group was closed");
    return grpc::Status::OK;
}

grpc::Status ServerCore::reduce(Session & s, const ReduceRequest & req) {
    std::shared_ptr<PeerGroup> g = find_group(s, req.group());
    if (!g) {
        return invalid("Reduce", "no group " + std::to_string(req.group()) + " in this session");
    }
    grpc::Status st = with_range(s, "Reduce", req.tensor(), 0, 0, [&](ggml_tensor & t) {
        if (t.type != GGML_TYPE_F32 || !ggml_is_contiguous(&t)) {
            return invalid("Reduce", std::string("the tensor is ") + ggml_type_name(t.type) +
                                         (ggml_is_contiguous(&t) ? "" : " and not contiguous") +
                                         "; reductions take contiguous F32 tensors");
        }
        const size_t bytes = ggml_nbytes(&t);
        if (t.data == nullptr || static_cast<const char *>(t.data) + bytes >
                                     static_cast<const char *>(ggml_backend_buffer_get_base(t.buffer)) +
                                         ggml_backend_buffer_get_size(t.buffer)) {
            return invalid("Reduce", "the tensor's bytes lie outside its buffer");
        }
        std::vector<float> data(bytes / sizeof(float));
        t.buffer->get_tensor(&t, data.data(), 0, bytes);
        grpc::Status done = g->reduce(req.sequence(), data.data(), data.size());
        if (done.ok()) {
            t.buffer->set_tensor(&t, data.data(), 0, bytes);
        }
        return done;
    });
    if (!st.ok()) {
        // The peers wait for this member's part: a refused or failed
        // reduction breaks the group for them too (a no-op when it broke).
        g->shut(st.error_message());
    }
    return st;
}

bool ServerCore::claim_peer(const std::string & ticket, uint32_t from, int fd, const std::function<bool()> & answer) {
    std::shared_ptr<PeerGroup> found;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto & [id, s] : sessions_) {
            // Every group is compared, so the time says nothing of which matched.
            std::lock_guard<std::mutex> bulk_lock(s->bulk_mutex);
            for (const auto & [handle, g] : s->groups) {
                if (same_bytes(g->ticket(), ticket)) {
                    found = g;
                }
            }
        }
    }
    return found && found->accept_link(from, fd, answer);
}

} // namespace loom::rpc
