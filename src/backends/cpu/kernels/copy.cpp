// Data movement: DUP, CONT, CPY (with type conversion and quantization, and
// between F32 and I32),
// REPEAT, CONCAT, GET_ROWS and SET_ROWS.
//
// Same-type moves copy bytes, so integer and quantized data pass through
// untouched; conversions go through float in stack-sized chunks whose
// length is a multiple of every block size, so quantized rows are always
// cut at block boundaries. Each dst row is written by one thread.

#include <algorithm>
#include <climits>
#include <cstring>
#include <initializer_list>

#include "backends/cpu/kernels/float_io.h"
#include "backends/cpu/kernels/kernels.h"
#include "core/common.h"
#include "core/fp16.h"
#include "core/types.h"

namespace loom::cpu {
namespace {

// Values per conversion step: a multiple of every block size it serves
// (block_fits_chunk).
constexpr int64_t kChunk = 256;

bool is_block_type(ggml_type t) {
    return type_is_valid(t) && ggml_is_quantized(t);
}
bool block_fits_chunk(ggml_type t) {
    return kChunk % ggml_blck_size(t) == 0;
}
// Types read as float here: the float types and every block type with a
// to_float in the type table.
bool loads_as_float(ggml_type t) {
    return is_float_type(t) || (is_block_type(t) && type_row(t).to_float != nullptr && block_fits_chunk(t));
}
// Types written from float: the float types and every block type with a
// from_float (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the K-quants, ...).
bool stores_from_float(ggml_type t) {
    return is_float_type(t) || (is_block_type(t) && type_row(t).from_float != nullptr && block_fits_chunk(t));
}

template <typename T>
void copy_strided(const char * s, size_t snb, char * d, size_t dnb, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        T v;
        std::memcpy(&v, s + size_t(i) * snb, sizeof(T));
        std::memcpy(d + size_t(i) * dnb, &v, sizeof(T));
    }
}

// F32 to I32 as a C cast (toward zero), made total: NaN gives 0 and values
// outside the range of int32 saturate.
int32_t float_to_i32(float v) {
    if (!(v == v)) return 0;
    if (v >= 2147483648.0f) return INT32_MAX;
    if (v <= -2147483648.0f) return INT32_MIN;
    return int32_t(v);
}

// One tensor's element access. Block types are only ever addressed at
// block boundaries (their nb[0] is the block size).
struct Side {
    const ggml_tensor * t;
    int64_t             blk;
    size_t              bsize;
    bool                quant;
    ggml_to_float_t     to;
    ggml_from_float_t   from;

    explicit Side(const ggml_tensor * tensor) : t(tensor) {
        const TypeInfo & ti = type_info(tensor->type, "cpu copy kernel");
        blk                 = ti.blck_size;
        bsize               = ti.type_size;
        quant               = ti.is_quantized;
        to                  = ti.to_float;
        from                = ti.from_float;
    }

    char * row(int64_t i1, int64_t i2, int64_t i3) const {
        return static_cast<char *>(t->data) + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    }
    char * row_flat(int64_t ir) const {
        return row(ir % t->ne[1], (ir / t->ne[1]) % t->ne[2], ir / (t->ne[1] * t->ne[2]));
    }
    char * at(char * r, int64_t i0) const { return r + size_t(i0 / blk) * t->nb[0]; }
    bool   unit() const { return t->nb[0] == bsize; }

    void load(const char * p, int64_t n, float * out) const {
        if (t->type == GGML_TYPE_I32) {
            for (int64_t i = 0; i < n; ++i) {
                int32_t v;
                std::memcpy(&v, p + size_t(i) * t->nb[0], sizeof(v));
                out[i] = float(v);
            }
        } else if (quant) {
            to(p, out, n);
        } else {
            load_floats(t->type, p, t->nb[0], n, out);
        }
    }

