// The BLAS backend: its place in the registry, its products against the
// CPU's on layouts the conformance cases do not reach, and the scheduler
// with [BLAS, CPU]: large products run on BLAS straight from the CPU's
// buffers (no copies, no splits beyond the changes of backend), small ones
// stay on the CPU, and results equal a CPU-only run within the error of a
// different summation order.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend_test_helpers.h"
#include "reference.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-blas.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"

using loomtest::LogCapture;

using loomtest::nmse;

namespace {

// Whether BLAS takes Q4_0 products of a 512-token prompt here, as Note
// [BLAS threshold] states the rule, worked out from the environment and the
// processor rather than from the policy under test:
//   - LOOM_BLAS_MIN_BATCH=n (n a positive integer): every product of n
//     columns or more, so the prompt's when n <= 512;
//   - otherwise Q4_0 from 64 columns, unless the CPU computes with an
//     AVX-512 table (VNNI): the best this processor runs, as the compiler's
//     CPU model tells, or a lesser one named by LOOM_CPU_KERNELS.
bool q4_0_prompts_on_blas() {
    if (const char * v = std::getenv("LOOM_BLAS_MIN_BATCH")) {
        char *          end = nullptr;
        const long long n   = std::strtoll(v, &end, 10);
        if (end != v && *end == '\0' && n > 0) {
            return n <= 512;
        }
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const bool avx512_vnni = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                             __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
    const bool avx512_vnni = false;
#endif
    const char * table  = std::getenv("LOOM_CPU_KERNELS");
    const bool   lesser = table != nullptr && (std::strcmp(table, "avx2") == 0 || std::strcmp(table, "portable") == 0);
    return !avx512_vnni || lesser;
}

std::vector<float> random_values(size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float>                    v(n);
    for (float & x : v) x = u(rng);
    return v;
}

// Fills t (contiguous, any weight type) with random values.
void fill(ggml_tensor * t, unsigned seed) {
    const int64_t              n = ggml_nelements(t);
    const std::vector<float>   v = random_values(size_t(n), seed);
    std::vector<uint8_t>       bytes(ggml_nbytes(t));
    switch (t->type) {
        case GGML_TYPE_F32: std::memcpy(bytes.data(), v.data(), bytes.size()); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(v.data(), reinterpret_cast<ggml_fp16_t *>(bytes.data()), n); break;
        case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(v.data(), reinterpret_cast<ggml_bf16_t *>(bytes.data()), n); break;
        default: ggml_quantize_chunk(t->type, v.data(), bytes.data(), 0, ggml_nrows(t), t->ne[0], nullptr); break;
    }
    ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
}

std::vector<float> read_f32(const ggml_tensor * t) {
    EXPECT_EQ(t->type, GGML_TYPE_F32);
    EXPECT_TRUE(ggml_is_contiguous(t));
    std::vector<float> v(size_t(ggml_nelements(t)));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}


// The CPU quantises activations to 8 bits against quantized weights; BLAS
// multiplies them in F32. Elsewhere only the summation order differs.
// The CPU quantises activations against quantized weights and rounds them
// to F16/BF16 against F16/BF16 weights on its matrix-vector path (up to
// eight columns), as ggml does; BLAS multiplies them in F32.
double tolerance(ggml_type weights) {
    switch (weights) {
        case GGML_TYPE_F32: return 1e-9;
        case GGML_TYPE_F16: return 1e-6;
        case GGML_TYPE_BF16: return 2e-5;
        default: return 5e-4;
    }
}

bool is_view_op(ggml_op op) {
    return op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE || op == GGML_OP_TRANSPOSE;
}

// ---- registry and device ---------------------------------------------------

TEST(BlasRegistry, FoundByNameBeforeTheCpu) {
    ggml_backend_load_all();
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("blas");
    ASSERT_NE(reg, nullptr);
    EXPECT_EQ(reg, ggml_backend_blas_reg());
    ASSERT_EQ(ggml_backend_reg_dev_count(reg), 1u);

    // Listed before the CPU (as in ggml), which stays reachable by name and type.
    size_t blas_at = SIZE_MAX, cpu_at = SIZE_MAX;
    for (size_t i = 0; i < ggml_backend_reg_count(); ++i) {
        if (ggml_backend_reg_get(i) == reg) blas_at = i;
        if (ggml_backend_reg_get(i) == ggml_backend_cpu_reg()) cpu_at = i;
    }
    EXPECT_LT(blas_at, cpu_at);
    ggml_backend_dev_t cpu_dev = ggml_backend_dev_by_name("CPU");
    ASSERT_NE(cpu_dev, nullptr);
    EXPECT_EQ(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU), cpu_dev);
    ggml_backend_ptr best(ggml_backend_init_best());
    ASSERT_TRUE(best);
    EXPECT_TRUE(ggml_backend_is_cpu(best.get()));

    ggml_backend_dev_t dev = ggml_backend_dev_by_name("BLAS");
    ASSERT_NE(dev, nullptr);
    EXPECT_EQ(dev, ggml_backend_reg_dev_get(reg, 0));
    EXPECT_EQ(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_ACCEL), dev);
    EXPECT_EQ(ggml_backend_dev_type(dev), GGML_BACKEND_DEVICE_TYPE_ACCEL);
    ggml_backend_dev_props props;
    ggml_backend_dev_get_props(dev, &props);
    EXPECT_STREQ(props.name, "BLAS");
    EXPECT_GT(std::strlen(props.description), 0u);
    EXPECT_EQ(props.memory_total, 0u); // its tensors are in the CPU's memory
    EXPECT_TRUE(props.caps.buffer_from_host_ptr);
    EXPECT_FALSE(props.caps.events);

