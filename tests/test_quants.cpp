// fp16/bf16 conversions and the Q8_0/Q4_0 block formats.
//
// Block formats (bit-identical to ggml's):
//   Q8_0: 32 values as {fp16 d; int8 q[32]},   x ~ q * d,        d = amax / 127,
//         q = round(x / d).
//   Q4_0: 32 values as {fp16 d; uint8 qs[16]}, x ~ (q - 8) * d,  d = max / -8 where max
//         is the value of largest magnitude (with its sign), q = min(15, trunc(x / d + 8.5));
//         element j is the low nibble of qs[j], element j + 16 the high nibble.
//
// Error bounds, with d the exact scale and d16 the scale stored in f16:
//   Q8_0: |x - q*d16| <= |d|/2 + 127 |d - d16|
//   Q4_0: |x - (q-8)*d16| <= |d|/2 + 8 |d - d16| while x/d < 7.5 (the top level 15 is
//         clamped, so values with x/d in [7.5, 8], i.e. close to -max, can be |d| off).

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ggml.h"
#include "reference.h"

using namespace loomtest;

namespace {

float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
}

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
}

bool is_f16_nan(ggml_fp16_t h) {
    return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
}

bool is_bf16_nan(ggml_bf16_t h) {
    return (h.bits & 0x7f80) == 0x7f80 && (h.bits & 0x007f) != 0;
}

// The value of f16 bits, from the IEEE fields.
double decode_f16(uint16_t h) {
    const int    sign = h >> 15;
    const int    exp  = (h >> 10) & 0x1f;
    const int    man  = h & 0x3ff;
    double       v;
    if (exp == 0) {
        v = std::ldexp(double(man), -24);
    } else if (exp == 31) {
        v = man == 0 ? INFINITY : NAN;
    } else {
        v = std::ldexp(1.0 + double(man) / 1024.0, exp - 15);
    }
    return sign ? -v : v;
}

// Random floats spread over many binades (including f16 subnormals and overflow).
std::vector<float> spread_floats(std::mt19937 & rng, size_t n, int min_exp, int max_exp) {
    std::uniform_real_distribution<double> mant(1.0, 2.0);
    std::uniform_int_distribution<int>     ex(min_exp, max_exp);
    std::bernoulli_distribution            neg(0.5);
    std::vector<float>                     v(n);
    for (float & x : v) {
        const double m = std::ldexp(mant(rng), ex(rng));
        x              = float(neg(rng) ? -m : m);
    }
    return v;
}

struct BlockQ8 {
    ggml_fp16_t d;
    int8_t      qs[32];
};
struct BlockQ4 {
    ggml_fp16_t d;
    uint8_t     qs[16];
};
static_assert(sizeof(BlockQ8) == 34 && sizeof(BlockQ4) == 18, "block layouts");

} // namespace

TEST(Fp16, KnownEncodings) {
    struct Case {
        double   value;
        uint16_t bits;
    };
    const Case cases[] = {
        {1.0, 0x3c00},
        {-2.0, 0xc000},
        {0.5, 0x3800},
        {0.0, 0x0000},
        {-0.0, 0x8000},
        {65504.0, 0x7bff},                    // largest finite
        {65519.0, 0x7bff},                    // below the halfway point to 65536
        {65520.0, 0x7c00},                    // halfway: to even, which overflows
        {1e6, 0x7c00},
        {-1e6, 0xfc00},
        {INFINITY, 0x7c00},
        {-INFINITY, 0xfc00},
        {std::ldexp(1.0, -14), 0x0400},       // smallest normal
        {std::ldexp(1023.0, -24), 0x03ff},    // largest subnormal
        {std::ldexp(1.0, -24), 0x0001},       // smallest subnormal
        {std::ldexp(1.0, -25), 0x0000},       // halfway between 0 and 2^-24: to even
        {std::ldexp(3.0, -25), 0x0002},       // halfway between 1 and 2 ulps: to even
        {std::ldexp(5.0, -26), 0x0001},       // 1.25 ulps
        {-std::ldexp(1.0, -26), 0x8000},
        {1.0 + std::ldexp(1.0, -11), 0x3c00}, // halfway: to even (down)
        {1.0 + std::ldexp(3.0, -11), 0x3c02}, // halfway: to even (up)
        {1.0 + std::ldexp(1.0, -10), 0x3c01},
        {double(0.1f), 0x2e66},
        {double(1.0f / 3.0f), 0x3555},
        {-0.375, 0xb600},
    };
    for (const Case & c : cases) {
        EXPECT_EQ(ggml_fp32_to_fp16(float(c.value)), c.bits) << "value " << c.value;
    }
    EXPECT_TRUE(is_f16_nan(ggml_fp32_to_fp16(NAN)));
    EXPECT_TRUE(is_f16_nan(ggml_fp32_to_fp16(-NAN)));
}

