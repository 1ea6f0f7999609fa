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

template <BinOp op>
void compute_op(const ComputeParams & p, ggml_tensor * dst) {
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

} // namespace

void compute_binary(const ComputeParams & p, ggml_tensor * dst) {
    if (ggml_is_empty(dst)) {
        return;
    }
    switch (dst->op) {
        case GGML_OP_ADD:
        case GGML_OP_ADD1: compute_op<BinOp::add>(p, dst); break;
        case GGML_OP_SUB: compute_op<BinOp::sub>(p, dst); break;
        case GGML_OP_MUL: compute_op<BinOp::mul>(p, dst); break;
        case GGML_OP_DIV: compute_op<BinOp::div>(p, dst); break;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD_ID: case GGML_OP_ACC: case GGML_OP_SQR: case GGML_OP_SQRT:
        case GGML_OP_LOG: case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS:
        case GGML_OP_CUMSUM: case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT:
        case GGML_OP_REPEAT_BACK: case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM:
        case GGML_OP_RMS_NORM_BACK: case GGML_OP_GROUP_NORM: case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_SET: case GGML_OP_CPY:
        case GGML_OP_CONT: case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
        case GGML_OP_GET_ROWS: case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG:
        case GGML_OP_DIAG_MASK_INF: case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX: case GGML_OP_SOFT_MAX_BACK:
        case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D:
        case GGML_OP_CONV_2D: case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D:
        case GGML_OP_POOL_1D: case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD:
        case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING:
        case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL:
        case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN:
        case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS:
        case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI:
        case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB:
        case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS:
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU:
        case GGML_OP_COUNT: LOOM_ASSERT(false && "compute_binary: not a binary op");
    }
}

bool supports_binary(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_ADD:
        case GGML_OP_ADD1:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV: break;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD_ID: case GGML_OP_ACC: case GGML_OP_SQR: case GGML_OP_SQRT:
        case GGML_OP_LOG: case GGML_OP_SIN: case GGML_OP_COS: case GGML_OP_SUM: case GGML_OP_SUM_ROWS:
        case GGML_OP_CUMSUM: case GGML_OP_MEAN: case GGML_OP_ARGMAX: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT:
        case GGML_OP_REPEAT_BACK: case GGML_OP_CONCAT: case GGML_OP_SILU_BACK: case GGML_OP_NORM: case GGML_OP_RMS_NORM:
        case GGML_OP_RMS_NORM_BACK: case GGML_OP_GROUP_NORM: case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SCALE: case GGML_OP_SET: case GGML_OP_CPY:
        case GGML_OP_CONT: case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
        case GGML_OP_GET_ROWS: case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG:
        case GGML_OP_DIAG_MASK_INF: case GGML_OP_DIAG_MASK_ZERO: case GGML_OP_SOFT_MAX: case GGML_OP_SOFT_MAX_BACK:
        case GGML_OP_ROPE: case GGML_OP_ROPE_BACK: case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_IM2COL: case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D:
        case GGML_OP_CONV_2D: case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D:
        case GGML_OP_POOL_1D: case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD:
        case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING:
        case GGML_OP_ARGSORT: case GGML_OP_TOP_K: case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL:
        case GGML_OP_FLASH_ATTN_EXT: case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN:
        case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS:
        case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI:
        case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB:
        case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_UNARY: case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS:
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD: case GGML_OP_GLU:
        case GGML_OP_COUNT: return false;
    }
    const ggml_tensor * src0 = op->src[0];
    const ggml_tensor * src1 = op->src[1];
    if (src0 == nullptr || src1 == nullptr) {
        return false;
    }
    if (!is_float_type(src0->type) || !is_float_type(src1->type) || !is_float_type(op->type)) {
        return false;
    }
    return ggml_are_same_shape(src0, op) && ggml_can_repeat(src1, src0);
}

} // namespace loom::cpu
