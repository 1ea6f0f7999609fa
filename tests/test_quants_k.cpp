// The legacy types Q4_1, Q5_0, Q5_1, Q8_1 and the K-quants Q2_K ... Q8_K:
// bytes and floats against data written by ggml 0.25.1 (tests/data/quants-k,
// see its README.md), round-trip errors, data validation, the removed type
// slots, the CPU's traits and dot products, and mul_mat, get_rows, cpy and
// set_rows with every type against a double-precision reference.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/simd/kernel_table.h"
#include "core/types.h"
#include "core/types/legacy_k.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "log_capture.h"
#include "test_util.h"

using namespace loomtest;

namespace {

constexpr int NROWS = 3;   // rows of the reference data
constexpr int NPER  = 512; // values per row

const ggml_type kLegacy[] = {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1};
const ggml_type kK[]      = {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
// Weight types of this family (a to_float and a from_float).
const ggml_type kWeights[] = {GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K,
                              GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};

std::vector<uint8_t> read_file(const std::string & name) {
    const std::string path = std::string(LOOM_TEST_DATA) + "/quants-k/" + name;
    std::vector<uint8_t> bytes;
    FILE *               f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        ADD_FAILURE() << "cannot open " << path;
        return bytes;
    }
    uint8_t buf[4096];
    size_t  n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
        bytes.insert(bytes.end(), buf, buf + n);
    }
    std::fclose(f);
    return bytes;
}

struct Input {
    std::vector<float> x, imatrix;
};

Input read_input() {
    const std::vector<uint8_t> b = read_file("input.bin");
    Input                      in;
    in.x.resize(NROWS * NPER);
    in.imatrix.resize(NPER);
    if (b.size() != (in.x.size() + in.imatrix.size()) * sizeof(float)) {
        ADD_FAILURE() << "input.bin has " << b.size() << " bytes";
        return in;
    }
    std::memcpy(in.x.data(), b.data(), in.x.size() * sizeof(float));
    std::memcpy(in.imatrix.data(), b.data() + in.x.size() * sizeof(float), in.imatrix.size() * sizeof(float));
    return in;
}

::testing::AssertionResult same_bytes(const uint8_t * got, const uint8_t * want, size_t n, size_t row_size) {
    for (size_t i = 0; i < n; ++i) {
        if (got[i] != want[i]) {
            return ::testing::AssertionFailure() << "byte " << i << " (row " << i / row_size << ", offset "
                                                 << i % row_size << "): " << int(got[i]) << ", ggml " << int(want[i]);
        }
    }
    return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_floats(const float * got, const float * want, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            return ::testing::AssertionFailure() << "value " << i << ": " << got[i] << ", ggml " << want[i];
        }
    }
    return ::testing::AssertionSuccess();
}

// ---- reference data of ggml 0.25.1 ----

TEST(QuantsK, QuantizeChunkAndToFloatMatchGgml) {
    const Input in = read_input();
    const ggml_type types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                               GGML_TYPE_Q8_0, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,
                               GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    for (ggml_type t : types) {
        SCOPED_TRACE(ggml_type_name(t));
        const size_t               rs   = ggml_row_size(t, NPER);
        const size_t               size = NROWS * rs;
        const std::vector<uint8_t> want = read_file(std::string(ggml_type_name(t)) + ".bin");
        ASSERT_EQ(want.size(), 2 * size + NPER * sizeof(float));

        std::vector<uint8_t> got(size, 0xa5);
        EXPECT_EQ(ggml_quantize_chunk(t, in.x.data(), got.data(), 0, NROWS, NPER, nullptr), size);
        EXPECT_TRUE(same_bytes(got.data(), want.data(), size, rs)) << "without an importance matrix";

        // The reference row function, row by row, writes the same bytes.
        std::fill(got.begin(), got.end(), uint8_t(0x5a));
        for (int r = 0; r < NROWS; ++r) {
            ggml_get_type_traits(t)->from_float_ref(in.x.data() + r * NPER, got.data() + r * rs, NPER);
        }
        EXPECT_TRUE(same_bytes(got.data(), want.data(), size, rs)) << "from_float_ref";

        std::fill(got.begin(), got.end(), uint8_t(0xa5));
        EXPECT_EQ(ggml_quantize_chunk(t, in.x.data(), got.data(), 0, NROWS, NPER, in.imatrix.data()), size);
        EXPECT_TRUE(same_bytes(got.data(), want.data() + size, size, rs)) << "with an importance matrix";

        // A chunk starting at row 1 writes rows 1 and 2 where they belong.
        std::vector<uint8_t> part(size, 0);
        EXPECT_EQ(ggml_quantize_chunk(t, in.x.data(), part.data(), NPER, NROWS - 1, NPER, in.imatrix.data()),
                  size - rs);
        EXPECT_TRUE(same_bytes(part.data() + rs, want.data() + size + rs, size - rs, rs)) << "from row 1";

        std::vector<float> deq(NPER);
        ggml_get_type_traits(t)->to_float(want.data(), deq.data(), NPER);
        EXPECT_TRUE(same_floats(deq.data(), reinterpret_cast<const float *>(want.data() + 2 * size), NPER));
    }
}

