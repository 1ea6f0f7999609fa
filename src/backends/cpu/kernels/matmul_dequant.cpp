// GGML_OP_MUL_MAT for weight types without a dot product of their own in
// vec.h (the legacy types past Q4_0/Q8_0, the K-quants, and any type a family
// gives a to_float): rows of a are converted to f32 by the type's to_float
// (the table's, so every such type takes this path without being named
// here), into the thread's part of the scratch, and multiplied with b in f32
// by the kernel table's gemv_f32.
//
// Work items are GEMV_ROW_ALIGN rows of one dst matrix, cut from row 0, so
// the same rows always meet the same code; each item converts its rows once
// and runs every column group of GEMV_MAX_COLS against them. Each dst element
// is therefore dot_f32 of the exact dequantized row and its column, computed
// by one thread whatever the thread count: the error against a double
// product of the dequantized values is that of an f32 dot product of K terms
// (at most about K 2^-24 sum |a b|).

#include <algorithm>
#include <cstring>

#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/common.h"
#include "core/types.h"
#include "kernels.h"
#include "matmul_dequant.h"

namespace loom::cpu {

namespace {

constexpr size_t  ALIGN      = 64;
constexpr int64_t ITEM_ROWS = GEMV_ROW_ALIGN;

size_t align_to(size_t n) {
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

// b is read in place when its values are contiguous f32 along K.
bool b_in_place(const ggml_tensor * b) {
    return b->nb[0] == sizeof(float);
}

size_t packed_b_size(const ggml_tensor * b) {
    return b_in_place(b) ? 0 : align_to(size_t(b->ne[0]) * sizeof(float) * size_t(ggml_nrows(b)));
}

// An item's rows as f32, then, for repacked weights (Note [Repacked
// weights]), one row in ggml's layout.
size_t thread_rows_size(const ggml_tensor * a) {
    return align_to(size_t(ITEM_ROWS) * size_t(a->ne[0]) * sizeof(float)) + (is_repacked(a) ? align_to(a->nb[1]) : 0);
}

} // namespace

bool mul_mat_dequantizes(ggml_type weight_type) {
    return type_is_valid(weight_type) && ggml_is_quantized(weight_type) &&
           type_row(weight_type).to_float != nullptr;
}

size_t work_size_mul_mat_dequant(const ggml_tensor * a, const ggml_tensor * b, int n_threads) {
    return packed_b_size(b) + thread_rows_size(a) * size_t(std::max(n_threads, 1));
}

void compute_mul_mat_dequant(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a  = dst->src[0];
    const ggml_tensor * b  = dst->src[1];
    const KernelTable & kt = kernels(p.use_ref);

    const ggml_to_float_t to_float = type_row(a->type).to_float;
    const int64_t         K        = a->ne[0];
    const int64_t         M        = dst->ne[0];
    const int64_t         N        = dst->ne[1];
    const int64_t         ne2      = dst->ne[2];
    const int64_t         nbatch   = dst->ne[2] * dst->ne[3];
    const int64_t         r2       = b->ne[2] / a->ne[2];
    const int64_t         r3       = b->ne[3] / a->ne[3];
    LOOM_ASSERT(p.wsize >= work_size_mul_mat_dequant(a, b, p.nth));

    char * const scratch = static_cast<char *>(p.wdata);
    const size_t packed  = packed_b_size(b);
    const size_t col     = size_t(K) * sizeof(float); // a packed column's bytes
    if (!b_in_place(b)) {
        // Gather b's columns into contiguous f32 rows first, shared by all.
        const Range r = split_range(ggml_nrows(b), p.ith, p.nth);
        for (int64_t ir = r.begin; ir < r.end; ++ir) {
            const int64_t i1  = ir % b->ne[1];
            const int64_t i2  = ir / b->ne[1] % b->ne[2];
            const int64_t i3  = ir / (b->ne[1] * b->ne[2]);
            const char *  src = static_cast<const char *>(b->data) + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
            auto *        out = reinterpret_cast<float *>(scratch + size_t(ir) * col);
            for (int64_t k = 0; k < K; ++k) {
                std::memcpy(out + k, src + k * b->nb[0], sizeof(float));
            }
        }
        p.sync();
    }
    auto * rows_f32 = reinterpret_cast<float *>(scratch + packed + thread_rows_size(a) * size_t(p.ith));
    char * unpacked = is_repacked(a) ? reinterpret_cast<char *>(rows_f32) +
                                           align_to(size_t(ITEM_ROWS) * size_t(K) * sizeof(float))
                                     : nullptr;

    const int64_t n_ru    = (M + ITEM_ROWS - 1) / ITEM_ROWS;
    const Range   items   = split_range(nbatch * n_ru, p.ith, p.nth);
    const size_t  ldd     = dst->nb[1] / sizeof(float);
    for (int64_t it = items.begin; it < items.end; ++it) {
        const int64_t batch = it / n_ru;
        const int64_t i2    = batch % ne2;
        const int64_t i3    = batch / ne2;
        const int64_t m0    = (it % n_ru) * ITEM_ROWS;
        const int64_t rows  = std::min(ITEM_ROWS, M - m0);
        const char *  a_rows =
            static_cast<const char *>(a->data) + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3] + m0 * a->nb[1];
        for (int64_t r = 0; r < rows; ++r) {
            const char * row = a_rows + r * a->nb[1];
            if (unpacked != nullptr) {
                repack_read(a, unpacked, size_t(row - static_cast<const char *>(a->data)), a->nb[1]);
                row = unpacked;
            }
            to_float(row, rows_f32 + r * K, K);
        }
        for (int64_t c0 = 0; c0 < N; c0 += GEMV_MAX_COLS) {
            const int    ncols = int(std::min<int64_t>(GEMV_MAX_COLS, N - c0));
            const char * bcol;
            size_t       ldb;
            if (b_in_place(b)) {
                bcol = static_cast<const char *>(b->data) + c0 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
                ldb  = b->nb[1];
            } else {
                bcol = scratch + size_t((i3 * b->ne[2] + i2) * b->ne[1] + c0) * col;
                ldb  = col;
            }
            auto * out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + c0 * dst->nb[1] +
                                                   i2 * dst->nb[2] + i3 * dst->nb[3]) + m0;
            kt.gemv_f32(K, rows_f32, col, rows, bcol, ldb, ncols, out, ldd);
        }
    }
}

} // namespace loom::cpu
