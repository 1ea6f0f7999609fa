// The i-quant, ternary, FP4, one/two-bit and F64 types against ggml 0.25.1.
//
// tests/data/quants-iq/<type>.bin hold, for inputs both sides compute
// (data/quants-iq/inputs.h), the blocks ggml_quantize_chunk made (with an
// importance matrix), their floats by ggml's to_float, the bytes of ggml's
// from_float_ref where it has one, and random valid blocks with their floats.
// Decoding must give ggml's floats bit for bit, encoding ggml's bytes: the
// reference encoders, and ggml_quantize_chunk's with the importance matrix
// (loom::quantize_chunk_iq for the i-quants, from_float for the others).

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/types/i_quants.h"
#include "core/types/iq_search.h"
#include "core/types/iq_tables.h"
#include "core/types/other.h"
#include "data/quants-iq/inputs.h"
#include "ggml.h"

using namespace quants_iq;

namespace {

const ggml_type kTypes[] = {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ2_S, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S,
                            GGML_TYPE_IQ1_S,   GGML_TYPE_IQ1_M,  GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS, GGML_TYPE_TQ1_0,
                            GGML_TYPE_TQ2_0,   GGML_TYPE_MXFP4,  GGML_TYPE_NVFP4,  GGML_TYPE_Q1_0,   GGML_TYPE_Q2_0};

// ggml's reference data for one type.
struct Reference {
    int32_t              type = -1, per_row = 0, rows = 0, has_ref = 0, nrandom = 0;
    std::vector<uint8_t> chunk, ref, random;
    std::vector<float>   chunk_f, random_f;
};

bool read_reference(ggml_type type, Reference & r) {
    const std::string path = std::string(LOOM_TEST_DATA) + "/quants-iq/" + ggml_type_name(type) + ".bin";
    FILE *            f    = std::fopen(path.c_str(), "rb");
    if (!f) return false;
    char    magic[4];
    int32_t head[5];
    bool    ok = std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, kMagic, 4) == 0 &&
              std::fread(head, sizeof head, 1, f) == 1;
    if (ok) {
        r.type    = head[0];
        r.per_row = head[1];
        r.rows    = head[2];
        r.has_ref = head[3];
        r.nrandom = head[4];
        const size_t row = ggml_row_size(type, r.per_row);
        r.chunk.resize(row * size_t(r.rows));
        r.chunk_f.resize(size_t(r.per_row) * size_t(r.rows));
        r.ref.resize(r.has_ref ? r.chunk.size() : 0);
        r.random.resize(size_t(r.nrandom) * ggml_type_size(type));
        r.random_f.resize(size_t(r.nrandom) * size_t(ggml_blck_size(type)));
        auto get = [&](void * p, size_t n) { return n == 0 || std::fread(p, 1, n, f) == n; };
        ok = get(r.chunk.data(), r.chunk.size()) && get(r.chunk_f.data(), r.chunk_f.size() * 4) &&
             get(r.ref.data(), r.ref.size()) && get(r.random.data(), r.random.size()) &&
             get(r.random_f.data(), r.random_f.size() * 4) && std::fgetc(f) == EOF;
    }
    std::fclose(f);
    return ok && r.type == int32_t(type);
}

// The first index where two float arrays differ in bits, or -1.
long first_bit_difference(const std::vector<float> & a, const std::vector<float> & b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return long(i);
    }
    return -1;
}

long first_byte_difference(const std::vector<uint8_t> & a, const std::vector<uint8_t> & b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] != b[i]) return long(i);
    }
    return -1;
}

std::vector<float> decode(ggml_type type, const std::vector<uint8_t> & bytes) {
    const ggml_type_traits * tr = ggml_get_type_traits(type);
    const int64_t            n  = int64_t(bytes.size() / tr->type_size) * tr->blck_size;
    std::vector<float>       y(static_cast<size_t>(n));
    tr->to_float(bytes.data(), y.data(), n);
    return y;
}

std::vector<float> inputs() {
    std::vector<float> x(static_cast<size_t>(kRows * kPerRow));
    for (size_t i = 0; i < x.size(); ++i) x[i] = input_value(uint32_t(i));
    return x;
}

std::vector<float> imatrix() {
    std::vector<float> w(static_cast<size_t>(kPerRow));
    for (size_t j = 0; j < w.size(); ++j) w[j] = imatrix_value(uint32_t(j));
    return w;
}

