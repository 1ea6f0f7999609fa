// The matrix-vector path of GGML_OP_MUL_MAT (matmul.cpp describes the
// three paths): b converted by the kernel table, then the table's gemv
// over items of rows, each weight read once for a group of columns, with
// prepared columns (Note [Prepared-column blocking]) or rows decoded once
// (Note [Rows decoded once]) where the table has them.

#include <algorithm>
#include <atomic>
#include <optional>

#include "backends/cpu/repack.h"
#include "core/types.h"
#include "matmul_parts.h"

namespace loom::cpu::mm {

namespace {

GemvFn gemv_for(const KernelTable & kt, const ggml_tensor * a) {
    if (is_repacked(a)) {
        // Note [Repacked weights]: F16, Q4_K and IQ4_XS take a kernel of their own;
        // Q4_0 and Q8_0 take qgemm_for's.
        return a->type == GGML_TYPE_F16 ? kt.gemv_f16_x8 : kt.gemv_repacked[a->type];
    }
    return table_gemv(kt, a->type);
}

// Products of quantized weights where the table prepares the columns once
// for every row (Note [Prepared columns] in the AVX-512 table); the fields
// are null where it does not.
QGemmKernels qgemm_for(const KernelTable & kt, const ggml_tensor * a, const ggml_tensor * b) {
    static_assert(QGEMM_COLS == GEMV_MAX_COLS, "a prepared group is one gemv call's columns");
    QGemmKernels ops;
    if (is_repacked(a) && kt.gemv_repacked[a->type] != nullptr) {
        return ops; // a layout of the table's own gemv_repacked (Q4_K, IQ4_XS; Q4_0 on Arm)
    }
    if (is_repacked(a) && a->type != GGML_TYPE_F16) {
        // Note [Repacked weights]: the only kernels that read this layout.
        ops = a->type == GGML_TYPE_Q4_0 ? kt.qgemm_q4_0_x8 : kt.qgemm_q8_0_x8;
        LOOM_ASSERT(ops.gemm != nullptr && ops.min_cols <= 1);
        return ops;
    }
    switch (a->type) {
        case GGML_TYPE_Q4_0: ops = kt.qgemm_q4_0; break;
        case GGML_TYPE_Q8_0: ops = kt.qgemm_q8_0; break;
        case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64:
        case GGML_TYPE_IQ1_M: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            ops = kt.qgemm_quant[a->type]; break;
    }
    if (ops.cols_bytes == nullptr || ops.prepare == nullptr || ops.gemm == nullptr || b->ne[1] < ops.min_cols) {
        return {};
    }
    return ops;
}

// Bytes of the prepared columns of b (0 where the product has none).
size_t qgemm_prepared_bytes(const QGemmKernels & ops, const ggml_tensor * b) {
    if (ops.gemm == nullptr) {
        return 0;
    }
    const int64_t n_cg = (b->ne[1] + GEMV_MAX_COLS - 1) / GEMV_MAX_COLS;
    return align_up(ops.cols_bytes(b->ne[0]), SCRATCH_ALIGN) * size_t(n_cg * b->ne[2] * b->ne[3]);
}

// Note [Prepared-column blocking]
// With prepared columns and more columns than a gemv call takes, an item is
// QGEMM_ITEM_ROWS rows, taken through K in parts of qgemm_k_blocks()
// blocks, each part through every column group: the rows' part (at most
// about 256 KiB) stays in L2 while a column group's part streams past it
// once for all the rows, instead of once per 16 rows. The partial sums of
// the item's rows wait in the thread's scratch between parts; the bits are
// those of one pass over K, whatever the cuts (kernel_table.h, QGemmFn).
constexpr int64_t QGEMM_ITEM_ROWS = 4 * GEMV_ROW_ALIGN;

// Bytes of one thread's partial sums: an item's rows for every column group.
size_t qgemm_thread_acc_bytes(const QGemmKernels & ops, const ggml_tensor * b) {
    if (ops.gemm == nullptr) {
        return 0;
    }
    const int64_t n_cg = (b->ne[1] + GEMV_MAX_COLS - 1) / GEMV_MAX_COLS;
    return align_up(qgemm_acc_floats(QGEMM_ITEM_ROWS) * sizeof(float) * size_t(n_cg), SCRATCH_ALIGN);
}

int64_t qgemm_k_blocks(const ggml_tensor * a) {
    const int64_t kb = (256 << 10) / (QGEMM_ITEM_ROWS * int64_t(ggml_type_size(a->type)));
    return std::max<int64_t>(2 * QGEMM_K_ALIGN, kb / QGEMM_K_ALIGN * QGEMM_K_ALIGN);
}

// Work is cut into items of whole groups of GEMV_ROW_ALIGN rows of one
// matrix, at least GEMV_ITEM_MACS multiply-adds each (short rows, as in
// attention, make items of many rows); an item runs all its columns,
// GEMV_MAX_COLS at a time, while its rows stay in cache. Only when there are
// fewer items than threads are columns cut as well.
//
// Threads take chunks of consecutive items from a shared counter, so a
// thread slowed by anything else on the machine leaves more of the work to
// the others (Note [Guided chunks]). Which thread computes an item never
// changes its result (each element's operations depend only on where it is
// in the matrix), so the result stays independent of the thread count and
// of the timing.
//
// Note [Guided chunks]
// A chunk is a share of the items not yet taken: each thread first takes
// 1/(2 nth) of all items, without the counter, then every later chunk is
// 1/(2 nth) of what the counter says is left, down to one item. Early
// chunks are long (long runs of rows for the prefetchers, few counter
// updates); the last ones are a single item, so the threads reach the
// barrier after the product at most about one item apart. With chunks of a
// fixed size, the last chunk left one thread alone for up to a chunk's time
// (about 12 us of a 6.5 MB product, on every product of a token).
constexpr int64_t GEMV_ITEM_MACS = 32768;

// Rows of an item without prepared columns: whole groups of GEMV_ROW_ALIGN,
// at least GEMV_ITEM_MACS multiply-adds against nc columns.
int64_t gemv_min_rows(int64_t K, int64_t nc) {
    const int64_t macs_per_row = std::max<int64_t>(1, K * std::min<int64_t>(nc, GEMV_MAX_COLS));
    return std::clamp<int64_t>(GEMV_ITEM_MACS / macs_per_row, GEMV_ROW_ALIGN, 64 * GEMV_ROW_ALIGN) / GEMV_ROW_ALIGN *
           GEMV_ROW_ALIGN;
}

// Note [Rows decoded once]
// The grid i-quants and the ternary types spend most of a product on
// decoding their rows (grid lookups, sign patterns), and a K-quant's
// scales and mins cost as much as its product with a column. With more
// columns than one gemv call takes, an item's rows are decoded once into
// the thread's scratch (KernelTable::decode_rows) and every column group of
// the item meets the decoded rows (gemv_decoded) instead of decoding them
// again per group. The levels, scales and block scales are the decoder's
// own, and the bits those of the type's gemv_quant entry: on the AVX2 table
// rows are decoded one by one (IQ4_XS: Note [IQ4_XS stored rows]) or, Q4_K
// and Q6_K, into panels of 8 rows (Notes [Q4_K panels of eight rows] and
// [Q6_K panels of eight rows]); the AVX-512 table
// decodes them into VNNI panels of 16 rows (Note [Decoded panels]; Q4_K:
// Note [K-quant panels]). The panels' products add the same exact block
// totals as the gemv_quant entries, in the same order. Such items take
// whole panels of rows.
DecodeRowsFn rows_decoder(const KernelTable & kt, const ggml_tensor * a, const ggml_tensor * b) {
    if (kt.gemv_decoded[a->type] == nullptr || b->ne[1] <= GEMV_MAX_COLS) {
        return nullptr;
    }
    // Repacked rows decode to the same stored rows (Note [Repacked Q4_K]).
    return is_repacked(a) ? kt.decode_rows_repacked[a->type] : kt.decode_rows[a->type];
}

// Rows of an item whose rows are decoded once: whole panels, and up to 64
// rows while their decoded blocks take at most 256 KiB (they stay in L2
// while every column group passes): what a kernel does once per call for
// its columns (Q4_K's layout by dwords on AVX2) is then shared by more rows.
// This is the most (what the scratch holds); decoded_rows_for picks fewer
// where the matrix is too small for four items a thread.
int64_t decoded_item_rows(int64_t K, int64_t nc) {
    const int64_t fit  = int64_t(256 << 10) / int64_t(std::max<size_t>(decoded_row_bytes(K), 1));
    const int64_t rows = std::max(gemv_min_rows(K, nc), std::min<int64_t>(64, fit));
    return (rows + DECODED_PANEL_ROWS - 1) / DECODED_PANEL_ROWS * DECODED_PANEL_ROWS;
}

int64_t decoded_rows_for(int64_t M, int nth, int64_t K, int64_t nc) {
    const int64_t most  = decoded_item_rows(K, nc);
    const int64_t least = (gemv_min_rows(K, nc) + DECODED_PANEL_ROWS - 1) / DECODED_PANEL_ROWS * DECODED_PANEL_ROWS;
    const int64_t share = M / (4 * int64_t(std::max(nth, 1))) / DECODED_PANEL_ROWS * DECODED_PANEL_ROWS;
    return std::clamp(share, least, std::max(least, most));
}

// Bytes of one thread's decoded rows (0 where rows are not decoded once).
size_t decoded_thread_bytes(const ggml_tensor * a, const ggml_tensor * b) {
    if (rows_decoder(best_kernels(), a, b) == nullptr) {
        return 0;
    }
    return align_up(decoded_rows_bytes(a->ne[0], decoded_item_rows(a->ne[0], b->ne[1])), SCRATCH_ALIGN);
}

} // namespace

// Bytes of one product's part of the scratch after the header: b packed,
// b's prepared columns, each thread's partial sums and decoded rows.
size_t gemv_region_bytes(const ggml_tensor * a, const ggml_tensor * b, int n_threads) {
    const QGemmKernels qg = qgemm_for(best_kernels(), a, b);
    return align_up(packed_b_bytes(a, b) + qgemm_prepared_bytes(qg, b) +
                        (qgemm_thread_acc_bytes(qg, b) + decoded_thread_bytes(a, b)) * size_t(std::max(n_threads, 1)),
                    SCRATCH_ALIGN);
}

namespace {

// One product of the matrix-vector path: its b made ready (packed, and
// prepared where the kernels take prepared columns) by all threads, then
// its items computed in any order by any thread.
class GemvProduct {
  public:
    GemvProduct(const KernelTable & kt, ggml_tensor * dst, char * region, size_t region_size, int nth);

