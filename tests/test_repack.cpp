// The CPU device's extra buffer type CPU_REPACK: Q4_0, Q8_0 and F16 weights (AVX-512
// table), Q4_K (AVX2 table), IQ4_XS (AVX2 and AVX-512 tables), Q4_0 and Q4_K (Arm tables
// with the dot product) stored in the kernels' own layout; every test runs again with the AVX2 table selected (Repack.Avx2Table in
// CMakeLists.txt), and under qemu-aarch64 on each Arm level (scripts/check-cpu-levels.sh). Data goes in and out in ggml's layout at any offset;
// matrix products on repacked weights give the bits of the same product on
// ggml's layout and agree with a double-precision reference; nothing else
// may read repacked weights.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/repack.h"
#include "backends/cpu/simd/kernel_table.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"

namespace {

ggml_context_ptr make_ctx(size_t n_tensors) {
    ggml_init_params p = {n_tensors * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    return ggml_context_ptr(ggml_init(p));
}

// The CPU device's extra buffer type named CPU_REPACK, or nullptr.
ggml_backend_buffer_type_t repack_buft() {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    auto               fn  = reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
    if (fn == nullptr) {
        return nullptr;
    }
    for (ggml_backend_buffer_type_t * b = fn(dev); *b != nullptr; ++b) {
        if (std::strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0) {
            return *b;
        }
    }
    return nullptr;
}

#define REQUIRE_REPACK()                                                                        \
    ggml_backend_buffer_type_t buft = repack_buft();                                            \
    if (buft == nullptr) {                                                                      \
        GTEST_SKIP() << "no repacked layout with this kernel table (it takes AVX2, FMA and F16C, "   \
                        "or Arm's dot product; here AVX2 " << ggml_cpu_has_avx2() << ", FMA "       \
                     << ggml_cpu_has_fma() << ", F16C " << ggml_cpu_has_f16c() << ", dot product "  \
                     << ggml_cpu_has_dotprod() << ")";                                            \
    }                                                                                           \
    /* The tests loop over the repacked types: none would check nothing. */                    \
    ASSERT_FALSE(k_types.empty()) << "CPU_REPACK is offered but REPACK_TYPES names no type"

// The types the buffer repacks with the kernel table in use: the CPU's
// feature REPACK_TYPES (ggml_type_name's names, comma-separated).
std::vector<ggml_type> repacked_types() {
    std::vector<ggml_type> out;
    ggml_backend_reg_t     reg = ggml_backend_dev_backend_reg(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    auto                   fn  = reinterpret_cast<ggml_backend_get_features_t>(
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features"));
    for (const ggml_backend_feature * f = fn != nullptr ? fn(reg) : nullptr; f != nullptr && f->name != nullptr; ++f) {
        if (std::strcmp(f->name, "REPACK_TYPES") != 0) continue;
        std::string list = std::string(f->value) + ",";
        for (size_t at = 0, end; (end = list.find(',', at)) != std::string::npos; at = end + 1) {
            for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
                const char * name = ggml_type_name(ggml_type(t));
                if (name != nullptr && list.compare(at, end - at, name) == 0) out.push_back(ggml_type(t));
            }
        }
    }
    return out;
}
const std::vector<ggml_type> k_types = repacked_types();

// A row length of a few blocks every repacked type takes (Q4_K's and IQ4_XS's blocks are
// 256 values).
int64_t short_k(ggml_type type) {
    return type == GGML_TYPE_Q4_K || type == GGML_TYPE_IQ4_XS ? 512 : 384;
}

TEST(Repack, TypesNamedWhereTheBufferIsOffered) {
    EXPECT_EQ(repack_buft() != nullptr, !k_types.empty());
    for (ggml_type type : k_types) {
        EXPECT_TRUE(type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q8_0 || type == GGML_TYPE_F16 ||
                    type == GGML_TYPE_Q4_K || type == GGML_TYPE_IQ4_XS)
            << ggml_type_name(type);
    }
}

// Rows of random blocks of a quantized type, with finite scales.
std::vector<uint8_t> random_rows(std::mt19937 & rng, ggml_type type, int64_t K, int64_t rows) {
    const size_t         row = ggml_row_size(type, K);
    std::vector<uint8_t> v(row * size_t(rows));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float>                    x(static_cast<size_t>(K));
    for (int64_t r = 0; r < rows; ++r) {
        for (float & f : x) f = u(rng) * (0.5f + float(r % 7));
        ggml_quantize_chunk(type, x.data(), v.data() + size_t(r) * row, 0, 1, K, nullptr);
    }
    return v;
}

TEST(Repack, OfferedAsExtraBufferTypeOfTheCpu) {
    REQUIRE_REPACK();
    EXPECT_FALSE(ggml_backend_buft_is_host(buft));
    EXPECT_EQ(ggml_backend_buft_get_device(buft), ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
    EXPECT_TRUE(ggml_backend_dev_supports_buft(ggml_backend_buft_get_device(buft), buft));
    EXPECT_EQ(ggml_backend_buft_get_alignment(buft) % 64, 0u);
}

// Any range written in ggml's layout reads back the same, through the tensor
// and through a view; memset too; the bytes in memory are not ggml's.
void data_in_and_out(ggml_backend_buffer_type_t buft, ggml_type type);

TEST(Repack, DataInAndOutInGgmlLayoutAtAnyOffset) {
    REQUIRE_REPACK();
    for (ggml_type type : k_types) {
        SCOPED_TRACE(ggml_type_name(type));
        data_in_and_out(buft, type);
    }
}

void data_in_and_out(ggml_backend_buffer_type_t buft, ggml_type type) {
    std::mt19937  rng(7);
    const int64_t K = short_k(type), rows = 24;
    auto          ctx = make_ctx(4);
    ggml_tensor * t   = ggml_new_tensor_2d(ctx.get(), type, K, rows);
    ggml_tensor * v   = ggml_view_2d(ctx.get(), t, K, 8, t->nb[1], t->nb[1] * 9); // rows 9 .. 16
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), buft));
    ASSERT_TRUE(buf);
    const size_t         n      = ggml_nbytes(t);
    std::vector<uint8_t> shadow = random_rows(rng, type, K, rows);
    ggml_backend_tensor_set(t, shadow.data(), 0, n);
    EXPECT_NE(std::memcmp(t->data, shadow.data(), n), 0) << "stored in ggml's layout";

    std::vector<uint8_t> got(n);
    ggml_backend_tensor_get(t, got.data(), 0, n);
    ASSERT_EQ(got, shadow);

    std::uniform_int_distribution<size_t> pos(0, n);
    for (int i = 0; i < 200; ++i) {
        size_t a = pos(rng), b = pos(rng);
        if (a > b) std::swap(a, b);
        std::vector<uint8_t> part(b - a);
        for (auto & x : part) x = uint8_t(rng());
        if (i % 5 == 4) {
            const uint8_t value = uint8_t(rng());
            ggml_backend_tensor_memset(t, value, a, b - a);
            std::memset(shadow.data() + a, value, b - a);
        } else {
            ggml_backend_tensor_set(t, part.data(), a, b - a);
            std::memcpy(shadow.data() + a, part.data(), b - a);
        }
        size_t c = pos(rng), d = pos(rng);
        if (c > d) std::swap(c, d);
        std::vector<uint8_t> out(d - c);
        ggml_backend_tensor_get(t, out.data(), c, d - c);
        ASSERT_EQ(0, std::memcmp(out.data(), shadow.data() + c, d - c)) << "read [" << c << ", " << d << ")";
    }
    ggml_backend_tensor_get(t, got.data(), 0, n);
    ASSERT_EQ(got, shadow);

    // The view reads and writes its rows of the tensor.
    const size_t         vn = ggml_nbytes(v);
    std::vector<uint8_t> vr(vn);
    ggml_backend_tensor_get(v, vr.data(), 0, vn);
    EXPECT_EQ(0, std::memcmp(vr.data(), shadow.data() + t->nb[1] * 9, vn));
    for (auto & x : vr) x = uint8_t(rng());
    ggml_backend_tensor_set(v, vr.data(), 5, vn - 5);
    std::memcpy(shadow.data() + t->nb[1] * 9 + 5, vr.data(), vn - 5);
    ggml_backend_tensor_get(t, got.data(), 0, n);
    EXPECT_EQ(got, shadow);
}

// Tensors without a repacked layout keep ggml's bytes in the buffer.
TEST(Repack, OtherTensorsStayInGgmlLayout) {
    REQUIRE_REPACK();
    std::mt19937  rng(3);
    auto          ctx = make_ctx(7);
    ggml_tensor * odd_k    = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_Q4_0, 96, 16);  // K not a multiple of 128
    ggml_tensor * odd_rows = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_Q8_0, 128, 12); // rows not in eights
    ggml_tensor * f32      = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 128, 16);
    ggml_tensor * f16      = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F16, 48, 16); // K not a multiple of 32
    ggml_tensor * bf16     = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_BF16, 128, 16);
    ggml_tensor * k_rows   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_Q4_K, 256, 12); // rows not in eights
    ggml_tensor * iq_rows  = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_IQ4_XS, 512, 20); // rows not in eights
    ggml_backend_buffer_ptr buf(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), buft));
    ASSERT_TRUE(buf);
    for (ggml_tensor * t : {odd_k, odd_rows, f32, f16, bf16, k_rows, iq_rows}) {
        std::vector<uint8_t> bytes(ggml_nbytes(t));
        for (auto & x : bytes) x = uint8_t(rng() & 0x3f); // finite halves and floats
        ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
        EXPECT_EQ(0, std::memcmp(t->data, bytes.data(), bytes.size())) << ggml_get_name(t);
    }
}

