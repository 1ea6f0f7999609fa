#pragma once

// The embedded compute shaders (src/backends/vulkan/shaders/*.comp) and the
// parameter block they all read from binding 0 (shaders/common.glsl).

#include <cstddef>
#include <cstdint>

namespace loom::vk {

enum class Shader {
    binary, unary, glu, norm, softmax, rope, get_rows, set_rows, mul_mat_vec, mul_mat_tiled, check_indices, count
};

struct ShaderCode {
    const uint32_t * words;
    size_t           bytes;
};

ShaderCode   shader_code(Shader s);
const char * shader_name(Shader s);

// Mirrors ParamBlock in shaders/common.glsl (std430: 4-byte scalars, no padding).
struct Params {
    uint32_t ne[16]; // [4 * slot + dim], slots src0, src1, src2, dst
    uint32_t nb[16];
    uint32_t off[4];
    uint32_t ty[4];
    uint32_t op;
    uint32_t n;
    uint32_t ip[6];
    float    fp[8];
};
static_assert(sizeof(Params) == 56 * 4);

// One index source in the table of shaders/check_indices.comp (its word
// offsets mirror these fields).
struct IndexEntry {
    uint32_t ne[4];
    uint32_t nb[4];
    uint32_t off;     // byte offset of the source in slot 0
    uint32_t type;    // GGML_TYPE_I32 or GGML_TYPE_I64
    uint32_t limit;   // indices must lie in [0, limit)
    uint32_t first;   // the dispatch's invocation of its element 0
    uint32_t count;   // its elements
    uint32_t zero_at; // the group counts to zero on a bad index: word offset in slot 3
    uint32_t zero_n;  //   and number of words
    // Written by the shader: 0 and UINT32_MAX from the host; bad = 1 and
    // bad_index = the first position (linear, i0 fastest) of an index
    // outside [0, limit).
    uint32_t bad;
    uint32_t bad_index;
    uint32_t pad;
};
static_assert(sizeof(IndexEntry) == 18 * 4);

// Bindings 1..4 of every shader: src0, src1, src2, dst.
constexpr int k_tensor_slots = 4;

} // namespace loom::vk
