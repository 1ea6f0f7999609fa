#pragma once

// Helpers of the SIMD kernel tests (test_simd.cpp, test_simd_gemm.cpp):
// the tables to test, random operands of every type, tolerances.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/features.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "core/types.h"

namespace loomtest::simd {

using namespace loom;
using namespace loom::cpu;

// What this processor lacks for the next kernel table up, for the messages
// of tests skipped for want of a table.
inline std::string lacking() {
#if defined(__x86_64__) || defined(__i386__)
    const loom::cpu::Features & f = loom::cpu::features();
    std::string                 s;
    auto need = [&](bool has, const char * name) {
        if (!has) s += (s.empty() ? "" : ", ") + std::string(name);
    };
    if (!loom::cpu::avx2_table_runs()) {
        need(f.avx2, "AVX2");
        need(f.fma, "FMA");
        need(f.f16c, "F16C");
    } else if (!loom::cpu::avx512_table_runs()) {
        need(f.avx512f, "AVX512F");
        need(f.avx512bw, "AVX512BW");
        need(f.avx512vl, "AVX512VL");
        need(f.avx512vnni, "AVX512_VNNI");
    } else if (!loom::cpu::avx512bf16_table_runs()) {
        need(f.avx512bf16, "AVX512_BF16");
    }
    return s.empty() ? "this processor runs every table of its family, none has it" : "this processor lacks " + s;
#elif defined(__aarch64__)
    const loom::cpu::Features & f = loom::cpu::features();
    if (!f.neon) return "this processor lacks Advanced SIMD";
    if (!f.dotprod) return "this processor lacks the dot-product extension (SDOT)";
    return "this processor runs every table of its family, none has it";
#else
    return "neither x86 nor 64-bit Arm: the portable table alone";
#endif
}

// The tables this processor can run besides the portable one.
inline std::vector<const KernelTable *> simd_tables() {
    std::vector<const KernelTable *> out = runnable_kernels();
    out.erase(out.begin()); // the portable table, the reference
    return out;
}

#define FOR_EACH_SIMD_TABLE(var)                                                    \
    const auto tables_ = simd_tables();                                             \
    if (tables_.empty()) {                                                          \
        GTEST_SKIP() << "no SIMD kernel table runs here: " << lacking();            \
    }                                                                               \
    for (const KernelTable * var : tables_)

inline constexpr double kDotTol = 1e-5;

// Sizes around the vector widths and unroll factors, and a few long ones.
inline const int64_t kSizes[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 257, 1000, 4099};

inline std::vector<float> random_floats(std::mt19937 & rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float>                    v(n);
    for (float & x : v) {
        x = d(rng);
    }
    return v;
}

// Random values in [-2, 2] rounded to a 16-bit float type by round.
inline std::vector<uint16_t> random_16bit(std::mt19937 & rng, size_t n, uint16_t (*round)(float)) {
    const std::vector<float> f = random_floats(rng, n, -2.0f, 2.0f);
    std::vector<uint16_t>    v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = round(f[i]);
    }
    return v;
}

inline std::vector<uint16_t> random_halves(std::mt19937 & rng, size_t n) {
    return random_16bit(rng, n, fp32_to_fp16);
}

inline std::vector<uint16_t> random_bf16(std::mt19937 & rng, size_t n) {
    return random_16bit(rng, n, fp32_to_bf16);
}

// Q8_0 blocks with values in [lo, 127] and scales in [0.001, 0.1).
inline std::vector<block_q8_0> random_q8(std::mt19937 & rng, size_t nb, int lo) {
    std::uniform_int_distribution<int>    q(lo, 127);
    std::uniform_real_distribution<float> d(0.001f, 0.1f);
    std::vector<block_q8_0>               v(nb);
    for (block_q8_0 & b : v) {
        b.d = fp32_to_fp16(d(rng));
        for (int8_t & x : b.qs) {
            x = int8_t(q(rng));
        }
    }
    return v;
}

inline std::vector<block_q4_0> random_q4(std::mt19937 & rng, size_t nb) {
    std::uniform_int_distribution<int>    q(0, 255);
    std::uniform_real_distribution<float> d(0.001f, 0.1f);
    std::vector<block_q4_0>               v(nb);
    for (block_q4_0 & b : v) {
        b.d = fp32_to_fp16(d(rng));
        for (uint8_t & x : b.qs) {
            x = uint8_t(q(rng));
        }
    }
    return v;
}

// sum |x_i y_i| of two rows of any weight type, from their float values.
inline double abs_dot(const std::vector<float> & x, const std::vector<float> & y) {
    double s = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
        s += std::fabs(double(x[i]) * double(y[i]));
    }
    return s;
}

template <typename T> std::vector<float> to_floats(ggml_type type, const T * p, int64_t n) {
    std::vector<float> out(size_t(std::max<int64_t>(n, 1)));
    if (n > 0) {
        type_info(type, "test").to_float(p, out.data(), n);
    }
    out.resize(size_t(n));
    return out;
}

// A copy of v placed one element alignment past a 32-byte boundary, so
// vector loads cannot rely on alignment (elements stay naturally aligned, as
// in any tensor).
template <typename T> struct Unaligned {
    std::vector<unsigned char> storage;
    T *                        ptr;
    explicit Unaligned(const std::vector<T> & v) : storage(v.size() * sizeof(T) + 64) {
        auto base = reinterpret_cast<uintptr_t>(storage.data());
        ptr       = reinterpret_cast<T *>(((base + 31) & ~uintptr_t(31)) + alignof(T));
        for (size_t i = 0; i < v.size(); ++i) {
            ptr[i] = v[i];
        }
    }
};

} // namespace loomtest::simd
