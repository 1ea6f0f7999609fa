// GGML_OP_MUL_MAT and GGML_OP_OUT_PROD.
//
// mul_mat: dst[m, n, i2, i3] = dot(row m of a's matrix (i2 / r2, i3 / r3),
// column n of b's matrix (i2, i3)), r2 = ne12 / ne02, r3 = ne13 / ne03.
//
// Three paths, chosen from the shapes and types only (never from the thread
// count, so results do not depend on it):
//  - reference (use_ref): b converted into the operand type of a's dot
//    product (vec_dot_info), then one portable dot product per element;
//  - matrix-vector (matmul_gemv.cpp; up to GEMV_MAX_COLS columns per
//    matrix, and every quantized type with a dot product here or a
//    gemv_quant entry in the table, such as the K-quants against Q8_K on
//    AVX2 and AVX-512): b converted the same way by the kernel table, then
//    the table's gemv over blocks of rows, each weight read once for a
//    group of columns; with more columns of Q4_0/Q8_0 weights, where the table can,
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

#include "core/common.h"
#include "core/types.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"
#include "gemm.h"
#include "kernels.h"
#include "matmul_dequant.h"
#include "matmul_parts.h"
#include "vec.h"

namespace loom::cpu {

namespace mm {

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
            case GGML_TYPE_Q8_1:
                if (kt.quantize_row_q8_1 != nullptr) {
                    kt.quantize_row_q8_1(x, static_cast<block_q8_1 *>(dst), n);
                    return;
                }
                break;
            case GGML_TYPE_F32: case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
            case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
            case GGML_TYPE_Q6_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
            case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S:
            case GGML_TYPE_IQ4_XS: case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64:
            case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_BF16: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0:
            case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
                break;
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

} // namespace mm

using namespace mm;

namespace {

// Output tile of the reference path: TILE_M rows of a against TILE_N
// columns of b. The columns of a tile stay in cache while the rows stream
// past.
constexpr int64_t TILE_M = 16;
constexpr int64_t TILE_N = 8;

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
    if (is_weight_type(a->type)) {
        return false;
    }
    const KernelTable & kt = best_kernels();
    return (is_repacked(a) ? kt.gemv_repacked[a->type] : kt.gemv_quant[a->type]) != nullptr;
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

// MUL_MAT with b in F32 (compute_mul_mat widens it first where it is not).
void compute_mul_mat_f32_b(const ComputeParams & p, ggml_tensor * dst) {
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
    return op->src[1]->type != GGML_TYPE_F32;
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

void compute_mul_mat(const ComputeParams & p, ggml_tensor * dst) {
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
        compute_mul_mat_f32_b(q, &node);
        return;
    }
    compute_mul_mat_f32_b(p, dst);
}

bool matmul_joins_group(const ggml_tensor * op) {
    return op->op == GGML_OP_MUL_MAT && supports_mul_mat(op) && !widens_b(op) &&
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

namespace {

// a of a weight type (or one the dequantizing path takes), b in F32 (or, with
// wide_b, F16 or BF16), an F32 result; rows of a and of dst are read and
// written as contiguous runs.
bool product_fits(const ggml_tensor * op, bool wide_b) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    const bool b_type = b != nullptr && (b->type == GGML_TYPE_F32 ||
                                         (wide_b && (b->type == GGML_TYPE_F16 || b->type == GGML_TYPE_BF16)));
    if (a == nullptr || !b_type || !(is_weight_type(a->type) || takes_dequant_path(a->type)) ||
        op->type != GGML_TYPE_F32) {
        return false;
    }
    return a->nb[0] == ggml_type_size(a->type) && op->nb[0] == sizeof(float);
}

bool supports_out_prod(const ggml_tensor * op) {
    return product_fits(op, false) && op->src[0]->ne[0] % ggml_blck_size(op->src[0]->type) == 0;
}

size_t work_size_out_prod(const ggml_tensor * op, int n_threads) {
    return out_prod_thread_scratch(op->src[0]) * size_t(n_threads);
}

} // namespace

bool supports_mul_mat(const ggml_tensor * op) {
    if (!product_fits(op, true)) {
        return false;
    }
    const ggml_tensor * a = op->src[0];
    if (takes_dequant_path(a->type)) {
        return op->nb[1] % sizeof(float) == 0;
    }
    return a->ne[0] % ggml_blck_size(vec_dot_info(a->type).operand) == 0;
}

size_t work_size_mul_mat(const ggml_tensor * op, int n_threads) {
    if (widens_b(op)) {
        ggml_tensor       wide = widened_shape(op->src[1]);
        ggml_tensor       node = *op;
        node.src[1]            = &wide;
        return widened_bytes(op->src[1]) + work_size_mul_mat(&node, n_threads);
    }
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
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

void add_matmul_kernels(OpKernels & t) {
    t[GGML_OP_MUL_MAT]  = {compute_mul_mat, supports_mul_mat, work_size_mul_mat};
    t[GGML_OP_OUT_PROD] = {compute_out_prod, supports_out_prod, work_size_out_prod};
}

} // namespace loom::cpu
