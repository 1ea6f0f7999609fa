// Rules taken from the constructors themselves (Note [Checked constructors]
// in core/common.h): for the operators listed here, a node from the network
// is accepted when its op's constructor, called again on the node's sources
// and op params, keeps its preconditions and returns a tensor of the node's
// type, shape, strides, op params and sources. The constructor's checks are
// what the kernels rely on, so they are not written a second time here.

#include <cstring>
#include <string>

#include "core/common.h"
#include "validate.h"

namespace loom::rpc {

namespace {

using Replay = ggml_tensor * (*) (ggml_context * ctx, const ggml_tensor * node, ggml_tensor * const * s);

ggml_tensor * replay_mul_mat_id(ggml_context * c, const ggml_tensor *, ggml_tensor * const * s) {
    return ggml_mul_mat_id(c, s[0], s[1], s[2]);
}
ggml_tensor * replay_ssm_conv(ggml_context * c, const ggml_tensor *, ggml_tensor * const * s) {
    return ggml_ssm_conv(c, s[0], s[1]);
}
ggml_tensor * replay_ssm_scan(ggml_context * c, const ggml_tensor * n, ggml_tensor * const * s) {
    return ggml_ssm_scan(c, s[0], s[1], s[2], s[3], s[4], s[5], s[6], op_param_i32(n, 0));
}
ggml_tensor * replay_rwkv_wkv6(ggml_context * c, const ggml_tensor *, ggml_tensor * const * s) {
    return ggml_rwkv_wkv6(c, s[0], s[1], s[2], s[3], s[4], s[5]);
}
ggml_tensor * replay_gated_linear_attn(ggml_context * c, const ggml_tensor * n, ggml_tensor * const * s) {
    return ggml_gated_linear_attn(c, s[0], s[1], s[2], s[3], s[4], op_param_f32(n, 0));
}
ggml_tensor * replay_rwkv_wkv7(ggml_context * c, const ggml_tensor *, ggml_tensor * const * s) {
    return ggml_rwkv_wkv7(c, s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
}
ggml_tensor * replay_solve_tri(ggml_context * c, const ggml_tensor *, ggml_tensor * const * s) {
    return ggml_solve_tri(c, s[0], s[1], true, true, false);
}
ggml_tensor * replay_gated_delta_net(ggml_context * c, const ggml_tensor * n, ggml_tensor * const * s) {
    return ggml_gated_delta_net(c, s[0], s[1], s[2], s[3], s[4], s[5], op_param_i32(n, 0));
}
ggml_tensor * replay_lightning_indexer(ggml_context * c, const ggml_tensor *, ggml_tensor * const * s) {
    return ggml_lightning_indexer(c, s[0], s[1], s[2], s[3]);
}
ggml_tensor * replay_dsv4_hc_comb(ggml_context * c, const ggml_tensor * n, ggml_tensor * const * s) {
    return ggml_dsv4_hc_comb(c, s[0], s[1], s[2], op_param_f32(n, 0), op_param_i32(n, 1));
}
ggml_tensor * replay_dsv4_hc_pre(ggml_context * c, const ggml_tensor * n, ggml_tensor * const * s) {
    return op_param_i32(n, 1) != 0 ? ggml_dsv4_hc_pre_gated(c, s[0], s[1], op_param_f32(n, 0))
                                   : ggml_dsv4_hc_pre(c, s[0], s[1]);
}
ggml_tensor * replay_dsv4_hc_post(ggml_context * c, const ggml_tensor *, ggml_tensor * const * s) {
    return ggml_dsv4_hc_post(c, s[0], s[1], s[2], s[3]);
}

Replay replay_of(ggml_op op) {
    switch (op) {
        case GGML_OP_MUL_MAT_ID: return replay_mul_mat_id;
        case GGML_OP_SSM_CONV: return replay_ssm_conv;
        case GGML_OP_SSM_SCAN: return replay_ssm_scan;
        case GGML_OP_RWKV_WKV6: return replay_rwkv_wkv6;
        case GGML_OP_GATED_LINEAR_ATTN: return replay_gated_linear_attn;
        case GGML_OP_RWKV_WKV7: return replay_rwkv_wkv7;
        case GGML_OP_SOLVE_TRI: return replay_solve_tri;
        case GGML_OP_GATED_DELTA_NET: return replay_gated_delta_net;
        case GGML_OP_LIGHTNING_INDEXER: return replay_lightning_indexer;
        case GGML_OP_DSV4_HC_COMB: return replay_dsv4_hc_comb;
        case GGML_OP_DSV4_HC_PRE: return replay_dsv4_hc_pre;
        case GGML_OP_DSV4_HC_POST: return replay_dsv4_hc_post;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC:
        case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG:
        case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM:
        case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM:
        case GGML_OP_RMS_NORM_BACK: case GGML_OP_GROUP_NORM: case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT:
        case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_SET: case GGML_OP_CPY: case GGML_OP_CONT:
        case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE: case GGML_OP_GET_ROWS:
        case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG: case GGML_OP_DIAG_MASK_INF:
        case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX: case GGML_OP_SOFT_MAX_BACK: case GGML_OP_ROPE:
        case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL:
        case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D: case GGML_OP_CONV_2D:
        case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D: case GGML_OP_POOL_1D:
        case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD:
        case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING:
        case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL:
        case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART:
        case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS:
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU:
        case GGML_OP_COUNT: return nullptr;
    }
    return nullptr;
}

// What differs between the node and the constructor's tensor; empty when nothing.
std::string difference(const ggml_tensor * n, ggml_tensor * r) {
    if (r->op != n->op) return "the constructor builds another op";
    if (r->type != n->type) return std::string("the result is ") + ggml_type_name(r->type) + ", not " +
                                   ggml_type_name(n->type);
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        if (r->ne[d] != n->ne[d]) return "the result's shape differs from its sources' in dimension " + std::to_string(d);
        if (r->nb[d] != n->nb[d]) return "the result's strides differ in dimension " + std::to_string(d);
    }
    if (n->op == GGML_OP_MUL_MAT_ID) {
        // The precisions a caller sets after the constructor
        // (ggml_prec_set_acc, ggml_prec_set_src), where they are precisions.
        for (int slot : {0, 3}) {
            const int32_t p = n->op_params[slot];
            if (p != GGML_PREC_DEFAULT && p != GGML_PREC_F32) return "a precision that is not one";
        }
        ggml_prec_set_acc(r, ggml_prec(n->op_params[0]));
        ggml_prec_set_src(r, ggml_prec(n->op_params[3]), 1);
    }
    if (std::memcmp(r->op_params, n->op_params, sizeof(n->op_params)) != 0) return "op params the constructor does not set";
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        if (r->src[i] != n->src[i]) return "source " + std::to_string(i) + " is not where the constructor puts it";
    }
    return {};
}

} // namespace

bool has_constructor_rule(ggml_op op) {
    return replay_of(op) != nullptr;
}

bool constructor_rule(const ggml_tensor * n, std::string * why) {
    const Replay replay = replay_of(n->op);
    if (replay == nullptr) {
        *why = std::string(ggml_op_desc(n)) + ": op not accepted by the RPC server";
        return false;
    }
    ggml_init_params ip{ggml_tensor_overhead() * 8, nullptr, true};
    ggml_context *   ctx = ggml_init(ip);
    if (ctx == nullptr) {
        *why = "out of memory";
        return false;
    }
    ggml_tensor * src[GGML_MAX_SRC];
    for (int i = 0; i < GGML_MAX_SRC; ++i) src[i] = n->src[i];
    std::string diff;
    try {
        RequireThrows  trap;
        ggml_tensor *  r = replay(ctx, n, src);
        diff             = difference(n, r);
    } catch (const RequireFailure & f) {
        diff = f.message;
    }
    ggml_free(ctx);
    if (!diff.empty()) {
        *why = std::string(ggml_op_desc(n)) + ": " + diff;
        return false;
    }
    return true;
}

} // namespace loom::rpc
