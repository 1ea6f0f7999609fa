// Matrix products and attention against the double reference.
//
// The reference of a product with f16/bf16/quantized weights is computed
// from the weights as stored (read back and dequantized), so the only
// expected error is the kernel's own: float accumulation, and the conversion
// of src1 to the weights' dot-product type.
//
// Thresholds (NMSE):
//   mul_mat F32 weights            1e-10  float accumulation over K <= 256
//   mul_mat F16 weights            1e-6   src1 may be rounded to f16 (2^-11: NMSE ~3e-8)
//   mul_mat BF16 weights           5e-5   src1 may be rounded to bf16 (2^-8: NMSE ~2.5e-6)
//   mul_mat Q8_0 / Q4_0 weights    2e-4   src1 is quantized to Q8_0 (error d/2 with d = amax/127:
//                                         NMSE ~1.5e-5 for uniform data)
//   out_prod F32 / F16             1e-10  f16 values are exact in f32
//   flash_attn_ext F32 K/V         1e-9   float dot products and softmax
//   flash_attn_ext F16 K/V         1e-6   q rounded to f16 for the K dot products, V accumulated
//                                         in f16 as ggml does (each ~2^-11 relative)
//   flash_attn_ext BF16 K/V        5e-5   q rounded to bf16 for the K dot products
//   flash_attn_ext quantized K/V   2e-4   q quantized to K's activation type (Q8_0, Q8_1, Q8_K)

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "test_util.h"

using namespace loomtest;

namespace {

double mul_mat_threshold(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32: return 1e-10;
        case GGML_TYPE_F16: return 1e-6;
        case GGML_TYPE_BF16: return 5e-5;
        default: return 2e-4;
    }
}

ggml_tensor * new_tensor(ggml_context * ctx, ggml_type type, const Shape & ne) {
    return ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
}

const ggml_type kWeightTypes[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};

bool is_quant(ggml_type t) {
    return ggml_is_quantized(t);
}

} // namespace

TEST(OpsMulMat, TypesAndBroadcast) {
    for (unsigned seed : seeds()) {
        std::mt19937 rng(seed);
        for (ggml_type type : kWeightTypes) {
            const int64_t K = is_quant(type) ? 32 * rand_int(rng, 1, 5) : odd_size(rng, 1, 99);
            const int64_t M = odd_size(rng, 1, 17);
            const int64_t N = odd_size(rng, 1, 9);
            const Shape   batches[][2] = {
                {{1, 1, 1, 1}, {1, 1, 1, 1}},
                {{2, 1, 1, 1}, {6, 2, 1, 1}},
                {{1, 1, 1, 1}, {3, 2, 1, 1}},
                {{3, 2, 1, 1}, {3, 2, 1, 1}},
            };
            for (const auto & bt : batches) {
                const Shape sa = {K, M, bt[0][0], bt[0][1]};
                const Shape sb = {K, N, bt[1][0], bt[1][1]};
                SCOPED_TRACE(std::string(ggml_type_name(type)) + " a " + shape_str(sa) + " b " + shape_str(sb));
                Context       ctx;
                ggml_tensor * a   = new_tensor(ctx, type, sa);
                ggml_tensor * b   = new_tensor(ctx, GGML_TYPE_F32, sb);
                const Array   A   = fill_random(a, rng);
                const Array   B   = fill_random(b, rng);
                ggml_tensor * out = ggml_mul_mat(ctx, a, b);
                ASSERT_EQ(out->type, GGML_TYPE_F32);
                check_modes(ctx, out, ref::mul_mat(A, B), mul_mat_threshold(type));
            }
        }
    }
}

namespace {

struct MulMatCase {
    int64_t K, M, N;
};

// mul_mat of random weights of each type against random columns, every case
// checked against the double-precision reference in every mode.
void check_mul_mat_cases(const std::vector<ggml_type> & types, const std::vector<MulMatCase> & cases, unsigned seed) {
    std::mt19937 rng(seed);
    for (ggml_type type : types) {
        for (const MulMatCase & c : cases) {
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " K " + std::to_string(c.K) + " M " +
                         std::to_string(c.M) + " N " + std::to_string(c.N));
            Context       ctx;
            ggml_tensor * a = ggml_new_tensor_2d(ctx, type, c.K, c.M);
            ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, c.K, c.N);
            const Array   A = fill_random(a, rng);
            const Array   B = fill_random(b, rng);
            check_modes(ctx, ggml_mul_mat(ctx, a, b), ref::mul_mat(A, B), mul_mat_threshold(type));
        }
    }
}

} // namespace

