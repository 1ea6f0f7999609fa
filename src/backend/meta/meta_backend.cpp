// The meta backend: one backend per member. A graph of meta tensors runs as
// one graph of slices per member; after each node whose result is a partial
// sum the members' slices are summed (all-reduce) and every member holds the
// sum. The all-reduce uses the members' collective operations when their
// registry offers them (ggml_backend_comm_*), direct loads and stores when
// every member's memory is host memory, and host staging otherwise.

#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "core/common.h"
#include "core/graph.h"
#include "meta.h"

namespace loom::meta {

namespace {

ggml_guid_t meta_guid() {
    static ggml_guid guid = {0x6c, 0x6f, 0x6f, 0x6d, 0x2d, 0x6d, 0x65, 0x74, 0x61, 0x2d, 0x74, 0x70, 0x01, 0x02, 0x03, 0x04};
    return &guid;
}

// Runs fn(j) for every member j at once: member 0 on the calling thread, each
// other on a worker thread of its own, kept for the backend's life. A member's
// computation or transfer may block until its device is done (an RPC server
// answers a graph when it has computed it), so the members work side by side
// only when they are called side by side.
class MemberThreads {
  public:
    explicit MemberThreads(size_t n) : n_(n) {
        for (size_t j = 1; j < n; ++j) workers_.emplace_back([this, j] { loop(j); });
    }
    ~MemberThreads() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        for (std::thread & t : workers_) t.join();
    }
    MemberThreads(const MemberThreads &)             = delete;
    MemberThreads & operator=(const MemberThreads &) = delete;

    void run(const std::function<void(size_t)> & fn) {
        if (n_ == 1) {
            fn(0);
            return;
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            fn_      = &fn;
            pending_ = n_ - 1;
            ++generation_;
        }
        wake_.notify_all();
        fn(0);
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [this] { return pending_ == 0; });
        fn_ = nullptr;
    }

  private:
    void loop(size_t j) {
        uint64_t                     seen = 0;
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen                                      = generation_;
            const std::function<void(size_t)> * const fn = fn_;
            lock.unlock();
            (*fn)(j);
            lock.lock();
            if (--pending_ == 0) done_.notify_one();
        }
    }

    size_t                              n_;
    std::vector<std::thread>            workers_;
    std::mutex                          mutex_;
    std::condition_variable             wake_, done_;
    const std::function<void(size_t)> * fn_         = nullptr;
    size_t                              pending_    = 0;
    uint64_t                            generation_ = 0;
    bool                                stop_       = false;
};

class Backend final : public ggml_backend {
  public:
    Backend(Device * dev, std::vector<ggml_backend *> members)
        : ggml_backend(meta_guid(), dev), members_(std::move(members)), name_(dev->name()), threads_(members_.size()) {
        ggml_backend_reg * reg = members_[0]->device->reg;
        if (reg != nullptr) {
            auto init = reinterpret_cast<ggml_backend_comm_init_t>(reg->proc_address("ggml_backend_comm_init"));
            comm_free_ = reinterpret_cast<ggml_backend_comm_free_t>(reg->proc_address("ggml_backend_comm_free"));
            comm_allreduce_ = reinterpret_cast<ggml_backend_comm_allreduce_tensor_t>(
                reg->proc_address("ggml_backend_comm_allreduce_tensor"));
            // Members of several regs of one family (an RPC server each) share
            // the hooks when every reg gives the same ones.
            bool same_hooks = true;
            for (ggml_backend * b : members_) {
                same_hooks = same_hooks && b->device->reg != nullptr &&
                             b->device->reg->proc_address("ggml_backend_comm_allreduce_tensor") ==
                                 reinterpret_cast<void *>(comm_allreduce_);
            }
            if (same_hooks && init != nullptr && comm_allreduce_ != nullptr) {
                comm_ = init(members_.data(), members_.size());
            }
        }
    }
    ~Backend() override {
        if (comm_ != nullptr && comm_free_ != nullptr) comm_free_(comm_);
        for (ggml_backend * b : members_) ggml_backend_free(b);
    }

    const char * name() const override { return name_.c_str(); }
    void         synchronize() override {
        for (ggml_backend * b : members_) b->synchronize();
    }
    ggml_status graph_compute(ggml_cgraph * graph) override;

  private:
    // The members' own all-reduce (comm hooks), ordered in their streams
    // like a computation; false when there is none or it declines.
    bool        members_reduce(const ggml_tensor * node, const Slices & sl);
    // Through the host, once the members have synchronized.
    ggml_status all_reduce(const ggml_tensor * node, const Slices & sl);