    void store(const float * in, char * p, int64_t n) const {
        if (t->type == GGML_TYPE_I32) {
            for (int64_t i = 0; i < n; ++i) {
                const int32_t v = float_to_i32(in[i]);
                std::memcpy(p + size_t(i) * t->nb[0], &v, sizeof(v));
            }
        } else if (quant) {
            from(in, p, n);
        } else {
            store_floats(t->type, in, p, t->nb[0], n);
        }
    }
};

// Copies n elements of one type from s (laid out as src) to d (as dst).
// memmove rather than memcpy: an in-place DUP passes the same address twice.
void copy_same(const Side & src, const char * s, const Side & dst, char * d, int64_t n) {
    const size_t snb = src.t->nb[0], dnb = dst.t->nb[0], esz = src.bsize;
    if (src.quant || (snb == esz && dnb == esz)) {
        std::memmove(d, s, size_t(n / src.blk) * esz);
        return;
    }
    switch (esz) {
        case 1: copy_strided<uint8_t>(s, snb, d, dnb, n); break;
        case 2: copy_strided<uint16_t>(s, snb, d, dnb, n); break;
        case 4: copy_strided<uint32_t>(s, snb, d, dnb, n); break;
        case 8: copy_strided<uint64_t>(s, snb, d, dnb, n); break;
        default:
            for (int64_t i = 0; i < n; ++i) {
                std::memmove(d + size_t(i) * dnb, s + size_t(i) * snb, esz);
            }
            break;
    }
}

// Copies a row of n elements, converting when the types differ.
void copy_row(const Side & src, const char * s, const Side & dst, char * d, int64_t n) {
    if (src.t->type == dst.t->type) {
        copy_same(src, s, dst, d, n);
        return;
    }
    float buf[kChunk];
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
        const int64_t m = std::min(kChunk, n - j0);
        src.load(src.at(const_cast<char *>(s), j0), m, buf);
        dst.store(buf, dst.at(d, j0), m);
    }
}

// Walks a tensor's elements in logical order (dim 0 fastest).
struct Cursor {
    const Side & side;
    int64_t      i0 = 0, i1 = 0, i2 = 0, i3 = 0;

    void seek(int64_t flat) {
        const int64_t * ne = side.t->ne;
        i0                 = flat % ne[0];
        flat /= ne[0];
        i1 = flat % ne[1];
        flat /= ne[1];
        i2 = flat % ne[2];
        i3 = flat / ne[2];
    }
    int64_t left_in_row() const { return side.t->ne[0] - i0; }
    char *  ptr() const { return side.at(side.row(i1, i2, i3), i0); }
    // n never exceeds left_in_row().
    void advance(int64_t n) {
        const int64_t * ne = side.t->ne;
        i0 += n;
        if (i0 == ne[0]) {
            i0 = 0;
            if (++i1 == ne[1]) {
                i1 = 0;
                if (++i2 == ne[2]) {
                    i2 = 0;
                    ++i3;
                }
            }
        }
    }
};

// DUP, CONT and CPY: the k-th element of src (in logical order) becomes the
// k-th element of dst; the shapes may differ, only the counts agree.
void compute_dup(const ComputeParams & p, ggml_tensor * dst) {
    const Side src_side(dst->src[0]);
    const Side dst_side(dst);
    const bool same_type = dst->src[0]->type == dst->type;

    if (same_type && ggml_is_contiguous(dst->src[0]) && ggml_is_contiguous(dst)) {
        const Range r = split_range(int64_t(ggml_nbytes(dst)), p.ith, p.nth);
        if (r.end > r.begin && dst->data != dst->src[0]->data) {
            // A node may overlap its source (a graph from a remote client).
            std::memmove(static_cast<char *>(dst->data) + r.begin,
                         static_cast<const char *>(dst->src[0]->data) + r.begin, size_t(r.end - r.begin));
        }
        return;
    }

    const int64_t ne0 = dst->ne[0];
    const Range   rr  = split_range(ggml_nrows(dst), p.ith, p.nth);
    if (rr.begin >= rr.end) {
        return;
    }
    Cursor in{src_side};
    in.seek(rr.begin * ne0);
    float buf[kChunk];
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        char * d = dst_side.row_flat(ir);
        if (same_type) {
            for (int64_t j = 0; j < ne0;) {
                const int64_t m = std::min(ne0 - j, in.left_in_row());
                copy_same(src_side, in.ptr(), dst_side, dst_side.at(d, j), m);
                in.advance(m);
                j += m;
            }
            continue;
        }
        for (int64_t j0 = 0; j0 < ne0; j0 += kChunk) {
            const int64_t n = std::min(kChunk, ne0 - j0);
            for (int64_t filled = 0; filled < n;) {
                const int64_t m = std::min(n - filled, in.left_in_row());
                src_side.load(in.ptr(), m, buf + filled);
                in.advance(m);
                filled += m;
            }
            dst_side.store(buf, dst_side.at(d, j0), n);
        }
    }
}