    ggml_backend_ptr blas(ggml_backend_init_by_name("BLAS", nullptr));
    ASSERT_TRUE(blas);
    EXPECT_TRUE(ggml_backend_is_blas(blas.get()));
    EXPECT_FALSE(ggml_backend_is_cpu(blas.get()));
    EXPECT_STREQ(ggml_backend_name(blas.get()), "BLAS");
    EXPECT_EQ(ggml_backend_get_device(blas.get()), dev);
    EXPECT_FALSE(ggml_backend_is_blas(best.get()));
    EXPECT_FALSE(ggml_backend_is_blas(nullptr));
}

TEST(BlasRegistry, SharesTheCpuBuffers) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_name("BLAS");
    ASSERT_NE(dev, nullptr);
    // The same buffer type object, which is what the scheduler compares.
    EXPECT_EQ(ggml_backend_dev_buffer_type(dev), ggml_backend_cpu_buffer_type());
    EXPECT_TRUE(ggml_backend_dev_supports_buft(dev, ggml_backend_cpu_buffer_type()));
    EXPECT_EQ(ggml_backend_dev_host_buffer_type(dev), nullptr);

    alignas(64) static float storage[32];
    ggml_backend_buffer_ptr  mapped(ggml_backend_dev_buffer_from_host_ptr(dev, storage, sizeof(storage), 16));
    ASSERT_TRUE(mapped);
    EXPECT_TRUE(ggml_backend_buffer_is_host(mapped.get()));
    EXPECT_EQ(ggml_backend_buffer_get_base(mapped.get()), static_cast<void *>(storage));
    EXPECT_TRUE(ggml_backend_dev_supports_buft(dev, ggml_backend_buffer_get_type(mapped.get())));
}

TEST(BlasRegistry, ThreadsThroughTheProcAddress) {
    auto fn = reinterpret_cast<ggml_backend_set_n_threads_t>(
        ggml_backend_reg_get_proc_address(ggml_backend_blas_reg(), "ggml_backend_set_n_threads"));
    ASSERT_NE(fn, nullptr);
    ggml_backend_ptr blas(ggml_backend_blas_init());
    ASSERT_TRUE(blas);
    fn(blas.get(), 3);
    ggml_backend_blas_set_n_threads(blas.get(), 1);
    EXPECT_EQ(ggml_backend_reg_get_proc_address(ggml_backend_blas_reg(), "no_such_function"), nullptr);
}

TEST(BlasRegistryDeathTest, SetThreadsChecksItsArguments) {
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_ptr blas(ggml_backend_blas_init());
    EXPECT_DEATH(ggml_backend_blas_set_n_threads(cpu.get(), 2), "ggml_backend_blas_set_n_threads.*not the BLAS");
    EXPECT_DEATH(ggml_backend_blas_set_n_threads(blas.get(), 0), "n_threads = 0 out of range");
}

// ---- products computed directly on the backend ------------------------------

