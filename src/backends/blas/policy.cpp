#include "policy.h"

#include <cstdlib>
#include <cstring>

#include "core/common.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "products.h"

namespace loom::blas {

namespace {

// Whether the CPU's kernel table in use has 8-bit integer dot products, as
// the CPU reg reports among its features (through the public API: one
// backend does not read another's internals).
bool cpu_has_int8_dot_products() {
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    auto get = reinterpret_cast<ggml_backend_get_features_t>(ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
    if (get == nullptr) {
        return false;
    }
    for (const ggml_backend_feature * f = get(reg); f->name != nullptr; ++f) {
        if (std::strcmp(f->name, "INT8_DOT_PRODUCTS") == 0) {
            return std::strcmp(f->value, "1") == 0;
        }
    }
    return false;
}

} // namespace

Policy Policy::from_environment() {
    Policy p;
    if (cpu_has_int8_dot_products()) {
        p.min_batch_q4_0 = never; // the CPU's VNNI products win at every batch
    }
    if (const char * v = std::getenv("LOOM_BLAS_MIN_BATCH")) {
        char *          end = nullptr;
        const long long n   = std::strtoll(v, &end, 10);
        if (end != v && *end == '\0' && n > 0) {
            p.min_batch_f32 = p.min_batch_f16 = p.min_batch_q4_0 = p.min_batch_quant = p.min_batch_out_prod = n;
            p.min_size = p.min_size_out_prod = 1;
        } else {
            LOOM_LOG_WARN("BLAS: ignoring LOOM_BLAS_MIN_BATCH=%s (not a positive integer)\n", v);
        }
    }
    return p;
}

bool Policy::takes(const ggml_tensor * op) const {
    const GemmSize s = gemm_size(op);
    if (op->op == GGML_OP_OUT_PROD) {
        return s.n >= min_batch_out_prod && s.m >= min_size_out_prod && s.k >= min_size_out_prod;
    }
    int64_t min_batch = min_batch_quant;
    switch (op->src[0]->type) {
        case GGML_TYPE_F32: min_batch = min_batch_f32; break;
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16: min_batch = min_batch_f16; break;
        case GGML_TYPE_Q4_0: min_batch = min_batch_q4_0; break;
        case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1:
        case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
        case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_I8: case GGML_TYPE_I16: case GGML_TYPE_I32: case GGML_TYPE_I64: case GGML_TYPE_F64:
        case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4: case GGML_TYPE_NVFP4:
        case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT: break;
    }
    return s.n >= min_batch && s.m >= min_size && s.k >= min_size;
}

} // namespace loom::blas
