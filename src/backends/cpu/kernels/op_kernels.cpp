// The CPU's row for each operator: which kernel computes it, which types and
// layouts it takes, how much scratch it needs. compute.cpp reads only this
// table; each family of kernels fills its operators' rows through the
// add_*_kernels function of its own file, the custom operators' rows are
// here.

#include <cstring>

#include "backends/cpu/kernels/kernels.h"
#include "core/common.h"
#include "core/custom.h"

namespace loom::cpu {

namespace {

// Note [Custom ops] in core/custom.h: the function runs on min(n_tasks,
// threads) threads; call passes it the sources its type takes.
using CustomCall = void (*)(const CustomOpParams & cp, ggml_tensor * node, int ith, int nth);

template <CustomCall call>
void compute_custom(const ComputeParams & p, ggml_tensor * node) {
    CustomOpParams cp;
    std::memcpy(&cp, node->op_params, sizeof(cp));
    const int nth = cp.n_tasks == GGML_N_TASKS_MAX ? p.nth : std::min(cp.n_tasks, p.nth);
    if (p.ith >= nth) {
        return;
    }
    call(cp, node, p.ith, nth);
}

void call_custom1(const CustomOpParams & cp, ggml_tensor * node, int ith, int nth) {
    cp.fn.f1(node, node->src[0], ith, nth, cp.userdata);
}
void call_custom2(const CustomOpParams & cp, ggml_tensor * node, int ith, int nth) {
    cp.fn.f2(node, node->src[0], node->src[1], ith, nth, cp.userdata);
}
void call_custom3(const CustomOpParams & cp, ggml_tensor * node, int ith, int nth) {
    cp.fn.f3(node, node->src[0], node->src[1], node->src[2], ith, nth, cp.userdata);
}
void call_custom(const CustomOpParams & cp, ggml_tensor * node, int ith, int nth) {
    cp.fn.f(node, ith, nth, cp.userdata);
}

bool any_types(const ggml_tensor *) {
    return true; // the function's business
}

OpKernels make_table() {
    OpKernels t{};
    t[GGML_OP_MAP_CUSTOM1] = {compute_custom<call_custom1>, any_types, nullptr};
    t[GGML_OP_MAP_CUSTOM2] = {compute_custom<call_custom2>, any_types, nullptr};
    t[GGML_OP_MAP_CUSTOM3] = {compute_custom<call_custom3>, any_types, nullptr};
    t[GGML_OP_CUSTOM]      = {compute_custom<call_custom>, any_types, nullptr};
    add_binary_kernels(t);
    add_unary_kernels(t);
    add_reduce_kernels(t);
    add_copy_kernels(t);
    add_norm_kernels(t);
    add_softmax_kernels(t);
    add_rope_kernels(t);
    add_sort_kernels(t);
    add_matmul_kernels(t);
    add_matmul_id_kernels(t);
    add_attention_kernels(t);
    add_conv_kernels(t);
    add_fill_kernels(t);
    add_layout_kernels(t);
    add_ssm_kernels(t);
    add_recurrent_kernels(t);
    add_dsv4_kernels(t);
    add_train_kernels(t);
    add_backward_kernels(t);
    return t;
}

} // namespace

const OpKernel & op_kernel(ggml_op op) {
    static const OpKernels table = make_table();
    static const OpKernel  none{};
    return op >= 0 && op < GGML_OP_COUNT ? table[size_t(op)] : none;
}

} // namespace loom::cpu