// A graph of one product, in the CPU's buffer, computed on the CPU and on
// BLAS (graph_compute does not consult supports_op, so any size goes).
struct Product {
    ggml_context_ptr        ctx;
    ggml_backend_buffer_ptr buf;
    ggml_tensor *           out   = nullptr;
    ggml_cgraph *           graph = nullptr;
};

Product make_product(const std::function<ggml_tensor *(ggml_context *)> & build, unsigned seed) {
    Product          p;
    ggml_init_params params = {32 * ggml_tensor_overhead() + 2 * ggml_graph_overhead(), nullptr, true};
    p.ctx.reset(ggml_init(params));
    p.out = build(p.ctx.get());
    if (!ggml_is_contiguous(p.out)) {
        p.out = ggml_cont(p.ctx.get(), p.out);
    }
    p.graph = ggml_new_graph(p.ctx.get());
    ggml_build_forward_expand(p.graph, p.out);
    p.buf.reset(ggml_backend_alloc_ctx_tensors_from_buft(p.ctx.get(), ggml_backend_cpu_buffer_type()));
    // Inputs: the tensors with memory of their own and no op.
    for (ggml_tensor * t = ggml_get_first_tensor(p.ctx.get()); t != nullptr; t = ggml_get_next_tensor(p.ctx.get(), t)) {
        if (t->op == GGML_OP_NONE && t->view_src == nullptr) {
            fill(t, seed++);
        }
    }
    return p;
}

struct KernelCase {
    std::string                                     name;
    ggml_type                                       weights;
    std::function<ggml_tensor *(ggml_context *)>    build;
};

std::vector<KernelCase> kernel_cases() {
    std::vector<KernelCase> cases;
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        const std::string tn = ggml_type_name(t);
        cases.push_back({"mul_mat_" + tn + "_broadcast", t, [t](ggml_context * c) {
                             // src0 [64, 19, 2, 1] over src1 [64, 7, 4, 3]: factors 2 and 3.
                             return ggml_mul_mat(c, ggml_new_tensor_4d(c, t, 64, 19, 2, 1),
                                                 ggml_new_tensor_4d(c, GGML_TYPE_F32, 64, 7, 4, 3));
                         }});
        cases.push_back({"mul_mat_" + tn + "_rows_of_a_view", t, [t](ggml_context * c) {
                             ggml_tensor * a = ggml_new_tensor_2d(c, t, 96, 40);
                             a = ggml_view_2d(c, a, 96, 11, a->nb[1] * 3, a->nb[1] * 2); // every third row
                             return ggml_mul_mat(c, a, ggml_new_tensor_2d(c, GGML_TYPE_F32, 96, 5));
                         }});
        cases.push_back({"out_prod_" + tn, t, [t](ggml_context * c) {
                             // src0 [64, 9, 2, 1] over src1 [5, 9, 4, 1].
                             return ggml_out_prod(c, ggml_new_tensor_4d(c, t, 64, 9, 2, 1),
                                                  ggml_new_tensor_4d(c, GGML_TYPE_F32, 5, 9, 4, 1));
                         }});
    }
    // Weights of more than a conversion panel (2^20 elements): several
    // panels per matrix, a last one shorter.
    cases.push_back({"mul_mat_panels_broadcast", GGML_TYPE_Q4_0, [](ggml_context * c) {
                         return ggml_mul_mat(c, ggml_new_tensor_3d(c, GGML_TYPE_Q4_0, 1024, 1100, 2),
                                             ggml_new_tensor_3d(c, GGML_TYPE_F32, 1024, 3, 4));
                     }});
    cases.push_back({"out_prod_panels", GGML_TYPE_F16, [](ggml_context * c) {
                         // Panels split K: the products accumulate.
                         return ggml_out_prod(c, ggml_new_tensor_2d(c, GGML_TYPE_F16, 1024, 2100),
                                              ggml_new_tensor_2d(c, GGML_TYPE_F32, 5, 2100));
                     }});
    cases.push_back({"out_prod_panels_transposed_b", GGML_TYPE_Q8_0, [](ggml_context * c) {
                         ggml_tensor * bt = ggml_new_tensor_2d(c, GGML_TYPE_F32, 2100, 6);
                         return ggml_out_prod(c, ggml_new_tensor_2d(c, GGML_TYPE_Q8_0, 1024, 2100),
                                              ggml_transpose(c, bt));
                     }});
    cases.push_back({"mul_mat_transposed_b", GGML_TYPE_F32, [](ggml_context * c) {
                         ggml_tensor * bt = ggml_new_tensor_2d(c, GGML_TYPE_F32, 6, 33);
                         return ggml_mul_mat(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, 33, 10), ggml_transpose(c, bt));
                     }});
    cases.push_back({"mul_mat_permuted_b", GGML_TYPE_F16, [](ggml_context * c) {
                         ggml_tensor * b = ggml_new_tensor_3d(c, GGML_TYPE_F32, 32, 3, 5);
                         return ggml_mul_mat(c, ggml_new_tensor_3d(c, GGML_TYPE_F16, 32, 11, 3),
                                             ggml_permute(c, b, 0, 2, 1, 3));
                     }});
    cases.push_back({"mul_mat_one_column", GGML_TYPE_Q8_0, [](ggml_context * c) {
                         return ggml_mul_mat(c, ggml_new_tensor_2d(c, GGML_TYPE_Q8_0, 64, 21),
                                             ggml_new_tensor_2d(c, GGML_TYPE_F32, 64, 1));
                     }});
    cases.push_back({"out_prod_transposed_b", GGML_TYPE_F32, [](ggml_context * c) {
                         ggml_tensor * bt = ggml_new_tensor_2d(c, GGML_TYPE_F32, 16, 7);
                         return ggml_out_prod(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, 11, 16), ggml_transpose(c, bt));
                     }});
    return cases;
}