class PerType : public ::testing::TestWithParam<ggml_type> {};

std::string type_param_name(const ::testing::TestParamInfo<ggml_type> & info) {
    return ggml_type_name(info.param);
}

TEST_P(PerType, DecodesGgmlBlocksToGgmlFloats) {
    const ggml_type type = GetParam();
    Reference       r;
    ASSERT_TRUE(read_reference(type, r)) << ggml_type_name(type);
    EXPECT_EQ(first_bit_difference(decode(type, r.chunk), r.chunk_f), -1) << "quantized blocks";
    EXPECT_EQ(first_bit_difference(decode(type, r.random), r.random_f), -1) << "random blocks";
}

TEST_P(PerType, ReferenceEncoderGivesGgmlBytes) {
    const ggml_type type = GetParam();
    Reference       r;
    ASSERT_TRUE(read_reference(type, r));
    const ggml_type_traits * tr = ggml_get_type_traits(type);
    ASSERT_EQ(r.has_ref != 0, tr->from_float_ref != nullptr) << "a reference encoder exactly where ggml has one";
    if (!r.has_ref) GTEST_SKIP() << "ggml has no reference encoder for " << ggml_type_name(type);
    const std::vector<float> x = inputs();
    std::vector<uint8_t>     y(r.ref.size(), 0xa5);
    tr->from_float_ref(x.data(), y.data(), int64_t(x.size()));
    EXPECT_EQ(first_byte_difference(y, r.ref), -1);
}

TEST_P(PerType, ChunkWithImatrixGivesGgmlBytes) {
    const ggml_type type = GetParam();
    Reference       r;
    ASSERT_TRUE(read_reference(type, r));
    const std::vector<float> x = inputs(), w = imatrix();
    std::vector<uint8_t>     y(r.chunk.size(), 0xa5);
    size_t                   written = 0;
    if (!loom::quantize_chunk_iq(type, x.data(), y.data(), kRows, kPerRow, w.data(), &written)) {
        // the chunk of the other types is their reference encoder, row by row
        const ggml_type_traits * tr = ggml_get_type_traits(type);
        ASSERT_NE(tr->from_float_ref, nullptr);
        tr->from_float_ref(x.data(), y.data(), int64_t(x.size()));
        written = y.size();
    }
    EXPECT_EQ(written, r.chunk.size());
    EXPECT_EQ(first_byte_difference(y, r.chunk), -1);
}

// The public entry point: ggml_quantize_chunk with the importance matrix
// gives ggml's blocks, also for a chunk that starts at row 1; the blocks
// validate, and a block whose scale is made NaN does not.
TEST_P(PerType, PublicChunkGivesGgmlBytesAndValidates) {
    const ggml_type type = GetParam();
    Reference       r;
    ASSERT_TRUE(read_reference(type, r));
    const std::vector<float> x = inputs(), w = imatrix();
    std::vector<uint8_t>     y(r.chunk.size(), 0xa5);
    ggml_quantize_init(type);
    const size_t row_size = ggml_row_size(type, kPerRow);
    EXPECT_EQ(ggml_quantize_chunk(type, x.data(), y.data(), 0, 1, kPerRow, w.data()), row_size);
    EXPECT_EQ(ggml_quantize_chunk(type, x.data(), y.data(), kPerRow, kRows - 1, kPerRow, w.data()),
              row_size * size_t(kRows - 1));
    EXPECT_EQ(first_byte_difference(y, r.chunk), -1);
    EXPECT_TRUE(ggml_validate_row_data(type, y.data(), y.size()));
    if (type == GGML_TYPE_NVFP4) {
        return; // every scale byte is a number
    }
    // Make the first block's scale NaN: an fp16 d at the offset validate
    // reads (the exponent byte for MXFP4; IQ1_M's spread scale).
    std::vector<uint8_t> bad = y;
    const size_t blk = ggml_type_size(type), last = bad.size() / blk - 1;
    uint8_t * b = bad.data() + last * blk;
    if (type == GGML_TYPE_MXFP4) {
        b[0] = 0xff;
    } else if (type == GGML_TYPE_IQ1_M) {
        for (int i = 0; i < 4; ++i) b[blk - 8 + 2 * i + 1] |= 0xf0; // top nibbles of the four scale words
    } else if (type == GGML_TYPE_TQ1_0 || type == GGML_TYPE_TQ2_0) {
        b[blk - 1] = 0x7e; // d is the last member
        b[blk - 2] = 0x01;
    } else {
        b[1] = 0x7e; // d first: 0x7e01 is a NaN
        b[0] = 0x01;
    }
    EXPECT_FALSE(ggml_validate_row_data(type, bad.data(), bad.size()));
}