    std::vector<ggml_backend *>          members_;
    std::string                          name_;
    MemberThreads                        threads_;
    std::unique_ptr<char[]>              graph_mem_; // the members' graphs of one computation
    size_t                               graph_mem_size_ = 0;
    void *                               comm_           = nullptr;
    ggml_backend_comm_free_t             comm_free_      = nullptr;
    ggml_backend_comm_allreduce_tensor_t comm_allreduce_ = nullptr;
};

bool all_host(const Slices & sl) {
    for (const auto & p : sl.parts) {
        if (!ggml_backend_buffer_is_host(p->buffer)) return false;
    }
    return true;
}

bool Backend::members_reduce(const ggml_tensor * node, const Slices & sl) {
    const size_t n = members_.size();
    bool all_active = true;
    for (size_t j = 0; j < n; ++j) all_active = all_active && sl.active[j];
    if (comm_ == nullptr || !all_active) return false;
    std::vector<ggml_tensor *> ts;
    for (const auto & p : sl.parts) ts.push_back(p.get());
    if (comm_allreduce_(comm_, ts.data())) return true;
    LOOM_LOG_WARN("%s: the members' all-reduce of %s was declined; summing through the host\n", name(),
                  describe(node).text);
    return false;
}

ggml_status Backend::all_reduce(const ggml_tensor * node, const Slices & sl) {
    const size_t n = members_.size();
    if (node->type != GGML_TYPE_F32 || !ggml_is_contiguous(node)) {
        LOOM_LOG_ERROR("%s: cannot sum partial results of %s (F32 and contiguous only)\n", name(),
                       describe(node).text);
        return GGML_STATUS_FAILED;
    }
    const size_t count = size_t(ggml_nelements(node));
    if (all_host(sl)) {
        // Direct: the first active slice accumulates, then is copied to the others.
        float * acc = nullptr;
        for (size_t j = 0; j < n; ++j) {
            if (!sl.active[j]) continue;
            const float * x = static_cast<const float *>(sl.parts[j]->data);
            if (acc == nullptr) {
                acc = static_cast<float *>(sl.parts[j]->data);
                continue;
            }
            for (size_t i = 0; i < count; ++i) acc[i] += x[i];
        }
        for (size_t j = 0; j < n; ++j) {
            if (acc == nullptr) {
                std::memset(sl.parts[j]->data, 0, count * sizeof(float));
            } else if (sl.parts[j]->data != acc) {
                std::memcpy(sl.parts[j]->data, acc, count * sizeof(float));
            }
        }
        return GGML_STATUS_SUCCESS;
    }
    // Through the host: every member's slice read at once, summed in member
    // order (the same sum as one member after the other), written back at once.
    std::vector<std::vector<float>> parts(n);
    threads_.run([&](size_t j) {
        if (!sl.active[j]) return;
        parts[j].resize(count);
        ggml_tensor * p = sl.parts[j].get();
        p->buffer->get_tensor(p, parts[j].data(), 0, count * sizeof(float));
    });
    std::vector<float> sum(count, 0.0f);
    for (size_t j = 0; j < n; ++j) {
        for (size_t i = 0; i < parts[j].size(); ++i) sum[i] += parts[j][i];
    }
    threads_.run([&](size_t j) {
        ggml_tensor * p = sl.parts[j].get();
        p->buffer->set_tensor(p, sum.data(), 0, count * sizeof(float));
    });
    return GGML_STATUS_SUCCESS;
}

