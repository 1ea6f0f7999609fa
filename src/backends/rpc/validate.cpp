// Checks of untrusted RPC messages (Note [RPC trust boundary] in validate.h).

#include "validate.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "backend/backend_impl.h"
#include "core/common.h"
#include "core/conv_fits.h"
#include "core/indices.h"
#include "core/types.h"
#include "ggml-cpu.h"
#include "protocol.h"

namespace loom::rpc {

namespace {

using u128 = unsigned __int128;

bool fail_with(std::string * why, std::string msg) {
    *why = std::move(msg);
    return false;
}

std::string shape_text(const ggml_tensor * t) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%s [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 "]", ggml_type_name(t->type),
                  t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    return buf;
}

bool same_ne(const ggml_tensor * a, const int64_t n0, const int64_t n1, const int64_t n2, const int64_t n3) {
    return a->ne[0] == n0 && a->ne[1] == n1 && a->ne[2] == n2 && a->ne[3] == n3;
}
bool same_shape(const ggml_tensor * a, const ggml_tensor * b) {
    return same_ne(a, b->ne[0], b->ne[1], b->ne[2], b->ne[3]);
}
// small repeats a whole number of times along every dimension of big.
bool repeats_into(const ggml_tensor * small, const ggml_tensor * big) {
    for (int i = 0; i < 4; ++i) {
        if (small->ne[i] <= 0 || big->ne[i] % small->ne[i] != 0) {
            return false;
        }
    }
    return true;
}
bool divides(int64_t d, int64_t n) {
    return d > 0 && n % d == 0;
}
// Attention sinks (soft max's src2, flash attention's src4): absent, or one
// F32 per head that the kernels read as sinks[h].
bool sinks_fit(const ggml_tensor * s, int64_t heads) {
    return s == nullptr || (s->type == GGML_TYPE_F32 && s->ne[0] == heads && s->nb[0] == sizeof(float));
}

bool is_index_type(ggml_type t) {
    return t == GGML_TYPE_I32 || t == GGML_TYPE_I64;
}

// The rules of one op; node's sources are present as the op needs them
// (checked by the caller from k_sources).
bool op_rules(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    auto bad = [&](const char * rule) {
        return fail_with(why, std::string(ggml_op_desc(n)) + ": " + rule + " (node " + shape_text(n) + ", src0 " +
                                  (a ? shape_text(a) : "none") + ", src1 " + (b ? shape_text(b) : "none") + ")");
    };
    // Kernels write results of the node's type: ops that keep the type of
    // their first source must not claim a smaller one. (Binary ops convert
    // between the types the device's supports_op accepts.)
    switch (n->op) {
        case GGML_OP_ADD1:
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
        case GGML_OP_LOG:
        case GGML_OP_SIN:
        case GGML_OP_COS:
        case GGML_OP_SUM:
        case GGML_OP_SUM_ROWS:
        case GGML_OP_REPEAT:
        case GGML_OP_CONCAT:
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
        case GGML_OP_GROUP_NORM:
        case GGML_OP_SCALE:
        case GGML_OP_DIAG_MASK_INF:
        case GGML_OP_SOFT_MAX:
        case GGML_OP_ROPE:
        case GGML_OP_ROPE_BACK:
        case GGML_OP_UNARY:
        case GGML_OP_GLU:
            if (n->type != a->type || (n->op == GGML_OP_CONCAT && b->type != a->type)) {
                return bad("the node must have the type of its source");
            }
            break;
        case GGML_OP_ARGSORT:
        case GGML_OP_ARGMAX:
        case GGML_OP_TOP_K:
            if (n->type != GGML_TYPE_I32) {
                return bad("indices are I32");
            }
            break;
        case GGML_OP_MEAN:
            if (n->type != GGML_TYPE_F32) {
                return bad("a mean is F32");
            }
            break;
        case GGML_OP_GET_ROWS:
            if (n->type != GGML_TYPE_F32 && n->type != a->type) {
                return bad("rows are read as F32 or the source's type");
            }
            break;
        case GGML_OP_NONE: case GGML_OP_DUP: case GGML_OP_ADD: case GGML_OP_ADD_ID: case GGML_OP_ACC: case GGML_OP_SUB:
        case GGML_OP_MUL: case GGML_OP_DIV: case GGML_OP_CUMSUM: case GGML_OP_COUNT_EQUAL: case GGML_OP_REPEAT_BACK:
        case GGML_OP_SILU_BACK: case GGML_OP_RMS_NORM_BACK: case GGML_OP_L2_NORM: case GGML_OP_MUL_MAT:
        case GGML_OP_MUL_MAT_ID: case GGML_OP_OUT_PROD: case GGML_OP_SET: case GGML_OP_CPY: case GGML_OP_CONT:
        case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE: case GGML_OP_TRANSPOSE:
        case GGML_OP_GET_ROWS_BACK: case GGML_OP_SET_ROWS: case GGML_OP_DIAG: case GGML_OP_DIAG_MASK_ZERO:
        case GGML_OP_SOFT_MAX_BACK: case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL:
        case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D: case GGML_OP_CONV_2D:
        case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D: case GGML_OP_POOL_1D:
        case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD:
        case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING:
        case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_EXT:
        case GGML_OP_FLASH_ATTN_BACK: case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART:
        case GGML_OP_WIN_UNPART: case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6:
        case GGML_OP_GATED_LINEAR_ATTN: case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET:
        case GGML_OP_LIGHTNING_INDEXER: case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST:
        case GGML_OP_MAP_CUSTOM1: case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM:
        case GGML_OP_CROSS_ENTROPY_LOSS: case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW:
        case GGML_OP_OPT_STEP_SGD: case GGML_OP_COUNT: break;
    }
    switch (n->op) {
        case GGML_OP_DUP:
        case GGML_OP_CONT:
            return ggml_nelements(n) == ggml_nelements(a) ? true : bad("element counts differ");
        case GGML_OP_CPY:
            if (ggml_nelements(a) != ggml_nelements(b) || !same_shape(n, b) || n->type != b->type) {
                return bad("a copy has the shape and type of its destination and as many elements as its source");
            }
            return true;
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV:
            return same_shape(n, a) && repeats_into(b, a) ? true : bad("src1 must repeat into src0, the node has src0's shape");
        case GGML_OP_ADD1:
            return same_shape(n, a) && ggml_nelements(b) == 1 ? true : bad("src1 must be a scalar");
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
        case GGML_OP_LOG:
        case GGML_OP_SIN:
        case GGML_OP_COS:
        case GGML_OP_SCALE:
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
        case GGML_OP_DIAG_MASK_INF:
        case GGML_OP_ARGSORT:
            return same_shape(n, a) ? true : bad("the node must have src0's shape");
        case GGML_OP_GROUP_NORM:
            return same_shape(n, a) && n->op_params[0] > 0 ? true : bad("shape or group count");
        case GGML_OP_UNARY:
            if (n->op_params[0] < 0 || n->op_params[0] >= GGML_UNARY_OP_COUNT) {
                return bad("unknown unary op");
            }
            return same_shape(n, a) ? true : bad("the node must have src0's shape");
        case GGML_OP_GLU:
            if (n->op_params[0] < 0 || n->op_params[0] >= GGML_GLU_OP_COUNT) {
                return bad("unknown gated linear unit");
            }
            if (b != nullptr) {
                return same_shape(n, a) && same_shape(b, a) && b->type == a->type
                           ? true
                           : bad("the gate must have src0's shape and type, the node src0's shape");
            }
            return same_ne(n, a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3])
                       ? true
                       : bad("src0's rows are x and a gate, the node's rows half as long");
        case GGML_OP_SUM:
            return ggml_nelements(n) == 1 ? true : bad("a sum is a scalar");
        case GGML_OP_SUM_ROWS:
        case GGML_OP_MEAN:
            return same_ne(n, 1, a->ne[1], a->ne[2], a->ne[3]) ? true : bad("one value per row");
        case GGML_OP_ARGMAX:
            return a->ne[2] == 1 && a->ne[3] == 1 && same_ne(n, a->ne[1], 1, 1, 1) && n->type == GGML_TYPE_I32
                       ? true
                       : bad("argmax of a matrix, one I32 per row");
        case GGML_OP_REPEAT:
            return repeats_into(a, n) ? true : bad("src0 must repeat into the node");
        case GGML_OP_CONCAT: {
            const int32_t dim = n->op_params[0];
            if (dim < 0 || dim > 3) {
                return bad("dimension out of range");
            }
            for (int i = 0; i < 4; ++i) {
                const bool ok = i == dim ? n->ne[i] == a->ne[i] + b->ne[i] : n->ne[i] == a->ne[i] && b->ne[i] == a->ne[i];
                if (!ok) {
                    return bad("shapes do not concatenate");
                }
            }
            return true;
        }
        case GGML_OP_MUL_MAT:
            if (a->ne[0] != b->ne[0] || !divides(a->ne[2], b->ne[2]) || !divides(a->ne[3], b->ne[3]) ||
                !same_ne(n, a->ne[1], b->ne[1], b->ne[2], b->ne[3]) || n->type != GGML_TYPE_F32) {
                return bad("matrix product shapes");
            }
            return true;
        case GGML_OP_OUT_PROD:
            if (a->ne[1] != b->ne[1] || !divides(a->ne[2], b->ne[2]) || !divides(a->ne[3], b->ne[3]) ||
                !same_ne(n, a->ne[0], b->ne[0], b->ne[2], b->ne[3]) || n->type != GGML_TYPE_F32) {
                return bad("outer product shapes");
            }
            return true;
        case GGML_OP_GET_ROWS:
            if (b->type != GGML_TYPE_I32 || b->ne[3] != 1 || a->ne[2] != b->ne[1] || a->ne[3] != b->ne[2] ||
                !same_ne(n, a->ne[0], b->ne[0], b->ne[1], b->ne[2])) {
                return bad("get_rows shapes");
            }
            return true;
        case GGML_OP_SET_ROWS:
            if (!is_index_type(b->type) || b->ne[3] != 1 || a->ne[1] != b->ne[0] || !divides(b->ne[1], a->ne[2]) ||
                !divides(b->ne[2], a->ne[3]) || n->ne[0] != a->ne[0] || n->ne[2] != a->ne[2] || n->ne[3] != a->ne[3]) {
                return bad("set_rows shapes");
            }
            return true;
        case GGML_OP_SOFT_MAX:
            if (!same_shape(n, a) || !sinks_fit(n->src[2], a->ne[2])) {
                return bad("the node must have src0's shape, sinks one F32 per head");
            }
            if (b != nullptr && (b->ne[0] != a->ne[0] || b->ne[1] < a->ne[1] || !divides(b->ne[2], a->ne[2]) ||
                                 !divides(b->ne[3], a->ne[3]))) {
                return bad("mask shape");
            }
            return true;
        case GGML_OP_ROPE:
        case GGML_OP_ROPE_BACK: {
            // Every mode loom's CPU computes: plain (normal, NeoX) with one
            // position per row of dim 2, or multi-section (MROPE, IMROPE,
            // VISION) with four and the sections in op_params[11..14]; an
            // offset (op_params[15], ggml_rope_set_offset) moves the rotated
            // values along the row. All in 64 bits, from untrusted params.
            const int64_t       n_dims = n->op_params[1];
            const int32_t       mode   = n->op_params[2];
            const int64_t       n_offs = n->op_params[15];
            const ggml_tensor * ff     = n->src[2]; // frequency factors, one per rotated pair
            const bool          multi  = mode == GGML_ROPE_TYPE_MROPE || mode == GGML_ROPE_TYPE_IMROPE ||
                                  mode == GGML_ROPE_TYPE_VISION;
            if (!multi && mode != GGML_ROPE_TYPE_NORMAL && mode != GGML_ROPE_TYPE_NEOX) {
                return bad("rope mode");
            }
            const int64_t pairs = mode == GGML_ROPE_TYPE_VISION ? n_dims : n_dims / 2;
            if (!same_shape(n, a) || b->type != GGML_TYPE_I32 || b->ne[0] != (multi ? 4 : 1) * a->ne[2] ||
                n_dims < 0 || n_dims % 2 != 0 || n_offs < 0 || n_offs % 2 != 0 || n_offs + 2 * pairs > a->ne[0] ||
                (mode == GGML_ROPE_TYPE_VISION && n_offs != 0) ||
                (ff != nullptr && (ff->type != GGML_TYPE_F32 || ff->ne[0] < pairs || !ggml_is_contiguous(ff)))) {
                return bad("rope shapes, positions, frequency factors, n_dims or offset");
            }
            if (multi) {
                const int64_t s0 = n->op_params[11], s1 = n->op_params[12], s2 = n->op_params[13],
                              s3 = n->op_params[14];
                if (s0 < 0 || s1 < 0 || s2 < 0 || s3 < 0 || s0 + s1 + s2 <= 0 || s0 + s1 + s2 + s3 > a->ne[0]) {
                    return bad("rope sections");
                }
            }
            return true;
        }
        case GGML_OP_TOP_K:
            if (n->type != GGML_TYPE_I32 || n->ne[0] > a->ne[0] || !same_ne(n, n->ne[0], a->ne[1], a->ne[2], a->ne[3])) {
                return bad("top_k shapes");
            }
            return true;
        case GGML_OP_FLASH_ATTN_EXT: {
            const ggml_tensor * k = b;
            const ggml_tensor * v = n->src[2];
            const ggml_tensor * m = n->src[3];
            if (a->ne[0] != k->ne[0] || v->ne[1] != k->ne[1] || !divides(k->ne[2], a->ne[2]) ||
                !divides(v->ne[2], a->ne[2]) || !divides(k->ne[3], a->ne[3]) || !divides(v->ne[3], a->ne[3]) ||
                !same_ne(n, v->ne[0], a->ne[2], a->ne[1], a->ne[3]) || n->type != GGML_TYPE_F32 ||
                !sinks_fit(n->src[4], a->ne[2])) {
                return bad("attention shapes (sinks one F32 per head)");
            }
            if (m != nullptr && (m->ne[0] < k->ne[1] || m->ne[1] < a->ne[1] || !divides(m->ne[2], a->ne[2]) ||
                                 !divides(m->ne[3], a->ne[3]))) {
                return bad("mask shape");
            }
            return true;
        }
        case GGML_OP_NONE: case GGML_OP_ADD_ID: case GGML_OP_ACC: case GGML_OP_CUMSUM: case GGML_OP_COUNT_EQUAL:
        case GGML_OP_REPEAT_BACK: case GGML_OP_SILU_BACK: case GGML_OP_RMS_NORM_BACK: case GGML_OP_L2_NORM:
        case GGML_OP_MUL_MAT_ID: case GGML_OP_SET: case GGML_OP_RESHAPE: case GGML_OP_VIEW: case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: case GGML_OP_GET_ROWS_BACK: case GGML_OP_DIAG: case GGML_OP_DIAG_MASK_ZERO:
        case GGML_OP_SOFT_MAX_BACK: case GGML_OP_CLAMP: case GGML_OP_CONV_TRANSPOSE_1D: case GGML_OP_IM2COL:
        case GGML_OP_IM2COL_BACK: case GGML_OP_IM2COL_3D: case GGML_OP_COL2IM_1D: case GGML_OP_CONV_2D:
        case GGML_OP_CONV_3D: case GGML_OP_CONV_2D_DW: case GGML_OP_CONV_TRANSPOSE_2D: case GGML_OP_POOL_1D:
        case GGML_OP_POOL_2D: case GGML_OP_POOL_2D_BACK: case GGML_OP_UPSCALE: case GGML_OP_PAD:
        case GGML_OP_PAD_REFLECT_1D: case GGML_OP_ROLL: case GGML_OP_ARANGE: case GGML_OP_TIMESTEP_EMBEDDING:
        case GGML_OP_LEAKY_RELU: case GGML_OP_TRI: case GGML_OP_FILL: case GGML_OP_FLASH_ATTN_BACK:
        case GGML_OP_SSM_CONV: case GGML_OP_SSM_SCAN: case GGML_OP_WIN_PART: case GGML_OP_WIN_UNPART:
        case GGML_OP_GET_REL_POS: case GGML_OP_ADD_REL_POS: case GGML_OP_RWKV_WKV6: case GGML_OP_GATED_LINEAR_ATTN:
        case GGML_OP_RWKV_WKV7: case GGML_OP_SOLVE_TRI: case GGML_OP_GATED_DELTA_NET: case GGML_OP_LIGHTNING_INDEXER:
        case GGML_OP_DSV4_HC_COMB: case GGML_OP_DSV4_HC_PRE: case GGML_OP_DSV4_HC_POST: case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2: case GGML_OP_MAP_CUSTOM3: case GGML_OP_CUSTOM: case GGML_OP_CROSS_ENTROPY_LOSS:
        case GGML_OP_CROSS_ENTROPY_LOSS_BACK: case GGML_OP_OPT_STEP_ADAMW: case GGML_OP_OPT_STEP_SGD:
        case GGML_OP_COUNT: {
            if (has_constructor_rule(n->op)) {
                return constructor_rule(n, why);
            }
            if (is_conv_family(n->op)) {
                std::string rule;
                return conv_family_rules(n, &rule) ? true : bad(rule.c_str());
            }
            const char * rule = nullptr;
            if (fill_family_rule(n, &rule)) {
                return rule == nullptr ? true : bad(rule);
            }
            if (backward_family_rule(n, &rule)) {
                return rule == nullptr ? true : bad(rule);
            }
            return bad("op not accepted by the RPC server");
        }
    }
    return bad("op not accepted by the RPC server");
}

bool checked_add(uint64_t a, uint64_t b, uint64_t * out) {
    return !__builtin_add_overflow(a, b, out);
}

} // namespace

