// Op constructor of the mixture-of-experts product.

#include "common.h"
#include "context.h"

using namespace loom;

extern "C" {

ggml_tensor * ggml_mul_mat_id(ggml_context * ctx, ggml_tensor * as, ggml_tensor * b, ggml_tensor * ids) {
    LOOM_REQUIRE(!ggml_is_transposed(as), "experts %s must not be transposed", describe(as).text);
    LOOM_REQUIRE(ids->type == GGML_TYPE_I32, "ids %s must be i32", describe(ids).text);
    LOOM_REQUIRE(as->ne[3] == 1, "experts %s must be 3-d (one matrix per expert)", describe(as).text);
    LOOM_REQUIRE(b->ne[3] == 1, "b %s must be 3-d", describe(b).text);
    LOOM_REQUIRE(ids->ne[2] == 1 && ids->ne[3] == 1, "ids %s must be 2-d", describe(ids).text);
    LOOM_REQUIRE(ids->ne[1] == b->ne[2], "ids %s must hold one list of experts per token of b %s (ne1 == b's ne2)",
                 describe(ids).text, describe(b).text);
    LOOM_REQUIRE(as->ne[0] == b->ne[0], "experts %s and b %s cannot be multiplied (ne0 must match)", describe(as).text,
                 describe(b).text);
    LOOM_REQUIRE(b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0,
                 "b %s cannot be broadcast to the %lld experts used per token of ids %s", describe(b).text,
                 (long long) ids->ne[0], describe(ids).text);
    const int64_t ne[4] = {as->ne[1], ids->ne[0], b->ne[2], 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_MUL_MAT_ID;
    r->src[0]           = as;
    r->src[1]           = b;
    r->src[2]           = ids;
    return r;
}

} // extern "C"
