// Which ops the shaders compute, and the dispatch of each: the shader, its
// parameter block and the workgroup counts. A node's shapes, types and op
// params are its operator's rule (core/fits.h); supports() adds the types,
// layouts and sizes the shaders take.

#include <algorithm>
#include <cmath>

#include "core/common.h"
#include "core/fits.h"
#include "core/indices.h"
#include "vk_impl.h"

namespace loom::vk {

namespace {

constexpr uint32_t k_max_groups = 65535; // the minimum maxComputeWorkGroupCount Vulkan guarantees

bool is_float(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16;
}

// The block types of shaders/quants.glsl.
bool is_quant(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_Q4_1:
        case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K:
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K:
        case GGML_TYPE_IQ4_NL:
        case GGML_TYPE_IQ4_XS: return true;
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_Q8_1: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S:
        case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64:
        case GGML_TYPE_IQ1_M: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT: return false;
    }
    return false;
}

// Rows of whole blocks along dim 0 whose 2-byte scales the shaders can read.
bool whole_blocks(const ggml_tensor * a) {
    return a->nb[0] == ggml_type_size(a->type) && a->ne[0] % ggml_blck_size(a->type) == 0 && a->nb[1] % 2 == 0;
}

// Shapes, strides and byte spans the 32-bit parameters can hold.
bool fits(const ggml_tensor * t) {
    if (t == nullptr) {
        return true;
    }
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (t->ne[i] < 0 || uint64_t(t->ne[i]) > UINT32_MAX || t->nb[i] > UINT32_MAX) {
            return false;
        }
    }
    return ggml_nbytes(t) <= UINT32_MAX;
}

// Strides the shaders' arrays can follow: whole elements of 2- and 4-byte
// types (every ggml layout of them), even byte counts for quantized blocks
// (their F16 scales are read as halves of 32-bit words).
bool elements_aligned(const ggml_tensor * t) {
    const size_t ts   = ggml_type_size(t->type);
    const size_t unit = ggml_is_quantized(t->type) ? 2 : std::min<size_t>(ts, 4);
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (t->nb[i] % unit != 0) {
            return false;
        }
    }
    return true;
}

bool supports_mul_mat(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    if (!(is_float(a->type) || is_quant(a->type)) || b->type != GGML_TYPE_F32 || op->type != GGML_TYPE_F32) {
        return false;
    }
    // Rows of src0 run along dim 0 (not transposed); quantized rows are
    // whole blocks with 2-byte aligned scales.
    if (a->nb[0] != ggml_type_size(a->type) || (is_quant(a->type) && !whole_blocks(a))) {
        return false;
    }
    // The tiled path's grid.
    const int64_t tiles_m = (a->ne[1] + 31) / 32, tiles_n = (b->ne[1] + 31) / 32;
    return tiles_m <= k_max_groups && tiles_n <= k_max_groups && b->ne[2] * b->ne[3] <= k_max_groups;
}

bool supports_rope(const ggml_tensor * op) {
    const ggml_tensor * src    = op->src[0];
    const int           n_dims = op_param_i32(op, 1);
    const int           mode   = op_param_i32(op, 2);
    // Rows rotated from their first value only (no ggml_rope_set_offset).
    if ((mode != GGML_ROPE_TYPE_NORMAL && mode != GGML_ROPE_TYPE_NEOX) || op_param_i32(op, 15) != 0) {
        return false;
    }
    // Positions, frequency factors and the range of n_dims are the rule's.
    return is_float(src->type) && src->ne[0] % 2 == 0 && n_dims > 0;
}

bool supports_get_rows(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    if (a->type == GGML_TYPE_I32) {
        return op->type == GGML_TYPE_I32;
    }
    if (!(is_float(a->type) || is_quant(a->type)) || op->type != GGML_TYPE_F32) {
        return false;
    }
    return !is_quant(a->type) || whole_blocks(a);
}