// dst = a * b with a's data given in ggml's layout, a in a buffer of buft.
struct Product {
    ggml_context_ptr        ctx;
    ggml_backend_buffer_ptr wbuf, abuf;
    ggml_tensor *           a = nullptr, *b = nullptr, *dst = nullptr;
    ggml_cgraph *           graph = nullptr;

    Product(ggml_backend_buffer_type_t buft, ggml_type type, int64_t K, int64_t M, int64_t N,
            const std::vector<uint8_t> & wa, const std::vector<float> & vb) {
        ctx = make_ctx(8);
        a   = ggml_new_tensor_2d(ctx.get(), type, K, M);
        wbuf.reset(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), buft));
        ggml_backend_tensor_set(a, wa.data(), 0, wa.size());
        b     = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, K, N);
        dst   = ggml_mul_mat(ctx.get(), a, b);
        graph = ggml_new_graph(ctx.get());
        ggml_build_forward_expand(graph, dst);
        abuf.reset(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), ggml_backend_cpu_buffer_type()));
        ggml_backend_tensor_set(b, vb.data(), 0, vb.size() * sizeof(float));
    }

    std::vector<float> run(ggml_backend_t backend) {
        EXPECT_EQ(ggml_backend_graph_compute(backend, graph), GGML_STATUS_SUCCESS);
        std::vector<float> out(size_t(ggml_nelements(dst)));
        ggml_backend_tensor_get(dst, out.data(), 0, ggml_nbytes(dst));
        return out;
    }
};