TEST(QuantsK, ActivationTypesMatchGgml) {
    const Input in = read_input();
    {
        const size_t               size = NROWS * ggml_row_size(GGML_TYPE_Q8_1, NPER);
        const std::vector<uint8_t> want = read_file("q8_1.bin");
        ASSERT_EQ(want.size(), size);
        std::vector<uint8_t> got(size);
        ggml_get_type_traits(GGML_TYPE_Q8_1)->from_float_ref(in.x.data(), got.data(), NROWS * NPER);
        EXPECT_TRUE(same_bytes(got.data(), want.data(), size, size / NROWS));
        EXPECT_EQ(ggml_get_type_traits(GGML_TYPE_Q8_1)->to_float, nullptr);
    }
    {
        const size_t               size = NROWS * ggml_row_size(GGML_TYPE_Q8_K, NPER);
        const std::vector<uint8_t> want = read_file("q8_K.bin");
        ASSERT_EQ(want.size(), size + NPER * sizeof(float));
        std::vector<uint8_t> got(size, 0xa5);
        ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(in.x.data(), got.data(), NROWS * NPER);
        EXPECT_TRUE(same_bytes(got.data(), want.data(), size, size / NROWS));
        std::vector<float> deq(NPER);
        loom::dequantize_row_q8_K(want.data(), deq.data(), NPER);
        EXPECT_TRUE(same_floats(deq.data(), reinterpret_cast<const float *>(want.data() + size), NPER));
        // As in ggml, the type table has no conversions for Q8_K.
        EXPECT_EQ(ggml_get_type_traits(GGML_TYPE_Q8_K)->to_float, nullptr);
        EXPECT_EQ(ggml_get_type_traits(GGML_TYPE_Q8_K)->from_float_ref, nullptr);
    }
}

TEST(QuantsK, TypeRows) {
    struct Row {
        ggml_type   t;
        const char *name;
        int64_t     blck;
        size_t      size;
    };
    const Row rows[] = {{GGML_TYPE_Q4_1, "q4_1", 32, 20},   {GGML_TYPE_Q5_0, "q5_0", 32, 22},
                        {GGML_TYPE_Q5_1, "q5_1", 32, 24},   {GGML_TYPE_Q8_1, "q8_1", 32, 36},
                        {GGML_TYPE_Q2_K, "q2_K", 256, 84},  {GGML_TYPE_Q3_K, "q3_K", 256, 110},
                        {GGML_TYPE_Q4_K, "q4_K", 256, 144}, {GGML_TYPE_Q5_K, "q5_K", 256, 176},
                        {GGML_TYPE_Q6_K, "q6_K", 256, 210}, {GGML_TYPE_Q8_K, "q8_K", 256, 292}};
    for (const Row & r : rows) {
        const ggml_type_traits * tt = ggml_get_type_traits(r.t);
        EXPECT_STREQ(tt->type_name, r.name);
        EXPECT_STREQ(ggml_type_name(r.t), r.name);
        EXPECT_EQ(tt->blck_size, r.blck);
        EXPECT_EQ(ggml_blck_size(r.t), r.blck);
        EXPECT_EQ(tt->type_size, r.size);
        EXPECT_TRUE(tt->is_quantized);
        EXPECT_TRUE(ggml_is_quantized(r.t));
        EXPECT_TRUE(loom::type_is_valid(r.t));
    }
}

// ---- round trips ----

// Normalised RMS error of the round trip on Gaussian data, at most (ggml's
// own test-quantize-fns allows 0.002 absolute on its cosine data; these are
// a little above what each type reaches, measured on 4096 values).
double round_trip_bound(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q4_1: return 0.10;
        case GGML_TYPE_Q5_0: return 0.06;
        case GGML_TYPE_Q5_1: return 0.05;
        case GGML_TYPE_Q2_K: return 0.40;
        case GGML_TYPE_Q3_K: return 0.20;
        case GGML_TYPE_Q4_K: return 0.10;
        case GGML_TYPE_Q5_K: return 0.05;
        case GGML_TYPE_Q6_K: return 0.025;
        default: return 0.0;
    }
}

TEST(QuantsK, RoundTripErrors) {
    for (unsigned seed : seeds()) {
        std::mt19937                    rng(seed);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float>              x(4096), y(4096), imatrix(4096);
        for (float & v : x) v = nd(rng);
        for (float & v : imatrix) v = 0.5f + std::fabs(nd(rng));
        double rms = 0.0;
        for (float v : x) rms += double(v) * v;
        rms = std::sqrt(rms / double(x.size()));
        for (ggml_type t : kWeights) {
            SCOPED_TRACE(ggml_type_name(t));
            for (const float * im : {static_cast<const float *>(nullptr), static_cast<const float *>(imatrix.data())}) {
                std::vector<uint8_t> q(ggml_row_size(t, 4096));
                ggml_quantize_chunk(t, x.data(), q.data(), 0, 1, 4096, im);
                ggml_get_type_traits(t)->to_float(q.data(), y.data(), 4096);
                double err = 0.0, amax = 0.0;
                for (size_t i = 0; i < x.size(); ++i) {
                    err += double(x[i] - y[i]) * double(x[i] - y[i]);
                    amax = std::max(amax, std::fabs(double(x[i] - y[i])));
                }
                err = std::sqrt(err / double(x.size())) / rms;
                EXPECT_LT(err, round_trip_bound(t)) << (im ? "with" : "without") << " an importance matrix";
                EXPECT_LT(amax, 8.0 * round_trip_bound(t) * rms);
            }
        }
    }
}