// The unary.comp variant of a unary op; 0 for those it lacks.
uint32_t unary_code(ggml_unary_op u) {
    if (unary_info(u) == nullptr) {
        return 0;
    }
    switch (u) {
        case GGML_UNARY_OP_SILU: return 2;
        case GGML_UNARY_OP_GELU: return 3;
        case GGML_UNARY_OP_NEG: return 4;
        case GGML_UNARY_OP_RELU: return 5;
        case GGML_UNARY_OP_TANH: return 6;
        case GGML_UNARY_OP_SIGMOID: return 7;
        case GGML_UNARY_OP_GELU_QUICK: return 8;
        case GGML_UNARY_OP_EXP: return 11;
        case GGML_UNARY_OP_ABS:
        case GGML_UNARY_OP_SGN:
        case GGML_UNARY_OP_STEP:
        case GGML_UNARY_OP_ELU:
        case GGML_UNARY_OP_HARDSWISH:
        case GGML_UNARY_OP_HARDSIGMOID:
        case GGML_UNARY_OP_EXPM1:
        case GGML_UNARY_OP_SOFTPLUS:
        case GGML_UNARY_OP_GELU_ERF:
        case GGML_UNARY_OP_XIELU:
        case GGML_UNARY_OP_FLOOR:
        case GGML_UNARY_OP_CEIL:
        case GGML_UNARY_OP_ROUND:
        case GGML_UNARY_OP_TRUNC:
        case GGML_UNARY_OP_COUNT: return 0;
    }
    return 0;
}

// Spreads n workgroups over x and y (x at most k_max_groups); the shaders
// rebuild the index with group_index().
void linear_groups(uint64_t n, uint32_t groups[3]) {
    const uint64_t x = std::min<uint64_t>(std::max<uint64_t>(n, 1), k_max_groups);
    groups[0]        = uint32_t(x);
    groups[1]        = uint32_t((n + x - 1) / x);
    groups[2]        = 1;
}

} // namespace

bool supports(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_NONE:
        case GGML_OP_VIEW:
        case GGML_OP_RESHAPE:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: return true;
        case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC: case GGML_OP_SUB:
        case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG: case GGML_OP_SIN:
        case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM: case GGML_OP_MEAN:
        case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM:
        case GGML_OP_RMS_NORM_BACK: case GGML_OP_GROUP_NORM: case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_SET: case GGML_OP_CPY:
        case GGML_OP_CONT: case GGML_OP_GET_ROWS: case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG:
        case GGML_OP_DIAG_MASK_INF: case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX: case GGML_OP_SOFT_MAX_BACK:
        case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D:
        case GGML_OP_CONV_2D: case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D:
        case GGML_OP_POOL_1D: case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD:
        case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING:
        case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL:
        case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN:
        case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS:
        case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI:
        case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB:
        case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS:
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU:
        case GGML_OP_COUNT: break;
    }
    if (!node_fits(op, nullptr) || !fits(op)) {
        return false;
    }
    for (const ggml_tensor * s : op->src) {
        if (s != nullptr && (!fits(s) || !elements_aligned(s))) {
            return false;
        }
    }
    if (!elements_aligned(op)) {
        return false;
    }
    const ggml_tensor * a = op->src[0];
    switch (op->op) {
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV:
            return is_float(a->type) && is_float(op->src[1]->type) && is_float(op->type);
        case GGML_OP_SCALE:
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
            return is_float(a->type);
        case GGML_OP_UNARY:
            return unary_code(ggml_get_unary_op(op)) != 0 && is_float(a->type);
        case GGML_OP_GLU:
            // The shader computes the units up to GEGLU_QUICK.
            return op->op_params[0] <= GGML_GLU_OP_GEGLU_QUICK && is_float(a->type);
        case GGML_OP_CPY:
        case GGML_OP_DUP:
        case GGML_OP_CONT:
            return is_float(a->type) && is_float(op->type);
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
            return a->type == GGML_TYPE_F32;
        case GGML_OP_SOFT_MAX:
            return op->src[2] == nullptr; // no attention sinks
        case GGML_OP_ROPE: return supports_rope(op);
        case GGML_OP_GET_ROWS: return supports_get_rows(op);
        // F32/F16 rows into an F32/F16 target; I64 indices are read by
        // their low words (rows past 2^32 do not fit the parameters anyway).
        case GGML_OP_SET_ROWS: return is_float(op->type);
        case GGML_OP_MUL_MAT: return supports_mul_mat(op);
        case GGML_OP_NONE: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC: case GGML_OP_LOG: case GGML_OP_SIN:
        case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM: case GGML_OP_MEAN:
        case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_RMS_NORM_BACK: case GGML_OP_GROUP_NORM:
        case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SET: case GGML_OP_RESHAPE:
        case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE: case GGML_OP_GET_ROWS_BACK: case GGML_OP_DIAG:
        case GGML_OP_DIAG_MASK_INF: case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX_BACK: case GGML_OP_ROPE_BACK:
        case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK:
        case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D: case GGML_OP_CONV_2D: case GGML_OP_CONV_3D:
        case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D: case GGML_OP_POOL_1D: case GGML_OP_POOL_2D:
        case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD: case GGML_OP_PAD_REFLECT_1D:
        case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING: case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT:
        case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART:
        case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6:
        case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET:
        case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST:
        case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM:
        case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW:
        case GGML_OP_OPT_STEP_SGD: case GGML_OP_COUNT: return false;
    }
    return false;
}

