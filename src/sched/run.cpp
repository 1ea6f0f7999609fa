// Allocation of the scheduler graph and execution of the splits.

#include "alloc/gallocr_internal.h"
#include "core/common.h"
#include "sched.h"
#include "trace.h"

using loom::sched::Split;
using loom::sched::TraceEvent;

bool ggml_backend_sched::alloc_splits() {
    bool changed = node_ids.size() != prev_node_ids.size() || leaf_ids.size() != prev_leaf_ids.size();
    for (size_t i = 0; !changed && i < node_ids.size(); ++i) {
        changed = bufts[size_t(node_ids[i])] != bufts[size_t(prev_node_ids[i])];
    }
    for (size_t i = 0; !changed && i < leaf_ids.size(); ++i) {
        changed = bufts[size_t(leaf_ids[i])] != bufts[size_t(prev_leaf_ids[i])];
    }
    const bool allocated = !changed && (refreshed ? loom::gallocr_alloc_unchanged_graph(galloc, graph)
                                                  : ggml_gallocr_alloc_graph(galloc, graph));
    if (!allocated) {
        // Re-planning may move split inputs: let running work finish first.
        for (ggml_backend_t b : backends) ggml_backend_synchronize(b);
        if (!ggml_gallocr_reserve_n(galloc, graph, node_ids.data(), leaf_ids.data()) ||
            !ggml_gallocr_alloc_graph(galloc, graph)) {
            LOOM_LOG_ERROR("ggml_backend_sched: failed to allocate the compute buffers of the graph\n");
            return false;
        }
    }
    prev_node_ids = node_ids;
    prev_leaf_ids = leaf_ids;

    // Note [Clones]: the user's tensors take the memory planned for their
    // clones, and what the buffer's init_tensor left in extra.
    std::vector<ggml_tensor *> given;
    for (auto & [user, c] : clones) {
        if (user->data == nullptr || location(user) == nullptr) {
            user->buffer = c->buffer;
            user->data   = c->data;
            user->extra  = c->extra;
            given.push_back(user);
        }
    }
    planned.clear();
    for (ggml_tensor * user : given) planned[user] = user->data;
    return true;
}

void ggml_backend_sched::reset() {
    if (!is_reset) {
        backend_of.clear();
        cause_of.clear();
        pinned.clear();
        is_reset = true;
    }
    is_alloc   = false;
    user_graph = nullptr;
}

void ggml_backend_sched::synchronize() {
    for (ggml_backend_t b : backends) ggml_backend_synchronize(b);
    if (!is_alloc) {
        // The next graph uses copy 0 after a synchronisation, so repeated
        // single-graph runs always see the same memory.
        next_copy = 0;
    }
}

ggml_status ggml_backend_sched::compute_splits() {
    const bool tracing = trace != nullptr;
    int        prev_backend = -1;

    for (size_t k = 0; k < splits.size(); ++k) {
        const Split &  sp = splits[k];
        ggml_backend_t b  = backends[size_t(sp.backend)];
        ggml_backend_event_t ev = events.empty() ? nullptr : events[size_t(sp.backend)][size_t(cur_copy)];

        // The allocator may reuse memory across splits: a split without
        // inputs must still wait for the previous backend.
        if (sp.inputs.empty() && prev_backend >= 0 && prev_backend != sp.backend) {
            ggml_backend_event_t pev = events.empty() ? nullptr : events[size_t(prev_backend)][size_t(cur_copy)];
            if (pev != nullptr) {
                ggml_backend_event_synchronize(pev);
            } else {
                ggml_backend_synchronize(backends[size_t(prev_backend)]);
            }
        }

        for (ggml_tensor * in : sp.inputs) {
            ggml_tensor * const * c   = clone_of.find(in);
            const ggml_tensor *   src = c != nullptr ? *c : in;
            ggml_tensor *        dst = copies.at(in)[size_t(sp.backend)][size_t(cur_copy)];
            const int64_t        t0  = tracing ? ggml_time_us() : 0;
            if (in->flags & GGML_TENSOR_FLAG_INPUT) {
                // The caller may overwrite its inputs once compute returns:
                // copy them now, after the split's previous use of the copy.
                if (ev != nullptr) {
                    ggml_backend_event_synchronize(ev);
                } else {
                    ggml_backend_synchronize(b);
                }
                ggml_backend_tensor_copy(src, dst);
            } else {
                if (ev != nullptr) {
                    ggml_backend_event_wait(b, ev);
                } else {
                    ggml_backend_synchronize(b);
                }
                ggml_backend_tensor_copy_async(backends[size_t(id(in))], b, src, dst);
            }
            bytes_copied += ggml_nbytes(src);
            if (tracing) {
                ggml_backend_synchronize(b);
                trace->add(TraceEvent{std::string("copy ") + in->name, "copy", sp.backend, t0, ggml_time_us() - t0,
                                      ggml_nbytes(src)});
            }
        }

        const int64_t t0 = tracing ? ggml_time_us() : 0;
        if (eval_cb == nullptr) {
            ggml_cgraph gv = ggml_graph_view(graph, sp.sg_start, sp.sg_end);
            gv.uid         = sp.uid; // Note [Graph contract] in split.cpp
            const ggml_status st = ggml_backend_graph_compute_async(b, &gv);
            if (st != GGML_STATUS_SUCCESS) {
                return st;
            }
        } else {
            // Run up to each node the callback asks for, then show it the
            // node (the user's tensor, which shares the clone's memory).
            for (int j0 = sp.sg_start; j0 < sp.sg_end;) {
                int  j1   = j0;
                bool need = false;
                for (; j1 < sp.sg_end; ++j1) {
                    need = eval_cb(user_of(graph->nodes[j1]), true, eval_cb_data);
                    if (need) break;
                }
                if (j1 == sp.sg_end) --j1;
                ggml_cgraph       gv = ggml_graph_view(graph, j0, j1 + 1);
                const ggml_status st = ggml_backend_graph_compute_async(b, &gv);
                if (st != GGML_STATUS_SUCCESS) {
                    return st;
                }
                ggml_backend_synchronize(b);
                if (need && !eval_cb(user_of(graph->nodes[j1]), false, eval_cb_data)) {
                    return GGML_STATUS_SUCCESS; // the callback stopped the computation
                }
                j0 = j1 + 1;
            }
        }
        if (tracing) {
            ggml_backend_synchronize(b);
            trace->add(TraceEvent{"split " + std::to_string(k) + " (" + std::to_string(sp.sg_end - sp.sg_start) +
                                      " nodes)",
                                  "split", sp.backend, t0, ggml_time_us() - t0, 0});
        }
        if (ev != nullptr) {
            ggml_backend_event_record(ev, b);
        }
        prev_backend = sp.backend;
    }
    return GGML_STATUS_SUCCESS;
}

ggml_tensor * ggml_backend_sched::user_of(ggml_tensor * sg_node) const {
    ggml_tensor * const * u = user_of_clone.find(sg_node);
    return u != nullptr ? *u : sg_node;
}