// ---- validation ----

TEST(QuantsK, ValidateRowDataNamesTheBadBlock) {
    std::vector<float> x(3 * 256);
    std::mt19937       rng(7);
    std::uniform_real_distribution<float> ud(-2.0f, 2.0f);
    for (float & v : x) v = ud(rng);
    struct Scale {
        ggml_type t;
        size_t    offset; // of an fp16 scale in the block
    };
    const Scale scales[] = {
        {GGML_TYPE_Q4_0, 0},  {GGML_TYPE_Q8_0, 0},
        {GGML_TYPE_Q4_1, 0},  {GGML_TYPE_Q4_1, 2},
        {GGML_TYPE_Q5_0, 0},  {GGML_TYPE_Q5_1, 0},
        {GGML_TYPE_Q5_1, 2},  {GGML_TYPE_Q2_K, offsetof(loom::block_q2_K, d)},
        {GGML_TYPE_Q2_K, offsetof(loom::block_q2_K, dmin)}, {GGML_TYPE_Q3_K, offsetof(loom::block_q3_K, d)},
        {GGML_TYPE_Q4_K, 0},  {GGML_TYPE_Q4_K, 2},
        {GGML_TYPE_Q5_K, 0},  {GGML_TYPE_Q5_K, 2},
        {GGML_TYPE_Q6_K, offsetof(loom::block_q6_K, d)},
    };
    for (const Scale & s : scales) {
        SCOPED_TRACE(std::string(ggml_type_name(s.t)) + " offset " + std::to_string(s.offset));
        const size_t         bs = ggml_type_size(s.t);
        std::vector<uint8_t> q(ggml_row_size(s.t, int64_t(x.size())));
        ggml_quantize_chunk(s.t, x.data(), q.data(), 0, 1, int64_t(x.size()), nullptr);
        EXPECT_TRUE(ggml_validate_row_data(s.t, q.data(), q.size()));
        {
            LogCapture log(true);
            EXPECT_FALSE(ggml_validate_row_data(s.t, q.data(), q.size() - 1)); // not whole blocks
            EXPECT_TRUE(log.contains("invalid size")) << log.text();
        }

        const size_t nblocks = q.size() / bs;
        const size_t bad     = nblocks / 2;
        for (uint16_t h : {uint16_t(0x7e00), uint16_t(0xfc00)}) { // NaN, -inf
            std::vector<uint8_t> b = q;
            std::memcpy(b.data() + bad * bs + s.offset, &h, 2);
            LogCapture log(true);
            EXPECT_FALSE(ggml_validate_row_data(s.t, b.data(), b.size()));
            EXPECT_TRUE(log.contains("block " + std::to_string(bad) + " of " + ggml_type_name(s.t))) << log.text();
            EXPECT_TRUE(log.contains(h == 0x7e00 ? "nan" : "inf")) << log.text();
        }
    }
    // Q8_K's scale is an f32.
    std::vector<uint8_t> q(ggml_row_size(GGML_TYPE_Q8_K, 768));
    ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(x.data(), q.data(), 768);
    EXPECT_TRUE(ggml_validate_row_data(GGML_TYPE_Q8_K, q.data(), q.size()));
    const float nan = NAN;
    std::memcpy(q.data() + 2 * sizeof(loom::block_q8_K), &nan, sizeof(nan));
    {
        LogCapture log(true);
        EXPECT_FALSE(ggml_validate_row_data(GGML_TYPE_Q8_K, q.data(), q.size()));
        EXPECT_TRUE(log.contains("block 2 of q8_K")) << log.text();
    }
    // As ggml, Q8_1 data is not validated but rejected.
    std::vector<uint8_t> q81(ggml_row_size(GGML_TYPE_Q8_1, 64));
    ggml_get_type_traits(GGML_TYPE_Q8_1)->from_float_ref(x.data(), q81.data(), 64);
    {
        LogCapture log(true);
        EXPECT_FALSE(ggml_validate_row_data(GGML_TYPE_Q8_1, q81.data(), q81.size()));
    }
}

// ---- the type values ----

