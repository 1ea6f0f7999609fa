// Rules of the backward operators (gradients of forward operators), the
// loss and the optimizer steps (constructors in ops_backward.cpp). The
// optimizer steps write their parameter (their node is a view of it) and
// AdamW its moments: whoever runs a graph counts those among what it
// writes. Note [Shape rules] in fits.h.

#include "fits_impl.h"

namespace loom {

using namespace fits;

namespace {

// Window sizes, strides and paddings a kernel can loop over without
// overflowing its int arithmetic.
constexpr int64_t k_max_window = 1 << 16;

bool in_window_range(int64_t v, int64_t lo) {
    return v >= lo && v <= k_max_window;
}

bool same_shape_and_type(const ggml_tensor * a, const ggml_tensor * b) {
    return a->type == b->type && ggml_are_same_shape(a, b);
}

} // namespace

// SILU_BACK, RMS_NORM_BACK, SOFT_MAX_BACK: the gradient (src[0]) and the
// forward input or result (src[1]), of one shape and float type, give a
// node of that shape and type.
bool fits_backward_same(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(ggml_are_same_shape(a, b), "gradient (src[0]) %s and input (src[1]) %s differ in shape", describe(a).text,
              describe(b).text);
    LOOM_FITS((a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16) && b->type == a->type,
              "gradient (src[0]) %s and input (src[1]) %s must be both f32 or both f16", describe(a).text,
              describe(b).text);
    return node_like_src(n, why, 0);
}

// GET_ROWS_BACK: the gradient's rows (src[0]) added into the rows of an F32
// matrix that the I32 indices (src[1]) name; gradient rows past the indices
// take no part.
bool fits_get_rows_back(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(ggml_is_matrix(a) && ggml_is_vector(b) && b->type == GGML_TYPE_I32 && b->ne[0] <= a->ne[1],
              "gradient (src[0]) %s must be a matrix with a row for each i32 index of the vector (src[1]) %s",
              describe(a).text, describe(b).text);
    LOOM_FITS(n->type == GGML_TYPE_F32 && ggml_is_matrix(n) && n->ne[0] == a->ne[0],
              "the node %s must be an f32 matrix with rows of %lld values", describe(n).text, (long long) a->ne[0]);
    return true;
}

// IM2COL_BACK: op params [s0, s1, p0, p1, d0, d1, is_2D]; the gradient
// (src[0]) is shaped as im2col's result for an input of the node's shape
// and the kernel (src[1]).
bool fits_im2col_back(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * grad  = n->src[0];
    const ggml_tensor * kern  = n->src[1];
    const int32_t *     p     = n->op_params;
    const bool          two_d = p[6] == 1;
    LOOM_FITS(p[6] == 0 || p[6] == 1, "is_2D %d must be 0 or 1", int(p[6]));
    LOOM_FITS(in_window_range(p[0], 1) && in_window_range(p[4], 1) && in_window_range(p[2], -k_max_window) &&
                  (!two_d || (in_window_range(p[1], 1) && in_window_range(p[5], 1) &&
                              in_window_range(p[3], -k_max_window))),
              "strides %d, %d and dilations %d, %d must be positive, they and paddings %d, %d at most %lld in size",
              int(p[0]), int(p[1]), int(p[4]), int(p[5]), int(p[2]), int(p[3]), (long long) k_max_window);
    const int64_t kw = kern->ne[0], kh = two_d ? kern->ne[1] : 1;
    LOOM_FITS(kw <= k_max_window && kh <= k_max_window, "kernel (src[1]) %s is larger than %lld", describe(kern).text,
              (long long) k_max_window);
    const int64_t ic = two_d ? n->ne[2] : n->ne[1];
    const int64_t nb = two_d ? n->ne[3] : n->ne[2];
    const wide    ow = (wide(n->ne[0]) + 2 * wide(p[2]) - wide(p[4]) * (kw - 1) - 1) / p[0] + 1;
    const wide    oh = two_d ? (wide(n->ne[1]) + 2 * wide(p[3]) - wide(p[5]) * (kh - 1) - 1) / p[1] + 1 : 1;
    const bool    ok = two_d ? same_ne(grad, wide(ic) * kh * kw, ow, oh, nb)
                             : same_ne(grad, wide(ic) * kw, ow, nb, 1) && n->ne[3] == 1;
    LOOM_FITS(ok, "gradient (src[0]) %s is not the im2col result of an input [%lld, %lld, %lld, %lld] and kernel (src[1]) %s",
              describe(grad).text, (long long) n->ne[0], (long long) n->ne[1], (long long) n->ne[2],
              (long long) n->ne[3], describe(kern).text);
    LOOM_FITS(grad->type == GGML_TYPE_F32, "gradient (src[0]) %s must be f32", describe(grad).text);
    return node_type_is(n, why, GGML_TYPE_F32);
}

// POOL_2D_BACK: op params [op, k0, k1, s0, s1, p0, p1]; the gradient
// (src[0]) of a pooling of the forward input (src[1]), whose shape the node
// has.
bool fits_pool_2d_back(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a  = n->src[0];
    const ggml_tensor * af = n->src[1];
    const int32_t *     p  = n->op_params;
    LOOM_FITS(p[0] == GGML_OP_POOL_MAX || p[0] == GGML_OP_POOL_AVG, "unknown pool op %d", int(p[0]));
    // The kernel walks only a window's taps inside the plane, in 64 bits:
    // any window size will do.
    LOOM_FITS(p[1] > 0 && p[2] > 0 && in_window_range(p[3], 1) && in_window_range(p[4], 1),
              "kernel %d x %d must be positive, strides %d, %d positive and at most %lld", int(p[1]), int(p[2]),
              int(p[3]), int(p[4]), (long long) k_max_window);
    LOOM_FITS(in_window_range(p[5], -k_max_window) && in_window_range(p[6], -k_max_window),
              "paddings %d, %d must be at most %lld in size", int(p[5]), int(p[6]), (long long) k_max_window);
    LOOM_FITS(a->ne[2] == af->ne[2] && a->ne[3] == af->ne[3],
              "gradient (src[0]) %s and forward input (src[1]) %s differ in dims 2, 3", describe(a).text,
              describe(af).text);
    LOOM_FITS(a->type == GGML_TYPE_F32 && af->type == GGML_TYPE_F32,
              "gradient (src[0]) %s and forward input (src[1]) %s must be f32", describe(a).text, describe(af).text);
    return node_like_src(n, why, 1);
}

bool fits_flash_attn_back(const ggml_tensor * n, std::string * why) {
    LOOM_FITS(false, "not available (as in ggml 0.25.1): no backward of flash attention for q (src[0]) %s",
              describe(n->src[0]).text);
    return false;
}

bool fits_cross_entropy_loss(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(ggml_are_same_shape(a, b), "logits (src[0]) %s and labels (src[1]) %s differ in shape", describe(a).text,
              describe(b).text);
    LOOM_FITS(a->type == GGML_TYPE_F32 && b->type == GGML_TYPE_F32, "logits (src[0]) %s and labels (src[1]) %s must be f32",
              describe(a).text, describe(b).text);
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, 1, 1, 1, 1);
}