INSTANTIATE_TEST_SUITE_P(Types, PerType, ::testing::ValuesIn(kTypes), type_param_name);

} // namespace

namespace {

struct Row {
    ggml_type   type;
    const char *name;
    int64_t     blck;
    size_t      size;
    bool        has_from_float;
    ggml_type   vec_dot; // ggml-cpu's type_traits_cpu
};

const Row kTypeRows[] = {
    {GGML_TYPE_IQ2_XXS, "iq2_xxs", 256, 66, false, GGML_TYPE_Q8_K},
    {GGML_TYPE_IQ2_XS, "iq2_xs", 256, 74, false, GGML_TYPE_Q8_K},
    {GGML_TYPE_IQ2_S, "iq2_s", 256, 82, true, GGML_TYPE_Q8_K},
    {GGML_TYPE_IQ3_XXS, "iq3_xxs", 256, 98, true, GGML_TYPE_Q8_K},
    {GGML_TYPE_IQ3_S, "iq3_s", 256, 110, true, GGML_TYPE_Q8_K},
    {GGML_TYPE_IQ1_S, "iq1_s", 256, 50, false, GGML_TYPE_Q8_K},
    {GGML_TYPE_IQ1_M, "iq1_m", 256, 56, false, GGML_TYPE_Q8_K},
    {GGML_TYPE_IQ4_NL, "iq4_nl", 32, 18, true, GGML_TYPE_Q8_0},
    {GGML_TYPE_IQ4_XS, "iq4_xs", 256, 136, true, GGML_TYPE_Q8_K},
    {GGML_TYPE_TQ1_0, "tq1_0", 256, 54, true, GGML_TYPE_Q8_K},
    {GGML_TYPE_TQ2_0, "tq2_0", 256, 66, true, GGML_TYPE_Q8_K},
    {GGML_TYPE_MXFP4, "mxfp4", 32, 17, true, GGML_TYPE_Q8_0},
    {GGML_TYPE_NVFP4, "nvfp4", 64, 36, true, GGML_TYPE_Q8_0},
    {GGML_TYPE_Q1_0, "q1_0", 128, 18, true, GGML_TYPE_Q8_0},
    {GGML_TYPE_Q2_0, "q2_0", 64, 18, true, GGML_TYPE_Q8_0},
};

TEST(QuantsIq, TypeRowsAreGgmls) {
    for (const Row & r : kTypeRows) {
        SCOPED_TRACE(r.name);
        const ggml_type_traits * tr = ggml_get_type_traits(r.type);
        EXPECT_STREQ(ggml_type_name(r.type), r.name);
        EXPECT_EQ(ggml_blck_size(r.type), r.blck);
        EXPECT_EQ(ggml_type_size(r.type), r.size);
        EXPECT_TRUE(ggml_is_quantized(r.type));
        EXPECT_NE(tr->to_float, nullptr);
        EXPECT_EQ(tr->from_float_ref != nullptr, r.has_from_float);
        EXPECT_EQ(loom::iq_vec_dot_type(r.type), r.vec_dot);
    }
    // F64: 8 bytes a value, and like ggml no conversion to or from float
    const ggml_type_traits * f64 = ggml_get_type_traits(GGML_TYPE_F64);
    EXPECT_STREQ(ggml_type_name(GGML_TYPE_F64), "f64");
    EXPECT_EQ(ggml_blck_size(GGML_TYPE_F64), 1);
    EXPECT_EQ(ggml_type_size(GGML_TYPE_F64), 8u);
    EXPECT_FALSE(ggml_is_quantized(GGML_TYPE_F64));
    EXPECT_EQ(f64->to_float, nullptr);
    EXPECT_EQ(f64->from_float_ref, nullptr);
    EXPECT_EQ(loom::iq_vec_dot_type(GGML_TYPE_F64), GGML_TYPE_COUNT);
    EXPECT_EQ(loom::iq_vec_dot_type(GGML_TYPE_Q4_0), GGML_TYPE_COUNT);
}

TEST(QuantsIq, GridsHaveGgmlsSizesAndEntries) {
    using namespace loom::iq;
    EXPECT_EQ(std::size(iq2xxs_grid), 256u);
    EXPECT_EQ(std::size(iq2xs_grid), 512u);
    EXPECT_EQ(std::size(iq2s_grid), 1024u);
    EXPECT_EQ(std::size(iq3xxs_grid), 256u);
    EXPECT_EQ(std::size(iq3s_grid), 512u);
    EXPECT_EQ(std::size(iq1s_grid), 2048u);
    EXPECT_EQ(iq2xxs_grid[0], 0x0808080808080808u);
    EXPECT_EQ(iq2xs_grid[1], 0x080808080808082bu);
    EXPECT_EQ(iq2xs_grid[511], 0x2b2b2b2b2b2b2b2bu);
    EXPECT_EQ(iq2s_grid[3], 0x0808080808082b08u);
    EXPECT_EQ(iq3xxs_grid[5], 0x04040c3eu);
    EXPECT_EQ(iq3xxs_grid[255], 0x3e341c04u);
    EXPECT_EQ(iq3s_grid[3], 0x0101010bu);
    EXPECT_EQ(iq1s_grid[0], 0xffffffffffffffffu);
    EXPECT_EQ(iq1s_grid[1], 0xffffffffffffff01u);
    const int8_t iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    EXPECT_EQ(std::memcmp(kvalues_iq4nl, iq4nl, 16), 0);
    // each sign pattern: 7 free bits and an eighth that makes the count even
    for (int i = 0; i < 128; ++i) {
        EXPECT_EQ(ksigns_iq2xs[i] & 127, i);
        EXPECT_EQ(std::popcount(unsigned(ksigns_iq2xs[i])) % 2, 0);
    }
    for (int j = 0; j < 8; ++j) EXPECT_EQ(kmask_iq2xs[j], 1 << j);
}

// Every key off a grid has neighbours, the first of them at the least
// distance from the key over the whole grid; grid points map to themselves.
TEST(QuantsIq, SearchTablesListNearestPoints) {
    for (ggml_type t : {GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_IQ2_S}) {
        SCOPED_TRACE(ggml_type_name(t));
        const loom::iq::GridSearch & g     = loom::iq::grid_search(t);
        const int                    npts  = int(g.levels.size()) / g.dim;
        const int                    mask  = (1 << g.bits) - 1;
        int                          seen  = 0;
        for (size_t u = 0; u < g.point_of.size(); u += 7) {
            if (g.point_of[u] >= 0) {
                int8_t L[8];
                for (int c = 0; c < g.dim; ++c) L[c] = int8_t(g.levels[size_t(g.point_of[u]) * g.dim + c]);
                EXPECT_EQ(size_t(g.key_of(L)), u);
                continue;
            }
            ASSERT_GT(g.count[u], 0u);
            int best = 1 << 30;
            for (int p = 0; p < npts; ++p) {
                int d = 0;
                for (int c = 0; c < g.dim; ++c) {
                    const int diff = g.levels[size_t(p) * g.dim + c] - int((u >> (g.bits * c)) & mask);
                    d += diff * diff;
                }
                best = std::min(best, d);
            }
            const int first = g.neighbours[g.first[u]];
            int       d     = 0;
            for (int c = 0; c < g.dim; ++c) {
                const int diff = g.levels[size_t(first) * g.dim + c] - int((u >> (g.bits * c)) & mask);
                d += diff * diff;
            }
            EXPECT_EQ(d, best) << "key " << u;
            ++seen;
        }
        EXPECT_GT(seen, 100);
    }
}

} // namespace

