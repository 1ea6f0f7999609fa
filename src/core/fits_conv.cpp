// Rules of the convolution, pooling and resampling family and of the
// window and relative-position operators of SAM's image encoder
// (constructors in ops_conv.cpp): sizes and steps in range, known modes, and
// the node's shape the one its sources and op params give, so that a
// kernel iterating over the node stays inside its sources. Note [Shape
// rules] in fits.h.

#include "fits_impl.h"

namespace loom {

using namespace fits;

namespace {

int64_t param(const ggml_tensor * n, int i) {
    return op_param_i32(n, i);
}

// Output length of a convolution along one axis (ops_conv.cpp's formula).
wide conv_out(wide in, wide k, wide s, wide p, wide d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// Output length of a pooling along one axis, computed in float as ggml does.
int64_t pool_out(int64_t in, int64_t k, int64_t s, float p) {
    return int64_t((float(in) + 2 * p - float(k)) / float(s) + 1);
}

// Stride (op_params[s]) and dilation (op_params[d]) of one axis.
bool steps_fit(const ggml_tensor * n, std::string * why, int s, int d, const char * axis) {
    LOOM_FITS(param(n, s) > 0 && param(n, d) > 0, "stride %d and dilation %d along %s must be positive",
              int(param(n, s)), int(param(n, d)), axis);
    return true;
}

bool patches_type_fit(const ggml_tensor * n, std::string * why) {
    LOOM_FITS(n->type == GGML_TYPE_F32 || n->type == GGML_TYPE_F16, "patches of type %s (f32 or f16)",
              ggml_type_name(n->type));
    return true;
}

// Of the direct convolutions: the image's type, which their result takes.
bool image_type_fit(const ggml_tensor * n, std::string * why) {
    LOOM_FITS(is_float_type(n->src[1]->type), "image (src[1]) %s must be f32, f16 or bf16", describe(n->src[1]).text);
    return node_type_is(n, why, n->src[1]->type);
}

// The steps, type and output plane of the direct 2D convolutions (op
// params [s0, s1, p0, p1, d0, d1], kernel src[0], image src[1]): false
// with why set, or the output's width and height in *ow, *oh.
bool conv_2d_plane_fits(const ggml_tensor * n, std::string * why, wide * ow, wide * oh) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    if (!steps_fit(n, why, 0, 4, "dim 0") || !steps_fit(n, why, 1, 5, "dim 1") || !image_type_fit(n, why)) {
        return false;
    }
    *ow = conv_out(b->ne[0], a->ne[0], param(n, 0), param(n, 2), param(n, 4));
    *oh = conv_out(b->ne[1], a->ne[1], param(n, 1), param(n, 3), param(n, 5));
    LOOM_FITS(*ow > 0 && *oh > 0, "image (src[1]) %s is too small for kernel (src[0]) %s", describe(b).text,
              describe(a).text);
    return true;
}

} // namespace

// IM2COL: op params [s0, s1, p0, p1, d0, d1, is_2D].
bool fits_im2col(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a     = n->src[0];
    const ggml_tensor * b     = n->src[1];
    const int64_t       is_2d = param(n, 6);
    LOOM_FITS(is_2d == 0 || is_2d == 1, "is_2D %d must be 0 or 1", int(is_2d));
    if (!steps_fit(n, why, 0, 4, "dim 0") || (is_2d && !steps_fit(n, why, 1, 5, "dim 1"))) {
        return false;
    }
    if (is_2d) {
        LOOM_FITS(a->ne[2] == b->ne[2], "kernel (src[0]) %s and image (src[1]) %s differ in channels (ne2)",
                  describe(a).text, describe(b).text);
    } else {
        LOOM_FITS(a->ne[1] == b->ne[1] && b->ne[3] == 1,
                  "kernel (src[0]) %s and signal (src[1]) %s differ in channels (ne1), or the signal has a dim 3",
                  describe(a).text, describe(b).text);
    }
    const wide ow = conv_out(b->ne[0], a->ne[0], param(n, 0), param(n, 2), param(n, 4));
    const wide oh = is_2d ? conv_out(b->ne[1], a->ne[1], param(n, 1), param(n, 3), param(n, 5)) : 1;
    LOOM_FITS(ow > 0 && oh > 0, "image (src[1]) %s is too small for kernel (src[0]) %s (output %lld x %lld)",
              describe(b).text, describe(a).text, (long long) ow, (long long) oh);
    if (!patches_type_fit(n, why)) {
        return false;
    }
    return is_2d ? node_shape_is(n, why, wide(a->ne[0]) * a->ne[1] * a->ne[2], ow, oh, b->ne[3])
                 : node_shape_is(n, why, wide(a->ne[0]) * a->ne[1], ow, b->ne[2], 1);
}

// IM2COL_3D: op params [s0, s1, s2, p0, p1, p2, d0, d1, d2, IC]. The image
// holds floor(ne3 / IC) batches (none when IC is larger: an empty result).
bool fits_im2col_3d(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a  = n->src[0];
    const ggml_tensor * b  = n->src[1];
    const int64_t       ic = param(n, 9);
    LOOM_FITS(ic > 0, "%lld channels for image (src[1]) %s must be positive", (long long) ic, describe(b).text);
    if (!steps_fit(n, why, 0, 6, "dim 0") || !steps_fit(n, why, 1, 7, "dim 1") || !steps_fit(n, why, 2, 8, "dim 2")) {
        return false;
    }
    wide o[3];
    for (int i = 0; i < 3; ++i) {
        o[i] = conv_out(b->ne[i], a->ne[i], param(n, i), param(n, 3 + i), param(n, 6 + i));
    }
    LOOM_FITS(o[0] > 0 && o[1] > 0 && o[2] > 0,
              "image (src[1]) %s is too small for kernel (src[0]) %s (output %lld x %lld x %lld)", describe(b).text,
              describe(a).text, (long long) o[0], (long long) o[1], (long long) o[2]);
    return patches_type_fit(n, why) &&
           node_shape_is(n, why, wide(a->ne[0]) * a->ne[1] * a->ne[2] * ic, o[0], o[1], o[2] * (b->ne[3] / ic));
}

// COL2IM_1D: op params [s0, oc, p0].
bool fits_col2im_1d(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a  = n->src[0];
    const int64_t       s0 = param(n, 0), oc = param(n, 1), p0 = param(n, 2);
    LOOM_FITS(ggml_is_matrix(a) && ggml_is_contiguous(a), "columns (src[0]) %s must be a contiguous matrix",
              describe(a).text);
    LOOM_FITS(is_float_type(a->type), "columns (src[0]) %s must be f32, f16 or bf16", describe(a).text);
    LOOM_FITS(s0 > 0 && oc > 0 && p0 >= 0, "stride %d and channels %d must be positive, padding %d not negative",
              int(s0), int(oc), int(p0));
    const int64_t k     = a->ne[0] / oc;
    const wide    t_out = wide(a->ne[1] - 1) * s0 + k - 2 * wide(p0);
    LOOM_FITS(k * oc == a->ne[0] && k > 0 && t_out > 0,
              "columns (src[0]) %s are not %d channels of whole kernels, or leave no output (%lld)", describe(a).text,
              int(oc), (long long) t_out);
    return node_type_is(n, why, a->type) && node_shape_is(n, why, t_out, oc, 1, 1);
}

// CONV_2D (ggml_conv_2d_direct): op params [s0, s1, p0, p1, d0, d1].
bool fits_conv_2d(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(a->ne[2] == b->ne[2], "kernel (src[0]) %s [KW, KH, IC, OC] and image (src[1]) %s differ in channels",
              describe(a).text, describe(b).text);
    wide ow = 0, oh = 0;
    if (!conv_2d_plane_fits(n, why, &ow, &oh)) {
        return false;
    }
    return node_shape_is(n, why, ow, oh, a->ne[3], b->ne[3]);
}

// CONV_3D (ggml_conv_3d_direct): op params [s0, s1, s2, p0, p1, p2, d0, d1,
// d2, c, n, oc].
bool fits_conv_3d(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    const int64_t       c = param(n, 9), batch = param(n, 10), oc = param(n, 11);
    LOOM_FITS(c > 0 && batch > 0 && oc > 0, "channels %d, batch %d and output channels %d must be positive", int(c),
              int(batch), int(oc));
    LOOM_FITS(a->ne[3] == wide(c) * oc && b->ne[3] == wide(c) * batch,
              "kernel (src[0]) %s must have %d x %d and image (src[1]) %s %d x %d in dim 3", describe(a).text, int(c),
              int(oc), describe(b).text, int(c), int(batch));
    if (!steps_fit(n, why, 0, 6, "dim 0") || !steps_fit(n, why, 1, 7, "dim 1") || !steps_fit(n, why, 2, 8, "dim 2")) {
        return false;
    }
    wide o[3];
    for (int i = 0; i < 3; ++i) {
        o[i] = conv_out(b->ne[i], a->ne[i], param(n, i), param(n, 3 + i), param(n, 6 + i));
    }
    LOOM_FITS(o[0] > 0 && o[1] > 0 && o[2] > 0, "image (src[1]) %s is too small for kernel (src[0]) %s",
              describe(b).text, describe(a).text);
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, o[0], o[1], o[2], wide(oc) * batch);
}

