// GGML_OP_MUL_MAT and GGML_OP_OUT_PROD.
//
// mul_mat: dst[m, n, i2, i3] = dot(row m of a's matrix (i2 / r2, i3 / r3),
// column n of b's matrix (i2, i3)), r2 = ne12 / ne02, r3 = ne13 / ne03.
//
// Three paths, chosen from the shapes and types only (never from the thread
// count, so results do not depend on it):
//  - reference (use_ref): b converted into the operand type of a's dot
//    product (vec_dot_info), then one portable dot product per element;
//  - matrix-vector (up to GEMV_MAX_COLS columns per matrix, and every
//    quantized type with a dot product here or a gemv_quant entry in the
//    table, such as the K-quants against Q8_K on AVX2 and AVX-512): b
//    converted the same way by the kernel table, then the
//    table's gemv over blocks of rows, each weight read once for a group of
//    columns; with more columns of Q4_0/Q8_0 weights, where the table can,
//    the columns are also prepared once for all rows and the rows blocked
//    for the caches (Note [Prepared-column blocking]), with the same bits;
//  - matrix-matrix (f32, f16 and bf16 weights with more columns): the
//    blocked, packed GEMM of gemm.cpp, b read as f32 in place (and, with
//    bf16 weights on a table with a BF16 GEMM, rounded to bf16 while packed,
//    as the other two paths round it).
// In every path each dst element is computed by one thread, with a sequence
// of operations fixed by the shapes.

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>

#include "core/common.h"
#include "core/types.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"
#include "gemm.h"
#include "kernels.h"
#include "matmul_dequant.h"
#include "vec.h"