void compute_repeat(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const Side          s(src), d(dst);
    const int64_t       ne00 = src->ne[0];
    const Range         rr   = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        const int64_t i1 = ir % dst->ne[1];
        const int64_t i2 = (ir / dst->ne[1]) % dst->ne[2];
        const int64_t i3 = ir / (dst->ne[1] * dst->ne[2]);
        const char *  x  = s.row(i1 % src->ne[1], i2 % src->ne[2], i3 % src->ne[3]);
        char *        y  = d.row(i1, i2, i3);
        for (int64_t k = 0; k < dst->ne[0]; k += ne00) {
            copy_same(s, x, d, d.at(y, k), ne00);
        }
    }
}

// Block types go through copy_same as whole blocks (supports_copy: rows of
// whole blocks, each a contiguous run).
void compute_concat(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a   = dst->src[0];
    const ggml_tensor * b   = dst->src[1];
    const int           dim = op_param_i32(dst, 0);
    const Side          sa(a), sb(b), sd(dst);
    const Range         rr = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        int64_t idx[4] = {0, ir % dst->ne[1], (ir / dst->ne[1]) % dst->ne[2], ir / (dst->ne[1] * dst->ne[2])};
        char *  y      = sd.row(idx[1], idx[2], idx[3]);
        if (dim == 0) {
            copy_same(sa, sa.row(idx[1], idx[2], idx[3]), sd, y, a->ne[0]);
            copy_same(sb, sb.row(idx[1], idx[2], idx[3]), sd, sd.at(y, a->ne[0]), b->ne[0]);
            continue;
        }
        if (idx[dim] < a->ne[dim]) {
            copy_same(sa, sa.row(idx[1], idx[2], idx[3]), sd, y, a->ne[0]);
        } else {
            idx[dim] -= a->ne[dim];
            copy_same(sb, sb.row(idx[1], idx[2], idx[3]), sd, y, b->ne[0]);
        }
    }
}

int64_t load_index(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2) {
    const char * q = static_cast<const char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2];
    if (t->type == GGML_TYPE_I64) {
        int64_t v;
        std::memcpy(&v, q, sizeof(v));
        return v;
    }
    int32_t v;
    std::memcpy(&v, q, sizeof(v));
    return v;
}

// GET_ROWS and SET_ROWS read row numbers from data: compute_node checked
// every one before the kernel runs (Note [Index sources] in
// core/op_table.h), so the kernels trust them.

// dst[:, i, j, k] = src0[:, idx[i, j, k], j, k]
void compute_get_rows(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src  = dst->src[0];
    const ggml_tensor * rows = dst->src[1];
    const Side          s(src), d(dst);
    const Range         rr = split_range(ggml_nrows(dst), p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        const int64_t i = ir % dst->ne[1];
        const int64_t j = (ir / dst->ne[1]) % dst->ne[2];
        const int64_t k = ir / (dst->ne[1] * dst->ne[2]);
        copy_row(s, s.row(load_index(rows, i, j, k), j, k), d, d.row(i, j, k), src->ne[0]);
    }
}

// Row i of src0 (at i1, i2, i3) goes to dst row idx[i1, i2 % c1, i3 % c2].
void compute_set_rows(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const ggml_tensor * ids = dst->src[1];
    if (ggml_is_empty(src)) {
        return; // no row to write
    }
    const Side  s(src), d(dst);
    const Range rr = split_range(ggml_nrows(src), p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        const int64_t i1 = ir % src->ne[1];
        const int64_t i2 = (ir / src->ne[1]) % src->ne[2];
        const int64_t i3 = ir / (src->ne[1] * src->ne[2]);
        const int64_t r  = load_index(ids, i1, i2 % ids->ne[1], i3 % ids->ne[2]);
        copy_row(s, s.row(i1, i2, i3), d, d.row(r, i2, i3), src->ne[0]);
    }
}