class BlasKernels : public ::testing::TestWithParam<size_t> {};

TEST_P(BlasKernels, MatchTheCpu) {
    const KernelCase c = kernel_cases()[GetParam()];
    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_ptr blas(ggml_backend_blas_init());
    ASSERT_TRUE(cpu && blas);
    ggml_backend_cpu_set_n_threads(cpu.get(), 2);
    ggml_backend_blas_set_n_threads(blas.get(), 2);

    Product p = make_product(c.build, 17);
    ASSERT_TRUE(p.buf);
    ASSERT_EQ(ggml_backend_graph_compute(cpu.get(), p.graph), GGML_STATUS_SUCCESS);
    const std::vector<float> want = read_f32(p.out);

    // The same inputs again; the product's memory filled with NaNs, so that
    // every element must be written. BLAS computes a graph of the product
    // alone (a CONT added for a non-contiguous result is the CPU's).
    Product       q    = make_product(c.build, 17);
    ggml_tensor * prod = q.out->op == GGML_OP_CONT ? q.out->src[0] : q.out;
    ggml_backend_tensor_memset(prod, 0xff, 0, ggml_nbytes(prod));
    ggml_cgraph * g = ggml_new_graph(q.ctx.get());
    ggml_build_forward_expand(g, prod);
    ASSERT_EQ(ggml_backend_graph_compute(blas.get(), g), GGML_STATUS_SUCCESS);
    if (prod != q.out) {
        ASSERT_EQ(ggml_backend_graph_compute(cpu.get(), q.graph), GGML_STATUS_SUCCESS);
    }
    const std::vector<float> got = read_f32(q.out);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(nmse(got, want), tolerance(c.weights)) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Blas, BlasKernels, ::testing::Range(size_t(0), kernel_cases().size()),
                         [](const ::testing::TestParamInfo<size_t> & param) { return kernel_cases()[param.param].name; });

TEST(BlasBackend, ThreadCountsAgree) {
    ggml_backend_ptr blas(ggml_backend_blas_init());
    ASSERT_TRUE(blas);
    auto build = [](ggml_context * c) {
        return ggml_mul_mat(c, ggml_new_tensor_2d(c, GGML_TYPE_Q4_0, 256, 300), ggml_new_tensor_2d(c, GGML_TYPE_F32, 256, 40));
    };
    std::vector<float> first;
    for (int n : {1, 2, 3}) {
        ggml_backend_blas_set_n_threads(blas.get(), n);
        Product p = make_product(build, 5);
        ASSERT_EQ(ggml_backend_graph_compute(blas.get(), p.graph), GGML_STATUS_SUCCESS);
        const std::vector<float> got = read_f32(p.out);
        if (first.empty()) {
            first = got;
        } else {
            EXPECT_LE(nmse(got, first), 1e-10) << n << " threads";
        }
    }
}