    // Thread ith's share of making b ready; every thread's share must be
    // done (a sync) before any item runs.
    void prepare(const KernelTable & kt, int ith, int nth) const;

    int64_t items() const { return n_items_; }

    // Items [begin, end) on thread ith. Consecutive items of one matrix may
    // go to the kernel in one call (merge), so end bounds what one call takes.
    void run(int ith, int64_t begin, int64_t end) const;

  private:
    const ggml_tensor * a_;
    const ggml_tensor * b_;
    ggml_tensor *       dst_;
    ggml_type           operand_;
    GemvFn              gemv_;
    int64_t             K_;
    size_t              row_size_;
    char *              region_;
    BOperand            bop_;
    size_t              ldb_;
    QGemmKernels        qg_;
    int64_t             n_cg_b_;
    size_t              group_bytes_;
    char *              prepared_;
    ProductShape        shape_;
    bool                heads_;
    int64_t             NC_, NB_;
    size_t              ldb_c_;
    int64_t             item_rows_, n_ru_, n_cg_, per_cg_, n_items_;
    size_t              ldd_;
    size_t              acc_bytes_;
    char *              acc_base_;
    int64_t             nb_k_, kc_;
    bool                merge_;
    DecodeRowsFn        decode_;      // Note [Rows decoded once]; null: rows read as they are
    GemvFn              gemv_decoded_;
    size_t              dec_bytes_;   // per thread
    char *              dec_base_;
};

GemvProduct::GemvProduct(const KernelTable & kt, ggml_tensor * dst, char * region, size_t region_size, int nth)
    : a_(dst->src[0]), b_(dst->src[1]), dst_(dst), operand_(operand_type(a_)), gemv_(gemv_for(kt, a_)),
      K_(a_->ne[0]), row_size_(ggml_row_size(operand_, K_)), region_(region) {
    LOOM_ASSERT(region_size >= gemv_region_bytes(a_, b_, nth));
    const bool packed = mul_mat_packs_b(a_, b_);
    bop_              = b_operand(b_, packed ? region : nullptr, row_size_);
    ldb_              = packed ? row_size_ : b_->nb[1];
    qg_               = qgemm_for(kt, a_, b_);
    LOOM_ASSERT(gemv_ != nullptr || qg_.gemm != nullptr);
    n_cg_b_           = (b_->ne[1] + GEMV_MAX_COLS - 1) / GEMV_MAX_COLS;
    group_bytes_      = qg_.gemm != nullptr ? align_up(qg_.cols_bytes(K_), SCRATCH_ALIGN) : 0;
    prepared_         = region + packed_b_bytes(a_, b_);
    LOOM_ASSERT(qg_.gemm == nullptr || packed);
    shape_ = product_shape(a_, b_, dst);
    const auto [M, N, ne2, nbatch, r2, r3] = shape_;
    // Note [Heads as columns]
    // One column per matrix, and r2 > 1 matrices of b meeting each matrix of
    // a (attention with grouped heads during generation: 8 query heads per
    // key head): those r2 columns are taken as the columns of one product
    // with a's matrix, so its rows are read once for all of them instead of
    // once per column. Each element's operations are the same either way
    // (gemv sums every (row, column) pair on its own), so the results are
    // too. Items then run over a's matrices (NB) with NC = r2 columns each.
    heads_                     = qg_.gemm == nullptr && N == 1 && r2 > 1;
    NC_                        = heads_ ? r2 : N;
    NB_                        = heads_ ? a_->ne[2] * dst->ne[3] : nbatch;
    ldb_c_                     = heads_ ? (packed ? row_size_ : b_->nb[2]) : ldb_;
    const int64_t min_rows     = gemv_min_rows(K_, NC_);
    const bool    may_decode   = qg_.gemm == nullptr && !heads_ && rows_decoder(kt, a_, b_) != nullptr;
    item_rows_ = qg_.gemm != nullptr && N > GEMV_MAX_COLS ? QGEMM_ITEM_ROWS
                 : may_decode                             ? decoded_rows_for(M, nth, K_, NC_)
                                                          : min_rows;
    n_ru_      = (M + item_rows_ - 1) / item_rows_;
    n_cg_      = (NC_ + GEMV_MAX_COLS - 1) / GEMV_MAX_COLS;
    const bool cut_col = NB_ * n_ru_ < nth && n_cg_ > 1;
    per_cg_            = cut_col ? 1 : n_cg_; // column groups per item
    n_items_           = NB_ * n_ru_ * (n_cg_ / per_cg_);
    ldd_               = (heads_ ? dst->nb[2] : dst->nb[1]) / sizeof(float);
    acc_bytes_         = qgemm_thread_acc_bytes(qg_, b_);
    acc_base_          = prepared_ + qgemm_prepared_bytes(qg_, b_);
    nb_k_              = K_ / ggml_blck_size(a_->type);
    // K is cut only where many columns meet the same rows.
    kc_ = qg_.gemm == nullptr ? 0 : b_->ne[1] > GEMV_MAX_COLS ? qgemm_k_blocks(a_) : nb_k_;
    // Repacked weights with one group of columns and no cut of K: the
    // consecutive items of a chunk that belong to one matrix go to the kernel
    // in one call, which may read them as several streams.
    merge_ = is_repacked(a_) && per_cg_ == n_cg_ && n_cg_ == 1 && (kc_ == nb_k_ || qg_.gemm == nullptr);
    // Note [Rows decoded once]: only where an item meets several column groups.
    decode_       = qg_.gemm == nullptr && !heads_ && per_cg_ > 1 ? rows_decoder(kt, a_, b_) : nullptr;
    gemv_decoded_ = kt.gemv_decoded[a_->type];
    dec_bytes_    = decoded_thread_bytes(a_, b_);
    dec_base_     = acc_base_ + acc_bytes_ * size_t(nth);
    LOOM_ASSERT(decode_ == nullptr || (dec_bytes_ >= decoded_rows_bytes(K_, item_rows_) && !merge_));
}

void GemvProduct::prepare(const KernelTable & kt, int ith, int nth) const {
    if (qg_.gemm != nullptr) {
        // Each thread takes whole groups of columns: packs them, then
        // prepares them, so one sync covers both.
        const Range r = split_range(n_cg_b_ * b_->ne[2] * b_->ne[3], ith, nth);
        for (int64_t grp = r.begin; grp < r.end; ++grp) {
            const int64_t cg    = grp % n_cg_b_;
            const int64_t batch = grp / n_cg_b_; // = i3 * ne2 + i2
            const int64_t i2    = batch % b_->ne[2];
            const int64_t i3    = batch / b_->ne[2];
            const int64_t c0    = cg * GEMV_MAX_COLS;
            const int     ncols = int(std::min<int64_t>(GEMV_MAX_COLS, b_->ne[1] - c0));
            for (int64_t c = c0; c < c0 + ncols; ++c) {
                const char * src = static_cast<const char *>(b_->data) + c * b_->nb[1] + i2 * b_->nb[2] + i3 * b_->nb[3];
                char *       out = region_ + size_t(batch * b_->ne[1] + c) * row_size_; // bop_.column
                convert_operand(kt, operand_, src, b_->nb[0], out, K_);
            }
            qg_.prepare(K_, bop_.column(c0, i2, i3), ldb_, ncols, prepared_ + size_t(grp) * group_bytes_);
        }
    } else if (bop_.packed) {
        ComputeParams pp;
        pp.ith   = ith;
        pp.nth   = nth;
        pp.wdata = region_;
        pack_b(pp, kt, b_, operand_, row_size_);
    }
}

void GemvProduct::run(int ith, int64_t begin, int64_t end) const {
    const ggml_tensor * a                    = a_;
    const ggml_tensor * dst                  = dst_;
    const auto [M, N, ne2, nbatch, r2, r3]   = shape_;
    auto * const        acc = reinterpret_cast<float *>(acc_base_ + acc_bytes_ * size_t(ith));
    const int64_t       groups_per_item      = n_cg_ / per_cg_;
    for (int64_t it = begin; it < end; ++it) {
        const int64_t cg0   = (it % groups_per_item) * per_cg_;
        const int64_t ru    = it / groups_per_item % n_ru_;
        const int64_t batch = it / groups_per_item / n_ru_;
        const int64_t i2    = batch % ne2;
        const int64_t i3    = batch / ne2;
        const int64_t m0    = ru * item_rows_;
        int64_t       rows  = std::min<int64_t>(item_rows_, M - m0);
        if (merge_) {
            // Items it + 1, ... of the same matrix follow item it's rows.
            const int64_t last = std::min(end, it + (n_ru_ - ru)) - 1;
            rows               = std::min<int64_t>(M, (ru + (last - it) + 1) * item_rows_) - m0;
            it                 = last;
        }

        const char * a_rows =
            static_cast<const char *>(a->data) + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3] + m0 * a->nb[1];
        char * d_mat = static_cast<char *>(dst->data) + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (qg_.gemm != nullptr) {
            // Note [Prepared-column blocking]
            for (int64_t i0 = 0; i0 < nb_k_; i0 += kc_) {
                const int64_t i1 = std::min(nb_k_, i0 + kc_);
                for (int64_t cg = cg0; cg < cg0 + per_cg_; ++cg) {
                    const int64_t c0    = cg * GEMV_MAX_COLS;
                    const int     ncols = int(std::min<int64_t>(GEMV_MAX_COLS, N - c0));
                    auto *        out   = reinterpret_cast<float *>(d_mat + c0 * dst->nb[1]) + m0;
                    const char *  prep  = prepared_ + size_t((i3 * ne2 + i2) * n_cg_b_ + cg) * group_bytes_;
                    qg_.gemm(K_, i0, i1, a_rows, a->nb[1], rows, prep, bop_.column(c0, i2, i3), ldb_, ncols,
                             acc + size_t(cg - cg0) * qgemm_acc_floats(QGEMM_ITEM_ROWS), out, ldd_);
                }
            }
            continue;
        }
        const char * rows_a   = a_rows;
        size_t       rows_lda = a->nb[1];
        GemvFn       fn       = gemv_;
        if (decode_ != nullptr) {
            // Note [Rows decoded once]
            char * dec = dec_base_ + dec_bytes_ * size_t(ith);
            decode_(K_, a_rows, a->nb[1], rows, dec);
            rows_a   = dec;
            rows_lda = decoded_row_bytes(K_);
            fn       = gemv_decoded_;
        }
        for (int64_t cg = cg0; cg < cg0 + per_cg_; ++cg) {
            const int64_t c0    = cg * GEMV_MAX_COLS;
            const int     ncols = int(std::min<int64_t>(GEMV_MAX_COLS, NC_ - c0));
            if (heads_) {
                // batch is a's matrix (i2a, i3 / r3); columns are the heads i2a r2 + c.
                const int64_t i2a = batch % a->ne[2];
                const int64_t i3h = batch / a->ne[2];
                const int64_t h0  = i2a * r2 + c0;
                const char *  ah  = static_cast<const char *>(a->data) + i2a * a->nb[2] + (i3h / r3) * a->nb[3] +
                                   m0 * a->nb[1];
                auto * out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + h0 * dst->nb[2] +
                                                       i3h * dst->nb[3]) + m0;
                gemv_(K_, ah, a->nb[1], rows, bop_.column(0, h0, i3h), ldb_c_, ncols, out, ldd_);
                continue;
            }
            auto * out = reinterpret_cast<float *>(d_mat + c0 * dst->nb[1]) + m0;
            fn(K_, rows_a, rows_lda, rows, bop_.column(c0, i2, i3), ldb_, ncols, out, ldd_);
        }
    }
}

} // namespace

