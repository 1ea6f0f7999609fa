// Op constructors for convolutions (im2col and the products built on it,
// direct and transposed convolutions, col2im), pooling, resampling and the
// window and relative-position operators of SAM's image encoder. Shapes and
// op_params are those of ggml 0.25.1. Each builds its node, then checks it
// with its operator's rule (fits_conv.cpp, Note [Shape rules] in fits.h);
// a size that comes out negative (sources too small, a step that is not
// positive) is built as 0 for the rule to name.

#include <algorithm>

#include "common.h"
#include "context.h"
#include "fits.h"
#include "types.h"

using namespace loom;

namespace {

// Output length of a convolution along one axis (0 for a stride that is
// not positive).
int64_t conv_out_size(int64_t in, int64_t k, int s, int p, int d) {
    return s > 0 ? size_or_zero((in + 2 * int64_t(p) - int64_t(d) * (k - 1) - 1) / s + 1) : 0;
}

// Output length of a pooling along one axis; ggml computes it in float.
int64_t pool_out_size(int64_t in, int k, int s, float p) {
    return s > 0 ? size_or_zero(int64_t((float(in) + 2 * p - float(k)) / float(s) + 1)) : 0;
}

// The node, whose op params its caller sets before require_fits.
ggml_tensor * new_op(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne, ggml_op op, ggml_tensor * a,
                     ggml_tensor * b, const char * caller) {
    int64_t sizes[4];
    for (int i = 0; i < n_dims; ++i) {
        sizes[i] = size_or_zero(ne[i]);
    }
    ggml_tensor * r = new_tensor_impl(ctx, type, n_dims, sizes, nullptr, 0, caller);
    r->op           = op;
    r->src[0]       = a;
    r->src[1]       = b;
    return r;
}

// The type of the patches the im2col products use.
ggml_type patch_type(const ggml_tensor * kernel) {
    return kernel->type == GGML_TYPE_BF16 ? GGML_TYPE_F32 : GGML_TYPE_F16;
}

ggml_tensor * interpolate_impl(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                               uint32_t mode, const char * caller) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    ggml_tensor * r     = new_op(ctx, a->type, 4, ne, GGML_OP_UPSCALE, a, nullptr, caller);
    set_op_param_i32(r, 0, int32_t(mode));
    require_fits(r, caller);
    return r;
}

ggml_tensor * add_rel_pos_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * pw, ggml_tensor * ph, bool inplace,
                               const char * caller) {
    ggml_tensor * r = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    set_op_param_i32(r, 0, inplace ? 1 : 0);
    r->op     = GGML_OP_ADD_REL_POS;
    r->src[0] = a;
    r->src[1] = pw;
    r->src[2] = ph;
    require_fits(r, caller);
    return r;
}

} // namespace

extern "C" {

ggml_tensor * ggml_im2col(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1, int d0,
                          int d1, bool is_2D, ggml_type dst_type) {
    // The node's type: a block type might not hold its rows.
    LOOM_REQUIRE(dst_type == GGML_TYPE_F32 || dst_type == GGML_TYPE_F16, "patches of type %s (f32 or f16)",
                 ggml_type_name(dst_type));
    const int64_t OW = conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    const int64_t OH = is_2D ? conv_out_size(b->ne[1], a->ne[1], s1, p1, d1) : 1;
    const int64_t ne[4] = {is_2D ? a->ne[0] * a->ne[1] * a->ne[2] : a->ne[0] * a->ne[1], OW, is_2D ? OH : b->ne[2],
                           is_2D ? b->ne[3] : 1};
    ggml_tensor * r     = new_op(ctx, dst_type, 4, ne, GGML_OP_IM2COL, a, b, __func__);
    const int32_t params[7] = {s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0};
    set_op_params(r, params, sizeof(params));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_col2im_1d(ggml_context * ctx, ggml_tensor * a, int s0, int oc, int p0) {
    const int64_t K         = oc > 0 ? a->ne[0] / oc : 0;
    const int64_t ne[4]     = {(a->ne[1] - 1) * s0 + K - 2 * int64_t(p0), oc, 1, 1};
    ggml_tensor * r         = new_op(ctx, a->type, 2, ne, GGML_OP_COL2IM_1D, a, nullptr, __func__);
    const int32_t params[3] = {s0, oc, p0};
    set_op_params(r, params, sizeof(params));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_conv_1d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int p0, int d0) {
    ggml_tensor * cols = ggml_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, patch_type(a)); // [IC*K, OL, N]
    ggml_tensor * r    = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, cols, cols->ne[0], cols->ne[2] * cols->ne[1]),
                                      ggml_reshape_2d(ctx, a, a->ne[0] * a->ne[1], a->ne[2])); // [N*OL, OC]
    return ggml_reshape_3d(ctx, r, cols->ne[1], a->ne[2], cols->ne[2]);
}

