// The GEMM kernels of every table against double-precision sums, then the
// whole mul_mat through the graph API with the SIMD and the portable paths,
// and its independence from the thread count. Tolerances: see
// test_simd.cpp.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/features.h"
#include "backends/cpu/kernels/gemm.h"
#include "backends/cpu/simd/avx512/avx512.h"
#include "backends/cpu/simd/kernel_table.h"
#include "core/fp16.h"
#include "core/types.h"
#include "simd_test_util.h"
#include "test_util.h"

using namespace loom;
using namespace loom::cpu;
using namespace loomtest;
using namespace loomtest::simd;

// ---- GEMM ----

namespace {

struct GemmData {
    ggml_type                  a_type;
    int64_t                    M, N, K;
    size_t                     lda, ldb, b_step, ldc;
    std::vector<unsigned char> a, b;
    std::vector<float>         af; // a as floats, M x K
    std::vector<float>         bf; // b as floats, N x K
};

GemmData make_gemm(std::mt19937 & rng, ggml_type a_type, int64_t M, int64_t N, int64_t K, bool strided_b) {
    GemmData d;
    d.a_type = a_type;
    d.M = M, d.N = N, d.K = K;
    const size_t es = ggml_type_size(a_type);
    d.lda           = size_t(K) * es + 2 * es; // padded rows
    d.a.assign(d.lda * size_t(M), 0);
    d.af.resize(size_t(M * K));
    for (int64_t m = 0; m < M; ++m) {
        const auto v = random_floats(rng, size_t(K));
        for (int64_t k = 0; k < K; ++k) {
            unsigned char * p = d.a.data() + size_t(m) * d.lda + size_t(k) * es;
            float           f = v[size_t(k)];
            if (a_type == GGML_TYPE_F16) {
                const uint16_t h = fp32_to_fp16(f);
                std::memcpy(p, &h, 2);
                f = fp16_to_fp32(h);
            } else if (a_type == GGML_TYPE_BF16) {
                const uint16_t h = fp32_to_bf16(f);
                std::memcpy(p, &h, 2);
                f = bf16_to_fp32(h);
            } else {
                std::memcpy(p, &f, 4);
            }
            d.af[size_t(m * K + k)] = f;
        }
    }
    // b: columns of K values; strided: the values of a column 3 floats apart.
    d.b_step = strided_b ? 3 * sizeof(float) : sizeof(float);
    d.ldb    = size_t(K) * d.b_step + 4;
    d.b.assign(d.ldb * size_t(N) + 16, 0);
    d.bf.resize(size_t(N * K));
    for (int64_t n = 0; n < N; ++n) {
        const auto v = random_floats(rng, size_t(K));
        for (int64_t k = 0; k < K; ++k) {
            std::memcpy(d.b.data() + size_t(n) * d.ldb + size_t(k) * d.b_step, &v[size_t(k)], 4);
            d.bf[size_t(n * K + k)] = v[size_t(k)];
        }
    }
    d.ldc = size_t(M) + 5;
    return d;
}

GemmProblem problem_of(const GemmData & d, float * c) {
    GemmProblem pr;
    pr.a_type = d.a_type;
    pr.a      = reinterpret_cast<const char *>(d.a.data());
    pr.lda    = d.lda;
    pr.b      = reinterpret_cast<const char *>(d.b.data());
    pr.ldb    = d.ldb;
    pr.b_step = d.b_step;
    pr.c      = c;
    pr.ldc    = d.ldc;
    pr.K      = d.K;
    return pr;
}

// 64-byte aligned scratch for one gemm caller.
struct AlignedScratch {
    std::vector<unsigned char> mem;
    void *                     ptr;
    explicit AlignedScratch(size_t n) : mem(n + 64) {
        ptr = reinterpret_cast<void *>((reinterpret_cast<uintptr_t>(mem.data()) + 63) & ~uintptr_t(63));
    }
};

// gemm on one thread with its own scratch.
void gemm_alone(const KernelTable & kt, const GemmProblem & pr, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                int64_t N) {
    const size_t   bb = gemm_b_block_bytes(kt, pr.a_type, N);
    AlignedScratch s(bb + gemm_private_bytes(kt, pr.a_type));
    gemm(kt, pr, m0, m1, n0, n1, s.ptr, static_cast<char *>(s.ptr) + bb, nullptr);
}

// A copy of a table with small cache blocks, so that small products cross
// every block edge (several row chunks, depth blocks and column blocks), in
// the f32 GEMM and in the BF16 one.
struct SmallBlocks {
    GemmBf16    bf16{};
    KernelTable table;
    explicit SmallBlocks(const KernelTable & kt) : table(kt) {
        table.mc = 2 * kt.mr;
        table.kc = 40;
        table.nc = 2 * kt.nr;
        if (kt.gemm_bf16 != nullptr) {
            bf16            = *kt.gemm_bf16;
            bf16.mc         = 2 * bf16.mr;
            bf16.kc         = 40;
            bf16.nc         = bf16.nr;
            table.gemm_bf16 = &bf16;
        }
    }
    SmallBlocks(const SmallBlocks &)             = delete;
    SmallBlocks & operator=(const SmallBlocks &) = delete;
};

// b as the product sees it: rounded to bf16 where the table multiplies bf16
// weights on its BF16 GEMM.
float b_value(const KernelTable & kt, const GemmData & d, size_t i) {
    return gemm_uses_bf16(kt, d.a_type) ? bf16_to_fp32(fp32_to_bf16(d.bf[i])) : d.bf[i];
}

void check_gemm_against_double(const KernelTable & kt, const GemmData & d) {
    std::vector<float> c(d.ldc * size_t(d.N), -7.0f);
    gemm_alone(kt, problem_of(d, c.data()), 0, d.M, 0, d.N, d.N);
    for (int64_t n = 0; n < d.N; ++n) {
        for (int64_t m = 0; m < d.M; ++m) {
            double exact = 0.0, mag = 0.0;
            for (int64_t k = 0; k < d.K; ++k) {
                const double p = double(d.af[size_t(m * d.K + k)]) * double(b_value(kt, d, size_t(n * d.K + k)));
                exact += p;
                mag += std::fabs(p);
            }
            ASSERT_NEAR(c[size_t(n) * d.ldc + size_t(m)], exact, kDotTol * mag + 1e-30)
                << kt.name << " m " << m << " n " << n;
        }
        for (size_t m = size_t(d.M); m < d.ldc; ++m) {
            ASSERT_EQ(c[size_t(n) * d.ldc + m], -7.0f) << "wrote past row " << d.M;
        }
    }
}

} // namespace

