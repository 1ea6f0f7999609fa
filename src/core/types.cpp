#include "types.h"

#include <algorithm>
#include <cmath>

#include "common.h"
#include "fp16.h"

namespace loom {

namespace {

void f32_to_float(const void * x, float * y, int64_t k) {
    std::memcpy(y, x, size_t(k) * sizeof(float));
}
void f32_from_float(const float * x, void * y, int64_t k) {
    std::memcpy(y, x, size_t(k) * sizeof(float));
}
void f16_to_float(const void * x, float * y, int64_t k) {
    ggml_fp16_to_fp32_row(static_cast<const ggml_fp16_t *>(x), y, k);
}
void f16_from_float(const float * x, void * y, int64_t k) {
    ggml_fp32_to_fp16_row(x, static_cast<ggml_fp16_t *>(y), k);
}
void bf16_to_float(const void * x, float * y, int64_t k) {
    ggml_bf16_to_fp32_row(static_cast<const ggml_bf16_t *>(x), y, k);
}
void bf16_from_float(const float * x, void * y, int64_t k) {
    ggml_fp32_to_bf16_row_ref(x, static_cast<ggml_bf16_t *>(y), k);
}

struct TypeTable {
    TypeInfo info[GGML_TYPE_COUNT] = {};
    TypeTable() {
        info[GGML_TYPE_F32]  = {"f32", 1, 4, false, f32_to_float, f32_from_float};
        info[GGML_TYPE_F16]  = {"f16", 1, 2, false, f16_to_float, f16_from_float};
        info[GGML_TYPE_BF16] = {"bf16", 1, 2, false, bf16_to_float, bf16_from_float};
        info[GGML_TYPE_Q4_0] = {"q4_0", QK4_0, sizeof(block_q4_0), true, dequantize_row_q4_0, quantize_row_q4_0_ref};
        info[GGML_TYPE_Q8_0] = {"q8_0", QK8_0, sizeof(block_q8_0), true, dequantize_row_q8_0, quantize_row_q8_0_ref};
        info[GGML_TYPE_I8]   = {"i8", 1, 1, false, nullptr, nullptr};
        info[GGML_TYPE_I16]  = {"i16", 1, 2, false, nullptr, nullptr};
        info[GGML_TYPE_I32]  = {"i32", 1, 4, false, nullptr, nullptr};
        info[GGML_TYPE_I64]  = {"i64", 1, 8, false, nullptr, nullptr};
        add_legacy_types(info);
        add_k_types(info);
        add_iq_types(info);
        add_other_types(info);
    }
};

const TypeTable & table() {
    static const TypeTable t;
    return t;
}

} // namespace

bool type_is_valid(int type) {
    return type >= 0 && type < GGML_TYPE_COUNT && table().info[type].name != nullptr;
}

const TypeInfo & type_info(ggml_type type, const char * caller) {
    if (!type_is_valid(type)) [[unlikely]] {
        fail(caller, "unknown or unsupported ggml_type %d", int(type));
    }
    return table().info[type];
}

void quantize_row_q4_0_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK4_0 == 0);
    auto * y = static_cast<block_q4_0 *>(vy);
    for (int64_t b = 0; b < k / QK4_0; ++b) {
        const float * xb = x + b * QK4_0;
        float amax = 0.0f, max = 0.0f; // max keeps its sign
        for (int j = 0; j < QK4_0; ++j) {
            if (std::fabs(xb[j]) > amax) {
                amax = std::fabs(xb[j]);
                max  = xb[j];
            }
        }
        const float d  = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = fp32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            const float   v0 = xb[j] * id;
            const float   v1 = xb[j + QK4_0 / 2] * id;
            const uint8_t q0 = uint8_t(std::min(15, int(int8_t(v0 + 8.5f))));
            const uint8_t q1 = uint8_t(std::min(15, int(int8_t(v1 + 8.5f))));
            y[b].qs[j]       = uint8_t(q0 | (q1 << 4));
        }
    }
}

void dequantize_row_q4_0(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK4_0 == 0);
    const auto * x = static_cast<const block_q4_0 *>(vx);
    for (int64_t b = 0; b < k / QK4_0; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            y[b * QK4_0 + j]             = float((x[b].qs[j] & 0x0f) - 8) * d;
            y[b * QK4_0 + j + QK4_0 / 2] = float((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

void quantize_row_q8_0_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK8_0 == 0);
    auto * y = static_cast<block_q8_0 *>(vy);
    for (int64_t b = 0; b < k / QK8_0; ++b) {
        const float * xb   = x + b * QK8_0;
        float         amax = 0.0f;
        for (int j = 0; j < QK8_0; ++j) {
            amax = std::max(amax, std::fabs(xb[j]));
        }
        const float d  = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; ++j) {
            y[b].qs[j] = int8_t(std::round(xb[j] * id));
        }
    }
}

void dequantize_row_q8_0(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK8_0 == 0);
    const auto * x = static_cast<const block_q8_0 *>(vx);
    for (int64_t b = 0; b < k / QK8_0; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK8_0; ++j) {
            y[b * QK8_0 + j] = float(x[b].qs[j]) * d;
        }
    }
}

} // namespace loom

using namespace loom;