TEST(QuantsK, RemovedSlotsAnswerAsGgml) {
    const std::pair<int, const char *> removed[] = {
        {4, "DEPRECATED"},
        {5, "DEPRECATED"},
        {31, "TYPE_Q4_0_4_4 REMOVED, use Q4_0 with runtime repacking"},
        {32, "TYPE_Q4_0_4_8 REMOVED, use Q4_0 with runtime repacking"},
        {33, "TYPE_Q4_0_8_8 REMOVED, use Q4_0 with runtime repacking"},
        {36, "TYPE_IQ4_NL_4_4 REMOVED, use IQ4_NL with runtime repacking"},
        {37, "TYPE_IQ4_NL_4_8 REMOVED, use IQ4_NL with runtime repacking"},
        {38, "TYPE_IQ4_NL_8_8 REMOVED, use IQ4_NL with runtime repacking"},
    };
    for (const auto & [t, name] : removed) {
        const auto               type = ggml_type(t);
        const ggml_type_traits * tt   = ggml_get_type_traits(type);
        EXPECT_STREQ(tt->type_name, name);
        EXPECT_STREQ(ggml_type_name(type), name);
        EXPECT_EQ(tt->blck_size, 0);
        EXPECT_EQ(tt->type_size, 0u);
        EXPECT_FALSE(tt->is_quantized);
        EXPECT_EQ(tt->to_float, nullptr);
        EXPECT_EQ(ggml_blck_size(type), 0);
        EXPECT_EQ(ggml_type_size(type), 0u);
        EXPECT_FALSE(loom::type_is_valid(t));
        LogCapture log(true);
        EXPECT_FALSE(ggml_validate_row_data(type, "abcd", 4));
    }
    // Every value answers, without aborting.
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const auto type = ggml_type(t);
        ASSERT_NE(ggml_get_type_traits(type), nullptr);
        ASSERT_NE(ggml_get_type_traits(type)->type_name, nullptr);
        EXPECT_STREQ(ggml_type_name(type), ggml_get_type_traits(type)->type_name);
        EXPECT_EQ(ggml_blck_size(type), ggml_get_type_traits(type)->blck_size);
        EXPECT_EQ(loom::type_is_valid(t), ggml_blck_size(type) > 0);
        ASSERT_NE(ggml_get_type_traits_cpu(type), nullptr);
    }
}

TEST(QuantsK, ValuesOutsideTheEnumAbort) {
    EXPECT_DEATH(ggml_blck_size(ggml_type(GGML_TYPE_COUNT)), "ggml_blck_size.*43");
    EXPECT_DEATH(ggml_get_type_traits(ggml_type(-1)), "ggml_get_type_traits.*-1");
    EXPECT_DEATH(ggml_get_type_traits_cpu(ggml_type(GGML_TYPE_COUNT)), "ggml_get_type_traits_cpu.*43");
    EXPECT_STREQ(ggml_type_name(ggml_type(GGML_TYPE_COUNT)), "NONE");
    // Quantizing into a removed slot is a broken precondition too.
    std::vector<float> x(256, 1.0f);
    std::vector<uint8_t> q(1024);
    EXPECT_DEATH(ggml_quantize_chunk(ggml_type(31), x.data(), q.data(), 0, 1, 256, nullptr), "ggml_quantize_chunk");
}

TEST(QuantsK, RequiresImatrix) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const auto type = ggml_type(t);
        EXPECT_EQ(ggml_quantize_requires_imatrix(type),
                  type == GGML_TYPE_IQ2_XXS || type == GGML_TYPE_IQ2_XS || type == GGML_TYPE_IQ1_S)
            << t;
        ggml_quantize_init(type);
    }
    ggml_quantize_free();
    ggml_quantize_free();
}

TEST(QuantsK, FtypeToType) {
    EXPECT_EQ(GGML_FTYPE_MOSTLY_Q4_K, 12);
    EXPECT_EQ(GGML_FTYPE_MOSTLY_BF16, 24);
    EXPECT_EQ(GGML_FTYPE_MOSTLY_Q2_0, 28);
    EXPECT_EQ(ggml_ftype_to_ggml_type(GGML_FTYPE_ALL_F32), GGML_TYPE_F32);
    EXPECT_EQ(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_Q4_1), GGML_TYPE_Q4_1);
    EXPECT_EQ(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_Q5_1), GGML_TYPE_Q5_1);
    EXPECT_EQ(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_Q2_K), GGML_TYPE_Q2_K);
    EXPECT_EQ(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_Q6_K), GGML_TYPE_Q6_K);
    EXPECT_EQ(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_IQ4_XS), GGML_TYPE_IQ4_XS);
    EXPECT_EQ(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_BF16), GGML_TYPE_BF16);
    EXPECT_EQ(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_Q2_0), GGML_TYPE_Q2_0);
    EXPECT_DEATH(ggml_ftype_to_ggml_type(GGML_FTYPE_UNKNOWN), "ggml_ftype_to_ggml_type");
    EXPECT_DEATH(ggml_ftype_to_ggml_type(GGML_FTYPE_MOSTLY_Q4_1_SOME_F16), "ggml_ftype_to_ggml_type");
}

// ---- the CPU's traits ----

std::vector<double> dequantized(ggml_type t, const void * q, int64_t n) {
    std::vector<float> f(static_cast<size_t>(n));
    if (t == GGML_TYPE_Q8_K) {
        loom::dequantize_row_q8_K(q, f.data(), n);
    } else if (t == GGML_TYPE_Q8_1) {
        const auto * b = static_cast<const loom::block_q8_1 *>(q);
        for (int64_t i = 0; i < n; ++i) {
            f[size_t(i)] = ggml_fp16_to_fp32(b[i / 32].d) * float(b[i / 32].qs[i % 32]);
        }
    } else if (t == GGML_TYPE_F32) {
        std::memcpy(f.data(), q, size_t(n) * sizeof(float));
    } else {
        ggml_get_type_traits(t)->to_float(q, f.data(), n);
    }
    return std::vector<double>(f.begin(), f.end());
}

