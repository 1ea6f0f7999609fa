#pragma once

// The one description of every operator: its number, name and symbol (as
// ggml's ggml_op_name / ggml_op_symbol give them), how many sources it
// needs and may have, its kind, how its result's elements depend on its
// sources, whether it may be computed in place, whether it has a gradient,
// which sources hold indices, and its rule (fits: which nodes it allows,
// Note [Shape rules] in fits.h); and of every unary and gated linear unit
// operator. Names, the view test, the allocator's in-place reuse, the
// gradients' checks, the meta device's split rules, the constructors', the
// RPC server's and the devices' shape checks, the RPC server's and the CPU's
// index checks, docs/operators.md
// (tools/loom-ops-doc) and the protocol's fingerprint read these tables
// instead of listing operators again; backends keep only what is theirs
// (which kernel computes an operator, which types it takes).

#include <array>
#include <cstdint>
#include <string_view>

#include "fits.h"
#include "ggml.h"

namespace loom {

enum class OpKind : uint8_t {
    none,     // GGML_OP_NONE: a leaf
    compute,  // computes its result from its sources
    view,     // reinterprets src[0]'s memory: nothing to compute
    custom,   // runs a function of the program's (Note [Custom ops])
    training, // a backward or optimizer operator
};

// How each element of the result depends on the sources, where one simple
// rule says it (the meta device splits such operators by it).
enum class OpShape : uint8_t {
    other,       // no simple rule (or one of the operator's own)
    elementwise, // element i from element i of src[0] (and of sources of its shape, or scalars)
    broadcast,   // element i from element i of src[0] and src[1] repeated to src[0]'s shape
    rows,        // row r from the whole row r of src[0]
};

// Facts about an operator: bits of OpInfo::flags.
inline constexpr uint8_t k_op_in_place      = 1u << 0; // may be computed into a source's memory (Note [In-place reuse])
inline constexpr uint8_t k_op_writes_source = 1u << 1; // its result is a source's memory, which it writes (cpy, set_rows)
inline constexpr uint8_t k_op_grad          = 1u << 2; // ggml_build_backward_expand has a rule for it
// Of a unary operator: piecewise constant, so no gradient reaches its source.
inline constexpr uint8_t k_op_constant      = 1u << 3;

// Note [Index sources]
// Some operators read indices from a source's data (get_rows' row numbers,
// mul_mat_id's experts, ssm_scan's state slots). Such an index is data,
// not a caller's precondition: every element of an index source must lie
// in [0, n), n being dimension `dim` of the tensor named by `bound` (a
// source number, or k_bound_node for the node itself). A device that
// computes the operator checks every index before writing anything and
// fails the computation on a bad one; the RPC server checks them before
// computing (docs/errors.md, "Indices read from data").
inline constexpr int8_t k_bound_node = -1;
struct OpIndices {
    uint8_t srcs  = 0; // bit s set: src[s] holds indices (I32 or I64)
    int8_t  bound = 0; // the tensor whose dimension dim bounds them
    uint8_t dim   = 0;
};

struct OpInfo {
    ggml_op      op;
    const char * name;
    const char * symbol;
    uint8_t      min_src; // sources that must be present (src[0..min_src))
    uint8_t      max_src; // sources it may have at most
    OpKind       kind;
    OpFits       fits;    // its rule; nullptr for NONE and the views, which compute nothing
    OpShape      shape   = OpShape::other;
    uint8_t      flags   = 0;  // k_op_*
    OpIndices    indices = {}; // Note [Index sources]
    uint8_t      no_grad = 0;  // bit s set: no gradient flows to src[s] (a shape, indices, positions, a destination)
};

inline constexpr std::array<OpInfo, GGML_OP_COUNT> k_ops = {{
    {GGML_OP_NONE, "NONE", "none", 0, 0, OpKind::none, nullptr},
    {GGML_OP_DUP, "DUP", "x", 1, 1, OpKind::compute, fits_dup, OpShape::other, k_op_grad},
    {GGML_OP_ADD, "ADD", "x+y", 2, 2, OpKind::compute, fits_binary, OpShape::broadcast, k_op_in_place | k_op_grad},
    {GGML_OP_ADD_ID, "ADD_ID", "x[i]+y", 3, 3, OpKind::compute, fits_add_id, OpShape::other, 0, {.srcs = 1u << 2, .bound = 1, .dim = 1}},
    {GGML_OP_ADD1, "ADD1", "x+y", 2, 2, OpKind::compute, fits_add1, OpShape::elementwise, k_op_in_place | k_op_grad},
    {GGML_OP_ACC, "ACC", "view(x,nb,offset)+=y->x", 2, 2, OpKind::compute, fits_write_view, OpShape::other, k_op_grad},
    {GGML_OP_SUB, "SUB", "x-y", 2, 2, OpKind::compute, fits_binary, OpShape::broadcast, k_op_in_place | k_op_grad},
    {GGML_OP_MUL, "MUL", "x*y", 2, 2, OpKind::compute, fits_binary, OpShape::broadcast, k_op_in_place | k_op_grad},
    {GGML_OP_DIV, "DIV", "x/y", 2, 2, OpKind::compute, fits_binary, OpShape::broadcast, k_op_in_place | k_op_grad},
    {GGML_OP_SQR, "SQR", "x^2", 1, 1, OpKind::compute, fits_same, OpShape::elementwise, k_op_in_place | k_op_grad},
    {GGML_OP_SQRT, "SQRT", "√x", 1, 1, OpKind::compute, fits_same, OpShape::elementwise, k_op_in_place | k_op_grad},
    {GGML_OP_LOG, "LOG", "log(x)", 1, 1, OpKind::compute, fits_same, OpShape::elementwise, k_op_in_place | k_op_grad},
    {GGML_OP_SIN, "SIN", "sin(x)", 1, 1, OpKind::compute, fits_same, OpShape::elementwise, k_op_grad},
    {GGML_OP_COS, "COS", "cos(x)", 1, 1, OpKind::compute, fits_same, OpShape::elementwise, k_op_grad},
    {GGML_OP_SUM, "SUM", "Σx", 1, 1, OpKind::compute, fits_sum, OpShape::other, k_op_grad},
    {GGML_OP_SUM_ROWS, "SUM_ROWS", "Σx_k", 1, 1, OpKind::compute, fits_sum_rows, OpShape::rows, k_op_grad},
    {GGML_OP_CUMSUM, "CUMSUM", "cumsum(x)", 1, 1, OpKind::compute, fits_cumsum},
    {GGML_OP_MEAN, "MEAN", "Σx/n", 1, 1, OpKind::compute, fits_sum_rows, OpShape::rows, k_op_grad},
    {GGML_OP_ARGMAX, "ARGMAX", "argmax(x)", 1, 1, OpKind::compute, fits_argmax, OpShape::rows},
    {GGML_OP_COUNT_EQUAL, "COUNT_EQUAL", "count_equal(x)", 2, 2, OpKind::compute, fits_count_equal},
    {GGML_OP_REPEAT, "REPEAT", "repeat(x)", 1, 1, OpKind::compute, fits_repeat, OpShape::other, k_op_grad},
    {GGML_OP_REPEAT_BACK, "REPEAT_BACK", "repeat_back(x)", 1, 1, OpKind::training, fits_repeat_back, OpShape::other, k_op_grad},
    {GGML_OP_CONCAT, "CONCAT", "concat(x, y)", 2, 2, OpKind::compute, fits_concat},
    {GGML_OP_SILU_BACK, "SILU_BACK", "silu_back(x)", 2, 2, OpKind::training, fits_backward_same},
    {GGML_OP_NORM, "NORM", "norm(x)", 1, 1, OpKind::compute, fits_same, OpShape::rows},
    {GGML_OP_RMS_NORM, "RMS_NORM", "rms_norm(x)", 1, 1, OpKind::compute, fits_same, OpShape::rows, k_op_in_place | k_op_grad},
    {GGML_OP_RMS_NORM_BACK, "RMS_NORM_BACK", "rms_norm_back(x)", 2, 2, OpKind::training, fits_backward_same},
    {GGML_OP_GROUP_NORM, "GROUP_NORM", "group_norm(x)", 1, 1, OpKind::compute, fits_group_norm},
    {GGML_OP_L2_NORM, "L2_NORM", "l2_norm(x)", 1, 1, OpKind::compute, fits_l2_norm, OpShape::rows},
    {GGML_OP_MUL_MAT, "MUL_MAT", "X*Y", 2, 2, OpKind::compute, fits_mul_mat, OpShape::other, k_op_grad},
    {GGML_OP_MUL_MAT_ID, "MUL_MAT_ID", "X[i]*Y", 3, 3, OpKind::compute, fits_mul_mat_id, OpShape::other, 0, {.srcs = 1u << 2, .bound = 0, .dim = 2}},
    {GGML_OP_OUT_PROD, "OUT_PROD", "X*Y", 2, 2, OpKind::compute, fits_out_prod},
    {GGML_OP_SCALE, "SCALE", "x*v", 1, 1, OpKind::compute, fits_same, OpShape::elementwise, k_op_in_place | k_op_grad},
    {GGML_OP_SET, "SET", "y-\\>view(x)", 2, 2, OpKind::compute, fits_write_view, OpShape::other, k_op_grad},
    {GGML_OP_CPY, "CPY", "x-\\>y", 2, 2, OpKind::compute, fits_cpy, OpShape::other, k_op_writes_source | k_op_grad, {}, 1u << 1},
    {GGML_OP_CONT, "CONT", "cont(x)", 1, 1, OpKind::compute, fits_dup, OpShape::other, k_op_grad},
    {GGML_OP_RESHAPE, "RESHAPE", "reshape(x)", 1, 1, OpKind::view, nullptr, OpShape::other, k_op_grad},
    {GGML_OP_VIEW, "VIEW", "view(x)", 1, 1, OpKind::view, nullptr, OpShape::other, k_op_grad},
    {GGML_OP_PERMUTE, "PERMUTE", "permute(x)", 1, 1, OpKind::view, nullptr, OpShape::other, k_op_grad},
    {GGML_OP_TRANSPOSE, "TRANSPOSE", "transpose(x)", 1, 1, OpKind::view, nullptr, OpShape::other, k_op_grad},
    {GGML_OP_GET_ROWS, "GET_ROWS", "get_rows(x)", 2, 2, OpKind::compute, fits_get_rows, OpShape::other, k_op_grad, {.srcs = 1u << 1, .bound = 0, .dim = 1}, 1u << 1},
    {GGML_OP_GET_ROWS_BACK, "GET_ROWS_BACK", "get_rows_back(x)", 2, 2, OpKind::training, fits_get_rows_back, OpShape::other, 0, {.srcs = 1u << 1, .bound = k_bound_node, .dim = 1}, 1u << 1},
    {GGML_OP_SET_ROWS, "SET_ROWS", "set_rows(x)", 2, 3, OpKind::compute, fits_set_rows, OpShape::other, k_op_writes_source, {.srcs = 1u << 1, .bound = k_bound_node, .dim = 1}},
    {GGML_OP_DIAG, "DIAG", "diag(x)", 1, 1, OpKind::compute, fits_diag},
    {GGML_OP_DIAG_MASK_INF, "DIAG_MASK_INF", "diag_mask_inf(x)", 1, 1, OpKind::compute, fits_same, OpShape::other, k_op_in_place | k_op_grad},
    {GGML_OP_DIAG_MASK_ZERO, "DIAG_MASK_ZERO", "diag_mask_zero(x)", 1, 1, OpKind::compute, fits_diag_mask_zero, OpShape::other, k_op_grad},
    {GGML_OP_SOFT_MAX, "SOFT_MAX", "soft_max(x)", 1, 3, OpKind::compute, fits_soft_max, OpShape::other, k_op_in_place | k_op_grad},
    {GGML_OP_SOFT_MAX_BACK, "SOFT_MAX_BACK", "soft_max_back(x)", 2, 2, OpKind::training, fits_backward_same},
    {GGML_OP_ROPE, "ROPE", "rope(x)", 2, 3, OpKind::compute, fits_rope, OpShape::other, k_op_in_place | k_op_grad, {}, 1u << 1},
    {GGML_OP_ROPE_BACK, "ROPE_BACK", "rope_back(x)", 2, 3, OpKind::training, fits_rope},
    {GGML_OP_CLAMP, "CLAMP", "clamp(x)", 1, 1, OpKind::compute, fits_same, OpShape::elementwise},
    {GGML_OP_CONV_TRANSPOSE_1D, "CONV_TRANSPOSE_1D", "conv_transpose_1d(x)", 2, 2, OpKind::compute, fits_conv_transpose_1d},
    {GGML_OP_IM2COL, "IM2COL", "im2col(x)", 2, 2, OpKind::compute, fits_im2col, OpShape::other, k_op_grad, {}, 1u << 0},
    {GGML_OP_IM2COL_BACK, "IM2COL_BACK", "im2col_back(x)", 2, 2, OpKind::training, fits_im2col_back, OpShape::other, 0, {}, 1u << 0},
    {GGML_OP_IM2COL_3D, "IM2COL_3D", "im2col_3d(x)", 2, 2, OpKind::compute, fits_im2col_3d},
    {GGML_OP_COL2IM_1D, "COL2IM_1D", "col2im_1d(x)", 1, 1, OpKind::compute, fits_col2im_1d},
    {GGML_OP_CONV_2D, "CONV_2D", "conv_2d(x)", 2, 2, OpKind::compute, fits_conv_2d},
    {GGML_OP_CONV_3D, "CONV_3D", "conv_3d(x)", 2, 2, OpKind::compute, fits_conv_3d},
    {GGML_OP_CONV_2D_DW, "CONV_2D_DW", "conv_2d_dw(x)", 2, 2, OpKind::compute, fits_conv_2d_dw},
    {GGML_OP_CONV_TRANSPOSE_2D, "CONV_TRANSPOSE_2D", "conv_transpose_2d(x)", 2, 2, OpKind::compute, fits_conv_transpose_2d},
    {GGML_OP_POOL_1D, "POOL_1D", "pool_1d(x)", 1, 1, OpKind::compute, fits_pool_1d},
    {GGML_OP_POOL_2D, "POOL_2D", "pool_2d(x)", 1, 1, OpKind::compute, fits_pool_2d, OpShape::other, k_op_grad},
    {GGML_OP_POOL_2D_BACK, "POOL_2D_BACK", "pool_2d_back(x)", 2, 2, OpKind::training, fits_pool_2d_back},
    {GGML_OP_UPSCALE, "UPSCALE", "upscale(x)", 1, 1, OpKind::compute, fits_upscale},
    {GGML_OP_PAD, "PAD", "pad(x)", 1, 1, OpKind::compute, fits_pad},
    {GGML_OP_PAD_REFLECT_1D, "PAD_REFLECT_1D", "pad_reflect_1d(x)", 1, 1, OpKind::compute, fits_pad_reflect_1d},
    {GGML_OP_ROLL, "ROLL", "roll(x)", 1, 1, OpKind::compute, fits_roll},
    {GGML_OP_ARANGE, "ARANGE", "arange(start, stop, step)", 0, 0, OpKind::compute, fits_arange},
    {GGML_OP_TIMESTEP_EMBEDDING, "TIMESTEP_EMBEDDING", "timestep_embedding(timesteps, dim, max_period)", 1, 1, OpKind::compute, fits_timestep_embedding},
    {GGML_OP_ARGSORT, "ARGSORT", "argsort(x)", 1, 1, OpKind::compute, fits_argsort},
    {GGML_OP_TOP_K, "TOP_K", "top_k(x)", 1, 1, OpKind::compute, fits_top_k},
    {GGML_OP_LEAKY_RELU, "LEAKY_RELU", "leaky_relu(x)", 1, 1, OpKind::compute, fits_same, OpShape::elementwise},
    {GGML_OP_TRI, "TRI", "tri(x)", 1, 1, OpKind::compute, fits_tri},
    {GGML_OP_FILL, "FILL", "fill(x, c)", 1, 1, OpKind::compute, fits_fill},
    {GGML_OP_FLASH_ATTN_EXT, "FLASH_ATTN_EXT", "flash_attn_ext(x)", 3, 5, OpKind::compute, fits_flash_attn_ext},
    {GGML_OP_FLASH_ATTN_BACK, "FLASH_ATTN_BACK", "flash_attn_back(x)", 3, 4, OpKind::training, fits_flash_attn_back},
    {GGML_OP_SSM_CONV, "SSM_CONV", "ssm_conv(x)", 2, 2, OpKind::compute, fits_ssm_conv},
    {GGML_OP_SSM_SCAN, "SSM_SCAN", "ssm_scan(x)", 7, 7, OpKind::compute, fits_ssm_scan, OpShape::other, 0, {.srcs = 1u << 6, .bound = 0, .dim = 3}},
    {GGML_OP_WIN_PART, "WIN_PART", "win_part(x)", 1, 1, OpKind::compute, fits_win_part},
    {GGML_OP_WIN_UNPART, "WIN_UNPART", "win_unpart(x)", 1, 1, OpKind::compute, fits_win_unpart},
    {GGML_OP_GET_REL_POS, "GET_REL_POS", "get_rel_pos(x)", 1, 1, OpKind::compute, fits_get_rel_pos},
    {GGML_OP_ADD_REL_POS, "ADD_REL_POS", "add_rel_pos(x)", 3, 3, OpKind::compute, fits_add_rel_pos},
    {GGML_OP_RWKV_WKV6, "RWKV_WKV6", "rwkv_wkv6(k, v, r, tf, td, s)", 6, 6, OpKind::compute, fits_rwkv_wkv6},
    {GGML_OP_GATED_LINEAR_ATTN, "GATED_LINEAR_ATTN", "gated_linear_attn(k, v, q, gate, s)", 5, 5, OpKind::compute, fits_gated_linear_attn},
    {GGML_OP_RWKV_WKV7, "RWKV_WKV7", "rwkv_wkv7(r, w, k, v, a, b, s)", 7, 7, OpKind::compute, fits_rwkv_wkv7},
    {GGML_OP_SOLVE_TRI, "SOLVE_TRI", "A X = B, A triangular, solve X", 2, 2, OpKind::compute, fits_solve_tri},
    {GGML_OP_GATED_DELTA_NET, "GATED_DELTA_NET", "gated_delta_net(q, k, v, g, beta, s)", 6, 6, OpKind::compute, fits_gated_delta_net},
    {GGML_OP_LIGHTNING_INDEXER, "LIGHTNING_INDEXER", "lightning_indexer(q, k, weights, mask)", 3, 4, OpKind::compute, fits_lightning_indexer},
    {GGML_OP_DSV4_HC_COMB, "DSV4_HC_COMB", "dsv4_hc_comb(mixes, scale, base)", 3, 3, OpKind::compute, fits_dsv4_hc_comb},
    {GGML_OP_DSV4_HC_PRE, "DSV4_HC_PRE", "dsv4_hc_pre(x, weights)", 2, 2, OpKind::compute, fits_dsv4_hc_pre},
    {GGML_OP_DSV4_HC_POST, "DSV4_HC_POST", "dsv4_hc_post(x, residual, post, comb)", 3, 4, OpKind::compute, fits_dsv4_hc_post},
    {GGML_OP_UNARY, "UNARY", "unary(x)", 1, 1, OpKind::compute, fits_unary, OpShape::elementwise, k_op_in_place | k_op_grad},
    {GGML_OP_MAP_CUSTOM1, "MAP_CUSTOM1", "map_custom(x)", 1, 1, OpKind::custom, fits_map_custom},
    {GGML_OP_MAP_CUSTOM2, "MAP_CUSTOM2", "map_custom(x,y)", 2, 2, OpKind::custom, fits_map_custom},
    {GGML_OP_MAP_CUSTOM3, "MAP_CUSTOM3", "map_custom(x,y,z)", 3, 3, OpKind::custom, fits_map_custom},
    {GGML_OP_CUSTOM, "CUSTOM", "custom(x)", 0, GGML_MAX_SRC, OpKind::custom, fits_custom},
    {GGML_OP_CROSS_ENTROPY_LOSS, "CROSS_ENTROPY_LOSS", "cross_entropy_loss(x,y)", 2, 2, OpKind::training, fits_cross_entropy_loss, OpShape::other, k_op_grad},
    {GGML_OP_CROSS_ENTROPY_LOSS_BACK, "CROSS_ENTROPY_LOSS_BACK", "cross_entropy_loss_back(x,y)", 3, 3, OpKind::training, fits_cross_entropy_loss_back},
    {GGML_OP_OPT_STEP_ADAMW, "OPT_STEP_ADAMW", "adamw(x)", 5, 5, OpKind::training, fits_opt_step_adamw},
    {GGML_OP_OPT_STEP_SGD, "OPT_STEP_SGD", "sgd(x)", 3, 3, OpKind::training, fits_opt_step_sgd},
    {GGML_OP_GLU, "GLU", "glu(x)", 1, 2, OpKind::compute, fits_glu, OpShape::other, k_op_grad},
}};

// Every row sits at its operator's number.
consteval bool op_table_in_order() {
    for (size_t i = 0; i < k_ops.size(); ++i) {
        const OpInfo & o = k_ops[i];
        if (size_t(o.op) != i || o.max_src < o.min_src || o.max_src > GGML_MAX_SRC) {
            return false;
        }
        // Index sources and the bounding source are sources the op must have.
        if (o.indices.srcs != 0 && ((o.indices.srcs >> o.min_src) != 0 || o.indices.bound >= o.min_src ||
                                    o.indices.bound < k_bound_node || o.indices.dim >= GGML_MAX_DIMS)) {
            return false;
        }
        if ((o.no_grad >> o.max_src) != 0) {
            return false;
        }
    }
    return true;
}
// (That every operator that computes has a rule is tests/test_fits.cpp's
// check: a function's address is no constant expression under the
// sanitizers.)
static_assert(op_table_in_order(), "k_ops: a row is out of place, or its source counts, index sources or sources "
              "without gradient are wrong");

// The description of op; nullptr for a value that is not an operator.
constexpr const OpInfo * op_info(int op) {
    return op >= 0 && op < GGML_OP_COUNT ? &k_ops[size_t(op)] : nullptr;
}

// Ops that only reinterpret their source's memory: nothing to compute.
constexpr bool is_view_op(ggml_op op) {
    const OpInfo * i = op_info(op);
    return i != nullptr && i->kind == OpKind::view;
}

// Whether op has every one of the k_op_* bits in flag.
constexpr bool op_has(ggml_op op, uint8_t flag) {
    const OpInfo * i = op_info(op);
    return i != nullptr && (i->flags & flag) == flag;
}

// How op's result depends on its sources; OpShape::other for a value that
// is not an operator.
constexpr OpShape op_shape(ggml_op op) {
    const OpInfo * i = op_info(op);
    return i != nullptr ? i->shape : OpShape::other;
}

// The sources of op that hold indices (bit s: src[s]); 0 for none.
constexpr uint8_t index_srcs(ggml_op op) {
    const OpInfo * i = op_info(op);
    return i != nullptr ? i->indices.srcs : 0;
}

// The unary operators (GGML_OP_UNARY's op_params[0]) and the gated linear
// units (GGML_OP_GLU's op_params[0]): names as ggml_unary_op_name and
// ggml_glu_op_name give them, and whether they have a gradient (k_op_grad;
// for a gated unit, of the split form; k_op_constant: a gradient of zero).
struct UnaryInfo {
    ggml_unary_op op;
    const char *  name;
    uint8_t       flags = 0;
};
struct GluInfo {
    ggml_glu_op  op;
    const char * name;
    uint8_t      flags = 0;
};

inline constexpr std::array<UnaryInfo, GGML_UNARY_OP_COUNT> k_unary_ops = {{
    {GGML_UNARY_OP_ABS, "ABS", k_op_grad},
    {GGML_UNARY_OP_SGN, "SGN", k_op_grad | k_op_constant},
    {GGML_UNARY_OP_NEG, "NEG", k_op_grad},
    {GGML_UNARY_OP_STEP, "STEP", k_op_grad | k_op_constant},
    {GGML_UNARY_OP_TANH, "TANH"},
    {GGML_UNARY_OP_ELU, "ELU"},
    {GGML_UNARY_OP_RELU, "RELU", k_op_grad},
    {GGML_UNARY_OP_SIGMOID, "SIGMOID"},
    {GGML_UNARY_OP_GELU, "GELU"},
    {GGML_UNARY_OP_GELU_QUICK, "GELU_QUICK"},
    {GGML_UNARY_OP_SILU, "SILU", k_op_grad},
    {GGML_UNARY_OP_HARDSWISH, "HARDSWISH"},
    {GGML_UNARY_OP_HARDSIGMOID, "HARDSIGMOID"},
    {GGML_UNARY_OP_EXP, "EXP", k_op_grad},
    {GGML_UNARY_OP_EXPM1, "EXPM1", k_op_grad},
    {GGML_UNARY_OP_SOFTPLUS, "SOFTPLUS", k_op_grad},
    {GGML_UNARY_OP_GELU_ERF, "GELU_ERF"},
    {GGML_UNARY_OP_XIELU, "XIELU"},
    {GGML_UNARY_OP_FLOOR, "FLOOR"},
    {GGML_UNARY_OP_CEIL, "CEIL"},
    {GGML_UNARY_OP_ROUND, "ROUND"},
    {GGML_UNARY_OP_TRUNC, "TRUNC"},
}};

inline constexpr std::array<GluInfo, GGML_GLU_OP_COUNT> k_glu_ops = {{
    {GGML_GLU_OP_REGLU, "REGLU"},
    {GGML_GLU_OP_GEGLU, "GEGLU"},
    {GGML_GLU_OP_SWIGLU, "SWIGLU", k_op_grad},
    {GGML_GLU_OP_SWIGLU_OAI, "SWIGLU_OAI"},
    {GGML_GLU_OP_GEGLU_ERF, "GEGLU_ERF"},
    {GGML_GLU_OP_GEGLU_QUICK, "GEGLU_QUICK"},
    {GGML_GLU_OP_SWIGLU_CLAMP, "SWIGLU_CLAMP"},
}};

consteval bool unary_tables_in_order() {
    for (size_t i = 0; i < k_unary_ops.size(); ++i) {
        if (size_t(k_unary_ops[i].op) != i) return false;
    }
    for (size_t i = 0; i < k_glu_ops.size(); ++i) {
        if (size_t(k_glu_ops[i].op) != i) return false;
    }
    return true;
}
static_assert(unary_tables_in_order(), "k_unary_ops, k_glu_ops: a row is out of place");

// The descriptions of a unary operator and of a gated linear unit; nullptr
// for a value that is not one.
constexpr const UnaryInfo * unary_info(int op) {
    return op >= 0 && op < GGML_UNARY_OP_COUNT ? &k_unary_ops[size_t(op)] : nullptr;
}
constexpr const GluInfo * glu_info(int op) {
    return op >= 0 && op < GGML_GLU_OP_COUNT ? &k_glu_ops[size_t(op)] : nullptr;
}

// A hash (FNV-1a) of the operators' numbers and names in order: two builds
// whose tables differ give different values. Wire protocols and plugin
// interfaces that carry operator numbers tie their versions to it with a
// static_assert, so renumbering an operator cannot go unnoticed.
consteval uint64_t op_table_fingerprint() {
    uint64_t h    = 0xcbf29ce484222325ull;
    auto     byte = [&h](uint8_t b) {
        h ^= b;
        h *= 0x100000001b3ull;
    };
    for (const OpInfo & i : k_ops) {
        byte(uint8_t(i.op));
        for (char c : std::string_view(i.name)) byte(uint8_t(c));
        byte(0);
    }
    return h;
}

} // namespace loom