TEST(OpsMulMat, VectorAndLarger) {
    check_mul_mat_cases(std::vector<ggml_type>(std::begin(kWeightTypes), std::end(kWeightTypes)),
                        {{256, 67, 1}, {256, 67, 33}, {160, 129, 5}}, 131);
}

// Float weights with more columns than a matrix-vector call takes and a K
// that is odd (BF16 products work on pairs of k).
TEST(OpsMulMat, ManyColumnsOddK) {
    check_mul_mat_cases({GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}, {{77, 45, 19}, {301, 70, 40}, {1, 33, 13}}, 137);
}

TEST(OpsMulMat, HalfPrecisionColumns) {
    // ggml takes F16 and BF16 columns (im2col of an F16 kernel gives F16 columns for an F16
    // weight, as in whisper.cpp's convolutions); they are widened to F32 before the product.
    std::mt19937 rng(137);
    for (ggml_type btype : {GGML_TYPE_F16, GGML_TYPE_BF16}) {
        for (ggml_type type : {GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K}) {
            for (const MulMatCase & c : {MulMatCase{256, 5, 1}, MulMatCase{256, 13, 7}, MulMatCase{512, 33, 40}}) {
                SCOPED_TRACE(std::string(ggml_type_name(type)) + " x " + ggml_type_name(btype) + " K " +
                             std::to_string(c.K) + " M " + std::to_string(c.M) + " N " + std::to_string(c.N));
                Context       ctx;
                ggml_tensor * a = ggml_new_tensor_3d(ctx, type, c.K, c.M, 1);
                ggml_tensor * b = ggml_new_tensor_3d(ctx, btype, c.K, c.N, 2); // a broadcast over dim 2
                const Array   A = fill_random(a, rng);
                const Array   B = fill_random(b, rng);
                check_modes(ctx, ggml_mul_mat(ctx, a, b), ref::mul_mat(A, B), mul_mat_threshold(type));
            }
        }
        // Columns taken out of a larger F16 matrix (a view with a row stride of its own).
        Context       ctx;
        ggml_tensor * a    = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 64, 9);
        ggml_tensor * full = ggml_new_tensor_2d(ctx, btype, 96, 11);
        fill_random(full, rng);
        ggml_tensor * b = ggml_view_2d(ctx, full, 64, 11, full->nb[1], 16 * ggml_type_size(btype));
        const Array   A = fill_random(a, rng);
        check_modes(ctx, ggml_mul_mat(ctx, a, b), ref::mul_mat(A, read_tensor(b)), mul_mat_threshold(GGML_TYPE_F16));
    }
}

TEST(OpsMulMat, TransposedSrc1) {
    std::mt19937 rng(137);
    for (ggml_type type : kWeightTypes) {
        SCOPED_TRACE(ggml_type_name(type));
        const int64_t K = is_quant(type) ? 64 : 37, M = 11, N = 7;
        Context       ctx;
        ggml_tensor * a  = ggml_new_tensor_2d(ctx, type, K, M);
        ggml_tensor * bt = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, K);
        const Array   A  = fill_random(a, rng);
        fill_random(bt, rng);
        ggml_tensor * b = ggml_transpose(ctx, bt); // [K, N], elements N floats apart
        check_modes(ctx, ggml_mul_mat(ctx, a, b), ref::mul_mat(A, read_tensor(b)), mul_mat_threshold(type));
    }
}

TEST(OpsMulMat, PermutedSrc1) {
    std::mt19937 rng(139);
    for (ggml_type type : kWeightTypes) {
        SCOPED_TRACE(ggml_type_name(type));
        const int64_t K = is_quant(type) ? 96 : 45, M = 9, N = 5;
        Context       ctx;
        ggml_tensor * a      = ggml_new_tensor_4d(ctx, type, K, M, 1, 2);
        ggml_tensor * b_base = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, K, 3, N, 2);
        const Array   A      = fill_random(a, rng);
        fill_random(b_base, rng);
        ggml_tensor * b = ggml_permute(ctx, b_base, 0, 2, 1, 3); // [K, N, 3, 2]
        check_modes(ctx, ggml_mul_mat(ctx, a, b), ref::mul_mat(A, read_tensor(b)), mul_mat_threshold(type));
    }
}

