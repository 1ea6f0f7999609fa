// Reductions: SUM (everything to one value), SUM_ROWS, MEAN and ARGMAX.
//
// Sums accumulate in double over eight interleaved lanes (element i goes to
// lane i % 8, lanes combined pairwise at the end): the loop vectorises, and
// the grouping is a property of the row alone, so the result is the same
// whatever the thread count and whether the row is read directly or
// converted in chunks.

#include <algorithm>
#include <cmath>

#include "backends/cpu/kernels/float_io.h"
#include "backends/cpu/kernels/kernels.h"
#include "core/common.h"
#include "core/fp16.h"
#include "core/types.h"

namespace loom::cpu {
namespace {

constexpr int LANES = 8;

// Values converted per step for rows that are not unit-stride f32; a
// multiple of LANES so that lane assignment does not depend on chunking.
constexpr int64_t kChunk = 256;
static_assert(kChunk % LANES == 0);

// SUM combines this many fixed slices of rows, independent of the thread
// count, so that the order of additions never changes.
constexpr int64_t kSumSlices = 64;

struct Lanes {
    double acc[LANES] = {};

    // v holds elements starting at a multiple of LANES.
    void add(const float * v, int64_t n) {
        const int64_t nv = n - n % LANES;
        for (int64_t i = 0; i < nv; i += LANES) {
            for (int j = 0; j < LANES; ++j) {
                acc[j] += double(v[i + j]);
            }
        }
        for (int64_t i = nv; i < n; ++i) {
            acc[i - nv] += double(v[i]);
        }
    }

    double total() {
        for (int w = LANES / 2; w > 0; w /= 2) {
            for (int j = 0; j < w; ++j) {
                acc[j] += acc[j + w];
            }
        }
        return acc[0];
    }
};

// Calls f(values, offset, count) over a row of n F32/F16/BF16 elements
// `stride` bytes apart; unit-stride f32 rows are passed through unconverted.
template <typename F>
void for_chunks(ggml_type type, const char * row, size_t stride, int64_t n, F && f) {
    if (type == GGML_TYPE_F32 && (stride == sizeof(float) || n == 1)) {
        f(reinterpret_cast<const float *>(row), int64_t(0), n);
        return;
    }
    const TypeInfo & ti   = type_info(type, "cpu reduce kernel");
    const bool       unit = stride == ti.type_size;
    float            buf[kChunk];
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
        const int64_t m = std::min(kChunk, n - j0);
        const char *  p = row + size_t(j0) * stride;
        if (unit) {
            ti.to_float(p, buf, m);
        } else {
            for (int64_t i = 0; i < m; ++i) {
                buf[i] = load_float(type, p + size_t(i) * stride);
            }
        }
        f(static_cast<const float *>(buf), j0, m);
    }
}

double row_sum(const ggml_tensor * t, const char * row) {
    Lanes l;
    for_chunks(t->type, row, t->nb[0], t->ne[0], [&](const float * v, int64_t, int64_t m) { l.add(v, m); });
    return l.total();
}

const char * row_ptr(const ggml_tensor * t, int64_t ir) {
    const int64_t i1 = ir % t->ne[1];
    const int64_t i2 = (ir / t->ne[1]) % t->ne[2];
    const int64_t i3 = ir / (t->ne[1] * t->ne[2]);
    return static_cast<const char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

double slice_sum(const ggml_tensor * src, int64_t slice) {
    const Range r = split_range(ggml_nrows(src), int(slice), int(kSumSlices));
    double      s = 0.0;
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        s += row_sum(src, row_ptr(src, ir));
    }
    return s;
}

void compute_sum(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src    = dst->src[0];
    const bool          shared = p.nth > 1 && p.wdata != nullptr && p.wsize >= kSumSlices * sizeof(double);
    if (!shared) {
        // One thread does all slices, in the same grouping as the shared path.
        if (p.ith != 0) {
            return;
        }
        double total = 0.0;
        for (int64_t s = 0; s < kSumSlices; ++s) {
            total += slice_sum(src, s);
        }
        store_float(dst->type, static_cast<char *>(dst->data), float(total));
        return;
    }
    auto * partial = static_cast<double *>(p.wdata);
    for (int64_t s = p.ith; s < kSumSlices; s += p.nth) {
        partial[s] = slice_sum(src, s);
    }
    p.sync();
    if (p.ith == 0) {
        double total = 0.0;
        for (int64_t s = 0; s < kSumSlices; ++s) {
            total += partial[s];
        }
        store_float(dst->type, static_cast<char *>(dst->data), float(total));
    }
}

// SUM_ROWS and MEAN: dst [1, ne1, ne2, ne3], one value per row of src.
void compute_row_sums(const ComputeParams & p, ggml_tensor * dst, bool mean) {
    const ggml_tensor * src = dst->src[0];
    const Range         rr  = split_range(ggml_nrows(src), p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        double s = row_sum(src, row_ptr(src, ir));
        if (mean) {
            s /= double(src->ne[0]);
        }
        store_float(dst->type, const_cast<char *>(row_ptr(dst, ir)), float(s));
    }
}

// First index of the largest value; NaNs never compare larger, so a row of
// NaNs (or of -inf) yields 0.
void compute_argmax(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const Range         rr  = split_range(ggml_nrows(src), p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        float   best = -INFINITY;
        int32_t idx  = 0;
        for_chunks(src->type, row_ptr(src, ir), src->nb[0], src->ne[0], [&](const float * v, int64_t off, int64_t m) {
            for (int64_t i = 0; i < m; ++i) {
                if (v[i] > best) {
                    best = v[i];
                    idx  = int32_t(off + i);
                }
            }
        });
        const int32_t out = idx;
        std::memcpy(static_cast<char *>(dst->data) + ir * dst->nb[0], &out, sizeof(out));
    }
}

} // namespace

