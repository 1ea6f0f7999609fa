// The ternary, FP4, one- and two-bit types and F64: block layouts
// bit-identical to ggml's, decoding and ggml's reference encoders.

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstring>

#include "core/common.h"
#include "core/fp16.h"
#include "core/types.h"
#include "core/types/legacy_k.h"
#include "core/types/other.h"

namespace loom {

namespace {

#include "fp4_values.inc"

// The row functions of the type table; k is a multiple of the block size.

// ---- TQ1_0: base-3 digits packed into bytes as a fraction of 256 ----------

// The trit a byte holds in its n-th digit: multiplying by 3^n moves the digit
// to the top, a further 3 (out of 256) reads it.
int trit(uint8_t byte, int n) {
    static constexpr uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t            q       = uint8_t(byte * pow3[n]);
    return (q * 3) >> 8;
}

// Packs digits (each 0..2, first most significant) as ceil(value * 256 / 243).
uint8_t pack_trits(const int * t, int n) {
    int q = 0;
    for (int i = 0; i < n; ++i) q = q * 3 + t[i];
    for (int i = n; i < 5; ++i) q *= 3;
    return uint8_t((q * 256 + 242) / 243);
}

int ternary(float v, float id) {
    return int(std::lround(v * id)) + 1; // -1, 0, 1 -> 0, 1, 2
}

void dequantize_row_tq1_0(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_TQ == 0);
    const auto * x = static_cast<const block_tq1_0 *>(vx);
    for (int64_t b = 0; b < k / QK_TQ; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        // 32 bytes of 5 digits, then 16 bytes of 5 digits, then qh's 4 bytes of 4 digits
        for (int n = 0; n < 5; ++n)
            for (int m = 0; m < 32; ++m) *y++ = float(trit(x[b].qs[m], n) - 1) * d;
        for (int n = 0; n < 5; ++n)
            for (int m = 0; m < 16; ++m) *y++ = float(trit(x[b].qs[32 + m], n) - 1) * d;
        for (int n = 0; n < 4; ++n)
            for (int j = 0; j < 4; ++j) *y++ = float(trit(x[b].qh[j], n) - 1) * d;
    }
}

void quantize_row_tq1_0_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK_TQ == 0);
    auto * y = static_cast<block_tq1_0 *>(vy);
    for (int64_t b = 0; b < k / QK_TQ; ++b) {
        float amax = 0.0f;
        for (int j = 0; j < QK_TQ; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float id = amax != 0 ? 1.0f / amax : 0.0f;
        y[b].d         = fp32_to_fp16(amax);
        int t[5];
        for (int m = 0; m < 32; ++m) {
            for (int n = 0; n < 5; ++n) t[n] = ternary(x[m + 32 * n], id);
            y[b].qs[m] = pack_trits(t, 5);
        }
        x += 160;
        for (int m = 0; m < 16; ++m) {
            for (int n = 0; n < 5; ++n) t[n] = ternary(x[m + 16 * n], id);
            y[b].qs[32 + m] = pack_trits(t, 5);
        }
        x += 80;
        for (int j = 0; j < 4; ++j) {
            for (int n = 0; n < 4; ++n) t[n] = ternary(x[j + 4 * n], id);
            y[b].qh[j] = pack_trits(t, 4);
        }
        x += 16;
    }
}

// ---- TQ2_0: 2 bits per weight, q - 1 ----------------------------------------

void dequantize_row_tq2_0(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_TQ == 0);
    const auto * x = static_cast<const block_tq2_0 *>(vx);
    for (int64_t b = 0; b < k / QK_TQ; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK_TQ / 4; j += 32)
            for (int l = 0; l < 4; ++l)
                for (int m = 0; m < 32; ++m) *y++ = float(((x[b].qs[j + m] >> (2 * l)) & 3) - 1) * d;
    }
}