// CONV_2D_DW (ggml_conv_2d_dw_direct): op params [s0, s1, p0, p1, d0, d1].
bool fits_conv_2d_dw(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    LOOM_FITS(a->ne[2] == 1 && a->ne[3] == b->ne[2], "kernel (src[0]) %s must be [KW, KH, 1, C] for image (src[1]) %s",
              describe(a).text, describe(b).text);
    wide ow = 0, oh = 0;
    if (!conv_2d_plane_fits(n, why, &ow, &oh)) {
        return false;
    }
    return node_shape_is(n, why, ow, oh, b->ne[2], b->ne[3]);
}

// CONV_TRANSPOSE_1D: op params [s0, p0, d0].
bool fits_conv_transpose_1d(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a  = n->src[0];
    const ggml_tensor * b  = n->src[1];
    const int64_t       s0 = param(n, 0);
    LOOM_FITS(ggml_is_matrix(b), "signal (src[1]) %s must be a matrix [L, IC]", describe(b).text);
    LOOM_FITS(a->ne[2] == b->ne[1] && a->ne[3] == 1, "kernel (src[0]) %s [K, OC, IC] does not fit signal (src[1]) %s",
              describe(a).text, describe(b).text);
    LOOM_FITS(param(n, 1) == 0 && param(n, 2) == 1, "padding %d must be 0 and dilation %d 1", int(param(n, 1)),
              int(param(n, 2)));
    LOOM_FITS(s0 > 0, "stride %d must be positive", int(s0));
    return node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, wide(b->ne[0] - 1) * s0 + a->ne[0], a->ne[1], b->ne[2], 1);
}

