// Op constructors for element-wise functions with parameters (clamp, leaky
// relu, l2 norm), fills (fill, arange, timestep embeddings), masks and
// triangles, running sums, and the ops that write into part of a tensor or
// move its elements (acc, set, repeat_back, add_id, roll, pad).
//
// op_params layouts are ggml 0.25.1's (each constructor says its own). Each
// builds its node, then checks it with its operator's rule (fits_fill.cpp,
// Note [Shape rules] in fits.h).

#include <climits>
#include <cmath>

#include "common.h"
#include "context.h"
#include "fits.h"
#include "types.h"

using namespace loom;

namespace {

ggml_tensor * same_shape(ggml_context * ctx, ggml_tensor * a, bool inplace) {
    return inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
}

// CLAMP: op params [min, max] (f32).
ggml_tensor * clamp_impl(ggml_context * ctx, ggml_tensor * a, float min, float max, bool inplace,
                         const char * caller) {
    ggml_tensor * r         = same_shape(ctx, a, inplace);
    const float   params[2] = {min, max};
    set_op_params(r, params, sizeof(params));
    r->op     = GGML_OP_CLAMP;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

// FILL: op params [c] (f32).
ggml_tensor * fill_impl(ggml_context * ctx, ggml_tensor * a, float c, bool inplace, const char * caller) {
    ggml_tensor * r = same_shape(ctx, a, inplace);
    set_op_param_f32(r, 0, c);
    r->op     = GGML_OP_FILL;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

// L2_NORM: op params [eps] (f32).
ggml_tensor * l2_norm_impl(ggml_context * ctx, ggml_tensor * a, float eps, bool inplace, const char * caller) {
    ggml_tensor * r = same_shape(ctx, a, inplace);
    set_op_param_f32(r, 0, eps);
    r->op     = GGML_OP_L2_NORM;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

// DIAG_MASK_ZERO: op params [n_past].
ggml_tensor * diag_mask_zero_impl(ggml_context * ctx, ggml_tensor * a, int n_past, bool inplace,
                                  const char * caller) {
    ggml_tensor * r = same_shape(ctx, a, inplace);
    set_op_param_i32(r, 0, n_past);
    r->op     = GGML_OP_DIAG_MASK_ZERO;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

// ACC and SET: op params [nb1, nb2, nb3, offset, inplace] (i32 each); the
// rule keeps the view they describe inside a. The arguments must fit the
// op params (not a rule of the node, which holds only what fits).
ggml_tensor * write_view_impl(ggml_context * ctx, ggml_op op, ggml_tensor * a, ggml_tensor * b, size_t nb1,
                              size_t nb2, size_t nb3, size_t offset, bool inplace, const char * caller) {
    LOOM_REQUIRE(nb1 <= INT32_MAX && nb2 <= INT32_MAX && nb3 <= INT32_MAX && offset < (size_t(1) << 30),
                 "called from %s: strides %zu, %zu, %zu or offset %zu too large for the op params", caller, nb1, nb2,
                 nb3, offset);
    ggml_tensor * r         = same_shape(ctx, a, inplace);
    const int32_t params[5] = {int32_t(nb1), int32_t(nb2), int32_t(nb3), int32_t(offset), inplace ? 1 : 0};
    set_op_params(r, params, sizeof(params));
    r->op     = op;
    r->src[0] = a;
    r->src[1] = b;
    require_fits(r, caller);
    return r;
}

ggml_tensor * acc_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
                       size_t offset, bool inplace, const char * caller) {
    return write_view_impl(ctx, GGML_OP_ACC, a, b, nb1, nb2, nb3, offset, inplace, caller);
}

// PAD: op params [lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3, circular].
ggml_tensor * pad_impl(ggml_context * ctx, ggml_tensor * a, const int (&lr)[8], bool circular, const char * caller) {
    int64_t ne[4];
    for (int d = 0; d < 4; ++d) {
        ne[d] = size_or_zero(a->ne[d] + lr[2 * d] + lr[2 * d + 1]);
    }
    ggml_tensor * r = new_tensor_impl(ctx, a->type, 4, ne, nullptr, 0, caller);
    for (int i = 0; i < 8; ++i) {
        set_op_param_i32(r, i, lr[i]);
    }
    set_op_param_i32(r, 8, circular ? 1 : 0);
    r->op     = GGML_OP_PAD;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

} // namespace

extern "C" {

ggml_tensor * ggml_clamp(ggml_context * ctx, ggml_tensor * a, float min, float max) {
    return clamp_impl(ctx, a, min, max, false, __func__);
}
ggml_tensor * ggml_clamp_inplace(ggml_context * ctx, ggml_tensor * a, float min, float max) {
    return clamp_impl(ctx, a, min, max, true, __func__);
}

// LEAKY_RELU: op params [negative_slope] (f32).
ggml_tensor * ggml_leaky_relu(ggml_context * ctx, ggml_tensor * a, float negative_slope, bool inplace) {
    ggml_tensor * r = same_shape(ctx, a, inplace);
    set_op_param_f32(r, 0, negative_slope);
    r->op     = GGML_OP_LEAKY_RELU;
    r->src[0] = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_fill(ggml_context * ctx, ggml_tensor * a, float c) {
    return fill_impl(ctx, a, c, false, __func__);
}
ggml_tensor * ggml_fill_inplace(ggml_context * ctx, ggml_tensor * a, float c) {
    return fill_impl(ctx, a, c, true, __func__);
}

// ARANGE: op params [start, stop, step] (f32); no sources.
ggml_tensor * ggml_arange(ggml_context * ctx, float start, float stop, float step) {
    // A range the rule refuses gets an empty node, for the rule to name.
    const float   n     = std::ceil((stop - start) / step);
    const int64_t steps = stop > start && step > 0.0f && n <= float(INT32_MAX) ? int64_t(n) : 0;
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 1, &steps, nullptr, 0, __func__);
    set_op_param_f32(r, 0, start);
    set_op_param_f32(r, 1, stop);
    set_op_param_f32(r, 2, step);
    r->op = GGML_OP_ARANGE;
    require_fits(r, __func__);
    return r;
}

// TRI: op params [type].
ggml_tensor * ggml_tri(ggml_context * ctx, ggml_tensor * a, ggml_tri_type type) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    set_op_param_i32(r, 0, int32_t(type));
    r->op     = GGML_OP_TRI;
    r->src[0] = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_cumsum(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    r->op           = GGML_OP_CUMSUM;
    r->src[0]       = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_count_equal(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    const int64_t one = 1;
    ggml_tensor * r   = new_tensor_impl(ctx, GGML_TYPE_I64, 1, &one, nullptr, 0, __func__);
    r->op             = GGML_OP_COUNT_EQUAL;
    r->src[0]         = a;
    r->src[1]         = b;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_l2_norm(ggml_context * ctx, ggml_tensor * a, float eps) {
    return l2_norm_impl(ctx, a, eps, false, __func__);
}
ggml_tensor * ggml_l2_norm_inplace(ggml_context * ctx, ggml_tensor * a, float eps) {
    return l2_norm_impl(ctx, a, eps, true, __func__);
}

ggml_tensor * ggml_diag(ggml_context * ctx, ggml_tensor * a) {
    const int64_t ne[4] = {a->ne[0], a->ne[0], a->ne[2], a->ne[3]};
    ggml_tensor * r     = new_tensor_impl(ctx, a->type, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_DIAG;
    r->src[0]           = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_diag_mask_zero(ggml_context * ctx, ggml_tensor * a, int n_past) {
    return diag_mask_zero_impl(ctx, a, n_past, false, __func__);
}
ggml_tensor * ggml_diag_mask_zero_inplace(ggml_context * ctx, ggml_tensor * a, int n_past) {
    return diag_mask_zero_impl(ctx, a, n_past, true, __func__);
}

ggml_tensor * ggml_acc(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
                       size_t offset) {
    return acc_impl(ctx, a, b, nb1, nb2, nb3, offset, false, __func__);
}
ggml_tensor * ggml_acc_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2,
                               size_t nb3, size_t offset) {
    return acc_impl(ctx, a, b, nb1, nb2, nb3, offset, true, __func__);
}

ggml_tensor * ggml_set(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
                       size_t offset) {
    return write_view_impl(ctx, GGML_OP_SET, a, b, nb1, nb2, nb3, offset, false, __func__);
}
ggml_tensor * ggml_set_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2,
                               size_t nb3, size_t offset) {
    return write_view_impl(ctx, GGML_OP_SET, a, b, nb1, nb2, nb3, offset, true, __func__);
}
ggml_tensor * ggml_set_1d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t offset) {
    return write_view_impl(ctx, GGML_OP_SET, a, b, a->nb[1], a->nb[2], a->nb[3], offset, false, __func__);
}
ggml_tensor * ggml_set_1d_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t offset) {
    return write_view_impl(ctx, GGML_OP_SET, a, b, a->nb[1], a->nb[2], a->nb[3], offset, true, __func__);
}
ggml_tensor * ggml_set_2d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t offset) {
    return write_view_impl(ctx, GGML_OP_SET, a, b, nb1, a->nb[2], a->nb[3], offset, false, __func__);
}
ggml_tensor * ggml_set_2d_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t offset) {
    return write_view_impl(ctx, GGML_OP_SET, a, b, nb1, a->nb[2], a->nb[3], offset, true, __func__);
}

ggml_tensor * ggml_repeat_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    ggml_tensor * r = new_tensor_impl(ctx, a->type, GGML_MAX_DIMS, b->ne, nullptr, 0, __func__);
    r->op           = GGML_OP_REPEAT_BACK;
    r->src[0]       = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_add_id(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * ids) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    r->op           = GGML_OP_ADD_ID;
    r->src[0]       = a;
    r->src[1]       = b;
    r->src[2]       = ids;
    require_fits(r, __func__);
    return r;
}

// ROLL: op params [shift0, shift1, shift2, shift3].
ggml_tensor * ggml_roll(ggml_context * ctx, ggml_tensor * a, int shift0, int shift1, int shift2, int shift3) {
    const int     shifts[4] = {shift0, shift1, shift2, shift3};
    ggml_tensor * r         = ggml_dup_tensor(ctx, a);
    for (int d = 0; d < 4; ++d) {
        set_op_param_i32(r, d, shifts[d]);
    }
    r->op     = GGML_OP_ROLL;
    r->src[0] = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_pad(ggml_context * ctx, ggml_tensor * a, int p0, int p1, int p2, int p3) {
    const int lr[8] = {0, p0, 0, p1, 0, p2, 0, p3};
    return pad_impl(ctx, a, lr, false, __func__);
}
ggml_tensor * ggml_pad_ext(ggml_context * ctx, ggml_tensor * a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2,
                           int lp3, int rp3) {
    const int lr[8] = {lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3};
    return pad_impl(ctx, a, lr, false, __func__);
}
ggml_tensor * ggml_pad_circular(ggml_context * ctx, ggml_tensor * a, int p0, int p1, int p2, int p3) {
    const int lr[8] = {0, p0, 0, p1, 0, p2, 0, p3};
    return pad_impl(ctx, a, lr, true, __func__);
}
ggml_tensor * ggml_pad_ext_circular(ggml_context * ctx, ggml_tensor * a, int lp0, int rp0, int lp1, int rp1, int lp2,
                                    int rp2, int lp3, int rp3) {
    const int lr[8] = {lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3};
    return pad_impl(ctx, a, lr, true, __func__);
}

// PAD_REFLECT_1D: op params [p0, p1].
ggml_tensor * ggml_pad_reflect_1d(ggml_context * ctx, ggml_tensor * a, int p0, int p1) {
    const int64_t ne[4] = {size_or_zero(a->ne[0] + p0 + p1), a->ne[1], a->ne[2], a->ne[3]};
    ggml_tensor * r     = new_tensor_impl(ctx, a->type, 4, ne, nullptr, 0, __func__);
    set_op_param_i32(r, 0, p0);
    set_op_param_i32(r, 1, p1);
    r->op     = GGML_OP_PAD_REFLECT_1D;
    r->src[0] = a;
    require_fits(r, __func__);
    return r;
}

// TIMESTEP_EMBEDDING: op params [dim, max_period].
ggml_tensor * ggml_timestep_embedding(ggml_context * ctx, ggml_tensor * timesteps, int dim, int max_period) {
    const int64_t ne[2] = {size_or_zero(dim), timesteps->ne[0]};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 2, ne, nullptr, 0, __func__);
    set_op_param_i32(r, 0, dim);
    set_op_param_i32(r, 1, max_period);
    r->op     = GGML_OP_TIMESTEP_EMBEDDING;
    r->src[0] = timesteps;
    require_fits(r, __func__);
    return r;
}

// Precision and hints of other operators' nodes, in the op_params slots
// ggml 0.25.1 gives them.
bool ggml_prec_set_acc(ggml_tensor * a, ggml_prec prec) {
    switch (a->op) {
        case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID: set_op_param_i32(a, 0, int32_t(prec)); return true;
        case GGML_OP_FLASH_ATTN_EXT: set_op_param_i32(a, 3, int32_t(prec)); return true;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC:
        case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG:
        case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM:
        case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM:
        case GGML_OP_RMS_NORM_BACK: case GGML_OP_GROUP_NORM: case GGML_OP_L2_NORM: case GGML_OP_OUT_PROD:
        case GGML_OP_SCALE: case GGML_OP_SET: case GGML_OP_CPY: case GGML_OP_CONT: case GGML_OP_RESHAPE:
        case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE: case GGML_OP_GET_ROWS:
        case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG: case GGML_OP_DIAG_MASK_INF:
        case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX: case GGML_OP_SOFT_MAX_BACK: case GGML_OP_ROPE:
        case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL:
        case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D: case GGML_OP_CONV_2D:
        case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D: case GGML_OP_POOL_1D:
        case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD:
        case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING:
        case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL:
        case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART:
        case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6:
        case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET:
        case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST:
        case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3:
        case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK:
        case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU: case GGML_OP_COUNT: return false;
    }
    return false;
}

bool ggml_prec_set_src(ggml_tensor * a, ggml_prec prec, int idx) {
    LOOM_REQUIRE(idx >= 0 && idx < GGML_MAX_SRC, "source index %d of %s is not below %d", idx, describe(a).text,
                 GGML_MAX_SRC);
    if ((a->op != GGML_OP_MUL_MAT && a->op != GGML_OP_MUL_MAT_ID) || idx != 1) {
        return false;
    }
    set_op_param_i32(a, 2 + idx, int32_t(prec));
    return true;
}

void ggml_mul_mat_set_hint(ggml_tensor * a, ggml_op_hint hint) {
    LOOM_REQUIRE(a->op == GGML_OP_MUL_MAT, "%s is not a mul_mat", describe(a).text);
    set_op_param_i32(a, 1, int32_t(hint));
}

ggml_tensor * ggml_argsort_top_k(ggml_context * ctx, ggml_tensor * a, int k) {
    LOOM_REQUIRE(k >= 0 && k <= a->ne[0], "k = %d is not within the row length of %s", k, describe(a).text);
    ggml_tensor * sorted = ggml_argsort(ctx, a, GGML_SORT_ORDER_DESC);
    return ggml_view_4d(ctx, sorted, k, sorted->ne[1], sorted->ne[2], sorted->ne[3], sorted->nb[1], sorted->nb[2],
                        sorted->nb[3], 0);
}

} // extern "C"