TEST(Simd, GemmPackSameBits) {
    FOR_EACH_SIMD_TABLE(kt) {
        std::mt19937 rng(13);
        for (int width : {kt->mr, kt->nr, 5}) {
            for (int nrows = 1; nrows <= width; ++nrows) {
                for (int64_t kb : {1, 7, 8, 9, 33, 256}) {
                    std::vector<std::vector<float>> data;
                    const float *                   rows[32]; // the widest panel
                    for (int i = 0; i < nrows; ++i) {
                        data.push_back(random_floats(rng, size_t(kb) + 1));
                        rows[i] = data.back().data() + 1; // not vector aligned
                    }
                    std::vector<float> want(size_t(kb * width), -1.0f), got(size_t(kb * width), -2.0f);
                    portable_kernels().gemm_pack(rows, nrows, width, kb, want.data());
                    kt->gemm_pack(rows, nrows, width, kb, got.data());
                    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                        << kt->name << " width " << width << " rows " << nrows << " kb " << kb;
                }
            }
        }
    }
}

TEST(Simd, GemmOddShapesAllTables) {
    std::vector<const KernelTable *> tables = {&portable_kernels()};
    for (const KernelTable * t : simd_tables()) {
        tables.push_back(t);
    }
    std::mt19937 rng(7);
    struct Shape3 {
        int64_t M, N, K;
    };
    // Edges of the register tile, of the cache blocks (mc 144, kc 256) and
    // K deeper than one block.
    const Shape3 shapes[] = {{1, 1, 1},     {5, 3, 7},      {16, 6, 33},    {17, 7, 64}, {33, 13, 255},
                             {47, 11, 257}, {150, 20, 300}, {64, 25, 65},  {31, 9, 600}};
    for (const KernelTable * table : tables) {
        const SmallBlocks small(*table);
        for (const KernelTable * ktp : {table, &small.table}) {
            const KernelTable & kt = *ktp;
            for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
                for (const Shape3 & s : shapes) {
                    for (bool strided : {false, true}) {
                        SCOPED_TRACE(std::string(kt.name) + " mc " + std::to_string(kt.mc) + " " +
                                     ggml_type_name(type) + " M " + std::to_string(s.M) + " N " +
                                     std::to_string(s.N) + " K " + std::to_string(s.K) +
                                     (strided ? " strided b" : ""));
                        check_gemm_against_double(kt, make_gemm(rng, type, s.M, s.N, s.K, strided));
                    }
                }
            }
        }
    }
}

