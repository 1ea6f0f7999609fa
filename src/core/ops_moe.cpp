// Op constructor of the mixture-of-experts product; its rule is
// fits_mul_mat_id (fits_nn.cpp, Note [Shape rules] in fits.h).

#include "common.h"
#include "context.h"
#include "fits.h"

using namespace loom;

extern "C" {

ggml_tensor * ggml_mul_mat_id(ggml_context * ctx, ggml_tensor * as, ggml_tensor * b, ggml_tensor * ids) {
    const int64_t ne[4] = {as->ne[1], ids->ne[0], b->ne[2], 1};
    ggml_tensor * r     = new_tensor_impl(ctx, GGML_TYPE_F32, 4, ne, nullptr, 0, __func__);
    r->op               = GGML_OP_MUL_MAT_ID;
    r->src[0]           = as;
    r->src[1]           = b;
    r->src[2]           = ids;
    require_fits(r, __func__);
    return r;
}

} // extern "C"