Dispatch plan(const ggml_tensor * node) {
    Dispatch d;
    const ggml_tensor * a = node->src[0];
    d.slot[0]             = a;
    d.slot[3]             = node;
    Params & p            = d.params;
    p.n                   = uint32_t(ggml_nelements(node));
    const uint64_t elementwise_groups = (uint64_t(p.n) + 255) / 256;

    switch (node->op) {
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV:
            d.shader  = Shader::binary;
            d.slot[1] = node->src[1];
            p.op      = node->op == GGML_OP_ADD ? 0 : node->op == GGML_OP_SUB ? 1 : node->op == GGML_OP_MUL ? 2 : 3;
            linear_groups(elementwise_groups, d.groups);
            break;
        case GGML_OP_SCALE:
            d.shader = Shader::unary;
            p.op     = 1;
            p.fp[0]  = op_param_f32(node, 0);
            p.fp[1]  = op_param_f32(node, 1);
            linear_groups(elementwise_groups, d.groups);
            break;
        case GGML_OP_UNARY:
            d.shader = Shader::unary;
            p.op     = unary_code(ggml_get_unary_op(node));
            linear_groups(elementwise_groups, d.groups);
            break;
        case GGML_OP_GLU: {
            const bool    split   = node->src[1] != nullptr;
            const bool    swapped = op_param_i32(node, 1) != 0;
            const int64_t nc      = node->ne[0];
            d.shader              = Shader::glu;
            d.slot[1]             = node->src[1];
            p.op                  = uint32_t(op_param_i32(node, 0));
            p.ip[0]               = split || !swapped ? 0 : uint32_t(nc);
            p.ip[1]               = split || swapped ? 0 : uint32_t(nc);
            p.ip[2]               = split ? 1 : 0;
            p.fp[0]               = op_param_f32(node, 2);
            p.fp[1]               = op_param_f32(node, 3);
            linear_groups(elementwise_groups, d.groups);
            break;
        }
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
            d.shader = Shader::unary;
            p.op     = node->op == GGML_OP_SQR ? 9 : 10;
            linear_groups(elementwise_groups, d.groups);
            break;
        case GGML_OP_CPY:
        case GGML_OP_DUP:
        case GGML_OP_CONT:
            d.shader = Shader::unary;
            p.op     = 0;
            linear_groups(elementwise_groups, d.groups);
            break;
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
            d.shader = Shader::norm;
            p.op     = node->op == GGML_OP_NORM ? 0 : 1;
            p.fp[0]  = op_param_f32(node, 0);
            p.n      = uint32_t(ggml_nrows(a));
            linear_groups(p.n, d.groups);
            break;
        case GGML_OP_SOFT_MAX: {
            d.shader              = Shader::softmax;
            d.slot[1]             = node->src[1];
            const float max_bias  = op_param_f32(node, 1);
            const uint32_t n_head = uint32_t(a->ne[2]);
            const uint32_t n_log2 = 1u << uint32_t(std::floor(std::log2(double(std::max<uint32_t>(n_head, 1)))));
            p.fp[0]               = op_param_f32(node, 0);
            p.fp[1]               = max_bias;
            p.fp[2]               = std::pow(2.0f, -max_bias / float(n_log2));
            p.fp[3]               = std::pow(2.0f, -(max_bias / 2.0f) / float(n_log2));
            p.ip[0]               = n_log2;
            p.ip[1]               = node->src[1] != nullptr ? 1 : 0;
            p.n                   = uint32_t(ggml_nrows(a));
            linear_groups(p.n, d.groups);
            break;
        }
        case GGML_OP_ROPE: {
            d.shader               = Shader::rope;
            d.slot[1]              = node->src[1];
            d.slot[2]              = node->src[2];
            const int   n_dims     = op_param_i32(node, 1);
            const int   mode       = op_param_i32(node, 2);
            const int   n_ctx_orig = op_param_i32(node, 4);
            const float freq_base  = op_param_f32(node, 5);
            const float freq_scale = op_param_f32(node, 6);
            const float ext_factor = op_param_f32(node, 7);
            const float attn       = op_param_f32(node, 8);
            float       corr[2];
            ggml_rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, op_param_f32(node, 9), op_param_f32(node, 10),
                                     corr);
            p.ip[0] = uint32_t(n_dims);
            p.ip[1] = mode == GGML_ROPE_TYPE_NEOX ? 1 : 0;
            p.ip[2] = node->src[2] != nullptr ? 1 : 0;
            p.fp[0] = freq_scale;
            p.fp[1] = ext_factor;
            p.fp[2] = ext_factor != 0.0f ? attn * (1.0f + 0.1f * std::log(1.0f / freq_scale)) : attn;
            p.fp[3] = std::pow(freq_base, -2.0f / float(n_dims));
            p.fp[4] = corr[0];
            p.fp[5] = corr[1];
            p.n     = uint32_t(ggml_nelements(a) / 2);
            linear_groups((uint64_t(p.n) + 255) / 256, d.groups);
            break;
        }
        case GGML_OP_GET_ROWS:
            d.shader  = Shader::get_rows;
            d.slot[1] = node->src[1];
            linear_groups(elementwise_groups, d.groups);
            break;
        case GGML_OP_SET_ROWS:
            // One invocation per element of the source rows.
            d.shader  = Shader::set_rows;
            d.slot[1] = node->src[1];
            p.n       = uint32_t(ggml_nelements(a));
            linear_groups((uint64_t(p.n) + 255) / 256, d.groups);
            break;
        case GGML_OP_MUL_MAT: {
            const ggml_tensor * b = node->src[1];
            d.slot[1]             = b;
            if (b->ne[1] <= 4) {
                // One workgroup per row of src0 and batch, for all columns.
                d.shader = Shader::mul_mat_vec;
                p.n      = uint32_t(a->ne[1] * b->ne[2] * b->ne[3]);
                linear_groups(p.n, d.groups);
            } else {
                d.shader    = Shader::mul_mat_tiled;
                d.groups[0] = uint32_t((a->ne[1] + 31) / 32);
                d.groups[1] = uint32_t((b->ne[1] + 31) / 32);
                d.groups[2] = uint32_t(b->ne[2] * b->ne[3]);
            }
            break;
        }
        case GGML_OP_NONE: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC: case GGML_OP_LOG: case GGML_OP_SIN:
        case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM: case GGML_OP_MEAN:
        case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_RMS_NORM_BACK: case GGML_OP_GROUP_NORM:
        case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SET: case GGML_OP_RESHAPE:
        case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE: case GGML_OP_GET_ROWS_BACK: case GGML_OP_DIAG:
        case GGML_OP_DIAG_MASK_INF: case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX_BACK: case GGML_OP_ROPE_BACK:
        case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK:
        case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D: case GGML_OP_CONV_2D: case GGML_OP_CONV_3D:
        case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D: case GGML_OP_POOL_1D: case GGML_OP_POOL_2D:
        case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD: case GGML_OP_PAD_REFLECT_1D:
        case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING: case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT:
        case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART:
        case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6:
        case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET:
        case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST:
        case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM:
        case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW:
        case GGML_OP_OPT_STEP_SGD: case GGML_OP_COUNT: LOOM_ASSERT(false && "plan: unsupported op");
    }

    for (int s = 0; s < k_tensor_slots; ++s) {
        const ggml_tensor * t = d.slot[s];
        if (t == nullptr) {
            continue;
        }
        for (int i = 0; i < GGML_MAX_DIMS; ++i) {
            p.ne[4 * s + i] = uint32_t(t->ne[i]);
            p.nb[4 * s + i] = uint32_t(t->nb[i]);
        }
        p.ty[s] = uint32_t(t->type);
    }
    return d;
}

IndexEntry index_entry(const ggml_tensor * node, int src) {
    const ggml_tensor * idx = node->src[src];
    IndexEntry          e{};
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        e.ne[i] = uint32_t(idx->ne[i]);
        e.nb[i] = uint32_t(idx->nb[i]);
    }
    e.type      = uint32_t(idx->type);
    e.limit     = uint32_t(index_limit(node)); // a dimension of a tensor that fits()
    e.count     = uint32_t(ggml_nelements(idx));
    e.bad_index = UINT32_MAX;
    return e;
}

Dispatch plan_check(uint32_t n_elements, uint32_t n_entries) {
    Dispatch d;
    d.shader       = Shader::check_indices;
    d.params.n     = n_elements;
    d.params.ip[0] = n_entries;
    linear_groups((uint64_t(n_elements) + 255) / 256, d.groups);
    return d;
}

} // namespace loom::vk