// Double-precision product of the dequantized weights with the activations
// as the kernels see them: quantized to the type's activation type (Q8_0,
// Q8_K), then dequantized.
std::vector<double> reference(ggml_type type, int64_t K, int64_t M, int64_t N, const std::vector<uint8_t> & wa,
                              const std::vector<float> & vb) {
    const ggml_type    act = ggml_get_type_traits_cpu(type)->vec_dot_type;
    const auto *       q4 = ggml_get_type_traits(type);
    const auto *       q8 = ggml_get_type_traits(act);
    std::vector<float> w(size_t(K * M)), x(size_t(K * N));
    q4->to_float(wa.data(), w.data(), K * M);
    if (type == GGML_TYPE_F16) {
        // The matrix-vector kernels (up to 8 columns) round the activations
        // to F16; the GEMM (more) reads them as they are.
        for (size_t i = 0; i < x.size(); ++i) {
            x[i] = N <= 8 ? ggml_fp16_to_fp32(ggml_fp32_to_fp16(vb[i])) : vb[i];
        }
    } else {
        const size_t         row = ggml_row_size(act, K);
        std::vector<uint8_t> qb(row * size_t(N));
        for (int64_t n = 0; n < N; ++n) {
            ggml_get_type_traits_cpu(act)->from_float(vb.data() + n * K, qb.data() + size_t(n) * row, K);
        }
        if (act == GGML_TYPE_Q8_K) {
            // ggml gives Q8_K no to_float: a block is d (f32), 256 int8
            // values, 16 int16 sums; value i is d * qs[i].
            const size_t block = ggml_type_size(GGML_TYPE_Q8_K);
            for (size_t b = 0; b < x.size() / 256; ++b) {
                float d;
                std::memcpy(&d, qb.data() + b * block, sizeof d);
                const auto * qs = reinterpret_cast<const int8_t *>(qb.data() + b * block + sizeof d);
                for (size_t i = 0; i < 256; ++i) x[b * 256 + i] = d * float(qs[i]);
            }
        } else {
            q8->to_float(qb.data(), x.data(), K * N);
        }
    }
    std::vector<double> out(size_t(M * N));
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t m = 0; m < M; ++m) {
            double s = 0.0;
            for (int64_t k = 0; k < K; ++k) s += double(w[size_t(m * K + k)]) * double(x[size_t(n * K + k)]);
            out[size_t(n * M + m)] = s;
        }
    }
    return out;
}

