// The RPC server's rules for the convolution, pooling and resampling
// family: the shape rules of core/conv_fits.h, which the CPU's supports_op
// also applies, with the node's kernel-visible types kept to floats.

#include "validate.h"

#include "core/conv_fits.h"

namespace loom::rpc {

namespace {

bool is_float(const ggml_tensor * t) {
    return t == nullptr || t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16 || t->type == GGML_TYPE_BF16;
}

} // namespace

bool conv_family_rules(const ggml_tensor * n, std::string * why) {
    if (!is_float(n) || !is_float(n->src[0]) || !is_float(n->src[1]) || !is_float(n->src[2])) {
        *why = "the convolution family computes on F32, F16 and BF16 tensors";
        return false;
    }
    if (!conv_family_fits(n)) {
        *why = "the node's shape or parameters do not follow its sources";
        return false;
    }
    return true;
}

} // namespace loom::rpc
