// ggml_mul_mat_id against the double reference.
//
// The reference is computed from the experts as stored (read back and
// dequantized), so the only expected error is the kernel's own: float
// accumulation and the conversion of b to the experts' dot-product type.
//
// Thresholds (NMSE), as for mul_mat (test_ops_matmul.cpp):
//   F32 experts            1e-10
//   F16 experts            1e-6   b may be rounded to f16
//   BF16 experts           5e-5   b may be rounded to bf16
//   Q8_0 / Q4_0 experts    2e-4   b is quantized to Q8_0

#include <cstring>
#include <vector>

#include "test_util.h"

using namespace loomtest;

namespace {

double threshold(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F32: return 1e-10;
        case GGML_TYPE_F16: return 1e-6;
        case GGML_TYPE_BF16: return 5e-5;
        default: return 2e-4;
    }
}

const ggml_type kExpertTypes[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};

// ids [n_used, n_tokens] with values in [lo, hi], stored through the tensor's strides.
std::vector<int32_t> fill_ids(ggml_tensor * ids, std::mt19937 & rng, int64_t lo, int64_t hi) {
    std::vector<int32_t> v;
    for (int64_t t = 0; t < ids->ne[1]; ++t) {
        for (int64_t e = 0; e < ids->ne[0]; ++e) {
            const auto id = int32_t(rand_int(rng, lo, hi));
            *reinterpret_cast<int32_t *>(static_cast<char *>(ids->data) + e * ids->nb[0] + t * ids->nb[1]) = id;
            v.push_back(id);
        }
    }
    return v;
}

// [M, n_used, n_tokens]: as[:, :, id] * b[:, e % n_b, t] (ids inside [0, n_as); an id
// outside: test_bad_indices.cpp).
Array mul_mat_id_ref(const Array & as, const Array & b, const std::vector<int32_t> & ids, int64_t n_used) {
    const int64_t K = as.ne[0], M = as.ne[1], n_b = b.ne[1], n_tok = b.ne[2];
    Array         out({M, n_used, n_tok, 1});
    for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t e = 0; e < n_used; ++e) {
            const int32_t id = ids[size_t(t * n_used + e)];
            for (int64_t m = 0; m < M; ++m) {
                double s = 0.0;
                for (int64_t k = 0; k < K; ++k) {
                    s += as(k, m, id) * b(k, e % n_b, t);
                }
                out(m, e, t) = s;
            }
        }
    }
    return out;
}

} // namespace

TEST(OpsMulMatId, TypesAndBroadcast) {
    for (unsigned seed : seeds()) {
        std::mt19937 rng(seed);
        for (ggml_type type : kExpertTypes) {
            const int64_t K      = ggml_is_quantized(type) ? 32 * rand_int(rng, 1, 4) : odd_size(rng, 1, 77);
            const int64_t M      = odd_size(rng, 1, 37);
            const int64_t n_as   = rand_int(rng, 1, 6);
            const int64_t n_used = rand_int(rng, 1, 4);
            const int64_t n_tok  = odd_size(rng, 1, 7);
            for (int64_t n_b : {n_used, int64_t(1)}) {
                SCOPED_TRACE(std::string(ggml_type_name(type)) + " K " + std::to_string(K) + " M " +
                             std::to_string(M) + " experts " + std::to_string(n_as) + " used " +
                             std::to_string(n_used) + " b " + std::to_string(n_b) + " tokens " +
                             std::to_string(n_tok));
                Context       ctx;
                ggml_tensor * as  = ggml_new_tensor_3d(ctx, type, K, M, n_as);
                ggml_tensor * b   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, n_b, n_tok);
                ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n_used, n_tok);
                const Array   A   = fill_random(as, rng);
                const Array   B   = fill_random(b, rng);
                const auto    I   = fill_ids(ids, rng, 0, n_as - 1);
                ggml_tensor * out = ggml_mul_mat_id(ctx, as, b, ids);
                ASSERT_EQ(out->ne[0], M);
                ASSERT_EQ(out->ne[1], n_used);
                ASSERT_EQ(out->ne[2], n_tok);
                check_modes(ctx, out, mul_mat_id_ref(A, B, I, n_used), threshold(type));
            }
        }
    }
}

TEST(OpsMulMatId, ManyTokensPerExpert) {
    // More columns per expert than a block of rows, and rows past one block.
    std::mt19937  rng(7);
    Context       ctx;
    ggml_tensor * as  = ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 64, 45, 3);
    ggml_tensor * b   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 64, 2, 41);
    ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 41);
    const Array   A   = fill_random(as, rng);
    const Array   B   = fill_random(b, rng);
    const auto    I   = fill_ids(ids, rng, 0, 2);
    check_modes(ctx, ggml_mul_mat_id(ctx, as, b, ids), mul_mat_id_ref(A, B, I, 2), threshold(GGML_TYPE_Q8_0));
}

