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
template <bool mean>
void compute_row_sums(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const Range         rr  = split_range(ggml_nrows(src), p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        double s = row_sum(src, row_ptr(src, ir));
        if constexpr (mean) {
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

// SUM, SUM_ROWS and MEAN take sources of every float type, ARGMAX F32 ones
// (the results' types and shapes are the operators' rules).
bool supports_sum(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && is_float_type(src->type);
}

bool supports_argmax(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && src->type == GGML_TYPE_F32;
}

// The threads' partial sums of SUM's slices.
size_t work_size_sum(const ggml_tensor *, int n_threads) {
    return n_threads > 1 ? kSumSlices * sizeof(double) : 0;
}

} // namespace

void add_reduce_kernels(OpKernels & t) {
    t[GGML_OP_SUM]      = {compute_sum, supports_sum, work_size_sum};
    t[GGML_OP_SUM_ROWS] = {compute_row_sums<false>, supports_sum, nullptr};
    t[GGML_OP_MEAN]     = {compute_row_sums<true>, supports_sum, nullptr};
    t[GGML_OP_ARGMAX]   = {compute_argmax, supports_argmax, nullptr};
}

} // namespace loom::cpu
