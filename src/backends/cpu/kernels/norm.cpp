// Normalisations over rows (NORM, RMS_NORM) and over groups of channels
// (GROUP_NORM). F32 only; sums accumulate in double, in the kernel table's
// lanes, and rows are scaled by its scale_f32 (both the same bits in every
// table).
//
// Each row or group is handled by one thread from start to end, so results
// do not depend on the thread count. dst may be src itself (in-place): every
// pass reads an element before it writes the same element. NORM and
// RMS_NORM also take src rows whose elements are apart (a permuted src):
// such a row is first gathered into its dst row, then normalised there.

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/common.h"

namespace loom::cpu {
namespace {

constexpr int LANES = 8;

// Eight interleaved double accumulators, combined pairwise: a fixed
// grouping of the additions for a given row length. The kernel table adds
// the values or their squares (sum_lanes_f64, sum_sq_lanes_f64: the same
// bits in every table).
struct Lanes {
    double acc[LANES] = {};

    void add(const KernelTable & kt, int64_t n, const float * x) { kt.sum_lanes_f64(n, x, acc); }
    void add_squares(const KernelTable & kt, int64_t n, const float * x) { kt.sum_sq_lanes_f64(n, x, acc); }

    double total() {
        for (int w = LANES / 2; w > 0; w /= 2) {
            for (int j = 0; j < w; ++j) {
                acc[j] += acc[j + w];
            }
        }
        return acc[0];
    }
};

template <typename T>
T * at(T * base, size_t off) {
    using Byte = std::conditional_t<std::is_const_v<T>, const char, char>;
    return reinterpret_cast<T *>(reinterpret_cast<Byte *>(base) + off);
}

void norm_row(const KernelTable & kt, const float * x, float * y, int64_t n, float eps) {
    Lanes s1;
    s1.add(kt, n, x);
    const float mean = float(s1.total() / double(n));

    Lanes s2;
    for (int64_t i = 0; i < n; ++i) {
        y[i] = x[i] - mean;
    }
    s2.add_squares(kt, n, y);
    const float var = float(s2.total() / double(n));
    kt.scale_f32(n, y, 1.0f / std::sqrt(var + eps), y);
}

void rms_norm_row(const KernelTable & kt, const float * x, float * y, int64_t n, float eps) {
    Lanes s;
    s.add_squares(kt, n, x);
    const float mean_sq = float(s.total() / double(n));
    kt.scale_f32(n, x, 1.0f / std::sqrt(mean_sq + eps), y);
}

void compute_rows(const ComputeParams & p, ggml_tensor * dst, bool rms) {
    const ggml_tensor * src = dst->src[0];
    const float         eps = op_param_f32(dst, 0);
    const int64_t       ne0 = src->ne[0], ne1 = src->ne[1], ne2 = src->ne[2];

    const KernelTable & kt = kernels(p.use_ref);
    const Range         rr = split_range(ggml_nrows(src), p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        const int64_t i1 = ir % ne1;
        const int64_t i2 = (ir / ne1) % ne2;
        const int64_t i3 = ir / (ne1 * ne2);
        const float * x  = at(static_cast<const float *>(src->data), i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3]);
        float *       y  = at(static_cast<float *>(dst->data), i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        if (src->nb[0] != sizeof(float) && ne0 > 1) {
            for (int64_t i = 0; i < ne0; ++i) {
                y[i] = *at(x, size_t(i) * src->nb[0]);
            }
            x = y;
        }
        if (rms) {
            rms_norm_row(kt, x, y, ne0, eps);
        } else {
            norm_row(kt, x, y, ne0, eps);
        }
    }
}

// Channels (dim 2) are split into groups of ceil(ne2 / n_groups); each group
// is normalised over dims 0 and 1 of its channels, separately per dim-3 index.
// A trailing group may be short or, when the division is uneven, empty.
void compute_group_norm(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src      = dst->src[0];
    const int64_t       n_groups = op_param_i32(dst, 0);
    const float         eps      = op_param_f32(dst, 1);
    const int64_t       ne0 = src->ne[0], ne1 = src->ne[1], ne2 = src->ne[2], ne3 = src->ne[3];
    const int64_t       per_group = (ne2 + n_groups - 1) / n_groups;
    const KernelTable & kt        = kernels(p.use_ref);

    auto src_row = [&](int64_t i1, int64_t i2, int64_t i3) {
        return at(static_cast<const float *>(src->data), i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3]);
    };
    auto dst_row = [&](int64_t i1, int64_t i2, int64_t i3) {
        return at(static_cast<float *>(dst->data), i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
    };

    // Groups past the channels are empty: only the first ceil(ne2 / per_group)
    // hold any (a count of groups far above the channels costs nothing).
    const int64_t n_used = per_group > 0 ? std::min(n_groups, (ne2 + per_group - 1) / per_group) : 0;
    const Range   rr     = split_range(n_used * ne3, p.ith, p.nth);
    for (int64_t item = rr.begin; item < rr.end; ++item) {
        const int64_t g     = item % n_used;
        const int64_t i3    = item / n_used;
        const int64_t first = g * per_group;
        const int64_t last  = std::min(first + per_group, ne2);
        if (first >= last) {
            continue;
        }
        const double count = double(ne0) * double(ne1) * double(last - first);

        Lanes s1;
        for (int64_t i2 = first; i2 < last; ++i2) {
            for (int64_t i1 = 0; i1 < ne1; ++i1) {
                s1.add(kt, ne0, src_row(i1, i2, i3));
            }
        }
        const float mean = float(s1.total() / count);

        Lanes s2;
        for (int64_t i2 = first; i2 < last; ++i2) {
            for (int64_t i1 = 0; i1 < ne1; ++i1) {
                const float * x = src_row(i1, i2, i3);
                float *       y = dst_row(i1, i2, i3);
                for (int64_t i = 0; i < ne0; ++i) {
                    y[i] = x[i] - mean;
                }
                s2.add_squares(kt, ne0, y);
            }
        }
        const float scale = 1.0f / std::sqrt(float(s2.total() / count) + eps);

        for (int64_t i2 = first; i2 < last; ++i2) {
            for (int64_t i1 = 0; i1 < ne1; ++i1) {
                float * y = dst_row(i1, i2, i3);
                kt.scale_f32(ne0, y, scale, y);
            }
        }
    }
}

} // namespace

void compute_norm(const ComputeParams & p, ggml_tensor * dst) {
    if (ggml_is_empty(dst)) {
        return;
    }
    switch (dst->op) {
        case GGML_OP_NORM: compute_rows(p, dst, false); break;
        case GGML_OP_RMS_NORM: compute_rows(p, dst, true); break;
        case GGML_OP_GROUP_NORM: compute_group_norm(p, dst); break;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC:
        case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG:
        case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM:
        case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_RMS_NORM_BACK: case GGML_OP_L2_NORM:
        case GGML_OP_MUL_MAT: case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_SET:
        case GGML_OP_CPY: case GGML_OP_CONT: case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: case GGML_OP_GET_ROWS: case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS:
        case GGML_OP_DIAG: case GGML_OP_DIAG_MASK_INF: case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX:
        case GGML_OP_SOFT_MAX_BACK: case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP:
        case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D:
        case GGML_OP_COL2IM_1D: case GGML_OP_CONV_2D: case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW:
        case GGML_OP_CONV_TRANSPOSE_2D: case GGML_OP_POOL_1D: case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK:
        case GGML_OP_UPSCALE: case GGML_OP_PAD: case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE:
        case GGML_OP_TIMESTEP_EMBEDDING: case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU:
        case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK:
        case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART:
        case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN:
        case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER:
        case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_UNARY:
        case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM:
        case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW:
        case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU: case GGML_OP_COUNT:
            LOOM_ASSERT(false && "compute_norm: not a normalisation"); break;
    }
}

bool supports_norm(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM: break;
        case GGML_OP_GROUP_NORM:
            if (op_param_i32(op, 0) <= 0) {
                return false;
            }
            break;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC:
        case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG:
        case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS: case GGML_OP_CUMSUM:
        case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT: case GGML_OP_REPEAT_BACK:
        case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_RMS_NORM_BACK: case GGML_OP_L2_NORM:
        case GGML_OP_MUL_MAT: case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_SET:
        case GGML_OP_CPY: case GGML_OP_CONT: case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: case GGML_OP_GET_ROWS: case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS:
        case GGML_OP_DIAG: case GGML_OP_DIAG_MASK_INF: case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX:
        case GGML_OP_SOFT_MAX_BACK: case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP:
        case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D:
        case GGML_OP_COL2IM_1D: case GGML_OP_CONV_2D: case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW:
        case GGML_OP_CONV_TRANSPOSE_2D: case GGML_OP_POOL_1D: case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK:
        case GGML_OP_UPSCALE: case GGML_OP_PAD: case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE:
        case GGML_OP_TIMESTEP_EMBEDDING: case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU:
        case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK:
        case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART:
        case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN:
        case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER:
        case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_UNARY:
        case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM:
        case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW:
        case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU: case GGML_OP_COUNT: return false;
    }
    const ggml_tensor * src = op->src[0];
    if (src == nullptr || src->type != GGML_TYPE_F32 || op->type != GGML_TYPE_F32 || !ggml_are_same_shape(src, op)) {
        return false;
    }
    // dst rows are plain float arrays; so are src rows of GROUP_NORM, while
    // NORM and RMS_NORM gather strided ones into dst first, which must then
    // be memory of its own (not a view, as an in-place result is).
    const bool dst_rows = op->nb[0] == sizeof(float) || op->ne[0] == 1;
    const bool src_rows = src->nb[0] == sizeof(float) || src->ne[0] == 1;
    if (src_rows) {
        return dst_rows;
    }
    return op->op != GGML_OP_GROUP_NORM && dst_rows && op->view_src == nullptr;
}

} // namespace loom::cpu