bool supports_dup(const ggml_tensor * op) {
    const ggml_tensor * src = op->src[0];
    if (src == nullptr) {
        return false;
    }
    const ggml_type st = src->type, dt = op->type;
    if (!type_is_valid(st) || !type_is_valid(dt)) {
        return false;
    }
    const bool i32_pair = (st == GGML_TYPE_F32 && dt == GGML_TYPE_I32) || (st == GGML_TYPE_I32 && dt == GGML_TYPE_F32);
    if (st != dt && !i32_pair &&
        !(loads_as_float(st) && stores_from_float(dt) && !(is_block_type(st) && is_block_type(dt)))) {
        return false;
    }
    // Block data is addressed block by block along dim 0.
    for (const ggml_tensor * t : {src, op}) {
        if (ggml_is_quantized(t->type) && t->nb[0] != ggml_type_size(t->type)) {
            return false;
        }
    }
    // With differing shapes, a dst row may start anywhere in src's element
    // stream; reading src blocks whole needs dst rows to be whole blocks of
    // src's type (dst block types are whole blocks by construction).
    if (ggml_is_quantized(st) && op->ne[0] % ggml_blck_size(st) != 0) {
        return false;
    }
    return true;
}

bool same_type_plain(const ggml_tensor * a, const ggml_tensor * b) {
    return a->type == b->type && type_is_valid(a->type) && !ggml_is_quantized(a->type);
}

bool supports_repeat(const ggml_tensor * op) {
    const ggml_tensor * src0 = op->src[0];
    return src0 != nullptr && same_type_plain(src0, op);
}

bool supports_concat(const ggml_tensor * op) {
    const ggml_tensor * src0 = op->src[0];
    const ggml_tensor * src1 = op->src[1];
    if (src0 == nullptr || src1 == nullptr) {
        return false;
    }
    if (src0->type == op->type && src1->type == op->type && type_is_valid(op->type) && ggml_is_quantized(op->type)) {
        // Rows of whole blocks, each a contiguous run (as ggml).
        const int64_t blk = ggml_blck_size(op->type);
        for (const ggml_tensor * t : {src0, src1, static_cast<const ggml_tensor *>(op)}) {
            if (t->nb[0] != ggml_type_size(t->type) || t->ne[0] % blk != 0) {
                return false;
            }
        }
    } else if (!same_type_plain(src0, op) || !same_type_plain(src1, op)) {
        return false;
    }
    return true;
}

bool supports_get_rows(const ggml_tensor * op) {
    const ggml_tensor * src0 = op->src[0];
    const ggml_tensor * src1 = op->src[1];
    if (src0 == nullptr || src1 == nullptr) {
        return false;
    }
    const bool types = (loads_as_float(src0->type) && op->type == GGML_TYPE_F32) ||
                       (src0->type == GGML_TYPE_I32 && op->type == GGML_TYPE_I32);
    return types && (!ggml_is_quantized(src0->type) || src0->nb[0] == ggml_type_size(src0->type));
}

bool supports_set_rows(const ggml_tensor * op) {
    const ggml_tensor * src0 = op->src[0];
    return src0 != nullptr && stores_from_float(op->type) && loads_as_float(src0->type) &&
           (!ggml_is_quantized(op->type) || op->nb[0] == ggml_type_size(op->type));
}

// An empty dst has nothing to compute.
template <void (*compute)(const ComputeParams &, ggml_tensor *)>
void unless_empty(const ComputeParams & p, ggml_tensor * dst) {
    if (!ggml_is_empty(dst)) {
        compute(p, dst);
    }
}

} // namespace

void add_copy_kernels(OpKernels & t) {
    t[GGML_OP_DUP]      = {unless_empty<compute_dup>, supports_dup, nullptr};
    t[GGML_OP_CONT]     = {unless_empty<compute_dup>, supports_dup, nullptr};
    t[GGML_OP_CPY]      = {unless_empty<compute_dup>, supports_dup, nullptr};
    t[GGML_OP_REPEAT]   = {unless_empty<compute_repeat>, supports_repeat, nullptr};
    t[GGML_OP_CONCAT]   = {unless_empty<compute_concat>, supports_concat, nullptr};
    t[GGML_OP_GET_ROWS] = {unless_empty<compute_get_rows>, supports_get_rows, nullptr};
    t[GGML_OP_SET_ROWS] = {unless_empty<compute_set_rows>, supports_set_rows, nullptr};
}

} // namespace loom::cpu