namespace {

// Normal random rows with a scale per 32 values.
std::vector<float> random_rows(unsigned seed, size_t n) {
    std::mt19937                    rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> scale(0.1f, 4.0f);
    std::vector<float>              x(n);
    float                           s = 1;
    for (size_t i = 0; i < n; ++i) {
        if (i % 32 == 0) s = scale(rng);
        x[i] = normal(rng) * s;
    }
    return x;
}

// sum (x - y)^2 / sum x^2, in double.
double nmse(const std::vector<float> & x, const std::vector<float> & y) {
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
        den += double(x[i]) * x[i];
    }
    return num / den;
}

struct Bound {
    ggml_type type;
    double    max_nmse; // of the reference encoder on normal data with a scale per 32 values
};

// Roughly 1.5 times what the encoders reach on this data, in order of bits per weight.
// About 1.5 times what the encoders reach on this data (the ternary and
// one/two-bit types, one scale for 64..256 values, are far from their kind
// of data here; see TernaryDataRoundTripsExactly).
const Bound kBounds[] = {
    {GGML_TYPE_Q1_0, 0.75},   {GGML_TYPE_TQ1_0, 0.95},   {GGML_TYPE_TQ2_0, 0.95},   {GGML_TYPE_Q2_0, 0.75},
    {GGML_TYPE_IQ2_S, 0.11},  {GGML_TYPE_IQ3_XXS, 0.072}, {GGML_TYPE_IQ3_S, 0.045},  {GGML_TYPE_MXFP4, 0.021},
    {GGML_TYPE_NVFP4, 0.014}, {GGML_TYPE_IQ4_NL, 0.0097}, {GGML_TYPE_IQ4_XS, 0.0092},
};