TEST(Repack, ProductsMatchGgmlLayoutAndReference) {
    REQUIRE_REPACK();
    std::mt19937  rng(11);
    ggml_backend_ptr backend(ggml_backend_cpu_init());
    struct Shape {
        int64_t K, M;
    };
    for (ggml_type type : k_types) {
        SCOPED_TRACE(ggml_type_name(type));
        int shapes = 0; // of whole blocks of this type
        // K 8192: more blocks than one part of K in the many-column path
        // (Note [Prepared-column blocking]), so partial sums carry over.
        // K 2304: a row of Q4_K ends in a group of one block.
        for (const Shape sh : {Shape{128, 8}, Shape{256, 40}, Shape{512, 136}, Shape{1152, 48}, Shape{2304, 24},
                               Shape{8192, 16}}) {
            if (sh.K % ggml_blck_size(type) != 0) {
                continue;
            }
            ++shapes;
            for (int64_t N : {1, 2, 3, 4, 5, 8, 9, 13, 40}) {
                const std::vector<uint8_t> wa = random_rows(rng, type, sh.K, sh.M);
                std::vector<float>         vb(size_t(sh.K * N));
                std::normal_distribution<float> nd(0.0f, 1.0f);
                for (float & f : vb) f = nd(rng);
                Product                   plain(ggml_backend_cpu_buffer_type(), type, sh.K, sh.M, N, wa, vb);
                Product                   packed(buft, type, sh.K, sh.M, N, wa, vb);
                const std::vector<double> want = reference(type, sh.K, sh.M, N, wa, vb);
                std::vector<float>        first;
                for (int threads : {1, 2, 3, 4}) {
                    ggml_backend_cpu_set_n_threads(backend.get(), threads);
                    const std::vector<float> got = packed.run(backend.get());
                    if (first.empty()) {
                        first = got;
                    } else {
                        ASSERT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * sizeof(float)))
                            << "K " << sh.K << " M " << sh.M << " N " << N << ": " << threads << " threads differ";
                    }
                }
                const std::vector<float> base = plain.run(backend.get());
                ASSERT_EQ(0, std::memcmp(base.data(), first.data(), first.size() * sizeof(float)))
                    << "K " << sh.K << " M " << sh.M << " N " << N << ": not the bits of ggml's layout";
                for (size_t i = 0; i < want.size(); ++i) {
                    const double tol = 1e-5 * (1.0 + std::fabs(want[i])) + 1e-6 * double(sh.K);
                    ASSERT_NEAR(first[i], want[i], tol) << "K " << sh.K << " M " << sh.M << " N " << N << " at " << i;
                }
            }
        }
        EXPECT_GT(shapes, 0) << "no shape of whole blocks of this type";
    }
}

// Long products go through the matrix-vector path's streams: a matrix larger
// than a thread's first share, with rows in odd numbers of groups.
TEST(Repack, LongMatrixVectorProduct) {
    REQUIRE_REPACK();
    for (ggml_type type : k_types) {
        SCOPED_TRACE(ggml_type_name(type));
        std::mt19937     rng(5);
        ggml_backend_ptr backend(ggml_backend_cpu_init());
        const int64_t    K = 1024, M = 8 * 213;
        const auto       wa = random_rows(rng, type, K, M);
        std::vector<float> vb(static_cast<size_t>(K));
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (float & f : vb) f = nd(rng);
        Product plain(ggml_backend_cpu_buffer_type(), type, K, M, 1, wa, vb);
        Product packed(buft, type, K, M, 1, wa, vb);
        for (int threads : {1, 2, 3}) {
            ggml_backend_cpu_set_n_threads(backend.get(), threads);
            const auto want = plain.run(backend.get());
            const auto got  = packed.run(backend.get());
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), got.size() * sizeof(float))) << threads << " threads";
        }
    }
}

// The portable kernels (ggml_graph_compute with use_ref) read repacked
// weights a row at a time and give their usual bits.
TEST(Repack, PortableKernelsReadRepackedWeights) {
    REQUIRE_REPACK();
    for (ggml_type type : k_types) {
        SCOPED_TRACE(ggml_type_name(type));
        std::mt19937  rng(9);
        const int64_t K = 256, M = 24, N = 3;
        const auto    wa = random_rows(rng, type, K, M);
        std::vector<float> vb(size_t(K * N));
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (float & f : vb) f = nd(rng);
        std::vector<float> results[2];
        int                i = 0;
        for (ggml_backend_buffer_type_t bt : {ggml_backend_cpu_buffer_type(), buft}) {
            Product    p(bt, type, K, M, N, wa, vb);
            ggml_cplan plan = ggml_graph_plan(p.graph, 2, nullptr);
            std::vector<uint8_t> work(plan.work_size);
            plan.work_data = work.data();
            plan.use_ref   = true;
            ASSERT_EQ(ggml_graph_compute(p.graph, &plan), GGML_STATUS_SUCCESS);
            results[i].resize(size_t(M * N));
            ggml_backend_tensor_get(p.dst, results[i].data(), 0, ggml_nbytes(p.dst));
            ++i;
        }
        EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)));
    }
}

