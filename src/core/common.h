#pragma once

// Internal helpers shared by every layer: precondition checks, logging,
// op-parameter access. Never included by users.

#include <cstdarg>
#include <cstdint>
#include <cstring>

#include "ggml.h"
#include "op_table.h"

namespace loom {

// Aborts through ggml_abort with "func: message". For broken preconditions
// of the public API only; data and environment errors return statuses.
[[noreturn]] void fail(const char * func, const char * fmt, ...) __attribute__((format(printf, 2, 3)));

// Logs through the callback installed with ggml_log_set.
void log(ggml_log_level level, const char * fmt, ...) __attribute__((format(printf, 2, 3)));

#define LOOM_LOG_DEBUG(...) ::loom::log(GGML_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define LOOM_LOG_INFO(...)  ::loom::log(GGML_LOG_LEVEL_INFO, __VA_ARGS__)
#define LOOM_LOG_WARN(...)  ::loom::log(GGML_LOG_LEVEL_WARN, __VA_ARGS__)
#define LOOM_LOG_ERROR(...) ::loom::log(GGML_LOG_LEVEL_ERROR, __VA_ARGS__)

// Checks a precondition of a public function; the message names the
// function (use __func__) and the offending values.
#define LOOM_REQUIRE(cond, ...) \
    do { \
        if (!(cond)) [[unlikely]] { \
            ::loom::fail(__func__, __VA_ARGS__); \
        } \
    } while (0)

// Internal invariant: a bug in loom if it fails.
#define LOOM_ASSERT(cond) \
    do { \
        if (!(cond)) [[unlikely]] { \
            ggml_abort(__FILE__, __LINE__, "internal invariant failed: %s", #cond); \
        } \
    } while (0)

// "name" [ne0, ne1, ne2, ne3] type, for messages.
struct TensorDesc {
    char text[160];
};
TensorDesc describe(const ggml_tensor * t);

inline void set_op_params(ggml_tensor * t, const void * params, size_t size) {
    LOOM_ASSERT(size <= GGML_MAX_OP_PARAMS);
    std::memcpy(t->op_params, params, size);
}
inline int32_t op_param_i32(const ggml_tensor * t, int i) {
    return t->op_params[i];
}
inline float op_param_f32(const ggml_tensor * t, int i) {
    float v;
    std::memcpy(&v, &t->op_params[i], sizeof(v));
    return v;
}
inline void set_op_param_i32(ggml_tensor * t, int i, int32_t v) {
    t->op_params[i] = v;
}
inline void set_op_param_f32(ggml_tensor * t, int i, float v) {
    std::memcpy(&t->op_params[i], &v, sizeof(v));
}

// Combines v into the hash h (a 64-bit mix with an avalanche step), for
// graph signatures.
inline uint64_t hash_mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 31);
}

inline size_t align_up(size_t x, size_t a) {
    return (x + a - 1) / a * a;
}

} // namespace loom