// Note [Products sharing a column]
// Matrix products that read the same b and take the matrix-vector path
// (attention's q, k and v of one token; the FFN's gate and up) can be
// computed as one node: each makes its b ready in its own part of the
// scratch, one sync, then the threads take chunks of all their items from
// one counter (Note [Guided chunks]). Small products then no longer end in
// a barrier each, and a thread done with one product's rows goes on with
// the next product's instead of waiting. Each element is computed exactly
// as alone, so the results are the same bits.
void compute_gemv_products(const ComputeParams & p, const KernelTable & kt, ggml_tensor * const * dsts, int n) {
    LOOM_ASSERT(n >= 1 && n <= MAX_PRODUCT_GROUP);
    char * const             scratch = static_cast<char *>(p.wdata);
    std::atomic_ref<int64_t> next_item(*reinterpret_cast<int64_t *>(scratch));
    std::optional<GemvProduct> prods[MAX_PRODUCT_GROUP];
    int64_t                    first_item[MAX_PRODUCT_GROUP + 1];
    size_t                     offset = GEMV_HEADER;
    first_item[0]                     = 0;
    for (int i = 0; i < n; ++i) {
        const size_t bytes = gemv_region_bytes(dsts[i]->src[0], dsts[i]->src[1], p.nth);
        LOOM_ASSERT(p.wsize >= offset + bytes);
        prods[i].emplace(kt, dsts[i], scratch + offset, bytes, p.nth);
        offset += bytes;
        first_item[i + 1] = first_item[i] + prods[i]->items();
    }
    for (int i = 0; i < n; ++i) {
        prods[i]->prepare(kt, p.ith, p.nth);
    }
    const int64_t n_items = first_item[n];
    // Note [Guided chunks]
    const int64_t share = 2 * int64_t(p.nth);
    const int64_t first = n_items / share; // each thread's first chunk
    if (p.ith == 0) {
        next_item.store(first * p.nth, std::memory_order_relaxed);
    }
    p.sync(); // b packed (and prepared) and the counter set before anyone takes a chunk

    int64_t begin = first * p.ith;
    int64_t end   = begin + first;
    for (;;) {
        if (begin >= end) {
            const int64_t left = n_items - next_item.load(std::memory_order_relaxed);
            if (left <= 0) {
                break;
            }
            const int64_t size = std::max<int64_t>(1, left / share);
            begin              = next_item.fetch_add(size, std::memory_order_relaxed);
            if (begin >= n_items) {
                break;
            }
            end = std::min(n_items, begin + size);
        }
        // The chunk, cut where one product's items end and the next's begin.
        for (int i = 0; i < n && begin < end; ++i) {
            if (begin < first_item[i + 1]) {
                const int64_t stop = std::min(end, first_item[i + 1]);
                prods[i]->run(p.ith, begin - first_item[i], stop - first_item[i]);
                begin = stop;
            }
        }
    }
}

void compute_mul_mat_gemv(const ComputeParams & p, const KernelTable & kt, ggml_tensor * dst) {
    compute_gemv_products(p, kt, &dst, 1);
}

} // namespace loom::cpu::mm
