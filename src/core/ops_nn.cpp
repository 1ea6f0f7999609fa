// Op constructors for the neural-network ops: matrix products, softmax,
// masking, rotary embeddings, sorting and attention. Each builds its node,
// then checks it with its operator's rule (fits_nn.cpp, Note [Shape rules]
// in fits.h).

#include <algorithm>
#include <cmath>

#include "common.h"
#include "context.h"
#include "fits.h"
#include "ops_rope.h"
#include "types.h"

using namespace loom;

namespace {

ggml_tensor * diag_mask_inf_impl(ggml_context * ctx, ggml_tensor * a, int n_past, bool inplace, const char * caller) {
    ggml_tensor * r = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    set_op_param_i32(r, 0, n_past);
    r->op     = GGML_OP_DIAG_MASK_INF;
    r->src[0] = a;
    require_fits(r, caller);
    return r;
}

ggml_tensor * soft_max_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale, float max_bias,
                            bool inplace, const char * caller) {
    ggml_tensor * r         = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    const float   params[2] = {scale, max_bias};
    set_op_params(r, params, sizeof(params));
    r->op     = GGML_OP_SOFT_MAX;
    r->src[0] = a;
    r->src[1] = mask;
    require_fits(r, caller);
    return r;
}

} // namespace

namespace loom {

// op_params as ggml lays them out: n_past (0), n_dims, mode, n_ctx (0),
// n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor, beta_fast,
// beta_slow (floats), sections[4] (multi-section modes only, else 0),
// n_offs (0, see ggml_rope_set_offset).
ggml_tensor * rope_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                        const int * sections, int mode, int n_ctx_orig, float freq_base, float freq_scale,
                        float ext_factor, float attn_factor, float beta_fast, float beta_slow, bool inplace,
                        ggml_op op, const char * caller) {
    const bool    multi      = (mode & GGML_ROPE_TYPE_MROPE) != 0;
    ggml_tensor * r          = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    int32_t       params[16] = {0, n_dims, mode, 0, n_ctx_orig};
    std::memcpy(params + 5, &freq_base, sizeof(float));
    std::memcpy(params + 6, &freq_scale, sizeof(float));
    std::memcpy(params + 7, &ext_factor, sizeof(float));
    std::memcpy(params + 8, &attn_factor, sizeof(float));
    std::memcpy(params + 9, &beta_fast, sizeof(float));
    std::memcpy(params + 10, &beta_slow, sizeof(float));
    if (multi && sections != nullptr) {
        std::memcpy(params + 11, sections, sizeof(int32_t) * GGML_MROPE_SECTIONS);
    }
    set_op_params(r, params, sizeof(params));
    r->op     = op;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    require_fits(r, caller);
    return r;
}

} // namespace loom

extern "C" {

bool ggml_can_mul_mat(const ggml_tensor * t0, const ggml_tensor * t1) {
    return t0->ne[0] == t1->ne[0] && t1->ne[2] % t0->ne[2] == 0 && t1->ne[3] % t0->ne[3] == 0;
}

ggml_tensor * ggml_mul_mat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    const int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_MUL_MAT;
    r->src[0]           = a;
    r->src[1]           = b;
    require_fits(r, __func__);
    return r;
}

void ggml_mul_mat_set_prec(ggml_tensor * a, ggml_prec prec) {
    LOOM_REQUIRE(a->op == GGML_OP_MUL_MAT, "%s is not a mul_mat", describe(a).text);
    set_op_param_i32(a, 0, int32_t(prec));
}

ggml_tensor * ggml_out_prod(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    const int64_t ne[4] = {a->ne[0], b->ne[0], b->ne[2], b->ne[3]};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_OUT_PROD;
    r->src[0]           = a;
    r->src[1]           = b;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_diag_mask_inf(ggml_context * ctx, ggml_tensor * a, int n_past) {
    return diag_mask_inf_impl(ctx, a, n_past, false, __func__);
}
ggml_tensor * ggml_diag_mask_inf_inplace(ggml_context * ctx, ggml_tensor * a, int n_past) {
    return diag_mask_inf_impl(ctx, a, n_past, true, __func__);
}

ggml_tensor * ggml_soft_max(ggml_context * ctx, ggml_tensor * a) {
    return soft_max_impl(ctx, a, nullptr, 1.0f, 0.0f, false, __func__);
}
ggml_tensor * ggml_soft_max_inplace(ggml_context * ctx, ggml_tensor * a) {
    return soft_max_impl(ctx, a, nullptr, 1.0f, 0.0f, true, __func__);
}
ggml_tensor * ggml_soft_max_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale, float max_bias) {
    return soft_max_impl(ctx, a, mask, scale, max_bias, false, __func__);
}
ggml_tensor * ggml_soft_max_ext_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale,
                                        float max_bias) {
    return soft_max_impl(ctx, a, mask, scale, max_bias, true, __func__);
}

ggml_tensor * ggml_rope(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int n_dims, int mode) {
    return rope_impl(ctx, a, b, nullptr, n_dims, nullptr, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, false,
                     GGML_OP_ROPE, __func__);
}
ggml_tensor * ggml_rope_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int n_dims, int mode) {
    return rope_impl(ctx, a, b, nullptr, n_dims, nullptr, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, true,
                     GGML_OP_ROPE, __func__);
}
ggml_tensor * ggml_rope_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims, int mode,
                            int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                            float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, nullptr, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, false, GGML_OP_ROPE, __func__);
}
ggml_tensor * ggml_rope_ext_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                                    int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                    float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, nullptr, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, true, GGML_OP_ROPE, __func__);
}