ggml_tensor * ggml_conv_1d_ph(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s, int d) {
    return ggml_conv_1d(ctx, a, b, s, int(a->ne[0] / 2), d);
}

ggml_tensor * ggml_conv_1d_dw(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int p0, int d0) {
    ggml_tensor * signal = ggml_reshape_4d(ctx, b, b->ne[0], 1, b->ne[1], b->ne[2]);
    ggml_tensor * cols   = ggml_im2col(ctx, a, signal, s0, 0, p0, 0, d0, 0, false, patch_type(a)); // [K, OL, C]
    ggml_tensor * r      = ggml_mul_mat(ctx, cols, a);                                           // [OL, 1, C]
    return ggml_reshape_3d(ctx, r, r->ne[0], r->ne[2], 1);
}

ggml_tensor * ggml_conv_1d_dw_ph(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int d0) {
    return ggml_conv_1d_dw(ctx, a, b, s0, int(a->ne[0] / 2), d0);
}

ggml_tensor * ggml_conv_transpose_1d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int p0, int d0) {
    const int64_t ne[4]     = {(b->ne[0] - 1) * s0 + a->ne[0], a->ne[1], b->ne[2], 1};
    ggml_tensor * r         = new_op(ctx, GGML_TYPE_F32, 4, ne, GGML_OP_CONV_TRANSPOSE_1D, a, b, __func__);
    const int32_t params[3] = {s0, p0, d0};
    set_op_params(r, params, sizeof(params));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_conv_2d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1,
                           int d0, int d1) {
    ggml_tensor * cols = ggml_im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, patch_type(a)); // [IC*KH*KW, OW, OH, N]
    ggml_tensor * r =
        ggml_mul_mat(ctx, ggml_reshape_2d(ctx, cols, cols->ne[0], cols->ne[3] * cols->ne[2] * cols->ne[1]),
                     ggml_reshape_2d(ctx, a, a->ne[0] * a->ne[1] * a->ne[2], a->ne[3])); // [OW*OH*N, OC]
    r = ggml_reshape_4d(ctx, r, cols->ne[1], cols->ne[2], cols->ne[3], a->ne[3]);        // [OW, OH, N, OC]
    return ggml_cont(ctx, ggml_permute(ctx, r, 0, 1, 3, 2));                             // [OW, OH, OC, N]
}

ggml_tensor * ggml_im2col_3d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int64_t IC, int s0, int s1, int s2,
                             int p0, int p1, int p2, int d0, int d1, int d2, ggml_type dst_type) {
    // The node's type (a block type might not hold its rows), and IC as
    // its op param can hold it.
    LOOM_REQUIRE(dst_type == GGML_TYPE_F32 || dst_type == GGML_TYPE_F16, "patches of type %s (f32 or f16)",
                 ggml_type_name(dst_type));
    LOOM_REQUIRE(IC <= INT32_MAX, "%lld channels for image %s must be in [1, 2^31)", (long long) IC,
                 describe(b).text);
    // As in ggml (whose tests rely on it): the kernel's dim 3 matters to
    // conv_3d's product alone, and the image holds floor(ne3 / IC) batches,
    // none when IC is larger (an empty result).
    const int64_t N  = IC > 0 ? b->ne[3] / IC : 0;
    const int64_t OW = conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    const int64_t OH = conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
    const int64_t OD = conv_out_size(b->ne[2], a->ne[2], s2, p2, d2);
    const int64_t ne[4]      = {a->ne[0] * a->ne[1] * a->ne[2] * size_or_zero(IC), OW, OH, OD * N};
    ggml_tensor * r          = new_op(ctx, dst_type, 4, ne, GGML_OP_IM2COL_3D, a, b, __func__);
    const int32_t params[10] = {s0, s1, s2, p0, p1, p2, d0, d1, d2, int32_t(IC)};
    set_op_params(r, params, sizeof(params));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_conv_3d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int64_t IC, int s0, int s1, int s2,
                           int p0, int p1, int p2, int d0, int d1, int d2) {
    LOOM_REQUIRE(IC > 0 && a->ne[3] % IC == 0 && b->ne[3] % IC == 0,
                 "%lld channels do not divide dim 3 of kernel %s and image %s", (long long) IC, describe(a).text,
                 describe(b).text);
    ggml_tensor * cols = ggml_im2col_3d(ctx, a, b, IC, s0, s1, s2, p0, p1, p2, d0, d1, d2, patch_type(a));
    const int64_t OC   = a->ne[3] / IC;
    const int64_t N    = b->ne[3] / IC;
    ggml_tensor * r =
        ggml_mul_mat(ctx, ggml_reshape_2d(ctx, cols, cols->ne[0], cols->ne[3] * cols->ne[2] * cols->ne[1]),
                     ggml_reshape_2d(ctx, a, a->ne[0] * a->ne[1] * a->ne[2] * IC, OC)); // [OW*OH*OD*N, OC]
    const int64_t OD = cols->ne[3] / N;
    r = ggml_reshape_4d(ctx, r, cols->ne[1] * cols->ne[2], OD, N, OC);   // [OW*OH, OD, N, OC]
    r = ggml_cont(ctx, ggml_permute(ctx, r, 0, 1, 3, 2));                // [OW*OH, OD, OC, N]
    return ggml_reshape_4d(ctx, r, cols->ne[1], cols->ne[2], OD, OC * N); // [OW, OH, OD, OC*N]
}

