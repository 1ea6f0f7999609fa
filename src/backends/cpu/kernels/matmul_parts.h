#pragma once

// What the two product paths of GGML_OP_MUL_MAT share (matmul.cpp: the
// reference and matrix-matrix paths and the dispatch; matmul_gemv.cpp: the
// matrix-vector path): the operand b is converted to, where its columns
// are, and the scratch layout's constants.

#include <cstddef>
#include <cstdint>

#include "backends/cpu/simd/kernel_table.h"
#include "core/common.h"
#include "ggml.h"
#include "kernels.h"
#include "vec.h"

namespace loom::cpu::mm {

constexpr size_t SCRATCH_ALIGN = 64;

inline bool is_weight_type(ggml_type t) {
    return vec_dot_info(t).dot != nullptr;
}

// The type b is converted to for a's products.
inline ggml_type operand_type(const ggml_tensor * a) {
    return is_weight_type(a->type) ? vec_dot_info(a->type).operand : quant_operand_type(a->type);
}

// b goes through the scratch buffer unless it already is a usable operand:
// f32 against f32 weights with contiguous rows.
inline bool mul_mat_packs_b(const ggml_tensor * a, const ggml_tensor * b) {
    return operand_type(a) != GGML_TYPE_F32 || b->nb[0] != sizeof(float);
}

// Where column i1 of b's matrix (i2, i3) lives as an operand: packed in the
// scratch, or read in place through b's strides.
struct BOperand {
    const char * base;
    bool         packed;
    size_t       row_size; // packed: bytes per column
    int64_t      ne1, ne2;
    size_t       nb1, nb2, nb3;

    const char * column(int64_t i1, int64_t i2, int64_t i3) const {
        if (packed) {
            return base + size_t((i3 * ne2 + i2) * ne1 + i1) * row_size;
        }
        return base + i1 * nb1 + i2 * nb2 + i3 * nb3;
    }
};

// packed: the scratch b was packed into, or nullptr to read b in place.
inline BOperand b_operand(const ggml_tensor * b, const void * packed, size_t row_size) {
    BOperand op;
    op.base     = static_cast<const char *>(packed != nullptr ? packed : b->data);
    op.packed   = packed != nullptr;
    op.row_size = row_size;
    op.ne1      = b->ne[1];
    op.ne2      = b->ne[2];
    op.nb1      = b->nb[1];
    op.nb2      = b->nb[2];
    op.nb3      = b->nb[3];
    return op;
}

// Bytes of b packed into the operand type of a's dot product, aligned (0
// where b is read in place); the reference and matrix-vector paths put it
// first in the scratch.
inline size_t packed_b_bytes(const ggml_tensor * a, const ggml_tensor * b) {
    if (!mul_mat_packs_b(a, b)) {
        return 0;
    }
    return align_up(ggml_row_size(operand_type(a), b->ne[0]) * size_t(ggml_nrows(b)), SCRATCH_ALIGN);
}

// The sizes both product paths work with: dst is M x N per matrix, with
// nbatch = ne2 * ne3 matrices (batch = i3 * ne2 + i2), each taking a's
// matrix (i2 / r2, i3 / r3).
struct ProductShape {
    int64_t M, N, ne2, nbatch, r2, r3;
};

inline ProductShape product_shape(const ggml_tensor * a, const ggml_tensor * b, const ggml_tensor * dst) {
    return {dst->ne[0], dst->ne[1], dst->ne[2], dst->ne[2] * dst->ne[3], b->ne[2] / a->ne[2], b->ne[3] / a->ne[3]};
}

// Scratch: the counter in the first GEMV_HEADER bytes, then b packed, then
// b's prepared columns and each thread's partial sums where the product has
// them.
constexpr size_t GEMV_HEADER = 64;

// Converts n f32 values stride bytes apart into a row of the operand type,
// through the kernel table where it has the conversion.
void convert_operand(const KernelTable & kt, ggml_type type, const char * src, size_t stride, void * dst, int64_t n);
// Thread ith's share of converting b's columns into the scratch.
void pack_b(const ComputeParams & p, const KernelTable & kt, const ggml_tensor * b, ggml_type operand,
            size_t row_size);

// The matrix-vector path (matmul_gemv.cpp).
size_t gemv_region_bytes(const ggml_tensor * a, const ggml_tensor * b, int n_threads);
void   compute_gemv_products(const ComputeParams & p, const KernelTable & kt, ggml_tensor * const * dsts, int n);
void   compute_mul_mat_gemv(const ComputeParams & p, const KernelTable & kt, ggml_tensor * dst);

} // namespace loom::cpu::mm
