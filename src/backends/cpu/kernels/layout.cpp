// GGML_OP_ACC, SET, REPEAT_BACK, ADD_ID, ROLL, PAD and PAD_REFLECT_1D: ops
// that write part of a tensor or move its elements.
//
// Note [Writing into a view]: ACC and SET first copy a into dst (unless
// they share memory), then every thread waits, then the rows of b go into
// the view of dst described by the op params. The constructor checked that
// the view lies inside a; supports_write_view checks it again (graphs may come
// deserialized), so no write leaves dst. When the rows of the view may
// overlap, thread 0 writes them all in order, so that the result does not
// depend on the thread count (the last row written wins, as in ggml).

#include <cmath>
#include <cstring>

#include "backends/cpu/kernels/element_at.h"
#include "backends/cpu/kernels/kernels.h"
#include "core/common.h"

namespace loom::cpu {

namespace {

inline float load_f32(const char * p) {
    float v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}
inline void store_f32(char * p, float v) {
    std::memcpy(p, &v, sizeof(v));
}

// The view of ACC and SET: b's shape, element stride es, strides nb[1..3]
// and a byte offset into dst.
struct WriteView {
    size_t es;
    size_t nb[4];
    size_t offset;
};
WriteView write_view(const ggml_tensor * op) {
    WriteView v{};
    v.es     = ggml_type_size(op->type);
    v.nb[0]  = v.es;
    v.nb[1]  = size_t(uint32_t(op_param_i32(op, 0)));
    v.nb[2]  = size_t(uint32_t(op_param_i32(op, 1)));
    v.nb[3]  = size_t(uint32_t(op_param_i32(op, 2)));
    v.offset = size_t(uint32_t(op_param_i32(op, 3)));
    return v;
}

// Whether the view's rows are certainly disjoint (each dimension above the
// previous one's extent). That the view lies inside dst is the rule's
// (fits_write_view).
bool rows_disjoint(const ggml_tensor * b, const WriteView & v) {
    size_t extent = size_t(b->ne[0]) * v.es;
    for (int d = 1; d < 4; ++d) {
        if (b->ne[d] == 1) {
            continue;
        }
        if (v.nb[d] < extent) {
            return false;
        }
        extent = v.nb[d] * size_t(b->ne[d]);
    }
    return true;
}

// ACC (acc: adds b to the view) and SET (copies b into it).
template <bool acc>
void compute_write_view(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (dst->data != a->data) {
        // a and dst are contiguous: a's bytes in thread-sized pieces.
        const Range r = split_range(int64_t(ggml_nbytes(dst)), p.ith, p.nth);
        // memmove: a node may overlap its source (a graph from a remote client).
        std::memmove(static_cast<char *>(dst->data) + r.begin, static_cast<const char *>(a->data) + r.begin,
                    size_t(r.end - r.begin));
    }
    p.sync();

    // b's rows; none when its rows are empty (however many of them it has).
    const WriteView v     = write_view(dst);
    const int64_t   nrows = b->ne[0] > 0 ? ggml_nrows(b) : 0;
    const Range     r     = rows_disjoint(b, v) ? split_range(nrows, p.ith, p.nth)
                                                : (p.ith == 0 ? Range{0, nrows} : Range{0, 0});
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix  = row_pos(ir, b->ne);
        const size_t   off = v.offset + size_t(ix.i1) * v.nb[1] + size_t(ix.i2) * v.nb[2] + size_t(ix.i3) * v.nb[3];
        const char *   x   = element_at(b, 0, ix.i1, ix.i2, ix.i3);
        const char *   s   = static_cast<const char *>(a->data) + off;
        char *         y   = static_cast<char *>(dst->data) + off;
        for (int64_t i = 0; i < b->ne[0]; ++i) {
            const char * xi = x + i * int64_t(b->nb[0]);
            if constexpr (acc) {
                store_f32(y + size_t(i) * v.es, load_f32(s + size_t(i) * v.es) + load_f32(xi));
            } else {
                std::memmove(y + size_t(i) * v.es, xi, v.es);
            }
        }
    }
}

// dst (b's shape) = the sum of the repetitions of dst's shape in src: for
// each dst row, the repetitions in dimension order 3, 2, 1, 0, as ggml.
void compute_repeat_back(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const int64_t *     ne  = dst->ne;
    const int64_t       nr[4] = {src->ne[0] / ne[0], src->ne[1] / ne[1], src->ne[2] / ne[2], src->ne[3] / ne[3]};
    const Range         r     = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix = row_pos(ir, ne);
        float *        y  = reinterpret_cast<float *>(element_at(dst, 0, ix.i1, ix.i2, ix.i3));
        for (int64_t i = 0; i < ne[0]; ++i) {
            y[i] = 0.0f;
        }
        // An empty source (of which some other dimension may be huge) adds nothing.
        for (int64_t r3 = 0; r3 < (ggml_is_empty(src) ? 0 : nr[3]); ++r3) {
            for (int64_t r2 = 0; r2 < nr[2]; ++r2) {
                for (int64_t r1 = 0; r1 < nr[1]; ++r1) {
                    const char * x = element_at(src, 0, r1 * ne[1] + ix.i1, r2 * ne[2] + ix.i2, r3 * ne[3] + ix.i3);
                    for (int64_t r0 = 0; r0 < nr[0]; ++r0) {
                        for (int64_t i = 0; i < ne[0]; ++i) {
                            y[i] += load_f32(x + (r0 * ne[0] + i) * int64_t(src->nb[0]));
                        }
                    }
                }
            }
        }
    }
}