bool tensor_extent(ggml_type type, const int64_t ne[4], const uint64_t nb[4], uint64_t * extent, std::string * why) {
    if (!type_is_valid(int(type))) {
        return fail_with(why, "unknown tensor type " + std::to_string(int(type)));
    }
    const u128 ts   = ggml_type_size(type);
    const int64_t blck = ggml_blck_size(type);
    u128 elements = 1;
    for (int i = 0; i < 4; ++i) {
        if (ne[i] < 0 || ne[i] > k_max_ne) {
            return fail_with(why, "ne[" + std::to_string(i) + "] = " + std::to_string(ne[i]) + " out of range");
        }
        if (nb[i] > k_max_stride) {
            return fail_with(why, "nb[" + std::to_string(i) + "] = " + std::to_string(nb[i]) + " out of range");
        }
        elements *= u128(ne[i]);
        if (elements > k_max_elements) {
            return fail_with(why, "too many elements");
        }
    }
    if (ne[0] % blck != 0) {
        return fail_with(why, "ne[0] is not a whole number of blocks of " + std::string(ggml_type_name(type)));
    }
    if (blck > 1 && nb[0] != ts) {
        return fail_with(why, "blocks of a quantized type must be contiguous (nb[0] = type size)");
    }
    if (elements == 0) {
        *extent = 0;
        return true;
    }
    // Strided access reaches the last element of the last row; contiguous
    // access (rows, or the whole tensor) reaches as many bytes as the
    // elements fill. The extent is the larger of both.
    u128 row = blck == 1 ? std::max(u128(ne[0] - 1) * nb[0] + ts, u128(ne[0]) * ts) : u128(ne[0] / blck) * ts;
    for (int i = 1; i < 4; ++i) {
        row += u128(ne[i] - 1) * nb[i];
    }
    const u128 compact = elements / u128(blck) * ts;
    const u128 e       = std::max(row, compact);
    if (e > (u128(1) << 62)) {
        return fail_with(why, "tensor too large");
    }
    *extent = uint64_t(e);
    return true;
}

