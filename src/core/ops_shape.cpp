// Op constructors that change shape or layout: views, reshapes, permutes,
// copies, repeats, concatenation and row gathers/scatters. Those that
// compute build their node, then check it with their operator's rule
// (fits_shape.cpp, Note [Shape rules] in fits.h); the views check their
// arguments here.

#include <utility>

#include "common.h"
#include "context.h"
#include "fits.h"
#include "types.h"

using namespace loom;

namespace {

ggml_tensor * view_impl(ggml_context * ctx, ggml_tensor * a, int n_dims, const int64_t * ne, size_t offset,
                        const char * caller) {
    ggml_tensor * r = new_tensor_impl(ctx, a->type, n_dims, ne, a, offset, caller);
    ggml_format_name(r, "%s (view)", a->name);
    set_op_params(r, &offset, sizeof(offset));
    r->op     = GGML_OP_VIEW;
    r->src[0] = a;
    return r;
}

ggml_tensor * reshape_impl(ggml_context * ctx, ggml_tensor * a, int n_dims, const int64_t * ne, const char * caller) {
    LOOM_REQUIRE(ggml_is_contiguous(a), "called from %s: %s is not contiguous", caller, describe(a).text);
    int64_t n = 1;
    for (int i = 0; i < n_dims; ++i) {
        n *= ne[i];
    }
    LOOM_REQUIRE(n == ggml_nelements(a), "called from %s: %s has %lld elements, the new shape %lld", caller,
                 describe(a).text, (long long) ggml_nelements(a), (long long) n);
    ggml_tensor * r = new_tensor_impl(ctx, a->type, n_dims, ne, a, 0, caller);
    ggml_format_name(r, "%s (reshaped)", a->name);
    r->op     = GGML_OP_RESHAPE;
    r->src[0] = a;
    return r;
}

ggml_tensor * cont_impl(ggml_context * ctx, ggml_tensor * a, int n_dims, const int64_t * ne, const char * caller) {
    ggml_tensor * r = new_tensor_impl(ctx, a->type, n_dims, ne, nullptr, 0, caller);
    ggml_format_name(r, "%s (cont)", a->name);
    r->op     = GGML_OP_CONT;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

ggml_tensor * cpy_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, const char * caller) {
    ggml_tensor * r = ggml_view_tensor(ctx, b);
    if (b->name[0] != '\0') {
        ggml_format_name(r, "%s (copy of %s)", b->name, a->name);
    } else {
        ggml_format_name(r, "%s (copy)", a->name);
    }
    r->op     = GGML_OP_CPY;
    r->src[0] = a;
    r->src[1] = b;
    require_fits(r, caller);
    return r;
}

} // namespace

extern "C" {

ggml_tensor * ggml_view_tensor(ggml_context * ctx, ggml_tensor * src) {
    ggml_tensor * r = new_tensor_impl(ctx, src->type, GGML_MAX_DIMS, src->ne, src, 0, __func__);
    ggml_format_name(r, "%s (view)", src->name);
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        r->nb[i] = src->nb[i];
    }
    return r;
}

ggml_tensor * ggml_view_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, size_t offset) {
    return view_impl(ctx, a, 1, &ne0, offset, __func__);
}

ggml_tensor * ggml_view_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
    const int64_t ne[2] = {ne0, ne1};
    ggml_tensor * r     = view_impl(ctx, a, 2, ne, offset, __func__);
    r->nb[1]            = nb1;
    r->nb[2]            = r->nb[1] * size_t(ne1);
    r->nb[3]            = r->nb[2];
    return r;
}

ggml_tensor * ggml_view_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1,
                           size_t nb2, size_t offset) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    ggml_tensor * r     = view_impl(ctx, a, 3, ne, offset, __func__);
    r->nb[1]            = nb1;
    r->nb[2]            = nb2;
    r->nb[3]            = r->nb[2] * size_t(ne2);
    return r;
}

ggml_tensor * ggml_view_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                           size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    ggml_tensor * r     = view_impl(ctx, a, 4, ne, offset, __func__);
    r->nb[1]            = nb1;
    r->nb[2]            = nb2;
    r->nb[3]            = nb3;
    return r;
}

ggml_tensor * ggml_reshape(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return reshape_impl(ctx, a, GGML_MAX_DIMS, b->ne, __func__);
}
ggml_tensor * ggml_reshape_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0) {
    return reshape_impl(ctx, a, 1, &ne0, __func__);
}
ggml_tensor * ggml_reshape_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return reshape_impl(ctx, a, 2, ne, __func__);
}
ggml_tensor * ggml_reshape_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return reshape_impl(ctx, a, 3, ne, __func__);
}
ggml_tensor * ggml_reshape_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                              int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return reshape_impl(ctx, a, 4, ne, __func__);
}

