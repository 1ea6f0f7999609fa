// GGML_OP_MUL_MAT and GGML_OP_OUT_PROD.
//
// mul_mat: dst[m, n, i2, i3] = dot(row m of a's matrix (i2 / r2, i3 / r3),
// column n of b's matrix (i2, i3)), r2 = ne12 / ne02, r3 = ne13 / ne03.
// b is first converted, by all threads together, into the operand type of
// a's dot product (vec_dot_info) and packed row after row into the scratch
// buffer; then each thread computes a rectangle of dst tile by tile. Each
// dst element is one dot product, so the result does not depend on how the
// rectangles are cut.

#include <algorithm>
#include <cstring>

#include "core/common.h"
#include "core/types.h"
#include "kernels.h"
#include "vec.h"

namespace loom::cpu {

namespace {

constexpr size_t SCRATCH_ALIGN = 64;

// Output tile: TILE_M rows of a against TILE_N columns of b. The columns of
// a tile stay in cache while the rows stream past; a SIMD kernel computing
// several dot products at once replaces the body of compute_tile.
constexpr int64_t TILE_M = 16;
constexpr int64_t TILE_N = 8;

bool is_weight_type(ggml_type t) {
    return vec_dot_info(t).dot != nullptr;
}

// b goes through the scratch buffer unless it already is a usable operand:
// f32 against f32 weights with contiguous rows.
bool mul_mat_packs_b(const ggml_tensor * a, const ggml_tensor * b) {
    return vec_dot_info(a->type).operand != GGML_TYPE_F32 || b->nb[0] != sizeof(float);
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

void pack_b(const ComputeParams & p, const ggml_tensor * b, ggml_type operand, size_t row_size) {
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
        convert_f32_row(operand, src, b->nb[0], out + size_t(ir) * row_size, K);
    }
}

struct MulMatJob {
    const ggml_tensor * a;
    ggml_tensor *       dst;
    BOperand            b;
    VecDotFn            dot;
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
            out[m] = job.dot(job.K, a_mat + m * a->nb[1], b_col);
        }
    }
}

void compute_mul_mat(const ComputeParams & p, ggml_tensor * dst) {
    const ggml_tensor * a    = dst->src[0];
    const ggml_tensor * b    = dst->src[1];
    const VecDotInfo    info = vec_dot_info(a->type);
    LOOM_ASSERT(info.dot != nullptr && b->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float));
    LOOM_ASSERT(dst->ne[0] == a->ne[1] && dst->ne[1] == b->ne[1] && dst->ne[2] == b->ne[2] && dst->ne[3] == b->ne[3]);
    LOOM_ASSERT(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0);

    const int64_t K        = a->ne[0];
    const bool    packed   = mul_mat_packs_b(a, b);
    const size_t  row_size = ggml_row_size(info.operand, K);
    if (packed) {
        LOOM_ASSERT(p.wsize >= row_size * size_t(ggml_nrows(b)));
        pack_b(p, b, info.operand, row_size);
        p.sync();
    }

    MulMatJob job;
    job.a   = a;
    job.dst = dst;
    job.b   = b_operand(b, packed ? p.wdata : nullptr, row_size);
    job.dot = info.dot;
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

// out_prod: dst[m, n, i2, i3] = sum_k a[m, k, i2 / r2, i3 / r3] * b[n, k, i2, i3].
// A thread owns whole dst rows (fixed n, i2, i3) and accumulates them over k
// in increasing order; rows are taken OUT_PROD_ROWS at a time so that each row
// of a, converted to f32 once, serves several dst rows.
constexpr int64_t OUT_PROD_ROWS = 16;

size_t out_prod_thread_scratch(const ggml_tensor * a) {
    return a->type == GGML_TYPE_F32 ? 0 : align_up(size_t(a->ne[0]) * sizeof(float), SCRATCH_ALIGN);
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
    float *         a_row    = nullptr;
    if (to_float != nullptr) {
        LOOM_ASSERT(p.wsize >= slice * size_t(p.nth));
        a_row = reinterpret_cast<float *>(static_cast<char *>(p.wdata) + slice * size_t(p.ith));
    }

    auto dst_row = [&](int64_t n, int64_t i2, int64_t i3) {
        return reinterpret_cast<float *>(static_cast<char *>(dst->data) + n * dst->nb[1] + i2 * dst->nb[2] +
                                         i3 * dst->nb[3]);
    };

    const Range r = split_range(N * ne2 * dst->ne[3], p.ith, p.nth);
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
            const float * ak = reinterpret_cast<const float *>(a_mat + k * a->nb[1]);
            if (to_float != nullptr) {
                to_float(ak, a_row, M);
                ak = a_row;
            }
            for (int64_t n = n0; n < n1; ++n) {
                float bnk;
                std::memcpy(&bnk, b_mat + n * b->nb[0] + k * b->nb[1], sizeof(bnk));
                mad_f32(M, dst_row(n, i2, i3), ak, bnk);
            }
        }
        ir += n1 - n0;
    }
}

} // namespace

void compute_matmul(const ComputeParams & p, ggml_tensor * dst) {
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

bool supports_matmul(const ggml_tensor * op) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    if (a == nullptr || b == nullptr || !is_weight_type(a->type) || b->type != GGML_TYPE_F32 ||
        op->type != GGML_TYPE_F32) {
        return false;
    }
    // Rows of a and of dst are read and written as contiguous runs.
    if (a->nb[0] != ggml_type_size(a->type) || op->nb[0] != sizeof(float)) {
        return false;
    }
    switch (op->op) {
        case GGML_OP_MUL_MAT:
            return a->ne[0] % ggml_blck_size(vec_dot_info(a->type).operand) == 0;
        case GGML_OP_OUT_PROD:
            return true;
        default:
            return false;
    }
}

size_t work_size_matmul(const ggml_tensor * op, int n_threads) {
    const ggml_tensor * a = op->src[0];
    const ggml_tensor * b = op->src[1];
    switch (op->op) {
        case GGML_OP_MUL_MAT: {
            if (!mul_mat_packs_b(a, b)) {
                return 0;
            }
            const size_t row_size = ggml_row_size(vec_dot_info(a->type).operand, b->ne[0]);
            return align_up(row_size * size_t(ggml_nrows(b)), SCRATCH_ALIGN);
        }
        case GGML_OP_OUT_PROD:
            return out_prod_thread_scratch(a) * size_t(n_threads);
        default:
            return 0;
    }
}

} // namespace loom::cpu