// CONV_TRANSPOSE_2D: op params [stride].
bool fits_conv_transpose_2d(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const ggml_tensor * b = n->src[1];
    const int64_t       s = param(n, 0);
    LOOM_FITS(a->ne[3] == b->ne[2], "kernel (src[0]) %s [KW, KH, OC, IC] and image (src[1]) %s differ in input channels",
              describe(a).text, describe(b).text);
    LOOM_FITS(s > 0, "stride %d must be positive", int(s));
    return node_type_is(n, why, GGML_TYPE_F32) &&
           node_shape_is(n, why, wide(b->ne[0] - 1) * s + a->ne[0], wide(b->ne[1] - 1) * s + a->ne[1], a->ne[2],
                         b->ne[3]);
}

// POOL_1D: op params [op, k0, s0, p0].
bool fits_pool_1d(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a  = n->src[0];
    const int64_t       op = param(n, 0), k0 = param(n, 1), s0 = param(n, 2), p0 = param(n, 3);
    LOOM_FITS(op == GGML_OP_POOL_MAX || op == GGML_OP_POOL_AVG, "pool op %d is not MAX or AVG", int(op));
    LOOM_FITS(k0 > 0 && s0 > 0, "kernel %d and stride %d must be positive", int(k0), int(s0));
    LOOM_FITS(p0 >= 0, "padding %d must not be negative", int(p0));
    const int64_t ow = pool_out(a->ne[0], k0, s0, float(p0));
    LOOM_FITS(ow > 0, "src[0] %s is too short for kernel %d with padding %d", describe(a).text, int(k0), int(p0));
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, ow, a->ne[1], a->ne[2], a->ne[3]);
}

// POOL_2D: op params [op, k0, k1, s0, s1, p0, p1]. The node's ne0 and ne1
// come from paddings that may be fractional (ggml_pool_2d), which the op
// params keep as integers: the kernels bound every window by the source,
// and only the other dimensions are tied to it here.
bool fits_pool_2d(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a  = n->src[0];
    const int64_t       op = param(n, 0);
    LOOM_FITS(op == GGML_OP_POOL_MAX || op == GGML_OP_POOL_AVG, "pool op %d is not MAX or AVG", int(op));
    LOOM_FITS(param(n, 1) > 0 && param(n, 2) > 0 && param(n, 3) > 0 && param(n, 4) > 0,
              "kernel %d x %d and stride %d x %d must be positive", int(param(n, 1)), int(param(n, 2)),
              int(param(n, 3)), int(param(n, 4)));
    LOOM_FITS(param(n, 5) >= 0 && param(n, 6) >= 0, "padding %d, %d must not be negative", int(param(n, 5)),
              int(param(n, 6)));
    LOOM_FITS(n->ne[0] > 0 && n->ne[1] > 0, "src[0] %s is too small for kernel %d x %d with padding %d, %d",
              describe(a).text, int(param(n, 1)), int(param(n, 2)), int(param(n, 5)), int(param(n, 6)));
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, n->ne[0], n->ne[1], a->ne[2], a->ne[3]);
}

