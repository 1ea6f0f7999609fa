// The operators' rules (core/fits*.cpp, Note [Shape rules] in core/fits.h):
// every row of the op table has one (but NONE and the views, marked so), and
// for each family a node as its constructor builds it fits, while the same
// node with a wrong shape, a wrong type or bad op params does not, with a
// message that names the operator and the values.

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/fits.h"
#include "core/op_table.h"
#include "ggml-cpp.h"
#include "ggml.h"

namespace {

using loom::node_fits;

TEST(FitsTable, EveryOperatorThatComputesHasARule) {
    for (const loom::OpInfo & o : loom::k_ops) {
        SCOPED_TRACE(o.name);
        const bool computes_nothing = o.kind == loom::OpKind::none || o.kind == loom::OpKind::view;
        EXPECT_EQ(o.fits == nullptr, computes_nothing);
    }
    // The marked ones: NONE and the four views.
    int without = 0;
    for (const loom::OpInfo & o : loom::k_ops) {
        without += o.fits == nullptr;
    }
    EXPECT_EQ(without, 5);
}

TEST(FitsTable, NodesOfNoOperatorAndWithoutTheirSourcesAreRefused) {
    ggml_context_ptr ctx(ggml_init({ggml_tensor_overhead() * 8, nullptr, true}));
    ggml_tensor *    a = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, 4);
    ggml_tensor *    n = ggml_add(ctx.get(), a, a);
    std::string      why;
    ASSERT_TRUE(node_fits(n, &why)) << why;
    n->src[1] = nullptr;
    EXPECT_FALSE(node_fits(n, &why));
    EXPECT_EQ(why.rfind("ADD: source 1 missing", 0), 0u) << why;
    n->src[1] = a;
    n->src[2] = a;
    EXPECT_FALSE(node_fits(n, &why));
    EXPECT_NE(why.find("unexpected source 2"), std::string::npos) << why;
    n->src[2] = nullptr;
    n->op     = GGML_OP_COUNT;
    EXPECT_FALSE(node_fits(n, &why));
    EXPECT_FALSE(node_fits(n, nullptr)); // no message asked for
    // NONE and the views have no rule.
    EXPECT_TRUE(node_fits(a, &why));
    EXPECT_TRUE(node_fits(ggml_transpose(ctx.get(), ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, 2, 3)), &why));
}

// A node that fits, then the same node changed: each change must be refused
// with a message that starts with the operator's name and holds `text`.
struct Fits : ::testing::Test {
    ggml_context_ptr ctx{ggml_init({ggml_tensor_overhead() * 256, nullptr, true})};
    ggml_context *   c = ctx.get();

    ggml_tensor * f32(int64_t a, int64_t b = 1, int64_t d = 1, int64_t e = 1) {
        return ggml_new_tensor_4d(c, GGML_TYPE_F32, a, b, d, e);
    }
    ggml_tensor * i32(int64_t a, int64_t b = 1, int64_t d = 1) { return ggml_new_tensor_3d(c, GGML_TYPE_I32, a, b, d); }

    static void fits(const ggml_tensor * n) {
        std::string why;
        EXPECT_TRUE(node_fits(n, &why)) << ggml_op_desc(n) << ": " << why;
    }
    // Refused after change(n); n is restored afterwards.
    template <typename Change> static void refused(ggml_tensor * n, const char * op, const char * text, Change change) {
        ggml_tensor keep = *n;
        change(n);
        std::string why;
        EXPECT_FALSE(node_fits(n, &why)) << op << ": expected a refusal containing '" << text << "'";
        EXPECT_EQ(why.rfind(op, 0), 0u) << why;
        EXPECT_NE(why.find(text), std::string::npos) << why;
        *n = keep;
        fits(n);
    }
};

