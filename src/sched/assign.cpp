// Placement: every node of the user graph gets a backend, in the passes of
// ggml's scheduler (pre-allocated locations and weights, expansion of
// accelerator assignments to neighbours, upgrades to higher-priority
// backends sharing a buffer type, and sources inheriting from their users).

#include "core/common.h"
#include "sched.h"

using loom::is_view_op;

using loom::sched::Cause;

namespace {

} // namespace

bool ggml_backend_sched::buffer_supported(const ggml_tensor * t, int b) const {
    ggml_backend_buffer_type_t buft = nullptr;
    if (ggml_backend_buffer_t buf = location(t)) {
        buft = ggml_backend_buffer_get_type(buf);
    } else {
        int tb = id(t);
        if (tb == -1 && t->view_src != nullptr) {
            tb = id(t->view_src);
        }
        if (tb != -1) {
            buft = bufts[size_t(tb)];
        }
    }
    return buft != nullptr && ggml_backend_supports_buft(backends[size_t(b)], buft);
}

namespace {

// The highest-priority backend that can use t's buffer for op; -1 if none.
int backend_from_buffer(const ggml_backend_sched & s, const ggml_tensor * t, const ggml_tensor * op) {
    ggml_backend_buffer_t buf = s.location(t);
    if (buf == nullptr) {
        return -1;
    }
    for (size_t b = 0; b < s.backends.size(); ++b) {
        if (ggml_backend_supports_buft(s.backends[b], ggml_backend_buffer_get_type(buf)) &&
            ggml_backend_supports_op(s.backends[b], op)) {
            return int(b);
        }
    }
    return -1;
}

// Pass 1 for one tensor.
int backend_from_location(ggml_backend_sched & s, ggml_tensor * t, Cause & cause) {
    int b = backend_from_buffer(s, t, t);
    if (b != -1) {
        cause = Cause::dst_buffer;
        return b;
    }
    if (t->view_src != nullptr) {
        b = backend_from_buffer(s, t->view_src, t);
        if (b != -1) {
            cause = Cause::view_buffer;
            return b;
        }
    }
    if (ggml_backend_buffer_t buf = s.location(t)) {
        loom::fail("ggml_backend_sched", "pre-allocated tensor %s is in buffer %s, which no backend of the scheduler "
                   "can use for its op %s",
                   loom::describe(t).text, ggml_backend_buffer_name(buf), ggml_op_desc(t));
    }
    if (t->flags & GGML_TENSOR_FLAG_INPUT) {
        cause = Cause::input;
        return s.cpu();
    }
    // Ops go where their weights are. Rope's frequency factors and attention
    // sinks are too small to decide where the op should run.
    if (t->op == GGML_OP_ROPE || t->op == GGML_OP_FLASH_ATTN_EXT) {
        return -1;
    }
    for (int j = 0; j < GGML_MAX_SRC; ++j) {
        const ggml_tensor * src = t->src[j];
        if (src == nullptr || s.location(src) == nullptr ||
            ggml_backend_buffer_get_usage(s.location(src)) != GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
            continue;
        }
        const int wb = backend_from_buffer(s, src, t);
        if (s.op_offload && wb == s.cpu() && ggml_backend_buffer_is_host(s.location(src))) {
            for (int hb = 0; hb < wb; ++hb) {
                if (ggml_backend_supports_op(s.backends[size_t(hb)], t) &&
                    ggml_backend_offload_op(s.backends[size_t(hb)], t)) {
                    cause = Cause::offload;
                    return hb;
                }
            }
        }
        cause = Cause::weights;
        return wb;
    }
    return -1;
}

// Pass 2: grow assignments to unassigned neighbours, in one direction.
// With skip_cpu, assignments to the CPU (the fallback) do not grow.
template <typename Order>
void expand(ggml_backend_sched & s, ggml_cgraph * g, Order order, bool skip_cpu) {
    int cur = -1;
    for (int k = 0; k < g->n_nodes; ++k) {
        ggml_tensor * node = g->nodes[order(k)];
        if (is_view_op(node->op)) {
            continue;
        }
        const int b = s.id(node);
        if (b != -1) {
            cur = (skip_cpu && b == s.cpu()) ? -1 : b;
        } else if (cur != -1 && ggml_backend_supports_op(s.backends[size_t(cur)], node)) {
            s.set_id(node, cur, Cause::expand);
        }
    }
}

} // namespace

