// Rules of element-wise arithmetic, unary functions, reductions and
// normalisations (constructors in ops_math.cpp). Note [Shape rules] in
// fits.h.

#include "fits_impl.h"

namespace loom {

using namespace fits;

// ADD, SUB, MUL, DIV: src[1] repeats into src[0], whose shape the node has.
// The node's type is free (ggml_add_cast): each device says which it takes.
bool fits_binary(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(ggml_can_repeat(b, a), "src[1] %s cannot be broadcast to src[0] %s", describe(b).text,
              describe(a).text);
    return node_shape_is(n, why, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}

bool fits_add1(const ggml_tensor * n, std::string * why) {
    LOOM_FITS(ggml_is_scalar(n->src[1]), "src[1] %s must be a scalar", describe(n->src[1]).text);
    return node_like_src(n, why, 0);
}

// An element-wise function of src[0] that keeps its shape and type.
bool fits_same(const ggml_tensor * n, std::string * why) {
    return node_like_src(n, why, 0);
}

bool fits_sum(const ggml_tensor * n, std::string * why) {
    return node_type_is(n, why, n->src[0]->type) && node_shape_is(n, why, 1, 1, 1, 1);
}

// SUM_ROWS (in src[0]'s type) and MEAN (F32): one value per row.
bool fits_sum_rows(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    return node_type_is(n, why, n->op == GGML_OP_MEAN ? GGML_TYPE_F32 : a->type) &&
           node_shape_is(n, why, 1, a->ne[1], a->ne[2], a->ne[3]);
}

bool fits_argmax(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(ggml_is_matrix(a), "src[0] %s must be a matrix", describe(a).text);
    LOOM_FITS(a->ne[0] <= INT32_MAX, "rows of src[0] %s are too long for i32 indices", describe(a).text);
    return node_type_is(n, why, GGML_TYPE_I32) && node_shape_is(n, why, a->ne[1], 1, 1, 1);
}

bool fits_group_norm(const ggml_tensor * n, std::string * why) {
    LOOM_FITS(op_param_i32(n, 0) > 0, "n_groups = %d must be positive", op_param_i32(n, 0));
    return node_like_src(n, why, 0);
}

bool fits_unary(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(unary_info(op_param_i32(n, 0)) != nullptr, "unknown unary op %d", op_param_i32(n, 0));
    LOOM_FITS(ggml_is_contiguous_rows(a), "rows of src[0] %s are not contiguous", describe(a).text);
    return node_like_src(n, why, 0);
}

// GLU: op params [op, swapped, alpha, limit]. One source holds x and the
// gate side by side in each row (the last value of an odd row takes no
// part); two sources of one shape and type hold them apart.
bool fits_glu(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(glu_info(op_param_i32(n, 0)) != nullptr, "unknown gated linear unit %d", op_param_i32(n, 0));
    LOOM_FITS(ggml_is_contiguous_rows(a), "rows of src[0] %s are not contiguous", describe(a).text);
    if (b != nullptr) {
        LOOM_FITS(ggml_is_contiguous_rows(b), "rows of src[1] %s are not contiguous", describe(b).text);
        LOOM_FITS(ggml_are_same_shape(a, b) && a->type == b->type, "src[0] %s and src[1] %s differ in shape or type",
                  describe(a).text, describe(b).text);
        return node_like_src(n, why, 0);
    }
    LOOM_FITS(same_ne(n, a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3]),
              "the node %s must have rows half as long as those of src[0] %s (x and the gate)", describe(n).text,
              describe(a).text);
    return node_type_is(n, why, a->type);
}

} // namespace loom
