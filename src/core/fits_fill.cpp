// Rules of the fills, masks, triangles, running sums, and of the operators
// that write into part of a tensor or move its elements (constructors in
// ops_fill.cpp). Note [Shape rules] in fits.h.

#include <cmath>

#include "fits_impl.h"

namespace loom {

using namespace fits;

// FILL: op params [c].
bool fits_fill(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16, "src[0] %s is not F32 or F16", describe(a).text);
    LOOM_FITS(ggml_is_contiguous(a), "src[0] %s is not contiguous", describe(a).text);
    return node_like_src(n, why, 0);
}

// ARANGE: op params [start, stop, step]; no sources.
bool fits_arange(const ggml_tensor * n, std::string * why) {
    const float start = op_param_f32(n, 0);
    const float stop  = op_param_f32(n, 1);
    const float step  = op_param_f32(n, 2);
    LOOM_FITS(stop > start, "stop = %g is not above start = %g", double(stop), double(start));
    LOOM_FITS(step > 0.0f, "step = %g is not positive", double(step));
    const float steps = std::ceil((stop - start) / step);
    LOOM_FITS(steps <= float(INT32_MAX), "%g steps from %g to %g by %g are too many", double(steps), double(start),
              double(stop), double(step));
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, int64_t(steps), 1, 1, 1);
}

// TRI: op params [type].
bool fits_tri(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a    = n->src[0];
    const int32_t       type = op_param_i32(n, 0);
    LOOM_FITS(a->type == GGML_TYPE_F32, "src[0] %s is not F32", describe(a).text);
    LOOM_FITS(ggml_is_contiguous(a), "src[0] %s is not contiguous", describe(a).text);
    LOOM_FITS(a->ne[0] == a->ne[1], "src[0] %s is not square in dimensions 0 and 1", describe(a).text);
    LOOM_FITS(type >= GGML_TRI_TYPE_UPPER_DIAG && type <= GGML_TRI_TYPE_LOWER, "unknown triangle type %d", int(type));
    return node_like_src(n, why, 0);
}

bool fits_cumsum(const ggml_tensor * n, std::string * why) {
    LOOM_FITS(n->src[0]->type == GGML_TYPE_F32, "src[0] %s is not F32", describe(n->src[0]).text);
    return node_like_src(n, why, 0);
}

bool fits_count_equal(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(ggml_are_same_shape(a, b), "src[0] %s and src[1] %s differ in shape", describe(a).text,
              describe(b).text);
    return node_type_is(n, why, GGML_TYPE_I64) && node_shape_is(n, why, 1, 1, 1, 1);
}

// L2_NORM: op params [eps].
bool fits_l2_norm(const ggml_tensor * n, std::string * why) {
    const float eps = op_param_f32(n, 0);
    LOOM_FITS(eps >= 0.0f, "eps = %g is negative", double(eps));
    return node_like_src(n, why, 0);
}

bool fits_diag(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(a->ne[1] == 1, "src[0] %s is not a row (dimension 1 of size 1)", describe(a).text);
    return node_type_is(n, why, a->type) && node_shape_is(n, why, a->ne[0], a->ne[0], a->ne[2], a->ne[3]);
}

// DIAG_MASK_ZERO: op params [n_past].
bool fits_diag_mask_zero(const ggml_tensor * n, std::string * why) {
    LOOM_FITS(op_param_i32(n, 0) >= 0, "n_past = %d is negative", op_param_i32(n, 0));
    return node_like_src(n, why, 0);
}

// ACC and SET: op params [nb1, nb2, nb3, offset, inplace]. The node has
// src[0]'s shape and type; src[1] is written into (added to) the view of
// the node with src[1]'s shape, element stride the type's size, strides
// nb1..nb3 and the byte offset, which must lie inside the node. The
// strides and offset are 32-bit and src[1]'s sizes up to 2^40: the last
// byte is summed in 128 bits, where it cannot wrap around.
bool fits_write_view(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    if (n->op == GGML_OP_ACC) {
        LOOM_FITS(ggml_is_contiguous(a), "src[0] %s is not contiguous", describe(a).text);
        LOOM_FITS(a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32, "src[0] %s and src[1] %s must be F32",
                  describe(a).text, describe(b).text);
    }
    LOOM_FITS(b->type == a->type, "src[1] %s must have the type of src[0] %s", describe(b).text, describe(a).text);
    LOOM_FITS(ggml_nelements(b) <= ggml_nelements(a), "src[1] %s has more elements than src[0] %s", describe(b).text,
              describe(a).text);
    if (ggml_nelements(b) > 0) {
        using u128           = unsigned __int128;
        const uint32_t p[4]  = {uint32_t(n->op_params[0]), uint32_t(n->op_params[1]), uint32_t(n->op_params[2]),
                                uint32_t(n->op_params[3])};
        const u128     es    = ggml_type_size(a->type);
        const u128     nb[4] = {es, p[0], p[1], p[2]};
        u128           last  = p[3];
        for (int d = 0; d < 4; ++d) {
            last += u128(b->ne[d] - 1) * nb[d];
        }
        LOOM_FITS(last + es <= ggml_nbytes(n),
                  "src[1] %s is written into a view that lies inside a node of src[0]'s shape, but the view with strides %u, %u, %u "
                  "and offset %u ends at byte %s, past the %zu bytes of %s",
                  describe(b).text, p[0], p[1], p[2], p[3], wide_text(wide(last + es)).text,
                  ggml_nbytes(n), describe(n).text);
    }
    return node_like_src(n, why, 0);
}