TEST(Fp16, KnownDecodings) {
    EXPECT_EQ(ggml_fp16_to_fp32(0x3c00), 1.0f);
    EXPECT_EQ(ggml_fp16_to_fp32(0x7bff), 65504.0f);
    EXPECT_EQ(ggml_fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(ggml_fp16_to_fp32(0x03ff), std::ldexp(1023.0f, -24));
    EXPECT_EQ(ggml_fp16_to_fp32(0x3555), 0.333251953125f);
    EXPECT_EQ(ggml_fp16_to_fp32(0xc000), -2.0f);
    const float neg_zero = ggml_fp16_to_fp32(0x8000);
    EXPECT_EQ(neg_zero, 0.0f);
    EXPECT_TRUE(std::signbit(neg_zero));
    EXPECT_EQ(ggml_fp16_to_fp32(0x7c00), INFINITY);
    EXPECT_EQ(ggml_fp16_to_fp32(0xfc00), -INFINITY);
    EXPECT_TRUE(std::isnan(ggml_fp16_to_fp32(0x7e00)));
    EXPECT_TRUE(std::isnan(ggml_fp16_to_fp32(0x7c01)));
}

TEST(Fp16, AllBitPatternsRoundTrip) {
    for (uint32_t b = 0; b < 0x10000; ++b) {
        const auto  h = ggml_fp16_t(b);
        const float f = ggml_fp16_to_fp32(h);
        const double want = decode_f16(h);
        if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(f)) << std::hex << b;
            ASSERT_TRUE(is_f16_nan(ggml_fp32_to_fp16(f))) << std::hex << b;
            continue;
        }
        ASSERT_EQ(double(f), want) << std::hex << b;
        ASSERT_EQ(ggml_fp32_to_fp16(f), h) << std::hex << b;
    }
}

TEST(Fp16, RandomValuesRoundToNearestEven) {
    std::mt19937             rng(5);
    const std::vector<float> v = spread_floats(rng, 200000, -28, 17);
    for (float x : v) {
        ASSERT_EQ(double(ggml_fp16_to_fp32(ggml_fp32_to_fp16(x))), round_to_f16(x)) << "x = " << x;
    }
    // Exact halfway points between neighbouring f16 values.
    for (uint32_t b = 0; b < 0x7bff; b += 7) {
        const double lo  = decode_f16(uint16_t(b));
        const double hi  = decode_f16(uint16_t(b + 1));
        const float  mid = float((lo + hi) / 2.0);
        ASSERT_EQ(double(mid), (lo + hi) / 2.0);
        const uint16_t even = (b % 2 == 0) ? uint16_t(b) : uint16_t(b + 1);
        ASSERT_EQ(ggml_fp32_to_fp16(mid), even) << "halfway above " << std::hex << b;
    }
}

TEST(Fp16, RowConversions) {
    std::mt19937       rng(7);
    std::vector<float> v = spread_floats(rng, 1001, -26, 16);
    v[0] = INFINITY;
    v[1] = -0.0f;
    v[2] = NAN;
    v[3] = 70000.0f;
    std::vector<ggml_fp16_t> h(v.size());
    ggml_fp32_to_fp16_row(v.data(), h.data(), int64_t(v.size()));
    std::vector<float> back(v.size());
    ggml_fp16_to_fp32_row(h.data(), back.data(), int64_t(h.size()));
    for (size_t i = 0; i < v.size(); ++i) {
        const ggml_fp16_t s = ggml_fp32_to_fp16(v[i]);
        if (is_f16_nan(s)) {
            EXPECT_TRUE(is_f16_nan(h[i])) << i;
            EXPECT_TRUE(std::isnan(back[i])) << i;
            continue;
        }
        EXPECT_EQ(h[i], s) << "element " << i << " = " << v[i];
        EXPECT_EQ(bits_of(back[i]), bits_of(ggml_fp16_to_fp32(s))) << "element " << i;
    }
}

