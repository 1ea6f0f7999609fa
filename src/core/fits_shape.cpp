// Rules of copies, repeats, concatenation and row gathers and scatters
// (constructors in ops_shape.cpp). Note [Shape rules] in fits.h.

#include "fits_impl.h"

namespace loom {

using namespace fits;

// DUP and CONT: the elements of src[0] in the node's shape. The node's
// type is free: each device says which conversions it makes.
bool fits_dup(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(ggml_nelements(n) == ggml_nelements(a), "the node %s must have as many elements as src[0] %s",
              describe(n).text, describe(a).text);
    return true;
}

// CPY: the node is src[1] (its destination, or the node itself for
// ggml_cast), written with the elements of src[0].
bool fits_cpy(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(ggml_nelements(a) == ggml_nelements(b), "src[0] %s and src[1] %s differ in element count",
              describe(a).text, describe(b).text);
    return node_like_src(n, why, 1);
}

bool fits_repeat(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(ggml_can_repeat(a, n), "src[0] %s cannot be repeated to the node's shape %s", describe(a).text,
              describe(n).text);
    return node_type_is(n, why, a->type);
}

// CONCAT: op params [dim].
bool fits_concat(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a   = n->src[0];
    const ggml_tensor * b   = n->src[1];
    const int32_t       dim = op_param_i32(n, 0);
    LOOM_FITS(dim >= 0 && dim < GGML_MAX_DIMS, "dim %d out of range", int(dim));
    LOOM_FITS(a->type == b->type, "src[0] %s and src[1] %s differ in type", describe(a).text, describe(b).text);
    wide ne[4];
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        LOOM_FITS(d == dim || a->ne[d] == b->ne[d], "src[0] %s and src[1] %s differ in dimension %d (concatenating along %d)",
                  describe(a).text, describe(b).text, d, int(dim));
        ne[d] = d == dim ? wide(a->ne[d]) + b->ne[d] : wide(a->ne[d]);
    }
    return node_type_is(n, why, a->type) && node_shape_is(n, why, ne[0], ne[1], ne[2], ne[3]);
}

// GET_ROWS: rows of src[0] picked by the I32 indices of src[1], read as F32
// (or in src[0]'s own type).
bool fits_get_rows(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(b->type == GGML_TYPE_I32, "indices (src[1]) %s must be i32", describe(b).text);
    LOOM_FITS(a->ne[2] == b->ne[1] && a->ne[3] == b->ne[2] && b->ne[3] == 1,
              "indices (src[1]) %s do not match the batch dimensions of src[0] %s", describe(b).text, describe(a).text);
    LOOM_FITS(n->type == GGML_TYPE_F32 || n->type == a->type, "the node %s must be f32 or of the type of src[0] %s",
              describe(n).text, describe(a).text);
    return node_shape_is(n, why, a->ne[0], b->ne[0], b->ne[1], b->ne[2]);
}

// SET_ROWS: the F32 or F16 rows of src[0] written into the node (a view of
// its destination, src[2] when present) at the I32 or I64 indices of src[1],
// which broadcast over dimensions 2 and 3 of the rows.
bool fits_set_rows(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * rows   = n->src[0];
    const ggml_tensor * idx    = n->src[1];
    const ggml_tensor * target = n->src[2] != nullptr ? n->src[2] : n;
    LOOM_FITS(rows->type == GGML_TYPE_F32 || rows->type == GGML_TYPE_F16, "rows (src[0]) %s must be f32 or f16",
              describe(rows).text);
    LOOM_FITS(is_index_type(idx->type), "indices (src[1]) %s must be i32 or i64", describe(idx).text);
    LOOM_FITS(idx->ne[0] == rows->ne[1] && idx->ne[1] > 0 && idx->ne[2] > 0 && rows->ne[2] % idx->ne[1] == 0 &&
                  rows->ne[3] % idx->ne[2] == 0 && idx->ne[3] == 1,
              "indices (src[1]) %s do not match rows (src[0]) %s", describe(idx).text, describe(rows).text);
    LOOM_FITS(n->ne[0] == rows->ne[0] && n->ne[2] == rows->ne[2] && n->ne[3] == rows->ne[3],
              "rows (src[0]) %s do not fit the destination %s", describe(rows).text, describe(n).text);
    LOOM_FITS(ggml_is_contiguous_rows(rows) && ggml_is_contiguous_rows(target),
              "rows of src[0] %s and of the destination %s must be contiguous", describe(rows).text,
              describe(target).text);
    return target == n || node_like_src(n, why, 2);
}

} // namespace loom