// dst row (i1, i2, i3) = a's row + row ids[i1, i2] of b. The ids are
// inside b's rows (checked before the kernel, Note [Index sources] in
// core/op_table.h).
void compute_add_id(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a   = dst->src[0];
    const ggml_tensor * b   = dst->src[1];
    const ggml_tensor * ids = dst->src[2];
    const Range         r   = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix = row_pos(ir, dst->ne);
        int32_t      id;
        std::memcpy(&id, element_at(ids, ix.i1, ix.i2, 0, 0), sizeof(id));
        const char * x = element_at(a, 0, ix.i1, ix.i2, ix.i3);
        char *       y = element_at(dst, 0, ix.i1, ix.i2, ix.i3);
        const char * z = element_at(b, 0, id, 0, 0);
        for (int64_t i = 0; i < dst->ne[0]; ++i) {
            store_f32(y + i * int64_t(dst->nb[0]),
                      load_f32(x + i * int64_t(a->nb[0])) + load_f32(z + i * int64_t(b->nb[0])));
        }
    }
}

// i mod n in [0, n), n > 0.
inline int64_t wrap(int64_t i, int64_t n) {
    const int64_t m = i % n;
    return m < 0 ? m + n : m;
}

// dst element i = src element i - shift (wrapping) in every dimension;
// elements of es bytes, adjacent in both.
void compute_roll(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const size_t        es  = ggml_type_size(dst->type);
    const int64_t       n0  = dst->ne[0];
    const int64_t       s0  = wrap(-int64_t(op_param_i32(dst, 0)), n0);
    const Range         r   = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix = row_pos(ir, dst->ne);
        const char *   x  = element_at(src, 0, wrap(ix.i1 - op_param_i32(dst, 1), src->ne[1]),
                               wrap(ix.i2 - op_param_i32(dst, 2), src->ne[2]), wrap(ix.i3 - op_param_i32(dst, 3), src->ne[3]));
        char *         y  = element_at(dst, 0, ix.i1, ix.i2, ix.i3);
        std::memmove(y, x + size_t(s0) * es, size_t(n0 - s0) * es);
        std::memmove(y + size_t(n0 - s0) * es, x, size_t(s0) * es);
    }
}

