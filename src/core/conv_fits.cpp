// The shape rules of the convolution family's nodes (conv_fits.h), from
// the constructors of ops_conv.cpp.

#include "conv_fits.h"

#include "common.h"

namespace loom {

namespace {

// Sizes are computed wide: a deserialized node may carry any parameters,
// and no product of a tensor's sizes with them overflows 128 bits.
using wide = __int128;

int64_t param(const ggml_tensor * t, int i) {
    return op_param_i32(t, i);
}

bool positive(const ggml_tensor * op, std::initializer_list<int> idx) {
    for (int i : idx) {
        if (param(op, i) <= 0) {
            return false;
        }
    }
    return true;
}

// Output length of a convolution along one axis, with ops_conv.cpp's formula.
wide conv_out(wide in, wide k, wide s, wide p, wide d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

bool same_ne(const ggml_tensor * t, wide n0, wide n1, wide n2, wide n3) {
    return t->ne[0] == n0 && t->ne[1] == n1 && t->ne[2] == n2 && t->ne[3] == n3;
}

bool im2col_fits(const ggml_tensor * op, const ggml_tensor * a, const ggml_tensor * b) {
    if (!positive(op, {0, 4})) {
        return false;
    }
    const wide ow = conv_out(b->ne[0], a->ne[0], param(op, 0), param(op, 2), param(op, 4));
    if (param(op, 6) != 1) {
        return a->ne[1] == b->ne[1] && b->ne[3] == 1 && same_ne(op, wide(a->ne[0]) * a->ne[1], ow, b->ne[2], 1);
    }
    if (!positive(op, {1, 5})) {
        return false;
    }
    const wide oh = conv_out(b->ne[1], a->ne[1], param(op, 1), param(op, 3), param(op, 5));
    return a->ne[2] == b->ne[2] && same_ne(op, wide(a->ne[0]) * a->ne[1] * a->ne[2], ow, oh, b->ne[3]);
}

// The output sizes of a 3D window (op_params s0..s2, p0..p2, d0..d2 first).
void out_3d(const ggml_tensor * op, const ggml_tensor * a, const ggml_tensor * b, wide o[3]) {
    for (int i = 0; i < 3; ++i) {
        o[i] = conv_out(b->ne[i], a->ne[i], param(op, i), param(op, 3 + i), param(op, 6 + i));
    }
}

bool pool_fits(const ggml_tensor * op, const ggml_tensor * a) {
    const bool    two_d = op->op == GGML_OP_POOL_2D;
    const int64_t kind  = param(op, 0);
    const bool    steps = two_d ? positive(op, {1, 2, 3, 4}) : positive(op, {1, 2});
    if ((kind != GGML_OP_POOL_MAX && kind != GGML_OP_POOL_AVG) || !steps) {
        return false;
    }
    if (!two_d) {
        const int64_t p0 = param(op, 3);
        return p0 >= 0 && same_ne(op, (wide(a->ne[0]) + 2 * wide(p0) - param(op, 1)) / param(op, 2) + 1, a->ne[1], a->ne[2], a->ne[3]);
    }
    // The size comes from a fractional padding (ggml_pool_2d); the windows
    // are bounds-checked, so only the other dimensions are tied to a.
    return param(op, 5) >= 0 && param(op, 6) >= 0 && op->ne[2] == a->ne[2] && op->ne[3] == a->ne[3];
}

bool upscale_fits(const ggml_tensor * op) {
    const int64_t flags = param(op, 0);
    const int64_t mode  = flags & 0xFF;
    return flags >= 0 && mode < GGML_SCALE_MODE_COUNT &&
           (!(flags & GGML_SCALE_FLAG_ANTIALIAS) || mode == GGML_SCALE_MODE_BILINEAR);
}

} // namespace

bool is_conv_family(ggml_op op) {
    switch (op) {
        case GGML_OP_IM2COL:
        case GGML_OP_IM2COL_3D:
        case GGML_OP_COL2IM_1D:
        case GGML_OP_CONV_2D:
        case GGML_OP_CONV_3D:
        case GGML_OP_CONV_2D_DW:
        case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_CONV_TRANSPOSE_2D:
        case GGML_OP_POOL_1D:
        case GGML_OP_POOL_2D:
        case GGML_OP_UPSCALE:
        case GGML_OP_WIN_PART:
        case GGML_OP_WIN_UNPART:
        case GGML_OP_GET_REL_POS:
        case GGML_OP_ADD_REL_POS: return true;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC:
        case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG:
        case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM:
        case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM:
        case GGML_OP_RMS_NORM_BACK: case GGML_OP_GROUP_NORM: case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_SET: case GGML_OP_CPY:
        case GGML_OP_CONT: case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
        case GGML_OP_GET_ROWS: case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG:
        case GGML_OP_DIAG_MASK_INF: case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX: case GGML_OP_SOFT_MAX_BACK:
        case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP: case GGML_OP_IM2COL_BACK:
        case GGML_OP_POOL_2D_BACK: case GGML_OP_PAD: case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL:
        case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING: case GGML_OP_ARGSORT: case GGML_OP_TOP_K:
        case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT:
        case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_RWKV_WKV6:
        case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET:
        case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST:
        case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3:
        case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK:
        case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU: case GGML_OP_COUNT: return false;
    }
    return false;
}

bool conv_family_fits(const ggml_tensor * op) {
    if (!is_conv_family(op->op)) {
        return false;
    }
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    const bool two_sources = op->op != GGML_OP_COL2IM_1D && op->op != GGML_OP_POOL_1D && op->op != GGML_OP_POOL_2D &&
                             op->op != GGML_OP_UPSCALE && op->op != GGML_OP_WIN_PART &&
                             op->op != GGML_OP_WIN_UNPART && op->op != GGML_OP_GET_REL_POS;
    if (a == nullptr || (two_sources && b == nullptr)) {
        return false;
    }
    switch (op->op) {
        case GGML_OP_IM2COL: return im2col_fits(op, a, b);
        case GGML_OP_IM2COL_3D: {
            const int64_t ic = param(op, 9);
            // floor(ne3 / IC) batches, as the constructor makes (channels
            // past the last whole batch are not read; none: an empty result).
            if (!positive(op, {0, 1, 2, 6, 7, 8, 9})) {
                return false;
            }
            wide o[3];
            out_3d(op, a, b, o);
            return same_ne(op, wide(a->ne[0]) * a->ne[1] * a->ne[2] * ic, o[0], o[1], o[2] * (b->ne[3] / ic));
        }
        case GGML_OP_CONV_2D:
            return positive(op, {0, 1, 4, 5}) && a->ne[2] == b->ne[2] &&
                   same_ne(op, conv_out(b->ne[0], a->ne[0], param(op, 0), param(op, 2), param(op, 4)),
                           conv_out(b->ne[1], a->ne[1], param(op, 1), param(op, 3), param(op, 5)), a->ne[3], b->ne[3]);
        case GGML_OP_CONV_3D: {
            const int64_t c = param(op, 9), n = param(op, 10), oc = param(op, 11);
            if (!positive(op, {0, 1, 2, 6, 7, 8, 9, 10, 11}) || a->ne[3] != wide(c) * oc || b->ne[3] != wide(c) * n) {
                return false;
            }
            wide o[3];
            out_3d(op, a, b, o);
            return same_ne(op, o[0], o[1], o[2], wide(oc) * n);
        }
        case GGML_OP_CONV_2D_DW:
            return positive(op, {0, 1, 4, 5}) && a->ne[2] == 1 && a->ne[3] == b->ne[2] &&
                   same_ne(op, conv_out(b->ne[0], a->ne[0], param(op, 0), param(op, 2), param(op, 4)),
                           conv_out(b->ne[1], a->ne[1], param(op, 1), param(op, 3), param(op, 5)), b->ne[2], b->ne[3]);
        case GGML_OP_CONV_TRANSPOSE_1D: {
            const int64_t s = param(op, 0);
            return s > 0 && a->ne[3] == 1 && ggml_is_matrix(b) && a->ne[2] == b->ne[1] &&
                   same_ne(op, wide(b->ne[0] - 1) * s + a->ne[0], a->ne[1], 1, 1);
        }
        case GGML_OP_CONV_TRANSPOSE_2D: {
            const int64_t s = param(op, 0);
            return s > 0 && a->ne[3] == b->ne[2] &&
                   same_ne(op, wide(b->ne[0] - 1) * s + a->ne[0], wide(b->ne[1] - 1) * s + a->ne[1], a->ne[2], b->ne[3]);
        }
        case GGML_OP_COL2IM_1D: {
            const int64_t s = param(op, 0), oc = param(op, 1), pad = param(op, 2);
            if (s <= 0 || oc <= 0 || pad < 0 || a->ne[0] % oc != 0 || !ggml_is_matrix(a)) {
                return false;
            }
            const int64_t k = a->ne[0] / oc;
            return k > 0 && same_ne(op, wide(a->ne[1] - 1) * s + k - 2 * wide(pad), oc, 1, 1);
        }
        case GGML_OP_POOL_1D:
        case GGML_OP_POOL_2D: return pool_fits(op, a);
        case GGML_OP_UPSCALE: return upscale_fits(op);
        case GGML_OP_WIN_PART: {
            const int64_t npx = param(op, 0), npy = param(op, 1), w = param(op, 2);
            return npx > 0 && npy > 0 && w > 0 && a->ne[3] == 1 && same_ne(op, a->ne[0], w, w, wide(npx) * npy);
        }
        case GGML_OP_WIN_UNPART: {
            const int64_t w = param(op, 0);
            if (w <= 0 || op->ne[3] != 1) {
                return false;
            }
            const wide windows = ((wide(op->ne[1]) + w - 1) / w) * ((wide(op->ne[2]) + w - 1) / w);
            return op->ne[0] == a->ne[0] && a->ne[1] == w && a->ne[2] == w && a->ne[3] >= windows;
        }
        case GGML_OP_GET_REL_POS:
            return op->ne[1] == op->ne[2] && a->ne[1] == 2 * wide(op->ne[1]) - 1 && same_ne(op, a->ne[0], op->ne[1], op->ne[1], 1);
        case GGML_OP_ADD_REL_POS: {
            const ggml_tensor * pw = op->src[1];
            const ggml_tensor * ph = op->src[2];
            return pw != nullptr && ph != nullptr && ggml_are_same_shape(pw, ph) && ggml_are_same_shape(a, op) &&
                   ggml_is_contiguous(a) && ggml_is_contiguous(op) && ggml_is_contiguous(pw) &&
                   ggml_is_contiguous(ph) && pw->ne[3] == a->ne[2] && wide(pw->ne[0]) * pw->ne[0] == a->ne[0] &&
                   wide(pw->ne[1]) * pw->ne[2] == a->ne[1];
        }
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC:
        case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG:
        case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM:
        case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM:
        case GGML_OP_RMS_NORM_BACK: case GGML_OP_GROUP_NORM: case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_SET: case GGML_OP_CPY:
        case GGML_OP_CONT: case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
        case GGML_OP_GET_ROWS: case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG:
        case GGML_OP_DIAG_MASK_INF: case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX: case GGML_OP_SOFT_MAX_BACK:
        case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP: case GGML_OP_IM2COL_BACK:
        case GGML_OP_POOL_2D_BACK: case GGML_OP_PAD: case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL:
        case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING: case GGML_OP_ARGSORT: case GGML_OP_TOP_K:
        case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT:
        case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_RWKV_WKV6:
        case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET:
        case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST:
        case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3:
        case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK:
        case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU: case GGML_OP_COUNT: return false;
    }
    return false;
}

} // namespace loom