TEST(Simd, GemmRectanglesGiveSameBits) {
    std::vector<const KernelTable *> tables = {&portable_kernels()};
    for (const KernelTable * t : simd_tables()) {
        tables.push_back(t);
    }
    std::mt19937 rng(8);
    for (const KernelTable * kt : tables) {
        for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_BF16}) {
            SCOPED_TRACE(std::string(kt->name) + " " + ggml_type_name(type));
            const GemmData     d = make_gemm(rng, type, 203, 37, 521, false);
            std::vector<float> whole(d.ldc * size_t(d.N), 0.0f), parts(d.ldc * size_t(d.N), 0.0f);
            std::vector<float> small(d.ldc * size_t(d.N), 0.0f);
            gemm_alone(*kt, problem_of(d, whole.data()), 0, d.M, 0, d.N, d.N);
            // Other block sizes: the same bits.
            gemm_alone(SmallBlocks(*kt).table, problem_of(d, small.data()), 0, d.M, 0, d.N, d.N);
            EXPECT_EQ(0, std::memcmp(whole.data(), small.data(), whole.size() * sizeof(float)));
            // Rectangles cut at tile multiples: the same bits.
            const bool    bf16   = gemm_uses_bf16(*kt, type);
            const int64_t mr     = bf16 ? kt->gemm_bf16->mr : kt->mr;
            const int64_t nr     = bf16 ? kt->gemm_bf16->nr : kt->nr;
            const int64_t mcut[] = {0, mr * 3, std::min<int64_t>(mr * 5, d.M - 1), d.M};
            const int64_t ncut[] = {0, nr * 2, d.N};
            for (int i = 0; i + 1 < 4; ++i) {
                for (int j = 0; j + 1 < 3; ++j) {
                    gemm_alone(*kt, problem_of(d, parts.data()), mcut[i], mcut[i + 1], ncut[j], ncut[j + 1], d.N);
                }
            }
            EXPECT_EQ(0, std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float)));
        }
    }
}