// UPSCALE: op params [mode and flags].
bool fits_upscale(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a     = n->src[0];
    const int32_t       flags = op_param_i32(n, 0);
    const uint32_t      mode  = uint32_t(flags) & 0xFF;
    LOOM_FITS(flags >= 0 && mode < GGML_SCALE_MODE_COUNT, "scale mode %u is not a ggml_scale_mode (flags %d)", mode,
              int(flags));
    LOOM_FITS(!(flags & GGML_SCALE_FLAG_ANTIALIAS) || mode == GGML_SCALE_MODE_BILINEAR,
              "antialiasing is for the bilinear mode only (mode %u)", mode);
    LOOM_FITS(a->type == GGML_TYPE_F32, "src[0] %s must be f32", describe(a).text);
    LOOM_FITS(n->ne[0] > 0 && n->ne[1] > 0 && n->ne[2] > 0 && n->ne[3] > 0, "the size of the node %s must be positive",
              describe(n).text);
    return node_type_is(n, why, a->type);
}

// WIN_PART: op params [npx, npy, w].
bool fits_win_part(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a   = n->src[0];
    const int64_t       npx = param(n, 0), npy = param(n, 1), w = param(n, 2);
    LOOM_FITS(a->ne[3] == 1 && a->type == GGML_TYPE_F32, "src[0] %s must be f32 [C, W, H, 1]", describe(a).text);
    LOOM_FITS(w > 0, "window size %d must be positive", int(w));
    LOOM_FITS(npx == (wide(a->ne[1]) + w - 1) / w && npy == (wide(a->ne[2]) + w - 1) / w,
              "%d x %d windows of %d do not cover src[0] %s", int(npx), int(npy), int(w), describe(a).text);
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, a->ne[0], w, w, wide(npx) * npy);
}

// WIN_UNPART: op params [w]; the node's ne1, ne2 are the size covered.
bool fits_win_unpart(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a = n->src[0];
    const int64_t       w = param(n, 0);
    LOOM_FITS(a->type == GGML_TYPE_F32, "src[0] %s must be f32", describe(a).text);
    LOOM_FITS(w > 0 && n->ne[1] > 0 && n->ne[2] > 0, "window %d and size %lld x %lld must be positive", int(w),
              (long long) n->ne[1], (long long) n->ne[2]);
    const wide windows = ((wide(n->ne[1]) + w - 1) / w) * ((wide(n->ne[2]) + w - 1) / w);
    LOOM_FITS(a->ne[1] == w && a->ne[2] == w && a->ne[3] >= windows,
              "src[0] %s is not %lld windows of %d x %d covering %lld x %lld", describe(a).text, (long long) windows,
              int(w), int(w), (long long) n->ne[1], (long long) n->ne[2]);
    return node_type_is(n, why, GGML_TYPE_F32) && node_shape_is(n, why, a->ne[0], n->ne[1], n->ne[2], 1);
}

// GET_REL_POS: the node's ne1 and ne2 are the key and query sizes.
bool fits_get_rel_pos(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a  = n->src[0];
    const int64_t       kh = n->ne[1], qh = n->ne[2];
    LOOM_FITS(qh == kh && qh > 0, "query size %lld and key size %lld must be one positive size", (long long) qh,
              (long long) kh);
    LOOM_FITS(2 * wide(qh) - 1 == a->ne[1], "src[0] %s must have 2 * %lld - 1 positions (ne1)", describe(a).text,
              (long long) qh);
    return node_type_is(n, why, GGML_TYPE_F16) && node_shape_is(n, why, a->ne[0], kh, qh, 1);
}

// ADD_REL_POS: op params [inplace]; src[1], src[2] the positions along the
// width and the height.
bool fits_add_rel_pos(const ggml_tensor * n, std::string * why) {
    const ggml_tensor * a  = n->src[0];
    const ggml_tensor * pw = n->src[1];
    const ggml_tensor * ph = n->src[2];
    LOOM_FITS(ggml_are_same_shape(pw, ph), "src[1] %s and src[2] %s must have one shape", describe(pw).text,
              describe(ph).text);
    LOOM_FITS(ggml_is_contiguous(a) && ggml_is_contiguous(pw) && ggml_is_contiguous(ph),
              "src[0] %s, src[1] %s and src[2] %s must be contiguous", describe(a).text, describe(pw).text,
              describe(ph).text);
    LOOM_FITS(a->type == GGML_TYPE_F32 && pw->type == GGML_TYPE_F32 && ph->type == GGML_TYPE_F32,
              "src[0] %s, src[1] %s and src[2] %s must be f32", describe(a).text, describe(pw).text, describe(ph).text);
    LOOM_FITS(pw->ne[3] == a->ne[2] && wide(pw->ne[0]) * pw->ne[0] == a->ne[0] && wide(pw->ne[1]) * pw->ne[2] == a->ne[1],
              "positions (src[1]) %s do not fit src[0] %s (ne0^2 = its ne0, ne1*ne2 = its ne1, ne3 = its ne2)",
              describe(pw).text, describe(a).text);
    return node_like_src(n, why, 0);
}

} // namespace loom