ggml_tensor * ggml_permute(ggml_context * ctx, ggml_tensor * a, int axis0, int axis1, int axis2, int axis3) {
    const int axes[4] = {axis0, axis1, axis2, axis3};
    bool      seen[4] = {};
    for (int i = 0; i < 4; ++i) {
        LOOM_REQUIRE(axes[i] >= 0 && axes[i] < GGML_MAX_DIMS && !seen[axes[i]],
                     "(%d, %d, %d, %d) is not a permutation of (0, 1, 2, 3) for %s", axis0, axis1, axis2, axis3,
                     describe(a).text);
        seen[axes[i]] = true;
    }
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    ggml_format_name(r, "%s (permuted)", a->name);
    for (int i = 0; i < 4; ++i) {
        r->ne[axes[i]] = a->ne[i];
        r->nb[axes[i]] = a->nb[i];
    }
    r->op     = GGML_OP_PERMUTE;
    r->src[0] = a;
    set_op_params(r, axes, sizeof(axes));
    return r;
}

ggml_tensor * ggml_transpose(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    ggml_format_name(r, "%s (transposed)", a->name);
    std::swap(r->ne[0], r->ne[1]);
    std::swap(r->nb[0], r->nb[1]);
    r->op     = GGML_OP_TRANSPOSE;
    r->src[0] = a;
    return r;
}

ggml_tensor * ggml_cont(ggml_context * ctx, ggml_tensor * a) {
    return cont_impl(ctx, a, GGML_MAX_DIMS, a->ne, __func__);
}
ggml_tensor * ggml_cont_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0) {
    return cont_impl(ctx, a, 1, &ne0, __func__);
}
ggml_tensor * ggml_cont_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return cont_impl(ctx, a, 2, ne, __func__);
}
ggml_tensor * ggml_cont_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return cont_impl(ctx, a, 3, ne, __func__);
}
ggml_tensor * ggml_cont_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return cont_impl(ctx, a, 4, ne, __func__);
}

ggml_tensor * ggml_cpy(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return cpy_impl(ctx, a, b, __func__);
}

ggml_tensor * ggml_cast(ggml_context * ctx, ggml_tensor * a, ggml_type type) {
    ggml_tensor * r = new_tensor_impl(ctx, type, GGML_MAX_DIMS, a->ne, nullptr, 0, __func__);
    ggml_format_name(r, "%s (copy)", a->name);
    r->op     = GGML_OP_CPY;
    r->src[0] = a;
    r->src[1] = r;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_dup(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * r = ggml_dup_tensor(ctx, a);
    r->op           = GGML_OP_DUP;
    r->src[0]       = a;
    require_fits(r, __func__);
    return r;
}
ggml_tensor * ggml_dup_inplace(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op           = GGML_OP_DUP;
    r->src[0]       = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_repeat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    ggml_tensor * r = new_tensor_impl(ctx, a->type, GGML_MAX_DIMS, b->ne, nullptr, 0, __func__);
    r->op           = GGML_OP_REPEAT;
    r->src[0]       = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_repeat_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                             int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    ggml_tensor * r     = new_tensor_impl(ctx, a->type, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_REPEAT;
    r->src[0]           = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_concat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int dim) {
    int64_t ne[GGML_MAX_DIMS];
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        ne[d] = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
    }
    ggml_tensor * r = new_tensor_impl(ctx, a->type, GGML_MAX_DIMS, ne, nullptr, 0, __func__);
    set_op_param_i32(r, 0, dim);
    r->op     = GGML_OP_CONCAT;
    r->src[0] = a;
    r->src[1] = b;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_get_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    const ggml_type type = a->type == GGML_TYPE_I32 ? GGML_TYPE_I32 : GGML_TYPE_F32;
    const int64_t   ne[4] = {a->ne[0], b->ne[0], b->ne[1], b->ne[2]};
    ggml_tensor *   r     = new_tensor_impl(ctx, type, 4, ne, nullptr, 0, __func__);
    r->op                 = GGML_OP_GET_ROWS;
    r->src[0]             = a;
    r->src[1]             = b;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_set_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c) {
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    r->op           = GGML_OP_SET_ROWS;
    r->src[0]       = b;
    r->src[1]       = c;
    r->src[2]       = a; // ggml's operand order: the destination comes last
    require_fits(r, __func__);
    return r;
}

} // extern "C"
