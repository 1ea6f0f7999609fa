// The CPU backend's row conversions of ggml-cpu.h.

#include <cstring>

#include "ggml-cpu.h"

extern "C" {

void ggml_cpu_fp32_to_fp32(const float * x, float * y, int64_t n) {
    std::memmove(y, x, size_t(n) * sizeof(float));
}
void ggml_cpu_fp32_to_i32(const float * x, int32_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = int32_t(x[i]); // truncation toward zero, as a C conversion
    }
}
void ggml_cpu_fp32_to_fp16(const float * x, ggml_fp16_t * y, int64_t n) {
    ggml_fp32_to_fp16_row(x, y, n);
}
void ggml_cpu_fp16_to_fp32(const ggml_fp16_t * x, float * y, int64_t n) {
    ggml_fp16_to_fp32_row(x, y, n);
}
void ggml_cpu_fp32_to_bf16(const float * x, ggml_bf16_t * y, int64_t n) {
    ggml_fp32_to_bf16_row(x, y, n);
}
void ggml_cpu_bf16_to_fp32(const ggml_bf16_t * x, float * y, int64_t n) {
    ggml_bf16_to_fp32_row(x, y, n);
}

} // extern "C"