// Repacked weights feed matrix products only: other ops and views of them
// as weights are refused.
TEST(Repack, OnlyMatrixProductsReadRepackedWeights) {
    REQUIRE_REPACK();
    auto          ctx  = make_ctx(16);
    ggml_tensor * w    = ggml_new_tensor_2d(ctx.get(), k_types.front(), 256, 16);
    ggml_backend_buffer_ptr wbuf(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), buft));
    ASSERT_TRUE(wbuf);
    ggml_tensor *      ids  = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I32, 2);
    ggml_tensor *      x    = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 256, 2);
    ggml_backend_dev_t dev  = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_tensor *      mm   = ggml_mul_mat(ctx.get(), w, x);
    ggml_tensor *      rows = ggml_get_rows(ctx.get(), w, ids);
    ggml_tensor *      view = ggml_mul_mat(ctx.get(), ggml_view_2d(ctx.get(), w, 256, 8, w->nb[1], 0), x);
    ggml_backend_buffer_ptr abuf(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), ggml_backend_cpu_buffer_type()));
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, mm));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, rows));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, view));

    // Computing a graph that reads them otherwise fails cleanly.
    ggml_cgraph * g = ggml_new_graph(ctx.get());
    ggml_build_forward_expand(g, rows);
    ggml_backend_ptr backend(ggml_backend_cpu_init());
    EXPECT_EQ(ggml_backend_graph_compute(backend.get(), g), GGML_STATUS_FAILED);
}

// Clients choose a weight's buffer type by asking supports_op before the tensor is initialized:
// a dummy get_rows of a weight whose buffer is CPU_REPACK (a buffer of size 0, as whisper.cpp and
// llama.cpp make them) is refused as it will be once the weight is repacked, and the product is
// taken; a weight the buffer would leave in ggml's layout stays usable by any op.
TEST(Repack, BufferChoiceBeforeTheTensorIsInitialized) {
    REQUIRE_REPACK();
    auto               ctx = make_ctx(16);
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    for (ggml_type type : k_types) {
        SCOPED_TRACE(ggml_type_name(type));
        ggml_tensor * w      = ggml_new_tensor_2d(ctx.get(), type, 256, 16);
        ggml_tensor * odd    = ggml_new_tensor_2d(ctx.get(), type, 256, 13); // rows not in groups of 8
        ggml_tensor * ids    = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I32, 8);
        ggml_tensor * x      = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 256, 2);
        ggml_tensor * rows   = ggml_get_rows(ctx.get(), w, ids);
        ggml_tensor * mm     = ggml_mul_mat(ctx.get(), w, x);
        ggml_tensor * rows13 = ggml_get_rows(ctx.get(), odd, ids);
        ggml_backend_buffer_t empty = ggml_backend_buft_alloc_buffer(buft, 0);
        ASSERT_NE(empty, nullptr);
        w->buffer   = empty;
        odd->buffer = empty;
        EXPECT_FALSE(ggml_backend_dev_supports_op(dev, rows));
        EXPECT_TRUE(ggml_backend_dev_supports_op(dev, mm));
        EXPECT_TRUE(ggml_backend_dev_supports_op(dev, rows13));
        w->buffer   = nullptr;
        odd->buffer = nullptr;
        EXPECT_TRUE(ggml_backend_dev_supports_op(dev, rows)); // in a plain CPU buffer
        ggml_backend_buffer_free(empty);
    }
}

// The scheduler runs a graph whose weights are repacked: placement follows
// the weights to the CPU, and the result is the plain layout's.
TEST(Repack, SchedulerRunsGraphWithRepackedWeights) {
    REQUIRE_REPACK();
    std::mt19937  rng(21);
    const int64_t K = 512, M = 64;
    const ggml_type type = k_types.back();
    const auto    wa = random_rows(rng, type, K, M);
    std::vector<float> vb(static_cast<size_t>(K));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float & f : vb) f = nd(rng);

    std::vector<float> results[2];
    int                i = 0;
    for (ggml_backend_buffer_type_t bt : {ggml_backend_cpu_buffer_type(), buft}) {
        auto          wctx = make_ctx(2);
        ggml_tensor * w    = ggml_new_tensor_2d(wctx.get(), type, K, M);
        ggml_backend_buffer_ptr wbuf(ggml_backend_alloc_ctx_tensors_from_buft(wctx.get(), bt));
        ggml_backend_buffer_set_usage(wbuf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        ggml_backend_tensor_set(w, wa.data(), 0, wa.size());

        auto          gctx = make_ctx(8);
        ggml_tensor * x    = ggml_new_tensor_1d(gctx.get(), GGML_TYPE_F32, K);
        ggml_set_input(x);
        ggml_tensor * out = ggml_scale(gctx.get(), ggml_mul_mat(gctx.get(), w, x), 0.5f);
        ggml_set_output(out);
        ggml_cgraph * g = ggml_new_graph(gctx.get());
        ggml_build_forward_expand(g, out);

        ggml_backend_ptr     backend(ggml_backend_cpu_init());
        ggml_backend_t       backends[1] = {backend.get()};
        ggml_backend_sched_t sched       = ggml_backend_sched_new(backends, nullptr, 1, 64, false, true);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, g));
        ggml_backend_tensor_set(x, vb.data(), 0, vb.size() * sizeof(float));
        ASSERT_EQ(ggml_backend_sched_graph_compute(sched, g), GGML_STATUS_SUCCESS);
        results[i].resize(size_t(M));
        ggml_backend_tensor_get(out, results[i].data(), 0, ggml_nbytes(out));
        ggml_backend_sched_free(sched);
        ++i;
    }
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)));
}