TEST(QuantsIq, ReferenceEncodersRoundTripWithinBounds) {
    for (const Bound & b : kBounds) {
        const ggml_type_traits * tr = ggml_get_type_traits(b.type);
        for (unsigned seed : {1u, 2u, 3u}) {
            const std::vector<float> x = random_rows(seed, 4096);
            std::vector<uint8_t>     q(ggml_row_size(b.type, int64_t(x.size())));
            tr->from_float_ref(x.data(), q.data(), int64_t(x.size()));
            const double e = nmse(x, decode(b.type, q));
            EXPECT_LE(e, b.max_nmse) << ggml_type_name(b.type) << " seed " << seed;
        }
    }
}

// The importance-weighted encoders of ggml_quantize_chunk, with the weights
// all one (IQ2_XXS, IQ2_XS and IQ1_S have no encoder without them).
TEST(QuantsIq, ChunkEncodersRoundTripWithinBounds) {
    // about 1.5 times what they reach on this data
    const Bound bounds[] = {{GGML_TYPE_IQ1_S, 0.37},   {GGML_TYPE_IQ1_M, 0.32},  {GGML_TYPE_IQ2_XXS, 0.18},
                            {GGML_TYPE_IQ2_XS, 0.14},  {GGML_TYPE_IQ2_S, 0.097}, {GGML_TYPE_IQ3_XXS, 0.048},
                            {GGML_TYPE_IQ3_S, 0.029},  {GGML_TYPE_IQ4_NL, 0.0083}, {GGML_TYPE_IQ4_XS, 0.0085}};
    const int64_t      per_row = 1024, rows = 4;
    std::vector<float> ones(static_cast<size_t>(per_row), 1.0f);
    for (const Bound & b : bounds) {
        const std::vector<float> x = random_rows(21, size_t(per_row * rows));
        std::vector<uint8_t>     q(ggml_row_size(b.type, per_row) * size_t(rows));
        size_t                   written = 0;
        ASSERT_TRUE(loom::quantize_chunk_iq(b.type, x.data(), q.data(), rows, per_row, ones.data(), &written));
        EXPECT_EQ(written, q.size());
        const double e = nmse(x, decode(b.type, q));
        EXPECT_LE(e, b.max_nmse) << ggml_type_name(b.type);
    }
}

// Values in {-s, 0, s} with s exact in fp16 come back exactly from the
// ternary types and Q2_0; values in {-s, s} from Q1_0.
TEST(QuantsIq, TernaryDataRoundTripsExactly) {
    std::mt19937 rng(7);
    for (ggml_type t : {GGML_TYPE_TQ1_0, GGML_TYPE_TQ2_0, GGML_TYPE_Q2_0, GGML_TYPE_Q1_0}) {
        std::vector<float> x(1024);
        for (size_t i = 0; i < x.size(); ++i) {
            const int v = t == GGML_TYPE_Q1_0 ? (rng() % 2 ? 1 : -1) : int(rng() % 3) - 1;
            x[i]        = float(v) * 0.375f;
        }
        for (size_t i = 0; i < x.size(); i += 64) x[i] = 0.375f; // every block reaches s
        std::vector<uint8_t> q(ggml_row_size(t, int64_t(x.size())));
        ggml_get_type_traits(t)->from_float_ref(x.data(), q.data(), int64_t(x.size()));
        EXPECT_EQ(first_bit_difference(decode(t, q), x), -1) << ggml_type_name(t);
    }
}

} // namespace