ggml_tensor * ggml_conv_2d_sk_p0(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return ggml_conv_2d(ctx, a, b, int(a->ne[0]), int(a->ne[1]), 0, 0, 1, 1);
}

ggml_tensor * ggml_conv_2d_s1_ph(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return ggml_conv_2d(ctx, a, b, 1, 1, int(a->ne[0] / 2), int(a->ne[1] / 2), 1, 1);
}

ggml_tensor * ggml_conv_2d_dw(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1,
                              int d0, int d1) {
    ggml_tensor * kernel = ggml_reshape_4d(ctx, a, a->ne[0], a->ne[1], 1, a->ne[2] * a->ne[3]);
    ggml_tensor * image  = ggml_reshape_4d(ctx, b, b->ne[0], b->ne[1], 1, b->ne[2] * b->ne[3]);
    ggml_tensor * cols   = ggml_im2col(ctx, kernel, image, s0, s1, p0, p1, d0, d1, true, patch_type(a));
    // [KH*KW, OW, OH, N*C] -> [KH*KW, OW*OH, C, N]
    ggml_tensor * patches = ggml_reshape_4d(ctx, cols, cols->ne[0], cols->ne[2] * cols->ne[1], b->ne[2], b->ne[3]);
    kernel                = ggml_reshape_4d(ctx, kernel, kernel->ne[0] * kernel->ne[1], kernel->ne[2], kernel->ne[3], 1);
    ggml_tensor * r       = ggml_mul_mat(ctx, kernel, patches); // [1, OW*OH, C, N]
    return ggml_reshape_4d(ctx, r, cols->ne[1], cols->ne[2], b->ne[2], b->ne[3]);
}