namespace loom::cpu {

namespace {

constexpr size_t SCRATCH_ALIGN = 64;

// Output tile of the reference path: TILE_M rows of a against TILE_N
// columns of b. The columns of a tile stay in cache while the rows stream
// past.
constexpr int64_t TILE_M = 16;
constexpr int64_t TILE_N = 8;

bool is_weight_type(ggml_type t) {
    return vec_dot_info(t).dot != nullptr;
}

// Weights without a dot product here take the general path
// (matmul_dequant.cpp): rows converted to f32, then the f32 product.
bool takes_dequant_path(ggml_type t) {
    return !is_weight_type(t) && mul_mat_dequantizes(t);
}

// Weights of those types for which the selected table has a matrix-vector
// product of its own (KernelTable::gemv_quant: the K-quants, Q4_1, Q5_0,
// Q5_1, IQ4_NL, IQ4_XS, MXFP4, the grid i-quants and the ternary types on
// AVX2 and AVX-512) take the
// matrix-vector path instead, b quantized to their quant_operand_type,
// except on the reference path, which keeps the general one.
bool takes_table_gemv(const ggml_tensor * a) {
    return !is_weight_type(a->type) && !is_repacked(a) && best_kernels().gemv_quant[a->type] != nullptr;
}

// The type b is converted to for a's products.
ggml_type operand_type(const ggml_tensor * a) {
    return is_weight_type(a->type) ? vec_dot_info(a->type).operand : quant_operand_type(a->type);
}

// b goes through the scratch buffer unless it already is a usable operand:
// f32 against f32 weights with contiguous rows.
bool mul_mat_packs_b(const ggml_tensor * a, const ggml_tensor * b) {
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
BOperand b_operand(const ggml_tensor * b, const void * packed, size_t row_size) {
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

// Converts n f32 values stride bytes apart into a row of the operand type,
// through the kernel table where it has the conversion.
void convert_operand(const KernelTable & kt, ggml_type type, const char * src, size_t stride, void * dst, int64_t n) {
    if (stride == sizeof(float)) {
        const auto * x = reinterpret_cast<const float *>(src);
        switch (type) {
            case GGML_TYPE_Q8_0: kt.quantize_row_q8_0(x, static_cast<block_q8_0 *>(dst), n); return;
            case GGML_TYPE_F16: kt.fp32_to_fp16_row(x, static_cast<ggml_fp16_t *>(dst), n); return;
            case GGML_TYPE_Q8_K:
                // The reference quantizer's bits.
                if (kt.quantize_row_q8_K != nullptr) {
                    kt.quantize_row_q8_K(x, static_cast<block_q8_K *>(dst), n);
                    return;
                }
                break;
            default: break;
        }
    }
    convert_f32_row(type, src, stride, dst, n);
}

void pack_b(const ComputeParams & p, const KernelTable & kt, const ggml_tensor * b, ggml_type operand,
            size_t row_size) {
    const int64_t K     = b->ne[0];
    const int64_t ne1   = b->ne[1];
    const int64_t ne2   = b->ne[2];
    const int64_t nrows = ne1 * ne2 * b->ne[3];
    const Range   r     = split_range(nrows, p.ith, p.nth);
    char *        out   = static_cast<char *>(p.wdata);
    for (int64_t ir = r.begin; ir < r.end; ++ir) {
        const int64_t i3  = ir / (ne1 * ne2);
        const int64_t i2  = ir / ne1 % ne2;
        const int64_t i1  = ir % ne1;
        const char *  src = static_cast<const char *>(b->data) + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
        convert_operand(kt, operand, src, b->nb[0], out + size_t(ir) * row_size, K);
    }
}

struct MulMatJob {
    const ggml_tensor * a;
    ggml_tensor *       dst;
    BOperand            b;
    VecDotFn            dot;
    void *              row = nullptr; // repacked a: the thread's row in ggml's layout
    int64_t             K;
    int64_t             r2, r3;   // broadcast ratios of b over a in dims 2, 3
    int64_t             ne1, ne2; // dst (= b) columns per matrix, matrices per dim 3
};

// dst rows [m0, m1) x flattened columns [c0, c1).
void compute_tile(const MulMatJob & job, int64_t m0, int64_t m1, int64_t c0, int64_t c1) {
    const ggml_tensor * a   = job.a;
    const ggml_tensor * dst = job.dst;
    for (int64_t c = c0; c < c1; ++c) {
        const int64_t i3 = c / (job.ne1 * job.ne2);
        const int64_t i2 = c / job.ne1 % job.ne2;
        const int64_t i1 = c % job.ne1;

        const char * a_mat = static_cast<const char *>(a->data) + (i2 / job.r2) * a->nb[2] + (i3 / job.r3) * a->nb[3];
        const char * b_col = job.b.column(i1, i2, i3);
        auto * out = reinterpret_cast<float *>(static_cast<char *>(dst->data) + i1 * dst->nb[1] + i2 * dst->nb[2] +
                                               i3 * dst->nb[3]);
        for (int64_t m = m0; m < m1; ++m) {
            const char * a_row = a_mat + m * a->nb[1];
            if (job.row != nullptr) {
                repack_read(a, job.row, size_t(a_row - static_cast<const char *>(a->data)), a->nb[1]);
                a_row = static_cast<const char *>(job.row);
            }
            out[m] = job.dot(job.K, a_row, b_col);
        }
    }
}

// The reference path reads repacked weights (Note [Repacked weights]) a row
// at a time, converted into the thread's part of the scratch after b.
size_t ref_unpack_bytes(const ggml_tensor * a) {
    return is_repacked(a) ? align_up(a->nb[1], SCRATCH_ALIGN) : 0;
}
// Bytes of b packed into the operand type of a's dot product, aligned (0
// where b is read in place); the reference and matrix-vector paths put it
// first in the scratch.
size_t packed_b_bytes(const ggml_tensor * a, const ggml_tensor * b) {
    if (!mul_mat_packs_b(a, b)) {
        return 0;
    }
    return align_up(ggml_row_size(operand_type(a), b->ne[0]) * size_t(ggml_nrows(b)), SCRATCH_ALIGN);
}

void check_mul_mat(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    LOOM_ASSERT((vec_dot_info(a->type).dot != nullptr || takes_table_gemv(a)) && b->type == GGML_TYPE_F32 &&
                dst->nb[0] == sizeof(float));
    LOOM_ASSERT(dst->ne[0] == a->ne[1] && dst->ne[1] == b->ne[1] && dst->ne[2] == b->ne[2] && dst->ne[3] == b->ne[3]);
    LOOM_ASSERT(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0);
    LOOM_ASSERT(dst->nb[1] % sizeof(float) == 0);
}

void compute_mul_mat_ref(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a    = dst->src[0];
    const ggml_tensor * b    = dst->src[1];
    const VecDotInfo    info = vec_dot_info(a->type);

    const int64_t K        = a->ne[0];
    const bool    packed   = mul_mat_packs_b(a, b);
    const size_t  row_size = ggml_row_size(info.operand, K);
    if (packed) {
        LOOM_ASSERT(p.wsize >= row_size * size_t(ggml_nrows(b)));
        pack_b(p, portable_kernels(), b, info.operand, row_size);
        p.sync();
    }
    void * row = nullptr;
    if (is_repacked(a)) {
        const size_t at = packed_b_bytes(a, b) + ref_unpack_bytes(a) * size_t(p.ith);
        LOOM_ASSERT(p.wsize >= at + ref_unpack_bytes(a));
        row = static_cast<char *>(p.wdata) + at;
    }

    MulMatJob job;
    job.a   = a;
    job.dst = dst;
    job.b   = b_operand(b, packed ? p.wdata : nullptr, row_size);
    job.dot = info.dot;
    job.row = row;
    job.K   = K;
    job.r2  = b->ne[2] / a->ne[2];
    job.r3  = b->ne[3] / a->ne[3];
    job.ne1 = b->ne[1];
    job.ne2 = b->ne[2];

    // Cut the longer side of dst among the threads, in whole tiles, so each
    // thread's rectangle is as square as the shape allows.
    const int64_t nr0     = dst->ne[0];
    const int64_t nr1     = dst->ne[1] * dst->ne[2] * dst->ne[3];
    int64_t       m_begin = 0, m_end = nr0, c_begin = 0, c_end = nr1;
    if (nr0 >= nr1) {
        const Range t = split_range((nr0 + TILE_M - 1) / TILE_M, p.ith, p.nth);
        m_begin       = t.begin * TILE_M;
        m_end         = std::min(t.end * TILE_M, nr0);
    } else {
        const Range t = split_range((nr1 + TILE_N - 1) / TILE_N, p.ith, p.nth);
        c_begin       = t.begin * TILE_N;
        c_end         = std::min(t.end * TILE_N, nr1);
    }
    for (int64_t c0 = c_begin; c0 < c_end; c0 += TILE_N) {
        const int64_t c1 = std::min(c0 + TILE_N, c_end);
        for (int64_t m0 = m_begin; m0 < m_end; m0 += TILE_M) {
            compute_tile(job, m0, std::min(m0 + TILE_M, m_end), c0, c1);
        }
    }
}

// ---- matrix-vector path ----

// Whether mul_mat takes the GEMM path: float weights and more columns than a
// gemv call covers. Below that, packing the weights for the GEMM costs more
// than reading them once per four columns (bench/bench_ops: F32 and F16
// weights of 4096 x 14336 times 8 columns took 38 ms through the GEMM,
// 28 and 13 ms through two gemv passes). A function of the shapes and types
// only.
bool mul_mat_uses_gemm(const ggml_tensor * a, const ggml_tensor * b) {
    return gemm_weight_type(a->type) && b->ne[1] > GEMV_MAX_COLS;
}

GemvFn gemv_for(const KernelTable & kt, const ggml_tensor * a) {
    if (is_repacked(a)) {
        // Note [Repacked weights]: F16 takes a kernel of its own; Q4_0 and
        // Q8_0 take qgemm_for's.
        return a->type == GGML_TYPE_F16 ? kt.gemv_f16_x8 : nullptr;
    }
    switch (a->type) {
        case GGML_TYPE_F32: return kt.gemv_f32;
        case GGML_TYPE_F16: return kt.gemv_f16;
        case GGML_TYPE_BF16: return kt.gemv_bf16;
        case GGML_TYPE_Q8_0: return kt.gemv_q8_0;
        case GGML_TYPE_Q4_0: return kt.gemv_q4_0;
        default: return kt.gemv_quant[a->type];
    }
}

// Products of quantized weights where the table prepares the columns once
// for every row (Note [Prepared columns] in the AVX-512 table); the fields
// are null where it does not.
QGemmKernels qgemm_for(const KernelTable & kt, const ggml_tensor * a, const ggml_tensor * b) {
    static_assert(QGEMM_COLS == GEMV_MAX_COLS, "a prepared group is one gemv call's columns");
    QGemmKernels ops;
    if (is_repacked(a) && a->type != GGML_TYPE_F16) {
        // Note [Repacked weights]: the only kernels that read this layout.
        ops = a->type == GGML_TYPE_Q4_0 ? kt.qgemm_q4_0_x8 : kt.qgemm_q8_0_x8;
        LOOM_ASSERT(ops.gemm != nullptr && ops.min_cols <= 1);
        return ops;
    }
    switch (a->type) {
        case GGML_TYPE_Q4_0: ops = kt.qgemm_q4_0; break;
        case GGML_TYPE_Q8_0: ops = kt.qgemm_q8_0; break;
        default: ops = kt.qgemm_quant[a->type]; break;
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

// The sizes both product paths work with: dst is M x N per matrix, with
// nbatch = ne2 * ne3 matrices (batch = i3 * ne2 + i2), each taking a's
// matrix (i2 / r2, i3 / r3).
struct ProductShape {
    int64_t M, N, ne2, nbatch, r2, r3;
};

ProductShape product_shape(const ggml_tensor * a, const ggml_tensor * b, const ggml_tensor * dst) {
    return {dst->ne[0], dst->ne[1], dst->ne[2], dst->ne[2] * dst->ne[3], b->ne[2] / a->ne[2], b->ne[3] / a->ne[3]};
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

// Scratch: the counter in the first GEMV_HEADER bytes, then b packed, then
// b's prepared columns and each thread's partial sums where the product has
// them.
constexpr size_t GEMV_HEADER = 64;

// Rows of an item without prepared columns: whole groups of GEMV_ROW_ALIGN,
// at least GEMV_ITEM_MACS multiply-adds against nc columns.
int64_t gemv_min_rows(int64_t K, int64_t nc) {
    const int64_t macs_per_row = std::max<int64_t>(1, K * std::min<int64_t>(nc, GEMV_MAX_COLS));
    return std::clamp<int64_t>(GEMV_ITEM_MACS / macs_per_row, GEMV_ROW_ALIGN, 64 * GEMV_ROW_ALIGN) / GEMV_ROW_ALIGN *
           GEMV_ROW_ALIGN;
}

// Note [Rows decoded once]
// The grid i-quants and the ternary types spend most of a product on
// decoding their rows (grid lookups, sign patterns). With more columns than
// one gemv call takes, an item's rows are decoded once into the thread's
// scratch (KernelTable::decode_rows) and every column group of the item
// meets the decoded rows (gemv_decoded) instead of decoding them again per
// group. The levels, scales and block scales are the decoder's own: on
// the AVX2 table the bits are those of the type's gemv_quant entry; the
// AVX-512 table decodes them into VNNI panels of 16 rows (Note [Decoded
// panels]), whose f32 sums are added in another order. Such items take
// whole panels of rows.
DecodeRowsFn rows_decoder(const KernelTable & kt, const ggml_tensor * a, const ggml_tensor * b) {
    if (kt.gemv_decoded == nullptr || is_repacked(a) || b->ne[1] <= GEMV_MAX_COLS) {
        return nullptr;
    }
    return kt.decode_rows[a->type];
}

// Rows of an item whose rows are decoded once: whole panels.
int64_t decoded_item_rows(int64_t K, int64_t nc) {
    return (gemv_min_rows(K, nc) + DECODED_PANEL_ROWS - 1) / DECODED_PANEL_ROWS * DECODED_PANEL_ROWS;
}

// Bytes of one thread's decoded rows (0 where rows are not decoded once).
size_t decoded_thread_bytes(const ggml_tensor * a, const ggml_tensor * b) {
    if (rows_decoder(best_kernels(), a, b) == nullptr) {
        return 0;
    }
    return align_up(decoded_rows_bytes(a->ne[0], decoded_item_rows(a->ne[0], b->ne[1])), SCRATCH_ALIGN);
}

// Bytes of one product's part of the scratch after the header: b packed,
// b's prepared columns, each thread's partial sums and decoded rows.
size_t gemv_region_bytes(const ggml_tensor * a, const ggml_tensor * b, int n_threads) {
    const QGemmKernels qg = qgemm_for(best_kernels(), a, b);
    return align_up(packed_b_bytes(a, b) + qgemm_prepared_bytes(qg, b) +
                        (qgemm_thread_acc_bytes(qg, b) + decoded_thread_bytes(a, b)) * size_t(std::max(n_threads, 1)),
                    SCRATCH_ALIGN);
}

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
                 : may_decode                             ? decoded_item_rows(K_, NC_)
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
    // in one call, which reads them as two streams (Note [Repacked quads]).
    merge_ = is_repacked(a_) && per_cg_ == n_cg_ && n_cg_ == 1 && (kc_ == nb_k_ || qg_.gemm == nullptr);
    // Note [Rows decoded once]: only where an item meets several column groups.
    decode_       = qg_.gemm == nullptr && !heads_ && per_cg_ > 1 ? rows_decoder(kt, a_, b_) : nullptr;
    gemv_decoded_ = kt.gemv_decoded;
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

// ---- matrix-matrix path ----

// Scratch of the GEMM path. With at least as many matrices as threads, each
// thread computes whole matrices alone: per thread a b block and a private
// part. Otherwise all threads compute each matrix as a team: the team's
// counters and one shared b block, then a private part per thread.
size_t gemm_work_size(const ggml_tensor * a, const ggml_tensor * b, int n_threads) {
    const KernelTable & kt    = best_kernels();
    const size_t        bb    = gemm_b_block_bytes(kt, a->type, b->ne[1]);
    const size_t        pv    = gemm_private_bytes(kt, a->type);
    const size_t        nth   = size_t(std::max(n_threads, 1));
    const size_t        alone = GEMM_TEAM_HEADER + (bb + pv) * nth;
    const size_t        team  = GEMM_TEAM_HEADER + bb + pv * nth;
    return std::max(alone, team);
}

void compute_mul_mat_gemm(const ComputeParams & p, const KernelTable & kt, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];

    // Named copies, not a structured binding: the lambda below captures
    // them, which clang before 16 does not allow for bindings.
    const ProductShape shape = product_shape(a, b, dst);
    const int64_t M = shape.M, N = shape.N, ne2 = shape.ne2, nbatch = shape.nbatch, r2 = shape.r2, r3 = shape.r3;
    const size_t  bb     = gemm_b_block_bytes(kt, a->type, N);
    const size_t  pv     = gemm_private_bytes(kt, a->type);
    char *        w      = static_cast<char *>(p.wdata);

    auto problem = [&](int64_t batch) {
        const int64_t i2 = batch % ne2;
        const int64_t i3 = batch / ne2;
        GemmProblem   pr;
        pr.a_type = a->type;
        pr.a_repacked = is_repacked(a);
        pr.a      = static_cast<const char *>(a->data) + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
        pr.lda    = a->nb[1];
        pr.b      = static_cast<const char *>(b->data) + i2 * b->nb[2] + i3 * b->nb[3];
        pr.ldb    = b->nb[1];
        pr.b_step = b->nb[0];
        pr.c      = reinterpret_cast<float *>(static_cast<char *>(dst->data) + i2 * dst->nb[2] + i3 * dst->nb[3]);
        pr.ldc    = dst->nb[1] / sizeof(float);
        pr.K      = a->ne[0];
        return pr;
    };

    if (nbatch >= p.nth) {
        // Each thread starts with matrix ith, then takes the next one not
        // yet taken: a thread slowed by anything else on the machine leaves
        // more matrices to the others (attention over a prompt: 32 heads,
        // 0.4 ms each here, split evenly left the threads busy 84% of the
        // time). A matrix's results do not depend on the thread.
        LOOM_ASSERT(p.wsize >= GEMM_TEAM_HEADER + (bb + pv) * size_t(p.nth));
        std::atomic_ref<int64_t> next(*reinterpret_cast<int64_t *>(w));
        if (p.ith == 0) {
            next.store(p.nth, std::memory_order_relaxed);
        }
        p.sync();
        char * mine = w + GEMM_TEAM_HEADER + (bb + pv) * size_t(p.ith);
        for (int64_t batch = p.ith; batch < nbatch; batch = next.fetch_add(1, std::memory_order_relaxed)) {
            gemm(kt, problem(batch), 0, M, 0, N, mine, mine + bb, nullptr);
        }
        return;
    }
    LOOM_ASSERT(p.wsize >= GEMM_TEAM_HEADER + bb + pv * size_t(p.nth));
    const GemmTeam team{&p, w};
    char *         shared_b = w + GEMM_TEAM_HEADER;
    char *         mine     = w + GEMM_TEAM_HEADER + bb + pv * size_t(p.ith);
    for (int64_t batch = 0; batch < nbatch; ++batch) {
        gemm(kt, problem(batch), 0, M, 0, N, shared_b, mine, &team);
    }
}

void compute_mul_mat(const ComputeParams & p, ggml_tensor * dst) {
    if (takes_dequant_path(dst->src[0]->type) && (p.use_ref || !takes_table_gemv(dst->src[0]))) {
        compute_mul_mat_dequant(p, dst);
        return;
    }
    check_mul_mat(dst);
    if (p.use_ref) {
        compute_mul_mat_ref(p, dst);
        return;
    }
    const KernelTable & kt = best_kernels();
    if (mul_mat_uses_gemm(dst->src[0], dst->src[1])) {
        compute_mul_mat_gemm(p, kt, dst);
    } else {
        compute_mul_mat_gemv(p, kt, dst);
    }
}

// out_prod: dst[m, n, i2, i3] = sum_k a[m, k, i2 / r2, i3 / r3] * b[n, k, i2, i3].
// A thread owns whole dst rows (fixed n, i2, i3) and accumulates them over k
// in increasing order. F32 a: a dst row is the table's weighted sum of the K
// rows of a (mad_rows_f32, the row in registers while a streams by), its
// weights b[n, 0..K) gathered into scratch; like every mad_rows user, a
// weight of 0 skips its row (0 times an infinite a gives 0, not NaN). Other
// types of a: rows are taken OUT_PROD_ROWS at a time so that each row of a,
// converted to f32 once, serves several dst rows.
constexpr int64_t OUT_PROD_ROWS = 16;

size_t out_prod_thread_scratch(const ggml_tensor * a) {
    if (a->type == GGML_TYPE_F32) {
        return align_up(size_t(a->ne[1]) * sizeof(float), SCRATCH_ALIGN);
    }
    return align_up(size_t(a->ne[0]) * sizeof(float), SCRATCH_ALIGN);
}

void compute_out_prod(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    LOOM_ASSERT(b->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float) && a->nb[0] == ggml_type_size(a->type));
    LOOM_ASSERT(dst->ne[0] == a->ne[0] && dst->ne[1] == b->ne[0] && a->ne[1] == b->ne[1] && dst->ne[2] == b->ne[2] &&
                dst->ne[3] == b->ne[3]);
    LOOM_ASSERT(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0);

    const int64_t   M        = a->ne[0];
    const int64_t   K        = a->ne[1];
    const int64_t   N        = dst->ne[1];
    const int64_t   ne2      = dst->ne[2];
    const int64_t   r2       = ne2 / a->ne[2];
    const int64_t   r3       = dst->ne[3] / a->ne[3];
    const size_t    slice    = out_prod_thread_scratch(a);
    ggml_to_float_t to_float = a->type == GGML_TYPE_F32 ? nullptr : type_info(a->type, __func__).to_float;
    LOOM_ASSERT(p.wsize >= slice * size_t(p.nth));
    float * const scratch = reinterpret_cast<float *>(static_cast<char *>(p.wdata) + slice * size_t(p.ith));

    auto dst_row = [&](int64_t n, int64_t i2, int64_t i3) {
        return reinterpret_cast<float *>(static_cast<char *>(dst->data) + n * dst->nb[1] + i2 * dst->nb[2] +
                                         i3 * dst->nb[3]);
    };

    const Range r = split_range(N * ne2 * dst->ne[3], p.ith, p.nth);
    if (to_float == nullptr) {
        const MadRowsFn mad = kernels(p.use_ref).mad_rows_f32;
        for (int64_t ir = r.begin; ir < r.end; ++ir) {
            const int64_t i3    = ir / (N * ne2);
            const int64_t i2    = ir / N % ne2;
            const int64_t n     = ir % N;
            const char *  a_mat = static_cast<const char *>(a->data) + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
            const char *  b_row = static_cast<const char *>(b->data) + n * b->nb[0] + i2 * b->nb[2] + i3 * b->nb[3];
            for (int64_t k = 0; k < K; ++k) {
                std::memcpy(&scratch[k], b_row + k * b->nb[1], sizeof(float));
            }
            float * y = dst_row(n, i2, i3);
            std::memset(y, 0, size_t(M) * sizeof(float));
            mad(M, y, a_mat, a->nb[1], K, scratch);
        }
        return;
    }

    float * const a_row = scratch;
    for (int64_t ir = r.begin; ir < r.end;) {
        const int64_t i3 = ir / (N * ne2);
        const int64_t i2 = ir / N % ne2;
        const int64_t n0 = ir % N;
        const int64_t n1 = std::min({N, n0 + OUT_PROD_ROWS, n0 + (r.end - ir)});

        for (int64_t n = n0; n < n1; ++n) {
            std::memset(dst_row(n, i2, i3), 0, size_t(M) * sizeof(float));
        }
        const char * a_mat = static_cast<const char *>(a->data) + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
        const char * b_mat = static_cast<const char *>(b->data) + i2 * b->nb[2] + i3 * b->nb[3];
        for (int64_t k = 0; k < K; ++k) {
            to_float(a_mat + k * a->nb[1], a_row, M);
            for (int64_t n = n0; n < n1; ++n) {
                float bnk;
                std::memcpy(&bnk, b_mat + n * b->nb[0] + k * b->nb[1], sizeof(bnk));
                mad_f32(M, dst_row(n, i2, i3), a_row, bnk);
            }
        }
        ir += n1 - n0;
    }
}

// MUL_MAT with F16 or BF16 columns (ggml takes them where they are the
// weights' vec_dot_type: im2col of an F16 kernel, for one): the threads first
// widen b into F32 at the start of the scratch, then the F32 product runs on
// a copy of the node whose src[1] is that F32 matrix, with the rest of the
// scratch.
bool widens_b(const ggml_tensor * op) {
    return op->op == GGML_OP_MUL_MAT && op->src[1]->type != GGML_TYPE_F32;
}

ggml_tensor widened_shape(const ggml_tensor * b) {
    ggml_tensor w = *b;
    w.type        = GGML_TYPE_F32;
    w.view_src    = nullptr;
    w.nb[0]       = sizeof(float);
    for (int i = 1; i < GGML_MAX_DIMS; ++i) {
        w.nb[i] = w.nb[i - 1] * size_t(w.ne[i - 1]);
    }
    return w;
}

size_t widened_bytes(const ggml_tensor * b) {
    return align_up(size_t(ggml_nelements(b)) * sizeof(float), SCRATCH_ALIGN);
}

} // namespace

void compute_matmul(const ComputeParams & p, ggml_tensor * dst) {
    if (widens_b(dst)) {
        const ggml_tensor * b        = dst->src[1];
        ggml_tensor         wide     = widened_shape(b);
        const size_t        bytes    = widened_bytes(b);
        ggml_to_float_t     to_float = type_info(b->type, __func__).to_float;
        LOOM_ASSERT(p.wsize >= bytes);
        wide.data              = p.wdata;
        const int64_t n_rows   = ggml_nrows(b);
        const Range   r        = split_range(n_rows, p.ith, p.nth);
        for (int64_t ir = r.begin; ir < r.end; ++ir) {
            const int64_t i3 = ir / (b->ne[1] * b->ne[2]);
            const int64_t i2 = ir / b->ne[1] % b->ne[2];
            const int64_t i1 = ir % b->ne[1];
            to_float(static_cast<const char *>(b->data) + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3],
                     static_cast<float *>(wide.data) + ir * b->ne[0], b->ne[0]);
        }
        p.sync();
        ggml_tensor node = *dst;
        node.src[1]      = &wide;
        ComputeParams q  = p;
        q.wdata          = static_cast<char *>(p.wdata) + bytes;
        q.wsize          = p.wsize - bytes;
        compute_mul_mat(q, &node);
        return;
    }
    switch (dst->op) {
        case GGML_OP_MUL_MAT:
            compute_mul_mat(p, dst);
            break;
        case GGML_OP_OUT_PROD:
            compute_out_prod(p, dst);
            break;
        default:
            LOOM_ASSERT(false && "compute_matmul: not a matrix op");
    }
}

bool matmul_joins_group(const ggml_tensor * op) {
    return op->op == GGML_OP_MUL_MAT && supports_matmul(op) && !widens_b(op) &&
           (is_weight_type(op->src[0]->type) || takes_table_gemv(op->src[0])) &&
           !mul_mat_uses_gemm(op->src[0], op->src[1]);
}

size_t work_size_products(ggml_tensor * const * nodes, int n, int n_threads) {
    size_t need = GEMV_HEADER;
    for (int i = 0; i < n; ++i) {
        need += gemv_region_bytes(nodes[i]->src[0], nodes[i]->src[1], n_threads);
    }
    return need;
}

void compute_products(const ComputeParams & p, ggml_tensor * const * nodes, int n) {
    LOOM_ASSERT(!p.use_ref);
    for (int i = 0; i < n; ++i) {
        check_mul_mat(nodes[i]);
        LOOM_ASSERT(matmul_joins_group(nodes[i]) && nodes[i]->src[1] == nodes[0]->src[1]);
    }
    compute_gemv_products(p, best_kernels(), nodes, n);
}

bool supports_matmul(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    const bool b_type = b != nullptr && (b->type == GGML_TYPE_F32 || (op->op == GGML_OP_MUL_MAT &&
                                                                       (b->type == GGML_TYPE_F16 || b->type == GGML_TYPE_BF16)));
    if (a == nullptr || !b_type || !(is_weight_type(a->type) || takes_dequant_path(a->type)) ||
        op->type != GGML_TYPE_F32) {
        return false;
    }
    // Rows of a and of dst are read and written as contiguous runs.
    if (a->nb[0] != ggml_type_size(a->type) || op->nb[0] != sizeof(float)) {
        return false;
    }
    switch (op->op) {
        case GGML_OP_MUL_MAT:
            if (takes_dequant_path(a->type)) {
                return op->nb[1] % sizeof(float) == 0;
            }
            return a->ne[0] % ggml_blck_size(vec_dot_info(a->type).operand) == 0;
        case GGML_OP_OUT_PROD:
            return a->ne[0] % ggml_blck_size(a->type) == 0;
        default:
            return false;
    }
}

size_t work_size_matmul(const ggml_tensor * op, int n_threads) {
    if (widens_b(op)) {
        ggml_tensor       wide = widened_shape(op->src[1]);
        ggml_tensor       node = *op;
        node.src[1]            = &wide;
        return widened_bytes(op->src[1]) + work_size_matmul(&node, n_threads);
    }
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    switch (op->op) {
        case GGML_OP_MUL_MAT: {
            if (takes_dequant_path(a->type)) {
                // The reference path dequantizes; the others may take the
                // table's matrix-vector product.
                const size_t dq = work_size_mul_mat_dequant(a, b, n_threads);
                return takes_table_gemv(a) ? std::max(dq, GEMV_HEADER + gemv_region_bytes(a, b, n_threads)) : dq;
            }
            // The reference path and the gemv path pack b; the GEMM path
            // needs panels per thread. use_ref is not known when the plan
            // is made, so the larger need is reserved.
            // The reference path's rows of repacked weights.
            size_t need = packed_b_bytes(a, b) + ref_unpack_bytes(a) * size_t(std::max(n_threads, 1));
            if (mul_mat_uses_gemm(a, b)) {
                need = std::max(need, gemm_work_size(a, b, n_threads));
            } else {
                need = std::max(need, GEMV_HEADER + gemv_region_bytes(a, b, n_threads));
            }
            return need;
        }
        case GGML_OP_OUT_PROD:
            return out_prod_thread_scratch(a) * size_t(n_threads);
        default:
            return 0;
    }
}

} // namespace loom::cpu
