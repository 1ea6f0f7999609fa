// ggml_get_type_traits_cpu: per type, the conversion of f32 activations
// into the type, the dot product against its activation type, and that type
// (ggml's vec_dot_type), as ggml-cpu.h describes them. The dot products and
// activation types are kernels/vec.cpp's (Note [Dot rows]), the portable
// ones; the conversions the reference ones of the type table.

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "core/common.h"
#include "core/types.h"
#include "core/types/legacy_k.h"
#include "ggml-cpu.h"
#include "kernels/vec.h"

namespace loom::cpu {

namespace {

// ggml's vec_dot signature over the portable dot product of type T
// (row_dot_info): one row (nrc 1), the strides unused.
template <size_t T>
void vec_dot(int n, float * s, size_t bs, const void * x, size_t bx, const void * y, size_t by, int nrc) {
    (void) bs;
    (void) bx;
    (void) by;
    LOOM_REQUIRE(nrc == 1, "vec_dot takes one row at a time here (nrows is 1), nrc = %d", nrc);
    *s = row_dot_info(ggml_type(T)).dot(n, x, y);
}

template <size_t... T>
constexpr std::array<ggml_vec_dot_t, sizeof...(T)> vec_dots(std::index_sequence<T...>) {
    return {vec_dot<T>...};
}

void fp32_to_i32(const float * x, void * y, int64_t n) {
    auto * out = static_cast<int32_t *>(y);
    for (int64_t i = 0; i < n; ++i) {
        out[i] = int32_t(x[i]);
    }
}

struct CpuTraitsTable {
    ggml_type_traits_cpu row[GGML_TYPE_COUNT] = {};

    void set(ggml_type t, ggml_vec_dot_t dot, ggml_type dot_type) {
        row[t] = {type_row(t).from_float, dot, dot_type, 1};
    }

    CpuTraitsTable() {
        // The types with a dot product, from vec.cpp's list (Note [Dot rows]).
        static constexpr auto dots = vec_dots(std::make_index_sequence<GGML_TYPE_COUNT>());
        for (size_t t = 0; t < GGML_TYPE_COUNT; ++t) {
            const VecDotInfo info = row_dot_info(ggml_type(t));
            if (info.dot != nullptr) {
                set(ggml_type(t), dots[t], info.operand);
            }
        }
        // As in ggml, these take no f32 activations (their encoders search,
        // too slow for activations).
        for (ggml_type t : {GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_IQ2_S}) {
            row[t].from_float = nullptr;
        }
        // Activation types: a conversion, no dot product of their own (Q8_1
        // names itself as its vec_dot_type, as in ggml).
        row[GGML_TYPE_Q8_1]            = {quantize_row_q8_1_ref, nullptr, GGML_TYPE_Q8_1, 1};
        row[GGML_TYPE_Q8_K].from_float = quantize_row_q8_K_ref;
        row[GGML_TYPE_I32].from_float  = fp32_to_i32;
    }
};

const CpuTraitsTable & cpu_traits() {
    static const CpuTraitsTable t;
    return t;
}

} // namespace

} // namespace loom::cpu

extern "C" {

const ggml_type_traits_cpu * ggml_get_type_traits_cpu(ggml_type type) {
    LOOM_REQUIRE(int(type) >= 0 && int(type) < GGML_TYPE_COUNT, "ggml_type %d is outside [0, %d)", int(type),
                 int(GGML_TYPE_COUNT));
    return &loom::cpu::cpu_traits().row[type];
}

void ggml_cpu_init(void) {
    (void) loom::cpu::cpu_traits();
    (void) ggml_get_type_traits(GGML_TYPE_F32);
}

} // extern "C"