// Every other block type with a dot product: the K-quants, i-quants and
// ternary types against Q8_K, the others against Q8_0 or Q8_1 (NVFP4, Q1_0
// and Q2_0 by decoding both rows), on the per-column path (one token per
// expert) and the grouped one (20 tokens over 2 experts).
TEST(OpsMulMatId, EveryBlockType) {
    const ggml_type types[] = {GGML_TYPE_Q4_1,  GGML_TYPE_Q5_0,   GGML_TYPE_Q5_1,  GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
                               GGML_TYPE_Q4_K,  GGML_TYPE_Q5_K,   GGML_TYPE_Q6_K,  GGML_TYPE_IQ4_NL,
                               GGML_TYPE_IQ4_XS, GGML_TYPE_MXFP4, GGML_TYPE_NVFP4, GGML_TYPE_Q1_0,
                               GGML_TYPE_Q2_0,  GGML_TYPE_TQ1_0,  GGML_TYPE_TQ2_0};
    std::mt19937 rng(29);
    for (ggml_type type : types) {
        for (int64_t n_tok : {int64_t(1), int64_t(20)}) {
            SCOPED_TRACE(std::string(ggml_type_name(type)) + " tokens " + std::to_string(n_tok));
            const int64_t K = 256, M = 19, n_as = 2, n_used = 2;
            Context       ctx;
            ggml_tensor * as  = ggml_new_tensor_3d(ctx, type, K, M, n_as);
            ggml_tensor * b   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, n_used, n_tok);
            ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n_used, n_tok);
            const Array   A   = fill_random(as, rng);
            const Array   B   = fill_random(b, rng);
            const auto    I   = fill_ids(ids, rng, 0, n_as - 1);
            ggml_tensor * out = ggml_mul_mat_id(ctx, as, b, ids);
            check_modes(ctx, out, mul_mat_id_ref(A, B, I, n_used), threshold(type));
        }
    }
}

TEST(OpsMulMatId, ExpertWithMoreColumnsThanOneProduct) {
    // Expert 0 is chosen by every token's first slot: 300 columns, more than
    // one grouped product takes (GROUP_COLS in matmul_id.cpp), so its
    // columns go through two products, one of them partial; the other
    // experts get a few dozen columns each (matrix-vector path with
    // prepared columns, or the GEMM for float experts).
    std::mt19937 rng(19);
    for (ggml_type type : kExpertTypes) {
        SCOPED_TRACE(ggml_type_name(type));
        Context       ctx;
        const int64_t K = 64, M = 37, n_as = 4, n_used = 2, n_tok = 300;
        ggml_tensor * as  = ggml_new_tensor_3d(ctx, type, K, M, n_as);
        ggml_tensor * b   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, 1, n_tok);
        ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n_used, n_tok);
        const Array   A   = fill_random(as, rng);
        const Array   B   = fill_random(b, rng);
        std::vector<int32_t> I;
        for (int64_t t = 0; t < n_tok; ++t) {
            const int32_t second = int32_t(rand_int(rng, 1, n_as - 1));
            for (int32_t id : {int32_t(0), second}) {
                std::memcpy(static_cast<char *>(ids->data) + int64_t(I.size() % n_used) * ids->nb[0] + t * ids->nb[1],
                            &id, sizeof(id));
                I.push_back(id);
            }
        }
        check_modes(ctx, ggml_mul_mat_id(ctx, as, b, ids), mul_mat_id_ref(A, B, I, n_used), threshold(type));
    }
}

TEST(OpsMulMatId, NonContiguousBAndIds) {
    std::mt19937 rng(11);
    for (ggml_type type : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        SCOPED_TRACE(ggml_type_name(type));
        Context ctx;
        // b [K, n_used, n_tok] as a permutation of [K, n_tok, n_used]; ids
        // a view that skips a column of a wider tensor.
        const int64_t K = 33, M = 9, n_as = 4, n_used = 3, n_tok = 5;
        ggml_tensor * as     = ggml_new_tensor_3d(ctx, type, K, M, n_as);
        ggml_tensor * b_base = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, n_tok, n_used);
        ggml_tensor * b      = ggml_permute(ctx, b_base, 0, 2, 1, 3);
        ggml_tensor * ids_b  = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n_used + 1, n_tok);
        ggml_tensor * ids    = ggml_view_2d(ctx, ids_b, n_used, n_tok, ids_b->nb[1], sizeof(int32_t));
        const Array   A      = fill_random(as, rng);
        fill_random(b_base, rng);
        const Array B = read_tensor(b);
        const auto  I = fill_ids(ids, rng, 0, n_as - 1);
        check_modes(ctx, ggml_mul_mat_id(ctx, as, b, ids), mul_mat_id_ref(A, B, I, n_used), threshold(type));
    }
}

TEST(OpsMulMatId, F16ColumnsWithF16Experts) {
    std::mt19937  rng(13);
    Context       ctx;
    ggml_tensor * as  = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 31, 7, 3);
    ggml_tensor * b   = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 31, 2, 3);
    ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 2, 3);
    const Array   A   = fill_random(as, rng);
    const Array   B   = fill_random(b, rng);
    const auto    I   = fill_ids(ids, rng, 0, 2);
    check_modes(ctx, ggml_mul_mat_id(ctx, as, b, ids), mul_mat_id_ref(A, B, I, 2), 1e-10);
}

TEST(OpsMulMatIdDeathTest, Preconditions) {
    Context       ctx;
    ggml_tensor * as  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 16, 5, 3);
    ggml_tensor * b   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 16, 2, 4);
    ggml_tensor * ids = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 4, 4);
    ggml_tensor * idf = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 4, 4);
    ggml_tensor * b8  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 8, 2, 4);
    ggml_tensor * b3  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 16, 3, 4);
    ggml_tensor * id5 = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 4, 5);
    EXPECT_DEATH(ggml_mul_mat_id(ctx, as, b, idf), "ggml_mul_mat_id: ids .* must be i32");
    EXPECT_DEATH(ggml_mul_mat_id(ctx, as, b8, ids), "cannot be multiplied");
    EXPECT_DEATH(ggml_mul_mat_id(ctx, as, b3, ids), "cannot be broadcast");
    EXPECT_DEATH(ggml_mul_mat_id(ctx, as, b, id5), "one list of experts per token");
    EXPECT_DEATH(ggml_mul_mat_id(ctx, ggml_transpose(ctx, as), b, ids), "must not be transposed");
}
