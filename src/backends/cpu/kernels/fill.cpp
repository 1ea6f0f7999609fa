// GGML_OP_CLAMP, LEAKY_RELU, FILL, ARANGE, TRI, CUMSUM, COUNT_EQUAL,
// L2_NORM, DIAG and TIMESTEP_EMBEDDING.
//
// Each thread takes a range of rows (or of elements for the 1-d results)
// and computes them alone, in the same order of operations whatever the
// thread count; COUNT_EQUAL adds the threads' integer counts afterwards.
// Sources may have any strides unless a supports function says otherwise.

#include <cmath>
#include <cstring>

#include "backends/cpu/kernels/float_io.h"
#include "backends/cpu/kernels/element_at.h"
#include "backends/cpu/kernels/kernels.h"
#include "core/common.h"

namespace loom::cpu {

namespace {

// dst = f(src) element-wise, src and dst F32 or F16 of one shape.
template <typename F> void map_floats(const ComputeParams & p, ggml_tensor * dst, F f) {
    const ggml_tensor * src = dst->src[0];
    const Range         r   = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix = row_pos(ir, dst->ne);
        const char *   x  = element_at(src, 0, ix.i1, ix.i2, ix.i3);
        char *         y  = element_at(dst, 0, ix.i1, ix.i2, ix.i3);
        for (int64_t i = 0; i < dst->ne[0]; ++i) {
            const float v = load_float(src->type, x + i * int64_t(src->nb[0]));
            store_float(dst->type, y + i * int64_t(dst->nb[0]), f(v));
        }
    }
}

void compute_clamp(const ComputeParams & p, ggml_tensor * dst) {
    const float lo = op_param_f32(dst, 0);
    const float hi = op_param_f32(dst, 1);
    // ggml's order: a NaN fails the first comparison and becomes hi.
    map_floats(p, dst, [lo, hi](float x) {
        const float m = x < hi ? x : hi;
        return m > lo ? m : lo;
    });
}

void compute_leaky_relu(const ComputeParams & p, ggml_tensor * dst) {
    const float slope = op_param_f32(dst, 0);
    map_floats(p, dst, [slope](float x) { return (x > 0.0f ? x : 0.0f) + slope * (x < 0.0f ? x : 0.0f); });
}

// dst is contiguous (the constructor requires it of a).
void compute_fill(const ComputeParams & p, ggml_tensor * dst) {
    const float   c = op_param_f32(dst, 0);
    const Range   r = split_range(ggml_nelements(dst), p.ith, p.nth);
    char *        y = static_cast<char *>(dst->data);
    const int64_t es = int64_t(ggml_type_size(dst->type));
    if (dst->type == GGML_TYPE_F32) {
        float * f = reinterpret_cast<float *>(y);
        for (int64_t i = r.begin; i < r.end; ++i) {
            f[i] = c;
        }
        return;
    }
    for (int64_t i = r.begin; i < r.end; ++i) {
        store_float(dst->type, y + i * es, c);
    }
}

void compute_arange(const ComputeParams & p, ggml_tensor * dst) {
    const float start = op_param_f32(dst, 0);
    const float step  = op_param_f32(dst, 2);
    float *     y     = static_cast<float *>(dst->data);
    const Range r     = split_range(ggml_nelements(dst), p.ith, p.nth);
    for (int64_t i = r.begin; i < r.end; ++i) {
        y[i] = start + step * float(i);
    }
}

bool tri_keeps(int32_t type, int64_t i0, int64_t i1) {
    switch (type) {
        case GGML_TRI_TYPE_UPPER_DIAG: return i0 >= i1;
        case GGML_TRI_TYPE_UPPER: return i0 > i1;
        case GGML_TRI_TYPE_LOWER_DIAG: return i0 <= i1;
        default: return i0 < i1;
    }
}

void compute_tri(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src  = dst->src[0];
    const int32_t       type = op_param_i32(dst, 0);
    const Range         r    = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix = row_pos(ir, dst->ne);
        const float *  x  = reinterpret_cast<const float *>(element_at(src, 0, ix.i1, ix.i2, ix.i3));
        float *        y  = reinterpret_cast<float *>(element_at(dst, 0, ix.i1, ix.i2, ix.i3));
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            y[i0] = tri_keeps(type, i0, ix.i1) ? x[i0] : 0.0f;
        }
    }
}

void compute_cumsum(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const Range         r   = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix  = row_pos(ir, dst->ne);
        const char *   x   = element_at(src, 0, ix.i1, ix.i2, ix.i3);
        char *         y   = element_at(dst, 0, ix.i1, ix.i2, ix.i3);
        float          sum = 0.0f;
        for (int64_t i = 0; i < dst->ne[0]; ++i) {
            float v;
            std::memcpy(&v, x + i * int64_t(src->nb[0]), sizeof(v));
            sum = i == 0 ? v : sum + v;
            std::memcpy(y + i * int64_t(dst->nb[0]), &sum, sizeof(sum));
        }
    }
}

// Each thread counts its rows into its slot of the scratch; thread 0 adds
// the slots once all are written.
void compute_count_equal(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a     = dst->src[0];
    const ggml_tensor * b     = dst->src[1];
    int64_t *           slots = static_cast<int64_t *>(p.wdata);
    const Range         r     = split_range(ggml_nrows(a), p.ith, p.nth);
    int64_t             count = 0;
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix = row_pos(ir, a->ne);
        const char *   x  = element_at(a, 0, ix.i1, ix.i2, ix.i3);
        const char *   y  = element_at(b, 0, ix.i1, ix.i2, ix.i3);
        for (int64_t i = 0; i < a->ne[0]; ++i) {
            int32_t u, v;
            std::memcpy(&u, x + i * int64_t(a->nb[0]), sizeof(u));
            std::memcpy(&v, y + i * int64_t(b->nb[0]), sizeof(v));
            count += u == v ? 1 : 0;
        }
    }
    slots[p.ith] = count;
    p.sync();
    if (p.ith == 0) {
        int64_t total = 0;
        for (int t = 0; t < p.nth; ++t) {
            total += slots[t];
        }
        *static_cast<int64_t *>(dst->data) = total;
    }
}

