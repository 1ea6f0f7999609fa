// The RPC server's shape rules (backends/rpc/validate.cpp) for rope: nodes
// as ggml_rope_ext, ggml_rope_multi and ggml_rope_set_offset build them
// pass; op params a client could forge (a mode the CPU does not have,
// sections past the row, an odd or too large offset, positions that do not
// match the mode) are refused with the reason, without computing anything.

#include <gtest/gtest.h>

#include <string>

#include "backends/rpc/validate.h"
#include "ggml-cpp.h"
#include "ggml.h"

namespace {

struct Rules : ::testing::Test {
    ggml_context_ptr ctx{ggml_init({ggml_tensor_overhead() * 64, nullptr, true})};
    std::string      why;

    bool ok(const ggml_tensor * n) {
        why.clear();
        return loom::rpc::check_node(n, &why);
    }
    ggml_tensor * rows(int64_t head, int64_t n_tok) {
        return ggml_new_tensor_3d(ctx.get(), GGML_TYPE_F32, head, 3, n_tok);
    }
    ggml_tensor * positions(int64_t n) { return ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I32, n); }
};

TEST_F(Rules, RopePlainAndMultiSectionModesPass) {
    ggml_context * c = ctx.get();
    int sec[4] = {4, 2, 2, 0};
    ggml_tensor * plain  = ggml_rope_ext(c, rows(16, 5), positions(5), nullptr, 8, GGML_ROPE_TYPE_NEOX, 0, 10000.0f,
                                         1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    ggml_tensor * mrope  = ggml_rope_multi(c, rows(18, 5), positions(20), nullptr, 16, sec, GGML_ROPE_TYPE_MROPE, 0,
                                           10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    ggml_tensor * imrope = ggml_rope_set_offset(ggml_rope_multi(c, rows(20, 5), positions(20), nullptr, 16, sec,
                                                                GGML_ROPE_TYPE_IMROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                                                                32.0f, 1.0f),
                                                2);
    int vsec[4] = {2, 2, 0, 0};
    ggml_tensor * vision = ggml_rope_multi(c, rows(8, 5), positions(20), nullptr, 4, vsec, GGML_ROPE_TYPE_VISION, 0,
                                           10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    for (ggml_tensor * n : {plain, mrope, imrope, vision}) {
        EXPECT_TRUE(ok(n)) << ggml_op_desc(n) << " mode " << n->op_params[2] << ": " << why;
    }
}

TEST_F(Rules, RopeForgedParamsAreRefused) {
    int           sec[4] = {4, 2, 2, 0};
    ggml_tensor * n      = ggml_rope_multi(ctx.get(), rows(18, 5), positions(20), nullptr, 16, sec,
                                           GGML_ROPE_TYPE_IMROPE, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    ASSERT_TRUE(ok(n)) << why;
    auto refused = [&](int index, int32_t value, const char * reason) {
        const int32_t keep  = n->op_params[index];
        n->op_params[index] = value;
        EXPECT_FALSE(ok(n)) << "op_params[" << index << "] = " << value;
        EXPECT_NE(why.find(reason), std::string::npos) << why;
        n->op_params[index] = keep;
        EXPECT_TRUE(ok(n)) << why;
    };
    refused(2, 4, "rope mode");                   // GLM's mode, not computed here
    refused(2, -1, "rope mode");
    refused(11, 16, "rope sections");             // 16 + 2 + 2 > 18 values per row
    refused(12, -3, "rope sections");
    refused(11, 0x7fffffff, "rope sections");     // no wrap in the sum
    refused(15, 1, "offset");                     // odd
    refused(15, 4, "offset");                     // 4 + 16 > 18
    refused(15, -2, "offset");
    refused(1, 0x7ffffffe, "n_dims");             // pairs past the row
    refused(2, GGML_ROPE_TYPE_NEOX, "positions"); // one position per row, but 20 given
}

} // namespace
