// GGML_OP_MUL_MAT_ID: the product of each token's selected experts.
//
// dst[:, e, t] = as[:, :, ids[e, t]] * b[:, e % ne11, t].
//
// Thread 0 first lists, for every expert, the (e, t) columns that chose it,
// in token order. Then each expert takes one of two paths, chosen from the
// types and its number of columns:
//  - grouped (f32 b, not the reference path, at least GROUP_MIN_COLS
//    columns): the expert's columns of b are gathered into a contiguous f32
//    matrix, at most GROUP_COLS at a time, and multiplied by its matrix as
//    one GGML_OP_MUL_MAT (matmul.cpp: the matrix-vector path with its
//    prepared columns, or the GEMM), so its weights are read once per group
//    of columns and meet them in the matrix kernels; the products are then
//    scattered to dst. A column's result thus depends on how many columns
//    its expert has (as mul_mat's path depends on its column count), never
//    on the thread count.
//  - per column (the reference path, b given already in the operand type,
//    and experts with fewer columns): b converted into the operand type of
//    the experts' dot product (row_dot_info), then items of ROW_BLOCK rows
//    of one expert's matrix, each taking that expert's columns against its
//    rows, one column per call of the table's matrix-vector product (the
//    portable dot products on the reference path).
// The ids are inside [0, n_expert): they are checked before the kernel
// runs (Note [Index sources] in core/op_table.h).

#include <algorithm>
#include <cstring>

#include "core/common.h"
#include "core/fits.h"
#include "core/types.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"
#include "kernels.h"
#include "quant_dot.h"
#include "vec.h"

namespace loom::cpu {

namespace {

constexpr size_t  SCRATCH_ALIGN = 64;
constexpr int64_t ROW_BLOCK     = 16;
// Columns of one expert multiplied at a time on the grouped path: enough
// for the matrix paths to reach full speed, while the gathered columns and
// their products stay a few MiB.
constexpr int64_t GROUP_COLS = 256;
// Fewer columns than this do not pay for a product's barriers: the
// per-column path reads the expert's rows once for them too (its items keep
// the rows in cache while the columns pass).
constexpr int64_t GROUP_MIN_COLS = 4;

// b is read in place when it already is the operand, with contiguous rows.
bool b_in_place(const ggml_tensor * as, const ggml_tensor * b) {
    return b->type == row_dot_info(as->type).operand && b->nb[0] == ggml_type_size(b->type);
}

// One column of dst: slot e of token t.
struct Column {
    int32_t e;
    int32_t t;
};

// Offsets of the scratch parts.
struct Layout {
    size_t packed = 0; // bytes of b in the operand type (0: read in place)
    size_t counts = 0; // offset of the per-expert column counts (int64)
    size_t lists  = 0; // offset of the per-expert column lists
    // The grouped path: the gathered columns, their products, then the
    // scratch of the product itself.
    int64_t group   = 0; // columns per product (0: the per-column path)
    size_t  gather  = 0;
    size_t  product = 0;
    size_t  inner   = 0;
    size_t  total   = 0;
};

// The grouped path's view of one product: GGML_OP_MUL_MAT of expert a's
// matrix (a_view) and n gathered columns (b_view) into n columns of M
// floats (at out).
struct GroupProduct {
    ggml_tensor a_view{};
    ggml_tensor b_view{};
    ggml_tensor node{};

    GroupProduct(const ggml_tensor * as, int64_t a, int64_t n, void * gathered, void * out) {
        a_view         = *as;
        a_view.ne[2]   = 1;
        a_view.nb[3]   = a_view.nb[2];
        a_view.data    = static_cast<char *>(as->data) + a * as->nb[2];
        a_view.view_src = nullptr;
        const int64_t K = as->ne[0];
        const int64_t M = as->ne[1];
        set_f32(b_view, K, n, gathered);
        set_f32(node, M, n, out);
        node.op     = GGML_OP_MUL_MAT;
        node.src[0] = &a_view;
        node.src[1] = &b_view;
    }

