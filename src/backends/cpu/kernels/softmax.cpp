// GGML_OP_SOFT_MAX, GGML_OP_DIAG_MASK_INF and GGML_OP_DIAG_MASK_ZERO.
//
// soft_max: y = softmax(x * scale + slope * mask) along each row, slope the
// ALiBi slope of the row's head (dim 2) or 1 without max_bias. With sinks
// (src[2], F32, one logit per head), the head's sink joins the row's
// denominator as one more logit that has no output. The mask row
// is the row's dim-1 index in the mask; its dims 2 and 3 repeat over x's.
// The work row is dst itself (dst has x's shape and is contiguous; in place
// each element is read before it is written), so no scratch is needed.
//
// Note [fully masked rows]: a row whose biased logits are all -inf has max
// -inf, and exp(-inf - -inf) is NaN, so the whole row becomes NaN. ggml's
// CPU backend gives the same (and asserts in its debug builds); callers mask
// at least one position per row. flash_attn_ext, by contrast, defines such
// rows as zeros.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/common.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "kernels.h"
#include "vec.h"

namespace loom::cpu {

namespace {

inline float * row_at(const ggml_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return reinterpret_cast<float *>(static_cast<char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

void compute_soft_max(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src  = dst->src[0];
    const ggml_tensor * mask  = dst->src[1];
    const ggml_tensor * sinks = dst->src[2];
    LOOM_ASSERT(src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    LOOM_ASSERT(src->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float));

    const float   scale    = op_param_f32(dst, 0);
    const float   max_bias = op_param_f32(dst, 1);
    const int64_t n        = src->ne[0];
    const int64_t ne1      = src->ne[1];
    const int64_t ne2      = src->ne[2];
    const bool    mask_f16 = mask != nullptr && mask->type == GGML_TYPE_F16;
    if (mask != nullptr) {
        LOOM_ASSERT(mask->ne[0] == n && mask->ne[1] >= ne1 && mask->nb[0] == ggml_type_size(mask->type));
    }

    const KernelTable & kt = kernels(p.use_ref);
    const Range         r  = split_range(ggml_nrows(src), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const int64_t i3 = ir / (ne1 * ne2);
        const int64_t i2 = ir / ne1 % ne2;
        const int64_t i1 = ir % ne1;

        const float * x = row_at(src, i1, i2, i3);
        float *       y = row_at(dst, i1, i2, i3);
        kt.scale_f32(n, x, scale, y);
        if (mask != nullptr) {
            const float  slope = alibi_slope(max_bias, ne2, i2);
            const char * m     = static_cast<const char *>(mask->data) + i1 * mask->nb[1] +
                             (i2 % mask->ne[2]) * mask->nb[2] + (i3 % mask->ne[3]) * mask->nb[3];
            // y[i] += slope * m[i] with its two roundings, a chunk at a time.
            constexpr int64_t CHUNK = 256;
            float             term[CHUNK];
            for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
                const int64_t c = std::min(CHUNK, n - i0);
                mask_terms(kt, m + i0 * int64_t(mask->nb[0]), mask_f16, slope, c, term);
                kt.binary_f32[0](c, y + i0, term, y + i0);
            }
        }
        float max = kt.max_f32(n, y);
        float sink = -INFINITY;
        if (sinks != nullptr) {
            sink = static_cast<const float *>(sinks->data)[i2];
            max  = std::max(max, sink);
        }
        double sum = kt.exp_sub_sum_f32(n, y, max);
        if (sinks != nullptr) {
            sum += double(std::exp(sink - max));
        }
        kt.scale_f32(n, y, float(1.0 / sum), y);
    }
}

// dst = src with element (i0, i1) of every matrix set to -inf (DIAG_MASK_INF)
// or 0 (DIAG_MASK_ZERO) where i0 > n_past + i1. In place dst->data ==
// src->data and only the masking writes happen.
template <bool inf>
void compute_diag_mask(const ComputeParams & p, ggml_tensor * dst) {
    const float         value = inf ? -INFINITY : 0.0f;
    const ggml_tensor * src   = dst->src[0];
    LOOM_ASSERT(src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    LOOM_ASSERT(src->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float));

    const int64_t n_past = op_param_i32(dst, 0);
    const int64_t n      = src->ne[0];
    const int64_t ne1    = src->ne[1];
    const int64_t ne2    = src->ne[2];

    const Range r = split_range(ggml_nrows(src), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const int64_t i3 = ir / (ne1 * ne2);
        const int64_t i2 = ir / ne1 % ne2;
        const int64_t i1 = ir % ne1;

        const float * x = row_at(src, i1, i2, i3);
        float *       y = row_at(dst, i1, i2, i3);
        // First masked column, clamped to [0, n].
        const int64_t keep = std::min(n, std::max<int64_t>(0, n_past + i1 + 1));
        if (x != y) {
            std::memmove(y, x, size_t(keep) * sizeof(float)); // (a node may overlap its source)
        }
        for (int64_t i = keep; i < n; ++i) {
            y[i] = value;
        }
    }
}

// F32 rows of adjacent elements, in and out.
bool f32_rows_in_out(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && src->type == GGML_TYPE_F32 && op->type == GGML_TYPE_F32 && src->nb[0] == sizeof(float) &&
           op->nb[0] == sizeof(float);
}

bool supports_soft_max(const ggml_tensor * op) {
    if (!f32_rows_in_out(op)) {
        return false;
    }
    const ggml_tensor * mask  = op->src[1];
    const ggml_tensor * sinks = op->src[2];
    if (sinks != nullptr && !ggml_is_contiguous(sinks)) {
        return false;
    }
    return mask == nullptr || mask->nb[0] == ggml_type_size(mask->type);
}

} // namespace

void add_softmax_kernels(OpKernels & t) {
    t[GGML_OP_SOFT_MAX]       = {compute_soft_max, supports_soft_max, nullptr};
    t[GGML_OP_DIAG_MASK_INF]  = {compute_diag_mask<true>, f32_rows_in_out, nullptr};
    t[GGML_OP_DIAG_MASK_ZERO] = {compute_diag_mask<false>, f32_rows_in_out, nullptr};
}

} // namespace loom::cpu
