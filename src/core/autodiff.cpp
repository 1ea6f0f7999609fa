// Gradients of a graph: which nodes need one, the accumulators, the backward
// pass in reverse node order, and the reset before an evaluation.

#include <cstring>
#include <vector>

#include "autodiff.h"
#include "common.h"
#include "ggml-backend.h"

using namespace loom;

namespace {

// Whether the gradient of node's source j can change the gradient of node:
// not for the sources the operator's row excludes, nor for the source of a
// piecewise constant unary operator.
bool source_is_differentiable(const ggml_tensor * node, int j) {
    const OpInfo * info = op_info(node->op);
    if (info != nullptr && ((info->no_grad >> j) & 1u) != 0) {
        return false;
    }
    if (node->op == GGML_OP_UNARY && j == 0) {
        const UnaryInfo * u = unary_info(ggml_get_unary_op(node));
        return u == nullptr || (u->flags & k_op_constant) == 0;
    }
    return true;
}

// A node whose result is a view of a source's memory: a view, or an op that
// writes into a source.
bool may_be_in_place(ggml_op op) {
    return is_view_op(op) || op_has(op, k_op_writes_source);
}

size_t used_slot(const ggml_cgraph * g, const ggml_tensor * t) {
    const size_t i = g->visited_hash_set.find(t);
    return i != TensorHashSet::npos && g->visited_hash_set.is_used(i) ? i : TensorHashSet::npos;
}

void set_scalar_one(ggml_tensor * t) {
    const float one = 1.0f;
    if (t->buffer != nullptr) {
        ggml_backend_tensor_set(t, &one, 0, sizeof(one));
    } else {
        LOOM_REQUIRE(t->data != nullptr, "loss gradient %s has no memory", describe(t).text);
        std::memcpy(t->data, &one, sizeof(one));
    }
}

} // namespace

extern "C" {

void ggml_build_backward_expand(ggml_context * ctx, ggml_cgraph * g, ggml_tensor ** grad_accs) {
    LOOM_REQUIRE(g != nullptr && g->n_nodes > 0, "the graph has no nodes");
    LOOM_REQUIRE(g->grads != nullptr && g->grad_accs != nullptr,
                 "the graph has no room for gradients (create it with "
                 "ggml_new_graph_custom(..., grads = true))");

    const int    n_forward = g->n_nodes;
    const size_t hsize     = g->visited_hash_set.size;
    std::memset(g->grads, 0, hsize * sizeof(ggml_tensor *));
    std::memset(g->grad_accs, 0, hsize * sizeof(ggml_tensor *));

    bool any_param = false, any_loss = false;
    for (int i = 0; i < n_forward; ++i) {
        any_param = any_param || (g->nodes[i]->flags & GGML_TENSOR_FLAG_PARAM);
        any_loss  = any_loss || (g->nodes[i]->flags & GGML_TENSOR_FLAG_LOSS);
    }
    LOOM_REQUIRE(any_param, "no trainable parameters in the graph (ggml_set_param)");
    LOOM_REQUIRE(any_loss, "no loss in the graph (ggml_set_loss)");

    // A node needs a gradient when it is a parameter or a loss, or when one
    // of its differentiable sources does (forward order, so sources first).
    std::vector<char> needed(hsize, 0);
    for (int i = 0; i < n_forward; ++i) {
        ggml_tensor * node = g->nodes[i];
        if (node->type == GGML_TYPE_I32) {
            continue;
        }
        bool needs = (node->flags & (GGML_TENSOR_FLAG_PARAM | GGML_TENSOR_FLAG_LOSS)) != 0;
        for (int j = 0; j < GGML_MAX_SRC && !needs; ++j) {
            const ggml_tensor * src = node->src[j];
            if (src == nullptr || !source_is_differentiable(node, j)) {
                continue;
            }
            const size_t k = used_slot(g, src);
            if (k == TensorHashSet::npos || !needed[k]) {
                continue;
            }
            LOOM_REQUIRE(src->type == GGML_TYPE_F32 || src->type == GGML_TYPE_F16,
                         "%s needs a gradient but is %s (f32 or f16 only)",
                         describe(src).text, ggml_type_name(src->type));
            needs = true;
        }
        if (!needs) {
            continue;
        }
        LOOM_REQUIRE(node->view_src == nullptr || may_be_in_place(node->op),
                 "in-place operation %s cannot be differentiated", describe(node).text);
        const size_t k = used_slot(g, node);
        LOOM_ASSERT(k != TensorHashSet::npos);
        if (grad_accs != nullptr && grad_accs[i] != nullptr) {
            g->grad_accs[k] = grad_accs[i];
            g->grads[k]     = grad_accs[i];
        } else if (node->flags & GGML_TENSOR_FLAG_LOSS) {
            // The loss always gets an accumulator: ggml_graph_reset sets it to 1.
            g->grad_accs[k] = ggml_new_tensor(ctx, GGML_TYPE_F32, GGML_MAX_DIMS, node->ne);
            g->grads[k]     = g->grad_accs[k];
        }
        needed[k] = 1;
    }

    static_assert(sizeof(bool) == sizeof(char));
    autodiff::Builder builder(ctx, g, reinterpret_cast<const bool *>(needed.data()));
    for (int i = n_forward - 1; i >= 0; --i) {
        builder.backward(i);
    }
}

ggml_tensor * ggml_graph_get_grad(const ggml_cgraph * g, const ggml_tensor * node) {
    if (g->grads == nullptr) {
        return nullptr;
    }
    const size_t k = used_slot(g, node);
    return k == TensorHashSet::npos ? nullptr : g->grads[k];
}

ggml_tensor * ggml_graph_get_grad_acc(const ggml_cgraph * g, const ggml_tensor * node) {
    if (g->grad_accs == nullptr) {
        return nullptr;
    }
    const size_t k = used_slot(g, node);
    return k == TensorHashSet::npos ? nullptr : g->grad_accs[k];
}

void ggml_graph_reset(ggml_cgraph * g) {
    if (g == nullptr) {
        return;
    }
    LOOM_REQUIRE(g->grads != nullptr, "the graph has no gradients");
    for (int i = 0; i < g->n_nodes; ++i) {
        ggml_tensor * node = g->nodes[i];
        if (node->op == GGML_OP_OPT_STEP_ADAMW) {
            ggml_set_zero(node->src[2]); // first moments
            ggml_set_zero(node->src[3]); // second moments
        }
        ggml_tensor * acc = ggml_graph_get_grad_acc(g, node);
        if (acc == nullptr) {
            continue;
        }
        if (node->flags & GGML_TENSOR_FLAG_LOSS) {
            LOOM_REQUIRE(acc->type == GGML_TYPE_F32 && ggml_is_scalar(acc),
                         "gradient of loss %s must be an f32 scalar", describe(acc).text);
            set_scalar_one(acc);
        } else {
            ggml_set_zero(acc);
        }
    }
}

} // extern "C"
