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

// NORM and RMS_NORM: each row by normalise (norm_row or rms_norm_row).
template <void (*normalise)(const KernelTable & kt, const float * x, float * y, int64_t n, float eps)>
void compute_rows(const ComputeParams & p, ggml_tensor * dst) {
    if (ggml_is_empty(dst)) {
        return;
    }
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
        normalise(kt, x, y, ne0, eps);
    }
}

// Channels (dim 2) are split into groups of ceil(ne2 / n_groups); each group
// is normalised over dims 0 and 1 of its channels, separately per dim-3 index.
// A trailing group may be short or, when the division is uneven, empty.
void compute_group_norm(const ComputeParams & p, ggml_tensor * dst) {
    if (ggml_is_empty(dst)) {
        return;
    }
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

// F32 rows (the shape is the rule's). dst rows are plain float arrays; so are src rows
// of GROUP_NORM, while NORM and RMS_NORM gather strided ones into dst first,
// which must then be memory of its own (not a view, as an in-place result is).
bool f32_rows_fit(const ggml_tensor * op, bool gathers) {
    const ggml_tensor * src = op->src[0];
    if (src == nullptr || src->type != GGML_TYPE_F32) {
        return false;
    }
    const bool dst_rows = op->nb[0] == sizeof(float) || op->ne[0] == 1;
    const bool src_rows = src->nb[0] == sizeof(float) || src->ne[0] == 1;
    if (src_rows) {
        return dst_rows;
    }
    return gathers && dst_rows && op->view_src == nullptr;
}

bool supports_norm_rows(const ggml_tensor * op) {
    return f32_rows_fit(op, true);
}

bool supports_group_norm(const ggml_tensor * op) {
    return f32_rows_fit(op, false);
}

} // namespace

void add_norm_kernels(OpKernels & t) {
    t[GGML_OP_NORM]       = {compute_rows<norm_row>, supports_norm_rows, nullptr};
    t[GGML_OP_RMS_NORM]   = {compute_rows<rms_norm_row>, supports_norm_rows, nullptr};
    t[GGML_OP_GROUP_NORM] = {compute_group_norm, supports_group_norm, nullptr};
}

} // namespace loom::cpu