namespace {

TEST(QuantsIq, ChunkDeclinesOtherTypesAndMissingImatrix) {
    std::vector<float>   x(256, 1.0f);
    std::vector<uint8_t> y(1024, 0xa5);
    size_t               written = 7;
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_F64}) {
        EXPECT_FALSE(loom::quantize_chunk_iq(t, x.data(), y.data(), 1, 256, nullptr, &written)) << ggml_type_name(t);
    }
    // ggml requires an importance matrix for these three
    for (ggml_type t : {GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ1_S}) {
        EXPECT_FALSE(loom::quantize_chunk_iq(t, x.data(), y.data(), 1, 256, nullptr, &written)) << ggml_type_name(t);
    }
    EXPECT_EQ(written, 7u);
    EXPECT_EQ(y[0], 0xa5);
    for (const Row & r : kTypeRows) {
        const bool need = r.type == GGML_TYPE_IQ2_XXS || r.type == GGML_TYPE_IQ2_XS || r.type == GGML_TYPE_IQ1_S;
        EXPECT_EQ(loom::iq_requires_imatrix(r.type), need) << r.name;
    }
    ASSERT_TRUE(loom::quantize_chunk_iq(GGML_TYPE_IQ1_M, x.data(), y.data(), 1, 256, nullptr, &written));
    EXPECT_EQ(written, sizeof(loom::block_iq1_m));
}

// Inputs that are not finite, huge or tiny encode without fault, and any
// bytes decode without fault (the decoders read masked indices only).
TEST(QuantsIq, MalformedDataNeverFaults) {
    std::vector<float> x = random_rows(11, 1024);
    x[3]                 = NAN;
    x[300]               = INFINITY;
    x[301]               = -INFINITY;
    x[600]               = 3e38f;
    for (size_t i = 768; i < 800; ++i) x[i] = 1e-30f;
    const std::vector<float> w = [] {
        std::vector<float> v(1024, 1.0f);
        v[5] = 0.0f;
        return v;
    }();
    for (const Row & r : kTypeRows) {
        const ggml_type_traits * tr = ggml_get_type_traits(r.type);
        std::vector<uint8_t>     q(ggml_row_size(r.type, 1024));
        if (tr->from_float_ref) tr->from_float_ref(x.data(), q.data(), 1024);
        size_t written = 0;
        loom::quantize_chunk_iq(r.type, x.data(), q.data(), 1, 1024, w.data(), &written);
        std::vector<float> y(1024);
        tr->to_float(q.data(), y.data(), 1024);
        std::mt19937 rng(5);
        for (uint8_t & c : q) c = uint8_t(rng());
        std::fill(q.begin(), q.begin() + 8, uint8_t(0xff)); // NaN scales where the scale leads
        tr->to_float(q.data(), y.data(), 1024);
    }
    SUCCEED();
}

// The E8M0 scale is 2^(e - 127), halved for the doubled E2M1 table; the
// unsigned E4M3 scale round-trips through fp32_to_ue4m3 for every code below
// exponent 15; as ggml's, the encoder stores 0x7e for all values from 256 up.
TEST(QuantsIq, Fp4ScalesAreExact) {
    for (int e = 0; e < 256; ++e) {
        EXPECT_EQ(loom::e8m0_to_fp32_half(uint8_t(e)), std::ldexp(1.0f, e - 128)) << e;
    }
    for (int c = 1; c < 0x7f; ++c) {
        const float v = 2 * loom::ue4m3_to_fp32_half(uint8_t(c));
        const int   ex = (c >> 3) & 0xf, man = c & 7;
        EXPECT_EQ(double(v), ex == 0 ? std::ldexp(double(man), -9) : std::ldexp(1.0 + man / 8.0, ex - 7)) << c;
        EXPECT_EQ(loom::fp32_to_ue4m3(v), c < 0x78 ? c : 0x7e) << c;
    }
    EXPECT_EQ(loom::ue4m3_to_fp32_half(0x7f), 0.0f);
    EXPECT_EQ(loom::fp32_to_ue4m3(1000.0f), 0x7e); // saturates at 448
    EXPECT_EQ(loom::fp32_to_ue4m3(-1.0f), 0);
    EXPECT_EQ(loom::fp32_to_ue4m3(NAN), 0);
}

} // namespace