void ggml_backend_sched::assign_backends(ggml_cgraph * g) {
    // Pass 1: pre-allocated tensors, inputs, weights. User pins stay.
    for (int i = 0; i < g->n_leafs; ++i) {
        ggml_tensor * leaf = g->leafs[i];
        if (id(leaf) == -1) {
            Cause     c = Cause::none;
            const int b = backend_from_location(*this, leaf, c);
            if (b != -1) set_id(leaf, b, c);
        }
    }
    for (int i = 0; i < g->n_nodes; ++i) {
        ggml_tensor * node = g->nodes[i];
        if (id(node) == -1) {
            Cause     c = Cause::none;
            const int b = backend_from_location(*this, node, c);
            if (b != -1) set_id(node, b, c);
        }
    }

    // Pass 2: accelerators first (down, then up), then every backend.
    const auto fwd = [](int k) { return k; };
    const auto bwd = [g](int k) { return g->n_nodes - 1 - k; };
    expand(*this, g, fwd, true);
    expand(*this, g, bwd, true);
    expand(*this, g, fwd, false);
    expand(*this, g, bwd, false);

    // Pass 3: unassigned nodes go where most of their inputs can be read;
    // assigned ones move up to a higher-priority backend of the same
    // buffer type that supports the op and all its sources.
    for (int i = 0; i < g->n_nodes; ++i) {
        ggml_tensor * node = g->nodes[i];
        if (is_view_op(node->op)) {
            continue;
        }
        const int cur = id(node);
        if (cur == -1) {
            int best = -1;
            for (int b = 0; b < int(backends.size()); ++b) {
                if (!ggml_backend_supports_op(backends[size_t(b)], node)) continue;
                int n = 0;
                for (int j = 0; j < GGML_MAX_SRC; ++j) {
                    const ggml_tensor * src = node->src[j];
                    if (src != nullptr && (id(src) != -1 || id(src->view_src) != -1) && buffer_supported(src, b)) ++n;
                }
                if (n > best) {
                    best = n;
                    set_id(node, b, Cause::best);
                }
            }
        } else if (!pinned.contains(node)) {
            for (int b = 0; b < cur; ++b) {
                if (bufts[size_t(b)] != bufts[size_t(cur)] || !ggml_backend_supports_op(backends[size_t(b)], node)) {
                    continue;
                }
                bool ok = true;
                for (int j = 0; j < GGML_MAX_SRC && ok; ++j) {
                    if (node->src[j] != nullptr && !buffer_supported(node->src[j], b)) ok = false;
                }
                if (ok) {
                    set_id(node, b, Cause::upgrade);
                    break;
                }
            }
        }
    }

    // Pass 4: views follow their source; sources without a place follow
    // their view source or their consumer.
    for (int i = 0; i < g->n_nodes; ++i) {
        ggml_tensor * node = g->nodes[i];
        if (node->view_src != nullptr && id(node) == -1) {
            set_id(node, id(node->view_src), Cause::view_src);
        }
        for (int j = 0; j < GGML_MAX_SRC; ++j) {
            ggml_tensor * src = node->src[j];
            if (src == nullptr || id(src) != -1) continue;
            if (src->view_src != nullptr) {
                set_id(src, id(src->view_src), Cause::view_src);
            } else {
                set_id(src, id(node), Cause::consumer);
            }
        }
        for (int b = 0; b < int(backends.size()) && id(node) == -1; ++b) {
            if (ggml_backend_supports_op(backends[size_t(b)], node)) set_id(node, b, Cause::fallback);
        }
        LOOM_REQUIRE(id(node) != -1, "no backend of the scheduler supports node %s (%s)", loom::describe(node).text,
                     ggml_op_desc(node));
    }
}