TEST(Bf16, KnownEncodings) {
    struct Case {
        float    value;
        uint16_t bits;
    };
    const Case cases[] = {
        {1.0f, 0x3f80},
        {-2.0f, 0xc000},
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
        {1.0f + std::ldexp(1.0f, -8), 0x3f80}, // halfway: to even (down)
        {1.0f + std::ldexp(3.0f, -8), 0x3f82}, // halfway: to even (up)
        {1.0f + std::ldexp(1.0f, -7), 0x3f81},
        {1.0f + std::ldexp(3.0f, -9), 0x3f81}, // above halfway
        {FLT_MAX, 0x7f80},                     // rounds past the largest bf16
        {INFINITY, 0x7f80},
        {-INFINITY, 0xff80},
        {from_bits(0x00010000), 0x0001},       // smallest bf16 subnormal
        {from_bits(0x00008000), 0x0000},       // halfway between 0 and it: to even
        {from_bits(0x00018000), 0x0002},       // halfway between 1 and 2: to even
        {from_bits(0x00018001), 0x0002},
        {3.140625f, 0x4049},
    };
    for (const Case & c : cases) {
        EXPECT_EQ(ggml_fp32_to_bf16(c.value).bits, c.bits) << "value " << c.value;
    }
    // NaNs stay NaNs, even those whose payload is only in the low 16 bits.
    for (uint32_t nan_bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u, 0xff800001u}) {
        const ggml_bf16_t h = ggml_fp32_to_bf16(from_bits(nan_bits));
        EXPECT_TRUE(is_bf16_nan(h)) << std::hex << nan_bits << " became " << h.bits;
        EXPECT_EQ(h.bits & 0x8000, (nan_bits >> 16) & 0x8000) << "sign of " << std::hex << nan_bits;
    }
}

TEST(Bf16, DecodingAndRandomValues) {
    for (uint32_t b = 0; b < 0x10000; b += 3) {
        ggml_bf16_t h;
        h.bits = uint16_t(b);
        const float f = ggml_bf16_to_fp32(h);
        ASSERT_EQ(bits_of(f), b << 16) << std::hex << b;
    }
    std::mt19937             rng(11);
    const std::vector<float> v = spread_floats(rng, 200000, -140, 127);
    for (float x : v) {
        ASSERT_EQ(double(ggml_bf16_to_fp32(ggml_fp32_to_bf16(x))), round_to_bf16(x)) << "x = " << x;
    }
}

TEST(Bf16, RowConversions) {
    std::mt19937       rng(13);
    std::vector<float> v = spread_floats(rng, 999, -130, 127);
    v[0] = NAN;
    v[1] = -INFINITY;
    v[2] = FLT_MAX;
    std::vector<ggml_bf16_t> a(v.size()), b(v.size());
    ggml_fp32_to_bf16_row(v.data(), a.data(), int64_t(v.size()));
    ggml_fp32_to_bf16_row_ref(v.data(), b.data(), int64_t(v.size()));
    std::vector<float> back(v.size());
    ggml_bf16_to_fp32_row(a.data(), back.data(), int64_t(a.size()));
    for (size_t i = 0; i < v.size(); ++i) {
        const ggml_bf16_t s = ggml_fp32_to_bf16(v[i]);
        if (is_bf16_nan(s)) {
            EXPECT_TRUE(is_bf16_nan(a[i]) && is_bf16_nan(b[i])) << i;
            continue;
        }
        EXPECT_EQ(a[i].bits, s.bits) << "row, element " << i;
        EXPECT_EQ(b[i].bits, s.bits) << "row_ref, element " << i;
        EXPECT_EQ(bits_of(back[i]), uint32_t(s.bits) << 16) << "element " << i;
    }
}

TEST(Quants, TypeTraits) {
    EXPECT_EQ(ggml_blck_size(GGML_TYPE_Q8_0), 32);
    EXPECT_EQ(ggml_blck_size(GGML_TYPE_Q4_0), 32);
    EXPECT_EQ(ggml_type_size(GGML_TYPE_Q8_0), 34u);
    EXPECT_EQ(ggml_type_size(GGML_TYPE_Q4_0), 18u);
    EXPECT_EQ(ggml_row_size(GGML_TYPE_Q8_0, 96), 3u * 34u);
    EXPECT_EQ(ggml_row_size(GGML_TYPE_Q4_0, 96), 3u * 18u);
    EXPECT_TRUE(ggml_is_quantized(GGML_TYPE_Q8_0));
    EXPECT_TRUE(ggml_is_quantized(GGML_TYPE_Q4_0));
    EXPECT_FALSE(ggml_is_quantized(GGML_TYPE_F16));
    EXPECT_FALSE(ggml_quantize_requires_imatrix(GGML_TYPE_Q8_0));
    EXPECT_FALSE(ggml_quantize_requires_imatrix(GGML_TYPE_Q4_0));
    for (ggml_type t : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        const ggml_type_traits * tr = ggml_get_type_traits(t);
        ASSERT_NE(tr, nullptr);
        EXPECT_EQ(tr->blck_size, 32);
        EXPECT_TRUE(tr->is_quantized);
        EXPECT_NE(tr->to_float, nullptr);
        EXPECT_NE(tr->from_float_ref, nullptr);
    }
}