void quantize_row_tq2_0_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK_TQ == 0);
    auto * y = static_cast<block_tq2_0 *>(vy);
    for (int64_t b = 0; b < k / QK_TQ; ++b) {
        float amax = 0.0f;
        for (int j = 0; j < QK_TQ; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float id = amax != 0 ? 1.0f / amax : 0.0f;
        y[b].d         = fp32_to_fp16(amax);
        for (int j = 0; j < QK_TQ / 4; j += 32) {
            for (int m = 0; m < 32; ++m) {
                int q = 0;
                for (int n = 0; n < 4; ++n) q += (ternary(x[m + 32 * n], id) & 3) << (2 * n);
                y[b].qs[j + m] = uint8_t(q);
            }
            x += 128;
        }
    }
}

// ---- MXFP4 and NVFP4: E2M1 nibbles times a block scale ----------------------

// The nibble whose (doubled) E2M1 value times scale is nearest to v; the first on a tie.
uint8_t nearest_fp4(float v, float scale) {
    int   best     = 0;
    float best_err = std::fabs(float(kvalues_fp4[0]) * scale - v);
    for (int i = 1; i < 16; ++i) {
        const float err = std::fabs(float(kvalues_fp4[i]) * scale - v);
        if (err < best_err) {
            best     = i;
            best_err = err;
        }
    }
    return uint8_t(best);
}

void dequantize_row_mxfp4(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_MXFP4 == 0);
    const auto * x = static_cast<const block_mxfp4 *>(vx);
    for (int64_t b = 0; b < k / QK_MXFP4; ++b) {
        const float d = e8m0_to_fp32_half(x[b].e);
        for (int j = 0; j < QK_MXFP4 / 2; ++j) {
            y[j]                = float(kvalues_fp4[x[b].qs[j] & 0xf]) * d;
            y[j + QK_MXFP4 / 2] = float(kvalues_fp4[x[b].qs[j] >> 4]) * d;
        }
        y += QK_MXFP4;
    }
}

void quantize_row_mxfp4_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK_MXFP4 == 0);
    auto * y = static_cast<block_mxfp4 *>(vy);
    for (int64_t b = 0; b < k / QK_MXFP4; ++b, x += QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < QK_MXFP4; ++j) amax = std::max(amax, std::fabs(x[j]));
        // the largest E2M1 magnitude is 6 = 1.5 * 2^2: the exponent leaves amax in [4, 8) * scale;
        // an infinite amax stores 0, as the conversion of ggml's compiler does on x86
        const uint8_t e = amax > 0.0f && std::isfinite(amax) ? uint8_t(int(std::floor(std::log2(amax)) - 2 + 127)) : 0;
        const float   d = e8m0_to_fp32_half(e);
        y[b].e          = e;
        for (int j = 0; j < QK_MXFP4 / 2; ++j) {
            y[b].qs[j] = uint8_t(nearest_fp4(x[j], d) | (nearest_fp4(x[j + QK_MXFP4 / 2], d) << 4));
        }
    }
}

void dequantize_row_nvfp4(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK_NVFP4 == 0);
    const auto * x = static_cast<const block_nvfp4 *>(vx);
    for (int64_t b = 0; b < k / QK_NVFP4; ++b) {
        for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; ++s) {
            const float     d  = ue4m3_to_fp32_half(x[b].d[s]);
            const uint8_t * qs = x[b].qs + s * QK_NVFP4_SUB / 2;
            for (int j = 0; j < QK_NVFP4_SUB / 2; ++j) {
                y[j]                    = float(kvalues_fp4[qs[j] & 0xf]) * d;
                y[j + QK_NVFP4_SUB / 2] = float(kvalues_fp4[qs[j] >> 4]) * d;
            }
            y += QK_NVFP4_SUB;
        }
    }
}