bool fits_repeat_back(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(ggml_can_repeat(n, a), "src[0] %s is not a repetition of the node %s", describe(a).text,
              describe(n).text);
    return node_type_is(n, why, a->type);
}

// ADD_ID: row r of src[0]'s matrix e gets row ids[r, e] of src[1] added.
bool fits_add_id(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a   = n->src[0];
    const ggml_tensor * b   = n->src[1];
    const ggml_tensor * ids = n->src[2];
    LOOM_FITS(a->ne[0] == b->ne[0], "rows of src[0] %s and src[1] %s differ in length", describe(a).text,
              describe(b).text);
    LOOM_FITS(ids->type == GGML_TYPE_I32, "ids (src[2]) %s are not I32", describe(ids).text);
    LOOM_FITS(a->ne[1] == ids->ne[0] && a->ne[2] == ids->ne[1], "ids (src[2]) %s do not match dimensions 1 and 2 of src[0] %s",
              describe(ids).text, describe(a).text);
    return node_like_src(n, why, 0);
}

// ROLL: op params [shift0, shift1, shift2, shift3].
bool fits_roll(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(a->nb[0] == ggml_type_size(a->type), "elements of src[0] %s are not adjacent", describe(a).text);
    for (int d = 0; d < 4; ++d) {
        const int64_t s = n->op_params[d];
        LOOM_FITS(s > -a->ne[d] && s < a->ne[d],
                  "shift %lld of dimension %d is not below the size of src[0] %s (shifts lie in (-ne, ne))",
                  (long long) s, d, describe(a).text);
    }
    return node_like_src(n, why, 0);
}

// PAD: op params [lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3, circular].
bool fits_pad(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a        = n->src[0];
    const bool          circular = n->op_params[8] != 0;
    wide                ne[4];
    for (int d = 0; d < 4; ++d) {
        const int32_t l = n->op_params[2 * d], r = n->op_params[2 * d + 1];
        ne[d]           = wide(a->ne[d]) + l + r;
        LOOM_FITS(ne[d] >= 0, "padding %d, %d of dimension %d of src[0] %s leaves %lld elements", int(l), int(r), d,
                  describe(a).text, (long long) ne[d]);
        LOOM_FITS(!circular || a->ne[d] > 0, "circular padding of the empty dimension %d of src[0] %s", d,
                  describe(a).text);
    }
    return node_type_is(n, why, a->type) && node_shape_is(n, why, ne[0], ne[1], ne[2], ne[3]);
}

// PAD_REFLECT_1D: op params [p0, p1].
bool fits_pad_reflect_1d(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a  = n->src[0];
    const int32_t       p0 = n->op_params[0], p1 = n->op_params[1];
    LOOM_FITS(p0 >= 0 && p1 >= 0, "padding %d, %d is negative", int(p0), int(p1));
    LOOM_FITS(p0 < a->ne[0] && p1 < a->ne[0], "padding %d, %d is not below the row length of src[0] %s", int(p0),
              int(p1), describe(a).text);
    LOOM_FITS(ggml_is_contiguous(a), "src[0] %s is not contiguous", describe(a).text);
    LOOM_FITS(a->type == GGML_TYPE_F32, "src[0] %s is not F32", describe(a).text);
    return node_type_is(n, why, a->type) && node_shape_is(n, why, wide(a->ne[0]) + p0 + p1, a->ne[1], a->ne[2], a->ne[3]);
}

// TIMESTEP_EMBEDDING: op params [dim, max_period].
bool fits_timestep_embedding(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * t   = n->src[0];
    const int32_t       dim = n->op_params[0], max_period = n->op_params[1];
    LOOM_FITS(dim > 0 && max_period > 0, "dim = %d and max_period = %d must be positive", int(dim), int(max_period));
    LOOM_FITS(t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1, "timesteps (src[0]) %s are not a vector",
              describe(t).text);
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, dim, t->ne[0], 1, 1);
}

} // namespace loom