void compute_reduce(const ComputeParams & p, ggml_tensor * dst) {
    switch (dst->op) {
        case GGML_OP_SUM: compute_sum(p, dst); break;
        case GGML_OP_SUM_ROWS: compute_row_sums(p, dst, false); break;
        case GGML_OP_MEAN: compute_row_sums(p, dst, true); break;
        case GGML_OP_ARGMAX: compute_argmax(p, dst); break;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC:
        case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG:
        case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_CUMSUM: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT:
        case GGML_OP_REPEAT_BACK: case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM:
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
        case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL:
        case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN:
        case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS:
        case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI:
        case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB:
        case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS:
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU:
        case GGML_OP_COUNT: LOOM_ASSERT(false && "compute_reduce: not a reduction"); break;
    }
}

bool supports_reduce(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    if (src == nullptr) {
        return false;
    }
    switch (op->op) {
        case GGML_OP_SUM: return is_float_type(src->type) && op->type == src->type && ggml_nelements(op) == 1;
        case GGML_OP_SUM_ROWS:
            return is_float_type(src->type) && op->type == src->type && op->ne[0] == 1 && op->ne[1] == src->ne[1] &&
                   op->ne[2] == src->ne[2] && op->ne[3] == src->ne[3];
        case GGML_OP_MEAN:
            return is_float_type(src->type) && op->type == GGML_TYPE_F32 && op->ne[0] == 1 &&
                   op->ne[1] == src->ne[1] && op->ne[2] == src->ne[2] && op->ne[3] == src->ne[3];
        case GGML_OP_ARGMAX:
            return src->type == GGML_TYPE_F32 && op->type == GGML_TYPE_I32 && ggml_is_matrix(src) &&
                   op->ne[0] == src->ne[1] && ggml_nelements(op) == src->ne[1] && src->ne[0] <= INT32_MAX;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ADD1: case GGML_OP_ACC:
        case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_SQR: case GGML_OP_SQRT: case GGML_OP_LOG:
        case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_CUMSUM: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT:
        case GGML_OP_REPEAT_BACK: case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM:
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
        case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL:
        case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN:
        case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS:
        case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI:
        case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB:
        case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS:
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU:
        case GGML_OP_COUNT: return false;
    }
    return false;
}

size_t work_size_reduce(const ggml_tensor * op, int n_threads) {
    if (op->op == GGML_OP_SUM && n_threads > 1) {
        return kSumSlices * sizeof(double);
    }
    return 0;
}

} // namespace loom::cpu