TEST(Quants, Q8_0KnownBlocks) {
    // All equal: d = 3/127, every q = 127.
    {
        std::vector<float> x(32, 3.0f);
        BlockQ8            b;
        ASSERT_EQ(ggml_quantize_chunk(GGML_TYPE_Q8_0, x.data(), &b, 0, 1, 32, nullptr), sizeof(b));
        EXPECT_EQ(b.d, 0x260c);
        for (int j = 0; j < 32; ++j) {
            EXPECT_EQ(b.qs[j], 127) << j;
        }
        float y[32];
        ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float(&b, y, 32);
        for (int j = 0; j < 32; ++j) {
            EXPECT_EQ(y[j], 127.0f * ggml_fp16_to_fp32(0x260c)) << j;
        }
    }
    // A ramp x_j = 8j - 127: amax = 127, so d = 1 (0x3c00) and q_j = x_j.
    {
        std::vector<float> x(32);
        for (int j = 0; j < 32; ++j) {
            x[size_t(j)] = float(8 * j - 127);
        }
        uint8_t raw[34];
        ggml_quantize_chunk(GGML_TYPE_Q8_0, x.data(), raw, 0, 1, 32, nullptr);
        EXPECT_EQ(raw[0], 0x00); // fp16 scale first, little-endian
        EXPECT_EQ(raw[1], 0x3c);
        for (int j = 0; j < 32; ++j) {
            EXPECT_EQ(int8_t(raw[2 + j]), 8 * j - 127) << j;
        }
    }
    // A block whose scale is not exact: x_j = (j - 16) / 4 + 1/8, amax = 4 (j = 0), d = 4/127.
    {
        std::vector<float> x(32);
        for (int j = 0; j < 32; ++j) {
            x[size_t(j)] = float(j - 16) * 0.25f + 0.125f;
        }
        x[0] = -4.0f;
        BlockQ8 b;
        ggml_quantize_chunk(GGML_TYPE_Q8_0, x.data(), &b, 0, 1, 32, nullptr);
        EXPECT_EQ(b.d, 0x2808); // 4/127 = 0.0314961 -> 0.0314941
        EXPECT_EQ(b.qs[0], -127);
        for (int j = 1; j < 32; ++j) {
            // x_j * 127/4 = (2j - 31) * 127/32: never within 1/32 of a halfway point.
            EXPECT_EQ(b.qs[j], int(std::lround((2 * j - 31) * 127.0 / 32.0))) << j;
        }
    }
    // All zero: zero scale and values, no NaN on the way back.
    {
        std::vector<float> x(32, 0.0f);
        BlockQ8            b;
        ggml_quantize_chunk(GGML_TYPE_Q8_0, x.data(), &b, 0, 1, 32, nullptr);
        EXPECT_EQ(ggml_fp16_to_fp32(b.d), 0.0f);
        float y[32];
        ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float(&b, y, 32);
        for (int j = 0; j < 32; ++j) {
            EXPECT_EQ(b.qs[j], 0);
            EXPECT_EQ(y[j], 0.0f);
        }
    }
    // Dequantizing a hand-made block.
    {
        BlockQ8 b;
        b.d = 0x3800; // 0.5
        for (int j = 0; j < 32; ++j) {
            b.qs[j] = int8_t(j * 8 - 128);
        }
        float y[32];
        ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float(&b, y, 32);
        for (int j = 0; j < 32; ++j) {
            EXPECT_EQ(y[j], 0.5f * float(j * 8 - 128)) << j;
        }
    }
}

