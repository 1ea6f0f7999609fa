#pragma once

// Reverse-mode differentiation of a graph. The gradients live in the graph's
// grads / grad_accs arrays, indexed like the visited hash set: the gradient of
// the tensor in slot i is grads[i]. A gradient accumulator (grad_accs[i]) is a
// tensor the caller keeps between evaluations; a gradient with an accumulator
// is built in place on it.

#include <cstddef>

#include "graph.h"

namespace loom::autodiff {

// Builds the graph of one backward step: the gradients of the graph's node at
// position i_node with respect to its sources, added to those sources'
// gradients. needed[slot] says whether the tensor in that hash slot needs one.
class Builder {
public:
    Builder(ggml_context * ctx, ggml_cgraph * graph, const bool * needed) : ctx_(ctx), g_(graph), needed_(needed) {}

    void backward(int i_node);

private:
    // The hash slot of t, or npos when t is not in the graph or needs no gradient.
    size_t slot_needing_grad(const ggml_tensor * t) const;

    // grad(src) += d, or grad(src) = d when it has none yet.
    void add(size_t slot, ggml_tensor * d);
    // grad(src) -= d.
    void sub(size_t slot, ggml_tensor * d);
    // grad(src) += d broadcast over all of src (d is a scalar).
    void add1(size_t slot, ggml_tensor * d);
    // grad(src)[view] += d for the view of src with strides nb1..nb3 and offset.
    void acc(size_t slot, ggml_tensor * d, size_t nb1, size_t nb2, size_t nb3, size_t offset);
    void finish(size_t slot);

    void unary(ggml_tensor * t, ggml_tensor * grad, size_t s0);
    void train_op(ggml_tensor * t, ggml_tensor * grad, size_t s0, size_t s1, size_t s2);

    ggml_context * ctx_;
    ggml_cgraph *  g_;
    const bool *   needed_;
};

} // namespace loom::autodiff