    static void set_f32(ggml_tensor & t, int64_t ne0, int64_t ne1, void * data) {
        t.type  = GGML_TYPE_F32;
        t.ne[0] = ne0;
        t.ne[1] = ne1;
        t.ne[2] = t.ne[3] = 1;
        t.nb[0]           = sizeof(float);
        t.nb[1]           = sizeof(float) * size_t(ne0);
        t.nb[2] = t.nb[3] = t.nb[1] * size_t(ne1);
        t.data            = data;
    }
};

// Whether the op takes the grouped path (apart from use_ref, known only
// when it runs): f32 b, and each expert's matrix a product matmul.cpp takes.
bool groups_columns(const ggml_tensor * op) {
    const ggml_tensor * as = op->src[0];
    if (op->src[1]->type != GGML_TYPE_F32 || repacked_base(as) != nullptr) {
        return false;
    }
    // mul_mat quantizes b to the experts' operand type only where it has a
    // product for them (else it dequantizes the weights and multiplies in
    // f32): elsewhere the columns stay on the per-column path, which
    // quantizes b as ggml does.
    if (vec_dot_info(as->type).dot == nullptr && best_kernels().gemv_quant[as->type] == nullptr) {
        return false;
    }
    GroupProduct g(as, 0, std::min<int64_t>(GROUP_COLS, op->src[2]->ne[0] * op->src[2]->ne[1]), nullptr, nullptr);
    return supports_mul_mat(&g.node);
}

Layout layout(const ggml_tensor * op, int n_threads) {
    const ggml_tensor * as  = op->src[0];
    const ggml_tensor * b   = op->src[1];
    const ggml_tensor * ids = op->src[2];
    Layout              l;
    if (!b_in_place(as, b) && row_dot_info(as->type).dot != nullptr) {
        l.packed = align_up(ggml_row_size(row_dot_info(as->type).operand, b->ne[0]) * size_t(ggml_nrows(b)),
                            SCRATCH_ALIGN);
    }
    const size_t n_as   = size_t(as->ne[2]);
    const size_t n_cols = size_t(ids->ne[0] * ids->ne[1]);
    l.counts            = l.packed;
    l.lists             = l.counts + align_up(n_as * sizeof(int64_t), SCRATCH_ALIGN);
    l.total             = l.lists + align_up(n_as * n_cols * sizeof(Column), SCRATCH_ALIGN);
    if (!groups_columns(op)) {
        return l;
    }
    // The per-column path (use_ref) needs the first parts; the grouped one
    // puts its own after the lists. A product's scratch grows with its
    // column count but its path changes at small counts, so every count up
    // to the first few and the largest is asked.
    l.group     = std::min<int64_t>(GROUP_COLS, int64_t(n_cols));
    l.gather    = l.total;
    l.product   = l.gather + align_up(size_t(as->ne[0]) * size_t(l.group) * sizeof(float), SCRATCH_ALIGN);
    l.inner     = l.product + align_up(size_t(as->ne[1]) * size_t(l.group) * sizeof(float), SCRATCH_ALIGN);
    size_t need = 0;
    for (int64_t n = 1; n <= l.group; n = n < 2 * GEMV_MAX_COLS ? n + 1 : l.group == n ? n + 1 : l.group) {
        GroupProduct g(as, 0, n, nullptr, nullptr);
        need = std::max(need, work_size_mul_mat(&g.node, n_threads));
    }
    l.total = l.inner + align_up(need, SCRATCH_ALIGN);
    return l;
}

// Copies columns [c0, c1) of expert a's list (gathered, n_cols columns per
// expert) from b into rows of gathered f32.
void gather_columns(const ggml_tensor * b, const Column * list, int64_t c0, int64_t c1, float * gathered) {
    const int64_t K = b->ne[0];
    for (int64_t c = c0; c < c1; ++c) {
        const Column col = list[c];
        const char * src = static_cast<const char *>(b->data) + (col.e % b->ne[1]) * b->nb[1] + col.t * b->nb[2];
        float *      out = gathered + (c - c0) * K;
        if (b->nb[0] == sizeof(float)) {
            std::memcpy(out, src, size_t(K) * sizeof(float));
        } else {
            for (int64_t k = 0; k < K; ++k) {
                std::memcpy(out + k, src + k * b->nb[0], sizeof(float));
            }
        }
    }
}

// Copies products [c0, c1) (M floats each, from column first of the list)
// to their places in dst.
void scatter_columns(ggml_tensor * dst, const Column * list, int64_t first, int64_t c0, int64_t c1,
                     const float * product) {
    const int64_t M = dst->ne[0];
    for (int64_t c = c0; c < c1; ++c) {
        const Column col = list[first + c];
        auto * out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + col.e * dst->nb[1] + col.t * dst->nb[2]);
        std::memcpy(out, product + c * M, size_t(M) * sizeof(float));
    }
}

// The grouped path, after the lists are made.
void compute_grouped(const ComputeParams & p, ggml_tensor * dst, const Layout & l, const int64_t * counts,
                     const Column * lists, int64_t n_cols) {
    const ggml_tensor * as      = dst->src[0];
    const ggml_tensor * b       = dst->src[1];
    char *              scratch = static_cast<char *>(p.wdata);
    auto *              gathered = reinterpret_cast<float *>(scratch + l.gather);
    auto *              product  = reinterpret_cast<float *>(scratch + l.product);
    ComputeParams       q        = p;
    q.wdata                      = scratch + l.inner;
    q.wsize                      = p.wsize - l.inner;

    // The last product not yet scattered: its list and columns.
    const Column * pending       = nullptr;
    int64_t        pending_first = 0;
    int64_t        pending_n     = 0;
    for (int64_t a = 0; a < as->ne[2]; ++a) {
        const Column * list = lists + a * n_cols;
        if (counts[a] < GROUP_MIN_COLS) {
            continue; // the per-column path's
        }
        for (int64_t c0 = 0; c0 < counts[a]; c0 += l.group) {
            const int64_t n = std::min(l.group, counts[a] - c0);
            // The previous product goes out while these columns come in.
            const Range g = split_range(n, p.ith, p.nth);
            gather_columns(b, list, c0 + g.begin, c0 + g.end, gathered + g.begin * b->ne[0]);
            if (pending != nullptr) {
                const Range s = split_range(pending_n, p.ith, p.nth);
                scatter_columns(dst, pending, pending_first, s.begin, s.end, product);
            }
            p.sync();
            GroupProduct prod(as, a, n, gathered, product);
            compute_mul_mat(q, &prod.node);
            p.sync();
            pending       = list;
            pending_first = c0;
            pending_n     = n;
        }
    }
    if (pending != nullptr) {
        const Range s = split_range(pending_n, p.ith, p.nth);
        scatter_columns(dst, pending, pending_first, s.begin, s.end, product);
    }
}

bool mul_mat_id_fits(const ggml_tensor * op) {
    // Shapes and types: the operator's rule; here the result's rows are
    // float arrays.
    return node_fits(op, nullptr) && op->nb[0] == sizeof(float);
}

void compute_mul_mat_id(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * as  = dst->src[0];
    const ggml_tensor * b   = dst->src[1];
    const ggml_tensor * ids = dst->src[2];
    LOOM_ASSERT(mul_mat_id_fits(dst));
    const Layout l = layout(dst, p.nth);
    LOOM_ASSERT(p.wsize >= l.total);

    VecDotInfo info = vec_dot_info(as->type, p.use_ref);
    if (info.dot == nullptr) {
        info = row_dot_info(as->type);
    }
    const GemvFn gemv = p.use_ref ? nullptr : table_gemv(best_kernels(), as->type);
    const int64_t    K        = as->ne[0];
    const int64_t    M        = as->ne[1];
    const int64_t    n_as     = as->ne[2];
    const int64_t    n_ids    = ids->ne[0];
    const int64_t    n_tok    = ids->ne[1];
    const int64_t    ne11     = b->ne[1];
    const size_t     row_size = ggml_row_size(info.operand, K);
    char *           scratch  = static_cast<char *>(p.wdata);
    auto *           counts   = reinterpret_cast<int64_t *>(scratch + l.counts);
    auto *           lists    = reinterpret_cast<Column *>(scratch + l.lists);
    const int64_t    n_cols   = n_ids * n_tok;
    // Experts with at least GROUP_MIN_COLS columns take the grouped path
    // where it is open; the others the per-column one.
    const bool may_group  = l.group > 0 && !p.use_ref && n_cols >= GROUP_MIN_COLS;
    auto       convert_b  = [&] {
        const Range r = split_range(ne11 * b->ne[2], p.ith, p.nth);
        for (int64_t ir = r.begin; ir < r.end; ++ir) {
            const char * src = static_cast<const char *>(b->data) + (ir % ne11) * b->nb[1] + (ir / ne11) * b->nb[2];
            convert_f32_row(info.operand, src, b->nb[0], scratch + size_t(ir) * row_size, K);
        }
    };

    if (l.packed != 0 && !may_group) {
        convert_b(); // while thread 0 makes the lists
    }
    if (p.ith == 0) {
        std::fill(counts, counts + n_as, int64_t(0));
        for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t e = 0; e < n_ids; ++e) {
                const int32_t id = *reinterpret_cast<const int32_t *>(static_cast<const char *>(ids->data) +
                                                                      e * ids->nb[0] + t * ids->nb[1]);
                lists[id * n_cols + counts[id]++] = {int32_t(e), int32_t(t)};
            }
        }
    }
    p.sync();
    auto per_column = [&](int64_t a) { return counts[a] > 0 && !(may_group && counts[a] >= GROUP_MIN_COLS); };
    if (may_group && l.packed != 0 && std::any_of(counts, counts + n_as, [&](const int64_t & c) {
            return per_column(&c - counts);
        })) {
        convert_b();
        p.sync();
    }

    const int64_t blocks = (M + ROW_BLOCK - 1) / ROW_BLOCK;
    int64_t       n_items = 0;
    for (int64_t a = 0; a < n_as; ++a) {
        n_items += per_column(a) ? blocks : 0;
    }
    const Range mine = split_range(n_items, p.ith, p.nth);
    int64_t     item = 0; // first item of expert a
    for (int64_t a = 0; a < n_as && item < mine.end; ++a) {
        if (!per_column(a)) {
            continue;
        }
        const int64_t first = std::max(mine.begin, item) - item;
        const int64_t last  = std::min(mine.end, item + blocks) - item;
        item += blocks;
        const char * mat = static_cast<const char *>(as->data) + a * as->nb[2];
        for (int64_t blk = first; blk < last; ++blk) {
            const int64_t m0 = blk * ROW_BLOCK;
            const int64_t m1 = std::min(m0 + ROW_BLOCK, M);
            for (int64_t c = 0; c < counts[a]; ++c) {
                const Column   col = lists[a * n_cols + c];
                const int64_t  i11 = col.e % ne11;
                const char *   y   = l.packed != 0 ? scratch + size_t(col.t * ne11 + i11) * row_size
                                                   : static_cast<const char *>(b->data) + i11 * b->nb[1] +
                                                       col.t * b->nb[2];
                auto * out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + col.e * dst->nb[1] +
                                                       col.t * dst->nb[2]);
                if (gemv != nullptr) {
                    gemv(K, mat + m0 * as->nb[1], as->nb[1], m1 - m0, y, row_size, 1, out + m0, 1);
                    continue;
                }
                for (int64_t m = m0; m < m1; ++m) {
                    out[m] = info.dot(K, mat + m * as->nb[1], y);
                }
            }
        }
    }
    if (may_group) {
        compute_grouped(p, dst, l, counts, lists, n_cols);
    }
}

bool supports_mul_mat_id(const ggml_tensor * op) {
    if (!mul_mat_id_fits(op)) {
        return false;
    }
    const ggml_tensor * as   = op->src[0];
    const ggml_tensor * b    = op->src[1];
    const VecDotInfo    info = row_dot_info(as->type);
    if (info.dot == nullptr || !convertible_operand(info.operand) || as->nb[0] != ggml_type_size(as->type) ||
        as->ne[0] % ggml_blck_size(info.operand) != 0) {
        return false;
    }
    // b is f32 (converted), or already the operand with contiguous rows.
    return b->type == GGML_TYPE_F32 || b_in_place(as, b);
}

size_t work_size_mul_mat_id(const ggml_tensor * op, int n_threads) {
    return layout(op, n_threads).total;
}

} // namespace

void add_matmul_id_kernels(OpKernels & t) {
    t[GGML_OP_MUL_MAT_ID] = {compute_mul_mat_id, supports_mul_mat_id, work_size_mul_mat_id};
}

} // namespace loom::cpu