// The types without a dot product of their own take ggml's vec_dot_type and
// a dot product of the decoded rows; ggml's public table gives F32 no
// to_float (programs read a to_float as "this type needs converting").
TEST(QuantsK, CpuTraitsOfTheOtherTypes) {
    struct Want {
        ggml_type t, dot_type;
        bool      from_float;
    };
    const Want wants[] = {
        {GGML_TYPE_IQ2_XXS, GGML_TYPE_Q8_K, false}, {GGML_TYPE_IQ2_XS, GGML_TYPE_Q8_K, false},
        {GGML_TYPE_IQ2_S, GGML_TYPE_Q8_K, false},   {GGML_TYPE_IQ3_XXS, GGML_TYPE_Q8_K, false},
        {GGML_TYPE_IQ3_S, GGML_TYPE_Q8_K, false},   {GGML_TYPE_IQ1_S, GGML_TYPE_Q8_K, false},
        {GGML_TYPE_IQ1_M, GGML_TYPE_Q8_K, false},   {GGML_TYPE_IQ4_NL, GGML_TYPE_Q8_0, true},
        {GGML_TYPE_IQ4_XS, GGML_TYPE_Q8_K, true},   {GGML_TYPE_TQ1_0, GGML_TYPE_Q8_K, true},
        {GGML_TYPE_TQ2_0, GGML_TYPE_Q8_K, true},    {GGML_TYPE_MXFP4, GGML_TYPE_Q8_0, true},
        {GGML_TYPE_NVFP4, GGML_TYPE_Q8_0, true},    {GGML_TYPE_Q1_0, GGML_TYPE_Q8_0, true},
        {GGML_TYPE_Q2_0, GGML_TYPE_Q8_0, true},
    };
    EXPECT_EQ(ggml_get_type_traits(GGML_TYPE_F32)->to_float, nullptr);
    EXPECT_EQ(ggml_get_type_traits(GGML_TYPE_F32)->from_float_ref, nullptr);
    EXPECT_NE(ggml_get_type_traits_cpu(GGML_TYPE_F32)->from_float, nullptr);
    EXPECT_EQ(ggml_get_type_traits_cpu(GGML_TYPE_Q8_1)->vec_dot_type, GGML_TYPE_Q8_1);
    ggml_cpu_init();
    constexpr int      n = 768;
    std::mt19937       rng(911);
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    std::vector<float> x(n), y(n), imatrix(n, 1.0f);
    for (int i = 0; i < n; ++i) {
        x[i] = ud(rng) + (i % 53 == 0 ? 4.0f : 0.0f);
        y[i] = ud(rng);
    }
    for (const Want & w : wants) {
        SCOPED_TRACE(ggml_type_name(w.t));
        const ggml_type_traits_cpu * ct = ggml_get_type_traits_cpu(w.t);
        ASSERT_NE(ct->vec_dot, nullptr);
        EXPECT_EQ(ct->vec_dot_type, w.dot_type);
        EXPECT_EQ(ct->nrows, 1);
        EXPECT_EQ(ct->from_float != nullptr, w.from_float);
        std::vector<uint8_t> qx(ggml_row_size(w.t, n)), qy(ggml_row_size(w.dot_type, n));
        ggml_quantize_init(w.t);
        ASSERT_EQ(ggml_quantize_chunk(w.t, x.data(), qx.data(), 0, 1, n, imatrix.data()), qx.size());
        ggml_get_type_traits_cpu(w.dot_type)->from_float(y.data(), qy.data(), n);
        const std::vector<double> dx = dequantized(w.t, qx.data(), n), dy = dequantized(w.dot_type, qy.data(), n);
        double want = 0.0, mag = 0.0;
        for (int i = 0; i < n; ++i) {
            want += dx[i] * dy[i];
            mag += std::fabs(dx[i] * dy[i]);
        }
        float got = NAN;
        ct->vec_dot(n, &got, 0, qx.data(), 0, qy.data(), 0, 1);
        EXPECT_NEAR(got, want, 1e-6 * mag + 1e-6);
        EXPECT_GT(mag, 1.0) << "the rows are not empty";
    }
}