bool decode_tensor(const TensorDesc & d, const BufferLookup & buffers, ggml_tensor * t, std::string * why) {
    if (d.ne_size() != 4 || d.nb_size() != 4) {
        return fail_with(why, "a tensor needs 4 ne and 4 nb");
    }
    if (d.type() >= GGML_TYPE_COUNT) {
        return fail_with(why, "unknown tensor type " + std::to_string(d.type()));
    }
    int64_t  ne[4];
    uint64_t nb[4];
    for (int i = 0; i < 4; ++i) {
        ne[i] = d.ne(i);
        nb[i] = d.nb(i);
    }
    uint64_t extent = 0;
    if (!tensor_extent(ggml_type(d.type()), ne, nb, &extent, why)) {
        return false;
    }
    // Kernels load elements (and the fields of quantized blocks) as their
    // C types: offsets and strides keep them aligned. The largest power of
    // two dividing the element or block size, at most 8, is that alignment.
    const uint64_t ts    = ggml_type_size(ggml_type(d.type()));
    const uint64_t align = std::min<uint64_t>(ts & (~ts + 1), 8);
    for (int i = 0; i < 4; ++i) {
        if (nb[i] % align != 0) {
            return fail_with(why, "nb[" + std::to_string(i) + "] = " + std::to_string(nb[i]) +
                                      " is not a multiple of the type's alignment " + std::to_string(align));
        }
    }
    if (d.offset() % align != 0) {
        return fail_with(why, "offset " + std::to_string(d.offset()) + " is not a multiple of the type's alignment " +
                                  std::to_string(align));
    }
    if (!buffers) {
        // Not placed in memory (a question about support): shape only.
        t->type = ggml_type(d.type());
        for (int i = 0; i < 4; ++i) {
            t->ne[i] = ne[i];
            t->nb[i] = size_t(nb[i]);
        }
        return true;
    }
    ggml_backend_buffer_t buf = d.buffer() != 0 ? buffers(d.buffer()) : nullptr;
    if (buf == nullptr) {
        return fail_with(why, "tensor in unknown buffer " + std::to_string(d.buffer()));
    }
    const uint64_t size = buf->size;
    if (d.offset() > size || extent > size - d.offset()) {
        return fail_with(why, "tensor of " + std::to_string(extent) + " bytes at offset " + std::to_string(d.offset()) +
                                  " does not fit its buffer of " + std::to_string(size) + " bytes");
    }
    auto * base = static_cast<uint8_t *>(buf->base());
    if (base == nullptr && extent > 0) {
        return fail_with(why, "tensor in a buffer without memory");
    }
    t->type   = ggml_type(d.type());
    t->buffer = buf;
    t->data   = base != nullptr ? base + d.offset() : nullptr;
    for (int i = 0; i < 4; ++i) {
        t->ne[i] = ne[i];
        t->nb[i] = size_t(nb[i]);
    }
    return true;
}

