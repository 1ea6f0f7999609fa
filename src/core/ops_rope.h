#pragma once

// The rope node builder shared by the forward constructors (ops_nn.cpp) and
// the backward ones (ops_backward.cpp).

#include "ggml.h"

namespace loom {

// Checks the arguments (messages name caller) and builds an op node (ROPE or
// ROPE_BACK) with ggml's op_params layout. sections: GGML_MROPE_SECTIONS
// values, read for the multi-section modes only (which require them).
ggml_tensor * rope_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
                        const int * sections, int mode, int n_ctx_orig, float freq_base, float freq_scale,
                        float ext_factor, float attn_factor, float beta_fast, float beta_slow, bool inplace,
                        ggml_op op, const char * caller);

} // namespace loom