TEST(QuantsK, CpuTraitsVecDot) {
    struct Want {
        ggml_type t, dot_type;
    };
    const Want wants[] = {{GGML_TYPE_F32, GGML_TYPE_F32},   {GGML_TYPE_F16, GGML_TYPE_F16},
                          {GGML_TYPE_BF16, GGML_TYPE_BF16}, {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0},
                          {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0}, {GGML_TYPE_Q4_1, GGML_TYPE_Q8_1},
                          {GGML_TYPE_Q5_0, GGML_TYPE_Q8_0}, {GGML_TYPE_Q5_1, GGML_TYPE_Q8_1},
                          {GGML_TYPE_Q2_K, GGML_TYPE_Q8_K}, {GGML_TYPE_Q3_K, GGML_TYPE_Q8_K},
                          {GGML_TYPE_Q4_K, GGML_TYPE_Q8_K}, {GGML_TYPE_Q5_K, GGML_TYPE_Q8_K},
                          {GGML_TYPE_Q6_K, GGML_TYPE_Q8_K}};
    ggml_cpu_init();
    constexpr int n = 1024;
    for (unsigned seed : seeds()) {
        std::mt19937                          rng(seed);
        std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
        std::vector<float>                    x(n), y(n);
        for (int i = 0; i < n; ++i) {
            x[i] = ud(rng) + (i % 61 == 0 ? 6.0f : 0.0f);
            y[i] = ud(rng);
        }
        for (const Want & w : wants) {
            SCOPED_TRACE(ggml_type_name(w.t));
            const ggml_type_traits_cpu * ct = ggml_get_type_traits_cpu(w.t);
            ASSERT_NE(ct->vec_dot, nullptr);
            ASSERT_NE(ct->from_float, nullptr);
            EXPECT_EQ(ct->vec_dot_type, w.dot_type);
            EXPECT_EQ(ct->nrows, 1);
            std::vector<uint8_t> qx(ggml_row_size(w.t, n)), qy(ggml_row_size(w.dot_type, n));
            ct->from_float(x.data(), qx.data(), n);
            ggml_get_type_traits_cpu(w.dot_type)->from_float(y.data(), qy.data(), n);
            const std::vector<double> dx = dequantized(w.t, qx.data(), n), dy = dequantized(w.dot_type, qy.data(), n);
            double want = 0.0, mag = 0.0;
            for (int i = 0; i < n; ++i) {
                want += dx[i] * dy[i];
                mag += std::fabs(dx[i] * dy[i]);
            }
            float got = NAN;
            ct->vec_dot(n, &got, 0, qx.data(), 0, qy.data(), 0, 1);
            // Products of the scales (two or three roundings) and an f32 sum
            // over the blocks; Q4_1/Q5_1 also take the rounded f16 of d sum(q).
            EXPECT_NEAR(got, want, 2e-5 * mag + 1e-3 * (w.dot_type == GGML_TYPE_Q8_1 ? mag / 32 : 0.0));
        }
    }
    // Activation types convert but have no dot product of their own.
    EXPECT_EQ(ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->vec_dot, nullptr);
    EXPECT_NE(ggml_get_type_traits_cpu(GGML_TYPE_Q8_1)->from_float, nullptr);
}

// ---- the CPU computes with every type ----

// A quantized tensor of random values and the doubles it holds.
struct Weights {
    ggml_tensor *       t;
    std::vector<double> values; // dequantized, in ggml's order
};

// The values of k activations of type op (Q8_K, Q8_1 or Q8_0).
std::vector<double> quantized_activations(ggml_type op, const uint8_t * q, int64_t k) {
    std::vector<double> out(static_cast<size_t>(k));
    if (op == GGML_TYPE_Q8_K) {
        std::vector<float> f(static_cast<size_t>(k));
        loom::dequantize_row_q8_K(q, f.data(), k);
        std::copy(f.begin(), f.end(), out.begin());
        return out;
    }
    // Q8_0 and Q8_1 blocks start with the half d (Q8_1: then s).
    const size_t bs  = ggml_type_size(op);
    const size_t off = op == GGML_TYPE_Q8_1 ? 4 : 2;
    for (int64_t i = 0; i < k / 32; ++i) {
        uint16_t d;
        std::memcpy(&d, q + size_t(i) * bs, sizeof(d));
        for (int j = 0; j < 32; ++j) {
            out[size_t(32 * i + j)] =
                double(ggml_fp16_to_fp32(d)) * double(reinterpret_cast<const int8_t *>(q + size_t(i) * bs + off)[j]);
        }
    }
    return out;
}

Weights make_weights(ggml_context * ctx, ggml_type type, int64_t k, int64_t rows, int64_t ne2, std::mt19937 & rng) {
    Weights w;
    w.t = ggml_new_tensor_3d(ctx, type, k, rows, ne2);
    std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
    std::vector<float>                    x(size_t(k * rows * ne2));
    for (size_t i = 0; i < x.size(); ++i) {
        x[i] = ud(rng) * (i % 37 == 3 ? 5.0f : 1.0f);
    }
    ggml_quantize_chunk(type, x.data(), w.t->data, 0, rows * ne2, k, nullptr);
    w.values = dequantized(type, w.t->data, k * rows * ne2);
    return w;
}