ggml_tensor * ggml_rope_multi(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                              int sections[GGML_MROPE_SECTIONS], int mode, int n_ctx_orig, float freq_base,
                              float freq_scale, float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, false, GGML_OP_ROPE, __func__);
}
ggml_tensor * ggml_rope_multi_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c,
                                      int n_dims, int sections[GGML_MROPE_SECTIONS], int mode, int n_ctx_orig,
                                      float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                      float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, true, GGML_OP_ROPE, __func__);
}
ggml_tensor * ggml_rope_custom(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int n_dims, int mode,
                               int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
                               float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, nullptr, n_dims, nullptr, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                     attn_factor, beta_fast, beta_slow, false, GGML_OP_ROPE, __func__);
}
ggml_tensor * ggml_rope_custom_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int n_dims, int mode,
                                       int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                       float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, nullptr, n_dims, nullptr, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                     attn_factor, beta_fast, beta_slow, true, GGML_OP_ROPE, __func__);
}

ggml_tensor * ggml_rope_set_offset(ggml_tensor * a, int n_offs) {
    LOOM_REQUIRE(a != nullptr && (a->op == GGML_OP_ROPE || a->op == GGML_OP_ROPE_BACK),
                 "%s is not a rope or rope_back node", a == nullptr ? "NULL" : describe(a).text);
    set_op_param_i32(a, 15, n_offs);
    require_fits(a, __func__);
    return a;
}

void ggml_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                              float dims[2]) {
    // The dimension whose wavelength makes n_rot full turns over the original context.
    auto corr_dim = [&](float n_rot) {
        return float(n_dims) * std::log(float(n_ctx_orig) / (n_rot * 2.0f * float(M_PI))) /
               (2.0f * std::log(freq_base));
    };
    const float start = std::floor(corr_dim(beta_fast));
    const float end   = std::ceil(corr_dim(beta_slow));
    dims[0]           = std::max(0.0f, start);
    dims[1]           = std::min(float(n_dims - 1), end);
}

ggml_tensor * ggml_argsort(ggml_context * ctx, ggml_tensor * a, ggml_sort_order order) {
    ggml_tensor * r = new_tensor_impl(ctx, GGML_TYPE_I32, GGML_MAX_DIMS, a->ne, nullptr, 0, __func__);
    set_op_param_i32(r, 0, int32_t(order));
    r->op     = GGML_OP_ARGSORT;
    r->src[0] = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_top_k(ggml_context * ctx, ggml_tensor * a, int k) {
    // k is the node's ne0: a negative one cannot be built.
    LOOM_REQUIRE(k >= 0, "k = %d out of range for %s", k, describe(a).text);
    const int64_t ne[4] = {k, a->ne[1], a->ne[2], a->ne[3]};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_I32, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_TOP_K;
    r->src[0]           = a;
    require_fits(r, __func__);
    return r;
}

ggml_tensor * ggml_flash_attn_ext(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                  ggml_tensor * mask, float scale, float max_bias, float logit_softcap) {
    const int64_t ne[4]     = {v->ne[0], q->ne[2], q->ne[1], q->ne[3]};
    ggml_tensor * r         = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    const float   params[3] = {scale, max_bias, logit_softcap};
    set_op_params(r, params, sizeof(params));
    r->op     = GGML_OP_FLASH_ATTN_EXT;
    r->src[0] = q;
    r->src[1] = k;
    r->src[2] = v;
    r->src[3] = mask;
    require_fits(r, __func__);
    return r;
}

void ggml_flash_attn_ext_set_prec(ggml_tensor * a, ggml_prec prec) {
    LOOM_REQUIRE(a->op == GGML_OP_FLASH_ATTN_EXT, "%s is not a flash_attn_ext", describe(a).text);
    set_op_param_i32(a, 3, int32_t(prec));
}

ggml_prec ggml_flash_attn_ext_get_prec(const ggml_tensor * a) {
    LOOM_REQUIRE(a->op == GGML_OP_FLASH_ATTN_EXT, "%s is not a flash_attn_ext", describe(a).text);
    return static_cast<ggml_prec>(op_param_i32(a, 3));
}

void ggml_flash_attn_ext_set_n_kv_max(ggml_tensor * a, int32_t n_kv_max) {
    LOOM_REQUIRE(a->op == GGML_OP_FLASH_ATTN_EXT, "%s is not a flash_attn_ext", describe(a).text);
    LOOM_REQUIRE(n_kv_max >= 0, "n_kv_max %d is negative", int(n_kv_max));
    set_op_param_i32(a, 4, n_kv_max);
}

namespace {
// Sinks: one F32 logit per head of a (dim 2 of src[0]), in slot i.
void add_sinks(ggml_tensor * a, ggml_tensor * sinks, int slot, ggml_op op, const char * func) {
    if (sinks == nullptr) {
        a->src[slot] = nullptr;
        return;
    }
    LOOM_REQUIRE(a->op == op, "called from %s: %s is not %s", func, describe(a).text, ggml_op_name(op));
    LOOM_REQUIRE(a->src[slot] == nullptr, "called from %s: %s has sinks already", func, describe(a).text);
    a->src[slot] = sinks;
    require_fits(a, func);
}
} // namespace

void ggml_flash_attn_ext_add_sinks(ggml_tensor * a, ggml_tensor * sinks) {
    add_sinks(a, sinks, 4, GGML_OP_FLASH_ATTN_EXT, __func__);
}

void ggml_soft_max_add_sinks(ggml_tensor * a, ggml_tensor * sinks) {
    add_sinks(a, sinks, 2, GGML_OP_SOFT_MAX, __func__);
}

} // extern "C"
