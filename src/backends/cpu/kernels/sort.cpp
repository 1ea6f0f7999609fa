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

// ARGSORT (top_k false) and TOP_K.
template <bool top_k>
void compute_rows(const ComputeParams & p, ggml_tensor * dst) {
    if (ggml_is_empty(dst)) {
        return;
    }
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
        if constexpr (top_k) {
            std::partial_sort(idx, idx + k, idx + ne00, Before<true>{values});
            std::memcpy(const_cast<char *>(row_of(dst, ir)), idx, size_t(k) * sizeof(int32_t));
        } else if (descending) {
            std::sort(idx, idx + ne00, Before<true>{values});
        } else {
            std::sort(idx, idx + ne00, Before<false>{values});
        }
    }
}

// ARGSORT, TOP_K: F32 rows in, plain int32 index rows out (the shapes and
// the order are the operators' rules).
bool index_rows_fit(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    if (src == nullptr || src->type != GGML_TYPE_F32 || src->ne[0] > INT32_MAX) {
        return false;
    }
    return op->nb[0] == sizeof(int32_t) || op->ne[0] <= 1;
}

size_t work_size_sort(const ggml_tensor * op, int n_threads) {
    return scratch_bytes(op->src[0]->ne[0]) * size_t(n_threads);
}

} // namespace

void add_sort_kernels(OpKernels & t) {
    t[GGML_OP_ARGSORT] = {compute_rows<false>, index_rows_fit, work_size_sort};
    t[GGML_OP_TOP_K]   = {compute_rows<true>, index_rows_fit, work_size_sort};
}

} // namespace loom::cpu