TEST_F(Fits, ElementWiseAndReductions) {
    ggml_tensor * a   = f32(8, 3, 2);
    ggml_tensor * add = ggml_add(c, a, f32(8, 1, 2));
    fits(add);
    refused(add, "ADD", "cannot be broadcast", [&](ggml_tensor * n) { n->src[1] = f32(3); });
    refused(add, "ADD", "the node's shape [8, 3, 1, 1]", [](ggml_tensor * n) { n->ne[2] = 1; });

    ggml_tensor * sqr = ggml_sqr(c, a);
    refused(sqr, "SQR", "must have the shape and type of src[0]", [](ggml_tensor * n) { n->type = GGML_TYPE_F16; });

    ggml_tensor * rows = ggml_sum_rows(c, a);
    refused(rows, "SUM_ROWS", "which give [1, 3, 2, 1]", [](ggml_tensor * n) { n->ne[0] = 2; });
    ggml_tensor * mean = ggml_mean(c, a);
    refused(mean, "MEAN", "must be f32", [](ggml_tensor * n) { n->type = GGML_TYPE_F16; });
    ggml_tensor * am = ggml_argmax(c, f32(8, 3));
    refused(am, "ARGMAX", "must be a matrix", [&](ggml_tensor * n) { n->src[0] = a; });

    ggml_tensor * gn = ggml_group_norm(c, a, 2, 1e-6f);
    refused(gn, "GROUP_NORM", "n_groups = 0", [](ggml_tensor * n) { n->op_params[0] = 0; });

    ggml_tensor * silu = ggml_silu(c, a);
    refused(silu, "UNARY (SILU)", "must have the shape and type", [](ggml_tensor * n) { n->ne[0] = 4; });
    refused(silu, "UNARY", "unknown unary op 99", [](ggml_tensor * n) { n->op_params[0] = 99; });
    ggml_tensor * glu = ggml_swiglu(c, a);
    refused(glu, "GLU (SWIGLU)", "half as long", [](ggml_tensor * n) { n->ne[0] = 8; });
    refused(glu, "GLU", "unknown gated linear unit -1", [](ggml_tensor * n) { n->op_params[0] = -1; });
}

TEST_F(Fits, CopiesRowsAndConcatenation) {
    ggml_tensor * a   = f32(8, 3, 2);
    ggml_tensor * cpy = ggml_cpy(c, a, ggml_new_tensor_1d(c, GGML_TYPE_F16, 48));
    fits(cpy);
    refused(cpy, "CPY", "differ in element count", [&](ggml_tensor * n) { n->src[0] = f32(8); });
    refused(cpy, "CPY", "must have the shape and type of src[1]", [](ggml_tensor * n) { n->type = GGML_TYPE_F32; });

    ggml_tensor * cat = ggml_concat(c, a, f32(8, 3, 5), 2);
    fits(cat);
    refused(cat, "CONCAT", "dim 4 out of range", [](ggml_tensor * n) { n->op_params[0] = 4; });
    refused(cat, "CONCAT", "which give [8, 3, 7, 1]", [](ggml_tensor * n) { n->ne[2] = 8; });

    ggml_tensor * gr = ggml_get_rows(c, f32(8, 10), i32(4));
    fits(gr);
    refused(gr, "GET_ROWS", "must be i32", [&](ggml_tensor * n) { n->src[1] = f32(4); });
    refused(gr, "GET_ROWS", "must be f32 or of the type of src[0]", [](ggml_tensor * n) { n->type = GGML_TYPE_F16; });

    ggml_tensor * sr = ggml_set_rows(c, f32(8, 10), f32(8, 4), i32(4));
    fits(sr);
    refused(sr, "SET_ROWS", "do not match rows", [&](ggml_tensor * n) { n->src[1] = i32(5); });
    refused(sr, "SET_ROWS", "must be f32 or f16", [&](ggml_tensor * n) { n->src[0] = i32(8, 4); });
}