TEST(Quants, Q4_0KnownBlocks) {
    // A ramp x_j = j - 16: max = -16 (largest magnitude, negative), d = 2,
    // q_j = trunc((j - 16)/2 + 8.5) = (j + 1) / 2, clamped to 15.
    {
        std::vector<float> x(32);
        for (int j = 0; j < 32; ++j) {
            x[size_t(j)] = float(j - 16);
        }
        uint8_t raw[18];
        ASSERT_EQ(ggml_quantize_chunk(GGML_TYPE_Q4_0, x.data(), raw, 0, 1, 32, nullptr), sizeof(raw));
        const uint16_t d = uint16_t(raw[0] | (raw[1] << 8));
        EXPECT_EQ(d, 0x4000); // 2.0
        for (int j = 0; j < 16; ++j) {
            const int lo = std::min(15, (j + 1) / 2);
            const int hi = std::min(15, (j + 16 + 1) / 2);
            EXPECT_EQ(raw[2 + j], uint8_t(lo | (hi << 4))) << "byte " << j;
        }
        EXPECT_EQ(raw[2], 0x80);
        EXPECT_EQ(raw[3], 0x91);
        EXPECT_EQ(raw[17], 0xf8);
        float y[32];
        ggml_get_type_traits(GGML_TYPE_Q4_0)->to_float(raw, y, 32);
        for (int j = 0; j < 32; ++j) {
            EXPECT_EQ(y[j], float((std::min(15, (j + 1) / 2) - 8) * 2)) << j;
        }
    }
    // All equal and positive: d = -3/8, every q = 0, and the values come back exactly.
    {
        std::vector<float> x(32, 3.0f);
        BlockQ4            b;
        ggml_quantize_chunk(GGML_TYPE_Q4_0, x.data(), &b, 0, 1, 32, nullptr);
        EXPECT_EQ(b.d, 0xb600);
        float y[32];
        ggml_get_type_traits(GGML_TYPE_Q4_0)->to_float(&b, y, 32);
        for (int j = 0; j < 16; ++j) {
            EXPECT_EQ(b.qs[j], 0) << j;
        }
        for (int j = 0; j < 32; ++j) {
            EXPECT_EQ(y[j], 3.0f) << j;
        }
    }
    // Dequantizing a hand-made block: low nibbles j, high nibbles 15 - j.
    {
        BlockQ4 b;
        b.d = 0x3c00; // 1.0
        for (int j = 0; j < 16; ++j) {
            b.qs[j] = uint8_t(j | ((15 - j) << 4));
        }
        float y[32];
        ggml_get_type_traits(GGML_TYPE_Q4_0)->to_float(&b, y, 32);
        for (int j = 0; j < 16; ++j) {
            EXPECT_EQ(y[j], float(j - 8)) << j;
            EXPECT_EQ(y[j + 16], float(7 - j)) << j + 16;
        }
    }
}

namespace {

// Rows of 32*k values whose blocks have very different magnitudes.
std::vector<float> block_data(std::mt19937 & rng, int64_t n) {
    std::vector<float>                     v(static_cast<size_t>(n));
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::uniform_int_distribution<int>     ex(-12, 10);
    for (int64_t b = 0; b < n / 32; ++b) {
        const double s = std::ldexp(1.0, ex(rng));
        for (int64_t j = 0; j < 32; ++j) {
            v[size_t(b * 32 + j)] = float(u(rng) * s);
        }
    }
    return v;
}

} // namespace

TEST(Quants, Q8_0RoundTripBounds) {
    std::mt19937             rng(17);
    const int64_t            n_per_row = 32 * 7, nrows = 9;
    const std::vector<float> x         = block_data(rng, n_per_row * nrows);
    std::vector<BlockQ8>     q(size_t(n_per_row * nrows / 32));
    ASSERT_EQ(ggml_quantize_chunk(GGML_TYPE_Q8_0, x.data(), q.data(), 0, nrows, n_per_row, nullptr),
              q.size() * sizeof(BlockQ8));
    std::vector<float> y(x.size());
    ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float(q.data(), y.data(), int64_t(x.size()));

    for (size_t b = 0; b < q.size(); ++b) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) {
            amax = std::max(amax, std::fabs(x[b * 32 + size_t(j)]));
        }
        const float  d   = amax / 127.0f;
        const double d16 = ggml_fp16_to_fp32(q[b].d);
        EXPECT_EQ(d16, round_to_f16(d)) << "scale of block " << b;
        const double bound = double(d) / 2.0 + 127.0 * std::fabs(double(d) - d16) + 1e-6 * double(amax);
        for (int j = 0; j < 32; ++j) {
            const size_t i = b * 32 + size_t(j);
            const double r = double(x[i]) / double(d);
            // round(x/d); values within float noise of a halfway point may go either way.
            if (std::fabs(std::fabs(r - std::trunc(r)) - 0.5) > 1e-4) {
                EXPECT_EQ(q[b].qs[j], int(std::lround(r))) << "block " << b << " element " << j;
            }
            EXPECT_LE(std::fabs(double(y[i]) - double(x[i])), bound) << "block " << b << " element " << j;
        }
    }
}

