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
        // The values ggml no longer gives a format: names as ggml's, no blocks.
        info[4]  = {"DEPRECATED", 0, 0, false, nullptr, nullptr};
        info[5]  = {"DEPRECATED", 0, 0, false, nullptr, nullptr};
        info[31] = {"TYPE_Q4_0_4_4 REMOVED, use Q4_0 with runtime repacking", 0, 0, false, nullptr, nullptr};
        info[32] = {"TYPE_Q4_0_4_8 REMOVED, use Q4_0 with runtime repacking", 0, 0, false, nullptr, nullptr};
        info[33] = {"TYPE_Q4_0_8_8 REMOVED, use Q4_0 with runtime repacking", 0, 0, false, nullptr, nullptr};
        info[36] = {"TYPE_IQ4_NL_4_4 REMOVED, use IQ4_NL with runtime repacking", 0, 0, false, nullptr, nullptr};
        info[37] = {"TYPE_IQ4_NL_4_8 REMOVED, use IQ4_NL with runtime repacking", 0, 0, false, nullptr, nullptr};
        info[38] = {"TYPE_IQ4_NL_8_8 REMOVED, use IQ4_NL with runtime repacking", 0, 0, false, nullptr, nullptr};
    }
};

const TypeTable & table() {
    static const TypeTable t;
    return t;
}

} // namespace

bool type_is_valid(int type) {
    return type >= 0 && type < GGML_TYPE_COUNT && table().info[type].name != nullptr &&
           table().info[type].blck_size > 0;
}

const TypeInfo & type_row(int type) {
    LOOM_ASSERT(type >= 0 && type < GGML_TYPE_COUNT);
    return table().info[type];
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

// Lookups of any value in [0, GGML_TYPE_COUNT) answer as ggml's table does,
// also for the removed slots and types without a row (block size 0), so
// that a program may loop over every value.
static const TypeInfo & checked_row(ggml_type type, const char * caller) {
    if (int(type) < 0 || int(type) >= GGML_TYPE_COUNT) [[unlikely]] {
        fail(caller, "ggml_type %d is outside [0, %d)", int(type), int(GGML_TYPE_COUNT));
    }
    return type_row(type);
}

int64_t ggml_blck_size(ggml_type type) {
    return checked_row(type, __func__).blck_size;
}
size_t ggml_type_size(ggml_type type) {
    return checked_row(type, __func__).type_size;
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
    if (int(type) < 0 || int(type) >= GGML_TYPE_COUNT || type_row(type).name == nullptr) {
        return "NONE";
    }
    return type_row(type).name;
}
bool ggml_is_quantized(ggml_type type) {
    return checked_row(type, __func__).is_quantized;
}

const ggml_type_traits * ggml_get_type_traits(ggml_type type) {
    static ggml_type_traits traits[GGML_TYPE_COUNT];
    static const bool       init = [] {
        for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
            const TypeInfo & ti = type_row(t);
            // As in ggml's table, F32 converts to and from nothing: programs
            // take a to_float as the sign of a type that needs converting.
            const bool f32 = t == GGML_TYPE_F32;
            traits[t]      = {ggml_type_name(ggml_type(t)), ti.blck_size, 0, ti.type_size, ti.is_quantized,
                              f32 ? nullptr : ti.to_float, f32 ? nullptr : ti.from_float};
        }
        return true;
    }();
    (void) init;
    checked_row(type, __func__);
    return &traits[type];
}

enum ggml_type ggml_ftype_to_ggml_type(enum ggml_ftype ftype) {
    switch (ftype) {
        case GGML_FTYPE_ALL_F32: return GGML_TYPE_F32;
        case GGML_FTYPE_MOSTLY_F16: return GGML_TYPE_F16;
        case GGML_FTYPE_MOSTLY_BF16: return GGML_TYPE_BF16;
        case GGML_FTYPE_MOSTLY_Q4_0: return GGML_TYPE_Q4_0;
        case GGML_FTYPE_MOSTLY_Q4_1: return GGML_TYPE_Q4_1;
        case GGML_FTYPE_MOSTLY_Q1_0: return GGML_TYPE_Q1_0;
        case GGML_FTYPE_MOSTLY_Q2_0: return GGML_TYPE_Q2_0;
        case GGML_FTYPE_MOSTLY_Q5_0: return GGML_TYPE_Q5_0;
        case GGML_FTYPE_MOSTLY_Q5_1: return GGML_TYPE_Q5_1;
        case GGML_FTYPE_MOSTLY_Q8_0: return GGML_TYPE_Q8_0;
        case GGML_FTYPE_MOSTLY_MXFP4: return GGML_TYPE_MXFP4;
        case GGML_FTYPE_MOSTLY_NVFP4: return GGML_TYPE_NVFP4;
        case GGML_FTYPE_MOSTLY_Q2_K: return GGML_TYPE_Q2_K;
        case GGML_FTYPE_MOSTLY_Q3_K: return GGML_TYPE_Q3_K;
        case GGML_FTYPE_MOSTLY_Q4_K: return GGML_TYPE_Q4_K;
        case GGML_FTYPE_MOSTLY_Q5_K: return GGML_TYPE_Q5_K;
        case GGML_FTYPE_MOSTLY_Q6_K: return GGML_TYPE_Q6_K;
        case GGML_FTYPE_MOSTLY_IQ2_XXS: return GGML_TYPE_IQ2_XXS;
        case GGML_FTYPE_MOSTLY_IQ2_XS: return GGML_TYPE_IQ2_XS;
        case GGML_FTYPE_MOSTLY_IQ3_XXS: return GGML_TYPE_IQ3_XXS;
        case GGML_FTYPE_MOSTLY_IQ1_S: return GGML_TYPE_IQ1_S;
        case GGML_FTYPE_MOSTLY_IQ1_M: return GGML_TYPE_IQ1_M;
        case GGML_FTYPE_MOSTLY_IQ4_NL: return GGML_TYPE_IQ4_NL;
        case GGML_FTYPE_MOSTLY_IQ4_XS: return GGML_TYPE_IQ4_XS;
        case GGML_FTYPE_MOSTLY_IQ3_S: return GGML_TYPE_IQ3_S;
        case GGML_FTYPE_MOSTLY_IQ2_S: return GGML_TYPE_IQ2_S;
        case GGML_FTYPE_UNKNOWN:
        case GGML_FTYPE_MOSTLY_Q4_1_SOME_F16: break;
    }
    fail(__func__, "ftype %d has no single tensor type", int(ftype));
}