TEST_F(Fits, ProductsAttentionAndRope) {
    ggml_tensor * mm = ggml_mul_mat(c, f32(8, 5, 2), f32(8, 3, 4));
    fits(mm);
    refused(mm, "MUL_MAT", "cannot be multiplied", [&](ggml_tensor * n) { n->src[1] = f32(7, 3, 4); });
    refused(mm, "MUL_MAT", "must be f32", [](ggml_tensor * n) { n->type = GGML_TYPE_F16; });

    ggml_tensor * sm = ggml_soft_max_ext(c, f32(16, 3, 4), f32(16, 3), 0.5f, 0.0f);
    fits(sm);
    refused(sm, "SOFT_MAX", "mask (src[1])", [&](ggml_tensor * n) { n->src[1] = f32(15, 3); });
    refused(sm, "SOFT_MAX", "max_bias 8 needs a mask", [](ggml_tensor * n) {
        n->src[1]           = nullptr;
        const float bias = 8.0f;
        std::memcpy(&n->op_params[1], &bias, sizeof(bias));
    });

    ggml_tensor * rope = ggml_rope_ext(c, f32(16, 2, 5), i32(5), nullptr, 8, GGML_ROPE_TYPE_NEOX, 0, 1e4f, 1.0f, 0.0f,
                                       1.0f, 32.0f, 1.0f);
    fits(rope);
    refused(rope, "ROPE", "rope mode 3", [](ggml_tensor * n) { n->op_params[2] = 3; });
    refused(rope, "ROPE", "n_dims 9", [](ggml_tensor * n) { n->op_params[1] = 9; });
    refused(rope, "ROPE", "positions", [&](ggml_tensor * n) { n->src[1] = i32(4); });

    ggml_tensor * fa = ggml_flash_attn_ext(c, f32(8, 3, 4), f32(8, 16, 2), f32(8, 16, 2), nullptr, 0.5f, 0.0f, 0.0f);
    fits(fa);
    refused(fa, "FLASH_ATTN_EXT", "differ in length or heads", [&](ggml_tensor * n) { n->src[2] = f32(8, 15, 2); });
    refused(fa, "FLASH_ATTN_EXT", "q (src[0])", [&](ggml_tensor * n) {
        n->src[0] = ggml_new_tensor_3d(c, GGML_TYPE_F16, 8, 3, 4);
    });

    ggml_tensor * mmid = ggml_mul_mat_id(c, f32(8, 5, 3), f32(8, 2, 4), ggml_new_tensor_2d(c, GGML_TYPE_I32, 2, 4));
    fits(mmid);
    refused(mmid, "MUL_MAT_ID", "op_params[3] = 7 is not a precision", [](ggml_tensor * n) { n->op_params[3] = 7; });
    refused(mmid, "MUL_MAT_ID", "not set by the constructor", [](ggml_tensor * n) { n->op_params[9] = 1; });
}

TEST_F(Fits, FillsAndWritesIntoViews) {
    ggml_tensor * a   = f32(10, 6, 3);
    ggml_tensor * set = ggml_set(c, a, f32(4, 3), a->nb[1], a->nb[2], a->nb[3], 8);
    fits(set);
    refused(set, "SET", "lies inside", [](ggml_tensor * n) { n->op_params[3] = 1 << 20; });
    refused(set, "SET", "must have the type of src[0]", [&](ggml_tensor * n) {
        n->src[1] = ggml_new_tensor_2d(c, GGML_TYPE_F16, 4, 3);
    });

    ggml_tensor * pad = ggml_pad_ext(c, a, 1, 2, 0, 1, 0, 0, 0, 0);
    fits(pad);
    refused(pad, "PAD", "leaves -2 elements", [](ggml_tensor * n) { n->op_params[0] = -14; });

    ggml_tensor * ar = ggml_arange(c, 0.0f, 5.0f, 0.5f);
    fits(ar);
    refused(ar, "ARANGE", "which give [10, 1, 1, 1]", [](ggml_tensor * n) { n->ne[0] = 11; });
    refused(ar, "ARANGE", "must be f32", [](ggml_tensor * n) { n->type = GGML_TYPE_F16; });

    ggml_tensor * roll = ggml_roll(c, a, 3, -2, 1, 0);
    refused(roll, "ROLL", "shift 10 of dimension 0", [](ggml_tensor * n) { n->op_params[0] = 10; });
    ggml_tensor * tri = ggml_tri(c, f32(4, 4), GGML_TRI_TYPE_UPPER);
    refused(tri, "TRI", "unknown triangle type 9", [](ggml_tensor * n) { n->op_params[0] = 9; });
}

TEST_F(Fits, Convolutions) {
    ggml_tensor * k      = f32(3, 3, 2, 4);
    ggml_tensor * img    = f32(9, 8, 2, 1);
    ggml_tensor * im2col = ggml_im2col(c, k, img, 1, 1, 0, 0, 1, 1, true, GGML_TYPE_F16);
    fits(im2col);
    refused(im2col, "IM2COL", "stride 0 and dilation 1 along dim 1", [](ggml_tensor * n) { n->op_params[1] = 0; });
    refused(im2col, "IM2COL", "differ in channels", [&](ggml_tensor * n) { n->src[1] = f32(9, 8, 3, 1); });
    refused(im2col, "IM2COL", "patches of type q8_0", [](ggml_tensor * n) { n->type = GGML_TYPE_Q8_0; });

    ggml_tensor * pool = ggml_pool_1d(c, f32(16, 2), GGML_OP_POOL_MAX, 2, 2, 0);
    fits(pool);
    refused(pool, "POOL_1D", "do not follow its sources", [](ggml_tensor * n) { n->ne[0] = 9; });
    refused(pool, "POOL_1D", "pool op 5", [](ggml_tensor * n) { n->op_params[0] = 5; });

    ggml_tensor * up = ggml_upscale(c, f32(4, 4, 2), 2, GGML_SCALE_MODE_NEAREST);
    fits(up);
    refused(up, "UPSCALE", "scale mode 9", [](ggml_tensor * n) { n->op_params[0] = 9; });
    refused(up, "UPSCALE", "must be f32", [&](ggml_tensor * n) {
        n->src[0] = ggml_new_tensor_3d(c, GGML_TYPE_F16, 4, 4, 2);
    });
}