// IQ4_XS rows interleaved by eight (Note [Interleaved IQ4_XS rows]) meet the kernels of
// every table this processor runs that has them (the AVX2 table's and the AVX-512 one's
// differ in their order of additions), each against the same table's kernels on ggml's
// layout: the same bits, with 1 to 8 columns, at odd strides, and from any group of rows on.
std::vector<const loom::cpu::KernelTable *> iq4_xs_interleaved_tables() {
    std::vector<const loom::cpu::KernelTable *> out;
    for (const loom::cpu::KernelTable * kt : loom::cpu::runnable_kernels()) {
        if (kt->gemv_repacked[GGML_TYPE_IQ4_XS] != nullptr) out.push_back(kt);
    }
    return out;
}

#define REQUIRE_IQ4_XS_TABLES(tables)                                                                \
    const auto tables = iq4_xs_interleaved_tables();                                                 \
    /* x86 with AVX2 has them: their absence is a failure, not a skip. */                            \
    if (loom::cpu::avx2_table_runs()) {                                                              \
        ASSERT_FALSE(tables.empty());                                                                \
    }                                                                                                \
    if (tables.empty()) {                                                                            \
        GTEST_SKIP() << "no kernel table here reads interleaved IQ4_XS rows (x86 AVX2 and AVX-512 "   \
                        "tables have them)";                                                         \
    }                                                                                                \
    static_assert(true)

// Rows of IQ4_XS in ggml's layout put in the interleaved layout by the buffer's own
// conversion (repack_write, which depends on no kernel table for this type).
std::vector<uint8_t> interleave_iq4_xs(const std::vector<uint8_t> & plain, int64_t K, int64_t rows) {
    auto                 ctx = make_ctx(1);
    ggml_tensor *        t   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_IQ4_XS, K, rows);
    std::vector<uint8_t> out(plain.size());
    t->data = out.data();
    loom::cpu::repack_write(t, plain.data(), 0, plain.size());
    return out;
}

// Q8_K columns of K normal values, ldb bytes apart.
std::vector<uint8_t> q8_k_columns(std::mt19937 & rng, int64_t K, int ncols, size_t ldb) {
    std::vector<uint8_t>            out(ldb * size_t(ncols));
    std::vector<float>              x(static_cast<size_t>(K));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int c = 0; c < ncols; ++c) {
        for (float & f : x) f = nd(rng);
        ggml_get_type_traits_cpu(GGML_TYPE_Q8_K)->from_float(x.data(), out.data() + size_t(c) * ldb, K);
    }
    return out;
}

TEST(Repack, InterleavedIq4xsKernelsGiveTheBitsOfGgmlLayout) {
    REQUIRE_IQ4_XS_TABLES(tables);
    std::mt19937 rng(17);
    int          cases = 0;
    for (const loom::cpu::KernelTable * kt : tables) {
        SCOPED_TRACE(kt->name);
        ASSERT_NE(kt->gemv_quant[GGML_TYPE_IQ4_XS], nullptr);
        // 1, 2, 3, 8, 9 and 17 blocks: every count of blocks past the last eight.
        for (int64_t K : {256, 512, 768, 2048, 2304, 4352}) {
            for (int64_t M : {8, 24, 40}) {
                const size_t               row    = ggml_row_size(GGML_TYPE_IQ4_XS, K);
                const std::vector<uint8_t> plain  = random_rows(rng, GGML_TYPE_IQ4_XS, K, M);
                const std::vector<uint8_t> packed = interleave_iq4_xs(plain, K, M);
                const size_t               ldb    = ggml_row_size(GGML_TYPE_Q8_K, K) + 36; // not a block's multiple
                const std::vector<uint8_t> b      = q8_k_columns(rng, K, loom::cpu::GEMV_MAX_COLS, ldb);
                for (int nc = 1; nc <= loom::cpu::GEMV_MAX_COLS; ++nc) {
                    const size_t       ldd = size_t(M) + 3;
                    std::vector<float> want(ldd * size_t(nc), -1.0f), got(want), part(want);
                    kt->gemv_quant[GGML_TYPE_IQ4_XS](K, plain.data(), row, M, b.data(), ldb, nc, want.data(), ldd);
                    kt->gemv_repacked[GGML_TYPE_IQ4_XS](K, packed.data(), row, M, b.data(), ldb, nc, got.data(), ldd);
                    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                        << "K " << K << " M " << M << " columns " << nc;
                    // The rows from the second group on, alone.
                    kt->gemv_repacked[GGML_TYPE_IQ4_XS](K, packed.data() + 8 * row, row, M - 8, b.data(), ldb, nc,
                                                        part.data() + 8, ldd);
                    for (int c = 0; c < nc; ++c) {
                        const size_t at = size_t(c) * ldd + 8;
                        ASSERT_EQ(0, std::memcmp(want.data() + at, part.data() + at, size_t(M - 8) * sizeof(float)))
                            << "K " << K << " M " << M << " columns " << nc << ": rows from 8";
                    }
                    ++cases;
                }
            }
        }
    }
    EXPECT_GT(cases, 0);
}

