// GGML_OP_MUL_MAT_ID: the product of each token's selected experts.
//
// dst[:, e, t] = as[:, :, ids[e, t]] * b[:, e % ne11, t].
//
// Three phases between barriers:
//  1. b is converted into the operand type of the experts' dot product
//     (id_dot_info), rows split among the threads, unless it already is
//     one that can be read in place; thread 0 meanwhile lists, for every
//     expert, the (e, t) columns that chose it, in token order.
//  2. The work is cut into items of ROW_BLOCK rows of one expert's matrix
//     (experts no column chose have none); an item takes each of that
//     expert's columns against its rows, so the rows stay in cache while
//     the columns pass. Each dst element is one dot product, computed by one
//     thread, so the result does not depend on the thread count. Weights
//     with a gemv_quant entry in the selected table (the K-quants, Q4_1,
//     Q5_0, Q5_1, IQ4_NL, IQ4_XS, MXFP4, the grid i-quants and the ternary
//     types on AVX2 and AVX-512) take it, one column against the
//     item's rows per call, except on the reference path, which takes the
//     portable dot products of quant_dot.h.
// An id outside [0, n_expert) is a data error: its column of dst is zero.

#include <algorithm>
#include <cstring>

#include "core/common.h"
#include "core/types.h"
#include "backends/cpu/simd/kernel_table.h"
#include "kernels.h"
#include "quant_dot.h"
#include "vec.h"

namespace loom::cpu {

namespace {

constexpr size_t  SCRATCH_ALIGN = 64;
constexpr int64_t ROW_BLOCK     = 16;

// The operand types convert_f32_row produces.
bool convertible_operand(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16 || t == GGML_TYPE_Q8_0 ||
           t == GGML_TYPE_Q8_1 || t == GGML_TYPE_Q8_K;
}

// The dot product of vec.h for the types it has, else the portable one of
// quant_dot.h against the type of gemv_quant's columns; dot == nullptr for
// the other types.
VecDotInfo id_dot_info(ggml_type t) {
    const VecDotInfo info = vec_dot_info(t);
    if (info.dot != nullptr) {
        return info;
    }
    VecDotFn dot = nullptr;
    switch (t) {
        case GGML_TYPE_Q4_1: dot = dot_q4_1_q8_1; break;
        case GGML_TYPE_Q5_0: dot = dot_q5_0_q8_0; break;
        case GGML_TYPE_Q5_1: dot = dot_q5_1_q8_1; break;
        case GGML_TYPE_Q2_K: dot = dot_q2_K_q8_K; break;
        case GGML_TYPE_Q3_K: dot = dot_q3_K_q8_K; break;
        case GGML_TYPE_Q4_K: dot = dot_q4_K_q8_K; break;
        case GGML_TYPE_Q5_K: dot = dot_q5_K_q8_K; break;
        case GGML_TYPE_Q6_K: dot = dot_q6_K_q8_K; break;
        case GGML_TYPE_IQ4_NL: dot = dot_iq4_nl_q8_0; break;
        case GGML_TYPE_MXFP4: dot = dot_mxfp4_q8_0; break;
        case GGML_TYPE_IQ4_XS: dot = dot_iq4_xs_q8_K; break;
        case GGML_TYPE_IQ2_XXS: dot = dot_iq2_xxs_q8_K; break;
        case GGML_TYPE_IQ2_XS: dot = dot_iq2_xs_q8_K; break;
        case GGML_TYPE_IQ2_S: dot = dot_iq2_s_q8_K; break;
        case GGML_TYPE_IQ3_XXS: dot = dot_iq3_xxs_q8_K; break;
        case GGML_TYPE_IQ3_S: dot = dot_iq3_s_q8_K; break;
        case GGML_TYPE_IQ1_S: dot = dot_iq1_s_q8_K; break;
        case GGML_TYPE_IQ1_M: dot = dot_iq1_m_q8_K; break;
        case GGML_TYPE_TQ1_0: dot = dot_tq1_0_q8_K; break;
        case GGML_TYPE_TQ2_0: dot = dot_tq2_0_q8_K; break;
        default: return info;
    }
    return {quant_operand_type(t), dot};
}

// b is read in place when it already is the operand, with contiguous rows.
bool b_in_place(const ggml_tensor * as, const ggml_tensor * b) {
    return b->type == id_dot_info(as->type).operand && b->nb[0] == ggml_type_size(b->type);
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
    size_t total  = 0;
};

Layout layout(const ggml_tensor * op) {
    const ggml_tensor * as  = op->src[0];
    const ggml_tensor * b   = op->src[1];
    const ggml_tensor * ids = op->src[2];
    Layout              l;
    if (!b_in_place(as, b)) {
        l.packed = align_up(ggml_row_size(id_dot_info(as->type).operand, b->ne[0]) * size_t(ggml_nrows(b)),
                            SCRATCH_ALIGN);
    }
    const size_t n_as   = size_t(as->ne[2]);
    const size_t n_cols = size_t(ids->ne[0] * ids->ne[1]);
    l.counts            = l.packed;
    l.lists             = l.counts + align_up(n_as * sizeof(int64_t), SCRATCH_ALIGN);
    l.total             = l.lists + align_up(n_as * n_cols * sizeof(Column), SCRATCH_ALIGN);
    return l;
}

bool mul_mat_id_fits(const ggml_tensor * op) {
    const ggml_tensor * as  = op->src[0];
    const ggml_tensor * b   = op->src[1];
    const ggml_tensor * ids = op->src[2];
    if (as == nullptr || b == nullptr || ids == nullptr || ids->type != GGML_TYPE_I32 || op->type != GGML_TYPE_F32) {
        return false;
    }
    return as->ne[3] == 1 && b->ne[3] == 1 && ids->ne[2] == 1 && ids->ne[3] == 1 && as->ne[0] == b->ne[0] &&
           ids->ne[1] == b->ne[2] && b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0 && op->ne[0] == as->ne[1] &&
           op->ne[1] == ids->ne[0] && op->ne[2] == b->ne[2] && op->ne[3] == 1 && op->nb[0] == sizeof(float);
}

void compute_mul_mat_id(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * as  = dst->src[0];
    const ggml_tensor * b   = dst->src[1];
    const ggml_tensor * ids = dst->src[2];
    LOOM_ASSERT(mul_mat_id_fits(dst));
    const Layout l = layout(dst);
    LOOM_ASSERT(p.wsize >= l.total);

    VecDotInfo info = vec_dot_info(as->type, p.use_ref);
    GemvFn     gemv = nullptr;
    if (info.dot == nullptr) {
        info = id_dot_info(as->type);
        gemv = p.use_ref ? nullptr : best_kernels().gemv_quant[as->type];
    }
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

    if (l.packed != 0) {
        const Range r = split_range(ne11 * b->ne[2], p.ith, p.nth);
        for (int64_t ir = r.begin; ir < r.end; ++ir) {
            const char * src = static_cast<const char *>(b->data) + (ir % ne11) * b->nb[1] + (ir / ne11) * b->nb[2];
            convert_f32_row(info.operand, src, b->nb[0], scratch + size_t(ir) * row_size, K);
        }
    }
    if (p.ith == 0) {
        std::fill(counts, counts + n_as, int64_t(0));
        for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t e = 0; e < n_ids; ++e) {
                const int32_t id = *reinterpret_cast<const int32_t *>(static_cast<const char *>(ids->data) +
                                                                      e * ids->nb[0] + t * ids->nb[1]);
                if (id < 0 || id >= n_as) {
                    auto * out =
                        reinterpret_cast<float *>(static_cast<char *>(dst->data) + e * dst->nb[1] + t * dst->nb[2]);
                    std::fill(out, out + M, 0.0f);
                    continue;
                }
                lists[id * n_cols + counts[id]++] = {int32_t(e), int32_t(t)};
            }
        }
    }
    p.sync();