TEST_F(Fits, RecurrencesAndDeepSeek) {
    ggml_tensor * conv = ggml_ssm_conv(c, f32(7, 6, 2), f32(4, 6));
    fits(conv);
    refused(conv, "SSM_CONV", "must have 6 channels", [&](ggml_tensor * n) { n->src[0] = f32(7, 5, 2); });
    refused(conv, "SSM_CONV", "must be f32", [](ggml_tensor * n) { n->type = GGML_TYPE_F16; });
    refused(conv, "SSM_CONV", "op_params[5] = 7", [](ggml_tensor * n) { n->op_params[5] = 7; });

    ggml_tensor * state = f32(4 * 4 * 2, 2);
    ggml_tensor * wkv7  = ggml_rwkv_wkv7(c, f32(4, 2, 6), f32(4, 2, 6), f32(4, 2, 6), f32(4, 2, 6), f32(4, 2, 6),
                                         f32(4, 2, 6), state);
    fits(wkv7);
    refused(wkv7, "RWKV_WKV7", "must be [4, 2, 6]", [&](ggml_tensor * n) { n->src[4] = f32(4, 2, 5); });
    refused(wkv7, "RWKV_WKV7", "tokens do not split", [&](ggml_tensor * n) { n->src[6] = f32(4 * 4 * 2, 4); });

    ggml_tensor * comb = ggml_dsv4_hc_comb(c, f32(24, 3), f32(3), f32(24), 1e-6f, 2);
    fits(comb);
    refused(comb, "DSV4_HC_COMB", "n_iter 0", [](ggml_tensor * n) { n->op_params[1] = 0; });
    refused(comb, "DSV4_HC_COMB", "hc = 4", [&](ggml_tensor * n) { n->src[0] = f32(15, 3); });
}

TEST_F(Fits, GradientsLossAndOptimizer) {
    ggml_tensor * a    = f32(10, 6);
    ggml_tensor * silu = ggml_silu_back(c, a, a);
    fits(silu);
    refused(silu, "SILU_BACK", "differ in shape", [&](ggml_tensor * n) { n->src[1] = f32(10, 5); });
    refused(silu, "SILU_BACK", "both f32 or both f16", [&](ggml_tensor * n) {
        n->src[1] = ggml_new_tensor_2d(c, GGML_TYPE_F16, 10, 6);
    });

    ggml_tensor * w = f32(10, 6);
    ggml_set_param(w);
    ggml_tensor * sgd = ggml_opt_step_sgd(c, w, a, f32(2));
    fits(sgd);
    refused(sgd, "OPT_STEP_SGD", "2 f32 values", [&](ggml_tensor * n) { n->src[2] = f32(3); });

    ggml_tensor * pool = ggml_pool_2d_back(c, f32(5, 4, 3, 2), f32(9, 7, 3, 2), GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, 0);
    fits(pool);
    refused(pool, "POOL_2D_BACK", "unknown pool op 7", [](ggml_tensor * n) { n->op_params[0] = 7; });
    refused(pool, "POOL_2D_BACK", "at most 65536", [](ggml_tensor * n) { n->op_params[3] = 1 << 20; });
}

TEST_F(Fits, CustomOperators) {
    auto          fn = [](ggml_tensor *, const ggml_tensor *, int, int, void *) {};
    ggml_tensor * n  = ggml_map_custom1(c, f32(4), fn, 1, nullptr);
    fits(n);
    refused(n, "MAP_CUSTOM1", "n_tasks = 0", [](ggml_tensor * t) {
        const int zero = 0;
        std::memcpy(reinterpret_cast<char *>(t->op_params) + sizeof(void *), &zero, sizeof(zero));
    });
    refused(n, "MAP_CUSTOM1", "must have the shape and type of src[0]", [](ggml_tensor * t) { t->ne[0] = 5; });
}

} // namespace