extern "C" {

float ggml_fp16_to_fp32(ggml_fp16_t h) {
    return fp16_to_fp32(h);
}
ggml_fp16_t ggml_fp32_to_fp16(float f) {
    return fp32_to_fp16(f);
}
void ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = fp16_to_fp32(x[i]);
    }
}
void ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = fp32_to_fp16(x[i]);
    }
}
ggml_bf16_t ggml_fp32_to_bf16(float f) {
    return ggml_bf16_t{fp32_to_bf16(f)};
}
float ggml_bf16_to_fp32(ggml_bf16_t b) {
    return bf16_to_fp32(b.bits);
}
void ggml_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = bf16_to_fp32(x[i].bits);
    }
}
void ggml_fp32_to_bf16_row_ref(const float * x, ggml_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i].bits = fp32_to_bf16(x[i]);
    }
}
void ggml_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n) {
    ggml_fp32_to_bf16_row_ref(x, y, n);
}

int64_t ggml_blck_size(ggml_type type) {
    return type_info(type, __func__).blck_size;
}
size_t ggml_type_size(ggml_type type) {
    return type_info(type, __func__).type_size;
}
size_t ggml_row_size(ggml_type type, int64_t ne) {
    const TypeInfo & ti = type_info(type, __func__);
    LOOM_REQUIRE(ne % ti.blck_size == 0, "%lld elements of %s are not a whole number of blocks of %lld",
                 (long long) ne, ti.name, (long long) ti.blck_size);
    return ti.type_size * size_t(ne / ti.blck_size);
}
double ggml_type_sizef(ggml_type type) {
    const TypeInfo & ti = type_info(type, __func__);
    return double(ti.type_size) / double(ti.blck_size);
}
const char * ggml_type_name(ggml_type type) {
    return type_is_valid(type) ? table().info[type].name : "NONE";
}
bool ggml_is_quantized(ggml_type type) {
    return type_info(type, __func__).is_quantized;
}

const ggml_type_traits * ggml_get_type_traits(ggml_type type) {
    static ggml_type_traits traits[GGML_TYPE_COUNT];
    static const bool       init = [] {
        for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
            if (type_is_valid(t)) {
                const TypeInfo & ti = table().info[t];
                traits[t] = {ti.name, ti.blck_size, 0, ti.type_size, ti.is_quantized, ti.to_float, ti.from_float};
            }
        }
        return true;
    }();
    (void) init;
    type_info(type, __func__);
    return &traits[type];
}

bool ggml_quantize_requires_imatrix(ggml_type type) {
    (void) type;
    return false;
}
void ggml_quantize_init(ggml_type type) {
    (void) type;
}
void ggml_quantize_free(void) {}

size_t ggml_quantize_chunk(ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows,
                           int64_t n_per_row, const float * imatrix) {
    (void) imatrix;
    const TypeInfo & ti = type_info(type, __func__);
    LOOM_REQUIRE(ti.from_float != nullptr, "type %s cannot be converted from float", ti.name);
    LOOM_REQUIRE(n_per_row % ti.blck_size == 0, "row length %lld is not a multiple of the %s block size %lld",
                 (long long) n_per_row, ti.name, (long long) ti.blck_size);
    LOOM_REQUIRE(start % n_per_row == 0, "start %lld is not at a row boundary (row length %lld)", (long long) start,
                 (long long) n_per_row);
    const size_t row_size = ggml_row_size(type, n_per_row);
    const int64_t row0    = start / n_per_row;
    char *        out     = static_cast<char *>(dst) + size_t(row0) * row_size;
    for (int64_t r = 0; r < nrows; ++r) {
        ti.from_float(src + start + r * n_per_row, out + size_t(r) * row_size, n_per_row);
    }
    return size_t(nrows) * row_size;
}

bool ggml_validate_row_data(ggml_type type, const void * data, size_t nbytes) {
    if (!type_is_valid(type)) {
        LOOM_LOG_ERROR("%s: invalid type %d\n", __func__, int(type));
        return false;
    }
    const TypeInfo & ti = table().info[type];
    if (nbytes % ti.type_size != 0) {
        LOOM_LOG_ERROR("%s: %zu bytes is not a whole number of %s blocks (%zu bytes)\n", __func__, nbytes, ti.name,
                       ti.type_size);
        return false;
    }
    const size_t n = nbytes / ti.type_size;
    auto bad = [&](size_t i, float v) {
        if (!std::isfinite(v)) {
            LOOM_LOG_ERROR("%s: %s value %zu is not finite\n", __func__, ti.name, i);
            return true;
        }
        return false;
    };
    switch (type) {
        case GGML_TYPE_F32:
            for (size_t i = 0; i < n; ++i) {
                float v;
                std::memcpy(&v, static_cast<const char *>(data) + 4 * i, 4);
                if (bad(i, v)) return false;
            }
            break;
        case GGML_TYPE_F16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, static_cast<const char *>(data) + 2 * i, 2);
                if (bad(i, fp16_to_fp32(h))) return false;
            }
            break;
        case GGML_TYPE_BF16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, static_cast<const char *>(data) + 2 * i, 2);
                if (bad(i, bf16_to_fp32(h))) return false;
            }
            break;
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_Q8_0:
            // both block formats start with an fp16 scale
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, static_cast<const char *>(data) + ti.type_size * i, 2);
                if (bad(i, fp16_to_fp32(h))) return false;
            }
            break;
        default: break;
    }
    return true;
}

} // extern "C"
