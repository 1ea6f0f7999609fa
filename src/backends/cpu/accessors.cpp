// Element access and scalar constructors for tensors with host data.

#include "core/common.h"
#include "core/fp16.h"
#include "ggml-cpu.h"

using namespace loom;

namespace {

char * element(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, const char * caller) {
    LOOM_REQUIRE(t->data != nullptr, "called from %s: tensor %s has no data", caller, describe(t).text);
    LOOM_REQUIRE(i0 >= 0 && i0 < t->ne[0] && i1 >= 0 && i1 < t->ne[1] && i2 >= 0 && i2 < t->ne[2] && i3 >= 0 &&
                     i3 < t->ne[3],
                 "called from %s: index (%lld, %lld, %lld, %lld) out of bounds of %s", caller, (long long) i0,
                 (long long) i1, (long long) i2, (long long) i3, describe(t).text);
    return static_cast<char *>(t->data) + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

double load(const ggml_tensor * t, const char * p, const char * caller) {
    switch (t->type) {
        case GGML_TYPE_F32: { float v; std::memcpy(&v, p, 4); return v; }
        case GGML_TYPE_F16: { uint16_t v; std::memcpy(&v, p, 2); return fp16_to_fp32(v); }
        case GGML_TYPE_BF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_to_fp32(v); }
        case GGML_TYPE_I8: return double(*reinterpret_cast<const int8_t *>(p));
        case GGML_TYPE_I16: { int16_t v; std::memcpy(&v, p, 2); return v; }
        case GGML_TYPE_I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0:
        case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            break;
    }
    fail(caller, "tensor %s: element access is not available for type %s", describe(t).text,
         ggml_type_name(t->type));
}

void store(const ggml_tensor * t, char * p, double v, const char * caller) {
    switch (t->type) {
        case GGML_TYPE_F32: { const float f = float(v); std::memcpy(p, &f, 4); break; }
        case GGML_TYPE_F16: { const uint16_t h = fp32_to_fp16(float(v)); std::memcpy(p, &h, 2); break; }
        case GGML_TYPE_BF16: { const uint16_t h = fp32_to_bf16(float(v)); std::memcpy(p, &h, 2); break; }
        case GGML_TYPE_I8: *reinterpret_cast<int8_t *>(p) = int8_t(v); break;
        case GGML_TYPE_I16: { const int16_t x = int16_t(v); std::memcpy(p, &x, 2); break; }
        case GGML_TYPE_I32: { const int32_t x = int32_t(v); std::memcpy(p, &x, 4); break; }
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_I64: case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0:
        case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT:
            fail(caller, "tensor %s: element access is not available for type %s", describe(t).text,
                 ggml_type_name(t->type));
    }
}

void unravel(const ggml_tensor * t, int i, int64_t c[4], const char * caller) {
    LOOM_REQUIRE(i >= 0 && i < ggml_nelements(t), "called from %s: index %d out of bounds of %s", caller, i,
                 describe(t).text);
    ggml_unravel_index(t, i, &c[0], &c[1], &c[2], &c[3]);
}

void fill(ggml_tensor * t, double v, const char * caller) {
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) store(t, element(t, i0, i1, i2, i3, caller), v, caller);
}

} // namespace

extern "C" {

ggml_tensor * ggml_new_i32(ggml_context * ctx, int32_t value) {
    LOOM_REQUIRE(!ggml_get_no_alloc(ctx), "the context has no_alloc set; the value cannot be stored");
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
    ggml_set_i32(t, value);
    return t;
}
ggml_tensor * ggml_new_f32(ggml_context * ctx, float value) {
    LOOM_REQUIRE(!ggml_get_no_alloc(ctx), "the context has no_alloc set; the value cannot be stored");
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    ggml_set_f32(t, value);
    return t;
}
ggml_tensor * ggml_set_i32(ggml_tensor * t, int32_t value) {
    fill(t, value, __func__);
    return t;
}
ggml_tensor * ggml_set_f32(ggml_tensor * t, float value) {
    fill(t, value, __func__);
    return t;
}
int32_t ggml_get_i32_1d(const ggml_tensor * t, int i) {
    int64_t c[4];
    unravel(t, i, c, __func__);
    return int32_t(load(t, element(t, c[0], c[1], c[2], c[3], __func__), __func__));
}
void ggml_set_i32_1d(const ggml_tensor * t, int i, int32_t value) {
    int64_t c[4];
    unravel(t, i, c, __func__);
    store(t, element(t, c[0], c[1], c[2], c[3], __func__), value, __func__);
}
int32_t ggml_get_i32_nd(const ggml_tensor * t, int i0, int i1, int i2, int i3) {
    return int32_t(load(t, element(t, i0, i1, i2, i3, __func__), __func__));
}
void ggml_set_i32_nd(const ggml_tensor * t, int i0, int i1, int i2, int i3, int32_t value) {
    store(t, element(t, i0, i1, i2, i3, __func__), value, __func__);
}
float ggml_get_f32_1d(const ggml_tensor * t, int i) {
    int64_t c[4];
    unravel(t, i, c, __func__);
    return float(load(t, element(t, c[0], c[1], c[2], c[3], __func__), __func__));
}
void ggml_set_f32_1d(const ggml_tensor * t, int i, float value) {
    int64_t c[4];
    unravel(t, i, c, __func__);
    store(t, element(t, c[0], c[1], c[2], c[3], __func__), value, __func__);
}
float ggml_get_f32_nd(const ggml_tensor * t, int i0, int i1, int i2, int i3) {
    return float(load(t, element(t, i0, i1, i2, i3, __func__), __func__));
}
void ggml_set_f32_nd(const ggml_tensor * t, int i0, int i1, int i2, int i3, float value) {
    store(t, element(t, i0, i1, i2, i3, __func__), value, __func__);
}

} // extern "C"