// As ggml: the squares (each rounded to float) summed in double, the scale
// 1 / max(sqrt(sum), eps) in float.
void compute_l2_norm(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const float         eps = op_param_f32(dst, 0);
    const Range         r   = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix = row_pos(ir, dst->ne);
        const char *   x  = element_at(src, 0, ix.i1, ix.i2, ix.i3);
        char *         y  = element_at(dst, 0, ix.i1, ix.i2, ix.i3);
        double         sum = 0.0;
        for (int64_t i = 0; i < dst->ne[0]; ++i) {
            float v;
            std::memcpy(&v, x + i * int64_t(src->nb[0]), sizeof(v));
            sum += double(v * v);
        }
        const float scale = 1.0f / std::fmax(std::sqrt(float(sum)), eps);
        for (int64_t i = 0; i < dst->ne[0]; ++i) {
            float v;
            std::memcpy(&v, x + i * int64_t(src->nb[0]), sizeof(v));
            v *= scale;
            std::memcpy(y + i * int64_t(dst->nb[0]), &v, sizeof(v));
        }
    }
}

// dst [n, n, ne2, ne3] from a [n, 1, ne2, ne3], any element type: the
// diagonal copied, every other element zero bytes (0 in F32 and F16).
void compute_diag(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const size_t        es  = ggml_type_size(dst->type);
    const Range         r   = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix = row_pos(ir, dst->ne);
        char *         y  = element_at(dst, 0, ix.i1, ix.i2, ix.i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            char * e = y + i0 * int64_t(dst->nb[0]);
            if (i0 == ix.i1) {
                std::memmove(e, element_at(src, i0, 0, ix.i2, ix.i3), es);
            } else {
                std::memset(e, 0, es);
            }
        }
    }
}

// As ggml, in float: f_j = exp(-log(max_period) * j / half).
void compute_timestep_embedding(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src        = dst->src[0];
    const int           dim        = op_param_i32(dst, 0);
    const int           max_period = op_param_i32(dst, 1);
    const int           half       = dim / 2;
    const float         log_period = std::log(float(max_period));
    const Range         r          = split_range(dst->ne[1], p.ith, p.nth);
    for (int64_t i = r.begin; i < r.end; ++i) {
        float t;
        std::memcpy(&t, static_cast<const char *>(src->data) + i * int64_t(src->nb[0]), sizeof(t));
        float * y = reinterpret_cast<float *>(static_cast<char *>(dst->data) + i * int64_t(dst->nb[1]));
        for (int j = 0; j < half; ++j) {
            const float freq = std::exp(-log_period * float(j) / float(half));
            const float arg  = t * freq;
            y[j]             = std::cos(arg);
            y[j + half]      = std::sin(arg);
        }
        if (dim % 2 != 0) {
            y[2 * half] = 0.0f;
        }
    }
}

bool is_f32_or_f16(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16;
}

bool f32_rows(const ggml_tensor * t) {
    return t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float);
}

bool supports_arange(const ggml_tensor * op) {
    return ggml_is_contiguous(op);
}

bool supports_count_equal(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    return a != nullptr && b != nullptr && a->type == GGML_TYPE_I32 && b->type == GGML_TYPE_I32;
}

// The threads' counts.
size_t work_size_count_equal(const ggml_tensor *, int n_threads) {
    return size_t(n_threads) * sizeof(int64_t);
}

// CLAMP, LEAKY_RELU.
bool supports_elementwise(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && is_f32_or_f16(src->type);
}

bool supports_fill(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && ggml_is_contiguous(op);
}

bool supports_tri(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && f32_rows(src) && f32_rows(op);
}

// CUMSUM, L2_NORM.
bool supports_f32_same_shape(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && src->type == GGML_TYPE_F32;
}

bool supports_diag(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && is_f32_or_f16(src->type);
}

bool supports_timestep_embedding(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && src->type == GGML_TYPE_F32 && f32_rows(op);
}

} // namespace

void add_fill_kernels(OpKernels & t) {
    t[GGML_OP_CLAMP]              = {compute_clamp, supports_elementwise, nullptr};
    t[GGML_OP_LEAKY_RELU]         = {compute_leaky_relu, supports_elementwise, nullptr};
    t[GGML_OP_FILL]               = {compute_fill, supports_fill, nullptr};
    t[GGML_OP_ARANGE]             = {compute_arange, supports_arange, nullptr};
    t[GGML_OP_TRI]                = {compute_tri, supports_tri, nullptr};
    t[GGML_OP_CUMSUM]             = {compute_cumsum, supports_f32_same_shape, nullptr};
    t[GGML_OP_COUNT_EQUAL]        = {compute_count_equal, supports_count_equal, work_size_count_equal};
    t[GGML_OP_L2_NORM]            = {compute_l2_norm, supports_f32_same_shape, nullptr};
    t[GGML_OP_DIAG]               = {compute_diag, supports_diag, nullptr};
    t[GGML_OP_TIMESTEP_EMBEDDING] = {compute_timestep_embedding, supports_timestep_embedding, nullptr};
}

} // namespace loom::cpu
