// The SPIR-V of the compute shaders, as glslc wrote it at build time
// (-mfmt=num: comma-separated 32-bit words).

#include "shaders.h"

namespace loom::vk {

namespace {

const uint32_t k_binary[] = {
#include "binary.spv.inc"
};
const uint32_t k_unary[] = {
#include "unary.spv.inc"
};
const uint32_t k_glu[] = {
#include "glu.spv.inc"
};
const uint32_t k_norm[] = {
#include "norm.spv.inc"
};
const uint32_t k_softmax[] = {
#include "softmax.spv.inc"
};
const uint32_t k_rope[] = {
#include "rope.spv.inc"
};
const uint32_t k_get_rows[] = {
#include "get_rows.spv.inc"
};
const uint32_t k_set_rows[] = {
#include "set_rows.spv.inc"
};
const uint32_t k_mul_mat_vec[] = {
#include "mul_mat_vec.spv.inc"
};
const uint32_t k_mul_mat_tiled[] = {
#include "mul_mat_tiled.spv.inc"
};
const uint32_t k_check_indices[] = {
#include "check_indices.spv.inc"
};

} // namespace

ShaderCode shader_code(Shader s) {
    switch (s) {
        case Shader::binary: return {k_binary, sizeof(k_binary)};
        case Shader::unary: return {k_unary, sizeof(k_unary)};
        case Shader::glu: return {k_glu, sizeof(k_glu)};
        case Shader::norm: return {k_norm, sizeof(k_norm)};
        case Shader::softmax: return {k_softmax, sizeof(k_softmax)};
        case Shader::rope: return {k_rope, sizeof(k_rope)};
        case Shader::get_rows: return {k_get_rows, sizeof(k_get_rows)};
        case Shader::set_rows: return {k_set_rows, sizeof(k_set_rows)};
        case Shader::mul_mat_vec: return {k_mul_mat_vec, sizeof(k_mul_mat_vec)};
        case Shader::mul_mat_tiled: return {k_mul_mat_tiled, sizeof(k_mul_mat_tiled)};
        case Shader::check_indices: return {k_check_indices, sizeof(k_check_indices)};
        case Shader::count: break;
    }
    return {nullptr, 0};
}

const char * shader_name(Shader s) {
    switch (s) {
        case Shader::binary: return "binary";
        case Shader::unary: return "unary";
        case Shader::glu: return "glu";
        case Shader::norm: return "norm";
        case Shader::softmax: return "softmax";
        case Shader::rope: return "rope";
        case Shader::get_rows: return "get_rows";
        case Shader::set_rows: return "set_rows";
        case Shader::mul_mat_vec: return "mul_mat_vec";
        case Shader::mul_mat_tiled: return "mul_mat_tiled";
        case Shader::check_indices: return "check_indices";
        case Shader::count: break;
    }
    return "?";
}

} // namespace loom::vk