// The packing of the BF16 GEMM against the layout of kernel_table.h: pairs
// of k in 32-bit words, zero partners and zero rows, activations rounded as
// the core's fp32_to_bf16 (specials, ties and subnormals included).
TEST(Simd, GemmBf16PackSameBits) {
    bool any = false;
    for (const KernelTable * kt : runnable_kernels()) {
        if (kt->gemm_bf16 == nullptr) {
            continue;
        }
        any                 = true;
        const GemmBf16 & g  = *kt->gemm_bf16;
        std::mt19937     rng(15);
        for (int64_t kb : {1, 2, 3, 31, 32, 33, 64, 77, 256}) {
            const int64_t kp = (kb + 1) / 2;
            for (int nrows = 1; nrows <= g.mr; nrows += nrows < 4 ? 1 : 7) {
                SCOPED_TRACE(std::string(kt->name) + " a kb " + std::to_string(kb) + " rows " + std::to_string(nrows));
                // Rows starting one element into their allocation, ending
                // where it ends (ASan sees a read past them).
                std::vector<std::vector<uint16_t>> data;
                const uint16_t *                   rows[32];
                for (int i = 0; i < nrows; ++i) {
                    auto v = random_bf16(rng, size_t(kb) + 1);
                    data.push_back(std::move(v));
                }
                for (int i = 0; i < nrows; ++i) rows[i] = data[size_t(i)].data() + 1;
                std::vector<uint32_t> got(size_t(kp * g.mr) + 5, 0xdeadbeefu);
                g.pack_a(rows, nrows, kb, got.data());
                for (int64_t p = 0; p < kp; ++p) {
                    for (int i = 0; i < g.mr; ++i) {
                        uint32_t want = 0;
                        if (i < nrows) {
                            want = rows[i][2 * p];
                            if (2 * p + 1 < kb) want |= uint32_t(rows[i][2 * p + 1]) << 16;
                        }
                        ASSERT_EQ(got[size_t(p * g.mr + i)], want) << "pair " << p << " row " << i;
                    }
                }
                for (size_t i = size_t(kp * g.mr); i < got.size(); ++i) ASSERT_EQ(got[i], 0xdeadbeefu);
            }
            for (size_t step : {sizeof(float), 3 * sizeof(float)}) {
                for (int ncols = 1; ncols <= g.nr; ++ncols) {
                    SCOPED_TRACE(std::string(kt->name) + " b kb " + std::to_string(kb) + " cols " +
                                 std::to_string(ncols) + " step " + std::to_string(step));
                    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-39f,
                                              1.00390625f /* tie, to even */, 1.01171875f /* tie, up */,
                                              3.4e38f /* rounds to infinity */};
                    std::vector<std::vector<float>> data;
                    const char *                    cols[16];
                    for (int j = 0; j < ncols; ++j) {
                        auto v = random_floats(rng, size_t(kb) * (step / sizeof(float)) + 1, -3.0f, 3.0f);
                        for (size_t i = 0; i < std::size(specials); ++i) {
                            v[(size_t(j) * 5 + i * 7) % v.size()] = specials[i];
                        }
                        uint32_t snan = 0x7f800001u; // a signaling NaN
                        std::memcpy(&v[size_t(j) % v.size()], &snan, 4);
                        data.push_back(std::move(v));
                    }
                    for (int j = 0; j < ncols; ++j) cols[j] = reinterpret_cast<const char *>(data[size_t(j)].data() + 1);
                    std::vector<uint32_t> got(size_t(kp * g.nr) + 5, 0xdeadbeefu);
                    g.pack_b(cols, step, ncols, kb, got.data());
                    auto value = [&](int j, int64_t k) {
                        float f;
                        std::memcpy(&f, cols[j] + size_t(k) * step, sizeof(f));
                        return uint32_t(fp32_to_bf16(f));
                    };
                    for (int64_t p = 0; p < kp; ++p) {
                        for (int j = 0; j < g.nr; ++j) {
                            uint32_t want = 0;
                            if (j < ncols) {
                                want = value(j, 2 * p);
                                if (2 * p + 1 < kb) want |= value(j, 2 * p + 1) << 16;
                            }
                            ASSERT_EQ(got[size_t(p * g.nr + j)], want) << "pair " << p << " col " << j;
                        }
                    }
                    for (size_t i = size_t(kp * g.nr); i < got.size(); ++i) ASSERT_EQ(got[i], 0xdeadbeefu);
                }
            }
        }
    }
    if (!any) {
        GTEST_SKIP() << "no kernel table with a BF16 GEMM runs here: " << lacking();
    }
}

// ---- mul_mat through the graph ----