// dst element i = src element i - lp in every dimension, zero bytes where
// that is outside src (or src's element at that index modulo its size when
// circular); elements of es bytes.
void compute_pad(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src      = dst->src[0];
    const size_t        es       = ggml_type_size(dst->type);
    const bool          circular = op_param_i32(dst, 8) != 0;
    int64_t             lp[4];
    for (int d = 0; d < 4; ++d) {
        lp[d] = op_param_i32(dst, 2 * d);
    }
    const Range r = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix = row_pos(ir, dst->ne);
        char *         y  = element_at(dst, 0, ix.i1, ix.i2, ix.i3);
        const int64_t  j1 = ix.i1 - lp[1], j2 = ix.i2 - lp[2], j3 = ix.i3 - lp[3];
        if (circular) {
            const char * x = element_at(src, 0, wrap(j1, src->ne[1]), wrap(j2, src->ne[2]), wrap(j3, src->ne[3]));
            for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
                std::memmove(y + i0 * int64_t(dst->nb[0]), x + wrap(i0 - lp[0], src->ne[0]) * int64_t(src->nb[0]), es);
            }
            continue;
        }
        const bool   inside = j1 >= 0 && j1 < src->ne[1] && j2 >= 0 && j2 < src->ne[2] && j3 >= 0 && j3 < src->ne[3];
        const char * x      = inside ? element_at(src, 0, j1, j2, j3) : nullptr;
        for (int64_t i0 = 0; i0 < dst->ne[0]; ++i0) {
            char *        e  = y + i0 * int64_t(dst->nb[0]);
            const int64_t j0 = i0 - lp[0];
            if (inside && j0 >= 0 && j0 < src->ne[0]) {
                std::memmove(e, x + j0 * int64_t(src->nb[0]), es);
            } else {
                std::memset(e, 0, es);
            }
        }
    }
}

// Rows [reflection of p0 | row | reflection of p1], without repeating the
// edge elements; src and dst F32 with adjacent elements.
void compute_pad_reflect_1d(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const int64_t       p0  = op_param_i32(dst, 0);
    const int64_t       p1  = op_param_i32(dst, 1);
    const int64_t       n   = src->ne[0];
    const Range         r   = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const RowPos ix = row_pos(ir, dst->ne);
        const float *  x  = reinterpret_cast<const float *>(element_at(src, 0, ix.i1, ix.i2, ix.i3));
        float *        y  = reinterpret_cast<float *>(element_at(dst, 0, ix.i1, ix.i2, ix.i3));
        std::memcpy(y + p0, x, size_t(n) * sizeof(float));
        for (int64_t i = 1; i <= p0; ++i) {
            y[p0 - i] = x[i];
        }
        for (int64_t i = 1; i <= p1; ++i) {
            y[p0 + n - 1 + i] = x[n - 1 - i];
        }
    }
}

bool adjacent(const ggml_tensor * t) {
    return t->nb[0] == ggml_type_size(t->type);
}

// ACC takes F32 data, SET F32 or I32 (the view inside the result and the
// types of src[1] and the result are the operators' rules).
template <bool acc>
bool supports_write_view(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    if (src == nullptr) {
        return false;
    }
    const bool types = acc ? src->type == GGML_TYPE_F32 : (src->type == GGML_TYPE_F32 || src->type == GGML_TYPE_I32);
    return types && ggml_is_contiguous(op) && ggml_is_contiguous(src);
}

bool supports_repeat_back(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && src->type == GGML_TYPE_F32 && adjacent(op);
}

bool supports_add_id(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    const ggml_tensor * b   = op->src[1];
    const ggml_tensor * ids = op->src[2];
    return src != nullptr && b != nullptr && ids != nullptr && src->type == GGML_TYPE_F32 &&
           b->type == GGML_TYPE_F32;
}

bool supports_roll(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && (src->type == GGML_TYPE_F32 || src->type == GGML_TYPE_F16) && adjacent(src) &&
           adjacent(op);
}

bool supports_pad(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && (src->type == GGML_TYPE_F32 || src->type == GGML_TYPE_F16);
}

bool supports_pad_reflect_1d(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    return src != nullptr && adjacent(src) && adjacent(op);
}

} // namespace

void add_layout_kernels(OpKernels & t) {
    t[GGML_OP_ACC]            = {compute_write_view<true>, supports_write_view<true>, nullptr};
    t[GGML_OP_SET]            = {compute_write_view<false>, supports_write_view<false>, nullptr};
    t[GGML_OP_REPEAT_BACK]    = {compute_repeat_back, supports_repeat_back, nullptr};
    t[GGML_OP_ADD_ID]         = {compute_add_id, supports_add_id, nullptr};
    t[GGML_OP_ROLL]           = {compute_roll, supports_roll, nullptr};
    t[GGML_OP_PAD]            = {compute_pad, supports_pad, nullptr};
    t[GGML_OP_PAD_REFLECT_1D] = {compute_pad_reflect_1d, supports_pad_reflect_1d, nullptr};
}

} // namespace loom::cpu