TEST(BlasBackend, RefusesOtherOps) {
    ggml_backend_ptr blas(ggml_backend_blas_init());
    ASSERT_TRUE(blas);
    Product p = make_product(
        [](ggml_context * c) {
            return ggml_add(c, ggml_new_tensor_1d(c, GGML_TYPE_F32, 8), ggml_new_tensor_1d(c, GGML_TYPE_F32, 8));
        },
        1);
    EXPECT_FALSE(ggml_backend_supports_op(blas.get(), p.out));
    LogCapture log;
    EXPECT_EQ(ggml_backend_graph_compute(blas.get(), p.graph), GGML_STATUS_FAILED);
    EXPECT_TRUE(log.contains("BLAS: cannot compute")) << log.text();

    // Products with activations BLAS cannot take in F32 are refused too.
    Product f16 = make_product(
        [](ggml_context * c) {
            return ggml_mul_mat(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, 64, 64), ggml_new_tensor_2d(c, GGML_TYPE_F16, 64, 64));
        },
        2);
    EXPECT_FALSE(ggml_backend_supports_op(blas.get(), f16.out));
}

TEST(BlasBackend, TakesOnlyLargeProducts) {
    ggml_backend_ptr blas(ggml_backend_blas_init());
    ASSERT_TRUE(blas);
    ggml_init_params params = {16 * ggml_tensor_overhead(), nullptr, true};
    ggml_context_ptr ctx(ggml_init(params));
    ggml_context *   c     = ctx.get();
    // Q4_0 weights of a transformer's width: BLAS wins at a prompt's batch
    // against the CPU's AVX2 kernels, not against its AVX-512 VNNI ones (see
    // Note [BLAS threshold]), and loses at one token.
    ggml_tensor *    w     = ggml_new_tensor_2d(c, GGML_TYPE_Q4_0, 1024, 1024);
    ggml_tensor *    small = ggml_mul_mat(c, w, ggml_new_tensor_2d(c, GGML_TYPE_F32, 1024, 1));
    ggml_tensor *    large = ggml_mul_mat(c, w, ggml_new_tensor_2d(c, GGML_TYPE_F32, 1024, 512));
    ggml_tensor *    tiny  = ggml_mul_mat(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, 4, 4), ggml_new_tensor_2d(c, GGML_TYPE_F32, 4, 512));
    EXPECT_FALSE(ggml_backend_supports_op(blas.get(), small));
    EXPECT_FALSE(ggml_backend_offload_op(blas.get(), small));
    EXPECT_EQ(ggml_backend_supports_op(blas.get(), large), q4_0_prompts_on_blas());
    EXPECT_EQ(ggml_backend_offload_op(blas.get(), large), q4_0_prompts_on_blas());
    EXPECT_FALSE(ggml_backend_supports_op(blas.get(), tiny));
    // The CPU's out_prod is far slower: BLAS takes it from small batches.
    ggml_tensor * grad = ggml_out_prod(c, ggml_new_tensor_2d(c, GGML_TYPE_F32, 1024, 512),
                                       ggml_new_tensor_2d(c, GGML_TYPE_F32, 256, 512));
    EXPECT_TRUE(ggml_backend_supports_op(blas.get(), grad));
    // Views cost nothing anywhere.
    EXPECT_TRUE(ggml_backend_supports_op(blas.get(), ggml_transpose(c, w)));
}

// ---- the scheduler with [BLAS, CPU] ---------------------------------------

// Weights of a feed-forward block in one WEIGHTS buffer of the CPU, one
// product per weight type.
struct Weights {
    ggml_context_ptr        ctx;
    ggml_backend_buffer_ptr buf;
    ggml_tensor *           up = nullptr, *gate = nullptr, *down = nullptr, *proj = nullptr, *norm = nullptr;
};

constexpr int64_t kDim = 256, kHidden = 512;