// One column per matrix of b and several matrices of b per matrix of a, as
// in attention with grouped heads while generating: the CPU takes the heads
// that share a matrix of a as the columns of one product (Note [Heads as
// columns] in matmul.cpp). Against the reference, and bit for bit against
// each head computed as a product of its own.
TEST(OpsMulMat, GroupedHeadsOneColumn) {
    std::mt19937 rng(151);
    for (ggml_type type : kWeightTypes) {
        for (int64_t r2 : {4, 10}) {
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " r2 " + std::to_string(r2));
            const int64_t K = is_quant(type) ? 64 : 45, M = 37;
            Context       ctx;
            ggml_tensor * a = ggml_new_tensor_4d(ctx, type, K, M, 3, 2);
            ggml_tensor * b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, K, 1, 3 * r2, 2);
            const Array   A = fill_random(a, rng);
            const Array   B = fill_random(b, rng);
            ggml_tensor * out = ggml_mul_mat(ctx, a, b);
            check_modes(ctx, out, ref::mul_mat(A, B), mul_mat_threshold(type));

            std::vector<ggml_tensor *> alone;
            for (int64_t i3 = 0; i3 < 2; ++i3) {
                for (int64_t h = 0; h < 3 * r2; ++h) {
                    ggml_tensor * am = ggml_view_2d(ctx, a, K, M, a->nb[1], (h / r2) * a->nb[2] + i3 * a->nb[3]);
                    ggml_tensor * bh = ggml_view_2d(ctx, b, K, 1, b->nb[1], h * b->nb[2] + i3 * b->nb[3]);
                    alone.push_back(ggml_mul_mat(ctx, am, bh));
                }
            }
            for (int threads : {1, 3}) {
                ggml_cgraph * g = ggml_new_graph(ctx);
                ggml_build_forward_expand(g, out);
                for (ggml_tensor * t : alone) ggml_build_forward_expand(g, t);
                ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, g, threads), GGML_STATUS_SUCCESS);
                size_t i = 0;
                for (int64_t i3 = 0; i3 < 2; ++i3) {
                    for (int64_t h = 0; h < 3 * r2; ++h, ++i) {
                        const char * got = static_cast<const char *>(out->data) + h * out->nb[2] + i3 * out->nb[3];
                        ASSERT_EQ(0, std::memcmp(got, alone[i]->data, size_t(M) * sizeof(float)))
                            << "head " << h << ", " << threads << " threads";
                    }
                }
            }
        }
    }
}

