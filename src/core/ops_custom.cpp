// Op constructors for custom operators: GGML_OP_MAP_CUSTOM1..3 and
// GGML_OP_CUSTOM (Note [Custom ops] in custom.h). Each builds its node, then
// checks it with its operator's rule (fits.cpp: a function, a thread count,
// Note [Shape rules] in fits.h); the sources and arguments the node cannot
// hold are checked here.

#include "common.h"
#include "context.h"
#include "custom.h"
#include "fits.h"

using namespace loom;

namespace {

CustomOpParams custom_params(int n_tasks, void * userdata) {
    CustomOpParams p{};
    p.n_tasks  = n_tasks;
    p.userdata = userdata;
    return p;
}

ggml_tensor * map_custom_impl(ggml_context * ctx, ggml_op op, ggml_tensor * const * srcs, int n_srcs,
                              const CustomOpParams & p, bool inplace, const char * caller) {
    for (int i = 0; i < n_srcs; ++i) {
        LOOM_REQUIRE(srcs[i] != nullptr, "called from %s: source %d is NULL", caller, i);
    }
    ggml_tensor * r = inplace ? ggml_view_tensor(ctx, srcs[0]) : ggml_dup_tensor(ctx, srcs[0]);
    set_op_params(r, &p, sizeof(p));
    r->op = op;
    for (int i = 0; i < n_srcs; ++i) {
        r->src[i] = srcs[i];
    }
    require_fits(r, caller);
    return r;
}

ggml_tensor * map_custom1_impl(ggml_context * ctx, ggml_tensor * a, ggml_custom1_op_t fun, int n_tasks,
                               void * userdata, bool inplace, const char * caller) {
    CustomOpParams p = custom_params(n_tasks, userdata);
    p.fn.f1          = fun;
    ggml_tensor * srcs[] = {a};
    return map_custom_impl(ctx, GGML_OP_MAP_CUSTOM1, srcs, 1, p, inplace, caller);
}

ggml_tensor * map_custom2_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_custom2_op_t fun,
                               int n_tasks, void * userdata, bool inplace, const char * caller) {
    CustomOpParams p = custom_params(n_tasks, userdata);
    p.fn.f2          = fun;
    ggml_tensor * srcs[] = {a, b};
    return map_custom_impl(ctx, GGML_OP_MAP_CUSTOM2, srcs, 2, p, inplace, caller);
}

ggml_tensor * map_custom3_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c,
                               ggml_custom3_op_t fun, int n_tasks, void * userdata, bool inplace,
                               const char * caller) {
    CustomOpParams p = custom_params(n_tasks, userdata);
    p.fn.f3          = fun;
    ggml_tensor * srcs[] = {a, b, c};
    return map_custom_impl(ctx, GGML_OP_MAP_CUSTOM3, srcs, 3, p, inplace, caller);
}

// GGML_OP_CUSTOM's sources: first (a, or none) then args.
void set_custom(ggml_tensor * r, ggml_tensor * first, ggml_tensor ** args, int n_args, ggml_custom_op_t fun,
                const CustomOpParams & params) {
    CustomOpParams p = params;
    p.fn.f           = fun;
    set_op_params(r, &p, sizeof(p));
    r->op   = GGML_OP_CUSTOM;
    int src = 0;
    if (first != nullptr) {
        r->src[src++] = first;
    }
    for (int i = 0; i < n_args; ++i) {
        r->src[src++] = args[i];
    }
}

void check_args(ggml_tensor ** args, int n_args, int most, const char * caller) {
    LOOM_REQUIRE(n_args >= 0 && n_args <= most, "called from %s: n_args = %d; at most %d arguments fit", caller,
                 n_args, most);
    LOOM_REQUIRE(n_args == 0 || args != nullptr, "called from %s: NULL args with n_args = %d", caller, n_args);
    for (int i = 0; i < n_args; ++i) {
        LOOM_REQUIRE(args[i] != nullptr, "called from %s: argument %d is NULL", caller, i);
    }
}

} // namespace

extern "C" {

ggml_tensor * ggml_map_custom1(ggml_context * ctx, ggml_tensor * a, ggml_custom1_op_t fun, int n_tasks,
                               void * userdata) {
    return map_custom1_impl(ctx, a, fun, n_tasks, userdata, false, __func__);
}

ggml_tensor * ggml_map_custom1_inplace(ggml_context * ctx, ggml_tensor * a, ggml_custom1_op_t fun, int n_tasks,
                                       void * userdata) {
    return map_custom1_impl(ctx, a, fun, n_tasks, userdata, true, __func__);
}

ggml_tensor * ggml_map_custom2(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_custom2_op_t fun,
                               int n_tasks, void * userdata) {
    return map_custom2_impl(ctx, a, b, fun, n_tasks, userdata, false, __func__);
}

ggml_tensor * ggml_map_custom2_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_custom2_op_t fun,
                                       int n_tasks, void * userdata) {
    return map_custom2_impl(ctx, a, b, fun, n_tasks, userdata, true, __func__);
}

ggml_tensor * ggml_map_custom3(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c,
                               ggml_custom3_op_t fun, int n_tasks, void * userdata) {
    return map_custom3_impl(ctx, a, b, c, fun, n_tasks, userdata, false, __func__);
}

ggml_tensor * ggml_map_custom3_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c,
                                       ggml_custom3_op_t fun, int n_tasks, void * userdata) {
    return map_custom3_impl(ctx, a, b, c, fun, n_tasks, userdata, true, __func__);
}

ggml_tensor * ggml_custom_4d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                             ggml_tensor ** args, int n_args, ggml_custom_op_t fun, int n_tasks, void * userdata) {
    check_args(args, n_args, GGML_MAX_SRC - 1, __func__);
    ggml_tensor * r = ggml_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3);
    set_custom(r, nullptr, args, n_args, fun, custom_params(n_tasks, userdata));
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_custom_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor ** args, int n_args,
                                  ggml_custom_op_t fun, int n_tasks, void * userdata) {
    LOOM_REQUIRE(a != nullptr, "called from %s: NULL tensor", __func__);
    check_args(args, n_args, GGML_MAX_SRC - 2, __func__);
    ggml_tensor * r = ggml_view_tensor(ctx, a);
    set_custom(r, a, args, n_args, fun, custom_params(n_tasks, userdata));
    require_fits(r, __func__);
    return r;
}

} // extern "C"
