#pragma once

// The multi-backend scheduler behind ggml_backend_sched_t.
//
// A user graph is placed (every node gets a backend), cut into splits of
// consecutive nodes on one backend, and rebuilt as the scheduler's own
// graph: clones of the user's nodes whose sources point at per-backend
// copies of split inputs. The user's tensors are never rewired; after the
// graph allocator plans the clones, each user tensor receives its clone's
// buffer and address, so the caller sets inputs and reads outputs through
// its own tensors as with ggml. See Note [Clones] in split.cpp.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "core/graph.h"
#include "core/ptr_map.h"

namespace loom::sched {

// Why a tensor runs where it does (printed with GGML_SCHED_DEBUG=2).
enum class Cause : uint8_t {
    none,
    user,        // set_tensor_backend
    dst_buffer,  // pass 1: pre-allocated in a buffer of this backend
    view_buffer, // pass 1: view of a pre-allocated tensor
    input,       // pass 1: graph input without a buffer goes to the CPU
    weights,     // pass 1: next to its weights
    offload,     // pass 1: a higher-priority backend asked for it
    expand,      // pass 2: grown from a neighbour
    best,        // pass 3: the backend supporting most of its inputs
    upgrade,     // pass 3: moved to a higher-priority backend with the same buffer type
    view_src,    // pass 4: follows its view source
    consumer,    // pass 4: follows the node that uses it
    fallback,    // pass 4: first backend that supports it
};
const char * cause_name(Cause c);

struct Split {
    int                        backend = -1;
    int                        i_start = 0; // in the user graph
    int                        i_end   = 0;
    std::vector<ggml_tensor *> inputs;      // user tensors copied in before the split runs
    int                        sg_start = 0; // the split's node clones in the scheduler graph
    int                        sg_end   = 0;
    uint64_t                   uid      = 0; // the graph identity its backend sees, new with every placement
};

struct Trace;

// The words describing a graph for plan reuse (split.cpp). A buffer that is
// only ever grown and is written in full before it is read, so building a
// signature does not clear memory first.
class Signature {
  public:
    uint64_t * prepare(size_t max_words) {
        if (capacity_ < max_words) {
            words_    = std::make_unique_for_overwrite<uint64_t[]>(max_words);
            capacity_ = max_words;
        }
        size_ = 0;
        return words_.get();
    }
    void finish(const uint64_t * end) { size_ = size_t(end - words_.get()); }
    bool empty() const { return size_ == 0; }
    bool operator==(const Signature & o) const {
        return size_ == o.size_ && (size_ == 0 || std::memcmp(words_.get(), o.words_.get(), size_ * sizeof(uint64_t)) == 0);
    }

  private:
    std::unique_ptr<uint64_t[]> words_;
    size_t                      capacity_ = 0;
    size_t                      size_     = 0;
};

struct Config {
    int         debug = 0;        // GGML_SCHED_DEBUG
    std::string trace_path;       // LOOM_SCHED_TRACE
    int         max_split_inputs = 30;
    bool        reuse_plans      = true; // LOOM_SCHED_REUSE=0 turns plan reuse off
};

} // namespace loom::sched

struct ggml_backend_sched {
    ggml_backend_sched(ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts, int n_backends,
                       size_t graph_size, bool parallel, bool op_offload);
    ~ggml_backend_sched();

    // --- state across calls ---
    std::vector<ggml_backend_t>                     backends;
    std::vector<ggml_backend_buffer_type_t>         bufts;
    std::vector<std::vector<ggml_backend_event_t>>  events; // [backend][copy], NULL where unsupported
    ggml_gallocr_t                                  galloc = nullptr;
    size_t                                          graph_size;
    bool                                            op_offload;
    int                                             n_copies;
    int                                             cur_copy  = 0;
    int                                             next_copy = 0;
    loom::sched::Config                             config;
    std::unique_ptr<loom::sched::Trace>             trace;

    ggml_backend_sched_eval_callback eval_cb      = nullptr;
    void *                           eval_cb_data = nullptr;

