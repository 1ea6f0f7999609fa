// Shape rules of the backward operators, the loss and the optimizer steps
// for nodes that come from the network (Note [RPC trust boundary] in
// validate.h): the node's shape and type against its sources and its op
// params, so that a kernel iterating over the node's shape stays inside its
// sources and its result. GET_ROWS_BACK's indices are checked with every
// index source (check_indices).
// The optimizer steps write their parameter (their node is a view of it)
// and AdamW its moments; rebuild_graph counts those among what a graph writes.

#include "core/common.h"
#include "validate.h"

namespace loom::rpc {

namespace {

bool float_type(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16;
}

bool same_shape_and_type(const ggml_tensor * n, const ggml_tensor * a) {
    return n->type == a->type && ggml_are_same_shape(n, a);
}

// Window sizes, strides and paddings a kernel can loop over without
// overflowing its int arithmetic.
constexpr int32_t k_max_window = 1 << 16;

bool in_window_range(int32_t v, int32_t lo) {
    return v >= lo && v <= k_max_window;
}

bool im2col_back_fits(const ggml_tensor * n) {
    const ggml_tensor * grad  = n->src[0];
    const ggml_tensor * kern  = n->src[1];
    const int32_t *     p     = n->op_params;
    const bool          two_d = p[6] == 1;
    if ((p[6] != 0 && p[6] != 1) || !in_window_range(p[0], 1) || !in_window_range(p[2], -k_max_window) ||
        !in_window_range(p[4], 1) ||
        (two_d && (!in_window_range(p[1], 1) || !in_window_range(p[3], -k_max_window) || !in_window_range(p[5], 1)))) {
        return false;
    }
    const int64_t kw = kern->ne[0], kh = two_d ? kern->ne[1] : 1;
    const int64_t ic = two_d ? n->ne[2] : n->ne[1];
    const int64_t nb = two_d ? n->ne[3] : n->ne[2];
    if (kw > k_max_window || kh > k_max_window) {
        return false;
    }
    const int64_t ow = (n->ne[0] + 2 * int64_t(p[2]) - int64_t(p[4]) * (kw - 1) - 1) / p[0] + 1;
    const int64_t oh = two_d ? (n->ne[1] + 2 * int64_t(p[3]) - int64_t(p[5]) * (kh - 1) - 1) / p[1] + 1 : 1;
    return two_d ? (grad->ne[0] == ic * kh * kw && grad->ne[1] == ow && grad->ne[2] == oh && grad->ne[3] == nb)
                 : (grad->ne[0] == ic * kw && grad->ne[1] == ow && grad->ne[2] == nb && grad->ne[3] == 1 &&
                    n->ne[3] == 1);
}

} // namespace

bool backward_family_rule(const ggml_tensor * n, const char ** rule) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    const ggml_tensor * c = n->src[2];
    *rule                 = nullptr;
    auto check            = [rule](bool ok, const char * text) {
        if (!ok) {
            *rule = text;
        }
        return true;
    };
    switch (n->op) {
        case GGML_OP_SILU_BACK:
        case GGML_OP_RMS_NORM_BACK:
        case GGML_OP_SOFT_MAX_BACK:
            return check(float_type(a->type) && same_shape_and_type(n, a) && same_shape_and_type(b, a),
                         "gradient, input and node of one shape and float type");
        case GGML_OP_CROSS_ENTROPY_LOSS:
            return check(a->type == GGML_TYPE_F32 && same_shape_and_type(b, a) && n->type == GGML_TYPE_F32 &&
                             ggml_is_scalar(n),
                         "F32 logits and labels of one shape, a scalar F32 node");
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK:
            return check(a->type == GGML_TYPE_F32 && ggml_is_scalar(a) && b->type == GGML_TYPE_F32 &&
                             same_shape_and_type(c, b) && same_shape_and_type(n, b),
                         "a scalar F32 gradient, F32 logits, labels and node of one shape");
        case GGML_OP_OPT_STEP_ADAMW:
            // It writes its moments (src[2], src[3]) too: rebuild_graph counts
            // them among what the graph writes.
            return check(a->type == GGML_TYPE_F32 && same_shape_and_type(n, a) && same_shape_and_type(b, a) &&
                             same_shape_and_type(c, a) && same_shape_and_type(n->src[3], a) &&
                             n->src[4]->type == GGML_TYPE_F32 && ggml_nelements(n->src[4]) == 7,
                         "F32 parameter, gradient, moments and node of one shape, 7 F32 hyperparameters");
        case GGML_OP_OPT_STEP_SGD:
            return check(a->type == GGML_TYPE_F32 && same_shape_and_type(n, a) && same_shape_and_type(b, a) &&
                             c->type == GGML_TYPE_F32 && ggml_nelements(c) == 2,
                         "F32 parameter, gradient and node of one shape, 2 F32 hyperparameters");
        case GGML_OP_GET_ROWS_BACK:
            return check(float_type(a->type) && ggml_is_matrix(a) && b->type == GGML_TYPE_I32 && ggml_is_vector(b) &&
                             b->ne[0] <= a->ne[1] && n->type == GGML_TYPE_F32 && ggml_is_matrix(n) &&
                             n->ne[0] == a->ne[0],
                         "a gradient matrix with a row for each I32 index, an F32 matrix node of its row length");
        case GGML_OP_POOL_2D_BACK: {
            const int32_t * p = n->op_params;
            return check(a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32 && same_shape_and_type(n, b) &&
                             a->ne[2] == n->ne[2] && a->ne[3] == n->ne[3] &&
                             (p[0] == GGML_OP_POOL_MAX || p[0] == GGML_OP_POOL_AVG) && in_window_range(p[1], 1) &&
                             in_window_range(p[2], 1) && in_window_range(p[3], 1) && in_window_range(p[4], 1) &&
                             in_window_range(p[5], -k_max_window) && in_window_range(p[6], -k_max_window),
                         "F32 gradient and input, the node shaped as the input, a known pool with windows, "
                         "strides and paddings in range");
        }
        case GGML_OP_IM2COL_BACK:
            return check(a->type == GGML_TYPE_F32 && n->type == GGML_TYPE_F32 && im2col_back_fits(n),
                         "an F32 gradient shaped as im2col's result for the node's shape, kernel and op params");
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC:
        case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG:
        case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM:
        case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_NORM: case GGML_OP_RMS_NORM: case GGML_OP_GROUP_NORM: case GGML_OP_L2_NORM:
        case GGML_OP_MUL_MAT: case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_SET:
        case GGML_OP_CPY: case GGML_OP_CONT: case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: case GGML_OP_GET_ROWS: case GGML_OP_SET_ROWS: case GGML_OP_DIAG:
        case GGML_OP_DIAG_MASK_INF: case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX: case GGML_OP_ROPE:
        case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL:
        case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D: case GGML_OP_CONV_2D: case GGML_OP_CONV_3D:
        case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D: case GGML_OP_POOL_1D: case GGML_OP_POOL_2D:
        case GGML_OP_UPSCALE: case GGML_OP_PAD: case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE:
        case GGML_OP_TIMESTEP_EMBEDDING: case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU:
        case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK:
        case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART:
        case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN:
        case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER:
        case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_UNARY:
        case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM:
        case GGML_OP_GLU: case GGML_OP_COUNT: return false;
    }
    return false;
}

} // namespace loom::rpc