void quantize_row_nvfp4_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK_NVFP4 == 0);
    auto * y = static_cast<block_nvfp4 *>(vy);
    for (int64_t b = 0; b < k / QK_NVFP4; ++b) {
        for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; ++s, x += QK_NVFP4_SUB) {
            float amax = 0.0f;
            for (int j = 0; j < QK_NVFP4_SUB; ++j) amax = std::max(amax, std::fabs(x[j]));
            const uint8_t ue = fp32_to_ue4m3(amax / 6.0f); // the largest E2M1 value, 6, maps to amax
            y[b].d[s]        = ue;
            const float d    = ue4m3_to_fp32_half(ue);
            uint8_t *   qs   = y[b].qs + s * QK_NVFP4_SUB / 2;
            for (int j = 0; j < QK_NVFP4_SUB / 2; ++j) {
                qs[j] = uint8_t(nearest_fp4(x[j], d) | (nearest_fp4(x[j + QK_NVFP4_SUB / 2], d) << 4));
            }
        }
    }
}

// ---- Q1_0 and Q2_0 ----------------------------------------------------------

void dequantize_row_q1_0(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK1_0 == 0);
    const auto * x = static_cast<const block_q1_0 *>(vx);
    for (int64_t b = 0; b < k / QK1_0; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK1_0; ++j) *y++ = ((x[b].qs[j / 8] >> (j % 8)) & 1) ? d : -d;
    }
}

// The scale is the mean magnitude; each bit is the sign (set for >= 0).
void quantize_row_q1_0_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK1_0 == 0);
    auto * y = static_cast<block_q1_0 *>(vy);
    for (int64_t b = 0; b < k / QK1_0; ++b, x += QK1_0) {
        float sum = 0.0f;
        for (int j = 0; j < QK1_0; ++j) sum += std::fabs(x[j]);
        y[b].d = fp32_to_fp16(sum / QK1_0);
        std::memset(y[b].qs, 0, sizeof y[b].qs);
        for (int j = 0; j < QK1_0; ++j) {
            if (x[j] >= 0.0f) y[b].qs[j / 8] = uint8_t(y[b].qs[j / 8] | (1 << (j % 8)));
        }
    }
}

