// Rules of the matrix products, soft max, rotary embeddings, sorting and
// attention (constructors in ops_nn.cpp, ops_moe.cpp). Note [Shape rules]
// in fits.h.

#include "fits_impl.h"

namespace loom {

using namespace fits;

namespace {

bool is_rope_mode(int32_t mode) {
    return mode == GGML_ROPE_TYPE_NORMAL || mode == GGML_ROPE_TYPE_NEOX || mode == GGML_ROPE_TYPE_MROPE ||
           mode == GGML_ROPE_TYPE_VISION || mode == GGML_ROPE_TYPE_IMROPE;
}

bool is_precision(int32_t p) {
    return p == GGML_PREC_DEFAULT || p == GGML_PREC_F32;
}

// Attention sinks (soft max's src[2], flash attention's src[4]): one F32
// per head of src[0], which the kernels read as sinks[h].
bool sinks_fit(const ggml_tensor * n, std::string * why, int slot) {
    const ggml_tensor * s     = n->src[slot];
    const ggml_tensor * a     = n->src[0];
    LOOM_FITS(s == nullptr || (s->type == GGML_TYPE_F32 && s->ne[0] == a->ne[2] && s->nb[0] == sizeof(float)),
              "sinks (src[%d]) %s must be f32 with one value per head (ne2) of src[0] %s, adjacent", slot, describe(s).text,
              describe(a).text);
    return true;
}

// A mask of soft max or attention: F16 or F32, contiguous, ne0 values for
// each of at least rows rows, broadcast over the heads and sequences of q.
bool mask_fits(const ggml_tensor * n, std::string * why, int slot, int64_t ne0, const ggml_tensor * q) {
    const ggml_tensor * m = n->src[slot];
    if (m == nullptr) {
        return true;
    }
    LOOM_FITS(m->type == GGML_TYPE_F16 || m->type == GGML_TYPE_F32, "mask (src[%d]) %s must be f16 or f32", slot,
              describe(m).text);
    LOOM_FITS(ggml_is_contiguous(m), "mask (src[%d]) %s must be contiguous", slot, describe(m).text);
    LOOM_FITS(m->ne[0] == ne0 && m->ne[1] >= q->ne[1] && divides(m->ne[2], q->ne[2]) && divides(m->ne[3], q->ne[3]),
              "mask (src[%d]) %s does not fit src[0] %s (mask shape: ne0 %lld, at least its rows, heads and "
              "sequences dividing its)",
              slot, describe(m).text, describe(q).text, (long long) ne0);
    return true;
}

} // namespace

bool fits_mul_mat(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(a->ne[0] == b->ne[0] && divides(a->ne[2], b->ne[2]) && divides(a->ne[3], b->ne[3]),
              "src[0] %s and src[1] %s cannot be multiplied (ne0 must match, a broadcast over dims 2, 3)",
              describe(a).text, describe(b).text);
    LOOM_FITS(!ggml_is_transposed(a), "src[0] %s must not be transposed", describe(a).text);
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, a->ne[1], b->ne[1], b->ne[2], b->ne[3]);
}

bool fits_out_prod(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(a->ne[1] == b->ne[1] && divides(a->ne[2], b->ne[2]) && divides(a->ne[3], b->ne[3]),
              "src[0] %s and src[1] %s do not fit an outer product (ne1 must match, a broadcast over dims 2, 3)",
              describe(a).text, describe(b).text);
    LOOM_FITS(!ggml_is_transposed(a), "src[0] %s must not be transposed", describe(a).text);
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, a->ne[0], b->ne[0], b->ne[2], b->ne[3]);
}