    // --- state of the current graph ---
    loom::PtrMap<int>                backend_of; // user tensors
    loom::PtrMap<loom::sched::Cause> cause_of;
    loom::PtrMap<bool>               pinned; // set_tensor_backend, never overridden
    std::vector<loom::sched::Split>                             splits;
    std::vector<ggml_tensor *>                                  graph_inputs; // pipeline-copied inputs
    // (user tensor, backend) -> its copies, one per pipeline copy
    std::unordered_map<const ggml_tensor *, std::vector<std::vector<ggml_tensor *>>> copies;
    loom::PtrMap<ggml_tensor *>                                                      clone_of;
    std::vector<std::pair<ggml_tensor *, ggml_tensor *>>                             clones; // (user, clone)
    loom::PtrMap<ggml_tensor *>                                                      user_of_clone;
    // User tensors given memory by the last plan (Note [Clones]), with that
    // address: planned again, not taken as pre-allocated, when seen again.
    loom::PtrMap<const void *> planned;
    size_t                     bytes_copied = 0;

    ggml_context *   ctx   = nullptr; // clones, copies and the scheduler graph
    ggml_cgraph *    graph = nullptr;
    std::vector<int> node_ids, leaf_ids, prev_node_ids, prev_leaf_ids;

    const ggml_cgraph * user_graph = nullptr; // the graph the current plan belongs to
    int                 user_nodes = 0;
    bool                is_reset   = false;
    bool                is_alloc   = false;

    // Plan reuse: the shape signature of the graph whose placement is cached.
    loom::sched::Signature plan_signature;
    loom::sched::Signature graph_signature; // scratch: the signature of the graph being split
    std::vector<int>      cached_node_ids; // user graph node -> backend
    std::vector<int>      cached_leaf_ids;
    loom::PtrMap<int64_t> ref_of_cached; // previous graph: tensor -> position
    loom::PtrMap<int64_t> ref_of_graph;  // current graph: tensor -> position
    uint64_t              n_plans  = 0;    // graphs placed and split from scratch
    uint64_t              n_reused = 0;    // graphs that reused the cached placement
    uint64_t              n_refreshed = 0; // of those, graphs whose scheduler graph was refreshed in place

    // Refreshing the scheduler graph in place (Note [Refresh] in split.cpp).
    struct Patch {
        ggml_tensor ** field; // in the scheduler graph
        int64_t        ref;   // the user tensor it points at, by position
    };
    std::vector<int64_t>       clone_refs;  // clones[k].first, by position
    std::vector<Patch>         patches;
    std::vector<ggml_tensor *> own_tensors; // copies and their dependency views
    bool                       graph_refreshable = false;
    int                        built_copy        = -1;
    bool                       refreshed         = false; // the current graph was refreshed, not rebuilt

    int cpu() const { return int(backends.size()) - 1; }
    // Where a tensor already lives (its view source's buffer for views);
    // NULL when it has no memory or only memory of an earlier plan of ours.
    ggml_backend_buffer_t location(const ggml_tensor * t) const {
        const ggml_tensor * base = t->view_src != nullptr ? t->view_src : t;
        const void * const * p    = planned.find(base);
        if (p != nullptr && *p == base->data) {
            return nullptr;
        }
        return base->buffer;
    }
    int backend_index(ggml_backend_t b) const;
    int id(const ggml_tensor * t) const {
        if (t == nullptr) return -1;
        const int * b = backend_of.find(t);
        return b == nullptr ? -1 : *b;
    }
    void set_id(const ggml_tensor * t, int b, loom::sched::Cause c) {
        backend_of[t] = b;
        if (config.debug > 1) cause_of[t] = c;
    }

    // split.cpp
    void split_graph(ggml_cgraph * g);
    void build_graph(ggml_cgraph * g);
    void record_refresh(const loom::PtrMap<int64_t> & ref);
    void refresh_graph(ggml_cgraph * g, const loom::PtrMap<int64_t> & prev_ref);
    void take_use_counts(const ggml_cgraph * g);
    // assign.cpp
    void assign_backends(ggml_cgraph * g);
    bool buffer_supported(const ggml_tensor * t, int b) const;
    // run.cpp
    bool        alloc_splits();
    ggml_status compute_splits();
    void        reset();
    void        synchronize();
    ggml_tensor * user_of(ggml_tensor * sg_node) const;
    // trace.cpp
    void print_plan(const ggml_cgraph * g) const;
};