bool ggml_quantize_requires_imatrix(ggml_type type) {
    return type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS || type == GGML_TYPE_IQ1_S;
}
void ggml_quantize_init(ggml_type type) {
    const TypeInfo & ti = checked_row(type, __func__);
    if (ti.quantize_init != nullptr) {
        ti.quantize_init();
    }
}
void ggml_quantize_free(void) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (type_row(t).quantize_free != nullptr) {
            type_row(t).quantize_free();
        }
    }
}

size_t ggml_quantize_chunk(ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows,
                           int64_t n_per_row, const float * imatrix) {
    const TypeInfo & ti = type_info(type, __func__);
    LOOM_REQUIRE(imatrix != nullptr || !ggml_quantize_requires_imatrix(type), "type %s needs an importance matrix",
                 ti.name);
    LOOM_REQUIRE(ti.quantize != nullptr || ti.from_float != nullptr, "type %s cannot be converted from float",
                 ti.name);
    LOOM_REQUIRE(n_per_row % ti.blck_size == 0, "row length %lld is not a multiple of the %s block size %lld",
                 (long long) n_per_row, ti.name, (long long) ti.blck_size);
    LOOM_REQUIRE(start % n_per_row == 0, "start %lld is not at a row boundary (row length %lld)", (long long) start,
                 (long long) n_per_row);
    ggml_quantize_init(type);
    const size_t  row_size = ggml_row_size(type, n_per_row);
    const int64_t row0     = start / n_per_row;
    char *        out      = static_cast<char *>(dst) + size_t(row0) * row_size;
    if (ti.quantize != nullptr) {
        const size_t n = ti.quantize(src + start, out, nrows, n_per_row, imatrix);
        LOOM_ASSERT(n == size_t(nrows) * row_size);
        return n;
    }
    if (!ti.is_quantized) {
        // Float types: one conversion of the whole chunk, as ggml's.
        ti.from_float(src + start, out, nrows * n_per_row);
        return size_t(nrows) * row_size;
    }
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
        LOOM_LOG_ERROR("%s: invalid size %zu for type %s (type size = %zu)\n", __func__, nbytes, ti.name,
                       ti.type_size);
        return false;
    }
    const size_t n = nbytes / ti.type_size;
    auto bad = [&](size_t i, float v) {
        if (!std::isfinite(v)) {
            LOOM_LOG_ERROR("%s: found %s value at element %zu of %s data\n", __func__,
                           std::isnan(v) ? "nan" : "inf", i, ti.name);
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
            return true;
        case GGML_TYPE_F16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, static_cast<const char *>(data) + 2 * i, 2);
                if (bad(i, fp16_to_fp32(h))) return false;
            }
            return true;
        case GGML_TYPE_BF16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, static_cast<const char *>(data) + 2 * i, 2);
                if (bad(i, bf16_to_fp32(h))) return false;
            }
            return true;
        case GGML_TYPE_I8:
        case GGML_TYPE_I16:
        case GGML_TYPE_I32:
        case GGML_TYPE_I64: return true;
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q8_1: case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: case GGML_TYPE_Q8_K: case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ3_XXS:
        case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ4_XS:
        case GGML_TYPE_F64: case GGML_TYPE_IQ1_M: case GGML_TYPE_TQ1_0: case GGML_TYPE_TQ2_0: case GGML_TYPE_MXFP4:
        case GGML_TYPE_NVFP4: case GGML_TYPE_Q1_0: case GGML_TYPE_Q2_0: case GGML_TYPE_COUNT: break;
    }
    if (ti.validate == nullptr) {
        LOOM_LOG_ERROR("%s: invalid type %d (%s data is not validated)\n", __func__, int(type), ti.name);
        return false;
    }
    size_t block = 0;
    float  value = 0.0f;
    if (!ti.validate(data, n, &block, &value)) {
        LOOM_LOG_ERROR("%s: found %s value at block %zu of %s data (elements %lld to %lld): a scale is not finite\n",
                       __func__, std::isnan(value) ? "nan" : "inf", block, ti.name,
                       (long long) (int64_t(block) * ti.blck_size), (long long) (int64_t(block + 1) * ti.blck_size - 1));
        return false;
    }
    return true;
}

} // extern "C"