ggml_status Backend::graph_compute(ggml_cgraph * graph) {
    const size_t n = members_.size();
    std::vector<const Slices *> slices(size_t(graph->n_nodes));
    for (int i = 0; i < graph->n_nodes; ++i) {
        const ggml_tensor * node = graph->nodes[i];
        // A view outside this device's buffers (a scheduler's split holds views
        // of inputs that stay on the CPU) computes nothing here; a node that
        // reads it reads a copy.
        if ((is_view_op(node->op) || node->op == GGML_OP_NONE) && !is_meta_buffer(node->buffer)) {
            continue;
        }
        slices[size_t(i)] = slices_of(node);
        if (slices[size_t(i)] == nullptr) {
            LOOM_LOG_ERROR("%s: node %s is not placed in a meta buffer of this device\n", name(), describe(node).text);
            return GGML_STATUS_FAILED;
        }
    }
    // One graph per member, cut after each node that needs an all-reduce.
    const size_t graph_bytes = ggml_graph_overhead_custom(size_t(graph->n_nodes) + 1, false);
    // Kept between computations: fresh memory of this size every token
    // costs its page faults and clearing.
    const size_t mem_bytes = n * (graph_bytes + 1024);
    if (graph_mem_size_ < mem_bytes) {
        graph_mem_      = std::make_unique_for_overwrite<char[]>(mem_bytes);
        graph_mem_size_ = mem_bytes;
    }
    ggml_init_params params{mem_bytes, graph_mem_.get(), true};
    ggml_context * ctx = ggml_init(params);
    if (ctx == nullptr) return GGML_STATUS_ALLOC_FAILED;
    std::vector<ggml_cgraph *> graphs(n);
    for (size_t j = 0; j < n; ++j) graphs[j] = ggml_new_graph_custom(ctx, graph->n_nodes + 1, false);
    std::vector<int> start(n, 0);
    ggml_status      status = GGML_STATUS_SUCCESS;
    // The members' pieces since the last all-reduce, computed side by side.
    // With the members' own all-reduce (comm_), which is ordered in their
    // streams, pieces and reductions are issued one after the other and
    // waited for at the end (or before a reduction through the host), as
    // ggml's meta backend does; otherwise each member is called from a
    // thread of its own and waited for.
    const bool               streamed = comm_ != nullptr;
    std::vector<ggml_status> member_status(n);
    auto issue = [&](size_t j) {
        member_status[j] = GGML_STATUS_SUCCESS;
        if (graphs[j]->n_nodes == start[j]) return;
        ggml_cgraph view = ggml_graph_view(graphs[j], start[j], graphs[j]->n_nodes);
        member_status[j] = members_[j]->graph_compute(&view);
        start[j]         = graphs[j]->n_nodes;
    };
    auto settle = [&](size_t j) {
        members_[j]->synchronize();
        if (const ggml_status later = members_[j]->take_async_status(); member_status[j] == GGML_STATUS_SUCCESS) {
            member_status[j] = later;
        }
    };
    auto run = [&](bool wait) -> ggml_status {
        if (streamed) {
            bool failed = false;
            for (size_t j = 0; j < n; ++j) {
                issue(j);
                failed = failed || member_status[j] != GGML_STATUS_SUCCESS;
            }
            // A failure waits for every member, so that nothing is in flight.
            for (size_t j = 0; j < n && (wait || failed); ++j) settle(j);
        } else {
            threads_.run([&](size_t j) {
                issue(j);
                settle(j);
            });
        }
        for (size_t j = 0; j < n; ++j) {
            if (member_status[j] != GGML_STATUS_SUCCESS) {
                LOOM_LOG_ERROR("%s: member %s failed: %s\n", name(), members_[j]->name(),
                               ggml_status_to_string(member_status[j]));
                return member_status[j];
            }
        }
        return GGML_STATUS_SUCCESS;
    };
    for (int i = 0; i < graph->n_nodes && status == GGML_STATUS_SUCCESS; ++i) {
        const ggml_tensor * node = graph->nodes[i];
        if (slices[size_t(i)] == nullptr) continue; // a view of memory elsewhere
        const Slices & sl = *slices[size_t(i)];
        for (size_t j = 0; j < n; ++j) {
            if (!sl.active[j]) continue;
            // The slices were copied from the node when it was placed; what a
            // program sets on it later (ggml_build_forward_expand's flags after
            // the allocation, op params it updates) reaches them here.
            ggml_tensor * p = sl.parts[j].get();
            p->flags        = node->flags;
            std::memcpy(p->op_params, node->op_params, sizeof(p->op_params));
            ggml_graph_add_node(graphs[j], p);
        }
        if (sl.state.axis == GGML_BACKEND_SPLIT_AXIS_PARTIAL && node->op != GGML_OP_NONE && !is_view_op(node->op)) {
            status = run(!streamed);
            if (status == GGML_STATUS_SUCCESS && !members_reduce(node, sl)) {
                if (streamed) status = run(true);
                if (status == GGML_STATUS_SUCCESS) status = all_reduce(node, sl);
            }
        }
    }
    if (status == GGML_STATUS_SUCCESS) status = run(true);
    ggml_free(ctx);
    return status;
}

} // namespace

ggml_backend * Device::init_backend(const char * params) {
    std::vector<ggml_backend *> backends;
    for (ggml_backend_device * d : members_) {
        ggml_backend * b = d->init_backend(params);
        if (b == nullptr) {
            LOOM_LOG_ERROR("%s: member %s has no backend\n", name(), d->name());
            for (ggml_backend * o : backends) ggml_backend_free(o);
            return nullptr;
        }
        backends.push_back(b);
    }
    return new Backend(this, std::move(backends));
}

} // namespace loom::meta