// MUL_MAT_ID: op params [precision, 0, 0, precision of src[1]], the
// precisions as ggml_prec_set_acc and ggml_prec_set_src set them.
bool fits_mul_mat_id(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * as  = n->src[0];
    const ggml_tensor * b   = n->src[1];
    const ggml_tensor * ids = n->src[2];
    LOOM_FITS(!ggml_is_transposed(as), "experts (src[0]) %s must not be transposed", describe(as).text);
    LOOM_FITS(ids->type == GGML_TYPE_I32, "ids (src[2]) %s must be i32", describe(ids).text);
    LOOM_FITS(as->ne[3] == 1, "experts (src[0]) %s must be 3-d (one matrix per expert)", describe(as).text);
    LOOM_FITS(b->ne[3] == 1, "b (src[1]) %s must be 3-d", describe(b).text);
    LOOM_FITS(ids->ne[2] == 1 && ids->ne[3] == 1, "ids (src[2]) %s must be 2-d", describe(ids).text);
    LOOM_FITS(ids->ne[1] == b->ne[2],
              "ids (src[2]) %s must hold one list of experts per token of b (src[1]) %s (ne1 == b's ne2)",
              describe(ids).text, describe(b).text);
    LOOM_FITS(as->ne[0] == b->ne[0], "experts (src[0]) %s and b (src[1]) %s cannot be multiplied (ne0 must match)",
              describe(as).text, describe(b).text);
    LOOM_FITS(b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0,
              "b (src[1]) %s cannot be broadcast to the %lld experts used per token of ids (src[2]) %s",
              describe(b).text, (long long) ids->ne[0], describe(ids).text);
    for (int slot : {0, 3}) {
        LOOM_FITS(is_precision(n->op_params[slot]), "op_params[%d] = %d is not a precision", slot,
                  int(n->op_params[slot]));
    }
    LOOM_FITS(n->op_params[1] == 0 && n->op_params[2] == 0, "op_params[1], [2] = %d, %d: op params the constructor "
              "does not set", int(n->op_params[1]), int(n->op_params[2]));
    return params_unset_from(n, why, 4) && node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, as->ne[1], ids->ne[0], b->ne[2], 1);
}

// SOFT_MAX: op params [scale, max_bias]; src[1] a mask, src[2] sinks.
bool fits_soft_max(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a        = n->src[0];
    const float         max_bias = op_param_f32(n, 1);
    LOOM_FITS(a->type == GGML_TYPE_F32, "src[0] %s must be f32", describe(a).text);
    LOOM_FITS(ggml_is_contiguous(a), "src[0] %s must be contiguous", describe(a).text);
    LOOM_FITS(max_bias <= 0.0f || n->src[1] != nullptr, "max_bias %g needs a mask", double(max_bias));
    return mask_fits(n, why, 1, a->ne[0], a) && sinks_fit(n, why, 2) && node_like_src(n, why, 0);
}

// ROPE and ROPE_BACK: op params as ggml lays them out (rope_impl in
// ops_nn.cpp): [1] n_dims, [2] mode, [11..14] the sections of the
// multi-section modes, [15] the offset of ggml_rope_set_offset. Plain modes
// take one position per row of dim 2, the multi-section ones four.
bool fits_rope(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a      = n->src[0];
    const ggml_tensor * b      = n->src[1];
    const ggml_tensor * c      = n->src[2];
    const int32_t       n_dims = op_param_i32(n, 1);
    const int32_t       mode   = op_param_i32(n, 2);
    const int32_t       n_offs = op_param_i32(n, 15);
    LOOM_FITS(is_rope_mode(mode), "rope mode %d is not supported (normal 0, neox 2, mrope 8, vision 24, imrope 40)",
              int(mode));
    LOOM_FITS(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16, "src[0] %s must be f32 or f16", describe(a).text);
    LOOM_FITS(ggml_is_vector(b) && b->type == GGML_TYPE_I32, "positions (src[1]) %s must be an i32 vector",
              describe(b).text);
    const bool multi  = (mode & GGML_ROPE_TYPE_MROPE) != 0;
    const bool vision = mode == GGML_ROPE_TYPE_VISION;
    LOOM_FITS(b->ne[0] == (multi ? 4 : 1) * wide(a->ne[2]), "%lld positions (src[1]) for src[0] %s (%s per row of dim 2)",
              (long long) b->ne[0], describe(a).text, multi ? "4" : "one");
    LOOM_FITS(n_dims >= 0 && n_dims % 2 == 0 && n_dims <= a->ne[0],
              "n_dims %d must be even, not negative and at most ne0 of src[0] %s", int(n_dims), describe(a).text);
    LOOM_FITS(!vision || 2 * wide(n_dims) == a->ne[0], "vision rope needs n_dims %d = ne0/2 of src[0] %s",
              int(n_dims), describe(a).text);
    if (multi) {
        const int32_t * s = n->op_params + 11;
        LOOM_FITS(s[0] >= 0 && s[1] >= 0 && s[2] >= 0 && s[3] >= 0 && wide(s[0]) + s[1] + s[2] > 0,
                  "rope sections %d, %d, %d, %d: rope mode %d needs sections (ggml_rope_multi), none negative and "
                  "not all of the first three 0",
                  int(s[0]), int(s[1]), int(s[2]), int(s[3]), int(mode));
        LOOM_FITS(wide(s[0]) + s[1] + s[2] + s[3] <= a->ne[0], "rope sections %d+%d+%d+%d exceed ne0 of src[0] %s",
                  int(s[0]), int(s[1]), int(s[2]), int(s[3]), describe(a).text);
    }
    // The rotated pairs: n_dims / 2, of values n_dims / 2 apart for vision.
    const int64_t pairs = vision ? n_dims : n_dims / 2;
    LOOM_FITS(c == nullptr || (c->type == GGML_TYPE_F32 && ggml_is_contiguous(c) && c->ne[0] >= pairs),
              "frequency factors (src[2]) %s must be contiguous f32 with at least %lld values", describe(c).text,
              (long long) pairs);
    LOOM_FITS(!vision || n_offs == 0, "offset %d: vision rope takes no offset", int(n_offs));
    LOOM_FITS(n_offs >= 0 && n_offs % 2 == 0 && wide(n_offs) + 2 * wide(pairs) <= a->ne[0],
              "offset %d must be even, not negative and leave n_dims %d values in the rows of src[0] %s", int(n_offs),
              int(n_dims), describe(a).text);
    return node_like_src(n, why, 0);
}

