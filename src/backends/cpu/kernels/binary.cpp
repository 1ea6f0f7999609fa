// Element-wise binary ops with ggml's broadcasting rule: src1 repeats along
// every dimension where it is smaller than src0 (ne0x is a multiple of ne1x).
//
// Every dst row is produced by one thread, and each element's value depends
// only on its two operands, so results never depend on the thread count.

#include <algorithm>

#include "backends/cpu/kernels/float_io.h"
#include "backends/cpu/kernels/kernels.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/common.h"
#include "core/fp16.h"
#include "core/types.h"

namespace loom::cpu {
namespace {

enum class BinOp { add, sub, mul, div };

template <BinOp op>
inline float apply(float a, float b) {
    if constexpr (op == BinOp::add) {
        return a + b;
    } else if constexpr (op == BinOp::sub) {
        return a - b;
    } else if constexpr (op == BinOp::mul) {
        return a * b;
    } else {
        return a / b;
    }
}

// d may alias a or b exactly (in-place ops); each element is read before it
// is written, so plain loops stay correct.
template <BinOp op>
void rows_f32(const float * a, const float * b, float * d, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        d[i] = apply<op>(a[i], b[i]);
    }
}

template <BinOp op>
void rows_f32_scalar(const float * a, float b, float * d, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        d[i] = apply<op>(a[i], b);
    }
}

// Reads and writes runs of F32/F16/BF16 values of one tensor.
struct FloatIO {
    ggml_type type;

    explicit FloatIO(ggml_type t) : type(t) {}
    float load1(const char * p) const { return load_float(type, p); }
    void  store1(char * p, float v) const { store_float(type, p, v); }
    void  load(const char * p, size_t stride, int64_t n, float * out) const { load_floats(type, p, stride, n, out); }
    void  store(const float * in, char * p, size_t stride, int64_t n) const { store_floats(type, in, p, stride, n); }
};

// Elements converted per step in the mixed-type path; stack buffers keep the
// kernel allocation-free without a work_size function.
constexpr int64_t kChunk = 256;

struct RowPtrs {
    const char * a;
    const char * b;
    char *       d;
};

template <BinOp op>
void compute_f32_row(const RowPtrs & r, int64_t ne0, int64_t ne10, BinaryFn row) {
    const auto * a = reinterpret_cast<const float *>(r.a);
    const auto * b = reinterpret_cast<const float *>(r.b);
    auto *       d = reinterpret_cast<float *>(r.d);
    if (ne10 == ne0) {
        row(ne0, a, b, d);
    } else if (ne10 == 1) {
        rows_f32_scalar<op>(a, b[0], d, ne0);
    } else {
        for (int64_t k = 0; k < ne0; k += ne10) {
            row(ne10, a + k, b, d + k);
        }
    }
}

// Any mix of F32/F16/BF16 and any element strides: convert chunks through
// float. Loading both operands before storing keeps in-place ops correct.
template <BinOp op>
void compute_mixed_row(const RowPtrs & r, int64_t ne0, int64_t ne10, const FloatIO & ia, const FloatIO & ib,
                       const FloatIO & id, size_t nb00, size_t nb10, size_t nb0) {
    float va[kChunk];
    float vb[kChunk];
    for (int64_t j0 = 0; j0 < ne0; j0 += kChunk) {
        const int64_t n = std::min(kChunk, ne0 - j0);
        ia.load(r.a + size_t(j0) * nb00, nb00, n, va);
        if (ne10 == 1) {
            const float s = ib.load1(r.b);
            std::fill(vb, vb + n, s);
        } else {
            // src1's row repeats every ne10 elements; gather the wrapped pieces
            int64_t pos = j0 % ne10;
            for (int64_t filled = 0; filled < n;) {
                const int64_t m = std::min(n - filled, ne10 - pos);
                ib.load(r.b + size_t(pos) * nb10, nb10, m, vb + filled);
                filled += m;
                pos = 0;
            }
        }
        rows_f32<op>(va, vb, va, n);
        id.store(va, r.d + size_t(j0) * nb0, nb0, n);
    }
}

// ADD1 adds its one-element src1 as ADD adds a broadcast row.
template <BinOp op>
void compute_binary(const ComputeParams & p, ggml_tensor * dst) {
    if (ggml_is_empty(dst)) {
        return;
    }
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];

    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2];
    const int64_t ne10 = src1->ne[0], ne11 = src1->ne[1], ne12 = src1->ne[2], ne13 = src1->ne[3];

    const bool all_f32 = src0->type == GGML_TYPE_F32 && src1->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32;
    const bool unit    = src0->nb[0] == sizeof(float) && src1->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
    const bool fast    = all_f32 && (unit || ne0 == 1);

    const FloatIO ia(src0->type), ib(src1->type), id(dst->type);
    const BinaryFn row = kernels(p.use_ref).binary_f32[int(op)];

    const int64_t nrows = ne1 * ne2 * dst->ne[3];
    const Range   rr    = split_range(nrows, p.ith, p.nth);
    for (int64_t ir = rr.begin; ir < rr.end; ++ir) {
        const int64_t i1 = ir % ne1;
        const int64_t i2 = (ir / ne1) % ne2;
        const int64_t i3 = ir / (ne1 * ne2);

        RowPtrs r;
        r.a = static_cast<const char *>(src0->data) + i1 * src0->nb[1] + i2 * src0->nb[2] + i3 * src0->nb[3];
        r.b = static_cast<const char *>(src1->data) + (i1 % ne11) * src1->nb[1] + (i2 % ne12) * src1->nb[2] +
              (i3 % ne13) * src1->nb[3];
        r.d = static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];

        if (fast) {
            compute_f32_row<op>(r, ne0, ne10, row);
        } else {
            compute_mixed_row<op>(r, ne0, ne10, ia, ib, id, src0->nb[0], src1->nb[0], dst->nb[0]);
        }
    }
}

bool supports_binary(const ggml_tensor * op) {
    const ggml_tensor * src0 = op->src[0];
    const ggml_tensor * src1 = op->src[1];
    if (src0 == nullptr || src1 == nullptr) {
        return false;
    }
    return is_float_type(src0->type) && is_float_type(src1->type) && is_float_type(op->type);
}

} // namespace

void add_binary_kernels(OpKernels & t) {
    t[GGML_OP_ADD]  = {compute_binary<BinOp::add>, supports_binary, nullptr};
    t[GGML_OP_ADD1] = {compute_binary<BinOp::add>, supports_binary, nullptr};
    t[GGML_OP_SUB]  = {compute_binary<BinOp::sub>, supports_binary, nullptr};
    t[GGML_OP_MUL]  = {compute_binary<BinOp::mul>, supports_binary, nullptr};
    t[GGML_OP_DIV]  = {compute_binary<BinOp::div>, supports_binary, nullptr};
}

} // namespace loom::cpu