TEST(QuantsK, MulMatEveryTypeAgainstDouble) {
    const int64_t K = 512, M = 19;
    for (ggml_type type : kWeights) {
        for (int64_t N : {1, 3, 7}) {
            for (bool transposed_b : {false, true}) {
                SCOPED_TRACE(std::string(ggml_type_name(type)) + " N=" + std::to_string(N) +
                             (transposed_b ? " b transposed" : ""));
                Context      ctx;
                std::mt19937 rng(unsigned(N * 31 + int(type)));
                // a: 2 matrices; b: 4 (broadcast r2 = 2).
                Weights       a = make_weights(ctx, type, K, M, 2, rng);
                ggml_tensor * b;
                std::uniform_real_distribution<float> ud(-1.0f, 1.0f);
                if (transposed_b) {
                    // b [K, N, 4] viewed from a [N, K, 4] tensor: values K * 4 bytes... apart.
                    ggml_tensor * bt = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, N, K, 4);
                    for (int64_t i = 0; i < ggml_nelements(bt); ++i) static_cast<float *>(bt->data)[i] = ud(rng);
                    b = ggml_permute(ctx, bt, 1, 0, 2, 3);
                } else {
                    b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, N, 4);
                    for (int64_t i = 0; i < ggml_nelements(b); ++i) static_cast<float *>(b->data)[i] = ud(rng);
                }
                auto bval = [&](int64_t k, int64_t n, int64_t i2) {
                    float v;
                    std::memcpy(&v, static_cast<const char *>(b->data) + k * b->nb[0] + n * b->nb[1] + i2 * b->nb[2],
                                sizeof(v));
                    return double(v);
                };
                ggml_tensor * out = ggml_mul_mat(ctx, a.t, b);
                ASSERT_EQ(out->ne[0], M);
                // With the SIMD kernels of the type (KernelTable::gemv_quant),
                // b is quantized to the type's vec_dot_type first, as ggml
                // does: the reference then takes those values.
                const ggml_type op = loom::cpu::quant_operand_type(type);
                std::vector<double> bq(size_t(K * N * 4));
                // Q8_1: each block's fp16 sum s, which the min of the Q4_1 and
                // Q5_1 blocks meets, is within 2^-11 |s| of the sum of its
                // values (the bound adds 2^-11 |s| max |a| per block).
                std::vector<double> q_sums(size_t(K / 32 * N * 4), 0.0);
                for (int64_t i2 = 0; i2 < 4; ++i2) {
                    for (int64_t n = 0; n < N; ++n) {
                        std::vector<float> col(static_cast<size_t>(K));
                        for (int64_t k = 0; k < K; ++k) col[size_t(k)] = float(bval(k, n, i2));
                        std::vector<uint8_t> q(ggml_row_size(op, K));
                        ggml_get_type_traits_cpu(op)->from_float(col.data(), q.data(), K);
                        const std::vector<double> v = quantized_activations(op, q.data(), K);
                        std::copy(v.begin(), v.end(), bq.begin() + (i2 * N + n) * K);
                        for (int64_t i = 0; op == GGML_TYPE_Q8_1 && i < K / 32; ++i) {
                            uint16_t sh;
                            std::memcpy(&sh, q.data() + size_t(i) * ggml_type_size(op) + 2, sizeof(sh));
                            q_sums[size_t((i2 * N + n) * (K / 32) + i)] = std::fabs(double(ggml_fp16_to_fp32(sh)));
                        }
                    }
                }
                auto reference = [&](bool quantized_b, std::vector<double> & want, std::vector<double> & mag) {
                    want.assign(size_t(M * N * 4), 0.0);
                    mag.assign(size_t(M * N * 4), 0.0);
                    for (int64_t i2 = 0; i2 < 4; ++i2) {
                        for (int64_t n = 0; n < N; ++n) {
                            for (int64_t m = 0; m < M; ++m) {
                                double s = 0.0, s_abs = 0.0;
                                double amax = 0.0;
                                for (int64_t k = 0; k < K; ++k) {
                                    const double bv = quantized_b ? bq[size_t((i2 * N + n) * K + k)] : bval(k, n, i2);
                                    const double av = a.values[size_t(((i2 / 2) * M + m) * K + k)];
                                    const double p  = av * bv;
                                    s += p;
                                    s_abs += std::fabs(p);
                                    amax = std::max(amax, std::fabs(av));
                                    if (quantized_b && k % 32 == 31) {
                                        // 2^-11 K / 2^-24 K: in the units of the bound below.
                                        s_abs += std::ldexp(q_sums[size_t((i2 * N + n) * (K / 32) + k / 32)] * amax, 13) / double(K);
                                        amax = 0.0;
                                    }
                                }
                                want[size_t((i2 * N + n) * M + m)] = s;
                                mag[size_t((i2 * N + n) * M + m)]  = s_abs;
                            }
                        }
                    }
                };
                std::vector<float> first;
                for (const RunMode & mode : run_modes()) {
                    SCOPED_TRACE(describe(mode));
                    std::vector<double> want, mag;
                    reference(!mode.use_ref && loom::cpu::best_kernels().gemv_quant[type] != nullptr, want, mag);
                    std::memset(out->data, 0xff, ggml_nbytes(out));
                    ASSERT_EQ(compute(ctx, out, mode), GGML_STATUS_SUCCESS);
                    const auto * got = static_cast<const float *>(out->data);
                    for (size_t i = 0; i < want.size(); ++i) {
                        // An f32 dot product of K exact terms.
                        ASSERT_NEAR(got[i], want[i], double(K) * 0x1p-24 * mag[i] + 1e-30) << "element " << i;
                    }
                    std::vector<float> v(got, got + want.size());
                    if (first.empty()) {
                        first = v;
                    } else if (!mode.use_ref) {
                        EXPECT_EQ(std::memcmp(first.data(), v.data(), v.size() * sizeof(float)), 0)
                            << "the thread count changed the bits";
                    }
                }
            }
        }
    }
}