// The rows decoded once for many columns (Note [Rows decoded once]): from interleaved
// rows the bytes decode_rows writes from ggml's layout.
TEST(Repack, InterleavedIq4xsRowsDecodeAsGgmlLayout) {
    REQUIRE_IQ4_XS_TABLES(tables);
    std::mt19937 rng(19);
    int          cases = 0;
    for (const loom::cpu::KernelTable * kt : tables) {
        SCOPED_TRACE(kt->name);
        if (kt->decode_rows[GGML_TYPE_IQ4_XS] == nullptr) continue;
        ASSERT_NE(kt->decode_rows_repacked[GGML_TYPE_IQ4_XS], nullptr) << "rows decoded from ggml's layout only";
        for (int64_t K : {256, 2304}) {
            for (int64_t M : {8, 16, 24, 40}) { // whole and partial panels of 16
                const size_t               row    = ggml_row_size(GGML_TYPE_IQ4_XS, K);
                const std::vector<uint8_t> plain  = random_rows(rng, GGML_TYPE_IQ4_XS, K, M);
                const std::vector<uint8_t> packed = interleave_iq4_xs(plain, K, M);
                const size_t               bytes  = loom::cpu::decoded_rows_bytes(K, M);
                // The same filler in both: padding the decoders leave is compared too.
                std::vector<uint8_t> want(bytes, 0xa5), got(bytes, 0xa5);
                kt->decode_rows[GGML_TYPE_IQ4_XS](K, plain.data(), row, M, want.data());
                kt->decode_rows_repacked[GGML_TYPE_IQ4_XS](K, packed.data(), row, M, got.data());
                ASSERT_EQ(want, got) << "K " << K << " M " << M;
                ++cases;
            }
        }
    }
    EXPECT_GT(cases, 0);
}

// Q4_K in place with its qs by words (Note [Repacked Q4_K]) decodes, for the many-column
// products, into the same bytes as ggml's layout (the AVX2 table's panels of eight rows,
// Note [Q4_K panels of eight rows]): whole and partial panels, one and several blocks.
TEST(Repack, Q4kWordsDecodeAsGgmlLayout) {
    int cases = 0;
    for (const loom::cpu::KernelTable * kt : loom::cpu::runnable_kernels()) {
        SCOPED_TRACE(kt->name);
        if (kt->decode_rows_repacked[GGML_TYPE_Q4_K] == nullptr || kt->q4_K_rows_interleaved) continue;
        ASSERT_NE(kt->decode_rows[GGML_TYPE_Q4_K], nullptr);
        std::mt19937 rng(29);
        for (int64_t K : {256, 2304}) {
            for (int64_t M : {1, 8, 13, 24, 40}) {
                const size_t               row   = ggml_row_size(GGML_TYPE_Q4_K, K);
                const std::vector<uint8_t> plain = random_rows(rng, GGML_TYPE_Q4_K, K, M);
                // By the buffer's own conversion (the words layout on x86).
                auto                 ctx = make_ctx(1);
                ggml_tensor *        t   = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_Q4_K, K, M);
                std::vector<uint8_t> packed(plain.size());
                t->data = packed.data();
                loom::cpu::repack_write(t, plain.data(), 0, plain.size());
                const size_t         bytes = loom::cpu::decoded_rows_bytes(K, M);
                std::vector<uint8_t> want(bytes, 0xa5), got(bytes, 0xa5);
                kt->decode_rows[GGML_TYPE_Q4_K](K, plain.data(), row, M, want.data());
                kt->decode_rows_repacked[GGML_TYPE_Q4_K](K, packed.data(), row, M, got.data());
                ASSERT_EQ(want, got) << "K " << K << " M " << M;
                ++cases;
            }
        }
    }
    if (cases == 0) {
        GTEST_SKIP() << "no kernel table here decodes Q4_K repacked by words";
    }
}