// Products that read the same b, one after another in the graph, are
// computed as one node (Note [Products sharing a column]): each result is
// the reference's, and the same bits as the product computed alone, with
// any number of threads. A float product of more columns than the
// matrix-vector path takes (the GEMM) ends a group, and a product whose
// weights are another member's result is computed after it.
TEST(OpsMulMat, ProductsSharingAColumn) {
    std::mt19937 rng(157);
    const std::vector<std::vector<ggml_type>> groups = {
        {GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_0},
        {GGML_TYPE_Q8_0, GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_Q4_0, GGML_TYPE_BF16, GGML_TYPE_Q8_0},
        {GGML_TYPE_F32, GGML_TYPE_Q4_0},
    };
    const int64_t rows[] = {37, 256, 5, 64, 19, 96};
    for (const auto & types : groups) {
        for (int64_t N : {1, 3, 9}) {
            SCOPED_TRACE(std::to_string(types.size()) + " products, " + std::to_string(N) + " columns");
            const int64_t K = 256;
            Context       ctx;
            ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
            const Array   X = fill_random(x, rng);
            std::vector<ggml_tensor *> outs, alone;
            std::vector<Array>         want;
            for (size_t i = 0; i < types.size(); ++i) {
                ggml_tensor * w = ggml_new_tensor_2d(ctx, types[i], K, rows[i]);
                want.push_back(ref::mul_mat(fill_random(w, rng), X));
                outs.push_back(ggml_mul_mat(ctx, w, x));
                alone.push_back(ggml_mul_mat(ctx, w, x));
            }
            // Weights made by the second product (256 x N values).
            ggml_tensor * made = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, outs[1], K, N), x);

            for (ggml_tensor * t : alone) {
                ASSERT_EQ(compute(ctx, t, 1), GGML_STATUS_SUCCESS);
            }
            for (int threads : {1, 2, 3}) {
                SCOPED_TRACE(std::to_string(threads) + " threads");
                ggml_cgraph * g = ggml_new_graph(ctx);
                for (ggml_tensor * t : outs) ggml_build_forward_expand(g, t);
                ggml_build_forward_expand(g, made);
                for (ggml_tensor * t : outs) std::memset(t->data, 0xff, ggml_nbytes(t));
                ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, g, threads), GGML_STATUS_SUCCESS);
                for (size_t i = 0; i < outs.size(); ++i) {
                    EXPECT_TRUE(matches(outs[i], want[i], mul_mat_threshold(types[i]))) << "product " << i;
                    EXPECT_EQ(0, std::memcmp(outs[i]->data, alone[i]->data, ggml_nbytes(outs[i]))) << "product " << i;
                }
                EXPECT_TRUE(matches(made, ref::mul_mat(read_tensor(ggml_reshape_2d(ctx, outs[1], K, N)), X), 1e-10));
            }
        }
    }
}

TEST(OpsMulMat, ViewOfSrc0Rows) {
    // Weights taken as a view of some rows of a bigger matrix.
    std::mt19937 rng(149);
    for (ggml_type type : kWeightTypes) {
        SCOPED_TRACE(ggml_type_name(type));
        const int64_t K = is_quant(type) ? 64 : 33;
        Context       ctx;
        ggml_tensor * big = ggml_new_tensor_2d(ctx, type, K, 20);
        fill_random(big, rng);
        ggml_tensor * a = ggml_view_2d(ctx, big, K, 7, big->nb[1], 5 * big->nb[1]);
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, 3);
        const Array   B = fill_random(b, rng);
        check_modes(ctx, ggml_mul_mat(ctx, a, b), ref::mul_mat(read_tensor(a), B), mul_mat_threshold(type));
    }
}

TEST(OpsOutProd, TypesAndBroadcast) {
    std::mt19937 rng(151);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        const Shape batches[][2] = {
            {{1, 1, 1, 1}, {1, 1, 1, 1}},
            {{2, 1, 1, 1}, {4, 2, 1, 1}},
        };
        for (const auto & bt : batches) {
            const int64_t M = odd_size(rng, 1, 15), K = odd_size(rng, 1, 21), N = odd_size(rng, 1, 11);
            const Shape   sa = {M, K, bt[0][0], bt[0][1]};
            const Shape   sb = {N, K, bt[1][0], bt[1][1]};
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " a " + shape_str(sa) + " b " + shape_str(sb));
            Context       ctx;
            ggml_tensor * a = new_tensor(ctx, type, sa);
            ggml_tensor * b = new_tensor(ctx, GGML_TYPE_F32, sb);
            const Array   A = fill_random(a, rng);
            const Array   B = fill_random(b, rng);
            check_modes(ctx, ggml_out_prod(ctx, a, b), ref::out_prod(A, B), 1e-10);
        }
    }
}

TEST(OpsOutProd, TransposedSrc1) {
    std::mt19937  rng(157);
    Context       ctx;
    ggml_tensor * a  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 9, 13);
    ggml_tensor * bt = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 13, 5);
    const Array   A  = fill_random(a, rng);
    fill_random(bt, rng);
    ggml_tensor * b = ggml_transpose(ctx, bt); // [5, 13]
    check_modes(ctx, ggml_out_prod(ctx, a, b), ref::out_prod(A, read_tensor(b)), 1e-10);
}