bool fits_cross_entropy_loss_back(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    const ggml_tensor * c = n->src[2];
    LOOM_FITS(ggml_is_scalar(a) && a->type == GGML_TYPE_F32, "loss gradient (src[0]) %s must be a scalar f32",
              describe(a).text);
    LOOM_FITS(ggml_are_same_shape(b, c), "logits (src[1]) %s and labels (src[2]) %s differ in shape", describe(b).text,
              describe(c).text);
    LOOM_FITS(b->type == GGML_TYPE_F32 && c->type == GGML_TYPE_F32, "logits (src[1]) %s and labels (src[2]) %s must be f32",
              describe(b).text, describe(c).text);
    return node_like_src(n, why, 1);
}

// OPT_STEP_ADAMW: parameter, gradient, moments m and v, 7 hyperparameters.
bool fits_opt_step_adamw(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(a->type == GGML_TYPE_F32, "parameter (src[0]) %s must be f32", describe(a).text);
    LOOM_FITS(same_shape_and_type(n->src[1], a) && same_shape_and_type(n->src[2], a) &&
                  same_shape_and_type(n->src[3], a),
              "parameter (src[0]) %s, gradient (src[1]) %s, moments (src[2]) %s and (src[3]) %s differ in shape or "
              "type",
              describe(a).text, describe(n->src[1]).text, describe(n->src[2]).text, describe(n->src[3]).text);
    LOOM_FITS(n->src[4]->type == GGML_TYPE_F32 && ggml_nelements(n->src[4]) == 7,
              "adamw parameters (src[4]) %s must be 7 f32 values", describe(n->src[4]).text);
    return node_like_src(n, why, 0);
}

// OPT_STEP_SGD: parameter, gradient, 2 hyperparameters.
bool fits_opt_step_sgd(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    LOOM_FITS(a->type == GGML_TYPE_F32, "parameter (src[0]) %s must be f32", describe(a).text);
    LOOM_FITS(same_shape_and_type(n->src[1], a), "parameter (src[0]) %s and gradient (src[1]) %s differ in shape or type",
              describe(a).text, describe(n->src[1]).text);
    LOOM_FITS(n->src[2]->type == GGML_TYPE_F32 && ggml_nelements(n->src[2]) == 2,
              "sgd parameters (src[2]) %s must be 2 f32 values", describe(n->src[2]).text);
    return node_like_src(n, why, 0);
}

} // namespace loom