TEST(Quants, Q4_0RoundTripBounds) {
    std::mt19937             rng(19);
    const int64_t            n_per_row = 32 * 5, nrows = 11;
    const std::vector<float> x         = block_data(rng, n_per_row * nrows);
    std::vector<BlockQ4>     q(size_t(n_per_row * nrows / 32));
    ASSERT_EQ(ggml_quantize_chunk(GGML_TYPE_Q4_0, x.data(), q.data(), 0, nrows, n_per_row, nullptr),
              q.size() * sizeof(BlockQ4));
    std::vector<float> y(x.size());
    ggml_get_type_traits(GGML_TYPE_Q4_0)->to_float(q.data(), y.data(), int64_t(x.size()));

    for (size_t b = 0; b < q.size(); ++b) {
        float amax = 0.0f, maxv = 0.0f;
        for (int j = 0; j < 32; ++j) {
            const float v = x[b * 32 + size_t(j)];
            if (std::fabs(v) > amax) {
                amax = std::fabs(v);
                maxv = v;
            }
        }
        const float  d   = maxv / -8.0f;
        const double d16 = ggml_fp16_to_fp32(q[b].d);
        EXPECT_EQ(d16, round_to_f16(d)) << "scale of block " << b;
        const double extra = 8.0 * std::fabs(double(d) - d16) + 1e-6 * double(amax);
        for (int j = 0; j < 32; ++j) {
            const size_t  i   = b * 32 + size_t(j);
            const int     nib = j < 16 ? (q[b].qs[j] & 0x0f) : (q[b].qs[j - 16] >> 4);
            const double  r   = double(x[i]) / double(d);
            const int64_t want_q = std::min<int64_t>(15, int64_t(std::floor(r + 8.5)));
            if (std::fabs((r + 8.5) - std::round(r + 8.5)) > 1e-4) {
                EXPECT_EQ(nib, want_q) << "block " << b << " element " << j;
            }
            EXPECT_EQ(double(y[i]), double(nib - 8) * d16) << "block " << b << " element " << j;
            const double bound = (r < 7.5 ? 0.5 : 1.0) * std::fabs(double(d)) + extra;
            EXPECT_LE(std::fabs(double(y[i]) - double(x[i])), bound) << "block " << b << " element " << j;
        }
    }
}

TEST(Quants, ChunkWithStartOffset) {
    for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        SCOPED_TRACE(ggml_type_name(type));
        std::mt19937             rng(23);
        const int64_t            n_per_row = 64, nrows = 7, start_row = 2, n = 3;
        const std::vector<float> x         = block_data(rng, n_per_row * nrows);
        const size_t             row_size  = ggml_row_size(type, n_per_row);

        std::vector<uint8_t> full(row_size * size_t(nrows));
        ggml_quantize_chunk(type, x.data(), full.data(), 0, nrows, n_per_row, nullptr);

        // Quantizing rows [2, 5) writes exactly those rows of dst, taken from src at the same offset.
        std::vector<uint8_t> part(full.size(), 0xa5);
        const size_t         written =
            ggml_quantize_chunk(type, x.data(), part.data(), start_row * n_per_row, n, n_per_row, nullptr);
        EXPECT_EQ(written, row_size * size_t(n));
        for (size_t i = 0; i < part.size(); ++i) {
            const bool inside = i >= row_size * size_t(start_row) && i < row_size * size_t(start_row + n);
            if (inside) {
                ASSERT_EQ(part[i], full[i]) << "byte " << i;
            } else {
                ASSERT_EQ(part[i], 0xa5) << "byte " << i << " outside the chunk was written";
            }
        }

        // The reference quantizer of the type traits makes the same blocks.
        std::vector<uint8_t> by_ref(full.size());
        ggml_get_type_traits(type)->from_float_ref(x.data(), by_ref.data(), n_per_row * nrows);
        EXPECT_EQ(by_ref, full);
    }
}