namespace {

struct AttnCase {
    int64_t   d, dv, n_q, n_kv, n_head, n_head_kv, ne3;
    ggml_type kv_type;
    bool      mask;
    ggml_type mask_type;
    Shape     mask_shape; // ne2, ne3 of the mask in [0], [1]; extra rows in [2]
    float     scale;
    float     max_bias;
    float     softcap;
    bool      permuted_q;
    bool      kv_views;
};

std::string describe(const AttnCase & c) {
    return "d " + std::to_string(c.d) + " dv " + std::to_string(c.dv) + " n_q " + std::to_string(c.n_q) + " n_kv " +
           std::to_string(c.n_kv) + " heads " + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) +
           " ne3 " + std::to_string(c.ne3) + " kv " + ggml_type_name(c.kv_type) +
           (c.mask ? std::string(" mask ") + ggml_type_name(c.mask_type) : std::string(" no mask")) + " scale " +
           std::to_string(c.scale) + " max_bias " + std::to_string(c.max_bias) + " softcap " +
           std::to_string(c.softcap) + (c.permuted_q ? " permuted q" : "") + (c.kv_views ? " kv views" : "");
}

const AttnCase kAttnCases[] = {
    {64, 64, 5, 37, 4, 2, 1, GGML_TYPE_F16, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    {64, 64, 5, 37, 4, 2, 1, GGML_TYPE_F32, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    {40, 40, 1, 19, 3, 3, 2, GGML_TYPE_F32, false, GGML_TYPE_F16, {1, 1, 0, 0}, 0.158f, 0.0f, 0.0f, false, false},
    {40, 40, 1, 19, 3, 3, 2, GGML_TYPE_F16, false, GGML_TYPE_F16, {1, 1, 0, 0}, 0.158f, 0.0f, 0.0f, false, false},
    {32, 24, 7, 33, 6, 2, 1, GGML_TYPE_F16, true, GGML_TYPE_F16, {6, 1, 0, 0}, 1.0f, 0.0f, 20.0f, false, false},
    {32, 24, 7, 33, 6, 2, 1, GGML_TYPE_F32, true, GGML_TYPE_F16, {6, 1, 0, 0}, 1.0f, 0.0f, 20.0f, false, false},
    {32, 32, 3, 17, 8, 1, 2, GGML_TYPE_F32, true, GGML_TYPE_F16, {1, 2, 0, 0}, 0.18f, 8.0f, 0.0f, false, false},
    {32, 32, 3, 17, 6, 3, 2, GGML_TYPE_F16, true, GGML_TYPE_F16, {2, 1, 3, 0}, 0.18f, 8.0f, 0.0f, true, false},
    {48, 48, 9, 41, 4, 4, 1, GGML_TYPE_F16, true, GGML_TYPE_F16, {1, 1, 3, 0}, 0.144f, 0.0f, 0.0f, true, true},
    {48, 48, 9, 41, 4, 2, 1, GGML_TYPE_F32, true, GGML_TYPE_F32, {1, 1, 0, 0}, 0.144f, 0.0f, 0.0f, true, true},
    {64, 64, 3, 301, 2, 1, 1, GGML_TYPE_F16, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    {64, 64, 3, 301, 2, 1, 1, GGML_TYPE_F32, false, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    // Queries in groups of four and a remainder (the kernel's groups), each
    // with its own masked blocks of positions (the mask ends anywhere in 200).
    {64, 64, 10, 200, 3, 1, 1, GGML_TYPE_F16, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    {32, 32, 11, 150, 2, 2, 1, GGML_TYPE_F32, true, GGML_TYPE_F32, {1, 1, 0, 0}, 0.2f, 0.0f, 30.0f, true, false},
    // Quantized and bf16 caches (llama.cpp's -ctk / -ctv): the K rows dotted
    // in their own type, the V rows converted to f32.
    {64, 64, 5, 37, 4, 2, 1, GGML_TYPE_Q8_0, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, true},
    {64, 64, 5, 37, 4, 2, 1, GGML_TYPE_Q4_0, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, false},
    {32, 32, 3, 17, 6, 3, 2, GGML_TYPE_Q4_1, true, GGML_TYPE_F16, {2, 1, 3, 0}, 0.18f, 8.0f, 0.0f, true, true},
    {64, 64, 9, 41, 4, 4, 1, GGML_TYPE_Q5_0, true, GGML_TYPE_F32, {1, 1, 0, 0}, 1.0f, 0.0f, 20.0f, false, false},
    {64, 64, 3, 301, 2, 1, 1, GGML_TYPE_Q5_1, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, false, true},
    {32, 32, 5, 37, 4, 2, 1, GGML_TYPE_IQ4_NL, false, GGML_TYPE_F16, {1, 1, 0, 0}, 0.177f, 0.0f, 0.0f, false, false},
    {64, 64, 5, 70, 4, 2, 1, GGML_TYPE_BF16, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.125f, 0.0f, 0.0f, true, true},
    {256, 256, 3, 70, 2, 1, 1, GGML_TYPE_Q4_K, true, GGML_TYPE_F16, {1, 1, 0, 0}, 0.0625f, 0.0f, 0.0f, false, true},
};

double attn_threshold(ggml_type kv) {
    switch (kv) {
        case GGML_TYPE_F32: return 1e-9;
        case GGML_TYPE_F16: return 1e-6;
        case GGML_TYPE_BF16: return 5e-5;
        default: return 2e-4;
    }
}

// A causal-looking mask: -inf above a random diagonal (never in column 0),
// small random values elsewhere.
Array fill_attn_mask(ggml_tensor * mask, std::mt19937 & rng) {
    Array m = random_array(shape_of(mask), rng, -1.0, 1.0);
    for (int64_t i3 = 0; i3 < m.ne[3]; ++i3) {
        for (int64_t i2 = 0; i2 < m.ne[2]; ++i2) {
            for (int64_t i1 = 0; i1 < m.ne[1]; ++i1) {
                const int64_t limit = rand_int(rng, 1, m.ne[0]);
                for (int64_t i0 = limit; i0 < m.ne[0]; ++i0) {
                    m(i0, i1, i2, i3) = -INFINITY;
                }
            }
        }
    }
    write_tensor(mask, m);
    return read_tensor(mask);
}

} // namespace

TEST(OpsFlashAttn, Ext) {
    std::mt19937 rng(163);
    for (const AttnCase & c : kAttnCases) {
        SCOPED_TRACE(describe(c));
        Context ctx;

        ggml_tensor * q;
        if (c.permuted_q) {
            // As projected: [d, n_head, n_q], then heads and tokens swapped.
            ggml_tensor * q_base = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c.d, c.n_head, c.n_q, c.ne3);
            fill_random(q_base, rng, -2.0, 2.0);
            q = ggml_permute(ctx, q_base, 0, 2, 1, 3);
        } else {
            q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, c.d, c.n_q, c.n_head, c.ne3);
            fill_random(q, rng, -2.0, 2.0);
        }

        ggml_tensor * k;
        ggml_tensor * v;
        if (c.kv_views) {
            // The first n_kv cells of a longer cache.
            ggml_tensor * k_cache = ggml_new_tensor_4d(ctx, c.kv_type, c.d, c.n_kv + 10, c.n_head_kv, c.ne3);
            ggml_tensor * v_cache = ggml_new_tensor_4d(ctx, c.kv_type, c.dv, c.n_kv + 10, c.n_head_kv, c.ne3);
            fill_random(k_cache, rng);
            fill_random(v_cache, rng);
            k = ggml_view_4d(ctx, k_cache, c.d, c.n_kv, c.n_head_kv, c.ne3, k_cache->nb[1], k_cache->nb[2],
                             k_cache->nb[3], 0);
            v = ggml_view_4d(ctx, v_cache, c.dv, c.n_kv, c.n_head_kv, c.ne3, v_cache->nb[1], v_cache->nb[2],
                             v_cache->nb[3], 0);
        } else {
            k = ggml_new_tensor_4d(ctx, c.kv_type, c.d, c.n_kv, c.n_head_kv, c.ne3);
            v = ggml_new_tensor_4d(ctx, c.kv_type, c.dv, c.n_kv, c.n_head_kv, c.ne3);
            fill_random(k, rng);
            fill_random(v, rng);
        }

        ggml_tensor * mask = nullptr;
        Array         M;
        if (c.mask) {
            mask = ggml_new_tensor_4d(ctx, c.mask_type, c.n_kv, c.n_q + c.mask_shape[2], c.mask_shape[0],
                                      c.mask_shape[1]);
            M    = fill_attn_mask(mask, rng);
        }

        ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, mask, c.scale, c.max_bias, c.softcap);
        ASSERT_EQ(out->type, GGML_TYPE_F32);
        ASSERT_EQ(shape_of(out), (Shape{c.dv, c.n_head, c.n_q, c.ne3}));
        const Array want = ref::flash_attn(read_tensor(q), read_tensor(k), read_tensor(v), c.mask ? &M : nullptr,
                                           double(c.scale), double(c.max_bias), double(c.softcap));
        check_modes(ctx, out, want, attn_threshold(c.kv_type));
    }
}

// Sinks: one score per head with no value row; one sink below every score,
// one far above (the output shrinks toward zero), a fully masked row (only
// the sink counts: zeros).
TEST(OpsFlashAttn, Sinks) {
    std::mt19937  rng(163);
    Context       ctx;
    const int64_t d = 40, n_q = 6, n_kv = 37, n_head = 4, n_head_kv = 2;
    ggml_tensor * q    = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d, n_q, n_head);
    ggml_tensor * k    = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, d, n_kv, n_head_kv);
    ggml_tensor * v    = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, d, n_kv, n_head_kv);
    ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n_kv, n_q);
    fill_random(q, rng);
    fill_random(k, rng);
    fill_random(v, rng);
    Array M = fill_attn_mask(mask, rng);
    for (int64_t j = 0; j < n_kv; ++j) { // row 2 fully masked
        static_cast<ggml_fp16_t *>(mask->data)[2 * n_kv + j] = ggml_fp32_to_fp16(-INFINITY);
        M(j, 2, 0, 0)                                         = -INFINITY;
    }
    ggml_tensor * sinks = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_head);
    const float   sv[4] = {-20.0f, 0.5f, 3.0f, 40.0f};
    std::memcpy(sinks->data, sv, sizeof(sv));
    const std::vector<double> S(sv, sv + 4);
    ggml_tensor * out = ggml_flash_attn_ext(ctx, q, k, v, mask, 0.2f, 0.0f, 0.0f);
    ggml_flash_attn_ext_add_sinks(out, sinks);
    ggml_flash_attn_ext_set_n_kv_max(out, int32_t(n_kv));
    EXPECT_EQ(out->op_params[4], int32_t(n_kv));
    const Array want = ref::flash_attn(read_tensor(q), read_tensor(k), read_tensor(v), &M, double(0.2f), 0.0, 0.0, &S);
    check_modes(ctx, out, want, attn_threshold(GGML_TYPE_F16));
    EXPECT_DEATH(ggml_flash_attn_ext_add_sinks(out, sinks), "has sinks already");
    EXPECT_DEATH(ggml_flash_attn_ext_set_n_kv_max(out, -1), "negative");
}