// Any byte range of interleaved IQ4_XS rows converts both ways: what repack_write put at
// odd offsets, repack_read gives back, and a whole group round-trips.
TEST(Repack, InterleavedIq4xsRangesRoundTrip) {
    std::mt19937               rng(23);
    const int64_t              K = 768, M = 16;
    const std::vector<uint8_t> plain = random_rows(rng, GGML_TYPE_IQ4_XS, K, M);
    auto                       ctx   = make_ctx(1);
    ggml_tensor *              t     = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_IQ4_XS, K, M);
    std::vector<uint8_t>       mem(plain.size(), 0);
    t->data = mem.data();
    loom::cpu::repack_write(t, plain.data(), 0, plain.size());
    EXPECT_NE(mem, plain) << "stored in ggml's layout";
    std::vector<uint8_t> back(plain.size());
    loom::cpu::repack_read(t, back.data(), 0, back.size());
    ASSERT_EQ(back, plain);
    std::vector<uint8_t>                  shadow = plain;
    std::uniform_int_distribution<size_t> pos(0, plain.size());
    int                                   cases = 0;
    for (int i = 0; i < 300; ++i) {
        size_t a = pos(rng), b = pos(rng);
        if (a > b) std::swap(a, b);
        std::vector<uint8_t> part(b - a);
        for (auto & x : part) x = uint8_t(rng());
        loom::cpu::repack_write(t, part.data(), a, b - a);
        std::memcpy(shadow.data() + a, part.data(), b - a);
        size_t c = pos(rng), d = pos(rng);
        if (c > d) std::swap(c, d);
        std::vector<uint8_t> out(d - c);
        loom::cpu::repack_read(t, out.data(), c, d - c);
        ASSERT_EQ(0, std::memcmp(out.data(), shadow.data() + c, d - c)) << "read [" << c << ", " << d << ")";
        ++cases;
    }
    loom::cpu::repack_read(t, back.data(), 0, back.size());
    EXPECT_EQ(back, shadow);
    // Byte b of row r's block i lies where the Note says.
    for (size_t r = 0; r < 8; ++r) {
        for (size_t b = 0; b < loom::cpu::IQ4_XS_BLOCK_BYTES; ++b) {
            const size_t at = loom::cpu::iq4_xs_interleaved_place(r, b).at;
            const size_t want = b < 2 ? 2 * r + b : b < 4 ? 16 + 2 * r + b - 2 : b < 8 ? 32 + 4 * r + b - 4
                                                      : 64 + 32 * ((b - 8) / 4) + 4 * r + (b - 8) % 4;
            ASSERT_EQ(at, want) << "row " << r << " byte " << b;
            ASSERT_EQ(mem[8 * loom::cpu::IQ4_XS_BLOCK_BYTES + at], shadow[r * t->nb[1] + loom::cpu::IQ4_XS_BLOCK_BYTES + b]);
        }
    }
    EXPECT_GT(cases, 0);
}

// IQ4_XS with rows not in groups of 8 stays in ggml's layout in the buffer, and its
// products give the plain buffer's bits.
TEST(Repack, Iq4xsRowsNotInEightsKeepGgmlLayout) {
    REQUIRE_REPACK();
    bool has = false;
    for (ggml_type type : k_types) has = has || type == GGML_TYPE_IQ4_XS;
    if (!has) GTEST_SKIP() << "IQ4_XS is not repacked with this kernel table";
    std::mt19937     rng(29);
    ggml_backend_ptr backend(ggml_backend_cpu_init());
    int              cases = 0;
    for (int64_t M : {12, 20}) {
        for (int64_t N : {1, 3, 9}) {
            const int64_t      K  = 512;
            const auto         wa = random_rows(rng, GGML_TYPE_IQ4_XS, K, M);
            std::vector<float> vb(size_t(K * N));
            std::normal_distribution<float> nd(0.0f, 1.0f);
            for (float & f : vb) f = nd(rng);
            Product plain(ggml_backend_cpu_buffer_type(), GGML_TYPE_IQ4_XS, K, M, N, wa, vb);
            Product packed(buft, GGML_TYPE_IQ4_XS, K, M, N, wa, vb);
            EXPECT_EQ(0, std::memcmp(packed.a->data, wa.data(), wa.size())) << "M " << M;
            const auto want = plain.run(backend.get());
            const auto got  = packed.run(backend.get());
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), got.size() * sizeof(float))) << "M " << M << " N " << N;
            ++cases;
        }
    }
    EXPECT_GT(cases, 0);
}

} // namespace