bool check_range(const ggml_tensor * t, uint64_t offset, uint64_t size, std::string * why) {
    const uint64_t n = ggml_nbytes(t);
    if (offset > n || size > n - offset) {
        return fail_with(why, "range [" + std::to_string(offset) + ", +" + std::to_string(size) +
                                  ") is outside the tensor's " + std::to_string(n) + " bytes");
    }
    return true;
}

bool check_blocks(const ggml_tensor * t, uint64_t offset, uint64_t block, uint64_t count, uint64_t stride,
                  uint64_t * total, std::string * why) {
    const std::string what = std::to_string(count) + " blocks of " + std::to_string(block) + " bytes from offset " +
                             std::to_string(offset) + ", stride " + std::to_string(stride);
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, block, &bytes)) {
        return fail_with(why, what + ": more than 2^64 bytes in all");
    }
    *total = bytes;
    if (bytes == 0) {
        return check_range(t, offset, 0, why);
    }
    // Blocks start at increasing positions: the last one ends highest.
    uint64_t span = 0, last = 0;
    if (__builtin_mul_overflow(count - 1, stride, &span) || __builtin_add_overflow(offset, span, &last)) {
        return fail_with(why, what + ": the last block lies past 2^64");
    }
    const uint64_t n = ggml_nbytes(t);
    if (last > n || block > n - last) {
        return fail_with(why, what + ": the last block [" + std::to_string(last) + ", +" + std::to_string(block) +
                                  ") is outside the tensor's " + std::to_string(n) + " bytes");
    }
    return true;
}