// ARGSORT: op params [order].
bool fits_argsort(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a     = n->src[0];
    const int32_t       order = op_param_i32(n, 0);
    LOOM_FITS(a->ne[0] <= INT32_MAX, "rows of src[0] %s are too long for i32 indices", describe(a).text);
    LOOM_FITS(order == GGML_SORT_ORDER_ASC || order == GGML_SORT_ORDER_DESC, "unknown sort order %d", int(order));
    return node_type_is(n, why, GGML_TYPE_I32) && node_shape_is(n, why, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}

// TOP_K: the node's ne0 is k.
bool fits_top_k(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(n->ne[0] <= a->ne[0], "k = %lld out of range for src[0] %s", (long long) n->ne[0], describe(a).text);
    return node_type_is(n, why, GGML_TYPE_I32) && node_shape_is(n, why, n->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}

// FLASH_ATTN_EXT: op params [scale, max_bias, logit_softcap, precision,
// n_kv_max]; src[3] a mask, src[4] sinks.
bool fits_flash_attn_ext(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * q        = n->src[0];
    const ggml_tensor * k        = n->src[1];
    const ggml_tensor * v        = n->src[2];
    const float         max_bias = op_param_f32(n, 1);
    LOOM_FITS(k->ne[0] == q->ne[0] && divides(k->ne[2], q->ne[2]) && divides(k->ne[3], q->ne[3]),
              "k (src[1]) %s and q (src[0]) %s differ in head size or heads do not divide", describe(k).text,
              describe(q).text);
    LOOM_FITS(q->ne[3] == k->ne[3] && q->ne[3] == v->ne[3], "q (src[0]) %s, k (src[1]) %s and v (src[2]) %s differ in dim 3",
              describe(q).text, describe(k).text, describe(v).text);
    LOOM_FITS(k->ne[1] == v->ne[1] && k->ne[2] == v->ne[2], "k (src[1]) %s and v (src[2]) %s differ in length or heads",
              describe(k).text, describe(v).text);
    LOOM_FITS(q->type == GGML_TYPE_F32, "q (src[0]) %s must be f32", describe(q).text);
    LOOM_FITS(max_bias <= 0.0f || n->src[3] != nullptr, "max_bias %g needs a mask", double(max_bias));
    return mask_fits(n, why, 3, k->ne[1], q) && sinks_fit(n, why, 4) && node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, v->ne[0], q->ne[2], q->ne[1], q->ne[3]);
}

} // namespace loom