TEST(OpsFlashAttn, MatchesUnfusedAttention) {
    // softmax(scale * k^T q + mask) composed from mul_mat and soft_max_ext
    // gives the same result as the fused op (both f32).
    std::mt19937  rng(167);
    Context       ctx;
    const int64_t d = 32, n_q = 5, n_kv = 13, n_head = 4;
    ggml_tensor * q    = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d, n_q, n_head);
    ggml_tensor * k    = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d, n_kv, n_head);
    ggml_tensor * v    = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, d, n_kv, n_head);
    ggml_tensor * mask = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n_kv, n_q);
    fill_random(q, rng);
    fill_random(k, rng);
    fill_random(v, rng);
    fill_attn_mask(mask, rng);
    const float   scale = 0.25f;
    ggml_tensor * fused = ggml_flash_attn_ext(ctx, q, k, v, mask, scale, 0.0f, 0.0f); // [d, n_head, n_q]

    ggml_tensor * kq  = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, k, q), mask, scale, 0.0f); // [n_kv, n_q, n_head]
    ggml_tensor * vt  = ggml_cont(ctx, ggml_transpose(ctx, v));                             // [n_kv, d, n_head]
    ggml_tensor * kqv = ggml_mul_mat(ctx, vt, kq);                                          // [d, n_q, n_head]
    ggml_tensor * unfused = ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3));             // [d, n_head, n_q]

    ASSERT_EQ(compute(ctx, {fused, unfused}, RunMode{2, false}), GGML_STATUS_SUCCESS);
    EXPECT_TRUE(matches(fused, read_tensor(unfused), 1e-9));
}