// Whether the strides give each element bytes apart from the others': in
// the order of their strides, each dimension steps past the whole of the
// ones before it.
bool elements_apart(const ggml_tensor * t) {
    int order[4] = {0, 1, 2, 3};
    std::sort(order, order + 4, [t](int a, int b) { return t->nb[a] < t->nb[b]; });
    uint64_t span = ggml_type_size(t->type) * uint64_t(t->ne[order[0]]) / uint64_t(ggml_blck_size(t->type));
    if (t->nb[order[0]] != ggml_type_size(t->type) && t->ne[order[0]] > 1) {
        return false;
    }
    for (int k = 1; k < 4; ++k) {
        const int d = order[k];
        if (t->ne[d] > 1 && t->nb[d] < span) {
            return false;
        }
        span = std::max<uint64_t>(span, t->ne[d] > 1 ? t->nb[d] * uint64_t(t->ne[d]) : span);
    }
    return true;
}

bool check_node(const ggml_tensor * node, std::string * why) {
    if (node->op < GGML_OP_NONE || node->op >= GGML_OP_COUNT) {
        return fail_with(why, "node without a valid op");
    }
    if (node->op == GGML_OP_NONE) {
        // Computes nothing: every device skips it, as in ggml (graphs hold
        // such nodes, inputs flagged as parameters for one).
        return true;
    }
    if (is_view_op(node->op)) {
        // No computation: the view's own memory was checked against its buffer.
        return node->src[0] != nullptr ? true : fail_with(why, "a view needs its source");
    }
    const OpInfo & s = *op_info(node->op);
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        if (i < s.min_src && node->src[i] == nullptr) {
            return fail_with(why, std::string(ggml_op_desc(node)) + ": source " + std::to_string(i) + " missing");
        }
        if (i >= s.max_src && node->src[i] != nullptr) {
            return fail_with(why, std::string(ggml_op_desc(node)) + ": unexpected source " + std::to_string(i));
        }
    }
    // Kernels write results contiguously, except into the destinations of
    // copies, and in the layouts some constructors give their results: rope
    // in place on a strided view (its source's strides), the depthwise
    // convolution on channels-first data (ggml_conv_2d_dw_direct). Those
    // strides must give every element bytes of its own, so the result lies
    // within its extent whichever way a kernel walks it.
    const bool own_layout = ((node->op == GGML_OP_ROPE || node->op == GGML_OP_ROPE_BACK) &&
                             node->src[0] != nullptr && std::equal(node->nb, node->nb + 4, node->src[0]->nb)) ||
                            node->op == GGML_OP_CONV_2D_DW;
    if (own_layout && !ggml_is_contiguous(node) && !elements_apart(node)) {
        return fail_with(why, std::string(ggml_op_desc(node)) + ": the result's elements overlap");
    }
    if (node->op != GGML_OP_CPY && node->op != GGML_OP_SET_ROWS && !own_layout && !ggml_is_contiguous(node)) {
        return fail_with(why, std::string(ggml_op_desc(node)) + ": the result must be contiguous");
    }
    return op_rules(node, why);
}