void dequantize_row_q2_0(const void * vx, float * y, int64_t k) {
    LOOM_ASSERT(k % QK2_0 == 0);
    const auto * x = static_cast<const block_q2_0 *>(vx);
    for (int64_t b = 0; b < k / QK2_0; ++b) {
        const float d = fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK2_0; ++j) *y++ = float(((x[b].qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
}

// The scale is the largest magnitude; q = round(x / d) + 1 clamped to 0..3.
void quantize_row_q2_0_ref(const float * x, void * vy, int64_t k) {
    LOOM_ASSERT(k % QK2_0 == 0);
    auto * y = static_cast<block_q2_0 *>(vy);
    for (int64_t b = 0; b < k / QK2_0; ++b, x += QK2_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK2_0; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
        y[b].d         = fp32_to_fp16(amax);
        std::memset(y[b].qs, 0, sizeof y[b].qs);
        for (int j = 0; j < QK2_0; ++j) {
            const float r    = std::round(x[j] * id); // NaN (from an infinite amax) stores 0
            const int   q    = r >= -1.0f ? int(std::min(r, 2.0f)) + 1 : 0;
            y[b].qs[j / 4] = uint8_t(y[b].qs[j / 4] | (q << (2 * (j % 4))));
        }
    }
}

} // namespace

float e8m0_to_fp32_half(uint8_t e) {
    // 2^(e - 128); e = 0 and 1 are the subnormals 2^-128 and 2^-127
    const uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
    return bits_f32(bits);
}

float ue4m3_to_fp32_half(uint8_t x) {
    if (x == 0 || x == 0x7f) return 0.0f; // the top bit is not read: 0x80 and 0xff are values
    const int exp = (x >> 3) & 0xf;
    const int man = x & 0x7;
    const float v = exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
    return v * 0.5f;
}

uint8_t fp32_to_ue4m3(float x) {
    if (!(x > 0.0f)) return 0;
    x                   = std::min(x, 448.0f);
    const uint32_t bits = f32_bits(x);
    int            exp  = int((bits >> 23) & 0xff) - 127 + 7;
    if (exp <= 0) { // subnormal: man * 2^-9, rounded half up
        const int man = std::min(int(x * 512.0f + 0.5f), 7);
        return man < 1 ? 0 : uint8_t(man);
    }
    if (exp >= 15) return 0x7e;
    // the top three mantissa bits, rounded on the fourth (half up)
    int man = int((bits >> 20) & 0x7) + int((bits >> 19) & 1);
    if (man > 7) {
        man = 0;
        if (++exp >= 15) return 0x7e;
    }
    return uint8_t((exp << 3) | man);
}

namespace {

// An E8M0 exponent of 0xff is not a number.
bool validate_mxfp4(const void * data, size_t nblocks, size_t * bad_block, float * bad_value) {
    const auto * b = static_cast<const block_mxfp4 *>(data);
    for (size_t i = 0; i < nblocks; ++i) {
        if (b[i].e == 0xff) {
            *bad_block = i;
            *bad_value = NAN;
            return false;
        }
    }
    return true;
}

bool validate_any(const void *, size_t, size_t *, float *) {
    return true;
}

bool validate_f64(const void * data, size_t n, size_t * bad, float * bad_value) {
    for (size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, static_cast<const char *>(data) + i * sizeof(double), sizeof(v));
        if (!std::isfinite(v)) {
            *bad       = i;
            *bad_value = float(v);
            return false;
        }
    }
    return true;
}

} // namespace

// Products on the CPU quantize the activations to iq_vec_dot_type(type)
// (types/i_quants.h): Q8_K for TQ1_0 and TQ2_0, Q8_0 for the others.
void add_other_types(TypeRows & rows) {
    rows[GGML_TYPE_TQ1_0] = {"tq1_0", QK_TQ, sizeof(block_tq1_0), true, dequantize_row_tq1_0, quantize_row_tq1_0_ref};
    rows[GGML_TYPE_TQ2_0] = {"tq2_0", QK_TQ, sizeof(block_tq2_0), true, dequantize_row_tq2_0, quantize_row_tq2_0_ref};
    rows[GGML_TYPE_MXFP4] = {"mxfp4", QK_MXFP4, sizeof(block_mxfp4), true, dequantize_row_mxfp4,
                             quantize_row_mxfp4_ref};
    rows[GGML_TYPE_NVFP4] = {"nvfp4", QK_NVFP4, sizeof(block_nvfp4), true, dequantize_row_nvfp4,
                             quantize_row_nvfp4_ref};
    rows[GGML_TYPE_Q1_0]  = {"q1_0", QK1_0, sizeof(block_q1_0), true, dequantize_row_q1_0, quantize_row_q1_0_ref};
    rows[GGML_TYPE_Q2_0]  = {"q2_0", QK2_0, sizeof(block_q2_0), true, dequantize_row_q2_0, quantize_row_q2_0_ref};
    // ggml gives F64 no conversion to or from float
    rows[GGML_TYPE_F64] = {"f64", 1, sizeof(double), false, nullptr, nullptr};

    rows[GGML_TYPE_TQ1_0].validate = validate_halves<sizeof(block_tq1_0), offsetof(block_tq1_0, d)>;
    rows[GGML_TYPE_TQ2_0].validate = validate_halves<sizeof(block_tq2_0), offsetof(block_tq2_0, d)>;
    rows[GGML_TYPE_Q1_0].validate  = validate_halves<sizeof(block_q1_0), offsetof(block_q1_0, d)>;
    rows[GGML_TYPE_Q2_0].validate  = validate_halves<sizeof(block_q2_0), offsetof(block_q2_0, d)>;
    rows[GGML_TYPE_MXFP4].validate = validate_mxfp4;
    rows[GGML_TYPE_NVFP4].validate = validate_any; // every UE4M3 scale byte is a number
    rows[GGML_TYPE_F64].validate   = validate_f64;
}

} // namespace loom