namespace {

struct MulMatShape {
    ggml_type type;
    int64_t   K, M, N;
    int64_t   a2, a3, b2, b3; // batches, b broadcast over a
    bool      transposed_b;
};

std::string describe(const MulMatShape & s) {
    return std::string(ggml_type_name(s.type)) + " K " + std::to_string(s.K) + " M " + std::to_string(s.M) + " N " +
           std::to_string(s.N) + " batches a " + std::to_string(s.a2) + "x" + std::to_string(s.a3) + " b " +
           std::to_string(s.b2) + "x" + std::to_string(s.b3) + (s.transposed_b ? " transposed b" : "");
}

ggml_tensor * build_mul_mat(ggml_context * ctx, const MulMatShape & s, std::mt19937 & rng) {
    ggml_tensor * a = ggml_new_tensor_4d(ctx, s.type, s.K, s.M, s.a2, s.a3);
    fill_random(a, rng);
    ggml_tensor * b = nullptr;
    if (s.transposed_b) {
        ggml_tensor * bt = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.N, s.K, s.b2, s.b3);
        fill_random(bt, rng);
        b = ggml_transpose(ctx, bt);
    } else {
        b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.K, s.N, s.b2, s.b3);
        fill_random(b, rng);
    }
    return ggml_mul_mat(ctx, a, b);
}

std::vector<MulMatShape> graph_shapes() {
    std::vector<MulMatShape> out;
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        const bool    q  = ggml_is_quantized(t);
        const int64_t K1 = q ? 96 : 77;
        const int64_t K2 = q ? 320 : 301;
        // gemv: 1..4 columns; GEMM (float weights): 5 and more.
        for (int64_t N : {1, 2, 3, 4, 5, 9, 40}) {
            out.push_back({t, K1, 37, N, 1, 1, 1, 1, false});
        }
        out.push_back({t, K2, 150, 23, 1, 1, 1, 1, false});
        out.push_back({t, K1, 19, 3, 2, 1, 4, 3, false}); // broadcast, gemv
        out.push_back({t, K1, 21, 7, 1, 2, 3, 2, false}); // broadcast, GEMM
        out.push_back({t, K1, 13, 2, 1, 1, 1, 1, true});  // strided b, gemv
        out.push_back({t, K1, 13, 11, 1, 1, 2, 1, true}); // strided b, GEMM
        out.push_back({t, K2, 3, 70, 1, 1, 1, 1, false}); // few rows, many columns
        if (!q) {
            out.push_back({t, 20, 150, 4100, 1, 1, 1, 1, false}); // several row chunks and column blocks
        } else {
            out.push_back({t, 8192, 150, 19, 1, 1, 1, 1, false}); // K in parts, row tails (prepared columns)
        }
    }
    return out;
}

double path_tolerance(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F16: return 1e-6;
        // A BF16 GEMM rounds b as the reference does.
        case GGML_TYPE_BF16: return gemm_uses_bf16(best_kernels(), t) ? 1e-9 : 5e-5;
        default: return 1e-9;
    }
}

} // namespace

TEST(Simd, MulMatSimdAgainstPortable) {
    std::mt19937 rng(9);
    for (const MulMatShape & s : graph_shapes()) {
        SCOPED_TRACE(describe(s));
        Context       ctx;
        ggml_tensor * out = build_mul_mat(ctx, s, rng);
        ASSERT_EQ(compute(ctx, out, RunMode{2, true}), GGML_STATUS_SUCCESS);
        const Array ref = read_tensor(out);
        ASSERT_EQ(compute(ctx, out, RunMode{2, false}), GGML_STATUS_SUCCESS);
        EXPECT_TRUE(matches(read_tensor(out), ref, path_tolerance(s.type)));
    }
}

TEST(Simd, MulMatSameBitsFor1To4Threads) {
    std::mt19937 rng(10);
    for (const MulMatShape & s : graph_shapes()) {
        SCOPED_TRACE(describe(s));
        Context       ctx;
        ggml_tensor * out = build_mul_mat(ctx, s, rng);
        std::vector<float> first;
        for (bool use_ref : {false, true}) {
            for (int nth = 1; nth <= 4; ++nth) {
                std::memset(out->data, 0xff, ggml_nbytes(out));
                ASSERT_EQ(compute(ctx, out, RunMode{nth, use_ref}), GGML_STATUS_SUCCESS);
                std::vector<float> got(size_t(ggml_nelements(out)));
                std::memcpy(got.data(), out->data, ggml_nbytes(out));
                if (nth == 1) {
                    first = got;
                } else {
                    EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)))
                        << nth << " threads" << (use_ref ? ", portable" : "");
                }
            }
        }
    }
}
