// ARGSORT and TOP_K over the rows of an F32 tensor.
//
// Orders are total and deterministic: equal values keep index order, and NaN
// ranks above every number (last in ascending order, first in descending),
// so std::sort's strict-weak-ordering requirement holds for any input. The
// sorts used (introsort, heap-based partial sort) do not allocate; the
// per-thread scratch comes from the work buffer.

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backends/cpu/kernels/kernels.h"
#include "core/common.h"

namespace loom::cpu {
namespace {

inline bool less_total(float a, float b) {
    if (std::isnan(a)) {
        return false;
    }
    if (std::isnan(b)) {
        return true;
    }
    return a < b;
}

template <bool descending>
struct Before {
    const float * v;
    bool          operator()(int32_t i, int32_t j) const {
        const float a = v[i], b = v[j];
        const bool  lt = descending ? less_total(b, a) : less_total(a, b);
        const bool  gt = descending ? less_total(a, b) : less_total(b, a);
        return lt || (!gt && i < j);
    }
};

// Scratch of one thread: a copy of the row as contiguous floats, then the
// candidate indices (TOP_K only), each rounded to a cache line so threads
// never share one.
size_t scratch_bytes(int64_t ne00) {
    return align_up(size_t(ne00) * sizeof(float), 64) + align_up(size_t(ne00) * sizeof(int32_t), 64);
}

const char * row_of(const ggml_tensor * t, int64_t ir) {
    const int64_t i1 = ir % t->ne[1];
    const int64_t i2 = (ir / t->ne[1]) % t->ne[2];
    const int64_t i3 = ir / (t->ne[1] * t->ne[2]);
    return static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

void compute_rows(const ComputeParams & p, ggml_tensor * dst, bool top_k) {
    const ggml_tensor * src  = dst->src[0];
    const int64_t       ne00 = src->ne[0];
    const size_t        need = scratch_bytes(ne00);
    LOOM_ASSERT(p.wdata != nullptr && p.wsize >= need * size_t(p.nth));

    char *    mine   = static_cast<char *>(p.wdata) + need * size_t(p.ith);
    float *   values = reinterpret_cast<float *>(mine);
    int32_t * cand   = reinterpret_cast<int32_t *>(mine + align_up(size_t(ne00) * sizeof(float), 64));

    const bool descending = top_k || op_param_i32(dst, 0) == GGML_SORT_ORDER_DESC;
    const int64_t k       = dst->ne[0];

    const Range rr = split_range(ggml_nrows(src), p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        const char * x = row_of(src, ir);
        for (int64_t i = 0; i < ne00; ++i) {
            std::memcpy(&values[i], x + size_t(i) * src->nb[0], sizeof(float));
        }
        // ARGSORT sorts in the output row itself; TOP_K needs all ne00 candidates.
        int32_t * idx = top_k ? cand : reinterpret_cast<int32_t *>(const_cast<char *>(row_of(dst, ir)));
        std::iota(idx, idx + ne00, int32_t(0));
        if (top_k) {
            std::partial_sort(idx, idx + k, idx + ne00, Before<true>{values});
            std::memcpy(const_cast<char *>(row_of(dst, ir)), idx, size_t(k) * sizeof(int32_t));
        } else if (descending) {
            std::sort(idx, idx + ne00, Before<true>{values});
        } else {
            std::sort(idx, idx + ne00, Before<false>{values});
        }
    }
}

} // namespace

void compute_sort(const ComputeParams & p, ggml_tensor * dst) {
    if (ggml_is_empty(dst)) {
        return;
    }
    switch (dst->op) {
        case GGML_OP_ARGSORT: compute_rows(p, dst, false); break;
        case GGML_OP_TOP_K: compute_rows(p, dst, true); break;
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
        case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D:
        case GGML_OP_CONV_2D: case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D:
        case GGML_OP_POOL_1D: case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD:
        case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING:
        case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT:
        case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART:
        case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6:
        case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET:
        case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST:
        case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3:
        case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK:
        case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU: case GGML_OP_COUNT:
            LOOM_ASSERT(false && "compute_sort: not a sort"); break;
    }
}

bool supports_sort(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    if (src == nullptr || src->type != GGML_TYPE_F32 || op->type != GGML_TYPE_I32 || src->ne[0] > INT32_MAX) {
        return false;
    }
    // Index rows are written as plain int32 arrays.
    if (op->nb[0] != sizeof(int32_t) && op->ne[0] > 1) {
        return false;
    }
    const bool same_rows = op->ne[1] == src->ne[1] && op->ne[2] == src->ne[2] && op->ne[3] == src->ne[3];
    switch (op->op) {
        case GGML_OP_ARGSORT: {
            const int32_t order = op_param_i32(op, 0);
            return same_rows && op->ne[0] == src->ne[0] &&
                   (order == GGML_SORT_ORDER_ASC || order == GGML_SORT_ORDER_DESC);
        }
        case GGML_OP_TOP_K: return same_rows && op->ne[0] <= src->ne[0];
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
        case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D:
        case GGML_OP_CONV_2D: case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D:
        case GGML_OP_POOL_1D: case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD:
        case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING:
        case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT:
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

size_t work_size_sort(const ggml_tensor * op, int n_threads) {
    if (op->op != GGML_OP_ARGSORT && op->op != GGML_OP_TOP_K) {
        return 0;
    }
    return scratch_bytes(op->src[0]->ne[0]) * size_t(n_threads);
}

} // namespace loom::cpu