TEST(QuantsK, GetRowsAndCpyToF32) {
    for (ggml_type type : kWeights) {
        SCOPED_TRACE(ggml_type_name(type));
        Context       ctx;
        std::mt19937  rng{unsigned(type)};
        Weights       a   = make_weights(ctx, type, 512, 7, 1, rng);
        ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 5);
        const int32_t rows[5] = {6, 0, 3, 3, 1};
        std::memcpy(idx->data, rows, sizeof(rows));
        ggml_tensor * g = ggml_get_rows(ctx, a.t, idx);
        ggml_tensor * c = ggml_cpy(ctx, a.t, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 512, 7));
        for (const RunMode & mode : run_modes()) {
            SCOPED_TRACE(describe(mode));
            ASSERT_EQ(compute(ctx, {g, c}, mode), GGML_STATUS_SUCCESS);
            for (int r = 0; r < 5; ++r) {
                for (int k = 0; k < 512; ++k) {
                    ASSERT_EQ(double(static_cast<const float *>(g->data)[r * 512 + k]),
                              a.values[size_t(rows[r] * 512 + k)]);
                }
            }
            for (size_t i = 0; i < a.values.size(); ++i) {
                ASSERT_EQ(double(static_cast<const float *>(c->data)[i]), a.values[i]);
            }
        }
    }
}

TEST(QuantsK, CpyAndSetRowsFromF32) {
    for (ggml_type type : kWeights) {
        SCOPED_TRACE(ggml_type_name(type));
        Context                               ctx;
        std::mt19937                          rng(int(type) + 100);
        std::uniform_real_distribution<float> ud(-3.0f, 3.0f);
        // The source is a transposed view: dst row r is column r of src_t.
        ggml_tensor * src_t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 5, 256);
        for (int64_t i = 0; i < ggml_nelements(src_t); ++i) static_cast<float *>(src_t->data)[i] = ud(rng);
        ggml_tensor * src = ggml_transpose(ctx, src_t); // [256, 5]
        ggml_tensor * c   = ggml_cpy(ctx, src, ggml_new_tensor_2d(ctx, type, 256, 5));

        ggml_tensor * rows   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 2);
        for (int64_t i = 0; i < ggml_nelements(rows); ++i) static_cast<float *>(rows->data)[i] = ud(rng);
        ggml_tensor * target = ggml_new_tensor_2d(ctx, type, 256, 4);
        std::memset(target->data, 0, ggml_nbytes(target));
        ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I64, 2);
        const int64_t where[2] = {3, 1};
        std::memcpy(ids->data, where, sizeof(where));
        ggml_tensor * s = ggml_set_rows(ctx, target, rows, ids);

        const size_t         rs = ggml_row_size(type, 256);
        std::vector<uint8_t> want(5 * rs), want_rows(2 * rs);
        for (int r = 0; r < 5; ++r) {
            std::vector<float> col(256);
            for (int k = 0; k < 256; ++k) col[size_t(k)] = static_cast<const float *>(src_t->data)[k * 5 + r];
            ggml_get_type_traits(type)->from_float_ref(col.data(), want.data() + r * rs, 256);
        }
        ggml_get_type_traits(type)->from_float_ref(static_cast<const float *>(rows->data), want_rows.data(), 512);
        for (const RunMode & mode : run_modes()) {
            SCOPED_TRACE(describe(mode));
            ASSERT_EQ(compute(ctx, {c, s}, mode), GGML_STATUS_SUCCESS);
            EXPECT_TRUE(same_bytes(static_cast<const uint8_t *>(c->data), want.data(), want.size(), rs));
            const auto * t = static_cast<const uint8_t *>(s->data);
            EXPECT_TRUE(same_bytes(t + 3 * rs, want_rows.data(), rs, rs));
            EXPECT_TRUE(same_bytes(t + 1 * rs, want_rows.data() + rs, rs, rs));
        }
    }
}

TEST(QuantsK, CpuClaimsTheNewTypes) {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ASSERT_NE(cpu, nullptr);
    ggml_init_params params = {ggml_tensor_overhead() * 256, nullptr, true};
    ggml_context *   ctx    = ggml_init(params);
    for (ggml_type type : kWeights) {
        ggml_tensor * a = ggml_new_tensor_2d(ctx, type, 256, 4);
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 3);
        EXPECT_TRUE(ggml_backend_dev_supports_op(cpu, ggml_mul_mat(ctx, a, b))) << ggml_type_name(type);
        ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 2);
        EXPECT_TRUE(ggml_backend_dev_supports_op(cpu, ggml_get_rows(ctx, a, idx))) << ggml_type_name(type);
        EXPECT_TRUE(ggml_backend_dev_supports_op(cpu, ggml_cpy(ctx, b, ggml_new_tensor_2d(ctx, type, 256, 3))));
        EXPECT_TRUE(ggml_backend_dev_supports_op(cpu, ggml_cpy(ctx, a, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 4))));
        // Block to block is not a conversion the CPU makes.
        EXPECT_FALSE(ggml_backend_dev_supports_op(cpu, ggml_cpy(ctx, a, ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 256, 4))));
    }
    // Q8_1 and Q8_K have no to_float: no products with them as weights.
    for (ggml_type type : {GGML_TYPE_Q8_1, GGML_TYPE_Q8_K}) {
        ggml_tensor * a = ggml_new_tensor_2d(ctx, type, 256, 4);
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 256, 3);
        EXPECT_FALSE(ggml_backend_dev_supports_op(cpu, ggml_mul_mat(ctx, a, b))) << ggml_type_name(type);
    }
    ggml_free(ctx);
}

} // namespace