std::unique_ptr<RebuiltGraph> rebuild_graph(const GraphMessage & msg, const BufferLookup & buffers,
                                            ggml_backend_dev_t dev, std::string * why) {
    const size_t n = size_t(msg.tensors_size());
    if (n == 0 || n > k_max_graph_tensors || size_t(msg.nodes_size()) > n || msg.nodes_size() == 0) {
        *why = "a graph needs 1 to " + std::to_string(k_max_graph_tensors) + " tensors and nodes among them";
        return nullptr;
    }
    auto g = std::make_unique<RebuiltGraph>();
    ggml_init_params params{};
    params.mem_size   = n * ggml_tensor_overhead() + ggml_graph_overhead_custom(size_t(msg.nodes_size()), false) + 1024;
    params.no_alloc   = true;
    g->ctx.reset(ggml_init(params));
    if (!g->ctx) {
        *why = "out of memory";
        return nullptr;
    }
    struct Placed {
        ggml_backend_buffer_t buffer;
        uint64_t              offset;
        uint64_t              extent;
    };
    std::vector<ggml_tensor *> tensors(n);
    std::vector<Placed>        placed(n);
    for (size_t i = 0; i < n; ++i) {
        const TensorDesc & d = msg.tensors(int(i));
        ggml_tensor        tmp{};
        if (!decode_tensor(d, buffers, &tmp, why)) {
            *why = "tensor " + std::to_string(i + 1) + ": " + *why;
            return nullptr;
        }
        if (d.op() >= GGML_OP_COUNT || d.op_params().size() > GGML_MAX_OP_PARAMS || d.src_size() > GGML_MAX_SRC ||
            d.name().size() >= k_max_name_bytes) {
            *why = "tensor " + std::to_string(i + 1) + ": invalid op, op params, sources or name";
            return nullptr;
        }
        ggml_tensor * t = ggml_new_tensor(g->ctx.get(), tmp.type, 4, tmp.ne);
        std::memcpy(t->nb, tmp.nb, sizeof(t->nb));
        t->buffer = tmp.buffer;
        t->data   = tmp.data;
        t->op     = ggml_op(d.op());
        std::memcpy(t->op_params, d.op_params().data(), d.op_params().size());
        t->flags = d.flags() & (GGML_TENSOR_FLAG_INPUT | GGML_TENSOR_FLAG_OUTPUT | GGML_TENSOR_FLAG_PARAM |
                                GGML_TENSOR_FLAG_LOSS | GGML_TENSOR_FLAG_COMPUTE);
        ggml_set_name(t, d.name().c_str());
        uint64_t extent = 0;
        std::string unused;
        tensor_extent(t->type, t->ne, reinterpret_cast<const uint64_t *>(t->nb), &extent, &unused);
        tensors[i] = t;
        placed[i]  = {tmp.buffer, d.offset(), extent};
        if (std::find(g->buffers.begin(), g->buffers.end(), tmp.buffer) == g->buffers.end()) {
            g->buffers.push_back(tmp.buffer);
        }
    }
    // References, now that every tensor exists.
    for (size_t i = 0; i < n; ++i) {
        const TensorDesc & d = msg.tensors(int(i));
        for (int s = 0; s < d.src_size(); ++s) {
            const uint32_t ref = d.src(s);
            // A node may name itself (ggml_cast's copy has itself as destination).
            if (ref > n) {
                *why = "tensor " + std::to_string(i + 1) + ": source " + std::to_string(s) + " refers to " +
                       std::to_string(ref) + ", not another tensor of the message";
                return nullptr;
            }
            tensors[i]->src[s] = ref != 0 ? tensors[ref - 1] : nullptr;
        }
        if (const uint32_t v = d.view_src(); v != 0) {
            uint64_t at = 0;
            if (v > n || v == i + 1 || placed[v - 1].buffer != placed[i].buffer ||
                !checked_add(placed[v - 1].offset, d.view_offs(), &at) || at != placed[i].offset) {
                *why = "tensor " + std::to_string(i + 1) + ": its view source is not a tensor of the message at its "
                       "place in the same buffer";
                return nullptr;
            }
            // As ggml_view requires, the view's bytes lie inside its source's.
            const uint64_t bytes = ggml_nbytes(tensors[i]);
            const uint64_t whole = ggml_nbytes(tensors[v - 1]);
            if (bytes > 0 && (d.view_offs() > whole || bytes > whole - d.view_offs())) {
                *why = "tensor " + std::to_string(i + 1) + ": a view of " + std::to_string(bytes) + " bytes at offset " +
                       std::to_string(d.view_offs()) + " lies outside its view source of " + std::to_string(whole) +
                       " bytes";
                return nullptr;
            }
            tensors[i]->view_src  = tensors[v - 1];
            tensors[i]->view_offs = size_t(d.view_offs());
        }
    }
    g->graph = ggml_new_graph_custom(g->ctx.get(), size_t(msg.nodes_size()), false);
    // The tensors the graph writes: its nodes, and what the optimizer steps
    // update in place besides (the parameter, AdamW's moments).
    std::vector<size_t> written;
    std::vector<size_t> check_owner; // the node of each index check
    written.reserve(size_t(msg.nodes_size()));
    auto index_of = [&](const ggml_tensor * t) {
        return size_t(std::find(tensors.begin(), tensors.end(), t) - tensors.begin());
    };
    // Nodes run in the order listed, which must be ggml's: a source that is
    // a node comes before the nodes it feeds, so no node reads one not yet
    // computed and the sources form no cycle. The one node that names
    // itself is ggml_cast's copy, as its destination (src[1]).
    enum : uint8_t { k_leaf, k_pending, k_done };
    std::vector<uint8_t> state(n, k_leaf);
    for (int k = 0; k < msg.nodes_size(); ++k) {
        if (msg.nodes(k) != 0 && msg.nodes(k) <= n) {
            state[msg.nodes(k) - 1] = k_pending;
        }
    }
    for (int k = 0; k < msg.nodes_size(); ++k) {
        const uint32_t ref = msg.nodes(k);
        if (ref == 0 || ref > n) {
            *why = "node " + std::to_string(k) + " refers to " + std::to_string(ref) + ", not a tensor of the message";
            return nullptr;
        }
        ggml_tensor *      node = tensors[ref - 1];
        const TensorDesc & nd   = msg.tensors(int(ref - 1));
        for (int s = 0; s < nd.src_size(); ++s) {
            const uint32_t src = nd.src(s);
            const bool     own = src == ref;
            if (src != 0 && (own ? !(node->op == GGML_OP_CPY && s == 1) : state[src - 1] == k_pending)) {
                *why = "node " + std::to_string(k) + ": its source " + std::to_string(s) +
                       " is not computed before it (" + (own ? "the node itself" : "a later node") + ")";
                return nullptr;
            }
        }
        state[ref - 1] = k_done;
        if (node->op == GGML_OP_NONE && (node->flags & GGML_TENSOR_FLAG_PARAM) != 0) {
            continue; // a parameter is a node of its graph (ggml_set_param) that computes nothing
        }
        if (!check_node(node, why)) {
            *why = "node " + std::to_string(k) + ": " + *why;
            return nullptr;
        }
        if (dev != nullptr && !is_view_op(node->op) && !ggml_backend_dev_supports_op(dev, node)) {
            *why = "node " + std::to_string(k) + ": " + ggml_op_desc(node) + " (" + shape_text(node) +
                   ") is not supported by device " + ggml_backend_dev_name(dev);
            return nullptr;
        }
        ggml_graph_add_node(g->graph, node);
        if (!is_view_op(node->op)) {
            written.push_back(ref - 1);
        }
        if (node->op == GGML_OP_OPT_STEP_SGD || node->op == GGML_OP_OPT_STEP_ADAMW) {
            written.push_back(index_of(node->src[0]));
        }
        if (node->op == GGML_OP_OPT_STEP_ADAMW) {
            written.push_back(index_of(node->src[2]));
            written.push_back(index_of(node->src[3]));
        }
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if ((index_srcs(node->op) & (1u << s)) != 0 && node->src[s] != nullptr) {
                g->index_checks.push_back({node, s});
                check_owner.push_back(ref - 1);
            }
        }
    }
    // Note [Computed indices]
    // Indices are checked before the computation, so a node that writes them
    // (a mixture of experts' router picks experts and rows with
    // argsort_top_k) would make the check worthless: such graphs are
    // refused, except on loom's CPU device, which checks every index of a
    // node before any thread writes and fails the computation on a bad one
    // (backends/cpu/compute.cpp, Note [Index sources] in core/op_table.h).
    // There the indices are left to the device, unless the node writes them
    // itself: its threads would then read indices another thread is
    // overwriting.
    const bool kernel_checks = dev != nullptr && ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU &&
                               ggml_backend_dev_backend_reg(dev) == ggml_backend_cpu_reg();
    for (size_t ci = 0; ci < g->index_checks.size(); ++ci) {
        IndexCheck & c = g->index_checks[ci];
        if (!buffers) {
            break;
        }
        const Placed & p = placed[index_of(c.node->src[c.src])];
        for (size_t wi : written) {
            const Placed & q = placed[wi];
            if (q.buffer != p.buffer || q.extent == 0 || p.extent == 0) {
                continue;
            }
            if (q.offset < p.offset + p.extent && p.offset < q.offset + q.extent) {
                if (kernel_checks && wi != check_owner[ci]) {
                    c.at_compute = true;
                    continue;
                }
                *why = "the graph writes the indices of " + std::string(ggml_op_desc(c.node)) + " (src[" +
                       std::to_string(c.src) + "])";
                return nullptr;
            }
        }
    }
    return g;
}

bool check_indices(const RebuiltGraph & g, std::string * why) {
    std::vector<uint8_t> bytes;
    for (const IndexCheck & c : g.index_checks) {
        if (c.at_compute) {
            continue;
        }
        const ggml_tensor * t = c.node->src[c.src];
        bytes.resize(ggml_nbytes(t));
        if (!bytes.empty()) {
            t->buffer->get_tensor(t, bytes.data(), 0, bytes.size());
        }
        BadIndex bad;
        if (find_bad_index(t, bytes.data(), index_limit(c.node), &bad)) {
            bad.src = c.src;
            return fail_with(why, bad_index_text(c.node, bad));
        }
    }
    return true;
}

} // namespace loom::rpc