ggml_tensor * ggml_conv_2d_dw_direct(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int stride0, int stride1,
                                     int pad0, int pad1, int dilation0, int dilation1) {
    const int64_t ne[4] = {conv_out_size(b->ne[0], a->ne[0], stride0, pad0, dilation0),
                           conv_out_size(b->ne[1], a->ne[1], stride1, pad1, dilation1), b->ne[2], b->ne[3]};
    ggml_tensor * r = new_op(ctx, b->type, 4, ne, GGML_OP_CONV_2D_DW, a, b, __func__);
    if (ggml_is_contiguous_channels(b)) {
        // The result takes the image's layout: channels innermost.
        const size_t ts = ggml_type_size(r->type);
        r->nb[0]        = size_t(r->ne[2]) * ts;
        r->nb[1]        = size_t(r->ne[0]) * r->nb[0];
        r->nb[2]        = ts;
    }
    const int32_t params[6] = {stride0, stride1, pad0, pad1, dilation0, dilation1};
    set_op_params(r, params, sizeof(params));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_conv_transpose_2d_p0(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int stride) {
    const int64_t ne[4] = {(b->ne[0] - 1) * stride + a->ne[0], (b->ne[1] - 1) * stride + a->ne[1], a->ne[2],
                           b->ne[3]};
    ggml_tensor * r     = new_op(ctx, GGML_TYPE_F32, 4, ne, GGML_OP_CONV_TRANSPOSE_2D, a, b, __func__);
    set_op_param_i32(r, 0, stride);
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_conv_2d_direct(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1,
                                  int d0, int d1) {
    const int64_t ne[4] = {conv_out_size(b->ne[0], a->ne[0], s0, p0, d0), conv_out_size(b->ne[1], a->ne[1], s1, p1, d1),
                           a->ne[3], b->ne[3]};
    ggml_tensor * r         = new_op(ctx, b->type, 4, ne, GGML_OP_CONV_2D, a, b, __func__);
    const int32_t params[6] = {s0, s1, p0, p1, d0, d1};
    set_op_params(r, params, sizeof(params));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_conv_3d_direct(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int s2, int p0,
                                  int p1, int p2, int d0, int d1, int d2, int c, int n, int oc) {
    const int64_t ne[4] = {conv_out_size(b->ne[0], a->ne[0], s0, p0, d0), conv_out_size(b->ne[1], a->ne[1], s1, p1, d1),
                           conv_out_size(b->ne[2], a->ne[2], s2, p2, d2), int64_t(oc) * n};
    ggml_tensor * r          = new_op(ctx, GGML_TYPE_F32, 4, ne, GGML_OP_CONV_3D, a, b, __func__);
    const int32_t params[12] = {s0, s1, s2, p0, p1, p2, d0, d1, d2, c, n, oc};
    set_op_params(r, params, sizeof(params));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_pool_1d(ggml_context * ctx, ggml_tensor * a, ggml_op_pool op, int k0, int s0, int p0) {
    const int64_t ne[4]     = {pool_out_size(a->ne[0], k0, s0, float(p0)), a->ne[1], a->ne[2], a->ne[3]};
    ggml_tensor * r         = new_op(ctx, GGML_TYPE_F32, 4, ne, GGML_OP_POOL_1D, a, nullptr, __func__);
    const int32_t params[4] = {int32_t(op), k0, s0, p0};
    set_op_params(r, params, sizeof(params));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_pool_2d(ggml_context * ctx, ggml_tensor * a, ggml_op_pool op, int k0, int k1, int s0, int s1,
                           float p0, float p1) {
    const int64_t ne[4] = {pool_out_size(a->ne[0], k0, s0, p0), pool_out_size(a->ne[1], k1, s1, p1), a->ne[2],
                           a->ne[3]};
    ggml_tensor * r         = new_op(ctx, GGML_TYPE_F32, 4, ne, GGML_OP_POOL_2D, a, nullptr, __func__);
    const int32_t params[7] = {int32_t(op), k0, k1, s0, s1, int32_t(p0), int32_t(p1)};
    set_op_params(r, params, sizeof(params));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_upscale(ggml_context * ctx, ggml_tensor * a, int scale_factor, ggml_scale_mode mode) {
    LOOM_REQUIRE(scale_factor > 1, "scale factor %d must be greater than 1", scale_factor);
    return interpolate_impl(ctx, a, a->ne[0] * scale_factor, a->ne[1] * scale_factor, a->ne[2], a->ne[3],
                            uint32_t(mode), __func__);
}

ggml_tensor * ggml_upscale_ext(ggml_context * ctx, ggml_tensor * a, int ne0, int ne1, int ne2, int ne3,
                               ggml_scale_mode mode) {
    return interpolate_impl(ctx, a, ne0, ne1, ne2, ne3, uint32_t(mode), __func__);
}

ggml_tensor * ggml_interpolate(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                               uint32_t mode) {
    return interpolate_impl(ctx, a, ne0, ne1, ne2, ne3, mode, __func__);
}

ggml_tensor * ggml_win_part(ggml_context * ctx, ggml_tensor * a, int w) {
    const int64_t npx       = w > 0 ? (a->ne[1] + w - 1) / w : 0;
    const int64_t npy       = w > 0 ? (a->ne[2] + w - 1) / w : 0;
    const int64_t ne[4]     = {a->ne[0], w, w, npx * npy};
    ggml_tensor * r         = new_op(ctx, GGML_TYPE_F32, 4, ne, GGML_OP_WIN_PART, a, nullptr, __func__);
    const int32_t params[3] = {int32_t(npx), int32_t(npy), w};
    set_op_params(r, params, sizeof(params));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_win_unpart(ggml_context * ctx, ggml_tensor * a, int w0, int h0, int w) {
    const int64_t ne[4] = {a->ne[0], w0, h0, 1};
    ggml_tensor * r     = new_op(ctx, GGML_TYPE_F32, 3, ne, GGML_OP_WIN_UNPART, a, nullptr, __func__);
    set_op_param_i32(r, 0, w);
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_get_rel_pos(ggml_context * ctx, ggml_tensor * a, int qh, int kh) {
    const int64_t ne[4] = {a->ne[0], kh, qh, 1};
    ggml_tensor * r     = new_op(ctx, GGML_TYPE_F16, 3, ne, GGML_OP_GET_REL_POS, a, nullptr, __func__);
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_add_rel_pos(ggml_context * ctx, ggml_tensor * a, ggml_tensor * pw, ggml_tensor * ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, false, __func__);
}

ggml_tensor * ggml_add_rel_pos_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * pw, ggml_tensor * ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, true, __func__);
}

} // extern "C"