    const int64_t blocks = (M + ROW_BLOCK - 1) / ROW_BLOCK;
    int64_t       n_items = 0;
    for (int64_t a = 0; a < n_as; ++a) {
        n_items += counts[a] > 0 ? blocks : 0;
    }
    const Range mine = split_range(n_items, p.ith, p.nth);
    int64_t     item = 0; // first item of expert a
    for (int64_t a = 0; a < n_as && item < mine.end; ++a) {
        if (counts[a] == 0) {
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
}

bool supports_mul_mat_id(const ggml_tensor * op) {
    if (!mul_mat_id_fits(op)) {
        return false;
    }
    const ggml_tensor * as   = op->src[0];
    const ggml_tensor * b    = op->src[1];
    const VecDotInfo    info = id_dot_info(as->type);
    if (info.dot == nullptr || !convertible_operand(info.operand) || as->nb[0] != ggml_type_size(as->type) ||
        as->ne[0] % ggml_blck_size(info.operand) != 0) {
        return false;
    }
    // b is f32 (converted), or already the operand with contiguous rows.
    return b->type == GGML_TYPE_F32 || b_in_place(as, b);
}

size_t work_size_mul_mat_id(const ggml_tensor * op, int) {
    return layout(op).total;
}

} // namespace

void add_matmul_id_kernels(OpKernels & t) {
    t[GGML_OP_MUL_MAT_ID] = {compute_mul_mat_id, supports_mul_mat_id, work_size_mul_mat_id};
}

} // namespace loom::cpu