Weights make_weights(ggml_type up, ggml_type gate, ggml_type down, ggml_type proj) {
    Weights          w;
    ggml_init_params p = {8 * ggml_tensor_overhead(), nullptr, true};
    w.ctx.reset(ggml_init(p));
    ggml_context * c = w.ctx.get();
    w.up             = ggml_new_tensor_2d(c, up, kDim, kHidden);
    w.gate           = ggml_new_tensor_2d(c, gate, kDim, kHidden);
    w.down           = ggml_new_tensor_2d(c, down, kHidden, kDim);
    w.proj           = ggml_new_tensor_2d(c, proj, kDim, kDim);
    w.norm           = ggml_new_tensor_1d(c, GGML_TYPE_F32, kDim);
    w.buf.reset(ggml_backend_alloc_ctx_tensors_from_buft(c, ggml_backend_cpu_buffer_type()));
    ggml_backend_buffer_set_usage(w.buf.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    unsigned seed = 40;
    for (ggml_tensor * t : {w.up, w.gate, w.down, w.proj, w.norm}) fill(t, seed++);
    return w;
}

struct Block {
    ggml_context_ptr ctx;
    ggml_cgraph *    graph = nullptr;
    ggml_tensor *    x = nullptr, *out = nullptr;
    ggml_tensor *    scores = nullptr; // a product of two activations
};

// out = proj * (h + down * (silu(gate * n) * (up * n))), n = rms_norm(x) * norm,
// and scores = h h^T / dim (an out_prod, summed over the tokens) computed
// beside it: both operands are activations, so no weight decides where the
// product runs; the scheduler moves it up to BLAS as the buffer types match.
Block make_block(const Weights & w, int64_t tokens) {
    Block            b;
    ggml_init_params p = {64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    b.ctx.reset(ggml_init(p));
    ggml_context * c = b.ctx.get();
    b.x              = ggml_new_tensor_2d(c, GGML_TYPE_F32, kDim, tokens);
    ggml_set_name(b.x, "x");
    ggml_set_input(b.x);
    ggml_tensor * n  = ggml_mul(c, ggml_rms_norm(c, b.x, 1e-5f), w.norm);
    ggml_tensor * ff = ggml_mul(c, ggml_silu(c, ggml_mul_mat(c, w.gate, n)), ggml_mul_mat(c, w.up, n));
    ggml_tensor * h  = ggml_add(c, b.x, ggml_mul_mat(c, w.down, ff));
    b.out            = ggml_mul_mat(c, w.proj, h);
    ggml_set_name(b.out, "out");
    ggml_set_output(b.out);
    b.scores = ggml_scale(c, ggml_out_prod(c, h, h), 1.0f / float(kDim));
    ggml_set_name(b.scores, "scores");
    ggml_set_output(b.scores);
    b.graph = ggml_new_graph(c);
    ggml_build_forward_expand(b.graph, b.out);
    ggml_build_forward_expand(b.graph, b.scores);
    return b;
}

struct BlockRun {
    std::vector<float> out, scores;
    int                n_splits        = 0;
    int                backend_changes = 0;
    int                products_on_blas = 0, products_on_cpu = 0;
    bool               placement_follows_supports_op = true;
    size_t             bytes_copied = 0;
};

BlockRun run_block(const std::vector<ggml_backend_t> & backends, const Weights & w, int64_t tokens) {
    BlockRun                  r;
    ggml_backend_sched_t s = ggml_backend_sched_new(const_cast<ggml_backend_t *>(backends.data()), nullptr,
                                                    int(backends.size()), GGML_DEFAULT_GRAPH_SIZE, false, true);
    EXPECT_NE(s, nullptr);
    Block b = make_block(w, tokens);
    EXPECT_TRUE(ggml_backend_sched_alloc_graph(s, b.graph));
    const std::vector<float> x = random_values(size_t(kDim * tokens), 7);
    ggml_backend_tensor_set(b.x, x.data(), 0, ggml_nbytes(b.x));
    EXPECT_EQ(ggml_backend_sched_graph_compute(s, b.graph), GGML_STATUS_SUCCESS);
    r.out    = read_f32(b.out);
    r.scores = read_f32(b.scores);

    ggml_backend_t prev = nullptr;
    for (int i = 0; i < ggml_graph_n_nodes(b.graph); ++i) {
        ggml_tensor * node = ggml_graph_node(b.graph, i);
        if (is_view_op(node->op)) continue;
        ggml_backend_t on = ggml_backend_sched_get_tensor_backend(s, node);
        if (prev != nullptr && on != prev) ++r.backend_changes;
        prev = on;
        if (node->op == GGML_OP_MUL_MAT || node->op == GGML_OP_OUT_PROD) {
            const bool blas_here = ggml_backend_is_blas(on);
            (blas_here ? r.products_on_blas : r.products_on_cpu)++;
            // A product goes to BLAS exactly when BLAS takes it.
            if (backends.size() > 1 && blas_here != ggml_backend_supports_op(backends[0], node)) {
                r.placement_follows_supports_op = false;
            }
        } else if (ggml_backend_is_blas(on)) {
            r.placement_follows_supports_op = false; // BLAS computes products only
        }
    }
    r.n_splits = ggml_backend_sched_get_n_splits(s);
    loom_sched_stats st{};
    loom_sched_get_stats(s, &st);
    r.bytes_copied = st.bytes_copied;
    ggml_backend_sched_free(s);
    return r;
}

class BlasSched : public ::testing::Test {
  protected:
    void SetUp() override {
        cpu.reset(ggml_backend_cpu_init());
        blas.reset(ggml_backend_blas_init());
        ASSERT_TRUE(cpu && blas);
        ggml_backend_cpu_set_n_threads(cpu.get(), 2);
        ggml_backend_blas_set_n_threads(blas.get(), 2);
    }
    ggml_backend_ptr cpu, blas;
};

TEST_F(BlasSched, LargeProductsRunOnBlasWithoutCopies) {
    struct Types {
        ggml_type up, gate, down, proj;
    };
    // Which weight types BLAS takes depends on the measured thresholds; Q4_0
    // it takes at a 512-token batch unless the CPU has its AVX-512 VNNI
    // kernels. The other types are placed as supports_op says, whatever
    // that is.
    for (const Types & t : {Types{GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_0},
                            Types{GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0}}) {
        SCOPED_TRACE(std::string(ggml_type_name(t.up)) + "/" + ggml_type_name(t.gate) + "/" + ggml_type_name(t.down) +
                     "/" + ggml_type_name(t.proj));
        const Weights  w      = make_weights(t.up, t.gate, t.down, t.proj);
        const int64_t  tokens = 512;
        const BlockRun mixed  = run_block({blas.get(), cpu.get()}, w, tokens);
        const BlockRun alone  = run_block({cpu.get()}, w, tokens);

        if (t.up == GGML_TYPE_Q4_0 && q4_0_prompts_on_blas()) {
            EXPECT_EQ(mixed.products_on_blas, 5); // the four weights and scores
        } else {
            EXPECT_GE(mixed.products_on_blas, 1); // scores
        }
        EXPECT_TRUE(mixed.placement_follows_supports_op);
        // A split per change of backend, none for copies: both read the same buffers.
        EXPECT_EQ(mixed.n_splits, mixed.backend_changes + 1);
        EXPECT_EQ(mixed.bytes_copied, 0u);
        EXPECT_EQ(alone.n_splits, 1);

        // The CPU quantises activations against quantized weights (see tolerance()).
        double tol = 0;
        for (ggml_type wt : {t.up, t.gate, t.down, t.proj}) tol = std::max(tol, tolerance(wt));
        EXPECT_LE(nmse(mixed.out, alone.out), tol);
        EXPECT_LE(nmse(mixed.scores, alone.scores), tol);
    }
}

TEST_F(BlasSched, SmallProductsStayOnTheCpu) {
    const Weights w     = make_weights(GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0);
    const BlockRun     mixed = run_block({blas.get(), cpu.get()}, w, 2);
    const BlockRun     alone = run_block({cpu.get()}, w, 2);
    EXPECT_EQ(mixed.products_on_blas, 0);
    EXPECT_TRUE(mixed.placement_follows_supports_op);
    EXPECT_EQ(mixed.n_splits, 1);
    EXPECT_EQ(mixed.bytes_copied, 0u);
    // The same kernels on the same data: the same bits.
    EXPECT_EQ(mixed.out, alone.out);
    EXPECT_EQ(mixed.scores, alone.scores);
}

TEST_F(BlasSched, PlacementFollowsTheBatchSize) {
    // Around the thresholds, whatever they are, every product lands where
    // supports_op says and nothing is copied.
    const Weights w = make_weights(GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0);
    for (int64_t tokens : {1, 8, 16, 32, 64, 128}) {
        SCOPED_TRACE("tokens " + std::to_string(tokens));
        const BlockRun mixed = run_block({blas.get(), cpu.get()}, w, tokens);
        EXPECT_TRUE(mixed.placement_follows_supports_op);
        EXPECT_EQ(mixed.n_splits, mixed.backend_changes + 1);
        EXPECT_EQ(mixed.bytes_copied, 0u);
        const BlockRun alone = run_block({cpu.get()}, w, tokens);
        EXPECT_LE(nmse(mixed.out, alone.out), 5e-4);
    }
}

} // namespace
