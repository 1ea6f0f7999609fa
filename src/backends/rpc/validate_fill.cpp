// Shape rules of the element-wise, shape and fill operators for nodes that
// come from the network (Note [RPC trust boundary] in validate.h): the
// node's shape and type against its sources and its op params, so that a
// kernel iterating over the node's shape stays inside its sources and its
// result. ACC and SET write into a view of the result: the view must lie
// inside it.

#include <cmath>

#include "core/common.h"
#include "validate.h"

namespace loom::rpc {

namespace {

bool same_shape_and_type(const ggml_tensor * n, const ggml_tensor * a) {
    return n->type == a->type && ggml_are_same_shape(n, a);
}

// The view's strides and offset are 32-bit and src1's dimensions up to
// 2^40: the last byte is summed in 128 bits, where it cannot wrap around.
bool write_view_inside(const ggml_tensor * n, const ggml_tensor * b) {
    using u128 = unsigned __int128;
    if (ggml_nelements(b) == 0) {
        return true;
    }
    const u128 es    = ggml_type_size(n->type);
    u128       last  = uint32_t(n->op_params[3]);
    const u128 nb[4] = {es, uint32_t(n->op_params[0]), uint32_t(n->op_params[1]), uint32_t(n->op_params[2])};
    for (int d = 0; d < 4; ++d) {
        last += u128(b->ne[d] - 1) * nb[d];
    }
    return last + es <= ggml_nbytes(n);
}

} // namespace

bool fill_family_rule(const ggml_tensor * n, const char ** rule) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    *rule                 = nullptr;
    auto check            = [rule](bool ok, const char * text) {
        if (!ok) {
            *rule = text;
        }
        return true;
    };
    switch (n->op) {
        case GGML_OP_CLAMP:
        case GGML_OP_LEAKY_RELU:
        case GGML_OP_FILL:
        case GGML_OP_CUMSUM:
        case GGML_OP_L2_NORM:
            return check(same_shape_and_type(n, a), "the node must have src0's shape and type");
        case GGML_OP_DIAG_MASK_ZERO:
            return check(same_shape_and_type(n, a) && n->op_params[0] >= 0,
                         "the node must have src0's shape and type, n_past not negative");
        case GGML_OP_TRI:
            return check(same_shape_and_type(n, a) && a->ne[0] == a->ne[1] && n->op_params[0] >= 0 &&
                             n->op_params[0] <= GGML_TRI_TYPE_LOWER,
                         "a known triangle of square matrices of src0's shape and type");
        case GGML_OP_ARANGE: {
            const float start = op_param_f32(n, 0);
            const float stop  = op_param_f32(n, 1);
            const float step  = op_param_f32(n, 2);
            const bool  ok    = n->type == GGML_TYPE_F32 && stop > start && step > 0.0f &&
                            float(n->ne[0]) == std::ceil((stop - start) / step) && ggml_nrows(n) == 1;
            return check(ok, "an F32 row of ceil((stop - start) / step) values");
        }
        case GGML_OP_COUNT_EQUAL:
            return check(ggml_are_same_shape(a, b) && n->type == GGML_TYPE_I64 && ggml_nelements(n) == 1,
                         "sources of one shape, one I64 result");
        case GGML_OP_DIAG:
            return check(n->type == a->type && a->ne[1] == 1 && n->ne[0] == a->ne[0] && n->ne[1] == a->ne[0] &&
                             n->ne[2] == a->ne[2] && n->ne[3] == a->ne[3],
                         "a row of src0 as the diagonal of a matrix of its type");
        case GGML_OP_ACC:
        case GGML_OP_SET:
            return check(same_shape_and_type(n, a) && b->type == a->type && ggml_nelements(b) <= ggml_nelements(a) &&
                             write_view_inside(n, b),
                         "src1 written into a view that lies inside a node of src0's shape and type");
        case GGML_OP_REPEAT_BACK: {
            bool ok = n->type == a->type;
            for (int d = 0; d < 4; ++d) {
                ok = ok && n->ne[d] > 0 && a->ne[d] % n->ne[d] == 0;
            }
            return check(ok, "the node must repeat into src0, of its type");
        }
        case GGML_OP_ADD_ID: {
            const ggml_tensor * ids = n->src[2];
            return check(same_shape_and_type(n, a) && b->ne[0] == a->ne[0] && ids->type == GGML_TYPE_I32 &&
                             ids->ne[0] == a->ne[1] && ids->ne[1] == a->ne[2],
                         "rows of src1 of src0's length, I32 ids for dimensions 1 and 2 of src0");
        }
        case GGML_OP_ROLL: {
            bool ok = same_shape_and_type(n, a);
            for (int d = 0; d < 4; ++d) {
                ok = ok && n->op_params[d] > -a->ne[d] && n->op_params[d] < a->ne[d];
            }
            return check(ok, "shifts below the sizes of src0, the node of src0's shape and type");
        }
        case GGML_OP_PAD: {
            bool ok = n->type == a->type;
            for (int d = 0; d < 4; ++d) {
                ok = ok && n->ne[d] == a->ne[d] + int64_t(n->op_params[2 * d]) + int64_t(n->op_params[2 * d + 1]) &&
                     (n->op_params[8] == 0 || a->ne[d] > 0);
            }
            return check(ok, "the node must be src0 padded as its op params say");
        }
        case GGML_OP_PAD_REFLECT_1D: {
            const int64_t p0 = n->op_params[0];
            const int64_t p1 = n->op_params[1];
            return check(n->type == a->type && p0 >= 0 && p1 >= 0 && p0 < a->ne[0] && p1 < a->ne[0] &&
                             n->ne[0] == a->ne[0] + p0 + p1 && n->ne[1] == a->ne[1] && n->ne[2] == a->ne[2] &&
                             n->ne[3] == a->ne[3],
                         "padding below the row length, the node src0 padded");
        }
        case GGML_OP_TIMESTEP_EMBEDDING:
            return check(n->type == GGML_TYPE_F32 && n->op_params[0] > 0 && n->op_params[1] > 0 &&
                             n->ne[0] == n->op_params[0] && n->ne[1] == a->ne[0] && n->ne[2] == 1 && n->ne[3] == 1,
                         "an F32 [dim, n] embedding of n timesteps");
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD1: case GGML_OP_SUB: case GGML_OP_MUL:
        case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG: case GGML_OP_SIN: case GGML_OP_COS:
        case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_REPEAT:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM:
        case GGML_OP_RMS_NORM_BACK: case GGML_OP_GROUP_NORM: case GGML_OP_MUL_MAT: case GGML_OP_MUL_MAT_ID:
        case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_CPY: case GGML_OP_CONT: case GGML_OP_RESHAPE:
        case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE: case GGML_OP_GET_ROWS:
        case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG_MASK_INF: case GGML_OP_SOFT_MAX:
        case GGML_OP_SOFT_MAX_BACK: case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D:
        case GGML_OP_CONV_2D: case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D:
        case GGML_OP_POOL_1D: case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE:
        case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK:
        case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART:
        case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN:
        case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER:
        case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_UNARY:
        case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM:
        case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW:
        case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU: case GGML_OP_COUNT: return false;
    }
    return false;
}

} // namespace loom::rpc
