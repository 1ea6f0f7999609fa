// The CPU's row for each operator: which kernel computes it, which types and
// layouts it takes, how much scratch it needs. compute.cpp reads only this
// table; a family of kernels adds its operators here (or through an
// add_*_kernels function of its own file).

#include <cstring>

#include "backends/cpu/kernels/kernels.h"
#include "core/common.h"
#include "core/custom.h"

namespace loom::cpu {

namespace {

// Note [Custom ops] in core/custom.h.
void compute_custom(const ComputeParams & p, ggml_tensor * node) {
    CustomOpParams cp;
    std::memcpy(&cp, node->op_params, sizeof(cp));
    const int nth = cp.n_tasks == GGML_N_TASKS_MAX ? p.nth : std::min(cp.n_tasks, p.nth);
    if (p.ith >= nth) {
        return;
    }
    switch (node->op) {
        case GGML_OP_MAP_CUSTOM1: cp.fn.f1(node, node->src[0], p.ith, nth, cp.userdata); break;
        case GGML_OP_MAP_CUSTOM2: cp.fn.f2(node, node->src[0], node->src[1], p.ith, nth, cp.userdata); break;
        case GGML_OP_MAP_CUSTOM3:
            cp.fn.f3(node, node->src[0], node->src[1], node->src[2], p.ith, nth, cp.userdata);
            break;
        default: cp.fn.f(node, p.ith, nth, cp.userdata); break;
    }
}

bool any_types(const ggml_tensor *) {
    return true; // the function's business
}

OpKernels make_table() {
    OpKernels t{};
    auto      set = [&t](std::initializer_list<ggml_op> ops, OpKernel k) {
        for (ggml_op op : ops) t[op] = k;
    };
    set({GGML_OP_ADD, GGML_OP_SUB, GGML_OP_MUL, GGML_OP_DIV, GGML_OP_ADD1}, {compute_binary, supports_binary, nullptr});
    set({GGML_OP_SQR, GGML_OP_SQRT, GGML_OP_LOG, GGML_OP_SIN, GGML_OP_COS, GGML_OP_SCALE, GGML_OP_UNARY},
        {compute_unary, supports_unary, nullptr});
    set({GGML_OP_GLU}, {compute_glu, supports_glu, nullptr});
    set({GGML_OP_SUM, GGML_OP_SUM_ROWS, GGML_OP_MEAN, GGML_OP_ARGMAX},
        {compute_reduce, supports_reduce, work_size_reduce});
    set({GGML_OP_DUP, GGML_OP_CPY, GGML_OP_CONT, GGML_OP_REPEAT, GGML_OP_CONCAT, GGML_OP_GET_ROWS, GGML_OP_SET_ROWS},
        {compute_copy, supports_copy, work_size_copy});
    set({GGML_OP_NORM, GGML_OP_RMS_NORM, GGML_OP_GROUP_NORM}, {compute_norm, supports_norm, nullptr});
    set({GGML_OP_SOFT_MAX, GGML_OP_DIAG_MASK_INF, GGML_OP_DIAG_MASK_ZERO}, {compute_softmax, supports_softmax, work_size_softmax});
    set({GGML_OP_ROPE, GGML_OP_ROPE_BACK}, {compute_rope, supports_rope, work_size_rope});
    set({GGML_OP_ARGSORT, GGML_OP_TOP_K}, {compute_sort, supports_sort, work_size_sort});
    set({GGML_OP_MUL_MAT, GGML_OP_OUT_PROD}, {compute_matmul, supports_matmul, work_size_matmul});
    set({GGML_OP_FLASH_ATTN_EXT}, {compute_attention, supports_attention, work_size_attention});
    set({GGML_OP_MAP_CUSTOM1, GGML_OP_MAP_CUSTOM2, GGML_OP_MAP_CUSTOM3, GGML_OP_CUSTOM},
        {compute_custom, any_types, nullptr});
    // Families with a table function of their own.
    add_conv_kernels(t);
    add_fill_kernels(t);
    add_layout_kernels(t);
    add_matmul_id_kernels(t);
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
